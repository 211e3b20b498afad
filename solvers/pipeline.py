"""One run: produce, verify, price. The single path every producer's schedule goes through.

:func:`run` calls a producer, verifies its schedule against the instance (a schedule that fails
verification is never priced, stored or exported: the row says ``invalid`` and why), prices it
under every cost model of :mod:`collsynth.tens.cost_models` and reports the lower bounds
beside it. The returned
dict carries the ``collsynth solve --json`` fields (:data:`collsynth.tens.schema.ROW_FIELDS`);
the batch runner stores exactly these rows.

The lower bounds come from :mod:`collsynth.tens.bounds`, one per cost model (its
``lower_bound_column``: ``lower_bound_s`` synchronous alpha-beta, ``lower_bound_ten_s``,
``lower_bound_event_s``),
``lower_bound_timesteps`` (TEN timesteps of capacity-respecting schedules) and
``lower_bound_steps`` (hop distance: steps of schedules sent on links). Status from proofs
only (:func:`judge`): a row is ``optimal`` when its result meets a lower bound in the same
units, and ``bound_source`` names that bound.

Every row says which method produced it: the producer, the solver and the driver actually run
(a producer's default driver when none was asked), ``found_by`` (the ILP at a horizon, time
clustering, recovery, LP rounding, a construction, ...) and the solver's own status and time
(``solver_status``, ``solve_s``) apart from model building (``build_s``).

An instance with an ``epoch`` choice runs on that TEN timestep (given to every producer that
declares a ``timestep`` parameter, unless the run sets its own) and is TEN-priced on it.

The run's ``time_limit`` is one :class:`~collsynth.limits.Deadline` for all of it: the lower
bounds and the producer (model builds, LP bounds, recovery included) stop by the limit;
verification and pricing of what was found by then get the rest of
:data:`collsynth.limits.GRACE_S`. Each stage runs under :func:`collsynth.limits.enforce`, so
one that does not check the deadline itself is interrupted. A run stopped before it had a
verified schedule has status ``timeout`` and says where it stopped and what it had done; one
stopped while pricing keeps its verified schedule and the prices it finished. Each stage's time
is in the row (``verify_s``, ``price_*_s``) and in ``extra["stages_s"]``. Before anything runs,
the run's memory is estimated (:func:`collsynth.instances.size.check_run`, from what the
producer declares it will build, :func:`collsynth.solvers.producers.planned`).

Stages run side by side on two cores: the lower bounds of an instance of at least
:data:`BOUNDS_APART_NODES` nodes are computed in a forked child process while the producer
runs (:class:`BoundsApart`; smaller ones first, in this process), and the cost models price
the schedule in a thread while this thread verifies it, and in this thread too once it has
verified (:class:`SpeculativePricing`: the compiled kernels release the GIL); before verifying,
this thread computes the parts of the pricing plan the costliest model would otherwise derive
after its dependency groups (the routes and the event records,
:attr:`~collsynth.tens.cost_models.CostModel.prepare`), while the pricing thread computes those
groups: the event simulation's preparation is then no longer one chain. Only the times
overlap: the bounds, the verdict and the prices are those of the stages run one after the
other, and nothing priced is reported for a schedule that does not verify.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import threading
import time
import traceback
from dataclasses import replace
from typing import Any, Iterator

from .. import InputError
from ..instances import Instance, size
from ..instances.instance import epoch_timestep
from ..limits import GRACE_S, Deadline, TimeLimitReached, enforce
from ..tens import bounds, compact_forms, cost_models, pipelined_event, verify
from ..tens.bounds import Bound, Bounds
from ..tens.plan import PricingPlan
from ..tens import schema
from ..tens.schedule import Schedule
from ..tens.status import Status
from ..tens.ten import NotSupported
from .backends import names as backend_names
from ..tens.interpreted import interpreting
from .compiling import Kernels, prepare_run
from .producers import Options, Outcome, Unsupported, check_params, get, planned

RESULT_FIELDS = schema.ROW_FIELDS
ALARM_LAG_S = 0.5  # the producer's own deadline checks come first; the timer this much later
STOP_S = 1.5  # of the grace, kept for a timer to land (a C call returning: 1.06 s measured, a compiled pricing kernel at load 8) and the row
BOUNDS_SHARE = 0.25  # of a run's time limit, the most its lower bounds may take
BOUNDS_MIN_S = 1.0  # unless the limit is shorter, the bounds get at least this
BOUNDS_APART_NODES = 256  # from this many nodes, the bounds run in a child process beside the producer
BOUNDS_KILL_LAG_S = 1.0  # a bounds child still running this long after its share ends is killed
PRICING_APART_SENDS = 12_000_000  # from this many sends, the costly cost models price one after the other
# (each needs up to about 45 bytes a send of its own beside the schedule and the plan: the 64x64 torus
# greedy allgather, 16.8 M sends, peaks at 3.06 GiB with ten and event side by side, 2.63 GiB without)


def run(instance: Instance, producer: str, options: Options | None = None,
        kernels: Kernels | None = None) -> tuple[dict[str, Any], Schedule | None]:
    """Run ``producer`` on ``instance``; return the result row and the verified schedule.

    The schedule is ``None`` unless it verified. Producer failures become rows with status
    ``error`` (``skipped`` when the producer does not support the instance, ``timeout`` when
    the time limit ended the run first); bad input (:class:`~collsynth.InputError`: an unknown
    solver or driver, a parameter the producer does not declare or a malformed value, a run
    too big for the memory budget, :class:`~collsynth.limits.TooBig`) propagates to the caller.
    ``kernels``: the run's one compile-or-interpret decision, made where the caller prepared the
    run (:func:`collsynth.solvers.compiling.prepare_run`; made here, before the clock, when not
    given): a run too small to repay compiling runs the kernels numba's cache lacks as Python
    (:func:`collsynth.tens.interpreted.interpreting`).
    """
    prod = get(producer)
    # refused before anything compiles or the clock starts, from what the producer says it builds
    size.check_run(instance, planned(prod, instance, (options or Options()).params))
    kernels = kernels or prepare_run(instance, prod.name)  # before the clock: no stage's time
    with interpreting(kernels.interpreting):
        return _run(instance, prod.name, options, kernels.compile_s)


def _run(instance: Instance, producer: str, options: Options | None,
         compile_s: float) -> tuple[dict[str, Any], Schedule | None]:
    """:func:`run` under the kernels prepared for it (``compile_s``: the seconds that took)."""
    prod = get(producer)
    options, picked, epoch_step = _run_options(prod, instance, options or Options())
    deadline = options.deadline
    row = schema.empty_row(
        instance=instance.name, producer=prod.name, solver=options.solver if prod.uses_solver else "",
        driver=options.driver or "", seed=options.seed, verified=False, found_by="", solver_status="", message="",
    )
    row["compile_s"] = round(compile_s, 4)
    stages: dict[str, float] = {}
    row["extra"] = {"stages_s": stages, **({"defaults": picked} if picked else {})}
    timestep = _timestep(options)
    bnds = bounds.instance_bounds(instance, timestep=timestep, ten_timestep=epoch_step)
    share = _bounds_share(deadline)
    with bounds_apart(bnds, share) as apart:
        if apart is None:  # a small instance: its bounds first, here
            bnds, ended = _bounds_here(bnds, share, deadline, stages)
            if ended is not None:
                return _timed_out(row, ended, deadline, stages, "lower bounds"), None
        outcome, stopped = _produce(prod, instance, options, deadline, stages)
        if apart is not None:  # a big one: computed in a child process while the producer ran
            bnds = apart.collect(stages)
    bnds = _sync_steps(bnds, deadline, stages)
    if stopped is not None:
        outcome.message = _limit_message(stopped, deadline, stages, "produce")
    row.update(lower_bound_steps=bnds.steps.value, lower_bound_timesteps=bnds.timesteps.value)
    for model in cost_models.MODELS.values():  # a routed schedule's bound leaves the box bound out
        own = None if not model.bound else (model.bound(bnds) if outcome.schedule is None
                                            else model.bound_of(bnds, outcome.schedule))
        row[model.lower_bound_column] = None if own is None else own.value
    _record(row, prod, outcome)
    if outcome.schedule is not None:  # the tables set each row against the bound of its routing (bound_of)
        row["extra"]["routing"] = getattr(outcome.schedule, "routing", "links")
    _say_picked(row, picked)
    row["extra"]["bounds"] = _bounds_extra(bnds)
    schedule = outcome.schedule
    if schedule is None:
        return row, None
    if compact_forms.form_of(schedule) is not None:
        return check_and_price_trees(row, schedule, instance, deadline.extended(GRACE_S - STOP_S), stages,
                                     outcome.prices)
    row, kept = check_and_price(row, schedule, instance, deadline.extended(GRACE_S - STOP_S), stages, epoch_step,
                                outcome.certified)
    if kept is not None:
        judge(row, outcome, kept, instance, bnds, timestep)
    return row, kept


def _run_options(prod, instance: Instance, options: Options) -> tuple[Options, dict | None, float | None]:
    """``(options, picked, epoch_step)``: the run's options as ``prod`` runs them on ``instance``
    (the run's deadline started from its time limit, the instance's epoch timestep and the
    producer's defaults for it applied, the driver, solver and parameters checked), what the
    producer picked (:func:`_instance_defaults`) and the instance's TEN timestep when it sets one."""
    deadline = options.deadline or Deadline.after(options.time_limit)
    epoch_step = epoch_timestep(instance)
    if epoch_step is not None and options.params.get("timestep") is None:
        # the instance's epoch choice (TE-CCL's fastest/slowest link) is the TEN timestep
        if any(p.name == "timestep" for p in prod.params):
            options = replace(options, params={**options.params, "timestep": epoch_step})
    else:
        epoch_step = None
    options, picked = _instance_defaults(prod, instance, options)
    driver = prod.driver_for(options.driver)
    solver = backend_names.check_name(options.solver) if prod.uses_solver else ""
    options = replace(options, driver=driver or None, solver=solver or options.solver,
                      params=check_params(prod, options.params), deadline=deadline)
    return options, picked, epoch_step


def run_lean(instance: Instance, producer: str, options: Options | None = None,
             kernels: Kernels | None = None) -> tuple[dict[str, Any], Any]:
    """:func:`run` without the lower bounds and the pricing, for a benchmark that prices the
    models it tabulates itself: ``(row, schedule)``, the schedule ``None`` unless it verified.

    The run's time limit binds as in :func:`run`: the producer sees the run's deadline and is
    stopped by the timer :data:`ALARM_LAG_S` after it if it does not check (status ``timeout``,
    the message saying where; a producer that keeps a schedule returns it and says so), and
    the verification gets the rest of :data:`collsynth.limits.GRACE_S` (the producer's verdict
    taken where it holds for this very schedule). The row has ``status``, ``verified``,
    ``message``, ``build_s``, ``extra`` (with ``stages_s``), ``sends`` and ``time_event_s`` /
    ``time_sync_s`` (None: not priced here)."""
    prod = get(producer)
    size.check_run(instance, planned(prod, instance, (options or Options()).params))
    kernels = kernels or prepare_run(instance, prod.name)  # before the clock, as run does
    with interpreting(kernels.interpreting):
        options, picked, _ = _run_options(prod, instance, options or Options())
        stages: dict[str, float] = {}
        outcome, stopped = _produce(prod, instance, options, options.deadline, stages)
        message = outcome.message if stopped is None else _limit_message(stopped, options.deadline, stages, "produce")
        row = {"status": outcome.status, "verified": False, "message": message, "build_s": outcome.build_s,
               "time_event_s": None, "time_sync_s": None, "extra": {**outcome.extra, "stages_s": stages}}
        _say_picked(row, picked)
        if outcome.schedule is None:
            return row, None
        return _verified(row, outcome, instance, options.deadline.extended(GRACE_S - STOP_S), stages)


def _verified(row: dict[str, Any], outcome: Outcome, instance: Instance, deadline: Deadline,
              stages: dict[str, float]) -> tuple[dict[str, Any], Any]:
    """``(row, schedule)`` with ``outcome``'s schedule verified within ``deadline`` (in its
    compact form where it has one; the producer's verdict where it holds for this very
    schedule), or ``(row, None)`` with the row saying why not (``invalid``, ``timeout``)."""
    schedule = outcome.schedule
    form = compact_forms.form_of(schedule)
    row["sends"] = schedule.sends if form is not None else len(schedule)
    try:
        with _stage(deadline, "verification", stages):
            if form is not None:
                violation = form.verify(schedule, instance)
            elif outcome.certified is not None and outcome.certified.holds(schedule, instance):
                violation = None
            else:
                violation = verify.verify(schedule, instance)
    except TimeLimitReached as e:
        found = f"a schedule of {row['sends']:,} sends, not kept"
        return _timed_out(row, e, deadline, stages, "verification", found), None
    if violation is not None:
        row.update(status=Status.INVALID, message=f"verification failed: {violation}")
        return row, None
    row["verified"] = True
    return row, schedule


def _bounds_here(bnds: Bounds, share: Deadline, deadline: Deadline,
                 stages: dict[str, float]) -> tuple[Bounds, TimeLimitReached | None]:
    """Every model's bound computed in this process within ``share``; the bounds (those not
    computed in time reported so) and the limit's exception if the run's whole time is up."""
    try:
        with _stage(share, "lower bounds", stages):
            bnds.parts  # noqa: B018 - every model's bound computed here, on the clock
    except TimeLimitReached as e:
        if deadline.expired():
            return bnds, e
        return bnds.settled(_share_ran_out(stages["lower bounds"])), None
    return bnds, None


def _sync_steps(bnds: Bounds, deadline: Deadline, stages: dict[str, float]) -> Bounds:
    """``bnds`` with sync's step arguments computed (:attr:`~collsynth.tens.bounds.Bounds.sync`: a
    rooted reduce's depth bound solves a linear program per step count, 19 s on TACOS 4x4x2 at
    load 5) in what the producer left of the run's time, else settled: those not computed by the
    deadline are reported so (the verification and pricing keep the grace)."""
    try:
        with _stage(deadline, "lower bounds", stages):
            bnds.sync  # noqa: B018 - computed here, on the clock
    except TimeLimitReached:
        return bnds.settled("the time limit came before it was computed")
    return bnds


def _share_ran_out(seconds: float) -> str:
    return f"the bounds' share of the time limit ran out after {seconds:.3g} s"


class BoundsApart:
    """The lower bounds of a big instance computed in a forked child process (the second
    core) while this process runs the producer: the child computes every model's bound within
    the bounds' share of the time limit (:func:`_bounds_share`) and sends back what it
    computed (:meth:`~collsynth.tens.bounds.Bounds.computed_state`, a few kilobytes); a child
    still running :data:`BOUNDS_KILL_LAG_S` after its share is killed."""

    def __init__(self, bnds: Bounds, share: Deadline):
        self.bnds, self.share = bnds, share
        self.started = time.perf_counter()
        self.collected = False
        read, write = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child: compute, send, leave without running the parent's exit code
            os.close(read)
            try:
                with os.fdopen(write, "wb") as out:
                    out.write(_bounds_payload(bnds, share))
            finally:
                os._exit(0)
        os.close(write)
        self.fd = read

    def collect(self, stages: dict[str, float]) -> Bounds:
        """The bounds as the child computed them (those it did not, reported as not
        computed, and why); the child's time is the ``lower bounds`` stage."""
        at = None if self.share.at is None else self.share.at + BOUNDS_KILL_LAG_S
        data = _read_all(self.fd, at)
        self.close()
        stages["lower bounds"] = round(time.perf_counter() - self.started, 4)
        if data is None:  # killed at its share's end: nothing of it is kept
            return self.bnds.settled(_share_ran_out(stages["lower bounds"]))
        payload = pickle.loads(data)
        if "error" in payload:
            raise payload["error"]
        stages["lower bounds"] = payload["seconds"]
        self.bnds.adopt(payload["state"])
        return self.bnds.settled(_share_ran_out(payload["seconds"])) if payload["stopped"] else self.bnds

    def close(self) -> None:
        """Stop the child (if still running) and reap it."""
        if self.collected:
            return
        self.collected = True
        os.close(self.fd)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):  # reaped already by a producer waiting for any child
            os.waitpid(self.pid, 0)


