"""The greedy on topologies that keep switch nodes (TE-CCL's model, Liu et al., SIGCOMM 2024,
Section 4): a switch stores nothing and forwards the timestep after an arrival or within it
(``switch_hop``), with or without multicast (``switch_copy``), serial or pipelined latency.

Step counts are derived by hand in the comments (4 NPUs on one switch, every link 1 B/s, 1-byte
chunks: one timestep per hop); random small instances check that every schedule verifies,
respects the switch ports' capacity and never beats the lower bounds.
"""

from __future__ import annotations

from dataclasses import replace

import networkx as nx
import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from collsynth import api
from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.instances.topology import from_edges, with_latency
from collsynth.solvers.greedy import engine, tacos as greedy
from collsynth.tens import bounds
from collsynth.tens.verify import verify
from switch_strategies import switch_topologies
from builders import instance_on


def on_switch(kind="allgather", hop="timestep", nodes=4, alpha=0.0, pipelined=False, message=None, **kw):
    """``nodes`` NPUs on one kept switch (id ``nodes``), 1 B/s links, a ``message`` of
    ``nodes`` bytes (one 1-byte chunk per NPU in an allgather)."""
    topo = build("switch", {"nodes": nodes, "unwind": 0}, bandwidth=1.0, alpha=alpha)
    topo = replace(topo, meta={**topo.meta, "switch_hop": hop})
    if pipelined:
        topo = with_latency(topo, "pipelined")
    return make_instance(topo, kind, message_bytes=float(message or nodes), **kw)


def seeds(inst, n, **kw):
    """Steps of seeds 0..n-1; each schedule verified and within the switch ports' capacity."""
    out = []
    for seed in range(n):
        s = greedy.synthesize(inst, seed, **kw)
        assert verify(s, inst) is None, str(verify(s, inst))
        assert bounds.respects_ten_capacity(s, inst, s.meta["timestep_s"])
        out.append(s.num_steps)
    return out


@pytest.mark.parametrize("kind, kw, hop, copy, expected", [
    # allgather: each NPU lacks 3 chunks and its one port out of the switch carries one per
    # timestep. Instant hop: NPU -> switch -> NPU within a timestep, so 3. Timestep hop: that
    # port can carry nothing in timestep 1 (the switch starts empty): 1 + 3 = 4.
    ("allgather", {}, "instant", True, 3),
    ("allgather", {}, "timestep", True, 4),
    ("allgather", {}, "instant", False, 3),  # NPU i sends its chunk up for NPU i + s in timestep s
    # without copy, timestep hop: NPU i sends its chunk up for NPU i + s in timestep s = 1..3,
    # each forwarded in the next: 4, as with copy
    ("allgather", {}, "timestep", False, 4),
    # all-to-all: each NPU receives 3 chunks through its port out of the switch, as allgather
    ("alltoall", {}, "instant", True, 3),
    # broadcast from 0: with copy, up in 1 and multicast to the 3 others (in 2, or in 1 with an
    # instant hop); without copy every send out of the switch needs its own arrival and NPU 0
    # has one port up: instant, one delivery in 1, then two holders send up in 2; timestep hop,
    # holders {0} send up in 1, {0, a} in 2 (a got it at the end of 2 only), so the deliveries
    # end at 2, 3 and 4
    ("broadcast", {"root": 0}, "timestep", True, 2),
    ("broadcast", {"root": 0}, "instant", True, 1),
    ("broadcast", {"root": 0}, "instant", False, 2),
    ("broadcast", {"root": 0}, "timestep", False, 4),
])
def test_steps_by_hand_on_one_switch(kind, kw, hop, copy, expected):
    inst = on_switch(kind, hop, **kw)
    got = seeds(inst, 8, switch_copy=copy)
    assert min(got) == expected and all(g >= expected for g in got)
    s = greedy.synthesize(inst, got.index(expected), switch_copy=copy)
    assert s.meta["switch_copy"] is copy and s.meta["switch_hop"] == hop
    assert expected >= bounds.lower_bound(inst)


def test_copy_multicasts_and_no_copy_sends_each_forward_up():
    # broadcast from 0 on the copying timestep-hop switch: one send up, three down (step 2)
    s = greedy.synthesize(on_switch("broadcast", "timestep", root=0), 0, switch_copy=True)
    assert sorted((int(u), int(v), int(t)) for u, v, t in zip(s.src, s.dst, s.step)) == \
        [(0, 4, 1), (4, 1, 2), (4, 2, 2), (4, 3, 2)]
    # without copy: as many sends into the switch as out of it, each one timestep before its forward
    s = greedy.synthesize(on_switch("broadcast", "timestep", root=0), 0, switch_copy=False)
    into = sorted(int(t) for v, t in zip(s.dst, s.step) if v == 4)
    out = sorted(int(t) - 1 for u, t in zip(s.src, s.step) if u == 4)
    assert into == out and len(out) == 3


