"""All-to-all (``flow-alltoall``) on rail-optimised Clos fabrics against the instance's bound, 1 GB at alpha 0.

Run: ``python benchmarks/bench_alltoall_clos.py`` (``--only LABEL`` for one row, ``--time-limit S``
per row). Each row runs in its own process through the normal pipeline (verified, then priced)
and prints the columns of ``bench_alltoall.py`` for ``rail-alltoall`` (20 pieces) and
``flow-alltoall`` (automatic pieces): the bound under the sync model and its source, the event
model's bound (in the cut column), our time under the sync and event models and their ratios to the
bound, generation seconds, sends and peak memory. The fabrics are :func:`rail_clos` at 64 to
256 GPUs, 1:1 and 2:1 at the leaf tier (``over`` in the label), beside ``dgx_h100`` with one
switch per rail at 16 and 32 boxes. ``--routes``: ``rail-alltoall``'s routes and rate alone at
1,024-2,048 GPUs against the box and group cut bounds derived by hand (no schedule, no LP).

Measured 2026-12-06 on a shared 2-core machine (sync / event over the sync bound): rail_clos 64
rail-alltoall 1.115 / 1.038, flow-alltoall 1.042 / 1.007; 64 at 2:1 rail 1.136 / 1.129, flow
1.038 / 1.114; 128 rail 1.117 / 1.068, flow 19.58 ms / 18.96 ms against the rail row's bound
of 18.76 ms (its own run's bound fell back to 3.42 ms, the flow LP not finishing beside it).
"""

from __future__ import annotations

import argparse

import multiprocessing as mp
import resource

from bench_alltoall import table

M = 1e9
TIME_LIMIT_S = 900
RAIL_PIECES = 20  # rail-alltoall's pieces here: verifying and pricing its sends is what takes the time

SMALL = {"pods": 1, "gpus_per_box": 8, "rails": 8}
FABRICS = [
    ("rail_clos 64", "rail_clos", {**SMALL, "groups_per_pod": 2, "boxes_per_group": 4, "spines": 2}),
    ("rail_clos 64 over 2:1", "rail_clos", {**SMALL, "groups_per_pod": 2, "boxes_per_group": 4, "spines": 2,
                                            "oversubscription": [2.0, 1.0]}),
    ("rail_clos 128", "rail_clos", {**SMALL, "groups_per_pod": 2, "boxes_per_group": 8, "spines": 4}),
    ("rail_clos 128 over 2:1", "rail_clos", {**SMALL, "groups_per_pod": 2, "boxes_per_group": 8, "spines": 4,
                                             "oversubscription": [2.0, 1.0]}),
    ("rail_clos 256", "rail_clos", {**SMALL, "groups_per_pod": 4, "boxes_per_group": 8, "spines": 4}),
    ("rail_clos 256 over 2:1", "rail_clos", {**SMALL, "groups_per_pod": 4, "boxes_per_group": 8, "spines": 4,
                                             "oversubscription": [2.0, 1.0]}),
    ("dgx_h100 16", "dgx_h100", {"nodes": 16}),
    ("dgx_h100 32", "dgx_h100", {"nodes": 32}),
]
ROWS = [(f"{label} {producer}", generator, params, producer)
        for label, generator, params in FABRICS for producer in ("rail-alltoall", "flow-alltoall")]


def _row(spec) -> dict:
    """One row (``bench_alltoall.py``'s columns) of ``producer`` through the pipeline."""
    label, generator, params, producer = spec
    from collsynth.instances.generators import build
    from collsynth.instances.instance import make_instance
    from collsynth.solvers import pipeline
    from collsynth.solvers.producers import Options

    inst = make_instance(build(generator, params), "alltoall", message_bytes=M, name=f"{generator}-alltoall")
    given = {"pieces": RAIL_PIECES} if producer == "rail-alltoall" else {}
    row, sched = pipeline.run(inst, producer, Options(time_limit=TIME_LIMIT_S, params=given))
    bounds = (row.get("extra") or {}).get("bounds") or {}
    out = {"system": label, "gpus": len(inst.collective.nodes), "status": row["status"], "message": row["message"],
           "bound_s": bounds.get("sync", {}).get("value"), "bound_source": bounds.get("sync", {}).get("label"),
           "cut_s": bounds.get("event", {}).get("value"), "verified": row["verified"],
           "event_s": row["time_event_s"], "sync_s": row["time_sync_s"], "gen_s": row["build_s"],
           "sends": len(sched) if sched is not None else 0, "pieces": (row.get("extra") or {}).get("pieces")}
    out["peak_MiB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def _child(spec, conn) -> None:
    conn.send(_row(spec))


def in_own_process(spec) -> dict:
    """``_row(spec)`` in a spawned, non-daemonic process (flow-alltoall solves big LPs in a child of its own)."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(spec, child))
    proc.start()
    row = parent.recv()
    proc.join()
    return row


SCALE = [("rail_clos 1024", {}), ("rail_clos 1024 over 2:1", {"oversubscription": [2.0, 1.0]}),
         ("rail_clos 2048 three-tier", {"pods": 8, "groups_per_pod": 1, "spines": 8, "cores": 64})]


def _route_row(spec) -> dict:
    """``rail-alltoall``'s routes and rate alone (no schedule) against the box and group cuts by hand."""
    label, params = spec
    import time

    from collsynth.instances.clos import clos_plan
    from collsynth.instances.generators import build
    from collsynth.solvers.flow.rail_alltoall import link_loads, rail_routes

    plan = clos_plan(params)
    topo = build("rail_clos", params)
    n, group, m = plan["gpus"], plan["boxes_per_group"] * plan["gpus_per_box"], M / plan["gpus"]
    box_cut = (n - plan["gpus_per_box"]) * m / plan["nic"]
    group_up = plan["leaves"] / plan["pods"] / plan["groups_per_pod"] * plan["leaf_up"] * plan["fabric"]
    group_cut = group * (n - group) * m / group_up if plan["leaf_up"] else 0.0
    t0 = time.perf_counter()
    rate = max(link_loads(topo, rail_routes(topo), m).values())
    return {"fabric": label, "gpus": n, "routes_s": time.perf_counter() - t0, "rate_s": rate,
            "cut_s": max(box_cut, group_cut), "peak_MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def route_scale() -> None:
    """The :data:`SCALE` rows (routes and rate only), each in its own process."""
    print("| fabric | GPUs | routes + loads s | rate ms | hand cut ms | rate / cut | peak MiB |\n|---|---|---|---|---|---|---|")
    for spec in SCALE:
        with mp.get_context("spawn").Pool(1) as pool:
            r = pool.apply(_route_row, (spec,))
        print(f"| {r['fabric']} | {r['gpus']} | {r['routes_s']:.1f} | {r['rate_s'] * 1e3:.4f} | {r['cut_s'] * 1e3:.4f} | "
              f"{r['rate_s'] / r['cut_s']:.4f} | {r['peak_MiB']:.0f} |", flush=True)


def main(only: str | None = None) -> list[dict]:
    """Every row (or the one labelled ``only``), each in a fresh process; prints the table."""
    rows = []
    for spec in ROWS:
        if not only or spec[0] == only:
            rows.append(in_own_process(spec))
            print(f"{rows[-1]['system']}: {rows[-1]['status']} {rows[-1]['message'] or ''}", flush=True)
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    print(table(rows))
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None, help="one row label, e.g. 'rail_clos 64 rail-alltoall'")
    parser.add_argument("--routes", action="store_true", help="only the routes and rate at 1,024-2,048 GPUs")
    args = parser.parse_args()
    route_scale() if args.routes else main(args.only)
