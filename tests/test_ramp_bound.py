"""The ramp bound of the synchronous model (``collsynth.tens.bounds.ramp``): steps pay alpha, and
a GPU's links from switches carry in a step only what reached the switch the step before.

- its value by hand on two GPUs behind a switch, where a hand-built pipelined schedule (verified,
  priced) meets it: the bound is that pair's optimum, for an allgather and a reduce-scatter;
- an allreduce's on the same pair;
- its value by a closed form on TACOS's ring x complete x switch 4x4x2 (1 GB), worked by hand,
  for a reduce-scatter and an allreduce;
- below the ``sync`` price of the TEN ILP's optimum (``ten-ilp``, ``ten-ilp-combining``) and of
  tree packing's and greedy's verified schedules on small switched fabrics, hypothesis over
  latencies, bandwidths (different each way) and sizes; below every producer's verified schedule
  sent on links on a TACOS hierarchy;
- a schedule routed through a switch in one step (``routing = "shortest-path"``) is not covered:
  one beats the bound, and stays at or above ``L + T*``, which its row and ``collsynth price``
  report as its bound.
"""

import json
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.instances.topology import from_edges
from collsynth.solvers import pipeline
from collsynth.solvers.cli import main
from collsynth.solvers.pipeline import Options
from collsynth.tens import cost_models, verify
from collsynth.tens.bounds import instance_bounds
from collsynth.tens.bounds.ramp import ramp_bound
from collsynth.tens.schedule import from_arrays, reverse, write_json

from test_drain_bound import PRODUCERS, assert_below_every_producer

TOL = 1 + 1e-9


def pair_behind_a_switch(up: float = 1.0, down: float = 1.0, alpha: float = 1 / 16):
    """GPUs 0 and 1, switch 2: links ``up`` B/s into the switch and ``down`` out of it."""
    return from_edges(3, [(0, 2, {"bandwidth": up, "alpha": alpha}), (1, 2, {"bandwidth": up, "alpha": alpha}),
                          (2, 0, {"bandwidth": down, "alpha": alpha}), (2, 1, {"bandwidth": down, "alpha": alpha})],
                      switches=[2], name="pair")


def pipelined_exchange(pieces: int):
    """Each GPU's shard in ``pieces`` equal pieces through the switch: piece ``q`` goes up in
    step ``q + 1`` and down in step ``q + 2``."""
    rows = [(g, q, step, src, dst) for g in (0, 1) for q in range(pieces)
            for step, src, dst in ((q + 1, g, 2), (q + 2, 2, 1 - g))]
    return from_arrays("allgather", 3, 3, chunk=[r[0] for r in rows], lo=[r[1] for r in rows],
                       hi=[r[1] + 1 for r in rows], denom=pieces, step=[r[2] for r in rows],
                       src=[r[3] for r in rows], dst=[r[4] for r in rows])


def test_two_gpus_behind_a_switch_by_hand():
    """A byte a shard, links of 1 B/s, alpha 1/16 s. In step 1 nothing leaves the switch; in
    step ``t`` the link into a GPU carries at most what went up in ``t - 1``, so ``S`` steps of
    lengths ``b_t`` bring at most ``sum_(t>=2) min(b_t, b_(t-1))`` bytes and need ``sum b >= S / (S
    - 1)`` (all steps alike). ``S alpha + S / (S - 1)``: 4 steps 1.5833 s, 5 steps 1.5625 s, 6
    steps 1.575 s; so 25/16 s, against ``L + T* = 2/16 + 1``. Four pieces pipelined through the
    switch take 5 steps of 1/4 byte a link: exactly 25/16 s, so that is the optimum; the
    reduce-scatter is its time reversal, at the same price."""
    topo = pair_behind_a_switch()
    for kind, sched in (("allgather", pipelined_exchange(4)), ("reduce_scatter", reverse(pipelined_exchange(4)))):
        inst = make_instance(topo, kind, message_bytes=2.0)
        b = instance_bounds(inst)
        lat, bw = b.part("sync_latency"), b.part("sync_bandwidth")
        assert lat.value + bw.value == pytest.approx(1.125)
        assert ramp_bound(inst, lat, bw).value == pytest.approx(25 / 16, rel=1e-5)
        # the instance's bound: the ramp's, or the box bound's where they tie (a GPU entered
        # from a switch only is a box of one)
        assert b.sync.value == pytest.approx(25 / 16, rel=1e-5)
        assert verify.verify(sched, inst) is None
        assert cost_models.price(sched, inst, "sync").total_s == pytest.approx(25 / 16)


