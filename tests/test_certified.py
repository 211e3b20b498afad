"""A producer's verdict and prices are taken by the pipeline only where they hold for the very
schedule it keeps (collsynth/tens/certified.py): one schedule is verified and priced once, and
an unverified schedule is still never priced or kept.

Two GPUs joined both ways at 1 byte/s, alpha 0, an allgather of a byte a shard: each sends its
shard over its link in step 1, 1 s under every model (by hand).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from collsynth.instances.instance import make_instance
from collsynth.instances.topology import from_edges
from collsynth.limits import Deadline
from collsynth.solvers import pipeline
from collsynth.tens import certified, verify
from collsynth.tens.schedule import from_sends
from collsynth.tens.schema import empty_row


def _pair():
    return make_instance(from_edges(2, [(0, 1), (1, 0)], bandwidth=1.0, alpha=0.0), "allgather", message_bytes=2.0)


def _swap():
    return from_sends([(0, 0, 1, 0, 1, 1), (1, 0, 1, 1, 0, 1)], "allgather", 2, 2)


def _checked(schedule, instance, verdict, epoch_step=None):
    row = empty_row(instance="pair", producer="p", solver="", driver="", seed=0, verified=False, message="")
    row["extra"] = {}
    return pipeline.check_and_price(row, schedule, instance, Deadline.after(60), {}, epoch_step, verdict)


def _no_verifying(monkeypatch):
    def refuse(*args, **kw):
        raise AssertionError("verified again")

    monkeypatch.setattr(verify, "verify", refuse)
    monkeypatch.setattr(verify, "malformed", refuse)


def test_a_verdict_that_holds_is_taken_with_its_prices(monkeypatch):
    inst, s = _pair(), _swap()
    verdict = certified.certify(s, inst)
    verdict.price("sync"), verdict.price("event")
    _no_verifying(monkeypatch)
    row, kept = _checked(s, inst, verdict)
    assert kept is s and row["verified"] and row["extra"]["priced_by_producer"] == ["sync", "event"]
    assert row["time_sync_s"] == row["time_event_s"] == row["time_ten_s"] == pytest.approx(1.0)  # ten: the pipeline's


def test_a_verdict_on_another_schedule_is_not_taken():
    """The verdict of the swap, handed with a schedule that drops GPU 1's send: verified, refused."""
    inst, s = _pair(), _swap()
    verdict = certified.certify(s, inst)
    half = from_sends([(0, 0, 1, 0, 1, 1)], "allgather", 2, 2)
    row, kept = _checked(half, inst, verdict)
    assert kept is None and not row["verified"] and row["status"] == "invalid"
    assert row["time_sync_s"] is None and "verified_by_producer" not in row["extra"]


def test_a_schedule_changed_after_its_verdict_is_verified_again():
    """GPU 1's send moved onto GPU 0's link after the verdict: the digest differs, the pipeline
    verifies and refuses it (chunk 1 never reaches GPU 0)."""
    inst, s = _pair(), _swap()
    verdict = certified.certify(s, inst)
    verdict.price("sync")
    s.src[1], s.dst[1] = 0, 1
    row, kept = _checked(s, inst, verdict)
    assert kept is None and row["status"] == "invalid" and row["time_sync_s"] is None


def test_the_same_schedule_on_another_instance_object_is_verified_again():
    inst, s = _pair(), _swap()
    verdict = certified.certify(s, inst)
    row, kept = _checked(s, replace(inst), verdict)
    assert kept is s and "verified_by_producer" not in row["extra"] and row["verify_s"] is not None


def test_prices_of_another_timestep_are_priced_again(monkeypatch):
    """The verdict holds (not verified again) but the pipeline prices with the instance's TEN
    timestep, which the producer's prices were not computed with: every model priced afresh."""
    inst, s = _pair(), _swap()
    verdict = certified.certify(s, inst)
    verdict.price("sync")
    _no_verifying(monkeypatch)
    row, kept = _checked(s, inst, verdict, epoch_step=1.0)
    assert kept is s and row["extra"]["priced_by_producer"] == [] and row["time_sync_s"] == pytest.approx(1.0)


def test_the_digest_reads_every_part_of_the_schedule():
    """Any one column entry, field or entry of a long meta array changed: another digest (an
    array's text form elides its middle, the digest must not)."""
    import numpy as np

    base = _swap()
    base.meta["weights"] = np.arange(5000)
    changes = [lambda s: s.lo.__setitem__(0, 1), lambda s: s.op.__setitem__(1, 1),
               lambda s: s.meta["weights"].__setitem__(2500, -1), lambda s: s.meta.__setitem__("switch_copy", False)]
    for change in changes:
        s = _swap()
        s.meta["weights"] = np.arange(5000)
        change(s)
        assert certified.digest(s) != certified.digest(base)
    assert certified.digest(replace(base, routing="shortest-path")) != certified.digest(base)
