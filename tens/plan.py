"""Pricing plan: what every cost model derives from a schedule before its compiled loop, derived
once per schedule and shared (``docs/cost-models.md``).

The three models of :mod:`collsynth.tens.cost` (the synchronous alpha-beta steps of Zhao et
al., "Efficient Direct-Connect Topologies for Collective Communications", NSDI 2025, Sections
2-3; the TEN timesteps of Won et al., "TACOS: Topology-Aware Collective Algorithm Synthesizer
for Distributed Training", MICRO 2024, Section IV; the congestion-aware event simulation) all
stream over the sends in stable step order, walk each send's route and (``ten``, ``event``)
read its data dependencies. A :class:`PricingPlan` computes each of these the first time a
model asks and keeps it for the next model: the step-ordered view
(:func:`collsynth.tens.dependencies.step_view`), the routes
(:func:`collsynth.tens.routing.route_sends`) and the arrival groups with, when asked, the
explicit dependency pairs (:func:`collsynth.tens.dependencies.dependencies`).

Two threads may share a plan (:class:`collsynth.solvers.pipeline.SpeculativePricing` prices in
one while the other verifies): every part has a lock of its own, held while the part is
computed, so a part is computed once and a second thread asking for it meanwhile waits for
that one; parts computed from one another lock in the order they are derived (view, then
routes or groups, then what is derived from them), so no two threads wait on each other.
A model may also have a part of its own computed ahead, by whichever thread is free
(:meth:`PricingPlan.prepare`), and take it when it prices (:meth:`PricingPlan.take`).

>>> from collsynth.instances.generators import build
>>> from collsynth.instances.instance import make_instance
>>> from collsynth.tens.schedule import from_arrays
>>> inst = make_instance(build("ring", {"nodes": 3}), "allgather")
>>> s = from_arrays("allgather", 3, 3, chunk=[0, 0], src=[0, 1], dst=[1, 2], step=[1, 2])
>>> plan = PricingPlan(s, inst)
>>> plan.view.bounds.tolist(), plan.deps(None).g_in.tolist()
([0, 1, 2], [-1, 0])
>>> plan.deps(None) is plan.deps(False)
True
>>> kept = PricingPlan(s, inst, models=("ten", "event")); kept.deps(None).groups
2
>>> kept.done("ten"); kept.holds("groups"), kept.done("event"), kept.holds("groups")
(True, None, False)
>>> plan.prepare("hops", lambda p: p.routes.hops[p.routes.r]); plan.take("hops").tolist(), plan.take("hops")
([1, 1], None)
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any, Callable

from ..instances.instance import Instance
from .dependencies import Deps, StepView, dependencies, dependency_pairs_of, step_view, whole_pieces
from .routing import Routes, route_sends
from .schedule import Schedule

_ABSENT = object()


class PricingPlan:
    """Step order, routes and dependencies of ``schedule`` on ``instance``, each computed on
    first use and kept (see the module doc). A plan belongs to one schedule and one instance:
    the cost models refuse a plan of another (:func:`collsynth.tens.cost.plan_for`)."""

    def __init__(self, schedule: Schedule, instance: Instance, models: tuple[str, ...] | None = None):
        self.schedule = schedule
        self.instance = instance
        self._left = None if models is None else set(models)
        self._parts: dict[str, Any] = {}  # name: value, for the parts computed and kept
        self._locks: dict[str, threading.Lock] = {}  # name: the lock held while the part is computed
        self._taken: set[str] = set()  # the parts a model has taken (prepare no longer computes them)
        self._dropped = False  # every model of ``models`` is done: nothing computed is kept any more
        self._guard = threading.Lock()  # over the four above, held only briefly, never while computing

    def done(self, model: str) -> None:
        """``model`` has taken what it needs from the plan. Once every model of ``models`` (the
        plan's constructor argument) has, the plan drops its arrays, so that the last model's
        compiled loop runs without them; a plan made without ``models`` keeps them."""
        with self._guard:
            if self._left is None:
                return
            self._left.discard(model)
            if not self._left:
                self._parts.clear()
                self._dropped = True

    def belongs_to(self, schedule: Schedule, instance: Instance) -> bool:
        """Whether this plan was made for ``schedule`` on ``instance`` (the same objects)."""
        return self.schedule is schedule and self.instance is instance

    def holds(self, name: str) -> bool:
        """Whether the part ``name`` is computed and kept now."""
        with self._guard:
            return name in self._parts

    def part(self, name: str, compute: Callable[[PricingPlan], Any]) -> Any:
        """The part ``name``, ``compute(self)`` the first time any thread asks (under the part's
        lock: a thread asking while another computes it waits for that one), then kept."""
        with self._lock(name):
            with self._guard:
                value = self._parts.get(name, _ABSENT)
            if value is _ABSENT:
                value = compute(self)
                self._keep(name, value)
            return value

    def prepare(self, name: str, compute: Callable[[PricingPlan], Any]) -> None:
        """Compute the part ``name`` ahead, for the model that will :meth:`take` it (unless it
        is kept already or has been taken: then nothing is computed)."""
        with self._lock(name):
            with self._guard:
                if name in self._parts or name in self._taken:
                    return
            self._keep(name, compute(self))

    def take(self, name: str) -> Any:
        """The part ``name`` computed ahead (:meth:`prepare`), handed over: the plan keeps it no
        longer, and a later :meth:`prepare` computes nothing. While another thread prepares it,
        waits for it; ``None`` if nobody did (the caller computes its own)."""
        with self._lock(name), self._guard:
            self._taken.add(name)
            return self._parts.pop(name, None)

    def _lock(self, name: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(name, threading.Lock())

    def _keep(self, name: str, value: Any) -> None:
        with self._guard:
            if not self._dropped:
                self._parts[name] = value

    @property
    def view(self) -> StepView:
        """The sends in stable step order (:class:`~collsynth.tens.dependencies.StepView`)."""
        return self.part("view", lambda plan: step_view(plan.schedule))

    @property
    def routes(self) -> Routes:
        """The route of every position of :attr:`view` (raises :class:`~collsynth.InputError`
        for a send off the links of a ``routing == "links"`` schedule)."""
        return self.part("routes", _routes)

    @property
    def groups(self) -> Deps:
        """Arrival groups and what every position needs, without explicit pairs."""
        return self.part("groups", lambda plan: dependencies(plan.view, plan.instance, want_pairs=False,
                                                             schedule=plan.schedule))

    @property
    def whole(self) -> bool:
        """Every send moves a whole chunk."""
        return self.part("whole", _whole)

    def deps(self, want_pairs: bool | None) -> Deps:
        """:attr:`groups` with the explicit dependency pairs when ``want_pairs`` (default: the
        schedule has pieces) and they number at most
        :data:`~collsynth.tens.dependencies.PAIR_BUDGET`; the pairs are computed once."""
        if want_pairs is None:
            want_pairs = not self.whole
        groups = self.groups
        if not want_pairs:
            return groups
        pairs = self.part("pairs", lambda plan: dependency_pairs_of(plan.view, groups))
        return groups if pairs is None else replace(groups, pairs=pairs)


def _routes(plan: PricingPlan) -> Routes:
    v = plan.view
    return route_sends(v.src, v.dst, plan.schedule.routing, plan.instance.topology)


def _whole(plan: PricingPlan) -> bool:
    v = plan.view
    return whole_pieces(v.lo, v.hi, v.denom)
