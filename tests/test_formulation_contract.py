"""The formulation contract: a TEN formulation with its own component names runs through every
driver and producer; a module that breaks the contract is refused, naming what is wrong."""

from __future__ import annotations

import importlib
import types
from pathlib import Path

import pyomo.environ as pe
import pytest

from collsynth.formulations import (ContractError, TenModel, check, expose, ten_formulation, ten_ilp,
                                    ten_ilp_nocongestion, ten_lp, ten_model)
from collsynth.instances.generators import build as topo
from collsynth.instances.instance import make_instance
from collsynth.solvers import pipeline
from collsynth.solvers.producers import Options
from collsynth.solvers.ten import drivers
from collsynth.solvers.ten.formulation_producers import producer
from collsynth.tens import bounds, ten, verify
from gap_instance import gap_scatter
from proofs import proven_status

PLUGINS = str(Path(__file__).parent / "plugins")


@pytest.fixture(scope="module")
def renamed():
    """tests/plugins/ten_renamed.py: a TEN ILP whose variables are ``x_send`` and ``y_have``."""
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(PLUGINS)
        yield importlib.import_module("ten_renamed")


def test_the_renamed_formulation_exposes_its_own_components(renamed):
    f = ten_formulation(renamed)
    assert (f.name, f.role, f.recovery_valid, f.warm_start, f.respects_capacity) == (
        "test-ten-renamed", "schedule", True, True, True)
    assert f.lower_bound is bounds.lower_bound and f.bound(None) is None  # the contract's defaults
    assert f.summary.startswith("A TEN ILP written apart from")
    inst = make_instance(topo("ring", {"nodes": 4}), "allgather")
    model = f.build(inst, 2)
    view = ten_model(model)
    assert view.sent is model.x_send and view.hold is model.y_have and view.objective == "arrivals"
    assert model.component("sent") is None and model.component("hold") is None
    assert view.data.horizon == 2 and view.required() == 12  # 4 nodes each lack 3 chunks


def _run(driver, kwargs, instance, formulation):
    fn = {"horizon": drivers.horizon_search, "early-stop": drivers.early_stop, "time-cluster": drivers.time_cluster}
    return fn[driver](instance, formulation, Options(time_limit=60), **kwargs)


DRIVER_RUNS = [
    ("horizon", {"warm": False}),
    ("horizon", {}),  # time clustering first, its schedule as the MIP start (set_start)
    ("horizon", {"persistent": True}),  # one model, restricted per horizon
    ("horizon", {"binary": True, "warm": False}),
    ("early-stop", {"warm": False}),  # the incumbent at the lower bound + shortest-path recovery
    ("early-stop", {}),
    ("time-cluster", {"window": 2}),
]
OPTIMAL_CASES = [  # every driver proves its schedule optimal here, so steps must equal ten-ilp's; the
    # shortest-path recovery is longer than the bound (7 > 4, 3 > 2), so the schedule is the model's
    ("mesh", {"dims": [3, 3]}, "allgather"),
    ("torus", {"dims": [3, 3]}, "reduce_scatter"),  # the dual on the transposed torus, reversed
]


@pytest.mark.parametrize("driver,kwargs", DRIVER_RUNS)
@pytest.mark.parametrize("gen,params,kind", OPTIMAL_CASES)
def test_every_driver_runs_the_renamed_formulation(renamed, driver, kwargs, gen, params, kind, monkeypatch):
    inst = make_instance(topo(gen, params), kind)
    built, build = [], renamed.build

    def counted(*args, **kwargs):
        built.append(args[1])  # the horizon
        return build(*args, **kwargs)

    monkeypatch.setattr(renamed, "build", counted)
    mine, ref = _run(driver, kwargs, inst, renamed), _run(driver, kwargs, inst, ten_ilp)
    assert built and mine.extra.get("used") != "recovery"  # the renamed models were solved and gave the schedule
    assert verify.verify(mine.schedule, inst) is None and verify.verify(ref.schedule, inst) is None
    assert mine.status == ref.status == "optimal"
    assert mine.objective == ref.objective == mine.schedule.num_steps


def test_horizon_search_proves_a_horizon_impossible_on_the_renamed_model(renamed):
    """The gap scatter (tests/gap_instance.py): the lower bound 8 is not enough (proven), 9 is;
    the persistent search re-solves one renamed model at both horizons."""
    inst = gap_scatter()
    assert bounds.lower_bound(inst) == 8
    ref = drivers.horizon_search(inst, ten_ilp, Options(time_limit=60), warm=False)
    for kwargs in ({"warm": False}, {"persistent": True, "warm": False}):
        o = drivers.horizon_search(inst, renamed, Options(time_limit=60), **kwargs)
        assert [x["horizon"] for x in o.extra["horizons"]] == [8, 9]
        assert o.extra["horizons"][0]["complete"] is False and o.extra["horizons"][0]["status"] == "optimal"
        assert o.status == ref.status == "optimal" and o.objective == ref.objective == 9
        assert verify.verify(o.schedule, inst) is None
    for run in (drivers.early_stop, drivers.time_cluster):  # heuristics: valid, between the bounds
        o = run(inst, renamed, Options(time_limit=30))
        assert verify.verify(o.schedule, inst) is None
        assert o.bound <= ref.objective <= o.objective <= drivers.recovery_schedule(inst)[2]


