"""The three-tier proxy benchmark (benchmarks/bench_tier3_proxy.py) on its smallest fabric: each
verified schedule priced at or above the bound for its routing (the ring is routed end to end,
marked so), a producer that does not exist a refused cell, not the end of the row."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_tier3_proxy as proxy  # noqa: E402


def test_one_row_on_two_groups_of_one_gpu_boxes():
    label, params = proxy.FABRICS[1]
    row = proxy.measure(label, params, float(1 << 16), ("ring", "no-such-producer"), False, 60.0)
    assert row["bound_source"] == "group crossings" and row["bound_s"] > 0  # two groups: above box stages = injections
    ring = row["runs"]["ring"]
    assert ring["sync_s"] is not None and ring["sync_s"] >= ring["bound_s"] * (1 - 1e-9)
    assert "refused" in row["runs"]["no-such-producer"]
    lines = proxy.render([row, {"fabric": "x", "stopped": "timeout"}], ("ring", "no-such-producer"))
    assert ring["routing"] != "links" and ", routed" in lines[2]
    assert len(lines) == 4 and "refused" in lines[2] and "x its bound" in lines[0] and "stopped: timeout" in lines[3]
