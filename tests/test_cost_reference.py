"""The compiled cost models agree with the slow reference (today's vectorised numpy and
plain-Python event loops, kept in ``reference_cost.py``) on random schedules: all three models,
links and shortest-path routing, fractional pieces, copying and combining kinds, explicit
dependency pairs and group prefixes, parallel links, heterogeneous links."""

from __future__ import annotations

import random
from dataclasses import replace
from fractions import Fraction
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import reference_cost as ref
from collsynth import InputError
from collsynth.instances.generators import build
from collsynth.instances.collective import make
from collsynth.instances.instance import Instance, make_instance
from collsynth.instances.topology import from_edges
from collsynth.tens import cost, cost_models, dependencies, event_layout, event_queue, page_table
from collsynth.tens.schedule import from_sends, reverse
from collsynth.tens.verify import verify
from builders import ALPHA, BW, M, greedy_allgather, strongly_connected_arcs

KINDS = ("allgather", "reduce_scatter", "allreduce", "broadcast", "alltoall", "reduce")


@st.composite
def networks(draw, max_nodes: int = 6):
    """A directed ring plus random links (repeats are parallel links), random costs."""
    n, arcs = draw(strongly_connected_arcs(2, max_nodes, extra_per_node=3, shuffled=False))
    rnd = draw(st.randoms(use_true_random=False))
    hetero = draw(st.booleans())
    edges = []
    for u, v in arcs:
        bw = BW * (rnd.choice([1, 2, 3]) if hetero else 1)
        a = ALPHA * (rnd.choice([0, 1, 3]) if hetero else 1)
        edges.append((u, v, {"bandwidth": bw, "alpha": a}))
    return from_edges(n, edges, name="random")


@st.composite
def priced_cases(draw, denominators=(1, 2, 3, 4)):
    """A random network, collective and random sends (pieces with ``denominators``, up to 4 by
    default, steps up to 6, explicit copy/reduce ops on combining kinds), over links or routed."""
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
        d = draw(st.sampled_from(denominators))
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
        rec, _ = event_layout.event_records(view.chunk, view.lo, view.hi, s.denom, cost.chunk_bytes_of(inst),
                                            plan.routes.r, plan.routes.ptr)
        blocks, _, _ = event_layout.release_groups(rec, dep.members, dep.gstart, dep.g_in, dep.p, single)
        named = rec["group"][rec["group"] >= 0]
        tables[single] = (len(blocks) > 0, len(np.unique(named)), len(named))
        with patch.object(cost, "EVENT_SINGLE", single):
            assert_same(cost.price_event(s, inst, exact_deps=False), ref.price(s, inst, "event", exact_deps=False))
    assert tables == {True: (False, 0, 0), False: (True, dep.groups, len(s))}


@settings(max_examples=40)
@given(case=priced_cases(denominators=(7, 60, 97)), deps=st.sampled_from([True, False]))
def test_event_pieces_of_many_sizes_match_the_reference(case, deps):
    """Pieces of tens of distinct sizes (the records keep a piece's place in a table of the
    sizes, grown and rehashed past 16 of them): same prices as the reference, which reads each
    piece's bytes from its send."""
    sched, inst = case
    assert_same(cost.price_event(sched, inst, exact_deps=deps), ref.price(sched, inst, "event", exact_deps=deps))


