"""The NIC connection's credit paid per round of an iteration's chain (``Calibration.nic_credit``:
``chain_credits``), worked out by hand on two boxes joined by NICs only: GPU 0's one thread
block sends ``k`` chunks to GPU 2 in ``k`` steps, a chain of ``k`` rounds over the NIC."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from collsynth import InputError
from collsynth.tens.cost_models.runtime import (MAX_CREDIT_S, Calibration, calibration_from_json, for_runtime,
                                               runtime_times)
from collsynth.tens.runtime_program import program_features
from test_runtime_model import two_box_instance, xml


def features(k: int):
    """GPU 0 sends chunks 0..k-1 to GPU 2 on one thread block, one step each; GPU 2 receives them."""
    program = xml(4, k, [[(2, -1, 0, [("s", i) for i in range(k)])], [],
                         [(-1, 0, 0, [("r", i) for i in range(k)])], []])
    return program_features(program, two_box_instance())


def calibration(credit: bool = True, buff: int = 1 << 30, credit_s: float = 5e-6) -> Calibration:
    """The NIC links at half of 1 GB/s (2 ns a byte), no per-slice or per-step cost, free
    copies, 10 us a kernel, the rounds paid in full, ``credit_s`` (5 us) a credit round trip."""
    return Calibration("hand", "test", "", {"nic": 0.5}, {"nic": 0.0}, {"nic": 0.0}, tb_rate=1e15,
                       reduce_rate=1e15, step_s=0.0, launch_s=10e-6, tb_s=0.0, buff_bytes=buff,
                       round_share=1.0, nic_credit=credit, credit_s=credit_s)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_chain_of_k_steps_over_a_nic_pays_k_round_trips(k):
    # 6 KB, one iteration (1 GiB buffers): the NIC link out of GPU 0 carries k chunks of 6 KB / k,
    # 6 KB at 2 ns = 12 us, in k rounds; 10 + 12 = 22 us without the credit, and k x 5 us more
    # with it
    f = features(k)
    assert runtime_times(f, [6e3], calibration(False))[0] == pytest.approx(22e-6)
    assert runtime_times(f, [6e3], calibration())[0] == pytest.approx(22e-6 + k * 5e-6)


def test_a_chain_that_holds_the_next_iteration_pays_its_round_trips_every_iteration():
    # k = 2 with 4 KB buffers: chunks of 3 KB in 2 iterations of 1.5 KB. The thread block's two
    # steps hold the next iteration back (carried 1): an iteration is 2 rounds of 1.5 KB at 2 ns
    # (6 us) plus 2 x 5 us of credit = 16 us, the first too: 10 + 16 + 16 = 42 us (without: the
    # NIC link's 6 us an iteration, 10 + 6 + 6 = 22 us)
    f = features(2)
    assert f.carried == (1.0, 1.0)
    assert runtime_times(f, [6e3], calibration(False, 4000))[0] == pytest.approx(22e-6)
    assert runtime_times(f, [6e3], calibration(True, 4000))[0] == pytest.approx(42e-6)
    # k = 1 (one step: nothing held back), 3 iterations of 2 KB at 4 us: only the first
    # iteration's round pays it, 10 + (4 + 5) + 2 x 4 = 27 us
    assert runtime_times(features(1), [6e3], calibration(True, 4000))[0] == pytest.approx(27e-6)


def test_rounds_over_nvlink_pay_no_nic_credit():
    # the same chain on a ring of two GPUs (link class "link", no NIC): the switch changes nothing
    from test_runtime_model import PAIR, pair_instance
    f = program_features(PAIR, pair_instance())
    on = replace(calibration(), efficiency={"link": 0.5}, hop_s={"link": 0.0}, gpu_op_s={"link": 0.0})
    off = replace(on, nic_credit=False)
    assert runtime_times(f, [6e3, 6e6], on).tolist() == runtime_times(f, [6e3, 6e6], off).tolist()


def test_another_runtime_scales_the_credit_as_its_other_fixed_costs():
    c = replace(calibration(), runtimes={"new": {"latency": 0.5, "bandwidth": 1.0}})
    assert for_runtime(c, "new").credit_s == pytest.approx(2.5e-6)


def test_calibration_file_keeps_the_switch_and_its_value():
    back = calibration_from_json(calibration().as_json(), "c.json")
    assert back.nic_credit is True and back.credit_s == 5e-6
    assert "nic_credit" not in calibration(False).as_json()["parameters"]  # older files unchanged
    assert "credit_s" not in calibration(False).as_json()["parameters"]
    assert calibration_from_json(calibration(False).as_json(), "c.json").nic_credit is False
    for key, bad in (("nic_credit", "yes"), ("credit_s", 1e-3), ("credit_s", 10.5e-6), ("credit_s", -1e-6)):
        data = json.loads(json.dumps(calibration().as_json()))
        data["parameters"][key] = bad
        with pytest.raises(InputError) as e:
            calibration_from_json(data, "c.json")
        assert e.value.where == f"c.json: parameters.{key}"


def test_the_fit_finds_the_credit_it_was_measured_with():
    # measured with 5 us a round trip (chains of 2 and 3 steps, two buffer sizes): the fit with
    # the switch prices with it, and finds it, where the fit without cannot
    from collsynth.tens.calibration import fit
    rows = measured_rows(5e-6)
    on, off = fit(rows, "t", "s", "", nic_credit=True), fit(rows, "t", "s", "")
    assert on.nic_credit and not off.nic_credit and off.credit_s == 0.0
    assert on.fit["rms_log_error"] < off.fit["rms_log_error"] / 2


@pytest.mark.parametrize("value", ["1", '"true"'])
def test_a_bad_manifest_switch_is_one_line(tmp_path, capsys, value):
    from cli_errors import assert_one_error_line, calibrate_with_setting
    path, code, out, err = calibrate_with_setting(tmp_path, capsys, f"nic_credit = {value}")
    assert code == 2
    assert_one_error_line(err, [f"{path}.nic_credit"])


def test_the_credit_is_bounded_by_a_round_trip():
    # an InfiniBand credit (one small RDMA write and the proxies' polls) is a few us: 10 us at most
    assert MAX_CREDIT_S == 10e-6
    assert calibration_from_json(calibration(credit_s=10e-6).as_json(), "c.json").credit_s == 10e-6


def test_a_chain_at_the_bound_pays_ten_us_a_round():
    # the chains above at the bound: 6 KB in one iteration, k rounds over the NIC, 22 us + k x 10 us;
    # k = 2 holding the next iteration back (4 KB buffers, 2 iterations of 2 rounds of 1.5 KB, 6 us
    # each): 10 + 2 x (6 + 2 x 10) = 62 us
    for k in (1, 2, 3):
        assert runtime_times(features(k), [6e3], calibration(credit_s=10e-6))[0] == pytest.approx(22e-6 + k * 10e-6)
    assert runtime_times(features(2), [6e3], calibration(True, 4000, 10e-6))[0] == pytest.approx(62e-6)


def measured_rows(credit_s: float):
    """Chains of 2 and 3 NIC steps at two buffer sizes, timed with a ``credit_s`` credit."""
    from collsynth.tens.calibration import Row
    from collsynth.tens.measurements import Measurement
    sizes = np.logspace(3, 8, 11)
    return [Row(Measurement(f"p{k}-{b}", Path("p.xml"), Path("i.toml"), Path("l.txt"), b, "in-place", 0, False),
                features(k), sizes, runtime_times(features(k), sizes, calibration(True, b, credit_s), b))
            for k in (2, 3) for b in (1 << 14, 1 << 20)]


def test_the_fit_holds_the_credit_within_its_bound():
    # measured with 8 us a round trip the fit finds it; measured with 30 us (no round trip) it
    # stops at the 10 us bound, where an unbounded fit would reach 30 us
    from collsynth.tens.calibration import fit
    assert fit(measured_rows(8e-6), "t", "s", "", nic_credit=True).credit_s == pytest.approx(8e-6, rel=0.02)
    assert fit(measured_rows(30e-6), "t", "s", "", nic_credit=True).credit_s == pytest.approx(MAX_CREDIT_S)


def test_a_credit_beyond_the_bound_in_a_calibration_file_is_one_line(tmp_path, capsys):
    from cli_errors import assert_one_error_line, run_cli
    from test_runtime_model import cal
    bad = replace(cal(name="ring-links", efficiency={"link": 0.5}, hop_s={"link": 1e-6}), nic_credit=True,
                  credit_s=20e-6)
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(bad.as_json()))
    inst = Path(__file__).resolve().parents[1] / "instances" / "corpus" / "ring8-allgather.toml"
    code, out, err = run_cli(["solve", inst, "--producer", "ring", "--calibration", path], capsys)
    assert code == 2 and out == ""
    assert_one_error_line(err, [str(path), "parameters.credit_s"])
