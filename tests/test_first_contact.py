"""A newcomer's first commands: the README's main job writes where the user runs it and leaves
a fresh clone's ``git status`` clean; compiling is said once and kept out of the timings.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from collsynth.instances import CORPUS
from collsynth.solvers import compiling

REPO = Path(__file__).resolve().parent.parent


def _collsynth(cwd: Path, *argv: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "collsynth.solvers.cli", *argv], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=os.environ.copy())


def test_the_main_job_in_a_fresh_clone_leaves_git_status_clean(tmp_path):
    """``collsynth bench --suite quick`` (restricted to the ring producer) then ``collsynth
    tables`` in a fresh ``git clone``: everything is written under ./collsynth-results/ and
    ``git status --porcelain`` stays empty."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("no git, or the package is not a git checkout")
    clone = tmp_path / "clone"
    done = subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    bench = _collsynth(clone, "bench", "--suite", "quick", "--producers", "ring", "--time-limit", "20",
                       "--no-progress", "--json")
    assert bench.returncode == 0, bench.stderr[-2000:]
    assert json.loads(bench.stdout)["ran"] > 0
    tables = _collsynth(clone, "tables", "--json")
    assert tables.returncode == 0, tables.stderr[-2000:]
    written = [Path(p) for p in json.loads(tables.stdout)["written"]]
    assert written and all(p.parts[0] == "collsynth-results" for p in written)
    import sqlite3

    with sqlite3.connect(clone / "collsynth-results" / "store" / "runs.sqlite") as db:
        compile_s = [r[0] for r in db.execute("select compile_s from runs")]
    assert compile_s and all(s is not None and s >= 0 for s in compile_s)
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=clone,
                            capture_output=True, text=True, timeout=60)
    assert status.returncode == 0 and status.stdout == ""


def test_a_results_folder_named_by_the_user_is_used_as_given(tmp_path, monkeypatch, capsys):
    """``--store`` and ``--out`` elsewhere: written there, and no ``.gitignore`` is added to a
    folder the user named. The commands run in this process (the command line's ``main``), from
    ``tmp_path`` as the working folder; the fresh clone's test above runs them as processes."""
    from collsynth.solvers.cli import main

    monkeypatch.chdir(tmp_path)
    store, out = tmp_path / "mine" / "store", tmp_path / "mine" / "tables"
    assert main(["bench", "--instances", str(CORPUS / "ring8-allgather.toml"), "--producers", "ring",
                 "--store", str(store), "--no-progress", "--json"]) == 0, capsys.readouterr().err[-2000:]
    assert main(["tables", "--store", str(store), "--out", str(out), "--plots", str(tmp_path / "p"),
                 "--json"]) == 0, capsys.readouterr().err[-2000:]
    assert (out / "det_steps.md").exists() and not (tmp_path / "mine" / ".gitignore").exists()
    assert not (tmp_path / "collsynth-results").exists()


PROBE = """
import json, sys
from numba import njit
from collsynth.solvers import compiling

@njit(cache=False)
def twice(x):
    return 2 * x

twice(1)
twice(2.5)
print(json.dumps({"seen": compiling.compiled_in_this_process()}))
"""


def test_the_compile_notice_is_one_line_on_stderr_at_the_first_compile(tmp_path):
    """A process that compiles says :data:`~collsynth.solvers.compiling.NOTICE` once on
    stderr, whatever it compiles after; stdout carries none of it."""
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == {"seen": True}
    assert done.stderr.count(compiling.NOTICE) == 1


WARM_TWICE = """
import json, sys, time
from collsynth.solvers import compiling
cold = compiling.cache_is_cold()
compiling.compile_task("verify", combining=False) if sys.argv[1:] == ["verify"] else compiling.compile_kernels(False)
print(json.dumps({"compiled": compiling.compiled_in_this_process(), "cold": cold}))
"""


