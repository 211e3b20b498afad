"""Data dependencies between the sends of a schedule (shared by the ``ten`` and ``event`` models
and the MSCCL export).

A send of chunk ``c`` from ``u`` in step ``t`` needs what earlier steps delivered to ``u``:
the arrivals of the *group* ``(u, c)`` (every send of chunk ``c`` to ``u``) in steps before
``t``. A source that holds a non-combining chunk from the start needs nothing. With pieces
only the arrivals of overlapping pieces are needed (``exact`` pairs); the whole earlier part of
the group (the *prefix*) is exact for whole chunks and conservative for pieces.

Everything here is linear in the number of sends: two stable counting sorts (by step, then by
chunk) and one pass per chunk that names the groups with a per-node scratch array (no
``nodes x chunks`` table, no comparison sort).

>>> import numpy as np
>>> order, starts = counting_order(np.array([2, 1, 2, 1]), 3)
>>> order.tolist(), starts.tolist()
([1, 3, 0, 2], [0, 0, 2, 4])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from ..instances.instance import Instance
from .schedule import Schedule

PAIR_BUDGET = 4_000_000  # explicit dependency pairs beyond this: prefix mode


@njit(cache=True, nogil=True)
def counting_order(key, num_keys):
    """Stable counting sort of small non-negative integer keys: ``(order, starts)``.

    ``order`` (int32) lists the indices by key, equal keys in index order; the indices with key
    ``k`` are ``order[starts[k]:starts[k + 1]]``.
    """
    starts = np.zeros(num_keys + 1, np.int64)
    for i in range(len(key)):
        starts[key[i] + 1] += 1
    for k in range(num_keys):
        starts[k + 1] += starts[k]
    fill = starts[:-1].copy()
    order = np.empty(len(key), np.int32)
    for i in range(len(key)):
        k = key[i]
        order[fill[k]] = i
        fill[k] += 1
    return order, starts


@njit(cache=True, nogil=True)
def counting_order_of(key, num_keys, perm):
    """:func:`counting_order` of the indices ``perm`` by ``key`` (stable: ``perm``'s order
    among equal keys); returns ``(indices, starts)``."""
    starts = np.zeros(num_keys + 1, np.int64)
    for x in range(len(perm)):
        starts[key[perm[x]] + 1] += 1
    for k in range(num_keys):
        starts[k + 1] += starts[k]
    fill = starts[:-1].copy()
    order = np.empty(len(perm), np.int32)
    for x in range(len(perm)):
        i = perm[x]
        k = key[i]
        order[fill[k]] = i
        fill[k] += 1
    return order, starts


def step_order(step: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sends in stable step order and the start of every used step: ``(order, bounds)``.

    ``order[bounds[k]:bounds[k + 1]]`` are the sends of the k-th used step (ascending steps,
    index order inside). Linear for the usual step numbers; a comparison sort otherwise.
    """
    n = len(step)
    if n == 0:
        return np.zeros(0, np.int32), np.zeros(1, np.int64)
    lo, hi = int(step.min()), int(step.max())
    if lo >= 0 and hi <= 2 * n + (1 << 20):
        order, starts = counting_order(step, hi + 1)
        return order, np.unique(starts)
    order = np.argsort(step, kind="stable").astype(np.int32)
    s = step[order]
    return order, np.flatnonzero(np.r_[True, s[1:] != s[:-1], True]).astype(np.int64)


@njit(cache=True, nogil=True)
def _name_groups(chunk, src, dst, step, held, by_chunk, chunk_starts, size):
    """One pass per chunk (its sends in step order): the arrival group ``ga`` of every send,
    the group ``g_in`` it reads (-1: nothing arrived at its source before its step, or the
    source holds the chunk) and ``p``, the arrivals of that group in earlier steps."""
    n = len(chunk)
    ga = np.empty(n, np.int32)
    g_in = np.full(n, -1, np.int32)
    p = np.zeros(n, np.int32)
    gid = np.full(size, -1, np.int32)
    count = np.zeros(size, np.int32)
    groups = 0
    for c in range(len(chunk_starts) - 1):
        a, b = chunk_starts[c], chunk_starts[c + 1]
        q = a
        while q < b:
            t = step[by_chunk[q]]
            e = q
            while e < b and step[by_chunk[e]] == t:
                e += 1
            for x in range(q, e):  # reads see the arrivals of earlier steps only
                i = by_chunk[x]
                u = src[i]
                if not held[i] and count[u] > 0:
                    g_in[i] = gid[u]
                    p[i] = count[u]
            for x in range(q, e):
                i = by_chunk[x]
                v = dst[i]
                if gid[v] < 0:
                    gid[v] = groups
                    groups += 1
                ga[i] = gid[v]
                count[v] += 1
            q = e
        for x in range(a, b):
            v = dst[by_chunk[x]]
            gid[v] = -1
            count[v] = 0
    return ga, g_in, p, groups


