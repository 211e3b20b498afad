"""Lower bounds (tens/bounds/): hand-computed values, exactness of the min-cut search against
brute force over all node sets, validity against every producer's verified schedules in every
cost model, the two-chassis cut, and bounds that cannot be computed."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from collsynth.instances import CORPUS, load_instance
from collsynth.instances.collective import KINDS, ROOTED
from collsynth.instances.generators import build
from collsynth.instances.instance import Instance, make_instance
from collsynth.instances.topology import from_edges
from collsynth.solvers import pipeline
from collsynth.solvers.greedy import tacos as greedy
from collsynth.solvers.producers import Options, producers
from collsynth.tens import bounds
from collsynth.tens.schedule import from_sends
from collsynth.tens.ten import link_delays, link_latency
from ilp_oracle import solves_by
from proofs import proven_status
from builders import strongly_connected_arcs

ALPHA, BW, M = 0.5e-6, 25e9, float(1 << 20)
TOL = 1 + 1e-9


def _instance(topo, kind="allgather", **kw):
    return make_instance(topo, kind, message_bytes=M, **kw)


# ---- hand-computed values --------------------------------------------------------------------

def test_hetero6_file_allgather_is_15():
    """Ring of 6 with fast chords 0-3 and 1-4: a chunk takes 5 timesteps on a ring link and 1 on
    a chord. Nodes 2 and 5 have no chord: 5 chunks over two 5-timestep links need
    2 * floor(T / 5) >= 5, T = 15 (the TEN ILP proves 15; the greedy reported 11 before)."""
    inst = load_instance(CORPUS / "hetero6-file-allgather.toml")
    delay, _, _ = link_delays(inst.topology, [inst.collective.chunk_bytes])
    assert sorted(set(delay[0].tolist())) == [1, 5]
    b = bounds.instance_bounds(inst)
    assert b.timesteps.value == 15 and b.timesteps.source == "inbound" and b.timesteps.witness in ("v=2", "v=5")
    assert bounds.lower_bound(inst) == greedy.lower_bound(inst) == 15
    row, _ = pipeline.run(inst, "greedy", Options())
    assert row["bound"] == 15 and row["lower_bound_timesteps"] == 15
    assert row["gap"] == (row["steps"] - 15) / row["steps"]


def _barbell(slow=3):
    """Two triangles (complete K3) joined by one link each way between nodes 0 and 3 with
    1/slow of the bandwidth: with alpha = 0 a chunk takes ``slow`` timesteps on it."""
    edges = [(u, v) for tri in ((0, 1, 2), (3, 4, 5)) for u in tri for v in tri if u != v]
    fast = [(u, v, {"bandwidth": 1e9, "alpha": 0.0}) for u, v in edges]
    bridge = [(0, 3, {"bandwidth": 1e9 / slow, "alpha": 0.0}), (3, 0, {"bandwidth": 1e9 / slow, "alpha": 0.0})]
    return from_edges(6, fast + bridge, name="barbell")


def test_cut_with_multi_timestep_bridge_meets_the_ilp():
    """Barbell: each triangle needs the other's 3 chunks over one 3-timestep link:
    floor(T / 3) >= 3, T = 9, and the last one 1 more hop inside: 10. The per-node bound is 3
    (node 0: 5 chunks, 2 T + floor(T / 3) >= 5) and the distance 1 + 3 + 1 = 5. A schedule of 10: node 0 sends its chunk
    at 1-3, node 1's at 4-6, node 2's at 7-9 (they reach 0 at 1), forwarded at 10."""
    inst = make_instance(_barbell(), "allgather", message_bytes=6e6)
    b = bounds.instance_bounds(inst)
    assert b.part("timesteps", "inbound").value == 3
    assert b.part("timesteps", "distance").value == 5
    assert b.timesteps.value == 10 and b.timesteps.source == "cut"
    assert set(b.timesteps.witness) in ({0, 1, 2}, {3, 4, 5})
    row, _ = pipeline.run(inst, "ten-ilp", Options(driver="horizon", time_limit=60))
    assert row["verified"] and row["steps"] == 10
    # the cut proves 10 TEN timesteps; optimal outright where a cost model's cut bound is met too
    assert row["status"] == proven_status(row) and row["bound_source"].split(": ", 1)[1].startswith("cut S=")
    assert solves_by(inst, 9) is False  # the ILP solved at 9 directly (the driver starts at the bound)


def test_known_values_on_rings_complete_graphs_and_hypercubes():
    """Per-node and distance bounds by hand (BFB paper section 3: T_B* = (N-1)/N M/B)."""
    n = 8
    ring = build("ring", {"nodes": n, "bidirectional": False}, bandwidth=BW, alpha=ALPHA)
    b = bounds.instance_bounds(_instance(ring))
    assert b.steps.value == n - 1 and b.timesteps.value == n - 1
    assert b.part("sync_bandwidth").value == pytest.approx((n - 1) / n * M / BW)
    assert b.sync.value == pytest.approx((n - 1) * ALPHA + (n - 1) / n * M / BW)
    # event: the last of n-1 chunks leaves the one in-link after (n-1)/n M / BW; its latency
    # alpha counts once, but the farthest chunk is n-1 hops away: the distance dominates
    assert b.event.value == pytest.approx(max((n - 1) * ALPHA, ALPHA + (n - 1) / n * M / BW))
    rs = bounds.instance_bounds(_instance(ring, "reduce_scatter"))
    assert rs.steps.value == n - 1 and rs.part("sync_bandwidth").value == pytest.approx((n - 1) / n * M / BW)
    full = build("complete", {"nodes": n}, bandwidth=BW, alpha=ALPHA)
    b = bounds.instance_bounds(_instance(full))
    assert b.steps.value == 1 and b.timesteps.value == 1
    assert b.part("sync_bandwidth").value == pytest.approx((n - 1) / n * M / ((n - 1) * BW))
    hc = build("hypercube", {"dim": 4}, bandwidth=BW, alpha=ALPHA)
    b = bounds.instance_bounds(_instance(hc))
    assert b.steps.value == 4 and b.part("timesteps", "inbound").value == math.ceil(15 / 4)
    assert b.part("sync_bandwidth").value == pytest.approx(15 / 16 * M / (4 * BW))
    bc = bounds.instance_bounds(_instance(ring, "broadcast", root=3))
    assert bc.steps.value == n - 1 and bc.part("sync_bandwidth").value == pytest.approx(M / BW)
    red = bounds.instance_bounds(_instance(ring, "reduce", root=3))
    assert red.steps.value == n - 1 and red.part("sync_bandwidth").value == pytest.approx(M / BW)
    # allreduce: every proper node set needs every chunk's result from outside (M into a
    # node), and all links together carry 2(N-1) sends per chunk (one-way gossip): the
    # bandwidth bound 2 (N-1)/N M / B of Patarasuk and Yuan (JPDC 2009), B = 4 BW per node
    ar = bounds.instance_bounds(_instance(hc, "allreduce"))
    assert ar.steps.value == 4 and ar.part("sync_bandwidth").value == pytest.approx(2 * 15 / 16 * M / (4 * BW))
    torus = build("torus", {"dims": [4, 4]}, bandwidth=BW, alpha=ALPHA)
    assert bounds.instance_bounds(_instance(torus)).steps.value == torus.diameter == 4


def test_known_values_with_failures_and_subsets():
    torus = build("torus", {"dims": [3, 3]}, bandwidth=BW, alpha=ALPHA).with_failures([4])
    assert bounds.instance_bounds(_instance(torus)).steps.value == torus.diameter
    sub = _instance(build("ring", {"nodes": 6, "bidirectional": False}, bandwidth=BW, alpha=ALPHA), nodes=[0, 3])
    b = bounds.instance_bounds(sub)
    assert b.steps.value == 3  # 0 -> 3 and 3 -> 0 are 3 hops each
    assert b.part("sync_bandwidth").value == pytest.approx(M / 2 / BW)
    assert b.sync.value == pytest.approx(3 * ALPHA + M / 2 / BW)


def test_alltoall_bisection_cut_on_two_joined_cliques():
    """Two K4 joined by one link each way (3 <-> 4): all-to-all moves 4 * 4 chunks each way
    over one link, 16 timesteps; the per-node bound is ceil(7 / 3) = 3. Greedy meets the cut:
    a verified schedule of 16 timesteps (its last crossing chunk is for the node across)."""
    edges = [(u, v) for q in (range(4), range(4, 8)) for u in q for v in q if u != v] + [(3, 4), (4, 3)]
    inst = make_instance(from_edges(8, edges, bandwidth=1e9, alpha=0.0), "alltoall", message_bytes=8e6)
    b = bounds.instance_bounds(inst)
    assert b.part("timesteps", "inbound").value == 3
    assert b.timesteps.source == "cut" and b.timesteps.value == 16
    assert b.part("sync_bandwidth").value == pytest.approx(16 * 1e6 / 1e9)
    row, _ = pipeline.run(inst, "greedy", Options(time_limit=30))
    assert row["verified"] and row["steps"] == 16


# ---- the two-chassis system --------------------------------------------------------------------

def test_two_dgx1_chassis_the_bound_sees_the_inter_chassis_cut():
    """Two DGX-1 joined by one InfiniBand link each way (instances/corpus): a 1 MiB chunk takes
    1 timestep on NVLink and ceil((5 us + 1 MiB / 12.5 GB/s) / (0.5 us + 1 MiB / 25 GB/s)) =
    ceil(2.09) = 3 on InfiniBand. Each chassis needs the other's 8 chunks over one link:
    8 * 3 = 24 timesteps, then the last one 2 NVLink hops (GPU 0's eccentricity in its
    chassis): 26. The per-node bound is 3 and the TEN LP's 8 (measured, benchmarks)."""
    inst = load_instance(CORPUS / "dgx1x2-ib-allgather.toml")
    delay, _, _ = link_delays(inst.topology, [inst.collective.chunk_bytes])
    assert sorted(set(delay[0].tolist())) == [1, 3]
    b = bounds.instance_bounds(inst)
    assert b.part("timesteps", "inbound").value == 3
    assert b.timesteps.value == 26 and b.timesteps.source == "cut"
    assert set(b.timesteps.witness) in (set(range(8)), set(range(8, 16)))
    assert "24 to cross into S, then 2 inside it" in b.timesteps.note
    # seconds: 8 chunks of 1 MiB over 12.5 GB/s into a chassis
    assert b.part("sync_bandwidth").value == pytest.approx(8 * (1 << 20) / 12.5e9)
    row, _ = pipeline.run(inst, "greedy", Options())
    assert row["verified"] and row["steps"] <= b.timesteps.value + 3  # within a few timesteps
    assert row["bound"] == 26 and row["lower_bound_timesteps"] == 26


