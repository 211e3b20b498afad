"""TEN formulation benchmarks (run: ``python -m pytest -m benchmark -s benchmarks/bench_ten.py``).

Figures for the closing note of issue 4; each test prints a Markdown table.

- build vs solve time per formulation (ten-ilp, ten-lp, ten-ilp-nocongestion) and size;
- horizon search with a persistent model (built once at the largest horizon, re-solved)
  vs rebuilt per horizon;
- the largest mesh / torus each driver solves (verified schedule) within 60 s;
- a TACOS Table II analogue: meshes and tori 4x4..8x8, early-stop and time-cluster against the
  exact horizon search (timesteps, time) and the lower bound;
- TACOS Table III: the 4x4 mesh with failed nodes 7 and 9, proven optimal (13 timesteps).

Environment: ``BENCH_MIN_N``/``BENCH_MAX_N`` (sides of the Table II sweep, default 4..8),
``BENCH_LIMIT`` (s per run, default 60).
"""

from __future__ import annotations

import os
import time

import pytest

from collsynth.formulations import ten_ilp, ten_ilp_nocongestion, ten_lp
from collsynth.instances.generators import build as topo
from collsynth.instances.instance import make_instance
from collsynth.solvers import backends as B
from collsynth.solvers import drivers
from collsynth.solvers.producers import Options
from collsynth.tens import verify

pytestmark = pytest.mark.benchmark
MAX_N = int(os.environ.get("BENCH_MAX_N", "8"))
MIN_N = int(os.environ.get("BENCH_MIN_N", "4"))
LIMIT = float(os.environ.get("BENCH_LIMIT", "60"))


def _inst(gen, n, failed=()):
    t = topo(gen, {"dims": [n, n]})
    if failed:
        t = t.with_failures(failed)
    return make_instance(t, "allgather")


def test_build_vs_solve():
    print("\n| formulation | topology | horizon | variables | constraints | build s | solve s | status |")
    print("|---|---|---|---|---|---|---|---|")
    for gen, n in [("mesh", 3), ("mesh", 4), ("torus", 4), ("mesh", 5), ("torus", 6)]:
        inst = _inst(gen, n)
        h = ten_ilp.lower_bound(inst)
        for mod in (ten_ilp, ten_lp, ten_ilp_nocongestion):
            hh = mod.lower_bound(inst)
            t0 = time.perf_counter()
            m = mod.build(inst, max(h, hh))
            b = time.perf_counter() - t0
            st = B.model_stats(m)
            r = B.solve(m, "highs", time_limit=LIMIT)
            print(f"| {mod.NAME} | {gen} {n}x{n} | {max(h, hh)} | {st['variables']} | {st['constraints']} "
                  f"| {b:.2f} | {r.solve_s:.2f} | {r.status} |", flush=True)


def test_horizon_persistent_vs_rebuilt():
    print("\n| topology | mode | timesteps | status | build s | solve s | wall s |")
    print("|---|---|---|---|---|---|---|")
    for gen, n in [("mesh", 3), ("torus", 3), ("mesh", 4)]:
        inst = _inst(gen, n)
        for mode, kw in [("rebuilt", {}), ("persistent", {"persistent": True}), ("binary", {"binary": True})]:
            t0 = time.perf_counter()
            o = drivers.horizon_search(inst, ten_ilp, Options(time_limit=LIMIT), **kw)
            w = time.perf_counter() - t0
            print(f"| {gen} {n}x{n} | {mode} | {o.objective:g} | {o.status} | {o.build_s:.2f} | {o.solve_s:.2f} | {w:.1f} |", flush=True)


def test_largest_within_limit():
    print(f"\n| driver | topology | largest n x n solved (verified) within {LIMIT:g} s | timesteps | lower bound | wall s |")
    print("|---|---|---|---|---|---|")
    runs = {"horizon": drivers.horizon_search, "early-stop": drivers.early_stop, "time-cluster": drivers.time_cluster}
    for name, fn in runs.items():
        for gen in ("mesh", "torus"):
            best = None
            for n in range(3, MAX_N + 1):
                inst = _inst(gen, n)
                t0 = time.perf_counter()
                o = fn(inst, ten_ilp, Options(time_limit=LIMIT))
                w = time.perf_counter() - t0
                ok = o.schedule is not None and verify.verify(o.schedule, inst) is None and w <= LIMIT * 1.1
                if name == "horizon":
                    ok = ok and o.status == "optimal"
                if not ok:
                    break
                best = (n, o.objective, o.bound, w)
            if best:
                print(f"| {name} | {gen} | {best[0]}x{best[0]} | {best[1]:g} | {best[2]:g} | {best[3]:.1f} |", flush=True)
            else:
                print(f"| {name} | {gen} | none | | | |", flush=True)


def test_table2_analogue():
    print("\n| topology | lower bound | exact (horizon) | t s | early-stop | t s | time-cluster | t s |")
    print("|---|---|---|---|---|---|---|---|")
    for gen in ("mesh", "torus"):
        for n in range(MIN_N, MAX_N + 1):
            inst = _inst(gen, n)
            lb = ten_ilp.lower_bound(inst)
            cells = []
            for fn in (drivers.horizon_search, drivers.early_stop, drivers.time_cluster):
                t0 = time.perf_counter()
                o = fn(inst, ten_ilp, Options(time_limit=LIMIT))
                w = time.perf_counter() - t0
                assert o.schedule is not None and verify.verify(o.schedule, inst) is None
                mark = "" if o.status == "optimal" else "*"
                cells.append(f"{o.objective:g}{mark} | {w:.1f}")
            print(f"| {gen} {n}x{n} | {lb} | " + " | ".join(cells) + " |", flush=True)


def test_table3_failed_mesh():
    inst = _inst("mesh", 4, failed=(7, 9))
    t0 = time.perf_counter()
    o = drivers.horizon_search(inst, ten_ilp, Options(time_limit=300))
    w = time.perf_counter() - t0
    print(f"\nmesh 4x4 failed 7,9: {o.status} {o.objective:g} timesteps (bound {o.bound:g}) in {w:.1f} s")
    assert o.status == "optimal" and o.objective == 13
    assert verify.verify(o.schedule, inst) is None
