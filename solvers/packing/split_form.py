"""The capacity split's allreduce kept as trees plus the pipeline rule, verified and priced so.

Where an allreduce's halves are packed each on its share of every link (:mod:`.capacity_split`;
Zhao et al., "ForestColl", arXiv 2402.06787, Sections 4-5: a reduce-scatter and an allgather of
pipelined trees) the two run side by side, the allgather of a piece following its reduction
(:func:`.overlap.overlapped`). Listed as sends, the pair is its trees' hops times the pieces: on
DGX-2 x2 (two deep forests of 21 trees a shard) 8.6 M sends at 200 pieces, verified at 7.2 us a
send. Kept as :class:`~collsynth.tens.pipelined_allreduce.PipelinedAllreduce` (the trees, the
pieces, the allgather's ``delay`` and ``mirror``), it is verified and priced under ``sync`` from
the trees; only the ``event`` price simulates its expansion. ``--param form=explicit`` lists that
expansion (:func:`listed`), the very schedule: the same sends, verdict and prices
(``tests/test_split_form.py``).

Which delay: the least valid one (:func:`collsynth.tens.allreduce_overlap.least_delay`) starts
every piece's allgather as soon as its reduction allows, but a step or two later can price lower
under ``sync`` (a two-chassis miniature at 3 pieces: 44.06e6 s one step later against 44.78e6 s),
while under ``event`` the declared link order (:func:`collsynth.tens.pipelined_allreduce.joined`)
holds each allgather send behind the reduce-scatter's sends listed before it, so a later delay
prices no lower there (measured: DGX-2 x2 at 25 pieces 18.122 ms at the least delay, 18.721 one
step later; every miniature alike). :func:`placed` takes, among :data:`LATER` delays from each
placement's least (in place and mirrored), the one of least price summed over the run's models:
all priced under ``sync`` from the trees (:func:`collsynth.tens.allreduce_overlap.price_joint`);
the ``event`` price simulated only for the placement of the smaller least delay at that delay
and for the candidates priced lower than it under ``sync`` (none on DGX-2 x2), so that a later
delay costs a simulation only where it can win.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace

import numpy as np

from ...limits import require
from ...tens import allreduce_overlap, cost_models, pipelined_allreduce, pipelined_event
from ...tens.pipelined_allreduce import PipelinedAllreduce
from .emission import refuse_small_pieces, with_header

ITEM_BYTES = 256  # a tree's piece while the allgather is placed and verified (a few int64 columns and their sorts)
SHAPE = "greedy"  # the shares' forests: the greedy packing in id order, without the root-order search (DGX-2 x2, 1 GB:
# no two-level trees fit either share, and the search, 17 s of CPU verifying and pricing two orders' explicit sends,
# kept id order: the pair prices the same, 18.122 ms event at 25 pieces)
LATER = 3  # delays after each placement's least valid one priced under sync (miniatures: the least at most 1 later)


@dataclass(frozen=True)
class Priced:
    """The prices a producer computed of a schedule kept as trees (model name -> Cost): handed
    to the pipeline as :attr:`collsynth.solvers.producers.Outcome.prices`, which it takes for
    the trees once they verify there."""

    costs: dict


def overlapped(instance, pair, pieces, pipelined, models: tuple = ("sync",)) -> PipelinedAllreduce:
    """The pair of forests (reduce-scatter, allgather; :func:`.overlap.aligned`) at ``pieces``
    each as the overlapped form at the delay and placement :func:`placed` takes under
    ``models``; ``pipelined(instance, forest, pieces)`` gives a forest's trees
    (:func:`.producer.pipelined`), its own piece edges where it has them for ``pieces`` (as
    :func:`.producer.emit` cuts it)."""
    return placed(*_halves(instance, pair, pieces, pipelined), instance, models)[0]


def listed(instance, pair, pieces, pipelined, models: tuple = ("sync",)):
    """:func:`overlapped`'s expansion with the header the producer gives explicit sends: what
    ``--param form=explicit`` emits for the split pair."""
    return with_header(pipelined_allreduce.expand(overlapped(instance, pair, pieces, pipelined, models)), instance)


def _halves(instance, pair, pieces, pipelined) -> list:
    """Each forest of the pair as trees at its pieces (:func:`overlapped`)."""
    halves = []
    for f, p in zip(pair, pieces):
        trees = pipelined(instance, f, p)
        cuts = getattr(f, "cuts", None)
        halves.append(replace(trees, cuts=np.asarray(cuts)) if cuts and len(cuts) == p + 1 else trees)
    return halves


def candidates(rs, ag) -> list[PipelinedAllreduce]:
    """The overlapped forms :func:`placed` compares: per placement (in place, then mirrored)
    with a least valid delay, that delay and the :data:`LATER` after it (up to the halves in
    turn); the placement of the smaller least delay first (in place on a tie)."""
    last = allreduce_overlap.last_step(rs)
    least = {}
    for mirror in (False, True):
        try:
            least[mirror] = allreduce_overlap.least_delay(rs, ag, mirror)
        except ValueError:
            continue
    out = []
    for mirror in sorted(least, key=lambda m: (least[m], m)):
        d = least[mirror]
        out += [PipelinedAllreduce(rs, ag, delay, mirror) for delay in range(d, max(d, min(last, d + LATER)) + 1)]
    return out


def placed(rs, ag, instance, models: tuple, simulate=None) -> tuple[PipelinedAllreduce, dict]:
    """``(form, costs)``: the candidate (:func:`candidates`) of least price summed over
    ``models`` (module doc; the first on a tie) and its prices (model name -> Cost; ``sync``
    from the trees, ``event`` simulated on the expansion as the explicit sends' pricing does,
    :func:`collsynth.tens.pipelined_event.price`). The ``event`` price is simulated for the
    first candidate and for those priced lower under ``sync``; where the first's expansion
    does not fit the memory budget (``simulate`` false, or
    :func:`collsynth.tens.pipelined_event.sends_priced` says so) none is, and ``sync`` alone
    chooses. Raises ValueError where no placement has a least valid delay."""
    forms = candidates(rs, ag)
    if not forms:
        raise ValueError("no placement of the allgather has a least valid delay")
    joint_costs = allreduce_overlap.joint_costs(rs, ag, instance)
    sync = [allreduce_overlap.price_joint(rs, ag, f.delay, joint_costs) for f in forms]
    others = [m for m in models if m != "sync"]
    if simulate is None:
        simulate = pipelined_event.sends_priced(forms[0], instance) < sys.maxsize
    if not others or not simulate:
        i = int(np.argmin([s.total_s for s in sync])) if "sync" in models or not others else 0
        return forms[i], {"sync": sync[i]}
    costs = []
    for f, s in zip(forms, sync):
        if costs and s.total_s >= sync[0].total_s:
            costs.append(None)  # cannot win (module doc): not simulated
            continue
        costs.append({"sync": s, **{m: pipelined_event.price(f, instance, as_explicit=True) for m in others}})
    i = min((j for j, c in enumerate(costs) if c is not None), key=lambda j: sum(costs[j][m].total_s for m in models))
    return forms[i], costs[i]


def price(instance, pair, pieces, models: tuple, kept, pipelined) -> dict | None:
    """The times under ``models`` of the split pair at ``pieces`` in the overlapped form
    (:func:`placed`), verified first (None when it does not verify or a piece is under a
    byte: never chosen): ``sync`` from the trees, the others on its expansion; offered to
    ``kept`` (:class:`.incumbent.Kept`) with those prices (:class:`Priced`)."""
    t = time.perf_counter()
    halves = _halves(instance, pair, pieces, pipelined)
    if _smallest_piece(halves, instance) < 1.0:
        return None
    try:
        f, costs = placed(*halves, instance, models, simulate=True)
    except ValueError:
        return None
    if pipelined_allreduce.verify(f, instance) is not None:
        return None
    got = {m: costs[m].total_s for m in models}
    if kept is not None:
        kept.offer(pair, pieces, f, got, f.sends, time.perf_counter() - t, 0.0,
                   Priced({m: c for m, c in costs.items() if m != "sync"}))
    return got


def returned(instance, pair, pieces, pipelined, models: tuple = ("sync",), deadline=None) -> tuple:
    """``(form, prices)``: the split pair at ``pieces`` as the run returns it (:func:`placed`
    under ``models``, the ``event`` price simulated only where the expansion fits the time
    ``deadline`` leaves at the model's rate, as the pipeline would price it, else the delay
    chosen under ``sync``) and the prices it computed besides ``sync`` (:class:`Priced`, taken
    by the pipeline once the form verifies); a piece under a byte is refused
    (:class:`~collsynth.InputError` on ``collective.message_bytes``), as the explicit sends'
    are, and so are pieces whose placing would not fit the memory budget
    (:func:`collsynth.limits.require`, :data:`ITEM_BYTES` a tree's piece)."""
    halves = _halves(instance, pair, pieces, pipelined)
    items = sum(len(h.root) * h.chunks_per_root * h.pieces for h in halves)
    require(items * ITEM_BYTES, "--param pieces", f"{items:,} tree pieces placed and verified")
    refuse_small_pieces(instance, _smallest_piece(halves, instance), "pieces (--param pieces)")
    left = None if deadline is None else deadline.left()
    sends = pipelined_event.sends_priced(PipelinedAllreduce(*halves), instance)
    simulate = sends < sys.maxsize and (left is None or sends <= cost_models.MODELS["event"].rate * left)
    f, costs = placed(*halves, instance, models, simulate)
    return f, Priced({m: c for m, c in costs.items() if m != "sync"})


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
