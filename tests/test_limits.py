"""Run limits: every stage of a run keeps its time limit (plus the stated grace), and memory is
estimated before anything is allocated."""

from __future__ import annotations

import inspect
import os
import pickle
import threading
import time

import pytest

from collsynth import InputError
from collsynth.instances import generators, registry, size
from collsynth.instances.instance import instance_from_dict
from collsynth.instances.topology import Topology, from_edges
from collsynth.limits import (GRACE_S, NO_LIMIT, Deadline, TimeLimitReached, TooBig, cancel_at, enforce, parse_bytes,
                              require, seconds_left, set_memory_budget, shielded)
from collsynth.results import store
from collsynth.solvers.compiling import compile_kernels, compile_producer
from collsynth.solvers.pipeline import run
from collsynth.solvers.producers import Options, producers
from machine import SLOWDOWN, within
from builders import from_table

LIMIT = 5.0

# A run per producer family on an instance it cannot finish (produce, verify and price) in five
# seconds, yet that loads in about a second. ``done`` is the producer's own loop and what the row
# must say it got through when the limit stops that loop (None: nothing family-specific to
# check; a limit that lands before the loop, as on a loaded machine, names no progress).
TOO_BIG_TO_FINISH = [
    # TACOS-Greedy: 3600 x 3599 requests on a 60x60 torus (about 20 s here, then ~40 s of pricing)
    ("greedy", {"generator": "torus", "dims": [60, 60]}, ("greedy matching", "requests met")),
    # a closed form: the ring allgather's 2,558,400 sends on the same torus
    ("ring", {"generator": "torus", "dims": [40, 40]}, None),
    # the TEN ILP on an 8x8 mesh: models of ~10^5 variables per horizon
    ("ten-ilp", {"generator": "mesh", "dims": [8, 8]}, None),
    # BFB LP (3) on a 12x12 mesh (no translations): 144 nodes x diameter 22 = 3168 LPs
    ("bfb-lp", {"generator": "mesh", "dims": [12, 12]}, ("BFB per-(node, step) problems", "of 3168 solved")),
    # an expansion: the line graph of Kautz K(3, 5) (324 nodes; 972 after the expansion)
    ("expansion", {"generator": "line_graph", "base": {"generator": "kautz", "degree": 3, "diameter": 5}}, None),
]


@pytest.mark.slow
@pytest.mark.parametrize("producer,topology,done", TOO_BIG_TO_FINISH, ids=[c[0] for c in TOO_BIG_TO_FINISH])
def test_a_run_too_big_to_finish_ends_within_its_limit_plus_grace(producer, topology, done):
    producers()  # the families' imports and the kernels' compilation are not the run's (run() warms
    compile_kernels()  # them before its clock starts, once per process)
    compile_producer(producer)
    inst = from_table(topology, name=producer)
    t0 = time.monotonic()
    row, sched = run(inst, producer, Options(time_limit=LIMIT))
    elapsed = time.monotonic() - t0
    assert elapsed <= within(LIMIT + GRACE_S), (elapsed, SLOWDOWN, row["message"])  # the contract, on this machine now
    stages = row["extra"]["stages_s"]
    assert "lower bounds" in stages and "produce" in stages
    if row["status"] == "timeout":  # stopped before a verified schedule: where, and what was done
        assert sched is None and not row["verified"]
        assert row["message"].startswith(f"time limit {LIMIT:g} s reached during "), row["message"]
        assert "done: lower bounds" in row["message"]
        if done and f"reached during produce ({done[0]}" in row["message"]:
            assert done[1] in row["message"], row["message"]
    elif row["verified"]:  # a schedule in time, its pricing cut: the prices it finished are kept
        assert sched is not None and row["time_sync_s"] is not None or "pricing (sync)" in row["message"]
        if "time limit" in row["message"]:
            assert "not priced under" in row["message"]
    else:  # a solver's own limit: what it says it has
        assert row["status"] in ("feasible", "no-solution") and row["message"], row["message"]