# ---- exactness: the parametric min-cut against all node sets ----------------------------------

@st.composite
def digraphs(draw, lo=3, hi=5):
    """Strongly connected digraphs (a random Hamiltonian cycle plus random arcs) with 1-2
    parallel links per arc and random bandwidths (multi-timestep arcs) and latencies."""
    n, arcs = draw(strongly_connected_arcs(lo, hi, extra_per_node=2))
    edges = []
    for u, v in sorted(set(arcs)):
        data = {"bandwidth": draw(st.sampled_from([1e9, 5e8, 2.5e8])), "alpha": draw(st.sampled_from([0.0, 2e-5, 1e-4]))}
        edges += [(u, v, dict(data)) for _ in range(draw(st.integers(1, 2)))]
    topo = from_edges(n, edges)
    fail = draw(st.one_of(st.none(), st.integers(0, n - 1)))
    if fail is not None and n > 3:
        cut = topo.with_failures([fail])
        if cut.strongly_connected:
            topo = cut
    return topo


@st.composite
def instances(draw, lo=3, hi=5):
    topo = draw(digraphs(lo, hi))
    kind = draw(st.sampled_from(KINDS))
    root = draw(st.sampled_from(topo.npus)) if kind in ROOTED else None
    nodes = topo.npus
    if kind not in ROOTED and len(nodes) > 3 and draw(st.booleans()):
        nodes = draw(st.lists(st.sampled_from(topo.npus), min_size=2, max_size=len(nodes), unique=True))
    return make_instance(topo, kind, chunks_per_node=draw(st.integers(1, 2)), message_bytes=2e5, root=root, nodes=nodes)


