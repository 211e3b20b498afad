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
:mod:`collsynth.solvers.ten`). Several concurrent collectives (TACOS VIII-G, multi-tenant)
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

import math
from dataclasses import dataclass, field, replace

import numpy as np
import pyomo.environ as pe

from ..instances.instance import Instance
from ..tens.schedule import Schedule, from_arrays, merge

NAME = "ten-ilp"
DRIVER_FAMILY = "ten"  # solved by the horizon / early-stop / time-cluster drivers
OBJECTIVES = ("arrivals", "makespan")
INF = 1 << 30


class NotSupported(ValueError):
    """This formulation cannot express the instance (the message says why)."""


# ---- plain data the model is built from ------------------------------------------------------

@dataclass
class TenData:
    """Everything a TEN model needs, as plain arrays (shared by ten_ilp, ten_lp, nocongestion).

    ``pre``/``post`` are bool ``[chunk, node]`` over global chunk ids (the model's direction);
    ``group[c]`` is the collective a chunk belongs to; link pair ``l`` is ``src[l] -> dst[l]``
    with ``capacity[l]`` parallel links and ``delay[g, l]`` timesteps for a chunk of group g.
    """

    instance: Instance  # the instance the model is built for (the dual when reversed)
    original: Instance  # what the user asked for
    reversed: bool
    horizon: int
    pre: np.ndarray
    post: np.ndarray
    group: np.ndarray
    offsets: tuple[int, ...]
    src: np.ndarray
    dst: np.ndarray
    capacity: np.ndarray
    delay: np.ndarray
    timestep: float
    dist: np.ndarray = field(repr=False, default=None)  # delay-weighted distances [g, u, v]


def dual_instance(instance: Instance) -> Instance:
    """The non-combining dual on the transposed topology of a combining instance (else itself).

    Reduce <-> broadcast and reduce_scatter <-> allgather (seed 000 Appendix A); allreduce has
    no single dual (solve it as reduce_scatter then allgather); mixing combining and
    non-combining concurrent collectives is not expressible in one time direction.
    """
    kinds = [c.kind for c in instance.collectives]
    if "allreduce" in kinds:
        raise NotSupported("allreduce: solve it as reduce_scatter then allgather (two models)")
    comb = [c.combining for c in instance.collectives]
    if not any(comb):
        return instance
    if not all(comb):
        raise NotSupported("concurrent collectives mixing combining and non-combining kinds")
    return replace(
        instance,
        name=f"{instance.name}-dual",
        topology=instance.topology.transpose(),
        collectives=tuple(c.dual() for c in instance.collectives),
    )


def link_delays(topology, chunk_bytes, timestep: float | None = None):
    """(delay per link pair in timesteps, capacity per pair, timestep) for chunks of these sizes.

    The TEN's discretisation (:func:`collsynth.tens.ten.link_costs` and ``discretize``: cost =
    alpha + chunk_bytes / per-link bandwidth, ``ceil(cost / timestep)``, TACOS section IV-C);
    the timestep defaults to the cheapest link cost, as in :func:`~collsynth.tens.ten.build_ten`.
    ``chunk_bytes`` may be a list (concurrent collectives): one delay row per size, all on one
    timestep (the cheapest cost over all sizes).
    """
    from ..tens.ten import discretize, link_costs

    sizes = list(chunk_bytes) if isinstance(chunk_bytes, (list, tuple, np.ndarray)) else [chunk_bytes]
    if topology.switches & set(topology.nodes):
        raise NotSupported("the topology has switches: unwind them to point-to-point links first")
    if topology.link_arrays.__len__() == 0:
        raise NotSupported("the topology has no live links")
    costs = np.array([link_costs(topology, b) for b in sizes])
    if timestep is None:
        timestep = float(costs.min())
    delay = np.stack([discretize(row, timestep) for row in costs])
    return delay, topology.link_arrays.count.astype(np.int64), float(timestep)


def _dists(src, dst, delay_row, size) -> np.ndarray:
    import scipy.sparse as sp
    from scipy.sparse.csgraph import dijkstra

    if len(src) == 0:
        d = np.full((size, size), np.inf)
        np.fill_diagonal(d, 0)
        return d
    # keep the smallest delay per pair (pairs are unique already)
    adj = sp.csr_matrix((delay_row.astype(float), (src, dst)), shape=(size, size))
    return dijkstra(adj, directed=True)


