"""Compiled loops of the three cost models (:mod:`collsynth.tens.cost` holds their definitions).

Each kernel streams over the sends in step order and walks every send's route as it goes
(:mod:`collsynth.tens.routing`): nothing is materialised per hop except what the event model's
critical path needs (its predecessor per hop). The piece size in bytes,
``(hi - lo) / denom * chunk_bytes[chunk]``, is recomputed where it is used, with the same
floating-point operations as the vectorised definitions, so results do not depend on the
evaluation order.

Occupancy of the TEN model: every parallel link ("slot") keeps its busy timesteps as 64-bit
pages in one open-addressing hash table keyed by ``(page, slot)``; a full page points past
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
def sync_steps(order, bounds, r, rptr, rlinks, rlat, chunk, lo, hi, denom, chunk_bytes, bandwidth, alpha,
               unit_mult):
    """Per used step: ``(latency, bandwidth time, coupled time, max chunk units)``.

    Loads per link pair of one step are summed in send-index order; the step's bandwidth time
    is ``max_l load_l / bandwidth_l``, its coupled time ``max_l (load_l / bandwidth_l + alpha_l)``,
    its latency the largest route latency of its sends and its units
    ``max_l units_l * unit_mult_l`` (piece numerators, exact integers).
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
        for x in range(bounds[k], bounds[k + 1]):
            i = order[x]
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
    """Index of ``key`` in the table, or of the empty cell where it would go."""
    m = np.uint64(len(keys) - 1)
    h = np.int64(_mix(key) & m)
    while keys[h] != -1 and keys[h] != key:
        h = (h + 1) & (len(keys) - 1)
    return h


@njit(cache=True, nogil=True)
def _rehash(keys, masks, skips):
    cap = 2 * len(keys)
    k2 = np.full(cap, -1, np.int64)
    m2 = np.zeros(cap, np.uint64)
    s2 = np.zeros(cap, np.int64)
    for h in range(len(keys)):
        if keys[h] != -1:
            g = _find(k2, keys[h])
            k2[g] = keys[h]
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
        if keys[h] == -1:
            return (page << 6) + bit
        m = masks[h]
        free = ~m & (ALL << np.uint64(bit))
        if free != np.uint64(0):
            return (page << 6) + _ctz(free)
        if m == ALL:  # follow the full page's pointer, halving the path
            nxt = skips[h]
            g = _find(keys, nxt * slots + slot)
            if keys[g] != -1 and masks[g] == ALL:
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
        if keys[h] != -1:
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
def _occupy(keys, masks, skips, fill, slots, slot, t, k):
    """Mark ``t .. t + k - 1`` busy on one slot; returns the (possibly grown) table."""
    a, b = t, t + k
    while a < b:
        page = a >> 6
        bit = a & 63
        end = min(64, bit + (b - a))
        key = page * slots + slot
        h = _find(keys, key)
        if keys[h] == -1:
            if 2 * (fill[0] + 1) > len(keys):
                keys, masks, skips = _rehash(keys, masks, skips)
                h = _find(keys, key)
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
def ten_timesteps(order, bounds, r, rptr, rlinks, chunk, lo, hi, denom, chunk_bytes, largest, alpha, per_link_bw,
                  delay, timestep, shrink, slot_ptr, exact, dptr, ditems, ga, g_in, groups):
    """Last arrival timestep of ASAP dispatch with back-filling (TACOS TEN timesteps).

    Steps in order, sends of a step in index order; a send is ready one timestep after the
    latest arrival it depends on (exact pairs ``dptr``/``ditems``, or the latest arrival of its
    group ``g_in`` over the steps already finished). Each hop takes the TEN delay of its link
    for a whole largest chunk, else ``max(1, ceil(cost / timestep * shrink))`` timesteps, on the
    parallel link of its pair that can start it first.
    """
    n = len(order)
    slots = slot_ptr[-1]
    arrival = np.zeros(n, np.int64)
    gmax = np.zeros(groups, np.int64)
    keys = np.full(1024, -1, np.int64)
    masks = np.zeros(1024, np.uint64)
    skips = np.zeros(1024, np.int64)
    fill = np.zeros(1, np.int64)
    tol = 1e-12 * abs(largest)
    last = 0
    for s in range(len(bounds) - 1):
        for x in range(bounds[s], bounds[s + 1]):
            i = order[x]
            ready = 0
            if exact:
                for q in range(dptr[i], dptr[i + 1]):
                    ready = max(ready, arrival[ditems[q]])
            elif g_in[i] >= 0:
                ready = gmax[g_in[i]]
            t = ready + 1
            nbytes = (hi[i] - lo[i]) / denom * chunk_bytes[chunk[i]]
            route = r[i]
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
                keys, masks, skips = _occupy(keys, masks, skips, fill, slots, best_slot, best, k)
                t = best + k
            arrival[i] = t - 1
            last = max(last, t - 1)
        if not exact:
            for x in range(bounds[s], bounds[s + 1]):
                i = order[x]
                gmax[ga[i]] = max(gmax[ga[i]], arrival[i])
    return last


