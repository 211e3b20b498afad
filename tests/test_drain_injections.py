"""The box bound's injections (``collsynth.tens.bounds.drain``, module doc 7) and its boxes of one.

Where no switch on the way into the boxes copies (a reduce-scatter read backwards, whose
switches do not reduce), what enters the boxes by a step was put into the fabric by compute
nodes in the steps before; and a fat tree's host is a box of one node.

- values by hand: two hosts under one switch (4 s, met by a two-step schedule on links; ``L +
  T*`` is 3 s) and the two hosts of a k = 2 fat tree (a path of six links: 7.2 s), beside the
  allgather on the same fabric (its switches may copy, but a link out of a switch still carries
  only what reached it the step before: the ramp bound, ``collsynth.tens.bounds.ramp``, the same
  values);
- a routed schedule (a step per path) below the box bound on DGX H100 x2 (3.375 s against
  3.4375 s), so its bound leaves the box out (``Bounds.sync_routed``);
- below the ``sync`` price of the TEN ILP's verified schedule (``ten-ilp-combining``) on the
  k = 2 fat tree and a two-group rail Clos, hypothesis over latencies, bandwidths and sizes;
  below tree packing's prices (translated and hierarchical trees, equal and unequal pieces,
  compact and explicit) on a k = 4 fat tree and a two-group rail Clos whose spines feed the
  leaves; below every producer's verified
  reduce-scatter on those two fabrics;
- an allreduce below its halves' bounds summed (two hosts under one switch: 6 s against 4 + 4
  s, by hand), so the box bound does not carry over to it by adding the halves'.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.instances.topology import from_edges
from collsynth.solvers import pipeline
from collsynth.solvers.packing.hierarchical import tier_by_tier
from collsynth.solvers.pipeline import Options
from collsynth.tens import cost_models, verify
from collsynth.tens.bounds import instance_bounds
from collsynth.tens.bounds.drain import drain_bound
from collsynth.tens.schedule import OP_REDUCE, Schedule

from test_drain_bound import PRODUCERS, TOL, assert_below_every_producer, assert_below_trees
from test_translated_trees import translated_form

TWO_GROUPS = {"groups_per_pod": 2, "boxes_per_group": 2, "gpus_per_box": 2, "rails": 2, "spines": 1, "radix": 16}
SPINE_PATH = {"groups_per_pod": 2, "boxes_per_group": 1, "gpus_per_box": 1, "rails": 1, "spines": 1, "radix": 16}


def latency_plus_cut(b) -> float:
    return b.part("sync_latency").value + b.part("sync_bandwidth").value


def test_two_hosts_under_one_switch_by_hand():
    """Hosts 0 and 1 under switch 2, links of 1 B/s with alpha 1 s, a byte a block. Each
    host's contribution to the other's block goes up in one step and down in a later one; the
    switch copies nothing, so the step that carries it down has a step before it that carried
    it up, a byte each: 2 s of bandwidth and 2 s of alpha (``L``: two hops), 4 s, where ``L +
    T*`` is 3 s. Both up, then both down, on links, costs that much. The allgather on links
    is bounded alike by the ramp bound (its switch may copy, but sends down only what came up
    the step before: 4 s again); a routed schedule (one step per path: the direct one, 3 s) is
    bounded by ``L + T*`` alone."""
    star = from_edges(3, [(0, 2), (2, 0), (1, 2), (2, 1)], bandwidth=1.0, alpha=1.0, switches=[2])
    rs = make_instance(star, "reduce_scatter", message_bytes=2.0)
    b = instance_bounds(rs)
    assert latency_plus_cut(b) == pytest.approx(3.0)
    assert b.sync.source == "drain" and b.sync.witness in (0, 1)
    assert b.sync.value == pytest.approx(4.0, rel=1e-5)
    up_down = Schedule("reduce_scatter", 3, rs.collective.num_chunks, np.array([1, 0, 1, 0]), np.zeros(4, np.int64),
                       np.ones(4, np.int64), np.array([0, 1, 2, 2]), np.array([2, 2, 1, 0]), np.array([1, 1, 2, 2]),
                       np.full(4, OP_REDUCE, np.int8), 1, "links", {})
    assert verify.verify(up_down, rs) is None
    assert cost_models.price(up_down, rs, "sync").total_s == pytest.approx(4.0)
    row, sched = pipeline.run(rs, "direct", Options(time_limit=60))
    assert sched.routing == "shortest-path" and row["time_sync_s"] == pytest.approx(3.0)
    assert row["lower_bound_s"] == pytest.approx(3.0) and row["status"] == "optimal"
    assert instance_bounds(make_instance(star, "allgather", message_bytes=2.0)).sync.value == pytest.approx(4.0, rel=1e-5)


def test_a_routed_schedule_is_outside_the_box_bound():
    """DGX H100 x2 with the hand values of ``test_drain_bound_reduce_scatter.py`` (NICs 2 B/s,
    alpha 1 s; NVLink 16 B/s, alpha 0; a byte a block): box mates first sum what each rail's
    two blocks take from them over the box switch (14 bytes into each GPU, 0.875 s), then each
    GPU sends its rail peer's block over the path NIC, rail switch, NIC in one routed step (2 s
    of alpha, 0.5 s): 3.375 s, below the box bound's 3.4375 s, which counts a step per link.
    The bound of a routed schedule is latency plus bandwidth bound: two NIC hops, and each
    GPU's 15 contributions to other blocks leave it over 16 + 2 B/s, 2 + 15 / 18 s."""
    topo = build("dgx_h100", {"nodes": 2, "nic_alpha": 1.0, "nvlink_alpha": 0.0, "nic_bandwidth": 2.0,
                              "nvlink_bandwidth": 16.0})
    inst = make_instance(topo, "reduce_scatter", message_bytes=16.0)
    sends = [(g, m, blk, 1) for g in range(16) for m in range(16) if m // 8 == g // 8 and m != g
             for blk in (m, (m + 8) % 16)] + [(g, (g + 8) % 16, (g + 8) % 16, 2) for g in range(16)]
    src, dst, chunk, step = (np.array(col) for col in zip(*sends))
    routed = Schedule("reduce_scatter", topo.size, inst.collective.num_chunks, chunk, np.zeros(len(src), np.int64),
                      np.ones(len(src), np.int64), src, dst, step, np.full(len(src), OP_REDUCE, np.int8), 1,
                      "shortest-path", {})
    assert verify.verify(routed, inst) is None
    assert cost_models.price(routed, inst, "sync").total_s == pytest.approx(3.375)
    b = instance_bounds(inst)
    assert b.sync.value == pytest.approx(3.4375, rel=1e-5)
    assert b.sync_routed.value == pytest.approx(2 + 15 / 18, rel=1e-5)


