"""The TEN timestep model (Won et al., "TACOS: Topology-Aware Collective Algorithm Synthesizer
for Distributed Training", MICRO 2024, Sections IV-A and IV-C; the implementation and its
rules are :func:`collsynth.tens.cost.price_ten`)."""

from __future__ import annotations

import operator

from ..cost import price_ten
from . import CostModel

# rate: at most a third of the least `benchmarks/bench_pricing.py --big` measured by CPU,
# 8 M hops/s (greedy, 64x64 torus)
MODEL = CostModel(name="ten", doc="TEN timestep price", price=price_ten, rate=2.5e6,
                  bound=operator.attrgetter("ten"), uses_plan=True)
