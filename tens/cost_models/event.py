"""The congestion-aware event simulation: FIFO links, store-and-forward routes, data
dependencies and no step barriers (the implementation and its rules are
:func:`collsynth.tens.cost.price_event`; ``docs/cost-models.md``)."""

from __future__ import annotations

import operator

from ..cost import Cost, prepare_event, price_event
from . import CostModel


def _price(schedule, instance, timestep=None, exact_deps=None, plan=None) -> Cost:
    return price_event(schedule, instance, exact_deps=exact_deps, plan=plan)


# rate: at most a third of the least measured, 4.5 M hops/s by CPU (greedy, 64x64 torus, deriving its pricing plan alone;
# 6.9 M in `benchmarks/bench_pricing.py --big`, where it shares the plan of the models priced before it)
MODEL = CostModel(name="event", doc="congestion-aware event simulation price", price=_price, rate=1.5e6,
                  bound=operator.attrgetter("event"), uses_plan=True, prepare=prepare_event)
