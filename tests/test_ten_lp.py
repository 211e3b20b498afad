"""TEN LP (TACOS V-A relaxed): its bound, its fractional schedule, and the bound beside every ILP."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from collsynth.formulations import ten_ilp, ten_lp, ten_model
from collsynth.instances.generators import build as topo
from collsynth.instances.instance import load_instance, make_instance
from collsynth.instances.topology import from_edges
from collsynth.solvers import backends as B
from collsynth.solvers.ten import drivers
from collsynth.solvers import pipeline
from collsynth.solvers.cli import main
from collsynth.results import render, store
from collsynth.solvers.producers import Options
from collsynth.tens import bounds, ten, verify
from collsynth.tens.schedule import read_json
from ilp_oracle import solves_by
from proofs import proven_status
from builders import strongly_connected_arcs


def lp_bound(instance, **params) -> int:
    """Smallest horizon whose LP delivers everything (the plain search from 1, independent of
    the combinatorial bounds)."""
    h = 1
    while True:
        m = ten_lp.build(instance, h, **params)
        assert B.solve(m, "highs").status == "optimal"
        if ten_lp.complete(m):
            return h
        h += 1


def ilp_optimum(instance) -> int:
    o = drivers.horizon_search(instance, ten_ilp, Options(time_limit=60))
    assert o.status == "optimal", o.message
    return int(o.objective)


def link_load_ok(sched, instance) -> bool:
    """Per (link pair, step) at most `count` chunks of volume (unit delays here)."""
    la = instance.topology.link_arrays
    load: dict[tuple[int, int, int], float] = {}
    for s in sched.sends():
        key = (s.src, s.dst, s.step)
        load[key] = load.get(key, 0) + float(s.hi - s.lo)
    return all(v <= la.count[la.lookup(u, w)] + 1e-9 for (u, w, _), v in load.items())


def ten_timing_ok(sched, instance) -> bool:
    """Every send over a pair of delay k starts only once its source holds the piece: the
    piece is at the source by the end of step ``t - k`` (verify only checks ``t - 1``)."""
    delay = ten.link_delays(instance.topology, instance.collective.chunk_bytes)[0][0]
    la = instance.topology.link_arrays
    D = sched.denom
    arr = np.full((sched.chunks, instance.topology.size, D), np.iinfo(np.int64).max)
    pre = instance.collective.precondition
    arr[pre] = 0
    for c, lo, hi, v, t in zip(sched.chunk, sched.lo, sched.hi, sched.dst, sched.step):
        arr[c, v, lo:hi] = np.minimum(arr[c, v, lo:hi], t)
    for c, lo, hi, u, v, t in zip(sched.chunk, sched.lo, sched.hi, sched.src, sched.dst, sched.step):
        k = delay[la.lookup(u, v)]
        if (arr[c, u, lo:hi] > t - k).any():
            return False
    return True


# ---- the fractional schedule ---------------------------------------------------------------

SCHEDULES = [  # (generator, params, kind, root, chunks per node)
    ("ring", {"nodes": 4}, "broadcast", 0, 3),
    ("hypercube", {"dim": 2}, "allgather", None, 3),
    ("torus", {"dims": [2, 3]}, "broadcast", 0, 3),
    ("mesh", {"dims": [2, 3]}, "alltoall", None, 1),
    ("torus", {"dims": [2, 3]}, "scatter", 0, 2),
]


@pytest.mark.parametrize("gen,params,kind,root,cpn", SCHEDULES)
def test_lp_schedule_verifies_and_respects_the_bound(gen, params, kind, root, cpn):
    inst = make_instance(topo(gen, params), kind, root=root, chunks_per_node=cpn)
    row, sched = pipeline.run(inst, "ten-lp", Options(time_limit=30))
    assert row["verified"], row["message"]
    assert verify.verify(sched, inst) is None
    h = lp_bound(inst)
    # the LP search starts from the combinatorial bound, which may already exceed the LP's
    # (the scatter: 10 chunks over the root's 3 out-links need 4 timesteps, the LP 3)
    assert row["bound"] == row["extra"]["lp_bound"] == max(h, ten_ilp.lower_bound(inst))
    assert row["steps"] >= row["bound"]
    assert row["status"] == (proven_status(row) if row["steps"] == row["bound"] else "feasible")
    assert row["extra"]["denominator"] == sched.denom
    assert row["extra"]["fractional_sends"] == int(((sched.hi - sched.lo) < sched.denom).sum())
    assert row["steps"] <= row["extra"]["recovery_steps"]  # never worse than recovery
    assert link_load_ok(sched, inst)
    assert ten_timing_ok(sched, inst)


FORCED = [  # the LP bound is below the ILP optimum: no integral solution fits the LP horizon,
    # so the LP solution there is fractional whatever vertex the solver returns
    ("torus", {"dims": [2, 3]}, "scatter", 0, 2),  # LP 3, ILP 4
    ("mesh", {"dims": [2, 3]}, "scatter", 0, 2),  # LP 4, ILP 5
]


@pytest.mark.parametrize("gen,params,kind,root,cpn", FORCED)
def test_fractional_lp_gives_real_pieces(gen, params, kind, root, cpn):
    inst = make_instance(topo(gen, params), kind, root=root, chunks_per_node=cpn)
    h = lp_bound(inst)
    assert solves_by(inst, h) is False  # the ILP, solved at the LP's horizon, cannot deliver everything
    m = ten_lp.build(inst, h)
    assert B.solve(m, "highs").status == "optimal" and ten_lp.complete(m)
    assert not ten_lp.integral(m)
    for polished in (False, True):
        if polished:
            ten_lp.polish(m)
            assert B.solve(m, "highs").status == "optimal" and ten_lp.complete(m)
        sched = ten_lp.extract(m)
        assert sched.denom > 1 and ((sched.hi - sched.lo) < sched.denom).any()  # real pieces
        assert verify.verify(sched, inst) is None
        assert sched.num_steps >= h
        assert link_load_ok(sched, inst) and ten_timing_ok(sched, inst)


def test_fractional_schedule_meets_lp_bound_and_ilp_optimum():
    # bidirectional ring of 4, root 0 broadcasts 3 chunks: the schedule from the LP meets the
    # LP bound, which is the integral optimum
    inst = make_instance(topo("ring", {"nodes": 4}), "broadcast", root=0, chunks_per_node=3)
    row, sched = pipeline.run(inst, "ten-lp", Options(time_limit=30))
    assert row["verified"] and row["status"] == proven_status(row)
    assert row["steps"] == row["bound"] == lp_bound(inst) == ilp_optimum(inst)


def test_combining_kinds_are_reversed_duals():
    # reduce_scatter and reduce: the LP is solved as allgather/broadcast on the transpose
    for kind, root, cpn in (("reduce_scatter", None, 3), ("reduce", 0, 3)):
        t = topo("hypercube", {"dim": 2}) if kind == "reduce_scatter" else topo("ring", {"nodes": 4})
        inst = make_instance(t, kind, root=root, chunks_per_node=cpn)
        row, sched = pipeline.run(inst, "ten-lp", Options(time_limit=30))
        assert row["verified"], row["message"]
        assert sched.collective == kind
        assert row["steps"] >= row["bound"] == lp_bound(inst)


def test_reversed_pieces_reduce_exactly_once():
    # a reduce to root 0 on a 4-ring is solved as a broadcast from 0 on the transpose; with
    # halves going each way round, the reversed pieces must count every contribution once
    inst = make_instance(topo("ring", {"nodes": 4}), "reduce", root=0)
    m = ten_lp.build(inst, 2, cuts=False)
    assert ten_model(m).data.reversed
    _set(m, {(0, 0, 1, 1): 0.5, (0, 0, 3, 1): 0.5, (0, 1, 2, 2): 0.5, (0, 3, 2, 2): 0.5})
    sched = ten_lp.extract(m)
    assert sched.collective == "reduce" and sched.denom == 2
    assert verify.verify(sched, inst) is None


def test_allreduce_concatenates_phases():
    inst = make_instance(topo("ring", {"nodes": 4}), "allreduce", chunks_per_node=2)
    row, sched = pipeline.run(inst, "ten-lp", Options(time_limit=30))
    assert row["verified"], row["message"]
    rs = lp_bound(make_instance(topo("ring", {"nodes": 4}), "reduce_scatter", chunks_per_node=2))
    ag = lp_bound(make_instance(topo("ring", {"nodes": 4}), "allgather", chunks_per_node=2))
    # and the allreduce itself: a node needs the results of all 8 chunks, each with contributions
    # from elsewhere, over its 2 in-links: 4 timesteps (tens.bounds, per-node); all links
    # together carry 2 * 3 sends per chunk (one-way gossip), 48 on 8 links: 6 (volume)
    assert row["bound"] == max(rs, ag, 4, 6) and row["steps"] >= rs + ag


def test_concurrent_collectives_share_links():
    from collsynth.instances.collective import make
    from collsynth.instances.instance import Instance

    t = topo("ring", {"nodes": 4})
    inst = Instance("multi", t, (make("allgather", [0, 1, 2, 3], 4, chunks_per_node=2),
                                 make("broadcast", [0, 1, 2, 3], 4, root=2, chunks_per_node=2)))
    row, sched = pipeline.run(inst, "ten-lp", Options(time_limit=30))
    assert row["verified"], row["message"]
    assert row["steps"] >= row["bound"] == lp_bound(inst)
    # the tenants' chunks differ in size (delays 1 and 2): the bound must stay below the optimum
    assert ten_lp.lower_bound(inst) <= row["bound"] and solves_by(inst, int(row["bound"]) - 1) is False
    assert link_load_ok(sched, inst)  # both tenants together stay within every link's capacity


def test_heterogeneous_links_and_binary_search():
    from collsynth.instances.topology import with_link_costs

    # a 4-ring whose link 0<->1 has a third of the bandwidth: a chunk spans 3 timesteps on it
    edges = [(0, 1, {"scale": 1 / 3}), (1, 0, {"scale": 1 / 3}), (1, 2), (2, 1), (2, 3), (3, 2), (3, 0), (0, 3)]
    t = with_link_costs(from_edges(4, edges, name="hetero"), bandwidth=1e9, alpha=0.0)
    inst = make_instance(t, "allgather", message_bytes=8e6, chunks_per_node=2)
    row, sched = pipeline.run(inst, "ten-lp", Options(time_limit=30))
    assert row["verified"], row["message"]
    assert row["steps"] >= row["bound"] == lp_bound(inst)
    # a piece on the slow link arrives no earlier than its third timestep, and the slow link
    # carries at most one chunk's worth in any timestep it is busy
    busy: dict[tuple[int, int, int], float] = {}
    for s in sched.sends():
        if {s.src, s.dst} == {0, 1}:
            assert s.step >= 3
            for tau in range(s.step - 2, s.step + 1):
                busy[(s.src, s.dst, tau)] = busy.get((s.src, s.dst, tau), 0) + float(s.hi - s.lo)
    assert all(v <= 1 + 1e-9 for v in busy.values())
    assert ten_timing_ok(sched, inst)
    row2, _ = pipeline.run(inst, "ten-lp", Options(time_limit=30, params={"binary": True}))
    assert row2["bound"] == row["bound"]
    # the reduce_scatter dual on the transpose, reversed with the multi-timestep occupancy
    rs = make_instance(t, "reduce_scatter", message_bytes=8e6, chunks_per_node=2)
    row3, _ = pipeline.run(rs, "ten-lp", Options(time_limit=30))
    assert row3["verified"], row3["message"]
    assert row3["steps"] >= row3["bound"] == lp_bound(rs)


# ---- the walk itself ----------------------------------------------------------------------

def _set(model, values: dict) -> None:
    data = ten_model(model).data
    pair = {(int(u), int(v)): l for l, (u, v) in enumerate(zip(data.src.tolist(), data.dst.tolist()))}
    for v in model.sent.values():
        v.set_value(0.0)
    for (c, u, w, t), x in values.items():
        model.sent[c, pair[(u, w)], t].set_value(x)


def test_walk_sends_different_halves_the_two_ways_round():
    # root 0 sends half of its chunk each way round a 4-ring; node 2 gets a half from each
    # side: only if the halves differ does node 2 end up whole (a naive walk sends [0, 1/2) twice)
    inst = make_instance(topo("ring", {"nodes": 4}), "broadcast", root=0)
    m = ten_lp.build(inst, 2, cuts=False)
    _set(m, {(0, 0, 1, 1): 0.5, (0, 0, 3, 1): 0.5, (0, 1, 2, 2): 0.5, (0, 3, 2, 2): 0.5})
    w = ten_lp.walk(m)
    assert w.denom == 2
    first = {(int(w.data.src[l]), int(w.data.dst[l])): a.tolist() for l, a in zip(w.pair, w.atoms)}
    assert first[(0, 1)] != first[(0, 3)]
    assert w.held[0, 2] and not w.held[0, 1] and not w.held[0, 3]
    # the short pairs are completed by repair; the schedule then verifies
    sched = ten_lp.to_schedule(ten_lp.repair(w))
    assert verify.verify(sched, inst) is None
    assert link_load_ok(sched, inst)


def test_walk_never_sends_what_the_destination_has():
    inst = make_instance(topo("ring", {"nodes": 3}), "broadcast", root=0)
    m = ten_lp.build(inst, 3, cuts=False)
    # node 1 gets the whole chunk at 1; 0->2 and 1->2 each bring half at step 2 (different
    # halves: both sources hold everything); the half offered again at step 3 is useless
    _set(m, {(0, 0, 1, 1): 1.0, (0, 0, 2, 2): 0.5, (0, 1, 2, 2): 0.5, (0, 1, 2, 3): 0.5})
    w = ten_lp.walk(m)
    arr = w.arrival[(0, 2)]
    assert (arr == 2).all()  # both halves at step 2 ...
    assert all(t != 3 for t in w.step)  # ... so the send at step 3 has nothing useful and is dropped


def test_amounts_exact_or_apportioned():
    inst = make_instance(topo("ring", {"nodes": 4}), "broadcast", root=0)
    m = ten_lp.build(inst, 2, cuts=False)
    _set(m, {(0, 0, 1, 1): 1 / 3 + 1e-8, (0, 0, 3, 1): 2 / 3 - 1e-8})
    rows, counts, D = ten_lp.amounts(m)
    assert D == 3 and sorted(counts.tolist()) == [1, 2]
    _set(m, {(0, 0, 1, 1): 0.123456, (0, 0, 3, 1): 0.876544, (0, 1, 2, 2): 0.3, (0, 3, 2, 2): 0.7})
    rows, counts, D = ten_lp.amounts(m)
    assert D == ten_lp.MAX_ATOMS
    data = ten_model(m).data
    got = {(int(data.src[l]), int(data.dst[l])): int(k) for (_, l, _), k in zip(rows.tolist(), counts.tolist())}
    assert got[(1, 2)] + got[(3, 2)] == D  # node 2's offers still add up to a whole chunk
    assert abs(got[(0, 1)] - 0.123456 * D) < 1


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 12)), min_size=1, max_size=6))
def test_runs_round_trip(spans):
    atoms = sorted({a for s, n in spans for a in range(s * 5, s * 5 + n)})
    runs = ten_lp.runs(np.array(atoms))
    back = [a for lo, hi in runs for a in range(lo, hi)]
    assert back == atoms
    assert all(r1[1] < r2[0] for r1, r2 in zip(runs, runs[1:]))  # maximal runs


# ---- the cuts -------------------------------------------------------------------------------

def test_cuts_are_valid_and_stronger():
    # scatter of 5 chunks per node from a corner of a 2x2 mesh: 15 chunks over the root's two
    # out-links need ceil(15/2) = 8 timesteps. Without cuts the LP bounces fractions between
    # neighbours and counts them twice (bound 5); with them it proves 8, the optimum.
    inst = make_instance(topo("mesh", {"dims": [2, 2]}), "scatter", root=0, chunks_per_node=5)
    with_cuts, without = lp_bound(inst), lp_bound(inst, cuts=False)
    assert without < with_cuts == math.ceil(15 / 2)
    row, sched = pipeline.run(inst, "ten-lp", Options(time_limit=30))
    assert row["verified"] and row["steps"] == 8 and row["status"] == "optimal"


# ---- random digraphs: the bound is a bound, the schedule verifies ---------------------------

@st.composite
def small_digraphs(draw):
    n, arcs = draw(strongly_connected_arcs(3, 4, max_extra=4))
    return from_edges(n, sorted(set(arcs)), bandwidth=1e9, alpha=1e-6, name="rand")


@settings(max_examples=15, deadline=None)
@given(small_digraphs(), st.sampled_from(["allgather", "broadcast", "reduce_scatter", "alltoall"]),
       st.integers(1, 2))
def test_random_digraphs_lp_schedule_verifies_and_bound_below_ilp(t, kind, cpn):
    inst = make_instance(t, kind, root=0 if kind == "broadcast" else None, chunks_per_node=cpn)
    row, sched = pipeline.run(inst, "ten-lp", Options(time_limit=30))
    assert row["verified"], row["message"]
    assert verify.verify(sched, inst) is None
    assert row["steps"] >= row["bound"]
    # the TEN ILP solved one timestep short of the bound (no driver, which would start at the bound)
    assert solves_by(inst, int(row["bound"]) - 1, time_limit=30) is not True
    assert link_load_ok(sched, inst)


# ---- the LP bound beside every ILP ----------------------------------------------------------

GAP_LINKS = [(0, 1, 1.0), (0, 3, 0.5), (1, 0, 0.5), (1, 4, 0.5), (2, 0, 1.0), (2, 1, 0.5), (2, 5, 1.0), (3, 1, 1.0),
             (3, 5, 1.0), (4, 1, 1.0), (4, 2, 0.5), (4, 5, 1.0), (5, 0, 1.0), (5, 4, 0.5)]  # (u, v, bandwidth)


def gap_scatter():
    """A scatter of 2 chunks per node from node 0 on a 6-node digraph of 1- and 2-timestep
    links whose optimum is above the combinatorial bound (8, the cut into {2, ..., 5})."""
    links = from_edges(6, [(u, v, {"alpha": 0.0, "bandwidth": b}) for u, v, b in GAP_LINKS])
    return make_instance(links, "scatter", root=0, chunks_per_node=2, message_bytes=12.0)


def test_ilp_rows_carry_the_lp_bound():
    # the schedule is longer than the combinatorial bound 8, so the LP search beside it solves LPs
    inst = gap_scatter()
    assert bounds.lower_bound(inst) == 8
    row, _ = pipeline.run(inst, "ten-ilp", Options(time_limit=60))
    assert row["verified"] and row["status"] == proven_status(row)
    lp = row["extra"]["lp_bound"]
    assert lp == lp_bound(inst) and row["bound"] >= lp and row["steps"] >= lp
    row, _ = pipeline.run(inst, "ten-ilp", Options(time_limit=60, params={"lp_bound": False}))
    assert row["verified"] and "lp_bound" not in row["extra"]


def test_lp_bound_proves_what_the_driver_cannot():
    # a 4-NPU switch node that does not copy, broadcasting one chunk from NPU 0: the
    # combinatorial bounds hold whether a switch copies or not, and give 2 (up to the switch,
    # down to an NPU); the LP without copy proves 4 (the switch forwards each arrival once, so
    # the holders double at best: one delivery in 2, one in 3, the third in 4; the optimum,
    # derived in test_switch), so a schedule of 4 timesteps is optimal, the gap honest
    inst = make_instance(topo("switch", {"nodes": 4, "unwind": 0}), "broadcast", root=0)
    assert ten_ilp.lower_bound(inst) == 2
    params = {"horizon": 4, "switch_copy": False}
    row, _ = pipeline.run(inst, "ten-ilp", Options(driver="early-stop", time_limit=30, params=params))
    assert row["verified"] and row["extra"]["lp_bound"] == 4
    assert row["bound"] == 4 and row["steps"] >= 4
    assert row["status"] == (proven_status(row) if row["steps"] == 4 else "feasible")
    off, _ = pipeline.run(inst, "ten-ilp", Options(driver="early-stop", time_limit=30,
                                                   params={**params, "lp_bound": False}))
    assert off["bound"] < 4 and "lp_bound" not in off["extra"]


@pytest.mark.parametrize("producer", ["ten-ilp", "ten-ilp-symmetric"])
def test_no_lp_bound_is_recorded_when_no_lp_was_solved(producer, tmp_path):
    """A bidirectional 4-ring allgather, one chunk per node: the far node is 2 hops away, and
    each node sends its chunk both ways at timestep 1 and on at timestep 2, so the distance
    bound 2 is the optimum. The schedule meets the combinatorial bound, the LP search beside it
    has nothing to solve, and the row (stored and read back as the tables read it) holds no LP
    bound and does not credit an LP with the proof."""
    inst = make_instance(topo("ring", {"nodes": 4}), "allgather")
    assert bounds.lower_bound(inst) == 2
    row, sched = pipeline.run(inst, producer, Options(time_limit=30, params={"warm": False}))
    assert row["verified"] and row["steps"] == 2 and row["status"] == "optimal"
    extra = row["extra"]
    assert extra["lp_bound"] is None and "no LP was solved" in extra["lp_bound_note"]
    assert extra["lp_bounds"] and all(v is None for v in extra["lp_bounds"].values())
    assert "lp_bound_source" not in extra and "ten-lp" not in row["bound_source"]
    store.put(tmp_path, row, sched)
    df = store.load(tmp_path)
    assert render.lp_bounds(df).isna().all()
    assert "lp_bound_timesteps" not in render.steps_table(df).columns
    assert render.solver_status(df)["lp_bound"].isna().all()


def test_an_allreduce_whose_phases_solve_no_lp_records_no_lp_bound():
    # the 4-ring reduce_scatter and allgather (one chunk per node) each take 2 timesteps, their
    # distance bound (the reduce_scatter is the allgather reversed)
    inst = make_instance(topo("ring", {"nodes": 4}), "allreduce")
    row, _ = pipeline.run(inst, "ten-ilp", Options(time_limit=30, params={"warm": False}))
    assert row["verified"] and row["steps"] == 4
    phases = row["extra"]["phases"]
    assert phases["reduce_scatter"]["lp_bound"] is None and phases["allgather"]["lp_bound"] is None
    assert row["extra"]["lp_bound"] is None and "no phase solved an LP" in row["extra"]["lp_bound_note"]


def test_an_lp_bound_is_recorded_when_an_lp_proves_it():
    """The 4-NPU switch without copy broadcasting one chunk (as in
    test_lp_bound_proves_what_the_driver_cannot): combinatorial bound 2, optimum 4; the
    search beside the horizon search solves the LP at horizons 2 and 3 (both incomplete) and
    the row records the LP's 4, named after it."""
    inst = make_instance(topo("switch", {"nodes": 4, "unwind": 0}), "broadcast", root=0)
    row, _ = pipeline.run(inst, "ten-ilp", Options(time_limit=30, params={"switch_copy": False, "warm": False}))
    assert row["verified"] and row["steps"] == 4 and row["status"] == proven_status(row)
    extra = row["extra"]
    assert extra["lp_bound"] == 4 and extra["lp_bound_source"] == "ten-lp"
    assert extra["lp_bound_horizons"] == [2, 3] and extra["lp_bounds"]["ten-lp"] == 4
    assert "ten-lp" in row["bound_source"]


