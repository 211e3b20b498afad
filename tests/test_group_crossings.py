"""The allreduce's group-crossing bound (``collsynth.tens.bounds.group_crossings``): crossings
between groups of one-GPU boxes behind spines, both ways around the step some group first knows
every input, each three steps in the fabric.

- its numbers by hand on three groups of two one-GPU boxes (``d_i = 1``, ``d_c = 3``);
- above the crossing bound there (the rows it adds charge something);
- below the ``sync`` price of tree packing's verified allreduces, hypothesis over small rail Clos
  fabrics of one-GPU boxes (two and three groups, one and two spines), latencies, sizes and
  pieces; below every producer's verified schedule sent on links on three groups, and below the
  TEN ILP's verified schedule on three one-GPU boxes in three groups;
- not computed on boxes of two GPUs or on one group.
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
from collsynth.tens.bounds.group_crossings import group_crossing_bound, group_numbers

from test_drain_bound import PRODUCERS, TOL

THREE_GROUPS = {"groups_per_pod": 3, "boxes_per_group": 2, "gpus_per_box": 1, "rails": 1, "spines": 1, "radix": 16}


def allreduce(params, size, alpha=2.7e-6):
    return make_instance(build("rail_clos", {**params, "nic_alpha": alpha, "fabric_copy": False}), "allreduce",
                         message_bytes=float(size))


def group_bound(inst):
    b = instance_bounds(inst)
    return group_crossing_bound(inst, b.part("sync_latency"), b.part("sync_bandwidth")), b


def test_numbers_by_hand():
    """Six one-GPU boxes under three leaves and a spine: a leaf's two GPUs are two links apart
    (``d_i = 1``), other groups' four (``d_c = 3``); NICs of 50 GB/s both ways (``E = U = 300``
    GB/s), the leaves' links up and the spine's down 2 x 50 GB/s each."""
    k, G, d_i, d_c, E, U, Y_first, Y_last, alpha = group_numbers(allreduce(THREE_GROUPS, 1 << 20))
    assert (k, G, d_i, d_c) == (6, 3, 1, 3)
    assert (E, U, Y_first, Y_last) == pytest.approx((3e11, 3e11, 3e11, 3e11))
    assert alpha == pytest.approx(2.7e-6)


@pytest.mark.parametrize("size", [1 << 20, 1 << 24])
def test_above_the_crossing_bound_on_three_groups(size):
    got, b = group_bound(allreduce(THREE_GROUPS, size))
    assert b.sync.value is not None  # computes every sync argument
    crossing = b.parts["sync_injections"][0].value
    assert got.value is not None and got.value > crossing * 1.01


def test_not_computed_on_two_gpu_boxes_or_one_group():
    two = {**THREE_GROUPS, "gpus_per_box": 2, "rails": 2}
    got, _ = group_bound(allreduce(two, 1 << 20))
    assert got.value is None and "more than one" in got.note
    got, _ = group_bound(allreduce({**THREE_GROUPS, "groups_per_pod": 1, "boxes_per_group": 4}, 1 << 20))
    assert got.value is None and "one group" in got.note


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(groups=st.integers(2, 3), boxes=st.integers(1, 3), spines=st.integers(1, 2),
       alpha=st.sampled_from([0.5e-6, 2.7e-6, 2e-5]), size=st.sampled_from([1 << 12, 1 << 18, 1 << 22]),
       pieces=st.integers(1, 12))
def test_below_tree_packing_allreduce(groups, boxes, spines, alpha, size, pieces):
    params = {**THREE_GROUPS, "groups_per_pod": groups, "boxes_per_group": boxes,
              "spines": spines if boxes % spines == 0 else 1}  # a leaf's uplinks spread evenly
    inst = allreduce(params, size, alpha)
    got, _ = group_bound(inst)
    assert got.value is not None
    trees = run_compact(inst, Options(time_limit=60, params={"pieces": pieces})).schedule
    assert pipelined_allreduce.verify(trees, inst) is None
    assert got.value <= pipelined_allreduce.price_sync(trees, inst).total_s * TOL


@pytest.mark.parametrize("size", [1 << 14, 1 << 22])
def test_below_every_producers_schedule_on_links(size):
    """Every producer's verified allreduce sent on links is at least the bound (those routed
    end to end cross a switch in the step they leave and are held to ``L + T*`` only)."""
    inst = allreduce(THREE_GROUPS, size)
    got, _ = group_bound(inst)
    on_links = 0
    for name in PRODUCERS:
        try:
            row, sched = pipeline.run(inst, name, Options(time_limit=60))
        except Exception:  # a producer that refuses this fabric or collective
            continue
        if row.get("verified") and row.get("time_sync_s") is not None and sched.routing == "links":
            on_links += 1
            assert got.value <= row["time_sync_s"] * TOL, name
    assert on_links >= 1


def test_below_the_ten_ilp_schedule():
    """Three one-GPU boxes, one a group (every pair four links apart: ``d_i = d_c = 3``)."""
    inst = allreduce({**THREE_GROUPS, "boxes_per_group": 1}, 3e3, 2.7e-6)
    got, _ = group_bound(inst)
    assert got.value is not None
    row, _ = pipeline.run(inst, "ten-ilp-combining", Options(driver="horizon", time_limit=120,
                                                             params={"start": "none"}))
    assert row["verified"]
    assert got.value <= row["time_sync_s"] * TOL
