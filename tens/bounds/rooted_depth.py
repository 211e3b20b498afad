"""A ``sync`` bound for a rooted reduce from its depth: what the root finishes in a step must have
left the farthest GPUs several steps before, so a pipeline of few steps fills slowly and one of
many steps pays many latencies (:func:`rooted_depth_bound`).

The synchronous price (Zhao et al., "Efficient Direct-Connect Topologies for Collective
Communications", NSDI 2025, Section 3.2) of ``S`` steps is ``sum_t (a_t + b_t)``: ``a_t`` the
largest alpha of a link used in step ``t``, ``b_t`` the largest ``bytes_l / bandwidth_l``. The
bound ``L + T*`` (:func:`collsynth.tens.bounds.instance._sync_total`) charges one path's latency
and the root's cut (``T* = M / R``, ``R`` the bandwidth into the root). A pipelined reduce pays
more (Thakur et al., "Optimization of Collective Communication Operations in MPICH", IJHPCA
2005, Section 4: a pipeline of ``d`` stages and ``P`` pieces takes ``P + d - 1`` steps), and so
must every schedule.

**The argument.** A single reduce to ``r`` of ``M`` bytes a GPU, sent on links (``routing =
"links"``), steps the sync model's store-and-forward steps (no pipelined latency, no instant
switch hop: a switch forwards in step ``t`` what reached it in ``t - 1``). Drop the empty steps
(the price does not change). Let ``C(t)`` be the bytes (positions of the buffer) whose reduction
the root has completed by the end of step ``t`` and ``b_t`` step ``t``'s bandwidth time.

1. A position completed in step ``t`` has a byte reaching ``r`` in step ``t``, so
   ``C(t) - C(t - 1) <= R b_t``.
2. It holds the contribution of every GPU ``v``; that contribution left ``v`` (inside some
   partial sum) by step ``t - d_v + 1``, ``d_v`` the hops from ``v`` to ``r`` (one a step), and
   ``v`` sends at most ``O_v b_t`` bytes a step (``O_v`` its bandwidth out), so
   ``C(t) <= O_v (b_1 + ... + b_(t - d_v + 1))``.

So ``T_B = sum_t b_t >= LP(S)``, the least ``sum_t b_t`` with ``C(S) = M`` under 1. and 2. (a
linear program of ``2 S`` variables, one row of 2. per distinct ``(d_v, O_v)``), and every step
pays at least the least alpha ``alpha_min``: ``T >= min_S [max(L, S alpha_min) + max(T*,
LP(S))]``. With one GPU at ``d`` hops and ``O_v = R``, ``LP(S) = T* S / (S - d + 1)``: ``S - d +
1`` equal pieces pipelined down ``d`` hops, which that schedule reaches.

**Two GPUs behind a switch** (links ``B``, alpha ``M / (16 B)``): ``d = 2``, the bound is ``5 M /
(16 B) + 5 M / (4 B)`` at ``S = 5``, four pieces through the switch (:func:`rooted_lp`).

**Not covered:** a schedule routed on shortest paths (``routing = "shortest-path"``) crosses
several hops in one step; it is bounded by ``L + T*`` alone (``Bounds.sync_routed``).
"""

from __future__ import annotations

import numpy as np

from ...instances.instance import Instance
from ..ten import latency_pipelined
from .demand import instant_out
from .ramp import MAX_STEPS, SAFETY, least_over_steps
from .record import Bound, not_computed


def rooted_depth_bound(instance: Instance, latency: Bound, bandwidth: Bound) -> Bound:
    """The depth bound (module doc) of a single rooted reduce; not computed for another
    collective, where no link has a latency, or where steps are not store-and-forward."""
    if instance.concurrent or instance.collective.kind != "reduce":
        return not_computed("sync", "rooted depth", "only a single rooted reduce")
    coll = instance.collective
    if not (latency.computed and bandwidth.computed):
        return not_computed("sync", "rooted depth", "needs the latency and bandwidth bounds")
    topo = instance.topology
    if latency_pipelined(topo) or instant_out(topo).any():
        return not_computed("sync", "rooted depth", "a pipelined latency or an instant switch hop (steps are not "
                                                    "the sync model's store-and-forward steps)")
    la = topo.link_arrays
    alpha = float(la.alpha.min()) if len(la) else 0.0
    if alpha <= 0:
        return not_computed("sync", "rooted depth", "no link has a latency")
    root_in, senders = feeders(la, int(coll.root), [int(v) for v in coll.nodes])
    if not senders or root_in <= 0:
        return not_computed("sync", "rooted depth", "no GPU sends to the root")
    first = max(d for d, _ in senders)
    value = least_over_steps(lambda S: rooted_lp(S, coll.message_bytes, root_in, senders), alpha, latency.value,
                             bandwidth.value, first=first, most=max(MAX_STEPS, 2 * first))
    if value is None:
        return not_computed("sync", "rooted depth", "the step program was not solved")
    return Bound(value * (1 - SAFETY), "s", "sync", "rooted depth", f"r={int(coll.root)} d={first}",
                 f"steps of at least {alpha:g} s each against a reduction that reaches the root {first} hops "
                 "after leaving its farthest GPU")


