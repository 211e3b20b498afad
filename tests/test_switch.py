"""Switch nodes as TE-CCL models them (Liu et al., SIGCOMM 2024, Section 4): they store nothing,
forward an arrival in the next step, with or without multicast copy.

Verifier: hand-built valid and invalid schedules. Cost models: hand computations. TEN ILP:
optima derived by hand on a 4-NPU switch, kept against unwound, and every schedule it emits
verifies and respects the lower bound (hypothesis). The CLI solves a kept switch end to end.
"""

from __future__ import annotations

import json
from dataclasses import replace

import networkx as nx
import pytest
from hypothesis import assume, given, settings, strategies as st

from collsynth.formulations import ten_flow_lp, ten_ilp, ten_lp
from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.instances.topology import from_edges
from collsynth.solvers import backends
from collsynth.solvers.cli import main
from collsynth.solvers.producers import Options
from collsynth.solvers.ten import drivers
from collsynth.tens import bounds, ten
from collsynth.tens.cost_models import price
from collsynth.tens.schedule import from_sends
from collsynth.tens.verify import verify
from proofs import proven_status
from switch_strategies import switch_topologies
from builders import instance_on


def switch4(kind="allgather", **kw):
    return instance_on("switch", {"nodes": 4, "unwind": 0}, kind, bandwidth=1.0, alpha=0.0, message_bytes=4.0, **kw)


def bcast3():
    """Three NPUs on switch 3, broadcast from NPU 0."""
    return instance_on("switch", {"nodes": 3, "unwind": 0}, "broadcast", root=0)


def sched(sends, kind="broadcast", nodes=4, chunks=1, **meta):
    return from_sends([(c, 0, 1, u, v, t) for c, u, v, t in sends], kind, nodes, chunks, meta=meta)


# ---- verifier ---------------------------------------------------------------------------------

def test_switch_multicast_is_valid_with_copy_only():
    inst = bcast3()
    fan = [(0, 0, 3, 1), (0, 3, 1, 2), (0, 3, 2, 2)]
    assert verify(sched(fan), inst) is None  # switch_copy defaults to true (TE-CCL's default)
    assert verify(sched(fan, switch_copy=True), inst) is None
    v = verify(sched(fan, switch_copy=False), inst)
    assert v is not None and v.step == 2 and "copies the piece without switch_copy" in v.reason
    # without copy every out-send needs its own arrival: two arrivals, two forwards
    twice = [(0, 0, 3, 1), (0, 0, 3, 2), (0, 3, 1, 2), (0, 3, 2, 3)]
    assert verify(sched(twice, switch_copy=False), inst) is None


@pytest.mark.parametrize("sends, step, words", [
    ([(0, 3, 1, 2), (0, 3, 2, 2)], 2, "never received"),
    ([(0, 0, 3, 2), (0, 3, 1, 2), (0, 3, 2, 3)], 2, "before it arrives: it arrives at the end of step 2"),
    ([(0, 0, 3, 1), (0, 3, 1, 3), (0, 3, 2, 2)], 3, "stores nothing: the piece arrived at the end of step 1"),
])
def test_bad_switch_forwards_are_rejected(sends, step, words):
    v = verify(sched(sends), bcast3())
    assert v is not None and v.step == step and words in v.reason and v.send.src == 3


def test_a_send_into_a_switch_is_not_a_delivery():
    inst = bcast3()
    v = verify(sched([(0, 0, 3, 1), (0, 3, 1, 2)]), inst)  # node 2 only ever "reached" the switch
    assert v is not None and v.send is None and "node 2 does not hold chunk 0" in v.reason
    # the switch itself is never asked to hold anything: a complete schedule ends with it empty
    assert verify(sched([(0, 0, 1, 0), (0, 0, 3, 1), (0, 3, 1, 2), (0, 3, 2, 2)][1:]), inst) is None


