"""The arrival bound (``collsynth.tens.bounds.arrival_bound``): a node takes in at most its
in-capacity per timestep, each chunk no earlier than its release (its distance, or its rank
among the chunks that must cross into a ball around the node).

Expected values are derived by hand in the comments; its validity is checked against the TEN
ILP itself: at one timestep less than the bound the ILP cannot deliver everything.
"""

from __future__ import annotations


import networkx as nx
from hypothesis import assume, given, settings, strategies as st

from collsynth.instances import CORPUS, load_instance
from collsynth.instances.instance import make_instance
from collsynth.instances.topology import from_edges, with_latency
from collsynth.tens import bounds, ten
from ilp_oracle import solves_by
from builders import instance_on

NVS = {"alpha": 0.0, "bandwidth": 1.0}  # 1-byte chunks: one timestep on the link, no latency
IB = {"alpha": 3.0, "bandwidth": 0.5}  # two timesteps on the link, then 3 of latency: lag 5


def two_chassis():
    """NPUs 0, 1 on switch 4 and 2, 3 on switch 5 (instant hop), links 1 -> 2 and 3 -> 0
    between them (a DGX-2 pair in miniature: odd GPUs send, even ones receive)."""
    edges = [(0, 4, NVS), (4, 0, NVS), (1, 4, NVS), (4, 1, NVS), (2, 5, NVS), (5, 2, NVS), (3, 5, NVS),
             (5, 3, NVS), (1, 2, IB), (3, 0, IB)]
    topo = from_edges(6, edges, switches=(4, 5), meta={"switch_hop": "instant"})
    return make_instance(with_latency(topo, "pipelined"), "allgather", message_bytes=4.0)


def test_two_chassis_hand_derivation():
    inst = two_chassis()
    # NPU 1 hears only its switch, one chunk per timestep. Chunk 0 comes in 1 (0 -> 4 -> 1, the
    # hop out of the switch instant), chunk 3 in 5 + 1 = 6 (3 -> 0, then the switch), chunk 2
    # in 1 + 5 + 1 = 7 (via 3): the distances alone give 7.
    b = bounds.instance_bounds(inst)
    assert b.part("timesteps", "distance").value == 7
    # Chunks 2 and 3 must both cross 3 -> 0, which is busy two timesteps per chunk: the second
    # starts in timestep 3 at the earliest, reaches 0 at the end of 4 + 3 = 7 and NPU 1 at 8.
    arrivals = b.part("timesteps", "arrivals")
    assert (arrivals.value, arrivals.witness) == (8, "v=1 S={0-1,4}")
    assert b.timesteps.value == 8  # (the cut bound of {0, 1, 4} finds it too: 7 to cross, 1 inside)
    # and 8 is the optimum: the ILP cannot finish by 7 and can by 8
    assert solves_by(inst, 7) is False and solves_by(inst, 8) is True


def test_release_times_alone_count_late_chunks():
    # a unidirectional ring of 4 with pipelined latency 2 (lag 3 per hop): node 3 gets chunk 2
    # at 3, chunk 1 at 6, chunk 0 at 9 over its one in-link; the releases are distinct, so the
    # bound is the farthest chunk's distance, 9 (the ILP needs 9 too)
    topo = with_latency(from_edges(4, [(u, (u + 1) % 4) for u in range(4)], bandwidth=1.0, alpha=2.0), "pipelined")
    inst = make_instance(topo, "allgather", message_bytes=4.0)
    assert bounds.arrival_bound(ten.prepare(inst, 1)).value == 9
    # two chunks per node: node 3 must take in 6 chunks, released at 3, 3, 6, 6, 9, 9 one per
    # timestep: the last two cannot both arrive in 9, so 10
    inst2 = make_instance(topo, "allgather", message_bytes=8.0, chunks_per_node=2)
    assert bounds.arrival_bound(ten.prepare(inst2, 1)).value == 10
    b = bounds.instance_bounds(inst2)
    assert (b.timesteps.value, b.timesteps.source) == (10, "arrivals")
    assert max(p.value for p in b.parts["timesteps"] if p.computed and p.source != "arrivals") == 9  # the distance
    assert solves_by(inst2, 9) is False and solves_by(inst2, 10) is True


def test_a_ball_around_the_node_raises_the_releases():
    # a ring of 5 broadcasting 4 chunks from node 0: node 2 (two hops away) takes in two chunks
    # per timestep from timestep 2 on (distances alone: 3), but by the end of 2 only one chunk
    # can be there: node 1 holds one by the end of 1 and node 3 none before the end of 2. So 3
    # arrive in 3 .. T at two per timestep: T >= 4, the optimum (the set S = {2}: its two
    # entering links deliver one chunk by the end of 2)
    inst = instance_on("ring", {"nodes": 5}, "broadcast", root=0, chunks_per_node=4)
    b = bounds.arrival_bound(ten.prepare(inst, 1))
    assert (b.value, b.witness) == (4, "v=2 S={2}")
    assert solves_by(inst, 3) is False and solves_by(inst, 4) is True


