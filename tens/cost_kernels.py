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
def ten_timesteps(bounds, r, rptr, rlinks, chunk, lo, hi, denom, chunk_bytes, largest, alpha, per_link_bw, delay,
                  timestep, shrink, slot_ptr, exact, dptr, ditems, ga, g_in, groups):
    """Last arrival timestep of ASAP dispatch with back-filling (TACOS TEN timesteps).

    Sends in step order (``bounds`` delimit the steps); a send is ready one timestep after the
    latest arrival it depends on (exact pairs: the sends ``ditems[dptr[i]:dptr[i + 1]]``; or the
    latest arrival of its group ``g_in`` over the steps already finished). Each hop takes the
    TEN delay of its link for a whole largest chunk, else
    ``max(1, ceil(cost / timestep * shrink))`` timesteps, on the parallel link of its pair that
    can start it first.
    """
    n = len(r)
    slots = slot_ptr[-1]
    arrival = np.zeros(n if exact else 0, np.int64)
    step_arrival = np.zeros(0 if exact else 1, np.int64)
    gmax = np.zeros(groups, np.int64)
    keys = np.full(1024, -1, np.int64)
    masks = np.zeros(1024, np.uint64)
    skips = np.zeros(1024, np.int64)
    fill = np.zeros(1, np.int64)
    tol = 1e-12 * abs(largest)
    last = 0
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
            if exact:
                arrival[i] = t - 1
            else:
                step_arrival[i - b0] = t - 1
            last = max(last, t - 1)
        if not exact:  # this step's arrivals become visible to later steps
            for i in range(b0, b1):
                gmax[ga[i]] = max(gmax[ga[i]], step_arrival[i - b0])
    return last


# ---- event: a monotone radix queue of ready hops ------------------------------------------------
#
# Keys are (time, position in step order). A time's IEEE-754 bits order like the times (times
# are >= 0), and no key ever goes below the last one taken (every new ready time is an arrival
# at or after the current time): what a radix heap needs. Bucket b >= 1 holds the keys whose
# highest bit differing from the last time taken is bit b - 1, in blocks of BLOCK entries
# (appends and whole-bucket drains only: sequential memory); bucket 0, the keys whose time
# equals the last one, is a binary heap on (position << 32 | predecessor + 1).

BLOCK = 64
Q_LAST, Q_FREE, Q_NFREE, Q_HEAP0, Q_SIZE = 0, 1, 2, 3, 4
MEMBER = np.dtype([("val", np.float64), ("frm", np.int32), ("grp", np.int32)], align=True)
GROUP_START, GROUP_FRONTIER, GROUP_NEXT, GROUP_WAIT_END = 0, 1, 2, 3


@njit(cache=True, nogil=True)
def _q_new(blocks):
    nxt = np.arange(1, blocks + 1, dtype=np.int64)
    nxt[-1] = -1
    meta = np.zeros(5, np.int64)
    meta[Q_NFREE] = blocks
    return (np.empty((blocks, BLOCK), np.int64), np.empty((blocks, BLOCK), np.int64), nxt,
            np.full(65, -1, np.int64), np.full(65, -1, np.int64), np.zeros(65, np.int64), np.zeros(65, np.int64),
            np.empty(256, np.int64), meta)


@njit(cache=True, nogil=True)
def _q_reserve(q, blocks, heap0):
    """The queue with at least ``blocks`` free blocks and room for ``heap0`` bucket-0 entries."""
    blk_t, blk_w, nxt, head, tail, fill, count, h0, meta = q
    if meta[Q_NFREE] < blocks:
        nb = len(nxt)
        grow = max(nb, blocks)
        t2 = np.empty((nb + grow, BLOCK), np.int64)
        w2 = np.empty((nb + grow, BLOCK), np.int64)
        t2[:nb] = blk_t
        w2[:nb] = blk_w
        n2 = np.empty(nb + grow, np.int64)
        n2[:nb] = nxt
        n2[nb:] = np.arange(nb + 1, nb + grow + 1)
        n2[-1] = meta[Q_FREE]
        meta[Q_FREE] = nb
        meta[Q_NFREE] += grow
        blk_t, blk_w, nxt = t2, w2, n2
    if len(h0) < heap0:
        h2 = np.empty(max(heap0, 2 * len(h0)), np.int64)
        h2[:meta[Q_HEAP0]] = h0[:meta[Q_HEAP0]]
        h0 = h2
    return (blk_t, blk_w, nxt, head, tail, fill, count, h0, meta)


