"""Sends in step order, and the data dependencies between them (shared by the ``ten`` and
``event`` models, the verifier and the MSCCL export).

:class:`StepView` lists the sends in stable step order (the order every model dispatches them
in) as compact columns, so the compiled loops read them sequentially; position ``q`` of the
view is send ``order[q]`` of the schedule.

A send of chunk ``c`` from ``u`` in step ``t`` needs what earlier steps delivered to ``u``:
the arrivals of the *group* ``(u, c)`` (every send of chunk ``c`` to ``u``) in steps before
``t``. A source that holds a non-combining chunk from the start needs nothing. With pieces
only the arrivals of overlapping pieces are needed (``exact`` pairs); the whole earlier part of
the group (the *prefix*) is exact for whole chunks and conservative for pieces.

Everything here is linear in the number of sends. The view is a stable counting sort by step.
The groups are named in one pass over the view with a ``chunks x nodes`` table of group numbers
when that table is no bigger than about two entries per send (every collective whose chunks
reach most nodes: allgather, reduce-scatter, allreduce); otherwise by a counting sort by chunk
and one pass per chunk with a per-node scratch array. Both number the groups alike.

>>> import numpy as np
>>> order, starts = counting_order(np.array([2, 1, 2, 1]), 3)
>>> order.tolist(), starts.tolist()
([1, 3, 0, 2], [0, 0, 2, 4])
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numba import njit

from .. import InputError
from ..instances.instance import Instance
from .prefetch import prefetch, prefetch_write
from .routing import MAX_INDEX
from .schedule import Schedule
from .piece_overlaps import by_piece, overlapping_pairs
from .switch_rule import switch_rule
from .ten import NotSupported, instant_hops, link_delays, link_latency, switch_hop_instant

PAIR_BUDGET = 4_000_000  # candidates for explicit dependency pairs (or two per send) beyond this: prefix mode
TABLE_PER_SEND = 2  # the (chunk, node) group table may have this many entries per send,
TABLE_SLACK = 1 << 22  # and this many more; beyond: chunk by chunk
AHEAD = 16  # scattered writes of a counting sort or of the group naming are prefetched this many items on


@njit(cache=True, nogil=True)
def counting_order(key, num_keys):
    """Stable counting sort of small non-negative integer keys: ``(order, starts)``.

    ``order`` (int32) lists the indices by key, equal keys in index order; the indices with key
    ``k`` are ``order[starts[k]:starts[k + 1]]``. As :func:`counting_order_of` over every
    index, without a column of the indices to sort.
    """
    starts = np.zeros(num_keys + 2, np.int64)
    for i in range(len(key)):
        starts[key[i] + 2] += 1
    for k in range(num_keys):
        starts[k + 2] += starts[k + 1]
    order = np.empty(len(key), np.int32)
    for i in range(len(key)):  # starts[k + 1] fills key k (see counting_order_of)
        k = key[i] + 1
        order[starts[k]] = i
        starts[k] += 1
    return order, starts[:num_keys + 1]


@njit(cache=True, nogil=True)
def counting_order_of(key, num_keys, items):
    """:func:`counting_order` of the indices ``items`` by ``key`` (stable: ``items``' order
    among equal keys); returns ``(indices, starts)``. The starts, shifted by one place, are
    their own fill pointers: once filled, ``starts[k + 1]`` has reached key ``k``'s end, which
    is key ``k + 1``'s start (no copy of the starts, which number as many as the keys)."""
    starts = np.zeros(num_keys + 2, np.int64)
    for x in range(len(items)):
        starts[key[items[x]] + 2] += 1
    for k in range(num_keys):
        starts[k + 2] += starts[k + 1]
    order = np.empty(len(items), np.int32)
    for x in range(len(items)):  # starts[k + 1] fills key k, ending at key k's end
        i = items[x]
        k = key[i] + 1
        order[starts[k]] = i
        starts[k] += 1
    return order, starts[:num_keys + 1]


