"""Shallow trees for a rooted collective: the root's ``k`` spanning out-trees within the split
network's capacities, made shallow by exchanging parents (:func:`shallow_trees`).

A rooted reduce or broadcast pipelined down trees of depth ``d`` in ``P`` pieces takes ``P + d -
1`` steps (Thakur et al., "Optimization of Collective Communication Operations in MPICH", IJHPCA
2005, Section 4), so its ``sync`` price is ``(P + d - 1)(alpha + T / P)`` and its fill under
``event`` about ``(d - 1) T / P``: the deeper the trees, the further from the bound
(:mod:`collsynth.tens.bounds.rooted_depth`). Edmonds' theorem (J. Edmonds, "Edge-disjoint
branchings", 1973; Zhao et al., "ForestColl", arXiv 2402.06787, Section 5.2) says ``k`` trees
fit the capacities at the optimum's time, and ForestColl's greedy growth finds them, but not
shallow ones (TACOS's ring x complete x switch 4x4x2: 13 hops where every GPU is within 5 of
the root).

Here each tree gives every compute node but the root one parent: a *slot*, one unit of an arc
into it (an arc of capacity ``c`` offers ``c`` slots); the trees take distinct slots, so any
such choice keeps the capacities, and it is a forest of spanning trees exactly when following
parents from every node reaches the root. Starting from the trees of some packing, a local
search exchanges two trees' slots at a node (or moves a tree to a free slot), keeping an
exchange when it does not raise the trees' hops beyond ``depth`` (summed over nodes, a cycle
counting as far too deep) and, with a small chance, otherwise (simulated annealing). A route
through a switch counts its hops (the split network's pools).

Each tree can also be held to its own depth (:func:`staggered_trees`): a tree entering the root
by a link whose tail is far from some GPU (without passing the root) cannot be as shallow as
the others, and a pipeline whose shallower trees take more pieces (:mod:`.staggered`) gains
from every tree as shallow as it can be. TACOS 4x4x2: the tree through the root's switch 7
hops deep, the five others 6.
"""

from __future__ import annotations

import math
import random

import networkx as nx

from .trees import Tree

MOVES = 100_000  # exchanges tried at most (TACOS 4x4x2: 7 hops from 13 in a few seconds)
CYCLE = 1_000  # a node that does not reach the root counts as this many hops too deep


def shallow_trees(net, root: int, parents: list[dict], depth: int | list[int], moves: int = MOVES,
                  seed: int = 0, deadline=None) -> list[Tree] | None:
    """Trees (one copy each) over the split network ``net`` (``net.cap``: arc capacities,
    ``net.pools``: each arc's routes) whose every compute node is at most ``depth`` hops below
    ``root`` (or, a list, tree ``i``'s within ``depth[i]``), from the start ``parents`` (one
    ``{node: parent}`` per tree, taking distinct slots); None when the search does not get there within ``moves`` exchanges or the run is out of
    time (module doc).

    A ring of three GPUs both ways, two trees from 0, started as two chains 0 -> 1 -> 2 and
    0 -> 2 -> 1 (each 2 deep): within 2 they stay, within 1 no pair of trees can be.

    >>> from types import SimpleNamespace as N
    >>> arcs = {(0, 1): 1, (1, 0): 1, (1, 2): 1, (2, 1): 1, (0, 2): 1, (2, 0): 1}
    >>> net = N(cap=arcs, compute=(0, 1, 2), pools={a: [[a, 1]] for a in arcs})
    >>> [t.arcs for t in shallow_trees(net, 0, [{1: 0, 2: 1}, {2: 0, 1: 2}], 2)]
    [[(0, 1), (1, 2)], [(0, 2), (2, 1)]]
    >>> shallow_trees(net, 0, [{1: 0, 2: 1}, {2: 0, 1: 2}], 1) is None
    True
    """
    hops = {a: max(len(r) - 1 for r, _ in pool) for a, pool in net.pools.items() if pool}
    nodes = [v for v in net.compute if v != root]
    free = {v: _free_slots(net, v, [p[v] for p in parents]) for v in nodes}
    k = len(parents)
    limit = [depth] * len(parents) if isinstance(depth, int) else list(depth)
    cost = [_excess(p, root, hops, d) for p, d in zip(parents, limit)]
    rng = random.Random(seed)
    heat = 2.0
    for move in range(moves):
        total = sum(cost)
        if total == 0:
            return [_tree(net, root, p) for p in parents]
        if deadline is not None and move % 1000 == 0 and deadline.expired():
            return None
        v = rng.choice(nodes)
        i = rng.randrange(k)
        j = rng.randrange(k + len(free[v]))
        if j == i:
            continue
        if j < k:
            parents[i][v], parents[j][v] = parents[j][v], parents[i][v]
            new = (_excess(parents[i], root, hops, limit[i]), _excess(parents[j], root, hops, limit[j]))
            delta = new[0] + new[1] - cost[i] - cost[j]
            if delta <= 0 or rng.random() < math.exp(-delta / heat):
                cost[i], cost[j] = new
            else:
                parents[i][v], parents[j][v] = parents[j][v], parents[i][v]
        else:
            slot = j - k
            old = parents[i][v]
            parents[i][v] = free[v][slot]
            new = _excess(parents[i], root, hops, limit[i])
            if new - cost[i] <= 0 or rng.random() < math.exp(-(new - cost[i]) / heat):
                free[v][slot], cost[i] = old, new
            else:
                parents[i][v] = old
        heat = max(0.05, heat * 0.99995)
    return None


