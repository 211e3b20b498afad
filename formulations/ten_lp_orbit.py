"""TEN LP over one chunk orbit of a Cayley topology: the TEN LP bound at ``1/|G|`` of its size, and a symmetric fractional schedule.

The LP relaxation of :mod:`.ten_ilp_orbit` (every variable in [0, 1]) with the cumulative-send
cuts of :mod:`.ten_lp` written for the representatives: the TACOS ILP (Won et al., TACOS,
2023, Section V-A, Fig. 12) relaxed, restricted to the points a group ``G`` of automorphisms
acting regularly on the nodes maps onto themselves, and written over one chunk orbit.

What its bound proves: EVERY schedule, not only symmetric ones. The full TEN LP of
:mod:`.ten_lp` is invariant under ``G`` (``G`` maps chunks to chunks of the same collective,
holders to holders, link pairs to link pairs of the same delay and capacity, so it permutes
the variables, maps every row onto a row and keeps the objective), and it is convex: if any
point of it delivers everything by horizon ``T``, so does the average of its ``|G|``
translates, which is symmetric. A symmetric point of the full LP is exactly a point of this
one (the representatives' values; the capacity row of a pair in the full LP sums, for a
symmetric point, the representatives' sends over the pair's whole orbit, which is this
model's ``ineq_orbit_capacity`` row; see :mod:`collsynth.tens.orbits`). So this LP delivers
everything by ``T`` exactly when the full TEN LP does, its bound (the smallest such ``T``)
is the TEN LP bound, and that bounds every capacity-respecting schedule. This is where the
LP differs from the orbit ILP, whose infeasible horizons rule out symmetric schedules only:
an average of integral schedules is no schedule.

Its schedule is symmetric: the representatives' fractional sends are turned into atom pieces
by :func:`collsynth.formulations.ten_lp.walk` with link capacity shared over each orbit of link
pairs (so the translates keep every pair's capacity), completed by
:func:`collsynth.formulations.ten_lp.repair` under the same shared capacity, and translated
by every element of ``G``.

>>> from collsynth.instances.generators import build as topo
>>> from collsynth.instances.instance import make_instance
>>> from collsynth.formulations import ten_lp
>>> inst = make_instance(topo("torus", {"dims": [4, 4]}), "allgather")
>>> len(ten_lp.build(inst, horizon=4).sent) // len(build(inst, horizon=4).sent)
16
"""

from __future__ import annotations

import numpy as np
import pyomo.core as pe
from pyomo.common.gc_manager import PauseGC

from ..instances.instance import Instance
from ..tens.bounds import lower_bound  # noqa: F401 - the TEN bound every TEN formulation starts from
from ..tens.schedule import Schedule
from ..tens.ten import schedule_from_rows
from . import OBJECTIVES, ten_ilp_orbit, ten_lp, ten_model
from ._ten_arrays import add_rows

NAME = "ten-lp-orbit"
SUMMARY = ("LP relaxation of the orbit TEN ILP: the TEN LP bound (every schedule) from one chunk orbit, "
           "and a symmetric fractional schedule")
DRIVER_FAMILY = "ten"
ROLE = "relaxation"  # bound(model) proves a horizon; the schedule is realised from fractional amounts
SYMMETRIC = True  # one chunk orbit; a convex, group-invariant relaxation: its bound holds for every schedule
PARAMS = (  # what build takes (name, type, default, help)
    ("cuts", bool, True, "cumulative-send cuts in the TEN LP"),
    ("objective", OBJECTIVES, "arrivals", "arrivals (pairs held at the horizon) or makespan"),
    ("weights", list[float], None, "one weight per concurrent collective", 0),
    ("timestep", float, None, "seconds per TEN timestep (default: the cheapest link's cost per chunk)"),
    ("build_limit", float, None, "seconds the model build may take (estimated first; refused beyond)"),
)
BOUND_SCOPE = ("the TEN LP bound over one chunk orbit: the TEN LP is convex and invariant under the group, "
               "so averaging a solution over the group gives a symmetric one; it bounds every schedule")


