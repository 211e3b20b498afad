"""An allreduce kept as trees takes a pipeline depth whose ``event`` price tracks exact
dependency pairs (``collsynth.solvers.packing.allreduce_depth``):

- where the pairs fit at the halves' ``sync`` depths (DGX H100 x2), those depths are kept;
- where they do not (the pairs' budget made tiny), the depth is lowered until they do, and the
  trees at that depth verify and price under ``event`` with exact pairs;
- ``--param pieces`` is left as given;
- the depth's ``event`` price is simulated once, and each overlapped candidate's once: the
  pipeline takes the producer's price of the trees it returned once they have verified.
"""

from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.solvers.packing import allreduce_depth
from collsynth.solvers.packing.producer import run_compact
from collsynth.solvers.producers import Options
from collsynth.tens import pipelined_allreduce, pipelined_event


def _allreduce():
    return make_instance(build("dgx_h100", {"nodes": 2}), "allreduce", message_bytes=1 << 26)


def test_the_sync_depths_are_kept_where_the_pairs_fit():
    inst = _allreduce()
    out = run_compact(inst, Options(time_limit=120))
    tried = out.extra["event_exact_depth"]
    assert len(tried) == 1 and tried[0][1] is True
    assert out.extra["overlap_tried"][0][:2] == [tried[0][0], None]  # the halves in turn at that depth, then overlaps
    assert pipelined_event.price(out.schedule, inst).extra["exact_pairs"]


def test_the_depth_is_lowered_until_the_pairs_fit(monkeypatch):
    inst = _allreduce()
    deep = run_compact(inst, Options(time_limit=120, params={"pieces": 64})).schedule
    assert deep.pieces == (64, 64)  # as given: no depth search
    monkeypatch.setattr(pipelined_event, "pair_budget", lambda sends: 10_000)  # 64 pieces need more, 32 fewer
    monkeypatch.setattr(pipelined_event, "ORBIT_PAIR_BUDGET", 10_000)
    assert not pipelined_event.price(deep, inst).extra["exact_pairs"]
    shallow, note, cost = allreduce_depth.exact_depth(deep, inst)
    tried = note["event_exact_depth"]
    assert tried[0] == ["64/64", False]
    fit = [int(p.split("/")[0]) for p, exact in tried if exact]
    assert max(shallow.pieces) == max(fit) < 64  # the deepest tried that fits
    assert all(int(p.split("/")[0]) > max(fit) for p, exact in tried if not exact)
    assert pipelined_allreduce.verify(shallow, inst) is None
    again = pipelined_event.price(shallow, inst)
    assert again.extra["exact_pairs"] and cost.total_s == again.total_s


def test_the_depth_is_priced_under_event_once_and_reported_only_after_verification(monkeypatch):
    """Through the pipeline: the search prices the kept depth (one simulation where the pairs fit
    at once), the overlap step each candidate once; the row's ``event`` time is the kept trees'
    price, taken after the trees verified, not simulated again."""
    from collsynth.solvers import pipeline
    from collsynth.tens import compact_forms

    inst = _allreduce()
    calls, order = [], []
    real_price = pipelined_event.price
    form = compact_forms.form_of(run_compact(inst, Options(time_limit=120)).schedule)
    real_verify = form.verify

    def counted(f, instance, *args, **kw):
        calls.append(f), order.append("price")
        return real_price(f, instance, *args, **kw)

    def verified(f, instance):
        order.append("verify")
        return real_verify(f, instance)

    monkeypatch.setattr(pipelined_event, "price", counted)
    monkeypatch.setattr(form, "verify", verified)
    row, trees = pipeline.run(inst, "tree-packing", Options(time_limit=120, params={"form": "compact"}))
    assert row["verified"] and row["extra"]["priced_by_producer"] == ["event"]
    tried = row["extra"]["overlap_tried"]  # the halves in turn (the depth search's price), then each overlap
    assert len(calls) == len(tried) and any(c is trees for c in calls) and order == ["price"] * len(calls) + ["verify"]
    assert row["time_event_s"] == real_price(trees, inst).total_s


def test_a_depth_simulating_too_many_sends_is_not_priced(monkeypatch):
    """At 64/64 pieces the per-orbit simulation is more sends than the cap allows (set here to
    what 16/16 needs): that depth and every deeper rung count as not fitting without an event
    price, and the depth kept simulates at most the cap."""
    inst = _allreduce()
    deep = run_compact(inst, Options(time_limit=120, params={"pieces": 64})).schedule
    cap = pipelined_event.sends_priced(pipelined_allreduce.PipelinedAllreduce(
        *(allreduce_depth._at(h, inst, 1 / 4) for h in deep.halves)), inst)
    monkeypatch.setattr(allreduce_depth, "SIMULATED_SENDS", cap)
    priced = []
    real = pipelined_event.price
    monkeypatch.setattr(pipelined_event, "price", lambda f, i, *a: priced.append(f.pieces) or real(f, i, *a))
    shallow, note, cost = allreduce_depth.exact_depth(deep, inst)
    assert note["event_exact_depth"][:3] == [["64/64", False], ["48/48", False], ["32/32", False]]
    assert all(max(p) <= 16 for p in priced) and max(shallow.pieces) == 16
    assert pipelined_event.sends_priced(shallow, inst) <= cap and cost.extra["exact_pairs"]


def test_sync_is_priced_at_its_own_depths_whatever_the_event_depth(monkeypatch):
    """Where the ``event`` search lowers the depth (the cap set to what 16/16 needs),
    :func:`at_sync_depths` gives trees that verify and price under ``sync`` no more than the
    allreduce at any equal depth of 1-96 pieces, enumerated here, nor at the lowered depth;
    ``--param objective=sync`` returns those depths (and overlap) without searching ``event``."""
    from collsynth.solvers.packing.compact import at_pieces

    inst = _allreduce()
    deep = run_compact(inst, Options(time_limit=120, params={"pieces": 64})).schedule
    cap = pipelined_event.sends_priced(pipelined_allreduce.PipelinedAllreduce(
        *(allreduce_depth._at(h, inst, 1 / 4) for h in deep.halves)), inst)
    monkeypatch.setattr(allreduce_depth, "SIMULATED_SENDS", cap)
    shallow, _, _ = allreduce_depth.exact_depth(deep, inst)
    synced = allreduce_depth.at_sync_depths(shallow, inst)
    assert pipelined_allreduce.verify(synced, inst) is None
    got = pipelined_allreduce.price_sync(synced, inst).total_s
    every = [pipelined_allreduce.price_sync(pipelined_allreduce.PipelinedAllreduce(
        *(at_pieces(h, p) for h in deep.halves)), inst).total_s for p in range(1, 97)]
    assert got <= min(every) * (1 + 1e-12)
    assert got < pipelined_allreduce.price_sync(shallow, inst).total_s
    out = run_compact(inst, Options(time_limit=120, params={"objective": "sync"}))
    assert "event_exact_depth" not in out.extra
    again = allreduce_depth.at_sync_depths(out.schedule, inst)  # the run's own trees (``deep``'s may differ)
    assert (out.schedule.pieces, out.schedule.delay, out.schedule.mirror) == (again.pieces, again.delay, again.mirror)