def test_lp_bound_respects_its_time_budget():
    # the combinatorial bound (4) is below what 2 ms find, so the LP search has horizons to try
    inst = make_instance(topo("torus", {"dims": [3, 3]}), "scatter", root=0, chunks_per_node=2)
    bounds.instance_bounds(inst).parts  # noqa: B018 - computed once per process: the run's 2 ms go to the producer
    row, _ = pipeline.run(inst, "ten-ilp", Options(driver="early-stop", time_limit=0.002, params={"horizon": 8}))
    extra = row["extra"]
    assert extra.get("lp_bound") is None  # never a number found after the limit
    if "lp_bound" in extra:  # the producer got to its LP search: it says why there is no bound
        assert "not finished" in extra["lp_bound_note"]
    else:  # on a loaded machine the 2 ms can end before the producer starts its LP search
        assert row["status"] == "timeout" and row["message"].startswith("time limit 0.002 s reached")


def test_nocongestion_records_but_does_not_use_the_congested_bound():
    inst = make_instance(topo("mesh", {"dims": [2, 2]}), "scatter", root=0, chunks_per_node=5)
    row, _ = pipeline.run(inst, "ten-ilp-nocongestion", Options(time_limit=30))
    assert row["verified"]
    assert row["extra"]["lp_bound"] == 8 and "ignores link capacity" in row["extra"]["lp_bound_note"]
    assert row["steps"] < 8 and row["bound"] <= row["steps"]  # congestion-blind: fewer timesteps


