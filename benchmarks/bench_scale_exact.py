"""Exact TEN synthesis at hundreds to thousands of NPUs: the ``scale-exact`` suite.

Run: ``python -m pytest -m benchmark -s benchmarks/bench_scale_exact.py`` or as a script:
``python benchmarks/bench_scale_exact.py [--only SUBSTRING] [--limit S] [--window K]``.

Every instance of the suite goes through the pipeline (produce, verify, price) with the
symmetry-reduced TEN ILP (``ten-ilp-orbit``) driven by time clustering (``window=1``), HiGHS
with one thread. The table gives, per instance: N, the global TEN lower bound (the horizon a
proven-optimal schedule must meet), the size of the orbit model at that horizon (counted from
its timestep windows, not built) beside the full TACOS ILP's, the largest time-clustering
window actually built, build and solve seconds (CPU of this process: model building and
loading; HiGHS' runs), wall seconds (the machine may be shared), the steps of the verified
schedule and whether they meet the bound (``proven``). Allreduce rows are the orbit model's
reduce-scatter then allgather, with the pipeline's bound and gap.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pytest

from collsynth.formulations import _ten_arrays, ten_ilp_orbit
from collsynth.instances.instance import load_instance
from collsynth.solvers import pipeline
from collsynth.solvers.producers import Options
from collsynth.tens import bounds, orbits, ten

pytestmark = pytest.mark.benchmark
CORPUS = Path(__file__).resolve().parents[1] / "instances" / "corpus"
LIMIT = 600.0


def suite_files(only: str = "") -> list[Path]:
    """The instance files of the ``scale-exact`` suite (names containing ``only``)."""
    out = []
    for p in sorted(CORPUS.glob("scale-exact-*.toml")):
        if only in p.stem and "scale-exact" in load_instance(p).suites:
            out.append(p)
    return out


def sizes(instance, horizon: int) -> tuple[str, str]:
    """(orbit model variables, full TACOS ILP variables) at ``horizon``, counted, not built."""
    data = ten.prepare(instance, horizon)
    full = _ten_arrays.count(data).variables
    try:
        orb = orbits.ten_orbits(data)
    except ten.NotSupported:
        return "-", f"{full:,}"
    local = ten_ilp_orbit.restricted(data, orb)
    return f"{_ten_arrays.count(local).variables:,}", f"{full:,}"


def run_one(path: Path, limit: float = LIMIT, window: int = 1) -> dict:
    """One scale-exact run through the pipeline, with the figures of the table."""
    inst = load_instance(path)
    kinds = {c.kind for c in inst.collectives}
    opts = Options(solver="highs", driver="time-cluster", time_limit=limit, threads=1,
                   params={"window": window, "lp_bound": False})
    c0, t0 = time.process_time(), time.perf_counter()
    row, sched = pipeline.run(inst, "ten-ilp-orbit", opts)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    lb = bounds.lower_bound(inst) if "allreduce" not in kinds else None
    orbit_vars, full_vars = sizes(inst, lb) if lb else ("-", "-")
    windows = (row.get("extra") or {}).get("windows", []) if isinstance(row.get("extra"), dict) else []
    return {"instance": inst.name, "N": len(inst.topology.nodes), "bound": lb if lb is not None else row.get("bound"),
            "orbit_vars": orbit_vars, "full_vars": full_vars, "windows": len(windows),
            "status": row.get("status"), "verified": row.get("verified"), "steps": row.get("steps"),
            "row_bound": row.get("bound"), "gap": row.get("gap"), "build_s": row.get("build_s"),
            "solve_s": row.get("solve_s"), "cpu_s": cpu, "wall_s": wall, "message": row.get("message", "")}


def table(files: list[Path], limit: float = LIMIT, window: int = 1) -> list[dict]:
    """Run ``files`` and print the Markdown table; returns the rows."""
    print(f"\nscale-exact: ten-ilp-orbit, time clustering (window {window}), HiGHS 1 thread, {limit:g} s limit")
    print("\n| instance | N | bound | orbit model vars at bound | full ILP vars at bound | build s | solve s "
          "| cpu s | wall s | steps | status | gap |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for p in files:
        r = run_one(p, limit, window)
        rows.append(r)
        gap = "" if r["gap"] is None else f"{r['gap']:.3f}"
        steps = "-" if r["steps"] is None else r["steps"]
        status = r["status"] + ("" if r["verified"] or r["steps"] is None else " (not verified)")
        if r["steps"] is None:
            status += f": {r['message'][:140]}"
        fmt = lambda x: "-" if x is None else f"{x:.1f}"  # noqa: E731
        print(f"| {r['instance']} | {r['N']} | {r['bound']} | {r['orbit_vars']} | {r['full_vars']} | "
              f"{fmt(r['build_s'])} | {fmt(r['solve_s'])} | {r['cpu_s']:.1f} | {r['wall_s']:.1f} | {steps} | "
              f"{status} | {gap} |", flush=True)
    return rows


def test_scale_exact_suite():
    rows = table(suite_files())
    for r in rows:
        if r["steps"] is not None:
            assert r["verified"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="bench_scale_exact.py")
    ap.add_argument("--only", default="", help="run the instances whose name contains this")
    ap.add_argument("--limit", type=float, default=LIMIT)
    ap.add_argument("--window", type=int, default=1)
    args = ap.parse_args(argv)
    table(suite_files(args.only), args.limit, args.window)
    return 0


if __name__ == "__main__":
    sys.exit(main())
