"""The TEN formulation producers: ``ten-ilp``, ``ten-lp``, ``ten-ilp-nocongestion``.

Each runs a formulation of :mod:`collsynth.formulations` through a driver of
:mod:`collsynth.solvers.ten.drivers` on any backend of :mod:`collsynth.solvers.backends`
(``--solver``, ``--driver horizon|early-stop|time-cluster``, ``--time-limit``, ``--gap``,
``--param k=v`` for formulation and driver parameters such as ``objective=makespan``,
``binary=true``, ``persistent=true``, ``window=3``, ``horizon=9``).

Collectives: non-combining ones directly; reduce and reduce_scatter as the dual on the
transposed topology, reversed (inside the formulation); allreduce as reduce_scatter then
allgather, two runs concatenated (its bound is the larger phase bound: the decomposition is
not proven optimal for allreduce). Objectives and bounds are TEN timesteps.

``ten-lp`` solves the LP relaxation (:mod:`collsynth.formulations.ten_lp`): its bound (the
smallest horizon whose LP delivers everything) and a verified fractional schedule realised
from the LP's amounts (``--param polish=false``, ``cuts=false`` to switch off the re-solve
for little, early traffic and the cumulative-send cuts). Every other TEN producer reports
that LP bound beside its result (``extra["lp_bound"]``, at most ~20% of the time limit;
``--param lp_bound=false`` skips it) and, when its schedules respect link capacity, proves
with it: the outcome's bound is the larger of the driver's and the LP's.
"""

from __future__ import annotations

import time
from dataclasses import replace

from ... import InputError
from ...formulations import registry, ten_ilp, ten_lp
from ...tens import ten
from ...tens.schedule import concat
from .. import backends
from . import drivers
from ..producers import Options, Outcome, Param, Producer, Unsupported

# parameters of the drivers (solvers.ten.drivers)
DRIVER_PARAMS = (
    Param("binary", bool, False, "horizon search: binary search up to the best known schedule instead of upward"),
    Param("persistent", bool, False, "horizon search: re-solve one model built at the largest horizon (HiGHS, Gurobi)"),
    Param("max_horizon", int, None, "horizon search: largest horizon tried (default: the best known schedule's length)"),
    Param("warm", bool, True, "horizon search, early-stop: warm-start the ILP from time clustering"),
    Param("warm_share", float, drivers.WARM_SHARE, "share of the time limit the warm-start time clustering may use"),
    Param("horizon", int, None, "early-stop: the horizon solved (default: the lower bound)"),
    Param("window", int, None, "time-cluster: timesteps per window (default: max(2, longest link delay))"),
    Param("lookahead", int, None, "time-cluster: timesteps after a window in which relays count (default: TEN diameter)"),
)
# parameters of the TEN ILP (formulations.ten_ilp.build); a formulation module may declare its
# own as PARAMS, a tuple of (name, type, default, help)
ILP_PARAMS = (
    Param("objective", ten_ilp.OBJECTIVES, "arrivals", "arrivals (pairs held at the horizon) or makespan"),
    Param("capacity", bool, True, "one chunk per link per timestep (false: the congestion-blind model)"),
    Param("weights", list[float], None, "one weight per concurrent collective in the arrivals objective"),
    Param("timestep", float, None, "seconds per TEN timestep (default: the cheapest link's cost per chunk)"),
)
# the TEN LP bound computed beside every ILP result
LP_BESIDE_PARAMS = (
    Param("lp_bound", bool, True, "compute the TEN LP bound beside the result (about 20% of the time limit)"),
    Param("cuts", bool, True, "cumulative-send cuts in the TEN LP"),
)
# ten-lp
TEN_LP_PARAMS = (
    Param("binary", bool, False, "binary search for the LP bound (up to the recovery schedule's length)"),
    Param("polish", bool, True, "re-solve the LP for little, early traffic before realising the schedule"),
    Param("cuts", bool, True, "cumulative-send cuts in the TEN LP"),
    Param("capacity", bool, True, "one chunk per link per timestep"),
    Param("weights", list[float], None, "one weight per concurrent collective"),
    Param("timestep", float, None, "seconds per TEN timestep (default: the cheapest link's cost per chunk)"),
)


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


def _capacity_blind(formulation, form: dict) -> bool:
    """Whether the formulation's timesteps ignore link capacity (then the congested LP bound,
    which bounds every capacity-respecting schedule, says nothing about its horizon)."""
    cap = form.get("capacity", True)
    return getattr(formulation, "NAME", "") == "ten-ilp-nocongestion" or cap is False or str(cap).lower() in ("false", "0", "no")


