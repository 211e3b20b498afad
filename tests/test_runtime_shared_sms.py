"""Thread blocks sharing an SM (``Calibration.sms``, ``shared_sms``), on a program worked out by
hand: two GPUs, three thread blocks each (two channels from GPU 0 to GPU 1, one back), links
so fast that only the copies count."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from collsynth import InputError
from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.tens.cost_models.runtime import Calibration, calibration_from_json, runtime_times
from collsynth.tens.runtime_program import program_features
from test_runtime_serial_links import program


def features():
    """The three-thread-block program on two GPUs joined by 1 TB/s links."""
    instance = make_instance(build("ring", {"nodes": 2}, bandwidth=1e12, alpha=0.0), "allgather", message_bytes=1.0)
    return program_features(program(), instance)


def calibration(sms: int, tb_rate: float = 1e9) -> Calibration:
    """Copies at ``tb_rate`` (1 GB/s: 1 ns a byte), no per-step, per-slice or per-block cost,
    10 us a kernel, 12 KB buffers, the rounds not paid."""
    return Calibration("hand", "test", "", {"link": 1.0}, {"link": 0.0}, {"link": 0.0}, tb_rate=tb_rate,
                       reduce_rate=1e15, step_s=0.0, launch_s=10e-6, tb_s=0.0, buff_bytes=12000,
                       round_share=0.0, sms=sms)


def test_the_program_runs_three_thread_blocks_a_gpu():
    assert features().tbs_per_gpu == 3


def test_copies_at_half_rate_beyond_the_sms():
    # 36 KB: 12 KB a chunk, 2 iterations of 6 KB (half the 12 KB buffer). Each sender copies its
    # chunk's 6 KB an iteration: at 1 GB/s 6 us, the period; the first iteration is one copy on
    # the path (a send, then its receive), 6 us. 10 + 6 + 6 = 22 us. The links carry 12 KB an
    # iteration at 1 TB/s, 12 ns: never the larger.
    f = features()
    assert runtime_times(f, [36e3], calibration(0))[0] == pytest.approx(22e-6)
    # 3 thread blocks a GPU, 3 SMs: one each, the same 22 us
    assert runtime_times(f, [36e3], calibration(3))[0] == pytest.approx(22e-6)
    # 2 SMs: two blocks share one, every copy at 0.5 GB/s, 12 us: 10 + 12 + 12 = 34 us
    assert runtime_times(f, [36e3], calibration(2))[0] == pytest.approx(34e-6)


def test_sharing_never_makes_a_program_faster():
    f = features()
    sizes = np.geomspace(1e2, 1e9, 15)
    crowded, alone = runtime_times(f, sizes, calibration(2)), runtime_times(f, sizes, calibration(0))
    assert np.all(crowded >= alone - 1e-15) and np.any(crowded > alone * 1.4)


def test_calibration_file_keeps_the_sms():
    assert calibration_from_json(calibration(108).as_json(), "c.json").sms == 108
    assert "sms" not in calibration(0).as_json()["parameters"]  # older files unchanged
    assert calibration_from_json(calibration(0).as_json(), "c.json").sms == 0
    for bad in (-1, 1.5, True, "108"):
        data = calibration(108).as_json()
        data["parameters"]["sms"] = bad
        with pytest.raises(InputError) as e:
            calibration_from_json(json.loads(json.dumps(data)), "c.json")
        assert e.value.where == "c.json: parameters.sms"


def test_the_fit_prices_with_the_manifests_sms():
    # measured with 4 GB/s copies on a GPU of 2 SMs (so 2 GB/s seen): fitted with the SMs
    # the copy rate comes back at 4 GB/s, fitted without at the 2 GB/s it looks like
    from collsynth.tens.calibration import Row, fit
    from collsynth.tens.measurements import Measurement
    f = features()
    truth = calibration(2, tb_rate=4e9)
    sizes = np.logspace(4, 8, 9)
    rows = [Row(Measurement(f"p{b}", Path("p.xml"), Path("i.toml"), Path("l.txt"), b, "in-place", 0, False),
                f, sizes, runtime_times(f, sizes, truth, b)) for b in (1 << 16, 1 << 20)]
    with_sms, without = fit(rows, "t", "s", "", sms=2), fit(rows, "t", "s", "")
    assert with_sms.sms == 2 and without.sms == 0
    assert with_sms.tb_rate == pytest.approx(4e9, rel=0.02)
    assert without.tb_rate == pytest.approx(2e9, rel=0.02)


@pytest.mark.parametrize("value", ["-3", "1.5", '"108"'])
def test_a_bad_manifest_sms_is_one_line(tmp_path, capsys, value):
    from cli_errors import assert_one_error_line, calibrate_with_setting
    path, code, out, err = calibrate_with_setting(tmp_path, capsys, f"sms = {value}")
    assert code == 2
    assert_one_error_line(err, [f"{path}.sms"])
