"""NCCL's channels: one ring (and one tree) per NIC, each entering and leaving its box on that NIC.

NCCL's topology search (NVIDIA/nccl ``src/graph/search.cc``, "Search Patterns") builds, per
channel, an inter-node ring ``NET n -> GPU a -> GPU b -> .. -> GPU x -> NET n``: it enters the
box on NIC ``n`` at the GPU closest to it (``ncclTopoSearchRecNet`` tries "the most local
GPUs" first), visits every GPU of the box over NVLink / NVSwitch / xGMI and returns to the same
NIC (``crossNic = 0``: ``ncclTopoSearchRecGpu`` at ``backToNet`` keeps only the start NIC's
port), each NIC's bandwidth taken by one channel at a time (``ncclTopoSearchRecNet`` subtracts
``bwInter`` from it), so the channels spread over the NICs; ``NCCL_MIN_NCHANNELS`` and the
search's ``maxChannels`` set how many there are. The last GPU reaches the NIC through the GPU
next to it when it is not its own (PXN: Jeaugey, NCCL 2.12 release notes, "PCI x NVLink").
Trees (``src/graph/trees.cc``) use the same channels: the intra-box chain from that GPU and a
double binary tree across boxes between the GPUs on NIC ``n``.

Here a channel is one *entry* GPU (a GPU reached from the other boxes without crossing
another GPU of its box: its NIC) and one *exit* GPU (the ring's last GPU in the box), the same
local GPUs in every box, so box ``b``'s exit sends to box ``b + 1``'s entry over the network,
rail-aligned. Exits are chosen greedily, channel by channel, so that the routes between boxes
(the fixed shortest routes the cost models use: :meth:`Topology.shortest_path`) load their links
least, ties going to the fewest hops and then to the GPU just before the entry in id order
(NCCL's PCI order). Inside a box the ring goes from entry to exit over direct GPU links when the
box has them (a Hamiltonian path found depth-first, least-used links first), else in id order
from the entry (a crossbar such as NVSwitch, where every order is one switch hop).

Direct links are shared as NCCL's search shares them: every channel takes the same bandwidth
from each link it crosses (``ncclTopoFollowPath`` subtracts the channel's ``bw`` and fails the
path when a link has less left), and the search lowers that bandwidth (``speedArray``) until all
the channels are found. Here a direct link of ``u`` times the box's narrowest direct link's
bandwidth carries at most ``share * u`` channels, ``share`` the least whole number at which every
channel finds its path (from ``ceil(hops / units)``, the box's channel hops over its link units;
at ``share = count`` nothing binds). On a 16-GCD MI250 box (7 xGMI links a GCD, 112 link units)
16 channels of 15 hops need ``share >= 3`` and this search (which backtracks within a channel,
not across channels as NCCL's does) finds them at 4: at most 4 rings on a single link, where a
search without the limit stacked 7 on one link; RCCL's own 32 rings for that box
(``rome_model_59``) put at most 6 on one link.

Boxes are read from the topology's ``meta`` (``gpus_per_node`` or ``gpus_per_chassis``, set by
the generators of :mod:`collsynth.instances.systems`); a topology without them, a single box, or
boxes the collective does not fill equally is one box with one channel in rank order: the
classic ring.

>>> from collsynth.instances.generators import build
>>> from collsynth.instances import make_instance
>>> ch = channels(make_instance(build("dgx_h100", {"nodes": 2}), "allgather"))
>>> len(ch.orders), ch.orders[0], ch.orders[3]
(8, [0, 1, 2, 3, 4, 5, 6, 7], [3, 4, 5, 6, 7, 0, 1, 2])
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import networkx as nx

from ...instances import Instance
from ..producers import Param, Unsupported

BOX_KEYS = ("gpus_per_node", "gpus_per_chassis")  # topology meta naming the GPUs of a box
CHANNELS = Param("channels", int, None, "channels (default: one per NIC of a box)", low=1, high=64)  # NCCL_MIN_NCHANNELS
SEARCH_STEPS = 200_000  # depth-first steps of one Hamiltonian path search before giving up


@dataclass(frozen=True)
class Channels:
    """The channels of an instance: ``boxes[b][i]`` is the rank (index into the collective's
    nodes) of local GPU ``i`` of box ``b``; channel ``c`` visits every box's local GPUs in the
    order ``orders[c]`` (entry first, exit last), box after box."""

    boxes: list[list[int]]
    orders: list[list[int]]

    def ring(self, c: int) -> list[int]:
        """Channel ``c``'s ring as ranks, box after box."""
        return [box[i] for box in self.boxes for i in self.orders[c]]


