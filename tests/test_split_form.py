"""The capacity split's allreduce kept as trees plus the pipeline rule (solvers/packing/split_form.py,
tens/pipelined_allreduce.py with a ``delay``): on DGX-2 pairs in miniature (two switches, odd GPUs
linked to the other chassis' even ones) the form at its least valid delay lists exactly the sends
the explicit path emits (overlap.overlapped of the emitted halves), and at delays around it gets the
explicit verifier's verdict and the explicit sends' sync and event prices (too early: both reject);
the delay taken is the one of least summed price among the candidates, found by pricing each
candidate's explicit sends; the run keeps the split as trees by default and lists the same sends on
request; the former ``overlapped-allreduce`` data reads back as the same schedule."""

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collsynth import InputError
from collsynth.instances.instance import make_instance
from collsynth.instances.topology import from_edges
from collsynth.limits import TooBig
from collsynth.solvers import pipeline
from collsynth.solvers.packing import emission, joint, overlap, producer, split_form
from collsynth.solvers.producers import Options
from collsynth.tens import allreduce_overlap, cost_models, pipelined_allreduce, pipelined_event, pipelined_trees, verify
from collsynth.tens.pipelined_allreduce import PipelinedAllreduce

COLUMNS = ("chunk", "lo", "hi", "src", "dst", "step", "op")
_PAIRS: dict = {}


