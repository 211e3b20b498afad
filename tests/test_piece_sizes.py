"""Pipeline pieces of unequal size and sends merged into multicasting switches: on small Clos
fabrics and DGX H100 the compact form and its explicit sends get the same verdict and the same
synchronous price; unequal pieces never price above the equal ones they were chosen against;
the drain of a slow stage followed by a fast one matches the geometric tail worked by hand."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.instances.topology import from_edges
from collsynth.solvers.packing import compact, translated
from collsynth.solvers.packing.piece_sizes import edges_of, sized
from collsynth.solvers.packing.producer import _with_header, choose_k, forest, plan
from collsynth.solvers.packing.tree_hops import tree_hops
from collsynth.tens import cost_models, verify
from collsynth.tens.cut_optimum import flow_net, optimum
from collsynth.tens.pipelined_trees import PipelinedTrees, expand, from_json, price_sync, to_json
from collsynth.tens.pipelined_trees import verify as verify_trees

from test_pipelined_trees import clos_params, small_clos


def same_price(c, inst):
    """The compact price of ``c`` equals its explicit sends' (both verified)."""
    sched = _with_header(expand(c), inst)
    assert verify_trees(c, inst) is None
    assert verify.verify(sched, inst) is None
    want = cost_models.price(sched, inst, "sync")
    got = price_sync(c, inst)
    assert got.steps == want.steps
    assert got.T_L_s == pytest.approx(want.T_L_s, rel=1e-9)
    assert got.T_B_s == pytest.approx(want.T_B_s, rel=1e-9)
    return got


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p=clos_params, kind=st.sampled_from(["allgather", "reduce_scatter"]), pieces=st.integers(1, 5),
       nic_alpha=st.sampled_from([0.0, 2.7e-6, 3e-5]))
def test_unequal_and_merged_forms_price_as_their_sends(p, kind, pieces, nic_alpha):
    inst = make_instance(small_clos({**p, "nic_alpha": nic_alpha}), kind, message_bytes=1 << 20)
    for k, transposed in plan(kind):
        c = compact.pipelined(inst, forest(inst, k, transposed, shape="greedy"), 1, tree_hops)
        merged = compact.multicast(c, inst)
        assert len(merged.src) <= len(c.src)
        if kind != "allgather":
            assert merged is c  # a reduction's switches do not multicast partial sums
        for form in (c, merged):
            equal = replace(form, pieces=pieces)
            unequal = sized(form, inst, pieces)
            assert unequal is not None and len(unequal.edges) == pieces + 1
            same_price(equal, inst)
            got = same_price(unequal, inst)
            assert got.total_s <= price_sync(equal, inst).total_s * (1 + 1e-4)  # rounding to 1/UNIT only


def two_stage(rate: float = 1.0):
    """A slow link then a fast one: 0 -> 1 at ``rate`` B/s, 1 -> 2 at ``4 rate``, alpha 0; a
    broadcast from 0 as one chain (two depths)."""
    topo = from_edges(3, [(0, 1), (1, 2), (1, 0), (2, 1)], bandwidth=rate, alpha=0.0)
    topo.graph.edges[1, 2, 0]["bandwidth"] = 4.0 * rate
    return topo


@pytest.mark.parametrize("rate", [1e6, 1e12])
def test_drain_of_a_slow_then_fast_stage_by_hand(rate):
    """A broadcast of 1 MB, ``s = 1e6 / rate`` seconds on the slow link (1 s, and 1 us: a
    piece's time far below the solver's absolute tolerances, the same answer). Equal pieces ``1/P``: ``P`` steps of ``s/P`` on the slow link, one of ``s/(4P)``
    to drain: ``s (1 + 1/(4P))``. Pieces ``x_0 .. x_3`` cost ``s`` times ``x_0, max(x_1,
    x_0/4), max(x_2, x_1/4), max(x_3, x_2/4), x_3/4``, at least ``1 + x_3/4``, and a piece
    below a quarter of the one before costs that quarter anyway: the least is the geometric
    tail ``x_(i+1) = x_i / 4``, ``x_0 = 64/85``, ``x_3 = 1/85``: ``s (1 + 1/340)``."""
    inst = make_instance(two_stage(rate), "broadcast", message_bytes=1e6, root=0)
    s = 1e6 / rate
    f = PipelinedTrees("broadcast", 3, 1, 1, 4, 1, np.array([0]), np.array([0]), np.array([1]), np.array([0, 2]),
                       np.array([0, 1]), np.array([1, 2]), np.array([0, 1]))
    assert verify_trees(f, inst) is None
    assert price_sync(f, inst).T_B_s == pytest.approx(s * (1 + 1 / 16))
    g = sized(f, inst, 4)
    assert price_sync(g, inst).T_B_s == pytest.approx(s * (1 + 1 / 340), rel=1e-5)
    assert np.diff(g.edges) / g.edges[-1] == pytest.approx([64 / 85, 16 / 85, 4 / 85, 1 / 85], abs=1e-5)
    assert g.edges[-1] == 1 << 19  # 1 MB in units of at least a byte: 2^19 of 1.9 B (unit_of)
    same_price(g, inst)


