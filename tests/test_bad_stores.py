"""Bad results stores through the real CLI: a database that is not a store, text where the
schema has numbers, and schedule files that are corrupt or missing are refused with exit code
2 and exactly one stderr line ``error: <where>: <what>`` naming the file, and nothing stored
is lost or changed by the refusal."""

import shutil
import sqlite3
from pathlib import Path

import pytest

from cli_errors import assert_one_error_line, run_cli
from collsynth.solvers.cli import main

RING = 'name = "t"\n[topology]\ngenerator = "ring"\nnodes = 6\n[collective]\nkind = "allgather"\n'


def snapshot(folder: Path) -> dict:
    """Every file of a store folder with its bytes, and every subfolder."""
    return {p.relative_to(folder).as_posix(): (p.read_bytes() if p.is_file() else None) for p in folder.rglob("*")}


@pytest.fixture(scope="module")
def good_store(tmp_path_factory):
    """A store of two verified runs (ring and greedy on a 6-node ring), made once. The benches
    here run one worker process (``--jobs 1``): the pool's size is not what they check, and each
    worker's start costs seconds of imports."""
    root = tmp_path_factory.mktemp("good")
    (root / "r.toml").write_text(RING)
    code = main(["bench", "--no-progress", "--jobs", "1", "--instances", str(root / "r.toml"), "--producers",
                 "ring,greedy", "--store", str(root / "store")])
    assert code == 0
    assert len(list((root / "store" / "schedules").glob("*.json"))) == 2
    return root


@pytest.fixture
def inst(tmp_path):
    path = tmp_path / "r.toml"
    path.write_text(RING)
    return path


def _run_sql(folder: Path, statements) -> Path:
    con = sqlite3.connect(folder / "runs.sqlite")
    for s in statements:
        con.execute(s)
    con.commit()
    con.close()
    return folder


def sql_store(folder: Path, *statements) -> Path:
    """A store folder whose runs.sqlite is made by ``statements``."""
    folder.mkdir()
    return _run_sql(folder, statements)


def copy_store(good_store, folder: Path, *statements) -> Path:
    """A copy of the good store with ``statements`` run on its database."""
    shutil.copytree(good_store / "store", folder)
    return _run_sql(folder, statements)


def garbage(folder: Path) -> Path:
    folder.mkdir()
    (folder / "runs.sqlite").write_text("these are not the runs you are looking for\n")
    return folder


def cut(good_store, folder: Path, keep) -> Path:
    """A copy of the good store whose database keeps only ``keep(size)`` of its first bytes."""
    shutil.copytree(good_store / "store", folder)
    db = folder / "runs.sqlite"
    data = db.read_bytes()
    db.write_bytes(data[:keep(len(data))])
    return folder


def damage_page(good_store, folder: Path, table: str) -> Path:
    """A copy of the good store with bytes overwritten in the middle of the root page of
    ``table`` (the runs table or its key's index): a damaged page SQLite's check finds."""
    shutil.copytree(good_store / "store", folder)
    db = folder / "runs.sqlite"
    con = sqlite3.connect(db)
    page_size = con.execute("PRAGMA page_size").fetchone()[0]
    root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", [table]).fetchone()[0]
    con.close()
    data = bytearray(db.read_bytes())
    start = (root - 1) * page_size + 8  # past the page's 8-byte header: its cell pointers
    data[start:start + 192] = bytes(range(192))
    db.write_bytes(bytes(data))
    return folder


