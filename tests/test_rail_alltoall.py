"""``rail-alltoall`` (PXN paths on rail-optimised fabrics): schedules verified on small Clos
fabrics, the rate-limiting link time against loads derived by hand, never below the bound."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from collsynth import InputError
from collsynth.instances.clos import clos_plan
from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.solvers import pipeline
from collsynth.solvers.flow.rail_alltoall import link_loads, rail_routes
from collsynth.solvers.producers import Options
from collsynth.tens.bounds import instance_bounds

M = 1e9
NIC = 50e9
TINY = {"gpus_per_box": 2, "rails": 2, "boxes_per_group": 2, "groups_per_pod": 2, "spines": 1, "radix": 64,
        "nvlink_alpha": 0.0, "nic_alpha": 0.0}


@pytest.mark.parametrize("ratio, pairs_on_worst_link", [(1.0, 6), (2.0, 8)])
def test_rate_of_tiny_fabric_by_hand(ratio, pairs_on_worst_link):
    """8 GPUs: 4 boxes of 2, 2 groups of 2 boxes, one spine. A relay's NIC carries its box's 2
    sources to its index in the 3 other boxes: 6 pairs at NIC speed. A leaf's uplinks carry
    its group's 4 sources to the 2 GPUs of its rail in the other group: 8 pairs, over 2 NIC
    ports at 1:1 (4 pairs' time) or 1 port at 2:1 (8). The worst link is the box cut (6) at
    1:1 and the group cut (4 GPUs x 4 outside / 2 uplinks = 8) at 2:1; both equal the bound."""
    topo = build("rail_clos", {**TINY, "oversubscription": [ratio, 1.0]})
    inst = make_instance(topo, "alltoall", message_bytes=M)
    pair_bytes = M / 8
    rate = max(link_loads(topo, rail_routes(topo), pair_bytes).values())
    assert rate == pytest.approx(pairs_on_worst_link * pair_bytes / NIC, rel=1e-12)
    assert rate == pytest.approx(instance_bounds(inst).sync.value, rel=1e-9)


@st.composite
def small_clos(draw):
    """Small :func:`rail_clos` parameters (1-2 GPUs per box, rails, groups, spines; 1:1 or 2:1)."""
    g = draw(st.sampled_from([1, 2]))
    params = {"gpus_per_box": g, "rails": draw(st.sampled_from([r for r in (1, 2) if g % r == 0])),
              "boxes_per_group": draw(st.integers(1, 2)), "groups_per_pod": draw(st.integers(1, 2)),
              "spines": draw(st.integers(1, 2)), "radix": 64, "nvlink_alpha": 0.0, "nic_alpha": 0.0,
              "oversubscription": [draw(st.sampled_from([1.0, 2.0])), 1.0]}
    try:
        plan = clos_plan(params)
    except InputError:
        assume(False)
    assume(plan["gpus"] >= 2)
    return params


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_clos(), st.integers(1, 3))
def test_schedule_verifies_and_meets_no_less_than_the_bound(params, pieces):
    """Verified through the pipeline; its time under sync and event at least the bound, and
    the sync time at most the rate times (Q + D - 1) / Q for Q pieces and D-step paths."""
    inst = make_instance(build("rail_clos", params), "alltoall", message_bytes=M)
    row, _ = pipeline.run(inst, "rail-alltoall", Options(time_limit=60, params={"pieces": pieces}))
    assert row["verified"], row["message"]
    bounds = instance_bounds(inst)
    assert row["time_sync_s"] >= bounds.sync.value * (1 - 1e-9)
    assert row["time_event_s"] >= bounds.event.value * (1 - 1e-9)
    extra = row["extra"]
    depth = extra["depth_steps"]
    assert row["time_sync_s"] <= extra["rate_s"] * (pieces + depth - 1) / pieces * (1 + 1e-9)
