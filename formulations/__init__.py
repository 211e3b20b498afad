"""Solver-agnostic Pyomo formulations, one module per formulation, and the contract they follow.

Every public module of this package is a formulation, registered by its ``NAME``, so adding a
formulation is adding one file (``ten_ilp.py`` is the model to copy; no formulation imports a
solver: models are built on Pyomo's modelling layer ``pyomo.core``, and Pyomo's solver plugins,
``pyomo.environ``, are loaded by the backends that use them). :func:`check` holds a module to the contract below when :func:`registry` loads it and
refuses it with a :class:`ContractError` naming the module and the member that is wrong.

Every formulation module::

    build(instance, horizon, state=None, **params) -> pyomo.core.ConcreteModel      # required
    extract(model) -> collsynth.tens.schedule.Schedule                               # required
    NAME: str            = the module name with '-' for '_'    (the producer name)
    SUMMARY: str         = the first line of the module docstring
    DRIVER_FAMILY: str   = None    ("ten": solved by the TEN drivers, one producer per module)
    bound(model)         = no bound (returns None): a bound the solved model proves

A TEN formulation (``DRIVER_FAMILY = "ten"``) also declares, with these defaults
(:data:`TEN_DEFAULTS`; :class:`TenFormulation` is the module as the drivers see it)::

    ROLE: str               = "schedule"   ("relaxation": its bound(model) is the smallest
                                            horizon the solved model allows, and its schedule
                                            is realised from fractional amounts)
    RECOVERY_VALID: bool    = True   shortest-path recovery sends obey its rules
    WARM_START: bool        = True   it accepts a time-clustering schedule as a MIP start
    RESPECTS_CAPACITY: bool = True   its schedules keep at most `capacity` chunks on a link pair
    SYMMETRIC: bool         = False  its model ranges over the schedules a group of automorphisms
                                     maps onto themselves (one chunk orbit, translated): a
                                     horizon it proves impossible rules out symmetric schedules
                                     only, so drivers prove optimality by bounds on every schedule.
                                     A symmetric relaxation is a convex LP invariant under the
                                     group restricted to its symmetric points: averaging any
                                     solution over the group gives one, so its bound holds for
                                     every schedule (ten-lp-orbit: the TEN LP bound)
    NATIVE_REDUCTIONS: bool = False  its models express combining collectives in their own
                                     direction (reduce, reduce_scatter, allreduce, and concurrent
                                     collectives of any mix of kinds): producers pass them whole
                                     instead of reversing them or splitting allreduce in two
    lower_bound(instance, state=None, timestep=None) -> int
                            = collsynth.tens.bounds.lower_bound (collsynth.tens.bounds.distance_bound
                              when RESPECTS_CAPACITY is False)
    schedules(model, recover) -> [(how, Schedule, pairs completed)]     relaxations only
                            = [("extract", extract(model), 0)]
    refine(model) -> model  = none    relaxations only: re-aim a complete solved model before
                                      a re-solve (e.g. little, early traffic)
    start_from_schedule(model, schedule) -> dict | None
                            = none    set the built model's variables to a verified schedule
                                      of its instance (a MIP start; None: outside the model's
                                      class): the producers then improve a known schedule
    PARAMS: tuple           = none    the parameters build takes, each (name, type, default,
                                      help) and, for numbers, optionally (..., low, high): the
                                      least and greatest value; none: those of the TEN ILP
                                      (objective, capacity, weights, timestep)
    model_units(instance) -> float
                            = chunks x link pairs (1/N of that when SYMMETRIC: one chunk orbit)
                                      the commodities x link pairs its variables range over per
                                      timestep, for the drivers' size and build-time estimates
                                      (a model with one commodity per source: sources x pairs)

A formulation whose ``PARAMS`` name ``build_limit`` gets the seconds left on the drivers' clock
as ``build_limit`` and raises :class:`BuildTooLarge` instead of building a model that would not
be ready in time (the drivers then stop searching larger models).

The drivers call ``build(instance, horizon, state=None, objective="arrivals", lookahead=0,
**params)``: ``state`` (bool ``[chunk, node]``, the model's direction) replaces the
precondition (time clustering), ``objective`` is one of :data:`OBJECTIVES` (a formulation may
refuse one with :class:`collsynth.tens.ten.NotSupported`), and ``lookahead`` lets relays
within that many timesteps past the horizon earn credit (a formulation may ignore it). The
built model carries a :class:`TenModel`, attached by :func:`expose`: the TEN index it was built
on and its ``sent[c, l, t]`` / ``hold[c, n, t]`` variables, whatever the formulation calls them;
the drivers read a model only through :func:`ten_model`.

>>> import types
>>> half_done = types.ModuleType("half_done", "A formulation that forgot its extract.")
>>> half_done.build = lambda instance, horizon, state=None, **params: None
>>> try:
...     check(half_done)
... except ContractError as e:
...     print(e)
formulation module half_done: missing extract(model) -> Schedule
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable

import numpy as np
import pyomo.core as pe

from .. import InputError
from ..tens import bounds, ten
from ..tens.schedule import Schedule

FAMILIES = (None, "ten")  # DRIVER_FAMILY values: none (run by its own producer) or the TEN drivers
ROLES = ("schedule", "relaxation")
OBJECTIVES = ("arrivals", "makespan")  # TenModel.objective: maximise pairs held at the horizon, or all by it
REQUIRED = {
    "build": "build(instance, horizon, state=None, **params) -> ConcreteModel",
    "extract": "extract(model) -> Schedule",
}
TEN_DEFAULTS: dict[str, Any] = {
    "ROLE": "schedule",
    "RECOVERY_VALID": True,
    "WARM_START": True,
    "RESPECTS_CAPACITY": True,
    "SYMMETRIC": False,
    "NATIVE_REDUCTIONS": False,
}


class ContractError(TypeError):
    """A formulation module or model does not follow the contract (the message names what)."""


class BuildTooLarge(ten.NotSupported):
    """The model would not be built within the time left, or would not fit in memory (the
    message gives its estimated size)."""


def _no_bound(model: pe.ConcreteModel) -> None:
    return None


# ---- formulation modules -------------------------------------------------------------------

@dataclass(frozen=True)
class TenFormulation:
    """A TEN formulation as the drivers and producers use it: its module's members with the
    contract's defaults filled in (see the module doc); built by :func:`ten_formulation`."""

    name: str
    summary: str
    role: str
    recovery_valid: bool
    warm_start: bool
    respects_capacity: bool
    symmetric: bool
    native_reductions: bool
    build: Callable[..., pe.ConcreteModel]
    extract: Callable[[pe.ConcreteModel], Schedule]
    bound: Callable[[pe.ConcreteModel], float | None]
    lower_bound: Callable[..., int]
    schedules: Callable[[pe.ConcreteModel, Callable], list]
    refine: Callable[[pe.ConcreteModel], Any] | None
    start_from_schedule: Callable[[pe.ConcreteModel, Schedule], dict | None] | None
    params: tuple | None
    module: ModuleType
    model_units: Callable[[Any], float] | None = None

    def units(self, instance) -> float:
        """Commodities x link pairs the model's variables range over per timestep (module
        doc: ``model_units``; by default the instance's chunks, one orbit's when symmetric)."""
        if self.model_units is not None:
            return float(self.model_units(instance))
        units = float(sum(c.num_chunks for c in instance.collectives) * max(1, len(instance.topology.link_arrays)))
        return units / max(1, instance.topology.size) if self.symmetric else units

    @property
    def is_relaxation(self) -> bool:
        """Whether the formulation is a relaxation (``ROLE = "relaxation"``): its ``bound(model)``
        is the smallest horizon the solved model allows, and its schedules are realised from
        fractional amounts (the module doc)."""
        return self.role == "relaxation"

    @property
    def takes_build_limit(self) -> bool:
        """Whether ``build`` takes ``build_limit`` (seconds) and may raise :class:`BuildTooLarge`."""
        return any(p[0] == "build_limit" for p in self.params or ())


