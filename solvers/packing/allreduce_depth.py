"""An allreduce's pipeline depth where its ``event`` price is the model's own time.

An allreduce kept as two pipelined forests (:class:`~collsynth.tens.pipelined_allreduce.PipelinedAllreduce`)
is priced under ``event`` from its trees (:func:`collsynth.tens.pipelined_event.price`). Its
allgather half's sends read the chunk each node holds, to which the reduce-scatter half brought
one partial per child and piece: overlapping pieces, so each send is offered the whole prefix of
those arrivals and the exact dependency pairs' candidates grow as the square of the depth. Past
their budget the pieces wait by group prefixes, a price that is neither a bound nor the model's
time (``docs/cost-models.md``): DGX H100 x512, 1 GiB, at the halves' ``sync`` depths (47/47
pieces) 5.511 ms by prefixes, 5.371 ms with exact pairs (1.0025x the optimum), which fit the
per-orbit simulation's budget (:data:`collsynth.tens.pipelined_event.ORBIT_PAIR_BUDGET`) but not the
explicit sends'.

:func:`exact_depth` keeps the halves' ``sync`` depths (:func:`collsynth.solvers.packing.compact.least_sync`)
where the pairs fit, else scales both down the ladder :data:`LADDER` to the deepest that fits
and halves the gap to the share above it, each half then cut into pieces of the sizes of least ``sync`` price at that count
(:func:`.piece_sizes.sized`) where they price lower than equal ones. :func:`with_overlap` then
keeps the allgather overlapped with the reduce-scatter (:mod:`collsynth.tens.allreduce_overlap`)
where that lowers the priced sum over the run's models, the rule of the producer's choice.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...tens import pipelined_allreduce, pipelined_event
from ...tens.allreduce_overlap import joint_costs
from ...tens.pipelined_allreduce import PipelinedAllreduce, half_instance
from ...tens.pipelined_trees import PipelinedTrees, price_sync
from .overlap_sizes import least_shifted, overlapped
from .piece_sizes import sized

LADDER = (1, 3 / 4, 1 / 2, 3 / 8, 1 / 4, 3 / 16, 1 / 8, 1 / 16)  # the depths tried, as shares of the sync depths
SIMULATED_SENDS = 8_000_000  # a depth whose per-orbit simulation is more sends than this counts as not fitting, unpriced
# (HPN 2 segments, 1 GiB, 57/57 pieces: 32 M sends, the search timed out at 600 s and 6.7 GiB; kept unsearched, the
# benchmark's row ran out of memory; with the cap 14/14 pieces: event 1.072x but sync 1.249x the optimum)


def exact_depth(f: PipelinedAllreduce, instance) -> tuple[PipelinedAllreduce, dict, object]:
    """``(trees, note, cost)``: ``f`` at the deepest depth whose ``event`` price tracks exact
    dependency pairs and simulates at most :data:`SIMULATED_SENDS` sends (a deeper one is not
    priced; module doc; ``f`` itself where its own does): down the ladder
    :data:`LADDER`, then halving the gap to the last share that did not fit (the pairs grow
    with the depth) while it spans more than a piece; what was tried in ``note``
    (``{"event_exact_depth": [[pieces, exact], ...]}``). ``f`` where no depth fits. ``cost``
    is the ``event`` price of the trees returned (:func:`collsynth.tens.pipelined_event.price`,
    as the pipeline prices them), so that it is not simulated twice: it may be reported only once
    those trees have verified."""
    tried = []

    def at(share: float):
        g = f if share == 1 else PipelinedAllreduce(*(_at(h, instance, share) for h in f.halves))
        if pipelined_event.sends_priced(g, instance) > SIMULATED_SENDS:
            tried.append(["/".join(map(str, g.pieces)), False])
            return None, None
        cost = pipelined_event.price(g, instance)
        tried.append(["/".join(map(str, g.pieces)), bool(cost.extra["exact_pairs"])])
        return (g, cost) if cost.extra["exact_pairs"] else None, cost

    over, own = None, None  # own: f's price (the ladder's first share is 1)
    for share in LADDER:
        best, cost = at(share)
        own = cost if own is None else own
        if best is not None:
            break
        over = share
    else:
        return f, {"event_exact_depth": tried}, own
    under = share
    while over is not None and (over - under) * max(f.pieces) > 1:
        mid = (over + under) / 2
        g, _ = at(mid)
        best, under, over = (g, mid, over) if g is not None else (best, under, mid)
    return best[0], {"event_exact_depth": tried}, best[1]


def _at(h: PipelinedTrees, instance, share: float) -> PipelinedTrees:
    """Half ``h`` at ``share`` of its pieces, unequal sizes where they price lower under ``sync``."""
    pieces = max(1, round(h.pieces * share))
    equal = replace(h, pieces=pieces, cuts=None)
    half = half_instance(instance, h.collective)
    unequal = sized(equal, half, pieces)
    if unequal is not None and price_sync(unequal, half).total_s < price_sync(equal, half).total_s:
        return unequal
    return equal


def at_sync_depths(f: PipelinedAllreduce, instance) -> PipelinedAllreduce:
    """``f`` at its least ``sync`` price found, whatever depth its ``event`` price was simulated
    at (:func:`exact_depth`): each half at its own depth of least ``sync`` price in turn, in
    pieces of equal or unequal sizes (:func:`.compact.least_sync` on the half's instance), then
    the allgather overlapped with the reduce-scatter where that prices lower, at those pieces or
    others (:func:`.overlap_sizes.overlapped`; ``--param objective=sync`` returns the same)."""
    from .compact import least_sync

    return overlapped(PipelinedAllreduce(*(least_sync(replace(h, cuts=None), half_instance(instance, h.collective))[0]
                                           for h in f.halves)), instance)


def with_overlap(f: PipelinedAllreduce, cost, instance, models: tuple, search: bool = True, deadline=None) -> tuple:
    """``(trees, note, cost)``: ``f`` (its halves in turn, ``cost`` its ``event`` price or None)
    or ``f`` with the allgather overlapped with the reduce-scatter (an allreduce as a
    reduce-scatter then an allgather: Zhao et al., "ForestColl", arXiv 2402.06787, Section 4;
    ``sync`` after Zhao et al., NSDI 2025, Section 3.2), whichever has the least sum
    of its prices under ``models`` (``sync``, ``event``; ties to ``f``: the rule of the
    producer's choice, :func:`.producer._least_priced`). The overlap is
    :func:`.overlap_sizes.overlapped`'s (pieces and shift of least ``sync`` price) where
    ``search``, and :func:`.overlap_sizes.least_shifted`'s (at ``f``'s pieces, the only one
    without ``search``). Under ``event`` a candidate is priced per
    link orbit (:func:`collsynth.tens.pipelined_event.price`) and not kept where its simulation
    is over :data:`SIMULATED_SENDS` sends or tracks group prefixes where ``f``'s tracked exact
    pairs; where ``f``'s own is over the cap, ``event`` is left out of the sum. A candidate is
    not simulated where even its ``event`` floor (:func:`event_floor`) would not make its sum
    the least, nor once ``deadline`` has passed (the searches stop there too). ``cost``: the
    kept trees' ``event`` price (None where not priced), to be reported only once they have
    verified; ``note``: ``{"overlap_tried": [[pieces, delay, mirrored, sync s or None, event s
    or None], ...], "overlap_kept": index of the kept}``, and ``"overlap_not_simulated":
    [[pieces, delay, mirrored, sync s], ...]`` where a candidate was left out by its floor."""
    fits = "event" in models and pipelined_event.sends_priced(f, instance) <= SIMULATED_SENDS
    cost = pipelined_event.price(f, instance) if fits and cost is None else cost
    judged = [m for m in models if m == "sync" or fits]
    tried = []

    def priced(g, event) -> float:
        sync = pipelined_allreduce.price_sync(g, instance).total_s if event is not False else None
        tried.append(["/".join(map(str, g.pieces)), g.delay, g.mirror, sync, event.total_s if event else None])
        return sum(sync if m == "sync" else event.total_s for m in judged) if event is not False else None

    best, unsimulated = (priced(f, cost), f, cost, 0), []
    floor = event_floor(f, instance) if fits else 0.0
    for make in ((lambda: overlapped(f, instance, deadline)) if search else None,
                 lambda: least_shifted(f, instance, deadline)):
        if deadline is not None and deadline.expired():
            break
        g = make() if make else f
        if g.delay is None or (deadline is not None and deadline.expired()):
            continue
        sync = pipelined_allreduce.price_sync(g, instance).total_s
        if sum(sync if m == "sync" else floor for m in judged) >= best[0]:  # its sum cannot be the least
            unsimulated.append(["/".join(map(str, g.pieces)), g.delay, g.mirror, sync])
            continue
        event = None  # False: not kept (over the cap, or not the model's own time where f's was)
        if fits:
            event = pipelined_event.price(g, instance) if _fits(g, instance) else False
            if event and cost.extra["exact_pairs"] and not event.extra["exact_pairs"]:
                event = False
        total = priced(g, event)
        if total is not None and total < best[0]:
            best = (total, g, event, len(tried) - 1)
    note = {"overlap_tried": tried, "overlap_kept": best[3]}
    return best[1], {**note, "overlap_not_simulated": unsimulated} if unsimulated else note, best[2]


def event_floor(f: PipelinedAllreduce, instance) -> float:
    """Seconds no ``event`` price of ``f``'s trees (at any pieces, shift or mirror) is below: the
    busiest link's bytes over its bandwidth, which its FIFO serves one message at a time
    (:func:`collsynth.tens.cost.price_event`); per link class, every row of
    :func:`collsynth.tens.allreduce_overlap.joint_costs` (a depth's load of one whole chunk per
    tree) summed over the chunks of a root."""
    rs, ag = f.halves
    (d_rs, d_ag), cost, _ = joint_costs(rs, ag, instance)
    rows = np.r_[np.full(len(d_rs), rs.chunks_per_root), np.full(len(d_ag), ag.chunks_per_root)]
    return float((rows @ cost).max()) if cost.size else 0.0


def _fits(g: PipelinedAllreduce, instance) -> bool:
    """Whether ``g``'s per-orbit ``event`` simulation is at most :data:`SIMULATED_SENDS` sends."""
    return pipelined_event.sends_priced(g, instance) <= SIMULATED_SENDS
