"""ForestColl's own code on our fabrics: the seconds its optimum and its trees take here.

Zhao et al.'s public Python code ("ForestColl: Throughput-Optimal Collective Communications on
Heterogeneous Network Fabrics", arXiv 2402.06787; github.com/liangyuRain/ForestColl,
``pipeline_allgather.py``; its README says the paper's large runs used an unreleased Java
version) is run as published, from a checkout named by ``--forestcoll DIR`` (for instance
``git -C /work/.mirror/liangyuRain+ForestColl/repo archive HEAD | tar -x -C DIR``); it needs
networkx only. Each fabric runs in a process of its own under a time limit: the topology
given as ForestColl's capacitated digraph (parallel links pooled, capacities in GB/s, switches
as plain nodes, the GPUs as its compute nodes), then

- ``optimum s``: ``OptimalBranchingsAlgo(...).binary_search()`` after its own integer scaling
  (``to_capacitated_graph``, ``scale_to_integer_capacities``): the optimal ``(U, k)``;
- ``trees s``: ``optimal_pipeline_spanning_trees(...)``, which searches ``(U, k)`` again, splits
  the switches off and packs the ``k`` trees per GPU (its own checks included);

and its optimum as a time for 1 GiB (``M U / (k N)`` in its scaled units), beside ours.

Run: ``python benchmarks/forestcoll_code.py --forestcoll DIR [--only LABEL] [--max-gpus N]
[--timeout S]``; ``benchmarks/bench_clusters.py --forestcoll DIR`` adds its columns to the
clusters table.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time

from fresh_process import cell, each_in_a_fresh_process
from markdown_table import table

M = 1 << 30
TIMEOUT_S = 600


class _Timeout(Exception):
    """The fabric ran out of its time."""


def _alarm(signum, frame):
    raise _Timeout()


def capacitated(generator: str, params: dict):
    """The fabric as ForestColl's input: a networkx digraph whose edges carry ``capacity`` in
    GB/s (parallel links pooled) and the GPUs."""
    import networkx as nx

    from collsynth.instances.generators import build

    topo = build(generator, params)
    la = topo.link_arrays
    g = nx.DiGraph()
    g.add_nodes_from(range(topo.size))
    for u, v, b, c in zip(la.src.tolist(), la.dst.tolist(), la.bandwidth.tolist(), la.count.tolist()):
        g.add_edge(u, v, capacity=b * c / 1e9)
    return g, sorted(topo.npus)


def row(spec) -> dict:
    """ForestColl's optimum and trees on one fabric (module doc), in this process, within
    ``timeout`` seconds: ``{"forestcoll_optimum_s", "forestcoll_trees_s", "forestcoll_ms",
    "forestcoll_stopped"}`` (what was measured before a stop)."""
    label, generator, params, folder, timeout = spec
    out = {"fabric": label}
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(int(timeout))
    stage = "optimum"
    try:
        sys.path.insert(0, folder)
        import pipeline_allgather as fc

        g, gpus = capacitated(generator, params)
        out["gpus"] = len(gpus)
        t = time.perf_counter()
        scaled, scale = fc.scale_to_integer_capacities(fc.to_capacitated_graph(g))
        U, k = fc.OptimalBranchingsAlgo(scaled, capacitated=True, compute_nodes=gpus).binary_search()
        out.update(forestcoll_optimum_s=time.perf_counter() - t, forestcoll_ms=1e3 * M / 1e9 * U * scale / (k * len(gpus)),
                   forestcoll_k=k)
        stage = "trees"
        t = time.perf_counter()
        fc.optimal_pipeline_spanning_trees(g, compute_nodes=gpus)
        out["forestcoll_trees_s"] = time.perf_counter() - t
    except _Timeout:
        out["forestcoll_stopped"] = f"timeout ({timeout:.0f} s) at {stage}"
    except Exception as e:  # its failure is a cell of the table
        out["forestcoll_stopped"] = f"{type(e).__name__} at {stage}: {str(e)[:80]}"
    signal.alarm(0)
    return out


def cells(r: dict) -> list[str]:
    """ForestColl's cells of a row: optimum seconds, trees seconds (or where it stopped)."""
    stopped = r.get("forestcoll_stopped")
    trees = cell(r.get("forestcoll_trees_s"), ".1f") if not stopped or "trees" not in stopped else f"> {stopped}"
    optimum = cell(r.get("forestcoll_optimum_s"), ".1f") if not stopped or "optimum" not in stopped else f"> {stopped}"
    return [optimum, trees]


def main() -> None:
    from bench_clusters import ROWS, _gpus

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--forestcoll", required=True, help="a checkout of github.com/liangyuRain/ForestColl")
    ap.add_argument("--only", help="rows whose label contains this")
    ap.add_argument("--max-gpus", type=int, default=1024)
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S)
    a = ap.parse_args()
    specs = sorted(((label, g, p, a.forestcoll, a.timeout) for label, g, p in ROWS
                    if (a.only is None or a.only in label) and _gpus(g, p) <= a.max_gpus),
                   key=lambda s: _gpus(s[1], s[2]))
    head = ["fabric", "GPUs", "ForestColl optimum ms (1 GiB)", "k", "ForestColl optimum s", "ForestColl trees s"]
    fmt = lambda r: [r["fabric"], cell(r.get("gpus"), ","), cell(r.get("forestcoll_ms"), ".3f"),  # noqa: E731
                     cell(r.get("forestcoll_k"), "d"), *cells(r)]
    rows = each_in_a_fresh_process(row, specs, lambda r: table(head, [fmt(r)])[-1])
    print("\n".join(table(head, [fmt(r) for r in rows])))


if __name__ == "__main__":
    main()
