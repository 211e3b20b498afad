"""MSCCL++ execution plans (collsynth.tens.export_mscclpp) judged by tests/mscclpp_sim.py.

Every verified schedule stored for the quick suite (results/quick-store: every kind and
producer of the quick corpus) is exported and run by the interpreter, which knows only the
plan format and the collective's definition; fractional BFB pieces and routes through
switches are run too. The interpreter itself is shown to fail: plans with one wait, one
semaphore acquire or one put removed, or a reduction doubled, are rejected. ``python
tests/mscclpp_table.py`` prints the kind x producer table.
"""

from __future__ import annotations

import copy
import json
import sqlite3
from pathlib import Path

import pytest

from cli_errors import assert_one_error_line, run_cli
from mscclpp_sim import Rejected, run_plan

import collsynth as cs
from collsynth import InputError
from collsynth.instances.instance import load_instance
from collsynth.tens.export_mscclpp import COLLECTIVES, to_mscclpp_plan
from collsynth.tens.readback import verified_mscclpp_plan
from collsynth.tens.peer_plans import read_mscclpp_plan
from collsynth.tens.peer_schedules import _routed
from collsynth.tens.schedule import read_json, write_json
from collsynth.tens.verify import verify

ROOT = Path(__file__).resolve().parent.parent
STORE = ROOT / "results" / "quick-store"
REFUSALS = ("the MSCCL++ executor runs", "runs one collective")


def stored_runs() -> list[tuple]:
    """(instance, producer, schedule file, instance file) of every verified stored schedule."""
    with sqlite3.connect(STORE / "runs.sqlite") as db:
        rows = db.execute("select instance, producer, schedule_path, instance_file from runs "
                          "where verified = 1 and schedule_path is not null order by instance, producer").fetchall()
    return [(i, p, STORE / s, ROOT / f if not Path(f).is_absolute() else Path(f)) for i, p, s, f in rows]


def export_and_run(schedule, instance, seeds=(0,)) -> str:
    """'pass', or 'refused: <why>' when the exporter refuses; the interpreter's rejection raises."""
    try:
        plan = to_mscclpp_plan(schedule, instance)
    except InputError as e:
        return f"refused: {e.what}"
    plan = json.loads(json.dumps(plan))  # what a file holds
    run_plan(plan, COLLECTIVES[instance.collective.kind], len(instance.collective.nodes), seeds=seeds)
    return "pass"


# Fractional TEN-LP reductions whose plans take the interpreter a minute or more each, and the
# biggest fractional copies (pieces of 1/1024: twisted torus and 4x4 torus allgather, 717-1,195
# sends, 10-25 s each; HyperX alltoall, the same 331 sends as the 3x3 torus's): run with the
# benchmarks (``-m benchmark``) and by tests/mscclpp_table.py; every kind and producer is still
# covered here by its other stored schedules (ring6-allreduce ten-lp among them; pieces of
# 1/1024 by the generalized Kautz allgather and the 3x3 torus alltoall).
SLOW_PLANS = {("hypercube3-allreduce", "ten-lp"), ("dgx1-allreduce", "ten-lp"),
              ("petersen-line-reduce-scatter", "ten-lp"), ("twisted-torus3-allgather", "ten-lp"),
              ("torus4x4-allgather", "ten-lp"), ("hyperx3x3-alltoall", "ten-lp")}


def quick_corpus_cases() -> list:
    """The stored runs as test cases, the slow plans marked as benchmarks."""
    return [pytest.param(*run, marks=pytest.mark.benchmark) if run[:2] in SLOW_PLANS else run
            for run in stored_runs()]


