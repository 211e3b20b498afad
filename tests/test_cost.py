"""Cost models (tens/cost.py): lecture closed forms, hand-computed cases, invariants.

The lecture's schedules (Thakur et al., IJHPCA 2005) and random valid schedules come from
``tests/builders.py``.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

from unittest.mock import patch

import pytest
from hypothesis import given, strategies as st

from collsynth import InputError
from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.instances.topology import from_edges
from collsynth.tens import bounds, cost, cost_models
from collsynth.tens.schedule import from_sends, relabel, reverse
from collsynth.tens.verify import verify
from builders import (ALPHA, BW, M, binomial_broadcast, greedy_allgather, instance_on, recursive_doubling_allgather,
                      ring_allgather, topologies)

def _instance(topo, kind="allgather", **kw):
    return make_instance(topo, kind, message_bytes=kw.pop("message_bytes", M), **kw)


def _scaled(topo, factor):
    edges = [(u, v, {"bandwidth": d["bandwidth"] * factor, "alpha": d["alpha"]})
             for u, v, d in topo.graph.edges(data=True)]
    return from_edges(topo.size, edges, name=topo.name)


# ---- closed forms -----------------------------------------------------------------------------

@pytest.mark.parametrize("n", [3, 5, 8])
def test_ring_allgather_closed_form(n):
    inst = _instance(build("ring", {"nodes": n, "bidirectional": False}, bandwidth=BW, alpha=ALPHA))
    s = ring_allgather(n)
    assert verify(s, inst) is None
    expect = (n - 1) * (ALPHA + M / (n * BW))
    for model in cost_models.names():  # the ring is tight: every model gives the closed form
        c = cost_models.price(s, inst, model)
        assert c.total_s == pytest.approx(expect, rel=1e-12), model
        assert c.T_L_s == pytest.approx((n - 1) * ALPHA, rel=1e-12), model
        assert c.T_B_s == pytest.approx((n - 1) * M / (n * BW), rel=1e-9), model
    sync = cost.price_sync(s, inst)
    assert sync.extra["T_B_chunks"] == Fraction(n - 1)
    assert sync.steps == n - 1
    assert cost_models.price(s, inst, "ten").extra["timesteps"] == n - 1


@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_recursive_doubling_allgather_on_complete_graph(n):
    inst = _instance(build("complete", {"nodes": n}, bandwidth=BW, alpha=ALPHA))
    s = recursive_doubling_allgather(n)
    assert verify(s, inst) is None
    c = cost.price_sync(s, inst)
    k = int(math.log2(n))
    assert c.T_L_s == pytest.approx(k * ALPHA, rel=1e-12)
    assert c.T_B_s == pytest.approx((n - 1) / n * M / BW, rel=1e-12)
    assert c.total_s == pytest.approx(k * ALPHA + (n - 1) / n * M / BW, rel=1e-12)
    assert c.extra["T_B_chunks"] == Fraction(n - 1)  # sum_s 2^(s-1)
    assert [round(b * BW * n / M) for _, _, b in c.extra["per_step"]] == [1 << s for s in range(k)]


@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_binomial_broadcast_closed_form(n):
    inst = _instance(build("complete", {"nodes": n}, bandwidth=BW, alpha=ALPHA), "broadcast", root=0)
    s = binomial_broadcast(n)
    assert verify(s, inst) is None
    c = cost.price_sync(s, inst)
    k = int(math.log2(n))
    assert c.total_s == pytest.approx(k * (ALPHA + M / BW), rel=1e-12)
    assert c.T_L_s == pytest.approx(k * ALPHA, rel=1e-12)
    # the root holds the data from the start, so the event model overlaps its sends:
    # the last node (n-1) is reached along the chain 0 -> n/2 -> ... after k hops at most
    ev = cost_models.price(s, inst, "event")
    assert ev.total_s <= c.total_s * (1 + 1e-12)
    assert ev.total_s >= ALPHA + M / BW - 1e-15


def test_routed_recursive_doubling_on_ring_shows_congestion():
    """On a bidirectional ring the step-s exchange crosses d = 2^(s-1) links; for d < n/2 the
    d consecutive senders in one direction all cross the same link: load d^2 chunks, d times
    the complete graph's d chunks."""
    n = 16
    s = recursive_doubling_allgather(n, routing="shortest-path")
    ring = _instance(build("ring", {"nodes": n}, bandwidth=BW, alpha=ALPHA))
    full = _instance(build("complete", {"nodes": n}, bandwidth=BW, alpha=ALPHA))
    assert verify(s, ring) is None
    with pytest.raises(InputError):  # the same sends with routing "links" are off the ring's links
        cost.price_sync(recursive_doubling_allgather(n), ring)
    c_ring, c_full = cost.price_sync(s, ring), cost.price_sync(s, full)
    chunk = M / n
    for (t, lat_r, bw_r), (_, lat_f, bw_f) in zip(c_ring.extra["per_step"], c_full.extra["per_step"]):
        d = 1 << (t - 1)
        assert lat_r == pytest.approx(d * ALPHA, rel=1e-12)  # per-hop latency over d hops
        assert lat_f == pytest.approx(ALPHA, rel=1e-12)
        assert bw_f == pytest.approx(d * chunk / BW, rel=1e-12)
        if d < n // 2:
            assert bw_r == pytest.approx(d * d * chunk / BW, rel=1e-12)
            assert bw_r / bw_f == pytest.approx(d, rel=1e-12)
    assert c_ring.T_B_s > c_full.T_B_s
    # cross-check every step's load against a plain-Python routing of the same sends
    loads: dict = {}
    for snd in s.sends():
        path = ring.topology.shortest_path(snd.src, snd.dst)
        for a, b in zip(path, path[1:]):
            loads[(snd.step, a, b)] = loads.get((snd.step, a, b), 0) + 1
    ref = sum(max(v for (t, _, _), v in loads.items() if t == step) for step in range(1, 5)) * chunk / BW
    assert c_ring.T_B_s == pytest.approx(ref, rel=1e-12)
    # routed sends in the event model: store-and-forward over the same routes
    ev = cost_models.price(s, ring, "event")
    assert ev.total_s >= bounds.instance_bounds(ring).event.value


