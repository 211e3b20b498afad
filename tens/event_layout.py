"""What the event cost model's loop reads and writes (:mod:`collsynth.tens.event_kernel`):
one record per send and one block per group of several arrivals, laid out so that taking a
send or an arrival costs one or two cache lines.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .prefetch import huge_pages, prefetch_write

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
