"""Two-level trees: every root's data reaches each node directly or through one relay.

Zhao et al., "ForestColl: Throughput-Optimal Collective Communications on Heterogeneous
Network Fabrics" (arXiv 2402.06787), Section 5.2, pack any ``k w_r`` spanning out-trees that
the split network's capacities allow (:mod:`.trees`); their depth is whatever the greedy growth
gives. A link served first-come-first-served by ready time (the ``event`` cost model,
:func:`collsynth.tens.cost.price_event`) sends all of its source's own pieces (ready at once)
before any piece it relays, so a piece relayed by ``d`` GPUs waits behind up to ``d`` such
runs of own pieces, and the links it feeds idle meanwhile. Trees with at most one relay
between a root and any node avoid that: the relays get their pieces straight from the roots.

The trees are found on the topology itself, not on the split network (whose arc capacities
fix how much each pair of compute nodes may exchange): a *pair route* is a shortest path
from a compute node to another through non-compute nodes only (switches, NICs, GPUs outside
the collective), at most :data:`ROUTES_PER_PAIR` per pair. For a root ``r`` with ``K = k w_r``
copies, integers ``s[r, h]`` are the copies ``r`` hands relay ``h`` to forward (the relays'
segments are disjoint, ``sum_h s[r, h] <= K``) and ``m[r, h, v] <= s[r, h]`` what ``h``
forwards of them to ``v``; ``v`` gets its other ``K - sum_h m[r, h, v]`` copies straight from
``r`` (all through relays when no pair route joins them). A pair ``u -> v`` then carries
``K_u - sum_h m[u, h, v] + sum_r m[r, u, v]`` copies, split over its routes, and every link
at most its capacity at the optimum's time (:func:`collsynth.tens.cut_optimum.capacities`).
A feasibility MILP (HiGHS, :func:`scipy.optimize.milp`) finds such integers when they exist;
any solution is a set of trees (:func:`trees_of`): relay ``h``'s segment is laid out at its
place in ``[0, K)``, ``h`` forwards to ``v`` the first ``m[r, h, v]`` copies of it, and each
interval between the breakpoints is one tree, ``r -> h -> {v forwarded}``, ``r -> `` the rest.
None exists when some node is more than two pair routes from a root (a sparse mesh, a torus).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...limits import seconds_left
from . import boxes
from .trees import RoutedTree, Tree, routed_trees

ROUTES_PER_PAIR = 4  # shortest pair routes kept per pair of compute nodes
MAX_VARIABLES = 100_000  # a larger MILP is not tried (the greedy packing is used)
MAX_NODES = 128  # nor on more compute nodes (the pair routes alone grow as their square)
TIME_LIMIT_S = 10.0  # HiGHS's limit per MILP (the LP relaxation, solved first, rules out most misses at once)
MILP_STOPPED, MILP_INFEASIBLE = 1, 2  # scipy.optimize.milp's status: a limit reached; proven infeasible


class Infeasible(Exception):
    """The two-level system has no solution even fractionally."""


@dataclass
class Routes:
    """The pair routes between compute nodes and the links each uses (pooled by node pair)."""

    pairs: dict  # (u, v) -> [route (tuple of node ids), ...]
    link_cap: dict  # (a, b) -> capacity in tree copies


def pair_routes(src, dst, compute, caps) -> Routes:
    """Shortest routes from each compute node to the others through non-compute nodes only
    (breadth first; at most :data:`ROUTES_PER_PAIR` per pair), links with positive capacity."""
    link_cap = {arc: int(c) for arc, c in boxes.pooled(src, dst, caps).items()}
    out_of: dict[int, list[int]] = {}
    for a, b in sorted(link_cap):
        out_of.setdefault(a, []).append(b)
    comp = set(compute)
    pairs: dict = {}
    for u in sorted(comp):
        paths = {u: [(u,)]}  # node -> its shortest paths from u (at most ROUTES_PER_PAIR)
        level = [u]
        while level:
            reached: dict = {}
            for x in level:
                if x != u and x in comp:
                    continue  # a compute node ends a route
                for y in out_of.get(x, ()):
                    if y in paths and y not in reached:
                        continue
                    got = reached.setdefault(y, [])
                    got.extend(p + (y,) for p in paths[x][:ROUTES_PER_PAIR - len(got)])
            paths.update(reached)
            level = sorted(reached)
        for v, routes in paths.items():
            if v != u and v in comp:
                pairs[(u, v)] = routes
    return Routes(pairs, link_cap)


class _Rows:
    """A sparse constraint matrix built row by row."""

    def __init__(self):
        self.r, self.c, self.v, self.lo, self.hi = [], [], [], [], []

    def add(self, entries, low, high) -> None:
        """One row ``low <= sum coef x[col] <= high``."""
        n = len(self.lo)
        for col, coef in entries:
            self.r.append(n), self.c.append(col), self.v.append(coef)
        self.lo.append(low), self.hi.append(high)


def _model(R: Routes, roots: dict[int, int], compute, group: dict | None = None) -> tuple:
    """Columns (``s``, ``m``, route flows) and the rows of the MILP (module doc); with
    ``group``, a relay forwards only within its group and the segments are disjoint per group."""
    nbrs: dict[int, list[int]] = {}
    for u, v in sorted(R.pairs):
        nbrs.setdefault(u, []).append(v)
    gid = group or {}
    cols: list = [("s", r, h) for r in sorted(roots) if roots[r] > 0 for h in nbrs.get(r, ())]
    cols += [("m", r, h, v) for (_, r, h) in list(cols) for v in nbrs.get(h, ())
             if v != r and gid.get(h) == gid.get(v)]
    cols += [("f", u, v, i) for (u, v), routes in sorted(R.pairs.items()) for i in range(len(routes))]
    index = {c: i for i, c in enumerate(cols)}
    rows = _Rows()
    sent, into, out_of = {}, {}, {}
    for c, i in index.items():
        if c[0] == "s":
            sent.setdefault((c[1], gid.get(c[2])), []).append((i, 1.0))
        elif c[0] == "m":
            _, r, h, v = c
            rows.add([(i, 1.0), (index[("s", r, h)], -1.0)], -np.inf, 0.0)
            into.setdefault((r, v), []).append(i)  # r's copies v gets through a relay
            out_of.setdefault((h, v), []).append(i)  # copies relayed over the pair h -> v
    for (r, _), entries in sent.items():
        rows.add(entries, -np.inf, roots[r])
    for r in sorted(roots):
        for v in compute if roots[r] > 0 else ():
            if v != r:
                K = roots[r]
                rows.add([(i, 1.0) for i in into.get((r, v), [])], K if (r, v) not in R.pairs else 0, K)
    on_link: dict = {}
    for (u, v), routes in R.pairs.items():  # flows over the pair's routes = own direct + relayed copies
        own = roots.get(u, 0)
        entries = [(index[("f", u, v, i)], 1.0) for i in range(len(routes))]
        entries += [(i, 1.0) for i in into.get((u, v), [])] if own else []
        entries += [(i, -1.0) for i in out_of.get((u, v), [])]
        rows.add(entries, own, own)
        for i, route in enumerate(routes):
            for link in zip(route[:-1], route[1:]):
                on_link.setdefault(link, []).append(index[("f", u, v, i)])
    for link, fcols in on_link.items():
        rows.add([(i, 1.0) for i in fcols], -np.inf, R.link_cap[link])
    return cols, rows


def solve(R: Routes, roots: dict[int, int], compute, group: dict | None = None,
          time_limit: float = TIME_LIMIT_S, stopped: list | None = None) -> dict | None:
    """An integer solution ``{column: value}`` (columns of :func:`_model`, nonzero only), or
    None when the MILP has none, is too large, or is not solved within ``time_limit``. Raises
    :class:`Infeasible` when its LP relaxation (solved first, fast) is proven to have no
    solution. A model stopped by its limit proves nothing: its outcome is unknown, never
    infeasible (an LP that stops is followed by the MILP as if it had a solution), and a note
    saying so is appended to ``stopped``, so the decision does not depend on the machine's load
    except through that recorded stop."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix

    cols, rows = _model(R, roots, compute, group)
    n = len(cols)
    if n == 0 or n > MAX_VARIABLES:
        return None
    A = coo_matrix((rows.v, (rows.r, rows.c)), shape=(len(rows.lo), n)).tocsr()
    cost = np.asarray([1.0 if c[0] == "m" else 0.0 for c in cols])  # the fewest relayed copies
    constraint = LinearConstraint(A, rows.lo, rows.hi)
    time_limit = seconds_left(time_limit)  # never past the run's limit (HiGHS runs in C, out of its timer's reach)
    relaxed = milp(np.zeros(n), constraints=constraint, bounds=Bounds(0, np.inf), options={"time_limit": time_limit})
    if relaxed.status == MILP_INFEASIBLE:  # no fractional solution: none at any multiple of these capacities either
        raise Infeasible
    _note_stop(relaxed, "LP relaxation", n, time_limit, stopped)
    res = milp(cost, constraints=constraint, integrality=np.ones(n),
               bounds=Bounds(0, np.inf), options={"time_limit": time_limit})
    _note_stop(res, "MILP", n, time_limit, stopped)
    if res.x is None or res.status not in (0, MILP_STOPPED):
        return None
    x = np.rint(res.x).astype(np.int64)
    return {c: int(v) for c, v in zip(cols, x) if v > 0}


