"""ten-ilp-combining: native reductions in the TEN (partial sums forwarded once after their
arrivals, copies of the result), against hand-derived optima, the reversal and RS + AG."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collsynth.formulations import ten_formulation, ten_ilp, ten_ilp_combining, registry
from collsynth.instances.collective import make
from collsynth.instances.generators import build as topo
from collsynth.instances.instance import Instance, make_instance
from collsynth.solvers.cli import main
from collsynth.solvers.producers import Options
from collsynth.solvers.ten import drivers
from collsynth.solvers.ten.formulation_producers import producer
from collsynth.tens import bounds, ten, verify
from collsynth.tens.schedule import OP_COPY, OP_REDUCE
from ilp_oracle import violated_constraints

NATIVE = producer(ten_ilp_combining)
REVERSAL = producer(ten_ilp)
QUICK = {"lp_bound": False}


def native(inst, **params):
    return NATIVE.run(inst, Options(time_limit=60, params={**QUICK, **params}))


def sends(schedule):
    """``{(chunk, src, dst, step, op)}`` of a schedule."""
    return {(s.chunk, s.src, s.dst, s.step, s.op) for s in schedule.sends()}


def test_the_module_is_registered_and_declares_native_reductions():
    f = ten_formulation(registry()["ten-ilp-combining"])
    assert f.native_reductions and not f.recovery_valid and not f.warm_start and f.respects_capacity
    assert not ten_formulation(ten_ilp).native_reductions  # the contract's default
    inst = make_instance(topo("ring", {"nodes": 3}), "reduce", root=0)
    with pytest.raises(ten.NotSupported, match="precondition only"):
        ten_ilp_combining.build(inst, 2, state=np.zeros((1, 3), bool))


def test_reduce_on_a_three_node_line():
    """Line 0 - 1 - 2, reduce to 0. Node 2's contribution is two hops from the root, so no
    schedule beats 2 timesteps; node 1 forwards once, after node 2's partial has arrived, so
    the only 2-step schedule is 2 -> 1 in step 1 and 1 -> 0 (holding {1, 2}) in step 2. To the
    middle node 1 both neighbours send in step 1: 1 timestep."""
    line = topo("mesh", {"dims": [3]})
    o = native(make_instance(line, "reduce", root=0))
    assert (o.status, o.objective) == ("optimal", 2.0)
    assert sends(o.schedule) == {(0, 2, 1, 1, "reduce"), (0, 1, 0, 2, "reduce")}
    o = native(make_instance(line, "reduce", root=1))
    assert (o.status, o.objective) == ("optimal", 1.0)
    assert sends(o.schedule) == {(0, 0, 1, 1, "reduce"), (0, 2, 1, 1, "reduce")}


def test_a_node_without_a_contribution_relays_partials():
    """Line 0 - 1 - 2 reducing over ranks {0, 2} only, to 0: node 1 contributes nothing, so it
    may not send before it received (the verifier: no contribution to send), and forwards
    node 2's partial once: 2 -> 1 in step 1, 1 -> 0 in step 2."""
    inst = make_instance(topo("mesh", {"dims": [3]}), "reduce", root=0, nodes=[0, 2])
    o = native(inst)
    assert (o.status, o.objective) == ("optimal", 2.0)
    assert sends(o.schedule) == {(0, 2, 1, 1, "reduce"), (0, 1, 0, 2, "reduce")}
    assert verify.verify(o.schedule, inst) is None


def test_allreduce_on_a_four_ring():
    """Bidirectional 4-ring, one chunk per node. A chunk reduced at its owner r along a tree
    and copied out: the node opposite r is 2 hops away, so its contribution reaches r at the
    end of timestep 2 at the earliest and the result reaches it back at 4: no schedule of
    the model beats 4. Every chunk takes 3 forwards (each non-root contributor once) and 3
    copies (each non-root node receives the result once): 24 sends on 8 links, 3 per timestep
    on average, so 4 timesteps leave room. RS + AG also takes 2 + 2 = 4. The instance's bound
    (3: those 24 sends on 8 links) covers every schedule, so the run is optimal for the model
    only, and says so."""
    inst = make_instance(topo("ring", {"nodes": 4}), "allreduce")
    o = native(inst)
    assert (o.status, o.objective, o.bound) == ("feasible", 4.0, 3.0)
    assert o.extra["model_optimal"] and o.extra["model_bound"] == 4.0
    assert verify.verify(o.schedule, inst) is None
    for c in range(4):
        mine = o.schedule.select(o.schedule.chunk == c)
        assert int((mine.op == OP_REDUCE).sum()) == 3 and int((mine.op == OP_COPY).sum()) == 3
        assert set(mine.dst[mine.op == OP_REDUCE].tolist()) <= {c} | set(mine.src[mine.op == OP_REDUCE].tolist())
    assert REVERSAL.run(inst, Options(time_limit=60, params=QUICK)).objective == 4.0


