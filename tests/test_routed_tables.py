"""The results tables set each stored run against the bound of its own routing.

Two GPUs behind a switch (links of 1 B/s, alpha 1/16 s), an allgather of a byte a shard
(``tests/test_ramp_bound.py`` derives both figures by hand): on links the ramp bound is 25/16 s,
met by the 4-piece pipeline; routed on shortest paths (``direct``: each shard crosses the switch
in one step) the bound is latency plus cut, 2/16 + 1 = 9/8 s, which ``direct`` meets. Set against
the links bound, as the tables did, ``direct``'s row read 0.72x its bound: below a bound, and
not the optimum it is among routed schedules.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from collsynth.instances import make_instance
from collsynth.results import figures, render, report, store
from collsynth.solvers import pipeline
from collsynth.solvers.producers import Options
from collsynth.tens.schema import empty_row
from test_ramp_bound import pair_behind_a_switch

LINKS_S, ROUTED_S = 25 / 16, 9 / 8  # both by hand (module doc)


def _row(producer: str, time_s: float, bound_s: float, routing: str) -> dict:
    return {**empty_row(instance="pair", producer=producer, solver="", driver="", seed=0, verified=True,
                        status="optimal", bound_source="sync: by hand", time_sync_s=time_s, lower_bound_s=bound_s),
            "extra": json.dumps({"routing": routing})}


@pytest.fixture
def runs(tmp_path) -> pd.DataFrame:
    """A store of the pair's two runs: the pipeline on links (at its bound, 25/16 s) and
    ``direct`` routed (at its own, 9/8 s), each with the bound its run stored."""
    store.put(tmp_path, _row("pipeline", LINKS_S, LINKS_S, "links"))
    store.put(tmp_path, _row("direct", ROUTED_S, ROUTED_S, "shortest-path"))
    return store.load(tmp_path)


def test_the_pipeline_records_a_routed_schedule_s_routing():
    row, sched = pipeline.run(make_instance(pair_behind_a_switch(), "allgather", message_bytes=2.0), "direct",
                              Options(time_limit=60))
    assert row["verified"] and row["extra"]["routing"] == "shortest-path" == sched.routing
    assert row["lower_bound_s"] == pytest.approx(ROUTED_S)


def test_optimality_sets_each_method_against_its_routing_s_bound(runs):
    (got,) = render.optimality(runs).to_dict("records")
    assert got["lower_bound_s"] == pytest.approx(LINKS_S) and got["lower_bound_routed_s"] == pytest.approx(ROUTED_S)
    assert got["best_method"] == "direct" and got["best_s"] == pytest.approx(ROUTED_S)
    assert got["direct ratio"] == pytest.approx(1.0) and got["pipeline ratio"] == pytest.approx(1.0)
    assert got["best/bound"] == pytest.approx(1.0)  # was 9/8 over 25/16 = 0.72


def test_bounds_table_and_ratio_plot_and_run_pages_alike(runs):
    (sync,) = render.bounds_table(runs).query("model == 'sync'").to_dict("records")
    assert sync["best_method"] == "direct" and sync["lower_bound_s"] == pytest.approx(ROUTED_S)
    assert sync["best/bound"] == pytest.approx(1.0)
    ratios = figures.bound_ratios(runs)
    assert ratios.loc["pair", "direct"] == pytest.approx(1.0) and ratios.loc["pair", "pipeline"] == pytest.approx(1.0)
    page = report.runs_table(runs, render.applicable_bounds(runs))
    over = [c["title"] for c in page["columns"]].index("over bound")
    assert [float(r[over]["sort"]) for r in page["rows"]] == pytest.approx([1.0, 1.0])


def test_a_run_on_links_is_set_against_the_largest_bound(tmp_path):
    """A schedule on links meets a routed run's bound too, never the reverse: a third run on
    links at 1.5 s (below the links bound, as a broken producer might store) reads 0.96x, a run
    with no routing recorded (stored before it was) is taken as on links."""
    store.put(tmp_path, _row("pipeline", LINKS_S, LINKS_S, "links"))
    store.put(tmp_path, _row("direct", ROUTED_S, ROUTED_S, "shortest-path"))
    store.put(tmp_path, {**_row("old", 1.5, ROUTED_S, "links"), "extra": None})
    runs = store.load(tmp_path)
    assert dict(zip(runs["producer"], render.applicable_bounds(runs))) == pytest.approx(
        {"pipeline": LINKS_S, "direct": ROUTED_S, "old": LINKS_S})
    (got,) = render.optimality(runs).to_dict("records")
    assert got["old ratio"] == pytest.approx(1.5 / LINKS_S)
