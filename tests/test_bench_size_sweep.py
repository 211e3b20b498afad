"""The size sweep's reduce-scatter and allreduce rows (benchmarks/bench_size_sweep.py), on one
small size with the closed-form methods only (the packing's rows are the benchmark's to run)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_size_sweep as sweep  # noqa: E402

A100 = [s for s in sweep.SYSTEMS if s[0] == "A100 x2"]
KB64 = 65536


def test_one_reduce_scatter_size_is_verified_and_priced_and_the_allreduce_only_trees_are_na(monkeypatch):
    """Reduce-scatter at 64 KB on A100 x2: both rings verify and are priced under both models;
    NCCL's rings split the same ring steps over one channel per NIC, so they are no slower than
    the one classic ring under either model; the double binary tree and NCCL's trees have no
    reduce-scatter (n/a), and the allreduce's double binary tree is verified and priced."""
    from collsynth.solvers.packing import forests

    monkeypatch.setattr(forests, "forest", forests.forest)  # the sweep memoises it: undone after
    methods = ("ring", "nccl-ring", "double-binary-tree", "nccl-tree")
    results = sweep.sweep(A100, [KB64], methods, ("reduce_scatter", "allreduce"))
    rs = {m: results[("A100 x2", "reduce_scatter", KB64, m)] for m in methods}
    for m in ("ring", "nccl-ring"):
        assert rs[m]["verified"] and rs[m]["event"] > 0 and rs[m]["sync"] > 0, rs[m]
    for model in sweep.MODELS:
        assert rs["nccl-ring"][model] <= rs["ring"][model] * (1 + 1e-9)
    assert rs["double-binary-tree"]["status"] == rs["nccl-tree"]["status"] == "n/a"
    ar = results[("A100 x2", "allreduce", KB64, "double-binary-tree")]
    assert ar["verified"] and ar["event"] > 0 and ar["sync"] > 0, ar
    text = sweep.table(results, "A100 x2", [KB64], ("ring",) + methods[1:], "sync", "reduce_scatter")
    assert text.startswith("A100 x2 reduce_scatter, sync model") and "| n/a | n/a |" in text


def test_runs_saved_before_kinds_load_as_allgather(tmp_path):
    """A JSON saved before ``--kinds`` (no ``kind`` field) is read back as allgather rows."""
    old = tmp_path / "old.json"
    old.write_text(json.dumps([{"system": "A100 x2", "size": KB64, "method": "ring", "status": "constructed",
                                "event": 1e-5, "sync": 2e-5}]))
    assert sweep.load([old]) == {("A100 x2", "allgather", KB64, "ring"): {
        "system": "A100 x2", "size": KB64, "method": "ring", "status": "constructed", "event": 1e-5, "sync": 2e-5}}


