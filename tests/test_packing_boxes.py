"""The box model (solvers/packing/boxes.py) on hand-built systems: the boxes, crossbars, links and
entries expected are written from each system's description (its generator's docstring and the
papers it cites), not produced by the model."""

from __future__ import annotations

from pathlib import Path

from collsynth.instances.instance import load_instance, topology_from_dict
from collsynth.instances.topology import from_edges
from collsynth.solvers.packing import boxes
from collsynth.tens.cut_optimum import flow_net

CORPUS = Path(__file__).resolve().parents[1] / "instances" / "corpus"


def model_of(topo) -> boxes.Boxes:
    return boxes.of_flow_net(flow_net(topo, topo.npus, [1] * len(topo.npus)))


def test_forestcoll_a100_boxes_are_the_nvswitches_and_the_nics_are_no_entry():
    """ForestColl's two A100 boxes (Zhao et al., arXiv 2402.06787, Section 6; generator doc):
    GPU g of box n is 8n + g on its box's NVSwitch (ids 16, 17); each GPU's NIC (a switch) and the
    two InfiniBand switches behind the NICs are routes of three switches between boxes, not one:
    two boxes of eight GPUs with their crossbars, no links, no entries."""
    m = model_of(topology_from_dict({"generator": "forestcoll_a100", "nodes": 2}))
    assert m.gpus == (tuple(range(8)), tuple(range(8, 16)))
    assert m.crossbars == (16, 17)
    assert m.links == {} and m.entries == {}
    assert m.groups() == {g: g // 8 for g in range(16)}


def test_one_a100_box_is_one_crossbar():
    """One A100 box: eight GPUs on one NVSwitch (id 8), nothing else: one box, its crossbar."""
    m = model_of(topology_from_dict({"generator": "forestcoll_a100", "nodes": 1}))
    assert m.gpus == (tuple(range(8)),) and m.crossbars == (8,) and m.groups() is None


def test_forestcoll_mi250_boxes_are_the_xgmi_meshes_behind_one_switch():
    """ForestColl's two MI250 boxes: GCD g of box n is 16n + g, the xGMI mesh of
    ``MI250_ADJ_MAT`` inside each box (GCDs 0 and 1 joined by 4 links, 0 and 4 by 2, 0 and 8 by
    1), every GCD on one InfiniBand switch (id 32) at 16 GB/s against 50 GB/s an xGMI link. The
    switch holds every GPU beside links, so it is the fabric, not a crossbar: two boxes of 16
    linked GCDs, each entering the other through switch 32 only."""
    m = model_of(topology_from_dict({"generator": "forestcoll_mi250", "nodes": 2}))
    assert m.gpus == (tuple(range(16)), tuple(range(16, 32))) and m.crossbars == (None, None)
    assert m.entries == {(0, 1): boxes.Entries((), (32,)), (1, 0): boxes.Entries((), (32,))}
    assert m.links[(0, 1)] == 2 * m.links[(0, 4)] == 4 * m.links[(0, 8)]
    assert (0, 2) not in m.links and (0, 16) not in m.links  # no xGMI 0-2; boxes never linked
    assert m.switch_gpus[32] == tuple(range(32))
    assert m.units[(0, 32)] * 50 == m.links[(0, 8)] * 16  # the switch port over an xGMI link: 16 / 50
    assert m.routes[(0, 1)] == (0, 1)


def test_dgx2_chassis_are_crossbars_entered_over_the_nic_links():
    """TE-CCL's DGX-2 (Liu et al., SIGCOMM 2024, dgx2.py; generator doc): GPU g of chassis c is
    16c + g, on its chassis's NVSwitch (ids 32, 33); odd GPU 2k + 1 of a chassis sends to even
    GPU 2k of the other over a NIC link. Two crossbar boxes; the eight NIC links of each
    direction are the entries."""
    m = model_of(topology_from_dict({"generator": "dgx2", "chassis": 2, "unwind": 0}))
    assert m.gpus == (tuple(range(16)), tuple(range(16, 32))) and m.crossbars == (32, 33)
    assert m.entries[(0, 1)] == boxes.Entries(tuple((2 * k + 1, 16 + 2 * k) for k in range(8)), ())
    assert m.entries[(1, 0)] == boxes.Entries(tuple((16 + 2 * k + 1, 2 * k) for k in range(8)), ())
    assert m.links == {}


def test_dgx_h100_rails_two_port_links_at_two_boxes_switch_entries_at_four():
    """DGX H100 (generator doc): GPU g of box n is 8n + g on its box's NVSwitch (ids after the
    GPUs) at 450 GB/s, and on rail switch g (ids after the NVSwitches) at 50 GB/s with GPU g of
    every box. At two boxes a rail switch has two ports: a link, its route through the
    switch. At four, a rail switch holds four GPUs, but each GPU's faster switch is its
    NVSwitch: four crossbar boxes, each entering every other through the eight rails."""
    m = model_of(topology_from_dict({"generator": "dgx_h100", "nodes": 2}))
    assert m.gpus == (tuple(range(8)), tuple(range(8, 16))) and m.crossbars == (16, 17)
    assert m.entries[(0, 1)] == boxes.Entries(tuple((g, 18 + g, 8 + g) for g in range(8)), ())
    m = model_of(topology_from_dict({"generator": "dgx_h100", "nodes": 4}))
    assert m.gpus == tuple(tuple(range(8 * n, 8 * n + 8)) for n in range(4)) and m.crossbars == (32, 33, 34, 35)
    assert all(m.entries[(x, y)] == boxes.Entries((), tuple(range(36, 44))) for x in range(4) for y in range(4) if x != y)
    assert m.switch_gpus[36] == (0, 8, 16, 24)


def test_tacos_hierarchy_is_one_box_of_links_some_through_two_port_switches():
    """TACOS's ring x fully-connected x switch hierarchy, 4 x 4 x 2 (Won et al., "TACOS",
    Section VII-B; the corpus file): NPU ``(a, b, c)`` is ``8a + 2b + c``; a ring over ``a``
    (neighbours 8 ids on and back, mod 32), all-to-all over ``b`` (the 3 other values), and a
    switch of two ports joining ``c = 0`` and ``c = 1``. Every NPU has six links; the switch
    ones are links whose route goes through the switch; no crossbar, one box."""
    topo = load_instance(CORPUS / "tacos-hier-ring-fc-switch-4x4x2-allgather.toml").topology
    m = model_of(topo)
    assert m.gpus == (tuple(range(32)),) and m.crossbars == (None,) and m.entries == {}
    want = set()
    for v in range(32):
        a, b, c = v // 8, (v // 2) % 4, v % 2
        want |= {(v, 8 * ((a + 1) % 4) + 2 * b + c), (v, 8 * ((a - 1) % 4) + 2 * b + c)}
        want |= {(v, 8 * a + 2 * x + c) for x in range(4) if x != b}
        want.add((v, 8 * a + 2 * b + 1 - c))
    assert set(m.links) == want
    assert all(len(m.routes[(v, v ^ 1)]) == 3 and m.routes[(v, v ^ 1)][1] in topo.switches for v in range(32))
    assert all(len(m.routes[arc]) == 2 for arc in want if arc[1] != arc[0] ^ 1)


def test_equal_switches_name_no_crossbar():
    """Two GPU switches of equal ports on every GPU (two planes of one box): neither is any
    GPU's crossbar, and no link joins the GPUs: each GPU is a box of its own, every switch an
    entry between them; nothing groups the GPUs."""
    e = [(g, s, {"bandwidth": 1e9, "alpha": 0.0}) for g in range(3) for s in (3, 4)]
    e += [(s, g, {"bandwidth": 1e9, "alpha": 0.0}) for g in range(3) for s in (3, 4)]
    m = model_of(from_edges(5, e, switches=[3, 4]))
    assert m.gpus == ((0,), (1,), (2,)) and m.crossbars == (None,) * 3
    assert m.entries[(0, 2)] == boxes.Entries((), (3, 4)) and m.groups() is None


def test_pooling_adds_parallel_links():
    """Links of 1 and 2 units from 0 to 1 pool into 3; 1 -> 0 (5) stays; a self-loop and a link
    of no units are left out."""
    assert boxes.pooled([0, 0, 1, 2, 2], [1, 1, 0, 2, 0], [1, 2, 5, 7, 0]) == {(0, 1): 3, (1, 0): 5}