@pytest.mark.parametrize("gen,params,kind,root", [
    ("ring", {"nodes": 5}, "reduce", 2),
    ("mesh", {"dims": [2, 3]}, "reduce_scatter", None),
    ("ring", {"nodes": 4, "bidirectional": False}, "reduce_scatter", None),
])
def test_native_equals_the_reversal_on_reduce_and_reduce_scatter(gen, params, kind, root):
    """A reduction tree read backwards is a broadcast tree on the transposed topology, so the
    reversal (the TEN ILP of the dual) is optimal for these kinds and the native optimum is the
    same number of timesteps."""
    inst = make_instance(topo(gen, params), kind, root=root)
    mine = native(inst)
    ref = REVERSAL.run(inst, Options(time_limit=60, params=QUICK))
    assert mine.status == ref.status == "optimal"
    assert mine.objective == ref.objective
    assert verify.verify(mine.schedule, inst) is None


def test_allreduce_without_the_barrier_beats_reduce_scatter_then_allgather_on_dgx1():
    """DGX-1 (8 GPUs, 6 NVLinks each: 48 link units per timestep), 16 allreduce chunks. Each
    chunk needs 2 * 7 = 14 sends (one-way gossip), 224 in all: at least ceil(224 / 48) = 5
    timesteps, and the native model meets it. Reduce-scatter then allgather needs 3 + 3: no
    phase can finish in 2 (112 sends on 48 links), and the barrier keeps the phases apart."""
    inst = make_instance(topo("dgx1", {}), "allreduce", chunks_per_node=2)
    mine = native(inst)
    assert (mine.status, mine.objective) == ("optimal", 5.0)
    assert verify.verify(mine.schedule, inst) is None
    ref = REVERSAL.run(inst, Options(time_limit=60, params=QUICK))
    assert ref.objective == 6.0 and verify.verify(ref.schedule, inst) is None


def concurrent(topology, kinds_roots, message_bytes):
    """An instance running ``(kind, root)`` collectives together on ``topology``."""
    colls = tuple(make(kind, topology.npus, topology.size, message_bytes=mb, root=root)
                  for (kind, root), mb in zip(kinds_roots, message_bytes))
    return Instance(name="mix", topology=topology, collectives=colls)


def test_concurrent_collectives_of_mixed_kinds():
    """Broadcast from 0, reduce to 5 and allgather on a 2x3 mesh (all chunks of one size, so
    one link timestep each), which the reversal refuses: the joint schedule verifies and
    is no shorter than each collective alone (solved by the TEN ILP, reversal for the reduce)."""
    mesh = topo("mesh", {"dims": [2, 3]})
    inst = concurrent(mesh, [("broadcast", 0), ("reduce", 5), ("allgather", None)], [1.0, 1.0, 6.0])
    with pytest.raises(ten.NotSupported, match="mixing combining"):
        ten_ilp.build(inst, 4)
    o = native(inst)
    assert o.schedule is not None and verify.verify(o.schedule, inst) is None
    alone = [REVERSAL.run(Instance(name="one", topology=mesh, collectives=(c,)),
                          Options(time_limit=60, params=QUICK)).objective for c in inst.collectives]
    assert o.objective >= max(alone)
    assert o.objective >= bounds.instance_bounds(inst).timesteps.value


def test_the_cli_solves_a_mixed_instance(tmp_path, capsys):
    p = tmp_path / "mix.toml"
    p.write_text("""name = "mix"
[topology]
generator = "ring"
nodes = 4
bandwidth = 100e9
alpha = 0.5e-6
[[collective]]
kind = "reduce"
root = 2
message_bytes = 1000
[[collective]]
kind = "allgather"
message_bytes = 4000
""")
    code = main(["solve", str(p), "--producer", "ten-ilp-combining", "--time-limit", "60", "--json"])
    (out,) = json.loads(capsys.readouterr().out)["rows"]
    assert code == 0 and out["verified"] is True and out["producer"] == "ten-ilp-combining"
    assert out["steps"] >= out["lower_bound_timesteps"]


