"""The proof rule of a row's status: ``optimal`` only when the schedule's time under a named
cost model meets the instance's lower bound in that model; ``best-in-model`` when it is proven
best only within a restricted model, which ``bound_source`` names. Checked on the rows that
said ``optimal`` wrongly before the rule, on rows stored before it, and on what users read
(the legend of ``solve``, the tables)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from collsynth import InputError
from collsynth.instances import CORPUS, load_instance
from collsynth.limits import Deadline
from collsynth.results import render
from collsynth.solvers.cli import main
from collsynth.solvers.pipeline import run
from collsynth.solvers.producers import Options
from collsynth.tens.status import Status, bound_model, legend
from proofs import meets_a_cost_model_bound
from builders import instance_on

MODELS = (("time_sync_s", "lower_bound_s"), ("time_ten_s", "lower_bound_ten_s"), ("time_event_s", "lower_bound_event_s"))


def test_greedy_around_one_switch_is_best_in_ten_timesteps_not_optimal():
    """Eight GPUs around one switch (an 8-GPU NVSwitch box), allgather: greedy takes the 8 TEN
    timesteps the timesteps bound allows, which is the best in TEN timesteps at this chunking,
    but under no cost model does its time meet the instance's bound (tree packing is faster),
    so the row is not ``optimal``."""
    inst = instance_on("switch", {"nodes": 8})
    row, _ = run(inst, "greedy", Options(time_limit=60))
    assert row["verified"] and row["steps"] == row["lower_bound_timesteps"] == 8
    assert all(row[t] > row[b] for t, b in MODELS), {t: (row[t], row[b]) for t, b in MODELS}
    assert row["status"] == "best-in-model" and bound_model(row["bound_source"]) == "timesteps"


def test_bfb_lp_on_the_failed_mesh_allreduce_is_best_in_its_own_lp_not_optimal():
    """bfb-lp's allreduce on the 4x4 mesh with a failed node is the optimum of its own LP, at
    about twice the instance's time bound: ``best-in-model``, the model being bfb-lp's own."""
    inst = load_instance(CORPUS / "mesh4x4-failed-allreduce.toml")
    row, _ = run(inst, "bfb-lp", Options(time_limit=60))
    assert row["verified"] and not meets_a_cost_model_bound(row)
    assert row["time_event_s"] > 1.5 * row["lower_bound_event_s"]
    assert row["status"] == "best-in-model" and "bfb-lp's own bound" in row["bound_source"]


def test_a_row_meeting_a_cost_model_bound_is_optimal_and_names_that_model():
    inst = load_instance(CORPUS / "hypercube3-allgather.toml")
    row, _ = run(inst, "bfb-lp", Options(time_limit=60))
    assert row["verified"] and meets_a_cost_model_bound(row)
    assert row["status"] == "optimal" and bound_model(row["bound_source"]) in ("sync", "ten", "event")


def test_stored_rows_are_read_by_the_rule():
    """A row stored ``optimal`` by TEN timesteps before the rule is ``best-in-model`` unless its
    stored time meets a cost model's stored bound; other statuses are as stored."""
    df = pd.DataFrame({
        "status": ["optimal", "optimal", "optimal", "feasible"],
        "bound_source": ["timesteps: cut S={0-7}", "timesteps: cut S={0-7}", "sync: distance", None],
        "time_sync_s": [2.0, 2.0, 1.0, 3.0], "lower_bound_s": [1.0, 2.0, 1.0, 1.0],
        "time_ten_s": [2.0, 2.0, 1.0, 3.0], "lower_bound_ten_s": [1.0, 1.0, 1.0, 1.0],
        "time_event_s": [2.0, 2.0, 1.0, 3.0], "lower_bound_event_s": [1.0, 1.0, 1.0, 1.0],
    })
    assert list(render.statuses(df)) == ["best-in-model", "optimal", "optimal", "feasible"]
    assert Status.of_row("optimal", "M/B: bfb-lp's own bound") is Status.BEST_IN_MODEL
    assert Status.of_row("optimal", "event: cut") is Status.OPTIMAL


def test_every_status_is_documented_once_and_stored_as_its_string():
    assert [line.split(": ", 1)[0] for line in legend()] == [s.value for s in Status]
    assert all(s.doc and s.doc != t.doc for s in Status for t in Status if s is not t)
    assert json.dumps({"status": Status.BEST_IN_MODEL}) == '{"status": "best-in-model"}'
    with pytest.raises(ValueError):
        Status("proven")


def test_solve_says_what_its_status_means(tmp_path, capsys):
    assert main(["solve", str(CORPUS / "ring8-allgather.toml"), "--producer", "ring", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["status_meaning"] == Status(row["status"]).doc
    assert main(["solve", str(CORPUS / "ring8-allgather.toml"), "--producer", "ring,greedy"]) == 0
    text = capsys.readouterr().out
    shown = {line.split(": ")[1] for line in text.splitlines() if line.startswith("statuses: ")}
    assert shown and all(Status(s) for s in shown)


def test_options_are_checked_where_they_are_made():
    for bad in ({"time_limit": 0}, {"gap": 1.5}, {"threads": 0}, {"seed": -1}, {"starts": 0}):
        with pytest.raises(InputError) as e:
            Options(**bad)
        assert e.value.where == next(iter(bad))
    assert Options(time_limit=None).timer().at is None


def test_a_share_or_a_child_of_a_deadline_never_ends_after_it():
    d = Deadline.after(10)
    assert d.share(0.5).at <= d.at and d.share(2.0).at <= d.at and d.share(0).left() == 0
    assert d.child(60).at == d.at and d.child(1).at < d.at
    free = Deadline.after(None)
    assert free.share(0.5).at is None and free.child(5).left() <= 5


def test_a_checkpoint_between_blocks_stops_a_build_once_its_deadline_passed():
    """The cooperative check does not wait for the timer (which a shielded block, like a long C
    call, holds back); outside an enforced deadline it never raises."""
    import time

    from collsynth.limits import TimeLimitReached, checkpoint, enforce, shielded

    with pytest.raises(TimeLimitReached) as e:
        with enforce(Deadline.after(0.05), "produce"), shielded():
            time.sleep(0.1)
            checkpoint("model build", "before the capacity rows")
    assert e.value.stage == "model build" and e.value.done == "before the capacity rows"
    checkpoint("model build")  # nothing enforced: nothing raised
