"""The hops of a routed tree, step by step: where a pipelined tree's pieces cross each link.

The rule of Zhao et al., "ForestColl: Throughput-Optimal Collective Communications on
Heterogeneous Network Fabrics" (arXiv 2402.06787), Section 5: the ``q``-th piece crosses the
``h``-th hop of its route below the root in step ``q + h``; here per hop the ``h`` (steps below
the root), with what switches change: an instant switch-to-NPU hop leaves in the step its piece
arrived, a reducing switch's arrivals of one step are shared (:func:`tree_hops`), and a switch
that multicasts without summing keeps a reduction's partials apart.
"""

from __future__ import annotations

import itertools

import numpy as np

from ...instances import Instance
from ...instances.switch_ops import copying_mask, reducing_mask
from ...tens.ten import instant_hops
from ..producers import Unsupported
from .trees import RoutedTree


def tree_hops(tree: RoutedTree, instant: frozenset = frozenset(), summing: frozenset = frozenset(),
               apart: frozenset = frozenset()) -> tuple[list[int], list[int], list[int]]:
    """Every hop of a routed tree: ``(src, dst, steps below the root before it)``. A hop in
    ``instant`` (a switch-to-NPU hop of a topology whose switch hop is instant) leaves in the
    step its piece reached the switch; every other hop one step after its piece arrived.

    ``summing``: the switches that add up what reaches them for one piece in one step
    (:mod:`collsynth.instances.switch_ops`). A route reaching one of them in a step another
    route of the tree already reaches it in leaves from there instead (its hops up to that
    arrival are dropped): in the trees' direction the switch multicasts the one arrival, and in
    their time reversal (a reduction) the partial sums of the step leave the switch once, on
    the kept route (:func:`shared_arrival`).

    ``apart``: the switches that pair a step's arrivals of a piece with its departures port by
    port (they multicast) but do not sum. In the time reversal the partials that meet in one
    of them in one step must all leave towards one next hop, the node the trees' routes entered
    it from, or the pairing hands one partial to two next hops and none to another. A route
    that would enter such a switch in a step from another node than the kept routes do starts
    one step later at its first node, until no such step is left: so the reduction is valid by
    construction. Four GPUs, 0-1 on switch 4, 2-3 on switch 5 (the switches linked): the tree
    of GPU 0 enters 5 from 4 and from 2 in one step, so the second route waits a step:

    >>> t = RoutedTree(0, 0, 1, ((0, 2), (0, 4, 5, 3), (2, 5, 4, 1)))
    >>> tree_hops(t)[2], tree_hops(t, apart=frozenset({5}))[2]
    ([0, 0, 1, 2, 1, 2, 3], [0, 0, 1, 2, 2, 3, 4])
    """
    depth = {tree.root: 0}
    src, dst, before = [], [], []
    reached: set = set()  # (summing switch, steps before its arrival) of the kept hops
    entered: dict = {}  # (switch of apart, steps before its arrival) -> the node the kept hops entered it from
    for route in tree.routes:
        for wait in itertools.count():
            hops = route_hops(route, depth[route[0]] + wait, instant)
            kept = hops[shared_arrival(hops, summing, reached):]
            if all(entered.get((b, h), a) == a for a, b, h in kept if b in apart):
                break
        depth[route[-1]] = hops[-1][2] + 1
        reached.update((b, h) for _, b, h in kept if b in summing)
        entered.update(((b, h), a) for a, b, h in kept if b in apart)
        for a, b, h in kept:
            src.append(a), dst.append(b), before.append(h)
    return src, dst, before


def route_hops(route: tuple, at: int, instant: frozenset) -> list[tuple[int, int, int]]:
    """A route's hops ``(src, dst, steps before)`` leaving its first node ``at`` steps below the
    root (:func:`tree_hops`)."""
    hops = []
    for i, (a, b) in enumerate(zip(route[:-1], route[1:])):
        if i > 0 and (a, b) not in instant:
            at += 1
        hops.append((a, b, at))
    return hops


def shared_arrival(hops: list[tuple[int, int, int]], summing: frozenset, reached: set) -> int:
    """The index of the first hop of ``hops`` (a route's ``(src, dst, steps before)``) after its
    last arrival at a switch of ``summing`` that ``reached`` already holds; 0 when there is none."""
    return max((i + 1 for i, (_, b, h) in enumerate(hops) if b in summing and (b, h) in reached), default=0)


def instant_pairs(topology) -> frozenset:
    """The switch-to-NPU link pairs whose hop is instant (:func:`collsynth.tens.ten.instant_hops`)."""
    la = topology.link_arrays
    hit = instant_hops(topology)
    return frozenset(zip(la.src[hit].tolist(), la.dst[hit].tolist()))


def depth_of(trees: list[RoutedTree]) -> int:
    """The most hops from a root to a node over all trees."""
    return max((max(tree_hops(t)[2]) + 1 for t in trees if t.routes), default=0)


def summing_switches(instance: Instance) -> frozenset:
    """The switches that add up what reaches them for one piece in one step: the reducing
    switches (:func:`collsynth.instances.switch_ops.reducing_mask`) when the collective combines,
    else none (they forward the pieces of other collectives)."""
    if not instance.collective.combining:
        return frozenset()
    return frozenset(np.flatnonzero(reducing_mask(instance.topology)).tolist())


def paired_by_port(instance: Instance, transposed: bool) -> frozenset:
    """The switches whose routes a combining collective's time-reversed trees keep apart
    (:func:`tree_hops`' ``apart``): those that multicast (declared ``copy``) without summing."""
    if not (transposed and instance.collective.combining):
        return frozenset()
    return frozenset(np.flatnonzero(copying_mask(instance.topology, False)).tolist()) - summing_switches(instance)


def refuse_multicast(hops: tuple[list[int], list[int], list[int]], summing: frozenset, copy, kind: str) -> None:
    """Refuse (:class:`Unsupported`) a tree whose hops leave one of the switches ``summing`` (the
    routes through them share their arrivals: :func:`tree_hops`) twice in one step where it
    does not multicast (``copy[node]`` false), or twice on one link in one step (its one sum
    would be sent twice)."""
    seen, links = set(), set()
    for a, b, h in zip(*hops):
        if a in summing:
            if (a, b, h) in links or (not copy[a] and (a, h) in seen):
                raise Unsupported(f"tree-packing: the {kind}'s trees would send one result out of switch {a} "
                                  f"{'twice on one link' if copy[a] else 'twice (it sums but does not multicast)'} "
                                  "in one step; use nvls or nvls-tree")
            seen.add((a, h)), links.add((a, b, h))
