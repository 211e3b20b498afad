"""The overlap searches of an allreduce kept as trees (``solvers/packing/overlap_sizes.py``,
``allreduce_depth.with_overlap``) under a deadline, and the ``event`` floor that spares
simulating candidates that cannot win.

- an expired deadline: no candidate is priced, the halves in turn are returned;
- a deadline passing mid-search (after so many looks): the least priced so far is returned,
  it verifies, and nothing is priced after the deadline;
- the run's timer interrupting the search (a ``TimeLimitReached`` from inside the pricing):
  the least priced before it is returned, not lost;
- the linear program is handed the seconds left;
- through ``run_compact`` with the deadline passing once the trees are built: the run returns
  the verified halves in turn, says the search stopped, and simulates no candidate;
- the floor equals the busiest link's bytes over its bandwidth counted from the explicit sends,
  is below every candidate's ``event`` price, and leaving candidates out by it never changes
  the choice;
- the shifts priced at once (``prices_by_delay``) are each ``price_joint``'s, and the search
  finds the same in blocks of one shift.

No test measures a duration: each counts what was priced (a pricing: one ``price_joint`` call
or one block of shifts).
"""

from dataclasses import replace

import numpy as np
import pytest

from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.limits import Deadline, TimeLimitReached
from collsynth.solvers.packing import allreduce_depth, compact_form, overlap_sizes
from collsynth.solvers.packing.producer import _with_header, run_compact
from collsynth.solvers.producers import Options
from collsynth.tens import allreduce_overlap, pipelined_allreduce, pipelined_event

TWO_RAILS = ("rail_clos", {"groups_per_pod": 2, "boxes_per_group": 2, "gpus_per_box": 2, "rails": 2, "spines": 1,
                           "radix": 16})


class LooksDeadline(Deadline):
    """A deadline that passes at its ``n``-th look (``expired``, ``left``, ``check``): a
    deadline inside a search without measuring time."""

    def __init__(self, n: int):
        super().__init__(None, None)
        object.__setattr__(self, "looks", [0, n])

    def expired(self) -> bool:
        self.looks[0] += 1
        return self.looks[0] >= self.looks[1]

    def left(self) -> float:
        return 0.0 if self.expired() else 1e6

    def check(self, stage: str, done: str = "") -> None:
        if self.expired():
            raise TimeLimitReached(stage, done)


def _instance():
    return make_instance(build(*TWO_RAILS), "allreduce", message_bytes=1 << 26)


def _in_turn(inst):
    """The halves in turn at 4 pieces each (the run's trees, given pieces)."""
    trees = run_compact(inst, Options(time_limit=120, params={"form": "compact", "pieces": 4})).schedule
    return replace(trees, delay=None, mirror=False)


def _counting_prices(monkeypatch, raise_at: int | None = None) -> list:
    """Every pricing (a ``price_joint`` call, or a block of shifts priced at once) as the list
    of the totals it priced; the ``raise_at``-th raises the run timer's exception instead."""
    seen = []
    real_one, real_block = allreduce_overlap.price_joint, overlap_sizes.prices_by_delay

    def timer():
        if raise_at is not None and len(seen) + 1 == raise_at:
            raise TimeLimitReached("produce")

    def one(rs, ag, delay, costs):
        timer()
        got = real_one(rs, ag, delay, costs)
        seen.append([got.total_s])
        return got

    def block(rs, ag, delays, costs):
        timer()
        got = real_block(rs, ag, delays, costs)
        seen.append(list(got))
        return got

    monkeypatch.setattr(overlap_sizes.ao, "price_joint", one)
    monkeypatch.setattr(overlap_sizes, "prices_by_delay", block)
    return seen


def _sync(g, inst) -> float:
    return pipelined_allreduce.price_sync(g, inst).total_s


def test_an_expired_deadline_prices_no_candidate(monkeypatch):
    inst = _instance()
    f = _in_turn(inst)
    seen = _counting_prices(monkeypatch)
    assert overlap_sizes.overlapped(f, inst, Deadline.after(0.0)) is f
    assert len(seen) == 1  # the halves in turn alone
    assert overlap_sizes.least_shifted(f, inst, Deadline.after(0.0)) is f and len(seen) == 2


