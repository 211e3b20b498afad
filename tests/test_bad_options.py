"""Bad command-line options through the real CLI: exit code 2 and exactly one stderr line
``error: <option>: <what>``, before any long work starts (nothing solved, stored or written)."""

import json
import time
from pathlib import Path

import pytest

from cli_errors import assert_one_error_line, run_cli

RING4 = 'name = "ring4"\n[topology]\ngenerator = "ring"\nnodes = 4\n[collective]\nkind = "allgather"\n'


def strict_json(text):
    """``text`` as JSON, refusing NaN and Infinity."""
    def refuse(word):
        raise ValueError(f"not strict JSON: {word}")
    return json.loads(text, parse_constant=refuse)


@pytest.fixture
def files(tmp_path, capsys):
    """A ring instance, its greedy schedule, a plain file, a folder and a fresh store path."""
    inst = tmp_path / "ring4.toml"
    inst.write_text(RING4)
    sched = tmp_path / "s.json"
    code, _, err = run_cli(["solve", inst, "--producer", "greedy", "--out", sched, "--json"], capsys)
    assert code == 0, err
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    return {"inst": str(inst), "sched": str(sched), "tmp": str(tmp_path), "afile": str(tmp_path / "afile"),
            "adir": str(tmp_path / "adir"), "store": str(tmp_path / "store")}


SOLVE = ["solve", "{inst}", "--producer", "greedy"]
BENCH = ["bench", "--no-progress", "--instances", "{inst}", "--producers", "greedy", "--store", "{store}"]

# (id, argv with {name} for the fixture's paths, substrings of the error line)
BAD_OPTIONS = [
    ("solve-out-missing-folder", SOLVE + ["--out", "{tmp}/nodir/x.json"], ["--out", "no such folder"]),
    ("solve-out-folder", SOLVE + ["--out", "{adir}"], ["--out", "is a folder"]),
    ("solve-out-under-file", SOLVE + ["--out", "{afile}/x.json"], ["--out", "is not a folder"]),
    ("solve-out-empty", SOLVE + ["--out", ""], ["--out", "file name"]),
    ("export-out-missing-folder", ["export", "{sched}", "{inst}", "--format", "json", "--out", "{tmp}/nodir/x.json"],
     ["--out", "no such folder"]),
    ("solve-many-out-missing-folder", ["solve", "{inst}", "--producer", "greedy,ring", "--out", "{tmp}/nodir/x.json"],
     ["--out", "no such folder"]),
    ("solve-time-limit-inf", SOLVE + ["--time-limit", "inf"], ["--time-limit", "finite"]),
    ("solve-time-limit-huge", SOLVE + ["--time-limit", "1e30"], ["--time-limit", "a year"]),
    ("solve-time-limit-nan", SOLVE + ["--time-limit", "nan"], ["--time-limit"]),
    ("solve-time-limit-zero", SOLVE + ["--time-limit", "0"], ["--time-limit"]),
    ("solve-seed-negative", SOLVE + ["--seed", "-1"], ["--seed", "0..2147483647"]),
    ("solve-seed-huge", SOLVE + ["--seed", str(2**31)], ["--seed", "0..2147483647"]),
    ("solve-threads-huge", SOLVE + ["--threads", "1000000"], ["--threads", "1..1024"]),
    ("solve-threads-zero", SOLVE + ["--threads", "0"], ["--threads"]),
    ("solve-producer-empty-item", ["solve", "{inst}", "--producer", "greedy,,ring"], ["--producer", "empty"]),
    ("solve-producer-empty", ["solve", "{inst}", "--producer", ""], ["--producer"]),
    ("bench-seeds-negative", BENCH + ["--seeds", "-1"], ["--seeds", "0..2147483647"]),
    ("bench-seeds-huge", BENCH + ["--seeds", "100000000000000000000000000000"], ["--seeds", "0..2147483647"]),
    ("bench-seeds-empty", BENCH + ["--seeds", ""], ["--seeds", "empty"]),
    ("bench-seeds-empty-item", BENCH + ["--seeds", "1,,2"], ["--seeds", "empty"]),
    ("bench-seeds-not-int", BENCH + ["--seeds", "1,x"], ["--seeds", "integers"]),
    ("bench-producers-empty-item", BENCH + ["--producers", "greedy,"], ["--producers", "empty"]),
    ("bench-time-limit-inf", BENCH + ["--time-limit", "inf"], ["--time-limit", "finite"]),
    ("bench-time-limit-huge", BENCH + ["--time-limit", "1e30"], ["--time-limit"]),
    ("bench-store-empty", ["bench", "--no-progress", "--instances", "{inst}", "--producers", "greedy", "--store", ""],
     ["--store", "''"]),
    ("bench-dask-bad-address", BENCH + ["--executor", "dask", "--address", "notaurl"], ["--address", "HOST:PORT"]),
    ("bench-dask-bad-port", BENCH + ["--executor", "dask", "--address", "tcp://localhost:99999"], ["--address"]),
    ("bench-dask-no-address", BENCH + ["--executor", "dask"], ["--address"]),
    ("tables-store-empty", ["tables", "--store", ""], ["--store"]),
    ("report-store-empty", ["report", "--store", ""], ["--store"]),
    ("finder-table-out-file", ["finder", "--table", "4", "--out", "{afile}"], ["--out", "is a file"]),
    ("finder-table-out-under-file", ["finder", "--table", "4", "--out", "{afile}/t"], ["--out", "cannot create"]),
    ("finder-table-out-empty", ["finder", "--table", "4", "--out", ""], ["--out"]),
    ("finder-alpha-nan", ["finder", "--nodes", "8", "--degree", "4", "--alpha", "nan"], ["--alpha", "finite"]),
    ("finder-alpha-inf", ["finder", "--nodes", "8", "--degree", "4", "--alpha", "inf"], ["--alpha", "finite"]),
    ("finder-bandwidth-inf", ["finder", "--nodes", "8", "--degree", "4", "--bandwidth", "inf"], ["--bandwidth", "finite"]),
    ("finder-bandwidth-nan", ["finder", "--nodes", "8", "--degree", "4", "--bandwidth", "nan"], ["--bandwidth"]),
    ("finder-message-inf", ["finder", "--nodes", "8", "--degree", "4", "--message", "inf"], ["--message", "finite"]),
    ("finder-nodes-huge", ["finder", "--nodes", "100000000000000000000000000000", "--degree", "4"], ["--nodes", "4096"]),
    ("finder-degree-huge", ["finder", "--nodes", "8", "--degree", "100000000000000000000"], ["--degree"]),
    ("finder-degree-above-nodes", ["finder", "--nodes", "8", "--degree", "9"], ["--degree", "nodes - 1 = 7"]),
    ("draw-out-missing-folder", ["draw", "{sched}", "{inst}", "--out", "{tmp}/nodir/x.png"], ["--out", "no such folder"]),
    ("draw-out-empty", ["draw", "{sched}", "{inst}", "--out", ""], ["--out"]),
]