def test_the_timer_stops_a_loop_that_never_checks():
    deadline = Deadline.after(0.3)
    t0 = time.monotonic()
    with pytest.raises(TimeLimitReached) as err:
        with enforce(deadline, "a busy loop"):
            while True:
                pass
    assert err.value.stage == "a busy loop"
    assert 0.3 <= time.monotonic() - t0 < 0.3 + GRACE_S


def test_a_shielded_call_finishes_before_the_timer_lands():
    finished = []
    t0 = time.monotonic()
    with pytest.raises(TimeLimitReached):
        with enforce(Deadline.after(0.1), "stage"):
            with shielded():
                time.sleep(0.4)  # a solver call ending by its own limit
                finished.append(time.monotonic() - t0)
            while True:
                pass
    assert finished and finished[0] >= 0.4
    assert time.monotonic() - t0 < 0.4 + GRACE_S


def test_solver_limits_are_capped_by_the_deadline_being_enforced():
    assert seconds_left(60.0) == 60.0 and seconds_left(None) is None  # no deadline: as given
    with enforce(Deadline.after(2.0), "stage"):
        left = seconds_left(60.0)
        assert 1.0 < left <= 2.0
        assert seconds_left(None) <= 2.0
        assert seconds_left(0.5) == 0.5


def test_cooperative_checks_and_pickling():
    d = Deadline.after(0.0)
    with pytest.raises(TimeLimitReached) as err:
        d.check("matching", "3 of 9 requests met")
    again = pickle.loads(pickle.dumps(err.value))  # raised in pool workers, re-raised here
    assert (again.stage, again.done) == ("matching", "3 of 9 requests met")
    assert str(again) == "time limit reached during matching (3 of 9 requests met)"
    Deadline.after(None).check("never")  # no limit: no stop
    assert not isinstance(err.value, Exception)  # `except Exception` in a backend must not swallow it


def test_sizes_parse():
    assert parse_bytes("8G") == 8 << 30 and parse_bytes("1.5k") == 1536 and parse_bytes("100") == 100
    for bad in ("lots", "-1G", "0", "nan"):
        with pytest.raises(InputError):
            parse_bytes(bad)


# ---- size estimates ----------------------------------------------------------------------------

SMALL = [
    ("ring", {"nodes": 7}), ("ring", {"nodes": 7, "bidirectional": False}), ("mesh", {"dims": [3, 4]}),
    ("torus", {"dims": [3, 4, 2]}), ("hypercube", {"dim": 4}), ("complete", {"nodes": 5}),
    ("complete_bipartite", {"degree": 3}), ("hamming", {"dims": 2, "q": 3}), ("circulant", {"nodes": 9, "offsets": [1, 3]}),
    ("kautz", {"degree": 2, "diameter": 3}), ("generalized_kautz", {"degree": 3, "nodes": 10}),
    ("de_bruijn", {"degree": 2, "diameter": 3}), ("twisted_torus", {"a": 3}), ("dgx1", {}),
    ("dragonfly", {"group_size": 3}), ("hyperx", {"dims": [2, 3], "trunking": 2}),
    ("hammingmesh", {"board": [2, 2], "grid": [2, 2]}), ("hammingmesh", {"board": [2, 2], "grid": [2, 3], "fabric": "switch"}),
    ("switch", {"nodes": 5}), ("switch", {"nodes": 6, "unwind": 2}),
    ("hierarchical", {"levels": ["ring", "complete", "switch"], "dims": [2, 3, 2]}),
    ("optical_ring", {"nodes": 6, "wavelengths": 2}),
    ("line_graph", {"base": {"generator": "kautz", "degree": 2, "diameter": 2}, "times": 2}),
    ("degree_expansion", {"base": {"generator": "ring", "nodes": 4}, "copies": 3}),
    ("cartesian", {"base": {"generator": "ring", "nodes": 3}, "times": 3}),
    ("cartesian", {"base": {"generator": "ring", "nodes": 3}, "other": {"generator": "complete", "nodes": 4}}),
    ("ndv2", {"chassis": 3, "inter_chassis": "switch"}), ("ndv2", {"chassis": 2}), ("dgx2", {"chassis": 2}),
    ("dgx2", {"chassis": 1, "unwind": 3}), ("dgx_a100", {"nodes": 3}), ("dgx_h100", {"nodes": 2, "unwind_nvswitch": 2,
                                                                                        "unwind_rail": 1}),
    ("mi250", {"nodes": 2}), ("mi250", {"nodes": 3, "unwind": 2}), ("ring_fc_switch", {"nodes": 3}),
    ("ring_fc_switch", {"nodes": 4, "unwind": 0}), ("ring_ring", {"dims": [3, 4]}), ("switch_switch", {}),
    ("forestcoll_a100", {"nodes": 3}), ("forestcoll_mi250", {"nodes": 2}),
    ("hgx_h100", {"nodes": 3, "nics": 2}), ("hgx_h100", {"nodes": 2, "nics": 8}),
    ("rail_clos", {"groups_per_pod": 2, "boxes_per_group": 2, "gpus_per_box": 2, "rails": 2, "spines": 2, "radix": 4}),
    ("rail_clos", {"pods": 2, "groups_per_pod": 1, "boxes_per_group": 2, "gpus_per_box": 2, "rails": 2, "spines": 1,
                   "cores": 1, "radix": 8, "planes": 2}),
    ("fat_tree", {"k": 4}), ("hpn", {"segments": 2, "hosts_per_segment": 4, "aggregations": 2}),
]


