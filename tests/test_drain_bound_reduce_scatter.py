"""The box bound of a reduce-scatter (``collsynth.tens.bounds.drain``: the allgather's bound of its
time reversal on the transposed links, with the second pipeline stage charged where the switches
its NICs send into do not reduce).

- its value by hand on DGX H100 x2 where one exit step is best (alpha large), beside the
  allgather's on the same fabric, and with the rail switches reducing (then the allgather's);
- its value by hand on two boxes of two whose links differ each way (the box read on the
  transposed links: the untransposed ones give another value);
- below the ``sync`` price of every verified reduce-scatter: tree packing's trees (equal and
  unequal pieces, the producer's own pick, compact and explicit) on DGX H100 and small rail Clos
  fabrics, hypothesis over latencies, bandwidths and sizes; every producer's on DGX H100 x2 and a
  rail Clos; the TEN ILP's optimum (``ten-ilp-combining``) on two boxes of two;
- not computed for an allreduce (its partition bound stays);
- a schedule routed on shortest paths (a switch crossed in one step) beats it and is judged
  against ``L + T*``.
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.instances.switch_ops import with_switch_ops
from collsynth.instances.topology import from_edges
from collsynth.solvers import pipeline
from collsynth.solvers.pipeline import Options
from collsynth.tens.bounds import instance_bounds

from test_drain_bound import (PRODUCERS, TREE_CASES, TWO_BY_TWO, assert_below_every_producer, assert_below_the_optimum,
                              assert_below_trees, case_instance, two_by_two)
from test_translated_trees import translated_form

HAND = {"nodes": 2, "nic_alpha": 1.0, "nvlink_alpha": 0.0, "nic_bandwidth": 2.0, "nvlink_bandwidth": 16.0}


def test_one_exit_step_by_hand():
    """DGX H100 x2, 16 bytes (a byte a block), NICs 2 B/s with alpha 1 s, NVLink 16 B/s with
    alpha 0. ``L`` is two NIC hops (2 s), one exit step and its step before cost as much, and a
    third phase 1 s, more than the whole bandwidth term: one is best. Read backwards (an
    allgather on the transposed links, whose rail switches copy nothing), a box takes the other
    box's 8 bytes through its 8 NICs (0.5 s), and those 8 bytes went up the other box's 8 NICs
    into the rail switches the step before (0.5 s more: the rail switches are fed by NICs only);
    then 7 of the 8 GPUs' bytes cross the box switch to each GPU, 56 bytes over 8 x 16 B/s
    (0.4375 s; the box's own 56 bytes cross it in the two NIC steps, within their time). Taking
    more through the NICs costs 2 / 16 s a byte and saves 1 / 128 s. So 3.4375 s; the allgather,
    whose rail switches may copy, pays the NIC once (2.9375 s)."""
    topo = build("dgx_h100", HAND)
    rs = instance_bounds(make_instance(topo, "reduce_scatter", message_bytes=16.0))
    ag = instance_bounds(make_instance(topo, "allgather", message_bytes=16.0))
    assert rs.part("sync_latency").value == pytest.approx(2.0)
    assert rs.sync.source == "drain" and ag.sync.source == "drain"
    assert rs.sync.value == pytest.approx(2.0 + 0.5 + 0.5 + 56 / 128, rel=1e-5)
    assert ag.sync.value == pytest.approx(2.0 + 0.5 + 56 / 128, rel=1e-5)


def one_way_fabric(up: float, down: float, to_switch: float, from_switch: float):
    """Two boxes of two GPUs (0, 1 and 2, 3) behind box switches 4 and 5; GPU ``g``'s NIC on the
    rail switch ``6 + g % 2``. Bandwidths (B/s) differ each way: GPU to rail ``up``, rail to
    GPU ``down``, GPU to box switch ``to_switch``, box switch to GPU ``from_switch``; NIC links
    have alpha 1 s, box links 0."""
    edges = []
    for gpu in range(4):
        box, rail = 4 + gpu // 2, 6 + gpu % 2
        edges += [(gpu, rail, {"bandwidth": up, "alpha": 1.0}), (rail, gpu, {"bandwidth": down, "alpha": 1.0}),
                  (gpu, box, {"bandwidth": to_switch, "alpha": 0.0}),
                  (box, gpu, {"bandwidth": from_switch, "alpha": 0.0})]
    return from_edges(8, edges, switches=range(4, 8), name="one-way")


def test_links_that_differ_each_way_by_hand():
    """:func:`one_way_fabric` with NICs 1 B/s up and 2 B/s down, box links 4 B/s into the box
    switch and 8 B/s out of it, 4 bytes (a byte a block). ``L`` is two NIC hops (2 s), ``T*``
    a box's 2 remote bytes leaving over its two 1 B/s NICs (1 s).

    Read backwards (an allgather on the transposed links, whose rail switches copy nothing),
    box ``{0, 1}`` takes the other box's 2 bytes in over links of the up NICs' 1 B/s (``B_e =
    2``: 1 s); those 2 bytes went into the rail switches the step before over links of the down
    NICs' 2 B/s, the two rail switches fed by 4 such links for the two boxes (0.5 s); then each
    GPU passes what it took to its mate over links of the 4 B/s into the box switch (``B_i =
    8``: 0.25 s). Two phases cost 2 s of alpha, as ``L``; a third costs 1 s, more than it could
    save (all but ``T*``: 0.75 s). Taking a byte more through the NICs costs 0.75 s and saves
    0.125 s. So 2 + 1 + 0.5 + 0.25 = 3.75 s. The rail switches' boxes (``{0, 2}``, ``{1, 3}``)
    give ``L + T*`` = 3 s: their entries pay no alpha, and a box's 6 arrivals fit in ``T*``:
    4 entering over the links of the 4 B/s into the box switches (8 B/s: 0.5 s for the entry
    step, 0.25 s for its pre-step, whose 4 links of 8 B/s out of the box switches feed two
    boxes), the box's own 2 over the rail switch's links of the 1 B/s NICs (2 B/s: 1 s) in
    those two steps stretched to 1 s.
    The untransposed links (NICs 2 B/s in and 1 B/s into the rail switches, 8 B/s from the
    box switch) would give 2 + 0.5 + 1 + 0.125 = 3.625 s."""
    inst = make_instance(one_way_fabric(1.0, 2.0, 4.0, 8.0), "reduce_scatter", message_bytes=4.0)
    b = instance_bounds(inst)
    assert b.part("sync_latency").value == pytest.approx(2.0)
    assert b.part("sync_bandwidth").value == pytest.approx(1.0)
    assert b.sync.source == "drain"
    assert b.sync.witness == 4  # box {0, 1}'s switch
    assert b.sync.value == pytest.approx(2.0 + 1.0 + 0.5 + 0.25, rel=1e-5)
    assert_below_the_optimum(one_way_fabric(1.0, 2.0, 4.0, 8.0), "reduce_scatter", 4.0, "ten-ilp-combining")


def test_reducing_rail_switches_give_the_allgathers_value():
    """Rail switches that reduce may sum what two NICs send into one arrival: read backwards
    they copy, so the second stage is not charged and the value is the allgather's."""
    topo = build("dgx_h100", HAND)
    rails = [s for s in topo.switches if all(v in topo.npus for v in topo.graph.successors(s))
             and len(set(topo.graph.successors(s))) == 2]
    assert len(rails) == 8
    reducing = with_switch_ops(topo, reduce=rails)
    rs = instance_bounds(make_instance(reducing, "reduce_scatter", message_bytes=16.0)).sync
    assert rs.source == "drain"
    assert rs.value == pytest.approx(2.0 + 0.5 + 56 / 128, rel=1e-5)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**TREE_CASES)
