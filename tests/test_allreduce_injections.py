"""The allreduce's crossing bound (``collsynth.tens.bounds.injections``): where the switches
between the boxes copy nothing (declared: the Clos generators' ``fabric_copy = false``), what
crosses into the boxes in a step left them in the steps before.

- values by hand: two hosts under one switch (6 s, met by a verified two-step exchange) and a
  k = 4 fat tree's sixteen hosts (42 s); not computed where the switches may copy;
- the generators declare exactly the fabric's switches (leaves, spines, cores) not to copy, and
  the compact verifier refuses trees that copy at one;
- below the ``sync`` price of tree packing's verified allreduces (compact, at several depths
  and at its own, and explicit), hypothesis over small Clos fabrics, latencies and sizes;
  below the TEN ILP's verified schedule on three small fabrics, hypothesis over sizes and
  latencies; below every producer's verified allreduce on a two-group rail Clos.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.instances.switch_ops import copying_mask, with_switch_ops
from collsynth.instances.topology import from_edges
from collsynth.solvers import pipeline
from collsynth.solvers.packing import compact
from collsynth.solvers.packing.producer import _with_header, run_compact
from collsynth.solvers.pipeline import Options
from collsynth.tens import cost_models, pipelined_allreduce, verify
from collsynth.tens.bounds import instance_bounds
from collsynth.tens.pipelined_trees import verify as verify_trees
from collsynth.tens.schedule import OP_REDUCE, Schedule

from test_drain_bound import PRODUCERS, TOL, assert_below_every_producer
from test_translated_trees import translated_form

TWO_GROUPS = {"groups_per_pod": 2, "boxes_per_group": 2, "gpus_per_box": 2, "rails": 2, "spines": 1, "radix": 16}
SPINE_PATH = {"groups_per_pod": 2, "boxes_per_group": 1, "gpus_per_box": 1, "rails": 1, "spines": 1, "radix": 16}


def crossing_bound(inst):
    """The instance's crossing bound (computed with its ``sync`` bound)."""
    b = instance_bounds(inst)
    assert b.sync.value >= (b.parts["sync_injections"][0].value or 0.0)
    return b.parts["sync_injections"][0]


def test_two_hosts_under_one_switch_by_hand():
    """Hosts 0 and 1 under switch 2 (declared not to copy), links of 1 B/s, alpha 1 s, 2 bytes
    a host: two boxes of one, ``D = 2 (2 - 1) 2 = 4`` bytes crossing in over ``E = 2`` B/s. One
    entry step and the step before it: 2 s of alpha, 4 s of bandwidth (each step carries 2 bytes
    a link); two entry steps: 3 s and ``2 (2 + 1) / 2 = 3`` s; three: 4 s and 2.67 s. So 6 s,
    which each host sending both its bytes up and the switch sending them down meets (the
    hosts sum what came). Undeclared, the switch may copy and the bound is not computed."""
    star = from_edges(3, [(0, 2), (2, 0), (1, 2), (2, 1)], bandwidth=1.0, alpha=1.0, switches=[2])
    plain = with_switch_ops(star, no_copy=[2])
    ar = make_instance(plain, "allreduce", message_bytes=2.0)
    got = crossing_bound(ar)
    assert got.source == "injections" and got.value == pytest.approx(6.0, rel=1e-5)
    exchange = Schedule("allreduce", 3, ar.collective.num_chunks, np.array([0, 1, 0, 1, 0, 1, 0, 1]),
                        np.zeros(8, np.int64), np.ones(8, np.int64), np.array([0, 0, 1, 1, 2, 2, 2, 2]),
                        np.array([2, 2, 2, 2, 1, 1, 0, 0]), np.array([1, 1, 1, 1, 2, 2, 2, 2]),
                        np.full(8, OP_REDUCE, np.int8), 1, "links", {"switch_copy": False})
    assert verify.verify(exchange, ar) is None
    assert cost_models.price(exchange, ar, "sync").total_s == pytest.approx(6.0)
    undeclared = crossing_bound(make_instance(star, "allreduce", message_bytes=2.0))
    assert undeclared.value is None and "copy" in undeclared.note


def test_a_k4_fat_tree_by_hand():
    """Sixteen hosts, every link 1 B/s and alpha 1 s, 16 bytes a host: ``D / E = 2 * 15 * 16 /
    16 = 30`` s, hosts of two pods six links apart (``L = 6`` s). ``J`` entry steps and the step
    before them cost ``max(6, J + 1) + 30 (J + 1) / J``: 42 s at ``J = 5`` and at 6 (7 and 8 cost
    more), against ``L + T* = 36`` s."""
    fat = build("fat_tree", {"k": 4, "link_bandwidth": 1.0, "link_alpha": 1.0, "fabric_copy": False})
    b = instance_bounds(make_instance(fat, "allreduce", message_bytes=16.0))
    assert b.part("sync_latency").value + b.part("sync_bandwidth").value == pytest.approx(36.0)
    assert b.sync.source == "group crossings" and b.sync.value > 42.0  # hosts under an edge switch are a group
    assert b.parts["sync_injections"][0].value == pytest.approx(42.0, rel=1e-5)