# ---- hand-computed cases ---------------------------------------------------------------------

def test_ten_heterogeneous_link_spans_two_timesteps():
    """Ring 0->1->2->0 whose link 2->0 has half the bandwidth: it takes 2 timesteps."""
    cb = 1000.0
    edges = [(0, 1, {"bandwidth": 1000.0, "alpha": 0.0}), (1, 2, {"bandwidth": 1000.0, "alpha": 0.0}),
             (2, 0, {"bandwidth": 500.0, "alpha": 0.0})]
    inst = _instance(from_edges(3, edges), message_bytes=3 * cb)
    s = ring_allgather(3)
    assert verify(s, inst) is None
    c = cost_models.price(s, inst, "ten")
    # step 1: 2->0 occupies timesteps 1-2; step 2: 0->1 (chunk 2) waits for it, starts at 3;
    # 2->1... chunk 1 over 2->0 starts at 3 (link busy until 2), arrives at the end of 4
    assert c.extra["timestep_s"] == pytest.approx(1.0)
    assert c.extra["timesteps"] == 4
    assert c.total_s == pytest.approx(4.0)
    # a smaller timestep discretises finer: every link cost is a multiple of 0.5 s
    assert cost_models.price(s, inst, "ten", timestep=0.5).total_s == pytest.approx(4.0)