def _lp_beside(instance, formulation, options: Options, form: dict, outcome: Outcome, budget: float | None) -> Outcome:
    """Compute the TEN LP bound for one (non-allreduce) run and fold it into its outcome.

    The congested LP (:func:`lp_search`, the real ``ten_lp`` whatever the formulation) bounds
    every schedule that respects link capacity, so for such formulations the outcome's bound
    becomes ``max(driver bound, LP bound)`` (status ``optimal`` when the schedule meets it) and
    the search stops below the schedule's length (at that length the LP is complete). For a
    capacity-blind formulation (no-congestion) it is only recorded. ``extra["lp_bound"]`` is
    None, with ``lp_bound_note`` saying why, when it did not finish within ``budget`` seconds.
    """
    blind = _capacity_blind(formulation, form)
    lp_form = {k: v for k, v in form.items() if k in ("timestep", "cuts")}
    t0 = time.perf_counter()
    steps = None if outcome.schedule is None else outcome.schedule.num_steps
    known = steps if (steps is not None and not blind) else None
    try:
        lb = ten_lp.lower_bound(instance, timestep=lp_form.get("timestep"))
        hi = known if known is not None else drivers.recovery_schedule(instance, lp_form.get("timestep"))[2]
    except ten.NotSupported as e:
        outcome.extra["lp_bound"] = None
        outcome.extra["lp_bound_note"] = f"not computed: {e}"
        return outcome
    solver = _lp_solver(options.solver)
    for attempt in (solver, "highs"):
        left = None if budget is None else budget - (time.perf_counter() - t0)
        s = lp_search(instance, attempt, lp_form, lb, max(hi, lb), time_limit=left, known=known,
                      threads=options.threads, seed=options.seed)
        trouble = any(x["status"] in ("skipped", "error") for x in s["horizons"])
        if s["bound"] is not None or not trouble or backends.canonical(attempt) == "highs":
            break  # else: the run's solver could not take the LP (licence, crash): HiGHS can
    outcome.extra["lp_bound_solver"] = s["solver"]
    outcome.extra["lp_bound"] = s["bound"]
    outcome.extra["lp_bound_s"] = round(time.perf_counter() - t0, 4)
    outcome.extra["lp_bound_horizons"] = [x["horizon"] for x in s["horizons"]]
    if s["bound"] is None:
        outcome.extra["lp_bound_note"] = f"not finished: {s['message']}" + (
            f" (budget {budget:.3g} s)" if budget is not None else "")
        return outcome
    if blind:
        outcome.extra["lp_bound_note"] = ("the congested LP bound; this formulation ignores link capacity, "
                                          "so it does not bound its timesteps")
        return outcome
    b = float(s["bound"])
    if outcome.bound is None or b > outcome.bound:
        if steps is not None:
            b = min(b, float(steps))
        outcome.bound = b
        if outcome.objective is not None and outcome.objective > 0:
            outcome.gap = max(0.0, (outcome.objective - b) / outcome.objective)
        if steps is not None and outcome.status == "feasible" and steps <= b:
            outcome.status = "optimal"
            outcome.message = f"{outcome.message}; optimal: meets the TEN LP bound {s['bound']}".lstrip("; ")
    return outcome