@settings(max_examples=60)
@given(n=st.integers(0, 400), denom=st.sampled_from([1, 3, 97, 1000]), data=st.data())
def test_event_records_keep_each_piece_s_bytes_exactly(n, denom, data):
    """A record's piece bytes ``sizes[piece]`` are, bit for bit, ``(hi - lo) / denom *
    chunk_bytes[chunk]`` computed by numpy for its position; the table holds each distinct value
    once, in order of first use; the rest of the record is its first hop and nothing released."""
    chunk_bytes = np.array([1.0, 3.0, 1e6 / 7, 0.1, 2.0 ** 40])
    chunk = np.array(data.draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)), np.int32)
    lo = np.array(data.draw(st.lists(st.integers(0, denom - 1), min_size=n, max_size=n)), np.int32)
    hi = np.array([data.draw(st.integers(int(x) + 1, denom)) for x in lo], np.int32)
    r = np.array(data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)), np.int32)
    rptr = np.array([0, 2, 3, 7], np.int64)
    rec, sizes = event_layout.event_records(chunk, lo, hi, denom, chunk_bytes, r, rptr)
    expected = (hi - lo) / denom * chunk_bytes[chunk]
    assert sizes[rec["piece"]].view(np.int64).tolist() == expected.view(np.int64).tolist()
    first = {}
    for bits in expected.view(np.int64).tolist():
        first.setdefault(bits, len(first))
    assert sizes.view(np.int64).tolist() == list(first)
    assert rec["at"].tolist() == rptr[r].tolist() and (rec["start"] == 0).all()
    assert (event_layout.release_end(rec["group"]) == 0).all() and (rec["after"] == -1).all()
    assert (rec["ev"] == event_layout.FREE).all() and rec.dtype.itemsize == 24


@st.composite
def combining_cases(draw):
    """Reductions with many arrivals per (node, chunk): a few chunks, sends routed over
    heterogeneous links, so that a group's arrivals often come out of step order (a later
    step's send on a short route arrives before an earlier step's on a long one)."""
    topo = draw(networks())
    n = topo.size
    kind = draw(st.sampled_from(("reduce_scatter", "allreduce", "reduce")))
    inst = make_instance(topo, kind, root=0 if kind == "reduce" else None, message_bytes=M)
    chunks = inst.collective.num_chunks
    sends = []
    for _ in range(draw(st.integers(2, 60))):
        u = draw(st.integers(0, n - 1))
        v = draw(st.sampled_from([w for w in range(n) if w != u]))
        lo, hi = draw(st.sampled_from([(0, 1), (0, Fraction(1, 2)), (Fraction(1, 2), 1)]))
        sends.append((draw(st.integers(0, min(1, chunks - 1))), lo, hi, u, v, draw(st.integers(1, 8))))
    return from_sends(sends, kind, n, chunks, routing="shortest-path"), inst


@settings(max_examples=60)
@given(case=combining_cases(), single=st.booleans())
def test_event_group_prefixes_of_reductions_match_the_reference(case, single):
    """Group prefixes whose arrivals come out of order (waiting in their block's slots until
    the prefix reaches them) and in order: same prices as the reference."""
    sched, inst = case
    with patch.object(cost, "EVENT_SINGLE", single):
        assert_same(cost.price_event(sched, inst, exact_deps=False), ref.price(sched, inst, "event", exact_deps=False))


def test_event_arrival_beyond_the_prefix_waits_and_wins_a_tie():
    """Node 2 receives chunk 0 in step 1 from node 0 over two hops (arriving at 2 + 2 = 4) and
    in step 2 from node 3 over one (0 + 1 + alpha 3 = 4), then sends it to node 0 (alpha 5).
    The step-2 arrival is served first and waits beyond the prefix; when the step-1 arrival
    completes the prefix both are at 4, and the later member, node 3's, is the prefix's latest
    (the reference's rule): the send arrives at 4 + 1 + 5 = 10 with latency 5 + 3 = 8 on its
    critical path (node 0's route would give 5 + 1 + 1 = 7)."""
    link = {"bandwidth": 1.0, "alpha": 1.0}
    topo = from_edges(4, [(0, 1, link), (1, 2, link), (3, 2, dict(link, alpha=3.0)), (2, 0, dict(link, alpha=5.0)),
                          (2, 3, link)])
    inst = make_instance(topo, "reduce_scatter", message_bytes=4.0)
    s = from_sends([(0, 0, 1, 0, 2, 1), (0, 0, 1, 3, 2, 2), (0, 0, 1, 2, 0, 3)], "reduce_scatter", 4, 4,
                   routing="shortest-path")
    c = cost.price_event(s, inst, exact_deps=False)
    assert (c.total_s, c.T_L_s, c.T_B_s) == (10.0, 8.0, 2.0)
    assert_same(c, ref.price(s, inst, "event", exact_deps=False))


