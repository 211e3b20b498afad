"""Per-source flow LP on the TEN: a commodity per source, for collectives that never copy (all-to-all, scatter, gather).

In an all-to-all no chunk is ever copied: chunk ``(s, d)`` starts at ``s`` and is needed at
``d`` only. The flows of all chunks leaving one source can then be added up into one
commodity, as TE-CCL does for all-to-all (Liu et al., "Rethinking Machine Learning Collective
Communication as a Multi-Commodity Flow Problem", SIGCOMM 2024, Section 4, the linear program
for demands that need no copy): each destination absorbs its demand out of the source's
aggregate, and a flow decomposition of one source's single-source, multi-sink time-expanded
flow gives time-respecting paths ``s -> d``, each carrying (a fraction of) one chunk
``(s, d)`` (Ahuja, Magnanti and Orlin, "Network Flows", 1993, Section 3.5, flow
decomposition). The model is ``N`` times smaller than a variable per chunk.

Variables (a commodity ``q`` is one source ``s`` of one collective, units are chunks):

- ``flow[q, l, t] >= 0``: the part of ``q`` crossing link pair ``l = u -> v`` (delay ``k``),
  leaving ``u`` at the end of ``t - lag`` and arriving at the end of ``t`` (``lag`` is the
  delay plus the link's latency, one less over an instant switch-to-NPU hop,
  :attr:`TenData.lag`);
- ``buffer[q, v, t] >= 0``: what of ``q`` node ``v`` keeps at the end of ``t`` to send later
  (TE-CCL's buffers; switch nodes store nothing, so they have none);
- ``deliver[q, d, t] >= 0``: what of ``q`` destination ``d`` absorbs at the end of ``t``.

Rows: ``ineq_conservation[q, v, t]``: what leaves ``v`` at the end
of ``t`` plus what it absorbs and keeps is at most what it kept at ``t - 1`` plus what arrived
at ``t`` (the source starts with its whole supply; at a switch what leaves is at most what
arrived in that timestep); ``ineq_demand[q, d]``: ``d`` absorbs at most its demand;
``ineq_link_capacity[l, tau]``: the flows occupying a pair in a timestep (a flow arriving at
``t`` occupies the pair for its ``delay`` timesteps before its latency, ``t - k + 1 .. t``
without one) total at most its ``capacity``. Objective ``arrivals``:
maximise what is absorbed by the horizon. :func:`bound` is the horizon when every demand is
met, else the horizon + 1.

Exactness: any schedule of a non-copying collective that delivers everything by ``T`` (whole
chunks or pieces, at most ``capacity`` chunks on a pair per timestep) follows each chunk's
first arrival at its destination back to its source: a time-respecting path; adding those
paths per source is a feasible point with every demand met. Conversely :func:`extract`
decomposes the solved flows into such paths and sends the pieces along them, a schedule of
``T`` timesteps. So the smallest complete horizon is the least number of timesteps of any
schedule, whole-chunk or fractional (with ``integer=True``: of any whole-chunk schedule, the
TEN ILP's optimum). The TEN LP (:mod:`.ten_lp`) is weaker on these collectives (a held
fraction may be forwarded on two links) and the flow LP (:mod:`.ten_flow_lp`) equal but
``N`` times larger.

Collectives that copy (allgather, broadcast) or combine (reduce, reduce_scatter, allreduce)
are refused with a one-line reason. A 4-node unidirectional ring, all-to-all at horizon 3:
each source's flow may use the 3 pairs that do not enter it, from the timestep it can reach
them on (3 + 2 + 1 flows a source, 24 in all), and each pair has a capacity row per timestep:

>>> from collsynth.instances.generators import build as topo
>>> from collsynth.instances.instance import make_instance
>>> ring = make_instance(topo("ring", {"nodes": 4, "bidirectional": False}), "alltoall")
>>> m = build(ring, horizon=3)
>>> len(m.flow), len(m.ineq_link_capacity)
(24, 12)
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pyomo.core as pe
from pyomo.common.gc_manager import PauseGC
from pyomo.core.expr.numeric_expr import LinearExpression, MonomialTermExpression

from ..instances.instance import Instance
from ..instances.topology import ParallelArrays
from ..tens.bounds import lower_bound  # noqa: F401 - the TEN bound every TEN formulation starts from
from ..tens.schedule import Schedule
from ..tens.ten import INF, SWITCH_COPY, NotSupported, TenData, prepare, schedule_from_rows
from . import TenModel, expose, ten_model
from .ten_flow_lp import arrivals_only
from ._ten_arrays import Size, add_rows, check_size, csr_rows, ranges

NAME = "ten-source-flow-lp"
SUMMARY = ("flow LP on the TEN with one commodity per source (TE-CCL's all-to-all LP): exact for collectives "
           "that never copy, N times smaller than a variable per chunk")
DRIVER_FAMILY = "ten"
ROLE = "relaxation"  # bound(model) proves a horizon; the schedule comes from the flow decomposition
WARM_START = False
PARAMS = (
    ("integer", bool, False, "integer flows (TE-CCL's MILP): the decomposition sends whole chunks"),
    ("timestep", float, None, "seconds per TEN timestep (default: the cheapest link's cost per chunk)"),
    ("switch_copy", bool, SWITCH_COPY, "how switch nodes forward (the flows never copy, so the schedule suits both)"),
    ("build_limit", float, None, "seconds the model build may take (estimated first; refused beyond)"),
)
TOL = 1e-6
NO_CROSSOVER_FLOWS = 20_000  # above this many flow variables the arrivals LP skips crossover (HiGHS'
# interior point, possibly unverified: status "feasible"): completeness is read from what it
# delivers, and the polished re-solve (:func:`polish`, with crossover) gives the vertex whose flows
# decompose exactly
MAX_DENOMINATOR = 256  # a flow amount is snapped to the nearest fraction with at most this denominator
MAX_ATOMS = 1 << 20  # cap on the common denominator; beyond it amounts are rounded to 1/2**16


def model_units(instance: Instance) -> float:
    """Commodities times link pairs per timestep (the drivers' size estimate): one commodity
    per source of each collective, not one per chunk."""
    sources = sum(int(c.precondition.any(axis=0).sum()) for c in instance.collectives)
    return float(max(1, sources) * max(1, len(instance.topology.link_arrays)))


# ---- commodities -----------------------------------------------------------------------------

@dataclass
class Commodities(ParallelArrays):
    """The sources of a non-copying collective: commodity ``q`` is chunk group ``group[q]``
    leaving node ``source[q]``; ``demand[q, d]`` chunks of it are needed at ``d``, namely
    ``chunks[q][d]`` (global chunk ids, ascending)."""

    group: np.ndarray
    source: np.ndarray
    demand: np.ndarray
    chunks: list


def refusal(instance: Instance) -> str | None:
    """Why the per-source flow model cannot express ``instance`` (one line), or None."""
    for coll in instance.collectives:
        if coll.combining:
            return (f"{coll.kind} combines partial sums, which are no flow of one source's chunks; "
                    "the per-source flow LP takes collectives that never copy a chunk (all-to-all, scatter, gather)")
        need = coll.postcondition & ~coll.precondition
        many = np.flatnonzero(need.sum(axis=1) > 1)
        if len(many):
            return (f"{coll.kind} copies chunks (chunk {int(many[0])} is needed at {int(need[many[0]].sum())} nodes); "
                    "the per-source flow LP takes collectives that never copy a chunk (all-to-all, scatter, gather)")
    return None


def commodities(data: TenData) -> Commodities:
    """The commodities of ``data`` (one per source and collective); refuses a chunk that must
    move but is held at several nodes (a time-clustering state: the flows would copy)."""
    need = data.post & ~data.pre
    moving = np.flatnonzero(need.any(axis=1))
    holders = data.pre[moving].sum(axis=1)
    if (holders != 1).any():
        c = int(moving[np.flatnonzero(holders != 1)[0]])
        raise NotSupported(f"chunk {c} must move and is held at {int(data.pre[c].sum())} nodes; the per-source flow "
                           "LP needs one holder per chunk (no time clustering)")
    src = np.argmax(data.pre[moving], axis=1)
    dst = np.argmax(need[moving], axis=1)
    key = data.group[moving] * data.pre.shape[1] + src
    uniq, inv = np.unique(key, return_inverse=True)
    S = data.pre.shape[1]
    demand = np.zeros((len(uniq), S), np.int64)
    np.add.at(demand, (inv, dst), 1)
    chunks = [dict() for _ in uniq]
    for c, q, d in zip(moving.tolist(), inv.tolist(), dst.tolist()):
        chunks[q].setdefault(d, []).append(c)
    return Commodities(uniq // S, uniq % S, demand, chunks)


# ---- index arrays ----------------------------------------------------------------------------

@dataclass
class SourceArrays:
    """Where the model has variables: flows ``(f_q, f_l, f_t)``, buffers ``(b_q, b_v, b_t)``,
    deliveries ``(a_q, a_d, a_t)``; columns are flows, then buffers, then deliveries."""

    f_q: np.ndarray
    f_l: np.ndarray
    f_t: np.ndarray
    b_q: np.ndarray
    b_v: np.ndarray
    b_t: np.ndarray
    a_q: np.ndarray
    a_d: np.ndarray
    a_t: np.ndarray

    @property
    def columns(self) -> int:
        """The model's variables: flows, buffers and deliveries."""
        return len(self.f_q) + len(self.b_q) + len(self.a_q)


def _dist_steps(d: np.ndarray) -> np.ndarray:
    return np.where(np.isinf(d), INF, d).astype(np.int64)


def source_arrays(data: TenData, com: Commodities) -> SourceArrays:
    """The variables that can matter: a flow leaves its tail no earlier than the source can
    reach it and arrives where some destination of the commodity is still reachable by the
    horizon; flows never enter their source. Buffers from the first timestep a node can hold
    the commodity to the last one from which it can still leave usefully; deliveries from the
    first timestep a destination can be reached."""
    T, S = data.horizon, data.pre.shape[1]
    lag = data.lag
    parts_f, parts_b, parts_a = [], [], []
    for q in range(len(com)):
        g, s = int(com.group[q]), int(com.source[q])
        D = data.dist[g]
        early = _dist_steps(D[s])
        dests = np.flatnonzero(com.demand[q])
        back = _dist_steps(D[:, dests].min(axis=1))  # to the nearest destination
        k = lag[g]
        ok = (data.dst != s) & (early[data.src] < INF) & (back[data.dst] < INF)
        ls = np.flatnonzero(ok)
        owner, t = ranges(np.maximum(early[data.src[ls]] + k[ls], 1), T - back[data.dst[ls]])
        parts_f.append(np.stack([np.full(len(owner), q), ls[owner], t], 1))
        # leaving v usefully: over a pair whose head can still reach a destination
        fwd = np.full(S, INF, np.int64)
        np.minimum.at(fwd, data.src[ls], k[ls] + back[data.dst[ls]])
        store = np.flatnonzero(~data.switch & (early < INF) & (fwd < INF))
        owner, t = ranges(early[store], T - fwd[store] - 1)
        parts_b.append(np.stack([np.full(len(owner), q), store[owner], t], 1))
        owner, t = ranges(np.maximum(early[dests], 1), np.full(len(dests), T))
        parts_a.append(np.stack([np.full(len(owner), q), dests[owner], t], 1))
    f, b, a = (np.concatenate(p).astype(np.int64) if p else np.zeros((0, 3), np.int64)
               for p in (parts_f, parts_b, parts_a))
    return SourceArrays(f[:, 0], f[:, 1], f[:, 2], b[:, 0], b[:, 1], b[:, 2], a[:, 0], a[:, 1], a[:, 2])


def conservation_rows(data: TenData, com: Commodities, ix: SourceArrays):
    """``ineq_conservation`` rows keyed ``(commodity, node, t)``: out at ``t`` + deliver at
    ``t`` + buffer at ``t`` - buffer at ``t - 1`` - in at ``t`` <= supply (the source at
    ``t = 0``) or 0. Rows with nothing leaving are always met and left out."""
    T, S = data.horizon, data.pre.shape[1]
    nf, nb = len(ix.f_q), len(ix.b_q)
    lag = data.lag[com.group[ix.f_q], ix.f_l]

    def key(q, v, t):
        return (q * S + v) * (T + 1) + t

    # buffers end by T - 2 (a stored chunk still has a hop to make), so t + 1 stays in range
    keys = np.concatenate([key(ix.f_q, data.src[ix.f_l], ix.f_t - lag), key(ix.a_q, ix.a_d, ix.a_t),
                           key(ix.b_q, ix.b_v, ix.b_t), key(ix.b_q, ix.b_v, ix.b_t + 1),
                           key(ix.f_q, data.dst[ix.f_l], ix.f_t)])
    cols = np.concatenate([np.arange(nf), nf + nb + np.arange(len(ix.a_q)), nf + np.arange(nb), nf + np.arange(nb),
                           np.arange(nf)])
    vals = np.concatenate([np.ones(nf + len(ix.a_q) + nb), -np.ones(nb + nf)])
    uniq, row = np.unique(keys, return_inverse=True)
    positive = np.zeros(len(uniq), bool)
    positive[row[vals > 0]] = True
    keep = positive[row]
    new_row = np.cumsum(positive) - 1
    uniq = uniq[positive]
    q, rest = uniq // (S * (T + 1)), uniq % (S * (T + 1))
    v, t = rest // (T + 1), rest % (T + 1)
    upper = np.where((v == com.source[q]) & (t == 0), com.demand[q].sum(axis=1), 0).astype(float)
    return csr_rows(list(zip(q.tolist(), v.tolist(), t.tolist())), new_row[row[keep]], cols[keep], vals[keep],
                    -np.inf, upper)


def capacity_rows(data: TenData, com: Commodities, ix: SourceArrays):
    """``ineq_link_capacity`` rows keyed ``(pair, timestep)``: the flows occupying a pair in a
    timestep (arrival ``t``: the ``delay`` timesteps before its latency,
    :meth:`~collsynth.tens.ten.TenData.occupied`) total at most its capacity."""
    T = data.horizon
    first, last = data.occupied(com.group[ix.f_q], ix.f_l, ix.f_t)
    owner, tau = ranges(first, last)
    key = ix.f_l[owner] * (T + 1) + tau
    uniq, row = np.unique(key, return_inverse=True)
    pair = uniq // (T + 1)
    return csr_rows(list(zip(pair.tolist(), (uniq % (T + 1)).tolist())), row, owner, np.ones(len(owner)), -np.inf,
                    data.capacity[pair].astype(float))


def demand_rows(com: Commodities, ix: SourceArrays, first: int):
    """``ineq_demand`` rows keyed ``(commodity, destination)``: absorbed at most the demand."""
    S = com.demand.shape[1]
    key = ix.a_q * S + ix.a_d
    uniq, row = np.unique(key, return_inverse=True)
    return csr_rows(list(zip((uniq // S).tolist(), (uniq % S).tolist())), row, first + np.arange(len(key)),
                    np.ones(len(key)), -np.inf, com.demand[uniq // S, uniq % S].astype(float))


# ---- the model -------------------------------------------------------------------------------

def build(instance: Instance, horizon: int, state=None, *, integer: bool = False, timestep: float | None = None,
          switch_copy: bool = SWITCH_COPY, objective: str = "arrivals", lookahead: int = 0,
          build_limit: float | None = None, **params) -> pe.ConcreteModel:
    """The per-source flow LP of the module doc for ``instance`` over ``horizon`` timesteps
    (``integer=True``: integer flows, TE-CCL's MILP). Raises
    :class:`~collsynth.tens.ten.NotSupported` for collectives that copy or combine, and
    :class:`~collsynth.formulations.BuildTooLarge` when the estimated build exceeds
    ``build_limit`` seconds. ``lookahead`` is ignored (no windows)."""
    arrivals_only(params, objective, "the per-source flow LP maximises what arrives by the horizon")
    why = refusal(instance)
    if why:
        raise NotSupported(why)
    data = prepare(instance, horizon, state, timestep, switch_copy=switch_copy)
    com = commodities(data)
    ix = source_arrays(data, com)
    est = Size(ix.columns, len(ix.f_q) // 2 + len(ix.b_q) + data.horizon * len(data.src),
               4 * len(ix.f_q) + 2 * len(ix.b_q) + 2 * len(ix.a_q))
    check_size(est, build_limit, f"{NAME} at horizon {data.horizon}")
    with PauseGC():  # many small objects, no cycles
        return _pyomo_model(instance, data, com, ix, bool(integer))


def _pyomo_model(instance, data: TenData, com: Commodities, ix: SourceArrays, integer: bool) -> pe.ConcreteModel:
    m = pe.ConcreteModel(name=f"{NAME}:{instance.name}:T={data.horizon}")
    m.horizon = pe.Param(initialize=data.horizon, doc="number of TEN timesteps")
    m.timestep_s = pe.Param(initialize=data.timestep, doc="seconds per TEN timestep")
    domain = pe.NonNegativeIntegers if integer else pe.NonNegativeReals
    # SETS
    m.FLOW = pe.Set(initialize=list(zip(ix.f_q.tolist(), ix.f_l.tolist(), ix.f_t.tolist())), dimen=3, ordered=True,
                    doc="(commodity, link pair, arrival timestep)")
    m.BUFFER = pe.Set(initialize=list(zip(ix.b_q.tolist(), ix.b_v.tolist(), ix.b_t.tolist())), dimen=3,
                      ordered=True, doc="(commodity, node, timestep)")
    m.DELIVER = pe.Set(initialize=list(zip(ix.a_q.tolist(), ix.a_d.tolist(), ix.a_t.tolist())), dimen=3,
                       ordered=True, doc="(commodity, destination, timestep)")
    # VARIABLES
    m.flow = pe.Var(m.FLOW, domain=domain, doc="chunks of a source's commodity crossing a link pair")
    m.buffer = pe.Var(m.BUFFER, domain=domain, doc="chunks of a commodity a node keeps at the end of t")
    m.deliver = pe.Var(m.DELIVER, domain=domain, doc="chunks of a commodity a destination absorbs at the end of t")
    columns = list(m.flow.values()) + list(m.buffer.values()) + list(m.deliver.values())
    # CONSTRAINTS
    add_rows(m, "ineq_conservation", conservation_rows(data, com, ix), columns,
             "what leaves, is absorbed or kept at t is at most what was kept at t-1 plus what arrived at t "
             "(a switch keeps nothing; the source starts with its supply)")
    add_rows(m, "ineq_demand", demand_rows(com, ix, len(ix.f_q) + len(ix.b_q)), columns,
             "a destination absorbs at most its demand of a source's chunks")
    add_rows(m, "ineq_link_capacity", capacity_rows(data, com, ix), columns,
             "at most `capacity` chunks occupy a link pair in any timestep (multi-timestep arcs count every timestep)")
    # OBJECTIVE
    m.arrivals = pe.Objective(expr=LinearExpression(list(m.deliver.values())) if len(ix.a_q) else 0,
                              sense=pe.maximize, doc="chunks absorbed by their destinations by the horizon")
    # a solver hint (HiGHS): the arrivals LP has a huge optimal face, whose crossover to a vertex
    # takes far longer than the interior point solve; only what it delivers is needed
    m.highs_options = {"run_crossover": "off" if len(ix.f_q) > NO_CROSSOVER_FLOWS else "on"}
    m.commodities = com  # plain data for extract
    m.source_arrays = ix
    # the drivers' view: sent[q, l, t] / hold[q, d, t] are indexed by commodity (a source), not chunk
    return expose(m, TenModel(data=data, sent=m.flow, hold=m.deliver, objective="arrivals"))


# ---- reading the solution ----------------------------------------------------------------------

def delivered(model) -> float:
    """Chunks the loaded solution absorbs at their destinations by the horizon."""
    return float(sum(v.value or 0.0 for v in model.deliver.values()))


def required(model) -> int:
    """Chunks the model must deliver."""
    return int(model.commodities.demand.sum())


def bound(model):
    """Lower bound on timesteps proven by the solved model: its horizon when every demand is
    met, else the horizon + 1 (module doc: exactness)."""
    T = ten_model(model).data.horizon
    need = required(model)
    return T if delivered(model) >= need - TOL * max(1, need) else T + 1


def polish(model) -> pe.ConcreteModel:
    """Turn a complete model into "deliver everything with little, early traffic" (in place):
    every demand is met (``ineq_deliver_all``) and ``early_traffic`` minimises
    ``sum (1 + t / (T + 1)) * flow[q, l, t]`` (no flow that wanders without purpose)."""
    T = ten_model(model).data.horizon
    need = required(model)
    for obj in list(model.component_data_objects(pe.Objective, active=True)):
        obj.deactivate()
    model.ineq_deliver_all = pe.Constraint(expr=LinearExpression(list(model.deliver.values())) >= need,
                                           doc="every demand is met by the horizon")
    model.early_traffic = pe.Objective(
        expr=LinearExpression([MonomialTermExpression((1 + t / (T + 1), v)) for (q, l, t), v in model.flow.items()]),
        sense=pe.minimize, doc="little and early traffic among complete solutions")
    model.highs_options = {"run_crossover": "on"}  # a vertex: its flows decompose into exact pieces
    return model


refine = polish  # the contract's name: re-aim a complete solved model before a re-solve


def atoms(values: np.ndarray, max_denominator: int = MAX_DENOMINATOR, max_atoms: int = MAX_ATOMS):
    """``(counts, D, exact)``: the amounts as multiples of ``1/D``; exact when every amount is
    within 1e-6 of a fraction of denominator at most ``max_denominator`` and their lcm is at
    most ``max_atoms``, else rounded to ``1/2**16``.

    >>> counts, D, exact = atoms(np.array([0.5, 1.0, 1/3]))
    >>> counts.tolist(), D, exact
    ([3, 6, 2], 6, True)
    """
    fr = [Fraction(float(x)).limit_denominator(max_denominator) for x in values.tolist()]
    D, exact = 1, all(abs(float(f) - x) <= TOL for f, x in zip(fr, values.tolist()))
    for f in fr if exact else ():
        D = D * f.denominator // math.gcd(D, f.denominator)
        if D > max_atoms:
            exact = False
            break
    if not exact:
        D = 1 << 16
        return np.rint(values * D).astype(np.int64), D, False
    return np.array([f.numerator * (D // f.denominator) for f in fr], np.int64), D, True


def paths(model) -> tuple[list, int, bool]:
    """The flow decomposition of the loaded solution: ``([(commodity, destination, atoms,
    [flow row, ...] from the source on)], D, exact)`` (amounts in ``1/D`` chunks; ``exact``:
    they are the solution's, not rounded, see :func:`atoms`).

    Each delivery is traced back to its source: at a node, the latest arrival with flow left
    that is no later than the departure (at a switch: exactly at it). Taking the latest keeps
    every node's cumulative balance (arrived by ``t`` >= left or absorbed by ``t``) intact, so
    a trace never gets stuck on an exact solution; a delivery that does (amounts rounded off
    the solution's lattice) is left short.
    """
    data = ten_model(model).data
    com, ix = model.commodities, model.source_arrays
    vals = _values(model)
    fval = vals[:len(ix.f_q)]
    counts, D, exact = atoms(vals) if len(vals) else (np.zeros(0, np.int64), 1, True)
    left, absorbed = counts[:len(fval)].copy(), counts[len(fval):]
    lag = data.lag[com.group[ix.f_q], ix.f_l] if len(ix.f_q) else np.zeros(0, np.int64)
    head, tail = data.dst[ix.f_l], data.src[ix.f_l]
    incoming: dict[tuple[int, int], tuple[list, list]] = {}  # (q, v) -> (arrival times, flow rows), by time
    for i in np.lexsort((ix.f_t, head, ix.f_q)).tolist():
        if left[i] > 0:
            ts, rows = incoming.setdefault((int(ix.f_q[i]), int(head[i])), ([], []))
            ts.append(int(ix.f_t[i]))
            rows.append(i)
    out = []
    for j in np.lexsort((ix.a_t, ix.a_d, ix.a_q)).tolist():
        q, d, want = int(ix.a_q[j]), int(ix.a_d[j]), int(absorbed[j])
        while want > 0:
            hops = _trace(q, d, int(ix.a_t[j]), int(com.source[q]), incoming, left, lag, tail, data.switch)
            if hops is None:
                break
            amount = min([want] + [int(left[i]) for i in hops])
            for i in hops:
                left[i] -= amount
                if not left[i]:
                    _drop(incoming, (q, int(head[i])), i, int(ix.f_t[i]))
            want -= amount
            out.append((q, d, amount, hops[::-1]))
    return out, D, exact


def _values(model) -> np.ndarray:
    """The loaded flows then deliveries (amounts up to 1e-6 read as 0)."""
    vals = np.array([v.value or 0.0 for v in model.flow.values()] + [v.value or 0.0 for v in model.deliver.values()],
                    float)
    return np.where(vals > TOL, vals, 0.0)


def _trace(q, d, t, s, incoming, left, lag, tail, switch) -> list | None:
    """Flow rows from (destination ``d``, time ``t``) back to the source ``s`` (see :func:`paths`)."""
    hops, v = [], d
    while v != s:
        ts, rows = incoming.get((q, v), ((), ()))
        pos = bisect_right(ts, t) - 1
        if pos < 0 or (switch[v] and ts[pos] != t):
            return None
        i = rows[pos]
        hops.append(i)
        v, t = int(tail[i]), int(ts[pos] - lag[i])
    return hops


def _drop(incoming, key, i, t) -> None:
    ts, rows = incoming[key]
    pos = bisect_right(ts, t) - 1
    while rows[pos] != i:
        pos -= 1
    del ts[pos], rows[pos]


def decompose(model) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, np.ndarray, bool]:
    """The decomposition as sends in the model's direction: ``(rows (chunk, pair, arrival),
    lo, hi, D, held, exact)``. The paths of ``(s, d)`` take consecutive stretches of its chunks laid
    end to end (``D`` atoms each), so a path's piece of each chunk crosses each of its hops;
    ``held[c, n]``: node ``n`` ends with all of chunk ``c``."""
    data = ten_model(model).data
    com, ix = model.commodities, model.source_arrays
    found, D, exact = paths(model)
    cursor: dict[tuple[int, int], int] = {}
    rows, lo, hi = [], [], []
    for q, d, amount, hops in found:
        a0 = cursor.get((q, d), 0)
        cursor[(q, d)] = a0 + amount
        chunks = com.chunks[q][d]
        a = a0
        while a < a0 + amount:
            j = a // D
            b = min(a0 + amount, (j + 1) * D)
            for i in hops:
                rows.append((chunks[j], int(ix.f_l[i]), int(ix.f_t[i])))
                lo.append(a - j * D)
                hi.append(b - j * D)
            a = b
    held = data.pre.copy()
    for (q, d), n in cursor.items():
        whole = min(n // D, len(com.chunks[q][d]))
        held[com.chunks[q][d][:whole], d] = True
    return (np.array(rows, np.int64).reshape(-1, 3), np.array(lo, np.int64), np.array(hi, np.int64), int(D), held,
            exact)


def _schedule(data: TenData, rows, lo, hi, D) -> Schedule:
    g = int(np.gcd.reduce(np.concatenate([lo, hi, [D]]))) if len(lo) else D
    return schedule_from_rows(data, rows, NAME, pieces=(lo // g, hi // g, D // g))


def extract(model) -> Schedule:
    """The schedule of the solved model: its flow decomposition (:func:`paths`), pieces of
    ``1/D`` chunks (whole chunks when the flows are integral); it delivers everything when the
    model is complete and its amounts are exact fractions."""
    rows, lo, hi, D, _, _ = decompose(model)
    return _schedule(ten_model(model).data, rows, lo, hi, D)


def schedules(model, recover) -> list[tuple[str, Schedule, int]]:
    """``[(completion, schedule, chunks short)]``: the decomposition when the solution's
    amounts are exact fractions (a vertex); chunks it leaves short are dropped from it and
    sent whole by ``recover(data, held, horizon)`` (shortest-path recovery after the horizon).
    An interior solution (amounts off any small lattice) gives the pure recovery schedule:
    its polished re-solve (:func:`polish`) is the one to decompose."""
    data = ten_model(model).data
    if not atoms(_values(model))[2]:
        more = np.asarray(recover(data, data.pre, 0), np.int64).reshape(-1, 3)
        ones = np.ones(len(more), np.int64)
        return [("recovery", _schedule(data, more, 0 * ones, ones, 1), int((data.post & ~data.pre).sum()))]
    rows, lo, hi, D, held, _ = decompose(model)
    short = data.post & ~held
    if not short.any():
        return [("decomposition", _schedule(data, rows, lo, hi, D), 0)]
    keep = ~short.any(axis=1)[rows[:, 0]]
    more = np.asarray(recover(data, held, data.horizon), np.int64).reshape(-1, 3)
    rows = np.concatenate([rows[keep], more])
    lo = np.concatenate([lo[keep], np.zeros(len(more), np.int64)])
    hi = np.concatenate([hi[keep], np.full(len(more), D, np.int64)])
    return [("recovery", _schedule(data, rows, lo, hi, D), int(short.sum()))]


__all__ = ["NAME", "build", "extract", "bound", "polish", "refine", "schedules", "paths", "decompose", "atoms",
           "commodities", "refusal", "source_arrays", "model_units", "lower_bound"]
