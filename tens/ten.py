"""The time-expanded network (TEN) of a topology (Won et al., TACOS, 2023, Section IV).

A TEN copies the node set once per timestep and joins ``u`` at time ``s-1`` to ``v`` at time
``s + k - 1`` when a chunk sent over ``u -> v`` in timestep ``s`` needs ``k`` timesteps
(section IV-A); "stay" arcs ``u_t -> u_{t+1}`` let a chunk remain where it is. Heterogeneous
links are discretised (section IV-C): with a timestep (discretisation factor) ``f`` seconds, a
link of cost ``c = alpha + chunk_bytes / bandwidth`` spans ``ceil(c / f)`` timesteps. A switch
is either unwound into point-to-point links (section IV-D, :func:`unwind_switches`) or kept as
a TEN node the way TE-CCL models it (Liu et al., "Rethinking Machine Learning Collective
Communication as a Multi-Commodity Flow Problem", SIGCOMM 2024, Section 4 and its
``switch_copy`` option): a switch node stores nothing, needs nothing and is never a source or
destination of the collective; a chunk that arrives at it at the end of timestep ``t`` may only
leave on sends that start in timestep ``t + 1``. With ``switch_copy`` one arrival may leave on
several out-links (multicast); without it every send out of a switch needs an arrival of its
own (flow conservation at the switch). The switch's links are ordinary links: their bandwidth
and alpha give their delay and their parallel links their capacity (its port capacities).
The hop from a switch to an NPU is timed by the topology's ``meta["switch_hop"]``
(:func:`switch_hop_instant`): ``"timestep"`` (the default, above) or ``"instant"``, TE-CCL's
default (its ``InstanceParams.switch_to_gpu_link_on = False``: the switch-to-GPU link is
instantaneous): a chunk that arrives at a switch at the end of timestep ``t`` may leave on a
send to an NPU that starts in timestep ``t`` itself, so such a send over a link of delay ``k``
arrives ``k - 1`` timesteps after the chunk reached the switch (GPU -> switch -> GPU in one
timestep, as TE-CCL counts its epochs); the switch's out-link is still occupied for its ``k``
timesteps (its capacity binds every timestep, as TE-CCL's capacity rows on the switch-to-GPU
links do). A send from a switch to another switch always starts in timestep ``t + 1``
(:func:`instant_hops`): were it instant too, two switches linked both ways would pass a chunk
round a cycle of zero timesteps, each arrival supporting the other's send, and deliver a chunk
nobody sent (GPU -> switch -> switch -> GPU takes two timesteps, one more than through one
switch).

A link faster than the timestep carries several chunks per timestep back to back (the latency
once, then one chunk every ``chunk_bytes / b``): its capacity per timestep is its parallel links
times ``floor((f - alpha) * b / chunk_bytes)`` (TE-CCL's epoch capacity, bandwidth x epoch
duration in chunks, when the epoch is the slowest link's chunk time).

Time conventions (shared with :mod:`.schedule`): timesteps are numbered ``1..horizon``; TEN
vertex ``(v, t)`` (``t = 0..horizon``) is node ``v`` at the END of timestep ``t`` (``t = 0`` is
the precondition). Three numbers per link pair ``l`` (and chunk group ``g``) time a send:

- when it may start: in timestep ``tau + 1`` once the chunk is at the source at the end of
  ``tau`` (in ``tau`` itself over an instant switch-to-NPU hop, above);
- how long it occupies the link, ``delay[g, l] = k`` timesteps: a send that starts in ``s``
  holds one of the pair's ``capacity[l]`` slots in ``s .. s + k - 1``;
- when it arrives, ``latency[l] = L`` timesteps after it leaves the link: at the end of
  ``e = s + k - 1 + L``.

So a chunk at the source at the end of ``tau`` can be at the destination at the end of
``tau + lag`` at the earliest, ``lag = k + L`` (``k + L - 1`` over an instant switch-to-NPU
hop, :attr:`TenData.lag`), and a send arriving at the end of ``e`` occupied the link in
``e - L - k + 1 .. e - L`` (:meth:`TenData.occupied`). A send's schedule step is ``e`` (the
step in which it completes, arrival included); only arcs with ``e <= horizon`` exist.

The topology's ``meta["latency"]`` (:func:`latency_pipelined`) chooses how ``alpha`` enters:

- ``"serial"`` (the default, Won et al., TACOS, 2023, Section IV-C): a link's cost ``alpha + chunk_bytes / b``
  is its occupancy, ``k = ceil(cost / f)``, ``L = 0`` and the default timestep is the
  cheapest cost; a link faster than the timestep carries the latency once, then one chunk
  every ``chunk_bytes / b`` (above).
- ``"pipelined"``, TE-CCL's model (Liu et al., SIGCOMM 2024, Section 4; its
  ``get_alpha_num_back`` and ``get_beta_num_back``): the link is busy only for the
  transmission, ``k = ceil((chunk_bytes / b) / f)``, the latency overlaps the next chunk's
  transmission and delays the arrival by ``L = ceil(alpha / f)`` timesteps, or 0 when
  ``alpha / f`` is at most TE-CCL's ``alpha_threshold`` 0.1 (:data:`LATENCY_THRESHOLD`); the
  default timestep is the fastest transmission ``min chunk_bytes / b`` (TE-CCL's
  fastest-link epoch) and a link carries ``floor(f * b / chunk_bytes)`` chunks per timestep
  per parallel link (its bandwidth x epoch duration).

The index every TEN formulation, driver, greedy and the TEN cost model share is
:class:`TenData` (:func:`prepare`): link pairs with their delays and capacities, pre- and
postconditions over global chunk ids (of the non-combining dual on the transposed topology for
combining collectives, :func:`dual_instance`), and delay-weighted distances; :func:`reach`
bounds when a chunk can first be at a node and when it is last useful there;
:func:`schedule_from_rows` turns ``(chunk, pair, arrival)`` rows back into the user's schedule.

>>> from collsynth.instances.generators import build
>>> delay, capacity, timestep = link_delays(build("ring", {"nodes": 3, "bidirectional": False}, bandwidth=1.0, alpha=0.0), 1.0)
>>> delay.tolist(), capacity.tolist(), timestep
([[1, 1, 1]], [1, 1, 1], 1.0)
>>> piped = with_latency(build("ring", {"nodes": 3, "bidirectional": False}, bandwidth=1.0, alpha=2.0), "pipelined")
>>> link_delays(piped, 1.0)[0].tolist(), link_latency(piped, 1.0).tolist()
([[1, 1, 1]], [2, 2, 2])
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from .. import InputError
from ..instances.instance import Instance
from ..instances.topology import LATENCIES, SWITCH_HOPS, Topology, with_latency
from ..limits import checkpoint
from .schedule import Schedule, from_arrays, merge

SWITCH_COPY = True  # TE-CCL's default (its InstanceParams.switch_copy): switches multicast
REL_TOL = 1e-9  # costs within this relative distance of a multiple of the timestep round down
INF = 1 << 30  # "unreachable" in integer timestep arrays
MAX_HOP_TIMESTEPS = 1 << 20  # a chunk's hop may take at most this many timesteps (a finer timestep is refused)
LATENCY_THRESHOLD = 0.1  # pipelined latency: alpha / timestep at most this adds no timestep (TE-CCL's alpha_threshold)
BLOCK_CELLS = 1 << 23  # (chunk, node) cells of the condition tables copied between two looks at the clock


def link_costs(topology: Topology, chunk_bytes: float) -> np.ndarray:
    """Seconds to move one chunk over each directed link pair: ``alpha + chunk_bytes / b``.

    ``b`` is the bandwidth of ONE of the pair's parallel links (their summed bandwidth divided
    by their count); parallel links add capacity, not speed (Won et al., TACOS, 2023, Sections IV-A, IV-C).
    """
    la = topology.link_arrays
    per_link = la.bandwidth / np.maximum(la.count, 1)
    return la.alpha + float(chunk_bytes) / per_link


def occupancy_costs(topology: Topology, chunk_bytes: float) -> np.ndarray:
    """Seconds one chunk occupies each directed link pair: :func:`link_costs` (``alpha +
    chunk_bytes / b``), or only the transmission ``chunk_bytes / b`` when the topology's latency
    is pipelined (:func:`latency_pipelined`; the module doc).

    >>> from collsynth.instances.generators import build
    >>> t = build("ring", {"nodes": 3, "bidirectional": False}, bandwidth=2.0, alpha=1.0)
    >>> occupancy_costs(t, 4.0).tolist(), occupancy_costs(with_latency(t, "pipelined"), 4.0).tolist()
    ([3.0, 3.0, 3.0], [2.0, 2.0, 2.0])
    """
    if not latency_pipelined(topology):
        return link_costs(topology, chunk_bytes)
    la = topology.link_arrays
    return float(chunk_bytes) / (la.bandwidth / np.maximum(la.count, 1))


def latency_pipelined(topology: Topology) -> bool:
    """Whether a link's ``alpha`` only delays the arrival (``meta["latency"] == "pipelined"``,
    TE-CCL's model) instead of occupying the link with the chunk (``"serial"``, the default).
    See the module doc.

    >>> from collsynth.instances.generators import build
    >>> latency_pipelined(build("ring", {"nodes": 3}, bandwidth=1.0, alpha=0.0))
    False
    """
    return _meta_choice(topology, "latency", LATENCIES) == "pipelined"


def link_latency(topology: Topology, timestep: float) -> np.ndarray:
    """Timesteps each link pair's latency adds to an arrival after the chunk leaves the link:
    0 everywhere unless the latency is pipelined, then ``ceil(alpha / timestep)`` where
    ``alpha / timestep`` exceeds :data:`LATENCY_THRESHOLD` (TE-CCL, Liu et al., SIGCOMM 2024,
    Section 4, its ``get_alpha_num_back``), else 0.

    >>> from collsynth.instances.generators import build
    >>> t = with_latency(build("ring", {"nodes": 3, "bidirectional": False}, bandwidth=1.0, alpha=0.25), "pipelined")
    >>> link_latency(t, 0.1).tolist(), link_latency(t, 3.0).tolist()
    ([3, 3, 3], [0, 0, 0])
    """
    la = topology.link_arrays
    if not latency_pipelined(topology):
        return np.zeros(len(la), np.int64)
    ratio = la.alpha / float(timestep)
    steps = np.ceil(ratio * (1 - REL_TOL)).astype(np.int64)
    return np.where(ratio > LATENCY_THRESHOLD, steps, 0).astype(np.int64)


def discretize(cost_s: np.ndarray, timestep: float) -> np.ndarray:
    """Timesteps of each link: ``ceil(cost / timestep)`` (Won et al., TACOS, 2023, Section IV-C), at least 1.

    Costs within a relative ``1e-9`` of a multiple of the timestep are not rounded up (float
    noise such as 3 * 0.1 / 0.1 must give 3, not 4).
    """
    ratio = np.asarray(cost_s, dtype=np.float64) / float(timestep)
    return np.maximum(1, np.ceil(ratio * (1 - REL_TOL))).astype(np.int64)


def switch_hop_instant(topology: Topology) -> bool:
    """Whether a chunk leaves a switch in the timestep it arrived (``meta["switch_hop"]``).

    ``"timestep"`` (default): it leaves in the next timestep; ``"instant"``: the switch-to-NPU
    hop adds no timestep, TE-CCL's default (Liu et al., SIGCOMM 2024, Section 4; its
    ``switch_to_gpu_link_on = False``: "the link from switch to node is taken as
    instantaneous"). See the module doc.

    >>> from collsynth.instances.generators import build
    >>> switch_hop_instant(build("switch", {"nodes": 4}, bandwidth=1.0, alpha=0.0))
    False
    """
    return _meta_choice(topology, "switch_hop", SWITCH_HOPS) == "instant"


def instant_hops(topology: Topology, src=None, dst=None) -> np.ndarray:
    """bool per link ``src -> dst`` (default: the topology's link pairs): the hop is instant,
    from a live switch to an NPU when the topology's switch hop is ``"instant"`` (TE-CCL's
    ``switch_to_gpu_link_on = False``, Liu et al., SIGCOMM 2024, Section 4); a send over it may
    start in the timestep the chunk reached the switch. A switch-to-switch link is never
    instant (module doc: no cycle of zero timesteps).

    >>> from collsynth.instances.topology import from_edges
    >>> topo = from_edges(4, [(0, 2), (2, 0), (2, 3), (3, 2), (3, 1), (1, 3)], bandwidth=1.0, alpha=0.0,
    ...                   switches=[2, 3], meta={"switch_hop": "instant"})
    >>> [(int(u), int(v)) for u, v, i in zip(topo.link_arrays.src, topo.link_arrays.dst, instant_hops(topo)) if i]
    [(2, 0), (3, 1)]
    """
    la = topology.link_arrays
    src = la.src if src is None else np.asarray(src)
    dst = la.dst if dst is None else np.asarray(dst)
    switch = np.zeros(topology.size, bool)
    switch[[s for s in topology.switches if s in topology.graph]] = True
    if not switch.any() or not switch_hop_instant(topology):
        return np.zeros(len(src), bool)
    return switch[src] & ~switch[dst]


def _meta_choice(topology: Topology, key: str, choices: tuple) -> str:
    """The topology's ``meta[key]``, one of ``choices`` (the first when it is not set)."""
    value = topology.meta.get(key, choices[0])
    if value not in choices:
        raise InputError(key, f"expected one of {', '.join(choices)}, got {value!r}")
    return value


