"""The allreduce's box-stage bound (``collsynth.tens.bounds.box_stages``): the crossing bound
with the sends inside each box before its first exports and after its last imports.

- its value by hand on two boxes of two GPUs with one NIC step each way (25 s against the
  crossing bound's 24 s);
- below the ``sync`` price of tree packing's verified allreduces (compact, at several depths),
  hypothesis over small rail Clos fabrics (one plane and two), latencies and sizes; below the TEN ILP's verified
  schedule, hypothesis over sizes and latencies; below every producer's verified allreduce on
  a two-group rail Clos where it is the instance's bound;
- not computed where the switches between the boxes may copy.
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.solvers import pipeline
from collsynth.solvers.packing.producer import run_compact
from collsynth.solvers.pipeline import Options
from collsynth.tens import pipelined_allreduce
from collsynth.tens.bounds import instance_bounds

from test_allreduce_injections import TWO_GROUPS
from test_drain_bound import PRODUCERS, TOL, assert_below_every_producer

TWO_BY_TWO = {"groups_per_pod": 1, "boxes_per_group": 2, "gpus_per_box": 2, "rails": 2, "spines": 1, "radix": 16}


def stage_bound(inst):
    """The instance's box-stage bound (computed with its ``sync`` bound, which is at least it)."""
    b = instance_bounds(inst)
    got = b.parts["sync_box_stages"][0] if b.sync.value is not None else None
    assert got is not None and b.sync.value >= (got.value or 0.0)
    return got


def two_by_two(nic_alpha, nvl_alpha, nic, nvl, copy=False):
    return build("rail_clos", {**TWO_BY_TWO, "nic_alpha": nic_alpha, "nvlink_alpha": nvl_alpha, "nic_bandwidth": nic,
                               "nvlink_bandwidth": nvl, "fabric_copy": copy})


def test_two_boxes_of_two_by_hand():
    """NICs of 1 B/s with alpha 10 s, box links of 2 B/s with alpha 0, 4 bytes a GPU: two NIC
    hops apart (``L = 20`` s), so one step out and one in is best (a third costs 10 s more).
    All deliveries leave in the first and arrive in the second: ``P + Q`` bytes over the four
    NICs each way, ``P, Q >= 4``; the exports cover the four GPUs of the box other than ``x``
    (8 bytes) with their own bytes and sends up to the box switch before (``8 - P`` at 8 B/s),
    the imports likewise with sends down after: ``(P + Q) / 4 * 2 + (16 - P - Q) / 8``, least at
    ``P = Q = 4``: 5 s, so 25 s; the crossing bound counts ``2 (k - 1) M / E = 2`` s a step:
    24 s. Undeclared, the switches may copy and the bound is not computed."""
    inst = make_instance(two_by_two(10.0, 0.0, 1.0, 2.0), "allreduce", message_bytes=4.0)
    b = instance_bounds(inst)
    assert b.sync.source == "box stages" and b.sync.value == pytest.approx(25.0, rel=1e-5)
    assert b.parts["sync_injections"][0].value == pytest.approx(24.0, rel=1e-5)
    undeclared = instance_bounds(make_instance(two_by_two(10.0, 0.0, 1.0, 2.0, copy=True), "allreduce",
                                               message_bytes=4.0))
    assert undeclared.sync.value is not None
    got = undeclared.parts["sync_box_stages"][0]
    assert got.value is None and "copy" in got.note


def _allreduce(fabric, alpha, size):
    gen, params = fabric
    keys = {"link_alpha": alpha} if gen == "fat_tree" else {"nic_alpha": alpha}
    inst = make_instance(build(gen, {**params, **keys, "fabric_copy": False}), "allreduce", message_bytes=size)
    bound = stage_bound(inst)
    assert bound.source == "box stages" and bound.value is not None
    return inst, bound.value


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=st.sampled_from([("rail_clos", TWO_BY_TWO), ("rail_clos", TWO_GROUPS),
                               ("rail_clos", {**TWO_GROUPS, "planes": 2})]),
       alpha=st.sampled_from([0.5e-6, 2.7e-6, 2e-5]), size=st.sampled_from([1 << 12, 1 << 20, 1 << 26]),
       pieces=st.integers(1, 12))
def test_below_tree_packing_allreduce(fabric, alpha, size, pieces):
    inst, bound = _allreduce(fabric, alpha, size)
    trees = run_compact(inst, Options(time_limit=60, params={"pieces": pieces})).schedule
    assert pipelined_allreduce.verify(trees, inst) is None
    assert bound <= pipelined_allreduce.price_sync(trees, inst).total_s * TOL


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(alpha=st.sampled_from([0.5e-6, 2.7e-6, 2e-5]), size=st.sampled_from([4e3, 4e5, 4e6]))
def test_below_the_ten_ilp_schedule(alpha, size):
    inst, bound = _allreduce(("rail_clos", TWO_BY_TWO), alpha, size)
    row, _ = pipeline.run(inst, "ten-ilp-combining", Options(driver="horizon", time_limit=120,
                                                             params={"start": "none"}))
    assert row["verified"]
    assert bound <= row["time_sync_s"] * TOL


def test_below_every_producers_verified_allreduce():
    inst = make_instance(build("rail_clos", {**TWO_GROUPS, "nic_alpha": 2e-5, "fabric_copy": False}), "allreduce",
                         message_bytes=float(1 << 16))
    assert_below_every_producer(inst, PRODUCERS, ("box stages", "group crossings"))
