"""Readers for the peers' inputs (TE-CCL, TACCL, msccl-tools) and TE-CCL's epoch choice.

The files under tests/data/peers are shaped like the peers' own: TE-CCL's sample inputs
(teccl/examples/sample_inputs), TACCL's profiles and sketches (taccl/examples/topo, sketch),
msccl-tools' serialized topologies. Expected values are hand-derived from those files.
"""

import json
from pathlib import Path

import pytest

from collsynth import InputError
from collsynth.instances import CORPUS, load_instance
from collsynth.instances.instance import epoch_timestep
from collsynth.instances.peers import read_msccl, read_peer, read_taccl, read_teccl
from collsynth.instances.systems import class_counts
from collsynth.solvers.cli import main
from collsynth.tens.ten import link_delays

DATA = Path(__file__).parent / "data" / "peers"


def test_teccl_ndv2_sample():
    inst = read_teccl(DATA / "teccl-ndv2-2chassis.json")
    coll = inst.collective
    assert coll.kind == "allgather" and len(coll.nodes) == 16
    assert coll.chunk_bytes == pytest.approx(0.0625e9)  # chunk_size 0.0625 GB
    assert coll.message_bytes == pytest.approx(16 * 0.0625e9)
    assert inst.epoch == "fastest-link"
    # fastest link: the 2-NVLink pair at 50 GB/s (TE-CCL ndv2.py); TE-CCL's epoch is the chunk's
    # transmission (topology.py get_epoch_duration_fast_link), its alpha adds epochs to arrivals
    assert inst.topology.meta["latency"] == "pipelined"
    assert epoch_timestep(inst) == pytest.approx(0.0625e9 / 50e9)
    assert class_counts(inst.topology)["ib"] == 2


def test_epoch_timesteps_give_te_ccl_link_delays():
    inst = read_teccl(DATA / "teccl-ndv2-2chassis.json")
    topo = inst.topology
    delay, _, step = link_delays(topo, inst.collective.chunk_bytes, epoch_timestep(inst))
    la = topo.link_arrays
    by_class = {}
    for u, v, cls in topo.graph.edges(data="link_class"):
        by_class.setdefault(cls, set()).add(int(delay[0][la.lookup(u, v)]))
    # chunk time / fastest-link epoch: 50 GB/s -> 1, 25 GB/s -> 2, 12.5 GB/s -> 4 (TE-CCL's ratios)
    assert by_class == {"nvlink_x2": {1}, "nvlink_x1": {2}, "ib": {4}}


def test_teccl_dgx2_alltoall_slowest_link():
    inst = read_teccl(DATA / "teccl-dgx2-alltoall-slow.json")
    assert inst.collective.kind == "alltoall" and len(inst.collective.nodes) == 32
    assert len(inst.topology.switches) == 2  # one NVSwitch per chassis, kept
    assert epoch_timestep(inst) == pytest.approx(3.125e-5 * 1e9 / 12.5e9)  # the NIC's transmission


def test_teccl_mesh_links_rows_end_to_end():
    inst = read_teccl(DATA / "teccl-mesh.json")
    t = inst.topology
    assert len(t.npus) == 9 and t.num_links == 28  # i +- 1 (16) and i +- 3 (12) over ids 0..8
    assert t.has_link(2, 3) and t.has_link(3, 2)  # TE-CCL's mesh joins a row's end to the next row


def test_taccl_ndv2_profile_with_sketch():
    inst = read_taccl(DATA / "taccl-topo-ndv2-1MB.json", sketch="taccl-sk1-ndv2-n2.json")
    t = inst.topology
    assert len(t.npus) == 16 and t.num_links == 66
    classes = t.meta["link_classes"]
    assert classes["nvlink_x2"]["bandwidth"] == pytest.approx(1e6 / 23e-6)  # beta 23 us per 1 MB chunk
    assert classes["nvlink_x1"]["bandwidth"] == pytest.approx(1e6 / 46e-6)
    assert classes["nvlink_x2"]["alpha"] == pytest.approx(0.3e-6)
    assert classes["remote"]["bandwidth"] == pytest.approx(1e6 / 105e-6)
    assert classes["remote"]["alpha"] == pytest.approx(2.6e-6)
    remote = sorted((u, v) for u, v, c in t.graph.edges(data="link_class") if c == "remote")
    assert remote == [(0, 9), (8, 1)]  # internode_conn {"0": [1]}
    assert inst.collective.chunk_bytes == pytest.approx(1e6)


