"""TE-CCL's DGX-2 two-chassis all-to-all rows with fast epochs against its provided outputs (run:
``python -m pytest -m benchmark -s -n 0 benchmarks/bench_teccl_alltoall.py``, or ``python
benchmarks/bench_teccl_alltoall.py [--limit 120]``).

For each size (1 GB, 1 MB, 64 KB): the epochs (TEN timesteps, TE-CCL's epochs) of
``earliest-arrival``'s verified schedule, the timesteps lower bound (the cut around a chassis:
256 chunks over 8 NICs, 32 sends of 10 epochs each, plus the NIC latency of 0, 11 or 163
epochs), whether the schedule meets it, the wall and CPU seconds of the whole run (produce,
verify, price; this process's CPU) with the load average beside them, and TE-CCL's epochs and
Gurobi time from the instances' ``[[expect.paper]]`` entries (Liu et al., "Rethinking Machine
Learning Collective Communication as a Multi-Commodity Flow Problem", SIGCOMM 2024, provided
outputs: 322, 337 and 529 epochs in 1590, 1204 and 1206 s). The per-source LP
(``ten-source-flow-lp``) does not finish these in 900 s here. The machine is shared: read CPU
seconds beside the load.

Environment: ``BENCH_LIMIT`` (s per run, default 120).
"""

from __future__ import annotations

import os
import sys

import pytest

from collsynth.solvers.producers import Options
from markdown_table import table as markdown_table
from teccl_common import ALIGN, HEADER, cells, limit_argument, measured

pytestmark = pytest.mark.benchmark
LIMIT = float(os.environ.get("BENCH_LIMIT", "120"))
ROWS = tuple(f"teccl-dgx2-2ch-alltoall-fast-{size}" for size in ("1gb", "1mb", "64kb"))
PRODUCER = "earliest-arrival"


def row(name: str, limit: float = LIMIT) -> dict:
    """One run of ``earliest-arrival`` on corpus instance ``name`` and its figures."""
    return measured(name, PRODUCER, Options(time_limit=limit), "ten-source-flow-lp", digits=2)


def table(limit: float = LIMIT) -> str:
    """The Markdown table of every row, with our epochs over TE-CCL's."""
    rows = [row(name, limit) for name in ROWS]
    assert all(r["verified"] and r["epochs"] >= r["bound"] for r in rows)
    lines = [cells(r) + [f"{r['epochs'] / r['teccl_epochs']:.3f}"] for r in rows]
    return "\n".join(markdown_table(HEADER + ["ours / TE-CCL"], lines, ALIGN + ["---:"]))


def test_teccl_alltoall_rows():
    print("\n" + table())


if __name__ == "__main__":
    print(table(limit_argument(sys.argv[1:], LIMIT)))
