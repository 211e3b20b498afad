"""MSCCL XML export (tens/export.py).

Every exported program is run by an interpreter of the executor written for the tests
(tests/msccl_sim.py: thread blocks, FIFO-matched sends and receives per channel, dependency
flags, buffers holding actual chunk contents and reduction contributions) and must leave every
rank with the collective's postcondition; it is also read back with ``interpret_msccl_xml``
and must verify. Schedules come from the real producers on several topologies, and mutants of
exported programs must be refused.
"""

from __future__ import annotations

import random
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from collsynth import InputError
from collsynth.instances import CORPUS
from collsynth.instances.collective import make
from collsynth.instances.generators import build
from collsynth.instances.instance import Instance, load_instance, make_instance
from collsynth.instances.topology import from_edges
from collsynth.solvers.pipeline import run as produce_verify_price
from collsynth.solvers.cli import main
from collsynth.solvers.producers import Options
from collsynth.tens.export import to_msccl_xml
from collsynth.tens.msccl_format import ALGO_ATTRS, DIALECTS, MAX_COUNT, MAX_STEPS, MAX_TB_PER_CHANNEL, STEP_ATTRS, rank_map
from collsynth.tens.msccl_read import interpret_msccl_xml
from collsynth.tens.readback import verified_msccl_xml
from collsynth.tens.schedule import concat, from_sends, merge, reverse
from collsynth.tens.verify import verify

from msccl_sim import Rejected, run_msccl
from reference_verify import switch_pairing
from builders import (ALPHA, BW, binomial_broadcast, greedy_allgather, instance_on, recursive_doubling_allgather,
                      ring_allgather, topologies)

KINDS = ("allgather", "reduce_scatter", "allreduce", "broadcast", "reduce", "gather", "scatter", "alltoall")
ROOTED = ("broadcast", "reduce", "gather", "scatter")
OUT_OF_PLACE = ("alltoall", "gather", "scatter")
# the `coll` names each runtime's parser accepts (msccl-executor-nccl msccl_parser.cc;
# msccl-tools collectives.py with microsoft/msccl src/graph/xml.cc)
COLL = {
    "msccl-executor": {"allgather": "allgather", "reduce_scatter": "reducescatter", "allreduce": "allreduce",
                       "broadcast": "broadcast", "reduce": "reduce", "gather": "gather", "scatter": "scatter",
                       "alltoall": "alltoall"},
    "msccl-tools": {"allgather": "allgather", "reduce_scatter": "reduce_scatter", "allreduce": "allreduce",
                    "broadcast": "broadcast", "reduce": "reduce", "gather": "custom", "scatter": "custom",
                    "alltoall": "alltoall"},
}


def check_structure(xml: str, dialect: str = "msccl-executor") -> dict:
    """What the exporter promises beyond the executor's rules: steps numbered 0.. in each
    thread block, ``hasdep`` on exactly the steps something depends on, one thread block per
    (peer, channel), pieces inside the declared buffers; return a few counts."""
    root = ET.fromstring(xml)
    assert root.tag == "algo"
    for a in ALGO_ATTRS:
        assert root.get(a) is not None, a
    steps, referenced = {}, set()
    sends, recvs = defaultdict(list), defaultdict(list)
    for g in root.findall("gpu"):
        gid = int(g.get("id"))
        sizes = {"i": int(g.get("i_chunks")), "o": int(g.get("o_chunks")), "s": int(g.get("s_chunks"))}
        tbs = g.findall("tb")
        for direction in ("send", "recv"):
            per_chan = Counter(t.get("chan") for t in tbs if t.get(direction) != "-1")
            assert max(per_chan.values(), default=0) <= MAX_TB_PER_CHANNEL
            keys = Counter((t.get(direction), t.get("chan")) for t in tbs if t.get(direction) != "-1")
            assert all(v == 1 for v in keys.values())
        for t in tbs:
            tid = int(t.get("id"))
            assert len(t.findall("step")) <= MAX_STEPS[dialect]
            for i, s in enumerate(t.findall("step")):
                assert all(s.get(a) is not None for a in STEP_ATTRS)
                assert int(s.get("s")) == i
                steps[(gid, tid, i)] = s
                if s.get("depid") != "-1":
                    referenced.add((gid, int(s.get("depid")), int(s.get("deps"))))
                typ, cnt = s.get("type"), int(s.get("cnt"))
                if typ == "nop":
                    continue
                assert 1 <= cnt < MAX_COUNT
                for buf, off, used in ((s.get("srcbuf"), s.get("srcoff"), typ in ("s", "rrc", "rrs", "rrcs", "cpy")),
                                       (s.get("dstbuf"), s.get("dstoff"), typ not in ("s", "rrs"))):
                    assert not used or 0 <= int(off) and int(off) + cnt <= sizes[buf], (buf, off, cnt, sizes)
                if typ in ("s", "rcs", "rrs", "rrcs"):
                    sends[(gid, int(t.get("send")), t.get("chan"))].append(cnt)
                if typ in ("r", "rrc", "rcs", "rrs", "rrcs"):
                    recvs[(int(t.get("recv")), gid, t.get("chan"))].append(cnt)
                if typ == "cpy":
                    assert t.get("send") == t.get("recv") == "-1"
    assert referenced <= set(steps)
    for key, s in steps.items():
        assert (s.get("hasdep") == "1") == (key in referenced)
    assert sends == recvs
    return {"gpus": int(root.get("ngpus")), "steps": len(steps), "channels": int(root.get("nchannels")),
            "types": Counter(s.get("type") for s in steps.values())}


