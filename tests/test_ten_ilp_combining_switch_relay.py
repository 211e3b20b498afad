"""ten-ilp-combining on switched graphs: every schedule it emits passes the verifier's rule
for relays through a switch (what a route GPU -> switch -> GPU carries is read once at its
source, so nothing may arrive at that source while the route is under way).

The smallest instance hypothesis found that broke it: 3 GPUs around one switch (node 3), GPU 0
on a 250 MB/s link each way, GPUs 1 and 2 on 1 GB/s links, allreduce of 240 kB (3 chunks of
80 kB; the TEN timestep is the fast links' 80 us, so the slow link takes 4 timesteps). The
model then allowed a copy of a chunk's result back into its root: in the old optimum (15
timesteps), chunk 2 completes at node 2 in timestep 6, node 2 sends copies into the switch in
timesteps 7, 8 and 10, the one of timestep 7 goes on to node 0 over the slow link (delivered
in timestep 11), the one of timestep 8 comes straight back to node 2 (timestep 9). That
copy arrives at node 2 while the relay to node 0 is under way, and the verifier refuses it.
A copy into the root is never needed (the root holds the result from its completion on), so
the model now forbids it and its optimum is unchanged: 15 timesteps before and after.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collsynth.formulations import ten_ilp_combining
from collsynth.instances.instance import make_instance
from collsynth.instances.topology import from_edges
from collsynth.solvers import pipeline
from collsynth.solvers.producers import Options
from collsynth.solvers.ten.formulation_producers import producer
from collsynth.tens import bounds
from collsynth.tens import schedule as sch
from collsynth.tens import verify
from ilp_oracle import violated_constraints
from switch_strategies import switched

NATIVE = producer(ten_ilp_combining)

# The old optimum: (chunk, src, dst, arrival timestep, op); node 3 is the switch.
OLD = [(0, 1, 3, 3, "reduce"), (0, 2, 3, 1, "reduce"), (0, 3, 0, 7, "reduce"), (0, 3, 1, 2, "reduce"),
       (0, 0, 3, 14, "copy"), (0, 3, 1, 15, "copy"), (0, 3, 2, 15, "copy"),
       (1, 0, 3, 9, "reduce"), (1, 2, 3, 2, "reduce"), (1, 3, 1, 3, "reduce"), (1, 3, 1, 10, "reduce"),
       (1, 1, 3, 11, "copy"), (1, 1, 3, 13, "copy"), (1, 3, 0, 15, "copy"), (1, 3, 2, 14, "copy"),
       (2, 0, 3, 5, "reduce"), (2, 1, 3, 2, "reduce"), (2, 3, 2, 3, "reduce"), (2, 3, 2, 6, "reduce"),
       (2, 2, 3, 7, "copy"), (2, 2, 3, 8, "copy"), (2, 2, 3, 10, "copy"),
       (2, 3, 0, 11, "copy"), (2, 3, 1, 11, "copy"), (2, 3, 2, 9, "copy")]


def star_with_a_slow_link():
    edges = []
    for gpu, bandwidth in ((0, 2.5e8), (1, 1e9), (2, 1e9)):
        edges += [(gpu, 3, {"bandwidth": bandwidth, "alpha": 0.0}), (3, gpu, {"bandwidth": bandwidth, "alpha": 0.0})]
    topo = from_edges(4, edges, switches=[3])
    return make_instance(topo, "allreduce", message_bytes=2.4e5)


def old_schedule(timestep):
    sends = [(c, 0, 1, u, v, t, op) for c, u, v, t, op in OLD]
    return sch.from_sends(sends, "allreduce", 4, 3, meta={"timestep_s": timestep})


def test_the_minimal_instance_verifies_at_the_same_optimum():
    inst = star_with_a_slow_link()
    row, _ = pipeline.run(inst, "ten-ilp-combining", Options(driver="horizon", time_limit=30))
    assert row["verified"], row["message"]
    assert row["objective"] == 15.0 and row["steps"] == 15  # the model's optimum, as before the fix


def test_the_old_optimum_is_refused_by_the_verifier_and_by_the_model():
    """The schedule the model used to emit: the verifier refuses the relay from node 2, and
    the model now breaks on it exactly at the row that bars a copy into a root."""
    inst = star_with_a_slow_link()
    model = ten_ilp_combining.build(inst, 15)
    old = old_schedule(ten_ilp_combining.ten_model(model).data.timestep)
    v = verify.verify(old, inst)
    assert v is not None and "read its source once" in v.reason and v.step == 7
    assert ten_ilp_combining.start_from_schedule(model, old) is not None
    broken = violated_constraints(model)
    assert broken == ["ineq_one_copy[2,2]"], broken


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(switched(), st.sampled_from(["allreduce", "reduce_scatter", "reduce"]))
def test_every_schedule_on_a_small_switched_graph_verifies(topo, kind):
    """Every schedule verifies; an allreduce's takes at least the partition bound's timesteps
    (tens/bounds/partitions.py: the bound valid against the ILP's schedules, an independent
    search, on random switched graphs)."""
    inst = make_instance(topo, kind, message_bytes=2.4e5, **({"root": 0} if kind == "reduce" else {}))
    o = NATIVE.run(inst, Options(driver="horizon", time_limit=10, params={"lp_bound": False}))
    if o.schedule is not None:
        assert verify.verify(o.schedule, inst) is None
        if kind == "allreduce":
            assert o.units == "timesteps"
            bound = bounds.instance_bounds(inst).part("timesteps", "partition")
            assert bound.value <= o.objective, (bound.label(), o.objective)
