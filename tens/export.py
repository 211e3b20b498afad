"""Exports: MSCCL XML (what GPU runtimes execute) and back; the schedule JSON lives in .schedule.

An MSCCL program (the XML form of MSCCLang's programs, Cowan et al., ASPLOS 2023 (MSCCLang)) is
``<algo name proto nchannels nchunksperloop ngpus coll inplace outofplace minBytes maxBytes
[redop]>`` -> ``<gpu id i_chunks o_chunks s_chunks>`` -> ``<tb id send recv chan>`` -> ``<step s
type srcbuf srcoff dstbuf dstoff cnt depid deps hasdep>``. What the runtimes make of it, read
from their sources (repository, file, function: rule):

- Azure/msccl-executor-nccl, ``src/misc/msccl/msccl_parser.cc``, ``mscclGetAlgoFromXmlFile``:
  ``coll`` is one of reduce, broadcast, allreduce, reducescatter, allgather, send, recv,
  gather, scatter, alltoall, alltoallv (anything else is "unsupported collective");
  reducescatter, allgather and alltoall set ``sizeMultiplier = ngpus``, the others 1. Every
  attribute above is required (``redop`` is not read). Thread block ids run 0.. without gaps,
  ``send``/``recv`` name another GPU or -1; step types are s r rcs rrs rrc rrcs cpy re nop;
  buffers are i o s; a step's start offset must lie inside the buffer (``i_chunks`` ...);
  ``0 <= cnt < 72``; ``s < MSCCL_MAX_NUM_STEPS``; at most 32 send (and 32 receive) thread
  blocks per channel; dependencies gathered from ``nop`` steps attach to the next real step,
  which must carry a dependency itself. ``src/include/msccl/msccl_struct.h`` and
  ``makefiles/common.mk``: ``MSCCL_MAX_NUM_STEPS`` is 64 unless the executor is built with
  another value, thread blocks per GPU at most 32 * MAXCHANNELS, a dependency's thread block
  is an ``int8_t`` (ids up to 127) and offsets are ``int16_t``.
- ``src/misc/msccl/msccl_setup.cc``, ``mscclSetupKernel``/``mscclSetupScratch``: the kernel's
  ``count`` is the call's count times ``sizeMultiplier``; the scratch buffer holds
  ``nBytes * s_chunks / nchunksperloop`` bytes.
- ``src/device/msccl_kernel.cu``, ``mscclRunInterpreter``: an MSCCL chunk is ``count /
  nchunksperloop`` elements and every offset and ``cnt`` is in those chunks, so
  ``nchunksperloop`` is the number of chunks of the buffer ``count * sizeMultiplier``
  describes. A step waits until each dependency's thread block has published a flag at or
  past the step ``deps``; flags are published only after steps with ``hasdep="1"``; the step
  counter skips one index per extra dependency, so ``deps`` counts the ``nop`` steps.
- ``src/misc/msccl/msccl_lifecycle.cc``, ``mscclInternalSchedulerSelectAlgo``: in place means
  sendbuff == recvbuff (reduce, broadcast, allreduce, alltoall), sendbuff == recvbuff +
  rank * count (allgather, gather), recvbuff == sendbuff + rank * count (reducescatter,
  scatter): for gather and scatter (``sizeMultiplier`` 1) ``count`` is one rank's share.
- microsoft/msccl-tools, ``msccl/language/ir.py``, ``ir_to_xml``: ``nchunksperloop`` is the
  largest input or output buffer of any GPU, in chunks; extra dependencies become ``nop`` steps
  before the step; ``hasdep`` marks every step another depends on.
  ``msccl/language/collectives.py`` names the collectives allgather, allreduce, alltoall,
  reduce_scatter and ``custom`` (everything else); the runtime those programs were written
  for, microsoft/msccl, accepts exactly allreduce, allgather, reduce, broadcast, alltoall,
  reduce_scatter and custom (``src/graph/topo.cc``), with 256 steps and 216 thread blocks
  (``src/include/msccl.h``).

Dialects (``dialect=``): ``msccl-executor`` (default; the executor's names: ``reducescatter``,
``gather``, ``scatter``) and ``msccl-tools`` (``reduce_scatter``, ``custom``). They differ in
``coll``, in the steps a thread block may run and, for gather and scatter, in
``nchunksperloop`` (one rank's share for the executor, the whole buffer for msccl-tools).

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
from .choices import DEFAULT_MSCCL_DIALECT, MSCCL_DIALECTS
from .cost import _dependencies, link_successors
from .export_deps import implied_dependencies_removed, op_dependencies, program_order
from .export_fuse import fused, sum_needed
from .export_layout import MAX_TREE_THREAD_BLOCKS, link_channels, tree_channels, trees_of
from .schedule import OP_DEFAULT, OP_REDUCE, Schedule, from_sends
from .switch_routes import summed_in_switch, switch_routes

MAX_CHUNKS = 4096
# runtime limits: msccl-executor-nccl src/include/msccl/msccl_struct.h and makefiles/common.mk
# (MSCCL_MAX_NUM_STEPS ?= 64, a build option); microsoft/msccl src/include/msccl.h (256 steps,
# 108*2 thread blocks); both keep a dependency's thread block in an int8_t and offsets in int16_t
MAX_STEPS = {"msccl-executor": 64, "msccl-tools": 256}  # steps per thread block (s < this)
MAX_THREAD_BLOCKS = {"msccl-executor": 32 * 32, "msccl-tools": 108 * 2}  # per GPU
MAX_DEPENDED_TB = 127  # the largest thread block id a dependency can name (int8_t)
MAX_OFFSET = 32767  # int16_t buffer offsets
MAX_COUNT = 72  # a step moves fewer than this many chunks
MAX_TB_PER_CHANNEL = 32  # send (and receive) thread blocks per channel and GPU
MAX_CHANNELS = 32  # NCCL's MAXCHANNELS
SEND_TYPES = {"s", "rcs", "rrs", "rrcs"}
RECV_TYPES = {"r", "rcs", "rrc", "rrs", "rrcs"}
REDUCE_TYPES = {"rrc", "rrs", "rrcs"}
KNOWN_TYPES = SEND_TYPES | RECV_TYPES | {"cpy", "re", "nop"}
DIALECTS = MSCCL_DIALECTS
LAYOUTS = ("links", "trees")  # a link's sends packed per thread block / one thread block per tree and edge
DEFAULT_DIALECT = DEFAULT_MSCCL_DIALECT
COLL_NAMES = {
    "msccl-executor": {
        "allgather": "allgather", "allreduce": "allreduce", "reduce_scatter": "reducescatter",
        "broadcast": "broadcast", "reduce": "reduce", "alltoall": "alltoall",
        "gather": "gather", "scatter": "scatter",
    },
    "msccl-tools": {
        "allgather": "allgather", "allreduce": "allreduce", "reduce_scatter": "reduce_scatter",
        "broadcast": "broadcast", "reduce": "reduce", "alltoall": "alltoall",
        "gather": "custom", "scatter": "custom",
    },
}
IN_PLACE_BUFFER = {"allgather": "o", "broadcast": "o", "reduce_scatter": "i", "allreduce": "i", "reduce": "i"}
ALGO_ATTRS = ("name", "proto", "nchannels", "nchunksperloop", "ngpus", "coll", "inplace",
              "outofplace", "minBytes", "maxBytes")
STEP_ATTRS = ("s", "type", "srcbuf", "srcoff", "dstbuf", "dstoff", "cnt", "depid", "deps", "hasdep")


def rank_map(instance: Instance) -> dict[int, int]:
    """``{node id: MSCCL rank}`` of ``instance``'s collective: ranks number its nodes in order.

    >>> from collsynth.instances.generators import build
    >>> from collsynth.instances.instance import make_instance
    >>> rank_map(make_instance(build("ring", {"nodes": 4}).with_failures([1]), "allgather"))
    {0: 0, 2: 1, 3: 2}
    """
    return {int(node): rank for rank, node in enumerate(instance.collective.nodes)}


def ranks_renumbered(instance: Instance) -> bool:
    """True when some node's rank differs from its id (failed nodes, a subset of nodes)."""
    return any(node != rank for node, rank in rank_map(instance).items())


