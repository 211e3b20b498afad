"""Compiled loop of the event cost model (:mod:`collsynth.tens.cost` holds its definition).

Ready hops are taken from the queue of :mod:`collsynth.tens.event_queue` in (ready time,
position) order and served on their links; the sends' records and the groups' blocks are laid
out by :mod:`collsynth.tens.event_layout`. Nothing is materialised per hop except what the
critical path needs (its deciding hop). The loop and the functions it calls allocate nothing and
only borrow arrays that :func:`event_times` owns (:data:`collsynth.tens.compiled.borrowing`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .compiled import borrowing, borrowing_inlined, first_at_least
from .event_layout import (AHEAD, BLOCK_FRONTIER, BLOCK_MEMBERS, BLOCK_NEXT, BLOCK_PENDING, BLOCK_SLOTS, BLOCK_TOP,
                           BLOCK_TOP_FROM, FREE, GRANULE, member_hop, release_end)
from .event_queue import QS_CURSOR, QS_LEN, queue_drop, queue_first, queue_new, queue_push
from .prefetch import huge_pages, prefetch, prefetch_write

LATER_HOP = np.int64(1) << 31  # flag of a queued word: the send's second or later hop (hop ids are under 2 ** 31)


@borrowing_inlined
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
        elif x.start < release_end(x.group):
            if exact:
                prefetch(ditems, x.start)
            else:
                prefetch(waiting, x.start)
    if c + AHEAD // 4 < end:
        x = rec[run[c + AHEAD // 4] >> 32]
        if exact and x.group < 0 and marked[x.at] < 0:
            for y in range(x.start, min(release_end(x.group), x.start + 2)):
                prefetch_write(ready, ditems[y])
                prefetch_write(ready_from, ditems[y])
                prefetch_write(need, ditems[y])
        if x.group >= 0:  # the header came in at half the distance: the next waiting row and slot
            u = GRANULE * np.int64(x.group)
            prefetch(blocks, u + block_ints[2 * u + BLOCK_NEXT])
            f = block_ints[2 * u + BLOCK_FRONTIER]
            if block_ints[2 * u + BLOCK_MEMBERS] >= 0 and (x.start != f or block_ints[2 * u + BLOCK_PENDING] > 0):
                slots, place = u + block_ints[2 * u + BLOCK_SLOTS], x.start + (x.start == f)
                prefetch(blocks, slots + place)
                prefetch(block_ints, member_hop(slots, block_ints[2 * u + BLOCK_MEMBERS], place))


@njit(cache=True, nogil=True)
def _hop_link(e, rec, xlink, rptr, marked):
    """Link pair of hop ``e``: the first hop of position ``e`` (``e < len(rec)``; ``marked``: the
    route links of :func:`marked_links`; its route's first link is the last route start at or
    before the hop its record reached, ``at``), else the later hop served ``e - len(rec)``-th."""
    if e >= len(rec):
        return xlink[e - len(rec)]
    link = marked[rptr[first_at_least(rptr, 0, len(rptr), rec[e].at + 1) - 1]]
    return link if link >= 0 else ~link


@borrowing_inlined
def _independent(q, alone):
    """Bit ``q`` of the packed bits ``alone`` (little bit order): send ``q`` needs nothing."""
    return (alone[q >> 3] >> (q & 7)) & 1 != 0


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
def event_times(rec, sizes, rptr, marked, hops, bandwidth, alpha, exact, need, ditems, alone, blocks, block_ints,
                waiting, levels, ordered):
    """Congestion-aware event simulation: ``(last arrival, critical-path latency, hops served)``.

    ``rec`` (one :data:`~collsynth.tens.event_layout.EVENT` record per position, in step order)
    is read once per hop; ``sizes[rec[q].piece]`` is its piece's bytes. Ready hops are taken in
    ``(ready time, position)`` order (:mod:`collsynth.tens.event_queue`; the sends that need
    nothing are a stream at time 0 in position order, never queued) and served on their link
    (FIFO: a hop starts when both it and the link are ready). A send's first hop is ready when
    its data has arrived: every exact dependency (``need`` counts; the arrival of ``j`` releases
    ``ditems[rec[j].start:~rec[j].group]``), or the first ``p`` arrivals of the group it reads (a
    group of one arrival releases its readers, ``waiting[rec[j].start:~rec[j].group]``,
    directly; any other keeps its arrivals' times, its frontier and its waiting rows ``(send,
    p)``, sorted by ``p``, in its block). Hop ids: a send's first hop is its position, every
    later hop ``n + k`` for the ``k``-th such hop served (its link in ``xlink``). ``ev`` of a hop
    (``rec[q].ev`` for a first hop, else ``xev``) is the hop that decided its start: ``>= -1`` its
    data, ``<= -2`` (encoded ``-2 - hop``) the link's previous message. ``hops``: the total.
    ``levels``: time levels the queue keeps apart at once
    (:func:`~collsynth.tens.event_queue.queue_new`). ``marked``: the route links as
    :func:`marked_links` stores them. ``alone``: one bit a position (packed, little bit order),
    set for the sends that need nothing. ``ordered``: the records' ``after`` declare a program
    order on the links (:func:`collsynth.tens.cost.link_successors`,
    :func:`~collsynth.tens.event_layout.chain_on_links`). A first hop taken while the hop before
    it on its link has not started is held (its deciding hop kept in its record's ``ev``) and
    queued again when that one starts, at that start: the hops are taken in time order, so its
    own ready time is no later.
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
    best_t, best_e, served = _event_loop(rec, sizes, marked, bandwidth, alpha, exact, need, ditems, alone, blocks,
                                         block_ints, waiting, xev, xlink, free, last_on, ready, ready_from, fbuf, ibuf,
                                         Q, ordered)
    return best_t, _critical_latency(best_e, rec, xev, xlink, rptr, marked, alpha), served


@borrowing
def _event_loop(rec, sizes, marked, bandwidth, alpha, exact, need, ditems, alone, blocks, block_ints, waiting, xev,
                xlink, free, last_on, ready, ready_from, fbuf, ibuf, Q, ordered):
    """The loop of :func:`event_times` on the arrays it allocated: ``(last arrival, its hop,
    hops served)``. ``marked``: the route links, each route's last one as ``~link``. A queued
    word is ``(send << 32) | (hop that made it ready + 1)``, with :data:`LATER_HOP` set for a
    send's second and later hops."""
    n = len(rec)
    stream = 0  # sends that need nothing: taken at time 0 in step order, before any later time
    best_t, best_e, served, later = 0.0, -1, 0, 0
    while True:
        while stream < n and not _independent(stream, alone):
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
        x = rec[q]
        if ordered and first and x.ev != FREE:  # GATED: held until the send before it on its link starts
            x.ev = pred + 1
            continue
        served += 1
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
            if ordered and x.after >= 0:
                _release_after(Q, rec, x.after, start, fbuf, ibuf)
        else:
            e = n + later
            xev[later] = decided
            xlink[later] = link
            later += 1
        fl = start + sizes[x.piece] / bandwidth[link]
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
        _arrive(Q, x.group, x.start, arr, e, exact, ditems, need, ready, ready_from, blocks, block_ints, waiting,
                fbuf, ibuf)
    return best_t, best_e, served


@borrowing_inlined
def _arrive(Q, group, start, arr, e, exact, ditems, need, ready, ready_from, blocks, block_ints, waiting, fbuf, ibuf):
    """A send arrived at ``arr`` (its last hop ``e``; ``fbuf`` holds ``arr``): what its record's
    ``group`` and ``start`` release (:mod:`collsynth.tens.event_layout`) is queued."""
    if group >= 0:
        _arrive_in_block(Q, GRANULE * np.int64(group), start, arr, e, blocks, block_ints, fbuf, ibuf)
    elif exact:
        _release_dependents(Q, start, release_end(group), arr, e, ditems, need, ready, ready_from, fbuf, ibuf)
    else:
        for w in range(start, release_end(group)):  # a group of one arrival: its waiting sends are ready
            queue_push(Q, ibuf[0], (np.int64(waiting[w]) << 32) | (e + 1))


@borrowing_inlined
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


@borrowing_inlined
def _release_after(Q, rec, d, start, fbuf, ibuf):
    """The send before ``d`` on its link started at ``start``: ``d``'s declared
    wait is over. Held (its data came first: ``rec[d].ev - 1`` the hop that decided its data), it is
    queued at ``start``, no earlier than its data's time (it was taken before the send before it,
    and the loop takes hops in time order), with the hop that decided its data (the link, busy
    with that send until after ``start``, decides its start otherwise); not yet taken, it is
    served when its data is there, the link then being free no earlier than that send's end."""
    y = rec[d]
    if y.ev >= 0:
        fbuf[0] = start
        queue_push(Q, ibuf[0], (np.int64(d) << 32) | y.ev)
    y.ev = FREE


@borrowing_inlined
def _arrive_in_block(Q, u, place, arr, e, blocks, block_ints, fbuf, ibuf):
    """The arrival at member ``place`` of the group block at word ``u`` came at ``arr`` (hop
    ``e``). Beyond the finished prefix it waits in its slot; otherwise it extends the prefix,
    with every arrival waiting in the slots after it, keeping the running maximum of their
    times (a later arrival wins ties, as the prefix's latest), and each send waiting for a
    prefix as long as the new one is queued at that prefix's maximum."""
    h = 2 * u
    members = block_ints[h + BLOCK_MEMBERS]
    if members < 0:
        _arrive_in_whole(Q, u, ~members, place, arr, e, blocks, block_ints, fbuf, ibuf)
        return
    f = block_ints[h + BLOCK_FRONTIER]
    slots = u + block_ints[h + BLOCK_SLOTS]
    if place != f:
        blocks[slots + place] = arr
        block_ints[member_hop(slots, members, place)] = e
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
        if pending == 0 or block_ints[member_hop(slots, members, f)] < 0:
            break
        val, frm = blocks[slots + f], np.int64(block_ints[member_hop(slots, members, f)])
        pending -= 1
    block_ints[h + BLOCK_FRONTIER] = f
    block_ints[h + BLOCK_PENDING] = pending
    block_ints[h + BLOCK_NEXT] = w - u
    blocks[u + BLOCK_TOP] = top
    block_ints[h + BLOCK_TOP_FROM] = top_from


@borrowing_inlined
def _arrive_in_whole(Q, u, members, place, arr, e, blocks, block_ints, fbuf, ibuf):
    """The arrival at member ``place`` of the whole block at word ``u`` (``members`` arrivals,
    every reader waiting for all of them) came at ``arr`` (hop ``e``): it is counted and kept as
    the latest if it is (a later time, or the same time at a later place: the prefix's latest
    once complete); the last arrival queues every waiting row at the latest's time."""
    h = 2 * u
    got = block_ints[h + BLOCK_FRONTIER]
    top = blocks[u + BLOCK_TOP]
    if got == 0 or arr > top or (arr == top and place > block_ints[h + BLOCK_PENDING]):
        blocks[u + BLOCK_TOP] = arr
        block_ints[h + BLOCK_TOP_FROM] = e
        block_ints[h + BLOCK_PENDING] = place
    got += 1
    block_ints[h + BLOCK_FRONTIER] = got
    if got < members:
        return
    fbuf[0] = blocks[u + BLOCK_TOP]
    top_from = np.int64(block_ints[h + BLOCK_TOP_FROM])
    for w in range(u + block_ints[h + BLOCK_NEXT], u + block_ints[h + BLOCK_SLOTS]):
        queue_push(Q, ibuf[0], (np.int64(block_ints[2 * w]) << 32) | (top_from + 1))
    block_ints[h + BLOCK_NEXT] = block_ints[h + BLOCK_SLOTS]


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
