"""``collsynth solve`` end to end against the producer's own time, on the big cases.

Run ``python benchmarks/bench_solve.py`` (three cases whose target is a solve within 2x of the
producer's own time: BFB LP on a 50x50 torus allgather, Swing on a 32x32 torus allreduce of 1 GiB,
TACOS-Greedy on a 64x64 torus allgather; a few minutes on a shared machine), ``--cases greedy``
to pick some, ``--repeat N`` to run each N times, ``--against PYTHONPATH`` to time another
version of collsynth (imported from that path) in turn with this one, or
``python -m pytest -m benchmark -s benchmarks/bench_solve.py``.

Each run is the command line exactly as a user types it, in a fresh process::

    python -m collsynth.solvers.cli solve FILE --producer P --json --time-limit 600

and the parent takes that process's own resource usage (``os.wait4``): wall seconds, CPU
seconds (user + system, the child processes it waited for included), peak resident set. The
table prints, per case side by side: the producer's own time (the row's ``wall_s``), the solve
wall time and their ratio, the row's stage times (``lower bounds``, ``verification``, each
``pricing (model)``, and ``pricing plan``, the parts of the pricing plan the calling thread
prepares before it verifies: the bounds run beside the producer and pricing beside verification, so
they add up to more than the wall time), the start-up (the wall time of the same command on a
4x4 torus of the same collective: imports, kernel loading, reading the instance, writing the
row), peak RSS, CPU seconds and the load
average before and after the run, so that figures taken on a shared machine read honestly.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent / "instances" / "corpus"
SWING_TOML = ('name = "torus32x32-allreduce-1GiB"\n[topology]\ngenerator = "torus"\ndims = [32, 32]\n'
              '[collective]\nkind = "allreduce"\nmessage_bytes = 1073741824\n')
CASES = {  # name: (producer, corpus file or TOML text)
    "bfb-lp torus 50x50 allgather": ("bfb-lp", CORPUS / "scale-torus50x50-allgather.toml"),
    "swing-bw torus 32x32 allreduce 1 GiB": ("swing-bw", SWING_TOML),
    "greedy torus 64x64 allgather": ("greedy", CORPUS / "scale-torus64x64-allgather.toml"),
}
STAGES = ("lower bounds", "produce", "pricing plan", "verification", "pricing (sync)", "pricing (ten)",
          "pricing (event)")


def solve_once(producer: str, instance: Path, time_limit: float = 600.0, path: str | None = None,
               bytecode: str | None = None) -> dict:
    """One ``collsynth solve`` in a fresh process: its row and its own wall, CPU and peak
    (``path``: the PYTHONPATH it imports collsynth from, None: this process's; ``bytecode``: the
    folder it caches bytecode in, None: the environment as it is)."""
    cmd = [sys.executable, "-m", "collsynth.solvers.cli", "solve", str(instance), "--producer", producer, "--json",
           "--time-limit", f"{time_limit:g}"]
    env = dict(os.environ) if path is None else {**os.environ, "PYTHONPATH": path}
    if bytecode is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = bytecode
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        started = time.time()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        text, errors = out.read().decode(), err.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {errors[-2000:]}")
    (row,) = json.loads(text)["rows"]  # solve --json: {instance, producers, rows}
    return {"row": row, "wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_bytes": usage.ru_maxrss * 1024,
            "load_before": load0, "load_after": os.getloadavg()[0], "started": started}


def _tiny(toml: str) -> str:
    """The same instance file on a 4x4 torus: what a run costs besides its work."""
    return re.sub(r"dims = \[[^]]*\]", "dims = [4, 4]", toml)


def figures(name: str, run: dict) -> dict:
    """The table's figures of one run."""
    row = run["row"]
    stages = row["extra"]["stages_s"]
    produce = row["wall_s"]
    return {"case": name, "sends": row["sends"], "status": row["status"], "produce_s": produce,
            "startup_s": run["startup_s"],
            "solve_s": run["wall_s"], "ratio": run["wall_s"] / produce, "stages": {k: stages.get(k) for k in STAGES},
            "peak_gib": run["peak_bytes"] / 2**30, "cpu_s": run["cpu_s"], "load": (run["load_before"], run["load_after"])}


