"""Whether pieces with trees of their own shorten the three-tier allreduce's ramps under ``sync``.

Run: ``python benchmarks/bench_tier3_tree_mix.py [--only LABEL] [--skip LABEL] [--min-gpus N]
[--max-gpus N]`` (default: the rail Clos rows of ``bench_clusters.py`` at 2,000-4,400 GPUs, 1 GiB,
``fabric_copy = false``). Per fabric, the run's trees at their pieces and shift of least ``sync``
price (*A*: :func:`collsynth.solvers.packing.allreduce_depth.at_sync_depths`, as
``bench_tier3_gap.py`` prices them; one listed tree a root, moved by the box shifts) against:

- *B*: the same root's tree with every crossing exported by the root itself (root, its rail
  leaf, a spine, the destination's leaf, the destination box's GPU on the root's rail: the
  heavy NIC hop at depth 0 and 6 depths a half where A relays through one GPU per group of
  boxes, heavy at depth 4 and 8 depths a half), each box spreading inside after its arrival;
  the same shifts; verified (:func:`collsynth.tens.pipelined_allreduce.verify`) and priced at
  its own pieces and shift of least ``sync`` price;
- *A + B*: the piece-size linear program (Zhao et al., "Efficient Direct-Connect Topologies for
  Collective Communications", NSDI 2025, Section 3.2: per step the largest load over bandwidth)
  over both families at once, each its own pipeline (A's pieces at A's shift, starting ``e``
  steps late, B's slots ``P + 2 e`` from the first step), every slot's size free: a relaxation
  of any split of the message or of the pieces between the two tree sets (a what-if, not a
  schedule), with its busy steps' alphas added (steps where a slot of nonzero size is active),
  at A's pieces less 20 and 10, at them and 10 more, A starting 1-4 steps late (the least).

Measured: README, "Pieces with trees of their own on the three-tier fabrics".
"""

from __future__ import annotations

import os
import time

import numpy as np
from cluster_rows import timed_row
from fresh_process import cell
from markdown_table import table

M = 1 << 30
ROW_TIMEOUT_S = 900
LATE = (1, 2, 3, 4)  # steps A's pipeline starts after B's in the mixed program


def _row(args) -> dict:
    label, generator, params, timeout = args
    return timed_row({"fabric": label, "stage": "instance"}, lambda out: _measure(out, generator, params), timeout)


def _measure(out: dict, generator: str, params: dict) -> None:
    from bench_tier3_gap import verified_trees

    from collsynth.solvers.packing.allreduce_depth import at_sync_depths
    from collsynth.tens import pipelined_allreduce as pa

    t = time.perf_counter()
    inst, a = verified_trees(out, generator, params)
    price = pa.price_sync(a, inst)
    out.update(a_ms=1e3 * price.total_s, a_steps=price.steps, a_pieces=a.pieces[0], stage="tree B")
    b = root_exports(a, inst)
    if isinstance(b, str):
        out["stopped"] = b
        return
    out["b_verified"] = pa.verify(b, inst) is None
    if out["b_verified"]:
        b = at_sync_depths(b, inst)
        p = pa.price_sync(b, inst)
        out.update(b_verified=pa.verify(b, inst) is None, b_ms=1e3 * p.total_s, b_steps=p.steps, b_pieces=b.pieces[0])
    if not out["b_verified"]:
        return
    out["stage"] = "mixed program"
    fam = _families(inst, a, b)
    out["sweep"] = [(Q, _least(fam, [("A", o) for o in range(Q)])[1], _mixed(fam, Q))
                    for Q in (a.pieces[0] - 20, a.pieces[0] - 10, a.pieces[0], a.pieces[0] + 10) if Q > 0]
    out["stage"] = "bound programs"
    out["bound_programs"] = _transit_programs(inst)
    out.update(seconds=time.perf_counter() - t, load=os.getloadavg()[0])


def _mixed(fam: dict, Q: int) -> tuple:
    """``(late, T_B, T_B + alphas)`` of the mixed program (module doc) at ``Q`` of A's pieces,
    A's pipeline ``late`` steps after B's, the least total over :data:`LATE`."""
    tried = []
    for late in LATE:
        slots = [("A", o + late) for o in range(Q)] + [("B", o) for o in range(Q + 2 * late)]
        tried.append((late, *_least(fam, slots)))
    return min(tried, key=lambda r: r[2])


