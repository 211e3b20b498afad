"""Tree packing handed out as trees plus a pipeline rule (``--param form=compact``): the run
verifies and prices it in that form, and its ``sync`` price, verdict and send count are those
of the same trees handed out as explicit sends (``form=explicit`` at the same pieces and trees
per shard); a broken form is reported invalid; the written file reads back to the same trees;
``form=auto`` keeps explicit sends where they fit."""

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.limits import Deadline
from collsynth.solvers.pipeline import check_and_price_trees, run
from collsynth.solvers.producers import Options
from collsynth.tens import pipelined_trees
from collsynth.tens.status import Status

fabrics = st.one_of(
    st.builds(lambda n: ("dgx_h100", {"nodes": n}), st.integers(2, 4)),
    st.builds(lambda k: ("fat_tree", {"k": k}), st.just(4)),
    st.builds(lambda boxes, gpus: ("rail_clos", {"groups_per_pod": 1, "boxes_per_group": boxes, "gpus_per_box": gpus,
                                                 "rails": gpus, "spines": 1, "radix": 16}),
              st.integers(2, 3), st.sampled_from([1, 2])),
)


def solved(inst, form, **params):
    return run(inst, "tree-packing", Options(time_limit=120, params={"form": form, **params}))


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=fabrics, kind=st.sampled_from(["allgather", "reduce_scatter"]), pieces=st.integers(1, 3))
def test_compact_run_prices_as_its_explicit_sends(fabric, kind, pieces):
    inst = make_instance(build(*fabric), kind, message_bytes=1 << 20)
    row, trees = solved(inst, "compact", pieces=pieces)
    assert isinstance(trees, pipelined_trees.PipelinedTrees) and row["verified"]
    # the same trees as explicit sends, verified and priced by the pipeline's own gate
    from collsynth.solvers.pipeline import check_and_price
    from collsynth.solvers.packing.producer import _with_header

    explicit = _with_header(pipelined_trees.expand(trees), inst)
    want, kept = check_and_price({"message": "", "extra": {}}, explicit, inst, Deadline.after(120), {}, None)
    assert kept is not None and want["verified"]
    assert row["sends"] == want["sends"] == len(explicit)
    assert row["steps"] == want["steps"]
    for column in ("time_sync_s", "T_L_s", "T_B_s"):
        assert row[column] == pytest.approx(want[column], rel=1e-12)
    assert row["time_event_s"] == want["time_event_s"]  # per link orbit (tens/pipelined_event.py)
    assert "not priced under ten" in row["message"]


def test_a_broken_form_is_invalid_and_a_written_one_reads_back(tmp_path):
    inst = make_instance(build("dgx_h100", {"nodes": 3}), "allgather", message_bytes=1 << 20)
    row, trees = solved(inst, "compact")
    assert row["verified"] and trees.copies == 24
    broken = replace(trees, dst=np.where(np.arange(len(trees.dst)) == 0, trees.src[0], trees.dst))
    bad, kept = check_and_price_trees({"message": "", "extra": {}}, broken, inst, Deadline.after(60), {})
    assert kept is None and bad["status"] == Status.INVALID and bad["message"].startswith("verification failed")
    path = tmp_path / "t.json"
    pipelined_trees.write_json(trees, path)
    back = pipelined_trees.from_json(json.loads(path.read_text()))
    assert pipelined_trees.verify(back, inst) is None
    assert pipelined_trees.price_sync(back, inst) == pipelined_trees.price_sync(trees, inst)
    assert np.array_equal(back.shift, trees.shift) and back.sends == trees.sends


def test_auto_keeps_explicit_sends_where_they_fit():
    inst = make_instance(build("dgx_h100", {"nodes": 2}), "allgather", message_bytes=1 << 20)
    row, sched = solved(inst, "auto")
    assert row["verified"] and not isinstance(sched, pipelined_trees.PipelinedTrees)
    assert row["time_event_s"] is not None
