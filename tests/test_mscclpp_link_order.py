"""A declared link order (``link_order = "program"``) in MSCCL++ execution plans
(collsynth.tens.export_mscclpp): a send out of a GPU waits for the send before it out of that
GPU over the same link; where another thread block runs that one, the plan orders the two
thread blocks with a device semaphore (microsoft/mscclpp ``python/mscclpp/language/rank.py``
``Semaphore``: ``release`` adds one, ``acquire`` waits for a positive value and takes one;
``execution_kernel.hpp`` ``handleSemRelease``/``handleSemAcquire``). Plans are judged by the
interpreter of tests/mscclpp_sim.py and read back and verified, as in test_mscclpp_export.py."""

from __future__ import annotations

import json
from collections import defaultdict, deque
from dataclasses import replace

import pytest
from mscclpp_sim import run_plan

import collsynth as cs
from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.tens.export_mscclpp import to_mscclpp_plan
from collsynth.tens.peer_plans import read_mscclpp_plan
from collsynth.tens.peer_schedules import _routed
from collsynth.tens.readback import verified_mscclpp_plan
from collsynth.tens.schedule import from_sends
from collsynth.tens.verify import verify


def _peer_of(gpu: dict, tb: dict) -> int:
    """The rank a thread block's (one) channel connects to."""
    ch = tb["channels"][0]
    return [c for c in gpu["channels"] if c["channel_type"] == ch["channel_type"]][0]["connected_to"][
        ch["channel_ids"][0]]


def _semaphore_waits(plan: dict) -> set[tuple]:
    """``(gpu, releasing block's peer, plan chunk of the put before the release, acquiring
    block's peer, plan chunk of the put after the acquire)`` of every semaphore, read off the
    plan's ops."""
    out = set()
    for g, gpu in enumerate(plan["gpus"]):
        ends: dict[int, dict] = defaultdict(dict)
        for tb in gpu["threadblocks"]:
            puts = [(k, op["src_buff"][0]["index"]) for k, op in enumerate(tb["ops"]) if op["name"] == "put"]
            for k, op in enumerate(tb["ops"]):
                for sem in op.get("semaphore_ids", []):
                    if op["name"] == "sem_release":
                        ends[sem]["release"] = (_peer_of(gpu, tb), max(p for p in puts if p[0] < k)[1])
                    else:
                        ends[sem]["acquire"] = (_peer_of(gpu, tb), min(p for p in puts if p[0] > k)[1])
        out |= {(g, *e["release"], *e["acquire"]) for e in ends.values()}
    return out


def _multicast_allgather():
    """GPUs 0, 1, 2 around switch 3, two chunks a GPU (``2g``, ``2g + 1``). Each GPU sends
    ``2g`` into the switch in step 1 and ``2g + 1`` in step 2; the switch copies each to both
    other GPUs in the next step."""
    inst = make_instance(build("switch", {"nodes": 3, "unwind": 0}), "allgather", message_bytes=1 << 20,
                         chunks_per_node=2)
    sends = []
    for g in range(3):
        for j in range(2):
            sends.append((2 * g + j, 0, 1, g, 3, 1 + j))
            sends += [(2 * g + j, 0, 1, 3, v, 2 + j) for v in range(3) if v != g]
    return from_sends(sends, "allgather", 4, 6), inst


def test_each_put_waits_for_the_previous_send_over_the_link_by_hand():
    """GPU g's puts to its two peers run in two thread blocks. Nothing in the data orders them
    (g reads its own chunks; what arrives lands in cells no put reads), so without the
    declaration the plan has no semaphore. Declared: g's link into the switch carries chunk
    ``2g`` (step 1) before ``2g + 1`` (step 2); chunk ``2g`` is one send the switch copies, so
    both puts of ``2g + 1`` wait for both puts of ``2g``; the thread block to peer a runs its
    own put of ``2g`` first, so each block waits for the other's: two semaphores a GPU, by hand
    ``(g, a, 2g, b, 2g + 1)`` and ``(g, b, 2g, a, 2g + 1)`` (plan chunk = chunk: whole chunks,
    ranks = node ids)."""
    s, inst = _multicast_allgather()
    assert verify(s, inst) is None
    assert _semaphore_waits(to_mscclpp_plan(s, inst)) == set()
    declared = replace(s, link_order="program")
    plan = json.loads(json.dumps(to_mscclpp_plan(declared, inst)))
    a_b = [(g, *(v for v in range(3) if v != g)) for g in range(3)]
    assert _semaphore_waits(plan) == {(g, a, 2 * g, b, 2 * g + 1) for g, a, b in a_b} | \
        {(g, b, 2 * g, a, 2 * g + 1) for g, a, b in a_b}
    assert all(len(gpu["semaphores"]) == 2 for gpu in plan["gpus"])
    run_plan(plan, "allgather", 3, seeds=(0, 1))
    back = read_mscclpp_plan(verified_mscclpp_plan(declared, inst), inst)
    assert verify(_routed(back, inst), inst) is None


