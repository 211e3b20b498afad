"""Packing k out-arborescences per root (Edmonds' branching theorem) and mapping them to routes.

Zhao et al., "ForestColl: Throughput-Optimal Collective Communications on Heterogeneous
Network Fabrics" (arXiv 2402.06787), Section 5.2: on the compute nodes left by edge splitting
(:mod:`.splitting`), with integer arc capacities, Edmonds' theorem (J. Edmonds, "Edge-disjoint
branchings", Combinatorial Algorithms 1973) gives ``k w_r`` spanning out-trees rooted at every
root ``r`` that use each arc at most its capacity, because every set ``S`` is entered by at least
as much capacity as there are trees whose partial vertex set misses it. Trees grow one arc at a
time (Lovász's constructive proof, "On two minimax theorems in graph", JCT B 1976), a tree of
multiplicity ``C`` taking arc ``x -> y`` for ``gamma`` of its copies, the largest amount for which
the condition still holds: with a source node per partial tree ``i`` (arcs to its vertices) and
arcs ``x -> s_i`` of capacity ``C_i`` for the other trees, ``gamma = min(C, cap(x, y),
maxflow(x, y) - sum_i C_i)``. A tree that takes fewer copies than it has splits in two.

That costs a max flow per tree arc (hundreds of thousands at 512 GPUs). A network of identical
boxes (moving every node a box on maps it onto itself, :func:`translation`) is first packed by
growing only the first box's trees under per-orbit budgets and moving them box by box
(:func:`pack_by_translation`: no flows; the capacities hold by construction and are checked);
the flow-tested growth runs only when that gets stuck. :func:`shortest_path_trees` gives the
shallowest trees, capacities aside, for the latency choice.

Each tree arc then takes its copies from the arc's pool of original routes (through the removed
switches); where the routes change along the copies the tree splits again (:func:`routed_trees`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...tens.cut_optimum import max_flow
from .splitting import Network, _take, translation


@dataclass
class Tree:
    """A (partial) out-tree of ``root`` taken ``count`` times: its vertices and arcs (in the
    order added, so every arc's tail is reached before it)."""

    root: int
    count: int
    nodes: set = field(default_factory=set)
    arcs: list = field(default_factory=list)

    def copy(self, count: int) -> "Tree":
        """The same partial tree with ``count`` copies."""
        return Tree(self.root, count, set(self.nodes), list(self.arcs))


class _Arcs:
    """The flow network of :func:`_gain` without its per-test arcs, rebuilt only when the
    packing changed (``version``): the remaining capacities, and an arc of infinite capacity
    from every active tree's source node (ids from ``size``) to each of its vertices."""

    def __init__(self):
        self.version, self.built = 0, -1
        self.base: tuple = ()

    def changed(self) -> None:
        """Mark the packing changed (an arc taken, a tree split or finished)."""
        self.version += 1

    def get(self, cap: dict, active: list[Tree], size: int) -> tuple:
        """``(src, dst, cap, infinite, index of each active tree)`` for the current packing."""
        if self.built != self.version:
            inf = sum(cap.values()) + sum(t.count for t in active) + 1
            keys = np.asarray(list(cap), dtype=np.int64).reshape(-1, 2)
            owner = np.concatenate([np.full(len(t.nodes), size + i) for i, t in enumerate(active)])
            members = np.concatenate([np.fromiter(t.nodes, np.int64, len(t.nodes)) for t in active])
            src = np.concatenate([keys[:, 0], owner])
            dst = np.concatenate([keys[:, 1], members])
            c = np.concatenate([np.fromiter(cap.values(), np.int64, len(cap)), np.full(len(members), inf)])
            self.base = (src, dst, c, {id(t): i for i, t in enumerate(active)})
            self.built = self.version
        return self.base


def _gain(cap: dict, active: list[Tree], j: Tree, x: int, y: int, size: int, arcs: _Arcs) -> int:
    """How many copies of tree ``j`` may take arc ``x -> y`` (module doc)."""
    src, dst, c, index = arcs.get(cap, active, size)
    others = np.asarray([index[id(t)] for t in active if t is not j], dtype=np.int64)
    counts = np.asarray([t.count for t in active if t is not j], dtype=np.int64)
    value, _ = max_flow(size + len(active), np.concatenate([src, np.full(len(others), x)]),
                        np.concatenate([dst, size + others]), np.concatenate([c, counts]), x, y)
    return max(0, min(j.count, cap.get((x, y), 0), value - int(counts.sum())))


def pack_by_translation(net: Network, roots: dict[int, int], d: int) -> list[Tree] | None:
    """Trees for the roots of the first box only (ids ``c_0 .. c_{d-1}``), grown breadth first
    in turn (one frontier node per tree per round), each arc of the first box's orbit taken at
    most its capacity in total; then every tree moved box by box (:func:`translation`). An arc's
    orbit under the shifts holds one arc per box, and the moved trees put on each arc of an
    orbit exactly as many copies as the first box's trees take from the orbit, so no arc is
    used beyond its capacity. None when some tree gets stuck (the exact packing is then run)."""
    comp = sorted(net.compute)
    n = len(comp)
    index = {v: i for i, v in enumerate(comp)}
    out_of: dict[int, list[int]] = {}
    for a, b in sorted(key for key in net.cap if key[0] != net.source):
        out_of.setdefault(a, []).append(b)

    def orbit(a: int, b: int) -> tuple[int, int]:
        shift = index[a] // d * d
        return comp[index[a] - shift], comp[(index[b] - shift) % n]

    budget = {key: c for key, c in net.cap.items() if key[0] != net.source and index[key[0]] < d}
    grown = [Tree(r, 1, {r}) for r in comp[:d] for _ in range(roots.get(r, 0))]
    frontiers = [[t.root] for t in grown]
    while any(len(t.nodes) < n for t in grown):
        for tree, frontier in zip(grown, frontiers):
            if len(tree.nodes) == n:
                continue
            if not frontier:
                return None
            x = frontier.pop(0)
            for y in out_of.get(x, ()):
                if y not in tree.nodes and budget[orbit(x, y)] > 0:
                    budget[orbit(x, y)] -= 1
                    tree.nodes.add(y), tree.arcs.append((x, y)), frontier.append(y)
    moved = [Tree(comp[(index[t.root] + j) % n], 1, {comp[(index[v] + j) % n] for v in t.nodes},
                  [(comp[(index[a] + j) % n], comp[(index[b] + j) % n]) for a, b in t.arcs])
             for j in range(0, n, d) for t in grown]
    return moved if _fits(net, moved) else None


def _fits(net: Network, trees: list[Tree]) -> bool:
    """Whether the trees use no arc beyond its capacity."""
    load: dict = {}
    for t in trees:
        for arc in t.arcs:
            load[arc] = load.get(arc, 0) + t.count
    return all(used <= net.cap.get(arc, 0) for arc, used in load.items())


def pack(net: Network, roots: dict[int, int], deadline=None, depth_first: bool = False,
         fast: bool = True, order: list[int] | None = None, grow: bool = True) -> tuple[list[Tree], int] | None:
    """Spanning out-trees on the compute nodes of the split network ``net``: ``roots[r]``
    copies rooted at each root ``r``, every arc used at most its capacity. Returns the trees
    (each with its multiplicity) and the max flows run. With ``fast`` (and breadth-first
    growth), a network of identical boxes is packed by :func:`pack_by_translation` first.
    The roots' trees grow in ``order`` (default: by id); any order keeps Lovász's condition,
    and the order decides which trees get the arcs near the roots. Without ``grow`` no max
    flow is run: None unless the network is packed by translation. Raises RuntimeError if a
    tree cannot be completed (the condition did not hold)."""
    d = translation(net, roots) if fast and not depth_first and order is None else None
    moved = pack_by_translation(net, roots, d) if d is not None else None
    if moved is not None:
        return moved, 0
    if not grow:
        return None
    cap = {key: c for key, c in net.cap.items() if key[0] != net.source}
    out_of: dict[int, list[int]] = {}
    for a, b in sorted(cap):
        out_of.setdefault(a, []).append(b)
    queue = [Tree(r, roots[r], {r}) for r in (sorted(roots) if order is None else order) if roots.get(r, 0) > 0]
    active = list(queue)
    everyone = set(net.compute)
    flows = 0
    done = []
    arcs = _Arcs()
    while queue:
        tree = queue.pop(0)
        if deadline is not None:
            deadline.check("tree packing", f"{len(active)} trees left")
        flows += _grow(tree, cap, out_of, active, queue, everyone, net.nodes, depth_first, arcs)
        if tree.nodes != everyone:
            raise RuntimeError(f"a tree rooted at {tree.root} cannot reach {sorted(everyone - tree.nodes)[:5]}")
        active.remove(tree)
        arcs.changed()
        done.append(tree)
    return done, flows


def _grow(tree: Tree, cap: dict, out_of: dict, active: list, queue: list, everyone: set, size: int,
          depth_first: bool, arcs: _Arcs) -> int:
    """Grow ``tree`` until it spans ``everyone`` or no arc may be added, breadth first (the
    oldest vertex first) or depth first (the newest); returns the flows run."""
    frontier = [tree.root] + [y for _, y in tree.arcs]
    flows = 0
    while frontier and tree.nodes != everyone:
        x = frontier[-1] if depth_first else frontier[0]
        added = False
        for y in out_of.get(x, ()):
            if y in tree.nodes or cap.get((x, y), 0) == 0:
                continue
            gain = _gain(cap, active, tree, x, y, size, arcs)
            flows += 1
            if gain == 0:
                continue
            if gain < tree.count:
                rest = tree.copy(tree.count - gain)
                queue.append(rest)
                active.append(rest)
                tree.count = gain
            tree.arcs.append((x, y))
            tree.nodes.add(y)
            frontier.append(y)
            cap[(x, y)] -= gain
            arcs.changed()
            added = True
            if depth_first:
                break
        if not added or not depth_first:
            frontier.remove(x)
    return flows


@dataclass(frozen=True)
class RoutedTree:
    """Copies ``[lo, hi)`` of the ``k w_r`` units of root ``root``'s data, sent down
    ``routes``: one route (original node ids) per tree arc, each tail reached before."""

    root: int
    lo: int
    hi: int
    routes: tuple[tuple[int, ...], ...]


def hops_of(trees: list[RoutedTree]) -> int:
    """Hops of all routed trees (sends per piece)."""
    return sum(sum(len(r) - 1 for r in t.routes) for t in trees)


def routed_trees(net: Network, trees: list[Tree]) -> list[RoutedTree]:
    """Every tree's arcs mapped to original routes from the split network's pools; a tree whose
    copies take different routes on an arc is split where they change."""
    offset: dict[int, int] = {}
    out = []
    for tree in sorted(trees, key=lambda t: t.root):
        lo = offset.get(tree.root, 0)
        offset[tree.root] = lo + tree.count
        per_arc = [_take(net.pools[arc], tree.count) for arc in tree.arcs]
        cuts = {0, tree.count}
        for segs in per_arc:
            at = 0
            for _, amount in segs:
                at += amount
                cuts.add(at)
        cuts = sorted(cuts)
        for a, b in zip(cuts[:-1], cuts[1:]):
            routes = tuple(_route_at(segs, a) for segs in per_arc)
            out.append(RoutedTree(tree.root, lo + a, lo + b, routes))
    return out


def _route_at(segs: list[list], unit: int) -> tuple[int, ...]:
    """The route of the segment covering copy ``unit``."""
    at = 0
    for route, amount in segs:
        if unit < at + amount:
            return tuple(route)
        at += amount
    raise IndexError(unit)


def shortest_path_trees(src, dst, compute, roots) -> tuple[list[RoutedTree], dict]:
    """One shallowest out-tree per root of ``roots``: breadth first over the links ``src ->
    dst`` (every node may relay; a route runs from the nearest compute node above to the next),
    and the number of trees crossing each link ``(a, b)``. They ignore capacities: the latency
    candidate for messages too small for bandwidth to matter (:mod:`.latency`)."""
    out_of: dict[int, list[int]] = {}
    for a, b in sorted(zip((int(x) for x in src), (int(x) for x in dst))):
        out_of.setdefault(a, []).append(b)
    compute = set(compute)
    trees, load = [], {}
    for r in roots:
        parent, order = {r: r}, [r]
        for x in order:
            for y in out_of.get(x, ()):
                if y not in parent:
                    parent[y] = x
                    order.append(y)
        routes = []
        for v in order[1:]:
            if v not in compute:
                continue
            route = [v]
            while route[-1] != r and (len(route) == 1 or route[-1] not in compute):
                route.append(parent[route[-1]])
            routes.append(tuple(reversed(route)))
            for a, b in zip(routes[-1][:-1], routes[-1][1:]):
                load[(a, b)] = load.get((a, b), 0) + 1
        trees.append(RoutedTree(r, 0, 1, tuple(routes)))
    return trees, load
