"""TEN flow LP: a bound that does not double count across cuts, its size guard, and the
strongest LP bound beside every ILP row."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings, strategies as st

from collsynth.formulations import ten_family, ten_flow_lp, ten_ilp, ten_lp
from collsynth.instances.instance import make_instance
from collsynth.instances.topology import from_edges
from collsynth.solvers import backends as B
from collsynth.solvers import pipeline
from collsynth.solvers.producers import Options
from collsynth.solvers.ten import drivers
from collsynth.tens import bounds, ten, verify
from proofs import proven_status
from builders import strongly_connected_arcs


def relaxation_bound(module, instance, **params) -> int:
    """Smallest horizon whose relaxation delivers everything (plain upward search from the
    distance bound, where every chunk can reach every node, so the relaxation's own bound and
    not the cut bound a run would start from)."""
    h = max(1, bounds.distance_bound(instance))
    while True:
        m = module.build(instance, h, **params)
        assert B.solve(m, "highs").status == "optimal"
        if module.bound(m) <= h:
            return h
        h += 1


def complete(module, instance, horizon: int) -> bool:
    """The relaxation at ``horizon`` delivers everything (so its bound is at most ``horizon``)."""
    m = module.build(instance, horizon)
    assert B.solve(m, "highs").status == "optimal"
    return module.bound(m) <= horizon


def ilp_optimum(instance) -> int:
    o = drivers.horizon_search(instance, ten_ilp, Options(time_limit=60))
    assert o.status == "optimal", o.message
    return int(o.objective)


def two_chassis(slow_delay: int):
    """Two 4-GPU NVLink cliques (0-3, 4-7), one slow link 0 <-> 4 each way, ``slow_delay``
    times the NVLink cost per chunk (no latency, so delays are exact)."""
    fast = {"bandwidth": 100e9, "alpha": 0.0}
    slow = {"bandwidth": 100e9 / slow_delay, "alpha": 0.0}
    edges = [(a, b, fast) for base in (0, 4) for a, b in itertools.permutations(range(base, base + 4), 2)]
    edges += [(0, 4, slow), (4, 0, slow)]
    return from_edges(8, edges, name=f"two-chassis-slow{slow_delay}")


# ---- the two-chassis case: the cut is counted once --------------------------------------------

def test_two_chassis_flow_bound_is_the_cut_bound():
    # Hand analysis of the cut: the 4 chunks of chassis A must all cross 0 -> 4, a pair of
    # capacity 1 and delay 2, so the last one starts no earlier than timestep 7 and arrives at
    # node 4 at the end of 8; nodes 5..7 get it only through node 4: at least 9 timesteps
    # (symmetrically for chassis B). 9 is reached (the verified schedule below).
    inst = make_instance(two_chassis(2), "allgather")
    assert not complete(ten_flow_lp, inst, 8)
    at9 = ten_flow_lp.build(inst, 9)
    assert B.solve(at9, "highs").status == "optimal" and ten_flow_lp.bound(at9) == 9  # bound: 9
    assert complete(ten_lp, inst, 6)  # a sliver across the slow link "fills" the other chassis
    sched = ten_flow_lp.extract(at9)
    assert verify.verify(sched, inst) is None and sched.num_steps == 9


def test_two_chassis_unit_delay_flow_bound_equals_ilp_optimum():
    # delay 1: the last of 4 chunks crosses at timestep 4, reaches chassis B's others at 5
    inst = make_instance(two_chassis(1), "allgather")
    assert relaxation_bound(ten_flow_lp, inst) == 5 == ilp_optimum(inst)
    assert relaxation_bound(ten_lp, inst) < 5


def slow_joined_triangles():
    """Two 3-GPU NVLink cliques (0-2, 3-5) joined by one link 0 <-> 3 of half the bandwidth
    (delay 2); reduce-scatter on it: the combinatorial bound and the hold/sent LP both say 6,
    the flow LP 7, the ILP optimum is 7 (a search over such cases found it)."""
    fast = {"bandwidth": 100e9, "alpha": 0.0}
    slow = {"bandwidth": 50e9, "alpha": 0.0}
    edges = [(a, b, fast) for base in (0, 3) for a, b in itertools.permutations(range(base, base + 3), 2)]
    edges += [(0, 3, slow), (3, 0, slow)]
    return make_instance(from_edges(6, edges, name="triangles-slow2"), "reduce_scatter")


def test_ilp_row_takes_the_stronger_bound_and_says_which():
    inst = slow_joined_triangles()
    assert bounds.lower_bound(inst) == 6 and relaxation_bound(ten_lp, inst) == 6
    row, _ = pipeline.run(inst, "ten-ilp", Options(driver="early-stop", time_limit=60))
    x = row["extra"]
    assert row["verified"] and row["steps"] == 7 and row["status"] == proven_status(row)
    assert x["lp_bounds"]["ten-lp"] == 6 and x["lp_bounds"]["ten-flow-lp"] == 7
    assert x["lp_bound"] == 7 and x["lp_bound_source"] == "ten-flow-lp" and row["bound"] == 7
    assert "ten-flow-lp" in row["bound_source"]
    off, _ = pipeline.run(inst, "ten-ilp", Options(driver="early-stop", time_limit=60, params={"flow_lp": False}))
    assert off["extra"]["lp_bound"] == 6 and off["extra"]["lp_bound_source"] == "ten-lp"
    assert "ten-flow-lp" not in off["extra"]["lp_bounds"] and off["status"] == "feasible"


def test_the_flow_lp_is_not_searched_when_the_combinatorial_bound_is_met():
    inst = make_instance(two_chassis(1), "allgather")  # the cut bound is 5 = the optimum
    row, _ = pipeline.run(inst, "ten-ilp", Options(driver="early-stop", time_limit=60, params={"horizon": 5}))
    assert row["status"] == proven_status(row) and row["steps"] == 5
    assert row["extra"]["flow_lp_note"] == "not needed: the schedule meets the bound 5"
    assert row["extra"]["lp_bounds"] == {"ten-lp": None, "ten-flow-lp": None} and row["extra"]["lp_bound"] is None


# ---- size guard -------------------------------------------------------------------------------

def test_size_guard_refuses_and_never_reports_zero():
    inst = make_instance(two_chassis(1), "allgather")
    n = ten_flow_lp.size(ten.prepare(inst, 5))
    m = ten_flow_lp.build(inst, 5)
    built = sum(v.dim() and len(v) for v in (m.flow, m.sent, m.hold))
    assert n == built  # the estimate made before building is the model's variable count
    with pytest.raises(ten.NotSupported, match="over the budget of 100"):
        ten_flow_lp.build(inst, 5, max_variables=100)
    row, _ = pipeline.run(slow_joined_triangles(), "ten-ilp", Options(driver="early-stop", time_limit=60,
                                                                      params={"max_variables": 100}))
    x = row["extra"]
    assert x["lp_bounds"]["ten-flow-lp"] is None and "over the budget of 100" in x["flow_lp_note"]
    assert x["lp_bound"] == 6 and x["lp_bound_source"] == "ten-lp" and row["status"] == "feasible"
    row, sched = pipeline.run(inst, "ten-flow-lp", Options(time_limit=60, params={"max_variables": 100}))
    assert sched is None and row["status"] == "skipped" and row["bound"] is None
    assert "over the budget" in row["message"]


def test_registered_as_a_relaxation():
    f = ten_family()["ten-flow-lp"]
    assert f.is_relaxation and f.respects_capacity and f.refine is not None


# ---- random digraphs: the flow bound is a bound -------------------------------------------------

@st.composite
def small_digraphs(draw):
    """Strongly connected digraphs on 3-4 nodes; links of 1-2x the base cost, some doubled."""
    n, arcs = draw(strongly_connected_arcs(3, 4, max_extra=3))
    edges = []
    for u, v in sorted(set(arcs)):
        attrs = {"bandwidth": 1e9 / draw(st.sampled_from([1, 2])), "alpha": 0.0}
        edges += [(u, v, attrs)] * draw(st.sampled_from([1, 1, 2]))  # parallel links: capacity 2
    return from_edges(n, edges, name="rand")


@settings(max_examples=10, deadline=None)
@given(small_digraphs(), st.sampled_from(["allgather", "broadcast", "reduce_scatter", "alltoall"]))
def test_random_digraphs_flow_bound_below_ilp_optimum(t, kind):
    inst = make_instance(t, kind, root=0 if kind == "broadcast" else None)
    assert bounds.lower_bound(inst) <= relaxation_bound(ten_flow_lp, inst) <= ilp_optimum(inst)
