"""What the event cost model's loop reads and writes (:mod:`collsynth.tens.event_kernel`):
one record per send and one block per group of several arrivals, laid out so that taking a
send or an arrival costs one or two cache lines.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .compiled import hash_mix
from .prefetch import huge_pages, prefetch_write

AHEAD = 16  # entries prefetched ahead of the one taken (the event loop) or written (its tables)

# One record per send, in step order (the order the loop takes equal times in), holding all that
# the loop reads and writes for it, so that taking a send costs one cache line (two for a quarter
# of the records, which straddle one): its piece's bytes
# (``piece``, a place in the table of the schedule's distinct piece sizes, :func:`event_records`),
# its next hop (``at``, its place in the route links: the route's first hop is the route links'
# start at or before it, ``rptr``), the decision of its first hop's start (``ev``), what its
# arrival releases and the send whose first hop waits for this one's to start (``after``, -1 for
# none: a declared program order on the link, :func:`collsynth.tens.cost.link_successors`). An
# arrival of a group with other members updates that group's block (``group`` >= 0: the block's
# first granule, ``start`` the arrival's place among the group's members); otherwise (``group``
# < 0) it releases rows ``start .. ~group`` of one table (:func:`release_end`): its dependents
# (exact pairs) or the sends waiting for its group (a group of one arrival: every send reading
# it waits for that arrival alone). Six int32 fields, 24 bytes a send.
# Before its first hop is served, ``ev`` says where a send of a declared program order stands:
# FREE (nothing to wait for), GATED (the send before it on its link has not started) or, >= 0,
# held for that send with ``ev - 1`` the hop that made its data ready.
EVENT = np.dtype([("piece", np.int32), ("after", np.int32), ("group", np.int32), ("start", np.int32),
                  ("ev", np.int32), ("at", np.int32)], align=True)
FREE, GATED = -1, -2  # a record's ``ev`` before its first hop is served (held: >= 0)

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
#   words u + slots .. u + slots + members - 1, the member slots' times, then the int32 member hops
#       (two a word, from word u + slots + members): a member that came before the prefix reached
#       it keeps its arrival time (float64) and its hop (-1 until it arrives) there, 12 bytes a
#       member (:func:`member_hop`).
# A group every reader of which waits for all its arrivals (a reduction's partial results summed at
# once; or nobody reads it) has a *whole* block: its header and waiting rows, no member slots
# (BLOCK_MEMBERS holds ``~members``): arrivals are counted in BLOCK_FRONTIER, and the latest one
# so far (by time, then place: the prefix's rule, a later place wins a tie) is kept in BLOCK_TOP,
# BLOCK_TOP_FROM and, its place, BLOCK_PENDING; the last arrival releases every row.
# Word offsets in the header are relative to ``u``.
BLOCK_FRONTIER, BLOCK_PENDING, BLOCK_NEXT, BLOCK_SLOTS, BLOCK_TOP_FROM, BLOCK_MEMBERS = 0, 1, 2, 3, 6, 7
BLOCK_TOP = 2  # a float64 word
BLOCK_HEADER = 4  # words
GRANULE = 4  # words per granule: a block starts at word 4 * rec.group


@njit(cache=True, nogil=True)
def event_records(chunk, lo, hi, denom, chunk_bytes, r, rptr):
    """``(records, sizes)``: one :data:`EVENT` record per position, its piece's bytes
    ``sizes[piece]``, ``sizes`` the distinct values of ``(hi - lo) / denom * chunk_bytes[chunk]``
    over the positions in order of first use (each the very float that expression gives for
    its positions, :func:`_size_place`), its first hop (``at``: the first of route ``r``'s places
    in the route links, ``rptr[r]``), nothing released yet (rows ``0 .. 0``), no send waiting for it."""
    n = len(chunk)
    rec = np.empty(n, EVENT)
    huge_pages(rec)
    sizes, cells = np.empty(16), np.full((64, 2), -1, np.int64)
    fbuf = np.zeros(1)
    ibuf = fbuf.view(np.int64)
    count, last_bits, last = 0, np.int64(-1), np.int32(-1)
    for q in range(n):
        fbuf[0] = (hi[q] - lo[q]) / denom * chunk_bytes[chunk[q]]
        if ibuf[0] != last_bits or last < 0:  # consecutive pieces are mostly of one size
            last_bits = ibuf[0]
            last, sizes, cells, count = _size_place(sizes, cells, count, fbuf[0], last_bits)
        x = rec[q]
        x.piece = last
        x.after = -1
        x.group = -1
        x.start = 0
        x.ev = FREE
        x.at = rptr[r[q]]
    return rec, sizes[:count].copy()


@njit(cache=True, nogil=True)
def _size_place(sizes, cells, count, nbytes, bits):
    """The place of ``nbytes`` (float64 bits ``bits``) among ``sizes[:count]``, added if new:
    ``(place, sizes, cells, count)``, the arrays grown when full. ``cells`` is an
    open-addressing map (linear probing, at most a quarter full) from a size's bits to its
    place; the first float of each bit pattern is kept, so ``sizes[place]`` is ``nbytes`` bit
    for bit."""
    m = len(cells) - 1
    h = np.int64(hash_mix(bits) & np.uint64(m))
    while cells[h, 1] >= 0 and cells[h, 0] != bits:
        h = (h + 1) & m
    if cells[h, 1] >= 0:
        return np.int32(cells[h, 1]), sizes, cells, count
    if count >= np.iinfo(np.int32).max:
        raise ValueError("too many distinct piece sizes for 32-bit places")
    if count == len(sizes):
        grown = np.empty(2 * count)
        grown[:count] = sizes
        sizes = grown
    sizes[count] = nbytes
    cells[h, 0] = bits
    cells[h, 1] = count
    count += 1
    if 4 * count > len(cells):
        cells = _rehashed(cells)
    return np.int32(count - 1), sizes, cells, count


@njit(cache=True, nogil=True)
def _rehashed(cells):
    """The map of :func:`_size_place` in twice as many cells."""
    grown = np.full((2 * len(cells), 2), -1, np.int64)
    m = len(grown) - 1
    for c in range(len(cells)):
        if cells[c, 1] >= 0:
            h = np.int64(hash_mix(cells[c, 0]) & np.uint64(m))
            while grown[h, 1] >= 0:
                h = (h + 1) & m
            grown[h, 0] = cells[c, 0]
            grown[h, 1] = cells[c, 1]
    return grown


@njit(cache=True, nogil=True, inline='always')
def release_end(group):
    """The end of the rows a record without a group block releases, from its ``group`` (``~end``)."""
    return ~group


@njit(cache=True, nogil=True)
def release_dependents(rec, dptr):
    """Exact pairs: the arrival of position ``q`` releases rows ``dptr[q] .. dptr[q + 1]``."""
    for q in range(len(rec)):
        rec[q].start = dptr[q]
        rec[q].group = ~dptr[q + 1]


def release_groups(rec, order, gstart, g_in, p, single):
    """Group prefixes: ``(blocks, block_ints, waiting)`` and every record's release.

    ``order[gstart[g]:gstart[g + 1]]`` are the positions of group ``g`` in step order. A group
    of one arrival (when ``single``) gets no block: its arrival releases the group's readers
    (their positions, rows of ``waiting``) itself (its record's ``start .. ~group``). Every other group gets
    a block (the layout above: header, its waiting rows by ``p``, one slot per arrival) and its
    members' records name the block and their place in it. A send reading a group waits for its
    first ``p`` arrivals (Deps of :mod:`collsynth.tens.dependencies`); rows are in position order
    within a group, so ``p`` ascends. :func:`hold_readers`, :func:`group_blocks`, then
    :func:`waiting_rows` (a caller may drop ``g_in`` and ``p`` after the first, ``order`` and
    ``gstart`` after the second).
    """
    hold_readers(rec, g_in, p)
    blocks, block_ints, at, rows = group_blocks(rec, order, gstart, single)
    return blocks, block_ints, waiting_rows(rec, at, block_ints, rows)[0]


@njit(cache=True, nogil=True)
def hold_readers(rec, g_in, p):
    """What each send reads, kept in its record until :func:`waiting_rows` has written it
    where it goes: the group ``g_in[q]`` in ``after`` and ``p[q]`` in ``ev`` (both unused
    before the loop), so that the columns ``g_in`` and ``p`` can go before the blocks are made."""
    for q in range(len(rec)):
        rec[q].after = g_in[q]
        rec[q].ev = p[q]


@njit(cache=True, nogil=True)
def group_blocks(rec, order, gstart, single):
    """The blocks of :func:`release_groups` with their headers and member slots, and the
    records' releases: ``(blocks, block_ints, at, rows)``, ``at[g]`` where group ``g``'s rows
    go (one int32 a group: its block's granule, whose header's BLOCK_NEXT is the fill pointer
    until :func:`waiting_rows` sets it back, or ``~row`` of the waiting table of ``rows`` rows).
    One counting pass over the readers (their groups' row counts), one over the groups (the
    sizes) and one writing headers, slots and records, where each group's count becomes its
    ``at``. The group each send reads is in its record (:func:`hold_readers`)."""
    G = len(gstart) - 1
    count = np.empty(G, np.int32)
    huge_pages(count)
    count[:] = 0
    partial = np.zeros(G, np.bool_)  # a reader of the group waits for fewer than all its arrivals
    for q in range(len(rec)):
        g = rec[q].after
        if g >= 0:
            count[g] += 1
            if rec[q].ev != gstart[g + 1] - gstart[g]:
                partial[g] = True
    rows, words = 0, 0
    for g in range(G):
        size = gstart[g + 1] - gstart[g]
        if single and size == 1:
            rows += count[g]
        else:
            words += _block_words(count[g], size if partial[g] else ~size)
    if words // GRANULE >= np.iinfo(np.int32).max:
        raise ValueError("too many group prefixes for 32-bit block granules")
    blocks = np.empty(words)
    huge_pages(blocks)
    block_ints = blocks.view(np.int32)
    rows, words = 0, 0
    for g in range(G):
        size = gstart[g + 1] - gstart[g]
        for j in range(gstart[g] + AHEAD, min(gstart[g + 1] + AHEAD, len(order))):  # records AHEAD members on
            prefetch_write(rec, order[j])
        readers = count[g]
        if single and size == 1:
            q = order[gstart[g]]
            rec[q].start = rows
            rec[q].group = ~(rows + readers)
            count[g] = ~rows
            rows += readers
            continue
        members = size if partial[g] else ~size
        _block_header(blocks, block_ints, words, readers, members)
        for x in range(size):
            q = order[gstart[g] + x]
            rec[q].group = words // GRANULE
            rec[q].start = x
        count[g] = words // GRANULE
        words += _block_words(readers, members)
    return blocks, block_ints, count, rows


@njit(cache=True, nogil=True)
def waiting_rows(rec, at, block_ints, rows):
    """The waiting table of :func:`release_groups` (``rows`` rows: the position of each reader
    of a group of one arrival, released directly) with every reader's row written where :func:`group_blocks` put its group's (``at``, advanced here), every block's
    fill pointer back at its first waiting row, and the records' ``after`` and ``ev`` back to
    none and FREE: ``(waiting, alone)``, ``alone`` one bit a send (packed, little bit order),
    set for the sends that read no group."""
    waiting = np.empty(rows, np.int32)
    huge_pages(waiting)
    _write_rows(rec, at, block_ints, waiting)
    u, words = 0, len(block_ints) // 2
    while u < words:
        h = 2 * u
        block_ints[h + BLOCK_NEXT] = BLOCK_HEADER
        u += _block_words(block_ints[h + BLOCK_SLOTS] - BLOCK_HEADER, block_ints[h + BLOCK_MEMBERS])
    alone = np.zeros((len(rec) + 7) // 8, np.uint8)
    for q in range(len(rec)):
        if rec[q].after < 0:
            alone[q >> 3] |= np.uint8(1 << (q & 7))
        rec[q].after = -1
        rec[q].ev = FREE
    return waiting, alone


@njit(cache=True, nogil=True, inline='always')
def _block_words(readers, members):
    """Words of a block: header, waiting rows, member slots (none for a whole block, ``members``
    < 0), to a whole granule."""
    words = BLOCK_HEADER + readers + (members + (members + 1) // 2 if members >= 0 else 0)
    return (words + GRANULE - 1) // GRANULE * GRANULE


@njit(cache=True, nogil=True, inline='always')
def member_hop(slots, members, place):
    """The int32 index (in ``block_ints``) of member ``place``'s hop in a block whose member
    times start at word ``slots`` (absolute) and which has ``members`` members; its time is the
    float64 word ``slots + place``."""
    return 2 * (slots + members) + place


@njit(cache=True, nogil=True, inline='always')
def _block_header(blocks, block_ints, u, readers, members):
    """An empty prefix for the block at word ``u``: no arrival yet, every waiting row to come
    (a whole block, ``members`` < 0: no arrival counted, no latest place)."""
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
        block_ints[member_hop(u + slots, members, x)] = -1


@njit(cache=True, nogil=True)
def _write_rows(rec, at, block_ints, waiting):
    """Every reader's row where its group's rows go, in position order: ``(send, p)`` (its
    record's ``after`` and ``ev``, :func:`hold_readers`) in a block, the send alone in
    ``waiting`` (a group of one arrival, whose arrival releases them all); ``at``
    holds a block's granule (its header's BLOCK_NEXT the fill pointer, advanced here) or
    ``~row`` of ``waiting`` (advanced here); the pointers' and the headers' lines are
    prefetched ahead."""
    n = len(rec)
    for q in range(n):
        if q + 2 * AHEAD < n and rec[q + 2 * AHEAD].after >= 0:  # the fill pointers, then the headers or rows
            prefetch_write(at, rec[q + 2 * AHEAD].after)
        if q + AHEAD < n and rec[q + AHEAD].after >= 0:
            a = at[rec[q + AHEAD].after]
            if a >= 0:
                prefetch_write(block_ints, 2 * GRANULE * np.int64(a))
            else:
                prefetch_write(waiting, ~a)
        g = rec[q].after
        if g >= 0:
            a = at[g]
            if a >= 0:
                h = 2 * GRANULE * np.int64(a)
                w = h + 2 * np.int64(block_ints[h + BLOCK_NEXT])
                block_ints[w] = q
                block_ints[w + 1] = rec[q].ev
                block_ints[h + BLOCK_NEXT] += 1
            else:
                waiting[~a] = q  # a group of one arrival: its arrival releases every reader
                at[g] = a - 1


@njit(cache=True, nogil=True)
def chain_on_links(rec, src, switch, links, pairs):
    """The declared program order of :func:`collsynth.tens.cost.link_successors` written into
    the records: every send out of an NPU (``switch[src[q]]`` false) is the ``after`` of the
    send before it whose first hop (``links[rec[q].at]``, one of ``pairs`` link pairs) is on the
    same link pair, and is GATED until that one starts. One pass in step order, keeping each
    link pair's last send."""
    last = np.full(pairs, -1, np.int32)
    for q in range(len(rec)):
        if switch[src[q]]:
            continue
        link = links[rec[q].at]
        k = last[link]
        if k >= 0:
            rec[k].after = q
            rec[q].ev = GATED
        last[link] = q
