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

What a box is, its crossbar and the ways in from every other box come from one model
(:mod:`.boxes`); this module reads it and never the topology's shape. A box that is a crossbar
(NVIDIA's NVSwitch, every GPU of the box on it) has one ring through it in id order, each GPU
sending to the next through the switch: every port carries ``N - 1`` shards, the single-GPU
cut. Any other box has rings through its blocks (pairs or single GPUs, above).

Every tree then enters every other box through a *door* (:func:`door`): a link into it (TE-CCL's
DGX-2: odd GPU ``2k + 1`` of a chassis to even GPU ``2k`` of every other, Liu et al., SIGCOMM
2024, its dgx2.py topology), or a route through a switch holding GPUs of both (ForestColl's MI250
systems: every GCD on one InfiniBand switch; DGX H100's rail switches at four or more boxes),
the one landing at the tree's own position in that box's ring (or the nearest before it),
followed by the arc of that box's ring after it (:func:`segment`); the roots of a box take
every position once, so their doors spread. A tree may instead enter every other box twice,
aiming half a ring apart, each door followed by half a ring: it relays less over the box's
rings and more through the doors. The share of a root's data entering twice (``q`` of ``d``
parts) is the one of least time under exact link loads (:func:`choose_parts`); on DGX H100 at
four boxes 1 part in 30 balances the NVSwitch ports and the NICs, the single-GPU cut exactly.

Where a box's rings come with their reverses (links alike both ways), a tree may instead reach
each box *both ways* (:func:`segment_both`): half its blocks along a ring, half along its
reverse, one tree carrying both rings' shares (the two rings' trees cross each link as often
together). Half as deep, and half the trees: a reduction's pipeline fills sooner and takes
twice the pieces within the send budget (:mod:`.fill` prices it against one way round; MI250 at
four boxes 17 -> 10 hops deep).

The rings themselves are found by a seeded depth-first search over the blocks that backtracks
over the rings it has taken (:func:`box_rings`); the trees are used only when their exact loads
fit within :data:`TOLERANCE` of the cut optimum.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from fractions import Fraction

from . import boxes
from .trees import RoutedTree

SEEDS = 32  # seeded searches for a box's rings before giving up
STEPS = 5_000  # depth-first steps per ring
MAX_BLOCKS = 128  # blocks per box at most (the search recurses once per block)
MAX_GPUS = 256  # GPUs at most (every tree crosses every box: its routes grow as the GPUs)
MAX_PARTS = 100  # parts of a root's share on a ring at most (the resolution of the split)
TOLERANCE = Fraction(1, 1000)  # the trees' time may exceed the cut optimum by this share at most
DOOR_RULES = ("aim", "in turn")  # the door rules a forest is built by (:func:`door`; the producer prices each)
BOTH_WAYS = "both ways"  # each rule again with every box reached half along a ring, half along its reverse


@dataclass(frozen=True)
class Layout:
    """The rings' view of the boxes (:class:`.boxes.Boxes`): each box's blocks (all pairs
    ``(a, b)`` or all single GPUs ``(a,)``), the rings every link between two blocks of a box
    can carry (``(a, b) -> rings``: its units over the greatest common divisor of those links'
    units), ``R``, the rings into (and out of) every block, the route of every arc a ring takes
    inside a box (through a two-port switch or the box's crossbar), each box's ring when its
    crossbar fixes it (id order through the switch; None: searched, :func:`box_rings`), and
    the doors into each box: ``(box, other) -> {gpu: routes from box landing at gpu}``, and
    the rule by which a tree picks its door (:func:`door`)."""

    boxes: tuple[tuple[tuple[int, ...], ...], ...]
    outside: dict
    rings: int
    routes: dict
    given: tuple
    doors: dict
    rule: str = "aim"  # which door a tree takes (:func:`door`, one of :data:`DOOR_RULES`)
    backs: tuple = ()  # both ways (:func:`both_ways`): per box, each ring's reverse's index in its box's rings

    @property
    def size(self) -> int:
        """GPUs per block (2: pairs)."""
        return len(self.boxes[0][0])


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


