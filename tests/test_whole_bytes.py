"""A choice among candidates never picks one whose pieces hold under a byte (which the
producer then refuses, :func:`collsynth.solvers.packing.emission.refuse_small_pieces`).

Regression: an allreduce of 160 B on ForestColl's two A100 boxes (16 GPUs, 10 B a shard, its
latencies) was refused (``collective.message_bytes: ... pieces of 0.769 B``) while 24 B was
solved: at a tiny message the candidate pairs price within a picosecond of each other, and the
joint choice picked one with the allgather on the optimum's 13 trees a shard (10 / 13 B a
piece) over one tree a shard (10 B). Now such candidates are not priced, so not chosen."""

from __future__ import annotations

from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.solvers.packing import joint, latency_choice
from collsynth.solvers.packing.emission import emit, smallest_piece, whole_bytes
from collsynth.solvers.packing.forests import forest
from collsynth.solvers.packing.packed import part_instance, plan

MODELS = ("sync", "event")


def _star_allreduce(message_bytes: float):
    """Four GPUs on one switch (1 GB/s, 1 us): an allreduce, 1 / 4 of the message a shard, one
    tree a shard each half (so ``q`` pieces hold ``message_bytes / 4 / q`` bytes)."""
    inst = make_instance(build("switch", {"nodes": 4}, bandwidth=1e9, alpha=1e-6), "allreduce",
                         message_bytes=message_bytes)
    return inst, [forest(inst, kind, transposed) for kind, transposed in plan("allreduce")]


def test_whole_bytes_by_hand():
    """8 B over 4 GPUs, one tree a shard: 2 pieces of 1 B hold whole bytes, 4 of 0.5 B do not;
    the smallest piece read off the trees is the emitted schedule's."""
    inst, pair = _star_allreduce(8.0)
    assert [f.k for f in pair] == [1, 1]
    part = part_instance(inst, pair[1])
    assert whole_bytes(emit(part, pair[1], 2), part)
    assert not whole_bytes(emit(part, pair[1], 4), part)
    for f in pair:
        part = part_instance(inst, f)
        for q in (1, 2, 3, 4):
            sched = emit(part, f, q)
            assert smallest_piece(part, f, q) == 2.0 / q == float(sched.size.min()) * part.collective.chunk_bytes


def test_the_joint_choice_does_not_price_pieces_under_a_byte():
    """The overlapped pair at 4 pieces a half (0.5 B) is not priced; at 2 (1 B) it is, both
    models positive."""
    inst, pair = _star_allreduce(8.0)
    assert joint.certified_price(inst, pair, [4, 4], MODELS, None) is None
    got = joint.certified_price(inst, pair, [2, 2], MODELS, None)
    assert got is not None and all(got[m] > 0 for m in MODELS)


def test_the_latency_choice_does_not_price_pieces_under_a_byte():
    """Of the allgather half at 4, 2 and 1 pieces, the 4 (0.5 B a piece) is not priced (counted
    as under a byte); the 2 and the 1 are."""
    inst, pair = _star_allreduce(8.0)
    part = part_instance(inst, pair[1])
    record = {"unverified": 0, "below_floor": 0}
    prices = latency_choice._price_pairs(part, [pair[1]], [(0, 4), (0, 2), (0, 1)], MODELS, record, None)
    assert sorted(prices) == [(0, 1), (0, 2)]
    assert record["under_a_byte"] == 1 and record["unverified"] == 0
