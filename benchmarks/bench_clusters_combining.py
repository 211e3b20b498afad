"""Clusters as built, combining collectives: 1 GiB reduce-scatter and allreduce with tree packing
on the fabrics of ``bench_clusters.py``, 256 to 4,096 GPUs.

Run: ``python benchmarks/bench_clusters_combining.py [--only LABEL] [--skip LABEL] [--kinds
reduce_scatter,allreduce] [--max-gpus N] [--row-timeout S] [--no-bounds] [--no-fabric-copy]
[--objective sync]``.
Each row runs in a process of its own (its peak memory is its own) and prints, per fabric,
size and kind: the cut optimum (Zhao et al., "ForestColl", arXiv 2402.06787, Section 4; the
reduce-scatter's on the transposed links, the allreduce's as its reduce-scatter's plus its
allgather's) and the seconds to it; the seconds to the trees (the first box's trees on the
transposed links moved by the box shifts, :func:`collsynth.solvers.packing.translated.translated`,
run through :func:`collsynth.solvers.packing.producer.run_compact`); the trees kept as trees plus
the pipeline rule (the reduce-scatter: the time reversal of those trees, a GPU's partial
leaving after all its children's arrived; the allreduce:
:class:`collsynth.tens.pipelined_allreduce.PipelinedAllreduce`), verified and priced under
``sync`` in that form at the pipeline depth of least sync price (an allreduce's halves each at
its own, then its allgather overlapped with its reduce-scatter where that prices lower,
:func:`collsynth.solvers.packing.allreduce_depth.at_sync_depths`, whatever depth
``event`` is priced at; ``sync ms (pieces)`` and ``event ms (pieces)`` say each; seconds for both); the price
under ``event`` (FIFO links) simulated per link orbit (:mod:`collsynth.tens.pipelined_event`) at
the depth of least price that fits ``--event-sends`` (:mod:`orbit_event`); where the explicit
sends fit :data:`EXPLICIT_SENDS`, the expansion verified and priced under ``event`` (a check) and
``event-inorder`` (program order) at the deepest pipeline within that cap; the run's own trees
as returned (``run sync / event ms``: its ``sync`` price and its producer's ``event`` price); the
instance's lower bounds under ``sync`` and ``event`` (:func:`collsynth.tens.bounds.instance_bounds`);
the peak resident memory of the row; the CPU seconds of the optimum and trees (``time.process_time``,
which the load of a shared machine inflates far less than the wall seconds) and the load average
when they ended. Ratios are to the cut optimum (the bandwidth term alone).
With ``--no-fabric-copy`` the Clos fabrics' leaves, spines and cores are declared to copy nothing
(``fabric_copy = false``), so the allreduce's bound takes its crossings into the boxes
(:mod:`collsynth.tens.bounds.injections`) and the boxes' reduction before them and spread after
(:mod:`collsynth.tens.bounds.box_stages`): an allreduce row prints both (with the partition bound
as ``T*``, even under ``--no-bounds``) and the ``sync`` price over the second.

Measured: README, "Clusters as built" (reduce-scatter and allreduce at scale), with the command.
"""

from __future__ import annotations

import os
import time

import numpy as np
import orbit_event
from bench_clusters import ROWS, _gpus
from cluster_rows import chosen, cluster_parser, timed_row
from fresh_process import cell, each_in_a_fresh_process
from markdown_table import table

M = 1 << 30  # 1 GiB reduce-scatter / allreduce
EXPLICIT_SENDS = 4_000_000  # the event models price the explicit sends up to this many
ROW_TIMEOUT_S = 600
KINDS = ("reduce_scatter", "allreduce")
FABRIC_COPY = ("rail_clos", "fat_tree", "hpn")  # the generators whose fabric switches --no-fabric-copy declares


def _row(args) -> dict:
    label, generator, params, kind, timeout, bounds, event_sends, objective = args
    return timed_row({"fabric": label, "kind": kind, "stage": "instance"},
                     lambda out: _measure(out, generator, params, kind, bounds, event_sends, objective), timeout)


