"""The greedy's combining collectives through kept switch nodes: reduce-scatter and reduce as
the reversal of allgather / broadcast matched on the transposed topology without multicast,
allreduce as reduce-scatter then allgather (Won et al., "TACOS", arXiv:2304.05301, §VII-A); a
switch relays each partial sum once and the GPUs reduce (the relay rule of
:func:`collsynth.tens.verify._relayed_violation`).

Step counts are derived by hand in the comments (NPUs on one switch, every link 1 B/s, 1-byte
chunks: one timestep per hop); the systems and random small switched boxes check that every
schedule verifies and that its priced times never beat the instance's bounds.
"""

from __future__ import annotations

from dataclasses import replace

import networkx as nx
import pytest
from hypothesis import assume, given, settings, strategies as st

from collsynth import api
from collsynth.instances.switch_ops import with_switch_ops
from collsynth.instances.topology import from_edges, with_latency
from collsynth.instances.instance import make_instance
from collsynth.solvers.greedy import tacos as greedy
from collsynth.solvers.producers import Unsupported
from collsynth.tens import bounds, cost
from collsynth.tens.bounds import instance_bounds
from collsynth.tens.verify import verify
from builders import instance_on
from switch_strategies import switch_topologies
from test_greedy_switch import on_switch, seeds


@pytest.mark.parametrize("hop, nodes, expected", [
    # reduce-scatter, N NPUs on one switch: each NPU's contributions to the N - 1 chunks of
    # the others are different chunks, so its one link up carries N - 1 sends, the last in
    # timestep N - 1 at the earliest. Timestep hop: the switch forwards it in the next, so
    # >= N; instant hop: within that timestep, >= N - 1. Reached: NPU i sends its part of chunk
    # i + s up in timestep s, and NPU i + s receives it at once (instant) or in s + 1.
    ("timestep", 3, 3),
    ("instant", 3, 2),
    ("timestep", 4, 4),
    ("instant", 4, 3),
])
def test_reduce_scatter_steps_by_hand_on_one_switch(hop, nodes, expected):
    inst = on_switch("reduce_scatter", hop, nodes=nodes)
    got = seeds(inst, 8)
    assert min(got) == expected and all(g >= expected for g in got)
    s = greedy.synthesize(inst, got.index(expected))
    assert s.meta["switch_copy"] is False  # each partial sum relayed on its own
    assert sum(int(v) == nodes for v in s.dst) == nodes * (nodes - 1)  # every contribution up once


def test_reduce_scatter_on_three_gpus_is_priced_by_hand():
    # 3 steps of one 1-byte chunk per link at 1 B/s, alpha 0: 3 s in both models, and the
    # instance's bounds (2 s: 2 bytes out of every NPU) below
    r = api.solve(on_switch("reduce_scatter", "timestep", nodes=3), "greedy", starts=2)
    assert r.verified and r.row["steps"] == 3
    assert r.row["time_sync_s"] == pytest.approx(3.0) and r.row["time_event_s"] == pytest.approx(3.0)


def _within_bounds(s, inst):
    """The schedule verifies, fits the TEN's capacity, and no priced time beats a bound."""
    assert verify(s, inst) is None, str(verify(s, inst))
    assert bounds.respects_ten_capacity(s, inst, s.meta["timestep_s"])
    assert s.num_steps >= greedy.lower_bound(inst)
    b = instance_bounds(inst)
    assert cost.price_sync(s, inst).total_s >= b.sync.value * (1 - 1e-9)
    if inst.topology.meta.get("switch_hop") != "instant":  # the event model refuses instant hops
        assert cost.price_event(s, inst).total_s >= b.event.value * (1 - 1e-9)


