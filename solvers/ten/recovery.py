"""Shortest-path recovery on the TEN as a compiled loop (TACOS early termination, Won et al.,
TACOS, 2023, Section V-B).

Every missing postcondition pair ``(chunk c, node n)``, in ``(c, n)`` order, is routed from the
holder that can deliver it earliest (its holding time plus the delay-weighted distance; ties to
the lowest node id) along that holder's shortest-path tree; every hop starts at the earliest
timestep after the chunk is at the hop's source (and after ``start``) at which the link pair
has a free unit of capacity for all ``delay`` timesteps it occupies; it arrives the pair's
``latency`` timesteps after them (a pipelined latency, :mod:`collsynth.tens.ten`). Hops into nodes an earlier
route already reached reuse that arrival. A switch node stores nothing (TE-CCL, Liu et al.,
SIGCOMM 2024, Section 4), so the hops through switches leave right after they arrive (in the
timestep after, or the same timestep into an NPU with an instant switch hop): such a
run of hops starts at the first timestep at which all of them find capacity, and no switch
counts as a holder; every route forwards each arrival once, valid with and without switch copy. The loop is sequential (each route takes capacity
the next one sees), so it is compiled (numba); a 32x32 torus allgather (a million pairs) takes
about a second instead of minutes in Python.
"""

from __future__ import annotations

import numba
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from ...limits import checkpoint
from ...tens import ten

PAIRS_PER_CALL = 1 << 16  # missing (chunk, node) pairs routed by one call of the compiled loop


@numba.njit(cache=True)
def _route_all(when, cs, ns, first, last, group, dist, pred, out_start, out_dst, delay, latency, capacity, switch,
               instant, start, rows, count, load):
    """Route pairs ``first .. last - 1`` of ``cs, ns``: fill ``rows`` (preallocated, ``count``
    filled before) with ``(chunk, pair, arrival)``, booking link use in ``load``; returns
    (count, -1, load) or (count, index of a pair whose chunk cannot reach its node, load).
    ``instant``: a hop from a switch to an NPU starts in the timestep the chunk arrived there
    (else, and always to a switch, the one after)."""
    S = when.shape[1]
    path = np.empty(S + 1, np.int64)
    holders = np.empty(S, np.int64)  # nodes holding the current chunk (pairs come chunk by chunk)
    nh = 0
    current = -1
    for i in range(first, last):
        c, n = cs[i], ns[i]
        if c != current:
            current = c
            nh = 0
            for u in range(S):
                if when[c, u] >= 0:
                    holders[nh] = u
                    nh += 1
        if when[c, n] >= 0:
            continue
        g = group[c]
        h = _nearest_holder(when, dist[g], c, n, holders, nh)
        if h < 0 or not np.isfinite(dist[g, h, n]):
            return count, i, load
        m = _path_to(pred[g], h, n, path)
        t = when[c, h]
        j = m
        while j > 0:  # hop j goes path[j] -> path[j - 1]; through switches hops follow without a pause
            e = j
            while e > 1 and switch[path[e - 1]]:
                e -= 1
            v = path[e - 1]
            if when[c, v] >= 0:  # already there (an earlier route passed by)
                t = when[c, v]
                j = e - 1
                continue
            s = max(t + 1, start + 1)
            while True:
                free, load = _run_is_free(load, path, j, e, s, out_start, out_dst, delay[g], latency, capacity, switch,
                                          instant)
                if free:
                    break
                s += 1
            count, s = _book_run(load, rows, count, c, path, j, e, s, out_start, out_dst, delay[g], latency, switch,
                                 instant)
            t = s - 1
            when[c, v] = t
            holders[nh] = v
            nh += 1
            j = e - 1
    return count, -1, load


@numba.njit(cache=True)
def _nearest_holder(when, dist, c, n, holders, nh):
    """The holder of chunk ``c`` that can deliver it to ``n`` earliest (ties: lowest id), -1 if none."""
    h = -1
    best = np.inf
    for j in range(nh):
        u = holders[j]
        eta = when[c, u] + dist[u, n]
        if eta < best or (eta == best and u < h):
            best = eta
            h = u
    return h


@numba.njit(cache=True)
def _path_to(pred, h, n, path):
    """The shortest path from ``h`` to ``n`` backwards into ``path`` (``path[0] = n``); its hops."""
    m = 0
    v = n
    path[m] = v
    while v != h:
        v = pred[h, v]
        m += 1
        path[m] = v
    return m


@numba.njit(cache=True)
def _pair(out_start, out_dst, a, b):
    lo, hi = out_start[a], out_start[a + 1]
    return lo + np.searchsorted(out_dst[lo:hi], b)


