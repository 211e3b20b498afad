"""The TEN formulation producers: one per formulation module with ``DRIVER_FAMILY = "ten"``.

Each runs a formulation of :mod:`collsynth.formulations` (through its contract,
:class:`~collsynth.formulations.TenFormulation`) on any backend of
:mod:`collsynth.solvers.backends` (``--solver``, ``--time-limit``, ``--gap``, ``--param k=v``
for formulation and driver parameters such as ``objective=makespan``, ``binary=true``,
``persistent=true``, ``window=3``, ``horizon=9``). Nothing here depends on a formulation's
name; what differs is what the formulation declares:

- ``ROLE = "schedule"`` (ten-ilp, ten-ilp-nocongestion, ten-ilp-oneport, ...): solved by a
  driver of :mod:`collsynth.solvers.ten.drivers` (``--driver horizon|early-stop|time-cluster``).
  Every such run reports the LP bound beside its result (``extra["lp_bound"]``, at most
  ~20% of the time limit; ``--param lp_bound=false`` skips it): the stronger of the
  hold/sent TEN LP and the flow LP (``extra["lp_bound_source"]`` names it, ``lp_bounds``
  lists both; ``--param flow_lp=false`` skips the flow LP, ``max_variables=N`` is its size
  guard) and, when the formulation respects link capacity (``RESPECTS_CAPACITY``), proves
  with it: the outcome's bound is the larger of the driver's and the LP's. A schedule that
  already meets the combinatorial lower bound leaves nothing to search: no LP is solved and
  ``lp_bound`` is None (``lp_bound_note`` says so).
- ``ROLE = "relaxation"`` (ten-lp, ten-flow-lp): the smallest horizon whose relaxation delivers everything
  is its bound (``extra["lp_bound"]`` as well), and the solved relaxation's ``schedules`` give
  a verified fractional schedule (``--param polish=false`` skips the re-solve of its
  ``refine``; ``cuts=false`` switches off the LP's cumulative-send cuts).

Collectives: non-combining ones directly; reduce and reduce_scatter as the dual on the
transposed topology, reversed (inside the formulation); allreduce as reduce_scatter then
allgather, two runs concatenated (its bound is the larger phase bound: the decomposition is
not proven optimal for allreduce). A formulation that declares ``NATIVE_REDUCTIONS``
(ten-ilp-combining) gets every instance whole, allreduce and concurrent mixes of kinds
included. Objectives and bounds are TEN timesteps.
"""

from __future__ import annotations

import time
from dataclasses import replace

from ...tens.status import Status
from ... import InputError
from ...formulations import (OBJECTIVES, TenFormulation, ten_family, ten_flow_lp, ten_formulation, ten_ilp, ten_lp,
                              ten_lp_orbit, ten_model)
from ...instances import size
from ...limits import NO_LIMIT, Deadline, TimeLimitReached, kept
from ...tens import orbits, ten
from ...tens.schedule import concat
from .. import backends
from . import drivers
from ..producers import Options, Outcome, Param, Producer, Unsupported

# parameters of the drivers (solvers.ten.drivers)
DRIVER_PARAMS = (
    Param("binary", bool, False, "horizon search: binary search up to the best known schedule instead of upward"),
    Param("persistent", bool, False, "horizon search: re-solve one model built at the largest horizon (HiGHS, Gurobi)"),
    Param("max_horizon", int, None, "horizon search: largest horizon tried (default: the best known schedule's "
          "length)", low=1),
    Param("warm", bool, True, "horizon search, early-stop: warm-start the ILP from time clustering"),
    Param("warm_share", float, drivers.WARM_SHARE, "share of the time limit the warm-start time clustering may use",
          low=0, high=1),
    Param("horizon", int, None, "early-stop: the horizon solved (default: the lower bound)", low=1),
    Param("window", int, None, "time-cluster: timesteps per window (default: max(2, longest link delay))", low=1),
    Param("lookahead", int, None, "time-cluster: timesteps after a window in which relays count (default: TEN "
          "diameter)", low=0),
)
# parameters of the TEN ILP (formulations.ten_ilp.build), the default of a formulation that
# declares no PARAMS (a tuple of (name, type, default, help), see collsynth.formulations)
ILP_PARAMS = (
    Param("objective", OBJECTIVES, "arrivals", "arrivals (pairs held at the horizon) or makespan"),
    Param("capacity", bool, True, "one chunk per link per timestep (false: the congestion-blind model)"),
    Param("weights", list[float], None, "one weight per concurrent collective in the arrivals objective", low=0),
    Param("timestep", float, None, "seconds per TEN timestep (default: the cheapest link's cost per chunk)"),
    Param("switch_copy", bool, ten.SWITCH_COPY, "switch nodes forward one arrival on several out-links (multicast, "
                                                "TE-CCL's default); false: one out-send per arrival"),
)
LP_SHARE = 0.2  # share of the time left kept for the LP bounds beside a driver's run
# the TEN LP bound computed beside every ILP result
LP_BESIDE_PARAMS = (
    Param("lp_bound", bool, True, f"compute the TEN LP bound beside the result (about {LP_SHARE:.0%} of the "
                                  "time limit)"),
    Param("cuts", bool, True, "cumulative-send cuts in the TEN LP"),
    Param("flow_lp", bool, True, "also the flow LP bound beside the result (when it fits the size guard and budget)"),
    Param("max_variables", int, ten_flow_lp.MAX_VARIABLES, "flow LP beside the result: refuse above this many "
          "variables", low=1),
)
# the producer of a relaxation (ROLE = "relaxation"); its model's own parameters come from PARAMS
RELAXATION_PARAMS = (
    Param("binary", bool, False, "binary search for the relaxation bound (up to the recovery schedule's length)"),
    Param("polish", bool, True, "re-solve the relaxation for little, early traffic before realising the schedule"),
)