@contextlib.contextmanager
def bounds_apart(bnds: Bounds, share: Deadline) -> Iterator[BoundsApart | None]:
    """A :class:`BoundsApart` for an instance of at least :data:`BOUNDS_APART_NODES` nodes
    (``None`` for a smaller one: its bounds take less than forking would save); the child is
    stopped and reaped however the body ends."""
    if bnds.instance.topology.size < BOUNDS_APART_NODES or bnds.complete():
        yield None
        return
    apart = BoundsApart(bnds, share)
    try:
        yield apart
    finally:
        apart.close()


def _bounds_payload(bnds: Bounds, share: Deadline) -> bytes:
    """In the child: every model's bound within ``share``, pickled with what was computed,
    whether the share ran out and the seconds taken (or the error that stopped it)."""
    t0 = time.perf_counter()
    stopped = False
    try:
        with enforce(share, "lower bounds"):
            bnds.parts  # noqa: B018 - every model's bound computed, on the share's clock
    except TimeLimitReached:
        stopped = True
    except BaseException as e:  # noqa: BLE001 - carried to the parent, which raises it
        try:
            return pickle.dumps({"error": pickle.loads(pickle.dumps(e))})
        except Exception:  # noqa: BLE001 - an exception that does not pickle: its text
            return pickle.dumps({"error": RuntimeError(f"lower bounds: {type(e).__name__}: {e}\n"
                                                       f"{traceback.format_exc(limit=8)}")})
    return pickle.dumps({"state": bnds.computed_state(), "stopped": stopped,
                         "seconds": round(time.perf_counter() - t0, 4)})


