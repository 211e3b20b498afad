"""The ``rail-alltoall`` producer: all-to-all on a rail-optimised fabric without an LP (PXN-style).

Every pair ``s -> d`` of different boxes takes one path: over the in-box switch to the relay
``r``, the GPU of ``s``'s box with ``d``'s index in its box (so on ``d``'s rail), then out of
``r``'s NIC in plane ``s mod planes`` to ``r``'s leaf and, through the fabric above, to ``d``'s
leaf of that plane and down to ``d``; a pair in one box goes over its in-box switch only. This
is NCCL's PXN (NVIDIA, NCCL 2.12 release notes, "PXN: PCI x NVLink", 2022): data changes rail
over NVLink, never in the network, so a rail's traffic stays under that rail's leaves. Above the
leaves a pair takes the ``k``-th of the shortest leaf-to-leaf paths (ECMP over spines and
cores) with ``k = (s div planes) mod (their number)``: the sources of a group (pod) are
consecutive ids, so when the number of paths times ``planes`` divides the GPUs of a group
(pod), every spine (core) link carries the same number of pairs (Al-Fares et al., SIGCOMM'08,
Section 3, two-level routing spreads the same way).

Loads (``m`` bytes per pair, ``B`` boxes of ``g`` GPUs, ``P`` planes of NIC bandwidth ``b``):
the NIC link of relay ``r`` in a plane carries the pairs from the ``g / P`` sources of its box
in that plane to the GPUs of ``r``'s index in the ``B - 1`` other boxes, ``g (B - 1) m / P``,
which is the box's cut bound ``g (N - g) m / (g P b)`` times ``b`` (``N = B g``): every byte
leaving a box crosses its ``g P`` NIC links, and PXN loads them all equally. A leaf's uplinks
carry exactly the pairs leaving its group on its rail and plane, and the group's uplinks are
loaded evenly over rails and planes and (with the divisibility above) spines; so their time is
the group's cut bound (the ``n_q`` GPUs of a group send ``n_q (N - n_q) m`` over its uplinks),
which dominates the box's exactly when the leaf tier is oversubscribed enough; likewise a
spine's uplinks meet the pod's cut bound. The in-box switch carries ``(g - 1) B m`` per GPU
(far below the NIC's time on NVLink boxes). The largest of these, :func:`link_loads`' maximum,
is therefore the largest cut bound whenever the in-box switch is not the bottleneck: the
bandwidth term of the bound met. Pipelined as ``flow-alltoall`` does (its :func:`emit`), the
synchronous time is that rate times ``(c Q + D - 1) / (c Q)`` for ``Q`` pieces and ``D``-step
paths.
"""

from __future__ import annotations

import time
from collections import Counter
from functools import lru_cache

import networkx as nx

from ...instances import Instance
from ...instances.size import BYTES_PER_SEND
from ...limits import require
from ...tens.ten import instant_hops
from ..producers import Options, Outcome, Unsupported
from .alltoall import GRID, auto_pieces, depth_of, emit


