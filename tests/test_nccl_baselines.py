"""NCCL's baselines as NCCL runs them (``nccl-ring``, ``nccl-tree``): one channel per NIC,
verified and priced on several systems; per-link loads, step counts and sync times derived by
hand on a two-box DGX H100; the classic ring where there is one NIC path."""

from __future__ import annotations

import math
from collections import defaultdict
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.solvers import pipeline
from collsynth.solvers.closed_form import classics
from collsynth.solvers.closed_form.nccl_ring import nccl_ring_schedule
from collsynth.solvers.closed_form.nccl_tree import nccl_tree_schedule
from collsynth.solvers.producers import Options
from collsynth.tens.cost_models import price
from collsynth.tens.routing import routes
from collsynth.tens.verify import verify

from cli_errors import assert_one_error_line, run_cli

RING_KINDS = ("allgather", "reduce_scatter", "allreduce", "broadcast", "reduce")
SYSTEMS = [("dgx_h100", {"nodes": 2}), ("forestcoll_a100", {"nodes": 2}), ("forestcoll_mi250", {"nodes": 2}),
           ("ndv2", {"chassis": 2}), ("dgx2", {"chassis": 2}), ("mi250", {"nodes": 2}), ("dgx_h100", {"nodes": 3})]
M = 1.6e7  # bytes: 1e6 per GPU on 16 GPUs


def _inst(gen, params, kind, m=M):
    return make_instance(build(gen, params), kind, message_bytes=m, root=0 if kind in ("broadcast", "reduce") else None)


def _verified_and_priced(inst, sched):
    assert verify(sched, inst) is None
    for model in ("sync", "event"):
        assert price(sched, inst, model).total_s > 0


@pytest.mark.parametrize("gen,params", SYSTEMS, ids=[f"{g}{list(p.values())[0]}" for g, p in SYSTEMS])
def test_nccl_ring_and_tree_verify_and_price_on_every_system(gen, params):
    for kind in RING_KINDS:
        inst = _inst(gen, params, kind)
        _verified_and_priced(inst, nccl_ring_schedule(inst, pieces=2 if kind in ("broadcast", "reduce") else None))
    inst = _inst(gen, params, "allreduce")
    _verified_and_priced(inst, nccl_tree_schedule(inst, pieces=2))


@settings(max_examples=6, deadline=None)
@given(gen=st.sampled_from(["dgx_h100", "dgx_a100", "forestcoll_a100"]), nodes=st.integers(2, 5),
       kind=st.sampled_from(["allgather", "reduce_scatter", "allreduce"]))
def test_nccl_ring_verifies_at_any_box_count(gen, nodes, kind):
    inst = _inst(gen, {"nodes": nodes}, kind)
    s = nccl_ring_schedule(inst)
    assert verify(s, inst) is None
    assert s.meta["channels"] == 8  # one per NIC of a box
    p = 8 * nodes
    assert s.num_steps == (2 if kind == "allreduce" else 1) * (p - 1)


def _loads(sched, inst):
    """``{(step, (u, v)): chunks}`` over every link each send's route crosses."""
    rt = routes(sched, inst.topology)
    send, link = rt.expand()
    la = inst.topology.link_arrays
    out = defaultdict(Fraction)
    for i, l in zip(send.tolist(), link.tolist()):
        piece = Fraction(int(sched.hi[i] - sched.lo[i]), sched.denom)
        out[(int(sched.step[i]), (int(la.src[l]), int(la.dst[l])))] += piece
    return out


