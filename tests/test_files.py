"""Topology files: round trips (node-link JSON, GraphML, CSV), failures keep ids, defaults,
foreign labels, and errors that name the file, the line or field and what was expected."""

import json

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collsynth import InputError
from collsynth.instances import generators
from collsynth.instances.files import read_topology, write_topology
from collsynth.instances.topology import from_edges

SUFFIXES = ["json", "graphml", "csv"]


def edge_multiset(topo):
    return sorted((u, v, d["bandwidth"], d["alpha"]) for u, v, d in topo.graph.edges(data=True))


def same(a, b):
    assert edge_multiset(a) == edge_multiset(b)
    assert a.size == b.size
    assert a.switches == b.switches
    assert a.failed_nodes == b.failed_nodes
    assert a.failed_links == b.failed_links
    assert a.name == b.name
    assert a.nodes == b.nodes


@st.composite
def costed_topologies(draw):
    n = draw(st.integers(2, 8))
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), min_size=1, max_size=25))
    bw = st.floats(1e6, 1e12, allow_nan=False, allow_infinity=False)
    al = st.one_of(st.just(0.0), st.floats(1e-9, 1e-3, allow_nan=False))
    edges = [(u, v, {"bandwidth": draw(bw), "alpha": draw(al)}) for u, v in pairs if u != v]
    topo = from_edges(n, edges, name=draw(st.sampled_from(["g", "net-1", "a b"])))
    dead = draw(st.sets(st.integers(0, n - 1), max_size=n - 1))
    topo = topo.with_failures(dead)
    live = sorted(set(topo.graph.edges()))
    if live and draw(st.booleans()):
        topo = topo.with_failures(links=[live[0]])
    return topo


@pytest.mark.parametrize("suffix", SUFFIXES)
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(topo=costed_topologies())
def test_round_trip(tmp_path, suffix, topo):
    path = tmp_path / f"t.{suffix}"
    write_topology(topo, path)
    same(read_topology(path), topo)


@pytest.mark.parametrize("suffix", SUFFIXES)
@pytest.mark.parametrize("name,params", [("dgx1", {}), ("switch", {"nodes": 5}), ("mesh", {"dims": [4, 4]}),
                                         ("hierarchical", {"levels": ["ring", "switch"], "dims": [2, 3], "scales": [2, 1]})])
def test_round_trip_generated_with_failures(tmp_path, suffix, name, params):
    topo = generators.build(name, params, bandwidth=25e9, alpha=2e-6)
    if name == "mesh":
        topo = topo.with_failures([7, 9], [(0, 1)])
    path = tmp_path / f"t.{suffix}"
    write_topology(topo, path)
    back = read_topology(path)
    same(back, topo)
    assert back.diameter == topo.diameter
    if name == "mesh":
        assert back.size == 16 and 7 not in back.nodes and back.failed_nodes == {7, 9}


def test_csv_defaults_fill_empty_cells(tmp_path):
    p = tmp_path / "h.csv"
    p.write_text("src,dst,bandwidth,alpha\n0,1,,\n1,0,5e9,\n1,2,,1e-7\n2,1\n")
    t = read_topology(p, bandwidth=3e9, alpha=2e-6)
    assert edge_multiset(t) == [(0, 1, 3e9, 2e-6), (1, 0, 5e9, 2e-6), (1, 2, 3e9, 1e-7), (2, 1, 3e9, 2e-6)]
    q = tmp_path / "order.csv"
    q.write_text("dst,src\n1,0\n0,1\n")
    assert sorted(read_topology(q).graph.edges()) == [(0, 1), (1, 0)]
    assert all(d["bandwidth"] == generators.DEFAULT_BANDWIDTH for _, _, d in read_topology(q).graph.edges(data=True))


def test_corpus_graph_files_load():
    from collsynth.instances import CORPUS

    files = sorted((CORPUS / "graphs").iterdir())
    assert {f.suffix for f in files} >= {".csv", ".json", ".graphml"}
    for f in files:
        t = read_topology(f)
        assert t.strongly_connected, f
    hetero = read_topology(CORPUS / "graphs" / "hetero6.csv", bandwidth=50e9)
    assert {d["bandwidth"] for _, _, d in hetero.graph.edges(data=True)} == {50e9, 200e9}


def test_undirected_node_link_and_string_labels(tmp_path):
    g = nx.Graph()
    g.add_edge("a", "b", bandwidth=1e9)
    g.add_edge("b", "c")
    p = tmp_path / "u.json"
    p.write_text(json.dumps(nx.node_link_data(g, edges="links")))
    t = read_topology(p, alpha=0.0)
    assert t.meta["labels"] == ["a", "b", "c"]
    assert sorted(t.graph.edges()) == [(0, 1), (1, 0), (1, 2), (2, 1)]
    gm = tmp_path / "u.graphml"
    nx.write_graphml(g, gm)
    assert sorted(read_topology(gm).graph.edges()) == sorted(t.graph.edges())