def test_switch_rules_on_pieces_and_ten_delays():
    inst = bcast3()
    half = from_sends([(0, 0, "1/2", 0, 3, 1), (0, 0, 1, 3, 1, 2)], "broadcast", 4, 1)
    v = verify(half, inst)
    assert v is not None and "part of the piece that did not arrive" in v.reason
    # TEN delays: link 3->1 costs 2 timesteps of the declared TEN timestep, so the forward of
    # an arrival at the end of step 1 completes at step 3 (starts in step 2)
    fast = {"alpha": 0.0, "bandwidth": 1.0}
    topo = from_edges(4, [(0, 3, fast), (3, 1, {"alpha": 1.0, "bandwidth": 1.0}), (3, 2, fast),
                          (1, 3, fast), (2, 3, fast), (3, 0, fast)], switches=[3])
    inst = make_instance(topo, "broadcast", root=0, message_bytes=1.0)
    ok = [(0, 0, 3, 1), (0, 3, 1, 3), (0, 3, 2, 2)]
    assert verify(sched(ok, timestep_s=1.0), inst) is None
    late = verify(sched(ok), inst)  # without the TEN timestep every link takes one step
    assert late is not None and "stores nothing" in late.reason and late.step == 3
    early = verify(sched([(0, 0, 3, 1), (0, 3, 1, 2), (0, 3, 2, 2)], timestep_s=1.0), inst)
    assert early is not None and "before it arrives" in early.reason


def test_combining_relays_through_switches_are_simulated_not_built_by_the_ten():
    """The verifier simulates a reduction relayed through a switch (tests/test_switch_reductions.py
    has its rules); the TEN still refuses to build one."""
    inst = instance_on("switch", {"nodes": 2, "unwind": 0}, "reduce", root=0)
    assert verify(sched([(0, 1, 2, 1), (0, 2, 0, 2)], kind="reduce", nodes=3), inst) is None
    v = verify(sched([(0, 1, 2, 1), (0, 2, 0, 2), (0, 1, 2, 1), (0, 2, 0, 2)], kind="reduce", nodes=3), inst)
    assert v is not None and "counted twice" in v.reason
    with pytest.raises(ten.NotSupported, match="combining"):
        ten_ilp.build(inst, 2)


# ---- cost models -------------------------------------------------------------------------------

def gather_through_switch():
    """NPUs 0 and 2 send their chunks to NPU 1 through switch 3: up-links alpha 1 s, 1 B/s;
    the down-link 3->1 alpha 0.5 s, 1 B/s; chunks of 1 B."""
    up = {"alpha": 1.0, "bandwidth": 1.0}
    down = {"alpha": 0.5, "bandwidth": 1.0}
    topo = from_edges(4, [(0, 3, up), (2, 3, up), (1, 3, up), (3, 0, down), (3, 1, down), (3, 2, down)],
                      switches=[3])
    inst = make_instance(topo, "gather", root=1, message_bytes=3.0)
    s = sched([(0, 0, 3, 1), (2, 2, 3, 1), (0, 3, 1, 2), (2, 3, 1, 2)], kind="gather", chunks=3)
    return inst, s


def test_switch_hops_priced_by_hand():
    inst, s = gather_through_switch()
    assert inst.collective.chunk_bytes == 1.0 and verify(s, inst) is None
    sync = price(s, inst, "sync")
    # step 1: two up-links, each 1 B: latency 1, bandwidth 1; step 2: 2 B on 3->1: latency 0.5, bandwidth 2
    assert (sync.T_L_s, sync.T_B_s, sync.total_s) == pytest.approx((1.5, 3.0, 4.5))
    event = price(s, inst, "event")
    # both chunks reach the switch at 1 + 1 = 2; the out-port 3->1 serves them one after the
    # other (FIFO): 2 + 1 + 1 = 4, plus its latency 0.5
    assert event.total_s == pytest.approx(4.5) and event.T_L_s == pytest.approx(1.5)
    ten_cost = price(s, inst, "ten")
    # timestep f = min(1 + 1, 0.5 + 1) = 1.5; up-links take ceil(2 / 1.5) = 2 timesteps, the
    # down-link 1: arrivals at the switch end of timestep 2, then 3->1 carries one chunk in
    # timestep 3 and the other in 4: 4 timesteps = 6 s, latency share 4 * min(0.5, 1.5)
    assert ten_cost.total_s == pytest.approx(6.0) and ten_cost.T_L_s == pytest.approx(2.0)


