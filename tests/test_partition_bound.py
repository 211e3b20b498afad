"""The partition bound of allreduce, reducing switches inside regions (tens/bounds/partitions.py):
values derived by hand (Patarasuk and Yuan's one switch, the unidirectional ring, one DGX-H100
box, a reducing switch, boxes summing inside on plain rails), the one-way gossip count it rests
on by exhaustive search over call sequences, and validity on random switched graphs against
every partition (searched exhaustively) and every verified schedule the producers make, and
against the TEN ILP's combining optimum."""

from __future__ import annotations

import json
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings

from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.solvers import pipeline
from collsynth.solvers.producers import Options
from collsynth.tens import bounds
from collsynth.tens.bounds.partitions import partition_bound, region_time
from collsynth.tens.ten import link_delays
from switch_strategies import switched

TOL = 1 + 1e-9


# ---- values by hand ------------------------------------------------------------------------------

def test_one_switch_is_patarasuk_and_yuan():
    """N GPUs on one switch, B each way: 2 (N - 1) / N * M / B (Patarasuk and Yuan, J. Parallel
    Distrib. Comput. 69(2), 2009, Section 3). N = 5, M = 10, B = 2: 2 * 4 / 5 * 10 / 2 = 8."""
    star = build("switch", {"nodes": 5}, bandwidth=2.0, alpha=0.0)
    got = partition_bound(make_instance(star, "allreduce", message_bytes=10.0), bounds.SyncSupply(bounds.arcs_of(star)),
                            "sync")
    assert got.value == pytest.approx(8.0, rel=1e-12) and got.witness == "k=5 regions"


def test_one_dgx_h100_box_certifies_the_reduce_scatter_allgather_time():
    """One DGX-H100 (8 GPUs, 450 GB/s into each from its NVSwitches), 1 GB: 2 * 7 / 8 * 1e9 /
    450e9 = 3.888... ms under sync's bandwidth time and, with the NVLink latency 0.47 us of each
    GPU's in-links, 3.888... ms + 0.47 us under event (the per-node cut proved 2.22 ms)."""
    box = build("dgx_h100", {"nodes": 1})
    b = bounds.instance_bounds(make_instance(box, "allreduce", message_bytes=1e9))
    assert b.part("sync_bandwidth").value == pytest.approx(2 * 7 / 8 * 1e9 / 450e9, rel=1e-12)
    assert b.event.value == pytest.approx(2 * 7 / 8 * 1e9 / 450e9 + 0.47e-6, rel=1e-9)
    assert b.event.source == "partition"


def test_eight_dgx_h100_boxes_take_the_boxes_as_regions():
    """Eight DGX-H100 boxes: each box (its GPUs and NVSwitches) a region, entered by 8 NICs of
    50 GB/s: 2 * 7 * 1e9 / (8 * 400e9) = 4.375 ms, the reduce-scatter plus allgather time
    2 * (56 / 64) * 1e9 / 400e9 (the cut of one box proved 2.5 ms)."""
    b = bounds.instance_bounds(make_instance(build("dgx_h100", {"nodes": 8}), "allreduce", message_bytes=1e9))
    assert b.part("sync_bandwidth").value == pytest.approx(4.375e-3, rel=1e-12)


def test_a_reducing_switch_sits_in_a_region():
    """A switch that reduces adds what it relays, so it sits in a region like a GPU: 4 GPUs
    around it, M = 8, B = 1, each GPU a region and the switch in GPU 0's: GPU 0's region is
    entered by the other three GPUs' links (3), each other region by one (1), so
    max(8 / 1, 2 * 3 * 8 / 6) = 8 = M / B, which NVLS meets (up once, the sum down once), not
    the 12 the same switch gives when it only forwards."""
    star = build("switch", {"nodes": 4, "reduce": True, "copy": True}, bandwidth=1.0, alpha=0.0)
    got = partition_bound(make_instance(star, "allreduce", message_bytes=8.0))
    assert got.value == pytest.approx(8.0, rel=1e-12)


