"""Tree packing kept as trees plus the pipeline rule (``form=compact``), not as explicit sends.

Zhao et al. ("ForestColl: Throughput-Optimal Collective Communications on Heterogeneous Network
Fabrics", arXiv 2402.06787, Section 5) pipeline each tree piece by piece; the sends are the
trees expanded by that rule, so a large system's schedule is kept as the trees and the rule
(:class:`~collsynth.tens.pipelined_trees.PipelinedTrees`, memory in trees x hops), which the
pipeline verifies and prices in that form. :func:`kept_as_trees` says when a run keeps that
form, :func:`run_compact` builds it (an allreduce's two halves as one
:class:`~collsynth.tens.pipelined_allreduce.PipelinedAllreduce`).
"""

from __future__ import annotations

import time

from ... import limits
from ...instances import Instance
from ...limits import TimeLimitReached
from ...tens.cut_optimum import FlowTooLarge, flow_net, optimum
from ...tens.pipelined_allreduce import PipelinedAllreduce, half_instance
from ..producers import Options, Outcome, Unsupported
from . import compact, emission, estimate, forests, translated
from .allreduce_depth import exact_depth, with_overlap
from .hierarchical import tier_by_tier
from .overlap_sizes import overlapped
from .packed import plan
from .run_params import OBJECTIVES, asked_shape, grows_depth_first
from .tree_hops import instant_pairs, paired_by_port, summing_switches, tree_hops

EXPLICIT_PIECES = 4  # form=auto keeps the trees as trees where fewer pieces than this of explicit sends fit SEND_BUDGET


def kept_as_trees(instance: Instance, params: dict) -> bool:
    """Whether the run keeps the trees as trees (ForestColl's pipelined trees, Zhao et al.,
    arXiv 2402.06787, Section 5): ``form=compact``, or ``form=auto`` where fewer than
    :data:`EXPLICIT_PIECES` pieces of explicit sends fit :data:`.emission.SEND_BUDGET`."""
    form = params.get("form") or "auto"
    return form == "compact" or (form == "auto" and
                                 estimate.least_sends(instance) * EXPLICIT_PIECES > emission.SEND_BUDGET)


def planned(instance: Instance, params: dict) -> estimate.Build:
    """What the run will build, in the form it keeps (:func:`.estimate.planned`), for the
    size check before the run (:attr:`collsynth.solvers.producers.Producer.estimate`)."""
    return estimate.planned(instance, kept_as_trees(instance, params), asked=params.get("form") == "explicit")


