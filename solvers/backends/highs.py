"""The ``highs`` backend: HiGHS, embedded; the default.

Outside a session the model is compiled into one sparse matrix and passed to HiGHS in one call
(:mod:`.highs_direct`, :func:`solve`); a persistent :class:`~collsynth.solvers.backends.Session`
uses Pyomo's v2 (persistent) interface instead (:func:`solve_v2`, shared with Gurobi).
"""

from __future__ import annotations

import time
from typing import Any

import pyomo.core as pe

from ...tens.status import Status
from . import highs_direct
from .request import Request, SolveResult, finite, model_stats, start_values, with_note

STATUS = {
    "kOptimal": ("optimal", ""), "kModelEmpty": ("optimal", ""),
    "kInfeasible": ("infeasible", "the model is infeasible"),
    "kUnboundedOrInfeasible": ("infeasible", "the model is infeasible or unbounded"),
    "kUnbounded": ("error", "error: the model is unbounded"),
}
LIMITS = ("kTimeLimit", "kIterationLimit", "kInterrupt", "kHighsInterrupt", "kObjectiveBound",
          "kObjectiveTarget", "kSolutionLimit", "kMemoryLimit")


def solve(model, request: Request) -> SolveResult:
    """HiGHS on the model compiled into one matrix (:mod:`.highs_direct`); ``build_s`` is the
    compiling and loading, ``solve_s`` HiGHS' run."""
    if not highs_direct.available()[0]:
        return SolveResult(Status.SKIPPED, solver="highs", message="skipped: highs not installed")
    start = start_values(model) if request.warm_start else None
    r = highs_direct.run(model, request, start=start)
    status, message = STATUS.get(r.model_status, (None, ""))
    if status is None:
        if r.has_solution:
            status, message = Status.FEASIBLE, f"limit hit ({r.model_status}); incumbent kept"
        elif r.model_status in LIMITS:
            status, message = Status.NO_SOLUTION, f"limit hit ({r.model_status}) before any solution"
        else:
            status, message = Status.ERROR, f"error: HiGHS reported {r.model_status}"
    if status == Status.OPTIMAL and not r.has_solution:
        status, message = Status.ERROR, "error: HiGHS reported optimal without a solution"
    if request.warm_start and r.start_values:
        message = with_note(message, f"MIP start of {r.start_values} values passed")
    obj = r.objective if status in (Status.OPTIMAL, Status.FEASIBLE) else None
    bound = r.bound if r.bound is not None else (obj if status == Status.OPTIMAL else None)
    return SolveResult(status=status, objective=finite(obj), bound=finite(bound), build_s=r.load_s,
                       solve_s=r.run_s, solver="highs", version=r.version, nodes=r.nodes, message=message)


def v2_status(results) -> tuple[str, str]:
    """A Pyomo v2 solver's termination and solution status as a backend status and message."""
    from pyomo.contrib.solver.common.results import SolutionStatus, TerminationCondition as TC

    tc, ss = results.termination_condition, results.solution_status
    has = ss in (SolutionStatus.optimal, SolutionStatus.feasible)
    if tc == TC.convergenceCriteriaSatisfied and has:
        return "optimal", ""
    if tc in (TC.provenInfeasible, TC.locallyInfeasible):
        return "infeasible", "the model is infeasible"
    if tc == TC.infeasibleOrUnbounded:
        return "infeasible", "the model is infeasible or unbounded"
    if tc == TC.licensingProblems:
        return "skipped", "skipped: licence problem"
    if tc == TC.error:
        return "error", "error: solver reported an error"
    if has:
        return "feasible", f"limit hit ({tc.name}); incumbent kept"
    if tc in (TC.maxTimeLimit, TC.iterationLimit, TC.interrupted, TC.objectiveLimit):
        return "no-solution", f"limit hit ({tc.name}) before any solution"
    return "no-solution", f"no solution ({tc.name})"


