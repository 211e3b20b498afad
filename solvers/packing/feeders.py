"""Reduction trees whose relays share a switch's in-links evenly: first come, first served.

A reduce-scatter built as the time reversal of packed allgather trees (Zhao et al.,
"ForestColl", arXiv 2402.06787, Section 4) may send many trees' partial sums into one switch
over several in-links, each faster than the switch's way out: HGX H100 with two NICs a box,
four GPUs on each NIC's sending side over PCIe (4 x 64 GB/s in, 50 GB/s out to the rail). The
trees decide which GPU of a NIC relays a box's partial sum of each shard; the packing is free
to give one GPU five of the twelve shards a NIC carries and another one. Under ``sync`` and
``event-inorder`` the switch sends in step order, so nothing changes; under ``event`` it serves
in arrival order (:func:`collsynth.tens.cost.price_event`), every backlogged GPU gets about an
equal share of the way out, the GPU with five shards finishes last, and the boxes those
shards are for wait while the rail's other out-links idle (four boxes, two NICs, 1 GB, alpha 0:
1.0705x the bound under ``event``, 1.0009x in order; the rail switch's out-link to one box
idles 0.05-0.13 ms in every 0.9 ms until the end, then runs 0.55 ms past the others; traced
at 40 pieces). Balanced, three shards a GPU: 1.0002x under ``event``, 1.0008x in order
(``python benchmarks/bench_allreduce.py --kinds reduce_scatter --only "H100 2-NIC x4"``).

:func:`balance` relabels each tree by a permutation of GPUs that are interchangeable (each
transposition of two of them is an automorphism of the topology,
:func:`collsynth.instances.symmetry.is_automorphism`): the tree stays valid (a relabelled tree
of the same shape on the same kind of links) and the relays are spread so that, within each
class, GPUs relay equally many trees. A permutation of one class leaves every other node
fixed, and it fixes the tree's root (classes holding the root are left as they are). The
relabelling moves load between links of the same kind, so :func:`balanced` keeps it only where
no link's time (trees' units over its bandwidth) grows past the packed forest's busiest.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np

from ...instances.symmetry import is_automorphism
from .trees import RoutedTree


def interchangeable(topology, nodes: list[int]) -> list[list[int]]:
    """Classes of ``nodes`` any two of which swap by an automorphism of ``topology`` (greedy:
    a node joins the first class whose first member it swaps with), each sorted, singletons out.

    >>> from collsynth.instances.generators import build
    >>> interchangeable(build("hgx_h100", {"nodes": 2, "nics": 2}), list(range(16)))
    [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
    """
    la = topology.link_arrays
    near = {v: set() for v in nodes}  # a swap of u and v maps u's other neighbours onto v's: compared first
    for a, b in zip(la.src.tolist(), la.dst.tolist()):
        for x, y in ((a, b), (b, a)):
            if x in near:
                near[x].add(y)
    classes: list[list[int]] = []
    for v in nodes:
        for c in classes:
            if near[v] - {c[0]} != near[c[0]] - {v}:
                continue
            perm = np.arange(topology.size)
            perm[v], perm[c[0]] = c[0], v
            if is_automorphism(topology, perm):
                c.append(v)
                break
        else:
            classes.append([v])
    return [sorted(c) for c in classes if len(c) > 1]


def relays(tree: RoutedTree) -> set[int]:
    """The nodes other than the root that routes leave from (those that forward or reduce).

    >>> sorted(relays(RoutedTree(0, 0, 1, ((0, 9, 1), (1, 9, 2), (0, 9, 3)))))
    [1]
    """
    return {r[0] for r in tree.routes if r[0] != tree.root}


def balance(trees: list[RoutedTree], classes: list[list[int]]) -> list[RoutedTree]:
    """``trees`` (packed trees, Zhao et al., "ForestColl", arXiv 2402.06787, Section 5) each
    relabelled by a rotation of every class not holding its root, chosen
    tree by tree (in order) to put its relays in the class on the members that relay fewest so
    far (ties: the least rotation), so the relays of each class end within one of each other
    when every tree has one relay in it (module doc).

    Two trees, each relaying through GPU 1 of the class ``[1, 2]``: the second is moved to 2.

    >>> t = RoutedTree(0, 0, 1, ((0, 9, 1), (1, 9, 2)))
    >>> [s.routes for s in balance([t, t], [[1, 2]])]
    [((0, 9, 1), (1, 9, 2)), ((0, 9, 2), (2, 9, 1))]
    """
    load = [Counter() for _ in classes]
    out = []
    for t in trees:
        mapping = {}
        for c, count in zip(classes, load):
            if t.root in c:
                continue
            used = relays(t) & set(c)
            n = len(c)
            best = min(range(n), key=lambda s: (sum(count[c[(c.index(v) + s) % n]] for v in used), s))
            for i, v in enumerate(c):
                mapping[v] = c[(i + best) % n]
            for v in used:
                count[mapping[v]] += 1
        out.append(replace(t, routes=tuple(tuple(mapping.get(v, v) for v in r) for r in t.routes)) if mapping else t)
    return out


def busiest(trees: list[RoutedTree], topology, transposed: bool) -> float:
    """The most units of ``trees`` (``hi - lo`` per hop) any link carries over its bandwidth;
    on the transposed topology (``transposed``) a hop ``(a, b)`` runs on the link ``b -> a``.

    Two trees both crossing ``1 -> 2`` of a ring of 100 GB/s links, 3 + 2 units on it:

    >>> from collsynth.instances.generators import build
    >>> ring = build("ring", {"nodes": 3})
    >>> busiest([RoutedTree(0, 0, 3, ((0, 1), (1, 2))), RoutedTree(1, 0, 2, ((1, 2), (1, 0)))], ring, False)
    5e-11
    """
    units = Counter()
    for t in trees:
        for r in t.routes:
            for a, b in zip(r, r[1:]):
                units[(b, a) if transposed else (a, b)] += t.hi - t.lo
    if not units:
        return 0.0
    pairs = np.array(list(units), dtype=np.int64)
    la = topology.link_arrays
    bw = la.bandwidth[la.lookup(pairs[:, 0], pairs[:, 1])]
    return float(max(u / b for u, b in zip(units.values(), bw)))


def balanced(trees: list[RoutedTree], topology, nodes: list[int], transposed: bool) -> list[RoutedTree]:
    """:func:`balance` (of a time-reversed forest, ForestColl, arXiv 2402.06787, Section 4) over the
    :func:`interchangeable` classes of ``nodes``, or ``trees`` as they
    are when no class exists or some link would be busier than the busiest before (:func:`busiest`)."""
    classes = interchangeable(topology, nodes)
    if not classes:
        return trees
    moved = balance(trees, classes)
    return moved if busiest(moved, topology, transposed) <= busiest(trees, topology, transposed) * (1 + 1e-12) else trees
