"""A pipelined link latency (topology latency = "pipelined", TE-CCL's model: Liu et al., SIGCOMM
2024, Section 4): a link is busy for the transmission, alpha only delays the arrival.

Every expected value below is derived by hand in the comments, on rings with bandwidth 1 B/s,
1-byte chunks (a 1 s transmission, the timestep) and alpha 2 s (2 timesteps of latency).
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from collsynth import api
from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.instances.topology import with_latency
from collsynth.tens import bounds
from collsynth.tens.cost import price_event, price_sync, price_ten
from collsynth.tens.schedule import from_arrays
from collsynth.tens.ten import link_delays, link_latency, prepare
from collsynth.tens.verify import verify
from ilp_oracle import solves_by


def ring(n: int, alpha: float = 2.0, pipelined: bool = True):
    t = build("ring", {"nodes": n, "bidirectional": False}, bandwidth=1.0, alpha=alpha)
    return with_latency(t, "pipelined") if pipelined else t


def allgather(n: int, chunks: int = 1, alpha: float = 2.0, pipelined: bool = True):
    return make_instance(ring(n, alpha, pipelined), "allgather", chunks_per_node=chunks, message_bytes=float(n * chunks))


def ring_schedule(n: int, steps, timestep: float = 1.0):
    """Node u forwards, in hop h, the chunk that started h hops behind it; ``steps[h]`` is hop h's arrival."""
    hops = range(n - 1)
    return from_arrays("allgather", n, n, chunk=[(u - h) % n for h in hops for u in range(n)],
                       src=[u for h in hops for u in range(n)], dst=[(u + 1) % n for h in hops for u in range(n)],
                       step=[steps[h] for h in hops for u in range(n)], meta={"timestep_s": timestep})


def test_three_numbers_of_a_link():
    # transmission 1 s = the timestep: occupancy 1; alpha 2 s: 2 more timesteps; lag 3
    inst = allgather(3)
    data = prepare(inst, 10)
    assert data.delay.tolist() == [[1, 1, 1]] and data.latency.tolist() == [2, 2, 2]
    assert data.lag.tolist() == [[3, 3, 3]] and data.timestep == 1.0
    first, last = data.occupied(0, 0, 7)
    assert (int(first), int(last)) == (5, 5)  # arrives at the end of 7: on the link in 5 only
    # the serial model charges alpha + transmission = 3 s as occupancy and arrival: one 3 s timestep
    serial = prepare(allgather(3, pipelined=False), 10)
    assert serial.delay.tolist() == [[1, 1, 1]] and serial.latency.tolist() == [0, 0, 0] and serial.timestep == 3.0
    # TE-CCL's threshold: alpha / timestep <= 0.1 adds nothing (0.1 s / 1 s), 0.11 s adds one timestep
    assert link_latency(ring(3, 0.1), 1.0).tolist() == [0, 0, 0]
    assert link_latency(ring(3, 0.11), 1.0).tolist() == [1, 1, 1]
    # a 4 s timestep on a pipelined link: 4 chunks per timestep (alpha does not eat the epoch)
    assert link_delays(ring(3), 1.0, 4.0)[1].tolist() == [4, 4, 4]
    assert link_delays(ring(3, pipelined=False), 1.0, 4.0)[1].tolist() == [2, 2, 2]


@pytest.mark.parametrize("n, chunks, optimum", [
    # one chunk per node: the 2-hop chunk arrives at 3 + 3 = 6 (each hop: 1 on the link + 2 latency)
    (3, 1, 6),
    # two chunks per node: a link sends its node's two chunks in timesteps 1, 2 (arriving 3, 4) and
    # forwards the neighbour's in 4, 5 (arriving 6, 7); nothing can leave before its arrival: 7
    (3, 2, 7),
    # four nodes, one chunk: three hops of 3 timesteps
    (4, 1, 9),
])
def test_ten_ilp_optimum_by_hand(n, chunks, optimum):
    r = api.solve(allgather(n, chunks), "ten-ilp", time_limit=60)
    assert r.verified and r.row["steps"] == optimum
    assert r.bounds["lower_bound_timesteps"] <= optimum
    assert solves_by(allgather(n, chunks), optimum - 1) is False  # solved there directly: not from the bound


