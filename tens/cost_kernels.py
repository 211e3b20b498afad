"""Compiled loops of the three cost models (:mod:`collsynth.tens.cost` holds their definitions).

Each kernel streams over the sends in step order and walks every send's route as it goes
(:mod:`collsynth.tens.routing`): nothing is materialised per hop except what the event model's
critical path needs (its predecessor per hop). The piece size in bytes,
``(hi - lo) / denom * chunk_bytes[chunk]``, is recomputed where it is used, with the same
floating-point operations as the vectorised definitions, so results do not depend on the
evaluation order.

Occupancy of the TEN model: every parallel link ("slot") keeps its busy timesteps as 64-bit
pages, cell ``page * slots + slot`` of a dense table while the pages reached fit in a budget of
cells (the pages of one time span are then adjacent, and sends in step order work in one or
two of them), else in an open-addressing hash table keyed the same way; a full page points past
itself to the next page that may have room (a union-find over pages, with path halving), so
finding the first free timestep is near constant time however long the busy run.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_DEBRUIJN_POS = np.zeros(64, dtype=np.int64)
for _k in range(64):
    _DEBRUIJN_POS[(((1 << _k) * int(_DEBRUIJN)) & 0xFFFFFFFFFFFFFFFF) >> 58] = _k


# ---- sync --------------------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def sync_steps(bounds, r, rptr, rlinks, rlat, chunk, lo, hi, denom, chunk_bytes, bandwidth, alpha, unit_mult):
    """Per used step: ``(latency, bandwidth time, coupled time, max chunk units)``.

    Sends in step order (``bounds`` delimit the steps). Loads per link pair of one step are
    summed in send order; the step's bandwidth time is ``max_l load_l / bandwidth_l``, its
    coupled time ``max_l (load_l / bandwidth_l + alpha_l)``, its latency the largest route
    latency of its sends and its units ``max_l units_l * unit_mult_l`` (piece numerators).
    """
    T = len(bounds) - 1
    L = len(bandwidth)
    lat = np.empty(T)
    bw = np.empty(T)
    coupled = np.empty(T)
    units = np.zeros(T, np.int64)
    load = np.zeros(L)
    count = np.zeros(L, np.int64)
    used = np.zeros(L, np.bool_)
    touched = np.empty(L, np.int32)
    for k in range(T):
        nt = 0
        step_lat = -np.inf
        for i in range(bounds[k], bounds[k + 1]):
            route = r[i]
            piece = hi[i] - lo[i]
            nbytes = piece / denom * chunk_bytes[chunk[i]]
            if rlat[route] > step_lat:
                step_lat = rlat[route]
            for h in range(rptr[route], rptr[route + 1]):
                link = rlinks[h]
                if not used[link]:
                    used[link] = True
                    touched[nt] = link
                    nt += 1
                    load[link] = 0.0
                    count[link] = 0
                load[link] += nbytes
                count[link] += piece
        step_bw = -np.inf
        step_coupled = -np.inf
        step_units = 0
        for q in range(nt):
            link = touched[q]
            used[link] = False
            busy = load[link] / bandwidth[link]
            step_bw = max(step_bw, busy)
            step_coupled = max(step_coupled, busy + alpha[link])
            step_units = max(step_units, count[link] * unit_mult[link])
        lat[k] = step_lat
        bw[k] = step_bw
        coupled[k] = step_coupled
        units[k] = step_units
    return lat, bw, coupled, units


@njit(cache=True, nogil=True)
def piece_bytes(chunk, lo, hi, denom, chunk_bytes):
    """Bytes of every send's piece: ``(hi - lo) / denom * chunk_bytes[chunk]``."""
    out = np.empty(len(chunk))
    for i in range(len(chunk)):
        out[i] = (hi[i] - lo[i]) / denom * chunk_bytes[chunk[i]]
    return out


# ---- ten: occupancy of every parallel link ----------------------------------------------------

@njit(cache=True, nogil=True)
def _ctz(x):
    """Index of the lowest set bit of a non-zero uint64."""
    low = x & (~x + np.uint64(1))
    return _DEBRUIJN_POS[(low * _DEBRUIJN) >> np.uint64(58)]


