"""All-to-all kept as one box's PXN routes plus the pipeline rule (``rail-alltoall --param
form=compact``): on small Clos fabrics (DGX H100 on rails, k = 4 fat trees, rail-optimised Clos
with two groups under spines, leaves 1:1 or 2:1) the compact form's verdict and ``sync`` price
are those of its explicit sends and of every route listed; on DGX H100 (no tier above the rail
switches, so the same PXN paths) the run's compact and explicit forms at the same pieces get
the same ``sync`` price, within the pipeline's fill of the box cut by hand; a route cut short,
a pair routed twice and a shift that is not an automorphism are rejected."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.solvers.flow.rail_compact import compact_routes
from collsynth.solvers.packing.producer import _with_header
from collsynth.solvers.pipeline import run
from collsynth.solvers.producers import Options
from collsynth.tens import verify
from collsynth.tens.pipelined_trees import PipelinedTrees, expand, price_sync
from collsynth.tens.pipelined_trees import verify as verify_trees
from compact_checks import SMALL_CLOS, assert_priced_as_listed

@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=SMALL_CLOS, pieces=st.integers(1, 3))
def test_compact_routes_verify_and_price_as_their_sends(fabric, pieces):
    inst = make_instance(build(*fabric), "alltoall", message_bytes=1e9)
    assert_priced_as_listed(replace(compact_routes(inst), pieces=pieces), inst)


def test_the_run_keeps_the_form_and_meets_the_box_cut_by_hand():
    """DGX H100 x4: 32 GPUs, ``m = M / 32`` a pair; a box's 8 GPUs send ``8 x 24 m`` out over
    8 NICs of 50 GB/s, so no schedule beats ``24 m / 50e9`` (the box cut); PXN loads every NIC
    link alike, so the rate is that, and under ``sync`` with ``P`` pieces over routes of at
    most ``D`` steps the bandwidth part lies between the cut and ``(P + D - 1) / P`` times it (a
    NIC link busy in at most ``P + D - 1`` steps, at the rate in each)."""
    inst = make_instance(build("dgx_h100", {"nodes": 4}), "alltoall", message_bytes=1e9)
    compact, trees = run(inst, "rail-alltoall", Options(time_limit=60, params={"form": "compact", "pieces": 50}))
    explicit, sched = run(inst, "rail-alltoall", Options(time_limit=60, params={"form": "explicit", "pieces": 50}))
    assert isinstance(trees, PipelinedTrees) and compact["verified"] and explicit["verified"]
    assert compact["sends"] == len(sched)
    assert compact["time_sync_s"] == pytest.approx(explicit["time_sync_s"], rel=1e-12)
    cut = 24 * (1e9 / 32) / 50e9
    D = trees.depth
    assert cut * (1 - 1e-12) <= compact["T_B_s"] <= cut * (50 + D - 1) / 50 * (1 + 1e-12)


def test_mutants_are_rejected():
    inst = make_instance(build("dgx_h100", {"nodes": 3}), "alltoall", message_bytes=1e9)
    c = compact_routes(inst)
    assert verify_trees(c, inst) is None
    short = replace(c, src=c.src[:-1], dst=c.dst[:-1], before=c.before[:-1], ptr=np.minimum(c.ptr, len(c.src) - 1))
    twice = replace(c, dst=np.where(np.arange(len(c.dst)) == c.ptr[1] - 1, c.dst[c.ptr[2] - 1], c.dst))
    a, b = inst.topology.npus[0], inst.topology.npus[-1]
    swapped = c.shift.copy()
    swapped[-1, [a, b]] = c.shift[-1, [b, a]]
    for bad in (short, twice, replace(c, shift=swapped)):
        assert verify_trees(bad, inst) is not None
    assert verify.verify(_with_header(expand(short), inst), inst) is not None


@pytest.mark.parametrize("planes", [1, 2])
def test_moved_routes_use_every_plane(planes):
    """Two groups of four boxes of two GPUs, ``planes`` NIC planes of ``50 / planes`` GB/s: a
    box's 2 GPUs send ``2 x 14 m`` out over ``2 planes`` NIC links, so the box cut is ``14 m /
    50e9`` whatever the planes; the moved routes of one listed source load every plane alike,
    so the bandwidth part stays within the pipeline's fill of it (keyed by the source alone they
    kept its plane: twice the cut on two planes; by the destination's box alone, 8/7 of it)."""
    params = {"groups_per_pod": 2, "boxes_per_group": 4, "gpus_per_box": 2, "rails": 2, "planes": planes,
              "spines": 2, "radix": 16, "nic_bandwidth": 50e9 / planes}
    inst = make_instance(build("rail_clos", params), "alltoall", message_bytes=16e9)
    c = replace(compact_routes(inst), pieces=100)
    assert verify_trees(c, inst) is None
    cut = 14 * 1e9 / 50e9
    assert cut * (1 - 1e-12) <= price_sync(c, inst).T_B_s <= cut * (100 + c.depth - 1) / 100
