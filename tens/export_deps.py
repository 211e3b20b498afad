"""The dependencies an MSCCL program must name: those no other wait already implies.

A thread block runs its steps in order, and a step that names a dependency (``depid``/``deps``)
starts only after that step of the other thread block has finished, which itself ran after
everything it waited for (Azure/msccl-executor-nccl ``src/device/msccl_kernel_impl.h``; Cowan
et al., "MSCCLang: Microsoft Collective Communication Language", ASPLOS 2023, Section 5).
Waiting is therefore transitive: a step need not name a step of its own thread block, nor an
earlier step of a thread block it already waits for, nor a step that another of its
dependencies (or an earlier step of its own thread block) has waited for. Every dependency
beyond the first costs the program a ``nop`` step, and the runtime runs those in sequence:
the reduce-scatter trees of a 16-GPU tree packing exported with every dependency named spend
192 of a thread block's 224 steps waiting.

:func:`implied_dependencies_removed` keeps, per op, only the dependencies that nothing else
already guarantees: a vector clock per op (for every thread block of its GPU, how many of its
ops are known to have finished when the op starts), computed in topological order of program
order and named dependencies, decides which dependency is implied.
"""

from __future__ import annotations

from collections import defaultdict
from graphlib import CycleError

import numpy as np
from numba import njit

__all__ = ["circular", "implied_dependencies_removed", "op_dependencies", "program_order", "wait_graph"]


def wait_graph(tbs: dict, deps: dict) -> dict:
    """op -> the ops it waits for: the previous op of its thread block (``tbs``: GPU ->
    ``[(key, ops)]``) and its dependencies (``deps``), as :class:`graphlib.TopologicalSorter` takes.

    >>> wait_graph({0: [("tb", ["a", "b"])]}, {"b": ["c"]}) == {"b": {"a", "c"}}
    True
    """
    graph = defaultdict(set)
    for lst in tbs.values():
        for _, ops in lst:
            for a, b in zip(ops, ops[1:]):
                graph[b].add(a)
    for op, ds in deps.items():
        graph[op].update(ds)
    return dict(graph)


def circular(tbs: dict, deps: dict) -> bool:
    """Whether the waits of :func:`wait_graph` (program order in ``tbs``, and ``deps``) are
    circular, as :class:`graphlib.TopologicalSorter` would find (a walk of Kahn's algorithm,
    :func:`collsynth.tens.runtime_kernels.step_levels`, that does not reach every op).

    >>> circular({0: [("tb", ["a", "b"])]}, {"a": ["b"]}), circular({0: [("tb", ["a", "b"])]}, {"b": ["a"]})
    (True, False)
    """
    from .runtime_kernels import compressed_rows, step_levels
    ids: dict = {}
    pred, succ = [], []
    for lst in tbs.values():
        for _, ops in lst:
            for a, b in zip(ops, ops[1:]):
                pred.append(ids.setdefault(a, len(ids)))
                succ.append(ids.setdefault(b, len(ids)))
    for op, ds in deps.items():
        u = ids.setdefault(op, len(ids))
        for d in ds:
            pred.append(ids.setdefault(d, len(ids)))
            succ.append(u)
    n = len(ids)
    _, out_ptr, after, indeg = compressed_rows(n, np.array(pred, dtype=np.int64), np.array(succ, dtype=np.int64))
    return bool(step_levels(n, out_ptr, after, np.zeros(len(after), dtype=np.int64), indeg)[1] < n)


def implied_dependencies_removed(tbs: dict, deps: dict) -> dict[tuple, list[tuple]]:
    """``deps`` (op -> the ops it waits for, all on the op's GPU) without the dependencies that
    program order in ``tbs`` (GPU -> ``[(key, ops)]`` in thread block id order) and the other
    dependencies imply (see the module doc); each op's remaining dependencies keep their order.
    Raises :class:`graphlib.CycleError` when the waits are circular.

    Three ops on one GPU: ``b`` waits for ``a``, ``c`` for ``a`` and ``b``. Waiting for ``b``
    implies waiting for ``a``:

    >>> tbs = {0: [(("recv", 1, 0), ["a"]), (("recv", 2, 0), ["b"]), (("send", 3, 0), ["c"])]}
    >>> implied_dependencies_removed(tbs, {"b": ["a"], "c": ["a", "b"]})
    {'b': ['a'], 'c': ['b']}
    """
    ops, ids, tb, pos, width, prev = [], {}, [], [], [], []
    for lst in tbs.values():
        for tb_id, (_, tb_ops) in enumerate(lst):
            for k, op in enumerate(tb_ops):
                ids[op] = len(ops)
                prev.append(len(ops) - 1 if k else -1)
                ops.append(op)
                tb.append(tb_id)
                pos.append(k)
                width.append(len(lst))
    waiting = [op for op in deps if op in ids]
    owner = np.array([ids[op] for op in waiting], dtype=np.int64)
    counts = np.zeros(len(ops) + 1, dtype=np.int64)
    counts[owner + 1] = [len(deps[op]) for op in waiting]
    ptr = np.cumsum(counts)  # op u's dependencies at ptr[u]:ptr[u + 1], in its list's order
    listed = np.array([ids[d] for op in waiting for d in deps[op]], dtype=np.int64)
    entry_owner = np.repeat(owner, counts[owner + 1])
    by_id = listed[np.argsort(entry_owner, kind="stable")]
    order, keep = _implied_kernel(np.array(tb, dtype=np.int64), np.array(pos, dtype=np.int64),
                                  np.array(width, dtype=np.int64), np.array(prev, dtype=np.int64), ptr, by_id)
    if len(order) < len(ops):
        raise CycleError("the waits of the program's ops are circular")
    has = np.zeros(len(ops), dtype=np.bool_)
    has[owner] = True
    out = {ops[u]: [] for u in order[has[order]].tolist()}
    kept = np.flatnonzero(keep)
    for u, d in zip(np.sort(entry_owner)[kept].tolist(), by_id[kept].tolist()):
        out[ops[u]].append(ops[d])
    return out