def test_boxes_that_sum_inside_on_rails_that_do_not_take_the_ring_volume():
    """Eight DGX-H100 boxes whose NVSwitches reduce, on rails that only forward: each box (GPUs
    and reducing NVSwitches) a region, the rails in none: 2 * 7 * 1e9 / (8 * 400e9) = 4.375
    ms, as without NVLS (in-box sums save nothing across plain rails). With SHARP rails the
    rails reduce and must sit in a region, and nvls-tree (verified) meets about M / 400 GB/s =
    2.5 ms: the bound does not claim the ring volume there."""
    plain = make_instance(build("dgx_h100", {"nodes": 8, "nvls": True}), "allreduce", message_bytes=1e9)
    got = partition_bound(plain, bounds.SyncSupply(bounds.arcs_of(plain.topology)), "sync")
    assert got.value == pytest.approx(4.375e-3, rel=1e-12) and got.witness == "k=8 regions"
    sharp = make_instance(build("dgx_h100", {"nodes": 8, "nvls": True, "sharp": True}), "allreduce",
                          message_bytes=1e9)
    row, s = pipeline.run(sharp, "nvls-tree", Options(params={"pieces": 8}))
    assert row["verified"]
    assert partition_bound(sharp).value <= row["time_event_s"] * TOL < 4.375e-3


# ---- the one-way gossip count, by exhaustive search -------------------------------------------

def _fewest_calls(k: int) -> int:
    """Breadth-first search over what each of ``k`` parties knows (a bit mask each): the fewest
    one-way calls (the caller's knowledge added to the callee's) after which all know all."""
    start = tuple(1 << i for i in range(k))
    full = (1 << k) - 1
    seen, frontier, calls = {start}, [start], 0
    while frontier:
        if any(all(x == full for x in s) for s in frontier):
            return calls
        nxt = []
        for s in frontier:
            for a, b in itertools.permutations(range(k), 2):
                t = list(s)
                t[b] |= s[a]
                t = tuple(t)
                if t not in seen:
                    seen.add(t)
                    nxt.append(t)
        frontier, calls = nxt, calls + 1
    raise AssertionError("never")


@pytest.mark.parametrize("k", [2, 3, 4])
def test_one_way_gossip_needs_2k_minus_2_calls(k):
    assert _fewest_calls(k) == 2 * (k - 1)


# ---- validity on random switched graphs ----------------------------------------------------------

