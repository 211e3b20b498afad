"""Compiled loop of the TEN cost model (:mod:`collsynth.tens.cost` holds its definition).

It streams over the sends in step order and walks every send's route as it goes
(:mod:`collsynth.tens.routing`), placing each hop on the occupancy table of
:mod:`collsynth.tens.page_table`. The piece size in bytes is recomputed where it is used, with
the same floating-point operations as the vectorised definitions.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .compiled import borrowing, borrowing_inlined
from .page_table import grown, missing, occupy, place

# Where the TEN loop stands (:func:`_ten_loop`): the step, send and hop (of its route) it works
# on, the hop's ready timestep and the latency timesteps so far, the last arrival and its latency,
# and, when it stopped for room, the pages the hop lacks and the key of its last page.
TS_STEP, TS_SEND, TS_HOP, TS_T, TS_LAT, TS_LAST, TS_LAST_LAT, TS_PAGES, TS_KEY = range(9)


@njit(cache=True, nogil=True)
def ten_timesteps(bounds, r, rptr, rlinks, chunk, lo, hi, denom, chunk_bytes, largest, alpha, per_link_bw, delay,
                  latency, timestep, shrink, slot_ptr, exact, dptr, ditems, ga, g_in, groups, dense_cells, before):
    """Last arrival timestep of ASAP dispatch with back-filling (Won et al., TACOS, 2023, Sections IV-A, IV-C).

    Sends in step order (``bounds`` delimit the steps); a send is ready one timestep after the
    latest arrival it depends on (exact pairs: the sends ``ditems[dptr[i]:dptr[i + 1]]``; or the
    latest arrival of its group ``g_in`` over the steps already finished). Each hop takes the
    TEN delay of its link for a whole largest chunk, else
    ``max(1, ceil(cost / timestep * shrink))`` timesteps (``cost = alpha + bytes / bandwidth``;
    pass ``alpha`` 0 for a pipelined latency), on the parallel link of its pair that can start
    it first, and reaches the next node ``latency[link]`` timesteps after it leaves the link.
    Occupancy is a dense table of at most ``dense_cells`` cells, then a hash table (:mod:`collsynth.tens.page_table`).
    Returns the last arrival timestep and the latency timesteps of the hops of the send that
    arrives then. ``before`` (empty, or one entry per send): the earlier send whose start this
    one's first hop waits for (a declared program order on the link), -1 for none.
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
    starts = np.zeros(len(before), np.int64)  # first-hop start of every send, for the sends waiting on it
    while not _ten_loop(state, keys, masks, skips, fill, arrival, step_arrival, gmax, bounds, r, rptr, rlinks, chunk,
                        lo, hi, denom, chunk_bytes, largest, alpha, per_link_bw, delay, latency, timestep, shrink,
                        slot_ptr, exact, dptr, ditems, ga, g_in, before, starts):
        keys, masks, skips = grown(keys, masks, skips, fill, state[TS_KEY], state[TS_PAGES], dense_cells)
    return state[TS_LAST], state[TS_LAST_LAT]


@borrowing
def _ten_loop(state, keys, masks, skips, fill, arrival, step_arrival, gmax, bounds, r, rptr, rlinks, chunk, lo, hi,
              denom, chunk_bytes, largest, alpha, per_link_bw, delay, latency, timestep, shrink, slot_ptr, exact, dptr,
              ditems, ga, g_in, before, starts):
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
                t, lat = _ready(i, exact, dptr, ditems, arrival, g_in, gmax) + 1, 0
                if len(before) > 0 and before[i] >= 0:
                    t = max(t, starts[before[i]])
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
                    start = place(keys, masks, skips, slots, slot, t, k)
                    if best < 0 or start < best:
                        best, best_slot = start, slot
                pages = missing(keys, masks, fill, slots, best_slot, best, k)
                if pages > 0:
                    state[TS_STEP], state[TS_SEND], state[TS_HOP] = s, i, h - rptr[route]
                    state[TS_T], state[TS_LAT], state[TS_LAST], state[TS_LAST_LAT] = t, lat, last, last_lat
                    state[TS_PAGES], state[TS_KEY] = pages, ((best + k - 1) >> 6) * slots + best_slot
                    return False
                occupy(keys, masks, skips, fill, slots, best_slot, best, k)
                if h == rptr[route] and len(before) > 0:
                    starts[i] = best
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


@borrowing_inlined
def _ready(i, exact, dptr, ditems, arrival, g_in, gmax):
    """The latest arrival timestep send ``i`` waits for (0 if none): of its exact dependencies
    ``ditems[dptr[i]:dptr[i + 1]]``, else of its group ``g_in[i]`` over the finished steps."""
    ready = 0
    if exact:
        for q in range(dptr[i], dptr[i + 1]):
            ready = max(ready, arrival[ditems[q]])
    elif g_in[i] >= 0:
        ready = gmax[g_in[i]]
    return ready