@pytest.mark.parametrize("generator, params", [
    ("dgx_h100", {"nodes": 1}),
    ("dgx_h100", {"nodes": 2}),
    ("forestcoll_a100", {"nodes": 2}),
    ("switch", {"nodes": 4, "unwind": 0}),
])
@pytest.mark.parametrize("kind", ["reduce_scatter", "allreduce", "reduce"])
def test_systems_verify_and_are_priced(generator, params, kind):
    inst = instance_on(generator, params, kind, message_bytes=1e9, **({"root": 0} if kind == "reduce" else {}))
    _within_bounds(greedy.synthesize(inst, 0), inst)


def test_the_producer_row_on_a_switched_box():
    r = api.solve(instance_on("dgx_h100", {"nodes": 2}, "allreduce", message_bytes=1e9), "greedy", starts=2)
    assert r.verified and r.row["status"] == "heuristic"
    assert r.row["time_sync_s"] > 0 and r.row["time_event_s"] > 0


def test_instant_hops_between_switches_stay_valid_reversed():
    # NPUs 0, 1 on switch 4 and 2, 3 on switch 5, the switches joined, instant hop: the dual's
    # route 2 -> 5 -> 4 -> 0 saves its timestep into NPU 0; reversed, 0 -> 4 -> 5 -> 2 saves
    # it into NPU 2, so the hop 4 -> 5 leaves the timestep after 0 -> 4 arrives
    edges = [(0, 4), (4, 0), (1, 4), (4, 1), (2, 5), (5, 2), (3, 5), (5, 3), (4, 5), (5, 4)]
    topo = from_edges(6, edges, bandwidth=1.0, alpha=0.0, switches=[4, 5], meta={"switch_hop": "instant"})
    inst = make_instance(topo, "reduce_scatter", message_bytes=4.0)
    s = greedy.synthesize(inst, 0)
    _within_bounds(s, inst)
    up = {(int(c), int(u)): int(t) for c, u, v, t in zip(s.chunk, s.src, s.dst, s.step) if v in (4, 5) and u < 4}
    between = [(int(c), int(t)) for c, u, v, t in zip(s.chunk, s.src, s.dst, s.step) if u >= 4 and v >= 4]
    assert between and all(t > min(up[(c, u)] for u in range(4) if (c, u) in up) for c, t in between)


@settings(max_examples=40, deadline=None)
@given(switch_topologies(slow_between_switches=True, timing=True),
       st.sampled_from(["reduce_scatter", "allreduce", "reduce"]), st.integers(1, 2), st.integers(0, 3))
def test_every_combining_schedule_on_random_switched_boxes_verifies(topo, kind, chunks, seed):
    assume(nx.is_strongly_connected(topo.graph))
    n = len(topo.npus)
    inst = make_instance(topo, kind, message_bytes=float(n * chunks), chunks_per_node=chunks,
                         **({"root": 0} if kind == "reduce" else {}))
    if topo.meta.get("latency") == "pipelined":  # relays of partial sums are verified under a serial latency only
        with pytest.raises(Unsupported, match="pipelined"):
            greedy.synthesize(inst, seed)
        return
    _within_bounds(greedy.synthesize(inst, seed), inst)


def test_switches_that_compute_and_pipelined_latency_are_refused_in_one_line():
    reducing = on_switch("reduce_scatter", nodes=3)
    reducing = make_instance(with_switch_ops(reducing.topology, reduce=[3]), "reduce_scatter", message_bytes=3.0)
    r = api.solve(reducing, "greedy")
    assert not r.verified and "reduce or multicast" in r.row["message"] and "\n" not in r.row["message"]
    piped = on_switch("allreduce", nodes=3)
    piped = make_instance(with_latency(piped.topology, "pipelined"), "allreduce", message_bytes=3.0)
    with pytest.raises(Unsupported, match="pipelined latency"):
        greedy.synthesize(piped, 0)
    one = on_switch("reduce_scatter", nodes=3)
    both = replace(one, collectives=(one.collective, on_switch("allgather", nodes=3).collective))
    with pytest.raises(Unsupported, match="concurrent"):
        greedy.synthesize(both, 0)
