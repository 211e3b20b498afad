"""An interpreter of MSCCL XML programs written for the tests, independent of the exporter.

It runs a program the way Azure/msccl-executor-nccl does and checks the result against the
collective's definition, so an exported program is judged by what a GPU runtime would compute,
not by the exporter's own reading of its output. It shares no code with
``collsynth.tens.export``. What it follows (read in the executor's sources):

- ``src/misc/msccl/msccl_parser.cc``: the attributes, ``coll`` names, step types, limits and
  the way ``nop`` steps hand their dependencies to the next real step (and the rule that the
  step must carry one itself); consecutive ``re`` steps into one place fuse.
- ``src/device/msccl_kernel.cu``: every thread block runs its steps in order; a step first
  waits until each dependency's thread block has published a flag >= ``deps``; flags are
  published after steps with ``hasdep="1"`` and carry the block's step counter, which skips
  ``numDependencies - 1`` (the nops) before a step and ``numReductions - 1`` after a fused
  reduction. An MSCCL chunk is ``count * sizeMultiplier / nchunksperloop`` elements.
- ``src/misc/msccl/msccl_setup.cc``/``msccl_lifecycle.cc``: ``count`` per collective and what
  in place means for each (``sendbuff == recvbuff``, ``sendbuff == recvbuff + rank*count``,
  ``recvbuff == sendbuff + rank*count``); the scratch buffer holds ``s_chunks`` chunks.

Sends and receives travel over one FIFO per (channel, sender, receiver) of ``FIFO_DEPTH``
calls: the runtime's connection holds ``NCCL_STEPS`` = 8 steps and a Simple call takes
``SlicePerChunk * StepPerSlice`` = 2 x 2 of them (msccl-executor ``msccl_kernel.cu``:
``ProtoSimple<MSCCL_CHUNKSTEPS/MSCCL_SLICESTEPS, MSCCL_SLICESTEPS>``; ``prims_simple.h``), so
two calls. A step that receives and sends (``rcs``, ``rrs``, ``rrcs``) runs here as one atomic
transmission that needs room for a whole call, where the runtime forwards slice by slice as
room frees up, so a program that runs here does not rely on more buffering than the runtime has. Every buffer cell holds a value: a sorted tuple of
``(rank, index)`` contributions (one pair for plain data; a reduction concatenates), or
``None`` for bytes nobody wrote. Accesses are stamped with vector clocks (program order,
dependency flags, send -> receive); two accesses to one cell from different thread blocks that
no chain orders are a race when the outcome depends on their order. A program is rejected
(:class:`Rejected`) for a parser rule, a deadlock, an unreceived send, a race, an access
outside a buffer, or a final buffer that differs from the collective's postcondition.
"""

from __future__ import annotations

import random
import xml.etree.ElementTree as ET
from collections import deque
from dataclasses import dataclass, field

import numpy as np

ALGO = ("name", "proto", "nchannels", "nchunksperloop", "ngpus", "coll", "inplace", "outofplace",
        "minBytes", "maxBytes")
STEP = ("s", "type", "srcbuf", "srcoff", "dstbuf", "dstoff", "cnt", "depid", "deps", "hasdep")
SENDS = {"s", "rcs", "rrs", "rrcs"}
RECVS = {"r", "rcs", "rrs", "rrc", "rrcs"}
READS_SRC = {"s", "rrs", "rrc", "rrcs", "cpy", "re"}  # the local srcbuf/srcoff is an operand
WRITES_DST = {"r", "rcs", "rrc", "rrcs", "cpy", "re"}
TYPES = SENDS | RECVS | {"cpy", "re", "nop"}
# coll name -> (collective, sizeMultiplier is ngpus); msccl-tools writes "custom" for the rest
EXECUTOR = {"allgather": ("allgather", True), "reducescatter": ("reduce_scatter", True),
            "alltoall": ("alltoall", True), "allreduce": ("allreduce", False),
            "broadcast": ("broadcast", False), "reduce": ("reduce", False),
            "gather": ("gather", False), "scatter": ("scatter", False)}