@njit(cache=True, nogil=True)
def _mix(key):
    z = np.uint64(key)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True, nogil=True)
def _find(keys, key):
    """Cell of page ``key``: itself in a dense table (``keys`` empty), else its index in the
    hash table or of the empty cell where it would go."""
    if len(keys) == 0:
        return key
    m = np.uint64(len(keys) - 1)
    h = np.int64(_mix(key) & m)
    while keys[h] != -1 and keys[h] != key:
        h = (h + 1) & (len(keys) - 1)
    return h


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
def _place(keys, masks, skips, slots, slot, t, k):
    """First start ``>= t`` with timesteps ``start .. start + k - 1`` all free on one slot."""
    while True:
        t = _first_free(keys, masks, skips, slots, slot, t)
        if k == 1:
            return t
        busy = _first_busy(keys, masks, slots, slot, t + 1, t + k)
        if busy < 0:
            return t
        t = busy


@njit(cache=True, nogil=True)
def _room_for(keys, masks, skips, fill, key, dense_cells):
    """The table with a cell for page ``key``: a dense table grows (doubling) while it stays
    within ``dense_cells`` cells, else becomes a hash table; a hash table doubles at half full."""
    if len(keys) == 0:
        if key < len(masks):
            return keys, masks, skips
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
        while cap < 4 * (used + 1):
            cap *= 2
        return _rehash(keys, masks, skips, cap)
    if 2 * (fill[0] + 1) > len(keys):
        return _rehash(keys, masks, skips, 2 * len(keys))
    return keys, masks, skips


@njit(cache=True, nogil=True)
def _occupy(keys, masks, skips, fill, slots, slot, t, k, dense_cells):
    """Mark ``t .. t + k - 1`` busy on one slot; returns the (possibly grown) table."""
    a, b = t, t + k
    while a < b:
        page = a >> 6
        bit = a & 63
        end = min(64, bit + (b - a))
        key = page * slots + slot
        h = _find(keys, key)
        if _absent(keys, masks, h):
            keys, masks, skips = _room_for(keys, masks, skips, fill, key, dense_cells)
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
    return keys, masks, skips


@njit(cache=True, nogil=True)
def ten_timesteps(bounds, r, rptr, rlinks, chunk, lo, hi, denom, chunk_bytes, largest, alpha, per_link_bw, delay,
                  latency, timestep, shrink, slot_ptr, exact, dptr, ditems, ga, g_in, groups, dense_cells):
    """Last arrival timestep of ASAP dispatch with back-filling (TACOS TEN timesteps).

    Sends in step order (``bounds`` delimit the steps); a send is ready one timestep after the
    latest arrival it depends on (exact pairs: the sends ``ditems[dptr[i]:dptr[i + 1]]``; or the
    latest arrival of its group ``g_in`` over the steps already finished). Each hop takes the
    TEN delay of its link for a whole largest chunk, else
    ``max(1, ceil(cost / timestep * shrink))`` timesteps (``cost = alpha + bytes / bandwidth``;
    pass ``alpha`` 0 for a pipelined latency), on the parallel link of its pair that can start
    it first, and reaches the next node ``latency[link]`` timesteps after it leaves the link.
    Occupancy is a dense table of at most ``dense_cells`` cells, then a hash table (module doc).
    Returns the last arrival timestep and the latency timesteps of the hops of the send that
    arrives then.
    """
    n = len(r)
    slots = slot_ptr[-1]
    arrival = np.zeros(n if exact else 0, np.int64)
    step_arrival = np.zeros(0 if exact else 1, np.int64)
    gmax = np.zeros(groups, np.int64)
    keys = np.zeros(0, np.int64)  # dense pages (page * slots + slot) while they fit in dense_cells
    masks = np.zeros(0, np.uint64)
    skips = np.zeros(0, np.int64)
    fill = np.zeros(1, np.int64)
    tol = 1e-12 * abs(largest)
    last = 0
    last_lat = 0
    for s in range(len(bounds) - 1):
        b0, b1 = bounds[s], bounds[s + 1]
        if not exact and len(step_arrival) < b1 - b0:
            step_arrival = np.zeros(2 * (b1 - b0), np.int64)
        for i in range(b0, b1):
            ready = 0
            if exact:
                for q in range(dptr[i], dptr[i + 1]):
                    ready = max(ready, arrival[ditems[q]])
            elif g_in[i] >= 0:
                ready = gmax[g_in[i]]
            t = ready + 1
            nbytes = (hi[i] - lo[i]) / denom * chunk_bytes[chunk[i]]
            route = r[i]
            lat = 0
            for h in range(rptr[route], rptr[route + 1]):
                link = rlinks[h]
                if abs(nbytes - largest) <= tol:
                    k = delay[link]
                else:
                    k = max(1, np.int64(math.ceil((alpha[link] + nbytes / per_link_bw[link]) / timestep * shrink)))
                best = -1
                best_slot = slot_ptr[link]
                for slot in range(slot_ptr[link], slot_ptr[link + 1]):
                    start = _place(keys, masks, skips, slots, slot, t, k)
                    if best < 0 or start < best:
                        best, best_slot = start, slot
                keys, masks, skips = _occupy(keys, masks, skips, fill, slots, best_slot, best, k, dense_cells)
                t = best + k + latency[link]
                lat += latency[link]
            if exact:
                arrival[i] = t - 1
            else:
                step_arrival[i - b0] = t - 1
            if t - 1 > last:
                last, last_lat = t - 1, lat
        if not exact:  # this step's arrivals become visible to later steps
            for i in range(b0, b1):
                gmax[ga[i]] = max(gmax[ga[i]], step_arrival[i - b0])
    return last, last_lat