def unwind_switches(topology: Topology, degree: int) -> Topology:
    """Replace every switch by its degree-``d`` point-to-point unwinding (Won et al., TACOS, 2023, Section IV-D).

    The N NPUs attached to a switch (its neighbours, sorted by id) are numbered 0..N-1 in that
    order; NPU ``n`` gets links ``n -> n+1, ..., n -> n+d (mod N)``. Each new link keeps the
    latency ``alpha`` of the NPU's link to the switch and gets ``1/d`` of its bandwidth (the
    NPU's outgoing bandwidth is shared by ``d`` links). The switch node disappears from the
    graph; node ids are kept (the switch id is left unused), and ``meta["unwound"]`` records
    ``{switch: degree}``. ``degree`` must be in ``1..N-1``; switches joined to other switches
    are not supported (there is no NPU order to unwind them by).
    """
    if isinstance(degree, bool) or not isinstance(degree, (int, np.integer)) or degree < 1:
        raise InputError("unwind", f"expected a positive unwinding degree, got {degree!r}")
    switches = sorted(s for s in topology.switches if s in topology.graph)
    if not switches:
        return topology
    g = topology.graph.copy()
    unwound = dict(topology.meta.get("unwound", {}))
    for s in switches:
        attached = sorted(set(g.predecessors(s)) | set(g.successors(s)))
        others = [n for n in attached if n in topology.switches]
        if others:
            raise InputError("unwind", f"switch {s} is linked to switch {others[0]}; only NPU-attached switches can be unwound")
        N = len(attached)
        if not 1 <= degree <= N - 1:
            raise InputError("unwind", f"degree {degree} is not in 1..{N - 1} for the {N}-NPU switch {s}")
        for i, n in enumerate(attached):
            up = [data for _, v, data in g.out_edges(n, data=True) if v == s]
            if not up:
                raise InputError("unwind", f"NPU {n} has no link to switch {s}")
            bw = sum(float(d["bandwidth"]) for d in up)
            alpha = max(float(d["alpha"]) for d in up)
            for k in range(1, degree + 1):
                m = attached[(i + k) % N]
                g.add_edge(n, m, bandwidth=bw / degree, alpha=alpha, unwound_from=s)
        g.remove_node(s)
        unwound[s] = int(degree)
    meta = dict(topology.meta)
    meta["unwound"] = unwound
    return replace(
        topology,
        graph=g,
        switches=frozenset(x for x in topology.switches if x not in unwound),
        name=f"{topology.name}-unwound{degree}" if topology.name else f"unwound{degree}",
        meta=meta,
    )


