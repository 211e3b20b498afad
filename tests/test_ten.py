"""The time-expanded network (TACOS section IV): arcs, delays, capacity, horizon, unwinding."""

import math

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collsynth import InputError
from collsynth.instances.generators import DGX1_NVLINKS, build
from collsynth.instances.topology import from_edges
from collsynth.tens.ten import build_ten, discretize, link_costs, unwind_switches


def uniring(n=3):
    return build("ring", {"nodes": n, "bidirectional": False}, bandwidth=1.0, alpha=0.0)


def test_uniring_arc_counts_match_tacos_fig7():
    """TEN_3 of a 3-NPU unidirectional ring: 3 links x 3 timesteps, 3 nodes x 3 stay arcs."""
    ten = build_ten(uniring(3), 3, 1.0)
    assert ten.num_links == 3 and ten.num_arcs == 9
    assert len(ten.stay_node) == 9
    assert ten.timestep == 1.0 and ten.delay.tolist() == [1, 1, 1]
    for t in (1, 2, 3):
        starting, arriving = ten.arcs_starting(t), ten.arcs_arriving(t)
        assert len(starting) == 3 and len(arriving) == 3
        assert set(ten.arc_start[starting].tolist()) == {t}
        assert set(ten.arc_end[arriving].tolist()) == {t}
    assert len(ten.arcs_starting(0)) == 0 and len(ten.arcs_arriving(4)) == 0
    g = ten.to_networkx()
    assert nx.is_directed_acyclic_graph(g)
    assert g.number_of_nodes() == 3 * 4 and g.number_of_edges() == 18
    # arc (0, t-1) -> (1, t) exists for every t, no arc goes backwards or sideways in time
    assert all(g.has_edge((0, t - 1), (1, t)) for t in (1, 2, 3))
    assert not g.has_edge((0, 0), (1, 0))


def test_heterogeneous_delays_ceil_of_cost_over_timestep():
    """Costs 1, 2.5 and 3 s: timestep 1 s by default (fastest link = 1 step) -> 1, 3, 3."""
    edges = [
        (0, 1, {"bandwidth": 1.0, "alpha": 0.0}),  # cost 1 (chunk 1 byte)
        (1, 2, {"bandwidth": 1.0, "alpha": 1.5}),  # cost 2.5
        (2, 0, {"bandwidth": 0.5, "alpha": 1.0}),  # cost 3
    ]
    topo = from_edges(3, edges)
    ten = build_ten(topo, 6, chunk_bytes=1.0)
    assert ten.timestep == pytest.approx(1.0)
    assert ten.cost_s.tolist() == pytest.approx([1.0, 2.5, 3.0])
    assert ten.delay.tolist() == [1, 3, 3]
    # TACOS Fig. 9 uses an explicit factor f = 2.3: ceil(c / 2.3)
    ten2 = build_ten(topo, 6, chunk_bytes=1.0, timestep=2.3)
    assert ten2.delay.tolist() == [math.ceil(c / 2.3) for c in (1.0, 2.5, 3.0)] == [1, 2, 2]
    # a 3-step arc starting at s arrives at the end of s + 2
    arcs = np.flatnonzero(ten.arc_link == 1)
    assert (ten.arc_end[arcs] - ten.arc_start[arcs]).tolist() == [2] * len(arcs)


def test_float_noise_does_not_add_a_timestep():
    assert discretize(np.array([0.1 * 3, 0.1, 0.30000001]), 0.1).tolist() == [3, 1, 4]
    edges = [(0, 1, {"bandwidth": 10.0, "alpha": 0.0}), (1, 0, {"bandwidth": 10.0 / 3, "alpha": 0.0})]
    ten = build_ten(from_edges(2, edges), 5, chunk_bytes=1.0)
    assert ten.delay.tolist() == [1, 3]