def _read_all(fd: int, at: float | None) -> bytes | None:
    """Everything written to ``fd`` until its end, or ``None`` if it has not ended by the
    ``time.monotonic()`` instant ``at``."""
    data = []
    while True:
        wait = None if at is None else max(0.0, at - time.monotonic())
        ready, _, _ = select.select([fd], [], [], wait)
        if not ready:
            return None
        piece = os.read(fd, 1 << 20)
        if not piece:
            return b"".join(data)
        data.append(piece)


def _bounds_share(deadline: Deadline) -> Deadline:
    """The deadline of the bounds stage: :data:`BOUNDS_SHARE` of the run's limit (at least
    :data:`BOUNDS_MIN_S`), so that the producer always gets the rest."""
    if deadline.at is None:
        return deadline
    return deadline.child(max(BOUNDS_MIN_S, BOUNDS_SHARE * deadline.limit))


def _bounds_extra(bnds: Bounds) -> dict:
    """Every model's best bound for the row's ``extra``: value, argument and witness, note."""
    out = {m: {k: v for k, v in bnds.of(m).as_dict().items() if k in ("value", "label", "note")}
           for m in bounds.MODELS + ("steps",)}
    out["sync"].update(latency_s=bnds.part("sync_latency").value, bandwidth_s=bnds.part("sync_bandwidth").value)
    return out