def _note_stop(result, what: str, n: int, time_limit: float, stopped: list | None) -> None:
    """Appends to ``stopped`` a note on a model that ``result`` says stopped at its limit
    (:data:`MILP_STOPPED`: "unknown", whether or not it had found a solution)."""
    if result.status == MILP_STOPPED and stopped is not None:
        stopped.append(f"two-level {what} ({n} columns) stopped at its {time_limit:g} s limit: "
                       + ("its solution so far is used" if what == "MILP" and result.x is not None else "outcome unknown"))


def trees_of(sol: dict, roots: dict[int, int], compute, group: dict | None = None) -> list[Tree]:
    """The trees of an integer solution (module doc), each root's relay trees first; with
    ``group``, each group's relays' segments are laid out from 0 on their own."""
    seg: dict[int, list] = {}
    for c, v in sorted(sol.items()):
        if c[0] == "s":
            seg.setdefault(c[1], []).append((c[2], v))
    out = []
    everyone = sorted(compute)
    for r in sorted(roots):
        K = roots[r]
        if K <= 0:
            continue
        start, at, cuts = {}, {}, {0, K}
        for h, c in seg.get(r, []):
            g = (group or {}).get(h)
            a = at.get(g, 0)
            start[h] = (a, c)
            cuts.update({a, a + c})
            cuts.update(a + sol[key] for key in sol if key[0] == "m" and key[1] == r and key[2] == h)
            at[g] = a + c
        for x, y in zip(sorted(cuts)[:-1], sorted(cuts)[1:]):
            relays = [h for h, (a, c) in start.items() if a <= x < a + c]
            fed = {v: h for h in relays for v in everyone if sol.get(("m", r, h, v), 0) > x - start[h][0]}
            arcs = [(r, v) for v in everyone if v != r and v not in fed]
            arcs += [(h, v) for v, h in sorted(fed.items())]
            out.append(Tree(r, y - x, set(everyone), arcs))
    return out


