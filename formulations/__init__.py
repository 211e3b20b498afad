"""Solver-agnostic Pyomo formulations, one module per formulation, found by name.

A formulation module exposes (see ``ten_ilp.py`` as the model to copy)::

    NAME = "ten-ilp"                      # the producer name; default: module name with '-'
    def build(instance, horizon, state=None, **params) -> pyomo.environ.ConcreteModel
    def extract(model) -> collsynth.tens.schedule.Schedule
    def bound(model) -> float | None      # optional: a bound the model proves

No formulation imports a solver. :func:`registry` discovers every module of this package
that has ``build`` and ``extract``, so adding a formulation is adding one file.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def registry() -> dict[str, ModuleType]:
    """Every formulation module of this package, by its ``NAME``."""
    out: dict[str, ModuleType] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "build") and hasattr(module, "extract"):
            out[getattr(module, "NAME", info.name.replace("_", "-"))] = module
    return out


def get(name: str) -> ModuleType:
    """The formulation module registered as ``name``."""
    from .. import InputError

    table = registry()
    if name not in table:
        raise InputError("formulation", f"unknown formulation {name!r}; known: {', '.join(sorted(table))}")
    return table[name]
