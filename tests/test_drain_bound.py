"""The box bound of the synchronous model (``collsynth.tens.bounds.drain``): entry steps pay
the NIC's alpha and what enters last still crosses the box's switch.

- its value by hand where one entry step is best (alpha large): ``L + s / B_nic + s / B_nvl``
  on two boxes of two GPUs;
- below the ``sync`` price of every verified schedule: tree packing's trees (listed and merged
  into multicasting switches, equal and unequal pieces, compact and explicit, the producer's
  own pick) on DGX H100 and small rail Clos fabrics, hypothesis over latencies, bandwidths and
  message sizes; and the TEN ILP's optimum on the two boxes of two;
- at least ``L + T*`` and computed only for a single allgather on boxes it applies to.
"""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.solvers import pipeline
from collsynth.solvers.packing import compact
from collsynth.solvers.packing.piece_sizes import sized
from collsynth.solvers.packing.producer import _with_header
from collsynth.solvers.pipeline import Options
from collsynth.tens import cost_models, verify
from collsynth.tens.bounds import instance_bounds
from collsynth.tens.bounds.drain import box_numbers, drain_bound
from collsynth.tens.bounds.instance import _sync_total
from collsynth.tens.pipelined_trees import expand, price_sync
from collsynth.tens.pipelined_trees import verify as verify_trees

from test_translated_trees import translated_form

TOL = 1 + 1e-9
TWO_BY_TWO = {"groups_per_pod": 1, "boxes_per_group": 2, "gpus_per_box": 2, "rails": 2, "spines": 1, "radix": 16}


def two_by_two(nic_alpha, nic, nvl, nvl_alpha=None):
    return build("rail_clos", {**TWO_BY_TWO, "nic_alpha": nic_alpha, "nic_bandwidth": nic, "nvlink_bandwidth": nvl,
                               "nvlink_alpha": nic_alpha if nvl_alpha is None else nvl_alpha})


def test_one_entry_step_by_hand():
    """Two boxes of two GPUs, NIC alpha 1 s, box switch alpha 0, 4 bytes (a byte a shard):
    the farthest GPU is two NIC hops and two free box hops away (``L = 2 s``), as is one entry
    step and its pre-step, and a second entry step costs 1 s, more than the whole bandwidth
    term: one entry step is best. A box takes the other box's 2 bytes over its two NICs
    (``2 / (2 nic)``; taking more only moves bytes from the box switch to the slower NICs) and
    then each GPU passes what it took to its mate over the box switch (``2 / (2 nvl)``); the
    box's own bytes cross its switch in the entry step, within its time. ``T*`` is ``1 / nic``,
    so the box adds ``1 / nvl``."""
    nic, nvl = 2.0, 8.0
    inst = make_instance(two_by_two(1.0, nic, nvl, nvl_alpha=0.0), "allgather", message_bytes=4.0)
    b = instance_bounds(inst)
    assert b.part("sync_latency").value == pytest.approx(2.0)
    assert b.part("sync_bandwidth").value == pytest.approx(1 / nic)
    assert b.sync.source == "drain"
    assert b.sync.value == pytest.approx(2.0 + 1 / nic + 1 / nvl, rel=1e-5)
    assert len(box_numbers(inst)) == 2  # the box switches and the leaves: two sets of numbers


fabrics = st.sampled_from([("dgx_h100", {"nodes": 2}), ("dgx_h100", {"nodes": 3}), ("rail_clos", TWO_BY_TWO),
                           ("rail_clos", {**TWO_BY_TWO, "boxes_per_group": 3, "gpus_per_box": 4, "rails": 4})])


TREE_CASES = dict(fabric=fabrics, nic_alpha=st.sampled_from([0.5e-6, 2.7e-6, 2e-5]),
                  nvl_alpha=st.sampled_from([0.0, 0.47e-6]), nic=st.sampled_from([25e9, 50e9]),
                  nvl=st.sampled_from([100e9, 450e9]), size=st.sampled_from([1 << 12, 1 << 20, 1 << 26]),
                  pieces=st.integers(1, 12))  # hypothesis's cases for the bound against tree packing's prices


def case_instance(kind: str, fabric, nic_alpha, nvl_alpha, nic, nvl, size):
    """``(instance, its sync bound)`` of one of :data:`TREE_CASES`; the bound is at least ``L + T*``."""
    gen, params = fabric
    keys = {"nic_alpha": nic_alpha, "nvlink_alpha": nvl_alpha, "nic_bandwidth": nic, "nvlink_bandwidth": nvl}
    inst = make_instance(build(gen, {**params, **keys}), kind, message_bytes=size)
    b = instance_bounds(inst)
    assert b.sync.value >= _sync_total(b.part("sync_latency"), b.part("sync_bandwidth")).value
    return inst, b.sync


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**TREE_CASES)
def test_below_every_tree_packing_price(fabric, nic_alpha, nvl_alpha, nic, nvl, size, pieces):
    inst, bound = case_instance("allgather", fabric, nic_alpha, nvl_alpha, nic, nvl, size)
    c = translated_form(inst)
    assert_below_trees((c, compact.multicast(c, inst)), inst, bound.value, pieces)


