"""TEN ILP with native reductions: partial sums forwarded once along reduction trees, then copies of the result.

The time-expanded network of the TACOS ILP (Won et al., "TACOS: Topology-Aware Collective
Algorithm Synthesizer for Distributed Training", MICRO 2024, Section V-A, Fig. 12) with
combining chunks modelled in their own direction instead of as the time reversal of their
non-combining dual (Zhao et al., NSDI 2025, Appendix A; TACOS Section VII-A). Liu et al.,
"Rethinking Machine Learning Collective Communication as a Multi-Commodity Flow Problem",
SIGCOMM 2024, model collectives as flows over the same kind of time-expanded network; here the
flows of a reduction merge at the nodes that add them up.

Non-combining chunks (allgather, broadcast, gather, scatter, all-to-all) are the TACOS ILP's:
``hold[c, n, t]``, ``sent[c, l, t]`` (arrival timestep ``t``), a send needs the chunk at its
source when it starts, holdings persist, at most one arrival per node.

A combining chunk (reduce, reduce_scatter, allreduce) is a partial sum. Its sends are of two
sorts, both counted in ``sent[c, l, t]`` (one link capacity for everything):

- ``partial[c, l, t]`` (the verifier's ``reduce`` op): node ``u = src[l]`` forwards its partial
  sum -- its own contribution plus every partial it received -- once: every contributor sends
  exactly once unless it is the chunk's root, a node without a contribution forwards once
  whatever it received (and sends nothing if it received nothing);
- precedence, time-indexed (``ineq_forward_after_arrivals``): no partial arrives at ``u`` at or
  after the timestep in which ``u`` starts forwarding its own, so what it forwards is complete.
  Arrival times strictly increase along forwards, so the forwards form a tree into the root;
- ``root[c, r]``: the reduction completes at one node ``r`` that needs the result (the owner for
  reduce_scatter, the root for reduce, any participant for allreduce), ``complete[c, r, t]``
  once no partial arrives there after ``t``;
- copies of the result (``sent - partial``, the verifier's ``copy`` op) leave a node only once it
  holds the result: ``hold[c, n, t]`` is "holds the fully reduced chunk", from the root's
  completion or from a copy's arrival.

So reduce, reduce_scatter and allreduce are solved directly; an allreduce chunk's copies start
as soon as that chunk's reduction is complete (no barrier between a reduce-scatter and an
allgather phase), and concurrent collectives of any mix of kinds share one model (TACOS
Section VIII-G, Table V). The model covers schedules in which every chunk is reduced along one
tree and then copied out; reductions that complete at several nodes independently (recursive
doubling's butterflies) are outside it, so for allreduce a horizon this model proves
impossible bounds its own class only; the instance's lower bound (:mod:`collsynth.tens.bounds`)
bounds every schedule, and the TEN producers report that one (and the model's in
``extra["model_bound"]``). For reduce and reduce_scatter the trees lose nothing: a reduction tree
read backwards is a broadcast tree on the transposed topology, so the optimum equals the
reversal's.

Switch nodes (kept, not unwound; combining collectives only) store nothing: what reaches one
for a chunk at the end of timestep ``t`` leaves on sends that start in ``t + 1``. A switch
that reduces (``reduce``, :mod:`collsynth.instances.switch_ops`: NVLink SHARP, InfiniBand SHARP;
Graham et al., "Scalable Hierarchical Aggregation Protocol (SHArP)", COMHPC 2016, Section 3)
is a node that combines: the partials of one group operation (one chunk, one timestep,
``group[c, w, t]``) leave as one partial sum, or the reduction completes there
(``switch_root[c, w, t]``, a root like a GPU's) and the result leaves as copies in the next
timestep, once, or once per out-link where the switch multicasts (``copy``). A switch that only
forwards relays one partial per timestep, unchanged. A copy of the result reaching a switch is
alone in its group (the switch would add it to whatever else arrives), as the verifier's group
operations require (:mod:`collsynth.tens.verify`). So NVLS-class schedules are in the model (a
4-GPU box around a reducing switch: 5 timesteps, proven optimal by the ``combining-arrivals``
bound, :func:`collsynth.tens.bounds.combining_arrivals`), and so are reductions summed in a
rail or top-level switch; a partial sum that a switch multicasts into two reductions (each box
summing, then each rail summing the boxes' sums) is outside the model, so with switch nodes, as
for allreduce, a horizon it proves impossible bounds its own class only. An instant switch hop
is refused (the verifier does not check a reduction in a switch under it).

A known schedule of a single collective (the reversal's, reduce-scatter then allgather for
allreduce) becomes a MIP start through :func:`start_from_schedule` (its ``reduce`` sends are
forwards of partial sums, the rest copies); the producer improves it with the makespan
objective when no horizon below its length completes in time.

Objective ``"arrivals"``: the postcondition pairs held at the horizon, each of which must be
(rows: the horizon search needs complete schedules only, and a horizon too short is proven
infeasible); ``"makespan"``: all pairs by the horizon, with ``done[t]`` indicators.

>>> from collsynth.instances.generators import build as topo
>>> from collsynth.instances.instance import make_instance
>>> inst = make_instance(topo("ring", {"nodes": 3, "bidirectional": False}), "reduce", root=0)
>>> m = build(inst, horizon=2)
>>> sorted(c.local_name for c in m.component_objects(pe.Var))
['complete', 'hold', 'partial', 'root', 'sent']
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyomo.core as pe

from ..instances.instance import Instance
from ..instances.switch_ops import copying_mask, reducing_mask
from ..tens import bounds
from ..tens.schedule import OP_COPY, OP_DEFAULT, OP_REDUCE, Schedule
from ..tens.ten import INF, SWITCH_COPY, NotSupported, TenData, prepare, prune, reach, schedule_from_rows
from . import OBJECTIVES, BuildTooLarge, TenModel, expose, ten_model

NAME = "ten-ilp-combining"
SUMMARY = "TEN ILP with native reductions (partial sums forwarded once; allreduce without a barrier; any mix of kinds)"
DRIVER_FAMILY = "ten"
RECOVERY_VALID = False  # shortest-path recovery would copy partial sums
WARM_START = False
NATIVE_REDUCTIONS = True
ROOTS = ("any", "owner")  # where an allreduce chunk's reduction may complete
STARTS = ("reversal", "none")  # what the producer starts a single combining collective from
SIZE_LIMIT = 400_000  # variables; a Pyomo model this large takes minutes and gigabytes to build
PARAMS = (
    ("roots", ROOTS, "owner", "allreduce: a chunk's reduction completes at its owner (default) or at any participant"),
    ("objective", OBJECTIVES, "arrivals", "arrivals (pairs held at the horizon) or makespan"),
    ("weights", list[float], None, "one weight per concurrent collective in the arrivals objective", 0),
    ("timestep", float, None, "seconds per TEN timestep (default: the cheapest link's cost per chunk)"),
    ("size_limit", int, SIZE_LIMIT, "refuse to build a model with more variables than this", 1),
    ("start", STARTS, "reversal", "a single combining collective: improve the TEN ILP's reversal schedule "
                                   "(RS + AG for allreduce) as a MIP start of the makespan model (reversal), "
                                   "or search horizons upward from the lower bound (none)"),
    ("switch_copy", bool, SWITCH_COPY, "a switch declaring neither reduce nor copy multicasts the result of a "
                                       "reduction (reducing switches multicast only when they declare copy)"),
)


def lower_bound(instance: Instance, state=None, timestep: float | None = None) -> int:
    """The instance's TEN-timestep lower bound (:func:`collsynth.tens.bounds.timesteps_bound`:
    distance, per-node, volume and cut arguments, combining kinds included); from the start
    only (this model does not resume from intermediate holdings)."""
    if state is not None:
        raise NotSupported("native reductions start from the precondition only (no time clustering)")
    return int(bounds.timesteps_bound(instance, None, timestep).value)


# ---- where the model has variables ---------------------------------------------------------

@dataclass
class CombiningIndex:
    """Variables of the model: ``hold``/``sent`` as in the TACOS ILP plus, per combining chunk,
    ``partial`` (forwards of partial sums, a subset of ``sent``), ``root`` (chunk, node) and
    ``complete`` (chunk, root, timestep). ``contributors[c]``: the nodes contributing to
    combining chunk ``c`` (those in ``combining``, the chunks reduced in the model);
    ``unreachable``: postcondition pairs of reductions no root can finish in time;
    ``switch_root``: (chunk, reducing switch, timestep) where the reduction may complete in
    that switch's group operation of the timestep (:mod:`collsynth.instances.switch_ops`)."""

    hold: list = field(default_factory=list)
    sent: list = field(default_factory=list)
    partial: list = field(default_factory=list)
    root: list = field(default_factory=list)
    complete: list = field(default_factory=list)
    contributors: dict = field(default_factory=dict)
    combining: set = field(default_factory=set)
    unreachable: int = 0
    switch_root: list = field(default_factory=list)


