"""The batch runner: instances x producers x solvers x drivers x seeds, resumable.

Every job runs in a worker child process (``python -m collsynth.solvers.cli.runner``) with a hard
wall-clock limit, so a solver that hangs or crashes is killed and recorded, never a dead batch.
The same job function, :func:`run_isolated`, is what both executors call:

- ``local`` (default): a thread per slot drives its worker process, at most ``jobs`` at once
  (default: the number of cores), one solver thread each;
- ``dask``: the jobs are submitted to a Dask distributed scheduler (``--address tcp://...``),
  whose workers run the same :func:`run_isolated`.

The parent is the only writer of the store: each finished job is committed at once
(:func:`collsynth.results.store.put`), so Ctrl-C or ``kill -9`` loses nothing that finished, and
a re-run skips the keys already stored (``rerun=True`` forces them).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import difflib
import glob
import json
import os
import platform
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable, Sequence

from ... import InputError
from ...instances import CORPUS, load_instance
from ...results import store as result_store
from .. import backends
from .. import producers as registry

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

SUITE_KEYS = {"producers": list, "solvers": list, "drivers": list, "seeds": list, "time_limit": (int, float),
              "params": dict}


def suites() -> dict[str, dict]:
    """The suite definitions of ``instances/corpus/suites.toml`` (default producers, limits),
    each checked: known keys of the right type (names are checked when a batch is planned)."""
    if not SUITES_FILE.exists():
        return {}
    try:
        data = tomllib.loads(SUITES_FILE.read_text())
    except tomllib.TOMLDecodeError as e:
        raise InputError(str(SUITES_FILE), f"malformed TOML: {e}") from None
    for name, spec in data.items():
        if not isinstance(spec, dict):
            raise InputError(str(SUITES_FILE), f"{name}: expected a [{name}] table")
        for key, value in spec.items():
            kind = SUITE_KEYS.get(key)
            if kind is None:
                raise InputError(str(SUITES_FILE), f"{name}.{key}: unknown key; expected one of {', '.join(SUITE_KEYS)}")
            if not isinstance(value, kind) or isinstance(value, bool):
                raise InputError(str(SUITES_FILE), f"{name}.{key}: expected a {getattr(kind, '__name__', 'number')}")
    return data


def suite_tags() -> dict[str, list[Path]]:
    """Every suite name the corpus files' ``suites`` lists use, with the files using it."""
    tags: dict[str, list[Path]] = {}
    for path in sorted(CORPUS.glob("*.toml")):
        if path.name == SUITES_FILE.name:
            continue
        try:
            data = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as e:
            raise InputError(str(path), f"malformed TOML: {e}") from None
        names = data.get("suites", [])
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise InputError(str(path), "suites: expected a list of suite names")
        for tag in names:
            tags.setdefault(tag, []).append(path)
    return tags


