"""Which arrivals of a piece's chunk at a node overlap the piece: the exact data dependencies of
the ``ten`` and ``event`` models (:mod:`collsynth.tens.dependencies`), found without looking at
every earlier arrival.

A node's arrivals of one chunk (an arrival *group*, in step order) whose pieces, sorted by
start, also ascend by end (pairwise disjoint pieces, a pipelined tree's: each piece reaches a
node once; or a reduction's, the same piece from every child of a relay) are sorted so, and
the ones overlapping a send's piece are one run of that order, found by bisection on both ends; any
other group offers its whole earlier part (the *prefix*), checked piece by piece.

>>> import numpy as np
>>> lo, hi = np.array([2, 0, 1, 0]), np.array([3, 1, 2, 1])  # sends 0..2 arrive, send 3 needs [0, 1)
>>> by_lo, disjoint = by_piece(lo, hi, np.array([0, 1, 2], np.int32), np.array([0, 3]))
>>> by_lo.tolist(), disjoint.tolist()
([1, 2, 0], [True])
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def overlapping_pairs(g_in, p, lo, hi, members, gstart, by_lo, disjoint, budget):
    """Exact dependency pairs ``(i, j)``: ``j`` among the first ``p[i]`` arrivals of group
    ``g_in[i]`` with a piece overlapping ``i``'s; ``i`` ascending, then ``j`` in group order.
    Empty arrays and ``False`` when the candidates looked at (:func:`_window`) exceed ``budget``."""
    n = len(g_in)
    rank = np.empty(n, np.int32)  # a member's place in its group's (step) order
    for g in range(len(gstart) - 1):
        for x in range(gstart[g], gstart[g + 1]):
            rank[members[x]] = x - gstart[g]
    total = 0
    for i in range(n):
        if g_in[i] >= 0:
            a, b = _window(g_in[i], p[i], lo[i], hi[i], lo, hi, gstart, by_lo, disjoint)
            total += b - a
    if total > budget:
        return np.empty(0, np.int32), np.empty(0, np.int32), False
    di = np.empty(total, np.int32)
    dj = np.empty(total, np.int32)
    k = 0
    for i in range(n):
        g = g_in[i]
        if g < 0:
            continue
        a, b = _window(g, p[i], lo[i], hi[i], lo, hi, gstart, by_lo, disjoint)
        order = members if not disjoint[g] else by_lo
        k0 = k
        for x in range(a, b):
            j = order[x]
            if rank[j] < p[i] and lo[j] < hi[i] and lo[i] < hi[j]:
                di[k] = i
                dj[k] = j
                k += 1
        for y in range(k0 + 1, k):  # a window is in piece order: put it in group order (few items)
            j = dj[y]
            z = y
            while z > k0 and rank[dj[z - 1]] > rank[j]:
                dj[z] = dj[z - 1]
                z -= 1
            dj[z] = j
    return di[:k], dj[:k], True


@njit(cache=True, nogil=True)
def _window(g, prefix, a_lo, a_hi, lo, hi, gstart, by_lo, disjoint):
    """The candidates for a piece ``[a_lo, a_hi)`` in group ``g``: positions ``[a, b)`` of
    ``members`` (its first ``prefix`` arrivals) or, when the group's pieces ascend by both ends, of
    ``by_lo`` (the group sorted by piece: the pieces overlapping ``[a_lo, a_hi)`` are a run,
    found by bisection on both ends, which ascend together)."""
    start, end = gstart[g], gstart[g + 1]
    if not disjoint[g]:
        return start, start + prefix
    x, y = start, end  # first piece ending after a_lo
    while x < y:
        m = (x + y) >> 1
        if hi[by_lo[m]] <= a_lo:
            x = m + 1
        else:
            y = m
    a, y = x, end  # first piece starting at or after a_hi
    while x < y:
        m = (x + y) >> 1
        if lo[by_lo[m]] < a_hi:
            x = m + 1
        else:
            y = m
    return a, x


def by_piece(lo, hi, members, gstart) -> tuple[np.ndarray, np.ndarray]:
    """Every group's members sorted by piece (``lo``, then ``hi``), and whether each group's
    pieces then also ascend by ``hi`` (pairwise disjoint pieces do, and so do a reduction's,
    where every child of a relay sends it the same piece); an overlap query is then a
    bisection: the pieces overlapping ``[a, b)`` are those ending after ``a`` (a suffix of that
    order) that start before ``b`` (a prefix).

    >>> lo, hi = np.array([1, 0, 1, 1]), np.array([2, 1, 2, 3])  # [1, 2) twice beside [0, 1)
    >>> by_piece(lo, hi, np.array([0, 1, 2], np.int32), np.array([0, 3]))[1].tolist()
    [True]
    >>> lo[3], hi[3] = 0, 3  # [0, 3) sorts before [1, 2) and ends after it
    >>> by_piece(lo, hi, np.array([0, 1, 2, 3], np.int32), np.array([0, 4]))[1].tolist()
    [False]
    """
    groups = len(gstart) - 1
    gid = np.repeat(np.arange(groups, dtype=np.int32), np.diff(gstart))
    by_lo = members[np.lexsort((hi[members], lo[members], gid))].astype(np.int32)
    clash = (gid[1:] == gid[:-1]) & (hi[by_lo[:-1]] > hi[by_lo[1:]])
    disjoint = np.ones(groups, np.bool_)
    disjoint[gid[1:][clash]] = False
    return by_lo, disjoint
