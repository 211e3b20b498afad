"""The TEN ILP as an oracle for the tests: whether a schedule exists within a horizon, solved
directly at that horizon (no driver, no bound: independent of the bounds under test).

The TEN ILP is TACOS-ILP: chunk holdings and sends on the time-expanded network (Won et al.,
"TACOS: Topology-Aware Collective Algorithm Synthesizer for Distributed Training", 2023,
Section V-A; :mod:`collsynth.formulations.ten_ilp`)."""

from __future__ import annotations

import pyomo.environ as pe

from collsynth.limits import Deadline
from collsynth.formulations import ten_ilp, ten_model
from collsynth.solvers import backends


def solves_by(inst, horizon: int, time_limit: float | None = 60) -> bool | None:
    """Whether the TEN ILP (copying switches) delivers everything within ``horizon``; ``None``
    when ``time_limit`` (None: no limit) ended the solve before it proved either (an incumbent
    that delivers everything proves that it can)."""
    if horizon < 1:
        return False
    m = ten_ilp.build(inst, horizon)
    res = backends.solve(m, "highs", deadline=Deadline.after(time_limit))
    assert res.status in ("optimal", "feasible", "no-solution"), res.message  # the last two: the limit
    if res.status == "no-solution":
        return None
    view = ten_model(m)
    delivers = view.arrivals() >= view.required()
    return delivers if res.status == "optimal" or delivers else None


def violated_constraints(model, tol=1e-6) -> list[str]:
    """Names of the active constraints the model's current values break."""
    bad = []
    for con in model.component_data_objects(pe.Constraint, active=True):
        body = pe.value(con.body)
        if (con.lower is not None and body < pe.value(con.lower) - tol) or \
                (con.upper is not None and body > pe.value(con.upper) + tol):
            bad.append(con.name)
    return bad