def test_dgx1_parallel_links_are_capacity_not_speed():
    topo = build("dgx1", {}, bandwidth=25e9, alpha=1e-6)
    ten = build_ten(topo, 4, chunk_bytes=1e6)
    counts = np.asarray(DGX1_NVLINKS)
    assert ten.capacity.tolist() == counts[ten.src, ten.dst].tolist()
    assert set(ten.capacity.tolist()) == {1, 2}
    # a double NVLink is two links of 25 GB/s each: same per-chunk cost, one timestep
    assert ten.cost_s.tolist() == pytest.approx([1e-6 + 1e6 / 25e9] * ten.num_links)
    assert ten.delay.tolist() == [1] * ten.num_links
    assert link_costs(topo, 1e6).tolist() == pytest.approx(ten.cost_s.tolist())
    assert ten.num_arcs == ten.num_links * 4


def test_horizon_truncation_and_active_window():
    edges = [(0, 1, {"bandwidth": 1.0, "alpha": 0.0}), (1, 0, {"bandwidth": 1 / 3, "alpha": 0.0})]
    ten = build_ten(from_edges(2, edges), 4, chunk_bytes=1.0)
    assert ten.delay.tolist() == [1, 3]
    fast, slow = np.flatnonzero(ten.arc_link == 0), np.flatnonzero(ten.arc_link == 1)
    assert len(fast) == 4 and len(slow) == 2  # starts 1, 2 arrive at 3, 4; start 3 would arrive at 5
    assert ten.arc_end[slow].tolist() == [3, 4] and ten.arc_end.max() == 4
    assert ten.arc(1, 1) == slow[0] and ten.arc(1, 3) == -1 and ten.arc(0, 4) == fast[3]
    assert [a for a in ten.arcs_arriving(3)] == [fast[2], slow[0]]
    assert len(ten.arcs_arriving(1)) == 1 and len(ten.arcs_arriving(2)) == 1
    # the slow link is busy in timestep 3 with the arcs that started in 1, 2 (3 has no arc)
    assert ten.arc_start[ten.active(1, 3)].tolist() == [1, 2]
    assert ten.arc_start[ten.active(1, 1)].tolist() == [1]
    assert ten.arc_start[ten.active(1, 4)].tolist() == [2]
    assert ten.arc_start[ten.active(0, 2)].tolist() == [2]
    # a horizon shorter than the slow link's delay has no slow arcs at all
    short = build_ten(from_edges(2, edges), 2, chunk_bytes=1.0)
    assert (short.arc_link == 1).sum() == 0 and len(short.active(1, 2)) == 0


@given(
    delays=st.lists(st.integers(1, 5), min_size=1, max_size=6),
    horizon=st.integers(1, 9),
    caps=st.data(),
)
def test_arcs_agree_with_brute_force(delays, horizon, caps):
    """Every arc spans exactly its link's delay inside the horizon; active() = brute force."""
    n = len(delays) + 1
    capacity = [caps.draw(st.integers(1, 3)) for _ in delays]
    edges = []
    for i, (d, k) in enumerate(zip(delays, capacity)):
        edges += [(i, i + 1, {"bandwidth": 1.0 / d, "alpha": 0.0})] * k  # cost d per chunk
    edges.append((n - 1, 0, {"bandwidth": 1.0, "alpha": 0.0}))
    ten = build_ten(from_edges(n, edges), horizon, chunk_bytes=1.0)
    la_d = dict(zip(zip(ten.src.tolist(), ten.dst.tolist()), ten.delay.tolist()))
    for i, d in enumerate(delays):
        assert la_d[(i, i + 1)] == d
        l = int(np.flatnonzero((ten.src == i) & (ten.dst == i + 1))[0])
        assert ten.capacity[l] == capacity[i]
    assert ((ten.arc_end - ten.arc_start + 1) == ten.delay[ten.arc_link]).all()
    assert (ten.arc_start >= 1).all() and (ten.arc_end <= horizon).all()
    expect = sum(max(0, horizon - d + 1) for d in ten.delay.tolist())
    assert ten.num_arcs == expect
    for l in range(ten.num_links):
        for t in range(1, horizon + 1):
            brute = np.flatnonzero((ten.arc_link == l) & (ten.arc_start <= t) & (ten.arc_end >= t))
            assert ten.active(l, t).tolist() == brute.tolist()
    for t in range(1, horizon + 1):
        assert sorted(ten.arcs_starting(t).tolist()) == np.flatnonzero(ten.arc_start == t).tolist()
        assert sorted(ten.arcs_arriving(t).tolist()) == np.flatnonzero(ten.arc_end == t).tolist()