def test_ten_parallel_links_carry_one_chunk_each_per_timestep():
    edges = [(0, 1, {"bandwidth": 10.0, "alpha": 0.0})] * 2 + [(1, 0, {"bandwidth": 10.0, "alpha": 0.0})]
    inst = _instance(from_edges(2, edges), "alltoall", chunks_per_node=3, message_bytes=60.0)
    # 0 sends its 3 chunks for node 1 in one step: two parallel links -> two timesteps
    chunk_ids = [(0 * 2 + 1) * 3 + j for j in range(3)]
    back = [(1 * 2 + 0) * 3 + j for j in range(3)]
    s = from_sends([(c, 0, 1, 0, 1, 1) for c in chunk_ids] + [(c, 0, 1, 1, 0, t + 1) for t, c in enumerate(back)],
                   "alltoall", 2, 12)
    assert verify(s, inst) is None
    c = cost_models.price(s, inst, "ten")
    assert c.extra["timesteps"] == 3  # the single 1->0 link needs 3
    sync = cost.price_sync(s, inst)
    # step 1 moves 3 chunks of 10 B over the 20 B/s pair (1.5 s) and 1 over 1->0 (1 s)
    assert sync.extra["per_step"][0][2] == pytest.approx(1.5)
    assert sync.extra["T_B_chunks"] == Fraction(3, 2) + 1 + 1


def test_event_store_and_forward_and_fifo():
    """Two B-byte messages 0 -> 2 over the line 0-1-2: the second queues behind the first on
    0->1 and again on 1->2: arrival 3B/b + 2a; the critical path carries 2 latencies."""
    a, b, B = 1.0, 10.0, 20.0
    topo = build("mesh", {"dims": [3]}, bandwidth=b, alpha=a)
    inst = _instance(topo, "alltoall", chunks_per_node=2, message_bytes=2 * B * 3)
    ids = [(0 * 3 + 2) * 2 + j for j in range(2)]
    s = from_sends([(c, 0, 1, 0, 2, 1) for c in ids], "alltoall", 3, 18, routing="shortest-path")
    c = cost_models.price(s, inst, "event")
    assert c.total_s == pytest.approx(3 * B / b + 2 * a)
    assert c.T_L_s == pytest.approx(2 * a)
    assert c.T_B_s == pytest.approx(3 * B / b)
    sync = cost.price_sync(s, inst)  # one step: 2B on each link, 2 hops of latency
    assert sync.T_B_s == pytest.approx(2 * B / b)
    assert sync.T_L_s == pytest.approx(2 * a)


def test_event_waits_for_data_not_for_steps():
    """0->1 chunk 0 (step 1), 1->2 chunk 1 (step 2, held by 1 from the start), 1->2 chunk 0
    (step 3): the event model starts chunk 1 at once, so only the chain 0->1->2 of chunk 0
    counts (4 s); the sync model sums three steps (6 s)."""
    topo = build("ring", {"nodes": 3, "bidirectional": False}, bandwidth=1.0, alpha=1.0)
    inst = _instance(topo, message_bytes=3.0)
    s = from_sends([(0, 0, 1, 0, 1, 1), (1, 0, 1, 1, 2, 2), (0, 0, 1, 1, 2, 3)], "allgather", 3, 3)
    assert cost_models.price(s, inst, "event").total_s == pytest.approx(4.0)
    assert cost.price_sync(s, inst).total_s == pytest.approx(6.0)
    assert cost_models.price(s, inst, "ten").extra["timesteps"] == 2  # chunk 1 goes in timestep 1
    empty_step = from_sends([(0, 0, 1, 0, 1, 1), (0, 0, 1, 1, 2, 3)], "allgather", 3, 3)
    assert cost.price_sync(empty_step, inst).total_s == pytest.approx(4.0)  # step 2 is free


