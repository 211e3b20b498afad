"""Real-system generators: link counts and classes against the published descriptions.

Expected numbers are written from the descriptions (the hybrid cube-mesh as two fully
connected quads plus the four i <-> i+4 links; TE-CCL's NDv2 / DGX-2 wiring; the DGX A100 /
H100 datasheets; TACOS VII-B's 200/100/50 GB/s), not from the generators' own tables.
"""

from collections import Counter

import pytest

from collsynth import InputError
from collsynth.instances import generators
from collsynth.instances.systems import class_counts
from published import DGX1_NVLINK_COUNTS


def build(name, **params):
    return generators.build(name, params)


def links_of(topo, cls):
    return [(u, v, d) for u, v, d in topo.graph.edges(data=True) if d["link_class"] == cls]


def test_ndv2_one_chassis_is_the_hybrid_cube_mesh():
    t = build("ndv2", chassis=1)
    quads = {frozenset((a, b)) for q in ((0, 1, 2, 3), (4, 5, 6, 7)) for a in q for b in q if a < b}
    cross = {frozenset((i, i + 4)) for i in range(4)}
    assert {frozenset((u, v)) for u, v in t.graph.edges()} == quads | cross  # 16 GPU pairs
    assert t.num_links == 32 and not t.switches
    # every V100 has 6 NVLinks: two pairs joined by two links, two by one (DGX-1 counts, tests/published.py)
    units = Counter()
    for u, v, d in t.graph.edges(data=True):
        units[u] += 2 if d["link_class"] == "nvlink_x2" else 1
        assert (2 if d["link_class"] == "nvlink_x2" else 1) == DGX1_NVLINK_COUNTS[u][v]
    assert set(units.values()) == {6}
    assert class_counts(t) == {"nvlink_x1": 16, "nvlink_x2": 16}


def test_ndv2_link_classes_carry_te_ccl_values():
    t = build("ndv2", chassis=2)
    for cls, bw, alpha in (("nvlink_x2", 50e9, 0.7e-6), ("nvlink_x1", 25e9, 0.7e-6), ("ib", 12.5e9, 1.3e-6)):
        assert {(d["bandwidth"], d["alpha"]) for _, _, d in links_of(t, cls)} == {(bw, alpha)}
        assert t.meta["link_classes"][cls]["bandwidth"] == bw and "TE-CCL" in t.meta["link_classes"][cls]["source"]
    # one NIC per chassis: GPU 0 sends, GPU 1 of the other chassis receives (TE-CCL ndv2.py)
    assert sorted((u, v) for u, v, _ in links_of(t, "ib")) == [(0, 9), (8, 1)]
    assert t.num_links == 2 * 32 + 2


def test_ndv2_four_chassis_wirings():
    sw = build("ndv2", chassis=4, inter_chassis="switch")
    assert sw.switches == {32}
    ib = sorted((u, v) for u, v, _ in links_of(sw, "ib"))
    assert ib == sorted([(8 * c, 32) for c in range(4)] + [(32, 8 * c + 1) for c in range(4)])
    un = build("ndv2", chassis=4, inter_chassis="unwound")
    ib = links_of(un, "ib")
    assert len(ib) == 4 * 3 and not un.switches
    assert {d["bandwidth"] for _, _, d in ib} == {12.5e9 / 3}
    assert {(u, v) for u, v, _ in ib} == {(8 * a, 8 * b + 1) for a in range(4) for b in range(4) if a != b}
    direct = build("ndv2", chassis=3)
    assert {d["bandwidth"] for _, _, d in links_of(direct, "ib")} == {12.5e9} and len(links_of(direct, "ib")) == 6