def test_the_two_hosts_of_a_k2_fat_tree_by_hand():
    """Hosts 0 and 1 of a k = 2 fat tree are six links apart (edge, aggregation, core,
    aggregation, edge), 1 B/s and alpha 1 s each, a byte a block: ``L = 6 s``, ``T* = 1 s``.
    Up to six phases cost no alpha beyond ``L``: a pre-step and five entry steps. Each entry
    step's byte went into the fabric before it, and the pre-step's and the earlier entry
    steps' bandwidth terms are all the time there was for that: with entries ``n_2 .. n_6``
    and ``b_1`` the pre-step's term, ``n_j <= b_1 + n_2 + .. + n_(j-1)``, least in all with
    every ``n_j = b_1 = 1 / 5``: 1.2 s of bandwidth, 7.2 s. A seventh phase costs 1 s of alpha
    and saves 1 / 30 s. The allgather on links is bounded alike (the ramp bound): 7.2 s."""
    fat = build("fat_tree", {"k": 2, "link_bandwidth": 1.0, "link_alpha": 1.0})
    b = instance_bounds(make_instance(fat, "reduce_scatter", message_bytes=2.0))
    assert latency_plus_cut(b) == pytest.approx(7.0)
    assert b.sync.source == "drain"
    assert b.sync.value == pytest.approx(7.2, rel=1e-5)
    ag = instance_bounds(make_instance(fat, "allgather", message_bytes=2.0))
    assert ag.sync.value == pytest.approx(7.2, rel=1e-5)