# ---- the TEN ILP -------------------------------------------------------------------------------

def ilp_optimum(inst, **params):
    """Smallest horizon at which the makespan ILP is feasible, with its schedule."""
    for T in range(1, 10):
        m = ten_ilp.build(inst, T, objective="makespan", **params)
        if backends.solve(m, "highs").status == "optimal":
            return T, ten_ilp.extract(m)
    raise AssertionError("no horizon up to 9")


@pytest.mark.parametrize("kind, kw, copy, expected", [
    # allgather, 4 NPUs each with one link up to the switch and one down: each NPU receives 3
    # chunks over its down-link, which can carry nothing in timestep 1 (the switch starts
    # empty): >= 1 + 3 = 4; with copy each NPU sends its chunk up once and the switch multicasts
    # it (4 reached); without copy it sends it up 3 times in timesteps 1..3, each forwarded
    # once in 2..4 (4 reached too)
    ("allgather", {}, True, 4),
    ("allgather", {}, False, 4),
    # broadcast from NPU 0: with copy up in 1, multicast in 2; without copy the switch gets at
    # most one arrival per holder and timestep: holders {0} in 1, {0, a} in 2 (a got it at 2),
    # so deliveries end of 2: 1, end of 3: 1, the third only at the end of 4
    ("broadcast", {"root": 0}, True, 2),
    ("broadcast", {"root": 0}, False, 4),
])
def test_ilp_optimum_on_a_switch_matches_hand_derivation(kind, kw, copy, expected):
    inst = switch4(kind, **kw)
    T, s = ilp_optimum(inst, switch_copy=copy)
    assert T == expected and s.num_steps == expected
    assert s.meta["switch_copy"] is copy and verify(s, inst) is None
    assert bounds.lower_bound(inst) <= expected
    for relaxation in (ten_lp, ten_flow_lp):  # the relaxations never prove more than the optimum
        m = relaxation.build(inst, expected, switch_copy=copy)
        assert backends.solve(m, "highs").status == "optimal" and relaxation.bound(m) == expected


def test_no_copy_schedule_never_multicasts():
    inst = switch4("broadcast", root=0)
    _, s = ilp_optimum(inst, switch_copy=False)
    into = sorted((int(c), int(t)) for c, u, v, t in zip(s.chunk, s.src, s.dst, s.step) if v == 4)
    out = sorted((int(c), int(t) - 1) for c, u, v, t in zip(s.chunk, s.src, s.dst, s.step) if u == 4)
    assert into == out  # every forward has its own arrival one step before


def test_kept_switch_against_unwound_on_a_dgx2_like_switch():
    """Six GPUs on one NVSwitch (DGX-2 link figures, 125 GB/s and 0.35 us per port), allgather.

    Kept: each GPU's down-port carries 5 chunks and is idle in the first timestep, so N = 6
    timesteps of ``alpha + m / b``. Unwound to degree 5 every GPU has a link to every other at
    b / 5: one timestep of ``alpha + 5 m / b``. Unwinding wins: the kept switch stores and
    forwards, paying a second hop (one more chunk time and a second alpha) that the direct
    links do not.
    """
    b, a, M = 125e9, 0.35e-6, 6 * 2**20
    m = M / 6
    kept = instance_on("switch", {"nodes": 6, "unwind": 0}, "allgather", message_bytes=M, bandwidth=b, alpha=a)
    unwound = instance_on("switch", {"nodes": 6, "unwind": 5}, "allgather", message_bytes=M, bandwidth=b, alpha=a)
    T_kept, s_kept = ilp_optimum(kept)
    T_unw, s_unw = ilp_optimum(unwound)
    assert (T_kept, T_unw) == (6, 1)
    assert verify(s_kept, kept) is None and verify(s_unw, unwound) is None
    t_kept, t_unw = price(s_kept, kept, "ten").total_s, price(s_unw, unwound, "ten").total_s
    assert t_kept == pytest.approx(6 * (a + m / b)) and t_unw == pytest.approx(a + 5 * m / b)
    assert t_unw < t_kept


