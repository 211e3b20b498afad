"""Any other solver Pyomo knows (``cbc``, ``glpk``, a ``scip`` executable, ...) by name, through
Pyomo's legacy ``SolverFactory``, when installed. The solver gets the request's time (whole
seconds, rounded down, for GLPK) as its own time limit where Pyomo knows the option's name."""

from __future__ import annotations

import math

import pyomo.core as pe

from ...tens.status import Status
from .request import Request, SolveResult, finite, solver_plugins

TIME_OPTION = {"cbc": "sec", "glpk": "tmlim", "scip": "limits/time", "cplex": "timelimit"}
GAP_OPTION = {"cbc": "ratio", "glpk": "mipgap", "scip": "limits/gap", "cplex": "mipgap"}


def available(name: str) -> tuple[bool, str]:
    """Whether Pyomo's legacy factory can run solver ``name`` here."""
    try:
        s = solver_plugins().SolverFactory(name)
        ok = s is not None and s.available(exception_flag=False)
    except Exception:  # noqa: BLE001
        ok = False
    return (True, f"{name} (pyomo)") if ok else (False, f"{name} not installed")


def solve(model, request: Request) -> SolveResult:
    """Solve ``model`` with the legacy Pyomo solver ``request.name``."""
    import time

    from pyomo.opt import SolverStatus, TerminationCondition as TC

    name = request.name
    if not available(name)[0]:
        return SolveResult(Status.SKIPPED, solver=name, message=f"skipped: {name} not installed")
    opt = solver_plugins().SolverFactory(name)
    seconds = request.seconds()
    if seconds is not None and name in TIME_OPTION:
        opt.options[TIME_OPTION[name]] = math.floor(seconds) if name == "glpk" else seconds
    if request.gap is not None and name in GAP_OPTION:
        opt.options[GAP_OPTION[name]] = request.gap
    kwargs = {}
    if request.warm_start and getattr(opt, "warm_start_capable", lambda: False)():
        kwargs["warmstart"] = True
    t0 = time.perf_counter()
    results = opt.solve(model, load_solutions=False, **kwargs)
    elapsed = time.perf_counter() - t0
    tc = results.solver.termination_condition
    has = len(results.solution) > 0
    if tc == TC.optimal and has:
        status, msg = Status.OPTIMAL, ""
    elif tc in (TC.infeasible, TC.infeasibleOrUnbounded):
        status, msg = Status.INFEASIBLE, "the model is infeasible"
    elif has:
        status, msg = Status.FEASIBLE, f"limit hit ({tc}); incumbent kept"
    elif results.solver.status == SolverStatus.error:
        status, msg = Status.ERROR, f"error: {name} reported {tc}"
    else:
        status, msg = Status.NO_SOLUTION, f"no solution ({tc})"
    obj, bound = _objective_and_bound(model, results) if status in (Status.OPTIMAL, Status.FEASIBLE) else (None, None)
    if status == Status.OPTIMAL and bound is None:
        bound = obj
    return SolveResult(status=status, objective=obj, bound=bound, solve_s=elapsed, solver=name, message=msg)


def _objective_and_bound(model, results) -> tuple[float | None, float | None]:
    """Load the solution into ``model``; its objective value and the solver's bound."""
    model.solutions.load_from(results)
    obj = next((float(pe.value(o)) for o in model.component_data_objects(pe.Objective, active=True)), None)
    maximize = any(o.sense == pe.maximize for o in model.component_data_objects(pe.Objective, active=True))
    try:
        p = results.problem[0]
        return obj, finite(p.upper_bound if maximize else p.lower_bound)
    except Exception:  # noqa: BLE001
        return obj, None
