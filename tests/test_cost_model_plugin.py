"""Adding a cost model is adding one module to ``tens/cost_models/``: the registry drives the
pipeline, the result schema, the store and the tables (one file, no other edit)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from collsynth import InputError
from collsynth.tens import cost_models
from collsynth.tens.schedule import from_sends
from builders import instance_on

# a model of its own: every hop of every send costs one second, whatever it carries
HOPS = '''
from collsynth.tens.cost import Cost
from collsynth.tens.cost_models import CostModel


def _price(schedule, instance, timestep=None, exact_deps=None):
    return Cost("hops", schedule.num_steps, float(len(schedule)), 0.0, float(len(schedule)))


MODEL = CostModel(name="hops", doc="one second per hop", price=_price, rate=1e7)
'''

SCRIPT = '''
import json, sys
from collsynth.tens import cost_models
cost_models.__path__.append(sys.argv[1])          # the folder holding the new module
cost_models.MODELS.clear(); cost_models.MODELS.update(cost_models._discover())
from collsynth.instances import generators, make_instance
from collsynth.results import render, schema, store
from collsynth.solvers.cli import main
from collsynth.solvers.pipeline import run
from collsynth.solvers.producers import Options
inst = make_instance(generators.build("ring", {"nodes": 4, "bidirectional": False}), "allgather")
row, sched = run(inst, "ring", Options(time_limit=30))
store.put(sys.argv[3], {**row, "params": "{}"}, sched)
df = store.load(sys.argv[3])
rc = main(["price", sys.argv[4], sys.argv[2], "--model", "hops", "--json"])
print(json.dumps({"names": list(cost_models.names()), "row": {k: row[k] for k in ("time_hops_s", "lower_bound_hops_s",
                  "price_hops_s", "time_sync_s")}, "schema": "time_hops_s" in schema.ROW_FIELDS, "rc": rc,
                  "stored": float(df["time_hops_s"].iloc[0]), "proofs": list(render.proofs(df).columns)}))
'''


def test_a_new_module_is_priced_stored_and_tabled(tmp_path):
    (tmp_path / "plugin").mkdir()
    (tmp_path / "plugin" / "hops.py").write_text(HOPS)
    (tmp_path / "r.toml").write_text('name = "ring4"\n[topology]\ngenerator = "ring"\nnodes = 4\nbidirectional = false\n'
                                     '[collective]\nkind = "allgather"\n')
    ring = [[(u - t) % 4, "0", "1", u, (u + 1) % 4, t + 1] for t in range(3) for u in range(4)]
    (tmp_path / "s.json").write_text(json.dumps({"format": "collsynth.schedule/1", "collective": "allgather",
                                                 "nodes": 4, "chunks": 4, "sends": ring}))
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "plugin"), str(tmp_path / "r.toml"),
                          str(tmp_path / "store"), str(tmp_path / "s.json")], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["names"] == ["hops", "sync", "ten", "event"]  # cheapest first
    # a unidirectional 4-ring allgather: 3 steps of 4 sends, one hop each
    assert got["row"]["time_hops_s"] == 12.0 and got["row"]["price_hops_s"] is not None
    assert got["row"]["lower_bound_hops_s"] is None  # no bound declared: none reported
    assert got["row"]["time_sync_s"] is not None
    assert got["schema"] and got["stored"] == 12.0
    priced = json.loads(out.stdout.strip().splitlines()[0])  # `collsynth price --model hops --json`
    assert got["rc"] == 0 and priced["total_s"] == 12.0 and priced["model"] == "hops"
    assert priced["bound_source"].startswith("not computed")
    assert "gap0_hops" in got["proofs"]


def test_registry_order_columns_and_unknown_names():
    assert cost_models.names() == ("sync", "ten", "event")
    assert [m.price_column for m in cost_models.MODELS.values()] == ["price_sync_s", "price_ten_s", "price_event_s"]
    assert [c.name for c in cost_models.MODELS["sync"].columns] == ["T_L_s", "T_B_s"]
    inst = instance_on("ring", {"nodes": 3})
    with pytest.raises(InputError, match="unknown cost model 'magic'.*sync, ten, event"):
        cost_models.price(from_sends([], "allgather", 3, 3), inst, "magic")


def test_every_model_prices_like_its_implementation():
    # the registry adds nothing of its own: each model's price is its implementation's
    from collsynth.tens import cost
    inst = instance_on("ring", {"nodes": 5}, "allgather", message_bytes=5e6)
    s = from_sends([(u, 0, 1, u, (u + 1) % 5, 1) for u in range(5)], "allgather", 5, 5)
    direct = {"sync": cost.price_sync(s, inst), "ten": cost.price_ten(s, inst), "event": cost.price_event(s, inst)}
    for name, c in direct.items():
        assert cost_models.price(s, inst, name).total_s == c.total_s
