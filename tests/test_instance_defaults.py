"""Defaults that work: a TEN producer picks its driver, window and timestep from the instance
when the run sets none, and says so in the row (``driver``, ``extra["defaults"]``, ``message``).
The two big cases of the issue (a 1,024-NPU hypercube by ``ten-ilp-orbit``, TACOS's 6x6 mesh of
concurrent collectives by ``ten-ilp-combining``) are ``benchmarks/bench_defaults.py``; here the
same kinds at sizes a test affords.
"""

from __future__ import annotations

from collsynth.instances import CORPUS, load_instance
from collsynth.solvers.pipeline import run
from collsynth.solvers.producers import Options
from collsynth.solvers.ten import formulation_producers as ten_producers
from builders import instance_on


def test_mixed_chunk_sizes_run_on_the_large_chunk_s_timestep_and_are_proven_optimal():
    """mesh3x3-concurrent (a 1 MiB broadcast and reduce beside an allgather of 1 MiB on 5 ranks):
    with no flag, ``ten-ilp-combining`` runs on the timestep of a 1 MiB chunk on a link of
    alpha 0.5 us and 100 GB/s, 0.5e-6 + 2**20 / 1e11 s (by hand), and proves its schedule optimal."""
    instance = load_instance(CORPUS / "mesh3x3-concurrent.toml")
    row, schedule = run(instance, "ten-ilp-combining", Options(time_limit=120))
    picked = row["extra"]["defaults"]
    assert abs(picked["params"]["timestep"] - (0.5e-6 + 2**20 / 1e11)) < 1e-15
    assert "mixed chunk sizes" in picked["why"] and "timestep=" in row["message"]
    assert schedule is not None and row["verified"] and row["status"] == "optimal"
    assert row["steps"] == row["lower_bound_timesteps"]


def test_a_timestep_the_run_sets_is_kept():
    instance = load_instance(CORPUS / "mesh3x3-concurrent.toml")
    _, params, _ = ten_producers.instance_defaults(instance, {"timestep": 1e-6}, None)
    assert "timestep" not in params


def test_a_big_cayley_instance_runs_by_time_clustering_in_one_timestep_windows_and_is_proven_optimal():
    """A 256-NPU hypercube allgather (the kind of the 1,024-NPU case): ``ten-ilp-orbit`` with no
    flag runs time clustering, window 1, no LP bound beside, the row says so, and the schedule
    meets the TEN timesteps bound."""
    instance = instance_on("hypercube", {"dim": 8})
    row, schedule = run(instance, "ten-ilp-orbit", Options(time_limit=120))
    assert row["driver"] == "time-cluster"
    assert row["extra"]["defaults"]["params"] == {"window": 1, "lp_bound": False}
    assert schedule is not None and row["status"] == "optimal" and row["steps"] == row["lower_bound_timesteps"]


def test_a_driver_the_run_asks_for_is_kept_and_small_instances_keep_the_producer_s_default():
    big = instance_on("hypercube", {"dim": 8})
    assert ten_producers.instance_defaults(big, {}, "horizon")[0] is None
    small = instance_on("hypercube", {"dim": 3})
    assert ten_producers.instance_defaults(small, {}, None) == (None, {}, "")
