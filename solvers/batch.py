"""The batch runner: instances x producers x solvers x drivers x seeds, resumable.

It is the top floor of the package with the command line (:mod:`collsynth.solvers.cli`) and
the paper reports (:mod:`collsynth.solvers.reports`): the one place of :mod:`collsynth.solvers`
besides them that writes the results store. The library API (:func:`collsynth.bench`) and
``collsynth bench`` both call it; it imports nothing of the command line.

Every job runs in a worker child process (``python -m collsynth.solvers.batch``) with a hard
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

import collections
import contextlib
import difflib
import glob
import json
import os
import platform
import queue
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
import uuid
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Sequence

from .. import InputError
from ..instances import CORPUS, load_instance
from ..limits import DEFAULT_TIME_LIMIT_S, GRACE_S, HARD_MARGIN_S, TooBig
from ..results import store as result_store
from ..tens.schedule import Schedule, from_json, to_json
from . import backends
from . import producers as registry
from . import compiling
from .pipeline import run
from .producers import Options

ADDRESS = re.compile(r"^(?:(?:tcp|tls|ws|wss|ucx)://)?(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$")


def dask_address(address: str | None) -> str:
    """``--address`` of a Dask scheduler: ``host:port`` or ``tcp://host:port`` (also tls, ws,
    wss, ucx), port 1..65535.

    >>> dask_address("tcp://127.0.0.1:8786")
    'tcp://127.0.0.1:8786'
    """
    if not address:
        raise InputError("--address", "the dask executor needs --address tcp://HOST:PORT of a running scheduler")
    m = ADDRESS.match(address.strip())
    if m is None or not 1 <= int(m.group(1)) <= 65535:
        raise InputError("--address", f"expected HOST:PORT or tcp://HOST:PORT (port 1..65535), got {address!r}")
    return address.strip()


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
    time_limit: float = DEFAULT_TIME_LIMIT_S
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
    time_limit: float = DEFAULT_TIME_LIMIT_S,
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


def plan_batch(suite: str | None = None, instances: str | None = None, producers: Sequence[str] = (),
               solvers: Sequence[str] = (), drivers: Sequence[str] = (), seeds: Sequence[int] = (),
               time_limit: float | None = None, params: dict[str, Any] | None = None) -> tuple[list[Path], list[Job]]:
    """The instance files and jobs of a batch (``collsynth bench``, :func:`collsynth.bench`):
    the instances of ``suite`` or of the glob ``instances``; producers, solvers, drivers, seeds,
    time limit and parameters as given, else the suite's defaults in ``suites.toml`` (else
    highs, each producer's default driver, seed 0, :data:`~collsynth.limits.DEFAULT_TIME_LIMIT_S`, none)."""
    spec = check_suite(suite) if suite else {}
    producers = list(producers) or list(spec.get("producers", []))
    if not producers:
        where = f"suite {suite!r} lists none in suites.toml" if suite else "none given"
        raise InputError("--producers", f"expected comma-separated producers ({where})")
    if solvers and not any(registry.get(n, "--producers").uses_solver for n in producers):
        raise InputError("--solvers", f"no selected producer uses a solver ({', '.join(producers)})")
    solvers = list(solvers) or list(spec.get("solvers", ["highs"]))
    if not drivers:  # the suite's drivers, where a selected producer takes them (a user's are checked in plan)
        drivers = [d for d in spec.get("drivers", []) if any(d in registry.get(n, "--producers").drivers for n in producers)]
    seeds = [registry.check_seed(s, "--seeds") for s in list(seeds) or list(spec.get("seeds", [0]))]
    time_limit = registry.check_time_limit(time_limit if time_limit is not None else spec.get("time_limit", DEFAULT_TIME_LIMIT_S))
    params = {**spec.get("params", {}), **(params or {})}
    files = select_instances(suite, instances)
    return files, plan(files, producers, solvers, drivers, seeds, params, time_limit, suite=suite or "")


# ---- running one job --------------------------------------------------------------------------
#
# Jobs run in long-lived worker processes (``python -m collsynth.solvers.batch``), one per
# executor thread, reading one job per line on stdin and answering one line on stdout, so the
# imports (Pyomo, solvers, networkx) are paid once per worker rather than once per job. A worker
# leads its own process group (solver children included), says ``ready`` once its imports are
# done, and kills its group when the process that started it is gone (no orphans after a
# ``kill -9`` of the batch). The pipeline ends every job within its time limit plus
# :data:`collsynth.limits.GRACE_S`; a worker still busy :data:`HARD_MARGIN_S` after that is
# killed with its group and replaced, and one that dies is recorded and replaced.

