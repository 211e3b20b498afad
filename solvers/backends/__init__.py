"""Solver backends: one call solves a Pyomo model on any solver and returns a uniform result.

:func:`solve` takes a solver-agnostic Pyomo ``ConcreteModel`` (see :mod:`collsynth.formulations`)
and limits (time, relative gap, threads, seed) and returns a :class:`SolveResult` with status
``optimal`` / ``feasible`` (a limit was hit, the incumbent is kept) / ``infeasible`` /
``no-solution`` / ``error`` / ``skipped`` (licence limit, solver not installed, wrong model
class). Whenever a solution exists its values are loaded into the Pyomo model, so a
formulation's ``extract(model)`` reads them directly (``formulations/__init__.py``).

Backends:

- ``highs``: HiGHS, embedded; the default. The model is compiled into one sparse matrix and
  passed to HiGHS in one call (:mod:`collsynth.solvers.backends.highs_direct`); a persistent
  :class:`Session` uses Pyomo's v2 (persistent) interface instead.
- ``gurobi``: Gurobi through Pyomo's v2 ``gurobi_direct``; the bundled size-limited licence
  refuses models over 2000 variables or constraints (error 10010): counted before solving and
  caught at solve, both reported as ``skipped: licence size limit``.
- ``cpsat``, ``scip``, ``glop``, ``pdlp``: OR-Tools in a CHILD process (highspy and ortools
  cannot share one process): the model is written as MPS with symbolic names, solved by
  :mod:`collsynth.solvers.backends.ortools_worker`, and the values are mapped back by name. The child
  has a wall-clock deadline; a killed or crashed child is a recorded ``error``, never a dead
  parent. CP-SAT is refused for models with continuous variables (it would round them);
  GLOP and PDLP are refused for models with integer variables (they are LP solvers).
- any other solver Pyomo knows (``cbc``, ``glpk``, ``scip`` executables, ...) by name through
  ``pyomo.environ.SolverFactory``, when installed.

>>> import pyomo.environ as pe
>>> m = pe.ConcreteModel(); m.x = pe.Var([0, 1], domain=pe.Binary)
>>> m.c = pe.Constraint(expr=m.x[0] + m.x[1] <= 1)
>>> m.o = pe.Objective(expr=m.x[0] + 2 * m.x[1], sense=pe.maximize)
>>> r = solve(m, "highs"); (r.status, r.objective, m.x[1].value)
('optimal', 2.0, 1.0)
"""

from __future__ import annotations

import importlib
import json
import logging
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from types import ModuleType
from typing import Any

import pyomo.core as pe

from ...limits import TimeLimitReached, seconds_left, shielded
from ..backend_names import ALIASES, KNOWN, canonical, check_name, pyomo_names  # noqa: F401 - re-exported
from . import highs_direct


def _not_a_time_limit(record: logging.LogRecord) -> bool:
    """Drop Pyomo's "Constructing component ... failed" log of a build the run's deadline
    stopped (:class:`~collsynth.limits.TimeLimitReached`): the row says where the run stopped."""
    return not any(a == TimeLimitReached.__name__ or isinstance(a, TimeLimitReached) for a in record.args or ())


logging.getLogger("pyomo.core").addFilter(_not_a_time_limit)

STATUSES = ("optimal", "feasible", "infeasible", "no-solution", "error", "skipped")
ORTOOLS = {"cpsat": "sat", "scip": "scip", "glop": "glop", "pdlp": "pdlp"}
GUROBI_LIMIT = 2000  # the bundled (size-limited) Gurobi licence: at most 2000 variables and constraints


