"""The exact throughput optimum of tree-packable collectives by the cut condition, with max-flow.

Zhao, Maleki, Yang, Pourreza, Krishnamurthy, "ForestColl: Throughput-Optimal Collective
Communications on Heterogeneous Network Fabrics" (arXiv 2402.06787), Section 4: an allgather
over the compute nodes ``Vc`` of a network with switches needs at least

    T* = (M / N) * max over node sets S with Vc not inside S of |S ∩ Vc| / B+(S)

(``B+(S)``: the bandwidth of the links leaving ``S``), and ``k`` spanning out-trees per compute
node, each carrying ``M / (N k)``, reach it. The same argument with one root is broadcast's
bound (``M / min cut from the root``); reduce-scatter and reduce are these on the transposed
network (the time reversal of a schedule loads the reversed links equally).

Let ``w_r`` be the data root ``r`` sends (1 per shard) and ``tau = p / q`` a time per unit of
data in units of the slowest-link granularity. With a super source ``s -> r`` of capacity
``q w_r`` and link capacities ``p b_l`` the condition holds iff every compute node ``v`` has a
maximum flow from ``s`` of at least ``q W`` (``W = sum w_r``): a cut ``S`` (source side) of
less is a set with ``tau < w(S ∩ R) / B+(S)``. :func:`optimum` raises ``tau`` to that ratio
until no cut is short (Dinkelbach's method: each step is exact and strictly larger; the ratios
are finitely many), so the result is exact and its witness ``S`` proves it. Flows are scipy's
(:func:`scipy.sparse.csgraph.maximum_flow`, integer capacities).

>>> from collsynth.instances.generators import build
>>> net = flow_net(build("switch", {"nodes": 4, "unwind": 0}), range(4), [1, 1, 1, 1])
>>> opt = optimum(net)
>>> opt.tau, opt.witness_ratio
(Fraction(3, 1), Fraction(3, 1))
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable, Sequence

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order, maximum_flow

from ..instances.box_shift import box_shift

INT32_MAX = 2**31 - 1
RATIO_DENOMINATOR = 1000  # bandwidth ratios are taken as fractions with at most this denominator


class FlowTooLarge(ValueError):
    """The integer capacities of a flow do not fit scipy's int32 flow solver."""


@dataclass(frozen=True)
class FlowNet:
    """A network for the cut condition: directed arcs with integer capacity ``units`` (of
    ``unit_bw`` bytes/s each, parallel links pooled), the compute nodes and each one's weight as
    a root (data it sends, in shards; 0: it only receives)."""

    nodes: int
    src: np.ndarray
    dst: np.ndarray
    units: np.ndarray
    bandwidth: np.ndarray
    unit_bw: float
    compute: tuple[int, ...]
    weight: tuple[int, ...]
    checked: tuple[int, ...] | None = None  # compute nodes whose max flows stand for all (one per orbit of a
    # checked automorphism that keeps the weights: :func:`flow_net`); None: every compute node

    @property
    def sinks(self) -> tuple[int, ...]:
        """The compute nodes the cut condition is tested at: :attr:`checked`, else all."""
        return self.compute if self.checked is None else self.checked

    @property
    def total_weight(self) -> int:
        """``W``: the data every compute node must end with, in shards."""
        return int(sum(self.weight))


