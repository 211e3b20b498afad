"""The queue of ready hops of the event cost model's loop (:mod:`collsynth.tens.event_kernel`).

Entries are two int64 words: the ready time's IEEE-754 bits (times are >= 0, so the bits order
like the times) and ``position << 32 | predecessor + 1``; positions are unique, so the order
is (time, position in step order). Entries are kept by *time level* (one list per distinct
time, a calendar queue in spirit: R. Brown, "Calendar Queues: A Fast O(1) Priority Queue
Implementation for the Simulation Event Set Problem", CACM 31(10), 1988): a push appends to
its level's list, and the earliest level, once nothing earlier is queued, is sorted and taken
in order. Schedules priced by this model have few distinct times (equal pieces on equal links),
so this replaces a heap of hundreds of thousands of entries (a cache miss per level of it) by
appends and small sorts. Entries no later than the level being taken, or beyond the fixed
number of levels, go to a 4-ary heap (the *late* heap; its 4 children share one cache line);
the levels' own times are kept in one too (a level's time is unique among the open levels).
Every array of the queue is sized for the most entries it can hold (one per send) and
allocated untouched, so only the pages used are resident and nothing is reallocated.

The queue operations allocate nothing and only borrow the queue's arrays
(:data:`collsynth.tens.compiled.borrowing`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .compiled import borrowing, borrowing_inlined, hash_mix
from .prefetch import huge_pages


@borrowing_inlined
def _less(heap, a, b):
    return heap[a, 0] < heap[b, 0] or (heap[a, 0] == heap[b, 0] and heap[a, 1] < heap[b, 1])


@borrowing_inlined
def _push(heap, size, tbits, word):
    """Insert ``(tbits, word)`` into the 4-ary min-heap ``heap[:size]`` (capacity permitting)."""
    _rise(heap, size, tbits, word)


@borrowing_inlined
def _rise(heap, j, tbits, word):
    """Put ``(tbits, word)`` in the hole at ``j`` or above it, moving larger parents down."""
    while j > 0:
        parent = (j - 1) >> 2
        if heap[parent, 0] < tbits or (heap[parent, 0] == tbits and heap[parent, 1] < word):
            break
        heap[j, 0] = heap[parent, 0]
        heap[j, 1] = heap[parent, 1]
        j = parent
    heap[j, 0] = tbits
    heap[j, 1] = word


@borrowing_inlined
def _pop(heap, size):
    """Remove the root of ``heap[:size]`` (the caller read it); ``size`` is the old size.

    Bottom-up: the hole left by the root sinks along the smallest children to a leaf without
    comparing against the last entry, which then rises from there (it came from the bottom, so
    it rarely rises far): about one comparison per level fewer than the textbook sift-down.
    """
    size -= 1
    tbits, word = heap[size, 0], heap[size, 1]
    j = 0
    while True:
        c = 4 * j + 1
        if c >= size:
            break
        best = c
        for x in range(c + 1, min(c + 4, size)):
            if _less(heap, x, best):
                best = x
        heap[j, 0] = heap[best, 0]
        heap[j, 1] = heap[best, 1]
        j = best
    _rise(heap, j, tbits, word)


BLOCK = 127  # entries per row of the level lists; column BLOCK links a row to the next one
QS_TIME, QS_CURSOR, QS_LEN, QS_LATE, QS_FREE_ROW, QS_ROWS, QS_LEVELS, QS_FREE_SLOT, QS_LAST_TIME, QS_LAST_SLOT = range(10)


@njit(cache=True, nogil=True)
def queue_new(n, levels):
    """An empty queue for at most ``n`` entries at once, ``levels`` of them kept apart by time
    (entries of further times go to the late heap): the tuple ``(state, level map, level
    slots, level heap, rows, run, late heap, spare run, digit counts)`` that
    :func:`queue_push`, :func:`queue_first` and :func:`queue_drop` share. ``state`` holds the
    time bits of the level being taken (the *run*, sorted entries ``run[cursor:length]``), the
    late heap's size, the free lists of rows and slots and the number of levels; a slot is
    ``(first row, last row, entries, next free)``. The spare run and the counts are the radix
    sort's (:func:`_sort_run`)."""
    qs = np.zeros(10, np.int64)
    qs[QS_TIME] = -1
    qs[QS_LAST_TIME] = -1
    qs[QS_FREE_ROW] = -1
    cells = 4
    while cells < 4 * levels:
        cells *= 2
    lmap = np.full((cells, 2), -1, np.int64)  # level time bits -> slot, linear probing
    slots = np.zeros((levels, 4), np.int64)
    slots[:, 3] = np.arange(1, levels + 1)
    slots[levels - 1, 3] = -1
    lheap = np.zeros((levels, 2), np.int64)
    rows = np.empty((n // BLOCK + levels + 1, BLOCK + 1), np.int64)
    run = np.empty(n + 1, np.int64)
    spare = np.empty(n + 1, np.int64)
    huge_pages(rows)
    huge_pages(run)
    huge_pages(spare)
    return qs, lmap, slots, lheap, rows, run, np.empty((n + 1, 2), np.int64), spare, np.empty(DIGITS * RADIX, np.int64)


@borrowing_inlined
def _map_find(lmap, key):
    """Cell of time bits ``key`` in the level map, or the empty cell where it would go."""
    m = len(lmap) - 1
    h = np.int64(hash_mix(key) & np.uint64(m))
    while lmap[h, 0] != -1 and lmap[h, 0] != key:
        h = (h + 1) & m
    return h


@borrowing
def _map_delete(lmap, h):
    """Empty cell ``h`` of the level map, moving back the later cells of its probe run that
    would otherwise be cut off from their home cell (deletion without tombstones)."""
    m = len(lmap) - 1
    j = h
    while True:
        j = (j + 1) & m
        if lmap[j, 0] == -1:
            break
        home = np.int64(hash_mix(lmap[j, 0]) & np.uint64(m))
        if (j > h and (home <= h or home > j)) or (j < h and h >= home > j):
            lmap[h, 0], lmap[h, 1] = lmap[j, 0], lmap[j, 1]
            h = j
    lmap[h, 0] = -1


@borrowing_inlined
def _new_row(qs, rows):
    """A row for a level list: the last one freed, else the first never used."""
    r = qs[QS_FREE_ROW]
    if r >= 0:
        qs[QS_FREE_ROW] = rows[r, BLOCK]
    else:
        r = qs[QS_ROWS]
        qs[QS_ROWS] += 1
    rows[r, BLOCK] = -1
    return r




@borrowing_inlined
def _level_slot(Q, tb):
    """Slot of the level of time bits ``tb``, opened if new; -1 when every slot is taken. The
    last level found is remembered: pushes come in runs of one time (the sends a level serves on
    free links all arrive together), which then skip the level map."""
    qs, lmap, slots, lheap, rows = Q[0], Q[1], Q[2], Q[3], Q[4]
    if tb == qs[QS_LAST_TIME]:
        return qs[QS_LAST_SLOT]
    h = _map_find(lmap, tb)
    if lmap[h, 0] == tb:
        slot = lmap[h, 1]
    else:
        slot = qs[QS_FREE_SLOT]
        if slot < 0:
            return slot
        qs[QS_FREE_SLOT] = slots[slot, 3]
        lmap[h, 0], lmap[h, 1] = tb, slot
        r = _new_row(qs, rows)
        slots[slot, 0], slots[slot, 1], slots[slot, 2] = r, r, 0
        _push(lheap, qs[QS_LEVELS], tb, slot)
        qs[QS_LEVELS] += 1
    qs[QS_LAST_TIME], qs[QS_LAST_SLOT] = tb, slot
    return slot


@borrowing_inlined
def queue_push(Q, tb, word):
    """Queue entry ``(tb, word)``: appended to its time level's list when its time is after
    the run's, else (or when no level slot is free) pushed on the late heap."""
    qs, slots, rows, late = Q[0], Q[2], Q[4], Q[6]
    slot = _level_slot(Q, tb) if tb > qs[QS_TIME] else -1
    if slot < 0:
        _push(late, qs[QS_LATE], tb, word)
        qs[QS_LATE] += 1
        return
    fill = slots[slot, 2] % BLOCK
    if fill == 0 and slots[slot, 2] > 0:
        r = _new_row(qs, rows)
        rows[slots[slot, 1], BLOCK] = r
        slots[slot, 1] = r
    rows[slots[slot, 1], fill] = word
    slots[slot, 2] += 1


@borrowing
def _take_level(Q):
    """The earliest level becomes the run: its entries, sorted (:func:`_sort_run`); its rows and
    slot are freed. Called once per level."""
    qs, lmap, slots, lheap, rows, run = Q[0], Q[1], Q[2], Q[3], Q[4], Q[5]
    tb, slot = lheap[0, 0], lheap[0, 1]
    _pop(lheap, qs[QS_LEVELS])
    qs[QS_LEVELS] -= 1
    _map_delete(lmap, _map_find(lmap, tb))
    if qs[QS_LAST_TIME] == tb:
        qs[QS_LAST_TIME] = -1
    count = slots[slot, 2]
    r, x = slots[slot, 0], 0
    while r >= 0:
        for y in range(min(BLOCK, count - x)):
            run[x] = rows[r, y]
            x += 1
        nxt = rows[r, BLOCK]
        rows[r, BLOCK] = qs[QS_FREE_ROW]
        qs[QS_FREE_ROW] = r
        r = nxt
    _sort_run(run, count, Q[7], Q[8])
    slots[slot, 3] = qs[QS_FREE_SLOT]
    qs[QS_FREE_SLOT] = slot
    qs[QS_TIME], qs[QS_CURSOR], qs[QS_LEN] = tb, 0, count


RADIX = 256  # buckets per digit of the run's radix sort (8 bits)
DIGITS = 4  # digits of a 32-bit position


@borrowing
def _sort_run(run, count, spare, counts):
    """Sort ``run[:count]`` by position (the words' bits 32 and up, unique among queued entries,
    so the words sort as their positions). A few entries: insertion sort. Otherwise a least
    significant digit first radix sort (Knuth, "The Art of Computer Programming", vol. 3,
    section 5.2.5) of the positions' offsets from the least one, on 8-bit digits, only as many
    as the offsets have, counted for every digit in one pass; a digit all entries share moves
    nothing. A level's positions are scattered over a few steps of a big schedule, so this is
    linear where a comparison sort pays a mispredicted branch per comparison (it took a fifth of
    the loop on the Swing 32x32 allreduce)."""
    if count <= 32:
        for i in range(1, count):
            word = run[i]
            j = i - 1
            while j >= 0 and run[j] > word:
                run[j + 1] = run[j]
                j -= 1
            run[j + 1] = word
        return
    least, most, ordered = run[0] >> 32, run[0] >> 32, True
    for i in range(1, count):
        q = run[i] >> 32
        least, most = min(least, q), max(most, q)
        ordered = ordered and run[i - 1] < run[i]
    if ordered:
        return
    digits, span = 0, most - least
    while span > 0:
        digits += 1
        span >>= 8
    for b in range(digits * RADIX):
        counts[b] = 0
    for i in range(count):
        offset = (run[i] >> 32) - least
        for d in range(digits):
            counts[d * RADIX + ((offset >> (8 * d)) & (RADIX - 1))] += 1
    moved = False  # the sorted entries are in spare
    for d in range(digits):
        first = counts[d * RADIX + (((run[0] >> 32) - least) >> (8 * d) & (RADIX - 1))]
        if first == count:
            continue
        total = 0
        for b in range(d * RADIX, (d + 1) * RADIX):
            counts[b], total = total, total + counts[b]
        if moved:
            _scatter_digit(spare, run, count, least, d, counts)
        else:
            _scatter_digit(run, spare, count, least, d, counts)
        moved = not moved
    if moved:
        for i in range(count):
            run[i] = spare[i]


@borrowing_inlined
def _scatter_digit(source, target, count, least, d, counts):
    """One stable pass of :func:`_sort_run`: ``source[:count]`` into ``target`` by digit ``d``
    (``counts[d * RADIX:]`` are the buckets' starts, advanced as they fill)."""
    for i in range(count):
        word = source[i]
        b = d * RADIX + ((((word >> 32) - least) >> (8 * d)) & (RADIX - 1))
        target[counts[b]] = word
        counts[b] += 1


@borrowing_inlined
def queue_first(Q):
    """``(where, tb, word)``: the least queued entry, not removed; ``where`` is 1 for the run,
    2 for the late heap, 0 when the queue is empty. Levels hold only times after the run's, so
    the next level becomes the run once the run is used up and no late entry is earlier."""
    qs, lheap, run, late = Q[0], Q[3], Q[5], Q[6]
    if qs[QS_CURSOR] == qs[QS_LEN] and qs[QS_LEVELS] > 0 and (qs[QS_LATE] == 0 or lheap[0, 0] <= late[0, 0]):
        _take_level(Q)
    if qs[QS_CURSOR] < qs[QS_LEN]:
        tb, word = qs[QS_TIME], run[qs[QS_CURSOR]]
        if qs[QS_LATE] > 0 and (late[0, 0] < tb or (late[0, 0] == tb and late[0, 1] < word)):
            return 2, late[0, 0], late[0, 1]
        return 1, tb, word
    if qs[QS_LATE] > 0:
        return 2, late[0, 0], late[0, 1]
    return 0, np.int64(0), np.int64(0)


@borrowing_inlined
def queue_drop(Q, where):
    """Remove the entry :func:`queue_first` found at ``where``."""
    qs = Q[0]
    if where == 1:
        qs[QS_CURSOR] += 1
    else:
        _pop(Q[6], qs[QS_LATE])
        qs[QS_LATE] -= 1


