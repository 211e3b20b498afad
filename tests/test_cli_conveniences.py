"""The command line's conveniences: ``--version``, ``--json`` and defaults in every ``--help``,
``collsynth corpus``, ``collsynth solve --producer a,b,c`` and ``collsynth show``."""

from __future__ import annotations

import argparse
import json
import re
import tomllib
from pathlib import Path

import pytest

from collsynth.instances import CORPUS
from collsynth.solvers.cli import COMMANDS, build_parser, main
from collsynth.tens.schedule import read_json
from collsynth.tens.verify import verify
from collsynth.instances.instance import load_instance

REPO = Path(__file__).resolve().parent.parent
PLUGINS = str(Path(__file__).parent / "plugins")


def run(capsys, *argv, as_json=True):
    code = main(list(argv) + (["--json"] if as_json else []))
    out, err = capsys.readouterr()
    if as_json:
        return code, (json.loads(out) if out.strip() else None), err
    return code, out, err


def subcommands() -> dict[str, argparse.ArgumentParser]:
    """Every command's full parser (``build_parser()`` alone holds only their summaries)."""
    out = {}
    for names in COMMANDS.values():
        for name in names:
            (action,) = [a for a in build_parser(name)._actions if isinstance(a, argparse._SubParsersAction)]
            out[name] = action.choices[name]
    return out


# ---- --version, --help ------------------------------------------------------------------------

def test_version_is_the_distribution_version(capsys):
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    code, data, _ = run(capsys, "--version")
    assert code == 0 and data["version"] == version
    code, text, _ = run(capsys, "--version", as_json=False)
    assert code == 0 and text.strip() == f"collsynth {version}"


def test_no_command_is_one_error_line(capsys):
    code, out, err = run(capsys, as_json=False)
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("error: collsynth: expected a command")


def test_every_help_lists_json_and_the_defaults():
    commands = subcommands()
    assert {"corpus", "show", "solve", "bench", "verify", "price", "export"} <= set(commands)
    for name, parser in commands.items():
        text = " ".join(parser.format_help().split())
        assert "--json" in text, name
        for action in parser._actions:
            flag = isinstance(action, (argparse._StoreTrueAction, argparse._HelpAction))
            if not action.option_strings or action.required or flag:
                continue
            said = "default" in (action.help or "")
            shown = f"(default: {action.default})" in text.replace("- ", "-")  # argparse wraps at hyphens
            assert said or shown, f"collsynth {name} {action.option_strings[0]}: default not shown"


# ---- corpus -------------------------------------------------------------------------------------

def corpus_files():
    return sorted(p for p in CORPUS.glob("*.toml") if p.name != "suites.toml")


def test_corpus_lists_every_instance_suite_and_tag(capsys):
    code, data, _ = run(capsys, "corpus")
    assert code == 0
    assert sorted(e["file"] for e in data["instances"]) == [p.name for p in corpus_files()]
    defined = tomllib.loads((CORPUS / "suites.toml").read_text())
    assert [s["name"] for s in data["suites"]] == list(defined)
    quick = next(s for s in data["suites"] if s["name"] == "quick")
    assert quick["producers"] == defined["quick"]["producers"]
    used = {t for p in corpus_files() for t in tomllib.loads(p.read_text()).get("suites", [])}
    assert {t["name"] for t in data["tags"]} == used - set(defined)
    ring8 = next(e for e in data["instances"] if e["name"] == "ring8-allgather")
    assert ring8["topology"] == "ring nodes=8" and ring8["collectives"] == ["allgather"]


def test_corpus_of_one_suite(capsys):
    code, data, _ = run(capsys, "corpus", "--suite", "file")
    in_file = [p.name for p in corpus_files() if "file" in tomllib.loads(p.read_text()).get("suites", [])]
    assert code == 0 and sorted(e["file"] for e in data["instances"]) == sorted(in_file) and len(in_file) >= 3
    code, out, err = run(capsys, "corpus", "--suite", "quik", as_json=False)
    assert code == 2 and out == "" and "did you mean 'quick'" in err and err.count("\n") == 1


# ---- solve --producer a,b,c ---------------------------------------------------------------------

RING8 = str(CORPUS / "ring8-allgather.toml")


