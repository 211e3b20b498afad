"""The store's figures as a reader sees them, checked on their matplotlib objects: the performance
profiles time the producer's own solve (never wall or compile time) and show wall clock only
where runs are long enough to measure; the size sweep is one log-log panel per system with
labelled axes and a legend of the methods."""

from __future__ import annotations

import tomllib
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from collsynth.instances import CORPUS
from collsynth.results import figures, store

QUICK_STORE = Path(__file__).resolve().parent.parent / "results" / "quick-store"


@pytest.fixture(scope="module")
def quick() -> pd.DataFrame:
    return store.load(QUICK_STORE)


def _runs(rows: list[tuple]) -> pd.DataFrame:
    """Runs ``(instance, producer, time_sync_s, solve_s, wall_s)``, all verified."""
    df = pd.DataFrame(rows, columns=["instance", "producer", "time_sync_s", "solve_s", "wall_s"])
    return df.assign(solver="", driver="", verified=True, suite="t")


# ---- performance profiles ----------------------------------------------------------------------

def test_the_time_profile_ranks_by_solve_time_even_where_wall_clock_ranks_the_other_way():
    """``fast-solver`` solves in 0.1 s inside a 10 s run (start-up, model build); ``slow-solver``
    solves in 2 s of a 2.1 s run. By solver time the first is best everywhere, by wall clock the
    second; the profile follows the solver. ``ring`` reports no solve time: left out, and said."""
    rows = []
    for i in range(3):
        rows += [(f"i{i}", "fast-solver", 1.0, 0.1, 10.0), (f"i{i}", "slow-solver", 1.0, 2.0, 2.1),
                 (f"i{i}", "ring", 2.0, 0.0, 0.001)]
    panels, notes = figures.profile_panels(_runs(rows))
    titles = [t for t, _ in panels]
    assert titles[:2] == [figures.PROFILE_METRICS["time_sync_s"], figures.PROFILE_METRICS["solve_s"]]
    solver = panels[1][1]
    assert list(solver.columns) == ["fast-solver", "slow-solver"]
    assert (solver["fast-solver"] == 1.0).all() and np.allclose(solver["slow-solver"], 20.0)
    assert any("ring" in n and "no solve time" in n for n in notes)


def test_wall_clock_is_profiled_only_over_long_runs_and_only_when_there_are_enough():
    def runs(long: int) -> pd.DataFrame:
        rows = []
        for i in range(8):
            wall = 3.0 if i < long else 0.002
            rows += [(f"i{i}", "a", 1.0, 0.5, wall), (f"i{i}", "b", 1.0, 0.4, wall / 2)]
        return _runs(rows)

    few_panels, few_notes = figures.profile_panels(runs(figures.MIN_WALL_INSTANCES - 1))
    assert len(few_panels) == 2 and any(n.startswith("No wall-clock profile") for n in few_notes)
    panels, _ = figures.profile_panels(runs(figures.MIN_WALL_INSTANCES))
    assert len(panels) == 3 and panels[2][0].startswith("wall clock")
    wall = panels[2][1]
    assert sorted(wall.index) == [f"i{i}" for i in range(figures.MIN_WALL_INSTANCES)]  # the long ones only
    assert (wall["b"] == 1.0).all() and (wall["a"] == 2.0).all()


def test_the_profile_figure_has_one_labelled_log_axis_per_panel(quick):
    panels, _ = figures.profile_panels(quick)
    fig = figures.profile_figure(quick)
    try:
        assert [ax.get_title() for ax in fig.axes] == [t for t, _ in panels]
        for ax in fig.axes:
            assert ax.get_xscale() == "log" and ax.get_xlabel().startswith("τ") and "instances" in ax.get_ylabel()
            assert ax.get_legend() is not None
        assert "wall clock" not in fig.axes[1].get_title() and "solve time" in fig.axes[1].get_title()
    finally:
        plt.close(fig)


# ---- size sweep --------------------------------------------------------------------------------

def _system_from_the_file(instance: str) -> str:
    """The instance's topology family, read here from its corpus TOML (not by the code under test)."""
    topology = tomllib.loads((CORPUS / f"{instance}.toml").read_text())["topology"]
    return topology.get("generator") or f"file {Path(topology['file']).name}"


def test_the_size_sweep_is_one_log_log_panel_per_system_with_labelled_axes_and_a_legend(quick):
    systems: dict[str, set] = {}
    for name in quick["instance"].unique():
        systems.setdefault(_system_from_the_file(name), set()).add(name)
    fig = figures.sweep_figure(quick)
    try:
        panels = [ax for ax in fig.axes if ax.get_visible()]
        assert len(panels) == len(systems) < quick["instance"].nunique()
        assert [ax.get_title() for ax in panels] == [
            f"{s} ({len(systems[s])} instance{'s' if len(systems[s]) != 1 else ''})" for s in sorted(systems)]
        for ax in panels:
            assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
            assert "bytes" in ax.get_xlabel() and "fastest" in ax.get_ylabel()
        (legend,) = fig.legends
        shown = {t.get_text() for t in legend.get_texts()}
        assert shown == set(figures.sweep_rows(quick)["method"])
    finally:
        plt.close(fig)


def test_a_system_s_line_is_the_geometric_mean_of_the_method_s_ratios_on_the_instances_it_covers():
    """Instance a: x 1 s, y 4 s, z 2 s; instance b: x 2 s, y 1 s (z has no schedule). x: sqrt(1 * 2);
    y: sqrt(4 * 1); z: 2 on a alone."""
    rows = pd.DataFrame({"instance": ["a", "a", "a", "b", "b"], "method": ["x", "y", "z", "x", "y"],
                         "T_L_s": [1.0, 4.0, 2.0, 2.0, 1.0], "T_B_s": 0.0, "message_bytes": 1024.0})
    lines, counts = figures.system_lines(rows)
    assert counts == {"x": 2, "y": 2, "z": 1}
    assert np.allclose(lines["x"], np.sqrt(2)) and np.allclose(lines["y"], 2.0) and np.allclose(lines["z"], 2.0)


def test_one_instance_keeps_absolute_times_in_seconds(quick):
    fig = figures.sweep_figure(quick[quick["instance"] == "ring8-allgather"])
    try:
        (ax,) = fig.axes
        assert ax.get_xscale() == ax.get_yscale() == "log"
        assert "(s, log)" in ax.get_ylabel() and "bytes" in ax.get_xlabel() and ax.get_legend() is not None
    finally:
        plt.close(fig)