def _with_driver(formulation):
    def run(instance, options: Options) -> Outcome:
        params = dict(options.params)
        want_lp = _flag(params, "lp_bound", True)
        params.pop("polish", None)
        cuts = _flag(params, "cuts", True)  # for the LP bound; the ILPs take no cuts
        options = replace(options, params=params)
        budget = None if options.time_limit is None else 0.2 * options.time_limit
        drive = options if budget is None or not want_lp else replace(options, time_limit=options.time_limit - budget)
        form = dict(drivers.split_params(params)[1], cuts=cuts)
        phases = _checked(lambda: _phases(instance))
        if phases is None:
            o = _checked(lambda: drivers.run(drive.driver, instance, formulation, drive))
            if want_lp:
                o = _lp_beside(instance, formulation, options, form, o, budget)
            return o
        outs = []
        t0 = time.perf_counter()
        for name, sub in phases:
            left = None if drive.time_limit is None else max(1.0, drive.time_limit - (time.perf_counter() - t0))
            o = _checked(lambda: drivers.run(drive.driver, sub, formulation, replace(drive, time_limit=left)))
            if o.schedule is None:
                o.message = f"{name} phase: {o.message}"
                return o
            outs.append(o)
        if want_lp:
            for (name, sub), o in zip(phases, outs):
                _lp_beside(sub, formulation, options, form, o, None if budget is None else budget / 2)
        rs, ag = outs
        sched = concat(rs.schedule, ag.schedule, "allreduce")
        steps = sched.num_steps
        bound = max(rs.bound or 0, ag.bound or 0)
        extra = {"phases": {"reduce_scatter": rs.extra, "allgather": ag.extra}}
        if want_lp:
            lps = [rs.extra.get("lp_bound"), ag.extra.get("lp_bound")]
            extra["lp_bound"] = None if None in lps else max(lps)
            if extra["lp_bound"] is None:
                extra["lp_bound_note"] = "a phase's LP bound did not finish"
        status = "optimal" if steps <= bound else "feasible"
        return Outcome(
            sched, status, float(steps), float(bound), (steps - bound) / steps if steps else 0.0,
            "timesteps", rs.build_s + ag.build_s, rs.solve_s + ag.solve_s, rs.solver, rs.version, None,
            f"reduce_scatter ({rs.status}, {rs.objective:g}) + allgather ({ag.status}, {ag.objective:g}); "
            "the decomposition is not proven optimal for allreduce",
            extra, found_by=_phase_found_by(rs, ag), solver_status=ag.solver_status,
        )

    return run


def _phase_found_by(rs: Outcome, ag: Outcome) -> str:
    """``found_by`` of an allreduce made of a reduce_scatter and an allgather phase."""
    return f"reduce_scatter {rs.found_by}, allgather {ag.found_by}"


# ---- the LP: bound search, fractional schedule -------------------------------------------

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


def lp_search(instance, solver: str, form: dict, lo: int, hi: int, *, time_limit: float | None = None,
              known: int | None = None, binary: bool = False, threads: int = 1, seed: int = 0) -> dict:
    """The TEN LP lower bound: the smallest horizon in ``[lo, hi]`` whose LP delivers everything.

    LP completeness is monotone in the horizon, so the search is linear from ``lo`` (the
    combinatorial bound) or binary (``binary=True``). ``known``: a horizon at which the LP is
    known to be complete (a capacity-respecting schedule of that length exists), never
    solved. Returns ``{"bound", "model", "horizons", "build_s", "solve_s", "solver",
    "version", "message"}``; ``bound`` is None when the search did not finish (time limit,
    solver trouble), and ``model`` is the solved complete LP at ``bound`` (None when the
    bound came from ``known`` or ``lo == known``).
    """
    t0 = time.perf_counter()
    out = {"bound": None, "model": None, "horizons": [], "build_s": 0.0, "solve_s": 0.0,
           "solver": backends.canonical(solver), "version": "", "message": "", "solver_status": ""}
    top = hi if known is None else min(hi, known)
    lo = max(int(lo), 1)

    def left():
        return None if time_limit is None else time_limit - (time.perf_counter() - t0)

    units = sum(c.num_chunks for c in instance.collectives) * max(1, len(instance.topology.link_arrays))

    def attempt(h):
        """(True/False: the LP at h is complete / proven incomplete, or None: undecided; model)."""
        if known is not None and h >= known:
            return True, None
        rem = left()
        if rem is not None and rem <= 0:
            out["message"] = f"time limit reached before the LP at horizon {h}"
            return None, None
        est = BUILD_S_PER_UNIT * units * h  # building and loading a model cannot be interrupted
        if rem is not None and est > rem:
            out["message"] = (f"the LP at horizon {h} would take about {est:.3g} s to build and load "
                              f"({rem:.3g} s left)")
            return None, None
        tb = time.perf_counter()
        model = _checked(lambda: ten_lp.build(instance, h, **form))
        out["build_s"] += time.perf_counter() - tb
        rem = left()
        if rem is not None and rem <= 0:
            out["message"] = f"time limit reached while building the LP at horizon {h}"
            return None, None
        res = backends.solve(model, solver, time_limit=rem, threads=threads, seed=seed)
        out["solve_s"] += res.solve_s
        out["solver_status"] = res.status
        out["version"] = res.version or out["version"]
        out["solver"] = res.solver or out["solver"]
        if res.status != "optimal":
            out["message"] = res.message or f"LP at horizon {h}: {res.status}"
            out["horizons"].append({"horizon": h, "status": res.status})
            return None, None
        ok = ten_lp.complete(model)
        out["horizons"].append({"horizon": h, "status": res.status, "objective": res.objective, "complete": ok})
        return ok, (model if ok else None)

    best = None  # (horizon, model)
    if binary:
        a, b = lo, top
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
        for h in range(lo, top + 1):
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


