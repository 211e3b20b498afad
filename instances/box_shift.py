"""Identical boxes: automorphisms that move every GPU onto every other, found and checked.

A cluster of identical boxes on rails (DGX SuperPOD, Alibaba HPN, a k-ary fat tree's hosts)
is mapped onto itself by rotations of blocks of compute nodes in id order: the GPUs of every
box one place on (rail ``g`` to rail ``g + 1``, where rails are alike), the boxes of every
scalable unit one box on, the units of a pod one unit on, each switch going to the switch
whose links the moved nodes now use (a box's NVSwitch to the next box's, a leaf to the next
rail's or unit's, a spine to a spine). Whatever is true of a node is then true of its images:
a max flow to a GPU is the max flow to every GPU of its orbit (Zhao et al., "ForestColl",
arXiv 2402.06787, Section 4: the cut condition is checked once per orbit), and a tree of a
root moved by the rotations is a tree of the root it lands on
(:mod:`collsynth.tens.pipelined_trees`: trees built once and moved).

:func:`box_shift` finds them without being told, level by level: the least block ``d`` whose
rotation ``d`` places on within the largest block of ``d * m`` nodes is an automorphism, then
the blocks of ``d * m`` likewise, until the blocks are all ``N`` compute nodes. A rotation is
extended to the switches round by round by the links they have to nodes already mapped (a
switch goes to the switch whose links to the images are the same, several alike in id
order) and kept only when it is a permutation sending switches to switches and every link to
a link with the same count, latency and bandwidth
(:func:`collsynth.instances.symmetry.is_automorphism`), of order ``m``, and commuting with
the levels below, so that the ``prod m`` products move the first ``d`` nodes onto each
compute node once. Nothing is assumed from a generator's name or parameters.

>>> from collsynth.instances.generators import build
>>> s = box_shift(build("dgx_h100", {"nodes": 3}))  # GPUs within a box (rails alike), then boxes
>>> s.box, s.orders, s.perms[0][:9].tolist(), s.perms[1][24:27].tolist()  # NVSwitch 24 -> 25
(1, (8, 3), [1, 2, 3, 4, 5, 6, 7, 0, 9], [25, 26, 24])
>>> s.step, s.perms[1][:9].tolist()  # the last level moves every GPU one box (8 places) on
(8, [8, 9, 10, 11, 12, 13, 14, 15, 16])
>>> box_shift(build("mesh", {"dims": [3, 3]})) is None
True

Every ``topology`` argument is a :class:`~collsynth.instances.topology.Topology` (the type is not
imported here: the topology's diameter reads the box shifts, and imports go one way).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .symmetry import is_automorphism


@dataclass(frozen=True)
class BoxShift:
    """Commuting automorphisms ``perms[i]`` of orders ``orders[i]`` (module doc): ``perms[i]``
    moves compute node ``c_j`` ``units[i]`` places on within its block of ``units[i] *
    orders[i]`` (``units[i + 1]`` is that block). Together they move the first ``box`` compute
    nodes onto every other compute node exactly once."""

    perms: np.ndarray
    orders: tuple[int, ...]
    box: int

    @property
    def step(self) -> int:
        """The places the last level moves every compute node: its rotation is of all ``N`` of
        them (``c_j -> c_{(j + step) mod N}``), the shift from box to box."""
        return self.box * math.prod(self.orders[:-1])

    @property
    def order(self) -> int:
        """How many images each compute node has (the group's order)."""
        return math.prod(self.orders)

    def representatives(self, compute) -> tuple[int, ...]:
        """One compute node per orbit: the first box's (the ``box`` smallest ids)."""
        return tuple(sorted(int(c) for c in compute)[:self.box])


def box_shift(topology, compute=None) -> BoxShift | None:
    """The box shifts of ``topology`` (module doc), or None when none is found. ``compute``:
    the nodes moved in id order (default and only supported value: every live compute node;
    others give None)."""
    npus = sorted(int(c) for c in topology.npus)
    if compute is not None and sorted(int(c) for c in compute) != npus:
        return None
    n = len(npus)
    if n < 2 or topology.failed_links or topology.failed_nodes:
        return None
    la = topology.link_arrays
    if len(la) == 0:
        return None
    return _shifts(topology)


@lru_cache(maxsize=8)
def _shifts(topology) -> BoxShift | None:
    """:func:`box_shift` of every compute node (remembered per topology object)."""
    npus = sorted(int(c) for c in topology.npus)
    n = len(npus)
    for box in (d for d in range(1, n) if n % d == 0):  # the least block with a rotation
        found = _level(topology, npus, box, [])
        if found is not None:
            break
    else:
        return None
    perms, orders, unit = [], [], box
    while found is not None:
        perms.append(found[0]), orders.append(found[1])
        unit *= found[1]
        if unit == n:
            return BoxShift(np.stack(perms), tuple(orders), box)
        found = _level(topology, npus, unit, perms)
    return None


def _level(topology, npus: list[int], d: int, others: list) -> tuple | None:
    """The rotation of blocks of ``d`` compute nodes, ``d`` places on within the largest block
    (a multiple of ``d`` dividing ``N``) where it is an automorphism commuting with ``others``:
    ``(perm, order)``, or None."""
    n = len(npus)
    for block in sorted((b for b in range(2 * d, n + 1, d) if n % b == 0), reverse=True):
        idx = np.arange(n)
        moved = idx // block * block + (idx % block + d) % block
        perm = extended(topology, npus, np.asarray(npus, np.int64)[moved])
        if perm is not None and is_shift_of_order(topology, perm, block // d) and all(
                (perm[q] == q[perm]).all() for q in others):
            return perm, block // d
    return None


def extended(topology, npus: list[int], images: np.ndarray, rotated=frozenset(), cycle: int = 0,
             memo: dict | None = None) -> np.ndarray | None:
    """The compute nodes ``npus`` (every live one, in id order) moved to ``images``, extended
    to the switches round by round (a switch to the switch with the same links to the images of
    the nodes mapped so far, :func:`extension_rounds`); None when some switch finds no image. In the
    rounds listed in ``rotated`` (0 first) switches alike whose images are themselves go one
    place on in id order, the last of each run of ``gcd(alike, cycle)`` to its first (``cycle``
    0: one run of them all), rather than each to itself (another automorphism where it is one,
    of an order dividing ``cycle``: the shifts' twists, :mod:`collsynth.solvers.packing.free_shifts`).
    ``memo``: a dict the caller keeps for calls on one topology, so that the rounds' matches are
    found once per mapping so far (the twists of one rotation share their first rounds)."""
    perm = np.full(topology.size, -1, np.int64)
    perm[npus] = images
    for round_, groups in enumerate(extension_rounds(topology)):
        if groups is None:
            return None
        key = (round_, perm.tobytes())
        targets = memo.get(key) if memo is not None else None
        if targets is None:
            targets = _matches(groups, perm.tolist())
            if memo is not None:
                memo[key] = targets
        if targets is None:
            return None
        for (members, target) in zip(groups.values(), targets):
            perm[members] = _turned(target, cycle) if round_ in rotated and target == members else target
    return perm


def _matches(groups: dict, at: list) -> list | None:
    """Per group of a round of :func:`extension_rounds` (in order), the group with the same links
    to the images ``at`` of the nodes its links reach; None where one has none of its size."""
    out = []
    for key, members in groups.items():
        target = groups.get(tuple(sorted((side, at[x], c) for side, x, c in key)))
        if target is None or len(target) != len(members):
            return None
        out.append(target)
    return out


@lru_cache(maxsize=8)
def extension_rounds(topology) -> tuple:
    """The rounds of :func:`extended`, which depend on the topology alone: per round, the
    switches not mapped before with a link to a node mapped before (every compute node, then the
    switches of the rounds before), grouped by those links (``(0, node, class)`` out of the
    switch, ``(1, node, class)`` into it; class: the links' count, latency and bandwidth), in id
    order; a last None where some switch is never reached."""
    la = topology.link_arrays
    _, cls = np.unique(np.stack([la.bandwidth, la.alpha, la.count.astype(float)]), axis=1, return_inverse=True)
    src, dst, cls = la.src.tolist(), la.dst.tolist(), np.ravel(cls).tolist()
    mapped = np.zeros(topology.size, bool)
    mapped[[int(c) for c in topology.npus]] = True
    pending = set(int(w) for w in topology.switches if topology.graph.has_node(w))
    rounds: list = []
    while pending:
        own: dict = defaultdict(list)
        for a, b, c in zip(src, dst, cls):
            if a in pending and mapped[b]:
                own[a].append((0, b, c))
            elif b in pending and mapped[a]:
                own[b].append((1, a, c))
        if not own:
            return (*rounds, None)
        groups: dict = defaultdict(list)
        for w in sorted(own):
            groups[tuple(sorted(own[w]))].append(w)
        rounds.append(dict(groups))
        pending -= set(own)
        mapped[list(own)] = True
    return tuple(rounds)


def _turned(members: list[int], cycle: int) -> list[int]:
    """``members`` (in id order) each sent one place on within its run of ``gcd(len(members),
    cycle)`` (``cycle`` 0: all of them), the last of a run to its first.

    >>> _turned([10, 11, 12, 13, 14, 15], 4), _turned([10, 11, 12], 0)
    ([11, 10, 13, 12, 15, 14], [11, 12, 10])
    """
    run = math.gcd(len(members), cycle) if cycle else len(members)
    return [members[i - i % run + (i + 1) % run] for i in range(len(members))]


def is_shift_of_order(topology, perm: np.ndarray, order: int) -> bool:
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
