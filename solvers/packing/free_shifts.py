"""Box shifts twisted so that they keep no link: the same GPUs moved, the switches above them turned.

A box shift (:mod:`collsynth.instances.box_shift`) moves the GPUs of every box one place on and
sends each switch to the switch whose links the moved GPUs now use; a switch whose GPUs stay
among themselves (a fat tree's edge switch under a turn of its hosts, a rail leaf under a turn
of its unit's boxes) goes to itself, and so do its uplinks. Such a kept link defeats the
``event`` price per link orbit (:mod:`collsynth.tens.pipelined_event`: the shifts of which a
power keeps a used link have their trees simulated in full), which then reaches only a few
pipeline pieces where a reduce-scatter's trees, 10 hops deep on a fat tree, need a hundred.

Switches alike (the same links to the GPUs mapped so far) may instead go one place on among
themselves, as the aggregation switches of every pod of a k-ary fat tree (Al-Fares et al., "A
Scalable, Commodity Data Center Network Architecture", SIGCOMM 2008, Section 3: edge switch
``e`` links to every aggregation switch of its pod, aggregation switch ``j`` to the ``j``-th
group of cores): turning the hosts of every edge switch and the aggregation switches of every
pod together (the cores following) moves every edge uplink. Where they are more than divide the
level's order they turn in runs that do (HPN's 60 aggregation switches under a turn of 128
boxes: 15 runs of 4).

A turn of ``m`` boxes cannot move freely a leaf's ``s < m`` uplinks: some power of it keeps them
(a SuperPOD of 16 units: 32 boxes over a leaf's 8 spines, the 8th power). Its copies are then
simulated in full, ``m`` of them, though the power keeping the links has only ``m / s`` products.
A level may therefore be cut in two (:func:`_cuts`): the turn of ``s`` boxes within blocks of
``s`` with the spines turned, which keeps no link, and the turn of the blocks, which is listed:
``m / s`` copies (the SuperPOD's 4 rather than 32). The two generate another group moving the
same first box onto every box, and the trees moved by it are every root's as before.

:func:`free_shifts` tries, level by level, the level whole and every cut of it, and for each
part every choice of the rounds of the extension in which switches alike turn
(``box_shift.extended``'s ``rotated``), keeps those that are automorphisms of the part's order
commuting with the levels before, and takes the one whose group so far lists the fewest copies
(:func:`listed_copies`), then folds the links least (:func:`folds`: the products keeping each
link, summed; ties: the fewest turned rounds, the later rounds first, the level whole), and the
whole only where it does better than the shifts found. The trees of the first box moved by the
twisted shifts are still every root's trees (:func:`collsynth.tens.pipelined_trees.verify`
checks the shifts as any others).

>>> from collsynth.instances.generators import build
>>> from collsynth.instances.box_shift import box_shift
>>> topo = build("fat_tree", {"k": 4})
>>> s = box_shift(topo)
>>> folds(topo, s.perms, s.orders), folds(topo, *_twisted(topo, s))  # 96 pairs: 32 host links, 32 + 32 kept 2 / 4 times
(224.0, 96.0)
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ...instances.box_shift import BoxShift, extended, extension_rounds, is_shift_of_order
from ...tens.pipelined_trees import image_orbits, link_images

MAX_ROUNDS = 4  # the extension rounds a level may turn switches in (a switch tier each: fat trees 3, rail Clos 4)


def free_shifts(topology, shift: BoxShift | None) -> BoxShift | None:
    """``shift`` with each level's switches turned, and a level cut in two, where the ``event``
    price per link orbit then lists fewer copies or the links fold less (module doc,
    :func:`listed_copies`, :func:`folds`); ``shift`` itself where the whole does no better, and
    None for None. Remembered for the latest :data:`KEPT` pairs of topology and shift objects
    (an allreduce's two halves ask for the same one)."""
    if shift is None:
        return None
    key = (id(topology), id(shift))
    kept = _KEPT.get(key)
    if kept is not None and kept[0] is topology and kept[1] is shift:
        return kept[2]
    found = _free_shifts(topology, shift)
    if len(_KEPT) >= KEPT:
        _KEPT.pop(next(iter(_KEPT)))
    _KEPT[key] = (topology, shift, found)
    return found


KEPT = 8  # the latest (topology, shift) pairs whose free shifts are remembered
_KEPT: dict = {}


def _free_shifts(topology, shift: BoxShift) -> BoxShift:
    """:func:`free_shifts` computed."""
    pairs = _Pairs(topology)
    found = pairs.key(list(shift.perms), tuple(shift.orders))
    if found[1] <= len(topology.link_arrays):  # no product but the identity keeps a link
        return shift
    perms, orders = _twisted(topology, shift, pairs)
    if pairs.key(list(perms), tuple(orders)) >= found:
        return shift
    return BoxShift(perms, orders, shift.box)


def folds(topology, perms, orders) -> float:
    """The sum over the link pairs of ``topology`` of the group's order over the size of the
    pair's orbit under ``perms`` (commuting, of ``orders``): how many products keep the pair,
    summed; the number of pairs where no product but the identity keeps one. The event price
    per link orbit lists the shifts of which a power keeps a used pair
    (:func:`collsynth.tens.pipelined_event.free_from`)."""
    return _Pairs(topology).folds(list(perms), tuple(orders))


def listed_copies(topology, perms, orders) -> int:
    """How many copies of each listed send the ``event`` price per link orbit simulates were
    the trees to use every link pair: the product of the orders of the fewest first shifts,
    those keeping a pair put first, whose removal leaves a group acting freely on the pairs
    (:func:`collsynth.tens.pipelined_event.free_from`).

    >>> from collsynth.instances.generators import build
    >>> from collsynth.instances.box_shift import box_shift
    >>> topo = build("fat_tree", {"k": 4})
    >>> s = box_shift(topo)
    >>> listed_copies(topo, s.perms, s.orders), listed_copies(topo, *_twisted(topo, s))
    (4, 1)
    """
    return _Pairs(topology).listed_copies(list(perms), tuple(orders))


class _Pairs:
    """The shifts acting on ``topology``'s link pairs, each computed once
    (:func:`collsynth.tens.pipelined_trees.link_images`), and the orbits of the groups asked for:
    :func:`free_shifts` prices many groups sharing their first shifts."""

    def __init__(self, topology):
        self.la = topology.link_arrays
        self.L = len(self.la)
        self._images: dict[bytes, np.ndarray] = {}
        self._orbits: dict[tuple, np.ndarray] = {}
        self._keeps: dict[tuple, bool] = {}

    def image(self, perm: np.ndarray) -> np.ndarray:
        key = np.asarray(perm, np.int64).tobytes()
        if key not in self._images:
            self._images[key] = link_images(self.la, [np.asarray(perm, np.int64)])[0]
        return self._images[key]

    def orbits(self, perms: list, orders: tuple) -> np.ndarray:
        """Per pair the least pair of its orbit under ``perms``, built on the orbits of their
        first ones where those were asked for before."""
        key = tuple(self.image(p).ctypes.data for p in perms) + tuple(orders)
        if key not in self._orbits:
            start = self.orbits(perms[:-1], orders[:-1]) if perms else None
            self._orbits[key] = image_orbits([self.image(perms[-1])], orders[-1:], self.L, start) if perms \
                else np.arange(self.L)
        return self._orbits[key]

    def folds(self, perms: list, orders: tuple) -> float:
        group = self.orbits(perms, orders)
        size = np.bincount(group, minlength=self.L)[group]
        return float((math.prod(orders) / size).sum())

    def keeps(self, perm: np.ndarray, order: int) -> bool:
        """Whether a power of ``perm`` other than the identity keeps a pair."""
        image = self.image(perm)
        key = (image.ctypes.data, order)
        if key not in self._keeps:
            cur, ident = np.arange(self.L), np.arange(self.L)
            self._keeps[key] = False
            for _ in range(order - 1):
                cur = image[cur]
                if (cur == ident).any():
                    self._keeps[key] = True
                    break
        return self._keeps[key]

    def listed_copies(self, perms: list, orders: tuple) -> int:
        first = sorted(range(len(perms)), key=lambda i: not self.keeps(perms[i], orders[i]))  # keeping_order's
        moved, kept = [perms[i] for i in first], tuple(orders[i] for i in first)
        every = np.arange(self.L)
        for m in range(len(kept) + 1):
            group = self.orbits(moved[m:], kept[m:])
            if (np.bincount(group, minlength=self.L)[group[every]] == math.prod(kept[m:])).all():
                return math.prod(kept[:m])
        return math.prod(kept)

    def key(self, perms: list, orders: tuple) -> tuple[int, float]:
        """What :func:`free_shifts` minimises: :func:`listed_copies`, then :func:`folds`."""
        return self.listed_copies(perms, orders), self.folds(perms, orders)


def _twisted(topology, shift: BoxShift, pairs: _Pairs | None = None) -> tuple[np.ndarray, tuple[int, ...]]:
    """The twisted levels of ``shift`` (module doc) and their orders, each level whole or cut in
    two (:func:`_cuts`), whichever gives the least :meth:`_Pairs.key` with the levels chosen before;
    ``shift``'s own where a level finds nothing commuting with the levels turned before it."""
    pairs = _Pairs(topology) if pairs is None else pairs
    npus = sorted(int(c) for c in topology.npus)
    chosen: list[np.ndarray] = []
    orders: list[int] = []
    units = shift.box
    for perm, order in zip(shift.perms, shift.orders):
        best = None
        before = pairs.key(chosen, tuple(orders))[0] if chosen else 1
        for parts in _cuts(order):
            got = _turned_levels(topology, pairs, npus, units, parts, perm, chosen, orders)
            if got is None:
                continue
            key = (*pairs.key(chosen + got[0], tuple(orders) + parts), got[1], len(parts))
            if best is None or key < best[0]:
                best = (key, got[0], parts)
            if best[0][0] == before:  # the level lists no more copies: a cut lists none fewer
                break
        if best is None:  # no turn, nor the shift itself, commutes with the levels turned before
            return shift.perms, shift.orders
        chosen += best[1]
        orders += list(best[2])
        units *= order
    return np.stack(chosen), tuple(orders)


def _cuts(order: int) -> list[tuple[int, ...]]:
    """A level of ``order`` whole, then cut into an inner level of each proper divisor ``m``
    and an outer one of ``order / m``: a rotation by ``u`` places within blocks of ``u order``
    is the rotation by ``u`` within blocks of ``u m`` and the rotation by ``u m`` within the
    blocks of ``u order`` (their product moves every node of a block onto every other once);
    a twist of the inner one may then move every link its power would keep."""
    return [(order,)] + [(m, order // m) for m in range(2, order) if order % m == 0]


def _turned_levels(topology, pairs: _Pairs, npus: list[int], units: int, parts: tuple[int, ...], perm: np.ndarray,
                   chosen: list[np.ndarray], orders: list[int]) -> tuple[list[np.ndarray], int] | None:
    """The levels of ``parts`` (``(order,)``: the level ``perm`` itself; else its cut, inner
    first), each with the switches of the extension rounds that make the least :meth:`_Pairs.key`
    with ``chosen`` turned (ties: the fewest turned rounds), and the rounds turned in all; None
    where one finds no automorphism of its order commuting with the levels before it."""
    levels: list[np.ndarray] = []
    turned = 0
    n = len(npus)
    idx = np.arange(n)
    for order in parts:
        block = units * order
        moved = np.asarray(npus, np.int64)[idx // block * block + (idx % block + units) % block]
        best, best_key = None, None
        memo: dict = {}  # the twists of this rotation share their first rounds
        for rotated in _choices(topology):
            if best_key is not None and best_key[:2] == (1, len(topology.link_arrays)):  # nothing folds: no turn does better
                break
            whole = len(parts) == 1 and not rotated
            cand = perm if whole else extended(topology, npus, moved, frozenset(rotated), order, memo)
            if cand is None or (not whole and not is_shift_of_order(topology, cand, order)) or not all(
                    (cand[q] == q[cand]).all() for q in chosen + levels):
                continue
            key = (*pairs.key(chosen + levels + [cand], tuple(orders) + parts[:len(levels) + 1]), len(rotated))
            if best_key is None or key < best_key:
                best, best_key = cand, key
        if best is None:
            return None
        levels.append(best)
        turned += best_key[2]
        units = block
    return levels, turned


def _choices(topology) -> list[tuple[int, ...]]:
    """Every set of extension rounds to turn switches in, the empty one first, then by size, the
    later rounds first among sets of one size (a tier farther from the GPUs turned by a lower
    level leaves the nearer tiers to the levels above, whose turns need them: a SuperPOD's
    rails turning the cores leave the spines to its boxes). The rounds are at most the
    switches' tiers (:data:`MAX_ROUNDS`)."""
    rounds = range(min(MAX_ROUNDS, max(1, len(extension_rounds(topology)))))
    return [c for n in range(len(rounds) + 1) for c in sorted(itertools.combinations(rounds, n), reverse=True)]