LP = ten_formulation(ten_lp)  # the congested TEN LP whose bound is reported beside every schedule run
ORBIT_LP = ten_formulation(ten_lp_orbit)  # the same bound from one chunk orbit, beside symmetric formulations
FLOW = ten_formulation(ten_flow_lp)  # the flow LP: no double counting across cuts, larger
REVERSAL = ten_formulation(ten_ilp)  # reductions reversed, allreduce as RS + AG: a start for native models
START_SHARE = 0.3  # share of the time left the reversal's start schedule may use
FLOW_BUILD_S_PER_VAR = 1.5e-4  # seconds to build the flow LP, per variable (measured: 6.1 s for 47k on mesh4x4-failed)


def _phases(instance):
    """[(phase name, instance)] — allreduce splits into reduce_scatter then allgather."""
    kinds = [c.kind for c in instance.collectives]
    if "allreduce" not in kinds:
        return None
    if instance.concurrent:
        raise Unsupported("allreduce among concurrent collectives")
    coll = instance.collective
    return [
        ("reduce_scatter", replace(instance, name=f"{instance.name}-rs", collectives=(coll.with_kind("reduce_scatter"),))),
        ("allgather", replace(instance, name=f"{instance.name}-ag", collectives=(coll.with_kind("allgather"),))),
    ]


def _checked(fn):
    try:
        return fn()
    except ten.NotSupported as e:
        raise Unsupported(str(e)) from None


def _capacity_blind(formulation: TenFormulation, form: dict) -> bool:
    """Whether the run's timesteps ignore link capacity (then the congested LP bound, which
    bounds every capacity-respecting schedule, says nothing about its horizon): the
    formulation declares so, or the run passes ``capacity=false``."""
    cap = form.get("capacity", True)
    return not formulation.respects_capacity or cap is False or str(cap).lower() in ("false", "0", "no")


def _lp_beside(instance, formulation: TenFormulation, options: Options, form: dict, outcome: Outcome,
               clock: Deadline) -> Outcome:
    """:func:`_lp_bounds` by ``clock``; when the time limit stops them (a model's build or a
    size estimate that ran past it), the outcome keeps its schedule and what the bounds
    had proved, and ``lp_bound_note`` says where they stopped: bounds never cost the run
    the schedule it found."""
    try:
        return _lp_bounds(instance, formulation, options, form, outcome, clock)
    except TimeLimitReached as e:
        kept()
        if outcome.extra.get("lp_bound") is None:
            outcome.extra["lp_bound"] = None
            outcome.extra["lp_bound_note"] = f"not finished: {e}"
        else:
            outcome.extra["flow_lp_note"] = f"not finished: {e}"
        return outcome


def _lp_bounds(instance, formulation: TenFormulation, options: Options, form: dict, outcome: Outcome,
               clock: Deadline) -> Outcome:
    """Compute the LP bounds for one (non-allreduce) run and fold the strongest into its outcome.

    The congested hold/sent LP (:func:`lp_search` on :data:`LP`) and, with ``flow=True`` in
    ``form`` (default), the flow LP (:data:`FLOW`, searched from the hold/sent bound upward:
    only a larger value adds anything) bound every schedule that respects link capacity, so for
    such formulations the outcome's bound becomes ``max(driver bound, LP bounds)`` (status
    ``optimal`` when the schedule meets it) and each search stops below the schedule's length.
    For a capacity-blind formulation they are only recorded. ``extra["lp_bound"]`` is the
    larger, ``extra["lp_bound_source"]`` the formulation that proved it and
    ``extra["lp_bounds"]`` each one (None, with ``lp_bound_note`` / ``flow_lp_note`` saying
    why, when one was not computed by ``clock`` or within its size guard). When the
    schedule of a capacity-respecting run already meets the combinatorial lower bound no LP is
    solved, and all of them are None (:func:`_lp_not_needed`): a row records an LP bound only
    when an LP proved it.
    """
    blind = _capacity_blind(formulation, form)
    want_flow = form.get("flow", True)
    relaxation = relaxation_beside(formulation, instance)
    lp_form = {k: v for k, v in form.items() if k in ("timestep", "cuts", "switch_copy") and k in _param_names(relaxation)}
    t0 = time.perf_counter()
    steps = None if outcome.schedule is None else outcome.schedule.num_steps
    known = steps if (steps is not None and not blind) else None
    try:
        lb = relaxation.lower_bound(instance, timestep=lp_form.get("timestep"))
        hi = known if known is not None else drivers.recovery_schedule(instance, lp_form.get("timestep"),
                                                                   lp_form.get("switch_copy", ten.SWITCH_COPY))[2]
    except ten.NotSupported as e:
        outcome.extra["lp_bound"] = None
        outcome.extra["lp_bound_note"] = f"not computed: the TEN LP reverses combining collectives: {e}"
        return outcome
    if known is not None and max(lb, 1) >= known:  # the search would start at ``known``: nothing to solve
        return _lp_not_needed(outcome, relaxation, lb, known, want_flow)
    s = _search_beside(instance, relaxation, options, lp_form, lb, max(hi, lb), known, clock)
    outcome.extra.update({"lp_bound_solver": s["solver"], "lp_bound": s["bound"],
                          "lp_bound_s": round(time.perf_counter() - t0, 4),
                          "lp_bound_horizons": [x["horizon"] for x in s["horizons"]],
                          "lp_bound_source": relaxation_source(relaxation) if s["bound"] is not None else None,
                          "lp_bounds": {relaxation.name: s["bound"]}})
    if s["bound"] is None:
        outcome.extra["lp_bound_note"] = f"not finished: {s['message']}" + (
            f" (its share of the limit ended {time.perf_counter() - t0:.3g} s after it started)"
            if clock.expired() else "")
    if want_flow:
        flow_form = {k: v for k, v in form.items() if k in ("timestep", "max_variables", "switch_copy")}
        _flow_beside(instance, options, flow_form, max(lb, s["bound"] or lb), max(hi, lb), known, clock, outcome)
    best = outcome.extra["lp_bound"]
    if best is not None and blind:
        outcome.extra["lp_bound_note"] = ("the congested LP bound; this formulation ignores link capacity, "
                                          "so it does not bound its timesteps")
    elif best is not None:
        _prove_with(outcome, float(best), steps, outcome.extra.get("lp_bound_source") or "TEN LP")
    return outcome