def root_rank(inst: Instance) -> int | None:
    """The root's rank: its position among the collective's nodes (the collective's definition)."""
    coll = inst.collective
    return list(coll.nodes).index(coll.root) if coll.root is not None else None


def roundtrip(schedule, inst, dialect="msccl-executor"):
    """Export, run on the interpreter of the executor, read back; return (xml, read-back, counts)."""
    assert verify(schedule, inst) is None
    xml = to_msccl_xml(schedule, inst, dialect=dialect)
    info = check_structure(xml, dialect)
    run_msccl(xml, inst.collective.kind, root=root_rank(inst), dialect=dialect)
    back = interpret_msccl_xml(xml, inst)
    assert verify(back, inst) is None, verify(back, inst)
    key = lambda s: (s.chunk, s.lo, s.hi, s.src, s.dst)  # noqa: E731
    assert sorted(map(key, back.sends())) == sorted(map(key, schedule.sends()))
    return xml, back, info


def _ring(n, bidirectional=False):
    return build("ring", {"nodes": n, "bidirectional": bidirectional}, bandwidth=BW, alpha=ALPHA)


# ---- every kind, real producers, several topologies -------------------------------------------

TOPOLOGIES = {
    "ring6": lambda: build("ring", {"nodes": 6}),
    "complete4": lambda: build("complete", {"nodes": 4}),
    "torus3x3": lambda: build("torus", {"dims": [3, 3]}),
    "mesh3x3-failed4": lambda: build("mesh", {"dims": [3, 3]}).with_failures([4]),
    "hypercube3": lambda: build("hypercube", {"dim": 3}),
}
ROOT_NODE = {"ring6": 5, "complete4": 2, "torus3x3": 5, "mesh3x3-failed4": 5, "hypercube3": 5}
CASES = (
    [(t, k, "greedy") for t in TOPOLOGIES for k in KINDS]
    + [("ring6", k, "ring") for k in ("allgather", "reduce_scatter", "allreduce", "broadcast", "reduce")]
    + [("hypercube3", k, "recursive-doubling") for k in ("allgather", "reduce_scatter", "allreduce")]
    + [("complete4", k, "direct") for k in KINDS]
    + [("complete4", k, "binomial-tree") for k in ROOTED]
    + [("torus3x3", "alltoall", "ten-ilp"), ("mesh3x3-failed4", "gather", "ten-ilp"),
       ("hypercube3", "allreduce", "ten-ilp")]
    + [("torus3x3", "allgather", "bfb-lp"), ("mesh3x3-failed4", "allreduce", "bfb-lp"),
       ("ring6", "reduce_scatter", "bfb-lp")]
)


def produced(topology: str, kind: str, producer: str):
    """(instance, verified schedule) from ``producer`` through the produce-verify-price path."""
    root = ROOT_NODE[topology] if kind in ROOTED else None
    inst = make_instance(TOPOLOGIES[topology](), kind, root=root)
    row, schedule = produce_verify_price(inst, producer, Options(time_limit=20))
    assert row["verified"] and schedule is not None, row
    return inst, schedule


@pytest.mark.parametrize("topology,kind,producer", CASES, ids=["-".join(c) for c in CASES])
def test_every_kind_runs_on_the_executor(topology, kind, producer):
    inst, schedule = produced(topology, kind, producer)
    live = sorted(inst.topology.npus)
    ranks = {node: i for i, node in enumerate(live)}  # failed nodes drop out, the rest keep their order
    assert rank_map(inst) == ranks
    root = ranks[ROOT_NODE[topology]] if kind in ROOTED else None
    for dialect in DIALECTS:
        xml = to_msccl_xml(schedule, inst, dialect=dialect)
        check_structure(xml, dialect)
        ran = run_msccl(xml, kind, root=root, dialect=dialect)
        assert ran["modes"] == (["out-of-place"] if kind in OUT_OF_PLACE else ["in-place"])
        assert ET.fromstring(xml).get("coll") == COLL[dialect][kind]
        assert xml.startswith("<!--") == (live != list(range(len(live))))
    back = interpret_msccl_xml(xml, inst)
    assert verify(back, inst) is None
    assert Counter((s.chunk, s.lo, s.hi, s.src, s.dst) for s in back.sends()) == \
        Counter((s.chunk, s.lo, s.hi, s.src, s.dst) for s in schedule.sends())


