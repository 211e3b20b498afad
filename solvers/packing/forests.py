"""Packing one forest: the optimum's tree count, then two-level, ring or greedy trees.

Zhao et al., "ForestColl: Throughput-Optimal Collective Communications on Heterogeneous
Network Fabrics" (arXiv 2402.06787), Sections 4-5: the optimum ``(tau, k)`` by the cut
condition (:mod:`collsynth.tens.cut_optimum`), switches and other relays removed by edge
splitting (:mod:`.splitting`), ``k`` out-trees per root packed on the compute nodes
(:mod:`.trees`) and mapped back to routes through the switches. :func:`forest` packs one
forest, by shape (module doc of :mod:`.producer`): trees with at most one relay
(:mod:`.twolevel`), arcs of Hamiltonian rings (:mod:`.rings`), or the greedy packing in the root
order whose schedule prices least under ``event`` (:mod:`.orders`); :func:`by_shape` prices
ring trees against the greedy packing at alpha 0; :func:`shallow` is one shortest-path tree per
root, a latency candidate.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from fractions import Fraction

from ...instances import Instance
from ...instances.box_shift import box_shift
from ...tens.cut_optimum import FlowTooLarge, Optimum, capacities, fixed_k, flow_net, optimum
from ..producers import Options, Unsupported
from . import boxes, feeders, orders, port_slack, rings, shapes, twolevel
from .emission import auto_pieces, emit, with_header
from .packed import Forest
from .run_params import OBJECTIVES, asked_shape, objective_name
from .shallow_rooted import shallow_trees as shallow_rooted_trees
from .shallow_rooted import staggered_trees as shallow_staggered
from .splitting import network, remove_relays, split_all_evenly
from .trees import pack, routed_trees, shortest_path_trees

MAX_TREES = 16  # the automatic tree count per shard tries k = 1 .. this (fewer trees: faster packing, shallower)
CLOSE_ENOUGH = Fraction(1001, 1000)  # and takes the first k whose time is within this factor of the optimum
SHALLOW_SLOTS = 2_048  # trees x GPUs beyond which a rooted forest is not made shallow (TACOS 4x4x2: 192)
TWO_LEVEL_MULTIPLES = (1, 2)  # two-level trees are tried at k and 2 k trees per shard (finer shares fit more often)


def forest(instance: Instance, kind: str, transposed: bool, deadline=None, depth_first: bool = False,
           trees: int | None = None, slack: Fraction = Fraction(1), shape: str = "auto",
           probe: bool = False, hold_back: bool = False) -> Forest | None:
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
    switch that serves its in-links first come, first served then keeps the trees' mix).
    With ``hold_back`` the greedy packing runs on the network whose links off the optimum's cut
    give up half their spare (:func:`.port_slack.held_back`; None when none has any to give).
    The optimum, splitting and packing are ForestColl's (Zhao et al., "ForestColl", arXiv 2402.06787, Sections 4-5)."""
    stopped: list = []
    try:
        f = _forest(instance, kind, transposed, deadline, depth_first, trees, slack, shape, stopped, probe, hold_back)
    except FlowTooLarge as e:
        raise Unsupported(f"tree-packing: {e}") from None
    if f is not None and transposed:  # a reduction's relays share each switch's in-links evenly (FIFO switches)
        f = replace(f, trees=feeders.balanced(f.trees, instance.topology, list(instance.collective.nodes), True))
    return replace(f, stopped=stopped) if stopped and f is not None else f


def _forest(instance: Instance, kind: str, transposed: bool, deadline, depth_first: bool, trees: int | None,
            slack: Fraction, shape: str, stopped: list, probe: bool = False, hold_back: bool = False) -> Forest | None:
    """:func:`forest`, its flows fitting the solver."""
    coll = instance.collective
    weight = [1] * len(coll.nodes) if kind == "allgather" else [int(v == coll.root) for v in coll.nodes]
    clock = {"start": time.perf_counter()}
    net0 = flow_net(instance.topology, coll.nodes, weight, transpose=transposed)
    opt, share = optimum(net0), None
    if hold_back:  # packed greedily on the held-back network, whose optimum is the same in seconds
        held = port_slack.held_back(net0, opt)
        if held is None:
            return None
        (net0, opt, share), shape = held, "greedy"
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
    return replace(f, held_back=str(share)) if hold_back else f