@pytest.mark.parametrize("instance_name,producer,schedule_file,instance_file", quick_corpus_cases(),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_quick_corpus_plans_pass_the_interpreter(instance_name, producer, schedule_file, instance_file):
    instance = load_instance(instance_file)
    schedule = read_json(schedule_file)
    outcome = export_and_run(schedule, instance)
    if outcome == "pass":  # and the plan, read back op by op, is a schedule that verifies
        back = read_mscclpp_plan(verified_mscclpp_plan(schedule, instance), instance)
        assert verify(_routed(back, instance), instance) is None
    if outcome != "pass":  # only what the executor cannot run: other kinds, concurrent collectives
        assert any(r in outcome for r in REFUSALS), outcome
        kind = "concurrent" if instance.concurrent else instance.collective.kind
        assert kind not in COLLECTIVES, outcome


def test_the_store_covers_every_kind_the_executor_runs():
    kinds = {load_instance(f).collectives[0].kind for _, _, _, f in stored_runs()}
    assert set(COLLECTIVES) <= kinds


def _solve(topology, kind, producer, **kw):
    inst = cs.make_instance(topology, kind, message_bytes=1 << 20, chunks_per_node=kw.pop("chunks", 1),
                            root=0 if kind == "broadcast" else None)
    r = cs.solve(inst, producer, **kw)
    assert r.verified, r.row
    return r.schedule, inst


@pytest.mark.parametrize("kind", ["allgather", "reduce_scatter", "allreduce"])
def test_fractional_bfb_pieces(kind):
    schedule, inst = _solve({"generator": "hypercube", "dim": 3}, kind, "bfb-lp")
    assert schedule.denom > 1  # BFB splits shards into fractions on a hypercube
    assert export_and_run(schedule, inst, seeds=(0, 1)) == "pass"


@pytest.mark.parametrize("topology", [{"generator": "switch", "nodes": 5, "unwind": 0},
                                      {"generator": "dgx_a100", "nodes": 2}])
def test_greedy_routes_through_switches(topology):
    schedule, inst = _solve(topology, "allgather", "greedy")
    switches = set(inst.topology.switches)
    assert switches and set(schedule.dst.tolist()) & switches  # it does route through a switch
    plan = to_mscclpp_plan(schedule, inst)
    assert export_and_run(schedule, inst, seeds=(0, 1)) == "pass"
    types = {ch["channel_type"] for g in plan["gpus"] for ch in g["channels"]}
    assert types == ({"memory", "port"} if "dgx" in topology["generator"] else {"memory"})


def test_a_switch_forwarding_what_it_never_got_is_refused():
    schedule, inst = _solve({"generator": "switch", "nodes": 4, "unwind": 0}, "allgather", "greedy")
    keep = ~((schedule.dst >= 4) & (schedule.chunk == 0))  # drop the sends of chunk 0 into the switch
    with pytest.raises(InputError, match="no send into it brought"):
        to_mscclpp_plan(schedule.select(keep), inst)


@pytest.fixture(scope="module")
def ring_plans():
    out = {}
    for kind in ("allgather", "reduce_scatter", "allreduce", "alltoall"):
        schedule, inst = _solve({"generator": "ring", "nodes": 4}, kind, "greedy" if kind != "allreduce" else "ring")
        out[kind] = json.loads(json.dumps(to_mscclpp_plan(schedule, inst)))
    return out


def _ops(plan):
    for g, gpu in enumerate(plan["gpus"]):
        for t, tb in enumerate(gpu["threadblocks"]):
            for k, op in enumerate(tb["ops"]):
                yield g, t, k, op


def _without(plan, name, which=0):
    """``plan`` with its ``which``-th op called ``name`` removed."""
    found = [(g, t, k) for g, t, k, op in _ops(plan) if op["name"] == name]
    g, t, k = found[which]
    out = copy.deepcopy(plan)
    del out["gpus"][g]["threadblocks"][t]["ops"][k]
    return out


@pytest.mark.parametrize("kind", ["allgather", "reduce_scatter", "allreduce", "alltoall"])
def test_ring_plans_pass_and_their_mutants_fail(ring_plans, kind):
    plan, coll = ring_plans[kind], COLLECTIVES[kind]
    assert run_plan(plan, coll, 4)["ops"] > 0
    for name in ("wait", "signal", "put"):
        with pytest.raises(Rejected):
            run_plan(_without(plan, name), coll, 4)
    if any(op["name"] == "sem_acquire" for *_, op in _ops(plan)):
        with pytest.raises(Rejected):
            run_plan(_without(plan, "sem_acquire"), coll, 4)


def test_a_doubled_reduction_is_rejected(ring_plans):
    plan = copy.deepcopy(ring_plans["reduce_scatter"])
    g, t, k, op = next(x for x in _ops(plan) if x[3]["name"] == "re")
    plan["gpus"][g]["threadblocks"][t]["ops"].insert(k + 1, copy.deepcopy(op))
    with pytest.raises(Rejected, match="twice"):
        run_plan(plan, "reducescatter", 4)


def test_a_put_to_the_wrong_place_is_rejected(ring_plans):
    plan = copy.deepcopy(ring_plans["allgather"])
    g, t, k, op = next(x for x in _ops(plan) if x[3]["name"] == "put")
    op["dst_buff"][0]["index"] = (op["dst_buff"][0]["index"] + 1) % 4
    with pytest.raises(Rejected):
        run_plan(plan, "allgather", 4)


def test_refusals_say_why():
    for topology, kind, producer, why in [
        ({"generator": "ring", "nodes": 4}, "broadcast", "ring", "this instance is a broadcast"),
    ]:
        schedule, inst = _solve(topology, kind, producer)
        with pytest.raises(InputError, match=why):
            to_mscclpp_plan(schedule, inst)
    schedule, inst = _solve({"generator": "complete", "nodes": 6}, "allgather", "direct")
    with pytest.raises(InputError, match="thread blocks on one GPU"):
        to_mscclpp_plan(schedule, inst, max_threadblocks=3)


@pytest.mark.parametrize("kind", ["allgather", "reduce_scatter", "allreduce"])
def test_shortest_path_sends_are_relayed(kind):
    schedule, inst = _solve({"generator": "torus", "dims": [3, 3]}, kind, "recursive-doubling")
    assert schedule.routing == "shortest-path"
    assert export_and_run(schedule, inst, seeds=(0, 1)) == "pass"


def test_cli_export_and_its_bad_input(tmp_path, capsys):
    schedule, inst = _solve({"generator": "ring", "nodes": 4}, "allgather", "ring")
    toml = tmp_path / "ring4.toml"
    toml.write_text('name = "ring4"\n[topology]\ngenerator = "ring"\nnodes = 4\n[collective]\nkind = "allgather"\n')
    sched = tmp_path / "s.json"
    write_json(schedule, sched)
    code, out, _ = run_cli(["export", sched, toml, "--format", "mscclpp-json", "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["format"] == "mscclpp-json"
    assert run_plan(json.loads(data["content"]), "allgather", 4)["ops"] > 0
    code, _, err = run_cli(["export", sched, toml, "--format", "mscclpp-json", "--max-threadblocks", "1"], capsys)
    assert code == 2
    assert_one_error_line(err, [str(sched), "thread blocks"])
    toml.write_text(toml.read_text().replace('"allgather"', '"broadcast"\nroot = 0'))
    bcast, binst = _solve({"generator": "ring", "nodes": 4}, "broadcast", "ring")
    write_json(bcast, sched)
    code, _, err = run_cli(["export", sched, toml, "--format", "mscclpp-json"], capsys)
    assert code == 2
    assert_one_error_line(err, [str(sched), "broadcast"])


def test_verified_plan_text_is_json():
    schedule, inst = _solve({"generator": "ring", "nodes": 3}, "allgather", "ring")
    plan = json.loads(verified_mscclpp_plan(schedule, inst))
    assert plan["collective"] == "allgather" and len(plan["gpus"]) == 3


def test_the_worked_example_in_the_docs_is_what_the_exporter_writes():
    text = (ROOT / "docs" / "schedules.md").read_text()
    block = text.split("### A worked example: allgather on 4 GPUs")[1].split("```json\n")[1].split("```")[0]
    documented = json.loads(block)
    schedule, inst = _solve({"generator": "ring", "nodes": 4, "bidirectional": False}, "allgather", "ring")
    plan = to_mscclpp_plan(schedule, inst)
    assert documented == plan["gpus"][0]
    assert run_plan(json.loads(json.dumps(plan)), "allgather", 4)["ops"] > 0


def test_long_schedules_are_cut_into_windows_under_64_ops():
    schedule, inst = _solve({"generator": "ring", "nodes": 16}, "allreduce", "ring")  # 30 steps
    plan = to_mscclpp_plan(schedule, inst)
    peers = plan["gpus"][0]["channels"][0]["connected_to"]
    assert len(peers) > len(set(peers))  # several channels (windows) to one peer
    assert max(len(tb["ops"]) for g in plan["gpus"] for tb in g["threadblocks"]) <= 64
    assert run_plan(json.loads(json.dumps(plan)), "allreduce", 16)["ops"] > 0
