"""Verification and pricing at scale: the compiled path against the former one, per stage.

Run ``python benchmarks/bench_pricing.py`` (mid-size cases, a few minutes) or
``python benchmarks/bench_pricing.py --big`` (the cases of the "Ten million sends in seconds"
issue: BFB on a 50x50 torus, OpTree on a 1024-node optical ring with 64 wavelengths, Swing
on a 32x32 torus (allreduce, 1 GiB), greedy on a 64x64 torus; the former path takes many
minutes on them), or ``python -m pytest -m benchmark -s benchmarks/bench_pricing.py`` (the
mid-size table). ``--skip-old`` leaves the former path out.

Every measurement runs in a fresh child process, so each peak resident set (``ru_maxrss``)
is that child's own:

1. ``collsynth solve INSTANCE --producer P --json`` end to end (through the command line's own
   ``main``): wall time, the producer's own ``wall_s`` and the stage timings of the row
   (``verify_s``, ``price_sync_s``, ``price_ten_s``, ``price_event_s``), peak RSS. The child
   keeps the verified schedule and saves it (after measuring) for the next two;
2. the compiled path alone on that schedule: verify, then the sync, ten and event models;
3. the former path (``tests/reference_verify.py``, ``tests/reference_cost.py``) on the same
   schedule, stage by stage (each stage's line is kept even if a later one is cut off).

The table prints seconds per stage for both paths and their ratio (former / compiled), the
throughput of the compiled path (sends per second per stage), peak RSS of the pricing children
in bytes per send, and the end-to-end solve time against the producer's own.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent / "tests"
STAGES = ("verify", "sync", "ten", "event")

MID = {
    "bfb-lp torus 20x20 allgather": ("bfb-lp", 'generator = "torus"\ndims = [20, 20]', "allgather", 1 << 26),
    "greedy torus 16x16 allgather": ("greedy", 'generator = "torus"\ndims = [16, 16]', "allgather", 1 << 26),
    "swing-bw torus 16x16 allreduce": ("swing-bw", 'generator = "torus"\ndims = [16, 16]', "allreduce", 1 << 30),
    "optree optical ring 256 w=32": ("optree", 'generator = "optical_ring"\nnodes = 256\nwavelengths = 32\n'
                                      'wavelength_bandwidth = 12500000000.0\nreconfig_s = 2.5e-05\noeo_s = 1e-06',
                                      "allgather", 1 << 20),
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
    t0 = time.perf_counter()
    code = main(["solve", instance, "--producer", producer, "--time-limit", "3600", "--json"])
    wall = time.perf_counter() - t0
    sys.stdout = real_stdout
    peak = _peak_bytes()
    row, s = kept[0]
    np.savez(out, chunk=s.chunk, lo=s.lo, hi=s.hi, src=s.src, dst=s.dst, step=s.step, op=s.op,
             meta=np.array(json.dumps({"collective": s.collective, "nodes": s.nodes, "chunks": s.chunks,
                                       "denom": s.denom, "routing": s.routing})))
    fields = ("status", "wall_s", "verify_s", "price_sync_s", "price_ten_s", "price_event_s", "time_sync_s",
              "time_ten_s", "time_event_s")
    return {"code": code, "solve_wall_s": wall, "solve_peak_bytes": peak, "sends": len(s),
            "row": {k: row[k] for k in fields}}


def _load(npz: str):
    import numpy as np

    from collsynth.tens.schedule import Schedule

    z = np.load(npz)
    m = json.loads(str(z["meta"]))
    return Schedule(m["collective"], m["nodes"], m["chunks"], z["chunk"], z["lo"], z["hi"], z["src"], z["dst"],
                    z["step"], z["op"], m["denom"], m["routing"], {})


def child_price(instance: str, npz: str, path: str) -> None:
    """Verify and price one saved schedule with the compiled (``new``) or former (``old``) path,
    printing one JSON line per stage (seconds, peak RSS so far)."""
    from collsynth.instances.instance import load_instance

    if path == "old":
        sys.path.insert(0, str(TESTS))
        import reference_cost as cost
        import reference_verify as verify
    else:
        from collsynth.tens import cost, verify
    inst = load_instance(instance)
    sched = _load(npz)
    print(json.dumps({"stage": "loaded", "peak_bytes": _peak_bytes()}), flush=True)
    for stage in STAGES:
        t0 = time.perf_counter()
        if stage == "verify":
            v = verify.verify(sched, inst)
            assert v is None, str(v)
            value = None
        else:
            value = cost.price(sched, inst, stage).total_s
        print(json.dumps({"stage": stage, "s": time.perf_counter() - t0, "total_s": value,
                          "peak_bytes": _peak_bytes()}), flush=True)


# ---- parent ------------------------------------------------------------------------------------

def _child(args: list[str], timeout: float) -> list[dict]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    try:
        res = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True,
                             timeout=timeout, env=env)
        out, err = res.stdout, res.stderr
    except subprocess.TimeoutExpired as e:
        out, err = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), "timeout"
    lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    if not lines:
        raise RuntimeError(f"child {args[:2]} failed: {err[-2000:]}")
    return lines


def measure(name: str, spec: tuple, folder: Path, old: bool, old_timeout: float) -> dict:
    """Every figure of one case (see the module doc)."""
    producer, topology, kind, message = spec
    inst = folder / f"{producer}.toml"
    inst.write_text(f'name = "{name}"\n[topology]\n{topology}\n[collective]\nkind = "{kind}"\n'
                    f"message_bytes = {message}\n")
    npz = folder / f"{producer}.npz"
    solve = _child(["solve", str(inst), producer, str(npz)], 7200)[-1]
    row = solve["row"]
    out = {"case": name, "sends": solve["sends"], "produce": row["wall_s"], "solve_wall": solve["solve_wall_s"],
           "solve_peak": solve["solve_peak_bytes"], "row": {k: row[k] for k in
                                                           ("verify_s", "price_sync_s", "price_ten_s", "price_event_s")}}
    for path in ("new", "old") if old else ("new",):
        lines = _child(["price", str(inst), str(npz), path], old_timeout if path == "old" else 3600)
        out[path] = {x["stage"]: x for x in lines}
    npz.unlink()
    return out


def report(results: list[dict]) -> str:
    """The table: seconds per stage (compiled / former, ratio), throughput, memory, solve."""
    head = (f"{'case':38s} {'sends':>11s} {'produce':>8s} | " + " | ".join(f"{s:>19s}" for s in STAGES)
            + f" | {'peak RSS B/send':>17s} | {'solve s':>8s} {'/produce':>8s} {'peak GiB':>8s}")
    lines = [head, " " * 60 + "(stage: compiled s / former s = ratio; compiled Msends/s)", "-" * len(head)]
    for r in results:
        n = r["sends"]
        cells = []
        for st in STAGES:
            new = r["new"].get(st, {}).get("s")
            old = r.get("old", {}).get(st, {}).get("s")
            txt = f"{new:6.2f}" if new is not None else "     -"
            txt += f"/{old:6.1f}={old / new:4.0f}x" if old is not None and new else "/     -      "
            cells.append(txt)
        peak_new = max(x["peak_bytes"] for x in r["new"].values()) / n
        peak_old = max(x["peak_bytes"] for x in r["old"].values()) / n if r.get("old") else float("nan")
        lines.append(f"{r['case']:38s} {n:11,d} {r['produce']:8.1f} | " + " | ".join(cells)
                     + f" | {peak_new:7.0f} / {peak_old:7.0f} | {r['solve_wall']:8.1f} "
                     f"{r['solve_wall'] / r['produce']:8.2f} {r['solve_peak'] / 2**30:8.2f}")
        rate = "  ".join(f"{st} {n / r['new'][st]['s'] / 1e6:5.2f}" for st in STAGES if st in r["new"])
        row = "  ".join(f"{k} {v:.2f}" for k, v in r["row"].items())
        lines.append(f"{'':38s} compiled Msends/s: {rate};  solve row: {row}")
    return "\n".join(lines)


def run(cases: dict, old: bool = True, old_timeout: float = 3600.0) -> list[dict]:
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, spec in cases.items():
            results.append(measure(name, spec, Path(tmp), old, old_timeout))
            print(report(results[-1:]).splitlines()[-2], flush=True)
    return results


@pytest.mark.benchmark
def test_pricing_mid_size_table():
    results = run(MID)
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
    p.add_argument("--big", action="store_true", help="the issue's cases (minutes; the former path much longer)")
    p.add_argument("--skip-old", action="store_true", help="only the compiled path")
    p.add_argument("--cases", default="", help="comma-separated substrings of case names to run")
    p.add_argument("--old-timeout", type=float, default=3600.0, help="seconds for the former path per case")
    args = p.parse_args(argv)
    cases = BIG if args.big else MID
    if args.cases:
        cases = {k: v for k, v in cases.items() if any(c in k for c in args.cases.split(","))}
    results = run(cases, not args.skip_old, args.old_timeout)
    print("\n" + report(results))
    print("\n" + json.dumps(results, default=str))


if __name__ == "__main__":
    _main(sys.argv[1:])