def two_chassis(g: int, cross: float, alpha: float):
    """Two switches of ``g`` GPUs (1 byte/s each way), odd GPU ``2k+1`` of a chassis linked at
    ``cross`` byte/s to even GPU ``2k`` of the other, every link of latency ``alpha``."""
    n, edges = 2 * g, []
    for v in range(2 * g):
        s = n + v // g
        edges += [(v, s, {"bandwidth": 1.0, "alpha": alpha}), (s, v, {"bandwidth": 1.0, "alpha": alpha})]
    edges += [(c * g + 2 * k + 1, (1 - c) * g + 2 * k, {"bandwidth": cross, "alpha": alpha})
              for c in range(2) for k in range(g // 2)]
    return from_edges(n + 2, edges, switches=[n, n + 1])


def split_pair(g: int, cross: float, alpha: float):
    """The instance (8 MB allreduce) and the producer's split pair on it (cached; the split beats
    the halves in sequence on each miniature drawn)."""
    key = (g, cross, alpha)
    if key not in _PAIRS:
        inst = make_instance(two_chassis(g, cross, alpha), "allreduce", message_bytes=8e6)
        forests = [producer.forest(inst, kind, t) for kind, t in producer.plan("allreduce")]
        # the greedy packing: the explicit path of overlap.overlapped emits its trees (the translated
        # trees are checked against their own expansion in tests/test_split_translated.py)
        [pair] = joint.split_pair(inst, forests, Options(params={"shape": "greedy"})).values()
        _PAIRS[key] = inst, pair
    return _PAIRS[key]


def same_sends(a, b) -> bool:
    return (all(np.array_equal(getattr(a, c), getattr(b, c)) for c in COLUMNS) and a.denom == b.denom
            and a.meta == b.meta and a.link_order == b.link_order and a.chunks == b.chunks)


def explicit(f, inst):
    """``f``'s expansion with the producer's header for explicit sends."""
    return emission.with_header(pipelined_allreduce.expand(f), inst)


def least(inst, pair, pieces) -> PipelinedAllreduce:
    """The split pair at its least valid delay, in the placement that has the smaller one."""
    return split_form.candidates(*split_form._halves(inst, pair, list(pieces), producer.pipelined))[0]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=st.sampled_from([(4, 0.5), (4, 1.0), (6, 1.0), (8, 0.25)]), alpha=st.sampled_from([0.0, 0.3]),
       pieces=st.tuples(st.integers(1, 5), st.integers(1, 5)), moved=st.integers(-2, 2))
def test_the_form_verifies_and_prices_as_its_explicit_sends(shape, alpha, pieces, moved):
    inst, pair = split_pair(*shape, alpha)
    f = least(inst, pair, pieces)
    rs, ag = (producer.emit(inst, h, p) for h, p in zip(pair, pieces))
    emitted = emission.with_header(overlap.overlapped(rs, ag, inst.collective.chunks_per_node), inst)
    assert same_sends(explicit(f, inst), emitted) and f.sends == len(emitted) and emitted.link_order == "program"
    assert pipelined_allreduce.verify(f, inst) is None and verify.verify(emitted, inst) is None
    g_ = replace(f, delay=f.delay + moved)
    sched = explicit(g_, inst)
    why, explicit_why = pipelined_allreduce.verify(g_, inst), verify.verify(sched, inst)
    assert (why is None) == (explicit_why is None) == (moved >= 0)
    if why is None:
        want = cost_models.price(sched, inst, "sync")
        got = pipelined_allreduce.price_sync(g_, inst)
        assert got.steps == want.steps
        assert got.T_L_s == pytest.approx(want.T_L_s, rel=1e-12)
        assert got.T_B_s == pytest.approx(want.T_B_s, rel=1e-12)
        assert pipelined_event.price(g_, inst, as_explicit=True).total_s == cost_models.price(sched, inst,
                                                                                               "event").total_s


def test_the_other_placement_and_a_broken_half_are_judged_as_explicit_sends():
    """The pieces placed the other way in each chunk, at that placement's least delay, verify
    both ways, one step less do not; a hop moved off the links is refused both ways."""
    inst, pair = split_pair(4, 0.5, 0.0)
    f = least(inst, pair, [3, 3])
    other = not f.mirror
    g = PipelinedAllreduce(*f.halves, allreduce_overlap.least_delay(*f.halves, other), other)
    assert pipelined_allreduce.verify(g, inst) is None and verify.verify(explicit(g, inst), inst) is None
    early = replace(g, delay=g.delay - 1)
    assert pipelined_allreduce.verify(early, inst) is not None
    assert verify.verify(explicit(early, inst), inst) is not None
    dst = f.allgather.dst.copy()
    dst[0] = f.allgather.src[0]  # a hop onto its own source: no link
    broken = replace(f, allgather=replace(f.allgather, dst=dst))
    assert "allgather half" in pipelined_allreduce.verify(broken, inst)
    assert verify.verify(explicit(broken, inst), inst) is not None


def _summed(f, inst, models) -> float:
    sched = explicit(f, inst)
    return sum(cost_models.price(sched, inst, m).total_s for m in models)


@pytest.mark.parametrize("models", [("sync", "event"), ("sync",)])
def test_the_delay_taken_is_the_least_priced_candidate(models):
    """8 GPUs, cross links at 1/4 byte/s, 3 pieces: the candidates are the least valid delay
    of each placement and the 3 after it. Priced as explicit sends, one step after the least
    delay (mirrored) prices lower under ``sync`` (44.06e6 against 44.78e6 s) and the same
    under ``event`` (the allgather's sends wait for the same arrivals): that one is taken, under
    ``sync`` + ``event`` and under ``sync`` alone, and it is the least summed price of every
    candidate; its prices are the explicit sends'."""
    inst, pair = split_pair(8, 0.25, 0.0)
    halves = split_form._halves(inst, pair, [3, 3], producer.pipelined)
    forms = split_form.candidates(*halves)
    assert {(f.delay, f.mirror) for f in forms} == {(11, True), (12, True), (13, True), (13, False)}
    summed = [_summed(f, inst, models) for f in forms]
    got, costs = split_form.placed(*halves, inst, models, unequal=False)  # the delay among equal pieces
    assert (got.delay, got.mirror) == (12, True) == (forms[int(np.argmin(summed))].delay, True)
    assert sum(costs[m].total_s for m in models) == pytest.approx(min(summed), rel=1e-12)
    assert _summed(forms[0], inst, ("sync",)) == pytest.approx(44.778e6, rel=1e-4)
    assert _summed(got, inst, ("sync",)) == pytest.approx(44.056e6, rel=1e-4)


def test_a_later_delay_priced_higher_under_sync_is_not_simulated(monkeypatch):
    """Four GPUs a chassis at 3 pieces: every later delay prices higher under ``sync`` than the
    least (26.13e6 s), so only the least is simulated under ``event`` and taken."""
    inst, pair = split_pair(4, 0.5, 0.0)
    halves = split_form._halves(inst, pair, [3, 3], producer.pipelined)
    forms = split_form.candidates(*halves)
    simulated = []
    real = pipelined_event.price
    monkeypatch.setattr(pipelined_event, "price", lambda f, *a, **k: simulated.append(f.delay) or real(f, *a, **k))
    got, _ = split_form.placed(*halves, inst, ("sync", "event"), unequal=False)
    assert simulated == [forms[0].delay] and got == forms[0]
    assert _summed(forms[0], inst, ("sync",)) == pytest.approx(26.133e6, rel=1e-4)
    assert all(_summed(f, inst, ("sync",)) > 26.134e6 for f in forms[1:])


def test_the_run_keeps_the_split_as_trees_and_lists_it_on_request(tmp_path, monkeypatch):
    """The miniature (8 GPUs, 8 MB; by hand RS+AG 14e6 s, the partition bound 11.2e6 s,
    tests/test_capacity_split.py): the run picks the split, kept as trees, verified there and
    priced under sync from them and under event from its expansion, between the bound and
    RS+AG; with ``form=explicit`` the same sends, the same prices; written and read back, the
    same form; with ``pieces`` set, the split at those pieces, as trees (pieces under a byte
    refused, naming the field, and pieces beyond the memory budget). Each half's own depth is
    set at 8 pieces (the fill's search, which prices the halves in sequence deep, is not what is
    tested here)."""
    monkeypatch.setattr(producer, "pick", lambda inst, f, parts, alpha, options, *a:
                        (f, options.params.get("pieces") or 8, None))
    inst, pair = split_pair(4, 0.5, 0.0)
    row, trees = pipeline.run(inst, "tree-packing", Options(time_limit=300))
    assert isinstance(trees, PipelinedAllreduce) and trees.delay is not None and row["verified"]
    assert row["extra"]["joint_choice"]["chosen"].startswith(producer.SPLIT_PAIR)
    sched = explicit(trees, inst)
    for model in ("sync", "event"):
        assert row[f"time_{model}_s"] == pytest.approx(cost_models.price(sched, inst, model).total_s, rel=1e-12)
        assert 11.2e6 <= row[f"time_{model}_s"] < 14e6
    row2, listed = pipeline.run(inst, "tree-packing", Options(time_limit=300, params={"form": "explicit"}))
    assert row2["verified"] and same_sends(listed, sched)
    assert (row2["time_sync_s"], row2["time_event_s"]) == pytest.approx((row["time_sync_s"], row["time_event_s"]))
    row3, trees3 = pipeline.run(inst, "tree-packing", Options(time_limit=300, params={"pieces": 5}))
    assert isinstance(trees3, PipelinedAllreduce) and row3["verified"] and trees3.pieces == (5, 5)
    tiny = make_instance(inst.topology, "allreduce", message_bytes=64)  # 8 B a chunk in 4 pieces: under a byte
    with pytest.raises(InputError, match="collective.message_bytes"):
        split_form.returned(tiny, pair, [4, 4], producer.pipelined)
    with pytest.raises(TooBig, match="--param pieces"):  # placed without listing, but not beyond memory
        split_form.returned(inst, pair, [10 ** 7] * 2, producer.pipelined)
    path = tmp_path / "split.json"
    pipelined_allreduce.write_json(trees, path)
    back = pipelined_allreduce.from_json(json.loads(path.read_text()))
    assert same_sends(explicit(back, inst), sched)


def test_the_former_form_reads_as_the_same_schedule():
    """Data of the former ``overlapped-allreduce`` form (the allgather ``shift`` steps from
    following the reduce-scatter's last step) reads as the delay the reduce-scatter's steps plus
    the shift: 3 pieces and 4 hops deep (the reduce-scatter's 13 steps), shift -2 is delay 11,
    the same sends as the form at delay 11; a mistyped shift is one line naming the fields."""
    inst, pair = split_pair(4, 0.5, 0.0)
    f = least(inst, pair, [3, 3])
    assert allreduce_overlap.last_step(f.reduce_scatter) == 13 and f.delay == 11
    old = {"form": "overlapped-allreduce", "reduce_scatter": pipelined_trees.to_json(f.reduce_scatter),
           "allgather": pipelined_trees.to_json(f.allgather), "shift": -2, "mirror": f.mirror}
    back = pipelined_allreduce.from_json(json.loads(json.dumps(old)))
    assert (back.delay, back.mirror) == (11, f.mirror) and same_sends(explicit(back, inst), explicit(f, inst))
    with pytest.raises(InputError, match="shift, mirror: expected an integer"):
        pipelined_allreduce.from_json({**old, "shift": 1.5})
    with pytest.raises(InputError, match="form: expected"):
        pipelined_allreduce.from_json({**old, "form": "overlapped"})


def test_an_expansion_beyond_the_memory_budget_is_not_simulated(monkeypatch):
    """The split kept as trees needs its expansion only for ``event``: where that would exceed
    the memory budget (768 B a send) the pipeline is told it cannot fit (it leaves ``event``
    unpriced and says so) rather than listing it, and the delay is chosen under ``sync`` alone;
    within the budget, its sends."""
    inst, pair = split_pair(4, 0.5, 0.0)
    f = least(inst, pair, [3, 3])
    assert pipelined_event.sends_priced(f, inst) == f.sends
    monkeypatch.setattr(pipelined_event, "memory_budget", lambda: (768 * f.sends - 1, "a test budget"))
    assert pipelined_event.sends_priced(f, inst) > 10 ** 18
    got, costs = split_form.placed(*f.halves, inst, ("sync", "event"))
    assert set(costs) == {"sync"}


def _star_trees(kind: str, multicast: bool):
    """Three GPUs behind one switch (node 3), a tree per root in two pieces: two routes through
    the switch, or (``multicast``) one arrival at the switch forwarded to both other GPUs."""
    from collsynth.tens.pipelined_trees import PipelinedTrees

    hops, ptr = [], [0]
    for r in range(3):
        a, b = [v for v in range(3) if v != r]
        hops += [(r, 3, 0), (3, a, 1), (3, b, 1)] if multicast else [(r, 3, 0), (3, a, 1), (r, 3, 0), (3, b, 1)]
        ptr.append(len(hops))
    src, dst, before = map(np.array, zip(*hops))
    return PipelinedTrees(kind, 4, 4, 1, 2, 1, np.arange(3), np.zeros(3, int), np.ones(3, int), np.array(ptr), src,
                          dst, before)


@pytest.mark.parametrize("delay", [None, 3])
def test_a_switch_copying_in_the_allgather_is_refused_as_the_header_declares(delay):
    """An allreduce through a switch: the expansion's header says a switch forwards one arrival
    per send (``switch_copy`` false), so an allgather half whose switch sends one arrival to two
    GPUs is refused by the form as by the explicit verifier; two routes through the switch
    verify both ways (in turn, and overlapped at delay 3: a reduction completes in step 3 at the
    latest, 2 hops and 2 pieces)."""
    from collsynth.instances.generators import build

    inst = make_instance(build("switch", {"nodes": 3, "unwind": 0}), "allreduce", message_bytes=3e6)
    rs = _star_trees("reduce_scatter", False)
    for multicast in (False, True):
        f = PipelinedAllreduce(rs, _star_trees("allgather", multicast), delay)
        why, explicit_why = pipelined_allreduce.verify(f, inst), verify.verify(explicit(f, inst), inst)
        assert (why is None) == (explicit_why is None) == (not multicast), (why, explicit_why)
    assert "does not copy" in pipelined_allreduce.verify(PipelinedAllreduce(rs, _star_trees("allgather", True)), inst)
