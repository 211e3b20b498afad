"""Reductions relayed through switch nodes: the verifier simulates one send per route GPU ->
switch(es) -> GPU (a switch forwards, GPUs reduce, each contributor exactly once), refuses a
route whose source changes what it holds of the piece before the delivery, and rejects
mutants with a contribution dropped or doubled; tree packing's reduce-scatter, reduce and
allreduce by time reversal through switches verify."""

from __future__ import annotations

import numpy as np
import pytest

from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance, topology_from_dict
from collsynth.instances.topology import from_edges
from collsynth.solvers import pipeline
from collsynth.solvers.producers import Options, get
from collsynth.tens.schedule import Schedule, from_sends
from collsynth.tens.verify import verify

M = 1e9


def star_with_a_shortcut():
    """GPUs 0, 1, 2 on switch 3 (a link each way), and a direct link 1 -> 0."""
    e = lambda u, v: (u, v, {"bandwidth": 1e9, "alpha": 0.0})  # noqa: E731
    return from_edges(4, [e(0, 3), e(3, 0), e(1, 3), e(3, 1), e(2, 3), e(3, 2), e(1, 0)], switches=[3])


def reduce_at_2(sends, **meta):
    return from_sends([(0, 0, 1, u, v, t) for u, v, t in sends], "reduce", 4, 1, meta=meta)


INST = make_instance(star_with_a_shortcut(), "reduce", root=2)


def test_a_reduction_relayed_through_a_switch_by_hand():
    """1 reduces into 0 in step 1; 0 sends {0, 1} into the switch in step 2, which forwards it
    to 2 in step 3: 2 ends with every contribution once."""
    assert verify(reduce_at_2([(1, 0, 1), (0, 3, 2), (3, 2, 3)]), INST) is None


def test_a_route_whose_source_changes_before_delivery_is_refused():
    """0 sends into the switch in step 1 (reading {0}) while 1's contribution reaches 0 in that
    step: the switch delivers {0} to 2, not {0, 1}; reading 0 at the delivery's step - 1 would
    wrongly accept it, so the verifier refuses the route."""
    v = verify(reduce_at_2([(1, 0, 1), (0, 3, 1), (3, 2, 2)]), INST)
    assert v is not None and v.step == 1 and "read its source once" in v.reason


def test_a_dropped_contribution_is_rejected():
    v = verify(reduce_at_2([(0, 3, 1), (3, 2, 2)]), INST)
    assert v is not None and v.index is None and "missing contributions of ranks [1]" in v.reason


def test_a_doubled_contribution_is_rejected():
    """1's contribution reaches 2 twice: once through 0, once straight through the switch."""
    v = verify(reduce_at_2([(1, 0, 1), (0, 3, 2), (3, 2, 3), (1, 3, 2), (3, 2, 3)]), INST)
    assert v is not None and "counted twice" in v.reason and v.step == 3


def test_a_switch_multicast_of_a_partial_sum_that_meets_itself_is_rejected():
    """The switch sends 1's contribution to 0 and to 2 (switch_copy); 0 then forwards its sum
    {0, 1} to 2, which already holds 1's: counted twice."""
    v = verify(reduce_at_2([(1, 3, 1), (3, 0, 2), (3, 2, 2), (0, 3, 3), (3, 2, 4)]), INST)
    assert v is not None and "counted twice" in v.reason and v.step == 4


def test_a_switch_does_not_reduce_two_arrivals():
    """0 and 1 send into the switch in one step and it forwards once: only one arrival goes on."""
    v = verify(reduce_at_2([(0, 3, 1), (1, 3, 1), (3, 2, 2)]), INST)
    assert v is not None and "missing contributions" in v.reason


def _take(s: Schedule, idx: np.ndarray) -> Schedule:
    return Schedule(s.collective, s.nodes, s.chunks, s.chunk[idx], s.lo[idx], s.hi[idx], s.src[idx], s.dst[idx],
                    s.step[idx], s.op[idx], s.denom, s.routing, s.meta)


@pytest.mark.parametrize("gen, params, kind", [
    ("switch", {"nodes": 4, "unwind": 0, "bandwidth": 50e9, "alpha": 0.0}, "reduce_scatter"),
    ("switch", {"nodes": 4, "unwind": 0, "bandwidth": 50e9, "alpha": 0.0}, "allreduce"),
    ("switch", {"nodes": 5, "unwind": 0, "bandwidth": 50e9, "alpha": 0.0}, "reduce"),
    ("forestcoll_a100", {"nodes": 1, "nvlink_alpha": 0.0, "nic_alpha": 0.0}, "reduce_scatter"),
])
def test_tree_packing_reductions_through_switches_verify_and_mutants_do_not(gen, params, kind):
    """Packed reductions through a kept switch verify and reach the bound up to the pipeline
    fill; the same schedule with one route (both hops) removed or repeated is rejected."""
    topo = topology_from_dict({"generator": gen, **params}) if gen == "switch" else build(gen, params)
    inst = make_instance(topo, kind, message_bytes=M, root=0 if kind == "reduce" else None)
    row, sched = pipeline.run(inst, "tree-packing", Options(params={"pieces": 20}, time_limit=300))
    assert row["verified"] and sched is not None, row["message"]
    assert np.isin(sched.src, sorted(topo.switches)).any()  # switch hops kept
    assert row["time_sync_s"] >= row["lower_bound_s"] * (1 - 1e-9)
    if kind != "allreduce":  # 20 pieces, then the deepest route's fill
        depth = row["extra"]["forests"][0]["depth_hops"]
        assert row["time_sync_s"] <= row["lower_bound_s"] * (20 + depth) / 20 * (1 + 1e-9)
    outs = np.flatnonzero(np.isin(sched.src, sorted(topo.switches)))
    out = int(outs[np.argmin(sched.step[outs])])  # the first forward: a route of the reduction
    into = np.flatnonzero((sched.dst == sched.src[out]) & (sched.chunk == sched.chunk[out]) & (sched.lo == sched.lo[out])
                          & (sched.step == sched.step[out] - 1))
    assert len(into)
    dropped = _take(sched, np.setdiff1d(np.arange(len(sched)), [out, into[0]]))
    assert verify(dropped, inst) is not None
    doubled = _take(sched, np.concatenate([np.arange(len(sched)), [into[0], out]]))
    v = verify(doubled, inst)
    assert v is not None and ("counted twice" in v.reason or "switch" in v.reason)


def test_greedy_relays_through_plain_switches_and_refuses_reducing_ones():
    """greedy reduces at GPUs only: each partial sum relayed through a plain switch is read once
    at its source (verified); a switch that reduces would combine them, so it refuses."""
    topo = topology_from_dict({"generator": "switch", "nodes": 4, "unwind": 0, "bandwidth": 50e9, "alpha": 0.0})
    from collsynth.instances.switch_ops import with_switch_ops
    from collsynth.solvers.producers import Unsupported
    inst = make_instance(topo, "reduce_scatter", message_bytes=M)
    assert verify(get("greedy").run(inst, Options()).schedule, inst) is None
    reducing = make_instance(with_switch_ops(topo, reduce=[4]), "reduce_scatter", message_bytes=M)
    with pytest.raises(Unsupported, match="switches that reduce"):
        get("greedy").run(reducing, Options())
