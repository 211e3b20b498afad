"""Symmetry-reduced TEN models: regular groups, orbits, the orbit ILP against the full ILP
restricted to symmetric schedules, and the drivers' handling of what it proves."""

from __future__ import annotations

import itertools
import math

import networkx as nx
import numpy as np
import pyomo.environ as pe
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st
from networkx.algorithms.isomorphism import DiGraphMatcher

from collsynth.limits import Deadline
from collsynth.formulations import ten_ilp, ten_ilp_orbit, ten_model
from collsynth.instances import symmetry
from collsynth.instances.generators import build as topo
from collsynth.instances.instance import load_instance, make_instance
from collsynth.instances.topology import from_edges
from collsynth.solvers import backends, pipeline
from collsynth.solvers import batch as runner
from collsynth.solvers.producers import Options
from collsynth.solvers.ten import drivers
from collsynth.tens import bounds, orbits, ten, verify


def _edge_set(topology):
    return {(int(u), int(v)) for u, v in topology.graph.edges()}


def _automorphism(topology, perm) -> bool:
    """Brute force: the node permutation maps the edge multiset onto itself."""
    edges = sorted((int(perm[u]), int(perm[v])) for u, v in topology.graph.edges())
    return edges == sorted((int(u), int(v)) for u, v in topology.graph.edges())


# ---- groups -------------------------------------------------------------------------------------

@pytest.mark.parametrize("gen,params,orders", [
    ("torus", {"dims": [3, 4]}, (3, 4)),
    ("hypercube", {"dim": 3}, (2, 2, 2)),
    ("circulant", {"nodes": 10, "offsets": [2, 3]}, (10,)),
    ("hamming", {"dims": 2, "q": 3}, (3, 3)),
    ("torus", {"dims": [2, 3, 2]}, (2, 3, 2)),
])
def test_declared_groups_act_regularly_by_automorphisms(gen, params, orders):
    t = topo(gen, params)
    g = symmetry.regular_group(t)
    assert g is not None and g.orders == orders
    N = t.size
    # regular: element g maps 0 to g, and every row is a permutation that is an automorphism
    assert (g.table[:, 0] == np.arange(N)).all()
    for row in g.table:
        assert sorted(row.tolist()) == list(range(N)) and _automorphism(t, row)
    # closed: composing two elements gives the element named by its image of node 0
    for a, b in itertools.product(range(N), repeat=2):
        assert (g.table[a][g.table[b]] == g.table[g.table[a][b]]).all()


def test_group_found_in_an_undeclared_labelling():
    """A 3x5 torus given as a bare edge list (no declaration): Z_15's x -> x + 1 is not an
    automorphism of its row-major labelling, Z_3 x Z_5 is."""
    t0 = topo("torus", {"dims": [3, 5]})
    bare = from_edges(15, sorted(_edge_set(t0)), bandwidth=1.0, alpha=0.0, name="bare")
    g = symmetry.regular_group(bare)
    assert g is not None and g.orders == (3, 5) and "found in the node labelling" in g.how
    assert not _automorphism(bare, (np.arange(15) + 1) % 15)


def _maps_node_to(graph, a: int, b: int) -> bool:
    """Brute force (networkx VF2): some automorphism of ``graph`` maps node ``a`` to node ``b``."""
    g, h = nx.DiGraph(graph), nx.DiGraph(graph)
    nx.set_node_attributes(g, {n: int(n == a) for n in g}, "mark")
    nx.set_node_attributes(h, {n: int(n == b) for n in h}, "mark")
    return DiGraphMatcher(g, h, node_match=lambda x, y: x["mark"] == y["mark"]).is_isomorphic()


def test_no_group_on_a_mesh_or_a_generalized_kautz_graph():
    assert symmetry.regular_group(topo("mesh", {"dims": [3, 3]})) is None
    assert "not vertex-transitive" in symmetry.why_no_group(topo("mesh", {"dims": [3, 3]}))
    assert symmetry.regular_group(topo("generalized_kautz", {"degree": 4, "nodes": 1000})) is None
    # independently, on a generalized Kautz graph small enough for VF2: some node is the image
    # of node 0 under no automorphism, so the graph is not vertex-transitive and no group acts
    # regularly on it
    small = topo("generalized_kautz", {"degree": 3, "nodes": 20})
    assert symmetry.regular_group(small) is None
    assert not all(_maps_node_to(small.graph, 0, v) for v in range(1, 20))


def test_failed_node_breaks_the_symmetry():
    t = topo("torus", {"dims": [3, 3]}).with_failures([4])
    assert symmetry.regular_group(t) is None and "failed" in symmetry.why_no_group(t)


# ---- orbits -------------------------------------------------------------------------------------