READY = b"ready\n"
STARTUP_S = 600.0  # a worker must have its imports done by then (a loaded machine is slow)
INTERRUPT_S = 5.0  # an interrupted batch has killed its workers, kept what finished and exited within this
# (tests/test_interrupts.py, scaled by the machine's slowdown; benchmarks/bench_limits.py measures it)
INTERRUPTED = {"interrupted": True}  # what a job stopped by the batch's interrupt returns


class Workers:
    """The worker processes of one batch (or of one Dask worker): one per thread, started on
    demand. :meth:`stop` kills them all (their process groups) and starts no more."""

    def __init__(self, shares: tuple[list[list[str]], bool] | None = None) -> None:
        self.lock = threading.Lock()
        self.procs: list[subprocess.Popen] = []
        self.stopped = False
        self.local = threading.local()
        self.shares, self.combining = shares if shares is not None else ([], True)
        self.started = 0

    def _argv(self) -> list[str]:
        """The next worker's command line: the share of the batch's kernels it compiles first."""
        argv = [sys.executable, "-m", "collsynth.solvers.batch"]
        share = self.shares[self.started % len(self.shares)] if self.shares else []
        self.started += 1
        return argv + (["--compile", ",".join(share)] if share else []) + ([] if self.combining else ["--no-reductions"])

    def current(self) -> subprocess.Popen | None:
        """This thread's ready worker, started if needed; None once stopped. Raises
        ``RuntimeError`` with the worker's last stderr line when it cannot start."""
        proc = getattr(self.local, "proc", None)
        if proc is not None and proc.poll() is None:
            return proc
        with self.lock:
            if self.stopped:
                return None
            self.procs = [p for p in self.procs if p.poll() is None]
            log = tempfile.TemporaryFile()
            proc = subprocess.Popen(
                self._argv(), stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=log, start_new_session=True,
            )
            proc.log = log  # type: ignore[attr-defined]
            self.procs.append(proc)
        line = _await_kernels(proc)  # its share of the kernels, then its imports
        if line == READY:
            self.local.proc = proc
            return proc
        _kill_group(proc)
        if self.stopped:
            return None
        raise RuntimeError(f"the job process did not start: {_last_words(proc)}")

    def forget(self) -> None:
        """Drop this thread's worker (it was killed or died)."""
        self.local.proc = None

    def stop(self) -> None:
        """Kill every worker's process group now and start no more."""
        with self.lock:
            self.stopped = True
            procs = list(self.procs)
        for proc in procs:
            _kill_group(proc, wait=False)

    def close(self) -> None:
        """Close every worker (each exits when its stdin closes); kill those that do not."""
        with self.lock:
            procs, self.procs = list(self.procs), []
        for proc in procs:
            try:
                proc.stdin.close()
                proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                _kill_group(proc)
            else:
                _wait_group_gone(proc.pid)  # what a worker stopped by stop() left (solver children)


_default_workers = Workers()  # for run_isolated called without a batch (Dask workers)


def _read_line(proc: subprocess.Popen, deadline: float) -> bytes | None:
    """One line from the worker, ``b""`` if it died, ``None`` if the deadline passed (what
    follows the line in a read is kept for the next call)."""
    fd = proc.stdout.fileno()
    buf = getattr(proc, "pending", bytearray())
    while b"\n" not in buf:
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
    line, _, rest = bytes(buf).partition(b"\n")
    proc.pending = bytearray(rest)  # type: ignore[attr-defined]
    return line + b"\n"


COMPILING = b"compiling\n"  # a worker compiles a kernel (not only loads it from the cache)
COMPILED = b"compiled\n"  # a worker has its job's kernels: the job's clock starts
_told = threading.Event()