def root_exports(f, inst):
    """The allreduce ``f`` (one listed tree a root, ``k = 1``, both halves the same tree) with
    that tree rebuilt as *B* (module doc), or why not."""
    from dataclasses import replace

    from collsynth.tens.pipelined_allreduce import PipelinedAllreduce

    ag = f.allgather
    if len(ag.root) != 1 or ag.k != 1 or ag.chunks_per_root != 1 or len(f.reduce_scatter.root) != 1:
        return "not one listed tree a root"
    hops = _hops(inst, int(ag.root[0]))
    if isinstance(hops, str):
        return hops
    src, dst, before = map(np.asarray, zip(*hops))
    tree = replace(ag, ptr=np.array([0, len(src)]), src=src, dst=dst, before=before, cuts=None)
    return PipelinedAllreduce(replace(tree, collective="reduce_scatter"), tree)


def _hops(inst, root: int):
    """Tree *B*'s hops ``(src, dst, steps below the root)`` from ``root``, or why not."""
    from collsynth.tens.bounds.injections import box_parts

    got = box_parts(inst)
    if isinstance(got, str):
        return got
    part, k = got
    topo, la = inst.topology, inst.topology.link_arrays
    switch = np.zeros(topo.size, bool)
    switch[list(topo.switches)] = True
    out = {v: la.dst[la.src == v] for v in range(topo.size)}
    into = {v: la.src[la.dst == v].tolist() for v in range(topo.size)}
    box_switch = {int(part[v]): v for v in np.flatnonzero(switch & (part >= 0))}
    gpus = {p: sorted(int(v) for v in np.flatnonzero((part == p) & ~switch)) for p in range(k)}
    leaf = {g: [int(v) for v in out[g] if part[v] < 0] for p in gpus for g in gpus[p]}
    rank = gpus[part[root]].index(root)
    mine = leaf[root][0]
    hops = _spread(gpus[part[root]], root, box_switch[part[root]], 0)
    for i, p in enumerate(sorted(set(gpus) - {int(part[root])})):
        dest = gpus[p][rank]
        there = leaf[dest][0]
        path = [root] + _fabric_path(mine, there, part, out, into, i) + [dest]
        hops += [(u, v, d) for d, (u, v) in enumerate(zip(path[:-1], path[1:]))]
        hops += _spread(gpus[p], dest, box_switch[p], len(path) - 1)
    return hops


def _fabric_path(a: int, b: int, part: np.ndarray, out: dict, into: dict, turn: int) -> list:
    """A shortest path from switch ``a`` to switch ``b`` over switches in no box (``out``,
    ``into``: each node's heads and tails), taking at each hop the ``turn``-th (mod their count)
    of the neighbours one hop nearer ``b`` (spreading successive destinations' routes)."""
    dist, frontier = {b: 0}, [b]
    while frontier and a not in dist:
        nxt = []
        for v in frontier:
            for u in into.get(v, []):
                if part[u] < 0 and u not in dist:
                    dist[u] = dist[v] + 1
                    nxt.append(u)
        frontier = nxt
    path = [a]
    while path[-1] != b:
        near = sorted(v for v in out[path[-1]].tolist() if dist.get(v, -1) == dist[path[-1]] - 1)
        path.append(near[turn % len(near)])
    return path


def _spread(box: list, first: int, sigma: int, at: int) -> list:
    """The hops spreading a piece from ``first`` to the rest of its ``box`` through the box
    switch ``sigma`` (one arrival per forward), starting ``at`` steps below the root."""
    rest = [g for g in box if g != first]
    return [(first, sigma, at)] * len(rest) + [(sigma, g, at + 1) for g in rest]


def _families(inst, a, b) -> dict:
    """Per family, ``(steps, cost)``: each row's step for the slot starting at 0 (reduce-scatter
    depth ``d`` of ``D`` at step ``D - d``, allgather depth ``d`` at ``D + 1 + d``: the pipeline
    rule at the least shift) and its seconds of load per link for one whole chunk."""
    from collsynth.tens import allreduce_overlap as ao

    la, fam = inst.topology.link_arrays, {}
    for name, f in (("A", a), ("B", b)):
        steps, costs = [], []
        for half, first in ((f.reduce_scatter, True), (f.allgather, False)):
            group, used, loads, scale, (depths, alpha) = ao._depth_loads(half, la, inst.collective.chunk_bytes)
            full = np.zeros((len(depths), len(la)))
            full[:, used] = loads * (scale[used] / la.bandwidth[used])[None, :]
            D = int(depths.max()) + 1
            steps.append(D - depths if first else D + 1 + depths)
            costs.append((full, alpha))
        fam[name] = (np.concatenate(steps), np.vstack([c for c, _ in costs]), np.concatenate([al for _, al in costs]))
    return fam