def test_chunk_orbits_of_allgather_alltoall_and_refusals():
    t = topo("torus", {"dims": [3, 3]})
    d = ten.prepare(make_instance(t, "allgather", chunks_per_node=2), 2)
    orb = orbits.ten_orbits(d)
    assert orb.reps.tolist() == [0, 1]  # node 0's two chunks
    assert sorted(orb.image.ravel().tolist()) == list(range(18))
    assert (orb.image[1] == 2 * np.arange(9) + 1).all()  # j-th chunk of node g
    a2a = orbits.ten_orbits(ten.prepare(make_instance(t, "alltoall"), 2))
    assert len(a2a.reps) == 8  # what node 0 sends to each other node
    with pytest.raises(ten.NotSupported, match="not invariant"):
        orbits.ten_orbits(ten.prepare(make_instance(t, "broadcast", root=0), 2))
    d.pre[0, 5] = True  # node 5 holds node 0's chunk: not a translated state
    with pytest.raises(ten.NotSupported, match="not symmetric"):
        orbits.ten_orbits(d)


def test_link_orbits_keep_capacity_and_translate_sends():
    t = topo("torus", {"dims": [4, 4]})
    d = ten.prepare(make_instance(t, "allgather"), 2)
    orb = orbits.ten_orbits(d)
    assert len(orb.orbit_link) == 4 and np.bincount(orb.link_orbit).tolist() == [16] * 4
    rows = np.array([[0, int(orb.orbit_link[0]), 1]])
    full = orbits.translate_rows(orb, d, rows)
    # 16 sends, one per chunk, one on every pair of the orbit: each pair carries one chunk
    assert len(full) == 16 and len(set(full[:, 1].tolist())) == 16 and len(set(full[:, 0].tolist())) == 16


# ---- the orbit ILP against the full ILP restricted to symmetric schedules ------------------------

def _symmetric_full_model(instance, horizon):
    """The full TACOS ILP plus rows tying every variable to its translates (the generators'
    images), i.e. restricted to schedules the group maps onto themselves."""
    m = ten_ilp.build(instance, horizon)
    view = ten_model(m)
    orb = orbits.ten_orbits(view.data)
    table = orb.group.table
    # chunk permutation of every element: the chunk of node x's j-th piece goes to node g(x)'s
    C = view.data.pre.shape[0]
    chunk_of = np.empty((table.shape[0], C), np.int64)
    for r, rep in enumerate(orb.reps.tolist()):
        for g in range(table.shape[0]):
            for h in range(table.shape[0]):
                chunk_of[g, orb.image[r, h]] = orb.image[r, table[g, h]]
    m.sym = pe.ConstraintList()
    gens = [g for g in range(1, table.shape[0])]
    for (c, l, t), v in view.sent.items():
        for g in gens:
            key = (int(chunk_of[g, c]), int(orb.link_image(np.array([l]), np.array([g]))[0]), t)
            m.sym.add(v == (view.sent[key] if key in view.sent else 0))
    for (c, n, t), v in view.hold.items():
        for g in gens:
            key = (int(chunk_of[g, c]), int(table[g, n]), t)
            if key in view.hold:
                m.sym.add(v == view.hold[key])
    return m


def _smallest_complete(build, instance, lo, hi):
    for h in range(lo, hi + 1):
        m = build(instance, h)
        r = backends.solve(m, "highs", deadline=Deadline.after(60))
        assert r.status == "optimal", r.message
        view = ten_model(m)
        if view.arrivals() >= view.required():
            return h, m
    return None, None