@pytest.mark.parametrize("looks", [3, 8, 40])
def test_a_deadline_mid_search_returns_the_least_priced_so_far(monkeypatch, looks):
    inst = _instance()
    f = _in_turn(inst)
    seen = _counting_prices(monkeypatch)
    g = overlap_sizes.overlapped(f, inst, LooksDeadline(looks))
    assert len(seen) <= looks  # one price at most per look before the deadline
    least = min(min(p) for p in seen)
    monkeypatch.undo()
    assert _sync(g, inst) == pytest.approx(least, rel=1e-12)
    assert pipelined_allreduce.verify(g, inst) is None
    unlimited = overlap_sizes.overlapped(f, inst)
    assert _sync(unlimited, inst) <= _sync(g, inst) + 1e-15


def test_the_run_timer_inside_the_search_keeps_the_least_priced_before_it(monkeypatch):
    inst = _instance()
    f = _in_turn(inst)
    seen = _counting_prices(monkeypatch, raise_at=4)
    g = overlap_sizes.overlapped(f, inst)  # no deadline given: the timer's exception alone stops it
    assert len(seen) == 3
    least = min(min(p) for p in seen)
    monkeypatch.undo()
    assert _sync(g, inst) == pytest.approx(least, rel=1e-12) and least < _sync(f, inst)
    assert pipelined_allreduce.verify(g, inst) is None


def test_the_linear_program_is_given_the_seconds_left(monkeypatch):
    inst = _instance()
    f = _in_turn(inst)
    given, real = [], overlap_sizes.linprog

    def recorded(*a, options=None, **k):
        given.append(options)
        return real(*a, options=options, **k)

    monkeypatch.setattr(overlap_sizes, "linprog", recorded)
    overlap_sizes.overlapped(f, inst, Deadline.after(1000.0))
    assert given and all(0 < o["time_limit"] <= 1000.0 for o in given)
    given.clear()
    overlap_sizes.overlapped(f, inst)
    assert given and all(o == {} for o in given)


@pytest.mark.parametrize("objective", ["sync", "sync+event"])
def test_a_run_whose_deadline_passes_after_the_trees_keeps_the_halves_in_turn(monkeypatch, objective):
    inst = _instance()
    passed = [False]

    class Flipped(Deadline):
        def expired(self) -> bool:
            return passed[0] or super().expired()

        def left(self):
            return 0.0 if passed[0] else super().left()

    real_forest, real_price = compact_form.compact_forest, pipelined_event.price

    def forest_then_pass(*a, **k):
        got = real_forest(*a, **k)
        passed[0] = a[0].collective.kind == "allgather"  # the second half built
        return got

    simulated = []
    monkeypatch.setattr(compact_form, "compact_forest", forest_then_pass)
    monkeypatch.setattr(pipelined_event, "price",
                        lambda f, i, *a, **k: simulated.append(f) or real_price(f, i, *a, **k))
    seen = _counting_prices(monkeypatch)
    deadline = Flipped(Deadline.after(1000.0).at, 1000.0)
    out = run_compact(inst, Options(time_limit=1000, deadline=deadline, params={"form": "compact",
                                                                                "objective": objective}))
    assert out.schedule.delay is None and pipelined_allreduce.verify(out.schedule, inst) is None
    assert "time limit reached" in out.extra["overlap_stopped"]
    assert len(seen) <= 1  # at most the halves in turn priced
    assert all(f.delay is None for f in simulated)  # no overlapped candidate simulated under event


def _explicit_busiest(g, inst) -> float:
    """The busiest link's bytes over its bandwidth, from ``g``'s explicit sends."""
    s = _with_header(pipelined_allreduce.expand(g), inst)
    la = inst.topology.link_arrays
    link = la.lookup(s.src, s.dst)
    load = np.bincount(link, weights=(s.hi - s.lo) / s.denom * inst.collective.chunk_bytes, minlength=len(la))
    return float((load / la.bandwidth).max())


