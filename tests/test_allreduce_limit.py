"""An allreduce under ``--time-limit`` returns by the limit and its grace with a verified schedule
whatever phase the limit comes in (solvers/packing/producer.py, split_first.py, limits.kept).

Every phase that may be slow on a loaded machine is stood in for by one that never ends (a
sleep the run's timer interrupts) or by a stand-in clock; no test times real work. Checked:

- where the capacity split is expected to win (two-chassis miniature of DGX-2 pairs, six GPUs a
  chassis) a packing of the halves that never ends returns the split, verified (before: the
  halves were packed first, nothing kept); that the split is priced before the halves are packed
  is checked in tests/test_split_first.py, on the same run without a limit;
- two boxes of two GPUs, with link latency and without: a choice of the halves' own (latency
  choice, fill) that never ends returns the packed halves kept before it, verified (before:
  nothing was kept until the joint choice);
- the choice stops before the limit by its own checks, leaving the return of its kept schedule
  and the pipeline's check of its verdict the grace (before: a slow return timed out);
- the chosen pair verified on the run's clock: a final verification that never ends returns the
  kept schedule, verified (before: the pipeline verified it in the grace and timed out);
- the timer's exception arriving wrapped in a ``SystemError`` (raised inside a compiled kernel)
  returns the kept schedule too (before: the run timed out with nothing);
- a cooperative stop at the deadline leaves the keeper its return: the producer's timer, due half
  a second later, is put off (before: it cut the return of the kept schedule).
"""

from __future__ import annotations

import time

import pytest

from collsynth import limits
from collsynth.instances.instance import make_instance
from collsynth.limits import GRACE_S, Deadline, TimeLimitReached
from collsynth.solvers import pipeline
from collsynth.solvers.packing import forests, producer, split_form
from collsynth.solvers.producers import Options

from machine import within
from test_fixed_depth_candidate import _boxes
from test_split_form import two_chassis


def _never_ends(*args, **kw):
    time.sleep(3600)


def _split_instance():
    return make_instance(two_chassis(6, 1.0, 0.0), "allreduce", message_bytes=8e6)


def _latency_instance():
    return make_instance(_boxes(2, 2e-6, 5e-6), "allreduce", message_bytes=2 ** 24)


def _on_the_clock(t0: float, row: dict) -> float:
    """Seconds since ``t0`` less the kernels' preparation, which the pipeline does before the
    run's clock starts (``compile_s``; loading numba's cache takes seconds on a loaded machine)."""
    return time.monotonic() - t0 - (row.get("compile_s") or 0.0)


def _packed(inst):
    return [forests.forest(inst, kind, t) for kind, t in producer.plan("allreduce")]


def _halves_packed_by(monkeypatch, inst, instead):
    """``forests.forest`` for ``inst`` itself (the halves on the whole links) replaced by
    ``instead``; for any other instance (a half on its share) the real one."""
    real = forests.forest

    def forest(instance, *args, **kw):
        return instead(instance, *args, **kw) if instance is inst else real(instance, *args, **kw)

    monkeypatch.setattr(forests, "forest", forest)


def test_halves_packed_past_the_limit_return_the_split_verified(monkeypatch):
    inst = _split_instance()
    _halves_packed_by(monkeypatch, inst, _never_ends)
    limit = within(10.0)  # the split is priced in about 4 s of CPU here, unloaded
    t0 = time.monotonic()
    row, sched = pipeline.run(inst, "tree-packing", Options(time_limit=limit))
    assert _on_the_clock(t0, row) <= limit + GRACE_S
    assert row["verified"] and sched is not None and "time limit" in row["message"]
    assert all(f.get("on_its_share") for f in row["extra"]["forests"])


@pytest.mark.parametrize("alpha", [2e-6, 0.0])
def test_a_halves_choice_past_the_limit_returns_the_halves_kept_before_it(monkeypatch, alpha):
    """The halves' own choices (``pick``: the latency choice, or at alpha 0 the fill's programs)
    never end; the packed halves kept before them are returned."""
    monkeypatch.setattr(producer, "pick", _never_ends)
    limit = within(4.0)
    inst = make_instance(_boxes(2, alpha, 2.5 * alpha), "allreduce", message_bytes=2 ** 24)
    assert not split_form.splits_first(inst, _packed(inst), Options(), alpha)  # no split priced first here
    t0 = time.monotonic()
    row, sched = pipeline.run(inst, "tree-packing", Options(time_limit=limit))
    assert _on_the_clock(t0, row) <= limit + GRACE_S
    assert row["verified"] and sched is not None and "time limit" in row["message"]
    assert row["time_event_s"] >= row["lower_bound_event_s"]


