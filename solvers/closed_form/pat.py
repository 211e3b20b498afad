"""NCCL's PAT (Parallel Aggregated Trees) allgather and reduce-scatter, in its small-message
regime: a Bruck allgather with the dimensions taken from the farthest down (``pat``).

Jeaugey, "PAT: a new algorithm for all-gather and reduce-scatter operations at scale",
arXiv 2506.20252, 2025 (NCCL 2.23, ``NCCL_ALGO=PAT``; NVIDIA/nccl ``src/include/collectives.h``
``PatAGAlgorithm`` / ``PatRSAlgorithm``; NCCL runs it with one GPU per node only,
``ncclPatEnable`` in ``src/graph/tuning.cc``). Every rank's block is broadcast along a
binomial tree shifted to it, as in Bruck's allgather (Bruck et al., TPDS 1997), but the
dimensions are taken in reverse: with ``D = ceil(log2 p)`` steps, the step of dimension ``d``
(``d = D - 1`` first, ``0`` last) has rank ``r`` send to ``r - 2^d`` the blocks of ranks
``r + m`` it holds, ``m`` a multiple of ``2^(d+1)`` with ``m + 2^d < p``: the far transfers carry
one block, the last (nearest) ones half of the buffer. A rank thus receives the block of rank
``r + s`` after the hops of the binary digits of ``s``, highest first; every block arrives
exactly once. ``aggregation`` (blocks per transfer; default unbounded) is PAT's limit on its
intermediate buffer: a step that would send more blocks is split into consecutive transfers,
which is how PAT goes linear at large sizes. Reduce-scatter is the time reversal (PAT's
``PatRSAlgorithm`` runs the same trees towards their roots); ranks are the collective's in
order, and a send between ranks that share no link is routed (``routing = shortest-path``).

Closed-form cost (unbounded aggregation; Jeaugey 2025, Section 3; Bruck et al., TPDS 1997):
``ceil(log2 p) alpha + (p - 1)/p * M / B``, the step of dimension ``d`` moving
``ceil((p - 2^d) / 2^(d+1))`` blocks of ``M / p``.

>>> [len(b) for b in pat_blocks(8)]
[1, 2, 4]
>>> [len(b) for b in pat_blocks(6)]
[1, 1, 3]
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ...instances import Instance
from ...tens.schedule import OP_COPY, OP_DEFAULT, OP_REDUCE, Schedule
from ..producers import Outcome, Param, Producer
from .phases import constructed, Phase, build, collective_of

KINDS = ("allgather", "reduce_scatter", "allreduce")


def pat_blocks(p: int) -> list[list[int]]:
    """Per step (dimension ``D - 1`` first), the offsets ``m`` of the blocks rank ``r`` sends:
    those of ranks ``r + m``, to rank ``r - 2^d``."""
    D = max(1, math.ceil(math.log2(p))) if p > 1 else 0
    return [list(range(0, p - (1 << d), 1 << (d + 1))) for d in range(D - 1, -1, -1)]


def pat_allgather_phase(p: int, aggregation: int | None = None) -> Phase:
    """The PAT allgather of the module doc over ranks ``0..p-1``; a step's blocks go in transfers
    of at most ``aggregation`` blocks, one step each."""
    ph = Phase()
    r = np.arange(p)
    step = 0
    for k, offsets in enumerate(pat_blocks(p)):
        d = len(pat_blocks(p)) - 1 - k
        per = aggregation or len(offsets)
        for first in range(0, len(offsets), per):
            step += 1
            for m in offsets[first:first + per]:
                ph.add((r + m) % p, r, (r - (1 << d)) % p, step)
    return ph


def pat_cost(kind: str, p: int, aggregation: int | None = None) -> tuple[int, Fraction]:
    """``(steps, chunk units)``: steps and the sum over steps of the blocks each rank sends (the
    largest per-link load when no two transfers share a link), per phase; allreduce twice."""
    steps = sum(math.ceil(len(b) / (aggregation or len(b))) for b in pat_blocks(p))
    units = Fraction(p - 1)
    return (2 * steps, 2 * units) if kind == "allreduce" else (steps, units)


def pat_schedule(instance: Instance, aggregation: int | None = None) -> Schedule:
    """PAT on ``instance`` (module doc): allgather, reduce-scatter (its reversal), allreduce (both)."""
    coll = collective_of(instance, "pat", KINDS)
    ag = pat_allgather_phase(len(coll.nodes), aggregation)
    phases = {"allgather": [(ag, OP_DEFAULT)], "reduce_scatter": [(ag.reversed(), OP_DEFAULT)],
              "allreduce": [(ag.reversed(), OP_REDUCE), (ag, OP_COPY)]}[coll.kind]
    return build(instance, phases, name="pat", meta={"aggregation": aggregation})


def _run(instance: Instance, options) -> Outcome:
    from .classics import _link_costs

    agg = dict(getattr(options, "params", {}) or {}).get("aggregation")
    sched = pat_schedule(instance, agg)
    coll = instance.collective
    p = len(coll.nodes)
    steps, units = pat_cost(coll.kind, p, agg)
    alpha, bw = _link_costs(instance)
    T_L, T_B = steps * alpha, float(units) * coll.message_bytes / p / bw
    cf = {"steps": steps, "T_B_chunks": str(units * coll.chunks_per_node), "T_L_s": T_L, "T_B_s": T_B,
          "total_s": T_L + T_B}
    return constructed(sched, cf)


PRODUCERS = [Producer(
    "pat", "closed-form", _run,
    "NCCL's PAT allgather/reduce-scatter: Bruck with the far dimensions first, log2 p steps "
    "(Jeaugey, arXiv 2506.20252)",
    params=(Param("aggregation", int, None, "blocks per transfer at most (default: unbounded)", low=1),))]