def test_dgx2_nvswitch_and_eight_nics_per_chassis():
    t = build("dgx2", chassis=2)
    assert len(t.npus) == 32 and t.switches == {32, 33}
    nvs = links_of(t, "nvswitch")
    assert len(nvs) == 2 * 16 * 2
    for g in range(32):  # one port each way to its own chassis's switch
        assert [(u, v) for u, v, _ in nvs if u == g] == [(g, 32 + g // 16)]
        assert [(u, v) for u, v, _ in nvs if v == g] == [(32 + g // 16, g)]
    ib = sorted((u, v) for u, v, _ in links_of(t, "ib"))
    assert ib == sorted([(2 * k + 1, 16 + 2 * k) for k in range(8)] + [(16 + 2 * k + 1, 2 * k) for k in range(8)])
    assert {(d["bandwidth"], d["alpha"]) for _, _, d in links_of(t, "ib")} == {(12.5e9, 2.6e-6)}
    assert {(d["bandwidth"], d["alpha"]) for _, _, d in nvs} == {(125e9, 0.35e-6)}
    un = build("dgx2", chassis=2, unwind=15)
    assert not un.switches and len(links_of(un, "nvswitch")) == 32 * 15
    assert {d["bandwidth"] for _, _, d in links_of(un, "nvswitch")} == {125e9 / 15}
    assert un.meta["link_classes"]["nvswitch"]["bandwidth"] == 125e9  # the physical port


@pytest.mark.parametrize("name,nvlink,nic", [("dgx_a100", 300e9, 25e9), ("dgx_h100", 450e9, 50e9)])
def test_dgx_rail_optimised(name, nvlink, nic):
    t = build(name, nodes=4)
    assert len(t.npus) == 32 and len(t.switches) == 4 + 8  # an NVSwitch per node, a leaf per rail
    rail_switch = {g: 32 + 4 + g for g in range(8)}
    for u, v, d in links_of(t, "rail"):
        gpu, sw = (u, v) if u < 32 else (v, u)
        assert sw == rail_switch[gpu % 8] and d["bandwidth"] == nic  # GPU g's NIC is on rail g
    assert Counter(u for u, _, _ in links_of(t, "rail") if u < 32) == Counter({g: 1 for g in range(32)})
    assert {d["bandwidth"] for _, _, d in links_of(t, "nvswitch")} == {nvlink}
    un = build(name, nodes=4, unwind_nvswitch=7, unwind_rail=3)
    assert not un.switches
    assert len(links_of(un, "nvswitch")) == 32 * 7 and len(links_of(un, "rail")) == 32 * 3
    assert {(u % 8, v % 8) for u, v, _ in links_of(un, "rail")} == {(g, g) for g in range(8)}
    with pytest.raises(InputError) as err:
        build(name, nodes=2, unwind_rail=2)
    assert err.value.where == "topology.unwind_rail"


def test_mi250_xgmi_mesh_and_nics():
    t = build("mi250")
    assert len(t.npus) == 16 and not t.switches
    units = Counter()
    for u, v, d in t.graph.edges(data=True):
        k = int(d["link_class"].removeprefix("xgmi_x"))
        units[u] += k
        assert d["bandwidth"] == k * 50e9 and t.has_link(v, u)
    assert set(units.values()) == {7}  # 7 xGMI links per GCD, 56 in all
    assert sum(units.values()) == 2 * 56
    assert {(u, v) for u, v, d in t.graph.edges(data="link_class") if d == "xgmi_x4"} == \
        {(2 * k + i, 2 * k + 1 - i) for k in range(8) for i in (0, 1)}  # the two dies of an OAM
    two = build("mi250", nodes=2)
    assert len(two.switches) == 2 * 8 + 1
    nic_ports = Counter(u for u, _, _ in links_of(two, "nic") if u < 32)
    assert nic_ports == Counter({g: 1 for g in range(32)})


@pytest.mark.parametrize("nodes", [1, 2, 4, 8, 16, 32, 64])
def test_ring_fc_switch_table1_sizes(nodes):
    t = build("ring_fc_switch", nodes=nodes)
    assert len(t.npus) == 8 * nodes and not t.switches  # TACOS Table I: 8..512 NPUs
    counts = class_counts(t)
    assert counts["level0_ring"] == 8 * nodes  # rings of 2: one link each way per pair
    assert counts["level1_complete"] == 2 * nodes * 4 * 3
    assert counts.get("level2_switch", 0) == (8 * nodes if nodes > 1 else 0)  # degree-1 unwinding
    bws = {c: t.meta["link_classes"][c]["bandwidth"] for c in counts}
    assert bws["level0_ring"] == 200e9 and bws["level1_complete"] == 100e9
    assert nodes == 1 or bws["level2_switch"] == 50e9


def test_ring_ring_and_switch_switch():
    rr = build("ring_ring", dims=[8, 8])
    assert len(rr.npus) == 64 and rr.num_links == 256 and rr.regular
    ss = build("switch_switch")
    assert len(ss.npus) == 32 and class_counts(ss) == {"level0_switch": 4 * 8 * 7, "level1_switch": 8 * 4}
    assert [d["bandwidth"] for _, _, d in links_of(ss, "level0_switch")] == pytest.approx([300e9 / 7] * 224)


def test_system_generators_refuse_instance_link_costs():
    with pytest.raises(InputError) as err:
        generators.build("ndv2", {"chassis": 1}, bandwidth=1e9)
    assert err.value.where == "topology.bandwidth"
    with pytest.raises(InputError) as err:
        generators.build("dgx2", {}, alpha=1e-6)
    assert err.value.where == "topology.alpha"


@pytest.mark.parametrize("name,params,field", [
    ("ndv2", {"chassis": 5}, "chassis"), ("ndv2", {"inter_chassis": "mesh"}, "inter_chassis"),
    ("ndv2", {"nvlink_bandwidth": 0.0}, "bandwidth"), ("dgx2", {"unwind": 16}, "unwind"),
    ("mi250", {"nodes": 2, "unwind": 2}, "unwind"), ("ring_ring", {"dims": [8]}, "dims"),
])
def test_bad_system_parameters_name_the_field(name, params, field):
    with pytest.raises(InputError) as err:
        generators.build(name, params)
    assert err.value.where == f"topology.{field}"


def test_systems_are_in_the_catalogue():
    rows = {r["name"]: r for r in generators.describe()}
    for name in ("ndv2", "dgx2", "dgx_a100", "dgx_h100", "mi250", "ring_fc_switch", "ring_ring", "switch_switch"):
        assert rows[name]["summary"], name