def test_a_choice_stopped_by_its_own_check_leaves_the_return_and_its_check_in_the_grace(monkeypatch):
    """The latency choice stood in for by one that checks the deadline it is given until it
    passes; returning the kept schedule stood in for by one taking 1.6 s (a loaded machine):
    the choice stops :data:`~collsynth.solvers.packing.producer.RETURN_S` before the limit, so
    the return and the pipeline's check of the kept verdict end within the grace."""
    def cooperative(instance, f, parts, alpha, options, deadline):
        while True:
            deadline.check("latency choice")
            time.sleep(0.01)

    real_outcome = producer._outcome

    def slow_outcome(*a, **k):
        time.sleep(1.6)
        return real_outcome(*a, **k)

    monkeypatch.setattr(producer, "pick", cooperative)
    monkeypatch.setattr(producer, "_outcome", slow_outcome)
    limit = within(4.0)
    t0 = time.monotonic()
    row, sched = pipeline.run(_latency_instance(), "tree-packing", Options(time_limit=limit))
    assert _on_the_clock(t0, row) <= limit + GRACE_S
    assert row["verified"] and sched is not None and "time limit" in row["message"]


def test_a_limit_reached_inside_a_compiled_call_returns_the_kept_schedule(monkeypatch):
    """The timer's exception raised inside a compiled (numba) kernel reaches Python as a
    ``SystemError`` wrapping it; stood in for by a choice that, once its deadline has passed,
    raises just that: the kept schedule is returned (before: only a bare ``TimeLimitReached``
    was caught, and the run timed out with nothing)."""
    def interrupted_kernel(instance, f, parts, alpha, options, deadline):
        while not deadline.expired():
            time.sleep(0.01)
        try:
            raise TimeLimitReached("produce")
        except TimeLimitReached as e:
            raise SystemError("<CPUDispatcher> returned a result with an exception set") from e

    monkeypatch.setattr(producer, "pick", interrupted_kernel)
    limit = within(4.0)
    t0 = time.monotonic()
    row, sched = pipeline.run(_latency_instance(), "tree-packing", Options(time_limit=limit))
    assert _on_the_clock(t0, row) <= limit + GRACE_S
    assert row["verified"] and sched is not None and "time limit" in row["message"]


def test_a_final_verification_past_the_limit_returns_the_kept_schedule_verified(monkeypatch):
    """The joint choice stood in for by one returning the packed halves at pieces nothing
    priced; from then on every verification never ends. The kept schedule (the halves at their
    first pieces) is returned, verified when it was kept."""
    from collsynth.tens import verify

    real_verify, real_choose, final = verify.verify, producer.choose_halves, [False]

    def choose(instance, options, packed, picks, *args, **kw):
        final[0] = True
        return list(packed), [3, 3], {}, ""

    def verify_until_final(*a, **k):
        return _never_ends() if final[0] else real_verify(*a, **k)

    monkeypatch.setattr(producer, "choose_halves", choose)
    monkeypatch.setattr(producer, "pick", lambda instance, f, *a, **k: (f, 3, None))
    monkeypatch.setattr(verify, "verify", verify_until_final)
    limit = within(4.0)
    t0 = time.monotonic()
    row, sched = pipeline.run(_latency_instance(), "tree-packing", Options(time_limit=limit))
    assert _on_the_clock(t0, row) <= limit + GRACE_S
    assert row["verified"] and sched is not None
    assert [f["pieces"] for f in row["extra"]["forests"]] != [3, 3]  # the kept pair, not the unverified one


def test_a_cooperative_stop_leaves_the_keeper_time_to_return():
    """An :func:`~collsynth.limits.enforce` block whose timer is due 0.2 s after the deadline
    (the pipeline's lag behind the producer); the body stops itself at the deadline, says it
    keeps what it had (:func:`~collsynth.limits.kept`) and takes 0.5 s to return it (a stand-in
    for building its record on a loaded machine): it returns, uninterrupted."""
    deadline = Deadline.after(0.1)
    with limits.enforce(deadline.extended(0.2), "produce"):
        try:
            while True:
                deadline.check("choice")
                time.sleep(0.01)
        except TimeLimitReached:
            limits.kept()
            time.sleep(0.5)
            returned = "kept"
    assert returned == "kept"
