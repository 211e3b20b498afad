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
>>> kept.done("ten"); "groups" in vars(kept), kept.done("event"), "groups" in vars(kept)
(True, None, False)
"""

from __future__ import annotations

from dataclasses import replace
from functools import cached_property

import numpy as np

from ..instances.instance import Instance
from .dependencies import Deps, StepView, dependencies, dependency_pairs_of, step_view
from .routing import Routes, route_sends
from .schedule import Schedule


class PricingPlan:
    """Step order, routes and dependencies of ``schedule`` on ``instance``, each computed on
    first use and kept (see the module doc). A plan belongs to one schedule and one instance:
    the cost models refuse a plan of another (:func:`collsynth.tens.cost.plan_for`)."""

    def __init__(self, schedule: Schedule, instance: Instance, models: tuple[str, ...] | None = None):
        self.schedule = schedule
        self.instance = instance
        self._pairs: tuple[np.ndarray, np.ndarray] | None | bool = False  # False: not computed yet
        self._left = None if models is None else set(models)

    def done(self, model: str) -> None:
        """``model`` has taken what it needs from the plan. Once every model of ``models`` (the
        plan's constructor argument) has, the plan drops its arrays, so that the last model's
        compiled loop runs without them; a plan made without ``models`` keeps them."""
        if self._left is None:
            return
        self._left.discard(model)
        if not self._left:
            for name in ("view", "routes", "groups", "whole"):
                self.__dict__.pop(name, None)
            self._pairs = False

    def belongs_to(self, schedule: Schedule, instance: Instance) -> bool:
        """Whether this plan was made for ``schedule`` on ``instance`` (the same objects)."""
        return self.schedule is schedule and self.instance is instance

    @cached_property
    def view(self) -> StepView:
        """The sends in stable step order (:class:`~collsynth.tens.dependencies.StepView`)."""
        return step_view(self.schedule)

    @cached_property
    def routes(self) -> Routes:
        """The route of every position of :attr:`view` (raises :class:`~collsynth.InputError`
        for a send off the links of a ``routing == "links"`` schedule)."""
        v = self.view
        return route_sends(v.src, v.dst, self.schedule.routing, self.instance.topology)

    @cached_property
    def groups(self) -> Deps:
        """Arrival groups and what every position needs, without explicit pairs."""
        return dependencies(self.view, self.instance, want_pairs=False)

    @cached_property
    def whole(self) -> bool:
        """Every send moves a whole chunk."""
        v = self.view
        return bool(((v.lo == 0) & (v.hi == v.denom)).all())

    def deps(self, want_pairs: bool | None) -> Deps:
        """:attr:`groups` with the explicit dependency pairs when ``want_pairs`` (default: the
        schedule has pieces) and they number at most
        :data:`~collsynth.tens.dependencies.PAIR_BUDGET`; the pairs are computed once."""
        if want_pairs is None:
            want_pairs = not self.whole
        if not want_pairs:
            return self.groups
        if self._pairs is False:
            self._pairs = dependency_pairs_of(self.view, self.groups)
        return self.groups if self._pairs is None else replace(self.groups, pairs=self._pairs)
