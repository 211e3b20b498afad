"""A link's cost per slice crossing it (``link_slice_s``): hand-built programs whose runtime
time is worked out by hand, its file round trip and its build scaling."""

from __future__ import annotations

import json

import pytest

from collsynth import InputError
from collsynth.tens.cost_models.runtime import for_runtime, load_calibration, runtime_times
from collsynth.tens.runtime_program import program_features

from test_runtime_model import PAIR, cal, pair_instance, two_box_instance, xml


def test_a_slice_costs_its_link_beside_its_bytes_by_hand():
    # PAIR at 20 KB, one iteration (buff 1 GiB): each link carries one chunk of 10 KB, one
    # non-empty slice (under buff / 128), at half of 1 GB/s: 20 us of bytes, plus 5 us for the
    # slice = 25 us, above the thread block's 2 steps x 2 us + 1 us of credit; launch 10 us.
    f = program_features(PAIR, pair_instance())
    assert runtime_times(f, [2e4], cal(link_slice_s={"link": 5e-6}))[0] == pytest.approx(35e-6)
    # without it the link's bytes alone: 10 + 20 us
    assert runtime_times(f, [2e4], cal())[0] == pytest.approx(30e-6)


def test_a_call_of_two_slices_costs_its_link_twice_by_hand():
    # buff 64 KB: the smallest slice is 500 B; at 2 KB a chunk is 1000 B, a call of two non-empty
    # slices: the link carries 1000 B (2 us at 0.5 GB/s) and 2 x 3 us = 8 us, above the thread
    # block's 2 x 2 us + 2 slices x 1 us of credit = 6 us; launch 10 us.
    f = program_features(PAIR, pair_instance())
    assert runtime_times(f, [2e3], cal(buff_bytes=64000, link_slice_s={"link": 3e-6}))[0] == pytest.approx(18e-6)


def test_the_cost_is_per_link_not_per_class_by_hand():
    # Two sends over two NICs (one each) against the same two sends from one GPU (its NIC carries
    # both): 100 KB chunks, 200 us each at 0.5 GB/s, 7 us a slice. Two NICs: every loaded link
    # carries one send, 200 + 7 us; one NIC: its link carries two, 400 + 2 x 7 us; launch 10 us.
    two = xml(4, 4, [[(2, -1, 0, [("s", 0)])], [(3, -1, 1, [("s", 1)])],
                     [(-1, 0, 0, [("r", 0)])], [(-1, 1, 1, [("r", 1)])]])
    one = xml(4, 4, [[(2, -1, 0, [("s", 0)]), (3, -1, 1, [("s", 1)])], [],
                     [(-1, 0, 0, [("r", 0)])], [(-1, 0, 1, [("r", 1)])]])
    inst, c = two_box_instance(), cal(link_slice_s={"nic": 7e-6})
    assert runtime_times(program_features(two, inst), [4e5], c)[0] == pytest.approx(217e-6)
    assert runtime_times(program_features(one, inst), [4e5], c)[0] == pytest.approx(424e-6)


def test_pipelined_iterations_each_pay_their_slices_by_hand():
    # buff 8 KB: 20 KB is 10 KB a chunk in 3 iterations of 10/3 KB, each one slice a call (500 B
    # < 10/3 KB, so two: the smallest slice is 8000 / 128 = 62.5 B): the link per iteration 6.67 us
    # of bytes + 2 slices x 1 us = 8.67 us, above the thread block's 2 x 2 us + 2 x 1 us = 6 us;
    # the first iteration lasts a period too: launch 10 + 3 x 8.67 us.
    f = program_features(PAIR, pair_instance())
    t = runtime_times(f, [2e4], cal(buff_bytes=8000, link_slice_s={"link": 1e-6}))[0]
    assert t == pytest.approx(10e-6 + 3 * (2e-9 * 1e4 / 3 + 2e-6))


def test_another_runtime_scales_the_link_slice_cost_by_hand():
    # a build of latency scale 2 pays 2 x 5 us a slice (and 2 x its launch): PAIR at 20 KB, the
    # link 20 + 10 us, above its thread block's 2 x 4 us + 2 us of credit; launch 20 us
    c = for_runtime(cal(link_slice_s={"link": 5e-6}, runtimes={"b": {"latency": 2.0, "bandwidth": 1.0}}), "b")
    assert c.link_slice_s == {"link": 1e-5}
    assert runtime_times(program_features(PAIR, pair_instance()), [2e4], c)[0] == pytest.approx(20e-6 + 30e-6)


def test_a_calibration_file_keeps_its_link_slice_cost(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cal(link_slice_s={"link": 2e-7}).as_json()))
    assert load_calibration(path).link_slice_s == {"link": 2e-7}
    data = cal().as_json()  # a file without it (written before it was fitted): no cost
    assert "link_slice_s" not in data["parameters"]
    path.write_text(json.dumps(data))
    assert load_calibration(path).link_slice_s == {}
    data["parameters"]["link_slice_s"] = {"link": -1.0}
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"parameters.link_slice_s.link: expected a number in 0..1, got -1.0"):
        load_calibration(path)


def test_the_fit_recovers_a_made_up_link_slice_cost():
    # measurements made up from a known calibration with 2 us of the link per slice, PAIR on two
    # runtimes (the second's fixed costs half as large) at four buffer sizes: the fit with the
    # cost finds it and the other runtime's scale (behind it in the fit's vector); the fit
    # without it cannot match the data as well
    from pathlib import Path

    import numpy as np

    from collsynth.tens.calibration import Row, fit
    from collsynth.tens.measurements import Measurement
    truth = cal(efficiency={"link": 0.6}, hop_s={"link": 1e-6}, gpu_op_s={"link": 0.0}, tb_rate=2e11,
                reduce_rate=2e11, step_s=1e-6, launch_s=20e-6, tb_s=0.0, link_slice_s={"link": 2e-6},
                runtimes={"other": {"latency": 0.5, "bandwidth": 1.0}})
    f = program_features(PAIR, pair_instance())
    sizes = np.logspace(4, 9, 11)
    rows = []
    for runtime in ("", "other"):
        for buff in (1 << 16, 1 << 18, 1 << 20, 1 << 22):
            m = Measurement(f"pair{runtime}{buff}", Path("p.xml"), Path("i.toml"), Path("l.txt"), buff, "in-place", 0,
                            False, runtime)
            rows.append(Row(m, f, sizes, runtime_times(f, sizes, for_runtime(truth, runtime), buff)))
    with_cost, without = fit(rows, "t", "s", "", slice_gap=True), fit(rows, "t", "s", "")
    assert with_cost.link_slice_s["link"] == pytest.approx(2e-6, rel=0.1)
    assert with_cost.runtimes["other"]["latency"] == pytest.approx(0.5, rel=0.05)
    assert with_cost.fit["rms_log_error"] < 0.01 < without.fit["rms_log_error"]
    assert without.link_slice_s == {}