def _instance_defaults(prod, instance: Instance, options: Options) -> tuple[Options, dict | None]:
    """The driver and parameters ``prod`` picks for ``instance`` (its ``defaults``) where the run
    set none, applied to ``options``; what was picked and why (None when nothing was)."""
    if prod.defaults is None:
        return options, None
    driver, params, why = prod.defaults(instance, dict(options.params), options.driver or None)
    declared = {p.name for p in prod.params}
    params = {k: v for k, v in params.items() if k in declared and options.params.get(k) is None}
    driver = driver if not options.driver and driver in prod.drivers else None
    if not params and not driver:
        return options, None
    options = replace(options, driver=options.driver or driver, params={**options.params, **params})
    return options, {"driver": driver or "", "params": params, "why": why}


def _say_picked(row: dict[str, Any], picked: dict | None) -> None:
    """Add to the row's message what the producer picked for the instance, and why."""
    if picked:
        said = ", ".join([*([f"driver {picked['driver']}"] if picked["driver"] else []),
                          *(f"{k}={v}" for k, v in picked["params"].items())])
        row["message"] = f"{row['message'] or ''}{'; ' if row['message'] else ''}picked for this instance: {said} ({picked['why']})"


@contextlib.contextmanager
def _stage(deadline: Deadline, name: str, stages: dict[str, float]) -> Iterator[None]:
    """Run a stage under the deadline (:func:`~collsynth.limits.enforce`), timing it (a stage
    run in parts adds up their times)."""
    t0 = time.perf_counter()
    try:
        with enforce(deadline, name):
            yield
    finally:
        stages[name] = round(stages.get(name, 0.0) + time.perf_counter() - t0, 4)


def _produce(prod, instance: Instance, options: Options, deadline: Deadline,
             stages: dict[str, float]) -> tuple[Outcome, TimeLimitReached | None]:
    """The producer's outcome; a crash, an unsupported instance or the time limit as a status
    (with the limit's exception: the caller writes where it stopped once every stage beside the
    producer has ended).

    The producer sees ``deadline`` (``options.deadline``); the timer that stops it if it does
    not check goes off :data:`ALARM_LAG_S` later, so that a producer checking its deadline
    stops first and says how far it got."""
    try:
        with _stage(deadline.extended(ALARM_LAG_S), "produce", stages):
            return prod.run(instance, options), None
    except InputError:
        raise
    except Unsupported as e:
        return Outcome(None, Status.SKIPPED, message=f"unsupported: {e}"), None
    except TimeLimitReached as e:
        return Outcome(None, Status.TIMEOUT), e
    except Exception as e:  # noqa: BLE001 - a producer crash is a recorded failure, not a dead batch
        outcome = Outcome(None, Status.ERROR, message=f"{type(e).__name__}: {e}")
        outcome.extra["traceback"] = traceback.format_exc(limit=8)
        return outcome, None


def _record(row: dict[str, Any], prod, outcome: Outcome) -> None:
    """The producer's outcome into the row."""
    row["wall_s"] = row["extra"]["stages_s"].get("produce")
    row.update(
        status=outcome.status, objective=outcome.objective, bound=outcome.bound, gap=outcome.gap,
        units=outcome.units, build_s=outcome.build_s, solve_s=outcome.solve_s,
        message=outcome.message, solver_status=outcome.solver_status,
        found_by=outcome.found_by or (prod.family if outcome.schedule is not None else ""),
    )
    if prod.uses_solver and outcome.solver:
        row["solver"] = outcome.solver
    extra = {**outcome.extra, "stages_s": row["extra"]["stages_s"]}
    if "defaults" in row["extra"]:  # what the producer picked for the instance (_instance_defaults)
        extra["defaults"] = row["extra"]["defaults"]
    if outcome.version:
        extra["solver_version"] = outcome.version
    if outcome.nodes is not None:
        extra["solver_nodes"] = outcome.nodes
    row["extra"] = extra


