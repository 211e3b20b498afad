"""Box shifts twisted so that they keep no link (``solvers/packing/free_shifts.py``): a k = 4 fat
tree's by hand; on small Clos fabrics the twisted shifts move the GPUs as the found ones do, are
automorphisms of their orders that commute, and fewer products keep link pairs than before, or
the shifts are the found ones (every product listed as a permutation); DGX H100, whose shifts keep no link, is left
alone; and a pipelined reduce-scatter on a k = 8 fat tree is priced per link orbit with no
shift listed."""

import itertools

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collsynth.instances import make_instance
from collsynth.instances.box_shift import box_shift
from collsynth.instances.generators import build
from collsynth.instances.symmetry import is_automorphism
from collsynth.solvers.packing.free_shifts import free_shifts
from collsynth.solvers.pipeline import run
from collsynth.solvers.producers import Options
from collsynth.tens import pipelined_event
from compact_checks import SMALL_CLOS

# k = 4 fat tree (generator's ids): hosts 0-15, edge switch 16 + e over hosts 2e, 2e + 1; pod p's
# edges 16 + 2p, 17 + 2p and aggregation switches 24 + 2p (to cores 32, 33), 25 + 2p (to 34, 35)
HOSTS_SWAPPED = [1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14]
EDGES_SWAPPED = [2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13]
PODS_ON = [4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3]


def products(perms, orders) -> list[np.ndarray]:
    """Every product of the shifts' powers as a permutation, the identity left out."""
    out = []
    for powers in itertools.product(*(range(o) for o in orders)):
        cur = np.arange(perms.shape[1])
        for perm, j in zip(perms, powers):
            for _ in range(j):
                cur = perm[cur]
        if any(powers):
            out.append(cur)
    return out


def keeping_products(topo, perms, orders) -> int:
    """The products (the identity too) mapping a link pair onto itself, summed over the pairs."""
    la = topo.link_arrays
    src, dst = la.src.astype(np.int64), la.dst.astype(np.int64)
    keeps = np.ones(len(la), np.int64)
    for p in products(perms, orders):
        keeps += (p[src] == src) & (p[dst] == dst)
    return int(keeps.sum())


def test_fat_tree_k4_by_hand():
    """Swapping the hosts of every edge switch keeps the edges and so their uplinks; twisted, the
    two aggregation switches of every pod swap too, and the two core groups with them. Swapping
    the edges of every pod keeps the aggregation switches and their core links; twisted, the
    cores of every group swap. The pods' turn keeps no link and stays. Before, the 96 link pairs
    are kept by 224 products: each of the 32 host links by the identity alone, each of the 32
    edge uplinks (both ways) by 2 (the host swap), each of the 32 aggregation-to-core links by 4
    (both swaps); after, each by the identity alone."""
    topo = build("fat_tree", {"k": 4})
    s = free_shifts(topo, box_shift(topo))
    edges_fixed, aggs_swapped = list(range(16, 24)), [25, 24, 27, 26, 29, 28, 31, 30]
    assert s.orders == (2, 2, 4)
    assert s.perms[0].tolist() == HOSTS_SWAPPED + edges_fixed + aggs_swapped + [34, 35, 32, 33]
    edges_swapped, aggs_fixed = [17, 16, 19, 18, 21, 20, 23, 22], list(range(24, 32))
    assert s.perms[1].tolist() == EDGES_SWAPPED + edges_swapped + aggs_fixed + [33, 32, 35, 34]
    pods_on = [18, 19, 20, 21, 22, 23, 16, 17, 26, 27, 28, 29, 30, 31, 24, 25]
    assert s.perms[2].tolist() == PODS_ON + pods_on + [32, 33, 34, 35]
    assert keeping_products(topo, box_shift(topo).perms, s.orders) == 224
    assert keeping_products(topo, s.perms, s.orders) == 96


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=st.one_of(SMALL_CLOS, st.just(("hpn", {"segments": 2, "hosts_per_segment": 2, "aggregations": 1,
                                                      "oversubscription": [2.0, 1.0]}))))
def test_twisted_shifts_are_shifts_keeping_no_more_links(fabric):
    topo = build(*fabric)
    found = box_shift(topo)
    s = free_shifts(topo, found)
    npus = np.asarray(sorted(topo.npus))
    assert s.orders == found.orders and s.box == found.box
    for perm, was in zip(s.perms, found.perms):
        assert (perm[npus] == was[npus]).all() and is_automorphism(topo, perm)
    assert all((a[b] == b[a]).all() for a in s.perms for b in s.perms)
    every = products(s.perms, s.orders)
    assert len(every) == np.prod(s.orders) - 1 and not any((p == np.arange(topo.size)).all() for p in every)
    for perm, order in zip(s.perms, s.orders):  # of its order
        cur = np.arange(topo.size)
        for _ in range(order):
            cur = perm[cur]
        assert (cur == np.arange(topo.size)).all()
    turned, was = keeping_products(topo, s.perms, s.orders), keeping_products(topo, found.perms, found.orders)
    assert turned < was or s is found


def test_shifts_keeping_no_link_left_alone():
    topo = build("dgx_h100", {"nodes": 3})
    found = box_shift(topo)
    assert keeping_products(topo, found.perms, found.orders) == len(topo.link_arrays)
    assert free_shifts(topo, found) is found


def test_fat_tree_reduce_scatter_priced_with_no_shift_listed():
    """k = 8 fat tree, reduce-scatter at 2 pieces: the twisted shifts keep no link, so the
    listed tree alone is simulated (1/128 of the explicit sends)."""
    inst = make_instance(build("fat_tree", {"k": 8}), "reduce_scatter", message_bytes=1 << 20)
    row, trees = run(inst, "tree-packing", Options(time_limit=120, params={"form": "compact", "pieces": 2}))
    assert row["verified"] and trees.copies == 128
    cost = pipelined_event.price(trees, inst)
    assert cost.extra["listed_shifts"] == 0 and cost.extra["simulated_sends"] * 128 == trees.sends