# ---- the TEN index every TEN formulation, driver, greedy and the TEN cost model use --------

class NotSupported(ValueError):
    """This formulation cannot express the instance (the message says why)."""


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
    switch: np.ndarray = field(repr=False, default=None)  # bool [node]: a switch node (stores nothing)
    switch_copy: bool = SWITCH_COPY  # a switch may forward one arrival on several out-links
    switch_instant: bool = False  # a chunk leaves a switch for an NPU in the timestep it arrived (module doc)
    latency: np.ndarray = field(repr=False, default=None)  # int [pair]: timesteps from leaving the link to arrival

    def __post_init__(self):
        if self.switch is None:
            self.switch = np.zeros(self.pre.shape[1], bool)
        if self.latency is None:
            self.latency = np.zeros(len(self.src), np.int64)

    @property
    def pipelined(self) -> bool:
        """Whether some link's latency delays its arrivals past its occupancy (module doc)."""
        return bool(self.latency.any())

    def occupied(self, group, pair, arrival) -> tuple[np.ndarray, np.ndarray]:
        """``(first, last)`` timesteps a send of a ``group`` chunk over ``pair`` arriving at the
        end of ``arrival`` occupies the link: ``last = arrival - latency``, ``first = last -
        delay + 1`` (module doc). Arguments broadcast."""
        last = np.asarray(arrival) - self.latency[pair]
        return last - self.delay[group, pair] + 1, last

    @property
    def has_switches(self) -> bool:
        """Whether the TEN keeps switch nodes (see the module doc)."""
        return bool(self.switch.any())

    @property
    def lag(self) -> np.ndarray:
        """``[group, pair]``: timesteps between the chunk being at a pair's source (end of
        ``t``) and the earliest arrival over the pair (end of ``t + lag``): its delay plus its
        latency, one less over an instant switch-to-NPU hop (module doc, :attr:`instant`)."""
        lag = self.delay + self.latency[None, :] if self.pipelined else self.delay
        if not (self.switch_instant and self.has_switches):
            return lag
        return lag - self.instant[None, :].astype(np.int64)

    @property
    def instant(self) -> np.ndarray:
        """bool ``[pair]``: the pair's hop is instant, from a switch to an NPU when the switch
        hop is instant (module doc, :func:`instant_hops`)."""
        return self.switch_instant & self.switch[self.src] & ~self.switch[self.dst]