@numba.njit(cache=True)
def _run_is_free(load, path, j, e, s, out_start, out_dst, delay, latency, capacity, switch, instant):
    """Whether hops ``j .. e`` of ``path``, the first starting at ``s``, all find capacity;
    ``load`` (grown when the run reaches past its end)."""
    x = s
    for q in range(j, e - 1, -1):
        b = path[q - 1]
        l = _pair(out_start, out_dst, path[q], b)
        k = delay[l]
        if x + k > load.shape[1]:
            grown = np.zeros((load.shape[0], 2 * (x + k)), np.int32)
            grown[:, :load.shape[1]] = load
            load = grown
        for tau in range(x, x + k):
            if load[l, tau] >= capacity[l]:
                return False, load
        x += k + latency[l] - (1 if instant and switch[b] and not switch[path[q - 2]] else 0)
    return True, load


@numba.njit(cache=True)
def _book_run(load, rows, count, c, path, j, e, s, out_start, out_dst, delay, latency, switch, instant):
    """Take the capacity of hops ``j .. e`` starting at ``s`` and write their rows; returns the
    row count and the timestep after the run's last arrival."""
    for q in range(j, e - 1, -1):
        b = path[q - 1]
        l = _pair(out_start, out_dst, path[q], b)
        k = delay[l]
        for tau in range(s, s + k):
            load[l, tau] += 1
        rows[count, 0] = c
        rows[count, 1] = l
        rows[count, 2] = s + k - 1 + latency[l]
        s += k + latency[l] - (1 if instant and switch[b] and not switch[path[q - 2]] else 0)
        count += 1
    return count, s


def recover(data: ten.TenData, held: np.ndarray, start: int, avail: np.ndarray | None = None) -> np.ndarray:
    """Deliver every missing postcondition pair along delay-shortest paths after ``start``
    (module doc). ``held`` (bool [chunk, node], the model's direction) is what is held at the
    end of timestep ``start``; ``avail[c, n]`` optionally gives when a holder got the chunk
    (default: ``start``). Returns rows ``(chunk, pair, arrival)``."""
    checkpoint("recovery", "before the shortest-path delivery")  # the run's clock, before the compiled loop
    C, S = held.shape
    held = held & ~data.switch[None, :]  # a switch stores nothing: what reached it is gone
    need = data.post & ~held
    if not need.any():
        return np.zeros((0, 3), np.int64)
    G = data.delay.shape[0]
    dist = np.empty((G, S, S))
    pred = np.empty((G, S, S), np.int64)
    for g in range(G):
        adj = sp.csr_matrix((data.lag[g].astype(float), (data.src, data.dst)), shape=(S, S))
        d, p = dijkstra(adj, directed=True, return_predecessors=True)
        dist[g], pred[g] = d, p
    when = np.where(held, start, -1).astype(np.int64)
    if avail is not None:
        when = np.where(held, np.minimum(when, avail), -1).astype(np.int64)
    cs, ns = np.nonzero(need)  # row-major: sorted by (chunk, node)
    out_start = np.searchsorted(data.src, np.arange(S + 1))  # pairs are sorted by (src, dst)
    # at most one arrival per pair not held, plus one per switch a route passes
    rows = np.empty((int((~held).sum()) + int(need.sum()) * int(data.switch.sum()), 3), np.int64)
    count, load = 0, np.zeros((len(data.capacity), int(start) + 64), np.int32)
    args = (data.group.astype(np.int64), dist, pred, out_start.astype(np.int64), data.dst.astype(np.int64),
            data.delay.astype(np.int64), data.latency.astype(np.int64), data.capacity.astype(np.int64),
            data.switch.astype(np.bool_), bool(data.switch_instant), int(start), rows)
    cs, ns = cs.astype(np.int64), ns.astype(np.int64)
    for first in range(0, len(cs), PAIRS_PER_CALL):  # the clock checked between calls of the compiled loop
        checkpoint("recovery", f"{first:,} of {len(cs):,} missing pairs delivered")
        count, bad, load = _route_all(when, cs, ns, first, min(len(cs), first + PAIRS_PER_CALL), *args, count, load)
        if bad >= 0:
            raise RuntimeError(f"chunk {int(cs[bad])} cannot reach node {int(ns[bad])}")
    return rows[:count].copy()


def recovery_schedule(instance, timestep=None, switch_copy: bool = ten.SWITCH_COPY):
    """The pure shortest-path delivery schedule from the precondition: (data, rows, steps).

    Its length is the "recovery bound" early termination and time clustering never exceed.
    """
    data = ten.prepare(instance, 1, None, timestep, switch_copy=bool(switch_copy))  # valid either way
    rows = recover(data, data.pre, 0)
    steps = int(rows[:, 2].max()) if len(rows) else 0
    return data, rows, steps


def recovery_steps(instance, timestep=None, switch_copy=ten.SWITCH_COPY) -> int | None:
    """The recovery schedule's length, or None when one TEN direction cannot carry the
    instance (allreduce, combining mixed with non-combining collectives)."""
    try:
        return recovery_schedule(instance, timestep, switch_copy)[2]
    except ten.NotSupported:
        return None
