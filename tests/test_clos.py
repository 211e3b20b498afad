"""Clos fabric generators: counts of small instances derived by hand, the cited descriptions'
switch and cable counts, bisection bandwidth by an independent max flow, the allgather cut
optimum of an oversubscribed fabric by hand, and the one-line refusals of bad parameters."""

from fractions import Fraction

import networkx as nx
import pytest

from cli_errors import assert_one_error_line, run_cli
from collsynth.instances.clos import bisection_bandwidth, clos_plan
from collsynth.instances.generators import build
from collsynth.tens.cut_optimum import flow_net, optimum

B = 50e9  # the default NIC port: 400 Gb/s


def halves_max_flow(topo, first_half):
    """Bytes/s from the GPUs of ``first_half`` to the other GPUs (networkx max flow over the
    pooled link bandwidths: an independent check of ``meta["bisection_bandwidth"]``)."""
    g = nx.DiGraph()
    for u, v, bw in topo.graph.edges(data="bandwidth"):
        g.add_edge(u, v, capacity=g.get_edge_data(u, v, {"capacity": 0})["capacity"] + bw)
    for x in topo.npus:
        if x in first_half:
            g.add_edge("s", x, capacity=float("inf"))
        else:
            g.add_edge(x, "t", capacity=float("inf"))
    return nx.maximum_flow_value(g, "s", "t")


def test_fat_tree_k4_counts_by_hand():
    # Al-Fares et al. Section 3: k^3/4 = 16 hosts, k^2/2 = 8 edge, 8 aggregation, (k/2)^2 = 4
    # cores; cables: 16 host-edge + 4 pods x 2 x 2 edge-aggregation + 4 x 2 x 2 aggregation-core = 48.
    t = build("fat_tree", {"k": 4})
    assert len(t.npus) == 16 and len(t.switches) == 20
    assert t.meta["switch_counts"] == {"box": 0, "leaf": 8, "spine": 8, "core": 4}
    assert t.num_links == 96
    assert all(t.graph.in_degree(s) == 4 and t.graph.out_degree(s) == 4 for s in t.switches)  # radix k
    # full bisection: k^3/8 = 8 hosts' links cross
    assert t.meta["bisection_bandwidth"] == 8 * B == halves_max_flow(t, set(range(8)))


def test_small_rail_clos_counts_by_hand():
    # 2 groups x 2 boxes x 2 GPUs, 2 rails, 2 spines: 4 NVSwitches, 2 x 2 leaves (down 2, up 2,
    # one cable to each spine), 2 spines. Directed links: 8 GPU-NVSwitch x 2, 8 GPU-leaf x 2,
    # 4 leaves x 2 spines x 2 = 48.
    t = build("rail_clos", {"groups_per_pod": 2, "boxes_per_group": 2, "gpus_per_box": 2, "rails": 2,
                            "spines": 2, "radix": 4})
    assert len(t.npus) == 8 and t.meta["switch_counts"] == {"box": 4, "leaf": 4, "spine": 2, "core": 0}
    assert t.num_links == 48
    assert t.meta["cables"] == {"gpu_leaf": 8, "leaf_spine": 8, "spine_core": 0}
    # GPU 0 (box 0) and GPU 2 (box 1) share rail 0's leaf of group 0; GPU 1 is on rail 1
    leaf_of = {x: next(v for v in t.graph.successors(x) if t.graph[x][v][0]["link_class"] == "nic") for x in range(8)}
    assert leaf_of[0] == leaf_of[2] != leaf_of[1] and leaf_of[0] != leaf_of[4]
    assert t.meta["bisection_bandwidth"] == 4 * B == halves_max_flow(t, set(range(4)))


def test_three_tier_oversubscribed_bisection_by_hand():
    # 2 pods x 1 group x 2 boxes x 2 GPUs, 2 rails, spines 1, cores 1, 2:1 at the leaf, 2:1 at the
    # spine, fabric ports at B / 2: a leaf has 2 GPU ports (2B), uplinks 2B / (2 x B/2) = 2; the
    # spine has 2 leaves x 2 down, 4 / 2 = 2 up. Half (one pod) sends through 2 spine uplinks of B/2.
    t = build("rail_clos", {"pods": 2, "groups_per_pod": 1, "boxes_per_group": 2, "gpus_per_box": 2, "rails": 2,
                            "spines": 1, "cores": 1, "radix": 8, "oversubscription": [2.0, 2.0],
                            "fabric_bandwidth": B / 2})
    assert t.meta["switch_counts"] == {"box": 4, "leaf": 4, "spine": 2, "core": 1}
    assert t.meta["cables"] == {"gpu_leaf": 8, "leaf_spine": 8, "spine_core": 4}
    assert t.meta["bisection_bandwidth"] == B == halves_max_flow(t, set(range(4)))