TOOLS = {"allgather": ("allgather", True), "reduce_scatter": ("reduce_scatter", True),
         "alltoall": ("alltoall", True), "allreduce": ("allreduce", False),
         "broadcast": ("broadcast", False), "reduce": ("reduce", False)}
MAX_COUNT, MAX_TB_PER_CHANNEL, MAX_FUSION = 72, 32, 16
# steps per thread block and thread blocks per GPU (msccl-executor-nccl's default build:
# makefiles/common.mk, msccl_struct.h; microsoft/msccl: src/include/msccl.h)
MAX_STEPS = {"msccl-executor": 64, "msccl-tools": 256}
MAX_BLOCKS = {"msccl-executor": 1024, "msccl-tools": 216}
INT8, INT16 = 127, 32767  # a dependency's thread block is an int8_t; offsets are int16_t
FIFO_DEPTH = 2  # calls a connection buffers (module doc)


class Rejected(Exception):
    """The program is not what the runtime accepts, or does not compute the collective."""


@dataclass
class Transmission:
    """One executed step of a thread block (nops folded in, fused reductions merged)."""

    type: str
    srcbuf: str
    srcoff: int
    dstbuf: str
    dstoff: int
    cnt: int
    deps: list
    hasdep: int
    reduce_offsets: list = field(default_factory=list)
    flag: int = -1


@dataclass
class Block:
    gpu: int
    id: int
    send: int
    recv: int
    chan: int
    program: list
    pc: int = 0
    clock: np.ndarray | None = None


# ---- parsing (the parser's rules) ------------------------------------------------------------

def _attr_int(el, name, where):
    v = el.get(name)
    if v is None:
        raise Rejected(f"{where}: missing {name}")
    try:
        return int(v)
    except ValueError:
        raise Rejected(f"{where}: {name}={v!r} is not an integer") from None


def parse(xml: str, kind: str, dialect: str) -> tuple[dict, dict, dict]:
    """``(algo attributes, {gpu: sizes}, {gpu: [Block]})``; rejects what the parser refuses
    or what names another collective than ``kind``."""
    root = ET.fromstring(xml)
    if root.tag != "algo":
        raise Rejected(f"root element <{root.tag}>")
    for a in ALGO:
        if root.get(a) is None:
            raise Rejected(f"algo: missing {a}")
    algo = {a: root.get(a) for a in ALGO}
    if algo["proto"] not in ("Simple", "LL", "LL128"):
        raise Rejected(f"protocol {algo['proto']!r}")
    names = EXECUTOR if dialect == "msccl-executor" else {**TOOLS, "custom": (kind, True)}
    if names.get(algo["coll"], (None,))[0] != kind:
        raise Rejected(f"coll={algo['coll']!r} is not {kind} for {dialect}")
    ngpus, nchannels = _attr_int(root, "ngpus", "algo"), _attr_int(root, "nchannels", "algo")
    sizes, blocks = {}, {}
    for gpu in root.findall("gpu"):
        g = _attr_int(gpu, "id", "gpu")
        if g in sizes or not 0 <= g < ngpus:
            raise Rejected(f"gpu id {g} repeated or outside 0..{ngpus - 1}")
        sizes[g] = {b: _attr_int(gpu, f"{b}_chunks", f"gpu {g}") for b in "ios"}
        if min(sizes[g].values()) < 0:
            raise Rejected(f"gpu {g}: negative buffer size")
        blocks[g] = [_parse_block(tb, g, ngpus, nchannels, sizes[g], MAX_STEPS[dialect]) for tb in gpu.findall("tb")]
        _check_blocks(g, blocks[g], MAX_BLOCKS[dialect])
    if sorted(sizes) != list(range(ngpus)):
        raise Rejected(f"gpus {sorted(sizes)} for ngpus={ngpus}")
    return algo, sizes, blocks


