"""HGX H100 boxes with 1, 2, 4 or 8 NICs (instances/hgx_h100.py): links written out by hand for
two boxes with two NICs each, the size formula against what is built, the allgather cut optimum
derived by hand (the box's NICs are its only way in), bad parameters one line and exit 2.
"""

import pytest

from cli_errors import assert_one_error_line, run_cli
from collsynth import InputError
from collsynth.instances import generators
from collsynth.instances.registry import SIZES
from collsynth.instances.systems import class_counts
from collsynth.tens.cut_optimum import flow_net, optimum


def _links(topo, cls):
    return sorted((u, v) for u, v, c in topo.graph.edges(data="link_class") if c == cls)


def test_two_boxes_two_nics_written_out():
    t = generators.build("hgx_h100", {"nodes": 2, "nics": 2})
    # ids: GPUs 0-15, NVSwitches 16 (box 0) and 17 (box 1); the NICs' sending sides 18, 19 (box 0)
    # and 20, 21 (box 1), their receiving sides 22, 23 and 24, 25; rails 26 (NIC 0 of each box)
    # and 27 (NIC 1 of each box)
    assert sorted(t.npus) == list(range(16)) and t.switches == set(range(16, 28))
    tx = {g: 18 + 2 * (g // 8) + (g % 8) // 4 for g in range(16)}  # GPUs 0-3 on NIC 0, 4-7 on NIC 1
    assert _links(t, "pcie") == sorted([(g, tx[g]) for g in range(16)] + [(tx[g] + 4, g) for g in range(16)])
    assert _links(t, "rail") == sorted([(18, 26), (26, 22), (20, 26), (26, 24), (19, 27), (27, 23), (21, 27), (27, 25)])
    assert _links(t, "nvswitch") == sorted([(g, 16 + g // 8) for g in range(16)] + [(16 + g // 8, g) for g in range(16)])
    for cls, bw in (("nvswitch", 450e9), ("pcie", 64e9), ("rail", 50e9)):
        assert {d["bandwidth"] for _, _, d in t.graph.edges(data=True) if d["link_class"] == cls} == {bw}
        assert t.meta["link_classes"][cls]["source"]


@pytest.mark.parametrize("nodes,nics", [(1, 4), (2, 1), (2, 8), (4, 4), (4, 8), (8, 2)])
def test_counts_and_size_formula(nodes, nics):
    t = generators.build("hgx_h100", {"nodes": nodes, "nics": nics})
    nic_nodes = nics * nodes if 1 < nodes and nics < 8 else 0  # a NIC of one GPU is no node
    rails = nics if nodes > 1 else 0
    assert len(t.npus) == 8 * nodes and len(t.switches) == nodes + 2 * nic_nodes + rails  # two sides a NIC
    expected = {"nvswitch": 16 * nodes}
    if nodes > 1 and nics < 8:
        expected |= {"pcie": 16 * nodes, "rail": 2 * nic_nodes}
    elif nodes > 1:
        expected |= {"rail": 16 * nodes}  # each GPU on its rail, both ways
    assert class_counts(t) == expected
    ids, links, _ = SIZES["hgx_h100"]({"nodes": nodes, "nics": nics})
    assert (ids, links) == (t.size, t.num_links)


@pytest.mark.parametrize("nics,expected_ms", [(1, 10.0), (2, 5.0), (4, 2.5), (8, 1.875)])
def test_two_box_allgather_optimum_by_hand(nics, expected_ms):
    # 1 GB over 16 GPUs. With fewer than 8 NICs the binding cut is a box with its NICs: the other
    # box's 8 shards (0.5 GB) enter through nics rail links of 50 GB/s. With 8 the binding cut is
    # one GPU with its NIC: 15 shards (0.9375 GB) at 450 (NVSwitch) + 50 (rail) GB/s.
    t = generators.build("hgx_h100", {"nodes": 2, "nics": nics, "nvlink_alpha": 0.0, "pcie_alpha": 0.0,
                                      "nic_alpha": 0.0})
    net = flow_net(t, range(16), [1] * 16)
    assert optimum(net).seconds(1e9 / 16, net.unit_bw) * 1e3 == pytest.approx(expected_ms)


def test_eight_nics_put_each_gpu_on_its_rail():
    # GPU g of box b on rail switch 8 * 3 + 3 + g % 8 (ids after 24 GPUs and 3 NVSwitches), at
    # min(64, 50) GB/s with 1.0 + 2.7 us, as dgx_h100's rails
    t = generators.build("hgx_h100", {"nodes": 3, "nics": 8})
    rails = [(g, 27 + g % 8) for g in range(24)]
    assert _links(t, "rail") == sorted(rails + [(r, g) for g, r in rails])
    costs = {(d["bandwidth"], round(d["alpha"] * 1e7)) for _, _, d in t.graph.edges(data=True) if d["link_class"] == "rail"}
    assert costs == {(50e9, 37)}
    dgx = generators.build("dgx_h100", {"nodes": 3})
    assert sorted(t.graph.edges()) == sorted(dgx.graph.edges())


@pytest.mark.parametrize("params,field,words", [
    ({"nics": 3}, "topology.nics", "1, 2, 4, 8"), ({"nics": 0}, "topology.nics", "1, 2, 4, 8"),
    ({"nodes": 0}, "topology.nodes", "1..inf"), ({"pcie_bandwidth": 0.0}, "topology.bandwidth", "positive"),
])
def test_bad_parameters_name_the_field(params, field, words):
    with pytest.raises(InputError) as err:
        generators.build("hgx_h100", params)
    assert err.value.where == field and words in err.value.what


def test_bad_nic_count_is_one_line_exit_2(capsys):
    code, out, err = run_cli(["topology", "hgx_h100", "nodes=2", "nics=3"], capsys)
    assert code == 2 and out == ""
    assert_one_error_line(err, ["topology.nics", "1, 2, 4, 8", "got 3"])
    code, out, err = run_cli(["topology", "hgx_h100", "nics=6", "--json"], capsys)
    assert code == 2 and out == ""  # under --json too: nothing on stdout, the one line on stderr
    assert_one_error_line(err, ["topology.nics", "got 6"])


def test_two_nic_boxes_relay_over_nvlink_and_fifo_links_keep_up():
    """Two boxes with two NICs each, 1 GB allgather at alpha 0, 200 pieces: the NIC's two sides
    leave no GPU -> NIC -> GPU route (links by hand above), so the two-level trees relay over
    NVSwitch only, and the FIFO event time is above the optimum (5 ms, test above) by the pipeline's fill alone
    (6 hops: 3 / pieces bounds it, as on ForestColl's A100 boxes in
    tests/test_packing_twolevel.py). With one node a NIC it was 1.088x."""
    from collsynth.instances.instance import make_instance
    from collsynth.solvers.producers import Options, get
    from collsynth.tens import cost_models
    from collsynth.tens.verify import verify

    t = generators.build("hgx_h100", {"nodes": 2, "nics": 2, "nvlink_alpha": 0.0, "pcie_alpha": 0.0,
                                      "nic_alpha": 0.0})
    inst = make_instance(t, "allgather", message_bytes=1e9)
    out = get("tree-packing").run(inst, Options(params={"pieces": 200}, time_limit=300))
    assert verify(out.schedule, inst) is None
    assert out.extra["forests"][0]["shape"] == "two-level"
    event = cost_models.price(out.schedule, inst, "event").total_s
    assert 5e-3 * (1 - 1e-9) <= event <= 5e-3 * (1 + 3 / 200)