@njit(cache=True, nogil=True)
def _bit_length(x):
    n = 0
    for shift in (32, 16, 8, 4, 2, 1):
        if x >> shift:
            x >>= shift
            n += shift
    return n + 1


@njit(cache=True, nogil=True)
def _q_put(q, tbits, word):
    """Insert a key; the caller reserved a free block and bucket-0 room."""
    blk_t, blk_w, nxt, head, tail, fill, count, h0, meta = q
    meta[Q_SIZE] += 1
    x = tbits ^ meta[Q_LAST]
    if x == 0:
        j = meta[Q_HEAP0]
        meta[Q_HEAP0] += 1
        while j > 0:
            parent = (j - 1) >> 1
            if h0[parent] < word:
                break
            h0[j] = h0[parent]
            j = parent
        h0[j] = word
        return
    b = _bit_length(x)
    if tail[b] < 0 or fill[b] == BLOCK:
        blk = meta[Q_FREE]
        meta[Q_FREE] = nxt[blk]
        meta[Q_NFREE] -= 1
        nxt[blk] = -1
        if tail[b] < 0:
            head[b] = blk
        else:
            nxt[tail[b]] = blk
        tail[b] = blk
        fill[b] = 0
    blk_t[tail[b], fill[b]] = tbits
    blk_w[tail[b], fill[b]] = word
    fill[b] += 1
    count[b] += 1


@njit(cache=True, nogil=True)
def _q_push(q, tbits, word):
    q = _q_reserve(q, 1, q[8][Q_HEAP0] + 1)
    _q_put(q, tbits, word)
    return q