def _parse_block(tb, g, ngpus, nchannels, sizes, max_steps) -> Block:
    where = f"gpu {g} tb {tb.get('id')}"
    bid, send, recv, chan = (_attr_int(tb, a, where) for a in ("id", "send", "recv", "chan"))
    if g in (send, recv) or not (-1 <= send < ngpus and -1 <= recv < ngpus):
        raise Rejected(f"{where}: peers send={send} recv={recv}")
    if not 0 <= chan < nchannels:
        raise Rejected(f"{where}: channel {chan} outside 0..{nchannels - 1}")
    steps = []
    for st in tb.findall("step"):
        for a in STEP:
            if st.get(a) is None:
                raise Rejected(f"{where}: step without {a}")
        rec = {a: st.get(a) for a in STEP}
        for a in ("s", "srcoff", "dstoff", "cnt", "depid", "deps", "hasdep"):
            rec[a] = _attr_int(st, a, where)
        _check_step(rec, where, send, recv, sizes, max_steps)
        steps.append(rec)
    return Block(g, bid, send, recv, chan, _compile(steps, where))


def _check_step(rec, where, send, recv, sizes, max_steps) -> None:
    typ = rec["type"]
    if typ not in TYPES:
        raise Rejected(f"{where}: step type {typ!r}")
    if not 0 <= rec["s"] < max_steps or rec["hasdep"] not in (0, 1):
        raise Rejected(f"{where}: step s={rec['s']} (at most {max_steps} steps) hasdep={rec['hasdep']}")
    if rec["depid"] > INT8 or max(rec["srcoff"], rec["dstoff"], rec["deps"]) > INT16:
        raise Rejected(f"{where}: a field overflows the executor's int8/int16 storage")
    if rec["srcbuf"] not in ("i", "o", "s") or rec["dstbuf"] not in ("i", "o", "s"):
        raise Rejected(f"{where}: buffers {rec['srcbuf']!r} {rec['dstbuf']!r}")
    if typ == "nop":
        return
    if not 0 <= rec["cnt"] < MAX_COUNT:
        raise Rejected(f"{where}: cnt {rec['cnt']}")
    if (typ in SENDS and send < 0) or (typ in RECVS and recv < 0):
        raise Rejected(f"{where}: {typ} without a peer")
    for used, buf, off in ((typ in READS_SRC, rec["srcbuf"], rec["srcoff"]), (typ in WRITES_DST, rec["dstbuf"], rec["dstoff"])):
        if used and not 0 <= off < sizes[buf]:
            raise Rejected(f"{where}: offset {off} outside {buf}_chunks={sizes[buf]}")


def _compile(steps: list[dict], where: str) -> list[Transmission]:
    """The executor's transmissions of one thread block, with their published flag values."""
    deps: list[tuple[int, int]] = []
    first = 0
    fusible = None  # (dstbuf, dstoff, srcbuf) of an open chain of reductions
    reductions = 0
    out: list[Transmission] = []
    for rec in steps:
        if rec["depid"] >= 0:
            deps.append((rec["depid"], rec["deps"]))
        if rec["type"] == "nop":
            continue
        key = (rec["dstbuf"], rec["dstoff"], rec["srcbuf"])
        if rec["type"] == "re" and fusible == key and rec["depid"] < 0:
            t = out[-1]
            t.hasdep = rec["hasdep"]
        else:
            t = Transmission(rec["type"], rec["srcbuf"], rec["srcoff"], rec["dstbuf"], rec["dstoff"],
                             rec["cnt"], deps[first:], rec["hasdep"])
            if t.deps and rec["depid"] < 0:
                raise Rejected(f"{where}: a step after nop dependencies carries none itself")
            first = len(deps)
            out.append(t)
        if rec["type"] == "re":
            t.reduce_offsets.append(rec["srcoff"])
            reductions += 1
            fusible = None if (rec["hasdep"] or reductions == MAX_FUSION) else key
        else:
            fusible = None
    counter = 0
    for t in out:
        counter += max(len(t.deps) - 1, 0) + max(len(t.reduce_offsets) - 1, 0)
        t.flag = counter
        counter += 1
    return out


