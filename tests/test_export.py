"""MSCCL XML export (tens/export.py): structure the executor requires, and a faithful round trip.

Every exported program is read back with ``interpret_msccl_xml`` and must verify.
"""

from __future__ import annotations

import random
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from fractions import Fraction

import pytest
from hypothesis import given, strategies as st

from collsynth import InputError
from collsynth.instances.collective import make
from collsynth.instances.generators import build
from collsynth.instances.instance import Instance, make_instance
from collsynth.tens.export import (
    ALGO_ATTRS,
    MAX_COUNT,
    MAX_STEPS,
    MAX_TB_PER_CHANNEL,
    STEP_ATTRS,
    interpret_msccl_xml,
    to_msccl_xml,
)
from collsynth.tens.schedule import concat, from_sends, merge, reverse
from collsynth.tens.verify import verify

from test_cost import (ALPHA, BW, binomial_broadcast, greedy_allgather, recursive_doubling_allgather,
                       ring_allgather, topologies)


def check_structure(xml: str) -> dict:
    """Assert what the MSCCL executor requires; return a few counts."""
    root = ET.fromstring(xml)
    assert root.tag == "algo"
    for a in ALGO_ATTRS:
        assert root.get(a) is not None, a
    ngpus = int(root.get("ngpus"))
    gpus = root.findall("gpu")
    assert sorted(int(g.get("id")) for g in gpus) == list(range(ngpus))
    steps = {}
    referenced = set()
    sends, recvs = defaultdict(list), defaultdict(list)
    nchan = int(root.get("nchannels"))
    for g in gpus:
        gid = int(g.get("id"))
        sizes = {"i": int(g.get("i_chunks")), "o": int(g.get("o_chunks")), "s": int(g.get("s_chunks"))}
        tbs = g.findall("tb")
        assert sorted(int(t.get("id")) for t in tbs) == list(range(len(tbs)))  # no gaps
        for direction in ("send", "recv"):  # executor limits per channel and per thread block
            per_chan = Counter(t.get("chan") for t in tbs if t.get(direction) != "-1")
            assert max(per_chan.values(), default=0) <= MAX_TB_PER_CHANNEL
        assert all(len(t.findall("step")) <= MAX_STEPS for t in tbs)
        send_keys = Counter((t.get("send"), t.get("chan")) for t in tbs if t.get("send") != "-1")
        recv_keys = Counter((t.get("recv"), t.get("chan")) for t in tbs if t.get("recv") != "-1")
        assert all(v == 1 for v in send_keys.values()) and all(v == 1 for v in recv_keys.values())
        for t in tbs:
            tid = int(t.get("id"))
            assert 0 <= int(t.get("chan")) < nchan
            assert int(t.get("send")) != gid and int(t.get("recv")) != gid
            for i, s in enumerate(t.findall("step")):
                for a in STEP_ATTRS:
                    assert s.get(a) is not None, a
                assert int(s.get("s")) == i
                steps[(gid, tid, i)] = s
                if s.get("depid") != "-1":
                    referenced.add((gid, int(s.get("depid")), int(s.get("deps"))))
                typ, cnt = s.get("type"), int(s.get("cnt"))
                if typ == "nop":
                    continue
                assert 1 <= cnt < MAX_COUNT
                for buf, off in ((s.get("srcbuf"), s.get("srcoff")), (s.get("dstbuf"), s.get("dstoff"))):
                    assert 0 <= int(off) and int(off) + cnt <= sizes[buf], (buf, off, cnt, sizes)
                if typ == "s":
                    sends[(gid, int(t.get("send")), t.get("chan"))].append(cnt)
                else:
                    assert typ in ("r", "rrc")
                    recvs[(int(t.get("recv")), gid, t.get("chan"))].append(cnt)
    assert referenced <= set(steps)
    for key, s in steps.items():
        assert (s.get("hasdep") == "1") == (key in referenced)
    assert sends == recvs  # pairing per (src, dst, channel) in order, same counts
    return {"gpus": ngpus, "steps": len(steps), "channels": nchan}


