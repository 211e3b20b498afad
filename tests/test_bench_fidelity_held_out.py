"""The fidelity benchmark's held-out totals under a calibration file (``--held-out-under``,
benchmarks/bench_fidelity.py), on hand-built rows whose errors are worked out by hand."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_fidelity as bench  # noqa: E402

MIB = 1 << 20


def _row(name: str, program: str, held: bool, seconds: list[float]):
    m = SimpleNamespace(name=name, program=Path(program), instance="i.toml", buff_bytes=4 << 20,
                        held_out=held, held_out_set="")
    return SimpleNamespace(measurement=m, sizes=np.array([MIB, 2 * MIB]), seconds=np.array(seconds))


def test_held_out_totals_priced_under_the_file(monkeypatch):
    """Held out: the ring (measured 1, 2 s; predicted 1, 2) and a program (measured 2, 4 s;
    predicted 2, 5); a fitted row (measured 1, 1; predicted 3, 3) is not counted. The program's
    time errors |2/2 - 1| = 0 and |4/5 - 1| = 0.2; its predicted ratio to the ring 2, 2.5
    against the measured 2, 2: errors 0 and 0.25, so one of two within 10 %, median 0.125.
    With the ring: 2 measurements, 4 sizes, errors 0, 0, 0, 0.2."""
    predicted = {"ring": [1.0, 2.0], "prog": [2.0, 5.0], "fitted": [3.0, 3.0]}
    rows = [_row("ring", "nccl_ring_allgather.xml", True, [1.0, 2.0]),
            _row("prog", "allgather_k1.xml", True, [2.0, 4.0]),
            _row("fitted", "reduce_scatter_k1.xml", False, [1.0, 1.0])]
    monkeypatch.setattr(bench, "predict", lambda r, cal: np.array(predicted[r.measurement.name]))
    import collsynth.tens.cost_models.runtime as runtime

    monkeypatch.setattr(runtime, "load_calibration", lambda path: "calibration")
    out = bench.held_out_under(rows, "F.json")
    programs, held = out["held_out_programs"], out["held_out"]
    assert (programs["measurements"], programs["sizes"]) == (1, 2)
    assert programs["ratio_within_10pct_1MiB_up"] == pytest.approx(0.5)
    assert programs["median_ratio_error_1MiB_up"] == pytest.approx(0.125)
    assert programs["within_25pct_1MiB_up"] == pytest.approx(1.0)
    assert programs["geomean_abs_error_1MiB_up"] == pytest.approx(np.sqrt(1.2) - 1)
    assert (held["measurements"], held["sizes"]) == (2, 4)
    assert held["geomean_abs_error_1MiB_up"] == pytest.approx(1.2 ** 0.25 - 1)
