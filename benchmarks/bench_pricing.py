"""Verification and pricing at scale: the compiled path against the former one, per stage.

Run ``python benchmarks/bench_pricing.py`` (mid-size cases, a few minutes) or
``python benchmarks/bench_pricing.py --big`` (the big cases: BFB on a 50x50 torus, OpTree on
a 1024-node optical ring with 64 wavelengths, Swing
on a 32x32 torus (allreduce, 1 GiB), greedy on a 64x64 torus; the former path takes many
minutes on them), or ``python -m pytest -m benchmark -s benchmarks/bench_pricing.py`` (the
mid-size table). ``--skip-old`` leaves the former path out; ``--old-rev REV`` names the former
code (default :data:`FORMER`, the numpy and Python path before the compiled kernels).

Every measurement runs in a fresh child process, so each peak resident set (``ru_maxrss``)
is that child's own:

1. ``collsynth solve INSTANCE --producer P --json`` end to end (through the command line's own
   ``main``): wall time, the producer's own ``wall_s`` and the stage timings of the row
   (``verify_s``, ``price_sync_s``, ``price_ten_s``, ``price_event_s``), peak RSS. The child
   keeps the verified schedule and saves it (after measuring) for the next two;
2. the compiled path alone on that schedule: verify, then the sync, ten and event models;
3. the former path: the package as it was at git revision ``--old-rev`` (exported with
   ``git archive`` into a temporary folder that the child imports ``collsynth`` from; its
   compiled kernels are compiled there once, before any clock starts) on the same schedule,
   each stage in its own child stopped after ``--old-timeout`` seconds (default 60, so that the
   big table fits in about a quarter of an hour on a shared machine); a stopped stage prints
   as ``>seconds`` with its ratio as a lower bound.

Every stage line carries wall and CPU seconds (``time.process_time``) and the load average when
it ended, so that figures taken on a shared machine can be read honestly.

The table prints seconds per stage for both paths and their ratio (former / compiled), the
throughput of the compiled path (sends per second per stage, and hops per CPU second beside
the least rate each cost model declares, by which a run decides whether the model fits in the
time left), peak RSS in bytes per send (the compiled child's whole peak, in brackets its peak
above the process before the schedule was loaded, i.e. the schedule itself plus verify and the
three models; the former path's largest single-stage peak), and the end-to-end solve time
against the producer's own with its peak.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import queue
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
STAGES = ("verify", "sync", "ten", "event")
FORMER = "8cc15d1"  # the last numpy and Python path, before the compiled kernels

MID = {
    "bfb-lp torus 20x20 allgather": ("bfb-lp", 'generator = "torus"\ndims = [20, 20]', "allgather", 1 << 26),
    "greedy torus 16x16 allgather": ("greedy", 'generator = "torus"\ndims = [16, 16]', "allgather", 1 << 26),
    "swing-bw torus 16x16 allreduce": ("swing-bw", 'generator = "torus"\ndims = [16, 16]', "allreduce", 1 << 30),
    "optree optical ring 256 w=32": ("optree", 'generator = "optical_ring"\nnodes = 256\nwavelengths = 32\n'
                                      'wavelength_bandwidth = 12500000000.0\nreconfig_s = 2.5e-05\noeo_s = 1e-06',
                                      "allgather", 1 << 20),
    "direct ring 512 allgather (long routes)": ("direct", 'generator = "ring"\nnodes = 512', "allgather", 1 << 20),
}
BIG = {
    "bfb-lp torus 50x50 allgather": ("bfb-lp", 'generator = "torus"\ndims = [50, 50]', "allgather", 1 << 26),
    "optree optical ring 1024 w=64": ("optree", 'generator = "optical_ring"\nnodes = 1024\nwavelengths = 64\n'
                                       'wavelength_bandwidth = 12500000000.0\nreconfig_s = 2.5e-05\noeo_s = 1e-06',
                                       "allgather", 1 << 20),
    "swing-bw torus 32x32 allreduce 1 GiB": ("swing-bw", 'generator = "torus"\ndims = [32, 32]', "allreduce", 1 << 30),
    "greedy torus 64x64 allgather": ("greedy", 'generator = "torus"\ndims = [64, 64]', "allgather", 1 << 26),
}


# ---- children ----------------------------------------------------------------------------------

def _peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def child_solve(instance: str, producer: str, out: str) -> dict:
    """``collsynth solve`` through the command line's ``main``; keeps the schedule to save it."""
    import numpy as np

    from collsynth.solvers.cli import main
    from collsynth.solvers.cli.commands import solve as solve_command

    kept = []
    run = solve_command.run

    def run_and_keep(*args, **kwargs):
        row, schedule = run(*args, **kwargs)
        kept.append((row, schedule))
        return row, schedule

    solve_command.run = run_and_keep
    real_stdout = sys.stdout
    sys.stdout = open(os.devnull, "w")  # the row is taken from the pipeline, not re-parsed
    t0, c0 = time.perf_counter(), time.process_time()
    code = main(["solve", instance, "--producer", producer, "--time-limit", "3600", "--json"])
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    sys.stdout = real_stdout
    peak = _peak_bytes()
    row, s = kept[0]
    np.savez(out, chunk=s.chunk, lo=s.lo, hi=s.hi, src=s.src, dst=s.dst, step=s.step, op=s.op,
             meta=np.array(json.dumps({"collective": s.collective, "nodes": s.nodes, "chunks": s.chunks,
                                       "denom": s.denom, "routing": s.routing})))
    fields = ("status", "wall_s", "verify_s", "price_sync_s", "price_ten_s", "price_event_s", "time_sync_s",
              "time_ten_s", "time_event_s")
    return {"code": code, "solve_wall_s": wall, "solve_cpu_s": cpu, "solve_load": os.getloadavg()[0],
            "solve_peak_bytes": peak, "sends": len(s),
            "row": {k: row[k] for k in fields}}


