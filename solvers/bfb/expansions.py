"""Expansion techniques with schedule construction (Zhao et al., NSDI 2025, Section 5, Appendices C and F).

Each expansion takes a base topology and an allgather schedule on it (one chunk per shard) and
builds the expanded topology and its allgather schedule; the node numbering is the one of the
generators ``line_graph``, ``degree_expansion`` and ``cartesian``
(:mod:`collsynth.instances.generators`):

- :func:`line_graph` (Definitions 1-2): L(G) has a node per arc of G (arcs sorted by
  ``(u, v, key)``) and an arc ``e=(u,v) -> f=(v,w)``. Step 1: every arc-node ``(u,v)`` sends
  its shard to every ``(v,w)``. Then every base send ``x -> y`` of piece ``C`` of ``v``'s shard
  in step ``t`` becomes, for every in-arc ``(u,v)`` (a source of L(G)) and every out-arc
  ``(y,z)``, the send of ``C`` of ``(u,v)``'s shard ``(x,y) -> (y,z)`` in step ``t+1`` (a send
  over ``k`` parallel arcs ``x -> y`` is split in ``k`` equal parts, one per arc-node). Theorem 1:
  ``T_L' = T_L + 1``, ``T_B' = T_B + 1/N`` (units of M/B).
- :func:`degree_expansion` (Definitions 3-4): G*n has nodes ``(v, i) = v*n + i`` and arcs
  ``(u,i) -> (v,j)`` for every arc ``u -> v`` and all ``i, j``. Every base send ``x -> y`` of
  ``v``'s piece in step ``t`` becomes ``(x,i) -> (y,j)`` of ``(v,i)``'s piece for all ``i, j``,
  so after ``T`` steps every node holds every shard except its own copies'; in step ``T+1``
  ``(v,j)`` collects ``(v,i)`` (``i != j``) from all its ``nd`` in-neighbours ``(w, i')``, each
  sending an equal part. Theorem 11: ``T_L' = T_L + 1``, ``T_B' = T_B + (n-1)/(nN)``.
- :func:`cartesian_power` (Definition 14): ``A^(1)`` allgathers along dimension 1, then 2, ...
  (phase ``k`` = steps ``(k-1)T+1 .. kT``), ``A^(i)`` starts at dimension ``i``; each shard is cut
  into ``n`` sub-shards, the ``i``-th following ``A^(i)`` (at any step the ``n`` schedules use
  different dimensions). Theorem 12: ``T_L' = nT_L``, ``T_B' = T_B N/(N-1) (N^n-1)/N^n``.
- :func:`cartesian_product`: the product topology scheduled by BFB (Theorem 13: BW-optimal
  when every factor's BFB schedule is, ``T_L = sum of T_L``).
- :func:`bidirectional` (Appendix F): a reverse-symmetric G with isomorphism ``phi: G -> G^T``
  becomes G + G^T (degree 2d); half of every shard follows the schedule on G, the other half
  its image under ``phi`` on G^T: ``T_L`` and ``T_B`` unchanged.

:func:`expand_and_price` verifies (``tens.verify``) and prices (``tens.cost``, sync, exact
``T_B_chunks``) an expanded schedule and puts the theorem's prediction beside it. The
producer ``expansion`` reads an instance topology's ``meta`` (generator ``line_graph`` /
``degree_expansion`` / ``cartesian`` with its ``base``), builds the base's BFB schedule and
expands it. :func:`base_catalogue` builds the base topologies of Table 9
(:mod:`collsynth.instances.catalogue`) with their BFB schedules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import networkx as nx
import numpy as np

from ...tens.status import Status
from ... import InputError
from ...limits import Deadline
from ...formulations.bfb_lp import optimal_loads
from ...instances import catalogue, generators
from ...instances.constructions import (
    arcs_of,
    cartesian_topology,
    degree_topology,
    expand_groups,
    group_index,
    line_graph_topology,
    topology_from_arcs,
)
from ...instances.instance import Instance, make_instance
from ...instances.topology import Topology, moore_bound
from ...tens import cost, verify
from ...tens import schedule as sch
from ...tens.schedule import Schedule
from ..producers import Options, Outcome, Param, Producer, Unsupported
from .per_step import solve_bfb


# ---- building blocks of the expansions --------------------------------------------------------

def shard_units(schedule: Schedule) -> Schedule:
    """Check a base schedule is an allgather with one chunk per shard (chunk id = owner)."""
    if schedule.collective != "allgather":
        raise InputError("schedule", f"expansions take allgather schedules, got {schedule.collective}")
    if schedule.chunks != schedule.nodes:
        raise InputError("schedule", "expansions take one chunk per shard (chunks == nodes)")
    return schedule


def replicate_chunks(schedule: Schedule, c: int) -> Schedule:
    """The same schedule for ``c`` chunks per shard: chunk ``v`` becomes ``v*c + j``, same pieces."""
    if c == 1:
        return schedule
    n = len(schedule)
    j = np.tile(np.arange(c), n)
    rep = lambda a: np.repeat(a, c)  # noqa: E731
    return sch.from_arrays(schedule.collective, schedule.nodes, schedule.nodes * c,
                           chunk=rep(schedule.chunk.astype(np.int64)) * c + j, lo=rep(schedule.lo), hi=rep(schedule.hi),
                           src=rep(schedule.src), dst=rep(schedule.dst), step=rep(schedule.step),
                           denom=schedule.denom, op=rep(schedule.op), routing=schedule.routing,
                           meta=schedule.meta)


# ---- line graph (Definitions 1-2, Theorem 1) ----------------------------------------------------

def line_graph(base: Topology, schedule: Schedule) -> tuple[Topology, Schedule]:
    """L(G) and the line-graph schedule of Definition 2 (Theorem 1) of Zhao et al.,
    "Efficient Direct-Connect Topologies for Collective Communications", NSDI 2025, Section 5 (module doc)."""
    s = shard_units(schedule)
    arcs = arcs_of(base)
    m = len(arcs)
    topo = line_graph_topology(base)
    out_order, out_starts = group_index(arcs[:, 0], base.size)
    in_order, in_starts = group_index(arcs[:, 1], base.size)
    # split sends over parallel arcs: one equal part per arc x -> y
    pair_key = arcs[:, 0] * base.size + arcs[:, 1]
    send_key = s.src.astype(np.int64) * base.size + s.dst  # ids are int32: widened before multiplying
    first = np.searchsorted(pair_key, send_key)
    last = np.searchsorted(pair_key, send_key, side="right")
    mult = last - first
    if (mult < 1).any():
        raise InputError("schedule", "a base send is not on an arc of the base topology")
    L = int(np.lcm.reduce(np.unique(mult))) if len(mult) else 1
    denom = s.denom * L
    rows = np.repeat(np.arange(len(s)), mult)
    part = np.arange(len(rows)) - np.repeat(np.cumsum(mult) - mult, mult)
    size = (s.hi - s.lo).astype(np.int64)[rows] * (L // mult[rows])  # bounds may be int32: widened
    lo = s.lo.astype(np.int64)[rows] * L + part * size
    hi = lo + size
    sender = first[rows] + part  # arc-node (x, y, key)
    v = s.chunk[rows]
    y = s.dst[rows]
    t = s.step[rows]
    # every in-arc e of v (a source of L(G)) ...
    r1, e = expand_groups(v, in_order, in_starts)
    # ... and every out-arc f of y (a receiver)
    r2, f = expand_groups(y[r1], out_order, out_starts)
    src_rows = r1[r2]
    chunk = e[r2]
    keep = f != chunk  # never send a shard back to its owner
    body = dict(chunk=chunk[keep], lo=lo[src_rows][keep], hi=hi[src_rows][keep], src=sender[src_rows][keep],
                dst=f[keep], step=t[src_rows][keep] + 1)
    # step 1: every arc-node e=(u,v) sends its shard to every (v, w)
    r0, f0 = expand_groups(arcs[:, 1], out_order, out_starts)
    first_step = dict(chunk=r0, lo=np.zeros(len(r0), np.int64), hi=np.full(len(r0), denom, np.int64),
                      src=r0, dst=f0, step=np.ones(len(r0), np.int64))
    cat = {k: np.concatenate([first_step[k], body[k]]) for k in body}
    out = sch.from_arrays("allgather", m, m, denom=denom, **cat)
    return topo, out


# ---- degree expansion (Definitions 3-4, Theorem 11) ---------------------------------------------

def degree_expansion(base: Topology, schedule: Schedule, n: int) -> tuple[Topology, Schedule]:
    """G*n and the degree-expanded schedule of Definition 4 (Theorem 11) of Zhao et al.,
    "Efficient Direct-Connect Topologies for Collective Communications", NSDI 2025, Section 5 (module doc)."""
    if any(u == v for u, v in base.graph.edges()):
        raise InputError("base", "degree expansion needs a base without self-loops")
    if n < 1:
        raise InputError("copies", f"expected an integer >= 1, got {n}")
    s = shard_units(schedule)
    topo = degree_topology(base, n)
    T = s.num_steps
    # steps 1..T: (x,i) -> (y,j) carries (v,i)'s piece for all i, j
    k = len(s)
    i = np.tile(np.repeat(np.arange(n), n), k)
    j = np.tile(np.tile(np.arange(n), n), k)
    rep = lambda a: np.repeat(a, n * n)  # noqa: E731
    # step T+1: (v,j) gets (v,i), i != j, from every in-neighbour pair (w, i') in parts ~ multiplicity
    la = base.link_arrays
    indeg = np.bincount(la.dst, weights=la.count, minlength=base.size).astype(np.int64)
    dl = int(np.lcm.reduce(np.unique(indeg[indeg > 0]))) if (indeg > 0).any() else 1
    denom = s.denom * n * dl
    scale = denom // s.denom
    body = dict(chunk=rep(s.chunk.astype(np.int64)) * n + i, lo=rep(s.lo.astype(np.int64)) * scale,
                hi=rep(s.hi.astype(np.int64)) * scale,
                src=rep(s.src.astype(np.int64)) * n + i, dst=rep(s.dst.astype(np.int64)) * n + j, step=rep(s.step))
    # parts: pair p (w -> v) with count c_p: n parts (one per i') of size c_p/(n*indeg(v)) each
    order, starts = group_index(la.dst, base.size)
    rows = []
    for v in range(base.size):
        if v not in base.graph:
            continue
        ps = order[starts[v]:starts[v + 1]]
        sizes = np.repeat(la.count[ps] * (denom // (n * indeg[v])), n)  # per (pair, i')
        w = np.repeat(la.src[ps], n)
        ip = np.tile(np.arange(n), len(ps))
        hi = np.cumsum(sizes)
        lo = hi - sizes
        for ii in range(n):
            for jj in range(n):
                if ii == jj:
                    continue
                rows.append((np.full(len(w), v * n + ii), lo, hi, w * n + ip, np.full(len(w), v * n + jj)))
    last = {key: np.concatenate([r[q] for r in rows]) if rows else np.zeros(0, np.int64)
            for q, key in enumerate(("chunk", "lo", "hi", "src", "dst"))}
    last["step"] = np.full(len(last["chunk"]), T + 1, np.int64)
    cat = {key: np.concatenate([body[key], last[key]]) for key in body}
    out = sch.from_arrays("allgather", topo.size, topo.size, denom=denom, **cat)
    return topo, out


# ---- Cartesian power (Definition 14, Theorem 12) and product (Theorem 13) --------------------------

def cartesian_power(base: Topology, schedule: Schedule, n: int) -> tuple[Topology, Schedule]:
    """G^n and the schedule of Definition 14 (Theorem 12) of Zhao et al.,
    "Efficient Direct-Connect Topologies for Collective Communications", NSDI 2025, Section 5 (module doc)."""
    if n < 1:
        raise InputError("times", f"expected an integer >= 1, got {n}")
    s = shard_units(schedule)
    N = base.size
    topo = cartesian_topology([base] * n)
    T = s.num_steps
    pw = N ** np.arange(n - 1, -1, -1)  # row-major weights, dimension 0 most significant
    parts = []
    for k in range(n):
        # free coordinates: source dims < k (N^k), holder dims < k (N^k), shared dims > k (N^(n-k-1))
        nfree = N ** k
        nrest = N ** (n - k - 1)
        combos = nfree * nfree * nrest
        c = np.arange(combos)
        s_lo = c // (nfree * nrest)  # source's dims < k
        h_lo = (c // nrest) % nfree  # holder's dims < k
        rest = c % nrest  # dims > k shared by source and holder
        base_src = s_lo * (N * nrest) + rest  # id without the dim-k coordinate
        base_hold = h_lo * (N * nrest) + rest
        wk = N ** (n - k - 1)
        E = len(s)
        cc = np.tile(c, E)
        r = np.repeat(np.arange(E), combos)
        parts.append(dict(
            chunk=np.tile(base_src, E) + s.chunk[r].astype(np.int64) * wk,
            lo=s.lo[r], hi=s.hi[r],
            src=np.tile(base_hold, E) + s.src[r].astype(np.int64) * wk,
            dst=np.tile(base_hold, E) + s.dst[r].astype(np.int64) * wk,
            step=s.step[r] + k * T,
        ))
        del cc
    a1 = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
    # A^(i): rotate dimensions by i; sub-shard i of every shard
    ids = np.arange(topo.size)
    digits = (ids[:, None] // pw[None, :]) % N
    denom = s.denom * n
    out = {key: [] for key in a1}
    for i in range(n):
        rot = (digits[:, (np.arange(n) - i) % n] * pw[None, :]).sum(1)  # coordinate k moves to k+i
        out["chunk"].append(rot[a1["chunk"]])
        out["src"].append(rot[a1["src"]])
        out["dst"].append(rot[a1["dst"]])
        out["lo"].append(a1["lo"] + i * s.denom)
        out["hi"].append(a1["hi"] + i * s.denom)
        out["step"].append(a1["step"])
    cat = {key: np.concatenate(val) for key, val in out.items()}
    return topo, sch.from_arrays("allgather", topo.size, topo.size, denom=denom, **cat)


def cartesian_product(factors: list[Topology], **bfb_options) -> tuple[Topology, Schedule, Any]:
    """The product topology and its BFB schedule (Theorem 13 of Zhao et al., NSDI 2025: BW-optimal
    when every factor's BFB schedule is); returns the BFB result too."""
    topo = cartesian_topology(factors)
    res = solve_bfb(topo, **bfb_options)
    return topo, res.schedule, res


# ---- unidirectional -> bidirectional (Appendix F) -------------------------------------------------

def transpose_isomorphism(topology: Topology) -> dict[int, int] | None:
    """An isomorphism ``phi: G -> G^T`` (reverse symmetry, Definition 8), or None."""
    g = nx.DiGraph()
    g.add_nodes_from(topology.nodes)
    la = topology.link_arrays
    for u, v, c in zip(la.src.tolist(), la.dst.tolist(), la.count.tolist()):
        g.add_edge(u, v, count=c)
    gt = g.reverse(copy=True)
    if nx.is_isomorphic(g, g.reverse(copy=False)) is False:
        return None
    phi = nx.vf2pp_isomorphism(g, gt, node_label=None)
    if phi is None:
        return None
    # parallel-link counts must match too
    for u, v, c in zip(la.src.tolist(), la.dst.tolist(), la.count.tolist()):
        if gt[phi[u]][phi[v]]["count"] != c:
            return None
    return phi


def bidirectional(base: Topology, schedule: Schedule, phi: dict[int, int] | None = None) -> tuple[Topology, Schedule]:
    """G + G^T (degree 2d) and the Appendix F schedule: half of each shard along the schedule on
    G, the other half along its image under ``phi: G -> G^T`` (same T_L and T_B)."""
    s = shard_units(schedule)
    if phi is None:
        phi = transpose_isomorphism(base)
        if phi is None:
            raise Unsupported(f"{base.name} is not reverse-symmetric (no isomorphism to its transpose)")
    arcs = arcs_of(base)
    topo = topology_from_arcs(base.size, np.concatenate([arcs, arcs[:, ::-1]]), f"bi({base.name})", like=base)
    perm = np.arange(base.size)
    for a, b in phi.items():
        perm[a] = b
    image = sch.relabel(s, perm)  # on G^T: the arcs of G reversed
    d2 = s.denom * 2
    cat = dict(
        chunk=np.concatenate([s.chunk, image.chunk]), lo=np.concatenate([s.lo, image.lo.astype(np.int64) + s.denom]),
        hi=np.concatenate([s.hi, image.hi.astype(np.int64) + s.denom]), src=np.concatenate([s.src, image.src]),
        dst=np.concatenate([s.dst, image.dst]), step=np.concatenate([s.step, image.step]),
    )
    return topo, sch.from_arrays("allgather", base.size, base.size, denom=d2, **cat)


# ---- theorem formulas -----------------------------------------------------------------------------

def predict(kind: str, N: int, d: int, T_L: int, T_B: Fraction, n: int = 1, other: tuple | None = None) -> dict:
    """Theorem formulas (Zhao et al., NSDI 2025, Theorems 1, 11, 12; T_B in units of M/B) for an expansion of a base with
    ``N`` nodes, degree ``d``, ``T_L`` steps and ``T_B``: returns ``nodes, degree, T_L, T_B``."""
    T_B = Fraction(T_B)
    if kind == "line_graph":
        return {"nodes": d * N, "degree": d, "T_L": T_L + 1, "T_B": T_B + Fraction(1, N)}
    if kind == "degree_expansion":
        return {"nodes": n * N, "degree": n * d, "T_L": T_L + 1, "T_B": T_B + Fraction(n - 1, n * N)}
    if kind == "cartesian_power":
        return {"nodes": N ** n, "degree": n * d, "T_L": n * T_L,
                "T_B": T_B * Fraction(N, N - 1) * Fraction(N ** n - 1, N ** n)}
    if kind == "cartesian_product":  # both factors BW-optimal (Theorem 13)
        N2, d2, T_L2 = other
        M = N * N2
        return {"nodes": M, "degree": d + d2, "T_L": T_L + T_L2, "T_B": Fraction(M - 1, M)}
    if kind == "bidirectional":
        return {"nodes": N, "degree": 2 * d, "T_L": T_L, "T_B": T_B}
    raise ValueError(kind)


@dataclass
class Priced:
    """An expanded (or base) schedule, verified and priced, beside the theorem's prediction."""

    topology: Topology
    schedule: Schedule
    verified: bool
    violation: str
    steps: int
    T_B_chunks: Fraction | None
    T_B: Fraction | None  # units of M/B
    predicted: dict = field(default_factory=dict)
    cost: Any = None

    @property
    def matches(self) -> bool:
        """True when the priced T_L and T_B equal the theorem's exactly."""
        return (bool(self.predicted) and self.steps == self.predicted["T_L"]
                and self.T_B == self.predicted["T_B"])

    def summary(self) -> dict:
        """The row written for this schedule: its topology, verdict, priced T_L and T_B beside
        the theorem's prediction (as strings, exact) and whether they match."""
        N = len(self.topology.npus)
        d = self.topology.out_degree_range[1]
        return {
            "topology": self.topology.name, "nodes": N, "degree": d, "verified": self.verified,
            "violation": self.violation, "T_L": self.steps, "T_B": str(self.T_B),
            "T_B_float": float(self.T_B) if self.T_B is not None else None,
            "predicted": {k: str(v) for k, v in self.predicted.items()}, "matches": self.matches,
            "moore_optimal": self.steps == moore_bound(N, d),
            "bw_optimal": self.T_B == Fraction(N - 1, N) if self.T_B is not None else None,
        }


def price_schedule(topology: Topology, schedule: Schedule, predicted: dict | None = None,
                   message_bytes: float = 1 << 20) -> Priced:
    """Verify and price (sync) an allgather schedule; ``T_B = T_B_chunks * d / N`` (M/B units)."""
    inst = make_instance(topology, "allgather", message_bytes=message_bytes)
    bad = verify.verify(schedule, inst)
    if bad is not None:
        return Priced(topology=topology, schedule=schedule, verified=False, violation=str(bad),
                      steps=schedule.num_steps, T_B_chunks=None, T_B=None, predicted=dict(predicted or {}))
    c = cost.price_sync(schedule, inst)
    chunks = c.extra.get("T_B_chunks")
    N = len(topology.npus)
    d = topology.out_degree_range[1]
    T_B = Fraction(chunks) * Fraction(d, N) if chunks is not None else None
    return Priced(topology=topology, schedule=schedule, verified=True, violation="", steps=schedule.num_steps,
                  T_B_chunks=chunks, T_B=T_B, predicted=dict(predicted or {}), cost=c)


def expand_and_price(kind: str, base: Topology, schedule: Schedule, n: int = 1, **kw) -> tuple[Priced, Priced]:
    """Price the base schedule, expand it (``kind``: line_graph, degree_expansion,
    cartesian_power, bidirectional), price the result and attach the theorem's prediction.

    Returns ``(base_priced, expanded_priced)``.
    """
    b = price_schedule(base, schedule)
    if not b.verified:
        raise ValueError(f"base schedule does not verify: {b.violation}")
    N, d = len(base.npus), base.out_degree_range[1]
    if kind == "line_graph":
        topo, s = line_graph(base, schedule)
    elif kind == "degree_expansion":
        topo, s = degree_expansion(base, schedule, n)
    elif kind == "cartesian_power":
        topo, s = cartesian_power(base, schedule, n)
    elif kind == "bidirectional":
        topo, s = bidirectional(base, schedule, kw.get("phi"))
    else:
        raise InputError("kind", f"unknown expansion {kind!r}")
    pred = predict(kind, N, d, b.steps, b.T_B, n)
    return b, price_schedule(topo, s, pred)


# ---- base catalogue (Table 9) ---------------------------------------------------------------------

def base_entry(family: str, params: dict, *, method: str = "flow", build_schedule: bool = True) -> dict:
    """One catalogue base topology with its BFB schedule, T_L, T_B (M/B units) and flags."""
    try:
        fam = catalogue.family(family)
    except KeyError:
        raise InputError("family", f"unknown base family {family!r}") from None
    topo = generators.build(fam.generator, params)
    N, d = len(topo.npus), topo.out_degree_range[1]
    row = {"family": family, "symbol": fam.symbol, "generator": fam.generator, "params": dict(params),
           "topology": topo.name, "nodes": N, "degree": d, "regular": topo.regular,
           "moore_bound": moore_bound(N, d), "note": fam.note}
    if topo.diameter < 0:
        row.update(T_L=None, T_B=None, bw_optimal=False, moore_optimal=False, note="not strongly connected")
        return row
    if build_schedule:
        res = solve_bfb(topo, method=method)
        row.update(T_L=res.steps, T_B=res.T_B_units, bw_optimal=res.bw_optimal, moore_optimal=res.moore_optimal,
                   schedule=res.schedule, topology_obj=topo)
    else:
        r = optimal_loads(topo)
        T_B = Fraction(d, N) * sum(r["step_max"], Fraction(0))
        row.update(T_L=r["steps"], T_B=T_B, bw_optimal=r["bw_optimal"], moore_optimal=r["steps"] == moore_bound(N, d),
                   topology_obj=topo)
    return row


def base_catalogue(degree: int, max_nodes: int = 64, *, build_schedule: bool = False,
                   families: tuple[str, ...] | None = None, dense_limit: int = 16) -> list[dict]:
    """The Table 9 catalogue for ``degree``: every family's members up to ``max_nodes`` nodes,
    each with T_L, T_B (units M/B, exact) and the BW-/Moore-optimal flags (BFB, Theorem 19).

    Families defined for every N (generalized Kautz, circulants, rings) are listed up to
    ``dense_limit`` nodes only (the finder asks for the sizes it needs).
    """
    rows = []
    for fam in catalogue.CATALOGUE:
        if families and fam.name not in families:
            continue
        for params in fam.members(degree, min(max_nodes, dense_limit) if fam.dense else max_nodes):
            try:
                rows.append(base_entry(fam.name, params, build_schedule=build_schedule))
            except InputError:
                continue
    return rows


# ---- the producer ---------------------------------------------------------------------------------

def _base_from_meta(table: dict) -> Topology:
    table = dict(table)
    gen = table.pop("generator")
    return generators.build(gen, table, where="base")


def _same_graph(a: Topology, b: Topology) -> bool:
    if a.size != b.size:
        return False
    la, lb = a.link_arrays, b.link_arrays
    return (len(la) == len(lb) and np.array_equal(la.src, lb.src) and np.array_equal(la.dst, lb.dst)
            and np.array_equal(la.count, lb.count))


def expanded_allgather(topology: Topology, *, transpose: bool = False, bfb_method: str = "lp",
                       solver: str = "highs", deadline: Deadline | None = None) -> tuple[Schedule, dict]:
    """The expansion schedule for a topology built by the ``line_graph`` / ``degree_expansion``
    / ``cartesian`` generators (read from ``topology.meta``); with ``transpose`` the allgather
    on the transposed topology (for reduce-scatter), built from the transposed base.

    Returns the schedule (on ``topology`` or its transpose) and the prediction/base figures.
    The base's BFB solves stop at ``deadline`` (:class:`~collsynth.limits.TimeLimitReached`).
    """
    meta = topology.meta or {}
    gen = meta.get("generator")
    params = dict(meta.get("params") or {})
    if gen not in ("line_graph", "degree_expansion", "cartesian"):
        raise Unsupported("the expansion producer needs a topology from the line_graph, degree_expansion "
                          "or cartesian generator")
    if topology.failed_nodes or topology.failed_links:
        raise Unsupported("expansions are built on intact topologies")
    base = _base_from_meta(params["base"])
    if transpose:
        base = base.transpose()
    info: dict[str, Any] = {"expansion": gen, "base": base.name}

    def bfb(t: Topology):
        r = solve_bfb(t, method=bfb_method, solver=solver, deadline=deadline)
        info.setdefault("base_T_L", r.steps)
        info.setdefault("base_T_B", str(r.T_B_units))
        info.setdefault("base_bw_optimal", r.bw_optimal)
        return r

    if gen == "line_graph":
        cur_t, cur_s = _expand_line_graph(base, params, bfb, info)
    elif gen == "degree_expansion":
        cur_t, cur_s = _expand_degree(base, params, bfb, info)
    elif params.get("other") is not None:
        cur_t, cur_s = _expand_cartesian_product(base, _base_from_meta(params["other"]), transpose, info,
                                                 bfb_method=bfb_method, solver=solver, deadline=deadline)
    else:
        cur_t, cur_s = _expand_cartesian_power(base, params, bfb, info)
    want = topology.transpose() if transpose else topology
    if gen == "line_graph" and transpose:
        # L^k(G^T) is isomorphic to L^k(G)^T: arc-node (a, b) of G^T is arc-node (b, a) of G
        perm = _line_transpose_perm(base.transpose(), int(params.get("times", 1)))
        cur_s = sch.relabel(cur_s, perm)
        cur_t = _relabel_topology(cur_t, perm)
    if not _same_graph(cur_t, want):
        raise Unsupported("the instance topology does not match the expansion of its base (numbering)")
    if "predicted" in info:
        info["predicted"] = {k: (str(v) if isinstance(v, Fraction) else v) for k, v in info["predicted"].items()}
    return cur_s, info


def _expand_line_graph(base: Topology, params: dict, bfb, info: dict) -> tuple[Topology, Schedule]:
    """``times`` line-graph expansions of ``base`` and its BFB schedule; the prediction of the
    last one goes to ``info["predicted"]``."""
    times = int(params.get("times", 1))
    cur_t, cur_s = base, bfb(base).schedule
    for _ in range(times):
        N, d = len(cur_t.npus), cur_t.out_degree_range[1]
        b = price_schedule(cur_t, cur_s)
        pred = predict("line_graph", N, d, b.steps, b.T_B)
        cur_t, cur_s = line_graph(cur_t, cur_s)
    info["predicted"] = pred
    return cur_t, cur_s


def _expand_degree(base: Topology, params: dict, bfb, info: dict) -> tuple[Topology, Schedule]:
    """The degree expansion of ``base`` by ``copies`` and its schedule, with the prediction."""
    n = int(params["copies"])
    b = price_schedule(base, bfb(base).schedule)
    cur_t, cur_s = degree_expansion(base, b.schedule, n)
    info["predicted"] = predict("degree_expansion", len(base.npus), base.out_degree_range[1], b.steps, b.T_B, n)
    return cur_t, cur_s


def _expand_cartesian_product(base: Topology, h: Topology, transpose: bool, info: dict, *,
                              bfb_method: str, solver: str,
                              deadline: Deadline | None) -> tuple[Topology, Schedule]:
    """The product of ``base`` and ``h`` solved by BFB directly; the prediction only when both
    factors are BFB bandwidth-optimal."""
    if transpose:
        h = h.transpose()
    cur_t = cartesian_topology([base, h])
    r = solve_bfb(cur_t, method=bfb_method, solver=solver, deadline=deadline)
    cur_s = r.schedule
    rb, rh = solve_bfb(base, method="flow", deadline=deadline), solve_bfb(h, method="flow", deadline=deadline)
    if rb.bw_optimal and rh.bw_optimal:
        info["predicted"] = predict("cartesian_product", len(base.npus), base.out_degree_range[1], rb.steps,
                                    rb.T_B_units, other=(len(h.npus), h.out_degree_range[1], rh.steps))
    return cur_t, cur_s


def _expand_cartesian_power(base: Topology, params: dict, bfb, info: dict) -> tuple[Topology, Schedule]:
    """The ``times``-th cartesian power of ``base`` and its schedule, with the prediction."""
    times = int(params.get("times", 2))
    b = price_schedule(base, bfb(base).schedule)
    cur_t, cur_s = cartesian_power(base, b.schedule, times)
    info["predicted"] = predict("cartesian_power", len(base.npus), base.out_degree_range[1], b.steps, b.T_B,
                                times)
    return cur_t, cur_s


def _line_transpose_perm(g: Topology, times: int) -> np.ndarray:
    """Node map ``L^k(G^T) -> L^k(G)`` that is an isomorphism onto ``L^k(G)^T``."""
    perm = np.arange(g.size)  # G^T and G share node ids
    gt = g.transpose()
    cur_g, cur_t = g, gt  # L^j(G) and L^j(G^T)
    for _ in range(times):
        ag = arcs_of(cur_g)
        at = arcs_of(cur_t)
        # arc (a, b) of L^j(G^T) corresponds to the arc (perm[b], perm[a]) of L^j(G)
        key_g = ag[:, 0] * cur_g.size + ag[:, 1]
        key_t = perm[at[:, 1]] * cur_g.size + perm[at[:, 0]]
        order_t = np.argsort(key_t, kind="stable")
        order_g = np.argsort(key_g, kind="stable")
        if not np.array_equal(key_t[order_t], key_g[order_g]):
            raise Unsupported("line graph of the transpose does not match (internal)")
        new = np.empty(len(at), np.int64)
        new[order_t] = order_g
        perm = new
        cur_g, cur_t = line_graph_topology(cur_g), line_graph_topology(cur_t)
    return perm


def _relabel_topology(t: Topology, perm: np.ndarray) -> Topology:
    la = t.link_arrays
    arcs = [(int(perm[u]), int(perm[v])) for u, v, c in zip(la.src.tolist(), la.dst.tolist(), la.count.tolist())
            for _ in range(c)]
    return topology_from_arcs(t.size, np.array(arcs, np.int64).reshape(-1, 2), t.name, like=t)


def _run_expansion(instance: Instance, options: Options) -> Outcome:
    if instance.concurrent:
        raise Unsupported("expansions build one collective")
    coll = instance.collective
    topo = instance.topology
    if tuple(coll.nodes) != tuple(topo.npus):
        raise Unsupported("expansions need every node to take part")
    method = str(options.params.get("bfb_method", "lp"))
    if coll.kind == "allgather":
        s, info = expanded_allgather(topo, bfb_method=method, solver=options.solver, deadline=options.timer())
        ag = s
    elif coll.kind in ("reduce_scatter", "allreduce"):
        ag, info = expanded_allgather(topo, bfb_method=method, solver=options.solver, deadline=options.timer())
        rs_ag, _ = expanded_allgather(topo, transpose=True, bfb_method=method, solver=options.solver,
                                      deadline=options.timer())
        rs = sch.reverse(rs_ag)
        s = rs if coll.kind == "reduce_scatter" else sch.concat(rs, ag, "allreduce")
        if coll.kind == "reduce_scatter":
            info["note"] = "reduce-scatter = allgather on the transpose, reversed"
    else:
        raise Unsupported(f"expansions build allgather, reduce_scatter and allreduce, not {coll.kind}")
    ag_only = s if coll.kind == "allgather" else ag
    s = replicate_chunks(s, coll.chunks_per_node)
    extra = dict(info)
    p = price_schedule(topo, ag_only, None, coll.message_bytes)  # the allgather phase, one chunk per shard
    if p.verified:
        N, d = len(topo.npus), topo.out_degree_range[1]
        extra.update(T_L=p.steps, T_B=str(p.T_B), bw_optimal=p.T_B == Fraction(N - 1, N),
                     moore_optimal=p.steps == moore_bound(N, d))
        if coll.kind == "allreduce":
            extra["note"] = "T_L/T_B are the allgather phase's; the allreduce doubles both"
    return Outcome(s, Status.CONSTRUCTED, objective=float(s.num_steps), units="steps", extra=extra)


PRODUCERS = [
    Producer("expansion", "expansion", _run_expansion,
             "Line-graph / degree / Cartesian expansion of the base's BFB schedule (Zhao et al., NSDI 2025, §5, App. C)",
             uses_solver=True,
             params=(Param("bfb_method", ("lp", "flow"), "lp", "how the base topology's BFB schedule is solved"),)),
]
