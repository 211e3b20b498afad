"""NCCL's trees as NCCL runs them: per channel, a double binary tree across boxes between the
GPUs on that channel's NIC and a chain through each box, pipelined (``nccl-tree``, allreduce).

NCCL (NVIDIA/nccl ``src/graph/trees.cc`` ``ncclGetDtree``, ``src/graph/connect.cc``; Jeaugey,
"Massively Scale Your Deep Learning Training with NCCL 2.4", NVIDIA blog 2019) runs allreduce
on two complementary binary trees across the nodes (Sanders, Speck and Traeff, "Two-tree
algorithms for full bandwidth broadcast, reduction and scan", Parallel Computing 2009): tree 1
is tree 0 mirrored (even node count) or shifted (odd), so every node is a leaf in one of them.
Inside a node each channel's tree is the chain of its intra-node ring from the GPU on its NIC
(search.cc's tree pattern ``NET n -> GPU a -> GPU b -> .. -> GPU x``), and the heads of the
boxes (GPU ``a`` of each) form the double binary tree over NIC ``n``. Every channel carries
``1/C`` of the buffer, half on each tree, cut into ``pieces`` that stream up the tree (reduce)
and then down (broadcast): a rank whose subtree has height ``h`` sends piece ``j`` to its parent
in step ``h + 1 + j``; a rank at depth ``d`` receives piece ``j`` in step ``d + j`` of the
broadcast. A piece is a contiguous ``1/(2 C k)`` of the whole buffer (the
blocks it spans, or a part of one). The channels are those of :mod:`.nccl_channels`; a topology without boxes is one
GPU per box, which is the classic double binary tree over the ranks, pipelined.

Closed-form cost (Sanders et al., Parallel Computing 2009, Section 3, the pipelined binary
tree; per channel, as NCCL's tuning model counts it): ``2 (D + k - 1) (alpha + M / (2 C k) *
s)`` with ``D`` the trees' depth in ranks (boxes' tree depth plus the chain), ``k`` pieces per
tree, ``alpha`` the largest summed latency of one tree edge's route and ``s = max_l n_l / B_l``
over the links the edges cross (:func:`.nccl_channels.hop_costs`).

>>> from collsynth.instances.generators import build
>>> from collsynth.instances import make_instance
>>> s = nccl_tree_schedule(make_instance(build("dgx_h100", {"nodes": 2}), "allreduce"), pieces=2)
>>> s.num_steps, s.meta["channels"], s.meta["depth"]
(18, 8, 8)
"""

from __future__ import annotations

import math

import numpy as np

from ...instances import Instance
from ...tens.schedule import OP_COPY, OP_REDUCE, Schedule
from ..producers import Outcome, Param, Producer
from .nccl_channels import CHANNELS, BOX_KEYS, Channels, channels, hop_costs
from .phases import constructed, Phase, _height, build, collective_of, double_binary_trees

MAX_PIECES = 256  # pieces per tree the automatic choice may take
MAX_SENDS = 4_000_000  # the automatic choice keeps the schedule's sends below this


def tree_parents(ch: Channels, c: int) -> list[list[int]]:
    """The two trees of channel ``c`` as parent lists over ranks (-1 at the root): the boxes'
    double binary tree between the channel's entry GPUs, a chain through each box below its
    entry (one box: the chain and its reversal)."""
    order = ch.orders[c]
    p = sum(len(b) for b in ch.boxes)
    B = len(ch.boxes)
    box_trees = double_binary_trees(B) if B > 1 else [[-1], [-1]]
    out = []
    for t, box_parent in enumerate(box_trees):
        par = [-1] * p
        chain_order = order if B > 1 or t == 0 else order[::-1]
        for b, box in enumerate(ch.boxes):
            ranks = [box[i] for i in chain_order]
            for up, down in zip(ranks, ranks[1:]):
                par[down] = up
            if box_parent[b] >= 0:
                par[ranks[0]] = ch.boxes[box_parent[b]][chain_order[0]]
        out.append(par)
    return out


def tree_channels(instance: Instance, count: int | None) -> Channels:
    """The channels of :mod:`.nccl_channels`, or one GPU per box when the topology names no boxes."""
    meta = instance.topology.meta
    if not any(meta.get(k) for k in BOX_KEYS):
        return Channels([[r] for r in range(len(instance.collective.nodes))], [[0]] * (count or 1))
    return channels(instance, count)