def _doors(m: boxes.Boxes) -> dict | None:
    """``(box, other) -> {gpu: routes}``: every entry of the model from ``box`` into ``other``
    by the GPU it lands at (links, and through each GPU switch holding both boxes one route
    per GPU of ``box`` on it); None when some box does not enter some other."""
    count = len(m.gpus)
    if len(m.entries) != count * (count - 1):
        return None
    out: dict = {}
    for (x, y), e in m.entries.items():
        lands: dict = {}
        for route in e.links:
            lands.setdefault(route[-1], []).append(route)
        for s in e.switches:
            ports = m.switch_gpus[s]
            for b in (g for g in ports if m.box_of[g] == y):
                lands.setdefault(b, []).extend((a, s, b) for a in ports if m.box_of[a] == x)
        out[(x, y)] = lands
    return out


def layout(net0, model: boxes.Boxes | None = None) -> Layout | None:
    """The rings' layout of the flow network ``net0`` (:class:`collsynth.tens.cut_optimum.FlowNet`)
    from its boxes (``model``, else :func:`.boxes.of_flow_net`) when every root has weight 1,
    the boxes are alike, every box enters every other, and each box's blocks are alike (all
    boxes crossbars, or all GPUs joined by links that decompose over the blocks); else None."""
    if set(net0.weight) != {1} or not 3 <= len(net0.compute) <= MAX_GPUS:
        return None
    m = model or boxes.of_flow_net(net0)
    doors = _doors(m)
    if doors is None or len({len(b) for b in m.gpus}) != 1:
        return None
    if all(s is not None for s in m.crossbars):
        routes = {(a, b): (a, s, b) for box, s in zip(m.gpus, m.crossbars) for a, b in zip(box, box[1:] + box[:1])}
        return Layout(tuple(tuple((v,) for v in box) for box in m.gpus), {}, 1, routes, m.gpus, doors)
    if any(s is not None for s in m.crossbars):
        return None
    blocks = [_blocks(m.links, box) for box in m.gpus]
    if len({len(b[0]) for b in blocks}) != 1 or min(len(b) for b in blocks) < 2:
        return None
    block_of = {v: k for box in blocks for k in box for v in k}
    outside = {(a, b): u for (a, b), u in m.links.items() if block_of[a] != block_of[b]}
    into = {k: sum(u for (a, b), u in outside.items() if b in k) for box in blocks for k in box}
    out = {k: sum(u for (a, b), u in outside.items() if a in k) for box in blocks for k in box}
    if not outside or len(set(into.values()) | set(out.values())) != 1:
        return None
    g = math.gcd(*outside.values())  # a ring takes g units of each link it crosses
    return Layout(tuple(tuple(b) for b in blocks), {a: u // g for a, u in outside.items()}, next(iter(into.values())) // g,
                  dict(m.routes), (None,) * len(blocks), doors)


def box_rings(blocks: tuple[tuple[int, ...], ...], outside: dict, count: int, deadline=None) -> list[list[int]] | None:
    """``count`` rings through all of ``blocks``, each a cycle of GPUs (for pairs ``[a0, b0, a1,
    b1, ...]``, entering pair ``i`` at ``a_i`` and leaving from its partner ``b_i``), together
    using every link between blocks at most its ``outside`` rings; or None. A seeded
    depth-first search (:data:`SEEDS` tries of at most :data:`STEPS` steps per ring wanted,
    ``deadline`` checked before each try), going first where fewest ways on are left
    (Warnsdorff's rule) and backtracking over the rings already taken (a ring that leaves
    links no rings can use up is given up for the next one: taking each ring for good missed
    decompositions of three rings on seven GPUs, ``tests/test_packing_rings.py``); a try that
    ends within its steps has searched every choice, so there is no decomposition. Where the
    links are the same both ways, each ring is first taken with its reverse (a Hamiltonian
    decomposition of the undirected graph), and, if no try finds one, alone: links alike both
    ways need not be rings paired with their reverses (three rings on six GPUs, ibid.). Every
    order is that of ``blocks`` and ``outside`` and the seeds: the same rings on every run.

    >>> sorted(box_rings(((0, 1), (2, 3)), {(1, 2): 1, (3, 0): 1, (2, 1): 1, (0, 3): 1}, 2))
    [[0, 1, 2, 3], [1, 0, 3, 2]]
    >>> box_rings(((0,), (1,), (2,)), {(0, 1): 1, (1, 2): 1, (2, 0): 1, (1, 0): 1}, 2) is None
    True
    """
    if len(blocks) > MAX_BLOCKS:
        return None
    both = all(outside.get((b, a)) == u for (a, b), u in outside.items())
    block_of = {v: k for k in blocks for v in k}
    out_of: dict = {}
    for a, b in outside:
        if a in block_of:
            out_of.setdefault(a, []).append(b)
    for paired in ((True, False) if both else (False,)):  # links alike both ways may still not pair rings
        for seed in range(SEEDS):
            if deadline is not None:
                deadline.check("rings", f"search {seed + 1} of {SEEDS}")
            steps = [STEPS * count]
            rings = _rings(blocks, block_of, out_of, dict(outside), count, paired, random.Random(seed), steps)
            if rings is not None:
                return rings
            if steps[0] >= 0:  # searched to the end: no decomposition of this kind
                break
    return None


def _rings(blocks, block_of: dict, out_of: dict, left: dict, count: int, paired: bool,
           rng: random.Random, steps: list[int]) -> list[list[int]] | None:
    """``count`` rings within the rings ``left`` (:func:`box_rings`; restored unless found),
    one seeded try of at most ``steps[0]`` steps (counted down, below zero when cut short);
    with ``paired``, each ring is taken with its reverse while two are wanted. Every ring
    found by :func:`_cycles` is tried in turn under the rings that follow."""
    if count == 0:
        return []
    size = len(blocks[0])
    for ring in _cycles(blocks, block_of, out_of, left, rng, steps):
        back = ring[::-1][-size:] + ring[::-1][:-size]  # the reverse, from the same block on
        taken = [ring, back] if paired and count >= 2 else [ring]
        arcs = [a for r in taken for a in _crossings(r, size)]
        if any(left[a] < arcs.count(a) for a in arcs):  # the reverse's links are used up
            continue
        for a in arcs:
            left[a] -= 1
        rest = _rings(blocks, block_of, out_of, left, count - len(taken), paired, rng, steps)
        for a in arcs:
            left[a] += 1
        if rest is not None:
            for a in arcs:
                left[a] -= 1
            return taken + rest
        if steps[0] < 0:
            return None
    return None


def _crossings(ring: list[int], size: int) -> list[tuple[int, int]]:
    """The links between blocks a ring (of blocks of ``size`` GPUs) crosses: from each block's
    last GPU to the next block's first."""
    return list(zip(ring[size - 1::size], ring[size::size] + ring[:1]))


def _cycles(blocks, block_of: dict, out_of: dict, left: dict, rng: random.Random, steps: list[int]):
    """Every ring over ``blocks`` within the rings ``left`` (:func:`box_rings`), one at a
    time, from the first block entered either way, until ``steps`` run out (``left`` may
    change between rings, and is as it was whenever the next is asked for)."""
    first = blocks[0]
    for start in rng.sample([first, first[::-1]], len(first)):
        yield from _extend(list(start), {first}, len(blocks), block_of, out_of, left, rng, steps)


def _extend(path: list[int], used: set, total: int, block_of: dict, out_of: dict, left: dict,
            rng: random.Random, steps: list[int]):
    """Every extension of ``path`` over the unused blocks (``total`` in all), each entered at
    one GPU and left from its other, that closes (a copy per ring)."""
    steps[0] -= 1
    if steps[0] < 0:
        return
    if len(used) == total:
        if left.get((path[-1], path[0]), 0) > 0:
            yield list(path)
        return

    def ways(x: int) -> list[tuple[int, ...]]:  # the unused blocks x may enter next, entered first
        return [(b,) + tuple(v for v in block_of[b] if v != b) for b in out_of.get(x, ())
                if left[(x, b)] > 0 and block_of[b] not in used]

    nexts = ways(path[-1])
    rng.shuffle(nexts)
    nexts.sort(key=lambda o: len(ways(o[-1])))
    for o in nexts:
        used.add(block_of[o[0]])
        path += o
        yield from _extend(path, used, total, block_of, out_of, left, rng, steps)
        del path[-len(o):]
        used.discard(block_of[o[0]])
        if steps[0] < 0:
            return


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


def segment_both(ring: list[int], back: list[int], i: int, paired: bool = True) -> list[tuple[int, int]]:
    """The arcs by which a tree entering ``ring`` at position ``i`` reaches the whole box both
    ways: half the blocks from ``i``'s on along ``ring`` (:func:`segment`; of an even number
    of blocks one more from an odd ``i``), the others along ``back``, the ring's reverse, from
    the block of ``i`` (leaving it from its exit in ``back``, ``i``'s partner when ``i`` enters
    its pair in ``ring``). Half as deep as one way round. Trees entering pairs at both their
    GPUs cross each link of the ring and of its reverse as often as trees one way round on
    each ring do (``B`` pairs: ``B - 1`` times per pair; with ``B = 2 m``, ``m - 1`` ahead
    from the entry and ``m`` from the exit), so one such tree carries the share of the two
    rings' trees (:func:`tree_routes`); single GPUs balance so only when they are odd in
    number (the exact loads of :func:`choose_parts` keep only trees that balance).

    >>> segment_both([0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0], 0, paired=False)
    [(0, 1), (1, 2), (0, 5), (5, 4), (4, 3)]
    >>> segment_both([0, 1, 2, 3, 4, 5, 6, 7], [1, 0, 7, 6, 5, 4, 3, 2], 3)  # pairs 0-1, 2-3, ..; odd: 3 ahead
    [(3, 2), (3, 4), (4, 5), (5, 6), (6, 7), (2, 1), (1, 0)]
    """
    n, size = len(ring), 2 if paired else 1
    blocks = n // size
    ahead = size * ((blocks + 1) // 2 + (i % 2 if blocks % 2 == 0 else 0))
    arcs = segment(ring, i, ahead, paired)
    j = back.index(ring[i])
    start = j | 1 if paired else j  # the block's exit in back (holding the piece once the forward arcs ran)
    path = [back[(start + s) % n] for s in range(n - ahead + 1)]
    return arcs + list(zip(path, path[1:]))


def door(lay: Layout, box: int, other: int, root: int, ring: list[int], p: int, i: int) -> tuple[int, ...]:
    """The route by which the tree of ``root`` (at position ``i`` of its box's ring) enters
    box ``other`` aiming at position ``p`` of its ring ``ring``, by the layout's door rule
    (:data:`DOOR_RULES`): ``aim``, a door of the layout landing there, else at the nearest position before it
    (cyclically), of those one from the root itself if any, else the ``i``-th (cyclically), so
    that the roots of a box spread over them; ``in turn``, the ``p``-th of all the doors into
    that box in id order (cyclically), wherever it lands.

    >>> lay = Layout(((0,), (1,)), {}, 1, {}, (None, None), {(0, 1): {4: [(2, 4)], 6: [(3, 6)]}})
    >>> turn = replace(lay, rule="in turn")
    >>> door(lay, 0, 1, 0, [4, 5, 6, 7], 1, 1), door(turn, 0, 1, 0, [4, 5, 6, 7], 1, 1)
    ((2, 4), (3, 6))
    """
    lands = lay.doors[(box, other)]
    if lay.rule == "in turn":
        ways = sorted(w for routes in lands.values() for w in routes)
        return ways[p % len(ways)]
    n = len(ring)
    for back in range(n):
        ways = lands.get(ring[(p - back) % n])
        if ways:
            return next((w for w in ways if w[0] == root), ways[i % len(ways)])
    raise ValueError(f"no door from box {box} into box {other}")


def tree_routes(lay: Layout, rings: list[list[list[int]]], box: int, r: int, i: int,
                twice: bool) -> list[tuple[int, ...]]:
    """The routes of the tree of the GPU at position ``i`` of ring ``r`` of box ``box``
    (``rings[box][r]``): its own box's :func:`segment` from ``i``, then for every other box a
    :func:`door` aiming at position ``i`` of that box's ring ``r`` and the arc after it, or,
    ``twice``, two doors aiming half a ring apart and half a ring each. The roots of a box
    take every position of a ring once, so their entries into another box spread evenly. An
    arc through a switch is its route through it."""
    own = rings[box][r]
    g, n = own[i], len(own)
    paired = lay.size == 2

    def arcs_from(b: int, ring: list[int], at: int, length: int) -> list[tuple[int, ...]]:
        got = segment_both(ring, rings[b][lay.backs[b][r]], at, paired) if lay.backs else segment(ring, at, length,
                                                                                                 paired)
        return [lay.routes.get(a, a) for a in got]

    arcs = arcs_from(box, own, i, n)
    for other in range(len(rings)):
        if other == box:
            continue
        ring = rings[other][r]
        aims = [i % (n // 2), i % (n // 2) + n // 2] if twice else [i]
        for p in aims:
            entry = door(lay, box, other, g, ring, p, i)
            arcs.append(entry)
            arcs += arcs_from(other, ring, ring.index(entry[-1]), n // len(aims))
    return arcs


def _spans(lay: Layout, rings: list, twice: bool) -> bool:
    """Whether every tree (:func:`tree_routes`) reaches every GPU but its root exactly once."""
    everyone = sorted(v for ring_list in rings for v in ring_list[0])
    for box, ring_list in enumerate(rings):
        for r, ring in carried(lay, ring_list):
            for i, g in enumerate(ring):
                ends = sorted(route[-1] for route in tree_routes(lay, rings, box, r, i, twice))
                if ends != [v for v in everyone if v != g]:
                    return False
    return True


def _loads(lay: Layout, rings: list, twice: bool | None) -> dict:
    """Trees per link (pooled, ``(a, b)``) of one tree per ring and root: the roots' own boxes
    only (``twice`` None), or the other boxes only, entered once or twice."""
    load: dict = {}
    weight = 2 if lay.backs else 1  # a tree both ways carries its ring's share and its reverse's
    for box, ring_list in enumerate(rings):
        for r, ring in carried(lay, ring_list):
            mine = set(ring)
            for i in range(len(ring)):
                for route in tree_routes(lay, rings, box, r, i, bool(twice)):
                    if (route[0] in mine and route[-1] in mine) == (twice is None):
                        for arc in zip(route, route[1:]):
                            load[arc] = load.get(arc, 0) + weight
    return load


def carried(lay: Layout, ring_list: list) -> list[tuple[int, list[int]]]:
    """``(index, ring)`` of the rings whose trees are built: all, or both ways (``lay.backs``)
    the first of each ring and its reverse (its trees carry the reverse's share too)."""
    return [(r, ring) for r, ring in enumerate(ring_list) if not lay.backs or r < lay.backs[0][r]]


def choose_parts(lay: Layout, rings: list, units: dict, most: Fraction | None = None) -> tuple | None:
    """``(q, d, tau)``: every root's share on a ring cut in ``d <= MAX_PARTS`` parts, ``q`` of
    them carried by a tree entering every other box twice and the rest by one entering once
    (:func:`tree_routes`; at most two trees per ring and root, whatever ``d``), the split of
    least exact time per shard ``tau`` (the busiest link's load over its units, with ``R d``
    parts per shard) at most ``most`` (None when none is); the fewest parts on ties."""
    halves = not lay.backs and len(rings) > 1 and len(rings[0][0]) % (2 * lay.size) == 0 and _spans(lay, rings, True)
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


def find(net0, tau_star: Fraction, deadline=None, model: boxes.Boxes | None = None) -> tuple[list[RoutedTree], int, Fraction] | None:
    """``(trees, k, tau)``: the ring trees of the flow network ``net0`` by the first door rule
    (:func:`find_each`), or None."""
    return find_each(net0, tau_star, deadline, model).get(DOOR_RULES[0])


def find_each(net0, tau_star: Fraction, deadline=None, model: boxes.Boxes | None = None) -> dict:
    """``{door rule: (trees, k, tau)}``: the ring trees of the flow network ``net0`` by each
    of :data:`DOOR_RULES` (:func:`door`), and of each again both ways (``"<rule>, both ways"``,
    :func:`segment_both`) where the rings come with their reverses, whose trees span, ``k`` per
    shard taking time ``tau``
    per shard (units of :class:`collsynth.tens.cut_optimum.Optimum`), when its boxes
    (``model``, :mod:`.boxes`) have a :func:`layout`, the rings are found and ``tau`` is
    within :data:`TOLERANCE` of the cut optimum ``tau_star``; a rule giving the trees of an
    earlier one is left out. ``deadline`` (:class:`collsynth.limits.Deadline`) is checked
    between searches."""
    model = model or boxes.of_flow_net(net0)
    lay = layout(net0, model)
    if lay is None:
        return {}
    rings = [[list(ring)] if ring is not None else box_rings(blocks, lay.outside, lay.rings, deadline)
             for blocks, ring in zip(lay.boxes, lay.given)]
    if any(r is None for r in rings):
        return {}
    out: dict = {}
    backs = both_ways(rings)
    for name, way in [(rule, replace(lay, rule=rule)) for rule in DOOR_RULES] + \
            ([(f"{rule}, {BOTH_WAYS}", replace(lay, rule=rule, backs=backs)) for rule in DOOR_RULES] if backs else []):
        found = _trees(way, rings, model.units, tau_star)
        if found is not None and all(found[0] != other[0] for other in out.values()):
            out[name] = found
    return out


def both_ways(rings: list[list[list[int]]]) -> tuple:
    """Per box, the index of each ring's reverse among the box's rings (the same cycle the
    other way round, :func:`box_rings` takes rings with their reverses where links are alike
    both ways); empty unless every ring of every box has one, at the same index in every box.

    >>> both_ways([[[0, 1, 2, 3], [1, 0, 3, 2]]]), both_ways([[[0, 1, 2]]])
    (((1, 0),), ())
    """
    out = []
    for ring_list in rings:
        arcs = [frozenset(zip(r, r[1:] + r[:1])) for r in ring_list]
        flipped = [frozenset((b, a) for a, b in x) for x in arcs]
        idx = [next((j for j, y in enumerate(arcs) if y == f), None) for f in flipped]
        if len(ring_list[0]) < 3 or None in idx:
            return ()
        out.append(tuple(idx))
    return tuple(out) if len(set(out)) == 1 else ()  # a tree takes ring r and its reverse in every box


def _trees(lay: Layout, rings: list, units: dict, tau_star: Fraction) -> tuple | None:
    """:func:`find_each` for one layout (one door rule) and its boxes' ``rings``."""
    if not _spans(lay, rings, False):
        return None
    chosen = choose_parts(lay, rings, units, tau_star * (1 + TOLERANCE))
    if chosen is None:
        return None
    q, d, tau = chosen
    parts = [(lo, hi, lo < q) for lo, hi in ((0, q), (q, d)) if hi > lo]
    if lay.backs:  # one tree per ring and its reverse: units 2 m d .. 2 (m + 1) d for the m-th pair (d = 1 here)
        trees = [RoutedTree(ring[i], 2 * m * d, 2 * (m + 1) * d, tuple(tree_routes(lay, rings, box, r, i, False)))
                 for box, ring_list in enumerate(rings) for m, (r, ring) in enumerate(carried(lay, ring_list))
                 for i in range(len(ring))]
        return trees, lay.rings * d, tau
    trees = [RoutedTree(ring[i], r * d + lo, r * d + hi, tuple(tree_routes(lay, rings, box, r, i, twice)))
             for box, ring_list in enumerate(rings) for r, ring in enumerate(ring_list)
             for i in range(len(ring)) for lo, hi, twice in parts]
    return trees, lay.rings * d, tau
