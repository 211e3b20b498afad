"""Compiled loops of the verifier (:mod:`collsynth.tens.verify` holds the semantics and messages).

Chunks evolve independently, so the holdings are simulated one chunk at a time over the sends
of that chunk in step order (ties: schedule order), with state only for the chunk's elementary
segments x nodes, initialised lazily per node. Copying collectives keep one flag per (node,
segment); combining ones the set of contributing ranks as ``W`` uint64 words.

Each simulation returns the first violation over all chunks: the smallest ``(step, index)``
of a send that breaks a rule, else the first chunk (and node) whose postcondition fails. Run
again on that one chunk with ``detail`` it also returns what the message needs (the chunk's
segment breakpoints and which segments are missing, or the contributions counted twice).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .compiled import append_unseen, borrowing, first_at_least
from .routing import _find_link

NONE = np.iinfo(np.int64).max
NOT_HELD, CONFLICT, DOUBLE = 0, 1, 2  # kinds of send violation (and their order on ties)

# The per-chunk step loops allocate nothing and only borrow the arrays their callers own
# (:data:`collsynth.tens.compiled.borrowing`, as the event model's loop): the runtime's reference
# counting otherwise costs an atomic increment and decrement per array an inlined function
# receives, per send (measured: four fifths of the copy loop on a 50x50 torus allgather, two
# thirds of the combining one on a 32x32 torus allreduce).


@njit(cache=True, nogil=True)
def first_malformed(step, chunk, lo, hi, op, src, dst, denom, total, alive, row_ptr, link_dst, routed):
    """First send failing a static check and the check's number, ``(-1, -1)`` if none.

    Checks in order: 0 step < 1, 1 piece not within ``[0, denom)`` or empty, 2 chunk id out of
    range, 3 unknown op, 4 node id out of range, 5 failed node, 6 same source and destination,
    7 no live link (``routed``: not checked here, see :func:`first_unreachable`).
    """
    size = len(alive)
    for i in range(len(step)):
        code = -1
        u, v = src[i], dst[i]
        if step[i] < 1:
            code = 0
        elif lo[i] < 0 or hi[i] > denom or lo[i] >= hi[i]:
            code = 1
        elif chunk[i] < 0 or chunk[i] >= total:
            code = 2
        elif op[i] != 0 and op[i] != 1 and op[i] != 2:
            code = 3
        elif u < 0 or u >= size or v < 0 or v >= size:
            code = 4
        elif not alive[u] or not alive[v]:
            code = 5
        elif u == v:
            code = 6
        elif not routed and _find_link(u, v, row_ptr, link_dst) < 0:
            code = 7
        if code >= 0:
            return i, code
    return -1, -1


@njit(cache=True, nogil=True)
def first_unreachable(src, dst, limit, row_ptr, link_dst, adj_ptr, nbr, alive):
    """Smallest index ``< limit`` of a send whose destination its source cannot reach through
    live links (-1 if none); sends are assumed to pass the checks before it (their nodes are
    ``alive``). None when the live nodes are strongly connected, else one breadth-first search
    per source that has a send off the links."""
    size = len(adj_ptr) - 1
    if _strongly_connected(alive, adj_ptr, nbr):
        return -1
    count = np.zeros(size + 1, np.int64)
    for i in range(limit):
        if _find_link(src[i], dst[i], row_ptr, link_dst) < 0:
            count[src[i] + 1] += 1
    for u in range(size):
        count[u + 1] += count[u]
    fill = count[:-1].copy()
    items = np.empty(count[-1], np.int64)
    for i in range(limit):
        if _find_link(src[i], dst[i], row_ptr, link_dst) < 0:
            items[fill[src[i]]] = i
            fill[src[i]] += 1
    seen = np.full(size, -1, np.int64)
    queue = np.empty(size, np.int64)
    best = -1
    for u in range(size):
        if count[u] == count[u + 1]:
            continue
        head, tail = 0, 1
        queue[0] = u
        seen[u] = u
        while head < tail:
            v = queue[head]
            head += 1
            for e in range(adj_ptr[v], adj_ptr[v + 1]):
                w = nbr[e]
                if seen[w] != u:
                    seen[w] = u
                    queue[tail] = w
                    tail += 1
        for x in range(count[u], count[u + 1]):
            i = items[x]
            if seen[dst[i]] != u and (best < 0 or i < best):
                best = i
    return best


@njit(cache=True, nogil=True)
def _reached(root, adj_ptr, nbr, seen):
    """Breadth-first search from ``root``: marks ``seen`` and returns the number reached."""
    queue = np.empty(len(seen), np.int64)
    queue[0] = root
    seen[root] = True
    head, tail = 0, 1
    while head < tail:
        v = queue[head]
        head += 1
        for e in range(adj_ptr[v], adj_ptr[v + 1]):
            tail = append_unseen(seen, queue, tail, nbr[e])
    return tail


@njit(cache=True, nogil=True)
def _strongly_connected(alive, adj_ptr, nbr):
    """Whether every ``alive`` node reaches every other through the adjacency ``adj_ptr``/``nbr``:
    the first one reaches them all and they all reach it (a search on the reversed arcs)."""
    size = len(adj_ptr) - 1
    root = -1
    for v in range(size):
        if alive[v]:
            root = v
            break
    if root < 0:
        return True
    rev_ptr = np.zeros(size + 1, np.int64)
    for e in range(len(nbr)):
        rev_ptr[nbr[e] + 1] += 1
    for v in range(size):
        rev_ptr[v + 1] += rev_ptr[v]
    fill = rev_ptr[:-1].copy()
    rev = np.empty(len(nbr), np.int64)
    for v in range(size):
        for e in range(adj_ptr[v], adj_ptr[v + 1]):
            rev[fill[nbr[e]]] = v
            fill[nbr[e]] += 1
    for ptr, arcs in ((adj_ptr, nbr.astype(np.int64)), (rev_ptr, rev)):
        seen = np.zeros(size, np.bool_)
        _reached(root, ptr, arcs, seen)
        for v in range(size):
            if alive[v] and not seen[v]:
                return False
    return True


@njit(cache=True, nogil=True)
def send_summary(chunk, off, num_chunks, op, lo, hi, denom, step):
    """One pass over the sends: the first send of chunks ``off .. off + num_chunks - 1`` that
    is a reduction (-1 if none), whether every piece is the whole chunk, and the smallest and
    largest step (0, 0 for no sends)."""
    first_reduce, whole = -1, True
    smin, smax = (step[0], step[0]) if len(step) else (0, 0)
    for i in range(len(chunk)):
        c = chunk[i] - off
        if first_reduce < 0 and 0 <= c < num_chunks and op[i] == 2:
            first_reduce = i
        if lo[i] != 0 or hi[i] != denom:
            whole = False
        smin, smax = min(smin, step[i]), max(smax, step[i])
    return first_reduce, whole, smin, smax


@njit(cache=True, nogil=True)
def chunk_buckets(chunk, off, num_chunks, step, K):
    """Where each bucket of a stable counting sort of the sends of chunks ``off .. off +
    num_chunks - 1`` starts: bucket ``c * K + t`` holds chunk ``off + c``'s sends in step ``t``
    (``K`` > 1: steps ``0 .. K - 1``) or, with ``K == 1``, all of them. ``num_chunks * K + 1``
    entries, the last the number of sends."""
    fill = np.zeros(num_chunks * K + 1, np.int64)
    for i in range(len(chunk)):
        c = chunk[i] - off
        if 0 <= c < num_chunks:
            fill[c * K + (step[i] if K > 1 else 0) + 1] += 1
    for k in range(num_chunks * K):
        fill[k + 1] += fill[k]
    return fill


@njit(cache=True, nogil=True)
def chunk_major(order, chunk, off, num_chunks, step, K, src, dst, lo, hi, op, whole, combining, fill, rec):
    """The sends of chunks ``off .. off + num_chunks - 1`` grouped by chunk, by step then
    schedule index inside, scattered into the rows of ``rec`` (``index, src, dst, step, lo, hi,
    op``; ``lo``/``hi`` unused when ``whole``) by the buckets ``fill`` of :func:`chunk_buckets`
    (advanced as they fill). With ``K`` > 1 the buckets are (chunk, step) and the schedule is
    read in its own order (``order`` empty); with ``K == 1`` they are chunks, read in the
    stable step order ``order`` (empty: the schedule is in step order). ``combining``: every op
    other than a copy (1) is written as a reduction (2).

    One row per send (not a column per field) keeps one cache line open per bucket while the
    sends of a step scatter over every chunk's buckets: the scatter took a third of the time."""
    for y in range(len(chunk)):
        i = order[y] if len(order) else y
        c = chunk[i] - off
        if 0 <= c < num_chunks:
            key = c * K + (step[i] if K > 1 else 0)
            x = fill[key]
            fill[key] = x + 1
            rec[x, 0], rec[x, 1], rec[x, 2], rec[x, 3] = i, src[i], dst[i], step[i]
            rec[x, 6] = (1 if op[i] == 1 else 2) if combining else op[i]
            if not whole:
                rec[x, 4], rec[x, 5] = lo[i], hi[i]


