"""Compiled walks of an MSCCL program's dependency graph, for the runtime cost model
(:mod:`collsynth.tens.runtime_program` defines what they compute and calls them).

Each walks the steps of one loop iteration in the order of a depth-first topological sort
(Kahn's algorithm with a stack: Kahn, "Topological sorting of large networks", CACM 5(11),
1962): the steps nothing waits for, in increasing order, then each step as its last
predecessor finishes, the latest released first. The graph comes as a compressed row list:
the edges out of step ``u`` are ``succ[out_ptr[u]:out_ptr[u + 1]]`` (and ``flag``, ``weight``
alike), in the order the program lists them. Every walk returns how many steps it reached:
fewer than ``n`` means the dependencies have a cycle (the caller refuses the program).

The arithmetic is the Python loops' it replaced, operation for operation and in the same
order (``tests/test_runtime_kernels.py`` checks the results equal, bit for bit, with
hypothesis on random programs), so a price does not change with the kernels.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["compressed_rows", "step_levels", "heaviest_path", "chain_finish", "warm"]


def compressed_rows(n: int, pred: np.ndarray, succ: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(order, out_ptr, succ_sorted, indeg)``: the edges ``pred[e] -> succ[e]`` of ``n``
    steps sorted by predecessor, stably (each step's edges in their given order; ``order[k]``
    the edge at position ``k``), the first position of each step's edges (``n + 1`` entries)
    and each step's number of predecessors.

    >>> [a.tolist() for a in compressed_rows(3, np.array([1, 0, 1]), np.array([2, 1, 0]))]
    [[1, 0, 2], [0, 1, 3, 3], [1, 2, 0], [1, 1, 1]]
    """
    pred, succ = np.asarray(pred, dtype=np.int64), np.asarray(succ, dtype=np.int64)
    order = np.argsort(pred, kind="stable")
    out_ptr = np.searchsorted(pred[order], np.arange(n + 1))
    return order, out_ptr, succ[order], np.bincount(succ, minlength=n)


@njit(cache=True, nogil=True)
def walk_order(n, out_ptr, succ, indeg):
    """``(order, reached)``: the steps in the order a walk from the steps with no predecessor
    visits them (a stack; a step pushed when its last predecessor is visited); ``reached`` < ``n``
    where the edges hold a cycle. The kernels below relax their values along this order."""
    deg = indeg.copy()
    stack = np.empty(n, dtype=np.int64)
    order = np.empty(n, dtype=np.int64)
    top = 0
    for u in range(n):
        if deg[u] == 0:
            stack[top] = u
            top += 1
    seen = 0
    while top > 0:
        top -= 1
        u = stack[top]
        order[seen] = u
        seen += 1
        for e in range(out_ptr[u], out_ptr[u + 1]):
            v = succ[e]
            deg[v] -= 1
            if deg[v] == 0:
                stack[top] = v
                top += 1
    return order, seen


@njit(cache=True, nogil=True)
def step_levels(n, out_ptr, succ, weight, indeg):
    """``(level, reached)``: the largest sum of edge weights ``weight`` (integers) on a chain of
    edges into each step, 0 for a step with no predecessor."""
    level = np.zeros(n, dtype=np.int64)
    order, seen = walk_order(n, out_ptr, succ, indeg)
    for i in range(seen):
        u = order[i]
        for e in range(out_ptr[u], out_ptr[u + 1]):
            v = succ[e]
            level[v] = max(level[v], level[u] + weight[e])
    return level, seen


@njit(cache=True, nogil=True)
def heaviest_path(n, out_ptr, succ, weight, indeg):
    """``(path, reached)``: the steps of a heaviest chain (the sum of the node weights
    ``weight``, floats, largest) in order; of equal ones the first the walk found."""
    best = weight.astype(np.float64).copy()
    came = np.full(n, -1, dtype=np.int64)
    order, seen = walk_order(n, out_ptr, succ, indeg)
    for i in range(seen):
        u = order[i]
        for e in range(out_ptr[u], out_ptr[u + 1]):
            v = succ[e]
            if best[u] + weight[v] > best[v]:
                best[v] = best[u] + weight[v]
                came[v] = u
    count, v = 0, np.argmax(best) if n > 0 else -1
    while v >= 0:
        count += 1
        v = came[v]
    path = np.empty(count, dtype=np.int64)
    v = np.argmax(best) if n > 0 else -1
    while v >= 0:
        count -= 1
        path[count] = v
        v = came[v]
    return path, seen


@njit(cache=True, nogil=True)
def chain_finish(n, out_ptr, succ, transfer, copies, q, indeg):
    """``(latest, reached)``: when the last step finishes, in chunk copy times, each step
    copying ``copies[step]`` chunks and a transfer edge (``transfer``) letting its receive start
    a slice's share ``q`` of its send's copy after the send started (any other edge waits for
    the whole step): :func:`collsynth.tens.runtime_program.pipelined_copies`."""
    start = np.zeros(n)
    last = np.zeros(n)
    done = np.zeros(n)
    order, seen = walk_order(n, out_ptr, succ, indeg)
    for i in range(seen):
        u = order[i]
        c, su = copies[u], start[u]
        first = su + q * c if c > 0 else su
        a, b = su + c, last[u] + q * c
        end = b if b > a else a
        done[u] = end
        for e in range(out_ptr[u], out_ptr[u + 1]):
            v = succ[e]
            ready = first if transfer[e] else end
            if ready > start[v]:
                start[v] = ready
            if end > last[v]:
                last[v] = end
    latest = 0.0
    for u in range(n):
        if done[u] > latest:
            latest = done[u]
    return latest, seen


def warm() -> None:
    """Compile (or load from numba's cache) the walks, on a chain of two steps."""
    order, out_ptr, succ, indeg = compressed_rows(2, np.array([0]), np.array([1]))
    step_levels(2, out_ptr, succ, np.ones(1, dtype=np.int64), indeg)
    heaviest_path(2, out_ptr, succ, np.ones(2), indeg)
    chain_finish(2, out_ptr, succ, np.ones(1, dtype=np.bool_), np.ones(2), 0.5, indeg)