def rank_comment(instance: Instance) -> str:
    """An XML comment line listing ``node->rank`` when the ranks are not the node ids (the
    executor's parser skips comments), else the empty string.

    >>> from collsynth.instances.generators import build
    >>> from collsynth.instances.instance import make_instance
    >>> rank_comment(make_instance(build("ring", {"nodes": 4}).with_failures([1]), "allgather"))
    '<!-- collsynth: gpu ids are ranks, not node ids (node->rank): 0->0 2->1 3->2 -->\\n'
    """
    if not ranks_renumbered(instance):
        return ""
    pairs = " ".join(f"{node}->{rank}" for node, rank in rank_map(instance).items())
    return f"<!-- collsynth: gpu ids are ranks, not node ids (node->rank): {pairs} -->\n"


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
        self.root = int(self.rank_of[coll.root]) if coll.root is not None else -1
        self.c = coll.chunks_per_node
        self.S = coll.size
        if self.kind in ("broadcast", "reduce"):
            self.rank_chunks = self.c
        elif self.kind == "alltoall":
            self.rank_chunks = self.n * self.n * self.c
        else:
            self.rank_chunks = self.n * self.c
        self.scratch: dict[int, dict[int, int]] = defaultdict(dict)  # gpu -> {chunk: slot}

    @property
    def in_place(self) -> bool:
        return self.kind in IN_PLACE_BUFFER

    def loop_chunks(self, dialect: str) -> int:
        """Chunks (before refinement) of the buffer ``count * sizeMultiplier`` describes."""
        if self.kind in ("broadcast", "reduce") or (self.kind in ("gather", "scatter") and dialect == "msccl-executor"):
            return self.c
        return self.n * self.c

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

    def ends(self, r: int) -> tuple[int, int, int, int]:
        """Out-of-place kinds: (source rank, offset in its ``i``, destination rank, offset in its ``o``)."""
        c, j = self.c, r % self.c
        if self.kind == "alltoall":
            i, k = divmod(r // c, self.n)
            return i, k * c + j, k, i * c + j
        if self.kind == "gather":
            return r // c, j, self.root, r
        return self.root, r, r // c, j  # scatter

    def location(self, r: int, gpu: int) -> tuple[str, int]:
        """(buffer, chunk offset before refinement) of rank-space chunk ``r`` on ``gpu``."""
        if self.in_place:
            return IN_PLACE_BUFFER[self.kind], r
        src, soff, dst, doff = self.ends(r)
        if gpu == src:
            return "i", soff
        if gpu == dst:
            return "o", doff
        return "s", self.scratch[gpu][r]

    def assign_scratch(self, rchunk: np.ndarray, dst_r: np.ndarray) -> None:
        """Out-of-place kinds: a scratch slot on every GPU a chunk passes through (one per chunk,
        in chunk order); refuses a send that delivers a chunk back to its source."""
        if self.in_place:
            return
        relayed: dict[int, set[int]] = defaultdict(set)
        for i, (r, g) in enumerate(zip(rchunk.tolist(), dst_r.tolist())):
            src, _, dst, _ = self.ends(r)
            if g == src:
                raise InputError("schedule", f"send {i} delivers a chunk back to its source rank {g}; "
                                 "MSCCL would overwrite the input buffer")
            if g != dst:
                relayed[g].add(r)
        for g, chunks in relayed.items():
            self.scratch[g] = {r: slot for slot, r in enumerate(sorted(chunks))}

    def copies(self, gpu: int) -> list[tuple[int, int]]:
        """Out-of-place kinds: (offset in ``i``, offset in ``o``) of the gpu's chunks that stay put."""
        if self.in_place or (self.kind in ("gather", "scatter") and gpu != self.root):
            return []
        c = self.c
        if self.kind == "alltoall":
            return [(gpu * c + j, gpu * c + j) for j in range(c)]
        if self.kind == "gather":
            return [(j, gpu * c + j) for j in range(c)]
        return [(gpu * c + j, j) for j in range(c)]  # scatter

    def buffer_sizes(self, gpu: int, denom: int) -> dict[str, int]:
        """``i_chunks``, ``o_chunks``, ``s_chunks`` of ``gpu``."""
        n, c, kind = self.n, self.c, self.kind
        whole, share = n * c * denom, c * denom
        root = gpu == self.root
        i, o = {
            "allgather": (share, whole), "reduce_scatter": (whole, share), "allreduce": (whole, whole),
            "broadcast": (share, share), "reduce": (share, share), "alltoall": (whole, whole),
            "gather": (share, whole if root else 0), "scatter": (whole if root else 0, share),
        }[kind]
        return {"i_chunks": i, "o_chunks": o, "s_chunks": len(self.scratch.get(gpu, ())) * denom}

    def chunk_at(self, buf: str, off: int, gpu: int, scratch: dict) -> int:
        """Inverse of :meth:`location`: the rank-space chunk at ``(buf, off)`` on ``gpu``
        (``scratch`` maps ``(gpu, slot)`` to chunks for the relays); -1 if nothing of the
        collective lives there."""
        if self.in_place:
            if buf != IN_PLACE_BUFFER[self.kind]:
                raise InputError("xml", f"{self.kind} data is expected in buffer {IN_PLACE_BUFFER[self.kind]!r}, got {buf!r}")
            return off
        c, n, kind = self.c, self.n, self.kind
        if buf == "s":
            return scratch.get((gpu, off), -1)
        if buf not in ("i", "o"):
            raise InputError("xml", f"unknown buffer {buf!r}")
        if kind == "alltoall":
            if buf == "i":
                return (gpu * n + off // c) * c + off % c
            return ((off // c) * n + gpu) * c + off % c
        if (kind, buf) in (("gather", "i"), ("scatter", "o")):
            return gpu * c + off if off < c else -1
        return off if gpu == self.root else -1


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
) -> str:
    """The MSCCL XML program of ``schedule`` (see the module doc for the mapping; with ``fuse``,
    a receive its GPU forwards next is one receive-and-send step, :mod:`.export_fuse`, unless
    :func:`interpret_msccl_xml` cannot number the fused program's transfers by steps: then
    without). ``layout``: ``links`` packs a link's sends into as few thread blocks as the step
    limit allows (the module doc); ``trees`` gives every tree channels of its own, one thread
    block per tree and edge, as ForestColl's programs (:mod:`.export_layout`).

    ``dialect`` picks the collective names: ``msccl-executor`` (Azure/msccl-executor-nccl) or
    ``msccl-tools`` (microsoft/msccl-tools and the microsoft/msccl runtime). Raises
    :class:`~collsynth.InputError` for what MSCCL cannot run: concurrent collectives, sends
    that are not direct links between ranks, a chunk sent back to its source (out-of-place
    kinds), a refined chunk grid over ``max_chunks`` or an executor limit.
    """
    _check_options(dialect, [(layout, fuse)])
    attrs = {"name": name, "proto": proto, "minBytes": str(int(min_bytes)), "maxBytes": str(int(max_bytes))}
    return _written(_prepared(schedule, instance, dialect, max_chunks), layout, fuse, attrs)


def msccl_xml_variants(schedule: Schedule, instance: Instance, variants: list[tuple[str, bool]],
                       dialect: str = DEFAULT_DIALECT) -> list:
    """:func:`to_msccl_xml` of ``schedule`` for every ``(layout, fuse)`` of ``variants`` (the
    other options at their defaults), the work they share (routes, dependencies, program
    order) done once: each a program, or the :class:`~collsynth.InputError` that refused it;
    raises one when every variant is refused for the same reason (the schedule itself)."""
    _check_options(dialect, variants)
    prep = _prepared(schedule, instance, dialect, MAX_CHUNKS)
    attrs = {"name": "collsynth", "proto": "Simple", "minBytes": "0", "maxBytes": str(1 << 40)}
    out = []
    for layout, fuse in variants:
        try:
            out.append(_written(prep, layout, fuse, attrs))
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
    lay = _Layout(instance)
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


def _written(p: dict, layout: str, fuse: bool, attrs: dict) -> str:
    """The program text of the prepared export ``p`` (:func:`_prepared`) in ``layout``, with
    receive-and-send steps if ``fuse`` and our reader can number them (else without)."""
    s, lay, instance, dialect, order, reduce = p["s"], p["lay"], p["instance"], p["dialect"], p["order"], p["reduce"]
    src_r, dst_r, rchunk = p["src_r"], p["dst_r"], p["rchunk"]
    merge = (lambda tbs, d: fused(tbs, d, s, order, reduce, p["needs"])) if fuse else None
    nchannels, tbs, pos, deps = _plan(s, lay, instance, order, src_r, dst_r, p["deps"], MAX_STEPS[dialect], p["path"],
                                      merge, layout == "trees")
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
            return _written(p, layout, False, attrs)
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



def _checked_sends(s: Schedule, lay: _Layout, instance: Instance,
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


def _thread_blocks(lay: _Layout, order: np.ndarray, src_r, dst_r, chan) -> dict[int, list[tuple[tuple, list]]]:
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


def _plan(s: Schedule, lay: _Layout, instance: Instance, order, src_r, dst_r, deps, max_steps: int, path, fuse=None,
          trees: bool = False):
    """``(nchannels, thread blocks, op positions, dependencies)``: a link's (or a switch path's,
    ``path``) sends spread over as many channels as keep every thread block within ``max_steps``
    steps (nops included), or with ``trees`` each tree on channels of its own
    (:func:`~collsynth.tens.export_layout.tree_channels`, at most
    :data:`~collsynth.tens.export_layout.MAX_TREE_THREAD_BLOCKS` thread blocks a GPU);
    receive-and-send steps where ``fuse`` (thread blocks, dependencies -> both) makes them, and
    ``deps`` less those the layout implies
    (:func:`~collsynth.tens.export_deps.implied_dependencies_removed`)."""
    pair = instance.topology.link_arrays.lookup(s.src, s.dst)
    count = np.where(pair >= 0, instance.topology.link_arrays.count[pair], 1) if len(s) else np.zeros(0, np.int64)
    lane = max_steps
    while True:
        if trees:
            chan = tree_channels(src_r, dst_r, path, trees_of(len(s), deps), MAX_CHANNELS, MAX_TB_PER_CHANNEL)
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


def _check_limits(lay: _Layout, tbs: dict, deps: dict, pos: dict, denom: int, dialect: str) -> None:
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


def _op_fields(op: tuple, s: Schedule, lay: _Layout, gpu: int, rchunk, src_r, dst_r, reduce) -> tuple:
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
    boundaries (a relay's scratch slot takes the chunk its first writer carried). Steps: every
    transfer is numbered by the longest dependency chain: one more than a receive its send
    depends on (``depid``/``deps``, including ``nop`` steps, or an earlier receive in the same
    thread block writing what it reads), at least the step of any other dependency and of the
    previous step in its thread block. Local ``cpy`` steps move nothing between ranks and are
    not part of the schedule. ``denom`` defaults to ``nchunksperloop`` over the chunks of the
    collective's loop buffer (for either dialect, told apart by ``coll``). Errors are
    :class:`~collsynth.InputError`.
    """
    lay = _Layout(instance)
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


def _parse_root(xml: str, lay: _Layout) -> ET.Element:
    """The ``<algo>`` element, checked for its attributes, GPU count and collective name."""
    root = algo_root(xml, "xml: algo")
    ngpus = _int(root, "ngpus", "xml: algo")
    if ngpus != lay.n:
        raise InputError("xml: algo.ngpus", f"the collective has {lay.n} ranks, the XML {ngpus}")
    names = {COLL_NAMES[d][lay.kind] for d in DIALECTS}
    if root.get("coll") not in names:
        raise InputError("xml: algo.coll", f"expected {' or '.join(sorted(names))} for {lay.kind}, got {root.get('coll')!r}")
    return root


def _denominator(root: ET.Element, lay: _Layout) -> int:
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


def _scratch_chunks(lay: _Layout, ops: dict, transfers: list, D: int) -> dict[tuple[int, int], int]:
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


def _pieces(lay: _Layout, buf: str, off: int, cnt: int, gpu: int, D: int, scratch: dict):
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
