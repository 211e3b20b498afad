"""A thread block's fixed costs on top of its link's time (``Calibration.serial_links``), on a
program worked out by hand: two channels share one link, so each thread block's transfers end
when the link has carried both, and its per-call credit wait comes after that."""

from __future__ import annotations

import json

import numpy as np
import pytest

from collsynth import InputError
from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.tens.cost_models.runtime import Calibration, calibration_from_json, runtime_times
from collsynth.tens.runtime_program import program_features

# GPU 0 sends two chunks to GPU 1, one on each channel (thread blocks 0 and 1); GPU 1
# receives them (thread blocks 0 and 1) and its thread block 2 sends chunk 2 back to GPU 0 on
# channel 0, received by GPU 0's thread block 2. Per thread block: (channel, send peer,
# receive peer, step type, chunks). Link 0 -> 1 carries 2 chunks an iteration,
# link 1 -> 0 one.
STEP = ('<step s="{k}" type="{t}" srcbuf="o" srcoff="{c}" dstbuf="o" dstoff="{c}" cnt="1" depid="-1" deps="-1" '
        'hasdep="0"/>')


def program(back: tuple = (2,)) -> str:
    """The program above, GPU 1's thread block 2 sending the chunks ``back`` (one step each)."""
    tbs = {0: [(0, 1, -1, "s", (0,)), (1, 1, -1, "s", (1,)), (0, -1, 1, "r", back)],
           1: [(0, -1, 0, "r", (0,)), (1, -1, 0, "r", (1,)), (0, 0, -1, "s", back)]}
    out = ['<algo name="t" proto="Simple" nchannels="2" nchunksperloop="3" ngpus="2" coll="allgather" '
           'inplace="1" outofplace="0" minBytes="0" maxBytes="1099511627776">']
    for g, blocks in tbs.items():
        out.append(f'<gpu id="{g}" i_chunks="0" o_chunks="3" s_chunks="0">')
        for t, (chan, send, recv, typ, chunks) in enumerate(blocks):
            out.append(f'<tb id="{t}" send="{send}" recv="{recv}" chan="{chan}">')
            out += [STEP.format(k=k, t=typ, c=c) for k, c in enumerate(chunks)]
            out.append("</tb>")
        out.append("</gpu>")
    return "\n".join(out + ["</algo>"])


def features(back: tuple = (2,)):
    instance = make_instance(build("ring", {"nodes": 2}, bandwidth=1e9, alpha=0.0), "allgather", message_bytes=1.0)
    return program_features(program(back), instance)


def calibration(serial: bool) -> Calibration:
    """The link at half of 1 GB/s (2 ns a byte), 5 us of credit per slice (an empty slice too:
    handshake share 1), free copies, 10 us a kernel, 12 KB buffers."""
    return Calibration("hand", "test", "", {"link": 0.5}, {"link": 5e-6}, {"link": 0.0}, tb_rate=1e15,
                       reduce_rate=1e15, step_s=0.0, launch_s=10e-6, tb_s=0.0, buff_bytes=12000,
                       round_share=0.0, handshake_share=1.0, serial_links=serial)


def test_each_thread_block_sees_its_busiest_link():
    # link loads in chunks over bytes/s: 0 -> 1 carries 2 chunks, 1 -> 0 one, both 1 GB/s
    sending = [2e-9, 2e-9, 0.0, 0.0, 0.0, 1e-9]  # GPU 0's tbs 0-2, then GPU 1's
    assert features().tb_links["link"].tolist() == pytest.approx(sending)
    # GPU 1's thread block 2 sending two chunks in two steps: its link carries 2, once (a link's
    # load, not its steps' sum)
    assert features((2, 0)).tb_links["link"].tolist() == pytest.approx([2e-9, 2e-9, 0.0, 0.0, 0.0, 2e-9])


