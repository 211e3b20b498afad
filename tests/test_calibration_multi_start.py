"""The multi-start fit (a manifest's ``multi_start``): least squares from several fixed starts,
the run of least in-sample error kept, whatever its place among the starts."""

from __future__ import annotations

import numpy as np
import pytest

from collsynth.tens.calibration import fit, least_cost_start, start_points


def two_basins(x):
    """Residuals with two local minima of ``0.5 * sum(r**2)``, worked by hand: at x = 4 both
    residuals are 0 (cost 0); at x = 1 the first is 0 and the second 0.1 * (-3) * 3 = -0.9
    (cost 0.405), and the cost's slope is 0 there (the first residual is 0, the second's slope
    0.1 * (2x - 2) is 0) and its curvature 2 * 3**2 - 2 * 0.9 * 0.2 > 0."""
    return np.array([(x[0] - 1) * (x[0] - 4), 0.1 * (x[0] - 4) * (x[0] + 2)])


LO, HI = np.array([-1.0]), np.array([6.0])


@pytest.mark.parametrize("order", [("near 1", "near 4"), ("near 4", "near 1")])
def test_the_least_cost_start_wins_wherever_it_stands(order):
    at = {"near 1": np.array([0.5]), "near 4": np.array([5.0])}
    best, runs = least_cost_start(two_basins, {k: at[k] for k in order}, LO, HI)
    assert best == "near 4"
    assert runs["near 4"].x[0] == pytest.approx(4.0, abs=1e-6) and runs["near 4"].cost == pytest.approx(0.0, abs=1e-12)
    assert runs["near 1"].x[0] == pytest.approx(1.0, abs=1e-5) and runs["near 1"].cost == pytest.approx(0.405, rel=1e-6)


def test_the_spread_starts_are_fixed_within_the_bounds_and_keep_pinned_values():
    x0, lo, hi = np.array([0.6, 2.0, 0.5]), np.array([0.6 * (1 - 1e-9), 0.0, 0.0]), np.array([0.6 * (1 + 1e-9), 100.0, 100.0])
    first, again = start_points(x0, 1, lo, hi), start_points(x0, 1, lo, hi)
    assert list(first) == ["default", "credit", "spread1", "spread2", "spread3", "spread4"]
    assert all(np.array_equal(first[k], again[k]) for k in first)  # seeded: the same every run
    spread = [first[f"spread{i}"] for i in range(1, 5)]
    assert all(p[0] == 0.6 for p in spread)  # the pinned share stays
    # a Latin hypercube of 4: one point in each quarter of each free parameter's range
    assert sorted(int(p[1] // 25) for p in spread) == [0, 1, 2, 3]
    assert sorted(int(p[2] // 25) for p in spread) == [0, 1, 2, 3]


def test_a_multi_start_fit_keeps_its_least_error_start_and_records_each():
    from test_runtime_model import cal
    from test_runtime_serial_links import pair_rows
    truth = cal(efficiency={"link": 0.6}, hop_s={"link": 20e-6}, gpu_op_s={"link": 0.0}, step_s=0.0, launch_s=20e-6)
    many = fit(pair_rows(truth), "t", "s", "", multi_start=True)
    starts = many.fit["starts"]
    assert set(starts) == {"default", "credit", "spread1", "spread2", "spread3", "spread4"}
    assert many.fit["rms_log_error"] == pytest.approx(min(starts.values()), rel=1e-9)
    assert many.fit["start"] == min(starts, key=starts.get)
    assert "starts" not in fit(pair_rows(truth), "t", "s", "").fit


def test_the_manifest_switch_is_read(tmp_path):
    from collsynth.tens.measurements import read_manifest
    body = 'system = "s"\nsource = "x"\n{}[[measurement]]\nname = "a"\nprogram = "p.xml"\ninstance = "i.toml"\nlog = "l.txt"\n'
    for line, want in [("", False), ("multi_start = true\n", True), ("multi_start = false\n", False)]:
        path = tmp_path / "m.toml"
        path.write_text(body.format(line))
        assert read_manifest(path).multi_start is want


@pytest.mark.parametrize("value", ['"yes"', "1"])
def test_a_bad_multi_start_is_one_line(tmp_path, capsys, value):
    from cli_errors import assert_one_error_line, calibrate_with_setting
    path, code, out, err = calibrate_with_setting(tmp_path, capsys, f"multi_start = {value}")
    assert code == 2
    assert_one_error_line(err, [f"{path}.multi_start", "bool"])
