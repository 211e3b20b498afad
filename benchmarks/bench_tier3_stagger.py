"""Whether staggering shards closes the three-tier allreduce's ``sync`` gap: the reduce-scatter's
pieces and the allgather's sized apart, so that one shard's allgather may cross the NICs while
another's reduce-scatter does and the ramps of one half may hide under the other's steady state.

Run: ``python benchmarks/bench_tier3_stagger.py [--only LABEL] [--skip LABEL] [--min-gpus N]
[--max-gpus N]`` (default: the rail Clos and HPN rows of ``bench_clusters.py`` at 2,000-4,400
GPUs, 1 GiB, ``fabric_copy = false``). Per fabric: the run's trees (*A*) at their pieces and shift
of least ``sync`` price, verified (``bench_tier3_gap.verified_trees``), the box-stage bound
(:mod:`collsynth.tens.bounds.box_stages`), and the staggered program (:func:`staggered`) over

- A's halves, and A's paired as priced (the per-slot coupling: ``bench_tier3_tree_mix._least``);
- A's and *B*'s halves at once (B: the root exporting every crossing itself,
  ``bench_tier3_tree_mix.root_exports``; where the fabric has one listed tree a root), any
  reduce-scatter family feeding any allgather family (both end and start at the same root);
- the stage model's halves (``bench_tier3_turnaround.stage_family``, the same numbers) at
  turnarounds 4 and 0: a what-if shape, not trees.

Each is least over :data:`PIECES` slots, with the alphas of its solution's busy steps: a what-if
price, not a schedule and not a bound (its ``T_B`` part bounds such schedules of as many slots,
see :func:`staggered`).

Measured: README, "Staggered shards on the three-tier fabrics".
"""

from __future__ import annotations

import os
import time

import numpy as np
from cluster_rows import timed_row
from fresh_process import cell
from markdown_table import table

ROW_TIMEOUT_S = 900
PIECES = (40, 50, 60, 70, 80, 90)  # the slot counts the programs are solved at
TURNS = (4, 0)  # the stage model's turnarounds


def halves(family, D: int | None = None) -> tuple[tuple, tuple]:
    """``(reduce_scatter, allgather)`` of a piece's rows ``(steps, cost, alpha)``, each
    ``(steps, cost, alpha, D)``: the rows at steps up to ``D`` and the others. ``D`` defaults to
    half the rows, the layout of ``bench_tier3_tree_mix._families`` (the reduce-scatter's rows at
    steps ``1 .. D``, the allgather's at ``D + 1 .. 2 D``).

    >>> rs, ag = halves((np.array([2, 1, 3, 4]), np.eye(4), np.ones(4)))
    >>> rs[0].tolist(), ag[0].tolist(), rs[3]
    ([2, 1], [3, 4], 2)
    """
    steps, cost, alpha = family
    D = len(steps) // 2 if D is None else D
    first = steps <= D
    if not first.any() or first.all():
        raise ValueError(f"family: expected rows at steps up to {D} and after it")
    return (steps[first], cost[first], alpha[first], D), (steps[~first], cost[~first], alpha[~first], D)


def link_classes(*families):
    """The families with links whose loads agree in every row of every family merged into one
    column (their constraints in :func:`staggered` are the same; on SuperPOD 8 SU 12,288 links
    become 6 columns), links no row loads dropped."""
    costs = [f[1] for f in families]
    stack = np.vstack(costs)
    used = stack[:, stack.max(axis=0) > 0]
    keep = np.unique(used, axis=1)
    cut = np.cumsum([len(c) for c in costs])[:-1]
    return [(f[0], part, f[2]) for f, part in zip(families, np.split(keep, cut))]