def assert_below_trees(forms, inst, bound: float, pieces: int):
    """``bound`` is at most the ``sync`` price of each of ``forms`` (verified) at ``pieces``
    equal pieces, at that many of the sizes of least price and at the depth of least price,
    and of its explicit sends at up to 4 pieces."""
    for form in forms:
        unequal = sized(form, inst, pieces)  # None where a piece would be under a byte (small messages)
        for f in (replace(form, pieces=pieces), unequal, compact.least_sync(form, inst)[0]):
            if f is None:
                continue
            assert verify_trees(f, inst) is None
            assert bound <= price_sync(f, inst).total_s * TOL
        sched = _with_header(expand(replace(form, pieces=min(pieces, 4))), inst)
        assert verify.verify(sched, inst) is None
        assert bound <= cost_models.price(sched, inst, "sync").total_s * TOL


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nic_alpha=st.sampled_from([1e-6, 2.7e-6]), nvl=st.sampled_from([100e9, 450e9]),
       size=st.sampled_from([4e5, 4e6]))
def test_below_the_ten_ilp_optimum_on_two_boxes_of_two(nic_alpha, nvl, size):
    assert_below_the_optimum(two_by_two(nic_alpha, 50e9, nvl, nvl_alpha=0.47e-6), "allgather", size, "ten-ilp")


def assert_below_the_optimum(topo, kind: str, size: float, producer: str):
    """The box bound of ``kind`` on ``topo`` is at most the ``sync`` price of ``producer``'s
    verified optimum (a TEN ILP, horizon search)."""
    inst = make_instance(topo, kind, message_bytes=size)
    bound = instance_bounds(inst).sync
    assert bound.source == "drain"
    row, sched = pipeline.run(inst, producer, Options(driver="horizon", time_limit=120))
    assert row["verified"]
    assert bound.value <= row["time_sync_s"] * TOL


def test_computed_only_where_it_applies():
    def lat_bw(inst):
        b = instance_bounds(inst)
        return b.part("sync_latency"), b.part("sync_bandwidth")

    fat = make_instance(build("fat_tree", {"k": 4}), "allgather", message_bytes=1 << 20)
    lone = drain_bound(fat, *lat_bw(fat))  # one GPU a host: boxes of one (tests/test_drain_injections.py)
    assert lone.computed and lone.witness in fat.topology.npus
    ar = make_instance(two_by_two(1e-6, 50e9, 450e9), "allreduce", message_bytes=1 << 20)
    assert not drain_bound(ar, *lat_bw(ar)).computed  # a reduce-scatter's: tests/test_drain_bound_reduce_scatter.py
    ring = make_instance(build("ring", {"nodes": 4}), "allgather", message_bytes=1 << 20)
    assert not drain_bound(ring, *lat_bw(ring)).computed
    assert np.isfinite(instance_bounds(ring).sync.value)


PRODUCERS = ["direct", "ring", "nccl-ring", "nccl-tree", "pat", "bine", "greedy", "earliest-arrival",
             "hamiltonian-rings", "tree-packing", "recursive-doubling", "double-binary-tree", "binomial-tree",
             "dimension-trees"]


@pytest.mark.parametrize("fabric", [("dgx_h100", {"nodes": 2}), ("rail_clos", {**TWO_BY_TWO, "gpus_per_box": 4,
                                                                                "rails": 4})])
@pytest.mark.parametrize("size", [1 << 16, 1 << 24])
def test_below_every_producers_verified_schedule(fabric, size):
    """Every producer that builds an allgather here: its verified schedule's ``sync`` price is
    at least the bound (those that refuse the fabric are left out; most do not refuse)."""
    assert_below_every_producer(make_instance(build(*fabric), "allgather", message_bytes=size), PRODUCERS)


def assert_below_every_producer(inst, names, sources: str | tuple = "drain"):
    """The instance's ``sync`` bound is one of ``sources``' and at most the ``sync`` price of every
    verified schedule sent on links of the producers ``names`` that build one; a schedule
    routed on shortest paths is at least ``L + T*`` (``Bounds.sync_routed``), each row's
    ``lower_bound_s`` the one for its routing (at least five build one)."""
    bounds = instance_bounds(inst)
    assert bounds.sync.source in ((sources,) if isinstance(sources, str) else sources)
    priced = 0
    for name, row, sched in verified_runs(inst, names):
        priced += 1
        bound = bounds.sync if sched.routing == "links" else bounds.sync_routed
        assert row["lower_bound_s"] == pytest.approx(bound.value, rel=1e-12), name
        assert bound.value <= row["time_sync_s"] * TOL, name
    assert priced >= 5


def verified_runs(inst, names):
    """``(name, row, schedule)`` of each producer of ``names`` whose run on ``inst`` verified and
    was priced under ``sync`` (those that refuse the fabric or collective are left out)."""
    for name in names:
        try:
            row, sched = pipeline.run(inst, name, Options(time_limit=60))
        except Exception:  # a producer that refuses this fabric or collective
            continue
        if row.get("verified") and row.get("time_sync_s") is not None:
            yield name, row, sched
