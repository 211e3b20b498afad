"""Trees plus a pipeline rule: a schedule kept as its trees, verified and priced as that.

A tree-packing schedule (Zhao et al., "ForestColl: Throughput-Optimal Collective
Communications on Heterogeneous Network Fabrics", arXiv 2402.06787, Sections 4-5) is ``T``
out-trees, tree ``t`` carrying the part ``[lo_t, hi_t)`` (in ``1/k`` of a shard) of its root's
data down route hops, cut into ``P = chunks_per_root * pieces`` pipeline pieces: piece ``q``
crosses a hop whose source received it ``b`` steps after the root sent it in step ``q + b + 1``.
Listing those sends costs ``P`` times the tree hops; this form costs the tree hops alone
(memory in trees x hops), and :func:`expand` lists the sends on request (the schedule the
verifier and every cost model read; :func:`collsynth.solvers.packing.producer.emit`).

:func:`verify` decides what :func:`collsynth.tens.verify.verify` decides of the expansion, on
the trees: every hop a live link; a hop leaves a node only after the piece reached it (a
switch forwards it in the very next step, one arrival per forward unless switches copy);
every node reached at most once per tree (a reduction adds each contribution once); the trees
of a root split its shard exactly and each reaches every participant. :func:`price_sync` is
the synchronous alpha-beta price (Zhao et al., NSDI 2025, Section 3.2; :func:`collsynth.tens.cost.price_sync`)
of the expansion: the loads of a step change only where a tree depth starts or stops its
pieces, so it sums a few segments of equal steps. Reversed forms (reduce-scatter, reduce: the
trees on the transposed topology, time-reversed; :func:`collsynth.tens.schedule.reverse`)
have the same step loads in reverse order, so the same price.

>>> import numpy as np
>>> from collsynth.instances import make_instance
>>> from collsynth.instances.generators import build
>>> inst = make_instance(build("ring", {"nodes": 3}), "allgather", message_bytes=3e9)
>>> hops = [(0, 1, 0), (1, 2, 1), (1, 2, 0), (2, 0, 1), (2, 0, 0), (0, 1, 1)]  # a chain per root
>>> f = PipelinedTrees("allgather", 3, 3, 1, 4, 1, np.array([0, 1, 2]), np.array([0, 0, 0]),
...                    np.array([1, 1, 1]), np.array([0, 2, 4, 6]), *map(np.array, zip(*hops)))
>>> verify(f, inst) is None, len(expand(f)), price_sync(f, inst).steps
(True, 24, 5)
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from .schedule import Schedule, from_arrays, reverse

NON_COMBINING = {"allgather": "allgather", "broadcast": "broadcast", "reduce_scatter": "allgather",
                 "reduce": "broadcast"}  # a collective -> the kind its trees send (reversed when they differ)


@dataclass(frozen=True)
class PipelinedTrees:
    """``T`` routed trees and the pipeline rule (module doc), as columns.

    ``collective``: the kind the schedule implements (``reduce_scatter`` and ``reduce`` are
    the time reversal of the trees' ``allgather`` / ``broadcast`` on the transposed topology);
    ``nodes``, ``chunks``: the schedule header; ``chunks_per_root``: chunks of a root's shard;
    ``pieces``: pipeline pieces per chunk; ``k``: a shard is ``k`` units, tree ``t`` carries
    ``[lo[t], hi[t])`` of root ``root[t]``'s; tree ``t``'s hops are ``ptr[t]:ptr[t+1]`` of
    ``src``, ``dst`` (in the trees' direction) and ``before`` (steps after the root's send).
    """

    collective: str
    nodes: int
    chunks: int
    chunks_per_root: int
    pieces: int
    k: int
    root: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    ptr: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    before: np.ndarray

    @property
    def reversed(self) -> bool:
        """Whether the schedule is the time reversal of the trees."""
        return NON_COMBINING[self.collective] != self.collective

    @property
    def depth(self) -> int:
        """Steps from a root's first send to its last piece's arrival at the deepest node, less ``P``."""
        return int(self.before.max()) + 1 if len(self.before) else 0

    @property
    def sends(self) -> int:
        """The sends :func:`expand` lists: hops times ``P``."""
        return len(self.src) * self.chunks_per_root * self.pieces


def expand(f: PipelinedTrees) -> Schedule:
    """The explicit sends of ``f``: piece ``q`` of tree ``t`` over a hop ``b`` steps below its
    root in step ``q + b + 1`` (module doc), chunk ids of the trees' kind (allgather: root
    ``r``'s ``j``-th chunk is ``r c + j``), pieces in units of ``1 / (k * pieces)``; the time
    reversal for ``reduce_scatter`` / ``reduce``."""
    c, pieces = f.chunks_per_root, f.pieces
    q = np.arange(c * pieces, dtype=np.int64)
    j, p = q // pieces, q % pieces
    kind = NON_COMBINING[f.collective]
    cols = {name: [] for name in ("chunk", "lo", "hi", "src", "dst", "step")}
    for t in range(len(f.root)):
        a, b = int(f.ptr[t]), int(f.ptr[t + 1])
        src, dst, before = f.src[a:b].astype(np.int64), f.dst[a:b].astype(np.int64), f.before[a:b].astype(np.int64)
        width = int(f.hi[t] - f.lo[t])
        base = (int(f.root[t]) * c if kind == "allgather" else 0) + j
        lo = int(f.lo[t]) * pieces + p * width
        H, Q = len(src), len(q)
        cols["chunk"].append(np.tile(base, H))
        cols["lo"].append(np.tile(lo, H))
        cols["hi"].append(np.tile(lo + width, H))
        cols["src"].append(np.repeat(src, Q))
        cols["dst"].append(np.repeat(dst, Q))
        cols["step"].append((before[:, None] + q[None, :] + 1).ravel())
    arr = {name: np.concatenate(v) if v else np.zeros(0, np.int64) for name, v in cols.items()}
    sched = from_arrays(kind, f.nodes, f.chunks, denom=f.k * pieces, **arr)
    return reverse(sched) if f.reversed else sched


def verify(f: PipelinedTrees, instance, switch_copy: bool | None = None) -> str | None:
    """Why ``f``'s expansion does not implement ``instance``'s collective, or None (module
    doc: the same verdict :func:`collsynth.tens.verify.verify` gives the expansion, from the
    trees alone). ``switch_copy``: whether a switch may send one arrival on several links
    (default: True for non-combining collectives, False for reversed ones, as the producer
    marks them)."""
    topo, coll = instance.topology, instance.collective
    if coll.kind != f.collective or coll.size != f.nodes or coll.num_chunks != f.chunks:
        return f"the trees implement {f.collective} on {f.nodes} nodes, not the instance's {coll.kind}"
    la = topo.link_arrays
    src, dst = (f.dst, f.src) if f.reversed else (f.src, f.dst)
    missing = np.flatnonzero(la.lookup(src, dst) < 0)
    if len(missing):
        h = int(missing[0])
        return f"hop {h} ({int(src[h])} -> {int(dst[h])}) is not a live link"
    copy = (not f.reversed) if switch_copy is None else switch_copy
    switch = frozenset(topo.switches)
    for t in range(len(f.root)):
        why = _tree_violation(f, t, switch, copy)
        if why is not None:
            return f"tree {t} (root {int(f.root[t])}): {why}"
    return _coverage_violation(f, coll)


def _tree_violation(f: PipelinedTrees, t: int, switch: frozenset, copy: bool) -> str | None:
    """What is wrong with tree ``t`` alone: a hop from a node that has not got the piece, a
    switch that keeps a piece or forwards more than reached it, a compute node reached twice
    (a switch may be crossed by several routes of a tree)."""
    a, b = int(f.ptr[t]), int(f.ptr[t + 1])
    root = int(f.root[t])
    arrive = {root: 0}
    into: Counter = Counter()  # (switch, step after the root's send) -> arrivals
    out: Counter = Counter()
    order = np.argsort(f.before[a:b], kind="stable") + a
    for h in order.tolist():
        u, v, s = int(f.src[h]), int(f.dst[h]), int(f.before[h])
        if u in switch:
            if into[(u, s)] == 0:
                return f"switch {u} forwards at {s} steps a piece it did not receive the step before"
            out[(u, s)] += 1
        elif u not in arrive or arrive[u] > s:
            return f"hop {u} -> {v} at {s} steps leaves before the piece reached {u}"
        if v in switch:
            into[(v, s + 1)] += 1
        elif v in arrive:
            return f"node {v} is reached twice"
        else:
            arrive[v] = s + 1
    for (u, s), n in out.items():
        if n > into[(u, s)] and not copy:
            return f"switch {u} forwards {n} copies of {into[(u, s)]} arrival(s) (switches do not copy)"
    return None


def _coverage_violation(f: PipelinedTrees, coll) -> str | None:
    """Every root's trees split its shard ``[0, k)`` exactly and each reaches every participant."""
    nodes = frozenset(int(v) for v in coll.nodes)
    roots = sorted(nodes) if NON_COMBINING[f.collective] == "allgather" else [int(coll.root)]
    parts: dict[int, list] = {r: [] for r in roots}
    for t in range(len(f.root)):
        r = int(f.root[t])
        if r not in parts:
            return f"tree {t} has root {r}, not a root of the collective"
        reached = set(f.dst[int(f.ptr[t]):int(f.ptr[t + 1])].tolist()) | {r}
        if not nodes <= reached:
            return f"tree {t} (root {r}) misses node {min(nodes - reached)}"
        parts[r].append((int(f.lo[t]), int(f.hi[t])))
    for r, spans in parts.items():
        at = 0
        for lo, hi in sorted(spans):
            if lo != at or hi <= lo:
                return f"root {r}'s trees do not split its shard: a gap or overlap at {at}/{f.k}"
            at = hi
        if at != f.k:
            return f"root {r}'s trees carry {at}/{f.k} of its shard"
    return None


@dataclass(frozen=True)
class SyncPrice:
    """The synchronous price of a :class:`PipelinedTrees`: used ``steps`` and the latency and
    bandwidth parts (the fields of :class:`collsynth.tens.cost.Cost` under ``sync``)."""

    steps: int
    T_L_s: float
    T_B_s: float

    @property
    def total_s(self) -> float:
        """``T_L_s + T_B_s``."""
        return self.T_L_s + self.T_B_s


def price_sync(f: PipelinedTrees, instance) -> SyncPrice:
    """The synchronous alpha-beta price of ``f``'s expansion (module doc), in segments of steps
    with the same hops active: hop ``h`` carries one piece in each of steps ``before_h + 1 ..
    before_h + P``; per step, the largest alpha over links used plus the largest load over
    bandwidth (Zhao et al., NSDI 2025, Section 3.2)."""
    la = instance.topology.link_arrays
    src, dst = (f.dst, f.src) if f.reversed else (f.src, f.dst)
    link = la.lookup(src, dst)
    P = f.chunks_per_root * f.pieces
    widths = (f.hi - f.lo).astype(np.float64)
    per_hop = np.repeat(widths, np.diff(f.ptr)) / (f.k * f.pieces) * instance.collective.chunk_bytes
    starts, stops = f.before + 1, f.before + P + 1  # active in [start, stop)
    edges = np.unique(np.concatenate([starts, stops]))
    steps, T_L, T_B = 0, 0.0, 0.0
    for a, b in zip(edges[:-1].tolist(), edges[1:].tolist()):
        active = (starts <= a) & (stops > a)
        if not active.any():
            continue
        used = link[active]
        load = np.bincount(used, weights=per_hop[active], minlength=len(la))
        T_L += (b - a) * float(la.alpha[used].max())
        T_B += (b - a) * float((load / la.bandwidth).max())
        steps += b - a
    return SyncPrice(steps, T_L, T_B)
