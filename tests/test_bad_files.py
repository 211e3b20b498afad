"""Bad files through the real CLI: text that is not UTF-8, folders given as files, schedule
JSON with values no column holds, topology files asking for a billion node ids, TOML values of
the wrong type, and peer-reader options the reader does not take. Each gets exit code 2 and
exactly one stderr line ``error: <where>: <what>`` naming the file (or option) and the field."""

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from cli_errors import assert_one_error_line, run_cli

PEERS = Path(__file__).parent / "data" / "peers"
RING4 = 'name = "ring4"\n[topology]\ngenerator = "ring"\nnodes = 4\n[collective]\nkind = "allgather"\n'
# a ring allgather on 4 nodes: each node passes chunks to the next one, one hop a step
RING4_SENDS = [[(n - k) % 4, "0", "1", n, (n + 1) % 4, k + 1] for k in range(3) for n in range(4)]


def run_json(argv, capsys):
    """``collsynth argv --json``: (exit code, stdout, stderr)."""
    return run_cli(argv + ["--json"], capsys)


def assert_refused(code, out, err, must):
    """Exit 2, nothing on stdout, one stderr line ``error: ...`` holding every string of ``must``."""
    assert code == 2, err
    assert out == ""
    return assert_one_error_line(err, must)


@pytest.fixture
def ring4(tmp_path):
    path = tmp_path / "ring4.toml"
    path.write_text(RING4)
    return path


def schedule_data(**changes):
    data = {"format": "collsynth.schedule/1", "collective": "allgather", "nodes": 4, "chunks": 4,
            "sends": [list(s) for s in RING4_SENDS]}
    data.update(changes)
    return data


def test_the_good_schedule_verifies(tmp_path, capsys, ring4):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(schedule_data()))
    code, out, err = run_json(["verify", str(path), str(ring4)], capsys)
    assert code == 0 and json.loads(out)["verified"], err


# ---- text that is not UTF-8 ------------------------------------------------------------------

LATIN1 = 'name = "caf\u00e9"\n'.encode("latin-1")  # byte 0xe9 at offset 11
BINARY = b"\x89PNG\r\n\x1a\n\x00\x00"  # byte 0x89 at offset 0


@pytest.mark.parametrize("data,byte", [(LATIN1, "byte 0xe9 at offset 11"), (BINARY, "byte 0x89 at offset 0")],
                         ids=["latin-1", "binary"])
@pytest.mark.parametrize("kind", ["instance", "schedule", "topology-csv", "teccl", "taccl", "msccl", "sketch"])
def test_files_that_are_not_utf8(tmp_path, capsys, ring4, kind, data, byte):
    suffix = {"instance": ".toml", "topology-csv": ".csv"}.get(kind, ".json")
    bad = tmp_path / f"bad{suffix}"
    bad.write_bytes(data)
    argv = {
        "instance": ["instance", str(bad)],
        "schedule": ["verify", str(bad), str(ring4)],
        "topology-csv": ["topology", str(bad)],
        "teccl": ["instance", str(bad), "--from", "teccl"],
        "taccl": ["instance", str(bad), "--from", "taccl"],
        "msccl": ["instance", str(bad), "--from", "msccl"],
        "sketch": ["instance", str(PEERS / "taccl-topo-ndv2-1MB.json"), "--from", "taccl", "--peer", f"sketch={bad}"],
    }[kind]
    line = assert_refused(*run_json(argv, capsys), [str(bad), f"expected UTF-8 text ({byte})"])
    assert line.count(str(bad)) == 1


def test_a_byte_order_mark_is_utf8(tmp_path, capsys):
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + RING4.encode())
    code, out, err = run_json(["instance", str(path)], capsys)
    assert code == 0, err


# ---- folders given as files ------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["schedule", "instance", "msccl"])
def test_a_folder_given_as_a_file(tmp_path, capsys, ring4, kind):
    folder = tmp_path / ("dir.json" if kind != "instance" else "dir.toml")
    folder.mkdir()
    argv = {"schedule": ["verify", str(folder), str(ring4)], "instance": ["instance", str(folder)],
            "msccl": ["instance", str(folder), "--from", "msccl"]}[kind]
    line = assert_refused(*run_json(argv, capsys), [str(folder), "cannot read"])
    assert line.count(str(folder)) == 1  # named once, not "dir: dir: ..."


# ---- schedule JSON -----------------------------------------------------------------------------

def send_with(index, value):
    sends = [list(s) for s in RING4_SENDS]
    sends[0][index] = value
    return sends


