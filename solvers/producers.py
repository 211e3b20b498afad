"""The producer registry: every method that turns an Instance into a Schedule, by name.

A producer family is a module listed in :data:`FAMILY_MODULES` with a module-level
``PRODUCERS`` list of :class:`Producer`. A producer's ``run(instance, options)`` returns an
:class:`Outcome`: the schedule (unverified; :func:`collsynth.solvers.pipeline.run` verifies and
prices every schedule before anything else sees it) and what the method knows about it
(solver status, objective, bound, closed-form cost, ...).

A producer that cannot handle an instance raises :class:`Unsupported` with a reason; the
pipeline turns it into a clear one-line error (CLI) or a ``skipped`` row (batch).
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from typing import Any, Callable

from ..instances import Instance
from ..tens.schedule import Schedule

FAMILY_MODULES = (
    "collsynth.solvers.ten.producers",  # ten-ilp, ten-lp, ten-ilp-nocongestion (formulations + drivers)
    "collsynth.solvers.bfb.driver",  # bfb-lp, bfb-chunked, bfb-hetero
    "collsynth.solvers.greedy.tacos",  # greedy (TACOS-Greedy)
    "collsynth.solvers.closed_form",  # ring, trees, butterfly, swing, optree, ...
    "collsynth.solvers.bfb.expansions",  # line-graph, degree, cartesian expansions
)

STATUSES = ("optimal", "feasible", "infeasible", "no-solution", "error", "skipped", "heuristic", "constructed")


class Unsupported(Exception):
    """The producer does not handle this instance (topology or collective); the message says why."""


@dataclass
class Options:
    """What a user can ask of a producer run (CLI flags and batch axes)."""

    solver: str = "highs"
    driver: str | None = None
    time_limit: float = 60.0
    gap: float | None = None
    threads: int = 1
    seed: int = 0
    starts: int = 1
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class Outcome:
    """What a producer returns: a schedule (or none) and what it knows about it.

    ``status``: optimal / feasible (limit hit, incumbent kept) / infeasible / no-solution /
    error / skipped (licence limit, unavailable) for solver-based producers; ``heuristic``
    (greedy) or ``constructed`` (closed forms, expansions) otherwise. ``objective``/``bound``
    are in the producer's own units (``units`` says which, e.g. "steps"). ``extra`` holds
    method-specific figures (closed-form T_L/T_B, theorem predictions, seed spread, ...).
    """

    schedule: Schedule | None
    status: str
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    units: str = "steps"
    build_s: float = 0.0
    solve_s: float = 0.0
    solver: str = ""
    version: str = ""
    nodes: int | None = None
    message: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Producer:
    """A named method: ``run(instance, options) -> Outcome``.

    ``family`` groups producers in listings (formulation, bfb, greedy, closed-form,
    expansion); ``uses_solver`` says whether ``--solver`` applies; ``drivers`` lists the
    drivers it accepts (empty: none).
    """

    name: str
    family: str
    run: Callable[[Instance, Options], Outcome]
    summary: str = ""
    uses_solver: bool = False
    drivers: tuple[str, ...] = ()


def family_modules() -> tuple[str, ...]:
    """The built-in families plus plug-in modules named in ``COLLSYNTH_PRODUCERS``
    (comma-separated importable modules, each with a ``PRODUCERS`` list)."""
    extra = [m.strip() for m in os.environ.get("COLLSYNTH_PRODUCERS", "").split(",") if m.strip()]
    return FAMILY_MODULES + tuple(extra)


def producers() -> dict[str, Producer]:
    """Every installed producer by name (families whose module is absent are skipped)."""
    out: dict[str, Producer] = {}
    for name in family_modules():
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name == name:
                continue
            raise
        for p in getattr(module, "PRODUCERS", ()):
            if p.name in out:
                raise RuntimeError(f"producer {p.name!r} registered twice ({name})")
            out[p.name] = p
    return out


def get(name: str) -> Producer:
    """The producer called ``name``; an InputError listing the known ones otherwise."""
    from .. import InputError

    table = producers()
    if name not in table:
        raise InputError("--producer", f"unknown producer {name!r}; known: {', '.join(sorted(table))}")
    return table[name]
