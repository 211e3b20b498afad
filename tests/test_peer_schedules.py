"""The peers' schedules in (collsynth.tens.peer_schedules): MSCCL XML and TE-CCL output JSON.

An MSCCL XML program written by our own exporter (whose mapping tests/msccl_sim.py checks
independently) must read back as a schedule that verifies; a program with one transfer removed
must get its first violation from ``collsynth verify`` and no price from ``collsynth price``;
TE-CCL flow strings are read hop by hop; malformed files, ranks outside the instance and
missing fields are one ``error:`` line naming the file and the field (exit 2). ``bench`` takes a
folder of them as the producer ``peer:<folder>``.
"""

from __future__ import annotations

import json
import re

import pytest

from cli_errors import assert_one_error_line, run_cli

import collsynth as cs
from collsynth.instances.instance import load_instance
from collsynth.tens import export, peer_schedules
from collsynth.tens.peer_plans import read_mscclpp_plan
from collsynth.tens.verify import verify

RING4 = 'name = "ring4-{kind}"\n[topology]\ngenerator = "ring"\nnodes = 4\n[collective]\nkind = "{kind}"\n'


@pytest.fixture()
def ring4(tmp_path):
    """(instance file, an MSCCL XML program of a ring allgather on it)."""
    toml = tmp_path / "ring4-allgather.toml"
    toml.write_text(RING4.format(kind="allgather"))
    inst = load_instance(toml)
    r = cs.solve(inst, "ring")
    xml = export.to_msccl_xml(r.schedule, inst)
    return toml, inst, xml, r.schedule


def test_msccl_xml_reads_back_and_verifies(ring4, tmp_path, capsys):
    toml, inst, xml, schedule = ring4
    read = peer_schedules.read_msccl_xml(xml, inst)
    assert verify(read, inst) is None
    assert len(read) == len(schedule) and read.num_steps == schedule.num_steps
    path = tmp_path / "ring.xml"
    path.write_text(xml)
    code, out, _ = run_cli(["verify", path, toml, "--from", "msccl-xml", "--json"], capsys)
    assert code == 0 and json.loads(out)["verified"] is True
    code, out, _ = run_cli(["price", path, toml, "--from", "msccl-xml", "--json"], capsys)
    assert code == 0 and json.loads(out)["total_s"] > 0


def _drop_transfer(xml: str) -> str:
    """The program without the last send step of gpu 0 and the receive that pairs with it."""
    gpu0 = xml.index('<gpu id="0"')
    sends = [m for m in re.finditer(r'<step [^>]*type="s"[^>]*/>', xml) if m.start() > gpu0]
    last = sends[0]
    return xml[:last.start()] + xml[last.end():]


def test_an_invalid_peer_schedule_gets_its_first_violation_never_a_price(ring4, tmp_path, capsys):
    toml, inst, xml, _ = ring4
    # remove the step of rank 1 that forwards in step 2 (its receive stays: the pairing breaks
    # or the schedule misses a delivery); either way: no price
    broken = xml.replace('type="s"', 'type="nop"', 1)
    path = tmp_path / "broken.xml"
    path.write_text(broken)
    code, out, err = run_cli(["verify", path, toml, "--from", "msccl-xml", "--json"], capsys)
    if code == 2:  # a program whose sends and receives no longer pair is bad input
        assert_one_error_line(err, [str(path)])
    else:
        data = json.loads(out)
        assert code == 1 and data["verified"] is False and data["violation"]["reason"]
    code, out, err = run_cli(["price", path, toml, "--from", "msccl-xml", "--json"], capsys)
    assert code in (1, 2) and "total_s" not in out


def test_a_missing_delivery_is_a_violation(tmp_path, capsys):
    toml = tmp_path / "ring4-allgather.toml"
    toml.write_text(RING4.format(kind="allgather"))
    inst = load_instance(toml)
    r = cs.solve(inst, "ring")
    keep = ~((r.schedule.step == r.schedule.num_steps) & (r.schedule.src == 0))
    xml = export.to_msccl_xml(r.schedule.select(keep), inst)  # a program that delivers too little
    path = tmp_path / "short.xml"
    path.write_text(xml)
    code, out, _ = run_cli(["verify", path, toml, "--from", "msccl-xml", "--json"], capsys)
    data = json.loads(out)
    assert code == 1 and data["verified"] is False and "step" in data["violation"]
    code, out, _ = run_cli(["price", path, toml, "--from", "msccl-xml", "--json"], capsys)
    data = json.loads(out)
    assert code == 1 and "violation" in data and "total_s" not in data


