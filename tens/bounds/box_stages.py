"""A ``sync`` bound of an allreduce on boxes joined by switches that copy nothing, charging what
happens inside the boxes before the first crossings and after the last (:func:`box_stage_bound`).

The crossing bound (:mod:`.injections`) counts the ``2 (k - 1) M`` bytes crossing into the boxes
and the steps that carry them, as if every byte leaving a box already summed all of the box's
inputs and every byte entering one were needed by its receiver alone. Neither is free: a byte
leaving GPU ``u`` can carry a box mate ``v``'s input only if ``v`` sent it inside the box in an
earlier step, and a byte entering ``u`` reaches a box mate ``w`` only over a link inside the box
in a later step, unless ``v`` and ``w`` cross the fabric themselves, at more crossings. The
hierarchical allreduce (reduce inside the box, across the boxes, broadcast inside; Patarasuk and
Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations", J. Parallel
Distrib. Comput. 69(2), 2009, Section 5, and NCCL's tree and NVLS-tree algorithms) pays those
stages; here every schedule is shown to pay them or the extra crossings.

**The setting.** The parts, ``X``, ``E``, ``U`` and the conditions of :mod:`.injections` (boxes
behind a switch of their own, boxes of one, no switch of ``X`` copying or reducing, sync steps
for sends on links; a compute node sends in a step only what it held at the end of the step
before). ``c_y``: the compute nodes of part ``y``, ``C`` all of them, ``c = max c_y``; ``G``
(``H``): the summed bandwidths of the links from a compute node to a node of its own part (from
a node of a part to a compute node of it; a box's links up to and down from its switch).
*NIC steps*: the steps in which some link entering or leaving a part carries a byte, ``N`` of
them; each pays ``a_t >= alpha_n``, the least alpha of such a link.

**Proof.** Take any schedule, one byte position of the buffer (a piece carries a partial sum of
some inputs for each byte it spans). A *delivery* is a crossing into a part (an arrival over a
link entering it); each left a part earlier (:mod:`.injections`, 3: distinct deliveries lead
back to distinct departures). Order the deliveries by their departure step (ties in any order)
and let each part *know* its nodes' inputs and, after each delivery into it, what that delivery
carried: by induction over the order every node's content is inside what its part knows (a
delivery carries what its sender held at the end of the step before it left, which came by
deliveries that left earlier or from inside the part). Let ``d*`` be the first delivery after
which some part ``x`` knows all ``|C|`` inputs (the one-way gossip argument of
:mod:`.partitions`, Hedetniemi, Hedetniemi and Liestman, Networks 18(4), 1988):

1. *Exports.* Every input of a part ``y != x`` reaches ``x`` by ``d*``; the first delivery
   carrying it out of ``y`` left a node ``u`` of ``y`` before ``d*``. Either ``u`` is its owner
   ``v``, or ``v`` sent it on a link inside ``y`` in a step before the one in which ``u`` sent
   it out (nothing else brings a part's input to another node of the part before it first
   leaves). So the deliveries out of each ``y != x`` up to ``d*`` (its exports, at least one)
   *cover* ``y``'s ``c_y`` nodes, each export its sender and nodes that sent the byte inside
   ``y`` in an earlier step, at most ``c_y``; distinct nodes' sends are distinct.
2. *Imports.* Up to ``d*`` no other part knows everything, so each node ``w`` of a part ``y !=
   x`` needs something that only a delivery into ``y`` after ``d*`` (an import) brings: ``w``
   receives that import itself, or a link inside ``y`` brings it to ``w`` in a step after the one
   the import arrived in. So ``y``'s imports (at least one) cover its ``c_y`` nodes, each its
   receiver and nodes reached over a link inside ``y`` in a later step.
3. Exports and imports are distinct deliveries: at least ``k - 1`` of each, ``2 (k - 1)`` in
   all (the count of :mod:`.partitions`), and they cover at least ``|C| - c`` nodes each way.
4. Let ``tau`` be the step ``d*`` leaves in: exports leave in steps up to ``tau``, imports in
   steps from ``tau`` on (the order), so they arrive after ``tau``.

Summed over the byte positions, in bytes, with NIC steps ``1 .. N`` and the *quiet* steps (the
others) grouped before NIC step 1, between NIC steps and after the last: ``x_j, n_j`` the bytes
leaving and entering parts in NIC step ``j``; ``P^o_j, P^i_j`` the exports leaving, arriving in
it, ``Q^o_j, Q^i_j`` the imports; ``W_j`` the nodes covered by the exports leaving in it, ``Z_j``
by the imports arriving; ``mu_j`` the byte positions whose ``d*`` leaves in it (``sum mu =
M``); ``g`` (``h``) the bytes sent (received) on links inside parts; ``p_j`` the NIC step's
bandwidth term and ``q`` a quiet group's (the sum of its steps'):

a. ``n_j <= E p_j``, ``x_j <= U p_j``, and ``g, h <= G, H`` times each step's (group's) term
   (a step's ``b_t`` is at least any link's load over its bandwidth);
b. ``n_1 + .. + n_j <= x_1 + .. + x_(j-1)`` (:mod:`.injections`, 3), and so for the exports
   alone and the imports alone (a delivery arrives in a later NIC step than it left);
c. ``P^o_j + Q^o_j <= x_j``, ``P^i_j + Q^i_j <= n_j``, ``sum P^o = sum P^i``, ``sum Q^o = sum
   Q^i`` (distinct deliveries leave and arrive as distinct bytes);
d. ``W_j <= c P^o_j`` and ``W_1 + .. + W_j <= P^o_1 + .. + P^o_j + g`` sent before NIC step
   ``j`` (1);
e. ``Z_j <= c Q^i_j`` and ``Z_j + .. + Z_N <= Q^i_j + .. + Q^i_N + h`` received after NIC step
   ``j`` (2);
f. ``P^o_1 + .. + P^o_j >= (k - 1)(mu_1 + .. + mu_j)``, ``W_1 + .. + W_j >= (|C| - c)(mu_1 +
   .. + mu_j)``, ``Q^o_j + .. + Q^o_N >= (k - 1)(mu_j + .. + mu_N)``, ``Z_(j+1) + .. + Z_N >=
   (|C| - c)(mu_j + .. + mu_N)`` (3, 4);
g. ``T_B = sum p + sum q >= T*``; ``T_L >= N alpha_n`` and ``T_L >= L``.

So ``T >= min_N [max(L, N alpha_n) + max(T*, LP(N))]``, ``LP(N)`` the least ``sum p + sum q``
under a-f (:func:`stage_seconds`; an empty NIC step is allowed, so ``LP`` does not grow with
``N``). Without d-f it is the crossing bound's program, departure steps counted among the ``N``
(and f is what keeps a program from letting a byte's imports leave before its exports). A box
of one (``c = 1``) adds nothing; where ``c >= 2`` the first exports either are raw (covering
their senders alone, so more of them) or wait for sends inside the box, and the last imports
likewise. Both arguments look only at links and steps, so the bound holds whatever the box
switches copy or reduce (NVLS), and for the ``sync`` model only (``event`` has no steps).

**What it adds.** On SuperPOD 8 SU (1 GiB, ``fabric_copy = false``) 5.603 ms against the
crossing bound's 5.591 ms: the program's optimum grows its first pieces geometrically, so that
a box stage (on DGX H100 a GPU's 7 shares over NVLink 9 times as fast as its NIC: 7/9 of a NIC
step) hides behind the previous piece's crossing, and pays little more than the first piece's
stage at each end. Sends inside a box in the step right before an export (or after an import)
are counted although a box switch forwards them a step later; the quiet steps' alphas are not.

**Two boxes of two GPUs** on two rails, NICs of ``1`` B/s (``E = U = 4``), box links of ``b``
B/s (``G = H = 4 b``), ``M`` bytes, and ``N = 2`` NIC steps (one out, one in; the NIC alpha is
large): every delivery leaves in step 1 and arrives in step 2, ``sum n = P + Q`` with ``P, Q >=
M``; exports cover ``2 M`` with ``P`` of their own and ``2 M - P`` sends inside the boxes before,
imports likewise after: ``LP(2) = (P + Q) / 4 + (P + Q) / 4 + (4 M - P - Q) / (4 b)``, least at
``P = Q = M`` for ``b >= 1 / 2``: ``M + M / (2 b)``, against the crossing bound's ``M``
(:func:`stage_seconds`' example). The hierarchical schedule takes ``M + 2 M / b``: it
reduce-scatters inside both boxes in two steps (up to the switch, down) and allgathers in two
more; the bound counts only the sends up before the crossings and down after them, and only in
the ``k - 1`` parts other than ``x``.
"""

