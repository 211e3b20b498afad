"""Allreduce with each half on its own share of every link: both halves run at once, neither waits.

An allreduce is a reduce-scatter then an allgather (Zhao et al., "ForestColl", arXiv
2402.06787, Section 4). Overlapped piece by piece (:mod:`.overlap`), the two halves run side by
side, so in the pipelined limit the allreduce of ``M`` bytes takes ``T`` as soon as some split
of every link's bandwidth ``b_e = r_e + g_e`` lets the reduce-scatter finish in ``T`` on the
shares ``r`` and the allgather in ``T`` on the shares ``g``. Each half's least time on its
shares is ForestColl's cut condition (Section 4): with ``lambda = M / (N T)`` the rate a shard
flows at, every node set ``S`` that misses a compute node must be left by ``g`` capacity of at
least ``lambda |S ∩ Vc|`` (the allgather) and entered by ``r`` capacity of at least ``lambda |S ∩
Vc|`` (the reduce-scatter, the same on the transposed links). A switch that forwards keeps each
half's share in balance (what enters it leaves it; ForestColl's edge splitting, Section 5.1,
needs it). :func:`split` maximises ``lambda`` under these constraints, a linear program whose
cuts are generated as needed: each round solves it over the cuts found so far (HiGHS, through
:func:`scipy.optimize.linprog`) and adds, for each half and compute node ``v``, the minimum cut
of the super source (``lambda`` into every root) to ``v`` when it is below ``N lambda``
(:func:`networkx.minimum_cut`); with no cut short the shares are optimal for the cut model.

Where the topology has box shifts (:func:`collsynth.instances.box_shift.box_shift`: automorphisms
moving the first box's GPUs onto every other) every link's shares are replaced by their mean over
its orbit under them (:func:`symmetric`). That loses nothing: an automorphism maps a split to a
split of the same rate (it keeps bandwidths, switches and the compute nodes, so every cut
constraint and switch balance holds for the image as for the split), and a mean of splits of one
rate meets each of those linear constraints too; the mean of a split's images over the group is
each link's mean over its orbit. Equal shares along orbits keep the share topologies symmetric, so
each half's trees can be grown for the first box's roots and moved by the shifts
(:mod:`.translated`): on DGX-2 x2 42 trees a shard 7 hops deep, against 21 trees 19 hops deep of
the greedy packing on the program's own vertex, which gives some InfiniBand links wholly to one half.

Reduce-scatter then allgather in sequence is the split in time instead (``r = b`` for the
first half, ``g = b`` for the second), so the split never loses to it. It wins where the halves'
bottlenecks are different links. On a DGX-2 pair (two 16-GPU NVSwitch chassis, the odd GPUs'
InfiniBand links into the other chassis' even GPUs; ``dgx2 chassis=2``) the reduce-scatter is
bound by the even GPUs' 125 GB/s egress (their NVSwitch link only) and the allgather by the odd
GPUs' 125 GB/s ingress: 7.75 + 7.75 ms at 1 GB; split, 14.762 ms, the allreduce's partition
bound (62 GB over 4,200 GB/s of GPU ingress; :mod:`collsynth.tens.bounds.partitions`), so the
bound is that allreduce's optimum in the pipelined limit.

Two GPUs joined both ways at 1 byte/s: the halves take 1/2 + 1/2 s of a 1-byte allreduce in
sequence; split, each link carries the reduce-scatter's half byte and the allgather's half
byte at once, and no split does better (the partition bound, 2 (2 - 1) M over 2 byte/s):

>>> from collsynth.instances.topology import from_edges
>>> s = split(from_edges(2, [(0, 1), (1, 0)], bandwidth=1.0, alpha=0.0), [0, 1])
>>> s.seconds(1.0), sorted(s.reduce_scatter.values())
(1.0, [Fraction(1, 2), Fraction(1, 2)])
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction

import networkx as nx
import numpy as np
from scipy.optimize import linprog

from ...limits import TimeLimitReached, seconds_left

MAX_ROUNDS = 60  # cut-generation rounds (DGX-2 x2 settles in 2; each round is 2 N minimum cuts)
DENOMINATOR = 64  # the shares, as fractions of a link's bandwidth, are rounded to this denominator at most
TOLERANCE = 1e-9


@dataclass(frozen=True)
class Split:
    """Each link's share (a fraction of its bandwidth) for each half, and the rate both reach."""

    reduce_scatter: dict  # (src, dst) -> Fraction of the link's bandwidth the reduce-scatter gets
    allgather: dict  # (src, dst) -> Fraction for the allgather (1 - the reduce-scatter's)
    rate: float  # bytes/s a shard flows at on both halves (lambda): the allreduce takes shard bytes / rate
    gpus: int  # N, the compute nodes the allreduce runs over
    rounds: int
    cuts: int

    def seconds(self, message_bytes: float) -> float:
        """The allreduce's time in the pipelined limit for ``message_bytes`` over the ``N`` GPUs."""
        return message_bytes / self.gpus / self.rate if self.rate > 0 else float("inf")


