"""Receive-and-forward steps for the MSCCL export: a receive whose piece its GPU sends on next
becomes one ``rrs``/``rrcs`` (reducing) or ``rcs`` (copying) step.

An MSCCL step that receives and sends (Azure/msccl-executor-nccl ``src/device/msccl_kernel.cu``:
``recvReduceSend``, ``recvReduceCopySend``, ``recvCopySend``) runs in a thread block that has
both a receive and a send peer on one channel, and forwards slice by slice: NCCL's
``genericOp`` (``prims_simple.h``) sends each slice on as soon as it has arrived and been
reduced, where a receive and a separate send that waits for it (``depid``) start the send only
when the whole receive has finished (Cowan et al., "MSCCLang: Microsoft Collective
Communication Language", ASPLOS 2023, Sections 4-5: ``rrs`` is how its reduction trees
relay). A connection (peer, channel, direction) belongs to one thread block, so fusing a
receive from ``u`` with a send to ``w`` on channel ``c`` merges the GPU's whole receive thread
block from ``u`` on ``c`` with its whole send thread block to ``w`` on ``c``.

:func:`fused` merges such a pair when, walking both thread blocks in order (each connection
keeps its order), the next receive and the next send move exactly one piece, the send a later
step, waiting for that receive and for nothing later: they become one step (otherwise the
earlier op by step goes first); and only when the merged thread block is no longer than the
longer of the two, so that merging never puts in sequence what ran side by side (a pure relay:
every receive forwarded as it arrives). ``rrs`` when the sum is needed nowhere else on the GPU (no other later send
of the piece reads it, and the collective does not leave it there: a reduce-scatter's chunk of
another rank, or a piece a later copy overwrites), else ``rrcs``, which also stores it. Fused
programs are read back and verified like any export (:mod:`collsynth.tens.readback`).
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

from .export_deps import circular

__all__ = ["fused", "sum_needed"]


def fused(tbs: dict, deps: dict, s, order, reduce, needs_sum) -> tuple[dict, dict]:
    """``(thread blocks, dependencies)`` with receive-and-forward steps (see the module doc).

    ``tbs``: GPU -> ``[((direction, peer, channel), ops)]`` with ops ``("S", i)``/``("R", i)``
    (send ``i`` of schedule ``s`` at its source / destination) and ``("C", ...)``; ``deps``: op
    -> the ops it waits for; ``order``: program order of the sends; ``reduce[i]``: whether
    send ``i``'s receiver reduces; ``needs_sum(i, j)``: whether the receiver of send ``i``,
    forwarding it as send ``j``, must keep what it received (:func:`sum_needed`). A fused op is
    ``("F", i, j, type)`` (receive ``i``, then send ``j``) in a thread block keyed
    ``("both", (u, w), channel)``. Returns the inputs unchanged when fusing would make the
    dependencies circular."""
    rank = {int(i): k for k, i in enumerate(order.tolist())}
    sends = _Sends(s.chunk.tolist(), s.lo.tolist(), s.hi.tolist(), s.step.tolist())  # read per op, as Python numbers
    out, pairs = {}, {}
    for g, lst in tbs.items():
        out[g], found = _merge_gpu(lst, deps, sends, rank, reduce)
        pairs.update(found)
    if not pairs:
        return tbs, deps
    new_deps = _renamed(deps, pairs, s, reduce, needs_sum)
    out = {g: [(key, [_op_of(op, pairs, s, reduce, needs_sum) for op in ops]) for key, ops in lst]
           for g, lst in out.items()}
    if circular(out, new_deps):
        return tbs, deps
    return out, new_deps


def sum_needed(s, kind: str, c: int, root: int, src_r, dst_r, rchunk, reduce):
    """``needs(i, j)``: whether the GPU receiving send ``i`` of ``s`` and forwarding it as send
    ``j`` keeps the result: another later send of an overlapping piece reads it before a copy
    receive of the whole piece overwrites it, or the collective (``kind``; ``c`` chunks a rank,
    ``root`` rank) leaves it there (allreduce; a reduce-scatter's own chunk; a reduce's root)
    and no such copy overwrites it. ``src_r``/``dst_r``: ranks of each send's ends, ``rchunk`` its rank-space chunk,
    ``reduce[i]`` whether its receiver reduces."""
    by = defaultdict(list)
    for x, (g_s, g_d, r) in enumerate(zip(src_r.tolist(), dst_r.tolist(), rchunk.tolist())):
        by[(g_s, r)].append(("S", x))
        by[(g_d, r)].append(("R", x))

    def needs(i: int, j: int) -> bool:
        g, r, lo, hi, t = int(dst_r[i]), int(rchunk[i]), s.lo[i], s.hi[i], s.step[i]
        later = [(k, x) for k, x in by[(g, r)] if s.step[x] > t and x != j and s.lo[x] < hi and lo < s.hi[x]]
        copies = [s.step[x] for k, x in later if k == "R" and not reduce[x] and s.lo[x] <= lo and hi <= s.hi[x]]
        overwritten = min(copies, default=None)
        if any(k == "S" and (overwritten is None or s.step[x] <= overwritten) for k, x in later):
            return True
        kept = {"allreduce": True, "reduce_scatter": r // c == g, "reduce": g == root}.get(kind, True)
        return kept and overwritten is None
    return needs


class _Sends(NamedTuple):
    """The columns of a schedule's sends that the fusion compares, as lists."""

    chunk: list
    lo: list
    hi: list
    step: list