def staggered(reduce_scatters: list, allgathers: list, slots: int, coupled: bool = False) -> tuple[float, float]:
    """``(T_B, T_B + alphas)`` in seconds: the synchronous price of Zhao et al., "Efficient
    Direct-Connect Topologies for Collective Communications" (NSDI 2025, Section 3.2: per step the
    largest load over bandwidth, plus the alphas) least over the pieces' sizes, the halves sized
    apart. Each half of :func:`halves` gets ``slots`` slots ``o`` (rows at steps ``o + step``) of
    sizes ``x`` (reduce-scatter) and ``y`` (allgather), each half's summing to the message; the
    allgather's bytes started by step ``t`` (slots with ``o + D + 1 <= t``) are at most the
    reduce-scatter's completed by ``t - 1`` (``o + D <= t - 1``). ``coupled`` asks for one family
    each and equal sizes slot by slot: the piece-size program over the pair as priced.

    Why ``T_B`` bounds every staggered schedule over these halves whose pieces start within
    ``slots`` steps: split the message into shards in any way, each shard's pieces on any of
    these halves, a piece's allgather any number of steps after its reduce-scatter's pipeline
    rule (the first piece's reduce-scatter starting at slot 0). Under ``sync`` the
    loads of pieces on one link in one step add, so the schedule's ``T_B`` is this program's
    objective at ``x`` (``y``) the bytes whose reduce-scatter (allgather) rows start at each slot;
    a byte's allgather starts from its root after its reduce-scatter ended there, so the
    cumulative rows hold and the program's least is at most the schedule's ``T_B``. The alphas
    added are those of the program's own solution (steps where a slot of nonzero size has a
    row), so the total is a what-if price, not a bound.

    >>> one = (np.array([1]), np.array([[1.0]]), np.array([0.0]), 1)
    >>> staggered([one], [(np.array([2]), np.array([[1.0]]), np.array([0.0]), 1)], 2)[0]
    2.0
    """
    from scipy import sparse
    from scipy.optimize import linprog

    tagged = [(h, o, half) for half, hs in enumerate((reduce_scatters, allgathers)) for h in hs for o in range(slots)]
    J, n = tagged[0][0][1].shape[1], len(tagged)
    T = max(o + int(h[0].max()) for h, o, _ in tagged) + 1
    r, c, v = [], [], []
    ready = np.zeros((T, n))
    for i, (h, o, half) in enumerate(tagged):
        rows, js = np.nonzero(h[1])
        r += ((o + h[0][rows]) * J + js).tolist()
        c += [i] * len(rows)
        v += h[1][rows, js].tolist()
        ready[o + h[3] + 1:, i] = 1.0 if half else -1.0
    loads = sparse.hstack([sparse.coo_matrix((v, (r, c)), shape=(T * J, n)),
                           -sparse.kron(sparse.identity(T), np.ones((J, 1)))])
    each = np.array([[float(half == k) for _, _, half in tagged] for k in (0, 1)])
    if coupled:
        each = np.vstack([each, np.hstack([np.eye(slots), -np.eye(slots)])])
    A_ub = sparse.vstack([loads, np.hstack([ready, np.zeros((T, T))])]).tocsr()
    res = linprog(np.r_[np.zeros(n), np.ones(T)], A_ub=A_ub,
                  b_ub=np.zeros(T * J + T), A_eq=np.hstack([each, np.zeros((len(each), T))]),
                  b_eq=np.r_[1.0, 1.0, np.zeros(len(each) - 2)], bounds=[(0, None)] * (n + T), method="highs")
    if res.status != 0:
        raise ValueError(f"staggered program: {res.message}")
    alpha = np.zeros(T)
    for i, (h, o, _) in enumerate(tagged):
        if res.x[i] > 1e-9:
            np.maximum.at(alpha, o + h[0], h[2])
    return float(res.fun), float(res.fun + alpha.sum())


def least_slots(reduce_scatters: list, allgathers: list, counts=PIECES, coupled: bool = False) -> tuple[float, int]:
    """``(ms, slots)``: the least ``T_B`` plus alphas of :func:`staggered` over the slot counts."""
    return min((1e3 * staggered(reduce_scatters, allgathers, q, coupled)[1], q) for q in counts)


