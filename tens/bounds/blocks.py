"""All-to-all cut bounds at the blocks of a cluster's box shift: a box, a scalable unit, a pod.

An all-to-all sends ``m`` bytes from every participant to every other. For a set ``S`` of
``s`` of the ``N`` participants, the ``s (N - s) m`` bytes leaving ``S`` cross every cut that
separates ``S`` from the others, whichever side each switch is on; at most ``C(S)`` bytes a
second cross the least such cut (its directed capacity, a min cut), so no schedule moves them
in less than ``s (N - s) m / C(S)`` under ``sync`` (a step's time is at least the most loaded
link's, so the steps' sum is at least the cut's bytes over its capacity) or ``event`` (the cut's
links carry at most ``C(S)`` bytes a second). This is the cut argument of
:mod:`collsynth.tens.bounds` (Zhao et al., "ForestColl", arXiv 2402.06787, Section 4, for the
sets of GPUs and their switches; the per-box and per-group cuts of PXN, NCCL 2.12) for the sets
where the hierarchy makes it bind: the nested blocks of the box shift
(:func:`collsynth.instances.box_shift.box_shift`: the first ``d`` GPUs, then the first ``d
o_1``, ...), at thousands of GPUs, where the general parametric search runs out of its budget
and keeps only the volume bound. One min cut (:func:`scipy.sparse.csgraph.maximum_flow`) per
level.

>>> from collsynth.instances import make_instance
>>> from collsynth.instances.generators import build
>>> inst = make_instance(build("dgx_h100", {"nodes": 4}), "alltoall", message_bytes=32e6)
>>> b = block_cut(inst)  # a box's 8 GPUs send 8 x 24 x 1 MB over 8 NICs of 50 GB/s
>>> round(b.value * 1e6, 3), b.witness
(480.0, (0, 1, 2, 3, 4, 5, 6, 7))
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import maximum_flow

from ...instances.box_shift import box_shift
from .record import Bound, not_computed

UNIT = 1e6  # capacities in MB/s where no common divisor serves, rounded up (a cut counted no smaller: still a bound)


def block_cut(instance, model: str = "sync") -> Bound | None:
    """The largest all-to-all cut bound (seconds, module doc) over the box shift's nested
    blocks of participants, witness the block; None when the collective is not an all-to-all
    or the fabric has no box shift."""
    topo, coll = instance.topology, instance.collective
    if coll.kind != "alltoall":
        return None
    shift = box_shift(topo, coll.nodes)
    if shift is None:
        return None
    nodes = sorted(int(v) for v in coll.nodes)
    n, pair = len(nodes), coll.chunk_bytes * coll.chunks_per_node
    sizes, unit = {1, shift.box}, shift.box
    for order in shift.orders[:-1]:
        unit *= order
        sizes.add(unit)
    best = None
    for s in sorted(x for x in sizes if x < n):
        cut = min_cut(topo, nodes[:s], nodes[s:])
        seconds = s * (n - s) * pair / cut
        if best is None or seconds > best.value:
            best = Bound(seconds, "s", model, "block cut", tuple(nodes[:s]),
                         f"{s * (n - s) * pair:.4g} B over a min cut of {cut:.4g} B/s")
    return best


def block_cut_seconds(instance) -> Bound:
    """:func:`block_cut` as one of the instance's bounds (:func:`collsynth.tens.bounds.instance_bounds`,
    model ``event``, renamed per model there), or not computed and why."""
    if instance.concurrent or instance.collective.kind != "alltoall":
        return not_computed("event", "block cut", "only a single all-to-all")
    found = block_cut(instance, "event")
    return found if found is not None else not_computed("event", "block cut", "no box shift found")


def min_cut(topology, inside, outside) -> float:
    """The least directed capacity (bytes/s, rounded up to :data:`UNIT`) of links from a node
    set holding ``inside`` to its complement holding ``outside`` (switches on either side)."""
    la = topology.link_arrays
    size = topology.size
    source, sink = size, size + 1
    unit = capacity_unit(la.bandwidth)
    links = np.ceil(la.bandwidth / unit - 1e-9).astype(np.int64)
    big = int(links.sum()) + 1
    rows = np.concatenate([la.src, np.full(len(inside), source), np.asarray(outside, np.int64)])
    cols = np.concatenate([la.dst, np.asarray(inside, np.int64), np.full(len(outside), sink)])
    caps = np.concatenate([links, np.full(len(inside) + len(outside), big)]).astype(np.int32)
    graph = sp.csr_matrix((caps, (rows, cols)), shape=(size + 2, size + 2))
    graph.sum_duplicates()
    return float(maximum_flow(graph, source, sink).flow_value) * unit


def capacity_unit(bandwidth: np.ndarray) -> float:
    """The unit capacities are counted in: the greatest common divisor of the bandwidths when
    they are whole bytes a second and their sum in it fits 32-bit flows (exact), else the
    least multiple of :data:`UNIT` whose rounded-up capacities fit (a cut counted no smaller).

    >>> capacity_unit(np.array([50e9, 450e9, 25e9]))
    25000000000.0
    """
    whole = np.all(bandwidth == np.round(bandwidth)) and bandwidth.max() < 2 ** 62
    if whole:
        g = int(np.gcd.reduce(np.round(bandwidth).astype(np.int64)))
        if g > 0 and bandwidth.sum() / g < 2 ** 30:
            return float(g)
    return UNIT * max(1.0, math.ceil(bandwidth.sum() / UNIT / 2 ** 30))
