"""TEN flow LP: one unit flow per (chunk, destination) through the TEN, link use counted once per chunk.

The hold/sent LP (:mod:`.ten_lp`) lets one fraction of a chunk that reaches a node count for
every node downstream of it: a third of a chunk across a slow link "fills" a whole chassis
behind it. This model gives each postcondition pair ``(c, d)`` not held at the start its own
unit flow (a multicommodity flow relaxation of the Steiner-arborescence packing the TEN ILP
solves; Magnanti and Wolsey, "Optimal trees", Handbooks in OR & MS vol. 7, 1995, Section 4 for
the directed multicommodity flow formulation of Steiner trees):

- ``flow[i]`` (row ``i`` = chunk ``c``, destination ``d``, link pair ``l``, arrival ``t``): the
  part of ``d``'s unit of chunk ``c`` that crosses ``l = u -> v`` (delay ``k``), leaving ``u``
  at the end of timestep ``t-k`` and arriving at the end of ``t``;
- storage between timesteps at every node: for each flow and each node ``u`` that neither
  holds ``c`` at the start nor is ``d``, what left ``u`` by the end of ``tau`` is at most what
  arrived there by the end of ``tau`` (``ineq_flow_storage``; holders are sources of any
  amount);
- at a switch node (TE-CCL's model, Liu et al., SIGCOMM 2024, Section 4: it stores nothing)
  what leaves after ``tau`` is at most what arrived at the end of ``tau`` itself
  (``ineq_flow_storage`` with equal timesteps); the path argument below passes a switch in
  one timestep, so the bound holds with and without switch copy;
- ``hold[c, d, t]``: the part of ``d``'s unit arrived by the end of ``t`` (at most 1,
  ``eq_arrivals``);
- ``sent[c, l, t] >= flow[c, d, l, t]`` for every destination ``d`` (``ineq_link_use``): a
  piece that crosses ``l`` once serves every destination behind it, so it is paid once;
- ``sum_c sent[c, l, t']`` over the arrivals ``t'`` whose occupancy ``[t'-k+1, t']`` covers a
  timestep is at most the pair's ``capacity`` (``ineq_link_capacity``, as in the TEN ILP).

Objective: maximise ``sum hold[c, d, T]``. :func:`bound` is ``T`` when every unit arrives,
else ``T + 1``.

Validity: take any schedule on the TEN (whole chunks, at most ``capacity`` chunks on a pair in
any timestep, a send starting once its source holds the chunk) that delivers everything by
``T``. For a pair ``(c, d)`` follow the first arrival of ``c`` at ``d`` back: its source got
``c`` first at an earlier timestep, from a send that started even earlier, ..., down to a
holder at time 0. Put ``flow = 1`` on that path and ``sent = 1`` on every send of the
schedule. The path leaves each intermediate node after it arrived there, never enters a start
holder (holders never receive), arrives by ``T``; ``sent >= flow``; capacity holds because it
holds for the schedule. So the model at ``T`` is feasible with objective = every pair, and the
smallest ``T`` at which it delivers everything is a lower bound on every TEN schedule of every
formulation that respects link capacity. A fraction ``x`` crossing a cut now carries at most
``x`` of each destination's unit across, however many destinations lie behind it.

Variables exist only where they can matter for their destination: a flow row needs
``t - k >= earliest[c, u]`` (delay-weighted distance from the nearest holder) and
``t + dist(v, d) <= T``; pairs into start holders and out of ``d`` are dropped. The size is
about chunks x destinations x link pairs x horizon, so :func:`build` counts the rows first and
refuses (``NotSupported``, the bound is then not computed, never 0) beyond ``max_variables``.

Its schedule is realised from the ``sent`` amounts exactly as the hold/sent LP's (atoms walked
in time order, short pairs completed by repair or by shortest-path recovery).

A 4-node ring at horizon 2: chunk 0 reaches node 1 over the pair 0->1 arriving in timestep 1
or 2 (two rows; node 3 alike), and node 2 over 0->1 or 0->3 in timestep 1, then 1->2 or 3->2
in timestep 2 (four rows): 8 rows a chunk, 32 in all, each with its ``ineq_link_use`` row:

>>> from collsynth.instances.generators import build as topo
>>> from collsynth.instances.instance import make_instance
>>> ring = make_instance(topo("ring", {"nodes": 4}), "allgather")
>>> len(flow_index(prepare(ring, 2))), len(build(ring, horizon=2).ineq_link_use)
(32, 32)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyomo.core as pe

from ..instances.topology import ParallelArrays
from ..limits import NO_LIMIT, Deadline, checkpoint
from ..tens.bounds import lower_bound  # noqa: F401 - the TEN bound every TEN formulation starts from
from ..tens.schedule import Schedule
from ..tens.ten import INF, SWITCH_COPY, NotSupported, TenData, prepare, reach
from . import TenModel, expose, ten_lp, ten_model

CHECK_EVERY = 64  # (chunk, destination) pairs indexed between two looks at the clock

NAME = "ten-flow-lp"
SUMMARY = "flow LP on the TEN: a unit flow per (chunk, destination), each link crossing paid once"
DRIVER_FAMILY = "ten"
ROLE = "relaxation"
MAX_VARIABLES = 200_000  # default size guard (flow rows + sent + hold variables)
PARAMS = (
    ("max_variables", int, MAX_VARIABLES, "refuse the flow LP (no bound) above this many variables", 1),
    ("timestep", float, None, "seconds per TEN timestep (default: the cheapest link's cost per chunk)"),
    ("switch_copy", bool, SWITCH_COPY, "switch nodes forward one arrival on several out-links (the schedule "
                                       "realised from the LP; the bound holds either way)"),
)


@dataclass
class FlowIndex(ParallelArrays):
    """The flow rows of :func:`build` as parallel arrays: row ``i`` is chunk ``chunk[i]``,
    destination ``dest[i]``, link pair ``pair[i]``, arrival ``step[i]``."""

    chunk: np.ndarray
    dest: np.ndarray
    pair: np.ndarray
    step: np.ndarray


def _pair_ranges(data: TenData, deadline: Deadline = NO_LIMIT):
    """For each (chunk ``c``, destination ``d``) pair, the link pairs ``ls`` its flow may use,
    the first arrival ``lo`` on each and how many arrivals ``n`` (module doc); checks
    ``deadline`` (and any enforced around it) every :data:`CHECK_EVERY` pairs."""
    T = data.horizon
    earliest, _ = reach(data)
    cs, ds = np.nonzero(data.post & ~data.pre)
    lag = data.lag  # the delay plus the latency; one less over an instant switch-to-NPU hop
    for i, (c, d) in enumerate(zip(cs.tolist(), ds.tolist())):
        if i % CHECK_EVERY == 0:
            done = f"{i:,} of {len(cs):,} (chunk, destination) pairs indexed"
            deadline.check("the flow LP's index", done)
            checkpoint("the flow LP's index", done)
        g = int(data.group[c])
        k = lag[g]
        back = data.dist[g][:, d]
        back = np.where(np.isinf(back), INF, back).astype(np.int64)
        ok = (~data.pre[c, data.dst]) & (data.src != d) & (earliest[c, data.src] < INF) & (back[data.dst] < INF)
        ls = np.flatnonzero(ok)
        lo = np.maximum(earliest[c, data.src[ls]] + k[ls], 1)
        hi = T - back[data.dst[ls]]
        yield c, d, ls, lo, np.maximum(hi - lo + 1, 0)


def flow_rows(data: TenData, deadline: Deadline = NO_LIMIT) -> int:
    """How many flow variables :func:`flow_index` would list (at most :func:`size`), counted
    without listing them: a model too big for its size guard is refused before its index,
    gigabytes for a large all-to-all, is made."""
    return sum(int(n.sum()) for _, _, _, _, n in _pair_ranges(data, deadline))


def flow_index(data: TenData, deadline: Deadline = NO_LIMIT) -> FlowIndex:
    """Every (chunk, destination, link pair, arrival) a unit flow can use by the horizon (module
    doc: leave the source after it can hold the chunk, arrive where ``d`` is still reachable),
    by ``deadline``."""
    parts = []
    for c, d, ls, lo, n in _pair_ranges(data, deadline):
        if not n.sum():
            continue
        rows_l = np.repeat(ls, n)
        start = np.repeat(lo, n)
        offs = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
        parts.append(np.stack([np.full(len(rows_l), c), np.full(len(rows_l), d), rows_l, start + offs], 1))
    rows = np.concatenate(parts) if parts else np.zeros((0, 4), np.int64)
    rows = rows.astype(np.int64)
    return FlowIndex(rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3])


def size(data: TenData, idx: FlowIndex | None = None, deadline: Deadline = NO_LIMIT) -> int:
    """Variables :func:`build` would create: flow rows, distinct ``sent`` triples and ``hold``
    entries (an estimate made before any Pyomo object exists; by ``deadline``)."""
    idx = flow_index(data, deadline) if idx is None else idx
    if not len(idx):
        return 0
    L = len(data.src)
    sent = len(np.unique((idx.chunk * L + idx.pair) * (data.horizon + 1) + idx.step))
    into = data.dst[idx.pair] == idx.dest
    first = {}
    for c, d, t in zip(idx.chunk[into].tolist(), idx.dest[into].tolist(), idx.step[into].tolist()):
        first[(c, d)] = min(t, first.get((c, d), t))
    hold = sum(data.horizon - t + 1 for t in first.values())
    return len(idx) + sent + hold


def arrivals_only(params: dict, objective: str, why: str) -> None:
    """Refuse the TEN ILP's parameters a flow model cannot take: any but ``cuts`` and
    ``capacity`` (which it ignores), and an objective other than ``"arrivals"`` (``why`` says
    what the model is instead)."""
    params.pop("cuts", None)
    params.pop("capacity", None)
    if params:
        raise NotSupported(f"unknown parameter(s) {', '.join(sorted(params))}")
    if objective != "arrivals":
        raise NotSupported(f"{why}: objective must be arrivals")


def build(instance, horizon: int, state=None, *, max_variables: int = MAX_VARIABLES,
          timestep: float | None = None, objective: str = "arrivals", lookahead: int = 0,
          switch_copy: bool = SWITCH_COPY, **params) -> pe.ConcreteModel:
    """The flow LP of the module doc for ``instance`` over ``horizon`` timesteps.

    ``state`` replaces the precondition (model direction); ``objective`` must be
    ``"arrivals"`` and ``lookahead`` is ignored (a bound has no windows). Raises
    :class:`~collsynth.tens.ten.NotSupported` when the model would have more than
    ``max_variables`` variables (counted before building).
    """
    arrivals_only(params, objective, "the flow LP is a bound")
    data = prepare(instance, horizon, state, timestep, switch_copy=switch_copy)
    idx = flow_index(data)
    n = size(data, idx)
    if n > int(max_variables):
        raise NotSupported(f"flow LP at horizon {data.horizon}: {n} variables, over the budget of "
                           f"{int(max_variables)} (max_variables); bound not computed")
    m = pe.ConcreteModel(name=f"{NAME}:{instance.name}:T={data.horizon}")
    _add_variables(m, data, idx)
    _add_link_use(m, data, idx)
    _add_storage(m, data, idx)
    _add_arrivals(m, data, idx)
    _add_capacity(m, data)
    m.arrivals = pe.Objective(expr=sum(m.hold[c, d, t] for c, d, t in m.HOLD if t == data.horizon) + 0,
                              sense=pe.maximize, doc="units of (chunk, destination) flow arrived by the horizon")
    return expose(m, TenModel(data=data, sent=m.sent, hold=m.hold, objective="arrivals"))


def _add_variables(m: pe.ConcreteModel, data: TenData, idx: FlowIndex) -> None:
    T = data.horizon
    trip = sorted(set(zip(idx.chunk.tolist(), idx.pair.tolist(), idx.step.tolist())))
    into = data.dst[idx.pair] == idx.dest
    first: dict[tuple[int, int], int] = {}
    for c, d, t in zip(idx.chunk[into].tolist(), idx.dest[into].tolist(), idx.step[into].tolist()):
        first[(c, d)] = min(t, first.get((c, d), t))
    hold = [(c, d, t) for (c, d), lo in sorted(first.items()) for t in range(lo, T + 1)]
    # SETS
    m.FLOW = pe.RangeSet(0, len(idx) - 1, doc="flow rows (chunk, destination, link pair, arrival)")
    m.SENT = pe.Set(initialize=trip, dimen=3, ordered=False, doc="(chunk, link pair, arrival timestep)")
    m.HOLD = pe.Set(initialize=hold, dimen=3, ordered=False, doc="(chunk, destination, timestep)")
    # VARIABLES
    m.flow = pe.Var(m.FLOW, domain=pe.UnitInterval, doc="part of a destination's unit crossing a link pair")
    m.sent = pe.Var(m.SENT, domain=pe.UnitInterval, doc="part of a chunk crossing a link pair (paid once)")
    m.hold = pe.Var(m.HOLD, domain=pe.UnitInterval, doc="part of a destination's unit arrived by the end of t")


def _add_link_use(m: pe.ConcreteModel, data: TenData, idx: FlowIndex) -> None:
    c, l, t = idx.chunk.tolist(), idx.pair.tolist(), idx.step.tolist()
    m.ineq_link_use = pe.Constraint(
        m.FLOW, rule=lambda m, i: m.sent[c[i], l[i], t[i]] >= m.flow[i],
        doc="a piece crossing a link pair serves every destination behind it: sent >= each destination flow")


def _add_storage(m: pe.ConcreteModel, data: TenData, idx: FlowIndex) -> None:
    """At an intermediate node, a flow leaves by the end of tau at most what arrived by then."""
    k = data.lag[data.group[idx.chunk], idx.pair]  # leaving u at the end of t - k (see reach)
    u, v = data.src[idx.pair], data.dst[idx.pair]
    out: dict[tuple[int, int, int], list] = {}
    inn: dict[tuple[int, int, int], list] = {}
    for i, (c, d, a, b, t, kk) in enumerate(zip(idx.chunk.tolist(), idx.dest.tolist(), u.tolist(), v.tolist(),
                                               idx.step.tolist(), k.tolist())):
        if not data.pre[c, a]:
            out.setdefault((c, d, a), []).append((t - kk, i))
        if b != d:
            inn.setdefault((c, d, b), []).append((t, i))
    rows = []  # (out rows leaving by tau, in rows arriving by tau; at a switch: at tau)
    for key, leaving in out.items():
        leaving.sort()
        arriving = sorted(inn.get(key, []))
        now = bool(data.switch[key[2]])
        for tau in sorted({x for x, _ in leaving}):
            rows.append(([i for x, i in leaving if x == tau or (x < tau and not now)],
                         [i for x, i in arriving if x == tau or (x < tau and not now)]))
    m.STORE = pe.RangeSet(0, len(rows) - 1, doc="(flow, intermediate node, departure timestep)")
    m.ineq_flow_storage = pe.Constraint(
        m.STORE, rule=lambda m, j: sum(m.flow[i] for i in rows[j][0]) <= sum(m.flow[i] for i in rows[j][1]) + 0,
        doc="a flow leaves an intermediate node by the end of tau at most what arrived there by then")


def _add_arrivals(m: pe.ConcreteModel, data: TenData, idx: FlowIndex) -> None:
    into = np.flatnonzero(data.dst[idx.pair] == idx.dest)
    arr: dict[tuple[int, int, int], list] = {}
    for i in into.tolist():
        arr.setdefault((int(idx.chunk[i]), int(idx.dest[i]), int(idx.step[i])), []).append(i)

    def _update(m, c, d, t):
        before = m.hold[c, d, t - 1] if (c, d, t - 1) in m.HOLD else 0
        return m.hold[c, d, t] == before + sum(m.flow[i] for i in arr.get((c, d, t), ()))

    m.eq_arrivals = pe.Constraint(m.HOLD, rule=_update,
                                  doc="a destination's unit arrived by t: by t-1 plus what arrives at t")


def _add_capacity(m: pe.ConcreteModel, data: TenData) -> None:
    occupancy: dict[tuple[int, int], list] = {}
    for c, l, t in m.SENT:
        first, last = data.occupied(int(data.group[c]), l, t)  # before the latency, if any
        for tau in range(int(first), int(last) + 1):
            occupancy.setdefault((l, tau), []).append((c, l, t))
    busy = sorted(key for key, v in occupancy.items() if len(v) > int(data.capacity[key[0]]))
    m.BUSY = pe.Set(initialize=busy, dimen=2, doc="(link pair, timestep) that could be over-used")
    m.ineq_link_capacity = pe.Constraint(
        m.BUSY, rule=lambda m, l, tau: sum(m.sent[i] for i in occupancy[(l, tau)]) <= int(data.capacity[l]),
        doc="at most `capacity` chunks occupy a link pair in any timestep (multi-timestep arcs count every timestep)")


def bound(model):
    """Lower bound on timesteps proven by the solved flow LP: its horizon when every
    (chunk, destination) unit arrives, else the horizon + 1 (module doc: validity)."""
    return ten_lp.bound(model)


def extract(model) -> Schedule:
    """A verified-completable schedule realising the solved LP's ``sent`` amounts (the hold/sent
    LP's walk and repair, :func:`collsynth.formulations.ten_lp.extract`)."""
    return ten_lp.extract(model)


def schedules(model, recover) -> list[tuple[str, Schedule, int]]:
    """Schedules realising the solved flow LP's ``sent`` amounts, completed by repair or by
    shortest-path recovery (:func:`collsynth.formulations.ten_lp.schedules`)."""
    return ten_lp.schedules(model, recover)


refine = ten_lp.polish  # re-aim a complete solved LP at little, early traffic before realising it


def flows(model) -> list[tuple[int, int, int, int, float]]:
    """The solved model's flows ``(chunk, destination, link pair, arrival, amount)`` above 1e-6."""
    data = ten_model(model).data
    idx = flow_index(data)
    return [(int(idx.chunk[i]), int(idx.dest[i]), int(idx.pair[i]), int(idx.step[i]), float(v.value))
            for i, v in model.flow.items() if v.value is not None and v.value > 1e-6]


__all__ = ["NAME", "build", "extract", "bound", "schedules", "refine", "flow_index", "size", "flows", "FlowIndex"]