def test_latency_overlaps_the_next_chunk_cheaper_than_serial():
    # serial: 3 s per chunk per link, two chunks per node on a 3-ring: 4 timesteps of 3 s = 12 s;
    # pipelined: 7 timesteps of 1 s (above)
    serial = api.solve(allgather(3, 2, pipelined=False), "ten-ilp", time_limit=60)
    piped = api.solve(allgather(3, 2), "ten-ilp", time_limit=60)
    assert serial.row["steps"] * 3.0 == 12.0 and piped.row["steps"] * 1.0 == 7.0


def test_verifier_accepts_and_rejects_by_hand():
    inst = allgather(3)
    assert verify(ring_schedule(3, [3, 6]), inst) is None  # arrivals 3 and 6: exactly the lag
    v = verify(ring_schedule(3, [3, 5]), inst)  # the second hop would read its source at the end of 2
    assert v is not None and v.step == 5 and "end of step 2" in v.reason
    v = verify(ring_schedule(3, [2, 5]), inst)  # the first hop would start before step 1
    assert v is not None and v.step == 2 and "before step 1" in v.reason
    # two chunks over one link in the same timestep (arrivals 3 and 3 on 0->1, capacity 1): valid
    # sends (congestion is priced, not refused), but not within the TEN's capacity by occupancy
    # (both occupy timestep 1), so the timesteps bound does not apply to them
    inst2 = allgather(3, 2)
    two = from_arrays("allgather", 3, 6, chunk=[0, 1], src=[0, 0], dst=[1, 1], step=[3, 3], meta={"timestep_s": 1.0})
    v = verify(two, inst2)
    assert v is not None and v.send is None  # only the postcondition fails
    assert not bounds.respects_ten_capacity(two, inst2)
    # arriving 3 and 4 the link is busy in 1 and 2
    two_ok = from_arrays("allgather", 3, 6, chunk=[0, 1], src=[0, 0], dst=[1, 1], step=[3, 4], meta={"timestep_s": 1.0})
    assert bounds.respects_ten_capacity(two_ok, inst2)
    # a serial reading of the same steps (alpha occupying the link, 3 s timestep) has both sends
    # occupying timesteps 3 and 3..4: over capacity
    assert not bounds.respects_ten_capacity(two_ok, allgather(3, 2, pipelined=False), 1.0)
    # a forwarded chunk read at the end of 2 arrived only at 3: rejected under the latency
    fwd = from_arrays("allgather", 3, 6, chunk=[0, 0], src=[0, 1], dst=[1, 2], step=[3, 5], meta={"timestep_s": 1.0})
    v = verify(fwd, inst2)
    assert v is not None and v.index == 1 and "end of step 2" in v.reason
    # without a declared TEN timestep the steps are plain steps (each send reads the step before)
    plain = ring_schedule(3, [1, 2])
    plain.meta.clear()
    assert verify(plain, inst) is None