def _measure(out: dict, generator: str, params: dict, kind: str, bounds: bool,
             event_sends: int = orbit_event.EVENT_SENDS, objective: str | None = None) -> None:
    from collsynth.instances.generators import build
    from collsynth.instances.instance import make_instance
    from collsynth.solvers.packing.producer import run_compact
    from collsynth.solvers.packing.allreduce_depth import at_sync_depths
    from collsynth.solvers.producers import Options
    from collsynth.tens.compact_forms import form_of

    t = time.perf_counter()
    inst = make_instance(build(generator, params), kind, message_bytes=M)
    out.update(gpus=len(inst.collective.nodes), instance_s=time.perf_counter() - t, stage="optimum + trees")
    t, cpu = time.perf_counter(), time.process_time()
    outcome = run_compact(inst, Options(time_limit=ROW_TIMEOUT_S, params={"objective": objective} if objective else {}))
    trees, extra = outcome.schedule, outcome.extra
    halves = extra.get("halves", [extra])
    out.update(optimum_ms=1e3 * extra["optimum_s"], trees_s=time.perf_counter() - t,
               trees_cpu_s=time.process_time() - cpu, load=os.getloadavg()[0],
               trees=sum(h["trees"] for h in halves), listed=sum(h["listed_trees"] for h in halves),
               stage="verify+price")
    form = form_of(trees)
    t = time.perf_counter()
    why = form.verify(trees, inst)
    run_event = (outcome.prices or {}).get("event")  # the run's own trees as returned, under both models
    out.update(run_sync_ms=1e3 * form.price_sync(trees, inst).total_s, run_event_ms=run_event and 1e3 * run_event.total_s,
               run_pieces="/".join(str(h.pieces) for h in getattr(trees, "halves", (trees,)))
               + (f", delay {trees.delay}" if getattr(trees, "delay", None) is not None else ""))
    synced = at_sync_depths(trees, inst) if kind == "allreduce" else trees  # sync at its own depths
    why = why or (form.verify(synced, inst) if synced is not trees else None)
    price = form.price_sync(synced, inst)
    out.update(verified=why is None, sync_ms=1e3 * price.total_s, sync_bw_ms=1e3 * price.T_B_s,
               pieces="/".join(str(h.pieces) for h in getattr(synced, "halves", (synced,))),
               verify_price_s=time.perf_counter() - t, stage="event (per link orbit)")
    halves = getattr(trees, "halves", (trees,))
    out.update(orbit_event.least_event(trees, inst, min(h.pieces for h in halves), event_sends))
    out["stage"] = "event (explicit)"
    _event(out, inst, trees, form)
    if kind == "allreduce":
        out["stage"] = "crossing bounds"
        _crossing_bounds(out, inst)
    if bounds:
        out["stage"] = "bounds"
        t = time.perf_counter()
        from collsynth.tens.bounds import instance_bounds

        b = instance_bounds(inst)
        out.update(sync_bound_ms=b.sync.value and 1e3 * b.sync.value,
                   event_bound_ms=b.event.value and 1e3 * b.event.value, bounds_s=time.perf_counter() - t)


