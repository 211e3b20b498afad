"""Choosing among finished forests of different shapes (solvers/packing/shapes.py, the producer's
``by_shape``): the least priced sum under the run's models is kept; a schedule that does not
verify never is; the ring trees' door rules (solvers/packing/rings.py)
by hand on TE-CCL's DGX-2; the greedy probe runs no flow-tested growth.

The prices in the first tests are stand-ins written by hand (DGX H100 at two boxes, 1 GB
allgather, ``benchmarks/bench_packing.py``: the greedy trees 1.0022x the bound under ``event``,
1.0010x under ``sync`` and 1.0002x under ``event-inorder``; the ring trees 1.0003x, 1.0033x and
1.0022x).
"""

from __future__ import annotations

import pytest

from collsynth.instances.instance import make_instance, topology_from_dict
from collsynth.solvers.packing import rings, shapes
from collsynth.solvers.packing.producer import forest
from collsynth.tens import verify as verify_module
from collsynth.tens.cut_optimum import flow_net, optimum

GREEDY = {"event": 1.0022, "sync": 1.0010, "event-inorder": 1.0002}
RINGS = {"event": 1.0003, "sync": 1.0033, "event-inorder": 1.0022}


def test_the_least_sum_over_the_models_is_kept():
    """Under sync + event the greedy trees (2.0032) beat the rings (2.0036); under event alone
    the rings."""
    greedy = shapes.Priced("greedy", 1, {m: GREEDY[m] for m in ("event", "sync")})
    ring = shapes.Priced("rings", 1, {m: RINGS[m] for m in ("event", "sync")})
    assert shapes.kept([ring, greedy]) == "greedy"
    assert shapes.kept([shapes.Priced("rings", 1, {"event": RINGS["event"]}),
                        shapes.Priced("greedy", 1, {"event": GREEDY["event"]})]) == "rings"


def test_ties_go_to_the_earlier():
    assert shapes.kept([shapes.Priced("rings", 1, dict(GREEDY)), shapes.Priced("greedy", 1, dict(GREEDY))]) == "rings"


def test_only_the_models_every_candidate_was_priced_under_are_compared():
    """``event`` cannot price instant switch hops: it is left out of every comparison."""
    ref = shapes.Priced("ref", 1, {"sync": 2.0})
    other = shapes.Priced("other", 1, {"sync": 1.0, "event": 9.0})
    assert shapes.kept([ref, other]) == "other"


def test_a_schedule_that_does_not_verify_is_never_kept(monkeypatch):
    """Three stand-in schedules: the one with the least prices does not verify."""
    times = {"rings": RINGS, "broken": {m: 1.0 for m in GREEDY}, "greedy": GREEDY}
    monkeypatch.setattr(verify_module, "verify", lambda sched, inst: "bad" if sched == "broken" else None)
    monkeypatch.setattr(shapes, "prices", lambda inst, sched, models: {m: times[sched][m] for m in models})
    name, priced = shapes.choose(None, {k: (lambda k=k: k) for k in times}, ("event", "sync", "event-inorder"))
    assert name == "greedy" and [p.name for p in priced] == ["rings", "greedy"]


def _entry_gpus(trees, root_box: int) -> dict:
    """For each tree rooted in ``root_box``, the GPU where it first lands in the other chassis."""
    out = {}
    for t in trees:
        if t.root // 16 == root_box and t.root not in out:
            out[t.root] = next(r[-1] for r in t.routes if r[0] // 16 == root_box and r[-1] // 16 != root_box and
                               len(r) == 2)
    return out


