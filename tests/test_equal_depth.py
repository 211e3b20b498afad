"""An allreduce's halves at one depth (solvers/packing/equal_depth.py): ForestColl's greedy
forests both at its fixed pieces are compared after the joint choice, each pair priced at an
eighth and a quarter of its pieces and extrapolated as A + B/P; only the winner is built in
full, and the run's time limit holds while it is compared."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from collsynth.instances.instance import make_instance
from collsynth.limits import GRACE_S
from collsynth.solvers import pipeline
from collsynth.solvers.packing import equal_depth, forests
from collsynth.solvers.producers import Options

from machine import within
from test_fixed_depth_candidate import _boxes


def _setting():
    """Two boxes of two GPUs, 1 GB allreduce: ForestColl's greedy forests (both halves), its
    fixed depth ``P`` and the halves at ``P`` and ``4 P`` (unequal depths, as a latency choice
    may leave them)."""
    inst = make_instance(_boxes(2, 2e-6, 5e-6), "allreduce", message_bytes=2 ** 30)
    packed = [forests.forest(inst, "allgather", t, shape="greedy") for t in (True, False)]
    pair, pieces = equal_depth.forestcoll_pair(inst, packed)
    assert all(f is g for f, g in zip(pair, packed)) and pieces[0] == pieces[1]
    return inst, packed, pieces[0]


def _copies(packed) -> list:
    """The same trees as other objects labelled as other trees (two-level): the joint choice's
    pair, told apart from ForestColl's."""
    return [replace(f, shape="two-level") for f in packed]


def _stand_in(pair_of_forestcoll, forestcoll_a: float, priced: list, full_other: float | None = None):
    """Prices by hand, summed over one model, as a function of a pair's larger pieces ``q``:
    ForestColl's pair ``forestcoll_a + 6 / q``, any other ``1.02 + 1 / q`` (``full_other`` at
    ``q`` of 3,000 or more, where given: a price the probes do not foretell); each call listed."""
    def price(pair, q):
        mine = all(f is g for f, g in zip(pair, pair_of_forestcoll))
        priced.append(("forestcoll" if mine else "other", list(q)))
        if mine:
            return {"event": forestcoll_a + 6 / max(q)}
        return {"event": full_other if full_other is not None and max(q) >= 3000 else 1.02 + 1 / max(q)}
    return price


def test_the_equal_depth_pair_is_chosen_where_its_extrapolated_price_is_less():
    """ForestColl's pair 1 + 6/q against the halves at (P, 4P) 1.02 + 1/q. At the probes (P/8,
    P/4 against P/2, P) the other pair is cheaper (1 + 48/P against 1.02 + 2/P), but extrapolated
    to their own pieces ForestColl's is 1 + 6/P against 1.02 + 1/(4P): it is chosen, built in
    full at (P, P), and the other never at (P, 4P)."""
    inst, packed, P = _setting()
    priced: list = []
    chosen, depths, record = equal_depth.prefer(inst, _copies(packed), [P, 4 * P], packed, {},
                                                _stand_in(packed, 1.0, priced), None, None)
    assert [f is g for f, g in zip(chosen, packed)] == [True, True] and depths == [P, P]
    assert record["chosen"] and record["against"] == "extrapolated"
    assert record["estimate_s"] == pytest.approx(1 + 6 / P, rel=1e-12)
    assert record["against_s"] == pytest.approx(1.02 + 1 / (4 * P), rel=1e-12)
    assert ("forestcoll", [P, P]) in priced and ("other", [P, 4 * P]) not in priced
    assert max(len(q) and max(q) for kind, q in priced if kind == "other") <= P


def test_the_equal_depth_pair_is_not_chosen_where_its_extrapolated_price_is_more():
    """ForestColl's pair 1.03 + 6/q: extrapolated 1.03 + 6/P, above the other pair's 1.02 +
    1/(4P): the pair of the joint choice stays, and ForestColl's is not built in full. Where the
    joint choice priced its pair at its pieces (1.0 here), that price is the comparison's and the
    other pair is not probed."""
    inst, packed, P = _setting()
    priced: list = []
    depths_in = [P, 4 * P]
    chosen, depths, record = equal_depth.prefer(inst, _copies(packed), depths_in, packed, {},
                                                _stand_in(packed, 1.03, priced), None, None)
    assert depths == depths_in and not record["chosen"]
    assert record["estimate_s"] == pytest.approx(1.03 + 6 / P, rel=1e-12)
    assert ("forestcoll", [P, P]) not in priced and ("other", depths_in) in priced  # the winner built in full
    priced.clear()
    joint = {"chosen": "as picked", "chosen_pieces": depths_in, "priced": {"as picked": {"event": 1.0}}}
    chosen, depths, record = equal_depth.prefer(inst, _copies(packed), depths_in, packed, joint,
                                                _stand_in(packed, 1.0, priced), None, None)
    assert depths == depths_in and not record["chosen"] and record["against"] == "priced"
    assert [kind for kind, _ in priced] == ["forestcoll", "forestcoll"]  # its two probes alone


