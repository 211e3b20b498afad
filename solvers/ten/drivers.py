"""Drivers: ways to run a TEN formulation that keep big instances tractable (Won et al.,
TACOS, 2023, Section V).

Every driver takes an instance, a TEN formulation (a module or a
:class:`~collsynth.formulations.TenFormulation`; the drivers use only its contract: ``build``,
``extract``, ``lower_bound``, ``RECOVERY_VALID``, ``WARM_START``, and the
:class:`~collsynth.formulations.TenModel` its models expose) and
:class:`~collsynth.solvers.producers.Options`, and returns an
:class:`~collsynth.solvers.producers.Outcome` whose objective and bound are TEN timesteps:

- :func:`horizon_search`: horizons from the lower bound upward (Section V-A: "t_f = diameter,
  diameter + 1, ... until all arrive"), or a binary search between the lower bound and the
  recovery schedule's length; with a persistent solver (HiGHS, Gurobi) one model built at the
  largest horizon is re-solved with the later sends fixed to zero instead of being rebuilt.
- :func:`early_stop`: solve one horizon under the time limit, keep the incumbent, deliver the
  missing chunks along shortest paths after it without breaking link capacity
  (:func:`recover`), and report the optimality gap against the lower bound honestly.
- :func:`time_cluster`: windows of k timesteps, each solved from the holdings the previous one
  reached, until the postcondition holds (time clustering, Section V-C).

Warm starts (``warm=True``, the default for formulations that allow recovery): horizon search
and early-stop first run time clustering with a share of the time limit (``warm_share``,
default 0.4). Its schedule is an upper bound (optimal outright when it meets the lower bound),
and cut to a horizon it is a feasible point of that horizon's arrivals ILP (:func:`set_start`),
passed to the solver as a MIP start (``backends.solve(..., warm_start=True)``). So the ILP
always starts from an incumbent, and the drivers never return anything longer than time
clustering or the recovery schedule.

Statuses: ``optimal`` only when the number of timesteps is proven minimal (every smaller
horizon proven unable to deliver everything, or the lower bound met); ``feasible`` otherwise.
Every outcome says which method found its schedule (``found_by``): ``ilp@h=H`` (the ILP at
horizon H delivered everything), ``ilp@h=H+recovery`` (its incumbent completed by
shortest-path recovery), ``warm-start@h=H+recovery`` (the ILP did not improve on its
warm start), ``time-cluster`` (``+recovery``) or ``recovery``; and ``solver_status``, the
backend's own status on the last solve. A horizon search that stops before it proves its
answer (the time limit, or a model too large to build in the time left) says where, why and
how long it had left (:func:`stop_record`, :func:`stop_sentence`).
"""

from __future__ import annotations

import logging

import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyomo.core as pe

from ...tens.status import Status
from ... import InputError
from ...limits import Deadline, TimeLimitReached, kept
from ...formulations import BuildTooLarge, TenFormulation, TenModel, ten_formulation, ten_model
from ...tens import ten
from .. import backends
from ..producers import Options, Outcome, Unsupported
from .recovery import recover, recovery_schedule, recovery_steps  # noqa: F401 - also used by the producers
from .stops import stop_record, stop_sentence

DRIVERS = ("horizon", "early-stop", "time-cluster")
DRIVER_PARAMS = {"binary", "persistent", "window", "horizon", "max_horizon", "lookahead", "warm", "warm_share"}
WARM_SHARE = 0.4  # share of the time limit the warm-starting time clustering may use