def test_allreduce_of_two_gpus_behind_a_switch_by_hand():
    """The pair above, a 1-byte allreduce: ``2 (|P| - 1) M = 2`` bytes of calls into the two
    GPUs, each link from the switch one step behind its feed: ``2 S / (2 (S - 1))`` over
    ``S`` steps, the same as the allgather's, so 25/16 s again (``L + T*`` = 2/16 + 1), at
    most the TEN ILP's verified optimum."""
    inst = make_instance(pair_behind_a_switch(), "allreduce", message_bytes=1.0)
    b = instance_bounds(inst)
    assert b.sync.source == "ramp"
    assert b.sync.value == pytest.approx(25 / 16, rel=1e-5)
    row, _ = pipeline.run(inst, "ten-ilp-combining", Options(driver="horizon", time_limit=120))
    assert row["verified"] and b.sync.value <= row["time_sync_s"] * TOL


def test_tacos_hierarchy_by_a_closed_form():
    """ring x complete x switch 4x4x2, 100 GB/s and 0.5 us a link, 1 GB reduce-scatter (shard
    1/32 GB). Read backwards, a GPU takes 31 shards in over 5 links from GPUs (two ring, three
    complete) and one from its pair's switch, which is fed by the pair's one link: ``C = 5 B``,
    ``B_sw = F_sw = B``. In ``S`` steps ``sum_t [5 B b_t + B min(b_t, b_(t-1))] = 6 B T_B - B V``,
    ``V = sum_t max(0, b_t - b_(t-1)) >= max_t b_t >= T_B / S``, with equality when all steps
    are alike; so ``T_B >= T* 6 S / (6 S - 1)``, ``T* = 31 s / (6 B)``, and the bound is ``min_S
    [S alpha + T* 6 S / (6 S - 1)]`` (``S`` far above the 5 hops of ``L``): 23 steps,
    1.63787 ms against ``L + T* = 1.61708`` ms."""
    topo = build("hierarchical", {"levels": ["ring", "complete", "switch"], "dims": [4, 4, 2]},
                 bandwidth=100e9, alpha=0.5e-6)
    b = instance_bounds(make_instance(topo, "reduce_scatter", message_bytes=1e9)).sync
    T_star = 31 * (1e9 / 32) / (6 * 100e9)
    by_hand = min(S * 0.5e-6 + T_star * 6 * S / (6 * S - 1) for S in range(5, 200))
    assert by_hand == pytest.approx(23 * 0.5e-6 + T_star * 138 / 137)
    assert b.source == "ramp"
    assert b.value == pytest.approx(by_hand, rel=1e-5)


def test_tacos_hierarchy_allreduce_by_a_closed_form():
    """The same system, a 1 GB allreduce: ``62 M`` bytes of calls into the 32 GPUs, each
    taking in ``5 B b_t + B min(b_t, b_(t-1))`` a step, so ``T_B >= 2 T* 6 S / (6 S - 1)`` (``2
    T* = 62 M / (32 x 6 B)``, the partition bound): ``min_S [S alpha + 2 T* 6 S / (6 S - 1)]``,
    33 steps, 3.26206 ms against ``L + 2 T*`` = 3.23167 ms."""
    topo = build("hierarchical", {"levels": ["ring", "complete", "switch"], "dims": [4, 4, 2]},
                 bandwidth=100e9, alpha=0.5e-6)
    b = instance_bounds(make_instance(topo, "allreduce", message_bytes=1e9)).sync
    two_T = 62e9 / (32 * 6 * 100e9)
    by_hand = min(S * 0.5e-6 + two_T * 6 * S / (6 * S - 1) for S in range(5, 200))
    assert by_hand == pytest.approx(33 * 0.5e-6 + two_T * 198 / 197)
    assert b.source == "ramp"
    assert b.value == pytest.approx(by_hand, rel=1e-5)


def small_fabric(shape: str, up: float, down: float, alpha: float):
    """A pair or a trio behind one switch (links ``up`` B/s into it, ``down`` out of it), or a
    ring x switch 2x2 hierarchy (``down`` on every link, ``up`` into the switches)."""
    if shape == "hier":
        topo = build("hierarchical", {"levels": ["ring", "switch"], "dims": [2, 2]}, bandwidth=down, alpha=alpha)
        g = topo.graph.copy()
        for u, v, data in g.edges(data=True):
            if v in topo.switches:
                data["bandwidth"] = up
        return from_edges(topo.size, list(g.edges(data=True)), switches=topo.switches, name="hier")
    n = 2 if shape == "pair" else 3
    edges = [e for g in range(n) for e in ((g, n, {"bandwidth": up, "alpha": alpha}),
                                           (n, g, {"bandwidth": down, "alpha": alpha}))]
    return from_edges(n + 1, edges, switches=[n], name=shape)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=st.sampled_from(["pair", "trio", "hier"]),
       kind=st.sampled_from(["allgather", "reduce_scatter", "allreduce"]),
       up=st.sampled_from([1e9, 2e9]), down=st.sampled_from([1e9, 3e9]), alpha=st.sampled_from([1e-6, 1e-5]),
       size=st.sampled_from([1e4, 1e5]))