def _crossing_bounds(out: dict, inst) -> None:
    """The allreduce's crossing bound (:mod:`collsynth.tens.bounds.injections`) and box-stage
    bound (:mod:`collsynth.tens.bounds.box_stages`) into ``out``, with cheaper ``L`` and ``T*``
    than the instance's (each only lowers them): ``T*`` the partition bound, ``L`` the latency
    from participant 0 to the farthest (every result holds its input, brought over hops in
    distinct steps, each paying its alpha; a switch's instant hop none)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import dijkstra

    from collsynth.tens.bounds.box_stages import box_stage_bound
    from collsynth.tens.bounds.demand import arcs_of, instant_out
    from collsynth.tens.bounds.injections import injection_bound
    from collsynth.tens.bounds.partitions import partition_bound
    from collsynth.tens.bounds.record import Bound
    from collsynth.tens.bounds.supply import SyncSupply

    t = time.perf_counter()
    topo, nodes = inst.topology, list(inst.collective.nodes)
    la = topo.link_arrays
    weight = np.where(instant_out(topo), 1e-300, np.maximum(la.alpha, 1e-300))  # zero weights stay edges
    far = dijkstra(csr_matrix((weight, (la.src, la.dst)), shape=(topo.size, topo.size)), indices=nodes[0])
    latency = Bound(float(np.max(far[nodes])), "s", "sync", "distance")
    bandwidth = partition_bound(inst, SyncSupply(arcs_of(topo)), "sync")
    crossing, stages = injection_bound(inst, latency, bandwidth), box_stage_bound(inst, latency, bandwidth)
    out.update(crossing_bound_ms=crossing.value and 1e3 * crossing.value,
               stage_bound_ms=stages.value and 1e3 * stages.value, crossing_bounds_s=time.perf_counter() - t)


def _event(out: dict, inst, trees, form) -> None:
    """The explicit sends at the deepest pipeline within :data:`EXPLICIT_SENDS`, verified and
    priced under ``event`` (a check of the price per link orbit) and ``event-inorder`` (into
    ``out``), when one piece fits."""
    from collsynth.solvers.packing.producer import _with_header
    from collsynth.solvers.packing.compact import at_pieces
    from collsynth.tens import cost_models, verify

    halves = getattr(trees, "halves", (trees,))
    per_piece = sum(h.sends // h.pieces for h in halves)
    pieces = min(min(h.pieces for h in halves), EXPLICIT_SENDS // max(1, per_piece))
    if pieces < 1:
        return
    t = time.perf_counter()
    shallower = [at_pieces(h, pieces) for h in halves]
    sched = _with_header(form.expand(type(trees)(*shallower) if len(halves) > 1 else shallower[0]), inst)
    ok = verify.verify(sched, inst) is None
    out.update(explicit_pieces=pieces, explicit_verified=ok)
    if ok:
        out.update(explicit_ms=1e3 * cost_models.price(sched, inst, "event").total_s,
                   inorder_ms=1e3 * cost_models.price(sched, inst, "event-inorder").total_s)
    out["explicit_s"] = time.perf_counter() - t


def render(rows: list[dict]) -> str:
    """The rows as a Markdown table."""
    head = ["fabric", "kind", "GPUs", "optimum ms", "sync bound ms", "event bound ms", "crossing bound ms",
            "box-stage bound ms", "sync / box-stage", "sync ms (pieces)", "sync/opt",
            "sync T_B/opt", "event ms (pieces)", "event/opt", "explicit event ms (pieces)", "in-order/opt",
            "run sync / event ms (pieces)", "trees (listed)", "optimum+trees s", "its CPU s (load)", "verify+price s",
            "event s", "explicit s", "bounds s", "peak MiB", "note"]
    body = []
    for r in rows:
        opt, sy, ev, io = r.get("optimum_ms"), r.get("sync_ms"), r.get("event_ms"), r.get("inorder_ms")
        body.append([r["fabric"], r["kind"], cell(r.get("gpus"), ","), cell(opt, ".3f"), cell(r.get("sync_bound_ms"), ".3f"),
                     cell(r.get("event_bound_ms"), ".3f"), cell(r.get("crossing_bound_ms"), ".3f"),
                     cell(r.get("stage_bound_ms"), ".3f"),
                     cell(sy and r.get("stage_bound_ms") and sy / r["stage_bound_ms"], ".4f"),
                     f"{cell(sy, '.3f')} ({r.get('pieces', '-')})",
                     cell(sy and opt and sy / opt, ".3f"), cell(r.get("sync_bw_ms") and opt and r["sync_bw_ms"] / opt, ".4f"),
                     f"{cell(ev, '.3f')} ({r.get('event_pieces', '-')})", cell(ev and opt and ev / opt, ".3f"),
                     f"{cell(r.get('explicit_ms'), '.3f')} ({r.get('explicit_pieces', '-')})",
                     cell(io and opt and io / opt, ".3f"),
                     f"{cell(r.get('run_sync_ms'), '.3f')} / {cell(r.get('run_event_ms'), '.3f')} ({r.get('run_pieces', '-')})",
                     f"{r.get('trees', '-')} ({r.get('listed', '-')})",
                     cell(r.get("trees_s"), ".1f"),
                     f"{cell(r.get('trees_cpu_s'), '.1f')} ({cell(r.get('load'), '.1f')})",
                     cell(r.get("verify_price_s"), ".1f"), cell(r.get("event_s"), ".1f"),
                     cell(r.get("explicit_s"), ".1f"),
                     cell(r.get("bounds_s"), ".1f"), cell(r.get("peak_MiB"), ".0f"),
                     r.get("stopped", "" if r.get("verified", True) else "NOT VERIFIED")
                     + (" event by group prefixes" if r.get("event_exact_pairs") is False else "")])
    return "\n".join(table(head, body))


def main() -> None:
    ap = cluster_parser(__doc__, 256, 4096, ROW_TIMEOUT_S)
    ap.add_argument("--kinds", default=",".join(KINDS), help="comma-separated: reduce_scatter, allreduce")
    ap.add_argument("--no-bounds", action="store_true", help="leave out the instance's lower bounds")
    ap.add_argument("--event-sends", type=int, default=orbit_event.EVENT_SENDS,
                    help="simulate at most this many sends per pipeline depth under event (default %(default)s)")
    ap.add_argument("--objective", choices=("sync",), help="tree packing's objective: sync keeps an allreduce's "
                                                           "halves at their own sync depths, no event depth search")
    ap.add_argument("--no-fabric-copy", action="store_true",
                    help="the Clos fabrics' switches declared to copy nothing (fabric_copy = false: reliable "
                         "connections), so the allreduce's crossing bound applies")
    a = ap.parse_args()
    specs = [(label, g, {**p, "fabric_copy": False} if a.no_fabric_copy and g in FABRIC_COPY else p, kind,
              a.row_timeout, not a.no_bounds, a.event_sends, a.objective)
             for label, g, p in chosen(ROWS, a.only, a.skip, a.min_gpus, a.max_gpus, _gpus) for kind in a.kinds.split(",")]
    rows = each_in_a_fresh_process(_row, specs, lambda r: render([r]).splitlines()[-1])  # each row as it ends
    print(render(rows))


if __name__ == "__main__":
    main()