def check_and_price(row: dict[str, Any], schedule: Schedule, instance: Instance, deadline: Deadline,
                     stages: dict[str, float], epoch_step: float | None,
                     certified=None) -> tuple[dict[str, Any], Schedule | None]:
    """The gate every produced schedule passes before :func:`run` keeps it: ``(row, schedule)``
    with the schedule verified and priced into ``row``, or ``(row, None)`` with the row saying
    why not (``invalid``: the violation; ``timeout``: the stage the ``deadline`` stopped).
    ``stages`` gains each stage's seconds; ``epoch_step`` is the instance's TEN timestep when
    it sets one (:func:`~collsynth.instances.instance.epoch_timestep`). Public so that this
    contract can be checked on schedules no producer emits (malformed, truncated, huge).

    It verifies the schedule while a :class:`SpeculativePricing` prices it under every cost
    model within ``deadline`` (this thread first prepares parts of the pricing plan,
    :meth:`SpeculativePricing.prepare`, stage ``pricing plan``, and prices too once verification
    is done); the
    prices go into the row only once the schedule has verified (a schedule that fails, or
    whose verification the limit stops, is reported unpriced). Pricing starts once no send is malformed
    (:func:`~collsynth.tens.verify.malformed`), so that its kernels read only ids in range.
    ``certified``: the producer's verdict on the schedule and its prices
    (:class:`~collsynth.tens.certified.Certified`), taken instead of verifying, and each price
    instead of pricing under that model, only where it holds for this very ``schedule`` and
    ``instance`` (the same objects, their content unchanged); the row's ``extra`` says so
    (``verified_by_producer``: the producer's verification seconds; ``priced_by_producer``)."""
    row["sends"] = len(schedule)
    pricing = None
    try:
        with _stage(deadline, "verification", stages):
            trusted = certified is not None and certified.holds(schedule, instance)
            violation = None if trusted else verify.malformed(schedule, instance)
        if violation is None:  # every id in range: the pricing kernels may read the schedule
            pricing = SpeculativePricing(schedule, instance, deadline, epoch_step, certified if trusted else None)
            if trusted:
                row["extra"]["verified_by_producer"] = round(certified.verify_s, 4)
                row["extra"]["priced_by_producer"] = list(pricing.known)
            with _stage(deadline, "pricing plan", stages):
                pricing.prepare()
            with _stage(deadline, "verification", stages):
                violation = None if trusted else verify.verify(schedule, instance, well_formed=True)
    except BaseException as e:
        if pricing is not None:
            pricing.cancel()
        if isinstance(e, TimeLimitReached):
            return _timed_out(row, e, deadline, stages, "verification",
                              f"a schedule of {len(schedule):,} sends, not kept"), None
        raise
    finally:
        row["verify_s"] = stages.get("verification")
    if violation is not None:
        if pricing is not None:
            pricing.cancel()
        row["status"] = Status.INVALID
        row["message"] = f"verification failed: {violation}"
        return row, None
    row["verified"] = True
    row["steps"] = schedule.num_steps
    with contextlib.suppress(TimeLimitReached):  # the model it stopped is in the results
        with enforce(deadline, "pricing"):
            pricing.share()
    _priced_into(row, pricing, deadline, stages)
    return row, schedule


def check_and_price_trees(row: dict[str, Any], trees, instance: Instance, deadline: Deadline,
                           stages: dict[str, float], known: dict | None = None) -> tuple[dict[str, Any], Any]:
    """:func:`check_and_price` for a schedule kept as trees plus a pipeline rule
    (:class:`~collsynth.tens.pipelined_trees.PipelinedTrees`, or an allreduce's two,
    :mod:`collsynth.tens.compact_forms`): verified in that form (the verdict
    :func:`~collsynth.tens.verify.verify` gives its expansion) and priced under ``sync`` in that
    form (:func:`~collsynth.tens.pipelined_trees.price_sync`, the price of the expansion) and,
    where it fits the time left, under ``event`` per link orbit (:func:`_event_per_orbit`; the
    producer's own ``event`` price of these trees when ``known`` has one, :attr:`Outcome.prices`,
    taken once they have verified); the other models read explicit sends, so the row says they
    were not priced."""
    form = compact_forms.form_of(trees)
    row["sends"] = trees.sends
    try:
        with _stage(deadline, "verification", stages):
            violation = form.verify(trees, instance)
    except TimeLimitReached as e:
        return _timed_out(row, e, deadline, stages, "verification", "trees plus a pipeline rule, not kept"), None
    finally:
        row["verify_s"] = stages.get("verification")
    if violation is not None:
        row["status"] = Status.INVALID
        row["message"] = f"verification failed: {violation}"
        return row, None
    row["verified"] = True
    sync = cost_models.MODELS["sync"]
    with contextlib.suppress(TimeLimitReached), _stage(deadline, "pricing (sync)", stages):
        price = form.price_sync(trees, instance)
        row.update({"steps": price.steps, sync.time_column: price.total_s})
        row.update({column.name: column.value(price) for column in sync.columns})
    row[sync.price_column] = stages.get("pricing (sync)")
    priced = ("sync",) + _event_per_orbit(row, trees, instance, deadline, stages, (known or {}).get("event"))
    others = ", ".join(name for name in cost_models.MODELS if name not in priced)
    row["message"] = (f"{row['message']}; kept as trees plus a pipeline rule ({trees.sends:,} sends if listed; "
                      f"--param form=explicit lists them): not priced under {others}").lstrip("; ")
    return row, trees


