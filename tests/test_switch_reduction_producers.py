"""NVLS-class and NVLSTree-class allreduce (``nvls``, ``nvls-tree``) and the reducing-cut bound.

Expected values are derived by hand: one box of GPUs on a switch with links of ``B`` each way
cannot beat ``M / B`` (each GPU takes in a whole copy); DGX H100 boxes on rails cannot beat
``M / (8 x 50 GB/s)`` (each box takes in a whole copy over its eight NICs). Hypothesis: on
random boxes and rails (plain or reducing) the bounds never exceed a verified schedule's price
under any model."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.instances.switch_ops import with_switch_ops
from collsynth.instances.topology import from_edges
from collsynth.solvers.producers import Options, Unsupported, get
from collsynth.tens.bounds import instance_bounds, reducing_cut_seconds
from collsynth.tens.cost_models import price
from collsynth.tens.verify import verify

M = 1e9


def run(name, inst, **params):
    s = get(name).run(inst, Options(params=params)).schedule
    assert verify(s, inst) is None
    return s


def test_the_bound_by_hand():
    box = make_instance(build("switch", {"nodes": 4, "reduce": True, "copy": True}, bandwidth=100e9, alpha=0.0),
                        "allreduce", message_bytes=M)
    assert reducing_cut_seconds(box).value == pytest.approx(M / 100e9)
    one = make_instance(build("dgx_h100", {"nodes": 1, "nvls": True}), "allreduce", message_bytes=M)
    assert reducing_cut_seconds(one).value == pytest.approx(M / 450e9)
    two = make_instance(build("dgx_h100", {"nodes": 2, "nvls": True}), "allreduce", message_bytes=M)
    assert reducing_cut_seconds(two).value == pytest.approx(M / (8 * 50e9))
    plain = make_instance(build("dgx_h100", {"nodes": 1}), "allreduce", message_bytes=M)
    assert not reducing_cut_seconds(plain).computed


def test_nvls_in_one_dgx_h100_meets_its_bound_within_a_piece():
    """64 pieces of every chunk: the event time is M / B plus at most one piece's time and the hops' latencies."""
    inst = make_instance(build("dgx_h100", {"nodes": 1, "nvls": True}), "allreduce", message_bytes=M)
    s = run("nvls", inst, pieces=64)
    bound = instance_bounds(inst).event.value
    assert bound == pytest.approx(M / 450e9, rel=1e-3)
    assert bound <= price(s, inst, "event").total_s <= bound + M / 450e9 / 64 + 4 * 0.47e-6


def test_nvls_tree_verifies_over_plain_and_reducing_rails():
    for sharp in (False, True):
        inst = make_instance(build("dgx_h100", {"nodes": 2, "nvls": True, "sharp": sharp}), "allreduce",
                             message_bytes=M)
        s = run("nvls-tree", inst, pieces=4)
        assert s.num_steps == 4 - 1 + (6 if sharp else 8)


def test_the_producers_refuse_what_they_do_not_fit():
    with pytest.raises(Unsupported, match="one box"):
        run("nvls", make_instance(build("dgx_h100", {"nodes": 2, "nvls": True}), "allreduce"))
    with pytest.raises(Unsupported, match="every GPU must sit in one box"):
        run("nvls", make_instance(build("dgx_h100", {"nodes": 1}), "allreduce"))
    with pytest.raises(Unsupported, match="single allreduce"):
        run("nvls", make_instance(build("dgx_h100", {"nodes": 1, "nvls": True}), "allgather"))


def boxes_on_rails(k: int, g: int, nv: float, nic: float, alpha: float, sharp: bool):
    """``k`` boxes of ``g`` GPUs, each box on a reducing, multicasting switch (``nv`` bytes/s a
    link), GPU ``i`` of every box on rail switch ``i`` (``nic``), reducing when ``sharp``."""
    n = k * g
    boxes = [n + b for b in range(k)]
    rails = [n + k + i for i in range(g)] if k > 1 else []
    edges = []
    for b in range(k):
        for i in range(g):
            v = b * g + i
            edges += [(v, boxes[b], {"bandwidth": nv, "alpha": alpha}), (boxes[b], v, {"bandwidth": nv, "alpha": alpha})]
            if rails:
                edges += [(v, rails[i], {"bandwidth": nic, "alpha": alpha}),
                          (rails[i], v, {"bandwidth": nic, "alpha": alpha})]
    t = from_edges(n + k + len(rails), edges, switches=boxes + rails)
    return with_switch_ops(t, boxes + (rails if sharp else []), boxes + (rails if sharp else []))


@settings(max_examples=12, deadline=None)
@given(st.integers(1, 3), st.integers(2, 4), st.sampled_from([50e9, 100e9, 450e9]), st.sampled_from([10e9, 50e9]),
       st.sampled_from([0.0, 1e-6]), st.booleans(), st.integers(1, 6), st.sampled_from([1e6, 1e9]), st.booleans())
def test_no_bound_exceeds_a_verified_schedule(k, g, nv, nic, alpha, sharp, pieces, size, ramp):
    inst = make_instance(boxes_on_rails(k, g, nv, nic, alpha, sharp), "allreduce", message_bytes=size)
    s = run("nvls" if k == 1 else "nvls-tree", inst, pieces=pieces, ramp=ramp)
    b = instance_bounds(inst)
    tol = 1 + 1e-9
    for model, bound in (("sync", b.sync), ("event", b.event), ("ten", b.ten)):
        t = price(s, inst, model).total_s
        assert bound.value <= t * tol, (model, bound)
    for model in ("sync", "event", "event-inorder"):
        assert reducing_cut_seconds(inst).value <= price(s, inst, model).total_s * tol
    if k == 1:
        t = price(run("nvls", inst, pieces=pieces, shape="load-reduce"), inst, "event").total_s
        assert b.event.value <= t * tol


def test_a_box_whose_switch_reduces_is_not_bounded_by_the_same_box_without_it():
    """The bounds are cached per instance in a process: the plain box's allreduce bound (no
    in-network reduction: 2 (N - 1) / N * M / B) must not be reused for the box whose NVSwitch
    reduces, which ``nvls`` runs in about M / B."""
    plain = make_instance(build("dgx_h100", {"nodes": 1}), "allreduce", message_bytes=M)
    nvls_box = make_instance(build("dgx_h100", {"nodes": 1, "nvls": True}), "allreduce", message_bytes=M)
    assert instance_bounds(plain).event.value == pytest.approx(2 * 7 / 8 * M / 450e9, rel=1e-3)
    s = run("nvls", nvls_box, pieces=64)
    assert instance_bounds(nvls_box).event.value <= price(s, nvls_box, "event").total_s


def test_the_pieces_ramp_only_where_the_cap_on_sends_cut_them():
    """One DGX H100 box, 1 GB: the alpha-beta depth (at most 256) fits the cap, so equal pieces;
    with a piece of MAX_SENDS / 6 sends only 6 fit: cut, so they ramp (1, 2, 3, 3, 2, 1: the
    fill and drain pieces a twelfth of a chunk each, not a sixth)."""
    from collsynth.solvers.closed_form.switch_reduction import MAX_SENDS, auto_pieces

    inst = make_instance(build("dgx_h100", {"nodes": 1, "nvls": True}), "allreduce", message_bytes=M)
    pieces, cut = auto_pieces(inst, 2, 16)
    assert not cut and pieces > 6
    assert auto_pieces(inst, 2, MAX_SENDS // 6) == (6, True)
    s = run("nvls", inst, pieces=6, ramp=True)
    assert s.denom == 12 and sorted({(int(h) - int(lo)) for lo, h in zip(s.lo, s.hi)}) == [1, 2, 3]
