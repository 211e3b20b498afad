"""Classic closed-form algorithms: every schedule verifies; priced cost = paper's closed form
where the algorithm is congestion-free on the topology; congestion shows where it is not."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collsynth.instances import generators, make_instance
from collsynth.solvers import pipeline
from collsynth.solvers.closed_form import classics as C
from collsynth.solvers.closed_form import phases as P
from collsynth.solvers.producers import Options, Unsupported
from collsynth.tens.cost_models import price
from collsynth.tens.verify import verify

ROOTED = ("broadcast", "reduce", "scatter", "gather")
KINDS = ("allgather", "reduce_scatter", "allreduce", "alltoall") + ROOTED
ALPHA, BW, M = 1e-6, 1e9, 6e6


def topo(name, **params):
    return generators.build(name, params, alpha=ALPHA, bandwidth=BW)


def inst(t, kind, c=1, root=0):
    return make_instance(t, kind, root=(root if kind in ROOTED else None), chunks_per_node=c, message_bytes=M)


def supported(algo, kind):
    probe = {"bucket": topo("torus", dims=[3, 3]), "hamiltonian-rings": topo("torus", dims=[3, 3])}
    t = probe.get(algo, topo("complete", nodes=4))
    try:
        C.CLASSICS[algo].schedule(inst(t, kind))
        return True
    except Unsupported:
        return False


PAIRS = [(a, k) for a in C.CLASSICS for k in KINDS if supported(a, k)]


def assert_matches_closed_form(algo, instance):
    s = C.CLASSICS[algo].schedule(instance)
    assert verify(s, instance) is None
    cost = price(s, instance, "sync")
    cf = C.closed_form_for(algo, instance)
    assert cost.steps == cf["steps"], (algo, cost.steps, cf["steps"])
    assert cost.extra["T_B_chunks"] == cf["T_B_chunks"], (algo, cost.extra["T_B_chunks"], cf["T_B_chunks"])
    assert math.isclose(cost.T_L_s, cf["T_L_s"], rel_tol=1e-12)
    assert math.isclose(cost.T_B_s, cf["T_B_s"], rel_tol=1e-12)
    return s, cost, cf


def test_every_family_has_kinds():
    algos = {a for a, _ in PAIRS}
    assert algos == set(C.CLASSICS)
    assert ("double-binary-tree", "allreduce") in PAIRS and ("bruck", "allgather") in PAIRS
    assert ("binary-tree", "allgather") not in PAIRS


# ---- congestion-free topologies: priced == closed form, for a range of p ---------------------

RING_FAMILY = ("ring", "bidirectional-ring", "bfb-ring")
COMPLETE_FAMILY = ("direct", "binary-tree", "binomial-tree", "double-binary-tree", "recursive-doubling",
                   "recursive-halving", "rabenseifner", "bruck", "scatter-allgather")


@pytest.mark.parametrize("algo,kind", [(a, k) for a, k in PAIRS if a in RING_FAMILY])
@pytest.mark.parametrize("p", [2, 3, 4, 5, 6, 7, 8, 11, 12])
def test_rings_on_ring_equal_closed_form(algo, kind, p):
    assert_matches_closed_form(algo, inst(topo("ring", nodes=p), kind, c=2, root=p // 2))


@pytest.mark.parametrize("algo,kind", [(a, k) for a, k in PAIRS if a in COMPLETE_FAMILY])
@pytest.mark.parametrize("p", [2, 3, 5, 6, 7, 8, 9, 12, 13, 16])
def test_on_complete_graph_equal_closed_form(algo, kind, p):
    assert_matches_closed_form(algo, inst(topo("complete", nodes=p), kind, c=2, root=p - 1))


@pytest.mark.parametrize("algo", ["recursive-doubling", "rabenseifner", "binomial-tree"])
@pytest.mark.parametrize("dim", [1, 2, 3, 4])
def test_butterflies_on_hypercube_equal_closed_form(algo, dim):
    kind = {"recursive-doubling": "allgather", "rabenseifner": "allreduce", "binomial-tree": "broadcast"}[algo]
    s, _, _ = assert_matches_closed_form(algo, inst(topo("hypercube", dim=dim), kind, c=1))
    assert s.routing == "links"  # every partner is a hypercube neighbour


@pytest.mark.parametrize("kind", ["allgather", "reduce_scatter", "allreduce"])
@pytest.mark.parametrize("dims", [[5], [3, 3], [4, 4], [5, 5], [3, 3, 3]])
def test_bucket_on_square_torus_equal_closed_form(kind, dims):
    s, cost, cf = assert_matches_closed_form("bucket", inst(topo("torus", dims=dims), kind, c=1))
    n, D = dims[0], len(dims)
    N = n ** D
    per_phase = cf["T_B_chunks"] / (2 if kind == "allreduce" else 1)
    assert per_phase == C.Fraction(N - 1, 2 * D)  # (N-1)/N M/(2D B): every port busy


@pytest.mark.parametrize("kind", ["allgather", "reduce_scatter", "allreduce"])
@pytest.mark.parametrize("dims", [[3, 3], [4, 4], [5, 5], [6, 6], [5, 3], [3, 7], [4, 6], [8, 4]])
def test_hamiltonian_rings_equal_closed_form(kind, dims):
    s, cost, cf = assert_matches_closed_form("hamiltonian-rings", inst(topo("torus", dims=dims), kind, c=1))
    assert s.routing == "links"


def test_closed_forms_are_the_papers_formulas():
    """The closed forms are the textbook expressions (independent of the schedule builders)."""
    F = C.Fraction
    for p in (4, 8, 16, 32):
        L = int(math.log2(p))
        assert C.closed_form("recursive-doubling", "allgather", p)["steps"] == L
        assert C.closed_form("recursive-doubling", "allgather", p)["T_B_chunks"] == p - 1
        assert C.closed_form("rabenseifner", "allreduce", p)["T_B_chunks"] == 2 * (p - 1)
        assert C.closed_form("binomial-tree", "broadcast", p)["steps"] == L
        cf = C.closed_form("scatter-allgather", "broadcast", p, message_bytes=p, bandwidth=1.0)
        assert cf["steps"] == L + p - 1 and math.isclose(cf["T_B_s"], 2 * (p - 1))  # 2 (p-1)/p M beta
    for h in (2, 3, 4, 5):
        assert C.closed_form("binary-tree", "broadcast", 2 ** h - 1)["steps"] == 2 * (h - 1)
    for p in (5, 6, 9):
        assert C.closed_form("bfb-ring", "allgather", p)["steps"] == p // 2
        assert C.closed_form("bfb-ring", "allgather", p)["T_B_chunks"] == F(p - 1, 2)
        assert math.isclose(C.closed_form("ring", "allreduce", p, message_bytes=1.0, bandwidth=1.0)["T_B_s"], 2 * (p - 1) / p)


# ---- any p, any chunking: verification and step counts (property) ---------------------

@given(p=st.integers(2, 40), c=st.integers(1, 3), data=st.data())
def test_schedules_verify_for_any_p(p, c, data):
    algo, kind = data.draw(st.sampled_from([(a, k) for a, k in PAIRS if a in RING_FAMILY + COMPLETE_FAMILY]))
    root = data.draw(st.integers(0, p - 1))
    t = topo("ring", nodes=p) if algo in RING_FAMILY else topo("complete", nodes=p)
    i = inst(t, kind, c=c, root=root)
    s = C.CLASSICS[algo].schedule(i)
    assert verify(s, i) is None
    assert s.num_steps == C.closed_form_for(algo, i)["steps"]


@given(m=st.integers(3, 14), n=st.integers(3, 14))
def test_hamiltonian_cycles_decompose_the_torus(m, n):
    pair = C.torus_hamiltonian_decomposition(m, n)
    if (m - n) % 2:
        assert pair is None  # not covered by the construction (refused, never wrong)
        return
    h1, h2 = pair
    t = topo("torus", dims=[m, n])
    all_edges = {frozenset((u, v)) for u, v in t.graph.edges()}
    for h in (h1, h2):
        assert sorted(h) == list(range(m * n))
        assert all(t.has_link(a, b) for a, b in zip(h, h[1:] + h[:1]))
    e1, e2 = P.undirected_edges(h1), P.undirected_edges(h2)
    assert not e1 & e2 and e1 | e2 == all_edges


@pytest.mark.parametrize("p", [2, 3, 4, 5, 8, 9, 16, 17, 31])
def test_double_binary_trees_are_complementary(p):
    t0, t1 = P.double_binary_trees(p)
    for par in (t0, t1):
        assert sum(x < 0 for x in par) == 1  # one root
        depth, _ = P._height(par)  # every rank reaches the root
        assert max(depth) == C._log2c(p) or p <= 2
    if p % 2 == 0 and p > 2:
        inner0 = {x for x in t0 if x >= 0}
        inner1 = {x for x in t1 if x >= 0}
        assert not inner0 & inner1  # NCCL: a rank is interior in at most one tree


# ---- non-power-of-two paths and congestion -------------------------------------------

def test_non_power_of_two_uses_extra_exchanges():
    i = inst(topo("complete", nodes=6), "allreduce")
    s = C.rabenseifner_schedule(i)
    assert s.num_steps == 2 * 2 + 2  # 2 log2(4) + the two extra exchanges
    assert verify(s, i) is None


def test_logical_peers_off_the_links_are_routed_and_congest():
    """Recursive doubling on a ring: partners at distance 2, 4 share links; the priced T_B
    exceeds the congestion-free closed form because the cost model routes the sends."""
    i = inst(topo("ring", nodes=8), "allgather")
    s = C.recursive_doubling_schedule(i)
    assert s.routing == "shortest-path" and verify(s, i) is None
    cost = price(s, i, "sync")
    cf = C.closed_form_for("recursive-doubling", i)
    assert cost.extra["T_B_chunks"] > cf["T_B_chunks"]
    direct = C.direct_schedule(inst(topo("torus", dims=[3, 3]), "allgather"))
    assert direct.routing == "shortest-path"


def test_bucket_on_rectangular_torus_verifies():
    i = inst(topo("torus", dims=[3, 5]), "allreduce", c=2)
    assert verify(C.bucket_schedule(i), i) is None


def test_mutants_are_rejected():
    i = inst(topo("complete", nodes=6), "allreduce")
    s = C.rabenseifner_schedule(i)
    keep = np.ones(len(s), bool)
    keep[len(s) // 2] = False
    assert verify(s.select(keep), i) is not None
    early = replace(s, step=np.maximum(s.step - 1, 1))
    assert verify(early, i) is not None


# ---- producers ------------------------------------------------------------------------

def test_producers_refuse_what_they_do_not_support():
    with pytest.raises(Unsupported, match="Hamiltonian cycles"):
        C.hamiltonian_rings_schedule(inst(topo("torus", dims=[3, 4]), "allreduce"))
    with pytest.raises(Unsupported, match="torus"):
        C.bucket_schedule(inst(topo("complete", nodes=4), "allgather"))
    with pytest.raises(Unsupported, match="not allgather"):
        C.binary_tree_schedule(inst(topo("complete", nodes=4), "allgather"))
    row, sched = pipeline.run(inst(topo("complete", nodes=4), "allgather"), "double-binary-tree")
    assert row["status"] == "skipped" and "allreduce" in row["message"] and sched is None


@pytest.mark.parametrize("name", sorted(C.CLASSICS))
def test_producer_outcome_carries_closed_form(name):
    t = topo("torus", dims=[3, 3])
    kind = "allreduce" if name in ("double-binary-tree", "rabenseifner", "bucket", "hamiltonian-rings", "ring") else None
    kind = kind or next(k for a, k in PAIRS if a == name)
    row, sched = pipeline.run(inst(t, kind), name, Options())
    assert row["status"] == "constructed" and row["verified"], row["message"]
    cf = row["extra"]["closed_form"]
    assert {"T_L_s", "T_B_s", "total_s", "steps"} <= set(cf)
    assert math.isclose(cf["total_s"], cf["T_L_s"] + cf["T_B_s"])


@pytest.mark.parametrize("algo,kind", [("ring", "allreduce"), ("bfb-ring", "allgather"), ("rabenseifner", "allreduce"),
                                       ("bruck", "reduce_scatter"), ("binomial-tree", "reduce"),
                                       ("double-binary-tree", "allreduce")])
def test_failed_nodes_and_subsets_use_live_ranks(algo, kind):
    t = topo("torus", dims=[4, 4]).with_failures(nodes=[5, 10])
    i = make_instance(t, kind, root=(0 if kind in ROOTED else None), message_bytes=M)
    s = C.CLASSICS[algo].schedule(i)
    assert verify(s, i) is None
    assert not set(s.src.tolist()) & {5, 10} and not set(s.dst.tolist()) & {5, 10}
    sub = make_instance(topo("complete", nodes=9), kind, root=(2 if kind in ROOTED else None),
                        nodes=[0, 2, 3, 7, 8], message_bytes=M)
    assert verify(C.CLASSICS[algo].schedule(sub), sub) is None
