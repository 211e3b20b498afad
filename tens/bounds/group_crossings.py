"""A ``sync`` bound of an allreduce on boxes of GPUs joined by a multi-tier fabric: every byte
position crosses between groups of boxes both ways around the step some group first knows
every input, such a crossing spends more steps in the fabric than one inside a group, and a box
reduces inside before its first exports and spreads inside after its last imports
(:func:`group_crossing_bound`).

The crossing and box-stage bounds (:mod:`.injections`, :mod:`.box_stages`) let a delivery into
a box arrive in the NIC step after it left a box, as it does between two boxes under one leaf
switch. Between boxes behind different leaves a delivery climbs to a spine and down again, one
step a hop (a switch forwards in a step what reached it in the step before; Liu et al.,
"Rethinking Machine Learning Collective Communication as a Multi-Commodity Flow Problem",
SIGCOMM 2024, Section 4): on a rail Clos of two tiers four hops, three steps after it left. An
allreduce cannot keep all of its deliveries inside groups: each byte position crosses out of
every group but one before some group knows every input and into every group but that one
after (the one-way gossip count of :mod:`.partitions`, Hedetniemi, Hedetniemi and Liestman,
Networks 18(4), 1988, with groups for parts), so the pipeline's first and last steps cannot
carry the crossings' arrivals: the fabric's fill is charged at the crossings' own delay, beside
the boxes' stages of :mod:`.box_stages`.

**The setting.** The parts of :mod:`.injections` (its conditions: boxes behind a switch of
their own or boxes of one compute node, no switch outside the parts copying or reducing, no
instant hop into a part, sync steps for sends on links, no pipelined link latency; a compute
node sends in a step only what it held at the end of the step before), ``k`` of them; ``c_y``
the compute nodes of part ``y``, ``C`` all of them, ``c = max c_y``. ``X``: the switches in no
part. ``h(u, v)``: the fewest links on a path from a node of part ``u`` to one of part ``v``
whose inner nodes are switches of ``X``. *Groups*: the classes of the parts joined by ``h <= 2``
either way (closed transitively), ``G >= 2`` of them. ``d_i = min h - 1`` over all pairs of
parts, ``d_c = min h - 1`` over pairs in different groups (``d_c >= 2``). ``E``, ``U``: the
summed bandwidths of the links entering and leaving parts; ``V_o`` (``V_i``): of the links from
a compute node to a node of its own part (from a node of a part to a compute node of it: a
box's links up to and down from its switch); ``Y_first`` (``Y_last``): of the links between two
switches of ``X`` out of a switch entered from a part (into a switch with a link into a part).
*Fabric steps*: the steps in which some link not inside a part (entering, leaving a part, or
between two switches of ``X``) carries a byte, ``N`` of them; each pays ``a_t >= alpha``, the
least alpha of such a link. The other steps (*quiet*) are grouped before fabric step 1, between
fabric steps and after the last.

**Proof.** Take any schedule on links; drop its empty steps (a switch that received nothing in
a dropped step forwards nothing in the next, so no delay shortens). Take one byte position. A
*delivery* is an arrival at a part over a link from a switch of ``X``; it left a part (its
*departure*) over a link into ``X`` and crossed ``X`` one hop a step, holding nowhere
(:mod:`.injections`, 3), so it arrives ``h - 1`` steps after it left at least, ``h`` the hops
between the two parts, and every step from its departure to its arrival is a fabric step (a
link outside the parts carries it): it arrives ``h - 1`` fabric steps after its departure's at
least. Distinct deliveries have distinct departures (no switch copies: :mod:`.injections`, 3).
A delivery is a *crossing* if the two parts are in different groups: it arrives ``d_c`` fabric
steps after its departure at least, any delivery ``d_i``. Order the deliveries by departure
step (ties in one fixed order); let each part know its nodes' inputs and, after each delivery
into it, what that delivery carried, and each group the union of what its parts know; by
induction over the order each node's content is inside what its part knows and that inside
what its group knows (a delivery carries what its sender held at the end of the step before it
left, which arrived by deliveries that left earlier or from inside the part). A group's
knowledge changes only at crossings into it.

1. *Parts* (:mod:`.box_stages`, 1-4): ``d*`` the first delivery after which some part ``x``
   knows every input, ``tau`` its departure step; at least ``k - 1`` deliveries (exports) leave
   in steps up to ``tau`` and ``k - 1`` others (imports) in steps from ``tau`` on, so arriving
   ``d_i`` fabric steps after ``tau``'s at least. The exports out of each part ``y != x`` cover
   its ``c_y`` nodes (each its sender and nodes that sent the byte inside ``y`` in an earlier
   step, at most ``c_y``), the imports into it likewise (each its receiver and nodes reached over
   a link inside ``y`` in a later step): ``C - c`` nodes at least each way.
2. *Groups*: ``d*_G`` the first delivery after which some group ``X_G`` knows every input,
   ``tau_G`` its departure step. ``d*_G`` is at or before ``d*`` in the order (after ``d*``
   the group of ``x`` knows everything), so ``tau_G <= tau``. For each other group ``Y`` the
   first crossing out of ``Y`` carrying an input of ``Y`` is at or before ``d*_G`` (``X_G``
   learns ``Y``'s inputs only by chains of deliveries, the first crossing of which leaves
   ``Y``; before it ``Y``'s inputs are inside ``Y``), so ``G - 1`` crossings (one out of each
   such ``Y``) leave in steps up to ``tau_G``; and ``Y`` does not know every input at ``d*_G``
   (a delivery changes one group's knowledge, and ``Y`` did not complete before), so a crossing
   into ``Y`` after ``d*_G`` brings it something: ``G - 1`` more crossings (one into each),
   leaving in steps from ``tau_G`` on. The two sets are disjoint (before and after ``d*_G`` in
   the order).

Summed over the byte positions, in bytes, per fabric step ``j = 1 .. N``: ``x^i_j, x^c_j`` the
bytes of deliveries inside groups and of crossings leaving in step ``j``, ``n^i_j, n^c_j``
arriving; ``P, Q`` the exports' and imports' shares of them (1), ``R, S`` the crossings of 2
leaving before and after; ``mu_j`` (``nu_j``) the byte positions whose ``d*`` (``d*_G``) leaves
in step ``j``; ``W_j`` the nodes covered by the exports leaving in it, ``Z_j`` by the imports
arriving; ``g, h`` the bytes sent, received on links inside parts in a fabric step or a quiet
group; ``b_j`` the fabric step's bandwidth term and ``q`` a quiet group's (the sum of its
steps'):

a. ``x^i_j + x^c_j <= U b_j``, ``n^i_j + n^c_j <= E b_j``, and ``g, h <= V_o, V_i`` times each
   step's (group's) term (a step's ``b_t`` is at least any link's load over its bandwidth, so
   at least their sums' ratio);
b. ``n^i_1 + .. + n^i_j <= x^i_1 + .. + x^i_(j - d_i)``, ``n^c_1 + .. + n^c_j <= x^c_1 + .. +
   x^c_(j - d_c)``, for every kind alone too (exports, imports), with as many bytes arriving as
   leaving of each;
c. exports and imports are distinct deliveries (``P + Q`` at most each kind's bytes), as are the
   crossings of 2 (``R_j + S_j <= x^c_j``);
d. ``P_1 + .. + P_j >= (k - 1)(mu_1 + .. + mu_j)``, ``Q_j + .. + Q_N >= (k - 1)(mu_j + .. +
   mu_N)`` (by departure), ``R_1 + .. + R_j >= (G - 1)(nu_1 + .. + nu_j)``, ``S_j + .. + S_N >=
   (G - 1)(nu_j + .. + nu_N)``, ``nu_1 + .. + nu_j >= mu_1 + .. + mu_j`` (``tau_G <= tau``),
   ``sum mu = sum nu = M``;
e. a crossing's second link and its last but one join two switches of ``X`` (``h >= 3``: its
   second node is a switch of ``X``, else the two parts would be in one group, and so its last
   but one), in the fabric steps after its departure and before its arrival:
   ``x^c_j <= Y_first b_(j+1)``, ``n^c_j <= Y_last b_(j-1)``;
f. (1) ``W_j <= c P_j`` (by departure) and ``W_1 + .. + W_j <= P_1 + .. + P_j + g`` sent before
   fabric step ``j``; ``Z_j <= c Q_j`` (by arrival) and ``Z_j + .. + Z_N <= Q_j + .. + Q_N + h``
   received after fabric step ``j``; ``W_1 + .. + W_j >= (C - c)(mu_1 + .. + mu_j)`` and
   ``Z_(j+d_i) + .. + Z_N >= (C - c)(mu_j + .. + mu_N)``.

So ``T >= min_N [max(L, N alpha) + max(T*, LP(N))]``, ``LP(N)`` the least ``sum b + sum q``
under a-f (an empty fabric step keeps a solution, so ``LP`` does not grow with ``N``). On boxes
of one compute node (``c = 1``, no links inside parts) f is implied by d and every step with a
send is a fabric step. Without the groups' rows (c-e for ``R, S``, ``d_c = d_i = 1``) it is the
box-stage bound's program, fabric steps for NIC steps; without f too, the crossing bound's.
Both arguments look only at links and steps: the bound holds whatever the box switches copy or
reduce, and for the ``sync`` model only (``event`` has no steps).

**Refused** (not computed, saying why, before any program): not a single allreduce; no latency
or bandwidth bound; a pipelined link latency (its steps are TEN timesteps); parts that do not
meet :mod:`.injections`' conditions (a switch outside the boxes that may copy or reduce, a link
between boxes not through such a switch, an instant hop into a box, a compute node in no box or
not taking part: :func:`.injections.box_parts`); one group of boxes (every box under the same
leaves: the bound is the box-stage bound's); two groups with no path between them through
switches. The steps are the ``sync`` model's for sends on links: a schedule routed on shortest
paths crosses a switch in the step it leaves and is held to ``L + T*`` only.

**Its cost.** The program has 17 families of variables a fabric step (24 with boxes of
several GPUs), each kept by its running sums only; HiGHS's interior point method solves it
3.5-4.6x faster than its dual simplex at 128-256 steps (2.9 against 10.4 s at 256 steps on three
groups of one-GPU boxes). The minimum over ``N`` is flat where it lies (every program's value is
needed to within an alpha), so the search solves 35 programs on SuperPOD 8 SU (up to 128 steps)
and 60 on the three-group fabric at 1 GiB (up to 512). Programs are solved for
:data:`BUDGET_S` seconds; past them each step count's program is held at a value it is known to
be at least (:func:`group_seconds`), so the result stays a bound, at most lower.

**What it adds.** Three groups of two one-GPU boxes behind a spine (``bench_tier3_proxy.py``'s
fabric; NICs and spine ports of 50 GB/s and 2.7 us, ``d_i = 1``, ``d_c = 3``), 1 GiB: 36.628 ms
against the crossing bound's 36.416 ms; tree packing's verified schedule costs 36.865 ms.
SuperPOD 8 SU (``rail_clos groups_per_pod=8 spines=32``, 1 GiB, ``fabric_copy = false``; 8
groups of 32 DGX H100, ``d_c = 3``): 5.6070 ms against the box-stage bound's 5.6027 ms; 16 SU
(16 groups through cores, ``d_c = 5``): 5.6250 against 5.6134 ms. Tree packing's verified
allreduces cost 5.6885 and 5.7126 ms there (1.0145x and 1.0156x): with 256 and 512 boxes a byte
position's ``2 (G - 1)`` crossings are few of its ``2 (k - 1)`` deliveries, and nothing here
charges the span of a byte relayed through a group (README, "Crossings between groups in the
bound").
"""