@settings(max_examples=10, deadline=None)
@given(switch_topologies(), st.sampled_from(["allgather", "broadcast", "scatter", "gather", "alltoall"]), st.booleans())
def test_every_switch_ilp_schedule_verifies_and_meets_the_bound(topo, kind, copy):
    assume(nx.is_strongly_connected(topo.graph))
    kw = {"root": 0} if kind in ("broadcast", "scatter", "gather") else {}
    inst = make_instance(topo, kind, message_bytes=float(len(topo.npus)), **kw)
    out = drivers.run("horizon", inst, ten_ilp, Options(solver="highs", time_limit=20,
                                                        params={"switch_copy": copy, "warm": False}))
    assert out.schedule is not None
    s = out.schedule
    assert verify(s, inst) is None
    assert s.meta.get("switch_copy") is copy
    assert s.num_steps >= bounds.lower_bound(inst)


# ---- command line ---------------------------------------------------------------------------------

TOML = """
name = "sw4"
[topology]
generator = "switch"
nodes = 4
unwind = 0
bandwidth = 100e9
alpha = 0.5e-6
[collective]
kind = "broadcast"
root = 0
message_bytes = 1048576
"""


@pytest.mark.parametrize("producer", ["ten-ilp", "greedy"])
@pytest.mark.parametrize("params, steps", [((), 2), (("--param", "switch_copy=false"), 4)])
def test_cli_solves_a_kept_switch(tmp_path, capsys, producer, params, steps):
    # the hand counts of the broadcast rows above; the greedy meets them too
    p = tmp_path / "sw4.toml"
    p.write_text(TOML)
    code = main(["solve", str(p), "--producer", producer, *params, "--json"])
    out, err = capsys.readouterr()
    (data,) = json.loads(out)["rows"]
    assert code == 0 and data["verified"] is True and data["steps"] == steps
    assert data["status"] == proven_status(data) or producer == "greedy"


@pytest.mark.parametrize("producer, kind, latency", [("greedy", "reduce_scatter", "pipelined"),
                                                     ("bfb-lp", "allgather", "serial")])
def test_cli_refuses_switch_nodes_in_one_line(tmp_path, capsys, producer, kind, latency):
    # the greedy relays partial sums through switches under a serial latency only
    p = tmp_path / "sw4.toml"
    p.write_text(TOML.replace('kind = "broadcast"\nroot = 0', f'kind = "{kind}"')
                 .replace("alpha = 0.5e-6", f'alpha = 0.5e-6\nlatency = "{latency}"'))
    code = main(["solve", str(p), "--producer", producer])
    out, err = capsys.readouterr()
    assert code != 0 and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "switch" in lines[0]


def test_models_without_switch_nodes_refuse_them_and_concurrent_schedules_keep_the_rules():
    inst = switch4()
    with pytest.raises(ten.NotSupported, match="point-to-point"):
        ten.prepare(inst, 3)  # a caller that does not say how switches forward
    # two concurrent broadcasts through the switch: the merged schedule still declares how
    # the switch forwards (and the TEN timestep), so the verifier checks the right rule
    one = switch4("broadcast", root=0)
    two = replace(one, collectives=one.collectives * 2)
    T, s = ilp_optimum(two, switch_copy=False)
    assert s.meta["switch_copy"] is False and "timestep_s" in s.meta and verify(s, two) is None


@pytest.mark.parametrize("copy", [True, False])
def test_warm_start_from_recovery_is_feasible_with_switch_nodes(copy):
    import pyomo.environ as pe

    inst = switch4("broadcast", root=0)
    data, rows, steps = drivers.recovery_schedule(inst, switch_copy=copy)
    m = ten_ilp.build(inst, steps, switch_copy=copy)
    info = drivers.set_start(m, rows)
    assert info["sends"] == len(rows) and info["dropped"] == 0
    for con in m.component_data_objects(pe.Constraint, active=True):
        body = pe.value(con.body)
        assert (con.lower is None or body >= pe.value(con.lower) - 1e-9) and \
               (con.upper is None or body <= pe.value(con.upper) + 1e-9), con.name
    assert info["objective"] == 3  # the recovery schedule delivers all three pairs


