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

    def chunks_touching(self, nodes) -> np.ndarray:
        """The used chunk ids whose pre- or postcondition holds one of ``nodes``, in increasing
        order (from the chunk-id table above, without building the ``[chunk, node]`` matrices).

        >>> make("alltoall", nodes=range(3), size=3).chunks_touching([0]).tolist()  # 0 -> k and i -> 0
        [0, 1, 2, 3, 6]
        >>> make("gather", nodes=range(3), size=3, root=2).chunks_touching([0]).tolist()
        [0]
        """
        c, s = self.chunks_per_node, self.size
        inside = np.zeros(s, bool)
        inside[np.asarray(nodes, dtype=np.int64)] = True
        if self.kind == "alltoall":  # the pairs from or to a node inside, not all N^2 of them
            ranks = np.asarray(self.nodes, dtype=np.int64)
            near = ranks[inside[ranks]]
            pairs = np.unique(np.concatenate([(near[:, None] * s + ranks[None, :]).ravel(),
                                              (ranks[:, None] * s + near[None, :]).ravel()]))
            return (pairs[:, None] * c + np.arange(c, dtype=np.int64)[None, :]).ravel()
        ids = self.used_chunks
        if self.kind not in ROOTED or self.kind in ("broadcast", "reduce"):  # every rank on one side of each row
            return ids if inside[list(self.nodes)].any() else ids[:0]
        return ids if inside[self.root] else ids[inside[ids // c]]  # scatter, gather: the root, the owner

    @property
    def num_used_chunks(self) -> int:
        """How many chunk ids appear in the pre- or postcondition (``len(used_chunks)``, counted).

        >>> make("alltoall", nodes=[0, 2], size=3, chunks_per_node=5).num_used_chunks
        20
        """
        return chunk_ids(self.kind, len(self.nodes), self.chunks_per_node)

    @cached_property
    def _conditions(self) -> tuple[np.ndarray, np.ndarray]:
        """Both condition matrices, built together once (every chunk id's rows)."""
        return self.condition_rows(np.arange(self.num_chunks, dtype=np.int64))

    def condition_rows(self, ids) -> tuple[np.ndarray, np.ndarray]:
        """``(precondition[ids], postcondition[ids])`` read from the chunk-id table (module doc)
        without building the whole matrices: an all-to-all of ``N`` ranks has ``N^2`` chunk ids,
        whose matrices alone outgrow a machine's memory from about 2,000 ranks, while a few of
        its rows are small.

        >>> pre, post = make("alltoall", nodes=[0, 2], size=3).condition_rows([2, 5])  # 0 -> 2; 1 -> 2 (unused)
        >>> pre.astype(int).tolist(), post.astype(int).tolist()
        ([[1, 0, 0], [0, 0, 0]], [[0, 0, 1], [0, 0, 0]])
        """
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        c, s, kind = self.chunks_per_node, self.size, self.kind
        member = np.zeros(s, bool)
        member[list(self.nodes)] = True
        pre = np.zeros((len(ids), s), dtype=bool)
        post = np.zeros_like(pre)
        if kind == "alltoall":
            src, dst = np.divmod(ids // c, s)
            used = np.flatnonzero(member[src] & member[dst])
            pre[used, src[used]] = True
            post[used, dst[used]] = True
            return pre, post
        owner = np.full(len(ids), self.root, np.int64) if kind in ("broadcast", "reduce") else ids // c
        used = np.flatnonzero(member[owner])
        one = {"allgather": pre, "gather": pre, "scatter": post, "reduce_scatter": post, "broadcast": pre,
               "reduce": post}.get(kind)  # the matrix with a single node per row: the owner or the root
        if one is not None:
            one[used, owner[used]] = True
        targets = {"gather": post, "scatter": pre}.get(kind)  # the root on the other side
        if targets is not None:
            targets[used, self.root] = True
        for everyone in {"allgather": (post,), "reduce_scatter": (pre,), "allreduce": (pre, post),
                         "broadcast": (post,), "reduce": (pre,)}.get(kind, ()):
            everyone[used] = member
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