def least_depths(net, root: int, parents: list[dict]) -> list[int]:
    """Per tree (``{node: parent}``), the fewest hops below ``root`` its deepest compute node
    can be given the root's children in it: the farthest compute node's hops from them in the
    split network without the root, plus the hops from the root to the nearest such child (a
    route through a switch counts its hops). TACOS 4x4x2 to GPU 0: 7 for the tree entering the
    root from its pair GPU through their switch, 6 for those entering over a ring or complete
    link (:mod:`.staggered`).

    Two chains over a ring of four from 0, one entering at 1, one at 3: the farthest GPU
    without 0 is 2 hops from either, so both are at least 3 deep.

    >>> from types import SimpleNamespace as N
    >>> arcs = [(a, b) for a, b in ((0, 1), (1, 2), (2, 3), (3, 0))] + [(b, a) for a, b in ((0, 1), (1, 2), (2, 3), (3, 0))]
    >>> net = N(compute=(0, 1, 2, 3), pools={a: [[a, 1]] for a in arcs})
    >>> least_depths(net, 0, [{1: 0, 2: 1, 3: 2}, {3: 0, 2: 3, 1: 2}])
    [3, 3]
    """
    hops = {a: max(len(r) - 1 for r, _ in pool) for a, pool in net.pools.items() if pool}
    graph = nx.DiGraph((a, b, {"hops": h}) for (a, b), h in hops.items() if root not in (a, b))
    compute = set(net.compute) - {root}
    source = ("entering the root's children",)
    least = []
    for parent in parents:  # one source joined to the tree's root children by the root's hops to them
        graph.add_edges_from((source, v, {"hops": hops[(root, v)]}) for v, u in parent.items() if u == root)
        dist = nx.single_source_dijkstra_path_length(graph, source, weight="hops")
        graph.remove_node(source)
        least.append(max((dist.get(v, math.inf) for v in compute), default=0))
    return least


def staggered_trees(net, root: int, parents: list[dict], depth: int, moves: int = MOVES, seed: int = 0,
                    deadline=None) -> list[Tree] | None:
    """Trees as :func:`shallow_trees` gets them from ``parents`` (all within ``depth``), each
    within its own least depth (:func:`least_depths`, at most ``depth``), for a pipeline whose
    shallower trees take more pieces (:mod:`.staggered`); None where no tree can be shallower
    than ``depth`` or the search does not get there."""
    limits = [min(depth, d) for d in least_depths(net, root, parents)]
    if all(d >= depth for d in limits):
        return None
    return shallow_trees(net, root, [dict(p) for p in parents], limits, moves, seed, deadline)


def _free_slots(net, v: int, taken: list[int]) -> list[int]:
    """The parents (one entry per unit of an arc into ``v``) no tree takes."""
    slots = [u for (u, w), c in net.cap.items() if w == v and u in set(net.compute) for _ in range(c)]
    for u in taken:
        slots.remove(u)
    return slots


def _excess(parent: dict, root: int, hops: dict, depth: int) -> int:
    """Hops beyond ``depth`` summed over the tree's nodes (:data:`CYCLE` for a node that does
    not reach ``root``)."""
    level = {root: 0}
    out = 0
    for v in parent:
        path = []
        while v not in level and len(path) <= len(parent):
            path.append(v)
            v = parent[v]
        if v not in level:
            for w in path:
                level[w] = math.inf
            out += CYCLE * len(path)
            continue
        for w in reversed(path):
            level[w] = level[parent[w]] + hops[(parent[w], w)]
            out += max(0, level[w] - depth) if level[w] < math.inf else CYCLE
    return out


def _tree(net, root: int, parent: dict) -> Tree:
    """One copy of the tree of ``parent``, its arcs breadth first (each tail reached before)."""
    children: dict[int, list[int]] = {}
    for v, u in sorted(parent.items()):
        children.setdefault(u, []).append(v)
    order, arcs = [root], []
    for u in order:
        for v in children.get(u, ()):
            arcs.append((u, v))
            order.append(v)
    return Tree(root, 1, set(order), arcs)
