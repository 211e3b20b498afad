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

**Refined: one arrival or several.** Call a position *single through* ``u`` when exactly one
send of it reaches ``r`` by the step ``r`` completes it, that send on a link ``(u, r)``, and
*multiple* otherwise. A single position's one arrival carries every other GPU's contribution,
none of which passed through ``r`` (that would be a second arrival), so GPU ``v``'s reached
``u`` on a path avoiding ``r``: it left ``v`` by step ``t - D_u(v) + 1``, ``D_u(v)`` = ``v``'s
hops to ``u`` in the graph without ``r``, plus one (``D_u(v) >= d_v``). A multiple position
reached ``r`` at least twice by its step. With ``X_u(t)`` the single positions through ``u``
completed by step ``t``, ``M(t)`` the multiple ones and ``R_u`` the bandwidth of ``u``'s links
into ``r``:

1'. ``X_u(t) - X_u(t - 1) <= R_u b_t``, and the completions of step ``t`` of every sort at most
    ``R b_t`` (each has an arrival in step ``t``);
2'. for every GPU ``v`` and step ``s``: ``sum_u X_u(s + D_u(v) - 1) + M(s + d_v - 1) <= O_v (b_1
    + ... + b_s)`` (counts past ``S`` read at ``S``; what ``v`` sent by ``s`` holds each of them);
3'. ``sum_u X_u(t) + 2 M(t) <= R (b_1 + ... + b_t)``: the arrivals at ``r`` by step ``t``.