def test_two_box_dgx_h100_ring_loads_by_hand():
    """dgx_h100 nodes=2: GPUs 0-15, NVSwitches 16, 17, rail switches 18-25 (rail g = 18 + g).
    Channel c goes c, c+1, ..., c-1 in each box; box 0's last GPU reaches box 1's GPU 8 + c through
    NVSwitch 16, GPU c and rail c (PXN), so in each of the 15 steps: the link c -> rail c and
    rail c -> 8 + c carry channel c's eighth of a chunk (and so on back), and every GPU's link
    into its NVSwitch carries one eighth from each of the 8 channels: one chunk."""
    inst = _inst("dgx_h100", {"nodes": 2}, "allgather")
    s = nccl_ring_schedule(inst)
    loads = _loads(s, inst)
    for step in range(1, 16):
        for c in range(8):
            rail = 18 + c
            for link in ((c, rail), (rail, 8 + c), (8 + c, rail), (rail, c)):
                assert loads[(step, link)] == Fraction(1, 8), (step, link)
            assert loads[(step, (c, 16))] == 1 and loads[(step, (8 + c, 17))] == 1
    # no rail link carries anything but its own channel's eighth
    assert max(v for (t, (a, b)), v in loads.items() if b >= 18 or a >= 18) == Fraction(1, 8)
    # the classic ring sends everything between the boxes over one NIC pair: a whole chunk per step
    old = _loads(classics.ring_schedule(inst), inst)
    assert max(v for (t, (a, b)), v in old.items() if b >= 18) == 1


def test_two_box_dgx_h100_sync_time_by_hand():
    """15 steps; a step's latency is the PXN hop's route: NVLink 0.47 us twice and the rail
    2.7 us twice (6.34 us); its bandwidth time is the rail's eighth of a chunk, M / 16 / 8 bytes
    at 50 GB/s (the NVSwitch port's whole chunk at 450 GB/s is faster)."""
    inst = _inst("dgx_h100", {"nodes": 2}, "allgather")
    expected = 15 * (2 * 0.47e-6 + 2 * 2.7e-6 + M / 16 / 8 / 50e9)
    s = nccl_ring_schedule(inst)
    assert math.isclose(price(s, inst, "sync").total_s, expected, rel_tol=1e-9)
    row, _ = pipeline.run(inst, "nccl-ring", Options(params={}))
    assert math.isclose(row["extra"]["closed_form"]["total_s"], expected, rel_tol=1e-9)
    assert math.isclose(row["time_sync_s"], expected, rel_tol=1e-9)


def test_tree_two_boxes_steps_and_depth_by_hand():
    """Two boxes: the boxes' trees are one edge each way; below a box's head the chain of 7 GPUs:
    depth 8, so ``2 (8 + k - 1)`` steps with k pieces; 8 channels x 2 trees."""
    inst = _inst("dgx_h100", {"nodes": 2}, "allreduce")
    for k in (1, 3):
        s = nccl_tree_schedule(inst, pieces=k)
        assert s.meta["depth"] == 8 and s.num_steps == 2 * (8 + k - 1)
        assert len(s.meta["trees"]) == 16
    s = nccl_tree_schedule(inst, pieces=1)
    t0, t1 = s.meta["trees"][:2]  # channel 0: box 1's head (GPU 8) under GPU 0 in tree 0, the other way in tree 1
    assert t0[8] == 0 and t0[0] == -1 and t1[0] == 8 and t1[8] == -1
    assert [t0[g] for g in range(1, 8)] == list(range(0, 7))  # the chain 0 -> 1 -> ... -> 7


def test_one_nic_path_is_the_classic_ring():
    """A topology without boxes (a torus) and a single DGX box: one channel, the classic ring's sends."""
    for topo in (build("torus", {"dims": [3, 4]}, alpha=1e-6, bandwidth=1e9), build("dgx_h100", {"nodes": 1})):
        for kind in ("allgather", "reduce_scatter", "allreduce"):
            inst = make_instance(topo, kind, message_bytes=M)
            a, b = nccl_ring_schedule(inst), classics.ring_schedule(inst)
            assert a.meta["channels"] == 1
            for col in ("chunk", "src", "dst", "step", "lo", "hi"):
                assert np.array_equal(getattr(a, col), getattr(b, col)), col


def test_tree_without_boxes_prices_as_the_double_binary_tree():
    """One GPU per box (a torus): nccl-tree with one piece is NCCL's double binary tree over the
    ranks, split by blocks instead of halves of every chunk: same steps, same sync time."""
    inst = make_instance(build("torus", {"dims": [4, 4]}, alpha=1e-6, bandwidth=1e9), "allreduce", message_bytes=M)
    a, b = nccl_tree_schedule(inst, pieces=1), classics.double_binary_tree_schedule(inst)
    assert a.num_steps == b.num_steps == 8
    assert math.isclose(price(a, inst, "sync").total_s, price(b, inst, "sync").total_s, rel_tol=1e-12)


