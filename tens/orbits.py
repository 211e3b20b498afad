"""Orbits of a TEN model's chunks and link pairs under a group acting regularly on the nodes.

Let ``G`` act regularly on the nodes by automorphisms of the topology that keep every link's
delay and capacity (:func:`collsynth.instances.symmetry.regular_group`), and let the
collective be ``G``-invariant: the element ``g`` maps every chunk ``c`` to a chunk ``g(c)``
that starts where ``g`` moves ``c``'s holders and must reach where it moves ``c``'s
destinations (allgather, reduce-scatter's dual, all-to-all; not a rooted collective). Then a
schedule of one chunk per orbit (the orbit representatives ``reps``), translated by every
``g``, is a schedule of every chunk, and it keeps link capacity exactly when, for every orbit
of link pairs ``O`` and timestep, the representatives' sends over the pairs of ``O`` occupy at
most the capacity of one pair: ``g`` maps the sends of ``g^-1(l)`` onto ``l``, and ``G`` acts
freely on link pairs, so the load of ``l`` in the full schedule is the load of the whole orbit
in the representatives' one. That is the symmetry-reduced TEN model of
:mod:`collsynth.formulations.ten_ilp_orbit`; its size is the full model's divided by ``|G|``.

>>> from collsynth.instances.generators import build
>>> from collsynth.instances.instance import make_instance
>>> from collsynth.tens.ten import prepare
>>> data = prepare(make_instance(build("ring", {"nodes": 4}), "allgather"), 2)
>>> orb = ten_orbits(data)
>>> orb.reps.tolist(), orb.image.tolist(), orb.link_orbit.tolist()  # orbit 0: +1, orbit 1: -1
([0], [[0, 1, 2, 3]], [0, 1, 1, 0, 1, 0, 0, 1])
>>> translate_rows(orb, data, np.array([[0, 0, 1]])).tolist()  # chunk 0 over 0 -> 1, arriving at 1
[[0, 0, 1], [1, 3, 1], [2, 5, 1], [3, 6, 1]]
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from ..instances.symmetry import RegularGroup, regular_group, why_no_group
from ..instances.topology import Topology
from .ten import NotSupported, TenData

_GROUPS: dict[bytes, RegularGroup | None] = {}  # group per topology fingerprint (windows rebuild often)
_ORBITS: dict[bytes, "TenOrbits"] = {}  # orbits per (topology, collective) fingerprint


@dataclass(frozen=True)
class TenOrbits:
    """The orbit structure of a TEN model (see the module doc).

    ``reps[r]``: the smallest chunk id of the ``r``-th chunk orbit; ``image[r, g]``: the chunk
    id of ``g(reps[r])`` (element ``g`` maps node 0 to node ``g``). ``link_orbit[l]``: the orbit
    of link pair ``l``, numbered by the pairs leaving node 0 (``orbit_link[o]``, one per orbit);
    ``orbit_capacity[o]``: the capacity of each pair of orbit ``o``.
    """

    group: RegularGroup
    moved_by: np.ndarray  # [g, y]: the node g^-1(y), so pattern[moved_by[g]] is g(pattern)
    reps: np.ndarray
    image: np.ndarray
    link_orbit: np.ndarray
    orbit_link: np.ndarray
    orbit_capacity: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    size: int

    def rep_index(self, chunks: np.ndarray) -> np.ndarray:
        """Position in ``reps`` of each of ``chunks`` (which must be representatives)."""
        chunks = np.asarray(chunks, np.int64)
        pos = np.searchsorted(self.reps, chunks)
        pos = np.minimum(pos, len(self.reps) - 1)
        if len(chunks) and (self.reps[pos] != chunks).any():
            bad = int(chunks[self.reps[pos] != chunks][0])
            raise ValueError(f"chunk {bad} is not an orbit representative")
        return pos

    def link_image(self, pairs: np.ndarray, elements: np.ndarray) -> np.ndarray:
        """Index of the link pair ``g(l)`` for each ``l`` of ``pairs`` and ``g`` of ``elements``
        (broadcast together)."""
        pairs, elements = np.broadcast_arrays(np.asarray(pairs, np.int64), np.asarray(elements, np.int64))
        t = self.group.table
        a, b = t[elements, self.src[pairs]], t[elements, self.dst[pairs]]
        keys = self.src * self.size + self.dst
        return np.searchsorted(keys, a * self.size + b)


def _fingerprint(topology: Topology) -> bytes:
    la = topology.link_arrays
    h = hashlib.blake2b(digest_size=20)
    h.update(str((topology.size, sorted(topology.failed_nodes), sorted(topology.switches),
                  topology.meta.get("cayley") if topology.meta else None)).encode())
    for a in (la.src, la.dst, la.count, la.alpha, la.bandwidth):
        h.update(np.ascontiguousarray(a).tobytes())
    return h.digest()


def group_of(topology: Topology) -> RegularGroup | None:
    """:func:`~collsynth.instances.symmetry.regular_group`, remembered per topology content (a
    transposed copy made for every window of time clustering is found at once)."""
    key = _fingerprint(topology)
    if key not in _GROUPS:
        if len(_GROUPS) > 16:
            _GROUPS.clear()
        _GROUPS[key] = regular_group(topology)
    return _GROUPS[key]


def _conditions(data: TenData) -> tuple[np.ndarray, np.ndarray]:
    """The instance's own precondition and postcondition over global chunk ids (the model's
    direction), whatever state the model starts from."""
    inst = data.instance
    pre = np.zeros_like(data.pre)
    post = np.zeros_like(data.post)
    for coll, off in zip(inst.collectives, inst.chunk_offsets):
        pre[off:off + coll.num_chunks] = coll.precondition
        post[off:off + coll.num_chunks] = coll.postcondition
    return pre, post


def _link_orbits(data: TenData, group: RegularGroup) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    src, dst = data.src, data.dst
    inv = group.inverse
    seen_from_0 = group.table[inv[src], dst]  # the pair g^-1(l) leaving node 0 ends here
    out0 = np.flatnonzero(src == 0)  # pairs are sorted by (src, dst)
    orbit = np.searchsorted(dst[out0], seen_from_0)
    if len(out0) == 0 or (np.minimum(orbit, len(out0) - 1) != orbit).any() or (dst[out0][orbit] != seen_from_0).any():
        raise NotSupported("the group does not map link pairs onto link pairs")
    rep = out0[orbit]
    if ((data.delay[:, rep] != data.delay).any() or (data.capacity[rep] != data.capacity).any()
            or (data.latency[rep] != data.latency).any()):
        raise NotSupported("link pairs of one orbit differ in delay, latency or capacity")
    return orbit, out0, data.capacity[out0].copy()


def _chunk_orbits(data: TenData, group: RegularGroup) -> tuple[np.ndarray, np.ndarray]:
    pre, post = _conditions(data)
    active = np.flatnonzero((post & ~pre).any(axis=1))
    moved_by = group.table[group.inverse]  # row g: node y -> g^-1(y); pattern[moved_by[g]] is g(pattern)
    patterns: dict[bytes, list[int]] = {}
    keys = {}
    for c in active.tolist():
        key = bytes([int(data.group[c]) % 256]) + np.packbits(pre[c]).tobytes() + np.packbits(post[c]).tobytes()
        keys[c] = key
        patterns.setdefault(key, []).append(c)
    position = {c: i for ids in patterns.values() for i, c in enumerate(ids)}
    assigned = np.zeros(len(pre), bool)
    reps, images = [], []
    N = group.size
    for c in active.tolist():
        if assigned[c]:
            continue
        P, Q = pre[c][moved_by], post[c][moved_by]
        img = np.empty(N, np.int64)
        head = bytes([int(data.group[c]) % 256])
        for g in range(N):
            ids = patterns.get(head + np.packbits(P[g]).tobytes() + np.packbits(Q[g]).tobytes())
            if ids is None or position[c] >= len(ids):
                raise NotSupported(f"the collective is not invariant under the group: element {g} maps chunk {c} "
                                   "to a holder/destination pattern no chunk has")
            img[g] = ids[position[c]]
        if len(np.unique(img)) != N or assigned[img].any():
            raise NotSupported(f"the group does not act freely on the chunks (chunk {c} is fixed by some element)")
        assigned[img] = True
        reps.append(c)
        images.append(img)
    if not reps:
        raise NotSupported("nothing to deliver: no chunk orbit to schedule")
    return np.asarray(reps, np.int64), np.stack(images)


def ten_orbits(data: TenData) -> TenOrbits:
    """The orbits of ``data``'s chunks and link pairs under the group found for its topology
    (the model's direction); :class:`~collsynth.tens.ten.NotSupported` saying why when there is
    no group, the collective is not invariant, or the start state is not symmetric."""
    topo = data.instance.topology
    group = group_of(topo)
    if group is None:
        raise NotSupported(f"no symmetry to reduce by: {why_no_group(topo)}")
    if data.pre.shape[1] != group.size:
        raise NotSupported("the group does not act on every node id")
    h = hashlib.blake2b(_fingerprint(topo), digest_size=20)
    h.update(repr([(c.kind, c.nodes, c.size, c.chunks_per_node, c.root) for c in data.instance.collectives]).encode())
    for a in (data.delay, data.capacity, data.latency):
        h.update(np.ascontiguousarray(a).tobytes())
    key = h.digest()
    if key not in _ORBITS:
        if len(_ORBITS) > 16:
            _ORBITS.clear()
        orbit, out0, cap = _link_orbits(data, group)
        reps, image = _chunk_orbits(data, group)
        _ORBITS[key] = TenOrbits(group, group.table[group.inverse].astype(np.int32), reps, image, orbit, out0, cap, data.src,
                                 data.dst, group.size)
    orb = _ORBITS[key]
    if not symmetric(orb, data.pre):
        raise NotSupported("the start state is not symmetric under the group (a window of time clustering "
                           "must start from the translated holdings of the previous one)")
    return orb


def symmetric(orb: TenOrbits, held: np.ndarray) -> bool:
    """Whether the holdings ``held[chunk, node]`` are invariant: ``g(c)`` is held at ``g(x)``
    exactly when ``c`` is held at ``x``, for every chunk orbit."""
    for r, c in enumerate(orb.reps.tolist()):
        if (held[orb.image[r]] != held[c][orb.moved_by]).any():
            return False
    return True


def translate_rows(orb: TenOrbits, data: TenData, rows: np.ndarray) -> np.ndarray:
    """Rows ``(chunk, pair, arrival)`` of representatives, translated by every element: the
    schedule of every chunk (sorted by arrival, chunk, pair)."""
    rows = np.asarray(rows, np.int64).reshape(-1, 3)
    if not len(rows):
        return rows
    r = orb.rep_index(rows[:, 0])
    g = np.arange(orb.size, dtype=np.int64)
    chunk = orb.image[r]  # [rows, N]
    pair = orb.link_image(rows[:, 1][:, None], g[None, :])
    t = np.broadcast_to(rows[:, 2][:, None], pair.shape)
    out = np.stack([chunk.ravel(), pair.ravel(), t.ravel()], axis=1)
    return out[np.lexsort((out[:, 1], out[:, 0], out[:, 2]))]


def translate_holdings(orb: TenOrbits, held: np.ndarray) -> np.ndarray:
    """Holdings ``[chunk, node]`` whose representatives' rows are right, completed by
    translation: ``g(c)`` is held at ``g(x)`` iff ``c`` is held at ``x``."""
    out = held.copy()
    for r, c in enumerate(orb.reps.tolist()):
        out[orb.image[r]] = held[c][orb.moved_by]
    return out
