"""The compiled cost models agree with the slow reference (today's vectorised numpy and
plain-Python event loops, kept in ``reference_cost.py``) on random schedules: all three models,
links and shortest-path routing, fractional pieces, copying and combining kinds, explicit
dependency pairs and group prefixes, parallel links, heterogeneous links."""

from __future__ import annotations

import random
from fractions import Fraction
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import reference_cost as ref
from collsynth.instances.generators import build
from collsynth.instances.collective import make
from collsynth.instances.instance import Instance, make_instance
from collsynth.instances.topology import from_edges
from collsynth.tens import cost, cost_kernels as kern, cost_models, dependencies
from collsynth.tens.schedule import from_sends, reverse
from collsynth.tens.verify import verify
from test_cost import ALPHA, BW, M, greedy_allgather

KINDS = ("allgather", "reduce_scatter", "allreduce", "broadcast", "alltoall", "reduce")


@st.composite
def networks(draw, max_nodes: int = 6):
    """A directed ring plus random links (repeats are parallel links), random costs."""
    n = draw(st.integers(2, max_nodes))
    extra = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n))
    rnd = draw(st.randoms(use_true_random=False))
    hetero = draw(st.booleans())
    edges = []
    for u, v in [(u, (u + 1) % n) for u in range(n)] + [(u, v) for u, v in extra if u != v]:
        bw = BW * (rnd.choice([1, 2, 3]) if hetero else 1)
        a = ALPHA * (rnd.choice([0, 1, 3]) if hetero else 1)
        edges.append((u, v, {"bandwidth": bw, "alpha": a}))
    return from_edges(n, edges, name="random")


@st.composite
def priced_cases(draw):
    """A random network, collective and random sends (pieces with denominators up to 4, steps
    up to 6, explicit copy/reduce ops on combining kinds), over links or routed."""
    topo = draw(networks())
    kind = draw(st.sampled_from(KINDS))
    root = 0 if kind in ("broadcast", "reduce") else None
    inst = make_instance(topo, kind, root=root, chunks_per_node=draw(st.integers(1, 2)),
                         message_bytes=M * draw(st.sampled_from([1, 3])))
    n = topo.size
    chunks = inst.collective.num_chunks
    routed = draw(st.booleans())
    links = sorted(set(topo.graph.edges()))
    hot = draw(st.integers(1, min(chunks, 3)))  # most sends share a few chunks: long dependency chains
    sends = []
    for _ in range(draw(st.integers(1, 40))):
        c = draw(st.integers(0, hot - 1) | st.integers(0, chunks - 1))
        if routed:
            u = draw(st.integers(0, n - 1))
            v = draw(st.sampled_from([w for w in range(n) if w != u]))
        else:
            u, v = draw(st.sampled_from(links))
        d = draw(st.sampled_from([1, 2, 3, 4]))
        lo = draw(st.integers(0, d - 1))
        hi = draw(st.integers(lo + 1, d))
        op = draw(st.sampled_from([None, "copy", "reduce"])) if inst.collective.combining else None
        sends.append((c, Fraction(lo, d), Fraction(hi, d), u, v, draw(st.integers(1, 6)), op))
    sched = from_sends(sends, kind, n, chunks, routing="shortest-path" if routed else "links")
    return sched, inst


@st.composite
def concurrent_cases(draw):
    """Two collectives on one random network (copying and combining kinds mixed, so that some
    chunk ids are held at their sources from the start and others never are) and random sends
    over the merged chunk ids: whole chunks or pieces, over links."""
    topo = draw(networks(max_nodes=5))
    n = topo.size
    colls = []
    for _ in range(2):
        kind = draw(st.sampled_from(KINDS))
        colls.append(make(kind, range(n), n, chunks_per_node=draw(st.integers(1, 2)), message_bytes=M,
                          root=0 if kind in ("broadcast", "reduce") else None))
    inst = Instance("concurrent", topo, tuple(colls))
    chunks = inst.chunk_offsets[-1] + colls[-1].num_chunks
    links = sorted(set(topo.graph.edges()))
    sends = []
    for _ in range(draw(st.integers(1, 40))):
        u, v = draw(st.sampled_from(links))
        d = draw(st.sampled_from([1, 2]))
        lo = draw(st.integers(0, d - 1))
        hi = draw(st.integers(lo + 1, d))
        sends.append((draw(st.integers(0, chunks - 1)), Fraction(lo, d), Fraction(hi, d), u, v,
                      draw(st.integers(1, 5)), draw(st.sampled_from(["copy", "reduce"]))))
    return from_sends(sends, "concurrent", n, chunks), inst