@pytest.mark.parametrize("name,params", SMALL, ids=[f"{n}-{i}" for i, (n, _) in enumerate(SMALL)])
def test_counts_from_parameters_match_the_built_topology(name, params):
    """Node ids exactly and links from above, from the parameters alone (the counting is a
    formula per generator; the build is the construction)."""
    topo = generators.build(name, params)
    nodes, links, field = size.generator_counts(name, generators._arguments(name, params, "topology"),
                                                generators._nested_arguments)
    assert nodes >= topo.size and nodes <= 2 * topo.size, (nodes, topo.size)
    assert links >= topo.num_links, (links, topo.num_links)
    assert field in params or field in inspect.signature(generators.GENERATORS[name]).parameters or field == "generator"


def test_every_generator_declares_its_size():
    """Each registered generator declares a size formula where it is defined; only the
    catalogue of fixed named graphs declares none, and the decorator refuses a generator
    that says nothing."""
    assert set(registry.SIZES) == set(generators.GENERATORS)
    assert {name for name, formula in registry.SIZES.items() if formula is None} == {"distance_regular"}
    assert {name for name, _ in SMALL} == set(generators.GENERATORS) - {"distance_regular"}  # each formula checked
    with pytest.raises(TypeError):
        registry.generator(lambda nodes: None)


def test_a_new_generator_is_one_decorated_function(monkeypatch):
    """A generator added with its size formula is built by name and refused over the memory
    budget from that formula alone, before its function runs: no table elsewhere to edit."""
    for table in (registry.GENERATORS, registry.SIZES):
        monkeypatch.setitem(table, "test_cycle", None)  # the test's generator is gone afterwards
    called = []

    @registry.generator(size=lambda p: (p["nodes"], 2 * p["nodes"], "nodes"))
    def test_cycle(nodes: int) -> Topology:
        """A bidirectional cycle of ``nodes`` nodes."""
        called.append(nodes)
        return from_edges(nodes, [(i, (i + 1) % nodes) for i in range(nodes)], bidirectional=True, name="cycle")

    assert generators.build("test_cycle", {"nodes": "5"}).num_links == 10 and called == [5]
    set_memory_budget("64M")
    try:
        with pytest.raises(TooBig) as err:  # 100,000 nodes: 210 GB of hop distances
            generators.build("test_cycle", {"nodes": 10**5})
    finally:
        set_memory_budget(None)
    assert err.value.where == "topology.nodes" and "test_cycle with nodes = 100000" in err.value.what
    assert called == [5]