def test_cost_models_by_hand():
    inst = allgather(4)
    s = ring_schedule(4, [3, 6, 9])
    assert verify(s, inst) is None
    # ten: f = 1 s (transmission), hops arrive at 3, 6, 9 -> 9 s; the last send's hop has 2
    # latency timesteps -> T_L = 2 s
    ten = price_ten(s, inst)
    assert (ten.steps, ten.total_s, ten.T_L_s) == (9, 9.0, 2.0)
    # event: each hop 1 s on the link + 2 s latency, three hops in a chain: 9 s (T_L 6, T_B 3)
    ev = price_event(s, inst)
    assert (ev.total_s, ev.T_L_s, ev.T_B_s) == (9.0, 6.0, 3.0)
    # sync: three steps of alpha + 1 byte / 1 B/s = 3 s each
    sy = price_sync(s, inst)
    assert (sy.T_L_s, sy.T_B_s, sy.total_s) == (6.0, 3.0, 9.0)
    # two chunks per node: ten dispatch sends a link's two chunks in 1, 2 and forwards the
    # neighbour's when they arrive (3, 4) in 4, 5 -> last arrival 5 + 2 = 7
    n = 3
    two = from_arrays("allgather", n, 2 * n,
                      chunk=[2 * u + j for u in range(n) for j in range(2)] + [2 * ((u - 1) % n) + j for u in range(n) for j in range(2)],
                      src=[u for u in range(n) for j in range(2)] * 2,
                      dst=[(u + 1) % n for u in range(n) for j in range(2)] * 2,
                      step=[3 + j for u in range(n) for j in range(2)] + [6 + j for u in range(n) for j in range(2)],
                      meta={"timestep_s": 1.0})
    inst2 = allgather(3, 2)
    assert verify(two, inst2) is None
    assert price_ten(two, inst2).total_s == 7.0
    # event: the link sends its two chunks at 0-1 and 1-2 s, they arrive at 3 and 4 s, are
    # forwarded at 3-4 and 4-5 s and arrive at 6 and 7 s
    assert price_event(two, inst2).total_s == pytest.approx(7.0)


def test_greedy_valid_and_not_below_the_bounds():
    for n, chunks in ((3, 1), (3, 2), (4, 2)):
        r = api.solve(allgather(n, chunks), "greedy")
        assert r.verified
        assert r.row["steps"] >= r.bounds["lower_bound_timesteps"]


def test_serial_default_unchanged():
    # no latency key: occupancy and arrival are alpha + transmission, one timestep of 3 s per hop
    data = prepare(allgather(3, pipelined=False), 4)
    assert data.lag.tolist() == [[1, 1, 1]] and not data.pipelined


PRODUCERS = ("ten-ilp", "ten-lp", "greedy")


@settings(max_examples=6, deadline=None)
@given(n=st.integers(3, 4), chunks=st.integers(1, 2), alpha=st.sampled_from([0.5, 1.0, 2.0, 3.5]),
       producer=st.sampled_from(PRODUCERS))
def test_every_producer_at_or_above_the_bounds(n, chunks, alpha, producer):
    inst = allgather(n, chunks, alpha)
    r = api.solve(inst, producer, time_limit=30)
    assert r.verified, r.row["message"]
    b = bounds.instance_bounds(inst)
    assert r.row["steps"] >= b.timesteps.value
    for model, col in (("ten", "time_ten_s"), ("event", "time_event_s"), ("sync", "time_sync_s")):
        bound = getattr(b, model)
        if bound.computed and r.row.get(col) is not None and np.isfinite(r.row[col]):
            assert r.row[col] >= bound.value * (1 - 1e-9), (model, r.row[col], bound.value)


def test_verifier_combining_reads_its_inputs_after_they_arrive():
    # reduce to node 0 on the 3-ring 0 -> 1 -> 2 -> 0: node 1's contribution reaches node 2 at the
    # end of 3 (1 on the link + 2 latency); node 2's partial sum must leave after that (read at the
    # end of 3 at the earliest) and arrives at 0 at the end of 6
    inst = make_instance(ring(3), "reduce", root=0, message_bytes=1.0)

    def sched(second):
        return from_arrays("reduce", 3, 1, chunk=[0, 0], src=[1, 2], dst=[2, 0], step=[3, second],
                           meta={"timestep_s": 1.0})

    assert verify(sched(6), inst) is None
    v = verify(sched(5), inst)  # it would read node 2 at the end of 2, before node 1's input arrives
    assert v is not None and v.index == 1 and "end of step 2" in v.reason
    # the event model prices the valid one the same way: 3 s per hop
    assert price_event(sched(6), inst).total_s == pytest.approx(6.0)