def boxes_of(instance: Instance) -> list[list[int]]:
    """The collective's ranks grouped by box (``meta`` ``gpus_per_node`` / ``gpus_per_chassis``),
    each box in id order; one box of every rank when the topology names none or the boxes are
    not equally filled."""
    nodes = list(instance.collective.nodes)
    meta = instance.topology.meta
    g = next((meta[k] for k in BOX_KEYS if meta.get(k)), None)
    if not g:
        return [list(range(len(nodes)))]
    by_box: dict[int, list[int]] = {}
    for r, v in enumerate(nodes):
        by_box.setdefault(v // g, []).append(r)
    boxes = [by_box[b] for b in sorted(by_box)]
    locals_ = {tuple(nodes[r] % g for r in box) for box in boxes}
    if len(locals_) != 1 or len(boxes[0]) < 2:
        return [list(range(len(nodes)))]
    return boxes


def _reaches(graph, box_nodes: list[int], i: int, target: int, into: bool) -> bool:
    """Whether local GPU ``i`` of a box reaches ``target`` outside it (``into``: is reached from
    it) without crossing another GPU of its box."""
    keep = box_nodes[i]
    view = nx.restricted_view(graph, [v for v in box_nodes if v != keep], [])
    return nx.has_path(view, target, keep) if into else nx.has_path(view, keep, target)


def _route_links(topology, u: int, v: int) -> list[tuple[int, int]]:
    path = topology.shortest_path(u, v)
    return list(zip(path, path[1:]))


def _exit_choices(instance: Instance, nodes: list[int], boxes: list[list[int]], e: int, load: Counter):
    """Candidate exits for entry ``e``, best first, each with the links of its routes from box 0
    to box 1 and back (the key: most-loaded link after adding them, hops, id order before ``e``)."""
    topo = instance.topology
    g = len(boxes[0])
    pairs = [(0, 1), (len(boxes) - 1, 0)] if len(boxes) > 2 else [(0, 1), (1, 0)]
    keyed = []
    for x in range(g):
        if x == e and g > 1:
            continue
        links = [link for a, b in pairs for link in _route_links(topo, nodes[boxes[a][x]], nodes[boxes[b][e]])]
        keyed.append(((max(load[link] + 1 for link in links), len(links), (e - x) % g), x, links))
    return [(x, links) for _, x, links in sorted(keyed)]


def _direct(instance: Instance, nodes: list[int], box: list[int]) -> nx.DiGraph:
    """The box's GPUs joined by their direct links (no switch between them), each edge's
    ``units`` its bandwidth (parallel links pooled) over the narrowest such edge's."""
    la = instance.topology.link_arrays
    ids = [nodes[r] for r in box]
    local = {v: i for i, v in enumerate(ids)}
    d = nx.DiGraph()
    d.add_nodes_from(range(len(box)))
    for u, v, b in zip(la.src.tolist(), la.dst.tolist(), la.bandwidth.tolist()):
        if u in local and v in local and u != v:
            e = (local[u], local[v])
            d.add_edge(*e, bandwidth=d.edges[e]["bandwidth"] + b if d.has_edge(*e) else b)
    narrowest = min((b for _, _, b in d.edges(data="bandwidth")), default=1.0)
    for _, _, data in d.edges(data=True):
        data["units"] = data["bandwidth"] / narrowest
    return d


def _hamiltonian(direct: nx.DiGraph, start: int, end: int, used: Counter, share: float) -> list[int] | None:
    """A path from ``start`` to ``end`` through every node of ``direct``, least-used links first,
    over links that carry fewer than ``share * units`` channels (depth-first, at most
    :data:`SEARCH_STEPS` steps), or None."""
    n = direct.number_of_nodes()
    path, seen, steps = [start], {start}, 0

    def room(u: int) -> list[int]:
        units = {v: direct.edges[u, v]["units"] for v in direct.successors(u)}
        return sorted((v for v in units if used[(u, v)] < share * units[v] - 1e-9),
                      key=lambda v: (used[(u, v)] / units[v], v))

    stack = [iter(room(start))]
    while stack:
        steps += 1
        if steps > SEARCH_STEPS:
            return None
        nxt = next(stack[-1], None)
        if nxt is None:
            stack.pop()
            seen.discard(path.pop())
            continue
        if nxt in seen or (nxt == end and len(path) != n - 1):
            continue
        path.append(nxt)
        seen.add(nxt)
        if len(path) == n:
            return path
        stack.append(iter(room(nxt)))
    return None


def _intra_order(direct: nx.DiGraph, e: int, x: int, g: int, used: Counter, share: float) -> list[int] | None:
    """Local GPUs from entry ``e`` to exit ``x``: a Hamiltonian path over direct links with room
    (``share``, :func:`_hamiltonian`) when the box has any, else id order from ``e`` with ``x``
    moved last."""
    if g == 1:
        return [e]
    if direct.number_of_edges():
        return _hamiltonian(direct, e, x, used, share)
    rest = [(e + k) % g for k in range(1, g) if (e + k) % g != x]
    return [e] + rest + [x]


def _orders(instance: Instance, nodes: list[int], boxes: list[list[int]], entries: list[int],
            direct: nx.DiGraph, count: int, share: float) -> list[list[int]] | None:
    """Each channel's local order (entry first, exit last) with direct links carrying at most
    ``share * units`` channels, or None when a channel finds no path; at ``share >= count``
    (nothing binds) a channel without a Hamiltonian path to any exit goes in id order, routed."""
    g = len(boxes[0])
    used: Counter = Counter()
    load: Counter = Counter()
    orders = []
    for c in range(count):
        e = entries[c % len(entries)]
        choices = _exit_choices(instance, nodes, boxes, e, load)
        order, links = None, choices[0][1]
        for x, links in choices:
            order = _intra_order(direct, e, x, g, used, share)
            if order is not None:
                break
        if order is None and share < count:
            return None
        if order is None:  # no Hamiltonian path to any exit: id order from the entry, routed
            order, links = [(e + k) % g for k in range(g)], choices[0][1]
        load.update(links)
        used.update(zip(order, order[1:]))
        orders.append(order)
    return orders


def channels(instance: Instance, count: int | None = None) -> Channels:
    """NCCL's channels on the instance (module doc): ``count`` channels (default: one per
    entry GPU, i.e. per NIC), channel ``c`` on entry ``c mod entries``, direct links shared at
    the least ``share`` that fits them all.

    Raises :class:`Unsupported` when the boxes have no GPU reached from the other boxes.
    """
    nodes = list(instance.collective.nodes)
    boxes = boxes_of(instance)
    if len(boxes) == 1:
        return Channels(boxes, [list(range(len(nodes)))] * (count or 1))
    graph = instance.topology.graph
    box0 = [nodes[r] for r in boxes[0]]
    other = nodes[boxes[1][0]]
    g = len(box0)
    entries = [i for i in range(g) if _reaches(graph, box0, i, other, into=True)]
    if not entries or not any(_reaches(graph, box0, i, other, into=False) for i in range(g)):
        raise Unsupported("no GPU of a box is reached from the other boxes without crossing its box")
    direct = _direct(instance, nodes, boxes[0])
    count = count or len(entries)
    units = sum(u for _, _, u in direct.edges(data="units"))
    share = max(1, math.ceil(count * (g - 1) / units - 1e-9)) if units else count
    while (orders := _orders(instance, nodes, boxes, entries, direct, count, min(share, count))) is None:
        share += 1
    return Channels(boxes, orders)


def ring_hops(ring: list[int], closed: bool = True) -> list[tuple[int, int]]:
    """The hops of a ring of ranks (``closed``: with the hop from the last back to the first)."""
    return list(zip(ring, ring[1:] + ring[:1])) if closed else list(zip(ring, ring[1:]))


def hop_costs(instance: Instance, hop_sets: list[list[tuple[int, int]]]) -> tuple[float, float]:
    """``(alpha, s_per_byte)`` of channels whose hops (rank pairs) are ``hop_sets``: the largest
    summed per-hop alpha of one hop's route (what the ``sync`` model charges a step), and the
    largest ``n_l / B_l`` over the links ``l`` the hops cross (``n_l`` hop sets crossing ``l``,
    each with its own share of the data: ``bytes * s_per_byte`` is a step's bandwidth time when
    every hop set moves ``bytes`` on each of its hops)."""
    topo = instance.topology
    nodes = instance.collective.nodes
    la = topo.link_arrays
    bandwidth: Counter = Counter()
    alpha_of = {}
    for u, v, a, b in zip(la.src.tolist(), la.dst.tolist(), la.alpha.tolist(), la.bandwidth.tolist()):
        bandwidth[(u, v)] += b  # parallel links pool (as every cost model does)
        alpha_of[(u, v)] = a
    crossing: Counter = Counter()
    alpha = 0.0
    for hops in hop_sets:
        links = set()
        for a, b in hops:
            route = _route_links(topo, nodes[a], nodes[b])
            alpha = max(alpha, sum(alpha_of[link] for link in route))
            links.update(route)
        crossing.update(links)
    return alpha, max((n / bandwidth[link] for link, n in crossing.items()), default=0.0)
