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


def test_a_pair_over_the_probes_budget_is_priced_from_the_first_halving_within_it(monkeypatch):
    """The joint choice left its pair unpriced (over the probes' budget, here lowered to the
    sends of 100 pieces a half): no pair over the budget is priced, the first halving within it
    is, and the halving goes on while it lowers the price; the kept price is at or below the
    pair priced directly at 50 pieces a half."""
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
    assert list(record["fewer_pieces"])[0] == "100/100"
    assert all(sum(hops_of(f.trees) * int(q) * c for f, q in zip(pair, k.split("/"))) <= budget
               for k in record["fewer_pieces"])
    assert depths == kept.pieces and max(depths) <= 100
    assert kept.prices["event"] <= _direct_event(inst, pair, 50) * (1 + 1e-9)
