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

from ..instances.instance import Instance
from .cost import _dependencies
from .dependencies import step_order, switch_back, switch_forwards, switch_mask
from .schedule import Schedule, from_arrays
from .ten import SWITCH_COPY


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


def flattened(schedule: Schedule, instance: Instance) -> tuple[Schedule, list[tuple]]:
    """Every route GPU -> switch(es) -> GPU of ``schedule`` as one send (the sends between GPUs
    as they are, sends into switches that nothing forwards dropped), with the op of the send
    that delivers it, and per send the row ``(chunk, lo, hi, src, dst, step, first hop, last
    hop, switches crossed)`` (hops as indices into ``schedule``)."""
    s = schedule
    switch = switch_mask(instance.topology)
    came = _forwarded_arrivals(s, instance, switch)
    rows = []  # (chunk, lo, hi, src, dst, step, first hop, last hop, path)
    for i in range(len(s)):
        c, lo, hi, u, v, t = (int(x[i]) for x in (s.chunk, s.lo, s.hi, s.src, s.dst, s.step))
        if switch[v]:
            continue
        if not switch[u]:
            rows.append((c, lo, hi, u, v, t, i, i, ()))
            continue
        rows.extend((c, a_lo, a_hi, int(s.src[a]), v, t, a, i, path)
                    for a, a_lo, a_hi, path in _trace(s, switch, came, i, lo, hi))
    cols = list(zip(*rows)) if rows else [()] * 9
    op = s.op[np.asarray(cols[7], dtype=np.int64)] if rows else None
    flat = from_arrays(s.collective, s.nodes, s.chunks, chunk=cols[0], lo=cols[1], hi=cols[2], src=cols[3],
                       dst=cols[4], step=cols[5], denom=s.denom, op=op, routing="shortest-path", meta=dict(s.meta))
    return flat, rows


def _forwarded_arrivals(s: Schedule, instance: Instance, switch: np.ndarray) -> dict[int, list[int]]:
    """``{send out of a switch: the arrivals it forwards, in (step, index) order}``."""
    order = step_order(s.step)[0]
    cols = [c[order] for c in (s.chunk, s.src, s.dst, s.lo, s.hi, s.step, switch_back(s, instance))]
    fw = switch_forwards(*cols, switch, bool(s.meta.get("switch_copy", SWITCH_COPY)), s.denom)
    came: dict[int, list[int]] = defaultdict(list)
    for d, a in zip(order[fw.leave].tolist(), order[fw.arrival].tolist()):
        came[d].append(a)
    return came


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
