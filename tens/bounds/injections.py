"""A ``sync`` bound of an allreduce on a fabric whose switches copy nothing: what enters the
boxes in a step was put into the fabric by the boxes in the steps before (:func:`injection_bound`).

The synchronous price (Zhao et al., "Efficient Direct-Connect Topologies for Collective
Communications", NSDI 2025, Section 3.2) of ``S`` steps is ``sum_t (a_t + b_t)``: ``a_t`` the
largest alpha of a link used in step ``t``, ``b_t`` the largest ``bytes_l / bandwidth_l``. The
partition bound (:mod:`.partitions`) charges the bytes that must cross into the regions at the
links' bandwidth, as if they could all cross at once; where the switches between the regions
hold nothing and copy nothing, every byte that crosses into a region in a step left a region
in an earlier step, over links of their own bandwidth, so the crossings form a pipeline of two
stages whose fill is charged here, as :mod:`.drain` charges it for an allgather.

**The parts.** ``R_1 .. R_k`` (``k >= 2``): the boxes (a switch whose links join compute nodes
only, both ways, with those nodes: a DGX's NVSwitch) and every other compute node entered
only from switches (a fat tree's host, a box of one); together every compute node, each a
participant. ``X``: the switches in no part. It is required that every link entering a part
leaves a switch of ``X`` by a hop that is not instant, every link leaving a part enters a
switch of ``X``, and no switch of ``X`` copies or reduces (declared: ``copy`` false, no
``reduce``, :mod:`collsynth.instances.switch_ops`; InfiniBand and RoCE reliable connections,
NCCL's transport, are point to point: a queue pair is associated with one other, and
multicast is a datagram service only, NVIDIA, "RDMA Aware Networks Programming User Manual",
v1.7, "Transport Modes"). Steps are the sync model's (no pipelined link latency, a switch
forwarding in the step after the one that brought the piece) for sends on links. ``E``,
``U``: the summed bandwidths of the links entering and leaving the parts; ``alpha_e``,
``alpha_x``: the least alpha of a link entering, leaving a part; ``M`` the buffer's bytes.

**Proof.** Take any schedule on links; drop its empty steps. Let ``n_t`` be the bytes crossing
into the parts in step ``t`` (every arrival over a link entering a part) and ``x_t`` those
leaving them.

1. ``sum_t n_t >= D = 2 (k - 1) M``: the one-way gossip count of :mod:`.partitions` with these
   parts as its regions (no switch outside them reduces).
2. ``n_t <= E b_t`` and ``x_t <= U b_t`` (a step's ``b_t`` is at least any of its links' load
   over bandwidth, so at least their sums' ratio).
3. Injections: a piece crossing into a part in step ``t`` left a switch of ``X`` in ``t``, so
   reached it in ``t - 1``, over a link from a part (it left a part in ``t - 1``) or from a
   switch of ``X`` (which it reached in ``t - 2``), and so on back to a link leaving a part, in
   a step before ``t``. A switch of ``X`` sends each arrival on at most once, so distinct
   crossings in (link, step, byte) lead back to distinct departures (by induction over the
   steps, as in :mod:`.drain`, 7): ``n_1 + .. + n_t <= x_1 + .. + x_(t-1)``. This is flow
   conservation in the time-expanded network (Ford and Fulkerson, "Constructing Maximal
   Dynamic Flows from Static Flows", Operations Research 6(3), 1958) whose switches hold
   nothing (TE-CCL: Liu et al., SIGCOMM 2024, Section 4).
4. Call a step with a crossing into a part an *entry step*, ``J`` of them, ``e_1 < .. < e_J``:
   each pays ``a_t >= alpha_e``, and a step before ``e_1`` has a departure (3), paying
   ``alpha_x``, so ``T_L >= J alpha_e + alpha_x``; and ``T_L >= L`` (the distance argument).
5. With ``p_j = b_(e_j)``, ``c_j`` the sum of ``b_t`` over the steps between ``e_(j-1)`` and
   ``e_j`` (before ``e_1`` for ``c_1``), ``m_j = n_(e_j) / D`` and ``r = U / E``, in units of
   ``D / E`` seconds: ``m_j <= p_j`` (2), ``m_1 + .. + m_j <= r (p_1 + .. + p_(j-1) + c_1 + ..
   + c_j)`` (2, 3: what departed before ``e_j``), ``sum m_j >= 1`` (1); ``T_B >= sum_j (p_j +
   c_j)``, and ``T_B >= T*`` (the bandwidth bound).

So ``T_B >= LP(J) D / E``, the least ``sum (p_j + c_j)`` under 5, and ``T >= min_J [max(L, J
alpha_e + alpha_x) + max(T*, LP(J) D / E)]``. Where ``r = 1`` (full-duplex links, as many
leaving as entering) ``LP(J) = (J + 1) / J``: with ``W = c_1 + .. + c_J + sum_(j<J) (p_j -
m_j)`` every ``m_j <= W`` (5), so ``sum m_j <= J W`` and ``sum (p_j + c_j) >= sum m_j + W >=
(J + 1) / J``; equal pieces in ``J + 1`` steps, each step sending what the last received, meet it.

**Two hosts under one switch** (links of 1 B/s, alpha 1 s, 2 bytes a host): two parts, ``D =
4`` bytes over ``E = 2`` B/s; one entry step costs ``2 + 4`` s, two ``3 + 3`` s (both hosts send
a byte up, then the other byte up as the first comes down, then the second comes down), three
``4 + 2.67`` s: 6 s, met by each host sending both bytes up in one step and the switch sending
them down in the next (``L + T*`` is 4 s; the halves' box bounds add up to 8 s, which that
schedule is below: ``tests/test_drain_injections.py``).
"""