def _lp_run(instance, options: Options) -> Outcome:
    """The TEN LP (``ten-lp``): its lower bound on timesteps and a verified fractional schedule.

    The bound is the smallest horizon whose LP relaxation (seed 001 V-A relaxed, with the
    cumulative-send cuts of :func:`collsynth.formulations.ten_lp.build`) delivers everything,
    searched from the combinatorial bound upward (``--param binary=true``: binary search up to
    the recovery schedule's length). The LP solution at that horizon, and the same LP
    re-solved for little, early traffic (:func:`~collsynth.formulations.ten_lp.polish`;
    ``--param polish=false`` skips it), have their amounts turned into pieces
    (:func:`~collsynth.formulations.ten_lp.walk`); the pairs a walk leaves short are
    completed two ways — :func:`~collsynth.formulations.ten_lp.repair` through idle capacity
    and whole-chunk shortest-path recovery after the horizon (:func:`drivers.recover`). The
    schedule with the fewest timesteps is kept (on a tie the polished one; never longer than
    the pure recovery schedule); ``extra["candidates"]`` lists them all.
    Status ``optimal`` when the schedule meets the LP bound, else ``feasible``.

    Allreduce: reduce_scatter then allgather, each as above, concatenated; the bound is the
    larger phase bound (an allreduce schedule contains both a reduce_scatter and an
    allgather), so the decomposition is rarely proven optimal.
    """
    phases = _checked(lambda: _phases(instance))
    if phases is not None:
        return _lp_allreduce(instance, phases, options)
    params = dict(options.params)
    params.pop("lp_bound", None)
    do_polish = _flag(params, "polish", True)
    drv, form = drivers.split_params(params)
    form.pop("objective", None)
    t0 = time.perf_counter()
    solver = _lp_solver(options.solver)
    lb = _checked(lambda: ten_lp.lower_bound(instance, timestep=form.get("timestep")))
    rdata, rrows, rsteps = drivers.recovery_schedule(instance, form.get("timestep"))
    if rsteps == 0:  # nothing to deliver
        return Outcome(ten.schedule_from_rows(rdata, rrows), "optimal", 0.0, 0.0, 0.0, "timesteps",
                       message="nothing to deliver", extra={"lp_bound": 0}, found_by="recovery")
    s = lp_search(instance, solver, form, lb, max(rsteps, lb), time_limit=options.time_limit,
                  binary=bool(drv.get("binary")), threads=options.threads, seed=options.seed)
    extra = {"horizons": s["horizons"], "combinatorial_bound": lb, "recovery_steps": rsteps, "lp_bound": s["bound"]}
    if s["bound"] is None or s["model"] is None:
        proven = max([lb] + [x["horizon"] + 1 for x in s["horizons"] if x.get("complete") is False])
        return Outcome(None, "no-solution", None, float(proven), None, "timesteps", s["build_s"], s["solve_s"],
                       s["solver"], s["version"], None, s["message"] or "no LP bound", extra,
                       solver_status=s["solver_status"])
    h, model = s["bound"], s["model"]
    build_s, solve_s = s["build_s"], s["solve_s"]
    solver_status = s["solver_status"]
    cands = _realise(model, h, "arrivals")  # the LP solution as found
    polished = False
    if do_polish:
        tb = time.perf_counter()
        ten_lp.polish(model)
        build_s += time.perf_counter() - tb
        left = None if options.time_limit is None else max(0.5, options.time_limit - (time.perf_counter() - t0))
        res = backends.solve(model, solver, time_limit=left, threads=options.threads, seed=options.seed)
        solve_s += res.solve_s
        solver_status = res.status
        polished = res.status == "optimal" and ten_lp.complete(model)
        if polished:
            cands += _realise(model, h, "polished")
    # fewest timesteps; on a tie the polished LP's schedule (the LP-guided fractional one)
    how, sched, short, which = min(cands, key=lambda x: (x[1].num_steps, x[3] != "polished", len(x[1])))
    found_by = f"lp-rounding@h={h}" + (f"+{how}" if short else "")
    if sched.num_steps > rsteps:
        how, sched = "recovery-only", ten.schedule_from_rows(rdata, ten.prune(rdata, rrows))
        found_by = "recovery"
    steps = sched.num_steps
    extra.update({
        "recovered_pairs": short, "completion": how, "lp_solution": which, "polished": polished,
        "denominator": int(sched.denom),
        "fractional_sends": int(((sched.hi - sched.lo) < sched.denom).sum()),
        "candidates": {f"{c[3]}+{c[0]}": c[1].num_steps for c in cands},
    })
    status = "optimal" if steps <= h else "feasible"
    msg = (f"fractional schedule meets the LP bound {h}" if status == "optimal"
           else f"fractional schedule of {steps} timesteps; LP bound {h}; {short} pairs completed by {how}")
    return Outcome(sched, status, float(steps), float(h), (steps - h) / steps if steps else 0.0, "timesteps",
                   build_s, solve_s, s["solver"], s["version"], None, msg, extra, found_by=found_by,
                   solver_status=solver_status)