# ---- event: the queue of ready hops ------------------------------------------------------------
#
# Entries are two int64 words: the ready time's IEEE-754 bits (times are >= 0, so the bits order
# like the times) and ``position << 32 | predecessor + 1``; positions are unique, so the order
# is (time, position in step order). Entries are kept by *time level* (one list per distinct
# time, a calendar queue in spirit: R. Brown, "Calendar Queues: A Fast O(1) Priority Queue
# Implementation for the Simulation Event Set Problem", CACM 31(10), 1988): a push appends to
# its level's list, and the earliest level, once nothing earlier is queued, is sorted and taken
# in order. Schedules priced by this model have few distinct times (equal pieces on equal links),
# so this replaces a heap of hundreds of thousands of entries (a cache miss per level of it) by
# appends and small sorts. Entries no later than the level being taken, or beyond the fixed
# number of levels, go to a 4-ary heap (the *late* heap; its 4 children share one cache line).
# Every array of the queue is sized for the most entries it can hold (one per send) and
# allocated untouched, so only the pages used are resident and nothing is reallocated.

# The event loop and the queue operations it calls allocate nothing and only borrow arrays that
# event_times owns: they are compiled without the runtime's reference counting (numba's
# ``_nrt=False`` target option, as the greedy kernels are). Otherwise every array an inlined
# helper receives costs an atomic increment and decrement of its count (the queue's seven arrays
# on every push and take): measured at about 40% of the loop, and each one a barrier that keeps
# the loop's reads from overlapping. A function called from the loop inherits the option.
_borrowing = njit(cache=True, nogil=True, _nrt=False)
_inlined = njit(cache=True, nogil=True, _nrt=False, inline='always')

MEMBER = np.dtype([("val", np.float64), ("frm", np.int32), ("grp", np.int32)], align=True)
SEND = np.dtype([("nbytes", np.float64), ("route", np.int32), ("pos", np.int32)], align=True)
GROUP_START, GROUP_FRONTIER, GROUP_NEXT, GROUP_WAIT_END = 0, 1, 2, 3


