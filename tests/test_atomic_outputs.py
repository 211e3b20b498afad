"""Outputs replaced whole or not at all (:mod:`collsynth.outputs`): ``tables``, ``report``,
``draw`` and ``export`` that fail midway leave the old output byte for byte (the folder hashed
before and after, no temporary file left), and one that succeeds replaces it."""

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from cli_errors import run_cli
from collsynth.solvers.cli import main

RING = 'name = "t"\n[topology]\ngenerator = "ring"\nnodes = 6\n[collective]\nkind = "allgather"\n'


def digest(folder: Path) -> dict:
    """Every file and folder under ``folder`` (hidden ones too) with the SHA-256 of its bytes."""
    return {p.relative_to(folder).as_posix(): (hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir")
            for p in sorted(folder.rglob("*"))}


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A store of two runs (ring and greedy on a 6-node ring), its tables, plots and report."""
    root = tmp_path_factory.mktemp("atomic")
    (root / "r.toml").write_text(RING)
    assert main(["bench", "--no-progress", "--jobs", "1", "--instances", str(root / "r.toml"), "--producers",
                 "ring,greedy", "--store", str(root / "store")]) == 0
    assert main(["tables", "--store", str(root / "store"), "--out", str(root / "t"), "--plots", str(root / "p")]) == 0
    assert main(["report", "--no-progress", "--jobs", "1", "--store", str(root / "store"),
                 "--out", str(root / "o")]) == 0
    return root


@pytest.fixture
def old(made, tmp_path):
    """A copy of the store and outputs, each output folder with a file of another command in it."""
    for name in ("store", "t", "p", "o"):
        shutil.copytree(made / name, tmp_path / name)
    (tmp_path / "t" / "corpus_open.md").write_text("another command's table\n")
    (tmp_path / "r.toml").write_text(RING)
    return tmp_path


def tables_argv(root: Path) -> list:
    return ["tables", "--store", root / "store", "--out", root / "t", "--plots", root / "p"]


def report_argv(root: Path) -> list:
    return ["report", "--no-progress", "--jobs", "1", "--store", root / "store", "--out", root / "o"]


def test_tables_that_fail_midway_leave_the_old_tables_and_plots(old, capsys, monkeypatch):
    from collsynth.results import figures

    before = {k: digest(old / k) for k in ("t", "p")}

    def fail(*args, **kwargs):  # the tables and two plots are written by then
        raise RuntimeError("plot failed midway")
    monkeypatch.setattr(figures, "size_sweep", fail)
    code, out, err = run_cli(tables_argv(old), capsys)
    assert code == 1 and "plot failed midway" in err, err
    assert {k: digest(old / k) for k in ("t", "p")} == before


def test_report_that_fails_midway_leaves_the_old_report(old, capsys, monkeypatch):
    from collsynth.results import report

    before = digest(old / "o")

    def fail(*args, **kwargs):  # every picture and runs.csv are written by then
        raise RuntimeError("page failed midway")
    monkeypatch.setattr(report, "instance_page", fail)
    code, out, err = run_cli(report_argv(old), capsys)
    assert code == 1 and "page failed midway" in err, err
    assert digest(old / "o") == before


@pytest.mark.parametrize("command", ["tables", "report"])
def test_a_corrupt_schedule_file_leaves_the_old_output(old, capsys, command):
    before = {k: digest(old / k) for k in ("t", "p", "o")}
    victim = sorted((old / "store" / "schedules").glob("*.json"))[-1]
    victim.write_text("{not json")
    code, out, err = run_cli(tables_argv(old) if command == "tables" else report_argv(old), capsys)
    assert code == 2 and str(victim) in err, err
    assert {k: digest(old / k) for k in ("t", "p", "o")} == before


def test_a_report_that_succeeds_replaces_the_old_one_whole(old, capsys):
    stale = old / "o" / "instances" / "gone.html"  # a page of an instance the store no longer has
    stale.write_text("stale")
    (old / "o" / "notes.txt").write_text("mine")
    code, out, err = run_cli(report_argv(old), capsys)
    assert code == 0, err
    assert not stale.exists()
    assert (old / "o" / "notes.txt").read_text() == "mine"  # not the report's: kept
    assert (old / "o" / "instances" / "t.html").is_file()
    assert not [p for p in (old / "o").rglob(".*")]  # no staging folder left


def test_tables_that_succeed_keep_another_commands_files(old, capsys):
    code, out, err = run_cli(tables_argv(old), capsys)
    assert code == 0, err
    assert (old / "t" / "corpus_open.md").read_text() == "another command's table\n"
    assert not [p for p in (old / "t").rglob(".*")] and not [p for p in (old / "p").rglob(".*")]


def _schedule(old: Path) -> Path:
    return sorted((old / "store" / "schedules").glob("*.json"))[0]


def test_draw_that_fails_midway_leaves_the_old_picture(old, capsys, monkeypatch):
    from collsynth.results import pictures

    picture = old / "pic.png"
    picture.write_bytes(b"the old picture")

    def fail(schedule, instance, out, label=""):
        Path(out).write_bytes(b"half a picture")
        raise RuntimeError("drawing failed midway")
    monkeypatch.setattr(pictures, "link_load_heatmap", fail)
    code, out, err = run_cli(["draw", _schedule(old), old / "r.toml", "--kind", "heatmap", "--out", picture], capsys)
    assert code == 1, err
    assert picture.read_bytes() == b"the old picture"
    assert sorted(p.name for p in old.iterdir() if p.is_file()) == ["pic.png", "r.toml"]


def test_export_that_fails_midway_leaves_the_old_file(old, capsys, monkeypatch):
    from collsynth.tens import schedule as schedules  # the export command imports write_json from it when it runs

    target = old / "x.json"
    target.write_text("the old export")

    def fail(schedule, path):
        Path(path).write_text('{"format": "half')
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(schedules, "write_json", fail)
    code, out, err = run_cli(["export", _schedule(old), old / "r.toml", "--format", "json", "--out", target], capsys)
    assert code == 2 and str(target) in err and "No space left" in err, err
    assert target.read_text() == "the old export"
    assert sorted(p.name for p in old.iterdir() if p.is_file()) == ["r.toml", "x.json"]
    monkeypatch.undo()
    code, out, err = run_cli(["export", _schedule(old), old / "r.toml", "--format", "json", "--out", target], capsys)
    assert code == 0 and target.read_text().startswith('{"format"'), err


def test_a_staging_folder_left_by_a_killed_run_is_removed_by_the_next_run(tmp_path):
    import subprocess
    import sys

    from collsynth.outputs import replaced_folder

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    target = tmp_path / "out"
    target.mkdir()
    (target / "old.txt").write_text("old")
    left = target / f".out.tmp-{int(dead.stdout)}-abc"  # a run killed while writing
    (left / "half").mkdir(parents=True)
    live = target / f".out.tmp-{os.getpid()}-xyz"  # a run still writing (this process)
    live.mkdir()
    with replaced_folder(target) as stage:
        (stage / "new.txt").write_text("new")
    assert sorted(p.name for p in target.iterdir()) == sorted(["new.txt", "old.txt", live.name])