def _row(args) -> dict:
    label, generator, params, timeout = args
    return timed_row({"fabric": label, "stage": "instance"}, lambda out: _measure(out, generator, params), timeout)


def _measure(out: dict, generator: str, params: dict) -> None:
    from bench_clusters_combining import _crossing_bounds
    from bench_tier3_gap import verified_trees
    from bench_tier3_tree_mix import _families, root_exports

    from collsynth.tens import pipelined_allreduce as pa

    t = time.perf_counter()
    inst, a = verified_trees(out, generator, params)
    out.update(a_ms=1e3 * pa.price_sync(a, inst).total_s, a_pieces=a.pieces[0], stage="bound")
    _crossing_bounds(out, inst)
    out["stage"] = "programs"
    b = root_exports(a, inst)
    fam = _families(inst, a, a if isinstance(b, str) else b)
    (ra, aa), (rb, ab) = (halves(f) for f in link_classes(fam["A"], fam["B"]))
    got = {"A paired": least_slots([ra], [aa], coupled=True), "A": least_slots([ra], [aa])}
    if not isinstance(b, str):
        got["A and B"] = least_slots([ra, rb], [aa, ab])
    got.update(_stage_programs(inst, fam["A"]))
    out.update(programs=got, b_stopped=b if isinstance(b, str) else None,
               seconds=time.perf_counter() - t, load=os.getloadavg()[0])


def _stage_programs(inst, family) -> dict:
    """The staggered program over the stage model's halves at :data:`TURNS`, its numbers those
    of ``family`` (as ``bench_tier3_turnaround._programs`` takes them)."""
    from bench_tier3_turnaround import stage_family

    from collsynth.tens.bounds.injections import box_parts

    la = inst.topology.link_arrays
    part, _ = box_parts(inst)
    inside = (part[la.src] == part[la.dst]) & (part[la.src] >= 0)
    total = family[1].sum(axis=0)
    T, ratio = float(total.max()), float(total[inside].max() / total.max())
    got = {}
    for turn in TURNS:
        rs, ag = halves(stage_family(turn, 2, T, ratio, float(la.alpha.max()), float(la.alpha.min())), 3)
        got[f"turn {turn} paired"] = least_slots([rs], [ag], coupled=True)
        got[f"turn {turn}"] = least_slots([rs], [ag])
    return got


def render(rows: list[dict]) -> str:
    """The rows as a Markdown table."""
    names = ("A paired", "A", "A and B", "turn 4 paired", "turn 4", "turn 0 paired", "turn 0")
    head = ["fabric", "GPUs", "A sync ms (pieces)", "box-stage bound ms", "over it",
            "A's halves: paired / staggered ms (slots)", "A's and B's halves staggered ms (slots)",
            "stage model turn 4: paired / staggered", "turn 0: paired / staggered",
            "least staggered over the bound", "s (load)", "note"]
    body = []
    for r in rows:
        p, sb = r.get("programs", {}), r.get("stage_bound_ms")
        shown = [f"{p[n][0]:.4f} ({p[n][1]})" if n in p else "-" for n in names]
        least = min((p[n][0] for n in ("A", "A and B") if n in p), default=None)
        a_ms = r.get("a_ms")
        body.append([r["fabric"], cell(r.get("gpus"), ","), f"{cell(a_ms, '.4f')} ({r.get('a_pieces', '-')})",
                     cell(sb, ".4f"), cell(a_ms and sb and a_ms / sb, ".4f"), " / ".join(shown[:2]), shown[2],
                     " / ".join(shown[3:5]), " / ".join(shown[5:]), cell(least and sb and least / sb, ".4f"),
                     f"{cell(r.get('seconds'), '.1f')} ({cell(r.get('load'), '.1f')})",
                     r.get("stopped") or r.get("b_stopped") or ""])
    return "\n".join(table(head, body))


def main() -> None:
    from bench_tier3_gap import run_fabrics

    run_fabrics(__doc__, _row, render)


if __name__ == "__main__":
    main()
