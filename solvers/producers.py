"""The producer registry: every method that turns an Instance into a Schedule, by name.

A producer family is a module listed in :data:`FAMILIES` with a module-level
``PRODUCERS`` list of :class:`Producer`. Asking for one producer (:func:`get`) imports the
family whose entry in :data:`FAMILIES` names it and no other (a BFB LP run loads neither the
TEN formulations nor the greedy kernels); a name no entry holds is looked up in the families
that discover their producers from their own modules, those that use no solver first, so that
a greedy or closed-form run does not load Pyomo and the solver backends (a second of
start-up). Listing them all (:func:`producers`) imports every family.

A producer's ``run(instance, options)`` returns an :class:`Outcome`: the schedule (unverified;
:func:`collsynth.solvers.pipeline.run` verifies and prices every schedule before anything else
sees it) and what the method knows about it (solver status, objective, bound, closed-form
cost, ...).

A producer that cannot handle an instance raises :class:`Unsupported` with a reason; the
pipeline turns it into a clear one-line error (CLI) or a ``skipped`` row (batch).

A producer declares the parameters it takes (``--param k=v``) as a tuple of :class:`Param`
records, one line each in its own module; :func:`check_params` (one place for every
producer) turns user values into typed ones and refuses unknown keys and malformed values,
and :func:`route_params` hands each parameter of a batch only to the producers declaring it.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, NamedTuple

from .. import InputError, did_you_mean
from . import import_if_present
from ..instances import Instance
from ..instances.size import Build
from ..limits import DEFAULT_TIME_LIMIT_S, Deadline
from ..tens.schedule import Schedule
from ..tens.status import Status

FAMILIES = {  # module: the producers it registers (tests/test_startup.py checks both agree), or None
    # where the family discovers them from its own modules, so that adding one is adding a module
    "collsynth.solvers.ten.formulation_producers": None,  # one per TEN formulation module (ten-ilp, ten-lp, ...)
    "collsynth.solvers.bfb.per_step": ("bfb-lp", "bfb-chunked", "bfb-hetero"),
    "collsynth.solvers.greedy.tacos": ("greedy",),  # TACOS-Greedy
    "collsynth.solvers.greedy.earliest": ("earliest-arrival",),  # bottleneck slots, earliest-arrival paths
    "collsynth.solvers.closed_form": None,  # one module per family: ring, trees, butterfly, swing, optree, ...
    "collsynth.solvers.bfb.expansions": ("expansion",),  # line-graph, degree, cartesian expansions
    "collsynth.solvers.packing": ("tree-packing",),  # ForestColl tree packing
    "collsynth.solvers.flow": ("flow-alltoall", "rail-alltoall"),  # concurrent flow LP paths; PXN paths
}
NAMED_BY_PREFIX = {  # prefix: the module whose producer_named(name) makes the producer "<prefix><argument>"
    "peer:": "collsynth.solvers.peers",  # the peers' schedules in a folder
}
SOLVER_FAMILIES = (  # the families that load Pyomo and the solver backends: get() imports them last
    "collsynth.solvers.ten.formulation_producers",
    "collsynth.solvers.bfb.per_step",
    "collsynth.solvers.bfb.expansions",
)


class Unsupported(Exception):
    """The producer does not handle this instance (topology or collective); the message says why."""


class Param(NamedTuple):
    """One parameter a producer takes: ``--param name=value``.

    ``type``: ``bool``, ``int``, ``float``, ``str``, ``list[int]`` / ``list[float]`` (written
    ``1,2,3`` or ``[1, 2, 3]``), or a tuple of the allowed strings. ``default`` is what the
    producer uses when the parameter is not given (None: decided from the instance, ``help``
    says how). ``low`` / ``high``: the least and greatest value a number (or each number of a
    list) may take, None for no limit.
    """

    name: str
    type: Any
    default: Any
    help: str
    low: Any = None
    high: Any = None


TRUE = ("true", "yes", "1")
FALSE = ("false", "no", "0")


def type_name(kind: Any) -> str:
    """How a parameter type is written in listings and error messages."""
    if isinstance(kind, tuple):
        return " | ".join(kind)
    if typing.get_origin(kind) is list:
        return f"list of {typing.get_args(kind)[0].__name__}"
    return kind.__name__


def parse_value(param: Param, value: Any) -> Any:
    """``value`` (a command-line string, or a TOML/JSON value) as ``param``'s type.

    Raises :class:`~collsynth.InputError` naming ``--param NAME`` and the expected type.

    >>> parse_value(Param("multiport", bool, None, ""), "yes"), parse_value(Param("k", int, 2, ""), "3")
    (True, 3)
    >>> parse_value(Param("radices", list[int], None, ""), "4,4,2")
    [4, 4, 2]
    """
    kind = param.type
    if kind in (int, float):
        return _in_range(param, _number(param, value))
    if typing.get_origin(kind) is list and typing.get_args(kind)[0] in (int, float):
        item = param._replace(type=typing.get_args(kind)[0])
        return [_in_range(param, _number(item, x)) for x in _list(param, value)]
    where = f"--param {param.name}"
    text = value.strip() if isinstance(value, str) else None

    def bad(what: str):
        return InputError(where, f"expected {what}, got {value!r}")

    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if text is not None and text.lower() in TRUE + FALSE:
            return text.lower() in TRUE
        raise bad("true or false")
    if kind is str:
        if text is None:
            raise bad("a string")
        return text
    if isinstance(kind, tuple):
        word = str(value).lower() if isinstance(value, bool) else text
        if word not in kind:
            raise bad(f"one of {', '.join(kind)}")
        return word
    if typing.get_origin(kind) is list:
        return [parse_value(param._replace(type=typing.get_args(kind)[0]), x) for x in _list(param, value)]
    raise TypeError(f"parameter {param.name}: unsupported type {kind!r}")


def _bad(param: Param, value: Any, what: str) -> InputError:
    return InputError(f"--param {param.name}", f"expected {what}, got {value!r}")


def _number(param: Param, value: Any) -> int | float:
    """``value`` as ``param``'s number type (``int`` or ``float``), from a string or a number."""
    text = value.strip() if isinstance(value, str) else None
    try:
        if param.type is int:
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            return int(text) if text is not None else _whole(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        return float(text)
    except (TypeError, ValueError):
        raise _bad(param, value, "an integer" if param.type is int else "a number") from None


def _in_range(param: Param, number: int | float) -> int | float:
    """``number`` if it is finite and within ``param.low .. param.high``, else an InputError."""
    low, high = param.low, param.high
    if not math.isfinite(number) or (low is not None and number < low) or (high is not None and number > high):
        span = {(True, True): f" in {low}..{high}", (True, False): f" of at least {low}",
                (False, True): f" of at most {high}", (False, False): ""}[(low is not None, high is not None)]
        raise _bad(param, number, f"a finite number{span}")
    return number


def _list(param: Param, value: Any) -> list:
    """The items of a list parameter: a TOML/JSON list, or ``1,2,3`` / ``[1, 2, 3]`` text."""
    item = typing.get_args(param.type)[0].__name__
    items = value
    if isinstance(value, str):
        text = value.strip()
        try:
            items = json.loads(text) if text.startswith("[") else [t for t in text.split(",") if t.strip()]
        except json.JSONDecodeError:
            raise _bad(param, value, f"a list of {item}") from None
    if not isinstance(items, list) or not items:
        raise _bad(param, value, f"a non-empty list of {item}")
    return items


def _whole(value: Any) -> int:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise ValueError(value)


MAX_TIME_LIMIT_S = 365 * 24 * 3600.0  # one year: a longer limit is a typo (and overflows the timers)
MAX_SEED = 2**31 - 1  # the seed range every randomised producer and solver accepts
MAX_THREADS = 1024  # solver threads: more is a typo (no machine here has that many cores)


def check_time_limit(value: Any, where: str = "--time-limit") -> float:
    """``value`` as a time limit in seconds: a finite number in (0, :data:`MAX_TIME_LIMIT_S`],
    else an InputError naming ``where``.

    >>> check_time_limit(30)
    30.0
    """
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not 0 < value <= MAX_TIME_LIMIT_S:
        raise InputError(where, f"expected a finite number of seconds in (0, {MAX_TIME_LIMIT_S:g}] "
                                f"(at most a year), got {value}")
    return float(value)


def check_seed(value: Any, where: str = "--seed") -> int:
    """``value`` as a random seed: an integer in 0 .. :data:`MAX_SEED`, else an InputError."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or not 0 <= value <= MAX_SEED:
        raise InputError(where, f"expected an integer seed in 0..{MAX_SEED}, got {value}")
    return int(value)


def check_threads(value: Any, where: str = "--threads") -> int:
    """``value`` as a number of solver threads: an integer in 1 .. :data:`MAX_THREADS`."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or not 1 <= value <= MAX_THREADS:
        raise InputError(where, f"expected an integer number of threads in 1..{MAX_THREADS}, got {value}")
    return int(value)


@dataclass
class Options:
    """What a user can ask of a producer run (CLI flags, API keywords and batch axes), checked
    once here, where it is made: a time limit out of range, a gap outside [0, 1), threads,
    seed or starts out of range are an :class:`~collsynth.InputError` naming the field, for the
    command line, the library API and batch suite files alike.

    ``time_limit`` is what was asked (None: no limit); a run's only clock is ``deadline``
    (:class:`~collsynth.limits.Deadline`), which :func:`collsynth.solvers.pipeline.run` starts
    from it. Stages of a producer get deadlines cut from it (``replace(options,
    deadline=options.timer().share(0.5))``), never seconds.

    >>> Options(time_limit=0)
    Traceback (most recent call last):
    ...
    collsynth.InputError: time_limit: expected a finite number of seconds in (0, 3.1536e+07] (at most a year), got 0
    """

    solver: str = "highs"
    driver: str | None = None
    time_limit: float | None = DEFAULT_TIME_LIMIT_S
    gap: float | None = None
    threads: int = 1
    seed: int = 0
    starts: int = 1
    params: dict[str, Any] = field(default_factory=dict)
    deadline: Deadline | None = None  # the run's end (the pipeline starts it from time_limit)

    def __post_init__(self) -> None:
        if self.time_limit is not None:
            self.time_limit = check_time_limit(self.time_limit, "time_limit")
        if self.gap is not None:
            ok = isinstance(self.gap, numbers.Real) and not isinstance(self.gap, bool) and 0 <= self.gap < 1
            if not ok:
                raise InputError("gap", f"expected a relative gap in [0, 1), got {self.gap}")
        self.threads = check_threads(self.threads, "threads")
        self.seed = check_seed(self.seed, "seed")
        if not isinstance(self.starts, numbers.Integral) or isinstance(self.starts, bool) or self.starts < 1:
            raise InputError("starts", f"expected a whole number of starts >= 1, got {self.starts}")

    def timer(self) -> Deadline:
        """The run's deadline: ``deadline``, or ``time_limit`` seconds from now when unset (a
        producer called outside the pipeline). A producer takes it once, at its start.

        Producers check it between units of work (``timer().check(stage, done)``), cut it for
        their stages (:meth:`~collsynth.limits.Deadline.share`) and pass it to solvers
        (:class:`~collsynth.solvers.backends.Request`)."""
        return self.deadline if self.deadline is not None else Deadline.after(self.time_limit)


@dataclass
class Outcome:
    """What a producer returns: a schedule (or none) and what it knows about it.

    ``status`` (a :class:`~collsynth.tens.status.Status`): optimal (in the producer's own
    model: the row says ``optimal`` only with the instance's proof,
    :func:`~collsynth.solvers.pipeline.judge`) / feasible (limit hit, incumbent kept) /
    infeasible / no-solution / error / skipped (licence limit, unavailable, too big) for
    solver-based producers; ``heuristic`` (greedy) or ``constructed`` (closed forms,
    expansions) otherwise; ``timeout`` when the run's time limit ended it before it had a
    schedule. ``objective``/``bound``
    are in the producer's own units (``units`` says which, e.g. "steps"). ``extra`` holds
    method-specific figures (closed-form T_L/T_B, theorem predictions, seed spread, ...).
    ``found_by`` says which method found the schedule (``ilp@h=5``, ``time-cluster``,
    ``recovery``, ``lp-rounding@h=4+repair``, ...; empty: the producer's family) and
    ``solver_status`` what the solver itself reported on the last solve (empty: none ran).
    ``prices``: cost model name -> the :class:`~collsynth.tens.cost.Cost` the producer computed
    of exactly ``schedule`` with the function the pipeline prices its form with, so the
    pipeline takes it instead of pricing again, and only once the schedule has verified.
    ``certified``: the producer's own verdict on ``schedule`` and its prices
    (:class:`~collsynth.tens.certified.Certified`), which the pipeline takes instead of
    verifying and pricing again only where it holds for that very schedule and instance.
    """

    schedule: Schedule | None
    status: Status
    # what it found, in its own units
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    units: str = "steps"
    # how: the method, and the solver it ran (if any) with what that solver said
    found_by: str = ""
    solver: str = ""
    version: str = ""
    solver_status: str = ""
    nodes: int | None = None
    build_s: float = 0.0
    solve_s: float = 0.0
    message: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    prices: dict[str, Any] = field(default_factory=dict)
    certified: Any = None


@dataclass(frozen=True)
class Producer:
    """A named method: ``run(instance, options) -> Outcome``.

    ``family`` groups producers in listings (formulation, bfb, greedy, closed-form,
    expansion); ``uses_solver`` says whether ``--solver`` applies; ``drivers`` lists the
    drivers it accepts, the first being its default (empty: none); ``params`` the
    parameters it takes; ``warm`` (optional) compiles, or loads from numba's cache, the
    producer's own compiled kernels (:func:`collsynth.solvers.compiling.compile_producer` runs it
    once per process before a run's clock starts); ``defaults`` (optional) picks, from the
    instance, a driver and parameters for a run that sets none: ``defaults(instance, params,
    driver) -> (driver or None, {param: value}, why)`` (:func:`collsynth.solvers.pipeline.run`
    applies what the run left unset and records it in the row's ``extra["defaults"]``);
    ``estimate`` (optional) says, from the instance and the run's typed parameters alone, what
    the run will build: ``estimate(instance, params) ->``
    :class:`~collsynth.instances.size.Build` or None, which the size check before the run
    counts instead of the fewest sends of any schedule (:func:`planned`).
    """

    name: str
    family: str
    run: Callable[[Instance, Options], Outcome]
    summary: str = ""
    uses_solver: bool = False
    drivers: tuple[str, ...] = ()
    params: tuple[Param, ...] = ()
    warm: Callable[[], object] | None = None
    defaults: Callable[[Instance, dict, str | None], tuple] | None = None
    estimate: Callable[[Instance, dict], Build | None] | None = None

    @property
    def default_driver(self) -> str:
        """The driver run when none is asked for ('' for producers that take none)."""
        return self.drivers[0] if self.drivers else ""

    def driver_for(self, asked: str | None) -> str:
        """The driver that runs for ``--driver asked`` (None: the default); an InputError
        naming the accepted drivers when this producer does not take ``asked``."""
        if asked is None or asked == "":
            return self.default_driver
        if asked not in self.drivers:
            allowed = ", ".join(self.drivers) if self.drivers else "none"
            raise InputError("--driver", f"{self.name} does not take driver {asked!r}"
                                         f"{did_you_mean(asked, self.drivers)} (drivers: {allowed})")
        return asked


PLUGINS_ENV = "COLLSYNTH_PRODUCERS"


def plugin_modules() -> tuple[str, ...]:
    """The plug-in modules named in ``COLLSYNTH_PRODUCERS`` (comma-separated importable
    modules, each with a ``PRODUCERS`` list)."""
    return tuple(m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(",") if m.strip())


def family_modules() -> tuple[str, ...]:
    """The built-in families plus the plug-in modules (:func:`plugin_modules`)."""
    return tuple(FAMILIES) + plugin_modules()


def import_family(name: str):
    """The family module ``name``: None for a built-in family that is not installed; a
    plug-in module (:data:`PLUGINS_ENV`) that is absent or has no ``PRODUCERS`` list is an
    InputError naming the variable and the module."""
    module = import_if_present(name)
    if name in FAMILIES:
        return module
    if module is None:
        raise InputError(PLUGINS_ENV, f"cannot import plug-in module {name!r}: no such module")
    if not isinstance(getattr(module, "PRODUCERS", None), (list, tuple)):
        raise InputError(PLUGINS_ENV, f"plug-in module {name!r} has no PRODUCERS list")
    return module


def producers() -> dict[str, Producer]:
    """Every installed producer by name (built-in families whose module is absent are skipped)."""
    out: dict[str, Producer] = {}
    for name in family_modules():
        module = import_family(name)
        for p in getattr(module, "PRODUCERS", ()):
            if p.name in out:
                raise RuntimeError(f"producer {p.name!r} registered twice ({name})")
            out[p.name] = p
    return out


def lookup_order(name: str) -> tuple[str, ...]:
    """The families :func:`get` imports, in turn, to find producer ``name``: the one whose
    :data:`FAMILIES` entry names it; otherwise those that discover their producers, the ones that
    use no solver first (:data:`SOLVER_FAMILIES` last), then the plug-ins.

    >>> lookup_order("bfb-lp")
    ('collsynth.solvers.bfb.per_step',)
    >>> order = lookup_order("swing-bw")
    >>> order.index("collsynth.solvers.closed_form") < order.index("collsynth.solvers.ten.formulation_producers")
    True
    """
    named = tuple(module for module, names in FAMILIES.items() if names is not None and name in names)
    if named:
        return named
    discovered = [module for module, names in FAMILIES.items() if names is None]
    return tuple(sorted(discovered, key=lambda m: m in SOLVER_FAMILIES)) + plugin_modules()


def get(name: str, where: str = "--producer") -> Producer:
    """The producer called ``name``, importing families (:func:`lookup_order`) only until one
    registers it; an InputError listing every producer otherwise. A name starting with a
    prefix of :data:`NAMED_BY_PREFIX` (``peer:<folder>``) is made by that module."""
    for prefix, module in NAMED_BY_PREFIX.items():
        if name.startswith(prefix) and len(name) > len(prefix):
            return import_if_present(module).producer_named(name)
    for module in lookup_order(name):
        found = next((p for p in getattr(import_family(module), "PRODUCERS", ()) if p.name == name), None)
        if found is not None:
            return found
    known = sorted(producers())
    raise InputError(where, f"unknown producer {name!r}{did_you_mean(name, known)}; known: {', '.join(known)}")


def planned(producer: Producer, instance: Instance, params: dict[str, Any]) -> Build | None:
    """What a run of ``producer`` on ``instance`` with ``params`` will build, as the producer
    declares it (:attr:`Producer.estimate`, given the parameters typed by
    :func:`check_params`); None when it declares nothing (the size check then counts the
    fewest sends of any schedule, :func:`collsynth.instances.size.check_run`)."""
    if producer.estimate is None:
        return None
    return producer.estimate(instance, check_params(producer, params))


def check_params(producer: Producer, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` typed by ``producer``'s declarations; an InputError for an unknown key
    (listing the parameters it takes) or a malformed value."""
    declared = {p.name: p for p in producer.params}
    out = {}
    for key, value in values.items():
        if key not in declared:
            takes = ", ".join(declared) if declared else "none"
            raise InputError(f"--param {key}", f"{producer.name} takes no parameter {key!r}"
                                               f"{did_you_mean(key, declared)} (parameters: {takes})")
        out[key] = parse_value(declared[key], value)
    return out


def route_params(selected: Iterable[Producer], values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each selected producer's share of a batch's parameters: a parameter goes only to the
    producers declaring it (typed by :func:`check_params`); one that no selected producer
    declares is an InputError."""
    selected = list(selected)
    for key in values:
        if not any(key == p.name for prod in selected for p in prod.params):
            names = ", ".join(prod.name for prod in selected)
            raise InputError(f"--param {key}", f"no selected producer takes parameter {key!r} (producers: {names})")
    return {prod.name: check_params(prod, {k: v for k, v in values.items() if k in {p.name for p in prod.params}})
            for prod in selected}


def describe_params(producer: Producer) -> list[dict[str, Any]]:
    """The producer's parameters as plain data (``collsynth producers --json``)."""
    return [{"name": p.name, "type": type_name(p.type), "default": p.default, "help": p.help} for p in producer.params]
