"""Each forest's pipeline depth: the fill's extra pieces at alpha 0, the latency choice otherwise.

Zhao et al. ("ForestColl: Throughput-Optimal Collective Communications on Heterogeneous Network
Fabrics", arXiv 2402.06787, Section 5) pipeline every tree at one depth. :func:`pick` keeps that
depth (:func:`.emission.auto_pieces`) for an allgather or broadcast alone at alpha 0; a
reduction's forest is first measured against one packed tree a shard on FIFO links, and a
rooted reduce's against its greedy packing grown depth-first (:mod:`.fifo_reduce`), and
a reduction's or an allreduce's allgather's fill is priced with ring trees both ways and unequal
pieces, taking more pieces where the send budget's leave it over :data:`.fill.TARGET`
(:func:`filled`, :mod:`.fill`); so is an allgather's or broadcast's alone, in ring trees, where its fill
at the automatic pieces prices over that target (:func:`alone`); with a latency per step the trees and
depth come from :func:`.latency_choice.latency_pick`.
"""

from __future__ import annotations

from dataclasses import replace

from ...instances import Instance
from ..producers import Options
from . import fifo_reduce, fill, forests
from ...tens.pipelined_trees import price_sync
from .emission import auto_pieces, pipelined, price_pieces
from .latency_choice import latency_pick
from .packed import Forest, optimum_seconds, part_instance
from .run_params import asked_shape, grows_depth_first, objective_models

FILL_SENDS = 32_000_000  # sends a fill over fill.TARGET may take, in all the memory check_sends allows


def pick(instance: Instance, f: Forest, parts: int, alpha: float, options: Options, deadline=None) -> tuple:
    """``(forest, pieces, choice)``: the ``pieces`` parameter when set; else at ``alpha = 0``
    the pieces of :func:`.emission.auto_pieces` (a reduction's forest at alpha 0, unless
    ``trees`` is set, is the one :func:`.fifo_reduce.choose` and, for a rooted reduce,
    :func:`.fifo_reduce.deeper` measure faster, then, unless
    ``pieces`` is set, of it and its ring alternatives, in equal or unequal pieces, the one of
    least ``sync`` price: :func:`filled`; so is an allreduce's allgather, whose shape
    :func:`.forests.by_shape` left unchosen, and, where the ``objective`` includes ``sync``, an
    allgather or broadcast alone in ring trees whose fill is over :data:`.fill.TARGET`: :func:`alone`); else the trees and pieces of
    :func:`.latency_choice.latency_pick`. ``parts``: the forests the collective is made of (an
    allreduce's two share the send budget). ForestColl (Zhao et al., "ForestColl", arXiv
    2402.06787, Section 5) pipelines at one depth; the fill and latency choices are this
    producer's (module doc)."""
    c = instance.collective.chunks_per_node
    if alpha <= 0 and options.params.get("trees") is None:
        if f.transposed:  # FIFO links: measured
            f = fifo_reduction(instance, f, options, deadline, c, parts)
        if not options.params.get("pieces") and (f.transposed or instance.collective.kind != f.kind):
            return filled(instance, f, parts, deadline)
        if not options.params.get("pieces") and "sync" in objective_models(options):
            return alone(instance, f, deadline)
    automatic = auto_pieces(f.trees, c * parts)
    if options.params.get("pieces") or alpha <= 0:
        return f, options.params.get("pieces") or automatic, None
    return latency_pick(instance, f, parts, alpha, options, deadline, automatic)


def filled(instance: Instance, f: Forest, parts: int, deadline=None) -> tuple:
    """``(forest, pieces, None)``: the fill of a reduction or of an allreduce's allgather (whose
    shape :func:`.forests.by_shape` left unpriced): of ``f`` and its ring alternatives (ring trees
    both ways), in equal or unequal pieces, the one of least ``sync`` price at the run's pieces
    (:func:`.fill.choose`), with more pieces, up to :data:`FILL_SENDS`, where those leave it over
    :data:`.fill.TARGET`; the forest carries the candidates priced (``fill``). Pipelined trees
    as Zhao et al. ("ForestColl", arXiv 2402.06787, Section 5) send them."""
    c = instance.collective.chunks_per_node
    g, pieces, priced = fill.choose(instance, [replace(f, alternatives=[]), *f.alternatives],
                                    lambda h: auto_pieces(h.trees, c * parts),
                                    lambda h, p: pipelined(instance, h, p), deadline,
                                    lambda h: auto_pieces(h.trees, c * parts, sends=FILL_SENDS, memory_share=1.0),
                                    optimum_seconds(instance, f))
    return replace(g, fill=priced), pieces, None


