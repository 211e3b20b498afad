"""A newcomer's first commands: the README's main job writes where the user runs it and leaves
a fresh clone's ``git status`` clean; compiling is said once and kept out of the timings.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from collsynth.instances import CORPUS
from collsynth.solvers import compiling

REPO = Path(__file__).resolve().parent.parent


def _collsynth(cwd: Path, *argv: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "collsynth.solvers.cli", *argv], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=os.environ.copy())


def test_the_main_job_in_a_fresh_clone_leaves_git_status_clean(tmp_path):
    """``collsynth bench --suite quick`` (restricted to the ring producer) then ``collsynth
    tables`` in a fresh ``git clone``: everything is written under ./collsynth-results/ and
    ``git status --porcelain`` stays empty."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("no git, or the package is not a git checkout")
    clone = tmp_path / "clone"
    done = subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    bench = _collsynth(clone, "bench", "--suite", "quick", "--producers", "ring", "--time-limit", "20",
                       "--no-progress", "--json")
    assert bench.returncode == 0, bench.stderr[-2000:]
    assert json.loads(bench.stdout)["ran"] > 0
    tables = _collsynth(clone, "tables", "--json")
    assert tables.returncode == 0, tables.stderr[-2000:]
    written = [Path(p) for p in json.loads(tables.stdout)["written"]]
    assert written and all(p.parts[0] == "collsynth-results" for p in written)
    import sqlite3

    with sqlite3.connect(clone / "collsynth-results" / "store" / "runs.sqlite") as db:
        compile_s = [r[0] for r in db.execute("select compile_s from runs")]
    assert compile_s and all(s is not None and s >= 0 for s in compile_s)
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=clone,
                            capture_output=True, text=True, timeout=60)
    assert status.returncode == 0 and status.stdout == ""


def test_a_results_folder_named_by_the_user_is_used_as_given(tmp_path):
    """``--store`` and ``--out`` elsewhere: written there, and no ``.gitignore`` is added to a
    folder the user named."""
    store, out = tmp_path / "mine" / "store", tmp_path / "mine" / "tables"
    bench = _collsynth(tmp_path, "bench", "--instances", str(CORPUS / "ring8-allgather.toml"), "--producers", "ring",
                       "--store", str(store), "--no-progress", "--json")
    assert bench.returncode == 0, bench.stderr[-2000:]
    tables = _collsynth(tmp_path, "tables", "--store", str(store), "--out", str(out), "--plots", str(tmp_path / "p"),
                        "--json")
    assert tables.returncode == 0, tables.stderr[-2000:]
    assert (out / "det_steps.md").exists() and not (tmp_path / "mine" / ".gitignore").exists()
    assert not (tmp_path / "collsynth-results").exists()


PROBE = """
import json, sys
from numba import njit
from collsynth.solvers import compiling

@njit(cache=False)
def twice(x):
    return 2 * x

twice(1)
twice(2.5)
print(json.dumps({"seen": compiling.compiled_in_this_process()}))
"""


def test_the_compile_notice_is_one_line_on_stderr_at_the_first_compile(tmp_path):
    """A process that compiles says :data:`~collsynth.solvers.compiling.NOTICE` once on
    stderr, whatever it compiles after; stdout carries none of it."""
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == {"seen": True}
    assert done.stderr.count(compiling.NOTICE) == 1


WARM_TWICE = """
import json, sys, time
from collsynth.solvers import compiling
t0 = time.perf_counter()
compiling.compile_kernels(combining=False)
print(json.dumps({"compiled": compiling.compiled_in_this_process()}))
"""


def test_kernels_compiled_once_are_loaded_from_the_disk_cache_by_the_next_process(tmp_path):
    """With an empty ``NUMBA_CACHE_DIR`` the first process compiles (and says so), the second
    compiles nothing and says nothing: the cache is reused across processes."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache")}
    first = subprocess.run([sys.executable, "-c", WARM_TWICE], capture_output=True, text=True, timeout=1200, env=env)
    assert first.returncode == 0, first.stderr[-2000:]
    second = subprocess.run([sys.executable, "-c", WARM_TWICE], capture_output=True, text=True, timeout=1200, env=env)
    assert second.returncode == 0, second.stderr[-2000:]
    assert json.loads(first.stdout) == {"compiled": True} and compiling.NOTICE in first.stderr
    assert json.loads(second.stdout) == {"compiled": False} and compiling.NOTICE not in second.stderr


def test_a_row_records_compile_time_apart_from_its_run_times(monkeypatch):
    """``compile_s`` holds the time spent on the run's kernels before its clock, and no stage's
    time nor ``wall_s`` includes it: compiling is made to take 3 s here."""
    import time

    from collsynth.instances import load_instance
    from collsynth.solvers import pipeline

    def slow_compile(instance, producer):
        time.sleep(3.0)
        return 3.0

    instance = load_instance(CORPUS / "ring8-allgather.toml")
    pipeline.run(instance, "ring")  # the real kernels, once
    monkeypatch.setattr(pipeline, "compile_for_run", slow_compile)
    row, schedule = pipeline.run(instance, "ring")
    assert schedule is not None and row["compile_s"] == 3.0
    assert row["wall_s"] < 3.0 and all(s < 3.0 for s in row["extra"]["stages_s"].values())
