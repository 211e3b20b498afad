"""Routes through switch nodes as single transfers between GPUs: what a runtime that cannot
address a switch (MSCCL, whose programs name ranks only: Cowan et al., "MSCCLang: Microsoft
Collective Communication Language", ASPLOS 2023) executes of a schedule that keeps its switches.

A switch stores nothing and each send out of it forwards particular arrivals (the pairing rule
of ``docs/schedules.md``, "Switch nodes"; TE-CCL: Liu et al., SIGCOMM 2024, Section 4), so a
route GPU -> switch(es) -> GPU is one message: following every delivery to a GPU back through
the arrivals its switch hops forward gives the GPU it left and the switches it crossed.

>>> from collsynth.instances.generators import build
>>> from collsynth.instances.instance import make_instance
>>> from collsynth.tens.schedule import from_sends
>>> inst = make_instance(build("switch", {"nodes": 3, "unwind": 0}), "broadcast", root=0)
>>> fan = from_sends([(0, 0, 1, 0, 3, 1), (0, 0, 1, 3, 1, 2), (0, 0, 1, 3, 2, 2)], "broadcast", 4, 1)
>>> r = switch_routes(fan, inst)
>>> [(x.src, x.dst, x.step) for x in r.schedule.sends()], r.path
([(0, 1, 2), (0, 2, 2)], [(3,), (3,)])
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from numba import njit

from ..instances.instance import Instance
from .cost import _dependencies
from .dependencies import step_order, switch_back_of, switch_forwards, switch_mask
from .switch_rule import switch_rule
from .schedule import Schedule, from_arrays


@dataclass(frozen=True)
class SwitchRoutes:
    """A schedule's transfers between ranks: every route GPU -> switch(es) -> GPU is one send.

    ``schedule``: the sends over links between GPUs as they are and one send per route through
    switches (from the GPU that sent it into the first switch to the GPU the last switch
    delivers it to, in the step of that delivery; ``routing`` ``"shortest-path"`` when there is
    such a route). ``path[i]``: the switches send ``i`` crosses, in order (``()`` over a link).
    ``pairs``: the data dependencies ``(i, j)`` between these sends, those of the route's first
    hop (``None`` without switches: the schedule's own).
    """

    schedule: Schedule
    path: list[tuple[int, ...]]
    pairs: tuple[list[int], list[int]] | None


def switch_routes(schedule: Schedule, instance: Instance) -> SwitchRoutes:
    """The :class:`SwitchRoutes` of a verified schedule: every send out of a switch into a GPU
    is followed back, through the arrivals each switch hop forwards (the pairing rule of
    ``docs/schedules.md``, :func:`collsynth.tens.dependencies.switch_forwards`), to the GPUs
    the parts of its piece came from. Sends into switches that nothing forwards are dropped.
    """
    s = schedule
    switch = switch_mask(instance.topology)
    if not len(s) or not (switch[s.src] | switch[s.dst]).any():
        return SwitchRoutes(s, [()] * len(s), None)
    flat, rows = flattened(s, instance)
    return SwitchRoutes(flat, [row[8] for row in rows], _route_dependencies(s, instance, rows))


def summed_in_switch(schedule: Schedule, instance: Instance) -> int | None:
    """The first send (index) of a combining chunk into or out of a reducing switch
    (:mod:`collsynth.instances.switch_ops`), or None: a schedule that sums in a switch, which
    no route between ranks can stand for (an exporter without switch channels refuses it)."""
    rule = switch_rule(schedule, instance)
    chunk = np.minimum(schedule.chunk, len(rule.combining) - 1)
    hit = np.flatnonzero(rule.combining[chunk] & (rule.reduce[schedule.src] | rule.reduce[schedule.dst]))
    return int(hit[0]) if len(hit) else None


def flattened(schedule: Schedule, instance: Instance) -> tuple[Schedule, list[tuple]]:
    """Every route GPU -> switch(es) -> GPU of ``schedule`` as one send (the sends between GPUs
    as they are, sends into switches that nothing forwards dropped), with the op of the send
    that delivers it, and per send the row ``(chunk, lo, hi, src, dst, step, first hop, last
    hop, switches crossed)`` (hops as indices into ``schedule``)."""
    flat, first, last, path = flat_routes(schedule, instance)
    cols = (flat.chunk, flat.lo, flat.hi, flat.src, flat.dst, flat.step, first, last)
    return flat, [(*(int(x) for x in row), p) for *row, p in zip(*cols, path)]


def flat_routes(schedule: Schedule, instance: Instance, paths: bool = True,
                switch: np.ndarray | None = None) -> tuple[Schedule, np.ndarray, np.ndarray, list | None]:
    """:func:`flattened` as arrays: the schedule of one send per route, each route's first and
    last hop (indices into ``schedule``) and the switches it crosses (None unless ``paths``). A send out of a switch
    that forwards one arrival from a GPU covering its whole piece is the route of one switch
    (vectorised); the others are followed back hop by hop (:func:`_trace`). ``switch`` (default:
    every live switch) says which nodes are followed through; the others end routes."""
    s = schedule
    switch = switch_mask(instance.topology) if switch is None else switch
    fw = _forwarded_pairs(s, instance, switch)
    direct = np.flatnonzero(~switch[s.src] & ~switch[s.dst])
    outs = np.flatnonzero(switch[s.src] & ~switch[s.dst])
    a = _single_arrivals(fw[0], fw[1], outs, len(s))
    simple = (a >= 0) & ~switch[s.src[np.maximum(a, 0)]] & (s.lo[np.maximum(a, 0)] <= s.lo[outs]) \
        & (s.hi[np.maximum(a, 0)] >= s.hi[outs])
    easy, hard = outs[simple], outs[~simple]
    first = [direct, a[simple]]
    last = [direct, easy]
    cols = {"chunk": [s.chunk[direct], s.chunk[easy]], "lo": [s.lo[direct], s.lo[easy]],
            "hi": [s.hi[direct], s.hi[easy]], "src": [s.src[direct], s.src[a[simple]]]}
    path = [()] * len(direct) + [(int(u),) for u in s.src[easy].tolist()] if paths else []
    came: dict[int, list[int]] = defaultdict(list)
    traced = ~np.isin(fw[0], easy)  # the hard sends and the switch-to-switch hops they follow back
    for x, y in zip(*(v[traced].tolist() for v in fw)):
        came[x].append(y)
    rows = [(a_lo, a_hi, f, i, p) for i in hard.tolist()
            for f, a_lo, a_hi, p in _trace(s, switch, came, i, int(s.lo[i]), int(s.hi[i]))]
    if rows:
        r_lo, r_hi, r_first, r_last, r_path = zip(*rows)
        r_first, r_last = np.asarray(r_first, np.int64), np.asarray(r_last, np.int64)
        first.append(r_first), last.append(r_last), path.extend(r_path if paths else ())
        for name, col in (("chunk", s.chunk[r_last]), ("lo", np.asarray(r_lo, np.int64)),
                          ("hi", np.asarray(r_hi, np.int64)), ("src", s.src[r_first])):
            cols[name].append(col)
    first, last = np.concatenate(first), np.concatenate(last)
    order = np.argsort(last, kind="stable")  # the schedule's order of deliveries
    arr = {k: np.concatenate(v)[order] for k, v in cols.items()}
    flat = from_arrays(s.collective, s.nodes, s.chunks, **arr, dst=s.dst[last[order]], step=s.step[last[order]],
                       denom=s.denom, op=s.op[last[order]], routing="shortest-path", meta=dict(s.meta))
    return flat, first[order], last[order], [path[i] for i in order.tolist()] if paths else None


@njit(cache=True, nogil=True)
def _single_arrivals(leave, arrival, outs, n):
    """Per send of ``outs``: the one arrival it forwards, or -1 when it forwards none or
    several (``leave``, ``arrival``: the pairs by leaving send)."""
    one = np.full(n, -1, np.int32)
    x = 0
    while x < len(leave):
        y = x + 1
        while y < len(leave) and leave[y] == leave[x]:
            y += 1
        if y == x + 1:
            one[leave[x]] = arrival[x]
        x = y
    out = np.empty(len(outs), np.int64)
    for k in range(len(outs)):
        out[k] = one[outs[k]]
    return out


def _forwarded_pairs(s: Schedule, instance: Instance, switch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(send out of a switch, arrival it forwards)`` pairs, by the first then the second."""
    order = step_order(s.step)[0]
    rule = switch_rule(s, instance)
    fw = switch_forwards(s.chunk, s.src, s.dst, s.lo, s.hi, s.step, switch_back_of(s, instance), switch, rule.copy,
                         s.denom, rule.reduce & switch, rule.combining, order=order)
    leave, arrival = order[fw.leave].astype(np.int64), order[fw.arrival].astype(np.int64)
    del order, fw
    key = np.lexsort((arrival, leave))
    return leave[key], arrival[key]


def _trace(s: Schedule, switch: np.ndarray, came: dict, x: int, lo: int, hi: int):
    """``(first hop, lo, hi, switches)`` of the routes that bring ``[lo, hi)`` of send ``x``
    (out of a switch) to its switch: each arrival it forwards takes the part of the piece no
    earlier one took, followed back while it comes out of a switch itself."""
    u = int(s.src[x])
    free = [(lo, hi)]
    for a in came.get(x, ()):
        a_lo, a_hi = int(s.lo[a]), int(s.hi[a])
        taken = [(max(l, a_lo), min(h, a_hi)) for l, h in free if max(l, a_lo) < min(h, a_hi)]
        free = [part for l, h in free for part in ((l, min(h, a_lo)), (max(l, a_hi), h)) if part[0] < part[1]]
        for p_lo, p_hi in taken:
            if switch[s.src[a]]:
                for f, f_lo, f_hi, path in _trace(s, switch, came, a, p_lo, p_hi):
                    yield f, f_lo, f_hi, path + (u,)
            else:
                yield a, p_lo, p_hi, (u,)


def _route_dependencies(s: Schedule, instance: Instance, rows: list) -> tuple[list[int], list[int]]:
    """Pairs ``(x, y)`` of :func:`switch_routes`'s sends: ``x``'s first hop needs the arrival
    that ``y``'s last hop makes (the schedule's dependencies), and their pieces overlap."""
    di, dj = _dependencies(s, instance)
    need: dict[int, list[int]] = defaultdict(list)
    for i, j in zip(di.tolist(), dj.tolist()):
        need[i].append(j)
    by_last: dict[int, list[int]] = defaultdict(list)
    for y, row in enumerate(rows):
        by_last[row[7]].append(y)
    xs, ys = [], []
    for x, row in enumerate(rows):
        for j in need.get(row[6], ()):
            for y in by_last.get(j, ()):
                if rows[y][1] < row[2] and row[1] < rows[y][2]:
                    xs.append(x)
                    ys.append(y)
    return xs, ys
