"""BFB schedule LP (Zhao et al., NSDI 2025, Section 6.1, LP (3)): one small LP per (node u, comm step t).

Breadth-first broadcast: in step ``t`` every node ``u`` receives the shard of every source ``v``
with ``dist(v -> u) = t`` from its in-neighbours ``w`` with ``dist(v -> w) = t - 1`` (they all
hold that shard whole at the end of step ``t - 1``). LP (3) chooses the share ``x[v, w]`` of
``v``'s shard that ``w`` forwards, balancing the in-links of ``u``::

    minimise   U
    subject to sum_w x[v, w] = 1                      for every source v      (eq_share)
               sum_v x[v, w] <= U * capacity[w]       for every in-neighbour w (ineq_link_load)
               x >= 0

``capacity[w]`` is the number of parallel ``w -> u`` links, so ``U`` is the largest load of one
link into ``u`` in shards. The LPs of different ``(u, t)`` are independent (section 6.1);
:mod:`collsynth.solvers.bfb.per_step` solves them (in parallel, once per orbit on Cayley graphs)
and assembles the schedule.

Besides the Pyomo model this module gives the LP's optimum *in closed form*: by Theorem 19
(a max-flow/min-cut argument) ``U* = max over subsets Y of in-neighbours of
|{v : N(v) subset of Y}| / capacity(Y)``, where ``N(v)`` are ``v``'s admissible in-neighbours.
:func:`optimal_loads` evaluates it exactly (Fractions) for every ``(u, t)`` at once, vectorised;
it is what the topology finder and the BW-optimality checks use, and the tests cross-check it
against the LP solved by a backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import pyomo.core as pe

from ..instances.instance import Instance
from ..instances.topology import Topology
from ..tens.schedule import Schedule, from_arrays

NAME = "bfb-lp"


@dataclass(frozen=True)
class StepLP:
    """The data of LP (3) for node ``node`` and step ``step`` (plain arrays, picklable).

    ``sources[i]`` are the nodes ``v`` with ``dist(v -> node) = step``; ``neighbours[k]`` the
    in-neighbours of ``node`` with ``capacity[k]`` parallel links; the admissible pairs are
    ``(sources[pair_v[j]], neighbours[pair_w[j]])`` (``dist(v -> w) = step - 1``).
    """

    node: int
    step: int
    sources: np.ndarray
    neighbours: np.ndarray
    capacity: np.ndarray
    pair_v: np.ndarray
    pair_w: np.ndarray

    @property
    def trivial(self) -> bool:
        """True when every source has exactly one admissible in-neighbour (x is forced)."""
        return bool(np.all(np.bincount(self.pair_v, minlength=len(self.sources)) == 1))


def in_neighbours(topology: Topology, node: int) -> tuple[np.ndarray, np.ndarray]:
    """In-neighbours of ``node`` (sorted) and the number of parallel links from each."""
    la = topology.link_arrays
    sel = la.dst == node
    return la.src[sel], la.count[sel]


def step_data(topology: Topology, node: int, step: int, distances: np.ndarray | None = None) -> StepLP:
    """The data of LP (3) for ``(node, step)`` on ``topology`` (Zhao et al., NSDI 2025, Eq. (3))."""
    D = topology.distances if distances is None else distances
    nbrs, caps = in_neighbours(topology, node)
    sources = np.flatnonzero(D[:, node] == step).astype(np.int64)
    if step < 1 or len(sources) == 0:
        z = np.zeros(0, np.int64)
        return StepLP(node, step, z, nbrs, caps, z, z)
    ok = D[np.ix_(sources, nbrs)] == step - 1
    pv, pw = np.nonzero(ok)
    return StepLP(node, step, sources, nbrs, caps, pv.astype(np.int64), pw.astype(np.int64))


# ---- the Pyomo model -------------------------------------------------------------------------

def build(instance: Instance | Topology, horizon: int | None = None, state: Any = None, *,
          node: int = 0, step: int = 1, data: StepLP | None = None, **params) -> pe.ConcreteModel:
    """LP (3) of Zhao et al., NSDI 2025 for ``(node, step)`` of ``instance``'s topology.

    ``horizon`` and ``state`` are part of the formulation interface and unused (a BFB LP is one
    comm step of one node). Pass ``data`` (from :func:`step_data`) to skip recomputing it.
    """
    if data is None:
        topo = instance.topology if isinstance(instance, Instance) else instance
        data = step_data(topo, node, step)
    return build_step(data)


def step_sets(m: pe.ConcreteModel, data: StepLP) -> tuple[list, dict, dict]:
    """Declare the SETS shared by the BFB step models (LP (3), IP (12), LP (13)) on ``m``:
    ``SOURCES`` (v with dist(v -> u) = t), ``NEIGHBOURS`` (in-neighbours w of u) and ``PAIRS``
    (v, w) with dist(v -> w) = t - 1. Returns the neighbour list and the pairs grouped by
    source and by neighbour (for the share and link-load rows)."""
    src = data.sources.tolist()
    nb = data.neighbours.tolist()
    pairs = [(src[i], nb[k]) for i, k in zip(data.pair_v.tolist(), data.pair_w.tolist())]
    m.SOURCES = pe.Set(initialize=src, ordered=True, doc="sources v with dist(v -> u) = t")
    m.NEIGHBOURS = pe.Set(initialize=nb, ordered=True, doc="in-neighbours w of u")
    m.PAIRS = pe.Set(dimen=2, initialize=pairs, ordered=True, doc="(v, w) with dist(v -> w) = t - 1")
    by_v: dict[int, list] = {v: [] for v in src}
    by_w: dict[int, list] = {w: [] for w in nb}
    for v, w in pairs:
        by_v[v].append((v, w))
        by_w[w].append((v, w))
    return nb, by_v, by_w


def build_step(data: StepLP) -> pe.ConcreteModel:
    """The Pyomo model of one :class:`StepLP`."""
    m = pe.ConcreteModel(name=f"bfb-lp u={data.node} t={data.step}")
    # SETS
    nb, by_v, by_w = step_sets(m, data)
    # PARAMETERS
    m.capacity = pe.Param(m.NEIGHBOURS, initialize=dict(zip(nb, data.capacity.tolist())),
                          doc="parallel links w -> u")
    # VARIABLES
    m.x = pe.Var(m.PAIRS, domain=pe.NonNegativeReals, bounds=(0, 1),
                 doc="share of v's shard that w forwards to u in step t")
    m.U = pe.Var(domain=pe.NonNegativeReals, doc="largest load of one link into u (shards)")
    # CONSTRAINTS
    share_and_load_rows(m, m.x, by_v, by_w, whole=1, unit="shard")
    m._bfb_data = data
    return m


def share_and_load_rows(m: pe.ConcreteModel, share: pe.Var, by_v: dict, by_w: dict, whole, unit: str) -> None:
    """The rows every BFB step model shares (Zhao et al., NSDI 2025, LP (3) and IP (12)):
    u receives ``whole`` of each source's shard (``eq_share``), every ``w -> u`` link carries at
    most ``U`` per parallel link (``ineq_link_load``), and the objective minimises ``U``."""
    m.eq_share = pe.Constraint(m.SOURCES, rule=lambda m, v: sum(share[p] for p in by_v[v]) == whole,
                               doc=f"u receives all of v's shard (in {unit}s)")
    m.ineq_link_load = pe.Constraint(
        m.NEIGHBOURS,
        rule=lambda m, w: (sum(share[p] for p in by_w[w]) <= m.U * m.capacity[w]) if by_w[w] else pe.Constraint.Skip,
        doc="load of each w -> u link at most U")
    m.obj = pe.Objective(expr=m.U, sense=pe.minimize, doc="minimise the largest link load")


def values(model: pe.ConcreteModel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The solved shares as arrays ``(v, w, x)`` (floats), in the model's pair order."""
    data: StepLP = model._bfb_data
    v = data.sources[data.pair_v]
    w = data.neighbours[data.pair_w]
    x = np.array([model.x[p].value or 0.0 for p in model.PAIRS], dtype=np.float64)
    return v, w, x


