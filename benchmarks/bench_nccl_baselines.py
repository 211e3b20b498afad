"""NCCL's baselines as NCCL runs them against the classic closed forms, on two-box systems at 1 GB.

Run: ``python benchmarks/bench_nccl_baselines.py [--size BYTES] [--systems a100,h100,...]``.
Prints figures; asserts nothing.

``ring`` and ``double-binary-tree`` (``solvers/closed_form/classics.py``) are one ring / one pair
of trees in rank order, so on a multi-NIC system every hop between boxes goes through one NIC
pair; ``nccl-ring`` and ``nccl-tree`` (``solvers/closed_form/nccl_ring.py``, ``nccl_tree.py``)
build them as NCCL does, one channel per NIC. Every schedule goes through the pipeline
(verified, then priced under ``sync`` and ``event``); the algbw column is ``M / event time``.
"""

from __future__ import annotations

import argparse
import time

SYSTEMS = {"a100": ("forestcoll_a100", {"nodes": 2}), "h100": ("dgx_h100", {"nodes": 2}),
           "mi250": ("forestcoll_mi250", {"nodes": 2}), "dgx2": ("dgx2", {"chassis": 2}),
           "ndv2": ("ndv2", {"chassis": 2})}
ROWS = [("allgather", "ring"), ("allgather", "nccl-ring"), ("allreduce", "ring"), ("allreduce", "nccl-ring"),
        ("allreduce", "double-binary-tree"), ("allreduce", "nccl-tree")]


def main(argv=None) -> list[dict]:
    from collsynth.instances.generators import build
    from collsynth.instances.instance import make_instance
    from collsynth.solvers import pipeline
    from collsynth.solvers.producers import Options

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=2 ** 30)
    parser.add_argument("--systems", default="a100,h100")
    args = parser.parse_args(argv)
    out = []
    print("| system | collective | producer | verified | steps | sync (ms) | event (ms) | closed form (ms) "
          "| algbw event (GB/s) | wall (s) |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|---:|")
    for key in args.systems.split(","):
        gen, params = SYSTEMS[key]
        topo = build(gen, params)
        for kind, producer in ROWS:
            inst = make_instance(topo, kind, message_bytes=args.size)
            t0 = time.perf_counter()
            row, _ = pipeline.run(inst, producer, Options(params={}, time_limit=600))
            cf = ((row.get("extra") or {}).get("closed_form") or {}).get("total_s")
            ev, sy = row["time_event_s"], row["time_sync_s"]
            r = {"system": f"{gen} {params}", "kind": kind, "producer": producer, "verified": row["verified"],
                 "steps": row["steps"], "sync": sy, "event": ev, "closed_form": cf, "wall_s": time.perf_counter() - t0}
            out.append(r)
            ms = lambda t: "-" if t is None else f"{t * 1e3:.3f}"  # noqa: E731
            print(f"| {r['system']} | {kind} | {producer} | {r['verified']} | {r['steps']} | {ms(sy)} | {ms(ev)} | "
                  f"{ms(cf)} | {args.size / ev / 1e9 if ev else float('nan'):.1f} | {r['wall_s']:.1f} |", flush=True)
    return out


if __name__ == "__main__":
    main()
