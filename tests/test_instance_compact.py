"""`collsynth instance` counts what a run can keep: an instance whose explicit sends exceed the
memory budget is still valid where a producer keeps its schedule smaller (tree packing's trees
kept as trees), and says so; refused in one line where nothing fits. The diameter of identical
boxes searched from one box equals the all-pairs one."""

import json

from cli_errors import assert_one_error_line, run_cli

TOML = ('name = "dgx2k"\n[topology]\ngenerator = "dgx_h100"\nnodes = 256\n'
        '[collective]\nkind = "allgather"\nmessage_bytes = 1073741824\n')
GPUS = 2048
# explicit: 2048 x 2047 deliveries, each at least one send: over 4 M sends of 768 B (3 GiB);
# kept as trees: one root's trees, 2047 others over at least 2 hops: 4,094 listed hops (3 MiB)
BUDGET = 256 << 20


def test_valid_where_the_trees_fit(tmp_path, capsys):
    path = tmp_path / "dgx2k.toml"
    path.write_text(TOML)
    code, out, err = run_cli(["instance", path, "--max-memory", BUDGET, "--json"], capsys)
    assert code == 0, err
    size = json.loads(out)["size"]
    assert size["sends_at_least"] >= GPUS * (GPUS - 1) and not size["explicit_fits"]
    [kept] = size["kept_smaller"]
    assert kept["producer"] == "tree-packing" and kept["bytes"] == 4094 * 768


def test_refused_where_nothing_fits(tmp_path, capsys):
    path = tmp_path / "dgx2k.toml"
    path.write_text(TOML)
    code, out, err = run_cli(["instance", path, "--max-memory", 1 << 20], capsys)  # 1 MiB: not even the trees
    assert code == 2
    assert_one_error_line(err, [str(path), "topology.nodes"])

