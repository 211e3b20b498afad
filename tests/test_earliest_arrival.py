"""Earliest-arrival scheduling with bottleneck slots: hand-derived optima on a small two-chassis
switch-plus-InfiniBand system, agreement with the per-source flow LP's optimum where it claims
optimality, verified schedules that never beat the bounds, refusals, the producer, and
TE-CCL's DGX-2 two-chassis all-to-all rows."""

from __future__ import annotations

import random
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from collsynth.instances.generators import build as topo
from collsynth.instances.instance import load_instance, make_instance
from collsynth.instances.topology import from_edges, with_latency
from collsynth.limits import Deadline, TimeLimitReached
from collsynth.solvers.greedy import earliest as E
from collsynth.solvers.producers import Options, Unsupported, get as get_producer
from collsynth.tens import bounds, ten
from collsynth.tens.verify import verify

CORPUS = Path(__file__).resolve().parents[1] / "instances" / "corpus"


def two_chassis(ib_alpha: float = 0.0, hop: str = "timestep", gpus: int = 4):
    """Two chassis of ``gpus`` NPUs behind a switch each (links of 1 B/s), and the DGX-2 NIC
    pattern between them: NPU ``2k+1`` of one chassis to NPU ``2k`` of the other, at 1/4 B/s
    and ``ib_alpha`` seconds (pipelined latency, TE-CCL's model). With 1-byte chunks the
    timestep is 1 s, a switch hop takes 1 timestep and a NIC send 4."""
    sw = (2 * gpus, 2 * gpus + 1)
    edges = []
    for c in range(2):
        for g in range(gpus * c, gpus * c + gpus):
            edges += [(g, sw[c], {"bandwidth": 1.0, "alpha": 0.0}), (sw[c], g, {"bandwidth": 1.0, "alpha": 0.0})]
    for a, b in ((0, 1), (1, 0)):
        edges += [(gpus * a + 2 * k + 1, gpus * b + 2 * k, {"bandwidth": 0.25, "alpha": ib_alpha})
                  for k in range(gpus // 2)]
    meta = {} if hop == "timestep" else {"switch_hop": hop}
    t = from_edges(2 * gpus + 2, edges, switches=sw, name=f"two-chassis-{gpus}", meta=meta)
    return with_latency(t, "pipelined")


def alltoall(topology, gpus: int = 4):
    return make_instance(topology, "alltoall", message_bytes=float(2 * gpus))  # 1-byte chunks


def steps_and_bound(instance, how="slots"):
    s = E.synthesize(instance, how)
    assert verify(s, instance) is None
    b = int(bounds.timesteps_bound(instance, timestep=s.meta["timestep_s"]).value)
    assert s.num_steps >= b
    return s.num_steps, b


# ---- hand-derived optima ----------------------------------------------------------------------

@pytest.mark.parametrize("ib_alpha, hop, steps", [
    # 4 x 4 chunks cross each way over 2 NIC links: 8 sends of 4 timesteps per link, so at
    # least 32; 32 suffice: the first send of a link carries its tail's own chunk (no hop
    # before), the last one a chunk for its head (no hop after), the others have 4 timesteps
    # of slack for the 2 switch hops on either side
    (0.0, "timestep", 32),
    # a 2.5 s latency adds ceil(2.5) = 3 timesteps to the last arrival: 35
    (2.5, "timestep", 35),
    # an instant switch hop changes nothing on the NIC links: 35
    (2.5, "instant", 35),
])
def test_two_chassis_meets_hand_derived_optimum(ib_alpha, hop, steps):
    assert steps_and_bound(alltoall(two_chassis(ib_alpha, hop))) == (steps, steps)


def test_ring_alltoall_volume():
    # unidirectional 4-ring: each link carries 3 + 2 + 1 = 6 chunks, one a timestep
    ring = make_instance(topo("ring", {"nodes": 4, "bidirectional": False}), "alltoall")
    assert steps_and_bound(ring) == (6, 6)


def test_slots_beat_plain_order_on_two_chassis():
    # routing every chunk whole, farthest first, leaves the NIC links idle at the start
    inst = alltoall(two_chassis(2.5))
    assert steps_and_bound(inst, "order")[0] > steps_and_bound(inst, "slots")[0] == 35


def test_optimum_equals_per_source_flow_lp():
    """Where the schedule meets the bound (status optimal), TE-CCL's LP finds the same optimum."""
    inst = alltoall(two_chassis(2.5))
    ours = get_producer("earliest-arrival").run(inst, Options(time_limit=60))
    lp = get_producer("ten-source-flow-lp").run(inst, Options(time_limit=60))
    assert ours.status == "optimal" and lp.status == "optimal"
    assert ours.objective == lp.objective == 35


# ---- random topologies: verified, never below the bound -----------------------------------------

def random_topology(seed: int):
    rng = random.Random(seed)
    n = rng.randint(3, 6)
    g = nx.gnp_random_graph(n, 0.5, seed=seed, directed=True)
    g.add_edges_from((i, (i + 1) % n) for i in range(n))  # strongly connected
    bw = [1.0, 0.5, 0.25]
    edges = [(u, v, {"bandwidth": rng.choice(bw), "alpha": rng.choice([0.0, 1.5])}) for u, v in g.edges]
    return with_latency(from_edges(n, edges, name=f"random-{seed}"), rng.choice(["serial", "pipelined"]))


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("kind", ["alltoall", "scatter", "gather"])
def test_random_topologies_verify_and_respect_bound(seed, kind):
    t = random_topology(seed)
    inst = make_instance(t, kind, message_bytes=float(t.size), root=0 if kind != "alltoall" else None)
    for how in E.PLANS:
        steps_and_bound(inst, how)


# ---- pieces -----------------------------------------------------------------------------------

def test_assignment_respects_windows():
    inst = alltoall(two_chassis(2.5))
    data = ten.prepare(inst, 1, switch_copy=False)
    _, src, dst = E.endpoints(data)
    cx = E.crossing(data, 0, src, dst)
    assert len(cx.at) == 2 * 4 * 4  # every chunk between the chassis
    horizon, pair, dep = E.plan(data, 0, cx)
    assert horizon == 35
    col = np.searchsorted(cx.pairs, pair)
    rows = np.arange(len(cx.at))
    assert (dep >= cx.before[rows, col]).all()
    assert (dep + data.lag[0, pair] + cx.after[rows, col] <= horizon).all()
    slots = np.unique(np.stack([pair, dep]), axis=1)
    assert slots.shape[1] == len(pair)  # one chunk per slot (capacity 1)
    assert E.assign(data, 0, cx, horizon - 1) is None


def test_refuses_collectives_that_copy_or_combine():
    inst = alltoall(two_chassis())
    for kind in ("allgather", "reduce_scatter"):
        other = make_instance(inst.topology, kind, message_bytes=8.0)
        with pytest.raises(Unsupported):
            get_producer("earliest-arrival").run(other, Options(time_limit=10))


def test_unknown_plan_refused():
    with pytest.raises(ten.NotSupported):
        E.synthesize(alltoall(two_chassis()), "fastest")


# ---- TE-CCL's rows ------------------------------------------------------------------------------

@pytest.mark.parametrize("size, bound, teccl", [("1gb", 320, 322), ("1mb", 331, 337), ("64kb", 483, 529)])
def test_dgx2_two_chassis_alltoall_fast_epochs(size, bound, teccl):
    """TE-CCL's DGX-2 two-chassis all-to-all with fast epochs (its provided outputs: 322, 337
    and 529 epochs): the cut bound (per direction 256 chunks over 8 NICs, 32 sends of 10
    epochs each, plus the NIC latency of 0, 11 or 163 epochs) is met."""
    inst = load_instance(CORPUS / f"teccl-dgx2-2ch-alltoall-fast-{size}.toml")
    out = get_producer("earliest-arrival").run(inst, Options(time_limit=60))
    assert verify(out.schedule, inst) is None
    assert out.bound == bound and out.objective == bound < teccl
    assert out.status == "optimal"


def test_too_many_slots_routes_whole(monkeypatch):
    # above the edge cap no slots are assigned: every chunk is routed whole, still verified
    inst = alltoall(two_chassis(2.5))
    data = ten.prepare(inst, 1, switch_copy=False)
    _, src, dst = E.endpoints(data)
    monkeypatch.setattr(E, "MAX_EDGES", 10)
    assert E.plan(data, 0, E.crossing(data, 0, src, dst)) is None
    assert steps_and_bound(inst, "slots")[0] == steps_and_bound(inst, "order")[0]


def test_an_expired_deadline_stops_the_routing():
    with pytest.raises(TimeLimitReached):
        E.synthesize(alltoall(two_chassis()), deadline=Deadline.after(0.0))


@pytest.mark.parametrize("topology", [two_chassis(2.5), two_chassis(2.5, "instant")] +
                         [random_topology(seed) for seed in range(4)])
def test_a_lone_chunk_arrives_at_the_lag_weighted_distance(topology):
    # on an empty network the earliest arrival is the shortest path (Dijkstra on the lags)
    inst = make_instance(topology, "alltoall", message_bytes=float(topology.size))
    data = ten.prepare(inst, 1, switch_copy=False)
    _, src, dst = E.endpoints(data)
    every = np.ones(len(data.src), bool)
    for s, d in zip(src.tolist(), dst.tolist()):
        hops = E.Network.empty(data, 4).route(0, s, 0, d, every)
        assert hops[0, 1] == data.dist[0, s, d]
        assert data.src[hops[-1, 0]] == s and data.dst[hops[0, 0]] == d


def test_best_plan_is_the_shorter_one():
    # a scatter sends every chunk through its root's one port, which the slots ignore
    inst = make_instance(two_chassis(2.5), "scatter", message_bytes=8.0, root=3)
    found = E.synthesize_plans(inst, "best")
    assert set(found) == {"slots", "order"} and all(verify(s, inst) is None for s in found.values())
    out = get_producer("earliest-arrival").run(inst, Options(time_limit=30))
    assert out.objective == min(s.num_steps for s in found.values())
    assert out.extra["steps_by_plan"] == {p: s.num_steps for p, s in found.items()}
    assert out.schedule.num_steps == found[out.extra["plan"]].num_steps