def test_the_event_floor_is_the_busiest_link_and_below_every_candidate(monkeypatch):
    inst = _instance()
    f = _in_turn(inst)
    floor = allreduce_depth.event_floor(f, inst)
    assert floor == pytest.approx(_explicit_busiest(f, inst), rel=1e-9)
    for g in (f, overlap_sizes.overlapped(f, inst), overlap_sizes.least_shifted(f, inst),
              _in_turn_at(f, 2)):
        assert allreduce_depth.event_floor(g, inst) == pytest.approx(floor, rel=1e-9)  # pieces and shift alike
        assert floor <= pipelined_event.price(g, inst).total_s


def _in_turn_at(f, pieces: int):
    return pipelined_allreduce.PipelinedAllreduce(*(replace(h, pieces=pieces, cuts=None) for h in f.halves))


@pytest.mark.parametrize("floor, simulated_overlaps", [(None, None), (0.0, 2), (1.0, 0)])
def test_candidates_left_out_by_the_floor_do_not_change_the_choice(monkeypatch, floor, simulated_overlaps):
    """The real floor keeps the choice of the floor 0 (every candidate simulated); a floor of
    1 s (no candidate can win) simulates none and keeps the halves in turn."""
    inst = _instance()
    f = _in_turn(inst)
    if floor is not None:
        monkeypatch.setattr(allreduce_depth, "event_floor", lambda g, i: floor)
    simulated, real = [], pipelined_event.price
    monkeypatch.setattr(pipelined_event, "price", lambda g, i, *a, **k: simulated.append(g) or real(g, i, *a, **k))
    kept, note, cost = allreduce_depth.with_overlap(f, None, inst, ("sync", "event"))
    overlaps = [g for g in simulated if g.delay is not None]
    if simulated_overlaps is not None:
        assert len(overlaps) == simulated_overlaps
    if floor == 1.0:
        assert kept is f and len(note["overlap_not_simulated"]) == 2
    monkeypatch.setattr(allreduce_depth, "event_floor", lambda g, i: 0.0)
    every, _, _ = allreduce_depth.with_overlap(f, None, inst, ("sync", "event"))
    if floor != 1.0:
        assert (kept.pieces, kept.delay, kept.mirror) == (every.pieces, every.delay, every.mirror)


@pytest.mark.parametrize("pieces, unequal", [(4, False), (5, True), (1, False)])
def test_the_shifts_priced_at_once_are_each_priced_alone(pieces, unequal):
    """``prices_by_delay`` against ``price_joint`` shift by shift, from before the least valid
    shift to past the halves in turn (the price is defined at any shift), equal pieces and the
    linear program's unequal ones."""
    inst = _instance()
    f = _in_turn_at(_in_turn(inst), pieces)
    costs = allreduce_overlap.joint_costs(*f.halves, inst)
    rs, ag = overlap_sizes.joint_sized(*f.halves, inst, pieces, costs) if unequal else f.halves
    assert not unequal or len(set(np.diff(rs.edges))) > 1
    delays = list(range(-3, allreduce_overlap.last_step(rs) + allreduce_overlap.last_step(ag) + 3))
    at_once = overlap_sizes.prices_by_delay(rs, ag, delays, costs)
    alone = [allreduce_overlap.price_joint(rs, ag, d, costs).total_s for d in delays]
    assert at_once == pytest.approx(alone, rel=1e-12, abs=0)


def test_the_shift_search_finds_the_same_in_blocks_of_one(monkeypatch):
    inst = _instance()
    f = _in_turn(inst)
    whole = overlap_sizes.overlapped(f, inst)
    monkeypatch.setattr(overlap_sizes, "BLOCK_CELLS", 1)
    one = overlap_sizes.overlapped(f, inst)
    assert (one.pieces, one.delay, one.mirror) == (whole.pieces, whole.delay, whole.mirror)
    assert _sync(one, inst) == _sync(whole, inst) < _sync(f, inst)
