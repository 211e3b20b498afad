"""The runtime model's steady state when a thread block holds the next loop iteration back
(:func:`collsynth.tens.runtime_program.carried_rounds`), on programs worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.tens.cost_models.runtime import Calibration, runtime_times
from collsynth.tens.runtime_program import program_features


def program(gpus: list[list[tuple[int, int, list[tuple[str, int, int]]]]]) -> str:
    """Two GPUs, two chunks, one channel: per GPU, thread blocks ``(send, recv, [(type, chunk,
    depid), ...])`` (``depid``: the thread block whose step 0 it waits for, or -1)."""
    out = ['<algo name="t" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="allgather" '
           'inplace="1" outofplace="0" minBytes="0" maxBytes="1099511627776">']
    for g, tbs in enumerate(gpus):
        out.append(f'<gpu id="{g}" i_chunks="0" o_chunks="2" s_chunks="0">')
        for t, (send, recv, steps) in enumerate(tbs):
            out.append(f'<tb id="{t}" send="{send}" recv="{recv}" chan="0">')
            out += [f'<step s="{k}" type="{typ}" srcbuf="o" srcoff="{c}" dstbuf="o" dstoff="{c}" cnt="1" '
                    f'depid="{d}" deps="{0 if d >= 0 else -1}" hasdep="0"/>' for k, (typ, c, d) in enumerate(steps)]
            out.append("</tb>")
        out.append("</gpu>")
    return "\n".join(out + ["</algo>"])


# GPU 1 sends its chunk only after receiving GPU 0's: a ping-pong. In one thread block a GPU
# (GPU 0: send, then receive; GPU 1: receive, then send); in two, each one step, GPU 1's send
# waiting for its receiving thread block (depid).
ONE_BLOCK = program([[(1, 1, [("s", 0, -1), ("r", 1, -1)])], [(0, 0, [("r", 0, -1), ("s", 1, -1)])]])
TWO_BLOCKS = program([[(1, -1, [("s", 0, -1)]), (-1, 1, [("r", 1, -1)])],
                      [(-1, 0, [("r", 0, -1)]), (0, -1, [("s", 1, 0)])]])


def calibration(round_share: float = 1.0) -> Calibration:
    """Links at half of 1 GB/s (2 ns a byte), no fixed cost but 10 us a kernel, free copies."""
    zero = {"link": 0.0}
    return Calibration("hand", "test", "", {"link": 0.5}, zero, zero, tb_rate=1e15, reduce_rate=1e15, step_s=0.0,
                       launch_s=10e-6, tb_s=0.0, buff_bytes=8192, round_share=round_share)


def features(text: str):
    instance = make_instance(build("ring", {"nodes": 2}, bandwidth=1e9, alpha=0.0), "allgather", message_bytes=1.0)
    return program_features(text, instance)


def test_one_block_waits_for_the_previous_iteration():
    # Rounds: 0 -> 1 in round 0, 1 -> 1's send after its receive, round 1. A thread block runs
    # its steps in order once per iteration, so GPU 0 sends iteration k + 1's chunk only after
    # receiving iteration k's: 2 rounds an iteration, nothing overlaps.
    f = features(ONE_BLOCK)
    assert f.carried == (1.0, 1.0)
    # 20 KB: 10 KB a chunk, 3 iterations of 10/3 KB (half of the 8 KB buffer at most); a round
    # moves one chunk over one link: 2 ns x 10/3 KB = 6.67 us. Each iteration is 2 rounds:
    # 10 us + 3 x 13.33 us = 50 us.
    assert runtime_times(f, [20e3], calibration())[0] == pytest.approx(50e-6)
    # with none of the rounds paid (round share 0) the period is the busiest link's: 10 + 3 x 6.67
    assert runtime_times(f, [20e3], calibration(0.0))[0] == pytest.approx(30e-6)


def test_one_step_blocks_pipeline_the_iterations():
    # The same transfers in thread blocks of one step each: iteration k + 1's send starts a round
    # after iteration k's, so after the first iteration (13.33 us, its two rounds) each further
    # one costs the busiest link's 6.67 us: 10 + 13.33 + 2 x 6.67 = 36.67 us.
    f = features(TWO_BLOCKS)
    assert f.carried == ()
    assert runtime_times(f, [20e3], calibration())[0] == pytest.approx(10e-6 + 40e-6 / 3 + 2 * 20e-6 / 3)


def test_never_below_the_pipelined_price():
    # holding an iteration back only adds: the one-block program never prices below the same
    # program with its iterations pipelined, at any size
    f = features(ONE_BLOCK)
    sizes = np.geomspace(1e3, 1e9, 13)
    pipelined = runtime_times(f.__class__(**{**f.__dict__, "carried": ()}), sizes, calibration())
    assert np.all(runtime_times(f, sizes, calibration()) >= pipelined * (1 - 1e-12))
