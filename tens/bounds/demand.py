"""What must cross into a node set: the demand rows of an instance (distinct chunk conditions) and its arcs.

Part of :mod:`collsynth.tens.bounds` (its module documentation describes every argument).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from ...instances.instance import Instance
from ...instances.topology import ParallelArrays
from ..ten import instant_hops
from .record import BLOCK_CELLS


# ---- what must cross into a node set --------------------------------------------------------

@dataclass(frozen=True)
class Demand(ParallelArrays):
    """Chunks that must reach nodes, grouped into rows of identical conditions.

    Row ``r`` stands for ``count[r]`` chunks of collective ``group[r]`` (``nbytes[r]`` bytes in
    all): ``pre[r]`` holds them (combining: contributes to them), ``post[r]`` must hold them
    (the full result, if combining) at the end.
    """

    pre: np.ndarray
    post: np.ndarray
    combining: np.ndarray
    count: np.ndarray
    nbytes: np.ndarray
    group: np.ndarray

    def crossing(self, inside: np.ndarray) -> np.ndarray:
        """Per row: must the row's chunks cross into the node set ``inside`` (bool mask)?

        Non-combining: some node of the set needs them and none holds them. Combining: some
        node of the set needs the result and some contributor is outside the set.
        """
        hit = self.post[:, inside].any(axis=1)
        held = self.pre[:, inside].any(axis=1)
        outside = self.pre[:, ~inside].any(axis=1)
        return hit & np.where(self.combining, outside, ~held)

    def select(self, rows: np.ndarray) -> "Demand":
        """The rows ``rows`` only (this demand itself when they are all of its rows, in order)."""
        if len(rows) == len(self) and (rows == np.arange(len(self))).all():
            return self
        return Demand(self.pre[rows], self.post[rows], self.combining[rows], self.count[rows],
                      self.nbytes[rows], self.group[rows])


def row_blocks(rows: int, width: int, cells: int | None = None) -> Iterator[slice]:
    """Consecutive slices of ``rows`` rows of ``width`` columns, each of at most ``cells``
    cells (default :data:`BLOCK_CELLS`; at least one row): row-wise work on the demand a block
    at a time, so that its temporaries never grow with the number of rows.

    >>> list(row_blocks(5, 4, cells=8))
    [slice(0, 2, None), slice(2, 4, None), slice(4, 5, None)]
    """
    step = max(1, (BLOCK_CELLS if cells is None else cells) // max(width, 1))
    for lo in range(0, rows, step):
        yield slice(lo, min(lo + step, rows))


def _rows_needing(pre: np.ndarray, post: np.ndarray, rows: np.ndarray, combining: bool) -> np.ndarray:
    """Per row of ``rows``: someone holds or contributes to it, someone needs it and, unless
    combining, someone needing it does not hold it already; a block of rows at a time."""
    want = np.zeros(len(rows), bool)
    for b in row_blocks(len(rows), pre.shape[1]):
        p, q = pre[rows[b]], post[rows[b]]
        want[b] = p.any(axis=1) & (q.any(axis=1) if combining else (q & ~p).any(axis=1))
    return want


def demand_of(instance: Instance) -> Demand:
    """The :class:`Demand` of every collective of ``instance``, in its own time direction.

    Combining chunks are kept as they are (contributors and targets) rather than turned into
    their dual on the transposed topology: "the result some node of ``S`` needs depends on a
    contribution from outside ``S``" is the same condition as the dual's "``V \\ S`` holds a
    chunk nobody in it needs ... " read backwards in time, and it also covers allreduce, which
    has no single dual.
    """
    n = instance.topology.size
    pres, posts, combs, counts, sizes, groups = [], [], [], [], [], []
    for g, coll in enumerate(instance.collectives):
        pre, post = coll.precondition, coll.postcondition
        first, cnt = distinct_rows(pre, post)
        want = _rows_needing(pre, post, first, coll.combining)  # unused chunk ids are in no condition
        first, cnt = first[want], cnt[want]
        if not len(first):
            continue
        whole = len(first) == len(pre)  # every row, in order: no copy
        pres.append(pre if whole else pre[first])
        posts.append(post if whole else post[first])
        combs.append(np.full(len(first), coll.combining))
        counts.append(cnt.astype(np.int64))
        sizes.append(cnt * float(coll.chunk_bytes))
        groups.append(np.full(len(first), g, np.int64))
    if not pres:
        z = np.zeros((0, n), bool)
        return Demand(z, z, np.zeros(0, bool), np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64))
    join = (lambda arrays: arrays[0]) if len(pres) == 1 else np.concatenate
    return Demand(join(pres), join(posts), join(combs), join(counts), join(sizes), join(groups))


def _row_hashes(words: list[np.ndarray]) -> np.ndarray:
    """A 64-bit hash of each row of the unsigned 64-bit matrices ``words`` side by side: each
    word mixed into the state by SplitMix64's finaliser (Steele, Lea and Flood, "Fast splittable
    pseudorandom number generators", OOPSLA 2014)."""
    h = np.full(len(words[0]), 0x9E3779B97F4A7C15, np.uint64)
    for column in (w[:, j] for w in words for j in range(w.shape[1])):
        h ^= column
        h ^= h >> np.uint64(30)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(27)
        h *= np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(31)
    return h