@pytest.mark.parametrize("edit,field", [
    (lambda x: x[:-20], "not well formed"),
    (lambda x: x.replace('send="1"', 'send="9"', 1), ".send"),
    (lambda x: x.replace('ngpus="4"', 'ngpus="5"', 1), "algo.ngpus"),
    (lambda x: x.replace(' cnt="1"', "", 1), "'cnt'"),
    (lambda x: x.replace(' nchunksperloop="4"', "", 1), "'nchunksperloop'"),
    (lambda x: x.replace('<gpu id="0"', '<gpu id="7"', 1), "gpu.id"),
])
def test_bad_xml_is_one_line_naming_file_and_field(ring4, tmp_path, capsys, edit, field):
    toml, _, xml, _ = ring4
    path = tmp_path / "bad.xml"
    path.write_text(edit(xml))
    for cmd in ("verify", "price"):
        code, _, err = run_cli([cmd, path, toml, "--from", "msccl-xml"], capsys)
        assert code == 2
        assert_one_error_line(err, [str(path), field])


def test_teccl_flows_are_read_hop_by_hop(tmp_path, capsys):
    toml = tmp_path / "ring4-allgather.toml"
    toml.write_text(RING4.format(kind="allgather"))
    flows = [f"Chunk 0 from {s} traveled over {s}->{(s + 1) % 4} in epoch 0" for s in range(4)]
    flows += [f"Chunk 0 from {s} traveled over {(s + 1) % 4}->{(s + 2) % 4} in epoch 1" for s in range(4)]
    flows += [f"Chunk 0 from {s} traveled over {(s + 2) % 4}->{(s + 3) % 4} in epoch 2" for s in range(4)]
    path = tmp_path / "out.json"
    path.write_text(json.dumps({"1-Epoch_Duration": 1e-5, "7-Flows": flows}))
    inst = load_instance(toml)
    s = peer_schedules.read_peer_schedule(path, "teccl-output", inst)
    assert verify(s, inst) is None and len(s) == 12 and s.meta["timestep_s"] == 1e-5
    code, out, _ = run_cli(["verify", path, toml, "--from", "teccl-output", "--json"], capsys)
    assert code == 0 and json.loads(out)["verified"] is True
    path.write_text(json.dumps({"1-Epoch_Duration": 1e-5, "7-Flows": flows[:-1]}))
    code, out, _ = run_cli(["verify", path, toml, "--from", "teccl-output", "--json"], capsys)
    assert code == 1 and json.loads(out)["verified"] is False


def test_teccl_switch_numbering():
    inst = cs.make_instance({"generator": "dgx2", "chassis": 2}, "allgather")
    ours = peer_schedules._teccl_ids(inst)
    # TE-CCL dgx2.py: switch 17c, GPU 17c + 1 + g; ours: GPU 16c + g, switch 32 + c
    assert [ours(t) for t in (0, 1, 16, 17, 18, 33)] == [32, 0, 15, 33, 16, 31]


@pytest.mark.parametrize("content,field", [
    ("{not json", "not well formed"),
    (json.dumps({"1-Epoch_Duration": 1e-5}), "7-Flows"),
    (json.dumps({"7-Flows": []}), "1-Epoch_Duration"),
    (json.dumps({"1-Epoch_Duration": 1e-5, "7-Flows": ["Chunk 0 from 9 traveled over 9->0 in epoch 0"]}), "7-Flows[0]"),
    (json.dumps({"1-Epoch_Duration": 1e-5, "7-Flows": ["chunk zero went somewhere"]}), "7-Flows[0]"),
])
def test_bad_teccl_output_is_one_line(tmp_path, capsys, content, field):
    toml = tmp_path / "ring4-allgather.toml"
    toml.write_text(RING4.format(kind="allgather"))
    path = tmp_path / "out.json"
    path.write_text(content)
    code, _, err = run_cli(["verify", path, toml, "--from", "teccl-output"], capsys)
    assert code == 2
    assert_one_error_line(err, [str(path), field])