def greedy(net0, opt: Optimum, k: int, tau: Fraction, kind: str, transposed: bool, model: boxes.Boxes,
           step: int | None, clock: dict, deadline=None, depth_first: bool = False,
           probe: bool = False) -> tuple | None:
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
    schedules are ranked. The packing is ForestColl's greedy growth (Zhao et al.,
    "ForestColl", arXiv 2402.06787, Section 5.2) in each root order (:mod:`.orders`)."""
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
        finished[name] = (trees, with_header(emit(instance, g, min(orders.SELECT_PIECES, auto_pieces(trees, c))),
                                              instance))
    trees, tried, name = orders.choose(instance, finished, deadline)
    seconds = {**f.seconds, "order_search_s": time.perf_counter() - t0} if tried else f.seconds
    return replace(f, trees=trees, seconds=seconds, order=name, orders_tried=[t.as_dict() for t in tried])


def two_level(net0, opt: Optimum, k: int, tau: Fraction, kind: str, transposed: bool, clock: dict,
              deadline=None, stopped: list | None = None, model: boxes.Boxes | None = None) -> Forest | None:
    """Two-level trees (:func:`.twolevel.find`) at ``k`` or ``TWO_LEVEL_MULTIPLES`` times ``k``
    trees per shard and time ``tau``, as a :class:`.packed.Forest`; None when none fit (or the system
    is too large to try). The multiples only help integrality: once the LP relaxation is proven
    to have no solution they are not tried (one stopped by its limit proves nothing: ``stopped``).
    Any ``k w_r`` spanning out-trees within the capacities are a ForestColl packing (Zhao et
    al., "ForestColl", arXiv 2402.06787, Section 5.2; :mod:`.twolevel`)."""
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
    :class:`.packed.Forest` objects at their exact times; none when the boxes (``model``, :mod:`.boxes`)
    have no ring layout, or the rings miss the optimum. Arcs of Hamiltonian rings are
    spanning out-trees, so a ForestColl packing where they fit its capacities (Zhao et al.,
    "ForestColl", arXiv 2402.06787, Section 5.2; :mod:`.rings`)."""
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
    least priced sum under the ``objective`` parameter's models (:data:`.run_params.OBJECTIVES`), each
    emitted at the pieces the run emits it at (the ``pieces`` parameter, else
    :func:`.emission.auto_pieces`) and verified. Compared for an allgather or broadcast alone at alpha 0
    with ``shape`` ``auto``, where those pieces are the run's (at a latency the latency choice
    picks them, :func:`.pick.pick`; an allreduce's halves are chosen together, :func:`.joint.joint`)."""
    if (f.shape != "rings" or f.transposed or instance.collective.kind != f.kind or asked_shape(options) != "auto"
            or float(instance.topology.link_arrays.alpha.max()) > 0):
        return f
    t0 = time.perf_counter()
    ring = replace(f, alternatives=[])
    probe = forest(instance, f.kind, False, deadline, shape="greedy", probe=True)
    cands = [ring] + f.alternatives + ([probe] if probe is not None else [])
    if len(cands) == 1:
        return ring
    c = instance.collective.chunks_per_node
    pieces = options.params.get("pieces")
    finished = {_shape_name(g): (lambda g=g: with_header(emit(instance, g, pieces or auto_pieces(g.trees, c)),
                                                         instance)) for g in cands}
    objective = objective_name(options)
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
    of them if none is). The least time at a fixed ``k`` is ForestColl's fixed-k search
    (Zhao et al., "ForestColl", arXiv 2402.06787, Section 4)."""
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


def shallow_rooted(instance: Instance, f: Forest, deadline=None) -> Forest | None:
    """``f`` (a rooted collective's forest, greedy or not) as the same number of trees made as
    shallow as :func:`.shallow_rooted.shallow_trees` gets them: the greedy packing (Zhao et
    al., "ForestColl", arXiv 2402.06787, Section 5.2) at ``f``'s trees and time on the split
    network, its parents exchanged until every compute node is within a depth, tried from the
    packing's own depth down, one hop at a time, until one is not reached, then (or from the
    packing's trees) each tree within its own least depth where some can be shallower
    (:func:`.shallow_rooted.staggered_trees`; the forest then ``staggered``, its shallower trees
    taking more pieces, :mod:`.staggered`); None when none is found (or the collective has no
    root, or more than :data:`SHALLOW_SLOTS` parents to choose)."""
    coll = instance.collective
    if coll.root is None or f.k * len(coll.nodes) > SHALLOW_SLOTS:
        return None
    net0 = flow_net(instance.topology, coll.nodes, [int(v == coll.root) for v in coll.nodes], transpose=f.transposed)
    model = boxes.of_flow_net(net0)
    roots = {c: f.k * w for c, w in zip(net0.compute, net0.weight)}
    net = network(net0.nodes, net0.src, net0.dst, capacities(net0, f.k, f.tau), net0.compute, roots,
                  f.k * net0.total_weight)
    try:
        remove_relays(net, deadline, box_of=model.box_of)
    except RuntimeError:
        return None
    split = net.copy()
    packed = pack(net, roots, deadline)
    if packed is None:
        return None
    parents = [{v: u for u, v in t.arcs} for t in packed[0] for _ in range(t.count)]
    near, deep = _depths(split, coll.root, parents)
    best, reached = None, deep
    for depth in range(deep - 1, near - 1, -1):  # down from the packing's depth, until a depth is not reached
        if deadline is not None and deadline.expired():
            break
        trees = shallow_rooted_trees(split, coll.root, [dict(p) for p in parents], depth, deadline=deadline)
        if trees is None:
            break
        best, parents, reached = trees, [{v: u for u, v in t.arcs} for t in trees], depth
    own = None if deadline is not None and deadline.expired() else \
        shallow_staggered(split, coll.root, parents, reached, deadline=deadline)
    if best is None and own is None:
        return None
    return replace(f, trees=routed_trees(split.copy(), own or best), shape="shallow", alternatives=[], order="id",
                   orders_tried=[], staggered=own is not None)


def _depths(net, root: int, parents: list[dict]) -> tuple[int, int]:
    """The root's eccentricity over the compute nodes and the deepest of ``parents``' trees, in
    hops (a route through a switch counts its hops)."""
    hops = {a: max(len(r) - 1 for r, _ in pool) for a, pool in net.pools.items() if pool}
    dist, frontier = {root: 0}, [root]
    while frontier:  # the least hops first (Dijkstra on small integer weights)
        frontier.sort(key=dist.get)
        u = frontier.pop(0)
        for (a, b), h in hops.items():
            if a == u and dist[u] + h < dist.get(b, math.inf):
                dist[b] = dist[u] + h
                frontier.append(b)
    level = {root: 0}

    def depth(p: dict, v: int) -> int:
        if v not in level:
            level[v] = depth(p, p[v]) + hops[(p[v], v)]
        return level[v]

    deepest = 0
    for p in parents:
        level = {root: 0}
        deepest = max([deepest] + [depth(p, v) for v in p])
    return max(d for v, d in dist.items() if v in set(net.compute)), deepest
