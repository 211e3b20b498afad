"""The small-message regime at scale: PAT and Bine beside the tree packing's latency choice.

Run: ``python benchmarks/bench_small_messages.py [--ranks 1024,2048,4096] [--sizes 4096,...]
[--methods pat,bine,...] [--time-limit S] [--fabric switch|dgx_h100] [--form auto|compact|explicit]``.
Prints figures; asserts nothing.

The fabric is one GPU per box (the regime NCCL runs PAT in: ``ncclPatEnable``, one rank per
node), every box's NIC on one non-blocking switch: ``switch`` with ``unwind = 0``, 50 GB/s per
port (a 400 Gb/s NDR NIC, the DGX H100 datasheet's) and 1.35 us per link, so 2.7 us from GPU
to GPU (NCCL ``src/graph/tuning.cc`` hwLat, network, Ring/LL). Message sizes 4 KB to 64 MB
(powers of 4), allgather. ``--fabric dgx_h100`` runs the same ranks on DGX H100 boxes instead
(``ranks / 8`` boxes, 8 GPUs on NVSwitch, one rail switch per GPU index, the generator's own
figures): not PAT's regime in NCCL, but where the ranks' distances meet the boxes and the rails.
Methods:

- ``pat``: NCCL's PAT (Jeaugey, arXiv 2506.20252), unbounded aggregation: ``log2 p`` steps;
- ``bine``: Bine butterflies (De Sensi et al., SC'25): ``log2 p`` steps, negabinary peers;
- ``ring``: the classic ring, ``p - 1`` steps (one box per GPU: NCCL's ring is this ring);
- ``tree-packing``: the tree packing with its latency choice (trees and pieces per size,
  :mod:`collsynth.solvers.packing.latency`), through the pipeline under ``--time-limit``; from
  2,048 ranks (``--form compact``: at every rank count) kept as trees plus the pipeline rule at
  the depth of least ``sync`` price, verified and priced under ``sync`` in that form (``event``
  reads explicit sends: not priced, which the row says).

The closed forms' schedules do not depend on the size: each is built and verified once per rank
count and priced under ``sync`` and ``event`` at every size (the pipeline does the same per
run). Each row prints the closed form's own time beside the priced ones, and the wall seconds.
"""

from __future__ import annotations

import argparse
import time

SIZES = [4 ** i * 4096 for i in range(8)]  # 4 KB .. 64 MB
RANKS = [1024, 2048, 4096]
METHODS = ("pat", "bine", "ring", "tree-packing")
BANDWIDTH, ALPHA = 50e9, 1.35e-6


def fabric(ranks: int, name: str = "switch"):
    """One GPU per box on one switch, or DGX H100 boxes (module doc)."""
    from collsynth.instances.generators import build

    if name == "dgx_h100":
        return build("dgx_h100", {"nodes": ranks // 8})
    return build("switch", {"nodes": ranks, "unwind": 0}, bandwidth=BANDWIDTH, alpha=ALPHA)


def closed_form(method: str, p: int, size: float) -> float:
    """The method's closed-form allgather time on the fabric (its module's formula; alpha is a
    GPU-to-GPU route's, two links through the switch, B a port's)."""
    from collsynth.solvers.closed_form import bine, classics, pat

    if method == "pat":
        steps, units = pat.pat_cost("allgather", p)
        return steps * 2 * ALPHA + float(units) * size / p / BANDWIDTH
    if method == "bine":
        return bine.bine_cost("allgather", p, size, 2 * ALPHA, BANDWIDTH)["total_s"]
    return classics.closed_form(method, "allgather", p, message_bytes=size, alpha=2 * ALPHA,
                                bandwidth=BANDWIDTH)["total_s"]


def closed_form_rows(topo, method: str, sizes) -> list[dict]:
    """Build and verify ``method``'s schedule once, then price it at every size."""
    from collsynth.instances.instance import make_instance
    from collsynth.solvers.producers import Options, get
    from collsynth.tens.cost_models import price
    from collsynth.tens.verify import verify

    t0 = time.perf_counter()
    first = make_instance(topo, "allgather", message_bytes=sizes[0])
    out = get(method).run(first, Options(params={}))
    sched = out.schedule
    bad = verify(sched, first)
    built = time.perf_counter() - t0
    rows = []
    for size in sizes:
        inst = make_instance(topo, "allgather", message_bytes=size)
        t1 = time.perf_counter()
        times = {m: price(sched, inst, m).total_s for m in ("sync", "event")} if bad is None else {}
        cf = closed_form(method, len(inst.collective.nodes), size)
        rows.append({"method": method, "size": size, "verified": bad is None, "steps": sched.num_steps,
                     "sends": len(sched), "closed_form": cf, **times,
                     "wall_s": round(built + time.perf_counter() - t1, 1)})
        built = 0.0
    return rows


def packing_row(topo, size: int, limit: float, form: str = "auto") -> dict:
    """The tree packing's latency choice at one size, through the pipeline, in ``form``
    (``auto``: the trees kept as trees from 2,048 ranks; ``compact``: at every rank count)."""
    from collsynth.instances.instance import make_instance
    from collsynth.solvers import pipeline
    from collsynth.solvers.producers import Options

    t0 = time.perf_counter()
    row, _ = pipeline.run(make_instance(topo, "allgather", message_bytes=size), "tree-packing",
                          Options(params={"form": form}, time_limit=limit))
    return {"method": "tree-packing", "size": size, "verified": row["verified"], "steps": row["steps"],
            "status": row["status"], "sync": row["time_sync_s"], "event": row["time_event_s"],
            "wall_s": round(time.perf_counter() - t0, 1), "message": (row.get("message") or "")[:120]}


def _us(t) -> str:
    return "-" if t is None else f"{t * 1e6:,.1f}"


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default=",".join(map(str, RANKS)))
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--fabric", choices=("switch", "dgx_h100"), default="switch")
    parser.add_argument("--time-limit", type=float, default=300.0, help="tree packing's limit per run (s)")
    parser.add_argument("--form", choices=("auto", "compact", "explicit"), default="auto",
                        help="tree packing's --param form (compact: trees plus the pipeline rule, priced under sync)")
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    methods = [m for m in args.methods.split(",") if m]
    unknown = set(methods) - set(METHODS)
    if unknown:
        parser.error(f"--methods: unknown {', '.join(sorted(unknown))}; expected some of {', '.join(METHODS)}")
    rows = []
    print("| ranks | size | method | steps | sends | closed form (us) | sync (us) | event (us) | wall (s) | note |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---|")
    for ranks in (int(x) for x in args.ranks.split(",")):
        topo = fabric(ranks, args.fabric)
        for method in methods:
            found = ([packing_row(topo, s, args.time_limit, args.form) for s in sizes] if method == "tree-packing"
                     else closed_form_rows(topo, method, sizes))
            for r in found:
                if args.fabric != "switch":
                    r["closed_form"] = None  # the closed forms above assume the flat switch
                r["ranks"] = ranks
                note = r.get("message") or ("" if r["verified"] else "NOT VERIFIED")
                print(f"| {ranks:,} | {r['size']:,} | {method} | {r.get('steps')} | {r.get('sends', '-')} | "
                      f"{_us(r.get('closed_form'))} | {_us(r.get('sync'))} | {_us(r.get('event'))} | "
                      f"{r['wall_s']} | {note} |", flush=True)
            rows += found
    return rows


if __name__ == "__main__":
    main()
