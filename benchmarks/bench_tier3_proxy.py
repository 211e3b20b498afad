"""Whether the three-tier allreduce's gap to the box-stage bound shows on the smallest rail Clos
fabrics with two or three groups of boxes behind a spine, and whether the TEN ILP can say there
where the optimum lies.

Run: ``python benchmarks/bench_tier3_proxy.py [--only LABEL] [--sizes B,B] [--producers P,P]
[--ilp-sizes B,B] [--time-limit S]`` (default: the fabrics below at 1 MiB and 1 GiB,
``fabric_copy = false``, NICs and spine ports of 50 GB/s and 2.7 us, NVLink 450 GB/s and
0.47 us, as ``rail_clos``'s defaults; one process a row). Per fabric and size:

- the instance's ``sync`` bound and its parts (:mod:`collsynth.tens.bounds`; on these fabrics the
  box-stage bound, :mod:`collsynth.tens.bounds.box_stages`);
- each producer's schedule, verified and priced under ``sync`` (a row of
  :func:`collsynth.solvers.pipeline.run`), and its ratio to the bound for its routing: the
  ``sync`` bound for schedules sent on links, ``L + T*`` for those routed end to end (``routed``;
  priced as whole routes, they are not held to the box-stage bound);
- the TEN ILP with native reductions (:mod:`collsynth.formulations.ten_ilp_combining`, Won et
  al., "TACOS", MICRO 2024, Section V-A, with combining chunks as in Zhao et al., NSDI 2025,
  Appendix A) by horizon search from the lower bound, at the ``--ilp-sizes`` only: the
  optimum in TEN timesteps of its class (one reduction tree a chunk, equal chunks) when the
  search ends in time, priced under ``sync``; otherwise the horizon it stopped at.

The ILP's schedule is an upper bound on the ``sync`` optimum (equal chunks, one tree a chunk),
the bound a lower one: the optimum lies between; where the two meet the bound is tight there.

Measured: README, "The three-tier allreduce's turnaround" (the proxy paragraph).
"""

from __future__ import annotations

import argparse
import time

from fresh_process import each_in_a_fresh_process
from markdown_table import table

FABRICS = (
    ("two groups of two 2-GPU boxes", {"groups_per_pod": 2, "boxes_per_group": 2, "gpus_per_box": 2, "rails": 2,
                                        "spines": 1, "radix": 16}),
    ("two groups of two 1-GPU boxes", {"groups_per_pod": 2, "boxes_per_group": 2, "gpus_per_box": 1, "rails": 1,
                                        "spines": 1, "radix": 16}),
    ("three groups of two 1-GPU boxes", {"groups_per_pod": 3, "boxes_per_group": 2, "gpus_per_box": 1, "rails": 1,
                                          "spines": 1, "radix": 16}),
)
PRODUCERS = ("tree-packing", "ring", "recursive-doubling", "nccl-tree", "direct")


def measure(label: str, params: dict, size: float, producers: tuple, ilp: bool, limit: float) -> dict:
    """One row: the bound's parts, each producer's verified ``sync`` price and the ILP's outcome."""
    from collsynth.instances import make_instance
    from collsynth.instances.generators import build
    from collsynth.solvers import pipeline
    from collsynth.solvers.pipeline import Options
    from collsynth.tens.bounds import instance_bounds

    inst = make_instance(build("rail_clos", {**params, "fabric_copy": False}), "allreduce", message_bytes=size)
    b = instance_bounds(inst)
    out = {"fabric": label, "bytes": size, "bound_s": b.sync.value, "bound_source": b.sync.source,
           "crossing_s": b.parts["sync_injections"][0].value, "runs": {}}
    names = producers + (("ten-ilp-combining",) if ilp else ())
    for name in names:
        opts = Options(time_limit=limit, **({"driver": "horizon", "params": {"start": "reversal"}}
                                            if name.startswith("ten-") else {}))
        t0 = time.time()
        try:
            row, sched = pipeline.run(inst, name, opts)
        except Exception as e:  # a producer refusing this fabric is a cell of the table
            out["runs"][name] = {"refused": str(e)[:80]}
            continue
        priced = row.get("verified") and row.get("time_sync_s") is not None
        out["runs"][name] = {"sync_s": row["time_sync_s"] if priced else None, "steps": row.get("steps"),
                             "bound_s": row.get("lower_bound_s"), "routing": sched.routing if sched is not None else None,
                             "status": row.get("status"), "message": str(row.get("message", ""))[:100],
                             "wall_s": time.time() - t0}
    return out


def _cell(run: dict) -> str:
    """A producer's cell: its ``sync`` ms and its ratio to the bound for its routing (a schedule
    routed end to end is held to ``L + T*``, ``Bounds.sync_routed``, not to the box-stage bound)."""
    if "refused" in run:
        return "refused"
    if run["sync_s"] is None:
        return f"none ({run['message'][:60]})"
    routed = "" if run["routing"] == "links" else ", routed"
    return (f"{1e3 * run['sync_s']:.4f} ({run['sync_s'] / run['bound_s']:.4f}x{routed}, {run['steps']} steps, "
            f"{run['wall_s']:.0f} s)")


def render(rows: list[dict], names: tuple) -> str:
    """The markdown table of the rows: bound ms and source, crossing bound ms, one column a producer."""
    head = ["fabric", "bytes", "bound ms (source)", "crossing bound ms"] + [f"{n} ms (x its bound)" for n in names]
    body = []
    for r in rows:
        if "stopped" in r:
            body.append([r.get("fabric", "?"), "-", f"stopped: {r['stopped']}"] + ["-"] * (len(head) - 3))
            continue
        cells = [_cell(r["runs"][n]) if n in r["runs"] else "-" for n in names]
        body.append([r["fabric"], f"{r['bytes']:.0f}", f"{1e3 * r['bound_s']:.4f} ({r['bound_source']})",
                     f"{1e3 * r['crossing_s']:.4f}"] + cells)
    return table(head, body)


def _row(args) -> dict:
    label, params, size, producers, ilp, limit = args
    try:
        return measure(label, params, size, producers, ilp, limit)
    except Exception as e:
        return {"fabric": label, "stopped": f"{type(e).__name__}: {str(e)[:100]}"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="fabrics whose label contains this")
    ap.add_argument("--sizes", default=f"{1 << 20},{1 << 30}", help="message bytes, comma separated")
    ap.add_argument("--producers", default=",".join(PRODUCERS))
    ap.add_argument("--ilp-sizes", default=str(1 << 20), help="sizes at which the TEN ILP runs too ('' for none)")
    ap.add_argument("--time-limit", type=float, default=120.0, help="seconds a producer")
    a = ap.parse_args()
    sizes = [float(s) for s in a.sizes.split(",") if s]
    ilp_sizes = {float(s) for s in a.ilp_sizes.split(",") if s}
    producers = tuple(p for p in a.producers.split(",") if p)
    specs = [(label, params, size, producers, size in ilp_sizes, a.time_limit)
             for label, params in FABRICS if a.only is None or a.only in label for size in sizes]
    rows = list(each_in_a_fresh_process(_row, specs, progress=lambda r: str({k: v for k, v in r.items() if k != "runs"})))
    names = producers + (("ten-ilp-combining",) if ilp_sizes else ())
    print("\n".join(render(rows, names)))


if __name__ == "__main__":
    main()