def test_fractional_pieces_are_priced_by_size():
    topo = build("ring", {"nodes": 3}, bandwidth=BW, alpha=ALPHA)
    inst = _instance(topo, "broadcast", root=0)
    s = from_sends([(0, 0, Fraction(1, 2), 0, 1, 1), (0, Fraction(1, 2), 1, 0, 2, 1),
                    (0, 0, Fraction(1, 2), 1, 2, 2), (0, Fraction(1, 2), 1, 2, 1, 2)], "broadcast", 3, 1)
    assert verify(s, inst) is None
    c = cost.price_sync(s, inst)
    assert c.extra["T_B_chunks"] == 1
    assert c.total_s == pytest.approx(2 * ALPHA + M / BW)
    ev = cost_models.price(s, inst, "event")
    assert ev.total_s == pytest.approx(2 * ALPHA + M / BW)
    ten = cost_models.price(s, inst, "ten")  # half chunks need ceil((a + M/2b) / (a + M/b)) = 1 timestep
    assert ten.extra["timesteps"] == 2


def test_unknown_model_and_bad_sends():
    inst = _instance(build("ring", {"nodes": 4}, bandwidth=BW, alpha=ALPHA))
    with pytest.raises(InputError, match="model"):
        cost_models.price(ring_allgather(4), inst, "magic")
    with pytest.raises(InputError, match="not a live link"):
        cost_models.price(from_sends([(0, 0, 1, 0, 2, 1)], "allgather", 4, 4), inst, "sync")
    assert cost_models.price(from_sends([], "allgather", 4, 4), inst, "event").total_s == 0.0


# ---- properties -----------------------------------------------------------------------------

@given(topologies(), st.randoms(use_true_random=False))
def test_valid_schedules_respect_lower_bounds(topo, rnd):
    inst = _instance(topo)
    s = greedy_allgather(topo, rnd)
    assert verify(s, inst) is None
    lb = bounds.instance_bounds(inst)
    sync = cost.price_sync(s, inst)
    ev = cost_models.price(s, inst, "event")
    tol = 1 + 1e-9
    assert sync.T_B_s * tol >= lb.part("sync_bandwidth").value
    assert sync.T_L_s * tol >= lb.part("sync_latency").value
    assert sync.total_s * tol >= lb.sync.value
    assert ev.total_s * tol >= lb.event.value
    assert cost_models.price(s, inst, "ten").total_s * tol >= lb.ten.value
    assert s.num_steps >= lb.steps.value
    assert sync.total_s == pytest.approx(sync.T_L_s + sync.T_B_s)
    assert ev.total_s == pytest.approx(ev.T_L_s + ev.T_B_s)
    assert ev.T_L_s >= 0 and ev.T_B_s >= -1e-15


@given(topologies(), st.randoms(use_true_random=False), st.randoms(use_true_random=False))
def test_relabelling_nodes_keeps_every_cost(topo, rnd, prnd):
    inst = _instance(topo)
    s = greedy_allgather(topo, rnd)
    perm = list(range(topo.size))
    prnd.shuffle(perm)
    edges = [(perm[u], perm[v], d) for u, v, d in topo.graph.edges(data=True)]
    inst_p = _instance(from_edges(topo.size, edges))
    s_p = relabel(s, perm)
    assert verify(s_p, inst_p) is None
    for model in cost_models.names():
        a, b = cost_models.price(s, inst, model), cost_models.price(s_p, inst_p, model)
        assert (a.steps, a.total_s, a.T_L_s) == (b.steps, pytest.approx(b.total_s), pytest.approx(b.T_L_s))
    assert cost.price_sync(s, inst).extra["T_B_chunks"] == cost.price_sync(s_p, inst_p).extra["T_B_chunks"]
    la, lb = bounds.instance_bounds(inst), bounds.instance_bounds(inst_p)
    assert la.steps.value == lb.steps.value and la.sync.value == pytest.approx(lb.sync.value)
    assert la.timesteps.value == lb.timesteps.value
    # the event bound's cut search credits the inner distance only at the sets it visits, in label
    # order, so its value may differ between labellings (the strict xfail below); each stays valid
    ev = cost_models.price(s, inst, "event").total_s
    assert max(la.event.value, lb.event.value) <= ev * (1 + 1e-9)