from __future__ import annotations

import numpy as np

from ...instances.switch_ops import copying_mask, reducing_mask
from ..ten import latency_pipelined
from .demand import instant_out
from .drain import SAFETY, _Links, _lone
from .ramp import least_over_steps
from .record import Bound, not_computed

MAX_PHASES = 256  # the largest J solved; beyond it the bound counts alphas and T* only


def refusal(instance, latency: Bound, bandwidth: Bound, argument: str) -> Bound | None:
    """The not-computed ``sync`` bound named ``argument`` where an allreduce bound over these
    steps cannot be taken (not a single allreduce, no latency or bandwidth bound, or a pipelined
    link latency, whose steps are TEN timesteps); None where it can."""
    if instance.concurrent or instance.collective.kind != "allreduce":
        return not_computed("sync", argument, "only a single allreduce")
    if not (latency.computed and bandwidth.computed):
        return not_computed("sync", argument, "needs the latency and bandwidth bounds")
    if latency_pipelined(instance.topology):
        return not_computed("sync", argument, "a pipelined link latency makes steps TEN timesteps")
    return None


def injection_bound(instance, latency: Bound, bandwidth: Bound) -> Bound:
    """The bound of the module doc for a single allreduce whose parts meet its conditions; not
    computed otherwise (saying which condition failed)."""
    refused = refusal(instance, latency, bandwidth, "injections")
    if refused is not None:
        return refused
    got = parts_numbers(instance)
    if isinstance(got, str):
        return not_computed("sync", "injections", got)
    k, E, U, alpha_e, alpha_x = got
    D = 2 * (k - 1) * instance.collective.message_bytes  # the buffer, M bytes on every participant
    value = crossing_seconds(D / E, U / E, alpha_e, alpha_x, latency.value, bandwidth.value)
    if value is None:
        return not_computed("sync", "injections", "a phase program was not solved")
    return Bound(value * (1 - SAFETY), "s", "sync", "injections", None,
                 f"steps where data crosses into the {k} boxes, each crossing put into the fabric before")


def parts_numbers(instance) -> tuple | str:
    """``(k, E, U, alpha_e, alpha_x)`` of the parts (module doc), or why they do not meet its
    conditions."""
    got = box_parts(instance)
    if isinstance(got, str):
        return got
    part, k = got
    la = instance.topology.link_arrays
    crossing = part[la.src] != part[la.dst]
    into, out = crossing & (part[la.dst] >= 0), crossing & (part[la.src] >= 0)
    bw = la.bandwidth  # a pair's parallel links' summed bandwidth (LinkArrays)
    return k, float(bw[into].sum()), float(bw[out].sum()), float(la.alpha[into].min()), float(la.alpha[out].min())