def check_suite(name: str) -> dict:
    """The definition of suite ``name`` ({} for a tag the corpus uses without a definition in
    suites.toml); an InputError listing the suites and tags when it is neither."""
    defined = suites()
    tags = suite_tags()
    if name in defined:
        return defined[name]
    if name in tags:
        return {}
    close = difflib.get_close_matches(name, list(defined) + list(tags), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    undefined = sorted(set(tags) - set(defined))
    raise InputError("--suite", f"unknown suite {name!r}{hint}; suites: {', '.join(defined) or 'none'}"
                                + (f"; tags: {', '.join(undefined)}" if undefined else ""))


def select_instances(suite: str | None = None, pattern: str | None = None) -> list[Path]:
    """Instance files of a suite (their ``suites`` field lists it) or matching a glob."""
    if pattern:
        files = sorted(Path(p) for p in glob.glob(pattern))
        if not files:
            raise InputError("--instances", f"no instance file matches {pattern!r}")
        return files
    if not suite:
        raise InputError("bench", "give --suite NAME or --instances GLOB")
    check_suite(suite)
    files = suite_tags().get(suite, [])
    if not files:
        raise InputError("--suite", f"no instance is in suite {suite!r}; tag instance files with suites = [{suite!r}]")
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
    ``--driver`` only those that accept drivers (others run once with their default driver,
    which the job names). Every name is checked first (producers, solvers, drivers), and each
    parameter goes only to the producers declaring it (:func:`~collsynth.solvers.producers.route_params`)."""
    selected = [registry.get(name, "--producers") for name in producer_names]
    solvers = [backends.check_name(s, "--solvers") for s in solvers]
    for d in drivers:
        if not any(d in prod.drivers for prod in selected):
            takes = sorted({x for prod in selected for x in prod.drivers})
            raise InputError("--drivers", f"no selected producer takes driver {d!r} (drivers: {', '.join(takes) or 'none'})")
    shares = {name: json.dumps(p, sort_keys=True) for name, p in registry.route_params(selected, params or {}).items()}
    jobs = []
    for path in files:
        inst = load_instance(path)  # validates every file before anything runs
        for prod in selected:
            name = prod.name
            for solver in (solvers if prod.uses_solver else ("",)):
                usable = [d for d in drivers if d in prod.drivers] or [prod.default_driver]
                for driver in usable:
                    for seed in seeds:
                        jobs.append(Job(
                            instance_file=str(Path(path).resolve()), instance=inst.name, producer=name,
                            solver=solver, driver=driver, seed=int(seed), params=shares[name],
                            time_limit=float(time_limit), suite=suite,
                            message_bytes=inst.collectives[0].message_bytes,
                        ))
    return jobs


def plan_batch(
    suite: str | None = None,
    pattern: str | None = None,
    producers: Sequence[str] = (),
    solvers: Sequence[str] = (),
    drivers: Sequence[str] = (),
    seeds: Sequence[int] = (),
    time_limit: float | None = None,
    params: dict[str, Any] | None = None,
) -> tuple[list[Path], list[Job]]:
    """The instance files and jobs of a batch (``collsynth bench``, :func:`collsynth.bench`):
    the instances of ``suite`` or of the glob ``pattern``; producers, solvers, drivers, seeds,
    time limit and parameters as given, else the suite's defaults in ``suites.toml`` (else
    highs, each producer's default driver, seed 0, 60 s, none)."""
    spec = check_suite(suite) if suite else {}
    producers = list(producers) or list(spec.get("producers", []))
    if not producers:
        where = f"suite {suite!r} lists none in suites.toml" if suite else "none given"
        raise InputError("--producers", f"expected comma-separated producers ({where})")
    if solvers and not any(registry.get(n, "--producers").uses_solver for n in producers):
        raise InputError("--solvers", f"no selected producer uses a solver ({', '.join(producers)})")
    solvers = list(solvers) or list(spec.get("solvers", ["highs"]))
    drivers = list(drivers) or list(spec.get("drivers", []))
    seeds = list(seeds) or list(spec.get("seeds", [0]))
    time_limit = time_limit if time_limit is not None else float(spec.get("time_limit", 60.0))
    if not time_limit > 0:
        raise InputError("--time-limit", f"expected a positive number of seconds, got {time_limit}")
    params = {**spec.get("params", {}), **(params or {})}
    files = select_instances(suite, pattern)
    return files, plan(files, producers, solvers, drivers, seeds, params, time_limit, suite=suite or "")


# ---- running one job --------------------------------------------------------------------------
#
# Jobs run in long-lived worker processes (``python -m collsynth.solvers.cli.runner``), one per
# executor thread, reading one job per line on stdin and answering one line on stdout, so the
# imports (Pyomo, solvers, networkx) are paid once per worker rather than once per job. A worker
# that exceeds a job's limit is killed with its process group and replaced; one that dies is
# recorded and replaced.

_local = threading.local()
_workers: list[subprocess.Popen] = []
_workers_lock = threading.Lock()


def _start_worker() -> subprocess.Popen:
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [sys.executable, "-m", "collsynth.solvers.cli.runner"], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=log, start_new_session=True,
    )
    proc.log = log  # type: ignore[attr-defined]
    with _workers_lock:
        _workers.append(proc)
    return proc