def _load(npz: str):
    import numpy as np

    from collsynth.tens.schedule import Schedule

    z = np.load(npz)
    m = json.loads(str(z["meta"]))
    return Schedule(m["collective"], m["nodes"], m["chunks"], z["chunk"], z["lo"], z["hi"], z["src"], z["dst"],
                    z["step"], z["op"], m["denom"], m["routing"], {})


def child_price(instance: str, npz: str, stages: str = ",".join(STAGES)) -> None:
    """Verify and price one saved schedule with the ``collsynth`` this child imports (the
    working tree, or the former revision's export), printing one JSON line per stage (wall and
    CPU seconds, load average, peak RSS so far) and one before each stage starts (so that the
    parent can bound a stage it had to stop). The models share one pricing plan where the
    package has one, as a run's pipeline does."""
    from collsynth.instances.instance import load_instance
    from collsynth.tens import cost as cost_module, verify

    try:
        from collsynth.solvers.compiling import compile_kernels
    except ImportError:  # a revision without compiled kernels (numpy and Python only): nothing to load
        compile_kernels = None

    # the model registry where the revision has one, else the cost module's own price()
    registry = importlib.util.find_spec("collsynth.tens.cost_models") is not None
    cost = importlib.import_module("collsynth.tens.cost_models") if registry else cost_module
    if compile_kernels is not None:
        compile_kernels()  # compiled once per process, as every run does before its clock starts
    inst = load_instance(instance)
    print(json.dumps({"stage": "ready", "peak_bytes": _peak_bytes(), "package": cost_module.__file__}), flush=True)
    sched = _load(npz)
    print(json.dumps({"stage": "loaded", "peak_bytes": _peak_bytes()}), flush=True)
    models = [st for st in stages.split(",") if st != "verify"]
    plan = ({"plan": cost_module.PricingPlan(sched, inst, models=tuple(models))}
            if hasattr(cost_module, "PricingPlan") else {})
    for stage in stages.split(","):
        print(json.dumps({"start": stage, "at": time.time()}), flush=True)
        t0, c0 = time.perf_counter(), time.process_time()
        if stage == "verify":
            v = verify.verify(sched, inst)
            assert v is None, str(v)
            value = None
        else:
            value = cost.price(sched, inst, stage, **plan).total_s
        print(json.dumps({"stage": stage, "s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
                          "load": os.getloadavg()[0], "total_s": value, "peak_bytes": _peak_bytes()}), flush=True)
    if importlib.util.find_spec("collsynth.tens.routing") is not None:  # counted last: no stage's peak includes it
        from collsynth.tens.routing import route_sends

        hops = route_sends(sched.src, sched.dst, sched.routing, inst.topology).total_hops
        print(json.dumps({"stage": "hops", "hops": hops}), flush=True)


# ---- parent ------------------------------------------------------------------------------------

