"""An interpreter of MSCCL++ execution plans written for the tests, independent of the exporter.

It runs a plan the way the MSCCL++ executor does and checks the result against the
collective's definition, so an exported plan is judged by what the runtime would compute. It
shares no code with ``collsynth.tens.export_mscclpp``. What it follows (microsoft/mscclpp):

- ``src/core/executor/execution_plan.cc``: the fields read (``name, collective, protocol,
  inplace, gpus``; per GPU ``id, input_chunks, output_chunks, scratch_chunks, threadblocks,
  channels, remote_buffers``, optional ``semaphores``; per thread block ``id, ops, channels``,
  optional ``remote_buffer_refs``), how a thread block's ``channel_ids`` index the GPU's
  channels of one type, how an op's ``buffer_id`` indexes the thread block's remote buffers
  of the op's channel type, and op names.
- ``src/core/include/execution_common.hpp``, ``executor.cc``: at most 64 ops per thread
  block, 16 channels per thread block, 8 destinations per put.
- ``src/core/include/execution_kernel.hpp``: every thread block runs its ops in order. A
  memory-channel ``put`` stores into the peer's buffer; a port-channel ``put`` is carried by
  the proxy, which may read its source until the thread block's next ``flush``; ``signal``
  on a channel lets the peer's matching ``wait`` pass (the k-th wait needs the k-th signal;
  the i-th channel of rank a to b is paired with the i-th channel of b to a);
  ``sem_release``/``sem_acquire`` are a counting semaphore of the GPU; ``barrier`` joins
  ``num_threadblocks`` thread blocks; ``copy`` and ``re`` (reduce, the sum of its sources)
  are local.
- ``python/mscclpp/language/channel.py`` ``SwitchChannel`` and ``execution_plan.cc``: a
  channel of type ``switch`` (NVLS) over ``rank_groups``; ``glres`` reads a region of every
  group member's buffer through the switch, adds, and stores the sum into every member's.
- ``python/mscclpp/language/collectives.py``: in place, allgather's input is the rank's
  share of its output, reduce-scatter's output the rank's share of its input, allreduce's
  output its input.

Every cell (one plan chunk) holds a value: a sorted tuple of ``(rank, index)`` contributions,
or ``None`` before anything is written. Accesses are stamped with vector clocks (program order,
signal -> wait, release -> acquire, barriers); a read must come after the write it reads, and
a write after every earlier access to its cell, through such a chain; otherwise the outcome
depends on timing and the plan is rejected. A plan is also rejected (:class:`Rejected`) for a
field the executor needs, an index outside a buffer, a wait without its signal (deadlock), a
signal or semaphore release nobody consumes, a contribution added twice, or final buffers that
differ from the collective's definition.
"""

from __future__ import annotations

import numpy as np

KINDS = ("allgather", "reducescatter", "allreduce", "alltoall")
MAX_OPS, MAX_TB_CHANNELS, MAX_PUT = 64, 16, 8
DATA_OPS = {"put", "pws", "pwsf", "get", "copy", "re", "glres"}
SYNC_OPS = {"nop", "signal", "wait", "rlxsignal", "rlxwait", "flush", "barrier", "sem_acquire", "sem_release"}


class Rejected(Exception):
    """The plan is not what the executor runs, or does not compute the collective."""


def _need(obj, key, where, typ):
    if not isinstance(obj, dict) or key not in obj:
        raise Rejected(f"{where}: missing {key}")
    val = obj[key]
    if typ is int and (isinstance(val, bool) or not isinstance(val, int)):
        raise Rejected(f"{where}.{key}: expected an integer, got {val!r}")
    if typ is not int and not isinstance(val, typ):
        raise Rejected(f"{where}.{key}: expected {typ.__name__}, got {val!r}")
    return val