def test_kernels_compiled_once_are_loaded_from_the_disk_cache_by_the_next_process(tmp_path):
    """With an empty ``NUMBA_CACHE_DIR`` the first process compiles (and says so), the second
    compiles nothing and says nothing: the cache is reused across processes (the verifier's
    kernels, the group every run loads, whose index tells a cold cache: compiling every group
    afresh twice took a minute of CPU). Every group is cacheable: once this process has
    compiled or loaded them all, a child on the same cache compiles none."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache")}
    first = subprocess.run([sys.executable, "-c", WARM_TWICE, "verify"], capture_output=True, text=True, timeout=1200,
                           env=env)
    assert first.returncode == 0, first.stderr[-2000:]
    second = subprocess.run([sys.executable, "-c", WARM_TWICE, "verify"], capture_output=True, text=True, timeout=1200,
                            env=env)
    assert second.returncode == 0, second.stderr[-2000:]
    assert json.loads(first.stdout) == {"compiled": True, "cold": True} and compiling.NOTICE in first.stderr
    assert json.loads(second.stdout) == {"compiled": False, "cold": False} and compiling.NOTICE not in second.stderr
    compiling.compile_kernels(False)  # here, on this process's own cache (compiled once per machine)
    every = subprocess.run([sys.executable, "-c", WARM_TWICE], capture_output=True, text=True, timeout=1200)
    assert every.returncode == 0, every.stderr[-2000:]
    assert json.loads(every.stdout) == {"compiled": False, "cold": False} and compiling.NOTICE not in every.stderr


def test_a_row_records_compile_time_apart_from_its_run_times(monkeypatch):
    """``compile_s`` holds the time spent on the run's kernels before its clock, and no stage's
    time nor ``wall_s`` includes it: compiling is made to take 3 s here."""
    import time

    from collsynth.instances import load_instance
    from collsynth.solvers import pipeline

    def slow_compile(instance, producer):
        time.sleep(3.0)
        return compiling.Kernels(compiling.kernel_mode(instance), 3.0)

    instance = load_instance(CORPUS / "ring8-allgather.toml")
    pipeline.run(instance, "ring")  # the real kernels, once
    monkeypatch.setattr(pipeline, "prepare_run", slow_compile)
    t0 = time.perf_counter()
    row, schedule = pipeline.run(instance, "ring")
    outside = time.perf_counter() - t0 - 3.0  # the run's whole time but the 3 s of compiling
    assert schedule is not None and row["compile_s"] == 3.0
    assert row["wall_s"] <= outside and all(s <= outside for s in row["extra"]["stages_s"].values())


TYPO_TOML = """name = "t"
[topology]
generator = "torus"
dims = [4, 4]
bandwith = 1e9
[collective]
kind = "allgather"
"""


@pytest.mark.parametrize("argv, said", [
    (["solve", "{ring8}", "--producer", "rign"], "unknown producer 'rign' (did you mean 'ring'?)"),
    (["solve", "{ring8}", "--producer", "ten-ilp", "--solver", "higs"], "(did you mean 'highs'?)"),
    (["solve", "{ring8}", "--producer", "ten-ilp", "--driver", "horizn"], "(did you mean 'horizon'?)"),
    (["solve", "{ring8}", "--producer", "ten-ilp", "--param", "windw=3"], "(did you mean 'window'?)"),
    (["topology", "tors", "dims=4"], "unknown generator 'tors' (did you mean 'torus'?)"),
    (["topology", "torus", "dims=4", "bidirectonal=true"], "(did you mean 'bidirectional'?)"),
    (["instance", "{typo}"], "topology.bandwith: unknown parameter for generator 'torus' (did you mean 'bandwidth'?)"),
    (["price", "{ring8}", "{ring8}", "--model", "evnt"], "invalid choice: 'evnt' (did you mean 'event'?)"),
    (["solv", "{ring8}"], "invalid choice: 'solv' (did you mean 'solve'?)"),
])
def test_a_mistyped_name_is_answered_with_the_closest_one(tmp_path, capsys, argv, said):
    from collsynth.solvers.cli import main

    (tmp_path / "typo.toml").write_text(TYPO_TOML)
    names = {"ring8": str(CORPUS / "ring8-allgather.toml"), "typo": str(tmp_path / "typo.toml")}
    assert main([a.format(**names) for a in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and said in err[0], err


def test_a_cost_model_mistyped_in_the_api_is_answered_with_the_closest_one():
    from collsynth import InputError
    from collsynth.tens import cost_models

    with pytest.raises(InputError, match="did you mean 'event'"):
        cost_models.get("evnet")


def test_a_suite_s_drivers_run_only_where_the_selected_producers_take_them():
    """``bench --suite quick --producers ring,greedy``: the quick suite's ``horizon`` driver is no
    selected producer's, so each runs its own default; a driver the user names is still checked."""
    from collsynth import InputError
    from collsynth.solvers import batch as runner

    assert runner.suites()["quick"]["drivers"] == ["horizon"]
    _, jobs = runner.plan_batch("quick", producers=["ring", "greedy"])
    assert jobs and {j.producer for j in jobs} == {"ring", "greedy"} and {j.driver for j in jobs} == {""}
    with pytest.raises(InputError, match="no selected producer takes driver 'horizon'"):
        runner.plan_batch("quick", producers=["ring", "greedy"], drivers=["horizon"])


def test_every_command_s_help_ends_with_two_examples_of_itself_and_its_summary_is_the_registered_one():
    import argparse

    from collsynth.solvers.cli import COMMANDS, SUMMARIES, build_parser

    for names in COMMANDS.values():
        for name in names:
            (action,) = [a for a in build_parser(name)._actions if isinstance(a, argparse._SubParsersAction)]
            (summary,) = [c.help for c in action._choices_actions if c.dest == name]
            assert SUMMARIES[name] == summary, name
            tail = action.choices[name].format_help().rstrip().splitlines()[-3:]
            assert tail[0] == "examples:", (name, tail)
            assert all(line.startswith(f"  collsynth {name}") for line in tail[1:]), (name, tail)
    assert sorted(SUMMARIES) == sorted(n for names in COMMANDS.values() for n in names)


def test_the_top_level_help_imports_no_command_module():
    """``collsynth --help`` lists every command from their summaries alone (its cost is
    ``benchmarks/bench_help.py``'s)."""
    code = "\n".join([
        "import sys, contextlib, io",
        "from collsynth.solvers.cli import main",
        "out = io.StringIO()",
        "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):",
        "    main(['--help'])",
        "print(sorted(m for m in sys.modules if m.startswith('collsynth.solvers.cli.commands.')))",
        "print('solve' in out.getvalue() and 'examples:' in out.getvalue())",
    ])
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-2:] == ["[]", "True"]


def test_verbose_streams_the_solver_log_and_the_horizons_on_stderr_and_keeps_stdout_json(tmp_path):
    done = subprocess.run([sys.executable, "-m", "collsynth.solvers.cli", "solve", str(CORPUS / "torus4x4-allgather.toml"),
                           "--producer", "ten-ilp", "--param", "warm=false", "--verbose", "--json"],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    (row,) = json.loads(done.stdout)["rows"]
    assert row["found_by"].startswith("ilp@h=")
    assert "Running HiGHS" in done.stderr  # the solver's own log
    assert f"horizon {row['steps']}: optimal, complete" in done.stderr  # the driver's progress
