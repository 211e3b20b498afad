"""The allreduce's joint choice at alpha 0 compares a deeper pair at the pieces the run emits
(solvers/packing/joint.py, ``deeper_at_run_pieces``), not only at the probe's 200 a half."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from collsynth.instances.instance import make_instance
from collsynth.solvers.packing import incumbent, joint
from collsynth.solvers.packing.trees import RoutedTree
from collsynth.solvers.producers import Options

from test_fixed_depth_candidate import _boxes


def _forest(hops: int, transposed: bool):
    """A stand-in forest: one tree down the chain 0 -> 1 -> ... -> hops (``hops`` deep; run at
    100 pieces a hop, at least the 1,600 floor)."""
    trees = [RoutedTree(0, 0, 1, tuple((i, i + 1) for i in range(hops)))]
    return SimpleNamespace(trees=trees, transposed=transposed, shape="two-level", k=1, on_share=False,
                           compact=None, kind="allgather")


def _run(monkeypatch, shallow_a: float):
    """The joint choice (stand-in) priced, at 200 pieces a half, the shallow pair (2 hops deep,
    run at 1,600 pieces) ``shallow_a + 1 / P`` under each of ``sync`` and ``event`` and the deep
    pair (20 hops, run at 2,000) ``1 + 3 / P`` under ``sync``, ``1 + 3 / P + P / 10**7`` under
    ``event`` (a cost a piece), ``P`` the pieces a half, and took the shallow one. Returns the
    chosen pair, the pieces, the record, the two pairs and every pricing call."""
    inst = make_instance(_boxes(2, 0.0, 0.0), "allreduce", message_bytes=2 ** 24)
    shallow = [_forest(2, True), _forest(2, False)]
    deep = [_forest(20, True), _forest(20, False)]
    calls: list = []

    def price(instance, pair, pieces, models, kept):
        p = max(pieces)
        if pair[0] is deep[0]:
            got = {"sync": 1 + 3 / p, "event": 1 + 3 / p + p / 1e7}
        else:
            got = {"sync": shallow_a + 1 / p, "event": shallow_a + 1 / p}
        calls.append(("deep" if pair[0] is deep[0] else "shallow", list(pieces)))
        return got

    def choice(instance, halves, depths, alpha, options, deadline, kept, early=None):  # as overlap.joint records it
        priced = {"one tree a shard": price(instance, shallow, [200, 200], None, kept),
                  "as picked": price(instance, deep, [200, 200], None, kept)}
        calls.clear()
        return list(shallow), {"chosen": "one tree a shard", "probe_pieces": [200, 200],
                               "chosen_pieces": [200, 200], "least_sum_of": ["sync", "event"], "priced": priced,
                               "_pairs": {"one tree a shard": tuple(shallow), "as picked": tuple(deep)}}

    monkeypatch.setattr(joint, "certified_price", price)
    monkeypatch.setattr(joint, "joint_choice", choice)
    kept = incumbent.Kept(("sync", "event"))
    got = joint.choose_halves(inst, Options(), deep, [(f, 0, None) for f in deep], 0.0, None, kept)
    return (*got[:3], shallow, deep, calls)


def test_the_deep_pair_that_loses_at_the_probe_but_wins_at_its_run_pieces_is_chosen(monkeypatch):
    """By hand: at 200 pieces the shallow pair sums 2 (1.005 + 1/200) = 2.02, the deep one
    (1.015) + (1.015 + 0.00002) = 2.03002 (the probe's choice, the old code's answer, is the
    shallow pair). Priced at 50 and 100 too and extrapolated as ``A + B / P + C P``: the shallow
    pair at its 1,600 pieces 2 (1.005 + 1/1600) = 2.01125, the deep pair at its 2,000
    (1 + 0.0015) + (1 + 0.0015 + 0.0002) = 2.0032, 0.4 % less: the deep pair is chosen, at
    2,000 pieces a half; the probe's prices at 200 are reused, not priced again."""
    chosen, depths, record, shallow, deep, calls = _run(monkeypatch, 1.005)
    assert [f is g for f, g in zip(chosen, deep)] == [True, True], record
    assert depths == [2000, 2000] and record["chosen"] == "as picked"
    assert record["at_run_pieces"]["one tree a shard"] == pytest.approx(2.01125, abs=1e-9)
    assert record["at_run_pieces"]["as picked"] == pytest.approx(2.0032, abs=1e-9)
    assert sorted(calls) == [("deep", [50, 50]), ("deep", [100, 100]), ("shallow", [50, 50]),
                             ("shallow", [100, 100])]


def test_a_deep_pair_cheaper_at_its_run_pieces_by_less_than_the_margin_is_not_chosen(monkeypatch):
    """The shallow pair ``1.0012 + 1 / P`` a model: 2 (1.0012 + 1/1600) = 2.00365 at its run's
    pieces against the deep pair's 2.0032 there, 0.02 % more, under ``FLIP_MARGIN`` (0.1 %): the
    shallow pair stays chosen, at 1,600."""
    chosen, depths, record, shallow, deep, calls = _run(monkeypatch, 1.0012)
    assert [f is g for f, g in zip(chosen, shallow)] == [True, True] and depths == [1600, 1600]
    assert record["chosen"] == "one tree a shard"
    assert record["at_run_pieces"]["one tree a shard"] == pytest.approx(2.00365, abs=1e-9)