from __future__ import annotations

import numpy as np

from .drain import SAFETY
from .injections import MAX_PHASES, box_parts, parts_numbers, refusal
from .ramp import least_over_steps
from .record import Bound, not_computed


def box_stage_bound(instance, latency: Bound, bandwidth: Bound) -> Bound:
    """The bound of the module doc for a single allreduce whose parts meet the conditions of
    :mod:`.injections`; not computed otherwise (saying which condition failed)."""
    refused = refusal(instance, latency, bandwidth, "box stages")
    if refused is not None:
        return refused
    got = stage_numbers(instance)
    if isinstance(got, str):
        return not_computed("sync", "box stages", got)
    k, C, c, E, U, G, H, alpha_n = got
    value = stage_seconds(instance.collective.message_bytes, k, C, c, E, U, G, H, alpha_n,
                          latency.value, bandwidth.value)
    if value is None:
        return not_computed("sync", "box stages", "a stage program was not solved")
    return Bound(value * (1 - SAFETY), "s", "sync", "box stages", None,
                 f"crossings into the {k} boxes, reduced inside them before and spread after")


def stage_numbers(instance) -> tuple | str:
    """``(k, |C|, c, E, U, G, H, alpha_n)`` of the parts (module doc), or why they do not meet
    the conditions."""
    got = box_parts(instance)
    if isinstance(got, str):
        return got
    part, k = got
    k, E, U, alpha_e, alpha_x = parts_numbers(instance)
    topo = instance.topology
    la = topo.link_arrays
    compute = np.zeros(topo.size, bool)
    compute[list(topo.nodes)] = True
    compute[list(topo.switches)] = False
    sizes = np.bincount(part[compute], minlength=k)
    inside = (part[la.src] == part[la.dst]) & (part[la.src] >= 0)
    bw = la.bandwidth  # a pair's parallel links' summed bandwidth (LinkArrays)
    G = float(bw[inside & compute[la.src]].sum())
    H = float(bw[inside & compute[la.dst]].sum())
    return k, int(sizes.sum()), int(sizes.max()), E, U, G, H, min(alpha_e, alpha_x)


