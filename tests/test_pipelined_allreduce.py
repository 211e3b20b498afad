"""An allreduce kept as its reduce-scatter's and its allgather's trees plus pipeline rules
(``--param form=compact``): on small Clos fabrics (DGX H100 on rails, k = 4 fat trees,
rail-optimised Clos with one group or two under spines, leaves oversubscribed) the run's
verdict, steps and ``sync`` price are those of the same trees listed as explicit sends and
verified and priced by the pipeline's own gate; DGX H100 x8 priced by hand; a broken half is
reported invalid, naming the half; the written form reads back to the same trees."""

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from collsynth import InputError
from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.limits import Deadline
from collsynth.solvers.pipeline import check_and_price_trees, run
from collsynth.solvers.producers import Options
from collsynth.tens import pipelined_allreduce
from collsynth.tens.status import Status
from compact_checks import SMALL_CLOS, assert_row_as_explicit

fabrics = st.one_of(
    SMALL_CLOS,
    st.builds(lambda boxes, gpus: ("rail_clos", {"groups_per_pod": 1, "boxes_per_group": boxes, "gpus_per_box": gpus,
                                                 "rails": gpus, "spines": 1, "radix": 16}),
              st.integers(2, 3), st.sampled_from([1, 2])),  # one group: no spine tier
)


def solved(inst, **params):
    return run(inst, "tree-packing", Options(time_limit=120, params={"form": "compact", **params}))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=fabrics, pieces=st.integers(1, 3))
@example(fabric=("fat_tree", {"k": 4}), pieces=1)  # edge switches that copy: the allgather half keeps its sends apart
def test_compact_allreduce_prices_as_its_explicit_sends(fabric, pieces):
    inst = make_instance(build(*fabric), "allreduce", message_bytes=1 << 20)
    row, trees = solved(inst, pieces=pieces)
    assert isinstance(trees, pipelined_allreduce.PipelinedAllreduce) and row["verified"]
    assert_row_as_explicit(row, pipelined_allreduce.expand(trees), inst)


def test_dgx_h100_allreduce_by_hand():
    """Eight boxes of eight GPUs (NVLink 450 GB/s, NIC 50 GB/s): the allgather's trees reach a
    root's 7 rail peers over the NICs and each of them its 7 box mates, so ``P`` pieces of a
    shard ``s`` load a NIC with 7 pieces in each of ``P + 1`` steps and an NVLink with 49 in
    the last two (``tests/test_translated_trees.py``); the links are the same both ways, so the
    reduce-scatter's reversed trees load them the same, and the allreduce's bandwidth part is
    twice ``s / P * ((P + 1) * 7 / 50e9 + 2 * 49 / 450e9)`` with the halves in turn (the run
    overlaps them where that prices lower: no more than that)."""
    inst = make_instance(build("dgx_h100", {"nodes": 8}), "allreduce", message_bytes=1 << 30)
    P = 10_000
    row, trees = solved(inst, pieces=P)
    s = inst.collective.chunk_bytes
    assert row["verified"] and trees.pieces == (P, P)
    in_turn = pipelined_allreduce.price_sync(replace(trees, delay=None, mirror=False), inst)
    assert in_turn.T_B_s == pytest.approx(2 * s / P * ((P + 1) * 7 / 50e9 + 2 * 49 / 450e9), rel=1e-12)
    assert row["time_sync_s"] <= in_turn.total_s * (1 + 1e-12)


def test_a_broken_half_is_invalid_and_a_written_form_reads_back(tmp_path):
    inst = make_instance(build("dgx_h100", {"nodes": 3}), "allreduce", message_bytes=1 << 20)
    row, trees = solved(inst)
    assert row["verified"]
    ag = trees.allgather
    dropped = replace(ag, src=ag.src[:-1], dst=ag.dst[:-1], before=ag.before[:-1], ptr=np.minimum(ag.ptr, len(ag.src) - 1))
    swapped = pipelined_allreduce.PipelinedAllreduce(trees.allgather, trees.reduce_scatter)
    for broken, says in ((replace(trees, allgather=dropped), "allgather half"), (swapped, "reduce-scatter half")):
        bad, kept = check_and_price_trees({"message": "", "extra": {}}, broken, inst, Deadline.after(60), {})
        assert kept is None and bad["status"] == Status.INVALID and says in bad["message"]
    path = tmp_path / "t.json"
    pipelined_allreduce.write_json(trees, path)
    back = pipelined_allreduce.from_json(json.loads(path.read_text()))
    assert pipelined_allreduce.verify(back, inst) is None
    assert pipelined_allreduce.price_sync(back, inst) == pipelined_allreduce.price_sync(trees, inst)
    with pytest.raises(InputError, match="allgather: missing"):
        pipelined_allreduce.from_json({"form": "pipelined-allreduce", "reduce_scatter": json.loads(path.read_text())[
            "reduce_scatter"]})


def test_expansion_takes_messages_as_they_become_ready():
    """The reduce-scatter half declares its links' order (each GPU's sends in the order listed);
    the allreduce's expansion does not, so its allgather's sends are not held behind every
    reduce-scatter send out of their GPU (``pipelined_allreduce.joined``): reducing sends first,
    then copying ones, steps shifted past the first half."""
    inst = make_instance(build("dgx_h100", {"nodes": 2}), "allreduce", message_bytes=1 << 20)
    row, f = solved(inst, pieces=2)
    assert row["verified"]
    f = replace(f, delay=None, mirror=False)  # the halves in turn (the run may overlap them)
    rs = pipelined_allreduce.pipelined_trees.expand(f.reduce_scatter)
    ag = pipelined_allreduce.pipelined_trees.expand(f.allgather)
    both = pipelined_allreduce.expand(f)
    assert rs.link_order == "program" and both.link_order == "ready"
    assert len(both) == len(rs) + len(ag) and both.step[:len(rs)].max() < both.step[len(rs):].min()
    assert [s.op for s in both.sends()][:len(rs)] == ["reduce"] * len(rs)
