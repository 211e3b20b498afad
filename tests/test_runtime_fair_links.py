"""A chain's copies at their link's fair share (``Calibration.fair_links``, ``fair_link_copies``),
on a program worked out by hand: three GPUs on a line, three channels each forwarding one chunk
from GPU 0 through GPU 1 to GPU 2, so that three connections cross each link."""

from __future__ import annotations

import json

import numpy as np
import pytest

from collsynth import InputError
from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.tens.cost_models.runtime import Calibration, calibration_from_json, runtime_times
from collsynth.tens.runtime_program import program_features

STEP = '<step s="0" type="{t}" srcbuf="o" srcoff="{o}" dstbuf="o" dstoff="{o}" cnt="1" depid="-1" deps="-1" hasdep="0"/>'


def program(channels: int) -> str:
    """GPU 0 sends its chunk ``c`` on channel ``c`` (a thread block each), GPU 1 receives and
    forwards it (``rcs``), GPU 2 receives it; 9 chunks a loop (3 a rank)."""
    head = ('<algo name="t" proto="Simple" nchannels="3" nchunksperloop="9" ngpus="3" coll="allgather" '
            'inplace="1" outofplace="0" minBytes="0" maxBytes="1099511627776">')
    tb = '<tb id="{i}" send="{s}" recv="{r}" chan="{i}">{step}</tb>'
    roles = [(1, -1, "s"), (2, 0, "rcs"), (-1, 1, "r")]
    body = "".join(f'<gpu id="{g}" i_chunks="3" o_chunks="9" s_chunks="0">'
                   + "".join(tb.format(i=c, s=s, r=r, step=STEP.format(t=t, o=c)) for c in range(channels))
                   + "</gpu>" for g, (s, r, t) in enumerate(roles))
    return head + body + "</algo>"


def features(channels: int = 3):
    """The program on GPUs 0 -> 1 -> 2 joined by 1 GB/s links (P2P write: each send copies)."""
    line = make_instance(build("ring", {"nodes": 3}, bandwidth=1e9, alpha=0.0), "allgather", message_bytes=1.0)
    return program_features(program(channels), line, {"link": "write"})


def calibration(fair: bool) -> Calibration:
    """Links at half their bandwidth (0.5 GB/s), copies at 1 GB/s (1 ns a byte), no per-step,
    per-slice or per-block cost, 10 us a kernel, 64 KB buffers, the rounds not paid."""
    return Calibration("hand", "test", "", {"link": 0.5}, {"link": 0.0}, {"link": 0.0}, tb_rate=1e9,
                       reduce_rate=1e15, step_s=0.0, launch_s=10e-6, tb_s=0.0, buff_bytes=64000, round_share=0.0,
                       fair_links=fair)


def test_three_connections_cross_each_link():
    f = features()
    assert f.path_crowd["link"] == pytest.approx(3 / 1e9)


def test_a_chain_copies_at_its_links_fair_share_by_hand():
    # 288 KB: 32 KB a chunk, one iteration (half of the 64 KB buffer); a call moves two 16 KB slices.
    # Each link carries 3 chunks an iteration at 0.5 GB/s: 192 us, the period (a thread block
    # copies its one chunk in 32 us).
    # Alone on its link a copy runs at 1 GB/s: GPU 0's copy ends at 32 us, GPU 1's forward starts
    # one slice (16 us) later and ends at 48 us, below the period: 10 + 192 = 202 us.
    # Fairly shared, each of the 3 connections gets a third of 0.5 GB/s, 6 ns a byte: GPU 0's
    # first slice is across at 96 us, the forward copies its 32 KB in 192 us from then: 288 us,
    # above the period: 10 + 288 = 298 us.
    f = features()
    assert runtime_times(f, [288e3], calibration(False))[0] == pytest.approx(202e-6)
    assert runtime_times(f, [288e3], calibration(True))[0] == pytest.approx(298e-6)


def test_a_connection_alone_on_its_link_gets_all_of_it_by_hand():
    # one channel: each link carries one chunk, 64 us at 0.5 GB/s (the period). A connection
    # alone on its link gets all of it, 2 ns a byte, slower than the thread block's 1 ns: the
    # chain takes 1.5 x 32 KB x 2 ns = 96 us, 10 + 96 = 106 us; without the rule the chain's
    # copies run at 1 ns a byte, 48 us, below the period: 10 + 64 = 74 us.
    f = features(1)
    assert runtime_times(f, [288e3], calibration(True))[0] == pytest.approx(10e-6 + 96e-6)
    assert runtime_times(f, [288e3], calibration(False))[0] == pytest.approx(10e-6 + 64e-6)


def test_fair_shares_never_make_a_program_faster():
    f = features()
    sizes = np.geomspace(1e2, 1e9, 15)
    fair, free = runtime_times(f, sizes, calibration(True)), runtime_times(f, sizes, calibration(False))
    assert np.all(fair >= free - 1e-15) and np.any(fair > free * 1.4)


def test_calibration_file_keeps_the_rule():
    assert calibration_from_json(calibration(True).as_json(), "c.json").fair_links is True
    assert "fair_links" not in calibration(False).as_json()["parameters"]  # older files unchanged
    assert calibration_from_json(calibration(False).as_json(), "c.json").fair_links is False
    for bad in (1, "true", None):
        data = calibration(True).as_json()
        data["parameters"]["fair_links"] = bad
        with pytest.raises(InputError) as e:
            calibration_from_json(json.loads(json.dumps(data)), "c.json")
        assert e.value.where == "c.json: parameters.fair_links"


@pytest.mark.parametrize("value", ["1", '"yes"'])
def test_a_bad_manifest_fair_links_is_one_line(tmp_path, capsys, value):
    from cli_errors import assert_one_error_line, calibrate_with_setting
    path, code, out, err = calibrate_with_setting(tmp_path, capsys, f"fair_links = {value}")
    assert code == 2
    assert_one_error_line(err, [f"{path}.fair_links"])