from __future__ import annotations

import time

import numpy as np

from .box_stages import StepRows
from .drain import SAFETY
from .injections import MAX_PHASES, box_parts, parts_numbers, refusal
from .ramp import least_over_steps
from .record import Bound, not_computed


def group_crossing_bound(instance, latency: Bound, bandwidth: Bound) -> Bound:
    """The bound of the module doc for a single allreduce whose parts meet the conditions of
    :mod:`.injections` in two groups or more; not computed otherwise (saying why)."""
    refused = refusal(instance, latency, bandwidth, "group crossings")
    if refused is not None:
        return refused
    got = group_numbers(instance)
    if isinstance(got, str):
        return not_computed("sync", "group crossings", got)
    value = group_seconds(instance.collective.message_bytes, got, latency.value, bandwidth.value)
    if value is None:
        return not_computed("sync", "group crossings", "a program was not solved")
    k, G, d_c = got["k"], got["G"], got["d_c"]
    return Bound(value * (1 - SAFETY), "s", "sync", "group crossings", None,
                 f"crossings between {G} groups of the {k} boxes, {d_c} steps in the fabric, both ways a byte")


BUDGET_S = 60.0  # seconds of programs per bound; past them each step count is held below (module doc)


def group_seconds(M: float, numbers: dict, L: float, T_star: float, budget_s: float = BUDGET_S) -> float | None:
    """``min_N [max(L, N alpha) + max(T*, LP(N))]`` of the module doc for the numbers of
    :func:`group_numbers`, or less: programs are solved for ``budget_s`` seconds, and past them
    ``LP(N)`` is held at its least value known to be valid, that of the smallest step count
    solved above ``N`` (``LP`` does not grow with ``N``), or ``2 (k - 1) M / E`` (every byte
    position's ``2 (k - 1)`` deliveries over the links into the parts); None when a program is
    not solved."""
    g, E = numbers, numbers["E"]
    deadline = time.monotonic() + budget_s
    solved: dict[int, float] = {}

    def lp(N):
        if time.monotonic() > deadline:
            above = [n for n in sorted(solved) if n >= N]
            return max(2 * (g["k"] - 1) * M / E, solved[above[0]] if above else 0.0)
        v = group_program(N, g["k"], g["G"], g["d_i"], g["d_c"], g["U"] / E, g["Y_first"] / E, g["Y_last"] / E,
                          g["C"], g["c"], g["V_o"] / E, g["V_i"] / E)
        if v is not None:
            solved[N] = v * M / E
        return None if v is None else v * M / E

    return least_over_steps(lp, g["alpha"], L, T_star, first=g["d_c"] + 1, most=4 * MAX_PHASES)


