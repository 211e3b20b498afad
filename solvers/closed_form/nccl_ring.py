"""NCCL's rings as NCCL runs them: one ring per channel, each entering and leaving its box on
its own NIC, the data split over the channels (``nccl-ring``).

NCCL (NVIDIA/nccl ``src/graph/search.cc``, ``rings.cc``; Jeaugey, "Massively Scale Your Deep
Learning Training with NCCL 2.4", NVIDIA blog 2019) runs allgather, reduce-scatter and
allreduce as one ring per channel, each channel on a different NIC
(:mod:`.nccl_channels`), each channel moving its ``1/C`` share of every chunk round its
ring; broadcast and reduce are a pipelined chain from the root along each channel's ring
(NCCL's ``ncclPatternPipelineFrom`` / ``PipelineTo``), each channel's share cut into ``pieces``.
Where the topology has one NIC path (one box, a topology without boxes) this is the classic
``ring`` of :mod:`.classics`.

Closed-form cost (Thakur, Rabenseifner and Gropp, IJHPCA 2005, ring allgather; Patarasuk and
Yuan, JPDC 2009, ring allreduce; per channel, as NCCL's tuning model ``src/graph/tuning.cc``
counts bandwidth per channel): ``steps * (alpha + M / (p C) * s)`` with ``steps = p - 1``
(``2 (p - 1)`` for allreduce), i.e. each channel moves ``(p - 1)/p * M / C`` per phase; the
chain ``(p - 1 + k - 1) * (alpha + M / (C k) * s)`` with ``k`` pieces per channel. ``alpha`` is
the largest summed latency of one hop's route and ``s = max_l n_l / B_l`` the slowest link
share (``n_l`` channels on link ``l`` of bandwidth ``B_l``): on a DGX H100 pair the NIC,
``1 / 50 GB/s`` with one channel per NIC (:func:`.nccl_channels.hop_costs`).

>>> from collsynth.instances.generators import build
>>> from collsynth.instances import make_instance
>>> s = nccl_ring_schedule(make_instance(build("dgx_h100", {"nodes": 2}), "allgather"))
>>> s.num_steps, s.meta["channels"], s.denom
(15, 8, 8)
"""

from __future__ import annotations

import math

import numpy as np

from ...instances import Instance
from ...tens.schedule import OP_COPY, OP_DEFAULT, OP_REDUCE, Schedule
from ..producers import Outcome, Param, Producer
from .nccl_channels import CHANNELS, channels, hop_costs, ring_hops
from .phases import (constructed, ALL, Phase, build, collective_of, ring_allgather_phase,
                     ring_reduce_scatter_phase)

KINDS = ("allgather", "reduce_scatter", "allreduce", "broadcast", "reduce")
MAX_PIECES = 1024  # pieces per channel the chain's automatic choice may take


def chain_phase(order: list[int], denom: int, first: int, pieces: int) -> Phase:
    """Pipelined chain broadcast along ``order`` (its first rank the root): pieces ``first ..
    first + pieces - 1`` (over ``denom``) of the buffer; position ``i`` sends piece ``j`` to
    position ``i + 1`` in step ``i + j + 1`` (``p - 2 + pieces`` steps)."""
    ph = Phase(denom)
    order = np.asarray(order, np.int64)
    for i in range(len(order) - 1):
        j = np.arange(pieces)
        ph.add(ALL, order[i], order[i + 1], i + j + 1, first + j, first + j + 1)
    return ph


def channel_hops(kind: str, rings: list[list[int]]) -> list[list[tuple[int, int]]]:
    """The hops each channel's data crosses: the closed ring, or the chain from the root (a
    reduce runs it backwards)."""
    if kind not in ("broadcast", "reduce"):
        return [ring_hops(r) for r in rings]
    return [[(b, a) if kind == "reduce" else (a, b) for a, b in ring_hops(r, False)] for r in rings]


def _rotated(ring: list[int], root: int) -> list[int]:
    k = ring.index(root)
    return ring[k:] + ring[:k]


