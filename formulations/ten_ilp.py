"""TACOS-ILP: chunk holdings and sends on the time-expanded network (Won et al., TACOS, 2023, Section V-A).

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
non-combining dual on the transposed topology, reversed in time by :func:`extract` (Zhao et al., NSDI 2025
Appendix A, TACOS section V); allreduce is reduce_scatter then allgather (two models, see
:mod:`collsynth.solvers.ten.producers`). Several concurrent collectives (TACOS VIII-G, multi-tenant)
share one model: chunk ids are shifted by the instance's chunk offsets and the objective adds
up (``weights=[...]`` to weigh the tenants). Failed nodes and links are simply absent.

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
import pyomo.environ as pe

from ..instances.instance import Instance
from ..tens.schedule import Schedule
from ..tens.bounds import lower_bound
from ..tens.ten import NotSupported, TenData, prepare, prune, reach, schedule_from_rows
from . import OBJECTIVES, TenModel, expose, ten_model

NAME = "ten-ilp"
SUMMARY = "TACOS ILP on the time-expanded network (exact with the horizon driver)"
DRIVER_FAMILY = "ten"  # solved by the horizon / early-stop / time-cluster drivers


# ---- the model -----------------------------------------------------------------------------

def build(instance: Instance, horizon: int, state=None, *, objective: str = "arrivals",
          capacity: bool = True, relax: bool = False, weights=None, timestep: float | None = None,
          lookahead: int = 0, **params) -> pe.ConcreteModel:
    """The TACOS ILP for ``instance`` over ``horizon`` timesteps (Won et al., TACOS, 2023,
    Section V-A, Fig. 12).

    ``objective``: ``"arrivals"`` (maximise postcondition pairs held at the horizon) or
    ``"makespan"`` (all must arrive; minimise the last timestep with a missing pair).
    ``capacity=False`` drops the link capacity rows (the congestion-blind baseline);
    ``relax=True`` makes every variable continuous in [0, 1] (the LP relaxation).
    ``weights``: one weight per concurrent collective in the arrivals objective.
    ``lookahead`` > 0 (time clustering): chunks may also move to nodes from which they can
    reach a node needing them within ``lookahead`` timesteps after the horizon, and every such
    relay holding at the horizon earns 1 while every arrival earns more than all relays
    together, so a window with no possible arrival still makes progress.

    The model exposes its TEN index and its ``sent`` / ``hold`` variables as a
    :class:`~collsynth.formulations.TenModel` (:func:`~collsynth.formulations.ten_model`).
    """
    if params:
        raise NotSupported(f"unknown parameter(s) {', '.join(sorted(params))}")
    if objective not in OBJECTIVES:
        raise NotSupported(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    data = prepare(instance, horizon, state, timestep)
    w = np.ones(len(data.instance.collectives)) if weights is None else np.asarray(weights, float)
    if len(w) != len(data.instance.collectives):
        raise NotSupported(f"weights: expected {len(data.instance.collectives)} values, got {len(w)}")
    idx = index_sets(data, int(lookahead))
    m = pe.ConcreteModel(name=f"{NAME}:{instance.name}:T={data.horizon}")
    _add_variables(m, data, idx, relax)
    H = _holding(m, data, idx)
    _add_flow(m, data, idx, H)
    if capacity:
        _add_capacity(m, data, idx)
    if objective == "arrivals":
        _add_arrivals_objective(m, data, idx, H, w, int(lookahead))
    else:
        _add_makespan_objective(m, data, idx, H, relax)
    return expose(m, TenModel(data=data, sent=m.sent, hold=m.hold, objective=objective))


@dataclass
class TenIndex:
    """Where the model has variables (the index sets of :func:`build`).

    ``earliest``/``latest`` (``[chunk, node]``, :func:`collsynth.tens.ten.reach`): the first
    timestep a node can hold a chunk and the last at which an arrival there is still useful;
    ``useful``: pairs ``(c, n)`` not held at the start that can be reached in time and still
    matter; ``hold``: ``(chunk, node, timestep)`` of those pairs from their earliest timestep;
    ``sent``: ``(chunk, pair, arrival)`` whose source can hold the chunk ``delay`` timesteps
    before and whose destination is useful then.
    """

    earliest: np.ndarray
    latest: np.ndarray
    useful: np.ndarray
    hold: list
    sent: list
    hold_set: set


def index_sets(data: TenData, lookahead: int = 0) -> TenIndex:
    """The variables :func:`build` creates: a chunk cannot reach a node before its
    delay-weighted distance from the nearest holder, and a send into a node is useless later
    than the horizon minus the distance from there to the nearest node still needing it;
    with ``lookahead`` the usefulness reaches that many timesteps past the horizon."""
    T = data.horizon
    if lookahead:
        data.horizon = T + lookahead
        earliest, latest = reach(data)
        data.horizon = T
        latest = np.minimum(latest, T)
    else:
        earliest, latest = reach(data)
    pre = data.pre
    useful = (~pre) & (earliest <= T) & (latest >= earliest)
    hold_idx = []
    for c, n in zip(*np.nonzero(useful)):
        lo = max(1, int(earliest[c, n]))
        hold_idx.extend((int(c), int(n), t) for t in range(lo, T + 1))
    sent_idx = []
    for c in np.flatnonzero(useful.any(axis=1)):
        k = data.delay[int(data.group[c])]
        e_src = earliest[c, data.src]
        ok = (~pre[c, data.dst]) & useful[c, data.dst] & (pre[c, data.src] | useful[c, data.src])
        for l in np.flatnonzero(ok):
            lo = max(int(e_src[l]) + int(k[l]), int(earliest[c, data.dst[l]]), 1)
            hi = min(T, int(latest[c, data.dst[l]]))
            sent_idx.extend((int(c), int(l), t) for t in range(lo, hi + 1))
    return TenIndex(earliest, latest, useful, hold_idx, sent_idx, set(hold_idx))


def _add_variables(m: pe.ConcreteModel, data: TenData, idx: TenIndex, relax: bool) -> None:
    domain = pe.UnitInterval if relax else pe.Binary
    dom_name = "in [0, 1]" if relax else "binary"
    # SETS
    m.T = pe.RangeSet(1, data.horizon, doc="timesteps (a send's step is its arrival timestep)")
    m.HOLD = pe.Set(initialize=idx.hold, dimen=3, ordered=False, doc="(chunk, node, timestep) that may change")
    m.SENT = pe.Set(initialize=idx.sent, dimen=3, ordered=False, doc="(chunk, link pair, arrival timestep)")
    # PARAMETERS (plain data on the TenModel: pre, post, src, dst, capacity, delay, timestep)
    m.horizon = pe.Param(initialize=data.horizon, doc="number of TEN timesteps")
    m.timestep_s = pe.Param(initialize=data.timestep, doc="seconds per TEN timestep")
    # VARIABLES
    m.hold = pe.Var(m.HOLD, domain=domain, doc=f"node holds chunk at the end of timestep ({dom_name})")
    m.sent = pe.Var(m.SENT, domain=domain, doc=f"chunk crosses link pair, arriving at the end of timestep ({dom_name})")


def _holding(m: pe.ConcreteModel, data: TenData, idx: TenIndex):
    """``H(c, n, t)``: hold[c, n, t] as a variable or a constant (1 for start holdings, 0
    before reach)."""
    pre, hold_set = data.pre, idx.hold_set

    def H(c, n, t):
        if pre[c, n]:
            return 1
        return m.hold[c, n, t] if (c, n, t) in hold_set else 0

    return H


def _add_flow(m: pe.ConcreteModel, data: TenData, idx: TenIndex, H) -> None:
    """A send needs the chunk at its source when it starts; holdings persist and a chunk
    arrives at a node at most once."""
    arrivals: dict[tuple[int, int, int], list] = {}
    for c, l, t in idx.sent:
        arrivals.setdefault((c, int(data.dst[l]), t), []).append((c, l, t))

    def _needs_hold(m, c, l, t):
        k = int(data.delay[data.group[c], l])
        h = H(c, int(data.src[l]), t - k)
        if isinstance(h, int):
            return pe.Constraint.Skip if h == 1 else m.sent[c, l, t] == 0
        return m.sent[c, l, t] <= h

    # CONSTRAINTS
    m.ineq_send_needs_hold = pe.Constraint(
        m.SENT, rule=_needs_hold,
        doc="a chunk leaves a node only if the node held it when the send started (end of t-k)")

    def _update(m, c, n, t):
        return m.hold[c, n, t] == H(c, n, t - 1) + sum(m.sent[i] for i in arrivals.get((c, n, t), ()))

    m.eq_hold_update = pe.Constraint(
        m.HOLD, rule=_update,
        doc="a node holds a chunk at t iff it held it at t-1 or it arrives at t (at most one arrival, holdings persist)")


def _add_capacity(m: pe.ConcreteModel, data: TenData, idx: TenIndex) -> None:
    """At most ``capacity`` chunks occupy a link pair in any timestep."""
    occupancy: dict[tuple[int, int], list] = {}
    for c, l, t in idx.sent:
        k = int(data.delay[data.group[c], l])
        for tau in range(t - k + 1, t + 1):
            occupancy.setdefault((l, tau), []).append((c, l, t))
    busy = [key for key, v in occupancy.items() if len(v) > int(data.capacity[key[0]])]
    m.BUSY = pe.Set(initialize=sorted(busy), dimen=2, doc="(link pair, timestep) that could be over-used")
    # CONSTRAINTS
    m.ineq_link_capacity = pe.Constraint(
        m.BUSY,
        rule=lambda m, l, tau: sum(m.sent[i] for i in occupancy[(l, tau)]) <= int(data.capacity[l]),
        doc="at most `capacity` chunks occupy a link pair in any timestep (multi-timestep arcs count every timestep)")


def _needed(data: TenData) -> list[tuple[int, int]]:
    return [(int(c), int(n)) for c, n in zip(*np.nonzero(data.post & ~data.pre))]


def _add_arrivals_objective(m: pe.ConcreteModel, data: TenData, idx: TenIndex, H, weights, lookahead: int) -> None:
    """Maximise the (weighted) postcondition pairs held at the horizon (TACOS); with a
    lookahead, relays closer to a node needing the chunk count below every arrival."""
    T = data.horizon
    expr = sum(float(weights[data.group[c]]) * H(c, n, T) for c, n in _needed(data))
    if lookahead:
        relays = [(int(c), int(n)) for c, n in zip(*np.nonzero(idx.useful & ~data.post)) if (c, n, T) in idx.hold_set]
        expr = float(len(relays) + 1) * expr + sum(m.hold[c, n, T] for c, n in relays)
    # OBJECTIVE
    m.arrivals = pe.Objective(
        expr=expr + 0, sense=pe.maximize,
        doc="postcondition pairs (chunk, node) held at the horizon (weighted per collective)")


def _add_makespan_objective(m: pe.ConcreteModel, data: TenData, idx: TenIndex, H, relax: bool) -> None:
    """Every postcondition pair arrives by the horizon; ``done[t]`` indicators minimise the
    first timestep by which all have arrived."""
    T = data.horizon
    pairs = _needed(data)
    P = len(pairs)
    missing = [(c, n) for c, n in pairs if (c, n, T) not in idx.hold_set]
    m.done = pe.Var(m.T, domain=pe.UnitInterval if relax else pe.Binary,
                    doc="every postcondition pair has arrived by timestep t")
    # CONSTRAINTS
    m.eq_all_arrive = pe.Constraint(
        [(c, n) for c, n in pairs if (c, n, T) in idx.hold_set],
        rule=lambda m, c, n: m.hold[c, n, T] == 1,
        doc="every postcondition pair arrives by the horizon")
    m.eq_done_at_horizon = pe.Constraint(expr=m.done[T] == 1, doc="the collective is done at the horizon")
    if missing:  # some pair cannot arrive in time: state the infeasibility explicitly
        m.unreachable = pe.Var(bounds=(0, 0), doc="pairs that cannot arrive by the horizon")
        m.ineq_unreachable = pe.Constraint(expr=m.unreachable >= 1, doc=f"{len(missing)} pairs cannot arrive in time")
    m.ineq_done = pe.Constraint(
        m.T, rule=lambda m, t: P * m.done[t] <= sum(H(c, n, t) for c, n in pairs) if P else pe.Constraint.Skip,
        doc="done at t only if all pairs are held at t")
    m.ineq_done_monotone = pe.Constraint(
        [t for t in range(1, T)], rule=lambda m, t: m.done[t] <= m.done[t + 1], doc="done stays done")
    # OBJECTIVE
    m.makespan = pe.Objective(expr=T + 1 - sum(m.done[t] for t in m.T), sense=pe.minimize,
                              doc="the first timestep by which every pair has arrived")


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


__all__ = ["NAME", "build", "extract", "bound", "lower_bound", "index_sets", "TenIndex"]