def test_an_unknown_kind_is_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        sweep.main(["--kinds", "reduce-scatter"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--kinds: unknown reduce-scatter; expected some of allgather, reduce_scatter, allreduce" in err


def test_a_cell_past_its_limit_says_timed_out_and_the_larger_sizes_say_not_run(monkeypatch):
    """A cell whose method outlives ``cell_limit`` (a stand-in sleeping 30 s against 1 s: only a
    stopped cell says so) is stopped and says ``timed out`` (not blank),
    the method is not run at the larger sizes of that kind (their cells say why), a method that
    raises says ``error`` with its line, and the table prints each status where a time would be."""
    import time

    from collsynth.solvers.packing import forests

    monkeypatch.setattr(forests, "forest", forests.forest)  # the sweep memoises it: undone after

    def fake(inst, method, cell_limit=None):
        if method == "ring":
            time.sleep(30)
        if method == "greedy":
            raise ValueError("no route")
        return {"status": "constructed", "verified": True, "event": 1e-5, "sync": 2e-5}

    monkeypatch.setattr(sweep, "run_method", fake)
    results = sweep.sweep(A100, [KB64, 4 * KB64], ("ours", "ring", "greedy"), ("reduce_scatter",), cell_limit=1)
    cell = {(s, m): results[("A100 x2", "reduce_scatter", s, m)] for s in (KB64, 4 * KB64)
            for m in ("ours", "ring", "greedy")}
    assert cell[KB64, "ours"]["event"] == 1e-5 and cell[4 * KB64, "ours"]["sync"] == 2e-5
    assert cell[KB64, "ring"]["status"] == "timed out"
    assert cell[4 * KB64, "ring"]["status"] == "not run (timed out at 64 KB)"
    assert cell[KB64, "greedy"]["status"] == "error" and "ValueError: no route" in cell[KB64, "greedy"]["message"]
    text = sweep.table(results, "A100 x2", [KB64, 4 * KB64], ("ours", "ring", "greedy", "nccl-ring"), "event",
                       "reduce_scatter")
    assert "| 64 KB | 10.0 (1.00) | timed out | error | not run | yes (3 without a time) |" in text
    assert "| 256 KB | 10.0 (1.00) | not run (timed out at 64 KB) | error | not run | yes (3 without a time) |" in text


def test_a_non_positive_cell_limit_is_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        sweep.main(["--cell-limit", "0"])
    assert e.value.code == 2
    assert "--cell-limit: expected a positive number of seconds, got 0" in capsys.readouterr().err


def test_forestcoll_fixed_under_a_byte_a_piece_is_refused_before_anything_is_emitted(monkeypatch):
    """A100 x2 at 64 KB: a 4,096 B chunk (16 GPUs, one chunk each); stand-in forests of k = 4
    units a shard whose smallest tree carries 1 unit: a quarter chunk, 1,024 B, over the fixed
    pieces. At 2,048 pieces that is 0.5 B a piece (by hand): refused, saying so, without
    building the schedule; at 1,024 pieces exactly 1 B: not refused."""
    from types import SimpleNamespace

    from collsynth.instances.generators import build
    from collsynth.instances.instance import make_instance
    from collsynth.solvers import pipeline
    from collsynth.solvers.packing import forests

    stand_in = SimpleNamespace(k=4, trees=[SimpleNamespace(lo=0, hi=1), SimpleNamespace(lo=1, hi=4)])
    monkeypatch.setattr(forests, "forest", lambda *a, **kw: stand_in)
    inst = make_instance(build(A100[0][1], A100[0][2]), "reduce_scatter", message_bytes=KB64)
    assert inst.collective.chunk_bytes == 4096
    assert sweep.too_small(inst, {"pieces": 1024, "trees": 4}) == ""
    said = sweep.too_small(inst, {"pieces": 2048, "trees": 4})
    assert said == ("64 KB: a 4,096 B chunk over its smallest tree share (0.25 of a chunk, k = 4 trees a shard) "
                    "at its fixed 2,048 pieces gives 0.5 B pieces (under 1 B)")

    def never(*a, **kw):
        raise AssertionError("the schedule was built")

    monkeypatch.setattr(pipeline, "run", never)
    monkeypatch.setattr(sweep, "forestcoll_depth", lambda inst: 2048)
    row = sweep.run_method(inst, "forestcoll-fixed")
    assert (row["status"], row["message"], row["pieces"], row["k"]) == ("refused", said, [2048], [4])


def test_a_cell_prices_the_tables_models_as_the_pipeline_does(monkeypatch):
    """The sweep verifies through the pipeline's lean run and prices ``event`` and ``sync``
    itself: the ring's reduce-scatter at 64 KB on A100 x2 gets the same two times as the
    pipeline's full run (which prices every model and the bounds) gives its row."""
    from collsynth.instances.generators import build
    from collsynth.instances.instance import make_instance
    from collsynth.solvers import pipeline
    from collsynth.solvers.producers import Options

    inst = make_instance(build(A100[0][1], A100[0][2]), "reduce_scatter", message_bytes=KB64)
    row, _ = pipeline.run(inst, "ring", Options())
    cell = sweep.run_method(inst, "ring")
    assert cell["verified"] and row["verified"]
    assert cell["event"] == pytest.approx(row["time_event_s"], rel=1e-12)
    assert cell["sync"] == pytest.approx(row["time_sync_s"], rel=1e-12)


def test_forestcoll_fixed_over_the_sweeps_sends_is_refused_saying_so(monkeypatch):
    """A100 x2 reduce-scatter (one chunk a GPU): a stand-in forest of two trees with routes of 3
    and 2 nodes, then 4 and 2 (2 + 1 + 3 + 1 = 7 hops a piece, by hand); at 1,000 pieces that is
    7,000 sends: refused over 6,999, not at 7,000; the allreduce's two forests double it."""
    from types import SimpleNamespace

    from collsynth.instances.generators import build
    from collsynth.instances.instance import make_instance
    from collsynth.solvers.packing import forests

    tree = SimpleNamespace(routes=[[0, 1, 2], [0, 3]])
    stand_in = SimpleNamespace(k=2, trees=[tree, SimpleNamespace(routes=[[1, 0, 2, 3], [1, 2]])])
    monkeypatch.setattr(forests, "forest", lambda *a, **kw: stand_in)
    topo = build(A100[0][1], A100[0][2])
    inst = make_instance(topo, "reduce_scatter", message_bytes=2 ** 30)
    assert sweep.too_many(inst, {"pieces": 1000}, most=7000) == ""
    assert sweep.too_many(inst, {"pieces": 1000}, most=6999) == (
        "7,000 sends at its fixed 1,000 pieces, over the sweep's 6,999 (0.0 GiB at 768 B a send at peak)")
    ar = make_instance(topo, "allreduce", message_bytes=2 ** 30)
    assert sweep.too_many(ar, {"pieces": 1000}, most=13_999).startswith("14,000 sends")
    assert sweep.too_many(ar, {"pieces": 1000}, most=14_000) == ""


def test_a_models_own_choice_is_checked_against_the_default_too():
    """Under ``event`` the table compares ``ours-event`` with every other method and with the
    default ``ours``: a cell where ``ours-event`` is above ``ours`` (428.8 against 402.4 us, A100
    x2's 64 MB allreduce before every pair was priced at fewer pieces) says NO; at or below, yes."""
    key = ("A100 x2", "allreduce", 67108864)
    for mine, verdict in ((428.8e-6, "NO"), (402.4e-6, "yes")):
        results = {(*key, "ours"): {"status": "constructed", "event": 402.4e-6},
                   (*key, "ours-event"): {"status": "constructed", "event": mine},
                   (*key, "ring"): {"status": "constructed", "event": 5576e-6}}
        text = sweep.table(results, "A100 x2", [67108864], ("ours", "ours-event", "ring"), "event", "allreduce")
        assert text.splitlines()[-1].endswith(f"| {verdict} |"), text