def prepare(instance: Instance, horizon: int, state=None, timestep: float | None = None) -> TenData:
    """The plain data of a TEN model for ``instance`` over ``horizon`` timesteps."""
    if not isinstance(horizon, (int, np.integer)) or horizon < 1:
        raise NotSupported(f"horizon must be a positive integer, got {horizon!r}")
    inst = dual_instance(instance)
    topo = inst.topology
    S = topo.size
    colls = inst.collectives
    offsets = inst.chunk_offsets
    total = sum(c.num_chunks for c in colls)
    pre = np.zeros((total, S), bool)
    post = np.zeros((total, S), bool)
    group = np.zeros(total, np.int64)
    for g, (c, off) in enumerate(zip(colls, offsets)):
        pre[off:off + c.num_chunks] = c.precondition
        post[off:off + c.num_chunks] = c.postcondition
        group[off:off + c.num_chunks] = g
    if state is not None:
        state = np.asarray(state, dtype=bool)
        if state.shape != pre.shape:
            raise NotSupported(f"state must be a bool matrix of shape {pre.shape}, got {state.shape}")
        pre = state.copy()
    la = topo.link_arrays
    delay, cap, timestep = link_delays(topo, [c.chunk_bytes for c in colls], timestep)
    dist = np.stack([_dists(la.src, la.dst, delay[g], S) for g in range(len(colls))])
    return TenData(inst, instance, inst is not instance, int(horizon), pre, post, group, offsets,
                   la.src.copy(), la.dst.copy(), cap, delay, timestep, dist)


def reach(data: TenData) -> tuple[np.ndarray, np.ndarray]:
    """``earliest[c, n]`` (first timestep n can hold c) and ``latest[c, n]`` (last useful arrival).

    earliest: delay-weighted distance from the nearest holder (0 for holders, INF if
    unreachable); latest: horizon minus the distance to the nearest node that needs c and does
    not hold it (the horizon itself for such nodes; -1 if none needs it).
    """
    C, S = data.pre.shape
    earliest = np.full((C, S), INF, np.int64)
    latest = np.full((C, S), -1, np.int64)
    need = data.post & ~data.pre
    for g in range(data.dist.shape[0]):
        D = data.dist[g]
        rows = np.flatnonzero(data.group == g)
        if not len(rows):
            continue
        Dm = np.where(np.isinf(D), INF, D).astype(np.int64)
        # earliest[c, n] = min over holders h of D[h, n]
        for c in rows:
            h = np.flatnonzero(data.pre[c])
            if len(h):
                earliest[c] = Dm[h].min(axis=0)
            m = np.flatnonzero(need[c])
            if len(m):
                back = Dm[:, m].min(axis=1)  # distance from n to the nearest needing node
                latest[c] = np.where(back >= INF, -1, data.horizon - back)
    return earliest, latest


def _distance(instance: Instance, state=None, timestep: float | None = None):
    """(TEN data, needed pairs, delay-weighted distance from the nearest holder to the farthest
    node that needs a chunk); 0 when nothing is needed."""
    data = prepare(instance, 1, state, timestep)
    earliest, _ = reach(data)
    need = data.post & ~data.pre
    if not need.any():
        return data, need, 0
    far = int(earliest[need].max())
    if far >= INF:
        raise NotSupported("some required chunk cannot reach its destination")
    return data, need, far


def distance_bound(instance: Instance, state=None, timestep: float | None = None) -> int:
    """Delay-weighted distance from the nearest holder to the farthest node needing a chunk."""
    return _distance(instance, state, timestep)[2]


