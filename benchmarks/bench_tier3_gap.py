"""Where the three-tier fabrics' allreduce under ``sync`` loses against the box-stage bound.

Run: ``python benchmarks/bench_tier3_gap.py [--only LABEL] [--skip LABEL] [--min-gpus N]
[--max-gpus N]`` (default: the rail Clos and HPN rows of ``bench_clusters.py`` at 2,000-4,400
GPUs, 1 GiB, ``fabric_copy = false``). Per fabric, the run's trees kept as trees plus the
pipeline rule at their pieces and shift of least ``sync`` price
(:func:`collsynth.solvers.packing.allreduce_depth.at_sync_depths`, as
``bench_clusters_combining.py --objective sync`` prices them) and the box-stage bound
(:mod:`collsynth.tens.bounds.box_stages`, ``T*`` the partition bound, ``L`` the distance), split
into their parts:

- the schedule's busy steps, the steps paying the NIC alpha, ``T_L`` and ``T_B`` (the
  synchronous price, Zhao et al., "Efficient Direct-Connect Topologies for Collective
  Communications", NSDI 2025, Section 3.2);
- the bound's best number of NIC steps ``N*`` and its bandwidth program ``LP(N*)``, and the
  program at the schedule's own NIC steps (``LP(S)``: the least bandwidth time any schedule of
  that many NIC steps could have, by the bound's argument) with the bound's value there;
- the piece-size linear program of the same trees, pieces and shift
  (:func:`collsynth.solvers.packing.overlap_sizes.joint_sized`'s program) solved again with the
  loads on the links inside the boxes left out: what the box links' stages, one to two steps
  before a piece's first NIC hop in the reduce-scatter and after its last in the allgather,
  cost the pipeline's ramps (a what-if, not a schedule);
- the same program with the box links' stages free to run ahead of their pieces (the
  reduce-scatter's first two depths, up to :data:`AHEAD` box-only steps before the first) or
  behind them (the allgather's last two, as far past the last): a relaxation of any rule that
  lets those hops carry several pieces a step (what-if, not a schedule).

Measured: README, "Where the three-tier allreduce's 1.3-1.8 % over the box-stage bound goes".
"""

from __future__ import annotations

import os
import time
from dataclasses import replace

import numpy as np
from bench_clusters import ROWS, _gpus
from cluster_rows import chosen, cluster_parser, timed_row
from fresh_process import cell, each_in_a_fresh_process
from markdown_table import table

M = 1 << 30
ROW_TIMEOUT_S = 900
FABRICS = ("rail_clos", "hpn")
AHEAD = 6  # box-only steps the what-if adds before the first step and after the last


def _row(args) -> dict:
    label, generator, params, timeout = args
    return timed_row({"fabric": label, "stage": "instance"}, lambda out: _measure(out, generator, params), timeout)


def run_trees(out: dict, generator: str, params: dict):
    """The 1 GiB allreduce on the fabric and the run's trees at their `sync` depths, verified
    (``out`` records the GPUs and the stage reached)."""
    from collsynth.instances.generators import build
    from collsynth.instances.instance import make_instance
    from collsynth.solvers.packing.allreduce_depth import at_sync_depths
    from collsynth.solvers.packing.producer import run_compact
    from collsynth.solvers.producers import Options
    from collsynth.tens import pipelined_allreduce

    inst = make_instance(build(generator, {**params, "fabric_copy": False}), "allreduce", message_bytes=M)
    out.update(gpus=len(inst.collective.nodes), stage="trees")
    trees = run_compact(inst, Options(time_limit=ROW_TIMEOUT_S, params={"objective": "sync"})).schedule
    f = at_sync_depths(trees, inst)
    return inst, f, pipelined_allreduce.verify(f, inst)


def verified_trees(out: dict, generator: str, params: dict):
    """``(instance, trees)`` of :func:`run_trees`; ValueError where the trees do not verify."""
    inst, f, why = run_trees(out, generator, params)
    if why is not None:
        raise ValueError("the run's trees do not verify")
    return inst, f


def _measure(out: dict, generator: str, params: dict) -> None:
    from bench_clusters_combining import _crossing_bounds

    from collsynth.tens import pipelined_allreduce

    t = time.perf_counter()
    inst, f, why = run_trees(out, generator, params)
    price = pipelined_allreduce.price_sync(f, inst)
    out.update(verified=why is None, sync_ms=1e3 * price.total_s, T_L_ms=1e3 * price.T_L_s, T_B_ms=1e3 * price.T_B_s,
               steps=price.steps, pieces="/".join(map(str, f.pieces)) + f", delay {f.delay}", stage="bound")
    _crossing_bounds(out, inst)
    _bound_parts(out, inst, price)
    out["stage"] = "ramp program"
    out.update(_ramps(f, inst))
    out.update(seconds=time.perf_counter() - t, load=os.getloadavg()[0])


