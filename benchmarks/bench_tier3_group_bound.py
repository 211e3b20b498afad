"""The group-crossing bound (:mod:`collsynth.tens.bounds.group_crossings`) on the smallest rail
Clos fabrics behind a spine, beside the crossing and box-stage bounds and a producer's verified
``sync`` price.

Run: ``python benchmarks/bench_tier3_group_bound.py [--only LABEL] [--sizes B,B] [--producers P,P]
[--time-limit S]`` (default: ``bench_tier3_proxy.py``'s fabrics at 1 MiB and 1 GiB, no producer;
one process a row). Per fabric and size: the instance's ``sync`` bound and its source, the
crossing and box-stage bounds, the group-crossing bound with its seconds, and each producer's
verified ``sync`` price sent on links over the largest of the bounds.

Measured: README, "Crossings between groups in the bound".
"""

from __future__ import annotations

import argparse
import time

from bench_tier3_proxy import FABRICS
from fresh_process import each_in_a_fresh_process
from markdown_table import table


def measure(label: str, params: dict, size: float, producers: tuple, limit: float) -> dict:
    """One row: the bounds and each producer's verified ``sync`` price on links."""
    from collsynth.instances import make_instance
    from collsynth.instances.generators import build
    from collsynth.solvers import pipeline
    from collsynth.solvers.pipeline import Options
    from collsynth.tens.bounds import instance_bounds
    from collsynth.tens.bounds.group_crossings import group_crossing_bound

    inst = make_instance(build("rail_clos", {**params, "fabric_copy": False}), "allreduce", message_bytes=size)
    b = instance_bounds(inst)
    t0 = time.time()
    g = group_crossing_bound(inst, b.part("sync_latency"), b.part("sync_bandwidth"))
    b._parts["sync_group_crossings"] = (g,)  # computed once, timed alone
    out = {"fabric": label, "bytes": size, "bound_s": b.sync.value, "source": b.sync.source,
           "crossing_s": b.parts["sync_injections"][0].value, "box_s": b.parts["sync_box_stages"][0].value,
           "group_s": g.value, "group_wall_s": time.time() - t0, "runs": {}}
    for name in producers:
        row, sched = pipeline.run(inst, name, Options(time_limit=limit))
        ok = row.get("verified") and row.get("time_sync_s") is not None and sched.routing == "links"
        out["runs"][name] = row["time_sync_s"] if ok else None
    return out


def render(rows: list[dict], names: tuple) -> str:
    """The markdown table: bounds in ms, each producer's ms and its ratio to the larger bound."""
    head = ["fabric", "bytes", "sync bound ms (source)", "crossing bound ms", "box-stage bound ms", "group bound ms (s)"] + \
        [f"{n} ms (x larger bound)" for n in names]
    body = []
    for r in rows:
        if "stopped" in r:
            body.append([r.get("fabric", "?"), "-", f"stopped: {r['stopped']}"] + ["-"] * (len(head) - 3))
            continue
        top = max(r["bound_s"], r["group_s"] or 0.0)
        cells = [f"{1e3 * v:.4f} ({v / top:.4f}x)" if v else "-" for v in (r["runs"].get(n) for n in names)]
        group = f"{1e3 * r['group_s']:.4f} ({r['group_wall_s']:.0f})" if r["group_s"] else "-"
        body.append([r["fabric"], f"{r['bytes']:.0f}", f"{1e3 * r['bound_s']:.4f} ({r['source']})",
                     f"{1e3 * r['crossing_s']:.4f}", f"{1e3 * r['box_s']:.4f}", group] + cells)
    return table(head, body)


def _row(args) -> dict:
    try:
        return measure(*args)
    except Exception as e:
        return {"fabric": args[0], "stopped": f"{type(e).__name__}: {str(e)[:100]}"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="fabrics whose label contains this")
    ap.add_argument("--sizes", default=f"{1 << 20},{1 << 30}", help="message bytes, comma separated")
    ap.add_argument("--producers", default="", help="producers to price, comma separated")
    ap.add_argument("--time-limit", type=float, default=120.0, help="seconds a producer")
    a = ap.parse_args()
    producers = tuple(p for p in a.producers.split(",") if p)
    specs = [(label, params, float(size), producers, a.time_limit) for label, params in FABRICS
             if a.only is None or a.only in label for size in a.sizes.split(",")]
    rows = list(each_in_a_fresh_process(_row, specs, progress=lambda r: str({k: v for k, v in r.items()
                                                                           if k != "runs"})))
    print("\n".join(render(rows, producers)))


if __name__ == "__main__":
    main()