@pytest.mark.parametrize("case,argv,must", BAD_OPTIONS, ids=[c[0] for c in BAD_OPTIONS])
def test_bad_option(files, capsys, case, argv, must):
    argv = [a.format(**files) for a in argv]
    for json_flag in ([], ["--json"]):
        t0 = time.perf_counter()
        code, out, err = run_cli(argv + json_flag, capsys)
        assert code == 2, err
        assert out == ""
        assert_one_error_line(err, must)
        assert time.perf_counter() - t0 < 30  # refused up front, nothing ran to a limit
    assert not Path(files["store"]).exists()  # nothing stored
    assert not (Path(files["tmp"]) / "nodir").exists()  # no folder created


def test_tables_and_report_out_that_is_a_file(files, capsys):
    code, _, err = run_cli(["bench", "--no-progress", "--instances", files["inst"], "--producers", "ring",
                            "--store", files["store"]], capsys)
    assert code == 0, err
    for argv, where in ((["tables", "--out", files["afile"]], "--out"),
                        (["tables", "--out", f"{files['tmp']}/t", "--plots", f"{files['afile']}/p"], "--plots"),
                        (["report", "--no-progress", "--out", f"{files['afile']}/r"], "--out")):
        code, out, err = run_cli(argv + ["--store", files["store"], "--json"], capsys)
        assert code == 2 and out == ""
        assert_one_error_line(err, [where, files["afile"]])


def test_finder_json_is_strict(capsys):
    code, out, err = run_cli(["finder", "--nodes", "8", "--degree", "4", "--json"], capsys)
    assert code == 0, err
    assert strict_json(out)["best"]["allreduce_s"] > 0