def _least(fam: dict, slots: list) -> tuple[float, float]:
    """``(T_B, T_B + alphas)`` of the piece-size program over ``slots`` (``(family, first step)``;
    module doc): ``min sum_t z_t``, ``z_t >= `` each link's load in step ``t``, the slots' sizes
    summing to a chunk; the alphas are the busy steps' largest."""
    from scipy import sparse
    from scipy.optimize import linprog

    cols = np.flatnonzero(np.vstack([c for _, c, _ in fam.values()]).max(axis=0) > 0)
    T, J, n = max(o + fam[f][0].max() for f, o in slots) + 1, len(cols), len(slots)
    r, c, v = [], [], []
    for i, (f, o) in enumerate(slots):
        steps, cost, _ = fam[f]
        rows, js = np.nonzero(cost[:, cols])
        r += ((o + steps[rows]) * J + js).tolist()
        c += [i] * len(rows)
        v += cost[:, cols][rows, js].tolist()
    A = sparse.hstack([sparse.coo_matrix((v, (r, c)), shape=(T * J, n)),
                       -sparse.kron(sparse.identity(T), np.ones((J, 1)))]).tocsr()
    res = linprog(np.r_[np.zeros(n), np.ones(T)], A_ub=A, b_ub=np.zeros(T * J),
                  A_eq=np.r_[np.ones(n), np.zeros(T)][None], b_eq=[1.0], bounds=[(0, None)] * (n + T), method="highs")
    alpha = np.zeros(T)
    for i, (f, o) in enumerate(slots):
        if res.x[i] > 1e-9:
            np.maximum.at(alpha, o + fam[f][0], fam[f][2])
    return float(res.fun), float(res.fun + alpha.sum())


def _transit_programs(inst) -> dict:
    """Per variant of the box-stage bound's program (:mod:`collsynth.tens.bounds.box_stages`),
    ``(N, ms)``: the least ``N alpha_n + LP(N)`` over ``N`` in :data:`STEPS`: as it stands;
    with the far imports late (:func:`_two_cases`); with the box switch forwarding a step later
    (:func:`_forwarding`, a mixed-integer program: at the first's ``N`` and 5 either side);
    with every import arriving 3 steps after it left (not a bound: imports into the first box's
    own group of boxes take one step)."""
    from collsynth.tens.bounds import box_stages as bs

    k, C, c, E, U, G, H, alpha_n = bs.stage_numbers(inst)
    g, box_alpha = _group_size(inst), float(inst.topology.link_arrays.alpha.min()) * E / M
    got = {}
    for name in ("as it stands", "far imports late", "forwarding", "every import late"):
        best = None
        near = got["as it stands"][0] if got else 0
        for N in (near - 5, near, near + 5) if name == "forwarding" else STEPS:
            lp = _program_with_cases(N)
            bs._capacities_and_causality(lp, N, U / E, G / E, H / E)
            if name == "far imports late":
                _two_cases(lp, N, k, C, c, g)
            elif name == "forwarding":
                _forwarding(lp, N, k, C, c, G / E, H / E)
            else:
                bs._coverage(lp, N, k, C, c)
            if name != "far imports late":
                lp.add(lp.upto("muB", N - 1))  # no byte of the second case but in ``_two_cases``
            if name == "every import late":
                for j in range(N):
                    lp.add(lp.upto("Qe", j) + lp.upto("Qd", j - 3, -1))
            value = 1e3 * (_solved(lp, box_alpha if name == "forwarding" else 0.0) * M / E + N * alpha_n)
            best = (N, value) if best is None or value < best[1] else best
        got[name] = best
    return got


STEPS = tuple(range(30, 101, 5))  # the NIC steps the bound's variants are solved at