def test_bench_takes_a_folder_of_peer_schedules(ring4, tmp_path):
    toml, inst, xml, _ = ring4
    folder = tmp_path / "peers"
    folder.mkdir()
    (folder / f"{inst.name}.xml").write_text(xml)
    store = tmp_path / "store"
    out = cs.bench(instances=str(toml), producers=[f"peer:{folder}", "ring"], store=store, jobs=1)
    df = cs.open_store(store).runs()
    rows = {r["producer"]: r for r in df.to_dict("records")}
    assert rows[f"peer:{folder}"]["verified"] and rows["ring"]["verified"]
    assert rows[f"peer:{folder}"]["time_sync_s"] == pytest.approx(rows["ring"]["time_sync_s"])
    assert out is not None


@pytest.fixture()
def ring4_plan(tmp_path):
    """(instance file, our MSCCL++ plan of a greedy schedule on a 4-ring, as JSON text)."""
    from collsynth.tens.readback import verified_mscclpp_plan

    out = {}
    for kind in ("allgather", "reduce_scatter", "allreduce", "alltoall"):
        toml = tmp_path / f"ring4-{kind}.toml"
        toml.write_text(RING4.format(kind=kind))
        inst = load_instance(toml)
        r = cs.solve(inst, "greedy" if kind != "allreduce" else "ring")
        out[kind] = (toml, inst, verified_mscclpp_plan(r.schedule, inst), r.schedule)
    return out


@pytest.mark.parametrize("kind", ["allgather", "reduce_scatter", "allreduce", "alltoall"])
def test_our_plans_read_back_as_schedules_that_verify(ring4_plan, tmp_path, capsys, kind):
    toml, inst, text, schedule = ring4_plan[kind]
    read = read_mscclpp_plan(text, inst)
    assert verify(read, inst) is None
    # every send is one put; steps are by readiness, so never later than the schedule's
    assert len(read) == len(schedule) and read.num_steps <= schedule.num_steps
    path = tmp_path / "plan.json"
    path.write_text(text)
    code, out, _ = run_cli(["verify", path, toml, "--from", "mscclpp-json", "--json"], capsys)
    assert code == 0 and json.loads(out)["verified"] is True


def _edit_plan(text: str, fn) -> str:
    plan = json.loads(text)
    fn(plan)
    return json.dumps(plan)


def _drop_a_put(plan):
    tb = next(tb for g in plan["gpus"] for tb in g["threadblocks"] if any(op["name"] == "put" for op in tb["ops"]))
    k = next(k for k, op in enumerate(tb["ops"]) if op["name"] == "put")
    del tb["ops"][k]


@pytest.mark.parametrize("edit,field", [
    (lambda t: t[:-10], "not well formed"),
    (lambda t: _edit_plan(t, lambda p: p["gpus"][0]["remote_buffers"][0].update(rank=9)), "remote_buffers[0].rank"),
    (lambda t: _edit_plan(t, lambda p: p["gpus"][1]["channels"][0]["connected_to"].__setitem__(0, 7)), "connected_to"),
    (lambda t: _edit_plan(t, lambda p: p["gpus"][0].pop("input_chunks")), "'input_chunks'"),
    (lambda t: _edit_plan(t, lambda p: p["gpus"][2]["threadblocks"][0]["ops"][0].pop("src_buff")), "'src_buff'"),
    (lambda t: _edit_plan(t, lambda p: p.update(collective="alltoall")), "collective"),
])
def test_bad_plans_are_one_line_naming_file_and_field(ring4_plan, tmp_path, capsys, edit, field):
    toml, _, text, _ = ring4_plan["allgather"]
    path = tmp_path / "bad-plan.json"
    path.write_text(edit(text))
    for cmd in ("verify", "price"):
        code, _, err = run_cli([cmd, path, toml, "--from", "mscclpp-json"], capsys)
        assert code == 2
        assert_one_error_line(err, [str(path), field])


def test_a_plan_missing_a_put_gets_its_first_violation(ring4_plan, tmp_path, capsys):
    toml, _, text, _ = ring4_plan["allgather"]
    path = tmp_path / "short-plan.json"
    path.write_text(_edit_plan(text, _drop_a_put))
    code, out, err = run_cli(["verify", path, toml, "--from", "mscclpp-json", "--json"], capsys)
    if code == 2:  # the data the dropped put carried is then forwarded from nowhere
        assert_one_error_line(err, [str(path)])
    else:
        assert code == 1 and json.loads(out)["verified"] is False
    code, out, _ = run_cli(["price", path, toml, "--from", "mscclpp-json", "--json"], capsys)
    assert code in (1, 2) and "total_s" not in out
