"""The step-ordered view and the arrival groups against a plain reference written from their
documented contract (:class:`~collsynth.tens.dependencies.StepView`,
:class:`~collsynth.tens.dependencies.Deps`): Python loops over the sends, a dict per group, no
counting sort and no table. Random schedules with pieces, copying and combining kinds, two
concurrent collectives, sends in and out of step order and step numbers too sparse for a
counting sort; the groups by the ``(chunk, node)`` table in both layouts and chunk by chunk."""

from __future__ import annotations

from unittest.mock import patch

import numpy as np
from hypothesis import given, settings, strategies as st

from collsynth.instances.instance import Instance
from collsynth.tens import dependencies as deps
from collsynth.tens.schedule import Schedule, empty, from_arrays
from test_cost_reference import concurrent_cases, priced_cases
from builders import instance_on


def reference_view(s: Schedule) -> dict:
    """The sends by step, ties in schedule order (Python's sort is stable)."""
    order = sorted(range(len(s)), key=lambda i: int(s.step[i]))
    steps = sorted(set(s.step.tolist()))
    rank = [steps.index(int(s.step[i])) for i in order]
    bounds = [rank.index(k) for k in range(len(steps))] + [len(s)]
    return {"order": None if order == list(range(len(s))) else order, "bounds": bounds, "steps": steps,
            "rank": rank, "chunk": s.chunk[order].tolist(), "src": s.src[order].tolist(),
            "dst": s.dst[order].tolist(), "lo": s.lo[order].tolist(), "hi": s.hi[order].tolist()}


def holds_from_start(instance: Instance, chunk: int, node: int) -> bool:
    """Whether ``node`` holds global chunk ``chunk`` before step 1: a chunk of a copying
    collective in that collective's precondition (a combining collective's chunks never)."""
    for off, coll in zip(instance.chunk_offsets, instance.collectives):
        if off <= chunk < off + coll.num_chunks:
            pre = coll.precondition
            return not coll.combining and node < pre.shape[1] and bool(pre[chunk - off, node])
    return False


def reference_groups(v: dict, instance: Instance) -> dict:
    """Arrival groups ``(dst, chunk)`` numbered by first arrival; what each position reads: the
    group at its source for its chunk, the arrivals there in earlier steps (none when the
    source holds the chunk from the start)."""
    n = len(v["rank"])
    number, members = {}, []
    for q in range(n):
        key = (v["dst"][q], v["chunk"][q])
        if key not in number:
            number[key] = len(members)
            members.append([])
        members[number[key]].append(q)
    ga = [number[(v["dst"][q], v["chunk"][q])] for q in range(n)]
    g_in, p = [], []
    for q in range(n):
        g = number.get((v["src"][q], v["chunk"][q]))
        earlier = 0 if g is None else sum(v["rank"][j] < v["rank"][q] for j in members[g])
        if earlier == 0 or holds_from_start(instance, v["chunk"][q], v["src"][q]):
            g, earlier = -1, 0
        g_in.append(g)
        p.append(earlier)
    pairs = [(q, j) for q in range(n) if g_in[q] >= 0 for j in members[g_in[q]][:p[q]]
             if v["lo"][j] < v["hi"][q] and v["lo"][q] < v["hi"][j]]
    gstart = np.cumsum([0] + [len(m) for m in members]).tolist()
    return {"ga": ga, "g_in": g_in, "p": p, "members": sum(members, []), "gstart": gstart, "pairs": pairs}


def assert_view(view: deps.StepView, s: Schedule) -> None:
    want = reference_view(s)
    assert (view.order is None) == (want["order"] is None)
    if view.order is not None:
        assert view.order.dtype == np.int32 and view.order.tolist() == want["order"]
    assert view.bounds.dtype == np.int64 and view.bounds.tolist() == want["bounds"]
    assert view.steps.dtype == s.step.dtype and view.steps.tolist() == want["steps"]
    for name in ("rank", "chunk", "src", "dst"):
        col = getattr(view, name)
        assert col.dtype == np.int32 and col.tolist() == want[name], name
    for name in ("lo", "hi"):  # the schedule's own bounds, or a copy in int32 when they fit
        col = getattr(view, name)
        assert col.dtype in (np.int32, getattr(s, name).dtype) and col.tolist() == want[name], name
    assert view.denom == s.denom


