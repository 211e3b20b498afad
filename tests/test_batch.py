"""The batch runner and the results store: resumable, atomic, isolated, executor-independent."""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from collsynth.results import render, schema, store
from collsynth.solvers import batch
from collsynth.solvers.cli import main
from collsynth.tens.schedule import from_sends
from builders import instance_on

PLUGINS = str(Path(__file__).parent / "plugins")
PRODUCERS = "greedy,ring"

INSTANCES = {
    "ring6-ag": 'generator = "ring"\nnodes = 6\n', 
    "torus3x3-ag": 'generator = "torus"\ndims = [3, 3]\n',
    "mesh2x3-ag": 'generator = "mesh"\ndims = [2, 3]\n',
    "ring5-ag": 'generator = "ring"\nnodes = 5\n',
}
DETERMINISTIC = ["instance", "producer", "solver", "driver", "seed", "status", "verified", "steps",
                 "T_L_s", "T_B_s", "time_sync_s", "lower_bound_s"]


def write_instances(folder: Path, names=None) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    for name, topo in INSTANCES.items():
        if names and name not in names:
            continue
        (folder / f"{name}.toml").write_text(
            f'name = "{name}"\n[topology]\n{topo}[collective]\nkind = "allgather"\nmessage_bytes = 1048576\n'
        )
    return str(folder / "*.toml")


def bench(*args) -> int:
    return main(["bench", "--no-progress", *args])


