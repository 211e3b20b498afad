"""All-to-all by the concurrent flow LP (``flow-alltoall``) against the instance's bound, 1 GB at alpha 0.

Run: ``python benchmarks/bench_alltoall.py`` (or ``python -m pytest -m benchmark
benchmarks/bench_alltoall.py -s``; ``--only NAME`` for one row). Each row runs in its own process
through the normal pipeline (``collsynth.solvers.pipeline.run``: verified, then priced) and
prints: the instance's bound under the sync model (its best argument: the concurrent flow LP,
``flow``, or a cut), the largest cut bound the node-set search found, our time under the sync
and the event model and their ratios to the bound, the generation time (three LP solves, decomposition,
schedule), the sends and the peak memory. ForestColl has no all-to-all, so there is no
published figure to set beside ours.
"""

from __future__ import annotations

import argparse
import resource

import pytest
from fresh_process import cell, each_in_a_fresh_process
from switched_systems import systems

M = 1e9
TIME_LIMIT_S = 900
ROWS = systems("A100 x1", "A100 x2", "A100 x4", "MI250 x1", "MI250 x2", "DGX-H100 x2", "DGX-H100 x4", "DGX-2 x2")


def _row(args) -> dict:
    label, generator, params = args
    from collsynth.instances.generators import build
    from collsynth.instances.instance import make_instance
    from collsynth.solvers import pipeline
    from collsynth.solvers.producers import Options
    from collsynth.tens.bounds import instance_bounds

    inst = make_instance(build(generator, params), "alltoall", message_bytes=M, name=f"{generator}-alltoall")
    bounds = instance_bounds(inst)
    cut = bounds.part("sync_bandwidth", "cut")
    out = {"system": label, "gpus": len(inst.collective.nodes), "bound_s": bounds.sync.value,
           "bound_source": bounds.sync.source, "cut_s": cut.value}
    row, sched = pipeline.run(inst, "flow-alltoall", Options(time_limit=TIME_LIMIT_S))
    out.update(status=row["status"], verified=row["verified"], event_s=row["time_event_s"],
               sync_s=row["time_sync_s"], gen_s=row["build_s"], sends=len(sched) if sched is not None else 0,
               message=row["message"], pieces=(row.get("extra") or {}).get("pieces"))
    out["peak_MiB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def table(rows: list[dict]) -> str:
    """The rows as a Markdown table."""
    head = ("| system | GPUs | bound ms (source) | largest cut ms | sync ms | sync/bound | event ms | event/bound | "
            "pieces | sends | generation s | peak MiB |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        ev, sy, b = r.get("event_s"), r.get("sync_s"), r["bound_s"]
        lines.append("| " + " | ".join([
            r["system"], str(r["gpus"]), f"{cell(b * 1e3, '.4f')} ({r['bound_source']})",
            cell(r["cut_s"] and r["cut_s"] * 1e3, ".4f"),
            cell(sy and sy * 1e3, ".4f"), cell(sy and sy / b, ".4f"),
            cell(ev and ev * 1e3, ".4f"), cell(ev and ev / b, ".4f"),
            cell(r.get("pieces"), "d"), cell(r.get("sends"), ","), cell(r.get("gen_s"), ".2f"),
            cell(r["peak_MiB"], ".0f"),
        ]) + " |")
    return "\n".join(lines)


def main(only: str | None = None) -> list[dict]:
    """Every row (or the one named ``only``), each in a fresh process; prints the table."""
    rows = each_in_a_fresh_process(_row, [spec for spec in ROWS if not only or spec[0] == only],
                                   lambda r: f"{r['system']}: {r['status']} {r['message'] or ''}")
    print(table(rows))
    return rows


@pytest.mark.benchmark
def test_bench_alltoall():
    assert all(r["verified"] and r["sync_s"] >= r["bound_s"] * (1 - 1e-9) for r in main())  # the bound is a bound


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None, help="one system label, e.g. 'A100 x2'")
    main(parser.parse_args().only)
