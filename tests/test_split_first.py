"""An allreduce whose capacity split reaches the bound is priced split first
(solvers/packing/split_form.splits_first, overlap.joint's ``extra_first``, producer._finish).

Where the split's pipelined limit is the allreduce's partition bound no pair of the halves on the
whole links is faster in that limit, so the producer packs and prices the split before the
halves' probes and does not run the halves' fill programs (``pieces_choice.pick``). Checked:

- on two-chassis miniatures of DGX-2 pairs (tests/test_split_form.py's) the rule holds where the
  split's limit equals the bound (six GPUs a chassis, cross links at 1 byte/s) and not where it
  is above (four GPUs);
- on the six-GPU one the producer runs no fill program, prices the split before any probe and
  before the halves' forests are packed, still prices the halves after it (no time limit) and
  returns the split, the least of the prices it compared;
- with stand-in prices, ``extra_first`` chooses the halves where they price lower than the split
  and the split where it prices lower, pricing the split first either way (without it, the
  probes first, as before);
- under a time limit the split is priced first at an eighth of its pieces (a verified schedule
  kept, its rate a send measured), then at its pieces where they fit; a probe whose sends at
  that rate, four times over, do not fit the time left is not priced;
- the real clock: a probe after the split that never ends is stopped by the run's timer, and the
  run returns the split, verified, within its limit and grace.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from collsynth.instances.instance import make_instance
from collsynth.limits import GRACE_S, Deadline
from collsynth.solvers import pipeline
from collsynth.solvers.packing import forests, joint, overlap, producer, split_form
from collsynth.solvers.producers import Options

from machine import within
from test_split_form import two_chassis


def _instance(g: int):
    return make_instance(two_chassis(g, 1.0, 0.0), "allreduce", message_bytes=8e6)


def _forests(inst):
    return [producer.forest(inst, kind, t) for kind, t in producer.plan("allreduce")]


def test_the_rule_holds_where_the_split_s_limit_is_the_bound():
    """Six GPUs a chassis: the split's limit is the partition bound; four: above it, so the
    halves are picked as before; with a latency or pieces asked, never."""
    six, four = _instance(6), _instance(4)
    assert split_form.splits_first(six, _forests(six), Options(), 0.0)
    assert not split_form.splits_first(four, _forests(four), Options(), 0.0)
    assert not split_form.splits_first(six, _forests(six), Options(), 1e-6)  # a latency: the latency choice
    assert not split_form.splits_first(six, _forests(six), Options(params={"pieces": 8}), 0.0)


def test_the_split_is_priced_first_and_the_halves_fill_not_run(monkeypatch):
    """The producer on the six-GPU miniature without a time limit, its fill programs (``pick``),
    the split's pricings, the packing of the halves on the whole links and the probes' (certified
    explicit sends) logged in order: the split is priced before the halves are even packed
    (before: the halves were packed first, so a limit in their packing kept nothing)."""
    log, inst = [], _instance(6)
    pick, split_price, certified = producer.pick, split_form.price, joint.certified_price
    real_forest = forests.forest

    def forest(instance, *a, **k):  # the halves on the whole links; a half on its share is another instance
        if instance is inst:
            log.append("halves")
        return real_forest(instance, *a, **k)

    monkeypatch.setattr(producer, "pick", lambda *a, **k: log.append("pick") or pick(*a, **k))
    monkeypatch.setattr(split_form, "price", lambda *a, **k: log.append("split") or split_price(*a, **k))
    monkeypatch.setattr(joint, "certified_price", lambda *a, **k: log.append("probe") or certified(*a, **k))
    monkeypatch.setattr(forests, "forest", forest)
    out = producer.run(inst, Options(time_limit=None))
    choice = out.extra["joint_choice"]
    assert "pick" not in log and log[0] == "split" and "probe" in log
    assert "halves" in log and log.index("split") < log.index("halves"), log
    assert choice["extra_first"] and choice["chosen"].startswith(producer.SPLIT_PAIR)
    priced = choice["priced"]
    assert len(priced) >= 2  # the halves were priced too, after the split
    assert min(priced, key=lambda n: sum(priced[n].values())) == choice["chosen"]
    assert all(f.get("on_its_share") for f in out.extra["forests"])


@dataclass
class F:
    """A stand-in forest: its trees a shard and shape (what candidates() reads)."""

    k: int
    shape: str


def _choose(split_s: float, halves_s: float, deadline=None, kept=None, first: bool = True):
    """overlap.joint with extra_first over stand-ins: the halves priced ``halves_s``, the split
    ``split_s`` (``sync``); returns the chosen name, the record and the calls in order."""
    calls = []
    halves, split = (F(2, "greedy"), F(2, "greedy")), (F(3, "translated"), F(3, "translated"))

    def price(pair, pieces):
        calls.append(("split" if pair == split else "halves", pieces[0]))
        got = {"sync": split_s if pair == split else halves_s}
        if kept is not None:
            kept.offer(pair, pieces, "schedule", got, sum(pieces), 1e-3 * sum(pieces), 0.0)
        return got

    chosen, record = overlap.joint([[halves[0]], [halves[1]]], [100, 100], 0.0, lambda i: None, price,
                                   lambda f, p: p, ("sync",), deadline, lambda: {"split": split}, kept, True,
                                   None, first)
    return ("split" if tuple(chosen) == split else "halves"), record, calls


@pytest.mark.parametrize("split_s, halves_s, winner", [(1.0, 1.1, "split"), (1.1, 1.0, "halves")])
def test_extra_first_keeps_the_cheaper(split_s, halves_s, winner):
    chosen, record, calls = _choose(split_s, halves_s)
    assert chosen == winner and record["extra_first"]
    assert calls == [("split", overlap.PROBE_PIECES), ("halves", overlap.PROBE_PIECES)]
    chosen, record, calls = _choose(split_s, halves_s, first=False)  # the rule off: the probes first, as before
    assert chosen == winner and "extra_first" not in record
    assert calls == [("halves", overlap.PROBE_PIECES), ("split", overlap.PROBE_PIECES)]


def test_under_a_limit_the_split_is_seeded_and_a_probe_that_does_not_fit_is_skipped():
    """1 ms a send (the stand-ins' rate, set by each pricing; the stand-ins take no time), a pair
    at p pieces sends 2 p. 1.2 s left: the split's seed at 200 / 8 = 25 pieces, then its 200
    pieces (1.2 x 400 sends: 0.48 s fits; four times over, 1.6 s, would not, so by the 17/20
    rule, which keeps 200), then the halves' probe needs 4 x 400 sends x 1 ms = 1.6 s: not
    priced, the split kept though the halves would price lower. 600 s left: all three priced,
    the halves chosen."""
    kept = overlap_kept()
    chosen, record, calls = _choose(1.0, 0.9, Deadline.after(1.2), kept)
    assert calls == [("split", 25), ("split", 200)] and chosen == "split"
    kept = overlap_kept()
    chosen, record, calls = _choose(1.0, 0.9, Deadline.after(600), kept)
    assert calls == [("split", 25), ("split", 200), ("halves", 200)] and chosen == "halves"


def overlap_kept():
    from collsynth.solvers.packing.incumbent import Kept

    return Kept(("sync",))


def test_a_probe_after_the_split_that_never_ends_returns_the_split_by_the_limit(monkeypatch):
    def forever(*args, **kw):
        time.sleep(3600)

    monkeypatch.setattr(joint, "certified_price", forever)
    monkeypatch.setattr(overlap, "DIRECT_FACTOR", 0)  # every probe fits: the probe is started
    limit = within(10.0)  # the split is kept after about 4 s of CPU here, unloaded
    t0 = time.monotonic()
    row, sched = pipeline.run(_instance(6), "tree-packing", Options(time_limit=limit))
    assert time.monotonic() - t0 <= limit + GRACE_S
    assert row["verified"] and sched is not None and "time limit" in row["message"]
    assert all(f.get("on_its_share") for f in row["extra"]["forests"])
    assert row["time_sync_s"] >= row["lower_bound_s"]
