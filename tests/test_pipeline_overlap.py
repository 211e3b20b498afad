"""The run's stages side by side: lower bounds in a child process beside the producer, pricing
in a thread beside verification. Results are those of the stages run one after the other;
nothing priced is reported for a schedule that does not verify; the time limit still holds."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import numpy as np

from collsynth.limits import GRACE_S, Deadline, TimeLimitReached
from collsynth.solvers import compiling, pipeline
from collsynth.solvers.producers import Options
from collsynth.tens import bounds, cost_models, verify
from collsynth.tens.schedule import from_arrays
from machine import within
from builders import instance_on, one_way_ring, ring_allgather


def test_bounds_from_the_child_process_are_the_bounds_computed_here():
    inst = instance_on("ring", {"nodes": 6})
    here = bounds.Bounds(inst, None, bounds.CUT_BUDGET_S)
    stages = {}
    apart = pipeline.BoundsApart(bounds.Bounds(inst, None, bounds.CUT_BUDGET_S), Deadline.after(None))
    there = apart.collect(stages)
    assert there.parts == here.parts and there.timestep_s == here.timestep_s
    assert there.steps.value == 3  # a bidirectional ring of 6: the farthest node is 3 hops away
    assert there.complete() and 0 <= stages["lower bounds"] < 60


def test_a_bounds_child_out_of_time_reports_every_bound_not_computed():
    inst = instance_on("ring", {"nodes": 6})
    spent = Deadline(time.monotonic() - 1.0, 1.0)
    stages = {}
    settled = pipeline.BoundsApart(bounds.Bounds(inst, None, bounds.CUT_BUDGET_S), spent).collect(stages)
    for model in bounds.MODELS + ("steps",):
        b = settled.of(model)
        assert not b.computed and "share of the time limit ran out" in b.note, (model, b)


def test_a_run_with_its_bounds_apart_matches_the_run_without(monkeypatch):
    inst = instance_on("torus", {"dims": [3, 4]})
    bounds.instance._CACHE.clear()
    here, sched_here = pipeline.run(inst, "ring")
    bounds.instance._CACHE.clear()
    monkeypatch.setattr(pipeline, "BOUNDS_APART_NODES", 1)
    apart, sched_apart = pipeline.run(inst, "ring")
    assert "lower bounds" in apart["extra"]["stages_s"]
    same = [k for k in here if not k.endswith("_s") or k.startswith(("time_", "lower_bound"))]
    assert {k: here[k] for k in same if k != "extra"} == {k: apart[k] for k in same if k != "extra"}
    assert here["extra"]["bounds"] == apart["extra"]["bounds"]
    assert np.array_equal(sched_here.src, sched_apart.src)


def test_speculative_prices_are_the_prices_of_each_model_alone():
    inst = one_way_ring(40)
    sched = ring_allgather(40)
    results = pipeline.SpeculativePricing(sched, inst, Deadline.after(None), None).results()
    assert [m.name for m, _, _ in results] == list(cost_models.names())
    for model, cost, seconds in results:
        assert cost.total_s == cost_models.price(sched, inst, model.name).total_s and seconds >= 0



def _threads_pricing(monkeypatch, sched, inst) -> tuple[dict, list]:
    """Which thread priced each model when the calling thread shares at once, and the results."""
    priced_in = {}

    def recorded(model):
        def price(*args, **kwargs):
            priced_in[model.name] = threading.current_thread().name
            return model.price(*args, **kwargs)
        return replace(model, price=price)

    monkeypatch.setattr(cost_models, "MODELS", {k: recorded(m) for k, m in cost_models.MODELS.items()})
    pricing = pipeline.SpeculativePricing(sched, inst, Deadline.after(None), None)
    pricing.share()
    results = pricing.results()
    threads = dict(priced_in)
    assert [m.name for m, _, _ in results] == list(cost_models.MODELS)
    for model, cost, _ in results:  # the prices of each model alone
        assert cost.total_s == cost_models.price(sched, inst, model.name).total_s
    return threads, results


def test_once_verified_the_calling_thread_prices_beside_the_pricing_thread(monkeypatch):
    inst = one_way_ring(300)
    priced_in, _ = _threads_pricing(monkeypatch, ring_allgather(300), inst)
    assert set(priced_in.values()) == {"collsynth pricing", threading.current_thread().name}


def test_from_pricing_apart_sends_the_calling_thread_prices_the_cheapest_model_only(monkeypatch):
    """On the biggest schedules only the cheapest model runs beside another (memory)."""
    monkeypatch.setattr(pipeline, "PRICING_APART_SENDS", 1000)
    inst = one_way_ring(300)
    priced_in, _ = _threads_pricing(monkeypatch, ring_allgather(300), inst)
    cheapest = next(iter(cost_models.MODELS))
    assert priced_in.pop(cheapest) == threading.current_thread().name
    assert set(priced_in.values()) == {"collsynth pricing"}


def test_a_schedule_that_fails_verification_is_never_priced_though_pricing_ran(monkeypatch):
    inst = one_way_ring(40)
    sched = ring_allgather(40)
    broken = sched.select(slice(0, len(sched) - 1))  # the last send dropped: node 38 misses chunk 39
    # pricing the broken schedule beside its verification does price it ...
    priced = pipeline.SpeculativePricing(broken, inst, Deadline.after(None), None).results()
    assert all(cost.total_s > 0 for _, cost, _ in priced)
    # ... and the run that verifies it reports no price at all
    row = pipeline.schema.empty_row(message="")
    stages = {}
    row, kept = pipeline.check_and_price(row, broken, inst, Deadline.after(None), stages, None)
    assert kept is None and row["status"] == "invalid" and not row["verified"]
    assert "verification failed" in row["message"]
    for model in cost_models.MODELS.values():
        assert row[model.time_column] is None and row[model.price_column] is None
        assert f"pricing ({model.name})" not in stages


def test_a_time_limit_during_verification_and_pricing_still_holds():
    """Half a million sends (the ring allgather on 700 nodes, about a second to produce) under a
    two-second limit: verification and pricing side by side get the grace, and a model that
    cannot finish in it is not started, and named (which models fit depends on the machine)."""
    n, limit = 700, 2.0
    inst = one_way_ring(n)
    compiling.compile_kernels()
    compiling.compile_producer("ring")
    t0 = time.monotonic()
    row, sched = pipeline.run(inst, "ring", Options(time_limit=limit))
    elapsed = time.monotonic() - t0
    assert elapsed <= within(limit + GRACE_S), (elapsed, row["message"])
    if row["verified"]:
        unpriced = [m.name for m in cost_models.MODELS.values() if row[m.time_column] is None]
        for name in unpriced:  # every model left out is named
            assert f"not priced under {name}" in row["message"], row["message"]
    else:
        assert row["status"] == "timeout" and "time limit 2 s reached" in row["message"], row["message"]


def test_a_deadline_passing_while_a_model_prices_names_that_model():
    inst = one_way_ring(300)
    pricing = pipeline.SpeculativePricing(ring_allgather(300), inst, Deadline(time.monotonic() + 0.02, 0.02), None)
    t0 = time.monotonic()
    results = pricing.results()
    # the contract: the results are handed over by the deadline, plus what the grace keeps for
    # the timer to land (STOP_S), not when the last model finishes
    assert time.monotonic() - t0 <= within(0.02 + pipeline.STOP_S)
    last = results[-1][1]
    assert isinstance(last, (str, TimeLimitReached)), results  # stopped, or not started for want of time
    if isinstance(last, TimeLimitReached):
        assert last.stage == f"pricing ({results[-1][0].name})"
    else:
        assert "not started" in last


def test_a_routed_schedule_is_weighed_by_its_hops_before_a_model_starts():
    """Every node of a ring of 256 sends its chunk straight to every other (shortest-path
    routes, 64 hops a send on average): the costliest model, given half the time its rate
    needs for the hops, is not started, though the sends alone would fit many times over."""
    n = 256
    inst = instance_on("ring", {"nodes": n})
    src = np.repeat(np.arange(n), n - 1)
    dst = (src + np.tile(np.arange(1, n), n)) % n
    sched = from_arrays("allgather", n, n, chunk=src, src=src, dst=dst, step=np.ones(len(src), int),
                        routing="shortest-path")
    hops = int(np.minimum(np.abs(dst - src), n - np.abs(dst - src)).sum())
    slowest = min(cost_models.MODELS.values(), key=lambda m: m.rate)
    left = 0.5 * hops / slowest.rate
    assert len(sched) / slowest.rate < left / 20  # by sends alone it would start
    pricing = pipeline.SpeculativePricing(sched, inst, Deadline(time.monotonic() + left, left), None)
    pricing.prepare()
    pricing.share()
    results = {model.name: result for model, result, _ in pricing.results()}
    assert isinstance(results[slowest.name], str), results
    assert "not started" in results[slowest.name] and f"{hops:,} hops" in results[slowest.name]


def test_a_malformed_schedule_is_refused_before_any_pricing_starts():
    """Pricing starts only once every send's ids are in range: the kernels index the instance's
    arrays with them."""
    inst = one_way_ring(40)
    sched = ring_allgather(40)
    assert verify.malformed(sched, inst) is None
    far = from_arrays("allgather", 40, 40, chunk=[0, 0], src=[0, 1], dst=[1, 10**6], step=[1, 2])
    v = verify.malformed(far, inst)
    assert v is not None and v.index == 1 and "not in 0..39" in str(v)
    stages = {}
    row, kept = pipeline.check_and_price(pipeline.schema.empty_row(message=""), far, inst, Deadline.after(None),
                                          stages, None)
    assert kept is None and row["status"] == "invalid" and "not in 0..39" in row["message"]
    assert list(stages) == ["verification"] and row["time_sync_s"] is None
