"""The bounds of an instance: every argument per cost model, computed once per process (:func:`instance_bounds`).

Part of :mod:`collsynth.tens.bounds` (its module documentation describes every argument).
"""

from __future__ import annotations

import copy
import hashlib
import math
from dataclasses import replace
from functools import cached_property

import numpy as np

from ...instances.instance import Instance
from ...instances.switch_ops import copying_mask, switch_reductions
from ..ten import NotSupported, discretize, latency_pipelined, link_delays, link_latency, occupancy_costs, prepare
from .arrivals import ARRIVAL_BUDGET_S, _too_many_cells, arrival_bound
from .blocks import block_cut_seconds
from .box_rows import box_demand
from .cuts import cut_search, per_node
from .demand import Arcs, Demand, arcs_of, demand_of, instant_out
from .distances import _alpha_weights, _distance_bound, _volume_bound, release_paths
from .drain import drain_bound
from .flows import flow_seconds
from .box_stages import box_stage_bound
from .group_crossings import group_crossing_bound
from .injections import injection_bound
from .partitions import partition_bound
from .ramp import ramp_bound
from .reducing import combining_arrivals, reducing_cut_seconds
from .rooted_depth import rooted_depth_bound
from .record import Bound, CUT_BUDGET_S, MODELS, PARTS, UNITS, best, not_computed
from .supply import EventSupply, PieceSupply, SyncSupply, TimestepSupply
from .symmetric import RowOrbits, orbit_demand, representative_nodes, row_orbits

SYNC_STEPS = {  # the step arguments of :attr:`Bounds.sync`, each computed on its first use
    # (:meth:`Bounds.settled` reports those not computed); looked up when called, so a test may replace one
    "sync_drain": lambda instance, lat, bw: drain_bound(instance, lat, bw),
    "sync_ramp": lambda instance, lat, bw: ramp_bound(instance, lat, bw),
    "sync_injections": lambda instance, lat, bw: injection_bound(instance, lat, bw),
    "sync_box_stages": lambda instance, lat, bw: box_stage_bound(instance, lat, bw),
    "sync_group_crossings": lambda instance, lat, bw: group_crossing_bound(instance, lat, bw),
    "sync_rooted_depth": lambda instance, lat, bw: rooted_depth_bound(instance, lat, bw)}


# ---- the bounds of an instance ---------------------------------------------------------------