def test_fixed_costs_add_to_the_shared_link():
    # 36 KB: 12 KB a chunk, 2 iterations of 6 KB (half the 12 KB buffer). Each sending thread
    # block makes one call an iteration, two slices (6 KB > 12 KB / 128): 2 x 5 us of credit.
    # Link 0 -> 1 carries 2 x 6 KB an iteration at 2 ns a byte: 24 us.
    # Serial: GPU 0's senders take 10 + 24 = 34 us an iteration; GPU 1's sender 10 + 12 = 22;
    # the period is 34 us, the first iteration too (its path, a send and a receive, is 5 us of
    # credit), so 10 us + 2 x 34 us = 78 us.
    f = features()
    assert runtime_times(f, [36e3], calibration(True))[0] == pytest.approx(78e-6)
    # Not serial (the rule before): the senders take 10 us, the link 24 us apart, the period
    # is the larger: 10 + 2 x 24 = 58 us.
    assert runtime_times(f, [36e3], calibration(False))[0] == pytest.approx(58e-6)


def test_serial_links_only_adds():
    # the time with the fixed costs on top of the links is never below the time without
    f = features()
    sizes = np.geomspace(1e2, 1e9, 15)
    assert np.all(runtime_times(f, sizes, calibration(True)) >= runtime_times(f, sizes, calibration(False)) - 1e-15)


def test_calibration_file_keeps_the_setting(tmp_path):
    on = calibration_from_json(calibration(True).as_json(), "c.json")
    off = calibration_from_json(calibration(False).as_json(), "c.json")
    assert on.serial_links is True and off.serial_links is False
    assert "serial_links" not in calibration(False).as_json()["parameters"]  # older files unchanged
    bad = calibration(True).as_json()
    bad["parameters"]["serial_links"] = "yes"
    with pytest.raises(InputError) as e:
        calibration_from_json(json.loads(json.dumps(bad)), "c.json")
    assert e.value.where == "c.json: parameters.serial_links"


def pair_rows(truth: Calibration):
    """The pair program (two GPUs, each sending its chunk to the other) measured under ``truth``
    with 64 KiB and 1 MiB buffers at 1 KB to 100 MB."""
    from pathlib import Path

    from collsynth.tens.calibration import Row
    from collsynth.tens.measurements import Measurement
    from test_runtime_model import PAIR, pair_instance
    f = program_features(PAIR, pair_instance())
    sizes = np.logspace(3, 8, 11)
    return [Row(Measurement(f"pair{b}", Path("p.xml"), Path("i.toml"), Path("l.txt"), b, "in-place", 0, False),
                f, sizes, runtime_times(f, sizes, truth, b)) for b in (1 << 16, 1 << 20)]


@pytest.mark.parametrize("credit, gpu_op", [(20e-6, 0.0), (0.0, 5e-6)])
def test_the_credit_start_keeps_the_better_of_two_fits(credit, gpu_op):
    # measurements made with the per-slice cost on the connection's credit (20 us) or on the
    # GPU (5 us): the fit runs from both starts and keeps the one of lower error, records both
    from collsynth.tens.calibration import fit
    from test_runtime_model import cal
    truth = cal(efficiency={"link": 0.6}, hop_s={"link": credit}, gpu_op_s={"link": gpu_op}, step_s=0.0,
                launch_s=20e-6)
    both = fit(pair_rows(truth), "t", "s", "", credit_start=True)
    starts = both.fit["starts"]
    assert set(starts) == {"default", "credit"} and starts["default"] != starts["credit"]
    assert both.fit["rms_log_error"] == pytest.approx(min(starts.values()), rel=1e-9)
    assert both.fit["start"] == min(starts, key=starts.get)
    assert "starts" not in fit(pair_rows(truth), "t", "s", "").fit


@pytest.mark.parametrize("key", ["serial_links", "credit_start"])
def test_a_manifest_setting_that_is_not_true_or_false_is_one_line(tmp_path, capsys, key):
    from cli_errors import assert_one_error_line, calibrate_with_setting
    path, code, out, err = calibrate_with_setting(tmp_path, capsys, f'{key} = "yes"')
    assert code == 2
    assert_one_error_line(err, [f"{path}.{key}", "bool"])
