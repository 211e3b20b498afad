"""``collsynth verify / price / export`` through the CLI entry point."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from collsynth.instances.instance import load_instance
from collsynth.solvers.cli import main
from collsynth.tens.msccl_read import interpret_msccl_xml
from collsynth.tens.schedule import from_sends, read_json, write_json
from collsynth.tens.verify import verify

from msccl_sim import run_msccl
from builders import recursive_doubling_allgather, ring_allgather

N, BWv, ALPHAv, MSG = 6, 50e9, 1e-6, 6 * 1024.0

INSTANCE = f"""
name = "ring6-allgather"
[topology]
generator = "ring"
nodes = {N}
bidirectional = false
bandwidth = {BWv}
alpha = {ALPHAv}
[collective]
kind = "allgather"
message_bytes = {MSG}
"""


@pytest.fixture
def files(tmp_path):
    inst = tmp_path / "inst.toml"
    inst.write_text(INSTANCE)
    good = tmp_path / "good.json"
    write_json(ring_allgather(N), good)
    sends = ring_allgather(N).sends()
    bad = tmp_path / "bad.json"
    write_json(from_sends(sends[:-1], "allgather", N, N), bad)  # the last send dropped
    return tmp_path, str(inst), str(good), str(bad)


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_verify(files, capsys):
    _, inst, good, bad = files
    code, out, _ = run(capsys, "verify", good, inst, "--json")
    assert code == 0 and json.loads(out)["verified"] is True
    code, out, _ = run(capsys, "verify", bad, inst, "--json")
    data = json.loads(out)
    assert code == 1 and data["verified"] is False
    assert data["violation"]["step"] == N - 1 and data["violation"]["reason"]
    code, out, _ = run(capsys, "verify", good, inst)
    assert code == 0 and out.startswith("verified")


@pytest.mark.parametrize("model", ["sync", "ten", "event"])
def test_price(files, capsys, model):
    _, inst, good, _ = files
    code, out, _ = run(capsys, "price", good, inst, "--model", model, "--json")
    data = json.loads(out)
    assert code == 0
    for key in ("model", "verified", "steps", "T_L_s", "T_B_s", "total_s"):
        assert key in data
    assert data["model"] == model and data["verified"] is True
    expect = (N - 1) * (ALPHAv + MSG / (N * BWv))
    assert data["total_s"] == pytest.approx(expect, rel=1e-12)
    assert data["lower_bound_s"] <= data["total_s"] * (1 + 1e-12)


def test_price_refuses_unverified_and_bad_model(files, capsys):
    _, inst, _, bad = files
    code, out, _ = run(capsys, "price", bad, inst, "--json")
    assert code == 1 and json.loads(out)["verified"] is False
    code, out, err = run(capsys, "price", bad, inst, "--model", "magic")
    assert code == 2 and err.startswith("error:")


def test_price_routed_schedule(tmp_path, capsys):
    inst = tmp_path / "inst.toml"
    inst.write_text(INSTANCE.replace("bidirectional = false", "bidirectional = true").replace("nodes = 6", "nodes = 8"))
    sched = tmp_path / "rd.json"
    write_json(recursive_doubling_allgather(8, routing="shortest-path"), sched)
    code, out, _ = run(capsys, "price", str(sched), str(inst), "--json")
    data = json.loads(out)
    assert code == 0 and data["steps"] == 3
    assert data["T_L_s"] == pytest.approx((1 + 2 + 4) * ALPHAv)  # per-hop latency of the routes
    code, out, err = run(capsys, "export", str(sched), str(inst))
    assert code == 2 and "direct link" in err


def test_export_msccl_xml(files, capsys):
    tmp, inst, good, bad = files
    code, out, _ = run(capsys, "export", good, inst, "--format", "msccl-xml")
    assert code == 0
    root = ET.fromstring(out)
    assert root.tag == "algo" and root.get("ngpus") == str(N)
    code, out, _ = run(capsys, "export", good, inst, "--json")
    data = json.loads(out)
    assert code == 0 and data["format"] == "msccl-xml" and data["content"].startswith("<algo")
    target = tmp / "ring.xml"
    code, out, _ = run(capsys, "export", good, inst, "--out", str(target), "--json")
    assert code == 0 and json.loads(out)["out"] == str(target)
    instance = load_instance(inst)
    assert verify(interpret_msccl_xml(target.read_text(), instance), instance) is None
    code, out, _ = run(capsys, "export", bad, inst, "--json")
    assert code == 1 and json.loads(out)["verified"] is False


def test_export_json(files, capsys):
    tmp, inst, good, _ = files
    target = tmp / "copy.json"
    code, _, _ = run(capsys, "export", good, inst, "--format", "json", "--out", str(target))
    assert code == 0
    assert read_json(target).sends() == read_json(good).sends()
    code, out, _ = run(capsys, "export", good, inst, "--format", "json")
    assert json.loads(out)["format"] == "collsynth.schedule/1"


def test_bad_input_files(files, capsys):
    tmp, inst, good, _ = files
    code, _, err = run(capsys, "verify", str(tmp / "missing.json"), inst)
    assert code == 2 and "missing.json" in err and "no such file" in err
    broken = tmp / "broken.json"
    broken.write_text('{"format": "collsynth.schedule/1", "collective": "allgather"}')
    code, _, err = run(capsys, "price", str(broken), inst)
    assert code == 2 and "nodes" in err


FAILED_MESH = """
name = "mesh3x3-failed-gather"
[topology]
generator = "mesh"
dims = [3, 3]
failed_nodes = [4]
[collective]
kind = "gather"
root = 5
"""


def test_export_renumbered_ranks_are_written_and_printed(tmp_path, capsys):
    """Node 4 failed: nodes 5..8 become ranks 4..7; the map is in the XML, in the JSON output
    and beside the XML, and the program gathers at rank 4 (node 5)."""
    inst = tmp_path / "mesh.toml"
    inst.write_text(FAILED_MESH)
    sched = tmp_path / "g.json"
    code, _, _ = run(capsys, "solve", str(inst), "--producer", "greedy", "--out", str(sched))
    assert code == 0
    target = tmp_path / "g.xml"
    code, out, err = run(capsys, "export", str(sched), str(inst), "--out", str(target), "--json")
    data = json.loads(out)
    ranks = {"0": 0, "1": 1, "2": 2, "3": 3, "5": 4, "6": 5, "7": 6, "8": 7}
    assert code == 0 and err == ""
    assert data["ranks_renumbered"] is True and data["ranks"] == ranks
    assert data["ranks_out"] == f"{target}.ranks.json"
    assert json.loads((tmp_path / "g.xml.ranks.json").read_text()) == {"xml": "g.xml", "ranks": ranks}
    xml = target.read_text()
    assert xml.startswith("<!-- collsynth: gpu ids are ranks, not node ids (node->rank): 0->0 1->1 2->2 3->3 5->4")
    assert ET.fromstring(xml).get("coll") == "gather"
    run_msccl(xml, "gather", root=4)
    code, out, _ = run(capsys, "export", str(sched), str(inst), "--out", str(target))
    assert code == 0 and "5->4" in out and "g.xml.ranks.json" in out


def test_export_dialect_and_refusals(files, tmp_path, capsys):
    _, inst, good, _ = files
    code, out, _ = run(capsys, "export", good, inst, "--msccl-dialect", "msccl-tools", "--json")
    data = json.loads(out)
    assert code == 0 and data["dialect"] == "msccl-tools" and data["ranks_renumbered"] is False
    code, _, err = run(capsys, "export", good, inst, "--msccl-dialect", "nccl")
    assert code == 2 and err.startswith("error:") and len(err.strip().splitlines()) == 1
    # a schedule MSCCL cannot express: one line on stderr, exit 2, nothing written
    routed_inst = tmp_path / "ring8.toml"
    routed_inst.write_text(INSTANCE.replace("bidirectional = false", "bidirectional = true").replace("nodes = 6", "nodes = 8"))
    routed = tmp_path / "rd.json"
    write_json(recursive_doubling_allgather(8, routing="shortest-path"), routed)
    target = tmp_path / "rd.xml"
    code, out, err = run(capsys, "export", str(routed), str(routed_inst), "--out", str(target))
    assert code == 2 and out == "" and "wrote" not in err
    assert err.startswith("error: schedule: send") and "direct link" in err and len(err.strip().splitlines()) == 1
    assert not target.exists()