def _bound_parts(out: dict, inst, price) -> None:
    """The box-stage bound's ``N*`` (the best ``N alpha_n + LP(N)`` over ``N`` in 19-121, the
    bound itself searches every ``N``: :func:`collsynth.tens.bounds.ramp.least_over_steps`) and
    ``LP(N*)``, and ``LP`` at the schedule's NIC steps, into ``out``: the steps paying the NIC
    alpha, from ``T_L = NIC steps x alpha_n + other steps x the box alpha``."""
    from collsynth.tens.bounds.box_stages import stage_numbers, stage_program

    k, C, c, E, U, G, H, alpha_n = stage_numbers(inst)
    unit = M / E
    lp = lambda N: stage_program(N, k, C, c, U / E, G / E, H / E) * unit  # noqa: E731
    nic_steps = int(round((price.T_L_s - _box_alpha(inst) * price.steps) / (alpha_n - _box_alpha(inst))))
    best = min(range(20, 121, 2), key=lambda N: N * alpha_n + lp(N))
    best = min(range(best - 1, best + 2), key=lambda N: N * alpha_n + lp(N))
    out.update(nic_steps=nic_steps, N_star=best, lp_star_ms=1e3 * lp(best),
               lp_own_ms=1e3 * lp(nic_steps), bound_own_ms=1e3 * (lp(nic_steps) + nic_steps * alpha_n))


def _box_alpha(inst) -> float:
    """The alpha of the links inside the boxes (the least of any link)."""
    return float(inst.topology.link_arrays.alpha.min())


def _ramps(f, inst) -> dict:
    """The piece-size program of ``f``'s trees at its pieces and shift: as priced, without the
    loads on the links inside the boxes, and with the box hops' stages free to run ahead or
    behind (:func:`_ahead`; module doc). Nothing where the halves run in turn (no shift)."""
    from collsynth.solvers.packing.overlap_sizes import _fractions
    from collsynth.tens import allreduce_overlap as ao
    from collsynth.tens.bounds.injections import box_parts

    if f.delay is None or f.pieces[0] != f.pieces[1]:
        return {}
    rs, ag = (replace(h, cuts=None) for h in f.halves)
    P, delay = rs.pieces, f.delay
    part, _ = box_parts(inst)
    la = inst.topology.link_arrays
    rows, inside = [], []
    for h in (rs, ag):
        group, used, loads, scale, (depths, _) = ao._depth_loads(h, la, inst.collective.chunk_bytes)
        rows.append((depths, loads * (scale[used] / la.bandwidth[used])[None, :], used))
    links = np.union1d(rows[0][2], rows[1][2])
    cost = np.concatenate([_spread(load, used, links) for _, load, used in rows])
    inside = (part[la.src[links]] == part[la.dst[links]]) & (part[la.src[links]] >= 0)
    S = ao.last_step(rs)
    t = np.arange(1, max(S, delay + ao.last_step(ag)) + 1)[:, None]
    run = np.concatenate([t + rows[0][0][None, :] - (S - P + 1), t - delay - rows[1][0][None, :] - 1], axis=1)
    got = {}
    for name, c in (("ramp_ms", cost), ("ramp_no_box_ms", np.where(inside[None, :], 0.0, cost))):
        y = _fractions(run, c / c.max(), P, 1e-6) / P
        on = (run >= 0) & (run < P)
        share = np.where(on, y[np.clip(run, 0, P - 1)], 0.0)
        got[name] = 1e3 * float((share @ c).max(axis=1).sum())
    box_rows = np.r_[rows[0][0] >= rows[0][0].max() - 1, rows[1][0] >= rows[1][0].max() - 1]
    got["ramp_ahead_ms"] = 1e3 * _ahead(run, cost, box_rows, len(rows[0][0]), P)
    return got