def stage_seconds(M: float, k: int, C: int, c: int, E: float, U: float, G: float, H: float,
                  alpha_n: float, L: float, T_star: float) -> float | None:
    """``min_N [max(L, N alpha_n) + max(T*, LP(N))]`` of the module doc; None when a program is
    not solved.

    Two boxes of two GPUs (module doc), ``M = 4`` bytes, box links of 2 B/s, NIC alpha 100 s
    and ``L`` 200 s (two NIC steps are best), ``T*`` 2 s: ``LP(2) = 4 + 4 / 4 = 5`` s.

    >>> round(stage_seconds(4.0, 2, 4, 2, 4.0, 4.0, 8.0, 8.0, 100.0, 200.0, 2.0), 9)
    205.0
    """
    unit = M / E  # seconds: bytes in M, bandwidths in E (the program stays near 1)
    lp = lambda N: (None if (v := stage_program(N, k, C, c, U / E, G / E, H / E)) is None else v * unit)  # noqa: E731
    return least_over_steps(lp, alpha_n, L, T_star, first=2, most=MAX_PHASES)


def stage_program(N: int, k: int, C: int, c: int, U: float, G: float, H: float) -> float | None:
    """``LP(N)`` of the module doc in units of ``M / E`` seconds (bytes in ``M``, bandwidths in
    ``E``): the least ``sum p + sum q`` under a-f; None when the solver fails."""
    from scipy.optimize import linprog

    lp = _Program(N)
    _capacities_and_causality(lp, N, U, G, H)
    _coverage(lp, N, k, C, c)
    A, rhs, eq = lp.matrix()
    cost = np.zeros(A.shape[1])
    cost[lp.col["p"]] = cost[lp.col["q"]] = 1.0
    res = linprog(cost, A_ub=A[~eq], b_ub=rhs[~eq], A_eq=A[eq], b_eq=rhs[eq], bounds=[(0, None)] * A.shape[1],
                  method="highs")
    return float(res.fun) if res.status == 0 else None


