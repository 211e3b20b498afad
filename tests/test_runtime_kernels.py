"""The runtime model's compiled walks of a program's dependency graph
(:mod:`collsynth.tens.runtime_kernels`) against straightforward Python walks (the loops they
replaced, kept here as the reference): equal results, bit for bit, on random dependency graphs
(acyclic, with ties, transfer and plain edges), and a cycle refused by both; plus hand-worked
chains."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsynth import InputError
from collsynth.tens import runtime_program as rp


def reference_levels(n, pred, succ, transfer, forward_wait):
    """Kahn's walk with a list as the stack, the edges sorted by predecessor (stably)."""
    order = np.argsort(pred, kind="stable")
    pred, succ = pred[order], succ[order]
    weight = np.where(transfer[order], forward_wait[succ], 1)
    indeg = np.bincount(succ, minlength=n)
    out_ptr = np.searchsorted(pred, np.arange(n + 1))
    level = np.zeros(n, dtype=np.int64)
    stack, seen = list(np.flatnonzero(indeg == 0)), 0
    while stack:
        u = stack.pop()
        seen += 1
        for e in range(out_ptr[u], out_ptr[u + 1]):
            v = succ[e]
            level[v] = max(level[v], level[u] + weight[e])
            indeg[v] -= 1
            if indeg[v] == 0:
                stack.append(v)
    return level if seen == n else None


def reference_path(n, pred, succ, weight):
    order = np.argsort(pred, kind="stable")
    pred, succ = pred[order], succ[order]
    indeg = np.bincount(succ, minlength=n)
    out_ptr = np.searchsorted(pred, np.arange(n + 1))
    best, came = weight.astype(np.float64).copy(), np.full(n, -1)
    stack, seen = list(np.flatnonzero(indeg == 0)), 0
    while stack:
        u = stack.pop()
        seen += 1
        for e in range(out_ptr[u], out_ptr[u + 1]):
            v = succ[e]
            if best[u] + weight[v] > best[v]:
                best[v], came[v] = best[u] + weight[v], u
            indeg[v] -= 1
            if indeg[v] == 0:
                stack.append(v)
    if seen < n:
        return None
    path, v = [], int(np.argmax(best))
    while v >= 0:
        path.append(v)
        v = came[v]
    return path[::-1]


def reference_copies(n, pred, succ, transfer, copies, slice_shares=(0.5, 1.0)):
    outs = [[] for _ in range(n)]
    for u, v, t in zip(pred.tolist(), succ.tolist(), transfer.tolist()):
        outs[u].append((v, t))
    indeg = np.bincount(succ, minlength=n).tolist()
    cop = np.asarray(copies, dtype=np.float64).tolist()
    out = []
    for q in slice_shares:
        start, last, done = [0.0] * n, [0.0] * n, [0.0] * n
        deg, stack, seen = list(indeg), [u for u in range(n) if indeg[u] == 0], 0
        while stack:
            u = stack.pop()
            seen += 1
            c, su = cop[u], start[u]
            first = su + q * c if c > 0 else su
            done[u] = end = max(su + c, last[u] + q * c)
            for v, t in outs[u]:
                ready = first if t else end
                if ready > start[v]:
                    start[v] = ready
                if end > last[v]:
                    last[v] = end
                deg[v] -= 1
                if deg[v] == 0:
                    stack.append(v)
        if seen < n:
            return None
        out.append(max(done, default=0.0))
    return tuple(out)


@st.composite
def graphs(draw, cyclic=False):
    """A dependency graph of ``n`` steps: edges between steps in a random order's direction
    (acyclic), some repeated, in random order; with ``cyclic`` one edge back as well."""
    n = draw(st.integers(1, 24))
    rank = draw(st.permutations(range(n)))
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n))
    edges = [(a, b) if rank[a] < rank[b] else (b, a) for a, b in pairs if a != b]
    if cyclic and n > 1:
        a, b = draw(st.sampled_from([(a, b) for a in range(n) for b in range(n) if rank[a] < rank[b]]))
        edges += [(a, b), (b, a)]
    pred = np.array([a for a, _ in edges], dtype=np.int64)
    succ = np.array([b for _, b in edges], dtype=np.int64)
    transfer = np.array(draw(st.lists(st.booleans(), min_size=len(edges), max_size=len(edges))), dtype=bool)
    halves = st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 3.0])  # ties on purpose
    copies = np.array(draw(st.lists(st.one_of(halves, st.floats(0, 8)), min_size=n, max_size=n)))
    weight = np.array(draw(st.lists(st.one_of(halves, st.floats(0.5, 40)), min_size=n, max_size=n)))
    forward = np.array(draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)), dtype=np.int64)
    return n, pred, succ, transfer, copies, weight, forward