def test_dgx2_door_rules_by_hand():
    """TE-CCL's DGX-2 at two chassis (16 GPUs on an NVSwitch each; odd GPU 2k+1 of a chassis
    links to even GPU 2k of the other): one ring per chassis in id order, so a root's position
    is its id within the chassis. ``aim``: the tree of the root at position i enters the other
    chassis at the door landing at position i or the nearest before it, GPU 2 floor(i / 2);
    ``in turn``: at the (i mod 8)-th of the eight links in id order, GPU 2 (i mod 8)."""
    topo = topology_from_dict({"generator": "dgx2", "chassis": 2, "unwind": 0, "nvswitch_alpha": 0.0,
                               "nic_alpha": 0.0})
    net0 = flow_net(topo, topo.npus, [1] * 32)
    found = rings.find_each(net0, optimum(net0).tau)
    assert list(found) == ["aim", "in turn"]
    assert _entry_gpus(found["aim"][0], 0) == {i: 16 + 2 * (i // 2) for i in range(16)}
    assert _entry_gpus(found["in turn"][0], 0) == {i: 16 + 2 * (i % 8) for i in range(16)}
    assert _entry_gpus(found["in turn"][0], 1) == {16 + i: 2 * (i % 8) for i in range(16)}


@pytest.mark.parametrize("boxes, packed", [(2, True), (4, False)])
def test_the_greedy_probe_runs_no_flow_tested_growth(boxes, packed):
    """DGX H100, alpha 0: at two boxes the split network moves box by box, so the greedy trees
    are packed by translation (no max flow) and the probe gives the greedy packing's trees; at
    four the translated growth gets stuck and the probe gives up instead of growing trees by
    max flows (the root-order search there took 2,225 s)."""
    topo = topology_from_dict({"generator": "dgx_h100", "nodes": boxes, "nvlink_alpha": 0.0, "nic_alpha": 0.0})
    inst = make_instance(topo, "allgather", message_bytes=1e9)
    probe = forest(inst, "allgather", False, shape="greedy", probe=True)
    assert (probe is not None) == packed
    if packed:
        assert probe.trees == forest(inst, "allgather", False, shape="greedy").trees


@pytest.mark.parametrize("generator, params", [("dgx_h100", {"nodes": 2, "nvlink_alpha": 0.0, "nic_alpha": 0.0}),
                                               ("dgx2", {"chassis": 2, "unwind": 0, "nvswitch_alpha": 0.0, "nic_alpha": 0.0})])
def test_the_run_keeps_the_least_priced_forest_and_says_for_which_models(generator, params):
    """A run at 8 pieces: the candidates (the rings by each door rule, the greedy probe where it
    packs) are recorded with their prices under sync and event; the kept one has the least
    sum, the row says it was chosen for sync+event, and the pipeline's own prices of the run's
    schedule are the kept one's."""
    from collsynth.solvers import pipeline
    from collsynth.solvers.producers import Options

    inst = make_instance(topology_from_dict({"generator": generator, **params}), "allgather", message_bytes=1e9)
    row, _ = pipeline.run(inst, "tree-packing", Options(params={"pieces": 8}, time_limit=600))
    assert row["verified"], row["message"]
    f = row["extra"]["forests"][0]
    assert f["shape_chosen_for"] == "sync+event" and len(f["shapes_tried"]) >= 2
    tried = {t["shape"]: t["event_s"] + t["sync_s"] for t in f["shapes_tried"]}
    name = f["shape"] + (f" ({f['door_rule']})" if f.get("door_rule") else "")
    assert tried[name] == min(tried.values())
    assert tried[name] == pytest.approx(row["time_event_s"] + row["time_sync_s"], rel=1e-12)


def test_the_help_strings_are_formatted_from_the_constants():
    """The pieces default names the floor and the per-hop factor the code uses (the floor once
    made a hand-written "100 per hop" wrong); the shape help names the door rules."""
    from collsynth.solvers.packing import producer

    helps = {p.name: p.help for p in producer.PARAMS}
    assert f"{producer.DEPTH_FACTOR} per hop" in helps["pieces"] and f"at least {producer.PIECES_FLOOR}" in helps["pieces"]
    assert f"{producer.SEND_BUDGET:,} sends" in helps["pieces"]
    assert all(rule in helps["shape"] for rule in rings.DOOR_RULES)