def _check_blocks(g: int, blocks: list[Block], max_blocks: int) -> None:
    ids = sorted(b.id for b in blocks)
    if ids != list(range(len(blocks))) or len(blocks) > max_blocks:
        raise Rejected(f"gpu {g}: thread block ids {ids[:3]}..{ids[-3:]} (at most {max_blocks})")
    for peer_of in (lambda b: b.send, lambda b: b.recv):
        used = [(peer_of(b), b.chan) for b in blocks if peer_of(b) >= 0]
        if len(set(used)) != len(used):
            raise Rejected(f"gpu {g}: two thread blocks share a peer and channel")
        per_chan = [c for _, c in used]
        if any(per_chan.count(c) > MAX_TB_PER_CHANNEL for c in set(per_chan)):
            raise Rejected(f"gpu {g}: more than {MAX_TB_PER_CHANNEL} peers on a channel")


# ---- memory: the user's buffers, in MSCCL chunks ---------------------------------------------

def _count(kind: str, n: int, per_loop: int, multiplier: bool) -> int:
    """The call's ``count`` in MSCCL chunks (``count * sizeMultiplier == nchunksperloop``)."""
    m = n if multiplier else 1
    if per_loop % m or per_loop < m:
        raise Rejected(f"nchunksperloop={per_loop} is not a multiple of sizeMultiplier {m}")
    return per_loop // m


def _user_buffers(kind, n, count, rank, root, in_place) -> tuple[dict, tuple, tuple]:
    """``({"i": (array, base), "o": (array, base)}, send (array, base, len), recv (array, base, len))``.

    Sizes follow the call: one rank's share is ``count``; in place the two buffers overlap as
    the executor's scheduler defines it; out of place a rank whose buffer the collective
    does not use gets none (its accesses are out of bounds)."""
    whole = n * count
    send_len = {"allgather": count, "gather": count, "reduce_scatter": whole, "scatter": whole,
                "alltoall": whole}.get(kind, count)
    recv_len = {"allgather": whole, "gather": whole, "reduce_scatter": count, "scatter": count,
                "alltoall": whole}.get(kind, count)
    if in_place:
        if kind in ("allgather", "gather"):
            mem = [None] * whole
            return {"i": (mem, rank * count), "o": (mem, 0)}, (mem, rank * count, count), (mem, 0, whole)
        if kind in ("reduce_scatter", "scatter"):
            mem = [None] * whole
            return {"i": (mem, 0), "o": (mem, rank * count)}, (mem, 0, whole), (mem, rank * count, count)
        mem = [None] * send_len
        return {"i": (mem, 0), "o": (mem, 0)}, (mem, 0, send_len), (mem, 0, recv_len)
    if rank != root and kind in ("broadcast", "scatter"):
        send_len = 0
    if rank != root and kind in ("reduce", "gather"):
        recv_len = 0
    send, recv = [None] * send_len, [None] * recv_len
    return {"i": (send, 0), "o": (recv, 0)}, (send, 0, send_len), (recv, 0, recv_len)


def _inputs(kind, rank, root, send) -> None:
    arr, base, length = send
    if kind in ("broadcast", "scatter") and rank != root:
        return
    for x in range(length):
        arr[base + x] = ((rank, x),)


def _expected(kind, n, count, rank, root):
    """The postcondition of ``rank``'s receive buffer (``None``: nothing is required)."""
    everyone = lambda x: tuple(sorted((i, x) for i in range(n)))  # noqa: E731
    if kind == "allgather":
        return [((i, x),) for i in range(n) for x in range(count)]
    if kind == "reduce_scatter":
        return [everyone(rank * count + x) for x in range(count)]
    if kind == "allreduce":
        return [everyone(x) for x in range(count)]
    if kind == "broadcast":
        return [((root, x),) for x in range(count)]
    if kind == "alltoall":
        return [((i, rank * count + x),) for i in range(n) for x in range(count)]
    if kind == "scatter":
        return [((root, rank * count + x),) for x in range(count)]
    if rank != root:
        return None
    if kind == "reduce":
        return [everyone(x) for x in range(count)]
    return [((i, x),) for i in range(n) for x in range(count)]  # gather


