"""No tree-packing decision on a clock (solvers/packing/: twolevel.py, forests.py, latency_choice.py):
a model stopped by its time limit is "unknown", never "infeasible", and the forest (so the row)
records it; a verified pick beats an estimate's pick that does not verify; a flow too large for
the max-flow solver makes the run unsupported wherever it arises.

The stand-in solver is scipy's ``milp`` except that the LP relaxation (the call without
integrality) stops at its limit with no solution, as HiGHS does on a loaded machine.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize
from scipy.optimize import OptimizeResult

from collsynth.instances.instance import make_instance
from collsynth.solvers.packing import forests, latency, latency_choice, producer, twolevel
from collsynth.solvers.producers import Options, Unsupported
from collsynth.tens.cut_optimum import FlowTooLarge, capacities, flow_net, optimum

from test_packing_twolevel import boxes

M = 1e9
REAL_MILP = scipy.optimize.milp


def stopped_at_limit(n):
    return OptimizeResult(status=twolevel.MILP_STOPPED, x=None, success=False,
                          message="Time limit reached. (HiGHS Status 13: model_status is Time limit reached)")


def lp_stops(c, integrality=None, **kw):
    """The stand-in: the LP relaxation stops at its limit, the MILP is solved."""
    if integrality is None:
        return stopped_at_limit(len(c))
    return REAL_MILP(c, integrality=integrality, **kw)


def everything_stops(c, integrality=None, **kw):
    return stopped_at_limit(len(c))


def tree_list(f):
    return [(t.root, t.lo, t.hi, tuple(map(tuple, t.routes))) for t in f.trees]


def test_an_lp_stopped_by_its_limit_does_not_change_the_trees(monkeypatch):
    inst = make_instance(boxes(2, 2, 4e9, 1e9), "allgather", message_bytes=M)
    calm = producer.forest(inst, "allgather", False)
    assert calm.shape == "two-level" and not calm.stopped
    monkeypatch.setattr(scipy.optimize, "milp", lp_stops)
    loaded = producer.forest(inst, "allgather", False)
    assert loaded.shape == "two-level" and tree_list(loaded) == tree_list(calm)
    assert loaded.stopped and "LP relaxation" in loaded.stopped[0] and "unknown" in loaded.stopped[0]


def test_models_stopped_by_their_limit_are_unknown_not_infeasible(monkeypatch):
    topo = boxes(2, 2, 4e9, 1e9)
    net0 = flow_net(topo, topo.npus, [1] * 4)
    opt = optimum(net0)
    monkeypatch.setattr(scipy.optimize, "milp", everything_stops)
    stopped: list = []
    assert twolevel.find(net0, capacities(net0, opt.k, opt.tau), {v: opt.k for v in net0.compute},
                         stopped=stopped) is None  # no Infeasible raised
    assert len(stopped) >= 2 and all("stopped at its" in s for s in stopped)


def test_the_row_records_the_stop(monkeypatch):
    from collsynth.solvers import pipeline

    inst = make_instance(boxes(2, 2, 4e9, 1e9), "allgather", message_bytes=M)
    monkeypatch.setattr(scipy.optimize, "milp", lp_stops)
    row, _ = pipeline.run(inst, "tree-packing", Options(params={"pieces": 3}, time_limit=60))
    assert row["verified"] and "LP relaxation" in row["extra"]["forests"][0]["stopped"][0]


def test_a_verified_pick_beats_an_estimates_pick_that_does_not_verify(monkeypatch):
    """Two candidate forests priced by a stand-in: the estimate's pick 'does not verify' (its
    pricing returns None, as :func:`.emission.price_pieces` does for a schedule that fails), the
    other is priced: the other is chosen."""
    inst = make_instance(boxes(1, 4, 5e9, 1e9), "allgather", message_bytes=1e6)
    f = producer.forest(inst, "allgather", False)
    alts = [f, producer.shallow(inst, f)]
    cands = [latency.Candidate(1, 1e-3, 2, 12, 50, 1, "packed k=1"), latency.Candidate(1, 2e-3, 1, 12, 50, 1, "other")]
    est = latency.Choice("packed k=1", 1, 10, 1e-3, 1e-3, "both", 2, baseline=(0, 10), baseline_k=1, index=0)

    def stand_in(part, forest, pieces, models):
        if forest is alts[0]:
            return None  # the estimate's forest: does not verify
        return {m: 5e-3 for m in models}

    monkeypatch.setattr(latency_choice, "price_pieces", stand_in)
    choice = producer.priced_choice(inst, alts, cands, 1e-6, est)
    assert choice.index == 1 and choice.name == "other"
    assert choice.priced["why"] == "the estimate's pick did not verify" and choice.priced["unverified"] >= 1


@pytest.mark.parametrize("where", ["choose_k", "remove_relays", "pack"])
def test_a_flow_too_large_is_unsupported_wherever_it_arises(monkeypatch, where):
    def too_large(*a, **kw):
        raise FlowTooLarge("capacities up to 4294967296 exceed the int32 flow solver")

    monkeypatch.setattr(forests, where, too_large)
    inst = make_instance(boxes(1, 4, 5e9, 1e9), "allgather", message_bytes=M)
    with pytest.raises(Unsupported, match="int32 flow solver"):
        producer.forest(inst, "allgather", False, shape="greedy")


def test_a_proven_infeasible_model_has_the_status_read_as_infeasible():
    """x0 + x1 >= 3 with both at most 1: scipy's milp proves it infeasible (status 2, the one
    :func:`twolevel.solve` reads as infeasible; 1 is its "iteration or time limit reached")."""
    res = REAL_MILP(np.zeros(2), constraints=scipy.optimize.LinearConstraint(np.ones((1, 2)), 3, np.inf),
                    bounds=scipy.optimize.Bounds(0, 1))
    assert res.status == twolevel.MILP_INFEASIBLE and res.x is None
