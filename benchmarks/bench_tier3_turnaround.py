"""Whether a pipeline of box-reduced crossings can come within 1 % of the box-stage bound on the
three-tier fabrics under ``sync``: the turnaround between a piece's reduce-scatter crossings and
its allgather's, and the box stages at the pipeline's two ends.

Run: ``python benchmarks/bench_tier3_turnaround.py [--only LABEL] [--skip LABEL] [--min-gpus N]
[--max-gpus N]`` (default: the rail Clos and HPN rows of ``bench_clusters.py`` at 2,000-4,400
GPUs, 1 GiB, ``fabric_copy = false``). Per fabric:

- the run's trees (*A*) at their pieces and shift of least ``sync`` price, verified
  (``bench_tier3_gap.verified_trees``), and the box-stage bound (:mod:`collsynth.tens.bounds.box_stages`);
- the piece-size program over A's trees and shift (the synchronous price of Zhao et al.,
  "Efficient Direct-Connect Topologies for Collective Communications", NSDI 2025, Section 3.2:
  per step the largest load over bandwidth, plus the busy steps' alphas;
  ``bench_tier3_tree_mix._least``) at :data:`PIECES` pieces, the least over them: as priced,
  with the links inside the boxes carrying nothing, and with the box switches' links down to
  their GPUs carrying nothing (one box hop instead of two): what-ifs, not schedules;
- the halves of two tree sets crossed, each verified and priced at its own pieces and shift of
  least ``sync`` price: A's reduce-scatter with *B*'s allgather (the root exporting every
  crossing itself, ``bench_tier3_tree_mix.root_exports``) and B's reduce-scatter with A's
  allgather (schedules);
- a stage model of the same numbers (:func:`stage_family`, a what-if): a piece's life as steps
  each loading one class of links, the reduce-scatter's box stage, its crossing out and in (one
  step apart, as through one leaf), ``turn`` steps that load nothing heavy (A's crossings
  between groups of boxes: 8), the allgather's crossing out and in and its box stage; at
  ``turn`` 8 it prices the run's trees to within 0.3 %, at 0 it says what a pipeline whose
  allgather crosses right after its reduce-scatter's last arrival could reach;
- the bound's program with early imports charged (:func:`early_charged`, a what-if resting on
  a counting claim not proven here, so not a bound).

Measured: README, "The three-tier allreduce's turnaround".
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
PIECES = (30, 40, 50, 60, 70, 80, 90)  # the piece counts the programs are solved at
TURNS = (0, 4, 8)  # the stage model's turnarounds
OUT, IN, UP, DOWN, LIGHT = range(5)  # the stage model's classes: NIC out, NIC in, box up, box down, light


def _row(args) -> dict:
    label, generator, params, timeout = args
    return timed_row({"fabric": label, "stage": "instance"}, lambda out: _measure(out, generator, params), timeout)


def _measure(out: dict, generator: str, params: dict) -> None:
    from bench_clusters_combining import _crossing_bounds
    from bench_tier3_gap import verified_trees

    from collsynth.tens import pipelined_allreduce as pa

    t = time.perf_counter()
    inst, a = verified_trees(out, generator, params)
    price = pa.price_sync(a, inst)
    out.update(a_ms=1e3 * price.total_s, a_pieces=a.pieces[0], stage="bound")
    _crossing_bounds(out, inst)
    out["stage"] = "programs"
    out.update(_programs(inst, a))
    out["stage"] = "crossed halves"
    out.update(crossed(inst, a))
    out["stage"] = "early imports charged"
    out["early_ms"] = early_charged(inst)
    out.update(seconds=time.perf_counter() - t, load=os.getloadavg()[0])


def _programs(inst, a) -> dict:
    """The piece-size program over A's trees (module doc) as priced and with box links free,
    and the stage model at :data:`TURNS`, each ``(ms, pieces)`` at its least."""
    from bench_tier3_tree_mix import _families

    from collsynth.tens.bounds.injections import box_parts

    steps, cost, alpha = _families(inst, a, a)["A"]
    la, topo = inst.topology.link_arrays, inst.topology
    part, _ = box_parts(inst)
    switch = np.zeros(topo.size, bool)
    switch[list(topo.switches)] = True
    inside = (part[la.src] == part[la.dst]) & (part[la.src] >= 0)
    fam = {"as priced": (steps, cost, alpha), "box free": (steps, np.where(inside[None, :], 0.0, cost), alpha),
           "one box hop": (steps, np.where((inside & switch[la.src])[None, :], 0.0, cost), alpha)}
    got = {name: least_pieces(fam[name]) for name in fam}
    total = cost.sum(axis=0)
    T, ratio = float(total.max()), float(total[inside].max() / total.max())
    a_nic, a_box = float(la.alpha.max()), float(la.alpha.min())
    for turn in TURNS:
        got[f"turn {turn}"] = least_pieces(stage_family(turn, 2, T, ratio, a_nic, a_box))
    got["turn 0, one box hop"] = least_pieces(stage_family(0, 1, T, ratio, a_nic, a_box))
    return {"programs": got, "box_ratio": ratio}


def least_pieces(family, counts=PIECES) -> tuple[float, int]:
    """``(ms, pieces)``: the least ``T_B`` plus alphas of the piece-size program over ``family``
    (``(steps, cost, alpha)`` rows of one piece starting at step 0) over the piece counts."""
    from bench_tier3_tree_mix import _least

    return min((1e3 * _least({"f": family}, [("f", o) for o in range(Q)])[1], Q) for Q in counts)


def stage_rows(turn: int, box_hops: int) -> list[tuple[int, int, float]]:
    """The stage model's rows ``(step, class, share of the crossing load)`` of one piece
    (module doc): a box stage of ``box_hops`` hops (2: up to the box switch, then down; 1: the
    reduce-scatter's up and the allgather's down only), each share ``box`` (:data:`UP`,
    :data:`DOWN` loads are scaled by the box ratio in :func:`stage_family`), the crossings out
    and in of each half carrying half of a NIC's load each, ``turn`` light steps between.

    >>> stage_rows(1, 1)
    [(1, 2, 0.5), (2, 0, 0.5), (3, 1, 0.5), (4, 4, 0.0), (5, 0, 0.5), (6, 1, 0.5), (7, 3, 0.5)]
    """
    rs_box = {2: [(0, UP, .5), (1, DOWN, .5)], 1: [(1, UP, .5)], 0: []}[box_hops]
    ag_box = {2: [(6 + turn, UP, .5), (7 + turn, DOWN, .5)], 1: [(6 + turn, DOWN, .5)], 0: []}[box_hops]
    light = [(4 + i, LIGHT, 0.0) for i in range(turn)]
    return rs_box + [(2, OUT, .5), (3, IN, .5)] + light + [(4 + turn, OUT, .5), (5 + turn, IN, .5)] + ag_box


def stage_family(turn: int, box_hops: int, T: float, ratio: float, alpha_nic: float, alpha_box: float):
    """``(steps, cost, alpha)`` of :func:`stage_rows`: a share ``s`` of class ``c`` loads it
    ``s T`` seconds for a whole message (the box classes ``s T ratio``); box steps pay
    ``alpha_box``, the others ``alpha_nic``."""
    rows = stage_rows(turn, box_hops)
    cost = np.zeros((len(rows), 5))
    for i, (_, cls, share) in enumerate(rows):
        cost[i, cls] = share * T * (ratio if cls in (UP, DOWN) else 1.0)
    alpha = np.array([alpha_box if cls in (UP, DOWN) else alpha_nic for _, cls, _ in rows])
    return np.array([s for s, _, _ in rows]), cost, alpha


def crossed(inst, a) -> dict:
    """A's reduce-scatter with B's allgather and B's with A's (module doc), each at its pieces
    and shift of least ``sync`` price: ``{name: (ms, pieces, verified)}``."""
    from bench_tier3_tree_mix import root_exports

    from collsynth.solvers.packing.allreduce_depth import at_sync_depths
    from collsynth.tens import pipelined_allreduce as pa
    from collsynth.tens.pipelined_allreduce import PipelinedAllreduce

    b = root_exports(a, inst)
    if isinstance(b, str):
        return {"crossed": {"stopped": b}}
    got = {}
    for name, rs, ag in (("A then B", a.reduce_scatter, b.allgather), ("B then A", b.reduce_scatter, a.allgather)):
        f = at_sync_depths(PipelinedAllreduce(rs, ag), inst)
        ok = pa.verify(f, inst) is None
        got[name] = (1e3 * pa.price_sync(f, inst).total_s if ok else float("nan"), f.pieces[0], ok)
    return {"crossed": got}


def early_charged(inst, steps=range(37, 77, 3)) -> tuple[float, int]:
    """``(ms, N)``: the least ``N alpha_n + LP'(N)`` over ``steps``, ``LP'`` the box-stage
    bound's program (:func:`collsynth.tens.bounds.box_stages.stage_program`) with its imports
    split (:func:`_charge_early`). A what-if, not a bound: it rests on a counting claim not
    proven here."""
    from collsynth.tens.bounds import box_stages as bs

    k, C, c, E, U, G, H, alpha_n = bs.stage_numbers(inst)
    best = min((_early_program(N, k, C, c, U / E, G / E, H / E) * M / E + N * alpha_n, N) for N in steps)
    return 1e3 * best[0], best[1]


def _early_program(N: int, k: int, C: int, c: int, U: float, G: float, H: float) -> float:
    """``LP'(N)`` of :func:`early_charged` in units of ``M / E`` seconds (nan when unsolved)."""
    from scipy.optimize import linprog

    from collsynth.tens.bounds import box_stages as bs

    class Program(bs._Program):
        NAMES = bs._Program.NAMES + ("e", "Ro", "Ri")

    lp = Program(N)
    bs._capacities_and_causality(lp, N, U, G, H)
    bs._coverage(lp, N, k, C, c)
    _charge_early(lp, N, k)
    A, rhs, eq = lp.matrix()
    cost = np.zeros(A.shape[1])
    cost[lp.col["p"]] = cost[lp.col["q"]] = 1.0
    res = linprog(cost, A_ub=A[~eq], b_ub=rhs[~eq], A_eq=A[eq], b_eq=rhs[eq], bounds=[(0, None)] * A.shape[1],
                  method="highs")
    return float(res.fun) if res.status == 0 else float("nan")


