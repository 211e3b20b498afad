"""Exports: MSCCL XML (what GPU runtimes execute) and back; the schedule JSON lives in .schedule.

The format and what the runtimes accept: :mod:`.msccl_format`; reading a program back:
:func:`~.msccl_read.interpret_msccl_xml`.

The mapping used here:

- GPUs are the collective's ranks: ``gpu id`` = position of the node in ``collective.nodes``
  (:func:`rank_map`; with failed nodes the ids are renumbered and the map must travel with
  the XML). Only single-collective schedules whose sends join two ranks over a direct link,
  or through switch nodes, export: a route GPU -> switch(es) -> GPU becomes one send between
  the two ranks (:func:`collsynth.tens.switch_routes.switch_routes`), on channels of its own
  for every distinct switch path between them.
- Buffers (chunk ``r`` in rank space: the schedule-file numbering with node ids replaced by
  ranks, ``c`` chunks per shard, ``n`` ranks). In place: allgather and broadcast keep
  everything in ``o`` at offset ``r``; reduce_scatter, allreduce and reduce in ``i`` at ``r``.
  Out of place: all-to-all, gather and scatter read a chunk from its source's ``i``
  (all-to-all ``i -> k``: offset ``k*c + j`` on ``i``), write it to its destination's ``o``
  (offset ``i*c + j`` on ``k``), relay it through ``s`` elsewhere (one slot per chunk and
  GPU, numbered in chunk order), and copy a rank's own block from ``i`` to ``o`` with ``cpy``
  steps; the buffer a non-root rank of gather (``o``) or scatter (``i``) does not have is
  declared with 0 chunks. Fractional pieces refine every chunk into ``denom`` MSCCL chunks: piece
  ``[lo, hi)`` of the chunk at offset ``x`` is ``cnt = hi - lo`` chunks at ``x*denom + lo``.
- ``nchunksperloop`` = the chunks of ``count * sizeMultiplier``: ``n*c*denom`` for allgather,
  reduce_scatter, allreduce and all-to-all, ``c*denom`` for broadcast and reduce, and for
  gather/scatter ``c*denom`` (msccl-executor) or ``n*c*denom`` (msccl-tools).
- Thread blocks: one per (send peer, channel) holding the GPU's sends to that peer, one per
  (recv peer, channel) holding its receives, and one (no peers, channel 0) for local copies,
  numbered 0.. without gaps per GPU. A pair's sends are spread round-robin over consecutive
  channels: at least one per parallel link (so the sends of one step use different links)
  and as many as keep each thread block within the dialect's step limit. The i-th send of a
  (src, dst, channel) tb pairs with the i-th receive of the matching tb at dst (both in
  program order: by step, then by how many transfers brought the data, then schedule order).
  With ``layout="trees"`` every tree takes channels of its own instead: one thread block per
  tree and edge, as ForestColl's programs (:mod:`collsynth.tens.export_layout`).
- Step types: ``s`` for sends; ``r`` for copy receives and ``rrc`` (receive, add the local
  ``srcbuf/srcoff``, store at ``dstbuf/dstoff``) where the collective combines (``op``
  reduce, or default of a combining kind); ``cpy`` for local copies.
- Dependencies: a send waits for the receives that brought its piece (earlier steps,
  overlapping, same chunk; none for data held from the start; a route through switches waits
  for what its first hop needs). In combining collectives a
  receive also waits for the sends that read the same piece in the same or earlier steps
  (read before overwrite) and for earlier receives of it (no concurrent reductions into one
  buffer). A dependency that program order or another dependency already implies is not
  named (:mod:`collsynth.tens.export_deps`); extra dependencies become ``nop`` steps before
  the step; ``hasdep="1"`` marks every step something depends on. A schedule declaring
  ``link_order = "program"`` also has each send wait for the send before it (by step, then
  schedule order) out of its GPU over the same first link (its peer's, or the switch its route
  enters), which another thread block runs when the link's sends span channels or peers.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import defaultdict

import numpy as np

from .. import InputError
from ..instances.instance import Instance
from .cost import _dependencies, link_successors
from .export_deps import implied_dependencies_removed, op_dependencies, program_order
from .export_fuse import fused, sum_needed
from .export_layout import MAX_TREE_THREAD_BLOCKS, fitted_channels, link_channels, tree_channels, trees_of
from .msccl_format import (COLL_NAMES, DEFAULT_DIALECT, DIALECTS, LAYOUTS, MAX_CHANNELS, MAX_CHUNKS, MAX_COUNT,
                           MAX_DEPENDED_TB, MAX_OFFSET, MAX_STEPS, MAX_TB_PER_CHANNEL, MAX_THREAD_BLOCKS, BufferLayout,
                           rank_comment)
from .msccl_read import interpret_msccl_xml
from .schedule import OP_DEFAULT, OP_REDUCE, Schedule
from .switch_routes import summed_in_switch, switch_routes


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
    dialect: str = DEFAULT_DIALECT,
    fuse: bool = False,
    layout: str = "links",
    max_thread_blocks: int = 0,
) -> str:
    """The MSCCL XML program of ``schedule`` (see the module doc for the mapping; with ``fuse``,
    a receive its GPU forwards next is one receive-and-send step, :mod:`.export_fuse`, unless
    :func:`interpret_msccl_xml` cannot number the fused program's transfers by steps: then
    without). ``layout``: ``links`` packs a link's sends into as few thread blocks as the step
    limit allows (the module doc); ``trees`` gives every tree channels of its own, one thread
    block per tree and edge, as ForestColl's programs (:mod:`.export_layout`); ``fitted`` is
    ``trees`` with a rank pair's trees sharing thread blocks until no GPU runs more than
    ``max_thread_blocks`` (its SMs; 0: as many as ``trees`` takes,
    :func:`~.export_layout.fitted_channels`).

    ``dialect`` picks the collective names: ``msccl-executor`` (Azure/msccl-executor-nccl) or
    ``msccl-tools`` (microsoft/msccl-tools and the microsoft/msccl runtime). Raises
    :class:`~collsynth.InputError` for what MSCCL cannot run: concurrent collectives, sends
    that are not direct links between ranks, a chunk sent back to its source (out-of-place
    kinds), a refined chunk grid over ``max_chunks`` or an executor limit.
    """
    _check_options(dialect, [(layout, fuse)])
    attrs = {"name": name, "proto": proto, "minBytes": str(int(min_bytes)), "maxBytes": str(int(max_bytes))}
    return _written(_prepared(schedule, instance, dialect, max_chunks), layout, fuse, attrs, max_thread_blocks)


def msccl_xml_variants(schedule: Schedule, instance: Instance, variants: list[tuple[str, bool]],
                       dialect: str = DEFAULT_DIALECT, name: str = "collsynth", proto: str = "Simple",
                       max_thread_blocks: int = 0) -> list:
    """:func:`to_msccl_xml` of ``schedule`` for every ``(layout, fuse)`` of ``variants`` (named
    ``name``, in protocol ``proto``, layout ``fitted`` within ``max_thread_blocks``, the other
    options at their defaults), the work they share
    (routes, dependencies, program order) done once: each a program, or the
    :class:`~collsynth.InputError` that refused it; raises one when every variant is refused
    for the same reason (the schedule itself)."""
    _check_options(dialect, variants)
    prep = _prepared(schedule, instance, dialect, MAX_CHUNKS)
    attrs = {"name": name, "proto": proto, "minBytes": "0", "maxBytes": str(1 << 40)}
    out = []
    for layout, fuse in variants:
        try:
            out.append(_written(prep, layout, fuse, attrs, max_thread_blocks))
        except InputError as e:
            out.append(e)
    return out


def _check_options(dialect: str, variants) -> None:
    if dialect not in DIALECTS:
        raise InputError("dialect", f"expected one of {', '.join(DIALECTS)}, got {dialect!r}")
    for layout, _ in variants:
        if layout not in LAYOUTS:
            raise InputError("layout", f"expected one of {', '.join(LAYOUTS)}, got {layout!r}")


def _prepared(schedule: Schedule, instance: Instance, dialect: str, max_chunks: int) -> dict:
    """What every layout of ``schedule``'s export shares: its sends between ranks (routes
    through switches made sends), their ranks and chunks, buffers, program order and the
    dependencies between ops; refuses (:class:`~collsynth.InputError`) what MSCCL cannot run."""
    if (i := summed_in_switch(schedule, instance)) is not None:
        raise InputError("schedule", f"send {i} ({int(schedule.src[i])}->{int(schedule.dst[i])}) sums in a reducing "
                         "switch; MSCCL XML has no in-switch reduction (NVLS, SHARP): export it as schedule JSON")
    lay = BufferLayout(instance)
    routes = switch_routes(schedule, instance)
    s = routes.schedule
    D = s.denom
    per_loop = lay.loop_chunks(dialect) * D
    if max(per_loop, lay.n * lay.c * D) > max_chunks:
        raise InputError("schedule", f"pieces on a 1/{D} grid need {max(per_loop, lay.n * lay.c * D)} MSCCL chunks per "
                         f"buffer (more than {max_chunks}); export whole-chunk schedules or a coarser grid")
    src_r, dst_r, rchunk = _checked_sends(s, lay, instance, routes.path)
    lay.assign_scratch(rchunk, dst_r)
    pairs = _dependencies(s, instance) if routes.pairs is None else tuple(map(np.asarray, routes.pairs))
    order = program_order(s.step, *pairs)  # by step, then depth, then schedule order
    deps = op_dependencies(s, order, *pairs, instance.collective.combining)
    if schedule.link_order == "program":
        _declared_order(s, order, routes.path, deps, instance)
    reduce = _combining_op(s, lay.coll.combining)
    return {"instance": instance, "dialect": dialect, "lay": lay, "s": s, "path": routes.path, "per_loop": per_loop,
            "src_r": src_r, "dst_r": dst_r, "rchunk": rchunk, "order": order, "reduce": reduce,
            "deps": deps,
            "needs": sum_needed(s, lay.kind, lay.c, lay.root, src_r, dst_r, rchunk, reduce)}


def _written(p: dict, layout: str, fuse: bool, attrs: dict, max_thread_blocks: int = 0) -> str:
    """The program text of the prepared export ``p`` (:func:`_prepared`) in ``layout`` (``fitted``:
    within ``max_thread_blocks`` a GPU), with receive-and-send steps if ``fuse`` and our reader
    can number them (else without)."""
    s, lay, instance, dialect, order, reduce = p["s"], p["lay"], p["instance"], p["dialect"], p["order"], p["reduce"]
    src_r, dst_r, rchunk = p["src_r"], p["dst_r"], p["rchunk"]
    merge = (lambda tbs, d: fused(tbs, d, s, order, reduce, p["needs"])) if fuse else None
    nchannels, tbs, pos, deps = _plan(s, lay, instance, order, src_r, dst_r, p["deps"], MAX_STEPS[dialect], p["path"],
                                      merge, layout in ("trees", "fitted"),
                                      max_thread_blocks if layout == "fitted" else 0)
    _check_limits(lay, tbs, deps, pos, s.denom, dialect)
    algo = ET.Element("algo", {
        "name": attrs["name"], "proto": attrs["proto"], "nchannels": str(nchannels),
        "nchunksperloop": str(p["per_loop"]), "ngpus": str(lay.n), "coll": COLL_NAMES[dialect][lay.kind],
        "inplace": "1" if lay.in_place else "0", "outofplace": "0" if lay.in_place else "1",
        "minBytes": attrs["minBytes"], "maxBytes": attrs["maxBytes"], "redop": "sum" if lay.coll.combining else "nop",
    })
    hasdep = {d for ds in deps.values() for d in ds}
    for g in range(lay.n):
        gpu = ET.SubElement(algo, "gpu", {"id": str(g), **{k: str(v) for k, v in lay.buffer_sizes(g, s.denom).items()}})
        for tb_id, ((direction, peer, ch), ops) in enumerate(tbs[g]):
            recv, send = peer if direction == "both" else (peer if direction == "recv" else -1,
                                                            peer if direction == "send" else -1)
            tb = ET.SubElement(gpu, "tb", {"id": str(tb_id), "send": str(send), "recv": str(recv), "chan": str(ch)})
            fields = lambda op: _op_fields(op, s, lay, g, rchunk, src_r, dst_r, reduce)  # noqa: E731
            _add_steps(tb, ops, fields, deps, pos, hasdep)
    ET.indent(algo, space="  ")
    text = rank_comment(instance) + ET.tostring(algo, encoding="unicode") + "\n"
    if fuse:  # our reader numbers transfers by steps; a fused order it cannot number is not written
        try:
            interpret_msccl_xml(text, instance)
        except InputError:
            return _written(p, layout, False, attrs, max_thread_blocks)
    return text


def _add_steps(tb: ET.Element, ops: list, fields, deps: dict, pos: dict, hasdep: set) -> None:
    """The ``step`` elements of threadblock ``tb`` running ``ops`` in order: each op waits for
    its last dependency in its own step and for every earlier one in a ``nop`` step before it;
    ``fields(op)`` is its ``(type, buffers, count)``, ``hasdep`` the ops that others wait for."""
    idx = 0
    for op in ops:
        here = [pos[d] for d in deps.get(op, ())]
        for dep_tb, dep_s in here[:-1]:
            ET.SubElement(tb, "step", _step(idx, "nop", "i", 0, "i", 0, 0, dep_tb, dep_s, 0))
            idx += 1
        dep_tb, dep_s = here[-1] if here else (-1, -1)
        typ, bufs, cnt = fields(op)
        ET.SubElement(tb, "step", _step(idx, typ, *bufs, cnt, dep_tb, dep_s, int(op in hasdep)))
        idx += 1



def _checked_sends(s: Schedule, lay: BufferLayout, instance: Instance,
                   path: list[tuple[int, ...]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(source rank, destination rank, rank-space chunk) of every send; refuses sends MSCCL
    cannot run (off the ranks, off the links but for routes through switches, ``path``,
    chunks no rank owns, pieces too large)."""
    n_send = len(s)
    if not n_send:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    if max(s.src.max(), s.dst.max()) >= lay.S or min(s.src.min(), s.dst.min()) < 0:
        raise InputError("schedule", f"a send names a node outside 0..{lay.S - 1}")
    src_r, dst_r = lay.rank_of[s.src], lay.rank_of[s.dst]
    bad = np.flatnonzero((src_r < 0) | (dst_r < 0))
    if len(bad):
        i = int(bad[0])
        raise InputError("schedule", f"send {i} ({s.src[i]}->{s.dst[i]}) touches a node that is not a rank of the collective")
    pair = instance.topology.link_arrays.lookup(s.src, s.dst)
    off_links = (pair < 0) & ~np.array([bool(p) for p in path], dtype=bool)
    if off_links.any():
        i = int(np.flatnonzero(off_links)[0])
        raise InputError("schedule", f"send {i} ({s.src[i]}->{s.dst[i]}) is not over a direct link; only direct-link schedules export to MSCCL")
    rchunk = lay.to_rank_chunk(s.chunk)
    if (rchunk < 0).any():
        i = int(np.flatnonzero(rchunk < 0)[0])
        raise InputError("schedule", f"send {i} moves chunk {s.chunk[i]}, which no rank owns")
    if int((s.hi - s.lo).max()) >= MAX_COUNT:
        raise InputError("schedule", f"a piece spans {int((s.hi - s.lo).max())} MSCCL chunks; the executor moves fewer than {MAX_COUNT} per step")
    return src_r, dst_r, rchunk


