"""TACOS-ILP: chunk holdings and sends on the time-expanded network (Won et al., TACOS, 2023,
Section V-A).

The topology is unrolled over ``horizon`` timesteps (the TEN, :mod:`collsynth.tens.ten`). A
link pair ``u -> v`` whose per-chunk cost spans ``k`` timesteps (heterogeneous links,
``k = ceil(cost / timestep)``) carries a chunk from the start of timestep ``t-k+1`` to the end
of timestep ``t``; it has ``capacity`` parallel links, so at most that many chunks occupy it in
any timestep. Binary variables (the paper's Fig. 12):

- ``hold[c, n, t]``: node ``n`` holds chunk ``c`` at the end of timestep ``t``;
- ``sent[c, l, t]``: chunk ``c`` crosses link pair ``l`` and ARRIVES at the end of timestep
  ``t`` (the schedule convention of :mod:`collsynth.tens.schedule`: a send's step is its
  arrival timestep).

Constraints: a send needs the chunk at its source when it starts (``ineq_send_needs_hold``);
``eq_hold_update``: ``hold[c, n, t] = hold[c, n, t-1] + (arrivals of c at n in t)``, so
holdings persist and a chunk arrives at a node at most once (a second copy never helps, and
the equality keeps the LP a near-network flow, far less degenerate than the paper's
inequalities); link capacity counts multi-timestep occupancy (``ineq_link_capacity``). Objective ``"arrivals"``: maximise the number of postcondition
pairs ``(c, n)`` held at the horizon (TACOS); ``"makespan"``: every pair must arrive by the
horizon and ``done[t]`` indicators minimise the last timestep with a missing pair.

Variables exist only where they can matter: a chunk cannot reach a node before its
delay-weighted distance from the nearest holder, and a send into a node is useless later than
the horizon minus the distance from there to the nearest node still needing it. Sends into
nodes that already hold the chunk at the start are never created.

Collectives: every non-combining kind directly (allgather, gather, scatter, broadcast, and
all-to-all with its personalised chunks); combining ones (reduce, reduce_scatter) as their
non-combining dual on the transposed topology, reversed in time by :func:`extract` (Zhao et
al., NSDI 2025, Appendix A; Won et al., TACOS, 2023, Section V); allreduce is reduce_scatter then allgather (two models, see
:mod:`collsynth.solvers.ten.formulation_producers`). Several concurrent collectives (TACOS VIII-G, multi-tenant)
share one model: chunk ids are shifted by the instance's chunk offsets and the objective adds
up (``weights=[...]`` to weigh the tenants). Failed nodes and links are simply absent.

Switch nodes (a topology that keeps its switches, e.g. ``switch unwind=0``) are TEN nodes that
store nothing, as TE-CCL models them (Liu et al., "Rethinking Machine Learning Collective
Communication as a Multi-Commodity Flow Problem", SIGCOMM 2024, Section 4, its switch
buffers fixed at zero): a switch has no ``hold`` variables; a send out of it starting in
timestep ``t + 1`` needs a send of the chunk into it arriving at the end of ``t``
(``ineq_switch_forward``: each out-send at most the arrivals, with ``switch_copy=True``, the
default as in TE-CCL: multicast) or, with ``switch_copy=False``, the sends leaving it then
add up to at most the arrivals (``ineq_switch_conservation``: flow conservation, no copy).
The switch's links carry their own delays and capacities like any link.

``state`` (bool ``[chunk, node]`` over the global chunk ids of the model's direction, i.e. of
the dual for combining collectives) replaces the precondition: time clustering starts each
window from the holdings the previous one reached.

>>> from collsynth.instances.generators import build as topo
>>> from collsynth.instances.instance import make_instance
>>> inst = make_instance(topo("ring", {"nodes": 4}), "allgather")
>>> m = build(inst, horizon=2)
>>> sorted(c.local_name for c in m.component_objects(pe.Var))
['hold', 'sent']
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyomo.core as pe
from pyomo.common.gc_manager import PauseGC

from ..instances.instance import Instance
from ..tens.schedule import Schedule
from ..tens.bounds import lower_bound
from ..tens.ten import SWITCH_COPY, NotSupported, TenData, prepare, prune, schedule_from_rows
from . import OBJECTIVES, TenModel, expose, ten_model
from ._ten_arrays import (TenArrays, add_arrivals_objective, add_makespan_objective, add_rows, capacity_rows,
                          flow_model, switch_rows, ten_arrays)

NAME = "ten-ilp"
SUMMARY = "TACOS ILP on the time-expanded network (exact with the horizon driver)"
DRIVER_FAMILY = "ten"  # solved by the horizon / early-stop / time-cluster drivers


# ---- the model -----------------------------------------------------------------------------

PARAMS = (  # what build takes (name, type, default, help)
    ("objective", OBJECTIVES, "arrivals", "arrivals (pairs held at the horizon) or makespan"),
    ("capacity", bool, True, "one chunk per link per timestep (false: the congestion-blind model)"),
    ("weights", list[float], None, "one weight per concurrent collective in the arrivals objective", 0),
    ("timestep", float, None, "seconds per TEN timestep (default: the cheapest link's cost per chunk)"),
    ("build_limit", float, None, "seconds the model build may take (estimated first; refused beyond)"),
    ("switch_copy", bool, SWITCH_COPY, "switch nodes forward one arrival on several out-links (multicast, "
                                       "TE-CCL's default); false: one out-send per arrival"),
)


@dataclass
class Assembly:
    """A built TEN model and what it was built from: the TEN data, the index arrays
    (:class:`~collsynth.formulations._ten_arrays.TenArrays`) and the variables in column order,
    so a formulation that adds rows to the TACOS ILP builds them from the same arrays."""

    model: pe.ConcreteModel
    data: TenData
    ix: TenArrays
    columns: list


def build(instance: Instance, horizon: int, state=None, **params) -> pe.ConcreteModel:
    """The TACOS ILP for ``instance`` over ``horizon`` timesteps (Won et al., TACOS, 2023,
    Section V-A, Fig. 12); parameters as :func:`assemble`.

    The model exposes its TEN index and its ``sent`` / ``hold`` variables as a
    :class:`~collsynth.formulations.TenModel` (:func:`~collsynth.formulations.ten_model`).
    """
    return assemble(instance, horizon, state, **params).model


def assemble(instance: Instance, horizon: int, state=None, *, objective: str = "arrivals",
             capacity: bool = True, relax: bool = False, weights=None, timestep: float | None = None,
             lookahead: int = 0, build_limit: float | None = None, switch_copy: bool = SWITCH_COPY,
             **params) -> Assembly:
    """The TACOS ILP with what it was built from (see :class:`Assembly`).

    ``objective``: ``"arrivals"`` (maximise postcondition pairs held at the horizon) or
    ``"makespan"`` (all must arrive; minimise the last timestep with a missing pair).
    ``capacity=False`` drops the link capacity rows (the congestion-blind baseline);
    ``relax=True`` makes every variable continuous in [0, 1] (the LP relaxation).
    ``weights``: one weight per concurrent collective in the arrivals objective.
    ``switch_copy``: whether switch nodes may forward one arrival on several out-links (see
    the module doc; TE-CCL, Liu et al., SIGCOMM 2024, Section 4).
    ``lookahead`` > 0 (time clustering): chunks may also move to nodes from which they can
    reach a node needing them within ``lookahead`` timesteps after the horizon, and every such
    relay holding at the horizon earns 1 while every arrival earns more than all relays
    together, so a window with no possible arrival still makes progress. ``build_limit``
    (seconds): the size is estimated from the index arrays first, and a model that would take
    longer to build (or not fit in memory) is refused with
    :class:`~collsynth.formulations.BuildTooLarge`.

    Index sets and rows are numpy arrays (:mod:`collsynth.formulations._ten_arrays`); the
    Pyomo components are created in bulk from them.
    """
    if params:
        raise NotSupported(f"unknown parameter(s) {', '.join(sorted(params))}")
    if objective not in OBJECTIVES:
        raise NotSupported(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    data = prepare(instance, horizon, state, timestep, switch_copy=switch_copy)
    w = np.ones(len(data.instance.collectives)) if weights is None else np.asarray(weights, float)
    if len(w) != len(data.instance.collectives):
        raise NotSupported(f"weights: expected {len(data.instance.collectives)} values, got {len(w)}")
    ix = ten_arrays(data, int(lookahead), build_limit=build_limit, capacity=capacity,
                    what=f"{NAME} at horizon {data.horizon}")
    with PauseGC():  # many small objects, no cycles to free: the collector only slows the build
        return _pyomo_model(instance, data, ix, objective, capacity, relax, w, int(lookahead))


def _pyomo_model(instance, data: TenData, ix: TenArrays, objective: str, capacity: bool, relax: bool, w,
                 lookahead: int) -> Assembly:
    # PARAMETERS (plain data on the TenModel: pre, post, src, dst, capacity, delay, timestep), the
    # variables and the flow rows; then this formulation's own CONSTRAINTS
    m, columns = flow_model(f"{NAME}:{instance.name}:T={data.horizon}", data, data, ix, relax)
    if data.has_switches:
        name, rows = switch_rows(data, ix)
        add_rows(m, name, rows, columns, "a switch forwards a chunk only in the timestep after it arrived: each send "
                 "at most the arrivals (copy: several out-links) or all sends together (no copy)")
    if capacity:
        add_rows(m, "ineq_link_capacity", capacity_rows(data, ix), columns,
                 "at most `capacity` chunks occupy a link pair in any timestep (multi-timestep arcs count every timestep)")
    if objective == "arrivals":
        add_arrivals_objective(m, data, ix, columns, w, lookahead)
    else:
        add_makespan_objective(m, data, ix, columns, relax)
    expose(m, TenModel(data=data, sent=m.sent, hold=m.hold, objective=objective))
    return Assembly(m, data, ix, columns)


# ---- reading a solution back -----------------------------------------------------------------

def extract(model: pe.ConcreteModel) -> Schedule:
    """The schedule the solved model describes (values must be loaded, e.g. by a backend).

    Steps are arrival timesteps; useless sends are pruned; combining collectives are reversed
    back onto the original topology; concurrent collectives are merged with their offsets.
    """
    view = ten_model(model)
    return schedule_from_rows(view.data, prune(view.data, view.sends()), NAME)


def bound(model: pe.ConcreteModel):
    """No formulation-level bound (the solver's dual bound is the ILP's bound)."""
    return None


__all__ = ["NAME", "build", "assemble", "Assembly", "extract", "bound", "lower_bound"]
