"""The ``gurobi`` backend: Gurobi through Pyomo's v2 ``gurobi_direct`` (or a persistent
session). The bundled size-limited licence refuses models over :data:`LIMIT` variables or
constraints (error 10010): counted before solving and caught at solve, both reported as
``skipped: licence size limit``.
"""

from __future__ import annotations

from ...tens.status import Status
from .highs import solve_v2
from .request import Request, SolveResult, model_stats, solver_plugins

LIMIT = 2000  # the bundled (size-limited) Gurobi licence: at most 2000 variables and constraints


def available() -> tuple[bool, str]:
    """Whether Gurobi can run here, and its version and licence kind."""
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
        return True, f"gurobi {ver} (size-limited licence: <= {LIMIT} variables and constraints)"
    return True, f"gurobi {ver}"


def solve(model, request: Request, precheck: bool = True) -> SolveResult:
    """Gurobi on ``model`` (in ``request.session`` when it is given); a model over the
    size-limited licence is ``skipped`` (counted first unless ``precheck`` is False)."""
    ok, why = available()
    if not ok:
        return SolveResult(Status.SKIPPED, solver="gurobi", message="skipped: gurobi not installed")
    stats = model_stats(model)
    if precheck and "size-limited" in why and (stats["variables"] > LIMIT or stats["constraints"] > LIMIT):
        return SolveResult(Status.SKIPPED, solver="gurobi", message=(
            f"skipped: licence size limit ({stats['variables']} variables, {stats['constraints']} constraints > {LIMIT})"))
    if request.session is not None and request.session.handle is not None:
        handle = request.session.handle
    else:
        from pyomo.contrib.solver.common.factory import SolverFactory

        handle = SolverFactory("gurobi_direct")
    try:
        res = solve_v2(model, request, handle, {"Seed": int(request.seed)})
    except Exception as e:  # noqa: BLE001
        text = str(e)
        if "10010" in text or "size-limited" in text.lower() or "Model too large" in text:
            return SolveResult(Status.SKIPPED, solver="gurobi", message="skipped: licence size limit")
        raise
    res.solver = "gurobi"
    return res