def test_dgx2_fast_epoch_allgather_bounds_are_te_ccls_epochs():
    # 1 MB: an odd GPU of chassis B hears only its NVSwitch (one chunk per 0.25 us epoch). The
    # 16 chunks of chassis A cross 8 InfiniBand links busy 10 epochs per chunk: 8 of them start
    # in epoch 11 or later, reach chassis B at the end of 20 + 11 = 31 and the GPU 5 epochs
    # later (up 3, down 2): 8 chunks at or after 36, one per epoch: 43 (TE-CCL's 43 epochs).
    one = bounds.instance_bounds(load_instance(CORPUS / "teccl-dgx2-2ch-allgather-fast-1mb.toml")).timesteps
    assert (one.value, one.source) == (43, "arrivals")
    # 64 KB: the 8 even GPUs' chunks of chassis B each go up and down the NVSwitch (23 + 22),
    # over InfiniBand (10 + 163) and again through chassis A's NVSwitch: 263 epochs; an odd GPU
    # of chassis A takes them in one per epoch: 270 (TE-CCL's 270 epochs)
    kb = bounds.instance_bounds(load_instance(CORPUS / "teccl-dgx2-2ch-allgather-fast-64kb.toml")).timesteps
    assert (kb.value, kb.source, kb.witness) == (270, "arrivals", "v=1")


def test_a_cut_short_search_still_bounds_and_big_instances_are_refused():
    inst = two_chassis()
    data = ten.prepare(inst, 1, switch_copy=True)
    b = bounds.arrival_bound(data, budget_s=0.0)  # one node only: still a bound
    assert b.computed and 1 <= b.value <= 8
    big = bounds.arrivals.ARRIVAL_CELLS
    try:
        bounds.arrivals.ARRIVAL_CELLS = 4
        assert not bounds.arrival_bound(data).computed
    finally:
        bounds.arrivals.ARRIVAL_CELLS = big


@st.composite
def latency_topologies(draw):
    """2-4 NPUs on one or two switch nodes (instant hop or not; joined only without) or on
    ordinary nodes in their place, with optional direct links; links of 1 or 2 timesteps of
    transmission and 0-3 timesteps of latency, pipelined or serial."""
    n = draw(st.integers(2, 4))
    k = draw(st.integers(1, 2))
    kinds = [{"alpha": float(a), "bandwidth": b} for a in (0.0, 1.0, 3.0) for b in (1.0, 0.5)]
    edges = []
    for v in range(n):
        s = n + draw(st.integers(0, k - 1))
        edges += [(v, s, draw(st.sampled_from(kinds))), (s, v, draw(st.sampled_from(kinds)))]
    instant = draw(st.booleans())
    if k == 2 and not instant and draw(st.booleans()):  # (two switches joined with instant hops would
        edges += [(n, n + 1, kinds[0]), (n + 1, n, kinds[0])]  # make zero-timestep cycles)
    for u in range(n):
        for v in range(n):
            if u != v and draw(st.integers(0, 3)) == 0:
                edges.append((u, v, draw(st.sampled_from(kinds))))
    meta = {"switch_hop": "instant"} if instant else {}
    topo = from_edges(n + k, edges, switches=range(n, n + k) if draw(st.booleans()) else (), meta=meta)
    return with_latency(topo, draw(st.sampled_from(["pipelined", "serial"])))


KINDS = [(kind, chunks) for kind in ("allgather", "broadcast", "gather") for chunks in (1, 2)] + [("alltoall", 1)]


@settings(max_examples=12, deadline=None)
@given(latency_topologies(), st.sampled_from(KINDS))
def test_the_ilp_never_finishes_before_the_arrival_bound(topo, kind_chunks):
    """All-to-all keeps to one chunk per NPU and at most 5 NPUs: its ILP has a commodity per
    (source, destination), and proving that 6 NPUs with 2 chunks cannot finish by the bound
    took HiGHS over 60 s (13-30 s for 6 NPUs with one chunk, or 4 with two beside a switch)."""
    kind, chunks = kind_chunks
    assume(nx.is_strongly_connected(topo.graph))
    kw = {"root": 0} if kind in ("broadcast", "gather") else {}
    n = len(topo.npus)
    assume(kind != "alltoall" or n <= 5)
    inst = make_instance(topo, kind, message_bytes=float(n * chunks), chunks_per_node=chunks, **kw)
    b = bounds.arrival_bound(ten.prepare(inst, 1, switch_copy=True))
    assert b.computed
    if b.value > 1:
        done = solves_by(inst, int(b.value) - 1, time_limit=None)  # no limit: a verdict on every draw
        assert done is False, b.label()