def test_below_every_tree_packing_price(fabric, nic_alpha, nvl_alpha, nic, nvl, size, pieces):
    inst, bound = case_instance("reduce_scatter", fabric, nic_alpha, nvl_alpha, nic, nvl, size)
    assert bound.source == "drain"
    assert_below_trees((translated_form(inst),), inst, bound.value, pieces)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nic_alpha=st.sampled_from([1e-6, 2.7e-6]), nvl=st.sampled_from([100e9, 450e9]),
       size=st.sampled_from([4e5, 4e6]))
def test_below_the_ten_ilp_optimum_on_two_boxes_of_two(nic_alpha, nvl, size):
    assert_below_the_optimum(two_by_two(nic_alpha, 50e9, nvl, nvl_alpha=0.47e-6), "reduce_scatter", size,
                             "ten-ilp-combining")


@pytest.mark.parametrize("fabric, size", [(("dgx_h100", {"nodes": 2}), 1 << 16),
                                          (("rail_clos", {**TWO_BY_TWO, "gpus_per_box": 4, "rails": 4}), 1 << 16),
                                          (("rail_clos", {**TWO_BY_TWO, "gpus_per_box": 4, "rails": 4}), 1 << 24)])
def test_below_every_producers_verified_schedule(fabric, size):
    """Every producer that builds a reduce-scatter here: its verified schedule's ``sync`` price
    is at least the bound (those that refuse the fabric or the collective are left out). DGX
    H100 x2 at 16 MiB is left out (22 s of the suite)."""
    assert_below_every_producer(make_instance(build(*fabric), "reduce_scatter", message_bytes=size),
                                PRODUCERS + ["ten-ilp-combining"])


def test_an_allreduce_keeps_its_partition_bound():
    inst = make_instance(build("dgx_h100", HAND), "allreduce", message_bytes=16.0)
    b = instance_bounds(inst)
    assert b.sync.source == "distance+partition"
    assert not b.part("sync_drain").computed


def test_a_routed_schedule_is_judged_against_latency_and_cut():
    """The box bound needs a switch to forward in the step after it received. ``bine``'s
    reduce-scatter on :func:`one_way_fabric` is routed on shortest paths: its step across the
    rail switches pays both NIC hops' alpha (2 s) and the larger of their loads (a byte over 1
    B/s), after a box step of 2 bytes over 4 B/s: 3.5 s, below the box bound's 3.75 s. Its row
    is judged against ``L + T*`` = 3 s (``Bounds.sync_routed``)."""
    inst = make_instance(one_way_fabric(1.0, 2.0, 4.0, 8.0), "reduce_scatter", message_bytes=4.0)
    row, sched = pipeline.run(inst, "bine", Options(time_limit=60))
    assert row["verified"] and sched.routing == "shortest-path"
    assert row["time_sync_s"] == pytest.approx(3.5)
    assert row["time_sync_s"] < instance_bounds(inst).sync.value
    assert row["lower_bound_s"] == pytest.approx(3.0)
    assert row["status"] != "optimal"