def _await_kernels(proc: subprocess.Popen) -> bytes | None:
    """Wait (up to :data:`STARTUP_S`) for the worker to have its job's kernels, saying
    :data:`collsynth.solvers.compiling.NOTICE` once per batch when it compiles; the line that
    ended the wait (:data:`COMPILED`, or what the worker said instead)."""
    while True:
        line = _read_line(proc, time.monotonic() + STARTUP_S)
        if line != COMPILING:
            return line
        if not _told.is_set():
            _told.set()
            print(compiling.NOTICE, file=sys.stderr, flush=True)


def hard_limit(job: Job) -> float:
    """Seconds after which a job's worker is killed: its time limit, the pipeline's grace and
    :data:`HARD_MARGIN_S`."""
    return job.time_limit + GRACE_S + HARD_MARGIN_S


def run_isolated(job: Job | dict, workers: Workers | None = None) -> dict[str, Any]:
    """Run one job in this thread's worker process with a hard limit; never raises.

    Returns the result row and, if the schedule verified, ``"schedule"`` (its JSON object);
    :data:`INTERRUPTED` when ``workers`` were stopped before the job finished. A worker still
    busy after :func:`hard_limit` is killed with its whole process group (solver
    sub-processes included) and the job recorded as ``timeout``; the next job gets a fresh
    worker.
    """
    job = Job(**job) if isinstance(job, dict) else job
    workers = workers or _default_workers
    t0 = time.perf_counter()
    try:
        proc = workers.current()
    except RuntimeError as e:
        return _failure_row(job, "error", str(e), time.perf_counter() - t0)
    if proc is None:
        return INTERRUPTED
    limit = hard_limit(job)
    try:
        proc.stdin.write((json.dumps(asdict(job)) + "\n").encode())
        proc.stdin.flush()
        line = _await_kernels(proc)  # compiling is no part of the job's time
        if line == COMPILED:
            ends = time.monotonic() + limit
            line = _read_line(proc, ends)
            while line == COMPILING:  # a kernel its compile step missed, compiled on the job's clock
                line = _read_line(proc, ends)
    except (BrokenPipeError, OSError):
        line = b""
    if line and line.strip():
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            return _failure_row(job, "error", "job process wrote an unreadable result", time.perf_counter() - t0)
    workers.forget()
    if workers.stopped:
        _kill_group(proc)
        return INTERRUPTED
    if line is None:
        _kill_group(proc)
        return _failure_row(job, "timeout", f"killed after {limit:g} s: the job did not stop at its time limit "
                                            f"({job.time_limit:g} s + {GRACE_S:g} s grace)", time.perf_counter() - t0)
    proc.wait()
    return _failure_row(job, "error", f"job process {_exit_words(proc.returncode)}: {_last_words(proc)}",
                        time.perf_counter() - t0)


def _exit_words(code: int) -> str:
    if code < 0:
        name = signal.Signals(-code).name
        why = " (out of memory, or killed from outside)" if -code == signal.SIGKILL else ""
        return f"killed by {name}{why}"
    return f"exited with code {code}"


def _last_words(proc: subprocess.Popen) -> str:
    proc.log.seek(0)
    return (proc.log.read().decode(errors="replace").strip().splitlines() or ["no output"])[-1]


GROUP_GONE_S = 2.0  # how long _kill_group waits for the killed group's last process to go


