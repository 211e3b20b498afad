"""Coarsening a piece schedule to the grid a runtime takes: by hand, and over random
splits of chunks among routes (hypothesis), the result verifies and keeps each route's share
within one grid piece."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.tens.coarsen import coarsen, segments
from collsynth.tens.cost_models.runtime import Calibration, program_of, runtime_times
from collsynth.tens.runtime_program import program_features
from collsynth.tens.schedule import from_arrays
from collsynth.tens.verify import verify


def three_ring():
    return make_instance(build("ring", {"nodes": 3}, bandwidth=1e9, alpha=0.0), "allgather", message_bytes=3e6)


def routes(c: int) -> list[list[tuple[int, int, int]]]:
    """Three ways chunk ``c`` of a 3-GPU ring reaches the others: ``(src, dst, step)`` sends."""
    a, b = (c + 1) % 3, (c + 2) % 3
    return [[(c, a, 1), (c, b, 1)], [(c, a, 1), (a, b, 2)], [(c, b, 1), (b, a, 2)]]


def split_schedule(widths: list[list[int]], denom: int, cycle: int = 1):
    """Chunk ``c`` split into consecutive pieces of ``widths[c][r]`` (over ``denom``), piece ``r``
    along route ``r``; ``cycle`` times over, each time a ``cycle``-th of the widths."""
    cols = {k: [] for k in ("chunk", "lo", "hi", "src", "dst", "step")}
    for c in range(3):
        start = 0
        for r, w in [(r, w // cycle) for _ in range(cycle) for r, w in enumerate(widths[c])]:
            for src, dst, step in routes(c)[r] if w else ():
                for k, v in zip(cols, (c, start, start + w, src, dst, step)):
                    cols[k].append(v)
            start += w
    return from_arrays("allgather", 3, 3, denom=denom, **cols)


def test_coarsen_by_hand():
    # chunk 0: 1/7 direct, 2/7 clockwise, 4/7 counter-clockwise; on a grid of 2: shares 2/7,
    # 4/7, 8/7 -> 0, 0, 1 + remainders .29, .57, .14 -> the clockwise route gets the second piece
    s = split_schedule([[1, 2, 4], [7, 0, 0], [0, 7, 0]], 7)
    c = coarsen(s, 2)
    assert verify(s, three_ring()) is None and verify(c, three_ring()) is None
    assert c.denom == 2
    runs = segments(c)
    assert [(a, b, sorted({(int(c.src[i]), int(c.dst[i]), int(c.step[i])) for i in ix})) for a, b, ix in runs[0]] == \
        [(0, 1, [(0, 1, 1), (1, 2, 2)]), (1, 2, [(0, 2, 1), (2, 1, 2)])]
    assert coarsen(s, 7) is s


@settings(max_examples=30, deadline=None)
@given(widths=st.lists(st.lists(st.integers(0, 40), min_size=3, max_size=3).filter(sum), min_size=3, max_size=3),
       grid=st.integers(1, 12))
def test_coarsened_schedules_verify_and_keep_shares(widths, grid):
    total = [sum(w) for w in widths]
    denom = int(np.lcm.reduce(total))
    scaled = [[w * denom // t for w in ws] for ws, t in zip(widths, total)]
    s = split_schedule(scaled, denom)
    assert verify(s, three_ring()) is None
    c = coarsen(s, grid)
    assert verify(c, three_ring()) is None
    assert c.denom == min(grid, denom)
    if denom > grid:
        for ch, runs in segments(c).items():
            got = {}
            for a, b, ix in runs:
                got[tuple(sorted((int(c.src[i]), int(c.dst[i])) for i in ix))] = (b - a) / grid
            for r, w in enumerate(scaled[ch]):
                key = tuple(sorted((src, dst) for src, dst, _ in routes(ch)[r]))
                assert abs(got.get(key, 0.0) - w / denom) < 1 / grid + 1e-12


def test_runtime_prices_a_too_fine_schedule_on_the_grid_the_runtime_takes():
    # 3 GPUs: at most 4096 // 3 = 1365 pieces a chunk; a 1/4100 grid (chunk 0 alternating
    # between two routes 1/4100 at a time) is coarsened to 1/1365, and the price is that of the
    # coarsened schedule's program
    s = split_schedule([[2050, 2050, 0], [0, 4100, 0], [0, 0, 4100]], 4100, cycle=2050)
    program, grid = program_of(s, three_ring())
    assert grid == 1365
    c = coarsen(s, 1365)
    assert verify(c, three_ring()) is None
    cal = Calibration("c", "s", "", {"link": 0.5}, {"link": 1e-6}, {"link": 0.0}, 1e10, 1e10, 1e-6, 1e-5, 0.0)
    from collsynth.tens.export import to_msccl_xml
    inst = three_ring()
    expected = runtime_times(program_features(to_msccl_xml(c, inst), inst), [3e6], cal)[0]
    assert runtime_times(program_features(program, inst), [3e6], cal)[0] == pytest.approx(expected)


def test_program_of_exports_every_grid_and_keeps_the_cheapest():
    # grids 1365, 682, 341, 170, 85, 42, 21 (halving down to 16), each exported without and with
    # receive-and-send steps; a price that is least for the program of 3 x 170 chunks a loop
    # picks the 1/170 grid, exported from the coarsened schedule (the first of equal prices)
    from collsynth.tens.export import to_msccl_xml
    from collsynth.tens.msccl_read import algo_root
    s = split_schedule([[2050, 2050, 0], [0, 4100, 0], [0, 0, 4100]], 4100, cycle=2050)
    inst = three_ring()
    seen = []

    def seconds(text):
        seen.append(int(algo_root(text).get("nchunksperloop")) // 3)
        return abs(seen[-1] - 170) + 1.0

    program, grid = program_of(s, inst, seconds)
    # then one thread block per tree and edge: refused from 1/42 up (chunk 0's 42 or more
    # pieces, each a tree, all cross 0 -> 1: a channel each), taken from 1/10 down (at most 10
    # pieces a chunk, so at most 20 trees on a rank pair)
    packed = [g for g in (1365, 682, 341, 170, 85, 42, 21) for _ in range(2)]
    assert seen[:len(packed)] == packed
    assert seen[-8:] == [g for g in (10, 5, 2, 1) for _ in range(2)] and set(seen[len(packed):-8]) <= {21}
    assert grid == 170 and program == to_msccl_xml(coarsen(s, 170), inst)
