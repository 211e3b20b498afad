"""The verifier's and the pricing plan's working columns (tens/verify.py, tens/dependencies.py,
tens/cost.py): what they hold per send is int32 where it fits, they copy no column of the
schedule, and a schedule whose sends come out of step order gets the very verdict and prices of
the same sends in step order (where the view shares the schedule's columns instead of copying
them), on tree packing's schedules on small Clos fabrics."""

import platform
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from compact_checks import SMALL_CLOS
from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.solvers.packing.producer import run_compact
from collsynth.solvers.producers import Options
from collsynth.tens import cost, heap, verify
from collsynth.tens.dependencies import dependencies, step_view, switch_forwards
from collsynth.tens.pipelined_trees import expand
from collsynth.solvers.packing.compact import at_pieces
from collsynth.tens.schedule import Schedule


def _sends(generator, params, kind, pieces):
    inst = make_instance(build(generator, params), kind, message_bytes=float(1 << 20))
    trees = run_compact(inst, Options(time_limit=30, params={"form": "compact"})).schedule
    return expand(at_pieces(trees, min(pieces, trees.pieces))), inst


def _taken(s: Schedule, rows: np.ndarray) -> Schedule:
    return Schedule(s.collective, s.nodes, s.chunks, s.chunk[rows], s.lo[rows], s.hi[rows], s.src[rows], s.dst[rows],
                    s.step[rows], s.op[rows], s.denom, s.routing, dict(s.meta), s.link_order)


def _interleaved(s: Schedule, seed: int) -> Schedule:
    """The sends of ``s`` in stable step order, then dealt out of step order by a random
    permutation that keeps the order of the sends of every step: the same step view."""
    by_step = np.argsort(s.step, kind="stable")
    key = np.random.default_rng(seed).random(len(s))
    steps = s.step[by_step]
    out = np.empty(len(s), np.int64)
    slots = np.argsort(key, kind="stable")  # the positions the sends take, dealt step by step in order
    for t in np.unique(steps):
        mine = by_step[steps == t]
        out[np.sort(slots[:len(mine)])] = mine
        slots = slots[len(mine):]
    return _taken(s, out)


def _prices(s, inst):
    return [(c.steps, c.T_L_s, c.T_B_s, c.total_s) for c in (
        cost.price_sync(s, inst), cost.price_event(s, inst), cost.price_event(s, inst, exact_deps=False),
        cost.price_ten(s, inst))]


@settings(max_examples=12, deadline=None)
@given(SMALL_CLOS, st.sampled_from(["allgather", "reduce_scatter"]), st.integers(1, 3),
       st.integers(0, 2 ** 31))
def test_out_of_step_order_sends_verify_and_price_as_in_step_order(fabric, kind, pieces, seed):
    s, inst = _sends(*fabric, kind, pieces)
    ordered = _taken(s, np.argsort(s.step, kind="stable"))
    dealt = _interleaved(s, seed)
    assert bool((np.diff(dealt.step) < 0).any()) or len(np.unique(s.step)) == 1
    assert verify.verify(ordered, inst) is None and verify.verify(dealt, inst) is None
    assert _prices(dealt, inst) == _prices(ordered, inst)
    # a send moved one step earlier is the same violation, named by its own index, in either order
    i = int(np.flatnonzero(dealt.step > 1)[len(dealt) // 3 % max(1, int((dealt.step > 1).sum()))])
    early = _taken(dealt, np.arange(len(dealt)))
    early.step[i] -= 1
    order = np.argsort(early.step, kind="stable")
    v, w = verify.verify(early, inst), verify.verify(_taken(early, order), inst)
    assert (v is None) == (w is None)
    if v is not None:
        assert v.reason == w.reason and v.step == w.step
        assert v.index == (None if w.index is None else order[w.index])


def test_working_columns_are_int32():
    s, inst = _sends("dgx_h100", {"nodes": 2}, "allgather", 1)
    n, two = len(s), np.r_[np.arange(len(s)), np.arange(len(s))]
    halves = Schedule(s.collective, s.nodes, s.chunks, s.chunk[two], np.repeat([0, 1], n), np.repeat([1, 2], n),
                      s.src[two], s.dst[two], s.step[two], s.op[two], 2, s.routing, dict(s.meta))  # every send in halves
    dealt = _interleaved(halves, 1)
    assert s.lo.dtype == halves.lo.dtype == np.int32  # the schedule's own bounds: int32 where they fit (piece_columns)
    view = step_view(dealt)
    assert view.order is not None and view.lo.dtype == view.hi.dtype == np.int32
    assert (view.lo.astype(np.int64) == dealt.lo[view.order]).all()
    deps = dependencies(view, inst, want_pairs=True, schedule=dealt)
    assert deps.forwards is not None and len(deps.forwards.leave)
    for a in (deps.ga, deps.g_in, deps.p, deps.members, deps.pairs[0], deps.pairs[1], deps.forwards.leave,
              deps.forwards.arrival):
        assert a.dtype == np.int32
    sw = np.zeros(4, bool)
    sw[3] = True
    fw = switch_forwards(np.zeros(2, np.int32), np.array([0, 3], np.int32), np.array([3, 1], np.int32),
                         np.zeros(2, np.int64), np.ones(2, np.int64), np.array([1, 2], np.int32), np.ones(1, np.int32),
                         sw, False, 1)
    assert fw.run.dtype == fw.leave.dtype == np.int32 and fw.run.tolist() == [0, -1]


def _event_prices(s, inst):
    return [(c.steps, c.T_L_s, c.T_B_s, c.total_s) for c in (
        cost.price_event(s, inst), cost.price_event(s, inst, exact_deps=False))]


@settings(max_examples=4, deadline=None)
@given(SMALL_CLOS, st.sampled_from(["allgather", "reduce_scatter"]), st.integers(1, 2))
def test_event_hands_the_freed_heap_back_before_its_loop_and_prices_the_same(fabric, kind, pieces):
    """From ``TRIM_FROM_SENDS`` sends on, the event model calls ``malloc_trim(0)`` at its start
    and whenever it has let columns go (README, "Explicit sends' peak per send"): with group
    prefixes six times a pricing, with exact pairs four; below, never; the prices are the same."""
    s, inst = _sends(*fabric, kind, pieces)
    calls = []
    with patch.object(heap, "MALLOC_TRIM", calls.append):
        untrimmed = _event_prices(s, inst)  # a small schedule: under the threshold
        assert calls == []
        with patch.object(cost, "TRIM_FROM_SENDS", len(s)):
            assert _event_prices(s, inst) == untrimmed
    by_default = 6 if cost.PricingPlan(s, inst).whole else 4  # exact pairs by default for pieces
    assert calls == [0] * (by_default + 6)


def test_the_heap_release_is_a_no_op_without_malloc_trim():
    with patch.object(heap, "MALLOC_TRIM", None):
        assert heap.release_freed_heap() is False


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_glibc_malloc_trim_is_found():
    assert heap.MALLOC_TRIM is not None and heap.release_freed_heap() is True