@pytest.mark.xfail(strict=True, reason="known: the event cut search credits the inner distance only at the "
                                       "sets its label-ordered path visits")
def test_event_cut_with_inner_distance_does_not_depend_on_node_labels():
    """The 4-node network below (allgather of M, shards of M/4): {0, 3} is entered only by
    2 -> 3 (50 GB/s, 1.5 us), and the shards of 1 and 2 must cross it: 1.5 us + (M/2) / 50 GB/s;
    node 0 is entered only by 3 -> 0, so the last shard to cross still goes 3 -> 0 (1.5 us).
    The search credits that way inside the set only at the sets its path visits, which
    follows the labels: swapping nodes 0 and 1 gives 1 us less."""
    fast, slow = {"bandwidth": 1e11}, {"bandwidth": 5e10}
    edges = [(0, 1, {**slow, "alpha": 1.5e-6}), (1, 2, {**fast, "alpha": 0.5e-6}), (2, 3, {**slow, "alpha": 1.5e-6}),
             (3, 0, {**fast, "alpha": 1.5e-6}), (0, 3, {**slow, "alpha": 0.5e-6}), (2, 1, {**slow, "alpha": 0.5e-6}),
             (2, 1, {**fast, "alpha": 1.5e-6})]
    expect = 1.5e-6 + (M / 2) / 5e10 + 1.5e-6
    for perm in ([0, 1, 2, 3], [1, 0, 2, 3]):
        topo = from_edges(4, [(perm[u], perm[v], d) for u, v, d in edges])
        inst = _instance(topo)
        assert bounds.instance_bounds(inst).event.value == pytest.approx(expect, rel=1e-12), perm
        s = greedy_allgather(topo, random.Random(0))
        assert verify(s, inst) is None and cost_models.price(s, inst, "event").total_s >= expect * (1 - 1e-12)


@given(topologies(), st.randoms(use_true_random=False))
def test_doubling_bandwidth_halves_sync_T_B_and_never_slows_events(topo, rnd):
    inst = _instance(topo)
    fast = _instance(_scaled(topo, 2.0))
    s = greedy_allgather(topo, rnd)
    a, b = cost.price_sync(s, inst), cost.price_sync(s, fast)
    assert b.T_B_s == pytest.approx(a.T_B_s / 2, rel=1e-12)
    assert b.T_L_s == pytest.approx(a.T_L_s, rel=1e-12)
    assert b.extra["T_B_chunks"] == a.extra["T_B_chunks"]
    assert cost_models.price(s, fast, "event").total_s <= cost_models.price(s, inst, "event").total_s * (1 + 1e-12)
    bw_fast = bounds.instance_bounds(fast).part("sync_bandwidth").value
    assert bw_fast == pytest.approx(bounds.instance_bounds(inst).part("sync_bandwidth").value / 2)
    # twice the bandwidth and half the latency: every model's time halves exactly
    edges = [(u, v, {"bandwidth": d["bandwidth"] * 2, "alpha": d["alpha"] / 2}) for u, v, d in topo.graph.edges(data=True)]
    twice = _instance(from_edges(topo.size, edges))
    for model in cost_models.names():
        x, y = cost_models.price(s, inst, model), cost_models.price(s, twice, model)
        assert y.total_s == pytest.approx(x.total_s / 2, rel=1e-9), model
        assert y.T_L_s == pytest.approx(x.T_L_s / 2, rel=1e-9), model


def _tight_chain(s) -> bool:
    """True if some step-T send has a chain of sends back to step 1, each delivering its chunk
    to the next one's source exactly one step earlier (forcing ASAP timesteps = steps)."""
    at = {}
    for snd in s.sends():
        at.setdefault((snd.dst, snd.chunk), []).append(snd.step)
    reach = {}
    for snd in sorted(s.sends(), key=lambda x: x.step):
        ok = snd.step == 1 or reach.get((snd.src, snd.chunk, snd.step - 1), False)
        if ok:
            reach[(snd.dst, snd.chunk, snd.step)] = True
    return any(k[2] == s.num_steps for k in reach)


