"""``collsynth export --layout packed|trees|auto [--calibration C]`` through the real command
line: the program written is read back from the file, run on the executor's interpreter and
verified, its thread blocks counted against the layout asked for; the refusals are one line."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from fractions import Fraction

import pytest

from collsynth.instances.instance import load_instance
from collsynth.tens.cost_models.runtime import Calibration
from collsynth.tens.peer_schedules import read_peer_text
from collsynth.tens.schedule import from_sends, write_json
from collsynth.tens.verify import verify

from builders import ALPHA, BW
from cli_errors import assert_one_error_line, run_cli
from msccl_sim import run_msccl
from test_export_fuse import layout

# three_trees of test_export_layout.py at 300 kB: chunk r's tree is r+1 -> r+2 (step 1), r+2 -> r (step 2)
INSTANCE = f"""
name = "complete3-reduce-scatter"
[topology]
generator = "complete"
nodes = 3
bandwidth = {BW}
alpha = {ALPHA}
[collective]
kind = "reduce_scatter"
message_bytes = 300000
"""
ROWS = [(r, 0, 1, (r + 1) % 3, (r + 2) % 3, 1) for r in range(3)] + [(r, 0, 1, (r + 2) % 3, r, 2) for r in range(3)]
# each step 1 ms, nothing else costs: test_export_layout.py's by-hand prices (102 ms in trees, >= 200 packed)
STEPS_ONLY = Calibration("steps-only", "s", "by hand", {"link": 1.0}, {"link": 0.0}, {"link": 0.0}, tb_rate=1e15,
                         reduce_rate=1e15, step_s=1e-3, launch_s=0.0, tb_s=0.0, buff_bytes=2000)


def pieces(rows, denom: int) -> list:
    """``rows`` (whole chunks) cut into ``denom`` pieces each, every piece sent as its chunk is."""
    return [(c, Fraction(k, denom), Fraction(k + 1, denom), u, v, t) for (c, _, _, u, v, t) in rows for k in range(denom)]


@pytest.fixture
def files(tmp_path):
    inst = tmp_path / "c3.toml"
    inst.write_text(INSTANCE)
    sched = tmp_path / "s.json"
    write_json(from_sends(ROWS, "reduce_scatter", 3, 3), sched)
    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps(STEPS_ONLY.as_json()))
    return tmp_path, str(inst), str(sched), str(cal)


def export(capsys, sched, inst, out, *options):
    """The JSON output and the program written by ``collsynth export ... --out out``, the
    program read back from the file, run on the interpreter and verified."""
    code, stdout, err = run_cli(["export", sched, inst, "--out", out, "--json", *options], capsys)
    assert code == 0, err
    data = json.loads(stdout)
    xml = open(out).read()
    instance = load_instance(inst)
    run_msccl(xml, "reduce_scatter")
    assert verify(read_peer_text(xml, "msccl-xml", instance), instance) is None
    return data, xml


def test_trees_is_one_thread_block_per_tree_and_edge_with_relays_in_one_step(files, capsys):
    """By hand (test_export_layout.py): each tree its own channel (3), GPU 0 a leaf's send, a
    relay's receive-reduce-send (``rrs``) and a root's receive, one step each."""
    tmp, inst, sched, _ = files
    data, xml = export(capsys, sched, inst, str(tmp / "t.xml"), "--layout", "trees")
    assert (data["layout"], data["grid"], data["channels"], data["thread_blocks"]) == ("trees", 1, 3, 3)
    assert data["receive_and_send_steps"] == 3 and "runtime_s" not in data
    assert [(t[0], t[1], [s[0] for s in t[3]]) for t in layout(xml, 0)] == [
        ("1", "2", ["rrs"]), ("1", "-1", ["s"]), ("-1", "2", ["rrc"])]


def test_packed_is_the_default_and_packs_a_link_in_one_thread_block(files, capsys):
    """GPU 0 sends to 1 twice and receives from 2 twice: one channel, a send and a receive
    thread block of two steps each; the same with no ``--layout``."""
    tmp, inst, sched, cal = files
    data, xml = export(capsys, sched, inst, str(tmp / "p.xml"), "--layout", "packed", "--calibration", cal)
    assert (data["layout"], data["grid"], data["channels"], data["thread_blocks"]) == ("packed", 1, 1, 2)
    assert [len(t[3]) for t in layout(xml, 0)] == [2, 2]
    assert data["runtime_s"] >= 0.2 and data["calibration"] == "steps-only"  # two 1 ms steps an iteration, 100
    default, same = export(capsys, sched, inst, str(tmp / "d.xml"))
    assert default["layout"] == "packed" and same == xml


def test_auto_writes_the_cheapest_under_the_calibration_else_the_default(files, capsys):
    """With the steps-only calibration the tree layout costs 102 ms (by hand,
    test_export_layout.py) and the packed one at least 200: auto writes the trees; without a
    calibration it writes the default layout."""
    tmp, inst, sched, cal = files
    data, xml = export(capsys, sched, inst, str(tmp / "a.xml"), "--layout", "auto", "--calibration", cal)
    assert (data["layout"], data["layout_asked"], data["grid"], data["channels"]) == ("trees", "auto", 1, 3)
    assert data["runtime_s"] == pytest.approx(0.102)
    assert "trees layout on a 1/1 grid" in data["layout_note"]
    code, out, _ = run_cli(["export", sched, inst, "--layout", "auto", "--calibration", cal,
                            "--out", tmp / "a2.xml"], capsys)
    assert code == 0 and "trees layout" in out and "steps-only" in out
    plain, _ = export(capsys, sched, inst, str(tmp / "b.xml"), "--layout", "auto")
    assert plain["layout"] == "packed" and "runtime_s" not in plain


def test_the_program_chosen_is_the_one_written_exported_once_with_the_name_and_protocol_asked(files, capsys,
                                                                                                 monkeypatch):
    """One grid (whole chunks): ``--layout auto`` writes the two layouts, each with and without
    receive-and-send steps, in one export (the work they share prepared once), prices those four
    programs once each under the name and protocol asked, and writes the cheapest: the trees,
    102 ms by hand whatever the protocol (the steps-only calibration prices steps alone), not
    exported or priced again. ``--layout packed`` exports once too."""
    from collsynth.tens import export as exporter
    from collsynth.tens.cost_models import runtime

    tmp, inst, sched, cal = files
    calls = {"prepared": 0, "priced": 0}
    prepared, under = exporter._prepared, runtime.seconds_under

    def counted_prepared(*args):
        calls["prepared"] += 1
        return prepared(*args)

    def counted_under(*args):
        price = under(*args)

        def counted(text):
            calls["priced"] += 1
            return price(text)
        return counted

    monkeypatch.setattr(exporter, "_prepared", counted_prepared)
    monkeypatch.setattr(runtime, "seconds_under", counted_under)
    data, xml = export(capsys, sched, inst, str(tmp / "n.xml"), "--layout", "auto", "--calibration", cal,
                       "--name", "mine", "--proto", "LL")
    root = ET.fromstring(xml[xml.index("<algo"):])
    assert (root.get("name"), root.get("proto"), data["layout"]) == ("mine", "LL", "trees")
    assert data["runtime_s"] == pytest.approx(0.102)
    assert calls == {"prepared": 1, "priced": 4}
    calls.update(prepared=0, priced=0)
    data, xml = export(capsys, sched, inst, str(tmp / "m.xml"), "--layout", "packed", "--name", "other")
    assert ET.fromstring(xml[xml.index("<algo"):]).get("name") == "other" and data["layout"] == "packed"
    assert calls == {"prepared": 1, "priced": 0}


def test_a_grid_the_tree_layout_cannot_take_is_coarsened(files, capsys):
    """The same trees cut into 64 pieces a chunk are 192 trees, each link carrying 128 of them:
    more than MSCCL's 32 channels, so the export halves the grid until the layout fits; the
    grid it reports is the program's (nchunksperloop = 3 ranks x 1 chunk x grid)."""
    tmp, inst, _, _ = files
    fine = tmp / "fine.json"
    write_json(from_sends(pieces(ROWS, 64), "reduce_scatter", 3, 3), fine)
    data, xml = export(capsys, str(fine), inst, str(tmp / "f.xml"), "--layout", "trees")
    root = ET.fromstring(xml[xml.index("<algo"):])
    assert data["schedule_grid"] == 64 and data["grid"] < 64 and 64 % data["grid"] == 0
    assert int(root.get("nchunksperloop")) == 3 * data["grid"]
    assert int(root.get("nchannels")) == data["channels"] <= 32


