"""The first iteration's chain of steps paying a share of the GPU's shared cost per slice in
series (``Calibration.shared_chain``: ``chained_shared``), worked out by hand on one thread
block of one step whose sizes run in one loop iteration."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from collsynth import InputError
from collsynth.tens.cost_models.runtime import Calibration, calibration_from_json, runtime_times
from collsynth.tens.runtime_program import ProgramFeatures


def features() -> ProgramFeatures:
    """One thread block of one step sending one chunk of the loop across ``link``; each of two
    GPUs does one send's slices of the shared cost; the critical path one step and one hop."""
    return ProgramFeatures(tb_steps=np.array([1.0]), tb_sent=np.array([1.0]), tb_reduced=np.array([0.0]),
                           tb_hops={"link": np.array([1.0])}, gpu_ops={"link": np.array([1.0, 1.0])},
                           tbs_per_gpu=1, class_load={"link": 1e-9}, path_steps=1, path_sent=1, path_reduced=0,
                           path_hops={"link": 1}, nchunksperloop=1, max_cnt=1, proto="Simple", coll="allgather")


def calibration(on: bool = True, share: float = 0.5) -> Calibration:
    """1 us a step and a slice's credit, 1 GB/s copies, 1.5 us of the GPU's shared cost a slice,
    the link at half of 1 GB/s, 2,000 B buffers (one iteration up to 1,000 B), no launch cost."""
    return Calibration("hand", "test", "", {"link": 0.5}, {"link": 1e-6}, {"link": 1.5e-6}, tb_rate=1e9,
                       reduce_rate=1e9, step_s=1e-6, launch_s=0.0, tb_s=0.0, buff_bytes=2000,
                       shared_chain=on, chain_share=share)


def test_one_iteration_pays_the_share_of_the_shared_cost_after_the_busiest_thread_block():
    # 1,000 B, one iteration: a call of 1,000 B sends 2 slices of 500 B. The thread block:
    # 1 us a step + 2 slices x 1 us of credit + 1,000 B at 1 GB/s (1 us) = 4 us; the GPU's
    # shared cost 2 slices x 1.5 us = 3 us; the link 1,000 B at 0.5 GB/s = 2 us; the critical
    # path 1 us + 1 us + its copy 1 us = 3 us. Without the switch the largest, 4 us; with it
    # 4 us + 0.5 x 3 us = 5.5 us, and 4 + 3 = 7 us at a share of 1
    f = features()
    assert runtime_times(f, [1000.0], calibration(False))[0] == pytest.approx(4e-6)
    assert runtime_times(f, [1000.0], calibration())[0] == pytest.approx(5.5e-6)
    assert runtime_times(f, [1000.0], calibration(share=1.0))[0] == pytest.approx(7e-6)
    assert runtime_times(f, [1000.0], calibration(share=0.0))[0] == pytest.approx(4e-6)


def test_later_iterations_keep_the_period():
    # 4,000 B: 4 iterations of 1,000 B; only the first pays the share, the other three 4 us each:
    # 5.5 + 3 x 4 = 17.5 us (16 us without the switch)
    f = features()
    assert runtime_times(f, [4000.0], calibration(False))[0] == pytest.approx(16e-6)
    assert runtime_times(f, [4000.0], calibration())[0] == pytest.approx(17.5e-6)


def test_calibration_file_keeps_the_switch_and_its_share():
    back = calibration_from_json(calibration().as_json(), "c.json")
    assert back.shared_chain is True and back.chain_share == 0.5
    off = calibration(False).as_json()["parameters"]
    assert "shared_chain" not in off and "chain_share" not in off  # older files unchanged
    assert calibration_from_json(calibration(False).as_json(), "c.json").shared_chain is False
    for key, bad in (("shared_chain", "yes"), ("chain_share", 1.5), ("chain_share", -0.1)):
        data = json.loads(json.dumps(calibration().as_json()))
        data["parameters"][key] = bad
        with pytest.raises(InputError) as e:
            calibration_from_json(data, "c.json")
        assert e.value.where == f"c.json: parameters.{key}"


def measured_rows(share: float):
    """The program at 11 sizes and two buffer sizes, timed with the chain paying ``share``."""
    from pathlib import Path

    from collsynth.tens.calibration import Row
    from collsynth.tens.measurements import Measurement
    sizes = np.logspace(2, 6, 11)
    return [Row(Measurement(f"p-{b}", Path("p.xml"), Path("i.toml"), Path("l.txt"), b, "in-place", 0, False),
                features(), sizes, runtime_times(features(), sizes, replace(calibration(True, share), buff_bytes=b), b))
            for b in (2000, 20000)]


def test_the_fit_fits_the_share_only_with_the_switch():
    # the share is the fit vector's last entry: with the switch the calibration carries a share
    # in 0..1 and fits the rows at least as well as without, which has neither
    from collsynth.tens.calibration import fit
    rows = measured_rows(0.5)
    on, off = fit(rows, "t", "s", "", shared_chain=True), fit(rows, "t", "s", "")
    assert on.shared_chain and 0.0 <= on.chain_share <= 1.0
    assert not off.shared_chain and off.chain_share == 0.0
    assert on.fit["rms_log_error"] <= off.fit["rms_log_error"] + 1e-9


@pytest.mark.parametrize("value", ["1", '"true"'])
def test_a_bad_manifest_switch_is_one_line(tmp_path, capsys, value):
    from cli_errors import assert_one_error_line, calibrate_with_setting
    path, code, out, err = calibrate_with_setting(tmp_path, capsys, f"shared_chain = {value}")
    assert code == 2
    assert_one_error_line(err, [f"{path}.shared_chain"])