def lower_bound(instance: Instance, state=None, timestep: float | None = None) -> int:
    """A lower bound on the TEN timesteps any schedule needs (from ``state`` if given).

    The larger of (a) the delay-weighted distance from the nearest holder to the farthest node
    that needs a chunk, and (b) the inbound throughput bound: a pair with delay k and capacity
    c delivers at most ``c * floor(T / k)`` chunks in T timesteps, so a node needing R chunks
    needs the smallest T with ``sum_l c_l floor(T / k_l) >= R`` (TACOS: one chunk per link per
    timestep; seed 000 section 3 for the bandwidth argument).
    """
    data, need, far = _distance(instance, state, timestep)
    if not need.any():
        return 0
    R = np.bincount(np.nonzero(need)[1], minlength=data.pre.shape[1])
    best = far
    G = data.delay.shape[0]
    same = G == 1 or bool((data.delay == data.delay[0]).all())
    for n in np.flatnonzero(R):
        ins = np.flatnonzero(data.dst == n)
        caps = data.capacity[ins]
        if same:
            groups = [(int(R[n]), data.delay[0, ins])]
        else:  # concurrent chunk sizes with different delays: bound each size on its own, and
            # the total occupancy (a size-g chunk holds an in-link for >= its smallest delay)
            Rg = np.bincount(data.group[need[:, n]], minlength=G)
            groups = [(int(Rg[g]), data.delay[g, ins]) for g in range(G) if Rg[g]]
            occ = sum(int(Rg[g]) * int(data.delay[g, ins].min()) for g in range(G) if Rg[g])
            best = max(best, int(math.ceil(occ / caps.sum())))
        for r, ks in groups:
            T = max(1, int(math.ceil(r / caps.sum())))
            while (caps * (T // ks)).sum() < r:
                T += 1
            best = max(best, T)
    return int(best)


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


def prune(data: TenData, rows: np.ndarray) -> np.ndarray:
    """Drop sends that deliver nothing: a second arrival of a chunk at a node, or a chunk sent
    to a node that neither needs it nor forwards it afterwards (repeated to a fixed point)."""
    if not len(rows):
        return rows
    c, l, t = rows[:, 0], rows[:, 1], rows[:, 2]
    dst = data.dst[l]
    # first arrival per (chunk, dst): sort by (c, dst, t), keep the first of each group
    order = np.lexsort((t, dst, c))
    rows = rows[order]
    c, l, t = rows[:, 0], rows[:, 1], rows[:, 2]
    dst = data.dst[l]
    first = np.ones(len(rows), bool)
    first[1:] = (c[1:] != c[:-1]) | (dst[1:] != dst[:-1])
    rows = rows[first]
    keep = np.ones(len(rows), bool)
    need = data.post
    while True:
        c, l, t = rows[:, 0], rows[:, 1], rows[:, 2]
        src, dst = data.src[l], data.dst[l]
        forwards = set(zip(c[keep].tolist(), src[keep].tolist()))
        changed = False
        for i in np.flatnonzero(keep):
            ci, di = int(c[i]), int(dst[i])
            if need[ci, di] or (ci, di) in forwards:
                continue
            keep[i] = False
            changed = True
        if not changed:
            break
    return rows[keep]


def extract(model: pe.ConcreteModel) -> Schedule:
    """The schedule the solved model describes (values must be loaded, e.g. by a backend).

    Steps are arrival timesteps; useless sends are pruned; combining collectives are reversed
    back onto the original topology; concurrent collectives are merged with their offsets.
    """
    data: TenData = model._ten
    rows = prune(data, sends_of(model))
    return schedule_from_rows(data, rows)


def schedule_from_rows(data: TenData, rows: np.ndarray, horizon: int | None = None) -> Schedule:
    """Turn ``(chunk, pair, arrival)`` rows of the model's direction into the user's schedule."""
    rows = np.asarray(rows, np.int64).reshape(-1, 3)
    c, l, t = rows[:, 0], rows[:, 1], rows[:, 2]
    src, dst = data.src[l], data.dst[l]
    k = data.delay[data.group[c], l] if len(rows) else np.zeros(0, np.int64)
    if data.reversed:
        T = int(t.max()) if len(t) else 0
        # mirror the occupancy interval [t-k+1, t] to [T+1-t, T+k-t]; the arrival is its end
        src, dst, t = dst, src, T + k - t
    inst = data.original
    parts = []
    for g, (coll, off) in enumerate(zip(inst.collectives, inst.chunk_offsets)):
        sel = data.group[c] == g
        parts.append(from_arrays(
            coll.kind, inst.topology.size, coll.num_chunks,
            chunk=c[sel] - off, src=src[sel], dst=dst[sel], step=t[sel],
            meta={"producer": NAME, "timestep_s": data.timestep},
        ))
    if len(parts) == 1:
        return parts[0]
    return merge(parts, inst.chunk_offsets)


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


__all__ = ["NAME", "build", "extract", "bound", "prepare", "dual_instance", "NotSupported",
           "holdings", "schedule_from_rows", "prune", "sends_of", "link_delays", "reach",
           "arrivals_count", "required", "lower_bound"]
