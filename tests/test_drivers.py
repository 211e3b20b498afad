"""Drivers: horizon search (linear, binary, persistent), early stop + recovery, time clustering."""

from __future__ import annotations

import numpy as np
import pyomo.environ as pe
import pytest
from hypothesis import given, settings, strategies as st

from collsynth.formulations import ten_ilp, ten_ilp_nocongestion, ten_model
from collsynth.instances.generators import build as topo
from collsynth.instances.instance import make_instance
from collsynth.solvers.ten import drivers
from collsynth.solvers.producers import Options

from machine import within
from collsynth.tens import ten, verify
from gap_instance import gap_scatter
from ilp_oracle import solves_by


def _capacity_ok(data, rows):
    load = {}
    for c, l, t in rows.tolist():
        k = int(data.delay[data.group[c], l])
        for tau in range(t - k + 1, t + 1):
            load[(l, tau)] = load.get((l, tau), 0) + 1
    return all(v <= int(data.capacity[l]) for (l, _), v in load.items())


INSTANCES = {  # the shortest-path recovery is longer than the bound on each: a search must solve models
    "mesh 3x3 allgather": lambda: make_instance(topo("mesh", {"dims": [3, 3]}), "allgather"),
    "torus 3x3 allgather": lambda: make_instance(topo("torus", {"dims": [3, 3]}), "allgather"),
    "torus 3x3 reduce_scatter": lambda: make_instance(topo("torus", {"dims": [3, 3]}), "reduce_scatter"),
    "ring 4 alltoall": lambda: make_instance(topo("ring", {"nodes": 4}), "alltoall"),
    "gap scatter": gap_scatter,  # the bound 8 is impossible: the searches go through it to 9
}


@pytest.mark.parametrize("case", INSTANCES)
def test_horizon_variants_agree(case):
    inst = INSTANCES[case]()
    # cold (no time-clustering warm start), so that the searches really solve ILPs
    lin = drivers.horizon_search(inst, ten_ilp, Options(time_limit=60), warm=False)
    binary = drivers.horizon_search(inst, ten_ilp, Options(time_limit=60), binary=True, warm=False)
    pers = drivers.horizon_search(inst, ten_ilp, Options(time_limit=60), persistent=True, warm=False)
    warm = drivers.horizon_search(inst, ten_ilp, Options(time_limit=60))
    assert lin.status == binary.status == pers.status == warm.status == "optimal"
    assert lin.objective == binary.objective == pers.objective == warm.objective
    for o in (lin, binary, pers):  # the schedule is a model's, solved at its horizon (not the recovery)
        assert any(h["complete"] and h["horizon"] == o.objective for h in o.extra["horizons"]), o.extra
    if case == "gap scatter":
        assert [h["complete"] for h in lin.extra["horizons"]] == [False, True]
    assert pers.extra["persistent"] is True
    assert lin.extra["warm"] is False and "time_cluster_steps" not in lin.extra
    assert warm.extra["warm"] is True and warm.extra["time_cluster_steps"] >= warm.objective
    for o in (lin, binary, pers, warm):
        assert verify.verify(o.schedule, inst) is None
    assert solves_by(inst, int(lin.objective) - 1) is False  # the optimum, by the ILP solved one timestep short


@pytest.mark.parametrize("case", INSTANCES)
def test_early_stop_and_time_cluster_verified_and_within_recovery_bound(case):
    inst = INSTANCES[case]()
    optimum = drivers.horizon_search(inst, ten_ilp, Options(time_limit=60), warm=False).objective
    assert solves_by(inst, int(optimum) - 1) is False  # the search's optimum is one (not its own bound)
    rec = drivers.recovery_schedule(inst)[2]
    for o in (drivers.early_stop(inst, ten_ilp, Options(time_limit=20)),
              drivers.time_cluster(inst, ten_ilp, Options(time_limit=20), window=2)):
        assert o.schedule is not None and verify.verify(o.schedule, inst) is None
        assert optimum <= o.objective <= rec
        assert o.bound <= optimum  # the reported bound is a true lower bound
        assert o.gap == pytest.approx((o.objective - o.bound) / o.objective)