def reduce_scatter_case(fabric, alpha: float, bandwidth: float, size: float):
    """``(instance, its sync bound)``: a reduce-scatter on ``fabric`` with its NICs (a fat
    tree: every link) at ``alpha`` and ``bandwidth``, whose box bound is above ``L + T*`` (the
    injections charge something) and at most the instance's ``sync`` bound (which also takes
    the ramp bound)."""
    gen, params = fabric
    keys = {"link_alpha": alpha, "link_bandwidth": bandwidth} if gen == "fat_tree" else \
        {"nic_alpha": alpha, "nic_bandwidth": bandwidth}
    inst = make_instance(build(gen, {**params, **keys}), "reduce_scatter", message_bytes=size)
    b = instance_bounds(inst)
    box = drain_bound(inst, b.part("sync_latency"), b.part("sync_bandwidth"))
    assert box.source == "drain" and box.value > latency_plus_cut(b)
    assert box.value <= b.sync.value
    return inst, box


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=st.sampled_from([("fat_tree", {"k": 2}), ("rail_clos", SPINE_PATH)]),
       alpha=st.sampled_from([0.5e-6, 2.7e-6]), bandwidth=st.sampled_from([25e9, 50e9]),
       size=st.sampled_from([4e5, 4e6]))
def test_below_the_ten_ilp_schedule(fabric, alpha, bandwidth, size):
    inst, bound = reduce_scatter_case(fabric, alpha, bandwidth, size)
    row, _ = pipeline.run(inst, "ten-ilp-combining", Options(driver="horizon", time_limit=120,
                                                             params={"start": "none"}))
    assert row["verified"]
    assert bound.value <= row["time_sync_s"] * TOL


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=st.sampled_from([("fat_tree", {"k": 4}), ("rail_clos", TWO_GROUPS)]),
       alpha=st.sampled_from([0.5e-6, 2.7e-6, 2e-5]), bandwidth=st.sampled_from([25e9, 50e9]),
       size=st.sampled_from([1 << 12, 1 << 20, 1 << 26]), pieces=st.integers(1, 12))
def test_below_every_tree_packing_price(fabric, alpha, bandwidth, size, pieces):
    """The translated trees and the hierarchical ones (:mod:`collsynth.solvers.packing.hierarchical`)."""
    inst, bound = reduce_scatter_case(fabric, alpha, bandwidth, size)
    translated = translated_form(inst)
    assert_below_trees((translated, tier_by_tier(inst, translated)), inst, bound.value, pieces)


@pytest.mark.parametrize("fabric, size", [(("fat_tree", {"k": 4}), 1 << 16), (("rail_clos", TWO_GROUPS), 1 << 16),
                                          (("rail_clos", TWO_GROUPS), 1 << 24)])
def test_below_every_producers_verified_schedule(fabric, size):
    assert_below_every_producer(make_instance(build(*fabric), "reduce_scatter", message_bytes=size), PRODUCERS,
                                ("drain", "ramp"))


def test_an_allreduce_is_not_bounded_by_its_halves_box_bounds_summed():
    """Why the box bound leaves the allreduce out: on the two hosts under one switch above, its
    reduce-scatter and its allgather are bounded by 4 s each, but an allreduce need not be one
    after the other. Each host sends both its blocks up in one step (2 bytes: 2 s and 1 s of
    alpha) and the switch forwards them down in the next (3 s): the hosts sum what came, 6 s in
    all, by hand, below the 8 s of the halves' bounds summed. The instance's allreduce bound
    stays at or below it."""
    star = from_edges(3, [(0, 2), (2, 0), (1, 2), (2, 1)], bandwidth=1.0, alpha=1.0, switches=[2])
    ar = make_instance(star, "allreduce", message_bytes=2.0)
    chunks = ar.collective.num_chunks
    assert ar.collective.chunk_bytes == 1.0  # a byte a block: blocks 0 and 1, the hosts'
    exchange = Schedule("allreduce", 3, chunks, np.array([0, 1, 0, 1, 0, 1, 0, 1]), np.zeros(8, np.int64),
                        np.ones(8, np.int64), np.array([0, 0, 1, 1, 2, 2, 2, 2]), np.array([2, 2, 2, 2, 1, 1, 0, 0]),
                        np.array([1, 1, 1, 1, 2, 2, 2, 2]), np.full(8, OP_REDUCE, np.int8), 1, "links",
                        {"switch_copy": False})  # the switch forwards each arrival once, in arrival order
    assert verify.verify(exchange, ar) is None
    assert cost_models.price(exchange, ar, "sync").total_s == pytest.approx(6.0)
    halves = [instance_bounds(make_instance(star, kind, message_bytes=2.0)).sync.value
              for kind in ("reduce_scatter", "allgather")]
    assert halves == pytest.approx([4.0, 4.0], rel=1e-5) and sum(halves) > 6.0 + 1.0
    assert instance_bounds(ar).sync.value <= 6.0 * (1 + TOL)
