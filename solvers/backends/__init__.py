"""Solver backends: one call solves a Pyomo model on any solver and returns a uniform result.

:func:`solve` takes a solver-agnostic Pyomo ``ConcreteModel`` (see :mod:`collsynth.formulations`)
and a :class:`Request` (the backend, the run's deadline, relative gap, threads, seed, MIP
start) and returns a :class:`SolveResult` with status ``optimal`` / ``feasible`` (a limit was
hit, the incumbent is kept) / ``infeasible`` / ``no-solution`` / ``error`` / ``skipped``
(licence limit, solver not installed, wrong model class). Whenever a solution exists its
values are loaded into the Pyomo model, so a formulation's ``extract(model)`` reads them
directly (``formulations/__init__.py``).

One module per backend: :mod:`.highs` (embedded HiGHS, the default, fed one matrix by
:mod:`.highs_direct`), :mod:`.gurobi`, :mod:`.ortools` (CP-SAT, SCIP, GLOP, PDLP in a child
process, :mod:`.ortools_worker`), :mod:`.legacy` (any other solver Pyomo knows);
:mod:`.request` (what they are given and give back), :mod:`.dispatch` (the entry point) and
:mod:`.names` (what a user may write for ``--solver``).

Importing this package loads only :mod:`.names`; the solving modules (Pyomo, the embedded
solvers: a second of start-up) load when one of their names is first used, so that checking a
run's options costs nothing for the producers that use no solver.

>>> import pyomo.environ as pe
>>> m = pe.ConcreteModel(); m.x = pe.Var([0, 1], domain=pe.Binary)
>>> m.c = pe.Constraint(expr=m.x[0] + m.x[1] <= 1)
>>> m.o = pe.Objective(expr=m.x[0] + 2 * m.x[1], sense=pe.maximize)
>>> from collsynth.solvers.backends import solve
>>> r = solve(m, "highs"); (r.status, r.objective, m.x[1].value)
('optimal', 2.0, 1.0)
"""

from __future__ import annotations

import importlib

from .names import ALIASES, KNOWN, canonical, check_name, pyomo_names  # noqa: F401 - re-exported

_LAZY = {  # name: the module that defines it, imported on first use
    "solve": "dispatch", "available": "dispatch", "backends": "dispatch", "Session": "dispatch",
    "Request": "request", "SolveResult": "request", "READBACK_S": "request",
    "model_stats": "request", "start_values": "request", "solver_plugins": "request",
}


def __getattr__(name: str):
    """The solving names, from their modules when first used (PEP 562)."""
    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ALIASES", "KNOWN", "canonical", "check_name", "pyomo_names", *_LAZY]