def _happens_before(gpu: dict):
    """``before(x, y)``: op ``x = (thread block, index)`` of the GPU precedes op ``y`` through its
    thread blocks' order and its semaphores (the k-th acquire of a semaphore after its k-th
    release)."""
    succ: dict[tuple, list[tuple]] = defaultdict(list)
    releases: dict[int, list[tuple]] = defaultdict(list)
    acquires: dict[int, list[tuple]] = defaultdict(list)
    for t, tb in enumerate(gpu["threadblocks"]):
        for k, op in enumerate(tb["ops"]):
            if k + 1 < len(tb["ops"]):
                succ[(t, k)].append((t, k + 1))
            for sem in op.get("semaphore_ids", []):
                (releases if op["name"] == "sem_release" else acquires)[sem].append((t, k))
    for sem, rel in releases.items():
        for r, a in zip(rel, acquires[sem]):
            succ[r].append(a)

    def before(x, y):
        seen, todo = {x}, deque([x])
        while todo:
            z = todo.popleft()
            if z == y:
                return True
            for w in succ[z]:
                if w not in seen:
                    seen.add(w)
                    todo.append(w)
        return False
    return before


def _unordered_link_pairs(schedule, inst, plan) -> tuple[int, int]:
    """``(pairs, unordered)``: consecutive sends out of a GPU into the switch (by step, then
    position) in different steps, and how many of them have a put of the later one not
    preceded (on that GPU, :func:`_happens_before`) by every put of the earlier one. A send's
    puts are the GPU's puts reading a cell of its piece from the collective's buffer (ranks =
    node ids, one chunk a GPU: cell ``chunk * denom + y``; a reduction reads its running sums
    in place, an allgather its copies)."""
    D, pairs, unordered = schedule.denom, 0, 0
    for g, gpu in enumerate(plan["gpus"]):
        before = _happens_before(gpu)
        puts = defaultdict(list)  # cell of the collective's buffer -> ops putting it
        for t, tb in enumerate(gpu["threadblocks"]):
            for k, op in enumerate(tb["ops"]):
                runs = [b for b in op.get("src_buff", []) if op["name"] == "put" and b["type"] != "s"]
                for x in (x for b in runs for x in range(b["index"], b["index"] + b["size"])):
                    puts[x].append((t, k))
        out = sorted((int(schedule.step[i]), i) for i in range(len(schedule)) if schedule.src[i] == g)
        for (sp, p), (sq, q) in zip(out, out[1:]):
            if sp == sq:
                continue
            ops_of = [{op for y in range(int(schedule.lo[i]), int(schedule.hi[i]))
                       for op in puts[int(schedule.chunk[i]) * D + y]} for i in (p, q)]
            assert ops_of[0] and ops_of[1]
            pairs += 1
            unordered += any(not before(x, y) for x in ops_of[0] for y in ops_of[1] if x != y)
    return pairs, unordered


@pytest.mark.parametrize("kind", ["reduce_scatter", "allgather"])
def test_tree_packing_on_a_switch_keeps_every_link_in_program_order(kind):
    """Tree packing's schedules through one switch (the reduction declares the order): every
    consecutive pair of sends out of a GPU in different steps is ordered in the plan; the
    interpreter runs the plan and its read-back verifies. The reduction exported as if
    undeclared leaves some pair unordered (the check can fail)."""
    inst = cs.make_instance({"generator": "switch", "nodes": 4, "unwind": 0}, kind, message_bytes=1 << 20)
    r = cs.solve(inst, "tree-packing")
    assert r.verified
    declared = replace(r.schedule, link_order="program")
    plan = json.loads(json.dumps(to_mscclpp_plan(declared, inst)))
    pairs, unordered = _unordered_link_pairs(declared, inst, plan)
    assert pairs > 0 and unordered == 0
    run_plan(plan, {"reduce_scatter": "reducescatter"}.get(kind, kind), 4)
    back = read_mscclpp_plan(verified_mscclpp_plan(declared, inst), inst)
    assert verify(_routed(back, inst), inst) is None
    if kind == "reduce_scatter":
        assert r.schedule.link_order == "program"
        ready = to_mscclpp_plan(replace(r.schedule, link_order="ready"), inst)
        assert _unordered_link_pairs(declared, inst, ready)[1] > 0


def _window_boundaries_ordered(plan: dict) -> list[bool]:
    """For every GPU and every pair of consecutive thread blocks to one peer (the windows of
    steps a long pair is cut into, in channel order): whether the later block's first put
    comes after the earlier block's last put (:func:`_happens_before`)."""
    out = []
    for gpu in plan["gpus"]:
        before = _happens_before(gpu)
        by_peer = defaultdict(list)
        for t, tb in enumerate(gpu["threadblocks"]):
            puts = [k for k, op in enumerate(tb["ops"]) if op["name"] == "put"]
            if puts:
                by_peer[_peer_of(gpu, tb)].append((tb["channels"][0]["channel_ids"][0], t, puts[0], puts[-1]))
        for windows in by_peer.values():
            windows.sort()
            out += [before((a[1], a[3]), (b[1], b[2])) for a, b in zip(windows, windows[1:])]
    return out


def test_a_windows_first_put_waits_for_the_previous_windows_last():
    """A 16-GPU ring allreduce (30 steps, a send to the next GPU in each) passes 64 ops per thread
    block, so each pair is cut into windows of steps, one thread block each: declared, every
    window's first put follows the previous window's last one; undeclared, some does not."""
    inst = cs.make_instance({"generator": "ring", "nodes": 16}, "allreduce", message_bytes=1 << 20)
    s = cs.solve(inst, "ring").schedule
    plan = json.loads(json.dumps(to_mscclpp_plan(replace(s, link_order="program"), inst)))
    ordered = _window_boundaries_ordered(plan)
    assert ordered and all(ordered)
    run_plan(plan, "allreduce", 16)
    assert not all(_window_boundaries_ordered(to_mscclpp_plan(s, inst)))
