"""Earliest-arrival scheduling on the TEN for collectives that never copy a chunk (all-to-all,
scatter, gather): bottleneck slots assigned by a bipartite matching, the rest on
earliest-arrival paths.

Every chunk has one holder and one node that needs it, so a schedule is one time-respecting
path per chunk. A chunk's path is found by an earliest-arrival search in the time-expanded
network left by the chunks routed before it (a chunk may wait at an NPU; a switch node stores
nothing and forwards in the timestep after the arrival, or to an NPU in the same one with an
instant switch hop), and its link capacity is then reserved for every timestep its sends occupy: list
scheduling of a flow over time along earliest-arrival paths (Ford and Fulkerson, "Flows in
Networks", Princeton University Press, 1962, Chapter III, the time-expanded network of a
dynamic flow; Skutella, "An Introduction to Network Flows over Time", Research Trends in
Combinatorial Optimization, Springer, 2009, Section 3), on the TEN of TACOS (Won et al.,
"TACOS: Topology-Aware Collective Algorithm Synthesizer for Distributed Training",
arXiv:2304.05301, 2023, Section IV) with TE-CCL's switch nodes and pipelined latency (Liu et
al., "Rethinking Machine Learning Collective Communication as a Multi-Commodity Flow Problem",
SIGCOMM 2024, Section 4).

The slowest link pairs (largest per-chunk occupancy) are the bottleneck, as the InfiniBand
links between DGX-2 chassis are. A chunk that must cross exactly one of them (no path avoids
them) is given a slot first: the bottleneck pairs are cut into back-to-back slots from the
start (one send each, ``capacity`` sends per slot), a chunk may take a slot on pair ``l`` that
leaves no earlier than its distance to ``l``'s tail and arrives early enough for its distance
from ``l``'s head to end by the horizon ``T`` (distances over the other pairs), and the
smallest ``T`` with a slot for every crossing chunk is found by maximum bipartite matching
(Hopcroft and Karp, "An n^5/2 Algorithm for Maximum Matchings in Bipartite Graphs", SIAM J.
Computing 2(4), 1973) and bisection. The slots are booked, then the way to each slot and the
way from it are routed (earliest arrival over the other pairs; a chunk late for its slot
takes the pair's next free one), then every other chunk whole. When no pair is slower than
the others, or a bottleneck pair touches a switch, the chunks are routed whole, the farthest
first. That is how a schedule meets the cut bound ``(chunks over the cut / pairs) x occupancy
+ latency`` (:mod:`collsynth.tens.bounds`): the bottleneck is busy from the first timestep to
the last, the first slots carry chunks already at the tail and the last ones chunks for the
head. The slots ignore queueing at shared ports (a scatter's root sends everything through
one), so the producer keeps the shorter of both plans.

A 4-node unidirectional ring of unit links, all-to-all: each link carries its tail's 3 chunks,
2 from the node before and 1 from the one before that, so 6 timesteps, the volume bound:

>>> from collsynth.instances.generators import build
>>> from collsynth.instances.instance import make_instance
>>> ring = make_instance(build("ring", {"nodes": 4, "bidirectional": False}, bandwidth=1.0, alpha=0.0), "alltoall")
>>> synthesize(ring).num_steps
6
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numba
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra, maximum_bipartite_matching, min_weight_full_bipartite_matching

from ...tens.status import Status
from ...instances.instance import Instance, make_instance
from ...instances.topology import from_edges
from ...limits import TimeLimitReached
from ...tens import bounds
from ...tens.schedule import Schedule
from ...tens.ten import NotSupported, TenData, prepare, schedule_from_rows
from ..producers import Options, Outcome, Param, Producer, Unsupported

NAME = "earliest-arrival"
PLANS = ("best", "slots", "order")
UNREACHED = np.iinfo(np.int64).max // 4


# ---- the route of one chunk (compiled: a loop over timesteps and link pairs) ----------------

@numba.njit(cache=True)
def _free(load, l, arrival, delay, latency, capacity):
    """Whether pair ``l`` has a unit free in every timestep a send arriving at ``arrival`` occupies."""
    last = arrival - latency[l]
    for tau in range(last - delay[l] + 1, last + 1):
        if load[l, tau] >= capacity[l]:
            return False
    return True


@numba.njit(cache=True)
def _book(load, l, arrival, delay, latency, step):
    """Add ``step`` to pair ``l``'s use in the timesteps a send arriving at ``arrival`` occupies."""
    last = arrival - latency[l]
    for tau in range(last - delay[l] + 1, last + 1):
        load[l, tau] += step


