"""Bad inputs through the real CLI: exit code 2, exactly one stderr line ``error: <where>: <what>``
that names the file (for instance files) and the field."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collsynth import InputError
from cli_errors import assert_one_error_line, run_cli

GOOD_TOPOLOGY = 'generator = "ring"\nnodes = 6\n'
GOOD_COLLECTIVE = 'kind = "allgather"\n'


def instance_text(topology=GOOD_TOPOLOGY, collective=GOOD_COLLECTIVE, head='name = "t"\n', tail=""):
    return f"{head}[topology]\n{topology}\n[collective]\n{collective}\n{tail}"


# (id, instance file text, substrings the error line must contain besides the file name)
BAD_INSTANCES = [
    ("malformed-toml", 'name = "t"\n[topology\ngenerator = "ring"\n', ["malformed TOML", "line 2"]),
    ("unknown-top-key", instance_text(head='name = "t"\ncolour = "red"\n'), ["colour", "unknown key"]),
    ("missing-name", instance_text(head=""), ["name", "non-empty string"]),
    ("suites-not-list", instance_text(head='name = "t"\nsuites = "quick"\n'), ["suites"]),
    ("missing-topology", 'name = "t"\n[collective]\nkind = "allgather"\n', ["topology", "missing"]),
    ("unknown-generator", instance_text('generator = "ringg"\nnodes = 6\n'), ["topology.generator", "ringg"]),
    ("generator-not-string", instance_text("generator = 3\n"), ["topology.generator"]),
    ("unknown-parameter", instance_text('generator = "ring"\nnodes = 6\nsize = 3\n'), ["topology.size", "unknown parameter"]),
    ("missing-parameter", instance_text('generator = "torus"\n'), ["topology.dims", "needs parameter"]),
    ("wrong-type", instance_text('generator = "torus"\ndims = "a,b"\n'), ["topology.dims", "integer"]),
    ("wrong-type-bool", instance_text('generator = "ring"\nnodes = 6\nbidirectional = "maybe"\n'),
     ["topology.bidirectional", "true or false"]),
    ("bad-value", instance_text('generator = "ring"\nnodes = 1\n'), ["topology.nodes", ">= 2"]),
    ("negative-bandwidth", instance_text(GOOD_TOPOLOGY + "bandwidth = -1e9\n"), ["topology.bandwidth", "positive"]),
    ("string-bandwidth", instance_text(GOOD_TOPOLOGY + 'bandwidth = "fast"\n'), ["topology.bandwidth", "number"]),
    ("negative-alpha", instance_text(GOOD_TOPOLOGY + "alpha = -1e-6\n"), ["topology.alpha", "non-negative"]),
    ("disconnected", instance_text('generator = "mesh"\ndims = [3, 3]\nfailed_nodes = [1, 3]\n'),
     ["topology", "disconnected", "node 0"]),
    ("disconnected-circulant", instance_text('generator = "circulant"\nnodes = 8\noffsets = [2]\n'),
     ["topology.offsets", "disconnected"]),
    ("failed-node-out-of-range", instance_text(GOOD_TOPOLOGY + "failed_nodes = [6]\n"), ["topology.failed_nodes", "0..5"]),
    ("failed-nodes-not-ids", instance_text(GOOD_TOPOLOGY + 'failed_nodes = ["a"]\n'), ["topology.failed_nodes"]),
    ("failed-link-not-a-link", instance_text(GOOD_TOPOLOGY + "failed_links = [[0, 3]]\n"),
     ["topology.failed_links", "[0, 3]"]),
    ("failed-links-bad-shape", instance_text(GOOD_TOPOLOGY + "failed_links = [[0, 1, 2]]\n"),
     ["topology.failed_links", "[u, v]"]),
    ("generator-and-file", instance_text(GOOD_TOPOLOGY + 'file = "x.csv"\n'), ["topology", "not both"]),
    ("neither-generator-nor-file", instance_text("nodes = 6\n"), ["topology", "generator = NAME"]),
    ("missing-collective", 'name = "t"\n[topology]\n' + GOOD_TOPOLOGY, ["collective", "missing"]),
    ("unknown-kind", instance_text(collective='kind = "allscatter"\n'), ["collective.kind", "allscatter"]),
    ("missing-kind", instance_text(collective="chunks_per_node = 1\n"), ["collective.kind", "missing"]),
    ("missing-root", instance_text(collective='kind = "broadcast"\n'), ["collective.root", "needs a root"]),
    ("root-on-non-rooted-kind", instance_text(collective='kind = "allgather"\nroot = 0\n'), ["collective.root", "no root"]),
    ("root-on-failed-node", instance_text(GOOD_TOPOLOGY + "failed_nodes = [2]\n", 'kind = "gather"\nroot = 2\n'),
     ["collective.root", "failed"]),
    ("root-not-an-id", instance_text(collective='kind = "scatter"\nroot = "zero"\n'), ["collective.root", "node id"]),
    ("root-not-a-participant", instance_text(collective='kind = "reduce"\nroot = 5\nnodes = [0, 1, 2]\n'),
     ["collective.root", "not a live participating node"]),
    ("nodes-include-failed", instance_text(GOOD_TOPOLOGY + "failed_nodes = [4]\n", GOOD_COLLECTIVE + "nodes = [3, 4]\n"),
     ["collective.nodes", "node 4 has failed"]),
    ("zero-chunks", instance_text(collective=GOOD_COLLECTIVE + "chunks_per_node = 0\n"), ["collective.chunks_per_node"]),
    ("negative-message", instance_text(collective=GOOD_COLLECTIVE + "message_bytes = -8\n"), ["collective.message_bytes"]),
    ("unknown-collective-key", instance_text(collective=GOOD_COLLECTIVE + "source = 1\n"), ["collective.source", "unknown key"]),
    ("concurrent-second-bad", 'name = "t"\n[topology]\n' + GOOD_TOPOLOGY
     + '[[collective]]\nkind = "allgather"\n[[collective]]\nkind = "bogus"\n', ["collective[1].kind"]),
    ("unknown-expect-key", instance_text(tail="[expect]\noptimum = 3\n"), ["expect.optimum", "unknown key"]),
    ("expect-wrong-type", instance_text(tail='[expect]\noptimal_steps = "four"\n'), ["expect.optimal_steps", "int"]),
    ("unknown-distance-regular", instance_text('generator = "distance_regular"\nname = "petersen"\n'),
     ["topology.name", "petersen"]),
    ("nested-base-without-generator", instance_text('generator = "line_graph"\nbase = { nodes = 3 }\n'),
     ["topology.base.generator"]),
    ("missing-topology-file", instance_text('file = "graphs/none.csv"\n'), ["none.csv", "no such topology file"]),
    ("file-with-extra-key", instance_text('file = "g.csv"\nnodes = 4\n'), ["topology.nodes", "unknown key"]),
    ("bad-csv-row", instance_text('file = "g_bad.csv"\n'), ["g_bad.csv", "line 3", "bandwidth", "positive"]),
    ("bad-csv-header", instance_text('file = "g_nohead.csv"\n'), ["g_nohead.csv", "line 1", "header"]),
]


@pytest.mark.parametrize("case,text,must", BAD_INSTANCES, ids=[c[0] for c in BAD_INSTANCES])
def test_bad_instance_file(tmp_path, capsys, case, text, must):
    (tmp_path / "g.csv").write_text("src,dst\n0,1\n1,0\n")
    (tmp_path / "g_bad.csv").write_text("src,dst,bandwidth\n0,1,1e9\n1,0,-2\n")
    (tmp_path / "g_nohead.csv").write_text("0,1\n1,0\n")
    path = tmp_path / f"{case}.toml"
    path.write_text(text)
    for argv in (["instance", str(path)], ["instance", str(path), "--json"]):
        code, out, err = run_cli(argv, capsys)
        assert code == 2, err
        assert out == ""
        assert_one_error_line(err, [str(path)] + must)


def test_missing_instance_file(tmp_path, capsys):
    path = tmp_path / "absent.toml"
    code, out, err = run_cli(["instance", str(path)], capsys)
    assert code == 2 and out == ""
    assert_one_error_line(err, [str(path), "no such file"])


def test_zero_alpha_is_fine_but_the_same_file_with_negative_alpha_is_not(tmp_path, capsys):
    ok = tmp_path / "ok.toml"
    ok.write_text(instance_text(GOOD_TOPOLOGY + "alpha = 0.0\n"))
    code, out, err = run_cli(["instance", str(ok), "--json"], capsys)
    assert code == 0 and err == ""
    bad = tmp_path / "bad.toml"
    bad.write_text(instance_text(GOOD_TOPOLOGY + "alpha = -0.0001\n"))
    code, out, err = run_cli(["instance", str(bad), "--json"], capsys)
    assert code == 2
    assert_one_error_line(err, [str(bad), "topology.alpha"])


BAD_COMMANDS = [
    (["topology", "ringg", "nodes=4"], ["topology.generator", "ringg"]),
    (["topology", "ring", "nodes"], ["topology", "k=v"]),
    (["topology", "ring", "nodes=4", "nodes=5"], ["topology.nodes", "twice"]),
    (["topology", "ring"], ["topology.nodes", "needs parameter"]),
    (["topology", "torus", "dims=5,x"], ["topology.dims", "integer"]),
    (["topology", "ring", "nodes=4", "--bandwidth", "-3"], ["topology.bandwidth"]),
    (["topology", "ring", "nodes=4", "--alpha", "-1"], ["topology.alpha"]),
    (["topology", "ring", "nodes=6", "--failed-nodes", "a,b"], ["--failed-nodes"]),
    (["topology", "ring", "nodes=6", "--failed-nodes", "9"], ["--failed-nodes", "0..5"]),
    (["topology", "ring", "nodes=6", "--failed-links", "0:1"], ["--failed-links", "u-v"]),
    (["topology", "ring", "nodes=6", "--failed-links", "0-3"], ["--failed-links", "[0, 3]"]),
    (["topology", "ring", "nodes=6", "--failed-nodes", "1,4"], ["topology", "disconnected"]),
    (["topology", "line_graph", "base=kautz:degree"], ["topology.base", "k=v"]),
    (["topology", "line_graph", "base={bad json"], ["topology.base", "JSON"]),
    (["topology", "nothere.graphml"], ["nothere.graphml", "no such topology file"]),
    (["topologiez"], ["collsynth", "invalid choice"]),
]


@pytest.mark.parametrize("argv,must", BAD_COMMANDS, ids=[" ".join(a) for a, _ in BAD_COMMANDS])
def test_bad_command_lines(capsys, argv, must):
    code, out, err = run_cli(argv + ["--json"], capsys)
    assert code == 2 and out == ""
    assert_one_error_line(err, must)


def test_real_console_process(tmp_path):
    """The same contract through a child process (``python -m collsynth.solvers.cli``)."""
    path = tmp_path / "root.toml"
    path.write_text(instance_text(GOOD_TOPOLOGY + "failed_nodes = [2]\n", 'kind = "broadcast"\nroot = 2\n'))
    proc = subprocess.run([sys.executable, "-m", "collsynth.solvers.cli", "instance", str(path), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert_one_error_line(proc.stderr, [str(path), "collective.root"])


def test_enough_bad_inputs():
    assert len(BAD_INSTANCES) + len(BAD_COMMANDS) + 2 >= 30
    assert len(BAD_RUNS) >= 20


# ---- names and parameters: checked when parsed, before anything runs or is stored -------------

# (argv with {inst} for a good instance file and {store} for a fresh store, substrings of the line)
BAD_RUNS = [
    (["solve", "{inst}", "--producer", "ten-ilp", "--solver", "gurobii"],
     ["--solver", "unknown solver 'gurobii'", "did you mean 'gurobi'", "highs, gurobi, cpsat"]),
    (["solve", "{inst}", "--producer", "ring", "--solver", "gurobi"], ["--solver", "ring uses no solver"]),
    (["solve", "{inst}", "--producer", "rign"], ["--producer", "unknown producer 'rign'", "ring"]),
    (["solve", "{inst}", "--producer", "ten-ilp", "--driver", "horizn"],
     ["--driver", "'horizn'", "horizon, early-stop, time-cluster"]),
    (["solve", "{inst}", "--producer", "ring", "--driver", "horizon"], ["--driver", "drivers: none"]),
    (["solve", "{inst}", "--producer", "ten-ilp", "--param", "nonsense=1"],
     ["--param nonsense", "ten-ilp takes no parameter 'nonsense'", "window"]),
    (["solve", "{inst}", "--producer", "swing-bw", "--param", "multport=true"],
     ["--param multport", "swing-bw takes no parameter", "multiport"]),
    (["solve", "{inst}", "--producer", "swing-bw", "--param", "multiport=maybe"],
     ["--param multiport", "expected true or false, got 'maybe'"]),
    (["solve", "{inst}", "--producer", "ring", "--param", "window=3"], ["--param window", "parameters: none"]),
    (["solve", "{inst}", "--producer", "ten-ilp", "--param", "window=x"], ["--param window", "an integer", "'x'"]),
    (["solve", "{inst}", "--producer", "ten-ilp", "--param", "objective=fastest"],
     ["--param objective", "arrivals, makespan"]),
    (["solve", "{inst}", "--producer", "ten-ilp", "--param", "window=2", "--param", "window=3"],
     ["--param window", "given twice"]),
    (["solve", "{inst}", "--producer", "greedy", "--param", "timestep=soon"], ["--param timestep", "a number"]),
    (["solve", "{inst}", "--producer", "optree", "--param", "radices=4,x"], ["--param radices", "an integer"]),
    (["solve", "{inst}", "--producer", "bfb-lp", "--param", "orbit=sometimes"], ["--param orbit", "auto, true, false"]),
    (["bench", "--suite", "quik", "--store", "{store}"], ["--suite", "unknown suite 'quik'", "did you mean 'quick'"]),
    (["bench", "--suite", "expansion", "--store", "{store}"], ["--producers", "suite 'expansion' lists none"]),
    (["bench", "--instances", "{inst}", "--producers", "ten-ilp", "--solvers", "highs,gurobii", "--store", "{store}"],
     ["--solvers", "unknown solver 'gurobii'"]),
    (["bench", "--instances", "{inst}", "--producers", "ring,greedy", "--solvers", "gurobi", "--store", "{store}"],
     ["--solvers", "no selected producer uses a solver"]),
    (["bench", "--instances", "{inst}", "--producers", "ten-ilp,ring", "--drivers", "horizn", "--store", "{store}"],
     ["--drivers", "'horizn'", "early-stop, horizon, time-cluster"]),
    (["bench", "--instances", "{inst}", "--producers", "greedy,ring", "--param", "window=3", "--store", "{store}"],
     ["--param window", "no selected producer takes parameter 'window'"]),
    (["bench", "--instances", "{inst}", "--producers", "swing-bw,greedy", "--param", "multiport=maybe",
      "--store", "{store}"], ["--param multiport", "true or false"]),
    (["bench", "--instances", "{inst}", "--producers", "ring,rign", "--store", "{store}"],
     ["--producers", "unknown producer 'rign'"]),
]


@pytest.mark.parametrize("argv,must", BAD_RUNS, ids=[" ".join(a[:1] + a[2:]) for a, _ in BAD_RUNS])
def test_bad_names_and_parameters(tmp_path, capsys, argv, must):
    inst = tmp_path / "ring6.toml"
    inst.write_text(instance_text())
    store = tmp_path / "store"
    argv = [a.format(inst=inst, store=store) for a in argv]
    code, out, err = run_cli(argv + ["--json"], capsys)
    assert code == 2 and out == ""
    assert_one_error_line(err, must)
    assert not (store / "runs.sqlite").exists(), "nothing may run before the names are checked"


def test_unknown_solver_through_the_real_console_process(tmp_path):
    """Pyomo logs (with tracebacks) to stdout when asked for a solver it cannot create: the name
    is refused before Pyomo sees it, so stdout stays empty and stderr has one line."""
    inst = tmp_path / "ring6.toml"
    inst.write_text(instance_text())
    proc = subprocess.run([sys.executable, "-m", "collsynth.solvers.cli", "solve", str(inst), "--producer",
                           "ten-ilp", "--solver", "gurobii", "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert_one_error_line(proc.stderr, ["--solver", "gurobii"])


def test_a_solve_that_produced_nothing_exits_1_with_its_row(tmp_path, capsys):
    from collsynth.solvers.backends import available

    if available("cbc")[0]:
        pytest.skip("cbc is installed here")
    inst = tmp_path / "ring6.toml"
    inst.write_text(instance_text())
    code, out, err = run_cli(["solve", str(inst), "--producer", "ten-ilp", "--solver", "cbc", "--json"], capsys)
    (row,) = json.loads(out)["rows"]  # exactly one JSON object on stdout, one row in it
    assert code == 1
    assert row["status"] == "skipped" and row["message"] == "skipped: cbc not installed"
    assert row["verified"] is False and row["steps"] is None and row["driver"] == "horizon"


def test_library_chatter_on_stdout_never_reaches_the_json(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLLSYNTH_PRODUCERS", "faulty_producers")
    monkeypatch.syspath_prepend(str(Path(__file__).parent / "plugins"))
    inst = tmp_path / "ring6.toml"
    inst.write_text(instance_text())
    code, out, err = run_cli(["solve", str(inst), "--producer", "test-chatty-ring", "--json"], capsys)
    assert code == 0
    (row,) = json.loads(out)["rows"]
    assert row["verified"] and row["steps"] == 5  # the ring algorithm on 6 nodes: N - 1 steps
    assert "Traceback" not in out and "Traceback" in err


# ---- limits: non-finite costs, instances too big for the memory budget, schedules for another
# instance, stores that cannot be written ----------------------------------------------------

LIMIT_INSTANCES = [
    ("alpha-inf", instance_text(GOOD_TOPOLOGY + "alpha = inf\n"), ["topology.alpha", "finite"]),
    ("bandwidth-inf", instance_text(GOOD_TOPOLOGY + "bandwidth = inf\n"), ["topology.bandwidth", "finite"]),
    ("bandwidth-nan", instance_text(GOOD_TOPOLOGY + "bandwidth = nan\n"), ["topology.bandwidth", "finite"]),
    ("message-inf", instance_text(collective=GOOD_COLLECTIVE + "message_bytes = inf\n"), ["collective.message_bytes", "finite"]),
    # 40,000 nodes: the hop distances alone are 1.6e9 pairs (over 30 GiB)
    ("torus-200x200", instance_text('generator = "torus"\ndims = [200, 200]\n'), ["topology.dims", "too big", "40,000 nodes"]),
    # K(50, 5): 50^5 + 50^4 nodes
    ("kautz-50-5", instance_text('generator = "kautz"\ndegree = 50\ndiameter = 5\n'), ["topology.degree", "too big"]),
    # 6 x 10^10 chunk ids on 6 nodes: the pre/postconditions alone
    ("chunks-10e10", instance_text(collective=GOOD_COLLECTIVE + "chunks_per_node = 10000000000\n"),
     ["collective.chunks_per_node", "too big"]),
    # all-to-all on 4096 ranks has 4096^2 chunk ids (an allgather of the same ranks would fit)
    ("alltoall-64x64", instance_text('generator = "torus"\ndims = [64, 64]\n', 'kind = "alltoall"\n'),
     ["collective.kind", "too big"]),
]


@pytest.mark.parametrize("case,text,must", LIMIT_INSTANCES, ids=[c[0] for c in LIMIT_INSTANCES])
def test_instance_beyond_limits(tmp_path, capsys, case, text, must):
    path = tmp_path / f"{case}.toml"
    path.write_text(text)
    t0 = time.monotonic()
    code, out, err = run_cli(["instance", str(path), "--json"], capsys)
    assert code == 2 and out == ""
    assert_one_error_line(err, [str(path)] + must)
    assert time.monotonic() - t0 < 30  # refused from the parameters, nothing built


def test_a_run_beyond_memory_is_refused_naming_the_field(tmp_path, capsys):
    path = tmp_path / "c.toml"  # loads (36 x 10^6 chunk ids of 1 kB), but a schedule has 1.26 x 10^9 sends
    path.write_text(instance_text('generator = "torus"\ndims = [6, 6]\n', GOOD_COLLECTIVE + "chunks_per_node = 1000000\n"
                                  "message_bytes = 36000000000\n"))
    code, out, err = run_cli(["solve", str(path), "--producer", "greedy", "--json"], capsys)
    assert code == 2 and out == ""
    assert_one_error_line(err, [str(path), "collective.chunks_per_node", "too big", "1,260,000,000 sends"])
    # a TEN model of a 40x40 torus allgather is refused before it is built
    path = tmp_path / "t.toml"
    path.write_text(instance_text('generator = "torus"\ndims = [40, 40]\n'))
    code, out, err = run_cli(["solve", str(path), "--producer", "ten-ilp", "--json"], capsys)
    assert code == 2 and out == ""
    assert_one_error_line(err, [str(path), "topology.dims", "TEN model"])


def test_max_memory_budget(tmp_path, capsys):
    path = tmp_path / "r.toml"
    path.write_text(instance_text())
    code, out, err = run_cli(["instance", str(path), "--max-memory", "1k", "--json"], capsys)
    assert code == 2 and out == ""
    assert_one_error_line(err, [str(path), "topology.nodes", "--max-memory budget", "1.0 KiB"])
    code, out, err = run_cli(["instance", str(path), "--max-memory", "lots", "--json"], capsys)
    assert code == 2 and out == ""
    assert_one_error_line(err, ["--max-memory", "size"])
    code, out, err = run_cli(["instance", str(path), "--json"], capsys)  # the budget held for one command only
    assert code == 0 and err == ""


@pytest.fixture
def ring_schedule(tmp_path, capsys):
    inst = tmp_path / "ring.toml"
    inst.write_text(instance_text())
    sched = tmp_path / "ring.json"
    code, _, _ = run_cli(["solve", str(inst), "--producer", "ring", "--out", str(sched), "--json"], capsys)
    assert code == 0
    return inst, json.loads(sched.read_text())


HEADERS = [("chunks", 7, "expected 6"), ("nodes", 9, "expected 6"), ("collective", "broadcast", "expected 'allgather'"),
           ("collective", "reduce_scatter", "expected 'allgather'")]


@pytest.mark.parametrize("field,value,expected", HEADERS, ids=[f"{f}={v}" for f, v, _ in HEADERS])
@pytest.mark.parametrize("command", ["verify", "price", "export"])
def test_schedule_header_contradicting_the_instance(tmp_path, capsys, ring_schedule, field, value, expected, command):
    inst, data = ring_schedule
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**data, field: value}))
    code, out, err = run_cli([command, str(bad), str(inst), "--json"], capsys)
    assert code == 2 and out == ""
    assert_one_error_line(err, [f"{bad}: {field}", expected])


def make_read_only(path) -> bool:
    """Make ``path`` unwritable even for root (chmod, else chattr +i); False when impossible."""
    os.chmod(path, 0o555)
    try:
        (path / ".probe").touch()
    except OSError:
        return True
    (path / ".probe").unlink()
    return subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode == 0


def undo_read_only(path) -> None:
    subprocess.run(["chattr", "-i", str(path)], capture_output=True)
    os.chmod(path, 0o755)


def test_store_that_is_a_file_or_read_only(tmp_path, capsys):
    inst_dir = tmp_path / "inst"
    inst_dir.mkdir()
    (inst_dir / "r.toml").write_text(instance_text())
    pattern = str(inst_dir / "*.toml")
    afile = tmp_path / "afile"
    afile.write_text("x")
    for store in (afile, afile / "sub"):
        code, out, err = run_cli(["bench", "--no-progress", "--instances", pattern, "--producers", "ring",
                                  "--store", str(store), "--json"], capsys)
        assert code == 2 and out == ""
        assert_one_error_line(err, [str(store), "cannot write a results store", f"{afile} is a file"])
    code, out, err = run_cli(["tables", "--store", str(afile), "--json"], capsys)
    assert code == 2 and out == ""
    assert_one_error_line(err, [str(afile)])
    # a store on a read-only folder: tables read it; bench cannot write it and says where
    st = tmp_path / "store"
    code, _, _ = run_cli(["bench", "--no-progress", "--instances", pattern, "--producers", "ring", "--store", str(st)], capsys)
    assert code == 0
    if not make_read_only(st):
        pytest.skip("cannot make a folder read-only here")
    try:
        code, out, err = run_cli(["tables", "--store", str(st), "--out", str(tmp_path / "t"),
                                  "--plots", str(tmp_path / "p"), "--json"], capsys)
        assert code == 0 and json.loads(out)["runs"] == 1, err
        code, out, err = run_cli(["bench", "--no-progress", "--instances", pattern, "--producers", "greedy",
                                  "--store", str(st), "--json"], capsys)
        assert code == 2 and out == ""
        assert_one_error_line(err, [str(st), "cannot write a results store", "cannot be written"])
    finally:
        undo_read_only(st)


def test_a_timestep_that_would_split_a_hop_into_more_than_a_million_timesteps_is_refused(tmp_path, capsys):
    """1e-30 s on a ring of 1 us hops would make each hop 1e24 timesteps (the run used to allocate
    until the machine ran out of memory); 1e-9 s (a few thousand per hop) is fine."""
    inst = tmp_path / "r.toml"
    inst.write_text(instance_text())
    for argv in (["solve", str(inst), "--producer", "greedy", "--param", "timestep=1e-30", "--json"],
                 ["solve", str(inst), "--producer", "ten-ilp", "--param", "timestep=1e-30", "--json"]):
        code, out, err = run_cli(argv, capsys)
        assert code == 2 and out == ""
        assert_one_error_line(err, ["timestep", "expected at most 1,048,576", "a timestep of at least"])
    code, out, err = run_cli(["solve", str(inst), "--producer", "greedy", "--param", "timestep=1e-9", "--json"], capsys)
    assert code == 0 and json.loads(out)["rows"][0]["verified"], err


def _refuse(where):
    raise InputError(where, "expected something else")


def test_a_workers_input_error_reaches_the_parent_whole():
    """A process pool pickles a worker's exception to its parent: an InputError must survive the
    trip with its file and field (it used to fail to unpickle and break the pool)."""
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1) as pool:
        with pytest.raises(InputError) as caught:
            pool.submit(_refuse, "runs.sqlite").result()
    assert (caught.value.where, caught.value.what) == ("runs.sqlite", "expected something else")