class Bounds:
    """The best bound of every model for one instance, and every argument tried (``parts``).

    Each model is computed on first use (a caller that needs only TEN timesteps pays for
    nothing else). ``timestep_s`` is the TEN's timestep (what ``timesteps`` counts),
    ``ten_timestep_s`` the TEN cost model's (what the ``ten`` seconds are multiples of).
    """

    def __init__(self, instance: Instance, timestep: float | None, budget_s: float,
                 ten_timestep: float | None = None):
        self.instance, self.timestep, self.budget_s = instance, timestep, budget_s
        self.ten_timestep = ten_timestep
        self._parts: dict[str, tuple[Bound, ...]] = {}
        self.timestep_s: float | None = None
        self.ten_timestep_s: float | None = None

    @cached_property
    def _box(self) -> tuple[Demand, RowOrbits] | None:
        """The rows touching one box and their orbits, where they stand for a demand too big
        to list (:mod:`.box_rows`)."""
        return box_demand(self.instance)

    @cached_property
    def _arcs_demand(self) -> tuple[Arcs, Demand]:
        return arcs_of(self.instance.topology), self._box[0] if self._box else demand_of(self.instance)

    @cached_property
    def _orbits(self) -> RowOrbits | None:
        """The demand's rows and nodes up to the box shifts, where it is invariant under them
        (:mod:`.symmetric`: one box's rows and nodes stand for all)."""
        return self._box[1] if self._box else row_orbits(self.instance.topology, self._arcs_demand[1])

    @cached_property
    def _symmetry(self) -> "_Symmetry":
        return _Symmetry.of(self.instance, self._arcs_demand[1], self._orbits)

    def _get(self, name: str) -> tuple[Bound, ...]:
        if name not in self._parts:
            arcs, demand = self._arcs_demand
            sym = self._symmetry
            if name == "timesteps":
                parts, self.timestep_s = _timesteps_parts(self.instance, arcs, demand, self.timestep, self.budget_s,
                                                          sym)
                self._parts[name] = tuple(parts)
            elif name == "ten":
                parts, self.ten_timestep_s = _ten_parts(self.instance, arcs, demand, self.budget_s, self.ten_timestep,
                                                        sym)
                self._parts[name] = tuple(parts)
            elif name in ("event", "sync_latency", "sync_bandwidth"):
                event, lat, bw = _seconds_parts(self.instance, arcs, demand, self.budget_s, sym)
                self._parts.update(event=tuple(event), sync_latency=tuple(lat), sync_bandwidth=tuple(bw))
            elif name == "steps":
                hops = 1 - instant_out(self.instance.topology).astype(np.int64)
                self._parts[name] = (_distance_bound("steps", arcs, sym.far, hops),)
            else:
                raise KeyError(name)
            release_paths()  # the distance matrices it read: compact, or gone, once it is done
        return self._parts[name]

    @property
    def timesteps(self) -> Bound:
        """TEN timesteps of capacity-respecting schedules."""
        return best(self._get("timesteps"), "timesteps")

    @property
    def ten(self) -> Bound:
        """Seconds under the TEN cost model."""
        return best(self._get("ten"), "ten")

    @property
    def event(self) -> Bound:
        """Seconds under the event simulation."""
        return best(self._get("event"), "event")

    @property
    def sync(self) -> Bound:
        """Seconds under the synchronous alpha-beta model: latency plus bandwidth bound, or a
        box's entry steps and drain (:mod:`.drain`), or the steps against a node's ramp
        (:mod:`.ramp`), or an allreduce's crossings into boxes through switches that copy
        nothing (:mod:`.injections`), with the boxes' reduction before them and spread after
        (:mod:`.box_stages`) and the crossings between groups of boxes their fabric steps apart
        (:mod:`.group_crossings`), or a rooted reduce's pipeline depth (:mod:`.rooted_depth`),
        where larger. It bounds schedules whose sends are on links
        (routing ``links``: tree packing's, the TEN producers', the compact forms'); a routed
        schedule's bound is :attr:`sync_routed`."""
        lat, bw = self.part("sync_latency"), self.part("sync_bandwidth")
        for name, argument in SYNC_STEPS.items():
            if name not in self._parts:
                self._parts[name] = (argument(self.instance, lat, bw),)
        return best([_sync_total(lat, bw), *(self._parts[name][0] for name in SYNC_STEPS)], "sync")

    @property
    def sync_routed(self) -> Bound:
        """Seconds under the synchronous model of schedules routed on shortest paths
        (``routing = "shortest-path"``), whose sends cross a switch in the step they leave:
        latency plus bandwidth bound alone (the drain and ramp arguments need a switch to
        forward in the step after the one that brought the piece)."""
        return _sync_total(self.part("sync_latency"), self.part("sync_bandwidth"))

    @property
    def steps(self) -> Bound:
        """Steps (hop distance) of schedules sent on links."""
        return self._get("steps")[0]

    @property
    def parts(self) -> dict[str, tuple[Bound, ...]]:
        """Every argument tried, per model (``sync_latency`` and ``sync_bandwidth`` for sync)."""
        for name in PARTS:
            self._get(name)
        return dict(self._parts)

    def settled(self, why: str) -> "Bounds":
        """A copy whose models not computed yet are reported as not computed, ``why`` (a run
        whose bounds stage ran out of time); this object keeps computing them when asked."""
        out = copy.copy(self)
        out._parts = dict(self._parts)
        for name in PARTS + tuple(SYNC_STEPS):
            model = "sync" if name.startswith("sync_") else name
            out._parts.setdefault(name, (not_computed(model, "none", why),))
        return out

    def computed_state(self) -> dict:
        """What has been computed so far, as plain picklable data: the parts per model and
        the timesteps they count in (for :meth:`adopt` in another process)."""
        return {"parts": dict(self._parts), "timestep_s": self.timestep_s, "ten_timestep_s": self.ten_timestep_s}

    def complete(self) -> bool:
        """Whether every model's parts have been computed."""
        return all(name in self._parts for name in PARTS)

    def adopt(self, state: dict) -> None:
        """Take the parts another process computed for this instance (``state`` from its
        :meth:`computed_state`); parts this object has already computed are kept."""
        for name, parts in state["parts"].items():
            self._parts.setdefault(name, tuple(parts))
        if self.timestep_s is None:
            self.timestep_s = state["timestep_s"]
        if self.ten_timestep_s is None:
            self.ten_timestep_s = state["ten_timestep_s"]

    def of(self, model: str) -> Bound:
        """The best bound of ``model`` (one of :data:`MODELS` or ``steps``)."""
        return getattr(self, model)

    def part(self, name: str, source: str | None = None) -> Bound:
        """The best of the parts ``name`` (a model, ``sync_latency`` or ``sync_bandwidth``),
        or of those with ``source`` (e.g. ``inbound``)."""
        parts = [b for b in self._get(name) if source is None or b.source == source]
        return best(parts, name if name in MODELS else "sync")

    def as_dict(self) -> dict:
        """Plain JSON: the best bound per model and every part."""
        return {"best": {m: self.of(m).as_dict() for m in MODELS + ("steps",)},
                "parts": {m: [b.as_dict() for b in bs] for m, bs in self.parts.items()},
                "timestep_s": self.timestep_s, "ten_timestep_s": self.ten_timestep_s}


