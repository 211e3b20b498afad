"""Trees for a few roots, moved to every root: tree packing on identical boxes at thousands of GPUs.

Zhao et al. ("ForestColl", arXiv 2402.06787, Sections 4-5) pack ``k`` spanning out-trees per
root within link capacities ``floor(k tau units)`` after removing switches by edge splitting;
at thousands of GPUs the split network alone has millions of arcs (every pair of a rail
switch's GPUs). On a cluster of identical boxes (:func:`collsynth.instances.box_shift.box_shift`:
commuting automorphisms whose ``m`` products move the first ``d`` GPUs onto every GPU once;
``d = 1`` on DGX SuperPOD, HPN, fat trees) it suffices to grow the trees of those ``d``
roots and move them: moved by every product, the listed trees put ``m / s`` times their use
of an orbit of ``s`` links on each link of it, so an orbit's budget is ``floor(cap s / m)``
and no link carries more than its capacity. The shifts are the box shifts with the switches
above the moved GPUs turned, and a level cut in two, where the ``event`` price per link orbit then
lists fewer copies or fewer products keep links (:mod:`.free_shifts`; larger orbits). The result is a
:class:`~collsynth.tens.pipelined_trees.PipelinedTrees` holding the listed trees and the
shifts (verified and priced in that form).

Trees grow on the topology's own links, a route running from a node of the tree through
switches only to a participant not in it (no switch copies: every route carries its own
piece). Each tree grows like Prim's algorithm, one participant a round in turn with the other
trees: the route of least cost (the sum over its links of one over their bandwidth, so a
box's NVLink is preferred to a NIC), then of most budget left on its tightest link, then
from the node that joined the tree first (the root before the nodes it reached). So a box is
entered over a NIC once and spread over its own switch, and a root spends its own NIC before
a box mate's, which the mate's own tree needs.
"""

from __future__ import annotations

import heapq

import numpy as np

from ...instances import Instance
from ...instances.box_shift import box_shift
from ...tens.cut_optimum import capacities, flow_net
from ...tens.pipelined_trees import PipelinedTrees, link_orbits
from .free_shifts import free_shifts

MAX_ROUTE = 8  # the most hops a route between two participants of a tree takes (through switches)
DEPTH_WEIGHTS = (1.0, 0.5, 0.0)  # a route's key adds this times the cost from the root to its start: shallower
# trees first (fat trees: 6 hops deep at 1.0, 28 at 0.0); where a tree gets stuck, the next (rail Clos under spines)


