"""A packed forest as trees plus a pipeline rule (:mod:`collsynth.tens.pipelined_trees`).

The tree-packing producer's schedule (Zhao et al., "ForestColl", arXiv 2402.06787, Section 5:
pipelined trees) is that form expanded; :func:`pipelined` builds the form from a packed
:class:`~collsynth.solvers.packing.producer.Forest`, so the schedule can be verified and priced
(``sync``) in memory of trees x hops instead of trees x hops x pieces.
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace

import numpy as np

from ...instances import Instance
from ...instances.box_shift import box_shift
from ...tens.cut_optimum import capacities, flow_net
from ...tens.pipelined_trees import PipelinedTrees, link_orbits, price_sync

MAX_PIECES = 8192  # the deepest pipeline :func:`least_sync` tries
MAX_ROUTE = 8  # the longest route (hops through switches) a translated tree takes between two participants


def pipelined(instance: Instance, forest, pieces: int, hops) -> PipelinedTrees:
    """The trees of ``forest`` (a :class:`~collsynth.solvers.packing.producer.Forest`) cut into
    ``pieces`` pipeline pieces per chunk; ``hops(tree)`` gives a routed tree's ``(src, dst,
    steps below the root)`` (:func:`~collsynth.solvers.packing.producer._tree_hops` with the
    topology's instant hops)."""
    coll = instance.collective
    kind = {("allgather", False): "allgather", ("allgather", True): "reduce_scatter",
            ("broadcast", False): "broadcast", ("broadcast", True): "reduce"}[(forest.kind, forest.transposed)]
    cols: tuple[list, list, list] = ([], [], [])
    ptr = [0]
    for tree in forest.trees:
        for col, values in zip(cols, hops(tree)):
            col.extend(values)
        ptr.append(len(cols[0]))
    src, dst, before = (np.asarray(c, dtype=np.int64) for c in cols)
    return PipelinedTrees(kind, coll.size, coll.num_chunks, coll.chunks_per_node, int(pieces), int(forest.k),
                          np.array([t.root for t in forest.trees], np.int64),
                          np.array([t.lo for t in forest.trees], np.int64),
                          np.array([t.hi for t in forest.trees], np.int64), np.asarray(ptr, np.int64), src, dst, before)


def translated(instance: Instance, kind: str, transposed: bool, k: int, tau, deadline=None) -> PipelinedTrees | None:
    """Trees for the first box's roots only, grown on the topology's own links (routes through
    switches, no edge splitting) and kept with the box shift that moves them to every other
    box (:func:`collsynth.instances.box_shift.box_shift`; :class:`PipelinedTrees` with
    ``shift``), at one piece per chunk; None when the topology has no box shift or a tree gets
    stuck. Each of the ``k`` trees per shard grows breadth first in turn with the others, one
    frontier node a round, taking every participant it reaches through switches over links
    with budget left. A link's budget is its capacity at time ``tau`` (``floor(k tau units)``,
    Zhao et al., "ForestColl", arXiv 2402.06787, Section 5) shared by its orbit: moved ``j <
    m`` boxes on, the listed trees put ``m / s`` times their use of an orbit of ``s`` links on
    each of its links, so the orbit's budget is ``floor(cap s / m)`` and no link is loaded
    beyond its capacity (the moved trees are priced anyway)."""
    topo, coll = instance.topology, instance.collective
    shift = box_shift(topo, coll.nodes)
    if shift is None or kind != "allgather":
        return None
    net0 = flow_net(topo, coll.nodes, [1] * len(coll.nodes), transpose=transposed)
    la = topo.link_arrays
    src, dst = (la.dst, la.src) if transposed else (la.src, la.dst)
    group, scale = link_orbits(la, shift.perm, shift.order)
    budget = np.zeros(len(la), np.int64)
    caps = capacities(net0, k, tau)
    reps = scale > 0
    budget[reps] = np.floor(caps[reps] / scale[reps] + 1e-9).astype(np.int64)
    grower = _Grower(topo.size, src, dst, group, budget, coll.nodes, topo.switches)
    roots = shift.representatives(coll.nodes)
    trees = [grower.tree(r) for r in roots for _ in range(k)]
    if not grower.grow(trees, deadline):
        return None
    kind_name = "reduce_scatter" if transposed else "allgather"
    cols: tuple[list, list, list] = ([], [], [])
    ptr = [0]
    for t in trees:
        for col, values in zip(cols, _hops(t)):
            col.extend(values)
        ptr.append(len(cols[0]))
    s, d, before = (np.asarray(c, dtype=np.int64) for c in cols)
    lo = np.tile(np.arange(k), len(roots))
    return PipelinedTrees(kind_name, coll.size, coll.num_chunks, coll.chunks_per_node, 1, k,
                          np.repeat(np.asarray(roots, np.int64), k), lo, lo + 1, np.asarray(ptr, np.int64), s, d, before,
                          shift=shift.perm, copies=shift.order)


def _hops(t: dict) -> tuple[list[int], list[int], list[int]]:
    """A grown tree's hops ``(src, dst, steps below the root)``: each route's first hop one step
    after its first node was reached, every further hop one step later."""
    depth = {t["root"]: 0}
    src, dst, before = [], [], []
    for route in t["routes"]:
        at = depth[route[0]]
        for i, (a, b) in enumerate(zip(route[:-1], route[1:])):
            src.append(a), dst.append(b), before.append(at + i)
        depth[route[-1]] = at + len(route) - 1
    return src, dst, before


class _Grower:
    """The breadth-first growth of :func:`translated` over the links ``src -> dst`` (per link
    its orbit ``group`` and the orbit's ``budget``): routes run from a tree's node through
    switches only to a participant not yet in it."""

    def __init__(self, n: int, src, dst, group, budget, participants, switches):
        order = np.argsort(src, kind="stable")
        self.ptr = np.r_[0, np.cumsum(np.bincount(src, minlength=n))].tolist()
        self.nbr, self.link = dst[order].tolist(), order.tolist()
        self.group, self.budget = group.tolist(), budget.tolist()
        self.part = np.zeros(n, bool)
        self.part[list(participants)] = True
        self.is_switch = np.zeros(n, bool)
        self.is_switch[list(switches)] = True
        self.want = int(self.part.sum())

    def tree(self, root: int) -> dict:
        """A tree holding its root alone."""
        return {"root": root, "nodes": {root}, "order": [root], "routes": [], "frontier": deque(), "dead": set()}

    def grow(self, trees: list[dict], deadline=None) -> bool:
        """Grow every tree in turn until each holds every participant, over routes of at most
        2, 4, .. :data:`MAX_ROUTE` hops (a phase starts again from every node of a tree, so a
        longer route is taken only where shorter ones left a participant out); False if one
        gets stuck."""
        for limit in range(2, MAX_ROUTE + 1, 2):
            for t in trees:
                t["frontier"], t["dead"] = deque(t["order"]), set()
            while any(len(t["nodes"]) < self.want and t["frontier"] for t in trees):
                if deadline is not None:
                    deadline.check("translated trees", f"{len(trees)} trees, routes of {limit} hops")
                for t in trees:
                    if len(t["nodes"]) < self.want and t["frontier"]:
                        self._explore(t, t["frontier"].popleft(), limit)
            if all(len(t["nodes"]) == self.want for t in trees):
                return True
        return False

    def _explore(self, t: dict, x: int, limit: int) -> None:
        """Take every route from ``x`` through switches (shortest first, budgets left) to a
        participant not in ``t``, searching again while some were taken; a switch next to ``x``
        from which a search found none can never lead ``t`` anywhere new in this phase (budgets
        only fall, and no node of ``t`` is nearer to it)."""
        while True:
            parent, found, seen = self._search(t, x, limit)
            if not found:
                t["dead"].update(seen)
                return
            took = False
            for y in found:
                route, groups = [y], []
                while route[-1] != x:
                    u, lid = parent[route[-1]]
                    groups.append(self.group[lid])
                    route.append(u)
                if y in t["nodes"] or any(self.budget[g] < groups.count(g) for g in groups):
                    continue
                for g in groups:
                    self.budget[g] -= 1
                t["nodes"].add(y), t["order"].append(y)
                t["routes"].append(tuple(reversed(route)))
                t["frontier"].append(y)
                took = True
            if not took:
                return

    def _search(self, t: dict, x: int, limit: int) -> tuple[dict, list[int], list[int]]:
        """Breadth first from ``x`` through switches (not ``t``'s dead ones) over links with
        budget, routes of at most ``limit`` hops: ``(parent link per node, participants reached
        not in t, the switches next to x visited)``."""
        parent, found, seen, queue = {x: None}, [], [], [x]
        nodes, dead = t["nodes"], t["dead"]
        hops = {x: 0}
        for u in queue:
            if hops[u] >= limit:
                continue
            for i in range(self.ptr[u], self.ptr[u + 1]):
                v = self.nbr[i]
                lid = self.link[i]
                if v in parent or self.budget[self.group[lid]] <= 0:
                    continue
                if self.is_switch[v]:
                    if v not in dead:
                        parent[v], hops[v] = (u, lid), hops[u] + 1
                        queue.append(v)
                        if hops[v] == 1:  # no other node of the tree reaches it in fewer hops
                            seen.append(v)
                elif self.part[v] and v not in nodes:
                    parent[v] = (u, lid)
                    found.append(v)
        return parent, found, seen


def least_sync(f: PipelinedTrees, instance: Instance, most: int = MAX_PIECES) -> tuple[PipelinedTrees, object]:
    """``(trees, price)`` at the pipeline depth of least ``sync`` price
    (:func:`collsynth.tens.pipelined_trees.price_sync`): powers of two from 1 to ``most``, then
    the two midpoints beside the best (the price is unimodal in the depth: the fill, ``(D - 1)
    / P`` of the bandwidth time, falls as latency, ``(P + D - 1)`` alphas, grows; Zhao et al.,
    NSDI 2025, Section 3.2)."""
    priced: dict = {}

    def at(p: int):
        if p not in priced:
            priced[p] = price_sync(replace(f, pieces=p), instance)
        return priced[p]

    best = min((1 << i for i in range(most.bit_length())), key=lambda p: at(p).total_s)
    for p in (best * 3 // 4, best * 3 // 2):
        if 1 <= p <= most:
            at(p)
    p = min(priced, key=lambda q: priced[q].total_s)
    return replace(f, pieces=p), priced[p]
