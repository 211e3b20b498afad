"""An allreduce's chosen pair, verified on the run's clock where the kept schedule is another
pair (solvers/packing/producer.py ``verified_in_time``), is returned as that check made it:
neither emitted, nor verified or priced again, with the very schedule and prices a fresh
emission, verification and pricing of the pair give.

Before: the producer emitted the pair a second time (``_schedule``) and handed the pipeline no
verdict, so the pipeline verified and priced it once more: three verifications of one schedule
on a path every allreduce under a time limit takes.
"""

from __future__ import annotations

import pytest

from collsynth.instances.instance import make_instance
from collsynth.solvers import pipeline
from collsynth.solvers.packing import emission, joint, producer
from collsynth.solvers.producers import Options
from collsynth.tens import certified, verify

from test_fixed_depth_candidate import _boxes

PIECES = [40, 40]  # pieces nothing else in the run prices, dearer than the first pair kept: the kept
# schedule stays another pair's


@pytest.fixture(scope="module")
def instance():
    return make_instance(_boxes(2, 2e-6, 5e-6), "allreduce", message_bytes=2 ** 20)


def _run_choosing(monkeypatch, inst, models=("sync",)):
    """The pipeline's run of ``inst`` with the halves' choices stood in for by the packed halves
    at :data:`PIECES`; the digests of the schedules it verifies and the pieces of its emissions."""
    chosen, counts = [], {"verify": [], "emit": []}
    real_verify, real_emit = verify.verify, emission.emit

    def choose(instance, options, packed, picks, *args, **kw):
        chosen[:] = list(packed)
        return list(packed), list(PIECES), {}, ""

    def counted_verify(schedule, *a, **k):
        counts["verify"].append(certified.digest(schedule))
        return real_verify(schedule, *a, **k)

    def counted_emit(instance, f, pieces, *a, **k):
        counts["emit"].append(pieces)
        return real_emit(instance, f, pieces, *a, **k)

    real_in_time = producer.verified_in_time

    def in_time(instance, chosen, depths, kept, *a, **k):
        got = real_in_time(instance, chosen, depths, kept, *a, **k)
        counts["kept_is_chosen"] = kept.holds(chosen, depths)
        return got

    monkeypatch.setattr(producer, "verified_in_time", in_time)
    monkeypatch.setattr(producer, "choose_halves", choose)
    monkeypatch.setattr(producer, "pick", lambda instance, f, *a, **k: (f, 2, None))
    monkeypatch.setattr(verify, "verify", counted_verify)
    monkeypatch.setattr(joint, "emit", counted_emit)
    monkeypatch.setattr(producer, "emit", counted_emit)
    row, sched = pipeline.run(inst, "tree-packing", Options(time_limit=60.0))
    return row, sched, chosen, counts


def test_the_chosen_pair_is_verified_once_and_returned_as_a_fresh_emission_makes_it(monkeypatch, instance):
    row, sched, chosen, counts = _run_choosing(monkeypatch, instance)
    assert counts["kept_is_chosen"] is False  # the path under test: the kept schedule is the first pair
    assert row["verified"] and [f["pieces"] for f in row["extra"]["forests"]] == PIECES
    monkeypatch.undo()
    fresh = joint.listed(instance, chosen, PIECES, ("sync",))
    verdict = certified.certify(fresh, instance)
    assert verdict is not None
    assert certified.digest(sched) == certified.digest(fresh)  # the very schedule
    for m in ("sync", "event"):
        assert row[f"time_{m}_s"] == verdict.price(m).total_s, m  # the very prices
    # the chosen pair (40/40 pieces) emitted once (its two halves) and verified once: the
    # pipeline takes the producer's verdict (before: emitted twice, verified twice)
    assert counts["emit"].count(40) == 2 and counts["verify"].count(certified.digest(fresh)) == 1, counts["emit"]
    assert row["extra"].get("verified_by_producer") is not None