@dataclass
class SolveResult:
    """What a backend reports about one solve (units of the model's objective).

    ``build_s`` is the time spent translating the Pyomo model for the solver (loading it into
    the embedded solver or writing MPS), ``solve_s`` the solver's own time, ``wall_s`` the
    whole call. ``gap`` is ``|bound - objective| / max(1, |objective|)`` when both exist.
    """

    status: str
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    build_s: float = 0.0
    solve_s: float = 0.0
    wall_s: float = 0.0
    solver: str = ""
    version: str = ""
    nodes: int | None = None
    message: str = ""

    @property
    def has_solution(self) -> bool:
        """True when values were loaded into the model (optimal or feasible)."""
        return self.status in ("optimal", "feasible")

    def as_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-ready)."""
        return asdict(self)


def _gap(objective: float | None, bound: float | None) -> float | None:
    if objective is None or bound is None or not math.isfinite(objective) or not math.isfinite(bound):
        return None
    return abs(bound - objective) / max(1.0, abs(objective))


def _finite(x) -> float | None:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


# ---- availability ------------------------------------------------------------------------

_ORTOOLS_OK: tuple[bool, str] | None = None


def _ortools_installed() -> tuple[bool, str]:
    """OR-Tools is importable (checked without importing it into this process)."""
    global _ORTOOLS_OK
    if _ORTOOLS_OK is None:
        import importlib.util

        spec = importlib.util.find_spec("ortools")
        if spec is None:
            _ORTOOLS_OK = (False, "ortools not installed (pip install ortools)")
        else:
            try:
                from importlib.metadata import version

                _ORTOOLS_OK = (True, f"ortools {version('ortools')} (child process)")
            except Exception:  # noqa: BLE001
                _ORTOOLS_OK = (True, "ortools (child process)")
    return _ORTOOLS_OK


def solver_plugins() -> ModuleType:
    """``pyomo.environ``: Pyomo with its solver plugins (the v2 and legacy solver factories, the
    model writers), imported when a backend first needs them. Models are built on
    ``pyomo.core`` alone, and the embedded HiGHS path (:mod:`.highs_direct`) needs no plugin:
    loading them all takes a fifth of a second of every run's start-up."""
    return importlib.import_module("pyomo.environ")


def available(name: str) -> tuple[bool, str]:
    """Whether backend ``name`` can run here, and a one-line reason or version."""
    name = canonical(name)
    if name == "highs":
        return highs_direct.available()
    if name == "gurobi":
        solver_plugins()
        from pyomo.contrib.solver.common.factory import SolverFactory

        s = SolverFactory("gurobi_direct")
        try:
            avail = s.available()
        except Exception as e:  # noqa: BLE001
            return False, f"gurobi unavailable: {e}"
        if not avail:
            return False, f"gurobi unavailable: {avail}"
        ver = ".".join(map(str, s.version()))
        if "Limited" in str(avail):
            return True, f"gurobi {ver} (size-limited licence: <= {GUROBI_LIMIT} variables and constraints)"
        return True, f"gurobi {ver}"
    if name in ORTOOLS:
        return _ortools_installed()
    try:
        s = solver_plugins().SolverFactory(name)
        ok = s is not None and s.available(exception_flag=False)
    except Exception:  # noqa: BLE001
        ok = False
    return (True, f"{name} (pyomo)") if ok else (False, f"{name} not installed")


def backends() -> list[dict[str, Any]]:
    """Every known backend with its availability: ``[{name, available, reason}]``."""
    out = []
    for name in KNOWN:
        ok, why = available(name)
        out.append({"name": name, "available": ok, "reason": why})
    return out


# ---- model statistics ----------------------------------------------------------------------

def model_stats(model: pe.ConcreteModel) -> dict[str, int]:
    """Counts of active variables (by domain) and constraints of a Pyomo model."""
    nvar = nint = ncont = 0
    for v in model.component_data_objects(pe.Var, active=True, descend_into=True):
        if v.fixed:
            continue
        nvar += 1
        if v.is_integer() or v.is_binary():
            nint += 1
        else:
            ncont += 1
    ncon = sum(1 for _ in model.component_data_objects(pe.Constraint, active=True, descend_into=True))
    return {"variables": nvar, "integer": nint, "continuous": ncont, "constraints": ncon}


# ---- the one entry point -----------------------------------------------------------------