def feeders(la, root: int, participants: list[int]) -> tuple[float, tuple]:
    """``(R, ((d, O), ...))``: the bandwidth into ``root`` and, per hop distance ``d`` to it of
    some other participant, the least bandwidth out ``O`` of a participant at that distance
    (module doc).

    >>> from collsynth.instances.generators import build
    >>> feeders(build("switch", {"nodes": 3}, bandwidth=2.0, alpha=1.0).link_arrays, 0, [0, 1, 2])
    (2.0, ((2, 2.0),))
    """
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    n = la.size
    into_root = csr_matrix((np.ones(len(la.src)), (la.dst, la.src)), shape=(n, n))  # reversed: root to v
    hops = shortest_path(into_root, unweighted=True, indices=root)
    out_bw = np.bincount(la.src, weights=la.bandwidth, minlength=n)
    least: dict[int, float] = {}
    for v in participants:
        if v != root and np.isfinite(hops[v]):
            d = int(hops[v])
            least[d] = min(least.get(d, float("inf")), float(out_bw[v]))
    into = float(la.bandwidth[la.dst == root].sum())
    return into, tuple(sorted(least.items()))


def rooted_lp(S: int, need: float, into: float, senders: tuple) -> float | None:
    """``LP(S)`` (module doc): the least ``sum_t b_t`` over ``S`` steps in which a root with
    ``into`` bandwidth in completes ``need`` bytes, each holding a contribution of a GPU at
    each ``(d, O)`` of ``senders`` (hops to the root, bandwidth out); infinite where no ``S``
    steps suffice, None when the solver fails.

    >>> round(rooted_lp(5, 1.0, 1.0, ((2, 1.0),)), 9)  # two GPUs behind a switch: 4 pieces in 5 steps
    1.25
    >>> rooted_lp(1, 1.0, 1.0, ((2, 1.0),))  # the contribution is still in the switch
    inf
    """
    from scipy import sparse
    from scipy.optimize import linprog

    # variables: b_1..b_S (seconds, times into / need), C_1..C_S (completed, share of need), and the
    # running sums U_t = b_1 + ... + b_t
    steps = np.arange(S)
    b, c, u = steps, S + steps, 2 * S + steps
    ub, eq = ([], [], [], []), ([], [], [], [])

    def row(rows, entries, bound):
        k = len(rows[3])
        for j, v in entries:
            rows[0].append(k)
            rows[1].append(j)
            rows[2].append(v)
        rows[3].append(bound)

    for t in steps:
        row(eq, [(u[t], 1.0), (b[t], -1.0)] + ([(u[t - 1], -1.0)] if t else []), 0.0)
        row(ub, [(c[t], 1.0), (b[t], -1.0)] + ([(c[t - 1], -1.0)] if t else []), 0.0)  # 1. (into scaled to 1)
        for d, out in senders:  # 2. C_t <= (O / R) U_(t - d + 1)
            row(ub, [(c[t], 1.0)] + ([(u[t - d + 1], -out / into)] if t - d + 1 >= 0 else []), 0.0)
    row(ub, [(c[S - 1], -1.0)], -1.0)  # C_S >= 1: every byte completed
    n = 3 * S
    A_ub = sparse.csr_matrix((ub[2], (ub[0], ub[1])), shape=(len(ub[3]), n))
    A_eq = sparse.csr_matrix((eq[2], (eq[0], eq[1])), shape=(len(eq[3]), n))
    cost = np.r_[np.ones(S), np.zeros(2 * S)]
    res = linprog(cost, A_ub=A_ub, b_ub=np.array(ub[3]), A_eq=A_eq, b_eq=np.array(eq[3]),
                  bounds=[(0, None)] * n, method="highs")
    if res.status == 2:
        return float("inf")
    return float(res.fun) * need / into if res.status == 0 else None