BIG = 10**30
BAD_SCHEDULES = [
    ("chunk-10e30", {"sends": send_with(0, BIG)}, ["sends[0]", "chunk", "64 bits"]),
    ("step-10e30", {"sends": send_with(5, BIG)}, ["sends[0]", "step", "64 bits"]),
    ("src-10e30", {"sends": send_with(3, -BIG)}, ["sends[0]", "src", "64 bits"]),
    ("nodes-10e30", {"nodes": BIG}, ["nodes", "count"]),
    ("meta-list", {"meta": [1]}, ["meta", "expected an object"]),
    ("meta-string", {"meta": "x"}, ["meta", "expected an object"]),
    ("unknown-op", {"sends": RING4_SENDS[:1] + [RING4_SENDS[1] + ["teleport"]]}, ["sends[1]", "op", "'teleport'"]),
    ("op-not-a-string", {"sends": [RING4_SENDS[0] + [[1]]]}, ["sends[0]", "op"]),
    ("exponent", {"sends": send_with(1, "1e-999999999")}, ["sends[0]", "lo", "fraction"]),
    ("denominators", {"sends": [[0, "0", f"1/{p}", 0, 1, 1] for p in (1000000007, 998244353, 1000000009)]},
     ["sends[2]", "common denominator"]),
]


@pytest.mark.parametrize("case,changes,must", BAD_SCHEDULES, ids=[c[0] for c in BAD_SCHEDULES])
@pytest.mark.parametrize("command", ["verify", "price"])
def test_bad_schedule_json(tmp_path, capsys, ring4, command, case, changes, must):
    path = tmp_path / f"{case}.json"
    path.write_text(json.dumps(schedule_data(**changes)))
    assert_refused(*run_json([command, str(path), str(ring4)], capsys), [f"{path}: "] + must)


def test_a_huge_value_is_not_echoed_whole(tmp_path, capsys, ring4):
    path = tmp_path / "frac.json"
    path.write_text(json.dumps(schedule_data(sends=send_with(2, "1" + "0" * 5000 + "/" + "3" * 5000))))
    line = assert_refused(*run_json(["verify", str(path), str(ring4)], capsys), [str(path), "sends[0]", "hi", "..."])
    assert len(line) < 250 + len(str(path))


# ---- topology files with absurd node ids -----------------------------------------------------

def limited_cli(argv, cwd):
    """The console in a child process that cannot allocate more than 3 GB (an id of a billion
    must be refused, not built)."""
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    proc = subprocess.run([sys.executable, "-m", "collsynth.solvers.cli", *argv, "--json"], cwd=cwd,
                          capture_output=True, text=True, timeout=120, preexec_fn=cap)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("text,where", [
    ("src,dst\n0,1000000000\n1000000000,0\n", "line 2: dst"),
    ("# nodes = 1000000000\nsrc,dst\n0,1\n1,0\n", "line 1: nodes"),
    ("# failed_nodes = 999999999\nsrc,dst\n0,1\n1,0\n", "line 1: failed_nodes"),
], ids=["link", "nodes-setting", "failed-nodes-setting"])
def test_sparse_node_ids_are_refused(tmp_path, text, where):
    (tmp_path / "huge.csv").write_text(text)
    code, out, err = limited_cli(["topology", "huge.csv"], tmp_path)
    assert_refused(code, out, err, ["huge.csv", where, "node ids must be dense", "renumber"])
    (tmp_path / "inst.toml").write_text('name = "x"\n[topology]\nfile = "huge.csv"\n[collective]\nkind = "allgather"\n')
    code, out, err = limited_cli(["instance", "inst.toml"], tmp_path)
    assert_refused(code, out, err, ["inst.toml", "huge.csv", where, "node ids must be dense"])


def test_a_few_unused_ids_are_not_refused_as_sparse(tmp_path, capsys):
    path = tmp_path / "gap.csv"  # ids 0, 1 and a failed 5: within the dense limit
    path.write_text("# failed_nodes = 5\nsrc,dst\n0,1\n1,0\n")
    code, out, err = run_json(["topology", str(path)], capsys)
    line = assert_refused(code, out, err, ["disconnected"])  # ids 2..4 are isolated NPUs
    assert "dense" not in line


# ---- instance TOML ------------------------------------------------------------------------------

def instance_text(topology='generator = "ring"\nnodes = 4\n', collective='kind = "allgather"\n', head='name = "t"\n'):
    return f"{head}[topology]\n{topology}[collective]\n{collective}"


BAD_TOML = [
    ("duplicate-participant", instance_text(collective='kind = "allgather"\nnodes = [0, 1, 1]\n'),
     ["collective.nodes", "node 1 is listed twice"]),
    ("bidirectional-string", instance_text('generator = "ring"\nnodes = 4\nbidirectional = "no"\n'),
     ["topology.bidirectional", "true or false", "'no'"]),
    ("bidirectional-string-true", instance_text('generator = "ring"\nnodes = 4\nbidirectional = "true"\n'),
     ["topology.bidirectional", "true or false"]),
    ("offsets-string", instance_text('generator = "circulant"\nnodes = 8\noffsets = "1,2"\n'),
     ["topology.offsets", "array of integers", "'1,2'"]),
    ("dims-string", instance_text('generator = "torus"\ndims = "4,4"\n'), ["topology.dims", "array of integers"]),
    ("nodes-string", instance_text('generator = "ring"\nnodes = "4"\n'), ["topology.nodes", "an integer"]),
    ("bandwidth-string", instance_text('generator = "ring"\nnodes = 4\nbandwidth = "1e9"\n'),
     ["topology.bandwidth", "a number"]),
    ("file-bandwidth-string", instance_text('file = "g.csv"\nbandwidth = "1e9"\n'), ["topology.bandwidth", "a number"]),
    ("nested-string", instance_text('generator = "line_graph"\nbase = { generator = "ring", nodes = "4" }\n'),
     ["topology.base.nodes", "an integer"]),
    ("base-string", instance_text('generator = "line_graph"\nbase = "ring:nodes=4"\n'), ["topology.base", "a table"]),
    ("description-int", instance_text(head='name = "t"\ndescription = 5\n'), ["description", "a string"]),
    ("collective-name-int", instance_text(collective='kind = "allgather"\nname = 5\n'), ["collective.name", "a string"]),
]


