"""MSCCL++ execution plans read back as a Schedule (``collsynth verify PLAN.json INSTANCE.toml
--from mscclpp-json``), so a plan, ours or another tool's, is verified and priced like any
schedule.

The plan (microsoft/mscclpp v0.8+, ``src/core/executor/execution_plan.cc``; Shah et al.,
"MSCCL++: Rethinking GPU Communication Abstractions for Cutting-edge AI Applications", arXiv
2504.09014) is run op by op, every thread block in turn until it blocks (``wait`` until the
peer's matching ``signal`` on the paired channel, ``sem_acquire`` until a ``sem_release``,
``barrier`` until ``num_threadblocks`` blocks arrive); a plan where nothing can move is a
deadlock. Every plan chunk carries what it holds (a chunk of the collective, on the grid of
``1/d`` pieces its buffer sizes give) and the step it became ready. A ``put`` of a ready chunk
is a send one step later; one into a scratch chunk of a combining collective becomes a
``reduce`` send when a local ``re`` adds it, a ``copy`` when ``copy`` moves it into place; a
scratch chunk put on before that (a relay passing a partial sum on untouched) makes the send
one from the rank that first sent it to the rank that adds it, in the step of its first put (a
route, so the schedule's routing becomes ``shortest-path``: the relays' own contributions are
not in it).
Supported ops: ``nop``, ``put``, ``pws``, ``pwsf``, ``signal``, ``wait``, ``rlxsignal``,
``rlxwait``, ``flush``, ``copy``, ``re``, ``sem_acquire``, ``sem_release``, ``barrier``, ``glres``;
channel types memory, port and switch (a ``glres`` is every member's piece sent up to the
reducing, multicasting switch joining the channel's ranks and the sum copied down to each,
:mod:`collsynth.tens.export_switch`). Errors are :class:`~collsynth.InputError` naming the field.
"""

from __future__ import annotations

import json
from fractions import Fraction

from .. import InputError
from ..instances.instance import Instance
from .schedule import Schedule, from_sends

NAMES = {"allgather": "allgather", "reducescatter": "reduce_scatter", "allreduce": "allreduce", "alltoall": "alltoall"}
OPS = {"nop", "put", "pws", "pwsf", "signal", "wait", "rlxsignal", "rlxwait", "flush", "copy", "re",
       "sem_acquire", "sem_release", "barrier", "glres"}


