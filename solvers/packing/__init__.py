"""Tree packing: throughput-optimal pipelined spanning trees (Zhao et al., ForestColl, arXiv 2402.06787).

:mod:`.boxes` says once what a box is (its GPUs, its crossbar, the entries from every other
box; a new box shape is added there alone), :mod:`.splitting` removes switches by edge
splitting, :mod:`.trees` packs and routes the trees, :mod:`.twolevel` finds trees with at most
one relay, :mod:`.rings` trees along rings through each box, :mod:`.orders` chooses the packing's root
order by the FIFO event price, :mod:`.shapes` keeps among finished forests of different shapes one
no slower than the reference under every model, :mod:`.producer` emits the schedule and registers the
``tree-packing`` producer.
"""

from .producer import PRODUCERS

__all__ = ["PRODUCERS"]