def _charge_early(lp, N: int, k: int) -> None:
    """Rows splitting the imports (``Qd``) into early ones (``e``: leaving in ``d*``'s NIC step
    or the next, when no node can yet hold every input) and the others (leaving two NIC steps
    after ``d*``'s at least), with deliveries that are neither the ``k - 1`` exports nor the
    ``k - 1`` imports of a byte position (``Ro`` leaving, ``Ri`` arriving). The claim: a byte
    position with ``f`` parts completed early (``x`` among them) takes ``2 (k - 1) + f - 2``
    deliveries at least (by hand: two parts exchanging take 2, three parts all completed
    early 5), so the early imports leaving up to NIC step ``j`` number at most the byte
    positions whose ``d*`` left by ``j`` plus every extra delivery."""
    col, add, upto = lp.col, lp.add, lp.upto
    after = lambda name, j, sign=1.0: [] if j >= N - 1 else lp.after(name, j, sign)  # noqa: E731
    every = upto("Pd", N - 1, -1) + upto("Qd", N - 1, -1) + upto("Ro", N - 1, -1)
    for j in range(N):
        add([(1, col["Pd"][j]), (1, col["Qd"][j]), (1, col["Ro"][j]), (-1, col["x"][j])])
        add([(1, col["Pe"][j]), (1, col["Qe"][j]), (1, col["Ri"][j]), (-1, col["n"][j])])
        add(upto("Ri", j) + upto("Ro", j - 1, -1))
        add([(1, col["e"][j]), (-1, col["Qd"][j])])
        add(after("mu", j - 1, k - 1) + after("Qd", j + 1, -1) + after("e", j + 1) + after("e", j - 1, -1))
        add(upto("e", j) + upto("mu", j, -1) + every, -2.0 * (k - 1))
    add(upto("Ro", N - 1) + upto("Ri", N - 1, -1))


