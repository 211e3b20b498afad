"""Verification: does a schedule implement its instance's collective(s) on its topology?

Semantics (``docs/schedules.md``; the holdings ``H_t`` of Won et al., "TACOS: Topology-Aware
Collective Algorithm Synthesizer for Distributed Training", MICRO 2024, section IV-B and the ILP
of its Fig. 12, with pieces and contributions added):

- ``H_0`` is the collective's precondition. The sends of step ``t`` read the state at the end
  of step ``t-1``; what they deliver is applied at the end of step ``t``.
- A send of piece ``[lo, hi)`` of chunk ``c`` over ``u -> v`` in step ``t`` is legal only if
  ``u -> v`` is a live link (or, for ``routing == "shortest-path"``, ``u`` reaches ``v`` through
  live links) and ``u`` holds that whole piece at the end of step ``t-1``.
- The schedule implements the collective iff every ``(c, v)`` of the postcondition is held
  whole at the end.
- Combining collectives (reduce, reduce_scatter, allreduce) track, per piece and node, the
  *set of contributing ranks* (packed uint64 bitsets). Every participant starts with its own
  contribution to every chunk. A ``reduce`` send adds the sender's set to the receiver's and
  is a violation if a rank would be counted twice (overlap with the receiver's set, or between
  two arrivals in the same step); a ``copy`` send overwrites the receiver's set. At the end
  every required ``(c, v)`` must hold each participant exactly once.
- Switch nodes (a topology that keeps its switches) hold nothing and need nothing, as TE-CCL
  models them (Liu et al., "Rethinking Machine Learning Collective Communication as a
  Multi-Commodity Flow Problem", SIGCOMM 2024, Section 4): a send into a switch delivers
  nothing; a send out of switch ``s`` over a link of delay ``k`` in step ``t`` (it starts in
  step ``t - k + 1``) forwards what arrived at ``s`` at the end of step ``t - k``, and every
  part of its piece must have arrived then. ``k`` is 1 unless the schedule declares the TEN
  timestep it was built on (``meta["timestep_s"]``), which gives every link its TEN delay
  (:func:`collsynth.tens.ten.link_delays`). Each send out of a switch forwards particular
  arrivals of that step (:func:`collsynth.tens.dependencies.switch_forwards`: at every point
  the j-th send leaving forwards the j-th arrival); with ``meta["switch_copy"]`` false (no
  multicast) the j counts every send leaving, true (the default, as TE-CCL's) counts those on
  one out-link only, so one arrival may leave on several links, once on each. When the
  topology's ``meta["switch_hop"]`` is ``"instant"`` (TE-CCL's default switch-to-GPU hop,
  :func:`collsynth.tens.ten.switch_hop_instant`) a send from the switch to an NPU forwards what
  arrived at the end of step ``t - k + 1``: it starts in the step the piece reached the switch;
  a send from the switch to another switch never does (:func:`collsynth.tens.ten.instant_hops`:
  two switches linked both ways would otherwise pass a piece nobody sent round a cycle of
  zero steps).
  :func:`switch_violation` checks these rules. A combining collective relayed through switches
  is simulated with one send per route GPU -> switch(es) -> GPU (a switch forwards without
  reducing; reductions happen at GPUs only, each contributor exactly once), provided a route's
  source does not receive an overlapping piece between its first hop and the delivery
  (:func:`_relayed_violation`; refused otherwise, and under a pipelined latency).
- A pipelined link latency (topology ``meta["latency"] == "pipelined"``, TE-CCL's model,
  :func:`collsynth.tens.ten.latency_pipelined`) makes a schedule's steps TEN timesteps: when it
  declares the TEN timestep ``meta["timestep_s"]``, a send over a link pair of delay ``k`` and
  latency ``L`` (:func:`collsynth.tens.ten.link_latency`) arriving in step ``e`` occupied the
  pair in steps ``e - L - k + 1 .. e - L`` and read its source at the end of step
  ``e - L - k`` (``e - L - k + 1`` over an instant switch-to-NPU hop): :func:`pipelined_violation`
  checks that the source held the piece by then (availability by arrival; for a combining
  collective: no overlapping piece reaches the source between that step and ``e - 1``, so the
  state the simulation checks at ``e - 1`` is the one read). Link capacity is not part of
  validity, with either latency: congestion is what the cost models price, and whether a
  schedule's steps respect the TEN's capacity by occupancy (so that the ``timesteps`` lower
  bound applies to it) is :func:`collsynth.tens.bounds.respects_ten_capacity`. Without a
  pipelined latency steps are checked as above (each send reads step ``e - 1``).
- Malformed sends are violations too: step < 1, a piece outside ``[0, 1)``, a chunk id outside
  the collective(s), a node id out of range or failed, a missing or failed link.

Pieces are handled exactly: every chunk is split into elementary segments at all the ``lo``/
``hi`` breakpoints of its sends and holdings are tracked per (segment, node). Chunks evolve
independently, so a compiled loop (:mod:`collsynth.tens.verify_kernels`) simulates one chunk at
a time over its sends in step order, with state for that chunk only; the violation reported
is the same whatever the order of the chunks.

>>> from collsynth.instances.generators import build
>>> from collsynth.instances.instance import make_instance
>>> from collsynth.tens.schedule import from_sends
>>> inst = make_instance(build("ring", {"nodes": 3, "bidirectional": False}), "broadcast", root=0)
>>> ok = from_sends([(0, 0, 1, 0, 1, 1), (0, 0, 1, 1, 2, 2)], "broadcast", 3, 1)
>>> verify(ok, inst) is None
True
>>> print(verify(from_sends([(0, 0, 1, 1, 2, 1), (0, 0, 1, 0, 1, 1)], "broadcast", 3, 1), inst))
step 1, send [chunk 0 [0, 1) 1->2]: source does not hold the piece; it arrives there only at the end of step 1
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np
from numba import njit

from ..instances.collective import Collective
from ..instances.instance import Instance
from ..instances.topology import Topology
from . import verify_kernels as kern
from ..instances.switch_ops import reducing_mask
from .dependencies import (switch_back, switch_back_of, switch_delays, switch_forwards, switch_mask,  # noqa: F401
                           step_order, ten_timing, whole_pieces)
from .routing import adjacency, row_pointers
from .switch_rule import switch_rule
from .schedule import OP_COPY, OP_REDUCE, Schedule, Send
from .ten import instant_hops, latency_pipelined


@dataclass(frozen=True)
class Violation:
    """The first thing wrong with a schedule.

    ``index`` is the position of the offending send in the schedule and ``send`` that send
    (chunk ids as in the schedule, i.e. with concurrent offsets); both are ``None`` when the
    postcondition fails at the end (``step`` is then the schedule's last step).
    """

    index: int | None
    send: Send | None
    step: int
    reason: str

    def __str__(self) -> str:
        if self.send is None:
            return f"after step {self.step}: {self.reason}"
        s = self.send
        op = f" {s.op}" if s.op else ""
        return f"step {self.step}, send [chunk {s.chunk} [{s.lo}, {s.hi}) {s.src}->{s.dst}{op}]: {self.reason}"


class VerificationError(Exception):
    """Raised by :func:`check`; ``violation`` is the :class:`Violation`."""

    def __init__(self, violation: Violation):
        self.violation = violation
        super().__init__(str(violation))


def check(schedule: Schedule, instance: Instance) -> None:
    """Raise :class:`VerificationError` unless ``schedule`` implements ``instance``."""
    v = verify(schedule, instance)
    if v is not None:
        raise VerificationError(v)


def verify(schedule: Schedule, instance: Instance, *, well_formed: bool = False) -> Violation | None:
    """The first violation of ``schedule`` on ``instance``, or ``None`` if it is valid.

    Malformed sends are reported first (smallest index; :func:`malformed`, skipped when
    ``well_formed`` says it has been checked); then the simulation reports the
    earliest step with an illegal send (smallest index within it), else the first missing
    postcondition. Concurrent instances are split by ``instance.chunk_offsets`` and each
    collective is verified on its own chunk ids (they share only the network); the earliest
    violation over them is returned.
    """
    topo = instance.topology
    colls = instance.collectives
    offsets = instance.chunk_offsets
    v = None if well_formed else malformed(schedule, instance)
    if v is not None:
        return v
    switch = _switch_mask(topo)
    found = [v for coll, off in zip(colls, offsets) if (v := _simulate_one(schedule, instance, coll, off, switch))
             is not None]
    if switch.any() and (v := switch_violation(schedule, instance)) is not None:
        found.append(v)
    if (v := pipelined_violation(schedule, instance)) is not None:
        found.append(v)
    if not found:
        return None
    return min(found, key=lambda v: (v.step, v.index is None, v.index or 0))


# ---- messages ------------------------------------------------------------------------------

def _send(schedule: Schedule, i: int) -> Send:
    d = schedule.denom
    op = int(schedule.op[i])
    return Send(
        int(schedule.chunk[i]), Fraction(int(schedule.lo[i]), d), Fraction(int(schedule.hi[i]), d),
        int(schedule.src[i]), int(schedule.dst[i]), int(schedule.step[i]),
        {OP_COPY: "copy", OP_REDUCE: "reduce"}.get(op),
    )


def _at(schedule: Schedule, i: int, reason: str) -> Violation:
    return Violation(int(i), _send(schedule, int(i)), int(schedule.step[i]), reason)


def _interval(lo: int, hi: int, d: int) -> str:
    return f"[{Fraction(lo, d)}, {Fraction(hi, d)})"


def _intervals(los: np.ndarray, his: np.ndarray, d: int) -> str:
    """Merge adjacent ``[lo, hi)`` intervals (sorted) and print them."""
    out: list[list[int]] = []
    for a, b in zip(los.tolist(), his.tolist()):
        if out and out[-1][1] == a:
            out[-1][1] = b
        else:
            out.append([a, b])
    return ", ".join(_interval(a, b, d) for a, b in out)


def _dead_reason(topo: Topology, node: int) -> str:
    if node in topo.failed_nodes:
        return f"node {node} has failed"
    return f"node {node} is not a live node of the topology"


def _link_reason(s: Schedule, topo: Topology, u: int, v: int) -> str:
    if s.routing == "shortest-path":
        return f"no live path {u}->{v}"
    if (u, v) in topo.failed_links:
        return f"link {u}->{v} has failed"
    return f"no link {u}->{v} in the topology"


# ---- malformed sends -----------------------------------------------------------------------

def malformed(schedule: Schedule, instance: Instance) -> Violation | None:
    """The first malformed send of ``schedule`` on ``instance`` (a step before 1, a piece
    outside ``[0, 1)``, a chunk id outside the collective(s), an unknown op, a node id out of
    range or failed, a send to itself, a missing or failed link, a routed send with no path), or
    ``None``: every send's ids then index the instance's arrays, which is all the cost models'
    compiled loops need to read a schedule safely (what it implements is :func:`verify`'s)."""
    colls, offsets = instance.collectives, instance.chunk_offsets
    return _static(schedule, instance.topology, offsets[-1] + colls[-1].num_chunks)


def _static(s: Schedule, topo: Topology, total: int) -> Violation | None:
    """Malformed sends: steps, pieces, chunk ids, ops, node ids, links (one compiled pass; a
    breadth-first search per source for routed sends off the links)."""
    n = len(s)
    if s.denom < 1:
        return Violation(None, None, 0, f"piece denominator must be positive, got {s.denom}")
    if n == 0:
        return None
    size = topo.size
    alive = np.zeros(size, dtype=bool)
    alive[np.asarray(topo.nodes, dtype=np.int64)] = True
    la = topo.link_arrays
    row_ptr, link_dst = row_pointers(la), la.dst.astype(np.int32)
    routed = s.routing == "shortest-path"
    i, code = kern.first_malformed(s.step, s.chunk, s.lo, s.hi, s.op, s.src, s.dst, s.denom, total, alive, row_ptr,
                                   link_dst, routed)
    if routed:
        adj_ptr, nbr = adjacency(topo)
        far = kern.first_unreachable(s.src, s.dst, n if i < 0 else i, row_ptr, link_dst, adj_ptr, nbr, alive)
        if far >= 0:
            i, code = far, 7
    if i < 0:
        return None
    src, dst = int(s.src[i]), int(s.dst[i])
    reasons = [
        lambda: f"steps start at 1, got step {s.step[i]}",
        lambda: f"piece {_interval(s.lo[i], s.hi[i], s.denom)} is not a non-empty part of [0, 1)",
        lambda: f"chunk id {s.chunk[i]} is outside 0..{total - 1}",
        lambda: f"unknown op code {s.op[i]}",
        lambda: f"node {src if not 0 <= src < size else dst} is not in 0..{size - 1}",
        lambda: _dead_reason(topo, src if not alive[src] else dst),
        lambda: f"source and destination are the same node {src}",
        lambda: _link_reason(s, topo, src, dst),
    ]
    return _at(s, i, reasons[code]())


# Pieces of a schedule whose denominator is at most this are located by a table of its
# breakpoints (``denom + 1`` entries) rather than by a search.
SEGMENT_TABLE = 1 << 20

# ---- simulation ----------------------------------------------------------------------------

def _switch_mask(topo: Topology) -> np.ndarray:
    """bool ``[node]``: the live switch nodes."""
    return switch_mask(topo)


def _simulate_one(s: Schedule, instance: Instance, coll: Collective, off: int, switch: np.ndarray) -> Violation | None:
    """The first violation of one collective's sends (chunk ids ``off ..``), or ``None``; a
    combining collective whose sends touch a switch through :func:`_relayed_violation`."""
    if coll.combining and switch.any():
        reducing = reducing_mask(instance.topology)
        summed = _first_touching(s.chunk, s.src, s.dst, off, off + coll.num_chunks, reducing)
        if summed >= 0:
            return _summed_violation(s, instance, coll, off, switch & ~reducing, reducing, summed)
        touch = _first_touching(s.chunk, s.src, s.dst, off, off + coll.num_chunks, switch)
        if touch >= 0:
            return _relayed_violation(s, instance, coll, off, switch, touch)
    return _simulate(s, coll, off, switch)


@njit(cache=True, nogil=True)
def _first_touching(chunk, src, dst, c0, c1, nodes) -> int:
    """The first send of a chunk in ``c0 .. c1 - 1`` from or to a node ``nodes`` marks, or -1
    (one pass, no temporaries)."""
    for i in range(len(chunk)):
        if c0 <= chunk[i] < c1 and (nodes[src[i]] or nodes[dst[i]]):
            return i
    return -1


def _summed_violation(s: Schedule, instance: Instance, coll: Collective, off: int, plain: np.ndarray,
                      reducing: np.ndarray, touch: int) -> Violation | None:
    """The first violation of a combining collective reduced in switches, or None.

    Each group operation of a reducing switch (what reaches it for one chunk in one step) is a
    node of its own that starts empty, adds up every contribution that arrives (each rank at
    most once: :func:`_simulate`'s count per contributor) and sends that partial sum on, so
    sends into and out of switch ``w`` are relabelled to the node of ``(w, arrival step)``
    (a send out of ``w`` reads the arrivals :func:`collsynth.tens.dependencies.switch_back`
    steps before it; whatever reaches it is added, a copy too) and the schedule is simulated as
    one between GPUs and these nodes; routes
    through switches that only forward are first made single sends (:func:`_relayed_violation`'s
    rule). How often a partial sum may leave is :func:`switch_violation`'s rule."""
    from .switch_routes import flat_routes

    topo = instance.topology
    if latency_pipelined(topo) or (reducing[s.src] & instant_hops(topo, s.src, s.dst)).any():
        return _at(s, touch, f"a {coll.kind} reduced in a switch under a pipelined latency or an instant switch hop: "
                             "not verified")
    back = switch_back(s, instance)
    if plain.any() and (plain[s.src] | plain[s.dst]).any():
        flat, first, last, _ = flat_routes(s, instance, paths=False, switch=plain)
        part = (flat.chunk >= off) & (flat.chunk < off + coll.num_chunks) & ~reducing[flat.src]
        if (v := _reread_violation(s, flat, first, last, plain, part)) is not None:
            return v
    else:
        flat, first = s, np.arange(len(s))
        last = first
    group_src = np.where(reducing[flat.src], s.step[first] - back[first], -1).astype(np.int64)
    group_dst = np.where(reducing[flat.dst], flat.step, -1).astype(np.int64)
    src, dst = flat.src.astype(np.int64), flat.dst.astype(np.int64)
    keys = np.unique(np.concatenate([(src * (1 << 32) + group_src)[group_src >= 0],
                                     (dst * (1 << 32) + group_dst)[group_dst >= 0]]))
    size = s.nodes

    def relabel(node, group):
        at = np.searchsorted(keys, node * (1 << 32) + group)
        return np.where(group >= 0, size + at, node)

    view = _replace_nodes(flat, relabel(src, group_src), relabel(dst, group_dst), size + len(keys),
                         np.where(group_dst >= 0, OP_REDUCE, flat.op).astype(flat.op.dtype))
    v = _simulate(view, coll, off, np.zeros(size + len(keys), bool), width=size + len(keys))
    if v is None or v.index is None:
        return v
    i = int(last[v.index])
    return Violation(i, _send(s, i), int(s.step[i]), _real_nodes(v.reason, keys, size))


def _replace_nodes(s: Schedule, src: np.ndarray, dst: np.ndarray, nodes: int, op: np.ndarray) -> Schedule:
    """``s`` with its sources, destinations, node count and ops replaced (the sends and order kept)."""
    return Schedule(s.collective, nodes, s.chunks, s.chunk, s.lo, s.hi, src.astype(s.src.dtype),
                    dst.astype(s.dst.dtype), s.step, op, s.denom, s.routing, s.meta)


def _real_nodes(reason: str, keys: np.ndarray, size: int) -> str:
    """``reason`` with the group-operation node ids of :func:`_summed_violation` named as
    ``switch w (its partial sum of step t)``."""
    def name(m):
        n = int(m.group(2))
        if n < size:
            return m.group(0)
        k = int(keys[n - size])
        return f"{m.group(1)}switch {k >> 32} (its partial sum of step {k & 0xFFFFFFFF})"
    return re.sub(r"(node |at node )(\d+)", name, reason)


def _relayed_violation(s: Schedule, instance: Instance, coll: Collective, off: int, switch: np.ndarray,
                       touch: int) -> Violation | None:
    """The first violation of a combining collective relayed through switch nodes, or None.

    A switch stores and reduces nothing: each route GPU -> switch(es) -> GPU carries, unchanged,
    what its first hop read at its source (the pairing rule of ``docs/schedules.md``, "Switch
    nodes", :func:`collsynth.tens.switch_routes.flat_routes`), so the schedule is the one with a
    send per route, simulated as any GPU-to-GPU schedule (each contributor exactly once at
    every destination), provided that what a route's source holds of the piece does not change
    between the first hop's step and the delivery (then reading it at the delivery's step - 1,
    as the simulation does, reads the same contributions): a route over which it changes is
    refused (:func:`_reread_violation`), as are relays under a pipelined latency.

    Routes pair sends of one chunk only, so with a single collective they are followed a
    group of chunks at a time (:data:`GROUP_SENDS` sends of the schedule): the earliest
    refused route over the groups, else the earliest simulated violation, is the one the
    whole schedule's routes give."""
    if latency_pipelined(instance.topology):
        return _at(s, touch, f"a {coll.kind} relayed through a switch node under a pipelined latency: "
                             "not verified (unwind the switches)")
    counts = np.diff(kern.chunk_buckets(s.chunk, off, coll.num_chunks, s.step, 1))
    groups = chunk_groups(counts, GROUP_SENDS) if len(instance.collectives) == 1 else [(0, coll.num_chunks)]
    reread, best, post_c, steps = None, None, None, 0
    for c0, c1 in groups:
        r = _RelayGroup.of(s, instance, coll, off, switch, c0, c1, len(groups) == 1)
        steps = max(steps, r.flat.num_steps)
        if (hit := _reread_hit(r.s, r.flat, r.first, r.last, switch, r.part)) is not None:
            t1, k, j = hit
            key = (t1, r.at(r.last[k]))
            if reread is None or key < reread[0]:
                reread = (key, _reread_message(s, r, k, j))
        if reread is not None:
            continue
        sim = _Simulator.of(r.flat, coll, off, np.zeros_like(switch), None)
        if isinstance(sim, Violation):  # a reduce send in a collective that does not combine: never here
            return r.violation(sim)
        worst = sim.first_failure(c0, c1)
        if worst is not None and worst[0] is not None:
            key = (worst[0], r.at(r.last[worst[1]]))
            if best is None or key < best[0]:
                best = (key, worst[2])
        elif worst is not None and best is None and post_c is None:
            post_c = worst[2]
    if reread is not None:
        return reread[1]
    c = best[1] if best is not None else post_c
    if c is None:
        return None
    r = _RelayGroup.of(s, instance, coll, off, switch, c, c + 1, len(groups) == 1)
    v = r.violation(_Simulator.of(r.flat, coll, off, np.zeros_like(switch), None).message(c))
    return v if v.index is not None else replace(v, step=steps)


@dataclass(frozen=True)
class _RelayGroup:
    """The routes of the sends of chunks ``off + c0 .. off + c1 - 1`` (:func:`_relayed_violation`):
    ``s`` those sends (``index``: their positions in the schedule; None: all of it), ``flat`` one send per
    route, ``first`` / ``last`` each route's first and last hop (positions in ``s``) and
    ``part`` the routes of the collective's chunks."""

    s: Schedule
    index: np.ndarray | None
    flat: Schedule
    first: np.ndarray
    last: np.ndarray
    part: np.ndarray

    @staticmethod
    def of(s: Schedule, instance: Instance, coll: Collective, off: int, switch: np.ndarray, c0: int, c1: int,
           whole: bool) -> "_RelayGroup":
        """The group of chunks ``c0 .. c1 - 1``, or, ``whole``, every send of the schedule."""
        from .switch_routes import flat_routes

        index = None
        if not whole:
            index = np.flatnonzero((s.chunk >= off + c0) & (s.chunk < off + c1))
            s = s.select(index)
        flat, first, last, _ = flat_routes(s, instance, paths=False)
        part = (flat.chunk >= off) & (flat.chunk < off + coll.num_chunks)
        return _RelayGroup(s, index, flat, first, last, part)

    def violation(self, v: Violation) -> Violation:
        """A violation of a send of ``flat`` as one of the schedule's (its last hop), naming the
        route's source when it crosses switches."""
        if v.index is None:
            return v
        i = int(self.last[v.index])
        route = "" if self.first[v.index] == i else f" (the route from node {int(self.flat.src[v.index])} through switches)"
        return Violation(self.at(i), _send(self.s, i), int(self.s.step[i]), v.reason + route)

    def at(self, i: int) -> int:
        """The schedule's position of send ``i`` of ``s``."""
        return int(i) if self.index is None else int(self.index[i])


def _reread_violation(s: Schedule, flat: Schedule, first: np.ndarray, last: np.ndarray, switch: np.ndarray,
                      part: np.ndarray) -> Violation | None:
    """The first route (rows of ``flat``, hops ``first`` / ``last`` into ``s``) whose source
    GPU receives an overlapping piece of its chunk between the step of its first hop and the
    step before its delivery, or None (see :func:`_relayed_violation`)."""
    hit = _reread_hit(s, flat, first, last, switch, part)
    return None if hit is None else _reread_message(s, _RelayGroup(s, None, flat, first, last, part), hit[1], hit[2])


def _reread_hit(s: Schedule, flat: Schedule, first: np.ndarray, last: np.ndarray, switch: np.ndarray,
                part: np.ndarray) -> tuple[int, int, int] | None:
    """:func:`_reread_violation`'s route as ``(step of its first hop, row of flat, the send
    of s that changes what its source holds)``: the earliest first hop, ties by row."""
    t1, t2 = s.step[first], s.step[last]
    win = np.flatnonzero((t2 > t1) & part)
    into = np.flatnonzero(~switch[s.dst])  # deliveries to GPUs
    if not len(win) or not len(into):
        return None
    span = int(s.step.max()) + 2
    key = (s.chunk[into].astype(np.int64) * s.nodes + s.dst[into]) * span + s.step[into]
    order = np.argsort(key, kind="stable")
    key, into = key[order], into[order]
    base = (flat.chunk[win].astype(np.int64) * s.nodes + flat.src[win]) * span
    a = np.searchsorted(key, base + t1[win], "left")
    b = np.searchsorted(key, base + t2[win] - 1, "right")
    count = b - a
    if not count.sum():
        return None
    row = np.repeat(np.arange(len(win)), count)
    got = into[np.repeat(a, count) + np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)]
    hit = np.flatnonzero((s.lo[got] < flat.hi[win][row]) & (s.hi[got] > flat.lo[win][row]))
    if not len(hit):
        return None
    k = hit[np.argmin(t1[win][row[hit]])]
    return int(t1[win][row[k]]), int(win[row[k]]), int(got[k])


def _reread_message(whole: Schedule, g: "_RelayGroup", r: int, j: int) -> Violation:
    """The violation of route ``r`` of ``g`` whose source send ``j`` (of ``g.s``) changes."""
    s, at = g.s, g.at
    return _at(whole, at(g.first[r]), f"node {int(g.flat.src[r])} sends this piece of a reduction into a switch, "
                                      f"which delivers it in step {int(s.step[g.last[r]])}, but send {at(j)} changes "
                                      f"what the node holds of it in step {int(s.step[j])} before then: a switch "
                                      "relay must read its source once (not verified)")


# Sends a group of chunks simulated at once holds at most about this many (more when one chunk
# has more): the chunk-major rows, and the routes through switches of a relayed reduction, are
# built a group at a time, so their memory follows a group, not the schedule.
GROUP_SENDS = 1 << 20


def chunk_groups(counts: np.ndarray, most: int) -> list[tuple[int, int]]:
    """Consecutive ranges ``[c0, c1)`` of the chunks whose send ``counts`` are given, each
    holding at most ``most`` sends unless one chunk alone has more (every range non-empty,
    together all chunks, in order).

    >>> chunk_groups(np.array([3, 3, 3, 1]), 6), chunk_groups(np.array([9, 1, 1]), 4), chunk_groups(np.array([2]), 9)
    ([(0, 2), (2, 4)], [(0, 1), (1, 3)], [(0, 1)])
    """
    cuts, held = [0], 0
    for c, k in enumerate(counts.tolist()):
        if held and held + k > most:
            cuts.append(c)
            held = 0
        held += k
    cuts.append(len(counts))
    return list(zip(cuts[:-1], cuts[1:]))


def _simulate(s: Schedule, coll: Collective, off: int, switch: np.ndarray, width: int | None = None) -> Violation | None:
    """The first violation of one collective's sends (chunk ids ``off ..``), or ``None``;
    ``width``: node ids beyond the collective's (nodes that neither hold nor need anything).
    The chunks are simulated a group at a time (:data:`GROUP_SENDS`); the earliest violation
    over the groups is the one a single pass would find (chunks evolve independently)."""
    sim = _Simulator.of(s, coll, off, switch, width)
    if isinstance(sim, Violation):
        return sim
    worst = sim.first_failure(0, coll.num_chunks)
    return None if worst is None else sim.message(worst[2])


@dataclass
class _Simulator:
    """What :func:`_simulate` needs to run the compiled simulation over any range of a
    collective's chunks: ``run(c0, c1, detail)`` builds the chunk-major rows of chunks ``c0 ..
    c1 - 1`` (relative to ``off``) and simulates them."""

    s: Schedule
    coll: Collective
    off: int
    switch: np.ndarray
    units: "_Units"
    whole: bool
    pre: np.ndarray
    post: np.ndarray
    seg_of: np.ndarray
    rank_of: np.ndarray | None
    order: np.ndarray | None = None  # the stable step order, once a group needed it

    @staticmethod
    def of(s: Schedule, coll: Collective, off: int, switch: np.ndarray, width: int | None):
        """The simulator of ``coll``'s sends in ``s``, or the violation of a reduce send in a
        collective that does not combine."""
        nc = coll.num_chunks
        first_reduce, whole, smin, smax = kern.send_summary(s.chunk, off, nc, s.op, s.lo, s.hi, s.denom, s.step)
        if not coll.combining and first_reduce >= 0:
            return _at(s, first_reduce, f"a reduce send in a {coll.kind}, which does not combine")
        units = _units(s, bool(whole), int(smin), int(smax))
        denom = units.denom
        seg_of = np.full(0 if whole or denom > SEGMENT_TABLE else denom + 1, -1, np.int32)
        pre, post = coll.precondition, coll.postcondition
        if width is not None and width > pre.shape[1]:
            pad = ((0, 0), (0, width - pre.shape[1]))
            pre, post = np.pad(pre, pad), np.pad(post, pad)
        rank_of = None
        if coll.combining:
            ranks = np.asarray(coll.nodes, dtype=np.int64)
            rank_of = np.full(pre.shape[1], -1, dtype=np.int64)
            rank_of[ranks] = np.arange(len(ranks))
        return _Simulator(s, coll, off, switch, units, bool(whole), pre, post, seg_of, rank_of)

    def run(self, c0: int, c1: int, detail: bool):
        """``(chunk-major columns, the kernel's result)`` of chunks ``c0 .. c1 - 1``."""
        cm = self._chunk_major(c0, c1)
        starts, index, src, dst, step, lo, hi, op = cm
        pre, post, denom = self.pre[c0:c1], self.post[c0:c1], self.units.denom
        if self.coll.combining:
            res = kern.simulate_combining(starts, index, src, dst, step, lo, hi, op, denom, self.seg_of, pre, post,
                                          self.rank_of, len(self.coll.nodes), 0, c1 - c0, detail)
        else:
            res = kern.simulate_copy(starts, index, src, dst, step, lo, hi, denom, self.seg_of, pre, post,
                                     kern.row_words(post), self.switch, 0, c1 - c0, detail)
        return cm, res

    def _chunk_major(self, c0: int, c1: int):
        s, units = self.s, self.units
        keyed = _keyed(len(s), c1 - c0, units)
        if not keyed and self.order is None:
            self.order = np.zeros(0, np.int32) if _in_step_order(units.step) else step_order(units.step)[0]
        order = np.zeros(0, np.int32) if keyed else self.order
        return _chunk_major(s, self.off + c0, c1 - c0, units, self.whole, self.coll.combining, order)

    def first_failure(self, c0: int, c1: int) -> tuple[int | None, int | None, int] | None:
        """``(step, index, chunk)`` of the first send violation among chunks ``c0 .. c1 - 1``
        (step in the schedule's units, the smallest (step, index)), else ``(None, None, chunk)``
        of the first chunk whose postcondition fails, else None; simulated a group of chunks
        at a time (:data:`GROUP_SENDS`)."""
        counts = np.diff(kern.chunk_buckets(self.s.chunk, self.off + c0, c1 - c0, self.s.step, 1))
        best, post_c = None, None
        for g0, g1 in chunk_groups(counts, GROUP_SENDS):
            cm, res = self.run(c0 + g0, c0 + g1, False)
            del cm
            t, i, c, pc = int(res[0]), int(res[1]), int(res[3]), int(res[5 if self.coll.combining else 4])
            if i != kern.NONE:
                t = int(self.units.steps[t]) if self.units.steps is not None else t
                if best is None or (t, i) < best[:2]:
                    best = (t, i, c0 + g0 + c)
            elif best is None and post_c is None and pc >= 0:
                post_c = c0 + g0 + pc
        return best if best is not None else None if post_c is None else (None, None, post_c)

    def message(self, c: int) -> Violation:
        """The violation :func:`first_failure` found in chunk ``c``, with its message."""
        cm, detail = self.run(c, c + 1, True)
        combining = self.coll.combining
        cm, detail = self.units.in_schedule_units(cm, detail, 8 if combining else 7)
        if combining:
            return _combining_message(self.s, self.coll, self.off + c, cm, detail)
        return _copy_message(self.s, self.off + c, cm, detail)


def _keyed(n: int, nc: int, units: "_Units") -> bool:
    """Whether :func:`_chunk_major` sorts ``n`` sends of ``nc`` chunks on (chunk, step) at once."""
    return n > 0 and units.smin >= 0 and nc * (units.smax + 1) <= 2 * n + (1 << 20)


@dataclass(frozen=True)
class _Units:
    """The steps (``step``, from ``smin`` to ``smax``) and piece bounds (``lo``, ``hi`` over
    ``denom``) the simulation works in: the schedule's own, or, where they do not fit the 32
    bits of :func:`_chunk_major`'s rows, their ranks among the schedule's distinct values
    (``steps``: the distinct steps; ``bounds``: the distinct bounds with 0 and the
    denominator, whose rank ``denom`` then is; ``None`` when not ranked). Ranks keep every
    comparison the simulation makes; messages print the values."""

    step: np.ndarray
    smin: int
    smax: int
    lo: np.ndarray
    hi: np.ndarray
    denom: int
    steps: np.ndarray | None = None
    bounds: np.ndarray | None = None

    def in_schedule_units(self, cm, detail, pts_at: int):
        """The chunk-major columns and a simulation's ``detail`` (step first, breakpoints at
        ``pts_at``) with steps and bounds in the schedule's units."""
        if self.steps is None and self.bounds is None:
            return cm, detail
        starts, index, src, dst, step, lo, hi, op = cm
        detail = list(detail)
        if self.steps is not None:
            step = self.steps[step]
            if detail[0] != kern.NONE:
                detail[0] = int(self.steps[detail[0]])
        if self.bounds is not None:
            lo, hi = self.bounds[lo], self.bounds[hi]
            detail[pts_at] = self.bounds[detail[pts_at]]
        return (starts, index, src, dst, step, lo, hi, op), tuple(detail)


INT32 = np.iinfo(np.int32)


def _units(s: Schedule, whole: bool, smin: int, smax: int) -> _Units:
    """The steps and piece bounds to simulate in (:class:`_Units`)."""
    step, lo, hi, denom, steps, bounds = s.step, s.lo, s.hi, s.denom, None, None
    if smin < INT32.min or smax > INT32.max:
        steps, step = np.unique(s.step, return_inverse=True)
        smin, smax = 0, len(steps) - 1
    if not whole and denom > INT32.max:
        bounds, inverse = np.unique(np.concatenate([s.lo, s.hi, [0, denom]]), return_inverse=True)
        lo, hi, denom = inverse[:len(s)], inverse[len(s):2 * len(s)], len(bounds) - 1
    return _Units(step, smin, smax, lo, hi, denom, steps, bounds)


def _chunk_major(s: Schedule, off: int, nc: int, units: _Units, whole: bool, combining: bool, order: np.ndarray):
    """The sends of chunks ``off .. off + nc - 1`` grouped by chunk, by step then index inside:
    ``(starts, index, src, dst, step, lo, hi, op)``, views of the int32 rows
    :func:`collsynth.tens.verify_kernels.chunk_major` fills (steps and bounds in ``units``;
    ``lo``/``hi`` empty when ``whole``; ``combining``: ops other than copies written as
    reductions). One counting sort on (chunk, step) when that key is small (:func:`_keyed`),
    else on chunks over the stable step ``order`` (empty: the schedule is in step order). The
    rows are allocated by numpy, which asks for transparent huge pages on large arrays (a
    quarter of the time of the scatter went to faulting in the pages of the runtime's own
    allocations)."""
    step = units.step
    keyed = _keyed(len(s), nc, units)
    K = units.smax + 1 if keyed else 1
    if keyed:
        order = np.zeros(0, np.int32)
    fill = kern.chunk_buckets(s.chunk, off, nc, step, K)
    m, starts = int(fill[-1]), fill[::K].copy()
    rec = np.empty((m, 8), np.int32)
    kern.chunk_major(order, s.chunk, off, nc, step, K, s.src, s.dst, units.lo, units.hi, s.op, whole, combining, fill,
                     rec)
    del fill
    pieces = rec[:0] if whole else rec
    return starts, rec[:, 0], rec[:, 1], rec[:, 2], rec[:, 3], pieces[:, 4], pieces[:, 5], rec[:, 6]


def _missing_piece(s: Schedule, cm, x: int, t: int, pts: np.ndarray, mask: np.ndarray, what: str, part: str) -> str:
    """Why the source of chunk-major send ``x`` (step ``t``) lacks segments ``mask`` of its piece."""
    starts, index, src, dst, step, lo, hi, _ = cm
    d = s.denom
    if len(lo):
        f, l = np.searchsorted(pts, lo[x]), np.searchsorted(pts, hi[x])
    else:
        f, l = 0, 1
    missing = np.flatnonzero(mask[f:l]) + f
    if len(missing) == l - f:
        reason = f"source {what} the piece"
    else:
        reason = f"source {part} (missing {_intervals(pts[missing], pts[missing + 1], d)})"
    g = int(missing.min())
    c = int(np.searchsorted(starts, x, side="right")) - 1
    a, b = int(starts[c]), int(starts[c + 1])
    u = src[x]
    covers = (dst[a:b] == u) & (step[a:b] >= t)
    if len(lo):
        covers &= (lo[a:b] <= pts[g]) & (hi[a:b] >= pts[g + 1])
    if covers.any():
        return reason + f"; it arrives there only at the end of step {int(step[a:b][covers].min())}"
    return reason + "; it never arrives there"


def _copy_message(s: Schedule, off: int, cm, detail) -> Violation:
    t, i, x, c, post_c, post_v, nseg, pts, mask = detail
    if i != kern.NONE:
        return _at(s, i, _missing_piece(s, cm, x, t, pts, mask, "does not hold", "holds only part of the piece"))
    cid = post_c + off
    if mask.all():
        text = f"node {post_v} does not hold chunk {cid} at the end"
    else:
        m = np.flatnonzero(mask)
        text = f"node {post_v} lacks {_intervals(pts[m], pts[m + 1], s.denom)} of chunk {cid} at the end"
    return Violation(None, None, s.num_steps, text)


def _rank_names(words: np.ndarray, ranks: np.ndarray) -> list[int]:
    bits = np.unpackbits(words.astype("<u8").view(np.uint8), bitorder="little")[:len(ranks)]
    return ranks[np.flatnonzero(bits)].tolist()


def _combining_message(s: Schedule, coll: Collective, off: int, cm, detail) -> Violation:
    t, i, x, c, kind, post_c, post_v, nseg, pts, mask, node, dups, have = detail
    ranks = np.asarray(coll.nodes, dtype=np.int64)
    d = s.denom
    if i != kern.NONE:
        if kind == kern.NOT_HELD:
            return _at(s, i, _missing_piece(s, cm, x, t, pts, mask, "holds no contribution to",
                                            "holds no contribution to part of the piece"))
        if kind == kern.CONFLICT:
            return _at(s, i, f"conflicting copies of the piece arrive at node {node} in one step")
        at = int(s.dst[i])
        return _at(s, i, min(f"duplicate reduction: contribution of ranks {_rank_names(dup, ranks)[:8]} "
                             f"would be counted twice at node {at}" for dup in dups))
    m = np.flatnonzero(mask)
    piece = _intervals(pts[m], pts[m + 1], d)
    if not have.any():
        reason = f"node {post_v} holds nothing of chunk {post_c + off} {piece} at the end"
    else:
        full = np.zeros_like(have)
        for k in range(len(ranks)):
            full[k >> 6] |= np.uint64(1) << np.uint64(k & 63)
        miss = _rank_names(full & ~have, ranks)
        reason = (f"node {post_v} holds chunk {post_c + off} {_interval(pts[m[0]], pts[m[0] + 1], d)} "
                  f"reduced over {int(np.bitwise_count(have).sum())} of {len(ranks)} ranks at the end "
                  f"(missing contributions of ranks {miss[:8]}{'...' if len(miss) > 8 else ''})")
    return Violation(None, None, s.num_steps, reason)


# ---- switch nodes ----------------------------------------------------------------------------

def pipelined_violation(schedule: Schedule, instance: Instance) -> Violation | None:
    """The first send that reads its source before its piece is there under a pipelined link
    latency (module doc), or None (also when the latency is serial or the schedule declares no
    TEN timestep).

    A send arriving in step ``e`` reads its source at the end of ``e - lag`` (``lag`` = delay +
    latency, one less over an instant switch-to-NPU hop); for a copying collective the source must
    hold every segment of the piece by then (switch sources: :func:`switch_violation`), for a
    combining one no overlapping piece of the chunk may reach the source in steps
    ``e - lag + 1 .. e - 1``. The first offending send is the smallest (step, index)."""
    s = schedule
    if not len(s) or not latency_pipelined(instance.topology):
        return None
    timing = ten_timing(s, instance)
    if timing is None:
        return None
    k, lat = timing
    switch = _switch_mask(instance.topology)
    lag = k + lat - instant_hops(instance.topology, s.src, s.dst).astype(np.int64)
    i, why = _read_too_early(s, instance, lag, switch)
    return None if i is None else _at(s, i, why)


def _read_too_early(s: Schedule, instance: Instance, lag, switch) -> tuple[int | None, str]:
    """The first send (step, index) whose source lacks (copying) or is still receiving
    (combining) its piece at the end of step ``e - lag`` (see :func:`pipelined_violation`)."""
    offsets = np.asarray(instance.chunk_offsets)
    group = np.searchsorted(offsets, s.chunk, side="right") - 1
    worst = None
    for g, coll in enumerate(instance.collectives):
        mine = np.flatnonzero((group == g) & ~switch[s.src] & (lag > 1))
        if not len(mine):
            continue
        ready = _ready_steps(s, coll, int(offsets[g]), mine, lag)
        late = mine[(ready > s.step[mine] - lag[mine]) | (s.step[mine] - lag[mine] < 0)]
        if len(late):
            i = int(late[np.lexsort((late, s.step[late]))[0]])
            if worst is None or (s.step[i], i) < (s.step[worst], worst):
                worst = i
    if worst is None:
        return None, ""
    i, read = worst, int(s.step[worst] - lag[worst])
    when = f"at the end of step {read}" if read >= 0 else f"before step 1 (step {read + 1})"
    return i, (f"the send would have to leave {when}, when its source does not hold the piece: over this link it "
               f"leaves {int(lag[i])} step(s) before it arrives (its delay plus its pipelined latency)")


def _ready_steps(s: Schedule, coll: Collective, off: int, mine: np.ndarray, lag) -> np.ndarray:
    """Per send of ``mine``: the step by which its source holds its piece (copying: the latest
    over the piece's segments of the earliest arrival there, 0 for the precondition, a huge
    number if never) or, combining, the last step before its own in which an overlapping piece
    reaches its source (0 if none)."""
    out = np.zeros(len(mine), np.int64)
    never = np.iinfo(np.int64).max // 4
    pre = coll.precondition
    if not coll.combining and whole_pieces(s.lo, s.hi, s.denom):  # whole chunks: one pass
        S = pre.shape[1]
        first = np.where(pre, 0, never).astype(np.int64).ravel()
        part = np.flatnonzero((s.chunk >= off) & (s.chunk < off + pre.shape[0]))
        np.minimum.at(first, (s.chunk[part] - np.int64(off)) * S + s.dst[part], s.step[part])
        return first[(s.chunk[mine] - np.int64(off)) * S + s.src[mine]]
    into: dict[tuple[int, int], list[int]] = {}
    order = np.argsort(s.chunk, kind="stable")
    for j in order.tolist():
        into.setdefault((int(s.chunk[j]), int(s.dst[j])), []).append(j)
    for x, i in enumerate(mine.tolist()):
        c, u, lo, hi, e = int(s.chunk[i]), int(s.src[i]), int(s.lo[i]), int(s.hi[i]), int(s.step[i])
        came = [j for j in into.get((c, u), ()) if s.lo[j] < hi and s.hi[j] > lo and s.step[j] < e]
        if coll.combining:
            out[x] = max((int(s.step[j]) for j in came), default=0)
            continue
        if pre[c - off, u]:
            continue
        pts = sorted({lo, hi} | {int(v) for j in came for v in (s.lo[j], s.hi[j]) if lo < v < hi})
        need = 0
        for a, b in zip(pts[:-1], pts[1:]):
            first = min((int(s.step[j]) for j in came if s.lo[j] <= a and s.hi[j] >= b), default=never)
            need = max(need, first)
        out[x] = need
    return out


def switch_violation(schedule: Schedule, instance: Instance) -> Violation | None:
    """The first send out of a switch node that breaks the switch rules (module doc), or None.

    The sends out of switches are paired with the arrivals they forward
    (:func:`collsynth.tens.dependencies.switch_forwards`, the rule of ``docs/schedules.md``);
    the first one with a point no arrival serves, the smallest (step, index), is the violation.
    Its message says whether the piece never reached the switch, reached it later, reached it
    earlier (a switch stores nothing), did not all arrive in that step, was copied without
    ``switch_copy``, or left twice on one link with one arrival.
    """
    s = schedule
    switch = _switch_mask(instance.topology)
    if not switch[s.src].any():
        return None
    rule = switch_rule(s, instance)
    back = switch_back_of(s, instance)  # steps back to the arrival
    order = None if _in_step_order(s.step) else step_order(s.step)[0]
    fw = switch_forwards(s.chunk, s.src, s.dst, s.lo, s.hi, s.step, back, switch, rule.copy, s.denom, rule.reduce,
                         rule.combining, order=order)
    if not len(fw.unpaired):
        return None
    i = int(fw.unpaired[0] if order is None else order[fw.unpaired[0]])
    sums = bool(rule.reduce[s.src[i]] and rule.combining[s.chunk[i]])
    k = int(back[i] if len(back) > 1 else back[0])
    return _at(s, i, _switch_reason(s, i, k, np.flatnonzero(switch[s.dst]), bool(rule.copy[s.src[i]]), sums))


def _switch_reason(s: Schedule, i: int, k: int, into: np.ndarray, copy: bool, sums: bool = False) -> str:
    """Why send ``i`` may not leave its switch (see :func:`switch_violation`); ``k`` is the
    number of steps between the arrival it forwards and its own step; ``sums``: the switch
    reduces the piece (its arrivals of one step leave as one partial sum)."""
    sw, c, t = int(s.src[i]), int(s.chunk[i]), int(s.step[i])
    want = t - k  # the arrival step this send forwards from
    arr = into[(s.dst[into] == sw) & (s.chunk[into] == c) & (s.lo[into] < s.hi[i]) & (s.hi[into] > s.lo[i])]
    steps = sorted(set(s.step[arr].tolist()))
    if not steps:
        return f"switch {sw} forwards a piece it never received"
    if want not in steps:
        earlier = [x for x in steps if x < want]
        if not earlier:
            return (f"switch {sw} forwards the piece before it arrives: it arrives at the end of step "
                    f"{steps[0]}, so this send could be step {steps[0] + k} at the earliest")
        return (f"switch {sw} stores nothing: the piece arrived at the end of step {earlier[-1]}, so this send "
                f"had to be step {earlier[-1] + k}")
    came = arr[s.step[arr] == want]
    if sums and _covered(s.lo[came], s.hi[came], int(s.lo[i]), int(s.hi[i])):
        how = f"on link {sw}->{int(s.dst[i])} more than once" if copy else "more than once (it does not multicast)"
        return f"reducing switch {sw} sends its partial sum of step {want} {how}"
    if _covered(s.lo[came], s.hi[came], int(s.lo[i]), int(s.hi[i])):
        if copy:
            return (f"switch {sw} sends the piece on link {sw}->{int(s.dst[i])} more often than it arrived at the end "
                    f"of step {want} (a copy leaves on distinct links)")
    else:
        return f"switch {sw} forwards part of the piece that did not arrive at the end of step {want}"
    return (f"switch {sw} copies the piece without switch_copy: more sends of it leave after step {want} "
            f"than arrived at the end of it")


@njit(cache=True, nogil=True)
def _in_step_order(step) -> bool:
    """Whether the steps never decrease (one pass, no temporaries)."""
    for i in range(1, len(step)):
        if step[i] < step[i - 1]:
            return False
    return True


def _covered(los: np.ndarray, his: np.ndarray, lo: int, hi: int) -> bool:
    """The intervals ``[los, his)`` cover ``[lo, hi)``."""
    reach = lo
    for a, b in sorted(zip(los.tolist(), his.tolist())):
        if a > reach:
            break
        reach = max(reach, b)
    return reach >= hi