def test_the_generators_declare_the_fabric_switches_only():
    """A two-group rail Clos of two-GPU boxes on two rails: 8 GPUs (0-7), 4 box switches (8-11),
    2 groups x 2 rails = 4 leaves and 1 spine (12-16); ``fabric_copy = false`` declares the 5
    fabric switches not to copy and leaves the box switches to the schedule; by default nothing
    is declared. An allgather tree merged into a switch (one send up, two down) verifies where
    it may copy and not where it is declared not to."""
    declared = build("rail_clos", {**TWO_GROUPS, "fabric_copy": False})
    assert np.flatnonzero(~copying_mask(declared, True)).tolist() == [12, 13, 14, 15, 16]
    assert (~copying_mask(build("rail_clos", TWO_GROUPS), True)).sum() == 0
    inst = make_instance(build("rail_clos", TWO_GROUPS), "allgather", message_bytes=float(1 << 20))
    merged = compact.multicast(translated_form(inst), inst)
    assert verify_trees(merged, inst) is None
    assert merged.sends < translated_form(inst).sends  # something merged, so some switch copies
    why = verify_trees(merged, make_instance(declared, "allgather", message_bytes=float(1 << 20)))
    assert why is not None and "does not copy" in why


def _allreduce(fabric, alpha, bandwidth, size):
    gen, params = fabric
    keys = {"link_alpha": alpha, "link_bandwidth": bandwidth} if gen == "fat_tree" else \
        {"nic_alpha": alpha, "nic_bandwidth": bandwidth}
    inst = make_instance(build(gen, {**params, **keys, "fabric_copy": False}), "allreduce", message_bytes=size)
    bound = crossing_bound(inst)
    assert bound.source == "injections" and bound.value is not None
    return inst, bound.value


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=st.sampled_from([("fat_tree", {"k": 4}), ("rail_clos", TWO_GROUPS)]),
       alpha=st.sampled_from([0.5e-6, 2.7e-6, 2e-5]), bandwidth=st.sampled_from([25e9, 50e9]),
       size=st.sampled_from([1 << 12, 1 << 20, 1 << 26]), pieces=st.integers(1, 12))
def test_below_tree_packing_allreduce(fabric, alpha, bandwidth, size, pieces):
    """The compact allreduce at ``pieces`` and at its halves' own depths, verified, and its
    explicit sends at up to 3 pieces."""
    inst, bound = _allreduce(fabric, alpha, bandwidth, size)
    trees = run_compact(inst, Options(time_limit=60, params={"pieces": pieces})).schedule
    for f in (trees, pipelined_allreduce.PipelinedAllreduce(*(compact.least_sync(h, pipelined_allreduce.half_instance(
            inst, h.collective))[0] for h in trees.halves))):
        assert pipelined_allreduce.verify(f, inst) is None
        assert bound <= pipelined_allreduce.price_sync(f, inst).total_s * TOL
    if pieces <= 3:
        sched = _with_header(pipelined_allreduce.expand(trees), inst)
        assert verify.verify(sched, inst) is None
        assert bound <= cost_models.price(sched, inst, "sync").total_s * TOL


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=st.sampled_from([("fat_tree", {"k": 2}), ("rail_clos", SPINE_PATH), ("rail_clos", {
    **TWO_GROUPS, "groups_per_pod": 1})]), alpha=st.sampled_from([0.5e-6, 2.7e-6]), size=st.sampled_from([4e5, 4e6]))
def test_below_the_ten_ilp_schedule(fabric, alpha, size):
    inst, bound = _allreduce(fabric, alpha, 50e9, size)
    row, _ = pipeline.run(inst, "ten-ilp-combining", Options(driver="horizon", time_limit=120,
                                                             params={"start": "none"}))
    assert row["verified"]
    assert bound <= row["time_sync_s"] * TOL


def test_below_every_producers_verified_allreduce():
    inst = make_instance(build("rail_clos", {**TWO_GROUPS, "fabric_copy": False}), "allreduce",
                         message_bytes=float(1 << 24))
    assert_below_every_producer(inst, PRODUCERS, ("injections", "box stages", "group crossings", "ramp",
                                                  "distance+partition"))