def report(rows: list[dict]) -> str:
    """Side by side: produce, solve, ratio, stages, peak, CPU, load."""
    short = {"lower bounds": "bounds", "produce": "produce", "pricing plan": "plan", "verification": "verify",
             "pricing (sync)": "sync", "pricing (ten)": "ten", "pricing (event)": "event"}
    head = (f"{'case':43s} {'sends':>11s} {'produce s':>9s} {'solve s':>8s} {'ratio':>6s} | "
            + " ".join(f"{short[s]:>7s}" for s in STAGES) + f" {'start':>6s} | {'peak GiB':>8s} {'CPU s':>7s} {'load':>10s}")
    lines = [head, "-" * len(head)]
    for r in rows:
        cells = " ".join(f"{v:7.2f}" if v is not None else f"{'-':>7s}" for v in r["stages"].values())
        lines.append(f"{r['case']:43s} {r['sends']:11,d} {r['produce_s']:9.2f} {r['solve_s']:8.2f} {r['ratio']:6.2f} | "
                     f"{cells} {r['startup_s']:6.2f} | {r['peak_gib']:8.2f} {r['cpu_s']:7.1f} {r['load'][0]:4.1f}->{r['load'][1]:4.1f}")
    return "\n".join(lines)


def run(cases: dict, repeat: int = 1, paths: dict[str, str | None] | None = None, env_as_is: bool = False) -> list[dict]:
    """Every case ``repeat`` times, printing each line as it comes; with ``paths`` (label:
    PYTHONPATH) each run of a case goes once through each of them in turn, so that two versions
    of collsynth are timed in the same window of a shared machine (case names get the label).
    Bytecode is cached in a folder of the run's own unless ``env_as_is`` (see the module doc)."""
    paths = paths or {"": None}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        bytecode = None if env_as_is else str(Path(tmp) / "bytecode")
        for name, (producer, source) in cases.items():
            path = source if isinstance(source, Path) else Path(tmp) / f"{producer}.toml"
            if not isinstance(source, Path):
                path.write_text(source)
            tiny = Path(tmp) / f"{producer}-tiny.toml"
            tiny.write_text(_tiny(path.read_text()))
            for where in paths.values():  # untimed: numba's kernels and the bytecode cached
                solve_once(producer, tiny, path=where, bytecode=bytecode)
            for _ in range(repeat):
                for label, where in paths.items():
                    startup = solve_once(producer, tiny, path=where, bytecode=bytecode)["wall_s"]
                    run_ = {**solve_once(producer, path, path=where, bytecode=bytecode), "startup_s": startup}
                    rows.append(figures(f"{name} {label}".strip(), run_))
                    print(report(rows[-1:]).splitlines()[-1], flush=True)
    return rows


@pytest.mark.benchmark
def test_solve_against_produce():
    rows = run(CASES)
    print("\n" + report(rows))
    assert all(r["status"] in ("optimal", "feasible", "constructed", "heuristic") for r in rows)


def _main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default="", help="comma-separated substrings of case names to run")
    p.add_argument("--repeat", type=int, default=1, help="runs per case")
    p.add_argument("--against", metavar="PYTHONPATH", default=None,
                   help="also run each case with collsynth imported from this PYTHONPATH (e.g. a checkout of main "
                        "linked as DIR/collsynth), alternating with this one: rows 'base' and 'new'")
    p.add_argument("--env-as-is", action="store_true",
                   help="run the children in this environment unchanged (see the module doc on bytecode)")
    args = p.parse_args(argv)
    cases = {k: v for k, v in CASES.items() if not args.cases or any(c in k for c in args.cases.split(","))}
    rows = run(cases, args.repeat, {"base": args.against, "new": None} if args.against else None, args.env_as_is)
    print("\n" + report(rows))


if __name__ == "__main__":
    _main(sys.argv[1:])
