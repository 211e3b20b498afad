"""One thread block per tree and edge in the MSCCL export (tens/export_layout.py): layouts counted
by hand, and random reduce-scatters, allreduces and allgathers exported in that layout, run on
the interpreter of the executor (tests/msccl_sim.py), read back and verified."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings, strategies as st

from collsynth import InputError
from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.tens.export import to_msccl_xml
from collsynth.tens.export_layout import tree_channels
from collsynth.tens.readback import verified_msccl_xml
from collsynth.tens.schedule import from_sends

from builders import ALPHA, BW, topologies
from test_export_fuse import fused_roundtrip, layout, random_tree_schedule


def trees_roundtrip(schedule, inst, fuse: bool) -> str:
    """Export one thread block per tree and edge, run it on the executor's interpreter, read it
    back and verify it moves the schedule's pieces."""
    return fused_roundtrip(schedule, inst, fuse=fuse, layout="trees")


def three_trees():
    """Reduce-scatter on three fully connected GPUs, chunk r's tree a chain: r+1 sends its part
    to r+2 (step 1), which adds its own and sends the sum to r (step 2), mod 3. Every send goes
    g -> g+1, so each link carries two trees (a leaf's send and a relay's)."""
    inst = make_instance(build("complete", {"nodes": 3}, bandwidth=BW, alpha=ALPHA), "reduce_scatter")
    rows = [(r, 0, 1, (r + 1) % 3, (r + 2) % 3, 1) for r in range(3)] + \
           [(r, 0, 1, (r + 2) % 3, r, 2) for r in range(3)]
    return from_sends(rows, "reduce_scatter", 3, 1), inst


def test_each_tree_gets_a_channel_and_each_edge_a_thread_block():
    """By hand (``three_trees``): tree 0 uses links 1->2, 2->0 and gets channel 0; tree 1 uses
    2->0 (taken on 0) and 0->1: channel 1; tree 2 uses 0->1 (taken on 1) and 1->2 (taken on
    0): channel 2. GPU 0 is tree 2's leaf (send to 1, channel 2), tree 1's relay (receive from
    2, send to 1, channel 1) and tree 0's root (receive from 2, channel 0): unfused four thread
    blocks of one step (sends first by channel, then the receives by channel); the default
    layout packs the same six steps into two thread blocks (one send, one receive, one
    channel)."""
    s, inst = three_trees()
    xml = trees_roundtrip(s, inst, fuse=False)
    assert ET.fromstring(xml).get("nchannels") == "3"
    assert [t[:3] + (len(t[3]),) for t in layout(xml, 0)] == [
        ("1", "-1", "1", 1), ("1", "-1", "2", 1), ("-1", "2", "0", 1), ("-1", "2", "1", 1)]
    packed = to_msccl_xml(s, inst)
    assert [t[:3] + (len(t[3]),) for t in layout(packed, 0)] == [("1", "-1", "0", 2), ("-1", "2", "0", 2)]


def test_a_relay_is_one_receive_reduce_send_step_as_forestcolls():
    """Fused (``three_trees``): GPU 0's receive from 2 and send to 1 of tree 1 share channel 1
    and become one ``rrs`` step (GPU 0 keeps nothing of chunk 1), so three thread blocks of
    one step each, none waiting for another: ForestColl's reduce-scatter relays."""
    s, inst = three_trees()
    xml = trees_roundtrip(s, inst, fuse=True)
    assert layout(xml, 0) == [("1", "2", "1", [("rrs", "-1", "-1", "0")]),
                              ("1", "-1", "2", [("s", "-1", "-1", "0")]),
                              ("-1", "2", "0", [("rrc", "-1", "-1", "0")])]


