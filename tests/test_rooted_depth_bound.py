"""The rooted reduce's depth bound of the synchronous model (``collsynth.tens.bounds.rooted_depth``):
what the root completes in a step left the GPUs ``d - 1`` steps before, and every step pays alpha.

- its value by hand on two GPUs behind a switch and on a line of three GPUs, where a hand-built
  pipelined reduce (verified, priced) meets it: the bound is their optimum;
- its value by hand on a triangle, where one arrival or several matters: one step is the optimum
  (two direct sends), two steps' program value met by a hand-built schedule;
- the first program's value by a closed form on TACOS's ring x complete x switch 4x4x2 (1 GB), the
  refined one above it;
- at most the ``sync`` price of the TEN ILP's optimum on tiny direct graphs (hypothesis);
- at most the ``sync`` price of every producer's verified schedule on random small switched
  systems (hypothesis over root, latency, bandwidths and size; tree packing at several depths).
"""

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.instances.topology import from_edges
from collsynth.solvers import pipeline
from collsynth.solvers.pipeline import Options
from collsynth.tens import cost_models, verify
from collsynth.tens.bounds import instance_bounds
from collsynth.tens.bounds.ramp import least_over_steps
from collsynth.tens.bounds.rooted_depth import feeders, in_link_profiles, rooted_lp, split_lp
from collsynth.tens.schedule import from_arrays, reverse

TOL = 1 + 1e-9


def pipelined_broadcast(path: list[int], nodes: int, pieces: int):
    """The root ``path[0]``'s buffer in ``pieces`` equal pieces down ``path``: piece ``q``
    crosses hop ``h`` in step ``q + h + 1``."""
    rows = [(q, q + h + 1, a, b) for q in range(pieces) for h, (a, b) in enumerate(zip(path[:-1], path[1:]))]
    return from_arrays("broadcast", nodes, 1, chunk=[0] * len(rows), lo=[r[0] for r in rows],
                       hi=[r[0] + 1 for r in rows], denom=pieces, step=[r[1] for r in rows],
                       src=[r[2] for r in rows], dst=[r[3] for r in rows])


def link(u, v, alpha=1 / 16):
    return [(u, v, {"bandwidth": 1.0, "alpha": alpha}), (v, u, {"bandwidth": 1.0, "alpha": alpha})]


@pytest.mark.parametrize("shape", ["switch", "line"])
def test_two_hops_by_hand(shape):
    """A 1-byte reduce to GPU 0 over links of 1 B/s, alpha 1/16 s: GPU 1 behind a switch (2) with
    GPU 0, or GPU 2 at the end of the line 0 - 1 - 2. The farthest GPU is 2 hops away and sends
    at most ``b_t`` a step, the root takes in at most ``b_t``: what the root completes by step
    ``t`` left that GPU by step ``t - 1``. Over ``S`` steps, counting blocks of one step back
    from the last, ``T_B >= 1 + max_t b_t >= S / (S - 1)``; so ``S alpha + S / (S - 1)``: 4 steps
    1.5833 s, 5 steps 1.5625 s, 6 steps 1.575 s, the bound 25/16 s against ``L + T*`` = 2/16 + 1.
    Four pieces pipelined up the two hops take 5 steps of 1/4 byte a link: exactly 25/16 s
    (the broadcast's time reversal), so that is the optimum."""
    if shape == "switch":
        topo, path = from_edges(3, link(0, 2) + link(1, 2), switches=[2], name="pair"), [0, 2, 1]
    else:
        topo, path = from_edges(3, link(0, 1) + link(1, 2), name="line"), [0, 1, 2]
    inst = make_instance(topo, "reduce", message_bytes=1.0, root=0)
    b = instance_bounds(inst)
    assert b.part("sync_latency").value + b.part("sync_bandwidth").value == pytest.approx(1.125)
    assert b.sync.source == "rooted depth"
    assert b.sync.value == pytest.approx(25 / 16, rel=1e-5)
    sched = reverse(pipelined_broadcast(path, 3, 4))
    assert verify.verify(sched, inst) is None
    assert cost_models.price(sched, inst, "sync").total_s == pytest.approx(25 / 16)


