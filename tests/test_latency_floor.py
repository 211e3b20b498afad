"""The latency choice's work at small messages: pairs whose link latencies alone exceed the
least priced time are not priced (their floor is checked against real prices), and an
allreduce's joint choice packs the optimum's greedy forest only for a half chosen for bandwidth."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsynth.instances.instance import make_instance
from collsynth.instances.topology import from_edges
from collsynth.solvers.packing import joint, latency, latency_choice
from collsynth.solvers.packing.emission import auto_pieces, price_pieces
from collsynth.solvers.packing.forests import forest
from collsynth.solvers.packing.packed import packed_seconds
from collsynth.solvers.packing.tree_hops import depth_of
from collsynth.solvers.packing.trees import hops_of
from collsynth.solvers.producers import Options

MODELS = ("sync", "event")


def _two_boxes(gpu_alpha: float, box_alpha: float, box_bw: float = 25e9):
    """Two boxes of four GPUs, each GPU on its box's switch (100 GB/s) and the two box switches
    on a third: relays and latency both matter."""
    edges = []
    for box, sw in ((range(0, 4), 8), (range(4, 8), 9)):
        for g in box:
            edges += [(g, sw, {"bandwidth": 100e9, "alpha": gpu_alpha}), (sw, g, {"bandwidth": 100e9, "alpha": gpu_alpha})]
        edges += [(sw, 10, {"bandwidth": box_bw, "alpha": box_alpha}), (10, sw, {"bandwidth": box_bw, "alpha": box_alpha})]
    return from_edges(11, edges, switches=(8, 9, 10))


def _listed(inst, kind: str = "allgather"):
    """The latency choice's forests, candidates, estimate and the pairs it lists to price."""
    f = forest(inst, "allgather", kind != "allgather")
    c = inst.collective.chunks_per_node
    alts = latency_choice.alternatives(inst, f, Options(), None, c)
    cands = [latency.Candidate(g.k, packed_seconds(inst, g), depth_of(g.trees), hops_of(g.trees),
                               auto_pieces(g.trees, c), c, name) for name, g in alts.items()]
    alpha = float(inst.topology.link_arrays.alpha.max())
    est = latency.choose(cands, alpha, (0, auto_pieces(f.trees, c)))
    pairs = latency.within_budget(latency.price_order(cands, alpha, (est.index, est.pieces), est.baseline),
                                  cands, latency_choice.PRICE_BUDGET)
    return list(alts.values()), cands, alpha, est, pairs


@settings(max_examples=6, deadline=None)
@given(gpu_alpha=st.sampled_from([0.5e-6, 1e-6, 3e-6]), box_alpha=st.sampled_from([1e-6, 3e-6, 6e-6]),
       log=st.sampled_from([14, 16, 20]), kind=st.sampled_from(["allgather", "reduce_scatter"]))
def test_the_floor_is_at_most_every_listed_pairs_price(gpu_alpha, box_alpha, log, kind):
    """Every pair the latency choice lists, priced by the pipeline's models after verifying, is
    at or above its floor (an independent price of each pair, not the choice's own)."""
    inst = make_instance(_two_boxes(gpu_alpha, box_alpha), kind, message_bytes=2.0 ** log)
    alts, _, _, _, pairs = _listed(inst, kind)
    floor = latency_choice.floors(inst, alts, MODELS)
    for i, q in pairs[:12]:
        got = price_pieces(inst, alts[i], q, MODELS)
        assert got is not None
        assert floor(i, q) <= sum(got.values()) * (1 + 1e-12), (i, q, floor(i, q), got)


