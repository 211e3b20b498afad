"""`collsynth topologies`, `collsynth topology ... --json`, `collsynth instance ... --json`."""

import json
import math

import pytest

from collsynth.instances import CORPUS, generators, moore_bound
from collsynth.instances.files import write_topology
from collsynth.solvers.cli import main


def run_json(argv, capsys):
    code = main(argv + ["--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert err == ""
    assert len(out.strip().splitlines()) == 1  # exactly one JSON object
    return json.loads(out)


CONTRACT_FIELDS = {"nodes", "links", "in_degree", "out_degree", "regular", "diameter", "moore_bound"}


def test_torus_5x7(capsys):
    r = run_json(["topology", "torus", "dims=5,7"], capsys)
    assert CONTRACT_FIELDS <= set(r)
    assert r["nodes"] == 35 and r["links"] == 140
    assert r["in_degree"] == r["out_degree"] == {"min": 4, "max": 4} and r["degree"] == 4
    assert r["regular"] is True and r["diameter"] == 5
    assert r["moore_bound"] == moore_bound(35, 4) == 3
    assert r["cayley"] == [5, 7] and r["params"] == {"dims": [5, 7]}


@pytest.mark.parametrize("argv,nodes,links,degree,diameter", [
    (["hypercube", "dim=4"], 16, 64, 4, 4),
    (["hamming", "dims=3", "q=3"], 27, 162, 6, 3),
    (["kautz", "degree=3", "diameter=2"], 12, 36, 3, 2),
    (["dgx1"], 8, 48, 6, 2),
    (["complete_bipartite", "degree=5"], 10, 50, 5, 2),
    (["circulant", "nodes=13", "offsets=2,3"], 13, 52, 4, 2),
    (["twisted_torus", "a=4"], 32, 128, 4, 4),
    (["distance_regular", "name=odd4"], 35, 140, 4, 3),
    (["switch", "nodes=8", "unwind=3"], 8, 24, 3, 3),
    (["cartesian", "base=ring:nodes=3", "times=3"], 27, 162, 6, 3),
    (["mesh", "dims=3,3,3"], 27, 108, None, 6),
])
def test_topology_friends(capsys, argv, nodes, links, degree, diameter):
    r = run_json(["topology", *argv], capsys)
    assert (r["nodes"], r["links"], r["degree"], r["diameter"]) == (nodes, links, degree, diameter)
    assert r["regular"] == (degree is not None)
    assert r["moore_bound"] == moore_bound(nodes, r["out_degree"]["max"])


def test_generalized_kautz_diameter_matches_definition(capsys):
    r = run_json(["topology", "generalized_kautz", "degree=3", "nodes=50"], capsys)
    succ = lambda x: [(-3 * x - a) % 50 for a in (1, 2, 3)]  # noqa: E731
    worst = 0
    for s in range(50):
        seen, frontier, k = {s}, [s], 0
        while len(seen) < 50:
            frontier = [y for x in frontier for y in succ(x) if y not in seen and not seen.add(y)]
            k += 1
        worst = max(worst, k)
    assert r["diameter"] == worst
    assert r["diameter"] <= r["moore_bound"] + 1


def test_costs_and_failures_options(capsys):
    r = run_json(["topology", "mesh", "dims=4,4", "--failed-nodes", "7,9", "--failed-links", "0-1",
                  "--bandwidth", "5e9", "--alpha", "0"], capsys)
    assert r["nodes"] == 14 and r["failed_nodes"] == [7, 9] and r["failed_links"] == [[0, 1]]
    assert r["links"] == 48 - 14 - 1
    text_code = main(["topology", "mesh", "dims=4,4", "--failed-nodes", "7,9"])
    out = capsys.readouterr().out
    assert text_code == 0 and "14 nodes" in out and "diameter 6" in out


def test_topology_from_file(tmp_path, capsys):
    topo = generators.build("dgx1", {})
    path = tmp_path / "d.graphml"
    write_topology(topo, path)
    r = run_json(["topology", str(path)], capsys)
    assert (r["nodes"], r["links"], r["degree"], r["diameter"]) == (8, 48, 6, 2)
    assert r["generator"] == "graphml"


def test_topologies_lists_every_generator(capsys):
    r = run_json(["topologies"], capsys)
    names = {g["name"] for g in r["generators"]}
    assert names == set(generators.GENERATORS)
    torus = next(g for g in r["generators"] if g["name"] == "torus")
    assert torus["parameters"]["dims"] == {"type": "list[int]", "default": None, "required": True}
    assert torus["parameters"]["bidirectional"]["default"] is True
    assert all(g["summary"] and g["doc"] for g in r["generators"])
    assert main(["topologies"]) == 0
    assert "circulant(nodes: int, offsets: list[int], directed: bool = False)" in capsys.readouterr().out


def test_instance_summary(capsys):
    path = CORPUS / "mesh4x4-failed-allreduce.toml"
    r = run_json(["instance", str(path)], capsys)
    assert r["valid"] is True and r["instance"] == "mesh4x4-failed-allreduce"
    assert r["topology"]["nodes"] == 14 and r["topology"]["failed_nodes"] == [7, 9]
    (coll,) = r["collectives"]
    assert coll["kind"] == "allreduce" and coll["nodes"] == 14 and coll["combining"] is True
    assert coll["chunk_bytes"] == pytest.approx(1048576 / 14)
    assert r["expect"]["lower_bound_steps"] == 14


def test_concurrent_instance_summary(capsys):
    r = run_json(["instance", str(CORPUS / "mesh3x3-concurrent.toml")], capsys)
    kinds = [c["kind"] for c in r["collectives"]]
    assert kinds == ["broadcast", "reduce", "allgather"]
    assert [c["root"] for c in r["collectives"]] == [0, 8, None]
    assert r["collectives"][2]["nodes"] == 5
    assert main(["instance", str(CORPUS / "mesh3x3-concurrent.toml")]) == 0
    assert "valid" in capsys.readouterr().out


def test_json_numbers_are_plain(capsys):
    r = run_json(["topology", "hierarchical", "levels=ring,complete,switch", "dims=2,4,2", "scales=4,2,1", "unwind=0,0,1"],
                 capsys)
    assert r["nodes"] == 16 and r["diameter"] == 3 and r["regular"] is True
    assert isinstance(r["links"], int) and not math.isnan(r["moore_bound"])