# ---- instant switch hop (TE-CCL's switch_to_gpu_link_on = False) -----------------------------------

def instant(inst):
    """The instance with its switches' hop made instant (topology meta ``switch_hop``)."""
    topo = inst.topology
    return replace(inst, topology=replace(topo, meta={**topo.meta, "switch_hop": "instant"}))


def test_instant_hop_forwards_in_the_arrivals_step():
    inst, slow = instant(bcast3()), bcast3()
    same = [(0, 0, 3, 1), (0, 3, 1, 1), (0, 3, 2, 1)]
    assert verify(sched(same), inst) is None
    v = verify(sched(same), slow)
    assert v is not None and "before it arrives" in v.reason
    later = [(0, 0, 3, 1), (0, 3, 1, 2), (0, 3, 2, 2)]  # valid with a timestep hop
    assert verify(sched(later), slow) is None
    v = verify(sched(later), inst)
    assert v is not None and v.step == 2 and "stores nothing: the piece arrived at the end of step 1" in v.reason


@pytest.mark.parametrize("kind, kw, copy, expected", [
    # allgather on 4 NPUs: each down-link carries one of the 3 missing chunks per timestep,
    # now from timestep 1 on (GPU -> switch -> GPU within one timestep): >= 3, and 3 suffice
    # (with copy: NPUs 0, 1 send up in 1, NPUs 2, 3 in 2, each multicast to two others; then
    # each NPU sends up the one chunk another still lacks; without copy NPU i sends its own
    # chunk up for NPU i + s in timestep s = 1, 2, 3)
    ("allgather", {}, True, 3),
    ("allgather", {}, False, 3),
    # broadcast from 0: with copy up and multicast in timestep 1; without copy the switch gets
    # one arrival per holder and timestep: one delivery in 1, two in 2
    ("broadcast", {"root": 0}, True, 1),
    ("broadcast", {"root": 0}, False, 2),
])
def test_ilp_optimum_with_an_instant_hop_matches_hand_derivation(kind, kw, copy, expected):
    inst = instant(switch4(kind, **kw))
    T, s = ilp_optimum(inst, switch_copy=copy)
    assert T == expected and s.num_steps == expected
    assert s.meta["switch_hop"] == "instant" and verify(s, inst) is None
    assert verify(s, switch4(kind, **kw)) is not None  # not a schedule of the timestep hop
    # the bounds ignore copy: allgather 3 chunks down one link each (inbound), broadcast one hop
    # through the switch, now one timestep (distance)
    assert bounds.lower_bound(inst) == (3 if kind == "allgather" else 1)
    for relaxation in (ten_lp, ten_flow_lp):  # a relaxation never proves more than the optimum
        m = relaxation.build(inst, expected, switch_copy=copy)
        assert backends.solve(m, "highs").status == "optimal" and relaxation.bound(m) <= expected


@pytest.mark.parametrize("copy", [True, False])
def test_recovery_and_warm_start_obey_an_instant_hop(copy):
    import pyomo.environ as pe

    inst = instant(switch4("allgather"))
    data, rows, steps = drivers.recovery_schedule(inst, switch_copy=copy)
    s = ten.schedule_from_rows(data, rows)
    assert verify(s, inst) is None
    m = ten_ilp.build(inst, steps, switch_copy=copy)
    info = drivers.set_start(m, rows)
    assert info["dropped"] == 0
    for con in m.component_data_objects(pe.Constraint, active=True):
        body = pe.value(con.body)
        assert (con.lower is None or body >= pe.value(con.lower) - 1e-9) and \
               (con.upper is None or body <= pe.value(con.upper) + 1e-9), con.name


def test_instant_hop_pricing_says_what_it_cannot_price():
    inst = instant(bcast3())
    s = sched([(0, 0, 3, 1), (0, 3, 1, 1), (0, 3, 2, 1)])
    assert price(s, inst, "sync").steps == 1
    for model in ("ten", "event"):
        with pytest.raises(ten.NotSupported, match="instant"):
            price(s, inst, model)