@pytest.mark.parametrize("argv, must", [
    (["--layout", "forest"], ["--layout", "invalid choice", "'forest'"]),
    (["--layout", "trees", "--format", "json"], ["--layout", "only --format msccl-xml"]),
    (["--calibration", "{cal}", "--format", "mscclpp-json"], ["--calibration", "only --format msccl-xml"]),
    (["--layout", "auto", "--calibration", "{tmp}/missing.json"], ["missing.json"]),
])
def test_bad_layout_options_are_one_line(files, capsys, argv, must):
    tmp, inst, sched, cal = files
    argv = [a.format(cal=cal, tmp=tmp) for a in argv]
    code, out, err = run_cli(["export", sched, inst, *argv], capsys)
    assert code == 2 and out == ""
    assert_one_error_line(err, must)


def test_auto_also_tries_the_trees_fitted_within_the_calibrations_sms(files, capsys, monkeypatch):
    """With an SM count in the calibration (2 here: the tree layout runs 3 thread blocks on each
    GPU), ``auto`` also prices the tree layout fitted within it, as the runtime model's own export
    does; without one it does not. The choice (trees, 102 ms by hand) is unchanged: under the
    steps-only calibration a merged thread block runs its two steps in turn."""
    from collsynth.tens import export_choice
    tmp, inst, sched, cal = files
    seen, real = [], export_choice.chosen_export

    def spy(*args, **kw):
        seen.append((args[3], kw.get("max_thread_blocks", 0)))
        return real(*args, **kw)

    monkeypatch.setattr(export_choice, "chosen_export", spy)
    with_sms = tmp / "sms.json"
    with_sms.write_text(json.dumps(replace(STEPS_ONLY, sms=2).as_json()))
    data, _ = export(capsys, sched, inst, str(tmp / "f.xml"), "--layout", "auto", "--calibration", str(with_sms))
    assert seen[-1] == (("links", "trees", "fitted"), 2) and data["layout"] == "trees"
    assert data["runtime_s"] == pytest.approx(0.102)
    export(capsys, sched, inst, str(tmp / "g.xml"), "--layout", "auto", "--calibration", cal)
    assert seen[-1] == (("links", "trees"), 0)


