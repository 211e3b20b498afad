"""An allreduce's tree packing keeps the least priced verified schedule of its joint choice
(solvers/packing/incumbent.py), so a time limit that comes later still returns a verified
schedule, near the limit; what is priced late is priced at fewer pieces when the time left is
short (solvers/packing/overlap.py); HiGHS is given the time left (piece_sizes, capacity_split).

The instance is test_capacity_split.py's DGX-2 pair in miniature at its smallest: two switches
of two GPUs (1 byte/s each way), odd GPU 2c+1 linked at 1 byte/s to even GPU 2(1-c) of the other
switch, 4 MB. By hand: RS+AG 6e6 s (3/4 of 4e6 bytes out of an even GPU, whose only way out is
its switch link, then the same into an odd GPU), and the partition bound 4e6 s (the four
single-GPU regions take in 2 x 3 x 4e6 bytes over 4 + 2 byte/s); the split is tried (the bound
is below the halves in sequence). The 8-GPU pair (test_capacity_split.py) takes about six
times the CPU to reach the split.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from collsynth.instances.instance import make_instance
from collsynth.limits import GRACE_S, Deadline, TimeLimitReached
from collsynth.solvers import pipeline
from collsynth.solvers.packing import incumbent, joint, overlap, producer
from collsynth.solvers.producers import Options
from collsynth.tens import cost_models, verify

from machine import within
from test_capacity_split import two_chassis

BOUND = 4e6  # s, the partition bound of the miniature (module doc, by hand)


def _instance():
    return make_instance(two_chassis(2, cross=1.0), "allreduce", message_bytes=4e6)


def test_a_split_not_packed_within_its_share_is_skipped_and_the_run_goes_on(monkeypatch):
    """The split pair is packed after the other pairs are priced, within its share of the time
    left; its share running out there (the run's limit not reached) skips it: the run goes on
    with the other pairs and returns a verified schedule of one of them."""
    def late(*args, **kw):
        raise TimeLimitReached("capacity split", "packing its forests")

    monkeypatch.setattr(joint, "split_pair", late)
    row, sched = pipeline.run(_instance(), "tree-packing", Options(time_limit=600))
    assert row["verified"] and sched is not None and "time limit" not in (row["message"] or "")
    choice = row["extra"]["joint_choice"]
    assert not choice["chosen"].startswith(producer.SPLIT_PAIR)
    assert not any(name.startswith(producer.SPLIT_PAIR) for name in choice["priced"])
    assert not any(f.get("on_its_share") for f in row["extra"]["forests"])
    assert row["time_sync_s"] >= BOUND and row["time_event_s"] >= BOUND


def test_the_run_returns_by_its_limit_and_grace_with_the_kept_schedule(monkeypatch):
    """The real clock: packing the split never ends (it sleeps past the run's limit, not checking
    its share), the run's timer stops it, and the run returns the kept schedule (the least priced
    verified pair at the probe's pieces), verified, within the limit and its grace."""
    def forever(*args, **kw):
        time.sleep(3600)

    monkeypatch.setattr(joint, "split_pair", forever)
    limit = within(10.0)  # the split is reached after about 3 s of CPU here, unloaded
    t0 = time.monotonic()
    row, sched = pipeline.run(_instance(), "tree-packing", Options(time_limit=limit))
    assert time.monotonic() - t0 <= limit + GRACE_S
    assert row["verified"] and sched is not None and "time limit" in row["message"]
    assert "kept_schedule" in row["extra"] and "joint_choice" not in row["extra"]
    assert [f["pieces"] for f in row["extra"]["forests"]] == [overlap.PROBE_PIECES] * 2
    # verified and priced once, in the choice: the pipeline took the verdict and the prices, which are the
    # returned schedule's (priced afresh here) and never below the partition bound
    assert row["extra"]["verified_by_producer"] > 0 and row["extra"]["priced_by_producer"] == ["sync", "event"]
    inst = _instance()
    assert verify.verify(sched, inst) is None
    for model, column in (("sync", "time_sync_s"), ("event", "time_event_s")):
        assert row[column] == cost_models.price(sched, inst, model).total_s >= BOUND


class Stand:
    """A :class:`incumbent.Kept` as a probe left it: 1 ms a send, verified in 0 s."""

    schedule = "kept"

    def fits(self, sends, deadline):
        return incumbent.Kept.fits(self, sends, deadline)

    def needs(self, sends):
        return sends * 1e-3


def test_an_extra_pair_is_priced_at_fewer_pieces_when_the_time_left_is_short():
    """Two forests of 100 hops (a pair's probe at p pieces: 200 p sends, 0.2 p s at 1 ms a
    send). 200 s left: four times the 40 s of 200 pieces fits, priced at once. 12 s left: from
    25 pieces (5 s) up, doubling while the probe fits: 25, 50 (10 s), not 100 (20 s): 50 kept.
    4 s left: even 25 pieces need 5 s: not priced. No limit: the probe's 200."""
    sends = lambda f, p: 100 * p  # noqa: E731
    pair = ("rs", "ag")

    def priced(left):
        calls = []
        got = overlap._price_extra(pair, [200, 200], sends, lambda q: calls.append(q[0]) or {"sync": 1.0 / q[0]},
                                   Deadline.after(left) if left is not None else None, Stand())
        return got[0], calls

    assert priced(200) == ([200, 200], [200])
    assert priced(12) == ([50, 50], [25, 50])
    assert priced(4) == (None, [])
    assert priced(None) == ([200, 200], [200])


def test_kept_holds_the_least_priced_and_reserves_its_verdict_s_check():
    """Summed sync + event: 3 s, then 2.5 s (kept), then 2.5 s again (a tie keeps the first);
    the last probe 800 sends in 4 s (its digest 0.9 s): 5 ms a send; a probe of 100 sends then
    needs 0.5 s, and the pipeline's check of the kept schedule's verdict (its digest 0.5 s) twice
    that; one of 8000 sends 40 s, and its own digest (9 s) twice."""
    k = incumbent.Kept(("sync", "event"))
    a, b, c = ("a1", "a2"), ("b1", "b2"), ("c1", "c2")
    k.offer(a, [10, 10], "A", {"sync": 2.0, "event": 1.0}, 100, 1.0, 0.1)
    k.offer(b, [10, 10], "B", {"sync": 1.5, "event": 1.0}, 200, 1.0, 0.5)
    k.offer(c, [10, 10], "C", {"sync": 1.0, "event": 1.5}, 800, 4.0, 0.9)
    assert k.schedule == "B" and k.holds(list(b), [10, 10]) and not k.holds(list(c), [10, 10])
    assert k.needs(100) == pytest.approx(0.5 + incumbent.RESERVE * 0.5)  # the probe's own: 100 x 0.9 / 800 s
    assert k.needs(8000) == pytest.approx(40 + incumbent.RESERVE * 9.0)  # the probe's own digest: 9 s
    assert k.fits(10 ** 9, None) and incumbent.Kept(("sync",)).fits(10 ** 9, Deadline.after(1))


def test_the_sizes_program_stops_at_its_time_limit():
    """The three-GPU ring of piece_sizes' doctest: sized without a limit; given no time at all,
    HiGHS stops at once and the pieces stay equal (None)."""
    from collsynth.instances.generators import build
    from collsynth.solvers.packing.piece_sizes import sized
    from collsynth.tens.pipelined_trees import PipelinedTrees

    inst = make_instance(build("ring", {"nodes": 3}), "allgather", message_bytes=3e9)
    hops = [(0, 1, 0), (1, 2, 1), (1, 2, 0), (2, 0, 1), (2, 0, 0), (0, 1, 1)]
    f = PipelinedTrees("allgather", 3, 3, 1, 4, 1, np.array([0, 1, 2]), np.array([0, 0, 0]),
                       np.array([1, 1, 1]), np.array([0, 2, 4, 6]), *map(np.array, zip(*hops)))
    assert sized(f, inst, 4) is not None
    assert sized(f, inst, 4, time_limit=0.0) is None
