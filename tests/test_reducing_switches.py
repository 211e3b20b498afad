"""Switches that reduce and multicast (NVLink SHARP, InfiniBand SHARP): declared per switch in
the topology, read by the verifier (each group operation's arrivals leave as one partial sum,
each contributor counted once), priced by every cost model, refused on GPUs.

The schedules here are written by hand: an allreduce on four GPUs around one switch whose
chunk ``c`` goes up from every GPU, is summed in the switch and multicast back (two steps), or
NVLS's load-reduce / multicast-store shape (four steps)."""

from __future__ import annotations

import subprocess
import sys
from fractions import Fraction

import pytest

from collsynth import InputError
from collsynth.instances.files import read_topology, write_topology
from collsynth.instances.generators import build
from collsynth.instances.instance import instance_from_dict, make_instance
from collsynth.instances.switch_ops import copying_mask, reducing_mask, switch_reductions
from collsynth.tens.cost_models import price
from collsynth.tens.schedule import from_sends
from collsynth.tens.verify import verify
from cli_errors import run_cli

N, W, M, B = 4, 4, 1e9, 100e9  # four GPUs, the switch's id, 1 GB, the default link bandwidth


def box(reduce=True, copy=True):
    return make_instance(build("switch", {"nodes": N, "reduce": reduce, "copy": copy}), "allreduce", message_bytes=M)


def summed_multicast(pieces: int = 1):
    """Chunk c, piece p: every GPU sends it up in step p + 1, the switch multicasts the sum in step p + 2."""
    out = []
    for p in range(pieces):
        lo, hi = Fraction(p, pieces), Fraction(p + 1, pieces)
        out += [(c, lo, hi, j, W, p + 1, "reduce") for c in range(N) for j in range(N)]
        out += [(c, lo, hi, W, j, p + 2, "copy") for c in range(N) for j in range(N)]
    return out


def load_reduce_store():
    """NVLS: chunk c's owner receives the others' sum (step 2), adds its own, stores it back
    up (step 3) and the switch multicasts it to the others (step 4)."""
    out = []
    for c in range(N):
        out += [(c, 0, 1, j, W, 1, "reduce") for j in range(N) if j != c]
        out += [(c, 0, 1, W, c, 2, "reduce"), (c, 0, 1, c, W, 3, "copy")]
        out += [(c, 0, 1, W, j, 4, "copy") for j in range(N) if j != c]
    return out


def check(sends, inst=None):
    return verify(from_sends(sends, "allreduce", N + 1, 1), inst or box())


def test_the_declaration_is_read_back_from_every_file_format(tmp_path):
    t = build("switch", {"nodes": N, "reduce": True, "copy": True})
    for suffix in (".json", ".graphml", ".csv"):
        back = read_topology(write_topology(t, tmp_path / f"t{suffix}") or tmp_path / f"t{suffix}")
        assert switch_reductions(back) == {W: ("sum",)}, suffix
        assert copying_mask(back, False).tolist() == [False] * N + [True], suffix


def test_generators_declare_nvls_and_sharp():
    t = build("dgx_h100", {"nodes": 2, "nvls": True})
    assert sorted(switch_reductions(t)) == [16, 17]  # the two NVSwitches (GPUs 0..15), not the rails
    t = build("dgx_h100", {"nodes": 2, "nvls": True, "sharp": True})
    assert sorted(switch_reductions(t)) == list(range(16, 26))
    assert not reducing_mask(build("dgx_h100", {"nodes": 2})).any()
    with pytest.raises(InputError, match="unwind_nvswitch = 0"):
        build("dgx_h100", {"nodes": 1, "nvls": True, "unwind_nvswitch": 2})


