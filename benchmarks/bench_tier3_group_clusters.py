"""The three-tier fabrics' allreduce under ``sync`` against the group-crossing bound
(:mod:`collsynth.tens.bounds.group_crossings`), beside the box-stage bound it lifts.

Run: ``python benchmarks/bench_tier3_group_clusters.py [--only LABEL] [--skip LABEL]
[--min-gpus N] [--max-gpus N] [--no-trees]`` (default: the rail Clos and HPN rows of
``bench_clusters.py`` at 2,000-4,400 GPUs, 1 GiB, ``fabric_copy = false``; one process a row).
Per fabric: the instance's ``sync`` bound and its source, the box-stage and group-crossing
bounds (the latter's seconds, its groups and delays), and the run's trees at their pieces and
shift of least ``sync`` price (as ``bench_tier3_gap.py`` makes them), verified and priced under
``sync``, over each bound.

Measured: README, "Crossings between groups in the bound".
"""

from __future__ import annotations

import sys
import time

from bench_tier3_gap import run_fabrics, verified_trees
from cluster_rows import timed_row
from markdown_table import table

TREES = "--no-trees" not in sys.argv


def _row(args) -> dict:
    label, generator, params, timeout = args
    return timed_row({"fabric": label, "stage": "instance"}, lambda out: _measure(out, generator, params), timeout)


def _measure(out: dict, generator: str, params: dict) -> None:
    from collsynth.instances.generators import build
    from collsynth.instances.instance import make_instance
    from collsynth.tens import pipelined_allreduce
    from collsynth.tens.bounds import instance_bounds
    from collsynth.tens.bounds.group_crossings import group_crossing_bound, group_numbers

    inst = make_instance(build(generator, {**params, "fabric_copy": False}), "allreduce", message_bytes=float(1 << 30))
    out.update(gpus=len(inst.collective.nodes), stage="bounds")
    b = instance_bounds(inst)
    lat, bw = b.part("sync_latency"), b.part("sync_bandwidth")
    t0 = time.time()
    group = group_crossing_bound(inst, lat, bw)
    out["group_wall_s"] = time.time() - t0
    b._parts["sync_group_crossings"] = (group,)  # computed once, timed alone above
    g = group_numbers(inst)
    out.update(sync_s=b.sync.value, source=b.sync.source, box_s=b.parts["sync_box_stages"][0].value,
               group_s=group.value, groups=f"G={g['G']} d_c={g['d_c']}" if isinstance(g, dict) else g)
    if TREES:
        out["stage"] = "trees"
        inst, f = verified_trees(out, generator, params)
        out["trees_s"] = pipelined_allreduce.price_sync(f, inst).total_s


def render(rows: list[dict]) -> str:
    head = ["fabric", "GPUs", "sync bound ms (source)", "box-stage bound ms", "group bound ms (s; groups)",
            "trees sync ms", "over box-stage", "over group"]
    body = []
    for r in rows:
        if "stopped" in r:
            body.append([r["fabric"], str(r.get("gpus", "-")), f"stopped: {r['stopped']}"] + ["-"] * 5)
            continue
        t, box, grp = r.get("trees_s"), r["box_s"], r["group_s"]
        body.append([r["fabric"], f"{r['gpus']:,}", f"{1e3 * r['sync_s']:.4f} ({r['source']})", f"{1e3 * box:.4f}",
                     f"{1e3 * grp:.4f} ({r['group_wall_s']:.1f}; {r['groups']})" if grp else f"- ({r['groups']})",
                     f"{1e3 * t:.4f}" if t else "-", f"{t / box:.4f}" if t else "-",
                     f"{t / grp:.4f}" if t and grp else "-"])
    return "\n".join(table(head, body))


def main() -> None:
    if "--no-trees" in sys.argv:
        sys.argv.remove("--no-trees")
    run_fabrics(__doc__, _row, render)


if __name__ == "__main__":
    main()