# ---- event: the heap of ready messages ---------------------------------------------------------

@njit(cache=True, nogil=True)
def _heap_grow(ht, hs, hk, hp):
    cap = 2 * len(ht)
    t2 = np.empty(cap, ht.dtype)
    s2 = np.empty(cap, hs.dtype)
    k2 = np.empty(cap, hk.dtype)
    p2 = np.empty(cap, hp.dtype)
    t2[:len(ht)] = ht
    s2[:len(hs)] = hs
    k2[:len(hk)] = hk
    p2[:len(hp)] = hp
    return t2, s2, k2, p2


@njit(cache=True, nogil=True)
def _sift_up(ht, hs, hk, hp, j, t, s, k, p):
    while j > 0:
        parent = (j - 1) >> 1
        if ht[parent] < t or (ht[parent] == t and hs[parent] < s):
            break
        ht[j], hs[j], hk[j], hp[j] = ht[parent], hs[parent], hk[parent], hp[parent]
        j = parent
    ht[j], hs[j], hk[j], hp[j] = t, s, k, p


@njit(cache=True, nogil=True)
def _sift_down(ht, hs, hk, hp, size, t, s, k, p):
    j = 0
    while True:
        c = 2 * j + 1
        if c >= size:
            break
        if c + 1 < size and (ht[c + 1] < ht[c] or (ht[c + 1] == ht[c] and hs[c + 1] < hs[c])):
            c += 1
        if t < ht[c] or (t == ht[c] and s < hs[c]):
            break
        ht[j], hs[j], hk[j], hp[j] = ht[c], hs[c], hk[c], hp[c]
        j = c
    ht[j], hs[j], hk[j], hp[j] = t, s, k, p


@njit(cache=True, nogil=True)
def _hop_link(e, hstart, r, rptr, rlinks):
    """Link pair of hop (event) ``e``: hop ``e - hstart[i]`` of send ``i``."""
    if len(hstart) == 0:
        return rlinks[rptr[r[e]]]
    i = np.searchsorted(hstart, e, side="right") - 1
    return rlinks[rptr[r[i]] + e - hstart[i]]