# (id, how the bad store is made, substrings the error line must contain besides the file name)
BAD_STORES = [
    ("empty-database", lambda g, f: cut(g, f, lambda n: 0), ["damaged results database", "empty", "0 bytes"]),
    ("truncated-mid-page", lambda g, f: cut(g, f, lambda n: n - 1000),
     ["damaged results database", "truncated", "not a whole number of"]),
    ("truncated-pages", lambda g, f: cut(g, f, lambda n: 2 * 4096),
     ["damaged results database", "truncated", "header records"]),
    ("damaged-table-page", lambda g, f: damage_page(g, f, "runs"), ["damaged results database", "quick_check"]),
    ("damaged-index-page", lambda g, f: damage_page(g, f, "sqlite_autoindex_runs_1"),
     ["damaged results database", "quick_check"]),
    ("foreign-runs", lambda g, f: sql_store(f, "CREATE TABLE runs (foo, bar)", "INSERT INTO runs VALUES (1, 2)"),
     ["not a collsynth store", "table runs lacks columns id, instance, producer"]),
    ("runs-without-key", lambda g, f: sql_store(f, "CREATE TABLE runs (id TEXT PRIMARY KEY, instance TEXT, "
                                                   "status TEXT, verified INTEGER)"),
     ["not a collsynth store", "lacks columns producer, solver, driver, seed, params"]),
    ("foreign-claims", lambda g, f: copy_store(g, f, "DROP TABLE claims", "CREATE TABLE claims (x)"),
     ["not a collsynth store", "table claims lacks columns id, owner"]),
    ("other-tables", lambda g, f: sql_store(f, "CREATE TABLE users (name TEXT)"),
     ["not a collsynth store", "users", "no table runs"]),
    ("not-sqlite", lambda g, f: garbage(f), ["not a results database"]),
    ("text-steps", lambda g, f: copy_store(g, f, "UPDATE runs SET steps = 'many' WHERE producer = 'ring'"),
     ["column steps", "'many'", "expected an integer"]),
    ("text-time", lambda g, f: copy_store(g, f, "UPDATE runs SET time_sync_s = 'fast'"),
     ["column time_sync_s", "'fast'", "expected a number"]),
    ("text-verified", lambda g, f: copy_store(g, f, "UPDATE runs SET verified = 'yes'"), ["column verified", "'yes'"]),
    ("text-seed", lambda g, f: copy_store(g, f, "UPDATE runs SET seed = 'zero'"), ["column seed", "'zero'"]),
]

COMMANDS = {
    "bench": ["bench", "--no-progress", "--instances", "{inst}", "--producers", "ring", "--store", "{store}"],
    "bench-rerun": ["bench", "--no-progress", "--instances", "{inst}", "--producers", "ring", "--rerun",
                    "--store", "{store}"],
    "tables": ["tables", "--store", "{store}", "--out", "{tmp}/t", "--plots", "{tmp}/p", "--json"],
    "report": ["report", "--no-progress", "--store", "{store}", "--out", "{tmp}/o", "--jobs", "2"],
}


# a re-run reads no stored values (it only adds rows, which the next read refuses): no text cases
RUNS = [(command, *bad) for command in COMMANDS for bad in BAD_STORES
        if not (command == "bench-rerun" and bad[0].startswith("text-"))]


@pytest.mark.parametrize("command,case,make,must", RUNS, ids=[f"{r[0]}-{r[1]}" for r in RUNS])
def test_a_bad_store_is_refused_and_left_as_it_was(tmp_path, capsys, good_store, inst, case, make, must, command):
    store = make(good_store, tmp_path / "store")
    before = snapshot(store)
    argv = [a.format(inst=inst, store=store, tmp=tmp_path) for a in COMMANDS[command]]
    code, out, err = run_cli(argv, capsys)
    assert code == 2 and out == "", err
    assert_one_error_line(err, [f"{store / 'runs.sqlite'}: "] + must)
    assert snapshot(store) == before


def test_the_python_api_refuses_a_foreign_store(tmp_path):
    import collsynth as cs

    store = sql_store(tmp_path / "store", "CREATE TABLE runs (foo, bar)")
    for read in (lambda s: s.runs(), len):
        with pytest.raises(cs.InputError, match="table runs lacks columns id"):
            read(cs.open_store(store))


def break_schedules(store: Path, how: str) -> list[Path]:
    """Every schedule file of the store made corrupt, removed or replaced by a folder."""
    files = sorted((store / "schedules").glob("*.json"))
    for f in files:
        if how == "corrupt":
            f.write_text("{not json")
        elif how == "missing":
            f.unlink()
        else:
            f.unlink()
            f.mkdir()
    return files


BROKEN = [("corrupt", "malformed JSON"), ("missing", "no such file"), ("folder", "irectory")]


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("how,must", BROKEN, ids=[b[0] for b in BROKEN])
def test_a_broken_schedule_file_is_named_whatever_the_pool(tmp_path, capsys, good_store, how, must, jobs):
    store = tmp_path / "store"
    shutil.copytree(good_store / "store", store)
    files = break_schedules(store, how)
    before = snapshot(store)
    code, out, err = run_cli(["report", "--no-progress", "--store", store, "--out", tmp_path / "o", "--jobs", jobs],
                             capsys)
    assert code == 2 and out == "", err
    assert "BrokenProcessPool" not in err
    assert_one_error_line(err, [must])
    assert any(str(f) in err for f in files), err
    assert snapshot(store) == before


