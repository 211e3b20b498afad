"""Rings: spanning trees that are arcs of Hamiltonian rings through GPUs or GPU pairs.

Zhao et al., "ForestColl: Throughput-Optimal Collective Communications on Heterogeneous
Network Fabrics" (arXiv 2402.06787), Section 5.2, pack any spanning out-trees the split
network allows; on AMD MI250 boxes (16 GCDs in an xGMI mesh of diameter 5, Section 6) the
greedy trees are deep, and a first-come-first-served link (the ``event`` cost model,
:func:`collsynth.tens.cost.price_event`) sends all of its GPU's own pieces before the pieces it
relays, so deep trees starve the links below them (1.11x the optimum on one box, 1.22x on two).
A ring does not starve: every link of a ring relays what the link before it sent, at the rate
it sends, so its queue never empties (the ring allgather of Patarasuk and Yuan, "Bandwidth
optimal all-reduce algorithms for clusters of workstations", JPDC 2009, Section 3).

Where every GPU takes in the same units of link and the links decompose into Hamiltonian
rings, plain rings reach the single-GPU cut (each of ``R`` rings loads its links with ``N -
1`` shards of an ``R``-th): TACOS's ring x complete x switch hierarchies (Won et al., "TACOS",
Section VII-B), whose switches of two ports are links here, routed through them.
Plain rings are not optimal on MI250 boxes: their tight cuts are the *pairs* (the two GCDs of
an OAM, joined by four links), which receive every other GPU's data through their outside
links. There a box's GPUs are paired by their heaviest link (when each has a unique heaviest
partner), and a ring visits the pairs one after another, entering a pair at one GPU, crossing
to its partner and leaving from there. The tree of a root on a ring is the ring's path from
it; a root that is the second of its pair (a pair's exit) reaches its partner over the pair's
link backwards instead of around the ring, so every link between pairs carries ``N - 2``
shards: each tree enters every other pair once, which is what the pair cut allows.

A box that is a switch (a crossbar: NVIDIA's NVSwitch, every GPU of the box on it by a port
of equal bandwidth) has one ring through it in id order, each GPU sending to the next through
the switch: every port carries ``N - 1`` shards, the single-GPU cut. Crossbars joined by links
(TE-CCL's DGX-2: odd GPU ``2k + 1`` of a chassis to even GPU ``2k`` of every other, Liu et al.,
SIGCOMM 2024, its dgx2.py topology) have each root's shard enter every other box over one of the links
into it, taken in turn by the roots in ring order, and go round that box's ring from there.

Boxes behind one switch (ForestColl's MI250 systems: every GCD on an InfiniBand switch) get,
in every other box, one or two entries through the switch, each followed by the arc of that
box's ring after it (:func:`segment`); a tree entering a box twice relays less over the box's
rings and more over the switch. The share of a root's data entering twice (``q`` of ``d``
parts) is the one of least time under exact link loads (:func:`choose_parts`).

The rings themselves are found by a seeded depth-first search over the blocks
(:func:`box_rings`); the trees are used only when their exact loads fit within
:data:`TOLERANCE` of the cut optimum.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from fractions import Fraction

import networkx as nx

from .trees import RoutedTree

SEEDS = 32  # seeded searches for a box's rings before giving up
STEPS = 5_000  # depth-first steps per ring
MAX_BLOCKS = 128  # blocks per box at most (the search recurses once per block)
MAX_GPUS = 256  # GPUs at most (every tree crosses every box: its routes grow as the GPUs)
MAX_PARTS = 100  # parts of a root's share on a ring at most (the resolution of the split)
TOLERANCE = Fraction(1, 1000)  # the trees' time may exceed the cut optimum by this share at most


@dataclass(frozen=True)
class Layout:
    """Boxes of blocks (each box's blocks: all pairs ``(a, b)`` or all single GPUs ``(a,)``),
    the rings every link between two blocks of a box can carry (``(a, b) -> rings``: its units
    over the greatest common divisor of those links' units), the route of each such link
    (``(a, s, b)`` through a switch, else ``(a, b)``), the switch joining the boxes (None
    with one box or with ``bridges``), ``R``, the rings into (and out of) every block, the
    switch every GPU of a box is on when the boxes are such switches (``hubs``, one per box:
    a crossbar, its one ring goes through it in id order), and the links from box to box
    (``bridges``: ``(box, other) -> [(a, b), ...]``) when links join them."""

    boxes: tuple[tuple[tuple[int, ...], ...], ...]
    outside: dict
    routes: dict
    switch: int | None
    rings: int
    hubs: tuple = ()
    bridges: dict = field(default_factory=dict)

    @property
    def paired(self) -> bool:
        """Whether the blocks are pairs."""
        return len(self.boxes[0][0]) == 2


def pooled_units(net0) -> dict:
    """``(a, b) -> units`` of the flow network's links, parallel links added."""
    units: dict = {}
    for a, b, u in zip(net0.src.tolist(), net0.dst.tolist(), net0.units.tolist()):
        if a != b and u > 0:
            units[(a, b)] = units.get((a, b), 0) + u
    return units


def _blocks(units: dict, box: list[int]) -> list[tuple[int, ...]]:
    """The box's GPUs paired by their heaviest link (each one's unique heaviest partner, and
    mutually), else each GPU alone."""
    inside = set(box)
    out: dict = {}
    for (x, b), u in units.items():
        if x in inside and b in inside:
            out.setdefault(x, []).append((u, b))
    partner = {}
    for a in box:
        links = sorted(out.get(a, ()), reverse=True)
        if not links or (len(links) > 1 and links[1][0] == links[0][0]):
            return [(a,) for a in sorted(box)]
        partner[a] = links[0][1]
    if any(partner[partner[a]] != a for a in box):
        return [(a,) for a in sorted(box)]
    return [(a, partner[a]) for a in sorted(box) if a < partner[a]]


def _links(units: dict, compute: set) -> tuple[dict, dict, set]:
    """``(units, routes, others)``: the links between compute nodes, direct or through a switch
    with exactly two ports (both ways, to compute nodes; its units the lesser of its two hops),
    each link's route, and the other non-compute nodes."""
    near: dict = {}
    for a, b in units:
        for x, y in ((a, b), (b, a)):
            if x not in compute:
                near.setdefault(x, set()).add(y)
    direct = {arc: u for arc, u in units.items() if arc[0] in compute and arc[1] in compute}
    routes = {arc: arc for arc in direct}
    others = set()
    for s, ends in near.items():
        a, b = sorted(ends) if len(ends) == 2 else (None, None)
        hops = [(a, s), (s, b), (b, s), (s, a)]
        if a in compute and b in compute and all(h in units for h in hops) and (a, b) not in direct:
            direct[(a, b)] = min(units[(a, s)], units[(s, b)])
            direct[(b, a)] = min(units[(b, s)], units[(s, a)])
            routes[(a, b)], routes[(b, a)] = (a, s, b), (b, s, a)
        else:
            others.add(s)
    return direct, routes, others


def _hubs(units: dict, others: set, compute: set) -> dict | None:
    """``{switch: its GPUs}`` for every other non-compute node, each linked both ways to
    compute nodes only, all its links of equal units; None when one is not."""
    out: dict = {}
    into: dict = {}
    for (a, b), u in units.items():
        if a in others:
            out.setdefault(a, {})[b] = u
        if b in others:
            into.setdefault(b, {})[a] = u
    hubs = {}
    for s in others:
        o, i = out.get(s, {}), into.get(s, {})
        if set(o) != set(i) or not set(o) <= compute or len(set(o.values()) | set(i.values())) != 1:
            return None
        hubs[s] = frozenset(o)
    return hubs


def _boxes(direct: dict, hubs: dict, compute: set) -> tuple[list, int | None, list] | None:
    """``(boxes, switch, crossbars)``: the boxes (sets of GPUs), the switch joining them all
    (None if none) and each box's crossbar switch (empty unless the boxes are those); None
    when the structure is neither GPUs joined by links in boxes behind one switch, nor
    crossbars joined by links."""
    everyone = [s for s, near in hubs.items() if near == compute]
    crossbars = [s for s in hubs if s not in everyone] or (everyone if not direct and len(everyone) == 1 else [])
    if len(everyone) > 1 or (crossbars and sum(len(hubs[s]) for s in crossbars) != len(compute)):
        return None
    switch = next((s for s in everyone if s not in crossbars), None)
    if crossbars:
        box_of = {v: i for i, s in enumerate(crossbars) for v in hubs[s]}
        if switch is not None or len(box_of) != len(compute) or any(box_of[a] == box_of[b] for a, b in direct):
            return None
        return [sorted(hubs[s]) for s in crossbars], switch, crossbars
    graph = nx.Graph(list(direct))
    graph.add_nodes_from(compute)
    boxes = [sorted(c) for c in nx.connected_components(graph)]
    if len(boxes) > 1 and switch is None or len(boxes) == 1 and switch is not None:
        return None
    return boxes, switch, []


def layout(net0) -> Layout | None:
    """The boxes of blocks of the flow network ``net0`` (:class:`collsynth.tens.cut_optimum.FlowNet`)
    when every root has weight 1 and the module's structure holds, else None."""
    compute = set(net0.compute)
    if set(net0.weight) != {1} or not 3 <= len(compute) <= MAX_GPUS:
        return None
    units = pooled_units(net0)
    direct, routes, others = _links(units, compute)
    hubs = _hubs(units, others, compute)
    found = hubs is not None and _boxes(direct, hubs, compute)
    if not found:
        return None
    boxes, switch, crossbars = found
    if crossbars:
        return _crossbar_layout(boxes, crossbars, direct, routes)
    blocks = sorted(_blocks(direct, box) for box in boxes)
    if len({len(b[0]) for b in blocks}) != 1 or min(len(b) for b in blocks) < 2:
        return None
    block_of = {v: k for box in blocks for k in box for v in k}
    outside = {(a, b): u for (a, b), u in direct.items() if block_of[a] != block_of[b]}
    into = {k: sum(u for (a, b), u in outside.items() if b in k) for box in blocks for k in box}
    out = {k: sum(u for (a, b), u in outside.items() if a in k) for box in blocks for k in box}
    if len(set(into.values()) | set(out.values())) != 1:
        return None
    g = math.gcd(*outside.values())  # a ring takes g units of each link it crosses
    return Layout(tuple(tuple(b) for b in blocks), {a: u // g for a, u in outside.items()}, routes, switch,
                  next(iter(into.values())) // g)


def _crossbar_layout(boxes: list, crossbars: list, direct: dict, routes: dict) -> Layout | None:
    """The layout of boxes that are crossbar switches: one ring each, through its switch in id
    order; the links between boxes are the bridges."""
    box_of = {v: i for i, box in enumerate(boxes) for v in box}
    bridges: dict = {}
    for a, b in sorted(direct):
        bridges.setdefault((box_of[a], box_of[b]), []).append((a, b))
    if len(boxes) > 1 and len(bridges) != len(boxes) * (len(boxes) - 1):
        return None
    routes = dict(routes)
    for box, s in zip(boxes, crossbars):
        for a, b in zip(box, box[1:] + box[:1]):
            routes[(a, b)] = (a, s, b)
    return Layout(tuple(tuple((v,) for v in box) for box in boxes), {}, routes, None, 1, tuple(crossbars), bridges)


def box_rings(blocks: tuple[tuple[int, ...], ...], outside: dict, count: int, deadline=None) -> list[list[int]] | None:
    """``count`` rings through all of ``blocks``, each a cycle of GPUs (for pairs ``[a0, b0, a1,
    b1, ...]``, entering pair ``i`` at ``a_i`` and leaving from its partner ``b_i``), together
    using every link between blocks at most its ``outside`` rings; or None. A seeded
    depth-first search (:data:`SEEDS` tries, :data:`STEPS` steps per ring, ``deadline``
    checked before each try), going first where fewest ways on are left (Warnsdorff's rule);
    where the links are the same both ways, each ring is taken with its reverse (a
    Hamiltonian decomposition of the undirected graph).

    >>> sorted(box_rings(((0, 1), (2, 3)), {(1, 2): 1, (3, 0): 1, (2, 1): 1, (0, 3): 1}, 2))
    [[0, 1, 2, 3], [1, 0, 3, 2]]
    """
    if len(blocks) > MAX_BLOCKS:
        return None
    both = all(outside.get((b, a)) == u for (a, b), u in outside.items())
    size = len(blocks[0])
    block_of = {v: k for k in blocks for v in k}
    out_of: dict = {}
    for a, b in outside:
        if a in block_of:
            out_of.setdefault(a, []).append(b)
    for seed in range(SEEDS):
        if deadline is not None:
            deadline.check("rings", f"search {seed + 1} of {SEEDS}")
        rng, left, rings = random.Random(seed), dict(outside), []
        while len(rings) < count:
            ring = _ring(blocks, block_of, out_of, left, rng)
            if ring is None:
                break
            back = ring[::-1][-size:] + ring[::-1][:-size]  # the reverse, from the same block on
            taken = [ring, back] if both and count - len(rings) >= 2 else [ring]
            for r in taken:
                for a, b in _crossings(r, size):
                    left[(a, b)] -= 1
            rings += taken
        if len(rings) == count:
            return rings
    return None


def _crossings(ring: list[int], size: int) -> list[tuple[int, int]]:
    """The links between blocks a ring (of blocks of ``size`` GPUs) crosses: from each block's
    last GPU to the next block's first."""
    return list(zip(ring[size - 1::size], ring[size::size] + ring[:1]))


def _ring(blocks, block_of: dict, out_of: dict, left: dict, rng: random.Random) -> list[int] | None:
    """One ring over ``blocks`` within the rings ``left`` (:func:`box_rings`), or None."""
    first = blocks[0]
    steps = [STEPS]
    for start in rng.sample([first, first[::-1]], len(first)):
        path = list(start)
        if _extend(path, {first}, len(blocks), block_of, out_of, left, rng, steps):
            return path
    return None


def _extend(path: list[int], used: set, total: int, block_of: dict, out_of: dict, left: dict,
            rng: random.Random, steps: list[int]) -> bool:
    """Extend ``path`` over the unused blocks (``total`` in all), each entered at one GPU and
    left from its other, and close it."""
    steps[0] -= 1
    if steps[0] < 0:
        return False
    if len(used) == total:
        return left.get((path[-1], path[0]), 0) > 0

    def ways(x: int) -> list[tuple[int, ...]]:  # the unused blocks x may enter next, entered first
        return [(b,) + tuple(v for v in block_of[b] if v != b) for b in out_of.get(x, ())
                if left[(x, b)] > 0 and block_of[b] not in used]

    nexts = ways(path[-1])
    rng.shuffle(nexts)
    nexts.sort(key=lambda o: len(ways(o[-1])))
    for o in nexts:
        used.add(block_of[o[0]])
        path += o
        if _extend(path, used, total, block_of, out_of, left, rng, steps):
            return True
        del path[-len(o):]
        used.discard(block_of[o[0]])
    return False


def segment(ring: list[int], i: int, length: int, paired: bool = True) -> list[tuple[int, int]]:
    """The arcs by which a tree entering ``ring`` at position ``i`` reaches the ``length``
    GPUs of the whole blocks from ``i``'s on: along the ring, and, entering a pair at its exit
    (``paired``, odd ``i``), to its partner backwards over the pair's link.

    >>> segment([0, 1, 2, 3], 0, 4)
    [(0, 1), (1, 2), (2, 3)]
    >>> segment([0, 1, 2, 3], 1, 4)
    [(1, 0), (1, 2), (2, 3)]
    >>> segment([0, 1, 2, 3], 1, 4, paired=False)
    [(1, 2), (2, 3), (3, 0)]
    """
    n = len(ring)
    arcs = [(ring[i], ring[i - 1])] if paired and i % 2 else []
    path = [ring[(i + s) % n] for s in range(length - len(arcs))]
    return arcs + list(zip(path, path[1:]))


def tree_routes(lay: Layout, rings: list[list[list[int]]], box: int, r: int, i: int,
                twice: bool) -> list[tuple[int, ...]]:
    """The routes of the tree of the GPU at position ``i`` of ring ``r`` of box ``box``
    (``rings[box][r]``): its own box's :func:`segment` from ``i``, then for every other box an
    entry through the layout's switch at position ``i`` of that box's ring ``r`` and the arc
    after it, or, ``twice``, two entries half a ring apart and half a ring each. The roots of
    a box take every position of a ring once, so their entries into another box spread
    evenly. With ``bridges`` (links between boxes) the entry is the ``i``-th link into that box
    (cyclically), from a GPU of its own box reached before. A link through a switch is its
    route through it."""
    own = rings[box][r]
    g, n = own[i], len(own)
    arcs: list[tuple[int, ...]] = list(segment(own, i, n, lay.paired))
    for other in range(len(rings)):
        if other == box:
            continue
        ring = rings[other][r]
        if lay.bridges:
            links = lay.bridges[(box, other)]
            a, b = links[i % len(links)]
            arcs += [(a, b)] + segment(ring, ring.index(b), n, lay.paired)
            continue
        entries = [i % (n // 2), i % (n // 2) + n // 2] if twice else [i]
        for j in entries:
            arcs.append((g, lay.switch, ring[j]))
            arcs += segment(ring, j, n // len(entries), lay.paired)
    return [lay.routes.get(arc, arc) for arc in arcs]


def _loads(lay: Layout, rings: list, twice: bool | None) -> dict:
    """Trees per link (pooled, ``(a, b)``) of one tree per ring and root: the roots' own boxes
    only (``twice`` None), or the other boxes only, entered once or twice."""
    load: dict = {}
    for box, ring_list in enumerate(rings):
        for r, ring in enumerate(ring_list):
            mine = set(ring)
            for i in range(len(ring)):
                for route in tree_routes(lay, rings, box, r, i, bool(twice)):
                    if (route[0] in mine and route[-1] in mine) == (twice is None):
                        for arc in zip(route, route[1:]):
                            load[arc] = load.get(arc, 0) + 1
    return load


def choose_parts(lay: Layout, rings: list, units: dict, most: Fraction | None = None) -> tuple | None:
    """``(q, d, tau)``: every root's share on a ring cut in ``d <= MAX_PARTS`` parts, ``q`` of
    them carried by a tree entering every other box twice and the rest by one entering once
    (:func:`tree_routes`; at most two trees per ring and root, whatever ``d``), the split of
    least exact time per shard ``tau`` (the busiest link's load over its units, with ``R d``
    parts per shard) at most ``most`` (None when none is); the fewest parts on ties."""
    halves = len(rings) > 1 and not lay.bridges and len(rings[0][0]) % (4 if lay.paired else 2) == 0
    own = _loads(lay, rings, None)
    once = _loads(lay, rings, False) if len(rings) > 1 else {}
    twice = _loads(lay, rings, True) if halves else {}
    lines = [(own.get(a, 0), once.get(a, 0), twice.get(a, 0), lay.rings * units[a])
             for a in set(own) | set(once) | set(twice)]

    def tau(q: int, d: int) -> Fraction:
        return max(Fraction(d * o + (d - q) * x + q * y, d * u) for o, x, y, u in lines)

    best = None
    for q, d in _splits(lines) if halves else [(0, 1)]:
        t = tau(q, d)
        if (most is None or t <= most) and (best is None or t < best[2]):
            best = (q, d, t)
    return best


def _splits(lines: list[tuple]) -> list[tuple[int, int]]:
    """``(q, d)`` with ``d <= MAX_PARTS`` nearest, from each side, to the share ``x`` entering
    twice that minimises ``max (o + (1 - x) y1 + x y2) / u`` over the links ``(o, y1, y2, u)``
    (a convex function of ``x``: ternary search), fewest parts first."""
    def worst(x: float) -> float:
        return max((o + (1 - x) * y1 + x * y2) / u for o, y1, y2, u in lines)

    lo, hi = 0.0, 1.0
    for _ in range(100):
        a, b = lo + (hi - lo) / 3, hi - (hi - lo) / 3
        lo, hi = (lo, b) if worst(a) <= worst(b) else (a, hi)
    x = (lo + hi) / 2
    return sorted({(min(d, max(0, q)), d) for d in range(1, MAX_PARTS + 1)
                   for q in (math.floor(x * d), math.ceil(x * d))}, key=lambda qd: (qd[1], qd[0]))


def find(net0, tau_star: Fraction, deadline=None) -> tuple[list[RoutedTree], int, Fraction] | None:
    """``(trees, k, tau)``: the ring trees of the flow network ``net0``, ``k`` per shard
    taking time ``tau`` per shard (units of :class:`collsynth.tens.cut_optimum.Optimum`), when
    the module's structure holds, the rings are found and ``tau`` is within :data:`TOLERANCE`
    of the cut optimum ``tau_star``; else None. ``deadline`` (:class:`collsynth.limits.Deadline`)
    is checked between searches."""
    lay = layout(net0)
    if lay is None or len({len(b) for b in lay.boxes}) != 1:
        return None
    rings = ([[[v for (v,) in box]] for box in lay.boxes] if lay.hubs else
             [box_rings(box, lay.outside, lay.rings, deadline) for box in lay.boxes])
    if any(r is None for r in rings):
        return None
    chosen = choose_parts(lay, rings, pooled_units(net0), tau_star * (1 + TOLERANCE))
    if chosen is None:
        return None
    q, d, tau = chosen
    parts = [(lo, hi, lo < q) for lo, hi in ((0, q), (q, d)) if hi > lo]
    trees = [RoutedTree(ring[i], r * d + lo, r * d + hi, tuple(tree_routes(lay, rings, box, r, i, twice)))
             for box, ring_list in enumerate(rings) for r, ring in enumerate(ring_list)
             for i in range(len(ring)) for lo, hi, twice in parts]
    return trees, lay.rings * d, tau
