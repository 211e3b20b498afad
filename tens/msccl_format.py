"""The MSCCL XML format, what the runtimes that execute it accept, and where a collective's
chunks live in its buffers (:class:`BufferLayout`); written by :mod:`.export`, read by :mod:`.msccl_read`.

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
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from .. import InputError
from ..instances.instance import Instance
from .choices import DEFAULT_MSCCL_DIALECT, MSCCL_DIALECTS


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
# a link's sends packed per thread block / one thread block per tree and edge / the latter with a
# rank pair's trees merged onto shared thread blocks until a GPU's fit its SMs (export_layout.py)
LAYOUTS = ("links", "trees", "fitted")
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

class BufferLayout:
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
        """Whether the collective has an in-place form (MSCCL's ``inplace``: one buffer holds its
        input and output, :data:`IN_PLACE_BUFFER` names which)."""
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
