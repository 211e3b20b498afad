"""A call on a network connection waits for its receiver's credit on top of its link's bytes
(``Calibration.net_credit``, ``net_credit_period``), on the program of
``test_runtime_serial_links`` worked out by hand: GPU 0 sends two chunks to GPU 1 on two
channels (link 0 -> 1 carries 2 chunks an iteration), GPU 1's thread block 2 sends one back
(or two, in two steps: two calls an iteration, and its link carries 2)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsynth import InputError
from collsynth.tens.cost_models.runtime import Calibration, calibration_from_json, runtime_times
from test_runtime_serial_links import features


def calibration(credit: float = 4e-6) -> Calibration:
    """The link at half of 1 GB/s (2 ns a byte), no per-slice costs, free copies, 10 us a kernel,
    12 KB buffers, the rounds not paid; ``credit`` seconds a call on the link's connections
    (0: the switch off)."""
    return Calibration("hand", "test", "", {"link": 0.5}, {"link": 0.0}, {"link": 0.0}, tb_rate=1e15,
                       reduce_rate=1e15, step_s=0.0, launch_s=10e-6, tb_s=0.0, buff_bytes=12000,
                       round_share=0.0, net_credit={"link": credit} if credit else {})


def test_the_credit_adds_to_the_links_bytes():
    # 36 KB: 12 KB a chunk, 2 iterations of 6 KB, one call an iteration per sending thread block.
    # Off: the period is link 0 -> 1's 2 x 6 KB at 2 ns = 24 us: 10 + 24 + 24 = 58 us.
    # On: GPU 0's senders wait 4 us for their credit on top of their link's 24 us = 28 us (GPU
    # 1's sender 4 + 12 = 16 us): 10 + 28 + 28 = 66 us.
    f = features()
    assert runtime_times(f, [36e3], calibration(0.0))[0] == pytest.approx(58e-6)
    assert runtime_times(f, [36e3], calibration())[0] == pytest.approx(66e-6)
    # 270 B: one iteration of 90 B a chunk: 4 us of credit + 2 x 90 B at 2 ns: 10 + 4.36 us
    assert runtime_times(f, [270.0], calibration(0.0))[0] == pytest.approx(10.36e-6)
    assert runtime_times(f, [270.0], calibration())[0] == pytest.approx(14.36e-6)


def test_a_thread_block_of_several_calls_waits_for_each():
    # GPU 1's thread block 2 sends chunks 2 and 0 in two steps: two calls an iteration (8 us of
    # credit) on its link, which now carries 2 x 6 KB (24 us): 32 us an iteration, 10 + 32 + 32
    # = 74 us at 36 KB (off: 58 us; GPU 0's senders alone 28)
    f = features((2, 0))
    assert runtime_times(f, [36e3], calibration(0.0))[0] == pytest.approx(58e-6)
    assert runtime_times(f, [36e3], calibration())[0] == pytest.approx(74e-6)


def test_a_class_without_the_credit_is_not_charged():
    f = features()
    other = replace(calibration(), net_credit={"nic": 4e-6})  # the program has no nic link
    assert runtime_times(f, [36e3], other)[0] == pytest.approx(58e-6)


@settings(max_examples=40, deadline=None)
@given(size=st.floats(1e2, 1e10), back=st.sampled_from([(2,), (2, 0)]), credit=st.floats(0.0, 3e-5),
       share=st.floats(0.05, 1.0), buff=st.sampled_from([1 << 14, 1 << 20, 1 << 22]))
def test_never_faster_than_without_it_nor_than_the_scaled_link_bound(size, back, credit, share, buff):
    f = features(back)
    on = replace(calibration(credit), efficiency={"link": share}, buff_bytes=buff)
    off = replace(on, net_credit={})
    t = runtime_times(f, [size], on)[0]
    assert t >= runtime_times(f, [size], off)[0] * (1 - 1e-12)
    assert t >= 2 * (size / 3) / (share * 1e9) * (1 - 1e-12)  # 2 of the 3 chunks on the busiest link


def test_calibration_file_keeps_the_switch():
    assert calibration_from_json(calibration().as_json(), "c.json").net_credit == {"link": 4e-6}
    assert "net_credit" not in calibration(0.0).as_json()["parameters"]  # older files unchanged
    assert calibration_from_json(calibration(0.0).as_json(), "c.json").net_credit == {}
    for bad, field in (({"link": "4us"}, "parameters.net_credit.link"), ([4e-6], "parameters.net_credit"),
                       ({"link": 2.0}, "parameters.net_credit.link")):
        data = calibration().as_json()
        data["parameters"]["net_credit"] = bad
        with pytest.raises(InputError) as e:
            calibration_from_json(json.loads(json.dumps(data)), "c.json")
        assert e.value.where == f"c.json: {field}"


def test_the_fit_recovers_the_credit():
    # measured with 4 us of credit a call (the two-call program): the fit with the class named
    # prices with a credit close to it and comes closer than the fit without
    from pathlib import Path

    from collsynth.tens.calibration import Row, fit
    from collsynth.tens.measurements import Measurement
    f = features((2, 0))
    sizes = np.logspace(2, 8, 13)
    rows = [Row(Measurement(f"p{b}", Path("p.xml"), Path("i.toml"), Path("l.txt"), b, "in-place", 0, False),
                f, sizes, runtime_times(f, sizes, calibration(), b)) for b in (1 << 14, 1 << 20)]
    on, off = fit(rows, "t", "s", "", net_credit=("link",)), fit(rows, "t", "s", "")
    assert set(on.net_credit) == {"link"} and not off.net_credit
    assert on.fit["rms_log_error"] < off.fit["rms_log_error"] / 2


@pytest.mark.parametrize("value", ["1", '"nic"', "[1]"])
def test_a_bad_manifest_value_is_one_line(tmp_path, capsys, value):
    from cli_errors import assert_one_error_line, calibrate_with_setting
    path, code, out, err = calibrate_with_setting(tmp_path, capsys, f"net_credit = {value}")
    assert code == 2
    assert_one_error_line(err, [f"{path}.net_credit"])