def bound(model: pe.ConcreteModel) -> float | None:
    """The optimal link load U of the solved LP (an LP's optimum is its own bound)."""
    return None if model.U.value is None else float(model.U.value)


def extract(model: pe.ConcreteModel, chunks_per_node: int = 1, nodes: int | None = None) -> Schedule:
    """The sends of this ``(u, t)``: exact rational pieces of each source's shard (one step).

    The LP's floats are made exact by :func:`rationalize`; pieces of one source are laid out
    at consecutive ``[lo, hi)`` in neighbour order.
    """
    data: StepLP = model._bfb_data
    v, w, x = values(model)
    num, den = rationalize(v, x, optimum=bound(model), caps=None)
    u = np.full(len(v), data.node)
    t = np.full(len(v), data.step)
    n = int(nodes if nodes is not None else (max([data.node, *data.sources.tolist(), *data.neighbours.tolist()]) + 1))
    return pieces_schedule(v, w, u, t, num, den, n, chunks_per_node)


# ---- exact rational shares ---------------------------------------------------------------------

def _to_fractions(x: np.ndarray, max_den: int) -> list[Fraction]:
    return [Fraction(float(a)).limit_denominator(max_den) if a > 1e-12 else Fraction(0) for a in x]


def rationalize(group: np.ndarray, x: np.ndarray, optimum: float | None = None, caps=None,
                max_dens=(12, 60, 720, 5040, 55440, 720720)) -> tuple[np.ndarray, int]:
    """Exact shares from LP floats: integer numerators over one common denominator.

    Each value is replaced by ``Fraction.limit_denominator(q)``; the shares of each source
    (``group``) are repaired to sum to exactly 1 (the largest absorbs the difference). ``q``
    grows through ``max_dens`` until the common denominator reproduces the float solution to
    1e-9 (so the exact loads equal the LP's). Returns ``(numerators, denominator)``.
    """
    group = np.asarray(group)
    x = np.clip(np.asarray(x, dtype=np.float64), 0.0, 1.0)
    best = None
    for q in max_dens:
        fr = _to_fractions(x, q)
        den = 1
        for f in fr:
            den = den * f.denominator // np.gcd(den, f.denominator)
        num = np.array([f.numerator * (den // f.denominator) for f in fr], dtype=object)
        # repair: each group sums to exactly den
        order = np.argsort(group, kind="stable")
        g_sorted = group[order]
        starts = np.flatnonzero(np.r_[True, g_sorted[1:] != g_sorted[:-1]]) if len(order) else np.zeros(0, int)
        ends = np.r_[starts[1:], len(order)]
        for s, e in zip(starts.tolist(), ends.tolist()):
            idx = order[s:e]
            total = sum(num[i] for i in idx)
            if total != den:
                j = idx[int(np.argmax([x[i] for i in idx]))]
                num[j] += den - total
                if num[j] < 0:  # pathological: spread from zero
                    num[idx] = 0
                    num[j] = den
        err = np.max(np.abs(np.array([float(Fraction(int(a), den)) for a in num]) - x)) if len(x) else 0.0
        best = (np.array([int(a) for a in num], dtype=np.int64), int(den))
        if err <= 1e-9 and den < (1 << 40):
            return best
    return best


def pieces_schedule(v, w, u, t, num, den, nodes: int, chunks_per_node: int = 1,
                    collective: str = "allgather", meta: dict | None = None) -> Schedule:
    """Allgather sends from BFB shares: ``w -> u`` carries ``num/den`` of ``v``'s shard in step t.

    The pieces of one (source, receiver) are consecutive ``[lo, hi)`` in neighbour order, so
    they tile ``[0, 1)`` when the shares sum to 1. Each of the ``chunks_per_node`` chunks of a
    shard is split the same way (chunk id ``v*c + j``). Zero shares are dropped.
    """
    (v, w, u, t, num), lo = consecutive_shares(v, w, u, t, num)
    hi = lo + num
    c = int(chunks_per_node)
    j = np.tile(np.arange(c), len(v))
    rep = lambda a: np.repeat(a, c)  # noqa: E731
    return from_arrays(collective, nodes, nodes * c, chunk=rep(v) * c + j, lo=rep(lo), hi=rep(hi), src=rep(w),
                       dst=rep(u), step=rep(t), denom=den, meta=meta)


def consecutive_shares(v, w, u, t, amount) -> tuple[tuple, np.ndarray]:
    """The positive shares sorted by (source v, receiver u, neighbour w), and where each starts
    inside its (v, u) group: the shares of one source and receiver laid end to end.

    >>> cols, start = consecutive_shares([0, 0, 1], [2, 1, 1], [3, 3, 3], [1, 1, 1], [1, 2, 3])
    >>> [c.tolist() for c in cols], start.tolist()
    ([[0, 0, 1], [1, 2, 1], [3, 3, 3], [1, 1, 1], [2, 1, 3]], [0, 2, 0])
    """
    v, w, u, t, k = (np.asarray(a, dtype=np.int64) for a in (v, w, u, t, amount))
    keep = k > 0
    order = np.lexsort((w[keep], u[keep], v[keep]))
    v, w, u, t, k = (a[keep][order] for a in (v, w, u, t, k))
    end = np.cumsum(k)
    newg = np.r_[True, (v[1:] != v[:-1]) | (u[1:] != u[:-1])] if len(v) else np.zeros(0, bool)
    gstart = np.maximum.accumulate(np.where(newg, np.arange(len(v)), 0)) if len(v) else np.zeros(0, np.int64)
    return (v, w, u, t, k), (end - k) - (end - k)[gstart]


# ---- the optimum in closed form (Theorem 19) ------------------------------------------------------

MAX_SUBSET_DEGREE = 16


def hop_distances(topology: Topology) -> np.ndarray:
    """All-pairs hop distances ``D[v, u]`` (-1 unreachable), by level-synchronous BFS from every
    source at once (one sparse-times-dense product per level; faster than per-source Dijkstra
    on the low-degree graphs BFB is for). Equals ``topology.distances``."""
    import scipy.sparse as sp

    n = topology.size
    la = topology.link_arrays
    live = np.zeros(n, bool)
    live[list(topology.nodes)] = True
    At = sp.csr_matrix((np.ones(len(la), np.float32), (la.dst, la.src)), shape=(n, n))  # A^T
    Dt = np.full((n, n), -1, np.int64)  # Dt[u, v] = dist(v -> u)
    frontier = np.zeros((n, n), np.float32)  # frontier[u, v]: u reached from v at this level
    idx = np.flatnonzero(live)
    frontier[idx, idx] = 1.0
    Dt[idx, idx] = 0
    level = 0
    while True:
        level += 1
        new = ((At @ frontier) > 0) & (Dt < 0)  # [u, v]: u first reached from source v
        if not new.any():
            break
        Dt[new] = level
        frontier = new.astype(np.float32)
    return np.ascontiguousarray(Dt.T)


def optimal_loads(topology: Topology, transpose: bool = False) -> dict:
    """Optimal LP (3) values ``U*[u, t]`` for every node and step, exactly (Theorem 19).

    ``U*`` is the largest ``|{v : N(v) subset of Y}| / capacity(Y)`` over subsets ``Y`` of
    ``u``'s in-neighbours (fractional Hall condition). Vectorised over all ``(u, t)``.
    Returns ``{"U": {(u, t): Fraction}, "step_max": [Fraction per step], "received":
    count matrix [u, t], "bw_optimal": bool, "steps": diameter, "degree": d}``.

    Only for in-degrees up to :data:`MAX_SUBSET_DEGREE` (``2^d`` subsets per node).
    """
    topo = topology.transpose() if transpose else topology
    D = hop_distances(topo)
    ids = np.asarray(topo.npus, dtype=np.int64)
    sub = D[np.ix_(ids, ids)]
    if (sub < 0).any():
        raise ValueError("topology is not strongly connected")
    T = int(sub.max(initial=0))
    la = topo.link_arrays
    kmax = int(np.bincount(la.dst, minlength=topo.size).max(initial=0))
    if kmax > MAX_SUBSET_DEGREE:
        raise ValueError(f"in-neighbour count {kmax} > {MAX_SUBSET_DEGREE}: use the LP")
    n = topo.size
    Nb, Cap = _neighbour_table(la, n, kmax)
    hist = _admissible_histogram(D, ids, Nb, Cap, T)
    received = hist.sum(-1)
    f = _subset_sums(hist, kmax)
    nmask = 1 << kmax
    # capacity of Y: sum of caps of its bits
    capY = (((np.arange(nmask)[:, None] >> np.arange(kmax)[None, :]) & 1)[None, :, :] * Cap[:, None, :]).sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(capY[:, None, :] > 0, f / np.maximum(capY[:, None, :], 1), np.where(f > 0, np.inf, 0.0))
    arg = ratio.argmax(-1)  # [n, T+1]
    U: dict[tuple[int, int], Fraction] = {}
    step_max = [Fraction(0)] * (T + 1)
    live = set(ids.tolist())
    fa = np.take_along_axis(f, arg[..., None], -1)[..., 0]
    ca = np.take_along_axis(np.broadcast_to(capY[:, None, :], f.shape), arg[..., None], -1)[..., 0]
    for u in ids.tolist():
        for t in range(1, T + 1):
            if received[u, t] == 0:
                val = Fraction(0)
            else:
                val = Fraction(int(fa[u, t]), int(ca[u, t]))
            U[(u, t)] = val
            if val > step_max[t]:
                step_max[t] = val
    d = topo.out_degree_range[1]
    bw = all(U[(u, t)] == Fraction(int(received[u, t]), d) for u in live for t in range(1, T + 1))
    return {"U": U, "step_max": step_max[1:], "received": received, "bw_optimal": bw, "steps": T,
            "degree": d}


def _neighbour_table(la, n: int, kmax: int) -> tuple[np.ndarray, np.ndarray]:
    """In-neighbour table ``Nb[u, k]`` and its link counts ``Cap[u, k]``.

    Rows are padded with ``u`` itself (capacity 0), never admissible since
    ``D[v, u] - 1 != D[v, u]``.
    """
    order = np.lexsort((la.src, la.dst))
    dst, src, cnt = la.dst[order], la.src[order], la.count[order]
    first = np.searchsorted(dst, np.arange(n))
    pos = np.arange(len(dst)) - first[dst]
    Nb = np.tile(np.arange(n)[:, None], (1, kmax))
    Cap = np.zeros((n, kmax), np.int64)
    Nb[dst, pos] = src
    Cap[dst, pos] = cnt
    return Nb, Cap


def _admissible_histogram(D: np.ndarray, ids: np.ndarray, Nb: np.ndarray, Cap: np.ndarray,
                          T: int) -> np.ndarray:
    """``hist[u, t, mask]``: how many sources ``v`` at distance ``t`` from ``u`` have exactly the
    in-neighbours in ``mask`` on a shortest path (one step closer to ``v``)."""
    n, kmax = Nb.shape
    nmask = 1 << kmax
    hist = np.zeros((n, T + 1, nmask), np.int64)
    bits = (1 << np.arange(kmax)).astype(np.int64)
    block = max(1, int(4e6 // max(1, n * kmax)))
    for s in range(0, len(ids), block):  # sources in blocks to bound memory
        vs = ids[s:s + block]
        dv = D[vs]  # [b, n]: dist(v -> u)
        dvw = dv[:, Nb]  # [b, n, k]: dist(v -> Nb[u, k])
        admissible = (dvw == (dv[:, :, None] - 1)) & (Cap[None, :, :] > 0)
        mask = (admissible * bits).sum(-1)  # [b, n]
        valid = (dv >= 1)
        uu = np.broadcast_to(np.arange(n)[None, :], dv.shape)
        key = (uu[valid] * (T + 1) + dv[valid]) * nmask + mask[valid]
        hist += np.bincount(key, minlength=n * (T + 1) * nmask).reshape(n, T + 1, nmask)
    return hist


def _subset_sums(hist: np.ndarray, kmax: int) -> np.ndarray:
    """Zeta transform over subsets of the last axis: ``f[..., Y] = sum of hist[..., M]`` over
    masks ``M`` subset of ``Y``."""
    n, steps, nmask = hist.shape
    f = hist.copy()
    for k in range(kmax):
        b = 1 << k
        f = f.reshape(n, steps, -1, 2, b)
        f[:, :, :, 1, :] += f[:, :, :, 0, :]
        f = f.reshape(n, steps, nmask)
    return f