def test_fewest_sends_by_hand():
    # ring of 4, one chunk each: allgather 4 x 3 arrivals; broadcast 3; allreduce 4 blocks x (3 + 3)
    assert size.fewest_sends("allgather", 4, 1) == 12
    assert size.fewest_sends("broadcast", 4, 1) == 3
    assert size.fewest_sends("gather", 4, 2) == 6
    assert size.fewest_sends("allreduce", 4, 1) == 24
    assert size.fewest_sends("alltoall", 3, 1) == 6


def test_memory_budget_refuses_naming_the_field(monkeypatch):
    monkeypatch.delenv("COLLSYNTH_MAX_MEMORY", raising=False)
    set_memory_budget("64M")
    try:
        with pytest.raises(TooBig) as err:  # 10,000 nodes: 2.1 GB of hop distances
            generators.build("torus", {"dims": [100, 100]})
        assert err.value.where == "topology.dims" and "--max-memory budget" in err.value.what
        # a 6x6 torus fits; 1000 chunks per node do not (the schedule alone is 36 x 35 x 1000 sends)
        table = {"name": "t", "topology": {"generator": "torus", "dims": [6, 6]},
                 "collective": {"kind": "allgather", "chunks_per_node": 1000}}
        inst = instance_from_dict(table)
        with pytest.raises(TooBig) as err:
            size.check_run(inst)
        assert err.value.where == "collective.chunks_per_node"
        assert size.estimate(inst).sends == 36 * 35 * 1000
    finally:
        set_memory_budget(None)
    require(1 << 20, "x", "a megabyte")  # the machine's memory holds a megabyte


def test_pipeline_refuses_a_run_over_budget_before_the_producer_starts(monkeypatch):
    inst = from_table({"generator": "ring", "nodes": 6},
                      {"kind": "allgather", "chunks_per_node": 10**7, "message_bytes": 10**9})
    with pytest.raises(TooBig) as err:  # 300 million sends at least (of 16-byte chunks): beyond this machine
        run(inst, "greedy", Options(time_limit=5))
    assert err.value.where == "collective.chunks_per_node"


def test_ten_models_are_estimated_before_they_are_built():
    inst = from_table({"generator": "torus", "dims": [40, 40]})
    est = size.estimate(inst)
    # 1600 chunks x (6400 link pairs + 1600 nodes) x horizon 40 (the diameter): by hand
    assert (est.chunks, est.pairs, est.horizon) == (1600, 6400, 40)
    assert est.variables == 1600 * 8000 * 40
    with pytest.raises(TooBig) as err:  # refused from the estimate: no model of 512 million variables is built
        run(inst, "ten-ilp", Options(time_limit=60))
    assert err.value.where == "topology.dims"
    assert "variables of a TEN model" in err.value.what and "timesteps" in err.value.what


def test_store_claims_share_work_between_batches(tmp_path):
    key = ("i", "p", "", "", 0, "{}")
    far = time.time() + 3600
    assert store.claim(tmp_path, key, "a", far) == "claimed"
    assert store.claim(tmp_path, key, "b", far) == "taken"  # a's process (this one) is alive
    assert store.claim(tmp_path, key, "a", far) == "claimed"  # its own claim again
    store.release(tmp_path, [key], "a")
    assert store.claim(tmp_path, key, "b", time.time() - 1) == "claimed"  # an expired claim ...
    assert store.claim(tmp_path, key, "c", far) == "claimed"  # ... is taken over
    store.put(tmp_path, {"instance": "i", "producer": "p", "solver": "", "driver": "", "seed": 0, "params": "{}",
                         "status": "error", "verified": False})
    assert store.claim(tmp_path, key, "d", far) == "done"
    assert store.claim(tmp_path, key, "d", far, rerun=True) == "claimed"


