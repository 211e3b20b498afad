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