def _lp_not_needed(outcome: Outcome, relaxation: TenFormulation, lb: int, steps: int, flow: bool) -> Outcome:
    """Record that no LP bound was computed beside a run whose schedule (``steps`` timesteps)
    already meets the combinatorial lower bound ``lb`` (the search would start at ``lb`` and
    solve nothing): ``lp_bound`` None, each relaxation in ``lp_bounds`` None, and
    ``lp_bound_note`` (``flow_lp_note`` for the flow LP) saying why. The row's proof is then the combinatorial bound's own."""
    why = f"not computed: the combinatorial lower bound {lb} meets the schedule's {steps} timesteps; no LP was solved"
    outcome.extra.update({"lp_bound": None, "lp_bound_note": why,
                          "lp_bounds": {relaxation.name: None, **({FLOW.name: None} if flow else {})}})
    if flow:
        outcome.extra["flow_lp_note"] = f"not needed: the schedule meets the bound {lb}"
    return outcome


def relaxation_beside(formulation: TenFormulation, instance) -> TenFormulation:
    """The TEN LP whose bound is computed beside a run: its orbit form (the same bound, ``|G|``
    times smaller) for a symmetric formulation on a topology a group acts on regularly, the
    full TEN LP otherwise (a symmetric formulation may tie its variables by a group that is
    not regular, which the orbit LP cannot express)."""
    if formulation.symmetric and orbits.group_of(instance.topology) is not None:
        return ORBIT_LP
    return LP


def _param_names(formulation: TenFormulation) -> set[str]:
    """The parameters ``formulation.build`` takes (those of the TEN ILP when it declares none)."""
    return {p[0] for p in (formulation.params if formulation.params is not None else ILP_PARAMS)}


def relaxation_source(formulation: TenFormulation) -> str:
    """How a relaxation's bound is named in ``lp_bound_source`` (and so in a row's
    ``bound_source``): its name, and for a symmetric one why it bounds every schedule (the
    contract: a symmetric relaxation is a convex, group-invariant LP restricted to symmetric
    points, and averaging any solution over the group gives such a point)."""
    if not formulation.symmetric:
        return formulation.name
    return (f"{formulation.name} (every schedule: the LP is convex and invariant under the group, so averaging a "
            "solution over the group gives a symmetric one)")


def _search_beside(instance, relaxation: TenFormulation, options: Options, form: dict, lo: int, hi: int,
                   known: int | None, clock: Deadline) -> dict:
    """:func:`lp_search` for a bound beside a run by ``clock``, on the run's solver (HiGHS for
    CP-SAT) and on HiGHS again if that solver could not take the LP (licence, crash)."""
    for attempt in (_lp_solver(options.solver), "highs"):
        s = lp_search(instance, relaxation, attempt, form, lo, hi, deadline=clock, known=known,
                      threads=options.threads, seed=options.seed)
        trouble = any(x["status"] in (Status.SKIPPED, Status.ERROR) for x in s["horizons"])
        if s["bound"] is not None or not trouble or backends.canonical(attempt) == "highs":
            break
    return s


def _flow_beside(instance, options: Options, form: dict, lo: int, hi: int, known: int | None,
                 clock: Deadline, outcome: Outcome) -> None:
    """The flow LP bound searched from ``lo`` (the hold/sent bound) by ``clock`` and folded
    into ``extra``: the source becomes the flow LP when it proves more. Refused
    (``flow_lp_note``, bound None) when its first model is over the size guard or would not
    build in the time left."""
    t0 = time.perf_counter()
    extra = outcome.extra
    extra["lp_bounds"][FLOW.name] = None
    if known is not None and lo >= known:
        extra["flow_lp_note"] = f"not needed: the schedule meets the bound {lo}"
        return
    clock.check("the flow LP bound's size estimate")
    try:
        data = ten.prepare(instance, lo, timestep=form.get("timestep"),
                           switch_copy=bool(form.get("switch_copy", ten.SWITCH_COPY)))
        cap = int(form.get("max_variables", ten_flow_lp.MAX_VARIABLES))
        n = ten_flow_lp.flow_rows(data, deadline=clock)  # counted first: listing them may take gigabytes
        least = n > cap  # then n is the flow variables alone, fewer than the model's
        n = n if least else ten_flow_lp.size(data, deadline=clock)
    except ten.NotSupported as e:
        extra["flow_lp_note"] = f"not computed: {e}"
        return
    est = FLOW_BUILD_S_PER_VAR * n
    if n > cap:
        extra["flow_lp_note"] = (f"not computed: {'at least ' if least else ''}{n} variables at horizon {lo}, "
                                 f"over the budget of {cap} (max_variables)")
        return
    left = clock.left()
    if left is not None and est > left:
        extra["flow_lp_note"] = (f"not computed: {n} variables at horizon {lo} would take about {est:.3g} s "
                                 f"to build ({left:.3g} s left)")
        return
    try:
        s = _search_beside(instance, FLOW, options, form, lo, hi, known, clock)
    except Unsupported as e:  # a later horizon over the size guard
        extra["flow_lp_note"] = f"not computed: {e}"
        return
    extra["flow_lp_s"] = round(time.perf_counter() - t0, 4)
    extra["flow_lp_horizons"] = [x["horizon"] for x in s["horizons"]]
    bound = s["bound"]
    if bound is None:  # unfinished: every horizon proven incomplete still bounds from below
        proven = [x["horizon"] + 1 for x in s["horizons"] if x.get("complete") is False]
        extra["flow_lp_note"] = f"not finished: {s['message']}" + (
            f"; incomplete up to horizon {max(proven) - 1}" if proven else "")
        if not proven:
            return
        bound = max(proven)
    if bound == lo and lo == extra.get("lp_bound"):
        extra["flow_lp_note"] = f"complete at the hold/sent LP bound {lo}: proves nothing more"
        return
    extra["lp_bounds"][FLOW.name] = bound
    if extra.get("lp_bound") is None or bound > extra["lp_bound"]:
        extra["lp_bound"], extra["lp_bound_source"] = bound, FLOW.name
        extra.pop("lp_bound_note", None)