def integer_units(bandwidth: np.ndarray) -> tuple[np.ndarray, float]:
    """Bandwidths as integer multiples of a common unit: ``(units, unit_bw)``; ratios to the
    slowest link are taken as fractions of denominator at most :data:`RATIO_DENOMINATOR`.

    >>> integer_units(np.array([300e9, 25e9, 300e9]))
    (array([12,  1, 12]), 25000000000.0)
    """
    low = float(bandwidth.min())
    distinct, at = np.unique(np.asarray(bandwidth, dtype=float), return_inverse=True)  # a fabric has few
    ratios = [Fraction(float(b) / low).limit_denominator(RATIO_DENOMINATOR) for b in distinct]
    lcm = math.lcm(*(r.denominator for r in ratios))
    ints = [int(r * lcm) for r in ratios]
    g = math.gcd(*ints)
    return np.asarray([x // g for x in ints], dtype=np.int64)[at.reshape(-1)], low * g / lcm


def flow_net(topology, compute: Iterable[int], weight: Sequence[int], transpose: bool = False) -> FlowNet:
    """The live links of ``topology`` (reversed with ``transpose``) as a :class:`FlowNet` over
    ``compute`` nodes with root weights ``weight``. On identical boxes
    (:func:`collsynth.instances.box_shift.box_shift`, automorphisms, so of the reversed links
    too) whose shifts keep every root's weight, a max flow to a compute node equals the max flow
    to its image: only the first box's nodes are tested (:attr:`FlowNet.checked`)."""
    la = topology.link_arrays
    src, dst = (la.dst, la.src) if transpose else (la.src, la.dst)
    units, unit_bw = integer_units(la.bandwidth)
    compute, weight = tuple(int(c) for c in compute), tuple(int(w) for w in weight)
    return FlowNet(topology.size, src.astype(np.int64), dst.astype(np.int64), units, la.bandwidth.astype(float),
                   unit_bw, compute, weight, _orbit_representatives(topology, compute, weight))


def _orbit_representatives(topology, compute: tuple[int, ...], weight: tuple[int, ...]) -> tuple[int, ...] | None:
    """The first box's compute nodes when the box shifts keep every weight, else None."""
    shift = box_shift(topology, compute)
    if shift is None:
        return None
    w = dict(zip(compute, weight))
    if any(w[c] != w[int(perm[c])] for perm in shift.perms for c in compute):
        return None
    return shift.representatives(compute)


def max_flow(n: int, src: np.ndarray, dst: np.ndarray, cap: np.ndarray, s: int, t: int,
             side: bool = False) -> tuple[int, np.ndarray | None]:
    """Maximum flow value from ``s`` to ``t`` over arcs ``src -> dst`` of integer ``cap`` on
    nodes ``0..n-1`` (parallel arcs add up) and, with ``side``, the minimal source side of a
    minimum cut (bool per node: reachable from ``s`` in the residual network)."""
    cap = np.asarray(cap, dtype=np.int64)
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    keys, where = np.unique(src * n + dst, return_inverse=True)
    pooled = np.bincount(where, weights=cap, minlength=len(keys))  # parallel arcs add up
    # an arc's flow and residual stay within twice its capacity, the flow value within what leaves s
    if len(cap) and (pooled.max() > INT32_MAX // 2 or min(cap[src == s].sum(), cap[dst == t].sum()) > INT32_MAX):
        raise FlowTooLarge(f"capacities up to {int(pooled.max())} (flow up to {int(cap[src == s].sum())}) exceed "
                           "the int32 flow solver")
    data = pooled.astype(np.int32)
    indptr = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(keys // n, minlength=n), out=indptr[1:])
    graph = sp.csr_matrix((data, (keys % n).astype(np.int32), indptr), shape=(n, n))
    result = maximum_flow(graph, s, t, method="dinic")
    if not side:
        return int(result.flow_value), None
    residual = (graph - result.flow).tocsr()
    residual.data = (residual.data > 0).astype(np.int8)
    residual.eliminate_zeros()
    reach = breadth_first_order(residual, s, directed=True, return_predecessors=False)
    mask = np.zeros(n, dtype=bool)
    mask[reach] = True
    return int(result.flow_value), mask


@dataclass(frozen=True)
class Optimum:
    """The exact optimum of a :class:`FlowNet`: ``tau`` (time per shard, in units of one shard
    over ``unit_bw``), the witness set ``S`` where ``w(S ∩ R) / B+(S) = tau``, and ``k``, the
    least number of trees per unit of root weight whose capacities ``k tau b_l`` are integers."""

    tau: Fraction
    witness: tuple[int, ...]
    witness_ratio: Fraction
    k: int
    flows: int

    def seconds(self, shard_bytes: float, unit_bw: float) -> float:
        """The optimum time of shards of ``shard_bytes`` bytes on links of ``unit_bw`` units."""
        return float(shard_bytes * self.tau / unit_bw) if self.tau else 0.0


def _ingress_start(net: FlowNet) -> Fraction:
    """A lower bound to start from: the best single-node set ``S = V \\ {v}`` ratio."""
    W = net.total_weight
    inflow = np.zeros(net.nodes, dtype=np.int64)
    np.add.at(inflow, net.dst, net.units)
    best = Fraction(0)
    for v, w in zip(net.compute, net.weight):
        need = W - w
        if need > 0:
            if inflow[v] == 0:
                raise ValueError(f"node {v} has no incoming link")
            best = max(best, Fraction(need, int(inflow[v])))
    return best


def _ratio(net: FlowNet, inside: np.ndarray) -> Fraction:
    """``w(S ∩ R) / B+(S)`` for the node set ``inside`` (bool per node)."""
    out = int(net.units[inside[net.src] & ~inside[net.dst]].sum())
    w = sum(wt for c, wt in zip(net.compute, net.weight) if inside[c])
    if out == 0:
        raise ValueError("a set of nodes holding data has no link leaving it: some compute node cannot be reached")
    return Fraction(w, out)


def short_cut(net: FlowNet, tau: Fraction, order: Sequence[int]) -> tuple[np.ndarray | None, int, int]:
    """The first compute node of ``order`` whose max flow under ``tau`` is short, as ``(source
    side, that node, flows run)``; ``(None, -1, flows)`` when the condition holds everywhere."""
    p, q = tau.numerator, tau.denominator
    s = net.nodes
    roots = [c for c, w in zip(net.compute, net.weight) if w]
    src = np.concatenate([net.src, np.full(len(roots), s)])
    dst = np.concatenate([net.dst, np.asarray(roots, dtype=np.int64)])
    cap = np.concatenate([net.units * p, np.asarray([q * w for w in net.weight if w], dtype=np.int64)])
    need = q * net.total_weight
    flows = 0
    for v in order:
        flows += 1
        value, side = max_flow(s + 1, src, dst, cap, s, v, side=True)
        if value < need:
            return side[:s], v, flows
    return None, -1, flows


def optimum(net: FlowNet) -> Optimum:
    """The exact optimum ``tau`` of ``net`` by Dinkelbach's method over max flows (module doc),
    its witness cut and the least tree count ``k`` (Zhao et al., ForestColl, arXiv 2402.06787,
    Section 4 and Appendix; Dinkelbach, "On nonlinear fractional programming", Management
    Science 1967)."""
    tau = _ingress_start(net)
    witness: tuple[int, ...] = ()
    if tau == 0:
        return Optimum(Fraction(0), (), Fraction(0), 1, 0)
    order = list(net.sinks)
    flows = 0
    while True:
        side, v, ran = short_cut(net, tau, order)
        flows += ran
        if side is None:
            break
        new = _ratio(net, side)
        if new <= tau:
            raise RuntimeError(f"cut ratio {new} does not exceed {tau}: flow solver inconsistent")
        tau, witness = new, tuple(int(x) for x in np.flatnonzero(side))
        order.remove(v)
        order.insert(0, v)  # the node that failed is the likeliest to fail again
    if not witness:
        witness = _ingress_witness(net, tau)
    return Optimum(tau, witness, _ratio_of(net, witness), tree_count(net, tau), flows)


def _ingress_witness(net: FlowNet, tau: Fraction) -> tuple[int, ...]:
    """The set ``V \\ {v}`` of a node whose ingress ratio is ``tau`` (the start was optimal)."""
    live = np.zeros(net.nodes, dtype=bool)
    live[net.src] = True
    live[net.dst] = True
    for v, w in zip(net.compute, net.weight):
        if w == net.total_weight:  # V \ {v} holds no data (as :func:`_ingress_start` skips v)
            continue
        inside = live.copy()
        inside[v] = False
        if _ratio(net, inside) == tau:
            return tuple(int(x) for x in np.flatnonzero(inside))
    raise RuntimeError("no node attains the ingress ratio")


def _ratio_of(net: FlowNet, witness: tuple[int, ...]) -> Fraction:
    inside = np.zeros(net.nodes, dtype=bool)
    inside[list(witness)] = True
    return _ratio(net, inside)


def tree_count(net: FlowNet, tau: Fraction) -> int:
    """The least ``k`` with ``k tau units_l`` an integer for every link: trees per shard.

    >>> tree_count(FlowNet(2, np.array([0]), np.array([1]), np.array([12]), np.ones(1), 1.0, (0, 1), (1, 1)),
    ...            Fraction(15, 13))
    13
    """
    g = math.gcd(*(int(u) for u in net.units)) if len(net.units) else 1
    return tau.denominator // math.gcd(tau.denominator, tau.numerator * g)


def cut_seconds(net: FlowNet, witness: Iterable[int], shard_bytes: float) -> float:
    """The time bound a node set proves with the links' float bandwidths (a bound for any set):
    ``shard_bytes * w(S ∩ R) / B+(S)`` (seconds), 0 when nothing in ``S`` sends."""
    inside = np.zeros(net.nodes, dtype=bool)
    inside[list(witness)] = True
    out = float(net.bandwidth[inside[net.src] & ~inside[net.dst]].sum())
    w = sum(wt for c, wt in zip(net.compute, net.weight) if inside[c])
    if w == 0 or not any(not inside[c] for c in net.compute):
        return 0.0
    return shard_bytes * w / out if out > 0 else math.inf


def capacities(net: FlowNet, k: int, tau: Fraction) -> np.ndarray:
    """Every link's capacity in trees of ``k`` per shard at time ``tau``: ``floor(k tau units)``."""
    distinct, at = np.unique(np.asarray(net.units, dtype=np.int64), return_inverse=True)  # a fabric has few
    caps = [(k * tau * int(u)).numerator // (k * tau * int(u)).denominator for u in distinct]
    return np.asarray(caps, dtype=np.int64)[at.reshape(-1)]


def holds_with(net: FlowNet, caps: np.ndarray, k: int) -> bool:
    """Whether ``k w_r`` trees per root fit the integer link capacities ``caps``: every compute
    node has a max flow of ``k W`` from a super source with arcs ``k w_r`` to the roots
    (Edmonds' theorem, J. Edmonds, "Edge-disjoint branchings", 1973)."""
    s = net.nodes
    roots = [(c, w) for c, w in zip(net.compute, net.weight) if w]
    src = np.concatenate([net.src, np.full(len(roots), s)])
    dst = np.concatenate([net.dst, np.asarray([c for c, _ in roots], dtype=np.int64)])
    cap = np.concatenate([caps, np.asarray([k * w for _, w in roots], dtype=np.int64)])
    need = k * net.total_weight
    return all(max_flow(s + 1, src, dst, cap, s, v)[0] >= need for v in net.sinks)


def fixed_k(net: FlowNet, k: int, tau_star: Fraction, stretch: Fraction = Fraction(2)) -> Fraction | None:
    """The least time ``tau >= tau_star`` (at most ``stretch`` times it) at which ``k`` trees per
    shard fit the floored capacities ``floor(k tau units)`` (ForestColl's fixed-k search, Zhao et
    al., arXiv 2402.06787, Section 5 and Appendix); None if none does within ``stretch``. The
    candidates are the times where some capacity steps up, searched by bisection, after
    ``tau_star`` itself (the answer whenever it holds, as for the optimum's own ``k``; the
    candidates up to ``stretch`` times it can number hundreds of thousands where the units are
    fine, e.g. links on a share of their bandwidth, :mod:`collsynth.solvers.packing.capacity_split`).

    >>> from collsynth.instances.generators import build
    >>> net = flow_net(build("switch", {"nodes": 4, "unwind": 0}), range(4), [1, 1, 1, 1])
    >>> fixed_k(net, 1, optimum(net).tau)
    Fraction(3, 1)
    """
    if holds_with(net, capacities(net, k, tau_star), k):
        return tau_star
    top = tau_star * stretch
    cands = {tau_star}
    for u in {int(x) for x in net.units}:
        m0 = math.ceil(k * tau_star * u)
        m1 = math.floor(k * top * u)
        cands.update(Fraction(m, k * u) for m in range(m0, m1 + 1))
    cands = sorted(c for c in cands if tau_star <= c <= top)
    lo, hi = 0, len(cands) - 1
    if not cands or not holds_with(net, capacities(net, k, cands[hi]), k):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if holds_with(net, capacities(net, k, cands[mid]), k):
            hi = mid
        else:
            lo = mid + 1
    return cands[lo]