@njit(cache=True, nogil=True)
def _implied_kernel(tb, pos, width, prev, dep_ptr, dep_ids):
    """``(order, keep)``: the ops in a topological order of program order and dependencies
    (fewer than all of them when the waits are circular), and per dependency entry whether it
    is kept (:func:`implied_dependencies_removed`: not implied by the op's previous op in its
    thread block, by another kept one, nor listed before). Each op's clock (ops finished per
    thread block of its GPU, ``width`` of them) lives at ``off[op]`` in one flat array."""
    n = len(tb)
    off = np.zeros(n + 1, dtype=np.int64)
    for u in range(n):
        off[u + 1] = off[u] + width[u]
    clk = np.zeros(off[n], dtype=np.int32)
    indeg = np.zeros(n, dtype=np.int64)
    succ_ptr = np.zeros(n + 1, dtype=np.int64)
    for u in range(n):  # edges into u: its previous op and its dependencies
        if prev[u] >= 0:
            succ_ptr[prev[u] + 1] += 1
            indeg[u] += 1
        for j in range(dep_ptr[u], dep_ptr[u + 1]):
            succ_ptr[dep_ids[j] + 1] += 1
            indeg[u] += 1
    for u in range(n):
        succ_ptr[u + 1] += succ_ptr[u]
    fill = succ_ptr[:-1].copy()
    succ = np.empty(succ_ptr[n], dtype=np.int64)
    for u in range(n):
        if prev[u] >= 0:
            succ[fill[prev[u]]] = u
            fill[prev[u]] += 1
        for j in range(dep_ptr[u], dep_ptr[u + 1]):
            succ[fill[dep_ids[j]]] = u
            fill[dep_ids[j]] += 1
    keep = np.zeros(len(dep_ids), dtype=np.bool_)
    latest = np.full(max(1, width.max()) if n else 1, -1, dtype=np.int64)
    touched = np.empty(len(latest), dtype=np.int64)
    order = np.empty(n, dtype=np.int64)
    stack = np.empty(n, dtype=np.int64)
    top, done = 0, 0
    for u in range(n):
        if indeg[u] == 0:
            stack[top] = u
            top += 1
    while top > 0:
        top -= 1
        u = stack[top]
        order[done] = u
        done += 1
        base, w, t_u = off[u], width[u], tb[u]
        if prev[u] >= 0:
            clk[base:base + w] = clk[off[prev[u]]:off[prev[u]] + w]
        ntouched = 0
        for j in range(dep_ptr[u], dep_ptr[u + 1]):  # the latest dependency per other thread block not yet known
            d = dep_ids[j]
            t = tb[d]
            if t == t_u or clk[base + t] >= pos[d] + 1:
                continue
            if latest[t] < 0:
                touched[ntouched] = t
                ntouched += 1
                latest[t] = d
            elif pos[latest[t]] < pos[d]:
                latest[t] = d
        for x in range(ntouched):  # kept: implied by no other candidate
            d = latest[touched[x]]
            implied = False
            for y in range(ntouched):
                if y != x and clk[off[latest[touched[y]]] + tb[d]] >= pos[d] + 1:
                    implied = True
                    break
            if not implied:
                for j in range(dep_ptr[u], dep_ptr[u + 1]):  # its first listing only
                    if dep_ids[j] == d:
                        keep[j] = True
                        break
        for x in range(ntouched):
            latest[touched[x]] = -1
        for j in range(dep_ptr[u], dep_ptr[u + 1]):
            d = dep_ids[j]
            for t in range(w):
                if clk[off[d] + t] > clk[base + t]:
                    clk[base + t] = clk[off[d] + t]
        clk[base + t_u] = pos[u] + 1
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            v = succ[e]
            indeg[v] -= 1
            if indeg[v] == 0:
                stack[top] = v
                top += 1
    return order[:done], keep