@pytest.mark.parametrize("name,n", [("complete4-alltoall", 4), ("torus3x3-alltoall", 9)])
def test_alltoall_moves_whole_blocks_and_copies_its_own(name, n):
    """One chunk per ordered pair (c = 1): the executor's alltoall count is one block, its
    sizeMultiplier n, so nchunksperloop = i_chunks = o_chunks = n and every step moves cnt 1
    (a whole block); each GPU copies its own block i[g] -> o[g] once."""
    inst = load_instance(CORPUS / f"{name}.toml")
    row, schedule = produce_verify_price(inst, "greedy")
    xml = to_msccl_xml(schedule, inst)
    root = ET.fromstring(xml)
    assert (root.get("nchunksperloop"), root.get("inplace"), root.get("outofplace")) == (str(n), "0", "1")
    for g in root.findall("gpu"):
        assert (g.get("i_chunks"), g.get("o_chunks")) == (str(n), str(n))
        copies = [(s.get("srcbuf"), s.get("srcoff"), s.get("dstbuf"), s.get("dstoff"), s.get("cnt"))
                  for s in g.iter("step") if s.get("type") == "cpy"]
        assert copies == [("i", g.get("id"), "o", g.get("id"), "1")]
    assert {s.get("cnt") for s in root.iter("step") if s.get("type") != "nop"} == {"1"}
    assert run_msccl(xml, "alltoall")["modes"] == ["out-of-place"]
    # the program the export used to write: n*n chunks per loop (each step moved 1/n of a block)
    with pytest.raises(Rejected, match="output chunk"):
        run_msccl(xml.replace(f'nchunksperloop="{n}"', f'nchunksperloop="{n * n}"'), "alltoall")
    no_copy = ET.fromstring(xml)
    for g in no_copy.findall("gpu"):
        for t in g.findall("tb"):
            if t.get("send") == t.get("recv") == "-1":
                g.remove(t)
    with pytest.raises(Rejected, match="output chunk"):
        run_msccl(ET.tostring(no_copy, encoding="unicode"), "alltoall")


def test_collective_names_and_loop_sizes_per_dialect():
    """Executor names by default; msccl-tools names on request, which the executor refuses.
    Gather's count is one rank's share for the executor (sizeMultiplier 1: c chunks per loop)
    and the whole output for msccl-tools (n*c)."""
    n, c = 4, 2
    inst = make_instance(_ring(n, bidirectional=True), "gather", root=0, chunks_per_node=c)
    rows = [(u * c + j, 0, 1, src, dst, step)  # node 2's shard goes through node 1
            for u, src, dst, step in ((1, 1, 0, 1), (3, 3, 0, 1), (2, 2, 1, 1), (2, 1, 0, 2)) for j in range(c)]
    s = from_sends(rows, "gather", n, n * c)
    for dialect, per_loop in (("msccl-executor", "2"), ("msccl-tools", "8")):
        xml, _, _ = roundtrip(s, inst, dialect)
        assert (ET.fromstring(xml).get("coll"), ET.fromstring(xml).get("nchunksperloop")) == (COLL[dialect]["gather"], per_loop)
    rs = reverse(ring_allgather(5))
    inst_rs = make_instance(_ring(5, bidirectional=True), "reduce_scatter")
    tools = to_msccl_xml(rs, inst_rs, dialect="msccl-tools")
    assert ET.fromstring(tools).get("coll") == "reduce_scatter"
    run_msccl(tools, "reduce_scatter", dialect="msccl-tools")
    with pytest.raises(Rejected, match="reduce_scatter"):
        run_msccl(tools, "reduce_scatter", dialect="msccl-executor")
    assert ET.fromstring(to_msccl_xml(rs, inst_rs)).get("coll") == "reducescatter"
    with pytest.raises(InputError, match="dialect"):
        to_msccl_xml(rs, inst_rs, dialect="nccl")


# ---- mutants the interpreter must refuse ------------------------------------------------------

def _mutants_dropping(xml: str, drop_step: bool):
    """Every program with one real step removed (``drop_step``) or one dependency cleared."""
    root = ET.fromstring(xml)
    sites = [(gi, ti, si) for gi, g in enumerate(root.findall("gpu")) for ti, t in enumerate(g.findall("tb"))
             for si, s in enumerate(t.findall("step"))
             if (s.get("type") != "nop" if drop_step else s.get("depid") != "-1")]
    for gi, ti, si in sites:
        m = ET.fromstring(xml)
        t = m.findall("gpu")[gi].findall("tb")[ti]
        s = t.findall("step")[si]
        if drop_step:
            t.remove(s)
        else:
            s.set("depid", "-1")
            s.set("deps", "-1")
        yield ET.tostring(m, encoding="unicode")


def test_every_dropped_step_or_dependency_of_a_ring_allgather_is_refused():
    """On a one-way ring every dependency orders a send after the receive that brought its
    chunk, and every step carries data: no single omission leaves a correct program."""
    n = 5
    inst = make_instance(_ring(n), "allgather")
    xml = to_msccl_xml(ring_allgather(n), inst, fuse=False)  # a receive and its forward as two steps
    run_msccl(xml, "allgather")
    dropped = list(_mutants_dropping(xml, drop_step=True))
    cleared = list(_mutants_dropping(xml, drop_step=False))
    assert len(dropped) == 2 * n * (n - 1) and len(cleared) == n * (n - 2)
    for m in dropped + cleared:
        with pytest.raises(Rejected):
            run_msccl(m, "allgather")