def test_a_schedule_that_cannot_be_written_is_named_and_nothing_stored_is_lost(tmp_path, capsys, good_store, inst):
    store = tmp_path / "store"
    shutil.copytree(good_store / "store", store)
    con = sqlite3.connect(store / "runs.sqlite")
    path = con.execute("SELECT schedule_path FROM runs WHERE producer = 'ring'").fetchone()[0]
    con.execute("DELETE FROM runs WHERE producer = 'ring'")  # the ring run is still to do
    con.commit()
    rows = con.execute("SELECT * FROM runs ORDER BY id").fetchall()
    con.close()
    (store / path).unlink()
    (store / path).mkdir()  # a folder where the run's schedule file goes
    code, out, err = run_cli(["bench", "--no-progress", "--instances", inst, "--producers", "ring",
                              "--store", store], capsys)
    assert code == 2 and out == "", err
    assert_one_error_line(err, [str(store / path), "cannot write the schedule file"])
    con = sqlite3.connect(store / "runs.sqlite")
    assert con.execute("SELECT * FROM runs ORDER BY id").fetchall() == rows
    assert con.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0
    con.close()
    assert not [p for p in (store / "schedules").iterdir() if p.name.startswith(".")]  # no temporary file left


def test_a_schedule_file_of_a_stored_run_that_is_a_folder_is_damage(tmp_path, capsys, good_store, inst):
    store = tmp_path / "store"
    shutil.copytree(good_store / "store", store)
    files = break_schedules(store, "folder")
    before = snapshot(store)
    code, out, err = run_cli(["bench", "--no-progress", "--instances", inst, "--producers", "ring", "--rerun",
                              "--store", store], capsys)
    assert code == 2 and out == "", err
    assert_one_error_line(err, [str(files[0]), "irectory", "store repair"])
    assert snapshot(store) == before


def test_a_good_store_still_reads_and_takes_new_runs(tmp_path, capsys, good_store, inst):
    store = tmp_path / "store"
    shutil.copytree(good_store / "store", store)
    code, out, err = run_cli(["tables", "--store", store, "--out", tmp_path / "t", "--plots", tmp_path / "p", "--json"],
                             capsys)
    assert code == 0 and '"runs": 2' in out, err
    code, out, err = run_cli(["bench", "--no-progress", "--jobs", "1", "--instances", inst, "--producers",
                              "ring,greedy", "--store", store], capsys)
    assert code == 0, err


@pytest.mark.parametrize("command", ["tables", "bench"])
def test_a_corrupt_schedule_file_is_refused_by_every_command(tmp_path, capsys, good_store, inst, command):
    store = tmp_path / "store"
    shutil.copytree(good_store / "store", store)
    files = break_schedules(store, "corrupt")
    before = snapshot(store)
    argv = [a.format(inst=inst, store=store, tmp=tmp_path) for a in COMMANDS[command]]
    code, out, err = run_cli(argv, capsys)
    assert code == 2 and out == "", err
    assert_one_error_line(err, [str(files[0]), "malformed JSON", "store repair"])
    assert snapshot(store) == before
    assert not (tmp_path / "t").exists() or not any((tmp_path / "t").iterdir())


DAMAGED = {case: make for case, make, _ in BAD_STORES if case.startswith(("empty", "truncated", "damaged"))}


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_store_check_lists_the_damage_and_writes_nothing(tmp_path, capsys, good_store, case):
    store = DAMAGED[case](good_store, tmp_path / "store")
    before = snapshot(store)
    code, out, err = run_cli(["store", "check", "--store", store, "--json"], capsys)
    assert code == 1, err
    import json

    damaged = json.loads(out)["damaged"]
    assert damaged[0]["file"] == str(store / "runs.sqlite")
    assert snapshot(store) == before


