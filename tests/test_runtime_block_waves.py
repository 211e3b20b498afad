"""One thread block an SM, those beyond the SMs waiting for one to exit (``Calibration.block_waves``,
``late_blocks``), on the three-thread-block program of ``test_runtime_shared_sms`` worked out by
hand: two GPUs, links so fast that only the copies and the credit count."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from collsynth import InputError
from collsynth.tens.cost_models.runtime import calibration_from_json, runtime_times
from collsynth.tens.runtime_program import block_order
from test_runtime_shared_sms import calibration as base_calibration
from test_runtime_shared_sms import features


def calibration(sms: int, waves: bool = True):
    """The shared-SM test's calibration (copies at 1 GB/s, 10 us a kernel, 12 KB buffers, the rounds
    not paid) with 1 us of credit per non-empty slice."""
    return replace(base_calibration(sms), hop_s={"link": 1e-6}, block_waves=waves)


def test_blocks_are_numbered_per_gpu_by_id():
    # GPU 0's thread blocks 0, 1, 2 and GPU 1's 0, 1, 2, in the program's order
    assert features().tb_order.tolist() == [0, 1, 2, 0, 1, 2]
    assert block_order([(3, 7), (3, 1), (0, 4)]).tolist() == [1, 0, 0]


def test_the_block_beyond_the_sms_runs_after_the_others():
    # 36 KB: 12 KB a chunk, 2 iterations of 6 KB, two non-empty slices a call (6 KB > 12 KB / 128).
    # A sending thread block an iteration: 2 slices x 1 us of credit + 6 KB at 1 GB/s = 8 us, the
    # period; the first iteration's path: 1 hop's credit (1 us) + one copy (6 us) = 7 us, less
    # than the period, so 8 us. Alone: 10 + 8 + 8 = 26 us.
    f = features()
    assert runtime_times(f, [36e3], calibration(0))[0] == pytest.approx(26e-6)
    assert runtime_times(f, [36e3], calibration(3))[0] == pytest.approx(26e-6)
    # 2 SMs: each GPU's thread block 2 waits; GPU 1's sends chunk 2 (8 us an iteration), GPU 0's
    # receives it (no copy on a write connection, no credit): 2 iterations x 8 us = 16 us more, 42 us
    assert runtime_times(f, [36e3], calibration(2))[0] == pytest.approx(42e-6)
    # without the switch two blocks share an SM at half rate: 2 + 12 = 14 us an iteration, the
    # path 1 + 12 = 13 us: 10 + 14 + 14 = 38 us
    assert runtime_times(f, [36e3], calibration(2, waves=False))[0] == pytest.approx(38e-6)


def test_waiting_blocks_never_make_a_program_faster():
    f = features()
    sizes = np.geomspace(1e2, 1e9, 15)
    late, alone = runtime_times(f, sizes, calibration(2)), runtime_times(f, sizes, calibration(0))
    assert np.all(late >= alone - 1e-15) and np.any(late > alone * 1.4)


def test_calibration_file_keeps_the_switch():
    assert calibration_from_json(calibration(108).as_json(), "c.json").block_waves is True
    assert "block_waves" not in calibration(108, waves=False).as_json()["parameters"]  # older files unchanged
    assert calibration_from_json(calibration(108, waves=False).as_json(), "c.json").block_waves is False
    data = calibration(108).as_json()
    data["parameters"]["block_waves"] = "yes"
    with pytest.raises(InputError) as e:
        calibration_from_json(json.loads(json.dumps(data)), "c.json")
    assert e.value.where == "c.json: parameters.block_waves"


@pytest.mark.parametrize("value", ["1", '"yes"'])
def test_a_bad_manifest_block_waves_is_one_line(tmp_path, capsys, value):
    from cli_errors import assert_one_error_line, calibrate_with_setting
    path, code, out, err = calibrate_with_setting(tmp_path, capsys, f"block_waves = {value}")
    assert code == 2
    assert_one_error_line(err, [f"{path}.block_waves"])
