"""The allreduce benchmark's verdict per system (benchmarks/bench_allreduce.py): which case
holds, from rows built by hand (bound, RS+AG and best times in seconds)."""

from __future__ import annotations

import sys
from pathlib import Path

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