def _kill_group(proc: subprocess.Popen, wait: bool = True) -> None:
    """SIGKILL the worker's process group; with ``wait``, reap the worker and wait (up to
    :data:`GROUP_GONE_S`) until no process of its group is left (its solver children are
    reaped by init), so that a batch that returns has left no process behind."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if wait:
        proc.wait()
        _wait_group_gone(proc.pid)


def _wait_group_gone(pgid: int) -> None:
    """Wait (up to :data:`GROUP_GONE_S`) until the process group ``pgid`` has no process left."""
    end = time.monotonic() + GROUP_GONE_S
    while time.monotonic() < end:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.01)


def _failure_row(job: Job, status: str, message: str, wall_s: float) -> dict[str, Any]:
    row = {k: None for k in result_store.COLUMNS}
    row.update(asdict(job))
    row.update(status=status, verified=False, message=message, wall_s=wall_s)
    return {"row": row, "schedule": None}


def _prepare(job: Job) -> compiling.Kernels | None:
    """The :class:`~collsynth.solvers.compiling.Kernels` of ``job``, prepared before its clock
    (:func:`~collsynth.solvers.compiling.prepare_run`); None when its instance does not load or
    its producer is unknown (the run reports that)."""
    try:
        return compiling.prepare_run(load_instance(job.instance_file), job.producer)
    except Exception:  # noqa: BLE001 - the run itself records the failure
        return None


def _run_one(job: Job, kernels: compiling.Kernels | None = None) -> dict[str, Any]:
    try:
        instance = load_instance(job.instance_file)
        options = Options(
            solver=job.solver or "highs", driver=job.driver or None, time_limit=job.time_limit,
            threads=job.threads, seed=job.seed, params=json.loads(job.params),
        )
        row, schedule = run(instance, job.producer, options, kernels)
    except TooBig as e:
        return _failure_row(job, "skipped", str(e), 0.0)
    except InputError as e:
        return _failure_row(job, "error", f"bad input: {e}", 0.0)
    row.update(asdict(job))
    keep = isinstance(schedule, Schedule)  # trees plus a pipeline rule: the row alone is stored
    return {"row": row, "schedule": to_json(schedule) if keep else None}


def _watch_parent() -> None:
    """Kill this worker's process group (itself and its solver children) once the process
    that started it is gone."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os.killpg(os.getpgid(0), signal.SIGKILL)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _worker_main() -> int:
    """Worker-process entry: ``ready`` once imported, then one job (JSON) per stdin line and
    one result (JSON) per stdout line.

    Whatever a job prints (library log messages, solver chatter) goes to stderr: stdout
    carries only the result lines."""
    _watch_parent()
    channel = sys.stdout

    def say(line: bytes) -> None:
        channel.buffer.write(line)
        channel.flush()

    compiling.on_first_compile = lambda: say(COMPILING)
    argv = sys.argv[1:]
    share = argv[argv.index("--compile") + 1].split(",") if "--compile" in argv else []
    with contextlib.redirect_stdout(sys.stderr):
        for task in share:  # this worker's share of the batch's kernels (Workers.shares)
            compiling.run_task(task, combining="--no-reductions" not in argv)
    say(READY)
    for line in sys.stdin:
        if line.strip():
            job = Job(**json.loads(line))
            with contextlib.redirect_stdout(sys.stderr):
                kernels = _prepare(job)  # the job's own kernels only, before its clock
            say(COMPILED)
            with contextlib.redirect_stdout(sys.stderr):
                result = _run_one(job, kernels)
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
    """What a batch did: counts by status, jobs skipped (already stored, or running in another
    batch on the same store), jobs an interrupt stopped, wall time."""

    planned: int = 0
    skipped_done: int = 0
    ran: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    elsewhere: int = 0
    interrupted: int = 0
    not_started: int = 0
    signal: str = ""


class Interrupted(KeyboardInterrupt):
    """A batch stopped by SIGINT or SIGTERM; ``summary`` says what it kept."""

    def __init__(self, summary: BatchSummary):
        super().__init__(summary.signal)
        self.summary = summary


class _Signals:
    """SIGINT/SIGTERM while a batch runs: the first sets :attr:`signal` (the batch stops
    launching and kills its running jobs), the second kills the workers and exits at once
    (code 130). Only the main thread can install handlers; elsewhere nothing changes."""

    def __init__(self, workers: list[Workers]):
        self.signal = ""
        self.workers = workers
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> "_Signals":
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum, frame) -> None:
        if self.signal:
            for w in self.workers:
                w.stop()
            os.write(2, b"error: interrupted again: stopped at once; every finished run is in the store\n")
            os._exit(130)
        self.signal = signal.Signals(signum).name


