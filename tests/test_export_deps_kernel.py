"""The implied-dependency pass of the MSCCL export (:func:`collsynth.tens.export_deps.implied_dependencies_removed`,
a compiled walk) against the straightforward Python pass it replaced (kept here as the
reference: vector clocks as numpy rows, :class:`graphlib.TopologicalSorter` for the order):
the same dependencies kept, in the same order, on random thread blocks and waits (ties,
repeated and same-thread-block waits), a cycle refused by both; and whole exports of random
schedules written identically with either pass."""

from __future__ import annotations

from graphlib import CycleError, TopologicalSorter

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from collsynth.tens import export, export_deps
from collsynth.tens.export import to_msccl_xml
from collsynth.tens.export_deps import implied_dependencies_removed, wait_graph

from builders import topologies
from test_export_fuse import random_tree_schedule


def reference_pass(tbs: dict, deps: dict) -> dict:
    where: dict = {}
    for lst in tbs.values():
        for tb_id, (_, ops) in enumerate(lst):
            for k, op in enumerate(ops):
                where[op] = (tb_id, k)
    sizes = {g: len(lst) for g, lst in tbs.items()}
    gpu_of = {op: g for g, lst in tbs.items() for _, ops in lst for op in ops}
    known, out = {}, {}
    for op in TopologicalSorter(wait_graph(tbs, deps)).static_order():
        if op not in where:
            continue
        tb, k = where[op]
        ops_of_tb = tbs[gpu_of[op]][tb][1]
        clock = known[ops_of_tb[k - 1]].copy() if k else np.zeros(sizes[gpu_of[op]], dtype=np.int64)
        mine = reference_needed(deps.get(op, ()), clock, where, known, tb)
        for d in deps.get(op, ()):
            np.maximum(clock, known[d], out=clock)
        clock[tb] = k + 1
        known[op] = clock
        if op in deps:
            out[op] = mine
    return out


def reference_needed(ds, clock, where, known, own_tb):
    latest = {}
    for d in ds:
        t, k = where[d]
        if t == own_tb or clock[t] >= k + 1:
            continue
        if t not in latest or where[latest[t]][1] < k:
            latest[t] = d
    cands = list(latest.values())
    keep = {d for x, d in enumerate(cands)
            if not any(y != x and known[e][where[d][0]] >= where[d][1] + 1 for y, e in enumerate(cands))}
    out, seen = [], set()
    for d in ds:
        if d in keep and d not in seen:
            out.append(d)
            seen.add(d)
    return out


@st.composite
def programs(draw, cyclic=False):
    """GPUs of thread blocks of ops (op ``(g, i)`` the ``i``-th op of GPU ``g`` in a random
    order of time); each op waits for up to four earlier ops of its GPU (repeats, its own
    thread block's, ties in position); with ``cyclic`` one op also waits for a later one."""
    tbs, deps, ops_of = {}, {}, {}
    for g in range(draw(st.integers(1, 3))):
        n = draw(st.integers(1, 14))
        block = draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
        lst = [((g, t), [(g, i) for i in range(n) if block[i] == t]) for t in sorted(set(block))]
        tbs[g] = lst
        ops_of[g] = [(g, i) for i in range(n)]
        for i in range(1, n):
            waits = draw(st.lists(st.integers(0, i - 1), max_size=4))
            if waits or draw(st.booleans()):
                deps[(g, i)] = [(g, j) for j in waits]
    if cyclic:
        g = draw(st.sampled_from([g for g in ops_of if len(ops_of[g]) > 1] or [None]))
        if g is None:
            return None
        deps.setdefault((g, 0), []).append((g, len(ops_of[g]) - 1))
        deps.setdefault((g, len(ops_of[g]) - 1), []).append((g, 0))
    return tbs, deps


@settings(max_examples=300, deadline=None)
@given(programs())
def test_the_compiled_pass_keeps_what_the_python_pass_keeps(program):
    tbs, deps = program
    got, want = implied_dependencies_removed(tbs, deps), reference_pass(tbs, deps)
    assert got == want and all(got[op] == want[op] for op in want)


@settings(max_examples=60, deadline=None)
@given(programs(cyclic=True))
def test_circular_waits_are_refused_by_both(program):
    if program is None:
        return
    tbs, deps = program
    with pytest.raises(CycleError):
        reference_pass(tbs, deps)
    with pytest.raises(CycleError):
        implied_dependencies_removed(tbs, deps)


@settings(max_examples=15, deadline=None)
@given(topologies(max_nodes=6), st.randoms(use_true_random=False),
       st.sampled_from(["reduce_scatter", "allreduce", "allgather"]), st.booleans(), st.sampled_from(["links", "trees"]))
def test_exports_are_written_identically_with_either_pass(topo, rnd, kind, fuse, layout):
    schedule, inst = random_tree_schedule(topo, rnd, kind)
    new = to_msccl_xml(schedule, inst, fuse=fuse, layout=layout)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(export, "implied_dependencies_removed", reference_pass)
        old = to_msccl_xml(schedule, inst, fuse=fuse, layout=layout)
    assert new == old


def test_hand_worked_waits():
    """Ops a, b, c in thread blocks 0, 1, 2 of one GPU, d after a in thread block 0: b waits
    for a; c for a, b and d. Waiting for b implies a (b waited for it); d is a's successor in
    its thread block, so it implies a too, and neither b nor d implies the other: c keeps b, d."""
    tbs = {0: [("t0", ["a", "d"]), ("t1", ["b"]), ("t2", ["c"])]}
    assert implied_dependencies_removed(tbs, {"b": ["a"], "c": ["a", "b", "d", "b"]}) == {"b": ["a"], "c": ["b", "d"]}
    assert export_deps.implied_dependencies_removed(tbs, {"c": ["a"]}) == {"c": ["a"]}


@settings(max_examples=200, deadline=None)
@given(programs(), st.lists(st.tuples(st.integers(0, 2), st.integers(0, 15), st.integers(0, 2), st.integers(0, 15)),
                            max_size=4))
def test_circular_says_what_graphlib_finds(program, extra):
    """Random thread blocks and waits, plus a few arbitrary waits (forward, backward, onto ops
    no thread block holds): circular exactly when graphlib's topological sort raises."""
    tbs, deps = program
    deps = {k: list(v) for k, v in deps.items()}
    for g, i, h, j in extra:
        deps.setdefault((g, i), []).append((h, j))
    try:
        tuple(TopologicalSorter(wait_graph(tbs, deps)).static_order())
        want = False
    except CycleError:
        want = True
    assert export_deps.circular(tbs, deps) is want
