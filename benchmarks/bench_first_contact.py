"""A newcomer's first commands on a cold numba cache: the README's main job and first ``solve``.

Run ``python benchmarks/bench_first_contact.py`` (a few minutes on a shared machine) or
``python -m pytest -m benchmark -s benchmarks/bench_first_contact.py``. In a fresh ``git clone``
of this checkout's commit (in a temporary folder) and with an empty ``NUMBA_CACHE_DIR``, it runs, as a
user types them, ``collsynth bench --suite quick``, ``collsynth tables`` and ``collsynth solve
instances/corpus/ring8-allgather.toml --producer greedy,ten-ilp,bfb-lp``, then the three again
(the results folder removed between, so the second bench reruns its 320 runs); this
interpreter's installed packages stand in for a fresh virtual environment. Printed per command:
wall seconds, CPU seconds (user + system, its child processes included: ``os.wait4``) and the
load average before and after, so that figures taken on a shared machine read honestly; and how
many kernels the numba cache holds at the end (none: these runs are small enough to run the
kernels as Python, ``collsynth.solvers.compiling.interprets``). The targets (issue 34): the main
job under 60 s, the first solve under 10 s, on 2 idle cores.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
COMMANDS = (
    ("bench", ["bench", "--suite", "quick", "--no-progress"]),
    ("tables", ["tables"]),
    ("solve", ["solve", "instances/corpus/ring8-allgather.toml", "--producer", "greedy,ten-ilp,bfb-lp"]),
)


def timed(argv: list[str], cwd: Path, env: dict) -> dict:
    """One command in a fresh process: wall and CPU seconds, load average before and after."""
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "collsynth.solvers.cli", *argv], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"collsynth {' '.join(argv)} failed: {err.decode()[-2000:]}")
    return {"wall_s": time.perf_counter() - t0, "cpu_s": usage.ru_utime + usage.ru_stime, "load_before": load0,
            "load_after": os.getloadavg()[0]}


def run() -> tuple[list[tuple[str, str, dict]], int]:
    """Both rounds of :data:`COMMANDS` in a fresh clone on an empty numba cache; the kernels
    cached at the end."""
    figures = []
    with tempfile.TemporaryDirectory() as tmp:
        clone, cache = Path(tmp) / "clone", Path(tmp) / "numba-cache"
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], check=True, capture_output=True,
                              text=True).stdout.strip()
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        subprocess.run(["git", "-C", str(clone), "checkout", "-q", head], check=True)  # this checkout's commit
        pp = Path(tmp) / "pp"
        pp.mkdir()
        (pp / "collsynth").symlink_to(clone)  # the clone imported as collsynth (the repository root is the package)
        env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(pp)}
        for round_ in ("empty cache", "again"):
            shutil.rmtree(clone / "collsynth-results", ignore_errors=True)
            for name, argv in COMMANDS:
                figures.append((round_, name, timed(argv, clone, env)))
        cached = len(list(cache.rglob("*.nbi")))
    return figures, cached


def report(figures: list[tuple[str, str, dict]], cached: int) -> str:
    """One line per command and round, and the main job's total per round."""
    lines = [f"{'round':12s} {'command':7s} {'wall s':>7s} {'CPU s':>6s}  load before/after"]
    for round_, name, f in figures:
        lines.append(f"{round_:12s} {name:7s} {f['wall_s']:7.1f} {f['cpu_s']:6.1f}  {f['load_before']:.1f}/{f['load_after']:.1f}")
    for round_ in dict.fromkeys(r for r, _, _ in figures):
        main = sum(f["wall_s"] for r, n, f in figures if r == round_ and n in ("bench", "tables"))
        lines.append(f"{round_}: main job (bench + tables) {main:.1f} s wall")
    lines.append(f"kernels in the numba cache at the end: {cached}")
    return "\n".join(lines)


@pytest.mark.benchmark
def test_first_contact_figures():
    """Prints the figures; asserts only that every command succeeded (timings are not asserted)."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("no git, or the package is not a git checkout")
    print(report(*run()))


if __name__ == "__main__":
    print(report(*run()))