def _event_per_orbit(row: dict[str, Any], trees, instance: Instance, deadline: Deadline,
                     stages: dict[str, float], known=None) -> tuple[str, ...]:
    """``("event",)`` once ``trees`` is priced into ``row`` under ``event`` in its form, one link
    per orbit of the shifts that keep no used link (:func:`~collsynth.tens.pipelined_event.price`,
    the price of the expansion), where its kind is one that prices so and the sends it
    simulates fit the time left at the model's rate; else ``()``. ``known``: that price as the
    producer computed it of these trees (:attr:`Outcome.prices`), taken instead of simulating
    again (the row's ``extra["priced_by_producer"]`` says so)."""
    event = cost_models.MODELS["event"]
    if known is not None:
        row[event.time_column] = known.total_s
        row["extra"]["priced_by_producer"] = ["event"]
        return ("event",)
    left = deadline.left()
    if trees.collective not in pipelined_event.KINDS or (
            left is not None and pipelined_event.sends_priced(trees, instance) > event.rate * left):
        return ()
    with contextlib.suppress(TimeLimitReached), _stage(deadline, "pricing (event)", stages):
        row[event.time_column] = pipelined_event.price(trees, instance).total_s
    row[event.price_column] = stages.get("pricing (event)")
    return ("event",) if row.get(event.time_column) is not None else ()


def _priced_into(row: dict[str, Any], pricing: "SpeculativePricing", deadline: Deadline,
                 stages: dict[str, float]) -> None:
    """Each cost model's price of a verified schedule into ``row`` (its time and columns), or
    a note in the row's message saying why that model left it unpriced."""
    for model, result, seconds in pricing.results():
        stage = f"pricing ({model.name})"
        if seconds is not None:
            stages[stage] = row[model.price_column] = seconds
        if isinstance(result, (str, TimeLimitReached)):  # not started, or the limit came: this model unpriced
            note = _limit_message(result, deadline, stages, stage) if isinstance(result, TimeLimitReached) else result
            row["message"] = f"{row['message']}; {note}: not priced under {model.name}".lstrip("; ")
            continue
        if isinstance(result, NotSupported):  # the model cannot represent the schedule's timing: said why
            row["message"] = f"{row['message']}; not priced under {model.name}: {result}".lstrip("; ")
            continue
        if isinstance(result, BaseException):
            raise result
        row[model.time_column] = result.total_s
        row.update({column.name: column.value(result) for column in model.columns})


