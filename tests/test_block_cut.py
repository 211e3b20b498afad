"""The all-to-all block cut bound (``tens/bounds/blocks.py``) against independent optima: on
small Clos fabrics it is at most the concurrent flow LP's optimum (the least time any routing
of the pairs' bytes needs, bandwidth alone);
a rail-optimised Clos with 2:1 leaves by hand (the group cut binds)."""

import pytest
from hypothesis import HealthCheck, given, settings

from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.tens.bounds.blocks import block_cut
from collsynth.tens.concurrent_flow import pair_demands, solve
from compact_checks import SMALL_CLOS

@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=SMALL_CLOS)
def test_block_cut_is_at_most_the_flow_optimum(fabric):
    inst = make_instance(build(*fabric), "alltoall", message_bytes=1e9)
    coll = inst.collective
    b = block_cut(inst)
    lp = solve(inst.topology, pair_demands("alltoall", coll.nodes)).seconds(coll.chunk_bytes)
    assert b is not None and 0 < b.value <= lp * (1 + 1e-6)


def test_two_to_one_leaves_by_hand():
    """Two groups of two boxes of two GPUs (rails 2, one spine), leaves 2:1: 8 GPUs, ``m =
    M / 8`` a pair. A box's 2 GPUs send ``2 x 6 m`` over 2 NICs; a group's 4 GPUs send ``4 x 4
    m`` up its leaves, each of whose 2 downlinks (one per box) is matched by one uplink at 2:1,
    so 2 leaves x 1 uplink of the NIC's bandwidth: ``16 m / (2 b)`` against the box's ``12 m /
    (2 b)``: the group binds."""
    params = {"groups_per_pod": 2, "boxes_per_group": 2, "gpus_per_box": 2, "rails": 2, "spines": 1, "radix": 16,
              "oversubscription": [2.0, 1.0]}
    topo = build("rail_clos", params)
    inst = make_instance(topo, "alltoall", message_bytes=8e9)
    la = topo.link_arrays
    nic = float(la.bandwidth[la.lookup([0], [int(max(topo.graph.successors(0)))])[0]])
    b = block_cut(inst)
    assert len(b.witness) == 4
    assert b.value == pytest.approx(16 * 1e9 / (2 * nic), rel=1e-9)