def test_retargeted_and_swapped_dependencies_are_refused():
    n = 5
    inst = make_instance(_ring(n), "allgather")
    xml = to_msccl_xml(ring_allgather(n), inst)
    root = ET.fromstring(xml)
    send_tb = root.find("gpu").findall("tb")[0]
    dependent = [s for s in send_tb.findall("step") if s.get("depid") != "-1"]
    last = dependent[-1]
    last.set("deps", str(int(last.get("deps")) - 1))  # waits for the receive before the one it needs
    with pytest.raises(Rejected, match="unordered"):
        run_msccl(ET.tostring(root, encoding="unicode"), "allgather")
    root = ET.fromstring(xml)  # swap: gpu 0's last forward and gpu 1's first forward trade dependencies
    last = [s for s in root.findall("gpu")[0].findall("tb")[0].findall("step") if s.get("depid") != "-1"][-1]
    first = [s for s in root.findall("gpu")[1].findall("tb")[0].findall("step") if s.get("depid") != "-1"][0]
    a, b = last.get("deps"), first.get("deps")
    last.set("deps", b)
    first.set("deps", a)
    with pytest.raises(Rejected, match="deadlock|unordered"):
        run_msccl(ET.tostring(root, encoding="unicode"), "allgather")


def test_reduction_mutants_are_refused():
    """Recursive doubling allreduce on a hypercube: partners swap and add whole vectors in one
    step, so each receive must wait for the local send of the same data (nothing else orders
    them); a plain receive loses contributions."""
    n, k = 8, 3
    rows = [(c, 0, 1, u, u ^ (1 << (t - 1)), t, "reduce") for t in range(1, k + 1) for u in range(n) for c in range(n)]
    inst = instance_on("hypercube", {"dim": k}, "allreduce")
    xml, back, _ = roundtrip(from_sends(rows, "allreduce", n, n), inst)
    assert back.num_steps == k
    root = ET.fromstring(xml)
    sites = []  # (gpu, tb, step) of every reducing receive that waits for a local send
    for gi, g in enumerate(root.findall("gpu")):
        tbs = g.findall("tb")
        for ti, t in enumerate(tbs):
            for si, s in enumerate(t.findall("step")):
                if s.get("type") == "rrc" and s.get("depid") != "-1" and tbs[int(s.get("depid"))].get("send") != "-1":
                    sites.append((gi, ti, si))
    # every exchange: each receive waits only for the send of its chunk (in later exchanges that
    # send has waited for the chunk's previous receive, so the receive does not name it again)
    assert len(sites) == k * n * n
    for gi, ti, si in sites[::n]:  # one per GPU
        m = ET.fromstring(xml)
        s = m.findall("gpu")[gi].findall("tb")[ti].findall("step")[si]
        s.set("depid", "-1")
        s.set("deps", "-1")
        with pytest.raises(Rejected, match="unordered"):
            run_msccl(ET.tostring(m, encoding="unicode"), "allreduce")
    with pytest.raises(Rejected, match="output chunk"):
        run_msccl(xml.replace('type="rrc"', 'type="r"', 1), "allreduce")


def test_alltoall_mutants_are_refused():
    inst = load_instance(CORPUS / "torus3x3-alltoall.toml")
    _, schedule = produce_verify_price(inst, "greedy")
    xml = to_msccl_xml(schedule, inst)
    run_msccl(xml, "alltoall")
    root = ET.fromstring(xml)
    flagged = next(t for g in root.findall("gpu") for t in g.findall("tb")
                   if any(s.get("hasdep") == "1" for s in t.findall("step")))
    for s in flagged.findall("step"):
        s.set("hasdep", "0")  # nobody waiting on this thread block ever sees its flag
    with pytest.raises(Rejected, match="deadlock"):
        run_msccl(ET.tostring(root, encoding="unicode"), "alltoall")
    root = ET.fromstring(xml)
    recv = next(s for s in root.iter("step") if s.get("type") == "r" and s.get("dstbuf") == "o")
    recv.set("dstoff", str((int(recv.get("dstoff")) + 1) % 9))  # a block lands in the wrong place
    with pytest.raises(Rejected):
        run_msccl(ET.tostring(root, encoding="unicode"), "alltoall")
    root = ET.fromstring(xml)
    relay = next(g for g in root.findall("gpu") if g.get("s_chunks") != "0")
    relay.set("s_chunks", "0")
    with pytest.raises(Rejected, match="outside s_chunks"):
        run_msccl(ET.tostring(root, encoding="unicode"), "alltoall")


# ---- interpretation, layout details, limits ---------------------------------------------------

