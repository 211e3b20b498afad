"""A packed forest as trees plus a pipeline rule (:mod:`collsynth.tens.pipelined_trees`).

The tree-packing producer's schedule (Zhao et al., "ForestColl", arXiv 2402.06787, Section 5:
pipelined trees) is that form expanded; :func:`pipelined` builds the form from a packed
:class:`~collsynth.solvers.packing.packed.Forest`, so the schedule can be verified and priced
(``sync``) in memory of trees x hops instead of trees x hops x pieces.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...instances import Instance
from ...instances.switch_ops import copying_mask
from ...tens.pipelined_trees import PipelinedTrees, price_sync
from .piece_sizes import least_sized

MAX_PIECES = 8192  # the deepest pipeline :func:`least_sync` tries


def pipelined(instance: Instance, forest, pieces: int, hops) -> PipelinedTrees:
    """The trees of ``forest`` (a :class:`~collsynth.solvers.packing.packed.Forest`) cut into
    ``pieces`` pipeline pieces per chunk; ``hops(tree)`` gives a routed tree's ``(src, dst,
    steps below the root)`` (:func:`~collsynth.solvers.packing.tree_hops.tree_hops` with the
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


def least_sync(f: PipelinedTrees, instance: Instance, most: int = MAX_PIECES,
               sizes: bool = True) -> tuple[PipelinedTrees, object]:
    """``(trees, price)`` at the pipeline depth of least ``sync`` price
    (:func:`collsynth.tens.pipelined_trees.price_sync`): powers of two from 1 to ``most``, then
    the two midpoints beside the best (the price is unimodal in the depth: the fill, ``(D - 1)
    / P`` of the bandwidth time, falls as latency, ``(P + D - 1)`` alphas, grows; Zhao et al.,
    NSDI 2025, Section 3.2); with ``sizes``, pieces of unequal size where they price lower
    (:func:`.piece_sizes.least_sized`)."""
    priced: dict = {}

    def at(p: int):
        if p not in priced:
            priced[p] = price_sync(replace(f, pieces=p, cuts=None), instance)
        return priced[p]

    best = min((1 << i for i in range(most.bit_length())), key=lambda p: at(p).total_s)
    for p in (best * 3 // 4, best * 3 // 2):
        if 1 <= p <= most:
            at(p)
    p = min(priced, key=lambda q: priced[q].total_s)
    unequal = least_sized(replace(f, cuts=None), instance, p) if sizes else None
    if unequal is not None and unequal[1].total_s < priced[p].total_s * (1 - 1e-9):
        return unequal
    return replace(f, pieces=p, cuts=None), priced[p]


def at_pieces(f: PipelinedTrees, pieces: int) -> PipelinedTrees:
    """``f`` cut into ``pieces`` pieces per chunk: its own piece edges at its own count, else
    equal pieces (a shallower pipeline for explicit sends)."""
    return f if pieces == f.pieces else replace(f, pieces=int(pieces), cuts=None)


def multicast(f: PipelinedTrees, instance: Instance) -> PipelinedTrees:
    """``f`` with the sends of a tree that leave one node for one switch in one step merged
    into one, where that switch may multicast (an allgather or broadcast, not reversed; the
    switch's ``copy``, else the schedule's ``switch_copy``, true by default as in TE-CCL: Liu
    et al., SIGCOMM 2024, Section 4; :func:`collsynth.instances.switch_ops.copying_mask`): the
    switch forwards the one arrival on each link the routes leave it by, so a root's NIC sends
    a piece once rather than once per box it reaches. Every route keeps its hops after the
    switch; links lose only repeated loads. ``f`` itself where nothing merges or the shifts
    move a copying switch onto one that does not."""
    if f.reversed or f.collective == "alltoall":
        return f
    topo = instance.topology
    copy = copying_mask(topo, True) & np.isin(np.arange(topo.size), list(topo.switches))
    if f.shift is not None and any((copy[np.asarray(perm)] != copy).any() for perm in f.shift):
        return f
    tree = np.repeat(np.arange(len(f.root)), np.diff(f.ptr))
    key = np.stack([tree, f.src, f.dst, f.before])
    into_copy = copy[f.dst]
    _, first = np.unique(key[:, into_copy], axis=1, return_index=True)
    keep = ~into_copy
    keep[np.flatnonzero(into_copy)[first]] = True
    if keep.all():
        return f
    ptr = np.r_[0, np.cumsum(np.bincount(tree[keep], minlength=len(f.root)))]
    return replace(f, ptr=ptr, src=f.src[keep], dst=f.dst[keep], before=f.before[keep])


def cheapest(candidates: list, instance: Instance, into_copies: bool, pieces: int | None):
    """``(forest, index)``: the candidate of least ``sync`` price (sends into copying switches
    merged where ``into_copies``: :func:`multicast`), each at ``pieces`` or at its depth of least price
    (:func:`least_sync`); None candidates are left out."""
    best = None
    for i, trees in ((i, c) for i, c in enumerate(candidates) if c is not None):
        if into_copies:
            trees = multicast(trees, instance)
        if pieces:
            trees = replace(trees, pieces=pieces)
            price = price_sync(trees, instance)
        else:
            trees, price = least_sync(trees, instance)
        if best is None or price.total_s < best[1] * (1 - 1e-9):
            best = (trees, price.total_s, i)
    return best[0], best[2]
