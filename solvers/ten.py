"""The TEN formulation producers: ``ten-ilp``, ``ten-lp``, ``ten-ilp-nocongestion``.

Each runs a formulation of :mod:`collsynth.formulations` through a driver of
:mod:`collsynth.solvers.drivers` on any backend of :mod:`collsynth.solvers.backends`
(``--solver``, ``--driver horizon|early-stop|time-cluster``, ``--time-limit``, ``--gap``,
``--param k=v`` for formulation and driver parameters such as ``objective=makespan``,
``binary=true``, ``persistent=true``, ``window=3``, ``horizon=9``).

Collectives: non-combining ones directly; reduce and reduce_scatter as the dual on the
transposed topology, reversed (inside the formulation); allreduce as reduce_scatter then
allgather, two runs concatenated (its bound is the larger phase bound: the decomposition is
not proven optimal for allreduce). Objectives and bounds are TEN timesteps.
"""

from __future__ import annotations

import time
from dataclasses import replace

from ..formulations import registry, ten_ilp, ten_lp
from ..tens.schedule import concat
from . import backends, drivers
from .producers import Options, Outcome, Producer, Unsupported


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
    except ten_ilp.NotSupported as e:
        raise Unsupported(str(e)) from None


def _with_driver(formulation):
    def run(instance, options: Options) -> Outcome:
        phases = _checked(lambda: _phases(instance))
        if phases is None:
            return _checked(lambda: drivers.run(options.driver, instance, formulation, options))
        outs = []
        t0 = time.perf_counter()
        for name, sub in phases:
            left = None if options.time_limit is None else max(1.0, options.time_limit - (time.perf_counter() - t0))
            o = _checked(lambda: drivers.run(options.driver, sub, formulation, replace(options, time_limit=left)))
            if o.schedule is None:
                o.message = f"{name} phase: {o.message}"
                return o
            outs.append(o)
        rs, ag = outs
        sched = concat(rs.schedule, ag.schedule, "allreduce")
        steps = sched.num_steps
        bound = max(rs.bound or 0, ag.bound or 0)
        return Outcome(
            sched, "feasible", float(steps), float(bound), (steps - bound) / steps if steps else 0.0,
            "timesteps", rs.build_s + ag.build_s, rs.solve_s + ag.solve_s, rs.solver, rs.version, None,
            f"reduce_scatter ({rs.status}, {rs.objective:g}) + allgather ({ag.status}, {ag.objective:g}); "
            "the decomposition is not proven optimal for allreduce",
            {"phases": {"reduce_scatter": rs.extra, "allgather": ag.extra}},
        )

    return run


def _lp_run(instance, options: Options) -> Outcome:
    """Smallest horizon whose LP relaxation delivers everything: a lower bound on timesteps.

    Allreduce: the larger of its reduce_scatter and allgather LP bounds (an allreduce schedule
    contains both a reduce_scatter and an allgather, so each bound holds); no schedule.
    """
    phases = _checked(lambda: _phases(instance))
    if phases is not None:
        outs = [_lp_run(sub, options) for _, sub in phases]
        for o in outs:
            if o.status != "optimal":
                return o
        b = max(o.bound for o in outs)
        return Outcome(None, "optimal", None, b, None, "timesteps", sum(o.build_s for o in outs),
                       sum(o.solve_s for o in outs), outs[0].solver, outs[0].version, None,
                       f"LP lower bound: max of reduce_scatter ({outs[0].bound:g}) and allgather ({outs[1].bound:g})",
                       {"phases": [o.extra for o in outs]})
    drv, form = drivers.split_params(dict(options.params))
    form.pop("objective", None)
    t0 = time.perf_counter()
    lb = _checked(lambda: ten_lp.lower_bound(instance, timestep=form.get("timestep")))
    hi = drivers.recovery_schedule(instance, form.get("timestep"))[2]
    build_s = solve_s = 0.0
    version, tried = "", []
    h = max(lb, 1)
    model = res = None
    while h <= max(hi, lb):
        tb = time.perf_counter()
        model = _checked(lambda: ten_lp.build(instance, h, **form))
        build_s += time.perf_counter() - tb
        left = None if options.time_limit is None else max(0.5, options.time_limit - (time.perf_counter() - t0))
        res = backends.solve(model, options.solver, time_limit=left, threads=options.threads, seed=options.seed)
        solve_s += res.solve_s
        version = res.version or version
        if res.status != "optimal":
            return Outcome(None, res.status, None, float(h), None, "timesteps", build_s, solve_s, res.solver,
                           version, None, res.message or f"LP at horizon {h}: {res.status}", {"horizons": tried})
        tried.append({"horizon": h, "objective": res.objective})
        if ten_lp.complete(model):
            break
        h += 1
    sched = ten_lp.extract(model) if ten_lp.integral(model) else None
    msg = ("LP lower bound; the LP solution is integral, so it is also a schedule" if sched is not None
           else "LP lower bound only: the LP solution is fractional (no schedule)")
    extra = {"horizons": tried, "combinatorial_bound": lb}
    if sched is None:
        extra["flows"] = len(ten_lp.fractional(model))
    return Outcome(sched, "optimal", float(h), float(h), 0.0, "timesteps", build_s, solve_s, res.solver,
                   version, None, msg, extra)


SUMMARIES = {
    "ten-ilp": "TACOS ILP on the time-expanded network (exact with the horizon driver)",
    "ten-lp": "LP relaxation of the TEN ILP: a polynomial lower bound on timesteps",
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
            out.append(Producer(name, "formulation", _lp_run, summary, uses_solver=True, drivers=("horizon",)))
        else:
            out.append(Producer(name, "formulation", _with_driver(module), summary,
                                uses_solver=True, drivers=drivers.DRIVERS))
    return out


PRODUCERS = ten_producers()