def render(rows: list[dict]) -> str:
    """The rows as a Markdown table."""
    names = ("as priced", "box free", "one box hop", *(f"turn {t}" for t in TURNS), "turn 0, one box hop")
    head = ["fabric", "GPUs", "A sync ms (pieces)", "box-stage bound ms", "over it",
            "program over A's trees: as priced / box links free / one box hop, ms (pieces)",
            "stage model: turn 0 / 4 / 8 / turn 0 with one box hop, ms (pieces)",
            "A then B / B then A, verified, ms (pieces)", "early imports charged (not a bound) ms (N)",
            "s (load)", "note"]
    body = []
    for r in rows:
        p = r.get("programs", {})
        shown = [f"{p[n][0]:.4f} ({p[n][1]})" if n in p else "-" for n in names]
        cr = r.get("crossed", {})
        crossed_cell = " / ".join(f"{v[0]:.4f} ({v[1]})" + ("" if v[2] else " NOT VERIFIED")
                                  for k, v in cr.items() if k != "stopped") or cr.get("stopped", "-")
        a_ms, sb = r.get("a_ms"), r.get("stage_bound_ms")
        early = r.get("early_ms")
        body.append([r["fabric"], cell(r.get("gpus"), ","), f"{cell(a_ms, '.4f')} ({r.get('a_pieces', '-')})",
                     cell(sb, ".4f"), cell(a_ms and sb and a_ms / sb, ".4f"), " / ".join(shown[:3]),
                     " / ".join(shown[3:]), crossed_cell, f"{early[0]:.4f} ({early[1]})" if early else "-",
                     f"{cell(r.get('seconds'), '.1f')} ({cell(r.get('load'), '.1f')})", r.get("stopped", "")])
    return "\n".join(table(head, body))


def main() -> None:
    from bench_tier3_gap import run_fabrics

    run_fabrics(__doc__, _row, render)


if __name__ == "__main__":
    main()
