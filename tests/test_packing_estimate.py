"""Tree packing's size estimate before packing: the fewest sends counted by hand, never more
than a packed schedule has, and a refusal that names the topology field (not a parameter the
user never set) before any packing."""

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
