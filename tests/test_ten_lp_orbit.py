"""The orbit TEN LP (ten-lp-orbit): the full TEN LP restricted to one chunk orbit loses nothing
(same optimum times the group order at every horizon, same bound), its bound is below the
orbit ILP's and the full ILP's optimum, and its translated schedule verifies."""

from __future__ import annotations

import pytest

from collsynth.limits import Deadline
from collsynth.formulations import registry, ten_formulation, ten_ilp, ten_ilp_orbit, ten_lp, ten_lp_orbit, ten_model
from collsynth.solvers import backends, pipeline
from collsynth.solvers.producers import Options
from collsynth.tens import bounds, verify
from builders import instance_on

CAYLEY = [
    ("torus", {"dims": [3, 3]}, "allgather", 1),
    ("torus", {"dims": [3, 3], "bidirectional": False}, "allgather", 1),
    ("torus", {"dims": [2, 3]}, "allgather", 2),
    ("circulant", {"nodes": 8, "offsets": [1, 3]}, "allgather", 1),
    ("hypercube", {"dim": 3}, "reduce_scatter", 1),
    ("circulant", {"nodes": 5, "offsets": [1]}, "alltoall", 1),
]


def _solved(build, inst, h):
    m = build(inst, h)
    r = backends.solve(m, "highs", deadline=Deadline.after(60))
    assert r.status == "optimal", r.message
    return m, r.objective


def _smallest_complete_ilp(build, inst, lo, hi):
    """Smallest horizon in [lo, hi] at which the ILP ``build`` delivers every pair (a reference
    by exhaustive horizon search, independent of the LP)."""
    for h in range(lo, hi + 1):
        m, _ = _solved(build, inst, h)
        view = ten_model(m)
        if view.arrivals() >= view.required():
            return h
    return None


@pytest.mark.parametrize("gen,params,kind,cpn", CAYLEY)
def test_orbit_lp_is_the_full_ten_lp(gen, params, kind, cpn):
    """At every horizon up to its bound the orbit LP's optimum is the full TEN LP's divided by
    the group order (the full LP has a symmetric optimum), so both prove the same bound; the
    orbit LP's bound is at most the orbit ILP's optimum (the best symmetric schedule) and the
    full ILP's optimum (the best schedule), both found by horizon search on the ILPs."""
    inst = instance_on(gen, params, kind, chunks_per_node=cpn)
    N = inst.topology.size
    lb = max(1, bounds.distance_bound(inst))
    orbit_bound = None
    for h in range(lb, lb + 8):
        mo, zo = _solved(ten_lp_orbit.build, inst, h)
        mf, zf = _solved(ten_lp.build, inst, h)
        assert zo * N == pytest.approx(zf, rel=1e-6, abs=1e-6), h
        assert ten_lp_orbit.bound(mo) == ten_lp.bound(mf)
        if ten_lp_orbit.bound(mo) == h:
            orbit_bound = h
            break
    assert orbit_bound is not None
    # the ILPs' optima are searched from one timestep, not from any bound
    sym_opt = _smallest_complete_ilp(ten_ilp_orbit.build, inst, 1, orbit_bound + 6)
    full_opt = _smallest_complete_ilp(ten_ilp.build, inst, 1, sym_opt)
    assert sym_opt is not None and full_opt is not None
    assert orbit_bound <= full_opt <= sym_opt


def test_orbit_lp_model_is_the_group_order_smaller():
    inst = instance_on("torus", {"dims": [4, 4]}, "allgather", chunks_per_node=2)
    full, orb = ten_lp.build(inst, 6), ten_lp_orbit.build(inst, 6)
    assert len(full.sent) == 16 * len(orb.sent) and len(full.hold) == 16 * len(orb.hold)
    assert len(full.ineq_cumulative_send) == 16 * len(orb.ineq_cumulative_send)


def test_registered_as_a_symmetric_relaxation():
    f = ten_formulation(registry()["ten-lp-orbit"])
    assert f.is_relaxation and f.symmetric and f.takes_build_limit


def test_translated_fractional_schedule_verifies_and_keeps_capacity():
    """The walk shares capacity per orbit of link pairs, so the translated pieces keep every
    pair's capacity: the verifier accepts the schedule and the TEN capacity check holds."""
    inst = instance_on("torus", {"dims": [3, 3], "bidirectional": False}, "alltoall", chunks_per_node=1)
    m, _ = _solved(ten_lp_orbit.build, inst, 10)
    assert ten_lp_orbit.bound(m) == 10
    sched = ten_lp_orbit.extract(m)
    assert verify.verify(sched, inst) is None
    assert bounds.respects_ten_capacity(sched, inst)


def test_producer_row_names_what_its_bound_proves():
    """Through the pipeline on a one-way 3x3 torus all-to-all: a verified schedule, the LP bound
    recorded with why it bounds every schedule; without a group it refuses with the reason."""
    inst = instance_on("torus", {"dims": [3, 3], "bidirectional": False}, "alltoall", chunks_per_node=1)
    row, sched = pipeline.run(inst, "ten-lp-orbit", Options(time_limit=60))
    assert row["verified"] and sched is not None and row["steps"] >= row["bound"] >= 8
    assert "every schedule" in row["extra"]["lp_bound_source"]
    row, _ = pipeline.run(instance_on("mesh", {"dims": [3, 3]}), "ten-lp-orbit",
                          Options(time_limit=10))
    assert row["status"] == "skipped" and "not vertex-transitive" in row["message"]


def test_orbit_ilp_reports_the_orbit_lp_bound_beside_it():
    """Beside a symmetric formulation the LP bound comes from the orbit LP (the full LP of a
    large Cayley topology would not be built), searched up to the schedule's length."""
    inst = instance_on("torus", {"dims": [3, 3]}, "alltoall", chunks_per_node=1)
    row, _ = pipeline.run(inst, "ten-ilp-orbit", Options(time_limit=60, params={"warm": False}))
    lps = row["extra"]["lp_bounds"]
    assert "ten-lp-orbit" in lps and "ten-lp" not in lps