@given(st.integers(3, 7), st.sampled_from(["ring", "hypercube", "torus"]), st.randoms(use_true_random=False))
def test_ten_model_is_steps_times_timestep_for_ten_feasible_schedules(n, kind, rnd):
    params = {"ring": {"nodes": n}, "hypercube": {"dim": min(n, 4) - 1}, "torus": {"dims": [3, n]}}[kind]
    topo = build(kind, params, bandwidth=BW, alpha=ALPHA)
    inst = _instance(topo)
    s = greedy_allgather(topo, rnd)  # at most one chunk per link per step: TEN-feasible
    c = cost_models.price(s, inst, "ten")
    f = ALPHA + inst.collective.chunk_bytes / BW
    assert c.extra["timestep_s"] == pytest.approx(f)
    assert c.extra["timesteps"] <= s.num_steps
    if _tight_chain(s):
        assert c.total_s == pytest.approx(s.num_steps * f)
        assert c.extra["timesteps"] == s.num_steps
    assert c.extra["timesteps"] >= bounds.instance_bounds(inst).timesteps.value


@given(topologies(), st.randoms(use_true_random=False))
def test_reversal_mirrors_per_step_loads(topo, rnd):
    inst = _instance(topo)
    s = greedy_allgather(topo, rnd)
    r = reverse(s)
    inst_r = _instance(topo.transpose(), "reduce_scatter")
    assert verify(r, inst_r) is None
    a, b = cost.price_sync(s, inst), cost.price_sync(r, inst_r)
    T = s.num_steps
    fwd = {t: (lat, bw) for t, lat, bw in a.extra["per_step"]}
    back = {T + 1 - t: (lat, bw) for t, lat, bw in b.extra["per_step"]}
    assert fwd.keys() == back.keys()
    for t in fwd:
        assert fwd[t] == pytest.approx(back[t], rel=1e-12)
    assert a.extra["T_B_chunks"] == b.extra["T_B_chunks"]
    lb_a, lb_b = bounds.instance_bounds(inst), bounds.instance_bounds(inst_r)
    assert lb_a.steps.value == lb_b.steps.value and lb_a.sync.value == pytest.approx(lb_b.sync.value)


def test_concurrent_collectives_share_links():
    """Two allgathers on one ring: their sends in the same step add up on each link."""
    from collsynth.instances.collective import make
    from collsynth.instances.instance import Instance
    from collsynth.tens.schedule import merge

    n = 4
    topo = build("ring", {"nodes": n, "bidirectional": False}, bandwidth=BW, alpha=ALPHA)
    colls = (make("allgather", range(n), n, message_bytes=M), make("allgather", range(n), n, message_bytes=2 * M))
    inst = Instance("two", topo, colls)
    s = merge([ring_allgather(n), ring_allgather(n)], inst.chunk_offsets)
    assert verify(s, inst) is None
    c = cost.price_sync(s, inst)
    assert c.T_B_s == pytest.approx((n - 1) * 3 * M / n / BW)
    assert c.extra["T_B_chunks"] is None  # chunk sizes differ
    ev = cost_models.price(s, inst, "event")
    lb = bounds.instance_bounds(inst)
    assert ev.total_s >= lb.event.value
    assert lb.part("sync_bandwidth").value == pytest.approx((n - 1) / n * 3 * M / BW)


@given(topologies(), st.randoms(use_true_random=False))
def test_dependency_modes_agree_on_whole_chunks(topo, rnd):
    """Explicit dependency pairs and per-(node, chunk) prefixes give the same times for
    whole-chunk schedules, copying (allgather) and combining (reduce_scatter) alike."""
    s = greedy_allgather(topo, rnd, per_link=2)
    for sched, inst in ((s, _instance(topo)), (reverse(s), _instance(topo.transpose(), "reduce_scatter"))):
        for model in ("ten", "event"):
            a = cost_models.price(sched, inst, model, exact_deps=True)
            b = cost_models.price(sched, inst, model, exact_deps=False)
            assert a.total_s == pytest.approx(b.total_s, rel=1e-12), model


