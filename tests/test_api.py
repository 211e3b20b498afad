"""The Python API (``collsynth.solve`` and friends) and the notebook-style example script."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

import collsynth as cs
from collsynth import InputError
from collsynth.instances import CORPUS
from collsynth.instances.topology import Topology
from collsynth.tens import msccl_read
from collsynth.tens.schedule import read_json
from collsynth.tens.verify import VerificationError, verify

REPO = Path(__file__).resolve().parent.parent
RING8 = CORPUS / "ring8-allgather.toml"


def test_import_stays_light_and_the_api_is_reached_from_the_package():
    code = "import collsynth, sys; print(sorted(m for m in ('pandas', 'pyomo', 'highspy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    from collsynth import api

    for name in cs.API:
        assert getattr(cs, name) is getattr(api, name) and name in dir(cs)
    with pytest.raises(AttributeError):
        cs.no_such_name


def test_solve_prices_the_ring_as_computed_by_hand():
    spec = tomllib.loads(RING8.read_text())
    n, bw, alpha = spec["topology"]["nodes"], spec["topology"]["bandwidth"], spec["topology"]["alpha"]
    chunk = spec["collective"]["message_bytes"] / n
    r = cs.solve(RING8, "ring")
    assert r.status == "constructed" and r.verified
    # N - 1 steps, each moving one chunk over every link of the (one-way) ring
    assert r.row["steps"] == n - 1 and len(r.schedule) == n * (n - 1)
    assert r.row["time_sync_s"] == pytest.approx((n - 1) * (alpha + chunk / bw))
    assert r.bounds["lower_bound_steps"] == n // 2  # the diameter of the bidirectional ring
    assert verify(r.schedule, r.instance) is None
    assert "ring on ring8-allgather: constructed, 7 steps" in repr(r)


def test_solve_options_and_parameters_are_checked():
    r = cs.solve(RING8, "greedy", starts=2, seed=3, priority="fifo")
    assert r.verified and r.row["seed"] == 3
    with pytest.raises(InputError, match="takes no parameter 'window'"):
        cs.solve(RING8, "greedy", window=3)
    with pytest.raises(InputError, match="unknown producer 'rign'"):
        cs.solve(RING8, "rign")
    with pytest.raises(InputError, match="uses no solver"):
        cs.solve(RING8, "ring", solver="highs")
    skipped = cs.solve(RING8, "optree")  # an optical-ring algorithm on an electrical ring
    assert skipped.status == "skipped" and skipped.schedule is None and not skipped.verified
    assert "unsupported" in repr(skipped)


def test_make_instance_from_a_table_a_name_a_file_or_a_topology(tmp_path):
    table = cs.make_instance({"generator": "torus", "dims": [3, 3], "bandwidth": 1e9}, "allgather")
    assert table.topology.size == 9 and table.topology.num_links == 36
    assert cs.make_instance("dgx1", "broadcast", root=2).collective.root == 2
    edges = tmp_path / "path.csv"
    edges.write_text("# directed = false\nsrc,dst\n0,1\n1,2\n")
    from_file = cs.make_instance(edges, "allgather")
    assert sorted(from_file.topology.graph.edges()) == [(0, 1), (1, 0), (1, 2), (2, 1)]
    assert isinstance(from_file.topology, Topology)
    assert cs.make_instance(from_file.topology, "gather", root=0, nodes=[0, 2]).collective.nodes == (0, 2)
    with pytest.raises(InputError, match="expected a Topology"):
        cs.make_instance(42, "allgather")
    with pytest.raises(InputError, match="disconnected"):
        cs.make_instance({"file": str(edges), "directed": False, "failed_nodes": [1]}, "allgather")


def test_compare_routes_the_driver_and_keeps_the_order():
    df = cs.compare(RING8, ["ring", "ten-ilp"], driver="early-stop", time_limit=30)
    assert list(df["producer"]) == ["ring", "ten-ilp"]
    assert list(df["driver"]) == ["", "early-stop"] and list(df["solver"]) == ["", "highs"]
    assert df["verified"].all()
    with pytest.raises(InputError, match="no selected producer takes driver"):
        cs.compare(RING8, "ring,direct", driver="horizon")


def test_price_and_export_refuse_an_unverified_schedule(tmp_path):
    r = cs.solve(RING8, "ring")
    broken = r.schedule.select(np.arange(len(r.schedule)) != 3)
    checked = cs.verify(broken, r.instance)
    assert not checked and checked.violation is not None and checked.sends == len(r.schedule) - 1
    assert str(checked.violation) in str(checked)
    for call in (lambda: cs.price(broken, r.instance), lambda: cs.export(broken, r.instance)):
        with pytest.raises(VerificationError):
            call()
    cs.export(r.schedule, RING8, "json", tmp_path / "s.json")
    assert read_json(tmp_path / "s.json").sends() == r.schedule.sends()
    checked = cs.verify(tmp_path / "s.json", RING8)
    assert checked and checked.ok and checked.violation is None and checked.sends == len(r.schedule)
    xml = cs.export(tmp_path / "s.json", RING8, "msccl-xml", tmp_path / "s.xml", dialect="msccl-tools")
    assert (tmp_path / "s.xml").read_text() == xml
    assert verify(msccl_read.interpret_msccl_xml(xml, r.instance), r.instance) is None
    assert cs.price(r.schedule, r.instance, "event").total_s > 0
    with pytest.raises(InputError, match="expected one of msccl-xml, mscclpp-json, json"):
        cs.export(r.schedule, r.instance, "xml")


def test_open_store_needs_a_store(tmp_path):
    with pytest.raises(InputError, match="no results store here"):
        cs.open_store(tmp_path)


def test_example_script_runs(tmp_path):
    """examples/notebook_tour.py from start to end, as a user runs it."""
    env = {**os.environ, "MPLBACKEND": "Agg"}
    done = subprocess.run([sys.executable, str(REPO / "examples" / "notebook_tour.py"), str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    dgx1 = cs.load_instance(CORPUS / "dgx1-allgather.toml")
    xml = (tmp_path / "dgx1-allgather.xml").read_text()
    assert verify(msccl_read.interpret_msccl_xml(xml, dgx1), dgx1) is None
    runs = cs.open_store(tmp_path / "store").runs()
    assert sorted(runs["producer"]) == ["bfb-ring", "recursive-doubling", "ring"] and runs["verified"].all()
    mine = cs.make_instance({"file": str(tmp_path / "my8gpu.csv")}, "allreduce")
    assert mine.topology.size == 8 and mine.topology.num_links == 32 and mine.topology.diameter == 2
    assert "my8gpu-allreduce" in done.stdout