def _realise(model, h: int, which: str) -> list:
    """Schedules from a solved complete LP: its walk completed by ``repair`` (when that
    reaches every pair) and by shortest-path recovery after the horizon. Each entry is
    ``(completion, schedule, pairs the walk left short, which LP solution)``."""
    first = ten_lp.walk(model)
    data = first.data
    short = int((data.post & ~first.held).sum())
    out = []
    w = ten_lp.repair(first)
    if not (data.post & ~w.held).any():
        out.append(("repair", ten_lp.to_schedule(w), short, which))
    w2 = ten_lp.walk(model)
    w2 = ten_lp.extend(w2, drivers.recover(data, w2.held, h))
    out.append(("recovery", ten_lp.to_schedule(w2), short, which))
    return out


def _lp_allreduce(instance, phases, options: Options) -> Outcome:
    """Allreduce for ``ten-lp``: both phases, schedules concatenated, the larger bound."""
    outs = []
    t0 = time.perf_counter()
    for name, sub in phases:
        left = None if options.time_limit is None else max(1.0, options.time_limit - (time.perf_counter() - t0))
        o = _lp_run(sub, replace(options, time_limit=left))
        if o.schedule is None:
            o.message = f"{name} phase: {o.message}"
            return o
        outs.append(o)
    rs, ag = outs
    sched = concat(rs.schedule, ag.schedule, "allreduce")
    steps = sched.num_steps
    b = max(rs.bound, ag.bound)
    status = "optimal" if steps <= b else "feasible"
    return Outcome(sched, status, float(steps), float(b), (steps - b) / steps if steps else 0.0, "timesteps",
                   rs.build_s + ag.build_s, rs.solve_s + ag.solve_s, rs.solver, rs.version, None,
                   f"LP bound: max of reduce_scatter ({rs.bound:g}) and allgather ({ag.bound:g}); fractional "
                   f"reduce_scatter ({rs.objective:g}) + allgather ({ag.objective:g})",
                   {"lp_bound": int(b), "phases": {"reduce_scatter": rs.extra, "allgather": ag.extra},
                    "denominator": int(sched.denom),
                    "fractional_sends": int(((sched.hi - sched.lo) < sched.denom).sum()),
                    "recovered_pairs": rs.extra.get("recovered_pairs", 0) + ag.extra.get("recovered_pairs", 0)},
                   found_by=_phase_found_by(rs, ag), solver_status=ag.solver_status)


SUMMARIES = {
    "ten-ilp": "TACOS ILP on the time-expanded network (exact with the horizon driver)",
    "ten-lp": "LP relaxation of the TEN ILP: a polynomial lower bound on timesteps and a fractional schedule",
    "ten-ilp-nocongestion": "TEN ILP without link capacity (TACCL-like baseline), priced with congestion",
}


def ten_producers() -> list[Producer]:
    """A producer for every formulation module with ``DRIVER_FAMILY = "ten"`` (found by the
    registry of :mod:`collsynth.formulations`, so a new module needs no change here)."""
    out = []
    for name, module in sorted(registry().items()):
        if getattr(module, "DRIVER_FAMILY", None) != "ten":
            continue
        summary = SUMMARIES.get(name) or (module.__doc__ or name).strip().splitlines()[0]
        if name == "ten-lp":
            out.append(Producer(name, "formulation", _lp_run, summary, uses_solver=True, drivers=("horizon",),
                                params=TEN_LP_PARAMS))
        else:
            form = tuple(Param(*p) for p in module.PARAMS) if hasattr(module, "PARAMS") else ILP_PARAMS
            out.append(Producer(name, "formulation", _with_driver(module), summary,
                                uses_solver=True, drivers=drivers.DRIVERS, params=DRIVER_PARAMS + form + LP_BESIDE_PARAMS))
    return out


PRODUCERS = ten_producers()