@njit(cache=True, nogil=True)
def _heapsort(a):
    """Sort ``a`` in place (small code: the breakpoints of one chunk)."""
    n = len(a)
    for start in range(n // 2 - 1, -1, -1):
        _sift(a, start, n)
    for end in range(n - 1, 0, -1):
        a[0], a[end] = a[end], a[0]
        _sift(a, 0, end)


@njit(cache=True, nogil=True)
def _sift(a, j, n):
    v = a[j]
    while True:
        c = 2 * j + 1
        if c >= n:
            break
        if c + 1 < n and a[c + 1] > a[c]:
            c += 1
        if v >= a[c]:
            break
        a[j] = a[c]
        j = c
    a[j] = v


@njit(cache=True, nogil=True)
def _segments(lo, hi, a, b, denom, pts, marked, seg_of):
    """Breakpoints of one chunk's segments into ``pts`` (grown if needed): 0, denom and every
    lo/hi of its sends ``a .. b - 1``, sorted and distinct. Returns ``(nseg, pts)``.

    With ``seg_of`` (``denom + 1`` entries, -1 except at the previous chunk's ``marked``
    breakpoints ``pts[:marked]``, which are cleared first) the distinct breakpoints are found
    by marking, and ``seg_of[p]`` is left as the number of the segment starting at breakpoint
    ``p`` (:func:`_seg_range` then looks pieces up instead of searching)."""
    if len(lo) == 0:
        pts[0], pts[1] = 0, denom
        return 1, pts
    if len(seg_of):
        _unmark(seg_of, pts, marked)
        need = min(2 * (b - a) + 2, denom + 1)
        if len(pts) < need:
            pts = np.empty(2 * need, np.int64)
        pts[0], pts[1] = 0, denom
        seg_of[0], seg_of[denom] = 0, 0
        m = 2
        for x in range(a, b):
            p = lo[x]
            if seg_of[p] < 0:
                seg_of[p] = 0
                pts[m] = p
                m += 1
            p = hi[x]
            if seg_of[p] < 0:
                seg_of[p] = 0
                pts[m] = p
                m += 1
        _heapsort(pts[:m])
        for k in range(m):
            seg_of[pts[k]] = k
        return m - 1, pts
    need = 2 * (b - a) + 2
    if len(pts) < need:
        pts = np.empty(2 * need, np.int64)
    pts[0], pts[1] = 0, denom
    m = 2
    for x in range(a, b):
        pts[m], pts[m + 1] = lo[x], hi[x]
        m += 2
    _heapsort(pts[:m])
    k = 1
    for y in range(1, m):
        if pts[y] != pts[k - 1]:
            pts[k] = pts[y]
            k += 1
    return k - 1, pts


@njit(cache=True, nogil=True)
def _unmark(seg_of, pts, marked):
    """``seg_of`` back to all -1 (it is marked at the breakpoints ``pts[:marked]``)."""
    if len(seg_of):
        for k in range(marked):
            seg_of[pts[k]] = -1


@njit(cache=True, nogil=True)
def _seg_range(lo, hi, x, pts, nseg, seg_of):
    """First and one-past-last segment of send ``x``."""
    if len(lo) == 0:
        return 0, 1
    if len(seg_of):
        return seg_of[lo[x]], seg_of[hi[x]]
    return first_at_least(pts, 0, nseg + 1, lo[x]), first_at_least(pts, 0, nseg + 1, hi[x])


@njit(cache=True, nogil=True)
def _step_span(step, p0, b, best_t):
    """``(t, p1)``: the step ``t`` of send ``p0`` and the end ``p1`` of the run of sends ``p0 ..``
    (before ``b``) in it; ``p1 == p0`` when no send is left before ``b`` up to step ``best_t``."""
    if p0 >= b or step[p0] > best_t:
        return best_t, p0
    p1 = p0
    while p1 < b and step[p1] == step[p0]:
        p1 += 1
    return step[p0], p1


@njit(cache=True, nogil=True)
def simulate_copy(starts, index, src, dst, step, lo, hi, denom, seg_of, pre, post, post_words, switch, c0, c1,
                  detail):
    """Boolean holdings of the chunks ``c0 .. c1 - 1`` of a copying collective.

    ``post_words``: the postcondition's rows read eight nodes at a time (:func:`row_words`), so
    that a chunk few nodes need (all-to-all) is checked without reading every node's byte.

    ``switch[v]``: node ``v`` is a switch, which holds nothing: a send into it delivers
    nothing and a send out of it is not checked here (the switch rules are checked on their
    own, :func:`collsynth.tens.verify.switch_violation`).

    Returns ``(t, i, x, c, post_c, post_v, nseg, pts, mask)``: the first send violation (step
    ``t``, schedule index ``i``, chunk-major position ``x``, chunk ``c``; ``i == NONE`` if
    none), the first chunk/node whose postcondition fails (-1 if none) and, with ``detail``,
    the last simulated chunk's breakpoints and per-segment mask (segments the violating send's
    source lacks, or the failing node lacks).
    """
    size = pre.shape[1]
    stamp = np.full(size, -1, np.int64)
    H = np.zeros(size, np.bool_)
    pts = np.empty(16, np.int64)
    best_t, best_i, best_x, best_c = NONE, NONE, -1, -1
    post_c, post_v, nseg, marked = -1, -1, 1, 0
    mask = np.zeros(0, np.bool_)
    for c in range(c0, c1):
        a, b = starts[c], starts[c + 1]
        nseg, pts = _segments(lo, hi, a, b, denom, pts, marked, seg_of)
        marked = nseg + 1
        if nseg * size > len(H):
            H = np.zeros(nseg * size, np.bool_)
            stamp[:] = -1
        t, x = _copy_chunk(a, b, c, src, dst, step, lo, hi, nseg, pts, seg_of, pre, switch, H, stamp, best_t)
        bad = x >= 0
        if bad:
            if (t, index[x]) < (best_t, best_i):
                best_t, best_i, best_x, best_c = t, index[x], x, c
            if detail:
                u = src[x]
                f, l = _seg_range(lo, hi, x, pts, nseg, seg_of)
                mask = np.zeros(nseg, np.bool_)
                for g in range(f, l):
                    mask[g] = not H[u * nseg + g]
        if bad or best_i != NONE or post_c >= 0:
            continue
        v = _first_lacking(H, stamp, pre, post, post_words, c, nseg)
        if v < size:
            post_c, post_v = c, v
            if detail:
                mask = np.zeros(nseg, np.bool_)
                for g in range(nseg):
                    mask[g] = not (H[v * nseg + g] if stamp[v] == c else pre[c, v])
    _unmark(seg_of, pts, marked)
    return best_t, best_i, best_x, best_c, post_c, post_v, nseg, pts[:nseg + 1].copy(), mask


def row_words(rows: np.ndarray) -> np.ndarray:
    """A boolean matrix's rows as unsigned 64-bit words, eight columns a word (a view, no copy),
    when its rows are whole words; else no words (``shape[1] == 0``): :func:`_next_needing`
    then reads column by column."""
    if rows.shape[1] % 8 or not rows.flags.c_contiguous:
        return np.zeros((len(rows), 0), np.uint64)
    return rows.view(np.uint64)


@njit(cache=True, nogil=True, inline='always')
def _next_needing(post, post_words, c, v):
    """The first node from ``v`` on whose postcondition has chunk ``c`` (``post.shape[1]`` if
    none), passing eight nodes at once over a zero word of ``post_words``."""
    size = post.shape[1]
    while v < size:
        if (v & 7) == 0 and (v >> 3) < post_words.shape[1] and post_words[c, v >> 3] == 0:
            v += 8
        elif post[c, v]:
            return v
        else:
            v += 1
    return size


@borrowing
def _copy_chunk(a, b, c, src, dst, step, lo, hi, nseg, pts, seg_of, pre, switch, H, stamp, best_t):
    """Simulate the sends ``a .. b - 1`` of chunk ``c`` (segments ``pts[:nseg + 1]``) in the
    holdings ``H`` up to step ``best_t``: ``(t, x)``, the step and chunk-major position of the
    first send whose source lacks part of its piece, ``x == -1`` if none (``H`` then holds
    the chunk at the end of its last step; else at the end of step ``t - 1``)."""
    p0 = a
    while True:
        t, p1 = _step_span(step, p0, b, best_t)
        if p1 == p0:
            break
        for x in range(p0, p1):  # every source must hold its whole piece (end of t - 1)
            u = src[x]
            if switch[u]:
                continue
            f, l = _node_segments(H, stamp, pre, c, u, nseg, lo, hi, x, pts, seg_of)
            for g in range(f, l):
                if not H[u * nseg + g]:
                    return t, x
        for x in range(p0, p1):
            v = dst[x]
            if switch[v]:
                continue
            f, l = _node_segments(H, stamp, pre, c, v, nseg, lo, hi, x, pts, seg_of)
            for g in range(f, l):
                H[v * nseg + g] = True
        p0 = p1
    return NONE, -1


@njit(cache=True, nogil=True)
def _first_lacking(H, stamp, pre, post, post_words, c, nseg):
    """The first node that must end holding chunk ``c`` (``post``, read as :func:`row_words`)
    but lacks one of its ``nseg`` segments in the holdings ``H``, the node count if none."""
    size = pre.shape[1]
    v = _next_needing(post, post_words, c, 0)
    while v < size:
        for g in range(nseg):
            if not (H[v * nseg + g] if stamp[v] == c else pre[c, v]):
                return v
        v = _next_needing(post, post_words, c, v + 1)
    return size


@njit(cache=True, nogil=True)
def _node_segments(H, stamp, pre, c, v, nseg, lo, hi, x, pts, seg_of):
    """Node ``v``'s holding flags of chunk ``c`` (initialised on first use) and the segment
    range ``[f, l)`` of send ``x``'s piece."""
    _init_flags(H, stamp, pre, c, v, nseg)
    return _seg_range(lo, hi, x, pts, nseg, seg_of)


@njit(cache=True, nogil=True)
def _init_flags(H, stamp, pre, c, v, nseg):
    if stamp[v] != c:
        stamp[v] = c
        for g in range(nseg):
            H[v * nseg + g] = pre[c, v]


@njit(cache=True, nogil=True)
def _init_sets(C, stamp, pre, c, v, nseg, rank_of):
    """Node ``v``'s contribution sets for chunk ``c`` (its own rank if it contributes)."""
    if stamp[v] == c:
        return
    stamp[v] = c
    W = C.shape[1]
    for g in range(nseg):
        row = v * nseg + g
        for w in range(W):
            C[row, w] = 0
        if pre[c, v] and rank_of[v] >= 0:
            C[row, rank_of[v] >> 6] = np.uint64(1) << np.uint64(rank_of[v] & 63)


@njit(cache=True, nogil=True)
def _empty(C, row):
    acc = np.uint64(0)
    for w in range(C.shape[1]):  # no early exit: the loop vectorises
        acc |= C[row, w]
    return acc == 0


@njit(cache=True, nogil=True)
def _key(table, tstamp, group, key_row, nkeys, row):
    """The key (receiving row) ``row``'s slot in this step group, created if new."""
    if tstamp[row] == group:
        return table[row], nkeys, False
    tstamp[row] = group
    table[row] = nkeys
    key_row[nkeys] = row
    return nkeys, nkeys + 1, True


@njit(cache=True, nogil=True)
def _differs(A, i, B, j):
    acc = np.uint64(0)
    for w in range(A.shape[1]):
        acc |= A[i, w] ^ B[j, w]
    return acc != 0


@njit(cache=True, nogil=True)
def _overlaps(A, i, B, j):
    acc = np.uint64(0)
    for w in range(A.shape[1]):
        acc |= A[i, w] & B[j, w]
    return acc != 0


@njit(cache=True, nogil=True)
def _slot(kval, key_row, kdup, table, tstamp, group, nkeys, row, C, init):
    """The step's slot of receiving row ``row`` (a new one starts as ``C[init]``):
    ``(k, nkeys, new)`` (the buffers hold a slot per row of ``C``)."""
    k, nkeys, new = _key(table, tstamp, group, key_row, nkeys, row)
    if new:
        for w in range(C.shape[1]):
            kval[k, w] = C[init, w]
        kdup[k] = False
    return k, nkeys, new


@njit(cache=True, nogil=True)
def _first_not_held(p0, p1, index, src, dst, lo, hi, pts, nseg, seg_of, C, stamp, pre, c, rank_of):
    """The first send of the step ``p0 .. p1 - 1`` whose source holds no contribution to one
    of its segments: ``(index, position)``, ``(NONE, -1)`` if none."""
    j_nh, x_nh = NONE, -1
    for x in range(p0, p1):
        _init_sets(C, stamp, pre, c, src[x], nseg, rank_of)
        _init_sets(C, stamp, pre, c, dst[x], nseg, rank_of)
        f, l = _seg_range(lo, hi, x, pts, nseg, seg_of)
        for g in range(f, l):
            if j_nh == NONE and _empty(C, src[x] * nseg + g):
                j_nh, x_nh = index[x], x
    return j_nh, x_nh


@njit(cache=True, nogil=True)
def _step_copies(p0, p1, index, src, dst, lo, hi, op, pts, nseg, seg_of, size, C, kval, key_row, kdup, table, tstamp,
                 group):
    """The step's copies into its slots: the first copy of a segment to a node sets it, a later
    different one conflicts. Returns the slots' count and the first conflict ``(index,
    segment * size + node)``."""
    j_cf, cf_key, nkeys = NONE, NONE, 0
    for x in range(p0, p1):
        if op[x] != 1:
            continue
        f, l = _seg_range(lo, hi, x, pts, nseg, seg_of)
        for g in range(f, l):
            row, srow = dst[x] * nseg + g, src[x] * nseg + g
            k, nkeys, new = _slot(kval, key_row, kdup, table, tstamp, group, nkeys, row, C, srow)
            if not new and _differs(kval, k, C, srow):
                j_cf = min(j_cf, index[x])
                cf_key = min(cf_key, g * size + dst[x])
    return nkeys, j_cf, cf_key


@njit(cache=True, nogil=True)
def _step_reductions(p0, p1, index, src, dst, lo, hi, op, pts, nseg, seg_of, C, kval, key_row, kdup, table, tstamp, group,
                     nkeys, detail, dups):
    """The step's reductions added to their slots (the receiver's set, or the copy arriving in
    the same step). Returns the slots' count, the first double count ``(index, position)`` and,
    under ``detail``, the number of rows of ``dups`` (one per segment, at most ``nseg``) that
    hold its doubly counted ranks."""
    j_dup, x_dup, ndup = NONE, -1, 0
    for x in range(p0, p1):
        if op[x] == 1:
            continue
        f, l = _seg_range(lo, hi, x, pts, nseg, seg_of)
        for g in range(f, l):
            row, srow = dst[x] * nseg + g, src[x] * nseg + g
            k, nkeys, new = _slot(kval, key_row, kdup, table, tstamp, group, nkeys, row, C, row)
            if kdup[k]:
                continue
            if _overlaps(kval, k, C, srow):
                kdup[k] = True
                if index[x] < j_dup:
                    j_dup, x_dup, ndup = index[x], x, 0
                if detail and index[x] == j_dup:
                    for w in range(C.shape[1]):
                        dups[ndup, w] = kval[k, w] & C[srow, w]
                    ndup += 1
            else:
                for w in range(C.shape[1]):
                    kval[k, w] |= C[srow, w]
    return nkeys, j_dup, x_dup, ndup


@borrowing
def _combining_chunk(a, b, c, index, src, dst, step, lo, hi, op, nseg, pts, seg_of, pre, rank_of, C, stamp, kval,
                     key_row, kdup, table, tstamp, dups, group, best_t, detail):
    """Simulate the sends ``a .. b - 1`` of chunk ``c`` (segments ``pts[:nseg + 1]``) in the
    contribution sets ``C`` up to step ``best_t`` (``kval``, ``key_row``, ``kdup``, ``table``,
    ``tstamp``: a step's slots, one per row of ``C``; ``group`` numbers the steps).

    Returns ``(t, j, x, kind, cf_key, ndup, group)``: the first violation's step, index,
    position and kind (``j == NONE`` if none; ``C`` is then the end of the chunk's last step,
    else the end of step ``t - 1``), the conflict's ``segment * size + node`` and, under
    ``detail``, the rows of ``dups`` holding the doubly counted ranks; ``group`` as it ends."""
    size = pre.shape[1]
    p0 = a
    while True:
        t, p1 = _step_span(step, p0, b, best_t)
        if p1 == p0:
            break
        group += 1
        j_nh, x_nh = _first_not_held(p0, p1, index, src, dst, lo, hi, pts, nseg, seg_of, C, stamp, pre, c, rank_of)
        nkeys, j_cf, cf_key = _step_copies(
            p0, p1, index, src, dst, lo, hi, op, pts, nseg, seg_of, size, C, kval, key_row, kdup, table, tstamp, group)
        nkeys, j_dup, x_dup, ndup = _step_reductions(
            p0, p1, index, src, dst, lo, hi, op, pts, nseg, seg_of, C, kval, key_row, kdup, table, tstamp, group, nkeys,
            detail, dups)
        j = min(j_nh, j_cf, j_dup)
        if j != NONE:
            kind = NOT_HELD if j == j_nh else CONFLICT if j == j_cf else DOUBLE
            x = x_nh if kind == NOT_HELD else x_dup if kind == DOUBLE else _position_of(index, p0, p1, j)
            return t, j, x, kind, cf_key, ndup, group
        for k in range(nkeys):
            row = key_row[k]
            for w in range(C.shape[1]):
                C[row, w] = kval[k, w]
        p0 = p1
    return NONE, NONE, -1, -1, NONE, 0, group


@njit(cache=True, nogil=True)
def _set_tables(rows, W):
    """Empty tables for ``rows`` (node, segment) rows of ``W``-word rank sets: the contribution
    sets ``C`` and a step's slots ``kval``, ``key_row``, ``kdup``, ``table`` and ``tstamp``
    (:func:`_combining_chunk`)."""
    return (np.zeros((rows, W), np.uint64), np.zeros((rows, W), np.uint64), np.zeros(rows, np.int64),
            np.zeros(rows, np.bool_), np.zeros(rows, np.int64), np.full(rows, -1, np.int64))


@njit(cache=True, nogil=True)
def _first_unreduced(C, stamp, pre, post, c, nseg, rank_of, full):
    """The first node that must end with chunk ``c`` fully reduced but does not, and its first
    incomplete segment: ``(node, segment)``, ``(-1, -1)`` if none."""
    for v in range(pre.shape[1]):
        if not post[c, v]:
            continue
        _init_sets(C, stamp, pre, c, v, nseg, rank_of)
        for g in range(nseg):
            if _differs(C, v * nseg + g, full, 0):
                return v, g
    return -1, -1


@njit(cache=True, nogil=True)
def _all_ranks(ranks, W):
    """The set of every rank ``0 .. ranks - 1`` as one row of ``W`` 64-bit words."""
    full = np.zeros((1, W), np.uint64)
    for k in range(ranks):
        full[0, k >> 6] |= np.uint64(1) << np.uint64(k & 63)
    return full


@njit(cache=True, nogil=True)
def _position_of(index, p0, p1, j):
    """The position in ``p0 .. p1 - 1`` of the send with index ``j``."""
    for y in range(p0, p1):
        if index[y] == j:
            return y
    return -1


@njit(cache=True, nogil=True)
def _not_held_mask(C, v, lo, hi, x, pts, nseg, seg_of):
    """Which segments of send ``x`` node ``v`` holds no contribution to."""
    mask = np.zeros(nseg, np.bool_)
    f, l = _seg_range(lo, hi, x, pts, nseg, seg_of)
    for g in range(f, l):
        mask[g] = _empty(C, v * nseg + g)
    return mask


@njit(cache=True, nogil=True)
def _unreduced_mask(C, v, nseg, full):
    """Which segments node ``v`` does not hold fully reduced."""
    mask = np.zeros(nseg, np.bool_)
    for g in range(nseg):
        mask[g] = _differs(C, v * nseg + g, full, 0)
    return mask


@njit(cache=True, nogil=True)
def simulate_combining(starts, index, src, dst, step, lo, hi, op, denom, seg_of, pre, post, rank_of, ranks, c0, c1,
                       detail):
    """Contribution sets of the chunks ``c0 .. c1 - 1`` of a combining collective.

    In each step (state at the end of the previous one): a source must hold some contribution
    to every segment it sends; copies (``op == 1``) replace the receiver's set and must agree
    with the first copy of the same segment to the same node; reductions add to it (to the
    copy when one arrives in the same step) and must never count a rank twice. The first
    violation in a step is the smallest index (ties: missing source, conflict, double count).

    Returns ``(t, i, x, c, kind, post_c, post_v, nseg, pts, mask, node, dups, have)`` like
    :func:`simulate_copy`, with the violation's kind; under ``detail`` also the conflicting
    copies' node, the doubly counted ranks of each segment of the violating reduction and the
    set the failing node holds.
    """
    size = pre.shape[1]
    W = (ranks + 63) // 64
    full = _all_ranks(ranks, W)
    stamp = np.full(size, -1, np.int64)
    C, kval, key_row, kdup, table, tstamp = _set_tables(size, W)
    pts = np.empty(16, np.int64)
    best_t, best_i, best_x, best_c, best_kind = NONE, NONE, -1, -1, -1
    post_c, post_v, nseg, node, group, marked = -1, -1, 1, -1, 0, 0
    mask = np.zeros(0, np.bool_)
    dups = np.zeros((1, W), np.uint64)
    ndup = 0
    have = np.zeros((1, W), np.uint64)
    for c in range(c0, c1):
        a, b = starts[c], starts[c + 1]
        nseg, pts = _segments(lo, hi, a, b, denom, pts, marked, seg_of)
        marked = nseg + 1
        if nseg * size > C.shape[0]:
            C, kval, key_row, kdup, table, tstamp = _set_tables(nseg * size, W)
            stamp[:] = -1
        if nseg > dups.shape[0]:
            dups = np.zeros((nseg, W), np.uint64)
        t, j, x, kind, cf_key, nd, group = _combining_chunk(
            a, b, c, index, src, dst, step, lo, hi, op, nseg, pts, seg_of, pre, rank_of, C, stamp, kval, key_row, kdup,
            table, tstamp, dups, group, best_t, detail)
        bad = j != NONE
        if bad:
            if (t, j) < (best_t, best_i):
                best_t, best_i, best_x, best_c, best_kind = t, j, x, c, kind
            if detail:
                node, ndup = cf_key % size, nd
                mask = _not_held_mask(C, src[x], lo, hi, x, pts, nseg, seg_of)
        if bad or best_i != NONE or post_c >= 0:
            continue
        v, first = _first_unreduced(C, stamp, pre, post, c, nseg, rank_of, full)
        if v >= 0:
            post_c, post_v = c, v
            if detail:
                mask = _unreduced_mask(C, v, nseg, full)
                have[0, :] = C[v * nseg + first, :]
    _unmark(seg_of, pts, marked)
    return (best_t, best_i, best_x, best_c, best_kind, post_c, post_v, nseg, pts[:nseg + 1].copy(), mask, node,
            dups[:ndup].copy(), have[0])