class SpeculativePricing:
    """A schedule priced under every cost model (sharing one
    :class:`~collsynth.tens.plan.PricingPlan`) in a thread of its own, started while the
    calling thread verifies the schedule: the compiled kernels of both release the GIL, so
    verification and pricing run on two cores; once the schedule has verified, the calling
    thread prices beside the pricing thread (:meth:`share`). Below
    :data:`PRICING_APART_SENDS` sends both threads take the costliest (lowest ``rate``) model
    no thread has started, so that the longest one starts beside verification. From that many,
    only the cheapest model runs beside another (the working memory of two costly ones would
    add up): the pricing thread takes the models cheapest first but leaves the cheapest to the
    calling thread while that one verifies. Nothing priced here is reported unless the schedule
    verified (:func:`check_and_price` reads :meth:`results` only then). The threads share one
    :class:`~collsynth.tens.plan.PricingPlan`, whose parts are each computed once, by the
    first thread to ask (the other waits for it); the calling thread may compute some ahead
    (:meth:`prepare`).

    A model that would not finish in the time left (its ``rate`` over the schedule's hops) is
    not started, since its compiled loop cannot be interrupted; a cheaper one after it may be.
    :meth:`cancel` stops both threads before their next model. ``certified`` (a verdict that
    holds for this schedule and instance, :class:`~collsynth.tens.certified.Certified`): the
    models it priced with the pipeline's options are taken from it (:attr:`known`), not priced."""

    def __init__(self, schedule: Schedule, instance: Instance, deadline: Deadline, epoch_step: float | None,
                 certified=None):
        self.deadline = deadline
        self.schedule, self.instance, self.epoch_step = schedule, instance, epoch_step
        known = {m.name: (m, *got) for m in cost_models.MODELS.values()  # the producer's prices of it (trusted)
                 if certified is not None and (got := certified.known(m, epoch_step)) is not None}
        self.known = tuple(known)  # priced by the producer: taken, not priced again
        self.plan = PricingPlan(schedule, instance, models=tuple(m.name for m in cost_models.MODELS.values()
                                                                 if m.uses_plan and m.name not in known))
        self._lock = threading.Lock()
        self._todo = [m for m in cost_models.MODELS.values() if m.name not in known]  # cheapest (highest rate) first
        self._done: dict[str, tuple[Any, Any, float | None]] = known  # model name: (model, Cost / exception / note, s)
        self._running: dict[str, tuple[Any, float]] = {}  # the models being priced, since when
        self._cancelled = threading.Event()
        self._failed = threading.Event()  # a model raised: no further model starts
        self._verified = threading.Event()  # the calling thread has verified and prices too
        self._hops: int | None = None  # the hops the models walk, once counted (_count_hops)
        self.side_by_side = len(schedule) < PRICING_APART_SENDS  # any two models at once
        self._thread = threading.Thread(target=self._take_all, name="collsynth pricing", daemon=True)
        self._thread.start()

    def prepare(self) -> None:
        """Compute, in the calling thread and before it verifies, the plan parts the models
        prepare ahead (:attr:`~collsynth.tens.cost_models.CostModel.prepare`: the event
        model's routes and records) while the pricing thread derives the rest (the event model
        asks for its dependency groups first), for every model that would be started in the
        time left. Only while the models price side by side: from :data:`PRICING_APART_SENDS`
        sends a part made ahead would be kept beside another model's working memory. A part
        that raises is left to its model, which computes it again when it prices and reports
        what that raises once the schedule has verified; the time limit's exception ends it."""
        if not self.side_by_side:
            return
        self._count_hops()
        for model in cost_models.MODELS.values():
            if model.prepare is None or model.name in self.known or self._cancelled.is_set() or self._failed.is_set():
                continue
            if self._not_started(model) is not None:
                continue
            try:
                model.prepare(self.plan)
            except Exception as e:  # noqa: BLE001 - left to the model (see the doc)
                if _by_timer(e):
                    raise

    def cancel(self) -> None:
        """Price no further model (those being priced finish; their prices are dropped)."""
        self._cancelled.set()

    def share(self) -> None:
        """Price, in the calling thread, the models left to it (every model no thread has
        started, or from :data:`PRICING_APART_SENDS` sends the cheapest only); a
        :class:`~collsynth.limits.TimeLimitReached` raised in it ends the model it stopped,
        which :meth:`results` reports so."""
        self._verified.set()
        self._take_all()

    def results(self) -> list[tuple[Any, Any, float | None]]:
        """``(model, result, seconds)`` for every model started or refused, in the order of
        :data:`~collsynth.tens.cost_models.MODELS`, once the pricing thread has ended or the
        deadline passed: result is the model's :class:`~collsynth.tens.cost.Cost`, the
        :class:`~collsynth.tens.ten.NotSupported` or other exception it raised, or a note
        saying why it was not started for want of time, or
        :class:`~collsynth.limits.TimeLimitReached` for a model the deadline passed in."""
        self._thread.join(self.deadline.left())
        with self._lock:
            done, running = dict(self._done), dict(self._running)
            self._cancelled.set()
        out = []
        for model in cost_models.MODELS.values():
            if model.name in done:
                out.append(done[model.name])
            elif model.name in running:
                t0 = running[model.name][1]
                out.append((model, TimeLimitReached(f"pricing ({model.name})"), round(time.perf_counter() - t0, 4)))
        return out

    def _next(self):
        """The model this thread takes next (see the class doc) that fits in the time left
        (those that do not are noted as not started), or None."""
        mine = threading.current_thread() is self._thread
        self._count_hops()
        with self._lock:
            while self._todo and not (self._cancelled.is_set() or self._failed.is_set()):
                if self.side_by_side:
                    pick = -1  # the costliest
                elif mine:  # the cheapest, or the next one while the calling thread verifies
                    pick = 1 if not self._verified.is_set() and len(self._todo) > 1 else 0
                elif self._todo[0] is next(iter(cost_models.MODELS.values())):
                    pick = 0  # the calling thread: the cheapest of all, if still there
                else:
                    return None
                model = self._todo.pop(pick)
                note = self._not_started(model)
                if note is not None:
                    self._done[model.name] = (model, note, None)
                    continue
                self._running[model.name] = (model, time.perf_counter())
                return model
        return None

    def _not_started(self, model) -> str | None:
        """Why ``model`` is not started (it would not finish in the time left at its
        ``rate`` over the hops counted, :meth:`_count_hops`: its compiled loop cannot be
        interrupted), or None."""
        hops = self._hops or len(self.schedule)
        left, need = self.deadline.left(), hops / model.rate
        if left is None or need <= left:
            return None
        return (f"pricing ({model.name}) not started: about {need:.3g} s needed for {hops:,} hops at "
                f"{model.rate:.3g} hops/s, {left:.3g} s left")

    def _count_hops(self) -> None:
        """Count, once, the hops the models walk, which :meth:`_not_started` weighs: one per send
        of a schedule over direct links; every link each send of a routed one crosses, from the
        plan's routes (the models take them from the plan, so they are routed once). Until
        counted, and if the routes cannot be made (the models then say why), one hop per send,
        the fewest there can be. Routes are made only under a time limit and while the sends
        alone fit in the time left at the highest rate of the models not yet taken."""
        if self._hops is not None:
            return
        if self.schedule.routing == "links":
            self._hops = len(self.schedule)
            return
        left, rates = self.deadline.left(), [m.rate for m in list(self._todo)]
        if left is None or not rates or len(self.schedule) / max(rates) > left:
            return
        try:
            self._hops = self.plan.routes.total_hops
        except Exception as e:  # noqa: BLE001 - left to the models, which raise it when they price
            if _by_timer(e):
                raise
            self._hops = len(self.schedule)

    def _take_all(self) -> None:
        while (model := self._next()) is not None:
            t0 = self._running[model.name][1]
            try:
                shared = {"plan": self.plan} if model.uses_plan else {}
                result = model.price(self.schedule, self.instance, timestep=self.epoch_step, **shared)
            except BaseException as e:  # noqa: BLE001 - given to the verifying thread, which decides
                # the timer is the calling thread's: here it only says that the limit came
                result = TimeLimitReached(f"pricing ({model.name})") if _by_timer(e) else e
            with self._lock:
                del self._running[model.name]
                if not self._cancelled.is_set():
                    self._done[model.name] = (model, result, round(time.perf_counter() - t0, 4))
                if isinstance(result, BaseException) and not isinstance(result, NotSupported):
                    self._failed.set()


def _by_timer(e: BaseException) -> bool:
    """Whether ``e`` is the time limit's (raised, or wrapped by a compiled call it landed in)."""
    return isinstance(e, TimeLimitReached) or isinstance(e.__cause__ or e.__context__, TimeLimitReached)


