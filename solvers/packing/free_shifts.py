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
pod together (the cores following) moves every edge uplink. :func:`free_shifts` tries, level by
level, every choice of the rounds of the extension in which such switches turn
(``box_shift.extended``'s ``rotated``), keeps those that are automorphisms of the level's order
commuting with the levels before, and takes the one whose group so far folds the links least
(:func:`folds`: the products keeping each link, summed; ties: the fewest turned rounds, the
shift itself first), and the whole only where it folds them less than the shifts found. The
GPUs move as before, so the trees of the first box moved by the twisted shifts are still every
root's trees (:func:`collsynth.tens.pipelined_trees.verify` checks the shifts as any others).

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

from ...instances.box_shift import BoxShift, extended, is_shift_of_order
from ...tens.pipelined_trees import link_orbits

MAX_ROUNDS = 4  # the extension rounds a level may turn switches in (a switch tier each: fat trees 3, rail Clos 4)


def free_shifts(topology, shift: BoxShift | None) -> BoxShift | None:
    """``shift`` with each level's switches turned where that folds the links less (module doc,
    :func:`folds`); ``shift`` itself where the whole group folds them no less turned (HPN: a
    segment's 128 boxes over a leaf's 60 uplinks fold them 128 times whichever way the spines
    turn), and None for None."""
    if shift is None:
        return None
    found = folds(topology, shift.perms, shift.orders)
    if found <= len(topology.link_arrays):  # no product but the identity keeps a link
        return shift
    perms, orders = _twisted(topology, shift)
    if folds(topology, perms, orders) >= found:
        return shift
    return BoxShift(perms, shift.orders, shift.box)


def folds(topology, perms, orders) -> float:
    """The sum over the link pairs of ``topology`` of the group's order over the size of the
    pair's orbit under ``perms`` (commuting, of ``orders``): how many products keep the pair,
    summed; the number of pairs where no product but the identity keeps one. The event price
    per link orbit lists the shifts of which a power keeps a used pair
    (:func:`collsynth.tens.pipelined_event.free_from`)."""
    la = topology.link_arrays
    group, _ = link_orbits(la, np.asarray(perms), tuple(orders))
    size = np.bincount(group, minlength=len(la))[group]
    return float((math.prod(orders) / size).sum())


def _twisted(topology, shift: BoxShift) -> tuple[np.ndarray, tuple[int, ...]]:
    """The twisted levels of ``shift`` (module doc) and their orders; ``shift``'s own where a
    level finds nothing commuting with the levels turned before it."""
    la = topology.link_arrays
    npus = sorted(int(c) for c in topology.npus)
    _, cls = np.unique(np.stack([la.bandwidth, la.alpha, la.count.astype(float)]), axis=1, return_inverse=True)
    links = (la.src.tolist(), la.dst.tolist(), np.ravel(cls).tolist())
    chosen: list[np.ndarray] = []
    for level, (perm, order) in enumerate(zip(shift.perms, shift.orders)):
        best, best_key = None, None
        for rotated in _choices(topology):
            if best_key is not None and best_key[0] <= len(la):  # nothing folds: no turn does better
                break
            cand = perm if not rotated else extended(topology, npus, perm[npus], links, frozenset(rotated))
            if cand is None or (rotated and not is_shift_of_order(topology, cand, order)) or not all(
                    (cand[q] == q[cand]).all() for q in chosen):
                continue
            key = (folds(topology, chosen + [cand], shift.orders[:level + 1]), len(rotated))
            if best_key is None or key < best_key:
                best, best_key = cand, key
        if best is None:  # no turn, nor the shift itself, commutes with the levels turned before
            return shift.perms, shift.orders
        chosen.append(best)
    return np.stack(chosen), shift.orders


def _choices(topology) -> list[tuple[int, ...]]:
    """Every set of extension rounds to turn switches in, the empty one first: the rounds are at
    most the switches' tiers (:data:`MAX_ROUNDS`)."""
    rounds = range(min(MAX_ROUNDS, max(1, len(topology.switches))))
    return [c for n in range(len(rounds) + 1) for c in itertools.combinations(rounds, n)]