def assert_same(fast: cost.Cost, slow, rel: float = 1e-12):
    assert fast.model == slow.model and fast.steps == slow.steps
    for name in ("total_s", "T_L_s", "T_B_s"):
        a, b = getattr(fast, name), getattr(slow, name)
        assert a == pytest.approx(b, rel=rel, abs=1e-300), (name, a, b)
    assert fast.extra.keys() == slow.extra.keys()
    for key, b in slow.extra.items():
        a = fast.extra[key]
        if key == "per_step":
            assert [t for t, _, _ in a] == [t for t, _, _ in b]
            assert np.allclose([x[1:] for x in a], [x[1:] for x in b], rtol=rel, atol=0)
        elif isinstance(b, float):
            assert a == pytest.approx(b, rel=rel, abs=1e-300), key
        else:
            assert a == b, key


@settings(max_examples=60)
@given(case=priced_cases(), deps=st.sampled_from([None, True, False]))
def test_every_model_matches_the_reference(case, deps):
    """The three models share one pricing plan (step order, routes, dependencies), as in a run."""
    sched, inst = case
    plan = cost.PricingPlan(sched, inst)
    for model in cost_models.names():
        opts = {} if model == "sync" else {"exact_deps": deps}
        assert_same(cost_models.price(sched, inst, model, plan=plan, **opts), ref.price(sched, inst, model, **opts))
    assert_same(cost_models.price(sched, inst, "event", plan=plan, exact_deps=not deps),
                ref.price(sched, inst, "event", exact_deps=not deps))


def test_a_plan_of_another_schedule_is_refused():
    topo = build("ring", {"nodes": 3}, bandwidth=BW, alpha=ALPHA)
    inst = make_instance(topo, "allgather", message_bytes=M)
    s = from_sends([(0, 0, 1, 0, 1, 1)], "allgather", 3, 3)
    other = from_sends([(0, 0, 1, 0, 1, 1)], "allgather", 3, 3)
    with pytest.raises(ValueError, match="another schedule"):
        cost.price_event(s, inst, plan=cost.PricingPlan(other, inst))


@given(case=priced_cases(), factor=st.sampled_from([0.25, 0.5, 1.0, 3.0]))
def test_ten_model_with_a_given_timestep_matches_the_reference(case, factor):
    sched, inst = case
    f = factor * cost.ten_parameters(inst.topology, inst.collective.chunk_bytes)[0]
    assert_same(cost_models.price(sched, inst, "ten", timestep=f), ref.price(sched, inst, "ten", timestep=f))


@settings(max_examples=40)
@given(case=priced_cases(), factor=st.sampled_from([0.25, 1.0]))
def test_ten_occupancy_in_a_hash_table_matches_the_reference(case, factor):
    """A dense occupancy table over its budget moves to the hash table midway: same timesteps."""
    sched, inst = case
    f = factor * cost.ten_parameters(inst.topology, inst.collective.chunk_bytes)[0]
    with patch.object(cost, "DENSE_CELLS", 1):
        assert_same(cost.price_ten(sched, inst, timestep=f), ref.price(sched, inst, "ten", timestep=f))


@settings(max_examples=30)
@given(case=priced_cases(), factor=st.sampled_from([1 / 70, 1 / 300]), dense=st.sampled_from([1, 64, 1 << 21]))
def test_ten_hops_over_many_pages_match_the_reference(case, factor, dense):
    """Timesteps much shorter than a hop: every hop spans one to several 64-timestep pages, so
    the occupancy table grows for many pages at once (dense, dense then hashed, hashed from
    the start): same timesteps as the reference."""
    sched, inst = case
    f = factor * cost.ten_parameters(inst.topology, inst.collective.chunk_bytes)[0]
    with patch.object(cost, "DENSE_CELLS", dense):
        assert_same(cost.price_ten(sched, inst, timestep=f), ref.price(sched, inst, "ten", timestep=f))


@settings(max_examples=40)
@given(case=priced_cases(), deps=st.sampled_from([True, False]), levels=st.sampled_from([1, 2]))
def test_event_queue_beyond_its_time_levels_matches_the_reference(case, deps, levels):
    """With room for one or two time levels most ready hops go to the queue's late heap:
    same prices as the reference (and as the queue with room for every level)."""
    sched, inst = case
    with patch.object(cost, "EVENT_LEVELS", levels):
        assert_same(cost.price_event(sched, inst, exact_deps=deps), ref.price(sched, inst, "event", exact_deps=deps))


@settings(max_examples=40)
@given(case=priced_cases(), single=st.booleans())
def test_event_groups_of_one_arrival_released_directly_or_by_prefix_match_the_reference(case, single):
    """Group prefixes with a group of one arrival releasing its waiting sends itself (the
    default) or through its group row like any other group: same prices as the reference."""
    sched, inst = case
    with patch.object(cost, "EVENT_SINGLE", single):
        assert_same(cost.price_event(sched, inst, exact_deps=False), ref.price(sched, inst, "event", exact_deps=False))