def group_numbers(instance) -> dict | str:
    """``k, C, c, G, d_i, d_c, E, U, V_o, V_i, Y_first, Y_last, alpha`` of the module doc, or
    why the instance does not meet its conditions. The groups and delays come from the links
    between parts and switches of ``X`` and the hop distances between those switches (one
    breadth-first search a switch entered from a part), never a table over pairs of parts."""
    got = box_parts(instance)
    if isinstance(got, str):
        return got
    part, k = got
    topo = instance.topology
    la = topo.link_arrays
    outside = part < 0
    leave = ~outside[la.src] & outside[la.dst]  # a part to a switch of X
    enter = outside[la.src] & ~outside[la.dst]
    group = _groups(part, k, la, leave, enter)
    G = int(group.max()) + 1
    if G < 2:
        return "one group of boxes"
    delays = _delays(part, group, la, leave, enter, outside)
    if delays is None:
        return "two groups with no path between them through switches"
    compute = np.zeros(topo.size, bool)
    compute[list(topo.nodes)] = True
    compute[list(topo.switches)] = False
    sizes = np.bincount(part[compute], minlength=k)
    _, E, U, _, _ = parts_numbers(instance)
    inside = (part[la.src] == part[la.dst]) & ~outside[la.src]
    between = outside[la.src] & outside[la.dst]
    fed = np.zeros(topo.size, bool)  # switches of X entered from a part
    fed[la.dst[leave]] = True
    feeding = np.zeros(topo.size, bool)  # switches of X with a link into a part
    feeding[la.src[enter]] = True
    bw = la.bandwidth
    return {"k": k, "C": int(sizes.sum()), "c": int(sizes.max()), "G": G, "d_i": delays[0], "d_c": delays[1],
            "E": E, "U": U, "V_o": float(bw[inside & compute[la.src]].sum()),
            "V_i": float(bw[inside & compute[la.dst]].sum()),
            "Y_first": float(bw[between & fed[la.src]].sum()), "Y_last": float(bw[between & feeding[la.dst]].sum()),
            "alpha": float(la.alpha[~inside].min())}


