"""The batch runner: instances x producers x solvers x drivers x seeds, resumable.

Every job runs in its own child process (``python -m collsynth.solvers.batch``) with a hard
wall-clock limit, so a solver that hangs or crashes is killed and recorded, never a dead batch.
The same job function, :func:`run_isolated`, is what both executors call:

- ``local`` (default): a thread per slot launches child processes, at most ``jobs`` at once
  (default: the number of cores), one solver thread each;
- ``dask``: the jobs are submitted to a Dask distributed scheduler (``--address tcp://...``),
  whose workers run the same :func:`run_isolated`.

The parent is the only writer of the store: each finished job is committed at once
(:func:`collsynth.results.store.put`), so Ctrl-C or ``kill -9`` loses nothing that finished, and
a re-run skips the keys already stored (``rerun=True`` forces them).
"""

from __future__ import annotations

import concurrent.futures as cf
import glob
import json
import os
import platform
import signal
import subprocess
import sys
import time
import tomllib
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable, Sequence

from .. import InputError
from ..instances import CORPUS, load_instance
from ..results import store as result_store
from . import producers as registry

# seconds a job may run past its time limit (model building, pricing) before it is killed
GRACE_S = float(os.environ.get("COLLSYNTH_JOB_GRACE_S", "30"))
SUITES_FILE = CORPUS / "suites.toml"


@dataclass(frozen=True)
class Job:
    """One run of the batch: a producer on an instance with a solver, driver and seed."""

    instance_file: str
    instance: str
    producer: str
    solver: str = ""
    driver: str = ""
    seed: int = 0
    params: str = "{}"
    time_limit: float = 60.0
    threads: int = 1
    suite: str = ""
    message_bytes: float | None = None

    def key(self) -> tuple:
        """The store key of this job's row."""
        return result_store.run_key(asdict(self))


# ---- planning -------------------------------------------------------------------------------

def suites() -> dict[str, dict]:
    """The suite definitions of ``instances/corpus/suites.toml`` (default producers, limits)."""
    if not SUITES_FILE.exists():
        return {}
    try:
        return tomllib.loads(SUITES_FILE.read_text())
    except tomllib.TOMLDecodeError as e:
        raise InputError(str(SUITES_FILE), f"malformed TOML: {e}") from None


def select_instances(suite: str | None = None, pattern: str | None = None) -> list[Path]:
    """Instance files of a suite (their ``suites`` field lists it) or matching a glob."""
    if pattern:
        files = sorted(Path(p) for p in glob.glob(pattern))
        if not files:
            raise InputError("--instances", f"no instance file matches {pattern!r}")
        return files
    if not suite:
        raise InputError("bench", "give --suite NAME or --instances GLOB")
    files = []
    for path in sorted(CORPUS.glob("*.toml")):
        if path.name == SUITES_FILE.name:
            continue
        try:
            data = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as e:
            raise InputError(str(path), f"malformed TOML: {e}") from None
        if suite in data.get("suites", []):
            files.append(path)
    if not files:
        known = sorted({s for p in CORPUS.glob("*.toml") if p != SUITES_FILE for s in tomllib.loads(p.read_text()).get("suites", [])})
        raise InputError("--suite", f"no instance is in suite {suite!r}; suites: {', '.join(known) or 'none'}")
    return files


def plan(
    files: Sequence[Path],
    producer_names: Sequence[str],
    solvers: Sequence[str] = ("highs",),
    drivers: Sequence[str] = (),
    seeds: Sequence[int] = (0,),
    params: dict[str, Any] | None = None,
    time_limit: float = 60.0,
    suite: str = "",
) -> list[Job]:
    """Every job of the cross product; ``--solver`` only multiplies producers that use one,
    ``--driver`` only those that accept drivers (others run once with their default)."""
    table = registry.producers()
    for name in producer_names:
        if name not in table:
            raise InputError("--producers", f"unknown producer {name!r}; known: {', '.join(sorted(table))}")
    param_text = json.dumps(params or {}, sort_keys=True)
    jobs = []
    for path in files:
        inst = load_instance(path)  # validates every file before anything runs
        for name in producer_names:
            prod = table[name]
            for solver in (solvers if prod.uses_solver else ("",)):
                usable = [d for d in drivers if d in prod.drivers] or [""]
                for driver in usable:
                    for seed in seeds:
                        jobs.append(Job(
                            instance_file=str(Path(path).resolve()), instance=inst.name, producer=name,
                            solver=solver, driver=driver, seed=int(seed), params=param_text,
                            time_limit=float(time_limit), suite=suite,
                            message_bytes=inst.collectives[0].message_bytes,
                        ))
    return jobs


# ---- running one job --------------------------------------------------------------------------