def test_a_misranked_estimate_builds_the_other_pair_too():
    """The halves at (P, 4P) price 1.02 + 1/q at their probes but 1.5 in full (as DGX-H100 x2's
    600 / 1,600 pieces do: 4.045 ms extrapolated, 5.817 in full); ForestColl's pair 1.03 + 6/q.
    The estimate keeps the joint choice's pair and builds it; its full price is above
    ForestColl's estimate, so ForestColl's pair is built too and, cheaper in full, chosen."""
    inst, packed, P = _setting()
    assert 4 * P >= 3000  # the stand-in's full price applies at the halves' own pieces
    priced: list = []
    chosen, depths, record = equal_depth.prefer(inst, _copies(packed), [P, 4 * P], packed, {},
                                                _stand_in(packed, 1.03, priced, full_other=1.5), None, None)
    assert [f is g for f, g in zip(chosen, packed)] == [True, True] and depths == [P, P] and record["chosen"]
    assert record["priced_s"] == {"joint choice": 1.5, "forestcoll": pytest.approx(1.03 + 6 / P, rel=1e-12)}


def test_the_run_returns_by_its_limit_and_grace_while_the_equal_depth_pair_is_compared(monkeypatch):
    """The real clock, the real run (objective ``event``, two boxes of two, 16 MB): comparing the
    equal-depth pair never ends (it sleeps past the run's limit); the run's timer stops it and the
    run returns the least priced verified schedule of the joint choice, within the limit and its
    grace."""
    reached = []

    def forever(*args, **kw):
        reached.append(time.monotonic())
        time.sleep(3600)

    monkeypatch.setattr(equal_depth, "estimate", forever)
    inst = make_instance(_boxes(2, 2e-6, 5e-6), "allreduce", message_bytes=2 ** 24)  # few pieces: a small kept one
    limit = within(20.0)
    t0 = time.monotonic()
    row, sched = pipeline.run(inst, "tree-packing", Options(params={"objective": "event"}, time_limit=limit))
    assert time.monotonic() - t0 <= limit + GRACE_S
    assert reached, "the run did not reach the equal-depth comparison before its limit"
    assert row["verified"] and sched is not None and "time limit" in row["message"]
    assert "kept_schedule" in row["extra"]


def test_probes_over_the_budget_at_an_eighth_are_taken_at_a_sixteenth_under_one_model(monkeypatch):
    """Probes at an eighth and a quarter of the pieces over :data:`PROBE_SENDS` (lowered here to
    the sends of probes at a sixteenth and an eighth, counted by hand: three times the hops at the
    smaller probe's pieces, both pairs): with ``most_fraction`` 8 (a summed objective) ForestColl's
    pair is skipped, saying so; with 16 (one model: A100 x2's 1,200-piece pair, 2.71 M sends of
    probes at 1/8) it is probed at P/16 and P/8, extrapolated exactly (stand-in 1 + 6/q) and chosen."""
    from collsynth.solvers.packing.trees import hops_of

    inst, packed, P = _setting()
    c = inst.collective.chunks_per_node
    hops = sum(hops_of(f.trees) for f in packed)
    at_16 = 3 * hops * (P // 16) * c + 3 * (hops_of(packed[0].trees) * (P // 16) + hops_of(packed[1].trees) * (P // 4)) * c
    monkeypatch.setattr(equal_depth, "PROBE_SENDS", at_16)
    priced: list = []
    chosen, depths, record = equal_depth.prefer(inst, _copies(packed), [P, 4 * P], packed, {},
                                                _stand_in(packed, 1.0, priced), None, None)
    assert "skipped" in record and not priced and depths == [P, 4 * P]
    chosen, depths, record = equal_depth.prefer(inst, _copies(packed), [P, 4 * P], packed, {},
                                                _stand_in(packed, 1.0, priced), None, None, 16)
    assert record["fraction"] == 16 and record["chosen"] and depths == [P, P]
    assert ("forestcoll", [P // 16, P // 16]) in priced and ("forestcoll", [P // 8, P // 8]) in priced
    assert record["estimate_s"] == pytest.approx(1 + 6 / P, rel=1e-12)