def roundtrip(schedule, inst):
    assert verify(schedule, inst) is None
    xml = to_msccl_xml(schedule, inst)
    info = check_structure(xml)
    back = interpret_msccl_xml(xml, inst)
    assert verify(back, inst) is None, verify(back, inst)
    assert len(back) == len(schedule)
    key = lambda s: (s.chunk, s.lo, s.hi, s.src, s.dst)
    assert sorted(map(key, back.sends())) == sorted(map(key, schedule.sends()))
    return xml, back, info


def _ring(n, bidirectional=False):
    return build("ring", {"nodes": n, "bidirectional": bidirectional}, bandwidth=BW, alpha=ALPHA)


def test_ring_allgather_roundtrip_keeps_steps():
    n = 6
    inst = make_instance(_ring(n), "allgather")
    s = ring_allgather(n)
    xml, back, info = roundtrip(s, inst)
    assert back.num_steps == n - 1  # each send waits for the receive of the previous step
    assert info == {"gpus": n, "steps": 2 * n * (n - 1), "channels": 1}
    root = ET.fromstring(xml)
    assert root.get("coll") == "allgather" and root.get("nchunksperloop") == str(n)


@pytest.mark.parametrize("n", [4, 8])
def test_recursive_doubling_and_binomial_roundtrip(n):
    roundtrip(recursive_doubling_allgather(n), make_instance(build("complete", {"nodes": n}), "allgather"))
    _, back, _ = roundtrip(binomial_broadcast(n), make_instance(build("hypercube", {"dim": n.bit_length() - 1}),
                                                                  "broadcast", root=0))
    assert back.num_steps == n.bit_length() - 1


def test_reduce_scatter_and_allreduce_use_reducing_receives():
    n = 5
    ring = _ring(n, bidirectional=True)
    rs = reverse(ring_allgather(n))  # on the transposed direction, which the bidirectional ring has
    inst_rs = make_instance(ring, "reduce_scatter")
    xml, back, _ = roundtrip(rs, inst_rs)
    types = Counter(s.get("type") for s in ET.fromstring(xml).iter("step"))
    assert types["rrc"] == n * (n - 1) and types["r"] == 0
    assert ET.fromstring(xml).get("redop") == "sum"
    ar = concat(rs, ring_allgather(n), "allreduce")
    xml, back, _ = roundtrip(ar, make_instance(ring, "allreduce"))
    types = Counter(s.get("type") for s in ET.fromstring(xml).iter("step"))
    assert types["rrc"] == n * (n - 1) and types["r"] == n * (n - 1)
    assert back.num_steps == 2 * (n - 1)


def test_receives_wait_for_earlier_sends_of_the_same_piece():
    """In a ring allreduce node v forwards its partial of chunk c (reduce-scatter phase) and
    later receives c's result (allgather phase): that receive must wait for the send (the
    buffer is read before it is overwritten); a reduce's forward waits for the reduction."""
    n = 4
    ring = _ring(n, bidirectional=True)
    ar = concat(reverse(ring_allgather(n)), ring_allgather(n), "allreduce")
    xml, _, _ = roundtrip(ar, make_instance(ring, "allreduce"))
    root = ET.fromstring(xml)
    anti = 0
    for g in root.findall("gpu"):
        tbs = {t.get("id"): t for t in g.findall("tb")}
        for t in tbs.values():
            pending = []
            for st in t.findall("step"):
                if st.get("depid") != "-1":
                    pending.append(tbs[st.get("depid")].findall("step")[int(st.get("deps"))])
                if st.get("type") == "nop":
                    continue
                if st.get("type") == "r":
                    sends = [d for d in pending if d.get("type") == "s"]
                    assert [d.get("srcoff") for d in sends] == [st.get("dstoff")]
                    anti += 1
                pending = []
    assert anti == n * (n - 1)  # every allgather-phase receive follows the node's own send of it
    red = from_sends([(0, 0, 1, 2, 1, 1), (0, 0, 1, 3, 0, 1), (0, 0, 1, 1, 0, 2)], "reduce", n, 1)
    xml, back, _ = roundtrip(red, make_instance(ring, "reduce", root=0))
    gpu1 = [g for g in ET.fromstring(xml).findall("gpu") if g.get("id") == "1"][0]
    send = [t for t in gpu1.findall("tb") if t.get("send") == "0"][0].find("step")
    recv_tb = [t for t in gpu1.findall("tb") if t.get("recv") == "2"][0]
    assert (send.get("depid"), send.get("deps")) == (recv_tb.get("id"), "0")
    assert recv_tb.find("step").get("type") == "rrc"
    assert back.num_steps == 2