class _Batch:
    """One batch's bookkeeping: claims on the store, commits, the summary."""

    def __init__(self, store: str | Path, summary: BatchSummary, rerun: bool):
        self.store, self.summary, self.rerun = store, summary, rerun
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.prov = provenance()
        self.claimed: set[tuple] = set()
        self.settled = 0

    def claim(self, job: Job) -> str:
        """``claimed``, ``done`` (stored meanwhile) or ``taken`` (another batch runs it)."""
        expires = time.time() + hard_limit(job) + STARTUP_S
        state = result_store.claim(self.store, job.key(), self.owner, expires, rerun=self.rerun)
        if state == "claimed":
            self.claimed.add(job.key())
        return state

    def settle(self, state: str, job: Job, result: dict[str, Any] | None) -> bool:
        """Record what happened to a job; True when a row was committed."""
        self.settled += 1
        if state == "done":
            self.summary.skipped_done += 1
        elif state == "taken":
            self.summary.elsewhere += 1
        elif result is INTERRUPTED or (result or {}).get("interrupted"):
            self.summary.interrupted += 1
        else:
            self.commit(result)
            return True
        return False

    def commit(self, result: dict[str, Any]) -> None:
        """Store a finished job's row (with the batch's provenance) and its schedule, and release
        its claim."""
        row = result["row"]
        row["provenance"] = self.prov
        sched = from_json(result["schedule"]) if result.get("schedule") else None
        result_store.put(self.store, row, sched)
        self.claimed.discard(result_store.run_key(row))
        self.summary.ran += 1
        self.summary.statuses[row["status"]] = self.summary.statuses.get(row["status"], 0) + 1

    def release(self) -> None:
        """Drop the claims of the jobs this batch did not finish."""
        result_store.release(self.store, self.claimed, self.owner)
        self.claimed.clear()


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
    """Run the jobs not yet in the store; commit each finished one at once.

    Jobs another batch on the same store has claimed are left to it. On SIGINT or SIGTERM
    nothing more starts, the running jobs are killed (their process groups) and
    :class:`Interrupted` is raised once every finished job is committed; a second signal
    exits at once.
    """
    t0 = time.perf_counter()
    summary = BatchSummary(planned=len(jobs))
    if not str(store).strip():
        raise InputError("--store", "expected a results store folder, got ''")
    if executor == "dask":
        dask_address(address)
    result_store.connect(store).close()  # a store that cannot be written is refused before any job
    done = set() if rerun else result_store.done_keys(store)
    todo = [j for j in jobs if j.key() not in done]
    summary.skipped_done = len(jobs) - len(todo)
    batch = _Batch(store, summary, rerun)
    n = max(1, min(workers or os.cpu_count() or 1, len(todo) or 1))
    pool = Workers(compile_shares(todo, n) if executor == "local" else None)
    bar = _progress(progress, len(todo))
    try:
        with _Signals([pool]) as signals:
            if executor == "local":
                _run_local(todo, n, batch, pool, signals, bar)
            elif executor == "dask":
                _run_dask(todo, address, batch, signals, bar)
            else:
                raise InputError("--executor", f"unknown executor {executor!r}; expected local or dask")
    finally:
        bar.close()
        batch.release()
    summary.wall_s = time.perf_counter() - t0
    if signals.signal:
        summary.signal = signals.signal
        summary.not_started = len(todo) - batch.settled
        raise Interrupted(summary)
    return summary


def compile_shares(todo: Sequence[Job], n: int) -> tuple[list[list[str]], bool]:
    """The kernels the jobs use, as :func:`collsynth.solvers.compiling.compile_all`'s tasks
    dealt to ``n`` workers (each compiles its share before its first job, so that a first run
    on a machine compiles each kernel once, the cores sharing the work), and whether an
    instance combines (the reductions' kernels are compiled only then). Jobs too small to repay
    a compile (:func:`collsynth.solvers.compiling.interprets`) need none: a batch of them only
    compiles nothing."""
    instances = {f: load_instance(f) for f in sorted({j.instance_file for j in todo})}
    big = [j for j in todo if not compiling.interprets(instances[j.instance_file], j.producer)]
    if not big:
        return [[] for _ in range(n)], False
    combining = any(c.combining for j in big for c in instances[j.instance_file].collectives)
    tasks = compiling.tasks_for(sorted({j.producer for j in big}))
    return [tasks[k::n] for k in range(n)], combining