def _ahead(run: np.ndarray, cost: np.ndarray, box_rows: np.ndarray, n_rs: int, P: int) -> float:
    """The least summed largest load per step (seconds) when the rows ``box_rows`` (the
    reduce-scatter's two deepest depths, then the allgather's) may carry each piece in any
    step no later (the reduce-scatter's) or no earlier (the allgather's) than the pipeline rule
    puts it, over :data:`AHEAD` more steps at each end, a pair of depths one step apart (the box
    switch forwards in the next step): the linear program ``min sum_t z_t``, ``z_t >= load_t,j``."""
    from scipy import sparse
    from scipy.optimize import linprog

    T, J = run.shape[0] + 2 * AHEAD, cost.shape[1]
    entries, var = [], P  # (row, variable, coefficient); variables: pieces, then (piece, moved step) pairs
    eq = [(0, q, 1.0) for q in range(P)]
    for d in np.flatnonzero(~box_rows):
        t, q = np.nonzero((run[:, d:d + 1] >= 0) & (run[:, d:d + 1] < P))[0], run[:, d]
        entries += [((s + AHEAD) * J + j, int(q[s]), cost[d, j]) for s in t for j in np.flatnonzero(cost[d])]
    for first, rows in ((True, np.flatnonzero(box_rows[:n_rs])), (False, n_rs + np.flatnonzero(box_rows[n_rs:]))):
        lead = rows[np.argmin([np.flatnonzero(run[:, r] == 0)[0] for r in rows])]  # the pair's earlier depth
        for q in range(P):
            at = int(np.flatnonzero(run[:, lead] == q)[0]) + AHEAD  # its step under the rule (index from 0)
            for s in (range(0, at + 1) if first else range(at, T - 1)):
                for r in rows:
                    step = s + (0 if r == lead else 1)
                    entries += [(step * J + j, var, cost[r, j]) for j in np.flatnonzero(cost[r])]
                eq.append((1 + q + (0 if first else P), var, 1.0))
                var += 1
            eq.append((1 + q + (0 if first else P), q, -1.0))
    r, c, v = map(np.asarray, zip(*entries))
    A = sparse.hstack([sparse.coo_matrix((v, (r, c)), shape=(T * J, var)),
                       -sparse.kron(sparse.identity(T), np.ones((J, 1)))]).tocsr()
    er, ec, ev = map(np.asarray, zip(*eq))
    A_eq = sparse.coo_matrix((ev, (er, ec)), shape=(1 + 2 * P, var + T)).tocsr()
    res = linprog(np.r_[np.zeros(var), np.ones(T)], A_ub=A, b_ub=np.zeros(T * J), A_eq=A_eq,
                  b_eq=np.r_[1.0, np.zeros(2 * P)], bounds=[(0, None)] * (var + T), method="highs")
    return float(res.fun) if res.status == 0 else float("nan")


def _spread(load: np.ndarray, used: np.ndarray, links: np.ndarray) -> np.ndarray:
    """``load`` (``[depths, used]``) as columns of ``links``."""
    out = np.zeros((len(load), len(links)))
    out[:, np.searchsorted(links, used)] = load
    return out


def render(rows: list[dict]) -> str:
    """The rows as a Markdown table."""
    head = ["fabric", "GPUs", "sync ms (pieces)", "box-stage bound ms", "over it", "busy / NIC steps",
            "T_L ms", "T_B ms", "N*", "LP(N*) ms", "LP at own NIC steps ms", "bound at own NIC steps ms",
            "ramp program ms", "without box links ms", "box stages ahead / behind ms", "s (load)", "note"]
    body = []
    for r in rows:
        sy, sb = r.get("sync_ms"), r.get("stage_bound_ms")
        body.append([r["fabric"], cell(r.get("gpus"), ","), f"{cell(sy, '.3f')} ({r.get('pieces', '-')})",
                     cell(sb, ".3f"), cell(sy and sb and sy / sb, ".4f"),
                     f"{r.get('steps', '-')} / {r.get('nic_steps', '-')}", cell(r.get("T_L_ms"), ".4f"),
                     cell(r.get("T_B_ms"), ".4f"), str(r.get("N_star", "-")), cell(r.get("lp_star_ms"), ".4f"),
                     cell(r.get("lp_own_ms"), ".4f"), cell(r.get("bound_own_ms"), ".4f"),
                     cell(r.get("ramp_ms"), ".4f"), cell(r.get("ramp_no_box_ms"), ".4f"),
                     cell(r.get("ramp_ahead_ms"), ".4f"),
                     f"{cell(r.get('seconds'), '.1f')} ({cell(r.get('load'), '.1f')})",
                     r.get("stopped", "" if r.get("verified", True) else "NOT VERIFIED")])
    return "\n".join(table(head, body))


def run_fabrics(doc: str, row, render, fabrics=FABRICS) -> None:
    """The command line of a tier-3 benchmark (its module doc ``doc``): each chosen row of
    :data:`bench_clusters.ROWS` on ``fabrics`` measured by ``row`` in a fresh process, printed
    as it finishes (``render``), then the table."""
    a = cluster_parser(doc, 2000, 4400, ROW_TIMEOUT_S).parse_args()
    specs = [(label, g, p, a.row_timeout) for label, g, p in chosen(ROWS, a.only, a.skip, a.min_gpus, a.max_gpus, _gpus)
             if g in fabrics]
    print(render(each_in_a_fresh_process(row, specs, lambda r: render([r]).splitlines()[-1])))


def main() -> None:
    run_fabrics(__doc__, _row, render)


if __name__ == "__main__":
    main()
