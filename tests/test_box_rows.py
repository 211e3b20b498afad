"""All-to-all without its condition matrices: a collective's rows read from the chunk-id rule
equal the contract's table (written out here as sets of (chunk, node), by hand); the bounds
read from the rows one box's nodes hold or need equal those of the whole demand (hypothesis over
small DGX H100, fat-tree and rail Clos fabrics), and a run gets the same verdict, price and
bound either way; the size check lets ``rail-alltoall`` kept as routes run at 2,048 GPUs, where
the condition matrices alone would not fit."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collsynth.instances import make_instance, size
from collsynth.instances.collective import KINDS, ROOTED, make
from collsynth.instances.generators import build
from collsynth.limits import TooBig
from collsynth.solvers.flow.rail_compact import planned
from collsynth.solvers.pipeline import run
from collsynth.solvers.producers import Options
from collsynth.tens.bounds import box_rows
from collsynth.tens.bounds import instance as bounds_instance
from collsynth.tens.bounds.instance import Bounds
from test_symmetric_bounds import fabrics  # small DGX H100, fat-tree and rail Clos fabrics


def _by_hand(kind, nodes, s, c, root):
    """The contract's chunk-id table (docs/instances.md) as sets of (chunk, node)."""
    pre, post = set(), set()
    for j in range(c):
        if kind in ("broadcast", "reduce"):
            holders, needers = ([root], nodes) if kind == "broadcast" else (nodes, [root])
            pre |= {(j, v) for v in holders}
            post |= {(j, v) for v in needers}
        for i in nodes:
            x = i * c + j
            if kind == "alltoall":
                for k in nodes:
                    pre.add(((i * s + k) * c + j, i))
                    post.add(((i * s + k) * c + j, k))
            elif kind in ("allgather", "gather"):
                pre.add((x, i))
                post |= {(x, v) for v in (nodes if kind == "allgather" else [root])}
            elif kind in ("scatter", "reduce_scatter"):
                post.add((x, i))
                pre |= {(x, v) for v in ([root] if kind == "scatter" else nodes)}
            elif kind == "allreduce":
                pre |= {(x, v) for v in nodes}
                post |= {(x, v) for v in nodes}
    return pre, post


def _pairs(matrix):
    return {(int(a), int(b)) for a, b in np.argwhere(matrix)}


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(KINDS), s=st.integers(2, 6), c=st.integers(1, 3), data=st.data())
def test_rows_from_the_rule_are_the_contract_table(kind, s, c, data):
    nodes = sorted(data.draw(st.sets(st.integers(0, s - 1), min_size=2, max_size=s)))
    root = data.draw(st.sampled_from(nodes)) if kind in ROOTED else None
    coll = make(kind, nodes, s, chunks_per_node=c, root=root)
    pre, post = _by_hand(kind, nodes, s, c, root)
    assert _pairs(coll.precondition) == pre and _pairs(coll.postcondition) == post
    ids = np.asarray(data.draw(st.lists(st.integers(0, coll.num_chunks - 1), max_size=8)), np.int64)
    rows_pre, rows_post = coll.condition_rows(ids)
    assert _pairs(rows_pre) == {(r, v) for r, x in enumerate(ids.tolist()) for v in range(s) if (x, v) in pre}
    assert _pairs(rows_post) == {(r, v) for r, x in enumerate(ids.tolist()) for v in range(s) if (x, v) in post}
    near = data.draw(st.sets(st.integers(0, s - 1), max_size=s))
    touching = sorted({x for x, v in pre | post if v in near})
    assert coll.chunks_touching(sorted(near)).tolist() == touching




