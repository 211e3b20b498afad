"""TACOS-ILP: chunk holdings and sends on the time-expanded network (seed 001, section V-A).

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
non-combining dual on the transposed topology, reversed in time by :func:`extract` (seed 000
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

import numpy as np
import pyomo.environ as pe

from ..instances.instance import Instance
from ..tens.schedule import Schedule
from ..tens.ten import NotSupported, TenData, lower_bound, prepare, prune, reach, schedule_from_rows

NAME = "ten-ilp"
DRIVER_FAMILY = "ten"  # solved by the horizon / early-stop / time-cluster drivers
OBJECTIVES = ("arrivals", "makespan")


# ---- the model -----------------------------------------------------------------------------

def build(instance: Instance, horizon: int, state=None, *, objective: str = "arrivals",
          capacity: bool = True, relax: bool = False, weights=None, timestep: float | None = None,
          lookahead: int = 0, **params) -> pe.ConcreteModel:
    """The TACOS ILP (seed 001 V-A, Fig. 12) for ``instance`` over ``horizon`` timesteps.

    ``objective``: ``"arrivals"`` (maximise postcondition pairs held at the horizon) or
    ``"makespan"`` (all must arrive; minimise the last timestep with a missing pair).
    ``capacity=False`` drops the link capacity rows (the congestion-blind baseline);
    ``relax=True`` makes every variable continuous in [0, 1] (the LP relaxation).
    ``weights``: one weight per concurrent collective in the arrivals objective.
    ``lookahead`` > 0 (time clustering): chunks may also move to nodes from which they can
    reach a node needing them within ``lookahead`` timesteps after the horizon, and every such
    relay holding at the horizon earns 1 while every arrival earns more than all relays
    together, so a window with no possible arrival still makes progress.
    """
    if params:
        raise NotSupported(f"unknown parameter(s) {', '.join(sorted(params))}")
    if objective not in OBJECTIVES:
        raise NotSupported(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    data = prepare(instance, horizon, state, timestep)
    T = data.horizon
    if lookahead:
        data.horizon = T + int(lookahead)
        earliest, latest = reach(data)
        data.horizon = T
        latest = np.minimum(latest, T)
    else:
        earliest, latest = reach(data)
    pre = data.pre
    need = data.post & ~pre
    C, S = pre.shape
    L = len(data.src)
    domain = pe.UnitInterval if relax else pe.Binary
    dom_name = "in [0, 1]" if relax else "binary"

    # which (c, n) pairs get hold variables: not held at the start, reachable in time, useful
    useful = (~pre) & (earliest <= T) & (latest >= earliest)
    hold_idx = []
    for c, n in zip(*np.nonzero(useful)):
        lo = max(1, int(earliest[c, n]))
        hi = T
        hold_idx.extend((int(c), int(n), t) for t in range(lo, hi + 1))
    hold_set = set(hold_idx)

    # sends: chunk c over pair l arriving at t, with t - k >= earliest[c, src], t <= latest[c, dst]
    sent_idx = []
    for c in np.flatnonzero(useful.any(axis=1)):
        g = int(data.group[c])
        k = data.delay[g]
        e_src = earliest[c, data.src]
        ok = (~pre[c, data.dst]) & useful[c, data.dst] & (pre[c, data.src] | useful[c, data.src])
        for l in np.flatnonzero(ok):
            lo = max(int(e_src[l]) + int(k[l]), int(earliest[c, data.dst[l]]), 1)
            hi = min(T, int(latest[c, data.dst[l]]))
            sent_idx.extend((int(c), int(l), t) for t in range(lo, hi + 1))

    m = pe.ConcreteModel(name=f"{NAME}:{instance.name}:T={T}")
    m._ten = data
    m._relax = relax
    m._objective = objective

    # SETS
    m.T = pe.RangeSet(1, T, doc="timesteps (a send's step is its arrival timestep)")
    m.HOLD = pe.Set(initialize=hold_idx, dimen=3, ordered=False, doc="(chunk, node, timestep) that may change")
    m.SENT = pe.Set(initialize=sent_idx, dimen=3, ordered=False, doc="(chunk, link pair, arrival timestep)")

    # PARAMETERS (plain data on m._ten: pre, post, src, dst, capacity, delay, timestep)
    m.horizon = pe.Param(initialize=T, doc="number of TEN timesteps")
    m.timestep_s = pe.Param(initialize=data.timestep, doc="seconds per TEN timestep")

    # VARIABLES
    m.hold = pe.Var(m.HOLD, domain=domain, doc=f"node holds chunk at the end of timestep ({dom_name})")
    m.sent = pe.Var(m.SENT, domain=domain, doc=f"chunk crosses link pair, arriving at the end of timestep ({dom_name})")

    def H(c, n, t):
        """hold[c, n, t] as a variable or a constant (1 for start holdings, 0 before reach)."""
        if pre[c, n]:
            return 1
        return m.hold[c, n, t] if (c, n, t) in hold_set else 0

    arrivals: dict[tuple[int, int, int], list] = {}
    for c, l, t in sent_idx:
        arrivals.setdefault((c, int(data.dst[l]), t), []).append((c, l, t))

    # CONSTRAINTS
    def _needs_hold(m, c, l, t):
        k = int(data.delay[data.group[c], l])
        h = H(c, int(data.src[l]), t - k)
        if isinstance(h, int):
            return pe.Constraint.Skip if h == 1 else m.sent[c, l, t] == 0
        return m.sent[c, l, t] <= h

    m.ineq_send_needs_hold = pe.Constraint(
        m.SENT, rule=_needs_hold,
        doc="a chunk leaves a node only if the node held it when the send started (end of t-k)")

    def _update(m, c, n, t):
        prev = H(c, n, t - 1)
        ins = [m.sent[i] for i in arrivals.get((c, n, t), ())]
        return m.hold[c, n, t] == prev + sum(ins)

    m.eq_hold_update = pe.Constraint(
        m.HOLD, rule=_update,
        doc="a node holds a chunk at t iff it held it at t-1 or it arrives at t (at most one arrival, holdings persist)")

    if capacity:
        occupancy: dict[tuple[int, int], list] = {}
        for c, l, t in sent_idx:
            k = int(data.delay[data.group[c], l])
            for tau in range(t - k + 1, t + 1):
                occupancy.setdefault((l, tau), []).append((c, l, t))
        busy = [key for key, v in occupancy.items() if len(v) > int(data.capacity[key[0]])]
        m.BUSY = pe.Set(initialize=sorted(busy), dimen=2, doc="(link pair, timestep) that could be over-used")
        m.ineq_link_capacity = pe.Constraint(
            m.BUSY,
            rule=lambda m, l, tau: sum(m.sent[i] for i in occupancy[(l, tau)]) <= int(data.capacity[l]),
            doc="at most `capacity` chunks occupy a link pair in any timestep (multi-timestep arcs count every timestep)")

    pairs = [(int(c), int(n)) for c, n in zip(*np.nonzero(need))]
    w = np.ones(len(instance.collectives)) if weights is None else np.asarray(weights, float)
    if len(w) != len(data.instance.collectives):
        raise NotSupported(f"weights: expected {len(data.instance.collectives)} values, got {len(w)}")
    m._pairs = pairs
    if objective == "arrivals":
        expr = sum(float(w[data.group[c]]) * H(c, n, T) for c, n in pairs)
        if lookahead:
            relays = [(c, n) for c, n in zip(*np.nonzero(useful & ~data.post)) if (c, n, T) in hold_set]
            big = float(len(relays) + 1)
            expr = big * expr + sum(m.hold[int(c), int(n), T] for c, n in relays)
        m.arrivals = pe.Objective(
            expr=expr + 0, sense=pe.maximize,
            doc="postcondition pairs (chunk, node) held at the horizon (weighted per collective)")
    else:
        P = len(pairs)
        missing = [(c, n) for c, n in pairs if (c, n, T) not in hold_set]
        m.done = pe.Var(m.T, domain=domain, doc="every postcondition pair has arrived by timestep t")
        m.eq_all_arrive = pe.Constraint(
            [(c, n) for c, n in pairs if (c, n, T) in hold_set],
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
        m.makespan = pe.Objective(expr=T + 1 - sum(m.done[t] for t in m.T), sense=pe.minimize,
                                  doc="the first timestep by which every pair has arrived")
    return m


# ---- reading a solution back -----------------------------------------------------------------

def sends_of(model: pe.ConcreteModel, threshold: float = 0.5) -> np.ndarray:
    """The chosen sends as rows ``(chunk, pair, arrival_step)`` (values above ``threshold``)."""
    rows = [idx for idx, v in model.sent.items() if v.value is not None and v.value > threshold]
    return np.array(sorted(rows), dtype=np.int64).reshape(-1, 3)


def extract(model: pe.ConcreteModel) -> Schedule:
    """The schedule the solved model describes (values must be loaded, e.g. by a backend).

    Steps are arrival timesteps; useless sends are pruned; combining collectives are reversed
    back onto the original topology; concurrent collectives are merged with their offsets.
    """
    data: TenData = model._ten
    rows = prune(data, sends_of(model))
    return schedule_from_rows(data, rows, NAME)


def bound(model: pe.ConcreteModel):
    """No formulation-level bound (the solver's dual bound is the ILP's bound)."""
    return None


def holdings(model: pe.ConcreteModel, upto: int | None = None, threshold: float = 0.5) -> np.ndarray:
    """Holdings (bool ``[chunk, node]``, the model's direction) at the end of timestep ``upto``."""
    data: TenData = model._ten
    T = data.horizon if upto is None else upto
    out = data.pre.copy()
    for (c, n, t), v in model.hold.items():
        if t == T and v.value is not None and v.value > threshold:
            out[c, n] = True
    return out


def arrivals_count(model: pe.ConcreteModel) -> int:
    """Postcondition pairs (not held at the start) held at the horizon in the loaded solution."""
    held = holdings(model)
    data: TenData = model._ten
    need = data.post & ~data.pre
    return int((held & need).sum())


def required(model: pe.ConcreteModel) -> int:
    """Postcondition pairs the model must deliver (not held at the start)."""
    data: TenData = model._ten
    return int((data.post & ~data.pre).sum())


__all__ = ["NAME", "build", "extract", "bound", "lower_bound", "holdings", "sends_of", "arrivals_count", "required"]