def rail_structure(topology) -> dict:
    """Boxes, in-box switches and per-plane leaves of a rail-optimised fabric read from its
    graph: ``{"g": GPUs per box, "box_switch": {gpu: switch}, "leaves": {gpu: [leaf per plane]},
    "fabric": the switch-only graph above the leaves}``. Raises :class:`Unsupported` when a
    GPU's links are not one in-box switch plus one leaf per plane (same count for all GPUs).

    >>> from collsynth.instances.generators import build
    >>> s = rail_structure(build("dgx_h100", {"nodes": 2}))
    >>> s["g"], s["box_switch"][0], s["leaves"][0], s["leaves"][8]
    (8, 16, [18], [18])
    """
    g = int(topology.meta.get("gpus_per_node") or 1)
    graph, switches = topology.graph, set(topology.switches)
    npus = list(topology.npus)
    if len(npus) % g or npus != list(range(len(npus))):
        raise Unsupported("rail-alltoall needs GPUs numbered 0..N-1 in boxes of gpus_per_node")
    box_switch, leaves = {}, {}
    for v in npus:
        out = sorted(graph.successors(v))
        if any(u not in switches for u in out):
            raise Unsupported("rail-alltoall needs every GPU link to end at a switch (no direct GPU links)")
        box = set(range(v // g * g, v // g * g + g))
        inbox = [u for u in out if g > 1 and set(graph.successors(u)) == box][:1]  # the lowest id: a
        # one-box fabric's leaf reaches the same GPUs; generators number in-box switches first
        box_switch[v] = inbox[0] if inbox else None
        leaves[v] = [u for u in out if u not in inbox]
    planes = {len(x) for x in leaves.values()}
    if len(planes) != 1 or 0 in planes or (g > 1 and None in box_switch.values()):
        raise Unsupported("rail-alltoall needs one in-box switch per box and the same number of leaves per GPU")
    fabric = graph.subgraph(switches - {u for u in box_switch.values() if u is not None})
    return {"g": g, "box_switch": box_switch, "leaves": leaves, "fabric": fabric}


def pair_route(s: int, d: int, rs: dict, middle, key: int | None = None) -> tuple[int, ...]:
    """The PXN path of pair ``s -> d`` (module doc); ``middle(a, b)`` lists the shortest
    switch paths from leaf ``a`` to leaf ``b``; ``key`` (default ``s``) picks the plane
    (``key mod planes``) and the path above the leaves (``key div planes``, module doc)."""
    g, box = rs["g"], rs["box_switch"]
    if s // g == d // g:
        return (s, box[s], d)
    relay = s // g * g + d % g
    head = (s,) if relay == s else (s, box[s], relay)
    planes = len(rs["leaves"][s])
    key = s if key is None else key
    plane = key % planes
    a, b = rs["leaves"][relay][plane], rs["leaves"][d][plane]
    if a == b:
        return head + (a, d)
    paths = middle(a, b)
    return head + paths[(key // planes) % len(paths)] + (d,)


def rail_routes(topology) -> dict:
    """Every ordered GPU pair's PXN path (:func:`pair_route`) as ``flow-alltoall``'s routes:
    ``{"pairs": {(s, d): [(route, GRID)]}, "instant": instant hops}``."""
    rs = rail_structure(topology)

    @lru_cache(maxsize=None)
    def middle(a: int, b: int) -> list[tuple[int, ...]]:
        return sorted(tuple(p) for p in nx.all_shortest_paths(rs["fabric"], a, b))

    npus = list(topology.npus)
    pairs = {(s, d): [(pair_route(s, d, rs, middle), GRID)] for s in npus for d in npus if s != d}
    la = topology.link_arrays
    hit = instant_hops(topology)
    return {"pairs": pairs, "instant": frozenset(zip(la.src[hit].tolist(), la.dst[hit].tolist()))}


def link_loads(topology, routes: dict, pair_bytes: float) -> dict[tuple[int, int], float]:
    """Seconds each link needs for the pairs routed over it: ``pair_bytes`` per pair and hop
    over the link's bandwidth (the rate term of the module doc; its maximum is the
    schedule's bandwidth time)."""
    count = Counter(hop for paths in routes["pairs"].values() for r, _ in paths for hop in zip(r[:-1], r[1:]))
    la = topology.link_arrays
    bw = dict(zip(zip(la.src.tolist(), la.dst.tolist()), la.bandwidth.tolist()))
    return {hop: n * pair_bytes / bw[hop] for hop, n in count.items()}


def run(instance: Instance, options: Options) -> Outcome:
    """The PXN all-to-all (module doc), pipelined into pieces, with its rate-limiting link time
    (every send listed; :func:`.rail_compact.run` keeps one box's routes where they would not fit)."""
    coll = instance.collective
    if instance.concurrent or coll.kind != "alltoall":
        raise Unsupported("rail-alltoall implements a single all-to-all")
    t0 = time.perf_counter()
    routes = rail_routes(instance.topology)
    pair_bytes = coll.chunk_bytes * coll.chunks_per_node
    loads = link_loads(instance.topology, routes, pair_bytes)
    rate = max(loads.values())
    alpha = float(instance.topology.link_arrays.alpha.max())
    P = options.params.get("pieces") or auto_pieces(routes, coll.chunks_per_node, rate, alpha)
    hops = sum(len(r) - 1 for paths in routes["pairs"].values() for r, _ in paths)
    sends = hops * P * coll.chunks_per_node
    require(sends * BYTES_PER_SEND, "--param pieces", f"{sends:,} sends of {P} pieces over the PXN paths")
    sched = emit(instance, routes, P)
    sched.meta["algorithm"] = "rail-alltoall"
    extra = {"rate_s": rate, "depth_steps": depth_of(routes), "pieces": P,
             "route_s": round(time.perf_counter() - t0, 4)}
    return Outcome(sched, "constructed", objective=float(sched.num_steps), units="steps",
                   found_by="rail-alltoall", build_s=time.perf_counter() - t0, extra=extra)

