"""A packed forest as trees plus a pipeline rule (:mod:`collsynth.tens.pipelined_trees`).

The tree-packing producer's schedule (Zhao et al., "ForestColl", arXiv 2402.06787, Section 5:
pipelined trees) is that form expanded; :func:`pipelined` builds the form from a packed
:class:`~collsynth.solvers.packing.producer.Forest`, so the schedule can be verified and priced
(``sync``) in memory of trees x hops instead of trees x hops x pieces.
"""

from __future__ import annotations

import numpy as np

from ...instances import Instance
from ...tens.pipelined_trees import PipelinedTrees


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
