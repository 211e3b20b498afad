"""The allreduce's joint choice priced at fewer pieces (solvers/packing/joint.py, ``fewer_pieces``):
under ``event`` the halves' picks (many pieces) are not assumed, the pair is priced at fewer."""

from __future__ import annotations

from collsynth.instances.instance import make_instance
from collsynth.solvers.packing import forests, incumbent, joint
from collsynth.solvers.packing.emission import emit, with_header
from collsynth.solvers.packing.overlap import overlapped
from collsynth.solvers.producers import Options
from collsynth.tens import cost_models
from collsynth.tens.verify import verify

from test_fixed_depth_candidate import _boxes


def _direct_event(inst, pair, pieces: int) -> float:
    """The ``event`` price of ``pair`` overlapped at ``pieces`` a half, emitted, verified and
    priced here (not through the joint choice)."""
    rs, ag = (emit(inst, f, pieces) for f in pair)
    sched = with_header(overlapped(rs, ag, inst.collective.chunks_per_node), inst)
    assert verify(sched, inst) is None
    return cost_models.price(sched, inst, "event").total_s


def test_two_boxes_at_16_mb_event_is_at_or_below_the_pair_priced_directly():
    """Two boxes of two GPUs, 16 MB, ``objective=event``, the halves' one packed tree a shard
    picked at 400 pieces each (as the latency choice's event estimate, falling with pieces,
    picks many): the choice's kept price is at or below the same pair priced directly at 25, 50
    and 100 pieces a half (at 400 it is about twice those: a reduction's sends leave its links in
    program order, a latency a step). The old choice kept the pair at 400 pieces."""
    inst = make_instance(_boxes(2, 2e-6, 5e-6), "allreduce", message_bytes=2 ** 24)
    pair = [forests.forest(inst, "allgather", t, None, False, 1) for t in (True, False)]
    kept = incumbent.Kept(("event",))
    options = Options(params={"objective": "event"})
    chosen, depths, record, note = joint.choose_halves(inst, options, pair, [(f, 400, None) for f in pair],
                                                       2e-6, None, kept)
    direct = {q: _direct_event(inst, pair, q) for q in (25, 50, 100)}
    assert kept.prices["event"] <= min(direct.values()) * (1 + 1e-9), (kept.prices, direct, record)
    assert max(kept.pieces) < 400 and "fewer_pieces" in record


def test_a_pair_over_the_probes_budget_is_priced_from_few_pieces_within_it(monkeypatch):
    """The joint choice left its pair unpriced (over the probes' budget, here lowered to the
    sends of 100 pieces a half): no pair over the budget is priced, the search starts at 800 /
    ``FIRST_CUT`` = 25 pieces a half and doubles while that lowers the price; the kept price is
    at or below the pair priced directly at 50 and at 100 pieces a half."""
    from collsynth.solvers.packing import overlap
    from collsynth.solvers.packing.trees import hops_of

    inst = make_instance(_boxes(2, 2e-6, 5e-6), "allreduce", message_bytes=2 ** 24)
    pair = [forests.forest(inst, "allgather", t, None, False, 1) for t in (True, False)]
    c = inst.collective.chunks_per_node
    budget = sum(hops_of(f.trees) * 100 * c for f in pair)
    monkeypatch.setattr(overlap, "PROBE_SENDS", budget)
    kept = incumbent.Kept(("event",))
    record = {"chosen": "as picked", "priced": {}, "chosen_pieces": [800, 800]}
    depths = joint.fewer_pieces(inst, pair, [800, 800], record, ("event",), None, kept)
    assert list(record["fewer_pieces"])[0] == "25/25" and joint.FIRST_CUT == 32
    assert all(sum(hops_of(f.trees) * int(q) * c for f, q in zip(pair, k.split("/"))) <= budget
               for k in record["fewer_pieces"])
    assert depths == kept.pieces and max(depths) <= 100
    assert kept.prices["event"] <= min(_direct_event(inst, pair, q) for q in (50, 100)) * (1 + 1e-9)


def _by_hand(pair_a, pair_b, calls: list):
    """Stand-in prices of the overlapped pair (``event``, seconds, by hand) as a function of the
    halves' pieces ``q``: pair A ``1 + |log2(q / 100)| / 20`` (least 1.0 at 100), pair B ``0.9 +
    |log2(q / 25)| / 10`` (least 0.9 at 25); each offered to the run's ``kept`` as the real
    pricing does, each call listed."""
    import math

    def price(instance, pair, pieces, models, kept):
        q = max(pieces)
        a = all(f is g for f, g in zip(pair, pair_a))
        got = {"event": 1 + abs(math.log2(q / 100)) / 20 if a else 0.9 + abs(math.log2(q / 25)) / 10}
        calls.append(("A" if a else "B", list(pieces)))
        kept.offer(pair, pieces, object(), got, 1, 0.0, 0.0)
        return got
    return price


