"""The cost models every verified schedule is priced under: one module each, discovered.

A cost model is a module of this package that defines ``MODEL``, a :class:`CostModel`: its
name, what its time means, the function that prices a schedule, how fast that function is at
the least (so a run does not start a model that would not finish in the time it has left), and
where its lower bound comes from (:mod:`collsynth.tens.bounds`); it is named after its module. Everything else derives from
the registry :data:`MODELS`: the pipeline prices under every model, cheapest first; the result
schema gains the model's columns (``time_<name>_s``, its bound column, ``price_<name>_s`` and
any columns of its own); the tables compare each model's times against its own bound; the CLI
and the API accept its name. Adding a cost model is adding one module here (and its test).
A model declared with ``default=False`` is *opt-in*: registered in :data:`OPT_IN`, priced only
when asked by name (:func:`get`, :func:`price`, ``collsynth price --model``), never by a run,
so the result schema and the tables do not change. The models are described in
``docs/cost-models.md``.

>>> names()
('sync', 'ten', 'event')
>>> tuple(OPT_IN), get("event-inorder").time_column
(('event-inorder', 'runtime'), 'time_event_inorder_s')
>>> MODELS["ten"].time_column, MODELS["sync"].bound_column, MODELS["event"].price_column
('time_ten_s', 'lower_bound_s', 'price_event_s')
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Any, Callable

from ... import InputError, did_you_mean
from ...instances.instance import Instance
from ..bounds import Bound, Bounds
from ..cost import Cost
from ..plan import PricingPlan
from ..schedule import Schedule

__all__ = ["MODELS", "OPT_IN", "Column", "CostModel", "all_names", "get", "names", "price"]


@dataclass(frozen=True)
class Column:
    """A result column a cost model fills from its :class:`~collsynth.tens.cost.Cost` besides its
    time (``T_L_s`` of the synchronous model, say): name, one-line meaning, and the value."""

    name: str
    doc: str
    value: Callable[[Cost], float]


@dataclass(frozen=True)
class CostModel:
    """One cost model: what a module of this package declares as ``MODEL``.

    ``price(schedule, instance, timestep=None, exact_deps=None)`` returns the schedule's
    :class:`~collsynth.tens.cost.Cost` (a model ignores the options it has no use for:
    ``timestep`` is the TEN timestep in seconds, ``exact_deps`` forces how data dependencies
    are tracked). A model with ``uses_plan`` also takes ``plan``, the schedule's
    :class:`~collsynth.tens.plan.PricingPlan` (step order, routes, dependencies), which a run
    derives once for all such models. ``rate`` is the hops per second it prices at the least
    on 2 loaded cores (a send over a direct link is one hop, a routed send one per link it
    crosses; ``benchmarks/bench_pricing.py`` prints each model's rate per hop).
    ``prepare(plan)``, for a model with ``uses_plan``, computes ahead, in whichever thread
    calls it, a part of the plan of the model's own that the model takes when it prices
    (:meth:`~collsynth.tens.plan.PricingPlan.prepare`; a run calls it in the thread that
    verifies, before verifying, while another thread prices). ``bound`` picks the model's
    lower bound out of the instance's :class:`~collsynth.tens.bounds.Bounds` (``None``: no valid bound is known, and
    rows say so); ``routed_bound``, where given, the one for schedules routed on shortest paths
    (``routing = "shortest-path"``), which ``bound`` does not cover. ``bound_column`` defaults
    to ``lower_bound_<name>_s``. ``default``: every run
    prices under it (False: only when asked by name, :data:`OPT_IN`). Column names spell a
    hyphen of the name as ``_``.
    """

    name: str
    doc: str
    price: Callable[..., Cost]
    rate: float
    bound: Callable[[Bounds], Bound] | None = None
    routed_bound: Callable[[Bounds], Bound] | None = None
    bound_column: str = ""
    columns: tuple[Column, ...] = ()
    uses_plan: bool = False
    prepare: Callable[[PricingPlan], None] | None = None
    default: bool = True

    def bound_of(self, bnds: Bounds, schedule) -> Bound:
        """The model's lower bound of ``schedule``: ``routed_bound`` for a schedule routed on
        shortest paths where the model declares one, else ``bound`` (not None)."""
        routed = getattr(schedule, "routing", "links") != "links" and self.routed_bound is not None  # compact forms: links
        return (self.routed_bound if routed else self.bound)(bnds)

    @property
    def time_column(self) -> str:
        """The result column of the model's time: ``time_<name>_s``."""
        return f"time_{self._column_name}_s"

    @property
    def lower_bound_column(self) -> str:
        """The result column of the model's lower bound."""
        return self.bound_column or f"lower_bound_{self._column_name}_s"

    @property
    def price_column(self) -> str:
        """The result column of the time pricing took: ``price_<name>_s``."""
        return f"price_{self._column_name}_s"

    @property
    def _column_name(self) -> str:
        return self.name.replace("-", "_")


def _discover(default: bool = True) -> dict[str, CostModel]:
    """Every ``MODEL`` of this package's modules whose ``default`` is ``default``, cheapest
    (highest ``rate``) first."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        model = getattr(module, "MODEL", None)
        if not isinstance(model, CostModel):
            raise TypeError(f"{module.__name__}: a cost-model module defines MODEL = CostModel(...)")
        if model.name != info.name.replace("_", "-"):  # collsynth.tens.choices names models by their modules
            raise TypeError(f"{module.__name__}: a cost-model module's MODEL is named after it "
                            f"({info.name.replace('_', '-')!r}), got {model.name!r}")
        if model.default == default:
            found.append(model)
    found.sort(key=lambda m: (-m.rate, m.name))
    return {m.name: m for m in found}


MODELS: dict[str, CostModel] = _discover()
OPT_IN: dict[str, CostModel] = _discover(default=False)  # priced only when asked by name


def names() -> tuple[str, ...]:
    """The cost models' names, cheapest first (sorted by name and without loading a model:
    :func:`collsynth.tens.choices.cost_model_names`)."""
    return tuple(MODELS)


def all_names() -> tuple[str, ...]:
    """The names of every registered model: :func:`names`, then the opt-in ones."""
    return tuple(MODELS) + tuple(n for n in OPT_IN if n not in MODELS)


def get(name: str) -> CostModel:
    """The cost model called ``name`` (priced by default or opt-in); an
    :class:`~collsynth.InputError` naming the known ones."""
    model = MODELS.get(name) or OPT_IN.get(name)
    if model is None:
        known = all_names()
        raise InputError("model", f"unknown cost model {name!r}{did_you_mean(name, known)}, "
                                  f"expected one of {', '.join(known)}")
    return model


def price(schedule: Schedule, instance: Instance, model: str = "sync", **options: Any) -> Cost:
    """The cost of ``schedule`` on ``instance`` under cost model ``model`` (one of :func:`names`).

    The schedule is assumed verified (:func:`collsynth.tens.verify.verify`); a send off the
    links of a ``routing == "links"`` schedule raises :class:`~collsynth.InputError`.
    ``options``: ``timestep`` (seconds, the TEN timestep) and ``exact_deps`` (bool), passed to
    the model, which ignores what it does not use.
    """
    return get(model).price(schedule, instance, **options)
