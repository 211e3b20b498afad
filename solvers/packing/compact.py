"""A packed forest as trees plus a pipeline rule (:mod:`collsynth.tens.pipelined_trees`).

The tree-packing producer's schedule (Zhao et al., "ForestColl", arXiv 2402.06787, Section 5:
pipelined trees) is that form expanded; :func:`pipelined` builds the form from a packed
:class:`~collsynth.solvers.packing.producer.Forest`, so the schedule can be verified and priced
(``sync``) in memory of trees x hops instead of trees x hops x pieces.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...instances import Instance
from ...tens.pipelined_trees import PipelinedTrees, price_sync

MAX_PIECES = 8192  # the deepest pipeline :func:`least_sync` tries


def pipelined(instance: Instance, forest, pieces: int, hops) -> PipelinedTrees:
    """The trees of ``forest`` (a :class:`~collsynth.solvers.packing.producer.Forest`) cut into
    ``pieces`` pipeline pieces per chunk; ``hops(tree)`` gives a routed tree's ``(src, dst,
    steps below the root)`` (:func:`~collsynth.solvers.packing.producer._tree_hops` with the
    topology's instant hops)."""
    coll = instance.collective
    kind = {("allgather", False): "allgather", ("allgather", True): "reduce_scatter",
            ("broadcast", False): "broadcast", ("broadcast", True): "reduce"}[(forest.kind, forest.transposed)]
    cols: tuple[list, list, list] = ([], [], [])
    ptr = [0]
    for tree in forest.trees:
        for col, values in zip(cols, hops(tree)):
            col.extend(values)
        ptr.append(len(cols[0]))
    src, dst, before = (np.asarray(c, dtype=np.int64) for c in cols)
    return PipelinedTrees(kind, coll.size, coll.num_chunks, coll.chunks_per_node, int(pieces), int(forest.k),
                          np.array([t.root for t in forest.trees], np.int64),
                          np.array([t.lo for t in forest.trees], np.int64),
                          np.array([t.hi for t in forest.trees], np.int64), np.asarray(ptr, np.int64), src, dst, before)


def least_sync(f: PipelinedTrees, instance: Instance, most: int = MAX_PIECES) -> tuple[PipelinedTrees, object]:
    """``(trees, price)`` at the pipeline depth of least ``sync`` price
    (:func:`collsynth.tens.pipelined_trees.price_sync`): powers of two from 1 to ``most``, then
    the two midpoints beside the best (the price is unimodal in the depth: the fill, ``(D - 1)
    / P`` of the bandwidth time, falls as latency, ``(P + D - 1)`` alphas, grows; Zhao et al.,
    NSDI 2025, Section 3.2)."""
    priced: dict = {}

    def at(p: int):
        if p not in priced:
            priced[p] = price_sync(replace(f, pieces=p), instance)
        return priced[p]

    best = min((1 << i for i in range(most.bit_length())), key=lambda p: at(p).total_s)
    for p in (best * 3 // 4, best * 3 // 2):
        if 1 <= p <= most:
            at(p)
    p = min(priced, key=lambda q: priced[q].total_s)
    return replace(f, pieces=p), priced[p]