def _groups(part, k: int, la, leave, enter) -> np.ndarray:
    """Each part's group: the classes of parts ``u, v`` with a link from ``u`` to a switch of
    ``X`` and one from it to ``v`` (``h <= 2``), either way, closed transitively."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    n = len(part)
    out = csr_matrix((np.ones(int(leave.sum())), (part[la.src[leave]], la.dst[leave])), shape=(k, n))
    into = csr_matrix((np.ones(int(enter.sum())), (la.src[enter], part[la.dst[enter]])), shape=(n, k))
    return connected_components(out @ into, directed=False)[1]


def _delays(part, group, la, leave, enter, outside) -> tuple[int, int] | None:
    """``(d_i, d_c)``: ``h - 1`` least over pairs of distinct parts, and over pairs in distinct
    groups, ``h = 2 +`` the hops from a switch of ``X`` entered from the first part to one with a
    link into the second, on links between switches of ``X``; None where two groups are not
    joined."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    ids = np.flatnonzero(outside)
    index = np.full(len(part), -1)
    index[ids] = np.arange(len(ids))
    between = outside[la.src] & outside[la.dst]
    graph = csr_matrix((np.ones(int(between.sum())), (index[la.src[between]], index[la.dst[between]])),
                       shape=(len(ids), len(ids)))
    fed, feeding = np.unique(la.dst[leave]), np.unique(la.src[enter])
    hops = shortest_path(graph, unweighted=True, indices=index[fed])[:, index[feeding]]
    out = []
    senders, receivers = part[la.src[leave]], part[la.dst[enter]]
    for label in (np.arange(len(group)), group):  # each part its own label, then its group
        one_from = _only(fed, la.dst[leave], label[senders])  # the one label entering it, else -1
        one_to = _only(feeding, la.src[enter], label[receivers])
        same = (one_from[:, None] >= 0) & (one_from[:, None] == one_to[None, :])
        least = np.where(same, np.inf, hops).min()
        out.append(least)
    if not np.isfinite(out[1]):
        return None
    return int(out[0]) + 1, int(out[1]) + 1


