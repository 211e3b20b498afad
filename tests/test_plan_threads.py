"""The pricing plan shared by two threads: each part computed once (a second thread asking
meanwhile waits for the first), parts prepared ahead by the calling thread taken by the model
that needs them, and the run's promises kept when the calling thread prepares before it
verifies (prices unchanged, nothing priced for a schedule that fails, the time limit)."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import pytest

from collsynth.limits import Deadline
from collsynth.solvers import pipeline
from collsynth.tens import cost, cost_models, event_layout, plan as plan_module
from collsynth.tens.plan import PricingPlan
from builders import one_way_ring, ring_allgather

WAIT_S = 10.0  # the longest a test waits for another thread before it fails


def _ring(n: int):
    return one_way_ring(n), ring_allgather(n)


def _held():
    """A part's compute function that records ``(thread name, part)`` in ``made``, sets
    ``started`` and returns only once ``release`` is set: ``(compute, started, release, made)``."""
    started, release, made = threading.Event(), threading.Event(), []

    def compute(p):
        started.set()
        release.wait(WAIT_S)  # held until the other thread has asked
        made.append((threading.current_thread().name, object()))
        return made[-1][1]

    return compute, started, release, made


def test_two_threads_asking_for_one_part_compute_it_once_and_the_second_waits():
    inst, sched = _ring(6)
    plan = PricingPlan(sched, inst)
    compute, started, release, made = _held()
    got = {}
    first = threading.Thread(target=lambda: got.setdefault("first", plan.part("x", compute)), name="first")
    first.start()
    assert started.wait(WAIT_S)
    second = threading.Thread(target=lambda: got.setdefault("second", plan.part("x", compute)), name="second")
    second.start()
    second.join(0.3)
    assert second.is_alive() and "second" not in got  # waiting for the first thread's part
    release.set()
    first.join(WAIT_S)
    second.join(WAIT_S)
    assert [name for name, _ in made] == ["first"] and got["first"] is got["second"]


def test_a_model_taking_a_part_while_another_thread_prepares_it_waits_for_that_one():
    inst, sched = _ring(6)
    plan = PricingPlan(sched, inst)
    compute, started, release, made = _held()
    got = {}
    preparing = threading.Thread(target=plan.prepare, args=("x", compute))
    preparing.start()
    assert started.wait(WAIT_S)
    taking = threading.Thread(target=lambda: got.setdefault("taken", plan.take("x")))
    taking.start()
    taking.join(0.3)
    assert taking.is_alive()  # waiting for the part being prepared, not answering None
    release.set()
    preparing.join(WAIT_S)
    taking.join(WAIT_S)
    assert len(made) == 1 and got["taken"] is made[0][1] and not plan.holds("x")
    plan.prepare("x", compute)  # taken: not prepared again
    assert len(made) == 1 and plan.take("x") is None


def test_the_step_view_asked_by_two_threads_at_once_is_computed_once(monkeypatch):
    inst, sched = _ring(40)
    calls = []
    both_asked = threading.Barrier(2, timeout=WAIT_S)
    real = plan_module.step_view

    def counted(schedule):
        calls.append(threading.current_thread().name)
        time.sleep(0.3)  # the other thread asks meanwhile
        return real(schedule)

    monkeypatch.setattr(plan_module, "step_view", counted)
    plan = PricingPlan(sched, inst)
    views = {}

    def ask(name):
        both_asked.wait()
        views[name] = plan.view

    threads = [threading.Thread(target=ask, args=(k,)) for k in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S)
    assert len(calls) == 1 and views["a"] is views["b"]
    assert views["a"].bounds.tolist() == list(range(len(sched) + 1))[::40]  # 40 sends a step, by hand


def test_event_records_prepared_ahead_are_the_ones_the_event_model_uses(monkeypatch):
    inst, sched = _ring(30)
    alone = cost.price_event(sched, inst)
    plan = PricingPlan(sched, inst)
    made, released = [], []
    real_records, real_release = event_layout.event_records, event_layout.group_blocks

    def records(*args):
        made.append(real_records(*args))
        return made[-1]

    def release(rec, *args):
        released.append(rec)
        return real_release(rec, *args)

    monkeypatch.setattr(event_layout, "event_records", records)
    monkeypatch.setattr(event_layout, "group_blocks", release)
    cost.prepare_event(plan)
    assert len(made) == 1 and plan.holds(cost.EVENT_RECORDS)
    cost.prepare_event(plan)  # kept: not made again
    assert len(made) == 1
    priced = cost.price_event(sched, inst, exact_deps=False, plan=plan)
    assert len(made) == 1 and released[-1] is made[0][0]  # the model took the prepared records
    assert not plan.holds(cost.EVENT_RECORDS) and priced.total_s == alone.total_s
    cost.prepare_event(plan)  # taken: nothing is prepared again
    again = cost.price_event(sched, inst, exact_deps=False, plan=plan)  # its own records (the taken ones changed)
    assert len(made) == 2 and released[-1] is made[1][0] and again.total_s == alone.total_s
    # the ring allgather, unidirectional, one chunk per link a step: n - 1 steps of one message time each
    la = inst.topology.link_arrays
    assert alone.total_s == pytest.approx(29 * (la.alpha[0] + inst.collective.chunk_bytes / la.bandwidth[0]))


def _recording(monkeypatch, name: str) -> list[str]:
    """The threads that call ``event_layout.<name>``, in order."""
    threads = []
    real = getattr(event_layout, name)

    def recorded(*args):
        threads.append(threading.current_thread().name)
        return real(*args)

    monkeypatch.setattr(event_layout, name, recorded)
    return threads


def test_a_run_prepares_the_event_records_in_the_calling_thread_and_prices_as_each_model_alone(monkeypatch):
    inst, sched = _ring(200)
    alone = {m: cost_models.price(sched, inst, m).total_s for m in cost_models.names()}
    made_in = _recording(monkeypatch, "event_records")
    real_deps, calls = plan_module.dependencies, []

    def groups_once_records_exist(view, instance, want_pairs=None, schedule=None):  # the calling thread makes them first
        calls.append("dependencies")
        deadline = time.monotonic() + WAIT_S
        while not made_in and time.monotonic() < deadline:
            time.sleep(0.01)
        return real_deps(view, instance, want_pairs, schedule)

    monkeypatch.setattr(plan_module, "dependencies", groups_once_records_exist)
    stages = {}
    row, kept = pipeline.check_and_price(pipeline.schema.empty_row(message=""), sched, inst, Deadline.after(None),
                                          stages, None)
    assert kept is sched and row["verified"] and "pricing plan" in stages
    assert made_in == [threading.main_thread().name] and calls == ["dependencies"]
    for name, total in alone.items():
        assert row[cost_models.MODELS[name].time_column] == total


def test_from_pricing_apart_sends_nothing_is_prepared_ahead(monkeypatch):
    monkeypatch.setattr(pipeline, "PRICING_APART_SENDS", 1000)
    inst, sched = _ring(60)
    made_in = _recording(monkeypatch, "event_records")
    row, kept = pipeline.check_and_price(pipeline.schema.empty_row(message=""), sched, inst, Deadline.after(None),
                                          {}, None)
    assert kept is sched and made_in == ["collsynth pricing"]
    assert row["time_event_s"] == cost.price_event(sched, inst).total_s


def _with_prepare(monkeypatch, prepare) -> None:
    event = cost_models.MODELS["event"]
    monkeypatch.setattr(cost_models, "MODELS", {**cost_models.MODELS, "event": replace(event, prepare=prepare)})


def test_a_preparation_that_raises_is_left_to_its_model(monkeypatch):
    """The model computes the part again (here it does not raise) and prices; a schedule that
    fails verification is reported invalid, not by the preparation's exception."""
    inst, sched = _ring(40)

    def broken(plan):
        raise RuntimeError("preparation failed")

    _with_prepare(monkeypatch, broken)
    row, kept = pipeline.check_and_price(pipeline.schema.empty_row(message=""), sched, inst, Deadline.after(None),
                                          {}, None)
    assert kept is sched and row["time_event_s"] == cost.price_event(sched, inst).total_s
    invalid = sched.select(slice(0, len(sched) - 1))
    row, kept = pipeline.check_and_price(pipeline.schema.empty_row(message=""), invalid, inst, Deadline.after(None),
                                          {}, None)
    assert kept is None and row["status"] == "invalid" and row["time_event_s"] is None


def test_the_time_limit_stops_a_preparation_that_never_checks(monkeypatch):
    inst, sched = _ring(40)

    def endless(plan):
        while True:
            time.sleep(0.01)

    _with_prepare(monkeypatch, endless)
    t0 = time.monotonic()
    row, kept = pipeline.check_and_price(pipeline.schema.empty_row(message=""), sched, inst,
                                          Deadline(time.monotonic() + 0.3, 0.3), {}, None)
    assert time.monotonic() - t0 < 0.3 + 1.5
    assert kept is None and row["status"] == "timeout" and "pricing plan" in row["message"]
    assert row["time_event_s"] is None
