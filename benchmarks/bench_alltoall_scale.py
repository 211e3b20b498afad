"""All-to-all (mixture-of-experts) at 1,024-4,096 GPUs: PXN routes kept as one box's routes plus the
pipeline rule, against the block cut bound, on the fabrics of ``bench_clusters.py``.

Run: ``python benchmarks/bench_alltoall_scale.py [--only LABEL] [--skip LABEL] [--min-gpus N]
[--max-gpus N] [--row-timeout S] [--explicit-sends K]``. Each row runs in a process of its own
(its peak memory is its own) and prints, per fabric: the block cut bound
(:func:`collsynth.tens.bounds.blocks.block_cut`: the box, unit and pod cuts, one min cut each)
and its seconds; the seconds to ``rail-alltoall``'s routes for one box moved by the box shifts
(:func:`collsynth.solvers.flow.rail_compact.compact_routes`); the form verified and priced under
``sync`` at the pipeline depth of least ``sync`` price (:func:`collsynth.solvers.packing.compact.least_sync`;
seconds for both); where the explicit sends fit ``--explicit-sends`` (default
:data:`EXPLICIT_SENDS`), the expansion verified and priced under ``event`` at the deepest
pipeline within the cap (seconds); the peak resident memory of the row. Each GPU sends 1 GB
(``M / N`` to every other GPU). ``sync T_B/bound`` is the bandwidth part over the bound (which
has no latency term).

Measured: README, "Clusters as built" (all-to-all at scale), with this command.
"""

from __future__ import annotations

import time

from bench_clusters import ROWS, _gpus
from cluster_rows import chosen, cluster_parser, timed_row
from fresh_process import cell, each_in_a_fresh_process
from markdown_table import table

M = 1e9  # bytes each GPU sends (M / N to every other GPU)
EXPLICIT_SENDS = 6_000_000  # the event model prices the explicit sends up to this many
ROW_TIMEOUT_S = 600
EXTRA = [("SuperPOD 8 SU, leaves 2:1", "rail_clos", {"groups_per_pod": 8, "spines": 16, "oversubscription": [2.0, 1.0]})]


def _row(args) -> dict:
    label, generator, params, timeout, cap = args
    return timed_row({"fabric": label, "stage": "instance"}, lambda out: _measure(out, generator, params, cap), timeout)


def _measure(out: dict, generator: str, params: dict, cap: int) -> None:
    from collsynth.instances.generators import build
    from collsynth.instances.instance import make_instance
    from collsynth.solvers.flow.rail_compact import compact_routes
    from collsynth.solvers.packing.compact import at_pieces, least_sync
    from collsynth.tens.bounds.blocks import block_cut
    from collsynth.tens.pipelined_trees import verify

    inst = make_instance(build(generator, params), "alltoall", message_bytes=M)
    out.update(gpus=len(inst.collective.nodes), stage="bound")
    t = time.perf_counter()
    bound = block_cut(inst)
    out.update(bound_ms=bound and 1e3 * bound.value, bound_block=bound and len(bound.witness),
               bound_s=time.perf_counter() - t, stage="routes")
    t = time.perf_counter()
    routes = compact_routes(inst)
    out.update(routes_s=time.perf_counter() - t, listed=len(routes.root), stage="verify+price")
    t = time.perf_counter()
    why = verify(routes, inst)
    routes, price = least_sync(routes, inst)
    out.update(verified=why is None, sync_ms=1e3 * price.total_s, sync_bw_ms=1e3 * price.T_B_s, pieces=routes.pieces,
               hops=routes.sends // routes.pieces // routes.chunks_per_root, verify_price_s=time.perf_counter() - t,
               stage="event (explicit)")
    pieces = min(routes.pieces, cap // max(1, out["hops"] * routes.chunks_per_root))
    if pieces >= 1:
        _event(out, inst, at_pieces(routes, pieces))


def _event(out: dict, inst, routes) -> None:
    """The explicit sends of ``routes`` verified and priced under ``event`` (into ``out``)."""
    from collsynth.solvers.packing.producer import _with_header
    from collsynth.tens import cost_models, verify
    from collsynth.tens.pipelined_trees import expand

    t = time.perf_counter()
    sched = _with_header(expand(routes), inst)
    ok = verify.verify(sched, inst) is None
    out.update(event_pieces=routes.pieces, explicit_verified=ok)
    if ok:
        out["event_ms"] = 1e3 * cost_models.price(sched, inst, "event").total_s
    out["explicit_s"] = time.perf_counter() - t


def render(rows: list[dict]) -> str:
    """The rows as a Markdown table."""
    head = ["fabric", "GPUs", "bound ms (block)", "sync ms (pieces)", "sync/bound", "sync T_B/bound",
            "event ms (pieces)", "event/bound", "route hops", "bound s", "routes s", "verify+price s", "event s",
            "peak MiB", "note"]
    body = []
    for r in rows:
        b, sy, ev = r.get("bound_ms"), r.get("sync_ms"), r.get("event_ms")
        body.append([r["fabric"], cell(r.get("gpus"), ","), f"{cell(b, '.3f')} ({r.get('bound_block', '-')})",
                     f"{cell(sy, '.3f')} ({r.get('pieces', '-')})", cell(sy and b and sy / b, ".4f"),
                     cell(r.get("sync_bw_ms") and b and r["sync_bw_ms"] / b, ".4f"),
                     f"{cell(ev, '.3f')} ({r.get('event_pieces', '-')})", cell(ev and b and ev / b, ".4f"),
                     cell(r.get("hops"), ","), cell(r.get("bound_s"), ".1f"), cell(r.get("routes_s"), ".1f"),
                     cell(r.get("verify_price_s"), ".1f"), cell(r.get("explicit_s"), ".1f"), cell(r.get("peak_MiB"), ".0f"),
                     r.get("stopped", "" if r.get("verified", True) else "NOT VERIFIED")])
    return "\n".join(table(head, body))


def main() -> None:
    ap = cluster_parser(__doc__, 1000, 4400, ROW_TIMEOUT_S)
    ap.add_argument("--explicit-sends", type=int, default=EXPLICIT_SENDS)
    a = ap.parse_args()
    specs = [(label, g, p, a.row_timeout, a.explicit_sends)
             for label, g, p in chosen(ROWS + EXTRA, a.only, a.skip, a.min_gpus, a.max_gpus, _gpus)]
    rows = each_in_a_fresh_process(_row, specs, lambda r: render([r]).splitlines()[-1])  # each row as it ends
    print(render(rows))


if __name__ == "__main__":
    main()
