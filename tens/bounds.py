"""Every lower bound the project reports, per cost model, each saying which argument proved it.

A bound is a :class:`Bound` record: its value (``None`` when it was not computed, with
``note`` saying why -- never 0 or a guess), its units and cost model, its ``source`` (the
argument) and its ``witness`` (the node set ``S``, the node, or the holder and target that
proved it). :func:`instance_bounds` computes all of them for an instance, once per process.

Models (what a bound of that model bounds)
------------------------------------------
``timesteps``
    TEN timesteps (Won et al., TACOS, 2023, Section IV) of every schedule that respects the TEN's
    link capacity: a send of (a piece of) a chunk over link pair ``l`` occupies it for the
    chunk's delay ``k_l`` timesteps, and the pieces occupying ``l`` in any timestep add up to at
    most its ``cap_l`` parallel links (:func:`respects_ten_capacity` checks a schedule). This is
    what the TEN ILP, its LP and the greedy count.
``ten``
    seconds under the TEN cost model (``tens.cost_models.price(..., "ten")``) of every verified
    schedule: a piece of ``y`` bytes occupies a link for ``ceil((alpha + y/b) / f)`` timesteps
    of ``f`` seconds, so pieces smaller than a chunk may be faster than whole chunks.
``event``
    seconds under the congestion-aware event simulation of every verified schedule.
``sync``
    seconds under the synchronous alpha-beta model (the papers' model) of every verified
    schedule; the ``steps`` bound (hop distance) bounds the steps of schedules sent on links.

Arguments (``source``)
----------------------
``distance``
    a needed chunk travels from its nearest holder (combining: from every contributor) to
    each node that needs it; every link on the way costs its delay (TEN), at least its
    latency ``alpha`` (seconds), or one hop (steps).
``inbound`` / ``outbound``
    the cut argument below for ``S = {v}`` / ``S = V \\ {u}`` (per-node bounds).
``cut``
    for a node set ``S`` the chunks some node in ``S`` needs and no node in ``S`` holds
    (combining: whose result some node in ``S`` needs and some contributor outside ``S``
    supplies) must cross the links entering ``S``; the bound is the largest over all ``S``
    of the time those links need to carry them (plus the way the last of them still has to go
    inside ``S``), found by parametric min-cut (:func:`cut_search`). It generalises the
    per-node bounds and the per-link one (a set entered by a single link: a bridge).
``arrivals``
    (TEN timesteps) a node takes in at most its in-links' capacity per timestep, and each
    chunk it needs no earlier than its release: its distance, or, for the chunks that must
    cross into a ball around the node, their rank among what the entering links can carry
    (:func:`arrival_bound`; it generalises ``inbound`` with release times).
``forest``
    (seconds) the exact cut optimum of an allgather, broadcast, reduce-scatter or reduce by
    max-flow (:func:`forest_seconds`; Zhao et al., "ForestColl", arXiv 2402.06787, Section 4):
    the cut argument over every node set ``S``, switches included, searched exactly.
``volume``
    all links at once: every chunk crosses at least as many links as its path from a holder is
    long (and as many as there are nodes needing it), against what all links deliver.
``lp``
    the TEN LP relaxation's bound (Won et al., TACOS, 2023, Section V-A, relaxed), passed in
    by the producers (:func:`from_lp`).

Switch nodes (kept, not unwound) neither hold nor need anything: they appear only as the
ends of links, so every argument above holds whether a switch copies or not and whatever it
buffers (each counts what must cross links, never what a switch keeps or receives). When the
hop from a switch to an NPU is instant (topology ``meta["switch_hop"]``, TE-CCL's default,
:func:`collsynth.tens.ten.instant_hops`) a switch's links to NPUs add one timestep less to a
path (its delay minus one), no hop to the step count and no latency to a sync step, so the
``distance`` lengths and the ``cut`` bound's inner distances count them so (:func:`instant_out`);
a link from a switch to a switch is never instant and counts in full.

A pipelined link latency (topology ``meta["latency"]``, TE-CCL's model,
:func:`collsynth.tens.ten.latency_pipelined`) separates a link's occupancy ``k_l`` from its
arrival lag ``k_l + L_l`` (:func:`collsynth.tens.ten.link_latency`): TEN distances are lags
(arrival), the supply of a pair by timestep ``T`` counts the sends whose occupancy ends by
``T - L_l`` (capacity by occupancy; :class:`TimestepSupply`), and the ``ten`` cost model's
pieces occupy ``ceil((y / b_l) / f)`` timesteps with ``f`` the fastest transmission; the
``event`` and ``sync`` models already overlap a link's latency with its next message.

The bandwidth arguments are those of the alpha-beta model's lower bounds (Chan et al., CCPE
2007, Section 3; Zhao et al., NSDI 2025, Section 3: ``T_B* = (N-1)/N M/B``) applied to every
node set rather than to one node.

>>> from collsynth.instances.generators import build
>>> from collsynth.instances.instance import make_instance
>>> ring = build("ring", {"nodes": 6, "bidirectional": False}, bandwidth=1.0, alpha=0.0)
>>> b = instance_bounds(make_instance(ring, "allgather", message_bytes=6.0))
>>> b.timesteps.value, b.timesteps.source, b.sync.value
(5, 'distance', 5.0)
"""

from __future__ import annotations

import copy
import hashlib
import math
import time
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Iterable, Iterator

import networkx as nx
import numpy as np
import scipy.sparse as sp
from numba import njit
from scipy.sparse.csgraph import dijkstra

from ..instances.instance import Instance
from ..instances.topology import ParallelArrays
from .schedule import Schedule
from .ten import (INF, NotSupported, discretize, dual_instance, instant_hops, latency_pipelined, link_delays,
                  link_latency, occupancy_costs, prepare, reach)

MODELS = ("timesteps", "ten", "event", "sync")
PARTS = ("timesteps", "ten", "event", "sync_latency", "sync_bandwidth", "steps")  # what Bounds computes, by name
UNITS = {"timesteps": "timesteps", "ten": "s", "event": "s", "sync": "s", "steps": "steps"}
CUT_BUDGET_S = 5.0  # seconds per model for the parametric min-cut search
FLOW_S_PER_UNIT = 1e-6  # one min cut takes about this times links x nodes seconds (measured: a
# 32x32 torus, 4096 links, 4 s per cut with networkx); a search needs one per node
TOL = 1e-9  # relative tolerance of float comparisons (times meeting bounds, cut violations)
TEN_SLACK = 2e-9  # discretize() rounds down costs within 1e-9 of a multiple of the timestep
BLOCK_CELLS = 1 << 22  # rows x nodes of the demand one vectorised step reads: its temporaries stay
# this small (tens of MB) however many rows there are (an all-to-all on 1,024 nodes has 2^20 rows)


