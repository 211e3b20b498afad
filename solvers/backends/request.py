"""What every solver backend is given and what it gives back: :class:`Request` and
:class:`SolveResult`, and the model facts the backends share (:func:`model_stats`,
:func:`start_values`).

A request carries the run's clock (:class:`~collsynth.limits.Deadline`), not seconds: a
backend asks it how long the solver may run (:meth:`Request.seconds`), which is what is left
of the deadline (and of any :func:`~collsynth.limits.enforce` block around the call) minus
the time to read the incumbent back into the model (:data:`READBACK_S`), so that a solver
stopped by its own limit has returned its incumbent by the deadline.

>>> from collsynth.limits import Deadline
>>> r = Request("highs", Deadline.after(10)); 9 < r.seconds() + READBACK_S <= 10
True
>>> Request("highs").seconds() is None
True
"""

from __future__ import annotations

import importlib
from dataclasses import asdict, dataclass
from types import ModuleType
from typing import Any

import pyomo.core as pe

from ...tens.status import SOLVED, Status
from ...limits import NO_LIMIT, Deadline, seconds_left
from .names import canonical
from .numbers import finite, relative_gap  # noqa: F401 - the backends take them from here

READBACK_S = 0.25  # of a solve's time, kept to read the incumbent back into the model and return


@dataclass(frozen=True)
class Request:
    """One solve: the backend (``solver``), the run's ``deadline``, the relative MIP ``gap``
    at which to stop, solver ``threads`` and ``seed``, whether the values set on the model are
    a MIP start (``warm_start``) and the persistent ``session`` to re-solve in (HiGHS, Gurobi)."""

    solver: str = "highs"
    deadline: Deadline = NO_LIMIT
    gap: float | None = None
    threads: int = 1
    seed: int = 0
    warm_start: bool = False
    session: Any = None  # a collsynth.solvers.backends.Session

    @property
    def name(self) -> str:
        """The backend's canonical name (the session's when one is given)."""
        return canonical(self.session.solver if self.session is not None else self.solver)

    def seconds(self) -> float | None:
        """Seconds the solver may run from now: what is left of the deadline (and of the
        :func:`~collsynth.limits.enforce` blocks around the call) minus :data:`READBACK_S`,
        never negative (None: no limit)."""
        left = seconds_left(self.deadline.left())
        return None if left is None else max(0.0, left - READBACK_S)

    def solver_deadline(self) -> Deadline:
        """The instant the solver must stop (:meth:`seconds` from now): a backend that can
        interrupt its solver does so then (:func:`~.highs_direct.interrupted_at`)."""
        return self.deadline.child(self.seconds())


@dataclass
class SolveResult:
    """What a backend reports about one solve (units of the model's objective).

    ``build_s`` is the time spent translating the Pyomo model for the solver (loading it into
    the embedded solver or writing MPS), ``solve_s`` the solver's own time, ``wall_s`` the
    whole call. ``gap`` is ``|bound - objective| / max(1, |objective|)`` when both exist.
    ``status`` is a :class:`~collsynth.tens.status.Status`: ``optimal`` (in this model),
    ``feasible``, ``infeasible``, ``no-solution``, ``error`` or ``skipped``.
    """

    status: Status
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
        return self.status in SOLVED

    def as_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-ready)."""
        return asdict(self)


def with_note(message: str, note: str) -> str:
    """``message; note`` (just ``note`` when there is no message)."""
    return f"{message}; {note}" if message else note


def solver_plugins() -> ModuleType:
    """``pyomo.environ``: Pyomo with its solver plugins (the v2 and legacy solver factories, the
    model writers), imported when a backend first needs them. Models are built on
    ``pyomo.core`` alone, and the embedded HiGHS path (:mod:`.highs_direct`) needs no plugin:
    loading them all takes a fifth of a second of every run's start-up."""
    return importlib.import_module("pyomo.environ")


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
