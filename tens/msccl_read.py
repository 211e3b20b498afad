"""Reading MSCCL XML back into a schedule (the format: :mod:`.msccl_format`).

:func:`interpret_msccl_xml` reads such XML back into a :class:`~.schedule.Schedule`: it pairs
sends and receives per (src, dst, channel) in order and numbers steps by the dependencies
(a send comes one step after the receives it depends on, or after a receive earlier in its
own thread block that wrote what it reads; program order is kept), so a test can verify that
the exported XML implements the collective.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import defaultdict
from fractions import Fraction

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from .. import InputError
from ..instances.instance import Instance
from .msccl_format import (ALGO_ATTRS, COLL_NAMES, DEFAULT_DIALECT, DIALECTS, KNOWN_TYPES, RECV_TYPES, REDUCE_TYPES,
                           SEND_TYPES, STEP_ATTRS, BufferLayout)
from .schedule import Schedule, from_sends



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
    boundaries (a relay's scratch slot takes the chunk its first writer carried). Steps: every
    transfer is numbered by the longest dependency chain: one more than a receive its send
    depends on (``depid``/``deps``, including ``nop`` steps, or an earlier receive in the same
    thread block writing what it reads), at least the step of any other dependency and of the
    previous step in its thread block. Local ``cpy`` steps move nothing between ranks and are
    not part of the schedule. ``denom`` defaults to ``nchunksperloop`` over the chunks of the
    collective's loop buffer (for either dialect, told apart by ``coll``). Errors are
    :class:`~collsynth.InputError`.
    """
    lay = BufferLayout(instance)
    root = _parse_root(xml, lay)
    D = _denominator(root, lay) if denom is None else int(denom)
    ops, tb_info, tb_ops = _collect_steps(root)
    transfers, send_of, recv_of = _pair_transfers(ops, tb_info, tb_ops)
    edges = _transfer_edges(ops, tb_ops, send_of, recv_of)
    step = _longest_paths(len(transfers), edges)
    scratch = _scratch_chunks(lay, ops, transfers, D)
    rows = []
    for x, (skey, rkey) in enumerate(transfers):
        g_src, g_dst = skey[0], rkey[0]
        rec = ops[rkey]
        op = "reduce" if rec["type"] in REDUCE_TYPES else "copy"
        for r, lo, hi in _pieces(lay, rec["dstbuf"], rec["dstoff"], rec["cnt"], g_dst, D, scratch):
            rows.append((lay.from_rank_chunk(r), Fraction(lo, D), Fraction(hi, D),
                         int(lay.ranks[g_src]), int(lay.ranks[g_dst]), step[x], op))
    return from_sends(rows, lay.kind, lay.S, lay.coll.num_chunks)


def algo_root(text: str, where: str = "algo") -> ET.Element:
    """The ``<algo>`` root element of an MSCCL XML program, with every attribute of
    :data:`ALGO_ATTRS`; an InputError (field ``xml``, or ``where`` for a missing attribute)
    when the text is not well formed or the root is not such an element."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        raise InputError("xml", f"not well formed: {e}") from None
    if root.tag != "algo":
        raise InputError("xml", f"expected an <algo> root element, got <{root.tag}>")
    for a in ALGO_ATTRS:
        if root.get(a) is None:
            raise InputError(where, f"missing attribute {a!r}")
    return root


def _parse_root(xml: str, lay: BufferLayout) -> ET.Element:
    """The ``<algo>`` element, checked for its attributes, GPU count and collective name."""
    root = algo_root(xml, "xml: algo")
    ngpus = _int(root, "ngpus", "xml: algo")
    if ngpus != lay.n:
        raise InputError("xml: algo.ngpus", f"the collective has {lay.n} ranks, the XML {ngpus}")
    names = {COLL_NAMES[d][lay.kind] for d in DIALECTS}
    if root.get("coll") not in names:
        raise InputError("xml: algo.coll", f"expected {' or '.join(sorted(names))} for {lay.kind}, got {root.get('coll')!r}")
    return root


def _denominator(root: ET.Element, lay: BufferLayout) -> int:
    """MSCCL chunks per schedule chunk: ``nchunksperloop`` over the loop buffer's chunks."""
    per_loop = _int(root, "nchunksperloop", "xml: algo")
    dialect = "msccl-tools" if root.get("coll") == "custom" else DEFAULT_DIALECT
    unit = lay.loop_chunks(dialect)
    if per_loop <= 0 or per_loop % unit:
        raise InputError("xml: algo.nchunksperloop", f"expected a positive multiple of {unit}, got {per_loop}")
    return per_loop // unit