@numba.njit(cache=True)
def _route(s, t0, d, allowed, out_ptr, pairs, src, dst, lag, delay, latency, capacity, sw, load, first, parent,
           sw_parent):
    """The earliest-arrival path of a chunk held at NPU ``s`` from the end of timestep ``t0``
    to ``d``, over the pairs ``allowed``, in the TEN whose link use so far is
    ``load[pair, timestep]``; its sends are booked.

    ``first[v]``: the earliest timestep NPU ``v`` holds the chunk (it may wait there);
    ``parent[v]``: the pair and departure that brought it. Switch node ``v`` (``sw[v] >= 0``,
    else -1) stores nothing, so only its exact arrival timesteps count:
    ``sw_parent[sw[v], t]``. Returns the sends as rows ``(pair, arrival)`` from ``d`` back to
    ``s``, or no rows when ``load`` is too short to reach ``d`` (the caller grows it)."""
    _earliest_arrivals(s, t0, d, allowed, out_ptr, pairs, dst, lag, delay, latency, capacity, sw, load, first,
                       parent, sw_parent)
    if first[d] >= load.shape[1]:
        return np.zeros((0, 2), np.int64)
    return _book_path(s, d, src, delay, latency, sw, load, first, parent, sw_parent)


@numba.njit(cache=True)
def _earliest_arrivals(s, t0, d, allowed, out_ptr, pairs, dst, lag, delay, latency, capacity, sw, load, first,
                       parent, sw_parent):
    """Fill ``first`` / ``parent`` / ``sw_parent`` (see :func:`_route`) timestep by timestep
    from ``t0`` until ``d`` is reached or ``load`` ends."""
    S = len(first)
    T = load.shape[1]
    first[:] = UNREACHED
    sw_parent[:, :, :] = -1
    first[s] = t0
    t = t0
    while t < T and first[d] > t:
        for phase in range(2):  # switches first: an instant hop may reach an NPU at t itself
            for v in range(S):
                if sw[v] >= 0:
                    if phase == 1 or sw_parent[sw[v], t, 0] < 0:
                        continue
                elif phase == 0 or first[v] > t:
                    continue
                for i in range(out_ptr[v], out_ptr[v + 1]):
                    l = pairs[i]
                    u = dst[l]
                    a = t + lag[l]
                    if not allowed[l] or a >= T:
                        continue
                    if (sw[u] >= 0 and sw_parent[sw[u], a, 0] >= 0) or (sw[u] < 0 and first[u] <= a):
                        continue
                    if not _free(load, l, a, delay, latency, capacity):
                        continue
                    if sw[u] >= 0:
                        sw_parent[sw[u], a, 0] = l
                        sw_parent[sw[u], a, 1] = t
                    else:
                        first[u] = a
                        parent[u, 0] = l
                        parent[u, 1] = t
        t += 1


@numba.njit(cache=True)
def _book_path(s, d, src, delay, latency, sw, load, first, parent, sw_parent):
    """Book the sends of the path found to ``d`` and return them as rows ``(pair, arrival)``
    from ``d`` back to ``s``."""
    S = len(first)
    hops = np.zeros((S * 4 + 4, 2), np.int64)
    n = 0
    a = first[d]
    l, dep = parent[d, 0], parent[d, 1]
    while True:
        if n == len(hops):
            hops = np.concatenate((hops, np.zeros_like(hops)))
        hops[n, 0] = l
        hops[n, 1] = a
        n += 1
        _book(load, l, a, delay, latency, 1)
        v, a = src[l], dep
        if v == s and sw[v] < 0:
            break
        if sw[v] >= 0:  # it left at its arrival
            l, dep = sw_parent[sw[v], a, 0], sw_parent[sw[v], a, 1]
        else:  # it waited there since its first arrival
            l, dep, a = parent[v, 0], parent[v, 1], first[v]
    return hops[:n]


# ---- the network being filled ----------------------------------------------------------------

