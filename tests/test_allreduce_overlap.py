"""An allreduce's allgather overlapped with its reduce-scatter (``tens/allreduce_overlap.py``,
``solvers/packing/overlap_sizes.py``): on small Clos fabrics the compact form verifies exactly
where its explicit sends do (at the least shift, mirrored or not, and one step earlier, where
both refuse it) and prices as them under ``sync`` and ``event``; a ``sync`` run returns the
overlap, verified and priced as its explicit sends, below the halves in turn, and not below
the instance's ``sync`` bound (the crossing bound on fabrics whose switches copy nothing); a
ring of three by hand; the written form reads back."""

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from collsynth import InputError
from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.solvers.packing.compact import least_sync
from collsynth.solvers.packing.producer import _with_header, run_compact
from collsynth.solvers.pipeline import run
from collsynth.solvers.producers import Options
from collsynth.tens import allreduce_overlap, cost_models, pipelined_allreduce, pipelined_event, verify
from collsynth.tens.bounds import instance_bounds
from collsynth.tens.pipelined_trees import PipelinedTrees
from compact_checks import SMALL_CLOS, THREE_TIERS, assert_row_as_explicit

fabrics = st.one_of(SMALL_CLOS, THREE_TIERS)


def _halves(inst, pieces):
    return run_compact(inst, Options(time_limit=60, params={"pieces": pieces})).schedule


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=fabrics, pieces=st.integers(1, 4), mirror=st.booleans())
@example(fabric=("rail_clos", {"groups_per_pod": 2, "boxes_per_group": 2, "gpus_per_box": 2, "rails": 2, "spines": 1,
                               "radix": 16}), pieces=3, mirror=True)
def test_the_least_shift_is_where_the_explicit_sends_verify(fabric, pieces, mirror):
    inst = make_instance(build(*fabric), "allreduce", message_bytes=1 << 20)
    f = _halves(inst, pieces)
    least = allreduce_overlap.least_delay(f.reduce_scatter, f.allgather, mirror)
    for delay, valid in ((least - 1, False), (least, True)):
        g = replace(f, delay=delay, mirror=mirror)
        sched = _with_header(pipelined_allreduce.expand(g), inst)
        why = pipelined_allreduce.verify(g, inst)
        assert (why is None) == valid and (verify.verify(sched, inst) is None) == valid, why
        if not valid:
            assert why.startswith("overlap:")
            continue
        want, got = cost_models.price(sched, inst, "sync"), pipelined_allreduce.price_sync(g, inst)
        assert got.steps == want.steps
        assert got.T_L_s == pytest.approx(want.T_L_s, rel=1e-12) and got.T_B_s == pytest.approx(want.T_B_s, rel=1e-12)
        event = cost_models.price(sched, inst, "event").total_s
        assert pipelined_event.price(g, inst).total_s == pytest.approx(event, rel=1e-12)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=fabrics)
@example(fabric=("rail_clos", {"groups_per_pod": 2, "boxes_per_group": 2, "gpus_per_box": 2, "rails": 2, "spines": 1,
                               "radix": 16}))
def test_a_sync_run_overlaps_the_halves_and_prices_as_its_explicit_sends(fabric):
    inst = make_instance(build(*fabric), "allreduce", message_bytes=1 << 26)
    row, trees = run(inst, "tree-packing", Options(time_limit=120, params={"form": "compact", "objective": "sync"}))
    assert isinstance(trees, pipelined_allreduce.PipelinedAllreduce) and row["verified"]
    assert_row_as_explicit(row, pipelined_allreduce.expand(trees), inst)
    own = [least_sync(replace(h, cuts=None), pipelined_allreduce.half_instance(inst, h.collective))[0]
           for h in trees.halves]  # the same trees' halves in turn, each at its own depth of least sync price
    in_turn = pipelined_allreduce.price_sync(pipelined_allreduce.PipelinedAllreduce(*own), inst).total_s
    assert row["time_sync_s"] <= in_turn * (1 + 1e-12)
    if fabric[0] == "rail_clos" and fabric[1].get("rails") == 2:  # the ramps overlap: measured lower
        assert trees.delay is not None and row["time_sync_s"] < in_turn * 0.99


def _ring():
    hops = [(0, 1, 0), (1, 2, 1), (1, 2, 0), (2, 0, 1), (2, 0, 0), (0, 1, 1)]  # a chain per root
    ag = PipelinedTrees("allgather", 3, 3, 1, 4, 1, np.array([0, 1, 2]), np.array([0, 0, 0]), np.array([1, 1, 1]),
                        np.array([0, 2, 4, 6]), *map(np.array, zip(*hops)))
    return pipelined_allreduce.PipelinedAllreduce(replace(ag, collective="reduce_scatter"), ag)