class Session:
    """A persistent solver handle: re-solving a modified model reuses the loaded instance.

    Only HiGHS and Gurobi (Pyomo v2 persistent interfaces) keep state; for the other
    backends a session is just the solver name. Pass it as ``solve(..., session=s)``.
    """

    def __init__(self, solver: str = "highs"):
        self.solver = canonical(solver)
        self.handle = None
        if self.solver in ("highs", "gurobi"):
            solver_plugins()
            from pyomo.contrib.solver.common.factory import SolverFactory

            self.handle = SolverFactory("highs" if self.solver == "highs" else "gurobi_persistent")

    @property
    def persistent(self) -> bool:
        """True when the backend keeps the model between solves."""
        return self.handle is not None


def solve(
    model: pe.ConcreteModel,
    solver: str = "highs",
    time_limit: float | None = 60.0,
    gap: float | None = None,
    threads: int = 1,
    seed: int = 0,
    session: Session | None = None,
    warm_start: bool = False,
) -> SolveResult:
    """Solve ``model`` with backend ``solver``; load the incumbent into the model if any.

    ``time_limit`` (s) always yields the incumbent and the bound when the solver has them
    (status ``feasible``); ``gap`` is the relative MIP gap at which to stop. Never raises for
    solver trouble: missing solvers, licence limits, crashes and timeouts are statuses.

    ``warm_start=True``: the values currently set on the model's (unfixed) variables are a MIP
    start. HiGHS gets them with ``Highs.setSolution`` after the model is loaded (columns found
    through the Pyomo interface's variable map); Gurobi through its ``Start`` attribute
    (Pyomo's ``warmstart_discrete_vars``); CP-SAT (``AddHint``) and SCIP (the MPModel solution
    hint) in the child from a start file; Pyomo legacy solvers through ``warmstart=True`` when
    they support it; the LP solvers ignore it. Integer variables' values are rounded.
    """
    name = canonical(session.solver if session is not None else solver)
    t0 = time.perf_counter()
    time_limit = seconds_left(time_limit)  # never past the run's deadline
    try:
        if name == "highs" and session is None:  # compiling stays interruptible; HiGHS' run is shielded
            res = _solve_highs(model, time_limit, gap, threads, seed, warm_start)
        else:
            with shielded():  # the solver stops by its limit; a timer must not cut Pyomo's I/O capture
                res = _dispatch(model, name, time_limit, gap, threads, seed, session, warm_start)
    except Exception as e:  # noqa: BLE001 - a solver failure is a status, not a crash
        res = SolveResult("error", solver=name, message=f"error: {type(e).__name__}: {e}")
    res.solver = res.solver or name
    res.wall_s = time.perf_counter() - t0
    if res.gap is None:
        res.gap = _gap(res.objective, res.bound)
    return res


def _dispatch(model, name, time_limit, gap, threads, seed, session, warm_start) -> SolveResult:
    """The backend ``name``'s solve through Pyomo (HiGHS in a persistent session; outside one,
    :func:`solve` loads the model as one matrix, :mod:`.highs_direct`)."""
    solver_plugins()
    if name == "highs":
        return _solve_v2(model, "highs", time_limit, gap, threads, seed, session, warm_start=warm_start)
    if name == "gurobi":
        return _solve_gurobi(model, time_limit, gap, threads, seed, session, warm_start=warm_start)
    if name in ORTOOLS:
        return _solve_ortools(model, name, time_limit, gap, threads, seed, warm_start=warm_start)
    return _solve_legacy(model, name, time_limit, gap, threads, seed, warm_start=warm_start)


def _sense_max(model) -> bool:
    for obj in model.component_data_objects(pe.Objective, active=True):
        return obj.sense == pe.maximize
    return False


def _v2_status(results) -> tuple[str, str]:
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


def start_values(model) -> list[tuple[Any, float]]:
    """The MIP start a model carries: ``(var, value)`` for every unfixed variable with a value
    (integer variables rounded)."""
    out = []
    for v in model.component_data_objects(pe.Var, active=True, descend_into=True):
        if v.fixed or v.value is None:
            continue
        val = float(v.value)
        if v.is_integer() or v.is_binary():
            val = float(round(val))
        out.append((v, val))
    return out