def step_order(step: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sends in stable step order and the start of every used step: ``(order, bounds)``.

    ``order[bounds[k]:bounds[k + 1]]`` are the sends of the k-th used step (ascending steps,
    index order inside). Linear for the usual step numbers; a comparison sort otherwise.
    """
    n = len(step)
    if n == 0:
        return np.zeros(0, np.int32), np.zeros(1, np.int64)
    lo, hi = int(step.min()), int(step.max())
    if lo >= 0 and hi <= 2 * n + (1 << 20):
        order, starts = counting_order(step, hi + 1)
        return order, np.unique(starts)
    order = np.argsort(step, kind="stable").astype(np.int32)
    s = step[order]
    return order, np.flatnonzero(np.r_[True, s[1:] != s[:-1], True]).astype(np.int64)


@dataclass(frozen=True)
class StepView:
    """The sends of a schedule in stable step order (position ``q`` is send ``order[q]``).

    ``order`` is ``None`` when the schedule is already in step order. ``bounds[k] ..
    bounds[k + 1]`` are the positions of the k-th used step, ``steps[k]`` its step number and
    ``rank[q]`` (int32) the k of position ``q``. ``chunk``, ``src``, ``dst`` are int32; pieces
    are ``[lo / denom, hi / denom)`` (the schedule's own columns when it is in step order or
    moves whole chunks, else copies, int32 when every bound fits).
    """

    order: np.ndarray | None
    bounds: np.ndarray
    steps: np.ndarray
    rank: np.ndarray
    chunk: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    denom: int

    def __len__(self) -> int:
        return len(self.rank)

    def original(self, positions: np.ndarray) -> np.ndarray:
        """Schedule indices of view positions."""
        return positions if self.order is None else self.order[positions]


@njit(cache=True, nogil=True)
def _scan_columns(step, chunk, src, dst, bounds, rank):
    """One pass over the schedule's columns: ``(ranges, used)`` with ``ranges`` the (min, max)
    rows of step, chunk, src and dst and ``used`` the number of used steps if the sends are in
    step order, -1 otherwise. While they are (all the way for a schedule in step order), the
    pass also writes the rest of the view: the start of every used step and the end into
    ``bounds`` (room for ``n + 1``) and ``rank``."""
    n = len(step)
    t_lo, t_hi, c_lo, c_hi = step[0], step[0], chunk[0], chunk[0]
    u_lo, u_hi, v_lo, v_hi = src[0], src[0], dst[0], dst[0]
    k = 0
    bounds[0] = 0
    for i in range(n):
        t, c, u, v = step[i], chunk[i], src[i], dst[i]
        t_lo, t_hi, c_lo, c_hi = min(t_lo, t), max(t_hi, t), min(c_lo, c), max(c_hi, c)
        u_lo, u_hi, v_lo, v_hi = min(u_lo, u), max(u_hi, u), min(v_lo, v), max(v_hi, v)
        if k >= 0:
            if i and t != step[i - 1]:
                if t < step[i - 1]:
                    k = -1
                    continue
                k += 1
                bounds[k] = i
            rank[i] = k
    if k >= 0:
        bounds[k + 1] = n
    ranges = np.empty((4, 2), np.int64)  # filled one by one: the columns' types may differ
    ranges[0, 0], ranges[0, 1], ranges[1, 0], ranges[1, 1] = t_lo, t_hi, c_lo, c_hi
    ranges[2, 0], ranges[2, 1], ranges[3, 0], ranges[3, 1] = u_lo, u_hi, v_lo, v_hi
    return ranges, k + 1 if k >= 0 else -1


@njit(cache=True, nogil=True)
def whole_pieces(lo, hi, denom):
    """Whether every piece ``[lo, hi)`` is ``[0, denom)``, i.e. every send moves a whole chunk
    (one compiled pass that stops at the first piece that is not; no temporaries).

    >>> whole_pieces(np.array([0, 0]), np.array([2, 2]), 2), whole_pieces(np.array([0, 1]), np.array([2, 2]), 2)
    (True, False)
    """
    for i in range(len(lo)):
        if lo[i] != 0 or hi[i] != denom:
            return False
    return True


@njit(cache=True, nogil=True)
def _scatter_by_step(step, first, num_keys, chunk, src, dst, lo, hi, order, rank, c2, s2, d2, lo2, hi2):
    """Counting sort by ``step - first`` into the given arrays (``lo2``, ``hi2`` only if ``lo``
    is not empty); returns the bounds of the used steps. A first pass puts every send's place
    in step order into ``rank`` (as scratch); then the columns go to their places one pass at a
    time (a pass that wrote every column at once kept one partly written cache line per column
    and step in flight: twice the time with 20 steps); last, ``rank`` is filled step by step."""
    n = len(step)
    place = rank
    fill = np.zeros(num_keys, np.int64)
    for i in range(n):
        fill[step[i] - first] += 1
    used = 0
    for k in range(num_keys):
        if fill[k] > 0:
            used += 1
    bounds = np.empty(used + 1, np.int64)
    total = 0
    used = 0
    for k in range(num_keys):  # fill[k]: where key k starts, then its next free place
        count = fill[k]
        if count > 0:
            bounds[used] = total
            used += 1
        fill[k] = total
        total += count
    bounds[used] = n
    for i in range(n):
        k = step[i] - first
        x = fill[k]
        fill[k] = x + 1
        place[i] = x
        order[x] = i
    for i in range(n):
        x = place[i]
        c2[x], s2[x], d2[x] = chunk[i], src[i], dst[i]
    if len(lo):
        for i in range(n):
            lo2[place[i]] = lo[i]
        for i in range(n):
            hi2[place[i]] = hi[i]
    for r in range(used):
        rank[bounds[r]:bounds[r + 1]] = r
    return bounds


def _piece_type(s: Schedule) -> np.dtype:
    """int32 when every piece bound of ``s`` fits in it (a view's copy of them then takes half
    the room; the bounds are the same integers), else the schedule's own type."""
    i32 = np.iinfo(np.int32)
    if min(int(s.lo.min()), int(s.hi.min())) >= i32.min and max(int(s.lo.max()), int(s.hi.max())) <= i32.max:
        return np.dtype(np.int32)
    return np.result_type(s.lo.dtype, s.hi.dtype)


def step_view(schedule: Schedule) -> StepView:
    """:class:`StepView` of ``schedule`` (linear for the usual step numbers).

    One compiled pass checks the columns (ranges, step order); the view of a schedule in step
    order shares its int32 columns, a second pass (a counting sort by step) writes that of
    another. The view's
    columns are allocated here rather than in the compiled code: numpy asks the kernel for
    transparent huge pages on large arrays, which takes one 2 MiB page fault where a compiled
    allocation takes 512 small ones (half the time of the view on large schedules).
    """
    s = schedule
    n = len(s)
    if n >= MAX_INDEX:
        raise InputError("schedule", f"{n} sends: at most {MAX_INDEX - 1} are supported")
    if n == 0:
        z = np.zeros(0, np.int32)
        return StepView(None, np.zeros(1, np.int64), s.step[:0], z, z, z, z, s.lo, s.hi, s.denom)
    for name in ("chunk", "src", "dst"):
        if getattr(s, name).dtype != np.int32:  # a schedule's ids are int32 unless one does not fit
            raise InputError("schedule", f"{name} ids must fit in 32 bits")
    rank = np.empty(n, np.int32)
    room = np.empty(n + 1, np.int64)  # only the used steps' pages are ever touched
    ranges, used = _scan_columns(s.step, s.chunk, s.src, s.dst, room, rank)
    for row, name in enumerate(("chunk", "src", "dst"), start=1):
        if ranges[row, 1] >= MAX_INDEX or ranges[row, 0] < -MAX_INDEX:
            raise InputError("schedule", f"{name} ids must fit in 32 bits")
    if used >= 0:
        bounds = room[:used + 1].copy()
        return StepView(None, bounds, s.step[bounds[:-1]], rank, s.chunk, s.src, s.dst, s.lo, s.hi, s.denom)
    del room
    first, last = int(ranges[0, 0]), int(ranges[0, 1])
    if last - first <= 2 * n + (1 << 20):
        chunk, src, dst = (np.empty(n, np.int32) for _ in range(3))
        whole = whole_pieces(s.lo, s.hi, s.denom)  # then every piece is [0, denom): in any order, the columns
        empty = s.lo[:0]
        order = np.empty(n, np.int32)
        piece = _piece_type(s)
        lo, hi = (s.lo, s.hi) if whole else (np.empty(n, piece), np.empty(n, piece))
        bounds = _scatter_by_step(s.step, first, last - first + 1, s.chunk, s.src, s.dst, empty if whole else s.lo,
                                  empty if whole else s.hi, order, rank, chunk, src, dst, lo, hi)
        return StepView(order, bounds, s.step[order[bounds[:-1]]], rank, chunk, src, dst, lo, hi, s.denom)
    order, bounds = step_order(s.step)
    rank = np.repeat(np.arange(len(bounds) - 1, dtype=np.int32), np.diff(bounds))
    chunk, src, dst = (c[order] for c in (s.chunk, s.src, s.dst))
    return StepView(order, bounds, s.step[order[bounds[:-1]]], rank, chunk, src, dst, s.lo[order], s.hi[order], s.denom)


@njit(cache=True, nogil=True)
def _chunk_major(chunk, src, dst, rank, num_chunks):
    """Stable counting sort of the positions by chunk that writes, in the same pass, one record
    per send ``(position, source, destination, step rank)`` in chunk-major order: reads stream
    through the view once, and the group naming then reads its records sequentially. Returns
    ``(records, starts)``; chunk ``c`` is ``records[starts[c]:starts[c + 1]]``."""
    n = len(chunk)
    starts = np.zeros(num_chunks + 2, np.int64)
    for i in range(n):
        starts[chunk[i] + 2] += 1
    for c in range(num_chunks):
        starts[c + 2] += starts[c + 1]
    rec = np.empty((n, 4), np.int32)
    for i in range(n):  # starts[c + 1] fills chunk c (as in counting_order_of)
        if i + AHEAD < n:
            prefetch_write(rec, starts[chunk[i + AHEAD] + 1])
        x = starts[chunk[i] + 1]
        starts[chunk[i] + 1] = x + 1
        rec[x, 0] = i
        rec[x, 1] = src[i]
        rec[x, 2] = dst[i]
        rec[x, 3] = rank[i]
    return rec, starts[:num_chunks + 1]


@njit(cache=True, nogil=True)
def _name_groups(rec, chunk_starts, size, held):
    """One pass per chunk over its records (:func:`_chunk_major`, sends in step order): the
    arrival group ``ga`` of every send, the group ``g_in`` it reads (-1: nothing arrived at its
    source before its step, or the source holds the chunk from the start: ``held[chunk,
    source]``, :func:`held_table`) and ``p``, the arrivals of that group in earlier steps.
    Groups are named by the position of their first arrival, then numbered in that order (so
    group tables are read roughly in step order, as the sends are).

    The pass writes what it finds for a send into one row ``(first arrival of its group, first
    arrival of the group it reads or -1, p, whether it is its group's first arrival)`` of a
    table in position order (one scattered write per send, its line prefetched ``AHEAD``
    records before), which :func:`_number_groups` numbers and splits once the records are
    dropped."""
    n = len(rec)
    named = np.empty((n, 4), np.int32)  # per position: first arrival of ga, of g_in (or -1), p, is first
    first = np.full(size, -1, np.int32)
    count = np.zeros(size, np.int32)
    rows, cols = held.shape
    for c in range(len(chunk_starts) - 1):
        a, b = chunk_starts[c], chunk_starts[c + 1]
        q = a
        while q < b:
            e = q
            while e < b and rec[e, 3] == rec[q, 3]:
                e += 1
            for x in range(q, e):  # reads see the arrivals of earlier steps only
                if x + AHEAD < n:
                    prefetch_write(named, rec[x + AHEAD, 0])
                i, u = rec[x, 0], rec[x, 1]
                if u >= 0 and count[u] > 0 and not (c < rows and u < cols and held[c, u]):
                    named[i, 1] = first[u]
                    named[i, 2] = count[u]
                else:
                    named[i, 1] = -1
                    named[i, 2] = 0
            for x in range(q, e):
                i, v = rec[x, 0], rec[x, 2]
                named[i, 3] = first[v] < 0
                if first[v] < 0:
                    first[v] = i
                named[i, 0] = first[v]
                count[v] += 1
            q = e
        for x in range(a, b):
            first[rec[x, 2]] = -1
            count[rec[x, 2]] = 0
    return named


@njit(cache=True, nogil=True)
def _number_groups(named):
    """``(ga, g_in, p, groups)`` from the rows of :func:`_name_groups`: a group's number is its
    first arrival's rank among the first arrivals, in position order."""
    n = len(named)
    number = np.empty(n, np.int32)  # at a first arrival's position: its group's number
    groups = 0
    for i in range(n):
        number[i] = groups
        groups += named[i, 3]
    ga = np.empty(n, np.int32)
    g_in = np.empty(n, np.int32)
    p = np.empty(n, np.int32)
    for i in range(n):
        ga[i] = number[named[i, 0]]
        g_in[i] = number[named[i, 1]] if named[i, 1] >= 0 else -1
        p[i] = named[i, 2]
    return ga, g_in, p, groups


@dataclass(frozen=True)
class Deps:
    """Data dependencies of every send, in :class:`StepView` positions (see the module doc).

    Position ``q`` belongs to arrival group ``ga[q]``; the groups' member list ``members``
    holds the positions by group (group ``g`` is ``members[gstart[g]:gstart[g + 1]]``, in step
    order). It reads group ``g_in[q]`` (-1: it needs nothing) and needs its first ``p[q]``
    members. ``pairs`` are the exact (overlapping pieces) pairs ``(q, j)`` when asked for and
    found within :func:`pair_budget` candidates; otherwise ``None`` (prefix mode).

    A send out of a switch node needs only the arrival it forwards (``forwards``, the
    :class:`Forwards` in view positions; :func:`dependencies` with the schedule): every arrival
    at a switch is then a group of its own when every send moves a whole chunk (the send reads
    it, ``p`` 1), else the arrivals of one (chunk, switch, step) are a group, read whole (exact
    with the pairs, conservative in prefix mode).
    """

    ga: np.ndarray
    g_in: np.ndarray
    p: np.ndarray
    members: np.ndarray
    gstart: np.ndarray
    pairs: tuple[np.ndarray, np.ndarray] | None
    forwards: Forwards | None = None

    @property
    def groups(self) -> int:
        """The number of arrival groups."""
        return len(self.gstart) - 1


def held_table(instance: Instance, num_chunks: int) -> np.ndarray:
    """``held[chunk, node]`` (global chunk ids): the node holds the chunk from the start, a
    chunk of a non-combining collective in its precondition. The precondition itself when it
    is the only collective's; rows of combining collectives' chunks are all False."""
    colls, offs = instance.collectives, instance.chunk_offsets
    if len(colls) == 1 and offs[0] == 0:
        return np.zeros((0, 0), bool) if colls[0].combining else colls[0].precondition
    nodes = max([instance.topology.size] + [c.precondition.shape[1] for c in colls if not c.combining])
    held = np.zeros((max(num_chunks, offs[-1] + colls[-1].num_chunks), nodes), bool)
    for off, coll in zip(offs, colls):
        if not coll.combining:
            pre = coll.precondition
            held[off:off + len(pre), :pre.shape[1]] = pre
    return held


@njit(cache=True, nogil=True)
def _id_ranges(chunk, src, dst):
    """``(smallest chunk, largest chunk, smallest node, largest node, same chunk, same source)``
    of a non-empty view, the last two counting the positions whose chunk (source) is the one
    before's: which of the group table's two layouts its reads walk along."""
    c_lo, c_hi = chunk[0], chunk[0]
    v_lo, v_hi = min(src[0], dst[0]), max(src[0], dst[0])
    same_chunk = same_src = 0
    for i in range(1, len(chunk)):
        c, u, v = chunk[i], src[i], dst[i]
        c_lo, c_hi = min(c_lo, c), max(c_hi, c)
        v_lo, v_hi = min(v_lo, min(u, v)), max(v_hi, max(u, v))
        same_chunk += c == chunk[i - 1]
        same_src += u == src[i - 1]
    return c_lo, c_hi, v_lo, v_hi, same_chunk, same_src


@njit(cache=True, nogil=True)
def _groups_by_table(chunk, src, dst, bounds, table, chunk_stride, node_stride, ga, g_in, p, k, count):
    """Name the arrival groups in one pass over the view, step by step: reads first (they see
    the arrivals of earlier steps only), then arrivals. ``table[chunk * chunk_stride + node *
    node_stride]`` holds the group of ``(chunk, node)``: ``g >= 0``; -1 none yet; -2 none yet
    and the node holds the chunk from the start (its sends need nothing); ``-3 - g`` group ``g``
    at such a node. Groups are numbered in the order of their first arrivals, as
    :func:`_number_groups` numbers them. Fills ``ga``, ``g_in``, ``p``, ``k`` (the number of
    earlier members of the position's own group) and ``count`` (members per group); returns the
    number of groups. The table's lines are prefetched ``AHEAD`` positions on."""
    n = len(chunk)
    groups = 0
    for s in range(len(bounds) - 1):
        a, b = bounds[s], bounds[s + 1]
        for i in range(a, b):
            if i + AHEAD < n:
                prefetch(table, chunk[i + AHEAD] * chunk_stride + src[i + AHEAD] * node_stride)
            g = table[chunk[i] * chunk_stride + src[i] * node_stride]
            if g >= 0:
                g_in[i] = g
                p[i] = count[g]
            else:
                g_in[i] = -1
                p[i] = 0
        for i in range(a, b):
            if i + AHEAD < n:
                prefetch_write(table, chunk[i + AHEAD] * chunk_stride + dst[i + AHEAD] * node_stride)
            key = chunk[i] * chunk_stride + dst[i] * node_stride
            t = table[key]
            if t >= 0:
                g = t
            elif t <= -3:
                g = -3 - t
            else:
                g = groups
                groups += 1
                count[g] = 0
                table[key] = g if t == -1 else -3 - g
            ga[i] = g
            k[i] = count[g]
            count[g] += 1
    return groups


@njit(cache=True, nogil=True)
def _members_by_group(ga, k, count, members, gstart):
    """Fill ``gstart`` (the groups' starts, from their sizes ``count``) and ``members`` (the
    positions by group, in position order inside: position ``i`` is its group's ``k[i]``-th)."""
    gstart[0] = 0
    for g in range(len(gstart) - 1):
        gstart[g + 1] = gstart[g] + count[g]
    for i in range(len(ga)):
        members[gstart[ga[i]] + k[i]] = i


def _table_groups(view: StepView, held: np.ndarray, num_chunks: int, size: int,
                  node_major: bool) -> tuple[np.ndarray, ...]:
    """``(ga, g_in, p, members, gstart)`` by :func:`_groups_by_table`, the table laid out
    ``chunks x nodes`` or, ``node_major``, ``nodes x chunks``. Every array is allocated by numpy
    (transparent huge pages, see :func:`step_view`)."""
    n = len(view)
    table = np.full(num_chunks * size, -1, np.int32)
    codes = table.reshape(size, num_chunks).T if node_major else table.reshape(num_chunks, size)
    rows, cols = min(held.shape[0], num_chunks), min(held.shape[1], size)
    np.copyto(codes[:rows, :cols], -2, where=held[:rows, :cols])
    chunk_stride, node_stride = (1, num_chunks) if node_major else (size, 1)
    ga, g_in, p, k, count = (np.empty(n, np.int32) for _ in range(5))
    groups = _groups_by_table(view.chunk, view.src, view.dst, view.bounds, table, chunk_stride, node_stride,
                              ga, g_in, p, k, count)
    del table
    members, gstart = np.empty(n, np.int32), np.empty(groups + 1, np.int64)
    _members_by_group(ga, k, count, members, gstart)
    return ga, g_in, p, members, gstart


def _chunk_groups(view: StepView, held: np.ndarray, num_chunks: int, size: int) -> tuple[np.ndarray, ...]:
    """``(ga, g_in, p, members, gstart)`` chunk by chunk (:func:`_chunk_major`,
    :func:`_name_groups`, :func:`_number_groups`): no table, for any number of chunks."""
    rec, chunk_starts = _chunk_major(view.chunk, view.src, view.dst, view.rank, num_chunks)
    named = _name_groups(rec, chunk_starts, size, held)
    del rec
    ga, g_in, p, groups = _number_groups(named)
    del named
    members, gstart = counting_order(ga, groups)  # positions by group, in step order inside
    return ga, g_in, p, members, gstart


def dependencies(view: StepView, instance: Instance, want_pairs: bool | None = None,
                 schedule: Schedule | None = None) -> Deps:
    """Group the arrivals and locate what every send needs (see :class:`Deps`).

    ``want_pairs`` defaults to "the schedule has pieces" (whole chunks need no pairs: the
    prefix is exact for them). The view needs ``chunk``, ``src``, ``dst``, ``lo``, ``hi``.
    ``schedule`` (the view's) gives the switch rule (its ``meta``: ``switch_copy``, the TEN
    timestep): a send out of a switch node then needs only the arrival it forwards
    (:func:`switch_forwards`); without it every earlier arrival at the switch is needed.
    """
    n = len(view)
    ids = _id_ranges(view.chunk, view.src, view.dst) if n else (0, -1, 0, -1, 0, 0)
    c_lo, c_hi, v_lo, v_hi, same_chunk, same_src = ids
    C = int(c_hi) + 1
    size = max(instance.topology.size, int(v_hi) + 1)
    held = held_table(instance, C)
    if c_lo >= 0 and v_lo >= 0 and C * size <= TABLE_PER_SEND * n + TABLE_SLACK:
        ga, g_in, p, members, gstart = _table_groups(view, held, C, size, node_major=same_src > same_chunk)
    else:
        ga, g_in, p, members, gstart = _chunk_groups(view, held, C, size)
    whole = whole_pieces(view.lo, view.hi, view.denom)
    if want_pairs is None:
        want_pairs = not whole
    if schedule is not None and n and instance.topology.switches and _leaves_a_switch(
            view.src, switch_mask(instance.topology)):
        del members
        deps = _forwarded(ga, g_in, p, len(gstart) - 1, view, schedule, instance, whole)
    else:
        deps = Deps(ga, g_in, p, members, gstart, None)
    del ga, g_in, p, gstart
    if want_pairs:
        return replace(deps, pairs=dependency_pairs_of(view, deps))
    return deps


@njit(cache=True, nogil=True)
def _leaves_a_switch(src, switch) -> bool:
    """Whether a send leaves a switch (one pass, no temporaries)."""
    for i in range(len(src)):
        if switch[src[i]]:
            return True
    return False


def _forwarded(ga, g_in, p, groups: int, view: StepView, schedule: Schedule, instance: Instance,
               whole: bool) -> Deps:
    """The :class:`Deps` of the groups ``ga`` (``groups`` of them; what every position reads:
    ``g_in``, ``p``) with every send out of a switch needing only the arrival it forwards (the
    switch rule above): arrivals at switches regrouped (one group each when ``whole``, but one
    per partial sum at a reducing switch; else one per (chunk, switch, step)), groups numbered
    again by first arrival. ``ga``, ``g_in`` and ``p`` are rewritten in place."""
    switch = switch_mask(instance.topology)
    back = switch_back_of(schedule, instance)
    if len(back) > 1 and view.order is not None:
        back = back[view.order]
    rule = switch_rule(schedule, instance)
    copy, reduce, combining = rule.args()
    fw = switch_forwards(view.chunk, view.src, view.dst, view.lo, view.hi, view.steps, back, switch, copy,
                         view.denom, reduce, combining, rank=view.rank)
    del back
    reduce_at = np.zeros(len(switch), np.bool_)
    reduce_at[:len(reduce)] = reduce[:len(switch)]
    groups = _regroup(ga, g_in, p, fw.run, view.chunk, view.src, view.dst, switch, reduce_at,
                      np.asarray(combining, np.bool_), whole, groups)
    fw = replace(fw, run=fw.run[:0].copy())  # read by nothing further (a copy: a view would keep the column)
    members, gstart = counting_order(ga, groups)
    _read_forwarded(g_in, p, ga, gstart, fw.leave, fw.arrival)
    return Deps(ga, g_in, p, members, gstart, None, fw)


@njit(cache=True, nogil=True)
def _regroup(ga, g_in, p, run, chunk, src, dst, switch, reduce, combining, whole, groups):
    """:func:`_forwarded`'s groups, in place: every arrival at a switch (``run[i] >= 0``, its
    (chunk, switch, step)) keyed past the ``groups`` old groups (whole chunks: by the arrival,
    or by its run at a reducing switch summing the chunk; pieces: by its run), every key numbered
    in the order of its first position; ``g_in`` renumbered, and -1 (``p`` 0) for the sends out
    of switches. Returns the number of groups."""
    n = len(ga)
    into = runs = 0
    for i in range(n):
        if run[i] >= 0:
            into += 1
            runs = max(runs, run[i] + 1)
    new = np.full(groups + (into + runs if whole else runs), -1, np.int32)
    count = j = 0
    for i in range(n):
        key = ga[i]
        if run[i] >= 0:
            summed = reduce[dst[i]] and combining[min(chunk[i], len(combining) - 1)]
            key = groups + ((into + run[i] if summed else j) if whole else run[i])
            j += 1
        if new[key] < 0:
            new[key] = count
            count += 1
        ga[i] = new[key]
    for i in range(n):
        if switch[src[i]]:
            g_in[i] = -1
            p[i] = 0
        elif g_in[i] >= 0:
            g_in[i] = new[g_in[i]]
    return count


@njit(cache=True, nogil=True)
def _read_forwarded(g_in, p, ga, gstart, leave, arrival):
    """Every send out of a switch reads the group of the first arrival it forwards, all of it
    (one arrival, or all of a partial sum's)."""
    for x in range(len(leave)):
        if x == 0 or leave[x] != leave[x - 1]:
            g = ga[arrival[x]]
            g_in[leave[x]] = g
            p[leave[x]] = gstart[g + 1] - gstart[g]


def pair_budget(sends: int) -> int:
    """Candidates the exact pairs may look at: :data:`PAIR_BUDGET` or two per send, the more."""
    return max(PAIR_BUDGET, 2 * sends)


def dependency_pairs_of(view: StepView, deps: Deps, budget: int | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """The exact pairs ``(q, j)`` of :class:`Deps` (int32 positions, ``q`` ascending, then
    ``j`` in group order), or ``None`` beyond ``budget`` candidates (default :func:`pair_budget`). A group whose
    pieces are disjoint (a pipelined tree's pieces: each reaches a node once) offers a send only
    the pieces overlapping its own, found by bisection, so its candidates are about its pairs;
    any other group offers its whole prefix. A send out of a switch is paired with the arrivals
    it forwards (``deps.forwards``)."""
    fw = deps.forwards
    z = np.zeros(0, np.int32)
    leave, arrival = (z, z) if fw is None else (fw.leave, fw.arrival)
    by_lo, disjoint = by_piece(view.lo, view.hi, deps.members, deps.gstart)
    di, dj, ok = overlapping_pairs(deps.g_in, deps.p, view.lo, view.hi, deps.members, deps.gstart, by_lo, disjoint,
                                   pair_budget(len(view)) if budget is None else budget, leave, arrival)
    if not ok:
        return None
    return di, dj


def dependency_pairs(schedule: Schedule, instance: Instance) -> tuple[np.ndarray, np.ndarray] | None:
    """Pairs ``(i, j)`` of schedule indices: send ``i`` needs the arrival of send ``j`` at its
    source (``j`` delivers an overlapping piece of the same chunk there in an earlier step),
    listed by ``i``, then ``j`` in (step, index) order; ``None`` if there are more than
    :data:`PAIR_BUDGET` candidates."""
    view = step_view(schedule)
    pairs = dependencies(view, instance, want_pairs=True, schedule=schedule).pairs
    if pairs is None:
        return None
    i, j = view.original(pairs[0]), view.original(pairs[1])
    by_i = np.argsort(i, kind="stable")
    return i[by_i].astype(np.int64), j[by_i].astype(np.int64)


# ---- switch nodes: the arrival every send out of a switch forwards -------------------------------
#
# A switch kept as a node stores nothing (TE-CCL: Liu et al., "Rethinking Machine Learning
# Collective Communication as a Multi-Commodity Flow Problem", SIGCOMM 2024, Section 4): a send
# out of it forwards one particular arrival, not whatever reached it before. The pairing rule
# (``docs/schedules.md``, "Switch nodes"): a send of chunk ``c`` out of switch ``s`` in step
# ``t`` forwards from the arrivals of ``c`` at ``s`` at the end of step ``a = t - back`` (its
# link's steps, one less over an instant hop). At every point of the chunk the arrivals of that
# step covering it are taken in schedule order and the sends forwarding them in (step, index)
# order: without ``switch_copy`` the j-th such send forwards the j-th arrival; with it the j-th
# such send on one out-link does (one arrival may leave on several links, once on each). A send
# with a point that has no arrival to forward is unpaired (the verifier's violation).


def ten_timing(schedule: Schedule, instance: Instance) -> tuple[np.ndarray, np.ndarray] | None:
    """Per send: ``(delay, latency)`` on the TEN timestep the schedule declares
    (``meta["timestep_s"]``; :func:`collsynth.tens.ten.link_delays` and ``link_latency``), 1 and
    0 for sends off the links; None without a usable declared timestep."""
    f = schedule.meta.get("timestep_s")
    if f is None or not len(schedule):
        return None
    topo = instance.topology
    try:
        f = float(f)
        delay, _, _ = link_delays(topo, [c.chunk_bytes for c in instance.collectives], f, switches=True)
    except (NotSupported, TypeError, ValueError):
        return None
    pair = topo.link_arrays.lookup(schedule.src, schedule.dst)
    group = np.searchsorted(np.asarray(instance.chunk_offsets), schedule.chunk, side="right") - 1
    on = pair >= 0
    n = len(schedule)
    k, lat = np.ones(n, np.int64), np.zeros(n, np.int64)
    k[on] = delay[np.clip(group[on], 0, delay.shape[0] - 1), pair[on]]
    lat[on] = link_latency(topo, f)[pair[on]]
    return k, lat


def switch_delays(schedule: Schedule, instance: Instance) -> np.ndarray:
    """Per send: the steps from leaving its source to arriving (1, or its TEN delay plus its
    latency when the schedule declares the TEN timestep ``meta["timestep_s"]`` it was built on,
    :func:`ten_timing`; sends off the links count 1)."""
    timing = ten_timing(schedule, instance)
    if timing is None:
        return np.ones(len(schedule), dtype=np.int64)
    k, lat = timing
    return k + lat


def switch_mask(topology) -> np.ndarray:
    """bool ``[node]``: the live switch nodes."""
    mask = np.zeros(topology.size, dtype=bool)
    mask[[v for v in topology.switches if v in topology.graph]] = True
    return mask


def switch_back(schedule: Schedule, instance: Instance, sends: np.ndarray | None = None) -> np.ndarray:
    """Per send (of ``sends``, indices; default all): the steps between the arrival a send out
    of a switch forwards and its own step (:func:`switch_delays`, one less over an instant
    switch-to-NPU hop, :func:`collsynth.tens.ten.instant_hops`)."""
    s = schedule
    if sends is not None:
        s = Schedule(s.collective, s.nodes, s.chunks, s.chunk[sends], s.lo[sends], s.hi[sends], s.src[sends],
                     s.dst[sends], s.step[sends], s.op[sends], s.denom, s.routing, s.meta)
    instant = instant_hops(instance.topology, s.src, s.dst)
    return switch_delays(s, instance) - instant.astype(np.int64)


@dataclass(frozen=True)
class Forwards:
    """Which arrival every send out of a switch forwards (the rule above), in the positions of
    the sends given to :func:`switch_forwards` (their stable step order).

    ``leave``, ``arrival``: the pairs (int32), by ``leave`` then ``arrival``; a send of whole
    chunks forwards one arrival, a piece one per part it takes from a different arrival.
    ``unpaired``: the leaving sends with a point no arrival serves, ascending. ``run[i]`` (int32):
    for a send into a switch, the number of its (chunk, switch, step) (-1 for the other sends).
    """

    leave: np.ndarray
    arrival: np.ndarray
    unpaired: np.ndarray
    run: np.ndarray


@njit(cache=True, nogil=True, inline='always')
def _row(order, p):
    """The row of the columns that position ``p`` reads: ``order[p]``, or ``p`` when ``order``
    is empty (the columns are in position order)."""
    return order[p] if len(order) else p


@njit(cache=True, nogil=True, inline='always')
def _event_key(e, chunk, src, dst, step, rank, back, order):
    """``(chunk, switch, step of the arrival)`` of event ``e``: the arrival of position ``e``
    at a switch, or (``e < 0``) the send of position ``~e`` out of one, which forwards the
    arrivals ``back`` steps before its own step (``back`` of one entry: every send's)."""
    p = e if e >= 0 else ~e
    q = _row(order, p)
    t = np.int64(step[rank[q]]) if len(rank) else np.int64(step[q])
    if e >= 0:
        return np.int64(chunk[q]), np.int64(dst[q]), t
    return np.int64(chunk[q]), np.int64(src[q]), t - (back[q] if len(back) > 1 else back[0])


@njit(cache=True, nogil=True)
def _switch_events(switch, src, dst, order, n):
    """The events of the positions ``0 .. n - 1`` (int32, :func:`_event_key`): every arrival
    at a switch by position, then every send out of one (as ``~position``) by position;
    ``(events, sends out of switches, (least, greatest) chunk, switch and step of the events)``."""
    m_in = m_out = 0
    for p in range(n):
        q = _row(order, p)
        m_in += switch[dst[q]]
        m_out += switch[src[q]]
    ev = np.empty(m_in + m_out, np.int32)
    a, b = 0, m_in
    for p in range(n):
        q = _row(order, p)
        if switch[dst[q]]:
            ev[a] = p
            a += 1
        if switch[src[q]]:
            ev[b] = ~p
            b += 1
    return ev, m_out


@njit(cache=True, nogil=True)
def _event_ranges(ev, chunk, src, dst, step, rank, back, order):
    """``[[least, greatest]]`` of the events' chunks, switches and steps (int64, 3 x 2)."""
    out = np.empty((3, 2), np.int64)
    for x in range(len(ev)):
        key = _event_key(ev[x], chunk, src, dst, step, rank, back, order)
        for j in range(3):
            if x == 0 or key[j] < out[j, 0]:
                out[j, 0] = key[j]
            if x == 0 or key[j] > out[j, 1]:
                out[j, 1] = key[j]
    return out


@njit(cache=True, nogil=True)
def _events_by(ev, out, j, least, keys, chunk, src, dst, step, rank, back, order):
    """Stable counting sort of the events ``ev`` into ``out`` by part ``j`` of their key
    (:func:`_event_key`), whose values lie in ``least .. least + keys - 1``."""
    starts = np.zeros(keys + 2, np.int32)
    for x in range(len(ev)):
        starts[_event_key(ev[x], chunk, src, dst, step, rank, back, order)[j] - least + 2] += 1
    for k in range(keys):
        starts[k + 2] += starts[k + 1]
    for x in range(len(ev)):
        k = _event_key(ev[x], chunk, src, dst, step, rank, back, order)[j] - least + 1
        out[starts[k]] = ev[x]
        starts[k] += 1


@njit(cache=True, nogil=True)
def _event_keys(ev, chunk, src, dst, step, rank, back, order):
    """The events' keys as three int64 columns (chunk, switch, step): for a comparison sort."""
    keys = np.empty((3, len(ev)), np.int64)
    for x in range(len(ev)):
        keys[0, x], keys[1, x], keys[2, x] = _event_key(ev[x], chunk, src, dst, step, rank, back, order)
    return keys


def _sorted_events(ev, cols, ranges):
    """The events by (chunk, switch, step), stable: counting sorts by step, then switch, then
    chunk, least significant first (Knuth, "The Art of Computer Programming", vol. 3, section
    5.2.5), when their ranges are small; a comparison sort otherwise."""
    spans = ranges[:, 1] - ranges[:, 0] + 1
    if (spans <= 2 * len(ev) + (1 << 20)).all():
        other = np.empty_like(ev)
        for j in (2, 1, 0):
            _events_by(ev, other, j, int(ranges[j, 0]), int(spans[j]), *cols)
            ev, other = other, ev
        return ev
    keys = _event_keys(ev, *cols)
    return ev[np.lexsort((keys[2], keys[1], keys[0]))]


@njit(cache=True, nogil=True)
def _grown_pairs(pairs, k):
    """``pairs`` with room for twice as many rows (the first ``k`` kept)."""
    out = np.empty((2 * len(pairs), 2), pairs.dtype)
    out[:k] = pairs[:k]
    return out


@njit(cache=True, nogil=True)
def _grown(buffer, need):
    """``buffer``, or a larger one of its type (contents not kept) when it holds fewer than ``need``."""
    return buffer if len(buffer) >= need else np.empty(max(need, 2 * len(buffer)), buffer.dtype)


@njit(cache=True, nogil=True)
def _pair_runs(ev, m_out, chunk, src, dst, lo, hi, step, rank, back, order, denom, copy_at, reduce_at, combining,
               size, n):
    """The pairing of every run of one (chunk, switch, step) (events sorted by them, arrivals
    first, each part in position order): ``(pairs, k, unpaired, run)``, the pairs (leaving,
    arrival) in ``pairs[:k]``, ``unpaired`` and ``run`` as :class:`Forwards` holds them (a bool
    per position for the first). A run of whole chunks pairs by counting; one with pieces
    point by point over its breakpoints. A send's out-link is its destination.
    ``copy_at[switch]``: it multicasts; ``reduce_at[switch]``: it reduces, for the chunks
    ``combining[chunk]`` marks."""
    m = len(ev)
    pairs = np.empty((max(16, m_out), 2), np.int32)
    k = 0
    unpaired = np.zeros(n, np.bool_)
    run = np.full(n, -1, np.int32)
    count = np.zeros(size, np.int64)
    cover = np.empty(16, np.int32)
    pts = np.empty(32, np.int64)
    runs, a = 0, 0
    while a < m:
        key = _event_key(ev[a], chunk, src, dst, step, rank, back, order)
        b = a + 1
        while b < m and _event_key(ev[b], chunk, src, dst, step, rank, back, order) == key:
            b += 1
        c = a
        while c < b and ev[c] >= 0:
            run[ev[c]] = runs
            c += 1
        runs += 1
        whole = True
        for x in range(a, b):
            q = _row(order, ev[x] if ev[x] >= 0 else ~ev[x])
            whole = whole and lo[q] == 0 and hi[q] == denom
        segments = 1
        cuts = pts[:0]
        if not whole:  # the run's breakpoints (no allocation for whole chunks)
            pts = _grown(pts, 2 * (b - a))
            for x in range(a, b):
                q = _row(order, ev[x] if ev[x] >= 0 else ~ev[x])
                pts[2 * (x - a)], pts[2 * (x - a) + 1] = lo[q], hi[q]
            cuts = np.unique(pts[:2 * (b - a)])
            segments = len(cuts) - 1
        cover = _grown(cover, c - a)
        copy = copy_at[key[1]]
        reduce = reduce_at[key[1]] and combining[key[0]]
        for g in range(segments):
            p0, p1 = (0, denom) if whole else (cuts[g], cuts[g + 1])
            pairs, k = _pair_segment(ev, a, c, b, p0, p1, lo, hi, dst, order, copy, reduce, count, cover, pairs, k,
                                     unpaired)
        a = b
    return pairs, k, unpaired, run


@njit(cache=True, nogil=True, inline='always')
def _pair_segment(ev, a, c, b, p0, p1, lo, hi, dst, order, copy, reduce, count, cover, pairs, k, unpaired):
    """Pair the forwards ``ev[c:b]`` covering ``[p0, p1)`` with the arrivals ``ev[a:c]``
    covering it (the rule above; ``count``: per out-link, zero again on return); appends to
    ``pairs[:k]`` and returns ``(pairs, k)``, marking forwards with no arrival ``unpaired``.
    At a reducing switch (``reduce``) the arrivals are one partial sum: the first forward
    (the first on each out-link with ``copy``) is paired with every one of them."""
    na = 0
    for x in range(a, c):
        q = _row(order, ev[x])
        if lo[q] <= p0 and hi[q] >= p1:
            cover[na] = ev[x]
            na += 1
    j = 0
    for x in range(c, b):
        p = ~ev[x]
        q = _row(order, p)
        if lo[q] <= p0 and hi[q] >= p1:
            port = dst[q]
            if copy:
                jj = count[port]
                count[port] += 1
            else:
                jj = j
                j += 1
            if reduce and jj == 0 and na > 0:
                for y in range(na):
                    if k == len(pairs):
                        pairs = _grown_pairs(pairs, k)
                    pairs[k, 0], pairs[k, 1] = p, cover[y]
                    k += 1
            elif not reduce and jj < na:
                if k == len(pairs):
                    pairs = _grown_pairs(pairs, k)
                pairs[k, 0], pairs[k, 1] = p, cover[jj]
                k += 1
            else:
                unpaired[p] = True
    if copy:
        for x in range(c, b):
            count[dst[_row(order, ~ev[x])]] = 0
    return pairs, k


@njit(cache=True, nogil=True)
def _by_leave(pairs, k, n):
    """The distinct pairs of ``pairs[:k]`` sorted by leaving send, then arrival (int32): a
    counting sort by leaving send and, within one (a piece takes few arrivals), an insertion
    sort that drops repeats."""
    starts = np.zeros(n + 2, np.int32)
    for x in range(k):
        starts[pairs[x, 0] + 2] += 1
    for d in range(n):
        starts[d + 2] += starts[d + 1]
    arrival = np.empty(k, np.int32)
    for x in range(k):  # starts[d + 1] fills leaving send d, ending at its end (as in counting_order_of)
        d = pairs[x, 0] + 1
        arrival[starts[d]] = pairs[x, 1]
        starts[d] += 1
    leave = np.empty(k, np.int32)
    w = 0
    for d in range(n):
        first = w
        for x in range(starts[d], starts[d + 1]):
            a = arrival[x]
            y = w
            while y > first and arrival[y - 1] > a:
                y -= 1
            if y > first and arrival[y - 1] == a:
                continue
            for z in range(w, y, -1):
                arrival[z] = arrival[z - 1]
            arrival[y] = a
            leave[w] = d
            w += 1
    return leave[:w], arrival[:w]


def switch_forwards(chunk, src, dst, lo, hi, step, back, switch: np.ndarray, copy, denom: int,
                    reduce: np.ndarray | None = None, combining: np.ndarray | None = None,
                    order: np.ndarray | None = None, rank: np.ndarray | None = None) -> Forwards:
    """The :class:`Forwards` of sends in stable step order (the rule above): ``back`` per
    send, the steps from the arrival a send out of a switch forwards to its own step
    (:func:`switch_back`; one entry: every send's, :func:`switch_back_of`); ``switch[node]`` the
    live switches; ``copy`` the schedule's ``switch_copy`` or, per node, whether it multicasts
    (:func:`collsynth.tens.switch_rule.switch_rule`); ``reduce[node]`` the reducing switches,
    which combine the arrivals of the chunks ``combining[chunk]`` marks. The columns are in
    step order, or ``order`` lists their rows in step order (the result is in positions of
    that order); with ``rank``, a send's step is ``step[rank[row]]`` (a
    :class:`StepView`'s). Every array the pairing works on is of int32 positions: no column is
    copied.

    >>> sw = np.array([False, False, False, True])
    >>> one = np.ones(4, np.int64)
    >>> f = switch_forwards(np.zeros(4, np.int32), np.array([0, 0, 3, 3]), np.array([3, 3, 1, 2]),
    ...                     np.zeros(4, np.int64), one, np.array([1, 1, 2, 2]), one, sw, False, 1)
    >>> f.leave.tolist(), f.arrival.tolist(), f.unpaired.tolist()
    ([2, 3], [0, 1], [])
    >>> g = switch_forwards(np.zeros(3, np.int32), np.array([0, 3, 3]), np.array([3, 1, 2]),
    ...                     np.zeros(3, np.int64), one[:3], np.array([1, 2, 2]), one[:1], sw, False, 1)
    >>> g.leave.tolist(), g.arrival.tolist(), g.unpaired.tolist()
    ([1], [0], [2])
    """
    n = len(chunk) if order is None else len(order)
    order = np.zeros(0, np.int32) if order is None else order
    rank = np.zeros(0, np.int32) if rank is None else rank
    ev, m_out = _switch_events(switch, src, dst, order, n)
    z = np.zeros(0, np.int32)
    if not m_out:
        return Forwards(z, z, z, np.full(n, -1, np.int32))
    cols = (chunk, src, dst, step, rank, back, order)
    ranges = _event_ranges(ev, *cols)
    if ranges[0, 0] < 0 or ranges[1, 0] < 0:
        raise ValueError("switch_forwards: negative chunk or node ids")
    ev = _sorted_events(ev, cols, ranges)
    size = int(max(len(switch), ranges[1, 1] + 1))
    copy_at = np.zeros(size, np.bool_)
    copy_at[:len(switch)] = copy
    reduce_at = np.zeros(size, np.bool_)
    if reduce is not None:
        reduce_at[:len(reduce)] = reduce
    chunks = int(ranges[0, 1]) + 1
    combining = np.ones(chunks, np.bool_) if combining is None else np.asarray(combining, np.bool_)
    combining = np.r_[combining, np.zeros(max(0, chunks - len(combining)), np.bool_)]
    pairs, k, unpaired, run = _pair_runs(ev, m_out, chunk, src, dst, lo, hi, step, rank, back, order, denom,
                                         copy_at, reduce_at, combining, size, n)
    del ev
    leave, arrival = _by_leave(pairs, k, n)
    return Forwards(leave, arrival, np.flatnonzero(unpaired), run)


def switch_back_of(schedule: Schedule, instance: Instance) -> np.ndarray:
    """:func:`switch_back` as :func:`switch_forwards` takes it: ``[1]`` when it is 1 for every
    send (the schedule declares no TEN timestep and no switch hop is instant), else one entry
    per send (int32)."""
    if schedule.meta.get("timestep_s") is None and not switch_hop_instant(instance.topology):
        return np.ones(1, np.int32)
    return switch_back(schedule, instance).astype(np.int32)