@njit(cache=True, nogil=True)
def _pairs(g_in, p, lo, hi, members, gstart, total):
    """Exact dependency pairs ``(i, j)``: ``j`` among the first ``p[i]`` arrivals of group
    ``g_in[i]`` with a piece overlapping ``i``'s; ``i`` ascending, then ``j`` in group order."""
    di = np.empty(total, np.int32)
    dj = np.empty(total, np.int32)
    k = 0
    for i in range(len(g_in)):
        g = g_in[i]
        if g < 0:
            continue
        base = gstart[g]
        for q in range(p[i]):
            j = members[base + q]
            if lo[j] < hi[i] and lo[i] < hi[j]:
                di[k] = i
                dj[k] = j
                k += 1
    return di[:k], dj[:k]


@dataclass(frozen=True)
class Deps:
    """Data dependencies of every send (see the module doc).

    Send ``i`` belongs to arrival group ``ga[i]``, at position ``pos[i]`` of the groups' member
    list ``members`` (group ``g`` is ``members[gstart[g]:gstart[g + 1]]``, in (step, index)
    order). It reads group ``g_in[i]`` (-1: it needs nothing) and needs its first ``p[i]``
    members. ``pairs`` are the exact (overlapping pieces) pairs ``(i, j)`` when asked for and
    at most :data:`PAIR_BUDGET`; otherwise ``None`` (prefix mode).
    """

    ga: np.ndarray
    g_in: np.ndarray
    p: np.ndarray
    members: np.ndarray
    gstart: np.ndarray
    pos: np.ndarray
    pairs: tuple[np.ndarray, np.ndarray] | None


def held_at_source(schedule: Schedule, instance: Instance) -> np.ndarray:
    """Per send: its source holds the (non-combining) chunk from the start."""
    held = np.zeros(len(schedule), dtype=bool)
    for off, coll in zip(instance.chunk_offsets, instance.collectives):
        if coll.combining:
            continue
        sel = (schedule.chunk >= off) & (schedule.chunk < off + coll.num_chunks)
        idx = np.flatnonzero(sel)
        held[idx] = coll.precondition[schedule.chunk[idx] - off, schedule.src[idx]]
    return held


def dependencies(schedule: Schedule, instance: Instance, want_pairs: bool | None = None) -> Deps:
    """Group the arrivals and locate what every send needs (see :class:`Deps`).

    ``want_pairs`` defaults to "the schedule has pieces" (whole chunks need no pairs: the
    prefix is exact for them).
    """
    s = schedule
    n = len(s)
    C = max(int(s.chunk.max()) + 1 if n else 0, s.chunks)
    by_step, _ = step_order(s.step)
    by_chunk, chunk_starts = counting_order_of(s.chunk, C, by_step)
    del by_step
    size = max(instance.topology.size, int(max(s.src.max(), s.dst.max())) + 1 if n else 0)
    ga, g_in, p, groups = _name_groups(s.chunk, s.src, s.dst, s.step, held_at_source(s, instance),
                                       by_chunk, chunk_starts, size)
    members, gstart = counting_order_of(ga, groups, by_chunk)
    del by_chunk
    pos = np.empty(n, np.int32)
    pos[members] = np.arange(n, dtype=np.int32)
    if want_pairs is None:
        want_pairs = not bool(((s.lo == 0) & (s.hi == s.denom)).all())
    pairs = None
    total = int(p.sum(dtype=np.int64))
    if want_pairs and total <= PAIR_BUDGET:
        pairs = _pairs(g_in, p, s.lo, s.hi, members, gstart, total)
    return Deps(ga, g_in, p, members, gstart, pos, pairs)


def dependency_pairs(schedule: Schedule, instance: Instance) -> tuple[np.ndarray, np.ndarray] | None:
    """Pairs ``(i, j)``: send ``i`` needs the arrival of send ``j`` at its source (``j``
    delivers an overlapping piece of the same chunk there in an earlier step); ``None`` if
    there are more than :data:`PAIR_BUDGET` candidates."""
    return dependencies(schedule, instance, want_pairs=True).pairs
