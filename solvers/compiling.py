"""Compiled kernels: compiled once, kept on disk, never on a run's clock.

The inner loops of the lower bounds, the verifier, the cost models, the greedy and TEN recovery
are numba kernels compiled with ``cache=True``: the first process that calls one compiles it
(seconds to minutes on a loaded machine) and writes it to numba's on-disk cache (the
``__pycache__`` folder beside the module, or ``NUMBA_CACHE_DIR``), and every later process loads
it in milliseconds. This module calls them on tiny inputs *before* a run's clock starts:

- :func:`prepare_run` makes a run's one decision, compile or interpret (:func:`kernel_mode`),
  where the run is prepared (``collsynth solve``, a batch worker, or
  :func:`collsynth.solvers.pipeline.run` when its caller prepared nothing), and compiles (or
  loads) the kernels the run uses: the lower bounds', verification's and pricing's
  (:func:`compile_kernels`; those of reductions only when a collective combines) and the
  producer's own (:func:`compile_producer`), each cached per process *and mode*. It returns
  :class:`Kernels`: the mode the run then runs under and the seconds spent, which a row
  records as ``compile_s``, apart from ``wall_s`` and every solver time. A run too small to
  repay a compile (:func:`interprets`: at most :data:`SMALL_SENDS` sends at the fewest)
  compiles nothing: the kernels numba's cache holds run compiled, the others as Python
  (:mod:`collsynth.tens.interpreted`, same results), inside its clock;
- :func:`compile_all` compiles every kernel ahead (``collsynth warmup``, and ``collsynth
  bench`` for the producers it plans), split over a few processes.

The first time a process compiles anything (a cache miss: numba's ``numba:compile`` event, which
a load from the cache does not fire) one line is written to stderr: :data:`NOTICE`.

Compiling is not MIP warm starting (``warm_start``, the drivers' ``warm`` parameter): these are
machine-code kernels, compiled once per machine.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Callable

import numpy as np
from numba.core import event

from ..instances import Instance, generators, size
from ..instances.instance import make_instance
from ..tens import bounds, cost, cost_models, export_deps, interpreted, pipelined_trees, runtime_kernels, verify
from ..tens.schedule import from_sends, reverse
from . import producers as registry

SMALL_SENDS = 20_000  # a run with at most this many sends at the fewest runs uncached kernels as Python
NOTICE = "compiling kernels, first run only (kept on disk; `collsynth warmup` compiles them ahead)"
SHARED_TASKS = ("bounds", "verify", "price")  # the kernels every run uses, split for compile_all
RUNTIME_TASK = "runtime"  # the runtime model's walks: priced after a run, with a calibration, so warmed ahead only
COMPILE, INTERPRET = "compile", "interpret"  # a run's kernels: compiled, or as Python where numba's cache lacks them


@dataclass(frozen=True)
class Kernels:
    """A run's one decision on its kernels: ``mode`` (:data:`COMPILE` or :data:`INTERPRET`)
    and the seconds :func:`prepare_run` spent compiling or loading them (a row's ``compile_s``)."""

    mode: str
    compile_s: float = 0.0

    @property
    def interpreting(self) -> bool:
        """Whether kernels numba's cache lacks run as Python."""
        return self.mode == INTERPRET


class _FirstCompile(event.Listener):
    """Calls :data:`on_first_compile` at the first cache miss of the process (numba fires
    ``numba:compile`` only when it compiles, not when it loads from its cache)."""

    def __init__(self) -> None:
        self.seen = False

    def on_start(self, ev) -> None:  # noqa: D102 - numba's Listener interface
        if not self.seen and not interpreted.refusing():  # a compile refused while interpreting is none
            self.seen = True
            on_first_compile()

    def on_end(self, ev) -> None:  # noqa: D102
        pass


def _say_compiling() -> None:
    print(NOTICE, file=sys.stderr, flush=True)


on_first_compile: Callable[[], None] = _say_compiling  # a batch worker replaces it (tells its parent)
_LISTENER = _FirstCompile()
event.register("numba:compile", _LISTENER)


def compiled_in_this_process() -> bool:
    """Whether this process has compiled a kernel (a cache miss), as opposed to only loading."""
    return _LISTENER.seen


def _tiny_cases(combining: bool) -> list[tuple]:
    """Tiny (schedule, instance) pairs covering every kind of send the kernels treat apart:
    whole and fractional copies, routed sends, pieces relayed through a switch (the switch
    forwarding rule's kernels) and, with ``combining``, whole and fractional reductions, also
    relayed; each also listed latest step first (the step view's scatter into step order)."""
    ring3 = make_instance(generators.build("ring", {"nodes": 3}), "allgather")
    ring4 = make_instance(generators.build("ring", {"nodes": 4}), "allgather")
    half = Fraction(1, 2)
    copies = from_sends([(i, lo, hi, i, (i + d) % 3, step) for i in range(3) for d in (1, 2)
                         for lo, hi, step in ((0, half, 1), (half, 1, 2))], "allgather", 3, 3)
    direct = from_sends([(i, 0, 1, i, j, 1) for i in range(4) for j in range(4) if i != j], "allgather", 4, 4,
                        routing="shortest-path")
    pair = make_instance(generators.build("switch", {"nodes": 2, "unwind": 0}), "allgather")  # GPUs 0, 1; switch 2
    relayed = from_sends([(g, lo, hi, src, dst, step) for g in (0, 1) for lo, hi, q in ((0, half, 0), (half, 1, 1))
                          for src, dst, step in ((g, 2, q + 1), (2, 1 - g, q + 2))], "allgather", 3, 3)
    forwarded = from_sends([(i, 0, 1, (i + 1) % 3, (i + 2) % 3, 2) for i in range(3)]
                           + [(i, 0, 1, i, (i + 1) % 3, 1) for i in range(3)], "allgather", 3, 3)
    cases = [(copies, ring3), (direct, ring4), (relayed, pair), (forwarded, ring3)]
    if combining:  # reductions of fractional and of whole pieces (these pass empty piece bounds: kernels of their own)
        whole = from_sends([(i, 0, 1, i, (i + d) % 3, 1) for i in range(3) for d in (1, 2)], "allgather", 3, 3)
        reduce_scatter = replace(ring3, collectives=(ring3.collective.with_kind("reduce_scatter"),))
        cases += [(reverse(copies), reduce_scatter), (reverse(whole), reduce_scatter),
                  (reverse(relayed), replace(pair, collectives=(pair.collective.with_kind("reduce_scatter"),)))]
    return cases + [(sched.select(np.arange(len(sched))[::-1]), inst) for sched, inst in cases]


def compile_task(task: str, combining: bool = True) -> list[str]:
    """Compile (or load) one group of shared kernels: ``bounds`` (the lower bounds of a 3-node
    ring), ``verify`` (verification and the TEN capacity check of :func:`_tiny_cases`),
    ``price`` (every cost model on them, exact and grouped dependencies) or ``runtime`` (the
    runtime model's walks of a program, :func:`collsynth.tens.runtime_kernels.warm`, and the
    export's implied-dependency pass, :func:`collsynth.tens.export_deps.warm`, for
    :func:`compile_all` only: that model prices after a run); returns the violations of the
    tiny schedules (none)."""
    if task == "bounds":
        bounds.warm(make_instance(generators.build("ring", {"nodes": 3}), "allgather"))
        return []
    if task == RUNTIME_TASK:
        runtime_kernels.warm()
        export_deps.warm()  # the export's pass, which the runtime model's export choice runs per program
        return []
    if task == "price":
        cost.warm_event_layout()  # what tiny schedules do not reach
        pipelined_trees.warm()  # a reduce-scatter's listing by owner (tree packing's emission)
    violations = []
    for sched, inst in _tiny_cases(combining):
        if task == "verify":
            v = verify.verify(sched, inst)
            violations += [] if v is None else [str(v)]
            bounds.respects_ten_capacity(sched, inst)  # judge()'s check of the schedules counted in timesteps
        elif task == "price":
            for model in cost_models.names():
                cost_models.price(sched, inst, model)
                cost_models.price(sched, inst, model, exact_deps=False)  # group prefixes: the biggest schedules' mode
        else:
            raise ValueError(f"unknown compile task {task!r}; expected one of "
                             f"{', '.join((*SHARED_TASKS, RUNTIME_TASK))}")
    return violations


@functools.cache
def compile_kernels(combining: bool = True, mode: str = COMPILE) -> list[str]:
    """Compile (or load from numba's cache) the lower bounds', verification, pricing and judging
    kernels, once per process and ``mode``, before any run's clock starts (:func:`compile_task`
    of each of :data:`SHARED_TASKS`; under :data:`INTERPRET` only what numba's cache holds is
    loaded, the rest runs as Python); returns the tiny schedules' violations (none)."""
    with interpreted.interpreting(mode == INTERPRET):
        return [v for task in SHARED_TASKS for v in compile_task(task, combining)]


@functools.cache
def compile_producer(name: str, mode: str = COMPILE) -> None:
    """Compile (or load from numba's cache) the kernels of producer ``name`` (its ``warm``),
    once per process and ``mode`` (as :func:`compile_kernels`), before a run's clock starts."""
    prod = registry.get(name)
    if prod.warm is not None:
        with interpreted.interpreting(mode == INTERPRET):
            prod.warm()


def interprets(instance: Instance, producer: str | None = None) -> bool:
    """Whether a run on ``instance`` (of ``producer``, when named) is too small to repay
    compiling its kernels: at most :data:`SMALL_SENDS` sends at the fewest
    (:func:`collsynth.instances.size.estimate`; the quick suite's biggest has 364), or, where the
    producer expects more at its default settings (a pipeline's pieces,
    :attr:`collsynth.instances.size.Build.sends`), at most that many. Such a run uses the kernels
    numba's cache holds and runs the others as Python (:func:`collsynth.tens.interpreted.interpreting`):
    tree packing's 1 GB allreduce on ForestColl's MI250 x3 has 4,512 sends at the fewest and 64 M
    at its pieces, about 265 us a send as Python."""
    sends = size.estimate(instance, horizon=1).sends
    build = None if producer is None else registry.planned(registry.get(producer), instance, {})
    return max(sends, (build.sends or 0) if build is not None else 0) <= SMALL_SENDS


def kernel_mode(instance: Instance, producer: str | None = None) -> str:
    """:data:`INTERPRET` for a run on ``instance`` (of ``producer``) that :func:`interprets`, else :data:`COMPILE`."""
    return INTERPRET if interprets(instance, producer) else COMPILE


def prepare_run(instance: Instance, producer: str) -> Kernels:
    """A run's :class:`Kernels`: its mode (:func:`kernel_mode`, decided here once), and the
    kernels a run of ``producer`` on ``instance`` uses compiled or loaded under that mode
    (:func:`compile_kernels`, the reductions' only when a collective combines;
    :func:`compile_producer`), so that no kernel is compiled or loaded on the run's clock.
    ``compile_s`` is about 0 once done in this process for that mode."""
    return prepare(instance, producer, kernel_mode(instance, producer))


def prepare(instance: Instance, producer: str, mode: str) -> Kernels:
    """:func:`prepare_run` under a ``mode`` already decided (tests comparing the two modes)."""
    t0 = time.perf_counter()
    compile_kernels(any(c.combining for c in instance.collectives), mode)
    compile_producer(producer, mode)
    return Kernels(mode, time.perf_counter() - t0)


def tasks_for(producers) -> list[str]:
    """The compile tasks of :func:`compile_all`: the shared kernels' groups, the runtime model's, then one per
    distinct producer ``warm`` (producers sharing kernels share a task)."""
    tasks, seen = [*SHARED_TASKS, RUNTIME_TASK], set()
    for name in producers:
        warm = registry.get(name).warm
        if warm is not None and warm not in seen:
            seen.add(warm)
            tasks.append(f"producer:{name}")
    return tasks


def run_task(task: str, combining: bool = True) -> tuple[str, float, bool]:
    """One compile task in this process: (task, seconds, whether anything compiled)."""
    t0 = time.perf_counter()
    if task.startswith("producer:"):
        compile_producer(task.split(":", 1)[1])
    else:
        compile_task(task, combining)
    return task, time.perf_counter() - t0, compiled_in_this_process()


def _pool_start(flag, lock) -> None:
    """In a compile process: the first one to compile says so, once for all of them."""
    global on_first_compile

    def tell() -> None:
        with lock:
            if not flag.value:
                flag.value = 1
                _say_compiling()

    on_first_compile = tell


def compile_all(producers=None, jobs: int = 1, combining: bool = True) -> dict:
    """Compile (or load) every kernel the given producers (default: all) and every run use,
    ahead of any run, over ``jobs`` processes (each compiles disjoint kernel groups; numba's cache
    is shared through the disk). Returns ``{"seconds", "compiled", "tasks": {task: seconds}}``:
    ``compiled`` is False when everything came from the cache."""
    names = list(producers) if producers is not None else registry.producers()
    tasks = tasks_for(names)
    t0 = time.perf_counter()
    if jobs <= 1:
        done = [run_task(task, combining) for task in tasks]
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        ctx = multiprocessing.get_context("spawn")
        flag, lock = ctx.Value("b", 0), ctx.Lock()
        with ProcessPoolExecutor(min(jobs, len(tasks)), mp_context=ctx, initializer=_pool_start,
                                 initargs=(flag, lock)) as pool:
            done = list(pool.map(run_task, tasks, [combining] * len(tasks)))
    return {"seconds": round(time.perf_counter() - t0, 3), "compiled": any(c for _, _, c in done),
            "tasks": {task: round(s, 3) for task, s, _ in done}}


def cache_is_cold() -> bool:
    """Whether numba's on-disk cache lacks the verifier's first kernel, which every run loads: a
    sign that this machine (or this ``NUMBA_CACHE_DIR``) has compiled nothing yet. False when
    numba's cache layout is not the one looked for."""
    from ..tens import verify_kernels

    try:
        return not os.path.exists(verify_kernels.first_malformed._cache._cache_file._index_path)
    except AttributeError:
        return False


def compile_ahead(instance: Instance, producers, jobs: int | None = None) -> float:
    """Before a first run on a cold cache (:func:`cache_is_cold`) too big to interpret
    (:func:`interprets`), compile the kernels of
    ``producers`` on ``instance`` over ``jobs`` processes (default: the cores) with
    :func:`compile_all` rather than one after the other in this process; nothing otherwise.
    Seconds taken."""
    jobs = jobs or os.cpu_count() or 1
    if jobs < 2 or all(interprets(instance, p) for p in producers) or not cache_is_cold():
        return 0.0
    combining = any(c.combining for c in instance.collectives)
    return compile_all(list(producers), jobs=jobs, combining=combining)["seconds"]