TOPOLOGIES = [("ring", {"nodes": 3}), ("ring", {"nodes": 4, "bidirectional": False}), ("mesh", {"dims": [2, 2]}),
              ("mesh", {"dims": [3]}), ("mesh", {"dims": [2, 3]}), ("complete", {"nodes": 4})]


@st.composite
def combining_instances(draw):
    gen, params = draw(st.sampled_from(TOPOLOGIES))
    t = topo(gen, params)
    n = t.size
    kind = draw(st.sampled_from(["reduce", "reduce_scatter", "allreduce", "mix"]))
    if kind == "mix":
        other = draw(st.sampled_from(["broadcast", "allgather"]))
        root = draw(st.integers(0, n - 1))
        return concurrent(t, [("reduce", root), (other, 0 if other == "broadcast" else None)],
                          [1.0, 1.0 if other == "broadcast" else float(n)])
    root = draw(st.integers(0, n - 1)) if kind == "reduce" else None
    return make_instance(t, kind, root=root, chunks_per_node=draw(st.integers(1, 2)) if kind != "reduce" else 1)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(combining_instances())
def test_every_native_schedule_verifies_and_meets_the_bound(inst):
    """Whatever it emits is a schedule the verifier accepts, within the TEN's link capacity,
    and no shorter than the instance's lower bound (tens/bounds/)."""
    o = native(inst)
    assert o.schedule is not None, o.message
    assert verify.verify(o.schedule, inst) is None
    assert bounds.respects_ten_capacity(o.schedule, inst)
    assert o.schedule.num_steps >= bounds.instance_bounds(inst).timesteps.value


def test_the_reversal_schedule_is_a_feasible_start_of_the_makespan_model():
    """RS + AG on the bidirectional 4-ring (4 timesteps, see the test above) is one of the
    native model's schedules: set as a MIP start it breaks no row of the makespan model built
    at its length, and its makespan is its length. The same schedule claimed at another TEN
    timestep is not one of the model's and is refused."""
    inst = make_instance(topo("ring", {"nodes": 4}), "allreduce")
    ref = REVERSAL.run(inst, Options(time_limit=60, params=QUICK)).schedule
    assert ref.num_steps == 4 and ref.meta["timestep_s"] > 0
    model = ten_ilp_combining.build(inst, 4, objective="makespan")
    info = ten_ilp_combining.start_from_schedule(model, ref)
    assert info == {"sends": len(ref), "objective": 4.0}
    assert violated_constraints(model) == []
    other = replace(ref, meta={**ref.meta, "timestep_s": 2 * ref.meta["timestep_s"]})
    assert ten_ilp_combining.start_from_schedule(ten_ilp_combining.build(inst, 4, objective="makespan"), other) is None


def test_descend_shortens_a_delayed_schedule_to_the_model_optimum():
    """RS + AG on the 4-ring delayed by one idle timestep (5 timesteps, still valid) as the
    start: the makespan model finds the model's optimum, 4 timesteps (the hand argument of
    test_allreduce_on_a_four_ring), and proves it."""
    inst = make_instance(topo("ring", {"nodes": 4}), "allreduce")
    ref = REVERSAL.run(inst, Options(time_limit=60, params=QUICK)).schedule
    late = replace(ref, step=ref.step + 1)
    assert late.num_steps == 5 and verify.verify(late, inst) is None
    o = drivers.descend(inst, ten_ilp_combining, Options(time_limit=60), late)
    assert (o.status, o.objective, o.bound) == ("optimal", 4.0, 4.0)
    assert o.extra["warm_start"]["objective"] == 5.0
    assert verify.verify(o.schedule, inst) is None


def test_descend_reads_back_a_start_that_meets_the_bound():
    """Told that 4 timesteps is the least (``proven=4``), descend does not search: the RS + AG
    schedule of the 4-ring goes through the arrivals model at its length, where it holds all
    16 postcondition pairs (4 chunks' results at 4 nodes), and comes back optimal."""
    inst = make_instance(topo("ring", {"nodes": 4}), "allreduce")
    ref = REVERSAL.run(inst, Options(time_limit=60, params=QUICK)).schedule
    o = drivers.descend(inst, ten_ilp_combining, Options(time_limit=60), ref, proven=4)
    assert (o.status, o.objective, o.bound) == ("optimal", 4.0, 4.0)
    assert o.extra["warm_start"]["objective"] == 16.0
    assert verify.verify(o.schedule, inst) is None
