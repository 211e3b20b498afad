"""An allreduce at alpha 0 whose joint choice can price nothing (every pair of forests over the
probes' send budget, solvers/packing/overlap.py, ``choose``) is not left at the pieces its halves
get when they share the fill's send budget: each half takes the pieces it picks alone where both
fit the memory and the time left (solvers/packing/joint.py, ``halves_alone``). ForestColl's MI250
x3 (48 GPUs, ring trees 17 hops deep) was 1.0139x the bound under ``sync`` at 555 pieces a half
against 1.0069x for each half alone at 1,111. Here a small send budget stands in for the size:
two boxes of two GPUs, the fill's budget small enough that sharing it halves each half's pieces."""

from __future__ import annotations

from collsynth.instances.instance import make_instance
from collsynth.solvers.packing import emission, forests, incumbent, overlap, pieces_choice, producer
from collsynth.solvers.packing.packed import plan
from collsynth.solvers.packing.trees import hops_of
from collsynth.solvers.producers import Options
from collsynth.tens import certified
from collsynth.tens.pipelined_trees import price_sync

from test_fixed_depth_candidate import _boxes


def _small_budgets(monkeypatch):
    monkeypatch.setattr(overlap, "PROBE_SENDS", 0)  # nothing of the joint choice priced
    monkeypatch.setattr(emission, "SEND_BUDGET", 200)
    monkeypatch.setattr(pieces_choice, "FILL_SENDS", 400)


def _two_boxes_alone(monkeypatch):
    """The stand-in budgets, an allreduce on two boxes of two GPUs, its packed halves and each
    half as picked alone (``pick`` with ``parts`` 1)."""
    _small_budgets(monkeypatch)
    inst = make_instance(_boxes(2, 0.0, 0.0), "allreduce", message_bytes=2 ** 24)
    options = Options(time_limit=3600)
    packed = [forests.forest(inst, kind, transposed) for kind, transposed in plan("allreduce")]
    return inst, options, packed, [pieces_choice.pick(inst, f, 1, 0.0, options) for f in packed]


def test_unpriced_joint_choice_takes_the_halves_pieces_alone(monkeypatch):
    """The allreduce's forests are emitted at each half's pieces alone (``pick`` with ``parts``
    1), more than the shared budget's, and its ``sync`` price is at most the two halves alone
    in turn (each priced in its trees form at its pieces alone); the old run kept the shared
    budget's pieces, about twice the fill."""
    inst, options, packed, alone = _two_boxes_alone(monkeypatch)
    shared = [pieces_choice.pick(inst, f, 2, 0.0, options)[1] for f in packed]
    assert [a[1] for a in alone] > shared  # the stand-in budget binds
    out = producer.run(inst, options)
    assert [f["pieces"] for f in out.extra["forests"]] == [a[1] for a in alone]  # the old run: the shared pieces
    record = out.extra["joint_choice"]
    assert record["priced"] == {} and record["halves_alone"]["taken"], record
    verdict = out.certified or certified.certify(out.schedule, inst)
    assert verdict is not None  # verified
    halves = sum(price_sync(emission.pipelined(inst, f, p), inst).total_s for f, p, _ in alone)
    assert verdict.price("sync").total_s <= halves * (1 + 1e-9)



def test_halves_alone_cut_to_what_fits_the_time_left(monkeypatch):
    """Where the halves at their pieces alone would not fit the time left (a stand-in for the
    kept schedule's measured rate: only up to 10 pieces a half fit), the allreduce takes the most
    of them cut by 17/20 at a time that fit (12 -> 10), not the shared budget's 6."""
    inst, options, packed, alone = _two_boxes_alone(monkeypatch)
    c = inst.collective.chunks_per_node
    shared = [pieces_choice.pick(inst, f, 2, 0.0, options)[1] for f in packed]
    assert [a[1] for a in alone] == [12, 12] and shared == [6, 6]  # the stand-in budgets' pieces
    most = sum(hops_of(f.trees) * 10 * c for f, _, _ in alone)
    monkeypatch.setattr(incumbent.Kept, "fits", lambda self, sends, deadline: self.schedule is None or sends <= most)
    out = producer.run(inst, options)
    assert [f["pieces"] for f in out.extra["forests"]] == [10, 10]
    assert out.extra["joint_choice"]["halves_alone"]["taken_at"] == [10, 10]
    assert (out.certified or certified.certify(out.schedule, inst)) is not None  # verified


def test_halves_alone_fit_a_budget_at_the_measured_bytes_of_a_tree_send(monkeypatch):
    """The memory check of the halves' sends reads what a send of expanded trees costs at peak
    (``BYTES_PER_TREE_SEND``, measured), not the generic schedule's 768 bytes: a budget of 300
    bytes a send of the halves alone takes them (MI250 x3's 2 x 1,111 pieces, 64 M sends: 49 GB
    at 768 bytes, 16 GB at 256, on a 25 GB machine), which 768 bytes a send would not."""
    inst, options, packed, alone = _two_boxes_alone(monkeypatch)
    c = inst.collective.chunks_per_node
    sends = sum(hops_of(f.trees) * p * c for f, p, _ in alone)
    monkeypatch.setattr(emission, "memory_budget", lambda: (300 * sends, "a test budget"))
    out = producer.run(inst, options)
    assert out.extra["joint_choice"]["halves_alone"]["taken"], out.extra["joint_choice"]
    assert [f["pieces"] for f in out.extra["forests"]] == [a[1] for a in alone]
    assert (out.certified or certified.certify(out.schedule, inst)) is not None  # verified