@njit(cache=True, nogil=True)
def _q_refill(q):
    """Bucket 0 is empty: drain the lowest non-empty bucket into lower ones (its smallest time
    becomes the last time taken)."""
    b = 1
    while q[6][b] == 0:
        b += 1
    q = _q_reserve(q, q[6][b] // BLOCK + 66, q[8][Q_HEAP0] + q[6][b])
    blk_t, blk_w, nxt, head, tail, fill, count, h0, meta = q
    m = np.iinfo(np.int64).max
    blk = head[b]
    while blk >= 0:
        for k in range(fill[b] if blk == tail[b] else BLOCK):
            m = min(m, blk_t[blk, k])
        blk = nxt[blk]
    meta[Q_LAST] = m
    blk, last_blk, last_fill = head[b], tail[b], fill[b]
    meta[Q_SIZE] -= count[b]
    head[b], tail[b], fill[b], count[b] = -1, -1, 0, 0
    while blk >= 0:
        for k in range(last_fill if blk == last_blk else BLOCK):
            _q_put(q, blk_t[blk, k], blk_w[blk, k])
        after = nxt[blk]
        nxt[blk] = meta[Q_FREE]
        meta[Q_FREE] = blk
        meta[Q_NFREE] += 1
        blk = after
    return q


@njit(cache=True, nogil=True)
def _q_take(q):
    """Remove the smallest bucket-0 word (the caller made bucket 0 non-empty)."""
    h0, meta = q[7], q[8]
    top = h0[0]
    meta[Q_HEAP0] -= 1
    meta[Q_SIZE] -= 1
    size = meta[Q_HEAP0]
    last = h0[size]
    j = 0
    while True:
        c = 2 * j + 1
        if c >= size:
            break
        if c + 1 < size and h0[c + 1] < h0[c]:
            c += 1
        if last < h0[c]:
            break
        h0[j] = h0[c]
        j = c
    h0[j] = last
    return top


@njit(cache=True, nogil=True)
def _hop_link(e, hstart, r, rptr, rlinks):
    """Link pair of hop ``e``: hop ``e - hstart[q]`` of send ``q`` (``q = e`` without ``hstart``)."""
    if len(hstart) == 0:
        return rlinks[rptr[r[e]]]
    q = np.searchsorted(hstart, e, side="right") - 1
    return rlinks[rptr[r[q]] + e - hstart[q]]


@njit(cache=True, nogil=True)
def _independent(q, exact, need, g_in):
    return (exact and need[q] == 0) or (not exact and g_in[q] < 0)


@njit(cache=True, nogil=True)
def event_times(r, rptr, rlinks, hstart, hops, nbytes, bandwidth, alpha, exact, need, dptr, ditems,
                g_in, pos, members, groups, waiting):
    """Congestion-aware event simulation: ``(last arrival, critical-path latency, hops served)``.

    Sends in step order (position = tie-break). Ready hops are taken in ``(ready time,
    position)`` order (the radix queue above; the sends that need nothing are a stream at time
    0 in position order) and served on their link (FIFO: a hop starts when both it and the link
    are ready). A send's first hop is ready when its data has arrived: every exact dependency
    (``need`` counts; the dependents of ``j`` are ``ditems[dptr[j]:dptr[j + 1]]``), or the first
    ``p`` arrivals of group ``g_in`` (``waiting[w] = (send, p)`` for ``w`` in the group's waiting
    range, sorted by ``p``; ``members[pos[q]]`` holds arrival ``q``'s time, hop and group, and
    ``groups`` rows the group's start, frontier and waiting range). Hop ids: ``hstart[q] + k``
    (``q`` itself when every send has one hop, ``hstart`` empty). ``ev[e]`` is the hop that
    decided ``e``'s start: ``>= -1`` its data, ``<= -2`` (encoded ``-2 - hop``) the link's
    previous message.
    """
    n = len(r)
    routed = len(hstart) > 0
    ev = np.full(hops, -1, np.int32)
    free = np.zeros(len(bandwidth))
    last_on = np.full(len(bandwidth), -1, np.int32)
    hop_k = np.zeros(n if routed else 0, np.int32)
    ready = np.zeros(n if exact else 0)
    ready_from = np.full(n if exact else 0, -1, np.int32)
    fbuf = np.zeros(1)
    ibuf = fbuf.view(np.int64)
    pq = _q_new(64)
    stream = 0
    best_t, best_e, served = 0.0, -1, 0
    while True:
        while stream < n and not _independent(stream, exact, need, g_in):
            stream += 1
        meta = pq[8]
        if stream < n and meta[Q_LAST] == 0 and (meta[Q_HEAP0] == 0 or (np.int64(stream) << 32) < pq[7][0]):
            t, q, pred = 0.0, np.int64(stream), np.int64(-1)
            stream += 1
        elif meta[Q_SIZE] > 0:
            if meta[Q_HEAP0] == 0:
                pq = _q_refill(pq)
            ibuf[0] = pq[8][Q_LAST]
            t = fbuf[0]
            word = _q_take(pq)
            q, pred = word >> 32, (word & 0xFFFFFFFF) - 1
        else:
            break
        served += 1
        route = r[q]
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
        fl = start + nbytes[q] / bandwidth[link]
        free[link] = fl
        last_on[link] = e
        arr = fl + alpha[link]
        fbuf[0] = arr
        if rptr[route] + k + 1 < rptr[route + 1]:
            hop_k[q] = k + 1
            pq = _q_push(pq, ibuf[0], (q << 32) | (e + 1))
            continue
        if arr > best_t or best_e < 0:
            best_t, best_e = arr, e
        if exact:
            for x in range(dptr[q], dptr[q + 1]):
                d = ditems[x]
                if arr >= ready[d]:
                    ready[d] = arr
                    ready_from[d] = e
                need[d] -= 1
                if need[d] == 0:
                    need[d] = -1  # queued (0 marks the sends of the time-0 stream)
                    fbuf[0] = ready[d]
                    pq = _q_push(pq, ibuf[0], (np.int64(d) << 32) | (ready_from[d] + 1))
            continue
        pq = _release_waiters(pq, q, arr, e, pos, members, groups, waiting, fbuf, ibuf)
    return best_t, _critical_latency(best_e, ev, hstart, r, rptr, rlinks, alpha), served


@njit(cache=True, nogil=True)
def _release_waiters(pq, q, arr, e, pos, members, groups, waiting, fbuf, ibuf):
    """Send ``q`` arrived at ``arr`` (hop ``e``): extend its group's finished prefix (with the
    running maximum of arrival times) and queue the sends waiting for that prefix."""
    at = pos[q]
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
        pq = _q_push(pq, ibuf[0], (np.int64(d) << 32) | (members[at].frm + 1))
        w += 1
    groups[g, GROUP_NEXT] = w
    return pq


@njit(cache=True, nogil=True)
def _critical_latency(e, ev, hstart, r, rptr, rlinks, alpha):
    """Latency on the critical path ending at hop ``e``: its own alpha and every data edge's."""
    T_L = 0.0
    if e >= 0:
        T_L = alpha[_hop_link(e, hstart, r, rptr, rlinks)]
    while e >= 0:
        prev = ev[e]
        if prev >= -1:
            if prev >= 0:
                T_L += alpha[_hop_link(prev, hstart, r, rptr, rlinks)]
            e = prev
        else:
            e = -2 - prev
    return T_L