RING4 = f"""
name = "ring4-allgather"
[topology]
generator = "ring"
nodes = 4
bandwidth = {BW}
alpha = 0.0
[collective]
kind = "allgather"
message_bytes = 400000
"""


def test_fewer_trees_offers_the_k_limited_forests_to_the_runtime_choice(tmp_path, capsys, monkeypatch):
    """``--fewer-trees`` (with ``--layout auto --calibration``): the schedule given (one tree a
    root, clockwise: every GPU sends to one peer) and tree-packing's forests of at most 1 and 2
    trees a root on the instance, each verified and within its count, are offered to the
    export choice; the program written reads back and verifies, and prices no more than the
    schedule's own best program (written without the option). Without ``--layout auto`` and
    a calibration the option is refused in one line."""
    from collsynth.tens import export_choice
    from test_few_trees import routes_per_root
    inst, sched, cal = tmp_path / "r4.toml", tmp_path / "s.json", tmp_path / "cal.json"
    inst.write_text(RING4)
    write_json(from_sends([(r, 0, 1, (r + h) % 4, (r + h + 1) % 4, h + 1) for r in range(4) for h in range(3)],
                          "allgather", 4, 4), sched)
    cal.write_text(json.dumps(STEPS_ONLY.as_json()))
    seen, real = [], export_choice.chosen_export

    def spy(*args, **kw):
        seen.append(kw.get("alternatives", ()))
        return real(*args, **kw)

    monkeypatch.setattr(export_choice, "chosen_export", spy)
    instance = load_instance(str(inst))
    base = ["export", str(sched), str(inst), "--json", "--layout", "auto", "--calibration", str(cal)]
    code, out, err = run_cli([*base, "--out", str(tmp_path / "own.xml")], capsys)
    assert code == 0, err
    own = json.loads(out)
    code, out, err = run_cli([*base, "--fewer-trees", "--out", str(tmp_path / "few.xml")], capsys)
    assert code == 0, err
    data = json.loads(out)
    assert len(seen[-1]) == 2 and [max(routes_per_root(s).values()) <= k for k, s in zip((1, 2), seen[-1])] == [True] * 2
    assert all(verify(s, instance) is None for s in seen[-1])
    xml = open(tmp_path / "few.xml").read()
    assert verify(read_peer_text(xml, "msccl-xml", instance), instance) is None
    assert data["runtime_s"] <= own["runtime_s"] and data["trees_per_root"] in (None, 1, 2)
    for argv in (["--fewer-trees"], ["--fewer-trees", "--layout", "auto"]):
        code, out, err = run_cli(["export", str(sched), str(inst), *argv], capsys)
        assert code == 2 and out == ""
        assert_one_error_line(err, "--fewer-trees")