def _where(module: ModuleType) -> str:
    return f"formulation module {module.__name__}"


def _member(module: ModuleType, name: str, kind, default):
    """``module.name`` checked to be a ``kind`` (a type, or ``callable``), else ``default``."""
    if name not in vars(module):
        return default
    value = vars(module)[name]
    ok = callable(value) if kind is callable else isinstance(value, kind)
    if not ok:
        what = "a function" if kind is callable else f"a {kind.__name__}"
        raise ContractError(f"{_where(module)}: {name} must be {what}, got {value!r}")
    return value


def name_of(module: ModuleType) -> str:
    """The name a formulation module is registered under (``NAME``, default: its file name)."""
    return _member(module, "NAME", str, module.__name__.rsplit(".", 1)[-1].replace("_", "-"))


def check(module: ModuleType) -> ModuleType:
    """``module`` itself if it follows the formulation contract (module doc), else a
    :class:`ContractError` naming the module and the missing or mistyped member."""
    for member, signature in REQUIRED.items():
        if not callable(vars(module).get(member)):
            raise ContractError(f"{_where(module)}: missing {signature}")
    name_of(module)
    _member(module, "SUMMARY", str, "")
    _member(module, "bound", callable, _no_bound)
    family = vars(module).get("DRIVER_FAMILY")
    if family not in FAMILIES:
        raise ContractError(f"{_where(module)}: DRIVER_FAMILY must be one of {FAMILIES}, got {family!r}")
    if family == "ten":
        ten_formulation(module)
    return module