def _rows(store: Path) -> list:
    con = sqlite3.connect(store / "runs.sqlite")
    try:
        return con.execute("SELECT id, instance, producer, status, schedule_path FROM runs ORDER BY id").fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_store_repair_keeps_the_readable_rows_and_the_store_takes_new_runs(tmp_path, capsys, good_store, inst,
                                                                            case):
    good_rows = _rows(good_store / "store")
    store = DAMAGED[case](good_store, tmp_path / "store")
    damaged_db = (store / "runs.sqlite").read_bytes()
    code, out, err = run_cli(["store", "repair", "--store", store, "--json"], capsys)
    assert code == 0, err
    import json

    done = json.loads(out)
    kept = _rows(store)
    assert set(kept) <= set(good_rows)  # nothing made up
    if case.startswith("damaged-index"):
        assert kept == good_rows  # the rows live on another page: all of them are read back
    if case.startswith("empty"):
        assert kept == [] and len(done["orphaned_files"]) == 2
    assert Path(done["damaged_database"]).read_bytes() == damaged_db  # kept beside, never deleted
    code, out, err = run_cli(["store", "check", "--store", store], capsys)
    assert code == 0 and "no damage found" in out, err
    code, out, err = run_cli(["bench", "--no-progress", "--jobs", "1", "--instances", inst, "--producers",
                              "ring,greedy", "--store", store, "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["ran"] == len(good_rows) - len(kept)


def test_store_repair_drops_a_run_whose_schedule_file_is_damaged(tmp_path, capsys, good_store):
    store = tmp_path / "store"
    shutil.copytree(good_store / "store", store)
    rows = _rows(store)
    bad = store / rows[0][4]
    bad.write_text("{not json")
    code, out, err = run_cli(["store", "check", "--store", store], capsys)
    assert code == 1 and str(bad) in out and "malformed JSON" in out, err
    code, out, err = run_cli(["store", "repair", "--store", store], capsys)
    assert code == 0, err
    assert _rows(store) == rows[1:]
    assert (store / "schedules" / "damaged" / bad.name).read_text() == "{not json"
    code, out, err = run_cli(["tables", "--store", store, "--out", tmp_path / "t", "--plots", tmp_path / "p",
                              "--json"], capsys)
    assert code == 0 and '"runs": 1' in out, err


def test_the_python_api_adds_no_run_to_a_damaged_store(tmp_path, good_store, inst):
    import collsynth as cs

    store = tmp_path / "store"
    shutil.copytree(good_store / "store", store)
    files = break_schedules(store, "corrupt")
    before = snapshot(store)
    with pytest.raises(cs.InputError, match="malformed JSON") as e:
        cs.bench(instances=str(inst), producers=["ring"], store=store, rerun=True)
    assert e.value.where == str(files[0])
    assert snapshot(store) == before


def test_a_store_read_while_sqlite_recovers_from_a_killed_writer_shows_every_committed_run(tmp_path, good_store,
                                                                                           monkeypatch):
    """A writer killed with -9 leaves its last commit in the WAL; a read that SQLite first answers
    "database is locked" (it recovers the WAL index) waits and sees that commit, instead of
    reading the database file as it is, without the WAL."""
    import os
    import signal
    import subprocess
    import sys

    from collsynth.results import store

    st = copy_store(good_store, tmp_path / "s")
    before = store.count(st)
    writer = subprocess.Popen([sys.executable, "-c", (
        "import sqlite3, sys, time\n"
        f"con = sqlite3.connect({str(st / 'runs.sqlite')!r}, isolation_level=None)\n"
        "con.execute('PRAGMA wal_autocheckpoint=0')\n"
        "con.execute(\"INSERT INTO runs (id, instance, producer, solver, driver, seed, params, status, verified) "
        "SELECT 'x' || id, instance, producer || '-again', solver, driver, seed, params, status, verified FROM runs LIMIT 1\")\n"
        "print('committed', flush=True)\n"
        "time.sleep(60)\n")], stdout=subprocess.PIPE)
    assert writer.stdout.readline() == b"committed\n"
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    assert (st / "runs.sqlite-wal").stat().st_size > 0  # the commit is in the WAL only
    opened, calls = store._open_for_reading, []

    def locked_once(path):
        calls.append(path)
        if len(calls) == 1:
            raise sqlite3.OperationalError("database is locked")
        return opened(path)

    monkeypatch.setattr(store, "_open_for_reading", locked_once)
    assert store.count(st) == before + 1 and len(calls) == 2