def _int_dist(d: np.ndarray) -> np.ndarray:
    return np.where(np.isinf(d), INF, d).astype(np.int64)


def _copy_index(data: TenData, c: int, earliest, latest, idx: CombiningIndex) -> None:
    """Sends and holdings of a non-combining chunk (TACOS ILP; reach windows of :func:`reach`)."""
    T = data.horizon
    pre = data.pre
    useful = (~pre[c]) & (earliest[c] <= T) & (latest[c] >= earliest[c])
    for n in np.flatnonzero(useful):
        idx.hold.extend((c, int(n), t) for t in range(max(1, int(earliest[c, n])), T + 1))
    k = data.delay[int(data.group[c])]
    for l in np.flatnonzero(useful[data.dst] & (pre[c, data.src] | useful[data.src])):
        v = int(data.dst[l])
        lo = max(int(earliest[c, data.src[l]]) + int(k[l]), int(earliest[c, v]), 1)
        idx.sent.extend((c, int(l), t) for t in range(lo, min(T, int(latest[c, v])) + 1))


def _reduction_index(data: TenData, c: int, contrib: np.ndarray, idx: CombiningIndex, owner: int | None,
                     reducing: np.ndarray) -> None:
    """Variables of combining chunk ``c`` (contributors ``contrib``): a partial can leave ``u``
    once some contribution can be there and is useful into ``v`` while a root can still finish
    and copy the result out; copies leave a node once a root can have finished. A root is a
    node needing the result or, in any timestep it can gather every contribution, a
    ``reducing`` switch (its group operation of that timestep sums them; the switch then
    holds nothing, so its copies leave in the next timestep)."""
    T = data.horizon
    g = int(data.group[c])
    D = _int_dist(data.dist[g])
    k = data.delay[g]
    need = np.flatnonzero(data.post[c])
    P = np.flatnonzero(contrib)
    head = D[P].max(axis=0)  # the farthest contributor's distance to each node
    ecc = D[:, need].max(axis=1)  # distance to the farthest node needing the result
    candidates = np.intersect1d(need, P) if owner is None else np.array([owner])
    candidates = np.union1d(candidates, np.flatnonzero(reducing))
    roots = [int(r) for r in candidates if head[r] + ecc[r] <= T]
    if not roots:
        idx.unreachable += len(need)
        return
    idx.combining.add(c)
    idx.contributors[c] = P
    R = np.array(roots)
    e_in = np.where(contrib, 0, D[P].min(axis=0))
    tail = (D[:, R] + ecc[R][None, :]).min(axis=1)
    efull = (head[R][:, None] + D[R]).min(axis=0)
    lfull = np.where(data.post[c], T, T - D[:, need].min(axis=1))
    sole = roots[0] if len(roots) == 1 and not reducing[roots[0]] else -1
    for r in roots:
        if reducing[r]:
            idx.switch_root.extend((c, r, t) for t in range(max(1, int(head[r])), T - int(ecc[r]) + 1))
        else:
            idx.root.append((c, r))
            idx.complete.extend((c, r, t) for t in range(max(1, int(head[r])), T + 1))
    holders = {r for r in roots if not data.switch[r]}
    for l in range(len(data.src)):
        u, v, kl = int(data.src[l]), int(data.dst[l]), int(k[l])
        if u != sole and e_in[u] < INF and tail[v] < INF:
            ts = range(max(int(e_in[u]) + kl, 1), T - int(tail[v]) + 1)
            idx.partial.extend((c, l, t) for t in ts)
        if v != sole and efull[u] < INF:
            ts = range(max(int(efull[u]) + kl, int(efull[v]), 1), int(lfull[v]) + 1)
            idx.sent.extend((c, l, t) for t in ts)
            if len(ts) and not data.switch[v]:
                holders.add(v)
    for n in sorted(holders):
        idx.hold.extend((c, n, t) for t in range(max(1, int(efull[n])), T + 1))


