"""BFB (Zhao et al., NSDI 2025, Section 6, Appendix D): LP (3) per (node, step), orbit solving, chunked IP (12),
heterogeneous LP (13), and the producers through the verify+price pipeline."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from collsynth import InputError
from collsynth.formulations import bfb_chunked, bfb_hetero, bfb_lp
from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.instances.topology import from_edges, moore_bound, with_link_costs
from collsynth.solvers import backends, pipeline
from collsynth.solvers.bfb import per_step as bfb
from collsynth.solvers.producers import Options, Unsupported
from collsynth.tens import cost
from collsynth.tens.verify import verify
from proofs import proven_status


def _bw_optimal_expected(topo, U):
    """Theorem 17: U*[u, t] = |{v : dist(v -> u) = t}| / d for every u, t."""
    D = topo.distances
    d = topo.out_degree_range[1]
    for u in topo.npus:
        for t in range(1, topo.diameter + 1):
            if U[(u, t)] != Fraction(int((D[:, u] == t).sum()), d):
                return False
    return True


@pytest.mark.parametrize("gen, params", [
    ("torus", {"dims": [3, 5]}),
    ("torus", {"dims": [4, 6, 2]}),
    ("torus", {"dims": [2, 3, 4]}),
    ("hypercube", {"dim": 3}),
    ("hypercube", {"dim": 5}),
    ("hamming", {"dims": 2, "q": 3}),
    ("hamming", {"dims": 3, "q": 3}),
    ("circulant", {"nodes": 13, "offsets": [2, 3]}),
    ("circulant", {"nodes": 30, "offsets": [3, 4]}),
    ("complete_bipartite", {"degree": 3}),
])
def test_lp_bfb_is_bw_optimal_on_symmetric_topologies(gen, params):
    topo = build(gen, params)
    res = bfb.solve_bfb(topo, method="lp")
    assert res.steps == topo.diameter
    assert res.bw_optimal and _bw_optimal_expected(topo, res.U)
    N = len(topo.npus)
    assert res.T_B_units == Fraction(N - 1, N)
    inst = make_instance(topo, "allgather")
    assert verify(res.schedule, inst) is None
    # the priced schedule (exact sync T_B in chunks) agrees with the LP figures
    c = cost.price_sync(res.schedule, inst)
    assert c.extra["T_B_chunks"] * Fraction(res.degree, N) == res.T_B_units
    assert c.steps == topo.diameter


@pytest.mark.parametrize("name", ["octahedron", "paley9", "k55_minus_matching", "petersen_line", "cube4",
                                  "heawood_line", "heawood_distance3", "pg23_incidence", "odd4"])
def test_distance_regular_graphs_are_bw_optimal(name):
    topo = build("distance_regular", {"name": name})
    res = bfb.solve_bfb(topo, method="lp" if topo.size <= 21 else "flow")
    assert res.bw_optimal
    assert res.T_B_units == Fraction(topo.size - 1, topo.size)
    assert verify(res.schedule, make_instance(topo, "allgather")) is None


@settings(max_examples=20, deadline=None)
@given(d=st.integers(2, 4), n=st.integers(6, 120))
def test_generalized_kautz_within_one_of_moore(d, n):
    topo = build("generalized_kautz", {"degree": d, "nodes": n})
    r = bfb_lp.optimal_loads(topo)
    assert r["steps"] <= moore_bound(n, d) + 1  # Theorem 21
    assert r["steps"] >= moore_bound(n, d)


def test_orbit_solving_equals_all_node_solving():
    topo = build("torus", {"dims": [3, 4]})
    orb = bfb.solve_bfb(topo, method="lp", orbit="auto")
    full = bfb.solve_bfb(topo, method="lp", orbit=False)
    assert orb.orbit and not full.orbit
    assert orb.problems == topo.diameter and full.problems == topo.size * topo.diameter
    assert orb.U == full.U
    assert orb.T_B_units == full.T_B_units
    inst = make_instance(topo, "allgather")
    assert verify(orb.schedule, inst) is None and verify(full.schedule, inst) is None
    # the orbit schedule is the base node's solution translated: every translation of the torus
    # (an automorphism, checked on its links) maps what each send carries onto the schedule itself
    la = topo.link_arrays
    for shift in ((1, 0), (0, 1), (2, 3)):
        move = _translation([3, 4], shift)
        assert set(zip(move[la.src], move[la.dst])) == set(zip(la.src, la.dst))
        assert _carried(orb.schedule, move) == _carried(orb.schedule, np.arange(topo.size))


def _translation(dims, shift):
    """Node id -> the id of the node ``shift`` further along each torus dimension (row-major ids)."""
    coords = np.unravel_index(np.arange(int(np.prod(dims))), dims)
    return np.ravel_multi_index(tuple((c + s) % d for c, s, d in zip(coords, shift, dims)), dims)


def _carried(schedule, move) -> dict:
    """How much of its chunk each ``(chunk, src, dst, step)`` carries, with every node and chunk
    id (allgather: a chunk is named by its source node) renamed by ``move``."""
    s, out = schedule, {}
    for c, lo, hi, u, v, t in zip(s.chunk.tolist(), s.lo.tolist(), s.hi.tolist(), s.src.tolist(), s.dst.tolist(),
                                  s.step.tolist()):
        key = (int(move[c]), int(move[u]), int(move[v]), t)
        out[key] = out.get(key, 0) + Fraction(hi - lo, s.denom)
    return out


def test_cayley_translations_are_checked():
    topo = build("torus", {"dims": [3, 5]})
    assert bfb.cayley_orders(topo) == [3, 5]
    from dataclasses import replace

    wrong = replace(topo, meta={**topo.meta, "cayley": [5, 3]})  # wrong orders: not an automorphism
    assert bfb.cayley_orders(wrong) is None
    assert bfb.cayley_orders(build("mesh", {"dims": [3, 3]})) is None
    with pytest.raises(Unsupported):
        bfb.solve_bfb(build("mesh", {"dims": [3, 3]}), orbit=True)


def _random_digraph(draw_edges, n):
    return from_edges(n, draw_edges, bandwidth=1.0, alpha=0.0)


@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_lp_optimum_equals_theorem19_closed_form(data):
    n = data.draw(st.integers(4, 9))
    # a ring (strong connectivity) plus random chords, some doubled (parallel links)
    chords = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=2 * n))
    edges = [(i, (i + 1) % n) for i in range(n)] + [(u, v) for u, v in chords if u != v]
    topo = _random_digraph(edges, n)
    closed = bfb_lp.optimal_loads(topo)["U"]
    for u in topo.npus:
        for t in range(1, topo.diameter + 1):
            m = bfb_lp.build(topo, node=u, step=t)
            r = backends.solve(m, "highs")
            assert r.status == "optimal"
            assert abs(bfb_lp.bound(m) - float(closed[(u, t)])) < 1e-7
    res = bfb.solve_bfb(topo, method="lp", orbit=False)
    assert res.U == {k: v for k, v in closed.items()}
    assert verify(res.schedule, make_instance(topo, "allgather")) is None
    flow = bfb.solve_bfb(topo, method="flow", orbit=False)
    assert flow.U == res.U


def test_lp_model_components_and_extract():
    topo = build("hypercube", {"dim": 3})
    m = bfb_lp.build(make_instance(topo, "allgather"), node=0, step=2)
    assert {c.name for c in m.component_objects()} >= {"x", "U", "eq_share", "ineq_link_load", "obj"}
    assert backends.solve(m, "highs").status == "optimal"
    assert abs(bfb_lp.bound(m) - 1.0) < 1e-9  # 3 sources at distance 2, 3 in-links
    part = bfb_lp.extract(m, nodes=8)
    # every source at distance 2 arrives whole at node 0 in step 2
    got = {}
    for s in part.sends():
        assert s.dst == 0 and s.step == 2
        got.setdefault(s.chunk, Fraction(0))
        got[s.chunk] += s.hi - s.lo
    assert got == {3: 1, 5: 1, 6: 1}


@pytest.mark.parametrize("kind", ["allgather", "reduce_scatter", "allreduce"])
@pytest.mark.parametrize("c", [1, 3])
def test_producer_schedules_verify(kind, c):
    topo = build("torus", {"dims": [3, 4]})
    inst = make_instance(topo, kind, chunks_per_node=c)
    row, sched = pipeline.run(inst, "bfb-lp", Options())
    assert row["status"] == proven_status(row) and row["verified"], row["message"]
    phases = 2 if kind == "allreduce" else 1
    assert row["steps"] == phases * topo.diameter
    assert row["extra"]["bw_optimal"] is True
    assert Fraction(row["extra"]["T_B"]) == phases * Fraction(11, 12)


def test_non_vertex_transitive_and_unidirectional():
    for gen, params in [("mesh", {"dims": [3, 3]}), ("kautz", {"degree": 2, "diameter": 3})]:
        topo = build(gen, params)
        for kind in ("allgather", "reduce_scatter", "allreduce"):
            row, _ = pipeline.run(make_instance(topo, kind), "bfb-lp", Options())
            assert row["verified"], row["message"]
    topo = build("kautz", {"degree": 2, "diameter": 3})
    res = bfb.solve_bfb(topo)
    assert res.moore_optimal and res.steps == 3


def test_unsupported_and_bad_input():
    topo = build("ring", {"nodes": 4})
    row, _ = pipeline.run(make_instance(topo, "broadcast", root=0), "bfb-lp", Options())
    assert row["status"] == "skipped"
    with pytest.raises(InputError):
        bfb.solve_bfb(topo, method="simplex")
    with pytest.raises(InputError):
        pipeline.run(make_instance(topo, "allgather"), "bfb-lp", Options(params={"method": "nope"}))


@pytest.mark.parametrize("K", [1, 2, 3])
def test_chunked_exact_and_rounded_theorem20(K):
    topo = build("hypercube", {"dim": 3})
    lp = bfb.solve_bfb(topo, method="flow")
    ip = bfb.solve_bfb(topo, method="chunked", chunks=K)
    rd = bfb.solve_bfb(topo, method="chunked-round", chunks=K)
    inst = make_instance(topo, "allgather", chunks_per_node=K)
    for r in (ip, rd):
        assert verify(r.schedule, inst) is None
        assert r.schedule.denom == 1  # whole chunks
    for t in range(topo.diameter):
        assert ip.step_max[t] >= lp.step_max[t]
        assert ip.step_max[t] <= rd.step_max[t]
        assert rd.step_max[t] <= lp.step_max[t] + Fraction(1, K)  # Theorem 20, per link per step
    # priced T_B (chunk units) agrees with the shard-unit figure
    c = cost.price_sync(rd.schedule, inst)
    assert c.extra["T_B_chunks"] / K * Fraction(rd.degree, rd.nodes) == rd.T_B_units


def test_chunked_producer_reports_both():
    topo = build("torus", {"dims": [3, 3]})
    row, _ = pipeline.run(make_instance(topo, "allgather", chunks_per_node=2), "bfb-chunked", Options())
    assert row["verified"], row["message"]
    ex = row["extra"]
    assert Fraction(ex["T_B"]) <= Fraction(ex["T_B_rounded"]) <= Fraction(ex["theorem20_bound"])
    assert Fraction(ex["T_B_lp"]) <= Fraction(ex["T_B"])
    m = bfb_chunked.build(make_instance(topo, "allgather", chunks_per_node=2), node=0, step=2)
    assert backends.solve(m, "highs").status == "optimal"
    assert len(bfb_chunked.extract(m, nodes=9)) > 0


def test_hetero_lp_uses_faster_links():
    # bidirectional 4-ring whose counter-clockwise links (i+1 -> i) are 3x faster
    topo = build("ring", {"nodes": 4}, bandwidth=1e9, alpha=1e-6)
    g = topo.graph.copy()
    for u, v, data in g.edges(data=True):
        if u == (v + 1) % 4:
            data["bandwidth"] = 3e9
    from dataclasses import replace

    het = replace(topo, graph=g)
    inst = make_instance(het, "allgather", message_bytes=4e6)
    row, sched = pipeline.run(inst, "bfb-hetero", Options())
    assert row["verified"], row["message"]
    plain, _ = pipeline.run(inst, "bfb-lp", Options())
    het_cost = cost.price_sync(sched, inst).extra["coupled_s"]
    lp_sched = bfb.solve_bfb(het).schedule
    lp_cost = cost.price_sync(lp_sched, inst).extra["coupled_s"]
    assert het_cost < lp_cost  # LP (13) exploits the faster link
    assert abs(row["extra"]["hetero_time_s"] - het_cost) < 1e-9 * max(1.0, het_cost) + 1e-12
    m = bfb_hetero.build(inst, node=0, step=2)
    assert backends.solve(m, "highs").status == "optimal"
    assert bfb_hetero.bound(m) > 0


def test_parallel_pool_matches_serial():
    topo = build("mesh", {"dims": [2, 3]})
    a = bfb.solve_bfb(topo, jobs=1)
    b = bfb.solve_bfb(topo, jobs=2)
    assert a.U == b.U and a.T_B_units == b.T_B_units
    assert verify(b.schedule, make_instance(topo, "allgather")) is None


def test_rationalize_repairs_sums():
    group = np.array([0, 0, 0, 1, 1])
    x = np.array([1 / 3, 1 / 3, 1 / 3 + 1e-12, 0.5 - 1e-13, 0.5])
    num, den = bfb_lp.rationalize(group, x)
    assert num[:3].sum() == den and num[3:].sum() == den
    assert den == 6


def test_hetero_drops_idle_high_latency_link():
    # 2-cube; the link 1 -> 0 has a huge alpha: in step 2 node 0 must take source 3 via node 2
    from dataclasses import replace

    topo = build("hypercube", {"dim": 2}, bandwidth=1e9, alpha=1e-6)
    g = topo.graph.copy()
    for u, v, data in g.edges(data=True):
        if (u, v) == (1, 0):
            data["alpha"] = 1e-3
    het = replace(topo, graph=g)
    r = bfb.solve_bfb(het, method="hetero", message_bytes=4e3)
    inst = make_instance(het, "allgather", message_bytes=4e3)
    assert verify(r.schedule, inst) is None
    step2 = [s for s in r.schedule.sends() if s.step == 2 and s.dst == 0]
    assert step2 and all(s.src == 2 for s in step2)
    assert r.extra["hetero_step_s"][1] < 1e-5  # step 2 does not pay the 1 ms latency
    assert abs(cost.price_sync(r.schedule, inst).extra["coupled_s"] - r.extra["hetero_time_s"]) < 1e-12
