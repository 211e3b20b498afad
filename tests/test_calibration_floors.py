"""The fit's link-share floors: no share below what a fitted measurement moved over a link of
its class in its measured time (``share_floors``), worked out by hand, kept by the fit where
the free fit goes below, recorded in the calibration, and refused when unphysical."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsynth import InputError
from collsynth.tens.calibration import Row, fit, share_floors
from collsynth.tens.cost_models.runtime import for_runtime, runtime_times
from collsynth.tens.measurements import Measurement
from collsynth.tens.runtime_program import program_features
from test_runtime_model import ONE_WAY, cal, one_way_instance

SIZES = np.logspace(3, 8, 11)


def measurement(name: str, runtime: str = "") -> Measurement:
    return Measurement(name, Path("p.xml"), Path("i.toml"), Path("l.txt"), 1 << 20, "in-place", 0, False, runtime)


def one_way():
    return program_features(ONE_WAY, one_way_instance())


def test_a_one_link_program_floor_by_hand():
    # GPU 0 sends both of the program's 2 chunks to GPU 1 over its one 1 GB/s link: a 1 MB
    # allgather puts 2 x 0.5 MB = 1 MB on that link; measured in 2.5 ms that is 0.4 GB/s, 40 %
    # of the link. At 10 kB in 0.1 ms: 10 kB / 0.1 ms = 0.1 GB/s, 10 %. The floor is the larger.
    f = one_way()
    row = Row(measurement("m"), f, np.array([1e4, 1e6]), np.array([1e-4, 2.5e-3]))
    fl = share_floors([row])[""]["link"]
    assert fl.share == pytest.approx(0.4, rel=1e-12)
    assert (fl.measurement, fl.size_bytes, fl.measured_s) == ("m", 1_000_000, 2.5e-3)
    # the model at a share below it prices that size slower than measured, whatever else
    fast = cal(efficiency={"link": 0.399}, hop_s={"link": 0.0}, step_s=0.0, launch_s=0.0, buff_bytes=1 << 30)
    assert runtime_times(f, [1e6], fast)[0] > 2.5e-3


def rows_the_free_fit_puts_below(fast_share: float) -> list[Row]:
    # made up from a calibration with the link at 50 %, except the largest size, measured as if
    # the link ran at ``fast_share``: the log least squares splits the difference, below what
    # that largest size moved
    truth = cal(efficiency={"link": 0.5}, hop_s={"link": 3e-6}, step_s=2e-6, launch_s=20e-6)
    f = one_way()
    t = runtime_times(f, SIZES, truth, 1 << 20)
    t[-1] = runtime_times(f, SIZES[-1:], cal(efficiency={"link": fast_share}, hop_s={"link": 3e-6}, step_s=2e-6,
                                            launch_s=20e-6), 1 << 20)[0]
    return [Row(measurement("pair"), f, SIZES, t)]


def test_the_fit_keeps_the_floor_where_the_free_fit_goes_below():
    rows = rows_the_free_fit_puts_below(0.8)
    floor = share_floors(rows)[""]["link"].share
    # 100 MB: 1e8 bytes on the link at 0.8 GB/s = 125 ms, plus 20 us of launch and a fill: just under 0.8
    assert 0.79 < floor < 0.8
    kept = fit(rows, "t", "s", "")
    assert kept.efficiency["link"] >= floor * (1 - 1e-9)
    assert kept.fit["floors"]["main"]["link"] == {"share": floor, "measurement": "pair", "size_bytes": int(SIZES[-1]),
                                                  "measured_s": float(rows[0].seconds[-1])}
    # without the floors (a manifest's share_floors = false) the fit goes below and says so
    free = fit(rows, "t", "s", "", floors=False)
    assert free.efficiency["link"] < floor - 0.05
    assert free.fit["below_floors"] == {"main": ["link"]} and "below_floors" not in kept.fit


@settings(max_examples=3, deadline=None)
@given(st.floats(0.3, 0.95), st.floats(0.6, 1.6))
def test_the_fit_never_returns_a_share_below_its_floor(fast_share, other_scale):
    # the main build's rows as above; another build's rows of the same program measured with its
    # link shares scaled by ``other_scale`` and the largest size faster still: each build's
    # scaled share is at least its own floor
    rows = rows_the_free_fit_puts_below(fast_share)
    f = one_way()
    other = cal(efficiency={"link": min(1.0, 0.5 * other_scale)}, hop_s={"link": 3e-6}, step_s=2e-6, launch_s=20e-6)
    t = runtime_times(f, SIZES, other, 1 << 20) * np.where(np.arange(len(SIZES)) == len(SIZES) - 1, 0.8, 1.0)
    rows.append(Row(measurement("pair-other", "other"), f, SIZES, t))
    floors = share_floors(rows)
    got = fit(rows, "t", "s", "")
    assert got.efficiency["link"] >= floors[""]["link"].share * (1 - 1e-9)
    assert for_runtime(got, "other").efficiency["link"] >= floors["other"]["link"].share * (1 - 1e-9)


def test_a_measurement_faster_than_the_nominal_link_is_refused():
    # 1 MB over the 1 GB/s link in 0.5 ms: twice the link's bandwidth
    row = Row(measurement("too-fast"), one_way(), np.array([1e6]), np.array([5e-4]))
    with pytest.raises(InputError, match=r"'too-fast'.*moved 2.000 of link class link"):
        fit([row], "t", "s", "")


def test_a_share_floors_setting_that_is_not_true_or_false_is_one_line(tmp_path, capsys):
    from cli_errors import assert_one_error_line, run_cli
    path = tmp_path / "m.toml"
    path.write_text('system = "s"\nsource = "x"\nshare_floors = "no"\n[[measurement]]\nname = "a"\n'
                    'program = "p.xml"\ninstance = "i.toml"\nlog = "l.txt"\n')
    code, out, err = run_cli(["calibrate", str(path)], capsys)
    assert code == 2
    assert_one_error_line(err, [f"{path}.share_floors", "bool"])