def test_below_the_ten_ilp_optimum_and_verified_schedules(shape, kind, up, down, alpha, size):
    """The bound is at most the ``sync`` price of the TEN ILP's optimum (the combining ILP where
    no switch could merge partial sums) and of greedy's and tree packing's verified schedules,
    where they build one (links of different bandwidth each way: the
    reduce-scatter's bound reads the transposed links)."""
    inst = make_instance(small_fabric(shape, up, down, alpha), kind, message_bytes=size)
    bound = instance_bounds(inst).sync
    assert bound.computed
    ilp = "ten-ilp" if kind == "allgather" else "ten-ilp-combining"
    priced = 0
    for name, options in ((ilp, Options(driver="horizon", time_limit=120)), ("greedy", Options(time_limit=60)),
                          ("tree-packing", Options(time_limit=60))):
        row, sched = pipeline.run(inst, name, options)
        # the combining ILP refuses a switch that could merge partial sums; the others some shapes
        assert row["verified"] or name != ilp or "unsupported: switch nodes" in row["message"], row["message"]
        if row["verified"]:
            priced += 1
            assert bound.value <= row["time_sync_s"] * TOL, name
    assert priced >= 1


@pytest.mark.parametrize("kind", ["allgather", "reduce_scatter", "allreduce"])
@pytest.mark.parametrize("size", [1 << 16, 1 << 24])
def test_below_every_producers_schedule_on_links(kind, size):
    """ring x complete x switch 4x2x2: every producer's verified schedule sent on links (greedy,
    tree packing, the TEN ILP at 64 KB) prices at least the bound, which is the ramp's; those
    routed on shortest paths at least ``L + T*``, their rows' bound (not covered: see below)."""
    topo = build("hierarchical", {"levels": ["ring", "complete", "switch"], "dims": [4, 2, 2]},
                 bandwidth=100e9, alpha=0.5e-6)
    names = PRODUCERS + (["ten-ilp" if kind == "allgather" else "ten-ilp-combining"] if size < 1 << 20 else [])
    assert_below_every_producer(make_instance(topo, kind, message_bytes=size), names, "ramp")


def test_a_schedule_routed_through_the_switch_is_not_covered():
    """``direct`` sends each shard from GPU to GPU through the switch in one step (routed:
    both hops' alpha, the larger load): 2/16 + 1 s, ``L + T*`` exactly, below the ramp bound's
    25/16 s, which bounds schedules sent on links only (module doc). Its row is judged against
    ``L + T*`` (``Bounds.sync_routed``), which it meets: optimal among routed schedules."""
    inst = make_instance(pair_behind_a_switch(), "allgather", message_bytes=2.0)
    row, sched = pipeline.run(inst, "direct", Options(time_limit=60))
    assert row["verified"] and sched.routing == "shortest-path"
    assert row["time_sync_s"] == pytest.approx(Fraction(9, 8))
    assert row["time_sync_s"] < instance_bounds(inst).sync.value
    assert row["lower_bound_s"] == pytest.approx(9 / 8)
    assert row["status"] == "optimal" and row["bound_source"].startswith("sync")


PAIR_TOML = """
name = "pair-behind-a-switch"
[topology]
generator = "switch"
nodes = 2
unwind = 0
bandwidth = 1.0
alpha = 0.0625
[collective]
kind = "allgather"
message_bytes = 2.0
"""


def test_price_command_gives_each_routing_its_bound(tmp_path, capsys):
    """``collsynth price`` of the pair's 4-piece pipeline (on links) reports the ramp bound,
    25/16 s, which it meets; of ``direct``'s routed schedule ``L + T*``, 9/8 s, which it meets."""
    inst = tmp_path / "pair.toml"
    inst.write_text(PAIR_TOML)
    routed = pipeline.run(make_instance(pair_behind_a_switch(), "allgather", message_bytes=2.0), "direct",
                          Options(time_limit=60))[1]
    for sched, expect in ((pipelined_exchange(4), 25 / 16), (routed, 9 / 8)):
        path = tmp_path / "sched.json"
        write_json(sched, path)
        assert main(["price", str(path), str(inst), "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["total_s"] == pytest.approx(expect)
        assert data["lower_bound_s"] == pytest.approx(expect, rel=1e-5)
        assert data["lower_bound_model_s"] == pytest.approx(expect, rel=1e-5)