def test_same_step_exchange_with_reduction():
    """Recursive doubling allreduce on a hypercube: partners swap whole vectors and reduce in
    the same step; each receive waits for the local send (a zero-gap cycle the interpreter
    resolves to one shared step)."""
    n, k = 8, 3
    rows = [(c, 0, 1, u, u ^ (1 << (t - 1)), t, "reduce") for t in range(1, k + 1) for u in range(n) for c in range(n)]
    s = from_sends(rows, "allreduce", n, n)
    xml, back, _ = roundtrip(s, make_instance(build("hypercube", {"dim": k}), "allreduce"))
    assert back.num_steps == k


def test_fractional_pieces_refine_the_chunk_grid():
    inst = make_instance(_ring(3, bidirectional=True), "broadcast", root=0)
    s = from_sends([(0, 0, Fraction(1, 2), 0, 1, 1), (0, Fraction(1, 2), 1, 0, 2, 1),
                    (0, 0, Fraction(1, 2), 1, 2, 2), (0, Fraction(1, 2), 1, 2, 1, 2)], "broadcast", 3, 1)
    xml, back, _ = roundtrip(s, inst)
    root = ET.fromstring(xml)
    assert root.get("nchunksperloop") == "2"
    assert back.denom == 2
    with pytest.raises(InputError, match="MSCCL chunks"):
        to_msccl_xml(s, inst, max_chunks=1)


def test_alltoall_relays_through_scratch():
    n = 4
    inst = make_instance(_ring(n), "alltoall")
    rows = []
    for i in range(n):
        for k in range(n):
            if i == k:
                continue
            hops = (k - i) % n
            for h in range(hops):
                rows.append(((i * n + k), 0, 1, (i + h) % n, (i + h + 1) % n, h + 1))
    s = from_sends(rows, "alltoall", n, n * n)
    xml, _, _ = roundtrip(s, inst)
    bufs = Counter((st.get("type"), st.get("dstbuf")) for st in ET.fromstring(xml).iter("step"))
    assert bufs[("r", "s")] > 0 and bufs[("r", "o")] == n * (n - 1)
    assert ET.fromstring(xml).get("inplace") == "0"


def test_gather_and_scatter_export_as_custom():
    n = 4
    inst = make_instance(_ring(n, bidirectional=True), "gather", root=0)
    rows = [(1, 0, 1, 1, 0, 1), (3, 0, 1, 3, 0, 1), (2, 0, 1, 2, 1, 1), (2, 0, 1, 1, 0, 2)]
    xml, _, _ = roundtrip(from_sends(rows, "gather", n, n), inst)
    assert ET.fromstring(xml).get("coll") == "custom"
    sc = reverse(from_sends(rows, "gather", n, n))
    roundtrip(sc, make_instance(_ring(n, bidirectional=True), "scatter", root=0))


def test_parallel_links_use_channels():
    topo = build("dgx1", {}, bandwidth=BW, alpha=ALPHA)
    inst = make_instance(topo, "allgather")
    s = greedy_allgather(topo, random.Random(3), per_link=1)  # up to count chunks per pair per step
    xml, _, info = roundtrip(s, inst)
    assert info["channels"] == 2


def test_executor_limits_spread_over_channels():
    """40 peers per GPU exceed 32 thread blocks per channel; 19 * 14 sends per link exceed
    256 steps per thread block: both spread over more channels."""
    n = 40
    rows = [(u, 0, 1, u, v, 1) for u in range(n) for v in range(n) if u != v]
    _, _, info = roundtrip(from_sends(rows, "allgather", n, n), make_instance(build("complete", {"nodes": n}), "allgather"))
    assert info["channels"] >= 2  # the per-channel limits themselves are checked in check_structure
    n, c = 20, 14
    t = [(u, j, s) for s in range(1, n) for u in range(n) for j in range(c)]
    rows = [(((u - s + 1) % n) * c + j, 0, 1, u, (u + 1) % n, s) for u, j, s in t]
    inst = make_instance(_ring(n), "allgather", chunks_per_node=c)
    _, back, info = roundtrip(from_sends(rows, "allgather", n, n * c), inst)
    assert info["channels"] == 2 and back.num_steps == n - 1


