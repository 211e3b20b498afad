"""TEN formulation benchmarks (run: ``python -m pytest -m benchmark -s -n 0 benchmarks/bench_ten.py``;
``-n 0`` because the project's pytest options start xdist workers, which swallow ``-s`` output;
or the Table II analogue alone: ``python benchmarks/bench_ten.py table2 [--min 4] [--max 8]
[--limit 60] [--solver highs]``).

Each test prints a Markdown table.

- build vs solve time per formulation (ten-ilp, ten-lp, ten-ilp-nocongestion) and size: build, load
  into HiGHS and solve CPU seconds (best of three cold runs; wall beside them), (build + load) /
  solve against the 0.25 target and the load average; solves under 0.1 s CPU are marked (no Pyomo
  build is a quarter of that);
- horizon search with a persistent model (built once at the largest horizon, re-solved)
  vs rebuilt per horizon;
- the largest mesh / torus each driver solves (verified schedule) within 60 s;
- a TACOS Table II analogue: meshes and tori 4x4..8x8 allgather (one chunk per node): lower
  bound, horizon search (timesteps, status, time), early-stop (timesteps, what it used, time),
  time clustering (timesteps, time) and the recovery schedule's length, 60 s each, HiGHS with
  1 thread; and, from the same runs, the largest mesh / torus each driver solves within 60 s;
- TACOS Table III: the 4x4 mesh with failed nodes 7 and 9, proven optimal (13 timesteps).

Environment: ``BENCH_MIN_N``/``BENCH_MAX_N`` (sides of the Table II sweep, default 4..8),
``BENCH_LIMIT`` (s per run, default 60).
"""

from __future__ import annotations

import os
import time

import pytest

from collsynth.formulations import ten_family, ten_ilp, ten_ilp_nocongestion, ten_lp
from collsynth.instances.generators import build as topo
from collsynth.instances.instance import make_instance
from collsynth.solvers import backends as B
from collsynth.limits import Deadline
from collsynth.solvers.backends import highs_direct
from collsynth.solvers.backends.request import Request
from collsynth.solvers.ten import drivers
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


REPEATS = 3  # the build-vs-solve figures are the best of this many cold runs, by CPU time
SHORT_SOLVE = 0.1  # CPU s: a solve this short is shorter than any Pyomo model's construction


def build_vs_solve_row(mod, inst, horizon: int, repeats: int = REPEATS) -> dict:
    """Build ``mod`` over ``inst`` at ``horizon`` and solve it cold with HiGHS (1 thread),
    ``repeats`` times: the best CPU seconds of the Pyomo build, the load into HiGHS (compiling
    the model into one matrix and passing it) and HiGHS' run, their wall seconds in the same
    runs, and the load average. CPU figures because the machine is shared: a wall share
    measured at load 8 says more about the neighbours than about the build."""
    best: dict = {}
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        m = mod.build(inst, horizon)
        build_cpu, build_s = time.process_time() - c0, time.perf_counter() - t0
        r = highs_direct.run(m, Request("highs", Deadline.after(LIMIT)))
        if not best or build_cpu + r.load_cpu_s + r.run_cpu_s < best["total"]:
            best = {"total": build_cpu + r.load_cpu_s + r.run_cpu_s, "build_cpu": build_cpu, "build_s": build_s,
                    "load_cpu": r.load_cpu_s, "load_s": r.load_s, "solve_cpu": r.run_cpu_s, "solve_s": r.run_s,
                    "status": r.model_status, "objective": r.objective}
        if r.run_s > 10.0:  # a long solve is its own best figure: the build is a rounding error of it
            break
    st = B.model_stats(m)
    return best | {"variables": st["variables"], "constraints": st["constraints"], "load_avg": os.getloadavg()[0]}


