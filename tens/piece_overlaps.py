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
def overlapping_pairs(g_in, p, lo, hi, members, gstart, by_lo, disjoint, budget, leave, arrival):
    """Exact dependency pairs ``(i, j)``: ``j`` among the first ``p[i]`` arrivals of group
    ``g_in[i]`` with a piece overlapping ``i``'s; ``i`` ascending, then ``j`` in group order.
    A send listed in ``leave`` (ascending; a send out of a switch) has instead the pairs
    ``(leave, arrival)`` given for it, in their order. Empty arrays and ``False`` when the
    candidates looked at (:func:`_window`) exceed ``budget``."""
    n = len(g_in)
    rank = np.empty(n, np.int32)  # a member's place in its group's (step) order
    for g in range(len(gstart) - 1):
        for x in range(gstart[g], gstart[g + 1]):
            rank[members[x]] = x - gstart[g]
    total = 0
    f = 0
    for i in range(n):
        while f < len(leave) and leave[f] < i:
            f += 1
        if g_in[i] >= 0 and not (f < len(leave) and leave[f] == i):
            a, b = _window(g_in[i], p[i], lo[i], hi[i], lo, hi, gstart, by_lo, disjoint)
            total += b - a
    if total > budget:
        return np.empty(0, np.int32), np.empty(0, np.int32), False
    di = np.empty(total + len(leave), np.int32)
    dj = np.empty(total + len(leave), np.int32)
    k = 0
    f = 0
    for i in range(n):
        if f < len(leave) and leave[f] == i:
            while f < len(leave) and leave[f] == i:
                di[k] = i
                dj[k] = arrival[f]
                k += 1
                f += 1
            continue
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
    by_lo = members.astype(np.int32)
    return by_lo, _sort_groups_by_piece(lo, hi, by_lo, gstart)


@njit(cache=True, nogil=True)
def _sort_groups_by_piece(lo, hi, by_lo, gstart):
    """Sort every group of ``by_lo`` in place by (``lo``, ``hi``), stably (insertion for a few
    members, two stable merge sorts otherwise); whether each group's ``hi`` then ascend."""
    groups = len(gstart) - 1
    disjoint = np.ones(groups, np.bool_)
    for g in range(groups):
        a, b = gstart[g], gstart[g + 1]
        if b - a <= 32:
            for x in range(a + 1, b):
                q = by_lo[x]
                y = x
                while y > a and (lo[by_lo[y - 1]] > lo[q] or (lo[by_lo[y - 1]] == lo[q] and hi[by_lo[y - 1]] > hi[q])):
                    by_lo[y] = by_lo[y - 1]
                    y -= 1
                by_lo[y] = q
        else:
            seg = by_lo[a:b].copy()
            seg = seg[np.argsort(hi[seg], kind="mergesort")]
            by_lo[a:b] = seg[np.argsort(lo[seg], kind="mergesort")]
        for x in range(a + 1, b):
            if hi[by_lo[x - 1]] > hi[by_lo[x]]:
                disjoint[g] = False
                break
    return disjoint
