"""All-to-all kept as one box's routes: the paths above the leaves balance every link of the
fabric, counted on the moved routes listed pair by pair (not through the link orbits the picker
reads), and the busiest link then meets the block cut (an independent min cut); keyed by the
destination's box alone they did not on a three-tier fabric with an odd number of other pods.
Each source's destinations go rail by rail, each rail box by box from its own."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from collsynth.instances import make_instance
from collsynth.instances.box_shift import BoxShift
from collsynth.instances.generators import build
from collsynth.solvers.flow.rail_compact import compact_routes, send_order
from collsynth.tens.bounds.blocks import block_cut
from collsynth.tens.pipelined_trees import listed
from compact_checks import SMALL_CLOS

THREE_TIERS = {"pods": 4, "groups_per_pod": 1, "boxes_per_group": 4, "gpus_per_box": 2, "rails": 2, "spines": 2,
               "cores": 8, "radix": 16}  # 32 GPUs; a leaf pair across pods has 8 spine-core paths, a pod 4 boxes


def busiest_link_seconds(inst) -> float:
    """The most loaded link's seconds, every pair's route listed (``M / N`` bytes a pair, split
    over the planes as the routes' units say)."""
    f = listed(compact_routes(inst))
    la = inst.topology.link_arrays
    per_hop = np.repeat((f.hi - f.lo) / f.k, np.diff(f.ptr)) * inst.collective.chunk_bytes
    load = np.bincount(la.lookup(f.src, f.dst), weights=per_hop, minlength=len(la))
    return float((load / la.bandwidth).max())


def test_three_tiers_with_an_odd_number_of_other_pods_meet_the_block_cut():
    # keyed by the destination's box, pods an even number on took one half of the cores, odd
    # ones the other: a pod took in from 2 of its 3 others through one half, 4/3 of its share
    # there, 1.0667 x the box cut on those links
    inst = make_instance(build("rail_clos", THREE_TIERS), "alltoall", message_bytes=1e9)
    bound = block_cut(inst).value
    assert busiest_link_seconds(inst) == pytest.approx(bound, rel=1e-9)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=SMALL_CLOS)
def test_busiest_link_no_worse_than_the_block_cut_allows(fabric):
    """Small Clos fabrics: the busiest link is never below the block cut (a check of the count)
    and, on rails with the tiers 1:1 (DGX H100, rail Clos), meets it."""
    inst = make_instance(build(*fabric), "alltoall", message_bytes=1e9)
    bound = block_cut(inst).value
    busiest = busiest_link_seconds(inst)
    assert busiest >= bound * (1 - 1e-9)
    if list(fabric[1].get("oversubscription", [1.0, 1.0])) == [1.0, 1.0] and fabric[0] != "fat_tree":
        assert busiest == pytest.approx(bound, rel=1e-9)


def test_send_order_goes_rail_by_rail_from_the_source_on():
    # GPU 5 of boxes of 4 (box 1, index 1), 12 GPUs: index 1 first (GPUs 9, 1: boxes 2, 0),
    # then index 2 (6, 10, 2), index 3 (7, 11, 3), index 0 (4, 8, 0)
    assert send_order(5, range(12), 4) == [9, 1, 6, 10, 2, 7, 11, 3, 4, 8, 0]


def test_send_order_visits_every_group_in_turn():
    # 16 GPUs, boxes of 2 (in-box level of order 2), 2 boxes a group, 4 groups: GPU 0's rail-0
    # destinations by box in its group first (offset 0: groups 1, 2, 3, then offset 1: groups 0-3)
    shift = BoxShift(np.zeros((3, 16), np.int64), (2, 2, 4), 1)
    assert send_order(0, range(16), 2, shift) == [4, 8, 12, 2, 6, 10, 14, 1, 5, 9, 13, 3, 7, 11, 15]