def test_early_stop_with_tiny_time_limit_recovers_missing_chunks():
    """A 4x4 mesh at its lower-bound horizon is not solved in 0.5 s: whatever the incumbent
    delivered, the shortest-path recovery completes it and the result verifies."""
    inst = make_instance(topo("mesh", {"dims": [4, 4]}), "allgather")
    o = drivers.early_stop(inst, ten_ilp, Options(time_limit=0.5))
    assert verify.verify(o.schedule, inst) is None
    assert o.objective <= o.extra["recovery_steps"]
    assert o.status in ("feasible", "optimal") and o.bound == ten_ilp.lower_bound(inst)
    if o.status == "feasible":
        assert o.gap > 0 and o.message


@st.composite
def held_states(draw):
    t = topo("mesh", {"dims": [3, 3]})
    inst = make_instance(t, "allgather")
    data = ten.prepare(inst, 1)
    extra = draw(st.lists(st.tuples(st.integers(0, 8), st.integers(0, 8)), max_size=30))
    held = data.pre.copy()
    for c, n in extra:
        held[c, n] = True
    start = draw(st.integers(0, 4))
    return inst, data, held, start


@settings(max_examples=30, deadline=None)
@given(held_states())
def test_recovery_delivers_everything_within_capacity(case):
    inst, data, held, start = case
    rows = drivers.recover(data, held, start)
    assert _capacity_ok(data, rows)
    assert (rows[:, 2] > start).all() if len(rows) else True
    # replay: every send's source holds the chunk when it starts; all missing pairs arrive
    when = np.where(held, start, 1 << 30)
    for c, l, t in sorted(rows.tolist(), key=lambda r: r[2]):
        u, v = int(data.src[l]), int(data.dst[l])
        assert when[c, u] <= t - 1
        when[c, v] = min(when[c, v], t)
    assert ((when < (1 << 30)) | ~data.post).all()


def test_time_cluster_window_parameter_and_nocongestion():
    inst = make_instance(topo("mesh", {"dims": [3, 4]}), "allgather")
    o = drivers.time_cluster(inst, ten_ilp, Options(time_limit=30), window=3)
    assert o.extra["window"] == 3 and verify.verify(o.schedule, inst) is None
    assert o.objective >= ten_ilp.lower_bound(inst)
    nc = drivers.early_stop(inst, ten_ilp_nocongestion, Options(time_limit=30))
    assert verify.verify(nc.schedule, inst) is None


def test_unknown_driver_is_input_error():
    from collsynth import InputError

    inst = make_instance(topo("ring", {"nodes": 4}), "allgather")
    with pytest.raises(InputError):
        drivers.run("nope", inst, ten_ilp, Options())


def _start_is_feasible(model) -> None:
    """Every active constraint of the model holds at the variables' current values."""
    for con in model.component_data_objects(pe.Constraint, active=True):
        body = pe.value(con.body)
        if con.has_lb():
            assert body >= pe.value(con.lower) - 1e-9, con.name
        if con.has_ub():
            assert body <= pe.value(con.upper) + 1e-9, con.name


START_CASES = [
    ("mesh", {"dims": [3, 3]}, "allgather", None),
    ("ring", {"nodes": 5}, "alltoall", None),
    ("torus", {"dims": [2, 3]}, "reduce_scatter", None),
    ("hypercube", {"dim": 3}, "broadcast", 5),
]


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(START_CASES), st.floats(0.0, 1.0))
def test_truncated_schedule_is_a_feasible_mip_start(case, frac):
    """set_start: the recovery schedule cut at any horizon h is a feasible point of the
    arrivals ILP at h, whose objective counts the postcondition pairs it delivers by h."""
    gen, params, kind, root = case
    inst = make_instance(topo(gen, params), kind, root=root)
    data, rows, steps = drivers.recovery_schedule(inst)
    h = max(1, int(round(frac * steps)))
    model = ten_ilp.build(inst, h)
    info = drivers.set_start(model, rows, h)
    _start_is_feasible(model)
    cut = rows[rows[:, 2] <= h]
    pairs = {(c, int(data.dst[l])) for c, l, _ in cut.tolist()}
    delivered = sum(1 for c, n in pairs if data.post[c, n] and not data.pre[c, n])
    assert info["objective"] == delivered == ten_model(model).arrivals()
    assert info["sends"] + info["dropped"] == len(cut)