def _collect_steps(root: ET.Element) -> tuple[dict, dict, dict]:
    """``ops[(gpu, tb, s)]`` (step attributes), ``tb_info[(gpu, tb)]`` (peers, channel) and
    ``tb_ops[(gpu, tb)]`` (its step keys in order); checks ids and attributes."""
    ops: dict[tuple[int, int, int], dict] = {}
    tb_info: dict[tuple[int, int], dict] = {}
    tb_ops: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    for gpu in root.findall("gpu"):
        g = _int(gpu, "id", "xml: gpu")
        ids = []
        for tb in gpu.findall("tb"):
            where = f"xml: gpu {g} tb"
            t = _int(tb, "id", where)
            ids.append(t)
            tb_info[(g, t)] = {a: _int(tb, a, where) for a in ("send", "recv", "chan")}
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
    return ops, tb_info, tb_ops


def _pair_transfers(ops: dict, tb_info: dict, tb_ops: dict) -> tuple[list, dict, dict]:
    """Transfers ``(send key, receive key)`` paired per (src, dst, channel) in order, and the
    transfer index of every send and receive step."""
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
    transfers: list[tuple] = []
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
    return transfers, send_of, recv_of


def _transfer_edges(ops: dict, tb_ops: dict, send_of: dict, recv_of: dict) -> list[tuple[int, int, int]]:
    """Constraints ``(before, after, gap)`` between transfers from dependencies, program order
    and reads of what an earlier receive in the same thread block wrote."""
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
            if mine:
                _edges_of_step(key, rec, mine, pending, prev, written, send_of, recv_of, edges)
                prev = mine[-1]
            pending = []
    return edges


def _edges_of_step(key, rec, mine, pending, prev, written, send_of, recv_of, edges) -> None:
    """The constraints one transfer step adds (see :func:`_transfer_edges`)."""
    if len(mine) == 2:  # receive-and-forward: the forward is one step later
        edges.append((mine[0], mine[1], 1))
    for dkey in pending:
        for dep, dep_is_recv in ((send_of.get(dkey), False), (recv_of.get(dkey), True)):
            for me in mine:
                if dep is None or dep == me:
                    continue
                gap = 1 if (me == send_of.get(key) and dep_is_recv) else 0
                edges.append((dep, me, gap))
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


def _scratch_chunks(lay: BufferLayout, ops: dict, transfers: list, D: int) -> dict[tuple[int, int], int]:
    """``{(gpu, slot): chunk}`` for scratch slots: a receive into ``s`` holds the chunk its
    send read (resolved along relay chains; the first writer of a slot names it)."""
    scratch: dict[tuple[int, int], int] = {}
    todo = [(skey, rkey) for skey, rkey in transfers if ops[rkey]["dstbuf"] == "s"]
    while todo:
        left = []
        for skey, rkey in todo:
            snd = ops[skey]
            r = lay.chunk_at(snd["srcbuf"], snd["srcoff"] // D, skey[0], scratch)
            if r < 0:
                left.append((skey, rkey))
                continue
            scratch.setdefault((rkey[0], ops[rkey]["dstoff"] // D), r)
        if len(left) == len(todo):
            skey, rkey = left[0]
            raise InputError("xml", f"gpu {skey[0]} sends from {ops[skey]['srcbuf']}[{ops[skey]['srcoff']}], "
                             "which holds no chunk of the collective")
        todo = left
    return scratch


def _pieces(lay: BufferLayout, buf: str, off: int, cnt: int, gpu: int, D: int, scratch: dict):
    """``(rank-space chunk, lo, hi)`` on the 1/D grid covered by ``cnt`` MSCCL chunks at
    ``buf[off]`` of ``gpu``, split at chunk boundaries."""
    while cnt > 0:
        base, lo = divmod(off, D)
        take = min(cnt, D - lo)
        r = lay.chunk_at(buf, base, gpu, scratch)
        if not 0 <= r < lay.rank_chunks:
            raise InputError("xml", f"offset {off} of buffer {buf!r} on gpu {gpu} is outside the collective")
        yield r, lo, lo + take
        off += take
        cnt -= take


def _longest_paths(n: int, edges: list[tuple[int, int, int]]) -> list[int]:
    """Smallest steps from 1 with ``step[b] >= step[a] + gap`` for every edge ``(a, b, gap)``.

    Zero-gap cycles are allowed (two GPUs exchanging a piece in one step: each receive waits
    for the local send, which the executor's buffered sends satisfy): strongly connected
    components share one step; a cycle with a positive gap is an error.
    """
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
