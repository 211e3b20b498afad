"""PXN all-to-all kept as routes plus a pipeline rule: one box's routes, moved to every box.

The ``rail-alltoall`` paths (:mod:`.rail_alltoall`: NCCL's PXN, NVIDIA NCCL 2.12 release
notes, 2022; ECMP over spines as Al-Fares et al., SIGCOMM'08, Section 3) number ``N (N - 1)``
pairs, tens of millions of route hops at 4,096 GPUs. On a cluster of identical boxes
(:func:`collsynth.instances.box_shift.box_shift`: commuting automorphisms whose products move
the first ``d`` GPUs onto every GPU once) the routes of those ``d`` sources suffice: moved by
every product, source ``s``'s route to ``t`` becomes ``g(s)``'s route to ``g(t)``, so every
pair is routed once, and each link of an orbit of ``o`` links carries ``m / o`` times what the
listed routes put on the orbit (``m`` products). Each route is a "tree" of one path in a
:class:`~collsynth.tens.pipelined_trees.PipelinedTrees` of kind ``alltoall`` (piece ``q`` over
the route's ``h``-th hop in step ``q + h + 1``, as :func:`collsynth.solvers.flow.alltoall.emit`
sends), verified and priced (``sync``) in that form, listed as sends on request.

A listed source splits every block over the planes (``k = planes`` units, unit ``p`` over
plane ``p``) and spreads its routes over the shortest leaf-to-leaf paths by the destination's
box (key ``p + planes (t div g)`` for destination ``t``: :func:`.rail_alltoall.pair_route`), so
each relay of its box uses every plane of its NICs alike and every spine (core) above evenly,
as the pair-by-pair routes do (there the key is the source, which differs from pair to pair);
the moved routes then load each link of an orbit alike. (Keyed by the source alone, the moved
routes kept the listed source's plane: on HPN's two planes, half the NIC bandwidth, 2.03x the
bound under ``sync``; keyed by the destination's box without splitting, an odd number of other
boxes loads one plane more.)
"""

from __future__ import annotations

import time
from dataclasses import replace
from functools import lru_cache

import networkx as nx
import numpy as np

from ...instances import Instance
from ...instances.box_shift import box_shift
from ...instances.size import BYTES_PER_SEND, Build, topology_field
from ...limits import human_bytes
from ...tens.bounds.blocks import block_cut
from ...tens.pipelined_trees import PipelinedTrees, link_orbits
from ..producers import Outcome, Param, Producer, Unsupported
from . import rail_alltoall
from .alltoall import PARAMS
from .rail_alltoall import pair_route, rail_structure

FORM = Param("form", ("auto", "explicit", "compact"), "auto",
             "explicit: every send listed; compact: one box's routes plus the pipeline rule, moved to every box by "
             "the box shifts; auto: compact where one piece of every pair's sends would not fit the send budget")