@pytest.mark.parametrize("hop, expected", [
    # pipelined: a hop occupies its link 1 timestep and arrives 2 later (alpha 2 s, 1 s
    # chunks): up in 1, at the switch at the end of 3; the timestep hop leaves in 4 and
    # arrives at the end of 6, the instant hop leaves in 3 and arrives at the end of 5
    ("timestep", 6),
    ("instant", 5),
])
def test_pipelined_latency_through_a_switch_by_hand(hop, expected):
    inst = on_switch("broadcast", hop, nodes=3, alpha=2.0, pipelined=True, root=0, message=1)
    assert seeds(inst, 2) == [expected, expected]


def test_pipelined_allgather_through_an_instant_switch_by_hand():
    # 3 NPUs, alpha 2 s pipelined, instant hop: a route NPU -> switch -> NPU arrives 3 + 3 - 1
    # = 5 timesteps after it starts; each NPU's port out of the switch carries its 2 missing
    # chunks in consecutive timesteps at the earliest (3 and 4): arrivals at the ends of 5 and 6
    inst = on_switch("allgather", "instant", nodes=3, alpha=2.0, pipelined=True)
    got = seeds(inst, 4)
    assert min(got) == 6 and bounds.lower_bound(inst) <= 6


def test_routes_through_a_switch():
    # 3 NPUs on switch 3: every NPU pair one route up and down; timestep hop: 2 timesteps,
    # instant: 1; the links touching the switch are the ports, no NPU link to the switch is
    # matched as a link of its own
    for hop, delay in (("timestep", 2), ("instant", 1)):
        inst = on_switch("allgather", hop, nodes=3)
        lk = engine.links(inst.topology, 1.0)
        pairs = sorted((int(u), int(v)) for u, v in zip(lk.src, lk.dst))
        assert pairs == [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]
        assert set(lk.delay.tolist()) == {delay} and (lk.route >= 0).all() and lk.instant is (hop == "instant")


def test_chains_of_switches_and_direct_links():
    # NPUs 0, 1 on switch 4, NPUs 2, 3 on switch 5, the switches joined, and a direct 0 -> 3
    # link: routes 0 -> 4 -> 5 -> 2 take 3 timesteps (timestep hop), the direct link stays one
    fast = {"alpha": 0.0, "bandwidth": 1.0}
    edges = [(0, 4, fast), (4, 0, fast), (1, 4, fast), (4, 1, fast), (2, 5, fast), (5, 2, fast), (3, 5, fast),
             (5, 3, fast), (4, 5, fast), (5, 4, fast), (0, 3, fast)]
    topo = from_edges(6, edges, switches=[4, 5])
    lk = engine.links(topo, 1.0)
    delay = {(int(u), int(v), int(r) >= 0): int(d) for u, v, r, d in zip(lk.src, lk.dst, lk.route, lk.delay)}
    assert delay[(0, 2, True)] == 3 and delay[(0, 1, True)] == 2 and delay[(0, 3, False)] == 1
    inst = make_instance(topo, "allgather", message_bytes=4.0)
    for copy in (True, False):
        got = seeds(inst, 3, switch_copy=copy)
        assert min(got) >= bounds.lower_bound(inst)


def test_an_instant_hop_saves_only_the_timestep_into_the_npu():
    # the same chains with an instant hop (TE-CCL's switch-to-GPU link): 0 -> 4 -> 1 in 1
    # timestep; 0 -> 4 -> 5 -> 2 in 2 (4 -> 5 leaves the timestep after the arrival at 4, as
    # between switches it always does; 5 -> 2 in the same timestep as the arrival at 5), one
    # more than with every hop out of a switch instant
    fast = {"alpha": 0.0, "bandwidth": 1.0}
    edges = [(0, 4, fast), (4, 0, fast), (1, 4, fast), (4, 1, fast), (2, 5, fast), (5, 2, fast), (3, 5, fast),
             (5, 3, fast), (4, 5, fast), (5, 4, fast)]
    topo = from_edges(6, edges, switches=[4, 5], meta={"switch_hop": "instant"})
    lk = engine.links(topo, 1.0)
    delay = {(int(u), int(v)): int(d) for u, v, d in zip(lk.src, lk.dst, lk.delay)}
    assert delay[(0, 1)] == 1 and delay[(0, 2)] == 2 and delay[(3, 0)] == 2
    R = lk.routes
    r = int(np.flatnonzero((R.src == 0) & (R.dst == 2))[0])
    assert R.off[R.hop_ptr[r]:R.hop_ptr[r + 1]].tolist() == [0, 1, 1]
    inst = make_instance(topo, "broadcast", root=0, message_bytes=1.0)
    assert bounds.lower_bound(inst) == 2
    for copy in (True, False):
        assert min(seeds(inst, 2, switch_copy=copy)) >= 2


