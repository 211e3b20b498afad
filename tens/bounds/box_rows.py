"""Bounds on identical boxes without the whole demand: the rows one box's nodes hold or need.

Part of :mod:`collsynth.tens.bounds` (its module documentation describes every argument).

An all-to-all of ``N`` ranks has ``N (N - 1)`` demand rows, one per ordered pair
(:func:`collsynth.tens.bounds.demand.demand_of`): at 4,096 ranks on a fabric of 4,616 node
ids, some 144 GiB of rows (pre and post, a byte per node id) before anything is computed. On identical boxes
(:func:`collsynth.instances.box_shift.box_shift`: a group ``G`` of automorphisms moving the
first box's compute nodes onto every compute node once) no more is needed, for a collective
over every compute node whose kind has no root: its chunk-id rule treats every rank alike
(:class:`collsynth.instances.collective.Collective`), so ``g`` in ``G`` carries the rows of
chunk ``(i, k)`` onto those of ``(g(i), g(k))``, with the same bytes, and the demand is
``G``-invariant by construction. The arguments of :mod:`.symmetric` then read:

- the distance and volume bounds: the rows anchored (single holder, else single target) in the
  first box, each counting for its ``|G|`` images (distinct rows have distinct images: ``G``
  moves every compute node, so every anchor, off itself);
- the per-node bounds at one node per orbit (:func:`.symmetric.representative_nodes`): the rows
  that node holds or needs, which are all among the rows touching a representative node.

So the rows touching the representative nodes (:meth:`Collective.chunks_touching`, read from
the chunk-id rule, ``2 d N`` rows of an all-to-all with ``d`` GPUs a box) stand for the demand:
the distance, volume and per-node bounds are those of the whole demand. The cut search reads
them as they are: a schedule of the whole demand serves every part of it, so a cut that the
part must cross is still a bound, possibly below the whole demand's (the block cut,
:mod:`.blocks`, is the all-to-all's cut at scale). Used where the whole demand has more than
:data:`BOX_CELLS` rows x node ids and the part is at most half of its rows.

>>> from collsynth.instances.generators import build
>>> from collsynth.instances.instance import make_instance
>>> inst = make_instance(build("dgx_h100", {"nodes": 3}), "alltoall", message_bytes=24.0)
>>> demand, orbits = box_demand(inst, cells=0)  # GPU 0 sends to 23, takes in from 23
>>> len(demand), orbits.rows.tolist()[:3], orbits.size
(46, [0, 1, 2], 24)
"""

from __future__ import annotations

import numpy as np

from ...instances.box_shift import box_shift
from ...instances.collective import ROOTED
from .demand import Demand, _rows_needing
from .symmetric import RowOrbits, _anchors, representative_nodes

BOX_CELLS = 1 << 24  # rows x node ids of the whole demand above which one box's rows stand for it


def box_demand(instance, cells: int = BOX_CELLS) -> tuple[Demand, RowOrbits] | None:
    """The rows touching one node per orbit of the box shifts, and those of them anchored in
    the first box as the orbits' representatives (module doc); None for several collectives,
    a rooted kind, a fabric without box shifts, a whole demand of at most ``cells`` rows x
    node ids, or one whose part would be over half its rows."""
    if instance.concurrent:
        return None
    coll, topo = instance.collective, instance.topology
    if coll.kind in ROOTED:
        return None
    rows = coll.num_used_chunks // coll.chunks_per_node  # the pieces of a shard share their conditions
    shift = box_shift(topo, coll.nodes)
    if rows * topo.size <= cells or shift is None:
        return None
    nodes = representative_nodes(topo, RowOrbits(np.zeros(0, np.int64), shift.order, shift))
    ids = coll.chunks_touching(nodes)
    ids = ids[ids % coll.chunks_per_node == 0]
    if 2 * len(ids) > rows:
        return None
    pre, post = coll.condition_rows(ids)
    keep = np.flatnonzero(_rows_needing(pre, post, np.arange(len(ids)), coll.combining))
    pre, post = pre[keep], post[keep]
    count = np.full(len(keep), coll.chunks_per_node, np.int64)
    demand = Demand(pre, post, np.full(len(keep), coll.combining), count, count * float(coll.chunk_bytes),
                    np.zeros(len(keep), np.int64))
    anchor = _anchors(demand)
    if anchor is None:
        return None
    first = np.asarray(shift.representatives(coll.nodes), np.int64)
    return demand, RowOrbits(np.flatnonzero(np.isin(anchor, first)), shift.order, shift)
