"""Expansions (Zhao et al., NSDI 2025, Section 5, Appendices C and F): every expanded schedule verifies and its
priced T_L / T_B equal the theorem formulas exactly; topologies match the generators' numbering."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings, strategies as st

from collsynth.instances import catalogue
from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.instances.topology import from_edges
from collsynth.solvers.bfb import per_step as bfb, expansions as ex
from collsynth.solvers import pipeline
from collsynth.solvers.producers import Options
from collsynth.tens.verify import verify
from builders import instance_on

BASES = [
    ("complete", {"nodes": 4}),
    ("complete_bipartite", {"degree": 2}),
    ("hypercube", {"dim": 2}),
    ("kautz", {"degree": 2, "diameter": 2}),
    ("ring", {"nodes": 5}),
    ("circulant", {"nodes": 7, "offsets": [1, 2]}),
    ("hamming", {"dims": 2, "q": 3}),
    ("generalized_kautz", {"degree": 2, "nodes": 9}),  # no self-loops: 2-regular
]


def _base(gen, params):
    topo = build(gen, params)
    return topo, bfb.solve_bfb(topo, method="flow").schedule


@pytest.mark.parametrize("gen, params", BASES)
@pytest.mark.parametrize("kind, n", [("line_graph", 1), ("degree_expansion", 2), ("degree_expansion", 3),
                                     ("cartesian_power", 2)])
def test_expansion_matches_theorem_exactly(gen, params, kind, n):
    topo, sched = _base(gen, params)
    if kind == "cartesian_power" and topo.size ** n > 64:
        n = 2
    base, out = ex.expand_and_price(kind, topo, sched, n)
    assert base.verified and out.verified, out.violation
    assert out.steps == out.predicted["T_L"]
    assert out.T_B == out.predicted["T_B"]  # exact Fractions
    assert isinstance(out.T_B, Fraction)
    assert out.matches
    N = len(topo.npus)
    assert len(out.topology.npus) == out.predicted["nodes"]
    assert out.topology.out_degree_range[1] == out.predicted["degree"]
    if kind in ("degree_expansion", "cartesian_power") and base.T_B == Fraction(N - 1, N):
        M = len(out.topology.npus)
        assert out.T_B == Fraction(M - 1, M)  # Corollaries 11.1 / 12.1: BW optimality preserved


def test_cartesian_power_three_and_repeated_line_graphs():
    topo, sched = _base("complete", {"nodes": 3})
    _, out = ex.expand_and_price("cartesian_power", topo, sched, 3)
    assert out.matches and out.T_B == Fraction(26, 27) and out.steps == 3
    t, s = _base("kautz", {"degree": 2, "diameter": 2})
    for _ in range(2):  # Corollary 1.2: each application adds 1 step and 1/N
        b, out = ex.expand_and_price("line_graph", t, s)
        assert out.matches
        t, s = out.topology, out.schedule
    assert len(t.npus) == 24 and out.steps == 4


def test_line_graph_with_parallel_arcs():
    # a 3-ring with every arc doubled: 2-regular with parallel links
    edges = [(i, (i + 1) % 3) for i in range(3)] * 2
    topo = from_edges(3, edges, bandwidth=1.0, alpha=0.0, name="ring3x2")
    sched = bfb.solve_bfb(topo, method="flow").schedule
    base, out = ex.expand_and_price("line_graph", topo, sched)
    # Theorem 1 is an upper bound; with parallel arcs the construction skips the sends that
    # would return a shard to its owner, which here lowers the last step's load
    assert out.verified and out.steps == out.predicted["T_L"] and out.T_B <= out.predicted["T_B"]
    base, out = ex.expand_and_price("degree_expansion", topo, sched, 2)
    assert out.verified and out.matches


@settings(max_examples=12, deadline=None)
@given(n=st.integers(5, 14), data=st.data())
def test_expansions_of_circulants(n, data):
    a = data.draw(st.integers(1, (n - 1) // 2))
    topo, sched = _base("circulant", {"nodes": n, "offsets": [1, a] if a != 1 else [1]})
    for kind, m in (("line_graph", 1), ("degree_expansion", 2)):
        _, out = ex.expand_and_price(kind, topo, sched, m)
        assert out.verified and out.matches


@pytest.mark.parametrize("gen, params", [("kautz", {"degree": 2, "diameter": 2}),
                                         ("ring", {"nodes": 5, "bidirectional": False}),
                                         ("circulant", {"nodes": 9, "offsets": [1, 3], "directed": True})])
def test_bidirectional_conversion_keeps_TL_TB(gen, params):
    topo, sched = _base(gen, params)
    assert ex.transpose_isomorphism(topo) is not None
    base, out = ex.expand_and_price("bidirectional", topo, sched)
    assert out.verified and out.matches
    assert out.steps == base.steps and out.T_B == base.T_B
    assert out.topology.out_degree_range == (2 * topo.out_degree_range[0], 2 * topo.out_degree_range[1])


def test_not_reverse_symmetric_is_reported():
    # strongly connected, but not isomorphic to its transpose
    edges = [(0, 1), (0, 2), (0, 3), (0, 4), (1, 0), (2, 1), (2, 4), (3, 0), (3, 1), (3, 2), (4, 3)]
    topo = from_edges(5, edges, bandwidth=1.0, alpha=0.0)
    assert ex.transpose_isomorphism(topo) is None
    from collsynth.solvers.producers import Unsupported

    with pytest.raises(Unsupported):
        ex.bidirectional(topo, bfb.solve_bfb(topo, method="flow").schedule)


@pytest.mark.parametrize("factors", [
    [("ring", {"nodes": 3}), ("ring", {"nodes": 5})],
    [("complete", {"nodes": 3}), ("complete_bipartite", {"degree": 2})],
    [("ring", {"nodes": 4, "bidirectional": False}), ("hamming", {"dims": 2, "q": 3})],
])
def test_cartesian_product_via_bfb_theorem13(factors):
    tops = [build(g, p) for g, p in factors]
    for t in tops:
        assert bfb.solve_bfb(t, method="flow").bw_optimal
    topo, sched, res = ex.cartesian_product(tops, method="lp")
    assert res.bw_optimal
    assert res.steps == sum(t.diameter for t in tops)
    priced = ex.price_schedule(topo, sched)
    M = topo.size
    assert priced.verified and priced.T_B == Fraction(M - 1, M)


@pytest.mark.parametrize("gen, params", [
    ("line_graph", {"base": {"generator": "complete_bipartite", "degree": 2}, "times": 2}),
    ("line_graph", {"base": {"generator": "kautz", "degree": 2, "diameter": 2}}),
    ("degree_expansion", {"base": {"generator": "complete", "nodes": 3}, "copies": 2}),
    ("cartesian", {"base": {"generator": "ring", "nodes": 3}, "times": 2}),
    ("cartesian", {"base": {"generator": "ring", "nodes": 3}, "other": {"generator": "complete", "nodes": 4}}),
])
def test_numbering_matches_generators_and_producer(gen, params):
    topo = build(gen, params)
    base = build(params["base"]["generator"], {k: v for k, v in params["base"].items() if k != "generator"})
    if gen == "line_graph":
        mine = base
        for _ in range(params.get("times", 1)):
            mine = ex.line_graph_topology(mine)
    elif gen == "degree_expansion":
        mine = ex.degree_topology(base, params["copies"])
    elif "other" in params:
        other = build(params["other"]["generator"], {k: v for k, v in params["other"].items() if k != "generator"})
        mine = ex.cartesian_topology([base, other])
    else:
        mine = ex.cartesian_topology([base] * params["times"])
    assert ex._same_graph(mine, topo)
    for kind, c in (("allgather", 1), ("reduce_scatter", 1), ("allreduce", 2)):
        row, sched = pipeline.run(make_instance(topo, kind, chunks_per_node=c), "expansion", Options())
        assert row["verified"], row["message"]
        if kind == "allgather" and "predicted" in row["extra"]:
            assert row["extra"]["T_L"] == row["extra"]["predicted"]["T_L"]
            assert Fraction(row["extra"]["T_B"]) == Fraction(row["extra"]["predicted"]["T_B"])


def test_expansion_producer_rejects_other_topologies():
    row, _ = pipeline.run(instance_on("ring", {"nodes": 4}), "expansion", Options())
    assert row["status"] == "skipped"


def test_base_catalogue_degree4():
    rows = ex.base_catalogue(4, 40, dense_limit=12)
    fams = {r["family"] for r in rows}
    assert {"complete", "complete_bipartite", "hamming", "kautz", "generalized_kautz", "circulant",
            "directed_circulant", "de_bruijn", "distance_regular"} <= fams
    for r in rows:
        assert r["T_L"] >= r["moore_bound"]
        assert r["T_B"] >= Fraction(r["nodes"] - 1, r["nodes"])
        if r["family"] in ("complete", "complete_bipartite", "hamming", "circulant", "distance_regular"):
            assert r["bw_optimal"], r
        if r["family"] == "kautz":
            assert r["moore_optimal"], r
    assert {"diamond", "modified_de_bruijn"} <= set(catalogue.NOT_STATED)
    # rings: the BFB ring schedule of E.1 takes half a circle each way and is BW-optimal
    for n in (6, 7):
        e = ex.base_entry("biring", {"nodes": n}, build_schedule=True)
        assert e["T_L"] == n // 2 and e["bw_optimal"]
        assert verify(e["schedule"], make_instance(e["topology_obj"], "allgather")) is None