@njit(cache=True, nogil=True)
def waiting_by_group(g_in, p, groups):
    """Rows ``(send, p)`` of the sends that read a group (``g_in >= 0``), by group and in
    position order inside (step order, so ``p`` ascends), and each group's row range
    ``starts[g] .. starts[g + 1]``: one counting sort, no per-send temporaries."""
    starts = np.zeros(groups + 1, np.int64)
    for q in range(len(g_in)):
        if g_in[q] >= 0:
            starts[g_in[q] + 1] += 1
    for g in range(groups):
        starts[g + 1] += starts[g]
    fill = starts[:-1].copy()
    rows = np.empty((starts[-1], 2), np.int32)
    for q in range(len(g_in)):
        g = g_in[q]
        if g >= 0:
            rows[fill[g], 0] = q
            rows[fill[g], 1] = p[q]
            fill[g] += 1
    return rows, starts


@_inlined
def _less(heap, a, b):
    return heap[a, 0] < heap[b, 0] or (heap[a, 0] == heap[b, 0] and heap[a, 1] < heap[b, 1])


@_inlined
def _push(heap, size, tbits, word):
    """Insert ``(tbits, word)`` into the 4-ary min-heap ``heap[:size]`` (capacity permitting)."""
    _rise(heap, size, tbits, word)


@_inlined
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


@_inlined
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
QS_TIME, QS_CURSOR, QS_LEN, QS_LATE, QS_FREE_ROW, QS_ROWS, QS_LEVELS, QS_FREE_SLOT = range(8)


@njit(cache=True, nogil=True)
def queue_new(n, levels):
    """An empty queue for at most ``n`` entries at once, ``levels`` of them kept apart by time
    (entries of further times go to the late heap): the tuple ``(state, level map, level
    slots, level heap, rows, run, late heap)`` that :func:`queue_push`, :func:`queue_first` and
    :func:`queue_drop` share. ``state`` holds the time bits of the level being taken (the *run*,
    sorted entries ``run[cursor:length]``), the late heap's size, the free lists of rows and
    slots and the number of levels; a slot is ``(first row, last row, entries, next free)``."""
    qs = np.zeros(8, np.int64)
    qs[QS_TIME] = -1
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
    return qs, lmap, slots, lheap, rows, np.empty(n + 1, np.int64), np.empty((n + 1, 2), np.int64)


@_inlined
def _map_find(lmap, key):
    """Cell of time bits ``key`` in the level map, or the empty cell where it would go."""
    m = len(lmap) - 1
    h = np.int64(_mix(key) & np.uint64(m))
    while lmap[h, 0] != -1 and lmap[h, 0] != key:
        h = (h + 1) & m
    return h


@_borrowing
def _map_delete(lmap, h):
    """Empty cell ``h`` of the level map, moving back the later cells of its probe run that
    would otherwise be cut off from their home cell (deletion without tombstones)."""
    m = len(lmap) - 1
    j = h
    while True:
        j = (j + 1) & m
        if lmap[j, 0] == -1:
            break
        home = np.int64(_mix(lmap[j, 0]) & np.uint64(m))
        if (j > h and (home <= h or home > j)) or (j < h and h >= home > j):
            lmap[h, 0], lmap[h, 1] = lmap[j, 0], lmap[j, 1]
            h = j
    lmap[h, 0] = -1


@_inlined
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


@_inlined
def _lheap_push(lheap, size, tb, slot):
    """Insert level ``(tb, slot)`` into the binary min-heap of level times ``lheap[:size]``."""
    j = size
    while j > 0:
        parent = (j - 1) >> 1
        if lheap[parent, 0] <= tb:
            break
        lheap[j, 0], lheap[j, 1] = lheap[parent, 0], lheap[parent, 1]
        j = parent
    lheap[j, 0], lheap[j, 1] = tb, slot


@_borrowing
def _lheap_pop(lheap, size):
    """Remove the root of the level heap ``lheap[:size]`` (``size`` is the old size)."""
    size -= 1
    tb, slot = lheap[size, 0], lheap[size, 1]
    j = 0
    while True:
        c = 2 * j + 1
        if c >= size:
            break
        if c + 1 < size and lheap[c + 1, 0] < lheap[c, 0]:
            c += 1
        if tb <= lheap[c, 0]:
            break
        lheap[j, 0], lheap[j, 1] = lheap[c, 0], lheap[c, 1]
        j = c
    lheap[j, 0], lheap[j, 1] = tb, slot


