"""Run limits: every stage of a run keeps its time limit (plus the stated grace), and memory is
estimated before anything is allocated."""

from __future__ import annotations

import inspect
import os
import pickle
import time

import pytest

from collsynth import InputError
from collsynth.instances import generators, registry, size
from collsynth.instances.instance import instance_from_dict
from collsynth.instances.topology import Topology, from_edges
from collsynth.limits import (GRACE_S, Deadline, TimeLimitReached, TooBig, enforce, parse_bytes, require,
                              seconds_left, set_memory_budget, shielded)
from collsynth.results import store
from collsynth.solvers.pipeline import compile_kernels, compile_producer, run
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