def assert_groups(got: tuple, want: dict) -> None:
    for name, col in zip(("ga", "g_in", "p", "members", "gstart"), got):
        assert col.dtype == (np.int64 if name == "gstart" else np.int32), name
        assert col.tolist() == want[name], name


def check(s: Schedule, inst: Instance) -> None:
    """The view, the groups by every path and the pairs, against the reference."""
    view = deps.step_view(s)
    assert_view(view, s)
    want = reference_groups(reference_view(s), inst)
    n = len(s)
    C = int(s.chunk.max()) + 1 if n else 0
    size = max(inst.topology.size, int(max(s.src.max(), s.dst.max())) + 1 if n else 0)
    held = deps.held_table(inst, C)
    for node_major in (False, True):
        assert_groups(deps._table_groups(view, held, C, size, node_major), want)
    assert_groups(deps._chunk_groups(view, held, C, size), want)
    for budget in ((deps.TABLE_PER_SEND, deps.TABLE_SLACK), (0, 0)):  # the table, then chunk by chunk
        with patch.object(deps, "TABLE_PER_SEND", budget[0]), patch.object(deps, "TABLE_SLACK", budget[1]):
            d = deps.dependencies(view, inst, want_pairs=True)
        assert_groups((d.ga, d.g_in, d.p, d.members, d.gstart), want)
        assert d.groups == len(want["gstart"]) - 1
        assert d.pairs[0].dtype == d.pairs[1].dtype == np.int32
        assert list(zip(d.pairs[0].tolist(), d.pairs[1].tolist())) == want["pairs"]


def arranged(s: Schedule, arrangement: str) -> Schedule:
    """``s`` as drawn, its sends in step order, or its steps spread too far apart for a
    counting sort (the comparison sort's path)."""
    if arrangement == "in step order":
        return s.select(np.argsort(s.step, kind="stable"))
    if arrangement == "sparse steps":
        return from_arrays(s.collective, s.nodes, s.chunks, chunk=s.chunk, src=s.src, dst=s.dst,
                           step=s.step.astype(np.int64) * (1 << 22), lo=s.lo, hi=s.hi, denom=s.denom, op=s.op, routing=s.routing)
    return s


ARRANGEMENTS = st.sampled_from(["as drawn", "in step order", "sparse steps"])


@settings(max_examples=60, deadline=None)
@given(case=priced_cases(), arrangement=ARRANGEMENTS)
def test_view_and_groups_match_the_reference(case, arrangement):
    sched, inst = case
    check(arranged(sched, arrangement), inst)


@settings(max_examples=40, deadline=None)
@given(case=concurrent_cases(), arrangement=ARRANGEMENTS)
def test_view_and_groups_of_concurrent_collectives_match_the_reference(case, arrangement):
    """Merged chunk ids: the sources of some hold their chunk from the start, others never."""
    sched, inst = case
    check(arranged(sched, arrangement), inst)


def test_an_empty_schedule_has_an_empty_view_and_no_groups():
    inst = instance_on("ring", {"nodes": 3})
    check(empty("allgather", 3, 3), inst)


def test_groups_of_a_small_allgather_by_hand():
    """Ring of 3, node ``i`` holding chunk ``i``: chunk 0 reaches node 1 in step 1 (group 0) and
    goes on to node 2 in step 2, reading that one arrival; chunk 2 reaches node 0 (group 1);
    the two sends of step 1 leave the chunks' own nodes and need nothing."""
    inst = instance_on("ring", {"nodes": 3})
    s = from_arrays("allgather", 3, 3, chunk=[0, 0, 2], src=[1, 0, 2], dst=[2, 1, 0], step=[2, 1, 1])
    view = deps.step_view(s)
    assert view.order.tolist() == [1, 2, 0] and view.bounds.tolist() == [0, 2, 3]
    assert deps._id_ranges(view.chunk, view.src, view.dst) == (0, 2, 0, 2, 0, 0)
    d = deps.dependencies(view, inst)
    assert d.ga.tolist() == [0, 1, 2] and d.g_in.tolist() == [-1, -1, 0] and d.p.tolist() == [0, 0, 1]
    assert d.members.tolist() == [0, 1, 2] and d.gstart.tolist() == [0, 1, 2, 3] and d.pairs is None