def alone(instance: Instance, f: Forest, deadline=None) -> tuple:
    """``(forest, pieces, None)``: an allgather or broadcast alone at alpha 0, ``f`` (its shape
    chosen among finished schedules, :func:`.forests.by_shape`) at the pieces of
    :func:`.emission.auto_pieces` where it is not ring trees, or where the trees form's ``sync``
    price there is within :data:`.fill.TARGET` of its optimum; else ``f`` alone (not its ring
    alternatives) through
    :func:`filled`: unequal pieces where they price lower, more pieces up to :data:`FILL_SENDS`
    while over the target. The send budget caps the pipeline's depth, and the fill
    ((D - 1) / P of the bottleneck's time, Zhao et al., NSDI 2025, Section 3.2) stays where a
    deep forest leaves few pieces (ForestColl's MI250 at eight boxes: 310 pieces, 10 hops deep,
    1.0142x under ``sync``). Only ring trees: a ring link relays what the link before it sent at
    its rate, so its FIFO queue does not empty (:mod:`.rings`) and pieces chosen by the ``sync``
    price keep the ``event`` one, whereas under ``event`` a GPU's own pieces leave before those
    it relays, which starves links below a greedy tree's relays (the greedy root order is chosen
    by that price at equal pieces, :mod:`.orders`): A100 x8's greedy trees so filled priced 1.50x
    the bound under ``event``. Pipelined trees as Zhao et al. ("ForestColl", arXiv 2402.06787,
    Section 5) send them."""
    pieces = auto_pieces(f.trees, instance.collective.chunks_per_node)
    if f.shape != "rings":  # FIFO links starve below relays: pieces chosen by sync could cost event (A100 x8)
        return f, pieces, None
    if price_sync(pipelined(instance, f, pieces), instance).total_s <= optimum_seconds(instance, f) * (1 + fill.TARGET):
        return f, pieces, None
    return filled(instance, replace(f, alternatives=[]), 1, deadline)


def fifo_reduction(instance: Instance, f: Forest, options: Options, deadline, chunks: int,
                   parts: int = 1) -> Forest:
    """:func:`.fifo_reduce.choose` between ``f`` and the one packed tree a shard forest of its
    collective, probed under the ``objective`` parameter's models (FIFO links, where ForestColl's
    pipelined trees, Zhao et al., arXiv 2402.06787, Section 5, starve at relays); for a rooted
    reduce (a reversed broadcast, ``parts`` 1) with the ``growth`` parameter unset, then
    :func:`.fifo_reduce.deeper` between that, the greedy packing grown depth-first and the same
    packed with the links off the bottleneck cut held back (:mod:`.port_slack`)."""
    models = objective_models(options)
    part = part_instance(instance, f)

    def price(g: Forest, pieces: int):
        return price_pieces(part, g, pieces, models)

    def one_tree() -> Forest:
        return forests.forest(instance, f.kind, True, deadline, grows_depth_first(options), 1,
                              shape=asked_shape(options))

    def depth_first() -> Forest:
        return forests.forest(instance, f.kind, True, deadline, True, shape=asked_shape(options))

    def held_back() -> Forest | None:
        return forests.forest(instance, f.kind, True, deadline, True, hold_back=True)

    g = fifo_reduce.choose(f, one_tree, price, models, chunks, deadline)
    if g is not f or parts != 1 or f.kind != "broadcast" or options.params.get("growth"):
        return g  # reduce-scatter (NDv2 x2: the same ratios, 1.8 -> 26 s to generate) is not probed
    return fifo_reduce.deeper(f, depth_first, price, models, chunks, deadline, options.params.get("pieces"), held_back)