def _roots(instance: Instance) -> list[int]:
    return [c.root for c in instance.collectives if c.root is not None]


class _Symmetry:
    """What the distance, volume and per-node arguments read: ``far``, the demand rows whose
    maximum and volume are the whole demand's (the representatives, scaled, on identical
    boxes; else every row), and ``nodes``, the nodes whose per-node bounds stand for all
    (None: every node)."""

    def __init__(self, far: Demand, nodes: np.ndarray | None):
        self.far, self.nodes = far, nodes

    @staticmethod
    def of(instance: Instance, demand: Demand, orbits: RowOrbits | None) -> "_Symmetry":
        if orbits is None:
            return _Symmetry(demand, None)
        return _Symmetry(orbit_demand(demand, orbits), representative_nodes(instance.topology, orbits))


def _cut_parts(model: str, arcs: Arcs, demand: Demand, weight: np.ndarray, supply, first,
               budget_s: float, convert=lambda p: p, inner: np.ndarray | None = None,
               nodes: np.ndarray | None = None) -> list[Bound]:
    """The per-node bound (at ``nodes``, default every node) and the cut bound of one model
    (values through ``convert``; ``inner``: arc lengths for :func:`inner_distance`)."""
    units = UNITS[model]
    v, name, node = per_node(arcs, demand, weight, supply, nodes)
    if not math.isfinite(v):
        return [not_computed(model, name, f"nothing enters the set of node {node}")]
    out = [Bound(convert(v), units, model, name, None if node is None else f"v={node}")]
    p, wit, extra, why = cut_search(arcs, demand, weight, supply, v, None, first=first, budget_s=budget_s,
                                    inner=inner)
    if why is not None:
        return out + [not_computed(model, "cut", why)]
    if wit is not None and p > v:
        note = f"{convert(p - extra)} to cross into S, then {convert(extra)} inside it" if extra else ""
        out.append(Bound(convert(p), units, model, "cut", wit, note))
    return out


def _timesteps_parts(instance: Instance, arcs: Arcs, demand: Demand, timestep,
                     budget_s, sym: _Symmetry) -> tuple[list[Bound], float | None]:
    """Distance (per collective, its delays), per-node and cut bounds in TEN timesteps."""
    try:
        delay, cap, f = link_delays(instance.topology, [c.chunk_bytes for c in instance.collectives], timestep,
                                    switches=True)
    except NotSupported as e:
        return [not_computed("timesteps", "ten", str(e))], None
    parts = []
    latency = link_latency(instance.topology, f)
    lag = delay + latency[None, :] - instant_out(instance.topology)[None, :]  # path lengths (module doc)
    for g in range(delay.shape[0]):
        rows = np.flatnonzero(sym.far.group == g)
        parts.append(_distance_bound("timesteps", arcs, sym.far.select(rows), lag[g]))
    kmin = delay.min(axis=0)
    first = _roots(instance)
    supply = TimestepSupply(cap, kmin, latency)
    parts += _cut_parts("timesteps", arcs, demand, demand.count.astype(float), supply, first, budget_s, int,
                        lag.min(axis=0), sym.nodes)
    parts.append(_volume_bound("timesteps", arcs, sym.far, sym.far.count.astype(float), supply, int, kmin, cap))
    parts += [argument(instance, supply, "timesteps", int) for argument in COMBINING_ARGUMENTS]
    C, S = sum(c.num_chunks for c in instance.collectives), instance.topology.size
    try:
        if (refused := _too_many_cells(C, S)) is not None:  # said before the TEN's data is built
            parts.append(refused)
        else:
            data = prepare(instance, 1, None, timestep, switch_copy=True, native=True)
            parts.append(arrival_bound(data, min(budget_s, ARRIVAL_BUDGET_S)))
    except NotSupported as e:
        parts.append(not_computed("timesteps", "arrivals", str(e)))
    if (delay != kmin).any():  # concurrent chunk sizes: each collective alone, its own delays
        for g in range(delay.shape[0]):
            sub = demand.select(np.flatnonzero(demand.group == g))
            parts += _cut_parts("timesteps", arcs, sub, sub.count.astype(float),
                                TimestepSupply(cap, delay[g], latency), first, budget_s, int, lag[g])
    return parts, f


