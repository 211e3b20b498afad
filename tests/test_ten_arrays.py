"""TEN models built from arrays: the Pyomo rows say what the recorded sparse rows say, and the
congestion-blind model is the TACOS ILP without its capacity rows."""

from __future__ import annotations

import pyomo.environ as pe
import pytest
from pyomo.repn import generate_standard_repn

from collsynth.limits import Deadline
from collsynth.formulations import ten_ilp, ten_ilp_nocongestion, ten_lp
from collsynth.formulations import recorded_rows
from collsynth.solvers import backends as B
from builders import instance_on


CASES = [
    (ten_ilp, ("mesh", {"dims": [3, 3]}), 4, {}),
    (ten_ilp, ("torus", {"dims": [3, 3]}), 2, {"objective": "makespan"}),
    (ten_lp, ("ring", {"nodes": 5}), 3, {}),
    (ten_ilp_nocongestion, ("mesh", {"dims": [2, 3]}), 3, {}),
    (ten_ilp, ("switch", {"nodes": 4, "unwind": 0}), 4, {}),
    (ten_ilp, ("switch", {"nodes": 4, "unwind": 0}), 4, {"switch_copy": False}),
]


@pytest.mark.parametrize("mod, topology, horizon, params", CASES)
def test_every_row_body_is_its_recorded_sparse_row(mod, topology, horizon, params):
    """Pyomo's own reading of each constraint (standard repn) has exactly the coefficients and
    bounds of the CSR row it was built from."""
    m = mod.build(instance_on(*topology), horizon, **params)
    recorded = recorded_rows(m)
    assert "eq_hold_update" in recorded and "ineq_send_needs_hold" in recorded
    checked = 0
    for rec in recorded.values():
        con, indptr, cols, vals, lower, upper, columns = (rec.component, rec.indptr, rec.cols, rec.vals, rec.lower,
                                                          rec.upper, rec.columns)
        assert len(con) == len(indptr) - 1
        for i, c in enumerate(con.values()):
            repn = generate_standard_repn(c.body, compute_values=False)
            got = {id(v): a for v, a in zip(repn.linear_vars, repn.linear_coefs)}
            want = {id(columns[j]): a for j, a in zip(cols[indptr[i]:indptr[i + 1]].tolist(),
                                                      vals[indptr[i]:indptr[i + 1]].tolist())}
            assert got == want and repn.constant == 0
            lo, up = c.lower, c.upper
            assert (lo is None and lower[i] == float("-inf")) or lo == lower[i]
            assert (up is None and upper[i] == float("inf")) or up == upper[i]
            checked += 1
    assert checked == sum(len(r.component) for r in recorded.values()) > 0


def test_nocongestion_is_ten_ilp_without_capacity_rows():
    """Same index sets and rows as ten-ilp but the capacity rows; its optimum on the 3x3 mesh
    (allgather, one chunk per node) by hand: with no capacity every chunk floods along
    shortest paths, so at horizon 4 (the diameter) all 72 pairs arrive and at horizon 3 all
    but the 4 ordered corner-to-opposite-corner pairs (distance 4): 68."""
    inst = instance_on("mesh", {"dims": [3, 3]})
    full = ten_ilp.build(inst, 4)
    blind = ten_ilp_nocongestion.build(inst, 4)
    assert list(full.SENT) == list(blind.SENT) and list(full.HOLD) == list(blind.HOLD)
    names = lambda m: {c.local_name: len(c) for c in m.component_objects(pe.Constraint)}
    capacity = names(full).pop("ineq_link_capacity")
    assert capacity > 0
    assert names(blind) == {k: v for k, v in names(full).items() if k != "ineq_link_capacity"}
    for horizon, pairs in ((4, 72), (3, 68)):
        r = B.solve(ten_ilp_nocongestion.build(inst, horizon), "highs", deadline=Deadline.after(30))
        assert r.status == "optimal" and round(r.objective) == pairs