def test_bad_lp_bound_param_is_input_error():
    from collsynth import InputError

    inst = make_instance(topo("ring", {"nodes": 4}), "allgather")
    with pytest.raises(InputError, match="lp_bound"):
        pipeline.run(inst, "ten-ilp", Options(params={"lp_bound": "maybe"}))


# ---- CLI ------------------------------------------------------------------------------------

TOML = """
name = "ring4-bcast3"
[topology]
generator = "ring"
nodes = 4
bandwidth = 100e9
alpha = 0.5e-6
[collective]
kind = "broadcast"
root = 0
chunks_per_node = 3
message_bytes = 1048576
"""


def test_cli_solve_ten_lp(tmp_path, capsys):
    p = tmp_path / "ring4-bcast3.toml"
    p.write_text(TOML)
    out = tmp_path / "s.json"
    code = main(["solve", str(p), "--producer", "ten-lp", "--out", str(out), "--json"])
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    assert code == 0 and row["verified"] and row["status"] == proven_status(row)
    assert row["steps"] == row["bound"] == 3
    sched = read_json(out)
    assert verify.verify(sched, load_instance(p)) is None and sched.num_steps == 3
    code = main(["solve", str(p), "--producer", "ten-ilp", "--param", "lp_bound=false", "--json"])
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    assert code == 0 and row["verified"] and "lp_bound" not in row.get("extra", {})