def _brute(arcs, demand, weight, supply):
    """The largest cut bound over every non-empty set of live nodes (the reference)."""
    best = 0
    nodes = arcs.nodes.tolist()
    for r in range(1, len(nodes) + 1):
        for S in itertools.combinations(nodes, r):
            inside = np.zeros(arcs.size, bool)
            inside[list(S)] = True
            need = float(weight[demand.crossing(inside)].sum())
            best = max(best, supply.smallest(arcs.entering(inside), need))
    return best


@settings(max_examples=30)
@given(instances())
def test_min_cut_search_is_exact_where_claimed_and_never_above(inst):
    arcs, demand = bounds.arcs_of(inst.topology), bounds.demand_of(inst)
    delay, cap, _ = link_delays(inst.topology, [inst.collective.chunk_bytes])
    exact = inst.collective.kind != "alltoall"
    for supply, weight in ((bounds.TimestepSupply(cap, delay[0]), demand.count.astype(float)),
                           (bounds.SyncSupply(arcs), demand.nbytes), (bounds.EventSupply(arcs), demand.nbytes)):
        ref = _brute(arcs, demand, weight, supply)
        got, witness, _, why = bounds.cut_search(arcs, demand, weight, supply, 0, None, first=[inst.collective.root or 0])
        assert why is None
        assert got <= ref * TOL + 1e-12
        if exact:
            assert got == pytest.approx(ref, rel=1e-9, abs=1e-12), (type(supply).__name__, witness)


