"""ForestColl's greedy trees, listed in the latency choice only to be priced, never win on their
estimate alone (solvers/packing/latency_choice.py, ``priced_choice``; latency.py ``trusted``).

TACOS 4x4x2 at 1 GB: the estimate picked the greedy trees at 256 pieces (877,824 sends, over the
500,000-send budget), so nothing was priced and they were taken unpriced; priced, they starve under
``event``. Here stand-in estimates (the greedy forest taken as 2 hops deep and 20 times the sends a
piece, so that the estimate picks it, over the budget) and stand-in prices on two boxes of two GPUs
reproduce that case in a second."""

from __future__ import annotations

import pytest

from collsynth.instances.instance import make_instance
from collsynth.solvers.packing import forests, latency, latency_choice
from collsynth.solvers.packing.emission import auto_pieces
from collsynth.solvers.producers import Options

from test_fixed_depth_candidate import _boxes

ALPHA = 5e-6


def _pick(monkeypatch, budget: int, greedy_price: float, wide: bool = True):
    """The latency choice (forest shape, pieces, choice) of a 1 GB allgather on two boxes of two
    GPUs under a ``budget`` of sends, the greedy forest's estimate made to win (stand-in depth 2
    and 20 times its sends a piece), every pair priced by a stand-in: ``greedy_price`` a model
    for greedy trees, 2 s plus a nanosecond a piece for the others. Also the pairs priced (shape,
    pieces) and the estimate's picks handed to the pricing; ``wide`` False lists no greedy forest
    (the choice before it was a candidate)."""
    inst = make_instance(_boxes(2, 2e-6, 5e-6), "allgather", message_bytes=2 ** 30)
    f = forests.forest(inst, "allgather", False)
    assert f.shape != "greedy"
    greedy, priced, picks = [], [], []
    real_forest, real_depth, real_hops = forests.forest, latency_choice.depth_of, latency_choice.hops_of
    real_choice = latency_choice.priced_choice

    def forest(*args, **kw):
        g = real_forest(*args, **kw)
        if kw.get("shape") == "greedy":
            greedy.append(g.trees)
        return g

    def is_greedy(trees) -> bool:
        return any(trees is t for t in greedy)

    def price(part, g, pieces, models):
        priced.append((g.shape, pieces))
        return {m: greedy_price if g.shape == "greedy" else 2.0 + pieces * 1e-9 for m in models}

    def spy(instance, alts, cands, alpha, est, *args, **kw):
        picks.append((est.name, est.pieces, latency.sends(cands[est.index], est.pieces)))
        return real_choice(instance, alts, cands, alpha, est, *args, **kw)

    monkeypatch.setattr(forests, "forest", forest)
    monkeypatch.setattr(latency_choice, "depth_of", lambda trees: 2 if is_greedy(trees) else real_depth(trees))
    monkeypatch.setattr(latency_choice, "hops_of", lambda trees: 20 * real_hops(trees) if is_greedy(trees)
                        else real_hops(trees))
    monkeypatch.setattr(latency_choice, "price_pieces", price)
    monkeypatch.setattr(latency_choice, "priced_choice", spy)
    monkeypatch.setattr(latency_choice, "PRICE_BUDGET", budget)
    monkeypatch.setattr(latency_choice, "bandwidth_bound", lambda *args: wide)
    g, pieces, choice = latency_choice.latency_pick(inst, f, 1, ALPHA, Options(), None, auto_pieces(f.trees, 1))
    return (g.shape, pieces), choice, priced, picks


def test_an_over_budget_greedy_pick_is_not_taken_unpriced(monkeypatch):
    """A budget of 1,000 sends, which no pair fits: the estimate picks the greedy forest (over
    the budget), nothing is priced, and the choice is the one made without the greedy forest
    listed at all (the least estimate among the others), not the greedy pick. The old code
    returned the greedy pick unpriced."""
    (shape, pieces), choice, priced, picks = _pick(monkeypatch, 1000, 1.0)
    assert picks[0][0].startswith("greedy") and picks[0][2] > 1000  # the case: the estimate picks it, over budget
    assert priced == []
    assert shape != "greedy" and not choice.name.startswith("greedy"), choice
    monkeypatch.undo()
    (shape0, pieces0), choice0, _, picks0 = _pick(monkeypatch, 1000, 1.0, wide=False)
    assert not picks0[0][0].startswith("greedy")
    assert (choice.name, shape, pieces) == (choice0.name, shape0, pieces0)


@pytest.mark.parametrize("greedy_price", [1.0, 3.0])
def test_greedy_trees_win_only_where_priced(monkeypatch, greedy_price):
    """A budget of 30,000 sends: the greedy pick (128 pieces, 81,920 stand-in sends) is over
    it, the others' best estimate (256 pieces of one packed tree, 8,192 sends) fits, and so do
    the greedy trees at a quarter of their pieces. Whatever the stand-in prices, the choice is a
    pair that was priced and the least priced of them, never the greedy pick at its unpriced
    pieces: greedy where its price (1 s a model) is below the others' (2 s), not where it is
    above (3 s). The old code returned the greedy pick unpriced in both."""
    (shape, pieces), choice, priced, picks = _pick(monkeypatch, 30_000, greedy_price)
    name, pick_pieces, sends = picks[0]
    assert name.startswith("greedy") and sends > 30_000
    assert (shape, pieces) in priced, (shape, pieces, priced)
    assert ("greedy", pick_pieces) not in priced
    assert (shape == "greedy") == (greedy_price < 2.0), (shape, pieces, priced)
    assert choice.priced["schedules"] == len(priced) >= 2
