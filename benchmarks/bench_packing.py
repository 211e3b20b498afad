"""Tree packing (Zhao et al., "ForestColl", arXiv 2402.06787) against the bound, 1 GB allgather at alpha 0.

Run: ``python benchmarks/bench_packing.py`` (or ``python -m pytest -m benchmark
benchmarks/bench_packing.py -s``; ``--only NAME`` for one row). Each row runs in its own process
(so its peak memory is its own) through the normal pipeline (``collsynth.solvers.pipeline.run``:
verified, then priced) and prints: the optimum by the cut formula (max-flow), the instance's
event-model bound, our time under the in-order event model (``event-inorder``: each link in
step order, as an MSCCL executor runs it; priced here, it is opt-in), the FIFO event model and
the sync model, their ratios to the bound, the trees' shape (``two-level``: at most one relay
between a root and any node, :mod:`collsynth.solvers.packing.twolevel`; ``rings``: arcs of
Hamiltonian rings through GPUs or GPU pairs, :mod:`collsynth.solvers.packing.rings`; else
``greedy`` with the root order the FIFO event price chose, :mod:`collsynth.solvers.packing.orders`; ``for
sync+event``: ring and greedy trees priced against each other, :mod:`collsynth.solvers.packing.shapes`), the time to the
trees (optimum + edge splitting + packing + the root order search), the generation time (trees + schedule), the row's CPU time (the whole row:
generation, verification and pricing; the machine is shared, so wall times vary), the peak
memory, and
ForestColl's published optimum (README: 2x8 A100 346.67 GB/s, 2x16 MI250 354.13 GB/s) beside
ours. Every row, DGX-H100 with 64 boxes included (its schedule stays within the send budget
at a lower pipeline depth), packs, emits, verifies and prices its schedule.
"""

from __future__ import annotations

import argparse
import resource
import time

import pytest
from fresh_process import cell, each_in_a_fresh_process
from switched_systems import systems

M = 1e9
TIME_LIMIT_S = 900
PUBLISHED_GBPS = {"A100 x2": 346.67, "MI250 x2": 354.13}
ROWS = [(*system, True) for system in systems("A100 x1", "A100 x2", "A100 x4", "MI250 x1", "MI250 x2",
                                               "DGX-H100 x2", "DGX-H100 x4", "DGX-H100 x64")]
ROWS.append(("torus 4x4, one slow link", "slow-torus", {}, True))
# ``--corpus``: the corpus's other switched or multi-box systems, read from their instance files
# at 1 GB (their own latencies kept; the forestcoll files at 1, 2 and 4 boxes are the rows above),
# and TE-CCL's DGX-2 and NDv2
CORPUS = [
    ("DGX-1 (corpus)", "corpus:dgx1-allgather", {}, True),
    ("DGX-1 allreduce (corpus)", "corpus:dgx1-allreduce", {}, True),
    ("DGX-1 x2 IB (corpus)", "corpus:dgx1x2-ib-allgather", {}, True),
    ("MI250 x4 (corpus)", "corpus:paper-forestcoll-mi250-4box-allgather", {}, True),
    ("TACOS 4x4x2 ring-complete-switch (corpus)", "corpus:tacos-hier-ring-fc-switch-4x4x2-allgather", {}, True),
    # the corpus's DGX-2 and NDv2 keep TE-CCL's instant switch hop, which the event model cannot
    # price: the same systems with a switch hop taking a timestep, at alpha 0
    ("DGX-2 x2 (TE-CCL's, timestep hop)", "dgx2", {"chassis": 2, "nvswitch_alpha": 0.0, "nic_alpha": 0.0}, True),
    ("DGX-2 x4 (TE-CCL's, timestep hop)", "dgx2", {"chassis": 4, "nvswitch_alpha": 0.0, "nic_alpha": 0.0}, True),
    ("NDv2 x4 (TE-CCL's, timestep hop)", "ndv2", {"chassis": 4, "inter_chassis": "switch", "nvlink_alpha": 0.0,
                                                  "nic_alpha": 0.0}, True),
]


def slow_torus():
    """A 4x4 torus at 100 GB/s per directed link, the link 0 <-> 1 at 25 GB/s."""
    from collsynth.instances.instance import topology_from_dict
    from collsynth.instances.topology import from_edges

    base = topology_from_dict({"generator": "torus", "dims": [4, 4], "bandwidth": 100e9, "alpha": 0.0})
    edges = [(u, v, {"bandwidth": 25e9 if {u, v} == {0, 1} else 100e9, "alpha": 0.0})
             for u, v in base.graph.edges()]
    return from_edges(16, edges, name="torus4x4-slow01")


def instance_of(generator: str, params: dict):
    """The row's 1 GB allgather instance."""
    from collsynth.instances.generators import build
    from collsynth.instances.instance import make_instance

    if generator.startswith("corpus:"):
        from pathlib import Path

        from collsynth.instances.instance import load_instance

        stem = generator.split(":", 1)[1]
        inst = load_instance(Path(__file__).resolve().parents[1] / "instances" / "corpus" / f"{stem}.toml")
        return make_instance(inst.topology, inst.collective.kind, message_bytes=M, name=stem)
    topo = slow_torus() if generator == "slow-torus" else build(generator, params)
    return make_instance(topo, "allgather", message_bytes=M, name=f"{generator}-{params.get('nodes', '')}")


