"""Exports: MSCCL XML (what GPU runtimes execute) and back; the schedule JSON lives in .schedule.

MSCCL XML (seeds/README "Useful facts"; the MSCCL/SCCL executor's parser) is
``<algo name proto nchannels nchunksperloop ngpus coll inplace outofplace minBytes maxBytes
[redop]>`` -> ``<gpu id i_chunks o_chunks s_chunks>`` -> ``<tb id send recv chan>`` ->
``<step s type srcbuf srcoff dstbuf dstoff cnt depid deps hasdep>``. The mapping used here:

- GPUs are the collective's ranks: ``gpu id`` = position of the node in ``collective.nodes``.
  Only single-collective schedules whose sends join two ranks over a direct link export.
- Buffers: every rank-space chunk ``r`` (the schedule-file chunk numbering with node ids
  replaced by ranks) lives at offset ``r`` of one buffer: ``o`` for allgather, gather, scatter
  and broadcast; ``i`` for the combining kinds (in place); all-to-all reads the owner's ``i``
  (at ``k*c + j``), writes the destination's ``o`` (at ``i*c + j``) and relays through ``s``
  (at ``r``). Fractional pieces refine every chunk into ``denom`` MSCCL chunks (the lcm grid):
  piece ``[lo, hi)`` of chunk ``r`` is ``cnt = hi - lo`` chunks at offset ``r*denom + lo``;
  ``nchunksperloop`` = rank-space chunks x ``denom`` (at most ``max_chunks``).
- Thread blocks: one per (send peer, channel) holding the GPU's sends to that peer and one per
  (recv peer, channel) holding its receives, numbered 0.. without gaps per GPU. Sends of one
  step over a pair with several parallel links are spread round-robin over channels
  ``0..count-1``. The i-th send of a (src, dst, channel) tb pairs with the i-th receive of the
  matching tb at dst (both ordered by step, then schedule order).
- Step types: ``s`` for sends; ``r`` for copy receives and ``rrc`` (receive, reduce with the
  local buffer, store) where the collective combines (``op`` reduce, or default of a combining
  kind).
- Dependencies: a send waits for the receives that brought its piece (earlier steps,
  overlapping, same chunk; none for data held from the start). In combining collectives a
  receive also waits for the sends that read the same piece in the same or earlier steps
  (read before overwrite) and for earlier receives of it (no concurrent reductions into one
  buffer). Extra dependencies become ``nop`` steps before the step (the executor accumulates
  them); ``hasdep="1"`` marks every step something depends on.

:func:`interpret_msccl_xml` reads such XML back into a :class:`~.schedule.Schedule`: it pairs
sends and receives per (src, dst, channel) in order and numbers steps by the dependencies
(a send comes one step after the receives it depends on, or after a receive earlier in its
own thread block that wrote what it reads; program order is kept), so a test can verify that
the exported XML implements the collective.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from fractions import Fraction

import numpy as np

from .. import InputError
from ..instances.instance import Instance
from .schedule import OP_COPY, OP_DEFAULT, OP_REDUCE, Schedule, from_sends

MAX_CHUNKS = 4096
# executor limits (MSCCL's msccl/msccl_struct.h; NCCL's MAXCHANNELS)
MAX_STEPS = 256  # steps per thread block
MAX_COUNT = 72  # a step moves fewer than this many chunks
MAX_TB_PER_CHANNEL = 32  # send (and receive) thread blocks per channel and GPU
MAX_CHANNELS = 32
LANE_STEPS = 200  # a link's sends per channel before it spreads over one more channel
SEND_TYPES = {"s", "rcs", "rrs", "rrcs"}
RECV_TYPES = {"r", "rcs", "rrc", "rrs", "rrcs"}
REDUCE_TYPES = {"rrc", "rrs", "rrcs"}
KNOWN_TYPES = SEND_TYPES | RECV_TYPES | {"cpy", "re", "res", "nop"}
MSCCL_COLL = {
    "allgather": "allgather", "allreduce": "allreduce", "reduce_scatter": "reduce_scatter",
    "broadcast": "broadcast", "reduce": "reduce", "alltoall": "alltoall",
    "gather": "custom", "scatter": "custom",
}
BUFFER = {"allgather": "o", "gather": "o", "scatter": "o", "broadcast": "o",
          "reduce_scatter": "i", "allreduce": "i", "reduce": "i"}
ALGO_ATTRS = ("name", "proto", "nchannels", "nchunksperloop", "ngpus", "coll", "inplace",
              "outofplace", "minBytes", "maxBytes")
STEP_ATTRS = ("s", "type", "srcbuf", "srcoff", "dstbuf", "dstoff", "cnt", "depid", "deps", "hasdep")


# ---- layout -----------------------------------------------------------------------------------

class _Layout:
    """Rank-space chunk ids and buffer locations of one collective (see the module doc)."""

    def __init__(self, instance: Instance):
        if instance.concurrent:
            raise InputError("instance", "MSCCL export takes one collective; this instance has concurrent collectives")
        coll = instance.collective
        self.coll = coll
        self.kind = coll.kind
        self.ranks = np.asarray(coll.nodes, dtype=np.int64)
        self.n = len(self.ranks)
        self.rank_of = np.full(coll.size, -1, dtype=np.int64)
        self.rank_of[self.ranks] = np.arange(self.n)
        self.c = coll.chunks_per_node
        self.S = coll.size
        if self.kind in ("broadcast", "reduce"):
            self.rank_chunks = self.c
        elif self.kind == "alltoall":
            self.rank_chunks = self.n * self.n * self.c
        else:
            self.rank_chunks = self.n * self.c

    def to_rank_chunk(self, chunk: np.ndarray) -> np.ndarray:
        """Rank-space chunk ids (-1 where a chunk belongs to a non-participant)."""
        c, kind = self.c, self.kind
        if kind in ("broadcast", "reduce"):
            return chunk.copy()
        if kind == "alltoall":
            j = chunk % c
            pair = chunk // c
            i, k = self.rank_of[pair // self.S], self.rank_of[pair % self.S]
            return np.where((i >= 0) & (k >= 0), (i * self.n + k) * c + j, -1)
        i = self.rank_of[chunk // c]
        return np.where(i >= 0, i * c + chunk % c, -1)

    def from_rank_chunk(self, r: int) -> int:
        """The schedule chunk id of rank-space chunk ``r``."""
        c, kind = self.c, self.kind
        if kind in ("broadcast", "reduce"):
            return r
        if kind == "alltoall":
            j, pair = r % c, r // c
            i, k = self.ranks[pair // self.n], self.ranks[pair % self.n]
            return int((i * self.S + k) * c + j)
        return int(self.ranks[r // c] * c + r % c)

    def location(self, r: int, gpu: int) -> tuple[str, int]:
        """(buffer, chunk offset before refinement) of rank-space chunk ``r`` on ``gpu``."""
        if self.kind != "alltoall":
            return BUFFER[self.kind], r
        j, pair = r % self.c, r // self.c
        i, k = pair // self.n, pair % self.n
        if gpu == i:
            return "i", k * self.c + j
        if gpu == k:
            return "o", i * self.c + j
        return "s", r

    def chunk_at(self, buf: str, off: int, gpu: int) -> int:
        """Inverse of :meth:`location`: the rank-space chunk at ``(buf, off)`` on ``gpu``."""
        if self.kind != "alltoall":
            if buf != BUFFER[self.kind]:
                raise InputError("xml", f"{self.kind} data is expected in buffer {BUFFER[self.kind]!r}, got {buf!r}")
            return off
        c = self.c
        if buf == "i":
            return (gpu * self.n + off // c) * c + off % c
        if buf == "o":
            return ((off // c) * self.n + gpu) * c + off % c
        if buf == "s":
            return off
        raise InputError("xml", f"unknown buffer {buf!r}")

    def buffer_sizes(self, denom: int) -> dict[str, int]:
        """``i_chunks``, ``o_chunks``, ``s_chunks`` of every GPU."""
        n, c, D = self.n, self.c, denom
        total = self.rank_chunks * D
        kind = self.kind
        if kind == "allgather":
            return {"i_chunks": c * D, "o_chunks": total, "s_chunks": 0}
        if kind in ("gather", "scatter", "broadcast", "allreduce", "reduce"):
            return {"i_chunks": total, "o_chunks": total, "s_chunks": 0}
        if kind == "reduce_scatter":
            return {"i_chunks": total, "o_chunks": c * D, "s_chunks": 0}
        return {"i_chunks": n * c * D, "o_chunks": n * c * D, "s_chunks": total}  # alltoall


def _combining_op(schedule: Schedule, kind_combining: bool) -> np.ndarray:
    """True where the receiver reduces."""
    op = schedule.op
    return (op == OP_REDUCE) | ((op == OP_DEFAULT) & kind_combining)


# ---- export -----------------------------------------------------------------------------------

def to_msccl_xml(
    schedule: Schedule,
    instance: Instance,
    *,
    name: str = "collsynth",
    proto: str = "Simple",
    min_bytes: int = 0,
    max_bytes: int = 1 << 40,
    max_chunks: int = MAX_CHUNKS,
) -> str:
    """The MSCCL XML program of ``schedule`` (see the module doc for the mapping).

    Raises :class:`~collsynth.InputError` for what MSCCL cannot run: concurrent collectives,
    sends that are not direct links between ranks, or a refined chunk grid over ``max_chunks``.
    """
    lay = _Layout(instance)
    topo = instance.topology
    s = schedule
    D = s.denom
    if lay.rank_chunks * D > max_chunks:
        raise InputError("schedule", f"pieces on a 1/{D} grid need {lay.rank_chunks * D} MSCCL chunks per loop "
                         f"(more than {max_chunks}); export whole-chunk schedules or a coarser grid")
    n_send = len(s)
    if n_send and (max(s.src.max(), s.dst.max()) >= lay.S or min(s.src.min(), s.dst.min()) < 0):
        raise InputError("schedule", f"a send names a node outside 0..{lay.S - 1}")
    src_r, dst_r = lay.rank_of[s.src], lay.rank_of[s.dst]
    if n_send:
        bad = np.flatnonzero((src_r < 0) | (dst_r < 0))
        if len(bad):
            i = int(bad[0])
            raise InputError("schedule", f"send {i} ({s.src[i]}->{s.dst[i]}) touches a node that is not a rank of the collective")
    pair = topo.link_arrays.lookup(s.src, s.dst)
    if n_send and (pair < 0).any():
        i = int(np.flatnonzero(pair < 0)[0])
        raise InputError("schedule", f"send {i} ({s.src[i]}->{s.dst[i]}) is not over a direct link; only direct-link schedules export to MSCCL")
    rchunk = lay.to_rank_chunk(s.chunk)
    if n_send and (rchunk < 0).any():
        i = int(np.flatnonzero(rchunk < 0)[0])
        raise InputError("schedule", f"send {i} moves chunk {s.chunk[i]}, which no rank owns")
    reduce = _combining_op(s, lay.coll.combining)
    if n_send and int((s.hi - s.lo).max()) >= MAX_COUNT:
        raise InputError("schedule", f"a piece spans {int((s.hi - s.lo).max())} MSCCL chunks; the executor moves fewer than {MAX_COUNT} per step")
    count = topo.link_arrays.count[pair] if n_send else np.zeros(0, np.int64)
    # program order: by step, then schedule order
    order = np.argsort(s.step, kind="stable")
    chan = _channels(s, order, count)
    nchannels = int(chan.max()) + 1 if n_send else 1
    if nchannels > MAX_CHANNELS:
        raise InputError("schedule", f"needs {nchannels} channels; MSCCL has at most {MAX_CHANNELS}")

    # ops: ("S", i) send of transfer i at its source, ("R", i) its receive at the destination
    tbs: dict[int, dict[tuple, list]] = defaultdict(dict)  # gpu -> {(dir, peer, chan): [ops]}
    for i in order.tolist():
        g_s, g_d, ch = int(src_r[i]), int(dst_r[i]), int(chan[i])
        tbs[g_s].setdefault(("send", g_d, ch), []).append(("S", i))
        tbs[g_d].setdefault(("recv", g_s, ch), []).append(("R", i))
    # dependencies between ops
    deps: dict[tuple, list[tuple]] = defaultdict(list)
    from .cost import _dependencies

    if n_send:
        di, dj = _dependencies(s, instance)
        for a, b in zip(di.tolist(), dj.tolist()):
            deps[("S", a)].append(("R", b))
        if lay.coll.combining:
            _anti_dependencies(s, order, deps)
    # thread block ids (gapless per GPU) and step indices (after nops)
    pos: dict[tuple, tuple[int, int]] = {}
    layout_tbs: dict[int, list[tuple[tuple, list]]] = {}
    for g in range(lay.n):
        keys = sorted(tbs.get(g, {}), key=lambda k: (k[0] != "send", k[1], k[2]))
        layout_tbs[g] = [(k, tbs[g][k]) for k in keys]
        for tb_id, (k, ops) in enumerate(layout_tbs[g]):
            idx = 0
            for op in ops:
                idx += max(len(deps.get(op, ())) - 1, 0)
                pos[op] = (tb_id, idx)
                idx += 1
    hasdep = {d for ds in deps.values() for d in ds}
    for g, lst in layout_tbs.items():
        for (direction, peer, ch), ops in lst:
            steps = pos[ops[-1]][1] + 1
            if steps > MAX_STEPS:
                raise InputError("schedule", f"gpu {g} would run {steps} steps in its {direction} thread block for peer "
                                 f"{peer} (channel {ch}); MSCCL runs at most {MAX_STEPS} per thread block")

    algo = ET.Element("algo", {
        "name": name, "proto": proto, "nchannels": str(nchannels),
        "nchunksperloop": str(lay.rank_chunks * D), "ngpus": str(lay.n), "coll": MSCCL_COLL[lay.kind],
        "inplace": "0" if lay.kind == "alltoall" else "1", "outofplace": "1" if lay.kind == "alltoall" else "0",
        "minBytes": str(int(min_bytes)), "maxBytes": str(int(max_bytes)),
        "redop": "sum" if lay.coll.combining else "nop",
    })
    sizes = lay.buffer_sizes(D)
    for g in range(lay.n):
        gpu = ET.SubElement(algo, "gpu", {"id": str(g), **{k: str(v) for k, v in sizes.items()}})
        for tb_id, ((direction, peer, ch), ops) in enumerate(layout_tbs[g]):
            tb = ET.SubElement(gpu, "tb", {
                "id": str(tb_id), "send": str(peer) if direction == "send" else "-1",
                "recv": str(peer) if direction == "recv" else "-1", "chan": str(ch),
            })
            idx = 0
            for op in ops:
                kind, i = op
                r = int(rchunk[i])
                lo, hi = int(s.lo[i]), int(s.hi[i])
                sbuf, soff = lay.location(r, int(src_r[i]))
                dbuf, doff = lay.location(r, int(dst_r[i]))
                here = [pos[d] for d in deps.get(op, ())]
                for dep_tb, dep_s in here[:-1]:
                    ET.SubElement(tb, "step", _step(idx, "nop", "i", 0, "i", 0, 0, dep_tb, dep_s, 0))
                    idx += 1
                dep_tb, dep_s = here[-1] if here else (-1, -1)
                typ = "s" if kind == "S" else ("rrc" if reduce[i] else "r")
                bufs = (sbuf, soff * D + lo, dbuf, doff * D + lo)
                ET.SubElement(tb, "step", _step(idx, typ, *bufs, hi - lo, dep_tb, dep_s, int(op in hasdep)))
                idx += 1
    ET.indent(algo, space="  ")
    return ET.tostring(algo, encoding="unicode") + "\n"


def _channels(s: Schedule, order: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Channel of every send: a link with ``k`` parallel links and ``m`` sends gets
    ``lanes = max(k, ceil(m / LANE_STEPS))`` consecutive channels from a base chosen greedily so
    that no GPU has more than ``MAX_TB_PER_CHANNEL`` send (or receive) thread blocks on a
    channel; its sends take the lanes round-robin in program order (so the sends of one step
    over parallel links use different links)."""
    n = len(s)
    chan = np.zeros(n, dtype=np.int64)
    if n == 0:
        return chan
    links: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i in order.tolist():
        links[(int(s.src[i]), int(s.dst[i]))].append(i)
    out_use: dict[int, Counter] = defaultdict(Counter)
    in_use: dict[int, Counter] = defaultdict(Counter)
    for (u, v), members in sorted(links.items()):
        lanes = max(int(count[members[0]]), -(-len(members) // LANE_STEPS))
        base = 0
        while any(out_use[u][base + q] >= MAX_TB_PER_CHANNEL or in_use[v][base + q] >= MAX_TB_PER_CHANNEL
                  for q in range(lanes)):
            base += 1
        for q in range(lanes):
            out_use[u][base + q] += 1
            in_use[v][base + q] += 1
        for m, i in enumerate(members):
            chan[i] = base + m % lanes
    return chan


def _step(s, typ, srcbuf, srcoff, dstbuf, dstoff, cnt, depid, deps, hasdep) -> dict:
    return {"s": str(s), "type": typ, "srcbuf": srcbuf, "srcoff": str(srcoff), "dstbuf": dstbuf,
            "dstoff": str(dstoff), "cnt": str(cnt), "depid": str(depid), "deps": str(deps), "hasdep": str(hasdep)}


def _anti_dependencies(s: Schedule, order: np.ndarray, deps: dict) -> None:
    """Combining collectives: a receive of a piece at v waits for v's sends of overlapping
    pieces in the same or earlier steps and for v's earlier receives of them (program order)."""
    by_node_chunk: dict[tuple[int, int], list[tuple[str, int]]] = defaultdict(list)
    for i in order.tolist():
        by_node_chunk[(int(s.src[i]), int(s.chunk[i]))].append(("S", i))
        by_node_chunk[(int(s.dst[i]), int(s.chunk[i]))].append(("R", i))
    lo, hi, step = s.lo.tolist(), s.hi.tolist(), s.step.tolist()
    for ops in by_node_chunk.values():
        recvs = [op for op in ops if op[0] == "R"]
        if not recvs:
            continue
        sends = [op for op in ops if op[0] == "S"]
        for k, (_, i) in enumerate(recvs):
            for _, j in sends:
                if step[j] <= step[i] and lo[j] < hi[i] and lo[i] < hi[j]:
                    deps[("R", i)].append(("S", j))
            for _, j in reversed(recvs[:k]):  # the latest earlier overlapping receive suffices
                if lo[j] < hi[i] and lo[i] < hi[j]:
                    deps[("R", i)].append(("R", j))
                    break


# ---- interpretation ---------------------------------------------------------------------------

def _int(el: ET.Element, attr: str, where: str) -> int:
    v = el.get(attr)
    if v is None:
        raise InputError(where, f"missing attribute {attr!r}")
    try:
        return int(v)
    except ValueError:
        raise InputError(where, f"attribute {attr}={v!r} is not an integer") from None


def interpret_msccl_xml(xml: str, instance: Instance, denom: int | None = None) -> Schedule:
    """The schedule an MSCCL XML program executes on ``instance``'s collective.

    Sends and receives are paired per (src, dst, channel) in thread-block order; a transfer's
    chunk and piece come from the receiver's destination (buffer, offset, cnt), split at chunk
    boundaries. Steps: every transfer is numbered by the longest dependency chain: one more
    than a receive its send depends on (``depid``/``deps``, including ``nop`` steps, or an
    earlier receive in the same thread block writing what it reads), at least the step of any
    other dependency and of the previous step in its thread block. ``denom`` defaults to
    ``nchunksperloop`` / rank-space chunks. Errors are :class:`~collsynth.InputError`.
    """
    lay = _Layout(instance)
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as e:
        raise InputError("xml", f"malformed XML: {e}") from None
    if root.tag != "algo":
        raise InputError("xml", f"expected an <algo> root element, got <{root.tag}>")
    for a in ALGO_ATTRS:
        if root.get(a) is None:
            raise InputError("xml: algo", f"missing attribute {a!r}")
    ngpus = _int(root, "ngpus", "xml: algo")
    if ngpus != lay.n:
        raise InputError("xml: algo.ngpus", f"the collective has {lay.n} ranks, the XML {ngpus}")
    per_loop = _int(root, "nchunksperloop", "xml: algo")
    if denom is None:
        if per_loop % lay.rank_chunks:
            raise InputError("xml: algo.nchunksperloop", f"expected a multiple of {lay.rank_chunks}, got {per_loop}")
        denom = per_loop // lay.rank_chunks
    D = int(denom)
    # collect ops
    ops: dict[tuple[int, int, int], dict] = {}  # (gpu, tb, s) -> step attrs
    tb_info: dict[tuple[int, int], dict] = {}
    tb_ops: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    for gpu in root.findall("gpu"):
        g = _int(gpu, "id", "xml: gpu")
        ids = []
        for tb in gpu.findall("tb"):
            where = f"xml: gpu {g} tb"
            t = _int(tb, "id", where)
            ids.append(t)
            info = {"send": _int(tb, "send", where), "recv": _int(tb, "recv", where), "chan": _int(tb, "chan", where)}
            tb_info[(g, t)] = info
            lst = tb_ops[(g, t)] = []
            for st in tb.findall("step"):
                w = f"xml: gpu {g} tb {t} step"
                for a in STEP_ATTRS:
                    if st.get(a) is None:
                        raise InputError(w, f"missing attribute {a!r}")
                rec = {a: st.get(a) for a in STEP_ATTRS}
                for a in ("s", "srcoff", "dstoff", "cnt", "depid", "deps", "hasdep"):
                    rec[a] = _int(st, a, w)
                if rec["type"] not in KNOWN_TYPES:
                    raise InputError(w, f"unknown step type {rec['type']!r}")
                key = (g, t, rec["s"])
                if key in ops:
                    raise InputError(w, f"duplicate step s={rec['s']}")
                ops[key] = rec
                lst.append(key)
        if sorted(ids) != list(range(len(ids))):
            raise InputError(f"xml: gpu {g}", f"thread block ids must be 0..{len(ids) - 1} without gaps, got {sorted(ids)}")
    # pair sends with receives per (src, dst, chan)
    sends_by: dict[tuple[int, int, int], list] = defaultdict(list)
    recvs_by: dict[tuple[int, int, int], list] = defaultdict(list)
    for (g, t), keys in tb_ops.items():
        info = tb_info[(g, t)]
        for key in keys:
            typ = ops[key]["type"]
            if typ in SEND_TYPES:
                if info["send"] < 0:
                    raise InputError(f"xml: gpu {g} tb {t}", "a send step in a thread block without a send peer")
                sends_by[(g, info["send"], info["chan"])].append(key)
            if typ in RECV_TYPES:
                if info["recv"] < 0:
                    raise InputError(f"xml: gpu {g} tb {t}", "a receive step in a thread block without a recv peer")
                recvs_by[(info["recv"], g, info["chan"])].append(key)
    transfers = []  # (send key, recv key)
    send_of: dict = {}
    recv_of: dict = {}
    for link in sorted(set(sends_by) | set(recvs_by)):
        a, b = sends_by.get(link, []), recvs_by.get(link, [])
        if len(a) != len(b):
            raise InputError("xml", f"{len(a)} sends but {len(b)} receives on {link[0]}->{link[1]} channel {link[2]}")
        for x, y in zip(a, b):
            if ops[x]["cnt"] != ops[y]["cnt"]:
                raise InputError("xml", f"send {x} and receive {y} move different counts")
            send_of[x] = len(transfers)
            recv_of[y] = len(transfers)
            transfers.append((x, y))
    # constraints between transfers: (before, after, gap)
    edges: list[tuple[int, int, int]] = []
    for (g, t), keys in tb_ops.items():
        pending: list[tuple[int, int, int]] = []
        prev: int | None = None
        written: list[tuple[str, int, int, int]] = []  # (buf, lo, hi, transfer) received here earlier
        for key in keys:
            rec = ops[key]
            if rec["depid"] >= 0:
                dkey = (g, rec["depid"], rec["deps"])
                if dkey not in ops:
                    raise InputError(f"xml: gpu {g} tb {t} step {rec['s']}", f"depends on missing step {rec['depid']}:{rec['deps']}")
                pending.append(dkey)
            if rec["type"] == "nop":
                continue
            mine = [x for x in (recv_of.get(key), send_of.get(key)) if x is not None]
            if not mine:
                pending = []
                continue
            if len(mine) == 2:  # receive-and-forward: the forward is one step later
                edges.append((mine[0], mine[1], 1))
            for dkey in pending:
                for dep, dep_is_recv in ((send_of.get(dkey), False), (recv_of.get(dkey), True)):
                    for me in mine:
                        if dep is None or dep == me:
                            continue
                        gap = 1 if (me == send_of.get(key) and dep_is_recv) else 0
                        edges.append((dep, me, gap))
            pending = []
            if prev is not None:
                for me in mine:
                    if me != prev:
                        edges.append((prev, me, 0))
            if key in send_of:
                lo, hi = rec["srcoff"], rec["srcoff"] + rec["cnt"]
                for buf, wlo, whi, w in written:
                    if buf == rec["srcbuf"] and wlo < hi and lo < whi and w != send_of[key]:
                        edges.append((w, send_of[key], 1))
            if key in recv_of:
                written.append((rec["dstbuf"], rec["dstoff"], rec["dstoff"] + rec["cnt"], recv_of[key]))
            prev = mine[-1]
    step = _longest_paths(len(transfers), edges)
    rows = []
    for x, (skey, rkey) in enumerate(transfers):
        g_src, g_dst = skey[0], rkey[0]
        rec = ops[rkey]
        op = "reduce" if rec["type"] in REDUCE_TYPES else "copy"
        off, cnt = rec["dstoff"], rec["cnt"]
        while cnt > 0:  # split at chunk boundaries
            base, lo = divmod(off, D)
            take = min(cnt, D - lo)
            r = lay.chunk_at(rec["dstbuf"], base, g_dst)
            if not 0 <= r < lay.rank_chunks:
                raise InputError("xml", f"offset {off} of buffer {rec['dstbuf']!r} on gpu {g_dst} is outside the collective")
            rows.append((lay.from_rank_chunk(r), Fraction(lo, D), Fraction(lo + take, D),
                         int(lay.ranks[g_src]), int(lay.ranks[g_dst]), step[x], op))
            off += take
            cnt -= take
    return from_sends(rows, lay.kind, lay.S, lay.coll.num_chunks)


def _longest_paths(n: int, edges: list[tuple[int, int, int]]) -> list[int]:
    """Smallest steps from 1 with ``step[b] >= step[a] + gap`` for every edge ``(a, b, gap)``.

    Zero-gap cycles are allowed (two GPUs exchanging a piece in one step: each receive waits
    for the local send, which the executor's buffered sends satisfy): strongly connected
    components share one step; a cycle with a positive gap is an error.
    """
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    if not edges:
        return [1] * n
    a = np.fromiter((e[0] for e in edges), dtype=np.int64, count=len(edges))
    b = np.fromiter((e[1] for e in edges), dtype=np.int64, count=len(edges))
    gap = np.fromiter((e[2] for e in edges), dtype=np.int64, count=len(edges))
    _, comp = connected_components(csr_matrix((np.ones(len(a)), (a, b)), shape=(n, n)),
                                   directed=True, connection="strong")
    ca, cb = comp[a], comp[b]
    if ((ca == cb) & (gap > 0)).any():
        raise InputError("xml", "circular dependencies between steps")
    m = int(comp.max()) + 1
    keep = ca != cb
    out_edges: list[list[tuple[int, int]]] = [[] for _ in range(m)]
    indeg = [0] * m
    for x, y, g in zip(ca[keep].tolist(), cb[keep].tolist(), gap[keep].tolist()):
        out_edges[x].append((y, g))
        indeg[y] += 1
    step = [1] * m
    queue = [i for i in range(m) if indeg[i] == 0]
    while queue:
        x = queue.pop()
        for y, g in out_edges[x]:
            if step[x] + g > step[y]:
                step[y] = step[x] + g
            indeg[y] -= 1
            if indeg[y] == 0:
                queue.append(y)
    return [step[c] for c in comp.tolist()]