def test_the_relays_sum_is_reduced_last():
    """Reduce to rank 3 on four fully connected GPUs: 0 -> 1 (step 1), then in step 2 the relay
    1 -> 3 (listed first) and the leaf 2 -> 3. The relay's data came through one transfer
    before, so rank 3 reduces the leaf's piece first and the relay's after it: the receive from
    1 waits for the receive from 2 (not the other way round, which would make the leaf's
    reduction wait for the relay's whole chain)."""
    inst = make_instance(build("complete", {"nodes": 4}, bandwidth=BW, alpha=ALPHA), "reduce", root=3)
    s = from_sends([(0, 0, 1, 0, 1, 1), (0, 0, 1, 1, 3, 2), (0, 0, 1, 2, 3, 2)], "reduce", 4, 1)
    xml = trees_roundtrip(s, inst, fuse=False)
    got = {t[1]: t[3] for t in layout(xml, 3)}  # recv peer -> steps
    assert got["2"] == [("rrc", "-1", "-1", "1")]
    assert [t[1] for t in layout(xml, 3)] == ["1", "2"]  # receive thread blocks by peer
    assert got["1"] == [("rrc", "1", "0", "0")]  # waits for thread block 1 (the receive from 2)


def test_more_trees_on_a_link_than_channels_is_refused_in_one_line():
    # 33 trees over the one pair 0 -> 1: each needs a channel of its own there
    with pytest.raises(InputError, match="more than 32 channels"):
        tree_channels([0] * 33, [1] * 33, [()] * 33, list(range(33)), 32, 32)


@settings(max_examples=20, deadline=None)
@given(topologies(max_nodes=6), st.randoms(use_true_random=False),
       st.sampled_from(["reduce_scatter", "allreduce", "allgather"]), st.booleans())
def test_random_schedules_one_thread_block_per_tree_and_edge_run_and_verify(topo, rnd, kind, fuse):
    """Reduce-scatters (time-reversed allgathers on the transposed topology), allreduces (one of
    those, then an allgather) and allgathers export one thread block per tree and edge, with
    and without receive-and-send steps, run on the executor's interpreter, read back and
    verify; the read-back-and-verified export accepts them."""
    schedule, inst = random_tree_schedule(topo, rnd, kind)
    xml = trees_roundtrip(schedule, inst, fuse)
    trees = ET.fromstring(xml)
    assert int(trees.get("nchannels")) <= 32
    assert verified_msccl_xml(schedule, inst, fuse=fuse, layout="trees") == xml


def test_the_runtime_price_picks_one_thread_block_per_tree_when_steps_cost_most():
    """``three_trees`` at 300 kB (3 chunks a loop: 100 kB a chunk, 100 loop iterations of the
    1 kB half of a 2 kB buffer, one call a step), each step 1 ms and nothing else costing
    (bandwidth, copies, credits, launch free). Packed per link, a GPU's send thread block runs
    two steps an iteration: at least 100 x 2 ms. One thread block per tree and edge runs one:
    99 periods of 1 ms after a first iteration of the leaf's send, the relay's receive-and-send
    and the root's receive in sequence (3 ms; unfused the relay's receive and send are two
    steps: 4 ms), so 102 ms; the price picks that program (3 channels, an ``rrs``)."""
    from collsynth.tens.cost_models.runtime import Calibration, program_of, runtime_times
    from collsynth.tens.runtime_program import program_features
    s, inst = three_trees()
    cal = Calibration("c", "s", "", {"link": 1.0}, {"link": 0.0}, {"link": 0.0}, tb_rate=1e15, reduce_rate=1e15,
                      step_s=1e-3, launch_s=0.0, tb_s=0.0, buff_bytes=2000)
    seconds = lambda text: float(runtime_times(program_features(text, inst), [3e5], cal)[0])  # noqa: E731
    program, grid = program_of(s, inst, seconds)
    assert grid == 1 and ET.fromstring(program).get("nchannels") == "3" and 'type="rrs"' in program
    assert seconds(program) == pytest.approx(0.102)
    assert seconds(to_msccl_xml(s, inst)) >= 0.2