def test_a_dead_batch_claim_is_taken_over(tmp_path):
    import sqlite3

    key = ("i", "p", "", "", 0, "{}")
    store.claim(tmp_path, key, "gone", time.time() + 3600)
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)  # a pid that no longer runs
    con = sqlite3.connect(tmp_path / "runs.sqlite")
    con.execute("UPDATE claims SET pid = ?", [pid])
    con.commit()
    con.close()
    assert store.claim(tmp_path, key, "next", time.time() + 3600) == "claimed"



def test_kernels_are_compiled_before_the_clock_starts():
    """The warm-up's tiny schedules (whole and fractional copies, a reduction, routed sends)
    verify, and once it ran a run's verification and pricing are the run's own work."""
    assert compile_kernels() == []
    inst = from_table({"generator": "ring", "nodes": 6}, {"kind": "allreduce"})
    row, _ = run(inst, "ring", Options(time_limit=1))
    assert row["verified"] and row["time_event_s"] is not None, row["message"]
    # the contract: a 1 s run verifies and prices by its limit plus the grace (a first compile
    # of the kernels takes tens of seconds, far outside it)
    assert row["verify_s"] + row["price_sync_s"] + row["price_ten_s"] + row["price_event_s"] <= within(1 + GRACE_S)


def test_a_swallowed_timer_fires_again():
    """A timer exception raised where it cannot propagate (a C callback only prints it) is
    raised again until the body stops."""
    swallowed = []
    t0 = time.monotonic()
    with pytest.raises(TimeLimitReached):
        with enforce(Deadline.after(0.1), "stage"):
            try:
                while True:
                    pass
            except TimeLimitReached:
                swallowed.append(time.monotonic() - t0)
            while True:
                pass
    assert len(swallowed) == 1 and time.monotonic() - t0 < 0.1 + GRACE_S


# ---- stopping a solver that runs in C: the cancel timer and HiGHS' interrupt --------------------

def _cancel_timers() -> list:
    return [t for t in threading.enumerate() if t.name == "collsynth-cancel-at"]


def test_cancel_at_cancels_once_the_deadline_passes():
    cancelled = threading.Event()
    fired_at = []
    deadline = Deadline.after(0.2)

    def cancel() -> None:
        fired_at.append(time.monotonic())
        cancelled.set()

    with cancel_at(deadline, cancel):
        assert cancelled.wait(within(0.2 + GRACE_S))  # the body waits for the cancel, as a solver polls its flag
    assert len(fired_at) == 1 and fired_at[0] >= deadline.at  # once, and never before the deadline
    assert not _cancel_timers()  # the timer's thread is joined on exit


def test_cancel_at_does_not_fire_after_a_body_that_finished_in_time():
    calls = []
    with cancel_at(Deadline.after(0.2), lambda: calls.append(time.monotonic())):
        pass
    assert not _cancel_timers()
    time.sleep(0.4)  # past the deadline: the timer was stopped with the body
    assert calls == []
    with cancel_at(NO_LIMIT, lambda: calls.append(0)):  # no limit: no timer at all
        assert not _cancel_timers()
    assert calls == []


def test_cancel_at_a_deadline_already_past_cancels_at_once():
    cancelled = threading.Event()
    with cancel_at(Deadline.after(0), cancelled.set):
        assert cancelled.wait(within(GRACE_S))
    assert not _cancel_timers()


def _market_split(rows: int = 6, seed: int = 0):
    """A market split problem (Cornuejols and Dawande, "A class of hard small 0-1 programs",
    IPCO 1998): ``rows`` equalities over ``10 (rows - 1)`` binaries with coefficients in
    [0, 99] and right-hand sides half the row sums, the violation minimised. Branch and bound
    needs far more than a few seconds for six rows, though the model has 74 variables."""
    import numpy as np
    import pyomo.core as pe

    rng = np.random.default_rng(seed)
    n = 10 * (rows - 1)
    a = rng.integers(0, 100, (rows, n))
    d = a.sum(1) // 2
    m = pe.ConcreteModel()
    m.x = pe.Var(range(n), domain=pe.Binary)
    m.slack = pe.Var(range(rows), range(2), domain=pe.NonNegativeReals)
    m.split = pe.Constraint(range(rows), rule=lambda m, i: sum(int(a[i, j]) * m.x[j] for j in range(n))
                            + m.slack[i, 0] - m.slack[i, 1] == int(d[i]))
    m.violation = pe.Objective(expr=sum(m.slack.values()))
    return m