def dual_instance(instance: Instance) -> Instance:
    """The non-combining dual on the transposed topology of a combining instance (else itself).

    Reduce <-> broadcast and reduce_scatter <-> allgather (Zhao et al., NSDI 2025, Appendix A); allreduce has
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
    hit = _DUALS.get(id(instance))
    if hit is not None and hit[0] is instance:  # time clustering prepares a TEN per window
        return hit[1]
    dual = replace(
        instance,
        name=f"{instance.name}-dual",
        topology=instance.topology.transpose(),
        collectives=tuple(c.dual() for c in instance.collectives),
    )
    if len(_DUALS) >= 8:
        _DUALS.pop(next(iter(_DUALS)))
    _DUALS[id(instance)] = (instance, dual)  # the instance itself is kept, so its id is not reused
    return dual


_DUALS: dict[int, tuple[Instance, Instance]] = {}  # recent duals (instances are immutable)


def link_delays(topology, chunk_bytes, timestep: float | None = None, *, switches: bool = False):
    """(delay per link pair in timesteps, capacity per pair, timestep) for chunks of these sizes.

    The TEN's discretisation (Won et al., TACOS, 2023, Section IV-C): a link pair's cost is
    ``alpha + chunk_bytes / b`` (:func:`link_costs`, ``b`` one parallel link's bandwidth; only
    ``chunk_bytes / b`` when the latency is pipelined, :func:`occupancy_costs`), its delay
    (occupancy) ``ceil(cost / timestep)`` (:func:`discretize`) and its capacity the number of
    parallel links; the timestep defaults to the cheapest link cost, so homogeneous topologies
    have delay 1 everywhere. A pipelined latency's arrival timesteps: :func:`link_latency`. ``chunk_bytes`` may be a list (concurrent collectives): one delay
    row per size, all on one timestep (the cheapest cost over all sizes). A TEN model needs
    point-to-point links, so switches are refused unless ``switches=True`` (pricing a schedule
    on the links as they are, or a TEN that keeps switch nodes: a switch's links are timed like
    any other link).
    """
    sizes = list(chunk_bytes) if isinstance(chunk_bytes, (list, tuple, np.ndarray)) else [chunk_bytes]
    if not switches and topology.switches & set(topology.nodes):
        raise NotSupported("the topology has switches: unwind them to point-to-point links first")
    if len(topology.link_arrays) == 0:
        raise NotSupported("the topology has no live links")
    costs = np.array([occupancy_costs(topology, b) for b in sizes])
    try:
        f = float(costs.min()) if timestep is None else float(timestep)
    except (TypeError, ValueError):
        f = math.nan
    if not f > 0 or not math.isfinite(f):
        raise InputError("timestep", f"expected a positive number of seconds, got {timestep!r}")
    slowest = float(costs.max())
    if slowest / f > MAX_HOP_TIMESTEPS:
        raise InputError("timestep", f"{f:g} s makes a chunk's slowest hop ({slowest:g} s) take {slowest / f:.3g} "
                         f"timesteps; expected at most {MAX_HOP_TIMESTEPS:,}: a timestep of at least "
                         f"{slowest / MAX_HOP_TIMESTEPS:.3g} s")
    delay = np.stack([discretize(row, f) for row in costs])
    return delay, chunks_per_timestep(topology, max(sizes), f), f


def chunks_per_timestep(topology, chunk_bytes: float, timestep: float) -> np.ndarray:
    """Capacity of each link pair in chunks per timestep: its parallel links times the chunks
    one link sends back to back in a timestep, ``floor((f - alpha) * b / chunk_bytes)`` and at
    least 1 (the latency once, then a chunk every ``chunk_bytes / b``; TE-CCL, Liu et al.,
    SIGCOMM 2024, Section 4: a link's capacity per epoch is its bandwidth times the epoch
    duration, in chunks). With the default timestep (the cheapest link) every pair carries one
    chunk per parallel link.

    >>> from collsynth.instances.generators import build
    >>> t = build("ring", {"nodes": 3, "bidirectional": False}, bandwidth=1.0, alpha=0.5)
    >>> chunks_per_timestep(t, 1.0, 1.5).tolist(), chunks_per_timestep(t, 1.0, 3.6).tolist()
    ([1, 1, 1], [3, 3, 3])
    """
    la = topology.link_arrays
    per_link = la.bandwidth / np.maximum(la.count, 1)
    alpha = 0.0 if latency_pipelined(topology) else la.alpha  # pipelined: the latency overlaps the chunks
    fit = np.floor((float(timestep) - alpha) * per_link / float(chunk_bytes) * (1 + REL_TOL))
    return (la.count * np.maximum(1, fit)).astype(np.int64)


_DISTS: dict[bytes, np.ndarray] = {}  # recent distance matrices (time clustering prepares a TEN per window)


def _dists(src, dst, delay_row, size) -> np.ndarray:
    """Delay-weighted distances between all nodes (remembered for the last few link sets)."""
    h = hashlib.blake2b(digest_size=20)
    for a in (src, dst, delay_row):
        h.update(np.ascontiguousarray(a, dtype=np.int64).tobytes())
    h.update(str(size).encode())
    key = h.digest()
    if key not in _DISTS:
        if len(_DISTS) >= 8:
            _DISTS.pop(next(iter(_DISTS)))
        _DISTS[key] = _all_dists(src, dst, delay_row, size)
        _DISTS[key].flags.writeable = False
    return _DISTS[key]


def _all_dists(src, dst, delay_row, size) -> np.ndarray:
    if len(src) == 0:
        d = np.full((size, size), np.inf)
        np.fill_diagonal(d, 0)
        return d
    # keep the smallest delay per pair (pairs are unique already)
    adj = sp.csr_matrix((delay_row.astype(float), (src, dst)), shape=(size, size))
    return dijkstra(adj, directed=True)


def prepare(instance: Instance, horizon: int, state=None, timestep: float | None = None,
            switch_copy: bool | None = None, *, native: bool = False) -> TenData:
    """The plain data of a TEN model for ``instance`` over ``horizon`` timesteps.

    ``switch_copy``: how switch nodes forward (see the module doc); ``None`` says the caller
    models point-to-point links only, and a topology that keeps switch nodes is refused.
    ``native=True`` keeps combining collectives in their own direction (for a formulation that
    models reductions itself, any mix of kinds): a combining chunk's ``pre`` row is then where
    the fully reduced chunk is held at the start (only at a sole contributor), its ``post`` row
    where the result is needed, and its contributors are its collective's precondition.
    """
    if not isinstance(horizon, (int, np.integer)) or horizon < 1:
        raise NotSupported(f"horizon must be a positive integer, got {horizon!r}")
    if switch_copy is not None and not isinstance(switch_copy, (bool, np.bool_)):
        raise NotSupported(f"switch_copy must be true or false, got {switch_copy!r}")
    inst = instance if native else dual_instance(instance)
    topo = inst.topology
    S = topo.size
    switch = np.zeros(S, bool)
    switch[[s for s in topo.switches if s in topo.graph]] = True
    if switch.any():
        if switch_copy is None:
            raise NotSupported("the topology keeps switch nodes and this model needs point-to-point links: "
                               "unwind them (switch unwind=d) or use a formulation that models switch nodes")
        if inst is not instance:
            raise NotSupported("switch nodes in a combining collective (a switch would relay or reduce partial "
                               "sums): unwind the switches (switch unwind=d)")
    colls = inst.collectives
    offsets = inst.chunk_offsets
    total = sum(c.num_chunks for c in colls)
    pre = np.zeros((total, S), bool)
    post = np.zeros((total, S), bool)
    group = np.zeros(total, np.int64)
    for g, (c, off) in enumerate(zip(colls, offsets)):
        own = c.precondition
        if native and c.combining:  # the full result: held at the start by a sole contributor only
            own = own & (own.sum(axis=1, keepdims=True) == 1)
        step = max(1, BLOCK_CELLS // max(1, S))
        for lo in range(0, c.num_chunks, step):  # in blocks: a 576-node all-to-all's tables are 190 M cells
            checkpoint("TEN preparation", f"conditions of {lo:,} of {c.num_chunks:,} chunks copied")
            hi = min(c.num_chunks, lo + step)
            pre[off + lo:off + hi] = own[lo:hi]
            post[off + lo:off + hi] = c.postcondition[lo:hi]
        group[off:off + c.num_chunks] = g
    if state is not None:
        state = np.asarray(state, dtype=bool)
        if state.shape != pre.shape:
            raise NotSupported(f"state must be a bool matrix of shape {pre.shape}, got {state.shape}")
        pre = state & ~switch
    la = topo.link_arrays
    delay, cap, timestep = link_delays(topo, [c.chunk_bytes for c in colls], timestep, switches=True)
    instant = bool(switch.any()) and switch_hop_instant(topo)
    latency = link_latency(topo, timestep)
    lag = delay + latency[None, :] - instant_hops(topo)[None, :].astype(np.int64)
    dists = [_dists(la.src, la.dst, lag[g], S) for g in range(len(colls))]
    dist = dists[0][None] if len(dists) == 1 else np.stack(dists)  # one group: a view, no copy
    return TenData(inst, instance, inst is not instance, int(horizon), pre, post, group, offsets,
                   la.src.copy(), la.dst.copy(), cap, delay, timestep, dist, switch,
                   SWITCH_COPY if switch_copy is None else bool(switch_copy), instant, latency)


def _steps(d: np.ndarray) -> np.ndarray:
    """Distances as integer timesteps (``INF`` where unreachable)."""
    return np.where(np.isinf(d), INF, d).astype(np.int64)


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
    holders = data.pre.sum(axis=1)
    for g in range(data.dist.shape[0]):
        D = data.dist[g]
        rows = np.flatnonzero(data.group == g)
        if not len(rows):
            continue
        # earliest[c, n] = min over holders h of D[h, n]; one row of D for single-holder chunks
        one = rows[holders[rows] == 1]
        earliest[one] = _steps(D[np.argmax(data.pre[one], axis=1)])
        for c in rows[holders[rows] > 1].tolist():
            earliest[c] = _steps(D[data.pre[c]].min(axis=0))
        # latest: a node needing c is 0 away from the nearest needing node; only the others
        # (usually few: the holders) need a minimum over the needing nodes
        for c in rows[need[rows].any(axis=1)].tolist():
            m = np.flatnonzero(need[c])
            q = np.flatnonzero(~need[c])
            back = np.zeros(S, np.int64)
            if len(q):
                back[q] = _steps(D[np.ix_(q, m)].min(axis=1))  # distance from n to the nearest needing node
            latest[c] = np.where(back >= INF, -1, data.horizon - back)
    return earliest, latest


def prune(data: TenData, rows: np.ndarray) -> np.ndarray:
    """Drop sends that deliver nothing: a second arrival of a chunk at a node, or a chunk sent
    to a node that neither needs it nor forwards it afterwards (repeated to a fixed point).
    With switch nodes: :func:`prune_switches`."""
    if not len(rows):
        return rows
    if data.has_switches:
        return prune_switches(data, rows)
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
    c, l = rows[:, 0], rows[:, 1]
    S = data.pre.shape[1]
    needed = data.post[c, data.dst[l]]
    arrives = c * S + data.dst[l]  # (chunk, node) the send delivers to
    leaves = c * S + data.src[l]  # (chunk, node) the send forwards from
    keep = np.ones(len(rows), bool)
    while True:
        forwards = np.unique(leaves[keep])
        new = keep & (needed | np.isin(arrives, forwards, assume_unique=False))
        if (new == keep).all():
            break
        keep = new
    return rows[keep]


def prune_switches(data: TenData, rows: np.ndarray) -> np.ndarray:
    """:func:`prune` on a TEN with switch nodes (repeated to a fixed point).

    A second arrival of a chunk at an NPU is dropped, and so is a send to an NPU that neither
    needs the chunk nor forwards it. A switch keeps nothing, so a send into a switch arriving
    at ``t`` is kept only while sends of the chunk leave the switch in timestep ``t + 1`` (``t``
    for an NPU with an instant switch hop): one
    such arrival when the switch copies, as many arrivals as those sends otherwise (the rule
    the model obeyed, TE-CCL, Liu et al., SIGCOMM 2024, Section 4).
    """
    rows = np.asarray(rows, np.int64).reshape(-1, 3)
    c, l, t = rows[:, 0], rows[:, 1], rows[:, 2]
    dst = data.dst[l]
    order = np.lexsort((l, t, dst, c))
    rows = rows[order]
    c, l, t = rows[:, 0], rows[:, 1], rows[:, 2]
    src, dst = data.src[l], data.dst[l]
    to_switch = data.switch[dst]
    first = np.ones(len(rows), bool)
    first[1:] = (c[1:] != c[:-1]) | (dst[1:] != dst[:-1])
    rows = rows[first | to_switch]
    c, l, t = rows[:, 0], rows[:, 1], rows[:, 2]
    src, dst = data.src[l], data.dst[l]
    to_switch, from_switch = data.switch[dst], data.switch[src]
    start = t - data.lag[data.group[c], l]  # the switch arrival a send out of it uses (module doc)
    keep = np.ones(len(rows), bool)
    while True:
        forwards = set(zip(c[keep & ~from_switch].tolist(), src[keep & ~from_switch].tolist()))
        leaving: dict[tuple[int, int, int], int] = {}
        for i in np.flatnonzero(keep & from_switch).tolist():
            key = (int(c[i]), int(src[i]), int(start[i]))
            leaving[key] = leaving.get(key, 0) + 1
        new = keep.copy()
        used: dict[tuple[int, int, int], int] = {}
        for i in np.flatnonzero(keep).tolist():
            ci, di = int(c[i]), int(dst[i])
            if not to_switch[i]:
                new[i] = bool(data.post[ci, di]) or (ci, di) in forwards
                continue
            key = (ci, di, int(t[i]))
            room = min(leaving.get(key, 0), 1) if data.switch_copy else leaving.get(key, 0)
            used[key] = used.get(key, 0) + 1
            new[i] = used[key] <= room
        if (new == keep).all():
            break
        keep = new
    return rows[keep]


def schedule_meta(data: TenData, producer: str) -> dict:
    """The meta of a schedule read from a TEN model: its producer, the TEN timestep and, with
    switch nodes, how they forwarded (``switch_copy``, which the verifier checks)."""
    meta = {"producer": producer, "timestep_s": data.timestep}
    if data.has_switches:
        meta["switch_copy"] = bool(data.switch_copy)
        meta["switch_hop"] = "instant" if data.switch_instant else "timestep"
    return meta


def schedule_from_rows(data: TenData, rows: np.ndarray, producer: str = "ten-ilp", *,
                       pieces: tuple[np.ndarray, np.ndarray, int] | None = None,
                       ops: np.ndarray | None = None) -> Schedule:
    """Turn ``(chunk, pair, arrival)`` rows of the model's direction into the user's schedule.

    ``pieces = (lo, hi, denom)`` makes row ``i`` carry the piece ``[lo[i], hi[i]) / denom`` of
    its chunk instead of the whole chunk (fractional schedules); ``ops[i]`` is row ``i``'s
    :mod:`.schedule` op code (``reduce`` / ``copy`` sends of natively modelled reductions;
    default: the collective's own)."""
    rows = np.asarray(rows, np.int64).reshape(-1, 3)
    c, l, t = rows[:, 0], rows[:, 1], rows[:, 2]
    src, dst = data.src[l], data.dst[l]
    k = data.lag[data.group[c], l] if len(rows) else np.zeros(0, np.int64)
    if data.reversed:  # (no switch nodes: lag = delay + latency)
        T = int(t.max()) if len(t) else 0
        # mirror the flight [t-k+1, t] (occupancy, then latency) to [T+1-t, T+k-t]: the reversed
        # send occupies its first delay timesteps (every send on a pair shifts alike, so the
        # capacity still holds) and arrives at its end
        src, dst, t = dst, src, T + k - t
    inst = data.original
    parts = []
    for g, (coll, off) in enumerate(zip(inst.collectives, inst.chunk_offsets)):
        sel = data.group[c] == g
        piece = {} if pieces is None else {"lo": pieces[0][sel], "hi": pieces[1][sel], "denom": pieces[2]}
        op = None if ops is None else np.asarray(ops)[sel]
        parts.append(from_arrays(
            coll.kind, inst.topology.size, coll.num_chunks,
            chunk=c[sel] - off, src=src[sel], dst=dst[sel], step=t[sel], op=op,
            meta=schedule_meta(data, producer), **piece,
        ))
    if len(parts) == 1:
        return parts[0]
    merged = merge(parts, inst.chunk_offsets)
    merged.meta.update(schedule_meta(data, producer))  # the verifier reads the TEN timestep and switch_copy
    return merged