def test_both_shapes_verify_and_their_mutants_do_not():
    assert check(summed_multicast()) is None
    assert check(load_reduce_store()) is None
    missing = [s for s in summed_multicast() if (s[0], s[3], s[4]) != (0, 1, W)]
    assert "missing contributions of ranks [1]" in str(check(missing))
    twice = summed_multicast() + [(0, 0, 1, 1, W, 1, "reduce")]
    assert "counted twice at node switch 4 (its partial sum of step 1)" in str(check(twice))
    # GPU 2 sends its part of chunk 1 where chunk 0's belongs: the switch would add 2 twice into chunk 1's sum
    mixed = [(1, *s[1:]) if (s[0], s[3], s[4]) == (0, 2, W) else s for s in summed_multicast()]
    assert "counted twice" in str(check(mixed)) and "switch 4" in str(check(mixed))
    # the owner's own contribution added again: its result comes back as a reduce, not a copy
    again = [(*s[:6], "reduce") if s[3] == W and s[5] == 2 else s for s in summed_multicast()]
    assert "counted twice at node" in str(check(again))


def test_a_switch_that_does_not_reduce_or_copy_refuses_the_schedule():
    v = check(summed_multicast(), box(reduce=False, copy=True))
    assert v is not None and "missing contributions" in v.reason
    v = check(summed_multicast(), box(reduce=True, copy=False))
    assert v is not None and v.step == 2 and "more than once (it does not multicast)" in v.reason


def test_a_partial_sum_is_not_stored_for_a_later_step():
    late = [(*s[:5], 3, s[6]) if (s[0], s[3], s[4]) == (0, W, 0) else s for s in summed_multicast()]
    v = check(late)
    assert v is not None and v.step == 3


@pytest.mark.parametrize("model", ["sync", "ten", "event", "event-inorder"])
def test_every_model_prices_the_summed_multicast_near_m_over_b(model):
    """Each GPU link carries M up and M down: M / B = 10 ms at 100 GB/s is the least; 64
    pipelined pieces cost (64 + 1) steps of M / (64 B) under the step models; the events
    model (each link serving what is ready first) and the in-order one pipeline as well."""
    inst = box()
    s = from_sends(summed_multicast(64), "allreduce", N + 1, 1)
    assert verify(s, inst) is None
    t = price(s, inst, model).total_s
    if model == "ten":  # one chunk per link per timestep: M / N per link and timestep
        return
    assert M / B <= t <= (65 / 64) * M / B + 200 * 0.5e-6


def test_a_reduction_declared_on_a_gpu_is_one_line_naming_the_field(tmp_path):
    f = tmp_path / "t.json"
    write_topology(build("switch", {"nodes": 3}), f)
    f.write_text(f.read_text().replace('"id": 1', '"reduce": true, "id": 1'))
    with pytest.raises(InputError, match=r"t.json: nodes\[1\] field reduce"):
        read_topology(f)
    toml = tmp_path / "i.toml"
    toml.write_text('name = "x"\n[topology]\ngenerator = "switch"\nnodes = 3\nreduce = [1]\n'
                    '[collective]\nkind = "allreduce"\n')
    run = subprocess.run([sys.executable, "-m", "collsynth.solvers.cli", "instance", str(toml)], capture_output=True,
                         text=True)
    assert run.returncode == 2 and "topology.reduce" in run.stderr and len(run.stderr.strip().splitlines()) == 1


def test_a_reduction_the_collective_does_not_use_is_refused(tmp_path):
    g = tmp_path / "t.graphml"
    write_topology(build("switch", {"nodes": 3, "reduce": True}), g)
    g.write_text(g.read_text().replace(">sum<", ">max<"))
    data = {"name": "x", "topology": {"file": "t.graphml"}, "collective": {"kind": "allreduce"}}
    with pytest.raises(InputError, match=r"t.graphml: node 3 field reduce"):
        instance_from_dict(data, base_dir=tmp_path)
    data["collective"] = {"kind": "allgather"}  # a switch that takes maxima is no matter to an allgather
    assert instance_from_dict(data, base_dir=tmp_path).collective.kind == "allgather"