def _i64(a) -> np.ndarray:
    return np.ascontiguousarray(a, np.int64)


MAX_TIMESTEPS = 1 << 22  # a route still unfinished this far is a defect, not a long schedule


@dataclass
class Network:
    """The TEN's link use so far (``load[pair, timestep]``) and the int64 arrays the compiled
    search reads; :meth:`route` finds and books one chunk's path, growing the time axis."""

    data: TenData
    load: np.ndarray
    out_ptr: np.ndarray  # pairs leaving node v: pairs[out_ptr[v]:out_ptr[v + 1]]
    pairs: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    lag: np.ndarray  # [group, pair]
    delay: np.ndarray  # [group, pair]
    latency: np.ndarray
    capacity: np.ndarray
    sw: np.ndarray  # switch node v: its row sw[v] of the search's switch arrivals; NPUs: -1

    @classmethod
    def empty(cls, data: TenData, horizon: int) -> "Network":
        """No link in use yet, room for arrivals up to ``horizon``."""
        S = data.pre.shape[1]
        return cls(data, np.zeros((len(data.src), max(8, horizon + 1)), np.int64),
                   _i64(np.concatenate([[0], np.cumsum(np.bincount(data.src, minlength=S))])),
                   _i64(np.argsort(data.src, kind="stable")), _i64(data.src), _i64(data.dst), _i64(data.lag),
                   _i64(data.delay), _i64(data.latency), _i64(data.capacity),
                   np.where(data.switch, np.cumsum(data.switch) - 1, -1).astype(np.int64))

    def grow(self, horizon: int) -> None:
        """Make room for arrivals up to ``horizon``."""
        if horizon >= self.load.shape[1]:
            if horizon >= MAX_TIMESTEPS:
                raise RuntimeError(f"a route needs more than {MAX_TIMESTEPS} timesteps")
            more = np.zeros((self.load.shape[0], max(horizon + 1, 2 * self.load.shape[1])), np.int64)
            more[:, :self.load.shape[1]] = self.load
            self.load = more

    def route(self, g: int, s: int, t0: int, d: int, allowed: np.ndarray) -> np.ndarray:
        """Book the earliest-arrival path of a group-``g`` chunk at ``s`` from ``t0`` to ``d``
        over ``allowed`` pairs (:func:`_route`); its sends ``(pair, arrival)``, last first."""
        S = len(self.out_ptr) - 1
        first, parent = np.zeros(S, np.int64), np.zeros((S, 2), np.int64)
        while True:
            sw_parent = np.full((max(1, int(self.data.switch.sum())), self.load.shape[1], 2), -1, np.int64)
            hops = _route(s, t0, d, allowed, self.out_ptr, self.pairs, self.src, self.dst, self.lag[g],
                          self.delay[g], self.latency, self.capacity, self.sw, self.load, first, parent,
                          sw_parent)
            if len(hops):
                return hops
            self.grow(2 * self.load.shape[1])

    def free(self, g: int, l: int, arrival: int) -> bool:
        """Whether pair ``l`` can take one more group-``g`` send arriving at ``arrival``."""
        self.grow(arrival)
        return _free(self.load, l, arrival, self.delay[g], self.latency, self.capacity)

    def book(self, g: int, l: int, arrival: int, step: int = 1) -> None:
        """Take (``step = -1``: give back) one unit of pair ``l`` for a send arriving at ``arrival``."""
        self.grow(arrival)
        _book(self.load, l, arrival, self.delay[g], self.latency, step)


# ---- chunks, bottleneck, slots ---------------------------------------------------------------