def _highs_hook(opt, model, warm_start: bool, deadline: float | None):
    """Wrap the Pyomo HiGHS interface's ``_solve`` (called once the model is loaded into
    ``highspy.Highs``, just before ``run``) to (a) cut HiGHS' time limit to what is left of the
    call's wall-clock budget (loading a large model takes seconds that HiGHS' own clock does not
    count) and (b) with ``warm_start``, pass the model's current values to ``Highs.setSolution``
    (columns from the interface's map ``id(var) -> column``); and its ``add_block`` to add all
    the model's variables in one batch first (much faster loading). Returns an undo function
    and a dict filled with what was passed."""
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
        if deadline is not None and opt._active_config.time_limit is not None:
            opt._active_config.time_limit = max(0.05, deadline - time.perf_counter())
        if warm_start:
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


_HIGHS_STATUS = {
    "kOptimal": ("optimal", ""), "kModelEmpty": ("optimal", ""),
    "kInfeasible": ("infeasible", "the model is infeasible"),
    "kUnboundedOrInfeasible": ("infeasible", "the model is infeasible or unbounded"),
    "kUnbounded": ("error", "error: the model is unbounded"),
}


def _solve_highs(model, time_limit, gap, threads, seed, warm_start=False) -> SolveResult:
    """HiGHS on the model compiled into one matrix (:mod:`.highs_direct`); ``build_s`` is the
    compiling and loading, ``solve_s`` HiGHS' run."""
    if not available("highs")[0]:
        return SolveResult("skipped", solver="highs", message="skipped: highs not installed")
    start = start_values(model) if warm_start else None
    r = highs_direct.run(model, time_limit=time_limit, gap=gap, threads=threads, seed=seed, start=start)
    status, message = _HIGHS_STATUS.get(r.model_status, (None, ""))
    if status is None:
        if r.has_solution:
            status, message = "feasible", f"limit hit ({r.model_status}); incumbent kept"
        elif r.model_status in ("kTimeLimit", "kIterationLimit", "kInterrupt", "kHighsInterrupt",
                                "kObjectiveBound", "kObjectiveTarget", "kSolutionLimit", "kMemoryLimit"):
            status, message = "no-solution", f"limit hit ({r.model_status}) before any solution"
        else:
            status, message = "error", f"error: HiGHS reported {r.model_status}"
    if status == "optimal" and not r.has_solution:
        status, message = "error", "error: HiGHS reported optimal without a solution"
    if warm_start and r.start_values:
        message = (message + "; " if message else "") + f"MIP start of {r.start_values} values passed"
    obj = r.objective if status in ("optimal", "feasible") else None
    bound = r.bound if r.bound is not None else (obj if status == "optimal" else None)
    return SolveResult(status=status, objective=_finite(obj), bound=_finite(bound), build_s=r.load_s,
                       solve_s=r.run_s, solver="highs", version=r.version, nodes=r.nodes, message=message)