def two_switch_chain(hop="instant"):
    """NPU 0 - switch 2 - switch 3 - NPU 1, every link both ways, 1 B/s, no latency, 1-byte
    chunks: one timestep per link."""
    edges = [(0, 2), (2, 0), (2, 3), (3, 2), (3, 1), (1, 3)]
    return from_edges(4, edges, bandwidth=1.0, alpha=0.0, switches=[2, 3], meta={"switch_hop": hop})


def test_a_hop_between_switches_is_never_instant():
    # GPU 0 -> switch 2 -> switch 3 -> GPU 1. Timestep hop: one timestep per link, 3. Instant
    # hop (TE-CCL's switch-to-GPU link only): 0 -> 2 arrives at the end of 1, 2 -> 3 leaves in
    # 2 and arrives at the end of 2, 3 -> 1 leaves in 2 as well: 2, one timestep more than the
    # 1 every link out of a switch being instant gave
    inst = make_instance(two_switch_chain(), "broadcast", root=0, message_bytes=1.0)
    data = ten.prepare(inst, 3, switch_copy=True)
    lag = {(int(u), int(v)): int(k) for u, v, k in zip(data.src, data.dst, data.lag[0])}
    assert lag == {(0, 2): 1, (1, 3): 1, (2, 0): 0, (2, 3): 1, (3, 1): 0, (3, 2): 1}
    la = inst.topology.link_arrays
    assert {(int(u), int(v)) for u, v, i in zip(la.src, la.dst, ten.instant_hops(inst.topology)) if i} == \
        {(2, 0), (3, 1)}
    assert int(data.dist[0, 0, 1]) == 2 and bounds.lower_bound(inst) == 2
    for copy in (True, False):
        T, s = ilp_optimum(inst, switch_copy=copy)
        assert T == 2 and verify(s, inst) is None
        data, rows, steps = drivers.recovery_schedule(inst, switch_copy=copy)
        assert steps == 2 and verify(ten.schedule_from_rows(data, rows), inst) is None
    assert verify(sched([(0, 0, 2, 1), (0, 2, 3, 2), (0, 3, 1, 2)]), inst) is None
    v = verify(sched([(0, 0, 2, 1), (0, 2, 3, 1), (0, 3, 1, 1)]), inst)
    assert v is not None and v.step == 1 and (v.send.src, v.send.dst) == (2, 3) and "before it arrives" in v.reason
    slow = make_instance(two_switch_chain("timestep"), "broadcast", root=0, message_bytes=1.0)
    assert ilp_optimum(slow, switch_copy=True)[0] == 3 and bounds.lower_bound(slow) == 3
    # a scatter moves the one chunk the same way: the earliest-arrival path takes 2 as well
    from collsynth.solvers.greedy import earliest

    scatter = make_instance(two_switch_chain(), "scatter", root=0, message_bytes=2.0)
    s = earliest.synthesize(scatter)
    assert s.num_steps == 2 and verify(s, scatter) is None


def cycle_of_switches():
    """GPUs 0, 1; switches 2, 3 linked both ways; 0 <-> 2, 2 -> 1 and a half-speed 1 -> 2 (2
    timesteps per 1-byte chunk); pipelined latency of 0, instant hop; allgather of 2 chunks
    per GPU (chunks 0, 1 at GPU 0, chunks 2, 3 at GPU 1)."""
    topo = from_edges(4, [(0, 2), (2, 0), (1, 2, {"bandwidth": 0.5}), (2, 1), (2, 3), (3, 2)], bandwidth=1.0,
                      alpha=0.0, switches=[2, 3], meta={"latency": "pipelined", "switch_hop": "instant"})
    return make_instance(topo, "allgather", chunks_per_node=2, message_bytes=2.0)