def test_a_reduction_the_collective_does_not_use_exits_2_in_one_line(tmp_path):
    """The same refusal through the command line, with and without ``--json``: exit 2, one line
    on stderr naming the instance, the topology file, the node and the field, nothing on stdout."""
    g = tmp_path / "t.graphml"
    write_topology(build("switch", {"nodes": 3, "reduce": True}), g)
    g.write_text(g.read_text().replace(">sum<", ">max<"))
    toml = tmp_path / "i.toml"
    toml.write_text('name = "x"\n[topology]\nfile = "t.graphml"\n[collective]\nkind = "allreduce"\n')
    for extra in ([], ["--json"]):
        run = subprocess.run([sys.executable, "-m", "collsynth.solvers.cli", "instance", str(toml), *extra],
                             capture_output=True, text=True)
        assert run.returncode == 2 and run.stdout == "", run.stdout
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and "i.toml" in lines[0] and "t.graphml: node 3 field reduce" in lines[0]


def test_a_switch_that_sends_one_chunks_sum_as_another_is_refused():
    """The switch sums chunk 0's arrivals of step 1 and sends the sum out as chunk 1 (two
    chunks' group operations merged into one): chunk 1's sum then leaves twice on a link and
    chunk 0's result never arrives."""
    merged = [(1, *s[1:]) if (s[0], s[3]) == (0, W) else s for s in summed_multicast()]
    v = check(merged)
    assert v is not None and v.step == 2 and "more than once" in v.reason
    # the duplicate sends dropped: chunk 0's result is missing everywhere
    once = [s for s in merged if not ((s[0], s[3]) == (1, W) and merged.count(s) > 1)] + \
        [(1, 0, 1, W, j, 2, "copy") for j in range(N)]
    assert "chunk 0 [0, 1) reduced over 1 of 4 ranks at the end (missing contributions of ranks [1, 2, 3])" \
        in str(check(once))


def test_exports_of_a_switch_reduction_in_one_line(tmp_path, capsys):
    """``nvls`` on a box: MSCCL XML has no in-switch reduction (one line, exit 2); the MSCCL++
    plan writes its group operations as switch channels (``glres``); the load-reduce shape, whose
    groups are not every member's piece up and the sum down to all, is refused in one line. The
    command line runs in this process (``collsynth.solvers.cli.main``, what the ``collsynth``
    script runs; a process per command costs a second of imports; the exit code of the process
    itself is tests/test_bad_inputs.py's)."""
    toml = tmp_path / "box.toml"
    toml.write_text('name = "box"\n[topology]\ngenerator = "switch"\nnodes = 4\nreduce = [4]\ncopy = [4]\n'
                    '[collective]\nkind = "allreduce"\n')
    for shape in ("multicast", "load-reduce"):
        s = tmp_path / f"{shape}.json"
        code, _, err = run_cli(["solve", toml, "--producer", "nvls", "--param", f"shape={shape}", "--out", s], capsys)
        assert code == 0, err
        code, _, err = run_cli(["export", s, toml, "--format", "msccl-xml"], capsys)
        assert code == 2 and "MSCCL XML has no in-switch reduction" in err
        assert len(err.strip().splitlines()) == 1
        code, out, err = run_cli(["export", s, toml, "--format", "mscclpp-json"], capsys)
        if shape == "multicast":
            assert code == 0 and '"glres"' in out and '"switch"' in out, err
        else:
            assert code == 2 and "not written as switch channels" in err
            assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("sends", [summed_multicast(2), load_reduce_store()], ids=["multicast", "load-reduce"])
def test_every_dropped_or_doubled_send_is_refused(sends):
    """Every send of these schedules carries a contribution or a result someone needs, and a
    send twice either counts a contribution twice or leaves the switch twice on one link."""
    assert check(sends) is None
    for i in range(len(sends)):
        assert check(sends[:i] + sends[i + 1:]) is not None, ("dropped", sends[i])
        assert check(sends[:i + 1] + sends[i:]) is not None, ("doubled", sends[i])
