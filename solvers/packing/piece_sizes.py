"""Pipeline pieces of unequal size: the least synchronous price of given trees, by a linear program.

Trees plus a pipeline rule (:mod:`collsynth.tens.pipelined_trees`) send piece ``q`` of every
tree at depth ``d`` below its root in step ``q + d + 1``. Under the synchronous alpha-beta
model (Zhao et al., "Efficient Direct-Connect Topologies for Collective Communications", NSDI
2025, Section 3.2) a step costs the largest alpha of its links plus the largest load over
bandwidth, so with equal pieces every depth that is not the bottleneck costs a piece's time on
the bottleneck before the pipeline fills and after it drains. With ``P`` pieces of fractions
``x_0 .. x_(P-1)`` of a chunk, step ``t`` costs ``max_j sum_d x_(t-d-1) cost[d, j]``
(:func:`collsynth.tens.pipelined_trees.depth_costs`) plus alphas that do not depend on ``x``
(every piece is sent), so the best fractions solve the linear program

    minimise ``sum_t z_t``  subject to  ``z_t >= sum_d x_(t-d-1) cost[d, j]`` for every step
    ``t`` and column ``j``, ``sum_q x_q = 1``, ``x_q >= 0``,

a few thousand rows (the columns are the distinct load patterns, a handful on identical boxes).
Its answer is the textbook shape where a fast stage follows a slow one: equal pieces while the
pipeline is full, then a geometric tail whose ratio lets the fast stage drain each piece within
the next one's time on the slow stage. DGX H100 x64, 1 GiB allgather: the ``sync`` price of the
same trees 1.101 -> 1.080 x latency plus cut optimum; with switches that multicast
(:func:`collsynth.solvers.packing.compact.multicast`) 1.035, which is within 0.3 % of the box
bound (:mod:`collsynth.tens.bounds.drain`; ``benchmarks/bench_clusters.py``). The fractions are
rounded to edges in ``1 / UNIT`` of a chunk and the schedule is priced from those edges, so the
rounding costs what it costs and nothing is assumed.

>>> import numpy as np
>>> from collsynth.instances import make_instance
>>> from collsynth.instances.generators import build
>>> from collsynth.tens.pipelined_trees import PipelinedTrees, price_sync
>>> inst = make_instance(build("ring", {"nodes": 3}), "allgather", message_bytes=3e9)
>>> hops = [(0, 1, 0), (1, 2, 1), (1, 2, 0), (2, 0, 1), (2, 0, 0), (0, 1, 1)]
>>> f = PipelinedTrees("allgather", 3, 3, 1, 4, 1, np.array([0, 1, 2]), np.array([0, 0, 0]),
...                    np.array([1, 1, 1]), np.array([0, 2, 4, 6]), *map(np.array, zip(*hops)))
>>> g = sized(f, inst, 4)  # every link loaded alike: no better than equal pieces, no worse
>>> len(g.edges), round(price_sync(g, inst).total_s / price_sync(f, inst).total_s, 6)
(5, 1.0)
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from scipy import sparse
from scipy.optimize import linprog

from ...limits import seconds_left
from ...tens.pipelined_trees import PipelinedTrees, depth_costs, price_sync

UNIT = 1 << 16  # piece edges are multiples of 1 / UNIT of a chunk
MAX_ROWS = 400_000  # the linear program's rows (steps x columns) above which sizes stay equal


def sized(f: PipelinedTrees, instance, pieces: int, time_limit: float | None = None) -> PipelinedTrees | None:
    """``f`` cut into ``pieces`` pieces per chunk of the sizes of least ``sync`` price (module
    doc), rounded to edges in ``1 / UNIT`` of a chunk; None when the program is larger than
    :data:`MAX_ROWS` rows, ``pieces`` exceeds ``UNIT``, or the solver fails or reaches
    ``time_limit`` seconds or the time left to the run (:func:`collsynth.limits.seconds_left`)."""
    depths, cost, _ = depth_costs(f, instance)
    c = f.chunks_per_root
    P = c * pieces
    steps = P + int(depths.max(initial=0))
    if pieces > UNIT // 2 or cost.size == 0 or steps * cost.shape[1] > MAX_ROWS:
        return None
    q = np.arange(steps)[:, None] - depths[None, :]  # [step, depth] -> piece sent
    t_idx, d_idx = np.nonzero((q >= 0) & (q < P))
    var = q[t_idx, d_idx] % pieces  # every chunk is cut alike
    J = cost.shape[1]
    rows = (t_idx[:, None] * J + np.arange(J)[None, :]).ravel()
    A = sparse.coo_matrix((cost[d_idx].ravel(), (rows, np.repeat(var, J))), shape=(steps * J, pieces))
    A = sparse.hstack([A, -sparse.kron(sparse.identity(steps), np.ones((J, 1)))]).tocsr()
    least = 2.0 / UNIT
    left = seconds_left(time_limit)  # HiGHS runs in C, where the run's timer cannot stop it: its own limit
    res = linprog(np.r_[np.zeros(pieces), np.ones(steps)], A_ub=A, b_ub=np.zeros(steps * J),
                  A_eq=np.r_[np.ones(pieces), np.zeros(steps)][None, :], b_eq=[1.0],
                  bounds=[(least, None)] * pieces + [(0, None)] * steps, method="highs",
                  options={} if left is None else {"time_limit": left})
    if res.status != 0:
        return None
    return replace(f, pieces=int(pieces), cuts=edges_of(res.x[:pieces]))


def edges_of(x: np.ndarray, unit: int = UNIT) -> np.ndarray:
    """Increasing integer edges ``0 .. unit`` whose steps are nearest the fractions ``x``
    (normalised), each piece at least one unit.

    >>> edges_of(np.array([0.5, 0.25, 0.25]), 8).tolist()
    [0, 4, 6, 8]
    """
    P = len(x)
    e = np.rint(np.cumsum(x) / x.sum() * unit).astype(np.int64)
    e = np.r_[0, e[:-1], unit]
    for i in range(1, P):
        e[i] = max(e[i], e[i - 1] + 1)
    for i in range(P - 1, 0, -1):
        e[i] = min(e[i], e[i + 1] - 1)
    return e


def least_sized(f: PipelinedTrees, instance, around: int) -> tuple[PipelinedTrees, object] | None:
    """``(trees, price)`` of least ``sync`` price over unequal pieces (:func:`sized`) at piece
    counts from an eighth of ``around`` (the best count of equal pieces: unequal ones drain
    faster, so fewer steps pay) up to it, then the two midpoints beside the best; None when no
    program was solved."""
    priced: dict[int, tuple] = {}

    def at(p: int):
        if p not in priced:
            g = sized(f, instance, p)
            priced[p] = (g, price_sync(g, instance)) if g is not None else None
        return priced[p]

    for p in sorted({max(1, round(around * r)) for r in (1 / 8, 1 / 4, 3 / 8, 1 / 2, 3 / 4, 1)}):
        at(p)
    done = {p: v for p, v in priced.items() if v is not None}
    if not done:
        return None
    best = min(done, key=lambda p: done[p][1].total_s)
    for p in (best * 5 // 6, best * 6 // 5, best - 1, best + 1):
        if p >= 1:
            at(p)
    done = {p: v for p, v in priced.items() if v is not None}
    return min(done.values(), key=lambda v: v[1].total_s)