def ring_cost(kind: str, p: int, C: int, message_bytes: float, alpha: float, s_per_byte: float,
              pieces: int = 1) -> dict:
    """The closed form of the module doc: ``steps``, ``T_L_s``, ``T_B_s``, ``total_s``.

    >>> ring_cost("allgather", 16, 8, 128.0, 1.0, 1.0)["total_s"]
    30.0
    """
    if kind in ("broadcast", "reduce"):
        steps, share = p - 2 + pieces, message_bytes / (C * pieces)
    else:
        steps, share = (p - 1) * (2 if kind == "allreduce" else 1), message_bytes / (p * C)
    T_L, T_B = steps * alpha, steps * share * s_per_byte
    return {"steps": steps, "channels": C, "pieces": pieces, "T_L_s": T_L, "T_B_s": T_B, "total_s": T_L + T_B}


def best_pieces(p: int, C: int, message_bytes: float, alpha: float, s_per_byte: float) -> int:
    """The pieces per channel (a power of two up to :data:`MAX_PIECES`) of least closed-form chain time."""
    options = [1 << i for i in range(int(math.log2(MAX_PIECES)) + 1)]
    return min(options, key=lambda k: ring_cost("broadcast", p, C, message_bytes, alpha, s_per_byte, k)["total_s"])


def nccl_ring_schedule(instance: Instance, count: int | None = None, pieces: int | None = None) -> Schedule:
    """NCCL's channel rings on ``instance`` (module doc): ``count`` channels (default one per
    NIC), ``pieces`` per channel for broadcast / reduce (default: the closed form's best)."""
    coll = collective_of(instance, "nccl-ring", KINDS)
    ch = channels(instance, count)
    C = len(ch.orders)
    rings = [ch.ring(c) for c in range(C)]
    meta = {"channels": C, "rings": rings}
    if coll.kind in ("broadcast", "reduce"):
        root = coll.nodes.index(coll.root) if coll.root is not None else 0
        rings = [_rotated(ring, root) for ring in rings]
        if pieces is None:
            pieces = best_pieces(len(coll.nodes), C, coll.message_bytes,
                                 *hop_costs(instance, channel_hops(coll.kind, rings)))
        ph = Phase(C * pieces)
        for c, ring in enumerate(rings):
            ph.cols += chain_phase(ring, C * pieces, c * pieces, pieces).cols
        ph.steps = len(coll.nodes) - 2 + pieces
        if coll.kind == "reduce":
            ph = ph.reversed()
        return build(instance, [(ph, OP_DEFAULT)], name="nccl-ring", meta={**meta, "rings": rings, "pieces": pieces})
    ag, rs = Phase(C), Phase(C)
    for c, ring in enumerate(rings):
        ag.cols += ring_allgather_phase(ring, C, c, c + 1).cols
        rs.cols += ring_reduce_scatter_phase(ring, C, c, c + 1).cols
    ag.steps = rs.steps = len(coll.nodes) - 1
    phases = {"allgather": [(ag, OP_DEFAULT)], "reduce_scatter": [(rs, OP_DEFAULT)],
              "allreduce": [(rs, OP_REDUCE), (ag, OP_COPY)]}[coll.kind]
    return build(instance, phases, name="nccl-ring", meta=meta)


def _run(instance: Instance, options) -> Outcome:
    params = dict(getattr(options, "params", {}) or {})
    sched = nccl_ring_schedule(instance, params.get("channels"), params.get("pieces"))
    coll = instance.collective
    rings = sched.meta["rings"]
    alpha, s = hop_costs(instance, channel_hops(coll.kind, rings))
    cf = ring_cost(coll.kind, len(coll.nodes), len(rings), coll.message_bytes, alpha, s, sched.meta.get("pieces", 1))
    return constructed(sched, cf)


PRODUCERS = [Producer(
    "nccl-ring", "closed-form", _run,
    "NCCL's rings: one per channel on its own NIC, the data split over them "
    "(NCCL search.cc; Thakur et al., IJHPCA 2005)",
    params=(CHANNELS,
            Param("pieces", int, None,
                  "pieces per channel of a broadcast / reduce chain (default: the closed form's best)",
                  low=1, high=MAX_PIECES)))]