def _ten_parts(instance: Instance, arcs: Arcs, demand: Demand, budget_s,
               timestep: float | None, sym: _Symmetry) -> tuple[list[Bound], float]:
    """Bounds under the TEN cost model: timestep ``f`` of its pricing (``timestep``, else the
    cheapest link's cost for the largest chunk), pieces of any size (:class:`PieceSupply`)."""
    cb = max(c.chunk_bytes for c in instance.collectives)
    topo = instance.topology
    f = float(timestep) if timestep is not None else float(occupancy_costs(topo, cb).min())
    if latency_pipelined(topo):  # a hop: at least one timestep on the link, then its latency
        kmin = 1 + link_latency(topo, f)
        arcs = replace(arcs, alpha=np.zeros(len(arcs.alpha)))  # pieces occupy a link for y / b only
    else:
        kmin = discretize(arcs.alpha, f)  # a tiny piece still needs ceil(alpha / f) timesteps
    supply = PieceSupply(arcs, f, cb)  # pipelined: by T, not T - L (larger, so still a bound)
    parts = [_distance_bound("ten", arcs, sym.far, kmin, f)]
    parts += _cut_parts("ten", arcs, demand, demand.nbytes, supply, _roots(instance), budget_s, lambda T: T * f, kmin,
                        sym.nodes)
    parts.append(_volume_bound("ten", arcs, sym.far, sym.far.nbytes, supply, lambda T: T * f))
    parts += [argument(instance, supply, "ten", lambda T: T * f) for argument in COMBINING_ARGUMENTS]
    return parts, f


def _seconds_parts(instance: Instance, arcs: Arcs, demand: Demand, budget_s,
                   sym: _Symmetry) -> tuple[list, list, Bound]:
    """Event-model parts and the sync model's latency and bandwidth parts."""
    w, slack = _alpha_weights(arcs)
    w = np.where(instant_out(instance.topology), slack / max(1, arcs.size), w)  # in the step it arrived: no latency
    lat = _distance_bound("event", arcs, sym.far, w)
    if lat.computed:
        lat = Bound(max(0.0, lat.value - slack), "s", "event", "distance", lat.witness)
    first = _roots(instance)
    event = [lat] + _cut_parts("event", arcs, demand, demand.nbytes, EventSupply(arcs), first, budget_s,
                               inner=np.maximum(arcs.alpha, 0.0), nodes=sym.nodes)
    event.append(_volume_bound("event", arcs, sym.far, sym.far.nbytes, EventSupply(arcs)))
    sync_lat = Bound(lat.value, "s", "sync", "distance", lat.witness, lat.note)
    sync_bw = _cut_parts("sync", arcs, demand, demand.nbytes, SyncSupply(arcs), first, budget_s, nodes=sym.nodes)
    sync_bw.append(_volume_bound("sync", arcs, sym.far, sym.far.nbytes, SyncSupply(arcs)))
    for seconds in (forest_seconds(instance), flow_seconds(instance, budget_s), reducing_cut_seconds(instance),
                    block_cut_seconds(instance)):
        event.append(_as_model(seconds, "event"))
        sync_bw.append(_as_model(seconds, "sync"))
    for argument in COMBINING_ARGUMENTS:
        event.append(argument(instance, EventSupply(arcs), "event"))
        sync_bw.append(argument(instance, SyncSupply(arcs), "sync"))
    return event, [sync_lat], sync_bw