@dataclass(frozen=True)
class Bound:
    """A lower bound: ``value`` in ``units`` under ``model``, proved by ``source`` on ``witness``.

    ``value`` is ``None`` when the bound was not computed; ``note`` then says why.
    """

    value: float | None
    units: str
    model: str
    source: str
    witness: Any = None
    note: str = ""

    @property
    def computed(self) -> bool:
        """True when the bound has a value."""
        return self.value is not None

    def label(self) -> str:
        """``source`` and a short witness, e.g. ``cut S={8-15}`` or ``inbound v=2``.

        >>> Bound(16, "timesteps", "timesteps", "cut", (8, 9, 10, 11, 12, 13, 14, 15)).label()
        'cut S={8-15}'
        """
        w = self.witness
        if w is None:
            return self.source
        if isinstance(w, tuple) and all(isinstance(x, (int, np.integer)) for x in w):
            return f"{self.source} S={{{_ranges(w)}}}"
        return f"{self.source} {w}"

    def as_dict(self) -> dict:
        """Plain JSON fields."""
        w = self.witness
        return {"value": self.value, "units": self.units, "model": self.model, "source": self.source,
                "witness": list(w) if isinstance(w, tuple) else w, "label": self.label(), "note": self.note}


def _ranges(ids) -> str:
    """``0,1,2,5`` -> ``0-2,5``."""
    ids = sorted(int(x) for x in ids)
    out, i = [], 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(out)


def not_computed(model: str, source: str, why: str) -> Bound:
    """A bound that could not be computed, and why (never 0, never a guess)."""
    return Bound(None, UNITS.get(model, "s"), model, source, None, f"not computed: {why}")


def best(bounds: Iterable[Bound], model: str) -> Bound:
    """The largest computed bound (the first of equals); not computed if none is."""
    bounds = list(bounds)
    have = [b for b in bounds if b.computed]
    if not have:
        why = "; ".join(f"{b.source}: {b.note}" for b in bounds) or "no argument applies"
        return Bound(None, UNITS[model], model, "none", None, why)
    top = max(b.value for b in have)
    return next(b for b in have if b.value == top)


def from_lp(value, note: str = "", relaxation: str = "TEN LP") -> Bound:
    """The bound of a TEN LP relaxation (timesteps; Won et al., TACOS, 2023, Section V-A
    relaxed), named by ``relaxation`` (the producer that proved it), as a record."""
    if value is None:
        return not_computed("timesteps", "lp", note or "the LP search did not finish")
    return Bound(int(value), "timesteps", "timesteps", "lp", relaxation, note)


# ---- what must cross into a node set --------------------------------------------------------

@dataclass(frozen=True)
class Demand(ParallelArrays):
    """Chunks that must reach nodes, grouped into rows of identical conditions.

    Row ``r`` stands for ``count[r]`` chunks of collective ``group[r]`` (``nbytes[r]`` bytes in
    all): ``pre[r]`` holds them (combining: contributes to them), ``post[r]`` must hold them
    (the full result, if combining) at the end.
    """

    pre: np.ndarray
    post: np.ndarray
    combining: np.ndarray
    count: np.ndarray
    nbytes: np.ndarray
    group: np.ndarray

    def crossing(self, inside: np.ndarray) -> np.ndarray:
        """Per row: must the row's chunks cross into the node set ``inside`` (bool mask)?

        Non-combining: some node of the set needs them and none holds them. Combining: some
        node of the set needs the result and some contributor is outside the set.
        """
        hit = self.post[:, inside].any(axis=1)
        held = self.pre[:, inside].any(axis=1)
        outside = self.pre[:, ~inside].any(axis=1)
        return hit & np.where(self.combining, outside, ~held)

    def select(self, rows: np.ndarray) -> "Demand":
        """The rows ``rows`` only (this demand itself when they are all of its rows, in order)."""
        if len(rows) == len(self) and (rows == np.arange(len(self))).all():
            return self
        return Demand(self.pre[rows], self.post[rows], self.combining[rows], self.count[rows],
                      self.nbytes[rows], self.group[rows])


def row_blocks(rows: int, width: int, cells: int | None = None) -> Iterator[slice]:
    """Consecutive slices of ``rows`` rows of ``width`` columns, each of at most ``cells``
    cells (default :data:`BLOCK_CELLS`; at least one row): row-wise work on the demand a block
    at a time, so that its temporaries never grow with the number of rows.

    >>> list(row_blocks(5, 4, cells=8))
    [slice(0, 2, None), slice(2, 4, None), slice(4, 5, None)]
    """
    step = max(1, (BLOCK_CELLS if cells is None else cells) // max(width, 1))
    for lo in range(0, rows, step):
        yield slice(lo, min(lo + step, rows))


def _rows_needing(pre: np.ndarray, post: np.ndarray, rows: np.ndarray, combining: bool) -> np.ndarray:
    """Per row of ``rows``: someone holds or contributes to it, someone needs it and, unless
    combining, someone needing it does not hold it already; a block of rows at a time."""
    want = np.zeros(len(rows), bool)
    for b in row_blocks(len(rows), pre.shape[1]):
        p, q = pre[rows[b]], post[rows[b]]
        want[b] = p.any(axis=1) & (q.any(axis=1) if combining else (q & ~p).any(axis=1))
    return want


def demand_of(instance: Instance) -> Demand:
    """The :class:`Demand` of every collective of ``instance``, in its own time direction.

    Combining chunks are kept as they are (contributors and targets) rather than turned into
    their dual on the transposed topology: "the result some node of ``S`` needs depends on a
    contribution from outside ``S``" is the same condition as the dual's "``V \\ S`` holds a
    chunk nobody in it needs ... " read backwards in time, and it also covers allreduce, which
    has no single dual.
    """
    n = instance.topology.size
    pres, posts, combs, counts, sizes, groups = [], [], [], [], [], []
    for g, coll in enumerate(instance.collectives):
        pre, post = coll.precondition, coll.postcondition
        first, cnt = distinct_rows(pre, post)
        want = _rows_needing(pre, post, first, coll.combining)  # unused chunk ids are in no condition
        first, cnt = first[want], cnt[want]
        if not len(first):
            continue
        whole = len(first) == len(pre)  # every row, in order: no copy
        pres.append(pre if whole else pre[first])
        posts.append(post if whole else post[first])
        combs.append(np.full(len(first), coll.combining))
        counts.append(cnt.astype(np.int64))
        sizes.append(cnt * float(coll.chunk_bytes))
        groups.append(np.full(len(first), g, np.int64))
    if not pres:
        z = np.zeros((0, n), bool)
        return Demand(z, z, np.zeros(0, bool), np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64))
    join = (lambda arrays: arrays[0]) if len(pres) == 1 else np.concatenate
    return Demand(join(pres), join(posts), join(combs), join(counts), join(sizes), join(groups))


def _row_hashes(words: list[np.ndarray]) -> np.ndarray:
    """A 64-bit hash of each row of the unsigned 64-bit matrices ``words`` side by side: each
    word mixed into the state by SplitMix64's finaliser (Steele, Lea and Flood, "Fast splittable
    pseudorandom number generators", OOPSLA 2014)."""
    h = np.full(len(words[0]), 0x9E3779B97F4A7C15, np.uint64)
    for column in (w[:, j] for w in words for j in range(w.shape[1])):
        h ^= column
        h ^= h >> np.uint64(30)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(27)
        h *= np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(31)
    return h


