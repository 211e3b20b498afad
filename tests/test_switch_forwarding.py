"""A send out of a switch node forwards one particular arrival (the pairing rule of
``docs/schedules.md``, "Switch nodes"; TE-CCL: Liu et al., SIGCOMM 2024, Section 4): the
verifier, the dependencies and the ``ten`` and ``event`` models read the same pairing.

Hand-derived prices where the former rule (a send out of a switch waits for every earlier
arrival of its chunk there) gives more; pairings written out by hand; the compiled pairing
against the plain-Python one of ``reference_verify.py`` on random switch schedules (which
sends are paired, which one the verifier rejects first); mutants of valid greedy schedules
(a forward of nothing, before its arrival, one arrival out twice on one link); and the event
model on a greedy schedule through one switch equal to the same schedule collapsed to
NPU-to-NPU sends routed through the switch.
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

import reference_cost as ref
from collsynth.api import solve
from collsynth.instances.instance import make_instance
from collsynth.instances.topology import from_edges
from collsynth.tens.cost_models import price
from collsynth.tens.dependencies import dependency_pairs, step_order, switch_back, switch_forwards, switch_mask
from collsynth.tens.schedule import from_arrays, from_sends
from collsynth.tens.verify import switch_violation, verify
from reference_verify import switch_pairing
from builders import instance_on

FAST = {"alpha": 0.0, "bandwidth": 1.0}


def sched(sends, kind="broadcast", nodes=6, chunks=1, **meta):
    return from_sends([(c, 0, 1, u, v, t) for c, u, v, t in sends], kind, nodes, chunks, meta=meta)


# ---- hand-derived ------------------------------------------------------------------------------

def late_arrival_case():
    """NPUs 0, 1, 2, 3, 5 around switch 4, broadcast of one 1 B chunk from 0; every link 1 B/s
    and alpha 0 except 0 -> 4 (0.25 B/s: 4 s), plus a direct link 0 -> 1.

    step 1: 0 -> 4 (arrives at 4 s) and 0 -> 1 (1 s); step 2: 4 -> 2 forwards the slow arrival
    (4 .. 5 s) and 1 -> 4 (1 .. 2 s); step 3: 4 -> 3 forwards the step-2 arrival (2 .. 3 s);
    step 4: 3 -> 4 (3 .. 4 s); step 5: 4 -> 5 forwards it (4 .. 5 s). Makespan 5 s.

    The former rule made 4 -> 3 wait for the slow step-1 arrival too (4 .. 5 s), then 3 -> 4
    (5 .. 6 s) and 4 -> 5 (6 .. 7 s): 7 s. The TEN timestep is 1 s (the fastest link), the slow
    link takes 4 timesteps: the same 5 and 7 timesteps.
    """
    edges = [(0, 4, {"alpha": 0.0, "bandwidth": 0.25}), (0, 1, FAST)]
    edges += [(v, 4, FAST) for v in (1, 2, 3, 5)] + [(4, v, FAST) for v in (0, 1, 2, 3, 5)]
    inst = make_instance(from_edges(6, edges, switches=[4]), "broadcast", root=0, message_bytes=1.0)
    s = sched([(0, 0, 4, 1), (0, 0, 1, 1), (0, 4, 2, 2), (0, 1, 4, 2), (0, 4, 3, 3), (0, 3, 4, 4), (0, 4, 5, 5)])
    return inst, s


def test_a_forward_waits_for_its_own_arrival_only():
    inst, s = late_arrival_case()
    assert inst.collective.chunk_bytes == 1.0 and verify(s, inst) is None
    for deps in (None, True, False):
        assert price(s, inst, "event", exact_deps=deps).total_s == pytest.approx(5.0)
        ten = price(s, inst, "ten", exact_deps=deps)
        assert (ten.extra["timestep_s"], ten.extra["timesteps"]) == (1.0, 5)
    # the sends out of the switch need the arrival of the step before theirs, nothing else (4 -> 3
    # at index 4 not the slow one at index 0), and 1 -> 4, 3 -> 4 what reached their NPU
    i, j = dependency_pairs(s, inst)
    deps = {int(a): sorted(int(b) for b in j[i == a]) for a in np.unique(i)}
    assert deps == {2: [0], 3: [1], 4: [3], 5: [4], 6: [5]}


def test_without_copy_the_jth_forward_takes_the_jth_arrival():
    """Two arrivals of one chunk at switch 4 in step 2 (from 0 over the slow link, 0 .. 4 s:
    0 holds the chunk from the start; from 1, 1 .. 2 s) and two forwards in step 3: without
    switch_copy the first listed forward takes the first listed arrival. Forwards 4 -> 2 then
    4 -> 3: 4 -> 3 carries the fast arrival (2 .. 3 s), 3 -> 4 (3 .. 4 s) and 4 -> 5 (4 .. 5 s)
    follow, 4 -> 2 ends at 5 s: 5 s. Listed the other way round 4 -> 3 carries the slow one
    (4 .. 5 s), then 5 .. 6 and 6 .. 7 s: 7 s."""
    inst, _ = late_arrival_case()
    head, tail = [(0, 0, 1, 1), (0, 0, 4, 2), (0, 1, 4, 2)], [(0, 3, 4, 4), (0, 4, 5, 5)]
    s = sched(head + [(0, 4, 2, 3), (0, 4, 3, 3)] + tail, switch_copy=False)
    swapped = sched(head + [(0, 4, 3, 3), (0, 4, 2, 3)] + tail, switch_copy=False)
    for x, total in ((s, 5.0), (swapped, 7.0)):
        assert verify(x, inst) is None
        i, j = dependency_pairs(x, inst)
        assert sorted((a, b) for a, b in zip(i.tolist(), j.tolist()) if a in (3, 4)) == [(3, 1), (4, 2)]
        assert price(x, inst, "event").total_s == pytest.approx(total)
        assert price(x, inst, "ten").extra["timesteps"] == total
    # one arrival, two forwards: copy lets them leave on two links, not twice on one
    fan = [(0, 0, 1, 1), (0, 1, 4, 2), (0, 4, 2, 3), (0, 4, 3, 3), (0, 0, 4, 4), (0, 4, 5, 5)]
    assert verify(sched(fan), inst) is None
    v = verify(sched(fan, switch_copy=False), inst)
    assert v is not None and v.index == 3 and "without switch_copy" in v.reason
    same_link = [(0, 0, 1, 1), (0, 1, 4, 2), (0, 4, 2, 3), (0, 4, 2, 3), (0, 4, 3, 3), (0, 0, 4, 4), (0, 4, 5, 5)]
    v = verify(sched(same_link), inst)
    assert v is not None and v.index == 3 and "on link 4->2 more often than it arrived" in v.reason


def test_pieces_through_a_switch_in_a_pipeline():
    """Chunk 0 from NPU 0 to NPU 1 through switch 2 in two halves, 1 B chunk, 1 B/s, alpha 0:
    the first half reaches the switch at 0.5 s and NPU 1 at 1 s, the second reaches the switch
    at 1 s (0 -> 2 is free from 0.5 s) and NPU 1 at 1.5 s. Without the pipeline (one whole
    chunk, two steps) it takes 2 s."""
    edges = [(0, 2, FAST), (2, 0, FAST), (1, 2, FAST), (2, 1, FAST)]
    inst = make_instance(from_edges(3, edges, switches=[2]), "broadcast", root=0, message_bytes=1.0)
    half = Fraction(1, 2)
    s = from_sends([(0, 0, half, 0, 2, 1), (0, half, 1, 0, 2, 2), (0, 0, half, 2, 1, 2), (0, half, 1, 2, 1, 3)],
                   "broadcast", 3, 1)
    assert verify(s, inst) is None
    assert price(s, inst, "event").total_s == pytest.approx(1.5)
    whole = sched([(0, 0, 2, 1), (0, 2, 1, 2)], nodes=3)
    assert price(whole, inst, "event").total_s == pytest.approx(2.0)
    # the second half leaves in step 3, so it forwards the arrival of step 2 only
    late = from_sends([(0, 0, half, 0, 2, 1), (0, half, 1, 0, 2, 1), (0, 0, 1, 2, 1, 3)], "broadcast", 3, 1)
    v = verify(late, inst)
    assert v is not None and v.index == 2 and "stores nothing" in v.reason


# ---- the compiled pairing against the plain-Python one -------------------------------------------

@st.composite
def switch_cases(draw):
    """NPUs 0 .. n-1 around switch n (and a second switch n + 1 linked to it and to some NPUs),
    a few direct links, and random sends over the links: whole chunks or halves and quarters,
    steps 1 .. 6, with or without switch_copy, a declared TEN timestep and an instant hop from
    a switch to a GPU."""
    n = draw(st.integers(2, 4))
    sw, sw2 = n, n + 1
    edges = [(v, sw, FAST) for v in range(n)] + [(sw, v, FAST) for v in range(n)]
    edges += [(sw, sw2, FAST), (sw2, sw, FAST)] + [(sw2, v, FAST) for v in range(0, n, 2)]
    edges += [(v, sw2, FAST) for v in range(1, n, 2)] + [(v, (v + 1) % n, FAST) for v in range(n)]
    instant = draw(st.booleans())
    topo = from_edges(n + 2, edges, switches=[sw, sw2], meta={"switch_hop": "instant"} if instant else {})
    inst = make_instance(topo, "allgather", message_bytes=float(n))
    links = sorted(set(topo.graph.edges()))
    whole = draw(st.booleans())
    rows = []
    for _ in range(draw(st.integers(1, 30))):
        u, v = draw(st.sampled_from(links))
        d = 1 if whole else draw(st.sampled_from([1, 2, 4]))
        lo = draw(st.integers(0, d - 1))
        hi = draw(st.integers(lo + 1, d))
        rows.append((draw(st.integers(0, min(n, 2) - 1)), Fraction(lo, d), Fraction(hi, d), u, v,
                     draw(st.integers(1, 6))))
    meta = {"switch_copy": draw(st.booleans())}
    step_s = draw(st.sampled_from([None, 1.0, 0.5]))  # a declared TEN timestep: every link takes 1 or 2 steps
    if step_s is not None:
        meta["timestep_s"] = step_s
    s = from_sends(rows, "allgather", n + 2, n, meta=meta)
    return s, inst


def compiled_pairing(s, inst):
    order = step_order(s.step)[0]
    cols = [c[order] for c in (s.chunk, s.src, s.dst, s.lo, s.hi, s.step, switch_back(s, inst))]
    fw = switch_forwards(*cols, switch_mask(inst.topology), bool(s.meta.get("switch_copy", True)), s.denom)
    pairs = sorted(zip(order[fw.leave].tolist(), order[fw.arrival].tolist()))
    return pairs, sorted(order[fw.unpaired].tolist(), key=lambda i: (int(s.step[i]), i))


@settings(max_examples=150, deadline=None)
@given(switch_cases())
def test_pairing_and_first_rejected_forward_match_the_reference(case):
    s, inst = case
    pairs, unpaired = switch_pairing(s, inst)
    assert compiled_pairing(s, inst) == (pairs, unpaired)
    v = switch_violation(s, inst)
    assert (None if v is None else v.index) == (unpaired[0] if unpaired else None)


@settings(max_examples=80, deadline=None)
@given(switch_cases(), st.data())
def test_ten_and_event_through_switches_match_the_reference(case, data):
    s, inst = case
    assume(inst.topology.meta.get("switch_hop") != "instant")  # these models refuse instant hops
    whole = bool(((s.lo == 0) & (s.hi == s.denom)).all())
    for deps in ((None, True, False) if whole else (None, True)):  # group prefixes of pieces are conservative
        for model in ("ten", "event"):
            fast, slow = price(s, inst, model, exact_deps=deps), ref.price(s, inst, model, exact_deps=deps)
            assert fast.total_s == pytest.approx(slow.total_s, rel=1e-12), (model, deps)
            assert fast.T_L_s == pytest.approx(slow.T_L_s, rel=1e-12, abs=1e-300), (model, deps)
    i, j = dependency_pairs(s, inst)
    ri, rj = ref._dependencies(s, inst)
    assert (i.tolist(), j.tolist()) == (ri.tolist(), rj.tolist())


# ---- greedy schedules through one switch -----------------------------------------------------------

@pytest.fixture(scope="module", params=[False, True], ids=["no-copy", "copy"])
def greedy_switch(request):
    """Greedy allgather on 4 GPUs around one switch (100 GB/s, 0.5 us ports), 1 MiB chunks."""
    inst = instance_on("switch", {"nodes": 4, "unwind": 0}, "allgather", message_bytes=4 * 2**20)
    r = solve(inst, "greedy", switch_copy=request.param)
    assert r.verified and r.schedule.meta["switch_copy"] is request.param
    return inst, r.schedule


def counts_hold(s, inst) -> bool:
    """The switch rule for whole chunks by counting: at every (chunk, switch, arrival step) the
    forwards (of each out-link with copy, of all without) never outnumber the arrivals."""
    sw = set(inst.topology.switches)
    back = switch_back(s, inst)
    came = Counter((int(c), int(v), int(t)) for c, v, t in zip(s.chunk, s.dst, s.step) if int(v) in sw)
    copy = bool(s.meta.get("switch_copy", True))
    left = Counter((int(c), int(u), int(t - b), int(v) if copy else None)
                   for c, u, v, t, b in zip(s.chunk, s.src, s.dst, s.step, back) if int(u) in sw)
    return all(k <= came[key[:3]] for key, k in left.items())


def sends_of(s, keep, extra=()):
    rows = [(int(s.chunk[i]), 0, 1, int(s.src[i]), int(s.dst[i]), int(s.step[i])) for i in keep]
    return from_sends(rows + list(extra), s.collective, s.nodes, s.chunks, meta=s.meta)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_mutants_of_a_greedy_schedule_are_judged_by_the_switch_rule(greedy_switch, data):
    """Mutants: drop a send into the switch (its forward now forwards nothing, or another
    arrival), move a forward one step earlier or later, or send a forward twice on its link.
    The switch rule rejects exactly the mutants whose forwards outnumber their arrivals
    (counted here independently), and then a forward; the greedy's deliveries to GPUs stay (or
    come earlier), so but for a later forward the verifier says the same."""
    inst, s = greedy_switch
    sw = set(inst.topology.switches)
    into = [i for i in range(len(s)) if int(s.dst[i]) in sw]
    out = [i for i in range(len(s)) if int(s.src[i]) in sw]
    kind = data.draw(st.sampled_from(["drop", "earlier", "later", "twice"]))
    if kind == "drop":
        gone = data.draw(st.sampled_from(into))
        m = sends_of(s, [i for i in range(len(s)) if i != gone])
    elif kind == "twice":
        i = data.draw(st.sampled_from(out))
        m = sends_of(s, range(len(s)), [(int(s.chunk[i]), 0, 1, int(s.src[i]), int(s.dst[i]), int(s.step[i]))])
    else:
        i = data.draw(st.sampled_from(out))
        moved = int(s.step[i]) + (-1 if kind == "earlier" else 1)
        if moved < 1:
            return
        m = sends_of(s, [q for q in range(len(s)) if q != i],
                     [(int(s.chunk[i]), 0, 1, int(s.src[i]), int(s.dst[i]), moved)])
    v = switch_violation(m, inst)
    assert (v is None) == counts_hold(m, inst), (kind, v)
    if v is not None:
        assert v.send is not None and int(v.send.src) in sw
    if kind != "later":  # a later forward may also reach a GPU after it relays the chunk
        assert (verify(m, inst) is None) == (v is None)


def collapsed(s, inst):
    """The schedule's GPU -> switch -> GPU routes as single sends between the GPUs (routed on
    the shortest path, through the switch), in the step of the send into the switch; the pairing
    says which arrival each forward carries."""
    sw = switch_mask(inst.topology)
    pairs, unpaired = switch_pairing(s, inst)
    assert not unpaired
    came_from = dict(pairs)
    rows = []
    for i in range(len(s)):
        if sw[s.src[i]]:
            j = came_from[i]
            rows.append((int(s.chunk[i]), int(s.src[j]), int(s.dst[i]), int(s.step[j])))
        elif not sw[s.dst[i]]:
            rows.append((int(s.chunk[i]), int(s.src[i]), int(s.dst[i]), int(s.step[i])))
    c, u, v, t = (list(x) for x in zip(*rows))
    return from_arrays(s.collective, s.nodes, s.chunks, chunk=c, src=u, dst=v, step=t, routing="shortest-path",
                       meta=dict(s.meta))


def test_event_prices_a_kept_switch_as_its_routes_collapsed():
    """Greedy on 8 GPUs around one switch, multicast off, 1 MiB chunks: the event model prices
    the schedule with its switch hops exactly as the same routes sent GPU to GPU through the
    switch (what ASTRA-sim's congestion-aware backend simulates; the former rule gave 12 % more,
    1.0686e-4 s against 9.537e-5 s here)."""
    inst = instance_on("switch", {"nodes": 8, "unwind": 0}, "allgather", message_bytes=8 * 2**20)
    r = solve(inst, "greedy", switch_copy=False)
    assert r.verified
    s = r.schedule
    flat = collapsed(s, inst)
    assert len(flat) == 56 and verify(flat, inst) is None
    kept, direct = price(s, inst, "event").total_s, price(flat, inst, "event").total_s
    assert kept == pytest.approx(direct, rel=1e-12)
    assert r.row["time_event_s"] == pytest.approx(kept, rel=1e-12)
    # the bounds count link crossings, not what a switch waits for: they still hold
    for model in ("ten", "event"):
        assert r.row[f"lower_bound_{model}_s"] <= r.row[f"time_{model}_s"] * (1 + 1e-12)