def _solve_v2(model, name, time_limit, gap, threads, seed, session, options=None, warm_start=False) -> SolveResult:
    from pyomo.contrib.solver.common.factory import SolverFactory

    opt = session.handle if session is not None and session.handle is not None else SolverFactory(name)
    avail = opt.available()
    if not avail:
        return SolveResult("skipped", solver=name, message=f"skipped: {name} not installed")
    version = ".".join(map(str, opt.version()))
    solver_options = dict(options or {})
    if name == "highs":
        solver_options.setdefault("random_seed", int(seed))
        if model_stats(model)["integer"] == 0:
            # the TEN LPs are highly degenerate: HiGHS' simplex stalls where its IPM does not
            solver_options.setdefault("solver", "ipm")
    kwargs: dict[str, Any] = {}
    undo, start_info = None, None
    if name == "highs":
        deadline = None if time_limit is None else time.perf_counter() + float(time_limit)
        undo, start_info = _highs_hook(opt, model, warm_start, deadline)
    elif warm_start and name == "gurobi":
        kwargs["warmstart_discrete_vars"] = True
    t0 = time.perf_counter()
    try:
        results = opt.solve(
            model,
            load_solutions=False,
            raise_exception_on_nonoptimal_result=False,
            time_limit=time_limit,
            threads=threads,
            rel_gap=gap,
            solver_options=solver_options,
            **kwargs,
        )
    finally:
        if undo is not None:
            undo()
    elapsed = time.perf_counter() - t0
    status, message = _v2_status(results)
    if start_info is not None and warm_start and start_info.get("values"):
        message = (message + "; " if message else "") + f"MIP start of {start_info['values']} values passed"
    if status in ("optimal", "feasible"):
        results.solution_loader.load_vars()
    info = results.timing_info
    solve_s = None
    for key in ("highs_time", "gurobi_time", "solver_wall_time"):
        solve_s = _finite(info.get(key)) if key in info else solve_s
        if solve_s is not None:
            break
    if start_info is not None and "run_s" in start_info:
        solve_s = start_info["run_s"]  # HiGHS' run only; loading the model is build time
    if solve_s is None:
        solve_s = elapsed
    nodes = None
    extra = results.extra_info
    for key in ("mip_node_count", "NodeCount"):
        if key in extra:
            try:
                nodes = int(extra[key])
            except (TypeError, ValueError):
                pass
    if nodes is not None and nodes < 0:
        nodes = None
    obj = _finite(results.incumbent_objective) if status in ("optimal", "feasible") else None
    bound = _finite(results.objective_bound)
    if status == "optimal" and bound is None:
        bound = obj
    return SolveResult(status=status, objective=obj, bound=bound, build_s=max(0.0, elapsed - solve_s),
                       solve_s=solve_s, solver=name, version=version, nodes=nodes, message=message)


def _solve_gurobi(model, time_limit, gap, threads, seed, session, precheck=True, warm_start=False) -> SolveResult:
    ok, why = available("gurobi")
    if not ok:
        return SolveResult("skipped", solver="gurobi", message="skipped: gurobi not installed")
    stats = model_stats(model)
    if precheck and "size-limited" in why and (stats["variables"] > GUROBI_LIMIT or stats["constraints"] > GUROBI_LIMIT):
        return SolveResult(
            "skipped", solver="gurobi",
            message=(f"skipped: licence size limit ({stats['variables']} variables, "
                     f"{stats['constraints']} constraints > {GUROBI_LIMIT})"),
        )
    if session is None:
        from pyomo.contrib.solver.common.factory import SolverFactory

        session = Session("gurobi")
        session.handle = SolverFactory("gurobi_direct")
    try:
        res = _solve_v2(model, "gurobi", time_limit, gap, threads, seed, session, {"Seed": int(seed)},
                        warm_start=warm_start)
    except Exception as e:  # noqa: BLE001
        text = str(e)
        if "10010" in text or "size-limited" in text.lower() or "Model too large" in text:
            return SolveResult("skipped", solver="gurobi", message="skipped: licence size limit")
        raise
    res.solver = "gurobi"
    return res


# ---- OR-Tools in a child process ------------------------------------------------------------

