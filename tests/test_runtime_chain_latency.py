"""The chain's latency on top of the bytes (``Calibration.chain_latency``, ``chain_latency``), on
the program of ``test_runtime_serial_links`` worked out by hand: GPU 0 sends two chunks to GPU 1
on two channels, GPU 1's thread block 2 sends one back (or two, in two steps, which holds the
next iteration back)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsynth import InputError
from collsynth.tens.cost_models.runtime import calibration_from_json, runtime_times
from test_runtime_serial_links import calibration, features


def chained(on: bool = True):
    """``test_runtime_serial_links``'s calibration (the link at 2 ns a byte, 5 us of credit a
    slice, free copies, 10 us a kernel, 12 KB buffers, rounds not paid) with or without the
    chain's latency on top of the bytes."""
    return replace(calibration(False), chain_latency=on)


def test_the_programs_as_read():
    one, two = features(), features((2, 0))
    assert (one.path_steps, one.path_hops, one.carried) == (2, {"link": 1}, ())
    assert (two.path_steps, two.path_hops, two.carried) == (3, {"link": 1}, (1.0, 1.0))


def test_latency_adds_to_the_busiest_links_bytes():
    # 36 KB: 12 KB a chunk, 2 iterations of 6 KB (half the 12 KB buffer). Link 0 -> 1 carries
    # 2 x 6 KB an iteration at 2 ns a byte: 24 us, the period (each sender: one call of two
    # slices, 2 x 5 us of credit). The chain (a send, then its receive) is one hop: 5 us.
    # Overlapped (the rule before): first iteration max(5, 24) = 24, 10 + 24 + 24 = 58 us.
    # Added: the first iteration 5 + 24 = 29 us; nothing holds the next iteration back, so the
    # period stays 24: 10 + 29 + 24 = 63 us.
    f = features()
    assert runtime_times(f, [36e3], chained(False))[0] == pytest.approx(58e-6)
    assert runtime_times(f, [36e3], chained())[0] == pytest.approx(63e-6)


def test_a_thread_block_holding_the_next_iteration_pays_it_every_iteration():
    # GPU 1's thread block 2 sends chunks 2 and 0 in two steps, so the next iteration starts
    # after all of this one's rounds (carried 1). Both links carry 2 x 6 KB: 24 us; that thread
    # block's two calls cost 4 x 5 us = 20 us of credit. The chain: 5 us (one hop). Overlapped:
    # 10 + 24 + 24 = 58 us. Added: the first iteration 5 + 24 = 29, and every period pays the
    # whole chain (D / R = 1) on top of the link's bytes, 29: 10 + 29 + 29 = 68 us.
    f = features((2, 0))
    assert runtime_times(f, [36e3], chained(False))[0] == pytest.approx(58e-6)
    assert runtime_times(f, [36e3], chained())[0] == pytest.approx(68e-6)


@settings(max_examples=40, deadline=None)
@given(size=st.floats(1e3, 1e10), back=st.sampled_from([(2,), (2, 0)]), hop=st.floats(0.0, 2e-5),
       step=st.floats(0.0, 2e-5), share=st.floats(0.05, 1.0), buff=st.sampled_from([1 << 14, 1 << 20, 1 << 22]))
def test_the_chain_only_adds(size, back, hop, step, share, buff):
    # never faster than the same calibration without it, and never faster than the links'
    # bytes at their calibrated share (the scaled lower bound: 2 chunks over each link)
    f = features(back)
    cal = replace(chained(False), hop_s={"link": hop}, step_s=step, efficiency={"link": share}, buff_bytes=buff)
    on, off = runtime_times(f, [size], replace(cal, chain_latency=True))[0], runtime_times(f, [size], cal)[0]
    assert on >= off * (1 - 1e-12)
    assert on >= 2 * (size / 3) / (share * 1e9) * (1 - 1e-12)


def test_calibration_file_keeps_the_switch():
    assert calibration_from_json(chained().as_json(), "c.json").chain_latency is True
    assert "chain_latency" not in chained(False).as_json()["parameters"]  # older files unchanged
    assert calibration_from_json(chained(False).as_json(), "c.json").chain_latency is False
    data = chained().as_json()
    data["parameters"]["chain_latency"] = "yes"
    with pytest.raises(InputError) as e:
        calibration_from_json(json.loads(json.dumps(data)), "c.json")
    assert e.value.where == "c.json: parameters.chain_latency"


def test_the_fit_prices_with_the_manifests_switch():
    # measured with the chain on top of the bytes (7 us a hop): the fit with the switch prices
    # with it and comes closer than the fit without
    from pathlib import Path

    from collsynth.tens.calibration import Row, fit
    from collsynth.tens.measurements import Measurement
    f = features((2, 0))
    truth = replace(chained(), hop_s={"link": 7e-6})
    sizes = np.logspace(3, 8, 11)
    rows = [Row(Measurement(f"p{b}", Path("p.xml"), Path("i.toml"), Path("l.txt"), b, "in-place", 0, False),
                f, sizes, runtime_times(f, sizes, truth, b)) for b in (1 << 14, 1 << 20)]
    on, off = fit(rows, "t", "s", "", chain_latency=True), fit(rows, "t", "s", "")
    print(on.fit["rms_log_error"], off.fit["rms_log_error"])
    assert on.chain_latency and not off.chain_latency
    assert on.fit["rms_log_error"] < off.fit["rms_log_error"] / 2


@pytest.mark.parametrize("value", ["1", '"true"'])
def test_a_bad_manifest_switch_is_one_line(tmp_path, capsys, value):
    from cli_errors import assert_one_error_line, calibrate_with_setting
    path, code, out, err = calibrate_with_setting(tmp_path, capsys, f"chain_latency = {value}")
    assert code == 2
    assert_one_error_line(err, [f"{path}.chain_latency"])