def test_stay_arcs_cover_every_live_node_and_timestep():
    topo = build("ring", {"nodes": 5}, bandwidth=1.0, alpha=0.0).with_failures([2])
    ten = build_ten(topo, 3, 1.0)
    assert sorted(zip(ten.stay_node.tolist(), ten.stay_time.tolist())) == [
        (v, t) for v in (0, 1, 3, 4) for t in range(3)
    ]
    assert ten.vertex(4, 2) == 2 * 5 + 4


@pytest.mark.parametrize("n,d", [(4, 1), (4, 2), (4, 3), (8, 3)])
def test_unwinding_degree_and_bandwidth_split(n, d):
    """TACOS IV-D: NPU n -> n+1..n+d (mod N), each with 1/d of the bandwidth, alpha kept."""
    sw = build("switch", {"nodes": n, "unwind": 0}, bandwidth=120e9, alpha=0.7e-6)
    assert sw.switches == {n}
    u = unwind_switches(sw, d)
    assert not u.switches and n not in u.graph and u.npus == tuple(range(n))
    got = sorted((a, b) for a, b in u.graph.edges())
    assert got == sorted((i, (i + k) % n) for i in range(n) for k in range(1, d + 1))
    assert all(data["bandwidth"] == pytest.approx(120e9 / d) for _, _, data in u.graph.edges(data=True))
    assert all(data["alpha"] == pytest.approx(0.7e-6) for _, _, data in u.graph.edges(data=True))
    assert u.out_degree_range == (d, d) and u.in_degree_range == (d, d)
    assert u.meta["unwound"] == {n: d}
    ten = build_ten(u, 2, chunk_bytes=1e6)
    assert ten.num_links == n * d
    assert ten.cost_s == pytest.approx(np.full(n * d, 0.7e-6 + 1e6 * d / 120e9))


def test_unwinding_matches_the_switch_generator_pairs():
    """The TEN-side hook and the generator's unwind parameter agree on the link pairs."""
    for n, d in ((6, 2), (5, 4)):
        mine = unwind_switches(build("switch", {"nodes": n, "unwind": 0}, bandwidth=8.0, alpha=0.5), d)
        theirs = build("switch", {"nodes": n, "unwind": d}, bandwidth=8.0, alpha=0.5)

        def links(t):
            return sorted((u, v, e["bandwidth"], e["alpha"]) for u, v, e in t.graph.edges(data=True))

        assert links(mine) == links(theirs)
        assert links(mine)[0][2] == 8.0 / d


def test_unwinding_errors_and_ten_refuses_switches():
    sw = build("switch", {"nodes": 4, "unwind": 0})
    with pytest.raises(InputError, match="unwind"):
        unwind_switches(sw, 4)
    with pytest.raises(InputError, match="unwind"):
        unwind_switches(sw, 0)
    with pytest.raises(InputError, match="switch"):
        build_ten(sw, 3, 1.0)
    with pytest.raises(InputError, match="horizon"):
        build_ten(uniring(), 0, 1.0)
    with pytest.raises(InputError, match="timestep"):
        build_ten(uniring(), 2, 1.0, timestep=0.0)
    plain = uniring()
    assert unwind_switches(plain, 2) is plain