def index_sets(data: TenData, roots: str = "owner") -> CombiningIndex:
    """The variables :func:`build` creates (see :class:`CombiningIndex`); ``roots="owner"``
    completes each allreduce chunk at its owner (the node that owns its block) or in a
    reducing switch."""
    idx = CombiningIndex()
    reducing = reducing_mask(data.instance.topology)
    earliest, latest = reach(data)
    inst = data.instance
    for g, (coll, off) in enumerate(zip(inst.collectives, inst.chunk_offsets)):
        for j in range(coll.num_chunks):
            c = off + j
            contrib = coll.precondition[j]
            if coll.combining and contrib.sum() > 1 and (data.post[c] & ~data.pre[c]).any():
                owner = j // coll.chunks_per_node if roots == "owner" and coll.kind == "allreduce" else None
                _reduction_index(data, c, contrib, idx, owner, reducing)
            else:
                _copy_index(data, c, earliest, latest, idx)
    idx.sent = sorted(set(idx.sent) | set(idx.partial))
    return idx


# ---- the model -----------------------------------------------------------------------------

def build(instance: Instance, horizon: int, state=None, *, objective: str = "arrivals", weights=None,
          timestep: float | None = None, lookahead: int = 0, relax: bool = False, roots: str = "owner",
          size_limit: int | None = SIZE_LIMIT, switch_copy: bool = SWITCH_COPY, **params) -> pe.ConcreteModel:
    """The TEN ILP with native reductions for ``instance`` over ``horizon`` timesteps (module
    doc; Won et al., TACOS, MICRO 2024, Section V-A for the non-combining part).

    ``objective``: ``"arrivals"`` (every postcondition pair held at the horizon, a combining
    chunk where its full result is held; the weighted count is the objective) or
    ``"makespan"``. ``weights``: one per concurrent collective. ``roots``: ``"owner"`` (an
    allreduce chunk's reduction completes at the node owning its block, as in reduce-scatter;
    its copies still start as soon as it completes) or ``"any"`` (at any participant).
    ``size_limit``: refuse (:class:`~collsynth.formulations.BuildTooLarge`, saying how many) a
    model with more variables (the drivers then stop searching larger horizons). ``lookahead`` is accepted and ignored (no time clustering: ``state``
    is refused). ``relax=True`` makes every variable continuous in [0, 1]. ``switch_copy``:
    whether a switch that declares neither ``reduce`` nor ``copy`` multicasts a result (module
    doc, "Switch nodes").
    """
    if params:
        raise NotSupported(f"unknown parameter(s) {', '.join(sorted(params))}")
    if state is not None:
        raise NotSupported("native reductions start from the precondition only (no time clustering)")
    if objective not in OBJECTIVES:
        raise NotSupported(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    data = prepare(instance, horizon, None, timestep, bool(switch_copy), native=True)
    _check_switches(data)
    if data.pipelined:
        raise NotSupported("a pipelined link latency (topology latency = pipelined): this model times partial sums "
                           "by the link delay alone; use latency = serial or the dual TEN formulations")
    w = np.ones(len(instance.collectives)) if weights is None else np.asarray(weights, float)
    if len(w) != len(instance.collectives):
        raise NotSupported(f"weights: expected {len(instance.collectives)} values, got {len(w)}")
    if roots not in ROOTS:
        raise NotSupported(f"roots must be one of {', '.join(ROOTS)}, got {roots!r}")
    idx = index_sets(data, roots)
    size = len(idx.sent) + len(idx.hold) + len(idx.partial) + len(idx.complete)
    if size_limit is not None and size > int(size_limit):
        raise BuildTooLarge(f"{size} variables at horizon {data.horizon}, over size_limit={int(size_limit)} "
                           "(a coarser --param timestep=SECONDS shortens the horizon)")
    m = pe.ConcreteModel(name=f"{NAME}:{instance.name}:T={data.horizon}")
    domain = pe.UnitInterval if relax else pe.Binary
    m.hold = pe.Var(pe.Set(initialize=idx.hold, dimen=3, ordered=False), domain=domain,
                    doc="node holds the chunk (combining: its full result) at the end of timestep")
    m.sent = pe.Var(pe.Set(initialize=idx.sent, dimen=3, ordered=False), domain=domain,
                    doc="chunk crosses link pair, arriving at the end of timestep (partial sums and copies)")
    m.partial = pe.Var(pe.Set(initialize=idx.partial, dimen=3, ordered=False), domain=domain,
                       doc="the send forwards the source's partial sum (a reduction), arriving at the end of timestep")
    m.root = pe.Var(pe.Set(initialize=idx.root, dimen=2, ordered=False), domain=domain,
                    doc="the chunk's reduction completes at this node")
    m.complete = pe.Var(pe.Set(initialize=idx.complete, dimen=3, ordered=False), domain=domain,
                        doc="the root holds every contribution at the end of timestep")
    if data.has_switches:
        m.switch_root = pe.Var(pe.Set(initialize=idx.switch_root, dimen=3, ordered=False), domain=domain,
                               doc="the chunk's reduction completes in the reducing switch's group operation "
                                   "of timestep")
    H = _holding(m, data, idx)
    _add_sends(m, data, idx, H)
    _add_reductions(m, data, idx)
    _add_switch_groups(m, data, idx, copying_mask(instance.topology, bool(switch_copy)), domain)
    _add_capacity(m, data, idx)
    if objective == "arrivals":
        _add_all_held(m, data, idx)
        expr = sum(float(w[data.group[c]]) * H(c, n, data.horizon) for c, n in _needed(data))
        m.arrivals = pe.Objective(expr=expr + 0, sense=pe.maximize,
                                  doc="postcondition pairs held at the horizon (weighted per collective)")
    else:
        _add_makespan(m, data, idx, H, domain)
    return expose(m, TenModel(data=data, sent=m.sent, hold=m.hold, objective=objective))


def _needed(data: TenData) -> list[tuple[int, int]]:
    return [(int(c), int(n)) for c, n in zip(*np.nonzero(data.post & ~data.pre))]


def _holding(m, data: TenData, idx: CombiningIndex):
    """``H(c, n, t)``: the hold variable, or 1 for start holdings, 0 where it cannot hold."""
    hold_set = set(idx.hold)

    def H(c, n, t):
        if data.pre[c, n]:
            return 1
        return m.hold[c, n, t] if (c, n, t) in hold_set else 0

    return H


def _by(keys, rows):
    out: dict = {}
    for key, row in zip(keys, rows):
        out.setdefault(key, []).append(row)
    return out


def _copy_part(m, i):
    """The copy part of send ``i``: ``sent - partial`` (combining chunks) or ``sent``."""
    return m.sent[i] - m.partial[i] if i in m.partial else m.sent[i]


def _add_sends(m, data: TenData, idx: CombiningIndex, H) -> None:
    """Copies (of a non-combining chunk or of a reduction's result) leave a node that held it
    when they started; holdings persist; at most one copy of a result arrives at a node, none
    at the node where the reduction completes (it holds the result from then on, and a copy
    arriving there while a relay through a switch is carrying the result from it would change,
    in the verifier's semantics, what that relay read: :func:`collsynth.tens.verify.verify`,
    "a switch relay must read its source once")."""
    arrivals = _by([(c, int(data.dst[l]), t) for c, l, t in idx.sent], idx.sent)

    def needs_hold(m, c, l, t):
        if data.switch[data.src[l]]:  # what leaves a switch: _add_switch_groups
            return pe.Constraint.Skip
        k = int(data.delay[data.group[c], l])
        h = H(c, int(data.src[l]), t - k)
        part = _copy_part(m, (c, l, t))
        if isinstance(h, int):
            return pe.Constraint.Skip if h == 1 else part == 0
        return part <= h

    m.ineq_send_needs_hold = pe.Constraint(
        sorted(idx.sent), rule=needs_hold,
        doc="a copy leaves a node only if the node held the chunk (combining: its result) when it started")

    def update(m, c, n, t):
        came = sum(_copy_part(m, i) for i in arrivals.get((c, n, t), ()))
        done = m.complete[c, n, t] if (c, n, t) in m.complete else 0
        if c in idx.combining:
            return m.hold[c, n, t] <= H(c, n, t - 1) + done + came
        return m.hold[c, n, t] == H(c, n, t - 1) + came

    m.eq_hold_update = pe.Constraint(
        sorted(idx.hold), rule=update,
        doc="held at t iff held at t-1 or a copy arrives at t (combining: or the root completes at t)")
    into_gpus = [i for i in idx.sent if i[0] in idx.combining and not data.switch[data.dst[i[1]]]]
    once = _by([(c, int(data.dst[l])) for c, l, t in into_gpus], into_gpus)
    m.ineq_one_copy = pe.Constraint(
        sorted(once), rule=lambda m, c, n: sum(_copy_part(m, i) for i in once[(c, n)])
        + (m.root[c, n] if (c, n) in m.root else 0) <= 1,
        doc="the result of a reduction arrives at a node at most once, and never at its root")


def _add_reductions(m, data: TenData, idx: CombiningIndex) -> None:
    """Partial sums: each node forwards its partial once, after every partial routed through it
    has arrived; the reduction completes at one root, once nothing more arrives there."""
    src, dst = data.src, data.dst
    P = idx.partial
    out_of = _by([(c, int(src[l])) for c, l, t in P], P)
    per_arc = _by([(c, l) for c, l, t in P], P)
    arcs_into = _by([(c, int(dst[l])) for c, l in sorted(per_arc)], sorted(per_arc))
    roots = _by([c for c, r in idx.root], idx.root)
    in_switch = _by([c for c, w, t in idx.switch_root], idx.switch_root)
    m.ineq_partial_is_a_send = pe.Constraint(
        sorted(P), rule=lambda m, c, l, t: m.partial[c, l, t] <= m.sent[c, l, t],
        doc="a forwarded partial sum is a send")

    def forwards(c, u):
        return sum(m.partial[i] for i in out_of.get((c, u), ()))

    def arrivals(c, l):
        return sum(m.partial[i] for i in per_arc[(c, l)])

    once, relay_in, relay_out = [], [], []
    for c in sorted(idx.combining):
        contrib = set(int(u) for u in idx.contributors[c])
        reduced = (sum(m.root[i] for i in roots.get(c, ()))  # 1 when chunk c is reduced at all
                   + sum(m.switch_root[i] for i in in_switch.get(c, ())))
        for u in np.flatnonzero(~data.switch).tolist():  # switches: _add_switch_groups
            r = m.root[c, u] if (c, u) in m.root else 0
            if u in contrib:
                once.append(forwards(c, u) + r == reduced)
            elif (c, u) in out_of or (c, u) in arcs_into:
                relay_in.extend(a <= forwards(c, u) for _, l in arcs_into.get((c, u), ())
                                for a in _apart(m, data, per_arc, c, l))
                relay_out.append(forwards(c, u) <= sum(arrivals(c, l) for _, l in arcs_into.get((c, u), ())))
    m.eq_forward_once = pe.Constraint(pe.Any, noruleinit=True,
                                      doc="a contributor forwards its partial once, unless it is the root")
    for i, e in enumerate(once):
        m.eq_forward_once[i] = e
    m.ineq_relay_forwards = pe.Constraint(pe.Any, noruleinit=True,
                                          doc="a node without a contribution forwards what it received, once")
    for i, e in enumerate(relay_in + [e for e in relay_out if not isinstance(e, bool)]):
        m.ineq_relay_forwards[i] = e
    m.eq_one_root = pe.Constraint(sorted(set(roots) | set(in_switch)),
                                  rule=lambda m, c: sum(m.root[i] for i in roots.get(c, ()))
                                  + sum(m.switch_root[i] for i in in_switch.get(c, ())) <= 1,
                                  doc="one root (a node, or a reducing switch's group operation) per chunk")
    _add_precedence(m, data, idx, out_of, per_arc, arcs_into)

    def completion(m, c, r, t):
        return m.complete[c, r, t] <= m.root[c, r]

    m.ineq_complete_at_root = pe.Constraint(sorted(idx.complete), rule=completion,
                                            doc="only the root completes the reduction")
    rows = []
    for c, r, t in idx.complete:
        for _, l in arcs_into.get((c, r), ()):
            later = [i for i in per_arc[(c, l)] if i[2] > t]
            if later:
                rows.extend(m.complete[c, r, t] + a <= 1 for a in _apart(m, data, {(c, l): later}, c, l))
    m.ineq_complete_after_arrivals = pe.Constraint(pe.Any, noruleinit=True,
                                                   doc="complete at t only if no partial arrives at the root after t")
    for i, e in enumerate(rows):
        m.ineq_complete_after_arrivals[i] = e


def _check_switches(data: TenData) -> None:
    """Refuse switch nodes this model does not time: with a non-combining collective (its
    copies would need holdings at the switch: use ten-ilp) or an instant switch-to-NPU hop
    (the verifier does not check reductions in a switch under it)."""
    if not data.has_switches:
        return
    if not _combining_chunks(data).all():
        raise NotSupported("switch nodes with a non-combining collective: use ten-ilp (switch nodes that copy)")
    if data.switch_instant:
        raise NotSupported("an instant switch hop (topology switch_hop = instant) with a reduction through a switch: "
                           "use switch_hop = timestep")


def _switch_sends(data: TenData, keys) -> tuple[dict, dict]:
    """Sends ``(c, l, t)`` into and out of switch nodes by the switch's group operation they
    belong to: ``(into, out)``, ``into[(c, w, t)]`` the sends arriving at switch ``w`` at the
    end of ``t`` and ``out[(c, w, t)]`` those leaving it in ``t + 1`` (they forward what
    arrived at the end of ``t``; the arrival of a send over a pair of delay ``k`` is ``k``
    timesteps after its group)."""
    into, out = {}, {}
    for i in keys:
        c, l, t = i
        u, v = int(data.src[l]), int(data.dst[l])
        if data.switch[v]:
            into.setdefault((c, v, t), []).append(i)
        if data.switch[u]:
            out.setdefault((c, u, t - int(data.delay[data.group[c], l])), []).append(i)
    return into, out


def _add_switch_groups(m, data: TenData, idx: CombiningIndex, copies: np.ndarray, domain) -> None:
    """Switch nodes store nothing: what arrives for a chunk at the end of ``t`` leaves on sends
    that start in ``t + 1``. A reducing switch sums the partials of one group operation into
    one, which leaves once (``group[c, w, t]``) unless the reduction completes there
    (``switch_root``); a switch that only forwards relays a partial, one per timestep (the
    verifier pairs the j-th forward with the j-th arrival, so with several the model could
    not say which goes where). A copy of the
    result that reaches a switch is alone in its group (it would be added to what else
    arrives) and leaves once, or once per link where the switch multicasts (``copies``), as
    does a result completed in the switch."""
    if not data.has_switches:
        return
    p_in, p_out = _switch_sends(data, idx.partial)
    c_in, c_out = _switch_sends(data, [i for i in idx.sent if i[0] in idx.combining])
    reducing = reducing_mask(data.instance.topology)
    keys = sorted(set(p_in) | set(p_out) | set(c_in) | set(c_out) | set(idx.switch_root))
    groups = sorted(k for k in p_in if reducing[k[1]])
    m.group = pe.Var(pe.Set(initialize=groups, dimen=3, ordered=False), domain=domain,
                     doc="partial sums reach the reducing switch for the chunk at the end of timestep")
    rows = []
    for key in keys:
        c, w, t = key
        came = sum(_copy_part(m, i) for i in c_in.get(key, ()))
        ins = [m.partial[i] for i in p_in.get(key, ())]
        left = sum(m.partial[i] for i in p_out.get(key, ()))
        done = m.switch_root[key] if key in m.switch_root else 0
        rows += [p + came <= 1 for p in ins]
        if reducing[w]:
            z = m.group[key] if key in m.group else 0
            rows += [p <= z for p in ins] + ([z <= sum(ins)] if ins else [])
            rows.append(left + done == z)
        else:  # one partial per group operation: which arrival a forward carries is then unambiguous
            rows += [left == sum(ins), sum(ins) <= 1]
        if c_in.get(key):
            rows.append(came <= 1)
        outs = c_out.get(key, ())
        links = _by([i[1] for i in outs], outs).values() if copies[w] else [outs]
        rows += [sum(_copy_part(m, i) for i in lk) <= done + came for lk in links]
    m.ineq_switch_group = pe.Constraint(
        pe.Any, noruleinit=True,
        doc="a switch forwards what arrived the timestep before: one sum per reducing group, each partial "
            "of a forwarding switch, a copy of the result once (or once per link where it multicasts)")
    for i, e in enumerate(e for e in rows if not isinstance(e, bool)):
        m.ineq_switch_group[i] = e


def _apart(m, data: TenData, per_arc: dict, c: int, l: int) -> list:
    """The partials ``per_arc[(c, l)]`` as rows take them: their sum, at most 1, when a node
    sends them (it forwards its partial once), else each alone (a switch may pass several)."""
    if data.switch[data.src[l]]:
        return [m.partial[i] for i in per_arc[(c, l)]]
    return [sum(m.partial[i] for i in per_arc[(c, l)])]


def _add_precedence(m, data: TenData, idx: CombiningIndex, out_of, per_arc, arcs_into) -> None:
    """Time-indexed precedence: no partial arrives at ``u`` at or after the timestep in which
    ``u`` starts forwarding its own (so it forwards everything routed through it)."""
    rows = []
    for (c, u), outs in out_of.items():
        if data.switch[u]:  # stores nothing: what leaves it is what arrived (_add_switch_groups)
            continue
        k = data.delay[data.group[c]]
        starts = sorted({t - int(k[l]) + 1 for _, l, t in outs})
        for _, l_in in arcs_into.get((c, u), ()):
            ins = per_arc[(c, l_in)]
            for tau in starts:
                late = [i for i in ins if i[2] >= tau]
                begun = [i for i in outs if i[2] - int(k[i[1]]) + 1 <= tau]
                if late and begun:
                    fwd = sum(m.partial[i] for i in begun)
                    rows.extend(a + fwd <= 1 for a in _apart(m, data, {(c, l_in): late}, c, l_in))
    m.ineq_forward_after_arrivals = pe.Constraint(
        pe.Any, noruleinit=True,
        doc="no partial arrives at a node at or after the timestep its own forward starts")
    for i, e in enumerate(rows):
        m.ineq_forward_after_arrivals[i] = e


def _add_capacity(m, data: TenData, idx: CombiningIndex) -> None:
    """At most ``capacity`` chunks (partial sums and copies alike) occupy a link pair in any
    timestep; a send over a pair of delay ``k`` occupies it ``k`` timesteps."""
    occupancy: dict = {}
    for c, l, t in idx.sent:
        k = int(data.delay[data.group[c], l])
        for tau in range(t - k + 1, t + 1):
            occupancy.setdefault((l, tau), []).append((c, l, t))
    busy = sorted(key for key, v in occupancy.items() if len(v) > int(data.capacity[key[0]]))
    m.ineq_link_capacity = pe.Constraint(
        busy, rule=lambda m, l, tau: sum(m.sent[i] for i in occupancy[(l, tau)]) <= int(data.capacity[l]),
        doc="at most `capacity` chunks occupy a link pair in any timestep")


def _add_all_held(m, data: TenData, idx: CombiningIndex) -> None:
    """Objective ``arrivals``: every postcondition pair is held at the horizon (a row), so the
    model is a feasibility problem and a horizon too short is proven infeasible. A partial
    reduction is worth nothing to a later window (this model has none, it does not resume from
    holdings), and HiGHS decides these models far faster than when it maximises arrivals."""
    T = data.horizon
    pairs = _needed(data)
    hold_set = set(idx.hold)
    m.eq_all_held = pe.Constraint(
        [(c, n) for c, n in pairs if (c, n, T) in hold_set], rule=lambda m, c, n: m.hold[c, n, T] == 1,
        doc="every postcondition pair is held at the horizon")
    if any((c, n, T) not in hold_set for c, n in pairs):
        m.unreachable = pe.Var(bounds=(0, 0), doc="pairs that cannot be held by the horizon")
        m.ineq_unreachable = pe.Constraint(expr=m.unreachable >= 1, doc="some pair cannot be held in time")


def _add_makespan(m, data: TenData, idx: CombiningIndex, H, domain) -> None:
    """Every postcondition pair is held at the horizon; ``done[t]`` indicators minimise the
    first timestep by which all are."""
    T = data.horizon
    pairs = _needed(data)
    hold_set = set(idx.hold)
    m.eq_all_arrive = pe.Constraint([(c, n) for c, n in pairs if (c, n, T) in hold_set],
                                    rule=lambda m, c, n: m.hold[c, n, T] == 1,
                                    doc="every postcondition pair is held at the horizon")
    if any((c, n, T) not in hold_set for c, n in pairs):
        m.unreachable = pe.Var(bounds=(0, 0), doc="pairs that cannot be held by the horizon")
        m.ineq_unreachable = pe.Constraint(expr=m.unreachable >= 1, doc="some pair cannot be held in time")
    m.done = pe.Var(pe.RangeSet(1, T), domain=domain, doc="every postcondition pair is held at timestep t")
    P = len(pairs)
    m.ineq_done = pe.Constraint(
        pe.RangeSet(1, T), rule=lambda m, t: P * m.done[t] <= sum(H(c, n, t) for c, n in pairs) if P else pe.Constraint.Skip,
        doc="done at t only if every pair is held at t")
    m.ineq_done_monotone = pe.Constraint(list(range(1, T)), rule=lambda m, t: m.done[t] <= m.done[t + 1],
                                         doc="done stays done")
    m.eq_done_at_horizon = pe.Constraint(expr=m.done[T] == 1, doc="done at the horizon")
    m.makespan = pe.Objective(expr=T + 1 - sum(m.done[t] for t in range(1, T + 1)), sense=pe.minimize,
                              doc="the first timestep by which every pair is held")


# ---- a known schedule as a MIP start ---------------------------------------------------------

def _rows_of(data: TenData, schedule: Schedule) -> tuple[np.ndarray, np.ndarray] | None:
    """``(chunk, pair, arrival)`` rows and op codes of ``schedule`` in the model's indexing, or
    None when it cannot be one of the model's schedules (another TEN timestep, a send off the
    model's link pairs, pieces of chunks)."""
    step = schedule.meta.get("timestep_s")
    if step is None or not np.isclose(float(step), data.timestep, rtol=1e-9) or schedule.denom != 1:
        return None
    if len(schedule) and (schedule.hi - schedule.lo != 1).any():
        return None
    pair = {(int(u), int(v)): l for l, (u, v) in enumerate(zip(data.src.tolist(), data.dst.tolist()))}
    ls = [pair.get((int(u), int(v)), -1) for u, v in zip(schedule.src.tolist(), schedule.dst.tolist())]
    if -1 in ls:
        return None
    rows = np.column_stack([schedule.chunk + data.offsets[0], ls, schedule.step]).astype(np.int64).reshape(-1, 3)
    return rows, np.asarray(schedule.op)


def start_from_schedule(model: pe.ConcreteModel, schedule: Schedule) -> dict | None:
    """Set the model's variables to a verified ``schedule`` of its instance (a MIP start).

    ``schedule`` is in the instance's direction and TEN timestep (for example reduce-scatter
    then allgather, the reversal's allreduce); its ``reduce`` sends of combining chunks are
    forwards of partial sums (``partial``), its other sends copies. A reduction's root is the
    node its partials end at, complete from the last one's arrival; holdings follow the
    arrivals of copies; ``done[t]`` (makespan objective) once every pair is held. Every other
    variable is 0. A schedule outside the model's class (a send without a variable, a
    reduction completed at a node that may not be its root) is refused: returns None and
    changes nothing. Otherwise ``{"sends", "objective"}`` (the active objective at the start).
    Single collectives only (a concurrent instance's schedule numbers chunks per collective).
    """
    view = ten_model(model)
    data = view.data
    got = _rows_of(data, schedule) if len(data.instance.collectives) == 1 else None
    if got is None:
        return None
    rows, ops = got
    comb = _combining_chunks(data)
    is_partial = comb[rows[:, 0]] & ((ops == OP_REDUCE) | (ops == OP_DEFAULT))  # a combining kind's own op reduces
    keys = [tuple(r) for r in rows.tolist()]
    if any(k not in model.sent for k in keys) or any(k not in model.partial for k, p in zip(keys, is_partial) if p):
        return None
    roots, complete = _reduction_roots(data, rows[is_partial])
    if any(k not in model.root for k in roots.items()):
        return None
    when = _arrivals(data, rows[~is_partial], roots, complete)
    values = {id(v): 0.0 for v in model.component_data_objects(pe.Var)}
    for k, p in zip(keys, is_partial):
        values[id(model.sent[k])] = 1.0
        if p:
            values[id(model.partial[k])] = 1.0
    for c, r in roots.items():
        values[id(model.root[c, r])] = 1.0
    for (c, r, t), v in model.complete.items():
        if roots.get(c) == r and t >= complete[c]:
            values[id(v)] = 1.0
    for (c, n, t), v in model.hold.items():
        if when.get((c, n), INF) <= t:
            values[id(v)] = 1.0
    if model.component("done") is not None:
        need = _needed(data)
        for t, v in model.done.items():
            if all(data.pre[c, n] or when.get((c, n), INF) <= t for c, n in need):
                values[id(v)] = 1.0
    for v in model.component_data_objects(pe.Var):
        if not v.fixed:
            v.set_value(values[id(v)])
    obj = next((float(pe.value(o)) for o in model.component_data_objects(pe.Objective, active=True)), None)
    return {"sends": len(rows), "objective": obj}


def _reduction_roots(data: TenData, partials: np.ndarray) -> tuple[dict, dict]:
    """Per combining chunk with forwarded partials: the node they end at (it receives partials
    and forwards none) and the timestep the last one arrives there."""
    roots, complete = {}, {}
    for c in np.unique(partials[:, 0]).tolist():
        mine = partials[partials[:, 0] == c]
        ends = set(data.dst[mine[:, 1]].tolist()) - set(data.src[mine[:, 1]].tolist())
        r = min(ends) if ends else -1
        roots[c] = r
        complete[c] = int(mine[data.dst[mine[:, 1]] == r, 2].max()) if ends else INF
    return roots, complete


def _arrivals(data: TenData, copies: np.ndarray, roots: dict, complete: dict) -> dict:
    """``(chunk, node) -> timestep`` from which the node holds the chunk (combining: its
    result): a reduction's root from its completion, every node from its first copy's arrival."""
    when = {(c, r): complete[c] for c, r in roots.items()}
    for c, l, t in copies[np.argsort(copies[:, 2], kind="stable")].tolist():
        when.setdefault((c, int(data.dst[l])), t)
    return when


# ---- reading a solution back -----------------------------------------------------------------

def _combining_chunks(data: TenData) -> np.ndarray:
    """Bool per chunk: its collective combines."""
    comb = np.array([c.combining for c in data.instance.collectives], bool)
    return comb[data.group]


def _useful_copies(data: TenData, c: int, partials: np.ndarray, copies: np.ndarray) -> np.ndarray:
    """The copies of combining chunk ``c`` that carry its result somewhere it is needed: from
    the root (where the partials end) once complete, first arrival per node, then copies into
    nodes that neither need the result nor pass it on dropped (to a fixed point)."""
    senders = set(data.src[partials[:, 1]].tolist())
    ends = set(data.dst[partials[:, 1]].tolist()) - senders
    if not len(copies):
        return copies
    root = ends.pop() if ends else int(np.flatnonzero(data.post[c])[0])
    into_root = partials[data.dst[partials[:, 1]] == root]
    when = {root: int(into_root[:, 2].max()) if len(into_root) else 0}
    k = data.delay[data.group[c]]
    kept = []
    for row in copies[np.argsort(copies[:, 2], kind="stable")]:
        l, t = int(row[1]), int(row[2])
        u, v = int(data.src[l]), int(data.dst[l])
        if u in when and when[u] <= t - int(k[l]) and v not in when:
            when[v] = t
            kept.append(row)
    kept = np.array(kept, np.int64).reshape(-1, 3)
    while len(kept):
        passes = set(data.src[kept[:, 1]].tolist())
        keep = np.array([bool(data.post[c, data.dst[l]]) or int(data.dst[l]) in passes for l in kept[:, 1]])
        if keep.all():
            break
        kept = kept[keep]
    return kept


def _useful_switch_copies(data: TenData, copies: np.ndarray) -> np.ndarray:
    """``copies`` less those into a switch that forwards nothing of that group operation (to a
    fixed point): what a switch does not pass on is lost (it stores nothing)."""
    k = data.delay[data.group[copies[:, 0]], copies[:, 1]] if len(copies) else np.zeros(0, np.int64)
    while len(copies):
        src, dst = data.src[copies[:, 1]], data.dst[copies[:, 1]]
        left = {(c, u, t - kk) for (c, _, t), u, kk in zip(copies.tolist(), src.tolist(), k.tolist()) if data.switch[u]}
        keep = np.array([not data.switch[v] or (c, v, t) in left
                         for (c, _, t), v in zip(copies.tolist(), dst.tolist())])
        if keep.all():
            break
        copies, k = copies[keep], k[keep]
    return copies


def extract(model: pe.ConcreteModel) -> Schedule:
    """The schedule the solved model describes: forwarded partial sums as ``reduce`` sends,
    copies of results as ``copy`` sends (the verifier's contribution sets, :mod:`collsynth.tens.verify`),
    non-combining sends pruned as in the TACOS ILP; concurrent collectives merged."""
    view = ten_model(model)
    data = view.data
    rows = view.sends()
    partial = np.array(sorted(i for i, v in model.partial.items() if v.value is not None and v.value > 0.5),
                       np.int64).reshape(-1, 3)
    comb = _combining_chunks(data)
    is_partial = {tuple(r) for r in partial.tolist()}
    plain = prune(data, rows[~comb[rows[:, 0]]]) if len(rows) else rows
    parts = [np.column_stack([plain, np.full(len(plain), OP_DEFAULT)])]
    for c in np.unique(rows[comb[rows[:, 0]], 0]) if len(rows) else ():
        mine = rows[rows[:, 0] == c]
        red = np.array([r for r in mine.tolist() if tuple(r) in is_partial], np.int64).reshape(-1, 3)
        cps = np.array([r for r in mine.tolist() if tuple(r) not in is_partial], np.int64).reshape(-1, 3)
        cps = _useful_switch_copies(data, cps) if data.has_switches else _useful_copies(data, int(c), red, cps)
        parts.append(np.column_stack([red, np.full(len(red), OP_REDUCE)]))
        parts.append(np.column_stack([cps, np.full(len(cps), OP_COPY)]))
    rows = np.concatenate(parts).reshape(-1, 4)
    return schedule_from_rows(data, rows[:, :3], NAME, ops=rows[:, 3])


def bound(model: pe.ConcreteModel):
    """No formulation-level bound (the solver's dual bound is the ILP's bound)."""
    return None