def test_solve_compares_producers_in_one_table(capsys, tmp_path):
    out = tmp_path / "s.json"
    code, data, _ = run(capsys, "solve", RING8, "--producer", "ring,recursive-doubling,optree", "--out", str(out))
    assert code == 0  # optree does not support a ring of electrical links: skipped, not a failure
    rows = {r["producer"]: r for r in data["rows"]}
    assert list(rows) == ["ring", "recursive-doubling", "optree"]
    assert rows["ring"]["steps"] == 7  # N - 1 steps on 8 nodes
    assert rows["recursive-doubling"]["steps"] == 3  # log2(8)
    assert rows["optree"]["status"] == "skipped" and rows["optree"]["message"].startswith("unsupported")
    inst = load_instance(RING8)
    for name in ("ring", "recursive-doubling"):
        assert verify(read_json(tmp_path / f"s.{name}.json"), inst) is None
    assert not (tmp_path / "s.optree.json").exists()
    code, text, _ = run(capsys, "solve", RING8, "--producer", "ring,recursive-doubling", as_json=False)
    assert code == 0 and re.search(r"^ring\s+-\s+constructed\s+7\s+-\s", text, re.M)  # steps, no TEN timesteps


def test_solve_comparison_routes_options_and_fails_on_an_invalid_schedule(capsys, monkeypatch):
    code, data, _ = run(capsys, "solve", RING8, "--producer", "greedy,ring", "--param", "priority=fifo", "--starts", "2")
    assert code == 0 and [r["verified"] for r in data["rows"]] == [True, True]
    code, _, err = run(capsys, "solve", RING8, "--producer", "ring,direct", "--solver", "highs")
    assert code == 2 and "no selected producer uses a solver" in err
    code, _, err = run(capsys, "solve", RING8, "--producer", "ring,ring")
    assert code == 2 and "given twice: ring" in err
    monkeypatch.setenv("COLLSYNTH_PRODUCERS", "wrong_producers")
    monkeypatch.syspath_prepend(PLUGINS)
    code, data, _ = run(capsys, "solve", RING8, "--producer", "ring,test-invalid-ring")
    assert code == 1
    assert [r["status"] for r in data["rows"]] == ["constructed", "invalid"]
    assert data["rows"][1]["time_sync_s"] is None  # never priced


# ---- show ---------------------------------------------------------------------------------------

CHAIN = """name = "chain4"
[topology]
generator = "ring"
nodes = 4
bidirectional = false
bandwidth = 1e9
alpha = 1e-6
[collective]
kind = "broadcast"
root = 0
message_bytes = 4096
"""


def chain(tmp_path, sends):
    (tmp_path / "chain4.toml").write_text(CHAIN)
    (tmp_path / "s.json").write_text(json.dumps({"format": "collsynth.schedule/1", "collective": "broadcast",
                                                 "nodes": 4, "chunks": 1, "sends": sends}))
    return str(tmp_path / "s.json"), str(tmp_path / "chain4.toml")


def test_show_prints_each_step_with_its_time(capsys, tmp_path):
    sched, inst = chain(tmp_path, [[0, "0", "1", 0, 1, 1], [0, "0", "1", 1, 2, 2], [0, "0", "1/2", 2, 3, 3],
                                   [0, "1/2", "1", 2, 3, 3]])
    code, text, _ = run(capsys, "show", sched, inst, as_json=False)
    assert code == 0
    lines = text.splitlines()
    # a step moves 4096 B over one 1e9 B/s link: 1e-6 + 4.096e-6 s
    assert lines[1] == "step 1: 1 send, 4096 B; sync 5.096e-06 s (latency 1e-06 + bandwidth 4.096e-06)"
    assert lines[2] == "  0 -> 1  chunk 0  copy  4096 B"
    assert lines[6] == "  2 -> 3  chunk 0 [0, 1/2)  copy  2048 B"
    assert lines[-1].startswith("verified; sync 1.529e-05 s")
    code, data, _ = run(capsys, "show", sched, inst, "--steps", "2-3", "--max-sends", "1")
    assert [s["step"] for s in data["by_step"]] == [2, 3]
    assert data["by_step"][1]["sends"] == 2 and len(data["by_step"][1]["shown"]) == 1
    assert data["time_sync_s"] == pytest.approx(3 * (1e-6 + 4096 / 1e9))


def test_show_stops_at_the_violation_and_prices_nothing(capsys, tmp_path):
    sched, inst = chain(tmp_path, [[0, "0", "1", 0, 1, 1], [0, "0", "1", 2, 3, 3], [0, "0", "1", 3, 0, 4]])
    code, data, _ = run(capsys, "show", sched, inst)
    assert code == 1 and data["verified"] is False and data["violation"]["step"] == 3
    assert [s["step"] for s in data["by_step"]] == [1, 2, 3]
    assert "time_sync_s" not in data and all(s["latency_s"] is None for s in data["by_step"])
    code, out, err = run(capsys, "show", sched, inst, "--steps", "3-1", as_json=False)
    assert code == 2 and out == "" and err.startswith("error: --steps:")
