"""The first box's trees kept with the box shift against every tree listed and against the
explicit sends: on small fabrics of identical boxes (DGX H100 on rails, k-ary fat trees,
rail-optimised Clos with one group, or two groups under spines) the three forms get the same verdict and the same synchronous price;
the cut optimum tested at one box's nodes equals the optimum tested at every node; a shift
that is not an automorphism, a wrong number of copies and a dropped hop are rejected."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collsynth.instances import make_instance
from collsynth.instances.box_shift import box_shift
from collsynth.instances.generators import build
from collsynth.solvers.packing.translated import translated
from collsynth.solvers.packing.producer import _with_header, choose_k
from collsynth.tens import verify
from collsynth.tens.cut_optimum import flow_net, optimum
from collsynth.tens.pipelined_trees import expand, price_sync
from collsynth.tens.pipelined_trees import verify as verify_trees
from compact_checks import assert_priced_as_listed

fabrics = st.one_of(
    st.builds(lambda n: ("dgx_h100", {"nodes": n}), st.integers(2, 5)),
    st.builds(lambda k: ("fat_tree", {"k": k}), st.sampled_from([4, 6])),
    st.builds(lambda boxes, gpus: ("rail_clos", {"groups_per_pod": 1, "boxes_per_group": boxes, "gpus_per_box": gpus,
                                                 "rails": gpus, "spines": 1, "radix": 16}),
              st.integers(2, 3), st.sampled_from([1, 2])),
    st.builds(lambda gpus, spines: ("rail_clos", {"groups_per_pod": 2, "boxes_per_group": 2, "gpus_per_box": gpus,
                                                  "rails": gpus, "spines": spines, "radix": 16}),
              st.sampled_from([1, 2, 4]), st.sampled_from([1, 2])),  # two groups under spines
)


def translated_form(inst):
    """The translated trees of ``inst``'s collective (allgather: on the links; reduce-scatter:
    on the reversed links) at the fewest trees per shard reaching the optimum."""
    coll = inst.collective
    transposed = coll.kind == "reduce_scatter"
    net = flow_net(inst.topology, coll.nodes, [1] * len(coll.nodes), transpose=transposed)
    k, tau = choose_k(net, optimum(net))
    return translated(inst, "allgather", transposed, k, tau)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=fabrics, kind=st.sampled_from(["allgather", "reduce_scatter"]), pieces=st.integers(1, 3))
def test_translated_listed_and_explicit_agree(fabric, kind, pieces):
    inst = make_instance(build(*fabric), kind, message_bytes=1 << 20)
    c = translated_form(inst)
    assert c is not None and c.copies > 1
    assert_priced_as_listed(replace(c, pieces=pieces), inst)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=fabrics, transpose=st.booleans())
def test_optimum_at_one_box_is_the_optimum_at_every_node(fabric, transpose):
    topo = build(*fabric)
    net = flow_net(topo, topo.npus, [1] * len(topo.npus), transpose=transpose)
    assert net.checked is not None and len(net.checked) < len(net.compute)
    assert optimum(net).tau == optimum(replace(net, checked=None)).tau


def test_dgx_h100_two_level_trees_at_the_optimum_by_hand():
    """Eight boxes of eight GPUs (NVLink 450 GB/s, NIC 50 GB/s): every GPU takes in 7 shards
    over its NIC and 56 over NVLink, so the optimum is 7 shards / 50 GB/s (the NIC), tau = 7
    units of 50 GB/s; each root reaches its 7 rail peers over its NIC and each of them its 7
    box mates, so a shard crosses 4 hops (GPU, rail, GPU, NVSwitch, GPU): 64 GPUs x (7 + 56) =
    4,032 routes, 8,064 hops; the shifts (GPUs within a box, 8, and boxes, 8) move one root's
tree onto all 64. Under ``sync`` with ``P``
    pieces of ``s / P``: steps 1 .. P + 1 move 7 pieces over a NIC (up, then down), the last
    two 49 over an NVLink (the peers' forwards of 7 roots to 7 mates), so the bandwidth part
    is ``s / P * ((P + 1) * 7 / 50e9 + 2 * 49 / 450e9)``."""
    inst = make_instance(build("dgx_h100", {"nodes": 8}), "allgather", message_bytes=1 << 30)
    c = translated_form(inst)
    assert (len(c.root), c.orders, c.depth, len(c.src) * c.copies) == (1, (8, 8), 4, 8064)
    s, P = inst.collective.chunk_bytes, 10_000
    assert price_sync(replace(c, pieces=P), inst).T_B_s == pytest.approx(
        s / P * ((P + 1) * 7 / 50e9 + 2 * 49 / 450e9), rel=1e-12)


def mutants(c, topo):
    """A shift that is not an automorphism (two GPUs of different boxes swapped), one copy too
    few, and a dropped last hop."""
    a, b = topo.npus[0], topo.npus[-1]
    swapped = c.shift.copy()
    swapped[-1, [a, b]] = c.shift[-1, [b, a]]
    fewer = (*c.orders[:-1], c.orders[-1] - 1)
    dropped = replace(c, src=c.src[:-1], dst=c.dst[:-1], before=c.before[:-1], ptr=np.minimum(c.ptr, len(c.src) - 1))
    return [replace(c, shift=swapped), replace(c, orders=fewer), dropped]


@pytest.mark.parametrize("gen, params", [("dgx_h100", {"nodes": 3}), ("fat_tree", {"k": 4})])
def test_mutants_are_rejected(gen, params):
    inst = make_instance(build(gen, params), "allgather", message_bytes=1 << 20)
    c = translated_form(inst)
    assert verify_trees(c, inst) is None
    for bad in mutants(c, inst.topology):
        assert verify_trees(bad, inst) is not None
    dropped = mutants(c, inst.topology)[-1]
    assert verify.verify(_with_header(expand(dropped), inst), inst) is not None


def test_box_shift_counts_by_hand():
    """A k = 4 fat tree: 2 hosts an edge switch, 2 edges a pod, 4 pods (swapping the hosts of
    every edge, the edges of every pod, moving the pods on); DGX H100 x3: the 8 GPUs of every
    box a rail on, then the 3 boxes; a 3 x 3 mesh has none (moving a row on puts the first row
    next to the last)."""
    s = box_shift(build("fat_tree", {"k": 4}))
    assert (s.box, s.orders, s.order) == (1, (2, 2, 4), 16)
    s = box_shift(build("dgx_h100", {"nodes": 3}))
    assert (s.box, s.orders) == (1, (8, 3))
    assert s.perms[0][:8].tolist() == [1, 2, 3, 4, 5, 6, 7, 0] and s.perms[1][:3].tolist() == [8, 9, 10]
    assert box_shift(build("mesh", {"dims": [3, 3]})) is None