def _prove_with(outcome: Outcome, lp_bound: float, steps: int | None, source: str = "TEN LP") -> None:
    """Raise the outcome's bound to the LP bound (capped at its own length); optimal when met."""
    if outcome.bound is not None and lp_bound <= outcome.bound:
        return
    outcome.bound = lp_bound if steps is None else min(lp_bound, float(steps))
    if outcome.objective is not None and outcome.objective > 0:
        outcome.gap = max(0.0, (outcome.objective - outcome.bound) / outcome.objective)
    if steps is not None and outcome.status == Status.FEASIBLE and steps <= lp_bound:
        outcome.status = Status.OPTIMAL
        outcome.message = f"{outcome.message}; optimal: meets the {source} bound {lp_bound:g}".lstrip("; ")


def _check_size(formulation: TenFormulation, instance) -> None:
    """Refuse a TEN model over the memory budget before anything is built, scaled by the
    formulation's ``units`` (a symmetric one holds one chunk orbit, ``1/N`` of the full
    model's variables; a per-source one one commodity per source instead of per chunk)."""
    chunk_units = sum(c.num_chunks for c in instance.collectives) * max(1, len(instance.topology.link_arrays))
    size.check_ten(instance, variables_per_unit=formulation.units(instance) / max(1, chunk_units))


def _with_driver(formulation: TenFormulation):
    """The producer run of a schedule formulation: a driver, then the LP bound beside it."""

    def run(instance, options: Options) -> Outcome:
        _check_size(formulation, instance)
        params = dict(options.params)
        start = params.pop("start", "reversal")  # formulations taking a schedule as a MIP start
        want_lp = _flag(params, "lp_bound", True)
        params.pop("polish", None)
        cuts = _flag(params, "cuts", True)  # for the LP bound; the ILPs take no cuts
        flow = _flag(params, "flow_lp", True)
        beside = {"max_variables": params.pop("max_variables")} if "max_variables" in params else {}
        clock = options.timer()
        options = replace(options, params=params, deadline=clock)
        drive = replace(options, deadline=clock.share(1 - LP_SHARE) if want_lp else clock)
        form = dict(drivers.split_params(params)[1], cuts=cuts, flow=flow, **beside)
        phases = None if formulation.native_reductions else _checked(lambda: _phases(instance))
        if phases is None:
            o = _from_start(instance, formulation, drive) if start == "reversal" else None
            if o is None:
                o = _checked(lambda: drivers.run(drive.driver, instance, formulation, drive))
            if formulation.native_reductions and (any(c.kind == "allreduce" for c in instance.collectives)
                                                  or instance.topology.switches):
                o = _model_class_proof(o)
            return _lp_beside(instance, formulation, options, form, o, clock) if want_lp else o
        outs = []
        for i, (name, sub) in enumerate(phases):  # each phase an equal share of what is left
            part = replace(drive, deadline=drive.deadline.share(1 / (len(phases) - i)))
            o = _checked(lambda: drivers.run(drive.driver, sub, formulation, part))
            if o.schedule is None:
                o.message = f"{name} phase: {o.message}"
                return o
            outs.append(o)
        if want_lp:
            for i, ((name, sub), o) in enumerate(zip(phases, outs)):
                _lp_beside(sub, formulation, options, form, o, clock.share(1 / (len(phases) - i)))
        return _allreduce_outcome(*outs, want_lp)

    return run