def test_taccl_dgx2_and_custom():
    inst = read_taccl(DATA / "taccl-topo-dgx2-1MB.json", nodes="2", collective="alltoall")
    t = inst.topology
    assert len(t.npus) == 32 and len(t.switches) == 2 and inst.collective.kind == "alltoall"
    remote = sorted((u, v) for u, v, c in t.graph.edges(data="link_class") if c == "remote")
    assert remote == sorted([(2 * k + 1, 16 + 2 * k) for k in range(8)] + [(17 + 2 * k, 2 * k) for k in range(8)])
    ring = read_taccl(DATA / "taccl-custom-ring4.json")
    assert ring.topology.num_links == 8 and ring.collective.chunk_bytes == pytest.approx(64e3)
    assert [d["bandwidth"] for _, _, d in ring.topology.graph.edges(data=True)] == pytest.approx([64e3 / 2e-6] * 8)


def test_msccl_serialized_and_named():
    hub = read_msccl(DATA / "msccl-hub4.json", bandwidth="1e9")
    assert hub.topology.switches == {4} and hub.topology.num_links == 8  # the hub-and-spoke group as one switch
    assert {d["bandwidth"] for _, _, d in hub.topology.graph.edges(data=True)} == {1e9}
    line = read_msccl(DATA / "msccl-line3.json", bandwidth="1e9")
    assert line.topology.graph[0][1][0]["bandwidth"] == 2e9  # links[1][0] = 2 units
    ring = read_msccl("Ring", nodes="6")
    assert ring.topology.num_links == 12 and ring.topology.diameter == 3
    amd8 = read_msccl("AMD8", bandwidth="1")
    assert amd8.topology.graph[1][0][0]["bandwidth"] == 5.0 and amd8.topology.graph[2][0][0]["bandwidth"] == 6.0
    dgx2 = read_msccl("DGX2")
    assert len(dgx2.topology.npus) == 16 and len(dgx2.topology.switches) == 1