def _child(args: list[str], stage_limit: float, package_root: str | None = None) -> list[dict]:
    """JSON lines of one child (importing ``collsynth`` from ``package_root`` when given). A
    stage (announced by a ``start`` line) still running after ``stage_limit`` seconds stops the
    child and leaves a ``cut`` line for it: the seconds it had run, a lower bound on that
    stage's time."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if package_root is not None:
        env["PYTHONPATH"] = package_root
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, __file__, "--child", *args], stdout=subprocess.PIPE, stderr=err,
                                text=True, env=env)
        inbox: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [inbox.put(x) for x in proc.stdout] + [inbox.put(None)], daemon=True).start()
        lines, running = [], None
        while True:
            try:
                text = inbox.get(timeout=0.5)
            except queue.Empty:
                text = ""
            if text is None:
                break
            if text.startswith("{"):
                x = json.loads(text)
                running = x if "start" in x else None if x.get("stage") == (running or {}).get("start") else running
                lines.append(x)
            if running and time.time() - running["at"] > stage_limit:
                proc.kill()
                lines.append({"stage": running["start"], "cut": time.time() - running["at"]})
                running = None
        proc.wait()
        err.seek(0)
        if not lines:
            raise RuntimeError(f"child {args[:2]} failed: {err.read()[-2000:]}")
    return [x for x in lines if "start" not in x]


def export_revision(rev: str, folder: Path, package: str = "collsynth") -> tuple[str, str]:
    """The package at git revision ``rev`` exported under ``folder/package``; returns the
    folder to put on ``PYTHONPATH`` (or ``sys.path``) and the commit."""
    repo = HERE.parent
    commit = subprocess.run(["git", "rev-parse", rev], cwd=repo, check=True, capture_output=True,
                            text=True).stdout.strip()
    target = folder / package
    target.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", commit], cwd=repo, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return str(folder), commit


def measure(name: str, spec: tuple, folder: Path, old_root: str | None, old_timeout: float) -> dict:
    """Every figure of one case (see the module doc); each former stage in its own child (the
    package under ``old_root``), stopped after ``old_timeout`` seconds."""
    producer, topology, kind, message = spec
    inst = folder / f"{producer}.toml"
    inst.write_text(f'name = "{name}"\n[topology]\n{topology}\n[collective]\nkind = "{kind}"\n'
                    f"message_bytes = {message}\n")
    npz = folder / f"{producer}.npz"
    solve = _child(["solve", str(inst), producer, str(npz)], 7200)[-1]
    row = solve["row"]
    out = {"case": name, "sends": solve["sends"], "produce": row["wall_s"], "solve_wall": solve["solve_wall_s"],
           "solve_cpu": solve["solve_cpu_s"], "solve_load": solve["solve_load"],
           "solve_peak": solve["solve_peak_bytes"], "row": {k: row[k] for k in
                                                           ("verify_s", "price_sync_s", "price_ten_s", "price_event_s")}}
    out["new"] = {x["stage"]: x for x in _child(["price", str(inst), str(npz)], 3600)}
    if old_root is not None:
        out["old"] = {}
        for stage in STAGES:
            lines = {x["stage"]: x for x in _child(["price", str(inst), str(npz), stage], old_timeout, old_root)}
            out["old"][stage] = lines[stage]
            out["old"][stage]["ready_bytes"] = lines["ready"]["peak_bytes"]
    npz.unlink()
    return out


def _stage_cell(new: dict | None, old: dict | None) -> str:
    """``compiled s / former s = ratio``; a former stage stopped at its limit reads ``>limit``."""
    txt = f"{new['s']:6.2f}" if new and "s" in new else "     -"
    if not old:
        return txt + "/      -       "
    if "cut" in old:
        return txt + f"/>{old['cut']:5.0f}>={old['cut'] / new['s']:4.0f}x" if new and "s" in new else txt + "/ cut"
    return txt + f"/{old['s']:6.1f}={old['s'] / new['s']:5.0f}x" if new and "s" in new else txt


def _cpu_rate(count: int, stage: dict | None) -> str:
    """Millions of ``count`` (sends, or hops) per CPU second of one stage ('-' if it did not finish)."""
    if not stage or "cpu_s" not in stage:
        return "-"
    return f"{count / max(stage['cpu_s'], 1e-9) / 1e6:.2f}"


def _declared_rates() -> str:
    """The hops per second each cost model declares it prices at the least (its ``rate``, by
    which a run decides whether a model fits in the time left)."""
    from collsynth.tens import cost_models

    return "  ".join(f"{m.name} {m.rate / 1e6:g}" for m in cost_models.MODELS.values())


def report(results: list[dict]) -> str:
    """The table: seconds per stage (compiled / former, ratio), throughput, memory, solve."""
    head = (f"{'case':38s} {'sends':>11s} {'produce':>8s} | " + " | ".join(f"{s:>21s}" for s in STAGES)
            + f" | {'B/send new (net) old':>22s} | {'solve s':>8s} {'/produce':>8s} {'peak GiB':>8s}")
    lines = [head, " " * 50 + "(stage: compiled s / former s = ratio; '>' a former stage stopped at its limit)",
             "-" * len(head)]
    for r in results:
        n = r["sends"]
        new, old = r["new"], r.get("old", {})
        cells = [_stage_cell(new.get(st), old.get(st)) for st in STAGES]
        peak_new = max(x["peak_bytes"] for x in new.values() if "peak_bytes" in x)
        net_new = peak_new - new["ready"]["peak_bytes"]
        peak_old = max((x["peak_bytes"] for x in old.values() if "peak_bytes" in x), default=float("nan"))
        lines.append(f"{r['case']:38s} {n:11,d} {r['produce']:8.1f} | " + " | ".join(cells)
                     + f" | {peak_new / n:5.0f} ({net_new / n:4.0f}) {peak_old / n:6.0f} | {r['solve_wall']:8.1f} "
                     f"{r['solve_wall'] / r['produce']:8.2f} {r['solve_peak'] / 2**30:8.2f}")
        rate = "  ".join(f"{st} {n / new[st]['s'] / 1e6:5.2f}" for st in STAGES if "s" in new.get(st, {}))
        cpu = "  ".join(f"{st} {new[st]['cpu_s']:.2f}/{new[st]['load']:.1f}" for st in STAGES if "s" in new.get(st, {}))
        row = "  ".join(f"{k} {v:.2f}" for k, v in r["row"].items())
        lines.append(f"{'':38s} compiled Msends/s: {rate};  solve row: {row}")
        lines.append(f"{'':38s} compiled CPU s / load average: {cpu};  solve CPU {r['solve_cpu']:.1f} s, "
                     f"load {r['solve_load']:.1f}")
        by_cpu = "  ".join(f"{st} {_cpu_rate(n, new.get(st))}/{_cpu_rate(n, old.get(st))}" for st in STAGES)
        lines.append(f"{'':38s} Msends/s by CPU time, compiled/former: {by_cpu}")
        if "hops" in new:
            hops = new["hops"]["hops"]
            by_hop = "  ".join(f"{st} {_cpu_rate(hops, new.get(st))}" for st in STAGES if st != "verify")
            lines.append(f"{'':38s} Mhops/s by CPU time ({hops:,} hops), compiled: {by_hop}  (each model's declared "
                         f"least: {_declared_rates()})")
    return "\n".join(lines)


def run(cases: dict, old_rev: str | None = None, old_timeout: float = 60.0) -> list[dict]:
    """Measure ``cases``; the former path is the package at ``old_rev`` (``None``: left out)."""
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        old_root = None
        if old_rev is not None:
            old_root, commit = export_revision(old_rev, Path(tmp) / "former")
            print(f"former path: revision {commit}", flush=True)
        for name, spec in cases.items():
            results.append(measure(name, spec, Path(tmp), old_root, old_timeout))
            print("\n".join(report(results[-1:]).splitlines()[3:]), flush=True)
    return results


@pytest.mark.benchmark
def test_pricing_mid_size_table():
    results = run(MID, FORMER, old_timeout=1800.0)
    print("\n" + report(results))
    for r in results:  # every stage of both paths finished, and both agree on the prices
        for st in STAGES[1:]:
            assert r["new"][st]["total_s"] == pytest.approx(r["old"][st]["total_s"], rel=1e-9), (r["case"], st)


def _main(argv: list[str]) -> None:
    if argv and argv[0] == "--child":
        kind, *rest = argv[1:]
        if kind == "solve":
            instance, producer, npz = rest
            out = child_solve(instance, producer, npz)
            print(json.dumps(out))
        else:
            child_price(*rest)
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--big", action="store_true", help="the big cases (minutes; the former path much longer)")
    p.add_argument("--skip-old", action="store_true", help="only the compiled path")
    p.add_argument("--cases", default="", help="comma-separated substrings of case names to run")
    p.add_argument("--old-rev", default=None, help=f"git revision of the former path (default: {FORMER})")
    p.add_argument("--old-timeout", type=float, default=60.0,
                   help="seconds for each stage of the former path (a stopped stage reads '>limit')")
    args = p.parse_args(argv)
    cases = BIG if args.big else MID
    if args.cases:
        cases = {k: v for k, v in cases.items() if any(c in k for c in args.cases.split(","))}
    results = run(cases, None if args.skip_old else (args.old_rev or FORMER), args.old_timeout)
    print("\n" + report(results))
    print("\n" + json.dumps(results, default=str))


if __name__ == "__main__":
    _main(sys.argv[1:])
