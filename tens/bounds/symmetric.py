"""Bounds on identical boxes: one box's demand rows and nodes stand for every box's.

Part of :mod:`collsynth.tens.bounds` (its module documentation describes every argument).

A box shift (:func:`collsynth.instances.box_shift.box_shift`) is a group ``G`` of automorphisms
of the topology (links to links of the same count, latency and bandwidth, switches to switches)
moving the first box's compute nodes onto every compute node exactly once, so ``G`` acts on the
compute nodes without fixed points and every orbit has ``|G|`` of them. When, moreover, the
demand is ``G``-invariant -- every row has an anchor (its single holder, else its single target),
distinct rows have distinct anchors, and the row anchored at ``g(a)`` is the row anchored at
``a`` with every node ``v`` moved to ``g(v)`` -- then for every ``g`` in ``G``:

- a path's length under any link weighting that ``g`` keeps (hops, latency, TEN delays) is its
  image's length, so the farthest needed node of a row is as far as its image's
  (:func:`collsynth.tens.bounds.distances.distance` is a maximum over rows: the representative
  rows alone give it), and a row's least crossings are its image's
  (:func:`collsynth.tens.bounds.distances.crossings`: the volume bound sums ``|G|`` equal terms
  per orbit, :func:`orbit_demand` scales the representatives' counts and bytes by ``|G|``);
- a node ``v`` and ``g(v)`` need the same bytes over links of the same bandwidths and latencies,
  so the per-node bounds (``inbound``, ``outbound``) are the same at both: the representatives
  of the node orbits suffice (:func:`representative_nodes`).

Checking generators suffices: the demand is invariant under a group when it is under the
generators (the composition of two maps keeping it keeps it). Nothing is assumed from a
generator's name: the shifts are found and checked on the topology, the demand's invariance is
checked row by row here.

>>> from collsynth.instances.generators import build
>>> from collsynth.instances.instance import make_instance
>>> from collsynth.tens.bounds.demand import demand_of
>>> inst = make_instance(build("dgx_h100", {"nodes": 3}), "allgather", message_bytes=24.0)
>>> o = row_orbits(inst.topology, demand_of(inst))
>>> o.rows.tolist(), o.size, representative_nodes(inst.topology, o).tolist()
([0], 24, [0, 24, 27])
>>> row_orbits(inst.topology, demand_of(make_instance(inst.topology, "broadcast", message_bytes=1.0, root=0))) is None
True
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numba import njit

from ...instances.box_shift import BoxShift, box_shift
from .demand import Demand


@dataclass(frozen=True)
class RowOrbits:
    """The demand rows anchored in the first box (``rows``), each standing for ``size`` rows
    (its images under the box shifts ``shift``)."""

    rows: np.ndarray
    size: int
    shift: BoxShift


def row_orbits(topology, demand: Demand) -> RowOrbits | None:
    """The representative rows of a demand invariant under the topology's box shifts (module
    doc), or None when there is no box shift, a row has no anchor, two rows share one, or a
    shift does not carry some row onto the row at its anchor's image."""
    shift = box_shift(topology)
    if shift is None or not len(demand):
        return None
    anchor = _anchors(demand)
    if anchor is None or len(np.unique(anchor)) != len(anchor):
        return None
    row_at = np.full(demand.pre.shape[1], -1, np.int64)
    row_at[anchor] = np.arange(len(anchor))
    for perm in shift.perms:
        image = row_at[perm[anchor]]
        if (image < 0).any() or not _rows_moved(demand, image, perm):
            return None
    first = np.asarray(shift.representatives(topology.npus), np.int64)
    reps = np.flatnonzero(np.isin(anchor, first))
    if len(reps) * shift.order != len(demand):
        return None
    return RowOrbits(reps, shift.order, shift)


def _anchors(demand: Demand) -> np.ndarray | None:
    """Per row: its single holder, else its single target; None when a row has neither."""
    held, wanted = demand.pre.sum(axis=1), demand.post.sum(axis=1)
    anchor = np.where(held == 1, np.argmax(demand.pre, axis=1), np.where(wanted == 1, np.argmax(demand.post, axis=1), -1))
    return None if (anchor < 0).any() else anchor.astype(np.int64)


def _rows_moved(demand: Demand, image: np.ndarray, perm: np.ndarray) -> bool:
    """Whether row ``image[r]`` is row ``r`` moved by ``perm`` (node ``v`` to ``perm[v]``),
    with the same kind, chunk count, bytes and collective, for every row ``r``."""
    for name in ("combining", "count", "nbytes", "group"):
        col = getattr(demand, name)
        if not np.array_equal(col[image], col):
            return False
    return all(_moved(np.ascontiguousarray(m), image, np.asarray(perm, np.int64)) for m in (demand.pre, demand.post))


@njit(cache=True, nogil=True)
def _moved(m, image, perm):
    """``m[image[r], perm[v]] == m[r, v]`` for every row ``r`` and node ``v``."""
    for r in range(m.shape[0]):
        i = image[r]
        for v in range(m.shape[1]):
            if m[i, perm[v]] != m[r, v]:
                return False
    return True


def warm() -> None:
    """Compile (or load from numba's cache) the invariance check's kernel."""
    _moved(np.zeros((1, 1), bool), np.zeros(1, np.int64), np.zeros(1, np.int64))


def orbit_demand(demand: Demand, orbits: RowOrbits) -> Demand:
    """The representative rows, each counting (chunks, bytes) for its whole orbit: the same
    farthest distances and the same volume as ``demand`` (module doc)."""
    d = demand.select(orbits.rows)
    return replace(d, count=d.count * orbits.size, nbytes=d.nbytes * orbits.size)


def representative_nodes(topology, orbits: RowOrbits) -> np.ndarray:
    """One node per orbit of the box shifts: the least id of each orbit, switches included."""
    least = np.arange(topology.size, dtype=np.int64)
    for _ in range(2):  # a second pass settles orbits reached through a later generator
        for perm, order in zip(orbits.shift.perms, orbits.shift.orders):
            cur = np.arange(topology.size, dtype=np.int64)
            for _ in range(order - 1):
                cur = perm[cur]
                np.minimum(least, least[cur], out=least)
    live = np.asarray(topology.nodes, np.int64)
    return np.unique(least[live])