def _hook(opt, model, request: Request):
    """Wrap the Pyomo HiGHS interface's ``_solve`` (called once the model is loaded into
    ``highspy.Highs``, just before ``run``) to (a) cut HiGHS' time limit to what the request
    has left (loading takes seconds HiGHS' clock does not count), interrupting HiGHS then
    (:func:`.highs_direct.interrupted_at`), (b) with ``warm_start``, pass the model's current values to ``Highs.setSolution`` (columns
    from the interface's map ``id(var) -> column``); and its ``add_block`` to add all the
    model's variables in one batch first (much faster loading). Returns an undo function and
    a dict filled with what was passed."""
    import numpy as np

    info: dict[str, Any] = {}
    orig = opt._solve
    orig_add_block = opt.add_block

    def add_block(block):
        # one batch of columns instead of one per constraint (Pyomo adds the new variables of
        # each constraint separately, each with a changeColsIntegrality call: most of the
        # loading time of a TEN model)
        seen, new = set(), []
        for v in block.component_data_objects(pe.Var, descend_into=True, active=True):
            if id(v) not in seen and id(v) not in opt._referenced_variables:
                seen.add(id(v))
                new.append(v)
        if new:
            opt.add_variables(new)
        return orig_add_block(block)

    def _solve():
        stop = request.solver_deadline()
        opt._active_config.time_limit = stop.left() if opt._active_config.time_limit is not None else None
        if request.warm_start:
            colmap = opt._pyomo_var_to_solver_var_map
            idx, val = [], []
            for v, x in start_values(model):
                j = colmap.get(id(v))
                if j is not None:
                    idx.append(j)
                    val.append(x)
            if idx:
                st = opt._solver_model.setSolution(len(idx), np.asarray(idx, np.int32), np.asarray(val, np.float64))
                info["status"] = str(st)
            info["values"] = len(idx)
        t0 = time.perf_counter()
        try:
            with highs_direct.interrupted_at(opt._solver_model, stop):
                return orig()
        finally:
            info["run_s"] = time.perf_counter() - t0

    opt._solve = _solve
    opt.add_block = add_block

    def undo():
        if opt.__dict__.get("_solve") is _solve:
            del opt.__dict__["_solve"]
        if opt.__dict__.get("add_block") is add_block:
            del opt.__dict__["add_block"]

    return undo, info


def solve_v2(model, request: Request, handle, options: dict | None = None) -> SolveResult:
    """Solve through a Pyomo v2 solver ``handle`` (HiGHS or Gurobi, persistent or direct)."""
    name = request.name
    if not handle.available():
        return SolveResult(Status.SKIPPED, solver=name, message=f"skipped: {name} not installed")
    version = ".".join(map(str, handle.version()))
    solver_options = dict(options or {})
    kwargs: dict[str, Any] = {}
    undo, start_info = None, None
    if name == "highs":
        solver_options.setdefault("random_seed", int(request.seed))
        if model_stats(model)["integer"] == 0:
            # the TEN LPs are highly degenerate: HiGHS' simplex stalls where its IPM does not
            solver_options.setdefault("solver", "ipm")
        undo, start_info = _hook(handle, model, request)
    elif request.warm_start and name == "gurobi":
        kwargs["warmstart_discrete_vars"] = True
    t0 = time.perf_counter()
    try:
        results = handle.solve(model, load_solutions=False, raise_exception_on_nonoptimal_result=False,
                               time_limit=request.seconds(), threads=request.threads, rel_gap=request.gap,
                               solver_options=solver_options, **kwargs)
    finally:
        if undo is not None:
            undo()
    elapsed = time.perf_counter() - t0
    status, message = v2_status(results)
    if start_info is not None and request.warm_start and start_info.get("values"):
        message = with_note(message, f"MIP start of {start_info['values']} values passed")
    if status in (Status.OPTIMAL, Status.FEASIBLE):
        results.solution_loader.load_vars()
    solve_s = _solver_seconds(results, start_info, elapsed)
    obj = finite(results.incumbent_objective) if status in (Status.OPTIMAL, Status.FEASIBLE) else None
    bound = finite(results.objective_bound)
    if status == Status.OPTIMAL and bound is None:
        bound = obj
    return SolveResult(status=status, objective=obj, bound=bound, build_s=max(0.0, elapsed - solve_s),
                       solve_s=solve_s, solver=name, version=version, nodes=_nodes(results), message=message)


def _solver_seconds(results, start_info: dict | None, elapsed: float) -> float:
    """The solver's own time: HiGHS' run when the hook timed it (loading the model is build
    time), else what the solver reported, else the whole call."""
    if start_info is not None and "run_s" in start_info:
        return start_info["run_s"]
    info = results.timing_info
    for key in ("highs_time", "gurobi_time", "solver_wall_time"):
        seconds = finite(info.get(key)) if key in info else None
        if seconds is not None:
            return seconds
    return elapsed


def _nodes(results) -> int | None:
    """The branch-and-bound nodes a v2 solver reported (None when it did not)."""
    extra = results.extra_info
    for key in ("mip_node_count", "NodeCount"):
        if key in extra:
            try:
                nodes = int(extra[key])
            except (TypeError, ValueError):
                continue
            return nodes if nodes >= 0 else None
    return None