def test_a_ring_of_three_by_hand():
    """Chains ``r -> r+1 -> r+2``, 4 pieces: piece ``q`` of a reduction completes at its root in
    step ``5 - q``, so the mirrored allgather may start its piece ``q'`` (the reduction's piece
    ``3 - q'``) in step ``delay + q' + 1 > 2 + q'``: delay 2 (5 unmirrored, the halves in turn).
    The reduce-scatter loads each link ``i + 1 -> i`` with 1, 2, 2, 2, 1 pieces in steps 1-5, the
    allgather ``i -> i + 1`` with as many in steps 3-7: 1, 2, 2, 2, 2, 2, 1 pieces a step, 12
    in 7 steps against 16 in 10 in turn."""
    inst = make_instance(build("ring", {"nodes": 3}), "allreduce", message_bytes=3e9)
    f = _ring()
    assert allreduce_overlap.least_delay(*f.halves, True) == 2 and allreduce_overlap.least_delay(*f.halves, False) == 5
    g = replace(f, delay=2, mirror=True)
    assert pipelined_allreduce.verify(g, inst) is None
    serial, got = pipelined_allreduce.price_sync(f, inst), pipelined_allreduce.price_sync(g, inst)
    assert (serial.steps, got.steps) == (10, 7)
    assert got.T_B_s == pytest.approx(serial.T_B_s * 12 / 16, rel=1e-12)
    assert "overlap" in pipelined_allreduce.verify(replace(g, delay=1), inst)


def test_the_written_overlap_reads_back(tmp_path):
    inst = make_instance(build("ring", {"nodes": 3}), "allreduce", message_bytes=3e9)
    g = replace(_ring(), delay=2, mirror=True)
    path = tmp_path / "t.json"
    pipelined_allreduce.write_json(g, path)
    back = pipelined_allreduce.from_json(json.loads(path.read_text()))
    assert (back.delay, back.mirror) == (2, True)
    assert pipelined_allreduce.price_sync(back, inst) == pipelined_allreduce.price_sync(g, inst)
    with pytest.raises(InputError, match="delay: expected a whole number"):
        pipelined_allreduce.from_json({**json.loads(path.read_text()), "delay": "soon"})


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=st.sampled_from([("fat_tree", {"k": 4}), ("rail_clos", {"groups_per_pod": 2, "boxes_per_group": 2,
                                                                      "gpus_per_box": 2, "rails": 2, "spines": 1,
                                                                      "radix": 16})]),
       alpha=st.sampled_from([0.5e-6, 2.7e-6, 2e-5]), size=st.sampled_from([1 << 20, 1 << 26]))
def test_the_overlap_stays_above_the_instance_bound(fabric, alpha, size):
    """The instance's ``sync`` bound (the crossing bound where the fabric's switches copy
    nothing, ``tens/bounds/injections.py``) is met by no overlapped allreduce faster than it."""
    gen, params = fabric
    keys = {"link_alpha": alpha} if gen == "fat_tree" else {"nic_alpha": alpha}
    inst = make_instance(build(gen, {**params, **keys, "fabric_copy": False}), "allreduce", message_bytes=size)
    trees = run_compact(inst, Options(time_limit=60, params={"objective": "sync"})).schedule
    assert pipelined_allreduce.verify(trees, inst) is None
    bound = instance_bounds(inst).sync.value
    assert bound <= pipelined_allreduce.price_sync(trees, inst).total_s * (1 + 1e-9)


TWO_RAILS = ("rail_clos", {"groups_per_pod": 2, "boxes_per_group": 2, "gpus_per_box": 2, "rails": 2, "spines": 1,
                           "radix": 16})


def _as_explicit_event(trees, inst) -> float:
    return cost_models.price(_with_header(pipelined_allreduce.expand(trees), inst), inst, "event").total_s


def test_the_default_objective_keeps_the_overlap_where_sync_plus_event_is_lower(monkeypatch):
    """On a two-group rail Clos the default run (``sync`` + ``event``) returns the overlap; it
    verifies and prices as its explicit sends under both models, and its summed price is below
    the same run's with the halves kept in turn (the overlap step switched off), as is its
    ``sync`` price (measured: 1.168 against 1.224 ms)."""
    from collsynth.solvers.packing import compact_form

    inst = make_instance(build(*TWO_RAILS), "allreduce", message_bytes=1 << 26)
    options = Options(time_limit=120, params={"form": "compact"})
    row, trees = run(inst, "tree-packing", options)
    assert isinstance(trees, pipelined_allreduce.PipelinedAllreduce) and trees.delay is not None and row["verified"]
    assert_row_as_explicit(row, pipelined_allreduce.expand(trees), inst)
    assert row["time_event_s"] == pytest.approx(_as_explicit_event(trees, inst), rel=1e-12)
    monkeypatch.setattr(compact_form, "with_overlap", lambda f, cost, *a, **k: (f, {}, cost))
    turn, in_turn = run(inst, "tree-packing", options)
    assert in_turn.delay is None and turn["verified"]
    assert row["time_sync_s"] + row["time_event_s"] < turn["time_sync_s"] + turn["time_event_s"]
    assert row["time_sync_s"] < turn["time_sync_s"] * 0.99