def _packed_words(rows: np.ndarray) -> np.ndarray:
    """Boolean rows as unsigned 64-bit words (their bits packed, zero-padded to whole words)."""
    packed = np.packbits(rows, axis=1)
    if packed.shape[1] % 8:
        packed = np.pad(packed, ((0, 0), (0, -packed.shape[1] % 8)))
    return packed.view(np.uint64)


def distinct_rows(pre: np.ndarray, post: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first row of each distinct pair of rows ``(pre[r], post[r])``, in row order, and how
    many rows equal it. Rows are grouped by a 64-bit hash of their bits, then compared bit for
    bit; should two different rows share a hash, numpy's exact row sort decides instead.

    >>> pre = np.array([[1, 0], [0, 1], [1, 0]], bool)
    >>> [a.tolist() for a in distinct_rows(pre, pre)]
    [[0, 1], [2, 1]]
    """
    if not len(pre):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    words = [_packed_words(pre), _packed_words(post)]
    hashes = _row_hashes(words)
    order = np.argsort(hashes, kind="stable")  # equal hashes in row order
    hashes = hashes[order]
    starts = np.flatnonzero(np.r_[True, hashes[1:] != hashes[:-1]])
    sizes = np.diff(np.r_[starts, len(order)])
    heads = order[np.repeat(starts, sizes)]  # per sorted row: the first row of its hash
    same = np.ones(len(order), bool)
    for w in words:
        for b in row_blocks(len(order), w.shape[1]):
            same[b] &= (w[order[b]] == w[heads[b]]).all(axis=1)
    if same.all():
        first, count = order[starts], sizes
    else:  # a hash shared by different rows
        _, first, count = np.unique(np.concatenate(words, axis=1), axis=0, return_index=True, return_counts=True)
    by_row = np.argsort(first, kind="stable")
    return first[by_row], count[by_row]


def _demand_of_ten(data) -> Demand:
    """The :class:`Demand` of a TEN model's data (its direction: the dual for combining)."""
    need = data.post & ~data.pre
    want = need.any(axis=1) & data.pre.any(axis=1)
    rows = np.flatnonzero(want)
    sizes = np.array([c.chunk_bytes for c in data.instance.collectives])[data.group[rows]]
    return Demand(data.pre[rows], data.post[rows], np.zeros(len(rows), bool), np.ones(len(rows), np.int64),
                  sizes.astype(float), data.group[rows])


@dataclass(frozen=True)
class Arcs:
    """Directed link pairs: ``src -> dst`` with ``cap`` parallel links, pooled ``bandwidth``
    (bytes/s) and latency ``alpha`` (s); ``nodes`` are the live node ids."""

    src: np.ndarray
    dst: np.ndarray
    cap: np.ndarray
    bandwidth: np.ndarray
    alpha: np.ndarray
    nodes: np.ndarray
    size: int

    def entering(self, inside: np.ndarray) -> np.ndarray:
        """Indices of the arcs entering the node set ``inside`` (bool mask over node ids)."""
        return np.flatnonzero(inside[self.dst] & ~inside[self.src])


def instant_out(topology) -> np.ndarray:
    """bool ``[pair]``: the links from a switch to an NPU whose hop is instant (module doc,
    :func:`collsynth.tens.ten.instant_hops`), whose send arrives in the step the chunk reached
    the switch (a path gains no step over them)."""
    return instant_hops(topology)


def arcs_of(topology) -> Arcs:
    """The live link pairs of a topology as :class:`Arcs`."""
    la = topology.link_arrays
    return Arcs(la.src, la.dst, la.count.astype(np.int64), la.bandwidth, la.alpha,
                np.asarray(topology.nodes, np.int64), topology.size)


# ---- supply: what the links entering a set deliver, per model -------------------------------

class Supply:
    """What link pairs can deliver by a given time, under one cost model: the strategy
    :func:`cut_search` runs with. A model's supply sets ``integral`` (times are whole
    timesteps), ``params`` (the per-pair arrays its answers depend on) and implements
    ``arc_supply(time)`` (what each pair delivers by then) and ``_smallest(idx, need)``."""

    integral = False
    params: tuple[np.ndarray, ...] = ()

    def key(self, idx: np.ndarray) -> tuple:
        """What :meth:`smallest` depends on for the pairs ``idx`` (a cache key)."""
        return tuple(sorted(zip(*(p[idx].tolist() for p in self.params))))

    def smallest(self, idx: np.ndarray, need: float) -> float:
        """Smallest time by which the pairs ``idx`` deliver ``need`` (0 when nothing is needed,
        inf when no pair enters the set)."""
        if need <= 0:
            return 0 if self.integral else 0.0
        if not len(idx):
            return math.inf
        return self._smallest(idx, need)

    def _smallest(self, idx: np.ndarray, need: float) -> float:
        raise NotImplementedError


def _first_timestep(lo: int, hi: int, enough) -> int:
    """The smallest ``T`` in ``[lo, hi]`` with ``enough(T)`` (monotone; ``hi`` is enough)."""
    while lo < hi:
        mid = (lo + hi) // 2
        if enough(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


class TimestepSupply(Supply):
    """TEN timesteps (Won et al., TACOS, 2023, Section IV-A/C), whole-chunk occupancy: pair
    ``l`` delivers at most ``cap_l * floor(T / k_l)`` chunks (or pieces adding up to that
    many) by the end of timestep ``T`` (a send arriving by ``T`` starts by ``T - k_l + 1``; the
    starts in each block of ``k_l`` consecutive timesteps all occupy the link in the block's
    last one). Demand in chunks."""

    integral = True

    def __init__(self, cap: np.ndarray, delay: np.ndarray, latency: np.ndarray | None = None):
        self.cap, self.delay = cap.astype(np.int64), delay.astype(np.int64)
        self.latency = np.zeros_like(self.delay) if latency is None else np.asarray(latency, np.int64)
        self.params = (self.cap, self.delay, self.latency)

    def arc_supply(self, T) -> np.ndarray:
        """Chunks each pair can deliver by timestep ``T`` (occupancies ending by ``T - L``)."""
        return self.cap * (np.maximum(int(T) - self.latency, 0) // self.delay)

    def _smallest(self, idx: np.ndarray, need: float) -> float:
        cap, k, L = self.cap[idx], self.delay[idx], self.latency[idx]
        # all pairs together deliver at least sum cap ((T - L) / k - 1) by T
        hi = int(math.ceil((need + cap.sum()) / (cap / k).sum())) + int(L.max(initial=0))
        return _first_timestep(1, hi, lambda T: int((cap * (np.maximum(T - L, 0) // k)).sum()) >= need)


class PieceSupply(Supply):
    """TEN cost model in timesteps (Won et al., TACOS, 2023, Section IV-C discretisation),
    pieces of any size: one parallel link of pair ``l`` (per-link
    bandwidth ``b_l``) carries a piece of ``y`` bytes in ``ceil((alpha_l + y / b_l) / f)``
    timesteps, so a piece occupying it ``k`` timesteps has at most ``y(k) = min(chunk, (k f -
    alpha_l) b_l)`` bytes; by timestep ``T`` it delivers at most ``V_l(T)``, the best packing of
    piece lengths into ``T`` (an unbounded knapsack, computed exactly). Demand in bytes."""

    integral = True

    def __init__(self, arcs: Arcs, f: float, chunk: float):
        per_link = arcs.bandwidth / np.maximum(arcs.cap, 1)
        self.cap, self.f, self.chunk = arcs.cap.astype(np.int64), float(f), float(chunk)
        kinds = np.stack([arcs.alpha, per_link], axis=1)
        self.kinds, self.kind = np.unique(kinds, axis=0, return_inverse=True)
        self.kind = self.kind.ravel()
        self.tables = [np.zeros(1) for _ in range(len(self.kinds))]
        self.whole = np.array([self._piece_steps(a, b) for a, b in self.kinds], np.int64)
        self.params = (self.cap, self.kind)

    def _piece_bytes(self, alpha: float, b: float, k: np.ndarray) -> np.ndarray:
        return np.clip((k * self.f * (1 + TEN_SLACK) - alpha) * b, 0.0, self.chunk)

    def _piece_steps(self, alpha: float, b: float) -> int:
        return int(discretize(np.array([alpha + self.chunk / b]), self.f)[0])

    def _table(self, kind: int, T: int) -> np.ndarray:
        tab = self.tables[kind]
        if len(tab) > T:
            return tab
        a, b = self.kinds[kind]
        K = int(self.whole[kind])
        y = self._piece_bytes(a, b, np.arange(1, K + 1, dtype=float))
        new = np.zeros(max(T + 1, 2 * len(tab)))
        new[:len(tab)] = tab
        for t in range(len(tab), len(new)):
            m = min(t, K)
            new[t] = (new[t - m:t][::-1] + y[:m]).max() if m else 0.0
        self.tables[kind] = new
        return new

    def arc_supply(self, T) -> np.ndarray:
        """Bytes each pair can deliver by timestep ``T``."""
        T = int(T)
        per = np.array([self._table(k, T)[T] for k in range(len(self.kinds))])
        return self.cap * per[self.kind]

    def _smallest(self, idx: np.ndarray, need: float) -> float:
        cap, k = self.cap[idx], self.whole[self.kind[idx]]
        # whole chunks alone: all pairs deliver at least sum cap (T / k - 1) chunks by T
        hi = int(math.ceil((need / self.chunk * (1 + TOL) + cap.sum()) / (cap / k).sum()))
        return _first_timestep(1, hi, lambda T: self.arc_supply(T)[idx].sum() >= need * (1 - TOL))


class EventSupply(Supply):
    """Event simulation (the congestion-aware link model of :mod:`collsynth.tens.cost`): pair
    ``l`` is one FIFO sending at its pooled bandwidth ``bw_l``; a
    message arrives ``alpha_l`` after it leaves the link, so by time ``tau`` it has delivered
    at most ``bw_l * max(0, tau - alpha_l)`` bytes (latency counted once per link, overlapped
    with the next message). Demand in bytes."""

    integral = False

    def __init__(self, arcs: Arcs):
        self.bw, self.alpha = arcs.bandwidth.astype(float), arcs.alpha.astype(float)
        self.params = (self.bw, self.alpha)

    def arc_supply(self, tau) -> np.ndarray:
        """Bytes each pair can deliver by time ``tau``."""
        return self.bw * np.maximum(0.0, float(tau) - self.alpha)

    def _smallest(self, idx: np.ndarray, need: float) -> float:
        # the smallest tau with sum_l bw_l max(0, tau - alpha_l) >= need
        order = np.argsort(self.alpha[idx])
        a, b = self.alpha[idx][order], self.bw[idx][order]
        for j in range(len(a)):  # with links 0..j active: tau = (need + sum b a) / sum b
            tau = (need + float((b[:j + 1] * a[:j + 1]).sum())) / float(b[:j + 1].sum())
            if j + 1 == len(a) or tau <= a[j + 1]:
                return max(tau, float(a[j]))
        return math.inf


class SyncSupply(Supply):
    """Synchronous alpha-beta bandwidth time (Chan et al., CCPE 2007, Section 3): the bytes
    crossing into ``S`` over all steps divided by the bandwidth into ``S`` (each step's
    busiest link time is at least the step's bytes into ``S`` over the bandwidth into ``S``).
    Demand in bytes; parameter in seconds."""

    integral = False

    def __init__(self, arcs: Arcs):
        self.bw = arcs.bandwidth.astype(float)
        self.params = (self.bw,)

    def arc_supply(self, lam) -> np.ndarray:
        """Bytes each pair carries in ``lam`` seconds of bandwidth time."""
        return self.bw * float(lam)

    def _smallest(self, idx: np.ndarray, need: float) -> float:
        return float(need) / float(self.bw[idx].sum())


# ---- per-node bounds and the parametric min-cut ---------------------------------------------

def per_node(arcs: Arcs, demand: Demand, weight: np.ndarray, supply) -> tuple[float, str, int | None]:
    """The cut bound for ``S = {v}`` (inbound) and ``S = V \\ {u}`` (outbound), best over nodes.

    Returns ``(value, "inbound" | "outbound", node)``; ``(0, "inbound", None)`` when nothing
    must move.
    """
    if not len(demand):
        return 0, "inbound", None
    needs = _node_needs(demand, weight)
    best_v = (0, "inbound", None)
    for name, need, ends in (("inbound", needs[0], arcs.dst), ("outbound", needs[1], arcs.src)):
        seen: dict = {}
        for v in arcs.nodes[need[arcs.nodes] > 0].tolist():
            idx = np.flatnonzero(ends == v)
            key = (float(need[v]), supply.key(idx))
            if key not in seen:
                seen[key] = supply.smallest(idx, float(need[v]))
            if seen[key] > best_v[0]:
                best_v = (seen[key], name, v)
    return best_v


def _node_needs(demand: Demand, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per node ``v``: the ``weight`` of the rows that must cross into ``{v}`` (it needs them
    and does not hold them; combining: it needs the result and another node contributes) and
    of those that must leave it (it alone holds them, or contributes, and another node needs
    them); one compiled pass over the rows."""
    n = demand.pre.shape[1]
    into, out_of = np.zeros(n), np.zeros(n)
    _add_node_needs(np.ascontiguousarray(demand.pre), np.ascontiguousarray(demand.post), demand.combining,
                    np.asarray(weight, dtype=float), into, out_of)
    return into, out_of


@njit(cache=True, nogil=True)
def _add_node_needs(pre, post, combining, weight, into, out_of):
    """:func:`_node_needs` in one pass over the rows: ``into[v]`` and ``out_of[v]`` grow by
    each row's weight where the row must enter or leave ``{v}``."""
    for r in range(pre.shape[0]):
        n_pre, n_post = 0, 0
        for v in range(pre.shape[1]):
            n_pre += pre[r, v]
            n_post += post[r, v]
        for v in range(pre.shape[1]):
            held, needed = pre[r, v], post[r, v]
            if needed and ((n_pre > held) if combining[r] else not held):
                into[v] += weight[r]
            if held and (combining[r] or n_pre == 1) and n_post > needed:
                out_of[v] += weight[r]


@dataclass
class _Terms:
    """A min-cut's terms (see :func:`_terms`): a constant, ``x_p`` weights ``linear[p]``,
    ``[S misses {h}]`` weights ``single[h]``, ``[S misses H]`` weights ``multi[H]``."""

    const: float
    linear: np.ndarray
    single: np.ndarray
    multi: dict
    exact: bool


def _terms(demand: Demand, weight: np.ndarray, A_in: np.ndarray, A_out: np.ndarray) -> _Terms:
    """The min-cut terms of every row for anchors ``A_in`` (in S) and ``A_out`` (not in S).

    Each row's crossing indicator is replaced by a lower estimate that a cut can represent
    (Kolmogorov and Zabih, TPAMI 2004, Section 3: submodular terms of up to three
    variables): a constant, ``x_p`` (p in S), ``[S misses H]`` or ``x_p - [S meets H]``
    (non-combining rows: the set must meet the row's targets and miss its holders; combining
    rows: meet its targets and leave a contributor outside). ``exact`` says whether every
    estimate equals its indicator on every anchored set.
    """
    pre, post, comb = demand.pre, demand.post, demand.combining
    n = demand.pre.shape[1]
    live = weight > 0
    forced = (post & A_in).any(axis=1)
    pre_in = (pre & A_in).any(axis=1)
    pre_out = (pre & A_out).any(axis=1)
    free_h, free_p = pre & ~A_out, post & ~A_out
    nh, np_ = free_h.sum(axis=1), free_p.sum(axis=1)
    p = np.argmax(free_p, axis=1)
    h = np.argmax(free_h, axis=1)
    # combining rows
    c_const = live & comb & forced & pre_out
    c_lin = live & comb & ~forced & (np_ > 0) & pre_out
    c_loose = live & comb & ((forced & ~pre_out & ~(pre <= A_in).all(axis=1))
                             | (~forced & (np_ > 0) & ~pre_out) | (c_lin & (np_ > 1)))
    # non-combining rows
    nc = live & ~comb & ~pre_in & (forced | (np_ > 0))
    n_const = nc & forced & (nh == 0)
    n_miss = nc & forced & (nh > 0)
    n_lin = nc & ~forced & (nh == 0)
    n_pair = nc & ~forced & (nh > 0) & (np_ == 1)  # x_p [S misses H] >= x_p - [S meets H]
    n_loose = (n_lin & (np_ > 1)) | (nc & ~forced & (nh > 0))
    lin = c_lin | n_lin | n_pair
    linear = np.bincount(p[lin], weights=weight[lin], minlength=n)
    miss = n_miss | n_pair
    one = miss & (nh == 1)
    single = np.bincount(h[one], weights=weight[one], minlength=n)
    multi: dict = {}
    for r in np.flatnonzero(miss & (nh > 1)).tolist():
        H = tuple(np.flatnonzero(free_h[r]).tolist())
        multi[H] = multi.get(H, 0.0) + float(weight[r])
    const = float(weight[c_const | n_const].sum() - weight[n_pair].sum())
    return _Terms(const, linear, single, multi, not bool((c_loose | n_loose).any()))


def _best_set(arcs: Arcs, supply_w: np.ndarray, terms: _Terms, A_in, A_out) -> tuple[float, np.ndarray]:
    """``max_S (estimated demand(S) - supply(S))`` over ``S`` with the anchors, by one min cut.

    ``S`` is the sink side: an arc ``u -> v`` entering ``S`` is cut; ``x_p`` costs ``w`` when
    ``p`` is outside ``S`` (edge ``p -> t``); ``[S misses H]`` costs ``w`` when some ``h`` of
    ``H`` is in ``S`` (edge ``s -> a`` and ``a -> h`` uncuttable; ``s -> h`` for one ``h``).
    Anchored nodes are merged into ``s`` (``A_out``) and ``t`` (``A_in``). Boykov and
    Kolmogorov's max-flow (Boykov and Kolmogorov, TPAMI 2004) finds the cut. Returns
    ``(the maximum, S)``.
    """
    name = {v: v for v in arcs.nodes.tolist()}
    name.update({v: "s" for v in np.flatnonzero(A_out).tolist()})
    name.update({v: "t" for v in np.flatnonzero(A_in).tolist()})
    cap: dict = {}

    def add(u, v, c):
        if u == v or u == "t" or v == "s":
            return  # inside one side, or from the sink side to the source side: never cut
        cap[(u, v)] = cap.get((u, v), 0.0) + c

    for u, v, c in zip(arcs.src.tolist(), arcs.dst.tolist(), supply_w.tolist()):
        if c > 0:
            add(name[u], name[v], c)
    total = terms.const + float(terms.linear.sum()) + float(terms.single.sum())
    for q in np.flatnonzero(terms.linear).tolist():
        add(name[q], "t", float(terms.linear[q]))
    for q in np.flatnonzero(terms.single).tolist():
        add("s", name[q], float(terms.single[q]))
    for i, (H, w) in enumerate(terms.multi.items()):
        total += w
        add("s", ("any", i), w)
        for q in H:
            add(("any", i), name[q], math.inf)
    G = nx.DiGraph()
    G.add_nodes_from(["s", "t"])
    G.add_edges_from((u, v, {"capacity": c}) for (u, v), c in cap.items())
    R = nx.algorithms.flow.boykov_kolmogorov(G, "s", "t")
    source_side = R.graph["trees"][0]  # what s still reaches in the residual network
    inside = A_in.copy()
    inside[[x for x in G if isinstance(x, int) and x not in source_side]] = True
    return total - R.graph["flow_value"], inside


def _order(arcs: Arcs, demand: Demand, first: Iterable[int]) -> list[int]:
    """Live nodes: those of ``first`` that need or hold something, then the others that do,
    then the rest. Nodes that take part come first: the "out" anchors of a combining
    collective are exact only at a contributor (:func:`cut_search`), and a set with demand
    has a contributor outside it, so its first node outside, in this order, is one."""
    nodes = arcs.nodes.tolist()
    active = set(np.flatnonzero(demand.pre.any(axis=0) | demand.post.any(axis=0)).tolist())
    return list(dict.fromkeys([v for v in first if v in active] + [v for v in nodes if v in active] + nodes))


def _family(size: int, order: list[int], family: str):
    """Anchor pairs ``(A_in, A_out)``: the i-th "in" anchor forces node i of ``order`` into
    ``S`` and nodes ``0..i-1`` out (every non-empty ``S`` has a first node in the order); the
    i-th "out" anchor forces node i out and ``0..i-1`` in (every ``S != V``)."""
    for i, v in enumerate(order):
        fixed, other = np.zeros(size, bool), np.zeros(size, bool)
        fixed[v] = True
        other[order[:i]] = True
        yield (fixed, other) if family == "in" else (other, fixed)


def _bisection(arcs: Arcs):
    """Both halves of a Kernighan-Lin bisection (Kernighan and Lin, BSTJ 1970; networkx,
    seeded) as "out" anchors."""
    und = nx.Graph()
    und.add_nodes_from(arcs.nodes.tolist())
    und.add_edges_from(zip(arcs.src.tolist(), arcs.dst.tolist()))
    for half in nx.algorithms.community.kernighan_lin_bisection(und, seed=0):
        mask = np.zeros(arcs.size, bool)
        mask[list(half)] = True
        yield np.zeros(arcs.size, bool), mask


def cut_search(arcs: Arcs, demand: Demand, weight: np.ndarray, supply, start: float, witness=None,
               *, first: Iterable[int] = (), budget_s: float = CUT_BUDGET_S, inner: np.ndarray | None = None):
    """The largest over node sets ``S`` of ``supply.smallest(arcs entering S, demand(S))``.

    Parametric min-cut (Gallo et al., SIAM J. Computing 1989, Section 4, with Dinkelbach's
    update, Dinkelbach, Management Science 1967): at the current value ``p`` one min cut per
    anchor pair (:func:`_family`) finds the ``S`` maximising ``demand(S) - supply_p(S)``; if it is
    positive, ``p`` jumps to that ``S``'s exact bound and the anchor is tried again. Supply
    grows with ``p``, so an anchor with no violated set at ``p`` has none later: every set is
    checked at a value no larger than the result. ``start`` (with its ``witness``) must
    itself be a valid bound (the per-node bound, a special case).

    Exactness: each row's crossing indicator is replaced by the estimate of :func:`_terms`,
    never more than the indicator, and every found ``S`` is re-checked with its exact demand,
    so the result is always a valid bound. One anchor family whose estimates are all exact
    makes the search exact over all sets: the "in" family for allgather, broadcast, gather
    and scatter, the "out" family for reduce and reduce_scatter (whatever the chunks per
    node, failed nodes or participant subset); allreduce needs both families, whose exact
    anchors (all but the first of each) cover every set. For all-to-all and mixed concurrent
    collectives the search is a relaxation: both families plus a Kernighan-Lin bisection.

    ``inner`` (arc lengths in the parameter's units): every set the search visits is also
    credited with :func:`inner_distance`, the way its last chunk still has to go inside it.

    Returns ``(value, witness S as a tuple of nodes or the start's witness, the inner
    distance included in the value, None)`` or ``(None, None, 0, why)`` when the search
    would exceed ``budget_s``.
    """
    t0 = time.perf_counter()
    order = _order(arcs, demand, first)
    guess = FLOW_S_PER_UNIT * len(arcs.src) * len(order) * len(order)
    if guess > 2 * budget_s:
        return None, None, 0, (f"about {len(order)} min cuts on {len(arcs.src)} links (estimated {guess:.3g} s) "
                               f"would exceed the {budget_s:g} s budget")
    p, wit, done = start, witness, 0
    top, top_wit, top_extra = start, witness, 0
    families = ("out", "in") if demand.combining.any() else ("in", "out")
    for fam in families + ("bisection",):
        anchors = _bisection(arcs) if fam == "bisection" else _family(arcs.size, order, fam)
        if fam == "bisection" and not (len(order) >= 4 and (~demand.combining).any()):
            break
        exact = True
        for A_in, A_out in anchors:
            terms = _terms(demand, weight, A_in, A_out)
            exact &= terms.exact
            while True:
                gain, inside = _best_set(arcs, supply.arc_supply(p), terms, A_in, A_out)
                if gain <= (0.5 if supply.integral else TOL * max(1.0, float(weight.sum()))):
                    break
                need = float(weight[demand.crossing(inside)].sum())
                q = supply.smallest(arcs.entering(inside), need)
                if not q > p * (1 + (0 if supply.integral else TOL)):
                    break
                p, wit = q, tuple(np.flatnonzero(inside).tolist())
                extra = 0 if inner is None else inner_distance(arcs, demand, inside, inner)
                if q + extra > top:
                    top, top_wit, top_extra = q + extra, wit, extra
            done += 1
            spent = time.perf_counter() - t0
            if spent > budget_s or spent / done * len(order) > (2 if done >= 3 else 4) * budget_s:
                return None, None, 0, (f"the min-cut search (about {len(order)} anchor sets per family) would "
                                    f"exceed its {budget_s:g} s budget ({done} done in {spent:.3g} s)")
        if exact and fam != "bisection":
            break
    return (top, top_wit, top_extra, None) if top > p else (p, wit, 0, None)


def inner_distance(arcs: Arcs, demand: Demand, inside: np.ndarray, length: np.ndarray) -> float:
    """How far, after crossing into ``S``, the last chunk to cross must still travel.

    Some piece of the demand of ``S`` first crosses no earlier than the cut bound of ``S``
    (before it the entering links have not carried all of it); every copy of it enters at a
    head of an entering link no earlier, and still has to reach each node of ``S`` that needs
    it. The piece is unknown, so this is the least over the crossing rows of the farthest
    needing node of ``S`` from the nearest head (``length``-shortest paths in the whole
    network). Adding it to the cut bound of ``S`` keeps a lower bound.
    """
    idx = arcs.entering(inside)
    rows = np.flatnonzero(demand.crossing(inside))
    if not len(idx) or not len(rows):
        return 0
    adj = sp.csr_matrix((length.astype(float), (arcs.src, arcs.dst)), shape=(arcs.size, arcs.size))
    d = dijkstra(adj, directed=True, indices=np.unique(arcs.dst[idx]), min_only=True)
    need = demand.post[rows] & inside[None, :] & np.where(demand.combining[rows][:, None], True, ~demand.pre[rows])
    far = np.where(need, d[None, :], -np.inf).max(axis=1)
    val = float(far.min())
    return val if math.isfinite(val) else 0


# ---- distances ------------------------------------------------------------------------------

_PATHS: dict[str, np.ndarray] = {}
PATH_BATCH = 1 << 20  # entries of the distance matrix one call computes


def shortest_paths(arcs: Arcs, arc_weight: np.ndarray, sources: np.ndarray) -> np.ndarray:
    """``arc_weight``-shortest path lengths ``[source, node]`` (scipy's Dijkstra; a breadth-first
    search when every weight is 1), kept for the few weightings one instance's bounds reuse.
    Sources go in batches of about :data:`PATH_BATCH` entries, so a time limit can stop the
    search between two of them (one C call for thousands of sources takes seconds)."""
    w = np.asarray(arc_weight, dtype=float)
    if len(w) and w[0] > 1 and w[0] == int(w[0]) and bool((w == w[0]).all()):
        # a uniform integer weight (TEN delays): hop counts times it, exactly as Dijkstra sums it
        return w[0] * shortest_paths(arcs, np.ones(len(w)), sources)
    h = hashlib.sha1()
    for a in (arcs.src, arcs.dst, w, np.asarray(sources)):
        h.update(np.ascontiguousarray(a).tobytes())
    key = h.hexdigest()
    if key not in _PATHS:
        adj = sp.csr_matrix((w, (arcs.src, arcs.dst)), shape=(arcs.size, arcs.size))
        unit = bool(len(w)) and bool((w == 1).all())
        if len(_PATHS) >= 2:
            _PATHS.pop(next(iter(_PATHS)))
        sources = np.asarray(sources, np.int64)
        step = max(1, PATH_BATCH // max(arcs.size, 1))
        parts = [dijkstra(adj, directed=True, indices=sources[i:i + step], unweighted=unit)
                 for i in range(0, len(sources), step)]
        _PATHS[key] = np.concatenate(parts) if parts else np.zeros((0, arcs.size))
    return _PATHS[key]


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
        sub = D[np.ix_(row_of[H], P)]
        reach = sub.max(axis=0) if demand.combining[r] else sub.min(axis=0)
        j = int(np.argmax(reach))
        i = int(np.argmax(sub[:, j]) if demand.combining[r] else np.argmin(sub[:, j]))
        far[r], pairs[r] = reach[j], (H[i], P[j])
    r = int(np.argmax(far))  # the first row of the largest, as a scan in row order finds it
    if not far[r] > 0:
        return 0.0, None
    return float(far[r]), (int(pairs[r, 0]), int(pairs[r, 1]))


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
            far = float(D[np.ix_(row_of[H], P)].max())
        else:
            P = np.flatnonzero(post & ~pre)
            spread = float(min_in[P].sum())
            far = float(D[np.ix_(row_of[H], P)].min(axis=0).max())
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
    ``instance``: the per-node needs, and the crossings and farthest nodes of rows with one
    holder."""
    arcs, demand = arcs_of(instance.topology), demand_of(instance)
    _node_needs(demand, demand.nbytes)
    crossings(arcs, demand, np.ones(len(arcs.src)))
    distance(arcs, demand, np.ones(len(arcs.src)))


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
    lag, delay = data.lag.min(axis=0), data.delay.min(axis=0)
    dist = data.dist.min(axis=0)
    m_in = np.zeros(S, np.int64)
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
    value, witness, note = top
    return Bound(int(value), "timesteps", "timesteps", "arrivals", witness, note)


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
    def _arcs_demand(self) -> tuple[Arcs, Demand]:
        return arcs_of(self.instance.topology), demand_of(self.instance)

    def _get(self, name: str) -> tuple[Bound, ...]:
        if name not in self._parts:
            arcs, demand = self._arcs_demand
            if name == "timesteps":
                parts, self.timestep_s = _timesteps_parts(self.instance, arcs, demand, self.timestep, self.budget_s)
                self._parts[name] = tuple(parts)
            elif name == "ten":
                parts, self.ten_timestep_s = _ten_parts(self.instance, arcs, demand, self.budget_s, self.ten_timestep)
                self._parts[name] = tuple(parts)
            elif name in ("event", "sync_latency", "sync_bandwidth"):
                event, lat, bw = _seconds_parts(self.instance, arcs, demand, self.budget_s)
                self._parts.update(event=tuple(event), sync_latency=tuple(lat), sync_bandwidth=tuple(bw))
            elif name == "steps":
                hops = 1 - instant_out(self.instance.topology).astype(np.int64)
                self._parts[name] = (_distance_bound("steps", arcs, demand, hops),)
            else:
                raise KeyError(name)
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
        """Seconds under the synchronous alpha-beta model: latency plus bandwidth bound."""
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
        for name in PARTS:
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


def _cut_parts(model: str, arcs: Arcs, demand: Demand, weight: np.ndarray, supply, first,
               budget_s: float, convert=lambda p: p, inner: np.ndarray | None = None) -> list[Bound]:
    """The per-node bound and the cut bound of one model (values through ``convert``;
    ``inner``: arc lengths for :func:`inner_distance`)."""
    units = UNITS[model]
    v, name, node = per_node(arcs, demand, weight, supply)
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
                     budget_s) -> tuple[list[Bound], float | None]:
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
        rows = np.flatnonzero(demand.group == g)
        parts.append(_distance_bound("timesteps", arcs, demand.select(rows), lag[g]))
    kmin = delay.min(axis=0)
    first = _roots(instance)
    supply = TimestepSupply(cap, kmin, latency)
    parts += _cut_parts("timesteps", arcs, demand, demand.count.astype(float), supply, first, budget_s, int,
                        lag.min(axis=0))
    parts.append(_volume_bound("timesteps", arcs, demand, demand.count.astype(float), supply, int, kmin, cap))
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
               timestep: float | None = None) -> tuple[list[Bound], float]:
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
    parts = [_distance_bound("ten", arcs, demand, kmin, f)]
    parts += _cut_parts("ten", arcs, demand, demand.nbytes, supply, _roots(instance), budget_s, lambda T: T * f, kmin)
    parts.append(_volume_bound("ten", arcs, demand, demand.nbytes, supply, lambda T: T * f))
    return parts, f


def _seconds_parts(instance: Instance, arcs: Arcs, demand: Demand, budget_s) -> tuple[list, list, Bound]:
    """Event-model parts and the sync model's latency and bandwidth parts."""
    w, slack = _alpha_weights(arcs)
    w = np.where(instant_out(instance.topology), slack / max(1, arcs.size), w)  # in the step it arrived: no latency
    lat = _distance_bound("event", arcs, demand, w)
    if lat.computed:
        lat = Bound(max(0.0, lat.value - slack), "s", "event", "distance", lat.witness)
    first = _roots(instance)
    event = [lat] + _cut_parts("event", arcs, demand, demand.nbytes, EventSupply(arcs), first, budget_s,
                               inner=np.maximum(arcs.alpha, 0.0))
    event.append(_volume_bound("event", arcs, demand, demand.nbytes, EventSupply(arcs)))
    sync_lat = Bound(lat.value, "s", "sync", "distance", lat.witness, lat.note)
    sync_bw = _cut_parts("sync", arcs, demand, demand.nbytes, SyncSupply(arcs), first, budget_s)
    sync_bw.append(_volume_bound("sync", arcs, demand, demand.nbytes, SyncSupply(arcs)))
    seconds = forest_seconds(instance)
    event.append(_as_model(seconds, "event"))
    sync_bw.append(_as_model(seconds, "sync"))
    return event, [sync_lat], sync_bw


FOREST_KINDS = {"allgather": False, "broadcast": False, "reduce_scatter": True, "reduce": True}  # kind: transposed
FOREST_CELLS = 4_000_000  # compute nodes x links above which the exact cut optimum is not computed (time)


def forest_seconds(instance: Instance) -> Bound:
    """The exact cut optimum of an allgather, broadcast, reduce-scatter or reduce as a bound in
    seconds (bytes over bandwidth; latency only adds): ``(M / N) max_S |S ∩ Vc| / B+(S)``
    (broadcast: ``M / B+(S)`` over sets holding the root), found by max-flow
    (:func:`collsynth.tens.cut_optimum.optimum`; Zhao et al., "ForestColl", arXiv 2402.06787,
    Section 4); reduce-scatter and reduce on the transposed network (a schedule's time reversal
    loads the reversed links equally). The witness set is re-priced with the links' own
    bandwidths, so the value is a bound whatever the flow's integer rounding. Its model is
    ``event`` (:func:`_as_model` renames it).
    """
    from .cut_optimum import FlowTooLarge, cut_seconds, flow_net, optimum

    if instance.concurrent or instance.collective.kind not in FOREST_KINDS:
        return not_computed("event", "forest", "only a single allgather, broadcast, reduce-scatter or reduce")
    coll, topo = instance.collective, instance.topology
    if len(coll.nodes) * max(1, topo.num_links) > FOREST_CELLS:
        return not_computed("event", "forest", f"more than {FOREST_CELLS:,} compute nodes x links")
    weight = [1] * len(coll.nodes) if coll.kind in ("allgather", "reduce_scatter") else \
        [int(v == coll.root) for v in coll.nodes]
    net = flow_net(topo, coll.nodes, weight, transpose=FOREST_KINDS[coll.kind])
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
    """``T_L >= latency`` and ``T_B >= bandwidth`` separately, so the sum bounds ``T_L + T_B``."""
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
                topo.meta.get("latency", "serial"))
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


# ---- the TEN bound formulations and drivers start from ----------------------------------------

def timesteps_bound(instance: Instance, state=None, timestep: float | None = None,
                    budget_s: float = CUT_BUDGET_S) -> Bound:
    """The ``timesteps`` bound, from the start or (``state``: holdings ``[chunk, node]`` of the
    TEN model's direction, the dual for combining collectives) from an intermediate state.

    From a state the TEN model's own data is used: combining collectives are bounded through
    their dual on the transposed topology (time reversed), as the TEN formulations solve them.
    Raises :class:`~collsynth.tens.ten.NotSupported` when the instance has no TEN.
    """
    if state is None:
        b = instance_bounds(instance, timestep=timestep, budget_s=budget_s).timesteps
        if not b.computed:
            raise NotSupported(b.note)
        return b
    data, arcs, demand, parts = _ten_distance_parts(instance, state, timestep)
    lag = data.lag
    kmin = data.delay.min(axis=0)
    parts += _cut_parts("timesteps", arcs, demand, demand.count.astype(float),
                        TimestepSupply(data.capacity, kmin, data.latency),
                        _roots(data.instance), budget_s, int, lag.min(axis=0))
    parts.append(arrival_bound(data, min(budget_s, ARRIVAL_BUDGET_S)))
    b = best(parts, "timesteps")
    if not b.computed:
        raise NotSupported(b.note)
    return b


def _ten_distance_parts(instance: Instance, state, timestep: float | None) -> tuple:
    """The TEN of ``instance`` (copying switches: the larger set of schedules), its link pairs,
    its demand and the delay-weighted distance bound of each chunk group (path lengths: the
    delays, one less over an instant switch-to-NPU hop)."""
    data = prepare(instance, 1, state, timestep, switch_copy=True)
    topo = data.instance.topology
    arcs = Arcs(data.src, data.dst, data.capacity, topo.link_arrays.bandwidth, topo.link_arrays.alpha,
                np.asarray(topo.nodes, np.int64), topo.size)
    demand = _demand_of_ten(data)
    parts = [_distance_bound("timesteps", arcs, demand.select(np.flatnonzero(demand.group == g)), data.lag[g])
             for g in range(data.delay.shape[0])]
    return data, arcs, demand, parts


def lower_bound(instance: Instance, state=None, timestep: float | None = None) -> int:
    """TEN timesteps no capacity-respecting schedule can beat (:func:`timesteps_bound`: the
    largest of the delay-weighted distance, per-node, volume and cut bounds), as the TEN
    formulations start from it: :class:`~collsynth.tens.ten.NotSupported` when one TEN model
    cannot express the instance (allreduce, combining mixed with non-combining collectives)."""
    dual_instance(instance)
    return int(timesteps_bound(instance, state, timestep).value)


def distance_bound(instance: Instance, state=None, timestep: float | None = None) -> int:
    """Delay-weighted distance from the nearest holder to the farthest node needing a chunk
    (TEN timesteps; the only bound that holds when link capacity is ignored)."""
    parts = _ten_distance_parts(instance, state, timestep)[3]
    b = best(parts, "timesteps")
    if not b.computed:
        raise NotSupported(b.note.replace("not computed: ", "") or "some required chunk cannot reach its destination")
    return int(b.value)


# ---- which schedules the timesteps bound applies to ------------------------------------------

def respects_ten_capacity(schedule: Schedule, instance: Instance, timestep: float | None = None) -> bool:
    """Whether ``schedule``'s steps are TEN timesteps in which it respects link capacity.

    Every send must be on a link (``routing == "links"``) and start at timestep 1 or later;
    a send of chunk fraction ``x`` arriving at step ``t`` over pair ``l`` occupies ``l`` in
    timesteps ``t - L - k + 1 .. t - L`` (``k``: its collective's delay on ``l``,
    :func:`link_delays`; ``L`` its pipelined latency, :func:`link_latency`, else 0) and the
    fractions occupying a pair in any timestep add up to at most its chunks per timestep.
    These are the schedules the ``timesteps`` bound bounds.
    """
    if schedule.routing != "links":
        return False
    if not len(schedule):
        return True
    try:
        delay, cap, f = link_delays(instance.topology, [c.chunk_bytes for c in instance.collectives], timestep,
                                    switches=True)
    except NotSupported:
        return False
    la = instance.topology.link_arrays
    return _fits_ten_capacity(la.src * instance.topology.size + la.dst, instance.topology.size,
                              np.asarray(instance.chunk_offsets, dtype=np.int64), np.ascontiguousarray(delay, np.int64),
                              link_latency(instance.topology, f).astype(np.int64), np.asarray(cap, np.int64),
                              schedule.src, schedule.dst, schedule.chunk, schedule.step, schedule.lo, schedule.hi,
                              schedule.denom, int(schedule.step.max()) + 1)


@njit(cache=True, nogil=True)
def _fits_ten_capacity(keys, size, offs, delay, latency, cap, src, dst, chunk, step, lo, hi, denom, T):
    """:func:`respects_ten_capacity` in one pass over the sends: every send on a link pair
    (``keys``: the pairs' sorted ``src * size + dst``), starting at timestep 1 or later, and
    the chunk fractions occupying each pair in each timestep (counted in ``1 / denom``) at
    most its capacity."""
    load = np.zeros(len(keys) * T, np.int64)
    for i in range(len(src)):
        want = src[i] * size + dst[i]
        pair = np.searchsorted(keys, want)
        if pair == len(keys) or keys[pair] != want:
            return False
        group = np.searchsorted(offs, chunk[i], side="right") - 1
        k = delay[group, pair]
        start = step[i] - latency[pair] - k + 1
        if start < 1:
            return False
        for t in range(start, start + k):
            load[pair * T + t] += hi[i] - lo[i]
    for pair in range(len(keys)):
        for t in range(T):
            if load[pair * T + t] > cap[pair] * denom:
                return False
    return True
