"""Identical boxes: one automorphism that moves every GPU a box on, found and checked.

A cluster of identical boxes on rails (DGX SuperPOD, Alibaba HPN, a k-ary fat tree's hosts)
is mapped onto itself by moving every compute node ``d`` places on in id order (``c_i ->
c_{(i + d) mod N}``, ``d`` GPUs a box) and every switch to the switch whose links the moved
GPUs now use: a box's NVSwitch to the next box's, a rail's leaf to itself (or to the next
group's leaf), a spine to a spine. Whatever is true of a node is then true of its image: a
max flow to a GPU is the max flow to every GPU of its orbit (Zhao et al., "ForestColl",
arXiv 2402.06787, Section 4: the cut condition is checked once per orbit, ``d`` flows, not
``N``), and a tree of a root in the first box moved ``j`` boxes on is a tree of the root
there (:mod:`collsynth.tens.pipelined_trees`: trees built once and translated).

:func:`box_shift` finds the least such ``d`` without being told: for each divisor ``d`` of
``N`` it moves the compute nodes, then maps switches round by round by the links they have
to nodes already mapped (a switch goes to the switch whose links to the images are the
same, several alike in id order), and accepts the map only when it is a permutation sending
switches to switches and every link to a link with the same count, latency and bandwidth
(:func:`collsynth.instances.symmetry.is_automorphism`), and its ``N / d``-th power is the
identity. Nothing is assumed from a generator's name or parameters.

>>> from collsynth.instances.generators import build
>>> s = box_shift(build("dgx_h100", {"nodes": 3}))
>>> s.box, s.order, s.perm[:9].tolist(), s.perm[24:27].tolist()  # 8 GPUs a box; NVSwitch 24 -> 25
(8, 3, [8, 9, 10, 11, 12, 13, 14, 15, 16], [25, 26, 24])
>>> box_shift(build("mesh", {"dims": [3, 3]})) is None
True
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from .symmetry import is_automorphism
from .topology import Topology


@dataclass(frozen=True)
class BoxShift:
    """The node permutation ``perm`` (an automorphism) moving compute node ``c_i`` to
    ``c_{i + box}``; ``order`` (``N / box``) applications are the identity."""

    perm: np.ndarray
    box: int
    order: int

    def representatives(self, compute) -> tuple[int, ...]:
        """One compute node per orbit: the first box's (the ``box`` smallest ids)."""
        return tuple(sorted(int(c) for c in compute)[:self.box])


def box_shift(topology: Topology, compute=None) -> BoxShift | None:
    """The shift of identical boxes with the fewest compute nodes a box (module doc), or None
    when no ``d < N`` gives an automorphism. ``compute``: the nodes moved in id order (default
    and only supported value: every live compute node; others give None)."""
    npus = sorted(int(c) for c in topology.npus)
    if compute is not None and sorted(int(c) for c in compute) != npus:
        return None
    n = len(npus)
    if n < 2 or topology.failed_links or topology.failed_nodes:
        return None
    la = topology.link_arrays
    if len(la) == 0:
        return None
    _, cls = np.unique(np.stack([la.bandwidth, la.alpha, la.count.astype(float)]), axis=1, return_inverse=True)
    links = (la.src.tolist(), la.dst.tolist(), np.ravel(cls).tolist())
    for d in (d for d in range(1, n // 2 + 1) if n % d == 0):
        perm = _extend(topology, npus, d, links)
        if perm is not None and _accepted(topology, perm, n // d):
            return BoxShift(perm, d, n // d)
    return None


def _extend(topology: Topology, npus: list[int], d: int, links: tuple) -> np.ndarray | None:
    """The compute nodes moved ``d`` places on, extended to the switches round by round (a
    switch to the switch with the same links to the images of the nodes mapped so far); None
    when some switch finds no image."""
    perm = np.full(topology.size, -1, np.int64)
    perm[npus] = np.roll(np.asarray(npus, np.int64), -d)
    pending = set(int(w) for w in topology.switches if topology.graph.has_node(w))
    src, dst, cls = links
    while pending:
        mapped = perm >= 0
        own: dict = defaultdict(list)
        for a, b, c in zip(src, dst, cls):
            if a in pending and mapped[b]:
                own[a].append((0, b, c))
            elif b in pending and mapped[a]:
                own[b].append((1, a, c))
        if not own:
            return None
        groups: dict = defaultdict(list)
        for w in sorted(own):
            groups[tuple(sorted(own[w]))].append(w)
        for key, members in groups.items():
            image = tuple(sorted((side, int(perm[x]), c) for side, x, c in key))
            target = groups.get(image)
            if target is None or len(target) != len(members):
                return None
            perm[members] = target
        pending -= set(own)
    return perm


def _accepted(topology: Topology, perm: np.ndarray, order: int) -> bool:
    """Whether ``perm`` is a permutation of the live nodes sending switches to switches, an
    automorphism, and of ``order`` (its ``order``-th power the identity)."""
    live = np.asarray(topology.nodes, np.int64)
    if (perm[live] < 0).any() or len(np.unique(perm[live])) != len(live):
        return False
    sw = np.asarray(sorted(topology.switches), np.int64)
    is_switch = np.zeros(topology.size, bool)
    is_switch[sw] = True
    if not is_switch[perm[sw]].all():
        return False
    full = np.where(perm >= 0, perm, np.arange(topology.size))
    if not is_automorphism(topology, full):
        return False
    cur = np.arange(topology.size)
    for _ in range(order):
        cur = full[cur]
    return bool((cur == np.arange(topology.size)).all())
