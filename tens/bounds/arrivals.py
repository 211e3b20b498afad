"""The ``arrivals`` bound: what one node can take in per TEN timestep, each chunk no earlier than its release.

Part of :mod:`collsynth.tens.bounds` (its module documentation describes every argument).
"""

from __future__ import annotations

import time

import numpy as np

from ..ten import INF, reach
from .record import Bound, _ranges, not_computed


# ---- arrivals at one node, with release times ------------------------------------------------

ARRIVAL_CELLS = 4_000_000  # chunks x nodes above which the arrival bound is not computed (memory, time)
ARRIVAL_BUDGET_S = 1.0  # seconds the arrival bound may spend on nodes (at most the models' budget)


def _too_many_cells(chunks: int, nodes: int) -> Bound | None:
    """The arrival bound refused for an instance of over :data:`ARRIVAL_CELLS` chunks x nodes."""
    if chunks * nodes <= ARRIVAL_CELLS:
        return None
    return not_computed("timesteps", "arrivals", f"{chunks} chunks x {nodes} nodes is over {ARRIVAL_CELLS} cells")


def arrival_bound(data, budget_s: float = ARRIVAL_BUDGET_S) -> Bound:
    """TEN timesteps from the arrivals one node must take in, each no earlier than it can come.

    A node ``v`` takes in at most ``m`` chunks per timestep, the capacity of its in-links
    added up (the sends arriving over a pair at the end of one timestep all started in the
    same timestep). Every chunk ``v`` needs has a release time ``r_c``, the first timestep
    any piece of it can reach ``v`` (its delay-weighted distance from the nearest holder,
    :func:`collsynth.tens.ten.reach`). If ``N`` of them cannot arrive before ``theta``, they
    arrive in ``theta .. T`` at ``m`` per timestep: ``T >= theta - 1 + ceil(N / m)`` (the
    release-date bound of one-machine sequencing, Carlier, "The one-machine sequencing
    problem", European Journal of Operational Research 11(1), 1982, Section 2, here with unit
    jobs on ``m`` parallel machines).

    The releases are raised by a node set ``S`` around ``v``: the chunks no node of ``S``
    holds must cross the pairs entering ``S``; pair ``l`` delivers at most ``cap_l *
    (floor((tau - e_l - lag_l) / k_l) + 1)`` of them by the end of ``tau`` (its first send
    starts once one is at its tail, ``e_l`` timesteps in; then ``cap_l`` per ``k_l``
    timesteps, :class:`TimestepSupply`) and what reaches ``v`` by ``tau`` crossed a pair
    ``l`` by ``tau - d(head_l, v)``. So of those ``n_O`` chunks at least ``n_O - sum_l
    supply_l(theta - 1 - d(head_l, v))`` arrive at ``v`` at or after ``theta``, whichever they
    are. ``S`` ranges over the balls ``{u : d(u, v) <= rho}``, the sets whose entering links
    are the last ones a chunk crosses on its way to ``v``. Pieces of chunks obey the same
    counts (a piece reaches ``v`` no earlier than its chunk's release, and the links carry
    pieces adding up to their capacity), so the bound holds for every schedule that respects
    the TEN's link capacity.

    ``data`` is a TEN's :class:`~collsynth.tens.ten.TenData` (any horizon; switch nodes
    copying or not); only chunks of non-combining collectives are counted (a subset of what
    must arrive still bounds). Nodes are tried farthest first within ``budget_s`` seconds,
    one of each set with the same in-capacity, releases and distances (on a symmetric
    topology, one per orbit); every node tried gives a valid bound, so a search cut short
    still returns one.
    """
    t0 = time.perf_counter()
    C, S = data.pre.shape
    if (refused := _too_many_cells(C, S)) is not None:
        return refused
    plain = np.array([not c.combining for c in data.instance.collectives], bool)[data.group]
    need = data.post & ~data.pre & plain[:, None]
    if not need.any():
        return Bound(0, "timesteps", "timesteps", "arrivals", None)
    earliest = reach(data)[0]
    if (np.where(need, earliest, 0) >= INF).any():
        return not_computed("timesteps", "arrivals", "a needed chunk cannot reach its node")
    value, witness, note = _best_node(data, need, earliest, budget_s, t0)
    return Bound(int(value), "timesteps", "timesteps", "arrivals", witness, note)