def _highs_of(model):
    """A ``highspy.Highs`` holding ``model`` (compiled as the ``highs`` backend does), silent,
    without a time limit of its own."""
    highspy = pytest.importorskip("highspy")
    from collsynth.solvers.backends import highs_direct

    lm = highs_direct.compile_linear(model)
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    h.passModel(highs_direct._highs_lp(lm, highspy))
    return h


def test_highs_without_a_time_limit_is_interrupted_at_the_deadline():
    from collsynth.solvers.backends.highs_direct import INTERRUPTS, interrupted_at

    h = _highs_of(_market_split())
    t0 = time.monotonic()
    with interrupted_at(h, Deadline.after(0.5)):
        h.run()  # no time_limit: only the interrupt stops it
    assert time.monotonic() - t0 <= within(0.5 + GRACE_S)
    assert h.getModelStatus().name == "kInterrupt"
    assert all(getattr(h, name).callbacks == [] for name in INTERRUPTS)  # unsubscribed
    assert not _cancel_timers()


def test_a_highs_run_that_finishes_in_time_is_not_interrupted_and_leaves_nothing_behind():
    import pyomo.core as pe

    from collsynth.solvers.backends.highs_direct import INTERRUPTS, interrupted_at

    m = pe.ConcreteModel()  # max x + y, x + 2y <= 4, x, y integers in [0, 3]: optimum 3 (x = 3, y = 0)
    m.x = pe.Var(domain=pe.NonNegativeIntegers, bounds=(0, 3))
    m.y = pe.Var(domain=pe.NonNegativeIntegers, bounds=(0, 3))
    m.c = pe.Constraint(expr=m.x + 2 * m.y <= 4)
    m.o = pe.Objective(expr=m.x + m.y, sense=pe.maximize)
    h = _highs_of(m)
    with interrupted_at(h, Deadline.after(60)):
        h.run()
    assert h.getModelStatus().name == "kOptimal" and h.getInfo().objective_function_value == pytest.approx(3)
    assert all(getattr(h, name).callbacks == [] for name in INTERRUPTS) and not _cancel_timers()
    h.clearSolver()
    h.run()  # the same Highs solves again to the end: no interrupt flag left raised
    assert h.getModelStatus().name == "kOptimal"


@pytest.mark.parametrize("persistent", [False, True], ids=["direct", "pyomo-persistent"])
def test_a_highs_solve_too_big_to_finish_returns_by_its_limit_plus_grace(persistent):
    from collsynth.solvers import backends

    pytest.importorskip("highspy")
    model = _market_split()
    session = backends.Session("highs") if persistent else None
    limit = 1.0
    t0 = time.monotonic()
    res = backends.solve(model, backends.Request("highs", Deadline.after(limit), session=session))
    elapsed = time.monotonic() - t0
    assert elapsed <= within(limit + GRACE_S), (elapsed, SLOWDOWN, res.message)
    assert res.status in ("feasible", "no-solution"), res.message  # stopped at its limit, saying so
    assert "limit hit" in res.message
    if res.status == "feasible":  # the incumbent it kept is in the model
        assert res.objective is not None and pyo_value(model.violation) == pytest.approx(res.objective)


def pyo_value(expr) -> float:
    import pyomo.core as pe

    return float(pe.value(expr))


# ---- a schedule found before the limit is never lost to what runs after it ----------------------

def _ring_allgather(n: int = 6):
    return instance_from_dict({"name": f"ring{n}", "topology": {"generator": "ring", "nodes": n},
                               "collective": {"kind": "allgather"}})


def _mesh_allgather():
    """A 5x5 mesh allgather: its recovery schedule (23 timesteps) is far from the TEN bound
    (12), so the drivers have horizons to solve after it."""
    return instance_from_dict({"name": "mesh5x5", "topology": {"generator": "mesh", "dims": [5, 5]},
                               "collective": {"kind": "allgather"}})