def _solve_ortools(model, name, time_limit, gap, threads, seed, *, wall_limit=None, extra_args=(),
                   warm_start=False) -> SolveResult:
    """Solve in an OR-Tools child process (see :mod:`collsynth.solvers.backends.ortools_worker`).

    The child's wall-clock deadline is ``wall_limit`` (default: 1.5 x the time limit + 30 s).
    A child killed there keeps its incumbent only for CP-SAT, whose solution callback writes
    every improving solution to a file read here (status ``feasible``); SCIP, GLOP and PDLP
    rely on their own time limit, and a killed child is an ``error``.
    """
    refusal = _ortools_refusal(model, name)
    if refusal is not None:
        return refusal
    if wall_limit is None:
        wall_limit = None if time_limit is None else 1.5 * float(time_limit) + 30.0
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="collsynth-ortools-") as tmp:
        cmd, symbol_map = _ortools_command(model, name, tmp, threads, seed, warm_start)
        if time_limit is not None:
            cmd += ["--time-limit", repr(float(time_limit))]
        if gap is not None:
            cmd += ["--gap", repr(float(gap))]
        cmd += list(extra_args)
        build_s = time.perf_counter() - t0
        data, elapsed = _run_ortools_child(cmd, name, tmp, wall_limit, build_s)
    if isinstance(data, SolveResult):
        return data
    status = data["status"]
    if status in ("optimal", "feasible"):
        missing = _load_values(data, symbol_map)
        if missing:
            return SolveResult("error", solver=name, message=f"error: {missing} variable names did not map back")
    message = data.get("message", "")
    if warm_start and data.get("start_values"):
        message = (message + "; " if message else "") + f"MIP start of {data['start_values']} values passed"
    return SolveResult(status=status, objective=_finite(data.get("objective")), bound=_finite(data.get("bound")),
                       build_s=build_s, solve_s=_finite(data.get("solve_s")) or elapsed, solver=name,
                       version=data.get("version", ""), message=message)


def _ortools_refusal(model, name: str) -> SolveResult | None:
    """A ``skipped`` result when OR-Tools is missing or ``name`` cannot take this model."""
    ok, why = _ortools_installed()
    if not ok:
        return SolveResult("skipped", solver=name, message=f"skipped: {name} not installed ({why})")
    stats = model_stats(model)
    if name == "cpsat" and stats["continuous"]:
        return SolveResult(
            "skipped", solver=name,
            message=f"skipped: cpsat needs a pure-integer model ({stats['continuous']} continuous variables)",
        )
    if name in ("glop", "pdlp") and stats["integer"]:
        return SolveResult(
            "skipped", solver=name,
            message=f"skipped: {name} is an LP solver ({stats['integer']} integer variables)",
        )
    return None


def _ortools_command(model, name: str, tmp: str, threads, seed, warm_start: bool) -> tuple[list[str], Any]:
    """The child's command line (model written as MPS in ``tmp``) and the MPS symbol map."""
    mps = os.path.join(tmp, "model.mps")
    _, sid = model.write(mps, format="mps", io_options={"symbolic_solver_labels": True})
    symbol_map = model.solutions.symbol_map[sid]
    cmd = [
        sys.executable, "-m", "collsynth.solvers.backends.ortools_worker", mps, os.path.join(tmp, "out.json"),
        "--solver", ORTOOLS[name], "--threads", str(int(threads)), "--seed", str(int(seed)),
    ]
    if warm_start and name in ("cpsat", "scip"):
        start = {}
        for v, x in start_values(model):
            sym = symbol_map.byObject.get(id(v))
            if sym is not None:
                start[sym] = x
        path = os.path.join(tmp, "start.json")
        with open(path, "w") as f:
            json.dump(start, f)
        cmd += ["--start", path]
    if name == "cpsat":
        cmd += ["--incumbent", os.path.join(tmp, "incumbent.json")]
    return cmd, symbol_map


def _run_ortools_child(cmd: list[str], name: str, tmp: str, wall_limit, build_s: float):
    """Run the child; ``(result JSON, seconds)``, or ``(SolveResult error, seconds)`` when it
    failed. A child killed at its deadline keeps CP-SAT's last incumbent (``feasible``)."""
    t1 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=wall_limit)
    except subprocess.TimeoutExpired:  # subprocess.run kills the child on timeout
        elapsed = time.perf_counter() - t1
        data = _read_json(os.path.join(tmp, "incumbent.json"))
        if data is None:
            return SolveResult("error", solver=name, build_s=build_s, solve_s=elapsed,
                               message=f"error: timed out (child killed after {wall_limit:.1f} s)"), elapsed
        data["status"] = "feasible"
        data["message"] = (f"child killed at its wall-clock deadline ({wall_limit:.1f} s); incumbent "
                           f"from its solution callback (solution {data.get('solutions', '?')})")
        data["solve_s"] = elapsed
        return data, elapsed
    elapsed = time.perf_counter() - t1
    data = _read_json(os.path.join(tmp, "out.json")) if proc.returncode == 0 else None
    if data is not None:
        return data, elapsed
    tail = (proc.stderr or proc.stdout or "").strip().splitlines()
    if tail:
        why = tail[-1]
    elif proc.returncode < 0:
        why = f"killed by signal {-proc.returncode}"
    else:
        why = f"exit code {proc.returncode}"
    return SolveResult("error", solver=name, build_s=build_s, solve_s=elapsed,
                       message=f"error: {name} child process failed (exit {proc.returncode}): {why}"), elapsed