def test_a_pair_below_the_floor_is_not_priced_and_the_choice_is_the_least_priced():
    """64 KB at 5 us a hop: the deeper or more finely cut pairs' latencies exceed the least
    priced sum, so fewer pairs are priced than listed (each listed pair is priced, left below
    the floor, or does not verify; the baseline is priced whatever its floor), and the choice
    is still the least priced of every listed pair priced one by one."""
    inst = make_instance(_two_boxes(5e-6, 5e-6), "allgather", message_bytes=65536)
    alts, cands, alpha, est, pairs = _listed(inst)
    got = latency_choice.priced_choice(inst, alts, cands, alpha, est)
    record = got.priced
    assert record["below_floor"] > 0 and record["baseline_objective_s"] is not None
    assert record["schedules"] + record["below_floor"] + record["unverified"] == record["listed"] == len(pairs)
    every = {pair: price_pieces(inst, alts[pair[0]], pair[1], MODELS) for pair in pairs}
    best = min((p for p in every if every[p] is not None), key=lambda p: sum(every[p].values()))
    assert sum(every[(got.index, got.pieces)].values()) == pytest.approx(sum(every[best].values()), rel=1e-12)


def test_a_model_without_a_floor_and_a_topology_without_latency_count_zero():
    assert latency.latency_floor(4, 3, 1e-6, ("event-inorder",)) == 0.0
    inst = make_instance(_two_boxes(0.0, 0.0), "allgather", message_bytes=65536)
    alts = [forest(inst, "allgather", False)]
    assert latency_choice.floors(inst, alts, MODELS)(0, 5) == 0.0


def _choose_halves(monkeypatch, picked_is_packed: tuple[bool, bool], alpha: float) -> list:
    """The halves :func:`.joint.choose_halves` hands the joint choice, and the forests the greedy
    packing was asked for, with stand-in forests (``picked_is_packed``: per half, whether the
    pick kept the packed forest)."""
    packed = [SimpleNamespace(name=f"packed {i}", trees=[], on_share=False, compact=None) for i in range(2)]
    picked = [p if same else SimpleNamespace(name=f"picked {i}", trees=[], on_share=False, compact=None)
              for i, (p, same) in enumerate(zip(packed, picked_is_packed))]
    asked, seen = [], {}

    def greedy(instance, g, options, deadline):
        asked.append(g.name)
        return [SimpleNamespace(name=f"greedy {g.name}", trees=[], on_share=False, compact=None)]

    def choice(instance, halves, depths, alpha, options, deadline, kept, early=None):
        seen["halves"] = [[f.name for f in h] for h in halves]
        return [h[0] for h in halves], {"chosen_pieces": depths}

    monkeypatch.setattr(joint, "greedy_instead_of_rings", greedy)
    monkeypatch.setattr(joint, "joint_choice", choice)
    monkeypatch.setattr(joint.equal_depth, "prefer", lambda instance, chosen, depths, *rest: (chosen, depths, {}))
    # what the run does after the choice (at alpha 0 with nothing priced: the halves' own pieces) is not this test's
    monkeypatch.setattr(joint, "halves_alone", lambda instance, chosen, depths, *rest: (chosen, depths))
    inst = SimpleNamespace(collective=SimpleNamespace(chunks_per_node=1))
    kept = SimpleNamespace(holds=lambda chosen, depths: True, schedule=None)
    joint.choose_halves(inst, Options(), packed, [(f, 1, None) for f in picked], alpha, None, kept)
    return asked, seen["halves"]


def test_the_greedy_forest_is_packed_only_for_a_half_chosen_for_bandwidth(monkeypatch):
    """With a latency, the half whose latency choice took other trees keeps the packed forest as
    its second candidate (no greedy packing); the half that kept the packed forest gets the
    greedy forest in its place; at alpha 0 both do."""
    asked, halves = _choose_halves(monkeypatch, (False, True), 1e-6)
    assert asked == ["packed 1"]
    assert halves == [["picked 0", "packed 0"], ["packed 1", "greedy packed 1"]]
    asked, halves = _choose_halves(monkeypatch, (False, False), 0.0)
    assert asked == ["packed 0", "packed 1"]
    assert halves == [["picked 0", "greedy packed 0"], ["picked 1", "greedy packed 1"]]
