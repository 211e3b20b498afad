"""``--help`` of every command loads what its parser needs and nothing it runs: no numba, pandas,
Pyomo, HiGHS, SciPy or matplotlib, and networkx (with the instance code) only for the commands
whose parser is built from the instances (the generators, the corpus, the producers). Checked on
the modules a real ``collsynth COMMAND --help`` leaves loaded, in a fresh child process. Its cost
is ``benchmarks/bench_help.py``'s to print; the names the parsers list come from light
registries (:mod:`collsynth.tens.choices`), checked here against the registries they stand for.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from collsynth.instances import CORPUS
from collsynth.solvers.cli import COMMANDS

HEAVY = ("numba", "pandas", "pyomo", "highspy", "scipy", "matplotlib")
WITH_INSTANCES = {"topologies", "topology", "instance", "corpus", "solve"}  # their parsers name generators, producers

CHILD = textwrap.dedent("""
    import contextlib, io, json, sys
    from collsynth.solvers.cli import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main(sys.argv[1:])
    roots = sorted({m.split(".")[0] for m in sys.modules})
    print(json.dumps({"roots": roots, "help": out.getvalue()}))
""")


def _help_in_a_child(*argv: str) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("command", [None, *(name for names in COMMANDS.values() for name in names)])
def test_help_loads_no_heavy_library(command):
    got = _help_in_a_child(*([command] if command else []), "--help")
    assert got["help"].rstrip().splitlines()[-3] == "examples:"
    loaded = [m for m in HEAVY if m in got["roots"]]
    assert loaded == [], (command, loaded)
    assert ("networkx" in got["roots"]) == (command in WITH_INSTANCES), command


def test_the_check_can_fail_a_command_that_runs_loads_what_its_help_does_not(tmp_path):
    """The same child, running the commands instead of asking for their help, loads what they
    run: the finder Pyomo, SciPy and numba; ``verify`` networkx (it reads the instance before it
    finds the schedule file missing)."""
    ran = _help_in_a_child("finder", "--nodes", "6", "--degree", "2", "--json")
    assert {"pyomo", "scipy", "numba"} <= set(ran["roots"]) and '"frontier"' in ran["help"]
    read = _help_in_a_child("verify", str(tmp_path / "missing.json"), str(CORPUS / "ring8-allgather.toml"))
    assert "networkx" in read["roots"]


def test_the_light_names_are_the_registries_names():
    from collsynth.tens import choices, export, export_mscclpp, peer_schedules

    done = subprocess.run([sys.executable, "-c", "from collsynth.tens.choices import cost_model_names as n; print(list(n()))"],
                          capture_output=True, text=True, timeout=60)
    from collsynth.tens import cost_models

    assert json.loads(done.stdout.replace("'", '"')) == sorted(cost_models.all_names()) == list(choices.cost_model_names())
    assert peer_schedules.FORMATS == choices.PEER_SCHEDULE_FORMATS
    assert (export.DIALECTS, export.DEFAULT_DIALECT) == (choices.MSCCL_DIALECTS, choices.DEFAULT_MSCCL_DIALECT)
    assert export_mscclpp.MAX_THREADBLOCKS == choices.MAX_THREADBLOCKS


def test_a_mistyped_cost_model_is_still_answered_with_the_closest_name(capsys):
    from collsynth.solvers.cli import main

    assert main(["price", "s.json", "i.toml", "--model", "evnt"]) == 2
    assert "invalid choice: 'evnt' (did you mean 'event'?)" in capsys.readouterr().err