def endpoints(data: TenData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(chunk, source, destination)`` of every chunk that must move: its one holder and the
    one node that needs it. Raises :class:`~collsynth.tens.ten.NotSupported` for a chunk
    needed at several nodes (a copy), held at several, or unable to reach its destination."""
    need = data.post & ~data.pre
    wanted = np.count_nonzero(need, axis=1)
    moving = np.flatnonzero(wanted)
    many = moving[wanted[moving] > 1]
    if len(many):
        raise NotSupported(f"chunk {int(many[0])} is needed at {int(need[many[0]].sum())} nodes; earliest-arrival "
                           "routes collectives that never copy a chunk (all-to-all, scatter, gather)")
    every = len(moving) == len(need)  # an all-to-all moves every chunk: no copies of the [chunk, node] tables
    pre, need = (data.pre, need) if every else (data.pre[moving], need[moving])
    held = np.count_nonzero(pre, axis=1)
    if (held != 1).any():
        c = int(moving[np.flatnonzero(held != 1)[0]])
        raise NotSupported(f"chunk {c} must move and is held at {int(data.pre[c].sum())} nodes")
    src, dst = np.argmax(pre, axis=1), np.argmax(need, axis=1)
    far = ~np.isfinite(data.dist[data.group[moving], src, dst])
    if far.any():
        i = int(np.flatnonzero(far)[0])
        raise NotSupported(f"chunk {int(moving[i])} cannot reach node {int(dst[i])} from node {int(src[i])}")
    return moving, src, dst


def bottleneck(data: TenData, g: int) -> np.ndarray:
    """Bool per link pair: the slowest pairs for chunks of group ``g`` (largest occupancy in
    timesteps), none when every pair is equally slow."""
    k = data.delay[g]
    return k == k.max() if k.max() > k.min() else np.zeros(len(k), bool)


def distances(data: TenData, g: int, keep: np.ndarray) -> np.ndarray:
    """Lag-weighted distances between all nodes over the pairs ``keep`` (a path through a
    switch node counts its forwarding as the lag of the pair out of it)."""
    S = data.pre.shape[1]
    adj = sp.csr_matrix((data.lag[g][keep].astype(float), (data.src[keep], data.dst[keep])), shape=(S, S))
    return dijkstra(adj, directed=True)


@dataclass
class Crossing:
    """The chunks that must cross one bottleneck pair (positions ``at`` into the chunk
    arrays) with, per bottleneck pair (columns, ids ``pairs``), the distance ``before`` from
    the chunk's source to the pair's tail and ``after`` from its head to the destination
    (``inf``: not that way)."""

    at: np.ndarray
    pairs: np.ndarray
    before: np.ndarray
    after: np.ndarray


def crossing(data: TenData, g: int, src: np.ndarray, dst: np.ndarray) -> Crossing | None:
    """The group-``g`` chunks (endpoints ``src``, ``dst``) that have no path avoiding the
    bottleneck pairs but have one crossing exactly one of them (module doc); None when the bottleneck does
    not apply: no pair is slower, or a bottleneck pair starts or ends at a switch node."""
    slow = bottleneck(data, g)
    if not slow.any() or data.switch[data.src[slow]].any() or data.switch[data.dst[slow]].any():
        return None
    D = distances(data, g, ~slow)
    pairs = np.flatnonzero(slow)
    before = D[np.ix_(src, data.src[pairs])]
    after = D[np.ix_(data.dst[pairs], dst)].T
    ok = np.isfinite(before) & np.isfinite(after)
    at = np.flatnonzero(~np.isfinite(D[src, dst]) & ok.any(axis=1))
    return Crossing(at, pairs, np.where(ok, before, np.inf)[at], np.where(ok, after, np.inf)[at])


MAX_EDGES = 4_000_000  # chunk-slot pairs beyond which no slots are assigned (memory: about 40 B each)


def _edges(data: TenData, g: int, cx: Crossing, horizon: int):
    """The slots of the bottleneck pairs and which crossing chunk may take which: ``(chunk,
    slot)`` edges (positions into ``cx.at``; slot ids), then per slot its pair and departure.

    The slots of a pair of delay ``k``, capacity ``c`` and lag ``L`` are back to back: slot
    ``j`` leaves the tail at the end of ``j * k`` (``c`` units each) and arrives ``L`` later,
    by ``horizon``. A chunk may take slot ``j`` of the pair when it can be at the tail by
    then (``before``) and at its destination by ``horizon`` (``after``); those ``j`` form a
    range. None when there are more than :data:`MAX_EDGES` edges."""
    k = data.delay[g, cx.pairs]
    lag = data.lag[g, cx.pairs]
    cap = data.capacity[cx.pairs]
    count = np.maximum(0, (horizon - lag) // k + 1)  # slots per pair
    base = np.concatenate([[0], np.cumsum(count * cap)])
    with np.errstate(invalid="ignore"):
        lo = np.ceil(cx.before / k[None, :])
        hi = np.floor((horizon - lag[None, :] - cx.after) / k[None, :])
    ok = np.isfinite(lo) & np.isfinite(hi)
    lo, hi = np.where(ok, lo, 0).astype(np.int64), np.where(ok, np.minimum(hi, count - 1), -1).astype(np.int64)
    width = np.maximum(0, hi - lo + 1) * cap[None, :]
    if width.sum() > MAX_EDGES:
        return None
    chunk, col = np.nonzero(width)
    n = width[chunk, col]
    owner = np.repeat(np.arange(len(chunk)), n)
    offset = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
    slot = base[col[owner]] + (lo[chunk, col][owner] + offset // cap[col[owner]]) * cap[col[owner]] \
        + offset % cap[col[owner]]
    slot_col = np.repeat(np.arange(len(cx.pairs)), count * cap)
    slot_dep = (np.concatenate([np.repeat(np.arange(m), c) for m, c in zip(count.tolist(), cap.tolist())])
                * k[slot_col])
    return chunk[owner], slot, cx.pairs[slot_col], slot_dep


def assign(data: TenData, g: int, cx: Crossing, horizon: int, balanced: bool = False):
    """A slot for every crossing chunk such that each reaches its slot and its destination by
    ``horizon`` (uncongested distances, :func:`_edges`): ``(pair, departure)`` per chunk of
    ``cx``, or None when a maximum matching (Hopcroft and Karp, "An n^5/2 Algorithm for
    Maximum Matchings in Bipartite Graphs", SIAM J. Computing 2(4), 1973) leaves a chunk
    without one, or when there are too many edges.

    ``balanced``: among such assignments one of least ``sum (arrival at the destination)^2 +
    (horizon - departure + distance to the tail)^2`` (a minimum-weight full matching, Jonker
    and Volgenant, "A Shortest Augmenting Path Algorithm for Dense and Sparse Linear
    Assignment Problems", Computing 38, 1987): the chunks with far to go after the bottleneck
    take its early slots and those with far to go before it the late ones, so their ways to
    and from it keep slack for queueing at the ports they share."""
    edges = _edges(data, g, cx, horizon)
    if edges is None or len(cx.at) > len(edges[2]):
        return None
    chunk, slot, pair, dep = edges
    shape = (len(cx.at), len(pair))
    fits = sp.csr_matrix((np.ones(len(chunk), np.int8), (chunk, slot)), shape=shape)
    match = maximum_bipartite_matching(fits, perm_type="column")
    if (match < 0).any():
        return None
    if balanced:
        cols = np.searchsorted(cx.pairs, pair[slot])
        end = dep[slot] + data.lag[g, pair[slot]] + cx.after[chunk, cols]
        start = horizon - dep[slot] + cx.before[chunk, cols]
        weight = sp.csr_matrix((1.0 + end ** 2 + start ** 2, (chunk, slot)), shape=shape)  # weights must be nonzero
        _, match = min_weight_full_bipartite_matching(weight)
    return pair[match], dep[match]


def plan(data: TenData, g: int, cx: Crossing) -> tuple[int, np.ndarray, np.ndarray] | None:
    """The smallest horizon at which :func:`assign` gives every crossing chunk a slot, and
    the balanced assignment there (bisection: more horizon never takes a slot away); None
    when the chunk-slot edges exceed :data:`MAX_EDGES` first."""
    lag = data.lag[g, cx.pairs]
    lo = int((cx.before + lag[None, :] + cx.after).min(axis=1).max())  # the farthest chunk
    hi = lo
    while True:
        edges = _edges(data, g, cx, hi)
        if edges is None:
            return None
        if assign(data, g, cx, hi) is not None:
            break
        lo, hi = hi + 1, 2 * hi
    while lo < hi:
        mid = (lo + hi) // 2
        if assign(data, g, cx, mid) is None:
            lo = mid + 1
        else:
            hi = mid
    return (hi, *assign(data, g, cx, hi, balanced=True))


# ---- the schedule ----------------------------------------------------------------------------

def _rows(c: int, hops: np.ndarray) -> np.ndarray:
    return np.column_stack([np.full(len(hops), c, np.int64), hops])


def _late(net: Network, g: int, l: int, arrival: int, ready: int) -> int:
    """A chunk at the tail of ``l`` only at the end of ``ready``, after its slot (arriving at
    ``arrival``) left: free that slot and book the first one it can take; its arrival."""
    net.book(g, l, arrival, -1)
    a = ready + int(net.data.lag[g, l])
    while not net.free(g, l, a):
        a += 1
    net.book(g, l, a)
    return a


def slotted(net: Network, g: int, chunks, src, dst, cx: Crossing, planned, deadline=None) -> list[np.ndarray]:
    """Rows ``(chunk, pair, arrival)`` of the crossing chunks ``cx`` of group ``g``: their
    slots (``planned``, from :func:`plan`) booked, then the ways to them in departure order,
    then the ways from them in arrival order, over the pairs other than the bottleneck (module
    doc)."""
    data = net.data
    _, pair, dep = planned
    arrival = dep + data.lag[g, pair]
    for l, a in zip(pair.tolist(), arrival.tolist()):
        net.book(g, l, a)
    other = ~bottleneck(data, g)
    out = []
    for n, i in enumerate(np.argsort(dep, kind="stable").tolist()):
        if deadline is not None and n % 64 == 0:
            deadline.check("earliest-arrival routing", f"{n} of {len(dep)} ways to the bottleneck routed")
        c, s, l = int(chunks[cx.at[i]]), int(src[cx.at[i]]), int(pair[i])
        tail = int(data.src[l])
        hops = net.route(g, s, 0, tail, other) if s != tail else np.zeros((0, 2), np.int64)
        if len(hops) and hops[0, 1] > dep[i]:
            arrival[i] = _late(net, g, l, int(arrival[i]), int(hops[0, 1]))
        out += [_rows(c, hops), _rows(c, np.array([[l, arrival[i]]]))]
    for n, i in enumerate(np.argsort(arrival, kind="stable").tolist()):
        if deadline is not None and n % 64 == 0:
            deadline.check("earliest-arrival routing", f"{n} of {len(dep)} ways from the bottleneck routed")
        c, d, head = int(chunks[cx.at[i]]), int(dst[cx.at[i]]), int(data.dst[pair[i]])
        if d != head:
            out.append(_rows(c, net.route(g, head, int(arrival[i]), d, other)))
    return out


def schedule_rows(data: TenData, how: str = "slots", deadline=None) -> np.ndarray:
    """Rows ``(chunk, pair, arrival)`` of the whole schedule: per group, the crossing chunks
    in their slots (``how="slots"``, when the bottleneck applies: :func:`crossing`), then
    every other chunk whole on its earliest-arrival path, the farthest first."""
    if how not in ("slots", "order"):
        raise NotSupported(f"plan must be slots or order, got {how!r}")
    chunks, src, dst = endpoints(data)
    if deadline is not None:
        deadline.check("earliest-arrival routing", f"{len(chunks)} chunks to route, none routed")
    net = Network.empty(data, int(4 * data.dist[np.isfinite(data.dist)].max()) + 1)
    done = np.zeros(len(chunks), bool)
    out = []
    for g in np.unique(data.group[chunks]).tolist():
        sel = np.flatnonzero(data.group[chunks] == g)
        cx = crossing(data, g, src[sel], dst[sel]) if how == "slots" else None
        planned = plan(data, g, cx) if cx is not None and len(cx.at) else None
        if planned is None:
            continue
        out += slotted(net, g, chunks[sel], src[sel], dst[sel], cx, planned, deadline)
        done[sel[cx.at]] = True
    rest = np.flatnonzero(~done)
    far = data.dist[data.group[chunks[rest]], src[rest], dst[rest]]
    every = np.ones(len(data.src), bool)
    for n, i in enumerate(rest[np.lexsort((chunks[rest], -far))].tolist()):
        if deadline is not None and n % 64 == 0:
            deadline.check("earliest-arrival routing", f"{n} of {len(rest)} chunks routed")
        g = int(data.group[chunks[i]])
        out.append(_rows(int(chunks[i]), net.route(g, int(src[i]), 0, int(dst[i]), every)))
    return np.concatenate(out) if out else np.zeros((0, 3), np.int64)


def synthesize_plans(instance: Instance, how: str = "best", timestep: float | None = None,
                     deadline=None) -> dict[str, Schedule]:
    """The earliest-arrival schedules of ``instance`` (module doc) by plan, whole chunks, on
    the TEN of ``timestep`` seconds (default: the TEN's own): ``how`` alone, or with
    ``how="best"`` both ``slots`` and ``order``. Raises
    :class:`~collsynth.tens.ten.NotSupported` for collectives that copy or combine."""
    if how not in PLANS:
        raise NotSupported(f"plan must be one of {', '.join(PLANS)}, got {how!r}")
    for coll in instance.collectives:
        if coll.combining:
            raise NotSupported(f"{coll.kind} combines partial sums; earliest-arrival routes collectives that never "
                               "copy or combine a chunk (all-to-all, scatter, gather)")
    data = prepare(instance, 1, timestep=timestep, switch_copy=False)
    if deadline is not None:
        deadline.check("earliest-arrival", "the TEN prepared")
    plans = ("slots", "order") if how == "best" else (how,)
    return {p: schedule_from_rows(data, schedule_rows(data, p, deadline), NAME) for p in plans}


def synthesize(instance: Instance, how: str = "best", timestep: float | None = None, deadline=None) -> Schedule:
    """The shortest of :func:`synthesize_plans` (the first plan on a tie: slots)."""
    return min(synthesize_plans(instance, how, timestep, deadline).values(), key=lambda sched: sched.num_steps)


# ---- the producer ----------------------------------------------------------------------------

def warm() -> None:
    """Compile (or load from numba's cache) the kernels on a 3-node unidirectional ring
    all-to-all, before a run's clock starts; every run passes arrays of the same types."""
    ring = from_edges(3, [(0, 1), (1, 2), (2, 0)], bandwidth=1.0, alpha=0.0, name="warm-ring")
    schedule_rows(prepare(make_instance(ring, "alltoall", message_bytes=3.0), 1, switch_copy=False), "order")


def produce(instance: Instance, options: Options) -> Outcome:
    """The ``earliest-arrival`` producer: :func:`synthesize` with ``--param plan`` and
    ``timestep``. Objective: its timesteps; bound: the TEN timesteps bound
    (:func:`collsynth.tens.bounds.timesteps_bound`, on the same timestep); status ``optimal``
    when the schedule meets it, else ``heuristic``."""
    params = dict(options.params or {})
    how, timestep = params.get("plan", "best"), params.get("timestep")
    deadline = options.timer()
    t0 = time.perf_counter()
    try:
        found = synthesize_plans(instance, how, timestep, deadline)
    except NotSupported as e:
        raise Unsupported(str(e)) from None
    wall = time.perf_counter() - t0
    plan_used, sched = min(found.items(), key=lambda item: item[1].num_steps)
    steps = int(sched.num_steps)
    extra = {"plan": plan_used, "steps_by_plan": {p: int(s.num_steps) for p, s in found.items()}}
    try:
        bound = int(bounds.timesteps_bound(instance, timestep=sched.meta["timestep_s"]).value)
    except (TimeLimitReached, NotSupported) as e:
        return Outcome(sched, Status.HEURISTIC, objective=float(steps), units="timesteps", solve_s=wall, solver=NAME,
                       message=f"{steps} timesteps; lower bound not computed ({e})", extra=extra)
    met = steps <= bound
    return Outcome(
        sched, Status.OPTIMAL if met else Status.HEURISTIC, objective=float(steps), bound=float(bound),
        gap=(steps - bound) / steps if steps else 0.0, units="timesteps", solve_s=wall, solver=NAME,
        message=f"{steps} timesteps, lower bound {bound}" + ("; optimal: meets the bound" if met else ""),
        extra={**extra, "lower_bound_steps": bound},
    )


PARAMS = (
    Param("plan", PLANS, "best", "slots: chunks that must cross the slowest links get slots on them by bipartite "
          "matching first; order: every chunk whole, the farthest first; best: the shorter of both"),
    Param("timestep", float, None, "seconds per TEN timestep (default: the TEN's, the cheapest link per chunk)"),
)

PRODUCERS = [
    Producer(
        NAME, "greedy", produce,
        summary="earliest-arrival paths on the TEN for collectives that never copy (all-to-all, scatter, gather): "
                "slots on the slowest links by bipartite matching, then routes to and from them",
        params=PARAMS, warm=warm,
    ),
]
