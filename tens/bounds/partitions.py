"""The partition bound of allreduce, switches that reduce inside regions (every cost model: seconds and TEN timesteps).

Part of :mod:`collsynth.tens.bounds` (its module documentation describes every argument).

The argument
------------
An allreduce of ``M`` bytes over the participants ``P`` ends with every participant holding
the sum of every participant's input. Switches store nothing; they may copy (multicast), and a
switch that reduces (:mod:`collsynth.instances.switch_ops`) adds what reaches it in one step.
Take node sets ``R_1 .. R_k`` (``k >= 2``), pairwise disjoint, each holding at least one
participant, together holding every compute node and every reducing switch (either may add
what it relays, so it must sit in some ``R_i``); switches that do not reduce may sit in a
region or in none. Let ``B_i`` be the bandwidth of the links entering ``R_i``
(from another region or from a switch in none). Then every schedule takes at least::

    T >= max( max_i M / B_i ,  2 (k - 1) M / sum_i B_i )

Proof, for one byte position of the buffer (every byte is its own problem; a piece carries
a partial sum of some inputs for each byte it spans). Call what region ``R_i`` *knows* the
set of inputs appearing in some partial sum one of its nodes holds. A message from a compute
node ``u`` (or a reducing switch) reaching a node ``v`` of another region carries a partial sum
of what ``u`` held or summed, so it tells ``v``'s region at most what ``u``'s region knew; a
switch in no region only copies it (it does not reduce). Order every cross-region delivery by
arrival and replace it by a *call* that gives the receiving region everything the sending
region knows at that moment: by induction every region knows at least as much as in the
schedule, so the calls end with every region
knowing all ``k`` regions' inputs. A sequence of one-way calls that does this among ``k``
parties has at least ``2 (k - 1)`` calls (the one-way gossip bound, e.g. Hedetniemi,
Hedetniemi and Liestman, "A survey of gossiping and broadcasting in communication
networks", Networks 18(4), 1988, Section 2): let call ``c*`` be the first after which some
party ``x`` knows everything; each other party's input reached ``x`` by then, so each of the
``k - 1`` others made a call up to ``c*`` (distinct calls: distinct callers); after ``c*``
only ``x`` knows everything, so each of the ``k - 1`` others receives a call after ``c*``.
A delivery entering a region crosses a link entering it (deliveries copied inside the region
after one crossing merge into one call at the first arrival, which only helps), so the bytes
crossing into all regions are at least ``2 (k - 1) M``, and into each region at least ``M``
(it needs inputs from outside). A link of bandwidth ``b`` carries at most ``b T`` bytes by
``T`` under ``event``, ``ten`` and in the bandwidth time ``T_B`` of ``sync``; in TEN timesteps a
link pair delivers at most its capacity per chunk delay, and each of the buffer's chunks
crosses as each byte does.

Two optima by hand
------------------
* **One switch** (Patarasuk and Yuan, "Bandwidth optimal all-reduce algorithms for clusters
  of workstations", J. Parallel Distrib. Comput. 69(2), 2009, Section 3): ``N`` GPUs, each
  with a link of bandwidth ``B`` each way to one switch. Every GPU its own region, the switch
  in none: ``B_i = B``, so ``T >= 2 (N - 1) M / (N B)``. Reduce-scatter then allgather,
  each GPU sending each of its ``N - 1`` foreign blocks of ``M / N`` once per half through the
  switch, loads every link with ``2 (N - 1) M / N`` bytes: the optimum. ``N = 4, M = 8,
  B = 1``: 12 s (the per-node cut bound of :mod:`.cuts` proves only ``M / B = 8`` s).
* **A unidirectional ring** of ``N`` nodes, bandwidth ``B``: every node its own region,
  ``B_i = B``, the same ``2 (N - 1) M / (N B)``, met by the ring allreduce (Patarasuk and
  Yuan, Section 4: ``2 (N - 1)`` steps of ``M / N``). ``N = 3, M = 3, B = 1``: 4 s.

>>> from collsynth.instances.generators import build
>>> from collsynth.instances.instance import make_instance
>>> star = build("switch", {"nodes": 4}, bandwidth=1.0, alpha=0.0)
>>> partition_bound(make_instance(star, "allreduce", message_bytes=8.0)).value
12.0
>>> ring = build("ring", {"nodes": 3, "bidirectional": False}, bandwidth=1.0, alpha=0.0)
>>> partition_bound(make_instance(ring, "allreduce", message_bytes=3.0)).value
4.0

Which partitions are tried
--------------------------
Any partition gives a valid bound; :func:`candidate_regions` tries the ones hierarchy
suggests: for each link bandwidth ``theta`` of the topology, the connected components of the
links at least that fast (boxes behind their NVSwitch, OAM pairs, single GPUs when no link is
fast enough), and the components left when the switches that do not reduce are taken out
(boxes around their reducing NVSwitch, joined by rails that only forward); switches that do not
reduce alone in a component sit in no region, and the best of these is taken.

Boxes whose switches reduce, joined by rails that do not (``dgx_h100 nvls=true``, ``k`` boxes
with ``8 x 50 GB/s`` of NICs each): ``T >= 2 (k - 1) M / (k x 400 GB/s)``, the ring's NIC
volume, whatever the boxes sum inside: in-box sums save nothing across plain rails (NCCL
finds the same: NVIDIA/nccl issue 1221, NVLS gains on one or two nodes, not on more).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from ...instances.instance import Instance
from ...instances.switch_ops import reducing_mask
from .demand import Arcs, arcs_of
from .record import UNITS, Bound, not_computed
from .supply import EventSupply, Supply


def region_time(arcs: Arcs, region: np.ndarray, need: float, supply: Supply) -> float:
    """The smallest time by which the links entering every region ``i`` (``region[node]``,
    ``-1``: in none) deliver ``need`` (``M``: bytes, or chunks) into it and, all together,
    ``2 (k - 1) M`` (module doc), what those links deliver by a time given by ``supply`` (one
    cost model's :class:`~collsynth.tens.bounds.supply.Supply`); with bandwidth alone this is
    ``max(max_i M / B_i, 2 (k - 1) M / sum_i B_i)``.

    >>> from collsynth.instances.generators import build
    >>> from collsynth.tens.bounds.supply import SyncSupply
    >>> arcs = arcs_of(build("switch", {"nodes": 3}, bandwidth=2.0, alpha=0.0))
    >>> region_time(arcs, np.array([0, 1, 2, -1]), 6.0, SyncSupply(arcs))  # 2 * 2 * 6 / (3 * 2)
    4.0
    """
    k = int(region.max()) + 1
    src, dst = region[arcs.src], region[arcs.dst]
    entering = (dst >= 0) & (src != dst)
    each = max(supply.smallest(np.flatnonzero(entering & (dst == i)), need) for i in range(k))
    return max(each, supply.smallest(np.flatnonzero(entering), 2 * (k - 1) * need))


def candidate_regions(arcs: Arcs, switches: np.ndarray, participants: np.ndarray):
    """Yield ``(theta, region)``: for each link bandwidth ``theta`` (and above all of them),
    the components of the links at least ``theta`` fast as regions (``region[node]``, ``-1``
    for a component without a compute node), then (``theta`` None) the components of the links
    between nodes other than ``switches`` (the switches that do not reduce; a reducing switch
    counts as a compute node); a component with compute nodes but no participant joins region
    0 (any region is valid). Partitions of fewer than two regions are skipped."""
    n = arcs.size
    compute = np.zeros(n, bool)
    compute[arcs.nodes] = True
    compute[switches] = False
    part = np.zeros(n, bool)
    part[participants] = True
    thetas = [math.inf] + sorted(set(arcs.bandwidth.tolist()), reverse=True)
    for theta in thetas + ([None] if len(switches) else []):
        keep = arcs.bandwidth >= theta if theta is not None else compute[arcs.src] & compute[arcs.dst]
        graph = coo_matrix((np.ones(int(keep.sum())), (arcs.src[keep], arcs.dst[keep])), shape=(n, n))
        _, label = connected_components(graph, directed=True, connection="weak")
        has_part = np.bincount(label, weights=part, minlength=n) > 0
        has_compute = np.bincount(label, weights=compute, minlength=n) > 0
        ids = np.full(n, -1)
        ids[np.flatnonzero(has_part)] = np.arange(int(has_part.sum()))
        if has_part.sum() < 2:
            continue
        region = ids[label]
        region[has_compute[label] & ~has_part[label]] = 0
        yield theta, region


def partition_bound(instance: Instance, supply: Supply | None = None, model: str = "event",
                    convert=lambda t: t) -> Bound:
    """The partition bound of a single allreduce, reducing switches inside regions
    (module doc: the one-way gossip count over regions; Patarasuk and Yuan, J. Parallel
    Distrib. Comput. 69(2), 2009, on one switch) under ``model``, with what links deliver by a
    time given by ``supply`` (default: the event model's, latency included;
    :class:`~collsynth.tens.bounds.supply.SyncSupply` bounds the sync model's bandwidth time;
    :class:`~collsynth.tens.bounds.supply.TimestepSupply` counts chunks, every chunk of the
    buffer crossing as every byte does), its time through ``convert`` (e.g. TEN timesteps to
    seconds); the best over :func:`candidate_regions`."""
    if instance.concurrent or instance.collective.kind != "allreduce":
        return not_computed(model, "partition", "only a single allreduce")
    topo, coll = instance.topology, instance.collective
    arcs = arcs_of(topo)
    supply = EventSupply(arcs) if supply is None else supply
    need = len(coll.nodes) * coll.chunks_per_node if model == "timesteps" else coll.message_bytes
    reducing = reducing_mask(topo)
    switches = np.array([w for w in sorted(topo.switches) if not reducing[w]], np.int64)  # in no region or any
    best: tuple[float, float | None, int] | None = None
    for theta, region in candidate_regions(arcs, switches, np.asarray(coll.nodes, np.int64)):
        value = region_time(arcs, region, need, supply)
        if math.isfinite(value) and (best is None or value > best[0]):
            best = (value, theta, int(region.max()) + 1)
    if best is None:
        return not_computed(model, "partition", "fewer than two participants")
    value, theta, k = best
    joined = "switches that do not reduce" if theta is None else "no links" if math.isinf(theta) \
        else f"links of >= {theta:.4g} B/s"
    return Bound(convert(value), UNITS[model], model, "partition", f"k={k} regions",
                 f"{k} regions joined by {joined}; switches between them in none")
