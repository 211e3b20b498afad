"""The capacity split with symmetric shares and translated trees (solvers/packing/capacity_split.py,
split_form.py; tens/pipelined_event.py per link orbit, event and event-inorder).

On DGX-2 pairs in miniature (two switches, odd GPUs linked to the other chassis' even ones) the
split's shares are equal along every link orbit of the box shifts, each half's cut optimum on its
share (max-flow, an independent method) is the split's time; each half's trees are grown for the
first box and moved by the shifts, and the form's ``event`` and ``event-inorder`` prices per link
orbit equal those of its explicit expansion priced send by send; the routed trees listed for the
forest send exactly the form's sends; pieces of unequal size (one sequence for both halves) verify
and price under ``sync`` as their expansion does, no higher than equal pieces."""

from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collsynth.instances.box_shift import box_shift
from collsynth.instances.instance import make_instance
from collsynth.solvers.packing import capacity_split, emission, joint, producer, split_form
from collsynth.solvers.producers import Options
from collsynth.tens import cost_models, pipelined_allreduce, pipelined_event, pipelined_trees
from collsynth.tens.cut_optimum import flow_net, optimum
from collsynth.tens.pipelined_trees import link_orbits
from test_split_form import two_chassis  # the same miniature: two switches joined by GPU pairs

_PAIRS: dict = {}
SHAPES = [(4, 1.0), (6, 1.0), (8, 0.25)]  # (GPUs a chassis, cross-link bandwidth); (4, 0.5) packs no translated trees


def translated_pair(g: int, cross: float, alpha: float):
    """The instance (8 MB allreduce) and the producer's split pair on it, translated (cached)."""
    key = (g, cross, alpha)
    if key not in _PAIRS:
        inst = make_instance(two_chassis(g, cross, alpha), "allreduce", message_bytes=8e6)
        forests = [producer.forest(inst, kind, t) for kind, t in producer.plan("allreduce")]
        [pair] = joint.split_pair(inst, forests, Options()).values()
        _PAIRS[key] = inst, pair
    return _PAIRS[key]


@pytest.mark.parametrize("g, cross", SHAPES)
def test_symmetric_shares_keep_the_split_s_time_and_give_translated_trees(g, cross):
    topo = two_chassis(g, cross, 0.0)
    s = capacity_split.split(topo, topo.npus)
    shift = box_shift(topo)
    group, _ = link_orbits(topo.link_arrays, shift.perms, shift.orders)
    links = list(zip(topo.link_arrays.src.tolist(), topo.link_arrays.dst.tolist()))
    for share in (s.reduce_scatter, s.allgather):
        per_orbit: dict = {}
        for e, o in zip(links, group.tolist()):
            per_orbit.setdefault(o, set()).add(share[e])
        assert all(len(v) == 1 for v in per_orbit.values())
    for share, transpose in ((s.reduce_scatter, True), (s.allgather, False)):
        net = flow_net(capacity_split.share_topology(topo, share), topo.npus, [1] * len(topo.npus), transpose)
        assert optimum(net).seconds(1.0 / len(topo.npus), net.unit_bw) == pytest.approx(s.seconds(1.0))
    inst, pair = translated_pair(g, cross, 0.0)
    assert all(f.shape == "translated" and f.compact is not None and f.compact.copies > 1 for f in pair)


@pytest.mark.parametrize("g, cross", SHAPES)
def test_the_routed_trees_send_the_form_s_sends(g, cross):
    """Each half's routed trees (every root's, moved by the shifts) emitted send by send are the
    same sends, as a set, as the form's trees expanded."""
    inst, pair = translated_pair(g, cross, 0.0)
    for f in pair:
        listed = producer.emit(inst, f, 2)
        moved = pipelined_trees.expand(replace(f.compact, pieces=2))
        assert len(listed) == len(moved) and sends(listed) == sends(moved)


def sends(s) -> list:
    """A schedule's sends as sorted rows, pieces as exact fractions of a chunk."""
    return sorted(zip(s.chunk.tolist(), (Fraction(int(x), int(s.denom)) for x in s.lo),
                      (Fraction(int(x), int(s.denom)) for x in s.hi), s.src.tolist(), s.dst.tolist(),
                      s.step.tolist(), s.op.tolist()))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=st.sampled_from(SHAPES), alpha=st.sampled_from([0.0, 0.3]), pieces=st.integers(1, 3),
       later=st.integers(0, 1))
def test_event_models_per_link_orbit_price_as_the_explicit_sends(shape, alpha, pieces, later):
    inst, pair = translated_pair(*shape, alpha)
    first = split_form.candidates(*split_form._halves(inst, pair, [pieces, pieces], producer.pipelined))[0]
    f = replace(first, delay=first.delay + later)
    assert pipelined_allreduce.verify(f, inst) is None
    listed = emission.with_header(pipelined_allreduce.expand(f), inst)
    for model in ("event", "event-inorder"):
        orbit = pipelined_event.price(f, inst, model=model)
        assert orbit.extra["simulated_sends"] < len(listed)
        assert orbit.total_s == pytest.approx(cost_models.price(listed, inst, model).total_s, rel=1e-12)


@pytest.mark.parametrize("g, cross", SHAPES)
def test_unequal_pieces_verify_and_price_as_their_expansion_no_higher_than_equal(g, cross):
    inst, pair = translated_pair(g, cross, 0.0)
    halves = split_form._halves(inst, pair, [6, 6], producer.pipelined)
    equal = split_form.candidates(*halves)[0]
    sized = split_form.sized(*halves, inst)
    assert sized is not None and sized.reduce_scatter.cuts is not None
    assert pipelined_allreduce.verify(sized, inst) is None
    listed = emission.with_header(pipelined_allreduce.expand(sized), inst)
    mine = pipelined_allreduce.price_sync(sized, inst).total_s
    assert mine == pytest.approx(cost_models.price(listed, inst, "sync").total_s, rel=1e-9)
    assert mine <= pipelined_allreduce.price_sync(equal, inst).total_s * (1 + 1e-12)
    assert np.array_equal(sized.allgather.cuts, sized.allgather.cuts[-1] - sized.reduce_scatter.cuts[::-1])