def test_build_vs_solve():
    """(build + load) / solve per TEN model at the bound horizon, in CPU seconds (best of
    :data:`REPEATS` cold single solves, HiGHS, 1 thread); the target is 0.25. Solves shorter
    than :data:`SHORT_SOLVE` are marked: no Pyomo build is a quarter of so short a solve."""
    print(f"\nbuild vs solve, HiGHS 1 thread, {LIMIT:g} s limit, cold single solve at the bound horizon, "
          f"best of {REPEATS} by CPU; load average at start {os.getloadavg()[0]:.2f}")
    print("\n| formulation | topology | horizon | variables | constraints | build CPU s | load CPU s | solve CPU s "
          "| (build + load) / solve, CPU | build / solve, CPU | wall s (build, load, solve) | HiGHS status | load avg "
          "| note |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    family = ten_family()
    for gen, n in [("mesh", 3), ("mesh", 4), ("torus", 4), ("mesh", 5), ("torus", 6)]:
        inst = _inst(gen, n)
        h = family[ten_ilp.NAME].lower_bound(inst)
        for mod in (ten_ilp, ten_lp, ten_ilp_nocongestion):
            hh = max(h, family[mod.NAME].lower_bound(inst))
            r = build_vs_solve_row(mod, inst, hh)
            share = (r["build_cpu"] + r["load_cpu"]) / r["solve_cpu"] if r["solve_cpu"] else float("inf")
            note = (f"solve under {SHORT_SOLVE:g} s CPU" if r["solve_cpu"] < SHORT_SOLVE
                    else "meets 0.25" if share <= 0.25 else "over 0.25")
            print(f"| {mod.NAME} | {gen} {n}x{n} | {hh} | {r['variables']} | {r['constraints']} "
                  f"| {r['build_cpu']:.3f} | {r['load_cpu']:.3f} | {r['solve_cpu']:.3f} | {share:.2f} "
                  f"| {r['build_cpu'] / r['solve_cpu']:.2f} | {r['build_s']:.2f}, {r['load_s']:.2f}, {r['solve_s']:.2f} "
                  f"| {r['status']} | {r['load_avg']:.2f} | {note} |", flush=True)


def test_horizon_persistent_vs_rebuilt():
    print("\n| topology | mode | timesteps | status | build s | solve s | wall s |")
    print("|---|---|---|---|---|---|---|")
    for gen, n in [("mesh", 3), ("torus", 3), ("mesh", 4)]:
        inst = _inst(gen, n)
        # no warm start: time clustering would meet the bound and leave nothing to compare
        for mode, kw in [("rebuilt", {"warm": False}), ("persistent", {"persistent": True, "warm": False}),
                         ("binary", {"binary": True, "warm": False})]:
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


DRIVER_FNS = {"horizon": drivers.horizon_search, "early-stop": drivers.early_stop,
              "time-cluster": drivers.time_cluster}


def table2(min_n: int = MIN_N, max_n: int = MAX_N, limit: float = LIMIT, solver: str = "highs",
           gens=("mesh", "torus"), cold: bool = False) -> list[dict]:
    """Run the TACOS Table II analogue and print it as Markdown; returns one dict per run.

    ``cold=True`` adds the horizon search without the time-clustering warm start (the ILP
    alone, as before warm starts existed)."""
    fns = dict(DRIVER_FNS)
    if cold:
        fns["horizon-cold"] = lambda inst, form, opts: drivers.horizon_search(inst, form, opts, warm=False)
    print(f"\nTable II analogue: allgather, one chunk per node; {limit:g} s per run, {solver}, 1 thread; "
          "timesteps (* = not proven optimal), wall s")
    head = ("| topology | lower bound | horizon | status | t s | early-stop | used | t s "
            "| time-cluster | t s | recovery |")
    print("\n" + head + (" horizon, no warm start | status | t s |" if cold else ""))
    print("|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|---|" if cold else ""))
    runs = []
    for gen in gens:
        for n in range(min_n, max_n + 1):
            inst = _inst(gen, n)
            lb = ten_ilp.lower_bound(inst)
            rec = drivers.recovery_schedule(inst)[2]
            cells = {}
            for name, fn in fns.items():
                t0 = time.perf_counter()
                o = fn(inst, ten_ilp, Options(solver=solver, time_limit=limit, threads=1))
                w = time.perf_counter() - t0
                ok = o.schedule is not None and verify.verify(o.schedule, inst) is None
                assert ok, f"{name} {gen} {n}x{n}: no verified schedule"
                assert o.objective <= rec, f"{name} {gen} {n}x{n}: worse than recovery"
                cells[name] = (o, w)
                runs.append({"driver": name, "gen": gen, "n": n, "steps": o.objective, "status": o.status,
                             "bound": lb, "wall": w, "recovery": rec, "used": o.extra.get("used", "")})
            (h, hw), (e, ew), (c, cw) = cells["horizon"], cells["early-stop"], cells["time-cluster"]

            def mark(o):
                return f"{o.objective:g}" + ("" if o.status == "optimal" else "*")

            line = (f"| {gen} {n}x{n} | {lb} | {mark(h)} | {h.status} | {hw:.1f} | {mark(e)} | "
                    f"{e.extra.get('used', '')} | {ew:.1f} | {mark(c)} | {cw:.1f} | {rec} |")
            if cold:
                k, kw = cells["horizon-cold"]
                line += f" {mark(k)} | {k.status} | {kw:.1f} |"
            print(line, flush=True)
    assert all(r["steps"] <= r["recovery"] for r in runs)
    return runs