def _only(switches, at, label) -> np.ndarray:
    """Per switch of ``switches`` (sorted): the one label among ``label[i]`` for the links ``i``
    at it (``at[i]``), or ``-1`` where there are several."""
    pos = np.searchsorted(switches, at)
    low = np.full(len(switches), np.iinfo(np.int64).max)
    high = np.full(len(switches), -1)
    np.minimum.at(low, pos, label)
    np.maximum.at(high, pos, label)
    return np.where(low == high, high, -1)


class _Steps(StepRows):
    """The variables of ``LP(N)`` (module doc), each family by its running sums only (``sum
    name[0 .. j]``, never below the one before): ``xi, xc, ni, nc`` the deliveries inside groups
    and crossings leaving and arriving, ``Pd*, Pe*, Qd*, Qe*`` the exports' and imports' (``i``
    inside, ``c`` crossing), ``R, S`` the crossings of 2, ``mu, nu`` and ``b`` per fabric step;
    with boxes of several nodes, ``W, Z`` and the sends inside parts ``gN, hN`` per fabric step
    and ``q, gQ, hQ`` per quiet group (group ``i`` before fabric step ``i``, group ``N`` after the
    last); and the rows added so far."""

    STEPS = ("xi", "xc", "ni", "nc", "Pdi", "Pdc", "Pei", "Pec", "Qdi", "Qdc", "Qei", "Qec", "R", "S", "mu", "nu",
             "b")
    BOXES = ("W", "Z", "gN", "hN", "q", "gQ", "hQ")
    QUIET = ("q", "gQ", "hQ")

    def __init__(self, N: int, boxes: bool):
        self.prefix, start = {}, 0
        for name in self.STEPS + (self.BOXES if boxes else ()):
            size = N + 1 if name in self.QUIET else N
            self.prefix[name], start = np.arange(size) + start, start + size
        self.nvar = start
        self.begin_rows()
        for run in self.prefix.values():  # every step's own value at least 0
            for j in range(1, len(run)):
                self.add([(-1, run[j]), (1, run[j - 1])])

    def at(self, name: str, j: int, coef: float = 1.0) -> list:
        """The terms of ``coef * name[j]``."""
        run = self.prefix[name]
        return [(coef, run[j])] + ([(-coef, run[j - 1])] if j else [])


def group_program(N: int, k: int, G: int, d_i: int, d_c: int, U: float, Y_first: float = np.inf,
                  Y_last: float = np.inf, C: int | None = None, c: int = 1, V_o: float = 0.0,
                  V_i: float = 0.0) -> float | None:
    """``LP(N)`` of the module doc in units of ``M / E`` seconds (bandwidths in ``E``): the least
    ``sum b + sum q`` under a-f (f where ``c >= 2``; ``C`` defaults to ``k c``); ``inf`` when no
    schedule of ``N`` fabric steps fits, None when the solver fails.

    One group cannot be: with two parts in two groups, ``d_c = 1``, the crossing bound's
    ``(N + 1) / N`` of ``2 M / E`` (:mod:`.injections`), here 3 at ``N = 2``:

    >>> [round(group_program(N, 2, 2, 1, 1, 1.0), 9) for N in (1, 2, 3)]
    [inf, 4.0, 3.0]

    Two boxes of two GPUs in two groups (:mod:`.box_stages`' example, NICs of 1, box links of 2
    each way, so ``V = 8 / 4``), ``d = 1`` and two fabric steps: ``M + M / (2 b)`` there, 5 for
    ``M = 4``, ``E = 4``, so 5 in units of ``M / E = 1``:

    >>> round(group_program(2, 2, 2, 1, 1, 1.0, C=4, c=2, V_o=2.0, V_i=2.0), 9)
    5.0
    """
    from scipy.optimize import linprog

    boxes = c >= 2
    lp = _Steps(N, boxes)
    _rows(lp, N, k, G, d_i, d_c, U, Y_first, Y_last)
    if boxes:
        _box_rows(lp, N, k, k * c if C is None else C, c, d_i, V_o, V_i)
    A, rhs, eq = lp.matrix()
    cost = np.zeros(A.shape[1])
    for name in ("b", "q") if boxes else ("b",):
        cost[lp.prefix[name][-1]] = 1.0
    res = linprog(cost, A_ub=A[~eq], b_ub=rhs[~eq], A_eq=A[eq], b_eq=rhs[eq], bounds=[(0, None)] * A.shape[1],
                  method="highs-ipm")
    if res.status == 2:
        return float("inf")
    return float(res.fun) if res.status == 0 else None