def test_pieces_stay_a_byte():
    """1 KB over the two stages: edges in 1/512 of the chunk (2^9 units of 1.95 B; 2^10 would
    be 0.98 B), so the four pieces of the geometric tail (64, 16, 4, 1 parts of 85: the last
    6 units) are each at least a byte."""
    inst = make_instance(two_stage(), "broadcast", message_bytes=1e3, root=0)
    f = PipelinedTrees("broadcast", 3, 1, 1, 4, 1, np.array([0]), np.array([0]), np.array([1]), np.array([0, 2]),
                       np.array([0, 1]), np.array([1, 2]), np.array([0, 1]))
    g = sized(f, inst, 4)
    assert g.edges[-1] == 512
    assert np.diff(g.edges).tolist() == [386, 96, 24, 6]  # edges 512 x (64, 80, 84) / 85 = 385.5, 481.9, 506.0 rounded
    assert (np.diff(g.edges) * 1e3 / 512 >= 1).all()


def test_merged_sends_reach_every_gpu_once_on_dgx():
    """DGX H100 x4: a root's sends into its rail switch and its NVSwitch merge to one per step
    (the switch copies), every tree still reaches every GPU, the explicit sends verify with
    switches that copy and are refused by the verifier when the schedule says they do not."""
    inst = make_instance(build("dgx_h100", {"nodes": 4}), "allgather", message_bytes=1 << 24)
    net = flow_net(inst.topology, inst.collective.nodes, [1] * 32)
    k, tau = choose_k(net, optimum(net))
    c = translated.translated(inst, "allgather", False, k, tau)
    m = compact.multicast(c, inst)
    switch = np.isin(np.arange(inst.topology.size), list(inst.topology.switches))

    def into_switches(f):  # (tree, src, dst, steps below the root) of the sends into a switch
        tree = np.repeat(np.arange(len(f.root)), np.diff(f.ptr))
        return np.stack([tree, f.src, f.dst, f.before])[:, switch[f.dst]]

    before, after = into_switches(c), into_switches(m)
    assert len(np.unique(before, axis=1).T) < before.shape[1]  # a root sent a piece into a switch once per route
    assert len(np.unique(after, axis=1).T) == after.shape[1] == len(np.unique(before, axis=1).T)
    assert (m.src[~switch[m.dst]] == c.src[~switch[c.dst]]).all()  # the sends out of switches are all kept
    same_price(replace(m, pieces=3), inst)
    sched = _with_header(expand(replace(m, pieces=2)), inst)
    assert verify.verify(replace(sched, meta={**sched.meta, "switch_copy": False}), inst) is not None


def test_cuts_round_trip_and_bad_edges_are_refused():
    inst = make_instance(two_stage(), "broadcast", message_bytes=1.0, root=0)
    f = PipelinedTrees("broadcast", 3, 1, 1, 3, 1, np.array([0]), np.array([0]), np.array([1]), np.array([0, 2]),
                       np.array([0, 1]), np.array([1, 2]), np.array([0, 1]), cuts=np.array([0, 5, 7, 8]))
    assert from_json(to_json(f)).edges.tolist() == [0, 5, 7, 8]
    assert verify_trees(f, inst) is None
    assert "piece edges" in verify_trees(replace(f, cuts=np.array([0, 5, 5, 8])), inst)
    assert "piece edges" in verify_trees(replace(f, pieces=4), inst)
    assert edges_of(np.array([1.0, 0.0, 0.0]), 8).tolist() == [0, 6, 7, 8]  # every piece at least one unit