def _thread_blocks(lay: BufferLayout, order: np.ndarray, src_r, dst_r, chan) -> dict[int, list[tuple[tuple, list]]]:
    """Per GPU, its thread blocks in id order: ``((direction, peer, channel), ops)``.

    Ops are ``("S", i)`` (send ``i`` at its source), ``("R", i)`` (its receive) and
    ``("C", g, k)`` (the k-th local copy of GPU ``g``)."""
    tbs: dict[int, dict[tuple, list]] = defaultdict(dict)
    for i in order.tolist():
        g_s, g_d, ch = int(src_r[i]), int(dst_r[i]), int(chan[i])
        tbs[g_s].setdefault(("send", g_d, ch), []).append(("S", i))
        tbs[g_d].setdefault(("recv", g_s, ch), []).append(("R", i))
    out = {}
    for g in range(lay.n):
        keys = sorted(tbs.get(g, {}), key=lambda k: (k[0] != "send", k[1], k[2]))
        out[g] = [(k, tbs[g][k]) for k in keys]
        copies = _copy_runs(lay.copies(g))
        if copies:
            out[g].append((("copy", -1, 0), [("C", g, k) for k in range(len(copies))]))
    return out


def _copy_runs(pairs: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """Contiguous runs ``(src, dst, length)`` of (src, dst) offsets (chunks before refinement)."""
    runs: list[list[int]] = []
    for a, b in pairs:
        if runs and runs[-1][0] + runs[-1][2] == a and runs[-1][1] + runs[-1][2] == b:
            runs[-1][2] += 1
        else:
            runs.append([a, b, 1])
    return [tuple(r) for r in runs]


def _declared_order(s: Schedule, order: np.ndarray, path, deps: dict, instance: Instance) -> None:
    """``link_order = "program"`` (:class:`~.schedule.Schedule`): each send waits for the send
    before it in program order ``order`` out of the same GPU over the same first link (to its
    peer, or into the first switch of its route ``path[i]``), the waits
    :func:`~collsynth.tens.cost.link_successors` lists."""
    first = np.array([p[0] if p else d for p, d in zip(path, s.dst.tolist())], np.int64)
    pair = instance.topology.link_arrays.lookup(s.src, first)
    after = link_successors(s.src[order], pair[order], instance.topology)
    for a, b in zip(order.tolist(), after.tolist()):
        if b >= 0:
            deps[("S", int(order[b]))].append(("S", a))


def _plan(s: Schedule, lay: BufferLayout, instance: Instance, order, src_r, dst_r, deps, max_steps: int, path, fuse=None,
          trees: bool = False, fit: int = 0):
    """``(nchannels, thread blocks, op positions, dependencies)``: a link's (or a switch path's,
    ``path``) sends spread over as many channels as keep every thread block within ``max_steps``
    steps (nops included), or with ``trees`` each tree on channels of its own
    (:func:`~collsynth.tens.export_layout.tree_channels`, at most
    :data:`~collsynth.tens.export_layout.MAX_TREE_THREAD_BLOCKS` thread blocks a GPU; with ``fit``
    a rank pair's trees sharing thread blocks until a GPU has at most ``fit``,
    :func:`~collsynth.tens.export_layout.fitted_channels`);
    receive-and-send steps where ``fuse`` (thread blocks, dependencies -> both) makes them, and
    ``deps`` less those the layout implies
    (:func:`~collsynth.tens.export_deps.implied_dependencies_removed`)."""
    pair = instance.topology.link_arrays.lookup(s.src, s.dst)
    count = np.where(pair >= 0, instance.topology.link_arrays.count[pair], 1) if len(s) else np.zeros(0, np.int64)
    lane = max_steps
    while True:
        if trees:
            chan = tree_channels(src_r, dst_r, path, trees_of(len(s), deps), MAX_CHANNELS, MAX_TB_PER_CHANNEL)
            if fit:
                held = {g: 1 for g in range(lay.n) if lay.copies(g)}  # the local copies' thread block
                chan = fitted_channels(chan, src_r, dst_r, path, fit, held)
        else:
            chan = link_channels(s, order, count, lane, path, MAX_TB_PER_CHANNEL)
        nchannels = int(chan.max()) + 1 if len(s) else 1
        if nchannels > MAX_CHANNELS:
            raise InputError("schedule", f"needs {nchannels} channels to keep thread blocks within {max_steps} steps; "
                             f"MSCCL has at most {MAX_CHANNELS}")
        tbs, all_deps = _thread_blocks(lay, order, src_r, dst_r, chan), deps
        if fuse is not None:
            tbs, all_deps = fuse(tbs, deps)
        most = max((len(lst) for lst in tbs.values()), default=0)
        if trees and most > MAX_TREE_THREAD_BLOCKS:
            raise InputError("schedule", f"one thread block per tree and edge needs {most} on a GPU (at most "
                             f"{MAX_TREE_THREAD_BLOCKS}); export on a coarser grid")
        needed = implied_dependencies_removed(tbs, all_deps)
        pos, longest = _positions(tbs, needed)
        if longest <= max_steps:
            return nchannels, tbs, pos, needed
        if lane == 1 or trees:
            raise InputError("schedule", f"a thread block needs {longest} steps; MSCCL runs at most {max_steps}")
        lane = max(1, min(lane - 1, lane * max_steps // longest))


def _positions(tbs: dict, deps: dict) -> tuple[dict[tuple, tuple[int, int]], int]:
    """``(thread block id, step index)`` of every op, counting the nop steps before it, and
    the most steps any thread block runs."""
    pos: dict[tuple, tuple[int, int]] = {}
    longest = 0
    for lst in tbs.values():
        for tb_id, (_, ops) in enumerate(lst):
            idx = 0
            for op in ops:
                idx += max(len(deps.get(op, ())) - 1, 0)
                pos[op] = (tb_id, idx)
                idx += 1
            longest = max(longest, idx)
    return pos, longest


def _check_limits(lay: BufferLayout, tbs: dict, deps: dict, pos: dict, denom: int, dialect: str) -> None:
    """Refuse programs past the runtime's fixed-size fields: thread blocks per GPU, the
    thread block a dependency names (int8_t), buffer offsets (int16_t)."""
    most = max((len(lst) for lst in tbs.values()), default=0)
    if most > MAX_THREAD_BLOCKS[dialect]:
        raise InputError("schedule", f"a GPU needs {most} thread blocks; {dialect} runs at most {MAX_THREAD_BLOCKS[dialect]}")
    far = max((pos[d][0] for ds in deps.values() for d in ds), default=0)
    if far > MAX_DEPENDED_TB:
        raise InputError("schedule", f"a step waits for thread block {far}; MSCCL names at most {MAX_DEPENDED_TB}")
    biggest = max(max(lay.buffer_sizes(g, denom).values()) for g in range(lay.n))
    if biggest - 1 > MAX_OFFSET:
        raise InputError("schedule", f"a buffer of {biggest} MSCCL chunks; MSCCL offsets stop at {MAX_OFFSET}")


def _op_fields(op: tuple, s: Schedule, lay: BufferLayout, gpu: int, rchunk, src_r, dst_r, reduce) -> tuple:
    """``(type, (srcbuf, srcoff, dstbuf, dstoff), cnt)`` of one op's step."""
    D = s.denom
    if op[0] == "C":
        a, b, length = _copy_runs(lay.copies(gpu))[op[2]]
        cnt = length * D
        if cnt >= MAX_COUNT:
            raise InputError("schedule", f"a local copy of {cnt} MSCCL chunks; the executor moves fewer than {MAX_COUNT} per step")
        return "cpy", ("i", a * D, "o", b * D), cnt
    if op[0] == "F":  # receive i and send it on (export_fuse): the piece's place on the relay
        i = op[1]
        buf, off = lay.location(int(rchunk[i]), int(dst_r[i]))
        return op[3], (buf, off * D + int(s.lo[i]), buf, off * D + int(s.lo[i])), int(s.hi[i] - s.lo[i])
    kind, i = op
    r = int(rchunk[i])
    lo, hi = int(s.lo[i]), int(s.hi[i])
    sbuf, soff = lay.location(r, int(src_r[i]))
    dbuf, doff = lay.location(r, int(dst_r[i]))
    if kind == "S":
        return "s", (sbuf, soff * D + lo, dbuf, doff * D + lo), hi - lo
    if reduce[i]:  # the executor adds the local srcbuf/srcoff to what arrives
        return "rrc", (dbuf, doff * D + lo, dbuf, doff * D + lo), hi - lo
    return "r", (sbuf, soff * D + lo, dbuf, doff * D + lo), hi - lo


def _step(s, typ, srcbuf, srcoff, dstbuf, dstoff, cnt, depid, deps, hasdep) -> dict:
    return {"s": str(s), "type": typ, "srcbuf": srcbuf, "srcoff": str(srcoff), "dstbuf": dstbuf,
            "dstoff": str(dstoff), "cnt": str(cnt), "depid": str(depid), "deps": str(deps), "hasdep": str(hasdep)}
