"""Batch throughput: the same batch with 1 and 2 local jobs, side by side in one run.

Run: ``python -m pytest -m benchmark benchmarks/bench_batch.py -s``. Prints both wall times
and the ratio (target: 2 jobs >= 1.8x the throughput of 1 job on a 2-core machine).
"""

from __future__ import annotations

import os
import time

import pytest

from collsynth.solvers import batch

PRODUCERS = os.environ.get("BENCH_BATCH_PRODUCERS", "greedy,ring,ten-ilp").split(",")


@pytest.mark.benchmark
def test_two_jobs_vs_one_job_throughput(tmp_path):
    files = batch.select_instances("quick")
    jobs = batch.plan(files, PRODUCERS, time_limit=60)
    walls = {}
    for workers in (1, 2):
        t0 = time.perf_counter()
        summary = batch.execute(jobs, tmp_path / f"store{workers}", workers=workers, progress=False)
        walls[workers] = time.perf_counter() - t0
        assert summary.ran == len(jobs)
    ratio = walls[1] / walls[2]
    print(f"\nbatch of {len(jobs)} jobs on {len(files)} quick instances ({','.join(PRODUCERS)}):"
          f" 1 job {walls[1]:.1f} s, 2 jobs {walls[2]:.1f} s, throughput ratio {ratio:.2f}x (cores: {os.cpu_count()})")
    assert ratio > 1.0