@settings(max_examples=40)
@given(g_in=st.lists(st.integers(-1, 5), max_size=40), sizes=st.lists(st.integers(1, 3), min_size=6, max_size=6),
       single=st.booleans())
def test_group_blocks_hold_their_waiting_rows_by_position(g_in, sizes, single):
    """Every group's waiting rows ``(send, p)`` in position order in the group's block (a whole
    block, without member slots, when every reader waits for all the group's arrivals), or its
    readers in position order in the waiting table for a group of one arrival released
    directly; the records of a group's members name its block and their places in it."""
    gstart = np.r_[0, np.cumsum(sizes)].astype(np.int64)
    n = max(len(g_in), int(gstart[-1]))
    g = np.array(g_in + [-1] * (n - len(g_in)), np.int32)  # one entry a position, as the event model's
    p = np.array([sizes[x] if x >= 0 and q % 2 == 0 else 3 * q for q, x in enumerate(g.tolist())], np.int32)
    order = np.arange(gstart[-1], dtype=np.int32)[::-1].copy()  # any permutation of the member positions
    rec, _ = event_layout.event_records(np.zeros(n, np.int32), np.zeros(n, np.int32), np.ones(n, np.int32), 1,
                                        np.ones(1), np.zeros(n, np.int32), np.zeros(2, np.int64))
    event_layout.hold_readers(rec, g, p)
    blocks, block_ints, at, rows = event_layout.group_blocks(rec, order, gstart, single)
    waiting, alone = event_layout.waiting_rows(rec, at, block_ints, rows)
    assert np.unpackbits(alone, bitorder="little")[:n].tolist() == (g < 0).tolist()
    assert (rec["after"] == -1).all() and (rec["ev"] == event_layout.FREE).all()  # as the records were made
    for k, size in enumerate(sizes):
        expected = [[q, int(p[q])] for q in range(len(g_in)) if g_in[q] == k]
        members = order[gstart[k]:gstart[k + 1]]
        if single and size == 1:
            x = rec[members[0]]
            assert waiting[x["start"]:event_layout.release_end(x["group"])].tolist() == [q for q, _ in expected]
            continue
        assert [rec[q]["start"] for q in members] == list(range(size))
        u = event_layout.GRANULE * int(rec[members[0]]["group"])
        assert {int(rec[q]["group"]) for q in members} == {u // event_layout.GRANULE}
        rows = block_ints[2 * (u + event_layout.BLOCK_HEADER):2 * (u + block_ints[2 * u + event_layout.BLOCK_SLOTS])]
        assert rows.reshape(-1, 2).tolist() == expected
        assert block_ints[2 * u + event_layout.BLOCK_NEXT] == event_layout.BLOCK_HEADER  # the first row to release
        if all(need == size for _, need in expected):  # a whole block (every reader waits for all): no member slots
            assert block_ints[2 * u + event_layout.BLOCK_MEMBERS] == ~size
            assert block_ints[2 * u + event_layout.BLOCK_FRONTIER] == 0  # no arrival counted
            assert event_layout._block_words(len(expected), ~size) == -(-(4 + len(expected)) // 4) * 4
            continue
        assert block_ints[2 * u + event_layout.BLOCK_MEMBERS] == size
        slots = u + block_ints[2 * u + event_layout.BLOCK_SLOTS]  # member times, then their int32 hops, all empty
        hops = [event_layout.member_hop(slots, size, x) for x in range(size)]
        end = u + event_layout._block_words(len(expected), size)  # where the next block may start
        assert len(set(hops)) == size and 2 * (slots + size) <= min(hops) and max(hops) < 2 * end
        assert block_ints[hops].tolist() == [-1] * size


@given(positions=st.lists(st.integers(0, (1 << 31) - 2), unique=True, max_size=3000),
       preds=st.randoms(use_true_random=False), presorted=st.booleans())
def test_a_time_levels_run_is_sorted_by_position(positions, preds, presorted):
    """The radix sort of a level's entries (position in the high 32 bits, predecessor + 1 in
    the low) against Python's sort: few entries, spans of one to four 8-bit digits, sorted input."""
    if presorted:
        positions = sorted(positions)
    words = [(q << 32) | preds.randrange(1 << 31) for q in positions]
    run = np.array(words + [7], np.int64)  # an entry past the run stays
    counts = np.empty(event_queue.DIGITS * event_queue.RADIX, np.int64)
    event_queue._sort_run(run, len(words), np.empty(len(run), np.int64), counts)
    assert run.tolist() == sorted(words) + [7]


@given(case=priced_cases())
def test_prefix_fallback_beyond_the_pair_budget_matches_the_reference(case):
    """With more dependency pairs than the budget both fall back to group prefixes."""
    sched, inst = case
    with patch.object(dependencies, "pair_budget", lambda n: 3), patch.object(ref, "pair_budget", lambda n: 3):
        for model in ("ten", "event"):
            assert_same(cost_models.price(sched, inst, model), ref.price(sched, inst, model))


def test_prefix_fallback_counts_every_overlapping_piece_of_a_group_of_repeated_pieces():
    """The schedule hypothesis found (six nodes, allgather, only chunk 0, halves: ``denom`` 2),
    sends by index: 0 [0, 1/2) 2->0 step 2; 1 0->1, 2-4 1->0, 5 0->1, 6 1->0 step 1; 7 0->1
    and 8 1->0 step 2; 9 0->1 step 1 (all whole chunks); 10 [1/2, 1) 3->2 step 1. On a
    directed ring 0 -> 1 -> ... -> 5 -> 0 with links 1 -> 0 and 2 -> 0 added, every link
    alike: a chunk or a half takes one timestep ``f = alpha + (M / 6) / b`` on any link
    (``ceil`` of at most one), and send 10 is routed 3 -> 4 -> 5 -> 0 -> 1 -> 2, the only path.

    Candidates (``docs/cost-models.md``, ``event``): only sends 0 and 8 read a group (node 0
    holds chunk 0; nothing reaches nodes 1 and 3 before step 1). Send 0 reads node 2's group,
    {send 10: [1/2, 1)}, no piece overlapping [0, 1/2): 0 candidates. Send 8 reads node 1's,
    sends 1, 5, 9 (step 1) and 7 (step 2), four whole chunks: sorted by start they also ascend
    by end, so the group is searched by bisection and offers its pieces overlapping send 8's,
    all four, the step-2 one included: 4 candidates, 3 pairs (8 with 1, 5, 9). A budget of 3
    falls back to group prefixes; 4 keeps the exact pairs. (The reference counted only
    pairwise disjoint groups as bisected, so it counted 3 here and kept the pairs: 5
    timesteps against the library's 6.)

    TEN dispatch, step 1 in index order: 0 -> 1 carries 1, 5, 9 at timesteps 1, 2, 3; 1 -> 0
    carries 2, 3, 4, 6 at 1-4; send 10 takes 3->4 at 1, 4->5 at 2, 5->0 at 3, 0->1 at 4 (the
    first free), 1->2 at 5: it arrives at the end of 5. Step 2: send 0 by the prefix waits for
    send 10 (ready 5), goes at 6 and arrives at 6; by the pairs it waits for nothing and goes
    at 1. Send 7 waits for nothing: 0 -> 1 is free first at 5. Send 8 waits for 1, 5, 9
    (arrived by 3) and 1 -> 0 is free first at 5. Last arrival: 6 timesteps by the prefix, 5
    by the pairs; ``total = timesteps * f`` and ``T_L = timesteps * alpha``.
    """
    rows = [((0, 1), 2, 0, 2), ((0, 2), 0, 1, 1), ((0, 2), 1, 0, 1), ((0, 2), 1, 0, 1), ((0, 2), 1, 0, 1),
            ((0, 2), 0, 1, 1), ((0, 2), 1, 0, 1), ((0, 2), 0, 1, 2), ((0, 2), 1, 0, 2), ((0, 2), 0, 1, 1),
            ((1, 2), 3, 2, 1)]
    sched = from_sends([(0, Fraction(lo, 2), Fraction(hi, 2), u, v, t) for (lo, hi), u, v, t in rows],
                       "allgather", 6, 6, routing="shortest-path")
    arcs = [(u, (u + 1) % 6) for u in range(6)] + [(1, 0), (2, 0)]
    inst = make_instance(from_edges(6, arcs, bandwidth=BW, alpha=ALPHA, name="ring+2"), "allgather",
                         message_bytes=M)
    f = ALPHA + M / 6 / BW
    view = dependencies.step_view(sched)
    deps = dependencies.dependencies(view, inst, want_pairs=False, schedule=sched)
    assert dependencies.dependency_pairs_of(view, deps, budget=3) is None
    pairs = dependencies.dependency_pairs_of(view, deps, budget=4)  # in step-view positions
    assert [view.original(a).tolist() for a in pairs] == [[8, 8, 8], [1, 5, 9]]
    for budget, timesteps in ((3, 6), (4, 5)):
        with patch.object(dependencies, "pair_budget", lambda n: budget), \
                patch.object(ref, "pair_budget", lambda n: budget):
            for fast_or_slow in (cost_models.price, ref.price):
                c = fast_or_slow(sched, inst, "ten")
                assert c.steps == timesteps, (budget, fast_or_slow)
                assert c.total_s == pytest.approx(timesteps * f, rel=1e-12)
                assert c.T_L_s == pytest.approx(timesteps * ALPHA, rel=1e-12)
            assert_same(cost_models.price(sched, inst, "event"), ref.price(sched, inst, "event"))


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
    assert page_table._ctz(np.uint64(x)) == (x & -x).bit_length() - 1


@st.composite
def switched_cases(draw):
    """Random whole-chunk sends over the links of a random network with a switch attached to
    every node both ways: sends out of NPUs (chained in a declared link order) and out of the
    switch (never chained), an allgather or a reduce-scatter."""
    topo = draw(networks(max_nodes=5))
    n = topo.size
    rnd = draw(st.randoms(use_true_random=False))
    edges = [(u, v, {"bandwidth": d["bandwidth"], "alpha": d["alpha"]}) for u, v, d in topo.graph.edges(data=True)]
    edges += [(u, n, {"bandwidth": BW * rnd.choice([1, 2]), "alpha": ALPHA}) for u in range(n)]
    edges += [(n, u, {"bandwidth": BW * rnd.choice([1, 2]), "alpha": ALPHA}) for u in range(n)]
    switched = from_edges(n + 1, edges, switches=[n])
    kind = draw(st.sampled_from(("allgather", "reduce_scatter")))
    inst = make_instance(switched, kind, message_bytes=M)
    links = sorted(set(switched.graph.edges()))
    sends = []
    for _ in range(draw(st.integers(1, 30))):
        u, v = draw(st.sampled_from(links))
        sends.append((draw(st.integers(0, n - 1)), 0, 1, u, v, draw(st.integers(1, 6))))
    return from_sends(sends, kind, n + 1, inst.collective.num_chunks), inst


@settings(max_examples=80, deadline=None)
@given(case=st.one_of(priced_cases(), combining_cases(), switched_cases()), exact=st.sampled_from([None, False]))
def test_event_with_a_declared_link_order_matches_the_reference(case, exact):
    """A declared program order on the links (``link_order = "program"``): a send out of an
    NPU taken before the send before it on its link has started is held in its record and
    queued at that start; the reference holds it with its ready time and queues it at the later
    of the two. Same prices, exact pairs and group prefixes, through switches too."""
    sched, inst = case
    declared = replace(sched, link_order="program")
    try:
        slow = ref.price(declared, inst, "event", exact_deps=exact)
    except InputError as e:
        with pytest.raises(InputError, match="circular"):
            cost.price_event(declared, inst, exact_deps=exact)
        assert "circular" in str(e)
        return
    assert_same(cost.price_event(declared, inst, exact_deps=exact), slow)
