"""Tree packing's size estimate before packing: the fewest sends counted by hand, never more
than a packed schedule has, and a refusal that names the topology field (not a parameter the
user never set) before any packing."""

import json

import pytest

from cli_errors import assert_one_error_line, run_cli
from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.instances.size import BYTES_PER_SEND, estimate
from collsynth.solvers.packing.estimate import least_sends
from collsynth.solvers import pipeline
from collsynth.solvers.producers import Options


@pytest.mark.parametrize("gen, params, kind, expected", [
    # a ring of 5: every GPU has a neighbour one hop away; 5 roots x 4 others x 1 hop
    ("ring", {"nodes": 5}, "allgather", 5 * 4),
    ("ring", {"nodes": 5}, "allreduce", 2 * 5 * 4),  # reduce-scatter and allgather forests
    # Al-Fares k = 4: a host's nearest host shares its edge switch, 2 hops; 16 x 15 x 2
    ("fat_tree", {"k": 4}, "allgather", 16 * 15 * 2),
    # DGX H100 x 2: GPUs meet at NVSwitch, 2 hops; broadcast from one root to 15 others
    ("dgx_h100", {"nodes": 2}, "broadcast", 15 * 2),
])
def test_least_sends_by_hand(gen, params, kind, expected):
    kw = {"root": 0} if kind == "broadcast" else {}
    assert least_sends(make_instance(build(gen, params), kind, **kw)) == expected


@pytest.mark.parametrize("gen, params", [
    ("fat_tree", {"k": 4}),
    ("rail_clos", {"groups_per_pod": 2, "boxes_per_group": 2, "gpus_per_box": 2, "rails": 2, "spines": 2,
                   "radix": 4}),
    ("torus", {"dims": [3, 3]}),
])
def test_a_packed_schedule_has_at_least_the_estimate(gen, params):
    inst = make_instance(build(gen, params), "allgather", message_bytes=1 << 20)
    row, sched = pipeline.run(inst, "tree-packing", Options(params={"pieces": 1}))
    assert row["verified"] and len(sched) >= least_sends(inst)


def test_refused_before_packing_naming_the_topology_field(tmp_path, capsys):
    path = tmp_path / "big.toml"
    path.write_text('name = "big"\n[topology]\ngenerator = "dgx_h100"\nnodes = 4\n'
                    '[collective]\nkind = "allgather"\nmessage_bytes = 1073741824\n')
    inst = make_instance(build("dgx_h100", {"nodes": 4}), "allgather")
    arrays, schedule = estimate(inst, horizon=1).bytes, least_sends(inst) * BYTES_PER_SEND
    assert arrays < schedule  # a budget between them passes the instance and refuses the run
    budget = (arrays + schedule) // 2
    code, out, err = run_cli(["solve", path, "--producer", "tree-packing", "--max-memory", budget], capsys)
    assert code == 2
    line = assert_one_error_line(err, [str(path), "topology.nodes", "tree-packing", f"{least_sends(inst):,} sends"])
    assert "--param pieces" not in line


# DGX H100 x 16: 128 GPUs meeting at NVSwitch, 2 hops from each other (the doctest of least_hops_in)
GPUS = 128
EXPLICIT_SENDS = GPUS * (GPUS - 1) * 2  # every root reaches 127 others over 2 hops: 32,512 sends
LISTED_HOPS = (GPUS - 1) * 2  # the trees of one root at least: 254 hops
BUDGET = 8 << 20  # the topology of 152 nodes and its conditions hold well under 1 MiB of it; 32,512 sends do not


def test_the_size_check_counts_the_form_the_run_keeps():
    from collsynth.instances import size
    from collsynth.limits import TooBig, set_memory_budget
    from collsynth.solvers.producers import get, planned

    assert EXPLICIT_SENDS * BYTES_PER_SEND > BUDGET > 16 * LISTED_HOPS * BYTES_PER_SEND
    inst = make_instance(build("dgx_h100", {"nodes": 16}), "allgather", message_bytes=1 << 30)
    prod = get("tree-packing")
    set_memory_budget(BUDGET)
    try:
        with pytest.raises(TooBig):  # no producer named: the fewest sends of any schedule, 128 x 127
            size.check_run(inst)
        compact = planned(prod, inst, {"form": "compact"})
        assert compact.bytes == LISTED_HOPS * BYTES_PER_SEND
        assert size.check_run(inst, compact).sends == GPUS * (GPUS - 1)  # accepted
        with pytest.raises(TooBig) as err:
            size.check_run(inst, planned(prod, inst, {"form": "explicit"}))
        assert err.value.where == "--param form"
        assert f"{EXPLICIT_SENDS:,} sends" in err.value.what and "--param form=compact" in err.value.what
        with pytest.raises(TooBig) as err:  # auto keeps explicit sends at this size: the topology is to blame
            size.check_run(inst, planned(prod, inst, {}))
        assert err.value.where == "topology.nodes" and "--param form=compact" in err.value.what
    finally:
        set_memory_budget(None)


def test_solve_refuses_explicit_sends_before_the_work_and_runs_the_trees(tmp_path, capsys):
    path = tmp_path / "dgx16.toml"
    path.write_text('name = "dgx16"\n[topology]\ngenerator = "dgx_h100"\nnodes = 16\n'
                    '[collective]\nkind = "allgather"\nmessage_bytes = 1073741824\n')
    explicit = ["solve", path, "--producer", "tree-packing", "--param", "form=explicit", "--max-memory", BUDGET,
                "--time-limit", "0.001"]  # refused before anything runs, so no time is needed
    code, out, err = run_cli(explicit, capsys)
    assert code == 2
    assert_one_error_line(err, [str(path), "--param form", f"{EXPLICIT_SENDS:,} sends", "--param form=compact"])
    compact = ["solve", path, "--producer", "tree-packing", "--param", "form=compact", "--max-memory", BUDGET,
               "--json"]
    code, out, err = run_cli(compact, capsys)
    assert code == 0, err
    [row] = json.loads(out)["rows"]
    assert row["verified"] and row["extra"]["form"] == "pipelined-trees"