def test_oversubscribed_leaves_set_the_allgather_optimum():
    # 2 groups x 2 boxes x 2 GPUs (N = 8), fabric ports B/4, 4:1 at the leaf: a leaf's 2 GPU
    # ports (2B) get 2B / (4 x B/4) = 2 uplinks of B/4. One group (4 GPUs) receives the other 4
    # shards through its 2 leaves' uplinks, 2 x 2 x B/4 = B: 4 / B per shard, above one box's
    # 6 shards through its 2 NIC ports (3 / B). ForestColl's cut condition must find 4 / B.
    t = build("rail_clos", {"groups_per_pod": 2, "boxes_per_group": 2, "gpus_per_box": 2, "rails": 2,
                            "spines": 2, "radix": 16, "oversubscription": [4.0, 1.0], "fabric_bandwidth": B / 4})
    net = flow_net(t, range(8), [1] * 8)
    assert optimum(net).tau / Fraction(net.unit_bw) == Fraction(4) / Fraction(B)


def test_superpod_counts_match_the_reference_architecture():
    # NVIDIA DGX SuperPOD RA (DGX H100), larger-SuperPOD component counts: 4 SU = 128 nodes,
    # 32 leaves, 16 spines, 1,024 node-leaf and 1,024 leaf-spine cables; 16 SU = 512 nodes,
    # 128 leaves, 128 spines, 64 cores, 4,096 cables at each tier.
    four = build("rail_clos", {})
    assert len(four.npus) == 1024 and four.meta["switch_counts"] == {"box": 128, "leaf": 32, "spine": 16, "core": 0}
    assert four.meta["cables"] == {"gpu_leaf": 1024, "leaf_spine": 1024, "spine_core": 0}
    sixteen = clos_plan({"pods": 16, "groups_per_pod": 1, "spines": 8, "cores": 64})
    assert (sixteen["gpus"], sixteen["leaves"], sixteen["spine_count"], sixteen["core_count"]) == (4096, 128, 128, 64)
    assert (sixteen["leaves"] * sixteen["leaf_up"], sixteen["spine_count"] * sixteen["spine_up"]) == (4096, 4096)
    assert bisection_bandwidth(sixteen) == 2048 * B  # non-blocking: half the GPUs at full rate


def test_hpn_segment_and_pod_counts():
    # Qian et al. (HPN) Sections 4-5: 1,024 GPUs a segment, 15 segments (15K GPUs) a pod; a ToR
    # has 128 x 200G down and 60 x 400G up (1.067:1); an aggregation switch serves the 15 x 8
    # ToRs of its plane; with pods, 8 uplinks (15:1).
    plan = clos_plan({"pods": 2, "groups_per_pod": 15, "boxes_per_group": 128, "planes": 2, "spines": 60,
                      "cores": 120, "radix": 128, "oversubscription": [1.067, 15.0], "nic_bandwidth": 25e9,
                      "fabric_bandwidth": 50e9})
    assert plan["gpus"] == 2 * 15360 and plan["leaf_down"] == 128 and plan["leaf_up"] == 60
    assert plan["spine_down"] == 120 and plan["spine_up"] == 8
    t = build("hpn", {"segments": 2, "hosts_per_segment": 4, "aggregations": 2})
    # 64 GPUs, 8 NVSwitches, 2 planes x 2 segments x 8 rails = 32 ToRs, 2 x 2 aggregations;
    # each GPU has one port in each plane
    assert len(t.npus) == 64 and t.meta["switch_counts"] == {"box": 8, "leaf": 32, "spine": 4, "core": 0}
    assert all(sum(1 for v in t.graph.successors(x) if v in t.switches) == 3 for x in range(64))


@pytest.mark.parametrize("params, field", [
    ({"boxes_per_group": 64}, "topology.boxes_per_group"),  # 64 GPU ports + 64 uplinks > radix 64
    ({"oversubscription": [0.5, 1.0]}, "topology.oversubscription"),
    ({"pods": 2, "cores": 0}, "topology.cores"),
    ({"spines": 5}, "topology.spines"),
])
def test_bad_clos_is_one_line_naming_file_and_parameter(tmp_path, capsys, params, field):
    lines = ['name = "bad"', "[topology]", 'generator = "rail_clos"']
    lines += [f"{k} = {v}" for k, v in params.items()]
    lines += ["[collective]", 'kind = "allgather"', "message_bytes = 1048576"]
    path = tmp_path / "bad.toml"
    path.write_text("\n".join(lines) + "\n")
    code, out, err = run_cli(["instance", path], capsys)
    assert code == 2
    assert_one_error_line(err, [str(path), field])
