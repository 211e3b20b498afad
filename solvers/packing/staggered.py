"""A rooted forest whose trees differ in depth, pipelined so that every tree is busy to the last
step: a tree ``d`` hops deep takes ``P + D - d`` pieces where the deepest, ``D`` hops, takes
``P`` (:func:`emit`).

Pipelined down a tree ``d`` hops deep in ``n`` pieces, a broadcast takes ``n + d - 1`` steps
(Thakur et al., "Optimization of Collective Communication Operations in MPICH", IJHPCA 2005,
Section 4); a reduce is its time reversal (Zhao et al., "Efficient Direct-Connect Topologies for
Collective Communications", NSDI 2025, Appendix A). ForestColl's pipeline (Zhao et al.,
"ForestColl", arXiv 2402.06787, Section 5; :func:`.emission.emit`) cuts every tree into the same
``P`` pieces, so in its ``S = P + D - 1`` steps a shallower tree idles ``D - d`` of them. Here
the trees keep their routes and each piece is the same share of a tree's width, but tree ``t``
(``d_t`` deep, ``w_t`` units wide) takes ``n_t = P + D - d_t`` pieces, its share of the buffer
``w_t n_t / sum_s w_s n_s``: every link carries in every step what it carries in the steps of
ForestColl's pipeline where all its trees are busy, so the synchronous price (Zhao et al., NSDI
2025, Section 3.2) of ``S`` steps is ``S (alpha + T k / sum_t w_t n_t)``, ``T`` the trees'
bandwidth time and ``k = sum_t w_t``, against ``S (alpha + T / P)``.

TACOS's ring x complete x switch 4x4x2 (1 GB to GPU 0, 100 GB/s links, 0.5 us): the tree
entering the root through its pair's switch is 7 hops deep, the five through its ring and
complete links 6 (:func:`.shallow_rooted.staggered_trees`), so ``sum_t n_t = 6 S - 31`` against
``6 S - 36``: at its best ``S`` the ``sync`` price falls from 1.8111 ms to 1.8005 ms.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...tens.pipelined_trees import listed
from ...tens.schedule import Schedule, from_arrays, reverse


def tree_depths(before: np.ndarray, ptr: np.ndarray) -> list[int]:
    """Per tree (hops ``ptr[t]:ptr[t+1]``), the steps from its root's send to its deepest
    arrival: one more than its hops' largest ``before``.

    >>> tree_depths(np.array([0, 1, 2, 0, 1]), np.array([0, 3, 5]))
    [3, 2]
    """
    return [int(before[a:b].max()) + 1 if b > a else 0 for a, b in zip(ptr[:-1], ptr[1:])]


def piece_counts(depths: list[int], pieces: int) -> list[int]:
    """Per tree the pieces it takes (module doc): ``pieces`` for the deepest, one more a hop
    less deep.

    >>> piece_counts([7, 6, 6], 100)
    [100, 101, 101]
    """
    deepest = max(depths)
    return [pieces + deepest - d for d in depths]


def emit(trees, pieces: int) -> Schedule | None:
    """The sends of a rooted forest's ``trees`` (its hops, :func:`.emission.pipelined`; a
    broadcast, or a reduce as its time reversal) with the deepest trees cut into ``pieces``
    pieces and each shallower one into one more a hop (module doc): piece ``q`` of a tree over a
    hop ``b`` steps below the root in step ``q + b + 1``, the root's data one chunk. None where
    the collective has more than one chunk a root (the pieces of a chunk would then straddle
    chunks).

    Two chains from GPU 0 over a ring of three, 0 -> 1 -> 2 and 0 -> 2 (one hop): the chain
    takes 2 pieces of a fifth each, the single hop 3 pieces (2 + 2 - 1), all done in 3 steps:

    >>> from collsynth.instances import make_instance
    >>> from collsynth.instances.generators import build
    >>> from collsynth.solvers.packing.compact import pipelined
    >>> from collsynth.solvers.packing.tree_hops import tree_hops
    >>> from collsynth.solvers.packing.trees import RoutedTree
    >>> from types import SimpleNamespace as N
    >>> inst = make_instance(build("ring", {"nodes": 3}), "broadcast", message_bytes=5e6, root=0)
    >>> f = N(kind="broadcast", k=2, transposed=False,
    ...       trees=[RoutedTree(0, 0, 1, ((0, 1), (1, 2))), RoutedTree(0, 1, 2, ((0, 2),))])
    >>> s = emit(pipelined(inst, f, 1, tree_hops), 2)
    >>> s.num_steps, s.denom, sorted((int(a), int(b), int(lo), int(t)) for a, b, lo, t in zip(s.src, s.dst, s.lo, s.step))
    (3, 5, [(0, 1, 0, 1), (0, 1, 1, 2), (0, 2, 2, 1), (0, 2, 3, 2), (0, 2, 4, 3), (1, 2, 0, 2), (1, 2, 1, 3)])
    """
    pt = listed(trees)
    if pt.chunks_per_root != 1:  # one chunk a root, cut into the pieces
        return None
    counts = piece_counts(tree_depths(pt.before, pt.ptr), pieces)
    width = (pt.hi - pt.lo).astype(np.int64)
    share = width * np.asarray(counts, np.int64)  # units of the buffer: a piece of tree t is width[t] of them
    start = np.r_[0, np.cumsum(share)]
    cols = {"chunk": [], "lo": [], "src": [], "dst": [], "step": [], "hi": []}
    for t, n in enumerate(counts):  # listed by tree, hop, piece (as the ForestColl pipeline lists them)
        hops = slice(pt.ptr[t], pt.ptr[t + 1])
        q = np.arange(n, dtype=np.int64)
        h = pt.ptr[t + 1] - pt.ptr[t]
        cols["src"].append(np.repeat(pt.src[hops], n))
        cols["dst"].append(np.repeat(pt.dst[hops], n))
        cols["step"].append((pt.before[hops].astype(np.int64)[:, None] + q[None, :] + 1).ravel())
        cols["lo"].append(np.tile(start[t] + q * width[t], h))
        cols["hi"].append(np.tile(start[t] + (q + 1) * width[t], h))
        cols["chunk"].append(np.zeros(h * n, np.int64))
    arr = {name: np.concatenate(v) if v else np.zeros(0, np.int64) for name, v in cols.items()}
    if not pt.reversed:  # in step order (stable), as the pipeline lists a broadcast
        order = np.argsort(arr["step"], kind="stable")
        arr = {name: v[order] for name, v in arr.items()}
    sched = from_arrays("broadcast", pt.nodes, pt.chunks, denom=int(start[-1]), **arr)
    if not pt.reversed:
        return sched
    return replace(reverse(sched), link_order="program")  # FIFO links keep the reversal's order (.emission)