class StepRows:
    """Rows of a linear program over step families kept with their prefix sums (``prefix[name][j]``:
    the column of ``sum name[0 .. j]``), built row by row and handed to the solver as one sparse
    matrix; a program sets ``prefix`` and ``nvar`` and starts its rows empty (:meth:`begin_rows`)."""

    prefix: dict
    nvar: int

    def begin_rows(self) -> None:
        """No rows yet."""
        self.rows, self.cols, self.vals, self.rhs, self.eq = [], [], [], [], []

    def add(self, terms, bound: float = 0.0, equal: bool = False) -> None:
        """The row ``sum coef * var <= bound`` (``==`` where ``equal``)."""
        for coef, idx in terms:
            self.rows.append(len(self.rhs))
            self.cols.append(int(idx))
            self.vals.append(float(coef))
        self.rhs.append(float(bound))
        self.eq.append(equal)

    def upto(self, name: str, j: int, sign: float = 1.0) -> list:
        """The terms of ``sign * sum name[0 .. j]`` (none for ``j < 0``)."""
        return [(sign, self.prefix[name][j])] if j >= 0 else []

    def after(self, name: str, j: int, sign: float = 1.0) -> list:
        """The terms of ``sign * sum name[j + 1 ..]``."""
        return [(sign, self.prefix[name][-1])] + self.upto(name, j, -sign)

    def matrix(self):
        """``(A, rhs, eq)``: the rows added so far as a sparse matrix, their right-hand sides and
        which are equalities."""
        from scipy import sparse

        A = sparse.csr_matrix((self.vals, (self.rows, self.cols)), shape=(len(self.rhs), self.nvar))
        return A, np.asarray(self.rhs), np.asarray(self.eq)


class _Program(StepRows):
    """The variables of ``LP(N)`` (module doc; ``Pd, Pe`` and ``Qd, Qe`` are ``P^o, P^i`` and
    ``Q^o, Q^i``; ``gN, hN`` the sends inside parts in a NIC step, ``gQ, hQ`` in a quiet group,
    group ``i`` coming before NIC step ``i`` and group ``N`` after the last), each family with
    its prefix sums, and the rows added so far."""

    NAMES = ("x", "n", "Pd", "Pe", "Qd", "Qe", "W", "Z", "p", "gN", "hN", "mu", "q", "gQ", "hQ")
    GROUPS = ("q", "gQ", "hQ")  # the families with one variable per quiet group (N + 1), the others per NIC step

    def __init__(self, N: int):
        size = {name: N + 1 if name in self.GROUPS else N for name in self.NAMES}
        self.col, self.prefix, start = {}, {}, 0
        for table in (self.col, self.prefix):  # prefix[name][j]: the sum of name[0 .. j]
            for name in self.NAMES:
                table[name], start = np.arange(size[name]) + start, start + size[name]
        self.nvar = start
        self.begin_rows()
        for name in self.NAMES:
            for j in range(size[name]):
                self.add([(1, self.prefix[name][j]), (-1, self.col[name][j])] + self.upto(name, j - 1, -1), equal=True)


def _capacities_and_causality(lp: _Program, N: int, U: float, G: float, H: float) -> None:
    """Rows a-c of the module doc (``E = M = 1``)."""
    col, add, upto = lp.col, lp.add, lp.upto
    for j in range(N):
        for name, cap in (("n", 1.0), ("x", U), ("gN", G), ("hN", H)):
            add([(1, col[name][j]), (-cap, col["p"][j])])
        for got, left in (("n", "x"), ("Pe", "Pd"), ("Qe", "Qd")):
            add(upto(got, j) + upto(left, j - 1, -1))
        add([(1, col["Pd"][j]), (1, col["Qd"][j]), (-1, col["x"][j])])
        add([(1, col["Pe"][j]), (1, col["Qe"][j]), (-1, col["n"][j])])
    for i in range(N + 1):
        add([(1, col["gQ"][i]), (-G, col["q"][i])])
        add([(1, col["hQ"][i]), (-H, col["q"][i])])
    add(upto("Pd", N - 1) + upto("Pe", N - 1, -1))
    add(upto("Qd", N - 1) + upto("Qe", N - 1, -1))


def _coverage(lp: _Program, N: int, k: int, C: int, c: int) -> None:
    """Rows d-f of the module doc (``M = 1``)."""
    col, add, upto, after = lp.col, lp.add, lp.upto, lp.after
    for j in range(N):
        add([(1, col["W"][j]), (-c, col["Pd"][j])])
        add(upto("W", j) + upto("Pd", j, -1) + upto("gQ", j, -1) + upto("gN", j - 1, -1))
        add([(1, col["Z"][j]), (-c, col["Qe"][j])])
        add(after("Z", j - 1) + after("Qe", j - 1, -1) + after("hQ", j, -1) + after("hN", j, -1))
        add(upto("Pd", j, -1) + upto("mu", j, k - 1))  # f: by d*'s NIC step
        add(after("Qd", j - 1, -1) + after("mu", j - 1, k - 1))
        add(upto("W", j, -1) + upto("mu", j, C - c))
        add(after("Z", j, -1) + after("mu", j - 1, C - c))
    add(upto("mu", N - 1, -1), -1.0)
