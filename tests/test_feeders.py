"""Reduction relays spread over interchangeable GPUs (solvers/packing/feeders.py): hand-derived cases."""

from __future__ import annotations

from collections import Counter

from collsynth.instances.generators import build
from collsynth.solvers.packing.feeders import balance, balanced, busiest, interchangeable, relays
from collsynth.solvers.packing.trees import RoutedTree


def test_gpus_of_one_nic_are_interchangeable_and_own_rails_are_not():
    # hgx_h100 with one NIC a box: the 8 GPUs of a box share it; with 8 NICs each GPU is on its own rail
    assert interchangeable(build("hgx_h100", {"nodes": 2, "nics": 1}), list(range(16))) == [
        list(range(8)), list(range(8, 16))]
    assert interchangeable(build("hgx_h100", {"nodes": 2, "nics": 8}), list(range(16))) == []


def test_four_trees_through_one_relay_end_one_per_member():
    # every tree relays through GPU 1 of the class [1, 2, 3, 4] (9 a switch): rotations give 1, 2, 3, 4
    t = RoutedTree(0, 0, 1, ((0, 9, 1), (1, 9, 2), (1, 9, 3), (1, 9, 4)))
    out = balance([t] * 4, [[1, 2, 3, 4]])
    assert [sorted(relays(s)) for s in out] == [[1], [2], [3], [4]]
    assert all(sorted(r[-1] for r in s.routes) == [1, 2, 3, 4] for s in out)  # every tree still reaches all


def test_class_with_the_root_is_left_alone():
    t = RoutedTree(1, 0, 1, ((1, 9, 2), (2, 9, 3)))
    assert balance([t, t], [[1, 2, 3]]) == [t, t]


def test_two_nic_boxes_relay_three_shards_a_gpu():
    # 4 boxes, 2 NICs: a NIC's sending side carries the shards of the 4 roots on its rail in each of the
    # 3 other boxes, 12 shards, one relay each; 4 GPUs share it, so 3 each once balanced
    from collsynth.instances.instance import make_instance
    from collsynth.solvers.packing.producer import forest

    inst = make_instance(build("hgx_h100", {"nodes": 4, "nics": 2}), "reduce_scatter", message_bytes=1e9)
    f = forest(inst, "allgather", True)
    count = Counter(v for t in f.trees for v in relays(t))
    assert sorted(count) == list(range(32)) and set(count.values()) == {3}


def test_busier_relabelling_is_refused():
    # hgx_h100, 2 boxes, 4 NICs: GPUs 8 and 9 share NIC sending side 22 over 64 GB/s PCIe links. Trees of
    # root 0: A relays 2 units through 8, B 1 unit through 8, C 3 units through 9 (3 + 3 units). Balancing
    # by count keeps A on 8, moves B to 9 (8 had one), keeps C on 9 (tie): 2 and 4 units, busier, refused
    topo = build("hgx_h100", {"nodes": 2, "nics": 4})
    a, b, c = (RoutedTree(0, lo, hi, ((v, 22),)) for lo, hi, v in ((0, 2, 8), (2, 3, 8), (3, 6, 9)))
    assert busiest([a, b, c], topo, False) == 3 / 64e9
    moved = balance([a, b, c], [[8, 9]])
    assert [sorted(relays(s)) for s in moved] == [[8], [9], [9]] and busiest(moved, topo, False) == 4 / 64e9
    assert balanced([a, b, c], topo, list(range(16)), False) == [a, b, c]
    assert balanced([a, c], topo, list(range(16)), False) == [a, c]  # nothing to move: as they are
