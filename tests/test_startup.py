"""Start-up of ``collsynth solve``: a command imports only what it runs.

The producer registry imports the one family its table names a producer in (the table is
checked against the modules) and otherwise looks in the families that use no solver first, and
the command line imports the module of its own command only (its table of each module's
commands is checked against the modules), so that ``collsynth solve --producer greedy`` (or a
closed form) loads neither Pyomo (with ``scipy.stats``, which Pyomo pulls in) nor pandas, and
``--producer bfb-lp`` loads no TEN formulation, TEN driver or greedy kernel: checked on the
modules a real ``collsynth solve`` leaves loaded, in a fresh child process. Kernels are loaded
before a run's clock starts, those of reductions only for an instance that combines: checked
on the compiled signatures of every kernel, in a fresh child process.
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


def test_each_family_with_a_table_entry_registers_the_producers_the_table_names():
    named = [name for names in registry.FAMILIES.values() if names is not None for name in names]
    for module, names in registry.FAMILIES.items():
        if names is not None:
            assert tuple(p.name for p in importlib.import_module(module).PRODUCERS) == names, module
    assert len(named) == len(set(named)) and set(named) < set(registry.producers())
    assert registry.lookup_order("greedy") == ("collsynth.solvers.greedy.tacos",)
    assert "collsynth.solvers.closed_form" in registry.lookup_order("ring")


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
    ours = sorted(m for m in sys.modules if m.startswith(("collsynth.solvers.", "collsynth.formulations.")))
    print(json.dumps({"code": code, "row": json.loads(out.getvalue())["rows"][0], "heavy": heavy, "ours": ours}))
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


def test_solve_with_bfb_lp_loads_no_other_family_and_no_formulation_but_bfb_s():
    got = _solve_in_a_child("solve", str(CORPUS / "ring8-allgather.toml"), "--producer", "bfb-lp", "--json")
    assert got["code"] == 0 and got["row"]["verified"]
    assert "collsynth.solvers.bfb.per_step" in got["ours"] and "collsynth.formulations.bfb_lp" in got["ours"]
    others = [m for m in got["ours"] if m.startswith(("collsynth.solvers.ten", "collsynth.solvers.greedy",
                                                      "collsynth.solvers.closed_form", "collsynth.formulations.ten"))]
    assert others == []
    assert "pyomo.core" in got["heavy"] and "pyomo.environ" not in got["heavy"]  # no solver plugin for HiGHS


BACKENDS_CHILD = textwrap.dedent("""
    import json, sys
    import pyomo.core as pe
    from collsynth.solvers import backends

    def knapsack():
        m = pe.ConcreteModel()
        m.x = pe.Var(range(3), domain=pe.Binary)
        m.c = pe.Constraint(expr=3 * m.x[0] + 4 * m.x[1] + 5 * m.x[2] <= 8)
        m.o = pe.Objective(expr=4 * m.x[0] + 5 * m.x[1] + 7 * m.x[2], sense=pe.maximize)
        return m

    name = sys.argv[1]
    got = {"highs": backends.solve(knapsack(), "highs").objective, "plugins": "pyomo.environ" in sys.modules}
    if name == "highs-session":
        got[name] = backends.solve(knapsack(), "highs", session=backends.Session("highs")).objective
    else:
        got[name] = backends.solve(knapsack(), name).objective if backends.available(name)[0] else "absent"
    print(json.dumps(got))
""")


@pytest.mark.parametrize("backend", ["highs-session", "cpsat", "gurobi", "glpk"])
def test_a_model_built_on_pyomo_core_alone_solves_on_a_backend_that_loads_pyomo_s_plugins_itself(backend):
    """In a process that never imported ``pyomo.environ``, the embedded HiGHS path needs no
    plugin; the others (Pyomo's v2 HiGHS session, Gurobi, the OR-Tools child fed an MPS file, a
    legacy solver such as glpk) load them. The optimum 11 (items 0 and 2) by hand."""
    done = subprocess.run([sys.executable, "-c", BACKENDS_CHILD, backend], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout)
    assert got["highs"] == 11 and got["plugins"] is False
    if got[backend] == "absent" and backend in ("gurobi", "glpk"):
        pytest.skip(f"{backend} is not installed here (the embedded HiGHS path above was checked)")
    assert got[backend] == 11


KERNELS_CHILD = textwrap.dedent("""
    import json, sys
    from numba.core.dispatcher import Dispatcher
    from collsynth.instances import load_instance
    from collsynth.solvers import compiling, pipeline
    from collsynth.solvers.producers import Options

    def loaded():
        return {f"{name}.{k}": len(v.signatures) for name, module in list(sys.modules.items())
                if name.startswith("collsynth.") for k, v in vars(module).items() if isinstance(v, Dispatcher)}

    instance, producer = load_instance(sys.argv[1]), sys.argv[2]
    kernels = compiling.prepare_run(instance, producer)
    warmed = loaded()
    row, _ = pipeline.run(instance, producer, Options(), kernels)
    after = loaded()
    print(json.dumps({"verified": row["verified"], "warmed": sorted(k for k, n in warmed.items() if n),
                      "on_the_clock": sorted(k for k, n in after.items() if n > warmed.get(k, 0))}))
""")


@pytest.mark.parametrize("instance, producer, combining", [
    ("ring8-allgather.toml", "bfb-lp", False),
    ("ring8-allgather.toml", "greedy", False),
    ("mesh3x3-reduce-scatter.toml", "ring", True),
    ("hypercube3-allreduce.toml", "greedy", True),
])
def test_a_run_loads_no_kernel_on_its_clock_and_reductions_only_for_a_combining_instance(instance, producer, combining):
    done = subprocess.run([sys.executable, "-c", KERNELS_CHILD, str(CORPUS / instance), producer],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout)
    assert got["verified"] and got["on_the_clock"] == []
    assert "collsynth.tens.verify_kernels.first_malformed" in got["warmed"]
    assert ("collsynth.tens.verify_kernels.simulate_combining" in got["warmed"]) == combining


def test_the_command_line_ends_after_its_exit_handlers_with_all_output_and_its_exit_code(tmp_path):
    """``run`` ends the process without the interpreter's teardown: the exit handlers still run
    (here one that writes a file and one that prints), everything printed arrives, and the exit
    code is main's: 0 for a solve, 2 for bad input."""
    marker = tmp_path / "handler-ran"
    instance = CORPUS / "ring8-allgather.toml"
    script = textwrap.dedent(f"""
        import atexit, sys
        from pathlib import Path
        from collsynth.solvers import cli
        atexit.register(lambda: Path({str(marker)!r}).write_text("yes"))
        atexit.register(lambda: print("handler printed", file=sys.stderr))
        sys.argv = ["collsynth", *sys.argv[1:]]
        cli.run()
        raise AssertionError("run() returned")
    """)
    done = subprocess.run([sys.executable, "-c", script, "solve", str(instance), "--producer", "ring", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["rows"][0]["verified"] is True
    assert "handler printed" in done.stderr and marker.read_text() == "yes"
    bad = subprocess.run([sys.executable, "-m", "collsynth.solvers.cli", "solve", str(tmp_path / "missing.toml"),
                          "--producer", "ring", "--json"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stdout == "" and bad.stderr.startswith("error: "), bad
