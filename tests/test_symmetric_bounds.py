"""Instance bounds on identical boxes: one box's demand rows and one node per orbit give the
same bound of every model as every row and node (hypothesis over small DGX H100, fat-tree and
rail Clos fabrics, allgather and reduce-scatter); a demand the shifts do not keep (a broadcast,
an allgather among some GPUs) is not reduced; the representative rows and nodes of DGX H100 x3
by hand."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.tens.bounds import instance as bounds_instance
from collsynth.tens.bounds.demand import demand_of
from collsynth.tens.bounds.symmetric import orbit_demand, representative_nodes, row_orbits

fabrics = st.one_of(
    st.builds(lambda n: ("dgx_h100", {"nodes": n}), st.integers(2, 4)),
    st.just(("fat_tree", {"k": 4})),
    st.builds(lambda gpus, spines: ("rail_clos", {"groups_per_pod": 2, "boxes_per_group": 2, "gpus_per_box": gpus,
                                                  "rails": gpus, "spines": spines, "radix": 16}),
              st.sampled_from([1, 2]), st.sampled_from([1, 2])),
)
MODELS = ("sync", "event", "steps", "timesteps", "ten")


def _bounds(inst, symmetric: bool) -> dict:
    """Every model's best bound, computed afresh with or without the box shifts' reduction."""
    bounds_instance._CACHE.clear()
    keep = bounds_instance.row_orbits
    if not symmetric:
        bounds_instance.row_orbits = lambda topology, demand: None
    try:
        b = bounds_instance.instance_bounds(inst)
        return {m: b.of(m).value for m in MODELS}
    finally:
        bounds_instance.row_orbits = keep
        bounds_instance._CACHE.clear()


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=fabrics, kind=st.sampled_from(["allgather", "reduce_scatter"]), chunks=st.integers(1, 2))
def test_one_box_gives_every_bound(fabric, kind, chunks):
    gen, params = fabric
    inst = make_instance(build(gen, params), kind, message_bytes=float(1 << 20), chunks_per_node=chunks)
    assert row_orbits(inst.topology, demand_of(inst)) is not None
    got, want = _bounds(inst, True), _bounds(inst, False)
    for m in MODELS:
        assert got[m] == pytest.approx(want[m], rel=1e-12), m


def test_dgx_h100_x3_by_hand():
    # 24 GPUs (ids 0-23), NVSwitches 24-26, rail leaves 27-34: the shifts move GPU 0 onto every
    # GPU (rails alike, then boxes), so one row (GPU 0's shard) stands for 24; the node orbits
    # are the GPUs, the NVSwitches and the leaves, least ids 0, 24 and 27.
    inst = make_instance(build("dgx_h100", {"nodes": 3}), "allgather", message_bytes=24.0)
    demand = demand_of(inst)
    o = row_orbits(inst.topology, demand)
    assert o.rows.tolist() == [0] and o.size == 24
    assert representative_nodes(inst.topology, o).tolist() == [0, 24, 27]
    far = orbit_demand(demand, o)
    assert far.count.tolist() == [24] and far.nbytes.tolist() == [24.0]  # 24 shards of 1 byte


def test_demands_the_shifts_do_not_keep():
    topo = build("dgx_h100", {"nodes": 2})
    assert row_orbits(topo, demand_of(make_instance(topo, "broadcast", message_bytes=1.0, root=0))) is None
    some = make_instance(topo, "allgather", message_bytes=4.0, nodes=[0, 1, 8, 9])
    assert row_orbits(topo, demand_of(some)) is None
