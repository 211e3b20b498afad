"""The diameter among NPUs from one NPU per orbit of the box shifts equals networkx's all-pairs
answer (hypothesis over small DGX H100, fat-tree, rail Clos, HPN and torus fabrics, some with a
failed link, where there are no shifts and every NPU is searched from)."""

import networkx as nx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collsynth.instances import topology as topology_module
from collsynth.instances.box_shift import box_shift
from collsynth.instances.generators import build
from collsynth.instances.topology import npu_eccentricity

fabrics = st.one_of(
    st.builds(lambda n: ("dgx_h100", {"nodes": n}), st.integers(2, 4)),
    st.builds(lambda k: ("fat_tree", {"k": k}), st.sampled_from([2, 4])),
    st.builds(lambda gpus, spines: ("rail_clos", {"groups_per_pod": 2, "boxes_per_group": 2, "gpus_per_box": gpus,
                                                  "rails": gpus, "spines": spines, "radix": 16}),
              st.sampled_from([1, 2]), st.sampled_from([1, 2])),
    st.just(("hpn", {"segments": 1, "hosts_per_segment": 4})),
    st.builds(lambda a, b: ("torus", {"dims": [a, b]}), st.integers(2, 5), st.integers(2, 5)),
)


def _networkx_diameter(topo) -> int:
    """The largest hop distance between NPUs, from networkx's breadth-first searches."""
    npus = set(topo.npus)
    far = 0
    for s in npus:
        reach = nx.single_source_shortest_path_length(topo.graph, s)
        if not npus <= set(reach):
            return -1
        far = max(far, max(reach[t] for t in npus))
    return far


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=fabrics, fail=st.booleans(), data=st.data())
def test_one_npu_per_orbit_gives_the_diameter(fabric, fail, data):
    gen, params = fabric
    topo = build(gen, params)
    if fail:
        u, v = data.draw(st.sampled_from(sorted((a, b) for a, b in topo.graph.edges() if a < b)))
        topo = topo.with_failures(links=[(u, v)])
    want = _networkx_diameter(topo)
    shift = box_shift(topo)
    if shift is not None:
        assert npu_eccentricity(topo, shift.representatives(topo.npus)) == want
    keep = topology_module.SYMMETRIC_DIAMETER_NPUS
    topology_module.SYMMETRIC_DIAMETER_NPUS = 0  # the orbit search even on these small fabrics
    try:
        assert build(gen, params).diameter == _networkx_diameter(build(gen, params))
        assert topo.diameter == want
    finally:
        topology_module.SYMMETRIC_DIAMETER_NPUS = keep


def test_dgx_h100_x16_by_hand():
    # 128 GPUs: GPU 0 to GPU 9 (another box, another rail) is NVSwitch, GPU 1, rail 1's leaf: 4 hops
    topo = build("dgx_h100", {"nodes": 16})
    assert box_shift(topo).representatives(topo.npus) == (0,)
    assert npu_eccentricity(topo, [0]) == 4
