"""Run limits shared by every layer: a wall-clock deadline and a memory budget.

A run's ``--time-limit`` is one :class:`Deadline` (an absolute ``time.monotonic()`` instant, the
same clock in every process of the host, so it can be handed to pool workers). Code that loops
checks it (:meth:`Deadline.check`) and stops with :class:`TimeLimitReached`, saying what it had
done; :func:`enforce` is the last resort for code that does not check (a model build, a long
library call): a timer interrupts the main thread at the deadline with the same exception.
A run stops at most :data:`GRACE_S` after its limit (measured by
``benchmarks/bench_limits.py``).

The deadline is the only budget: a stage that may use part of the run's time gets a deadline
of its own cut from the run's (:meth:`Deadline.share`: a fraction of what is left;
:meth:`Deadline.child`: at most so many seconds), never past the run's, and never a float
of seconds counted from its own start. The default limit is :data:`DEFAULT_TIME_LIMIT_S`.

The memory budget is what an instance may need before anything is allocated for it (see
:mod:`collsynth.instances.size`): the machine's physical memory (or its cgroup limit), or
``--max-memory`` (:func:`set_memory_budget`; kept in the ``COLLSYNTH_MAX_MEMORY`` environment
variable so that batch workers inherit it). An instance over budget is refused with
:class:`TooBig`, a one-line :class:`~collsynth.InputError` naming the field that makes it big.

>>> parse_bytes("1.5G"), parse_bytes("512MiB"), parse_bytes("1000")
(1610612736, 536870912, 1000)
>>> Deadline.after(None).left() is None
True
>>> d = Deadline.after(10); d.share(0.5).left() <= 5 < d.left(), d.child(60).at == d.at
(True, True)
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from . import InputError

DEFAULT_TIME_LIMIT_S = 60.0  # a run's time limit when none is given (CLI, API, batch suites)
GRACE_S = 3.0  # seconds a run may take past its time limit: stopping, verifying and pricing
# what was found at the limit (benchmarks/bench_limits.py measures the overshoot per producer)
HARD_MARGIN_S = float(os.environ.get("COLLSYNTH_JOB_GRACE_S", "10"))  # after the limit and the
# grace, a process still running a job is killed (solve's watchdog, the batch runner's hard kill)
MEMORY_ENV = "COLLSYNTH_MAX_MEMORY"
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


class TimeLimitReached(BaseException):
    """The deadline passed while ``stage`` ran; ``done`` says what had been done by then.

    A ``BaseException`` (like ``KeyboardInterrupt``): code that turns failures into statuses
    (``except Exception``) must not swallow the end of the run's time.
    """

    def __init__(self, stage: str, done: str = ""):
        super().__init__(stage, done)  # the arguments, so that it pickles (pool workers raise it)
        self.stage = stage
        self.done = done

    def __str__(self) -> str:
        return f"time limit reached during {self.stage}" + (f" ({self.done})" if self.done else "")


@dataclass(frozen=True)
class Deadline:
    """The instant ``at`` (``time.monotonic()`` seconds; None: no limit) a run must stop by,
    and the ``limit`` in seconds it was given."""

    at: float | None
    limit: float | None

    @classmethod
    def after(cls, seconds: float | None) -> "Deadline":
        """A deadline ``seconds`` from now (None: never)."""
        if seconds is None:
            return cls(None, None)
        return cls(time.monotonic() + float(seconds), float(seconds))

    def left(self) -> float | None:
        """Seconds left, never negative (None without a limit)."""
        return None if self.at is None else max(0.0, self.at - time.monotonic())

    def expired(self) -> bool:
        """True once the deadline has passed."""
        return self.at is not None and time.monotonic() >= self.at

    def check(self, stage: str, done: str = "") -> None:
        """Raise :class:`TimeLimitReached` (``stage``, ``done``) if the deadline has passed."""
        if self.expired():
            raise TimeLimitReached(stage, done)

    def share(self, fraction: float) -> "Deadline":
        """A deadline ``fraction`` (0..1) of the time left from now: a stage that must leave
        the rest to the stages after it. Never later than this one."""
        if self.at is None:
            return self
        now = time.monotonic()
        return Deadline(min(self.at, now + max(0.0, float(fraction)) * max(0.0, self.at - now)), self.limit)

    def child(self, seconds: float | None) -> "Deadline":
        """A deadline at most ``seconds`` from now (None: this one), never later than this one."""
        if seconds is None:
            return self
        at = time.monotonic() + max(0.0, float(seconds))
        return Deadline(at if self.at is None else min(self.at, at), self.limit if self.at is not None else float(seconds))

    def earlier(self, seconds: float) -> "Deadline":
        """The same deadline ``seconds`` earlier: a stage's end that keeps time for what must
        follow it before the deadline (reading a solver's incumbent back)."""
        return self if self.at is None else Deadline(self.at - max(0.0, float(seconds)), self.limit)

    def extended(self, seconds: float) -> "Deadline":
        """The same deadline ``seconds`` later (the grace given to verification and pricing)."""
        return self if self.at is None else Deadline(self.at + seconds, self.limit)


NO_LIMIT = Deadline(None, None)  # the deadline of a run without a time limit


_alarm_lock = threading.Lock()
_active: list[Deadline] = []  # the deadlines of the enforce blocks around the running code
_shields = [0]  # depth of shielded() blocks in the main thread
RETRY_S = 0.05  # a timer that lands in a shielded block fires again this much later
AGAIN_S = 0.5  # and one whose exception did not stop the body, this much later
KEPT_S = 1.0  # and one whose exception a keeper caught (kept()), this much later: its time to return
# what it kept (then verification and pricing have what is left of the grace)
_fired = [False]  # the innermost enforce block's timer has raised its exception


@contextlib.contextmanager
def enforce(deadline: Deadline, stage: str) -> Iterator[None]:
    """Interrupt the body with :class:`TimeLimitReached` (``stage``) when ``deadline`` passes.

    A real-time timer (``SIGALRM``) raises the exception in the main thread between two Python
    bytecodes, so it stops pure-Python work at once and a C call (a large numpy operation)
    when it returns; inside :func:`shielded` it waits for the block's end. Outside the main
    thread, or without a deadline, the body runs unguarded (cooperative
    :meth:`Deadline.check` calls still apply). Not reentrant: the innermost ``enforce`` owns
    the timer until it exits. :func:`seconds_left` tells code inside what is left.
    """
    if deadline.at is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    armed = [True]

    def fire(signum, frame):
        if not armed[0]:
            return
        if _shields[0]:
            signal.setitimer(signal.ITIMER_REAL, RETRY_S)
            return
        # fire again later in case this exception is swallowed (raised inside a C callback,
        # which only prints it); the body's exit disarms the timer when it does propagate
        signal.setitimer(signal.ITIMER_REAL, AGAIN_S)
        _fired[0] = True
        raise TimeLimitReached(stage)

    with _alarm_lock:
        previous = signal.signal(signal.SIGALRM, fire)
        left = deadline.at - time.monotonic()
        if left <= 0:
            signal.signal(signal.SIGALRM, previous)
            raise TimeLimitReached(stage)
        signal.setitimer(signal.ITIMER_REAL, left)
    _active.append(deadline)
    try:
        yield
    except SystemError as e:  # the timer fired inside a compiled (numba) call: CPython wraps it
        stop = limit_reached(e, deadline, stage)
        if stop is not None:
            raise stop from None
        raise
    finally:
        armed[0] = False
        _fired[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        _active.remove(deadline)


def limit_reached(e: BaseException, deadline: Deadline, stage: str) -> TimeLimitReached | None:
    """The :class:`TimeLimitReached` ``e`` is: itself, or the one a :class:`SystemError` wraps
    (an :func:`enforce` timer that fired inside a compiled numba call; ``stage`` where the
    wrapped exception was lost on the way and ``deadline`` has passed); None for any other."""
    if isinstance(e, TimeLimitReached):
        return e
    if isinstance(e, SystemError):
        cause = e.__cause__ or e.__context__
        if isinstance(cause, TimeLimitReached):
            return cause
        if deadline.expired() and "exception set" in str(e):
            return TimeLimitReached(stage)
    return None


def kept() -> None:
    """Say that a :class:`TimeLimitReached` was caught by code that keeps what it had found
    (a driver's best schedule so far) and returns it at once: if the :func:`enforce` timer
    raised it, the timer fires again only :data:`KEPT_S` later instead of :data:`AGAIN_S`
    (on a loaded machine, unwinding a large stage takes longer than that, and the second
    exception would cost the run the schedule). A stop raised by a cooperative check at the
    deadline gets the same: the timer, due sooner (the pipeline's lag behind the producer's
    deadline, half a second), is put off to :data:`KEPT_S` from now (A100 x2 allreduce at the
    default 60 s beside two busy loops: the producer's check stopped its choice at the
    limit, and the timer's own exception, half a second later, reached it while it returned
    its kept schedule: the run ended with none); a later one stays as it is."""
    if threading.current_thread() is not threading.main_thread():
        return
    if _fired[0]:
        signal.setitimer(signal.ITIMER_REAL, KEPT_S)
    elif _active and 0 < signal.getitimer(signal.ITIMER_REAL)[0] < KEPT_S:
        signal.setitimer(signal.ITIMER_REAL, KEPT_S)


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Let the body finish before an :func:`enforce` timer interrupts: for calls that stop by
    their own time limit (a solver given :func:`seconds_left`) and must not be cut half-way
    (a library redirecting file descriptors while it runs)."""
    _shields[0] += 1
    try:
        yield
    finally:
        _shields[0] -= 1


def checkpoint(stage: str, done: str = "") -> None:
    """Raise :class:`TimeLimitReached` (``stage``, ``done``) if a deadline being enforced
    around the caller has passed: the cooperative check of code between two blocks of work (a
    model build between its constraint blocks), which does not wait for the timer of
    :func:`enforce` to land after a long C call on a loaded machine."""
    for d in _active:
        d.check(stage, done)


def seconds_left(limit: float | None = None) -> float | None:
    """``limit`` capped by what is left of the deadlines being enforced (None: no limit)."""
    for d in _active:
        left = d.left()
        limit = left if limit is None else min(limit, left)
    return limit


@contextlib.contextmanager
def cancel_at(deadline: Deadline, cancel: Callable[[], None]) -> Iterator[None]:
    """Call ``cancel()`` from a timer thread once ``deadline`` passes while the body runs:
    the stop of a library call that runs in C without the GIL and polls a flag of its own
    (a solver's interrupt callback) but may not look at its clock often enough. ``cancel``
    is called at most once, never after the body has left (the timer is stopped and its
    thread joined on exit); a deadline already past calls it at once; no limit, never.

    >>> hits = []
    >>> with cancel_at(Deadline.after(0), lambda: hits.append(1)): time.sleep(0.2)
    >>> with cancel_at(Deadline.after(60), lambda: hits.append(2)): pass
    >>> hits
    [1]
    """
    if deadline.at is None:
        yield
        return
    lock = threading.Lock()
    live = [True]

    def fire() -> None:
        with lock:  # the body's exit and the timer never overlap: no cancel after the body left
            if live[0]:
                cancel()

    timer = threading.Timer(max(0.0, deadline.at - time.monotonic()), fire)
    timer.daemon = True
    timer.name = "collsynth-cancel-at"
    timer.start()
    try:
        yield
    finally:
        with lock:
            live[0] = False
        timer.cancel()
        timer.join()


def in_a_child(deadline: Deadline, stage: str, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` computed in a spawned child process that is killed once ``deadline``
    passes (then :class:`TimeLimitReached` for ``stage``): the stop of one long library call
    that keeps no clock of its own (an LP solver's presolve). ``fn`` and ``args`` must pickle;
    an exception ``fn`` raises is raised here. The child never outlives the call.

    >>> in_a_child(Deadline.after(60), "a sum", sum, [1, 2, 3])
    6
    """
    import multiprocessing  # only when a call runs apart

    ctx = multiprocessing.get_context("spawn")  # a fork would inherit a solver's thread pool half-made
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child_call, args=(send, fn, args), daemon=True, name=f"collsynth {stage}")
    child.start()
    send.close()
    try:
        if not receive.poll(deadline.left()):  # no limit: waits for the answer
            raise TimeLimitReached(stage, "its child process killed at the deadline")
        ok, value = receive.recv()
    except EOFError:
        raise RuntimeError(f"{stage}: the child process ended without an answer "
                           f"(exit code {child.exitcode})") from None
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        receive.close()
    if ok:
        return value
    raise value


def _child_call(send: Any, fn: Callable[..., Any], args: tuple) -> None:
    """The child of :func:`in_a_child`: ``(True, fn(*args))`` or ``(False, the exception)``."""
    try:
        answer = (True, fn(*args))
    except BaseException as e:  # noqa: BLE001 - the caller raises it
        answer = (False, e)
    send.send(answer)
    send.close()


@contextlib.contextmanager
def watchdog(seconds: float | None, message: str) -> Iterator[None]:
    """The last resort of a process running one job: if the body is still running after
    ``seconds`` (a call that neither returns nor lets the timer of :func:`enforce` in), write
    ``message`` as one ``error:`` line on stderr, kill this process's children (solver
    sub-processes, pool workers) and exit with code 1. The batch runner does the same from
    outside (it kills a worker's process group)."""
    if seconds is None:
        yield
        return

    def give_up() -> None:
        os.write(2, f"error: {message}\n".encode())
        for pid in reversed(_descendants(os.getpid())):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        os._exit(1)

    timer = threading.Timer(seconds, give_up)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid``, parents before their children (from ``/proc``)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop(0)
        out.append(p)
        todo += children.get(p, [])
    return out


# ---- memory ---------------------------------------------------------------------------------

def parse_bytes(text: str | int | float, where: str = "--max-memory") -> int:
    """A size written ``1000``, ``512M``, ``1.5G``, ``2GiB`` or ``4GB`` (powers of 1024) in bytes."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value, unit = float(text), ""
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmMgGtT]?)(?:i?[bB])?\s*", str(text))
        if not m:
            raise InputError(where, f"expected a size such as 4G, 512M or 1000000 (bytes), got {text!r}")
        value, unit = float(m.group(1)), m.group(2).lower()
    if not math.isfinite(value) or value <= 0:
        raise InputError(where, f"expected a positive size, got {text!r}")
    return int(value * _UNITS[unit])


def machine_memory() -> int:
    """Physical memory of this machine in bytes, or the cgroup's limit when lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return total


def set_memory_budget(text: str | int | None) -> None:
    """Set the budget (``--max-memory``) for this process and the processes it starts;
    None restores the default (the machine's memory)."""
    if text is None:
        os.environ.pop(MEMORY_ENV, None)
    else:
        os.environ[MEMORY_ENV] = str(parse_bytes(text))


def memory_budget() -> tuple[int, str]:
    """``(bytes, what it is)``: ``--max-memory`` when set, else the machine's memory."""
    text = os.environ.get(MEMORY_ENV)
    if text:
        return parse_bytes(text, MEMORY_ENV), "the --max-memory budget"
    return machine_memory(), "this machine's memory"


def human_bytes(n: float) -> str:
    """``n`` bytes as ``1.5 GiB`` (binary units).

    >>> human_bytes(3 << 30), human_bytes(1536), human_bytes(3 << 50), human_bytes(5 << 70)
    ('3.0 GiB', '1.5 KiB', '3.0 PiB', '5,120 EiB')
    """
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
    for unit in units[:-1]:
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} EiB" if abs(n) < 1024 else f"{n:,.0f} EiB"


class TooBig(InputError):
    """An instance (or a run of it) would need more memory than the budget: ``where`` names
    the field that makes it big."""


def require(need: float, where: str, what: str) -> None:
    """Refuse (:class:`TooBig` at ``where``) when ``need`` bytes exceed the memory budget.

    ``what`` describes the need, e.g. ``"40000 nodes: hop distances (N^2)"``.
    """
    budget, source = memory_budget()
    if need > budget:
        hint = "" if os.environ.get(MEMORY_ENV) else "; --max-memory sets another budget"
        raise TooBig(where, f"too big: {what} need about {human_bytes(need)}, more than {source} "
                            f"({human_bytes(budget)}{hint})")