def _rows(lp: _Steps, N: int, k: int, G: int, d_i: int, d_c: int, U: float, Y_first: float,
          Y_last: float) -> None:
    """Rows a-e of the module doc (``E = M = 1``), a's box links aside."""
    at, add, upto, after = lp.at, lp.add, lp.upto, lp.after
    kinds = (("ni", "xi", d_i), ("nc", "xc", d_c), ("Pei", "Pdi", d_i), ("Pec", "Pdc", d_c),
             ("Qei", "Qdi", d_i), ("Qec", "Qdc", d_c))
    for j in range(N):
        add([*at("xi", j, 1), *at("xc", j, 1), *at("b", j, -U)])
        add([*at("ni", j, 1), *at("nc", j, 1), *at("b", j, -1)])
        for got, left, delay in kinds:
            add(upto(got, j) + upto(left, j - delay, -1))
        for a, b, whole in (("Pdi", "Qdi", "xi"), ("Pdc", "Qdc", "xc"), ("Pei", "Qei", "ni"), ("Pec", "Qec", "nc"),
                            ("R", "S", "xc")):
            add([*at(a, j, 1), *at(b, j, 1), *at(whole, j, -1)])
        add(upto("Pdi", j, -1) + upto("Pdc", j, -1) + upto("mu", j, k - 1))
        add(after("Qdi", j - 1, -1) + after("Qdc", j - 1, -1) + after("mu", j - 1, k - 1))
        add(upto("R", j, -1) + upto("nu", j, G - 1))
        add(after("S", j - 1, -1) + after("nu", j - 1, G - 1))
        add(upto("mu", j) + upto("nu", j, -1))
        if np.isfinite(Y_first):  # e: a crossing's second hop, one step after it left
            add([*at("xc", j, 1)] + ([*at("b", j + 1, -Y_first)] if j + 1 < N else []))
        if np.isfinite(Y_last):  # and its last but one, one step before it arrives
            add([*at("nc", j, 1)] + ([*at("b", j - 1, -Y_last)] if j >= 1 else []))
    for got, left, _ in kinds:
        add(upto(left, N - 1) + upto(got, N - 1, -1), 0.0, True)
    add(upto("mu", N - 1), 1.0, True)
    add(upto("nu", N - 1), 1.0, True)


def _box_rows(lp: _Steps, N: int, k: int, C: int, c: int, d_i: int, V_o: float, V_i: float) -> None:
    """Rows a (the links inside parts) and f of the module doc (``E = M = 1``), as
    :mod:`.box_stages`' d-f with fabric steps for NIC steps and imports arriving ``d_i`` after."""
    at, add, upto, after = lp.at, lp.add, lp.upto, lp.after
    for j in range(N):
        add([*at("gN", j, 1), *at("b", j, -V_o)])
        add([*at("hN", j, 1), *at("b", j, -V_i)])
        add([*at("W", j, 1), *at("Pdi", j, -c), *at("Pdc", j, -c)])
        add(upto("W", j) + upto("Pdi", j, -1) + upto("Pdc", j, -1) + upto("gQ", j, -1) + upto("gN", j - 1, -1))
        add([*at("Z", j, 1), *at("Qei", j, -c), *at("Qec", j, -c)])
        add(after("Z", j - 1) + after("Qei", j - 1, -1) + after("Qec", j - 1, -1) + after("hQ", j, -1)
            + after("hN", j, -1))
        add(upto("W", j, -1) + upto("mu", j, C - c))
        add(after("Z", min(j + d_i, N) - 1, -1) + after("mu", j - 1, C - c))
    for i in range(N + 1):
        add([*at("gQ", i, 1), *at("q", i, -V_o)])
        add([*at("hQ", i, 1), *at("q", i, -V_i)])