def _from_start(instance, formulation: TenFormulation, options: Options):
    """A formulation that takes a schedule as a MIP start (``start_from_schedule``) on a single
    combining collective: the reversal's schedule (:data:`REVERSAL`: reductions reversed,
    allreduce as reduce-scatter then allgather) with :data:`START_SHARE` of the time limit;
    then horizons from the lower bound up to one below that schedule's length (horizon
    search, half the time left: quick where the bound is tight); if none completes, the
    reversal's schedule improved by :func:`~collsynth.solvers.ten.drivers.descend` in the
    rest, with what the search proved. Returns the outcome, or None when it does not apply,
    there is no start or the model refused it (the caller then searches horizons in the time
    left). Every stage runs on a share of ``options``' deadline."""
    if (formulation.start_from_schedule is None or options.driver not in (None, "horizon")
            or instance.concurrent or not instance.collective.combining):
        return None
    clock = options.timer()
    form = drivers.split_params(dict(options.params))[1]
    keep = {k: form[k] for k in ("timestep",) if k in form}
    try:
        seed = _with_driver(REVERSAL)(instance, replace(options, deadline=clock.share(START_SHARE), driver=None,
                                                        params={**keep, "lp_bound": False}))
    except Unsupported:  # the reversal cannot express it (a reduction through switch nodes): no start
        return None
    if seed.schedule is None:
        return None
    about = {"producer": REVERSAL.name, "steps": seed.objective, "status": seed.status,
             "bound": seed.bound, "found_by": seed.found_by}
    h = seed.schedule.num_steps
    searched = None
    if formulation.lower_bound(instance, timestep=form.get("timestep")) < h:
        searched = _checked(lambda: drivers.run("horizon", instance, formulation, replace(
            options, deadline=clock.share(0.5), params={**options.params, "max_horizon": h - 1})))
        if searched.schedule is not None:
            searched.extra["start"] = about
            return searched
    proven = int(searched.bound or 0) if searched is not None else 0
    try:
        o = drivers.descend(instance, formulation, replace(options, deadline=clock), seed.schedule,
                            proven=proven, **form)
    except ten.NotSupported:
        return None
    if o.schedule is None:
        return None
    o.extra["start"] = about
    if searched is not None:
        o.extra["horizons"] = searched.extra.get("horizons")
    for part in (seed, searched):
        if part is not None:
            o.build_s += part.build_s
            o.solve_s += part.solve_s
    return o


def _model_class_proof(o: Outcome) -> Outcome:
    """An allreduce, or any reduction through kept switch nodes, solved by a native-reduction
    formulation: a horizon its model proves impossible rules out that model's schedules only
    (one reduction tree per chunk, then copies; recursive doubling's butterflies, and sums that
    switches multicast into several reductions, are outside it), so the outcome's bound and status
    rest on the instance's lower bound, and ``extra["model_bound"]`` /
    ``extra["model_optimal"]`` keep what the search proved about the model."""
    lb = o.extra.get("lower_bound")
    if lb is None or o.bound is None or o.bound <= lb:
        return o
    o.extra["model_bound"] = o.bound
    o.extra["model_optimal"] = o.status == Status.OPTIMAL
    o.bound = float(lb)
    if o.objective is not None and o.objective > lb:
        o.gap = (o.objective - lb) / o.objective
        if o.status == Status.OPTIMAL:
            o.status = Status.FEASIBLE
            o.message = (f"optimal among the model's schedules (one reduction tree per chunk, then copies); "
                         f"instance lower bound {lb}").lstrip("; ")
    return o


def _allreduce_outcome(rs: Outcome, ag: Outcome, want_lp: bool) -> Outcome:
    """reduce_scatter then allgather, concatenated; the bound is the larger phase bound. The
    schedule keeps the TEN meta both phases agree on (timestep, switch forwarding)."""
    sched = concat(rs.schedule, ag.schedule, "allreduce")
    for key in ("timestep_s", "switch_copy"):
        if key in rs.schedule.meta and rs.schedule.meta[key] == ag.schedule.meta.get(key):
            sched.meta[key] = rs.schedule.meta[key]
    steps = sched.num_steps
    bound = max(rs.bound or 0, ag.bound or 0)
    extra = {"phases": {"reduce_scatter": rs.extra, "allgather": ag.extra}}
    if want_lp:
        extra.update(_allreduce_lp_bound(rs, ag))
    return Outcome(
        schedule=sched, status=Status.OPTIMAL if steps <= bound else Status.FEASIBLE, objective=float(steps),
        bound=float(bound), gap=(steps - bound) / steps if steps else 0.0, units="timesteps",
        build_s=rs.build_s + ag.build_s, solve_s=rs.solve_s + ag.solve_s, solver=rs.solver, version=rs.version,
        message=(f"reduce_scatter ({rs.status}, {rs.objective:g}) + allgather ({ag.status}, {ag.objective:g}); "
                 "the decomposition is not proven optimal for allreduce"),
        extra=extra, found_by=_phase_found_by(rs, ag), solver_status=ag.solver_status,
    )


def _allreduce_lp_bound(rs: Outcome, ag: Outcome) -> dict:
    """The LP bound of an allreduce from its phases' (``lp_bound``, ``lp_bound_source``,
    ``lp_bound_note``): the larger of the phases' LP bounds (an allreduce schedule contains both
    a reduce_scatter and an allgather); None when a phase's LP search ran and did not finish,
    or when no phase solved an LP (a phase whose schedule meets its combinatorial bound solves
    none). A phase without an LP search contributes nothing."""
    phases = {"reduce_scatter": rs.extra, "allgather": ag.extra}
    solved = {name: x for name, x in phases.items() if x.get("lp_bound") is not None}
    unfinished = [name for name, x in phases.items() if x.get("lp_bound") is None and "lp_bound_horizons" in x]
    if unfinished or not solved:
        why = "; ".join(f"{name}: {x.get('lp_bound_note', 'no LP bound')}" for name, x in phases.items()
                        if x.get("lp_bound") is None)
        head = "a phase's LP bound did not finish" if unfinished else "not computed: no phase solved an LP"
        return {"lp_bound": None, "lp_bound_note": f"{head} ({why})"}
    name = max(solved, key=lambda n: solved[n]["lp_bound"])
    return {"lp_bound": solved[name]["lp_bound"], "lp_bound_source": solved[name].get("lp_bound_source")}


def _phase_found_by(rs: Outcome, ag: Outcome) -> str:
    """``found_by`` of an allreduce made of a reduce_scatter and an allgather phase."""
    return f"reduce_scatter {rs.found_by}, allgather {ag.found_by}"


# ---- relaxations: bound search, fractional schedule ----------------------------------------

BUILD_S_PER_UNIT = 3e-4  # seconds to build and load an LP, per chunk x link pair x timestep (measured,
# meshes 5x5..8x8 on this machine); a search with a time limit skips models it cannot afford


