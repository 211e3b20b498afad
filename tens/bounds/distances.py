"""Distance bounds: how far a needed chunk must travel from its nearest holder, and the volume bound.

Part of :mod:`collsynth.tens.bounds` (its module documentation describes every argument).
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import scipy.sparse as sp
from numba import njit
from scipy.sparse.csgraph import dijkstra

from ...instances.instance import Instance
from .cuts import _node_needs
from .demand import Arcs, Demand, arcs_of, demand_of
from .record import Bound, TOL, UNITS, not_computed


# ---- distances ------------------------------------------------------------------------------

# The distance matrices one instance's bounds reuse: the latest one as it is (float64), and every
# one whose finite entries are small whole numbers (hop counts) kept compact once another takes its
# place (:func:`_compact`: one or two bytes an entry instead of eight, restored exactly). At 16,384
# GPUs a matrix is 2.2 GB; two of them stayed resident after the bounds were done.
_PATHS: dict[str, np.ndarray] = {}
_COMPACT: dict[str, np.ndarray] = {}
PATH_BATCH = 1 << 20  # entries of the distance matrix one call computes


def shortest_paths(arcs: Arcs, arc_weight: np.ndarray, sources: np.ndarray) -> np.ndarray:
    """``arc_weight``-shortest path lengths ``[source, node]`` (scipy's Dijkstra; a breadth-first
    search when every weight is 1), kept for the few weightings one instance's bounds reuse
    (the latest as it is, earlier ones whose entries are whole numbers compact,
    :func:`release_paths`). Sources go in batches of about :data:`PATH_BATCH` entries, so a time
    limit can stop the search between two of them (one C call for thousands of sources takes
    seconds)."""
    w = np.asarray(arc_weight, dtype=float)
    if len(w) and w[0] > 1 and w[0] == int(w[0]) and bool((w == w[0]).all()):
        # a uniform integer weight (TEN delays): hop counts times it, exactly as Dijkstra sums it
        return w[0] * shortest_paths(arcs, np.ones(len(w)), sources)
    h = hashlib.sha1()
    for a in (arcs.src, arcs.dst, w, np.asarray(sources)):
        h.update(np.ascontiguousarray(a).tobytes())
    key = h.hexdigest()
    if key not in _PATHS:
        release_paths()  # the one kept as it is goes (compact when it can be) before another is made
        if key in _COMPACT:
            _PATHS[key] = _expanded(_COMPACT[key])
        else:
            _PATHS[key] = _dijkstra_rows(arcs, w, np.asarray(sources, np.int64))
    return _PATHS[key]


def _dijkstra_rows(arcs: Arcs, w: np.ndarray, sources: np.ndarray) -> np.ndarray:
    """The distance matrix of ``sources`` filled batch by batch (no second copy of it)."""
    adj = sp.csr_matrix((w, (arcs.src, arcs.dst)), shape=(arcs.size, arcs.size))
    unit = bool(len(w)) and bool((w == 1).all())
    step = max(1, PATH_BATCH // max(arcs.size, 1))
    D = np.empty((len(sources), arcs.size))
    for i in range(0, len(sources), step):
        D[i:i + step] = dijkstra(adj, directed=True, indices=sources[i:i + step], unweighted=unit)
    return D


def release_paths() -> None:
    """Drop the distance matrix kept as it is, keeping it compact when its finite entries are
    whole numbers below 65,535 (:func:`_compact`; the next request restores it exactly, without
    a search): what stays resident once the bounds are done."""
    for key, D in _PATHS.items():
        small = _compact(D)
        if small is not None:
            _COMPACT[key] = small
            while len(_COMPACT) > 2:
                _COMPACT.pop(next(iter(_COMPACT)))
    _PATHS.clear()


def _compact(D: np.ndarray) -> np.ndarray | None:
    """``D`` as uint8 (or uint16) when every finite entry is a whole number in ``0 .. 254``
    (``0 .. 65,534``), ``inf`` as the type's largest value; None otherwise. Read a block of
    rows at a time (:data:`PATH_BATCH` entries), so the check copies no more than a block.

    >>> D = np.array([[0.0, 3.0], [np.inf, 1.0]])
    >>> _compact(D).dtype.name, _expanded(_compact(D)).tolist() == D.tolist(), _compact(D + 0.5)
    ('uint8', True, None)
    """
    limit = np.iinfo(np.uint16).max
    top = 0.0
    for rows in _row_blocks(D):
        block = np.where(np.isinf(D[rows]), 0.0, D[rows])
        if not (block >= 0).all() or (block != np.floor(block)).any():
            return None
        top = max(top, float(block.max(initial=0.0)))
    if top >= limit:
        return None
    kind = np.uint8 if top < np.iinfo(np.uint8).max else np.uint16
    small = np.empty(D.shape, kind)
    for rows in _row_blocks(D):
        small[rows] = np.where(np.isinf(D[rows]), np.iinfo(kind).max, D[rows])
    return small


def _expanded(small: np.ndarray) -> np.ndarray:
    """The float64 matrix :func:`_compact` kept (its type's largest value as ``inf``)."""
    D = np.empty(small.shape)
    top = np.iinfo(small.dtype).max
    for rows in _row_blocks(small):
        D[rows] = np.where(small[rows] == top, np.inf, small[rows])
    return D


def _row_blocks(D: np.ndarray):
    """Slices of ``D``'s rows of about :data:`PATH_BATCH` entries each."""
    step = max(1, PATH_BATCH // max(D.shape[1] if D.ndim > 1 else 1, 1))
    return (slice(i, i + step) for i in range(0, len(D), step))


def distance(arcs: Arcs, demand: Demand, arc_weight: np.ndarray) -> tuple[float, tuple | None]:
    """Largest over needed (chunk, node) of the ``arc_weight``-shortest path it must travel.

    Non-combining: from its nearest holder; combining: from its farthest contributor (the
    result needs every contribution). Returns ``(value, (from, to))``; ``(0, None)`` when
    nothing must move and ``(inf, pair)`` when a needed chunk cannot reach its node.
    """
    if not len(demand):
        return 0.0, None
    srcs = np.flatnonzero(demand.pre.any(axis=0))
    D = shortest_paths(arcs, arc_weight, srcs)
    row_of = np.full(arcs.size, -1)
    row_of[srcs] = np.arange(len(srcs))
    far = np.full(len(demand), -np.inf)
    pairs = np.zeros((len(demand), 2), np.int64)
    single = ~demand.combining & (demand.pre.sum(axis=1) == 1)
    _farthest_of_single_holders(D, row_of, demand, np.flatnonzero(single), far, pairs)
    for r in np.flatnonzero(~single).tolist():
        H = np.flatnonzero(demand.pre[r])
        P = np.flatnonzero(demand.post[r] if demand.combining[r] else demand.post[r] & ~demand.pre[r])
        reach = column_reach(D, row_of[H], P, bool(demand.combining[r]))
        j = int(np.argmax(reach))
        column = D[row_of[H], P[j]]
        i = int(np.argmax(column) if demand.combining[r] else np.argmin(column))
        far[r], pairs[r] = reach[j], (H[i], P[j])
    r = int(np.argmax(far))  # the first row of the largest, as a scan in row order finds it
    if not far[r] > 0:
        return 0.0, None
    return float(far[r]), (int(pairs[r, 0]), int(pairs[r, 1]))


def column_reach(D: np.ndarray, rows: np.ndarray, cols: np.ndarray, farthest: bool) -> np.ndarray:
    """Per column ``j`` of ``cols``: the largest (``farthest``) or the least of ``D[rows, j]``,
    ``D[np.ix_(rows, cols)].max(axis=0)`` (or ``.min``) without building that submatrix (at
    16,384 GPUs a row of an allreduce's demand reads 16,384 x 16,384 distances, 2 GiB)."""
    if not len(rows) or not len(cols):
        sub = D[np.ix_(rows, cols)]
        return sub.max(axis=0) if farthest else sub.min(axis=0)
    return _column_reach(np.ascontiguousarray(D, dtype=float), np.asarray(rows, np.int64), np.asarray(cols, np.int64),
                         farthest)


@njit(cache=True, nogil=True)
def _column_reach(D, rows, cols, farthest):
    """:func:`column_reach`, row by row (the matrix is read in its stored order)."""
    out = D[rows[0]][cols]
    for i in rows[1:]:
        for x in range(len(cols)):
            d = D[i, cols[x]]
            if (d > out[x]) if farthest else (d < out[x]):
                out[x] = d
    return out


def _farthest_of_single_holders(D: np.ndarray, row_of: np.ndarray, demand: Demand, rows: np.ndarray,
                                far: np.ndarray, pairs: np.ndarray) -> None:
    """For the rows ``rows`` held by one node each: the farthest node needing the row's chunks
    (``far[r]``, ``pairs[r] = (holder, node)``, the first such node; ``-inf`` and node 0 for
    a row no node lacks)."""
    _farthest_kernel(np.ascontiguousarray(demand.pre), np.ascontiguousarray(demand.post), rows,
                     np.ascontiguousarray(D, dtype=float), row_of, far, pairs)


@njit(cache=True, nogil=True, inline='always')
def _holder(pre, r):
    """The first node holding row ``r`` (rows given to it have one)."""
    h = 0
    while not pre[r, h]:
        h += 1
    return h


@njit(cache=True, nogil=True)
def _farthest_kernel(pre, post, rows, D, row_of, far, pairs):
    """:func:`_farthest_of_single_holders` in one pass over the rows."""
    for r in rows:
        h = _holder(pre, r)
        best, node = -np.inf, 0
        for v in range(pre.shape[1]):
            if post[r, v] and not pre[r, v] and D[row_of[h], v] > best:
                best, node = D[row_of[h], v], v
        far[r] = best
        pairs[r, 0], pairs[r, 1] = h, node


def _distance_bound(model: str, arcs: Arcs, demand: Demand, arc_weight: np.ndarray, scale: float = 1.0) -> Bound:
    d, pair = distance(arcs, demand, arc_weight)
    if not math.isfinite(d):
        return not_computed(model, "distance", f"node {pair[1]} cannot be reached from {pair[0]}")
    value = int(round(d)) if model in ("timesteps", "steps") else d * scale
    return Bound(value, UNITS[model], model, "distance", None if pair is None else f"{pair[0]}->{pair[1]}")


def crossings(arcs: Arcs, demand: Demand, arc_weight: np.ndarray) -> np.ndarray:
    """Per row: the least total ``arc_weight`` its chunk's copies (or partial sums) spend on links.

    Non-combining: every node that needs the chunk receives it over one of its in-links, and
    the farthest of them is a path away from the nearest holder; combining: every contributor
    that does not need the result sends over one of its out-links, every target with a
    contributor elsewhere receives over one of its in-links, and the farthest contributor is
    a path away. The largest of these (per chunk).

    Combining chunks also obey the one-way gossip count (Harary and Schwenk, "The communication
    problem on graphs and digraphs", J. Franklin Institute, 1974: ``2n - 2`` one-way calls for
    ``n`` people to learn everything), with contributors ``A`` and targets ``B``: let ``x`` be
    a node that holds every contribution first (in a step-by-step order of the sends); before
    that every contributor but ``x`` has sent (its contribution left it), after it every target
    but ``x`` receives (it did not hold everything yet): ``|A| + |B| - 2`` distinct sends, each
    costing at least its sender's cheapest out-link or its receiver's cheapest in-link. An
    allreduce chunk over ``P`` ranks therefore crosses at least ``2P - 2`` links.
    """
    if not len(demand):
        return np.zeros(0)
    n = arcs.size
    w = arc_weight.astype(float)
    min_in = np.full(n, np.inf)
    np.minimum.at(min_in, arcs.dst, w)
    min_out = np.full(n, np.inf)
    np.minimum.at(min_out, arcs.src, w)
    srcs = np.flatnonzero(demand.pre.any(axis=0))
    D = shortest_paths(arcs, w, srcs)
    row_of = np.full(n, -1)
    row_of[srcs] = np.arange(len(srcs))
    out = np.zeros(len(demand))
    single = ~demand.combining & (demand.pre.sum(axis=1) == 1)
    _single_holder_crossings(np.ascontiguousarray(demand.pre), np.ascontiguousarray(demand.post),
                             np.flatnonzero(single), min_in, D, row_of, out)
    for r in np.flatnonzero(~single).tolist():
        pre, post = demand.pre[r], demand.post[r]
        H = np.flatnonzero(pre)
        if demand.combining[r]:
            P = np.flatnonzero(post)
            fed = post & ((pre.sum() - pre) > 0)  # targets with a contributor elsewhere
            gossip = (float(min_out[pre].sum()) + float(min_in[post].sum())
                      - float((np.where(pre, min_out, 0.0) + np.where(post, min_in, 0.0)).max()))
            spread = max(float(min_out[pre & ~post].sum()), float(min_in[fed].sum()), gossip)
            far = float(column_reach(D, row_of[H], P, True).max())
        else:
            P = np.flatnonzero(post & ~pre)
            spread = float(min_in[P].sum())
            far = float(column_reach(D, row_of[H], P, False).max())
        out[r] = max(spread, far)
    return out


@njit(cache=True, nogil=True)
def _single_holder_crossings(pre, post, rows, min_in, D, row_of, out):
    """:func:`crossings` of the non-combining ``rows`` held by one node each: the larger of
    the cheapest in-links of the nodes needing the chunk and the farthest of them from the
    holder (``D[row_of[holder]]``)."""
    for r in rows:
        h = _holder(pre, r)
        spread, far = 0.0, -np.inf
        for v in range(pre.shape[1]):
            if post[r, v] and not pre[r, v]:
                spread += min_in[v]
                far = max(far, D[row_of[h], v])
        out[r] = max(spread, far)


def warm(instance: Instance) -> None:
    """Compile (or load from numba's cache) the kernels that read the demand, on a small
    ``instance``: the per-node needs, the crossings and farthest nodes of rows with one
    holder, and the farthest of rows with several."""
    from .symmetric import warm as warm_symmetric

    arcs, demand = arcs_of(instance.topology), demand_of(instance)
    warm_symmetric()
    _node_needs(demand, demand.nbytes)
    crossings(arcs, demand, np.ones(len(arcs.src)))
    distance(arcs, demand, np.ones(len(arcs.src)))
    column_reach(np.zeros((2, 2)), np.arange(2), np.arange(1), True)  # rows held by several nodes


def _volume_bound(model: str, arcs: Arcs, demand: Demand, weight: np.ndarray, supply, convert=lambda p: p,
                  occupancy: np.ndarray | None = None, per_timestep: np.ndarray | None = None) -> Bound:
    """Every link at once (the set of all links): the demand times the links each chunk must
    cross (:func:`crossings`, one per hop) against what all links deliver; for TEN timesteps
    also the link-timesteps the chunks occupy (``occupancy``: delays) against ``T`` times the
    chunks the links carry per timestep (``per_timestep``, default their parallel links)."""
    hops = crossings(arcs, demand, np.ones(len(arcs.src)))
    need = float((weight * hops).sum())
    if not math.isfinite(need):
        return not_computed(model, "volume", "a needed chunk cannot reach its node")
    value = supply.smallest(np.arange(len(arcs.src)), need)
    if occupancy is not None:
        busy = float((demand.count * crossings(arcs, demand, occupancy)).sum())
        cap = arcs.cap if per_timestep is None else per_timestep
        value = max(value, int(math.ceil(busy / float(cap.sum()) - TOL)))
    return Bound(convert(value), UNITS[model], model, "volume", "all links")


def _alpha_weights(arcs: Arcs) -> tuple[np.ndarray, float]:
    """Arc latencies as Dijkstra weights (zero latencies become a tiny positive weight so
    the arc stays an edge) and the slack to subtract from a path's length."""
    tiny = 1e-300
    return np.maximum(arcs.alpha, tiny), tiny * max(1, arcs.size)