def split_params(params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(driver parameters, formulation parameters) from ``--param`` values."""
    drv = {k: v for k, v in params.items() if k in DRIVER_PARAMS}
    form = {k: v for k, v in params.items() if k not in DRIVER_PARAMS}
    return drv, form


# ---- what the drivers share ----------------------------------------------------------------

def _outcome(schedule, status, steps, bound, stats, message="", extra=None, found_by="") -> Outcome:
    gap = None
    if steps is not None and bound is not None and steps > 0:
        gap = max(0.0, (steps - bound) / steps)
    return Outcome(
        schedule=schedule, status=status, objective=None if steps is None else float(steps),
        bound=None if bound is None else float(bound), gap=gap, units="timesteps",
        build_s=stats["build_s"], solve_s=stats["solve_s"], solver=stats.get("solver", ""),
        version=stats.get("version", ""), nodes=stats.get("nodes"), message=message,
        extra=dict(extra or {}), found_by=found_by if schedule is not None else "",
        solver_status=stats.get("solver_status", ""),
    )


def _stats(solver):
    return {"build_s": 0.0, "solve_s": 0.0, "solver": backends.canonical(solver), "version": "", "nodes": None,
            "solver_status": ""}


def _add(stats, res: backends.SolveResult):
    stats["build_s"] += res.build_s
    stats["solve_s"] += res.solve_s
    stats["version"] = res.version or stats["version"]
    stats["solver_status"] = res.status
    if res.nodes is not None:
        stats["nodes"] = (stats["nodes"] or 0) + res.nodes


def _solve(model, options: Options, clock: Deadline, stats, session=None, warm_start=False) -> backends.SolveResult:
    """Solve ``model`` by ``clock`` (the solver gets what is left of it) and count the solve in ``stats``."""
    res = backends.solve(model, backends.Request(
        options.solver, clock, gap=options.gap, threads=options.threads, seed=options.seed, session=session,
        warm_start=warm_start))
    _add(stats, res)
    return res


def build(formulation: TenFormulation, clock: Deadline, instance, horizon: int, **params):
    """``formulation.build`` by ``clock``: for a formulation that estimates its build time,
    with the seconds left as ``build_limit`` (it raises
    :class:`~collsynth.formulations.BuildTooLarge` rather than build a model that would not be
    ready in time). The callers build nothing once the clock has run out."""
    if formulation.takes_build_limit and clock.at is not None:
        asked = params.get("build_limit")
        params = {**params, "build_limit": clock.left() if asked is None else min(float(asked), clock.left())}
    return formulation.build(instance, horizon, **params)


def _lower_bound(formulation: TenFormulation, instance, form_params) -> int:
    return int(formulation.lower_bound(instance, timestep=form_params.get("timestep")))


def _complete(view: TenModel, res) -> bool:
    return res.has_solution and res.objective is not None and view.arrivals() >= view.required()


def _fail(res: backends.SolveResult, stats, lb, extra) -> Outcome:
    status = res.status if res.status in (Status.ERROR, Status.SKIPPED, Status.INFEASIBLE) else Status.NO_SOLUTION
    return _outcome(None, status, None, lb, stats, res.message or status, extra)


# ---- warm starts -----------------------------------------------------------------------------

@dataclass
class _Known:
    """A complete, valid schedule in the model's direction: rows ``(chunk, pair, arrival)``."""

    how: str
    data: ten.TenData
    rows: np.ndarray
    steps: int
    found_by: str


def _known(how, data, rows, found_by: str | None = None) -> _Known:
    rows = np.asarray(rows, np.int64).reshape(-1, 3)
    return _Known(how, data, rows, int(rows[:, 2].max()) if len(rows) else 0, found_by or how)


def warm_ok(formulation, form_params) -> bool:
    """Whether the drivers may warm-start ``formulation`` from a time-clustering schedule: its
    windows and shortest-path recovery obey its rules (``RECOVERY_VALID``), it opts in
    (``WARM_START``) and the objective is ``arrivals``."""
    f = ten_formulation(formulation)
    return f.recovery_valid and f.warm_start and form_params.get("objective", "arrivals") == "arrivals"


def set_start(model, rows: np.ndarray, upto: int | None = None) -> dict[str, Any] | None:
    """Set the model's variables to a schedule truncated at timestep ``upto`` (a MIP start).

    ``rows`` (``(chunk, pair, arrival)``, the model's direction and indexing, e.g. a
    time-clustering or recovery schedule) is cut to the sends arriving by ``upto`` (default:
    the model's horizon); a send is kept only when the model has its variable and its source
    holds the chunk when it starts (in arrival order, so dropping one drops what depended on
    it; a switch node forwards only what arrived the timestep before, once per arrival without
    switch copy). ``sent`` is 1 on the kept sends, ``hold[c, n, t]`` is 1 from the kept arrival on: the
    holdings they imply. A truncated valid schedule keeps link capacity and the one-arrival
    rule, so this is a feasible point of the arrivals-objective ILP (Won et al., TACOS, 2023, Section V-A). Every other
    variable of ``sent``/``hold`` is set to 0 (fixed variables are left alone). Returns
    ``{"sends", "dropped", "objective"}`` (the active objective at the start), or None when the
    model's objective is not ``arrivals``.
    """
    view = ten_model(model)
    if view.objective != "arrivals":
        return None
    data = view.data
    h = data.horizon if upto is None else int(upto)
    rows = np.asarray(rows, np.int64).reshape(-1, 3)
    rows = rows[rows[:, 2] <= h]
    rows = rows[np.argsort(rows[:, 2], kind="stable")]
    kept, when = _feasible_prefix(data, view.sent, rows)
    _set_start_values(view, kept, when)
    obj = None
    for o in model.component_data_objects(pe.Objective, active=True):
        obj = float(pe.value(o))
        break
    return {"sends": len(kept), "dropped": int(len(rows) - len(kept)), "objective": obj}


def _feasible_prefix(data, sent, rows: np.ndarray) -> tuple[list, np.ndarray]:
    """The sends of ``rows`` (sorted by arrival) that the model has and whose source holds the
    chunk when they start, and ``when[c, n]``: the arrival each kept send implies (``ten.INF``
    if none). A switch forwards only what arrived the timestep before, once per arrival without
    switch copy."""
    when = np.where(data.pre, 0, ten.INF).astype(np.int64)
    kept = []
    at_switch: dict[tuple[int, int, int], int] = {}  # kept arrivals at a switch (it stores nothing)
    lag = data.lag  # the delay; one less over an instant switch-to-NPU hop
    for c, l, t in rows.tolist():
        k = int(lag[data.group[c], l])
        u, v = int(data.src[l]), int(data.dst[l])
        if (c, l, t) not in sent:
            continue
        if data.switch[u]:  # forwards only the arrival at its start - 1 (instant hop to an NPU: at its start)
            left = at_switch.get((c, u, t - k), 0)
            if not left or when[c, v] <= t:
                continue
            if not data.switch_copy:
                at_switch[(c, u, t - k)] = left - 1
        elif when[c, u] > t - k:
            continue
        if data.switch[v]:
            at_switch[(c, v, t)] = at_switch.get((c, v, t), 0) + 1
            kept.append((c, l, t))
            continue
        if when[c, v] <= t:
            continue
        when[c, v] = t
        kept.append((c, l, t))
    return kept, when


def _set_start_values(view, kept: list, when: np.ndarray) -> None:
    """``sent`` 1 on the ``kept`` sends and 0 elsewhere, ``hold[c, n, t]`` 1 from ``when[c, n]``
    on; fixed variables are left alone."""
    sent = view.sent
    for v in sent.values():
        if not v.fixed:
            v.set_value(0)
    for idx in kept:
        if not sent[idx].fixed:
            sent[idx].set_value(1)
    for (c, n, t), v in view.hold.items():
        if not v.fixed:
            v.set_value(1 if when[c, n] <= t else 0)


def _warm_cluster(instance, formulation, options: Options, clock: Deadline, share: float, stats,
                  form_params) -> tuple[_Known | None, Outcome | None]:
    """Time clustering with ``share`` of the time left on ``clock``: (its schedule as rows, its outcome)."""
    sub = replace(options, deadline=clock.share(share))
    o, data, rows = _time_cluster(instance, formulation, sub, **form_params)
    stats["build_s"] += o.build_s
    stats["solve_s"] += o.solve_s
    if o.nodes is not None:
        stats["nodes"] = (stats["nodes"] or 0) + o.nodes
    stats["version"] = o.version or stats["version"]
    stats["solver_status"] = o.solver_status or stats["solver_status"]
    if o.schedule is None:
        return None, o
    return _known("time-cluster", data, rows, o.found_by), o


def _better(a: _Known | None, b: _Known | None) -> _Known | None:
    if a is None:
        return b
    if b is None:
        return a
    return b if b.steps < a.steps else a


# ---- horizon search ------------------------------------------------------------------------

def _top_horizon(known: _Known | None, lb: int, rsteps: int | None, max_horizon: int | None) -> int:
    """The largest horizon the search solves: below the best ``known`` schedule's length (capped
    by ``max_horizon``), else ``max_horizon`` or four times the recovery length, never below ``lb``."""
    if known is not None:
        hi = known.steps if max_horizon is None else min(int(max_horizon), known.steps)
    else:  # the recovery schedule may break the formulation's extra rules: no upper bound from it
        hi = int(max_horizon) if max_horizon is not None else 4 * max(rsteps or 0, lb)
    hi = max(hi, lb)
    # horizons at or beyond the known schedule's length need no solve
    return hi - 1 if known is not None and known.steps <= hi else hi


def horizon_search(instance, formulation, options: Options, *, binary: bool = False,
                   persistent: bool = False, max_horizon: int | None = None, warm: bool = True,
                   warm_share: float = WARM_SHARE, **form_params) -> Outcome:
    """Smallest horizon at which the formulation delivers the whole postcondition.

    Linear search from the formulation's ``lower_bound`` upward (Won et al., TACOS, 2023, Section V-A: "t_f =
    diameter, diameter + 1, ... until all arrive"), or binary search up to the best known
    schedule's length. ``persistent=True`` (HiGHS, Gurobi) builds one model at the largest
    horizon and re-solves it per horizon with later sends fixed to zero (see
    ``benchmarks/bench_ten.py`` for when that pays off). A horizon counts as impossible only
    when the solver proves it (optimal objective short of every pair); otherwise the bound
    stays at the last proven-impossible horizon + 1 and the status is ``feasible``.

    ``warm=True`` (formulations that allow recovery, arrivals objective): time clustering first
    runs with ``warm_share`` of the time limit. Its schedule is the best known one (if it meets
    the lower bound it is optimal and nothing else is solved); only horizons below its length
    are searched, each solve gets the best known schedule truncated to its horizon as a MIP
    start (:func:`set_start`), and when no horizon completes in time the best of the known
    schedule, the last incumbent completed by :func:`recover`, and pure recovery is returned.
    """
    formulation = ten_formulation(formulation)
    clock = options.timer()
    form_params = {"objective": "arrivals", **form_params}
    search = _Search(instance, formulation, options, form_params, clock, _stats(options.solver),
                     use_warm=bool(warm) and warm_ok(formulation, form_params))
    lb = _lower_bound(formulation, instance, form_params)
    if formulation.recovery_valid:
        rdata, rrows, rsteps = recovery_schedule(instance, form_params.get("timestep"),
                                                 form_params.get("switch_copy", ten.SWITCH_COPY))
        search.known = _known("recovery", rdata, ten.prune(rdata, rrows))
    else:  # its schedules need not be recoveries (and one direction may not carry them all: allreduce)
        rsteps = recovery_steps(instance, form_params.get("timestep"), form_params.get("switch_copy", ten.SWITCH_COPY))
    extra: dict[str, Any] = {"lower_bound": lb, "recovery_steps": rsteps}
    search.proven_lb = lb
    try:
        failed = _warm_known(search, warm_share, lb, extra) if search.use_warm else None
        if failed is not None:
            return failed
        search.top = _top_horizon(search.known, lb, rsteps, max_horizon)
        if persistent and backends.canonical(options.solver) in ("highs", "gurobi"):
            search.session = backends.Session(options.solver)
        if search.known is not None and search.known.steps <= lb:
            proven_lb, best, failed = lb, None, None  # the best known schedule meets the lower bound
        elif binary:
            proven_lb, best, failed = _binary_search(search, lb)
        else:
            proven_lb, best, failed = _linear_search(search, lb)
    except TimeLimitReached as e:  # the limit stopped a build, a solve's read-back or a recovery
        if search.known is None and search.best is None:  # nothing found yet: the run says where it stopped
            raise
        kept()
        extra["stopped"] = str(e)  # the best schedule known by then is the answer
        proven_lb, best, failed = search.proven_lb, search.best, None
    extra["horizons"] = search.tried
    if failed is not None:
        return _fail(failed, search.stats, lb, extra)
    extra.update({"persistent": bool(search.session is not None and search.session.persistent),
                  "warm": search.use_warm})
    return _search_outcome(search, best, proven_lb, lb, extra)


def _warm_known(search: "_Search", warm_share: float, lb: int, extra: dict) -> Outcome | None:
    """Time clustering with ``warm_share`` of the search's clock, its schedule made the best
    known one when shorter; the failed outcome when it could not run (error, skipped)."""
    tc, tco = _warm_cluster(search.instance, search.formulation, search.options, search.clock, warm_share,
                            search.stats, search.form_params)
    if tc is None and tco.status in (Status.ERROR, Status.SKIPPED):
        return _fail(backends.SolveResult(tco.status, message=tco.message), search.stats, lb, extra)
    extra["time_cluster_steps"] = None if tc is None else tc.steps
    extra["time_cluster_windows"] = len(tco.extra.get("windows", ()))
    search.known = _better(search.known, tc)
    return None


@dataclass
class _Search:
    """One horizon search: the formulation and its parameters, the clock and statistics, the
    best known complete schedule, the largest horizon to solve and the horizons tried."""

    instance: Any
    formulation: TenFormulation
    options: Options
    form_params: dict
    clock: Deadline
    stats: dict
    use_warm: bool
    known: _Known | None = None
    top: int = 0
    session: Any = None
    shared: Any = None  # one model at the largest horizon, re-solved per horizon when persistent
    tried: list = field(default_factory=list)
    too_large: str = ""  # why a model was not built (BuildTooLarge): larger horizons are larger
    symmetric_lb: int = 0  # symmetric formulations: smallest horizon not proven impossible for symmetric schedules
    proven_lb: int = 0  # the search's proven lower bound so far (kept when the time limit stops it)
    best: Any = None  # a binary search's best complete horizon so far: (steps, schedule, horizon)

    def model(self, h: int):
        """The model of horizon ``h``: built, or the shared persistent one restricted to ``h``."""
        if self.session is None or not self.session.persistent or self.form_params["objective"] != "arrivals":
            return build(self.formulation, self.clock, self.instance, h, **self.form_params)
        if self.shared is None:
            self.shared = build(self.formulation, self.clock, self.instance, max(self.top, h), **self.form_params)
        _restrict(self.shared, h)
        return self.shared

    def attempt(self, h: int):
        """Solve horizon ``h``: (solver result, whether it delivers everything, its schedule)."""
        t0 = time.perf_counter()
        try:
            model = self.model(h)
        except BuildTooLarge as e:
            self.stats["build_s"] += time.perf_counter() - t0
            self.too_large = str(e)
            self.tried.append({"horizon": h, "status": Status.SKIPPED, "message": str(e), "complete": False})
            return backends.SolveResult(Status.NO_SOLUTION, message=str(e)), False, None
        start = set_start(model, self.known.rows, h) if self.use_warm and self.known is not None else None
        self.stats["build_s"] += time.perf_counter() - t0
        res = _solve(model, self.options, self.clock, self.stats, self.session, warm_start=start is not None)
        view = ten_model(model)
        ok = _complete(view, res)
        sched = self.formulation.extract(model) if ok else None
        if not ok and res.has_solution and self.formulation.recovery_valid:
            rows = view.sends()
            held = view.holdings(upto=h)
            cand = ten.prune(view.data, np.concatenate([rows[rows[:, 2] <= h], recover(view.data, held, h)]))
            self.known = _better(self.known, _known(
                f"incumbent at horizon {h} completed by shortest-path recovery", view.data, cand,
                f"ilp@h={h}+recovery"))
        self.tried.append({"horizon": h, "status": res.status, "objective": res.objective,
                           "required": view.required(), "complete": ok,
                           "warm_start": None if start is None else start["objective"]})
        return res, ok, sched


_log = logging.getLogger(__name__)  # the driver's progress (collsynth solve --verbose shows it)


def _said(search: _Search, h: int, res, ok: bool, proven_lb: int) -> None:
    """Log one horizon tried: its solve's status, whether it delivered everything, the proven
    lower bound and the time left."""
    left = search.clock.left()
    _log.info("horizon %d: %s%s; proven lower bound %d%s", h, res.status, ", complete" if ok else "",
              proven_lb, "" if left is None else f"; {left:.1f} s left")


def _linear_search(search: _Search, lb: int):
    """Horizons ``lb, lb + 1, ...`` up to ``search.top`` until one delivers everything:
    (proven lower bound, (steps, schedule, horizon) or None, the failed solve or None)."""
    proven_lb = lb
    search.symmetric_lb = h = lb
    while h <= search.top and not search.clock.expired():
        res, ok, sched = search.attempt(h)
        _said(search, h, res, ok, proven_lb)
        if res.status in (Status.ERROR, Status.SKIPPED):
            return proven_lb, None, res
        if ok:
            return proven_lb, (sched.num_steps, sched, h), None
        if search.too_large:
            break
        if res.status in (Status.OPTIMAL, Status.INFEASIBLE) and search.symmetric_lb == h:
            search.symmetric_lb = h + 1
            if not search.formulation.symmetric:
                search.proven_lb = proven_lb = h + 1
        h += 1
    return proven_lb, None, None


def _binary_search(search: _Search, lb: int):
    """Binary search of the smallest complete horizon in ``[lb, search.top]`` (as
    :func:`_linear_search`)."""
    proven_lb, best = lb, None
    search.symmetric_lb = lo_h = lb
    hi_h = search.top
    while lo_h <= hi_h and not search.clock.expired():
        mid = (lo_h + hi_h) // 2
        res, ok, sched = search.attempt(mid)
        _said(search, mid, res, ok, proven_lb)
        if res.status in (Status.ERROR, Status.SKIPPED):
            return proven_lb, None, res
        if ok:
            search.best = best = (sched.num_steps if sched is not None else mid, sched, mid)
            hi_h = mid - 1
        elif search.too_large:  # smaller horizons build smaller models
            search.too_large, hi_h = "", mid - 1
        else:
            if res.status in (Status.OPTIMAL, Status.INFEASIBLE):
                search.symmetric_lb = max(search.symmetric_lb, mid + 1)
                if not search.formulation.symmetric:
                    search.proven_lb = proven_lb = max(proven_lb, mid + 1)
            lo_h = mid + 1
    return proven_lb, best, None


def _why_stopped(search: _Search) -> str:
    """Why the search ended before trying every horizon it meant to: a model too large to
    build in the time left, or the time limit; ``""`` when it did not."""
    if search.too_large:
        return f"the next model is too large to build in the time left ({search.too_large})"
    return "time limit" if search.clock.expired() else ""


def _search_outcome(search: _Search, best, proven_lb: int, lb: int, extra: dict) -> Outcome:
    """The answer of a horizon search (:func:`_searched`), and where and why the search stopped
    when it stopped before proving it (:func:`stop_record`: in ``extra`` and first in the message)."""
    why = _why_stopped(search)
    out = _searched(search, best, proven_lb, lb, extra)
    if why and out.status != Status.OPTIMAL:
        at = search.tried[-1]["horizon"] if search.tried else lb
        out.extra["stopped"] = stop = stop_record(search.clock, at, search.top, why)
        out.message = "; ".join(x for x in (stop_sentence(stop), out.message) if x)
    return out


def _searched(search: _Search, best, proven_lb: int, lb: int, extra: dict) -> Outcome:
    """The answer of a horizon search: the ILP's schedule when no known one is shorter, else
    the best known schedule; optimal when every shorter horizon is proven impossible or it
    meets the bound."""
    stats, known, tried = search.stats, search.known, search.tried
    if search.formulation.symmetric:
        extra["symmetric_bound"] = search.symmetric_lb  # holds for symmetric schedules only
    if search.too_large:
        extra["build_refused"] = search.too_large
    if best is not None and (known is None or best[0] <= known.steps):
        steps, sched, at = best
        extra["used"] = "ilp"
        status = Status.OPTIMAL if steps <= proven_lb else Status.FEASIBLE
        msg = "" if status == Status.OPTIMAL else f"best {steps} timesteps; proven lower bound {proven_lb}"
        if search.formulation.symmetric and at <= search.symmetric_lb:
            extra["symmetric_optimum"] = steps
            if status != Status.OPTIMAL:
                msg = (f"the best symmetric schedule ({steps} timesteps: the solver proved every shorter "
                       f"symmetric one impossible, which says nothing of asymmetric schedules); "
                       f"lower bound {proven_lb}")
        return _outcome(sched, status, steps, min(proven_lb, steps), stats, msg, extra, f"ilp@h={at}")
    if known is None:
        return _outcome(None, "no-solution", None, proven_lb, stats,
                        f"no horizon up to {tried[-1]['horizon'] if tried else lb} completed in time", extra)
    sched = ten.schedule_from_rows(known.data, known.rows)
    steps = sched.num_steps
    extra["used"] = known.how
    status = Status.OPTIMAL if steps <= proven_lb else Status.FEASIBLE
    if status == Status.OPTIMAL:
        msg = f"{known.how}: meets the proven lower bound {proven_lb}"
    elif tried and all(x["complete"] is False for x in tried) and search.top >= lb:
        msg = f"no horizon below {steps} completed in time; {known.how}"
    else:
        msg = f"{known.how}; proven lower bound {proven_lb}"
    return _outcome(sched, status, steps, min(proven_lb, steps), stats, msg, extra, known.found_by)


RESTRICTED_OBJECTIVE = "driver_arrivals_at"  # the objective a persistent re-solve puts in place


def _restrict(model, h: int) -> None:
    """Make a model built at a larger horizon describe horizon ``h`` (persistent re-solve).

    Sends arriving after ``h`` are fixed to 0 (other horizons' fixings are undone first) and
    the active objective becomes the postcondition pairs held at ``h``.
    """
    view = ten_model(model)
    for idx, v in view.sent.items():
        if idx[2] > h:
            v.fix(0)
        elif v.fixed:
            v.unfix()
    for obj in model.component_data_objects(pe.Objective, active=True):
        obj.deactivate()
    if model.component(RESTRICTED_OBJECTIVE) is not None:
        model.del_component(RESTRICTED_OBJECTIVE)
    model.add_component(RESTRICTED_OBJECTIVE, pe.Objective(
        expr=sum(view.holding(c, n, h) for c, n in view.pairs) + 0, sense=pe.maximize,
        doc=f"postcondition pairs held at timestep {h}"))


# ---- early termination -----------------------------------------------------------------------

def early_stop(instance, formulation, options: Options, *, horizon: int | None = None, warm: bool = True,
               warm_share: float = WARM_SHARE, **form_params) -> Outcome:
    """Solve one horizon with the time limit, keep the incumbent, recover the rest (Won et al.,
    TACOS, 2023, Section V-B).

    The horizon defaults to the lower bound. Missing chunks are delivered along shortest paths
    after the horizon without exceeding any link's capacity (:func:`recover`). The gap is
    against the lower bound.

    ``warm=True`` (formulations that allow recovery, arrivals objective): time clustering runs
    first with ``warm_share`` of the time limit; if its schedule meets the lower bound it is
    returned (optimal). Otherwise the ILP at the horizon gets that schedule truncated to the
    horizon as a MIP start (:func:`set_start`) and the remaining time. The result is the
    shortest of (ILP incumbent + recovery, the time-clustering schedule, the pure recovery
    schedule), so it is never longer than the recovery bound nor than time clustering.
    ``extra`` reports ``used``, ``warm_start`` (its objective: postcondition pairs held at
    the horizon) and the ILP's final objective.
    """
    formulation = ten_formulation(formulation)
    clock = options.timer()
    stats = _stats(options.solver)
    form_params = {"objective": "arrivals", **form_params}
    lb = _lower_bound(formulation, instance, form_params)
    h = lb if horizon is None else int(horizon)
    rdata, rrows, rsteps = recovery_schedule(instance, form_params.get("timestep"),
                                                form_params.get("switch_copy", ten.SWITCH_COPY))
    cands = [_known("recovery", rdata, ten.prune(rdata, rrows))]
    extra: dict[str, Any] = {"horizon": h, "lower_bound": lb, "recovery_steps": rsteps}
    tc = None
    try:  # the limit stopping a build or a read-back leaves the candidates found by then
        if bool(warm) and warm_ok(formulation, form_params):
            tc, tco = _warm_cluster(instance, formulation, options, clock, warm_share, stats, form_params)
            if tc is None and tco.status in (Status.ERROR, Status.SKIPPED):
                return _fail(backends.SolveResult(tco.status, message=tco.message), stats, lb, extra)
            extra["time_cluster_steps"] = None if tc is None else tc.steps
            extra["time_cluster_windows"] = len(tco.extra.get("windows", ()))
            if tc is not None:
                cands.append(tc)
        if (tc is None or tc.steps > lb) and not clock.expired():
            ilp, res = _incumbent_recovered(instance, formulation, options, clock, stats, form_params, h, tc, extra)
            if res.status in (Status.ERROR, Status.SKIPPED):
                return _fail(res, stats, lb, extra)
            cands.insert(0, ilp)
    except BuildTooLarge as e:
        extra["build_refused"] = str(e)
    except TimeLimitReached as e:
        kept()
        extra["stopped"] = str(e)
    win = min(cands, key=lambda k: k.steps)  # first of equals: ILP, then time clustering
    extra["used"] = win.how
    extra["candidates"] = {k.how: k.steps for k in cands}
    sched = ten.schedule_from_rows(win.data, win.rows)
    steps = sched.num_steps
    status = Status.OPTIMAL if steps <= lb else Status.FEASIBLE
    return _outcome(sched, status, steps, min(lb, steps), stats,
                    "" if status == Status.OPTIMAL else f"{steps} timesteps; lower bound {lb}", extra, win.found_by)


def _incumbent_recovered(instance, formulation: TenFormulation, options: Options, clock: Deadline, stats,
                         form_params, h: int, start: _Known | None, extra: dict):
    """The model at horizon ``h`` solved under the clock (MIP start: ``start`` cut at ``h``),
    its incumbent completed by :func:`recover`: (that schedule as ``_Known``, the solve result).
    Records the solve in ``extra``."""
    t0 = time.perf_counter()
    model = build(formulation, clock, instance, h, **form_params)
    view = ten_model(model)
    info = set_start(model, start.rows, h) if start is not None else None
    stats["build_s"] += time.perf_counter() - t0
    if info is not None:
        extra["warm_start"] = {"source": start.how, "steps": start.steps, "horizon": h, **info}
    res = _solve(model, options, clock, stats, warm_start=info is not None)
    extra.update({"ilp_status": res.status, "ilp_objective": res.objective, "ilp_bound": res.bound,
                  "required": view.required()})
    data = view.data
    if res.has_solution:
        rows, held = view.sends(), view.holdings()
    else:
        rows, held = np.zeros((0, 3), np.int64), data.pre.copy()
    extra["recovered_pairs"] = int((data.post & ~held).sum())
    more = recover(data, held, h)
    same = info is not None and res.objective is not None and res.objective <= info["objective"]
    found = ("warm-start" if same else "ilp") + f"@h={h}" + ("+recovery" if extra["recovered_pairs"] else "")
    return _known("ilp+recovery", data, ten.prune(data, np.concatenate([rows, more])), found), res


# ---- improving a known schedule ----------------------------------------------------------------

def descend(instance, formulation, options: Options, start, *, proven: int = 0, **form_params) -> Outcome:
    """Improve a known complete schedule ``start`` (a verified :class:`~collsynth.tens.schedule.Schedule`
    of ``instance`` in the formulation's TEN timestep): the formulation's model at the
    schedule's length with the ``makespan`` objective, ``start`` as its MIP start
    (``start_from_schedule``), solved under the time limit.

    The solver starts from an incumbent as long as ``start``, so the answer is never longer and
    the run always has a schedule of the model's own (the makespan ILP covers every horizon up
    to the schedule's length at once: the early-termination idea of Won et al., TACOS, 2023,
    Section V-B, applied from above). The bound is the largest of the formulation's lower
    bound, ``proven`` (a horizon known to be the model's least, e.g. from a horizon search
    that proved the ones below it impossible) and the ILP's dual bound on the makespan
    (rounded up), so ``optimal`` means no shorter schedule of the model's class exists. A start
    that already meets that bound is only read back through the model (its arrivals
    objective, which the start solves outright). Raises
    :class:`~collsynth.tens.ten.NotSupported` when the formulation takes no schedule as a
    start or refuses this one (the caller then searches horizons as usual).
    """
    formulation = ten_formulation(formulation)
    if formulation.start_from_schedule is None:
        raise ten.NotSupported(f"{formulation.name} takes no schedule as a MIP start")
    clock = options.timer()
    if clock.expired():
        raise ten.NotSupported("no time left to improve the start schedule")
    stats = _stats(options.solver)
    lb = _lower_bound(formulation, instance, form_params)
    h = int(start.num_steps)
    # a start that meets a bound needs no improving: the arrivals model accepts it outright
    form_params = {**form_params, "objective": "arrivals" if h <= max(lb, int(proven)) else "makespan"}
    extra: dict[str, Any] = {"lower_bound": lb, "start_steps": h}
    t0 = time.perf_counter()
    model = build(formulation, clock, instance, h, **form_params)
    info = formulation.start_from_schedule(model, start)
    stats["build_s"] += time.perf_counter() - t0
    if info is None:
        raise ten.NotSupported(f"the {h}-timestep start schedule is outside {formulation.name}'s class")
    extra["warm_start"] = info
    res = _solve(model, options, clock, stats, warm_start=True)
    extra.update({"ilp_status": res.status, "ilp_objective": res.objective, "ilp_bound": res.bound})
    if res.status in (Status.ERROR, Status.SKIPPED) or not _complete(ten_model(model), res):
        return _fail(res, stats, lb, extra)
    sched = formulation.extract(model)
    steps = sched.num_steps
    proven = max(lb, int(proven), 0 if res.bound is None else int(np.ceil(res.bound - 1e-6)))
    if res.status == Status.OPTIMAL and res.objective is not None and form_params["objective"] == "makespan":
        proven = max(proven, int(round(res.objective)))
    status = Status.OPTIMAL if steps <= proven else Status.FEASIBLE
    found = ("warm-start" if steps >= h else "ilp") + f"@makespan<={h}"
    msg = "" if status == Status.OPTIMAL else f"{steps} timesteps (start {h}); proven lower bound {proven}"
    return _outcome(sched, status, steps, min(proven, steps), stats, msg, extra, found)


# ---- time clustering -------------------------------------------------------------------------

def time_cluster(instance, formulation, options: Options, *, window: int | None = None,
                 lookahead: int | None = None, **form_params) -> Outcome:
    """Windows of ``window`` timesteps, each solved from the previous window's holdings.

    Each window maximises the postcondition pairs held at its end (time clustering, Won et al.,
    TACOS, 2023, Section V-C).
    If a window makes no progress (no new arrival and no chunk closer to a node needing it),
    or time runs out, the rest is delivered by :func:`recover`. Never longer than the pure
    recovery schedule.
    """
    return _time_cluster(instance, formulation, options, window=window, lookahead=lookahead, **form_params)[0]


def _time_cluster(instance, formulation, options: Options, *, window: int | None = None,
                  lookahead: int | None = None, **form_params):
    """:func:`time_cluster`, also returning (TEN data, rows) of its schedule in the model's direction."""
    formulation = ten_formulation(formulation)
    clock = options.timer()
    stats = _stats(options.solver)
    form_params = {"objective": "arrivals", **form_params}
    lb = _lower_bound(formulation, instance, form_params)
    t0 = time.perf_counter()
    rdata, rrows, rsteps = recovery_schedule(instance, form_params.get("timestep"),
                                                form_params.get("switch_copy", ten.SWITCH_COPY))
    recovery_s = time.perf_counter() - t0  # the windows stop this early: recovering the rest takes no longer
    data0 = rdata
    k, lookahead = _window_sizes(data0, window, lookahead)
    if lookahead and form_params["objective"] == "arrivals":
        form_params["lookahead"] = lookahead
    extra = {"window": k, "windows": [], "lower_bound": lb, "recovery_steps": rsteps}
    try:
        state, offset, all_rows = _windows(instance, formulation, options, clock.earlier(recovery_s), stats,
                                           form_params, data0, k, extra["windows"])
        rows, found = _clustered_rows(data0, all_rows, state, offset, (rdata, rrows, rsteps), extra)
    except _Failed as f:
        return _fail(f.res, stats, lb, {"windows": extra["windows"]}), data0, None
    except TimeLimitReached as e:  # a window's build or read-back, or the recovery of the rest
        kept()
        extra["stopped"], extra["used"] = str(e), "recovery"
        rows, found = _compact(data0, ten.prune(rdata, rrows)), "recovery"
    sched = ten.schedule_from_rows(data0, rows)
    steps = sched.num_steps
    status = Status.OPTIMAL if steps <= lb else Status.FEASIBLE
    return (_outcome(sched, status, steps, min(lb, steps), stats,
                     "" if status == Status.OPTIMAL else f"{steps} timesteps; lower bound {lb}", extra, found),
            data0, rows)


class _Failed(Exception):
    """A window's solve failed (error, skipped): ``res`` says why."""

    def __init__(self, res: backends.SolveResult):
        super().__init__(res.message)
        self.res = res


def _windows(instance, formulation: TenFormulation, options: Options, clock: Deadline, stats, form_params,
             data0: ten.TenData, k: int, windows: list) -> tuple[np.ndarray, int, list]:
    """Time clustering's windows of ``k`` timesteps from the precondition until everything is
    held, the clock runs out or two windows make no progress: (holdings, timesteps covered,
    the windows' rows). Each window is recorded in ``windows``; raises :class:`_Failed`."""
    state = data0.pre.copy()
    offset, stalls = 0, 0
    all_rows = []
    while (data0.post & ~state).any() and not clock.expired() and stalls < 2:
        t0 = time.perf_counter()
        try:
            model = build(formulation, clock, instance, k, state=state, **form_params)
        except BuildTooLarge as e:
            stats["build_s"] += time.perf_counter() - t0
            windows.append({"start": offset, "status": Status.SKIPPED, "message": str(e)})
            break
        stats["build_s"] += time.perf_counter() - t0
        res = _solve(model, options, clock, stats)
        if res.status in (Status.ERROR, Status.SKIPPED):
            raise _Failed(res)
        if not res.has_solution:
            break
        view = ten_model(model)
        rows, new_state = view.sends(), view.holdings()
        gained = int((new_state & ~state & data0.post).sum())
        windows.append({"start": offset, "status": res.status, "arrivals": gained})
        # no arrival: progress only if chunks moved closer to where they are needed
        stalls = stalls + 1 if gained == 0 and _potential(data0, new_state) >= _potential(data0, state) else 0
        if len(rows):
            rows[:, 2] += offset
            all_rows.append(rows)
        # time advances by the window (sends of later windows start after it)
        state = new_state
        offset += k
    return state, offset, all_rows


def _window_sizes(data: ten.TenData, window: int | None, lookahead: int | None) -> tuple[int, int]:
    """(window length, lookahead) of time clustering: by default a window of the largest lag
    (at least 2) and a lookahead of the largest finite distance (else the window)."""
    k = int(window) if window else max(2, int(data.lag.max()))
    if lookahead is None:
        finite = data.dist[np.isfinite(data.dist)]
        lookahead = int(finite.max()) if finite.size else k
    return k, lookahead


def _clustered_rows(data: ten.TenData, all_rows: list, state: np.ndarray, offset: int, recovery: tuple,
                    extra: dict) -> tuple[np.ndarray, str]:
    """(rows, found_by) of the windows' sends, completed by recovery from ``state`` at ``offset``
    where needed, pruned; the pure recovery schedule ``recovery = (data, rows, steps)`` instead
    when longer than it; compacted. ``extra`` gets ``recovered_pairs`` / ``used``."""
    rdata, rrows, rsteps = recovery
    if not all_rows and offset == 0:  # no window ran: recovery from the precondition is the pure recovery
        extra["recovered_pairs"] = int((data.post & ~state).sum())
        extra["used"] = "recovery"
        return _compact(data, ten.prune(rdata, rrows)), "recovery"
    rows = np.concatenate(all_rows) if all_rows else np.zeros((0, 3), np.int64)
    if (data.post & ~state).any():
        extra["recovered_pairs"] = int((data.post & ~state).sum())
        rows = np.concatenate([rows, recover(data, state, offset)])
    rows = ten.prune(data, rows)
    found = "time-cluster+recovery" if "recovered_pairs" in extra else "time-cluster"
    if (int(rows[:, 2].max()) if len(rows) else 0) > rsteps:
        rows = ten.prune(rdata, rrows)
        extra["used"] = found = "recovery"
    return _compact(data, rows), found


def _potential(data: ten.TenData, held: np.ndarray) -> float:
    """Sum over missing postcondition pairs of the delay-weighted distance from the nearest
    holder: a window that lowers it moved chunks closer even without an arrival."""
    need = data.post & ~held
    rows = np.flatnonzero(need.any(axis=1))
    holders = held[rows].sum(axis=1)
    tot = 0.0
    one = rows[holders == 1]  # one holder: its row of distances (in bulk)
    if len(one):
        D = data.dist[data.group[one], np.argmax(held[one], axis=1)]
        tot += float(np.where(need[one], D, 0.0).sum())
    for c in rows[holders != 1].tolist():
        D = data.dist[data.group[c]]
        tot += D[np.ix_(np.flatnonzero(held[c]), np.flatnonzero(need[c]))].min(axis=0).sum()
    return tot


def _compact(data: ten.TenData, rows: np.ndarray) -> np.ndarray:
    """Drop timesteps in which nothing is on any link (a window that ended early)."""
    if not len(rows):
        return rows
    k = data.delay[data.group[rows[:, 0]], rows[:, 1]] + data.latency[rows[:, 1]]  # in flight: occupancy, latency
    T = int(rows[:, 2].max())
    edges = np.zeros(T + 2, np.int64)  # +1 where a flight starts, -1 after it ends
    np.add.at(edges, rows[:, 2] - k + 1, 1)
    np.add.at(edges, rows[:, 2] + 1, -1)
    busy = np.cumsum(edges)[:T + 1] > 0
    busy[0] = True  # timestep 0 is the precondition, never removed
    idle = np.cumsum(~busy)
    out = rows.copy()
    out[:, 2] = rows[:, 2] - idle[rows[:, 2]]
    return out


def recovery_valid(formulation) -> bool:
    """Whether shortest-path recovery sends obey the formulation's rules (``RECOVERY_VALID``).
    A formulation that adds rules to the TEN ILP (e.g. one-port nodes) sets it False: horizon
    search then searches past the recovery length and never falls back to it, and the drivers
    built on recovery (early-stop, time-cluster) refuse it."""
    return ten_formulation(formulation).recovery_valid


DRIVER_KEYS = {
    "horizon": ("binary", "persistent", "max_horizon", "warm", "warm_share"),
    "early-stop": ("horizon", "warm", "warm_share"),
    "time-cluster": ("window", "lookahead"),
}


def run(driver: str | None, instance, formulation, options: Options) -> Outcome:
    """Dispatch to a driver by name (default: horizon search)."""
    formulation = ten_formulation(formulation)
    drv, form = split_params(dict(options.params))
    name = driver or "horizon"
    if name not in DRIVER_KEYS:
        raise InputError("--driver", f"unknown driver {name!r}; expected one of {', '.join(DRIVERS)}")
    if name in ("early-stop", "time-cluster") and not formulation.recovery_valid:
        raise Unsupported(f"{name} completes schedules by shortest-path recovery, which "
                          f"{formulation.name} does not allow; use --driver horizon")
    fn = {"horizon": horizon_search, "early-stop": early_stop, "time-cluster": time_cluster}[name]
    return fn(instance, formulation, options, **{k: v for k, v in drv.items() if k in DRIVER_KEYS[name]}, **form)