@_inlined
def _level_slot(Q, tb):
    """Slot of the level of time bits ``tb``, opened if new; -1 when every slot is taken."""
    qs, lmap, slots, lheap, rows = Q[0], Q[1], Q[2], Q[3], Q[4]
    h = _map_find(lmap, tb)
    if lmap[h, 0] == tb:
        return lmap[h, 1]
    slot = qs[QS_FREE_SLOT]
    if slot >= 0:
        qs[QS_FREE_SLOT] = slots[slot, 3]
        lmap[h, 0], lmap[h, 1] = tb, slot
        r = _new_row(qs, rows)
        slots[slot, 0], slots[slot, 1], slots[slot, 2] = r, r, 0
        _lheap_push(lheap, qs[QS_LEVELS], tb, slot)
        qs[QS_LEVELS] += 1
    return slot


@_inlined
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


@njit(cache=True, nogil=True, _nrt=True)
def _take_level(Q):
    """The earliest level becomes the run: its entries, sorted; its rows and slot are freed.
    Compiled with the runtime (numba's sort keeps its stack in a list): called once per level."""
    qs, lmap, slots, lheap, rows, run = Q[0], Q[1], Q[2], Q[3], Q[4], Q[5]
    tb, slot = lheap[0, 0], lheap[0, 1]
    _lheap_pop(lheap, qs[QS_LEVELS])
    qs[QS_LEVELS] -= 1
    _map_delete(lmap, _map_find(lmap, tb))
    count = slots[slot, 2]
    r, x = slots[slot, 0], 0
    while r >= 0:
        take = min(BLOCK, count - x)
        run[x:x + take] = rows[r, :take]
        x += take
        nxt = rows[r, BLOCK]
        rows[r, BLOCK] = qs[QS_FREE_ROW]
        qs[QS_FREE_ROW] = r
        r = nxt
    run[:count].sort()
    slots[slot, 3] = qs[QS_FREE_SLOT]
    qs[QS_FREE_SLOT] = slot
    qs[QS_TIME], qs[QS_CURSOR], qs[QS_LEN] = tb, 0, count


@_inlined
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


@_inlined
def queue_drop(Q, where):
    """Remove the entry :func:`queue_first` found at ``where``."""
    qs = Q[0]
    if where == 1:
        qs[QS_CURSOR] += 1
    else:
        _pop(Q[6], qs[QS_LATE])
        qs[QS_LATE] -= 1


AHEAD = 16  # entries of the run read ahead of the one taken


