"""TEN ILP reduced by symmetry: one chunk orbit's sends, link capacity per orbit of link pairs.

On a topology that a group ``G`` of automorphisms acts on regularly (tori, hypercubes, Hamming
graphs, circulants, complete graphs and their Cartesian products: Cayley graphs, found by
:func:`collsynth.instances.symmetry.regular_group`) and a ``G``-invariant collective
(allgather, reduce-scatter through its dual, all-to-all), the TACOS ILP (Won et al., TACOS,
2023, Section V-A, Fig. 12) restricted to schedules that ``G`` maps onto themselves needs
variables for one chunk per orbit only: the representatives, the chunks of node 0 for
allgather. Translating their sends by every element gives every chunk's sends, and the full
model's capacity row of a link pair becomes a row over that pair's orbit
(``ineq_orbit_capacity``: the representatives' sends over the pairs of one orbit occupy at most
one pair's capacity in any timestep; see :mod:`collsynth.tens.orbits`). The model is ``|G|``
times smaller than the full one; :func:`extract` translates the solution into the schedule of
every chunk, which the verifier checks like any other.

What it proves: its optimum is the best SYMMETRIC schedule. A horizon at which the orbit model
is infeasible proves nothing about asymmetric schedules, so a run is optimal only when its
length meets a bound that holds for every schedule (the TEN lower bound of
:func:`collsynth.tens.bounds.lower_bound`, or the LP bound: the LP relaxation loses nothing by
symmetry, since averaging any fractional schedule over ``G`` gives a symmetric one with the same
objective). Where no group acts regularly, or the collective or the start state is not
symmetric, :func:`build` refuses with the reason.

Windows of time clustering start from translated holdings, so every window is symmetric too.

>>> from collsynth.instances.generators import build as topo
>>> from collsynth.instances.instance import make_instance
>>> from collsynth.formulations import ten_ilp
>>> inst = make_instance(topo("torus", {"dims": [4, 4]}), "allgather")
>>> len(ten_ilp.build(inst, horizon=4).sent) // len(build(inst, horizon=4).sent)
16
>>> try:
...     build(make_instance(topo("mesh", {"dims": [3, 3]}), "allgather"), horizon=4)
... except NotSupported as e:
...     print(e)
no symmetry to reduce by: the topology is not vertex-transitive: colour refinement splits its nodes into 3 classes (node 0 and node 1 differ), so no group of automorphisms acts regularly on them
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pyomo.core as pe
from pyomo.common.gc_manager import PauseGC

from ..instances.instance import Instance
from ..limits import checkpoint
from ..tens.orbits import TenOrbits, ten_orbits, translate_holdings, translate_rows
from ..tens.schedule import Schedule
from ..tens.ten import NotSupported, TenData, prepare, prune, schedule_from_rows
from . import OBJECTIVES, TenModel, expose, ten_model
from .ten_ilp import Assembly
from ._ten_arrays import add_arrivals_objective, add_makespan_objective, add_rows, capacity_rows, flow_model, ten_arrays

NAME = "ten-ilp-orbit"
SUMMARY = "TEN ILP over one chunk orbit of a Cayley topology (the best symmetric schedule), translated"
DRIVER_FAMILY = "ten"
SYMMETRIC = True  # its optimum is the best symmetric schedule: infeasible horizons prove nothing else
PARAMS = (  # what build takes (name, type, default, help)
    ("objective", OBJECTIVES, "arrivals", "arrivals (pairs held at the horizon) or makespan"),
    ("weights", list[float], None, "one weight per concurrent collective in the arrivals objective", 0),
    ("timestep", float, None, "seconds per TEN timestep (default: the cheapest link's cost per chunk)"),
    ("build_limit", float, None, "seconds the model build may take (estimated first; refused beyond)"),
)


@dataclass(frozen=True)
class OrbitTenModel(TenModel):
    """The :class:`~collsynth.formulations.TenModel` of an orbit model: ``sent``/``hold`` hold
    the representatives' variables (global chunk ids); sends and holdings are read back
    translated to every chunk. ``local``: the TEN data of the representatives alone (local
    chunk ids ``0..R-1`` for ``orbits.reps``)."""

    orbits: TenOrbits | None = None
    local: TenData | None = None

    @property
    def pairs(self) -> list[tuple[int, int]]:
        """The representatives' postcondition pairs not held at the start (what the model counts)."""
        cs, ns = np.nonzero(self.local.post & ~self.local.pre)
        return list(zip(self.orbits.reps[cs].tolist(), ns.tolist()))

    def rep_sends(self, threshold: float = 0.5) -> np.ndarray:
        """The representatives' sends ``(chunk, pair, arrival)`` of the loaded solution."""
        return TenModel.sends(self, threshold)

    def sends(self, threshold: float = 0.5) -> np.ndarray:
        """Every chunk's sends: the representatives' translated by every element."""
        return translate_rows(self.orbits, self.data, self.rep_sends(threshold))

    def holdings(self, upto: int | None = None, threshold: float = 0.5) -> np.ndarray:
        """Every chunk's holdings at the end of ``upto``: the representatives', translated."""
        return translate_holdings(self.orbits, TenModel.holdings(self, upto, threshold))