def ten_formulation(module: ModuleType | TenFormulation) -> TenFormulation:
    """The TEN formulation ``module`` declares, defaults filled in (module doc); a
    :class:`TenFormulation` is returned as it is."""
    if isinstance(module, TenFormulation):
        return module
    for member, signature in REQUIRED.items():
        if not callable(vars(module).get(member)):
            raise ContractError(f"{_where(module)}: missing {signature}")
    flags = {k: _member(module, k, type(v), v) for k, v in TEN_DEFAULTS.items()}
    if flags["ROLE"] not in ROLES:
        raise ContractError(f"{_where(module)}: ROLE must be one of {ROLES}, got {flags['ROLE']!r}")
    extract = vars(module)["extract"]
    relaxation = flags["ROLE"] == "relaxation"
    if relaxation and "bound" not in vars(module):
        raise ContractError(f"{_where(module)}: a relaxation needs bound(model) -> the smallest horizon it allows")
    default_lb = bounds.lower_bound if flags["RESPECTS_CAPACITY"] else bounds.distance_bound
    doc = (module.__doc__ or "").strip()
    return TenFormulation(
        name=name_of(module),
        summary=_member(module, "SUMMARY", str, doc.splitlines()[0] if doc else name_of(module)),
        role=flags["ROLE"],
        recovery_valid=flags["RECOVERY_VALID"],
        warm_start=flags["WARM_START"],
        respects_capacity=flags["RESPECTS_CAPACITY"],
        symmetric=flags["SYMMETRIC"],
        native_reductions=flags["NATIVE_REDUCTIONS"],
        build=vars(module)["build"],
        extract=extract,
        bound=_member(module, "bound", callable, _no_bound),
        lower_bound=_member(module, "lower_bound", callable, default_lb),
        schedules=_member(module, "schedules", callable, lambda model, recover: [("extract", extract(model), 0)]),
        refine=_member(module, "refine", callable, None),
        start_from_schedule=_member(module, "start_from_schedule", callable, None),
        params=_member(module, "PARAMS", tuple, None),
        module=module,
        model_units=_member(module, "model_units", callable, None),
    )


def registry() -> dict[str, ModuleType]:
    """Every formulation module of this package by its ``NAME``, each held to the contract."""
    out: dict[str, ModuleType] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = check(importlib.import_module(f"{__name__}.{info.name}"))
        out[name_of(module)] = module
    return out


def ten_family() -> dict[str, TenFormulation]:
    """Every registered formulation with ``DRIVER_FAMILY = "ten"``, as the drivers see it."""
    return {name: ten_formulation(m) for name, m in registry().items() if vars(m).get("DRIVER_FAMILY") == "ten"}


def get(name: str) -> ModuleType:
    """The formulation module registered as ``name``."""
    table = registry()
    if name not in table:
        raise InputError("formulation", f"unknown formulation {name!r}; known: {', '.join(sorted(table))}")
    return table[name]


# ---- what a built TEN model exposes ----------------------------------------------------------

