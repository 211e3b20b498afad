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
from numba.cpython.unsafe.numbers import trailing_zeros

from .prefetch import huge_pages, prefetch, prefetch_write

ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


# ---- sync --------------------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def sync_steps(bounds, r, rptr, rlinks, rlat, chunk, lo, hi, denom, chunk_bytes, bandwidth, alpha, unit_mult):
    """Per used step: ``(latency, bandwidth time, coupled time, max chunk units)``.

    The alpha-beta step cost of Zhao et al., NSDI 2025, Section 3.2. Sends in step order
    (``bounds`` delimit the steps). Loads per link pair of one step are summed in send order;
    the step's bandwidth time is ``max_l load_l / bandwidth_l``, its coupled time
    ``max_l (load_l / bandwidth_l + alpha_l)``, its latency the largest route latency of its
    sends and its units ``max_l units_l * unit_mult_l`` (piece numerators).
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


# ---- ten: occupancy of every parallel link ----------------------------------------------------

@njit(cache=True, nogil=True)
def _ctz(x):
    """Index of the lowest set bit of a non-zero uint64 (LLVM's count-trailing-zeros, one
    instruction, through numba's intrinsic)."""
    return np.int64(trailing_zeros(x))


@njit(cache=True, nogil=True)
def _mix(key):
    z = np.uint64(key)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


# The TEN loop and the table operations it calls borrow the arrays that ten_timesteps owns and
# allocate nothing: they are compiled without numba's reference counting (``_nrt=False``, as
# the event loop below), which otherwise costs an atomic increment and decrement of the count of
# every array passed to a call (the three table arrays on every page looked up). The table grows
# outside that loop: the loop stops before a hop whose pages have no cells, ten_timesteps grows
# the table (:func:`_grown`, with the runtime) and the loop resumes at that hop. The table
# operations are inlined into the loop (a call passes each array as a structure of seven words).
_lean = njit(cache=True, nogil=True, _nrt=False)
_lean_inlined = njit(cache=True, nogil=True, _nrt=False, inline='always')


@_lean_inlined
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


@_lean_inlined
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


@_lean_inlined
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


@_lean_inlined
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


@_lean_inlined
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


@_lean_inlined
def _missing(keys, masks, fill, slots, slot, t, k):
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
def _grown(keys, masks, skips, fill, key, pages, dense_cells):
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


@_lean_inlined
def _occupy(keys, masks, skips, fill, slots, slot, t, k):
    """Mark ``t .. t + k - 1`` busy on one slot (the table has a cell for each page of them:
    :func:`_missing`)."""
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


# Where the TEN loop stands (:func:`_ten_loop`): the step, send and hop (of its route) it works
# on, the hop's ready timestep and the latency timesteps so far, the last arrival and its latency,
# and, when it stopped for room, the pages the hop lacks and the key of its last page.
TS_STEP, TS_SEND, TS_HOP, TS_T, TS_LAT, TS_LAST, TS_LAST_LAT, TS_PAGES, TS_KEY = range(9)


@njit(cache=True, nogil=True)
def ten_timesteps(bounds, r, rptr, rlinks, chunk, lo, hi, denom, chunk_bytes, largest, alpha, per_link_bw, delay,
                  latency, timestep, shrink, slot_ptr, exact, dptr, ditems, ga, g_in, groups, dense_cells):
    """Last arrival timestep of ASAP dispatch with back-filling (Won et al., TACOS, 2023, Sections IV-A, IV-C).

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
    widest = 0
    if not exact:
        for s in range(len(bounds) - 1):
            widest = max(widest, bounds[s + 1] - bounds[s])
    arrival = np.zeros(len(r) if exact else 0, np.int64)
    step_arrival = np.zeros(widest, np.int64)
    gmax = np.zeros(groups, np.int64)
    keys = np.zeros(0, np.int64)  # dense pages (page * slots + slot) while they fit in dense_cells
    masks = np.zeros(0, np.uint64)
    skips = np.zeros(0, np.int64)
    fill = np.zeros(1, np.int64)
    state = np.zeros(9, np.int64)
    while not _ten_loop(state, keys, masks, skips, fill, arrival, step_arrival, gmax, bounds, r, rptr, rlinks, chunk,
                        lo, hi, denom, chunk_bytes, largest, alpha, per_link_bw, delay, latency, timestep, shrink,
                        slot_ptr, exact, dptr, ditems, ga, g_in):
        keys, masks, skips = _grown(keys, masks, skips, fill, state[TS_KEY], state[TS_PAGES], dense_cells)
    return state[TS_LAST], state[TS_LAST_LAT]


@_lean
def _ten_loop(state, keys, masks, skips, fill, arrival, step_arrival, gmax, bounds, r, rptr, rlinks, chunk, lo, hi,
              denom, chunk_bytes, largest, alpha, per_link_bw, delay, latency, timestep, shrink, slot_ptr, exact, dptr,
              ditems, ga, g_in):
    """The loop of :func:`ten_timesteps` from where ``state`` stands (``TS_*``): True when
    every send is placed, False when it stopped before occupying a hop's pages that the table
    has no cells for (``state`` says where, and how many pages); nothing of that hop is marked
    yet, so placing it again after the table grew finds the same start."""
    slots = slot_ptr[-1]
    tol = 1e-12 * abs(largest)
    s, i, hop = state[TS_STEP], state[TS_SEND], state[TS_HOP]
    last, last_lat = state[TS_LAST], state[TS_LAST_LAT]
    while s < len(bounds) - 1:
        b0, b1 = bounds[s], bounds[s + 1]
        while i < b1:
            if hop == 0:
                ready = 0
                if exact:
                    for q in range(dptr[i], dptr[i + 1]):
                        ready = max(ready, arrival[ditems[q]])
                elif g_in[i] >= 0:
                    ready = gmax[g_in[i]]
                t, lat = ready + 1, 0
            else:
                t, lat = state[TS_T], state[TS_LAT]
            nbytes = (hi[i] - lo[i]) / denom * chunk_bytes[chunk[i]]
            whole = abs(nbytes - largest) <= tol
            route = r[i]
            for h in range(rptr[route] + hop, rptr[route + 1]):
                link = rlinks[h]
                if whole:
                    k = delay[link]
                else:
                    k = max(1, np.int64(math.ceil((alpha[link] + nbytes / per_link_bw[link]) / timestep * shrink)))
                best = -1
                best_slot = slot_ptr[link]
                for slot in range(slot_ptr[link], slot_ptr[link + 1]):
                    start = _place(keys, masks, skips, slots, slot, t, k)
                    if best < 0 or start < best:
                        best, best_slot = start, slot
                pages = _missing(keys, masks, fill, slots, best_slot, best, k)
                if pages > 0:
                    state[TS_STEP], state[TS_SEND], state[TS_HOP] = s, i, h - rptr[route]
                    state[TS_T], state[TS_LAT], state[TS_LAST], state[TS_LAST_LAT] = t, lat, last, last_lat
                    state[TS_PAGES], state[TS_KEY] = pages, ((best + k - 1) >> 6) * slots + best_slot
                    return False
                _occupy(keys, masks, skips, fill, slots, best_slot, best, k)
                t = best + k + latency[link]
                lat += latency[link]
            hop = 0
            if exact:
                arrival[i] = t - 1
            else:
                step_arrival[i - b0] = t - 1
            if t - 1 > last:
                last, last_lat = t - 1, lat
            i += 1
        if not exact:  # this step's arrivals become visible to later steps
            for q in range(b0, b1):
                gmax[ga[q]] = max(gmax[ga[q]], step_arrival[q - b0])
        s += 1
    state[TS_LAST], state[TS_LAST_LAT] = last, last_lat
    return True


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
# function receives costs an atomic increment and decrement of its count (the queue's seven
# arrays on every push and take): measured at about 40% of the loop, and each one a barrier that
# keeps the loop's reads from overlapping. A function called from the loop inherits the option.
_borrowing = njit(cache=True, nogil=True, _nrt=False)
_inlined = njit(cache=True, nogil=True, _nrt=False, inline='always')
LATER_HOP = np.int64(1) << 31  # flag of a queued word: the send's second or later hop (hop ids are under 2 ** 31)
AHEAD = 16  # entries prefetched ahead of the one taken (the event loop) or written (its tables)

# One record per send, in step order (the order the loop takes equal times in), holding all that
# the loop reads and writes for it, so that taking a send costs one cache line: piece bytes, route,
# its next hop (``at``, its place in the route links), the decision of its first hop's start
# (``ev``) and what its arrival releases. An arrival of a group with other members updates that
# group's block (``group`` >= 0: the block's first granule, ``start`` the arrival's place among
# the group's members); otherwise (``group`` -1) it releases rows ``start .. end`` of one table:
# its dependents (exact pairs) or the sends waiting for its group (a group of one arrival: every
# send reading it waits for that arrival alone).
EVENT = np.dtype([("nbytes", np.float64), ("route", np.int32), ("group", np.int32), ("start", np.int32),
                  ("end", np.int32), ("ev", np.int32), ("at", np.int32)], align=True)

# A group of several arrivals (the partial results of a reduction reaching one node, a chunk
# received more than once) keeps what its arrivals read and write in one *block* of 8-byte words,
# so that an arrival touches one or two adjacent cache lines where separate tables (its member
# place, the group's row, the group's waiting rows) cost three misses at scattered places: the
# arrivals of a group come at scattered times, so its state is never in cache when they do.
# Blocks start on 32-byte granules of one float64 array (``blocks``; ``block_ints`` is the same
# memory as int32) and hold, from the block's first word ``u``:
#   words u .. u + 3, the header: int32 slots BLOCK_FRONTIER (arrivals in the finished prefix),
#       BLOCK_PENDING (arrivals beyond it), BLOCK_NEXT (the word of the next waiting row),
#       BLOCK_SLOTS (the word of the first member slot, past the last waiting row), BLOCK_TOP_FROM
#       (the hop of the prefix's latest arrival) and BLOCK_MEMBERS, and the float64 BLOCK_TOP (that
#       arrival's time, the running maximum over the prefix);
#   words u + 4 .. u + slots - 1, the waiting rows: int32 pairs (send, p), by p;
#   words u + slots .. u + slots + 2 * members - 1, the member slots: a member that came before the
#       prefix reached it keeps its arrival time (float64) and hop (the next word's first int32;
#       -1 until it arrives) there.
# Word offsets in the header are relative to ``u``.
BLOCK_FRONTIER, BLOCK_PENDING, BLOCK_NEXT, BLOCK_SLOTS, BLOCK_TOP_FROM, BLOCK_MEMBERS = 0, 1, 2, 3, 6, 7
BLOCK_TOP = 2  # a float64 word
BLOCK_HEADER = 4  # words
GRANULE = 4  # words per granule: a block starts at word 4 * rec.group


@njit(cache=True, nogil=True)
def event_records(chunk, lo, hi, denom, chunk_bytes, r, rptr):
    """One :data:`EVENT` record per position: piece bytes ``(hi - lo) / denom *
    chunk_bytes[chunk]``, route ``r``, its first hop (``at``: the hop's place in the route
    links, ``rptr[r]``), nothing released yet (rows ``0 .. 0``)."""
    n = len(chunk)
    rec = np.empty(n, EVENT)
    huge_pages(rec)
    for q in range(n):
        x = rec[q]
        x.nbytes = (hi[q] - lo[q]) / denom * chunk_bytes[chunk[q]]
        x.route = r[q]
        x.group = -1
        x.start = 0
        x.end = 0
        x.ev = -1
        x.at = rptr[r[q]]
    return rec


@njit(cache=True, nogil=True)
def release_dependents(rec, dptr):
    """Exact pairs: the arrival of position ``q`` releases rows ``dptr[q] .. dptr[q + 1]``."""
    for q in range(len(rec)):
        rec[q].start = dptr[q]
        rec[q].end = dptr[q + 1]


@njit(cache=True, nogil=True)
def release_groups(rec, order, gstart, g_in, p, single):
    """Group prefixes: ``(blocks, block_ints, waiting)`` and every record's release.

    ``order[gstart[g]:gstart[g + 1]]`` are the positions of group ``g`` in step order. A group
    of one arrival (when ``single``) gets no block: its arrival releases the group's waiting rows
    ``(send, p)`` in ``waiting`` itself (its record's ``start .. end``). Every other group gets
    a block (the layout above: header, its waiting rows by ``p``, one slot per arrival) and its
    members' records name the block and their place in it. A send reading a group waits for its
    first ``p`` arrivals (Deps of :mod:`collsynth.tens.dependencies`); rows are in position order
    within a group, so ``p`` ascends. One counting pass over the readers (their groups' row
    counts), one over the groups (where each group's rows go), one writing the rows there
    directly and one over the groups writing headers, slots and records.
    """
    G = len(gstart) - 1
    count = np.empty(G, np.int32)
    huge_pages(count)
    count[:] = 0
    for q in range(len(g_in)):
        if g_in[q] >= 0:
            count[g_in[q]] += 1
    at = np.empty(G, np.int64)  # where group g's next row goes: word of its block, or ~row of waiting
    huge_pages(at)
    rows, words = 0, 0
    for g in range(G):
        size = gstart[g + 1] - gstart[g]
        if single and size == 1:
            at[g] = ~rows
            rows += count[g]
        else:
            at[g] = words + BLOCK_HEADER
            words += _block_words(count[g], size)
    if words // GRANULE >= np.iinfo(np.int32).max:
        raise ValueError("too many group prefixes for 32-bit block granules")
    blocks = np.empty(words)
    huge_pages(blocks)
    block_ints = blocks.view(np.int32)
    waiting = np.empty((rows, 2), np.int32)
    huge_pages(waiting)
    _write_rows(g_in, p, at, block_ints, waiting)
    rows, words = 0, 0
    for g in range(G):
        size = gstart[g + 1] - gstart[g]
        for j in range(gstart[g] + AHEAD, min(gstart[g + 1] + AHEAD, len(order))):  # records AHEAD members on
            prefetch_write(rec, order[j])
        if single and size == 1:
            q = order[gstart[g]]
            rec[q].start = rows
            rec[q].end = rows + count[g]
            rows += count[g]
            continue
        _block_header(blocks, block_ints, words, count[g], size)
        for x in range(size):
            q = order[gstart[g] + x]
            rec[q].group = words // GRANULE
            rec[q].start = x
        words += _block_words(count[g], size)
    return blocks, block_ints, waiting


@njit(cache=True, nogil=True, inline='always')
def _block_words(readers, members):
    """Words of a block: header, waiting rows, member slots, to a whole granule."""
    words = BLOCK_HEADER + readers + 2 * members
    return (words + GRANULE - 1) // GRANULE * GRANULE


@njit(cache=True, nogil=True, inline='always')
def _block_header(blocks, block_ints, u, readers, members):
    """An empty prefix for the block at word ``u``: no arrival yet, every waiting row to come."""
    h = 2 * u
    slots = BLOCK_HEADER + readers
    block_ints[h + BLOCK_FRONTIER] = 0
    block_ints[h + BLOCK_PENDING] = 0
    block_ints[h + BLOCK_NEXT] = BLOCK_HEADER
    block_ints[h + BLOCK_SLOTS] = slots
    blocks[u + BLOCK_TOP] = 0.0
    block_ints[h + BLOCK_TOP_FROM] = -1
    block_ints[h + BLOCK_MEMBERS] = members
    for x in range(members):
        block_ints[2 * (u + slots + 2 * x + 1)] = -1


@njit(cache=True, nogil=True)
def _write_rows(g_in, p, at, block_ints, waiting):
    """Every reader's row ``(send, p)`` at its group's fill pointer ``at`` (a block word, or
    ``~row`` of ``waiting``), in position order; the pointers' and the rows' lines are prefetched
    ahead."""
    n = len(g_in)
    for q in range(n):
        if q + 2 * AHEAD < n and g_in[q + 2 * AHEAD] >= 0:  # the fill pointers, then the rows they point at
            prefetch_write(at, g_in[q + 2 * AHEAD])
        if q + AHEAD < n and g_in[q + AHEAD] >= 0:
            w = at[g_in[q + AHEAD]]
            if w >= 0:
                prefetch_write(block_ints, 2 * w)
            else:
                prefetch_write(waiting, ~w)
        g = g_in[q]
        if g >= 0:
            w = at[g]
            if w >= 0:
                block_ints[2 * w] = q
                block_ints[2 * w + 1] = p[q]
            else:
                waiting[~w, 0] = q
                waiting[~w, 1] = p[q]
            at[g] = w + 1 if w >= 0 else w - 1


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
        _lheap_push(lheap, qs[QS_LEVELS], tb, slot)
        qs[QS_LEVELS] += 1
    qs[QS_LAST_TIME], qs[QS_LAST_SLOT] = tb, slot
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


@_borrowing
def _take_level(Q):
    """The earliest level becomes the run: its entries, sorted (:func:`_sort_run`); its rows and
    slot are freed. Called once per level."""
    qs, lmap, slots, lheap, rows, run = Q[0], Q[1], Q[2], Q[3], Q[4], Q[5]
    tb, slot = lheap[0, 0], lheap[0, 1]
    _lheap_pop(lheap, qs[QS_LEVELS])
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


@_borrowing
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


@_inlined
def _scatter_digit(source, target, count, least, d, counts):
    """One stable pass of :func:`_sort_run`: ``source[:count]`` into ``target`` by digit ``d``
    (``counts[d * RADIX:]`` are the buckets' starts, advanced as they fill)."""
    for i in range(count):
        word = source[i]
        b = d * RADIX + ((((word >> 32) - least) >> (8 * d)) & (RADIX - 1))
        target[counts[b]] = word
        counts[b] += 1


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


@_inlined
def _read_ahead(Q, rec, marked, ditems, need, ready, ready_from, blocks, block_ints, waiting, exact):
    """Prefetch (:mod:`collsynth.tens.prefetch`) what the event loop will need for the entries
    of the run ``AHEAD`` places on (their records), half as far (their hop's link, and the first
    row their arrival releases or their group block's first two lines) and a quarter as far (a
    block's next waiting row, read from its header, or, for a last hop, its first dependents'
    counts), so that it is in cache when they are taken: the run is
    sorted by position, but its positions are strided over the tables, which the loop would
    otherwise wait for one miss at a time. Prefetches, not loads: a load read ahead holds up the
    loop's instructions behind it until its line arrives."""
    qs, run = Q[0], Q[5]
    c, end = qs[QS_CURSOR], qs[QS_LEN]
    if c + AHEAD < end:
        prefetch(rec, run[c + AHEAD] >> 32)
    if c + AHEAD // 2 < end:
        x = rec[run[c + AHEAD // 2] >> 32]
        prefetch(marked, x.at)
        if x.group >= 0:
            prefetch(blocks, GRANULE * np.int64(x.group))
        elif x.start < x.end:
            if exact:
                prefetch(ditems, x.start)
            else:
                prefetch(waiting, x.start)
    if c + AHEAD // 4 < end:
        x = rec[run[c + AHEAD // 4] >> 32]
        if exact and x.group < 0 and marked[x.at] < 0:
            for y in range(x.start, min(x.end, x.start + 2)):
                prefetch_write(ready, ditems[y])
                prefetch_write(ready_from, ditems[y])
                prefetch_write(need, ditems[y])
        if x.group >= 0:  # the header came in at half the distance: the next waiting row and slot
            u = GRANULE * np.int64(x.group)
            prefetch(blocks, u + block_ints[2 * u + BLOCK_NEXT])
            f = block_ints[2 * u + BLOCK_FRONTIER]
            if x.start != f or block_ints[2 * u + BLOCK_PENDING] > 0:
                prefetch(blocks, u + block_ints[2 * u + BLOCK_SLOTS] + 2 * (x.start + (x.start == f)))


@njit(cache=True, nogil=True)
def _hop_link(e, rec, xlink, rptr, marked):
    """Link pair of hop ``e``: the first hop of position ``e`` (``e < len(rec)``; ``marked``: the
    route links of :func:`marked_links`), else the later hop served ``e - len(rec)``-th."""
    if e >= len(rec):
        return xlink[e - len(rec)]
    link = marked[rptr[rec[e].route]]
    return link if link >= 0 else ~link


@_inlined
def _independent(q, exact, need, g_in):
    return (exact and need[q] == 0) or (not exact and g_in[q] < 0)


@njit(cache=True, nogil=True)
def marked_links(rptr, rlinks):
    """A copy of the route links ``rlinks`` (route ``k``'s at ``rptr[k]:rptr[k + 1]``) in which
    each route's last link is stored as ``~link``, so that :func:`event_times` reads a hop's
    link and whether it is the route's last in one word."""
    marked = rlinks.copy()
    for k in range(len(rptr) - 1):
        if rptr[k + 1] > rptr[k]:
            marked[rptr[k + 1] - 1] = ~marked[rptr[k + 1] - 1]
    return marked


@njit(cache=True, nogil=True)
def event_times(rec, rptr, marked, hops, bandwidth, alpha, exact, need, ditems, g_in, blocks, block_ints, waiting,
                levels):
    """Congestion-aware event simulation: ``(last arrival, critical-path latency, hops served)``.

    ``rec`` (one :data:`EVENT` record per position, in step order) is read once per hop. Ready
    hops are taken in ``(ready time, position)`` order (the queue above; the sends that need
    nothing are a stream at time 0 in position order, never queued) and served on their link
    (FIFO: a hop starts when both it and the link are ready). A send's first hop is ready when
    its data has arrived: every exact dependency (``need`` counts; the arrival of ``j`` releases
    ``ditems[rec[j].start:rec[j].end]``), or the first ``p`` arrivals of group ``g_in`` (rows
    ``waiting[w] = (send, p)``, sorted by ``p`` within a group; a group of one arrival is
    released by it directly, any other keeps its arrivals' times in ``members`` and its frontier
    and waiting range in its ``groups`` row). Hop ids: a send's first hop is its position, every
    later hop ``n + k`` for the ``k``-th such hop served (its link in ``xlink``). ``ev`` of a hop
    (``rec[q].ev`` for a first hop, else ``xev``) is the hop that decided its start: ``>= -1`` its
    data, ``<= -2`` (encoded ``-2 - hop``) the link's previous message. ``hops``: the total.
    ``levels``: time levels the queue keeps apart at once (:func:`queue_new`). ``marked``: the
    route links as :func:`marked_links` stores them.
    """
    n = len(rec)
    xev = np.empty(hops - n, np.int32)
    xlink = np.empty(hops - n, np.int32)
    huge_pages(xev)
    huge_pages(xlink)
    xev[:] = -1
    free = np.zeros(len(bandwidth))
    last_on = np.full(len(bandwidth), -1, np.int32)
    ready = np.zeros(n if exact else 0)
    ready_from = np.full(n if exact else 0, -1, np.int32)
    fbuf = np.zeros(1)
    ibuf = fbuf.view(np.int64)
    Q = queue_new(n, levels)
    best_t, best_e, served = _event_loop(rec, marked, bandwidth, alpha, exact, need, ditems, g_in, blocks,
                                         block_ints, waiting, xev, xlink, free, last_on, ready, ready_from, fbuf, ibuf,
                                         Q)
    return best_t, _critical_latency(best_e, rec, xev, xlink, rptr, marked, alpha), served


@_borrowing
def _event_loop(rec, marked, bandwidth, alpha, exact, need, ditems, g_in, blocks, block_ints, waiting, xev,
                xlink, free, last_on, ready, ready_from, fbuf, ibuf, Q):
    """The loop of :func:`event_times` on the arrays it allocated: ``(last arrival, its hop,
    hops served)``. ``marked``: the route links, each route's last one as ``~link``. A queued
    word is ``(send << 32) | (hop that made it ready + 1)``, with :data:`LATER_HOP` set for a
    send's second and later hops."""
    n = len(rec)
    stream = 0  # sends that need nothing: taken at time 0 in step order, before any later time
    best_t, best_e, served, later = 0.0, -1, 0, 0
    while True:
        while stream < n and not _independent(stream, exact, need, g_in):
            stream += 1
        where, tb, word = queue_first(Q)
        if stream < n and (where == 0 or tb > 0 or (np.int64(stream) << 32) < word):
            t, q, pred, first = 0.0, np.int64(stream), np.int64(-1), True
            stream += 1
        elif where > 0:
            ibuf[0] = tb
            t = fbuf[0]
            q, pred, first = word >> 32, (word & (LATER_HOP - 1)) - 1, word & LATER_HOP == 0
            queue_drop(Q, where)
            if where == 1:
                _read_ahead(Q, rec, marked, ditems, need, ready, ready_from, blocks, block_ints, waiting, exact)
        else:
            break
        served += 1
        x = rec[q]
        link = marked[x.at]
        last = link < 0
        if last:
            link = ~link
        fl = free[link]
        start = fl if fl > t else t
        decided = -2 - last_on[link] if fl > t else pred
        if first:
            e = q
            x.ev = decided
        else:
            e = n + later
            xev[later] = decided
            xlink[later] = link
            later += 1
        fl = start + x.nbytes / bandwidth[link]
        free[link] = fl
        last_on[link] = e
        arr = fl + alpha[link]
        fbuf[0] = arr
        if not last:
            x.at += 1
            queue_push(Q, ibuf[0], (q << 32) | LATER_HOP | (e + 1))
            continue
        if arr > best_t or best_e < 0:
            best_t, best_e = arr, e
        if x.group >= 0:
            _arrive_in_block(Q, GRANULE * np.int64(x.group), x.start, arr, e, blocks, block_ints, fbuf, ibuf)
        elif exact:
            _release_dependents(Q, x.start, x.end, arr, e, ditems, need, ready, ready_from, fbuf, ibuf)
        else:
            for w in range(x.start, x.end):  # a group of one arrival: its waiting sends are ready
                queue_push(Q, ibuf[0], (np.int64(waiting[w, 0]) << 32) | (e + 1))
    return best_t, best_e, served


@_inlined
def _release_dependents(Q, lo, hi, arr, e, ditems, need, ready, ready_from, fbuf, ibuf):
    """A send arrived at ``arr`` (hop ``e``) and releases ``ditems[lo:hi]``: each dependent's
    ready time is the latest of its data, and a dependent whose last need this was is queued."""
    for x in range(lo, hi):
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
def _arrive_in_block(Q, u, place, arr, e, blocks, block_ints, fbuf, ibuf):
    """The arrival at member ``place`` of the group block at word ``u`` came at ``arr`` (hop
    ``e``). Beyond the finished prefix it waits in its slot; otherwise it extends the prefix,
    with every arrival waiting in the slots after it, keeping the running maximum of their
    times (a later arrival wins ties, as the prefix's latest), and each send waiting for a
    prefix as long as the new one is queued at that prefix's maximum."""
    h = 2 * u
    f = block_ints[h + BLOCK_FRONTIER]
    slots = u + block_ints[h + BLOCK_SLOTS]
    if place != f:
        blocks[slots + 2 * place] = arr
        block_ints[2 * (slots + 2 * place + 1)] = e
        block_ints[h + BLOCK_PENDING] += 1
        return
    pending = block_ints[h + BLOCK_PENDING]
    top, top_from = blocks[u + BLOCK_TOP], np.int64(block_ints[h + BLOCK_TOP_FROM])
    w = u + block_ints[h + BLOCK_NEXT]
    val, frm = arr, e
    while True:
        if f == 0 or val >= top:
            top, top_from = val, frm
        f += 1
        while w < slots and block_ints[2 * w + 1] <= f:
            fbuf[0] = top
            queue_push(Q, ibuf[0], (np.int64(block_ints[2 * w]) << 32) | (top_from + 1))
            w += 1
        if pending == 0 or block_ints[2 * (slots + 2 * f + 1)] < 0:
            break
        val, frm = blocks[slots + 2 * f], np.int64(block_ints[2 * (slots + 2 * f + 1)])
        pending -= 1
    block_ints[h + BLOCK_FRONTIER] = f
    block_ints[h + BLOCK_PENDING] = pending
    block_ints[h + BLOCK_NEXT] = w - u
    blocks[u + BLOCK_TOP] = top
    block_ints[h + BLOCK_TOP_FROM] = top_from


@njit(cache=True, nogil=True)
def _critical_latency(e, rec, xev, xlink, rptr, marked, alpha):
    """Latency on the critical path ending at hop ``e``: its own alpha and every data edge's.
    The path visits each hop at most once (it goes back in time), so a walk longer than all hops
    is an inconsistent record of deciding hops: an error, not an endless loop."""
    n = len(rec)
    T_L = 0.0
    if e >= 0:
        T_L = alpha[_hop_link(e, rec, xlink, rptr, marked)]
    for _ in range(n + len(xev) + 1):
        if e < 0:
            return T_L
        prev = rec[e].ev if e < n else xev[e - n]
        if prev >= -1:
            if prev >= 0:
                T_L += alpha[_hop_link(prev, rec, xlink, rptr, marked)]
            e = prev
        else:
            e = -2 - prev
    raise ValueError("event model: the critical path's deciding hops form a cycle")
