"""A schedule's declared link order (``link_order = "program"``, tens/schedule.py): every send
out of an NPU waits for the start of the send before it on its link; switches forward as
things arrive. The event and TEN models honour it; without it nothing changes."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsynth import InputError
from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.instances.topology import from_edges
from collsynth.tens import cost_models, verify
from collsynth.tens.schedule import from_arrays, from_json, from_sends, reverse, to_json
from collsynth.tens.time_reversal import reversed_in_time

H = Fraction(1, 2)


def _triangle():
    """0 -> 1 -> 2 and 0 -> 2 (each also backwards), 1 byte/s, no latency."""
    edges = [(u, v, {"bandwidth": 1.0, "alpha": 0.0}) for u, v in ((0, 1), (1, 2), (0, 2))]
    return from_edges(3, edges + [(v, u, d) for u, v, d in edges])


def _price(schedule, instance, model, **options):
    assert verify.verify(schedule, instance) is None
    return cost_models.price(schedule, instance, model, **options).total_s


def test_a_relay_held_ahead_of_own_data_by_hand():
    """A reduce to 0 of 2 bytes (the reversal of a broadcast: 1 relays the half ``[0, 1/2)``
    that 2 sends it, and sends its own half ``[1/2, 1)``; 2 sends the other half to 0 directly).
    By hand, 1 byte/s: 2's half reaches 1 at 1 s. Listed relay first (the step reversal), a
    FIFO link sends 1's own half over [0, 1] and the relay over [1, 2]: 2 s; declared in
    program order the link waits for the relay, [1, 2], then the own half, [2, 3]: 3 s, as the
    in-order model. Listed own half first (the exact reversal), 2 s either way."""
    topo = _triangle()
    bcast = from_sends([(0, 0, H, 0, 1, 1), (0, H, 1, 0, 1, 1), (0, H, 1, 0, 2, 1), (0, 0, H, 1, 2, 2)],
                       "broadcast", nodes=3, chunks=1)
    reduce = make_instance(topo, "reduce", message_bytes=2.0, root=0)
    steps_only, exact = reverse(bcast), reversed_in_time(bcast)
    assert _price(steps_only, reduce, "event") == 2.0
    assert _price(replace(steps_only, link_order="program"), reduce, "event") == 3.0
    assert _price(replace(steps_only, link_order="program"), reduce, "event-inorder") == 3.0
    assert _price(exact, reduce, "event") == 2.0
    assert _price(replace(exact, link_order="program"), reduce, "event") == 2.0


def _through_a_switch():
    """GPUs 0, 1, 2 and switch 3: 0 -> 3 at 1 byte/s, 1 -> 3 at 1/2 byte/s, 3 -> 2 at 1 byte/s,
    and direct links 0 <-> 1, 2 -> 0, 2 -> 1 at 1 byte/s; no latency."""
    fast, slow = {"bandwidth": 1.0, "alpha": 0.0}, {"bandwidth": 0.5, "alpha": 0.0}
    edges = [(0, 3, fast), (1, 3, slow), (3, 2, fast), (0, 1, fast), (1, 0, fast), (2, 0, fast), (2, 1, fast)]
    return from_edges(4, edges, switches=[3])


def test_a_switch_forwards_in_arrival_order():
    """An allgather of 1-byte chunks where 0's and 1's reach 2 through the switch, the switch's
    forwards listed 1's first. By hand: 0's chunk reaches the switch at 1 s, 1's (half the
    bandwidth) at 2 s. A switch serves its port as things arrive: 0's over [1, 2], 1's over
    [2, 3], 3 s, declared or not (each GPU sends one message a link, so a GPU's order changes
    nothing). The in-order model serves the port as listed: 1's over [2, 3], 0's over [3, 4]:
    4 s."""
    inst = make_instance(_through_a_switch(), "allgather", message_bytes=3.0)
    sched = from_sends([(1, 0, 1, 1, 3, 1), (0, 0, 1, 0, 3, 1), (0, 0, 1, 0, 1, 1), (1, 0, 1, 1, 0, 1),
                        (2, 0, 1, 2, 0, 1), (2, 0, 1, 2, 1, 1), (1, 0, 1, 3, 2, 2), (0, 0, 1, 3, 2, 2)],
                       "allgather", nodes=4, chunks=3)
    assert _price(sched, inst, "event") == 3.0
    assert _price(replace(sched, link_order="program"), inst, "event") == 3.0
    assert _price(sched, inst, "event-inorder") == 4.0


def test_ten_does_not_back_fill_ahead_of_a_declared_order():
    """The in-order model's line (tens/cost_models/event_inorder.py): 0 -> 1 -> 2, 1 byte/s,
    1-byte chunks, a timestep of 1 s; 1 relays chunk 0 (it arrives in timestep 1) and sends its
    own chunk 1, the relay listed first. TACOS' dispatch back-fills chunk 1 into timestep 1
    (2 timesteps); declared in program order it waits for the relay's start in timestep 2 and
    leaves in timestep 3."""
    line = build("ring", {"nodes": 3, "bidirectional": False}, bandwidth=1.0, alpha=0.0)
    inst = make_instance(line, "allgather", message_bytes=3.0)
    s = from_arrays("allgather", 3, 3, chunk=[0, 0, 1], src=[0, 1, 1], dst=[1, 2, 2], step=[1, 2, 2])
    assert cost_models.price(s, inst, "ten", timestep=1.0).total_s == 2.0
    assert cost_models.price(replace(s, link_order="program"), inst, "ten", timestep=1.0).total_s == 3.0
    assert cost_models.price(replace(s, link_order="program"), inst, "event").total_s == 3.0


def _ring_allgather(n: int, pieces: int, order: np.random.Generator):
    """A pipelined unidirectional ring allgather of ``pieces`` pieces a shard, the sends of each
    step shuffled by ``order``."""
    rows = [(r, Fraction(q, pieces), Fraction(q + 1, pieces), (r + h) % n, (r + h + 1) % n, q + h + 1)
            for r in range(n) for q in range(pieces) for h in range(n - 1)]
    rows = [rows[i] for i in order.permutation(len(rows))]
    rows.sort(key=lambda row: row[5])
    return from_sends(rows, "allgather", nodes=n, chunks=n)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(3, 6), pieces=st.integers(1, 4), seed=st.integers(0, 2**16),
       bandwidths=st.lists(st.sampled_from([0.5, 1.0, 2.0]), min_size=6, max_size=6))
def test_without_switches_the_declared_order_is_the_in_order_model(n, pieces, seed, bandwidths):
    """On a ring without switches every link's messages leave NPUs, so the event model with
    the order declared serves every link in step order: it equals the in-order model (a second
    implementation: one pass over the sends), the allgather and its reduce-scatter reversal,
    with exact dependencies and with group prefixes alike."""
    edges = [(i, (i + 1) % n, {"bandwidth": bandwidths[i], "alpha": 1e-3 * i}) for i in range(n)]
    edges += [((i + 1) % n, i, {"bandwidth": 1.0, "alpha": 0.0}) for i in range(n)]
    topo = from_edges(n, edges)
    ag = _ring_allgather(n, pieces, np.random.default_rng(seed))
    rs = reverse(ag)
    for sched, kind in ((ag, "allgather"), (rs, "reduce_scatter")):
        inst = make_instance(topo, kind, message_bytes=float(n * pieces))
        declared = replace(sched, link_order="program")
        for exact in (True, False):
            assert _price(declared, inst, "event", exact_deps=exact) == pytest.approx(
                _price(sched, inst, "event-inorder", exact_deps=exact), rel=1e-12)


def test_json_round_trip_and_bad_value():
    s = from_sends([(0, 0, 1, 0, 1, 1)], "allgather", nodes=2, chunks=2)
    assert "link_order" not in to_json(s)
    back = from_json(to_json(replace(s, link_order="program")))
    assert back.link_order == "program" and back.sends() == s.sends()
    data = {**to_json(s), "link_order": "fastest"}
    with pytest.raises(InputError, match="s.json: link_order: expected one of ready, program, got 'fastest'"):
        from_json(data, "s.json")


def test_concatenation_keeps_a_declared_order():
    rs = from_sends([(0, 0, 1, 1, 0, 1)], "reduce_scatter", nodes=2, chunks=2)
    ag = from_sends([(0, 0, 1, 0, 1, 1)], "allgather", nodes=2, chunks=2)
    from collsynth.tens.schedule import concat
    assert concat(rs, ag, "allreduce").link_order == "ready"
    assert concat(replace(rs, link_order="program"), ag, "allreduce").link_order == "program"


def _step_dependencies(xml: str) -> list[tuple[int, int, int]]:
    """``(gpu, thread block, thread block depended on)`` of every step naming a dependency."""
    import xml.etree.ElementTree as ET

    return [(int(g.get("id")), int(tb.get("id")), int(step.get("depid")))
            for g in ET.fromstring(xml).findall("gpu") for tb in g.findall("tb") for step in tb.findall("step")
            if step.get("depid") != "-1"]


def test_msccl_export_waits_for_the_previous_send_on_the_link():
    """A broadcast from 0 through a switch, to 1 then to 2: the two sends run in two thread
    blocks of GPU 0 (one a peer) and nothing else orders them (0 holds the data from the start).
    Declared in program order, the send to 2 waits for the thread block of the send to 1; the
    program still runs the broadcast."""
    from msccl_sim import run_msccl

    from collsynth.tens.readback import verified_msccl_xml

    port = {"bandwidth": 1e11, "alpha": 5e-7}
    edges = [(u, 3, port) for u in range(3)] + [(3, u, port) for u in range(3)]
    inst = make_instance(from_edges(4, edges, switches=[3]), "broadcast", root=0)
    s = from_sends([(0, 0, 1, 0, 3, 1), (0, 0, 1, 3, 1, 2), (0, 0, 1, 0, 3, 2), (0, 0, 1, 3, 2, 3)],
                   "broadcast", 4, 1)
    assert _step_dependencies(verified_msccl_xml(s, inst)) == []
    xml = verified_msccl_xml(replace(s, link_order="program"), inst)
    run_msccl(xml, "broadcast", root=0)
    (gpu, tb, on), = _step_dependencies(xml)
    assert gpu == 0 and tb != on