def _run_local(todo: list[Job], n: int, batch: _Batch, pool: Workers, signals: _Signals, bar) -> None:
    """``n`` threads each drive a worker through the jobs handed to them; the main thread
    alone touches the store (claims each job before handing it over, commits each result).

    One thread only, because a process that closes any descriptor of a database file drops
    every POSIX lock it holds on that file, those of SQLite connections in its other threads
    included (https://sqlite.org/howtocorrupt.html, section 2.2): the store's check of a file's
    header (:func:`collsynth.results.store.file_damage`) in one thread while another commits
    let a reader in another process checkpoint and delete the WAL under that commit, losing a
    run the interrupt message had counted. Once this returns every result is committed or
    dropped, so nothing lands after the caller's message."""
    pending = collections.deque(todo)
    handed: queue.Queue = queue.Queue()
    results: queue.Queue = queue.Queue()

    def slot() -> None:
        while (job := handed.get()) is not None:
            try:
                results.put((job, run_isolated(job, pool)))
            except BaseException as e:  # noqa: BLE001 - handed to the main thread, which re-raises it
                results.put((None, e))

    threads = [threading.Thread(target=slot, name=f"bench-slot-{i}", daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    busy = 0
    try:
        while True:
            if signals.signal and not pool.stopped:
                pool.stop()
            while busy < n and pending and not signals.signal:
                job = pending.popleft()
                state = batch.claim(job)
                if state == "claimed":
                    bar.running(job)
                    handed.put(job)
                    busy += 1
                else:
                    batch.settle(state, job, None)
            if not busy:
                return
            try:
                job, result = results.get(timeout=0.1)
            except queue.Empty:
                continue
            busy -= 1
            if job is None:
                raise result
            if batch.settle("claimed", job, result):
                bar.advance(job, result["row"]["status"])
    finally:
        if signals.signal or busy:
            pool.stop()
        for _ in threads:
            handed.put(None)
        pool.close()
        for t in threads:
            t.join(timeout=10)


def _run_dask(todo: list[Job], address: str | None, batch: _Batch, signals: _Signals, bar) -> None:
    """The jobs on a Dask scheduler; its workers call :func:`run_isolated`. An interrupt
    cancels what has not finished (a job already running on a Dask worker runs to its limit)."""
    address = dask_address(address)
    try:
        from distributed import Client, wait
    except ImportError:
        raise InputError("--executor", "dask is not installed: pip install 'collsynth[dask]'") from None
    try:
        client = Client(address, timeout=30)
    except (OSError, ValueError) as e:
        raise InputError("--address", f"cannot reach the dask scheduler at {address}: {e}") from None
    try:
        futures = {}
        for job in todo:
            state = batch.claim(job)
            if state == "claimed":
                futures[client.submit(run_isolated, asdict(job), pure=False)] = job
            else:
                batch.settle(state, job, None)
        remaining = set(futures)
        while remaining and not signals.signal:
            try:
                finished, remaining = wait(remaining, timeout=0.2, return_when="FIRST_COMPLETED")
            except TimeoutError:
                continue
            for fut in finished:
                result = fut.result()
                if batch.settle("claimed", futures[fut], result):
                    bar.advance(futures[fut], result["row"]["status"])
        if remaining:
            client.cancel(list(remaining))
            batch.summary.interrupted += len(remaining)
    finally:
        client.close()


class _progress:
    """A rich progress bar with ETA on stderr (silent when disabled): the jobs running now
    (instance and producer) and the finished ones counted by status as they come."""

    def __init__(self, enabled: bool, total: int):
        self.bar = None
        self.lock = threading.Lock()
        self.now: dict[tuple, str] = {}
        self.counts: collections.Counter = collections.Counter()
        if enabled and total:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self.bar = Progress(
                TextColumn("bench"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                TextColumn("eta"), TimeRemainingColumn(), TextColumn("{task.fields[counts]}"),
                TextColumn("[dim]{task.fields[now]}"), console=Console(stderr=True),
            )
            self.bar.start()
            self.task = self.bar.add_task("bench", total=total, counts="", now="")

    def _show(self) -> None:
        counts = " ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        now = "running: " + ", ".join(self.now.values()) if self.now else ""
        self.bar.update(self.task, counts=counts, now=now)

    def running(self, job: Job) -> None:
        """``job`` started."""
        if self.bar:
            with self.lock:
                self.now[job.key()] = f"{job.instance} {job.producer}"
                self._show()

    def advance(self, job: Job | None = None, status: str | None = None) -> None:
        """A job finished with ``status``."""
        if self.bar:
            with self.lock:
                if job is not None:
                    self.now.pop(job.key(), None)
                if status:
                    self.counts[status] += 1
                self.bar.advance(self.task)
                self._show()

    def close(self) -> None:
        """Stop the progress bar, if one is shown."""
        if self.bar:
            self.bar.stop()


if __name__ == "__main__":
    sys.exit(_worker_main())
