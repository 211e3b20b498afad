"""A real ``collsynth bench`` interrupted mid-run: it stops at once, leaves no process behind,
keeps every finished row, and a resume completes the set without duplicates; two benches on
one store share the work."""

from __future__ import annotations

import json
import multiprocessing
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from collsynth.limits import GRACE_S
from collsynth.results import store
from collsynth.solvers.batch import INTERRUPT_S
from machine import SLOWDOWN, within

PLUGINS = str(Path(__file__).parent / "plugins")
KEY = ["instance", "producer", "solver", "driver", "seed", "params"]
CLI = [sys.executable, "-m", "collsynth.solvers.cli"]

pytestmark = pytest.mark.slow


def write_rings(folder: Path, sizes=(5, 6, 7, 8)) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    for n in sizes:
        (folder / f"ring{n}.toml").write_text(
            f'name = "ring{n}"\n[topology]\ngenerator = "ring"\nnodes = {n}\n[collective]\nkind = "allgather"\n')
    return str(folder / "*.toml")


def environment(tag: str) -> dict:
    env = dict(os.environ)
    env["COLLSYNTH_PRODUCERS"] = "slow_producers"
    env["PYTHONPATH"] = PLUGINS + os.pathsep + env.get("PYTHONPATH", "")
    env["COLLSYNTH_TEST_TAG"] = tag  # inherited by every process the bench starts
    return env


def tagged(tag: str, runner_only: bool = False) -> list[int]:
    """Live (not zombie) processes carrying ``tag`` in their environment."""
    mark = f"COLLSYNTH_TEST_TAG={tag}".encode()
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if mark in env and state != "Z" and (not runner_only or b"collsynth.solvers.batch" in cmd):
            out.append(int(pid))
    return out


def wait_for(predicate, timeout: float = 240.0, what: str = "") -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.1)


def start_bench(st: Path, pattern: str, tag: str, producers: str, jobs: int) -> tuple[subprocess.Popen, list[str]]:
    argv = ["bench", "--no-progress", "--instances", pattern, "--producers", producers, "--jobs", str(jobs),
            "--store", str(st)]
    proc = subprocess.Popen(CLI + argv, env=environment(tag), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    return proc, argv


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_bench_stops_at_once_keeps_what_finished_and_resumes(tmp_path, sig):
    pattern = write_rings(tmp_path / "inst", (5, 6, 7))
    st = tmp_path / "store"
    tag = uuid.uuid4().hex
    proc, _ = start_bench(st, pattern, tag, "test-sleepy-ring,ring", jobs=2)
    planned = 6
    wait_for(lambda: store.count(st) >= 1 and len(tagged(tag, runner_only=True)) == 2 or proc.poll() is not None,
             what="a finished run while two jobs run")
    assert proc.poll() is None, proc.communicate()
    t0 = time.monotonic()
    os.killpg(proc.pid, sig)  # what a terminal's Ctrl-C does: the whole foreground process group
    out, err = proc.communicate(timeout=60)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 130 and elapsed < within(INTERRUPT_S), (proc.returncode, elapsed, SLOWDOWN, err)
    assert out == b""
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: interrupted by {sig.name}: kept "), lines
    # the bench has exited: what it says it kept is in the store now, and nothing of it runs on
    assert not tagged(tag), "a process of the bench outlived it"
    said = int(lines[0].split(": kept ", 1)[1].split()[0])
    before = store.load(st)
    assert 1 <= len(before) < planned and len(before) == said, (len(before), lines[0])
    # resume with the command it printed
    resume = shlex.split(lines[0].split("resume with: ", 1)[1])
    assert resume[:2] == ["collsynth", "bench"]
    again = subprocess.run(CLI + resume[1:], env=environment(tag), capture_output=True, timeout=600)
    assert again.returncode == 0, again.stderr
    after = store.load(st)
    assert len(after) == planned and not after.duplicated(KEY).any()
    assert (after["status"] == "constructed").all()
    kept = after.set_index("id").loc[before["id"]]
    assert (kept["created_at"].to_numpy() == before["created_at"].to_numpy()).all(), "finished runs were redone"


def test_a_worker_killed_with_minus_9_is_recorded_and_the_batch_goes_on(tmp_path):
    pattern = write_rings(tmp_path / "inst", (5, 6, 7))
    st = tmp_path / "store"
    tag = uuid.uuid4().hex
    proc, argv = start_bench(st, pattern, tag, "test-sleepy-ring", jobs=1)
    wait_for(lambda: store.count(st) >= 1 or proc.poll() is not None, what="the first run")
    workers = tagged(tag, runner_only=True)
    assert proc.poll() is None and len(workers) == 1
    os.kill(workers[0], signal.SIGKILL)  # as the out-of-memory killer would
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    wait_for(lambda: not tagged(tag), timeout=2, what="no process of the bench left")
    df = store.load(st)
    assert len(df) == 3 and not df.duplicated(KEY).any()
    killed = df[df["status"] == "error"]
    assert len(killed) == 1 and "killed by SIGKILL" in killed.iloc[0]["message"]
    assert (df["status"] != "error").sum() == 2
    again = subprocess.run(CLI + argv + ["--json"], env=environment(tag), capture_output=True, timeout=600)
    assert again.returncode == 0 and b'"ran": 0' in again.stdout and b'"skipped_done": 3' in again.stdout
    assert len(store.load(st)) == 3


def test_a_second_signal_exits_at_once(tmp_path):
    """First signal: the batch stops; the second: kill the workers and leave (exit 130)."""
    tag = uuid.uuid4().hex
    code = (
        "import os, signal, subprocess, sys, time\n"
        "from collsynth.solvers import batch as runner\n"
        "pool = runner.Workers()\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True)\n"
        "pool.procs.append(child)\n"
        "with runner._Signals([pool]) as s:\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    assert s.signal == 'SIGINT'\n"
        "    print('first', flush=True)\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(60)\n"
    )
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], env=environment(tag), capture_output=True, timeout=120)
    assert proc.returncode == 130 and proc.stdout == b"first\n"
    assert proc.stderr.decode().strip().splitlines() == [
        "error: interrupted again: stopped at once; every finished run is in the store"]
    assert time.monotonic() - t0 < 60
    wait_for(lambda: not tagged(tag), timeout=2, what="the worker killed")