def test_early_stop_warm_start_on_5x5_mesh():
    """With a 1 % share of 5 s (times the machine's slowdown now, :func:`tests.machine.within`),
    time clustering runs at most one window and recovers the rest, so it misses the 5x5 mesh's
    bound; its schedule cut at the lower bound warm-starts the ILP (the rest of the 5 s leaves
    its build, estimated at well under a second, room on a loaded machine), whose incumbent is at
    least as good as the start, and the answer is no longer than time clustering's or
    recovery's."""
    inst = make_instance(topo("mesh", {"dims": [5, 5]}), "allgather")
    o = drivers.early_stop(inst, ten_ilp, Options(time_limit=within(5)), warm_share=0.01)
    assert o.extra["time_cluster_windows"] <= 1  # out of time after at most one window
    assert o.schedule is not None and verify.verify(o.schedule, inst) is None
    e = o.extra
    assert e["time_cluster_steps"] > e["lower_bound"] == o.bound == ten_ilp.lower_bound(inst)
    ws = e["warm_start"]
    assert ws["source"] == "time-cluster" and ws["horizon"] == e["lower_bound"] and ws["sends"] > 0
    assert e["ilp_status"] in ("feasible", "optimal")
    assert e["ilp_objective"] >= ws["objective"] > 0
    assert o.objective <= e["time_cluster_steps"] and o.objective <= e["recovery_steps"]
    assert o.objective == min(e["candidates"].values()) and e["used"] in e["candidates"]
    assert o.status == ("optimal" if o.objective == o.bound else "feasible")


def test_early_stop_returns_time_cluster_when_it_meets_the_bound():
    inst = make_instance(topo("mesh", {"dims": [3, 4]}), "allgather")
    o = drivers.early_stop(inst, ten_ilp, Options(time_limit=30))
    assert o.status == "optimal" and o.extra["used"] == "time-cluster"
    assert "ilp_status" not in o.extra and verify.verify(o.schedule, inst) is None


@pytest.mark.parametrize("gen,params,kind", [("torus", {"dims": [3, 4]}, "allgather"),
                                             ("ring", {"nodes": 5}, "alltoall")])
def test_horizon_search_warm_starts_each_horizon(gen, params, kind):
    """Time clustering misses the bound here; each horizon below its length is solved from its
    truncated schedule, and the optimum equals the cold search's."""
    inst = make_instance(topo(gen, params), kind)
    o = drivers.horizon_search(inst, ten_ilp, Options(time_limit=60))
    pers = drivers.horizon_search(inst, ten_ilp, Options(time_limit=60), persistent=True)
    binary = drivers.horizon_search(inst, ten_ilp, Options(time_limit=60), binary=True)
    cold = drivers.horizon_search(inst, ten_ilp, Options(time_limit=60), warm=False)
    for w in (o, pers, binary):
        assert w.extra["time_cluster_steps"] > w.extra["lower_bound"]
        assert w.extra["horizons"] and all(x["warm_start"] is not None for x in w.extra["horizons"])
        assert w.status == cold.status == "optimal" and w.objective == cold.objective
        assert w.extra["used"] == "ilp" and verify.verify(w.schedule, inst) is None
    assert pers.extra["persistent"] is True


def test_horizon_search_out_of_time_returns_best_known_honestly():
    inst = make_instance(topo("mesh", {"dims": [5, 5]}), "allgather")
    o = drivers.horizon_search(inst, ten_ilp, Options(time_limit=0.5))
    rec = drivers.recovery_schedule(inst)[2]
    assert o.schedule is not None and verify.verify(o.schedule, inst) is None
    assert o.bound <= o.objective <= min(rec, o.extra["time_cluster_steps"])
    assert o.bound <= ten_ilp.lower_bound(inst)  # nothing above the bound was proven in 0.5 s
    assert o.status == ("optimal" if o.objective == o.bound else "feasible")