def split(topology, compute, symmetric_shares: bool = True) -> Split | None:
    """The split of every link of ``topology`` between an allreduce's halves over ``compute``
    that maximises the rate both reach (module doc), the shares rounded to fractions of
    denominator at most :data:`DENOMINATOR` with each switch's shares kept in balance, then
    (``symmetric_shares``) each made its mean over its link orbit (:func:`symmetric`); None
    when the rounded shares lose that balance or no round left every cut satisfied."""
    la = topology.link_arrays
    links = list(zip(la.src.tolist(), la.dst.tolist()))
    bw = la.bandwidth / la.bandwidth.max()
    compute = tuple(compute)
    cuts: set = set()
    for rounds in range(1, MAX_ROUNDS + 1):
        share, rate = _solve(links, bw, topology.switches, compute, cuts)
        short = {(half, S) for half, w in (("rs", share), ("ag", 1 - share))
                 for S in _short_cuts(links, bw * w, compute, rate, half)} - cuts
        if not short:
            break
        cuts |= short
    else:
        return None
    r = {e: Fraction(float(x)).limit_denominator(DENOMINATOR) for e, x in zip(links, np.clip(share, 0, 1))}
    r = symmetric(topology, compute, r) if symmetric_shares else r
    if not all(_balanced(links, bw, r, w) and _balanced(links, bw, {e: 1 - f for e, f in r.items()}, w)
               for w in topology.switches):
        return None
    return Split(r, {e: 1 - f for e, f in r.items()}, rate * float(la.bandwidth.max()), len(compute), rounds,
                 len(cuts))


def symmetric(topology, compute, share: dict) -> dict:
    """``share`` (link pair -> Fraction, over ``topology.link_arrays``' pairs) with each pair's
    share replaced by the exact mean over its orbit under the box shifts moving ``compute``
    (:func:`collsynth.instances.box_shift.box_shift`; module doc); ``share`` itself where there
    are none. Two GPUs on a switch, the shift swapping them, shares 1/2 and 0 up, 1/4 and 1/4 down:

    >>> from collsynth.instances.topology import from_edges
    >>> t = from_edges(3, [(0, 2), (1, 2)], bandwidth=1.0, alpha=0.0, bidirectional=True, switches=[2])
    >>> got = symmetric(t, [0, 1], {(0, 2): Fraction(1, 2), (1, 2): Fraction(0), (2, 0): Fraction(1, 4),
    ...                             (2, 1): Fraction(1, 4)})
    >>> [str(got[e]) for e in [(0, 2), (1, 2), (2, 0), (2, 1)]]
    ['1/4', '1/4', '1/4', '1/4']
    """
    from ...instances.box_shift import box_shift
    from ...tens.pipelined_trees import link_orbits

    la = topology.link_arrays
    shift = box_shift(topology, compute)
    if shift is None:
        return share
    group, _ = link_orbits(la, shift.perms, shift.orders)
    links = list(zip(la.src.tolist(), la.dst.tolist()))
    total: dict = {}
    for e, g in zip(links, group.tolist()):
        total.setdefault(g, []).append(share[e])
    mean = {g: sum(v, Fraction(0)) / len(v) for g, v in total.items()}
    return {e: mean[g] for e, g in zip(links, group.tolist())}