# Bounds of combining collectives beyond the cut: ``argument(instance, supply, model, convert) ->
# Bound`` under one cost model (``supply`` its links' delivery, ``convert`` its time to the
# model's units), each saying itself (not computed) where its switches' assumption fails: the
# partition bound holds with reducing switches inside its regions; the combining arrivals count TEN
# timesteps only.
COMBINING_ARGUMENTS = (partition_bound, combining_arrivals)


FOREST_KINDS = {"allgather": False, "broadcast": False, "reduce_scatter": True, "reduce": True,  # kind: transposed
                "allreduce": True}  # an allreduce also reduce-scatters: its reduce-scatter's optimum bounds it
FOREST_CELLS = 4_000_000  # compute nodes tested (one per orbit on identical boxes) x links above which the exact
# cut optimum is not computed (time)


def forest_seconds(instance: Instance) -> Bound:
    """The exact cut optimum of an allgather, broadcast, reduce-scatter or reduce as a bound in
    seconds (bytes over bandwidth; latency only adds): ``(M / N) max_S |S ∩ Vc| / B+(S)``
    (broadcast: ``M / B+(S)`` over sets holding the root; allreduce: its reduce-scatter's, as
    every allreduce schedule also reduce-scatters), found by max-flow
    (:func:`collsynth.tens.cut_optimum.optimum`; Zhao et al., "ForestColl", arXiv 2402.06787,
    Section 4); reduce-scatter and reduce on the transposed network (a schedule's time reversal
    loads the reversed links equally). The witness set is re-priced with the links' own
    bandwidths, so the value is a bound whatever the flow's integer rounding. Its model is
    ``event`` (:func:`_as_model` renames it).
    """
    from ..cut_optimum import FlowTooLarge, cut_seconds, flow_net, optimum

    if instance.concurrent or instance.collective.kind not in FOREST_KINDS:
        return not_computed("event", "forest", "only a single allgather, broadcast, reduce-scatter, reduce or allreduce")
    coll, topo = instance.collective, instance.topology
    weight = [1] * len(coll.nodes) if coll.kind in ("allgather", "reduce_scatter", "allreduce") else \
        [int(v == coll.root) for v in coll.nodes]
    net = flow_net(topo, coll.nodes, weight, transpose=FOREST_KINDS[coll.kind])
    if len(net.sinks) * max(1, topo.num_links) > FOREST_CELLS:  # one max flow per sink (per orbit on boxes)
        return not_computed("event", "forest", f"more than {FOREST_CELLS:,} compute nodes tested x links")
    try:
        opt = optimum(net)
    except (FlowTooLarge, ValueError) as e:
        return not_computed("event", "forest", str(e))
    value = cut_seconds(net, opt.witness, coll.chunk_bytes * coll.chunks_per_node)
    return Bound(value, "s", "event", "forest", opt.witness, f"exact cut optimum tau = {opt.tau} (k = {opt.k})")


def _as_model(bound: Bound, model: str) -> Bound:
    """``bound`` under ``model`` (a bytes-over-bandwidth bound holds in every seconds model)."""
    return replace(bound, model=model)