def run_isolated(job: Job | dict) -> dict[str, Any]:
    """Run one job in a child process with a hard limit; always returns a row (never raises).

    The returned dict has the result row and, if the schedule verified, ``"schedule"`` (its
    JSON object). A child that exceeds ``time_limit + GRACE_S`` is killed with its whole
    process group (solver sub-processes included) and recorded as ``error``.
    """
    job = Job(**job) if isinstance(job, dict) else job
    limit = job.time_limit + GRACE_S
    cmd = [sys.executable, "-m", "collsynth.solvers.batch"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )
    try:
        out, err = proc.communicate(json.dumps(asdict(job)), timeout=limit)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        proc.communicate()
        return _failure_row(job, "error", f"killed: the job exceeded its limit of {limit:g} s", time.perf_counter() - t0)
    if proc.returncode != 0 or not out.strip():
        last = (err.strip().splitlines() or ["no output"])[-1]
        return _failure_row(job, "error", f"job process exited with code {proc.returncode}: {last}", time.perf_counter() - t0)
    try:
        return json.loads(out.strip().splitlines()[-1])
    except json.JSONDecodeError:
        return _failure_row(job, "error", "job process wrote no result", time.perf_counter() - t0)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _failure_row(job: Job, status: str, message: str, wall_s: float) -> dict[str, Any]:
    row = {k: None for k in result_store.COLUMNS}
    row.update(asdict(job))
    row.update(status=status, verified=False, message=message, wall_s=wall_s)
    return {"row": row, "schedule": None}


def _worker_main() -> int:
    """Child-process entry: read a Job as JSON on stdin, print the result row as JSON."""
    from ..tens.schedule import to_json
    from .pipeline import run
    from .producers import Options

    job = Job(**json.loads(sys.stdin.read()))
    try:
        instance = load_instance(job.instance_file)
        options = Options(
            solver=job.solver or "highs", driver=job.driver or None, time_limit=job.time_limit,
            threads=job.threads, seed=job.seed, params=json.loads(job.params),
        )
        row, schedule = run(instance, job.producer, options)
    except InputError as e:
        print(json.dumps(_failure_row(job, "error", f"bad input: {e}", 0.0)))
        return 0
    row.update(asdict(job))
    row["params"] = job.params
    print(json.dumps({"row": row, "schedule": to_json(schedule) if schedule is not None else None}, default=str))
    return 0


# ---- running a batch ------------------------------------------------------------------------

def provenance() -> dict[str, Any]:
    """Package versions, git commit and dirty flag, host and cores: kept on every row."""
    versions = {}
    for pkg in ("collsynth", "pyomo", "highspy", "networkx", "numpy", "scipy", "pandas", "ortools", "gurobipy", "distributed"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    root = Path(__file__).resolve().parent.parent
    commit, dirty = "", None
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10).stdout.strip()
        status = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, timeout=10).stdout
        dirty = bool(status.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    return {
        "versions": versions, "git_commit": commit, "git_dirty": dirty, "host": platform.node(),
        "cores": os.cpu_count(), "python": platform.python_version(),
    }


@dataclass
class BatchSummary:
    """What a batch did: counts by status, skipped (already done) jobs, wall time."""

    planned: int = 0
    skipped_done: int = 0
    ran: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0


def execute(
    jobs: Sequence[Job],
    store: str | Path,
    *,
    executor: str = "local",
    workers: int | None = None,
    address: str | None = None,
    rerun: bool = False,
    progress: bool = True,
) -> BatchSummary:
    """Run the jobs not yet in the store; commit each finished one at once."""
    from ..tens.schedule import from_json

    t0 = time.perf_counter()
    summary = BatchSummary(planned=len(jobs))
    done = set() if rerun else result_store.done_keys(store)
    todo = [j for j in jobs if j.key() not in done]
    summary.skipped_done = len(jobs) - len(todo)
    prov = provenance()

    def commit(result: dict[str, Any]) -> None:
        row = result["row"]
        row["provenance"] = prov
        sched = from_json(result["schedule"]) if result.get("schedule") else None
        result_store.put(store, row, sched)
        summary.ran += 1
        summary.statuses[row["status"]] = summary.statuses.get(row["status"], 0) + 1

    bar = _progress(progress, len(todo))
    try:
        if executor == "local":
            n = max(1, min(workers or os.cpu_count() or 1, len(todo) or 1))
            with cf.ThreadPoolExecutor(max_workers=n) as pool:
                futures = [pool.submit(run_isolated, j) for j in todo]
                for fut in cf.as_completed(futures):
                    commit(fut.result())
                    bar.advance()
        elif executor == "dask":
            if not address:
                raise InputError("--address", "the dask executor needs --address tcp://HOST:PORT of a running scheduler")
            try:
                from distributed import Client, as_completed
            except ImportError:
                raise InputError("--executor", "dask is not installed: pip install 'collsynth[dask]'") from None
            try:
                client = Client(address, timeout=30)
            except OSError as e:
                raise InputError("--address", f"cannot reach the dask scheduler at {address}: {e}") from None
            try:
                futures = [client.submit(run_isolated, asdict(j), pure=False) for j in todo]
                for fut in as_completed(futures):
                    commit(fut.result())
                    bar.advance()
            finally:
                client.close()
        else:
            raise InputError("--executor", f"unknown executor {executor!r}; expected local or dask")
    finally:
        bar.close()
    summary.wall_s = time.perf_counter() - t0
    return summary


class _progress:
    """A rich progress bar with ETA on stderr (silent when disabled)."""

    def __init__(self, enabled: bool, total: int):
        self.bar = None
        if enabled and total:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self.bar = Progress(
                TextColumn("bench"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                TextColumn("eta"), TimeRemainingColumn(), console=Console(stderr=True),
            )
            self.bar.start()
            self.task = self.bar.add_task("bench", total=total)

    def advance(self) -> None:
        if self.bar:
            self.bar.advance(self.task)

    def close(self) -> None:
        if self.bar:
            self.bar.stop()


if __name__ == "__main__":
    sys.exit(_worker_main())