def _group_size(inst) -> int:
    """The most boxes in a group: boxes joined by sharing a switch in no box next to their GPUs
    (a delivery between groups crosses at least three switches: 3 steps)."""
    import networkx as nx

    from collsynth.tens.bounds.injections import box_parts

    part, k = box_parts(inst)
    la = inst.topology.link_arrays
    edge = (part[la.src] >= 0) & (part[la.dst] < 0)
    graph = nx.Graph()
    graph.add_nodes_from(range(k))
    graph.add_edges_from((int(part[u]), -1 - int(v)) for u, v in zip(la.src[edge], la.dst[edge]))
    return max(sum(1 for v in comp if v >= 0) for comp in nx.connected_components(graph))


def _program_with_cases(N: int):
    """The box-stage program's variables (:class:`collsynth.tens.bounds.box_stages._Program`)
    with ``muB`` (the byte positions of :func:`_two_cases`' second case) and, per quiet group,
    those of :func:`_forwarding`."""
    from collsynth.tens.bounds.box_stages import _Program

    class WithCases(_Program):
        FORWARD = ("gL", "gR", "qL", "qR", "hF", "hR", "qF", "qS", "b", "uN", "vN")
        NAMES = _Program.NAMES + ("muB",) + FORWARD
        GROUPS = _Program.GROUPS + FORWARD

    return WithCases(N)


def _two_cases(lp, N: int, k: int, C: int, c: int, g: int) -> None:
    """Rows d-f of the box-stage argument, each byte position in one of two cases at ``d*``
    (the delivery after which a box ``x`` first knows every input): (A, ``mu``) no group of
    boxes but ``x``'s knows every input, so each of the ``k - g`` or more boxes of the other
    groups lacks an input no delivery into its group up to ``d*`` carried, which a delivery
    between groups leaving from ``d*``'s step on brings, arriving 3 steps later at least, and
    that box's first delivery carrying it arrives no earlier (the imports covering ``C - g c``
    nodes arrive 3 steps after ``d*``'s); (B, ``muB``) another group knows every input, so
    ``x``'s own inputs left its box up to ``d*`` too: ``k`` exports covering all ``C`` nodes."""
    col, add, upto, after = lp.col, lp.add, lp.upto, lp.after
    for j in range(N):
        add([(1, col["W"][j]), (-c, col["Pd"][j])])
        add(upto("W", j) + upto("Pd", j, -1) + upto("gQ", j, -1) + upto("gN", j - 1, -1))
        add([(1, col["Z"][j]), (-c, col["Qe"][j])])
        add(after("Z", j - 1) + after("Qe", j - 1, -1) + after("hQ", j, -1) + after("hN", j, -1))
        add(upto("Pd", j, -1) + upto("mu", j, k - 1) + upto("muB", j, k))
        add(after("Qd", j - 1, -1) + after("mu", j - 1, k - 1) + after("muB", j - 1, k - 1))
        add(upto("W", j, -1) + upto("mu", j, C - c) + upto("muB", j, C))
        add(after("Z", j, -1) + after("mu", j - 1, C - c) + after("muB", j - 1, C - c))
        add((after("Z", j + 2, -1) if j + 2 < N else []) + after("mu", j - 1, C - g * c))
    add(upto("mu", N - 1, -1) + upto("muB", N - 1, -1), -1.0)


