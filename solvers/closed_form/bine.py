"""Bine (binomial negabinary) trees and butterflies (``bine``): allgather, reduce-scatter and
allreduce on the Bine butterfly, broadcast and reduce on the Bine tree.

De Sensi, Pasqualoni, Piarulli, Bonato, Ba, Turisini, Domke and Hoefler, "Bine Trees: Enhancing
Collective Operations by Optimizing Communication Locality", SC'25 (arXiv 2508.17311). Bine
trees keep the binomial tree's and the butterfly's ``log2 p`` steps but pick the peers by the
negabinary distances ``rho(s) = sum_{i<=s} (-2)^i`` (1, -1, 3, -5, 11, ...): at step ``s`` rank
``r`` talks to ``r + rho(s)`` if ``r`` is even, ``r - rho(s)`` if odd (mod p; the peers of
Swing, De Sensi et al., NSDI 2024, Eq. 2, :func:`.swing.pi`), so a peer is at most about
``p/3`` ranks away instead of ``p/2``, which cuts the traffic on the global links of
rank-ordered networks.

- **Allgather**: distance-halving butterfly: steps ``s = D - 1, ..., 0`` (``D = log2 p``),
  each rank sending its peer every block it holds; the reach sets of the two peers are
  disjoint, so every block arrives once (the transfer of ``p/2`` blocks is the last, at the
  nearest distance). **Reduce-scatter**: its time reversal (distance doubling); **allreduce**:
  both. On a flat rank space this moves the same blocks between the same pairs as Swing's
  bandwidth-optimal 1D pattern (``swing-bw``); Bine's contiguous buffer layout is a runtime
  matter the cost models do not see.
- **Broadcast**: the Bine tree: in the steps ``s = D - 1, ..., 0`` every rank holding the
  buffer sends it to its peer (relative to the root); **reduce** is its reversal.

``p`` must be a power of two (the paper's non-power-of-two schemes are not built here). Ranks
are the collective's in order; a send between ranks that share no link is routed.

Closed-form cost (the paper's, as the binomial tree's and butterfly's, Thakur et al., IJHPCA
2005): allgather / reduce-scatter ``log2 p alpha + (p - 1)/p M / B`` (allreduce twice);
broadcast / reduce ``log2 p (alpha + M / B)``.

>>> [len(b) for b in bine_allgather_held(8)]
[2, 4, 8]
>>> bine_tree_steps(8, 0)
[[(0, 3)], [(0, 7), (3, 4)], [(0, 1), (3, 2), (7, 6), (4, 5)]]
"""

from __future__ import annotations

import numpy as np

from ...instances import Instance
from ...tens.schedule import OP_COPY, OP_DEFAULT, OP_REDUCE, Schedule
from ..producers import Outcome, Producer, Unsupported
from .phases import constructed, ALL, Phase, build, collective_of
from .swing import pi

KINDS = ("allgather", "reduce_scatter", "allreduce", "broadcast", "reduce")


def _log2(p: int) -> int:
    if p < 2 or p & (p - 1):
        raise Unsupported(f"bine is built for a power-of-two number of ranks, not {p}")
    return p.bit_length() - 1


def bine_allgather_held(p: int) -> list[np.ndarray]:
    """After each step of the distance-halving Bine allgather, the blocks every rank holds
    (array ``p x 2^(k+1)`` after the k-th step)."""
    held = np.arange(p)[:, None]
    out = []
    for s in range(_log2(p) - 1, -1, -1):
        peer = np.array([pi(r, s, p) for r in range(p)])
        held = np.concatenate([held, held[peer]], axis=1)
        out.append(held[0])
    return out


def bine_allgather_phase(p: int) -> Phase:
    """The distance-halving Bine butterfly allgather over ranks ``0..p-1`` (module doc)."""
    ph = Phase()
    held = np.arange(p)[:, None]
    for k, s in enumerate(range(_log2(p) - 1, -1, -1)):
        peer = np.array([pi(r, s, p) for r in range(p)])
        n = held.shape[1]
        ph.add(held.ravel(), np.repeat(np.arange(p), n), np.repeat(peer, n), k + 1)
        held = np.concatenate([held, held[peer]], axis=1)
    return ph


def bine_tree_steps(p: int, root: int) -> list[list[tuple[int, int]]]:
    """The Bine tree broadcast from ``root``: per step, the ``(sender, receiver)`` pairs."""
    have = [root]
    out = []
    for s in range(_log2(p) - 1, -1, -1):
        pairs = [(r, (pi((r - root) % p, s, p) + root) % p) for r in have]
        out.append(pairs)
        have = have + [b for _, b in pairs]
    return out


def bine_schedule(instance: Instance) -> Schedule:
    """Bine on ``instance`` (module doc)."""
    coll = collective_of(instance, "bine", KINDS)
    p = len(coll.nodes)
    if coll.kind in ("broadcast", "reduce"):
        root = coll.nodes.index(coll.root) if coll.root is not None else 0
        ph = Phase()
        for k, pairs in enumerate(bine_tree_steps(p, root)):
            src, dst = zip(*pairs)
            ph.add(ALL, list(src), list(dst), k + 1)
        return build(instance, [(ph.reversed() if coll.kind == "reduce" else ph, OP_DEFAULT)], name="bine")
    ag = bine_allgather_phase(p)
    phases = {"allgather": [(ag, OP_DEFAULT)], "reduce_scatter": [(ag.reversed(), OP_DEFAULT)],
              "allreduce": [(ag.reversed(), OP_REDUCE), (ag, OP_COPY)]}[coll.kind]
    return build(instance, phases, name="bine")


def bine_cost(kind: str, p: int, message_bytes: float, alpha: float, bandwidth: float) -> dict:
    """The closed form of the module doc: ``steps``, ``T_L_s``, ``T_B_s``, ``total_s``.

    >>> bine_cost("allgather", 8, 8.0, 1.0, 1.0)["total_s"]
    10.0
    """
    D = _log2(p)
    if kind in ("broadcast", "reduce"):
        steps, volume = D, D * message_bytes
    else:
        twice = 2 if kind == "allreduce" else 1
        steps, volume = twice * D, twice * (p - 1) * message_bytes / p
    T_L, T_B = steps * alpha, volume / bandwidth
    return {"steps": steps, "T_L_s": T_L, "T_B_s": T_B, "total_s": T_L + T_B}


def _run(instance: Instance, options) -> Outcome:
    from .classics import _link_costs

    sched = bine_schedule(instance)
    coll = instance.collective
    cf = bine_cost(coll.kind, len(coll.nodes), coll.message_bytes, *_link_costs(instance))
    return constructed(sched, cf)


PRODUCERS = [Producer(
    "bine", "closed-form", _run,
    "Bine trees and butterflies: log2 p steps, negabinary peers (De Sensi et al., SC'25, arXiv 2508.17311)")]