def test_every_pair_of_the_joint_choice_is_priced_at_fewer_pieces_not_only_the_chosen(monkeypatch):
    """The joint choice priced pair A at 1.1 and pair B at 1.3 at the halves' 400 pieces and took
    A (stand-in prices, :func:`_by_hand`). Only A priced at fewer pieces (the old code) is 1.0 at
    100; B, searched about A's 100, falls to 0.9 at 25: B at 25 pieces is returned and kept,
    though the joint choice ranked it last at 400."""
    from collsynth.solvers.packing import equal_depth, overlap

    inst = make_instance(_boxes(2, 2e-6, 5e-6), "allreduce", message_bytes=2 ** 24)
    a = [forests.forest(inst, "allgather", t, None, False, 1) for t in (True, False)]
    b = [forests.forest(inst, "allgather", t, None, False, 2) for t in (True, False)]
    calls: list = []
    price = _by_hand(a, b, calls)

    def choice(instance, halves, depths, alpha, options, deadline, kept, early=None):  # as overlap.joint records it
        got = {"as picked": price(instance, a, depths, ("event",), kept), "B": price(instance, b, depths, ("event",), kept)}
        return list(a), {"chosen": "as picked", "chosen_pieces": list(depths), "probe_pieces": list(depths),
                         "priced": got, "_pairs": {"as picked": tuple(a), "B": tuple(b)}}

    monkeypatch.setattr(joint, "certified_price", price)
    monkeypatch.setattr(joint, "joint_choice", choice)
    monkeypatch.setattr(equal_depth, "prefer", lambda instance, chosen, depths, *rest: (chosen, depths, {}))
    kept = incumbent.Kept(("event",))
    chosen, depths, record, note = joint.choose_halves(inst, Options(params={"objective": "event"}), a,
                                                       [(f, 400, None) for f in a], 2e-6, None, kept)
    assert [f is g for f, g in zip(chosen, b)] == [True, True] and depths == [25, 25], (record, calls)
    assert kept.prices["event"] == 0.9 and kept.pieces == [25, 25]
    assert "_pairs" not in record and getattr(overlap, "PAIRS", "_pairs") == "_pairs"
    assert record["chosen"] == "B at 25/25 pieces" and record["fewer_pieces_others"]["B"]["25/25"] == 0.9
    assert ("B", [12, 12]) in calls and ("B", [200, 200]) not in calls  # searched down from 100, stopped at 12


def test_two_boxes_every_candidate_emitted_is_at_or_above_the_kept_price():
    """Two boxes of two GPUs, 64 MB, ``objective=event``, the halves picked at 200 pieces (the
    joint choice's candidates: the picked and packed forests and one packed tree a shard): the
    kept price is at or below every pair of forests the choice compares (the optimum's and one
    tree a shard for each half), each overlapped, emitted, verified and priced directly here at
    the pieces the choice kept and at their halving and doubling."""
    inst = make_instance(_boxes(2, 2e-6, 5e-6), "allreduce", message_bytes=2 ** 26)
    packed = [forests.forest(inst, "allgather", t) for t in (True, False)]
    ones = [forests.forest(inst, "allgather", t, None, False, 1) for t in (True, False)]
    kept = incumbent.Kept(("event",))
    options = Options(params={"objective": "event"})
    chosen, depths, record, note = joint.choose_halves(inst, options, packed, [(f, 200, None) for f in packed],
                                                       2e-6, None, kept)
    assert kept.holds(chosen, depths) and not note
    p = max(depths)
    for rs in (packed[0], ones[0]):
        for ag in (packed[1], ones[1]):
            for q in {max(1, p // 2), p, 2 * p}:
                assert kept.prices["event"] <= _direct_event(inst, [rs, ag], q) * (1 + 1e-9), (rs.k, ag.k, q, record)


def test_the_joint_choice_hands_on_every_candidate_pair_priced_or_not():
    """At the halves' pieces no pair fits the probes' budget (stand-in sends over it: A100 x2,
    64 MB, ``objective=event``, 13 trees a shard at 1,600 pieces a half), so none is priced; the
    record still lists the four pairs (each half's forest and one packed tree a shard) for the
    search at fewer pieces, which the old record (priced pairs alone) left empty."""
    from types import SimpleNamespace

    from collsynth.solvers.packing import overlap

    halves = [[SimpleNamespace(k=13, name="rs", shape="two-level")], [SimpleNamespace(k=13, name="ag", shape="two-level")]]
    ones = [SimpleNamespace(k=1, name="rs1", shape="two-level"), SimpleNamespace(k=1, name="ag1", shape="two-level")]
    priced: list = []
    pair, record = overlap.joint(halves, [1600, 1600], 2e-6, lambda i: ones[i],
                                 lambda p, q: priced.append(p), lambda f, p: overlap.PROBE_SENDS + 1, ("event",))
    assert not priced and not record["priced"]
    assert sorted((a.name, b.name) for a, b in record[overlap.PAIRS].values()) == [
        ("rs", "ag"), ("rs", "ag1"), ("rs1", "ag"), ("rs1", "ag1")]
