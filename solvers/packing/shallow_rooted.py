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
"""

from __future__ import annotations

import math
import random

from .trees import Tree

MOVES = 100_000  # exchanges tried at most (TACOS 4x4x2: 7 hops from 13 in a few seconds)
CYCLE = 1_000  # a node that does not reach the root counts as this many hops too deep


def shallow_trees(net, root: int, parents: list[dict], depth: int, moves: int = MOVES,
                  seed: int = 0, deadline=None) -> list[Tree] | None:
    """Trees (one copy each) over the split network ``net`` (``net.cap``: arc capacities,
    ``net.pools``: each arc's routes) whose every compute node is at most ``depth`` hops below
    ``root``, from the start ``parents`` (one ``{node: parent}`` per tree, taking distinct slots);
    None when the search does not get there within ``moves`` exchanges or the run is out of
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
    cost = [_excess(p, root, hops, depth) for p in parents]
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
            new = (_excess(parents[i], root, hops, depth), _excess(parents[j], root, hops, depth))
            delta = new[0] + new[1] - cost[i] - cost[j]
            if delta <= 0 or rng.random() < math.exp(-delta / heat):
                cost[i], cost[j] = new
            else:
                parents[i][v], parents[j][v] = parents[j][v], parents[i][v]
        else:
            slot = j - k
            old = parents[i][v]
            parents[i][v] = free[v][slot]
            new = _excess(parents[i], root, hops, depth)
            if new - cost[i] <= 0 or rng.random() < math.exp(-(new - cost[i]) / heat):
                free[v][slot], cost[i] = old, new
            else:
                parents[i][v] = old
        heat = max(0.05, heat * 0.99995)
    return None


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
