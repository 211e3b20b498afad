"""Box shifts twisted so that they keep no link (``solvers/packing/free_shifts.py``): a k = 4 fat
tree's by hand, and a three-tier Clos whose turn of the boxes is cut in two, by hand; on small
Clos fabrics the twisted shifts (cut or not) move the first box onto every box once, are
automorphisms of their orders that commute, and list fewer copies for the event price per link
orbit, or as many and fewer products keep link pairs, or are the found ones (every product listed
as a permutation); DGX H100, whose shifts keep no link, is left alone; and a pipelined
reduce-scatter on a k = 8 fat tree is priced per link orbit with no shift listed."""

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
from compact_checks import SMALL_CLOS, THREE_TIERS

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
@given(fabric=st.one_of(SMALL_CLOS, THREE_TIERS, st.just(("hpn", {"segments": 2, "hosts_per_segment": 2, "aggregations": 1,
                                                      "oversubscription": [2.0, 1.0]}))))
def test_twisted_shifts_are_shifts_keeping_no_more_links(fabric):
    """The shifts, cut or not, are commuting automorphisms of their orders whose products move
    the first box onto every box once, as the found ones do; they list fewer copies, or as many
    and fewer products keep link pairs, or they are the found ones."""
    topo = build(*fabric)
    found = box_shift(topo)
    s = free_shifts(topo, found)
    npus = np.asarray(sorted(topo.npus))
    assert s.box == found.box and np.prod(s.orders) == np.prod(found.orders)
    assert all(is_automorphism(topo, perm) for perm in s.perms)
    assert all((a[b] == b[a]).all() for a in s.perms for b in s.perms)
    every = [np.arange(topo.size)] + products(s.perms, s.orders)
    first_box = npus[:s.box]
    assert sorted(int(p[c]) for p in every for c in first_box) == npus.tolist()  # every GPU once
    for perm, order in zip(s.perms, s.orders):  # of its order
        cur = np.arange(topo.size)
        for _ in range(order):
            cur = perm[cur]
        assert (cur == np.arange(topo.size)).all()
    turned, was = keeping_products(topo, s.perms, s.orders), keeping_products(topo, found.perms, found.orders)
    listed, listed_was = listed_by_products(topo, s.perms, s.orders), listed_by_products(topo, found.perms, found.orders)
    assert (listed, turned) < (listed_was, was) or s is found


def listed_by_products(topo, perms, orders) -> int:
    """The copies the event price per link orbit lists were every link pair used: the product of
    the orders of the fewest shifts (those a power of which keeps a pair first) whose removal
    leaves no product but the identity keeping a pair, by listing every product."""
    la = topo.link_arrays
    src, dst = la.src.astype(np.int64), la.dst.astype(np.int64)

    def keeps(p):
        return bool(((p[src] == src) & (p[dst] == dst)).any())

    first = sorted(range(len(orders)), key=lambda i: not any(keeps(p) for p in products(perms[[i]], [orders[i]])))
    perms, orders = perms[first], [orders[i] for i in first]
    for m in range(len(orders) + 1):
        if not any(keeps(p) for p in products(perms[m:], orders[m:])):
            return int(np.prod(orders[:m]))
    return int(np.prod(orders))


def test_three_tiers_cut_by_hand():
    """Two pods of four one-GPU boxes (hosts 0-3 under leaf 8, 4-7 under leaf 9), two spines a
    pod (10, 11; 12, 13), a core a spine (14 to 10 and 12, 15 to 11 and 13). Found: the four
    boxes of a pod turned (leaves, spines and cores kept), the pods swapped; every leaf uplink
    and spine uplink is kept by the four powers of the first, which is listed: 4 copies. A turn
    of four boxes cannot move a leaf's two uplinks freely, so the level is cut: the boxes
    swapped in pairs with the spines of every pod and the cores swapped, then the pairs
    swapped (listed: 2 copies). Link pairs: 16 GPU-leaf, 8 leaf-spine, 8 spine-core; kept
    before 16 x 1 + 16 x 4 = 80 times, after 16 x 1 + 16 x 2 = 48 (each fabric pair in an
    orbit of four)."""
    topo = build("rail_clos", {"pods": 2, "groups_per_pod": 1, "boxes_per_group": 4, "gpus_per_box": 1, "rails": 1,
                               "spines": 2, "cores": 2, "radix": 16})
    found = box_shift(topo)
    s = free_shifts(topo, found)
    assert found.orders == (4, 2) and s.orders == (2, 2, 2)
    assert s.perms[0].tolist() == [1, 0, 3, 2, 5, 4, 7, 6, 8, 9, 11, 10, 13, 12, 15, 14]
    assert s.perms[1].tolist() == [2, 3, 0, 1, 6, 7, 4, 5] + list(range(8, 16))
    assert s.perms[2].tolist() == [4, 5, 6, 7, 0, 1, 2, 3, 9, 8, 12, 13, 10, 11, 14, 15]
    assert listed_by_products(topo, found.perms, found.orders) == 4 and listed_by_products(topo, s.perms, s.orders) == 2
    assert keeping_products(topo, found.perms, found.orders) == 80 and keeping_products(topo, s.perms, s.orders) == 48


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


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=st.one_of(SMALL_CLOS, THREE_TIERS))
def test_pairs_counted_once_agree_with_every_product_listed(fabric):
    """The copies listed and the folds, computed from each shift's action on the link pairs
    once and the groups' orbits built on their first shifts', are those found by listing every
    product as a permutation (found shifts and twisted ones); the extension's rounds matched once
    per mapping so far give every twist the automorphism matched afresh."""
    from collsynth.instances.box_shift import extended
    from collsynth.solvers.packing.free_shifts import _choices, folds, listed_copies

    topo = build(*fabric)
    found = box_shift(topo)
    s = free_shifts(topo, found)
    for perms, orders in ((found.perms, found.orders), (s.perms, s.orders)):
        assert listed_copies(topo, perms, orders) == listed_by_products(topo, perms, orders)
        assert folds(topo, perms, orders) == keeping_products(topo, perms, orders)
    npus = sorted(int(c) for c in topo.npus)
    moved = np.asarray(npus, np.int64)[(np.arange(len(npus)) + found.box) % len(npus)]
    memo: dict = {}
    for rotated in _choices(topo):
        a = extended(topo, npus, moved, frozenset(rotated), found.orders[-1], memo)
        b = extended(topo, npus, moved, frozenset(rotated), found.orders[-1])
        assert (a is None and b is None) or np.array_equal(a, b)
