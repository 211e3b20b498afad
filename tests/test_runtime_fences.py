"""A slice's fence as the GPU's shared cost (``Calibration.fences``: ``fenced_slices``,
``carried_fences``), on the program of ``test_runtime_serial_links`` worked out by hand: GPU 0
sends two chunks to GPU 1 on two channels, GPU 1's thread block 2 sends one back (or two, in two
steps, which holds the next iteration back)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsynth import InputError
from collsynth.tens.cost_models.runtime import Calibration, calibration_from_json, runtime_times
from test_runtime_serial_links import features


def calibration(fences: bool = True) -> Calibration:
    """The link at half of 1 GB/s (2 ns a byte), 1 us of the GPU's shared cost a slice (an empty
    slice too, where the fences are not modelled: handshake share 1), no credit, free copies,
    10 us a kernel, 12 KB buffers, the rounds not paid."""
    return Calibration("hand", "test", "", {"link": 0.5}, {"link": 0.0}, {"link": 1e-6}, tb_rate=1e15,
                       reduce_rate=1e15, step_s=0.0, launch_s=10e-6, tb_s=0.0, buff_bytes=12000,
                       round_share=0.0, handshake_share=1.0, fences=fences)


def test_the_programs_as_read():
    one, two = features(), features((2, 0))
    assert one.carried == () and two.carried == (1.0, 1.0)
    # each GPU sends or receives 3 (4) calls an iteration
    assert one.gpu_ops["link"].tolist() == [3.0, 3.0] and two.gpu_ops["link"].tolist() == [4.0, 4.0]


def test_an_empty_slice_skips_the_fence():
    # 270 B: 90 B a chunk, one iteration; a call of 90 B moves a 93.75 B slice (12 KB / 128)
    # holding all of it and an empty one. Without fences both cost the GPU 1 us: 3 calls x 2
    # slices = 6 us, the period (the link: 2 x 90 B at 2 ns = 0.36 us), 10 + 6 = 16 us. With
    # them the empty slice skips the fence: 3 us, 10 + 3 = 13 us.
    f = features()
    assert runtime_times(f, [270.0], calibration(False))[0] == pytest.approx(16e-6)
    assert runtime_times(f, [270.0], calibration())[0] == pytest.approx(13e-6)
    # 36 KB: 2 iterations of 6 KB, two full slices a call: the same 6 us of fences either way,
    # the link's 2 x 6 KB at 2 ns (24 us) the period: 10 + 24 + 24 = 58 us both
    assert runtime_times(f, [36e3], calibration(False))[0] == pytest.approx(58e-6)
    assert runtime_times(f, [36e3], calibration())[0] == pytest.approx(58e-6)


def test_a_chain_holding_the_next_iteration_puts_its_fences_between_the_transfers():
    # GPU 1's thread block 2 sends chunks 2 and 0 in two steps: the next iteration starts after
    # all of this one's rounds (carried 1). At 36 KB (2 iterations of 6 KB) each GPU fences
    # 4 calls x 2 full slices = 8 us an iteration, both links carry 2 x 6 KB = 24 us.
    # Without: the period max(24, 8) = 24, 10 + 24 + 24 = 58 us. With: 8 + 24 = 32 us an
    # iteration, the first too, 10 + 32 + 32 = 74 us.
    f = features((2, 0))
    assert runtime_times(f, [36e3], calibration(False))[0] == pytest.approx(58e-6)
    assert runtime_times(f, [36e3], calibration())[0] == pytest.approx(74e-6)
    # 270 B, one iteration: 4 calls of one full and one empty slice, 4 us of fences, on top of
    # the links' 0.36 us: 10 + 4.36 us (without: 8 us of shared cost, 18 us)
    assert runtime_times(f, [270.0], calibration(False))[0] == pytest.approx(18e-6)
    assert runtime_times(f, [270.0], calibration())[0] == pytest.approx(14.36e-6)


@settings(max_examples=40, deadline=None)
@given(size=st.floats(1e2, 1e10), back=st.sampled_from([(2,), (2, 0)]), op=st.floats(0.0, 2e-5),
       share=st.floats(0.05, 1.0), buff=st.sampled_from([1 << 14, 1 << 20, 1 << 22]))
def test_never_faster_than_the_scaled_link_bound(size, back, op, share, buff):
    # the links' bytes at their calibrated share: 2 of the 3 chunks cross the busiest link
    f = features(back)
    cal = replace(calibration(), gpu_op_s={"link": op}, efficiency={"link": share}, buff_bytes=buff)
    assert runtime_times(f, [size], cal)[0] >= 2 * (size / 3) / (share * 1e9) * (1 - 1e-12)


def test_calibration_file_keeps_the_switch():
    assert calibration_from_json(calibration().as_json(), "c.json").fences is True
    assert "fences" not in calibration(False).as_json()["parameters"]  # older files unchanged
    assert calibration_from_json(calibration(False).as_json(), "c.json").fences is False
    data = calibration().as_json()
    data["parameters"]["fences"] = "yes"
    with pytest.raises(InputError) as e:
        calibration_from_json(json.loads(json.dumps(data)), "c.json")
    assert e.value.where == "c.json: parameters.fences"


def test_the_fit_prices_with_the_manifests_switch():
    # measured with fences (the carried program, 1 us a slice): the fit with the switch prices
    # with it and comes closer than the fit without
    from collsynth.tens.calibration import Row, fit
    from collsynth.tens.measurements import Measurement
    f = features((2, 0))
    sizes = np.logspace(2, 8, 13)
    rows = [Row(Measurement(f"p{b}", Path("p.xml"), Path("i.toml"), Path("l.txt"), b, "in-place", 0, False),
                f, sizes, runtime_times(f, sizes, calibration(), b)) for b in (1 << 14, 1 << 20)]
    on, off = fit(rows, "t", "s", "", fences=True), fit(rows, "t", "s", "")
    assert on.fences and not off.fences
    assert on.fit["rms_log_error"] < off.fit["rms_log_error"] / 2


@pytest.mark.parametrize("value", ["1", '"true"'])
def test_a_bad_manifest_switch_is_one_line(tmp_path, capsys, value):
    from cli_errors import assert_one_error_line, calibrate_with_setting
    path, code, out, err = calibrate_with_setting(tmp_path, capsys, f"fences = {value}")
    assert code == 2
    assert_one_error_line(err, [f"{path}.fences"])
