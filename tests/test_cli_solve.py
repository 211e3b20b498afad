"""``collsynth producers`` and ``collsynth solve`` through the real entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collsynth.solvers import pipeline
from collsynth.solvers.cli import main
from collsynth.tens import verify
from collsynth.tens.schedule import read_json
from collsynth.instances.instance import load_instance

TOML = """
name = "{name}"
[topology]
generator = "{gen}"
{params}
bandwidth = 100e9
alpha = 0.5e-6
{failed}
[collective]
kind = "{kind}"
message_bytes = 1048576
"""


def write(tmp_path, name="ring6", gen="ring", params="nodes = 6", kind="allgather", failed=""):
    p = tmp_path / f"{name}.toml"
    p.write_text(TOML.format(name=name, gen=gen, params=params, kind=kind, failed=failed))
    return p


def run(capsys, *argv):
    code = main(list(argv) + ["--json"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


def solve_one(capsys, *argv):
    """``collsynth solve`` of one producer: the exit code, its one row (the JSON's shape is that
    of several producers: instance, producers, rows) and stderr."""
    code, data, err = run(capsys, *argv)
    if data is None:
        return code, None, err
    assert {"instance", "producers", "rows"} <= set(data) and len(data["rows"]) == 1
    assert data["producers"] == [data["rows"][0]["producer"]] and data["instance"] == data["rows"][0]["instance"]
    return code, data["rows"][0], err


def test_producers_lists_ten_family_and_backends(capsys):
    code, data, _ = run(capsys, "producers")
    assert code == 0
    names = {p["name"]: p for p in data["producers"]}
    for n in ("ten-ilp", "ten-ilp-nocongestion"):
        assert names[n]["uses_solver"] and names[n]["drivers"] == ["horizon", "early-stop", "time-cluster"]
    assert names["ten-lp"]["drivers"] == ["horizon"]  # the LP bound is a horizon search by nature
    bk = {b["name"]: b for b in data["backends"]}
    assert bk["highs"]["available"] is True
    assert {"gurobi", "cpsat", "scip", "glop", "pdlp"} <= set(bk)


CONTRACT = ("instance", "producer", "solver", "driver", "status", "verified", "steps", "T_L_s", "T_B_s",
            "time_sync_s", "time_ten_s", "time_event_s", "lower_bound_s", "objective", "bound", "gap",
            "build_s", "solve_s", "wall_s")


@pytest.mark.parametrize("driver", ["horizon", "early-stop", "time-cluster"])
def test_solve_writes_verified_schedule(tmp_path, capsys, driver):
    inst = write(tmp_path, "mesh3", "mesh", "dims = [3, 3]")
    out = tmp_path / "s.json"
    code, row, _ = solve_one(capsys, "solve", str(inst), "--producer", "ten-ilp", "--driver", driver,
                       "--time-limit", "30", "--out", str(out))
    assert code == 0
    for k in CONTRACT:
        assert k in row
    assert row["verified"] and row["steps"] == 4 and row["driver"] == driver
    sched = read_json(out)
    assert verify.verify(sched, load_instance(inst)) is None and sched.num_steps == 4


def test_solve_params_and_other_solver(tmp_path, capsys):
    inst = write(tmp_path, kind="reduce_scatter")
    code, row, _ = solve_one(capsys, "solve", str(inst), "--producer", "ten-ilp", "--param", "objective=makespan",
                       "--param", "binary=true", "--solver", "highs")
    assert code == 0 and row["status"] == "optimal" and row["steps"] == 3


def test_solve_lp_reports_bound(tmp_path, capsys):
    inst = write(tmp_path, "mesh23", "mesh", "dims = [2, 3]")
    code, row, _ = solve_one(capsys, "solve", str(inst), "--producer", "ten-lp")
    assert code == 0 and row["bound"] is not None and row["bound"] <= 3
    inst = write(tmp_path, "ring6ar", kind="allreduce")
    code, row, _ = solve_one(capsys, "solve", str(inst), "--producer", "ten-lp")
    # allreduce: a verified fractional RS + AG schedule; the bound is the instance's volume bound
    # (6 chunks x 2 * 5 sends, one-way gossip, on 12 links: 5), above the larger phase LP bound 3
    assert code == 0 and row["status"] == "feasible" and row["bound"] == 5 and row["verified"] and row["steps"] >= 6
    assert row["bound_source"] == "timesteps: volume all links"


def test_gurobi_over_licence_is_a_skipped_row_and_exit_1(tmp_path, capsys):
    from collsynth.solvers.backends import available

    ok, why = available("gurobi")
    if not ok or "size-limited" not in why:
        pytest.skip("needs the size-limited gurobi licence")
    inst = write(tmp_path, "mesh44", "mesh", "dims = [4, 4]")
    # with warm starts on, time clustering solves the 4x4 mesh in windows small enough for the
    # licence; without them the full-horizon model is built and must be refused cleanly
    code, row, _ = solve_one(capsys, "solve", str(inst), "--producer", "ten-ilp", "--solver", "gurobi",
                       "--param", "warm=false", "--param", "lp_bound=false")
    assert row["status"] == "skipped" and "licence size limit" in row["message"]
    assert row["solver_status"] == "skipped" and not row["verified"]
    assert code == 1  # no schedule came out


def test_bad_input_exit_2(tmp_path, capsys):
    inst = write(tmp_path)
    code, _, err = run(capsys, "solve", str(inst), "--producer", "ten-ilp", "--driver", "nope")
    assert code == 2 and err.startswith("error: --driver")
    code, _, err = run(capsys, "solve", str(inst), "--producer", "no-such")
    assert code == 2 and "unknown producer" in err
    code, _, err = run(capsys, "solve", str(inst), "--producer", "ten-ilp", "--param", "oops")
    assert code == 2 and "--param" in err


def test_missing_solver_gives_skipped_row(tmp_path, capsys):
    inst = write(tmp_path)
    code, row, _ = solve_one(capsys, "solve", str(inst), "--producer", "ten-ilp", "--solver", "cbc")
    from collsynth.solvers.backends import available

    if available("cbc")[0]:
        pytest.skip("cbc is installed here")
    assert row["status"] == "skipped" and row["message"] == "skipped: cbc not installed"


def test_unsupported_producer_is_a_one_line_error_exit_2(capsys):
    from collsynth.instances import CORPUS
    from collsynth.solvers.cli import main

    code = main(["solve", str(CORPUS / "ring5-gather.toml"), "--producer", "swing-bw", "--json"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0].startswith("error: ") and "ring5-gather.toml" in err[0] and "does not support" in err[0]


# ---- provenance: which method produced the row ------------------------------------------------

def fields(row, *names):
    return tuple(row[n] for n in names)


def test_without_driver_the_row_names_the_default_driver_and_what_found_the_schedule(tmp_path, capsys):
    # K4 allgather: every chunk is one hop from every node, so shortest-path recovery meets the
    # lower bound of 1 step and no solver runs at all
    inst = write(tmp_path, "k4", "complete", "nodes = 4")
    code, row, _ = solve_one(capsys, "solve", str(inst), "--producer", "ten-ilp", "--param", "warm=false",
                       "--param", "lp_bound=false")
    assert code == 0
    assert fields(row, "driver", "found_by", "solver_status", "status", "steps") == ("horizon", "recovery", "", "optimal", 1)
    # 3x3 mesh allgather: a corner takes 8 chunks over 2 links (4 steps) and recovery needs more,
    # so the ILP at horizon 4 finds it
    inst = write(tmp_path, "mesh3", "mesh", "dims = [3, 3]")
    code, row, _ = solve_one(capsys, "solve", str(inst), "--producer", "ten-ilp", "--param", "warm=false",
                       "--param", "lp_bound=false")
    assert code == 0
    assert fields(row, "driver", "found_by", "solver_status", "status", "steps") == ("horizon", "ilp@h=4", "optimal", "optimal", 4)
    assert row["solve_s"] > 0 and row["build_s"] > 0 and row["wall_s"] >= row["solve_s"] + row["build_s"]


@pytest.mark.parametrize("producer,driver,found", [
    ("ten-ilp", "time-cluster", r"time-cluster(\+recovery)?|recovery"),
    ("ten-ilp", "early-stop", r"(ilp|warm-start)@h=4(\+recovery)?|time-cluster(\+recovery)?|recovery"),
    ("ten-lp", None, r"lp-rounding@h=4(\+repair|\+recovery)?"),
    ("bfb-lp", None, r"bfb-lp"),
    ("greedy", None, r"greedy"),
    ("ring", None, r"closed-form"),
])
def test_every_row_says_how_its_schedule_was_found(tmp_path, capsys, producer, driver, found):
    import re

    inst = write(tmp_path, "mesh3", "mesh", "dims = [3, 3]")
    argv = ["solve", str(inst), "--producer", producer, "--time-limit", "30"] + (["--driver", driver] if driver else [])
    code, row, _ = solve_one(capsys, *argv)
    assert code == 0 and row["verified"]
    assert re.fullmatch(found, row["found_by"]), row["found_by"]
    uses_solver = producer in ("ten-ilp", "ten-lp", "bfb-lp")
    assert row["driver"] == (driver or ("horizon" if producer.startswith("ten") else ""))
    assert (row["solver"] == "highs") == uses_solver and (row["solver_status"] == "optimal") == uses_solver


def test_producers_json_lists_typed_parameters(capsys):
    from collsynth.solvers.ten import drivers

    code, data, _ = run(capsys, "producers")
    assert code == 0
    names = {p["name"]: p for p in data["producers"]}
    for p in data["producers"]:
        for q in p["params"]:
            assert set(q) == {"name", "type", "default", "help"} and q["help"]
    params = {q["name"]: q for q in names["ten-ilp"]["params"]}
    assert drivers.DRIVER_PARAMS <= set(params)  # every parameter the drivers read is declared
    assert params["window"]["type"] == "int" and params["objective"]["type"] == "arrivals | makespan"
    assert {q["name"]: q["type"] for q in names["swing-bw"]["params"]}["multiport"] == "bool"
    assert names["ring"]["params"] == [] and names["ten-ilp"]["default_driver"] == "horizon"
    assert names["greedy"]["default_driver"] == ""


STAGES = ("verify_s", "price_sync_s", "price_ten_s", "price_event_s")


def test_rows_time_every_stage(tmp_path, capsys):
    """Verification and each cost model are timed on their own, beside the producer's wall_s."""
    code, row, _ = solve_one(capsys, "solve", str(write(tmp_path)), "--producer", "ring")
    assert code == 0 and row["verified"]
    for k in STAGES + ("wall_s",):
        assert isinstance(row[k], float) and 0 <= row[k] < 60, k


def test_a_schedule_that_fails_verification_is_timed_but_never_priced(tmp_path, monkeypatch):
    monkeypatch.setenv("COLLSYNTH_PRODUCERS", "faulty_producers")
    monkeypatch.syspath_prepend(str(Path(__file__).parent / "plugins"))
    row, sched = pipeline.run(load_instance(write(tmp_path)), "test-broken-ring")
    assert sched is None and row["status"] == "invalid" and "verification failed" in row["message"]
    assert isinstance(row["verify_s"], float) and row["verify_s"] >= 0
    assert all(row[k] is None for k in STAGES[1:]) and row["time_sync_s"] is None
