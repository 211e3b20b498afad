"""Tree packing: throughput-optimal pipelined spanning trees (Zhao et al., ForestColl, arXiv 2402.06787).

:mod:`.splitting` removes switches by edge splitting, :mod:`.trees` packs and routes the trees,
:mod:`.twolevel` finds trees with at most one relay, :mod:`.orders` chooses the packing's root
order by the FIFO event price, :mod:`.producer` emits the schedule and registers the
``tree-packing`` producer.
"""

from .producer import PRODUCERS

__all__ = ["PRODUCERS"]
