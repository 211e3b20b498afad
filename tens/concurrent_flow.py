"""The concurrent flow optimum of collectives that never copy (all-to-all, scatter, gather), by LP.

In an all-to-all every source-destination pair ``(s, d)`` sends its own data (``M / N`` bytes)
from ``s`` to ``d`` and nobody else needs it, so any schedule that delivers everything by ``T``
carries, per pair, a flow from ``s`` to ``d`` (follow each byte's first arrival at ``d`` back
to ``s``), and on every link ``l`` the flows add up to at most ``B_l T`` bytes. The least such
``T`` is the maximum concurrent flow optimum (Shahrokhi and Matula, "The maximum concurrent
flow problem", J. ACM 37(2), 1990, Section 1):

    minimise tau  s.t.  f[s] is a flow from s meeting every demand of s,  sum_s f[s, l] <= b_l tau.

The commodities of one source are aggregated into one single-source flow with a demand at
every destination (exact for demands that never copy: a flow decomposition of it gives the
paths ``s -> d``; Liu et al., "Rethinking Machine Learning Collective Communication as a
Multi-Commodity Flow Problem", SIGCOMM 2024, Section 4; Ahuja, Magnanti and Orlin, "Network
Flows", 1993, Section 3.5), so the LP has sources x links variables. Every cut bound is a
special case (the data crossing from ``S`` out over ``B+(S)``), and the LP can be strictly
larger: a unidirectional 4-ring all-to-all loads every link with ``1 + 2 + 3 = 6`` pair units
(its optimum, 6 ``D / b``), while its best cut proves 4.

The value reported as a bound is re-proved from the LP's duals, so it is valid whatever the
solver's tolerances: for any link lengths ``y >= 0`` weak duality gives

    tau >= sum_(s,d) D_sd dist_y(s, d) / sum_l y_l b_l

(every unit of ``(s, d)`` crosses a path at least ``dist_y(s, d)`` long; the links carry at
most ``sum_l y_l b_l tau`` length-weighted units), computed with Dijkstra's shortest paths
(:func:`certified_ratio`). LP by HiGHS through :func:`scipy.optimize.linprog`.

A schedule wants more than the optimum: :func:`solve` then picks, among the flows within
:data:`SHORTEST_SLACK` of it, ones a pipelined schedule runs well, lexicographically. The
second solve carries the fewest link-units (short paths, no cycles). The third (``relays``)
moves flow that a compute node relays off the links that are tight in the second solve's
flows: it minimises link-units plus :data:`RELAY_WEIGHT` per unit that a compute node other
than its source sends over such a link (:func:`relayed_on_tight`). A link served first-come
first-served by ready time (the ``event`` cost model) sends all of its tail's own data, ready
at once, before anything the tail relays, so relayed data crosses a saturated link only after
the tail's own share, and every link after it on the path starves, then finishes late; where
the same optimum relays after its bottleneck instead (ForestColl's A100 boxes: the GPU in the
destination box forwards over NVLink rather than the GPU in the source box over its NIC), the
relaying link has room and nothing waits (1 GB all-to-all, alpha 0: 1.161x the bound under
``event`` without the third solve, 1.001x with it; ``benchmarks/bench_alltoall.py``).

>>> from collsynth.instances.generators import build
>>> ring = build("ring", {"nodes": 4, "bidirectional": False}, bandwidth=1.0, alpha=0.0)
>>> sol = solve(ring, pair_demands("alltoall", range(4)))
>>> round(sol.tau, 9), round(sol.certified, 9)
(6.0, 6.0)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

NEVER_COPY = ("alltoall", "scatter", "gather")  # kinds whose every piece has one source and one destination
SHORTEST_SLACK = 1e-7  # the second and third solves may exceed the optimum by this factor
TIGHT_SLACK = 1e-4  # a link loaded within this fraction of its capacity at the optimum is tight
RELAY_WEIGHT = 1.0  # the third solve's cost of a unit relayed over a tight link, in link-units


class FlowLPFailed(ValueError):
    """The LP solver stopped without an optimum (time limit, numerical trouble); says why."""


@dataclass(frozen=True)
class Demands:
    """What must go where: ``amount[i]`` units of pair data from ``src[i]`` to ``dst[i]``."""

    src: np.ndarray
    dst: np.ndarray
    amount: np.ndarray

    @property
    def sources(self) -> list[int]:
        """The distinct sources, in increasing order."""
        return sorted(set(self.src.tolist()))


def pair_demands(kind: str, nodes: Iterable[int], root: int | None = None) -> Demands:
    """One unit from every source to every destination of a non-copying collective over
    ``nodes``: all-to-all every ordered pair, scatter ``root -> d``, gather ``s -> root``.

    >>> pair_demands("gather", [0, 1, 2], root=1).src.tolist()
    [0, 2]
    """
    nodes = sorted(int(v) for v in nodes)
    if kind == "alltoall":
        pairs = [(s, d) for s in nodes for d in nodes if s != d]
    elif kind == "scatter":
        pairs = [(root, d) for d in nodes if d != root]
    elif kind == "gather":
        pairs = [(s, root) for s in nodes if s != root]
    else:
        raise ValueError(f"{kind} copies or combines data: not a concurrent flow")
    arr = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    return Demands(arr[:, 0], arr[:, 1], np.ones(len(arr)))


@dataclass(frozen=True)
class ConcurrentFlow:
    """The LP's answer: ``tau`` (time per unit of pair data, in units of one unit over
    ``unit_bw`` bytes/s), ``certified`` (the value re-proved from the duals, a valid bound),
    ``flow[i, l]`` the units of source ``sources[i]`` on link pair ``l`` (the topology's
    :attr:`link_arrays` order), and the dual ``lengths`` per link pair."""

    tau: float
    certified: float
    sources: tuple[int, ...]
    flow: np.ndarray
    lengths: np.ndarray
    unit_bw: float

    def seconds(self, pair_bytes: float, certified: bool = True) -> float:
        """The time for ``pair_bytes`` bytes per unit of demand (the certified value by default)."""
        return float((self.certified if certified else self.tau) * pair_bytes / self.unit_bw)


def _conservation(la, demands: Demands, sources: Sequence[int], size: int) -> tuple[sp.csr_matrix, np.ndarray]:
    """Rows ``(source i, node v != s)``: inflow minus outflow of source ``i``'s flow at ``v``
    equals its demand there; columns ``i * L + l``."""
    L, N = len(la.src), len(sources)
    node_rows = []
    for i, s in enumerate(sources):
        base = i * size
        cols = i * L + np.arange(L)
        node_rows.append((np.concatenate([base + la.dst, base + la.src]), np.concatenate([cols, cols]),
                          np.concatenate([np.ones(L), -np.ones(L)])))
    r, c, v = (np.concatenate(x) for x in zip(*node_rows))
    A = sp.csr_matrix((v, (r, c)), shape=(N * size, N * L + 1))
    rhs = np.zeros(N * size)
    index = {s: i for i, s in enumerate(sources)}
    np.add.at(rhs, [index[int(s)] * size + int(d) for s, d in zip(demands.src, demands.dst)], demands.amount)
    keep = np.ones(N * size, dtype=bool)
    keep[[i * size + s for i, s in enumerate(sources)]] = False  # the source's own row is implied
    return A[keep], rhs[keep]


def _capacity(la, N: int, b: np.ndarray) -> sp.csr_matrix:
    """Rows per link pair ``l``: ``sum_i flow[i, l] - b_l tau <= 0``."""
    L = len(la.src)
    rows = np.concatenate([np.tile(np.arange(L), N), np.arange(L)])
    cols = np.concatenate([np.arange(N * L), np.full(L, N * L)])
    vals = np.concatenate([np.ones(N * L), -b])
    return sp.csr_matrix((vals, (rows, cols)), shape=(L, N * L + 1))


def _check_reachable(la, demands: Demands, size: int) -> None:
    """Raise ValueError naming a destination that cannot be reached from its source."""
    graph = sp.csr_matrix((np.ones(len(la.src)), (la.src, la.dst)), shape=(size, size))
    hops = dijkstra(graph, indices=sorted(set(demands.src.tolist())), unweighted=True)
    where = {s: i for i, s in enumerate(sorted(set(demands.src.tolist())))}
    for s, d in zip(demands.src.tolist(), demands.dst.tolist()):
        if not np.isfinite(hops[where[s], d]):
            raise ValueError(f"node {d} cannot be reached from node {s}")


def _linprog(c, A_ub, A_eq, b_eq, bounds, time_limit: float | None):
    """HiGHS on the LP; raises :class:`FlowLPFailed` unless it found the optimum."""
    from scipy.optimize import linprog  # only when an LP is solved (a run without one never loads it)

    options = {"presolve": True}
    if time_limit is not None:
        options["time_limit"] = float(max(time_limit, 0.01))
    res = linprog(c, A_ub=A_ub, b_ub=np.zeros(A_ub.shape[0]), A_eq=A_eq, b_eq=b_eq, bounds=bounds,
                  method="highs", options=options)
    if res.status != 0:
        raise FlowLPFailed(f"the concurrent flow LP stopped: {res.message}")
    return res


def solve(topology, demands: Demands, shortest: bool = False, time_limit: float | None = None,
          relays: bool = False) -> ConcurrentFlow:
    """The concurrent flow optimum of ``demands`` on the live links of ``topology`` (module
    doc), its certified value and per-source flows. With ``shortest`` the flows are re-solved
    to carry the fewest link-units within :data:`SHORTEST_SLACK` of the optimum (no cycles,
    short paths: what a schedule wants); with ``relays`` too, once more for the least relaying
    over tight links (module doc). ``time_limit`` applies to each solve. Raises ValueError if a
    destination is unreachable, :class:`FlowLPFailed` if the solver stops early."""
    la = topology.link_arrays
    size, L = topology.size, len(la.src)
    _check_reachable(la, demands, size)
    sources = demands.sources
    unit_bw = float(la.bandwidth.max())
    b = la.bandwidth / unit_bw
    A_eq, b_eq = _conservation(la, demands, sources, size)
    A_ub = _capacity(la, len(sources), b)
    into_source = np.concatenate([la.dst == s for s in sources])  # flow of s back into s: never useful
    upper = np.where(into_source, 0.0, np.inf)
    bounds = np.column_stack([np.zeros(len(sources) * L + 1), np.append(upper, np.inf)])
    c = np.zeros(len(sources) * L + 1)
    c[-1] = 1.0
    first = _linprog(c, A_ub, A_eq, b_eq, bounds, time_limit)
    tau = float(first.x[-1])
    lengths = np.maximum(-np.asarray(first.ineqlin.marginals, dtype=float), 0.0)
    certified = certified_ratio(la, size, b, demands, lengths)
    x = first.x
    if shortest:
        bounds[-1] = (0.0, tau * (1 + SHORTEST_SLACK))
        c = np.append(np.ones(len(sources) * L), 0.0)
        x = _linprog(c, A_ub, A_eq, b_eq, bounds, time_limit).x
        if relays:
            flow = np.maximum(np.asarray(x[:-1]).reshape(len(sources), L), 0.0)
            penalty = RELAY_WEIGHT * relayed_on_tight(topology, sources, flow, tau / unit_bw)
            x = _linprog(np.append(1.0 + penalty.ravel(), 0.0), A_ub, A_eq, b_eq, bounds, time_limit).x
    flow = np.maximum(np.asarray(x[:-1]).reshape(len(sources), L), 0.0)
    return ConcurrentFlow(tau, certified, tuple(sources), flow, lengths, unit_bw)


def relayed_on_tight(topology, sources: Sequence[int], flow: np.ndarray, horizon: float) -> np.ndarray:
    """``mask[i, l]``: link pair ``l`` (the :attr:`link_arrays` order) is tight under ``flow``
    (its load, in units, is at least ``1 - TIGHT_SLACK`` of the ``bandwidth * horizon`` units
    it can carry: ``horizon`` is the optimum's time per unit) and its tail is a compute node
    other than ``sources[i]``: a unit of ``sources[i]`` there is relayed over a saturated link
    (module doc).

    >>> from collsynth.instances.topology import from_edges
    >>> t = from_edges(3, [(0, 1, {"bandwidth": 1.0}), (1, 2, {"bandwidth": 1.0}), (2, 0, {"bandwidth": 4.0})], alpha=0.0)
    >>> flow = np.asarray([[2.0, 1.0, 0.0]])  # source 0: 2 units to 1, 1 of them on to 2
    >>> relayed_on_tight(t, [0], flow, 2.0).astype(int).tolist()  # 1 -> 2 holds 2 units, carries 1
    [[0, 0, 0]]
    >>> relayed_on_tight(t, [0], flow, 1.0).astype(int).tolist()  # 1 -> 2 is full: 0's unit relayed by 1
    [[0, 1, 0]]
    """
    la = topology.link_arrays
    tight = flow.sum(axis=0) >= la.bandwidth * horizon * (1 - TIGHT_SLACK)
    compute = np.zeros(topology.size, dtype=bool)
    compute[list(topology.npus)] = True
    tail = la.src[None, :]
    return compute[tail] & (tail != np.asarray(sources)[:, None]) & tight[None, :]


def certified_ratio(la, size: int, b: np.ndarray, demands: Demands, lengths: np.ndarray) -> float:
    """``sum D_sd dist_y(s, d) / sum_l y_l b_l`` for link lengths ``y = lengths``: a lower
    bound on ``tau`` for any ``y >= 0`` by weak duality (module doc). 0 when every length is 0.
    Arcs of length 0 stay arcs (scipy keeps explicit zeros of a sparse graph as edges).

    >>> from collsynth.instances.generators import build
    >>> la = build("ring", {"nodes": 4, "bidirectional": False}, bandwidth=1.0, alpha=0.0).link_arrays
    >>> cut = np.asarray([1.0, 0.0, 0.0, 0.0])  # the link leaving node 0, alone: S = {0}
    >>> round(certified_ratio(la, 4, np.ones(4), pair_demands("alltoall", range(4)), cut), 6)
    6.0
    """
    top = float(lengths.max()) if len(lengths) else 0.0
    if top <= 0:
        return 0.0
    y = np.asarray(lengths, dtype=float)
    graph = sp.csr_matrix((y, (la.src, la.dst)), shape=(size, size))
    if graph.nnz != len(y):  # a dropped arc would lengthen paths: the ratio would not be a bound
        raise RuntimeError("the length graph lost an arc")
    sources = demands.sources
    dist = dijkstra(graph, indices=sources)
    row = {s: i for i, s in enumerate(sources)}
    total = sum(a * dist[row[s], d] for s, d, a in zip(demands.src.tolist(), demands.dst.tolist(),
                                                        demands.amount.tolist()))
    return float(total / float(np.dot(y, b)))
