"""Collectives: who holds which chunk before, who must hold it after.

Eight kinds (``docs/instances.md``): ``broadcast``, ``reduce``, ``scatter``, ``gather``,
``allgather``, ``reduce_scatter``, ``allreduce``, ``alltoall``. A collective runs over a set of
live ranks (node ids of a topology); chunk ids follow the schedule-file contract, with ``c``
chunks per shard and ``S`` node ids (``topology.size``):

==============================  ===========================================
kind                            chunk ``id`` of the j-th piece
==============================  ===========================================
allgather, gather               node i's shard: ``i*c + j``
scatter, reduce_scatter         the block destined to node i: ``i*c + j``
allreduce                       the block reduced at owner i: ``i*c + j``
alltoall                        what i sends to k: ``(i*S + k)*c + j``
broadcast, reduce               ``j`` (one shared buffer)
==============================  ===========================================

Chunk ids of nodes that are not participants (failed or outside ``nodes``) exist but are in
neither condition. ``message_bytes`` (M) is the whole output buffer (allgather, allreduce,
gather at the root, each node's alltoall output), the root buffer (broadcast, scatter), or the
whole input vector (reduce, reduce_scatter).

Combining collectives (reduce, reduce_scatter, allreduce) are the time reversal of their
non-combining dual on the transposed topology: reduce <-> broadcast, reduce_scatter <->
allgather; allreduce = reduce_scatter then allgather.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Iterable

import numpy as np

from .. import InputError
from .size import chunk_ids

KINDS = (
    "broadcast",
    "reduce",
    "scatter",
    "gather",
    "allgather",
    "reduce_scatter",
    "allreduce",
    "alltoall",
)
ROOTED = frozenset({"broadcast", "reduce", "scatter", "gather"})
COMBINING = frozenset({"reduce", "reduce_scatter", "allreduce"})
DUAL = {"reduce": "broadcast", "reduce_scatter": "allgather", "broadcast": "reduce", "allgather": "reduce_scatter"}


@dataclass(frozen=True, eq=False)
class Collective:
    """One collective over the ranks ``nodes`` of a topology with ``size`` node ids.

    ``precondition`` and ``postcondition`` are boolean matrices ``[chunk, node]``;
    for combining collectives every participant contributes to every chunk.

    >>> ag = make("allgather", nodes=range(4), size=4)
    >>> ag.num_chunks, int(ag.precondition.sum()), int(ag.postcondition.sum())
    (4, 4, 16)
    """

    kind: str
    nodes: tuple[int, ...]
    size: int
    chunks_per_node: int = 1
    message_bytes: float = 1.0
    root: int | None = None

    @property
    def combining(self) -> bool:
        """True for reduce, reduce_scatter and allreduce (receivers add contributions)."""
        return self.kind in COMBINING

    @property
    def num_chunks(self) -> int:
        """Number of chunk ids (some may be unused when not every node id participates)."""
        c, s = self.chunks_per_node, self.size
        if self.kind in ("broadcast", "reduce"):
            return c
        if self.kind == "alltoall":
            return s * s * c
        return s * c

    @property
    def chunk_bytes(self) -> float:
        """Bytes of one chunk: M/c for broadcast/reduce, M/(N*c) for the others."""
        if self.kind in ("broadcast", "reduce"):
            return self.message_bytes / self.chunks_per_node
        return self.message_bytes / (len(self.nodes) * self.chunks_per_node)

    def owner_chunks(self, node: int) -> range:
        """Chunk ids ``node*c .. node*c + c - 1`` (the shard or block belonging to ``node``)."""
        c = self.chunks_per_node
        return range(node * c, node * c + c)

    @property
    def precondition(self) -> np.ndarray:
        """``pre[chunk, node]``: the node holds (or, if combining, contributes to) the chunk."""
        return self._conditions[0]

    @property
    def postcondition(self) -> np.ndarray:
        """``post[chunk, node]``: the node must hold the chunk (fully reduced if combining)."""
        return self._conditions[1]

    @cached_property
    def used_chunks(self) -> np.ndarray:
        """Chunk ids that appear in the pre- or postcondition, in increasing order (from the
        chunk-id table above, without building the ``[chunk, node]`` matrices).

        >>> make("alltoall", nodes=[0, 2], size=3).used_chunks.tolist()
        [0, 2, 6, 8]
        """
        c, s = self.chunks_per_node, self.size
        j = np.arange(c, dtype=np.int64)
        if self.kind in ("broadcast", "reduce"):
            return j
        ranks = np.sort(np.asarray(self.nodes, dtype=np.int64))
        if self.kind == "alltoall":
            ranks = (ranks[:, None] * s + ranks[None, :]).ravel()
        return (ranks[:, None] * c + j[None, :]).ravel()

    @property
    def num_used_chunks(self) -> int:
        """How many chunk ids appear in the pre- or postcondition (``len(used_chunks)``, counted).

        >>> make("alltoall", nodes=[0, 2], size=3, chunks_per_node=5).num_used_chunks
        20
        """
        return chunk_ids(self.kind, len(self.nodes), self.chunks_per_node)

    @cached_property
    def _conditions(self) -> tuple[np.ndarray, np.ndarray]:
        """Both condition matrices, built together once."""
        c, kind = self.chunks_per_node, self.kind
        ranks = np.sort(np.asarray(self.nodes, dtype=np.int64))
        pre = np.zeros((self.num_chunks, self.size), dtype=bool)
        post = np.zeros_like(pre)
        ids = self.used_chunks  # by rank, then piece (all-to-all: source, destination, piece)
        owner = np.repeat(ranks, c)
        if kind == "allgather":
            pre[ids, owner] = True
            post[np.ix_(ids, ranks)] = True
        elif kind == "gather":
            pre[ids, owner] = True
            post[ids, self.root] = True
        elif kind == "scatter":
            pre[ids, self.root] = True
            post[ids, owner] = True
        elif kind == "reduce_scatter":
            pre[np.ix_(ids, ranks)] = True
            post[ids, owner] = True
        elif kind == "allreduce":
            pre[np.ix_(ids, ranks)] = True
            post[np.ix_(ids, ranks)] = True
        elif kind == "broadcast":
            pre[ids, self.root] = True
            post[np.ix_(ids, ranks)] = True
        elif kind == "reduce":
            pre[np.ix_(ids, ranks)] = True
            post[ids, self.root] = True
        elif kind == "alltoall":
            src = np.repeat(ranks, len(ranks))
            dst = np.tile(ranks, len(ranks))
            pre[ids, np.repeat(src, c)] = True
            post[ids, np.repeat(dst, c)] = True
        return pre, post

    def dual(self) -> "Collective":
        """The non-combining dual (or back): reduce <-> broadcast, reduce_scatter <-> allgather.

        The combining collective is the time reversal of its dual on the transposed topology
        (Zhao et al., NSDI 2025, Appendix A; TACOS section V). Allreduce has no single dual (it is
        reduce_scatter then allgather); asking for one is an error.
        """
        if self.kind not in DUAL:
            raise ValueError(f"{self.kind} has no single dual collective")
        return replace(self, kind=DUAL[self.kind])

    def with_kind(self, kind: str) -> "Collective":
        """The same ranks, size and chunking with another kind (e.g. allreduce's phases)."""
        return replace(self, kind=kind)

    def describe(self) -> dict:
        """Plain summary for JSON output."""
        return {
            "kind": self.kind,
            "nodes": len(self.nodes),
            "root": self.root,
            "chunks_per_node": self.chunks_per_node,
            "chunks": self.num_used_chunks,
            "message_bytes": self.message_bytes,
            "chunk_bytes": self.chunk_bytes,
            "combining": self.combining,
        }


def make(
    kind: str,
    nodes: Iterable[int],
    size: int,
    *,
    chunks_per_node: int = 1,
    message_bytes: float = 1.0,
    root: int | None = None,
    where: str = "collective",
) -> Collective:
    """Build and validate a collective; errors name ``where`` and the field.

    ``root`` is required for (and only allowed with) rooted kinds and must be a participant.
    """
    if kind not in KINDS:
        raise InputError(f"{where}.kind", f"unknown collective {kind!r}, expected one of {', '.join(KINDS)}")
    seen: set[int] = set()
    for n in map(int, nodes):
        if n in seen:
            raise InputError(f"{where}.nodes", f"node {n} is listed twice; expected distinct node ids")
        seen.add(n)
    ranks = tuple(sorted(seen))
    if len(ranks) < 2:
        raise InputError(f"{where}.nodes", f"a collective needs at least 2 live nodes, got {len(ranks)}")
    for n in ranks:
        if not 0 <= n < size:
            raise InputError(f"{where}.nodes", f"node {n} is not in 0..{size - 1}")
    if not isinstance(chunks_per_node, int) or isinstance(chunks_per_node, bool) or chunks_per_node < 1:
        raise InputError(f"{where}.chunks_per_node", f"expected a positive integer, got {chunks_per_node!r}")
    if (not isinstance(message_bytes, (int, float)) or isinstance(message_bytes, bool) or not message_bytes > 0
            or not math.isfinite(message_bytes)):
        raise InputError(f"{where}.message_bytes", f"expected a positive, finite number of bytes, got {message_bytes!r}")
    if kind in ROOTED:
        if root is None:
            raise InputError(f"{where}.root", f"{kind} needs a root node")
        if isinstance(root, bool) or not isinstance(root, int):
            raise InputError(f"{where}.root", f"expected a node id, got {root!r}")
        if root not in ranks:
            raise InputError(f"{where}.root", f"root {root} is not a live participating node")
    elif root is not None:
        raise InputError(f"{where}.root", f"{kind} takes no root")
    return Collective(
        kind=kind,
        nodes=ranks,
        size=int(size),
        chunks_per_node=int(chunks_per_node),
        message_bytes=float(message_bytes),
        root=root,
    )