@pytest.mark.parametrize("producer,param,says", [("nccl-ring", "channels=0", "1..64"),
                                                 ("nccl-ring", "pieces=x", "expected an integer"),
                                                 ("nccl-tree", "pieces=0", "1..4096")])
def test_bad_parameters_are_one_line_exit_2(tmp_path, capsys, producer, param, says):
    f = tmp_path / "a.toml"
    f.write_text('name = "h2"\n[topology]\ngenerator = "dgx_h100"\nnodes = 2\n'
                 '[collective]\nkind = "allreduce"\nmessage_bytes = 1048576\n')
    code, out, err = run_cli(["solve", f, "--producer", producer, "--param", param, "--json"], capsys)
    assert code == 2 and out == ""
    assert_one_error_line(err, [f"--param {param.split('=')[0]}", says])


def _square_boxes():
    """Two boxes of 4 GPUs, each box's GPUs on a 4-cycle of direct links (1 GB/s each way), every
    GPU on one switch (id 8) joining the boxes."""
    from collsynth.instances.topology import from_edges
    link = {"bandwidth": 1e9, "alpha": 1e-6}
    edges = [(4 * b + i, 4 * b + (i + d) % 4, dict(link)) for b in range(2) for i in range(4) for d in (1, 3)]
    edges += [e for g in range(8) for e in ((g, 8, dict(link)), (8, g, dict(link)))]
    return from_edges(9, edges, switches=[8], name="squares", meta={"gpus_per_node": 4})


def test_square_box_rings_share_the_direct_links_by_hand():
    """4 channels (one per GPU: all reach the switch) of 3 hops each on 8 directed links: at least
    12 / 8 -> 2 rings on some link. Without the limit the exits (the GPU just before the entry,
    its switch links least loaded) give 0123, 1230, 2301, 3012: 3 rings on every clockwise
    link. With 2 a link: channel 0 takes 0123, channel 1 (exit 0, its switch links unused) 1230;
    channel 2 wants exit 1 but 2 -> 3 is full and 2 -> 1 -> 0 ends early; exit 0 is no better
    (2 -> 3 full, 2 -> 1 dead ends); exit 3: 2103. Channel 3's exit 2 needs 1 -> 2 (full),
    exit 1 has no path round a 4-cycle, exit 0: 3210."""
    inst = make_instance(_square_boxes(), "allgather", message_bytes=M)
    s = nccl_ring_schedule(inst)
    assert s.meta["rings"] == [[0, 1, 2, 3, 4, 5, 6, 7], [1, 2, 3, 0, 5, 6, 7, 4],
                               [2, 1, 0, 3, 6, 5, 4, 7], [3, 2, 1, 0, 7, 6, 5, 4]]
    assert verify(s, inst) is None


def test_mi250_rings_spread_over_the_xgmi_links():
    """forestcoll_mi250 nodes=2: 16 channels (every GCD on the switch), 15 in-box hops each: 240
    hops on the 112 xGMI link units of a box (7 a GCD; a pair of k links is k units), so some
    link carries at least 3 rings a unit. The search without the limit put 7 rings on the single
    link 0 -> 8; now no pair of k links carries more than 4 k."""
    from collsynth.instances.systems import MI250_XGMI
    inst = _inst("forestcoll_mi250", {"nodes": 2}, "allgather")
    rings = nccl_ring_schedule(inst).meta["rings"]
    assert len(rings) == 16
    hops = defaultdict(int)
    for ring in rings:
        for a, b in zip(ring, ring[1:] + ring[:1]):
            if a < 16 and b < 16:  # box 0 (box 1 repeats it)
                hops[(a, b)] += 1
    assert sum(hops.values()) == 16 * 15 and sum(sum(r.values()) for r in MI250_XGMI.values()) == 112
    assert all(MI250_XGMI[a][b] for a, b in hops)  # every in-box hop on a direct link
    assert max(n / MI250_XGMI[a][b] for (a, b), n in hops.items()) <= 4
    assert hops[(0, 8)] <= 4 * MI250_XGMI[0][8]
