"""Store plots: every instance accounted for, nothing drawn that says nothing."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.image import imread

from collsynth.results import figures, store
from builders import QUICK_STORE, stored



def _method(producer, solver, driver) -> str:
    return "/".join(p for p in (producer, solver or "", driver or "") if p)


def test_ratio_grid_has_every_instance_and_a_dash_exactly_where_no_schedule_verified():
    ratios = figures.bound_ratios(store.load(QUICK_STORE))
    instances = {n for (n,) in stored("SELECT DISTINCT instance FROM runs")}
    assert set(ratios.index) == instances
    verified = {(i, _method(p, s, d)) for i, p, s, d in stored(
        "SELECT instance, producer, solver, driver FROM runs WHERE verified = 1")}
    for inst in ratios.index:
        for m in ratios.columns:
            assert np.isnan(ratios.loc[inst, m]) == ((inst, m) not in verified), (inst, m)
    # a method that meets the bound shows ratio 1 (a cell, not an invisible bar)
    best = stored("SELECT MIN(time_sync_s / lower_bound_s) FROM runs WHERE verified = 1 "
                   "AND instance = 'torus4x4-allgather' AND producer = 'bfb-lp'")[0][0]
    assert ratios.loc["torus4x4-allgather", "bfb-lp/highs"] == best == 1.0


def test_size_sweep_covers_every_instance_with_a_priced_schedule():
    runs = store.load(QUICK_STORE)
    priced = {n for (n,) in stored("SELECT DISTINCT instance FROM runs WHERE verified = 1 AND T_B_s IS NOT NULL")}
    assert set(figures.sweep_rows(runs)["instance"]) == priced == set(runs["instance"])


def test_performance_profile_needs_two_methods(tmp_path):
    runs = store.load(QUICK_STORE)
    one = runs[runs["producer"] == "greedy"]
    assert figures.performance_profile(one, tmp_path, formats=("png",)) == []  # a flat line says nothing
    two = runs[runs["producer"].isin(["greedy", "ring"])]
    (png,) = figures.performance_profile(two, tmp_path, formats=("png",))
    assert imread(png).std() > 0.01


def test_profile_ratios_by_hand():
    runs = pd.DataFrame({
        "instance": ["a", "a", "a", "b", "b"], "producer": ["x", "y", "y", "x", "y"], "solver": "",
        "driver": "", "verified": [True, True, True, True, False], "t": [4.0, 3.0, 2.0, 5.0, 1.0],
    })
    r = figures.profile_ratios(runs, "t")
    # a: x 4 vs y's best seed 2 -> 2 and 1; b: y did not verify -> x is best, y never
    assert r.loc["a", "x"] == 2.0 and r.loc["a", "y"] == 1.0
    assert r.loc["b", "x"] == 1.0 and np.isinf(r.loc["b", "y"])