def _flag(params: dict, name: str, default: bool = True) -> bool:
    """A true/false ``--param`` (JSON true/false, 1/0, or the strings)."""
    v = params.pop(name, default)
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)) and v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.strip().lower() in ("true", "false", "yes", "no", "1", "0"):
        return v.strip().lower() in ("true", "yes", "1")
    raise InputError(f"--param {name}", f"expected true or false, got {v!r}")


def _lp_solver(solver: str) -> str:
    """The backend for LP solves: the run's solver, except CP-SAT (pure-integer only) -> HiGHS."""
    return "highs" if backends.canonical(solver) == "cpsat" else solver


def lp_search(instance, formulation: TenFormulation, solver: str, form: dict, lo: int, hi: int, *,
              deadline: Deadline = NO_LIMIT, known: int | None = None, binary: bool = False,
              threads: int = 1, seed: int = 0) -> dict:
    """The relaxation lower bound: the smallest horizon in ``[lo, hi]`` whose relaxation
    (``formulation``, a ``ROLE = "relaxation"`` one such as :data:`LP`) delivers everything,
    i.e. whose solved ``bound(model)`` is the horizon itself.

    Completeness is monotone in the horizon, so the search is linear from ``lo`` (the
    combinatorial bound) or binary (``binary=True``). ``known``: a horizon at which the
    relaxation is known to be complete (a capacity-respecting schedule of that length exists),
    never solved. A horizon counts as complete on a solution that delivers everything, optimal
    or not (the interior point without crossover may end with such a point unverified), and as
    incomplete only on an optimal one. Returns ``{"bound", "model", "horizons", "build_s", "solve_s", "solver",
    "version", "message"}``; ``bound`` is None when the search did not finish (``deadline``,
    solver trouble), and ``model`` is the solved complete relaxation at ``bound`` (None when
    the bound came from ``known``).
    """
    out = {"bound": None, "model": None, "horizons": [], "build_s": 0.0, "solve_s": 0.0,
           "solver": backends.canonical(solver), "version": "", "message": "", "solver_status": ""}
    top = hi if known is None else min(hi, known)
    attempt = _lp_attempt(instance, formulation, backends.Request(solver, deadline, threads=threads, seed=seed),
                          form, out, known)
    best = None  # (horizon, model)
    if binary:
        a, b = max(int(lo), 1), top
        while a <= b:
            mid = (a + b) // 2
            ok, model = attempt(mid)
            if ok is None:
                return out
            if ok:
                best, b = (mid, model), mid - 1
            else:
                a = mid + 1
    else:
        for h in range(max(int(lo), 1), top + 1):
            ok, model = attempt(h)
            if ok is None:
                return out
            if ok:
                best = (h, model)
                break
    if best is None:
        out["message"] = f"the LP delivers everything at no horizon up to {top}"
        return out
    out["bound"], out["model"] = best
    return out


def _lp_attempt(instance, formulation: TenFormulation, request, form, out, known):
    """``attempt(h)`` for :func:`lp_search`: (True / False: the relaxation at ``h`` is complete /
    proven incomplete, or None: undecided; the solved model when complete), recorded in ``out``.
    Each model is solved as ``request`` asks, by its deadline."""
    units = formulation.units(instance)  # one chunk orbit when symmetric, one commodity per source, ...
    left = request.deadline.left

    def attempt(h):
        if known is not None and h >= known:
            return True, None
        rem = left()
        if rem is not None and rem <= 0:
            out["message"] = f"time limit reached before the LP at horizon {h}"
            return None, None
        est = BUILD_S_PER_UNIT * units * h  # building and loading a model cannot be interrupted
        if rem is not None and est > rem:
            out["message"] = f"the LP at horizon {h} would take about {est:.3g} s to build and load ({rem:.3g} s left)"
            return None, None
        tb = time.perf_counter()
        model = _checked(lambda: formulation.build(instance, h, **form))
        out["build_s"] += time.perf_counter() - tb
        rem = left()
        if rem is not None and rem <= 0:
            out["message"] = f"time limit reached while building the LP at horizon {h}"
            return None, None
        res = backends.solve(model, request)
        out["solve_s"] += res.solve_s
        out["solver_status"] = res.status
        out["version"] = res.version or out["version"]
        out["solver"] = res.solver or out["solver"]
        complete = res.status == Status.FEASIBLE and formulation.bound(model) <= h  # a point delivering all proves it
        if res.status != Status.OPTIMAL and not complete:
            out["message"] = res.message or f"LP at horizon {h}: {res.status}"
            out["horizons"].append({"horizon": h, "status": res.status})
            return None, None
        ok = formulation.bound(model) <= h
        out["horizons"].append({"horizon": h, "status": res.status, "objective": res.objective, "complete": ok})
        return ok, (model if ok else None)

    return attempt