def _load_values(data: dict, symbol_map) -> int:
    """Load the child's values into the model by MPS name; the number of names not found."""
    if data.get("sparse"):  # only nonzero values are listed
        for var in symbol_map.bySymbol.values():
            if var.is_variable_type() and not var.fixed:
                var.set_value(0.0, skip_validation=True)
    missing = 0
    for sym, val in data.get("values", {}).items():
        var = symbol_map.bySymbol.get(sym)
        if var is None:
            missing += 1
            continue
        var.set_value(_round_int(var, val), skip_validation=True)
    return missing


def _read_json(path: str):
    """The JSON object in ``path``, or None if it is missing or unreadable."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _round_int(var, val: float) -> float:
    if var.is_integer() or var.is_binary():
        return float(round(val))
    return float(val)


# ---- any other Pyomo (legacy) solver ----------------------------------------------------------

_LEGACY_TIME = {"cbc": "sec", "glpk": "tmlim", "scip": "limits/time", "cplex": "timelimit"}
_LEGACY_GAP = {"cbc": "ratio", "glpk": "mipgap", "scip": "limits/gap", "cplex": "mipgap"}


def _solve_legacy(model, name, time_limit, gap, threads, seed, warm_start=False) -> SolveResult:
    from pyomo.opt import SolverStatus, TerminationCondition as TC

    ok, _ = available(name)
    if not ok:
        return SolveResult("skipped", solver=name, message=f"skipped: {name} not installed")
    opt = solver_plugins().SolverFactory(name)
    if time_limit is not None and name in _LEGACY_TIME:
        opt.options[_LEGACY_TIME[name]] = int(math.ceil(time_limit)) if name == "glpk" else time_limit
    if gap is not None and name in _LEGACY_GAP:
        opt.options[_LEGACY_GAP[name]] = gap
    kwargs = {}
    if warm_start and getattr(opt, "warm_start_capable", lambda: False)():
        kwargs["warmstart"] = True
    t0 = time.perf_counter()
    results = opt.solve(model, load_solutions=False, **kwargs)
    elapsed = time.perf_counter() - t0
    tc = results.solver.termination_condition
    has = len(results.solution) > 0
    if tc == TC.optimal and has:
        status, msg = "optimal", ""
    elif tc in (TC.infeasible, TC.infeasibleOrUnbounded):
        status, msg = "infeasible", "the model is infeasible"
    elif has:
        status, msg = "feasible", f"limit hit ({tc}); incumbent kept"
    elif results.solver.status == SolverStatus.error:
        status, msg = "error", f"error: {name} reported {tc}"
    else:
        status, msg = "no-solution", f"no solution ({tc})"
    obj = bound = None
    if status in ("optimal", "feasible"):
        model.solutions.load_from(results)
        for o in model.component_data_objects(pe.Objective, active=True):
            obj = float(pe.value(o))
            break
        try:
            p = results.problem[0]
            bound = _finite(p.upper_bound if _sense_max(model) else p.lower_bound)
        except Exception:  # noqa: BLE001
            bound = None
        if status == "optimal" and bound is None:
            bound = obj
    return SolveResult(status=status, objective=obj, bound=bound, solve_s=elapsed, solver=name, message=msg)