class Machine:
    """The state of every GPU while a plan runs."""

    def __init__(self, plan: dict, kind: str, nranks: int):
        for key, typ in (("name", str), ("collective", str), ("protocol", str), ("inplace", bool), ("gpus", list)):
            _need(plan, key, "plan", typ)
        if plan["collective"] != kind:
            raise Rejected(f"plan.collective: {plan['collective']!r} is not {kind}")
        if plan["protocol"] != "Simple":
            raise Rejected(f"plan.protocol: {plan['protocol']!r} (only Simple is interpreted)")
        if len(plan["gpus"]) != nranks:
            raise Rejected(f"plan.gpus: {len(plan['gpus'])} GPUs for {nranks} ranks")
        self.kind, self.n, self.inplace = kind, nranks, plan["inplace"]
        self.gpus = plan["gpus"]
        self.sizes, self.blocks = [], []
        for g, gpu in enumerate(self.gpus):
            where = f"gpus[{g}]"
            if _need(gpu, "id", where, int) != g:
                raise Rejected(f"{where}.id: {gpu['id']} at position {g}")
            self.sizes.append({b: _need(gpu, f"{name}_chunks", where, int)
                               for b, name in (("i", "input"), ("o", "output"), ("s", "scratch"))})
            for key in ("threadblocks", "channels", "remote_buffers"):
                _need(gpu, key, where, list)
            for tb_pos, tb in enumerate(gpu["threadblocks"]):
                if _need(tb, "id", f"{where}.threadblocks[{tb_pos}]", int) != tb_pos:
                    raise Rejected(f"{where}.threadblocks[{tb_pos}].id: {tb['id']}")
                self.blocks.append((g, tb_pos))
        self._check_sizes()
        self._channels()
        self._memory()

    # -- set-up ---------------------------------------------------------------------------------

    def _check_sizes(self) -> None:
        for g, sz in enumerate(self.sizes):
            i, o = sz["i"], sz["o"]
            ok = {"allgather": o == self.n * i, "reducescatter": i == self.n * o, "allreduce": i == o,
                  "alltoall": i == o and i % self.n == 0}[self.kind]
            if not ok or min(i, o) <= 0 or sz["s"] < 0:
                raise Rejected(f"gpus[{g}]: input_chunks {i}, output_chunks {o} do not fit {self.kind} on {self.n} ranks")
        if self.kind == "alltoall" and self.inplace:
            raise Rejected("plan.inplace: an in-place all-to-all is not interpreted")

    def _channels(self) -> None:
        """``self.chan[(g, type)]`` = peers in order; pairs of paired channels."""
        self.chan: dict[tuple[int, str], list[int]] = {}
        self.groups: dict[int, list[list[int]]] = {}
        for g, gpu in enumerate(self.gpus):
            for k, ch in enumerate(gpu["channels"]):
                typ = _need(ch, "channel_type", f"gpus[{g}].channels[{k}]", str)
                if typ == "switch":  # NVLS: a multicast object over the ranks of each group
                    for group in _need(ch, "rank_groups", f"gpus[{g}].channels[{k}]", list):
                        ranks = _need(group, "ranks", f"gpus[{g}].channels[{k}]", list)
                        if g not in ranks or not all(isinstance(r, int) and 0 <= r < self.n for r in ranks):
                            raise Rejected(f"gpus[{g}].channels[{k}]: rank group {ranks} (must hold rank {g})")
                        self.groups.setdefault(g, []).append(ranks)
                    continue
                if typ not in ("memory", "port"):
                    raise Rejected(f"gpus[{g}].channels[{k}].channel_type: {typ!r} is not interpreted")
                peers = _need(ch, "connected_to", f"gpus[{g}].channels[{k}]", list)
                for p in peers:
                    if not isinstance(p, int) or not 0 <= p < self.n or p == g:
                        raise Rejected(f"gpus[{g}].channels[{k}].connected_to: rank {p!r} outside the plan's 0..{self.n - 1}")
                self.chan.setdefault((g, typ), []).extend(peers)
        self.pair: dict[tuple[int, str, int], tuple[int, str, int]] = {}
        for (g, typ), peers in self.chan.items():
            for q, p in enumerate(peers):
                nth = peers[:q].count(p)
                back = [k for k, x in enumerate(self.chan.get((p, typ), [])) if x == g]
                if nth >= len(back):
                    raise Rejected(f"gpus[{g}]: {typ} channel {q} to rank {p} has no matching channel on rank {p}")
                self.pair[(g, typ, q)] = (p, typ, back[nth])
        self.signals: dict[tuple, list] = {k: [] for k in self.pair}
        self.waited: dict[tuple, int] = {k: 0 for k in self.pair}

    def _memory(self) -> None:
        """Cells of every storage buffer, with initial values (inputs hold contributions)."""
        self.cells: dict[tuple[int, str], list[dict]] = {}
        for g, sz in enumerate(self.sizes):
            for b in "ios":
                if self._storage(g, b, 0)[0] == b:
                    self.cells[(g, b)] = [{"val": None, "w": None, "reads": []} for _ in range(sz[b])]
            for x in range(sz["i"]):
                cell = self._cell(g, "i", x, "init")
                cell["val"] = ((g, x),)
        self.sems = [list() for _ in self.gpus]
        for g, gpu in enumerate(self.gpus):
            for k, sem in enumerate(gpu.get("semaphores", [])):
                init = _need(sem, "init_value", f"gpus[{g}].semaphores[{k}]", int)
                self.sems[g].append([None] * init)

    def _storage(self, g: int, buf: str, idx: int) -> tuple[str, int]:
        """In-place buffers are views of one storage buffer."""
        if self.inplace and self.kind == "allgather" and buf == "i":
            return "o", g * self.sizes[g]["i"] + idx
        if self.inplace and self.kind == "reducescatter" and buf == "o":
            return "i", g * self.sizes[g]["o"] + idx
        if self.inplace and self.kind == "allreduce" and buf == "o":
            return "i", idx
        return buf, idx

    def _cell(self, g: int, buf: str, idx: int, where: str) -> dict:
        if buf not in ("i", "o", "s"):
            raise Rejected(f"{where}: buffer type {buf!r}")
        if not isinstance(idx, int) or not 0 <= idx < self.sizes[g][buf]:
            raise Rejected(f"{where}: index {idx} outside {buf} ({self.sizes[g][buf]} chunks) on rank {g}")
        b, x = self._storage(g, buf, idx)
        return self.cells[(g, b)][x]

    # -- running ----------------------------------------------------------------------------------

    def run(self, seed: int = 0) -> dict:
        """Run every thread block to its end (interleaved in a seeded random order)."""
        T = len(self.blocks)
        self.index = {b: k for k, b in enumerate(self.blocks)}
        self.clock = np.zeros((T, T), dtype=np.int64)
        self.pc = [0] * T
        self.pending = [[] for _ in range(T)]  # port-put source reads not flushed yet
        self.barrier_state: dict[tuple[int, int], list[int]] = {}
        rng = np.random.default_rng(seed)
        ops_run = 0
        while True:
            live = [k for k in range(T) if self.pc[k] < len(self._ops(k))]
            if not live:
                break
            progressed = False
            for k in rng.permutation(live).tolist():
                while self.pc[k] < len(self._ops(k)) and self._step(k):
                    self.pc[k] += 1
                    ops_run += 1
                    progressed = True
            if not progressed:
                k = live[0]
                g, tb = self.blocks[k]
                raise Rejected(f"deadlock: rank {g} thread block {tb} op {self.pc[k]} "
                               f"({self._ops(k)[self.pc[k]]['name']}) waits for what no thread block gives")
        self._leftovers()
        self._check_result()
        return {"ops": ops_run, "threadblocks": T}

    def _ops(self, k: int) -> list:
        g, tb = self.blocks[k]
        ops = _need(self.gpus[g]["threadblocks"][tb], "ops", f"gpus[{g}].threadblocks[{tb}]", list)
        if len(ops) > MAX_OPS:
            raise Rejected(f"gpus[{g}].threadblocks[{tb}]: {len(ops)} ops, the executor runs at most {MAX_OPS}")
        return ops

    def _tick(self, k: int) -> int:
        self.clock[k, k] += 1
        return int(self.clock[k, k])

    def _before(self, stamp, k: int) -> bool:
        """Whether the access ``stamp = (thread block, time)`` happens before ``k``'s next op."""
        if stamp is None or stamp[0] == "init":
            return True
        return stamp[0] == k or self.clock[k, stamp[0]] >= stamp[1]

    def _read(self, k: int, g: int, buf: str, idx: int, where: str, pending: bool = False):
        cell = self._cell(g, buf, idx, where)
        if cell["val"] is None:
            raise Rejected(f"{where}: reads {buf}[{idx}] on rank {g} before anything is written there")
        if not self._before(cell["w"], k):
            raise Rejected(f"{where}: reads {buf}[{idx}] on rank {g} with no signal/wait or semaphore after its write")
        rec = [k, int(self.clock[k, k]), pending]
        cell["reads"].append(rec)
        if pending:
            self.pending[k].append(rec)
        return cell["val"]

    def _write(self, k: int, g: int, buf: str, idx: int, val, where: str) -> None:
        cell = self._cell(g, buf, idx, where)
        if not self._before(cell["w"], k):
            raise Rejected(f"{where}: writes {buf}[{idx}] on rank {g} unordered with its earlier write")
        for rk, rt, pend in cell["reads"]:
            if pend or not self._before((rk, rt), k):
                raise Rejected(f"{where}: writes {buf}[{idx}] on rank {g} while a read of it may still run")
        cell.update(val=val, w=(k, int(self.clock[k, k])), reads=[])

    def _tb_channel(self, k: int, typ: str, local: int, where: str) -> tuple[int, str, int]:
        """The GPU channel ``(g, type, q)`` of a thread block's ``local``-th channel of ``typ``."""
        g, tb = self.blocks[k]
        ids = []
        chans = _need(self.gpus[g]["threadblocks"][tb], "channels", f"gpus[{g}].threadblocks[{tb}]", list)
        for ch in chans:
            if _need(ch, "channel_type", where, str) == typ:
                ids += _need(ch, "channel_ids", where, list)
        if len(ids) > MAX_TB_CHANNELS:
            raise Rejected(f"{where}: {len(ids)} channels in one thread block (at most {MAX_TB_CHANNELS})")
        if not isinstance(local, int) or not 0 <= local < len(ids):
            raise Rejected(f"{where}: channel id {local!r} outside the thread block's {len(ids)} {typ} channels")
        q = ids[local]
        if not isinstance(q, int) or not 0 <= q < len(self.chan.get((g, typ), [])):
            raise Rejected(f"{where}: {typ} channel {q!r} outside rank {g}'s channels")
        return (g, typ, q)

    def _remote(self, k: int, typ: str, local: int, where: str) -> tuple[int, str]:
        """(rank, buffer type) of a thread block's ``local``-th remote buffer of ``typ``."""
        g, tb = self.blocks[k]
        ids = []
        for ref in self.gpus[g]["threadblocks"][tb].get("remote_buffer_refs", []):
            if _need(ref, "access_channel_type", where, str) == typ:
                ids += _need(ref, "remote_buffer_ids", where, list)
        if not isinstance(local, int) or not 0 <= local < len(ids):
            raise Rejected(f"{where}: buffer_id {local!r} outside the thread block's {len(ids)} {typ} remote buffers")
        rbs = self.gpus[g]["remote_buffers"]
        if not isinstance(ids[local], int) or not 0 <= ids[local] < len(rbs):
            raise Rejected(f"{where}: remote buffer {ids[local]!r} outside rank {g}'s list")
        rb = rbs[ids[local]]
        rank = _need(rb, "rank", f"gpus[{g}].remote_buffers[{ids[local]}]", int)
        if not 0 <= rank < self.n or rank == g:
            raise Rejected(f"gpus[{g}].remote_buffers[{ids[local]}].rank: rank {rank} outside the plan's 0..{self.n - 1}")
        if typ not in _need(rb, "access_channel_types", f"gpus[{g}].remote_buffers[{ids[local]}]", list):
            raise Rejected(f"{where}: remote buffer {ids[local]} is not accessible over {typ}")
        return rank, _need(rb, "type", f"gpus[{g}].remote_buffers[{ids[local]}]", str)

    def _step(self, k: int) -> bool:
        g, tb = self.blocks[k]
        op = self._ops(k)[self.pc[k]]
        where = f"gpus[{g}].threadblocks[{tb}].ops[{self.pc[k]}]"
        name = _need(op, "name", where, str)
        if name not in DATA_OPS | SYNC_OPS:
            raise Rejected(f"{where}.name: {name!r} is not interpreted")
        if name in ("wait", "rlxwait"):
            ch = self._tb_channel(k, _need(op, "channel_type", where, str), _one(op, where), where)
            sigs = self.signals[self.pair[ch]]
            if len(sigs) <= self.waited[ch]:
                return False
            if name == "wait":
                np.maximum(self.clock[k], sigs[self.waited[ch]], out=self.clock[k])
            self.waited[ch] += 1
        elif name == "sem_acquire":
            ids = self._sem_ids(g, op, where)
            if any(not self.sems[g][s] for s in ids):
                return False
            for s in ids:
                stamp = self.sems[g][s].pop(0)
                if stamp is not None:
                    np.maximum(self.clock[k], stamp, out=self.clock[k])
        elif name == "barrier":
            return self._barrier(k, g, op, where)
        self._tick(k)
        if name in ("signal", "rlxsignal"):
            ch = self._tb_channel(k, _need(op, "channel_type", where, str), _one(op, where), where)
            self.signals[ch].append(self.clock[k].copy())
        elif name == "sem_release":
            for s in self._sem_ids(g, op, where):
                self.sems[g][s].append(self.clock[k].copy())
        elif name == "flush":
            for rec in self.pending[k]:
                rec[2] = False
            self.pending[k] = []
        elif name in DATA_OPS:
            self._data(k, g, op, name, where)
        return True

    def _sem_ids(self, g: int, op: dict, where: str) -> list[int]:
        ids = _need(op, "semaphore_ids", where, list)
        for s in ids:
            if not isinstance(s, int) or not 0 <= s < len(self.sems[g]):
                raise Rejected(f"{where}.semaphore_ids: {s!r} outside rank {g}'s {len(self.sems[g])} semaphores")
        return ids

    def _barrier(self, k: int, g: int, op: dict, where: str) -> bool:
        key = (g, _need(op, "barrier_id", where, int))
        count = _need(op, "num_threadblocks", where, int)
        arrived, released = self.barrier_state.setdefault(key, ([], []))
        if k in released:  # the barrier opened after this block arrived: it passes now
            released.remove(k)
            self._tick(k)
            return True
        if k not in arrived:
            arrived.append(k)
        if len(arrived) < count:
            return False
        joined = np.max(self.clock[arrived], axis=0)
        for j in arrived:
            self.clock[j] = np.maximum(self.clock[j], joined)
        released += [j for j in arrived if j != k]
        arrived.clear()
        self._tick(k)
        return True

    def _data(self, k: int, g: int, op: dict, name: str, where: str) -> None:
        src = _need(op, "src_buff", where, list)
        dst = _need(op, "dst_buff", where, list)
        typ = op.get("channel_type", "none")
        if name in ("put", "pws", "pwsf", "get"):
            if len(src) != len(dst) or not 0 < len(dst) <= MAX_PUT:
                raise Rejected(f"{where}: {len(src)} sources for {len(dst)} destinations (1..{MAX_PUT} pairs)")
            for a, b in zip(src, dst):
                size = _need(a, "size", where, int)
                if _need(b, "size", where, int) != size:
                    raise Rejected(f"{where}: source and destination sizes differ")
                remote_end, local_end = (b, a) if name != "get" else (a, b)
                peer, rbuf = self._remote(k, typ, _need(remote_end, "buffer_id", where, int), where)
                if typ == "port":
                    ch = self._tb_channel(k, typ, op.get("channel_ids", [None])[0] if op.get("channel_ids") else None, where)
                    if self.chan[(ch[0], typ)][ch[2]] != peer:
                        raise Rejected(f"{where}: a put to rank {peer} over a channel to rank {self.chan[(ch[0], typ)][ch[2]]}")
                lbuf = _need(local_end, "type", where, str)
                for y in range(size):
                    li, ri = _need(local_end, "index", where, int) + y, _need(remote_end, "index", where, int) + y
                    if name == "get":
                        self._write(k, g, lbuf, li, self._read(k, peer, rbuf, ri, where), where)
                    else:
                        val = self._read(k, g, lbuf, li, where, pending=(typ == "port"))
                        self._write(k, peer, rbuf, ri, val, where)
            if name in ("pws", "pwsf"):
                for local in op.get("channel_ids", [0]):
                    self.signals[self._tb_channel(k, typ, local, where)].append(self.clock[k].copy())
            if name == "pwsf":
                for rec in self.pending[k]:
                    rec[2] = False
                self.pending[k] = []
            return
        if name == "glres":
            return self._glres(k, g, src, dst, where)
        size = _need(dst[0], "size", where, int) if dst else 0
        if len(dst) != 1 or (name == "copy" and len(src) != 1) or (name == "re" and len(src) < 2):
            raise Rejected(f"{where}: {name} with {len(src)} sources and {len(dst)} destinations")
        for y in range(size):
            vals = [self._read(k, g, _need(a, "type", where, str), _need(a, "index", where, int) + y, where) for a in src]
            if any(_need(a, "size", where, int) != size for a in src):
                raise Rejected(f"{where}: operand sizes differ")
            val = vals[0] if name == "copy" else tuple(sorted(sum(vals, ())))
            if len(set(val)) != len(val):
                raise Rejected(f"{where}: a reduction adds a contribution twice: {val}")
            self._write(k, g, dst[0]["type"], _need(dst[0], "index", where, int) + y, val, where)

    def _glres(self, k: int, g: int, src: list, dst: list, where: str) -> None:
        """Group load-reduce-store (``multimem.ld_reduce`` then ``multimem.st``): read the
        region of every group member's buffer, add, store the sum into every member's."""
        if len(src) != 1 or len(dst) != 1:
            raise Rejected(f"{where}: glres with {len(src)} sources and {len(dst)} destinations")
        ids = []
        for ch in self.gpus[g]["threadblocks"][self.blocks[k][1]].get("channels", []):
            if ch.get("channel_type") == "switch":
                ids += ch.get("channel_ids", [])
        local = _need(src[0], "switch_channel_id", where, int)
        if dst[0].get("switch_channel_id") != local or not 0 <= local < len(ids) or \
                not 0 <= ids[local] < len(self.groups.get(g, [])):
            raise Rejected(f"{where}: switch channel {local!r} is not one of the thread block's")
        ranks = self.groups[g][ids[local]]
        for h in ranks:
            if self.groups.get(h, [None])[ids[local] if ids[local] < len(self.groups.get(h, [])) else 0] != ranks:
                raise Rejected(f"{where}: rank {h} has no switch channel over the same ranks")
        a, b = _need(src[0], "index", where, int), _need(dst[0], "index", where, int)
        for y in range(_need(src[0], "size", where, int)):
            val = tuple(sorted(sum((self._read(k, h, "i", a + y, where) for h in ranks), ())))
            if len(set(val)) != len(val):
                raise Rejected(f"{where}: a reduction adds a contribution twice: {val}")
            for h in ranks:
                self._write(k, h, "i", b + y, val, where)

    # -- the end ----------------------------------------------------------------------------------

    def _leftovers(self) -> None:
        for ch, sigs in self.signals.items():
            back = self.pair[ch]
            if len(sigs) != self.waited[back]:
                raise Rejected(f"rank {ch[0]} signals {len(sigs)} times on its {ch[1]} channel {ch[2]} to rank "
                               f"{back[0]}, which waits {self.waited[back]} times")
        for g, sems in enumerate(self.sems):
            for s, tokens in enumerate(sems):
                if tokens:
                    raise Rejected(f"rank {g} semaphore {s} ends with {len(tokens)} releases nobody acquired")

    def expected(self, g: int, x: int) -> tuple:
        """The collective's definition: what output chunk ``x`` of rank ``g`` must hold."""
        n, sz = self.n, self.sizes[g]
        if self.kind == "allgather":
            share = sz["i"]
            return ((x // share, x % share),)
        if self.kind == "reducescatter":
            return tuple((h, g * sz["o"] + x) for h in range(n))
        if self.kind == "allreduce":
            return tuple((h, x) for h in range(n))
        blk = sz["i"] // n
        return ((x // blk, g * blk + x % blk),)

    def _check_result(self) -> None:
        for g, sz in enumerate(self.sizes):
            for x in range(sz["o"]):
                b, y = self._storage(g, "o", x)
                got = self.cells[(g, b)][y]["val"]
                if got != self.expected(g, x):
                    raise Rejected(f"rank {g} output chunk {x} holds {got}, expected {self.expected(g, x)}")


def _one(op: dict, where: str) -> int:
    ids = _need(op, "channel_ids", where, list)
    if len(ids) != 1:
        raise Rejected(f"{where}.channel_ids: {len(ids)} channels (one is interpreted)")
    return ids[0]


def run_plan(plan: dict, kind: str, nranks: int, seeds: tuple[int, ...] = (0, 1)) -> dict:
    """Run ``plan`` for collective ``kind`` (the plan's name: allgather, reducescatter,
    allreduce, alltoall) on ``nranks`` ranks under several interleavings; raises
    :class:`Rejected` with the first fault."""
    if kind not in KINDS:
        raise Rejected(f"collective {kind!r} is not interpreted")
    out = {}
    for seed in seeds:
        out = Machine(plan, kind, nranks).run(seed)
    return out