def _parts(inst, cells):
    """Every argument of every model, computed afresh with the whole demand (cells: never a box)
    or the rows of one box (cells 0)."""
    keep = box_rows.BOX_CELLS
    box_rows.BOX_CELLS = cells
    try:
        b = Bounds(inst, None, 30.0)
        return b, {m: {x.source: x.value for x in parts} for m, parts in b.parts.items()}
    finally:
        box_rows.BOX_CELLS = keep


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=fabrics, chunks=st.integers(1, 2))
def test_one_box_rows_give_every_bound(fabric, chunks):
    gen, params = fabric
    inst = make_instance(build(gen, params), "alltoall", message_bytes=float(1 << 20), chunks_per_node=chunks)
    assert box_rows.box_demand(inst, cells=0) is not None
    box, got = _parts(inst, 0)
    whole, want = _parts(inst, 1 << 62)
    for model, parts in want.items():
        for source, value in parts.items():
            if source == "cut":  # a part of the demand crosses a cut no more than the whole (module doc)
                assert got[model][source] is None or value is not None and got[model][source] <= value * (1 + 1e-12)
            else:
                assert got[model][source] == pytest.approx(value, rel=1e-12), (model, source)
    for model in ("sync", "event", "steps", "timesteps", "ten"):
        assert box.of(model).value == pytest.approx(whole.of(model).value, rel=1e-12), model


def test_one_box_rows_of_dgx_h100_x3():
    # GPU 0 is the orbit of every GPU (box 1): it sends to 23 GPUs and takes in from 23, 46 rows
    # of one chunk each; its 23 own rows stand for 24 x 23 pairs (all of them).
    inst = make_instance(build("dgx_h100", {"nodes": 3}), "alltoall", message_bytes=24.0)  # M / N = 1 byte a pair
    demand, orbits = box_rows.box_demand(inst, cells=0)
    assert len(demand) == 46 and len(orbits.rows) == 23 and orbits.size == 24
    assert demand.pre[orbits.rows][:, 0].all() and demand.nbytes.tolist() == [1.0] * 46


def test_no_box_rows_without_a_box_or_with_a_root():
    topo = build("dgx_h100", {"nodes": 2})
    assert box_rows.box_demand(make_instance(topo, "gather", root=0), cells=0) is None
    assert box_rows.box_demand(make_instance(build("mesh", {"dims": [3, 3]}), "alltoall"), cells=0) is None
    assert box_rows.box_demand(make_instance(topo, "allgather"), cells=0) is None  # every row touches GPU 0


def test_a_run_gets_the_same_row_either_way():
    inst = make_instance(build("dgx_h100", {"nodes": 2}), "alltoall", message_bytes=float(1 << 24))
    rows = []
    for cells in (1 << 62, 0):
        keep = box_rows.BOX_CELLS
        box_rows.BOX_CELLS = cells
        try:
            bounds_instance._CACHE.clear()
            rows.append(run(inst, "rail-alltoall", Options(params={"form": "compact"}, time_limit=120))[0])
        finally:
            box_rows.BOX_CELLS = keep
            bounds_instance._CACHE.clear()
    for key in ("status", "verified", "time_sync_s", "lower_bound_s", "lower_bound_event_s", "steps"):
        assert rows[0][key] == rows[1][key], key


def test_rail_alltoall_kept_as_routes_fits_where_the_conditions_do_not():
    inst = make_instance(build("dgx_h100", {"nodes": 256}), "alltoall", message_bytes=1e9)  # 2,048 GPUs
    assert size.conditions_bytes("alltoall", inst.topology.size, 1) > 20 * 2 ** 30  # 4.2 M chunks x 2,312 ids x 2
    with pytest.raises(TooBig):
        size.check_run(inst)
    build_ = planned(inst, {})
    assert not build_.reads_conditions
    size.check_run(inst, build_)
    assert planned(inst, {"form": "explicit"}) is None


def test_the_collective_is_charged_its_chunk_ids():
    # 4,096 ranks: 16.8 M chunk ids of 8 bytes, not 2 x 16.8 M x 4,616 bytes of matrices
    assert size.chunk_id_bytes("alltoall", 4096, 1) == 8 * 4096 ** 2
    size.check_collective("alltoall", 4616, 4096, 1, "collective", "topology.nodes")