def _read_line(proc: subprocess.Popen, deadline: float) -> bytes | None:
    """One line from the worker, ``b""`` if it died, ``None`` if the deadline passed."""
    fd = proc.stdout.fileno()
    buf = bytearray()
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            return None
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b""
        buf += chunk
        if buf.endswith(b"\n"):
            return bytes(buf)


def run_isolated(job: Job | dict) -> dict[str, Any]:
    """Run one job in this thread's worker process with a hard limit; never raises.

    Returns the result row and, if the schedule verified, ``"schedule"`` (its JSON object). A
    worker still busy after ``time_limit + GRACE_S`` is killed with its whole process group
    (solver sub-processes included) and the job recorded as ``error``; the next job gets a
    fresh worker.
    """
    job = Job(**job) if isinstance(job, dict) else job
    limit = job.time_limit + GRACE_S
    proc = getattr(_local, "proc", None)
    if proc is None or proc.poll() is not None:
        proc = _local.proc = _start_worker()
    t0 = time.perf_counter()
    try:
        proc.stdin.write((json.dumps(asdict(job)) + "\n").encode())
        proc.stdin.flush()
        line = _read_line(proc, time.monotonic() + limit)
    except (BrokenPipeError, OSError):
        line = b""
    if line is None:
        _kill_group(proc)
        _local.proc = None
        return _failure_row(job, "error", f"killed: the job exceeded its limit of {limit:g} s", time.perf_counter() - t0)
    if not line.strip():
        code = proc.wait()
        proc.log.seek(0)
        last = (proc.log.read().decode(errors="replace").strip().splitlines() or ["no output"])[-1]
        _local.proc = None
        return _failure_row(job, "error", f"job process exited with code {code}: {last}", time.perf_counter() - t0)
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return _failure_row(job, "error", "job process wrote an unreadable result", time.perf_counter() - t0)


def shutdown_workers() -> None:
    """Close every worker this process started (they exit when their stdin closes)."""
    with _workers_lock:
        procs, _workers[:] = list(_workers), []
    for proc in procs:
        try:
            proc.stdin.close()
            proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            _kill_group(proc)
    _local.proc = None


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _failure_row(job: Job, status: str, message: str, wall_s: float) -> dict[str, Any]:
    row = {k: None for k in result_store.COLUMNS}
    row.update(asdict(job))
    row.update(status=status, verified=False, message=message, wall_s=wall_s)
    return {"row": row, "schedule": None}


def _run_one(job: Job) -> dict[str, Any]:
    from ...tens.schedule import to_json
    from ..pipeline import run
    from ..producers import Options

    try:
        instance = load_instance(job.instance_file)
        options = Options(
            solver=job.solver or "highs", driver=job.driver or None, time_limit=job.time_limit,
            threads=job.threads, seed=job.seed, params=json.loads(job.params),
        )
        row, schedule = run(instance, job.producer, options)
    except InputError as e:
        return _failure_row(job, "error", f"bad input: {e}", 0.0)
    row.update(asdict(job))
    return {"row": row, "schedule": to_json(schedule) if schedule is not None else None}


def _worker_main() -> int:
    """Worker-process entry: one job (JSON) per stdin line, one result (JSON) per stdout line.

    Whatever a job prints (library log messages, solver chatter) goes to stderr: stdout
    carries only the result lines."""
    channel = sys.stdout
    for line in sys.stdin:
        if line.strip():
            with contextlib.redirect_stdout(sys.stderr):
                result = _run_one(Job(**json.loads(line)))
            channel.write(json.dumps(result, default=str) + "\n")
            channel.flush()
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
    from ...tens.schedule import from_json

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
        if executor == "local":
            shutdown_workers()
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