def compact_routes(instance: Instance) -> PipelinedTrees | None:
    """The first box's PXN routes with the box shifts (module doc), one pipeline piece per
    chunk, destinations in :func:`send_order`, each route's path above the leaves the one
    :meth:`OrbitLoads.least_loaded` picks; None when the fabric has no box shift."""
    topo, coll = instance.topology, instance.collective
    shift = box_shift(topo, coll.nodes)
    if shift is None:
        return None
    rs = rail_structure(topo)

    @lru_cache(maxsize=None)
    def middle(a: int, b: int) -> list[tuple[int, ...]]:
        return sorted(tuple(p) for p in nx.all_shortest_paths(rs["fabric"], a, b))

    roots = [int(r) for r in shift.representatives(coll.nodes)]
    g, planes = rs["g"], len(rs["leaves"][roots[0]])
    loads = OrbitLoads(topo, shift, middle)
    cut = block_cut(instance)  # the groups interleaved where a cut above the boxes binds (send_order)
    levels = shift if cut is not None and len(cut.witness) > g else None
    src, dst, ptr, root, part = [], [], [0], [], []
    for s in roots:
        for t in send_order(s, coll.nodes, g, levels):
            for p in range(planes):
                key = p + planes * (t // g)  # the path the destination's box keys (module doc) ...
                route = pair_route(s, t, rs, middle, key=key)
                ends = _leaves(s, t, p, rs)
                if ends is not None:  # ... unless another is less loaded
                    key = p + planes * loads.least_loaded(route, *ends, first=t // g)
                    route = pair_route(s, t, rs, middle, key=key)
                loads.add(route)
                src.extend(route[:-1])
                dst.extend(route[1:])
                ptr.append(len(src))
                root.append(s)
                part.append(p)
    before = np.concatenate([np.arange(b - a) for a, b in zip(ptr[:-1], ptr[1:])]).astype(np.int64)
    lo = np.asarray(part, np.int64)
    return PipelinedTrees("alltoall", coll.size, coll.num_chunks, coll.chunks_per_node, 1, planes,
                          np.asarray(root, np.int64), lo, lo + 1, np.asarray(ptr, np.int64),
                          np.asarray(src, np.int64), np.asarray(dst, np.int64), before,
                          shift=shift.perms, orders=shift.orders)


def send_order(s: int, nodes, g: int, shift=None) -> list[int]:
    """The participants other than ``s`` in the order ``s`` sends to them: by their index in
    the box counted on from ``s``'s (the relay, so the rail, they go through), then by box
    counted on from ``s``'s; with ``shift`` (a :class:`~collsynth.instances.box_shift.BoxShift`),
    the box's place at the top level of the shifts changing fastest, so a source sends to every
    pod (group) in turn rather than to its own first.

    Under ``event`` (FIFO links, no step barriers) the order decides which traffic meets on a
    link when; ``sync`` prices every order alike. The links of the binding cut must stay busy
    throughout: where it is the box's (its NICs), rail by rail then box by box keeps each relay
    fed by one source of its box at a time (SuperPOD 4 SU, 1,024 GPUs, one piece: 1.106x the
    box cut in id order, 1.018x so, 1.047x with the groups interleaved); where it is a group's
    (leaves 2:1), a source sending to its own group first leaves the group's uplinks idle for
    that share of the data, and interleaving the groups keeps traffic on them from the start
    (SuperPOD 4 SU with 2:1 leaves: 1.170x, 1.032x, 1.015x; ``benchmarks/bench_alltoall_scale.py``).

    >>> send_order(1, range(8), 4)  # boxes of 4: index 1 (GPU 5), index 2 (2, 6), 3 (3, 7), 0 (0, 4)
    [5, 2, 6, 3, 7, 0, 4]
    """
    levels = [(1, -(-len(nodes) // g))]  # (boxes a unit, units) of each level above the box, lowest first
    if shift is not None:
        unit, levels = shift.box, []
        for order in shift.orders:
            if unit >= g:
                levels.append((unit // g, order))
            unit *= order

    def key(t: int) -> tuple[int, ...]:
        rel = [((t // g // size) % order - (s // g // size) % order) % order for size, order in levels]
        return ((t - s) % g, *rel)

    return sorted((int(t) for t in nodes if t != s), key=key)


def _leaves(s: int, t: int, p: int, rs: dict) -> tuple[int, int] | None:
    """The leaves pair ``s -> t`` leaves and enters the fabric by in plane ``p`` (its relay's and
    ``t``'s), or None when it stays in a box or under one leaf (no path to choose)."""
    g = rs["g"]
    if s // g == t // g:
        return None
    relay = s // g * g + t % g
    a, b = rs["leaves"][relay][p], rs["leaves"][t][p]
    return None if a == b else (a, b)


class OrbitLoads:
    """The load the listed routes put on each link, counted per orbit of links under the box
    shifts (each link of an orbit of ``o`` carries ``m / o`` of what the listed routes put on it,
    :func:`collsynth.tens.pipelined_trees.link_orbits`), in seconds a unit of data, so that the
    moved routes' loads are the listed ones'; :meth:`least_loaded` picks a path above the leaves
    greedily (Graham, "Bounds on multiprocessing timing anomalies", SIAM J. Appl. Math. 1969:
    least loaded first). Keyed by the destination's box alone, a three-tier fabric's listed
    source reaches a pod's 32 boxes over 32 of its 64 spine-core paths, those of one half of the
    cores for pods an even number on and of the other for odd ones: moved to every pod, a pod
    takes in from 8 of its 15 others through one half, 16/15 of the pod cut (SuperPOD 16 SU with
    2:1 leaves, on the core-to-spine links)."""

    def __init__(self, topology, shift, middle):
        la = topology.link_arrays
        group, scale = link_orbits(la, shift.perms, shift.orders)
        self.group = group
        self.cost = scale / la.bandwidth
        self.index = {(u, v): i for i, (u, v) in enumerate(zip(la.src.tolist(), la.dst.tolist()))}
        self.load = np.zeros(len(la))
        self.middle = middle
        self.paths = lru_cache(maxsize=None)(self._paths)

    def _paths(self, a: int, b: int) -> np.ndarray:
        """The links of every shortest path from leaf ``a`` to leaf ``b`` (a row each)."""
        return np.array([[self.index[h] for h in zip(p[:-1], p[1:])] for p in self.middle(a, b)], np.int64)

    def _links(self, route) -> np.ndarray:
        return np.array([self.index[h] for h in zip(route[:-1], route[1:])], np.int64)

    def least_loaded(self, route, a: int, b: int, first: int) -> int:
        """The index of the path from ``a`` to ``b`` that leaves ``route``'s busiest link least
        loaded with it added (its other hops as they are), the first such from ``first`` on
        (cyclically)."""
        links = self.paths(a, b)
        fixed = np.setdiff1d(self._links(route), links.ravel())
        base = float((self.load[self.group[fixed]] + self.cost[fixed]).max(initial=0.0))
        value = np.maximum((self.load[self.group[links]] + self.cost[links]).max(axis=1), base)
        order = (first + np.arange(len(links))) % len(links)
        least = value.min()
        return int(order[np.argmax(value[order] <= least + 1e-12 * abs(least))])

    def add(self, route) -> None:
        """Count ``route`` on its links' orbits."""
        links = self._links(route)
        np.add.at(self.load, self.group[links], self.cost[links])


def compact_wanted(instance: Instance, form: str | None) -> bool:
    """Whether ``rail-alltoall`` keeps its routes as routes: ``form=compact``, or ``form=auto``
    (the default) where even one piece of every pair's explicit sends (two hops a pair at the
    least) would exceed :data:`collsynth.solvers.flow.alltoall.SEND_BUDGET`."""
    from .alltoall import SEND_BUDGET

    coll = instance.collective
    n = len(coll.nodes)
    return form == "compact" or ((form or "auto") == "auto" and 2 * n * (n - 1) * coll.chunks_per_node > SEND_BUDGET)


def run_compact(instance: Instance, options) -> Outcome:
    """``rail-alltoall`` kept as routes plus the pipeline rule (module doc): ``pieces`` as
    given, else the depth of least ``sync`` price (:func:`collsynth.solvers.packing.compact.least_sync`);
    refused (:class:`~collsynth.solvers.producers.Unsupported`) where there is no box shift."""
    from ..packing.compact import least_sync

    t0 = time.perf_counter()
    routes = compact_routes(instance)
    if routes is None:
        raise Unsupported("rail-alltoall: --param form=compact needs identical boxes (no box shift found); "
                          "use form=explicit")
    pieces = options.params.get("pieces")
    routes = replace(routes, pieces=pieces) if pieces else least_sync(routes, instance)[0]
    extra = {"form": "pipelined-trees", "routes": len(routes.root) * routes.copies, "listed_routes": len(routes.root),
             "box_copies": routes.copies, "depth_hops": routes.depth, "pieces": routes.pieces,
             "explicit_sends": routes.sends, "route_s": round(time.perf_counter() - t0, 4)}
    return Outcome(routes, "constructed", units="steps", found_by="rail-alltoall (routes + pipeline rule)",
                   build_s=time.perf_counter() - t0, extra=extra)


def planned(instance: Instance, params: dict) -> Build | None:
    """What ``rail-alltoall`` builds, for the size check before the run
    (:attr:`collsynth.solvers.producers.Producer.estimate`): kept as routes (:func:`compact_wanted`)
    on identical boxes of ``d`` GPUs, at least two hops for each of the ``d (N - 1)`` listed
    pairs (``BYTES_PER_SEND`` a hop) and the bounds' demand rows one box's nodes hold or need
    (:mod:`collsynth.tens.bounds.box_rows`: ``2 d N`` rows, pre and post, a byte per node id
    each), never the ``N^2`` chunks' condition matrices; None otherwise (the run lists every
    send, and the size check counts the fewest sends of any schedule)."""
    coll, topo = instance.collective, instance.topology
    if instance.concurrent or coll.kind != "alltoall" or not compact_wanted(instance, params.get("form")):
        return None
    shift = box_shift(topo, coll.nodes)
    try:
        rail_structure(topo)
    except Unsupported:  # the run is refused as it starts: nothing to build
        return None
    if shift is None:
        return None
    n, d = len(coll.nodes), shift.box
    hops = 2 * d * (n - 1) * coll.chunks_per_node
    rows = 2 * (2 * d * n) * topo.size
    return Build(hops * BYTES_PER_SEND + rows,
                 f"rail-alltoall's routes on {n:,} GPUs kept as one box's routes ({hops:,} listed hops at least, "
                 f"{human_bytes(BYTES_PER_SEND)} each) and the bounds' rows of one box", topology_field(topo),
                 reads_conditions=False)


def run(instance: Instance, options) -> Outcome:
    """``rail-alltoall``: every send listed (:func:`.rail_alltoall.run`), or kept as one box's
    routes plus the pipeline rule (:func:`run_compact`) where :func:`compact_wanted`."""
    coll = instance.collective
    if not instance.concurrent and coll.kind == "alltoall" and compact_wanted(instance, options.params.get("form")):
        return run_compact(instance, options)
    return rail_alltoall.run(instance, options)


PRODUCERS = [Producer("rail-alltoall", "flow", run,
                      "all-to-all on rail-optimised fabrics without an LP: PXN paths (in-box switch to the "
                      "destination's rail, then that rail's leaves and ECMP above), pipelined",
                      params=PARAMS + (FORM,), estimate=planned)]