def test_ring_allgather_roundtrip_keeps_steps():
    n = 6
    inst = make_instance(_ring(n), "allgather")
    xml, back, info = roundtrip(ring_allgather(n), inst)
    assert back.num_steps == n - 1  # each send waits for the receive of the previous step
    assert info["gpus"] == n and info["steps"] == 2 * n * (n - 1) and info["channels"] == 1
    root = ET.fromstring(xml)
    assert root.get("coll") == "allgather" and root.get("nchunksperloop") == str(n)


@pytest.mark.parametrize("n", [4, 8])
def test_recursive_doubling_and_binomial_roundtrip(n):
    roundtrip(recursive_doubling_allgather(n), instance_on("complete", {"nodes": n}))
    _, back, _ = roundtrip(binomial_broadcast(n), instance_on("hypercube", {"dim": n.bit_length() - 1}, "broadcast", root=0))
    assert back.num_steps == n.bit_length() - 1


def test_reduce_scatter_and_allreduce_use_reducing_receives():
    n = 5
    ring = _ring(n, bidirectional=True)
    rs = reverse(ring_allgather(n))  # on the transposed direction, which the bidirectional ring has
    xml, back, info = roundtrip(rs, make_instance(ring, "reduce_scatter"))
    assert info["types"]["rrc"] == n * (n - 1) and info["types"]["r"] == 0
    assert ET.fromstring(xml).get("redop") == "sum"
    ar = concat(rs, ring_allgather(n), "allreduce")
    xml, back, info = roundtrip(ar, make_instance(ring, "allreduce"))
    assert info["types"]["rrc"] == n * (n - 1) and info["types"]["r"] == n * (n - 1)
    assert back.num_steps == 2 * (n - 1)


def _waits_for(tbs: list, tb: int, step: int) -> set[tuple[int, int]]:
    """The steps ``(tb, step)`` of one GPU (``tbs``: each thread block's step elements) that step
    ``step`` of thread block ``tb`` starts after: earlier steps of its thread block and what
    they and its named dependencies wait for, followed by depth-first search."""
    seen, todo = set(), [(tb, step)]
    while todo:
        t, k = todo.pop()
        preds = [(t, j) for j in range(k)]
        d = tbs[t][k]
        if d.get("depid") != "-1":
            preds.append((int(d.get("depid")), int(d.get("deps"))))
        for p in preds:
            if p not in seen:
                seen.add(p)
                todo.append(p)
    return seen


def test_receives_wait_for_earlier_sends_of_the_same_piece():
    """In a ring allreduce node v forwards its partial of chunk c (reduce-scatter phase) and
    later receives c's result (allgather phase): that receive waits for the send (the buffer
    is read before it is overwritten); a reduce's forward waits for the reduction."""
    n = 4
    ring = _ring(n, bidirectional=True)
    ar = concat(reverse(ring_allgather(n)), ring_allgather(n), "allreduce")
    xml, _, _ = roundtrip(ar, make_instance(ring, "allreduce"))
    anti = 0
    for g in ET.fromstring(xml).findall("gpu"):
        tbs = [t.findall("step") for t in g.findall("tb")]
        for ti, steps in enumerate(tbs):
            for si, stp in enumerate(steps):
                if stp.get("type") == "r":  # it waits, named or implied, for the send of what it overwrites
                    sends = [tbs[t][k] for t, k in _waits_for(tbs, ti, si) if tbs[t][k].get("type") == "s"]
                    assert stp.get("dstoff") in {d.get("srcoff") for d in sends}
                    anti += 1
    assert anti == n * (n - 1)
    red = from_sends([(0, 0, 1, 2, 1, 1), (0, 0, 1, 3, 0, 1), (0, 0, 1, 1, 0, 2)], "reduce", n, 1)
    xml, back, _ = roundtrip(red, make_instance(ring, "reduce", root=0))
    gpu1 = [g for g in ET.fromstring(xml).findall("gpu") if g.get("id") == "1"][0]
    send = [t for t in gpu1.findall("tb") if t.get("send") == "0"][0].find("step")
    recv_tb = [t for t in gpu1.findall("tb") if t.get("recv") == "2"][0]
    assert (send.get("depid"), send.get("deps")) == (recv_tb.get("id"), "0")
    assert recv_tb.find("step").get("type") == "rrc"
    assert back.num_steps == 2


def test_fractional_pieces_refine_the_chunk_grid():
    inst = make_instance(_ring(3, bidirectional=True), "broadcast", root=0)
    s = from_sends([(0, 0, Fraction(1, 2), 0, 1, 1), (0, Fraction(1, 2), 1, 0, 2, 1),
                    (0, 0, Fraction(1, 2), 1, 2, 2), (0, Fraction(1, 2), 1, 2, 1, 2)], "broadcast", 3, 1)
    xml, back, _ = roundtrip(s, inst)
    assert ET.fromstring(xml).get("nchunksperloop") == "2"
    assert back.denom == 2
    with pytest.raises(InputError, match="MSCCL chunks"):
        to_msccl_xml(s, inst, max_chunks=1)


