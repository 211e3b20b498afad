"""Verifier throughput: sends verified per second on large allgather schedules.

Run with ``python -m pytest -m benchmark -s benchmarks/bench_verify.py`` (prints sends/s), or
``python benchmarks/bench_verify.py``. The schedules are BFS-tree allgathers (every shard
flows down a BFS tree of its owner, one hop per step): a 32x32 torus gives 1024*1023 ~ 1.05M
sends, a 10x10 torus (x1 chunk) ~ 1e4 and a 16x20 torus ~ 1e5.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order

from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.tens.schedule import from_arrays, reverse
from collsynth.tens.verify import verify


def bfs_allgather(topology, chunks_per_node: int = 1):
    """Allgather: node r's shard goes down a BFS tree rooted at r, arriving at depth d in step d."""
    la = topology.link_arrays
    adj = csr_matrix((np.ones(len(la)), (la.src, la.dst)), shape=(topology.size, topology.size))
    dist = topology.distances
    cols = {k: [] for k in ("chunk", "src", "dst", "step")}
    c = chunks_per_node
    for r in topology.npus:
        _, pred = breadth_first_order(adj, r, directed=True, return_predecessors=True)
        v = np.flatnonzero(pred >= 0)
        for j in range(c):
            cols["chunk"].append(np.full(len(v), r * c + j))
            cols["src"].append(pred[v])
            cols["dst"].append(v)
            cols["step"].append(dist[r, v])
    return from_arrays("allgather", topology.size, topology.size * c,
                       **{k: np.concatenate(x) for k, x in cols.items()})


def measure(dims, chunks_per_node=1, kind="allgather"):
    """Verify a BFS allgather (or its reversal, a reduce_scatter on the transpose); (sends, s)."""
    topo = build("torus", {"dims": list(dims)})
    sched = bfs_allgather(topo, chunks_per_node)
    if kind == "reduce_scatter":
        topo, sched = topo.transpose(), reverse(sched)
    inst = make_instance(topo, kind, chunks_per_node=chunks_per_node)
    t0 = time.perf_counter()
    v = verify(sched, inst)
    dt = time.perf_counter() - t0
    assert v is None, str(v)
    return len(sched), dt


@pytest.mark.benchmark
@pytest.mark.parametrize("kind", ["allgather", "reduce_scatter"])
@pytest.mark.parametrize("dims", [(16, 20), (32, 32)], ids=["1e5", "1e6"])
def test_verify_throughput(dims, kind):
    n, dt = measure(dims, kind=kind)
    print(f"\nverify {kind} torus {dims[0]}x{dims[1]}: {n} sends in {dt:.2f} s = {n / dt:,.0f} sends/s")
    assert n / dt > 5e4


if __name__ == "__main__":
    for kind in ("allgather", "reduce_scatter"):
        for dims in [(16, 20), (32, 32)]:
            n, dt = measure(dims, kind=kind)
            print(f"verify {kind} torus {dims[0]}x{dims[1]}: {n} sends in {dt:.2f} s = {n / dt:,.0f} sends/s")
