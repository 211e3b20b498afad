"""ForestColl's own trees at its fixed depth as a latency candidate: where the message is wide
the greedy packing at the optimum's ``k`` joins the latency choice, and its fixed-depth pair
(100 pieces a hop of its deepest tree) is always priced, so the choice under one model is never
above that pair's price in it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from collsynth.instances.instance import make_instance
from collsynth.instances.topology import from_edges
from collsynth.solvers.packing import forests, latency_choice
from collsynth.solvers.packing.emission import DEPTH_FACTOR, auto_pieces, price_pieces
from collsynth.solvers.packing.tree_hops import depth_of
from collsynth.solvers.producers import Options


def _boxes(per_box: int, gpu_alpha: float, box_alpha: float, box_bw: float = 25e9):
    """Two boxes of ``per_box`` GPUs, each GPU on its box's switch (100 GB/s), the two box
    switches on a third (``box_bw``)."""
    edges, n = [], 2 * per_box
    for b in range(2):
        sw = n + b
        for g in range(b * per_box, (b + 1) * per_box):
            edges += [(g, sw, {"bandwidth": 100e9, "alpha": gpu_alpha}), (sw, g, {"bandwidth": 100e9, "alpha": gpu_alpha})]
        edges += [(sw, n + 2, {"bandwidth": box_bw, "alpha": box_alpha}),
                  (n + 2, sw, {"bandwidth": box_bw, "alpha": box_alpha})]
    return from_edges(n + 3, edges, switches=(n, n + 1, n + 2))


def _pick(inst, objective: str):
    """The latency choice of the instance's one forest under ``objective``: (forest, pieces, choice)."""
    f = forests.forest(inst, "allgather", inst.collective.kind != "allgather")
    alpha = float(inst.topology.link_arrays.alpha.max())
    c = inst.collective.chunks_per_node
    return f, latency_choice.latency_pick(inst, f, 1, alpha, Options(params={"objective": objective}), None,
                                          auto_pieces(f.trees, c))


def test_the_fixed_depth_pair_is_100_pieces_a_hop_of_the_greedy_forest_and_is_chosen_where_least(monkeypatch):
    """Two boxes of four GPUs, 1 GB reduce-scatter: the optimum's forest is two-level, so the
    greedy packing at its ``k`` is added (the message is wide), and its pair is listed at
    ``DEPTH_FACTOR`` pieces a hop of its deepest tree. With prices that make that pair the
    least (a stand-in for the pricing, listing what it priced), it is priced third, after the
    estimate's pick and the baseline, and the choice is that pair; with
    prices that make it the dearest, it is not (the choice is the least priced, not the pair)."""
    inst = make_instance(_boxes(4, 2e-6, 5e-6), "reduce_scatter", message_bytes=2 ** 30)
    f = forests.forest(inst, "allgather", True)
    assert f.shape != "greedy"
    greedy = forests.forest(inst, "allgather", True, shape="greedy")
    fixed = min(DEPTH_FACTOR * depth_of(greedy.trees), 4_000_000 // len(greedy.trees))  # well within the budget
    priced = []

    def stand_in(dear: bool):
        def price(part, g, pieces, models):
            mine = g.shape == "greedy" and g.k == f.k and pieces == fixed
            priced.append((g.shape, pieces))
            return {m: (3.0 if dear else 1.0) if mine else 2.0 + pieces * 1e-9 for m in models}
        return price

    monkeypatch.setattr(latency_choice, "price_pieces", stand_in(False))
    _, (g, pieces, choice) = _pick(inst, "event")
    assert ("greedy", fixed) in priced[:3]  # right after the estimate's pick and the baseline, whatever the budget
    assert (g.shape, g.k, pieces) == ("greedy", f.k, fixed), choice
    assert choice.name == f"greedy k={f.k}"
    monkeypatch.setattr(latency_choice, "price_pieces", stand_in(True))
    _, (g, pieces, _) = _pick(inst, "event")
    assert (g.shape, pieces) != ("greedy", fixed)


def test_a_narrow_message_packs_no_greedy_forest():
    """64 KB on the same boxes: the bandwidth time is under ``WIDE`` times the trees' latency,
    so the greedy forest is not packed for the latency choice (its candidates are the usual)."""
    inst = make_instance(_boxes(4, 2e-6, 5e-6), "reduce_scatter", message_bytes=65536)
    f = forests.forest(inst, "allgather", True)
    alpha = float(inst.topology.link_arrays.alpha.max())
    assert not latency_choice.bandwidth_bound(inst, f, alpha)
    alts = latency_choice.alternatives(inst, f, Options(), None, 1, False)
    assert not any(name.startswith("greedy") for name in alts)
    wide = make_instance(_boxes(4, 2e-6, 5e-6), "reduce_scatter", message_bytes=2 ** 30)
    assert latency_choice.bandwidth_bound(wide, forests.forest(wide, "allgather", True), alpha)


@settings(max_examples=4, deadline=None)
@given(gpu_alpha=st.sampled_from([0.5e-6, 2e-6]), box_alpha=st.sampled_from([1e-6, 6e-6]),
       box_bw=st.sampled_from([12.5e9, 50e9]), log=st.sampled_from([26, 30]),
       kind=st.sampled_from(["reduce_scatter", "allgather"]))
def test_the_event_choice_is_never_above_forestcolls_fixed_depth_under_event(gpu_alpha, box_alpha, box_bw, log, kind):
    """Small switched boxes (two of two GPUs), wide messages: the latency choice made for
    ``event`` alone, priced by the pipeline's model after verifying, is at or below ForestColl's
    greedy trees at their fixed depth (packed and priced here on their own: ``shape`` greedy,
    100 pieces a hop of the deepest tree). A 300,000-send pricing budget (the pick, the
    baseline and the fixed pair fit it) keeps the test short."""
    import unittest.mock

    with unittest.mock.patch.object(latency_choice, "ONE_MODEL_BUDGET", 300_000):
        _check_event_choice(gpu_alpha, box_alpha, box_bw, log, kind)


def _check_event_choice(gpu_alpha, box_alpha, box_bw, log, kind):
    inst = make_instance(_boxes(2, gpu_alpha, box_alpha, box_bw), kind, message_bytes=2.0 ** log)
    _, (g, pieces, _) = _pick(inst, "event")
    ours = price_pieces(inst, g, pieces, ("event",))
    theirs_forest = forests.forest(inst, "allgather", kind != "allgather", shape="greedy")
    theirs = price_pieces(inst, theirs_forest, auto_pieces(theirs_forest.trees, 1, floor=1), ("event",))
    assert ours is not None and theirs is not None
    assert ours["event"] <= theirs["event"] * (1 + 1e-9), (g.shape, pieces, ours, theirs)