@pytest.mark.parametrize("suffix,text,where,what", [
    ("csv", "0,1\n", "line 1", "header"),
    ("csv", "src,dst,bandwidth\n0,1,-5\n", "line 2", "bandwidth"),
    ("csv", "src,dst,alpha\n0,1,-1e-6\n", "line 2", "alpha"),
    ("csv", "src,dst\n0,x\n", "line 2", "dst"),
    ("csv", "src,dst\n0,1,2\n", "line 2", "at most"),
    ("csv", "src,dst\n1,1\n", "line 2", "self-loop"),
    ("csv", "# nodes = 1\nsrc,dst\n0,1\n", "line 1", "nodes"),
    ("csv", "src,dst,weight\n0,1,3\n", "line 1", "header"),
    ("csv", "", "", "header"),
    ("json", "{\"nodes\": [{\"id\": 0}], \n", "line 2", "malformed JSON"),
    ("json", "{\"nodes\": [{\"id\": 0}, {\"id\": 1}], \"edges\": [{\"source\": 0, \"target\": 2}]}", "edges[0]", "target"),
    ("json", "{\"nodes\": [{\"id\": 0}, {\"id\": 1}], \"edges\": [{\"source\": 0, \"target\": 1, \"bandwidth\": \"fast\"}]}",
     "edges[0]", "bandwidth"),
    ("json", "{\"nodes\": [{\"id\": 0}, {\"id\": 0}], \"edges\": []}", "nodes[1]", "unique"),
    ("json", "[1, 2]", "", "node-link"),
    ("graphml", "<graphml><graph", "", "malformed GraphML"),
    ("txt", "whatever", "", "unknown topology file type"),
])
def test_bad_files_name_file_line_and_field(tmp_path, suffix, text, where, what):
    p = tmp_path / f"bad.{suffix}"
    p.write_text(text)
    with pytest.raises(InputError) as err:
        read_topology(p)
    assert err.value.where.startswith(str(p))
    assert where in err.value.where
    assert what in err.value.what


def test_missing_file_and_bad_defaults(tmp_path):
    with pytest.raises(InputError, match="no such topology file"):
        read_topology(tmp_path / "nope.csv")
    p = tmp_path / "ok.csv"
    p.write_text("src,dst\n0,1\n1,0\n")
    with pytest.raises(InputError, match="bandwidth"):
        read_topology(p, bandwidth=-1)
    with pytest.raises(InputError, match="alpha"):
        read_topology(p, alpha="x")
    assert read_topology(p, alpha=0).num_links == 2


# ---- directedness: an undirected edge list is said so, and a one-way reading explains itself ----

PATH4 = "src,dst\n0,1\n1,2\n2,3\n"  # the path 0-1-2-3 written once per link


def test_csv_directed_false_reads_links_both_ways(tmp_path):
    p = tmp_path / "path4.csv"
    p.write_text("# directed = false\n" + PATH4)
    topo = read_topology(p)
    assert sorted(topo.graph.edges()) == [(0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2)]
    assert topo.meta["directed"] is False
    assert topo.diameter == 3
    p.write_text(PATH4)  # the default: one-way links as written
    assert sorted(read_topology(p).graph.edges()) == [(0, 1), (1, 2), (2, 3)]
    assert sorted(read_topology(p, directed=False).graph.edges()) == [(0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2)]


def _instance(tmp_path, topology_lines, csv_text):
    (tmp_path / "edges.csv").write_text(csv_text)
    toml = tmp_path / "mine.toml"
    toml.write_text('name = "mine"\n[topology]\nfile = "edges.csv"\n' + topology_lines
                    + '[collective]\nkind = "allgather"\n')
    return toml


def test_instance_directed_key_and_the_one_way_hint(tmp_path):
    from collsynth.instances.instance import load_instance

    inst = load_instance(_instance(tmp_path, "directed = false\n", PATH4))
    assert inst.topology.num_links == 6 and inst.topology.diameter == 3
    with pytest.raises(InputError) as e:
        load_instance(_instance(tmp_path, "", PATH4))
    assert "disconnected topology" in e.value.what
    assert "directed = false" in e.value.what  # points to the fix
    # a graph that is disconnected either way gets no such hint
    with pytest.raises(InputError) as e:
        load_instance(_instance(tmp_path, "directed = false\n", "src,dst\n0,1\n2,3\n"))
    assert "disconnected topology" in e.value.what and "directed = false" not in e.value.what


@pytest.mark.parametrize("lines,text,what", [
    ("directed = true\n", "# directed = false\n" + PATH4, "says directed = false"),
    ('directed = "no"\n', PATH4, "expected true or false"),
    ("", "# directed = maybe\n" + PATH4, "directed: expected true or false"),
])
def test_bad_directedness(tmp_path, lines, text, what):
    from collsynth.instances.instance import load_instance

    with pytest.raises(InputError) as e:
        load_instance(_instance(tmp_path, lines, text))
    assert what in e.value.what


def test_directed_key_agrees_with_a_node_link_file(tmp_path):
    from collsynth.instances.instance import load_instance

    (tmp_path / "g.json").write_text(json.dumps({"directed": False, "nodes": [{"id": 0}, {"id": 1}, {"id": 2}],
                                                 "edges": [{"source": 0, "target": 1}, {"source": 1, "target": 2}]}))
    toml = tmp_path / "g.toml"
    toml.write_text('name = "g"\n[topology]\nfile = "g.json"\ndirected = false\n[collective]\nkind = "broadcast"\nroot = 0\n')
    assert load_instance(toml).topology.num_links == 4
    toml.write_text(toml.read_text().replace("directed = false", "directed = true"))
    with pytest.raises(InputError, match="says directed = false"):
        load_instance(toml)