def _write(tmp_path, name, data):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _bad(argv, capsys):
    code = main(argv + ["--json"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ")
    return err.strip()


def test_bad_peer_files_get_one_line_naming_file_and_field(tmp_path, capsys):
    sample = json.loads((DATA / "teccl-ndv2-2chassis.json").read_text())
    unknown = json.loads(json.dumps(sample))
    unknown["TopologyParams"]["name"] = "DGX9"
    p = _write(tmp_path, "unknown.json", unknown)
    assert _bad(["instance", str(p), "--from", "teccl"], capsys).startswith(f"error: {p}: TopologyParams.name: unknown topology 'DGX9'")
    missing = json.loads(json.dumps(sample))
    del missing["TopologyParams"]["chunk_size"]
    p = _write(tmp_path, "missing.json", missing)
    assert _bad(["instance", str(p), "--from", "teccl"], capsys) == f"error: {p}: TopologyParams.chunk_size: missing"
    custom = json.loads((DATA / "taccl-custom-ring4.json").read_text())
    custom["links"][2] = [0, 1, 0]
    p = _write(tmp_path, "nonsquare.json", custom)
    assert _bad(["instance", str(p), "--from", "taccl"], capsys).startswith(f"error: {p}: links: expected a square 4 x 4 matrix")
    serial = json.loads((DATA / "msccl-line3.json").read_text())
    serial["links"] = [[0, 1], [1, 0, 1], [0, 1, 0]]
    p = _write(tmp_path, "msccl.json", serial)
    assert _bad(["instance", str(p), "--from", "msccl"], capsys).startswith(f"error: {p}: links: expected a square")


@pytest.mark.parametrize("fmt,name,change,field", [
    ("teccl", "teccl-ndv2-2chassis.json", lambda d: d["InstanceParams"].update(epoch_type=3), "InstanceParams.epoch_type"),
    ("teccl", "teccl-ndv2-2chassis.json", lambda d: d["InstanceParams"].update(collective=4), "InstanceParams.collective"),
    ("teccl", "teccl-ndv2-2chassis.json", lambda d: d["TopologyParams"].update(chassis=5), "TopologyParams.chassis"),
    ("teccl", "teccl-dgx2-alltoall-slow.json", lambda d: d["TopologyParams"].update(chassis=1), "TopologyParams.chassis"),
    ("taccl", "taccl-topo-ndv2-1MB.json", lambda d: d.update(name="Foo"), "name"),
    ("taccl", "taccl-topo-ndv2-1MB.json", lambda d: d.pop("alpha"), "alpha"),
    ("msccl", "msccl-hub4.json", lambda d: d.update(switches=[[[0, 1], [2, 3], 1, "x"]]), "switches[0]"),
])
def test_unmappable_fields(tmp_path, fmt, name, change, field):
    data = json.loads((DATA / name).read_text())
    change(data)
    path = _write(tmp_path, name, data)
    with pytest.raises(InputError) as err:
        read_peer(path, fmt)
    assert err.value.where == f"{path}: {field}"


def test_cli_reads_a_peer_file(capsys):
    code = main(["instance", str(DATA / "taccl-topo-ndv2-1MB.json"), "--from", "taccl", "--peer", "nodes=2", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    r = json.loads(out)
    assert r["valid"] and r["topology"]["nodes"] == 16 and r["topology"]["links"] == 66


def test_instance_epoch_field_is_validated(tmp_path):
    text = (CORPUS / "ring8-allgather.toml").read_text()
    bad = tmp_path / "x.toml"
    bad.write_text('epoch = "fastest"\n' + text)
    with pytest.raises(InputError) as err:
        load_instance(bad)
    assert err.value.where == f"{bad}: epoch"


def test_teccl_dgx2_switch_hop_follows_switch_to_gpu_link_on(tmp_path):
    # TE-CCL's InstanceParams.switch_to_gpu_link_on (default false: "the link from switch to node
    # is taken as instantaneous") becomes the NVSwitch's topology switch_hop in an allgather;
    # TE-CCL's all-to-all LP (alltoall.py) forwards out of a switch in the epoch after either way
    data = json.loads((DATA / "teccl-dgx2-alltoall-slow.json").read_text())
    assert read_teccl(_write(tmp_path, "a2a.json", data)).topology.meta.get("switch_hop", "timestep") == "timestep"
    data["InstanceParams"]["collective"] = 1  # allgather
    assert read_teccl(_write(tmp_path, "default.json", data)).topology.meta["switch_hop"] == "instant"
    data["InstanceParams"]["switch_to_gpu_link_on"] = True
    assert read_teccl(_write(tmp_path, "on.json", data)).topology.meta.get("switch_hop", "timestep") == "timestep"
    data["InstanceParams"]["switch_to_gpu_link_on"] = "yes"
    path = _write(tmp_path, "bad.json", data)
    with pytest.raises(InputError) as err:
        read_teccl(path)
    assert err.value.where == f"{path}: InstanceParams.switch_to_gpu_link_on"


def test_teccl_ndv2_4_chassis_switch_hop_follows_switch_to_gpu_link_on(tmp_path):
    # more than 2 NDv2 chassis meet at one InfiniBand switch (TE-CCL ndv2.py), timed as the
    # DGX-2's NVSwitch: instant out of the switch in an allgather unless switch_to_gpu_link_on
    data = json.loads((DATA / "teccl-ndv2-2chassis.json").read_text())
    data["TopologyParams"]["chassis"] = 4
    data["InstanceParams"]["collective"] = 1  # allgather
    topo = read_teccl(_write(tmp_path, "ag.json", data)).topology
    assert topo.switches == {32} and topo.meta["switch_hop"] == "instant"
    data["InstanceParams"]["switch_to_gpu_link_on"] = True
    assert read_teccl(_write(tmp_path, "on.json", data)).topology.meta.get("switch_hop", "timestep") == "timestep"