def translated(instance: Instance, kind: str, transposed: bool, k: int, tau, deadline=None) -> PipelinedTrees | None:
    """The first box's ``k`` trees per root at time ``tau`` (module doc), at one pipeline
    piece per chunk, with the box shifts moving them; on the transposed links for a reversed
    collective (``transposed``: reduce-scatter). None when ``kind`` is not allgather, there is
    no box shift, or a tree finds no route with budget left."""
    topo, coll = instance.topology, instance.collective
    shift = free_shifts(topo, box_shift(topo, coll.nodes))
    if shift is None or kind != "allgather":
        return None
    net0 = flow_net(topo, coll.nodes, [1] * len(coll.nodes), transpose=transposed)
    la = topo.link_arrays
    src, dst = (la.dst, la.src) if transposed else (la.src, la.dst)
    group, scale = link_orbits(la, shift.perms, shift.orders)
    budget = np.zeros(len(la), np.int64)
    caps = capacities(net0, k, tau)
    reps = scale > 0
    budget[reps] = np.floor(caps[reps] / scale[reps] + 1e-9).astype(np.int64)
    roots = shift.representatives(coll.nodes)
    for weight in DEPTH_WEIGHTS:
        grower = _Grower(topo.size, src, dst, group, budget, 1.0 / net0.units, coll.nodes, topo.switches, weight)
        trees = [grower.tree(r) for r in roots for _ in range(k)]
        if grower.grow(trees, deadline):
            break
    else:
        return None
    cols: tuple[list, list, list] = ([], [], [])
    ptr = [0]
    for t in trees:
        for col, values in zip(cols, _hops(t)):
            col.extend(values)
        ptr.append(len(cols[0]))
    s, d, before = (np.asarray(c, dtype=np.int64) for c in cols)
    lo = np.tile(np.arange(k), len(roots))
    return PipelinedTrees("reduce_scatter" if transposed else "allgather", coll.size, coll.num_chunks,
                          coll.chunks_per_node, 1, k, np.repeat(np.asarray(roots, np.int64), k), lo, lo + 1,
                          np.asarray(ptr, np.int64), s, d, before, shift=shift.perms, orders=shift.orders)


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
    """Prim-like growth (module doc) over the links ``src -> dst``, each with its orbit
    ``group``, the orbits' shared ``budget`` and a ``cost`` (one over its bandwidth units).
    Each tree keeps one label-correcting search from all its nodes at once: a node of the tree
    starts routes at ``depth_weight`` times its cost from the root, a switch or a participant
    outside the tree is labelled with its cheapest route's key, and the participant of least
    key joins next. A route whose links ran out of budget meanwhile (another tree took them)
    restarts the tree's search without them."""

    def __init__(self, n: int, src, dst, group, budget, cost, participants, switches, depth_weight: float):
        order = np.argsort(src, kind="stable")
        self.ptr = np.r_[0, np.cumsum(np.bincount(src, minlength=n))].tolist()
        self.nbr, self.link, self.dst = dst[order].tolist(), order.tolist(), dst.tolist()
        self.group, self.budget, self.cost = group.tolist(), budget.tolist(), np.asarray(cost, float).tolist()
        self.depth_weight, self.n = depth_weight, n
        part = np.zeros(n, bool)
        part[list(participants)] = True
        is_switch = np.zeros(n, bool)
        is_switch[list(switches)] = True
        self.part, self.is_switch = part.tolist(), is_switch.tolist()
        self.want = int(part.sum())

    def tree(self, root: int) -> dict:
        """A tree holding its root alone, its search started."""
        t = {"root": root, "nodes": {root}, "depth": {root: 0.0}, "routes": [], "seq": 0}
        self._restart(t)
        return t

    def grow(self, trees: list[dict], deadline=None) -> bool:
        """Add one participant to every unfinished tree in turn until each holds all of them;
        False when one has no route with budget left."""
        while any(len(t["nodes"]) < self.want for t in trees):
            if deadline is not None:
                deadline.check("translated trees", f"{len(trees)} trees")
            for t in trees:
                if len(t["nodes"]) < self.want and not self._step(t):
                    return False
        return True

    def _restart(self, t: dict) -> None:
        """The tree's search from scratch: every node of it a start at its weighted depth."""
        for name in ("label", "parent", "hops", "heap"):
            t.setdefault(name, {} if name != "heap" else []).clear()
        for x, d in t["depth"].items():
            self._push(t, x, self.depth_weight * d, None, 0)

    def _push(self, t: dict, v: int, key: float, parent, hops: int) -> None:
        t["label"][v], t["parent"][v], t["hops"][v] = key, parent, hops
        t["seq"] += 1
        heapq.heappush(t["heap"], (round(key, 12), t["seq"], v))

    def _step(self, t: dict) -> bool:
        """Settle labels until a participant outside the tree comes out of the heap and its
        route still has budget (else restart without the spent links); False when the heap
        empties."""
        label, heap, nodes = t["label"], t["heap"], t["nodes"]
        while heap:
            key, _, u = heapq.heappop(heap)
            if key > round(label[u], 12):
                continue
            if u not in nodes and not self.is_switch[u]:
                links = self._route(t, u)
                groups = [self.group[lid] for lid in links]
                if any(self.budget[g] < groups.count(g) for g in groups):
                    self._restart(t)
                    continue
                for g in groups:
                    self.budget[g] -= 1
                x = self._start(t, u)
                t["routes"].append((x, *(self.dst[lid] for lid in links)))
                t["depth"][u] = t["depth"][x] + sum(self.cost[lid] for lid in links)
                nodes.add(u)
                self._push(t, u, self.depth_weight * t["depth"][u], None, 0)
                return True
            self._relax(t, u, label[u])
        return False

    def _relax(self, t: dict, u: int, key: float) -> None:
        """Offer ``u``'s links with budget to its neighbours: switches, and participants not in
        the tree (a route ends there), within :data:`MAX_ROUTE` hops."""
        hops = t["hops"][u] + 1
        if hops > MAX_ROUTE:
            return
        label, nodes = t["label"], t["nodes"]
        for i in range(self.ptr[u], self.ptr[u + 1]):
            v, lid = self.nbr[i], self.link[i]
            if self.budget[self.group[lid]] <= 0 or v in nodes:
                continue
            if not self.is_switch[v] and not self.part[v]:
                continue
            nd = key + self.cost[lid]
            if nd < label.get(v, float("inf")) - 1e-12:
                self._push(t, v, nd, (u, lid), hops)

    def _route(self, t: dict, y: int) -> list[int]:
        """The links of ``y``'s labelled route, from the tree node it starts at."""
        links = []
        at = t["parent"][y]
        while at is not None:
            u, lid = at
            links.append(lid)
            at = t["parent"][u]
        return links[::-1]

    def _start(self, t: dict, y: int) -> int:
        """The tree node ``y``'s labelled route starts at."""
        at = y
        while t["parent"][at] is not None:
            at = t["parent"][at][0]
        return at
