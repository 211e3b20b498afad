"""The congestion-aware event simulation: FIFO links, store-and-forward routes, data
dependencies and no step barriers (the implementation and its rules are
:func:`collsynth.tens.cost.price_event`; ``docs/cost-models.md``)."""

from __future__ import annotations

import operator

from ..cost import Cost, prepare_event, price_event
from . import CostModel


def _price(schedule, instance, timestep=None, exact_deps=None, plan=None) -> Cost:
    return price_event(schedule, instance, exact_deps=exact_deps, plan=plan)


# rate: at most a third of the least `benchmarks/bench_pricing.py --big` measured by CPU,
# 6.9 M hops/s (greedy, 64x64 torus); 14 M on the long routes of its mid-size direct-ring case
MODEL = CostModel(name="event", doc="congestion-aware event simulation price", price=_price, rate=1.5e6,
                  bound=operator.attrgetter("event"), uses_plan=True, prepare=prepare_event)
