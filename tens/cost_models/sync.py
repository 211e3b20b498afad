"""The synchronous alpha-beta model: the papers' model (Zhao et al., "Efficient Direct-Connect
Topologies for Collective Communications", NSDI 2025, Sections 2-3; the implementation and its
rules are :func:`collsynth.tens.cost.price_sync`)."""

from __future__ import annotations

import operator

from ..cost import Cost, price_sync
from . import Column, CostModel


def _price(schedule, instance, timestep=None, exact_deps=None, plan=None) -> Cost:
    return price_sync(schedule, instance, plan=plan)


# rate: at most a third of the least `benchmarks/bench_pricing.py --big` measured by CPU,
# 28 M hops/s (greedy, 64x64 torus)
MODEL = CostModel(
    name="sync", doc="synchronous alpha-beta price", price=_price, rate=9e6,
    bound=operator.attrgetter("sync"), routed_bound=operator.attrgetter("sync_routed"), bound_column="lower_bound_s",
    uses_plan=True,
    columns=(Column("T_L_s", "latency part of the synchronous alpha-beta price", operator.attrgetter("T_L_s")),
             Column("T_B_s", "bandwidth part of the synchronous alpha-beta price", operator.attrgetter("T_B_s"))),
)