def test_event_groups_of_one_arrival_are_released_directly():
    """A greedy allgather (every node receives every chunk once: every group has one arrival)
    gets no group blocks with the direct release and one per group without; prices agree."""
    topo = build("torus", {"dims": [3, 4]}, bandwidth=BW, alpha=ALPHA)
    inst = make_instance(topo, "allgather", message_bytes=M)
    s = greedy_allgather(topo, random.Random(3), per_link=1)
    plan = cost.PricingPlan(s, inst)
    view, dep = plan.view, plan.deps(False)
    assert (np.diff(dep.gstart) == 1).all()
    tables = {}
    for single in (True, False):
        rec = kern.event_records(view.chunk, view.lo, view.hi, s.denom, cost.chunk_bytes_of(inst), plan.routes.r)
        blocks, _, _ = kern.release_groups(rec, dep.members, dep.gstart, dep.g_in, dep.p, single)
        named = rec["group"][rec["group"] >= 0]
        tables[single] = (len(blocks) > 0, len(np.unique(named)), len(named))
        with patch.object(cost, "EVENT_SINGLE", single):
            assert_same(cost.price_event(s, inst, exact_deps=False), ref.price(s, inst, "event", exact_deps=False))
    assert tables == {True: (False, 0, 0), False: (True, dep.groups, len(s))}


@given(g_in=st.lists(st.integers(-1, 5), max_size=40), groups=st.integers(6, 8))
def test_waiting_rows_by_group_are_a_stable_sort(g_in, groups):
    """The sends reading each group, in position order, and each group's row range."""
    g = np.array(g_in, np.int32)
    p = np.arange(len(g), dtype=np.int32) * 3
    rows, starts = kern.waiting_by_group(g, p, groups)
    expected = [[q, 3 * q] for k in range(groups) for q in range(len(g_in)) if g_in[q] == k]
    assert rows.tolist() == expected
    assert starts.tolist() == [sum(0 <= x < k for x in g_in) for k in range(groups + 1)]


@given(case=priced_cases())
def test_prefix_fallback_beyond_the_pair_budget_matches_the_reference(case):
    """With more dependency pairs than the budget both fall back to group prefixes."""
    sched, inst = case
    with patch.object(dependencies, "PAIR_BUDGET", 3), patch.object(ref, "PAIR_BUDGET", 3):
        for model in ("ten", "event"):
            assert_same(cost_models.price(sched, inst, model), ref.price(sched, inst, model))


@settings(max_examples=40)
@given(case=concurrent_cases(), deps=st.sampled_from([True, False]))
def test_concurrent_collectives_match_the_reference(case, deps):
    """Merged chunk ids of two collectives: which sources hold their chunk from the start
    (each collective's own precondition, none for a combining one) decides the dependency
    pairs and groups, and so the prices."""
    sched, inst = case
    di, dj = cost._dependencies(sched, inst)
    ri, rj = ref._dependencies(sched, inst)
    assert di.tolist() == ri.tolist() and dj.tolist() == rj.tolist()
    for model in ("ten", "event"):
        assert_same(cost_models.price(sched, inst, model, exact_deps=deps),
                    ref.price(sched, inst, model, exact_deps=deps))


@given(case=priced_cases())
def test_dependency_pairs_match_the_reference(case):
    sched, inst = case
    di, dj = cost._dependencies(sched, inst)
    ri, rj = ref._dependencies(sched, inst)
    assert di.tolist() == ri.tolist() and dj.tolist() == rj.tolist()


@given(case=priced_cases())
def test_routes_carry_the_reference_links_and_latency(case):
    sched, inst = case
    fast, slow = cost.routes(sched, inst.topology), ref.routes(sched, inst.topology)
    fs, fl = fast.expand()
    ss, sl = slow.expand()
    assert fs.tolist() == ss.tolist() and fl.tolist() == sl.tolist()
    assert np.allclose(fast.latency[fast.r], slow.latency[slow.r], rtol=1e-12, atol=0)


@settings(max_examples=15)
@given(st.sampled_from([("torus", {"dims": [4, 5]}), ("hypercube", {"dim": 4}), ("ring", {"nodes": 9})]),
       st.randoms(use_true_random=False))
def test_valid_schedules_and_their_reversal_match_the_reference(net, rnd):
    """Greedy allgathers (several chunks per link and step) and their reduce-scatter reversal."""
    topo = build(net[0], net[1], bandwidth=BW, alpha=ALPHA)
    inst = make_instance(topo, "allgather", message_bytes=M)
    s = greedy_allgather(topo, rnd, per_link=2)
    assert verify(s, inst) is None
    r_inst = make_instance(topo.transpose(), "reduce_scatter", message_bytes=M)
    for sched, i in ((s, inst), (reverse(s), r_inst)):
        for model in cost_models.names():
            assert_same(cost_models.price(sched, i, model), ref.price(sched, i, model))


@given(x=st.integers(1, (1 << 64) - 1))
def test_lowest_set_bit_of_an_occupancy_word(x):
    """The TEN table's lowest-set-bit (first free or busy timestep of a 64-timestep page)
    against Python's integers."""
    assert kern._ctz(np.uint64(x)) == (x & -x).bit_length() - 1
