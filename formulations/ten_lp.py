"""TEN LP: the fractional relaxation of the TACOS ILP (seed 001 V-A), a polynomial lower bound.

Same model as :mod:`.ten_ilp` with ``hold`` and ``sent`` continuous in [0, 1]. Any schedule
that delivers everything in ``T`` timesteps is a feasible point of the LP at horizon ``T``
with the full arrivals objective, so if the LP optimum at ``T`` falls short of the number of
postcondition pairs, no schedule fits in ``T`` timesteps: :func:`bound` returns ``T + 1``, else
``T``. The smallest ``T`` whose LP delivers everything (found by
:func:`collsynth.solvers.ten` from the combinatorial lower bound upward) is the LP lower bound
reported beside every ILP. The LP's sends are fractional flows, not pieces with positions
(two halves sent from one holder may be the same half), so :func:`extract` gives a schedule
only when the LP solution is integral; :func:`fractional` lists the flows.
"""

from __future__ import annotations

import numpy as np
import pyomo.environ as pe

from . import ten_ilp
from .ten_ilp import NotSupported, lower_bound  # noqa: F401 - same combinatorial bound

NAME = "ten-lp"
DRIVER_FAMILY = "ten"  # solved by the horizon / early-stop / time-cluster drivers
TOL = 1e-6


def build(instance, horizon: int, state=None, **params) -> pe.ConcreteModel:
    """The LP relaxation of :func:`collsynth.formulations.ten_ilp.build` (same parameters)."""
    params.pop("relax", None)
    return ten_ilp.build(instance, horizon, state, relax=True, **params)


def integral(model) -> bool:
    """True when every loaded ``sent``/``hold`` value is within 1e-6 of 0 or 1."""
    for comp in (model.sent, model.hold):
        for v in comp.values():
            x = v.value or 0.0
            if min(abs(x), abs(1 - x)) > TOL:
                return False
    return True


def extract(model):
    """The schedule of an integral LP solution (a fractional one raises NotSupported)."""
    if not integral(model):
        raise NotSupported("the LP solution is fractional: it bounds, it does not schedule")
    return ten_ilp.extract(model)


def fractional(model) -> list[tuple[int, int, int, int, float]]:
    """The LP's flows ``(chunk, src, dst, arrival_step, amount)`` with amount > 1e-6."""
    data = model._ten
    out = []
    for (c, l, t), v in model.sent.items():
        if v.value is not None and v.value > TOL:
            out.append((int(c), int(data.src[l]), int(data.dst[l]), int(t), float(v.value)))
    return sorted(out)


def bound(model):
    """Lower bound on timesteps proven by the solved LP (arrivals objective, see module doc)."""
    data = model._ten
    need = data.post & ~data.pre
    total = int(need.sum())
    got = 0.0
    for c, n in model._pairs:
        if (c, n, data.horizon) in model.hold:
            got += model.hold[c, n, data.horizon].value or 0.0
    return data.horizon if got >= total - 1e-6 * max(1, total) else data.horizon + 1


def complete(model) -> bool:
    """The solved LP delivers (fractionally) every postcondition pair by its horizon."""
    return bound(model) == model._ten.horizon


__all__ = ["NAME", "build", "extract", "bound", "fractional", "integral", "complete", "lower_bound"]