def _sync_total(latency: Bound, bandwidth: Bound) -> Bound:
    """``T_L >= latency`` and ``T_B >= bandwidth`` separately, so the sum bounds ``T_L + T_B``.

    The synchronous price of a schedule of ``S`` steps (Zhao et al., NSDI 2025, Section 3.2)
    is ``sum_t (a_t + b_t)``, with ``a_t`` the largest latency of a link used in step ``t`` and
    ``b_t`` the largest ``bytes_l / bandwidth_l`` over the links ``l`` it loads.

    Latency: take the needed (chunk, node) pair of the ``distance`` witness, whose nearest
    holder is ``L`` away in latency. The piece reaching the node travels a path of hops
    ``h_1 .. h_m`` sent in steps ``t_1 < .. < t_m`` (a hop leaves a node only after the step
    that brought the piece there), so ``sum_t a_t >= sum_i a_{t_i} >= sum_i alpha(h_i) >= L``
    (an instant switch hop counts nothing and adds no step: the ``instant_out`` weights). In
    particular ``S`` is at least the hop eccentricity ``D`` and ``T_L >= D min alpha``: ``L``
    includes that, as every path to the witness has at least ``D`` hops of at least the
    least latency each.

    Bandwidth: for a node set ``X`` whose entering links carry ``B(X)`` bytes/s in all and
    must take in ``d(X)`` bytes, the bytes entering ``X`` in step ``t`` are at most
    ``sum_{l enters X} bandwidth_l b_t = B(X) b_t``, so ``sum_t b_t >= d(X) / B(X)``; the
    best set (the ``forest`` cut optimum, Zhao et al., "ForestColl", arXiv 2402.06787,
    Section 4, or the ``cut`` / per-node / ``volume`` arguments) is ``T_B``'s bound. Both hold
    for the same schedule, so ``T >= L + T*``.

    The bound is met on a path ``x - y - z`` (links of latency ``alpha`` and bandwidth ``B``
    both ways, allgather of ``M``): step 1 sends every shard to its neighbours (``M / 3`` a
    link), step 2 forwards ``x``'s shard to ``z`` and ``z``'s to ``x`` at ``y`` (``M / 3`` a
    link): ``2 alpha + 2 M / (3 B)`` = ``L + T*`` (``L = 2 alpha``
    from ``x`` to ``z``; ``{x}`` takes in ``2 M / 3`` over its one link ``y -> x``:
    ``T* = 2 M / (3 B)``). So no valid bound of every fabric lies above it
    (``tests/test_sync_latency_bound.py``).
    """
    if not (latency.computed and bandwidth.computed):
        return Bound(None, "s", "sync", "distance+bandwidth", None,
                     f"not computed: latency {latency.note or 'ok'}; bandwidth {bandwidth.note or 'ok'}")
    return Bound(latency.value + bandwidth.value, "s", "sync", f"distance+{bandwidth.source}", bandwidth.witness,
                 f"latency {latency.value:.6g} s ({latency.label()}) + bandwidth {bandwidth.value:.6g} s "
                 f"({bandwidth.label()})")


def _fingerprint(instance: Instance, *extra) -> str:
    la = instance.topology.link_arrays
    h = hashlib.sha1()
    for a in (la.src, la.dst, la.count, la.bandwidth, la.alpha):
        h.update(np.ascontiguousarray(a).tobytes())
    topo = instance.topology
    switches = (sorted(topo.switches), topo.meta.get("switch_hop", "timestep"),  # the switch model counts too
                topo.meta.get("latency", "serial"), switch_reductions(topo),  # so do what switches compute
                np.flatnonzero(copying_mask(topo, False)).tolist(),  # declared to copy, and declared not to
                np.flatnonzero(~copying_mask(topo, True)).tolist())
    h.update(repr((topo.size, [(c.kind, c.nodes, c.root, c.chunks_per_node, c.message_bytes)
                               for c in instance.collectives], switches, extra)).encode())
    return h.hexdigest()


_CACHE: dict[str, Bounds] = {}


def instance_bounds(instance: Instance, *, timestep: float | None = None, budget_s: float = CUT_BUDGET_S,
                    ten_timestep: float | None = None) -> Bounds:
    """Every model's best lower bound for ``instance`` (each computed once per process and
    instance, when first asked for).

    ``timestep`` is the TEN timestep the ``timesteps`` bound counts in (default: the TEN's,
    the cheapest link cost), ``ten_timestep`` the one the TEN cost model prices in (default:
    its own, the cheapest link cost for the largest chunk; an instance's epoch); ``budget_s`` the time each model's min-cut search may take (a
    search that would exceed it is reported as not computed, and the per-node and distance
    bounds remain).
    """
    if timestep is not None:
        sizes = [c.chunk_bytes for c in instance.collectives]
        default = float(np.min([occupancy_costs(instance.topology, b).min() for b in sizes]))
        if abs(float(timestep) - default) <= 1e-12 * default:
            timestep = None  # the TEN's own timestep: one cache entry
    key = _fingerprint(instance, timestep, budget_s, ten_timestep)
    if key not in _CACHE:
        if len(_CACHE) >= 64:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = Bounds(instance, timestep, budget_s, ten_timestep)
    return _CACHE[key]