def warm() -> None:
    """Compile (or load from numba's cache) the implied-dependency pass's kernel."""
    implied_dependencies_removed({0: [("a", ["x"]), ("b", ["y"])]}, {"y": ["x"]})


def program_order(step: np.ndarray, waits: np.ndarray, on: np.ndarray) -> np.ndarray:
    """Sends in program order: by step, then by depth (how many transfers in sequence, at
    least, brought the data a send carries: one more than the deepest send ``on[k]`` that
    send ``waits[k]`` waits for), then schedule order. In a combining collective the receives
    of one piece reduce one after another in program order, so the piece that arrives last
    (a relay's sum) is reduced last and the others do not wait behind it, as ForestColl's
    reduction trees chain them (liangyuRain/mscclpp-public, ``pipeline_msccl_xml/``: a root's
    receive from its relay is its last ``rrc``).

    >>> program_order(np.array([1, 2, 2, 2]), np.array([1]), np.array([0])).tolist()  # 1 waits for 0
    [0, 2, 3, 1]
    """
    step = np.asarray(step, dtype=np.int64)
    depth = np.zeros(len(step), dtype=np.int64)
    waits, on = np.asarray(waits, dtype=np.int64), np.asarray(on, dtype=np.int64)
    by_step = np.argsort(step[waits], kind="stable") if len(waits) else waits
    for k in by_step.tolist():  # a send waits for sends of earlier steps: their depth is final
        depth[waits[k]] = max(depth[waits[k]], depth[on[k]] + 1)
    return np.lexsort((np.arange(len(step)), depth, step))


def op_dependencies(s, order: np.ndarray, waits: np.ndarray, on: np.ndarray, combining: bool) -> dict[tuple, list[tuple]]:
    """The ops of the MSCCL export of ``s`` each op waits for (:mod:`collsynth.tens.export`'s
    module doc): send ``waits[k]`` for the receive of send ``on[k]`` (the data it carries),
    and in a ``combining`` collective each receive for the reads and receives before it
    (:func:`_anti_dependencies`; ``order``: program order). Ops are ``("S", i)`` (send ``i``
    at its source) and ``("R", i)`` (its receive).

    >>> from collsynth.tens.schedule import from_sends
    >>> # 0 and 2 reduce into 1 (step 1), 1 sends the sum to 2 (step 2): the data it carries,
    >>> # the second reduction into 1 after the first, 2's receive after its own part left
    >>> s = from_sends([(0, 0, 1, 0, 1, 1), (0, 0, 1, 2, 1, 1), (0, 0, 1, 1, 2, 2)], "reduce", 3, 1)
    >>> dict(op_dependencies(s, np.array([0, 1, 2]), np.array([2, 2]), np.array([0, 1]), True))
    {('S', 2): [('R', 0), ('R', 1)], ('R', 1): [('R', 0)], ('R', 2): [('S', 1)]}
    """
    deps: dict[tuple, list[tuple]] = defaultdict(list)
    for a, b in zip(np.asarray(waits).tolist(), np.asarray(on).tolist()):
        deps[("S", a)].append(("R", b))
    if combining and len(s):
        _anti_dependencies(s, order, deps)
    return deps


def _anti_dependencies(s, order: np.ndarray, deps: dict) -> None:
    """Combining collectives: a receive of a piece at v waits for v's sends of overlapping
    pieces in the same or earlier steps and for v's earlier receives of them (program order)."""
    by_node_chunk: dict[tuple[int, int], list[tuple[str, int]]] = defaultdict(list)
    for i in order.tolist():
        by_node_chunk[(int(s.src[i]), int(s.chunk[i]))].append(("S", i))
        by_node_chunk[(int(s.dst[i]), int(s.chunk[i]))].append(("R", i))
    lo, hi, step = s.lo.tolist(), s.hi.tolist(), s.step.tolist()
    for ops in by_node_chunk.values():
        recvs = [op for op in ops if op[0] == "R"]
        if not recvs:
            continue
        sends = [op for op in ops if op[0] == "S"]
        for k, (_, i) in enumerate(recvs):
            for _, j in sends:
                if step[j] <= step[i] and lo[j] < hi[i] and lo[i] < hi[j]:
                    deps[("R", i)].append(("S", j))
            for _, j in reversed(recvs[:k]):  # the latest earlier overlapping receive suffices
                if lo[j] < hi[i] and lo[i] < hi[j]:
                    deps[("R", i)].append(("R", j))
                    break
