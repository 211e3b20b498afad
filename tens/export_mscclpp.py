"""MSCCL++ execution plans: a verified schedule as the JSON the MSCCL++ executor runs.

The format is the one microsoft/mscclpp (v0.8 and later) writes from its DSL
(``python/mscclpp/language/program.py`` ``CollectiveProgram.to_json``,
``internal/gpu.py``, ``internal/threadblock.py``, ``internal/operations.py``) and reads in
``src/core/executor/execution_plan.cc``; example plans are under ``test/execution-files/``.
A plan is ``{name, collective, protocol, inplace, reuse_resources, gpus,
num_threads_per_block, use_double_scratch_buffer, buffer_alignment, min_message_size,
max_message_size}``; each GPU has ``id, input_chunks, output_chunks, scratch_chunks,
threadblocks, channels, remote_buffers, semaphores``; each thread block ``id, ops, channels,
remote_buffer_refs``; the executor runs every thread block's ``ops`` in order
(``src/core/include/execution_kernel.hpp``) and refuses more than ``MAX_OPERATION = 64`` ops
in one thread block (``execution_common.hpp``, ``executor.cc``).

The mapping (docs/schedules.md, "MSCCL++ execution plans"):

- GPUs are the collective's ranks (:func:`collsynth.tens.msccl_format.rank_map`: failed nodes
  renumber them). A chunk of the plan is ``1/denom`` of a schedule chunk, so fractional
  pieces are runs of plan chunks.
- Buffers: allgather, reduce-scatter and allreduce run in place (allgather in the output
  buffer at rank-space chunk ``r``; reduce-scatter and allreduce in the input buffer, which
  holds the running partial sums); all-to-all runs out of place (chunk ``i -> k`` leaves
  ``i``'s input at ``k*c + j``, lands in ``k``'s output at ``i*c + j``, and a rank's own
  block is copied input -> output). Data arriving that is not a first copy into its final
  place (relays, partial sums, an allreduce's results, repeats) lands in a fresh scratch
  chunk; a partial sum is then added (``re``) and a result copied (``copy``) into place.
- Channels: one per pair of ranks that exchange data (per window below): a ``memory``
  channel between GPUs of one node (NVLink, NVSwitch, xGMI), a ``port`` channel when the
  link, or the route through a switch, is a NIC's (link classes ``ib``, ``rail``, ``nic``)
  or joins two nodes (``meta.gpus_per_node``). A route ``u -> switch -> v`` of the
  schedule (the switch forwards what ``u`` sent) is a put from ``u`` to ``v`` on that
  channel, ``u`` found by the one forwarding rule (``docs/schedules.md``, "Switch nodes": the
  j-th forward takes the j-th arrival; :func:`collsynth.tens.switch_routes.flat_routes`), the
  rule the verifier, the cost models and the MSCCL export apply, so the plan moves what was
  verified and priced; NVLS ``switch`` channels (multicast) are not written. A shortest-path schedule
  (closed forms on tori) is relayed link by link (:func:`_hops`); the relays of a combining
  collective pass the data through a scratch chunk without adding their own.
- Thread blocks: one per channel, holding both directions of the pair in step order. A
  step's sends to the peer are ``put`` ops (fused up to 8), a ``nop`` (all threads'
  stores done), ``signal`` (port channels: then ``flush``, so a source is not rewritten
  while the NIC reads it); the peer's sends of that step are one ``wait``. Thread blocks of
  one GPU are ordered by device semaphores: whenever an op reads or writes a plan chunk an
  op of another thread block wrote or read earlier in schedule order (step, then sends
  before arrivals before local adds), the earlier block ``sem_release``s and the later one
  ``sem_acquire``s (one pair per block pair and needed order, the latest one only). A pair
  whose thread block would exceed 64 ops is cut into windows of steps, each with its own
  channel and thread block.
- A declared link order (``link_order = "program"``): each put also waits, by a semaphore
  pair as above, for the put before it out of its GPU over the same first link (to the peer,
  or into the route's first switch; :func:`_declared_waits`) when another thread block runs
  that one: a window's first put after the previous window's last, a put through a switch
  after the GPU's previous put into that switch to another peer. One step's sends to one peer
  are one put, placed by its first send.

A schedule the executor cannot run is refused (:class:`~collsynth.InputError`, one line
saying why): another collective kind, concurrent collectives, a send
between ranks neither linked nor joined through a switch, a switch forwarding a part of a
piece that no send into it brought, a grid of more than ``MAX_CHUNKS`` plan chunks per buffer, a step of
one pair needing more than 64 ops, or more thread blocks on a GPU than ``max_threadblocks``
(they must all be resident at once: they wait on each other). :func:`collsynth.tens.readback.verified_mscclpp_plan`,
which the command line and the API write with, reads every plan back op by op with our own
reader (:func:`collsynth.tens.peer_plans.read_mscclpp_plan`) and verifies what it runs before
the plan is returned.
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

import numpy as np

from .. import InputError
from ..instances.instance import Instance
from .choices import MAX_THREADBLOCKS
from .msccl_format import rank_map
from .dependencies import switch_mask
from .schedule import OP_DEFAULT, OP_REDUCE, Schedule, from_arrays
from .export_switch import switch_plan
from .switch_routes import flat_routes, summed_in_switch

COLLECTIVES = {"allgather": "allgather", "reduce_scatter": "reducescatter", "allreduce": "allreduce",
               "alltoall": "alltoall"}
MAX_OPERATION = 64  # ops per thread block (src/core/include/execution_common.hpp)
MAX_FUSED = 8  # MAX_CHANNEL_PER_OPERATION: destinations of one put
MAX_SEMAPHORES_PER_OP = 16  # MAX_DEVICE_SEMAPHORES
MAX_CHUNKS = 1 << 16
PORT_CLASSES = ("ib", "rail", "nic")
PHASE_PUT, PHASE_WAIT, PHASE_LOCAL = 0, 1, 2


# ---- records ---------------------------------------------------------------------------------

class Transfer(NamedTuple):
    """One put between ranks: a send between GPUs, or a route GPU -> switch(es) -> GPU."""

    rank_chunk: int  # the chunk in rank space (:func:`_rank_chunks`)
    lo: int  # the piece, in 1/denom
    hi: int
    src: int  # node ids of the two GPUs
    dst: int
    step: int  # the step of the delivery
    reduces: bool  # the receiver adds what arrives
    via: tuple[int, ...]  # the switches crossed, in order
    through: bool  # a relay passes it on untouched (:func:`_hops`)
    flow: int  # the send of the given schedule it is a hop of
    first: int = -1  # the send of the schedule on links that starts its route (its first hop)


class Place(NamedTuple):
    """A plan chunk of one GPU: buffer ``i``, ``o`` or ``s`` and its index."""

    buf: str
    idx: int


class Local(NamedTuple):
    """What the receiver does with an arrival after it lands: ``re`` (add it into ``into``)
    or ``copy`` (copy it there)."""

    kind: str
    into: Place


class Move(NamedTuple):
    """One plan chunk of a put: from ``src`` on the sender to ``dst`` on the receiver, then
    ``local`` (or None)."""

    src: Place
    dst: Place
    local: Local | None


# ---- rank space --------------------------------------------------------------------------------

def _rank_chunks(s: Schedule, instance: Instance) -> np.ndarray:
    """Rank-space chunk ids: node ids in the schedule's numbering replaced by ranks."""
    coll = instance.collective
    c, n, S = coll.chunks_per_node, len(coll.nodes), coll.size
    rank_of = np.full(S, -1, dtype=np.int64)
    rank_of[list(coll.nodes)] = np.arange(n)
    chunk = s.chunk.astype(np.int64)
    if coll.kind == "alltoall":
        pair, j = chunk // c, chunk % c
        return (rank_of[pair // S] * n + rank_of[pair % S]) * c + j
    return rank_of[chunk // c] * c + chunk % c


class _Plan:
    """Where every plan chunk of one collective lives on every rank, as the schedule runs."""

    def __init__(self, instance: Instance, denom: int):
        coll = instance.collective
        self.kind, self.n, self.c, self.D = coll.kind, len(coll.nodes), coll.chunks_per_node, denom
        self.combining = coll.combining
        self.cells = self.n * self.c * denom  # plan chunks of the whole buffer
        self.scratch = [0] * self.n
        self.relay: dict[tuple[int, int], tuple[int, Place]] = {}  # (flow, cell) -> (rank, place)
        self.where: list[dict[int, Place]] = [dict() for _ in range(self.n)]  # cell -> its place
        share = self.c * denom
        for g in range(self.n):
            if self.kind == "allgather":
                self.where[g] = {x: Place("o", x) for x in range(g * share, (g + 1) * share)}
            elif self.kind == "alltoall":
                for k in range(self.n):
                    for y in range(share):  # chunk g -> k, its y-th plan chunk
                        self.where[g][(g * self.n + k) * share + y] = Place("i", k * share + y)
            else:
                self.where[g] = {x: Place("i", x) for x in range(self.cells)}

    def final(self, g: int, x: int) -> Place | None:
        """The place a first copy of cell ``x`` arriving at ``g`` goes, or None (scratch)."""
        share = self.c * self.D
        if self.kind == "allgather":
            return Place("o", x)
        if self.kind == "alltoall":
            i, k = divmod(x // share, self.n)
            return Place("o", i * share + x % share) if k == g else None
        return None

    def fresh(self, g: int) -> Place:
        """A new scratch slot on rank ``g``."""
        self.scratch[g] += 1
        return Place("s", self.scratch[g] - 1)

    def sizes(self, g: int) -> dict:
        """Rank ``g``'s buffer sizes in chunks: input, output and the scratch slots used."""
        whole, share = self.cells, self.c * self.D
        i, o = {"allgather": (share, whole), "reduce_scatter": (whole, share)}.get(self.kind, (whole, whole))
        return {"input_chunks": i, "output_chunks": o, "scratch_chunks": self.scratch[g]}


def _hops(schedule: Schedule, instance: Instance) -> tuple[Schedule, np.ndarray, np.ndarray]:
    """``(schedule on links, pass-through, flow)``: a shortest-path send becomes one send per
    link of :meth:`~collsynth.instances.topology.Topology.shortest_path`, hop ``h`` of step
    ``t`` in step ``(t - 1) * L + h`` (``L`` the longest route); ``flow`` is the send it came
    from; ``pass-through`` marks the hops of a combining collective that land on a relay, which
    forwards them untouched (its own data is not in them)."""
    n = len(schedule)
    if schedule.routing == "links":
        return schedule, np.zeros(n, dtype=bool), np.arange(n)
    topo = instance.topology
    paths = [topo.shortest_path(int(u), int(v)) for u, v in zip(schedule.src.tolist(), schedule.dst.tolist())]
    L = max((len(p) - 1 for p in paths), default=1)
    rows = [(i, p[h - 1], p[h], (int(schedule.step[i]) - 1) * L + h, h == len(p) - 1)
            for i, p in enumerate(paths) for h in range(1, len(p))]
    idx = np.array([r[0] for r in rows], dtype=np.int64)
    hops = from_arrays(schedule.collective, schedule.nodes, schedule.chunks, chunk=schedule.chunk[idx],
                       lo=schedule.lo[idx], hi=schedule.hi[idx], src=[r[1] for r in rows], dst=[r[2] for r in rows],
                       step=[r[3] for r in rows], denom=schedule.denom, op=schedule.op[idx], routing="links",
                       meta=schedule.meta)
    through = np.array([not r[4] for r in rows], dtype=bool) & instance.collective.combining
    return hops, through, idx


def relayed(schedule: Schedule, instance: Instance) -> Schedule:
    """``schedule`` with every send on links (:func:`_hops`: each relay forwards what it got;
    an MSCCL++ put joins two ranks, the runtime routes nothing), for collectives that copy. A
    relay of a combining collective passes data through without adding its own, which a
    schedule cannot say: refused here (the plan still writes it). Schedules on links are
    returned as they are."""
    if schedule.routing == "links":
        return schedule
    if instance.collective.combining:
        raise InputError("schedule", "routing is shortest-path and the collective combines: a relay that only "
                         "forwards cannot be written as a schedule")
    return _hops(schedule, instance)[0]


# ---- transfers: sends between ranks, routes through switches collapsed -------------------------

def _channel_type(topo, u: int, v: int, via: list[int]) -> str:
    """``port`` when a link of the route is a NIC's or the ends sit in different nodes."""
    per_node = topo.meta.get("gpus_per_node") if isinstance(topo.meta, dict) else None
    if per_node and u // per_node != v // per_node:
        return "port"
    hops = [u, *via, v]
    for a, b in zip(hops, hops[1:]):
        for data in topo.graph.get_edge_data(a, b, default={}).values():
            if data.get("link_class") in PORT_CLASSES:
                return "port"
    return "memory"


def _transfers(s: Schedule, instance: Instance, through: np.ndarray, flow: np.ndarray) -> list[Transfer]:
    """The :class:`Transfer` s of a schedule on links (:func:`_hops` gives ``through`` and
    ``flow``): routes through switches are collapsed by the one forwarding rule of
    ``docs/schedules.md``, "Switch nodes" (:func:`collsynth.tens.switch_routes.flat_routes`,
    the rule the verifier and the cost models apply), so the plan moves what the verified
    schedule moves; sends into switches are not transfers. Refuses a send out of a switch with a
    part of its piece that no arrival forwards, and a send between GPUs that no link joins."""
    topo = instance.topology
    switch = switch_mask(topo)
    if len(s) and (switch[s.src] | switch[s.dst]).any():
        flat, start, last, path = flat_routes(s, instance)
        _check_forwarded(s, switch, last, flat.hi - flat.lo)
    else:
        flat, start, last, path = s, np.arange(len(s)), np.arange(len(s)), [()] * len(s)
    rchunk = _rank_chunks(flat, instance)
    reduce = (flat.op == OP_REDUCE) | ((flat.op == OP_DEFAULT) & instance.collective.combining)
    out = []
    for k, i in enumerate(last.tolist()):
        u, v = int(flat.src[k]), int(flat.dst[k])
        if not path[k] and not topo.has_link(u, v):
            raise InputError("schedule", f"send {i} ({u}->{v}) is not over a link")
        out.append(Transfer(int(rchunk[k]), int(flat.lo[k]), int(flat.hi[k]), u, v, int(flat.step[k]),
                            bool(reduce[k]), tuple(path[k]), bool(through[i]), int(flow[i]), int(start[k])))
    return out


def _check_forwarded(s: Schedule, switch: np.ndarray, last: np.ndarray, length: np.ndarray) -> None:
    """Refuses a send out of a switch into a GPU that its routes (``last``: their final hops,
    ``length``: their pieces) do not cover whole: a switch forwarding what it never got."""
    outs = np.flatnonzero(switch[s.src] & ~switch[s.dst])
    covered = np.bincount(last, weights=length, minlength=len(s))[outs]
    short = outs[covered != (s.hi - s.lo)[outs]]
    if len(short):
        i = int(short[0])
        raise InputError("schedule", f"send {i} leaves switch {int(s.src[i])} with a part of its piece that no "
                         "send into it brought; MSCCL++ puts run from rank to rank")


# ---- events: what each rank does, in schedule order --------------------------------------------

def _place(plan: _Plan, g: int, x: int, red: bool, through: bool, flow: int) -> tuple[Place, Local | None]:
    """Where plan chunk ``x`` arriving at rank ``g`` lands, and the :class:`Local` op that
    follows (or None): a first copy goes to its final place, anything else to a fresh scratch
    chunk (a pass-through is remembered for the flow's next hop)."""
    if through:
        dst = plan.fresh(g)
        plan.relay[(flow, x)] = (g, dst)
        return dst, None
    dst = None if red or plan.combining else plan.final(g, x)
    if dst is not None and x in plan.where[g]:
        dst = None
    if dst is not None:
        plan.where[g][x] = dst
        return dst, None
    dst = plan.fresh(g)
    if red:
        return dst, Local("re", plan.where[g][x])
    if plan.combining:
        return dst, Local("copy", plan.where[g][x])
    plan.where[g].setdefault(x, dst)
    return dst, None


def _own_block_copies(plan: _Plan) -> list[dict]:
    """An all-to-all's local events: every rank copies its own block input -> output."""
    share = plan.c * plan.D
    events = []
    for g in range(plan.n):
        moves = [Move(Place("i", g * share + y), Place("o", g * share + y), None) for y in range(share)]
        events.append({"gpu": g, "peer": None, "step": 0, "phase": PHASE_LOCAL, "kind": "copy", "moves": moves,
                       "reads": [m.src for m in moves], "writes": [m.dst for m in moves]})
    return events


def _step_moves(plan: _Plan, transfers: list[Transfer], rank: dict, step: int) -> dict[tuple[int, int], list[Move]]:
    """The moves of one step per (sending rank, receiving rank): every read sees the state of
    the step before, then the arrivals land."""
    arrivals = []
    for t in transfers:
        gu, gv = rank[t.src], rank[t.dst]
        for y in range(t.lo, t.hi):
            x = t.rank_chunk * plan.D + y
            held = plan.relay.get((t.flow, x))
            src = held[1] if held and held[0] == gu else plan.where[gu].get(x)
            if src is None:
                raise InputError("schedule", f"rank {gu} sends plan chunk {x} in step {step} before it holds it")
            arrivals.append((gu, gv, x, src, t))
    sends: dict[tuple[int, int], list[Move]] = defaultdict(list)
    for gu, gv, x, src, t in arrivals:
        dst, local = _place(plan, gv, x, t.reduces, t.through, t.flow)
        sends[(gu, gv)].append(Move(src, dst, local))
    return sends


def _events(plan: _Plan, transfers: list[Transfer], rank: dict, instance: Instance) -> tuple[list, dict]:
    """Events ``{gpu, peer, step, phase, kind, moves, reads, writes}`` (``moves``: the
    :class:`Move` s of a put, or the local ops of its receiver) and the channel type of every
    rank pair."""
    ctype: dict[frozenset, str] = {}
    by_step: dict[int, list[Transfer]] = defaultdict(list)
    for t in transfers:
        by_step[t.step].append(t)
        key = frozenset((rank[t.src], rank[t.dst]))
        typ = _channel_type(instance.topology, t.src, t.dst, list(t.via))
        ctype[key] = "port" if ctype.get(key) == "port" or typ == "port" else "memory"
    events: list[dict] = _own_block_copies(plan) if plan.kind == "alltoall" else []
    for step in sorted(by_step):
        for (gu, gv), moves in sorted(_step_moves(plan, by_step[step], rank, step).items()):
            events.append({"gpu": gu, "peer": gv, "step": step, "phase": PHASE_PUT, "kind": "put", "moves": moves,
                           "reads": [m.src for m in moves], "writes": []})
            events.append({"gpu": gv, "peer": gu, "step": step, "phase": PHASE_WAIT, "kind": "wait", "moves": moves,
                           "reads": [], "writes": [m.dst for m in moves]})
            locs = [m for m in moves if m.local is not None]
            if locs:
                events.append({"gpu": gv, "peer": gu, "step": step, "phase": PHASE_LOCAL, "kind": "local",
                               "moves": locs, "reads": [m.dst for m in locs] + [m.local.into for m in locs],
                               "writes": [m.local.into for m in locs]})
    return events, ctype


# ---- a declared link order ---------------------------------------------------------------------

def _declared_waits(s: Schedule, transfers: list[Transfer], flow: np.ndarray, events: list, rank: dict,
                    instance: Instance) -> dict[int, list[int]]:
    """``link_order = "program"`` (:class:`~.schedule.Schedule`): the put events of its GPU
    that each put event waits for. A send out of a GPU follows the send before it out of that
    GPU over the same first link (to the peer, or into the first switch of its route; hops of
    a shortest-path send after its first are relays, not chained), as
    :func:`~collsynth.tens.cost.link_successors` chains them for the cost models. One step's
    sends to one peer are one put event, keyed by its step, then the first of its sends in
    (step, position) order; on each GPU and link, every event waits for every event of the key
    before it (the puts of one send through a copying switch share a key and wait for none of
    each other). Keys grow with the step, so the waits never run against the plan's steps;
    :func:`_sem_edges` makes semaphores of those another thread block runs."""
    put_of = {(ev["step"], ev["gpu"], ev["peer"]): e for e, ev in enumerate(events) if ev["kind"] == "put"}
    lead = np.ones(len(flow), bool)
    lead[1:] = flow[1:] != flow[:-1]  # the first hop of each given send (:func:`_hops`)
    chained = [t for t in transfers if t.first >= 0 and lead[t.first]]
    if not chained:
        return {}
    link = instance.topology.link_arrays.lookup([t.src for t in chained],
                                               [t.via[0] if t.via else t.dst for t in chained])
    key: dict[int, tuple] = {}
    on_link: dict[int, set[int]] = defaultdict(set)
    for t, pair in zip(chained, link.tolist()):
        e = put_of[(t.step, rank[t.src], rank[t.dst])]
        k = (t.step, int(s.step[t.first]), t.first)
        key[e] = min(key.get(e, k), k)
        on_link[pair].add(e)
    waits: dict[int, list[int]] = defaultdict(list)
    for evs in on_link.values():
        groups: dict[tuple, list[int]] = defaultdict(list)
        for e in sorted(evs):
            groups[key[e]].append(e)
        ordered = sorted(groups)
        for a, b in zip(ordered, ordered[1:]):
            for e in groups[b]:
                waits[e] += groups[a]
    return waits


# ---- thread blocks, windows and semaphores -----------------------------------------------------

def _lane(ev: dict, windows: dict) -> tuple:
    """The thread block key of an event: (peer, window) or (None, 0) for local copies."""
    if ev["peer"] is None:
        return (None, 0)
    starts = windows.get(frozenset((ev["gpu"], ev["peer"])), [0])
    w = sum(1 for s in starts if s <= ev["step"]) - 1
    return (ev["peer"], max(w, 0))


def _sem_edges(events: list, tb_of: list, waits: dict | None = None) -> tuple[dict, dict]:
    """``acquire[e]``/``release[e]``: semaphore keys ``(gpu, tb A, tb B)`` an event takes
    before it / gives after it, so that every conflicting access to a plan chunk by another
    thread block of the same GPU comes after the earlier ones (schedule order), and every
    event comes after the events ``waits[e]`` of other thread blocks (:func:`_declared_waits`)."""
    order = sorted(range(len(events)), key=lambda e: (events[e]["step"], events[e]["phase"], e))
    rank_in = {e: k for k, e in enumerate(order)}
    need: dict[int, dict[int, int]] = defaultdict(dict)  # event -> {tb: latest earlier event of that tb}
    last_w: dict[tuple, int] = {}
    reads: dict[tuple, list[int]] = defaultdict(list)
    for e in order:
        ev = events[e]
        g = ev["gpu"]
        before = list(waits.get(e, ())) if waits else []
        for cell in ev["reads"]:
            if (g, cell) in last_w:
                before.append(last_w[(g, cell)])
        for cell in ev["writes"]:
            if (g, cell) in last_w:
                before.append(last_w[(g, cell)])
            before += reads.pop((g, cell), [])
        for b in before:
            if tb_of[b] != tb_of[e] and (tb_of[b] not in need[e] or rank_in[b] > rank_in[need[e][tb_of[b]]]):
                need[e][tb_of[b]] = b
        for cell in ev["reads"]:
            reads[(g, cell)].append(e)
        for cell in ev["writes"]:
            last_w[(g, cell)] = e
            reads.pop((g, cell), None)
    acquire: dict[int, list] = defaultdict(list)
    release: dict[int, list] = defaultdict(list)
    got: dict[tuple, int] = {}
    for e in order:
        for tb_a, b in sorted(need[e].items()):
            key = (events[e]["gpu"], tb_a, tb_of[e])
            if got.get(key, -1) >= rank_in[b]:
                continue  # an earlier acquire already ordered this
            got[key] = rank_in[b]
            acquire[e].append(key)
            release[b].append(key)
    return acquire, release


class Run(NamedTuple):
    """``size`` plan chunks from ``src`` on, to ``dst`` on (both indices growing by one)."""

    src: Place
    dst: Place
    size: int


def _runs(pairs: list[tuple[Place, Place]]) -> list[Run]:
    """``(src, dst)`` plan chunks merged into :class:`Run` s."""
    out: list[Run] = []
    for a, b in pairs:
        if out:
            p = out[-1]
            if (p.src.buf, p.dst.buf) == (a.buf, b.buf) and p.src.idx + p.size == a.idx and p.dst.idx + p.size == b.idx:
                out[-1] = p._replace(size=p.size + 1)
                continue
        out.append(Run(a, b, 1))
    return out


def _buff(place: Place, size: int) -> dict:
    return {"type": place.buf, "index": place.idx, "size": size}


def _put_ops(moves: list[Move], ctype: str, remote_id) -> list[dict]:
    """A put event's ops: runs fused ``MAX_FUSED`` to a put, then ``nop``, ``signal`` (and
    ``flush`` on a port channel)."""
    ops, group = [], []
    for run in _runs([(m.src, m.dst) for m in moves]) + [None]:
        if group and (run is None or len(group) == MAX_FUSED or run.size != group[0].size
                      or run.src.buf != group[0].src.buf):
            op = {"name": "put", "src_buff": [_buff(r.src, r.size) for r in group],
                  "dst_buff": [{"buffer_id": remote_id(r.dst.buf), "index": r.dst.idx, "size": r.size} for r in group],
                  "channel_type": ctype}
            if ctype == "port":
                op["channel_ids"] = [0] * len(group)
            ops.append(op)
            group = []
        if run is not None:
            group.append(run)
    ops += [{"name": "nop"}, {"name": "signal", "channel_ids": [0], "channel_type": ctype}]
    return ops + ([{"name": "flush", "channel_ids": [0], "channel_type": ctype}] if ctype == "port" else [])


def _event_ops(ev: dict, ctype: str, remote_id) -> list[dict]:
    """The ops of one event (without semaphores)."""
    if ev["kind"] == "wait":
        return [{"name": "wait", "channel_ids": [0], "channel_type": ctype}]
    if ev["kind"] == "put":
        return _put_ops(ev["moves"], ctype, remote_id)
    if ev["kind"] == "copy":
        return [{"name": "copy", "src_buff": [_buff(r.src, r.size)], "dst_buff": [_buff(r.dst, r.size)]}
                for r in _runs([(m.src, m.dst) for m in ev["moves"]])]
    ops = []
    for kind in ("re", "copy"):
        for r in _runs([(m.local.into, m.dst) for m in ev["moves"] if m.local.kind == kind]):
            into, arrived = _buff(r.src, r.size), _buff(r.dst, r.size)
            if kind == "re":
                ops.append({"name": "re", "src_buff": [into, arrived], "dst_buff": [into], "reduce_op": "sum"})
            else:
                ops.append({"name": "copy", "src_buff": [arrived], "dst_buff": [into]})
    return [{"name": "nop"}] + ops


def _sem_ops(name: str, ids: list[int]) -> list[dict]:
    return [{"name": name, "semaphore_ids": ids[k:k + MAX_SEMAPHORES_PER_OP]}
            for k in range(0, len(ids), MAX_SEMAPHORES_PER_OP)]


def _gpu_blocks(g: int, events: list, idx: list[int], tb_key: dict, acquire, release, sem_id, ctype_of) -> tuple:
    """Thread blocks, channels and remote buffers of GPU ``g``."""
    keys = sorted({tb_key[e] for e in idx}, key=lambda k: (k[0] is None, k))
    tb_id = {k: i for i, k in enumerate(keys)}
    chan_lists: dict[str, list[int]] = {"memory": [], "port": []}
    remote: list[tuple] = []
    blocks = []
    for k in keys:
        peer = k[0]
        typ = ctype_of(g, peer) if peer is not None else None
        tb = {"id": tb_id[k], "ops": [], "channels": [], "remote_buffer_refs": []}
        refs: list[int] = []

        def remote_id(buf, peer=peer, typ=typ, refs=refs):
            entry = (peer, buf, typ)
            if entry not in remote:
                remote.append(entry)
            gid = remote.index(entry)
            if gid not in refs:
                refs.append(gid)
            return refs.index(gid)

        if peer is not None:
            tb["channels"] = [{"channel_type": typ, "channel_ids": [len(chan_lists[typ])]}]
            chan_lists[typ].append(peer)
        for e in sorted((e for e in idx if tb_key[e] == k), key=lambda e: (events[e]["step"], events[e]["phase"], e)):
            if acquire.get(e):
                tb["ops"] += _sem_ops("sem_acquire", [sem_id[x] for x in acquire[e]]) + [{"name": "nop"}]
            tb["ops"] += _event_ops(events[e], typ, remote_id)
            if release.get(e):
                tb["ops"] += ([] if tb["ops"][-1]["name"] == "nop" else [{"name": "nop"}]) + \
                    _sem_ops("sem_release", [sem_id[x] for x in release[e]])
        if refs:
            tb["remote_buffer_refs"] = [{"access_channel_type": typ, "remote_buffer_ids": refs}]
        blocks.append(tb)
    channels = [{"channel_type": t, "connected_to": peers} for t, peers in chan_lists.items() if peers]
    remote_buffers = [{"rank": p, "type": b, "access_channel_types": [t]} for p, b, t in remote]
    return blocks, channels, remote_buffers


def _layout_blocks(plan: _Plan, events: list, ctype: dict, max_threadblocks: int, waits: dict) -> list[dict]:
    """Every GPU's part of the plan; pairs whose thread blocks pass 64 ops are cut into
    windows of steps until each fits (``waits``: :func:`_sem_edges`)."""
    steps_of: dict[frozenset, list[int]] = defaultdict(list)
    for ev in events:
        if ev["peer"] is not None:
            steps_of[frozenset((ev["gpu"], ev["peer"]))].append(ev["step"])
    steps_of = {k: sorted(set(v)) for k, v in steps_of.items()}
    parts = {k: 1 for k in steps_of}
    by_gpu: dict[int, list[int]] = defaultdict(list)
    for e, ev in enumerate(events):
        by_gpu[ev["gpu"]].append(e)
    while True:
        windows = {k: [v[(len(v) * w) // parts[k]] for w in range(parts[k])] for k, v in steps_of.items()}
        tb_key = [_lane(ev, windows) for ev in events]
        tb_of = [(ev["gpu"], tb_key[e]) for e, ev in enumerate(events)]
        acquire, release = _sem_edges(events, tb_of, waits)
        sem_id: dict[tuple, int] = {}
        for keys in list(acquire.values()):
            for key in keys:
                sem_id.setdefault(key, sum(1 for x in sem_id if x[0] == key[0]))
        gpus = []
        over = None
        for g in range(plan.n):
            blocks, channels, remote = _gpu_blocks(g, events, by_gpu.get(g, []), tb_key, acquire, release, sem_id,
                                                   lambda a, b: ctype[frozenset((a, b))])
            for tb, key in zip(blocks, sorted({tb_key[e] for e in by_gpu.get(g, [])}, key=lambda k: (k[0] is None, k))):
                if len(tb["ops"]) > MAX_OPERATION and over is None:
                    over = (g, key, len(tb["ops"]))
            gpus.append({"id": g, **plan.sizes(g), "threadblocks": blocks, "channels": channels,
                         "remote_buffers": remote,
                         "semaphores": [{"init_value": 0}] * sum(1 for x in sem_id if x[0] == g)})
        if over is None:
            break
        g, (peer, _), count = over
        pair = frozenset((g, peer)) if peer is not None else None
        if pair is None or parts[pair] >= len(steps_of[pair]):
            raise InputError("schedule", f"rank {g}'s thread block for peer {peer} needs {count} ops; the MSCCL++ "
                             f"executor runs at most {MAX_OPERATION} per thread block (MAX_OPERATION)")
        parts[pair] = min(len(steps_of[pair]), parts[pair] * 2)
    most = max(len(gpu["threadblocks"]) for gpu in gpus)
    if most > max_threadblocks:
        raise InputError("schedule", f"the plan needs {most} thread blocks on one GPU, more than {max_threadblocks} "
                         "that can be resident at once (they wait on each other); raise max_threadblocks if the GPU has more SMs")
    return gpus


# ---- the plan ----------------------------------------------------------------------------------

def to_mscclpp_plan(schedule: Schedule, instance: Instance, *, name: str = "collsynth",
                    min_message_size: int = 0, max_message_size: int = 2**64 - 1,
                    max_threadblocks: int = MAX_THREADBLOCKS) -> dict:
    """The MSCCL++ execution plan (a JSON object) of ``schedule`` on ``instance``'s collective
    (see the module doc for the mapping; MSCCL++, microsoft/mscclpp v0.8+, Shah et al.,
    "MSCCL++: Rethinking GPU Communication Abstractions for Cutting-edge AI Applications",
    arXiv 2504.09014). Raises :class:`~collsynth.InputError` with one line saying why when
    the executor cannot run it.
    """
    if instance.concurrent:
        raise InputError("instance", "an MSCCL++ plan runs one collective; this instance has concurrent collectives")
    kind = instance.collective.kind
    if kind not in COLLECTIVES:
        raise InputError("instance", f"the MSCCL++ executor runs {', '.join(COLLECTIVES)}; this instance is a {kind}")
    if summed_in_switch(schedule, instance) is not None:  # switch channels (glres)
        return switch_plan(schedule, instance, name=name, min_message_size=min_message_size,
                           max_message_size=max_message_size)
    link_order = schedule.link_order
    schedule, through, flow = _hops(schedule, instance)
    D = schedule.denom
    plan = _Plan(instance, D)
    if plan.cells > MAX_CHUNKS:
        raise InputError("schedule", f"pieces on a 1/{D} grid need {plan.cells} plan chunks per buffer "
                         f"(more than {MAX_CHUNKS}); export whole-chunk schedules or a coarser grid")
    rank = rank_map(instance)
    transfers = _transfers(schedule, instance, through, flow)
    events, ctype = _events(plan, transfers, rank, instance)
    waits = _declared_waits(schedule, transfers, flow, events, rank, instance) if link_order == "program" else {}
    gpus = _layout_blocks(plan, events, ctype, max_threadblocks, waits)
    return {"name": name, "collective": COLLECTIVES[kind], "protocol": "Simple", "inplace": kind != "alltoall",
            "reuse_resources": False, "gpus": gpus, "num_threads_per_block": 1024,
            "use_double_scratch_buffer": False, "buffer_alignment": 16,
            "min_message_size": int(min_message_size), "max_message_size": int(max_message_size)}