# ---- validity: every bound below every verified schedule, in every cost model -----------------

FAST = ("ten-ilp", "ten-lp", "greedy", "bfb-lp", "bfb-hetero", "ring", "direct", "recursive-doubling",
        "binomial-tree", "bruck", "ten-ilp-nocongestion")


def _check(inst: Instance, names) -> None:
    b = bounds.instance_bounds(inst)
    for model in bounds.MODELS:
        assert b.of(model).computed and b.of(model).value > 0, (model, b.of(model).note)
    for name in names:
        row, sched = pipeline.run(inst, name, Options(driver="horizon" if name.startswith("ten-ilp") else None,
                                                      time_limit=30))
        if not row["verified"]:  # a producer that cannot take the instance says so; none crashes
            assert row["status"] in ("skipped", "no-solution") and sched is None, row["message"]
            continue
        for model, field in (("sync", "time_sync_s"), ("ten", "time_ten_s"), ("event", "time_event_s")):
            assert b.of(model).value <= row[field] * TOL, (name, model, b.of(model).label(), row[field])
        if row["units"] == "timesteps" and bounds.respects_ten_capacity(sched, inst):
            assert b.timesteps.value <= row["steps"], (name, b.timesteps.label(), row["steps"])
        if sched.routing == "links":
            assert b.steps.value <= sched.num_steps, name
    # the TEN ILP, solved one timestep short of the bound (no driver: not from the bound), cannot deliver everything
    if inst.collective.kind != "allreduce" and b.timesteps.computed:
        assert solves_by(inst, int(b.timesteps.value) - 1, time_limit=30) is not True, b.timesteps.label()


@settings(max_examples=8)
@given(instances(3, 4))
def test_bounds_are_below_the_ilp_optimum_and_every_verified_schedule(inst):
    _check(inst, FAST)


@pytest.mark.benchmark
@settings(max_examples=60)
@given(instances(3, 6))
def test_bounds_are_below_every_producer_thorough(inst):
    _check(inst, sorted(producers()))


# ---- bounds that cannot be computed ------------------------------------------------------------

def test_a_search_over_budget_is_not_computed_never_zero():
    topo = build("torus", {"dims": [4, 4]}, bandwidth=BW, alpha=ALPHA)
    b = bounds.instance_bounds(_instance(topo, "alltoall"), budget_s=0.0)
    cut = [p for p in b.parts["timesteps"] if p.source == "cut"]
    assert cut and cut[0].value is None and "budget" in cut[0].note
    assert b.timesteps.computed and b.timesteps.source != "cut"  # what remains
    assert b.part("timesteps", "inbound").value == 4  # 15 chunks over 4 in-links
    # every node sends 32 hops' worth (per ring of 4: 0 + 1 + 2 + 1, twice 4 of them), 512
    # chunk-hops over the 64 links: 8
    assert b.timesteps.value == b.part("timesteps", "volume").value == 8


def test_kept_switch_is_bounded_in_timesteps():
    topo = build("switch", {"nodes": 4})  # a switch node stores nothing and needs nothing
    b = bounds.instance_bounds(_instance(topo))
    # every NPU needs 3 chunks over its one in-link from the switch: 3 timesteps (inbound)
    assert b.part("timesteps", "inbound").value == 3
    # the switch stores nothing: a chunk reaches it at the end of timestep 1 at the earliest and
    # an NPU at the end of 2; its 3 chunks come one per timestep: 2, 3, 4 (arrivals)
    assert b.timesteps.value == 4 and b.timesteps.source == "arrivals"
    assert b.sync.computed and b.event.computed  # the switch forwards: still a network
    assert bounds.lower_bound(_instance(topo)) == 4


def test_records_say_what_proved_them():
    r = bounds.Bound(26, "timesteps", "timesteps", "cut", (0, 1, 2, 3, 5))
    assert r.label() == "cut S={0-3,5}" and r.as_dict()["witness"] == [0, 1, 2, 3, 5]
    assert bounds.best([bounds.not_computed("sync", "cut", "over budget")], "sync").note.startswith("cut: not computed")
    assert bounds.from_lp(None).value is None and bounds.from_lp(7).value == 7


# ---- which schedules the timesteps bound applies to -------------------------------------------

