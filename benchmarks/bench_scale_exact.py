"""Exact TEN synthesis at hundreds to thousands of NPUs: the ``scale-exact`` suite.

Run: ``python -m pytest -m benchmark -s benchmarks/bench_scale_exact.py`` or as a script:
``python benchmarks/bench_scale_exact.py [--only SUBSTRING] [--limit S] [--window K] [--lp]``.

Every instance of the suite goes through the pipeline (produce, verify, price) with the
symmetry-reduced TEN ILP (``ten-ilp-orbit``) driven by time clustering (``window=1``), HiGHS
with one thread. The table gives, per instance: N, the global TEN lower bound (the horizon a
proven-optimal schedule must meet), the size of the orbit model at that horizon (counted from
its timestep windows, not built) beside the full TACOS ILP's, the largest time-clustering
window actually built, build and solve seconds (CPU of this process: model building and
loading; HiGHS' runs), wall seconds (the machine may be shared), the steps of the verified
schedule and whether they meet the bound (``proven``). Where the orbit model refuses (the
generalized Kautz graph: no group acts regularly), the row is TACOS-greedy's with random
priority, named so. Allreduce rows are the orbit model's
reduce-scatter then allgather, with the pipeline's bound and gap.

``--lp``: the orbit TEN LP (``ten-lp-orbit``) instead: its bound (the TEN LP bound, valid for
every schedule; searched from the global TEN bound upward), its size at that horizon, and its
verified symmetric fractional schedule (realised from the bound's own LP solution, without
the re-solve for early traffic). Every row prints the load average (1 min) before and
after it and the pipeline's stage seconds, since the machine may be shared.
"""

from __future__ import annotations

import argparse
import os
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


def run_one(path: Path, limit: float = LIMIT, window: int = 1, lp: bool = False, fallback: bool = True) -> dict:
    """One scale-exact run through the pipeline, with the figures of the table: the orbit ILP
    by time clustering, or (``lp``) the orbit LP's bound search and fractional schedule; where
    the orbit model refuses (no group acts regularly) and ``fallback``, TACOS-greedy with random
    priority (seed 0) instead, whose verified schedule is optimal when it meets the bound."""
    inst = load_instance(path)
    kinds = {c.kind for c in inst.collectives}
    if lp:
        # polish=false: the re-solve for early traffic is a degenerate LP that HiGHS takes minutes
        # on at 256 nodes; the schedule is realised from the bound's own solution
        producer = "ten-lp-orbit"
        opts = Options(solver="highs", time_limit=limit, threads=1, params={"polish": False})
    else:
        producer = "ten-ilp-orbit"
        opts = Options(solver="highs", driver="time-cluster", time_limit=limit, threads=1,
                       params={"window": window, "lp_bound": False})
    load0 = os.getloadavg()[0]
    c0, t0 = time.process_time(), time.perf_counter()
    row, sched = pipeline.run(inst, producer, opts)
    if row.get("status") == "skipped" and fallback:
        # no symmetry to reduce by: a verified greedy schedule meeting the global bound is optimal too
        producer = "greedy"
        row, sched = pipeline.run(inst, producer, Options(time_limit=limit, threads=1, seed=0,
                                                          params={"workers": 1, "priority": "random"}))
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    extra = row.get("extra") if isinstance(row.get("extra"), dict) else {}
    lb = bounds.lower_bound(inst) if "allreduce" not in kinds else None
    horizon = extra.get("lp_bound") if lp else lb
    orbit_vars, full_vars = sizes(inst, horizon) if horizon else ("-", "-")
    windows = extra.get("windows", [])
    return {"instance": inst.name + ("" if producer.startswith("ten-") else f" ({producer})"),
            "N": len(inst.topology.nodes), "bound": lb if lb is not None else row.get("bound"),
            "horizon": horizon, "orbit_vars": orbit_vars, "full_vars": full_vars, "windows": len(windows),
            "status": row.get("status"), "verified": row.get("verified"), "steps": row.get("steps"),
            "row_bound": row.get("bound"), "gap": row.get("gap"), "build_s": row.get("build_s"),
            "solve_s": row.get("solve_s"), "cpu_s": cpu, "wall_s": wall, "message": row.get("message", ""),
            "bound_source": row.get("bound_source"), "lp_bound": extra.get("lp_bound"),
            "stages": extra.get("stages_s", {}), "load": (load0, os.getloadavg()[0])}


def table(files: list[Path], limit: float = LIMIT, window: int = 1, lp: bool = False) -> list[dict]:
    """Run ``files`` and print the Markdown table; returns the rows."""
    how = "ten-lp-orbit (bound search, fractional schedule)" if lp else f"ten-ilp-orbit, time clustering (window {window})"
    print(f"\nscale-exact: {how}, HiGHS 1 thread, {limit:g} s limit")
    print("\n| instance | N | global bound | horizon | orbit model vars at horizon | full ILP vars at horizon | build s "
          "| solve s | cpu s | wall s | load 1 min | steps | status | gap | LP bound |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for p in files:
        r = run_one(p, limit, window, lp, fallback=not lp)
        rows.append(r)
        gap = "" if r["gap"] is None else f"{r['gap']:.3f}"
        steps = "-" if r["steps"] is None else r["steps"]
        status = r["status"] + ("" if r["verified"] or r["steps"] is None else " (not verified)")
        if r["steps"] is None:
            status += f": {r['message'][:140]}"
        fmt = lambda x: "-" if x is None else f"{x:.1f}"  # noqa: E731
        print(f"| {r['instance']} | {r['N']} | {r['bound']} | {r['horizon'] or '-'} | {r['orbit_vars']} | "
              f"{r['full_vars']} | {fmt(r['build_s'])} | {fmt(r['solve_s'])} | {r['cpu_s']:.1f} | {r['wall_s']:.1f} | "
              f"{r['load'][0]:.1f}-{r['load'][1]:.1f} | {steps} | {status} | {gap} | {r['lp_bound'] or '-'} |", flush=True)
        stages = ", ".join(f"{k} {v:.1f}" for k, v in r["stages"].items())
        print(f"<!-- {r['instance']}: stages s: {stages}; bound_source: {r['bound_source']} -->", flush=True)
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
    ap.add_argument("--lp", action="store_true", help="the orbit LP (ten-lp-orbit) instead of the orbit ILP")
    args = ap.parse_args(argv)
    table(suite_files(args.only), args.limit, args.window, args.lp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
