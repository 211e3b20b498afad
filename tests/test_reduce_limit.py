"""A rooted reduce by tree packing under its time limit (issue 43: "a limit is a limit"): the run
keeps its first packed forest emitted, verified and priced before the latency choice's searches
and pricing (solvers/packing/incumbent.py, ``first_kept``), and returns it, marked as stopped by
the limit, when the limit comes during them, whether the limit's exception stops the choice or
the choice ends its searches early at the deadline and would return a pick neither verified nor
priced; the rooted depth bound (seconds of linear programs) is computed within the bounds' share
of the limit, not after the producer on no clock (solvers/pipeline.py).

The instance is TACOS's ring x complete x switch 4x2x2 (test_shallow_rooted.py), 1 GB to GPU 0;
the clock is a stand-in (no duration is asserted).
"""

from __future__ import annotations

import pytest

from collsynth import limits
from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.limits import Deadline, TimeLimitReached
from collsynth.solvers import pipeline
from collsynth.solvers.packing import forests, incumbent, latency_choice, producer
from collsynth.solvers.packing.emission import auto_pieces
from collsynth.solvers.producers import Options
from collsynth.tens import bounds, cost_models, verify
from collsynth.tens.bounds import instance as bounds_instance


def tacos_4x2x2():
    topo = build("hierarchical", {"levels": ["ring", "complete", "switch"], "dims": [4, 2, 2]},
                 bandwidth=100e9, alpha=0.5e-6)
    return make_instance(topo, "reduce", message_bytes=1e9, root=0)


def _check_kept(inst, out) -> None:
    """``out`` returns the first packed forest (the optimum's trees a shard) at no more than
    ForestColl's default pieces, verified by the run and again here, and priced (afresh here),
    and says the time limit stopped the choice."""
    f = forests.forest(inst, "broadcast", True)
    assert out.schedule is not None and verify.verify(out.schedule, inst) is None
    assert out.certified is not None and out.certified.holds(out.schedule, inst)  # verified once, by the run
    assert "time limit" in out.message and "kept_schedule" in out.extra
    (record,) = out.extra["forests"]
    assert record["trees_per_shard"] == f.k and 1 <= record["pieces"] <= auto_pieces(f.trees, inst.collective.chunks_per_node)
    for model in ("sync", "event"):
        assert cost_models.price(out.schedule, inst, model).total_s > 0


def test_the_limit_raised_during_the_latency_choice_returns_the_first_forest_verified(monkeypatch):
    """The limit's exception (the pipeline's timer, or a stage's check) arrives while the latency
    choice builds its candidates: the run returns the first packed forest, verified, instead of
    nothing (before: the exception left the producer, the row a timeout without a schedule)."""
    def stopped(*args, **kw):
        raise TimeLimitReached("latency choice", "building the candidates")

    monkeypatch.setattr(latency_choice, "alternatives", stopped)
    inst = tacos_4x2x2()
    _check_kept(inst, producer.run(inst, Options(time_limit=600)))


def test_the_deadline_passing_during_the_searches_returns_the_first_forest_verified(monkeypatch):
    """The searches check the deadline and end early, so the choice completes, but its pick is
    then neither verified nor priced (its pricing's share is gone): the run returns the verified
    first forest, marked as stopped by the limit (before: the unverified pick, unmarked). The
    clock is a stand-in that jumps past the deadline as the shallow trees' search
    starts."""
    now = [1000.0]

    class Clock:
        @staticmethod
        def monotonic():
            return now[0]

    real = forests.shallow_rooted_trees

    def late(*args, **kw):
        now[0] += 601.0
        return real(*args, **kw)

    monkeypatch.setattr(limits, "time", Clock)
    monkeypatch.setattr(forests, "shallow_rooted_trees", late)
    inst = tacos_4x2x2()
    out = producer.run(inst, Options(time_limit=600, deadline=Deadline.after(600)))
    _check_kept(inst, out)
    assert "reached during the choice" in out.message


def test_a_choice_that_fits_the_time_left_is_kept_and_one_that_does_not_is_replaced():
    """``in_time`` on a kept schedule of 100 sends priced at 1 ms a send: a choice of 1,000 sends
    (1 s and the check's reserve) fits 600 s left and is returned unmarked; with 0.5 s left it
    does not, and the kept one is returned with a note; once the deadline has passed the kept
    one is returned and marked as stopped, whatever the choice."""
    k = incumbent.Kept(("sync",))
    k.offer(("f",), [10], "kept", {"sync": 2.0}, sends=100, seconds=0.1, check_s=0.0)
    assert incumbent.in_time(k, ["g"], [20], 1000, Deadline.after(600)) == (["g"], [20], "", "")
    forests_, pieces, note, stopped = incumbent.in_time(k, ["g"], [20], 1000, Deadline.after(0.5))
    assert (forests_, pieces, stopped) == (["f"], [10], "") and "would not fit" in note
    past = Deadline(limits.time.monotonic() - 1.0, 5.0)
    forests_, pieces, note, stopped = incumbent.in_time(k, ["g"], [20], 10, past)
    assert (forests_, pieces) == (["f"], [10]) and stopped.startswith("time limit 5 s")


def test_the_rooted_depth_bound_is_computed_on_the_runs_clock(monkeypatch):
    """The run's time ends while the rooted depth bound's programs run after the producer (the
    stand-in raises the limit there, as the run's timer would): the bounds are settled, that
    argument reported not computed and never computed again when the row is priced (before: it
    was computed after the producer on no clock, 19-27 s on TACOS 4x4x2 at load 5, past the
    run's hard kill)."""
    def out_of_time(*args, **kw):
        raise TimeLimitReached("lower bounds")

    monkeypatch.setattr(bounds_instance, "rooted_depth_bound", out_of_time)
    inst = tacos_4x2x2()
    bnds = bounds.instance_bounds(inst)
    bnds.parts  # noqa: B018 - the bounds' share computed these
    stages: dict = {}
    settled = pipeline._sync_steps(bnds, Deadline.after(600), stages)
    sync = settled.sync  # would call the stand-in again if the argument were left to compute
    assert sync.computed and "time limit came before" in settled._parts["sync_rooted_depth"][0].note
    assert "lower bounds" in stages


def test_settled_bounds_leave_sync_step_arguments_uncomputed(monkeypatch):
    """A settled copy reports every sync step argument not yet computed as not computed, and
    its ``sync`` is the latency plus bandwidth bound (at least the root's cut)."""
    def never(*args, **kw):
        pytest.fail("a settled bound computed the rooted depth argument")

    inst = tacos_4x2x2()
    bnds = bounds.instance_bounds(inst)
    bnds.parts  # noqa: B018
    monkeypatch.setattr(bounds_instance, "rooted_depth_bound", never)
    s = bnds.settled("the share ran out")
    assert s.sync.computed and s.sync.value >= s.part("sync_bandwidth").value