def write_schedule(files, tmp, name, edit):
    data = json.loads(open(files["sched"]).read())
    edit(data["sends"][0])
    path = tmp / name
    path.write_text(json.dumps(data))
    return str(path)


def test_show_refuses_a_malformed_schedule_like_verify(files, tmp_path, capsys):
    # a chunk id outside the header's chunks is malformed: bad input (exit 2) naming the file and the send
    bad = write_schedule(files, tmp_path, "oob.json", lambda send: send.__setitem__(0, 99))
    code, out, err = run_cli(["verify", bad, files["inst"], "--json"], capsys)
    assert code == 2 and out == "", err
    expected = err
    assert expected.startswith(f"error: {bad}: sends[0]: chunk: ") and "got 99" in expected, err
    code, out, err = run_cli(["show", bad, files["inst"], "--json"], capsys)
    assert code == 2 and out == "" and err == expected, err
    code, out, err = run_cli(["show", bad, files["inst"]], capsys)
    assert code == 2 and out == "" and err == expected, err


def test_show_lists_only_steps_with_sends(files, tmp_path, capsys):
    late = write_schedule(files, tmp_path, "late.json", lambda send: send.__setitem__(5, 10**9))
    t0 = time.perf_counter()
    code, out, err = run_cli(["show", late, files["inst"], "--json"], capsys)
    assert time.perf_counter() - t0 < 30
    assert code == 0, err
    data = strict_json(out)
    assert data["steps"] == 10**9 and data["by_step"][-1]["step"] == 10**9
    assert all(row["sends"] > 0 for row in data["by_step"]) and len(data["by_step"]) <= 3
    code, out, err = run_cli(["show", late, files["inst"]], capsys)
    assert code == 0 and "with no sends not listed" in out


def test_unimportable_plug_in_module(monkeypatch, capsys):
    monkeypatch.setenv("COLLSYNTH_PRODUCERS", "nosuch_mod_xyz")
    for argv in (["producers"], ["producers", "--json"]):
        code, out, err = run_cli(argv, capsys)
        assert code == 2 and out == ""
        assert_one_error_line(err, ["COLLSYNTH_PRODUCERS", "nosuch_mod_xyz"])


def test_good_limits_still_run(files, capsys):
    code, out, err = run_cli(SOLVE[:1] + [files["inst"]] + SOLVE[2:] + ["--time-limit", "31536000", "--seed",
                             str(2**31 - 1), "--threads", "4", "--json"], capsys)
    assert code == 0, err
    assert strict_json(out)["verified"] is True


PARAM_RANGES = [  # (producer, driver, parameter, bad value, what the error says)
    ("ten-ilp", "time-cluster", "window=0", "at least 1"),
    ("ten-ilp", "early-stop", "horizon=0", "at least 1"),
    ("ten-ilp", "horizon", "max_horizon=-1", "at least 1"),
    ("ten-ilp", "horizon", "max_variables=0", "at least 1"),
    ("ten-ilp", "horizon", "warm_share=1.5", "in 0..1"),
    ("ten-ilp", "horizon", "timestep=nan", "a finite number"),
    ("ten-ilp", "horizon", "weights=-2", "at least 0"),
    ("bfb-lp", None, "jobs=0", "at least 1"),
    ("greedy", None, "endgame=-1", "at least 0"),
    ("greedy", None, "workers=0", "at least 1"),
]


@pytest.mark.parametrize("producer,driver,param,says", PARAM_RANGES, ids=[c[2] for c in PARAM_RANGES])
def test_a_producer_parameter_out_of_its_range_is_refused(tmp_path, capsys, producer, driver, param, says):
    inst = tmp_path / "ring4.toml"
    inst.write_text(RING4)
    argv = ["solve", inst, "--producer", producer, "--param", param, "--json"] + (["--driver", driver] if driver else [])
    code, out, err = run_cli(argv, capsys)
    assert code == 2 and out == ""
    assert_one_error_line(err, [f"--param {param.split('=')[0]}", says])


@pytest.mark.parametrize("option,value", [("seed", -1), ("threads", 0), ("time_limit", float("inf"))])
def test_the_python_api_checks_run_options_as_the_command_line_does(tmp_path, option, value):
    import collsynth as cs

    inst = tmp_path / "ring4.toml"
    inst.write_text(RING4)
    with pytest.raises(cs.InputError) as refused:
        cs.solve(inst, "greedy", **{option: value})
    assert refused.value.where == option