@dataclass(frozen=True)
class TenModel:
    """The parts of a built TEN model that drivers read, whatever the formulation names them.

    ``data``: the TEN index the model was built on (:class:`collsynth.tens.ten.TenData`: the
    horizon, pre- and postcondition over global chunk ids in the model's direction, link pairs,
    delays, capacities). ``sent[c, l, t]``: chunk ``c`` crosses link pair ``l`` arriving at the
    end of timestep ``t`` (1 = the whole chunk). ``hold[c, n, t]``: node ``n`` holds chunk ``c``
    at the end of timestep ``t``; it has entries only where a holding may change, an absent one
    meaning held if ``data.pre[c, n]`` (the start state) and not held otherwise (the TACOS
    ILP, Won et al., TACOS, 2023, Section V-A). ``objective``: ``"arrivals"`` (maximise
    postcondition pairs held at the horizon) or ``"makespan"`` (all arrive; minimise the last
    timestep).
    """

    data: ten.TenData
    sent: pe.Var
    hold: pe.Var
    objective: str = "arrivals"

    @property
    def pairs(self) -> list[tuple[int, int]]:
        """Postcondition pairs ``(chunk, node)`` not held at the start: what must arrive."""
        cs, ns = np.nonzero(self.data.post & ~self.data.pre)
        return list(zip(cs.tolist(), ns.tolist()))

    def holding(self, c: int, n: int, t: int):
        """``hold[c, n, t]`` as the model states it: its variable, or the constant 1 / 0."""
        if self.data.pre[c, n]:
            return 1
        return self.hold[c, n, t] if (c, n, t) in self.hold else 0

    def sends(self, threshold: float = 0.5) -> np.ndarray:
        """The loaded solution's sends as rows ``(chunk, pair, arrival)`` (values above ``threshold``)."""
        rows = [idx for idx, v in self.sent.items() if v.value is not None and v.value > threshold]
        return np.array(sorted(rows), dtype=np.int64).reshape(-1, 3)

    def holdings(self, upto: int | None = None, threshold: float = 0.5) -> np.ndarray:
        """What the loaded solution holds (bool ``[chunk, node]``) at the end of timestep
        ``upto`` (default: the horizon)."""
        t_end = self.data.horizon if upto is None else int(upto)
        out = self.data.pre.copy()
        for (c, n, t), v in self.hold.items():
            if t == t_end and v.value is not None and v.value > threshold:
                out[c, n] = True
        return out

    def arrivals(self) -> int:
        """Postcondition pairs (not held at the start) the loaded solution holds at the horizon."""
        return int((self.holdings() & self.data.post & ~self.data.pre).sum())

    def required(self) -> int:
        """Postcondition pairs the model must deliver (not held at the start)."""
        return int((self.data.post & ~self.data.pre).sum())


@dataclass(frozen=True)
class MatrixRows:
    """The rows of one constraint ``component`` as the formulation built them, a CSR matrix
    over ``columns`` (the model's variables): row ``i`` is ``lower[i] <= sum(vals[k] *
    columns[cols[k]]) <= upper[i]`` over ``k`` in ``indptr[i]:indptr[i + 1]``. Recorded on the
    model (:func:`record_rows`) so that a backend loads them as a matrix
    (:mod:`collsynth.solvers.backends.highs_direct`) instead of reading every body back; a
    component recorded so is never modified afterwards (a formulation replaces it)."""

    component: pe.Constraint
    indptr: np.ndarray
    cols: np.ndarray
    vals: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    columns: list


MATRIX_ATTRIBUTE = "matrix_rows"  # where record_rows() keeps them on the Pyomo model, by component name


def record_rows(model: pe.ConcreteModel, rows: MatrixRows) -> None:
    """Record ``rows`` on ``model`` under its component's name (:func:`recorded_rows`)."""
    vars(model).setdefault(MATRIX_ATTRIBUTE, {})[rows.component.local_name] = rows


def recorded_rows(model: pe.ConcreteModel) -> dict[str, MatrixRows]:
    """The :class:`MatrixRows` recorded on ``model``, by component name (none: empty)."""
    return vars(model).get(MATRIX_ATTRIBUTE, {})


VIEW_ATTRIBUTE = "ten_model"  # where expose() keeps the view on the Pyomo model


def expose(model: pe.ConcreteModel, view: TenModel) -> pe.ConcreteModel:
    """Attach ``view`` to ``model`` (the last step of a TEN formulation's ``build``); checks
    that its variables belong to the model and are indexed by triples."""
    for role in ("sent", "hold"):
        var = getattr(view, role)
        if not isinstance(var, pe.Var) or var.model() is not model or var.dim() != 3:
            raise ContractError(f"model {model.name!r}: TenModel.{role} must be a Var of the model "
                                f"indexed by triples, got {var!r}")
    if view.objective not in OBJECTIVES:
        raise ContractError(f"model {model.name!r}: TenModel.objective must be one of {OBJECTIVES}, "
                            f"got {view.objective!r}")
    setattr(model, VIEW_ATTRIBUTE, view)
    return model


def ten_model(model: pe.ConcreteModel) -> TenModel:
    """The :class:`TenModel` a TEN formulation's ``build`` attached to ``model``."""
    view = vars(model).get(VIEW_ATTRIBUTE)
    if not isinstance(view, TenModel):
        raise ContractError(f"model {model.name!r} exposes no TenModel: a TEN formulation's build "
                            "must end with formulations.expose(model, TenModel(...))")
    return view
