"""Rooted forests whose trees differ in depth, each tree taking as many pieces as fill the last
step (``collsynth.solvers.packing.staggered``), and the trees' least depths
(``shallow_rooted.least_depths``).

- Hypothesis on small ring / complete x switch hierarchies (links ``B``, alpha ``a``, the last GPU
  the root, a random size and piece count): the staggered reduce verifies, and its ``sync`` price is the one
  derived by hand from the trees' depths read off their routes: every link carries one tree, so
  each of the ``S = P + D - 1`` steps moves one piece of ``M / sum_t n_t`` bytes over it, ``n_t
  = P + D - d_t``: ``S (a + M / (B sum_t n_t))``. Cutting every tree into ``P`` pieces (the
  plain pipeline) gives ``S (a + M / (B k P))`` and fails it.
- ``least_depths`` against networkx's multi-source Dijkstra on random graphs without the root.
"""

import math
import random
from functools import lru_cache
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.solvers.packing import forests
from collsynth.solvers.packing.emission import emit, with_header
from collsynth.solvers.packing.shallow_rooted import least_depths
from collsynth.tens import cost_models, verify

B, ALPHA = 100e9, 0.5e-6
SYSTEMS = ((("ring", "switch"), (4, 2)), (("complete", "switch"), (3, 2)))


@lru_cache(maxsize=None)
def staggered_forest(levels: tuple, dims: tuple, root: int):
    topo = build("hierarchical", {"levels": list(levels), "dims": list(dims)}, bandwidth=B, alpha=ALPHA)
    inst = make_instance(topo, "reduce", message_bytes=1e9, root=root)
    return forests.shallow_rooted(inst, forests.forest(inst, "broadcast", True))


def route_depths(tree) -> int:
    """The tree's deepest node in hops below its root, each hop of a route one step."""
    level = {tree.root: 0}
    for route in tree.routes:  # each tail reached before
        level[route[-1]] = level[route[0]] + len(route) - 1
    return max(level.values())


@settings(max_examples=12, deadline=None)
@given(st.sampled_from(SYSTEMS), st.integers(1, 60), st.floats(1e6, 4e9))
def test_staggered_reduce_verifies_at_the_hand_sync_price(system, pieces, size):
    levels, dims = system
    root = dims[0] * dims[1] - 1
    g = staggered_forest(levels, dims, root)
    assert g is not None and g.staggered
    topo = build("hierarchical", {"levels": list(levels), "dims": list(dims)}, bandwidth=B, alpha=ALPHA)
    inst = make_instance(topo, "reduce", message_bytes=size, root=root)
    sched = with_header(emit(inst, g, pieces), inst)
    assert verify.verify(sched, inst) is None
    links = [(a, b) for t in g.trees for r in t.routes for a, b in zip(r[:-1], r[1:])]
    assert len(links) == len(set(links)) and all(t.hi - t.lo == 1 for t in g.trees)  # one tree a link
    depths = [route_depths(t) for t in g.trees]
    assert len(set(depths)) > 1
    deepest = max(depths)
    steps = pieces + deepest - 1
    total = sum(pieces + deepest - d for d in depths)
    assert sched.num_steps == steps
    sync = cost_models.price(sched, inst, "sync").total_s
    assert sync == pytest.approx(steps * (ALPHA + size / (B * total)), rel=1e-9)


def random_split_network(seed: int, n: int):
    """A random strongly connected graph on ``n`` nodes as a split network: each arc a route of
    1 or 2 hops (through a switch, numbered from ``n``)."""
    rng = random.Random(seed)
    arcs = {(v, (v + 1) % n) for v in range(n)} | {((v + 1) % n, v) for v in range(n)}
    arcs |= {(a, b) for a in range(n) for b in range(n) if a != b and rng.random() < 0.2}
    pools, switch = {}, n
    for a, b in sorted(arcs):
        if rng.random() < 0.3:
            pools[(a, b)] = [[(a, switch, b), 1]]
            switch += 1
        else:
            pools[(a, b)] = [[(a, b), 1]]
    return SimpleNamespace(compute=tuple(range(n)), pools=pools)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.integers(3, 9), st.data())
def test_least_depths_match_all_pairs_shortest_paths(seed, n, data):
    """Per tree, the farthest GPU's hops from the root's children in it, avoiding the root (a
    route through a switch 2 hops), plus the hops into the nearest child: checked against
    Floyd-Warshall over the network without the root, for two trees given at once (each tree's
    children alone count for it)."""
    net = random_split_network(seed, n)
    root = data.draw(st.integers(0, n - 1))
    out = [b for (a, b) in net.pools if a == root]
    hops = {a: len(p[0][0]) - 1 for a, p in net.pools.items()}
    far = {(u, v): 0 if u == v else math.inf if root in (u, v) else hops.get((u, v), math.inf)
           for u in range(n) for v in range(n)}
    for w in range(n):  # Floyd-Warshall, the root left out
        for u in range(n):
            for v in range(n):
                far[u, v] = min(far[u, v], far[u, w] + far[w, v])
    trees = [data.draw(st.lists(st.sampled_from(out), min_size=1, max_size=len(out), unique=True)) for _ in range(2)]
    want = [max(min(hops[(root, c)] + far[c, v] for c in children) for v in range(n) if v != root)
            for children in trees]
    assert least_depths(net, root, [{c: root for c in children} for children in trees]) == want
