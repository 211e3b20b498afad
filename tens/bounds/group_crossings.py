"""A ``sync`` bound of an allreduce on boxes of one GPU joined by a multi-tier fabric: every byte
position crosses between groups of boxes both ways around the step some group first knows
every input, and such a crossing spends more steps in the fabric than one inside a group
(:func:`group_crossing_bound`).

The crossing bound (:mod:`.injections`) lets a delivery into a box arrive in the step after it
left a box, as it does between two boxes under one leaf switch. Between boxes behind different
leaves a delivery climbs to a spine and down again, one step a hop (a switch forwards in a step
what reached it in the step before; Liu et al., "Rethinking Machine Learning Collective
Communication as a Multi-Commodity Flow Problem", SIGCOMM 2024, Section 4): on a rail Clos of
two tiers four hops, three steps after it left. An allreduce cannot keep all of its deliveries
inside groups: each byte position crosses out of every group but one before some group knows
every input and into every group but that one after (the one-way gossip count of
:mod:`.partitions`, Hedetniemi, Hedetniemi and Liestman, Networks 18(4), 1988, with groups for
parts), so the pipeline's first and last steps cannot carry the crossings' arrivals: the
fabric's fill is charged at the crossings' own delay.

**The setting.** The parts of :mod:`.injections` (its conditions: no switch outside the parts
copying or reducing, no instant hop into a part, sync steps for sends on links, no pipelined
link latency), each of one compute node (``k`` of them). ``h(u, v)``: the fewest links on a path
from part ``u`` to part ``v`` through switches only. *Groups*: the classes of the parts joined by
``h <= 2`` either way (closed transitively), ``G >= 2`` of them. ``d_i = min h - 1`` over all pairs
of parts, ``d_c = min h - 1`` over pairs in different groups (``d_c >= 2``). ``E``, ``U``: the
summed bandwidths of the links entering and leaving parts; ``Y_first`` (``Y_last``): of the links
between two switches out of a switch entered from a part (into a switch with a link into a part);
``alpha``: the least alpha of any link.

**Proof.** Take any schedule on links; drop its empty steps (a switch that received nothing in
a dropped step forwards nothing in the next, so no delay shortens); ``N`` steps remain, each
paying ``a_t >= alpha``. Take one byte position. A *delivery* is an arrival at a compute node
over a link from a switch; it left a compute node (its *departure*) at least ``h - 1`` steps
before, ``h`` the hops between their parts, and distinct deliveries have distinct departures
(no switch copies: :mod:`.injections`, 3). A delivery is a *crossing* if the two parts are in
different groups: it arrives ``d_c`` steps after its departure at least, any delivery ``d_i``.
Order the deliveries by departure step (ties in one fixed order); let each part know its
input and, after each delivery into it, what that delivery carried, and each group the union of
what its parts know; by induction over the order each node's content is inside what its part
knows and that inside what its group knows (a delivery carries what its sender held at the end
of the step before it left, which arrived by deliveries that left earlier). A group's knowledge
changes only at crossings into it.

1. *Parts* (:mod:`.box_stages`, 1-4, with boxes of one): ``d*`` the first delivery after which
   some part knows every input, ``tau`` its departure step; at least ``k - 1`` deliveries
   (exports) leave in steps up to ``tau`` and ``k - 1`` others (imports) in steps from ``tau`` on.
2. *Groups*: ``d*_G`` the first delivery after which some group ``X`` knows every input,
   ``tau_G`` its departure step. ``d*_G`` is at or before ``d*`` in the order (after ``d*``
   the group of ``x`` knows everything), so ``tau_G <= tau``. For each other group ``Y`` the
   first crossing out of ``Y`` carrying an input of ``Y`` is at or before ``d*_G`` (``X`` learns
   ``Y``'s inputs only by chains of crossings starting with one), so ``G - 1`` crossings (one
   out of each such ``Y``) leave in steps up to ``tau_G``; and ``Y`` does not know every input
   at ``d*_G`` (it would have completed before it), so a crossing into ``Y`` after ``d*_G``
   brings it something: ``G - 1`` more crossings (one into each), leaving in steps from
   ``tau_G`` on. The two sets are disjoint (before and after ``d*_G`` in the order).

Summed over the byte positions, in bytes, per step ``j = 1 .. N``: ``x^i_j, x^c_j`` the bytes of
deliveries inside groups and of crossings leaving in step ``j``, ``n^i_j, n^c_j`` arriving;
``P, Q`` the exports' and imports' shares of them (1), ``R, S`` the crossings of 2 leaving before
and after; ``mu_j`` (``nu_j``) the byte positions whose ``d*`` (``d*_G``) leaves in step ``j``:

a. ``x^i_j + x^c_j <= U b_j``, ``n^i_j + n^c_j <= E b_j``;
b. ``n^i_1 + .. + n^i_j <= x^i_1 + .. + x^i_(j - d_i)``, ``n^c_1 + .. + n^c_j <= x^c_1 + .. +
   x^c_(j - d_c)``, for every kind alone too (exports, imports), with as many bytes arriving as
   leaving of each;
c. exports and imports are distinct deliveries (``P + Q`` at most each kind's bytes), as are the
   crossings of 2 (``R_j + S_j <= x^c_j``);
d. ``P_1 + .. + P_j >= (k - 1)(mu_1 + .. + mu_j)``, ``Q_j + .. + Q_N >= (k - 1)(mu_j + .. +
   mu_N)``, ``R_1 + .. + R_j >= (G - 1)(nu_1 + .. + nu_j)``, ``S_j + .. + S_N >= (G - 1)(nu_j +
   .. + nu_N)``, ``nu_1 + .. + nu_j >= mu_1 + .. + mu_j`` (``tau_G <= tau``), ``sum mu = sum nu =
   M``.

So ``T >= min_N [max(L, N alpha) + max(T*, LP(N))]``, ``LP(N)`` the least ``sum b_j`` under a-d
(an empty last step keeps a solution, so ``LP`` does not grow with ``N``). Without the groups'
rows (c-e for ``R, S``, ``d_c = d_i``) it is the crossing bound's program over all steps.

**What it adds.** Three groups of two one-GPU boxes behind a spine (``bench_tier3_proxy.py``'s
fabric; NICs and spine ports of 50 GB/s and 2.7 us, ``d_i = 1``, ``d_c = 3``), 1 GiB: 36.628 ms
against the crossing bound's 36.416 ms; tree packing's verified schedule costs 36.865 ms.
"""