@pytest.mark.parametrize("case,text,must", BAD_TOML, ids=[c[0] for c in BAD_TOML])
def test_bad_toml_values(tmp_path, capsys, case, text, must):
    (tmp_path / "g.csv").write_text("src,dst\n0,1\n1,0\n")
    path = tmp_path / f"{case}.toml"
    path.write_text(text)
    assert_refused(*run_json(["instance", str(path)], capsys), [str(path)] + must)


def test_toml_values_of_their_own_type_still_read(tmp_path, capsys):
    path = tmp_path / "ok.toml"
    path.write_text(instance_text('generator = "ring"\nnodes = 4\nbidirectional = false\n', head='name = "t"\ndescription = "d"\n'))
    code, out, err = run_json(["instance", str(path)], capsys)
    assert code == 0 and json.loads(out)["topology"]["links"] == 4, err
    path.write_text(instance_text('generator = "line_graph"\nbase = { generator = "kautz", degree = 2, diameter = 2 }\n'))
    code, out, err = run_json(["instance", str(path)], capsys)
    assert code == 0, err


@pytest.mark.parametrize("param", ["dims=4,,4", "dims=4,4,", "dims="])
def test_empty_elements_on_the_command_line(capsys, param):
    assert_refused(*run_json(["topology", "torus", param], capsys), ["topology.dims", "empty element"])


def test_command_line_strings_are_still_parsed(capsys):
    code, out, err = run_json(["topology", "ring", "nodes=4", "bidirectional=no"], capsys)
    assert code == 0 and json.loads(out)["links"] == 4, err
    code, out, err = run_json(["topology", "line_graph", "base=kautz:degree=2:diameter=2", "--bandwidth", "1e9"], capsys)
    assert code == 0, err


# ---- peer readers' options --------------------------------------------------------------------

BAD_PEER_OPTIONS = [
    ("teccl-mesh.json", "teccl", ["nodes=3"], ["--peer nodes", "teccl reader", "takes none"]),
    ("taccl-topo-ndv2-1MB.json", "taccl", ["colour=red"], ["--peer colour", "chunk_bytes", "sketch"]),
    ("msccl-line3.json", "msccl", ["path=x"], ["--peer path", "message_bytes"]),
    ("msccl-line3.json", "msccl", ["nodes=0"], ["msccl-line3.json", "--peer nodes", ">= 2"]),
    ("msccl-line3.json", "msccl", ["nodes=5"], ["msccl-line3.json", "--peer nodes", "3 nodes"]),
    ("msccl-line3.json", "msccl", ["unwind=-1"], ["msccl-line3.json", "--peer unwind", ">= 0"]),
    ("msccl-line3.json", "msccl", ["alpha=-1e-6"], ["msccl-line3.json", "--peer alpha", ">= 0"]),
    ("msccl-line3.json", "msccl", ["bandwidth=inf"], ["msccl-line3.json", "--peer bandwidth", "finite"]),
    ("taccl-topo-ndv2-1MB.json", "taccl", ["chunk_bytes=0"], ["taccl-topo-ndv2-1MB.json", "--peer chunk_bytes", "> 0"]),
    ("taccl-topo-ndv2-1MB.json", "taccl", ["time_unit_s=nan"], ["--peer time_unit_s", "> 0"]),
    ("taccl-topo-ndv2-1MB.json", "taccl", ["nodes=0"], ["--peer nodes", ">= 1"]),
    ("taccl-topo-dgx2-1MB.json", "taccl", ["unwind=-2"], ["--peer unwind", ">= 0"]),
]


@pytest.mark.parametrize("name,fmt,options,must", BAD_PEER_OPTIONS, ids=[f"{f}-{o[0]}" for _, f, o, _ in BAD_PEER_OPTIONS])
def test_bad_peer_options(capsys, name, fmt, options, must):
    argv = ["instance", str(PEERS / name), "--from", fmt]
    for o in options:
        argv += ["--peer", o]
    assert_refused(*run_json(argv, capsys), must)


def test_named_msccl_topology_nodes_checked(capsys):
    assert_refused(*run_json(["instance", "Ring", "--from", "msccl", "--peer", "nodes=1"], capsys),
                   ["Ring", "--peer nodes", ">= 2"])
    code, out, err = run_json(["instance", "Ring", "--from", "msccl", "--peer", "nodes=4"], capsys)
    assert code == 0, err
