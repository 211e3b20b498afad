"""An allreduce's capacity split priced before the halves' own forests are packed.

Where the split's pipelined limit is the allreduce's partition bound
(:func:`.split_form.splits_first`) no pair of the halves' forests on the whole links beats it in
that limit, so the run packs and prices the split first and the halves only in the time left.
Whether it holds needs each half's cut optimum alone, not its trees: the halves' packing (DGX-2
x2, 1 GB: two-level trees tried, rings, then the greedy forest the joint choice compares in
place of rings, about 20 s of a 60 s run on a core held to a quarter) came before the split and
left it the pieces the rest allowed (94 at a quarter of a core, 1.0150x / 1.0205x the bound).
An allreduce as a reduce-scatter and an allgather of pipelined trees side by side, each on its
share of every link: Zhao et al., "ForestColl", arXiv 2402.06787, Sections 4-5.
"""

from __future__ import annotations

from ...instances import Instance
from ...tens.cut_optimum import flow_net, optimum
from ..producers import Options
from . import joint, overlap, split_form
from .emission import pipelined
from .packed import Forest, plan
from .run_params import objective_models
from .trees import hops_of


def optimum_halves(instance: Instance) -> list[Forest]:
    """Each half of the allreduce (:func:`.packed.plan`: the reduce-scatter's allgather on the
    transposed links, then the allgather) as its cut optimum without trees: what
    :func:`.split_form.splits_first` and the split's packing (:func:`.joint.split_pair`) read
    of a half (kind, direction, optimum, its unit bandwidth). The optimum is ForestColl's cut
    condition (Zhao et al., arXiv 2402.06787, Section 4)."""
    nodes = instance.collective.nodes
    out = []
    for kind, transposed in plan(instance.collective.kind):
        net = flow_net(instance.topology, nodes, [1] * len(nodes), transpose=transposed)
        opt = optimum(net)
        out.append(Forest(kind, transposed, opt, opt.k, opt.tau, net.unit_bw, [], opt.flows, {}))
    return out


def priced(instance: Instance, options: Options, deadline, kept) -> dict | None:
    """The split pair packed and priced before the halves' forests (module doc):
    :func:`.overlap.priced_first`'s ``{name: (pair, pieces, times)}``, each verified one offered
    to ``kept``; None where :func:`.split_form.splits_first` does not hold (the run packs the
    halves first, as before). The pieces, prices and sends are those :func:`.joint.joint_choice`
    gives the split: from :data:`.overlap.PROBE_PIECES` or more where its fill wants them
    (:func:`.split_form.deeper`), kept as trees (:func:`.split_form.price`)."""
    alpha = float(instance.topology.link_arrays.alpha.max()) if len(instance.topology.link_arrays) else 0.0
    halves = optimum_halves(instance)
    if not split_form.splits_first(instance, halves, options, alpha):
        return None
    models, chunks = objective_models(options), instance.collective.chunks_per_node

    def price(pair, pieces) -> dict | None:
        return split_form.price(instance, pair, pieces, models, kept, pipelined)

    def sends(f, p) -> int:
        return split_form.priced_sends(instance, f, p) if f.compact is not None else hops_of(f.trees) * p * chunks

    def start(pair, pieces) -> list[int]:
        return split_form.deeper(instance, pair, pieces, pipelined, joint.SPLIT_MOST * max(pieces))

    split = joint.split_within_share(instance, halves, options, deadline, kept)
    return overlap.priced_first(split, [overlap.PROBE_PIECES] * 2, sends, price, deadline, kept, start)
