"""Pricing throughput: seconds to price ~1e5-send schedules under each cost model.

Run with ``python -m pytest -m benchmark -s benchmarks/bench_pricing.py`` (prints the table) or
``python benchmarks/bench_pricing.py``. Schedules:

- ``bfs-torus16x20``: BFS-tree allgather on a 16x20 torus (320 * 319 = 102,080 sends);
- ``ring317``: ring allgather on a 317-node directed ring (317 * 316 = 100,172 sends);
- ``rd-torus16x16-routed``: recursive doubling allgather on a 16x16 torus, logical sends routed
  over shortest paths (256 * 255 = 65,280 sends, ~0.5M link hops);
- ``bfs-torus32x32`` (sync and event only with ``--big``): ~1.05M sends.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import pytest

from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.tens import cost
from collsynth.tens.schedule import from_arrays

sys.path.insert(0, __import__("os").path.dirname(__file__))
from bench_verify import bfs_allgather  # noqa: E402


def ring_allgather(n: int):
    t = np.repeat(np.arange(1, n), n)
    u = np.tile(np.arange(n), n - 1)
    return from_arrays("allgather", n, n, chunk=(u - t + 1) % n, src=u, dst=(u + 1) % n, step=t)


def recursive_doubling(n: int):
    k = int(np.log2(n))
    cols = {"chunk": [], "src": [], "dst": [], "step": []}
    for s in range(1, k + 1):
        d = 1 << (s - 1)
        u = np.repeat(np.arange(n), d)
        off = np.tile(np.arange(d), n)
        cols["chunk"].append((u & ~(d - 1)) + off)
        cols["src"].append(u)
        cols["dst"].append(u ^ d)
        cols["step"].append(np.full(len(u), s))
    return from_arrays("allgather", n, n, routing="shortest-path", **{k: np.concatenate(v) for k, v in cols.items()})


def cases(big: bool = False):
    t = build("torus", {"dims": [16, 20]})
    yield "bfs-torus16x20", make_instance(t, "allgather"), bfs_allgather(t)
    r = build("ring", {"nodes": 317, "bidirectional": False})
    yield "ring317", make_instance(r, "allgather"), ring_allgather(317)
    t = build("torus", {"dims": [16, 16]})
    yield "rd-torus16x16-routed", make_instance(t, "allgather"), recursive_doubling(256)
    if big:
        t = build("torus", {"dims": [32, 32]})
        yield "bfs-torus32x32", make_instance(t, "allgather"), bfs_allgather(t)


def measure(name, inst, sched, models=cost.MODELS):
    """Price ``sched`` under each model; rows of (case, sends, model, wall s, CPU s, total_s)."""
    rows = []
    for model in models:
        t0, c0 = time.perf_counter(), time.process_time()
        c = cost.price(sched, inst, model)
        rows.append((name, len(sched), model, time.perf_counter() - t0, time.process_time() - c0, c.total_s))
    return rows


def report(rows):
    print(f"{'case':24s} {'sends':>9s} {'model':6s} {'wall s':>8s} {'CPU s':>8s} {'total_s':>12s}")
    for name, n, model, dt, cpu, total in rows:
        print(f"{name:24s} {n:9d} {model:6s} {dt:8.3f} {cpu:8.3f} {total:12.6g}")


@pytest.mark.benchmark
def test_pricing_throughput():
    rows = []
    for name, inst, sched in cases():
        rows += measure(name, inst, sched)
    report(rows)
    for name, n, model, dt, cpu, _ in rows:
        assert cpu < 10.0, (name, model, cpu)  # "a 100k-send schedule in a few seconds"


if __name__ == "__main__":
    big = "--big" in sys.argv
    rows = []
    for name, inst, sched in cases(big):
        models = cost.MODELS if len(sched) < 500_000 else ("sync", "event", "ten")
        rows += measure(name, inst, sched, models)
    report(rows)