from __future__ import annotations

import numpy as np

from .box_stages import _Program
from .drain import SAFETY
from .injections import MAX_PHASES, box_parts, parts_numbers, refusal
from .ramp import least_over_steps
from .record import Bound, not_computed


def group_crossing_bound(instance, latency: Bound, bandwidth: Bound) -> Bound:
    """The bound of the module doc for a single allreduce whose parts are single compute nodes
    meeting the conditions of :mod:`.injections` in two groups or more; not computed otherwise
    (saying why)."""
    refused = refusal(instance, latency, bandwidth, "group crossings")
    if refused is not None:
        return refused
    got = group_numbers(instance)
    if isinstance(got, str):
        return not_computed("sync", "group crossings", got)
    k, G, d_i, d_c, E, U, Y_first, Y_last, alpha = got
    unit = instance.collective.message_bytes / E

    def lp(N):
        v = group_program(N, k, G, d_i, d_c, U / E, Y_first / E, Y_last / E)
        return None if v is None else v * unit

    value = least_over_steps(lp, alpha, latency.value, bandwidth.value, first=d_c + 1, most=4 * MAX_PHASES)
    if value is None:
        return not_computed("sync", "group crossings", "a program was not solved")
    return Bound(value * (1 - SAFETY), "s", "sync", "group crossings", None,
                 f"crossings between {G} groups of boxes, {d_c} steps in the fabric, both ways a byte")


def group_numbers(instance) -> tuple | str:
    """``(k, G, d_i, d_c, E, U, Y_first, Y_last, alpha)`` of the module doc, or why the instance
    does not meet its conditions."""
    got = box_parts(instance)
    if isinstance(got, str):
        return got
    part, k = got
    topo = instance.topology
    la = topo.link_arrays
    compute = np.zeros(topo.size, bool)
    compute[list(topo.nodes)] = True
    compute[list(topo.switches)] = False
    if np.bincount(part[compute], minlength=k).max() != 1:
        return "a box of more than one compute node"
    hops = _part_hops(la, part, k, compute)
    near = (hops <= 2) | (hops <= 2).T
    group = _classes(near)
    G = int(group.max()) + 1
    if G < 2:
        return "one group of boxes"
    off = ~np.eye(k, dtype=bool)
    apart = group[:, None] != group[None, :]
    d_i, d_c = int(hops[off].min()) - 1, int(hops[apart].min()) - 1
    _, E, U, _, _ = parts_numbers(instance)
    switch = ~compute
    fed = np.zeros(topo.size, bool)  # switches entered from a part
    fed[la.dst[compute[la.src]]] = True
    feeding = np.zeros(topo.size, bool)  # switches with a link into a part
    feeding[la.src[compute[la.dst]]] = True
    between = switch[la.src] & switch[la.dst]
    Y_first = float(la.bandwidth[between & fed[la.src]].sum())
    Y_last = float(la.bandwidth[between & feeding[la.dst]].sum())
    return k, G, d_i, d_c, E, U, Y_first, Y_last, float(la.alpha.min())


