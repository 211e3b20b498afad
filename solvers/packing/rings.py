"""Paired rings: spanning trees that are arcs of Hamiltonian rings through GPU pairs.

Zhao et al., "ForestColl: Throughput-Optimal Collective Communications on Heterogeneous
Network Fabrics" (arXiv 2402.06787), Section 5.2, pack any spanning out-trees the split
network allows; on AMD MI250 boxes (16 GCDs in an xGMI mesh of diameter 5, Section 6) the
greedy trees are deep, and a first-come-first-served link (the ``event`` cost model,
:func:`collsynth.tens.cost.price_event`) sends all of its GPU's own pieces before the pieces it
relays, so deep trees starve the links below them (1.11x the optimum on one box, 1.22x on two).
A ring does not starve: every link of a ring relays what the link before it sent, at the rate
it sends, so its queue never empties (the ring allgather of Patarasuk and Yuan, "Bandwidth
optimal all-reduce algorithms for clusters of workstations", JPDC 2009, Section 3).

Plain rings are not optimal on such boxes: their tight cuts are the *pairs* (the two GCDs of
an OAM, joined by four links), which receive every other GPU's data through their outside
links, while a ring through ``N`` GPUs loads each of its links with ``N - 1`` shards. Here a
box's GPUs are paired by their heaviest link, and a ring visits the pairs one after another,
entering a pair at one GPU, crossing to its partner and leaving from there. The tree of a root
on a ring is the ring's path from it; a root that is the second of its pair (a pair's exit)
reaches its partner over the pair's link backwards instead of around the ring, so every link
between pairs carries ``N - 2`` shards: each tree enters every other pair once, which is what
the pair cut allows. With ``R`` units of outside links into every pair, ``R`` rings of one
unit each reach the optimum on one box.

Boxes behind one switch (ForestColl's MI250 systems: every GCD on an InfiniBand switch) get,
in every other box, one or two entries through the switch, each followed by the arc of that
box's ring after it (:func:`segment`); a tree entering a box twice relays less over the box's
rings and more over the switch. The share of a root's data entering twice (``q`` of ``d``
parts) is the one of least time under exact link loads (:func:`choose_parts`).

The rings themselves are found by a seeded depth-first search over the pairs
(:func:`box_rings`); the trees are used only when their exact loads fit within
:data:`TOLERANCE` of the cut optimum.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from fractions import Fraction

import networkx as nx

from .trees import RoutedTree

SEEDS = 64  # seeded searches for a box's rings before giving up
STEPS = 20_000  # depth-first steps per search
MAX_PARTS = 100  # parts of a root's share on a ring at most (the resolution of the split)
TOLERANCE = Fraction(1, 1000)  # the trees' time may exceed the cut optimum by this share at most


@dataclass(frozen=True)
class Layout:
    """Boxes of paired GPUs: each box's pairs ``(a, b)``, the rings every link between two pairs
    of a box can carry (``(a, b) -> rings``: its units over the greatest common divisor of those
    links' units), the switch joining the boxes (None with one box) and ``R``, the rings into
    (and out of) every pair."""

    boxes: tuple[tuple[tuple[int, int], ...], ...]
    outside: dict
    switch: int | None
    rings: int


def pooled_units(net0) -> dict:
    """``(a, b) -> units`` of the flow network's links, parallel links added."""
    units: dict = {}
    for a, b, u in zip(net0.src.tolist(), net0.dst.tolist(), net0.units.tolist()):
        if a != b and u > 0:
            units[(a, b)] = units.get((a, b), 0) + u
    return units


def _pairs(units: dict, box: list[int]) -> list[tuple[int, int]] | None:
    """The box's GPUs paired by their heaviest link (each one's unique heaviest partner, and
    mutually), or None."""
    partner = {}
    for a in box:
        links = sorted(((u, b) for (x, b), u in units.items() if x == a and b in box), reverse=True)
        if not links or (len(links) > 1 and links[1][0] == links[0][0]):
            return None
        partner[a] = links[0][1]
    if any(partner[partner[a]] != a for a in box):
        return None
    return [(a, partner[a]) for a in sorted(box) if a < partner[a]]


def _switch(net0, units: dict, compute: set) -> int | None | bool:
    """The one non-compute node joining every compute node both ways at equal units, None when
    there are no other nodes with links, False otherwise."""
    others = {x for arc in units for x in arc} - compute
    if not others:
        return None
    if len(others) != 1:
        return False
    (s,) = others
    up = {units.get((g, s)) for g in compute} | {units.get((s, g)) for g in compute}
    return s if len(up) == 1 and None not in up else False


def layout(net0) -> Layout | None:
    """The paired boxes of the flow network ``net0`` (:class:`collsynth.tens.cut_optimum.FlowNet`)
    when every root has weight 1 and the module's structure holds, else None."""
    compute = set(net0.compute)
    if set(net0.weight) != {1} or len(compute) < 4:
        return None
    units = pooled_units(net0)
    switch = _switch(net0, units, compute)
    if switch is False:
        return None
    direct = nx.Graph([arc for arc in units if arc[0] in compute and arc[1] in compute])
    if set(direct.nodes) != compute:
        return None
    boxes = [_pairs(units, sorted(c)) for c in nx.connected_components(direct)]
    if any(b is None or len(b) < 2 for b in boxes) or (len(boxes) > 1 and switch is None):
        return None
    pair_of = {v: p for box in boxes for p in box for v in p}
    outside = {(a, b): u for (a, b), u in units.items() if a in pair_of and b in pair_of and pair_of[a] != pair_of[b]}
    into = {p: sum(u for (a, b), u in outside.items() if b in p) for box in boxes for p in box}
    out = {p: sum(u for (a, b), u in outside.items() if a in p) for box in boxes for p in box}
    if len(set(into.values()) | set(out.values())) != 1:
        return None
    g = math.gcd(*outside.values())  # a ring takes g units of each link it crosses
    return Layout(tuple(tuple(b) for b in sorted(boxes)), {a: u // g for a, u in outside.items()}, switch,
                  next(iter(into.values())) // g)



def box_rings(pairs: tuple[tuple[int, int], ...], outside: dict, count: int) -> list[list[int]] | None:
    """``count`` rings through all of ``pairs``, each a cycle of GPUs ``[a0, b0, a1, b1, ...]``
    entering pair ``i`` at ``a_i`` and leaving from its partner ``b_i``, together using every
    link ``b_i -> a_{i+1}`` between pairs at most its ``outside`` units; by a seeded
    depth-first search (:data:`SEEDS` tries of :data:`STEPS` steps), or None.

    >>> sorted(box_rings(((0, 1), (2, 3)), {(1, 2): 1, (3, 0): 1, (2, 1): 1, (0, 3): 1}, 2))
    [[0, 1, 2, 3], [1, 0, 3, 2]]
    """
    for seed in range(SEEDS):
        rng, left, rings = random.Random(seed), dict(outside), []
        while len(rings) < count:
            ring = _ring(pairs, left, rng)
            if ring is None:
                break
            for b, a in zip(ring[1::2], ring[2::2] + ring[:1]):
                left[(b, a)] -= 1
            rings.append(ring)
        if len(rings) == count:
            return rings
    return None


def _ring(pairs, left: dict, rng: random.Random) -> list[int] | None:
    """One ring over ``pairs`` within the units ``left`` (:func:`box_rings`), or None."""
    first = pairs[0]
    steps = [STEPS]
    for a in rng.sample(first, 2):
        path = [a, first[1] if a == first[0] else first[0]]
        if _extend(path, {first}, pairs, left, rng, steps):
            return path
    return None


def _extend(path: list[int], used: set, pairs, left: dict, rng: random.Random, steps: list[int]) -> bool:
    """Extend ``path`` (entry, exit, entry, exit, ...) over the unused pairs and close it."""
    steps[0] -= 1
    if steps[0] < 0:
        return False
    if len(used) == len(pairs):
        return left.get((path[-1], path[0]), 0) > 0
    nexts = [(a, b) for p in pairs if p not in used for a, b in (p, p[::-1]) if left.get((path[-1], a), 0) > 0]
    rng.shuffle(nexts)
    for a, b in nexts:
        p = (min(a, b), max(a, b))
        used.add(p)
        path += [a, b]
        if _extend(path, used, pairs, left, rng, steps):
            return True
        del path[-2:]
        used.discard(p)
    return False


def segment(ring: list[int], i: int, length: int) -> list[tuple[int, int]]:
    """The arcs by which a tree entering ``ring`` at position ``i`` reaches the ``length``
    GPUs of the whole pairs from ``i``'s on: along the ring, and, entering at a pair's exit
    (odd ``i``), to its partner backwards over the pair's link.

    >>> segment([0, 1, 2, 3], 0, 4)
    [(0, 1), (1, 2), (2, 3)]
    >>> segment([0, 1, 2, 3], 1, 4)
    [(1, 0), (1, 2), (2, 3)]
    """
    n = len(ring)
    arcs = [(ring[i], ring[i - 1])] if i % 2 else []
    path = [ring[(i + s) % n] for s in range(length - len(arcs))]
    return arcs + list(zip(path, path[1:]))


def tree_routes(rings: list[list[list[int]]], box: int, r: int, i: int, twice: bool,
                switch: int | None) -> list[tuple[int, ...]]:
    """The routes of the tree of the GPU at position ``i`` of ring ``r`` of box ``box``
    (``rings[box][r]``): its own box's :func:`segment` from ``i``, then for every other box an
    entry through ``switch`` at position ``i`` of that box's ring ``r`` and the arc after it,
    or, ``twice``, two entries half a ring apart and half a ring each. The roots of a box take
    every position of a ring once, so their entries into another box spread evenly."""
    own = rings[box][r]
    g, n = own[i], len(own)
    routes: list[tuple[int, ...]] = list(segment(own, i, n))
    for other in range(len(rings)):
        if other == box:
            continue
        ring = rings[other][r]
        entries = [i % (n // 2), i % (n // 2) + n // 2] if twice else [i]
        for j in entries:
            routes.append((g, switch, ring[j]))
            routes += segment(ring, j, n // len(entries))
    return routes


def _loads(lay: Layout, rings: list, twice: bool | None) -> dict:
    """Trees per link (pooled, ``(a, b)``) of one tree per ring and root: the roots' own boxes
    only (``twice`` None), or the other boxes only, entered once or twice."""
    load: dict = {}
    for box, ring_list in enumerate(rings):
        for r, ring in enumerate(ring_list):
            for i in range(len(ring)):
                for route in tree_routes(rings, box, r, i, bool(twice), lay.switch):
                    if (len(route) == 2 and route[0] in ring and route[1] in ring) == (twice is None):
                        for arc in zip(route, route[1:]):
                            load[arc] = load.get(arc, 0) + 1
    return load


def choose_parts(lay: Layout, rings: list, units: dict, most: Fraction | None = None) -> tuple | None:
    """``(q, d, tau)``: every root's share on a ring cut in ``d <= MAX_PARTS`` parts, ``q`` of
    them carried by a tree entering every other box twice and the rest by one entering once
    (:func:`tree_routes`; at most two trees per ring and root, whatever ``d``), the split of
    least exact time per shard ``tau`` (the busiest link's load over its units, with ``R d``
    parts per shard) at most ``most`` (None when none is); the fewest parts on ties."""
    own = _loads(lay, rings, None)
    once = _loads(lay, rings, False) if len(rings) > 1 else {}
    twice = _loads(lay, rings, True) if len(rings) > 1 else {}
    halves = len(rings) > 1 and len(rings[0][0]) % 4 == 0
    lines = [(own.get(a, 0), once.get(a, 0), twice.get(a, 0), lay.rings * units[a]) for a in set(own) | set(once) | set(twice)]

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


def find(net0, tau_star: Fraction) -> tuple[list[RoutedTree], int, Fraction] | None:
    """``(trees, k, tau)``: the paired-ring trees of the flow network ``net0``, ``k`` per shard
    taking time ``tau`` per shard (units of :class:`collsynth.tens.cut_optimum.Optimum`), when
    the module's structure holds, the rings are found and ``tau`` is within :data:`TOLERANCE`
    of the cut optimum ``tau_star``; else None."""
    lay = layout(net0)
    if lay is None or len({len(b) for b in lay.boxes}) != 1:
        return None
    rings = [box_rings(box, lay.outside, lay.rings) for box in lay.boxes]
    if any(r is None for r in rings):
        return None
    chosen = choose_parts(lay, rings, pooled_units(net0), tau_star * (1 + TOLERANCE))
    if chosen is None:
        return None
    q, d, tau = chosen
    parts = [(lo, hi, lo < q) for lo, hi in ((0, q), (q, d)) if hi > lo]
    trees = [RoutedTree(ring[i], r * d + lo, r * d + hi, tuple(tree_routes(rings, box, r, i, twice, lay.switch)))
             for box, ring_list in enumerate(rings) for r, ring in enumerate(ring_list)
             for i in range(len(ring)) for lo, hi, twice in parts]
    return trees, lay.rings * d, tau
