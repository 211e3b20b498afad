"""What the tests of schedules kept as trees (or routes) plus a pipeline rule share: small Clos
fabrics to draw from, and the checks that a compact form verifies and prices as its explicit
sends (``tens/pipelined_trees.py``, ``tens/pipelined_allreduce.py``)."""

import pytest
from hypothesis import strategies as st

from collsynth.limits import Deadline
from collsynth.solvers.packing.producer import _with_header
from collsynth.solvers.pipeline import check_and_price
from collsynth.tens import cost_models, verify
from collsynth.tens.pipelined_trees import expand, listed, price_sync
from collsynth.tens.pipelined_trees import verify as verify_trees

# DGX H100 on rails, a k = 4 fat tree, two groups of two boxes under a spine with leaves 1:1 or 2:1
SMALL_CLOS = st.one_of(
    st.builds(lambda n: ("dgx_h100", {"nodes": n}), st.integers(2, 4)),
    st.just(("fat_tree", {"k": 4})),
    st.builds(lambda gpus, over: ("rail_clos", {"groups_per_pod": 2, "boxes_per_group": 2, "gpus_per_box": gpus,
                                                "rails": gpus, "spines": 1, "radix": 16, "oversubscription": [over, 1.0]}),
              st.sampled_from([1, 2]), st.sampled_from([1.0, 2.0])),
)

# two pods of one group of four one-GPU boxes under two spines (or one) and as many cores: a turn of the
# boxes keeps their leaf's uplinks at its second power, so the free shifts cut it in two (free_shifts.py)
THREE_TIERS = st.builds(lambda spines: ("rail_clos", {"pods": 2, "groups_per_pod": 1, "boxes_per_group": 4,
                                                      "gpus_per_box": 1, "rails": 1, "spines": spines,
                                                      "cores": spines, "radix": 16}), st.sampled_from([1, 2]))


def assert_priced_as_listed(c, inst) -> None:
    """``c`` (moved by its shifts), every tree of it listed, and its explicit sends get the same
    verdict (valid) and the same ``sync`` steps, T_L and T_B, the explicit ones by the project's
    verifier and cost model."""
    full = listed(c)
    sched = _with_header(expand(c), inst)
    assert verify_trees(c, inst) is None and verify_trees(full, inst) is None
    assert verify.verify(sched, inst) is None
    assert len(sched) == c.sends == full.sends
    want = cost_models.price(sched, inst, "sync")
    for got in (price_sync(c, inst), price_sync(full, inst)):
        assert got.steps == want.steps
        assert got.T_L_s == pytest.approx(want.T_L_s, rel=1e-12)
        assert got.T_B_s == pytest.approx(want.T_B_s, rel=1e-12)


def assert_row_as_explicit(row: dict, explicit, inst) -> None:
    """A run's row of a compact form against the pipeline's own verification and pricing of
    the same schedule listed as ``explicit`` sends: sends, steps and the ``sync`` columns."""
    explicit = _with_header(explicit, inst)
    want, kept = check_and_price({"message": "", "extra": {}}, explicit, inst, Deadline.after(120), {}, None)
    assert kept is not None and want["verified"] and row["verified"]
    assert row["sends"] == want["sends"] == len(explicit)
    assert row["steps"] == want["steps"]
    for column in ("time_sync_s", "T_L_s", "T_B_s"):
        assert row[column] == pytest.approx(want[column], rel=1e-12)