@st.composite
def cayley_instances(draw):
    kind = draw(st.sampled_from(["circulant", "torus", "hypercube"]))
    if kind == "circulant":
        n = draw(st.integers(4, 8))
        offsets = sorted(draw(st.sets(st.integers(1, n // 2), min_size=1, max_size=2)))
        directed = draw(st.booleans())
        assume(math.gcd(n, *offsets) == 1)  # the generator refuses disconnected circulants
        t = topo("circulant", {"nodes": n, "offsets": offsets, "directed": directed})
    elif kind == "torus":
        dims = draw(st.lists(st.integers(2, 3), min_size=2, max_size=2))
        t = topo("torus", {"dims": dims, "bidirectional": draw(st.booleans())})
    else:
        t = topo("hypercube", {"dim": draw(st.integers(2, 3))})
    assume(t.strongly_connected)
    cpn = draw(st.sampled_from([1, 1, 2])) if t.size <= 6 else 1
    return make_instance(t, "allgather", chunks_per_node=cpn)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cayley_instances())
def test_orbit_optimum_is_the_symmetric_optimum_of_the_full_ilp(inst):
    """On random small Cayley topologies the translated schedule verifies, its length is the
    smallest horizon at which the orbit ILP delivers everything, and that is the smallest
    horizon at which the full ILP restricted to symmetric schedules does (never below the
    unrestricted optimum)."""
    lb = bounds.lower_bound(inst)
    h_orbit, m = _smallest_complete(ten_ilp_orbit.build, inst, lb, lb + 6)
    assert h_orbit is not None
    sched = ten_ilp_orbit.extract(m)
    assert verify.verify(sched, inst) is None and sched.num_steps == h_orbit
    h_sym, _ = _smallest_complete(_symmetric_full_model, inst, lb, h_orbit)
    assert h_sym == h_orbit
    h_full, _ = _smallest_complete(ten_ilp.build, inst, lb, h_orbit)
    assert h_full is not None and h_full <= h_orbit


def test_orbit_model_is_the_group_order_smaller():
    inst = make_instance(topo("torus", {"dims": [4, 4]}), "allgather", chunks_per_node=2)
    full, orb = ten_ilp.build(inst, 8), ten_ilp_orbit.build(inst, 8)
    assert len(full.sent) == 16 * len(orb.sent) and len(full.hold) == 16 * len(orb.hold)


# ---- drivers: what the orbit model proves ---------------------------------------------------------

def test_symmetric_optimum_is_not_claimed_optimal():
    """All-to-all on the one-way 2x3 torus: the global TEN bound is 5, the best symmetric
    schedule takes 6 (the full ILP restricted to symmetric schedules first completes at 6).
    Horizon search reports the symmetric optimum but keeps the status feasible and the bound 5:
    the orbit model's infeasibility at 5 rules out symmetric schedules only."""
    inst = make_instance(topo("torus", {"dims": [2, 3], "bidirectional": False}), "alltoall")
    assert bounds.lower_bound(inst) == 5
    assert _smallest_complete(_symmetric_full_model, inst, 5, 6)[0] == 6
    o = drivers.horizon_search(inst, ten_ilp_orbit, Options(time_limit=60), warm=False)
    assert o.extra["symmetric_optimum"] == 6 and o.objective == 6
    assert o.status == "feasible" and o.bound == 5
    assert "best symmetric schedule" in o.message
    assert verify.verify(o.schedule, inst) is None
    row, sched = pipeline.run(inst, "ten-ilp-orbit", Options(time_limit=60, params={"lp_bound": False}))
    assert row["status"] == "feasible" and row["steps"] == 6 and row["bound"] == 5 and row["verified"]
    assert "best symmetric schedule" in row["bound_source"]


def test_time_clustering_with_orbit_windows_meets_the_bound():
    inst = make_instance(topo("torus", {"dims": [6, 6]}), "allgather")
    o = drivers.time_cluster(inst, ten_ilp_orbit, Options(time_limit=60), window=1)
    assert o.status == "optimal" and o.objective == 9 == bounds.lower_bound(inst)
    assert verify.verify(o.schedule, inst) is None


def test_reduce_scatter_runs_on_the_transposed_orbit():
    inst = make_instance(topo("torus", {"dims": [3, 3], "bidirectional": False}), "reduce_scatter")
    o = drivers.horizon_search(inst, ten_ilp_orbit, Options(time_limit=60))
    assert o.schedule is not None and verify.verify(o.schedule, inst) is None
    assert o.objective == bounds.lower_bound(inst) == 4 and o.status == "optimal"


# ---- the scale-exact suite (loaded and checked here; run by benchmarks/bench_scale_exact.py) ------

def test_scale_exact_suite_loads_with_its_expectations():
    """Every file of the suite loads; the allgather expectations are the in-degree bound by hand:
    each node receives ``(N - 1) * chunks`` chunks over its in-links, one per link per step."""
    assert runner.check_suite("scale-exact")["producers"] == ["ten-ilp-orbit"]
    files = runner.select_instances("scale-exact")
    assert len(files) >= 10
    for path in files:
        inst = load_instance(path)
        kind, = {c.kind for c in inst.collectives}
        expect = inst.expect
        assert "optimal_steps" in expect or "lower_bound_steps" in expect, path
        if kind not in ("allgather", "allreduce"):
            continue
        t = inst.topology
        n, cpn = t.size, inst.collectives[0].chunks_per_node
        in_degree = {int(v) for _, v in t.graph.in_degree()}
        assert len(in_degree) == 1, path
        d = in_degree.pop()
        steps = -(-(n - 1) * cpn // d)
        if kind == "allreduce":
            # one-way gossip: 2n - 2 sends per block, n blocks over n * d links; on these tori
            # reduce-scatter then allgather, each at the allgather bound, take exactly that
            volume = -(-n * cpn * (2 * n - 2) // (n * d))
            assert expect["lower_bound_steps"] == volume, path
            if "optimal_steps" in expect:
                assert expect["optimal_steps"] == volume == 2 * steps, path
            continue
        assert expect.get("optimal_steps", expect.get("lower_bound_steps")) == steps, path
