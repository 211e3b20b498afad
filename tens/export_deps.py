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
from graphlib import TopologicalSorter

import numpy as np

__all__ = ["implied_dependencies_removed", "op_dependencies", "program_order", "wait_graph"]


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


def implied_dependencies_removed(tbs: dict, deps: dict) -> dict[tuple, list[tuple]]:
    """``deps`` (op -> the ops it waits for, all on the op's GPU) without the dependencies that
    program order in ``tbs`` (GPU -> ``[(key, ops)]`` in thread block id order) and the other
    dependencies imply (see the module doc); each op's remaining dependencies keep their order.

    Three ops on one GPU: ``b`` waits for ``a``, ``c`` for ``a`` and ``b``. Waiting for ``b``
    implies waiting for ``a``:

    >>> tbs = {0: [(("recv", 1, 0), ["a"]), (("recv", 2, 0), ["b"]), (("send", 3, 0), ["c"])]}
    >>> implied_dependencies_removed(tbs, {"b": ["a"], "c": ["a", "b"]})
    {'b': ['a'], 'c': ['b']}
    """
    where: dict = {}
    for lst in tbs.values():
        for tb_id, (_, ops) in enumerate(lst):
            for k, op in enumerate(ops):
                where[op] = (tb_id, k)
    sizes = {g: len(lst) for g, lst in tbs.items()}
    gpu_of = {op: g for g, lst in tbs.items() for _, ops in lst for op in ops}
    graph = wait_graph(tbs, deps)
    known: dict = {}  # op -> ops finished per thread block of its GPU when it has finished
    out: dict = {}
    for op in TopologicalSorter(graph).static_order():
        if op not in where:
            continue
        tb, k = where[op]
        ops_of_tb = tbs[gpu_of[op]][tb][1]
        clock = known[ops_of_tb[k - 1]].copy() if k else np.zeros(sizes[gpu_of[op]], dtype=np.int64)
        mine = _needed(deps.get(op, ()), clock, where, known, tb)
        for d in deps.get(op, ()):
            np.maximum(clock, known[d], out=clock)
        clock[tb] = k + 1
        known[op] = clock
        if op in deps:
            out[op] = mine
    return out


def _needed(ds, clock: np.ndarray, where: dict, known: dict, own_tb: int) -> list:
    """The dependencies ``ds`` of an op that neither ``clock`` (what its thread block's previous
    op guarantees) nor another of ``ds`` implies."""
    latest: dict[int, tuple] = {}
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