def _solve(links, bw, switches, compute, cuts) -> tuple[np.ndarray, float]:
    """The linear program over the cuts found so far: ``(reduce-scatter share per link, rate)``
    (variables: each link's two shares, then the rate, in units of the fastest link)."""
    m = len(links)
    a_ub, b_ub = [], []
    for e in range(m):
        row = np.zeros(2 * m + 1)
        row[e] = row[m + e] = 1
        a_ub.append(row), b_ub.append(1.0)
    for half, S in sorted(cuts, key=lambda cut: (cut[0], sorted(cut[1]))):  # one order whatever the hash seed
        row = np.zeros(2 * m + 1)
        for e, (u, v) in enumerate(links):
            if half == "rs" and v in S and u not in S:
                row[e] = -bw[e]
            elif half == "ag" and u in S and v not in S:
                row[m + e] = -bw[e]
        row[-1] = sum(1 for c in compute if c in S)
        a_ub.append(row), b_ub.append(0.0)
    a_eq = []
    for w in switches:
        for off in (0, m):
            row = np.zeros(2 * m + 1)
            for e, (u, v) in enumerate(links):
                row[off + e] += bw[e] * ((v == w) - (u == w))
            a_eq.append(row)
    cost = np.zeros(2 * m + 1)
    cost[-1] = -1
    left = seconds_left()  # HiGHS runs in C, where the run's timer cannot stop it: its own limit
    got = linprog(cost, A_ub=np.array(a_ub), b_ub=np.array(b_ub), A_eq=np.array(a_eq) if a_eq else None,
                  b_eq=np.zeros(len(a_eq)) if a_eq else None, bounds=[(0, 1)] * (2 * m) + [(0, float(bw.sum()))],
                  method="highs", options={} if left is None else {"time_limit": left})
    if got.x is None:  # stopped by the run's time limit
        raise TimeLimitReached("capacity split", f"its linear program after {len(cuts)} cuts")
    return got.x[:m], float(got.x[-1])


def _short_cuts(links, cap, compute, rate: float, half: str) -> set:
    """The node sets (frozensets) of the minimum cuts from a super source (``rate`` into every
    root) to each compute node that carry less than ``N rate``, on the links as they are
    (``ag``: a set must be left) or transposed (``rs``: a set must be entered)."""
    g = nx.DiGraph()
    for (u, v), c in zip(links, cap):
        a, b = (u, v) if half == "ag" else (v, u)
        g.add_edge(a, b, capacity=float(c))
    source = ("source",)
    for r in compute:
        g.add_edge(source, r, capacity=rate)
    out = set()
    for v in compute:
        value, (side, _) = nx.minimum_cut(g, source, v)
        if value < len(compute) * rate * (1 - TOLERANCE):
            out.add(frozenset(side) - {source})
    return out


def _balanced(links, bw, share: dict, switch: int) -> bool:
    """Whether the shares of ``switch``'s links in and out carry as much bandwidth."""
    into = sum(float(b * share[e]) for e, b in zip(links, bw) if e[1] == switch)
    out = sum(float(b * share[e]) for e, b in zip(links, bw) if e[0] == switch)
    return math.isclose(into, out, rel_tol=1e-12, abs_tol=1e-12)


def share_topology(topology, share: dict):
    """``topology`` with each link's bandwidth times its ``share`` (parallel links alike), the
    links of no share removed; every node and id kept."""
    g = topology.graph.copy()
    for u, v, key, data in list(g.edges(keys=True, data=True)):
        f = share[(u, v)]
        if f <= 0:
            g.remove_edge(u, v, key)
        else:
            data["bandwidth"] = float(data["bandwidth"]) * f
    meta = {k: v for k, v in topology.meta.items() if k != "cayley"}
    return replace(topology, graph=g, meta=meta, name=f"{topology.name}-share")


def split_instances(instance, halves_seconds: float, symmetric_shares: bool = True):
    """The instance of each half on its share (reduce-scatter's, allgather's) when :func:`split`
    beats the halves in sequence (``halves_seconds``, their optima summed) by more than a part in
    a million, with the split; None where it does not, where the allreduce's partition bound
    (bandwidth alone, :func:`collsynth.tens.bounds.partitions.partition_bound`) already proves
    the halves in sequence optimal (then no split is tried: it cannot win), or where a switch
    reduces or copies (the cut model above is of switches that forward). ``symmetric_shares``:
    as :func:`split`."""
    from ...instances.switch_ops import copying_mask, reducing_mask
    from ...tens.bounds.demand import arcs_of
    from ...tens.bounds.partitions import partition_bound
    from ...tens.bounds.supply import SyncSupply

    topo, coll = instance.topology, instance.collective
    if reducing_mask(topo).any() or copying_mask(topo, False).any():
        return None
    bound = partition_bound(instance, SyncSupply(arcs_of(topo)), model="sync").value
    if bound is None or bound >= halves_seconds * (1 - 1e-6):
        return None
    got = split(topo, coll.nodes, symmetric_shares)
    if got is None or got.seconds(coll.message_bytes) >= halves_seconds * (1 - 1e-6):
        return None
    return [replace(instance, topology=share_topology(topo, s)) for s in (got.reduce_scatter, got.allgather)], got