@pytest.fixture
def plugin_env(monkeypatch):
    monkeypatch.setenv("COLLSYNTH_PRODUCERS", "faulty_producers")
    monkeypatch.setenv("PYTHONPATH", PLUGINS + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("COLLSYNTH_JOB_GRACE_S", "20")
    monkeypatch.syspath_prepend(PLUGINS)
    monkeypatch.setattr(batch, "HARD_MARGIN_S", 20.0)


def test_store_put_load_replace(tmp_path):
    row = {"instance": "a", "producer": "p", "solver": "", "driver": "", "seed": 0, "params": "{}",
           "status": "constructed", "verified": True, "steps": 2, "time_sync_s": 1.5}
    sched = from_sends([(0, 0, 1, 0, 1, 1), (1, 0, 1, 1, 0, 1)], "allgather", 2, 2)
    store.put(tmp_path, row, sched)
    store.put(tmp_path, {**row, "steps": 3}, sched)  # same key: replaced, not duplicated
    store.put(tmp_path, {**row, "seed": 1, "verified": False, "status": "error"})
    df = store.load(tmp_path)
    assert len(df) == 2
    first = df[df["seed"] == 0].iloc[0]
    assert first["steps"] == 3 and first["verified"]
    assert (tmp_path / first["schedule_path"]).exists()
    assert pd.isna(df[df["seed"] == 1].iloc[0]["schedule_path"])
    assert store.done_keys(tmp_path) == {("a", "p", "", "", 0, "{}"), ("a", "p", "", "", 1, "{}")}


# the runs table as the store created it before results/schema.py (the committed quick-store's)
PREVIOUS_SCHEMA = (
    'CREATE TABLE runs (id TEXT PRIMARY KEY, "instance" TEXT, "producer" TEXT, "solver" TEXT, "driver" TEXT, '
    '"seed" INTEGER, "params" TEXT, "status" TEXT, "verified" INTEGER, "steps" INTEGER, "T_L_s" REAL, '
    '"T_B_s" REAL, "time_sync_s" REAL, "time_ten_s" REAL, "time_event_s" REAL, "lower_bound_s" REAL, '
    '"lower_bound_steps" INTEGER, "objective" REAL, "bound" REAL, "gap" REAL, "units" TEXT, "build_s" REAL, '
    '"solve_s" REAL, "wall_s" REAL, "sends" INTEGER, "message" TEXT, "suite" TEXT, "instance_file" TEXT, '
    '"message_bytes" REAL, "schedule_path" TEXT, "extra" TEXT, "provenance" TEXT, "time_limit" REAL, '
    '"threads" INTEGER, "created_at" REAL)'
)


def test_a_store_of_the_previous_schema_is_read_as_is_and_migrated_on_write(tmp_path):
    db = tmp_path / "runs.sqlite"
    con = sqlite3.connect(db)
    con.execute(PREVIOUS_SCHEMA)
    con.execute('INSERT INTO runs (id, instance, producer, solver, driver, seed, params, status, verified, steps) '
                'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)', ["old", "a", "ten-ilp", "highs", "", 0, "{}", "optimal", 1, 4])
    con.commit()
    con.close()
    before = db.read_bytes()
    df = store.load(tmp_path)  # reading never alters the database
    assert db.read_bytes() == before
    assert len(df) == 1 and df.loc[0, "steps"] == 4 and pd.isna(df.loc[0, "found_by"])
    assert store.done_keys(tmp_path) == {("a", "ten-ilp", "highs", "", 0, "{}")}
    # writing a row with the new fields adds the missing columns instead of failing
    store.put(tmp_path, {"instance": "a", "producer": "ten-ilp", "solver": "highs", "driver": "horizon", "seed": 0,
                         "status": "optimal", "verified": False, "found_by": "ilp@h=4", "solver_status": "optimal"})
    cols = {r[1]: r[2] for r in sqlite3.connect(db).execute("PRAGMA table_info(runs)")}
    assert set(schema.COLUMNS) <= set(cols)
    assert cols["found_by"] == "TEXT" and cols["verify_s"] == "REAL" and cols["relaxation"] == "INTEGER"
    df = store.load(tmp_path).set_index("driver")
    assert df.loc["horizon", "found_by"] == "ilp@h=4" and pd.isna(df.loc["", "found_by"])
    assert df.loc["", "steps"] == 4


def test_the_committed_quick_store_takes_new_rows(tmp_path):
    snapshot = Path(__file__).resolve().parent.parent / "results" / "quick-store" / "runs.sqlite"
    (tmp_path / "copy").mkdir()
    shutil.copy(snapshot, tmp_path / "copy" / "runs.sqlite")
    n = store.count(tmp_path / "copy")
    store.put(tmp_path / "copy", {"instance": "new", "producer": "ring", "solver": "", "driver": "", "seed": 0,
                                  "status": "error", "verified": False, "found_by": ""})
    assert store.count(tmp_path / "copy") == n + 1 == 321


def test_pipeline_row_store_and_runs_csv_share_one_schema(tmp_path):
    from collsynth.solvers.pipeline import run

    row, _ = run(instance_on("ring", {"nodes": 4}), "ring")
    assert [k for k in row if k != "extra"] == list(schema.ROW_FIELDS)
    store.put(tmp_path, row)
    cols = [r[1] for r in sqlite3.connect(tmp_path / "runs.sqlite").execute("PRAGMA table_info(runs)")]
    assert cols == ["id", *schema.COLUMNS]
    assert list(render.runs(store.load(tmp_path)).columns) == list(schema.ROW_FIELDS)
    # the result fields of the solve contract (design "Contracts: command line") are all there
    for name in ("instance", "producer", "solver", "driver", "status", "verified", "steps", "T_L_s", "T_B_s",
                 "time_sync_s", "time_ten_s", "time_event_s", "lower_bound_s", "objective", "bound", "gap",
                 "build_s", "solve_s", "wall_s"):
        assert name in schema.ROW_FIELDS


def test_plan_names_the_default_driver_and_routes_each_parameter_to_its_producers(tmp_path):
    files = sorted(Path(p) for p in glob.glob(write_instances(tmp_path / "inst", ["ring6-ag"])))
    jobs = batch.plan(files, ["ten-ilp", "greedy", "swing-bw", "ring"], params={"window": "3", "multiport": "false"})
    by = {j.producer: j for j in jobs}
    assert len(jobs) == 4
    assert by["ten-ilp"].driver == "horizon" and by["ten-ilp"].solver == "highs"
    assert by["greedy"].driver == by["ring"].driver == "" and by["greedy"].solver == ""
    assert json.loads(by["ten-ilp"].params) == {"window": 3}
    assert json.loads(by["swing-bw"].params) == {"multiport": False}
    assert json.loads(by["greedy"].params) == {} and json.loads(by["ring"].params) == {}
    # a driver multiplies only the producers taking it; the others run their default once
    jobs = batch.plan(files, ["ten-ilp", "ten-lp"], drivers=["time-cluster", "early-stop"])
    assert sorted((j.producer, j.driver) for j in jobs) == [
        ("ten-ilp", "early-stop"), ("ten-ilp", "time-cluster"), ("ten-lp", "horizon")]


def test_store_refuses_unverified_schedule(tmp_path):
    sched = from_sends([(0, 0, 1, 0, 1, 1)], "allgather", 2, 2)
    with pytest.raises(ValueError, match="only verified"):
        store.put(tmp_path, {"instance": "a", "producer": "p", "verified": False}, sched)


def test_bench_runs_every_job_once_and_resumes(tmp_path, capsys):
    pattern = write_instances(tmp_path / "inst", ["ring6-ag", "torus3x3-ag"])
    st = tmp_path / "store"
    assert bench("--instances", pattern, "--producers", PRODUCERS, "--store", str(st), "--json") == 0
    first = json.loads(capsys.readouterr().out)
    assert first["planned"] == 4 and first["ran"] == 4
    df = store.load(st)
    assert len(df) == 4
    ring_rows = df[df["producer"] == "ring"]
    assert ring_rows["verified"].all()
    for path in df["schedule_path"].dropna():
        assert (st / path).exists()
    assert bench("--instances", pattern, "--producers", PRODUCERS, "--store", str(st), "--json") == 0
    again = json.loads(capsys.readouterr().out)
    assert again["ran"] == 0 and again["skipped_done"] == 4
    assert bench("--instances", pattern, "--producers", "ring", "--store", str(st), "--rerun", "--json") == 0
    assert json.loads(capsys.readouterr().out)["ran"] == 2
    assert len(store.load(st)) == 4


def test_hanging_and_crashing_jobs_are_recorded_and_the_batch_continues(tmp_path, plugin_env, capsys, monkeypatch):
    monkeypatch.setenv("COLLSYNTH_PRODUCERS", "faulty_producers,slow_producers")
    monkeypatch.setattr(batch, "HARD_MARGIN_S", 2.0)
    pattern = write_instances(tmp_path / "inst", ["ring5-ag"])
    st = tmp_path / "store"
    code = bench("--instances", pattern, "--producers", "test-hang,test-stuck,test-crash,test-chatty-ring,ring",
                 "--time-limit", "1",
                 "--store", str(st), "--jobs", "2", "--json")
    assert code == 0
    df = store.load(st).set_index("producer")
    # the deadline's timer stops a loop that ignores its limit; a call that blocks the timer is killed
    assert df.loc["test-hang", "status"] == "timeout" and "time limit 1 s reached" in df.loc["test-hang", "message"]
    assert df.loc["test-stuck", "status"] == "timeout" and "killed after" in df.loc["test-stuck", "message"]
    assert df.loc["test-crash", "status"] == "error" and "exited with code 139" in df.loc["test-crash", "message"]
    assert df.loc["ring", "verified"]
    # a job printing to stdout (as Pyomo's log handler does) does not garble the worker's result line
    assert df.loc["test-chatty-ring", "verified"] and df.loc["test-chatty-ring", "steps"] == 4


def test_kill_minus_9_loses_and_duplicates_nothing(tmp_path, plugin_env):
    pattern = write_instances(tmp_path / "inst")
    st = tmp_path / "store"
    cmd = [sys.executable, "-m", "collsynth.solvers.cli", "bench", "--no-progress", "--instances", pattern,
           "--producers", "test-slow-ring,ring", "--jobs", "1", "--store", str(st)]
    planned = len(INSTANCES) * 2
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 120
    while store.count(st) < 2 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = store.load(st)
    assert 2 <= len(before) < planned, "the kill must land in the middle of the batch"
    assert subprocess.run(cmd, capture_output=True).returncode == 0
    after = store.load(st)
    assert len(after) == planned
    assert not after.duplicated(["instance", "producer", "solver", "driver", "seed", "params"]).any()
    kept = after.set_index("id").loc[before["id"]]
    assert (kept["created_at"].to_numpy() == before["created_at"].to_numpy()).all(), "finished runs were redone"


def test_dask_cluster_gives_the_same_rows_as_the_local_pool(tmp_path, capsys):
    distributed = pytest.importorskip("distributed")
    pattern = write_instances(tmp_path / "inst", ["ring6-ag", "mesh2x3-ag"])
    assert bench("--instances", pattern, "--producers", PRODUCERS, "--store", str(tmp_path / "local"),
                 "--jobs", "1") == 0
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        assert bench("--instances", pattern, "--producers", PRODUCERS, "--store", str(tmp_path / "dask"),
                     "--executor", "dask", "--address", cluster.scheduler_address) == 0
    capsys.readouterr()
    local = store.load(tmp_path / "local")[DETERMINISTIC]
    remote = store.load(tmp_path / "dask")[DETERMINISTIC]
    pd.testing.assert_frame_equal(local, remote)
    assert len(local) == 4


def test_tables_are_byte_for_byte_reproducible(tmp_path, capsys):
    pattern = write_instances(tmp_path / "inst", ["ring6-ag", "torus3x3-ag"])
    st = tmp_path / "store"
    assert bench("--instances", pattern, "--producers", PRODUCERS, "--store", str(st), "--jobs", "1") == 0
    for out in ("a", "b"):
        assert main(["tables", "--store", str(st), "--out", str(tmp_path / out), "--plots", str(tmp_path / f"p{out}")]) == 0
    det = sorted(p.name for p in (tmp_path / "a").glob("det_*"))
    assert det and all((tmp_path / "a" / n).read_bytes() == (tmp_path / "b" / n).read_bytes() for n in det)
    opt = pd.read_csv(tmp_path / "a" / "det_optimality.csv")
    assert set(opt["instance"]) == {"ring6-ag", "torus3x3-ag"}
    assert (opt["best/bound"] >= 1 - 1e-9).all()
    assert (tmp_path / "pa" / "ratio_to_bound.png").exists()


def test_committed_tables_regenerate_from_the_committed_store(tmp_path, capsys):
    root = Path(__file__).resolve().parent.parent / "results"
    snapshot = root / "quick-store"
    if not (snapshot / "runs.sqlite").exists():
        pytest.fail("results/quick-store (the committed quick-suite store) is missing")
    assert main(["tables", "--store", str(snapshot), "--out", str(tmp_path / "t"), "--plots", str(tmp_path / "p")]) == 0
    committed = sorted((root / "tables").glob("det_*"))
    assert committed
    for path in committed:
        assert (tmp_path / "t" / path.name).read_bytes() == path.read_bytes(), path.name


def test_bad_batch_input_is_one_line_exit_2(tmp_path, capsys):
    pattern = write_instances(tmp_path / "inst", ["ring5-ag"])
    assert bench("--instances", pattern, "--producers", "no-such-producer", "--store", str(tmp_path / "s")) == 2
    assert bench("--instances", str(tmp_path / "none*.toml"), "--producers", "ring") == 2
    assert bench("--suite", "no-such-suite") == 2
    assert main(["tables", "--store", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 4 and all(line.startswith("error: ") for line in err)


def test_who_wins_scales_stored_prices_by_message_size():
    df = pd.DataFrame({
        "instance": ["x", "x"], "producer": ["lat", "bw"], "solver": ["", ""], "driver": ["", ""],
        "verified": [True, True], "T_L_s": [1.0, 10.0], "T_B_s": [10.0, 1.0], "message_bytes": [1024.0, 1024.0],
    })
    table = render.who_wins(df, sizes=(64, 1 << 20))
    assert table.iloc[0]["M=64B"].startswith("lat") and table.iloc[0]["M=1MiB"].startswith("bw")


def test_lp_bound_sits_beside_every_solver_row():
    # instance x: a ten-lp run proved 5, an ILP run recorded lp_bound 6 (the larger counts);
    # instance y: only an ILP run without an LP bound (column stays empty)
    df = pd.DataFrame({
        "instance": ["x", "x", "y"], "producer": ["ten-lp", "ten-ilp", "ten-ilp"],
        "solver": ["highs"] * 3, "driver": ["", "horizon", "horizon"], "seed": [0, 0, 0],
        "status": ["optimal", "optimal", "feasible"], "verified": [True, True, True],
        "objective": [5.0, 7.0, 9.0], "bound": [5.0, 7.0, 8.0], "gap": [0.0, 0.0, 0.1],
        "steps": [5, 7, 9], "lower_bound_steps": [4, 4, 6],
        "extra": ['{"lp_bound": 5}', '{"lp_bound": 6}', '{"horizons": []}'],
    })
    status = render.solver_status(df).set_index(["instance", "producer"])
    assert status.loc[("x", "ten-ilp"), "lp_bound"] == 6.0
    assert status.loc[("x", "ten-lp"), "lp_bound"] == 6.0
    assert pd.isna(status.loc[("y", "ten-ilp"), "lp_bound"])
    steps = render.steps_table(df).set_index("instance")
    assert steps.loc["x", "lp_bound_timesteps"] == 6.0 and pd.isna(steps.loc["y", "lp_bound_timesteps"])
    assert render.lp_bounds(df)["x"] == 6.0
    # a failed ten-lp run records no bound, and so proves nothing
    df.loc[0, ["status", "extra"]] = ["error", '{"lp_bound": null}']
    df.loc[1, "extra"] = "{}"
    assert render.lp_bounds(df).isna().all()


def test_solver_times_compare_like_with_like():
    # two drivers of one producer and solver are two rows; the solver's own time is averaged
    # apart from the wall time: shifted geometric mean of 0 s and 3 s = sqrt(1 * 4) - 1 = 1 s
    df = pd.DataFrame({
        "producer": ["ten-ilp"] * 3 + ["ring"], "driver": ["horizon", "horizon", "time-cluster", ""],
        "solver": ["highs"] * 3 + [""], "status": ["optimal", "feasible", "optimal", "constructed"],
        "solve_s": [0.0, 3.0, 1.0, 0.0], "wall_s": [2.0, 7.0, 1.5, 0.1],
    })
    t = render.solver_times(df).set_index(["producer", "driver", "solver"])
    assert len(t) == 2
    h = t.loc[("ten-ilp", "horizon", "highs")]
    assert h["runs"] == 2 and h["solved"] == 1 and h["feasible"] == 1
    assert h["sgm_solve_s"] == pytest.approx(1.0) and h["sgm_wall_s"] == pytest.approx(((3 * 8) ** 0.5) - 1)
