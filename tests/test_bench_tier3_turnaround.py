"""The three-tier turnaround benchmark's programs (benchmarks/bench_tier3_turnaround.py) on cases
derived by hand, and its crossed tree halves verified and above the box-stage bound on a small
two-group rail Clos."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_tier3_turnaround as turn  # noqa: E402


def test_two_stage_chain_by_hand():
    """Two classes, the second loaded one step after the first, each a whole message's T = 1 s
    (alpha 0.01 s a step): one piece takes 2 steps of 1 s; two pieces of a half take 0.5, then
    max(0.5, 0.5), then 0.5 (1.5 s, 3 steps, no split of the message doing better: the middle
    step carries both pieces' loads on two classes); so two pieces are least (1.53 s)."""
    family = (np.array([0, 1]), np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([0.01, 0.01]))
    assert turn.least_pieces(family, counts=(1,)) == (pytest.approx(2020.0), 1)
    assert turn.least_pieces(family, counts=(1, 2)) == (pytest.approx(1530.0), 2)


def test_one_piece_of_the_stage_model_by_hand():
    """Turnaround 2, two box hops, T = 1 s, box ratio 0.5, alphas 0.1 s (NIC) and 0.01 s (box):
    one piece loads 10 steps one after another: four crossings of half a NIC's load (2 s), four
    box hops of half of it at half the speed (1 s), two light steps; alphas 6 x 0.1 + 4 x 0.01."""
    family = turn.stage_family(2, 2, 1.0, 0.5, 0.1, 0.01)
    assert sorted(family[0].tolist()) == list(range(10))
    assert turn.least_pieces(family, counts=(1,)) == (pytest.approx(3640.0), 1)


def test_early_charge_by_hand():
    """The bound's program at two NIC steps: every delivery leaves in the first and arrives in
    the second, so every import leaves in d*'s step (early). Two boxes of two GPUs (the
    box-stage module's example, ``LP(2) = 5``): the two boxes exchange, two deliveries, nothing
    is charged. Three one-GPU parts (NICs summing to 1 a unit of ``M / E``): the program counts
    2 exports and 2 imports (4 out, then 4 in: 8); charged, three parts completed early take 5
    deliveries (10); three parts sending at once take 6 (12), so 10 stays below."""
    from collsynth.tens.bounds.box_stages import stage_program

    assert stage_program(2, 2, 4, 2, 1.0, 2.0, 2.0) == pytest.approx(5.0, rel=1e-6)
    assert turn._early_program(2, 2, 4, 2, 1.0, 2.0, 2.0) == pytest.approx(5.0, rel=1e-6)
    assert stage_program(2, 3, 3, 1, 1.0, 0.0, 0.0) == pytest.approx(8.0, rel=1e-6)
    assert turn._early_program(2, 3, 3, 1, 1.0, 0.0, 0.0) == pytest.approx(10.0, rel=1e-6)


def test_crossed_halves_verify_and_stay_above_the_box_stage_bound(monkeypatch):
    """On two groups of two boxes of two GPUs (1 MiB, ``fabric_copy = false``): the run's trees
    and both crossings of their halves with the root-export trees verify (:func:`crossed`
    prices only what verified) and none is priced below the instance's box-stage bound."""
    import bench_tier3_gap
    from bench_clusters_combining import _crossing_bounds

    from collsynth.tens import pipelined_allreduce as pa

    monkeypatch.setattr(bench_tier3_gap, "M", 1 << 20)
    params = {"groups_per_pod": 2, "boxes_per_group": 2, "gpus_per_box": 2, "rails": 2, "spines": 1, "radix": 16}
    out = {}
    inst, a, why = bench_tier3_gap.run_trees(out, "rail_clos", params)
    assert why is None
    _crossing_bounds(out, inst)
    bound = out["stage_bound_ms"]
    assert bound <= 1e3 * pa.price_sync(a, inst).total_s * (1 + 1e-9)
    got = turn.crossed(inst, a)["crossed"]
    assert set(got) == {"A then B", "B then A"}
    for ms, pieces, verified in got.values():
        assert verified and pieces >= 1 and ms >= bound * (1 - 1e-9)


def test_docstring_examples():
    """The module's docstring examples (benchmarks are not a package: the doctest suite skips them)."""
    import doctest

    result = doctest.testmod(turn)
    assert result.attempted >= 1 and result.failed == 0