@settings(max_examples=300, deadline=None)
@given(graphs())
def test_the_compiled_walks_equal_the_python_walks_bit_for_bit(g):
    n, pred, succ, transfer, copies, weight, forward = g
    assert rp.step_rounds(n, pred, succ, transfer, forward).tolist() == reference_levels(
        n, pred, succ, transfer, forward).tolist()
    assert rp._longest_path(n, pred, succ, weight).tolist() == reference_path(n, pred, succ, weight)
    got, want = rp.pipelined_copies(n, pred, succ, transfer, copies), reference_copies(n, pred, succ, transfer, copies)
    assert [x.hex() for x in map(float, got)] == [x.hex() for x in want]


@settings(max_examples=60, deadline=None)
@given(graphs(cyclic=True))
def test_a_cycle_is_refused_by_every_walk_as_by_the_python_walks(g):
    n, pred, succ, transfer, copies, weight, forward = g
    if n < 2:
        return
    assert reference_levels(n, pred, succ, transfer, forward) is None
    for walk in (lambda: rp.step_rounds(n, pred, succ, transfer, forward),
                 lambda: rp._longest_path(n, pred, succ, weight),
                 lambda: rp.pipelined_copies(n, pred, succ, transfer, copies)):
        with pytest.raises(InputError, match="cycle"):
            walk()


def test_hand_worked_chain_of_forwards_and_a_relay():
    """s -> rcs -> r: copies of 1 chunk each, a forward half a chunk or a whole one behind:
    1 + 0.5 + 0.5 = 2 and 3; rounds 0, 0, 0 when forwards pass slices on, 0, 1, 2 when not;
    the heaviest path of node weights 1, 5, 1 over a side branch 0 -> 3 (weight 2) is 0, 1, 2."""
    pred, succ, xfer = np.array([0, 1, 0]), np.array([1, 2, 3]), np.array([True, True, False])
    assert rp.pipelined_copies(4, pred, succ, xfer, np.array([1.0, 1.0, 1.0, 0.0])) == (2.0, 3.0)
    assert rp.step_rounds(4, pred, succ, xfer, np.zeros(4, dtype=np.int64)).tolist() == [0, 0, 0, 1]
    assert rp.step_rounds(4, pred, succ, xfer, np.ones(4, dtype=np.int64)).tolist() == [0, 1, 2, 1]
    assert rp._longest_path(4, pred, succ, np.array([1.0, 5.0, 1.0, 2.0])).tolist() == [0, 1, 2]


WARM_CHILD = textwrap.dedent("""
    import json
    from numba.core.dispatcher import Dispatcher
    from collsynth.instances.generators import build
    from collsynth.instances.instance import make_instance
    from collsynth.solvers import compiling
    from collsynth.tens import export_deps, runtime_kernels
    from collsynth.tens.export_choice import chosen_export
    from collsynth.tens.runtime_program import program_features
    from collsynth.tens.schedule import from_sends

    def signatures():
        return {f"{m.__name__}.{k}": len(v.signatures) for m in (runtime_kernels, export_deps)
                for k, v in vars(m).items() if isinstance(v, Dispatcher)}

    assert "runtime" in compiling.tasks_for([])
    compiling.run_task("runtime")
    warmed = signatures()
    inst = make_instance(build("ring", {"nodes": 3, "bidirectional": False}), "allgather")
    hops = [(c, 0, 1, (c + k) % 3, (c + k + 1) % 3, k + 1) for c in range(3) for k in range(2)]
    text = chosen_export(from_sends(hops, "allgather", 3, 3), inst, layouts=("trees",), fuses=(True,)).text
    program_features(text, inst, {"link": "read"})
    print(json.dumps({"warmed": warmed, "after": signatures()}))
""")


def test_collsynth_warmup_s_runtime_task_loads_every_walk_a_price_then_uses():
    """``collsynth warmup``'s task list holds the runtime model's walks and the export's
    implied-dependency pass, and once that task ran, an export and its program's features (a
    3-GPU ring with receive-and-send steps) compile no further kernel."""
    done = subprocess.run([sys.executable, "-c", WARM_CHILD], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout)
    assert all(got["warmed"][f"collsynth.tens.{k}"] >= 1 for k in (
        "runtime_kernels.step_levels", "runtime_kernels.heaviest_path", "runtime_kernels.chain_finish",
        "export_deps._implied_kernel"))
    assert got["after"] == got["warmed"]