def test_respects_ten_capacity_rejects_overloads_routes_and_early_sends():
    ring = build("ring", {"nodes": 4, "bidirectional": False}, bandwidth=BW, alpha=ALPHA)
    inst = _instance(ring)
    ok = from_sends([(u, 0, 1, u, (u + 1) % 4, 1) for u in range(4)], "allgather", 4, 4)
    assert bounds.respects_ten_capacity(ok, inst)
    two = from_sends([(0, 0, 1, 0, 1, 2), (3, 0, 1, 0, 1, 2)], "allgather", 4, 4)  # two chunks, one link, one step
    assert not bounds.respects_ten_capacity(two, inst)
    halves = from_sends([(0, 0, "1/2", 0, 1, 2), (3, "1/2", 1, 0, 1, 2)], "allgather", 4, 4)  # pieces add up to 1
    assert bounds.respects_ten_capacity(halves, inst)
    routed = from_sends([(0, 0, 1, 0, 2, 1)], "allgather", 4, 4, routing="shortest-path")
    assert not bounds.respects_ten_capacity(routed, inst)
    bar = make_instance(_barbell(), "allgather", message_bytes=6e6)
    early = from_sends([(0, 0, 1, 0, 3, 2)], "allgather", 6, 6)  # a 3-timestep link cannot deliver at 2
    assert not bounds.respects_ten_capacity(early, bar)
    assert bounds.respects_ten_capacity(from_sends([(0, 0, 1, 0, 3, 3)], "allgather", 6, 6), bar)



def _fits_by_hand(sched, inst) -> bool:
    """respects_ten_capacity counted send by send, timestep by timestep, in plain Python."""
    if sched.routing != "links":
        return False
    topo = inst.topology
    delay, cap, f = link_delays(topo, [c.chunk_bytes for c in inst.collectives], None, switches=True)
    lat = link_latency(topo, f)
    la = topo.link_arrays
    pair_of = {(int(u), int(v)): p for p, (u, v) in enumerate(zip(la.src, la.dst))}
    load: dict[tuple[int, int], int] = {}
    for c, lo, hi, u, v, step in zip(sched.chunk, sched.lo, sched.hi, sched.src, sched.dst, sched.step):
        p = pair_of.get((int(u), int(v)))
        if p is None:
            return False
        group = max(g for g, off in enumerate(inst.chunk_offsets) if off <= c)
        k, last = int(delay[group, p]), int(step) - int(lat[p])
        for t in range(last - k + 1, last + 1):
            if t < 1:
                return False
            load[p, t] = load.get((p, t), 0) + int(hi - lo)
    return all(x <= cap[p] * sched.denom for (p, _), x in load.items())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.sampled_from([(0, 2), (0, 1), (1, 2)]), st.integers(0, 5),
                          st.integers(0, 5), st.integers(1, 7)), min_size=1, max_size=12),
       st.booleans())
def test_respects_ten_capacity_is_the_count_by_hand(sends, barbell):
    """Random sends (halves and wholes, some off the links, some too early for the barbell's
    3-timestep bridge) on a barbell or a bidirectional ring of 6."""
    topo = _barbell() if barbell else build("ring", {"nodes": 6}, bandwidth=BW, alpha=ALPHA)
    inst = make_instance(topo, "allgather", message_bytes=6e6)
    sched = from_sends([(c, f"{lo}/2", f"{hi}/2", u, v, step) for c, (lo, hi), u, v, step in sends if u != v],
                       "allgather", 6, 6)
    assert bounds.respects_ten_capacity(sched, inst) == _fits_by_hand(sched, inst)


# ---- status from proofs only ---------------------------------------------------------------------

def test_status_is_optimal_only_with_a_proof_and_names_it():
    topo = build("torus", {"dims": [3, 4]}, bandwidth=BW, alpha=ALPHA)
    ag, _ = pipeline.run(_instance(topo, chunks_per_node=1), "bfb-lp", Options())
    assert ag["status"] == "optimal" and ag["bound_source"].startswith("sync: distance+")
    ar, _ = pipeline.run(_instance(topo, "allreduce"), "bfb-lp", Options())  # BFB's LP optimum only
    assert ar["verified"] and ar["time_sync_s"] > ar["lower_bound_s"] * TOL
    assert ar["status"] == "best-in-model" and ar["bound_source"] == "M/B: bfb-lp's own bound"
    ring, _ = pipeline.run(_instance(topo), "ring", Options())
    assert ring["status"] == "constructed" and ring["bound_source"].startswith("sync: ")
    hetero = load_instance(CORPUS / "hetero6-file-allgather.toml")
    g, _ = pipeline.run(hetero, "greedy", Options())
    assert g["status"] == proven_status(g)
    if g["status"] == "best-in-model":  # proven in TEN timesteps only
        assert g["bound_source"] == "timesteps: inbound v=2"
