"""A connection's credit paid through its FIFO of four slices (``Calibration.fifo_window``:
``fifo_turns``) instead of by the sender once per slice in series, worked out by hand on one
sending thread block feeding one receiving one, and the work a connection's slots carry as
:func:`~collsynth.tens.runtime_program.program_features` reads it from a program."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from collsynth import InputError
from collsynth.tens.cost_models.runtime import FIFO_SLICES, Calibration, calibration_from_json, runtime_times
from collsynth.tens.runtime_program import ProgramFeatures, program_features
from test_runtime_model import chain_xml, line_instance


def features() -> ProgramFeatures:
    """Thread block 0 sends one chunk of the loop a step to thread block 1, which copies it
    across the link (a ``"read"`` connection); the link itself next to free; the critical path
    the send and the receive, one hop, one chunk copied."""
    return ProgramFeatures(tb_steps=np.array([1.0, 1.0]), tb_sent=np.array([0.0, 1.0]), tb_reduced=np.zeros(2),
                           tb_hops={"link": np.array([1.0, 0.0])}, gpu_ops={"link": np.array([1.0, 1.0])},
                           tbs_per_gpu=1, class_load={"link": 1e-15}, path_steps=2, path_sent=1, path_reduced=0,
                           path_hops={"link": 1}, nchunksperloop=1, max_cnt=1, proto="Simple", coll="allgather",
                           fifo_steps=np.array([2.0, 0.0]), fifo_sent=np.array([1.0, 0.0]), fifo_reduced=np.zeros(2))


def calibration(on: bool = True, hop: float = 10e-6) -> Calibration:
    """1 us a call of a step, ``hop`` a slice's credit, 1 GB/s copies, 2,000 B buffers (an
    iteration up to 1,000 B a chunk, a call of 1,000 B two slices of 500 B), nothing else."""
    return Calibration("hand", "test", "", {"link": 1.0}, {"link": hop}, {"link": 0.0}, tb_rate=1e9,
                       reduce_rate=1e9, step_s=1e-6, launch_s=0.0, tb_s=0.0, buff_bytes=2000, fifo_window=on)


def test_the_window_is_eight_steps_of_two():
    # NCCL_STEPS = 8 steps a connection, MSCCL_SLICESTEPS = NCCL_STEPS / 4 = 2 steps a slice
    assert FIFO_SLICES == 8 // (8 // 4)


def test_a_sender_held_by_its_receivers_slots():
    # 4,000 B: four iterations of 1,000 B, one call of two slices each. Credits in series (off):
    # the sender 1 us + 2 x 10 us = 21 us an iteration, the receiver 1 us + 1 us of copy = 2 us;
    # the first iteration max(its path 2 + 10 + 1 = 13 us, 21 us): 4 x 21 = 84 us. Through four
    # slots (on): a turn of the slots is both calls (2 us), the copy (1 us) and both slices'
    # credits (20 us), 23 us for four slices, 5.75 us an iteration of two: the sender waits for
    # its receiver's slots, above both thread blocks' own 1 and 2 us. The first iteration is its
    # path, 13 us: 13 + 3 x 5.75 = 30.25 us
    f = features()
    assert runtime_times(f, [4000.0], calibration(False))[0] == pytest.approx(84e-6)
    assert runtime_times(f, [4000.0], calibration())[0] == pytest.approx(30.25e-6)


def test_a_sender_the_slots_do_not_hold():
    # 2 us of credit a slice: in series the sender is 1 + 2 x 2 = 5 us an iteration, the
    # receiver 2 us: 5 (first: its path 2 + 2 + 1 = 5 us) + 3 x 5 = 20 us. Through the slots the
    # turn is (2 + 1 + 4) / 4 = 1.75 us, below the receiver's own 2 us: the slots hide the
    # credits and the receiver sets the period, 5 + 3 x 2 = 11 us
    f = features()
    assert runtime_times(f, [4000.0], calibration(False, 2e-6))[0] == pytest.approx(20e-6)
    assert runtime_times(f, [4000.0], calibration(True, 2e-6))[0] == pytest.approx(11e-6)


def test_features_without_the_connections_work_only_drop_the_serial_credits():
    # hand-built features with no fifo_* (older callers): the sender 1 us, the receiver 2 us,
    # nothing from the slots: 13 + 3 x 2 = 19 us
    f = replace(features(), fifo_steps=np.zeros(0), fifo_sent=np.zeros(0), fifo_reduced=np.zeros(0))
    assert runtime_times(f, [4000.0], calibration())[0] == pytest.approx(19e-6)


@pytest.mark.parametrize("mode, sent", [("read", [1.0, 2.0, 0.0]), ("write", [2.0, 1.0, 0.0])])
def test_the_connections_work_read_from_a_chain(mode, sent):
    # GPU 0 sends chunk 0 to GPU 1, whose receive forwards it (rcs) to GPU 2. Each connection's
    # slots carry its sender's and its receiver's step (2 each). Reading: GPU 1's rcs copies in
    # across the first link, GPU 2's receive across the second: the first connection 0 + 1, the
    # second 1 + 1. Writing: GPU 0's send and GPU 1's rcs copy out: 1 + 1, then 1 + 0.
    f = program_features(chain_xml(forward=True), line_instance(), {"link": mode})
    assert f.fifo_steps.tolist() == [2.0, 2.0, 0.0]
    assert f.fifo_sent.tolist() == sent
    assert f.fifo_reduced.tolist() == [0.0, 0.0, 0.0]


def test_calibration_file_keeps_the_switch():
    assert calibration_from_json(calibration().as_json(), "c.json").fifo_window is True
    off = calibration(False).as_json()["parameters"]
    assert "fifo_window" not in off  # older files unchanged
    assert calibration_from_json(calibration(False).as_json(), "c.json").fifo_window is False
    data = json.loads(json.dumps(calibration().as_json()))
    data["parameters"]["fifo_window"] = "yes"
    with pytest.raises(InputError) as e:
        calibration_from_json(data, "c.json")
    assert e.value.where == "c.json: parameters.fifo_window"


def test_the_fit_carries_the_switch_and_fits_nothing_more():
    from pathlib import Path

    from collsynth.tens.calibration import Row, fit
    from collsynth.tens.measurements import Measurement
    sizes = np.logspace(2, 6, 11)
    rows = [Row(Measurement(f"p-{b}", Path("p.xml"), Path("i.toml"), Path("l.txt"), b, "in-place", 0, False),
                features(), sizes, runtime_times(features(), sizes, replace(calibration(), buff_bytes=b), b))
            for b in (2000, 20000)]
    on, off = fit(rows, "t", "s", "", fifo_window=True), fit(rows, "t", "s", "")
    assert on.fifo_window and not off.fifo_window
    assert set(on.as_json()["parameters"]) == set(off.as_json()["parameters"]) | {"fifo_window"}


@pytest.mark.parametrize("value", ["1", '"true"'])
def test_a_bad_manifest_switch_is_one_line(tmp_path, capsys, value):
    from cli_errors import assert_one_error_line, calibrate_with_setting
    path, code, out, err = calibrate_with_setting(tmp_path, capsys, f"fifo_window = {value}")
    assert code == 2
    assert_one_error_line(err, [f"{path}.fifo_window"])