def test_alltoall_relays_through_scratch_slots():
    """On a one-way ring the block i -> k passes (k - i - 1) mod n GPUs; each keeps one scratch
    slot per block it relays: (n-1)(n-2)/2 blocks pass every GPU."""
    n = 4
    inst = make_instance(_ring(n), "alltoall")
    rows = [((i * n + k), 0, 1, (i + h) % n, (i + h + 1) % n, h + 1)
            for i in range(n) for k in range(n) if i != k for h in range((k - i) % n)]
    xml, _, info = roundtrip(from_sends(rows, "alltoall", n, n * n), inst)
    root = ET.fromstring(xml)
    assert {g.get("s_chunks") for g in root.findall("gpu")} == {str((n - 1) * (n - 2) // 2)}
    bufs = Counter((s.get("type"), s.get("dstbuf")) for s in root.iter("step"))
    assert bufs[("r", "o")] == n * (n - 1) and bufs[("r", "s")] == n * (n - 1) * (n - 2) // 2
    assert info["types"]["cpy"] == n


def test_gather_and_scatter_relay_through_scratch():
    n = 4
    inst = make_instance(_ring(n, bidirectional=True), "gather", root=0)
    rows = [(1, 0, 1, 1, 0, 1), (3, 0, 1, 3, 0, 1), (2, 0, 1, 2, 1, 1), (2, 0, 1, 1, 0, 2)]
    xml, _, _ = roundtrip(from_sends(rows, "gather", n, n), inst)
    gpus = ET.fromstring(xml).findall("gpu")
    assert [g.get("o_chunks") for g in gpus] == ["4", "0", "0", "0"] and gpus[1].get("s_chunks") == "1"
    roundtrip(reverse(from_sends(rows, "gather", n, n)), make_instance(_ring(n, bidirectional=True), "scatter", root=0))


def test_parallel_links_use_channels():
    topo = build("dgx1", {}, bandwidth=BW, alpha=ALPHA)
    s = greedy_allgather(topo, random.Random(3), per_link=1)  # up to count chunks per pair per step
    _, _, info = roundtrip(s, make_instance(topo, "allgather"))
    assert info["channels"] == 2


def test_executor_limits_spread_over_channels():
    """40 peers per GPU exceed 32 thread blocks per channel; 19 * 14 = 266 sends per link exceed
    the steps of a thread block (64 in the executor's default build: ceil(266 / 64) = 5
    channels; 256 in microsoft/msccl: 2 channels)."""
    n = 40
    rows = [(u, 0, 1, u, v, 1) for u in range(n) for v in range(n) if u != v]
    _, _, info = roundtrip(from_sends(rows, "allgather", n, n), instance_on("complete", {"nodes": n}))
    assert info["channels"] >= 2  # the per-channel limit itself is checked by the interpreter
    n, c = 20, 14
    t = [(u, j, s) for s in range(1, n) for u in range(n) for j in range(c)]
    rows = [(((u - s + 1) % n) * c + j, 0, 1, u, (u + 1) % n, s) for u, j, s in t]
    inst = make_instance(_ring(n), "allgather", chunks_per_node=c)
    schedule = from_sends(rows, "allgather", n, n * c)
    for dialect, channels in (("msccl-executor", 5), ("msccl-tools", 2)):
        xml, back, info = roundtrip(schedule, inst, dialect)
        assert info["channels"] == channels and back.num_steps == n - 1
    with pytest.raises(Rejected, match="at most 64 steps"):  # the msccl-tools program on the executor
        run_msccl(xml, "allgather", dialect="msccl-executor")


def test_dependencies_on_thread_blocks_past_127_are_refused():
    """The executor keeps a dependency's thread block in an int8_t: gpu 0 with 129 send thread
    blocks receives in thread block 129, which its forward would have to name."""
    n = 130
    rows = [(0, 0, 1, 0, v, 1) for v in range(1, n)] + [(1, 0, 1, 1, 0, 1), (1, 0, 1, 0, 2, 2)]
    with pytest.raises(InputError, match="waits for thread block 129"):
        to_msccl_xml(from_sends(rows, "allgather", n, n), instance_on("complete", {"nodes": n}))


def test_failed_nodes_renumber_ranks_visibly():
    torus = build("torus", {"dims": [3, 3]}, bandwidth=BW, alpha=ALPHA).with_failures([4])
    inst = make_instance(torus, "allgather")
    s = greedy_allgather_live(torus, random.Random(1))
    xml, _, info = roundtrip(s, inst)
    assert info["gpus"] == 8
    assert rank_map(inst) == {0: 0, 1: 1, 2: 2, 3: 3, 5: 4, 6: 5, 7: 6, 8: 7}
    assert xml.splitlines()[0] == "<!-- collsynth: gpu ids are ranks, not node ids (node->rank): 0->0 1->1 2->2 3->3 5->4 6->5 7->6 8->7 -->"
    whole = make_instance(_ring(6), "allgather")
    assert not to_msccl_xml(ring_allgather(6), whole).startswith("<!--")


def greedy_allgather_live(topo, rng):
    """greedy_allgather on the live nodes of a topology with failed nodes."""
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


@settings(max_examples=20)
@given(topologies(max_nodes=6), st.randoms(use_true_random=False))
def test_random_valid_allgathers_roundtrip(topo, rnd):
    roundtrip(greedy_allgather(topo, rnd), make_instance(topo, "allgather"))


def test_dropping_a_dependency_breaks_the_interpreted_schedule():
    n = 4
    inst = make_instance(_ring(n), "allgather")
    root = ET.fromstring(to_msccl_xml(ring_allgather(n), inst))
    step = next(s for s in root.iter("step") if s.get("type") == "s" and s.get("depid") != "-1")
    step.set("depid", "-1")
    step.set("deps", "-1")
    v = verify(interpret_msccl_xml(ET.tostring(root, encoding="unicode"), inst), inst)
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
    a2a = make_instance(_ring(3, True), "alltoall")
    back_home = from_sends([(1, 0, 1, 0, 1, 1), (1, 0, 1, 1, 0, 2)] + [
        ((i * 3 + k), 0, 1, i, k, 3) for i in range(3) for k in range(3) if i != k and (i, k) != (0, 1)], "alltoall", 3, 9)
    with pytest.raises(InputError, match="back to its source"):
        to_msccl_xml(back_home, a2a)
    with pytest.raises(InputError, match="not well formed"):
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
    with pytest.raises(InputError, match="coll"):
        interpret_msccl_xml(xml.replace('coll="allgather"', 'coll="custom"'), inst)


# ---- routes through switch nodes ----------------------------------------------------------------

def _port(u, v):
    return (u, v, {"bandwidth": 1e11, "alpha": 5e-7})


SWITCHED = {
    "switch4": lambda: build("switch", {"nodes": 4, "unwind": 0}),
    # two switch planes, every GPU on both: two switch paths between every two GPUs
    "planes4": lambda: from_edges(6, [_port(g, s) for g in range(4) for s in (4, 5)]
                                  + [_port(s, g) for g in range(4) for s in (4, 5)], switches=[4, 5]),
    # GPUs 0, 1 on leaf 4, GPUs 2, 3 on leaf 5, the leaves joined by spine 6: routes over three switches
    "leafspine4": lambda: from_edges(7, [_port(u, v) for u, v in LEAF_SPINE] + [_port(v, u) for u, v in LEAF_SPINE],
                                     switches=[4, 5, 6]),
}
LEAF_SPINE = [(0, 4), (1, 4), (2, 5), (3, 5), (4, 6), (5, 6)]
SWITCH_CASES = [(t, k, copy) for t in SWITCHED for k in KINDS if k not in ("reduce", "reduce_scatter", "allreduce")
                for copy in (True, False)]


def rank_routes(schedule, inst):
    """Every GPU-to-GPU transfer of a verified whole-chunk schedule, ``(chunk, src, dst, path)``:
    a send between GPUs as it is, a route through switches followed back from its delivery by
    the plain-Python pairing of the switch rule (``reference_verify.switch_pairing``)."""
    sw = set(inst.topology.switches)
    pairs, unpaired = switch_pairing(schedule, inst)
    assert not unpaired
    came = defaultdict(list)
    for leave, arrival in pairs:
        came[leave].append(arrival)

    def back(i, path):
        if int(schedule.src[i]) not in sw:
            return [(int(schedule.src[i]), path)]
        return [found for a in came[i] for found in back(a, (int(schedule.src[i]),) + path)]

    out = []
    for i in range(len(schedule)):
        if int(schedule.dst[i]) not in sw:
            out += [(int(schedule.chunk[i]), src, int(schedule.dst[i]), path) for src, path in back(i, ())]
    return out


@pytest.mark.parametrize("topology,kind,copy", SWITCH_CASES, ids=[f"{t}-{k}-{'copy' if c else 'nocopy'}"
                                                                  for t, k, c in SWITCH_CASES])
def test_switch_routes_export_as_sends_between_ranks(topology, kind, copy):
    """Greedy through kept switches (multicast on and off, two chunks per GPU): the exported
    program runs on the executor's interpreter, reads back as the schedule's GPU-to-GPU routes
    (each route one send between its two ranks, the read-back verified with those sends
    routed), and the routes between two ranks through different switch paths never share a
    channel."""
    inst = make_instance(SWITCHED[topology](), kind, root=0 if kind in ROOTED else None, chunks_per_node=2)
    row, schedule = produce_verify_price(inst, "greedy", Options(time_limit=20, params={"switch_copy": copy}))
    assert row["verified"] and schedule.meta["switch_copy"] is copy
    sw = set(inst.topology.switches)
    assert any(int(u) in sw for u in schedule.src)
    xml = verified_msccl_xml(schedule, inst)
    check_structure(xml)
    run_msccl(xml, kind, root=root_rank(inst))
    back = interpret_msccl_xml(xml, inst)
    assert verify(replace(back, routing="shortest-path"), inst) is None
    routes = rank_routes(schedule, inst)
    assert Counter((s.chunk, s.src, s.dst) for s in back.sends()) == Counter(r[:3] for r in routes)
    per_path = defaultdict(Counter)
    for _, u, v, path in routes:
        per_path[(u, v)][path] += 1
    per_channel = defaultdict(Counter)
    for gpu in ET.fromstring(xml).findall("gpu"):
        for tb in gpu.findall("tb"):
            if tb.get("send") != "-1":
                sends = sum(st.get("type") == "s" for st in tb.findall("step"))
                per_channel[(int(gpu.get("id")), int(tb.get("send")))][tb.get("chan")] += sends
    for (u, v), paths in per_path.items():  # ranks are the node ids here; one channel per path
        assert sorted(per_channel[(u, v)].values()) == sorted(paths.values()), (u, v)
    if topology == "planes4":  # two chunks per GPU: the greedy takes both planes between some ranks
        assert max(len(paths) for paths in per_path.values()) == 2


def test_pieces_through_a_switch_export():
    """A broadcast piped through one switch in halves: each half is one send 0 -> 1 (in the
    step it reaches 1), and the program runs."""
    edges = [_port(0, 2), _port(2, 0), _port(1, 2), _port(2, 1)]
    inst = make_instance(from_edges(3, edges, switches=[2]), "broadcast", root=0)
    half = Fraction(1, 2)
    s = from_sends([(0, 0, half, 0, 2, 1), (0, half, 1, 0, 2, 2), (0, 0, half, 2, 1, 2), (0, half, 1, 2, 1, 3)],
                   "broadcast", 3, 1)
    xml = verified_msccl_xml(s, inst)
    run_msccl(xml, "broadcast", root=0)
    back = interpret_msccl_xml(xml, inst)
    assert sorted((x.lo, x.hi, x.src, x.dst) for x in back.sends()) == [(0, half, 0, 1), (half, 1, 0, 1)]


def test_cli_exports_a_greedy_schedule_through_a_switch(tmp_path, capsys):
    inst = CORPUS / "switch4-kept-broadcast.toml"
    sched = tmp_path / "s.json"
    assert main(["solve", str(inst), "--producer", "greedy", "--out", str(sched)]) == 0
    capsys.readouterr()
    assert main(["export", str(sched), str(inst), "--format", "msccl-xml"]) == 0
    xml = capsys.readouterr().out
    instance = load_instance(inst)
    run_msccl(xml, "broadcast", root=root_rank(instance))
    assert {(s.src, s.dst) for s in interpret_msccl_xml(xml, instance).sends()} <= {(0, v) for v in (1, 2, 3)} | {
        (u, v) for u in (1, 2, 3) for v in (1, 2, 3) if u != v}


# ---- dependencies: only those nothing else implies ---------------------------------------------

def test_a_reduction_chain_names_only_the_last_receive():
    """Reduce to rank 3 on four fully connected GPUs: GPU 1 adds what 0 (step 1) and 2 (step 2)
    send, then sends the sum to 3 (step 3). Layout by hand (sends first, peers ascending, one
    channel): GPU 1 runs tb 0 = send to 3, tb 1 = receive from 0, tb 2 = receive from 2. The
    second receive waits for the first (no concurrent reductions into one buffer); the send
    needs both receives, but waiting for the second implies the first, so it names only tb 2
    step 0 and needs no ``nop`` step."""
    inst = make_instance(build("complete", {"nodes": 4}, bandwidth=BW, alpha=ALPHA), "reduce", root=3)
    xml, _, _ = roundtrip(from_sends([(0, 0, 1, 0, 1, 1), (0, 0, 1, 2, 1, 2), (0, 0, 1, 1, 3, 3)], "reduce", 4, 1), inst)
    gpu1 = ET.fromstring(xml).findall("gpu")[1]
    got = [(t.get("send"), t.get("recv"), t.get("chan"),
            [(s.get("type"), s.get("depid"), s.get("deps"), s.get("hasdep")) for s in t.findall("step")])
           for t in gpu1.findall("tb")]
    assert got == [("3", "-1", "0", [("s", "2", "0", "0")]),
                   ("-1", "0", "0", [("rrc", "-1", "-1", "1")]),
                   ("-1", "2", "0", [("rrc", "1", "0", "1")])]


def _transposed(topo):
    return from_edges(topo.size, [(v, u, dict(d)) for u, v, d in topo.graph.edges(data=True)], name="transposed")


@settings(max_examples=15, deadline=None)
@given(topologies(max_nodes=6), st.randoms(use_true_random=False), st.sampled_from(["reduce_scatter", "allreduce"]))
def test_random_combining_schedules_roundtrip(topo, rnd, kind):
    """Reduce-scatters (time-reversed allgathers on the transposed topology) and allreduces
    (one of those, then an allgather) export, run on the executor's interpreter, read back and
    verify with only the dependencies nothing else implies."""
    rs = reverse(greedy_allgather(_transposed(topo), rnd))
    schedule = rs if kind == "reduce_scatter" else concat(rs, greedy_allgather(topo, rnd), "allreduce")
    inst = make_instance(topo, kind)
    xml, _, _ = roundtrip(schedule, inst)
    verified_msccl_xml(schedule, inst)