def _limit_message(e: TimeLimitReached, deadline: Deadline, stages: dict[str, float], stage: str) -> str:
    """``time limit 5 s reached during produce (greedy matching: ...); done: lower bounds 0.01 s``."""
    done = ", ".join(f"{k} {v:.3g} s" for k, v in stages.items() if k != stage)
    inner = ": ".join(x for x in (e.stage if e.stage != stage else "", e.done) if x)
    return (f"time limit {deadline.limit:g} s reached during {stage}" + (f" ({inner})" if inner else "")
            + (f"; done: {done}" if done else ""))


def _timed_out(row: dict[str, Any], e: TimeLimitReached, deadline: Deadline, stages: dict[str, float],
               stage: str, found: str = "") -> dict[str, Any]:
    """The row of a run the time limit ended (in ``stage``) before it had a verified schedule."""
    row["status"] = Status.TIMEOUT
    row["verified"] = False
    row["message"] = _limit_message(e, deadline, stages, stage) + (f"; found {found}" if found else "")
    return row


def _timestep(options: Options) -> float | None:
    """The TEN timestep a producer was asked to count in (``--param timestep=S``), if any."""
    t = (options.params or {}).get("timestep")
    try:
        return None if t is None else float(t)
    except (TypeError, ValueError):
        return None  # the producer reports the bad parameter


def _met(value, bound: Bound) -> bool:
    return value is not None and bound.computed and float(value) <= float(bound.value) * (1 + bounds.TOL)


def judge(row: dict, outcome: Outcome, schedule: Schedule, instance: Instance, bnds: Bounds,
          timestep: float | None) -> None:
    """Status, bound, gap and ``bound_source`` of a verified row, from proofs only
    (:class:`~collsynth.tens.status.Status` states the rule).

    A proof for the instance, first match wins: the schedule's time under the sync, TEN or
    event model meets that model's lower bound: :attr:`~Status.OPTIMAL`. Else a proof within a
    restricted model: a row counted in timesteps whose schedule respects the TEN's link
    capacity in them (:func:`~collsynth.tens.bounds.respects_ten_capacity`) meets the
    ``timesteps`` bound or the TEN LP bound its producer computed (the fewest TEN timesteps at
    this chunking and timestep), or the producer's objective meets the bound it proved in its
    own units (an ILP's dual bound or horizon search, an LP's optimum over its schedule class):
    :attr:`~Status.BEST_IN_MODEL`. ``bound_source`` names the model that proved it (else the
    best bound in the row's units). A producer's ``optimal`` without either becomes
    ``feasible``. Rows in timesteps get the best applicable bound as ``bound`` and their gap
    against it.
    """
    units, steps = row["units"], row["steps"]
    ten_best = _ten_timesteps_bound(row, outcome, schedule, instance, bnds, timestep)
    in_instance = [(f"{m.name}: {b.label()}", row[m.time_column], b)
                   for m, b in ((m, m.bound_of(bnds, schedule)) for m in cost_models.MODELS.values() if m.bound)]
    in_model = [(f"timesteps: {ten_best.label()}", steps, ten_best)]
    if outcome.bound is not None:
        own = Bound(outcome.bound, units, units, f"{row['producer']} bound")
        in_model.append((f"{units}: {row['producer']}'s own bound", outcome.objective, own))
    proven = next((label for label, value, b in in_instance if _met(value, b)), None)
    if proven is not None:
        row["status"], row["bound_source"] = Status.OPTIMAL.value, proven
        return
    best_in = next((label for label, value, b in in_model if _met(value, b)), None)
    if best_in is not None:
        row["status"], row["bound_source"] = Status.BEST_IN_MODEL.value, best_in
        row["message"] = _with_note(row["message"], f"best within its model ({best_in}); no bound of the "
                                                    "instance under a cost model is met")
        return
    if units == "timesteps" and (ten_best.computed or outcome.bound is None):
        row["bound_source"] = in_model[0][0] if ten_best.computed else in_instance[0][0]
    else:
        row["bound_source"] = in_model[-1][0] if outcome.bound is not None else in_instance[0][0]
    symmetric = outcome.extra.get("symmetric_bound")  # a symmetric formulation's proof: symmetric schedules only
    if symmetric is not None and steps is not None and symmetric > float(row.get("bound") or 0):
        row["bound_source"] += (f"; {steps} timesteps is the best symmetric schedule" if steps <= symmetric else
                                f"; no symmetric schedule under {symmetric} timesteps") + (
            " (proved over symmetric schedules only: nothing of asymmetric ones)")
    if Status(row["status"]) in (Status.OPTIMAL, Status.BEST_IN_MODEL):
        row["status"] = Status.FEASIBLE.value
        row["message"] = _with_note(row["message"], f"no lower bound proves it optimal (best: {row['bound_source']})")


def _ten_timesteps_bound(row: dict, outcome: Outcome, schedule: Schedule, instance: Instance, bnds: Bounds,
                         timestep: float | None) -> Bound:
    """The best bound on the TEN timesteps of a row counted in them whose schedule respects
    the TEN's capacity (the instance's ``timesteps`` bound, or the TEN LP bound its producer
    computed); the row's ``bound`` and ``gap`` set against it. Not computed for other rows."""
    ten_bounds = []
    if row["units"] == "timesteps" and bounds.respects_ten_capacity(schedule, instance, timestep):
        ten_bounds = [bnds.timesteps]
        if outcome.extra.get("lp_bound") is not None:
            ten_bounds.append(bounds.from_lp(outcome.extra["lp_bound"],
                                             relaxation=outcome.extra.get("lp_bound_source") or "TEN LP"))
    ten_best = bounds.best(ten_bounds, "timesteps")
    steps = row["steps"]
    if row["units"] == "timesteps" and ten_best.computed and steps:
        b = max(float(ten_best.value), float(outcome.bound or 0))
        row["bound"] = b
        row["gap"] = max(0.0, (steps - b) / steps)
    return ten_best


def _with_note(message: str | None, note: str) -> str:
    return f"{message}; {note}" if message else note