def _row(args) -> dict:
    label, generator, params, pack = args
    from collsynth.solvers import pipeline
    from collsynth.solvers.producers import Options
    from collsynth.tens.bounds import instance_bounds
    from collsynth.tens.cut_optimum import flow_net, optimum

    cpu0 = time.process_time()
    inst = instance_of(generator, params)
    coll = inst.collective
    t0 = time.perf_counter()
    net = flow_net(inst.topology, coll.nodes, [1] * len(coll.nodes))
    opt = optimum(net)
    out = {"system": label, "gpus": len(coll.nodes), "optimum_s": opt.seconds(M / len(coll.nodes), net.unit_bw),
           "optimum_gen_s": time.perf_counter() - t0, "k": opt.k,
           "bound_s": instance_bounds(inst).event.value}
    if pack:
        from collsynth.tens import cost_models

        row, sched = pipeline.run(inst, "tree-packing", Options(time_limit=TIME_LIMIT_S))
        out.update(status=row["status"], verified=row["verified"], event_s=row["time_event_s"],
                   sync_s=row["time_sync_s"], gen_s=row["build_s"], wall_s=row["wall_s"],
                   sends=len(sched) if sched is not None else 0, message=row["message"],
                   trees_s=sum(f.get(k, 0.0) for f in row["extra"].get("forests", [])
                               for k in ("optimum_s", "splitting_s", "packing_s", "order_search_s"))
                   if row.get("extra") else None,
                   shape=", ".join(_shape(f) for f in row["extra"].get("forests", [])) if row.get("extra") else None)
        if sched is not None and row["verified"]:  # the pipeline verified it
            t1 = time.perf_counter()
            out["inorder_s"] = cost_models.price(sched, inst, "event-inorder").total_s
            out["inorder_price_s"] = time.perf_counter() - t1
    out["cpu_s"] = time.process_time() - cpu0
    out["peak_MiB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def _shape(f: dict) -> str:
    """A forest's shape as the table writes it: its root order (greedy) or door rule (rings),
    and the models it was chosen for when ring and greedy trees were priced against each other."""
    notes = [f["root_order"] if f["shape"] == "greedy" else f.get("door_rule")]
    notes.append(f"for {f['shape_chosen_for']}" if f.get("shape_chosen_for") else None)
    notes = [n for n in notes if n]
    return f["shape"] + (f" ({'; '.join(notes)})" if notes else "")


def table(rows: list[dict]) -> str:
    """The rows as a Markdown table."""
    head = ("| system | GPUs | optimum (cut) ms | our bound ms | event-inorder ms | inorder/bound | event ms | "
            "event/bound | sync ms | sync/bound | trees | sends | trees s | generation s | CPU s | peak MiB | ours GB/s | "
            "ForestColl GB/s |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        io, ev, sy, b = r.get("inorder_s"), r.get("event_s"), r.get("sync_s"), r["bound_s"]
        lines.append("| " + " | ".join([
            r["system"], str(r["gpus"]), cell(r["optimum_s"] * 1e3, ".4f"), cell(b * 1e3, ".4f"),
            cell(io and io * 1e3, ".4f"), cell(io and io / b, ".4f"),
            cell(ev and ev * 1e3, ".4f"), cell(ev and ev / b, ".4f"),
            cell(sy and sy * 1e3, ".4f"), cell(sy and sy / b, ".4f"), r.get("shape") or "",
            cell(r.get("sends"), ","), cell(r.get("trees_s"), ".1f"), cell(r.get("gen_s", r["optimum_gen_s"]), ".1f"),
            cell(r.get("cpu_s"), ".1f"), cell(r["peak_MiB"], ".0f"),
            cell(M / r["optimum_s"] / 1e9, ".2f"), cell(PUBLISHED_GBPS.get(r["system"]), ".2f"),
        ]) + " |")
    return "\n".join(lines)


def main(only: str | None = None, corpus: bool = False) -> list[dict]:
    """Every row (or the one named ``only``; the corpus rows with ``corpus``), each in a fresh
    process; prints the table."""
    rows = each_in_a_fresh_process(_row, [s for s in ROWS + (CORPUS if corpus else []) if not only or s[0] == only],
                                   lambda r: f"{r['system']}: {r.get('status', 'optimum only')} {r.get('message', '')}")
    print(table(rows))
    return rows


@pytest.mark.benchmark
def test_bench_packing():
    rows = main()
    for r in rows:
        assert r["bound_s"] >= r["optimum_s"] * (1 - 1e-9)  # the bound is the optimum


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None, help="one system label, e.g. 'A100 x2'")
    parser.add_argument("--corpus", action="store_true", help="also the corpus's DGX-1, 4-box MI250 and TACOS "
                                                               "hierarchy systems, and TE-CCL's DGX-2 and NDv2")
    args = parser.parse_args()
    main(args.only, args.corpus)