def box_parts(instance) -> tuple | str:
    """``(part, k)``: each node's part (``-1``: a switch of ``X``) and the number of parts, where
    they meet the module doc's conditions; else why not."""
    topo, coll = instance.topology, instance.collective
    la = topo.link_arrays
    n = topo.size
    is_switch = np.zeros(n, bool)
    is_switch[list(topo.switches)] = True
    links = _Links(la, n, instant_out(topo))
    part = np.full(n, -1, np.int64)
    k = 0
    compute = ~is_switch & np.isin(np.arange(n), list(topo.nodes))
    for sigma in np.flatnonzero(is_switch).tolist():
        box = np.unique(la.dst[links.leaving(sigma)])
        ins = np.unique(la.src[links.entering(sigma)])
        if 1 <= len(box) < compute.sum() and len(ins) == len(box) and (box == ins).all() \
                and not is_switch[box].any() and (part[box] < 0).all():
            part[box], part[sigma], k = k, k, k + 1
    for w in _lone(la, compute & (part < 0), is_switch):
        part[w], k = k, k + 1
    if (part[compute] < 0).any():
        return "a compute node in no box and not entered from switches only"
    if sorted(int(v) for v in coll.nodes) != np.flatnonzero(compute).tolist():
        return "a compute node that does not take part"
    if k < 2:
        return "fewer than two boxes"
    outside = part < 0
    crossing = part[la.src] != part[la.dst]
    into, out = crossing & (part[la.dst] >= 0), crossing & (part[la.src] >= 0)
    if not (outside[la.src[into]].all() and outside[la.dst[out]].all()):
        return "a link between two boxes that does not pass through a switch in none"
    if links.instant[into].any():
        return "an instant hop into a box"
    if (copying_mask(topo, True) | reducing_mask(topo))[outside & is_switch].any():
        return "a switch outside the boxes may copy or reduce (declare copy = false: module doc)"
    return part, k


def crossing_seconds(unit: float, r: float, alpha_e: float, alpha_x: float, L: float, T_star: float) -> float | None:
    """``min_J [max(L, J alpha_e + alpha_x) + max(T*, LP(J) unit)]`` (module doc: ``unit = D /
    E``, ``r = U / E``); None when a program is not solved.

    Two hosts under one switch (module doc): ``D / E = 2`` s, alpha 1 s, ``L`` 2 s, ``T*`` 2 s.

    >>> round(crossing_seconds(2.0, 1.0, 1.0, 1.0, 2.0, 2.0), 9)
    6.0
    """
    lp = lambda J: (None if (v := _phases_lp(J, r)) is None else v * unit)  # noqa: E731
    best = least_over_steps(lp, alpha_e, L - alpha_x, T_star, first=1, most=MAX_PHASES)
    return None if best is None else best + alpha_x


def _phases_lp(J: int, r: float) -> float | None:
    """``LP(J)`` of the module doc: variables ``m, p, c`` per entry step; the least ``sum (p + c)``."""
    from scipy import sparse
    from scipy.optimize import linprog

    m, p, c = np.arange(J), np.arange(J) + J, np.arange(J) + 2 * J
    rows, cols, vals, rhs = [], [], [], []
    for j in range(J):
        row = 2 * j
        rows += [row, row]
        cols += [int(m[j]), int(p[j])]
        vals += [1.0, -1.0]  # m_j <= p_j
        rows += [row + 1] * (2 * j + 1 + j + 1)
        cols += [int(i) for i in m[:j + 1]] + [int(i) for i in p[:j]] + [int(i) for i in c[:j + 1]]
        vals += [1.0] * (j + 1) + [-r] * j + [-r] * (j + 1)
        rhs += [0.0, 0.0]
    rows += [2 * J] * J
    cols += [int(i) for i in m]
    vals += [-1.0] * J
    rhs.append(-1.0)
    A = sparse.csr_matrix((vals, (rows, cols)), shape=(2 * J + 1, 3 * J))
    cost = np.r_[np.zeros(J), np.ones(2 * J)]
    res = linprog(cost, A_ub=A, b_ub=np.asarray(rhs), bounds=[(0, None)] * (3 * J), method="highs")
    return float(res.fun) if res.status == 0 else None