def tree_cost(p_depth: int, C: int, message_bytes: float, alpha: float, s_per_byte: float, pieces: int) -> dict:
    """The closed form of the module doc: ``2 (D + k - 1) (alpha + M / (2 C k) * s)``.

    >>> tree_cost(3, 1, 8.0, 1.0, 1.0, 2)["total_s"]
    24.0
    """
    steps = 2 * (p_depth + pieces - 1)
    T_L, T_B = steps * alpha, steps * message_bytes / (2 * C * pieces) * s_per_byte
    return {"steps": steps, "channels": C, "pieces": pieces, "depth": p_depth, "T_L_s": T_L, "T_B_s": T_B,
            "total_s": T_L + T_B}


def edge_costs(instance: Instance, trees: list[list[int]]) -> tuple[float, float]:
    """:func:`.nccl_channels.hop_costs` of the trees' edges, the larger of the reduction's (up)
    and the broadcast's (down), which never share a step."""
    up = [[(r, par[r]) for r in range(len(par)) if par[r] >= 0] for par in trees]
    a_up, s_up = hop_costs(instance, up)
    a_down, s_down = hop_costs(instance, [[(b, a) for a, b in e] for e in up])
    return max(a_up, a_down), max(s_up, s_down)


def part_segments(q: int, p: int, parts: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Part ``q`` of ``parts`` equal contiguous parts of a buffer of ``p`` blocks, as
    ``(block, lo, hi)`` pieces of blocks over the denominator ``parts``.

    >>> [a.tolist() for a in part_segments(1, 3, 2)]
    [[1, 2], [1, 0], [2, 2]]
    """
    start, end = q * p, (q + 1) * p  # in units of 1/parts of a block
    block = np.arange(start // parts, (end - 1) // parts + 1)
    lo = np.maximum(start - block * parts, 0)
    hi = np.minimum(end - block * parts, parts)
    return block, lo, hi


def nccl_tree_schedule(instance: Instance, count: int | None = None, pieces: int | None = None) -> Schedule:
    """NCCL's channel trees on an allreduce instance (module doc): ``count`` channels (default
    one per NIC), ``pieces`` per tree (default: the closed form's best within :data:`MAX_SENDS`)."""
    coll = collective_of(instance, "nccl-tree", ("allreduce",))
    ch = tree_channels(instance, count)
    C, p = len(ch.orders), len(coll.nodes)
    trees = [par for c in range(C) for par in tree_parents(ch, c)]
    shapes = [_height(par) for par in trees]
    depth = max(max(d) for d, _ in shapes)
    if pieces is None:
        alpha, s = edge_costs(instance, trees)
        budget = max(1, MAX_SENDS // max(1, 2 * len(trees) * (p - 1) * coll.chunks_per_node) - p)
        options = [1 << i for i in range(int(math.log2(MAX_PIECES)) + 1) if 1 << i <= budget] or [1]
        pieces = min(options, key=lambda k: tree_cost(depth, C, coll.message_bytes, alpha, s, k)["total_s"])
    parts = len(trees) * pieces
    up, down = Phase(parts), Phase(parts)
    for t, (par, (dep, height)) in enumerate(zip(trees, shapes)):
        for k in range(pieces):
            block, lo, hi = part_segments(t * pieces + k, p, parts)
            for r in range(p):
                if par[r] >= 0:
                    up.add(block, r, par[r], height[r] + 1 + k, lo, hi)
                    down.add(block, par[r], r, dep[r] + k, lo, hi)
    up.steps, down.steps = depth + pieces - 1, depth + pieces - 1
    return build(instance, [(up, OP_REDUCE), (down, OP_COPY)], name="nccl-tree",
                 meta={"channels": C, "pieces": pieces, "depth": depth, "trees": trees})


def _run(instance: Instance, options) -> Outcome:
    params = dict(getattr(options, "params", {}) or {})
    sched = nccl_tree_schedule(instance, params.get("channels"), params.get("pieces"))
    trees = sched.meta["trees"]
    alpha, s = edge_costs(instance, trees)
    cf = tree_cost(sched.meta["depth"], sched.meta["channels"], instance.collective.message_bytes, alpha, s,
                   sched.meta["pieces"])
    return constructed(sched, cf)


PRODUCERS = [Producer(
    "nccl-tree", "closed-form", _run,
    "NCCL's trees: per channel a double binary tree across boxes on its NIC and a chain in each box, pipelined "
    "(NCCL trees.cc; Sanders et al., Parallel Computing 2009)",
    params=(CHANNELS,
            Param("pieces", int, None, "pieces per tree (default: the closed form's best)", low=1, high=4096)))]
