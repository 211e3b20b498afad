"""Reduction forests for FIFO links (solvers/packing/fifo_reduce.py): the reduce-scatter's
forest at alpha 0 is measured against one packed tree a shard. On ForestColl's A100 x2 the
optimum's 13 two-level trees a shard are kept (1.0117x the bound under ``event`` at 200 pieces,
one tree a shard 1.0209x; the 2.38x once measured there was the event model's conservative
dependency fallback); on DGX-H100 x2 the optimum's ring trees starved under FIFO (1.37x) and one
tree a shard, whose links each carry a GPU's own data or relayed sums but never both, was kept
(1.041x, ``benchmarks/bench_time_reversal.py``); now that the reductions declare each link's
order (``link_order = "program"``), the optimum's ring trees are kept there too."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.solvers import pipeline
from collsynth.solvers.producers import Options
from collsynth.tens import bounds
from test_partition_bound import switched

A100X2 = {"nodes": 2, "nvlink_alpha": 0.0, "nic_alpha": 0.0}


def _instance(generator: str):
    return make_instance(build(generator, A100X2), "reduce_scatter", message_bytes=1e9)


@pytest.mark.parametrize("generator,objective,trees", [("forestcoll_a100", "sync+event", 13),
                                                       ("dgx_h100", "sync+event", 2), ("dgx_h100", "sync", 2)])
def test_the_reduction_forest_is_chosen_for_the_objective(generator, objective, trees):
    inst = _instance(generator)
    row, sched = pipeline.run(inst, "tree-packing", Options(time_limit=600, params={"pieces": 20,
                                                                                   "objective": objective}))
    assert row["verified"]
    assert row["extra"]["forests"][0]["trees_per_shard"] == trees
    if objective != "sync":
        assert row["time_event_s"] <= 1.2 * bounds.instance_bounds(inst).event.value  # 20 pieces: fill ~ 1/20
    assert sched.link_order == "program"


@settings(max_examples=6, deadline=None)
@given(switched(), st.sampled_from(["reduce_scatter", "reduce"]))
def test_reductions_on_random_switched_boxes_verify_and_price_above_the_bound(topo, kind):
    """Random switched boxes (``test_partition_bound.switched``), reduce-scatter and reduce (to
    the first GPU) at alpha 0: the forest kept (the packed one or one tree a shard) verifies,
    and every model's time (``event``: FIFO links) is at least that model's bound."""
    inst = make_instance(topo, kind, message_bytes=2.4e5, root=topo.npus[0] if kind == "reduce" else None)
    row, _ = pipeline.run(inst, "tree-packing", Options(time_limit=120, params={"pieces": 4}))
    assert row["verified"], row["message"]
    b = bounds.instance_bounds(inst)
    for model, field in (("event", "time_event_s"), ("sync", "time_sync_s")):
        assert b.of(model).value <= row[field] * (1 + 1e-9), (model, b.of(model).label(), row[field])


def _chain(n: int):
    """One tree down the chain 0 -> 1 -> ... -> n: n hops deep, n sends a piece."""
    from collsynth.solvers.packing.trees import RoutedTree

    return [RoutedTree(0, 0, 1, tuple((i, i + 1) for i in range(n)))]


def _forest(hops: int, shape: str = "greedy"):
    from types import SimpleNamespace

    return SimpleNamespace(trees=_chain(hops), transposed=True, shape=shape, k=1)


def _deeper(f, g, prices: dict, models=("sync", "event"), deadline=None, pieces=None):
    """:func:`fifo_reduce.deeper` with ``prices`` keyed by forest id: returns the pick and the pieces priced."""
    from collsynth.solvers.packing import fifo_reduce

    asked = []

    def price(h, pieces):
        asked.append((h is f, pieces))
        return prices[id(h)]

    return fifo_reduce.deeper(f, lambda: g, price, models, 1, deadline, pieces), asked


def test_deeper_keeps_the_least_summed_price_each_at_its_own_pieces():
    """A 2-hop chain is emitted at the 1600-piece floor, a 20-hop one at 100 pieces a hop (2000):
    the two are priced there (at the ``pieces`` parameter when set), and the lesser sum over the objective's models is kept (a tie
    keeps the breadth-first forest; a depth-first one that does not verify is never kept)."""
    f, g = _forest(2), _forest(20)
    pick, asked = _deeper(f, g, {id(f): {"sync": 1.00, "event": 1.07}, id(g): {"sync": 1.01, "event": 1.01}})
    assert pick is g and asked == [(True, 1600), (False, 2000)]
    assert _deeper(f, g, {id(f): {"sync": 1.0, "event": 1.0}, id(g): {"sync": 0.5, "event": 1.5}})[0] is f
    assert _deeper(f, g, {id(f): {"sync": 1.0, "event": 1.07}, id(g): None})[0] is f
    assert _deeper(f, g, {id(f): None, id(g): {"sync": 9.0, "event": 9.0}})[0] is g
    assert _deeper(f, g, {id(f): {"sync": 1.0, "event": 1.07}, id(g): {"sync": 1.0, "event": 1.0}},
                   pieces=7)[1] == [(True, 7), (False, 7)]  # the run's pieces when set


def test_deeper_is_not_tried_where_it_cannot_help_or_would_cost_too_much(monkeypatch):
    """Nothing is priced under ``sync`` alone (the breadth-first packing is the optimum's), for
    two-level or ring forests, once the run is out of time or has less than half its time limit
    left; the two forests' sends at their pieces (2 x 1600 + 20 x 2000 = 43,200) within the
    budget are priced there."""
    from types import SimpleNamespace

    from collsynth.solvers.packing import fifo_reduce

    f, g = _forest(2), _forest(20)
    better = {id(f): {"sync": 1.0, "event": 2.0}, id(g): {"sync": 1.0, "event": 1.0}}
    assert _deeper(f, g, better, models=("sync",)) == (f, [])
    rings = _forest(2, "rings")
    assert _deeper(rings, g, {**better, id(rings): better[id(f)]}) == (rings, [])
    assert _deeper(f, g, better, deadline=SimpleNamespace(expired=lambda: True)) == (f, [])
    monkeypatch.setattr(fifo_reduce, "RUN_PROBE_SENDS", 43_200)
    assert _deeper(f, g, better) == (g, [(True, 1600), (False, 2000)])
    monkeypatch.setattr(fifo_reduce, "LEAST_SHARE_LEFT", 0.5)
    short = SimpleNamespace(expired=lambda: False, left=lambda: 29.0, limit=60.0)
    assert _deeper(f, g, better, deadline=short) == (f, [])
    assert _deeper(f, g, better, deadline=SimpleNamespace(expired=lambda: False, left=lambda: 31.0, limit=60.0))[0] is g


def test_deeper_over_its_budget_extrapolates_from_fewer_pieces(monkeypatch):
    """Over :data:`RUN_PROBE_SENDS` each growth is priced at a tenth, a fifth and two fifths of
    its pieces (the six together within :data:`SCALED_PROBE_SENDS`: 30,240 sends against 43,200
    at the run's) and the prices extrapolated to the run's pieces as ``A + B / P + C P`` (here
    ``C = 0``): a chain 2 hops
    deep pays ``1 + 1 / P`` a model, one 20 hops deep ``0.99 + 19 / P``, so at 1600 / 2000 pieces
    (2.00125 against 1.999) the deep one wins, though at 160 / 200 pieces (2.0125 against 2.17)
    the shallow one would."""
    from collsynth.solvers.packing import fifo_reduce

    f, g = _forest(2), _forest(20)
    monkeypatch.setattr(fifo_reduce, "RUN_PROBE_SENDS", 43_199)
    monkeypatch.setattr(fifo_reduce, "SCALED_PROBE_SENDS", 30_240)
    asked = []

    def price(h, pieces):
        asked.append((h is f, pieces))
        a, b = (1.0, 1.0) if h is f else (0.99, 19.0)
        return {"sync": a + b / pieces, "event": a + b / pieces}

    assert fifo_reduce.deeper(f, lambda: g, price, ("sync", "event"), 1) is g
    assert asked == [(True, 160), (True, 320), (True, 640), (False, 200), (False, 400), (False, 800)]
    assert fifo_reduce.extrapolated(None, 1.0, 1, 2) is None  # one that does not verify is never kept
    assert fifo_reduce.with_cost_a_piece([1.0, None, 1.0], 1, 2) is None


def test_deeper_keeps_the_shallow_growth_where_the_deep_one_would_not_be_verified_in_time(monkeypatch):
    """The comparison's pricing took 1 s a send (a clock advanced by the price function) over 4,400
    sends (the two chains' at 200 pieces): the deep one's 4,000 sends fit 4,000 s left, not 3,999."""
    from types import SimpleNamespace

    from collsynth.solvers.packing import fifo_reduce

    f, g = _forest(2), _forest(20)
    now = [0.0]
    monkeypatch.setattr(fifo_reduce.time, "monotonic", lambda: now[0])

    def price(h, pieces):
        now[0] += hops_of_chain(h) * pieces
        return {"event": 2.0 if h is f else 1.0}

    def left(seconds):
        return SimpleNamespace(expired=lambda: False, left=lambda: seconds, limit=None)

    assert fifo_reduce.deeper(f, lambda: g, price, ("event",), 1, left(4000.0), 200) is g
    assert fifo_reduce.deeper(f, lambda: g, price, ("event",), 1, left(3999.0), 200) is f


def hops_of_chain(f) -> int:
    from collsynth.solvers.packing.trees import hops_of

    return hops_of(f.trees)


@pytest.mark.parametrize("kind,probed", [("reduce", True), ("reduce_scatter", False)])
def test_only_a_rooted_reduce_compares_its_growths(monkeypatch, kind, probed):
    """The run offers :func:`fifo_reduce.deeper` a rooted reduce's greedy forest (DGX-H100 x1's,
    one box: greedy) and not a reduce-scatter's; the schedule kept verifies."""
    from collsynth.solvers.packing import fifo_reduce

    seen = []
    real = fifo_reduce.deeper
    monkeypatch.setattr(fifo_reduce, "deeper", lambda f, *a, **k: seen.append(f.kind) or real(f, *a, **k))
    topo = build("dgx_h100", {"nodes": 1, "nvlink_alpha": 0.0, "nic_alpha": 0.0})
    inst = make_instance(topo, kind, message_bytes=2.4e5, root=topo.npus[0] if kind == "reduce" else None)
    row, _ = pipeline.run(inst, "tree-packing", Options(time_limit=120, params={"pieces": 4}))
    assert row["verified"], row["message"]
    assert seen == (["broadcast"] if probed else [])


def test_the_optimums_deeper_forest_is_kept_where_cheaper_at_its_run_pieces():
    """Stand-in prices ``a + b / P`` a model (two models): the optimum's 20-hop chain ``1 + 3 / P``
    loses the probe at 200 pieces to a 2-hop one, ``1.005 + 1 / P`` (1.015 against 1.010), but
    at the pieces each is emitted at (2000, 100 a hop, against the 1600 floor) it is 1.0015
    against 1.005625: kept. Against ``1.0012 + 1 / P`` (1.001825 at 1600) it is cheaper by
    0.03 %, under :data:`FLIP_MARGIN`: one tree a shard kept, as before; and a stand-in that
    does not verify at the extra pieces is never taken."""
    from types import SimpleNamespace

    from collsynth.solvers.packing import fifo_reduce

    f = SimpleNamespace(trees=_chain(20), transposed=True, shape="rings", k=2)
    one = SimpleNamespace(trees=_chain(2), transposed=True, shape="two-level", k=1)

    def prices(a1: float, broken: bool = False):
        def price(g, pieces):
            if broken and g is f and pieces != 200:
                return None
            y = 1 + 3 / pieces if g is f else a1 + 1 / pieces
            return {"sync": y, "event": y}
        return price

    models = ("sync", "event")
    assert fifo_reduce.choose(f, lambda: one, prices(1.005), models, 1) is f
    assert fifo_reduce.choose(f, lambda: one, prices(1.0012), models, 1) is one
    assert fifo_reduce.choose(f, lambda: one, prices(1.005, broken=True), models, 1) is one
