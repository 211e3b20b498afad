"""One verdict for one input: ``collsynth instance`` refuses exactly what ``solve`` refuses
(memory, sub-byte chunks), a schedule file that is malformed (ids outside its own header, a
step before 1) is bad input (exit 2, the file named) for every command that reads it, a
well-formed schedule that does not implement the collective is exit 1 "not verified", and a
topology error names its file."""

import json
from pathlib import Path

import pytest

from cli_errors import assert_one_error_line, run_cli
from collsynth.instances import CORPUS

TORUS = ('name = "t"\n[topology]\ngenerator = "torus"\ndims = [4, 4]\n[collective]\nkind = "allgather"\n'
         'chunks_per_node = {c}\nmessage_bytes = {m}\n')


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# (case, chunks_per_node, message_bytes, the field named, words the line must hold)
REFUSED = [
    # the conditions alone are too big (where only the explicit sends are, tree packing's trees
    # kept as trees still fit and `instance` says so: tests/test_instance_compact.py)
    ("memory", 1000000000, 10 ** 13, "collective.chunks_per_node", ["too big", "GiB"]),
    ("sub-byte-chunks", 1000000, 1 << 20, "collective.chunks_per_node", ["chunks of 0.0655 B", "at least 1 B"]),
    ("sub-byte-message", 1, 8, "collective.message_bytes", ["chunks of 0.5 B", "at least 1 B"]),
]


@pytest.mark.parametrize("case,c,m,field,words", REFUSED, ids=[r[0] for r in REFUSED])
def test_instance_refuses_what_solve_refuses_with_the_same_line(tmp_path, capsys, case, c, m, field, words):
    inst = write(tmp_path / "t.toml", TORUS.format(c=c, m=m))
    code, out, err = run_cli(["instance", inst, "--json"], capsys)
    assert code == 2 and out == "", err
    line = assert_one_error_line(err, [f"{inst}: {field}: "] + words)
    code, out, err = run_cli(["solve", inst, "--producer", "ring", "--json"], capsys)
    assert code == 2 and out == "", err
    assert assert_one_error_line(err, []) == line


def test_the_least_chunk_is_settable(tmp_path, capsys):
    inst = write(tmp_path / "t.toml", TORUS.format(c=1, m=1 << 20))  # chunks of 65,536 B
    code, out, err = run_cli(["instance", inst, "--min-chunk-bytes", "100000"], capsys)
    assert code == 2, err
    assert_one_error_line(err, [f"{inst}: collective.message_bytes", "chunks of 6.55e+04 B", "at least 100000 B"])
    code, out, err = run_cli(["instance", inst, "--min-chunk-bytes", "65536", "--json"], capsys)
    assert code == 0 and json.loads(out)["valid"], err
    code, out, err = run_cli(["instance", write(tmp_path / "s.toml", TORUS.format(c=4, m=1)),
                              "--min-chunk-bytes", "0", "--json"], capsys)
    assert code == 0, err  # a minimum of 0 lets a study of sub-byte chunks through
    code, out, err = run_cli(["instance", inst, "--min-chunk-bytes", "-1"], capsys)
    assert code == 2 and err.startswith("error: --min-chunk-bytes: "), err


@pytest.fixture(scope="module")
def ring8(tmp_path_factory):
    """The ring producer's verified allgather schedule on ring8 and the instance file."""
    from collsynth.solvers.cli import main

    root = tmp_path_factory.mktemp("ring8")
    out = root / "good.json"
    assert main(["solve", str(CORPUS / "ring8-allgather.toml"), "--producer", "ring", "--out", str(out)]) == 0
    return root


def mutated(ring8: Path, tmp_path: Path, name: str, change) -> Path:
    data = json.loads((ring8 / "good.json").read_text())
    change(data["sends"])
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    return path


# (case, how the first send is changed, exit code, words of the one error line or the violation)
SCHEDULES = [
    ("node-out-of-range", lambda s: s[0].__setitem__(4, 99), 2, ["sends[0]: dst", "node id in 0..7", "got 99"]),
    ("negative-node", lambda s: s[0].__setitem__(3, -1), 2, ["sends[0]: src", "node id in 0..7", "got -1"]),
    ("chunk-out-of-range", lambda s: s[0].__setitem__(0, 8), 2, ["sends[0]: chunk", "chunk id in 0..7", "got 8"]),
    ("negative-step", lambda s: s[0].__setitem__(5, -1), 2, ["sends[0]: step", "steps start at 1"]),
    ("no-such-link", lambda s: (s[0].__setitem__(3, 0), s[0].__setitem__(4, 4)), 1, ["no link 0->4"]),
    ("chunk-never-sent", lambda s: s.pop(), 1, ["not verified"]),
]
READERS = {
    "verify": ["verify", "{s}", "{i}"],
    "price": ["price", "{s}", "{i}"],
    "export": ["export", "{s}", "{i}", "--format", "json"],
}


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("case,change,code,words", SCHEDULES, ids=[s[0] for s in SCHEDULES])
def test_malformed_is_exit_2_with_the_file_and_wrong_is_exit_1(ring8, tmp_path, capsys, case, change, code, words,
                                                                 reader):
    sched = mutated(ring8, tmp_path, case, change)
    argv = [a.format(s=sched, i=CORPUS / "ring8-allgather.toml") for a in READERS[reader]]
    got, out, err = run_cli(argv, capsys)
    assert got == code, (out, err)
    if code == 2:
        assert out == ""
        assert_one_error_line(err, [f"{sched}: "] + words)
    else:
        assert err == "" and "verif" in out, (out, err)
        if reader == "verify":
            assert all(w in out for w in words), out


def test_a_disconnected_topology_file_is_named(tmp_path, capsys):
    csv = write(tmp_path / "two-pairs.csv", "src,dst\n0,1\n1,0\n2,3\n3,2\n")
    code, out, err = run_cli(["topology", csv], capsys)
    assert code == 2 and out == "", err
    assert_one_error_line(err, [f"{csv}: ", "disconnected topology", "node 0 cannot reach node 2"])
    inst = write(tmp_path / "i.toml", 'name = "i"\n[topology]\nfile = "two-pairs.csv"\n[collective]\nkind = "allgather"\n')
    for command in ("instance", "solve"):
        code, out, err = run_cli([command, inst, *(["--producer", "greedy"] if command == "solve" else [])], capsys)
        assert code == 2 and out == "", err
        assert_one_error_line(err, [f"{inst}: topology.file {csv}: disconnected topology"])


def test_the_cli_and_the_size_module_name_one_variable():
    from collsynth.instances import size
    from collsynth.solvers.cli import MIN_CHUNK_ENV

    assert MIN_CHUNK_ENV == size.MIN_CHUNK_ENV
