"""Dimension-ordered broadcast trees on a hierarchical system, their pieces sized per step by a
linear program for the synchronous model (``dimension-trees``).

**Trees.** On a hierarchy of levels (TACOS's Ring x FullyConnected x Switch; Won et al.,
"TACOS: Topology-Aware Collective Algorithm Synthesizer for Distributed Training", MICRO 2024,
Section VII-B; :func:`collsynth.instances.generators.hierarchical`) a rank's block can be
broadcast one level at a time, as hierarchical collectives run their phases level by level:
in the level taken first the root covers its group, in the next every rank reached so far
covers its own group, and so on. A ring group is covered both
ways round (its far rank from either side) or as a chain one way, a fully connected group by a
star, a switch of two by the hop up and the hop down. Every order of the levels and every
covering of the rings is a tree; each rank's trees are rank ``0``'s translated by the rank's
coordinates (the hierarchy's groups numbered cyclically), so every link of one *orbit* (a
level and an offset, or a switch level's links up or down) carries the same load.

**Pieces per step.** Pipelining pieces down trees one hop a step (as ForestColl's trees are
pipelined: Zhao et al., "ForestColl: Throughput-Optimal Collective Communications on
Heterogeneous Network Fabrics", arXiv 2402.06787, Section 5) leaves the deep links idle while the pipeline fills: under the synchronous
model (Zhao et al., "Efficient Direct-Connect Topologies for Collective Communications", NSDI
2025, Section 3.2: a step costs its largest ``alpha_l + bytes_l / B_l``) trees of depth ``d``
pay ``d - 1`` steps of the whole load. Trees whose levels come in different orders are deep on
different links, so the share of each rank's block sent on tree ``tau`` in step ``j``,
``x_(tau, j)``, is chosen by the linear program

    minimise ``sum_t b_t`` over ``S`` steps, subject to ``sum_(tau, j) x_(tau, j) = 1`` and, for
    every orbit ``o`` and step ``t``, ``alpha_o + sum_(tau, k) n_(tau, o, k) x_(tau, t - k + 1)
    s / B_o <= b_t``

(``n_(tau, o, k)``: the hops of ``tau`` in orbit ``o`` at depth ``k``; ``s`` a block's bytes). A
translate of a hop lands on each link of its orbit exactly once (the ranks' coordinates act
freely on the links), so a link of orbit ``o`` carries in step ``t`` exactly the sum above, the
step costs at most ``b_t`` and the schedule at most ``sum_t b_t`` (:func:`sizes`; pieces are
rounded to ``2^-20`` of a block); ``S`` is searched (:func:`best_steps`). TACOS 4x4x2 at 1 GB
(25 steps): 1.6387 ms against the ramp bound's 1.6379
(:mod:`collsynth.tens.bounds.ramp`); the greedy tree packing at 120 pieces takes 1.7355 ms.

Reduce-scatter is the allgather's time reversal on the transposed links (Zhao et al., NSDI 2025,
Appendix A), allreduce the reduce-scatter then the allgather.

>>> ring_coverings(4)["both+"]
[(0, 1), (0, 3), (1, 2)]
>>> ring_coverings(2)
{'both+': [(0, 1)]}
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ...instances import Instance
from ...limits import Deadline
from ...tens.schedule import OP_COPY, OP_DEFAULT, OP_REDUCE
from ..producers import Outcome, Param, Producer, Unsupported
from .phases import Phase, build, collective_of, constructed

KINDS = ("allgather", "reduce_scatter", "allreduce")
LEVELS = ("ring", "uniring", "complete", "switch")
MAX_STEPS = 128  # the largest step count searched (alpha 0 would take ever more, finer steps; 256 took 84 s)
SIMPLEX_STEPS = 64  # up to this many steps the dual simplex, beyond it the interior point method (faster there)
MAX_TREES = 256  # the most trees (level orders times coverings) the step program takes (TACOS 4x4x2: 24)
DENOM = 1 << 20  # pieces are whole multiples of 1/DENOM of a block


def ring_coverings(n: int) -> dict[str, list[tuple[int, int]]]:
    """The ways a ring of ``n`` is covered from offset 0, as ``(parent, child)`` offsets: both ways
    round with the far rank of an even ring from either side (``both+``, ``both-``) and the
    chains one way (``chain+``, ``chain-``); one way for a ring of two."""
    if n == 2:
        return {"both+": [(0, 1)]}
    half = (n - 1) // 2
    up = [(i, i + 1) for i in range(half)]
    down = [((-i) % n, (-i - 1) % n) for i in range(half)]
    out = {}
    for sign in (1, -1):
        far = [((sign * half) % n, (sign * (half + 1)) % n)] if n % 2 == 0 else []
        out["both+" if sign == 1 else "both-"] = sorted(up + down) + far
    out["chain+"] = [(i, i + 1) for i in range(n - 1)]
    out["chain-"] = [((-i) % n, (-i - 1) % n) for i in range(n - 1)]
    return out if n % 2 == 0 else {k: v for k, v in out.items() if k != "both-"}


def coverings(kind: str, n: int) -> dict[str, list[tuple[int, int]]]:
    """How one group of a level is covered from offset 0 (``(parent, child)`` offsets)."""
    if n == 1:
        return {"none": []}
    if kind == "ring":
        return ring_coverings(n)
    if kind == "uniring":  # one way round (the transposed links the other way)
        rings = ring_coverings(n) if n > 2 else {"chain+": [(0, 1)]}
        return {k: v for k, v in rings.items() if k.startswith("chain")}
    return {"star": [(0, i) for i in range(1, n)]}  # complete; a switch of two; none for a group of one


def levels_of(topology) -> list[tuple[str, int]]:
    """``[(kind, size), ...]`` of a hierarchy this producer covers; :class:`Unsupported` otherwise."""
    meta = topology.meta or {}
    kinds, dims = meta.get("levels"), meta.get("dims")
    if not kinds or not dims:
        raise Unsupported("dimension-trees: needs a hierarchical topology (levels and dims)")
    unwind = meta.get("unwind") or [0] * len(dims)
    for kind, n, u in zip(kinds, dims, unwind):
        if kind not in LEVELS:
            raise Unsupported(f"dimension-trees: level {kind!r} is not one of {', '.join(LEVELS)}")
        if kind == "switch" and (u != 0 or n > 2):
            raise Unsupported("dimension-trees: a switch level must join two ranks through one switch node "
                              f"(got {n} ranks, unwind {u})")
    if topology.failed_links or len(topology.npus) != math.prod(dims):
        raise Unsupported("dimension-trees: every link and rank of the hierarchy must be live")
    count = math.factorial(sum(n > 1 for n in dims)) * math.prod(len(coverings(k, n)) for k, n in zip(kinds, dims))
    if count > MAX_TREES:
        raise Unsupported(f"dimension-trees: {count:,} trees (level orders times ring coverings), more than the "
                          f"{MAX_TREES} the step program takes")
    return list(zip(kinds, dims))


def trees(levels: list[tuple[str, int]]) -> dict[tuple, list[tuple]]:
    """Rank 0's trees by (level order, coverings): edges ``(level, parent coords, child coords,
    depth)`` (a switch edge's depth is its hop down's; the hop up is one less)."""
    out = {}
    per_level = [coverings(k, n) for k, n in levels]
    for order in itertools.permutations([i for i, (_, n) in enumerate(levels) if n > 1]):
        for names in itertools.product(*(sorted(c) for c in per_level)):
            reached = {(0,) * len(levels): 0}
            edges = []
            for axis in order:
                hop = 2 if levels[axis][0] == "switch" else 1
                for coords, depth in list(reached.items()):
                    at = {0: depth}
                    for a, b in per_level[axis][names[axis]]:
                        at[b] = at[a] + hop
                        child = coords[:axis] + ((coords[axis] + b) % levels[axis][1],) + coords[axis + 1:]
                        parent = coords[:axis] + ((coords[axis] + a) % levels[axis][1],) + coords[axis + 1:]
                        edges.append((axis, parent, child, at[b]))
                        reached[child] = at[b]
            out[(order, names)] = edges
    return out


def orbit_of(levels: list[tuple[str, int]], edge: tuple) -> list[tuple]:
    """The orbits of an edge's hops: ``(level, offset)``, or a switch level's ``(level, "up")``
    and ``(level, "down")``."""
    axis, parent, child, _ = edge
    if levels[axis][0] == "switch":
        return [(axis, "up"), (axis, "down")]
    return [(axis, (child[axis] - parent[axis]) % levels[axis][1])]


def hops(topology, levels: list[tuple[str, int]], edges: list[tuple]) -> list[tuple]:
    """Per hop of rank 0's ``edges``, every rank's translate: ``(orbit, depth, edge index, src
    ids, dst ids)``, ids over the ranks in id order (a switch's hops pass its switch node)."""
    dims = [n for _, n in levels]
    coords = np.array(np.unravel_index(np.arange(math.prod(dims)), dims))  # [level, rank]
    node = lambda off: np.ravel_multi_index(  # noqa: E731
        tuple((coords[i] + o) % n for i, (o, n) in enumerate(zip(off, dims))), dims)
    switch_between = _switches(topology)
    out = []
    for e, edge in enumerate(edges):
        src, dst = node(edge[1]), node(edge[2])
        orbits = orbit_of(levels, edge)
        if len(orbits) == 1:
            out.append((orbits[0], edge[3], e, src, dst))
        else:
            via = np.array([switch_between.get((int(u), int(v)), -1) for u, v in zip(src, dst)])
            out += [(orbits[0], edge[3] - 1, e, src, via), (orbits[1], edge[3], e, via, dst)]
    return out


def _switches(topology) -> dict[tuple[int, int], int]:
    """``{(u, v): switch}`` for ranks ``u``, ``v`` joined through a switch node."""
    g = topology.graph
    out = {}
    for s in topology.switches:
        for u in g.predecessors(s):
            for v in g.successors(s):
                if u != v:
                    out[(u, v)] = s
    return out


def on_links(topology, found: dict) -> dict:
    """The trees of ``found`` whose every hop is a link of ``topology`` (a one-way ring's chains
    go one way)."""
    la = topology.link_arrays
    return {name: tree_hops for name, tree_hops in found.items()
            if all(min(src.min(), dst.min()) >= 0 and (la.lookup(src, dst) >= 0).all()
                   for _, _, _, src, dst in tree_hops)}


def orbit_costs(topology, found: dict) -> dict[tuple, tuple[float, float]]:
    """``{orbit: (largest alpha, least bandwidth)}`` over the links the orbit's hops use."""
    la = topology.link_arrays
    out = {}
    for tree_hops in found.values():
        for orbit, _, _, src, dst in tree_hops:
            idx = la.lookup(src, dst)
            a, b = float(la.alpha[idx].max()), float(la.bandwidth[idx].min())
            old = out.get(orbit, (a, b))
            out[orbit] = (max(a, old[0]), min(b, old[1]))
    return out


def sizes(found: dict, costs: dict, S: int, block_bytes: float,
          seconds: float | None = None) -> tuple[float, list[tuple]] | None:
    """The module doc's linear program over ``S`` steps: ``(sum_t b_t, [(tree, first step,
    share), ...])`` with the shares that are not zero; None when no tree fits in ``S`` steps or
    the solver fails or runs out of its ``seconds`` (None: no limit). ``found``: per tree its
    hops (:func:`hops`); ``costs``: per orbit its alpha and bandwidth (:func:`orbit_costs`).

    Two ranks joined by one link each way (a ring of two), 1 byte a block over 1 B/s, alpha
    1/4 s: one step of the whole block, 1/4 + 1 s:

    >>> round(sizes({"t": [((0, 1), 1, 0, None, None)]}, {(0, 1): (0.25, 1.0)}, 1, 1.0)[0], 9)
    1.25
    """
    from scipy import sparse  # a run that never sizes pieces does not load scipy's optimizer
    from scipy.optimize import linprog

    orbits = sorted(costs, key=str)
    row_of = {o: i * S for i, o in enumerate(orbits)}
    cols, r, c, v = [], [], [], []
    for name, tree_hops in found.items():
        depth = max(h[1] for h in tree_hops)
        counts: dict = {}
        for orbit, k, *_ in tree_hops:
            counts[(orbit, k)] = counts.get((orbit, k), 0) + 1
        for j in range(1, S - depth + 2):
            for (orbit, k), n in counts.items():
                r.append(row_of[orbit] + j + k - 2)
                c.append(len(cols))
                v.append(n * block_bytes / costs[orbit][1])
            cols.append((name, j))
    if not cols:
        return None
    nx = len(cols)
    rows = len(orbits) * S
    r += list(range(rows))
    c += [nx + t % S for t in range(rows)]
    v += [-1.0] * rows
    A = sparse.csr_matrix((v, (r, c)), shape=(rows, nx + S))
    rhs = -np.repeat([costs[o][0] for o in orbits], S)
    res = linprog(np.r_[np.zeros(nx), np.ones(S)], A_ub=A, b_ub=rhs, A_eq=np.r_[np.ones(nx), np.zeros(S)][None, :],
                  b_eq=[1.0], bounds=[(0, None)] * (nx + S), method="highs-ds" if S <= SIMPLEX_STEPS else "highs-ipm",
                  options={} if seconds is None else {"time_limit": max(seconds, 0.01)})
    if res.status != 0:
        return None
    x = res.x[:nx]
    return float(res.fun), [(name, j, float(s)) for (name, j), s in zip(cols, x) if s > 1e-12]


def best_steps(price, first: int, most: int = MAX_STEPS) -> int:
    """The step count ``S`` in ``first .. most`` of least ``price(S)`` (None: none fits there):
    doubling from ``first`` while the price falls, then a ternary search between the
    neighbours of the best doubling (the price is close to convex in ``S``: steps' alphas
    against the pipeline's fill).

    >>> best_steps(lambda S: S + 100 / S, 1)
    10
    """
    seen: dict[int, float] = {}

    def at(S: int) -> float:
        if S not in seen:
            got = price(S)
            seen[S] = math.inf if got is None else got
        return seen[S]

    S = first
    while S * 2 <= most and at(S * 2) <= at(S):
        S *= 2
    lo, hi = max(first, S // 2), min(most, S * 2)
    while hi - lo > 2:
        a, b = lo + (hi - lo) // 3, hi - (hi - lo) // 3
        if at(a) <= at(b):
            hi = b
        else:
            lo = a
    return min(range(lo, hi + 1), key=at)


def allgather_phase(topology, levels: list[tuple[str, int]], block_bytes: float, steps: int | None,
                    deadline: Deadline | None = None) -> tuple:
    """``(phase, figures)``: the allgather of the module doc on ``topology`` (blocks and ranks
    by node id), its pieces sized by :func:`sizes` at ``steps`` steps (None: :func:`best_steps`,
    which stops trying step counts when ``deadline`` passes and keeps the best solved)."""
    found = on_links(topology, {name: hops(topology, levels, edges) for name, edges in trees(levels).items()})
    if not found:
        raise Unsupported("dimension-trees: the topology lacks the links of its hierarchy")
    costs = orbit_costs(topology, found)
    deepest = min(max(h[1] for h in tree_hops) for tree_hops in found.values())
    memo: dict[int, tuple | None] = {}

    def solved(S: int):
        if S not in memo:
            if deadline is not None and deadline.expired():
                if any(memo.values()):
                    return None  # out of time: the search settles on the best step count solved
                deadline.check("dimension-trees step search", "no step count solved")
            memo[S] = sizes(found, costs, S, block_bytes, None if deadline is None else deadline.left())
        return memo[S]

    S = steps if steps is not None else best_steps(lambda S: solved(S) and solved(S)[0], deepest)
    got = solved(S)
    if got is None:
        raise Unsupported(f"dimension-trees: no tree fits in {S} steps (the shallowest needs {deepest})")
    value, shares = got
    ph = Phase(DENOM)
    bounds = np.rint(np.cumsum([0.0] + [s for _, _, s in shares]) / sum(s for _, _, s in shares) * DENOM)
    for (name, j, _), lo, hi in zip(shares, bounds[:-1].astype(np.int64), bounds[1:].astype(np.int64)):
        if hi <= lo:
            continue
        for _, k, _, src, dst in found[name]:
            ph.add(np.arange(len(src)), src, dst, j + k - 1, lo, hi)
    used = {name for name, _, _ in shares}
    return ph, {"steps": S, "lp_s": value, "trees": len(used), "pieces": len(shares)}


def dimension_trees(instance: Instance, steps: int | None = None, deadline: Deadline | None = None):
    """``(schedule, figures)``: the module doc's allgather, reduce-scatter (the allgather on the
    transposed links, reversed) or allreduce (both in sequence) on ``instance``; the step
    search of each half gets half of what is left of ``deadline`` (None: no limit)."""
    coll = collective_of(instance, "dimension-trees", KINDS)
    topo = instance.topology
    levels = levels_of(topo)
    if sorted(coll.nodes) != list(range(len(topo.npus))) or sorted(topo.npus) != list(range(len(topo.npus))):
        raise Unsupported("dimension-trees: every rank of the hierarchy must take part")
    block = coll.chunk_bytes * coll.chunks_per_node
    phases, figures = [], {}
    if coll.kind in ("reduce_scatter", "allreduce"):
        half = None if deadline is None or coll.kind != "allreduce" else deadline.share(0.5)
        ph, figures["reduce_scatter"] = allgather_phase(topo.transpose(), levels, block, steps, half or deadline)
        phases.append((ph.reversed(), OP_REDUCE if coll.kind == "allreduce" else OP_DEFAULT))
    if coll.kind in ("allgather", "allreduce"):
        ph, figures["allgather"] = allgather_phase(topo, levels, block, steps, deadline)
        phases.append((ph, OP_COPY if coll.kind == "allreduce" else OP_DEFAULT))
    ranks = np.arange(topo.size)
    return build(instance, phases, name="dimension-trees", ranks=ranks, meta=figures), figures


def _run(instance: Instance, options) -> Outcome:
    steps = dict(getattr(options, "params", {}) or {}).get("steps")
    sched, figures = dimension_trees(instance, steps, options.timer())
    lp = sum(f["lp_s"] for f in figures.values())
    out = constructed(sched, {"sync_s": lp, **{f"{k}_steps": f["steps"] for k, f in figures.items()}})
    out.extra["dimension_trees"] = figures
    return out


PRODUCERS = [Producer(
    "dimension-trees", "closed-form", _run,
    "hierarchies of ring, fully connected and two-rank switch levels: every rank's block broadcast one level at a "
    "time in every order of the levels, pieces sized per step by a linear program for the synchronous model",
    params=(Param("steps", int, None, "steps of each allgather or reduce-scatter (default: the least priced by "
                                      "the linear program, searched up to 128)", low=1, high=1024),))]
