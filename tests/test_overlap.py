"""Allreduce as one problem (solvers/packing/overlap.py): the allgather overlapped on the
reduction piece by piece, both halves' forests chosen together and priced as the whole."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings

from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.solvers import pipeline
from collsynth.solvers.packing import overlap
from collsynth.solvers.packing import producer as packing
from collsynth.solvers.producers import Options
from collsynth.tens import bounds, cost_models, verify
from collsynth.tens.schedule import Schedule, concat, from_sends
from test_partition_bound import switched

A100X2 = {"nodes": 2, "nvlink_alpha": 0.0, "nic_alpha": 0.0}


def _halves(inst, pieces: int, trees: int | None = None):
    """The reduce-scatter and the allgather tree packing emits for ``inst`` (an allreduce)."""
    rs = packing.forest(inst, "allgather", True, trees=trees)
    ag = packing.forest(inst, "allgather", False, trees=trees)
    return packing.emit(inst, rs, pieces), packing.emit(inst, ag, pieces)


def _checked(sched: Schedule, inst) -> Schedule:
    return packing._with_header(sched, inst)


def _shifted(sched: Schedule, first: int, by: int) -> Schedule:
    """``sched`` with its rows from ``first`` on moved ``by`` steps."""
    step = sched.step.astype(np.int64)
    step[first:] += by
    return Schedule(sched.collective, sched.nodes, sched.chunks, sched.chunk, sched.lo, sched.hi, sched.src,
                    sched.dst, step, sched.op, sched.denom, sched.routing, dict(sched.meta))


def test_two_gpus_by_hand():
    """Two GPUs on one link each way, each shard in two halves, the reduce-scatter's arrivals
    at a shard's owner in steps 1 and 2, the allgather's root sends in steps 1 and 2 of its own:
    a half can leave its owner the step after it was reduced there, so by hand the allgather
    runs in steps 2 and 3 (concatenated: 3 and 4), and the result verifies."""
    h = Fraction(1, 2)
    rs = from_sends([(1, 0, h, 0, 1, 1), (1, h, 1, 0, 1, 2), (0, 0, h, 1, 0, 1), (0, h, 1, 1, 0, 2)],
                    "reduce_scatter", nodes=2, chunks=2)
    ag = from_sends([(0, 0, h, 0, 1, 1), (0, h, 1, 0, 1, 2), (1, 0, h, 1, 0, 1), (1, h, 1, 1, 0, 2)],
                    "allgather", nodes=2, chunks=2)
    inst = make_instance(build("ring", {"nodes": 2}), "allreduce", message_bytes=2e6)
    both = overlap.overlapped(rs, ag, 1)
    assert [(s.chunk, s.lo, s.step) for s in both.sends() if s.op == "copy"] == [(0, 0, 2), (0, h, 3), (1, 0, 2),
                                                                                 (1, h, 3)]
    assert verify.verify(both, inst) is None
    assert [s.step for s in concat(rs, ag, "allreduce").sends() if s.op == "copy"] == [3, 4, 3, 4]


def test_the_shift_is_the_least_that_verifies():
    """On A100 x2 (one tree a shard, 8 pieces) the overlapped allreduce verifies, and the same
    with the allgather one step earlier does not (a root would send a piece before its
    reduction completed): the shift is exactly the least, found by the verifier, not by
    :func:`overlap.overlapped`."""
    inst = make_instance(build("forestcoll_a100", A100X2), "allreduce", message_bytes=1e9)
    rs, ag = _halves(inst, 8, trees=1)
    both = _checked(overlap.overlapped(rs, ag, 1), inst)
    assert verify.verify(both, inst) is None
    assert verify.verify(_shifted(both, len(rs), -1), inst) is not None
    assert both.num_steps < _checked(concat(rs, ag, "allreduce"), inst).num_steps


@settings(max_examples=6, deadline=None)
@given(switched())
def test_overlapped_allreduce_verifies_and_sync_never_exceeds_the_concatenation(topo):
    """Random switched boxes: the overlapped allreduce verifies, every model's time is at
    least that model's bound, and its ``sync`` time is at most the concatenation's (a step
    of both halves costs at most the two steps apart: the largest load and latency of a sum
    are at most the sums of the largest)."""
    inst = make_instance(topo, "allreduce", message_bytes=2.4e5)
    rs, ag = _halves(inst, 4)
    both = _checked(overlap.overlapped(rs, ag, 1), inst)
    assert verify.verify(both, inst) is None
    b = bounds.instance_bounds(inst)
    times = {m: cost_models.price(both, inst, m).total_s for m in ("sync", "event")}
    for model, t in times.items():
        assert b.of(model).value <= t * (1 + 1e-9), (model, t)
    apart = cost_models.price(_checked(concat(rs, ag, "allreduce"), inst), inst, "sync").total_s
    assert times["sync"] <= apart * (1 + 1e-12)


def _joint_run(generator: str, params: dict):
    inst = make_instance(build(generator, params), "allreduce", message_bytes=1e9)
    row, _ = pipeline.run(inst, "tree-packing", Options(time_limit=600, params={"pieces": 200}))
    assert row["verified"]
    joint = row["extra"]["joint_choice"]
    sums = {name: p["event"] + p["sync"] for name, p in joint["priced"].items()}
    assert sums[joint["chosen"]] == min(sums.values())
    return inst, row, [f["trees_per_shard"] for f in row["extra"]["forests"]]


def test_a100_pair_is_chosen_for_fifo_links():
    """ForestColl's A100 x2 at alpha 0: the halves picked one by one (the optimum's two-level
    allgather) price above one tree a shard for the reduce-scatter under ``event`` when
    overlapped, so the joint choice keeps the latter, its allgather one tree a shard or that
    mixed with the optimum's forest (:func:`overlap.mixed`); the schedule runs within 2 % of the
    bound under ``event`` at 200 pieces (the one-tree packing's own time is 7/6 of a shard's
    against the optimum's 15/13, 1.011x; the rest is pipeline fill)."""
    inst, row, trees = _joint_run("forestcoll_a100", A100X2)
    events = {name: p["event"] for name, p in row["extra"]["joint_choice"]["priced"].items()}
    assert events[row["extra"]["joint_choice"]["chosen"]] < events["as picked"]
    assert trees[0] == 1 and row["extra"]["forests"][1]["shape"] in ("two-level", "mixed")
    assert row["time_event_s"] <= 1.02 * bounds.instance_bounds(inst).event.value


def test_a_mixed_forest_splits_every_shard_between_both():
    """Half of each shard on one packed tree, half on the optimum's 13 (A100 x2 allgather, 4
    pieces): the mix verifies, its units are the product, and a root's trees cover its shard."""
    inst = make_instance(build("forestcoll_a100", A100X2), "allgather", message_bytes=1e9)
    one, opt = packing.forest(inst, "allgather", False, trees=1), packing.forest(inst, "allgather", False)
    mix = overlap.mixed(one, opt, Fraction(1, 2))
    assert mix.k == 2 * one.k * opt.k and len(mix.trees) == len(one.trees) + len(opt.trees)
    parts = sorted((t.lo, t.hi) for t in mix.trees if t.root == 0)
    assert parts[0][0] == 0 and parts[-1][1] == mix.k and all(a[1] == b[0] for a, b in zip(parts, parts[1:]))
    assert verify.verify(_checked(packing.emit(inst, mix, 4), inst), inst) is None


def test_dgx_h100_keeps_the_optimum_forests_for_both_halves():
    """Two DGX-H100 boxes at alpha 0, 200 pieces. The reduce-scatter used to keep one tree a
    shard under FIFO (the optimum's rings starved: a GPU's own pieces left ahead of the sums it
    relays) and the overlapped pair as picked ran 1.0198x the bound under ``event``; the
    optimum's greedy forests for both halves ran 1.111x. Now that reductions declare their
    links' order (``link_order = "program"``) the reduce-scatter keeps the optimum's two trees
    a shard, and the greedy pair is the least of the pairs priced: measured 1.0011x under
    ``event`` (1.0078x under ``sync``; the pair as picked, rings, 1.0162x)."""
    inst, row, trees = _joint_run("dgx_h100", {"nodes": 2, "nvlink_alpha": 0.0, "nic_alpha": 0.0})
    assert trees == [2, 2] and row["extra"]["joint_choice"]["chosen"] != "as picked"
    assert row["time_event_s"] <= 1.005 * bounds.instance_bounds(inst).event.value


def test_the_trees_parameter_keeps_the_halves_as_asked():
    inst = make_instance(build("forestcoll_a100", A100X2), "allreduce", message_bytes=1e9)
    row, _ = pipeline.run(inst, "tree-packing", Options(time_limit=600, params={"pieces": 4, "trees": 13}))
    assert row["verified"] and "joint_choice" not in row["extra"]
    assert [f["trees_per_shard"] for f in row["extra"]["forests"]] == [13, 13]


class _Forest:
    def __init__(self, k):
        self.k, self.shape = k, "greedy"


def test_candidates_pair_every_forest_of_each_half_once():
    a, b, one_a, one_b = _Forest(13), _Forest(13), _Forest(1), _Forest(1)
    ones = {0: one_a, 1: one_b}
    pairs = overlap.candidates([[a, a], [b]], ones.get)  # a forest listed twice is one candidate
    assert len(pairs) == 4 and pairs["as picked"] == (a, b)
    assert {tuple(map(id, p)) for p in pairs.values()} == {(id(x), id(y)) for x in (a, one_a) for y in (b, one_b)}
    assert len(overlap.candidates([[one_a], [b]], lambda i: None)) == 1  # a half already k = 1; none packable


def test_choose_keeps_the_least_verified_sum_and_the_first_over_budget():
    pairs = {"as picked": 0, "x": 1, "y": 2}
    times = {0: {"sync": 3.0, "event": 9.0}, 1: {"sync": 4.0, "event": 4.0}, 2: None}  # y does not verify
    name, priced = overlap.choose(pairs, times.get, lambda p: 1, ("sync", "event"))
    assert name == "x" and set(priced) == {"as picked", "x"}
    assert overlap.choose(pairs, times.get, lambda p: 1, ("sync",))[0] == "as picked"
    over = lambda p: overlap.PROBE_SENDS + 1  # noqa: E731  (the first pair alone exceeds the budget)
    assert overlap.choose(pairs, times.get, over, ("sync", "event")) == ("as picked", {})
    # the budget holds the first pair only: the others are passed over, never chosen unpriced
    name, priced = overlap.choose(pairs, times.get, lambda p: overlap.PROBE_SENDS, ("sync", "event"))
    assert name == "as picked" and set(priced) == {"as picked"}
    # a pair that would exceed what is left is passed over, a later one that fits is priced
    sizes = {0: overlap.PROBE_SENDS // 2, 1: overlap.PROBE_SENDS, 2: 1}
    name, priced = overlap.choose({"as picked": 0, "x": 1, "z": 2}, {0: times[0], 1: times[1], 2: times[1]}.get,
                                  sizes.get, ("sync", "event"))
    assert set(priced) == {"as picked", "z"} and name == "z"
