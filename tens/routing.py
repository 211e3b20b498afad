"""Routes: the directed link pairs every send of a schedule crosses (``docs/cost-models.md``).

A send over a live link uses that link's pair. A send of a ``routing == "shortest-path"``
schedule between non-adjacent nodes (Swing, recursive doubling on a torus) follows one fixed
fewest-hop path: the path networkx's ``single_source_shortest_path`` returns, i.e. breadth-first
search from the source visiting neighbours in the graph's adjacency order, each node reached
through the first node that discovers it (:meth:`collsynth.instances.topology.Topology.shortest_path`).

Routes are kept per distinct (source, destination) pair, never per hop of every send: a send
carries a route id, and the cost models walk the route's links while they stream over the
sends. Route ids ``0 .. L-1`` are the direct link pairs themselves (one hop); routed pairs get
ids from ``L`` on. Breadth-first search runs once per source that has a routed send, in a
compiled kernel, and keeps one source's predecessors at a time (no N x N table).

>>> from collsynth.instances.generators import build
>>> from collsynth.tens.schedule import from_arrays
>>> ring = build("ring", {"nodes": 6}, bandwidth=1.0, alpha=1.0)
>>> s = from_arrays("allgather", 6, 6, chunk=[0, 0], src=[0, 0], dst=[1, 3], step=[1, 1], routing="shortest-path")
>>> rt = routes(s, ring)
>>> [int(rt.hops[k]) for k in rt.r], float(rt.latency[rt.r[1]])
([1, 3], 3.0)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from .. import InputError
from ..instances.topology import LinkArrays, Topology
from .compiled import first_at_least
from .schedule import Schedule

MAX_INDEX = np.iinfo(np.int32).max  # sends, hops and route ids are int32 columns


@dataclass(frozen=True)
class Routes:
    """Link pairs each send crosses: send ``i`` uses ``links[ptr[r[i]]:ptr[r[i] + 1]]``.

    ``r`` (int32) is the route id of every send; routes ``0 .. L-1`` are the direct link pairs,
    later ones routed (source, destination) pairs. ``latency[k]`` is route ``k``'s summed per-hop
    alpha (summed from the first hop on), ``hops[k]`` its length.
    """

    r: np.ndarray
    ptr: np.ndarray
    links: np.ndarray
    latency: np.ndarray
    hops: np.ndarray

    @property
    def total_hops(self) -> int:
        """Hops of all sends together (a routed send counts every link it crosses)."""
        return int(np.bincount(self.r, minlength=len(self.hops)) @ self.hops)

    def expand(self) -> tuple[np.ndarray, np.ndarray]:
        """``(send index, link pair)`` for every hop of every send, in send order (materialised:
        for small schedules and batched callers only)."""
        lens = self.hops[self.r]
        send = np.repeat(np.arange(len(self.r)), lens)
        first = np.repeat(self.ptr[self.r], lens)
        within = np.arange(len(send)) - np.repeat(np.cumsum(lens) - lens, lens)
        return send, self.links[first + within].astype(np.int64)


def row_pointers(la: LinkArrays) -> np.ndarray:
    """``ptr[u] .. ptr[u + 1]``: the link pairs leaving node ``u`` (pairs are sorted by source)."""
    return np.searchsorted(la.src, np.arange(la.size + 1)).astype(np.int64)


@njit(cache=True, nogil=True)
def _find_link(u, v, row_ptr, link_dst):
    """Index of the link pair ``u -> v`` (binary search in ``u``'s sorted row), -1 if none."""
    a = first_at_least(link_dst, row_ptr[u], row_ptr[u + 1], v)
    if a < row_ptr[u + 1] and link_dst[a] == v:
        return a
    return -1


@njit(cache=True, nogil=True)
def direct_links(src, dst, row_ptr, link_dst):
    """Link pair of every send ``src[i] -> dst[i]`` (int32; -1 where there is no live link)."""
    out = np.empty(len(src), np.int32)
    for i in range(len(src)):
        out[i] = _find_link(src[i], dst[i], row_ptr, link_dst)
    return out


def adjacency(topology: Topology) -> tuple[np.ndarray, np.ndarray]:
    """CSR ``(ptr, nbr)`` of live out-neighbours in the graph's adjacency order (networkx's)."""
    adj = topology.graph.adj
    ptr = np.zeros(topology.size + 1, dtype=np.int64)
    nbrs: list[int] = []
    for v in range(topology.size):
        if v in adj:
            nbrs.extend(adj[v])
        ptr[v + 1] = len(nbrs)
    return ptr, np.asarray(nbrs, dtype=np.int32)


@njit(cache=True, nogil=True)
def _bfs(source, adj_ptr, nbr, pred, dist, queue):
    """FIFO breadth-first search from ``source`` in adjacency order; returns nodes reached.

    Fills ``dist``/``pred`` of the reached nodes (listed in ``queue[:count]``); unreached
    nodes keep ``dist == -1``. The caller resets ``dist`` of the queue afterwards.
    """
    head, tail = 0, 1
    queue[0] = source
    dist[source] = 0
    pred[source] = -1
    while head < tail:
        v = queue[head]
        head += 1
        for e in range(adj_ptr[v], adj_ptr[v + 1]):
            w = nbr[e]
            if dist[w] < 0:
                dist[w] = dist[v] + 1
                pred[w] = v
                queue[tail] = w
                tail += 1
    return tail


@njit(cache=True, nogil=True)
def grow(a, need):
    """``a`` (1-d) with at least ``need`` entries: doubled, the new ones zero."""
    if need <= len(a):
        return a
    b = np.zeros(max(need, 2 * len(a)), a.dtype)
    b[:len(a)] = a
    return b


@njit(cache=True, nogil=True)
def _route_pairs(src, dst, routed, by_src_ptr, adj_ptr, nbr, row_ptr, link_dst, alpha, num_links, r):
    """Route every send listed in ``routed`` (grouped by source): one BFS per source.

    Writes route ids ``num_links + p`` into ``r``; returns ``(ptr, links, latency, hops, bad)``
    of the new pairs (``bad`` is the first send whose destination is unreachable, else -1).
    """
    size = len(adj_ptr) - 1
    dist = np.full(size, -1, np.int32)
    pred = np.full(size, -1, np.int32)
    queue = np.empty(size, np.int32)
    pair_of = np.full(size, -1, np.int32)
    path = np.empty(size, np.int32)
    ptr = np.zeros(16, np.int64)
    links = np.empty(16, np.int32)
    latency = np.empty(16, np.float64)
    hops = np.empty(16, np.int32)
    npairs = 0
    for u in range(size):
        a, b = by_src_ptr[u], by_src_ptr[u + 1]
        if a == b:
            continue
        reached = _bfs(u, adj_ptr, nbr, pred, dist, queue)
        for q in range(a, b):
            i = routed[q]
            v = dst[i]
            if dist[v] <= 0:  # unreachable, or the source itself: name the smallest such pair
                for x in range(a, b):
                    j = routed[x]
                    if dist[dst[j]] <= 0 and dst[j] < dst[i]:
                        i = j
                return ptr[:npairs + 1], links[:ptr[npairs]], latency[:npairs], hops[:npairs], i
            if pair_of[v] < 0:
                pair_of[v] = npairs
                h = dist[v]
                w = v
                for k in range(h - 1, -1, -1):
                    path[k + 1] = w
                    w = pred[w]
                path[0] = u
                ptr = grow(ptr, npairs + 2)
                latency = grow(latency, npairs + 1)
                hops = grow(hops, npairs + 1)
                start = ptr[npairs]
                links = grow(links, start + h)
                lat = 0.0
                for k in range(h):
                    lk = _find_link(path[k], path[k + 1], row_ptr, link_dst)
                    links[start + k] = lk
                    lat += alpha[lk]
                ptr[npairs + 1] = start + h
                latency[npairs] = lat
                hops[npairs] = h
                npairs += 1
            r[i] = num_links + pair_of[v]
        for q in range(a, b):
            pair_of[dst[routed[q]]] = -1
        for x in range(reached):
            dist[queue[x]] = -1
    return ptr[:npairs + 1], links[:ptr[npairs]], latency[:npairs], hops[:npairs], -1


def routes(schedule: Schedule, topology: Topology) -> Routes:
    """Route every send of ``schedule`` on ``topology`` (see :class:`Routes` and the module doc)."""
    return route_sends(schedule.src, schedule.dst, schedule.routing, topology)


def route_sends(src: np.ndarray, dst: np.ndarray, routing: str, topology: Topology) -> Routes:
    """Route the sends ``src[i] -> dst[i]`` of a schedule with ``routing`` on ``topology``.

    Raises :class:`~collsynth.InputError` for a node id out of range, a send off the links of a
    ``routing == "links"`` schedule or a routed send with no live path (both name the pair
    with the smallest ``src * size + dst``).
    """
    la = topology.link_arrays
    size = topology.size
    n = len(src)
    if n >= MAX_INDEX:
        raise InputError("schedule", f"{n} sends: at most {MAX_INDEX - 1} are supported")
    if n and (max(src.max(), dst.max()) >= size or min(src.min(), dst.min()) < 0):
        raise InputError("schedule", f"a send names a node outside 0..{size - 1}")
    L = len(la)
    row_ptr = row_pointers(la)
    link_dst = la.dst.astype(np.int32)
    r = direct_links(src, dst, row_ptr, link_dst)
    ptr, links = np.arange(L + 1, dtype=np.int64), np.arange(L, dtype=np.int32)
    latency, hops = la.alpha.astype(np.float64), np.ones(L, dtype=np.int32)
    off = np.flatnonzero(r < 0)
    if len(off) and routing != "shortest-path":
        k = int(np.argmin(src[off].astype(np.int64) * size + dst[off]))
        u, v = int(src[off[k]]), int(dst[off[k]])
        raise InputError("schedule", f"send {u}->{v} is not a live link (routing is 'links')")
    if len(off):
        by_src = off[np.argsort(src[off], kind="stable")].astype(np.int32)
        by_src_ptr = np.searchsorted(src[by_src], np.arange(size + 1)).astype(np.int64)
        adj_ptr, nbr = adjacency(topology)
        p2, l2, lat2, h2, bad = _route_pairs(src, dst, by_src, by_src_ptr, adj_ptr, nbr, row_ptr, link_dst,
                                             la.alpha.astype(np.float64), L, r)
        if bad >= 0:
            raise InputError("schedule", f"send {int(src[bad])}->{int(dst[bad])}: no live path between the nodes")
        if L + len(h2) >= MAX_INDEX or L + p2[-1] >= MAX_INDEX:
            raise InputError("schedule", "too many routed pairs")
        ptr = np.concatenate([ptr, L + p2[1:]])
        links = np.concatenate([links, l2])
        latency = np.concatenate([latency, lat2])
        hops = np.concatenate([hops, h2])
    return Routes(r, ptr, links, latency, hops)
