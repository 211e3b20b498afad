"""Receive-and-send steps in the MSCCL export (tens/export_fuse.py): layouts by hand, and random
reduce-scatters, allreduces and allgathers exported with them, run on the interpreter of the
executor (tests/msccl_sim.py), read back and verified."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter

from hypothesis import given, settings, strategies as st

from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.instances.topology import from_edges
from collsynth.tens.export import to_msccl_xml
from collsynth.tens.msccl_read import interpret_msccl_xml
from collsynth.tens.readback import verified_msccl_xml
from collsynth.tens.schedule import concat, from_sends, reverse
from collsynth.tens.verify import verify

from builders import ALPHA, BW, greedy_allgather, topologies
from msccl_sim import run_msccl
from test_export import check_structure


def fused_roundtrip(schedule, inst, **options) -> str:
    """Export with receive-and-send steps (or as ``options`` say), run on the executor's
    interpreter, read back, verify that it moves the schedule's pieces."""
    assert verify(schedule, inst) is None
    xml = to_msccl_xml(schedule, inst, **{"fuse": True, **options})
    check_structure(xml)
    run_msccl(xml, inst.collective.kind, root=None if inst.collective.root is None
              else list(inst.collective.nodes).index(inst.collective.root))
    back = interpret_msccl_xml(xml, inst)
    assert verify(back, inst) is None, verify(back, inst)
    key = lambda s: (s.chunk, s.lo, s.hi, s.src, s.dst)  # noqa: E731
    assert sorted(map(key, back.sends())) == sorted(map(key, schedule.sends()))
    return xml


def layout(xml: str, gpu: int) -> list:
    return [(t.get("send"), t.get("recv"), t.get("chan"),
             [(s.get("type"), s.get("depid"), s.get("deps"), s.get("hasdep")) for s in t.findall("step")])
            for t in ET.fromstring(xml).findall("gpu")[gpu].findall("tb")]


def test_a_reduction_chain_relays_with_one_receive_reduce_send_step():
    """Reduce to rank 3 on four fully connected GPUs: GPU 1 adds what 0 (step 1) and 2 (step 2)
    send and sends the sum to 3 (step 3). Unfused (test_export.py) GPU 1 runs three thread
    blocks; fused, the receive from 2 and the send to 3 are one ``rrs`` step (GPU 1 is not the
    root: it keeps nothing) in a thread block with both peers, waiting for the receive from 0
    (one reduction into the buffer at a time), which becomes thread block 1."""
    inst = make_instance(build("complete", {"nodes": 4}, bandwidth=BW, alpha=ALPHA), "reduce", root=3)
    xml = fused_roundtrip(from_sends([(0, 0, 1, 0, 1, 1), (0, 0, 1, 2, 1, 2), (0, 0, 1, 1, 3, 3)], "reduce", 4, 1), inst)
    assert layout(xml, 1) == [("3", "2", "0", [("rrs", "1", "0", "0")]),
                              ("-1", "0", "0", [("rrc", "-1", "-1", "1")])]


def test_an_allreduce_chain_keeps_the_sum_where_it_is_needed():
    """Allreduce along the line 0 - 1 - 2 of three fully connected GPUs: 0 -> 1 (step 1), 1 -> 2
    (2) reduce; 2 -> 1 (3), 1 -> 0 (4) copy the total back. GPU 1 forwards its partial sum (``rrs``: the total overwrites it at
    step 3) and then the total (``rcs``); GPU 2 forwards the total it computed and must keep it
    (``rrcs``); GPU 0 sends and receives."""
    topo = build("complete", {"nodes": 3}, bandwidth=BW, alpha=ALPHA)
    inst = make_instance(topo, "allreduce")
    rows = [(c, 0, 1, 0, 1, 1, "reduce") for c in range(3)] + [(c, 0, 1, 1, 2, 2, "reduce") for c in range(3)] + \
        [(c, 0, 1, 2, 1, 3, "copy") for c in range(3)] + [(c, 0, 1, 1, 0, 4, "copy") for c in range(3)]
    xml = fused_roundtrip(from_sends(rows, "allreduce", 3, 3), inst)
    types = [Counter(s.get("type") for t in g.findall("tb") for s in t.findall("step"))
             for g in ET.fromstring(xml).findall("gpu")]
    assert types == [Counter({"s": 3, "r": 3}), Counter({"rrs": 3, "rcs": 3}), Counter({"rrcs": 3})]


def _transposed(topo):
    return from_edges(topo.size, [(v, u, dict(d)) for u, v, d in topo.graph.edges(data=True)], name="transposed")


def random_tree_schedule(topo, rnd, kind: str):
    """``(schedule, instance)``: a random allgather on ``topo``, a reduce-scatter (the time
    reversal of one on the transposed topology) or an allreduce (such a reduce-scatter, then
    an allgather)."""
    if kind == "allgather":
        schedule = greedy_allgather(topo, rnd)
    else:
        rs = reverse(greedy_allgather(_transposed(topo), rnd))
        schedule = rs if kind == "reduce_scatter" else concat(rs, greedy_allgather(topo, rnd), "allreduce")
    return schedule, make_instance(topo, kind)


@settings(max_examples=20, deadline=None)
@given(topologies(max_nodes=6), st.randoms(use_true_random=False),
       st.sampled_from(["reduce_scatter", "allreduce", "allgather"]))
def test_random_schedules_with_receive_and_send_steps_run_and_verify(topo, rnd, kind):
    """Reduce-scatters (time-reversed allgathers on the transposed topology), allreduces (one of
    those, then an allgather) and allgathers export with receive-and-send steps, run on the
    executor's interpreter, read back and verify; the export's own read-back accepts them."""
    schedule, inst = random_tree_schedule(topo, rnd, kind)
    fused_roundtrip(schedule, inst)
    verified_msccl_xml(schedule, inst, fuse=True)