def test_prefix_dependencies_are_conservative_for_pieces():
    """Halves of one chunk reach node 1 in steps 1 and 2; node 1 forwards the first half in
    step 3. Exact pairs wait for the first half only; the prefix waits for both."""
    topo = build("ring", {"nodes": 3}, bandwidth=1.0, alpha=0.0)
    inst = _instance(topo, "broadcast", root=0, message_bytes=2.0)
    s = from_sends([(0, 0, Fraction(1, 2), 0, 1, 1), (0, Fraction(1, 2), 1, 0, 1, 2),
                    (0, 0, Fraction(1, 2), 1, 2, 3), (0, Fraction(1, 2), 1, 0, 2, 1)], "broadcast", 3, 1)
    assert verify(s, inst) is None
    exact = cost_models.price(s, inst, "event", exact_deps=True)
    prefix = cost_models.price(s, inst, "event", exact_deps=False)
    assert exact.total_s == pytest.approx(2.0)  # 0->1 half (1 s), then 1->2 half (1 s)
    assert prefix.total_s == pytest.approx(3.0)  # waits for the second half, which queues behind the first
    assert prefix.total_s >= exact.total_s


def test_the_event_model_lists_dependency_pairs_only_for_pieces():
    """Whole chunks: the group prefixes are exact, so the event model lists no pair (the pairs
    part is never computed); halved chunks: it lists them."""
    inst = instance_on("ring", {"nodes": 4})
    whole = ring_allgather(4)
    halves = from_sends([(c, lo, hi, u, v, t) for c, u, v, t in zip(whole.chunk, whole.src, whole.dst, whole.step)
                         for lo, hi in ((0, Fraction(1, 2)), (Fraction(1, 2), 1))], "allgather", 4, 4)
    for sched, listed in ((whole, False), (halves, True)):
        assert verify(sched, inst) is None
        plan = cost.PricingPlan(sched, inst)
        cost.price_event(sched, inst, plan=plan)
        assert plan.holds("pairs") is listed


def test_a_deep_pipeline_gets_exact_dependencies_beyond_the_old_candidate_budget():
    """A broadcast down the one-way line 0 -> 1 -> 2 -> 3 in ``P`` pipelined pieces: every
    node receives each piece once, so its pieces are disjoint and each forward needs exactly
    the arrival of its own piece. Prefix candidates number about ``P^2`` (more than a budget of
    1000 at ``P = 60``); the disjoint pieces keep the exact pairs at one per forward, and the
    event time is the pipeline's ``P + 2`` piece times (1 byte at 1 B/s each)."""
    from collsynth.tens import dependencies

    P = 60
    inst = instance_on("ring", {"nodes": 4, "bidirectional": False}, "broadcast", bandwidth=1.0, alpha=0.0,
                       root=0, message_bytes=float(P))
    s = from_sends([(0, Fraction(q, P), Fraction(q + 1, P), u, u + 1, q + u + 1) for q in range(P) for u in range(3)],
                   "broadcast", 4, 1)
    assert verify(s, inst) is None
    with patch.object(dependencies, "PAIR_BUDGET", 1000):
        assert dependencies.pair_budget(len(s)) < 3 * P * (P - 1) // 2
        i, j = cost.dependency_pairs(s, inst)
        assert len(i) == 2 * P  # the forwards of nodes 1 and 2, one pair each
        assert all(s.lo[a] == s.lo[b] and s.dst[b] == s.src[a] for a, b in zip(i.tolist(), j.tolist()))
        priced = cost_models.price(s, inst, "event")
    assert priced.total_s == pytest.approx(P + 2.0)
