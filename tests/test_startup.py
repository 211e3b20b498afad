"""Start-up of ``collsynth solve``: a command imports only what it runs.

The producer registry looks a producer up in the families that use no solver first, and the
command line imports the module of its own command only (its table of each module's commands
is checked against the modules), so that ``collsynth solve --producer greedy`` (or a closed
form) loads neither Pyomo (with ``scipy.stats``, which Pyomo pulls in) nor pandas: checked on
the modules a real ``collsynth solve`` leaves loaded, in a fresh child process.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from collsynth import InputError
from collsynth.instances import CORPUS
from collsynth.solvers import producers as registry
from collsynth.solvers.cli import COMMANDS, build_parser

def test_each_command_module_adds_the_commands_the_table_names():
    for module, names in COMMANDS.items():
        parser = argparse.ArgumentParser()
        importlib.import_module(module).register(parser.add_subparsers())
        (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        assert tuple(action.choices) == names, module


def test_a_command_s_parser_holds_its_own_group_and_no_command_holds_them_all():
    def commands(parser):
        (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        return set(action.choices)

    assert commands(build_parser("solve")) == {"solve"}
    assert commands(build_parser("verify")) == {"verify", "price", "export", "show"}
    every = {name for names in COMMANDS.values() for name in names}
    assert commands(build_parser()) == every == commands(build_parser("no-such-command"))


def test_get_finds_a_plug_in_s_producer_and_names_every_producer_for_an_unknown_one(monkeypatch):
    """A plug-in's producer (``COLLSYNTH_PRODUCERS``) is found; an unknown name lists every
    producer, the built-in families' and the plug-in's."""
    monkeypatch.setenv("COLLSYNTH_PRODUCERS", "wrong_producers")
    monkeypatch.syspath_prepend(str(Path(__file__).parent / "plugins"))
    assert registry.get("test-invalid-ring").family == "test"
    with pytest.raises(InputError) as e:
        registry.get("no-such-producer")
    assert "greedy" in str(e.value) and "ten-ilp" in str(e.value) and "test-invalid-ring" in str(e.value)


CHILD = textwrap.dedent("""
    import contextlib, io, json, sys
    from collsynth.solvers.cli import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(sys.argv[1:])
    heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("pyomo", "pandas", "highspy")
                   or m.startswith(("scipy.stats", "scipy.optimize")))
    print(json.dumps({"code": code, "row": json.loads(out.getvalue()), "heavy": heavy}))
""")


def _solve_in_a_child(*argv: str) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, *argv], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("producer", ["greedy", "ring"])
def test_solve_with_a_greedy_or_closed_form_producer_loads_no_pyomo_pandas_or_scipy_stats(producer):
    got = _solve_in_a_child("solve", str(CORPUS / "ring8-allgather.toml"), "--producer", producer, "--json")
    assert got["code"] == 0 and got["row"]["verified"] and got["row"]["time_event_s"] is not None
    assert got["heavy"] == []


def test_solve_with_a_solver_based_producer_loads_pyomo():
    """The check above can fail: a producer that uses a solver does load Pyomo."""
    got = _solve_in_a_child("solve", str(CORPUS / "ring8-allgather.toml"), "--producer", "bfb-lp", "--json")
    assert got["code"] == 0 and got["row"]["verified"]
    assert "pyomo" in got["heavy"]
