"""What the links entering a node set deliver, per cost model (TEN timesteps, pieces, event, sync).

Part of :mod:`collsynth.tens.bounds` (its module documentation describes every argument).
"""

from __future__ import annotations

import math

import numpy as np

from ..ten import discretize
from .demand import Arcs
from .record import TEN_SLACK, TOL


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
        order = np.argsort(self.alpha[idx], kind="stable")
        a, b = self.alpha[idx][order], self.bw[idx][order]
        if not len(a):
            return math.inf
        # with links 0..j active: tau_j = (need + sum b a) / sum b; the first j whose tau_j
        # does not reach the next link's latency (or the last j)
        tau = (need + np.cumsum(b * a)) / np.cumsum(b)
        stop = np.r_[tau[:-1] <= a[1:], True]
        j = int(np.argmax(stop))
        return max(float(tau[j]), float(a[j]))


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