def _best_node(data, need: np.ndarray, earliest: np.ndarray, budget_s: float, t0: float) -> tuple[int, str, str]:
    """The best ``(value, witness, note)`` of :func:`_arrivals_at` over the nodes that need
    something, farthest first, one node per set of equal in-capacity, releases and distances,
    until ``budget_s`` seconds after ``t0``."""
    lag, delay = data.lag.min(axis=0), data.delay.min(axis=0)
    dist = data.dist.min(axis=0)
    m_in = np.zeros(data.pre.shape[1], np.int64)
    np.add.at(m_in, data.dst, data.capacity)
    nodes = np.flatnonzero(need.any(axis=0))
    nodes = nodes[np.argsort(-np.where(need[:, nodes], earliest[:, nodes], 0).max(axis=0), kind="stable")]
    top, seen = (0, None, ""), set()
    for v in nodes.tolist():
        rows = np.flatnonzero(need[:, v])
        key = (int(m_in[v]), np.sort(earliest[rows, v]).tobytes(), np.sort(dist[:, v]).tobytes())
        if key in seen:  # the same releases and distances (a symmetric node, most likely): skipped
            continue
        seen.add(key)
        found = _arrivals_at(data, need, earliest, v, int(m_in[v]), lag, delay, dist)
        if found[0] > top[0]:
            top = found
        if time.perf_counter() - t0 > budget_s:
            break
    return top


def _arrivals_at(data, need, earliest, v: int, m: int, lag, delay, dist) -> tuple[int, str, str]:
    """The arrival bound at node ``v`` (see :func:`arrival_bound`): ``(value, witness, note)``."""
    rows = np.flatnonzero(need[:, v])
    release = earliest[rows, v]
    n = len(rows)
    horizon = int(release.max()) + 1
    theta = np.arange(1, horizon + 1)
    counts = np.searchsorted(np.sort(release), theta, side="left")  # releases before theta
    late = n - counts
    best = _best_theta(theta, late, m, f"v={v}", "")
    reach_v = dist[:, v]
    for rho in np.unique(reach_v[np.isfinite(reach_v)])[:-1].tolist():
        inside = reach_v <= rho
        outside = rows[~data.pre[rows][:, inside].any(axis=1)]
        arcs = np.flatnonzero(inside[data.dst] & ~inside[data.src])
        if not len(outside) or not len(arcs):
            continue
        e = earliest[np.ix_(outside, data.src[arcs])].min(axis=0)
        d = reach_v[data.dst[arcs]]
        n_out = len(outside)
        cap, k = data.capacity[arcs], delay[arcs]
        first = e + lag[arcs] + d  # first timestep a crossing over each pair can be at v
        span = int((first + k * -(-n_out // cap)).min()) + 1  # by then one pair alone has delivered them all
        th = np.arange(1, max(horizon, span + 1) + 1)
        tau = th[None, :] - 1 - first[:, None]
        supply = np.where(tau >= 0, cap[:, None] * (tau // k[:, None] + 1), 0).sum(axis=0)
        local = rows[data.pre[rows][:, inside].any(axis=1)]
        rel_in, rel_out = np.sort(earliest[local, v]), np.sort(earliest[outside, v])
        late = ((len(rel_in) - np.searchsorted(rel_in, th, side="left"))
                + np.maximum(len(rel_out) - np.searchsorted(rel_out, th, side="left"), n_out - supply))
        members = np.flatnonzero(inside).tolist()
        found = _best_theta(th, late, m, f"v={v} S={{{_ranges(members)}}}",
                            f"{n_out} chunks must enter S over {len(arcs)} pairs")
        if found[0] > best[0]:
            best = found
    return best


def _best_theta(theta: np.ndarray, late: np.ndarray, m: int, witness: str, why: str) -> tuple[int, str, str]:
    """``max over theta of theta - 1 + ceil(late / m)`` where ``late > 0``, with its witness."""
    ok = late > 0
    if not ok.any():
        return 0, witness, why
    vals = np.where(ok, theta - 1 + -(-late // m), 0)
    i = int(np.argmax(vals))
    note = f"{int(late[i])} chunks arrive at or after timestep {int(theta[i])}, {m} per timestep"
    return int(vals[i]), witness, f"{why}; {note}" if why else note