def restricted(data: TenData, orbits: TenOrbits) -> TenData:
    """``data`` over the representatives only (local chunk ids ``0..R-1``)."""
    r = orbits.reps
    return replace(data, pre=data.pre[r], post=data.post[r], group=data.group[r])


def build(instance: Instance, horizon: int, state=None, **params) -> pe.ConcreteModel:
    """The orbit model of ``instance`` over ``horizon`` timesteps (module doc); parameters as
    :func:`assemble`."""
    return assemble(instance, horizon, state, **params).model


def assemble(instance: Instance, horizon: int, state=None, *, objective: str = "arrivals", relax: bool = False,
             weights=None, timestep: float | None = None, lookahead: int = 0, build_limit: float | None = None,
             **params) -> Assembly:
    """The orbit model with what it was built from: an :class:`~collsynth.formulations.ten_ilp.Assembly`
    whose ``data`` is the TEN of the representatives alone (the rows are written over it, so a
    formulation that adds rows to the orbit model builds them from the same arrays).

    Same parameters as :func:`collsynth.formulations.ten_ilp.assemble` (no ``capacity=False``:
    without capacity rows there is nothing for symmetry to save); ``build_limit`` (seconds):
    the size is estimated from the index arrays first and a model that would take longer to
    build is refused (:class:`~collsynth.formulations.BuildTooLarge`).
    """
    if params:
        raise NotSupported(f"unknown parameter(s) {', '.join(sorted(params))}")
    if objective not in OBJECTIVES:
        raise NotSupported(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    data = prepare(instance, horizon, state, timestep)
    w = np.ones(len(data.instance.collectives)) if weights is None else np.asarray(weights, float)
    if len(w) != len(data.instance.collectives):
        raise NotSupported(f"weights: expected {len(data.instance.collectives)} values, got {len(w)}")
    orbits = ten_orbits(data)
    local = restricted(data, orbits)
    ix = ten_arrays(local, int(lookahead), chunk_ids=orbits.reps, build_limit=build_limit,
                    what=f"{NAME} at horizon {data.horizon}")
    with PauseGC():  # many small objects, no cycles to free: the collector only slows the build
        m, columns = _pyomo_model(instance, data, orbits, local, ix, objective, relax, w, int(lookahead))
    return Assembly(m, local, ix, columns)


def _pyomo_model(instance, data: TenData, orbits: TenOrbits, local: TenData, ix, objective: str, relax: bool, w,
                 lookahead: int) -> tuple[pe.ConcreteModel, list]:
    m, columns = flow_model(f"{NAME}:{instance.name}:T={data.horizon}", data, local, ix, relax)
    add_rows(m, "ineq_orbit_capacity", capacity_rows(local, ix, orbits.link_orbit, orbits.orbit_capacity), columns,
             "the representatives' sends over the link pairs of one orbit occupy at most one pair's capacity "
             "in any timestep (the translated schedule then keeps every pair's capacity)")
    if objective == "arrivals":
        add_arrivals_objective(m, local, ix, columns, w, lookahead)
    else:
        add_makespan_objective(m, local, ix, columns, relax)
    expose(m, OrbitTenModel(data=data, sent=m.sent, hold=m.hold, objective=objective, orbits=orbits, local=local))
    return m, columns


def extract(model: pe.ConcreteModel) -> Schedule:
    """Every chunk's schedule: the representatives' sends (useless ones pruned), translated by
    every element of the group; combining collectives reversed back onto the original topology."""
    view = ten_model(model)
    orbits = view.orbits
    rows = view.rep_sends()
    if len(rows):
        rows[:, 0] = orbits.rep_index(rows[:, 0])
        rows = prune(view.local, rows)
        rows[:, 0] = orbits.reps[rows[:, 0]]
    checkpoint("orbit translation", f"{len(rows)} sends of the representatives")  # the run's clock, not the timer's lag
    rows = translate_rows(orbits, view.data, rows)
    checkpoint("orbit translation", f"{len(rows)} sends translated")
    return schedule_from_rows(view.data, rows, NAME)


def bound(model: pe.ConcreteModel):
    """No formulation-level bound (the solver's bound is over symmetric schedules only)."""
    return None


__all__ = ["NAME", "build", "assemble", "extract", "bound", "OrbitTenModel", "restricted"]
