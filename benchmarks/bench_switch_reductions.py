"""Tree packing's reductions through kept switches (verified route by route), 1 GB at alpha 0.

Run: ``python benchmarks/bench_switch_reductions.py`` (or ``python -m pytest -m benchmark
benchmarks/bench_switch_reductions.py -s``; ``--only 'A100 x2'`` for one system). Each row runs in
its own process through the normal pipeline (verified, then priced) and prints the instance's
sync bound, our sync and event times, their ratio to the bound, and the seconds spent producing
and verifying (a reduction relayed by a switch is simulated with one send per route GPU ->
switch(es) -> GPU, ``tens/verify.py``).
"""

from __future__ import annotations

import argparse

import pytest
from fresh_process import cell, each_in_a_fresh_process
from switched_systems import systems

M = 1e9
SYSTEMS = systems("A100 x1", "A100 x2", "MI250 x2", "DGX-H100 x2")
KINDS = ("reduce_scatter", "allreduce")


def _row(args) -> dict:
    label, generator, params, kind = args
    from collsynth.instances.generators import build
    from collsynth.instances.instance import make_instance
    from collsynth.solvers import pipeline
    from collsynth.solvers.producers import Options

    inst = make_instance(build(generator, params), kind, message_bytes=M)
    row, sched = pipeline.run(inst, "tree-packing", Options(time_limit=900))
    stages = (row.get("extra") or {}).get("stages_s", {})
    return {"system": label, "kind": kind, "verified": row["verified"], "bound_s": row["lower_bound_s"],
            "sync_s": row["time_sync_s"], "event_s": row["time_event_s"], "sends": len(sched) if sched is not None else 0,
            "gen_s": stages.get("produce"), "verify_s": stages.get("verification"), "message": row["message"]}


def table(rows: list[dict]) -> str:
    """The rows as a Markdown table."""
    head = "| system | kind | verified | bound ms | sync ms | sync/bound | event ms | sends | generation s | verification s |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        sy, b = r["sync_s"], r["bound_s"]
        lines.append("| " + " | ".join([
            r["system"], r["kind"], str(r["verified"]), cell(b * 1e3, ".4f"), cell(sy and sy * 1e3, ".4f"),
            cell(sy and sy / b, ".4f"), cell(r["event_s"] and r["event_s"] * 1e3, ".4f"), cell(r["sends"], ","),
            cell(r["gen_s"], ".1f"), cell(r["verify_s"], ".1f")]) + " |")
    return "\n".join(lines)


def main(only: str | None = None) -> list[dict]:
    """Every system and kind (or the system named ``only``), each in a fresh process."""
    specs = [(label, gen, params, kind) for label, gen, params in SYSTEMS if not only or label == only for kind in KINDS]
    rows = each_in_a_fresh_process(_row, specs,
                                   lambda r: f"{r['system']} {r['kind']}: verified={r['verified']} {r['message'] or ''}")
    print(table(rows))
    return rows


@pytest.mark.benchmark
def test_bench_switch_reductions():
    for r in main():
        assert r["verified"] and r["sync_s"] >= r["bound_s"] * (1 - 1e-9)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None, help="one system label, e.g. 'A100 x2'")
    main(parser.parse_args().only)