def _all_partitions(items):
    """Every partition of ``items`` into non-empty blocks."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in _all_partitions(rest):
        yield [[first]] + part
        for i in range(len(part)):
            yield part[:i] + [[first] + part[i]] + part[i + 1:]


def _exhaustive(topo, supply, M) -> float:
    """The largest region bound over every partition of the GPUs and every placement of each
    switch (in a region or in none)."""
    arcs, best = bounds.arcs_of(topo), 0.0
    gpus, sws = list(topo.npus), sorted(topo.switches)
    for part in _all_partitions(gpus):
        if len(part) < 2:
            continue
        for place in itertools.product(range(-1, len(part)), repeat=len(sws)):
            region = np.full(topo.size, -1)
            for i, block in enumerate(part):
                region[block] = i
            region[sws] = place
            best = max(best, region_time(arcs, region, M, supply))
    return best


VALID = ("ring", "bidirectional-ring", "bfb-ring", "bruck", "direct", "double-binary-tree", "rabenseifner",
         "recursive-doubling", "tree-packing")


@settings(max_examples=12, deadline=None)
@given(switched())
def test_every_partition_is_below_every_verified_schedule(topo):
    M = 2.4e5
    inst = make_instance(topo, "allreduce", message_bytes=M)
    arcs = bounds.arcs_of(topo)
    ex_sync, ex_event = _exhaustive(topo, bounds.SyncSupply(arcs), M), _exhaustive(topo, bounds.EventSupply(arcs), M)
    assert partition_bound(inst).value <= ex_event * TOL  # the search picks among these
    assert partition_bound(inst, bounds.SyncSupply(arcs), "sync").value <= ex_sync * TOL
    checked = 0
    for name in VALID:
        params = {"pieces": 4} if name == "tree-packing" else {}  # a shallow pipeline: a quick test
        row, sched = pipeline.run(inst, name, Options(time_limit=60, params=params))
        if not row["verified"]:
            assert row["status"] in ("skipped", "no-solution"), row["message"]
            continue
        checked += 1
        assert ex_event <= row["time_event_s"] * TOL, (name, ex_event, row["time_event_s"])
        assert ex_sync <= row["time_sync_s"] * TOL, (name, ex_sync, row["time_sync_s"])
    assert checked >= 2


# ---- against the TEN ILP's combining optimum (whole chunks, timesteps) -------------------------

@pytest.mark.parametrize("gen,params", [("ring", {"nodes": 3, "bidirectional": False}),
                                        ("ring", {"nodes": 4, "bidirectional": False}),
                                        ("ring", {"nodes": 4}), ("complete", {"nodes": 3}),
                                        ("mesh", {"dims": [2, 2]})])
def test_the_count_is_below_the_ten_ilp_combining_optimum(gen, params):
    """The argument in whole chunks: every GPU its own region, each of the ``C`` chunks crosses
    into regions ``2 (N - 1)`` times, a link carries one chunk per its delay; so every schedule
    has at least ``ceil(2 (N - 1) C / sum_l cap_l / k_l)`` timesteps; the partition bound in
    timesteps is at least that and at most the ILP's optimum, which meets it on the
    unidirectional rings (4 and 6, the ring allreduce)."""
    topo = build(gen, params, bandwidth=1e9, alpha=0.0)
    inst = make_instance(topo, "allreduce", message_bytes=3e5)
    row, _ = pipeline.run(inst, "ten-ilp-combining", Options(driver="horizon", time_limit=60))
    assert row["verified"]  # optimal, or optimal among its model's schedules (one reduction tree a chunk)
    delay, cap, _ = link_delays(topo, [inst.collective.chunk_bytes])
    n = len(topo.npus)
    count = math.ceil(2 * (n - 1) * inst.collective.num_used_chunks / float((cap / delay[0]).sum()) - 1e-9)
    got = bounds.instance_bounds(inst).part("timesteps", "partition")
    assert count <= got.value <= row["steps"], (count, got.label(), row["steps"])
    if gen == "ring" and not params.get("bidirectional", True):
        assert row["steps"] == got.value == count == 2 * (n - 1)


# ---- bad input: one line naming the file and the field, exit 2 ----------------------------------

UNREACHABLE = """name = "t"
[topology]
generator = "forestcoll_a100"
nodes = 1
failed_links = [[8, 3]]
[collective]
kind = "allreduce"
message_bytes = 1e6
"""
TOO_SMALL = """name = "t"
[topology]
generator = "switch"
nodes = 4
[collective]
kind = "reduce_scatter"
message_bytes = 8
"""


@pytest.mark.parametrize("text,extra,must", [
    (UNREACHABLE, [], ["topology", "node 0 cannot reach node 3"]),  # the switch's link into GPU 3 failed
    (TOO_SMALL, ["--param", "pieces=16"], ["collective.message_bytes", "at least 1 B a piece"]),  # 2 B a shard
])
def test_a_combining_collective_that_cannot_run_is_one_line(tmp_path, capsys, text, extra, must):
    from cli_errors import assert_one_error_line, run_cli

    path = tmp_path / "bad.toml"
    path.write_text(text)
    code, out, err = run_cli(["solve", path, "--producer", "tree-packing", *extra, "--json"], capsys)
    assert code == 2 and out == ""
    assert_one_error_line(err, [str(path), *must])


INSTANT = """name = "t"
[topology]
generator = "ndv2"
chassis = 2
inter_chassis = "switch"
switch_hop = "{hop}"
nvlink_alpha = 0.0
nic_alpha = 0.0
[collective]
kind = "reduce_scatter"
message_bytes = 1.6e6
"""
PIPELINED = """name = "t"
[topology]
generator = "switch"
nodes = 3
latency = "pipelined"
[collective]
kind = "allreduce"
message_bytes = 3e5
"""


@pytest.mark.parametrize("text,must", [
    (INSTANT.format(hop="instant"), ['topology.switch_hop = "instant"', 'expected "timestep"']),
    (PIPELINED, ['topology.latency = "pipelined"', 'expected "serial"']),
])
def test_instant_switch_hops_say_which_field_to_change(tmp_path, capsys, text, must):
    """TE-CCL's instant switch hop (and its pipelined latency) under a combining collective:
    refused in one line naming the file, the field and the value that works."""
    from cli_errors import assert_one_error_line, run_cli

    path = tmp_path / "instant.toml"
    path.write_text(text)
    code, out, err = run_cli(["solve", path, "--producer", "tree-packing", "--json"], capsys)
    assert code == 2 and out == ""
    assert_one_error_line(err, [str(path), *must])


def test_the_same_switches_with_a_timestep_hop_are_solved(tmp_path, capsys):
    """The value the refusal names works: the same NDv2 pair with the switch hop taking a
    timestep gives a verified reduce-scatter."""
    from cli_errors import run_cli

    path = tmp_path / "timestep.toml"
    path.write_text(INSTANT.format(hop="timestep"))
    code, out, err = run_cli(["solve", path, "--producer", "tree-packing", "--param", "pieces=4", "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["verified"]
