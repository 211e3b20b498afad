"""The greedy (Won et al., TACOS, arXiv:2304.05301, 2023, §VI, and its rarest-first endgame):
bounds reached on meshes, tori and a switch hierarchy, every schedule verifies, maximum
matching by augmenting paths, the candidate arena, determinism, chunk replacement on
heterogeneous links, relays, concurrency, the producer."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsynth import InputError
from collsynth.instances.collective import KINDS, ROOTED, make
from collsynth.instances.generators import build
from collsynth.instances.instance import Instance, make_instance
from collsynth.instances.topology import from_edges
from collsynth.limits import Deadline, TimeLimitReached
from collsynth.solvers.greedy import engine, kernels
from collsynth.solvers.greedy import tacos as greedy
from collsynth.solvers import compiling, pipeline
from collsynth.solvers.producers import Options
from collsynth.tens.schedule import OP_DEFAULT, OP_REDUCE
from collsynth.tens.verify import verify
from builders import instance_on, strongly_connected_arcs


def _grid(gen, dims, chunks=1, kind="allgather"):
    topo = build(gen, {"dims": list(dims)}, bandwidth=100e9, alpha=0.5e-6)
    return make_instance(topo, kind, chunks_per_node=chunks, message_bytes=1 << 20)


def _best_of(inst, starts, bound, **kw):
    """Steps of seeds 0.. until one reaches ``bound`` (each schedule verified)."""
    got = []
    for seed in range(starts):
        s = greedy.synthesize(inst, seed, **kw)
        v = verify(s, inst)
        assert v is None, str(v)
        got.append(s.num_steps)
        if s.num_steps <= bound:
            break
    return min(got)


# ---- quality: the per-node inbound lower bound on meshes and tori ---------------------------

GRIDS = [
    ("mesh", (5, 5), 1), ("torus", (5, 5), 1), ("mesh", (3, 3, 3), 1), ("torus", (3, 3, 3), 1),
    ("mesh", (3, 4, 5), 1), ("torus", (3, 4, 5), 1), ("mesh", (4, 2, 3), 1), ("torus", (4, 2, 3), 1),
    ("torus", (3, 3), 1), ("mesh", (4, 4), 2), ("torus", (4, 6), 2),
]


@pytest.mark.parametrize("gen,dims,chunks", GRIDS)
def test_best_of_20_reaches_inbound_bound(gen, dims, chunks):
    inst = _grid(gen, dims, chunks)
    topo = inst.topology
    n = int(np.prod(dims))
    inbound = max(-(-(n - 1) * chunks // topo.in_degrees[v]) for v in topo.npus)  # chunks over in-links
    bound = greedy.lower_bound(inst)
    assert bound == inbound  # distance never dominates on these grids
    assert _best_of(inst, 20, bound) == bound


@pytest.mark.parametrize("gen,dims,chunks", [("mesh", (10, 10), 2), ("mesh", (7, 12), 3)])
def test_large_meshes_with_chunks_reach_bound(gen, dims, chunks):
    inst = _grid(gen, dims, chunks)
    bound = greedy.lower_bound(inst)
    # corners have 2 in-links: (N*c - c) / 2 timesteps
    n = int(np.prod(dims))
    assert bound == -(-(n - 1) * chunks // 2)
    assert _best_of(inst, 3, bound) == bound


@pytest.mark.parametrize("gen,dims,chunks", [("torus", (10, 10), 2), ("torus", (7, 12), 3)])
def test_large_tori_with_chunks_reach_bound(gen, dims, chunks):
    # multi-chunk pipelining: "fifo" (a link's oldest candidate first) reaches the bound where
    # the paper's uniform choice stays one timestep above (10x10, 2 chunks: 51 vs 50)
    inst = _grid(gen, dims, chunks)
    n = int(np.prod(dims))
    assert greedy.lower_bound(inst) == -(-(n - 1) * chunks // 4)  # chunks over 4 in-links
    assert _best_of(inst, 3, -(-(n - 1) * chunks // 4)) == -(-(n - 1) * chunks // 4)


# ---- beyond TACOS: every in-link busy to the last timestep ----------------------------------

@pytest.mark.parametrize("gen,dims,bound", [
    ("torus", (8, 8), 16),       # 63 chunks over 4 in-links
    ("torus", (16, 16), 64),     # 255 over 4
    ("torus", (4, 4, 4), 11),    # 63 over 6
    ("torus", (4, 4), 4),        # 15 over 4, antipode at 4 hops: no timestep to spare
    ("mesh", (8, 8), 32),        # a corner: 63 over 2
])
def test_one_seed_reaches_the_per_node_inbound_bound(gen, dims, bound):
    inst = _grid(gen, dims)
    assert greedy.lower_bound(inst) == bound
    assert _best_of(inst, 2, bound) == bound


def test_rarest_first_endgame_is_what_keeps_the_last_timesteps_full():
    # 8x8 torus: 63 of the 64 in-link slots of each node over 16 timesteps must carry a new
    # chunk. Without the endgame the last requests of a node bunch up behind one in-link.
    inst = _grid("torus", (8, 8))
    with_endgame = [greedy.synthesize(inst, s).num_steps for s in range(3)]
    without = [greedy.synthesize(inst, s, endgame=0).num_steps for s in range(3)]
    paper = [greedy.synthesize(inst, s, priority="random", matching="greedy", endgame=0).num_steps
             for s in range(3)]
    assert with_endgame == [16, 16, 16]
    assert min(without) >= 16 and max(without) > 16 and min(paper) > 16


def _ring_fc_switch(servers):
    """TACOS §VIII-B system: 2-NPU rings (200 GB/s) x 4-way fully connected (100 GB/s) per
    server, servers on a switch unwound to a one-way ring (50 GB/s)."""
    return build("hierarchical", {"levels": ["ring", "complete", "switch"], "dims": [2, 4, servers],
                                  "scales": [4.0, 2.0, 1.0], "unwind": [0, 0, 1]}, bandwidth=50e9, alpha=0.5e-6)


def test_ring_fc_switch_allgather_within_one_timestep_of_the_distance_bound():
    # 4 servers of 8 NPUs: one timestep is a ring link (1), an FC link takes 2, a switch
    # link 4. The farthest chunk crosses 3 switch links, one FC link and one ring link:
    # 3 * 4 + 2 + 1 = 15 timesteps. Server-aware choice (a chunk the server already holds
    # or awaits comes last on a switch link) keeps every switch link importing new chunks;
    # the randomised matching without it took 25.
    inst = make_instance(_ring_fc_switch(4), "allgather", message_bytes=64 << 20)
    assert sorted(set(greedy.links(inst.topology, inst.collective.chunk_bytes).delay.tolist())) == [1, 2, 4]
    assert greedy.lower_bound(inst) == 15
    s = greedy.synthesize(inst, 0)
    assert verify(s, inst) is None
    assert s.num_steps <= 16
    ar = make_instance(_ring_fc_switch(4), "allreduce", message_bytes=64 << 20)
    s = greedy.synthesize(ar, 0)
    assert verify(s, ar) is None and s.num_steps <= 32  # reduce-scatter, then allgather


def test_augmenting_path_keeps_every_in_link_busy():
    # node 0 wants a and b; node 1 holds a and b, node 2 holds a only. Serving a over 1 -> 0
    # first idles 2 -> 0; the augmenting path moves a to 2 -> 0 and b to 1 -> 0: one step.
    # (The rarest-first endgame alone avoids this trap here, so it is off.)
    topo = from_edges(3, [(1, 0, {"bandwidth": 1e9, "alpha": 0.0}), (2, 0, {"bandwidth": 1e9, "alpha": 0.0})])
    lk = greedy.links(topo, 1e6)
    INF = np.iinfo(np.int32).max
    avail = np.array([[INF, INF], [0, 0], [0, INF]], dtype=np.int32)
    want = np.array([[True, True], [False, False], [False, False]])
    steps = {m: [engine.match(lk, avail, want, np.random.default_rng(s), distances=topo.distances,
                              rules=engine.Rules(matching=m, endgame=0)).steps
                 for s in range(12)] for m in greedy.MATCHINGS}
    assert set(steps["maximum"]) == {1}
    assert max(steps["greedy"]) == 2  # some seeds serve a over 1 -> 0 first


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 6), st.lists(st.tuples(st.integers(0, 5), st.integers(0, 9), st.integers(0, 3)), max_size=60))
def test_candidate_arena_keeps_every_links_entries(links_n, ops):
    # a model of the per-link candidate queues: appends at the tail (reserve, then write),
    # takes from the head; a small arena forces moves, growth and repacking
    L = links_n
    tally = np.zeros(kernels.TALLY_SIZE, np.int64)
    pool = engine.new_pool(L, tally)
    pool = pool._replace(chunk=pool.chunk[:8 * L].copy())  # no spare room: moves happen early
    model = [[] for _ in range(L)]
    for link, count, take in ops:
        link %= L
        add = np.zeros(L, np.int64)
        add[link] = count
        pool = engine.reserve_pool(pool, add, tally)
        for k in range(count):
            pool.chunk[pool.tail[link]] = 100 * link + len(model[link]) + k
            pool.tail[link] += 1
        model[link] += [100 * link + len(model[link]) + k for k in range(count)]
        taken = min(take, len(model[link]))
        pool.head[link] += taken
        model[link] = model[link][taken:]
        for l in range(L):
            assert pool.chunk[pool.head[l]:pool.tail[l]].tolist() == model[l]
            assert pool.start[l] <= pool.head[l] <= pool.tail[l] <= pool.start[l] + pool.cap[l]


def test_maximum_matching_beats_plain_greedy_on_3x3_torus():
    # 8 chunks over 4 in-links: 2 timesteps need a perfect matching in step 2 at every node
    inst = _grid("torus", (3, 3))
    assert greedy.synthesize(inst, 0, matching="maximum").num_steps == 2
    plain = [greedy.synthesize(inst, s, matching="greedy").num_steps for s in range(5)]
    assert min(plain) >= 2 and all(verify(greedy.synthesize(inst, s, matching="greedy"), inst) is None for s in range(3))


# ---- correctness on random topologies, every collective ------------------------------------

@st.composite
def _random_instance(draw):
    n, arcs = draw(strongly_connected_arcs(3, 8, extra_per_node=2))
    bws = st.sampled_from([100e9, 50e9, 25e9, 12.5e9])
    edges = [(u, v, {"bandwidth": draw(bws), "alpha": 0.5e-6}) for u, v in arcs]
    topo = from_edges(n, edges, name="random")
    # a failure keeps the topology usable if the live NPUs stay strongly connected
    if draw(st.booleans()):
        fail = draw(st.integers(0, n - 1))
        t2 = topo.with_failures([fail])
        if len(t2.npus) >= 2 and t2.strongly_connected:
            topo = t2
    if draw(st.booleans()):
        u, v = draw(st.sampled_from(sorted((a, b) for a, b, _ in topo.graph.edges)))
        t2 = topo.with_failures((), [(u, v)])
        if t2.strongly_connected:
            topo = t2
    kind = draw(st.sampled_from(KINDS))
    nodes = list(topo.npus)
    if draw(st.booleans()) and len(nodes) > 3:  # a subset of the nodes: relays needed
        nodes = sorted(draw(st.lists(st.sampled_from(nodes), min_size=2, max_size=len(nodes) - 1, unique=True)))
        if len(nodes) < 2:
            nodes = list(topo.npus)
    root = draw(st.sampled_from(nodes)) if kind in ROOTED else None
    chunks = draw(st.integers(1, 2))
    inst = make_instance(topo, kind, chunks_per_node=chunks, root=root, nodes=nodes)
    return inst, draw(st.integers(0, 2**16)), draw(st.sampled_from(greedy.MATCHINGS)), draw(st.sampled_from(greedy.PRIORITIES))


@settings(max_examples=60)
@given(_random_instance())
def test_random_topologies_every_kind_verifies(case):
    inst, seed, matching, priority = case
    s = greedy.synthesize(inst, seed, matching=matching, priority=priority)
    v = verify(s, inst)
    assert v is None, f"{inst.collective.kind} on {sorted(inst.topology.graph.edges)}: {v}"
    assert s.num_steps >= greedy.lower_bound(inst)
    # no (node, chunk) is delivered twice within a copy phase, and in a reduction phase every
    # node sends its partial result of a chunk once (allreduce: reduce, then copy)
    red = (s.op == OP_REDUCE) | ((s.op == OP_DEFAULT) & inst.collective.combining)
    node = np.where(red, s.src, s.dst)
    keys = (red.astype(np.int64) * s.nodes + node) * s.chunks + s.chunk
    assert len(np.unique(keys)) == len(keys)


@st.composite
def _concurrent_instance(draw):
    topo = build("mesh", {"dims": [draw(st.integers(2, 3)), draw(st.integers(2, 4))]}, bandwidth=100e9, alpha=0.5e-6)
    colls = []
    for i in range(draw(st.integers(2, 3))):
        kind = draw(st.sampled_from(KINDS))
        nodes = sorted(draw(st.lists(st.sampled_from(list(topo.npus)), min_size=2, unique=True)))
        root = draw(st.sampled_from(nodes)) if kind in ROOTED else None
        colls.append(make(kind, nodes, topo.size, root=root, chunks_per_node=draw(st.integers(1, 2))))
    return Instance("concurrent", topo, tuple(colls)), draw(st.integers(0, 1000))


@settings(max_examples=25)
@given(_concurrent_instance())
def test_concurrent_collectives_verify(case):
    inst, seed = case
    s = greedy.synthesize(inst, seed)
    assert verify(s, inst) is None
    assert s.num_steps >= greedy.lower_bound(inst)
    # link capacity is shared: at most one chunk per link pair per timestep
    pair = inst.topology.link_arrays.lookup(s.src, s.dst)
    occ = s.step.astype(np.int64) * len(inst.topology.link_arrays) + pair
    assert len(np.unique(occ)) == len(occ)


def test_every_kind_on_failed_mesh_verifies():
    topo = build("mesh", {"dims": [4, 4]}, bandwidth=100e9, alpha=0.5e-6).with_failures([7, 9])
    for kind in KINDS:
        inst = make_instance(topo, kind, root=0 if kind in ROOTED else None, chunks_per_node=2)
        s = greedy.synthesize(inst, 1)
        assert verify(s, inst) is None, kind
        assert not (np.isin(s.src, [7, 9]) | np.isin(s.dst, [7, 9])).any()
    ag = make_instance(topo, "allgather")
    assert greedy.synthesize(ag, 0).num_steps == greedy.lower_bound(ag) == 13  # TACOS Table III topology


# ---- compiled code: warmed once, one version per kernel ------------------------------------

ENTRY_KERNELS = ("seed", "reserve", "repack", "arrivals", "admit", "match_step", "augment_step")


def test_warm_compiles_every_kernel_and_runs_compile_nothing_more():
    engine.warm()
    compiled = {name: len(getattr(kernels, name).signatures) for name in ENTRY_KERNELS}
    assert compiled == {name: 1 for name in ENTRY_KERNELS}
    # relays (gather, scatter on a failed mesh), multi-timestep links, combining duals on the
    # transpose, allreduce, concurrent parts around busy link slots: the same compiled code
    topo = build("mesh", {"dims": [3, 3]}, bandwidth=100e9, alpha=0.5e-6).with_failures([4])
    for kind in ("gather", "scatter", "reduce_scatter", "allreduce"):
        inst = make_instance(topo, kind, root=0 if kind in ROOTED else None)
        assert verify(greedy.synthesize(inst, 0), inst) is None
    hetero = make_instance(_hetero_topology(), "broadcast", root=0, chunks_per_node=4, message_bytes=4e9)
    assert verify(greedy.synthesize(hetero, 0), hetero) is None
    npus = list(topo.npus)
    both = Instance("concurrent", topo, (make("reduce_scatter", npus, topo.size), make("allgather", npus[:4], topo.size)))
    assert verify(greedy.synthesize(both, 0), both) is None
    assert {name: len(getattr(kernels, name).signatures) for name in ENTRY_KERNELS} == compiled


def test_the_pipeline_warms_the_producer_it_runs():
    assert pipeline.get("greedy").warm is engine.warm
    compiling.compile_producer("greedy")
    assert all(getattr(kernels, name).signatures for name in ENTRY_KERNELS)


def test_a_passed_deadline_stops_the_matching_saying_how_far_it_got():
    inst = _grid("torus", (4, 4))  # 16 nodes lacking 15 chunks each: 240 requests
    with pytest.raises(TimeLimitReached) as err:
        greedy.synthesize(inst, 0, deadline=Deadline.after(0))
    # the tables are filled a block of nodes at a time, the clock checked before each block
    assert err.value.stage == "greedy matching"
    assert err.value.done == "holdings tables: 0 of 16 nodes filled (columns 0 of 16); no timestep matched"
    with pytest.raises(TimeLimitReached) as err:
        greedy.multi_start(inst, [0, 1], workers=1, deadline=Deadline.after(0))
    assert err.value.done.startswith("no seed finished; holdings tables: 0 of 16 nodes filled")


# ---- heterogeneous links: shorter-link-first, arrival times, chunk replacement ---------------

def _hetero_topology():
    # 0 -> 2 directly over a slow link (3 timesteps) or via 1 over two fast ones (2 timesteps)
    fast, slow = {"bandwidth": 3e9, "alpha": 0.0}, {"bandwidth": 1e9, "alpha": 0.0}
    return from_edges(3, [(0, 1, fast), (1, 2, fast), (0, 2, slow), (1, 0, fast), (2, 1, fast), (2, 0, fast)])


def test_multi_timestep_links_respect_arrival_times():
    inst = make_instance(_hetero_topology(), "broadcast", root=0, chunks_per_node=4, message_bytes=4e9)
    lk = greedy.links(inst.topology, inst.collective.chunk_bytes)
    assert sorted(lk.delay.tolist()) == [1, 1, 1, 1, 1, 3]
    for seed in range(10):
        s = greedy.synthesize(inst, seed)
        assert verify(s, inst) is None
        d = lk.delay[inst.topology.link_arrays.lookup(s.src, s.dst)]
        start = s.step - d + 1
        # a chunk leaves a node only after it arrived there (multi-timestep arrival analysis)
        arrive = {(int(c), int(v)): int(t) for c, v, t in zip(s.chunk, s.dst, s.step)}
        for c, u, st_ in zip(s.chunk.tolist(), s.src.tolist(), start.tolist()):
            assert u == 0 or arrive[(c, u)] <= st_ - 1
        # a link carries one chunk at a time for its whole delay
        pair = inst.topology.link_arrays.lookup(s.src, s.dst)
        busy = [(p, t) for p, a, dd in zip(pair.tolist(), s.step.tolist(), d.tolist()) for t in range(a - dd + 1, a + 1)]
        assert len(busy) == len(set(busy))


def test_chunk_replacement_happens_and_stays_valid():
    inst = make_instance(_hetero_topology(), "broadcast", root=0, chunks_per_node=4, message_bytes=4e9)
    seen = 0
    for seed in range(30):
        s = greedy.synthesize(inst, seed, matching="greedy")
        assert verify(s, inst) is None
        seen += s.meta["stats"]["replaced"] + s.meta["stats"]["dropped"]
    assert seen > 0


def test_shorter_link_first_wins_conflicts():
    # node 2 can get the chunk over the slow 0->2 link (3 steps) or fast 1->2 once 1 has it;
    # the greedy never ships the chunk over the slow link when it could arrive earlier
    inst = make_instance(_hetero_topology(), "broadcast", root=0, message_bytes=1e9)
    for seed in range(10):
        s = greedy.synthesize(inst, seed)
        assert s.num_steps == 2 and verify(s, inst) is None


# ---- determinism, producer, errors ---------------------------------------------------------

def test_fixed_seed_is_deterministic():
    inst = _grid("torus", (4, 5), 2)
    a, b = greedy.synthesize(inst, 7), greedy.synthesize(inst, 7)
    for col in ("chunk", "src", "dst", "step", "op"):
        assert np.array_equal(getattr(a, col), getattr(b, col))
    runs = {tuple(greedy.synthesize(inst, s).sorted().chunk[:50].tolist()) for s in range(4)}
    assert len(runs) > 1  # seeds do change the schedule


def test_producer_through_pipeline_multistart():
    inst = _grid("torus", (4, 4), 1, kind="allreduce")
    row, sched = pipeline.run(inst, "greedy", Options(seed=3, starts=3))
    # 16 chunks x 2 * 15 sends (one-way gossip) on 64 links: at least 8 timesteps; the row is
    # optimal exactly when greedy meets that bound
    assert row["verified"] and row["steps"] >= 8
    assert row["status"] == ("optimal" if row["steps"] == 8 else "heuristic")
    extra = row["extra"]
    assert extra["seeds"] == [3, 4, 5]
    assert extra["steps_min"] <= extra["steps_median"] <= extra["steps_max"]
    assert row["steps"] == row["objective"] == extra["steps_min"]
    assert row["bound"] == greedy.lower_bound(inst) <= row["steps"]
    assert sched.collective == "allreduce"


def test_multistart_keeps_the_best_verified_seed():
    inst = _grid("torus", (5, 5))
    best, runs = greedy.multi_start(inst, range(6), {"matching": "greedy"}, workers=2)
    assert len(runs) == 6 and all(r["violation"] is None for r in runs)
    assert best["steps"] == min(r["steps"] for r in runs)
    tied = [r for r in runs if r["steps"] == best["steps"]]
    assert best["sync_s"] == min(r["sync_s"] for r in tied)


def test_bad_parameters_are_input_errors():
    inst = _grid("mesh", (2, 2))
    with pytest.raises(InputError, match="params.priority"):
        greedy.produce(inst, Options(params={"priority": "smart"}))
    with pytest.raises(InputError, match="params.bogus"):
        greedy.produce(inst, Options(params={"bogus": 1}))
    with pytest.raises(InputError, match="starts"):
        greedy.produce(inst, Options(starts=0))
    with pytest.raises(InputError, match="params.endgame"):
        greedy.produce(inst, Options(params={"endgame": -1}))
    with pytest.raises(InputError, match="params.matching"):
        greedy.synthesize(inst, 0, matching="best")


def test_holdings_over_the_memory_budget_are_refused_and_parallel_seeds_capped(monkeypatch):
    """The engine's holdings are dense (node x chunk id): an instance one seed's do not fit is
    refused up front, naming the field that makes it big, instead of being killed by the
    system; seeds run side by side only as far as the budget holds them."""
    from collsynth.limits import MEMORY_ENV, TooBig

    inst = instance_on("torus", {"dims": [4, 4]})
    one_seed = greedy.HOLDING_BYTES * 16 * 16
    monkeypatch.setenv(MEMORY_ENV, str(one_seed - 1))
    with pytest.raises(TooBig) as err:
        greedy.produce(inst, Options(starts=2))
    assert err.value.where == "topology.dims" and "holdings of 16 nodes x 16 chunks" in err.value.what
    monkeypatch.setenv(MEMORY_ENV, str(one_seed + 1))
    out = greedy.produce(inst, Options(starts=2, params={"workers": 2}))
    assert out.extra["workers"] == 1 and out.extra["seeds"] == [0, 1] and out.status == "heuristic"
    monkeypatch.setenv(MEMORY_ENV, str(3 * one_seed))
    assert greedy.produce(inst, Options(starts=2, params={"workers": 2})).extra["workers"] == 2