def test_tacos_hierarchy_by_a_closed_form():
    """ring x complete x switch 4x4x2, 100 GB/s and 0.5 us a link, a 1 GB reduce to GPU 0. Every
    GPU has 6 links out (two ring, three complete, one to its pair's switch) and the root 6 in,
    ``T* = M / (6 B)``; the farthest GPUs are 5 hops away (2 ring, 1 complete, 2 through the
    switch). Blocks of 4 steps back from the last, ``m = ceil(S / 4)`` of them: the root
    completes by the start of block ``j`` only what left those GPUs before block ``j + 1``, so
    ``T* <= T_B - (block j's b)`` for each ``j`` and ``T_B >= T* m / (m - 1)``; the steps
    ``1, 5, 9, ...`` alone carrying ``T* / (m - 1)`` each meet it. So ``min_S [S alpha + T* m /
    (m - 1)]``: 117 steps (m = 30), 1.78264 ms against ``L + T*`` = 1.66917 ms: the first
    program's value. The refined one (one arrival or several) is higher at 117 steps: a farthest
    GPU is 6 hops from the root through some of its in-links, 7 through the switch."""
    topo = build("hierarchical", {"levels": ["ring", "complete", "switch"], "dims": [4, 4, 2]},
                 bandwidth=100e9, alpha=0.5e-6)
    T_star = 1e9 / (6 * 100e9)
    by_hand = min(S * 0.5e-6 + T_star * math.ceil(S / 4) / (math.ceil(S / 4) - 1) for S in range(5, 400))
    assert by_hand == pytest.approx(117 * 0.5e-6 + T_star * 30 / 29)
    R, senders = feeders(topo.link_arrays, 0, list(range(32)))
    first = least_over_steps(lambda S: rooted_lp(S, 1e9, R, senders), 0.5e-6, 2.5e-6, T_star, first=5)
    assert first == pytest.approx(by_hand, rel=1e-6)
    tails, profiles = in_link_profiles(topo.link_arrays, 0, list(range(32)))
    assert [D for _, _, depths in profiles for D in depths if D == 7] and max(d for _, d, _ in profiles) == 5
    assert split_lp(117, tails, profiles) > 30 / 29 * 1.001


def triangle(alpha):
    return from_edges(3, link(0, 1, alpha) + link(1, 2, alpha) + link(0, 2, alpha), name="triangle")


def test_triangle_by_hand():
    """Three GPUs pairwise linked (1 B/s), a 1-byte reduce to GPU 0. The first program sees every
    GPU one hop away: ``T* = 1/2`` s in one step. But in one step every position reaches the root
    twice: 1 s (module doc); in two steps 2/3 s (``split_lp``'s doc), met by a third of the
    positions through GPU 1, a third through GPU 2 and a third sent directly by both (the time
    reversal of a broadcast, hand-built below: 1/3 byte a link a step). At alpha 1/2 s one step
    is the optimum: the bound 3/2 s, which the two direct sends meet, against ``L + T*`` = 1 s."""
    inst = make_instance(triangle(0.5), "reduce", message_bytes=1.0, root=0)
    b = instance_bounds(inst)
    assert b.part("sync_latency").value + b.part("sync_bandwidth").value == pytest.approx(1.0)
    assert b.sync.source == "rooted depth"
    assert b.sync.value == pytest.approx(1.5, rel=1e-5)
    direct = reverse(from_arrays("broadcast", 3, 1, chunk=[0, 0], lo=[0, 0], hi=[1, 1], denom=1, step=[1, 1],
                                 src=[0, 0], dst=[1, 2]))
    assert verify.verify(direct, inst) is None
    assert cost_models.price(direct, inst, "sync").total_s == pytest.approx(1.5)
    rows = [(0, 1, 0, 1), (0, 2, 1, 2), (1, 1, 0, 2), (1, 2, 2, 1), (2, 2, 0, 1), (2, 2, 0, 2)]  # (piece, step, src, dst)
    two = reverse(from_arrays("broadcast", 3, 1, chunk=[0] * 6, lo=[r[0] for r in rows], hi=[r[0] + 1 for r in rows],
                              denom=3, step=[r[1] for r in rows], src=[r[2] for r in rows], dst=[r[3] for r in rows]))
    assert verify.verify(two, inst) is None
    assert cost_models.price(two, inst, "sync").total_s == pytest.approx(2 * 0.5 + 2 / 3)
    tails, profiles = in_link_profiles(inst.topology.link_arrays, 0, [0, 1, 2])
    assert split_lp(2, tails, profiles) * 0.5 == pytest.approx(2 / 3)


