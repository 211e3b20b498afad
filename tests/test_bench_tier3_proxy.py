"""The three-tier proxy benchmark (benchmarks/bench_tier3_proxy.py) on its smallest fabric: each
verified schedule priced at or above the box-stage bound, a producer that does not exist a
refused cell, not the end of the row."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_tier3_proxy as proxy  # noqa: E402


def test_one_row_on_two_groups_of_one_gpu_boxes():
    label, params = proxy.FABRICS[1]
    row = proxy.measure(label, params, float(1 << 16), ("ring", "no-such-producer"), False, 60.0)
    assert row["bound_source"] in ("box stages", "injections") and row["bound_s"] > 0  # equal on boxes of one GPU
    priced = [r["sync_s"] for r in row["runs"].values() if r.get("sync_s") is not None]
    assert len(priced) == 1 and all(p >= row["bound_s"] * (1 - 1e-9) for p in priced)
    assert "refused" in row["runs"]["no-such-producer"]
    lines = proxy.render([row, {"fabric": "x", "stopped": "timeout"}], ("ring", "no-such-producer"))
    assert len(lines) == 4 and "refused" in lines[2] and "x bound" in lines[0] and "stopped: timeout" in lines[3]