def largest(runs: list[dict], limit: float = LIMIT) -> None:
    """Print the largest n x n mesh / torus each driver solved within the limit (verified
    schedule, wall <= 1.1 x limit; horizon search: proven optimal), the sizes it missed, and the
    largest at the lower bound, from :func:`table2`'s runs."""
    print(f"\n| driver | topology | largest n x n solved within {limit:g} s | timesteps | bound | wall s "
          "| sizes not solved | largest n x n at the lower bound |")
    print("|---|---|---|---|---|---|---|---|")
    order = list(DRIVER_FNS) + ["horizon-cold"]
    for name in sorted({r["driver"] for r in runs}, key=lambda d: order.index(d) if d in order else len(order)):
        for gen in sorted({r["gen"] for r in runs}):
            rs = sorted((r for r in runs if r["driver"] == name and r["gen"] == gen), key=lambda r: r["n"])
            solved = [r for r in rs if r["wall"] <= 1.1 * limit
                      and (not name.startswith("horizon") or r["status"] == "optimal")]
            missed = [f"{r['n']}x{r['n']}" for r in rs if r not in solved]
            at_lb = [r for r in rs if r["steps"] <= r["bound"]]
            best = solved[-1] if solved else None
            cell = (f"{best['n']}x{best['n']} | {best['steps']:g} | {best['bound']} | {best['wall']:.1f}"
                    if best else "none | | |")
            lbcell = f"{at_lb[-1]['n']}x{at_lb[-1]['n']}" if at_lb else "none"
            print(f"| {name} | {gen} | {cell} | {', '.join(missed) or '-'} | {lbcell} |", flush=True)


def test_table2_analogue():
    largest(table2())


def test_table3_failed_mesh():
    inst = _inst("mesh", 4, failed=(7, 9))
    t0 = time.perf_counter()
    o = drivers.horizon_search(inst, ten_ilp, Options(time_limit=300))
    w = time.perf_counter() - t0
    print(f"\nmesh 4x4 failed 7,9: {o.status} {o.objective:g} timesteps (bound {o.bound:g}) in {w:.1f} s")
    assert o.status == "optimal" and o.objective == 13
    assert verify.verify(o.schedule, inst) is None


def main(argv=None) -> int:
    """``python benchmarks/bench_ten.py table2 [--min N] [--max N] [--limit S] [--solver NAME]``."""
    import argparse

    ap = argparse.ArgumentParser(prog="bench_ten.py")
    ap.add_argument("what", choices=["table2"])
    ap.add_argument("--min", type=int, default=MIN_N)
    ap.add_argument("--max", type=int, default=MAX_N)
    ap.add_argument("--limit", type=float, default=LIMIT)
    ap.add_argument("--solver", default="highs")
    ap.add_argument("--gens", default="mesh,torus")
    ap.add_argument("--cold", action="store_true", help="add the horizon search without warm start")
    args = ap.parse_args(argv)
    runs = table2(args.min, args.max, args.limit, args.solver, tuple(args.gens.split(",")), args.cold)
    largest(runs, args.limit)
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