def test_subset_of_nodes_maps_to_ranks():
    topo = _ring(6)
    inst = make_instance(topo, "allgather", nodes=[0, 1, 2, 3, 4, 5])
    roundtrip(ring_allgather(6), inst)
    torus = build("torus", {"dims": [3, 3]}, bandwidth=BW, alpha=ALPHA).with_failures([4])
    inst = make_instance(torus, "allgather")
    s = greedy_allgather_live(torus, random.Random(1))
    xml, _, info = roundtrip(s, inst)
    assert info["gpus"] == 8


def greedy_allgather_live(topo, rng):
    """greedy_allgather on the live nodes of a topology with failed nodes."""
    import numpy as np

    la = topo.link_arrays
    live = list(topo.npus)
    holds = np.zeros((topo.size, topo.size), dtype=bool)
    holds[live, live] = True
    want = np.zeros_like(holds)
    want[np.ix_(live, live)] = True
    rows, step = [], 0
    while not holds[want].all():
        step += 1
        incoming = holds.copy()
        for p in rng.sample(range(len(la)), len(la)):
            u, v = int(la.src[p]), int(la.dst[p])
            cand = np.flatnonzero(holds[:, u] & ~incoming[:, v] & want[:, v]).tolist()
            for c in cand[:1]:
                rows.append((c, 0, 1, u, v, step))
                incoming[c, v] = True
        holds = incoming
    return from_sends(rows, "allgather", topo.size, topo.size)


@given(topologies(max_nodes=6), st.randoms(use_true_random=False))
def test_random_valid_allgathers_roundtrip(topo, rnd):
    roundtrip(greedy_allgather(topo, rnd), make_instance(topo, "allgather"))


def test_dropping_a_dependency_breaks_the_interpreted_schedule():
    n = 4
    inst = make_instance(_ring(n), "allgather")
    xml = to_msccl_xml(ring_allgather(n), inst)
    root = ET.fromstring(xml)
    step = next(s for s in root.iter("step") if s.get("type") == "s" and s.get("depid") != "-1")
    step.set("depid", "-1")
    step.set("deps", "-1")
    bad = interpret_msccl_xml(ET.tostring(root, encoding="unicode"), inst)
    v = verify(bad, inst)
    assert v is not None and "does not hold" in v.reason


def test_export_errors():
    ring = _ring(4)
    inst = make_instance(ring, "allgather")
    routed = recursive_doubling_allgather(4, routing="shortest-path")
    with pytest.raises(InputError, match="direct link"):
        to_msccl_xml(routed, make_instance(_ring(4, True), "allgather"))
    colls = (make("allgather", range(4), 4), make("allgather", range(4), 4))
    two = Instance("two", ring, colls)
    with pytest.raises(InputError, match="concurrent"):
        to_msccl_xml(merge([ring_allgather(4)] * 2, two.chunk_offsets), two)
    sub = make_instance(_ring(4, True), "allgather", nodes=[0, 1])
    with pytest.raises(InputError, match="not a rank"):
        to_msccl_xml(from_sends([(0, 0, 1, 0, 1, 1), (1, 0, 1, 1, 2, 1)], "allgather", 4, 4), sub)
    with pytest.raises(InputError, match="malformed"):
        interpret_msccl_xml("<algo", inst)
    xml = to_msccl_xml(ring_allgather(4), inst)
    root = ET.fromstring(xml)
    root.find("gpu").find("tb").set("id", "7")
    with pytest.raises(InputError, match="without gaps"):
        interpret_msccl_xml(ET.tostring(root, encoding="unicode"), inst)
    root = ET.fromstring(xml)
    first_tb = root.find("gpu").find("tb")
    first_tb.remove(first_tb.find("step"))
    with pytest.raises(InputError, match="sends but"):
        interpret_msccl_xml(ET.tostring(root, encoding="unicode"), inst)
    root = ET.fromstring(xml)
    del root.attrib["maxBytes"]
    with pytest.raises(InputError, match="maxBytes"):
        interpret_msccl_xml(ET.tostring(root, encoding="unicode"), inst)