def test_two_switches_linked_both_ways_deliver_nothing_nobody_sent():
    # GPU 1's only out-link, 1 -> 2, holds a chunk for 2 timesteps: its second chunk arrives
    # at switch 2 at the end of 4 at the earliest, and reaches GPU 0 in 4 (instant 2 -> 0).
    # 4 suffice: GPU 0's chunks go 0 -> 2 -> 1 in timesteps 1 and 2. Were the links between
    # the switches instant, 2 -> 3 -> 2 would be a cycle of zero timesteps bringing chunks to
    # switch 2 from nowhere (the TEN ILP found 3)
    inst = cycle_of_switches()
    assert bounds.lower_bound(inst) == 4
    for copy in (True, False):
        T, s = ilp_optimum(inst, switch_copy=copy)
        assert T == 4 and s.num_steps == 4 and verify(s, inst) is None
    # GPU 1's second chunk (3) delivered from nowhere in timestep 3 round the switch cycle
    # (arrivals and departures in the same timestep, each supporting the other); everything
    # else by the rules
    fake = [(0, 0, 2, 1), (0, 2, 1, 1), (1, 0, 2, 2), (1, 2, 1, 2), (2, 1, 2, 2), (2, 2, 0, 2),
            (3, 2, 3, 3), (3, 3, 2, 3), (3, 2, 0, 3)]
    v = verify(sched(fake, "allgather", chunks=4, timestep_s=1.0), inst)
    assert v is not None and v.step == 3 and {v.send.src, v.send.dst} == {2, 3} and v.send.chunk == 3
    assert "before it arrives: it arrives at the end of step 3" in v.reason
    real = fake[:6] + [(3, 1, 2, 4), (3, 2, 0, 4)]  # chunk 3 up 1 -> 2 in 3..4, down in 4
    assert verify(sched(real, "allgather", chunks=4, timestep_s=1.0), inst) is None


def test_links_faster_than_the_timestep_carry_several_chunks():
    # a 4-NPU switch at 125 B/s, alpha 0, chunks of 125 B: a 12.5 s timestep (longer than the
    # links' 1 s chunk time, as TE-CCL's slowest-link epoch is) fits floor(12.5 * 125 / 125) = 12
    # chunks per link
    topo = build("switch", {"nodes": 4, "unwind": 0}, bandwidth=125.0, alpha=0.0)
    delay, cap, f = ten.link_delays(topo, 125.0, 12.5, switches=True)
    assert f == 12.5 and set(delay.ravel().tolist()) == {1} and set(cap.tolist()) == {12}
    # with a 1 s latency the chunks follow it back to back: floor((12.5 - 1) * 125 / 125) = 11
    topo = build("switch", {"nodes": 4, "unwind": 0}, bandwidth=125.0, alpha=1.0)
    assert set(ten.link_delays(topo, 125.0, 12.5, switches=True)[1].tolist()) == {11}


def test_dgx2_slow_epoch_allgather_bound_is_te_ccls_four_epochs():
    from collsynth.instances import CORPUS, load_instance
    from collsynth.instances.instance import epoch_timestep

    inst = load_instance(CORPUS / "teccl-dgx2-2ch-allgather-slow-1gb.toml")
    assert inst.topology.meta["switch_hop"] == "instant" and len(inst.topology.switches) == 2
    # an odd GPU has no InfiniBand in-link: its 31 chunks come down its NVSwitch link, which
    # carries 125 GB/s x 2.5 ms / 31.25 MB = 10 chunks per slowest-link epoch: ceil(31 / 10) = 4,
    # TE-CCL's provided output (DGX2 2 chassis AllGather Slow 1GB: 4 epochs)
    b = bounds.timesteps_bound(inst, timestep=epoch_timestep(inst))
    assert (b.value, b.source, b.witness) == (4, "inbound", "v=1")


def test_recovery_never_takes_a_switch_for_a_holder():
    # a walk that sent the whole chunk into switch 3 marks it "received" there; the switch kept
    # nothing, so recovery must start again from NPU 0 (up, then down: once per NPU it serves,
    # as it forwards every arrival once), not from the switch
    from collsynth.solvers.ten import recovery

    for inst in (bcast3(), instant(bcast3())):
        data = ten.prepare(inst, 1, None, None, switch_copy=True)
        held = data.pre.copy()
        held[0, 3] = True
        rows = recovery.recover(data, held, 1)
        assert sorted(int(data.src[l]) for _, l, _ in rows.tolist()).count(0) == 2
        assert verify(ten.schedule_from_rows(data, rows), inst) is None
