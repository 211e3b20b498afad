"""Slack held back on the links off the bottleneck cut, for a reduction packed for FIFO links.

The cut condition (Zhao et al., "ForestColl: Throughput-Optimal Collective Communications on
Heterogeneous Network Fabrics", arXiv 2402.06787, Section 4) fixes the optimum by one cut; the
links crossing it are busy the whole time, the others may be too once the packing fills them.
Under the ``event`` model (``docs/cost-models.md``) a switch-to-GPU port with no idle time serves
the pieces in the order they reach it, while the GPU behind it sends in program order: a piece
its GPU needs later, served first, makes the GPU's links (and through them the cut's) wait. On
DGX-2 x2's rooted reduce (1 GB, alpha 0) seven such ports carry as much as the InfiniBand links
that set the bound, and the reduce is 1.0564 / 1.0286 (``event`` / in order) at 1600 pieces;
packed with the NVSwitch links at 110 of their 125 GB/s it is 1.0206 under both
(``benchmarks/bench_reduce_port_slack.py``).

:func:`held_back` derives how much to hold back from the cut analysis alone: every link off the
optimum's witness cut is scaled by one factor ``d``; ``least``, the least ``d`` on a grid of
:data:`GRID` steps that keeps the optimum, is how much those links can give up before another
cut binds (DGX-2 x2: 4/5, the root's own port, 8 of the bound's 10 ms); half of that spare is held
back, ``d = (1 + least) / 2`` (9/10 there), so the packing keeps the other half to grow its
trees in (at ``least`` itself the root's port is tight as well). The trees packed on the held-back
network run at the optimum on the real one (its capacities are at least the held-back ones).
DGX-2 x2's rooted reduce so packed, at 5900 pieces: 1.0051 / 1.0055 / 1.0069x the bound under
``event`` / ``event-inorder`` / ``sync`` (:func:`.fifo_reduce.deeper` keeps it there). Of the
other reductions of ``benchmarks/bench_allreduce.py``'s systems (rooted at the first GPU) none
has a link off its cut that can give up a twentieth.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np

from ...tens.cut_optimum import FlowNet, FlowTooLarge, Optimum, optimum, short_cut, tree_count

GRID = 20  # steps of the factor searched for the least one keeping the optimum (1/20: 5 % of a link)


def held_back(net: FlowNet, opt: Optimum) -> tuple[FlowNet, Optimum, Fraction] | None:
    """``net`` with every link off ``opt``'s witness cut scaled by ``d = (1 + least) / 2`` (module
    doc), its optimum (``opt``'s in seconds, the same witness) and ``d``; None when no link off the cut
    can give up a grid step, or the scaled capacities would not fit the flow solver.

    >>> from collsynth.instances.generators import build
    >>> from collsynth.tens.cut_optimum import flow_net
    >>> line = build("switch", {"nodes": 3, "unwind": 0})  # three GPUs on one switch, equal links
    >>> net = flow_net(line, range(3), [1, 0, 0])  # broadcast from GPU 0: its out-link is the cut
    >>> held_back(net, optimum(net)) is None  # the switch's out-links each carry a whole shard too
    True
    """
    inside = np.zeros(net.nodes, dtype=bool)
    inside[list(opt.witness)] = True
    on_cut = inside[net.src] & ~inside[net.dst]
    if opt.tau == 0 or on_cut.all():
        return None
    try:
        if not keeps(net, on_cut, Fraction(GRID - 1, GRID), opt):  # most fabrics: no spare at all
            return None
        lo, hi = 0, GRID - 1  # hi keeps the optimum; scaling down only raises it
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if keeps(net, on_cut, Fraction(mid, GRID), opt) else (mid, hi)
        d = (1 + Fraction(hi, GRID)) / 2
        held = scaled(net, on_cut, d)
    except FlowTooLarge:
        return None
    tau = opt.tau / d.denominator  # units d.denominator times finer: the same seconds
    return held, replace(opt, tau=tau, witness_ratio=tau, k=tree_count(held, tau)), d


def keeps(net: FlowNet, on_cut: np.ndarray, d: Fraction, opt: Optimum) -> bool:
    """Whether ``net`` with the links off the cut (``~on_cut``) scaled by ``d`` keeps ``opt``'s
    optimum: its cut condition holds at ``opt``'s time (its optimum is never less)."""
    held = scaled(net, on_cut, d)
    return short_cut(held, opt.tau / d.denominator, held.sinks)[0] is None  # units d.denominator times finer


def scaled(net: FlowNet, on_cut: np.ndarray, d: Fraction) -> FlowNet:
    """``net`` with the links off the cut scaled by ``d``: integer units ``den`` times finer
    (the cut's links keep their bandwidth, the others ``num`` of ``den`` of it); every compute
    node tested (a box shift need not keep the cut)."""
    num, den = d.numerator, d.denominator
    units = np.where(on_cut, net.units * den, net.units * num).astype(np.int64)
    bandwidth = np.where(on_cut, net.bandwidth, net.bandwidth * float(d))
    return replace(net, units=units, bandwidth=bandwidth, unit_bw=net.unit_bw / den, checked=None)