@pytest.mark.parametrize("objective", ["sync+event", "sync"])
def test_given_pieces_are_kept_and_overlapped_at_the_shift_of_least_sync_price(objective):
    """``--param pieces=3`` keeps 3 pieces a half and shifts the allgather by the delay (and
    mirror) of least ``sync`` price among every valid one, found here by pricing each delay's
    explicit sends (the least valid delay up to the halves in turn, mirrored or not); the row
    verifies and prices as its explicit sends."""
    inst = make_instance(build(*TWO_RAILS), "allreduce", message_bytes=1 << 26)
    row, trees = run(inst, "tree-packing", Options(time_limit=120, params={"form": "compact", "pieces": 3,
                                                                           "objective": objective}))
    assert trees.pieces == (3, 3) and trees.delay is not None and row["verified"]
    assert_row_as_explicit(row, pipelined_allreduce.expand(trees), inst)
    if objective == "sync+event":
        assert row["time_event_s"] == pytest.approx(_as_explicit_event(trees, inst), rel=1e-12)
    rs, ag = trees.halves
    turn = replace(trees, delay=None, mirror=False)
    every = {(None, False): cost_models.price(_with_header(pipelined_allreduce.expand(turn), inst), inst, "sync")}
    for mirror in (False, True):
        for delay in range(allreduce_overlap.least_delay(rs, ag, mirror), allreduce_overlap.last_step(rs) + 1):
            g = replace(trees, delay=delay, mirror=mirror)
            every[delay, mirror] = cost_models.price(_with_header(pipelined_allreduce.expand(g), inst), inst, "sync")
    least = min(p.total_s for p in every.values())
    assert row["time_sync_s"] == pytest.approx(least, rel=1e-12) and least < every[None, False].total_s * 0.99


def test_an_overlap_slower_in_sum_under_event_is_not_kept(monkeypatch):
    """The rule of the producer's choice, the least ``sync`` + ``event`` sum: with every
    overlapped candidate's ``event`` price made 1 ms longer (more than its ``sync`` gain, about
    0.06 ms here) the default run keeps the halves in turn, priced as the search priced them;
    with 1 us longer it keeps the overlap."""
    from collsynth.solvers.packing import allreduce_depth

    inst = make_instance(build(*TWO_RAILS), "allreduce", message_bytes=1 << 26)
    real = pipelined_event.price
    for extra, overlapped in ((1e-3, False), (1e-6, True)):
        def slower(f, instance, *a, **k):
            cost = real(f, instance, *a, **k)
            return replace(cost, total_s=cost.total_s + extra) if f.delay is not None else cost

        monkeypatch.setattr(allreduce_depth.pipelined_event, "price", slower)
        out = run_compact(inst, Options(time_limit=120, params={"form": "compact"}))
        assert (out.schedule.delay is not None) == overlapped
        assert out.prices["event"].total_s == pytest.approx(slower(out.schedule, inst).total_s, rel=1e-12)


def test_halves_without_a_least_shift_are_returned_in_turn(monkeypatch):
    """Where :func:`~collsynth.tens.allreduce_overlap.least_delay` refuses the halves' pieces
    (a ``ValueError``), the producer's search offers no overlap and returns the halves in turn
    instead of raising (the ring of three's halves, delay unset)."""
    from collsynth.solvers.packing import overlap_sizes

    def refuse(*a, **k):
        raise ValueError("a root's chunk is not split by both halves' pieces")

    inst = make_instance(build("ring", {"nodes": 3}), "allreduce", message_bytes=3e9)
    f = _ring()
    monkeypatch.setattr(overlap_sizes.ao, "least_delay", refuse)
    assert overlap_sizes.overlapped(f, inst) is f
    assert overlap_sizes.least_shifted(f, inst) is f


def test_a_time_limit_in_the_overlap_search_keeps_the_halves_in_turn(monkeypatch):
    """The overlap search stopped by the run's time limit: the run keeps the halves in turn it
    had (verified by the pipeline) and says so, instead of losing them."""
    from collsynth.limits import TimeLimitReached
    from collsynth.solvers.packing import compact_form

    def stopped(*a, **k):
        raise TimeLimitReached("time limit 2 s reached")

    inst = make_instance(build(*TWO_RAILS), "allreduce", message_bytes=1 << 26)
    monkeypatch.setattr(compact_form, "with_overlap", stopped)
    row, trees = run(inst, "tree-packing", Options(time_limit=120, params={"form": "compact"}))
    assert isinstance(trees, pipelined_allreduce.PipelinedAllreduce) and trees.delay is None and row["verified"]
    assert "halves in turn kept" in row["extra"]["overlap_stopped"]
