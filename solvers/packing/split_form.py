"""The capacity split's allreduce kept as trees plus the pipeline rule, verified and priced so.

Where an allreduce's halves are packed each on its share of every link (:mod:`.capacity_split`;
Zhao et al., "ForestColl", arXiv 2402.06787, Sections 4-5: a reduce-scatter and an allgather of
pipelined trees) the two run side by side, the allgather of a piece following its reduction
(:func:`.overlap.overlapped`). Listed as sends, the pair is its trees' hops times the pieces: on
DGX-2 x2 (two deep forests of 21 trees a shard) 8.6 M sends at 200 pieces, verified at 7.2 us a
send. Kept as :class:`~collsynth.tens.pipelined_overlap.OverlappedAllreduce` (the trees, the
pieces, the allgather's shift and mirror), it is verified and priced under ``sync`` from the
trees; only the ``event`` price simulates its expansion. The expansion is the very schedule the
explicit path emits (``tests/test_pipelined_overlap.py``), which ``--param form=explicit`` keeps.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from ...limits import require
from ...tens import cost_models
from ...tens import pipelined_overlap as form
from ...tens.pipelined_overlap import OverlappedAllreduce
from .emission import refuse_small_pieces

ITEM_BYTES = 256  # a tree's piece while the allgather is placed and verified (a few int64 columns and their sorts)
SHAPE = "greedy"  # the shares' forests: the greedy packing in id order, without the root-order search (DGX-2 x2, 1 GB:
# no two-level trees fit either share, and the search, 17 s of CPU verifying and pricing two orders' explicit sends,
# kept id order: the pair prices the same, 18.122 ms event at 25 pieces)


@dataclass(frozen=True)
class Priced:
    """The prices a producer computed of a schedule kept as trees (model name -> Cost): handed
    to the pipeline as :attr:`collsynth.solvers.producers.Outcome.prices`, which it takes for
    the trees once they verify there."""

    costs: dict


def overlapped(instance, pair, pieces, pipelined) -> OverlappedAllreduce:
    """The pair of forests (reduce-scatter, allgather; :func:`.overlap.aligned`) at ``pieces``
    each as the overlapped form, the allgather moved by the least shift that keeps every piece
    after its reduction, mirrored where that shifts it less (in place on a tie), as
    :func:`.overlap.overlapped` places it; ``pipelined(instance, forest, pieces)`` gives a
    forest's trees (:func:`.producer.pipelined`), its own piece edges where it has them for
    ``pieces`` (as :func:`.producer.emit` cuts it)."""
    return _placed(*_halves(instance, pair, pieces, pipelined))


def _halves(instance, pair, pieces, pipelined) -> list:
    """Each forest of the pair as trees at its pieces (:func:`overlapped`)."""
    halves = []
    for f, p in zip(pair, pieces):
        trees = pipelined(instance, f, p)
        cuts = getattr(f, "cuts", None)
        halves.append(replace(trees, cuts=np.asarray(cuts)) if cuts and len(cuts) == p + 1 else trees)
    return halves


def _placed(rs, ag) -> OverlappedAllreduce:
    """The halves with the allgather at its least shift, mirrored where that shifts it less."""
    shifts = [(form.least_shift(rs, ag, mirror), mirror) for mirror in (False, True)]
    shift, mirror = min(shifts, key=lambda s: s[0])
    return OverlappedAllreduce(rs, ag, shift, mirror)


def price(instance, pair, pieces, models: tuple, kept, pipelined) -> dict | None:
    """The times under ``models`` of the split pair at ``pieces`` in the overlapped form
    (:func:`overlapped`), verified first (None when it does not verify or a piece is under a
    byte: never chosen): ``sync`` from the trees, the others on its expansion; offered to
    ``kept`` (:class:`.incumbent.Kept`) with those prices (:class:`Priced`)."""
    t = time.perf_counter()
    halves = _halves(instance, pair, pieces, pipelined)
    if _smallest_piece(halves, instance) < 1.0:
        return None
    f = _placed(*halves)
    if form.verify(f, instance) is not None:
        return None
    costs = {"sync": form.price_sync(f, instance)}
    others = [m for m in models if m != "sync"]
    if others:
        sched = form.explicit(f, instance)
        costs.update({m: cost_models.price(sched, instance, m) for m in others})
    got = {m: costs[m].total_s for m in models}
    if kept is not None:
        kept.offer(pair, pieces, f, got, f.sends, time.perf_counter() - t, 0.0,
                   Priced({m: c for m, c in costs.items() if m != "sync"}))
    return got


def returned(instance, pair, pieces, pipelined) -> OverlappedAllreduce:
    """The split pair at ``pieces`` as the run returns it (:func:`overlapped`); a piece under a
    byte is refused (:class:`~collsynth.InputError` on ``collective.message_bytes``), as the
    explicit sends' are, and so are pieces whose placing would not fit the memory budget
    (:func:`collsynth.limits.require`, :data:`ITEM_BYTES` a tree's piece)."""
    halves = _halves(instance, pair, pieces, pipelined)
    items = sum(len(h.root) * h.chunks_per_root * h.pieces for h in halves)
    require(items * ITEM_BYTES, "--param pieces", f"{items:,} tree pieces placed and verified")
    refuse_small_pieces(instance, _smallest_piece(halves, instance), "pieces (--param pieces)")
    return _placed(*halves)


def _smallest_piece(halves, instance) -> float:
    """Bytes of the smallest piece either half (trees) sends."""
    chunk = instance.collective.chunk_bytes
    out = float("inf")
    for h in halves:
        e = h.edges
        widths = (h.hi - h.lo).astype(np.float64)
        if len(widths):
            out = min(out, float(widths.min()) / h.k * float(np.diff(e).min()) / float(e[-1]) * chunk)
    return out


def outcome_fields(verdict) -> dict:
    """The :class:`~collsynth.solvers.producers.Outcome` fields a kept verdict fills: the
    producer's prices of trees (:class:`Priced`), else the certified verdict of explicit sends."""
    return {"prices": dict(verdict.costs)} if isinstance(verdict, Priced) else {"certified": verdict}