def test_two_benches_on_one_store_share_the_work(tmp_path):
    pattern = write_rings(tmp_path / "inst")
    st = tmp_path / "store"
    tag = uuid.uuid4().hex
    argv = ["bench", "--no-progress", "--json", "--instances", pattern, "--producers", "test-sleepy-ring",
            "--jobs", "1", "--store", str(st)]
    a = subprocess.Popen(CLI + argv, env=environment(tag), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    b = subprocess.Popen(CLI + argv, env=environment(tag), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    outs = [p.communicate(timeout=600) for p in (a, b)]
    assert a.returncode == 0 and b.returncode == 0, [o[1] for o in outs]
    ra, rb = (json.loads(o[0]) for o in outs)
    assert ra["ran"] + rb["ran"] == 4, (ra, rb)  # every job once, whoever ran it
    df = store.load(st)
    assert len(df) == 4 and not df.duplicated(KEY).any()


def _open_at_the_barrier(folder, barrier, errors):
    barrier.wait()
    try:
        store.connect(folder).close()
    except Exception as e:  # reported to the parent, which asserts there was none
        errors.put(str(e))


def test_two_processes_creating_one_store_at_once_both_open_it(tmp_path):
    # switching a new database to WAL mode can fail at once with "database is locked" while
    # another process does the same; without the retry about a third of these rounds failed
    ctx = multiprocessing.get_context("fork")
    errors = ctx.Queue()
    for i in range(20):
        barrier = ctx.Barrier(2)
        procs = [ctx.Process(target=_open_at_the_barrier, args=(tmp_path / f"s{i}", barrier, errors))
                 for _ in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert all(p.exitcode == 0 for p in procs)
    found = []
    while not errors.empty():
        found.append(errors.get())
    assert not found, found


def test_solve_that_cannot_be_interrupted_is_killed_with_its_children(tmp_path):
    """The last resort of ``collsynth solve``: a producer ignoring the deadline's timer (and
    leaving a child process) ends at the limit + grace + margin, one error line, exit 1."""
    path = tmp_path / "ring5.toml"
    write_rings(tmp_path, (5,))
    tag = uuid.uuid4().hex
    env = {**environment(tag), "COLLSYNTH_JOB_GRACE_S": "1"}
    proc = subprocess.Popen(CLI + ["solve", str(tmp_path / "ring5.toml"), "--producer", "test-stuck",
                                   "--time-limit", "1", "--json"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    wait_for(lambda: len(tagged(tag)) >= 2 or proc.poll() is not None, what="the stuck solver's child")
    t0 = time.monotonic()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and out == b""
    lines = err.decode().strip().splitlines()
    hard = 1 + GRACE_S + 1  # the limit, the grace, the margin
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: killed after {hard:g} s"), lines
    assert time.monotonic() - t0 < hard + 2
    wait_for(lambda: not tagged(tag), timeout=2, what="the child killed too")