@njit(cache=True, nogil=True)
def event_times(order, seq, r, rptr, rlinks, hstart, hops, chunk, lo, hi, denom, chunk_bytes, bandwidth, alpha,
                exact, need, dptr, ditems, ga, g_in, p, pos, gstart, w_items, w_ptr):
    """Congestion-aware event simulation: ``(last arrival, critical-path latency, hops served)``.

    A heap of ready hops keyed ``(ready time, position in step order)``; popping one serves it
    on its link (FIFO: it starts when both it and the link are ready). A send's first hop is
    ready when its data has arrived: every exact dependency (``need`` counts, dependents of
    ``j`` in ``ditems[dptr[j]:dptr[j + 1]]``) or the first ``p`` arrivals of group ``g_in``
    (waiting sends of group ``g`` in ``w_items[w_ptr[g]:w_ptr[g + 1]]``, sorted by ``p``).
    Hop ids: ``hstart[i] + k`` (``i`` itself when every send has one hop, ``hstart`` empty).
    """
    n = len(order)
    L = len(bandwidth)
    ev_pred = np.full(hops, -1, np.int32)
    ev_link = np.zeros(hops, np.bool_)
    free = np.zeros(L)
    last_on = np.full(L, -1, np.int32)
    ready = np.zeros(n if exact else 0)
    ready_from = np.full(n if exact else 0, -1, np.int32)
    groups = len(gstart) - 1
    done = np.zeros(0 if exact else n, np.bool_)
    val = np.zeros(0 if exact else n)
    val_from = np.full(0 if exact else n, -1, np.int32)
    frontier = np.zeros(0 if exact else groups, np.int32)
    w_next = np.zeros(0 if exact else groups, np.int64)
    if not exact:
        w_next[:] = w_ptr[:-1]
    cap = 1024
    ht = np.empty(cap)
    hs = np.empty(cap, np.int32)
    hk = np.empty(cap, np.int32)
    hp = np.empty(cap, np.int32)
    size = 0
    for x in range(n):  # sends that need nothing, in step order
        i = order[x]
        if (exact and need[i] == 0) or (not exact and g_in[i] < 0):
            if size == len(ht):
                ht, hs, hk, hp = _heap_grow(ht, hs, hk, hp)
            _sift_up(ht, hs, hk, hp, size, 0.0, x, 0, -1)
            size += 1
    best_t, best_e, served = 0.0, -1, 0
    while size > 0:
        t, sq, k, pred = ht[0], hs[0], hk[0], hp[0]
        size -= 1
        if size > 0:
            _sift_down(ht, hs, hk, hp, size, ht[size], hs[size], hk[size], hp[size])
        served += 1
        i = order[sq]
        route = r[i]
        link = rlinks[rptr[route] + k]
        e = i if len(hstart) == 0 else hstart[i] + k
        fl = free[link]
        if fl > t:
            start = fl
            ev_pred[e] = last_on[link]
            ev_link[e] = True
        else:
            start = t
            ev_pred[e] = pred
        fl = start + ((hi[i] - lo[i]) / denom * chunk_bytes[chunk[i]]) / bandwidth[link]
        free[link] = fl
        last_on[link] = e
        arr = fl + alpha[link]
        if rptr[route] + k + 1 < rptr[route + 1]:
            if size == len(ht):
                ht, hs, hk, hp = _heap_grow(ht, hs, hk, hp)
            _sift_up(ht, hs, hk, hp, size, arr, sq, k + 1, e)
            size += 1
            continue
        if arr > best_t or best_e < 0:
            best_t, best_e = arr, e
        if exact:
            for q in range(dptr[i], dptr[i + 1]):
                d = ditems[q]
                if arr >= ready[d]:
                    ready[d] = arr
                    ready_from[d] = e
                need[d] -= 1
                if need[d] == 0:
                    if size == len(ht):
                        ht, hs, hk, hp = _heap_grow(ht, hs, hk, hp)
                    _sift_up(ht, hs, hk, hp, size, ready[d], seq[d], 0, ready_from[d])
                    size += 1
            continue
        q = pos[i]
        done[q] = True
        val[q] = arr
        val_from[q] = e
        g = ga[i]
        st0 = gstart[g]
        f = frontier[g]
        while st0 + f < gstart[g + 1] and done[st0 + f]:
            at = st0 + f
            if f > 0 and not val[at] >= val[at - 1]:  # the running maximum of the group's arrivals
                val[at] = val[at - 1]
                val_from[at] = val_from[at - 1]
            f += 1
        frontier[g] = f
        w = w_next[g]
        while w < w_ptr[g + 1] and p[w_items[w]] <= f:
            d = w_items[w]
            at = st0 + p[d] - 1
            if size == len(ht):
                ht, hs, hk, hp = _heap_grow(ht, hs, hk, hp)
            _sift_up(ht, hs, hk, hp, size, val[at], seq[d], 0, val_from[at])
            size += 1
            w += 1
        w_next[g] = w
    # critical path: latency of every data edge on it (the last hop's own alpha included)
    e = best_e
    T_L = 0.0
    if e >= 0:
        T_L = alpha[_hop_link(e, hstart, r, rptr, rlinks)]
    while e >= 0:
        prev = ev_pred[e]
        if prev >= 0 and not ev_link[e]:
            T_L += alpha[_hop_link(prev, hstart, r, rptr, rlinks)]
        e = prev
    return best_t, T_L, served
