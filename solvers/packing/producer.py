"""The tree-packing producer: throughput-optimal pipelined trees (ForestColl) as a schedule.

Zhao et al., "ForestColl: Throughput-Optimal Collective Communications on Heterogeneous
Network Fabrics" (arXiv 2402.06787), Sections 4-5: the optimum ``(tau, k)`` by the cut
condition (:mod:`collsynth.tens.cut_optimum`), switches and other relays removed by edge
splitting (:mod:`.splitting`), ``k`` out-trees per root packed on the compute nodes
(:mod:`.trees`) and mapped back to routes through the switches. Each tree carries its share of
its root's data (``1 / k`` per copy), cut into ``pieces`` pipeline pieces per chunk sent hop by
hop: the ``q``-th piece crosses the ``h``-th hop of its route below the root in step ``q + h``,
so a switch forwards in the step after a piece arrived and switch hops stay switch hops (the
verifier and the cost models see the real routes). Every tree has its own pieces, so no two
trees share a piece anywhere.

The FIFO ``event`` model serves each link's messages in the order they became ready, so a GPU's
own pieces (ready at once) leave before any it relays, and a piece relayed by several GPUs waits
behind each one's own: trees with at most one relay (:mod:`.twolevel`) are used where they fit
the optimum, else arcs of Hamiltonian rings (:mod:`.rings`, whose links never starve) where the
links decompose into them, else the greedy packing in the root order whose schedule prices
least under ``event`` (:mod:`.orders`). Ring trees are deeper, so slower to fill under ``sync``
and ``event-inorder``: at alpha 0 the rings by each door rule and the greedy packing, where it
needs no flow-tested growth, are priced as finished schedules and the least under the run's
objective is kept (:func:`by_shape`, :mod:`.shapes`).

Allgather and broadcast are packed on the topology; reduce-scatter and reduce on the transposed
topology and time-reversed (:func:`collsynth.tens.schedule.reverse`); allreduce is
reduce-scatter then allgather, each shard's allgather overlapped on its reduction piece by piece,
the two forests chosen together (:mod:`.overlap`). Combining collectives
through switch nodes are verified route by route (a switch forwards, GPUs reduce;
:mod:`collsynth.tens.verify`), except with instant switch hops or a pipelined latency (refused).
Where a switch reduces, the routes of one tree that reach it in one step share that arrival
(:func:`.tree_hops.tree_hops`): the reduction's partial sums leave it once, and the allreduce's result
is multicast from it (refused where the switch does not multicast); where a switch multicasts
but does not sum, the partials meeting in it in one step all head for one next hop.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from fractions import Fraction

import numpy as np

from ... import InputError, limits
from ...instances import Instance
from ...instances.box_shift import box_shift
from ...instances.size import BYTES_PER_SEND, topology_field
from ...instances.switch_ops import copying_mask
from ...limits import TimeLimitReached, memory_budget, require
from ...tens import certified, cost_models, verify
from ...tens.cut_optimum import FlowTooLarge, Optimum, capacities, fixed_k, flow_net, optimum
from ...tens.pipelined_allreduce import PipelinedAllreduce, half_instance
from ...tens.pipelined_trees import expand
from ...tens.schedule import Schedule
from ...tens.ten import NotSupported, instant_hops, latency_pipelined
from ..producers import Options, Outcome, Param, Producer, Unsupported
from . import (boxes, capacity_split, compact, estimate, feeders, fifo_reduce, fill, incumbent, latency, orders, overlap,
               rings, shapes, translated, twolevel)
from .allreduce_depth import exact_depth, with_overlap
from .overlap_sizes import overlapped
from .forest_record import forest_record
from .hierarchical import tier_by_tier
from .splitting import network, remove_relays, split_all_evenly
from .tree_hops import depth_of, instant_pairs, paired_by_port, refuse_multicast, summing_switches, tree_hops
from .trees import RoutedTree, hops_of, pack, routed_trees, shortest_path_trees

KINDS = ("allgather", "broadcast", "reduce_scatter", "reduce", "allreduce")
SEND_BUDGET = 16_000_000  # sends the automatic pipeline depth may emit (verifying and pricing stay seconds; about
# 1000 pieces on MI250 x2, k = 15: the in-order event time's pipeline overhead is about 6 / pieces there)
DEPTH_FACTOR = 100  # automatic pieces: this many per hop of the deepest route (fill within about 1 %)
MAX_TREES = 16  # the automatic tree count per shard tries k = 1 .. this (fewer trees: faster packing, shallower)
CLOSE_ENOUGH = Fraction(1001, 1000)  # and takes the first k whose time is within this factor of the optimum
SLACKS = (Fraction(2), Fraction(4))  # latency candidates: one tree per shard packed at these times its least time
PRICE_BUDGET = 500_000  # sends, over all candidates, the latency choice verifies and prices (a second or two)
ONE_MODEL_BUDGET = 4_000_000  # the same when the objective is one model's (priced under it alone: a few seconds)
PRICE_SHARE = 0.25  # of the run's time left, at most, for that pricing (the chosen schedule is priced again after)
PRICE_MODELS = ("sync", "event")  # the models candidates are priced under by default (objective sync+event)
OBJECTIVES = {"sync+event": ("sync", "event"), "sync": ("sync",), "event": ("event",)}  # --param objective: the
# models whose priced sum the latency choice minimises (latency.estimate's "both", "sync", "event")
TWO_LEVEL_MULTIPLES = (1, 2)  # two-level trees are tried at k and 2 k trees per shard (finer shares fit more often)
EXPLICIT_PIECES = 4  # form=auto keeps the trees as trees where fewer pieces than this of explicit sends fit SEND_BUDGET
SPLIT_SHARE = 0.5  # of the run's time left (less the kept verdict's check) for packing the split pair
SPLIT_PAIR = "capacity split"  # the joint choice's name for the halves on their shares (:mod:`.capacity_split`);
# chosen, it is the schedule priced (:mod:`.incumbent`), at the pieces it was priced at: DGX-2 x2, 1 GB, its 21 deep
# trees a shard (21-27 hops) at 200 pieces are 8.4 M sends, 15.18 / 15.40 ms under event / sync; at the automatic
# 365-369 pieces 16 M sends (14.6 GB peak, verifying and pricing twice as long) for 15.14 / 15.27 ms
FILL_SENDS = 32_000_000  # sends a fill over fill.TARGET may take, in all the memory check_sends allows
PIECES_FLOOR = 1600  # automatic pieces: at least this many (two-level trees are shallow: 100 per hop is too few
# for the synchronous model's fill, (D - 1) / pieces, to stay within a few tenths of a percent)


@dataclass
class Forest:
    """The packed trees of one non-combining collective and what it took to find them."""

    kind: str  # allgather or broadcast
    transposed: bool
    opt: Optimum
    k: int  # trees per shard packed (the optimum's own k, or fewer at a slightly longer time)
    tau: Fraction  # the time per shard the packed trees take (opt.tau when k is the optimum's)
    unit_bw: float
    trees: list[RoutedTree]
    flows: int
    seconds: dict
    order: str = "id"  # the root order the greedy packing grew the trees in (:mod:`.orders`)
    orders_tried: list = field(default_factory=list)
    shape: str = "greedy"  # or "two-level" (:mod:`.twolevel`) or "rings" (:mod:`.rings`)
    stopped: list = field(default_factory=list)  # notes on models stopped by their time limits (outcome unknown)
    door: str = ""  # ring trees: the door rule they enter the boxes by (:func:`.rings.door`)
    shapes_tried: list = field(default_factory=list)  # the candidates :func:`by_shape` priced (:mod:`.shapes`)
    alternatives: list = field(default_factory=list)  # ring trees by the other door rules (:func:`by_shape`)
    shape_objective: str = ""  # the models the shape was chosen for (the objective parameter), when it was priced
    cuts: tuple | None = None  # piece edges at its run's pieces (:mod:`.fill`); None: equal pieces
    fill: list = field(default_factory=list)  # the candidates :mod:`.fill` priced (a reduction, an allreduce's half)
    on_share: bool = False  # packed on its half's share of every link (:mod:`.capacity_split`)


def forest(instance: Instance, kind: str, transposed: bool, deadline=None, depth_first: bool = False,
           trees: int | None = None, slack: Fraction = Fraction(1), shape: str = "auto",
           probe: bool = False) -> Forest | None:
    """Optimum, split network, packed and routed trees of ``kind`` (allgather or broadcast) over
    the instance's participants, on the transposed topology when ``transposed``. With ``shape``
    ``auto``, two-level trees (:mod:`.twolevel`: at most one relay from a root to any node)
    when some fit the capacities at the chosen time, else ring trees (:mod:`.rings`; at the
    optimum's own time and ``trees`` unset) when they are within 0.1 % of the optimum, else
    the greedy packing (``greedy``). With
    a ``slack`` above 1 the trees are packed in capacities of ``slack`` times their least time
    (looser capacities let breadth-first growth attach nodes nearer the root: shallower trees
    for latency-bound messages). A flow too large for the max-flow solver (:class:`FlowTooLarge`,
    wherever it arises: the optimum, the trees per shard, edge splitting, packing) makes the
    instance unsupported; models stopped by their time limits are noted in ``stopped``. Ring
    trees by the other door rules are kept in ``alternatives`` (:func:`by_shape` prices them).
    With ``shape`` ``greedy`` and ``probe``, None unless the greedy packing needs no
    flow-tested growth (:func:`greedy`). On the transposed topology (a reduction) the trees are
    relabelled so that interchangeable GPUs relay equally many (:func:`.feeders.balanced`: a
    switch that serves its in-links first come, first served then keeps the trees' mix)."""
    stopped: list = []
    try:
        f = _forest(instance, kind, transposed, deadline, depth_first, trees, slack, shape, stopped, probe)
    except FlowTooLarge as e:
        raise Unsupported(f"tree-packing: {e}") from None
    if f is not None and transposed:  # a reduction's relays share each switch's in-links evenly (FIFO switches)
        f = replace(f, trees=feeders.balanced(f.trees, instance.topology, list(instance.collective.nodes), True))
    return replace(f, stopped=stopped) if stopped and f is not None else f


def _forest(instance: Instance, kind: str, transposed: bool, deadline, depth_first: bool, trees: int | None,
            slack: Fraction, shape: str, stopped: list, probe: bool = False) -> Forest | None:
    """:func:`forest`, its flows fitting the solver."""
    coll = instance.collective
    weight = [1] * len(coll.nodes) if kind == "allgather" else [int(v == coll.root) for v in coll.nodes]
    clock = {"start": time.perf_counter()}
    net0 = flow_net(instance.topology, coll.nodes, weight, transpose=transposed)
    opt = optimum(net0)
    k, tau = choose_k(net0, opt, trees)
    tau *= slack
    clock["optimum"] = time.perf_counter()
    model = boxes.of_flow_net(net0)  # what a box is, once for every shape below
    shift = box_shift(instance.topology, net0.compute)  # identical boxes: the move from one to the next
    packing = (net0, opt, k, tau, kind, transposed, model, shift.step if shift is not None else None, clock)
    if shape == "auto":
        found = two_level(net0, opt, k, tau, kind, transposed, clock, deadline, stopped, model)
        if found is None and trees is None and slack == 1:
            ringed = ring_forests(net0, opt, kind, transposed, clock, deadline, model)
            found = replace(ringed[0], alternatives=ringed[1:]) if ringed else None
        if found is not None:
            return found
    built = greedy(*packing, deadline, depth_first, probe)
    if built is None:
        return None
    f, split, roots, more = built
    if shape == "auto" and not transposed and not depth_first:
        f = by_root_order(instance, f, split, roots, more, deadline)
    return f


def greedy(net0, opt: Optimum, k: int, tau: Fraction, kind: str, transposed: bool, model: boxes.Boxes,
           step: int | None, clock: dict, deadline=None, depth_first: bool = False, probe: bool = False) -> tuple | None:
    """``(forest, split network, roots, packing's flows)``: the greedy packing (Zhao et al.,
    "ForestColl", arXiv 2402.06787, Section 5.2) of ``net0`` at ``k`` trees per shard and time
    ``tau``: relays removed by edge splitting, trees packed on the compute nodes and routed
    (``step``: the topology's shift of all compute nodes, :attr:`.splitting.Network.shift`). A
    ``probe`` runs no max flow beyond the proportional split's check (one per relay and per
    compute node: a cost bounded ahead of time by the instance's size): None when that split
    fails its check or the trees cannot be packed by translation (:func:`.trees.pack`)."""
    caps = capacities(net0, k, tau)
    roots = {c: k * w for c, w in zip(net0.compute, net0.weight)}
    net = network(net0.nodes, net0.src, net0.dst, caps, net0.compute, roots, k * net0.total_weight, step)
    try:
        split_flows = split_all_evenly(net, model.box_of) if probe else remove_relays(net, deadline,
                                                                                       box_of=model.box_of)
    except RuntimeError:
        raise Unsupported("tree-packing: edge splitting could not keep the cut condition at a relay whose links "
                          "differ in bandwidth by direction (the splitting theorem needs each relay's in- and "
                          "out-capacity to match)") from None
    if split_flows is None:
        return None
    clock["splitting"] = time.perf_counter()
    split = net.copy()  # the split network before routing (routing takes the routes from its pools)
    packed = pack(net, roots, deadline, depth_first, grow=not probe)
    if packed is None:
        return None
    clock["packing"] = time.perf_counter()
    seconds = {"optimum_s": clock["optimum"] - clock["start"], "splitting_s": clock["splitting"] - clock["optimum"],
               "packing_s": clock["packing"] - clock["splitting"]}
    f = Forest(kind, transposed, opt, k, tau, net0.unit_bw, routed_trees(net, packed[0]),
               opt.flows + split_flows + packed[1], seconds)
    return f, split, roots, packed[1]


def by_root_order(instance: Instance, f: Forest, split, roots: dict, flows: int, deadline=None) -> Forest:
    """``f`` with the trees of the root order whose schedule prices least under the FIFO event
    model (:func:`.orders.choose`): every order of :func:`.orders.to_try` (``flows``: the max
    flows ``f``'s packing ran) is packed and routed once on its own copy of ``split``, the split
    network before routing, and emitted at :data:`.orders.SELECT_PIECES`; the finished
    schedules are ranked."""
    names = orders.to_try(sorted({t.root for t in f.trees}), flows)
    if not names:
        return f
    c = instance.collective.chunks_per_node
    t0 = time.perf_counter()
    finished = {}
    for name, order in names.items():
        if deadline is not None:
            deadline.check("root order search", f"order {name}")
        if name == "id":
            trees = f.trees
        else:
            net = split.copy()
            trees = routed_trees(net, pack(net, roots, deadline, order=order)[0])
        g = replace(f, trees=trees)
        finished[name] = (trees, _with_header(emit(instance, g, min(orders.SELECT_PIECES, auto_pieces(trees, c))),
                                              instance))
    trees, tried, name = orders.choose(instance, finished, deadline)
    seconds = {**f.seconds, "order_search_s": time.perf_counter() - t0} if tried else f.seconds
    return replace(f, trees=trees, seconds=seconds, order=name, orders_tried=[t.as_dict() for t in tried])


def two_level(net0, opt: Optimum, k: int, tau: Fraction, kind: str, transposed: bool, clock: dict,
              deadline=None, stopped: list | None = None, model: boxes.Boxes | None = None) -> Forest | None:
    """Two-level trees (:func:`.twolevel.find`) at ``k`` or ``TWO_LEVEL_MULTIPLES`` times ``k``
    trees per shard and time ``tau``, as a :class:`Forest`; None when none fit (or the system
    is too large to try). The multiples only help integrality: once the LP relaxation is proven
    to have no solution they are not tried (one stopped by its limit proves nothing: ``stopped``)."""
    if len(net0.compute) > twolevel.MAX_NODES:
        return None
    for c in TWO_LEVEL_MULTIPLES:
        if deadline is not None:
            deadline.check("two-level trees", f"{c * k} trees per shard")
        try:
            found = twolevel.find(net0, capacities(net0, c * k, tau),
                                  {v: c * k * w for v, w in zip(net0.compute, net0.weight)}, deadline, stopped, model)
        except twolevel.Infeasible:  # not even fractionally: finer shares would not fit either
            return None
        if found is not None:
            now = time.perf_counter()
            seconds = {"optimum_s": clock["optimum"] - clock["start"], "splitting_s": 0.0,
                       "packing_s": now - clock["optimum"]}
            return Forest(kind, transposed, opt, c * k, tau, net0.unit_bw, found, 0, seconds, shape="two-level")
    return None


def ring_forests(net0, opt: Optimum, kind: str, transposed: bool, clock: dict, deadline=None,
                 model: boxes.Boxes | None = None) -> list[Forest]:
    """The ring trees of :mod:`.rings` by each door rule (:func:`.rings.find_each`) as
    :class:`Forest` objects at their exact times; none when the boxes (``model``, :mod:`.boxes`)
    have no ring layout, or the rings miss the optimum."""
    out = []
    for rule, (trees, k, tau) in rings.find_each(net0, opt.tau, deadline, model).items():
        seconds = {"optimum_s": clock["optimum"] - clock["start"], "splitting_s": 0.0,
                   "packing_s": time.perf_counter() - clock["optimum"]}
        out.append(Forest(kind, transposed, opt, k, tau, net0.unit_bw, trees, 0, seconds, shape="rings", door=rule))
    return out


def ring_forest(net0, opt: Optimum, kind: str, transposed: bool, clock: dict, deadline=None,
                model: boxes.Boxes | None = None) -> Forest | None:
    """The ring trees of the first door rule (:func:`ring_forests`), or None."""
    found = ring_forests(net0, opt, kind, transposed, clock, deadline, model)
    return found[0] if found and found[0].door == rings.DOOR_RULES[0] else None


def by_shape(instance: Instance, f: Forest, options: Options, deadline=None) -> Forest:
    """``f``, or where ``f`` is ring trees the forest :func:`.shapes.choose` keeps of them, its
    ``alternatives`` (the other door rules) and the greedy packing where it needs no
    flow-tested growth (:func:`forest` with ``probe``: its cost bounded ahead of time by the
    instance's size; DGX H100's greedy root-order search at four boxes took 2,225 s): the
    least priced sum under the ``objective`` parameter's models (:data:`OBJECTIVES`), each
    emitted at the pieces the run emits it at (the ``pieces`` parameter, else
    :func:`auto_pieces`) and verified. Compared for an allgather or broadcast alone at alpha 0
    with ``shape`` ``auto``, where those pieces are the run's (at a latency the latency choice
    picks them, :func:`pick`; an allreduce's halves are chosen together, :func:`_joint`)."""
    params = options.params
    if (f.shape != "rings" or f.transposed or instance.collective.kind != f.kind or (params.get("shape") or "auto") !=
            "auto" or float(instance.topology.link_arrays.alpha.max()) > 0):
        return f
    t0 = time.perf_counter()
    ring = replace(f, alternatives=[])
    probe = forest(instance, f.kind, False, deadline, shape="greedy", probe=True)
    cands = [ring] + f.alternatives + ([probe] if probe is not None else [])
    if len(cands) == 1:
        return ring
    c = instance.collective.chunks_per_node
    finished = {_shape_name(g): (lambda g=g: _with_header(emit(instance, g, params.get("pieces") or
                                                               auto_pieces(g.trees, c)), instance)) for g in cands}
    objective = params.get("objective") or "sync+event"
    name, priced = shapes.choose(instance, finished, OBJECTIVES[objective], deadline)
    chosen = next((g for g in cands if _shape_name(g) == name), ring)
    seconds = {**chosen.seconds, "shape_choice_s": time.perf_counter() - t0}
    return replace(chosen, seconds=seconds, shapes_tried=[p.as_dict() for p in priced], shape_objective=objective,
                   stopped=f.stopped)  # the models stopped on the way to the rings (two-level) stay recorded


def _shape_name(f: Forest) -> str:
    """A forest's shape as rows name it: ``greedy``, ``two-level``, or ``rings (<door rule>)``."""
    return f"{f.shape} ({f.door})" if f.door else f.shape


def choose_k(net, opt: Optimum, asked: int | None = None) -> tuple[int, Fraction]:
    """Trees per shard and their time: ``asked`` (its least feasible time, ForestColl's fixed-k
    search), else the fewest trees that reach the optimum when the optimum's own ``k`` is at
    most :data:`MAX_TREES` (fewer sends per piece, so more pipeline pieces within the send
    budget: 4x16 MI250 reaches it with 3 trees where the optimum's ``k`` is 8), else the
    first ``k`` in 1 .. :data:`MAX_TREES` within :data:`CLOSE_ENOUGH` of the optimum (the best
    of them if none is)."""
    if opt.tau == 0:
        return 1, opt.tau
    if asked is not None:
        tau = fixed_k(net, asked, opt.tau, Fraction(64))
        if tau is None:
            raise Unsupported(f"tree-packing: {asked} trees per shard do not fit within 64 times the optimum")
        return asked, tau
    if opt.k <= MAX_TREES:
        fewest = next((k for k in range(1, opt.k) if fixed_k(net, k, opt.tau) == opt.tau), opt.k)
        return fewest, opt.tau
    best = None
    for k in range(1, MAX_TREES + 1):
        tau = fixed_k(net, k, opt.tau)
        if tau is not None and (best is None or tau < best[1]):
            best = (k, tau)
        if best is not None and best[1] <= opt.tau * CLOSE_ENOUGH:
            break
    return best if best is not None else (opt.k, opt.tau)


def auto_pieces(trees: list[RoutedTree], chunks_per_root: int, seconds: float = 0.0, alpha: float = 0.0,
                floor: int = PIECES_FLOOR, sends: int | None = None, memory_share: float = 0.5) -> int:
    """Pipeline pieces per chunk: :data:`DEPTH_FACTOR` per hop of the deepest tree (at least
    ``floor``, :data:`PIECES_FLOOR` by default), at most
    what keeps the schedule within ``sends`` (by default :data:`SEND_BUDGET`) sends and ``memory_share``
    of the memory budget at ``BYTES_PER_SEND`` a send. With
    a latency ``alpha`` per step and a bandwidth time ``seconds``, the ``P`` (up to that) that
    minimises the sum of the synchronous estimate ``(P + D - 1) (alpha + seconds / P)`` and the
    event estimate ``seconds (1 + (D - 1) / P) + D alpha`` (``D`` hops deep): small messages get
    few pieces, large ones many."""
    hops = hops_of(trees) * chunks_per_root
    budget = min(SEND_BUDGET if sends is None else sends, int(memory_budget()[0] * memory_share / BYTES_PER_SEND))
    depth = max(1, depth_of(trees))
    want = max(DEPTH_FACTOR * depth, floor)
    if alpha > 0:
        def estimate(P: int) -> float:
            return (P + depth - 1) * (alpha + seconds / P) + seconds * (1 + (depth - 1) / P) + depth * alpha
        want = min(range(1, want + 1), key=estimate)
    return max(1, min(want, budget // max(1, hops)))


def check_sends(forests: list[Forest], pieces: list[int], chunks_per_root: int, field: str = "--param pieces") -> None:
    """Refuse (:class:`collsynth.limits.TooBig` at ``field``, before the schedule is built) a
    pipeline depth whose sends would exceed the memory budget."""
    sends = sum(hops_of(f.trees) * p for f, p in zip(forests, pieces)) * chunks_per_root
    require(sends * BYTES_PER_SEND, field, f"{sends:,} sends of {sum(pieces)} pieces over the packed trees")


def emit(instance: Instance, f: Forest, pieces: int) -> Schedule:
    """The forest as a schedule of its non-combining kind (module doc): chunk ids of the
    collective, the ``q``-th piece of a tree over its ``h``-th hop in step ``q + h + 1``.

    A forest with piece edges for ``pieces`` (``cuts``, :mod:`.fill`) is cut into
    those unequal pieces. This is the order a pipelined program-order executor wants (MSCCL: each link's sends run in
    step order, the ``event-inorder`` cost model): on every link the pieces of all trees and
    all roots alternate round-robin, the ``q``-th piece an own root sends beside the pieces
    relayed ``h`` hops down, so a relay is never held behind a root's whole share. Measured
    against it (``benchmarks/bench_packing.py``, A100 x2): piece-major orders (``m q + h``,
    ``m > 1``) and pieces growing and shrinking geometrically at the ends are slower; the
    overhead over the optimum is about ``c / pieces`` (``c`` 4.7 on A100 x2, 6 on MI250 x2).
    The sends are the expansion of the trees plus that rule (:mod:`.compact`)."""
    trees = pipelined(instance, f, pieces)
    return expand(replace(trees, cuts=np.asarray(f.cuts)) if f.cuts and len(f.cuts) == pieces + 1 else trees)


def pipelined(instance: Instance, f: Forest, pieces: int):
    """The forest as trees plus the pipeline rule (:func:`.compact.pipelined`) at ``pieces``
    equal pieces, its hops as :func:`emit` sends them (:func:`.tree_hops.tree_hops`)."""
    instant = frozenset() if f.transposed else instant_pairs(instance.topology)
    summing = summing_switches(instance)
    multicast = frozenset() if f.transposed else summing
    copy = copying_mask(instance.topology, False)
    apart = paired_by_port(instance, f.transposed)

    def hops(tree: RoutedTree) -> tuple[list[int], list[int], list[int]]:
        got = tree_hops(tree, instant, summing, apart)
        refuse_multicast(got, multicast, copy, instance.collective.kind)
        return got

    return compact.pipelined(instance, f, pieces, hops)


def _check(instance: Instance) -> None:
    if instance.concurrent:
        raise Unsupported("tree-packing takes a single collective, not concurrent ones")
    coll = instance.collective
    if coll.kind not in KINDS:
        raise Unsupported(f"tree-packing implements {', '.join(KINDS)}, not {coll.kind}")
    topo = instance.topology
    if coll.combining and topo.switches and (instant_hops(topo).any() or latency_pipelined(topo)):
        raise Unsupported(f"tree-packing: a {coll.kind} through switch nodes with instant switch hops or a pipelined "
                          "latency cannot be verified (its time reversal forwards a step late); unwind the switches")


def _check_piece_bytes(instance: Instance, sched) -> None:
    """Refuse (:class:`~collsynth.InputError` on ``collective.message_bytes``) a message too
    small to split into the trees' shares and pipeline pieces: a piece under one byte."""
    piece = float(sched.size.min()) * instance.collective.chunk_bytes if len(sched) else 1.0
    if piece < 1.0:
        coll = instance.collective
        raise InputError(instance.source or instance.name,
                         f"collective.message_bytes: {coll.message_bytes:,.0f} B split into the trees' shares and "
                         f"pipeline pieces gives pieces of {piece:.3g} B; expected at least 1 B a piece: more bytes, "
                         "or fewer pieces (--param pieces) or trees (--param trees)")


def plan(kind: str) -> list[tuple[str, bool]]:
    """The forests a collective is made of: ``(allgather | broadcast, transposed)`` in order."""
    return {"allgather": [("allgather", False)], "broadcast": [("broadcast", False)],
            "reduce_scatter": [("allgather", True)], "reduce": [("broadcast", True)],
            "allreduce": [("allgather", True), ("allgather", False)]}[kind]


def optimum_seconds(instance: Instance, f: Forest) -> float:
    """The forest's cut optimum in seconds for the instance's data (``c`` chunks per root)."""
    coll = instance.collective
    return f.opt.seconds(coll.chunk_bytes * coll.chunks_per_node, f.unit_bw)


def run(instance: Instance, options: Options) -> Outcome:
    """Tree packing (module doc): the schedule, the cut optimum and what it took; kept as
    trees plus the pipeline rule (:func:`run_compact`) with ``form=compact``, or with
    ``form=auto`` where fewer than :data:`EXPLICIT_PIECES` pieces of explicit sends would fit
    :data:`SEND_BUDGET`. An allreduce's joint choice keeps its least priced verified schedule
    (:mod:`.incumbent`), returned when the time limit comes later, or when the final one would
    not fit the time left, and not emitted again when it is the final one."""
    _check(instance)
    if _compact(instance, options.params):
        return run_compact(instance, options)
    estimate.check(instance)  # refuse before packing what one pipeline piece could not hold
    coll = instance.collective
    deadline = options.timer()
    t0 = time.perf_counter()
    forests = [forest(instance, kind, transposed, deadline, options.params.get("growth") == "depth-first",
                      options.params.get("trees"), shape=options.params.get("shape") or "auto")
               for kind, transposed in plan(coll.kind)]
    forests = [by_shape(instance, f, options, deadline) for f in forests]
    kept = None
    if coll.kind == "allreduce" and options.params.get("trees") is None:
        kept = incumbent.Kept(OBJECTIVES[options.params.get("objective") or "sync+event"])
    try:
        return _finish(instance, options, forests, deadline, t0, kept)
    except TimeLimitReached as e:
        if kept is None or kept.schedule is None:
            raise
        limits.kept()  # returned at once, with its verdict and prices: the pipeline takes them where they hold
        return _outcome(instance, list(kept.pair), kept.pieces, kept.schedule, t0, stopped=str(e), verdict=kept.certified)


def _finish(instance: Instance, options: Options, forests: list[Forest], deadline, t0: float, kept) -> Outcome:
    """:func:`run` after the forests are packed: each half's pieces (:func:`pick`), an allreduce's
    forests chosen together (:func:`_joint`, every verified candidate offered to ``kept``), the schedule."""
    coll = instance.collective
    alpha = float(instance.topology.link_arrays.alpha.max())
    picks = [pick(instance, f, len(forests), alpha, options, deadline) for f in forests]
    packed = forests
    forests, depths = [p[0] for p in picks], [p[1] for p in picks]
    joint, note = None, ""
    if kept is not None:
        halves = [[f, *(_greedy_instead_of_rings(instance, g, options, deadline) or [g])] for f, g in zip(forests, packed)]
        forests, joint = _joint(instance, halves, depths, alpha, options, deadline, kept)
        if alpha <= 0 and not options.params.get("pieces"):  # the split's pair at the depth it won at (SPLIT_PAIR)
            depths = (list(joint["chosen_pieces"]) if all(f.on_share for f in forests) else
                      [next((d for g, d, _ in picks if g is f), None) or  # the fill's pieces stay with its forest
                       auto_pieces(f.trees, coll.chunks_per_node * len(forests)) for f in forests])
        sends = sum(hops_of(f.trees) * p for f, p in zip(forests, depths)) * coll.chunks_per_node
        if not kept.holds(forests, depths) and kept.schedule is not None and not kept.fits(sends, deadline):
            note = (f"the chosen pair at {'/'.join(map(str, depths))} pieces ({sends:,} sends) would not fit the "
                    f"time left: kept at the {'/'.join(map(str, kept.pieces))} pieces it was priced at")
            forests, depths = list(kept.pair), kept.pieces
    check_sends(forests, depths, coll.chunks_per_node,
                "--param pieces" if options.params.get("pieces") else topology_field(instance.topology))
    verdict = None
    if kept is not None and kept.holds(forests, depths):  # verified and priced by the choice: not emitted again
        sched, verdict = kept.schedule, kept.certified
    else:
        parts = [emit(instance, f, p) for f, p in zip(forests, depths)]
        sched = parts[0] if len(parts) == 1 else overlap.overlapped(parts[0], parts[1], coll.chunks_per_node)
        sched = _with_header(sched, instance)
    _check_piece_bytes(instance, sched)
    return _outcome(instance, forests, depths, sched, t0, picks, joint, note, verdict=verdict)


def _outcome(instance: Instance, forests: list[Forest], depths: list[int], sched: Schedule, t0: float,
             picks: list | None = None, joint: dict | None = None, note: str = "", stopped: str = "",
             verdict=None) -> Outcome:
    """The run's :class:`Outcome`: ``sched`` of ``forests`` at ``depths`` and what chose them
    (``picks``' latency choices, the ``joint`` choice); ``note``: why the kept schedule was
    taken; ``stopped``: the time limit that ended the choice, the kept schedule returned;
    ``verdict``: ``sched``'s verification and prices in the choice (:attr:`Outcome.certified`)."""
    split = all(f.on_share for f in forests)  # the halves side by side, not in turn
    optimum_s = (max if split else sum)(optimum_seconds(instance, f) for f in forests)
    extra = {"optimum_s": optimum_s, "optimum_source": "cut condition (ForestColl, arXiv 2402.06787, Section 4)" +
             (" of each half on its share of the links" if split else ""),
             "forests": [forest_record(f, p, optimum_seconds(instance, f), pk[2] if pk else None)
                         for f, p, pk in zip(forests, depths, picks or [None] * len(forests))],
             **({"joint_choice": joint} if joint else {})}
    if note or stopped:
        extra["kept_schedule"] = note or f"{stopped}: the least priced verified schedule of the choice so far"
    return Outcome(sched, "constructed", objective=float(sched.num_steps), units="steps", found_by="tree-packing",
                   build_s=time.perf_counter() - t0, extra=extra, certified=verdict,
                   message=f"{stopped}; kept the least priced verified schedule so far" if stopped else "")


def _compact(instance: Instance, params: dict) -> bool:
    """Whether the run keeps the trees as trees: ``form=compact``, or ``form=auto`` where
    fewer than :data:`EXPLICIT_PIECES` pieces of explicit sends fit :data:`SEND_BUDGET`."""
    form = params.get("form") or "auto"
    return form == "compact" or (form == "auto" and estimate.least_sends(instance) * EXPLICIT_PIECES > SEND_BUDGET)


def planned(instance: Instance, params: dict) -> estimate.Build:
    """What the run will build, in the form it keeps (:func:`.estimate.planned`), for the
    size check before the run (:attr:`collsynth.solvers.producers.Producer.estimate`)."""
    return estimate.planned(instance, _compact(instance, params), asked=params.get("form") == "explicit")


def run_compact(instance: Instance, options: Options) -> Outcome:
    """Tree packing kept as trees plus the pipeline rule (:class:`~collsynth.tens.pipelined_trees.PipelinedTrees`,
    memory in trees x hops; the pipeline verifies and prices it in that form): on identical
    boxes the first box's trees moved by the box shifts (:func:`.translated.translated`), else the
    packed forest (:func:`forest`); ``pieces`` as given, else the depth of least ``sync`` price
    (:func:`.compact.least_sync`). One forest (allgather, reduce-scatter, broadcast, reduce), or
    an allreduce's two (:class:`~collsynth.tens.pipelined_allreduce.PipelinedAllreduce`: its
    reduce-scatter, then its allgather, each grown on the instance with that kind; without
    ``pieces`` and unless the ``objective`` is ``sync`` alone, at a depth whose ``event`` price tracks
    exact pairs, :func:`.allreduce_depth.exact_depth`, then overlapped where that lowers the priced sum,
    :func:`.allreduce_depth.with_overlap`; with ``sync`` alone the halves' own depths of least
    ``sync`` price, the allgather overlapped with the reduce-scatter where that prices lower,
    :func:`.overlap_sizes.overlapped`; with ``pieces``, those, overlapped at them where that lowers the sum)."""
    coll = instance.collective
    deadline, t0 = options.timer(), time.perf_counter()
    if coll.kind != "allreduce":
        trees, extra = _compact_forest(instance, options, deadline)
        return Outcome(trees, "constructed", units="steps", found_by="tree-packing (trees + pipeline rule)",
                       build_s=time.perf_counter() - t0, extra=extra)
    # the halves run as one allreduce schedule, whose switches do not copy
    parts = [_compact_forest(half_instance(instance, kind), options, deadline, multicast=False)
             for kind in ("reduce_scatter", "allgather")]
    trees, depth, event = PipelinedAllreduce(parts[0][0], parts[1][0]), {}, None
    pieces, models = options.params.get("pieces"), OBJECTIVES[options.params.get("objective") or "sync+event"]
    if not pieces and models != ("sync",):  # a depth whose event price is the model's own (.allreduce_depth)
        trees, depth, event = exact_depth(trees, instance)
    if not pieces and models == ("sync",):  # sync alone: the halves overlapped where that prices lower
        trees = overlapped(trees, instance)
    else:  # the overlap kept where the models' priced sum is lower (.allreduce_depth.with_overlap)
        trees, note, event = with_overlap(trees, event, instance, models, search=not pieces)
        depth.update(note)
    depth.update(allgather_delay=trees.delay, allgather_mirrored=trees.mirror)
    prices = {"event": event} if event is not None else {}
    for (_, x), half in zip(parts, trees.halves):
        x.update(pieces=half.pieces, explicit_sends=half.sends)
    extra = {"form": "pipelined-allreduce", "optimum_s": sum(x["optimum_s"] for _, x in parts),
             "explicit_sends": trees.sends, "halves": [x for _, x in parts], **depth}
    return Outcome(trees, "constructed", units="steps", found_by="tree-packing (trees + pipeline rule)",
                   build_s=time.perf_counter() - t0, extra=extra, prices=prices)


def _compact_forest(instance: Instance, options: Options, deadline, multicast: bool = True) -> tuple:
    """``(trees, extra)``: :func:`run_compact`'s one forest of ``instance``'s collective, a tree's
    sends into a copying switch merged where ``multicast`` (:func:`.compact.multicast`): the
    translated trees or the hierarchical ones (:func:`.hierarchical.tier_by_tier`), whichever prices lower."""
    coll = instance.collective
    [(kind, transposed)] = plan(coll.kind)
    weight = [1] * len(coll.nodes) if kind == "allgather" else [int(v == coll.root) for v in coll.nodes]
    net0 = flow_net(instance.topology, coll.nodes, weight, transpose=transposed)
    try:
        opt = optimum(net0)
        k, tau = choose_k(net0, opt, options.params.get("trees"))
    except FlowTooLarge as e:
        raise Unsupported(f"tree-packing: {e}") from None
    trees = translated.translated(instance, kind, transposed, k, tau, deadline)
    if trees is None:
        f = forest(instance, kind, transposed, deadline, options.params.get("growth") == "depth-first",
                   options.params.get("trees"), shape=options.params.get("shape") or "auto")
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


def pick(instance: Instance, f: Forest, parts: int, alpha: float, options: Options, deadline=None) -> tuple:
    """``(forest, pieces, choice)``: the ``pieces`` parameter when set; else at ``alpha = 0``
    the pieces of :func:`auto_pieces` (a reduction's forest at alpha 0, unless ``trees`` is set,
    is the one :func:`.fifo_reduce.choose` measures faster, then, unless ``pieces`` is set, of
    it and its ring alternatives, in equal or unequal pieces, the one of least ``sync`` price:
    :func:`.fill.choose`, more pieces, up to :data:`FILL_SENDS`, where those leave it over
    :data:`.fill.TARGET`; so is an allreduce's allgather, whose shape :func:`by_shape` left
    unchosen); else, over the forests of
    :func:`alternatives`, the least priced time under the ``objective`` parameter's models (:data:`OBJECTIVES`; sync +
    event by default) near the least estimate (:func:`priced_choice`), or the least estimate of
    :func:`.latency.choose` where pricing would take too long."""
    coll = instance.collective
    c = coll.chunks_per_node
    if alpha <= 0 and options.params.get("trees") is None:
        if f.transposed:  # FIFO links: measured
            f = _fifo_reduction(instance, f, options, deadline, c)
        if not options.params.get("pieces") and (f.transposed or coll.kind != f.kind):
            # the fill of a reduction or of an allreduce's allgather (whose shape by_shape left unpriced): ring
            # trees both ways, unequal pieces (priced at the run's pieces)
            g, pieces, priced = fill.choose(instance, [replace(f, alternatives=[]), *f.alternatives],
                                            lambda h: auto_pieces(h.trees, c * parts),
                                            lambda h, p: pipelined(instance, h, p), deadline, lambda h: auto_pieces(
                                                h.trees, c * parts, sends=FILL_SENDS, memory_share=1.0),
                                            optimum_seconds(instance, f))
            return replace(g, fill=priced), pieces, None
    automatic = auto_pieces(f.trees, c * parts)
    if options.params.get("pieces") or alpha <= 0:
        return f, options.params.get("pieces") or automatic, None
    alts = alternatives(instance, f, options, deadline, c * parts)
    cands = [latency.Candidate(g.k, packed_seconds(instance, g), depth_of(g.trees), hops_of(g.trees),
                               auto_pieces(g.trees, c * parts), c, name) for name, g in alts.items()]
    models = OBJECTIVES[options.params.get("objective") or "sync+event"]
    choice = latency.choose(cands, alpha, (0, automatic), "both" if len(models) > 1 else models[0])
    choice = priced_choice(instance, list(alts.values()), cands, alpha, choice, deadline, models)
    return alts[choice.name], choice.pieces, choice


def _fifo_reduction(instance: Instance, f: Forest, options: Options, deadline, chunks: int) -> Forest:
    """:func:`.fifo_reduce.choose` between ``f`` and the one packed tree a shard forest of its
    collective, probed under the ``objective`` parameter's models."""
    models = OBJECTIVES[options.params.get("objective") or "sync+event"]
    part = part_instance(instance, f)

    def one_tree() -> Forest:
        return forest(instance, f.kind, True, deadline, options.params.get("growth") == "depth-first", 1,
                      shape=options.params.get("shape") or "auto")

    return fifo_reduce.choose(f, one_tree, lambda g, pieces: price_pieces(part, g, pieces, models),
                              models, chunks, deadline)


def _greedy_instead_of_rings(instance: Instance, f: Forest, options: Options, deadline) -> list[Forest]:
    """The greedy packing of ``f``'s collective at the optimum's tree count when ``f`` is ring
    trees (:mod:`.rings`), else nothing: the allreduce's joint choice compares it in place of
    the rings packed for one half alone (the picked forest stays a candidate). Ring trees are
    deeper; where both halves share FIFO links the greedy forests overlap better (DGX-H100 x2,
    200 pieces: 1.019x the bound under ``event`` on rings and greedy, 1.009x greedy on both)."""
    if f.shape != "rings" or (options.params.get("shape") or "auto") != "auto":
        return []
    try:
        return [forest(instance, f.kind, f.transposed, deadline, options.params.get("growth") == "depth-first",
                       None, shape="greedy")]
    except Unsupported:
        return []


def _joint(instance: Instance, halves: list[list[Forest]], depths: list[int], alpha: float, options: Options,
           deadline=None, kept: incumbent.Kept | None = None) -> tuple[list[Forest], dict]:
    """:func:`.overlap.joint`: an allreduce's two forests chosen together from ``halves``
    (each half's picked forest and the one packed before the pick), each pair priced as the
    whole overlapped allreduce under the ``objective`` parameter's models, every verified one
    offered to ``kept`` (:class:`.incumbent.Kept`); the split pair (:func:`_split_pair`) packed
    after the others are priced, by the time left less what the pipeline needs to check the
    kept schedule's verdict again."""
    forests = [h[0] for h in halves]
    models = OBJECTIVES[options.params.get("objective") or "sync+event"]
    c = instance.collective.chunks_per_node

    def one_tree(i: int) -> Forest | None:
        try:
            return forest(instance, forests[i].kind, forests[i].transposed, deadline,
                          options.params.get("growth") == "depth-first", 1, shape=options.params.get("shape") or "auto")
        except Unsupported:
            return None

    def price(pair, pieces) -> dict | None:
        t = time.perf_counter()
        rs, ag = (emit(instance, f, p) for f, p in zip(pair, pieces))
        sched = _with_header(overlap.overlapped(rs, ag, c), instance)
        verdict = certified.certify(sched, instance)
        if verdict is None:
            return None
        got = {m: verdict.price(m).total_s for m in models}
        if kept is not None:
            kept.offer(pair, pieces, sched, got, len(sched), time.perf_counter() - t, verdict.digest_s, verdict)
        return got

    def split_pair() -> dict:  # within half the time left less the kept verdict's check: then probed
        if deadline is None or kept is None:
            return _split_pair(instance, forests, options, deadline)
        share = deadline.earlier(kept.needs(0)).share(SPLIT_SHARE)
        try:
            return _split_pair(instance, forests, options, share)
        except TimeLimitReached:
            if deadline.expired():  # the run's limit, not the share's
                raise
            return {}

    return overlap.joint(halves, depths, alpha, one_tree, price, lambda f, p: hops_of(f.trees) * p * c, models,
                         deadline, split_pair, kept)


def _split_pair(instance: Instance, forests: list[Forest], options: Options, deadline=None) -> dict:
    """The allreduce's halves packed each on its share of every link (:mod:`.capacity_split`), by
    name, for the joint choice; nothing where the split does not beat the halves in sequence."""
    got = capacity_split.split_instances(instance, sum(optimum_seconds(instance, f) for f in forests))
    if got is None:
        return {}
    parts, s = got
    nodes = instance.collective.nodes
    try:  # at each share's own optimum k: its floored capacities keep every switch's balance, which splitting needs
        pair = tuple(replace(forest(part, f.kind, f.transposed, deadline, options.params.get("growth") == "depth-first",
                                    optimum(flow_net(part.topology, nodes, [1] * len(nodes), f.transposed)).k,
                                    shape=options.params.get("shape") or "auto"), on_share=True)
                     for part, f in zip(parts, forests))
    except (Unsupported, FlowTooLarge):
        return {}
    return {f"{SPLIT_PAIR} ({s.seconds(instance.collective.message_bytes) * 1e3:.4f} ms in the pipelined limit)":
            overlap.aligned(*pair)}


def alternatives(instance: Instance, f: Forest, options: Options, deadline, chunks: int) -> dict[str, Forest]:
    """The forests the latency choice compares, by name: ``f`` (the optimum's ``k``) and,
    unless ``trees`` is set, one packed tree per shard, the same packed at each of
    :data:`SLACKS` times its least time (shallower; only while a piece of them fits a quarter
    of :data:`PRICE_BUDGET`, so that they are priced) and one shortest-path tree per root
    (:func:`shallow`). Zhao et al. ("ForestColl", arXiv 2402.06787, Section 5) pack at the
    least time alone; with latency, depth matters too."""
    alts = {f"packed k={f.k}": f}
    if options.params.get("trees") is not None:
        return alts
    depth_first = options.params.get("growth") == "depth-first"
    shape = options.params.get("shape") or "auto"
    one = f
    if f.k != 1:
        try:
            one = alts["packed k=1"] = forest(instance, f.kind, f.transposed, deadline, depth_first, 1, shape=shape)
        except Unsupported:
            one = None
    if one is not None and hops_of(one.trees) * chunks <= PRICE_BUDGET // 4:
        for m in SLACKS:
            try:
                alts[f"packed k=1 at {m}x time"] = forest(instance, f.kind, f.transposed, deadline, depth_first, 1, m,
                                                          shape)
            except Unsupported:
                pass
    alts["shortest paths"] = shallow(instance, f)
    return alts


def part_instance(instance: Instance, f: Forest) -> Instance:
    """The instance of the collective ``f`` alone makes: the instance itself, except for an
    allreduce, whose forests are its reduce-scatter and its allgather (:func:`plan`; Zhao et
    al., "ForestColl", arXiv 2402.06787, Section 4: allreduce as reduce-scatter + allgather)."""
    kind = {("allgather", False): "allgather", ("allgather", True): "reduce_scatter",
            ("broadcast", False): "broadcast", ("broadcast", True): "reduce"}[(f.kind, f.transposed)]
    coll = instance.collective
    return instance if coll.kind == kind else replace(instance, collectives=(replace(coll, kind=kind),))


def price_pieces(instance: Instance, f: Forest, pieces: int, models: tuple = PRICE_MODELS) -> dict | None:
    """The priced times (seconds) under ``models`` of ``f`` cut into ``pieces``, as the
    pipeline prices it (:mod:`collsynth.tens.cost_models`) after verifying it; None when it
    does not verify (it is then never chosen). The pipelined trees are ForestColl's (Zhao et
    al., arXiv 2402.06787, Section 5); the models are ``docs/cost-models.md``'s."""
    sched = _with_header(emit(instance, f, pieces), instance)
    if verify.verify(sched, instance) is not None:
        return None
    return {m: cost_models.price(sched, instance, m).total_s for m in models}


def priced_choice(instance: Instance, alts: list[Forest], cands: list[latency.Candidate], alpha: float,
                  est: latency.Choice, deadline=None, models: tuple = PRICE_MODELS) -> latency.Choice:
    """``est`` (the least estimate), or, where the schedules are small, the (trees, pieces)
    of least priced time summed over ``models``: :func:`.latency.price_order` within
    :data:`PRICE_BUDGET` sends (:data:`ONE_MODEL_BUDGET` for one model), each emitted,
    verified and priced until :data:`PRICE_SHARE` of the time left is used. The estimates
    (module doc of :mod:`.latency`) miss FIFO starvation at relays; ForestColl (Zhao et al.,
    arXiv 2402.06787, Section 5) pipelines at one depth whatever the size. The estimate's pick is priced first and kept unless a priced pair is
    faster; the baseline (candidate 0, the optimum's ``k``, at :func:`auto_pieces`) is priced second. Only verified
    pairs are priced, so an estimate's pick that does not verify loses to any that does."""
    budget = PRICE_BUDGET if len(models) > 1 else ONE_MODEL_BUDGET
    pairs = latency.within_budget(latency.price_order(cands, alpha, (est.index, est.pieces), est.baseline, est.model), cands,
                                  budget)
    if not pairs:
        return replace(est, priced={"schedules": 0, "why": f"the estimate's pick is over {budget:,} sends"})
    part = part_instance(instance, alts[0])
    stop = deadline.share(PRICE_SHARE) if deadline is not None else None
    prices: dict = {}
    record = {"listed": len(pairs), "budget_sends": budget, "unverified": 0}
    for pair in pairs:
        if stop is not None and stop.expired():
            record["stopped"] = f"the time share for pricing ran out after {len(prices)} of {len(pairs)}"
            break
        try:
            got = price_pieces(part, alts[pair[0]], pair[1], models)
        except NotSupported as e:  # a model that cannot price this topology (instant switch hops): estimate
            return replace(est, priced={**record, "schedules": 0, "why": f"not priced: {e}"})
        if got is None:
            record["unverified"] += 1
        else:
            prices[pair] = got
    if not prices:
        return replace(est, priced={**record, "schedules": 0, "why": "no pick was priced"})
    if (est.index, est.pieces) not in prices:  # it did not verify: a verified pick beats it
        record["why"] = "the estimate's pick did not verify"
    return _least_priced(est, cands, prices, alpha, record, models)


def _least_priced(est: latency.Choice, cands: list[latency.Candidate], prices: dict, alpha: float, record: dict,
                  models: tuple = PRICE_MODELS) -> latency.Choice:
    """The choice of least priced sum over ``models`` among ``prices`` (``{(index, pieces):
    {model: s}}`` in pricing order, the estimate's pick first unless it did not verify: ties go
    to the earlier) and what priced it."""
    def objective(p: dict) -> float:
        return sum(p[m] for m in models)

    (i, q), best = min(prices.items(), key=lambda kv: objective(kv[1]))
    own, base = prices.get((est.index, est.pieces)), prices.get(est.baseline)
    record.update({"schedules": len(prices), "models": list(models), "objective_s": objective(best),
                   **{f"{m}_s": v for m, v in best.items()},
                   "estimate_pick": {"trees": est.name, "pieces": est.pieces,
                                     "objective_s": objective(own) if own else None},
                   "baseline_objective_s": objective(base) if base else None})
    c = cands[i]
    return replace(est, name=c.name, k=c.k, pieces=q, index=i, priced=record,
                   estimate_s=latency.estimate(est.model, c.seconds, c.depth, q * c.chunks, alpha))


def shallow(instance: Instance, f: Forest) -> Forest:
    """One shortest-path tree per root of ``f`` (:func:`.trees.shortest_path_trees`), its time
    the busiest link's: trees crossing it times a shard over its bandwidth."""
    la = instance.topology.link_arrays
    src, dst = (la.dst, la.src) if f.transposed else (la.src, la.dst)
    roots = sorted({t.root for t in f.trees})
    trees, load = shortest_path_trees(src, dst, instance.collective.nodes, roots)
    bw = boxes.pooled(src, dst, la.bandwidth)
    ratio = max(n / bw[arc] for arc, n in load.items()) * f.unit_bw if load else 0.0
    tau = Fraction(ratio).limit_denominator(10 ** 9) if f.opt.tau else f.opt.tau
    return replace(f, k=1, tau=max(tau, f.opt.tau), trees=trees, seconds={})


def packed_seconds(instance: Instance, f: Forest) -> float:
    """The packed trees' bandwidth time: the optimum stretched by ``tau_packed / tau``."""
    return float(optimum_seconds(instance, f) * f.tau / f.opt.tau) if f.opt.tau else 0.0


def _with_header(sched: Schedule, instance: Instance) -> Schedule:
    """The schedule with the instance's collective kind and chunk count in its header."""
    coll = instance.collective
    meta = {"algorithm": "tree-packing"}
    if coll.combining and instance.topology.switches:  # one arrival per send out of a switch: in the time
        meta["switch_copy"] = False  # reversal the j-th forward of a step carries the j-th arrival (a child's sum)
    return replace(sched, collective=coll.kind, chunks=coll.num_chunks, meta=meta)


def _percent(share: Fraction) -> str:
    """A share as the help strings write it: ``Fraction(1, 1000)`` is ``0.1 %``."""
    return f"{float(share) * 100:g} %"


PARAMS = (
    Param("trees", int, None, "trees per shard (default: the fewest that reach the optimum when its k is at "
                              f"most {MAX_TREES}, else the first k up to {MAX_TREES} within "
                              f"{_percent(CLOSE_ENOUGH - 1)} of the optimum)", low=1, high=4096),
    Param("growth", ("breadth-first", "depth-first"), "breadth-first", "how trees grow while packing"),
    Param("shape", ("auto", "greedy"), "auto", "auto: two-level trees (at most one relay between a root and any "
                                               "node) when they fit the optimum, else arcs of Hamiltonian rings "
                                               "(through GPUs, GPU pairs or a box's switch) within "
                                               f"{_percent(rings.TOLERANCE)} of it (at alpha 0 by each door rule "
                                               f"({', '.join(rings.DOOR_RULES)}) and against the greedy packing "
                                               "where it needs no flow-tested growth, the least priced under the "
                                               "objective kept), else the greedy packing in the root "
                                               "order of least FIFO event price; greedy: the greedy packing in id "
                                               "order"),
    Param("objective", tuple(OBJECTIVES), "sync+event", "what the latency choice (alpha > 0) and the choice "
                                                         "between ring and greedy trees (alpha 0) minimise: the "
                                                         "priced sync + event time (one schedule good in both "
                                                         "models), or one model's alone"),
    Param("form", ("auto", "explicit", "compact"), "auto", "explicit: every send listed; compact: the trees plus "
                                                           "the pipeline rule, verified and priced (sync) as that, on "
                                                           "identical boxes one box's trees and the box shifts; auto: "
                                                           f"compact where fewer than {EXPLICIT_PIECES} pieces of "
                                                           f"explicit sends fit {SEND_BUDGET:,} sends"),
    Param("pieces", int, None, f"pipeline pieces per chunk and tree (default: {DEPTH_FACTOR} per hop of the "
                               f"deepest tree and at least {PIECES_FLOOR}, within a budget of {SEND_BUDGET:,} sends, "
                               f"or up to {FILL_SENDS:,} where a reduction's fill prices over "
                               f"{_percent(fill.TARGET)} of its optimum at alpha 0; "
                               "with link latency, the trees (k or 1 per shard, shallower ones at "
                               f"{' and '.join(f'{m}x' for m in SLACKS)} the time, shortest paths) and pieces of "
                               "least sync + event time, priced where the schedules are small, else estimated)",
          low=1, high=1_000_000),
)

PRODUCERS = [Producer("tree-packing", "tree-packing", run,
                      "ForestColl: k pipelined spanning out-trees per GPU at the cut-condition optimum, "
                      "switches removed by edge splitting", params=PARAMS, estimate=planned)]