def build(instance: Instance, horizon: int, state=None, *, cuts: bool = True, **params) -> pe.ConcreteModel:
    """The LP relaxation of :func:`collsynth.formulations.ten_ilp_orbit.build` (same
    parameters), with the cumulative-send cuts of
    :func:`collsynth.formulations.ten_lp.cumulative_send_rows` for the representatives
    (``cuts=True``; the full LP's cuts of the other chunks are their translates)."""
    params.pop("relax", None)
    parts = ten_ilp_orbit.assemble(instance, horizon, state, relax=True, **params)
    if cuts:
        rows = ten_lp.cumulative_send_rows(parts.data, parts.ix)
        with PauseGC():  # as in ten_ilp_orbit.assemble
            # CONSTRAINTS
            add_rows(parts.model, "ineq_cumulative_send", rows, parts.columns,
                     "a chunk crosses a link pair at most once and never back: sends u->v by t plus v->u by t-k "
                     "total at most the holding of u at t-k")
    return parts.model


def bound(model) -> int:
    """Lower bound on timesteps proven by the solved LP (arrivals objective): its horizon when
    the representatives' postcondition pairs are all held (fractionally) at the horizon, else
    the horizon plus one. It bounds every schedule (module doc)."""
    view = ten_model(model)
    T = view.data.horizon
    pairs = view.pairs
    got = sum(view.hold[c, n, T].value or 0.0 for c, n in pairs if (c, n, T) in view.hold)
    return T if got >= len(pairs) - 1e-6 * max(1, len(pairs)) else T + 1


def _walked(model) -> tuple[ten_lp.Walk, int]:
    """The representatives' LP amounts as atom pieces, capacity shared per orbit of link pairs,
    short pairs repaired under the same sharing; and the pairs (of every chunk) the walk alone
    left short."""
    view = ten_model(model)
    orb = view.orbits
    shared = {"link_class": orb.link_orbit, "class_capacity": orb.orbit_capacity}
    w = ten_lp.walk(model, **shared)
    short = int((view.data.post[orb.reps] & ~w.held[orb.reps]).sum()) * orb.size
    return ten_lp.repair(w, chunks=orb.reps, **shared), short


def translated_schedule(model, w: ten_lp.Walk) -> Schedule:
    """The schedule of every chunk: the walk's pieces of the representatives translated by
    every element of the group (combining collectives reversed onto the original topology)."""
    view = ten_model(model)
    orb, data = view.orbits, view.data
    c, l, t, lo, hi = [], [], [], [], []
    for ci, li, ti, a in zip(w.chunk, w.pair, w.step, w.atoms):
        for a0, a1 in ten_lp.runs(a):
            c.append(ci)
            l.append(li)
            t.append(ti)
            lo.append(a0)
            hi.append(a1)
    c, l, t = (np.asarray(x, np.int64) for x in (c, l, t))
    lo, hi = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
    g = np.arange(orb.size, dtype=np.int64)
    chunks = orb.image[orb.rep_index(c)] if len(c) else np.zeros((0, orb.size), np.int64)
    pairs = orb.link_image(l[:, None], g[None, :])
    rows = np.stack([chunks.ravel(), pairs.ravel(), np.repeat(t, orb.size)], axis=1)
    d = np.gcd.reduce(np.concatenate([lo, hi, [w.denom]])) if len(lo) else w.denom
    pieces = (np.repeat(lo // d, orb.size), np.repeat(hi // d, orb.size), w.denom // d)
    return schedule_from_rows(data, rows, NAME, pieces=pieces)


def extract(model) -> Schedule:
    """The symmetric fractional schedule of a solved, complete LP (module doc)."""
    return translated_schedule(model, _walked(model)[0])


def schedules(model, recover) -> list[tuple[str, Schedule, int]]:
    """``[("repair", schedule, pairs the walk left short)]``: the walk completed by repair under
    per-orbit capacity, translated (repair reaches every pair whenever the topology connects
    the holders to the nodes needing a chunk, which it does when a schedule exists; the
    whole-chunk ``recover`` of the drivers is not symmetric, so it is not used)."""
    repaired, short = _walked(model)
    return [("repair", translated_schedule(model, repaired), short)]


refine = ten_lp.polish  # re-aim a complete solved LP at little, early traffic (reads the representatives' pairs)


__all__ = ["NAME", "build", "extract", "bound", "schedules", "refine", "lower_bound", "translated_schedule",
           "BOUND_SCOPE"]
