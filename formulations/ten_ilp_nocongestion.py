"""The congestion-blind TEN ILP (a TACCL-like baseline): TACOS-ILP without link capacity.

Same holdings and sends as :mod:`.ten_ilp` (Won et al., TACOS, 2023, Section V-A) but no ``ineq_link_capacity``
rows: any number of chunks may cross a link in a timestep, as in synthesizers that ignore
contention. The schedules it finds are valid (every send has its data) but may overload links;
the pipeline prices every schedule with the same congestion-aware cost models
(:func:`collsynth.tens.cost_models.price`), so the comparison with ten-ilp is honest. Its timestep
lower bound is only the delay-weighted distance (no inbound-throughput term): the contract's
default for a formulation that declares ``RESPECTS_CAPACITY = False``.
"""

from __future__ import annotations

import pyomo.core as pe

from . import ten_ilp

NAME = "ten-ilp-nocongestion"
SUMMARY = "TEN ILP without link capacity (TACCL-like baseline), priced with congestion"
DRIVER_FAMILY = "ten"  # solved by the horizon / early-stop / time-cluster drivers
RESPECTS_CAPACITY = False  # its timesteps are bounded by distance only (the contract's default bound)
PARAMS = tuple(p for p in ten_ilp.PARAMS if p[0] != "capacity")  # what build takes
extract = ten_ilp.extract


def build(instance, horizon: int, state=None, **params) -> pe.ConcreteModel:
    """:func:`collsynth.formulations.ten_ilp.build` with ``capacity=False``."""
    params.pop("capacity", None)
    return ten_ilp.build(instance, horizon, state, capacity=False, **params)