@_inlined
def _read_ahead(Q, sends, ev, hop_k, dptr, members, groups, waiting, exact):
    """Read what the event loop will need for the entries of the run ``AHEAD`` places on and
    less (their send records, then member records, group rows, first waiting rows), so that
    it is in cache when they are taken: the run is sorted by position, but its positions are
    strided over several tables the loop would otherwise wait for one miss at a time (numba
    has no prefetch instruction; the sum of what was read, >= 0, is returned so the reads stay)."""
    qs, run = Q[0], Q[5]
    c, end = qs[QS_CURSOR], qs[QS_LEN]
    total = 0
    if c + AHEAD < end:
        a = run[c + AHEAD] >> 32
        total += sends[a].pos + (hop_k[a] if len(hop_k) else ev[a] + 1) + (dptr[a] if exact else 0)
    if exact:
        return total
    if c + AHEAD * 3 // 4 < end:
        total += members[sends[run[c + AHEAD * 3 // 4] >> 32].pos].grp
    if c + AHEAD // 2 < end:
        g = members[sends[run[c + AHEAD // 2] >> 32].pos].grp
        total += groups[g, GROUP_NEXT] + groups[g + 1, GROUP_START]
    if c + AHEAD // 4 < end:
        w = groups[members[sends[run[c + AHEAD // 4] >> 32].pos].grp, GROUP_NEXT]
        total += waiting[w, 0] if w < len(waiting) else 0
    return total


@njit(cache=True, nogil=True)
def _hop_link(e, hstart, sends, rptr, rlinks):
    """Link pair of hop ``e``: hop ``e - hstart[q]`` of send ``q`` (``q = e`` without ``hstart``)."""
    if len(hstart) == 0:
        return rlinks[rptr[sends[e].route]]
    q = np.searchsorted(hstart, e, side="right") - 1
    return rlinks[rptr[sends[q].route] + e - hstart[q]]


@_inlined
def _independent(q, exact, need, g_in):
    return (exact and need[q] == 0) or (not exact and g_in[q] < 0)


@njit(cache=True, nogil=True)
def event_times(sends, rptr, rlinks, hstart, hops, bandwidth, alpha, exact, need, dptr, ditems, g_in, members,
                groups, waiting, levels):
    """Congestion-aware event simulation: ``(last arrival, critical-path latency, hops served)``.

    ``sends`` (one :data:`SEND` record per position, in step order: piece bytes, route id,
    place in the group member list) are read once per hop. Ready hops are taken in ``(ready time,
    position)`` order (the queue above; the sends that need nothing are a stream at time 0 in
    position order, never queued) and served on their link (FIFO: a hop starts when both it and
    the link are ready). A send's first hop is ready when its data has arrived: every exact dependency
    (``need`` counts; the dependents of ``j`` are ``ditems[dptr[j]:dptr[j + 1]]``), or the first
    ``p`` arrivals of group ``g_in`` (``waiting[w] = (send, p)`` for ``w`` in the group's waiting
    range, sorted by ``p``; ``members[sends[q].pos]`` holds arrival ``q``'s time, hop and group, and
    ``groups`` rows the group's start, frontier and waiting range). Hop ids: ``hstart[q] + k``
    (``q`` itself when every send has one hop, ``hstart`` empty). ``ev[e]`` is the hop that
    decided ``e``'s start: ``>= -1`` its data, ``<= -2`` (encoded ``-2 - hop``) the link's
    previous message. ``levels``: time levels the queue keeps apart at once (:func:`queue_new`).
    """
    n = len(sends)
    routed = len(hstart) > 0
    ev = np.full(hops, -1, np.int32)
    free = np.zeros(len(bandwidth))
    last_on = np.full(len(bandwidth), -1, np.int32)
    hop_k = np.zeros(n if routed else 0, np.int32)
    ready = np.zeros(n if exact else 0)
    ready_from = np.full(n if exact else 0, -1, np.int32)
    fbuf = np.zeros(1)
    ibuf = fbuf.view(np.int64)
    Q = queue_new(n, levels)
    best_t, best_e, served = _event_loop(sends, rptr, rlinks, hstart, bandwidth, alpha, exact, need, dptr, ditems, g_in,
                                         members, groups, waiting, ev, free, last_on, hop_k, ready, ready_from,
                                         fbuf, ibuf, Q)
    return best_t, _critical_latency(best_e, ev, hstart, sends, rptr, rlinks, alpha), served


@_borrowing
def _event_loop(sends, rptr, rlinks, hstart, bandwidth, alpha, exact, need, dptr, ditems, g_in, members, groups,
                waiting, ev, free, last_on, hop_k, ready, ready_from, fbuf, ibuf, Q):
    """The loop of :func:`event_times` on the arrays it allocated: ``(last arrival, its hop,
    hops served)``."""
    n = len(sends)
    routed = len(hstart) > 0
    stream = 0  # sends that need nothing: taken at time 0 in step order, before any later time
    best_t, best_e, served = 0.0, -1, 0
    touched = 0  # a sum of what _read_ahead read, so that its reads are kept
    while True:
        while stream < n and not _independent(stream, exact, need, g_in):
            stream += 1
        where, tb, word = queue_first(Q)
        if stream < n and (where == 0 or tb > 0 or (np.int64(stream) << 32) < word):
            t, q, pred = 0.0, np.int64(stream), np.int64(-1)
            stream += 1
        elif where > 0:
            ibuf[0] = tb
            t = fbuf[0]
            q, pred = word >> 32, (word & 0xFFFFFFFF) - 1
            queue_drop(Q, where)
            if where == 1:
                touched += _read_ahead(Q, sends, ev, hop_k, dptr, members, groups, waiting, exact)
        else:
            break
        served += 1
        route = sends[q].route
        k = hop_k[q] if routed else 0
        link = rlinks[rptr[route] + k]
        e = hstart[q] + k if routed else q
        fl = free[link]
        if fl > t:
            start = fl
            ev[e] = -2 - last_on[link]
        else:
            start = t
            ev[e] = pred
        fl = start + sends[q].nbytes / bandwidth[link]
        free[link] = fl
        last_on[link] = e
        arr = fl + alpha[link]
        fbuf[0] = arr
        if rptr[route] + k + 1 < rptr[route + 1]:
            hop_k[q] = k + 1
            queue_push(Q, ibuf[0], (q << 32) | (e + 1))
            continue
        if arr > best_t or best_e < 0:
            best_t, best_e = arr, e
        if exact:
            _release_dependents(Q, q, arr, e, dptr, ditems, need, ready, ready_from, fbuf, ibuf)
            continue
        _release_waiters(Q, sends[q].pos, arr, e, members, groups, waiting, fbuf, ibuf)
    if touched < 0:  # never (every value read ahead is >= 0): this use of the sum keeps the reads
        raise ValueError("negative index read ahead")
    return best_t, best_e, served


@_inlined
def _release_dependents(Q, q, arr, e, dptr, ditems, need, ready, ready_from, fbuf, ibuf):
    """Send ``q`` arrived at ``arr`` (hop ``e``): each dependent's ready time is the latest of
    its data, and a dependent whose last need this was is queued."""
    for x in range(dptr[q], dptr[q + 1]):
        d = ditems[x]
        if arr >= ready[d]:
            ready[d] = arr
            ready_from[d] = e
        need[d] -= 1
        if need[d] == 0:
            need[d] = -1  # queued (0 marks the sends of the time-0 stream)
            fbuf[0] = ready[d]
            queue_push(Q, ibuf[0], (np.int64(d) << 32) | (ready_from[d] + 1))


@_inlined
def _release_waiters(Q, at, arr, e, members, groups, waiting, fbuf, ibuf):
    """The arrival at member place ``at`` came at ``arr`` (hop ``e``): extend its group's finished
    prefix (with the running maximum of arrival times) and queue the sends waiting for it."""
    members[at].val = arr
    members[at].frm = e
    g = members[at].grp
    st0 = groups[g, GROUP_START]
    f = groups[g, GROUP_FRONTIER]
    end = groups[g + 1, GROUP_START]
    while st0 + f < end and members[st0 + f].frm >= 0:
        at = st0 + f
        if f > 0 and not members[at].val >= members[at - 1].val:
            members[at].val = members[at - 1].val
            members[at].frm = members[at - 1].frm
        f += 1
    groups[g, GROUP_FRONTIER] = f
    w = groups[g, GROUP_NEXT]
    while w < groups[g, GROUP_WAIT_END] and waiting[w, 1] <= f:
        d = waiting[w, 0]
        at = st0 + waiting[w, 1] - 1
        fbuf[0] = members[at].val
        queue_push(Q, ibuf[0], (np.int64(d) << 32) | (members[at].frm + 1))
        w += 1
    groups[g, GROUP_NEXT] = w


@njit(cache=True, nogil=True)
def _critical_latency(e, ev, hstart, sends, rptr, rlinks, alpha):
    """Latency on the critical path ending at hop ``e``: its own alpha and every data edge's."""
    T_L = 0.0
    if e >= 0:
        T_L = alpha[_hop_link(e, hstart, sends, rptr, rlinks)]
    while e >= 0:
        prev = ev[e]
        if prev >= -1:
            if prev >= 0:
                T_L += alpha[_hop_link(prev, hstart, sends, rptr, rlinks)]
            e = prev
        else:
            e = -2 - prev
    return T_L