def _forwarding(lp, N: int, k: int, C: int, c: int, G: float, H: float) -> None:
    """Rows d-f of the box-stage argument where every link inside a box joins a GPU and the
    box switch: a box mate's input reaches an exporter through the switch, so it went up two
    steps before the export at least, and an import reaches a box mate two steps after its
    arrival at least. Per quiet group ``i`` (before NIC step ``i``), its last step's sends up
    (``gL``) and first step's down (``hF``) are split off, and ``b_i`` (0 or 1) says whether it
    has a step: the sends up in NIC step ``j - 1`` cover exports of NIC step ``j`` only where
    group ``j`` has one (``uN``), the sends down in NIC step ``j + 1`` imports of NIC step ``j``
    likewise (``vN``); a quiet step pays at least the least alpha (:func:`_solved`)."""
    col, add, upto, after = lp.col, lp.add, lp.upto, lp.after
    big = 10.0 * (N + 1) * max(1.0, G, H)  # more than any step's sends in the program's units
    for i in range(N + 1):
        for part, rest, of, cap, q1, q2 in (("gL", "gR", "gQ", G, "qL", "qR"), ("hF", "hR", "hQ", H, "qF", "qS")):
            add([(1, col[part][i]), (1, col[rest][i]), (-1, col[of][i])], equal=True)
            add([(1, col[q1][i]), (1, col[q2][i]), (-1, col["q"][i])], equal=True)
            add([(1, col[part][i]), (-cap, col[q1][i])])
            add([(1, col[rest][i]), (-cap, col[q2][i])])
        add([(1, col["q"][i]), (-big, col["b"][i])])
        for usable, sent, at in (("uN", "gN", i - 1), ("vN", "hN", i)):
            add([(1, col[usable][i]), (-big, col["b"][i])])
            add([(1, col[usable][i])] + ([(-1, col[sent][at])] if 0 <= at < N and i >= 1 else []))
    for j in range(N):
        add([(1, col["W"][j]), (-c, col["Pd"][j])])
        add(upto("W", j) + upto("Pd", j, -1) + upto("gQ", j - 1, -1) + [(-1, col["gR"][j])]
            + upto("gN", j - 2, -1) + [(-1, col["uN"][j])])
        add([(1, col["Z"][j]), (-c, col["Qe"][j])])
        late = after("hQ", j + 1, -1) + [(-1, col["hR"][j + 1])]
        if j + 1 < N:
            late += after("hN", j + 1, -1) + [(-1, col["vN"][j + 1])]
        add(after("Z", j - 1) + after("Qe", j - 1, -1) + late)
        add(upto("Pd", j, -1) + upto("mu", j, k - 1))
        add(after("Qd", j - 1, -1) + after("mu", j - 1, k - 1))
        add(upto("W", j, -1) + upto("mu", j, C - c))
        add(after("Z", j, -1) + after("mu", j - 1, C - c))
    add(upto("mu", N - 1, -1), -1.0)


def _solved(lp, quiet_alpha: float = 0.0) -> float:
    """The least ``sum p + sum q`` of the program ``lp`` (``M / E`` units), plus ``quiet_alpha``
    a quiet group with a step (:func:`_forwarding`'s ``b``, integral: a mixed-integer program)."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    A, rhs, eq = lp.matrix()
    cost = np.zeros(A.shape[1])
    cost[lp.col["p"]] = cost[lp.col["q"]] = 1.0
    cost[lp.col["b"]] = quiet_alpha
    whole = np.zeros(A.shape[1])
    whole[lp.col["b"]] = 1.0 if quiet_alpha > 0 else 0.0
    top = np.full(A.shape[1], np.inf)
    top[lp.col["b"]] = 1.0
    rows = [LinearConstraint(A[~eq], -np.inf, rhs[~eq]), LinearConstraint(A[eq], rhs[eq], rhs[eq])]
    res = milp(cost, constraints=rows, integrality=whole, bounds=Bounds(0, top), options={"time_limit": 120})
    return float(res.fun) if res.status == 0 else float("nan")


def render(rows: list[dict]) -> str:
    """The rows as a Markdown table: per piece count of the program, A's pieces alone and the
    mixed program's least ``T_B`` plus alphas (A's start, late by that many steps)."""
    head = ["fabric", "GPUs", "A sync ms (pieces, steps)", "B sync ms (pieces, steps)",
            "program at A's pieces -20 / -10 / +0 / +10: A alone -> A + B ms (A late)",
            "bound's program: as it stands / far imports late / forwarding / every import late (not a bound) ms (N)",
            "s (load)", "note"]
    body = []
    for r in rows:
        sweep = "; ".join(f"{q}: {alone:.4f} -> {tot:.4f} ({late})" for q, alone, (late, _, tot) in
                          ((q, 1e3 * al, (lt, tb, 1e3 * tt)) for q, al, (lt, tb, tt) in r.get("sweep", [])))
        body.append([r["fabric"], cell(r.get("gpus"), ","),
                     f"{cell(r.get('a_ms'), '.4f')} ({r.get('a_pieces', '-')}, {r.get('a_steps', '-')})",
                     f"{cell(r.get('b_ms'), '.4f')} ({r.get('b_pieces', '-')}, {r.get('b_steps', '-')})",
                     sweep or "-", " / ".join(f"{v:.4f} ({n})" for n, v in r.get("bound_programs", {}).values()) or "-",
                     f"{cell(r.get('seconds'), '.1f')} ({cell(r.get('load'), '.1f')})",
                     r.get("stopped", "" if r.get("b_verified", True) else "B NOT VERIFIED")])
    return "\n".join(table(head, body))


def main() -> None:
    from bench_tier3_gap import run_fabrics

    run_fabrics(__doc__, _row, render, ("rail_clos",))


if __name__ == "__main__":
    main()