@st.composite
def direct_graphs(draw):
    """3-4 GPUs on direct links of drawn bandwidth each way: a line, a triangle, a ring of four, a
    star or a complete graph of four."""
    shape = draw(st.sampled_from(["line", "triangle", "ring", "star", "complete"]))
    n = 3 if shape in ("line", "triangle") else 4
    pairs = {"line": [(0, 1), (1, 2)], "triangle": [(0, 1), (1, 2), (0, 2)], "ring": [(0, 1), (1, 2), (2, 3), (3, 0)],
             "star": [(0, 1), (0, 2), (0, 3)], "complete": [(a, c) for a in range(4) for c in range(a + 1, 4)]}[shape]
    alpha = draw(st.sampled_from([1e-6, 1e-5]))
    edges = []
    for a, c in pairs:
        edges += [(a, c, {"bandwidth": draw(st.sampled_from([1e9, 2e9])), "alpha": alpha}),
                  (c, a, {"bandwidth": draw(st.sampled_from([1e9, 2e9])), "alpha": alpha})]
    return from_edges(n, edges, name=shape), draw(st.integers(0, n - 1))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(system=direct_graphs(), size=st.sampled_from([1e4, 1e5]))
def test_below_the_ten_ilp_optimum(system, size):
    """The bound is at most the ``sync`` price of the combining TEN ILP's optimum (a verified
    schedule: every reduction tree, at the ILP's pieces and steps) on tiny direct graphs."""
    topo, root = system
    inst = make_instance(topo, "reduce", message_bytes=size, root=root)
    bound = instance_bounds(inst).sync
    row, _ = pipeline.run(inst, "ten-ilp-combining", Options(driver="horizon", time_limit=120))
    assert row["verified"], row["message"]
    assert bound.value <= row["time_sync_s"] * TOL


@st.composite
def switched_systems(draw):
    """2-3 boxes of 1-3 GPUs, each box a switch (links up / down of drawn bandwidth), the boxes'
    first GPUs on a ring or a second switch (the NICs)."""
    boxes = draw(st.integers(1, 3))
    sizes = [draw(st.integers(1, 3)) for _ in range(boxes)]
    if sum(sizes) < 2:
        sizes[0] = 2
    n = sum(sizes)
    alpha = draw(st.sampled_from([1e-6, 1e-5]))
    up, down, nic = (draw(st.sampled_from([1e9, 2e9])) for _ in range(3))
    edges, first, at = [], [], 0
    for i, size in enumerate(sizes):
        sw = n + i
        for g in range(at, at + size):
            edges += [(g, sw, {"bandwidth": up, "alpha": alpha}), (sw, g, {"bandwidth": down, "alpha": alpha})]
        first.append(at)
        at += size
    switches = list(range(n, n + boxes))
    if boxes > 1:
        if draw(st.booleans()):
            nic_sw = n + boxes
            switches.append(nic_sw)
            for g in first:
                edges += [(g, nic_sw, {"bandwidth": nic, "alpha": alpha}),
                          (nic_sw, g, {"bandwidth": nic, "alpha": alpha})]
        else:
            for a, c in zip(first, first[1:] + first[:1]):
                if a != c:
                    edges += [(a, c, {"bandwidth": nic, "alpha": alpha}), (c, a, {"bandwidth": nic, "alpha": alpha})]
    topo = from_edges(n + len(switches), edges, switches=switches, name="boxes")
    return topo, draw(st.integers(0, n - 1))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(system=switched_systems(), size=st.sampled_from([1e4, 1e6]))
def test_below_every_verified_schedule(system, size):
    """The bound is at least ``L + T*`` and at most the ``sync`` price of every verified
    schedule on links: tree packing at 1, 4 and 16 pieces and at its own choice, binomial trees
    and greedy (those that refuse the system are left out)."""
    topo, root = system
    inst = make_instance(topo, "reduce", message_bytes=size, root=root)
    b = instance_bounds(inst)
    assert b.sync.value >= (b.part("sync_latency").value + b.part("sync_bandwidth").value) * (1 - 1e-6)
    runs = [("tree-packing", {"pieces": p}) for p in (1, 4, 16)] + [
        ("tree-packing", {}), ("binomial-tree", {}), ("greedy", {})]
    priced = 0
    for name, params in runs:
        try:
            row, sched = pipeline.run_lean(inst, name, Options(time_limit=60, params=params))
        except Exception:  # a producer that refuses this system or collective
            continue
        if row.get("verified") and sched.routing == "links":
            priced += 1
            assert b.sync.value <= cost_models.price(sched, inst, "sync").total_s * TOL, (name, params)
    assert priced >= 3
