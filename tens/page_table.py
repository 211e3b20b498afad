"""The occupancy table of the TEN cost model: the busy timesteps of every parallel link.

Every parallel link ("slot") keeps its busy timesteps as 64-bit pages, cell ``page * slots +
slot`` of a dense table while the pages reached fit in a budget of cells (the pages of one time
span are then adjacent, and sends in step order work in one or two of them), else in an
open-addressing hash table keyed the same way (Knuth, "The Art of Computer Programming", vol. 3,
section 6.4, linear probing); a full page points past itself to the next page that may have
room (a union-find over pages, with path halving: Tarjan and van Leeuwen, "Worst-case Analysis
of Set Union Algorithms", JACM 31(2), 1984), so finding the first free timestep is near
constant time however long the busy run.

The table operations borrow the arrays that :func:`collsynth.tens.ten_kernel.ten_timesteps`
owns and allocate nothing (:data:`collsynth.tens.compiled.borrowing_inlined`: inlined into the
loop). The table grows outside that loop: the loop stops before a hop whose pages have no
cells, and :func:`grown` makes the larger table (with the runtime).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

from .compiled import borrowing_inlined, hash_mix

ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


@njit(cache=True, nogil=True)
def _ctz(x):
    """Index of the lowest set bit of a non-zero uint64 (LLVM's count-trailing-zeros, one
    instruction, through numba's intrinsic)."""
    return np.int64(trailing_zeros(x))



@borrowing_inlined
def _find(keys, key):
    """Cell of page ``key``: itself in a dense table (``keys`` empty), else its index in the
    hash table or of the empty cell where it would go."""
    if len(keys) == 0:
        return key
    m = np.uint64(len(keys) - 1)
    h = np.int64(hash_mix(key) & m)
    while keys[h] != -1 and keys[h] != key:
        h = (h + 1) & (len(keys) - 1)
    return h


@borrowing_inlined
def _absent(keys, masks, h):
    """Cell ``h`` holds no page yet (a dense table's cells past its end, an empty hash cell)."""
    if len(keys) == 0:
        return h >= len(masks)
    return keys[h] == -1


@njit(cache=True, nogil=True)
def _rehash(keys, masks, skips, cap):
    """A hash table of ``cap`` cells with the pages of ``keys, masks, skips`` (dense or hash)."""
    k2 = np.full(cap, -1, np.int64)
    m2 = np.zeros(cap, np.uint64)
    s2 = np.zeros(cap, np.int64)
    for h in range(len(masks)):
        key = h if len(keys) == 0 else keys[h]
        if key != -1 and (len(keys) > 0 or masks[h] != np.uint64(0)):
            g = _find(k2, key)
            k2[g] = key
            m2[g] = masks[h]
            s2[g] = skips[h]
    return k2, m2, s2


@borrowing_inlined
def _first_free(keys, masks, skips, slots, slot, t):
    """Smallest free timestep ``>= t`` of one slot."""
    page = t >> 6
    bit = t & 63
    while True:
        h = _find(keys, page * slots + slot)
        if _absent(keys, masks, h):
            return (page << 6) + bit
        m = masks[h]
        free = ~m & (ALL << np.uint64(bit))
        if free != np.uint64(0):
            return (page << 6) + _ctz(free)
        if m == ALL:  # follow the full page's pointer, halving the path
            nxt = skips[h]
            g = _find(keys, nxt * slots + slot)
            if not _absent(keys, masks, g) and masks[g] == ALL:
                nxt = skips[g]
                skips[h] = nxt
            page = nxt
        else:
            page += 1
        bit = 0


@borrowing_inlined
def _first_busy(keys, masks, slots, slot, a, b):
    """First busy timestep in ``[a, b)`` of one slot, -1 if all are free."""
    while a < b:
        page = a >> 6
        bit = a & 63
        end = min(64, bit + (b - a))
        h = _find(keys, page * slots + slot)
        if not _absent(keys, masks, h):
            width = end - bit
            rng = (ALL >> np.uint64(64 - width)) << np.uint64(bit)
            busy = masks[h] & rng
            if busy != np.uint64(0):
                return (page << 6) + _ctz(busy)
        a = (page << 6) + end
    return -1


@borrowing_inlined
def place(keys, masks, skips, slots, slot, t, k):
    """First start ``>= t`` with timesteps ``start .. start + k - 1`` all free on one slot."""
    while True:
        t = _first_free(keys, masks, skips, slots, slot, t)
        if k == 1:
            return t
        busy = _first_busy(keys, masks, slots, slot, t + 1, t + k)
        if busy < 0:
            return t
        t = busy


@borrowing_inlined
def missing(keys, masks, fill, slots, slot, t, k):
    """0 when the table has a cell for every page of timesteps ``t .. t + k - 1`` of one slot
    (a hash table: and stays at most half full with them), else how many pages lack one."""
    first, last = t >> 6, (t + k - 1) >> 6
    if len(keys) == 0:
        return 0 if last * slots + slot < len(masks) else last - first + 1
    absent = 0
    for page in range(first, last + 1):
        if keys[_find(keys, page * slots + slot)] == -1:
            absent += 1
    return 0 if 2 * (fill[0] + absent) <= len(keys) else absent


@njit(cache=True, nogil=True)
def grown(keys, masks, skips, fill, key, pages, dense_cells):
    """The table with cells for ``pages`` new pages up to page ``key``: a dense table grows
    (doubling, at least to ``key``) while it stays within ``dense_cells`` cells, else becomes a
    hash table; a hash table doubles until it is at most half full with them."""
    if len(keys) == 0:
        cap = max(2 * len(masks), key + 1)
        if cap <= dense_cells:
            m2 = np.zeros(cap, np.uint64)
            s2 = np.zeros(cap, np.int64)
            m2[:len(masks)] = masks
            s2[:len(skips)] = skips
            return keys, m2, s2
        used = 0
        for h in range(len(masks)):
            if masks[h] != np.uint64(0):
                used += 1
        fill[0] = used
        cap = 1024
        while cap < 4 * (used + pages):
            cap *= 2
        return _rehash(keys, masks, skips, cap)
    cap = len(keys)
    while 2 * (fill[0] + pages) > cap:
        cap *= 2
    return _rehash(keys, masks, skips, cap)


@borrowing_inlined
def occupy(keys, masks, skips, fill, slots, slot, t, k):
    """Mark ``t .. t + k - 1`` busy on one slot (the table has a cell for each page of them:
    :func:`missing`)."""
    a, b = t, t + k
    while a < b:
        page = a >> 6
        bit = a & 63
        end = min(64, bit + (b - a))
        key = page * slots + slot
        h = _find(keys, key)
        if len(keys) > 0 and keys[h] == -1:
            keys[h] = key
            masks[h] = np.uint64(0)
            fill[0] += 1
        width = end - bit
        masks[h] |= (ALL >> np.uint64(64 - width)) << np.uint64(bit)
        if masks[h] == ALL:
            skips[h] = page + 1
        a = (page << 6) + end
