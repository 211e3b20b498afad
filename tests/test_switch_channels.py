"""MSCCL++ plans with switch channels (``tens/export_switch.py``): every plan written for an
NVLS-class allreduce runs on the tests' interpreter of the executor (``tests/mscclpp_sim.py``,
which shares no code with the exporter) and computes the allreduce; read back, it is the
schedule it was written from, verified; mutants of the plan are refused."""

from __future__ import annotations

import copy
import json

import pytest
from mscclpp_sim import Rejected, run_plan

from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.solvers.producers import Options, get
from collsynth.tens.export_mscclpp import to_mscclpp_plan
from collsynth.tens.readback import verified_mscclpp_plan
from collsynth.tens.peer_schedules import read_peer_text
from collsynth.tens.verify import verify


def nvls(n: int, pieces: int, system: str = "switch"):
    params = {"nodes": n, "reduce": True, "copy": True} if system == "switch" else {"nodes": 1, "nvls": True}
    inst = make_instance(build(system, params), "allreduce", message_bytes=1e6)
    return get("nvls").run(inst, Options(params={"pieces": pieces})).schedule, inst


CASES = [(2, 1, "switch"), (3, 2, "switch"), (4, 3, "switch"), (8, 5, "switch"), (8, 64, "dgx_h100")]


@pytest.mark.parametrize("n, pieces, system", CASES)
def test_every_switch_channel_plan_runs_on_the_interpreter(n, pieces, system):
    s, inst = nvls(n, pieces, system)
    plan = json.loads(verified_mscclpp_plan(s, inst))
    ops = [op["name"] for gpu in plan["gpus"] for tb in gpu["threadblocks"] for op in tb["ops"]]
    assert ops.count("glres") == n * pieces  # one group operation per chunk and piece
    assert run_plan(plan, "allreduce", n)["ops"] == len(ops)
    back = read_peer_text(json.dumps(plan), "mscclpp-json", inst)
    assert verify(back, inst) is None and len(back) == len(s)


def test_mutant_plans_are_refused():
    s, inst = nvls(4, 2)
    plan = to_mscclpp_plan(s, inst)
    blocks = plan["gpus"][1]["threadblocks"]
    at = next(t for t, tb in enumerate(blocks) if any(op["name"] == "glres" for op in tb["ops"]))
    k = next(i for i, op in enumerate(blocks[at]["ops"]) if op["name"] == "glres")
    dropped, doubled = copy.deepcopy(plan), copy.deepcopy(plan)
    del dropped["gpus"][1]["threadblocks"][at]["ops"][k]
    doubled["gpus"][1]["threadblocks"][at]["ops"].insert(k, copy.deepcopy(blocks[at]["ops"][k]))
    with pytest.raises(Rejected, match="holds"):
        run_plan(dropped, "allreduce", 4)
    with pytest.raises(Rejected, match="twice"):
        run_plan(doubled, "allreduce", 4)