def _relaxation_run(formulation: TenFormulation):
    """The producer run of a relaxation (``ten-lp``): its lower bound on timesteps and a
    verified fractional schedule.

    The bound is the smallest horizon whose relaxation (for the TEN LP: the TACOS ILP of Won et
    al., TACOS, 2023, Section V-A, relaxed, with cumulative-send cuts) delivers everything,
    searched from the formulation's ``lower_bound`` upward (``--param binary=true``: binary
    search up to the recovery schedule's length). The solution at that horizon, and the same
    model re-solved after the formulation's ``refine`` (``--param polish=false`` skips it),
    give the schedules of the formulation's ``schedules`` (completed by shortest-path
    recovery, Section V-B, where needed). The one with the fewest timesteps is kept (on a tie
    the refined one; never longer than the pure recovery schedule); ``extra["candidates"]``
    lists them all. Status ``optimal`` when the schedule meets the
    bound, else ``feasible``.

    Allreduce: reduce_scatter then allgather, each as above, concatenated; the bound is the
    larger phase bound (an allreduce schedule contains both a reduce_scatter and an
    allgather), so the decomposition is rarely proven optimal.
    """

    def run(instance, options: Options) -> Outcome:
        _check_size(formulation, instance)
        phases = _checked(lambda: _phases(instance))
        if phases is not None:
            return _relaxation_allreduce(run, phases, options)
        params = dict(options.params)
        params.pop("lp_bound", None)
        do_refine = _flag(params, "polish", True) and formulation.refine is not None
        drv, form = drivers.split_params(params)
        form.pop("objective", None)
        clock = options.timer()
        solver = _lp_solver(options.solver)
        lb = _checked(lambda: formulation.lower_bound(instance, timestep=form.get("timestep")))
        rdata, rrows, rsteps = drivers.recovery_schedule(instance, form.get("timestep"),
                                                            form.get("switch_copy", ten.SWITCH_COPY))
        if rsteps == 0:  # nothing to deliver
            return Outcome(schedule=ten.schedule_from_rows(rdata, rrows), status=Status.OPTIMAL, objective=0.0,
                           bound=0.0, gap=0.0, units="timesteps", message="nothing to deliver", extra={"lp_bound": 0},
                           found_by="recovery")
        s = lp_search(instance, formulation, solver, form, lb, max(rsteps, lb), deadline=clock,
                      binary=bool(drv.get("binary")), threads=options.threads, seed=options.seed)
        extra = {"horizons": s["horizons"], "combinatorial_bound": lb, "recovery_steps": rsteps, "lp_bound": s["bound"],
                 "lp_bound_source": relaxation_source(formulation)}
        if s["bound"] is None or s["model"] is None:
            return _no_lp_bound(s, lb, extra)
        cands, refined, times, refine_status = _realise_all(formulation, s["model"], solver, options, do_refine, clock)
        recovery = (rdata, rrows, rsteps)
        return _best_relaxation_schedule(s, cands, refined, times, refine_status, recovery, extra)

    return run


def _no_lp_bound(s: dict, lb: int, extra: dict) -> Outcome:
    """No schedule: no horizon's relaxation delivered everything before the search stopped; the
    bound is one past the largest horizon proven too short (at least ``lb``)."""
    proven = max([lb] + [x["horizon"] + 1 for x in s["horizons"] if x.get("complete") is False])
    return Outcome(schedule=None, status=Status.NO_SOLUTION, bound=float(proven), units="timesteps",
                   build_s=s["build_s"], solve_s=s["solve_s"], solver=s["solver"], version=s["version"],
                   message=s["message"] or "no LP bound", extra=extra,
                   solver_status=s["solver_status"])


def _best_relaxation_schedule(s: dict, cands: list, refined, times, refine_status, recovery: tuple,
                              extra: dict) -> Outcome:
    """The outcome of the candidate with the fewest timesteps (on a tie the polished one, then
    the fewest sends), or the pruned recovery schedule ``recovery = (data, rows, steps)`` when
    every candidate is longer; ``optimal`` when it meets the LP bound ``s["bound"]``."""
    rdata, rrows, rsteps = recovery
    how, sched, short, which = min(cands, key=lambda x: (x[1].num_steps, x[3] != "polished", len(x[1])))
    found_by = f"lp-rounding@h={s['bound']}" + (f"+{how}" if short else "")
    if sched.num_steps > rsteps:
        how, sched = "recovery-only", ten.schedule_from_rows(rdata, ten.prune(rdata, rrows))
        found_by = "recovery"
    h, steps = s["bound"], sched.num_steps
    extra.update({
        "recovered_pairs": short, "completion": how, "lp_solution": which, "polished": refined,
        "denominator": int(sched.denom), "fractional_sends": int(((sched.hi - sched.lo) < sched.denom).sum()),
        "candidates": {f"{c[3]}+{c[0]}": c[1].num_steps for c in cands},
    })
    status = Status.OPTIMAL if steps <= h else Status.FEASIBLE
    msg = (f"fractional schedule meets the LP bound {h}" if status == Status.OPTIMAL
           else f"fractional schedule of {steps} timesteps; LP bound {h}; {short} pairs completed by {how}")
    return Outcome(schedule=sched, status=status, objective=float(steps), bound=float(h),
                   gap=(steps - h) / steps if steps else 0.0, units="timesteps",
                   build_s=s["build_s"] + times[0], solve_s=s["solve_s"] + times[1], solver=s["solver"],
                   version=s["version"], message=msg, extra=extra, found_by=found_by,
                   solver_status=refine_status or s["solver_status"])


def _realise_all(formulation: TenFormulation, model, solver: str, options: Options, do_refine: bool,
                 clock: Deadline):
    """Schedules of a solved complete relaxation as found and, with ``do_refine``, re-solved by
    ``clock`` after its ``refine``: ``(candidates (completion, schedule, pairs short, "arrivals" |
    "polished"), refined and re-solved, (extra build_s, extra solve_s), the re-solve's status)``."""
    cands = [(how, sched, short, "arrivals") for how, sched, short in formulation.schedules(model, drivers.recover)]
    if not do_refine:
        return cands, False, (0.0, 0.0), None
    tb = time.perf_counter()
    formulation.refine(model)
    build_s = time.perf_counter() - tb
    res = backends.solve(model, backends.Request(solver, clock, threads=options.threads, seed=options.seed))
    refined = res.status == Status.OPTIMAL and formulation.bound(model) <= ten_model(model).data.horizon
    if refined:
        cands += [(how, sched, short, "polished") for how, sched, short in formulation.schedules(model, drivers.recover)]
    return cands, refined, (build_s, res.solve_s), res.status