# ---- execution --------------------------------------------------------------------------------

def _join(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.maximum(a, b)


def _add(a, b):
    return None if a is None or b is None else tuple(sorted(a + b))


class Machine:
    """The GPUs of one run: buffers, thread blocks, FIFOs, flags and the access log."""

    def __init__(self, blocks: dict, sizes: dict, kind, n, count, root, in_place, seed):
        self.kind, self.n, self.count, self.root = kind, n, count, root
        self.blocks = [b for g in range(n) for b in blocks[g]]
        self.index = {(b.gpu, b.id): k for k, b in enumerate(self.blocks)}
        width = len(self.blocks)
        for b in self.blocks:
            b.pc, b.clock = 0, np.zeros(width, dtype=np.int64)
        self.buffers, self.send, self.recv = {}, {}, {}
        for g in range(n):
            bufs, self.send[g], self.recv[g] = _user_buffers(kind, n, count, g, root, in_place)
            bufs["s"] = ([None] * sizes[g]["s"], 0)
            self.buffers[g] = bufs
            _inputs(kind, g, root, self.send[g])
        self.fifo: dict[tuple, deque] = {}
        self.published: dict[int, list] = {k: [] for k in range(width)}  # block -> [(flag, clock)]
        self.log: dict[tuple, list] = {}
        self.rng = random.Random(seed)

    # -- memory with the race check --
    def _cell(self, g, buf, off):
        arr, base = self.buffers[g][buf]
        if not 0 <= base + off < len(arr):
            raise Rejected(f"gpu {g}: {buf}[{off}] is outside the user's buffer ({len(arr) - base} chunks from its base)")
        return arr, base + off

    def read(self, g, buf, off, who, clock):
        arr, at = self._cell(g, buf, off)
        self._access(g, arr, at, who, clock, None)
        return arr[at]

    def write(self, g, buf, off, value, who, clock):
        arr, at = self._cell(g, buf, off)
        self._access(g, arr, at, who, clock, (arr[at], value))
        arr[at] = value

    def _access(self, g, arr, at, who, clock, write):
        key = (g, id(arr), at)
        for other, oclock, owrite in self.log.get(key, ()):
            if other == who or oclock[other] <= clock[other]:
                continue  # the earlier access happens before this one
            if write and owrite and write[1] != owrite[1]:
                raise Rejected(f"gpu {g}: unordered writes of different values to one cell (thread blocks "
                               f"{self.blocks[other].id} and {self.blocks[who].id})")
            if (write and not owrite and write[0] != write[1]) or (owrite and not write and owrite[0] != owrite[1]):
                raise Rejected(f"gpu {g}: a read and a write of one cell are unordered (thread blocks "
                               f"{self.blocks[other].id} and {self.blocks[who].id})")
        self.log.setdefault(key, []).append((who, clock, write))

    # -- scheduling --
    def _ready(self, b: Block, t: Transmission):
        clock = b.clock
        for bid, step in t.deps:
            if (b.gpu, bid) not in self.index:
                raise Rejected(f"gpu {b.gpu} tb {b.id}: depends on missing thread block {bid}")
            flags = [c for f, c in self.published[self.index[(b.gpu, bid)]] if f >= step]
            if not flags:
                return None
            clock = _join(clock, flags[0])
        if t.type in RECVS:
            q = self.fifo.get((b.chan, b.recv, b.gpu))
            if not q:
                return None
            if len(q[0][0]) != t.cnt:
                raise Rejected(f"gpu {b.gpu} tb {b.id}: receives {t.cnt} chunks, the matching send moved {len(q[0][0])}")
            clock = _join(clock, q[0][1])
        if t.type in SENDS and len(self.fifo.get((b.chan, b.gpu, b.send), ())) >= FIFO_DEPTH:
            return None
        return clock

    def run(self) -> int:
        """Run every thread block to its end; the number of transmissions executed."""
        done, order = 0, list(range(len(self.blocks)))
        progress = True
        while progress:
            progress = False
            self.rng.shuffle(order)
            for k in order:
                b = self.blocks[k]
                while b.pc < len(b.program):
                    t = b.program[b.pc]
                    clock = self._ready(b, t)
                    if clock is None:
                        break
                    clock = clock.copy()  # a fresh vector: logged accesses keep theirs
                    clock[k] += 1
                    self._execute(b, k, t, clock)
                    b.clock, b.pc = clock, b.pc + 1
                    done, progress = done + 1, True
        stuck = [f"gpu {b.gpu} tb {b.id} step {b.pc}" for b in self.blocks if b.pc < len(b.program)]
        if stuck:
            raise Rejected(f"deadlock: {', '.join(stuck[:4])}{' ...' if len(stuck) > 4 else ''} never run")
        left = [key for key, q in self.fifo.items() if q]
        if left:
            raise Rejected(f"sends nobody receives on (channel, src, dst) {left[:4]}")
        return done

    def _execute(self, b: Block, k: int, t: Transmission, clock: np.ndarray) -> None:
        g = b.gpu
        incoming = self.fifo[(b.chan, b.recv, g)].popleft()[0] if t.type in RECVS else None
        outgoing = []
        for x in range(t.cnt):
            if t.type == "re":
                value = self.read(g, t.dstbuf, t.dstoff + x, k, clock)
                for off in t.reduce_offsets:
                    value = _add(value, self.read(g, t.srcbuf, off + x, k, clock))
            elif t.type == "s" or t.type == "cpy":
                value = self.read(g, t.srcbuf, t.srcoff + x, k, clock)
            elif t.type in ("r", "rcs"):
                value = incoming[x]
            else:  # rrs rrc rrcs: what arrives plus the local operand
                value = _add(incoming[x], self.read(g, t.srcbuf, t.srcoff + x, k, clock))
            if t.type in WRITES_DST:
                self.write(g, t.dstbuf, t.dstoff + x, value, k, clock)
            outgoing.append(value)
        if t.type in SENDS:
            self.fifo.setdefault((b.chan, g, b.send), deque()).append((tuple(outgoing), clock))
        if t.hasdep:
            self.published[k].append((t.flag, clock))

    def check(self) -> None:
        for g in range(self.n):
            want = _expected(self.kind, self.n, self.count, g, self.root)
            if want is None:
                continue
            arr, base, length = self.recv[g]
            got = arr[base:base + length]
            if got != want:
                x = next((x for x in range(max(len(got), len(want)))
                          if x >= len(got) or x >= len(want) or got[x] != want[x]), None)
                raise Rejected(f"gpu {g}: output chunk {x} holds {got[x] if x < len(got) else 'nothing'}, "
                               f"expected {want[x] if x < len(want) else 'nothing'} ({len(want)} chunks expected)")


def run_msccl(xml: str, kind: str, *, root: int | None = None, dialect: str = "msccl-executor",
              seed: int = 0) -> dict:
    """Run ``xml`` as the executor would for collective ``kind`` (``root``: the root's rank),
    in place and/or out of place as the program declares; raise :class:`Rejected` unless every
    rank ends with its postcondition. Returns what ran (modes, transmissions, thread blocks)."""
    algo, sizes, blocks = parse(xml, kind, dialect)
    n = int(algo["ngpus"])
    names = EXECUTOR if dialect == "msccl-executor" else {**TOOLS, "custom": (kind, True)}
    count = _count(kind, n, int(algo["nchunksperloop"]), names[algo["coll"]][1])
    modes = [m for m, attr in (("in-place", "inplace"), ("out-of-place", "outofplace")) if algo[attr] == "1"]
    if not modes:
        raise Rejected("neither inplace nor outofplace")
    ran = 0
    for mode in modes:
        machine = Machine(blocks, sizes, kind, n, count, root, mode == "in-place", seed)
        ran = machine.run()
        machine.check()
    return {"modes": modes, "transmissions": ran, "blocks": sum(len(v) for v in blocks.values()), "count": count}
