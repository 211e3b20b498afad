"""The capacity split's allreduce kept as trees plus the pipeline rule (tens/pipelined_overlap.py,
solvers/packing/split_form.py): on DGX-2 pairs in miniature (two switches, odd GPUs linked to the
other chassis' even ones) the form lists exactly the sends the explicit path emits
(overlap.overlapped of the emitted halves), and gets the explicit verifier's verdict and the
explicit sends' sync and event prices, for the least shift and for shifts around it (too early:
both reject); the run keeps the split as trees by default and as explicit sends on request."""

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
from collsynth.tens import cost_models, pipelined_event, verify
from collsynth.tens import pipelined_overlap as form

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
        [pair] = joint.split_pair(inst, forests, Options()).values()
        _PAIRS[key] = inst, pair
    return _PAIRS[key]


def same_sends(a, b) -> bool:
    return (all(np.array_equal(getattr(a, c), getattr(b, c)) for c in COLUMNS) and a.denom == b.denom
            and a.meta == b.meta and a.link_order == b.link_order and a.chunks == b.chunks)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=st.sampled_from([(4, 0.5), (4, 1.0), (6, 1.0), (8, 0.25)]), alpha=st.sampled_from([0.0, 0.3]),
       pieces=st.tuples(st.integers(1, 5), st.integers(1, 5)), moved=st.integers(-2, 2))
def test_the_form_verifies_and_prices_as_its_explicit_sends(shape, alpha, pieces, moved):
    inst, pair = split_pair(*shape, alpha)
    f = split_form.overlapped(inst, pair, list(pieces), producer.pipelined)
    rs, ag = (producer.emit(inst, h, p) for h, p in zip(pair, pieces))
    emitted = emission.with_header(overlap.overlapped(rs, ag, inst.collective.chunks_per_node), inst)
    assert same_sends(form.explicit(f, inst), emitted) and f.sends == len(emitted)
    assert form.verify(f, inst) is None and verify.verify(emitted, inst) is None
    g_ = replace(f, shift=f.shift + moved)
    sched = form.explicit(g_, inst)
    assert sched.num_steps == g_.num_steps
    why, explicit_why = form.verify(g_, inst), verify.verify(sched, inst)
    assert (why is None) == (explicit_why is None) == (moved >= 0)
    if why is None:
        want = cost_models.price(sched, inst, "sync")
        got = form.price_sync(g_, inst)
        assert got.steps == want.steps
        assert got.T_L_s == pytest.approx(want.T_L_s, rel=1e-12)
        assert got.T_B_s == pytest.approx(want.T_B_s, rel=1e-12)
        assert pipelined_event.price(g_, inst).total_s == cost_models.price(sched, inst, "event").total_s


def test_the_other_placement_and_a_broken_half_are_judged_as_explicit_sends():
    """The pieces placed the other way in each chunk, at that placement's least shift, verify
    both ways, one step less do not; a hop moved off the links is refused both ways."""
    inst, pair = split_pair(4, 0.5, 0.0)
    f = split_form.overlapped(inst, pair, [3, 3], producer.pipelined)
    other = not f.mirror
    g = f.__class__(f.reduce_scatter, f.allgather, form.least_shift(f.reduce_scatter, f.allgather, other), other)
    assert form.verify(g, inst) is None and verify.verify(form.explicit(g, inst), inst) is None
    early = g.__class__(g.reduce_scatter, g.allgather, g.shift - 1, other)
    assert form.verify(early, inst) is not None and verify.verify(form.explicit(early, inst), inst) is not None
    dst = f.allgather.dst.copy()
    dst[0] = f.allgather.src[0]  # a hop onto its own source: no link
    broken = replace(f, allgather=replace(f.allgather, dst=dst))
    assert "allgather half" in form.verify(broken, inst)
    assert verify.verify(form.explicit(broken, inst), inst) is not None


def test_the_run_keeps_the_split_as_trees_and_lists_it_on_request(tmp_path, monkeypatch):
    """The miniature (8 GPUs, 8 MB; by hand RS+AG 14e6 s, the partition bound 11.2e6 s,
    tests/test_capacity_split.py): the run picks the split, kept as trees, verified there and
    priced under sync from them and under event from its expansion, between the bound and
    RS+AG; with ``form=explicit`` the same pair is listed, the same prices; written and read
    back, the same form; with ``pieces`` set, the split at those pieces, as trees (pieces under
    a byte refused, naming the field, and pieces beyond the memory budget). Each half's
    own depth is set at 8 pieces (the fill's search, which prices the halves in sequence deep,
    is not what is tested here)."""
    monkeypatch.setattr(producer, "pick", lambda inst, f, parts, alpha, options, *a:
                        (f, options.params.get("pieces") or 8, None))
    inst, pair = split_pair(4, 0.5, 0.0)
    row, trees = pipeline.run(inst, "tree-packing", Options(time_limit=300))
    assert isinstance(trees, form.OverlappedAllreduce) and row["verified"]
    assert row["extra"]["joint_choice"]["chosen"].startswith(producer.SPLIT_PAIR)
    sched = form.explicit(trees, inst)
    for model in ("sync", "event"):
        assert row[f"time_{model}_s"] == pytest.approx(cost_models.price(sched, inst, model).total_s, rel=1e-12)
        assert 11.2e6 <= row[f"time_{model}_s"] < 14e6
    row2, listed = pipeline.run(inst, "tree-packing", Options(time_limit=300, params={"form": "explicit"}))
    assert row2["verified"] and same_sends(listed, sched)
    assert (row2["time_sync_s"], row2["time_event_s"]) == pytest.approx((row["time_sync_s"], row["time_event_s"]))
    row3, trees3 = pipeline.run(inst, "tree-packing", Options(time_limit=300, params={"pieces": 5}))
    assert isinstance(trees3, form.OverlappedAllreduce) and row3["verified"] and trees3.pieces == (5, 5)
    tiny = make_instance(inst.topology, "allreduce", message_bytes=64)  # 8 B a chunk in 4 pieces: under a byte
    with pytest.raises(InputError, match="collective.message_bytes"):
        split_form.returned(tiny, pair, [4, 4], producer.pipelined)
    with pytest.raises(TooBig, match="--param pieces"):  # placed without listing, but not beyond memory
        split_form.returned(inst, pair, [10 ** 7] * 2, producer.pipelined)
    path = tmp_path / "split.json"
    form.write_json(trees, path)
    back = form.from_json(json.loads(path.read_text()))
    assert same_sends(form.explicit(back, inst), sched)


def test_an_expansion_beyond_the_memory_budget_is_not_simulated(monkeypatch):
    """The split kept as trees needs its expansion only for ``event``: where that would exceed
    the memory budget (768 B a send) the pipeline is told it cannot fit (it leaves ``event``
    unpriced and says so) rather than listing it; within the budget, its sends."""
    inst, pair = split_pair(4, 0.5, 0.0)
    f = split_form.overlapped(inst, pair, [3, 3], producer.pipelined)
    assert pipelined_event.sends_priced(f, inst) == f.sends
    monkeypatch.setattr(pipelined_event, "memory_budget", lambda: (768 * f.sends - 1, "a test budget"))
    assert pipelined_event.sends_priced(f, inst) > 10 ** 18