def json_object(text: str, expected: str) -> dict:
    """The JSON object ``text`` holds; an InputError (field ``json``) saying it is not well
    formed, or that ``expected`` was expected, otherwise."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError("json", f"not well formed: {e}") from None
    if not isinstance(data, dict):
        raise InputError("json", f"expected {expected}")
    return data


def _get(obj, key: str, where: str, typ):
    if not isinstance(obj, dict) or key not in obj:
        raise InputError(where, f"missing field {key!r}")
    val = obj[key]
    ok = isinstance(val, typ) and not (typ is int and isinstance(val, bool))
    if not ok:
        raise InputError(f"{where}.{key}", f"expected {'an integer' if typ is int else typ.__name__}, got {val!r}")
    return val


def _rank(val, n: int, where: str, me: int | None = None) -> int:
    if not isinstance(val, int) or isinstance(val, bool) or not 0 <= val < n or val == me:
        raise InputError(where, f"rank {val!r} is outside the instance's ranks 0..{n - 1}" + (f" (or is {me} itself)" if me is not None else ""))
    return val


class _Run:
    """One execution of a plan on the instance's ranks."""

    def __init__(self, plan: dict, instance: Instance):
        coll = instance.collective
        self.instance = instance
        self.kind, self.n, self.c = coll.kind, len(coll.nodes), coll.chunks_per_node
        name = _get(plan, "collective", "plan", str)
        if NAMES.get(name) != self.kind:
            raise InputError("collective", f"the plan is a {name!r}, the instance a {self.kind}")
        self.inplace = _get(plan, "inplace", "plan", bool)
        self.gpus = _get(plan, "gpus", "plan", list)
        if len(self.gpus) != self.n:
            raise InputError("gpus", f"{len(self.gpus)} GPUs, the instance's collective has {self.n} ranks")
        self.sizes = []
        for g, gpu in enumerate(self.gpus):
            if _get(gpu, "id", f"gpus[{g}]", int) != g:
                raise InputError(f"gpus[{g}].id", f"expected {g}, got {gpu['id']!r}")
            self.sizes.append({b: _get(gpu, f"{w}_chunks", f"gpus[{g}]", int) for b, w in (("i", "input"), ("o", "output"), ("s", "scratch"))})
            for key in ("threadblocks", "channels", "remote_buffers"):
                _get(gpu, key, f"gpus[{g}]", list)
        whole = self.sizes[0]["o" if self.kind == "allgather" else "i"]
        if whole <= 0 or whole % (self.n * self.c):
            raise InputError("gpus[0]", f"buffer of {whole} chunks is not a multiple of {self.n * self.c} (ranks x chunks)")
        self.D = whole // (self.n * self.c)
        self._channels()
        self._memory()
        self.sends: list[tuple] = []

    def _channels(self) -> None:
        self.chan: dict[tuple[int, str], list[int]] = {}
        self.groups: dict[int, list[list[int]]] = {}
        for g, gpu in enumerate(self.gpus):
            for k, ch in enumerate(gpu["channels"]):
                typ = _get(ch, "channel_type", f"gpus[{g}].channels[{k}]", str)
                if typ == "switch":
                    self.groups.setdefault(g, []).extend(self._rank_groups(ch, f"gpus[{g}].channels[{k}]"))
                    continue
                peers = _get(ch, "connected_to", f"gpus[{g}].channels[{k}]", list)
                self.chan.setdefault((g, typ), []).extend(
                    _rank(p, self.n, f"gpus[{g}].channels[{k}].connected_to", g) for p in peers)
        self.signals: dict[tuple, int] = {}
        self.waits: dict[tuple, int] = {}

    def switch_of(self, ranks: list[int], where: str) -> int:
        """The reducing, multicasting switch whose group is ``ranks`` (:func:`group_ranks`)."""
        from .export_switch import group_ranks

        found = [w for w, members in group_ranks(self.instance).items() if sorted(members) == sorted(ranks)]
        if not found:
            raise InputError(where, f"no switch that reduces and multicasts joins ranks {sorted(ranks)}")
        return found[0]

    def _rank_groups(self, ch: dict, where: str) -> list[list[int]]:
        """The rank groups of a switch channel (each a list of ranks)."""
        out = []
        for j, group in enumerate(_get(ch, "rank_groups", where, list)):
            ranks = _get(group, "ranks", f"{where}.rank_groups[{j}]", list)
            out.append([_rank(r, self.n, f"{where}.rank_groups[{j}].ranks") for r in ranks])
        return out

    def _glres(self, g: int, t: int, op: dict, where: str) -> None:
        """A group load-reduce-store: every member's piece goes up to the group's switch, which
        multicasts the sum to every member (sends ``reduce`` up, ``copy`` down)."""
        ids = [i for ch in self.gpus[g]["threadblocks"][t].get("channels", []) if ch.get("channel_type") == "switch"
               for i in ch.get("channel_ids", [])]
        src, dst = _get(op, "src_buff", where, list), _get(op, "dst_buff", where, list)
        if len(src) != 1 or len(dst) != 1 or src[0].get("index") != dst[0].get("index"):
            raise InputError(where, "glres reads and stores one region of the group's buffers")
        local = _get(src[0], "switch_channel_id", f"{where}.src_buff[0]", int)
        if not 0 <= local < len(ids) or not 0 <= ids[local] < len(self.groups.get(g, [])):
            raise InputError(f"{where}.src_buff[0].switch_channel_id", f"{local!r} names no switch channel of the thread block")
        ranks = self.groups[g][ids[local]]
        w = self.switch_of(ranks, where)
        index, size = _get(src[0], "index", f"{where}.src_buff[0]", int), _get(src[0], "size", f"{where}.src_buff[0]", int)
        for y in range(size):
            cells = [self._cell(r, "i", index + y, f"{where}.src_buff[0]") for r in ranks]
            held = {c[0] for c in cells}
            if None in held or len(held) != 1 or any(c[2] is not None for c in cells):
                raise InputError(f"{where}.src_buff[0]", f"glres combines {sorted(map(str, held))}, not one chunk")
            step = max(c[1] for c in cells) + 1
            self.sends += [(cells[0][0], r, -1 - w, step, "reduce") for r in ranks]
            self.sends += [(cells[0][0], -1 - w, r, step + 1, "copy") for r in ranks]
            for c in cells:
                c[1] = step + 1

    def _memory(self) -> None:
        """``cells[(g, storage)][idx] = [chunk or None, ready step, pending send or None]``."""
        self.cells = {}
        share = self.c * self.D
        for g, sz in enumerate(self.sizes):
            for b in "ios":
                if self._storage(g, b, 0)[0] == b:
                    self.cells[(g, b)] = [[None, 0, None] for _ in range(sz[b])]
            for x in range(sz["i"]):
                held = (g * self.n + x // share) * share + x % share if self.kind == "alltoall" else \
                    (g * share + x if self.kind == "allgather" else x)
                self._cell(g, "i", x, f"gpus[{g}]")[0] = held
        self.sems = [[0] * len(gpu.get("semaphores", [])) for gpu in self.gpus]

    def _storage(self, g: int, buf: str, idx: int) -> tuple[str, int]:
        if self.inplace and self.kind == "allgather" and buf == "i":
            return "o", g * self.sizes[g]["i"] + idx
        if self.inplace and self.kind == "reduce_scatter" and buf == "o":
            return "i", g * self.sizes[g]["o"] + idx
        if self.inplace and self.kind == "allreduce" and buf == "o":
            return "i", idx
        return buf, idx

    def _cell(self, g: int, buf, idx, where: str) -> list:
        if buf not in ("i", "o", "s"):
            raise InputError(f"{where}.type", f"expected a buffer i, o or s, got {buf!r}")
        if not isinstance(idx, int) or isinstance(idx, bool) or not 0 <= idx < self.sizes[g][buf]:
            raise InputError(f"{where}.index", f"{idx!r} is outside buffer {buf} ({self.sizes[g][buf]} chunks) of rank {g}")
        b, x = self._storage(g, buf, idx)
        return self.cells[(g, b)][x]

    # -- running ----------------------------------------------------------------------------------

    def run(self) -> None:
        """Execute every thread block's ops in program order, round-robin, until all are done;
        one that waits for what no thread block gives is a deadlock (an InputError naming it)."""
        blocks = [(g, t) for g, gpu in enumerate(self.gpus) for t in range(len(gpu["threadblocks"]))]
        pc = {b: 0 for b in blocks}
        self.barriers: dict[tuple, set] = {}
        while True:
            moved, live = False, []
            for g, t in blocks:
                ops = _get(self.gpus[g]["threadblocks"][t], "ops", f"gpus[{g}].threadblocks[{t}]", list)
                while pc[(g, t)] < len(ops) and self._op(g, t, ops[pc[(g, t)]], f"gpus[{g}].threadblocks[{t}].ops[{pc[(g, t)]}]"):
                    pc[(g, t)] += 1
                    moved = True
                if pc[(g, t)] < len(ops):
                    live.append((g, t))
            if not live:
                return
            if not moved:
                g, t = live[0]
                raise InputError(f"gpus[{g}].threadblocks[{t}].ops[{pc[(g, t)]}]", "the plan deadlocks here: it waits for what no thread block gives")

    def _tb_channel(self, g: int, t: int, op: dict, where: str) -> tuple[int, str, int]:
        typ = _get(op, "channel_type", where, str)
        local = _get(op, "channel_ids", where, list)[0] if op.get("channel_ids") else 0
        ids = [i for ch in self.gpus[g]["threadblocks"][t].get("channels", []) if ch.get("channel_type") == typ
               for i in ch.get("channel_ids", [])]
        if not isinstance(local, int) or not 0 <= local < len(ids) or not 0 <= ids[local] < len(self.chan.get((g, typ), [])):
            raise InputError(f"{where}.channel_ids", f"{local!r} names no {typ} channel of the thread block")
        return g, typ, ids[local]

    def _paired(self, key: tuple) -> tuple:
        g, typ, q = key
        peers = self.chan[(g, typ)]
        p, nth = peers[q], peers[:q].count(peers[q])
        back = [k for k, x in enumerate(self.chan.get((p, typ), [])) if x == g]
        if nth >= len(back):
            raise InputError(f"gpus[{g}].channels", f"its {typ} channel {q} to rank {p} has no matching channel on rank {p}")
        return p, typ, back[nth]

    def _op(self, g: int, t: int, op: dict, where: str) -> bool:
        name = _get(op, "name", where, str)
        if name not in OPS:
            raise InputError(f"{where}.name", f"op {name!r} is not read (supported: {', '.join(sorted(OPS))})")
        if name in ("wait", "rlxwait"):
            key = self._tb_channel(g, t, op, where)
            if self.signals.get(self._paired(key), 0) <= self.waits.get(key, 0):
                return False
            self.waits[key] = self.waits.get(key, 0) + 1
        elif name in ("signal", "rlxsignal"):
            key = self._tb_channel(g, t, op, where)
            self.signals[key] = self.signals.get(key, 0) + 1
        elif name in ("sem_acquire", "sem_release"):
            ids = _get(op, "semaphore_ids", where, list)
            if any(not isinstance(s, int) or not 0 <= s < len(self.sems[g]) for s in ids):
                raise InputError(f"{where}.semaphore_ids", f"{ids!r} names a semaphore rank {g} does not have")
            if name == "sem_acquire" and any(self.sems[g][s] <= 0 for s in ids):
                return False
            for s in ids:
                self.sems[g][s] += -1 if name == "sem_acquire" else 1
        elif name == "barrier":  # the blocks that arrived first pass when they look again
            key = (g, _get(op, "barrier_id", where, int))
            arrived, released = self.barriers.setdefault(key, (set(), set()))
            if t in released:
                released.discard(t)
                return True
            arrived.add(t)
            if len(arrived) < _get(op, "num_threadblocks", where, int):
                return False
            released |= arrived - {t}
            arrived.clear()
        elif name in ("put", "pws", "pwsf"):
            self._put(g, t, op, where)
            if name != "put":
                key = self._tb_channel(g, t, op, where)
                self.signals[key] = self.signals.get(key, 0) + 1
        elif name in ("copy", "re"):
            self._local(g, op, name, where)
        elif name == "glres":
            self._glres(g, t, op, where)
        return True

    def _remote(self, g: int, t: int, typ: str, local, where: str) -> tuple[int, str]:
        ids = [i for ref in self.gpus[g]["threadblocks"][t].get("remote_buffer_refs", [])
               if ref.get("access_channel_type") == typ for i in ref.get("remote_buffer_ids", [])]
        if not isinstance(local, int) or not 0 <= local < len(ids) or not 0 <= ids[local] < len(self.gpus[g]["remote_buffers"]):
            raise InputError(f"{where}.buffer_id", f"{local!r} names no {typ} remote buffer of the thread block")
        rb = self.gpus[g]["remote_buffers"][ids[local]]
        rw = f"gpus[{g}].remote_buffers[{ids[local]}]"
        return _rank(_get(rb, "rank", rw, int), self.n, f"{rw}.rank", g), _get(rb, "type", rw, str)

    def _put(self, g: int, t: int, op: dict, where: str) -> None:
        typ = _get(op, "channel_type", where, str)
        src, dst = _get(op, "src_buff", where, list), _get(op, "dst_buff", where, list)
        if len(src) != len(dst):
            raise InputError(f"{where}.dst_buff", f"{len(dst)} destinations for {len(src)} sources")
        combining = self.kind in ("reduce_scatter", "allreduce")
        for k, (a, b) in enumerate(zip(src, dst)):
            size = _get(a, "size", f"{where}.src_buff[{k}]", int)
            peer, rbuf = self._remote(g, t, typ, _get(b, "buffer_id", f"{where}.dst_buff[{k}]", int), where)
            for y in range(size):
                s = self._cell(g, _get(a, "type", f"{where}.src_buff[{k}]", str), _get(a, "index", f"{where}.src_buff[{k}]", int) + y, f"{where}.src_buff[{k}]")
                d = self._cell(peer, rbuf, _get(b, "index", f"{where}.dst_buff[{k}]", int) + y, f"{where}.dst_buff[{k}]")
                if s[0] is None:
                    raise InputError(f"{where}.src_buff[{k}]", f"rank {g} puts a chunk nothing wrote")
                send = (s[0], g, peer, s[1] + 1)
                if s[2] is not None:  # a relay passes a partial sum on untouched: one routed send
                    send = (*s[2][:2], peer, s[2][3])
                    if rbuf != "s":
                        raise InputError(where, "a relay passes a partial sum on untouched into a final buffer, "
                                         "which a schedule cannot say")
                d[:] = [s[0], s[1] + 1, None]
                if combining and rbuf == "s":
                    d[2] = send
                else:
                    self.sends.append((*send, "copy" if combining else None))

    def _local(self, g: int, op: dict, name: str, where: str) -> None:
        src, dst = _get(op, "src_buff", where, list), _get(op, "dst_buff", where, list)
        if len(dst) != 1 or not src:
            raise InputError(f"{where}.dst_buff", f"{name} with {len(src)} sources and {len(dst)} destinations")
        size = _get(dst[0], "size", f"{where}.dst_buff[0]", int)
        for y in range(size):
            cells = [self._cell(g, _get(a, "type", f"{where}.src_buff", str), _get(a, "index", f"{where}.src_buff", int) + y,
                                f"{where}.src_buff") for a in src]
            held = {c[0] for c in cells}
            if None in held or len(held) != 1:
                raise InputError(f"{where}.src_buff", f"{name} on rank {g} combines {sorted(map(str, held))}, not one chunk")
            for c in cells:
                if c[2] is not None:
                    self.sends.append((*c[2], "reduce" if name == "re" else "copy"))
            d = self._cell(g, dst[0].get("type"), _get(dst[0], "index", f"{where}.dst_buff[0]", int) + y, f"{where}.dst_buff[0]")
            d[:] = [cells[0][0], max(c[1] for c in cells), None]
            for c in cells[1:] if name == "re" else cells:
                if c is not d:
                    c[2] = None

    def schedule(self, instance: Instance) -> Schedule:
        """The sends the plan made, as a schedule of ``instance``'s collective (chunk ids of
        the collective, pieces of ``1 / D`` a chunk, switches by node id)."""
        coll = instance.collective
        nodes, S, c, D = coll.nodes, coll.size, self.c, self.D
        rows = []
        for x, u, v, step, op in self.sends:
            r, y = divmod(x, D)
            if self.kind == "alltoall":
                pair, j = divmod(r, c)
                chunk = (nodes[pair // self.n] * S + nodes[pair % self.n]) * c + j
            else:
                chunk = nodes[r // c] * c + r % c
            ends = [-1 - x if x < 0 else nodes[x] for x in (u, v)]  # a switch is written -1 - its node id
            rows.append((chunk, Fraction(y, D), Fraction(y + 1, D), *ends, step) + ((op,) if op else ()))
        return from_sends(rows, coll.kind, S, coll.num_chunks, meta={"peer": "mscclpp-json"})


def read_mscclpp_plan(text: str, instance: Instance) -> Schedule:
    """The schedule an MSCCL++ execution plan runs on ``instance`` (see the module doc)."""
    plan = json_object(text, "a plan object with gpus")
    run = _Run(plan, instance)
    run.run()
    return run.schedule(instance)