Every ``X_u`` and ``M`` never decreases and ``sum_u X_u(S) + M(S) = M``. The least ``sum_t b_t``
under 1'.-3'. (:func:`split_lp`) is at least ``LP(S)`` (2'. with ``D_u(v) >= d_v`` gives 2.) and
replaces it. Rows of 2'. are kept only for GPUs farthest overall or through some ``u``, fewer
rows giving a lower value (still a bound), and ``S`` is searched to within ``GAP`` of the
least value. Both programs do not grow with ``S``: an empty step put first (``b = 0``, every
count and running sum moved one step later, nothing completed in it) turns a solution for ``S``
steps into one for ``S + 1`` (each row of 1.-3'. at step ``t + 1`` is the old row at ``t``; a
row reading step 1 reads only zeros), so :func:`.ramp.least_over_steps` holds an unsolved
``LP(S)`` between its solved neighbours' and solves it only where a decision depends on it,
the refined one also above :func:`relaxed_lp` (the same value in a fraction of the programs'
time: ``benchmarks/bench_rooted_depth_bound.py``). The refined program is solved for at most
``REFINED_MOST_GPUS`` participants; beyond, its rows (per GPU and in-link) cost 6-18 times the
first program's (an 8x8 torus: 13 s of CPU against 1.3 s, for a value 0.02 % higher), and
``LP(S)`` is used, a bound all the same. On
a triangle of GPUs (links ``B``) into GPU 0: one step costs ``M / B`` (every
position arrives twice), two steps ``2 M / (3 B)`` (a third of the positions through each
neighbour, a third sent directly by both: that schedule meets it), where 1. and 2. give
``M / (2 B)`` for both.

**Two GPUs behind a switch** (links ``B``, alpha ``M / (16 B)``): ``d = 2``, the bound is ``5 M /
(16 B) + 5 M / (4 B)`` at ``S = 5``, four pieces through the switch (:func:`rooted_lp`).

**Not covered:** a schedule routed on shortest paths (``routing = "shortest-path"``) crosses
several hops in one step; it is bounded by ``L + T*`` alone (``Bounds.sync_routed``).
"""

from __future__ import annotations

import numpy as np

from ...instances.instance import Instance
from .ramp import MAX_STEPS, SAFETY, least_over_steps, steps_refused
from .record import Bound, not_computed

GAP = 1e-4  # the step count is searched to within this share of the least value (fewer programs)
REFINED_MOST_GPUS = 32  # beyond, the refined program costs 6-18x the first (benchmarks/bench_rooted_depth_bound.py)


def rooted_depth_bound(instance: Instance, latency: Bound, bandwidth: Bound) -> Bound:
    """The depth bound (module doc) of a single rooted reduce; not computed for another
    collective, where no link has a latency, or where steps are not store-and-forward."""
    if instance.concurrent or instance.collective.kind != "reduce":
        return not_computed("sync", "rooted depth", "only a single rooted reduce")
    refused = steps_refused("rooted depth", instance, latency, bandwidth)
    if refused is not None:
        return refused
    coll, la = instance.collective, instance.topology.link_arrays
    alpha = float(la.alpha.min()) if len(la) else 0.0
    if alpha <= 0:
        return not_computed("sync", "rooted depth", "no link has a latency")
    root_in, senders = feeders(la, int(coll.root), [int(v) for v in coll.nodes])
    if not senders or root_in <= 0:
        return not_computed("sync", "rooted depth", "no GPU sends to the root")
    first = max(d for d, _ in senders)
    if len(coll.nodes) <= REFINED_MOST_GPUS:
        tails, profiles = in_link_profiles(la, int(coll.root), [int(v) for v in coll.nodes])
        per_share = coll.message_bytes / root_in
        lp = lambda S: _scaled(split_lp(S, tails, profiles), per_share)  # noqa: E731
        relaxed = lambda S: _scaled(relaxed_lp(S, profiles), per_share)  # noqa: E731
    else:  # the program of the first argument: a tenth of the refined one's time, a bound all the same
        lp = lambda S: rooted_lp(S, coll.message_bytes, root_in, senders)  # noqa: E731
        relaxed = None
    value = least_over_steps(lp, alpha, latency.value, bandwidth.value, first=first,
                             most=max(MAX_STEPS, 2 * first), gap=GAP, relaxed=relaxed)
    if value is None:
        return not_computed("sync", "rooted depth", "the step program was not solved")
    return Bound(value * (1 - SAFETY), "s", "sync", "rooted depth", f"r={int(coll.root)} d={first}",
                 f"steps of at least {alpha:g} s each against a reduction that reaches the root {first} hops "
                 "after leaving its farthest GPU")


def _scaled(share: float | None, per_share: float) -> float | None:
    return None if share is None else share * per_share


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


def in_link_profiles(la, root: int, participants: list[int]) -> tuple[tuple, tuple]:
    """``(tails, profiles)``: per GPU or switch ``u`` with links into ``root``, ``(u, share)``,
    the share of the bandwidth into the root those links carry; per other participant ``v``,
    ``(O_v / R, d_v, (D_1, D_2, ...))``: its bandwidth out over the root's in, its hops to the
    root and, per tail in ``tails``' order, ``D_u(v)`` = its hops to ``u`` through paths
    avoiding the root, plus one (module doc, the refined argument). A tail that some
    participant cannot reach without the root is left out (no position arrives through it
    alone).

    >>> from collsynth.instances.topology import from_edges
    >>> e = lambda u, v: [(u, v, {"bandwidth": 1.0, "alpha": 1.0}), (v, u, {"bandwidth": 1.0, "alpha": 1.0})]
    >>> in_link_profiles(from_edges(4, e(0, 1) + e(1, 2) + e(2, 3) + e(3, 0)).link_arrays, 0, [0, 1, 2, 3])
    (((1, 0.5), (3, 0.5)), ((1.0, 1, (1, 3)), (1.0, 1, (3, 1)), (1.0, 2, (2, 2))))
    """
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    n = la.size
    reversed_all = csr_matrix((np.ones(len(la.src)), (la.dst, la.src)), shape=(n, n))
    keep = (la.src != root) & (la.dst != root)
    reversed_rest = csr_matrix((np.ones(int(keep.sum())), (la.dst[keep], la.src[keep])), shape=(n, n))
    into = la.dst == root
    R = float(la.bandwidth[into].sum())
    tails = sorted({int(u) for u in la.src[into]})
    others = [v for v in participants if v != root]
    d = shortest_path(reversed_all, unweighted=True, indices=root)
    to_tail = shortest_path(reversed_rest, unweighted=True, indices=tails) if tails else np.zeros((0, n))
    kept = [k for k in range(len(tails)) if np.isfinite(to_tail[k][others]).all()]
    shares = tuple((tails[k], float(la.bandwidth[into & (la.src == tails[k])].sum()) / R) for k in kept)
    out_bw = np.bincount(la.src, weights=la.bandwidth, minlength=n)
    profiles = {(float(out_bw[v]) / R, int(d[v]), tuple(int(to_tail[k][v]) + 1 for k in kept))
                for v in others if np.isfinite(d[v])}
    kept_rows = [p for p in profiles if not any(q != p and _implies(q, p) for q in profiles)]
    farthest = [p for p in kept_rows if p[1] == max(q[1] for q in kept_rows)
                or any(D == max(q[2][k] for q in kept_rows) for k, D in enumerate(p[2]))]
    return shares, tuple(sorted(farthest))


def _implies(q: tuple, p: tuple) -> bool:
    """Whether profile ``q``'s rows imply ``p``'s: no more bandwidth out, no fewer hops anywhere."""
    return q[0] <= p[0] and q[1] >= p[1] and all(a >= b for a, b in zip(q[2], p[2]))


def split_lp(S: int, tails: tuple, profiles: tuple) -> float | None:
    """The refined ``LP(S)`` (module doc) as a share of ``T*``: the least ``sum_t b_t`` (in
    units of ``need / R``) over ``S`` steps completing every position either from one arrival
    through one tail of ``tails`` (``(u, share)``) or from several; ``profiles`` as
    :func:`in_link_profiles` gives them. Infinite where no ``S`` steps suffice, None when the
    solver fails.

    A triangle into GPU 0 (module doc): in one step every position arrives twice, ``2 T*``; in
    two, with ``s`` single positions (all completed in step 2, ``s <= 4 b_1 - 2 M_1`` by 2'.)
    and ``M_1`` multiple ones completed in step 1 (``M_1 <= b_1`` by 3'.): ``1 - M_1 <= 2 b_2``
    by 1'. and ``2 - s <= 2 T_B`` by 3'.; with ``b_1 = M_1 + e``, ``T_B >= max((1 + M_1) / 2 +
    e, 1 - M_1 - 2 e) >= 2/3 = 4/3 T*`` (bytes ``M = 1``, links 1 B/s):

    >>> triangle = ((1, 0.5), (2, 0.5)), ((1.0, 1, (1, 2)), (1.0, 1, (2, 1)))
    >>> split_lp(1, *triangle), round(split_lp(2, *triangle), 9)
    (2.0, 1.333333333)
    """
    from scipy.optimize import linprog

    A_ub, rhs_ub, A_eq, rhs_eq = split_rows(S, tails, profiles)
    n = A_ub.shape[1]
    cost = np.r_[np.ones(S), np.zeros(n - S)]
    res = linprog(cost, A_ub=A_ub, b_ub=rhs_ub, A_eq=A_eq, b_eq=rhs_eq, bounds=[(0, None)] * n, method="highs")
    if res.status == 2:
        return float("inf")
    return float(res.fun) if res.status == 0 else None


def relaxed_lp(S: int, profiles: tuple) -> float | None:
    """A lower bound on :func:`split_lp` (as a share of ``T*``) a tenth to a thirtieth of its
    cost: :func:`rooted_lp` with a row of 2. per profile ``(O_v / R, d_v)``. It relaxes the
    refined program: with ``C = sum_u X_u + M``, 1'. in all is 1.; ``X_u`` and ``M`` never
    decrease and ``D_u(v) >= d_v``, so 2'. gives ``C(s + d_v - 1) <= (O_v / R) U_s``, 2.; 3'. is
    dropped. :func:`.ramp.least_over_steps` solves it where its solved neighbours leave a
    comparison open, and :func:`split_lp` only where this does too.

    >>> triangle = ((1.0, 1, (1, 2)), (1.0, 1, (2, 1)))  # split_lp's: 2 and 4/3 at one and two steps
    >>> relaxed_lp(1, triangle), relaxed_lp(2, triangle)
    (1.0, 1.0)
    """
    return rooted_lp(S, 1.0, 1.0, tuple(sorted({(d, out) for out, d, _ in profiles})))


def split_rows(S: int, tails: tuple, profiles: tuple) -> tuple:
    """``(A_ub, b_ub, A_eq, b_eq)`` of :func:`split_lp`'s program over ``S`` steps (sparse
    rows, numpy right-hand sides). Variables: ``b_1..b_S``, the running sums ``U_t``, the
    multiple positions ``M(t)`` and per tail ``X_u(t)``; rows: per step the running sum (the
    equalities), 1'. in all and per tail, ``X_u`` and ``M`` never decreasing, 3'.; then 2'. per
    profile and step; then every position completed (module doc). Built with numpy: a program
    over hundreds of steps has some 10^5 entries.

    One tail, one GPU a hop away, two steps: 3 rows in step 1 (1'. in all, 1'. per tail, 3'.), 5 in
    step 2 (two more: never decreasing), 2'. at ``s = 1, 2`` (at ``s = 0`` it reads no count),
    the last row; 8 variables (``b``, ``U``, ``M``, ``X`` over two steps):

    >>> A_ub, b_ub, A_eq, b_eq = split_rows(2, ((1, 1.0),), ((1.0, 1, (1,)),))
    >>> A_ub.shape, A_eq.shape, b_ub.tolist()
    ((11, 8), (2, 8), [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0])
    """
    K = len(tails)
    n = (3 + K) * S
    b, u, m = np.arange(S), S + np.arange(S), 2 * S + np.arange(S)
    x = [3 * S + k * S + np.arange(S) for k in range(K)]
    eq = _Rows()
    eq.add(np.arange(S), u, 1.0)
    eq.add(np.arange(1, S), u[:-1], -1.0)
    eq.add(np.arange(S), b, -1.0)
    ub = _Rows()
    per = np.arange(S)
    width = np.where(per > 0, 3 + 2 * K, 2 + K)  # rows of step t
    base = np.r_[0, np.cumsum(width)[:-1]]
    later = per > 0
    ub.step(base, [*x, m], per, 1.0)  # 1.: every completion of step t
    ub.add(base, b, -1.0)
    for k, (_, share) in enumerate(tails):
        tail = base + 1 + k * np.where(later, 2, 1)
        ub.step(tail, [x[k]], per, 1.0)  # 1. per tail
        ub.add(tail, b, -share)
        ub.step(tail[later] + 1, [x[k]], per[later], -1.0)  # never decreasing
    rest = base + 1 + K * np.where(later, 2, 1)
    ub.step(rest[later], [m], per[later], -1.0)
    three = rest + later
    for k in range(K):
        ub.add(three, x[k], 1.0)
    ub.add(three, m, 2.0)
    ub.add(three, u, -1.0)  # 3.
    row = int(base[-1] + width[-1]) if S else 0
    for out, d, depths in profiles:  # 2'.: what is completed by s + D - 1 left v by step s
        s = np.arange(S + 1)
        reach = [(var, s + D - 1) for var, D in zip(x + [m], list(depths) + [d])]
        live = np.zeros(S + 1, bool)
        for _, at in reach:
            live |= at >= 1
        ids = row + np.cumsum(live) - 1
        for var, at in reach:
            keep = at >= 1
            ub.add(ids[keep], var[np.minimum(S, at[keep]) - 1], 1.0)
        keep = live & (s >= 1)
        ub.add(ids[keep], u[s[keep] - 1], -out)
        row += int(live.sum())
    for var in x + [m]:
        ub.add(np.array([row]), var[S - 1:], -1.0)  # every position completed
    rhs_ub = np.zeros(row + 1)
    rhs_ub[row] = -1.0
    return ub.matrix(row + 1, n), rhs_ub, eq.matrix(S, n), np.zeros(S)


class _Rows:
    """Sparse entries gathered in numpy blocks (row, column, value)."""

    def __init__(self):
        self.parts = []

    def add(self, rows, cols, value):
        rows, cols = np.asarray(rows), np.asarray(cols)
        self.parts.append((rows, cols, np.broadcast_to(np.asarray(value, float), rows.shape)))

    def step(self, rows, variables, t, sign):
        """The completions in step ``t`` of each cumulative variable: ``+sign`` at ``t``,
        ``-sign`` at ``t - 1`` where ``t > 0``."""
        for var in variables:
            self.add(rows, var[t], sign)
            self.add(rows[t > 0], var[t[t > 0] - 1], -sign)

    def matrix(self, shape_rows: int, shape_cols: int):
        from scipy import sparse

        if not self.parts:
            return sparse.csr_matrix((shape_rows, shape_cols))
        rows, cols, vals = (np.concatenate(p) for p in zip(*self.parts))
        return sparse.csr_matrix((vals, (rows, cols)), shape=(shape_rows, shape_cols))