def test_the_renamed_formulation_is_a_producer_plugin(renamed, monkeypatch):
    """Loaded through COLLSYNTH_PRODUCERS, it is solved, verified, priced and gets the LP bound
    (on the gap scatter, tests/gap_instance.py: its optimum 9 is above the combinatorial bound
    8, so the LP search beside the run has a horizon to solve)."""
    monkeypatch.syspath_prepend(PLUGINS)
    monkeypatch.setenv("COLLSYNTH_PRODUCERS", "ten_renamed")
    inst = gap_scatter()
    opts = Options(time_limit=60, params={"warm": False})
    ref, _ = pipeline.run(inst, "ten-ilp", opts)
    row, sched = pipeline.run(inst, "test-ten-renamed", opts)
    assert row["verified"] and row["status"] == ref["status"] == proven_status(ref) and row["steps"] == ref["steps"] == 9
    assert sched.meta["producer"] == "test-ten-renamed"
    assert ref["extra"]["lp_bound_horizons"] and row["extra"]["lp_bound_horizons"]  # an LP was solved
    assert row["extra"]["lp_bound"] == ref["extra"]["lp_bound"] <= row["steps"]


def test_a_relaxation_is_run_as_one_whatever_its_name():
    """A module declaring ROLE = "relaxation" (here ten-lp's members under another name) gets
    the relaxation producer: the same bound and schedule length as ten-lp."""
    copy = types.ModuleType("lp_copy", "The TEN LP under another name.")
    copy.NAME, copy.DRIVER_FAMILY, copy.ROLE = "test-lp-copy", "ten", "relaxation"
    for member in ("build", "extract", "bound", "lower_bound", "schedules", "refine"):
        setattr(copy, member, getattr(ten_lp, member))
    prod = producer(copy)
    assert prod.name == "test-lp-copy" and prod.drivers == ("horizon",)
    inst = make_instance(topo("ring", {"nodes": 5}), "allgather")
    mine = prod.run(inst, Options(time_limit=60))
    ref = producer(ten_lp).run(inst, Options(time_limit=60))
    assert verify.verify(mine.schedule, inst) is None and mine.schedule.meta["producer"] == "test-lp-copy"
    assert (mine.bound, mine.objective, mine.status) == (ref.bound, ref.objective, ref.status)
    assert mine.extra["lp_bound"] == ref.extra["lp_bound"] == 2  # 4 chunks over 2 in-links


def test_declared_capabilities_replace_names():
    nc = ten_formulation(ten_ilp_nocongestion)
    assert not nc.respects_capacity and nc.lower_bound is bounds.distance_bound
    assert ten_formulation(ten_lp).is_relaxation and not ten_formulation(ten_ilp).is_relaxation


def _module(name="broken", **members):
    m = types.ModuleType(name, "A formulation under test.")
    m.build = ten_ilp.build
    m.extract = ten_ilp.extract
    m.DRIVER_FAMILY = "ten"
    for k, v in members.items():
        if v is None:
            delattr(m, k)
        else:
            setattr(m, k, v)
    return m


@pytest.mark.parametrize("members,message", [
    ({"extract": None}, "formulation module broken: missing extract(model) -> Schedule"),
    ({"build": None}, "formulation module broken: missing build(instance, horizon, state=None, **params)"),
    ({"build": "ten_ilp.build"}, "formulation module broken: missing build("),
    ({"RECOVERY_VALID": "no"}, "formulation module broken: RECOVERY_VALID must be a bool, got 'no'"),
    ({"ROLE": "oracle"}, "formulation module broken: ROLE must be one of ('schedule', 'relaxation'), got 'oracle'"),
    ({"ROLE": "relaxation"}, "formulation module broken: a relaxation needs bound(model)"),
    ({"DRIVER_FAMILY": "tens"}, "formulation module broken: DRIVER_FAMILY must be one of (None, 'ten'), got 'tens'"),
    ({"lower_bound": 3}, "formulation module broken: lower_bound must be a function, got 3"),
    ({"NAME": 7}, "formulation module broken: NAME must be a str, got 7"),
])
def test_a_module_breaking_the_contract_is_refused(members, message):
    with pytest.raises(ContractError) as e:
        check(_module(**members))
    assert str(e.value).startswith(message)


def test_a_module_following_it_passes_and_keeps_its_defaults():
    m = _module("fine_formulation")
    assert check(m) is m
    f = ten_formulation(m)
    assert f.name == "fine-formulation" and f.summary == "A formulation under test."


def test_a_build_that_exposes_nothing_is_refused_by_name():
    def build(instance, horizon, state=None, **params):
        model = pe.ConcreteModel(name="bare")
        model.x = pe.Var([(0, 0, 1)], domain=pe.Binary)
        model.o = pe.Objective(expr=model.x[0, 0, 1], sense=pe.maximize)
        return model

    inst = make_instance(topo("ring", {"nodes": 4}), "allgather")
    with pytest.raises(ContractError, match="model 'bare' exposes no TenModel"):
        drivers.early_stop(inst, _module(build=build), Options(time_limit=5), warm=False)
    model = build(inst, 1)
    data = ten.prepare(inst, 1)
    with pytest.raises(ContractError, match="TenModel.hold must be a Var of the model indexed by triples"):
        expose(model, TenModel(data=data, sent=model.x, hold=ten_model(ten_ilp.build(inst, 1)).hold))
    with pytest.raises(ContractError, match="objective must be one of"):
        expose(model, TenModel(data=data, sent=model.x, hold=model.x, objective="speed"))