def _merge_gpu(lst: list, deps: dict, s, rank: dict, reduce) -> tuple[list, dict]:
    """One GPU's thread blocks with receive and send thread blocks of one channel merged where
    they fuse and the merged block is no longer than the longer of the two (greedily, the pair
    fusing the most first), and ``{("R", i): ("S", j)}`` fused."""
    recv = {(peer, ch): k for k, ((d, peer, ch), _) in enumerate(lst) if d == "recv"}
    send = {(peer, ch): k for k, ((d, peer, ch), _) in enumerate(lst) if d == "send"}
    options = []
    for (u, ch), kr in recv.items():
        for (w, ch2), ks in send.items():
            if ch2 == ch:
                merged, found = _interleaved(lst[kr][1], lst[ks][1], deps, s, rank, reduce)
                if found and len(merged) <= max(len(lst[kr][1]), len(lst[ks][1])):
                    options.append((len(found), kr, ks, u, w, ch, merged, found))
    options.sort(key=lambda o: (-o[0], o[1], o[2]))
    used, replace, gone, pairs = set(), {}, set(), {}
    for _, kr, ks, u, w, ch, merged, found in options:
        if kr in used or ks in used:
            continue
        used.update((kr, ks))
        replace[ks] = (("both", (u, w), ch), merged)
        gone.add(kr)
        pairs.update(found)
    return [replace.get(k, item) for k, item in enumerate(lst) if k not in gone], pairs


def _interleaved(recvs: list, sends: list, deps: dict, s, rank: dict, reduce) -> tuple[list, dict]:
    """``recvs`` and ``sends`` merged, each list's own order kept (its connection's order), and
    the receive/send pairs that fuse, ``{("R", i): ("S", j)}``: when the next receive and the
    next send fuse they become one ``("F", i, j)``, else the earlier by step goes first (a
    step's sends before its receives)."""
    step = s.step
    merged, found, a, b = [], {}, 0, 0
    while a < len(recvs) or b < len(sends):
        if a < len(recvs) and b < len(sends) and _fuses(recvs[a][1], sends[b][1], deps, s, rank, reduce):
            found[recvs[a]] = sends[b]
            merged.append(("F", recvs[a][1], sends[b][1]))
            a, b = a + 1, b + 1
        elif b < len(sends) and (a == len(recvs) or step[sends[b][1]] <= step[recvs[a][1]]):
            merged.append(sends[b])
            b += 1
        else:
            merged.append(recvs[a])
            a += 1
    return merged, found


def _fuses(i: int, j: int, deps: dict, s, rank: dict, reduce) -> bool:
    """Whether receive ``i`` and the next send ``j`` of its GPU become one step: ``j`` moves
    exactly ``i``'s piece a later step, waits for ``i``, and for nothing after ``i``."""
    same = (s.chunk[i] == s.chunk[j] and s.lo[i] == s.lo[j] and s.hi[i] == s.hi[j] and s.step[j] > s.step[i])
    if not same or ("R", i) not in deps.get(("S", j), ()):
        return False
    for kind, x in deps[("S", j)]:
        if (kind, x) == ("R", i):
            continue
        if kind == "R" and rank[x] >= rank[i] or kind == "S" and s.step[x] > s.step[i]:
            return False
    return True


def _renamed(deps: dict, pairs: dict, s, reduce, needs_sum) -> dict:
    """``deps`` with every fused receive and send replaced by their fused op, which waits for
    what either waited for (but the receive itself)."""
    name = {}
    for r, snd in pairs.items():
        f = _op_of(("F", r[1], snd[1]), pairs, s, reduce, needs_sum)
        name[r] = name[snd] = f
    out: dict = {}
    for op, ds in deps.items():
        me = name.get(op, op)
        lst = out.setdefault(me, [])
        for d in ds:
            d2 = name.get(d, d)
            if d2 != me and d2 not in lst:
                lst.append(d2)
    return {op: ds for op, ds in out.items() if ds}


def _op_of(op: tuple, pairs: dict, s, reduce, needs_sum) -> tuple:
    """A merged thread block's op as exported: ``("F", i, j, type)`` for a fused pair."""
    if op[0] != "F":
        return op
    i, j = op[1], op[2]
    if not reduce[i]:
        return ("F", i, j, "rcs")
    return ("F", i, j, "rrcs" if needs_sum(i, j) else "rrs")