def test_two_switches_linked_both_ways_are_no_shortcut():
    # GPU 1's only out-link to switch 2 holds each of its 2 chunks for 2 timesteps: >= 4
    # (tests/test_switch.py derives 4 as the optimum); the greedy's schedules verify
    topo = from_edges(4, [(0, 2), (2, 0), (1, 2, {"bandwidth": 0.5}), (2, 1), (2, 3), (3, 2)], bandwidth=1.0,
                      alpha=0.0, switches=[2, 3], meta={"latency": "pipelined", "switch_hop": "instant"})
    inst = make_instance(topo, "allgather", chunks_per_node=2, message_bytes=2.0)
    for copy in (True, False):
        assert min(seeds(inst, 2, switch_copy=copy)) >= 4


@settings(max_examples=40, deadline=None)
@given(switch_topologies(slow_between_switches=True, timing=True),
       st.sampled_from(["allgather", "broadcast", "scatter", "gather", "alltoall"]),
       st.booleans(), st.integers(1, 2), st.integers(0, 3))
def test_every_schedule_verifies_and_meets_the_bounds(topo, kind, copy, chunks, seed):
    assume(nx.is_strongly_connected(topo.graph))
    kw = {"root": 0} if kind in ("broadcast", "scatter", "gather") else {}
    n = len(topo.npus)
    inst = make_instance(topo, kind, message_bytes=float(n * chunks), chunks_per_node=chunks, **kw)
    s = greedy.synthesize(inst, seed, switch_copy=copy)
    assert verify(s, inst) is None, str(verify(s, inst))
    assert s.meta["switch_copy"] is copy
    assert bounds.respects_ten_capacity(s, inst, s.meta["timestep_s"])
    assert s.num_steps >= bounds.lower_bound(inst)



def test_producer_row_on_a_kept_switch_is_verified_and_bounded():
    r = api.solve(on_switch("alltoall", "instant"), "greedy")
    assert r.verified and r.row["steps"] >= r.bounds["lower_bound_timesteps"]


def test_nics_beside_switch_ports_are_the_slow_links_between_chassis_islands():
    # DGX-2, 2 chassis, TE-CCL's slow epoch: a route through an NVSwitch and a NIC link both
    # take 3 epochs, but a switch port carries 10 chunks per epoch and a NIC 1; the NICs are
    # the slower class, and the islands of the faster links are the two chassis (GPU 16c + g)
    from collsynth.instances import CORPUS, load_instance
    from collsynth.instances.instance import epoch_timestep

    inst = load_instance(CORPUS / "teccl-dgx2-2ch-allgather-slow-1mb.toml")
    lk = engine.links(inst.topology, greedy._chunk_bytes(inst), epoch_timestep(inst))
    assert set(lk.delay.tolist()) == {3}
    rate = engine.link_rate(lk)
    assert set(rate[lk.route >= 0].tolist()) == {10.0} and set(rate[lk.route < 0].tolist()) == {1.0}
    isl = engine._islands(lk, greedy._problem([greedy._Part(0, inst.collective, 0)], inst.topology.size)[0])
    nic = int(isl.cls[lk.route < 0][0])
    assert nic == 1 and set(isl.cls[lk.route >= 0].tolist()) == {0}
    chassis = isl.label[nic, :32]
    assert len(set(chassis[:16].tolist())) == 1 and len(set(chassis[16:].tolist())) == 1
    assert chassis[0] != chassis[16]


@pytest.mark.parametrize("kind", ["alltoall", "scatter"])
def test_relays_through_chains_of_switches_verify(kind):
    # MI250, 2 nodes: GCD -> NIC switch -> fabric switch -> NIC switch -> GCD chains; a relay
    # whose own delivery turned out useless still fed a multicast arrival other routes shared,
    # so the sends that brought the chunk to it must stay
    inst = instance_on("mi250", {"nodes": 2}, kind, message_bytes=1 << 20, **({"root": 1} if kind == "scatter" else {}))
    for copy in (True, False):
        s = greedy.synthesize(inst, 0, switch_copy=copy)
        assert verify(s, inst) is None, str(verify(s, inst))
        assert s.num_steps >= bounds.lower_bound(inst)


@pytest.mark.parametrize("hop", ["timestep", "instant"])
@pytest.mark.parametrize("copy", [True, False])
def test_concurrent_collectives_share_the_switch_ports(hop, copy):
    # a broadcast and an allgather matched jointly: the merged schedule declares how the
    # switch forwards and its TEN timestep, verifies, and the two never overfill a port
    one = on_switch("broadcast", hop, root=0)
    both = replace(one, collectives=(one.collective, on_switch("allgather", hop).collective))
    s = greedy.synthesize(both, 0, switch_copy=copy)
    assert s.meta["switch_copy"] is copy and s.meta["switch_hop"] == hop
    assert verify(s, both) is None and bounds.respects_ten_capacity(s, both, s.meta["timestep_s"])
    assert s.num_steps >= greedy.lower_bound(both)  # in the greedy's timestep: the larger chunk's
