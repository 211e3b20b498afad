"""The allreduce benchmark's verdict per system (benchmarks/bench_allreduce.py): which case
holds, from rows built by hand (bound, RS+AG and best times in seconds); its lean path
(``--lean``) stops at the time limit as ``collsynth solve`` does."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from collsynth.instances.instance import load_instance
from collsynth.limits import GRACE_S
from collsynth.solvers.compiling import prepare_run
from collsynth.solvers.producers import Options

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_allreduce as bench  # noqa: E402


def row(bound: float, halves: float, best: dict, **more) -> dict:
    """An allreduce row with the bound's bandwidth part and the event bound ``bound``."""
    return {"kind": "allreduce", "bound_bw_s": bound, "bound_event_s": bound, "halves_s": halves,
            "best": {m: (t, "tree-packing") for m, t in best.items()}, **more}


def test_each_case_is_named_with_its_figures():
    assert bench._verdict(row(0.02, 0.02, {"event": 0.0201, "sync": 0.0202})) == "RS+AG optimal (bound = RS+AG)"
    below = bench._verdict(row(0.014762, 0.0155, {"event": 0.01514, "event-inorder": 0.01516, "sync": 0.01541},
                               split_s=0.014762))
    assert below.startswith("below RS+AG (schedule 15.4100 ms < RS+AG 15.5000 ms)")
    assert "14.7620 ms in the pipelined limit" in below
    # sync still above RS+AG: the case is open, the models below it named
    mixed = bench._verdict(row(0.014762, 0.0155, {"event": 0.01514, "sync": 0.01551}))
    assert mixed == "open (bound 14.7620 ms < best 15.1400 ms); below RS+AG under event"
    assert bench._verdict(row(0.005, 0.00577, {"event": 0.0059})) == "open (bound 5.0000 ms < best 5.9000 ms)"
    assert bench._verdict({"kind": "allgather"}) == ""


def test_the_joint_choice_lists_the_pair_taken_and_the_candidates_least_first():
    r = {"system": "DGX-2 x2", "joint_choice": {"chosen": "capacity split", "probe_pieces": [200, 200],
                                                "priced": {"as picked": {"sync": 0.015615, "event": 0.0155},
                                                           "capacity split": {"sync": 0.0154, "event": 0.0151}}}}
    text = bench.choices([r, {"system": "A100 x2"}])
    assert text.startswith("DGX-2 x2 allreduce: took 'capacity split' (probe pieces [200, 200]); capacity split: ")
    assert text.index("capacity split: sync 15.4000 ms") < text.index("as picked: sync 15.6150 ms")


SLACK_S = 5.0  # beyond the limit and its grace, for a loaded machine (the stand-in below sleeps 30 s)


def test_a_lean_run_stops_at_its_time_limit(monkeypatch):
    """A producer stuck in a stage that does not check its deadline (packing a forest after
    sleeping 30 s, a stand-in) is stopped by the run's timer on the lean path, as in
    ``collsynth solve``: the run returns within the limit and the grace (before, the lean path
    ran the producer with no timer: MI250 x8 took 1,645 s at a 1,500 s limit), unverified, with
    status ``timeout`` and a message saying the limit was reached while producing."""
    from collsynth.solvers.packing import forests

    real = forests.forest

    def stuck(*args, **kw):
        time.sleep(30)
        return real(*args, **kw)

    inst = load_instance(Path(__file__).resolve().parents[1] / "instances" / "corpus" / "ring8-allgather.toml")
    prepare_run(inst, "tree-packing")  # compiled before the clock, as the run does: not timed here
    monkeypatch.setattr(forests, "forest", stuck)
    limit = 1.0
    t0 = time.monotonic()
    row, sched = bench._lean(inst, "tree-packing", Options(time_limit=limit))
    assert time.monotonic() - t0 <= limit + GRACE_S + SLACK_S
    assert sched is None and not row["verified"] and row["status"] == "timeout"
    assert row["message"].startswith("time limit 1 s reached during produce"), row["message"]