def _packed_words(rows: np.ndarray) -> np.ndarray:
    """Boolean rows as unsigned 64-bit words (their bits packed, zero-padded to whole words)."""
    packed = np.packbits(rows, axis=1)
    if packed.shape[1] % 8:
        packed = np.pad(packed, ((0, 0), (0, -packed.shape[1] % 8)))
    return packed.view(np.uint64)


def distinct_rows(pre: np.ndarray, post: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first row of each distinct pair of rows ``(pre[r], post[r])``, in row order, and how
    many rows equal it. Rows are grouped by a 64-bit hash of their bits, then compared bit for
    bit; should two different rows share a hash, numpy's exact row sort decides instead.

    >>> pre = np.array([[1, 0], [0, 1], [1, 0]], bool)
    >>> [a.tolist() for a in distinct_rows(pre, pre)]
    [[0, 1], [2, 1]]
    """
    if not len(pre):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    words = [_packed_words(pre), _packed_words(post)]
    hashes = _row_hashes(words)
    order = np.argsort(hashes, kind="stable")  # equal hashes in row order
    hashes = hashes[order]
    starts = np.flatnonzero(np.r_[True, hashes[1:] != hashes[:-1]])
    sizes = np.diff(np.r_[starts, len(order)])
    heads = order[np.repeat(starts, sizes)]  # per sorted row: the first row of its hash
    same = np.ones(len(order), bool)
    for w in words:
        for b in row_blocks(len(order), w.shape[1]):
            same[b] &= (w[order[b]] == w[heads[b]]).all(axis=1)
    if same.all():
        first, count = order[starts], sizes
    else:  # a hash shared by different rows
        _, first, count = np.unique(np.concatenate(words, axis=1), axis=0, return_index=True, return_counts=True)
    by_row = np.argsort(first, kind="stable")
    return first[by_row], count[by_row]


def _demand_of_ten(data) -> Demand:
    """The :class:`Demand` of a TEN model's data (its direction: the dual for combining)."""
    need = data.post & ~data.pre
    want = need.any(axis=1) & data.pre.any(axis=1)
    rows = np.flatnonzero(want)
    sizes = np.array([c.chunk_bytes for c in data.instance.collectives])[data.group[rows]]
    return Demand(data.pre[rows], data.post[rows], np.zeros(len(rows), bool), np.ones(len(rows), np.int64),
                  sizes.astype(float), data.group[rows])


@dataclass(frozen=True)
class Arcs:
    """Directed link pairs: ``src -> dst`` with ``cap`` parallel links, pooled ``bandwidth``
    (bytes/s) and latency ``alpha`` (s); ``nodes`` are the live node ids."""

    src: np.ndarray
    dst: np.ndarray
    cap: np.ndarray
    bandwidth: np.ndarray
    alpha: np.ndarray
    nodes: np.ndarray
    size: int

    def entering(self, inside: np.ndarray) -> np.ndarray:
        """Indices of the arcs entering the node set ``inside`` (bool mask over node ids)."""
        return np.flatnonzero(inside[self.dst] & ~inside[self.src])


def instant_out(topology) -> np.ndarray:
    """bool ``[pair]``: the links from a switch to an NPU whose hop is instant (module doc,
    :func:`collsynth.tens.ten.instant_hops`), whose send arrives in the step the chunk reached
    the switch (a path gains no step over them)."""
    return instant_hops(topology)


def arcs_of(topology) -> Arcs:
    """The live link pairs of a topology as :class:`Arcs`."""
    la = topology.link_arrays
    return Arcs(la.src, la.dst, la.count.astype(np.int64), la.bandwidth, la.alpha,
                np.asarray(topology.nodes, np.int64), topology.size)
