"""Topology: degrees, diameters, Moore bound, failures (ids kept), transpose, link arrays."""

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collsynth import InputError
from collsynth.instances import generators, moore_bound
from collsynth.instances.topology import from_edges, with_link_costs


def edge_multiset(topo):
    return sorted((u, v, d["bandwidth"], d["alpha"]) for u, v, d in topo.graph.edges(data=True))


@st.composite
def random_topologies(draw):
    """Random strongly-or-not connected multigraphs with random costs."""
    n = draw(st.integers(2, 9))
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), min_size=1, max_size=30))
    edges = [(u, v, {"bandwidth": float(draw(st.integers(1, 5))) * 1e9, "alpha": draw(st.sampled_from([0.0, 1e-6]))})
             for u, v in pairs if u != v]
    return from_edges(n, edges)


def test_moore_bound_values():
    # 1 + d + ... + d^k >= N: N=1024, d=4 -> 1+4+16+64+256 = 341 < 1024 <= 1365 -> 5
    assert moore_bound(1024, 4) == 5
    assert moore_bound(5, 4) == 1
    assert moore_bound(6, 4) == 2
    assert moore_bound(21, 4) == 2
    assert moore_bound(22, 4) == 3
    assert moore_bound(8, 1) == 7
    assert moore_bound(1, 3) == 0


@given(st.integers(2, 2000), st.integers(2, 8))
def test_moore_bound_is_smallest_k(n, d):
    k = moore_bound(n, d)
    reach = sum(d**i for i in range(k + 1))
    assert reach >= n
    assert k == 0 or sum(d**i for i in range(k)) < n


def test_summary_fields_of_a_failed_mesh():
    topo = generators.build("mesh", {"dims": [4, 4]}).with_failures([7, 9])
    s = topo.summary()
    assert s["nodes"] == 14 and topo.size == 16
    assert s["failed_nodes"] == [7, 9]
    assert 7 not in topo.graph and 9 not in topo.graph
    # mesh 4x4 has 2*2*4*3 = 48 directed links; node 7 has 3 neighbours, 9 has 4: 14 pairs lost
    assert s["links"] == 48 - 2 * (3 + 4)
    assert s["diameter"] == nx.diameter(topo.graph.to_undirected())
    assert (topo.distances[7] == -1).all() and (topo.distances[:, 9] == -1).all()


def test_link_arrays_aggregate_parallel_links():
    topo = generators.build("dgx1", {}, bandwidth=25e9, alpha=1e-6)
    la = topo.link_arrays
    i = int(la.lookup(0, 1))
    assert la.count[i] == 2 and la.bandwidth[i] == pytest.approx(50e9)
    j = int(la.lookup(0, 2))
    assert la.count[j] == 1 and la.bandwidth[j] == pytest.approx(25e9)
    assert int(la.lookup(0, 5)) == -1
    assert la.count.sum() == topo.num_links == 48


@given(random_topologies())
def test_transpose_twice_is_identity(topo):
    tt = topo.transpose().transpose()
    assert edge_multiset(tt) == edge_multiset(topo)
    assert tt.name == topo.name and tt.size == topo.size


@given(random_topologies())
def test_transpose_reverses_distances(topo):
    assert (topo.transpose().distances == topo.distances.T).all()


@given(random_topologies(), st.data())
def test_failures_keep_ids(topo, data):
    dead = data.draw(st.sets(st.integers(0, topo.size - 1), max_size=topo.size - 1))
    failed = topo.with_failures(dead)
    assert failed.size == topo.size
    assert set(failed.nodes) == set(range(topo.size)) - dead
    survivors = [(u, v, b, a) for u, v, b, a in edge_multiset(topo) if u not in dead and v not in dead]
    assert edge_multiset(failed) == survivors
    assert failed.failed_nodes == frozenset(dead)
    assert failed.distances.shape == (topo.size, topo.size)


def test_failed_links_remove_one_direction_and_all_parallels():
    topo = generators.build("dgx1", {})
    cut = topo.with_failures(links=[(0, 1)])
    assert not cut.has_link(0, 1) and cut.has_link(1, 0)
    assert cut.num_links == topo.num_links - 2  # the double NVLink 0->1
    assert cut.failed_links == frozenset({(0, 1)})
    assert cut.transpose().failed_links == frozenset({(1, 0)})


def test_bad_failures_are_input_errors():
    topo = generators.build("ring", {"nodes": 4})
    with pytest.raises(InputError, match="failed_nodes"):
        topo.with_failures([4])
    with pytest.raises(InputError, match="failed_links"):
        topo.with_failures(links=[(0, 2)])


@given(random_topologies())
def test_distances_match_networkx(topo):
    lengths = dict(nx.all_pairs_shortest_path_length(topo.graph))
    for u in range(topo.size):
        for v in range(topo.size):
            assert topo.distances[u, v] == lengths[u].get(v, -1)
    if nx.is_strongly_connected(topo.graph):
        assert topo.diameter == nx.diameter(nx.DiGraph(topo.graph))
        # a shortest path is a real path of the right length
        path = topo.shortest_path(0, topo.size - 1)
        assert len(path) - 1 == topo.distances[0, topo.size - 1]
        assert all(topo.has_link(a, b) for a, b in zip(path, path[1:]))
    else:
        assert topo.diameter == -1 or len(topo.npus) < topo.size


def test_degrees_and_regularity():
    ring = generators.build("ring", {"nodes": 5, "bidirectional": False})
    assert ring.regular and ring.out_degree_range == (1, 1)
    sw = generators.build("switch", {"nodes": 4})
    assert not sw.regular  # switches make a topology irregular by definition
    assert sw.npus == (0, 1, 2, 3) and sw.switches == frozenset({4})
    star = from_edges(4, [(0, 1), (0, 2), (0, 3)], bidirectional=True, bandwidth=1.0, alpha=0.0)
    assert star.out_degree_range == (1, 3) and not star.regular


def test_with_link_costs_scales_and_rejects_bad_values():
    topo = from_edges(3, [(0, 1, {"scale": 0.5}), (1, 2), (2, 0, {"bandwidth": 7.0})])
    costed = with_link_costs(topo, 10.0, 1e-6)
    bws = {(u, v): d["bandwidth"] for u, v, d in costed.graph.edges(data=True)}
    assert bws == {(0, 1): 5.0, (1, 2): 10.0, (2, 0): 7.0}
    with pytest.raises(InputError, match="bandwidth"):
        with_link_costs(topo, -1.0, 0.0)
    with pytest.raises(InputError, match="alpha"):
        with_link_costs(topo, 1.0, -1.0)
    assert np.isclose(with_link_costs(topo, 1.0, 0.0).link_arrays.alpha, 0.0).all()


def test_transpose_is_made_once_and_remembers_its_origin():
    """Time clustering prepares a TEN per window: the transposed copy (a graph copy) is made
    once per topology, its transpose is the topology itself, and its links are reversed."""
    topo = generators.build("torus", {"dims": [3, 4], "bidirectional": False})
    t = topo.transpose()
    assert topo.transpose() is t and t.transpose() is topo
    assert sorted(t.graph.edges()) == sorted((v, u) for u, v in topo.graph.edges())
