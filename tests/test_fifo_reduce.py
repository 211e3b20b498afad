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
    two-level or ring forests, once the run is out of time, or when the two forests' sends at
    their pieces (2 x 1600 + 20 x 2000 = 43,200) exceed the probe's budget."""
    from types import SimpleNamespace

    from collsynth.solvers.packing import fifo_reduce

    f, g = _forest(2), _forest(20)
    better = {id(f): {"sync": 1.0, "event": 2.0}, id(g): {"sync": 1.0, "event": 1.0}}
    assert _deeper(f, g, better, models=("sync",)) == (f, [])
    rings = _forest(2, "rings")
    assert _deeper(rings, g, {**better, id(rings): better[id(f)]}) == (rings, [])
    assert _deeper(f, g, better, deadline=SimpleNamespace(expired=lambda: True)) == (f, [])
    monkeypatch.setattr(fifo_reduce, "RUN_PROBE_SENDS", 43_199)
    assert _deeper(f, g, better) == (f, [])
    monkeypatch.setattr(fifo_reduce, "RUN_PROBE_SENDS", 43_200)
    assert _deeper(f, g, better)[0] is g


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