def routed(sol: dict, R: Routes, roots: dict[int, int], compute, group: dict | None = None) -> list[RoutedTree]:
    """The solution's trees with every arc mapped to pair routes (each pair's copies taken
    from its route flows in tree order; :func:`.trees.routed_trees`)."""

    @dataclass
    class _Pools:
        pools: dict

    pools = {(u, v): [[route, sol.get(("f", u, v, i), 0)] for i, route in enumerate(routes)
                      if sol.get(("f", u, v, i), 0) > 0] for (u, v), routes in R.pairs.items()}
    return routed_trees(_Pools(pools), trees_of(sol, roots, compute, group))


def find(net0, caps, roots: dict[int, int], deadline=None, stopped: list | None = None,
         model: boxes.Boxes | None = None) -> list[RoutedTree] | None:
    """Two-level routed trees with ``roots[r]`` copies per root on the flow network ``net0``
    (:class:`collsynth.tens.cut_optimum.FlowNet`) at link capacities ``caps`` (tree copies per
    link): every relay forwarding to anyone first, then (if that has no solution) relays
    forwarding only within their box (``model``, :mod:`.boxes`; segments disjoint per box: a
    root's copy may then cross to every box once). None when neither has a solution; raises
    :class:`Infeasible` when neither has one even fractionally (more copies would not help).
    Each MILP gets at most :data:`TIME_LIMIT_S` and what is left of ``deadline``
    (:class:`collsynth.limits.Deadline`), which is checked before each; a model stopped by its
    limit is noted in ``stopped`` (:func:`solve`)."""
    R = pair_routes(net0.src, net0.dst, net0.compute, caps)
    grouped = (model or boxes.of_flow_net(net0)).groups()
    groups = [None] + ([grouped] if grouped is not None else [])
    fractional = False
    for group in groups:
        left = deadline.left() if deadline is not None else None
        if deadline is not None:
            deadline.check("two-level trees", f"{len(groups)} groupings")
        try:
            sol = solve(R, roots, net0.compute, group, TIME_LIMIT_S if left is None else min(TIME_LIMIT_S, left),
                        stopped)
        except Infeasible:
            continue
        fractional = True
        if sol is not None:
            return routed(sol, R, roots, net0.compute, group)
    if not fractional:
        raise Infeasible
    return None
