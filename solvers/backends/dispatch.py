"""The one entry point of the solver backends: :func:`solve` a Pyomo model as a
:class:`~.request.Request` asks, on whichever backend it names; :func:`available` and
:func:`backends` say which can run here; a :class:`Session` keeps a persistent solver."""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

from ...tens.status import Status
from ...limits import TimeLimitReached, shielded
from . import gurobi, highs, highs_direct, legacy, ortools
from .names import KNOWN, canonical
from .request import Request, SolveResult, relative_gap, solver_plugins


def _not_a_time_limit(record: logging.LogRecord) -> bool:
    """Drop Pyomo's "Constructing component ... failed" log of a build the run's deadline
    stopped (:class:`~collsynth.limits.TimeLimitReached`): the row says where the run stopped."""
    return not any(a == TimeLimitReached.__name__ or isinstance(a, TimeLimitReached) for a in record.args or ())


logging.getLogger("pyomo.core").addFilter(_not_a_time_limit)


def available(name: str) -> tuple[bool, str]:
    """Whether backend ``name`` can run here, and a one-line reason or version."""
    name = canonical(name)
    if name == "highs":
        return highs_direct.available()
    if name == "gurobi":
        return gurobi.available()
    if name in ortools.SOLVERS:
        return ortools.installed()
    return legacy.available(name)


def backends() -> list[dict[str, Any]]:
    """Every known backend with its availability: ``[{name, available, reason}]``."""
    out = []
    for name in KNOWN:
        ok, why = available(name)
        out.append({"name": name, "available": ok, "reason": why})
    return out


class Session:
    """A persistent solver handle: re-solving a modified model reuses the loaded instance.

    Only HiGHS and Gurobi (Pyomo v2 persistent interfaces) keep state; for the other
    backends a session is just the solver name. Pass it as ``Request(session=s)``.
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


def solve(model, request: Request | str = "highs", **fields: Any) -> SolveResult:
    """Solve ``model`` as ``request`` asks (a :class:`~.request.Request`, or a solver name and
    the request's ``fields``: ``deadline``, ``gap``, ``threads``, ``seed``, ``warm_start``,
    ``session``); load the incumbent into the model if any.

    The solver runs until the request's deadline less the time to read its incumbent back
    (:meth:`~.request.Request.seconds`) and then yields the incumbent and the bound when it has
    them (status ``feasible``); ``gap`` is the relative MIP gap at which to stop. Never raises
    for solver trouble: missing solvers, licence limits, crashes and timeouts are statuses.

    ``warm_start=True``: the values currently set on the model's (unfixed) variables are a MIP
    start. HiGHS gets them with ``Highs.setSolution`` after the model is loaded; Gurobi through
    its ``Start`` attribute (Pyomo's ``warmstart_discrete_vars``); CP-SAT (``AddHint``) and
    SCIP (the MPModel solution hint) in the child from a start file; Pyomo legacy solvers
    through ``warmstart=True`` when they support it; the LP solvers ignore it. Integer
    variables' values are rounded.
    """
    request = replace(request, **fields) if isinstance(request, Request) else Request(solver=request, **fields)
    name = request.name
    t0 = time.perf_counter()
    try:
        if name == "highs" and request.session is None:  # compiling stays interruptible; HiGHS' run is shielded
            res = highs.solve(model, request)
        else:
            with shielded():  # the solver stops by its limit; a timer must not cut Pyomo's I/O capture
                res = _dispatch(model, request)
    except Exception as e:  # noqa: BLE001 - a solver failure is a status, not a crash
        res = SolveResult(Status.ERROR, solver=name, message=f"error: {type(e).__name__}: {e}")
    res.solver = res.solver or name
    res.wall_s = time.perf_counter() - t0
    if res.gap is None:
        res.gap = relative_gap(res.objective, res.bound)
    return res


def _dispatch(model, request: Request) -> SolveResult:
    """The backend's solve through Pyomo (HiGHS in a persistent session; outside one,
    :func:`solve` loads the model as one matrix, :mod:`.highs_direct`)."""
    solver_plugins()
    name = request.name
    if name == "highs":
        return highs.solve_v2(model, request, request.session.handle)
    if name == "gurobi":
        return gurobi.solve(model, request)
    if name in ortools.SOLVERS:
        return ortools.solve(model, request)
    return legacy.solve(model, request)
