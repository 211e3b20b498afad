"""A horizon search that stops before it proves its answer says where it stopped, why, and how
long it had left: in the row (``extra["stopped"]``), first in its message, and so in the
default output of ``collsynth solve``.

The solver's side is replaced by a solve that proves nothing and, at a chosen horizon, uses the
time that is left (what HiGHS does on a model too hard for the limit): the driver's account of
the stop is then known in advance, on any machine. ``mesh3x3-allgather`` has the TEN lower
bound 4 and a 7-timestep recovery schedule, so the search means to try horizons 4 to 6.
"""

from __future__ import annotations

import json
import math
import time

import pytest

from collsynth.formulations import ten_ilp
from collsynth.instances import CORPUS, load_instance
from collsynth.limits import GRACE_S
from collsynth.solvers import backends
from collsynth.solvers.cli import main
from collsynth.solvers.producers import Options
from machine import within
from collsynth.solvers.ten import drivers
from collsynth.tens.status import Status

MESH = CORPUS / "mesh3x3-allgather.toml"


def _solves_nothing_and_runs_out_at(horizon: int):
    """An ``attempt`` that proves nothing at any horizon and, at ``horizon``, sleeps until the
    run's clock has run out."""
    def attempt(search, h):
        if h == horizon:
            time.sleep(search.clock.left() or 0.0)
        search.tried.append({"horizon": h, "status": Status.NO_SOLUTION, "complete": False})
        return backends.SolveResult(Status.NO_SOLUTION, message="limit hit before any solution"), False, None
    return attempt


def test_the_search_says_at_which_horizon_of_which_it_stopped_and_the_time_spent_and_left(monkeypatch):
    """The search reaches horizon 5 (what comes before it takes well under a second of CPU) and
    sleeps there until the clock runs out: the limit is slept through, so it is kept short, whole
    seconds (the message's figures are then exact), and longer on a slow machine."""
    limit = max(4, math.ceil(within(4.0)))
    monkeypatch.setattr(drivers._Search, "attempt", _solves_nothing_and_runs_out_at(5))
    out = drivers.horizon_search(load_instance(MESH), ten_ilp, Options(time_limit=limit), warm=False)
    stop = out.extra["stopped"]
    assert out.status == Status.FEASIBLE and out.extra["used"] == "recovery"
    assert (stop["at_horizon"], stop["top_horizon"], stop["reason"], stop["limit_s"]) == (5, 6, "time limit", limit)
    assert stop["elapsed_s"] == limit and stop["left_s"] == 0.0  # it slept until the clock ran out
    assert out.message.startswith(f"stopped at horizon 5 of 6 after {limit}.0 s of {limit} s: time limit "
                                  "(0.0 s left); ")


def test_a_search_that_tried_every_horizon_it_meant_to_says_nothing_of_stopping(monkeypatch):
    """The check above can fail: the same search given the time to try horizons 4, 5 and 6
    (each proving nothing) did not stop early, and says so by saying nothing of it."""
    monkeypatch.setattr(drivers._Search, "attempt", _solves_nothing_and_runs_out_at(99))
    out = drivers.horizon_search(load_instance(MESH), ten_ilp, Options(time_limit=30), warm=False)
    assert out.status == Status.FEASIBLE and [t["horizon"] for t in out.extra["horizons"]] == [4, 5, 6]
    assert "stopped" not in out.extra and "stopped at" not in out.message


def test_a_proven_answer_says_nothing_of_stopping_even_when_the_time_ran_out():
    """``ring8-allgather``: the recovery schedule meets the lower bound, so the answer is proven
    whatever the clock says."""
    out = drivers.horizon_search(load_instance(CORPUS / "ring8-allgather.toml"), ten_ilp, Options(time_limit=1e-3),
                                 warm=False)
    assert out.status == Status.OPTIMAL and "stopped" not in out.extra


@pytest.mark.parametrize("as_json", [False, True])
def test_solve_prints_where_the_search_stopped_by_default_and_keeps_it_in_the_row(monkeypatch, capsys, as_json):
    monkeypatch.setattr(drivers._Search, "attempt", _solves_nothing_and_runs_out_at(4))
    argv = ["solve", str(MESH), "--producer", "ten-ilp", "--time-limit", "3", "--param", "warm=false",
            "--param", "lp_bound=false"]
    code = main(argv + (["--json"] if as_json else []))
    out = capsys.readouterr().out
    assert code == 0
    if not as_json:
        (line,) = [x for x in out.splitlines() if x.startswith("ten-ilp: ")]
        assert line.startswith("ten-ilp: feasible: stopped at horizon 4 of 6 after ") and " s of 3 s: time limit (" in line
        return
    (row,) = json.loads(out)["rows"]
    stop = row["extra"]["stopped"]
    assert (stop["at_horizon"], stop["top_horizon"], stop["reason"], stop["limit_s"]) == (4, 6, "time limit", 3.0)
    assert stop["elapsed_s"] <= within(3.0 + GRACE_S) and stop["left_s"] >= 0.0
    assert row["verified"] and row["message"].startswith("stopped at horizon 4 of 6")