def _limit_reached_in(monkeypatch, module, name: str, stage: str) -> None:
    def limit_reached(*args, **kwargs):
        raise TimeLimitReached(stage)

    monkeypatch.setattr(module, name, limit_reached)


@pytest.mark.parametrize("driver", ["horizon", "early-stop", "time-cluster"])
def test_a_driver_stopped_by_the_limit_keeps_the_schedule_it_knew(monkeypatch, driver):
    from collsynth.solvers.ten import drivers

    _limit_reached_in(monkeypatch, drivers, "_solve", "reading the incumbent back")  # in every solve
    producers()
    params = {"lp_bound": False} if driver == "time-cluster" else {"lp_bound": False, "warm": False}
    row, sched = run(_mesh_allgather(), "ten-ilp", Options(time_limit=60, driver=driver, params=params))
    assert sched is not None and row["verified"], row["message"]  # the recovery schedule, not a timeout
    assert row["status"] == "feasible" and row["objective"] == row["extra"]["recovery_steps"] == 23
    assert "reading the incumbent back" in row["extra"]["stopped"]


def test_early_stop_stopped_while_building_keeps_its_candidates(monkeypatch):
    from collsynth.solvers.ten import drivers

    _limit_reached_in(monkeypatch, drivers, "build", "building the horizon's model")
    producers()
    row, sched = run(_ring_allgather(), "ten-ilp", Options(time_limit=60, driver="early-stop",
                                                           params={"lp_bound": False, "warm": False}))
    assert sched is not None and row["verified"], row["message"]
    assert "building the horizon's model" in row["extra"]["stopped"]


def test_lp_bounds_stopped_by_the_limit_keep_the_run_s_schedule(monkeypatch):
    from collsynth.solvers.ten import formulation_producers

    def limit_reached(*args, **kwargs):
        raise TimeLimitReached("the flow LP bound's size estimate")

    monkeypatch.setattr(formulation_producers, "_lp_bounds", limit_reached)
    producers()
    row, sched = run(_ring_allgather(), "ten-ilp", Options(time_limit=60))
    assert sched is not None and row["verified"], row["message"]
    assert row["extra"]["lp_bound"] is None
    assert "the flow LP bound's size estimate" in row["extra"]["lp_bound_note"]


def test_a_lone_greedy_seed_is_checked_by_the_pipeline_not_twice(monkeypatch):
    from collsynth.solvers.greedy import tacos

    checked = []
    real = tacos.verify
    monkeypatch.setattr(tacos, "verify", lambda s, i: checked.append(1) or real(s, i))
    producers()
    row, sched = run(_ring_allgather(), "greedy", Options(time_limit=60))
    assert sched is not None and row["verified"] and checked == []  # verified once, by the pipeline
    assert row["extra"]["per_seed"][0]["checked"] is False
    best, runs = tacos.multi_start(_ring_allgather(), [0, 1], workers=1)
    assert len(checked) == 2 and all(r["checked"] for r in runs)  # several seeds are compared: each verified


def test_a_call_in_a_child_is_killed_at_the_deadline_and_leaves_no_process():
    """The contract of limits.in_a_child: the answer when in time, the child's exception as
    it was, and a child still running at the deadline killed (TimeLimitReached by limit + grace)."""
    import multiprocessing

    from collsynth.limits import in_a_child

    assert in_a_child(Deadline.after(within(60)), "a sum", sum, [1, 2, 3]) == 6
    with pytest.raises(ValueError, match="invalid literal"):
        in_a_child(Deadline.after(within(60)), "a parse", int, "x")
    t0 = time.monotonic()
    with pytest.raises(TimeLimitReached, match="a sleep"):
        in_a_child(Deadline.after(0.5), "a sleep", time.sleep, 600)
    assert time.monotonic() - t0 <= within(0.5 + GRACE_S)
    assert multiprocessing.active_children() == []