def run_compact(instance: Instance, options: Options) -> Outcome:
    """Tree packing kept as trees plus the pipeline rule (:class:`~collsynth.tens.pipelined_trees.PipelinedTrees`,
    memory in trees x hops; the pipeline verifies and prices it in that form): on identical
    boxes the first box's trees moved by the box shifts (:func:`.translated.translated`), else the
    packed forest (:func:`.forests.forest`); ``pieces`` as given, else the depth of least ``sync`` price
    (:func:`.compact.least_sync`). One forest (allgather, reduce-scatter, broadcast, reduce), or
    an allreduce's two (:class:`~collsynth.tens.pipelined_allreduce.PipelinedAllreduce`: its
    reduce-scatter, then its allgather, each grown on the instance with that kind; without
    ``pieces`` and unless the ``objective`` is ``sync`` alone, at a depth whose ``event`` price tracks
    exact pairs, :func:`.allreduce_depth.exact_depth`, then overlapped where that lowers the priced sum,
    :func:`.allreduce_depth.with_overlap`; with ``sync`` alone the halves' own depths of least
    ``sync`` price, the allgather overlapped with the reduce-scatter where that prices lower,
    :func:`.overlap_sizes.overlapped`; with ``pieces``, those, overlapped at them where that lowers the sum).
    The trees and the pipeline rule are ForestColl's (Zhao et al., "ForestColl", arXiv 2402.06787, Sections 4-5)."""
    coll = instance.collective
    deadline, t0 = options.timer(), time.perf_counter()
    if coll.kind != "allreduce":
        trees, extra = compact_forest(instance, options, deadline)
        return Outcome(trees, "constructed", units="steps", found_by="tree-packing (trees + pipeline rule)",
                       build_s=time.perf_counter() - t0, extra=extra)
    # the halves run as one allreduce schedule, whose switches do not copy
    parts = [compact_forest(half_instance(instance, kind), options, deadline, multicast=False)
             for kind in ("reduce_scatter", "allgather")]
    trees, depth, event = PipelinedAllreduce(parts[0][0], parts[1][0]), {}, None
    pieces, models = options.params.get("pieces"), OBJECTIVES[options.params.get("objective") or "sync+event"]
    if not pieces and models != ("sync",):  # a depth whose event price is the model's own (.allreduce_depth)
        trees, depth, event = exact_depth(trees, instance)
    try:
        if not pieces and models == ("sync",):  # sync alone: the halves overlapped where that prices lower
            trees = overlapped(trees, instance, deadline)
        else:  # the overlap kept where the models' priced sum is lower (.allreduce_depth.with_overlap)
            trees, note, event = with_overlap(trees, event, instance, models, search=not pieces, deadline=deadline)
            depth.update(note)
        if deadline.expired():  # the searches stopped at the deadline: the least priced by then kept
            depth["overlap_stopped"] = "time limit reached: the least priced found by then kept"
    except TimeLimitReached as e:  # the halves in turn, as found: returned at once
        limits.kept()
        depth["overlap_stopped"] = f"{e}: the halves in turn kept"
    depth.update(allgather_delay=trees.delay, allgather_mirrored=trees.mirror)
    prices = {"event": event} if event is not None else {}
    for (_, x), half in zip(parts, trees.halves):
        x.update(pieces=half.pieces, explicit_sends=half.sends)
    extra = {"form": "pipelined-allreduce", "optimum_s": sum(x["optimum_s"] for _, x in parts),
             "explicit_sends": trees.sends, "halves": [x for _, x in parts], **depth}
    return Outcome(trees, "constructed", units="steps", found_by="tree-packing (trees + pipeline rule)",
                   build_s=time.perf_counter() - t0, extra=extra, prices=prices)


def compact_forest(instance: Instance, options: Options, deadline, multicast: bool = True) -> tuple:
    """``(trees, extra)``: :func:`run_compact`'s one forest of ``instance``'s collective, a tree's
    sends into a copying switch merged where ``multicast`` (:func:`.compact.multicast`): the
    translated trees or the hierarchical ones (:func:`.hierarchical.tier_by_tier`), whichever prices lower;
    the optimum is ForestColl's cut condition (Zhao et al., "ForestColl", arXiv 2402.06787, Section 4)."""
    coll = instance.collective
    [(kind, transposed)] = plan(coll.kind)
    weight = [1] * len(coll.nodes) if kind == "allgather" else [int(v == coll.root) for v in coll.nodes]
    net0 = flow_net(instance.topology, coll.nodes, weight, transpose=transposed)
    try:
        opt = optimum(net0)
        k, tau = forests.choose_k(net0, opt, options.params.get("trees"))
    except FlowTooLarge as e:
        raise Unsupported(f"tree-packing: {e}") from None
    trees = translated.translated(instance, kind, transposed, k, tau, deadline)
    if trees is None:
        f = forests.forest(instance, kind, transposed, deadline, grows_depth_first(options),
                           options.params.get("trees"), shape=asked_shape(options))
        instant = frozenset() if transposed else instant_pairs(instance.topology)
        summing = summing_switches(instance)
        apart = paired_by_port(instance, transposed)
        trees, k, tau = compact.pipelined(instance, f, 1, lambda t: tree_hops(t, instant, summing, apart)), f.k, f.tau
    pieces = options.params.get("pieces")
    trees, picked = compact.cheapest([trees, tier_by_tier(instance, trees)], instance, multicast, pieces)
    optimum_s = opt.seconds(coll.chunk_bytes * coll.chunks_per_node, net0.unit_bw)
    extra = {"form": "pipelined-trees", "optimum_s": optimum_s, "tau": str(opt.tau), "trees_per_shard": k,
             "tau_packed": str(tau), "trees": len(trees.root) * trees.copies, "listed_trees": len(trees.root),
             "box_copies": trees.copies, "depth_hops": trees.depth, "pieces": trees.pieces,
             "explicit_sends": trees.sends, "tier_by_tier": picked == 1}
    return trees, extra