def _relaxation_allreduce(run, phases, options: Options) -> Outcome:
    """Allreduce for a relaxation: both phases, schedules concatenated, the larger bound."""
    outs = []
    clock = options.timer()
    for i, (name, sub) in enumerate(phases):  # each phase an equal share of what is left
        o = run(sub, replace(options, deadline=clock.share(1 / (len(phases) - i))))
        if o.schedule is None:
            o.message = f"{name} phase: {o.message}"
            return o
        outs.append(o)
    rs, ag = outs
    sched = concat(rs.schedule, ag.schedule, "allreduce")
    steps = sched.num_steps
    b = max(rs.bound, ag.bound)
    return Outcome(
        schedule=sched, status=Status.OPTIMAL if steps <= b else Status.FEASIBLE, objective=float(steps), bound=float(b),
        gap=(steps - b) / steps if steps else 0.0, units="timesteps", build_s=rs.build_s + ag.build_s,
        solve_s=rs.solve_s + ag.solve_s, solver=rs.solver, version=rs.version,
        message=(f"LP bound: max of reduce_scatter ({rs.bound:g}) and allgather ({ag.bound:g}); fractional "
                 f"reduce_scatter ({rs.objective:g}) + allgather ({ag.objective:g})"),
        extra={"lp_bound": int(b), "lp_bound_source": max((rs, ag), key=lambda o: o.bound).extra.get("lp_bound_source"),
               "phases": {"reduce_scatter": rs.extra, "allgather": ag.extra},
               "denominator": int(sched.denom),
               "fractional_sends": int(((sched.hi - sched.lo) < sched.denom).sum()),
               "recovered_pairs": rs.extra.get("recovered_pairs", 0) + ag.extra.get("recovered_pairs", 0)},
        found_by=_phase_found_by(rs, ag), solver_status=ag.solver_status,
    )


# ---- one producer per TEN formulation --------------------------------------------------------

BIG_NODES = 256  # from this many nodes, a TEN producer's default is time clustering in one-timestep windows
MIXED_CHUNKS = 4.0  # a largest chunk this many default timesteps long sets the TEN timestep


def instance_defaults(instance, params: dict, driver: str | None) -> tuple[str | None, dict, str]:
    """The driver and parameters a TEN producer runs an instance with when the run sets none:

    - from :data:`BIG_NODES` nodes, time clustering in windows of one timestep and no LP bound
      beside it (the horizon search's whole-horizon ILP and the LP do not fit a limit there;
      what the ``scale-exact`` suite sets: Won et al., TACOS, 2023, Section V-B clusters time the same
      way);
    - collectives of mixed chunk sizes whose largest chunk takes at least :data:`MIXED_CHUNKS`
      of the default timesteps (the cheapest link's cost of the smallest chunk) on the cheapest
      link: the largest chunk's time as the TEN timestep, so that a large chunk crosses a link
      in one timestep and the small ones share it (TACOS's Table V instances, Section VI).

    Returns ``(driver or None, params, why)``."""
    picked, why, pick = {}, [], None
    nodes = instance.topology.size
    if driver is None and nodes >= BIG_NODES:
        pick = "time-cluster"
        picked.update(window=1, lp_bound=False)
        why.append(f"{nodes:,} nodes: time clustering in one-timestep windows, no LP bound beside")
    sizes = sorted({c.chunk_bytes for c in instance.collectives})
    if params.get("timestep") is None and len(sizes) > 1:
        small = ten.link_delays(instance.topology, sizes, switches=True)[2]
        large = ten.link_delays(instance.topology, [sizes[-1]], switches=True)[2]
        if large >= MIXED_CHUNKS * small:
            picked["timestep"] = large
            why.append(f"mixed chunk sizes: the TEN timestep of the largest chunk ({sizes[-1]:,.0f} bytes), "
                       f"{large / small:.1f} of the smallest's")
    return pick, picked, "; ".join(why)


def compile_recovery() -> None:
    """Compile (or load from numba's cache) the shortest-path recovery kernel every TEN driver
    may call (Won et al., TACOS, 2023, Section V-B), on a 3-node ring allgather, before a run's
    clock starts."""
    from ...instances import generators
    from ...instances.instance import make_instance

    drivers.recovery_schedule(make_instance(generators.build("ring", {"nodes": 3}), "allgather"))


def producer(formulation) -> Producer:
    """The producer of a TEN formulation (a module or a :class:`TenFormulation`): the
    relaxation producer for ``ROLE = "relaxation"`` (horizon search by nature), the drivers'
    otherwise. Its schedules carry the formulation's name in ``meta["producer"]``."""
    f = ten_formulation(formulation)
    run = _relaxation_run(f) if f.is_relaxation else _with_driver(f)

    def named(instance, options: Options) -> Outcome:
        outcome = run(instance, options)
        if outcome.schedule is not None:
            outcome.schedule.meta["producer"] = f.name
        return outcome

    form = tuple(Param(*p) for p in f.params) if f.params is not None else ILP_PARAMS
    params = RELAXATION_PARAMS + form if f.is_relaxation else DRIVER_PARAMS + form + LP_BESIDE_PARAMS
    return Producer(f.name, "formulation", named, f.summary, uses_solver=True,
                    drivers=("horizon",) if f.is_relaxation else drivers.DRIVERS, params=params,
                    warm=compile_recovery, defaults=instance_defaults)


def ten_producers() -> list[Producer]:
    """A producer for every formulation module with ``DRIVER_FAMILY = "ten"`` (found by the
    registry of :mod:`collsynth.formulations`, so a new module needs no change here)."""
    return [producer(f) for _, f in sorted(ten_family().items())]


PRODUCERS = ten_producers()