def _part_hops(la, part, k, compute) -> np.ndarray:
    """``[k, k]``: the fewest links from part ``u`` to part ``v`` on a path whose inner nodes are
    switches (breadth first from each part's node)."""
    n = len(part)
    out = [[] for _ in range(n)]
    for s, d in zip(la.src.tolist(), la.dst.tolist()):
        out[s].append(d)
    hops = np.full((k, k), np.iinfo(np.int64).max // 2, np.int64)
    for src in np.flatnonzero(compute).tolist():
        seen, frontier, h = {src}, [src], 0
        while frontier:
            h += 1
            nxt = []
            for u in frontier:
                for v in out[u]:
                    if v in seen:
                        continue
                    seen.add(v)
                    if compute[v]:
                        hops[part[src], part[v]] = min(hops[part[src], part[v]], h)
                    else:
                        nxt.append(v)
            frontier = nxt
    return hops


def _classes(near: np.ndarray) -> np.ndarray:
    """The class of each part under the transitive closure of ``near`` (a symmetric bool matrix)."""
    from scipy.sparse.csgraph import connected_components

    return connected_components(near, directed=False)[1]


class _Steps(_Program):
    """The variables of ``LP(N)`` (module doc): ``xi, xc, ni, nc`` the deliveries inside groups and
    crossings leaving and arriving, ``Pd*, Pe*, Qd*, Qe*`` the exports' and imports' (``i`` inside,
    ``c`` crossing), ``R, S`` the crossings of 2, ``mu, nu`` and ``b`` per step."""

    NAMES = ("xi", "xc", "ni", "nc", "Pdi", "Pdc", "Pei", "Pec", "Qdi", "Qdc", "Qei", "Qec", "R", "S",
             "mu", "nu", "b")
    GROUPS = ()


def group_program(N: int, k: int, G: int, d_i: int, d_c: int, U: float, Y_first: float = np.inf,
                  Y_last: float = np.inf) -> float | None:
    """``LP(N)`` of the module doc in units of ``M / E`` seconds (bandwidths in ``E``): the least
    ``sum b`` under a-d; ``inf`` when no schedule of ``N`` steps fits, None when the solver fails.

    One group cannot be: with two parts in two groups, ``d_c = 1``, the crossing bound's
    ``(N + 1) / N`` of ``2 M / E`` (:mod:`.injections`), here 3 at ``N = 2``:

    >>> [round(group_program(N, 2, 2, 1, 1, 1.0), 9) for N in (1, 2, 3)]
    [inf, 4.0, 3.0]
    """
    from scipy.optimize import linprog

    lp = _Steps(N)
    _rows(lp, N, k, G, d_i, d_c, U, Y_first, Y_last)
    A, rhs, eq = lp.matrix()
    cost = np.zeros(A.shape[1])
    cost[lp.col["b"]] = 1.0
    res = linprog(cost, A_ub=A[~eq], b_ub=rhs[~eq], A_eq=A[eq], b_eq=rhs[eq], bounds=[(0, None)] * A.shape[1],
                  method="highs")
    if res.status == 2:
        return float("inf")
    return float(res.fun) if res.status == 0 else None


def _rows(lp: _Steps, N: int, k: int, G: int, d_i: int, d_c: int, U: float, Y_first: float,
          Y_last: float) -> None:
    """Rows a-e of the module doc (``E = M = 1``)."""
    col, add, upto, after = lp.col, lp.add, lp.upto, lp.after
    kinds = (("ni", "xi", d_i), ("nc", "xc", d_c), ("Pei", "Pdi", d_i), ("Pec", "Pdc", d_c),
             ("Qei", "Qdi", d_i), ("Qec", "Qdc", d_c))
    for j in range(N):
        add([(1, col["xi"][j]), (1, col["xc"][j]), (-U, col["b"][j])])
        add([(1, col["ni"][j]), (1, col["nc"][j]), (-1, col["b"][j])])
        for got, left, delay in kinds:
            add(upto(got, j) + upto(left, j - delay, -1))
        for a, b, whole in (("Pdi", "Qdi", "xi"), ("Pdc", "Qdc", "xc"), ("Pei", "Qei", "ni"), ("Pec", "Qec", "nc"),
                            ("R", "S", "xc")):
            add([(1, col[a][j]), (1, col[b][j]), (-1, col[whole][j])])
        add(upto("Pdi", j, -1) + upto("Pdc", j, -1) + upto("mu", j, k - 1))
        add(after("Qdi", j - 1, -1) + after("Qdc", j - 1, -1) + after("mu", j - 1, k - 1))
        add(upto("R", j, -1) + upto("nu", j, G - 1))
        add(after("S", j - 1, -1) + after("nu", j - 1, G - 1))
        add(upto("mu", j) + upto("nu", j, -1))
        if np.isfinite(Y_first):  # e: a crossing's second hop, one step after it left
            add([(1, col["xc"][j])] + ([(-Y_first, col["b"][j + 1])] if j + 1 < N else []))
        if np.isfinite(Y_last):  # and its last but one, one step before it arrives
            add([(1, col["nc"][j])] + ([(-Y_last, col["b"][j - 1])] if j >= 1 else []))
    for got, left, _ in kinds:
        add(upto(left, N - 1) + upto(got, N - 1, -1), 0.0, True)
    add(upto("mu", N - 1), 1.0, True)
    add(upto("nu", N - 1), 1.0, True)