def test_a_lean_run_verifies_what_it_returns():
    """Without a stand-in the lean path returns the producer's schedule verified and unpriced
    (the table prices its models itself): the ring algorithm on a ring of 8, allgather."""
    inst = load_instance(Path(__file__).resolve().parents[1] / "instances" / "corpus" / "ring8-allgather.toml")
    row, sched = bench._lean(inst, "ring", Options(time_limit=60))
    assert row["verified"] and sched is not None and row["sends"] == len(sched) > 0
    assert row["time_event_s"] is None and row["time_sync_s"] is None and "verification" in row["extra"]["stages_s"]


# Two boxes of two GPUs (hierarchical switch x switch, alpha 0): in a box the GPUs share a switch
# at B = 100 GB/s a link; GPU g of each box shares a rail switch with GPU g of the other at B/4.
TWO_BOXES = ("two boxes of two", "hierarchical", {"levels": ["switch", "switch"], "dims": [2, 2],
                                                  "scales": [0.25, 1.0], "alpha": 0.0, "bandwidth": 100e9})


def test_an_allgather_row_has_the_tables_columns_and_a_verified_schedule_at_the_bound():
    """The allgather row of a tiny switched system through the benchmark's own path (lean, tree
    packing). Its bound by hand: a box needs the other box's half, M / 2 = 0.5 GB, through its two
    rail links of B / 4, 0.5 GB / 50 GB/s = 10 ms (one GPU alone: 0.75 GB over B + B / 4, 6 ms);
    every model's time comes from a schedule that verified (a refused one is listed apart) and
    lies at or above that bound and within 1 % of it."""
    r = bench._row((TWO_BOXES, "allgather", ["tree-packing"], 60, True, ()))
    assert r["kind"] == "allgather" and r["gpus"] == 4 and "refused" not in r
    assert abs(r["bound_event_s"] - 0.010) < 1e-12 and abs(r["bound_sync_s"] - 0.010) < 1e-12
    assert set(r["best"]) == set(bench.MODELS)
    for model, (t, by) in r["best"].items():
        assert by == "tree-packing" and 0.010 * (1 - 1e-9) <= t <= 0.010 * 1.01, (model, t)
    assert r["gen_s"] > 0 and r["peak_MiB"] > 0
    cells = [c.strip() for c in bench.table([r]).splitlines()[-1].strip("|").split("|")]
    assert cells[:5] == ["two boxes of two", "allgather", "4", "10.0000", r["bound_source"]]
    assert [cells[i] for i in (7, 10, 13)] == ["tree-packing"] * 3 and cells[14] == "-" and cells[15] == ""
    assert float(cells[16]) == round(r["gen_s"], 1) and float(cells[17]) == round(r["peak_MiB"])


def test_saved_rows_print_the_same_table(tmp_path):
    """``--save`` writes the rows as JSON (a best time's (time, producer) becomes a list) and
    ``--load`` prints the very table the run printed."""
    import json

    r = {"system": "A100 x2", "kind": "allgather", "gpus": 16, "bound_event_s": 0.0028846, "bound_sync_s": 0.0028846,
         "bound_source": "inbound v=0", "best": {m: (0.0028850, "tree-packing") for m in bench.MODELS},
         "gen_s": 12.3, "peak_MiB": 812.0}
    path = tmp_path / "rows.json"
    path.write_text(json.dumps([r]))
    assert bench.table(json.loads(path.read_text())) == bench.table([r])


def test_a_row_without_a_verified_schedule_says_why():
    """A row whose producers all failed (here a time-out during verification, as MI250 x2's
    allgather at 900 s under load) shows no time and names the refusal in its verdict cell."""
    r = {"system": "MI250 x2", "kind": "allgather", "gpus": 32, "bound_event_s": 0.0028238, "bound_sync_s": 0.0028238,
         "bound_source": "cut S={0-1}", "best": {}, "gen_s": 0.0, "peak_MiB": 1717.2,
         "refused": ["tree-packing: timeout (time limit 900 s reached during verification)"]}
    cells = [c.strip() for c in bench.table([r]).splitlines()[-1].strip("|").split("|")]
    assert cells[5:14] == ["-"] * 9
    assert cells[15] == "no verified schedule: tree-packing: timeout (time limit 900 s reached during verification)"
    r["best"] = {"event": (0.0028300, "tree-packing")}  # one model reached: no refusal shown
    assert bench.table([r]).splitlines()[-1].split("|")[16].strip() == ""
