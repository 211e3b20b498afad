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
Appendix A). **Allreduce** overlaps the two: one program over one span of ``S`` steps takes a
reduction tree's piece ``y_(tau, j)`` by the step ``j`` its root completes it (its hop at depth
``k`` in step ``j - k + 1``) and an allgather tree's ``x_(tau, j)`` by the step it starts in, both
loading the same step bounds, with ``sum_(tau, j <= t) x_(tau, j) <= sum_(tau, j <= t - 1)
y_(tau, j)`` for every ``t``: laid end to end over the block in step order (reductions by
completion, gathers by start), every byte is gathered only from the step after its reduction
completed, while other bytes still reduce, so the reduce-scatter's drain and the allgather's
fill share steps (:func:`allreduce_phases`). The schedule's ``sync`` price is again at most
``sum_t b_t``. TACOS 4x4x2 at 1 GB (35 steps): 3.2631 ms against the ramp bound's 3.2621 (the
halves in sequence: 3.2773).

**Broadcast and reduce** (rooted). A single root's dimension-ordered tree sends on every one of
the root's links, so the root is the bottleneck by the number of levels; a piece instead goes
down the root's translate of a tree ``tau`` to one rank ``w`` and then down ``w``'s translate of
``tau``, less the hops into the ranks of that path (:func:`rooted_hops`; for every ``tau`` and
``w``). A root has no translation symmetry, so the program has one row per *link* and step:
``alpha_l + sum_(tau, k) n_(tau, l, k) x_(tau, t - k + 1) s / B_l <= b_t`` (``n_(tau, l, k)``:
the hops of tree ``tau`` on link ``l`` at depth ``k``, 0 or 1). *Price*: in step ``t`` link
``l`` carries exactly the pieces ``x_(tau, t - k + 1)`` of the trees with a hop on ``l`` at
depth ``k``, so its ``alpha_l + bytes_l / B_l`` is the row's left side (an idle link's is
``alpha_l`` or nothing), at most ``b_t``; the step costs at most ``b_t`` and the schedule at
most ``sum_t b_t``. A reduce is the broadcast on the transposed links reversed in time: step
``t`` becomes ``S + 1 - t`` and each hop ``u -> v`` on a transposed link the hop ``v -> u`` on
the link itself, of the same alpha and bandwidth, with the same bytes, so the same bound holds
(partial sums reduced on the way, Zhao et al., NSDI 2025, Appendix A). Three fully connected
GPUs, 1 B from rank 0 over 1 B/s at alpha ``a``: the trees are ``0 -> 1 -> 2`` and ``0 -> 2 ->
1``; with ``u_t`` the mean of what rank 0 sends on its two links in step ``t`` (``u_0 = u_S =
0``, ``sum_t u_t = 1/2``), step ``t`` costs at least ``a + max(u_(t-1), u_t)`` (those links
and the relays' carry them), so ``S`` steps cost at least ``S a + 1/2 + max_t u_t >= S a + 1/2
+ 1 / (2 (S - 1))``, met by equal pieces; least at ``S = 4`` for ``a = 1/16``: 11/12 s.

Two GPUs behind a switch, 1 B a block over 1 B/s links, alpha ``a``: the program's optimum over
``S >= 5`` steps is ``S a + 2 S / (S - 1)``, the least of any schedule of ``S`` steps. A GPU's link up
carries 2 B (a block of partial sums, then the other's block reduced) in steps ``1 .. S - 1`` and
the switch forwards in step ``t`` what came up in ``t - 1``, so with ``u_t`` the bytes up in step
``t`` (``u_0 = u_S = 0``) the steps cost ``sum_t max(u_(t-1), u_t) = sum_t u_t + (the variation
of u) / 2 >= 2 + max_t u_t >= 2 + 2 / (S - 1)``. For odd ``S`` pieces of ``2 / (S - 1)``
meet it: the reduction's go up in steps ``1 .. (S - 1) / 2``, the allgather's from the next, each
gathering a piece reduced by then, the last reduction's hop down sharing a step with the
first gather's hop up. At ``a = 1/16``: ``S = 5`` gives 45/16 s, ``S = 7`` the least, 7/16 + 7/3 = 133/48 s
(the halves in sequence: 2 x 25/16 = 150/48 s).

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
from .phases import ALL, Phase, build, collective_of, constructed

KINDS = ("allgather", "reduce_scatter", "allreduce", "broadcast", "reduce")
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


def reduction_hops(topology, levels: list[tuple[str, int]]) -> dict:
    """Per tree, the hops of the allgather's trees on the transposed links (:func:`hops`), each
    sent the other way, ``(orbit, depth, edge index, src ids, dst ids)`` with the orbit of the
    links it uses: a reduction tree, whose hop at depth ``k`` is sent ``k - 1`` steps before its
    root has the piece (Zhao et al., NSDI 2025, Appendix A)."""
    t = topology.transpose()
    found = on_links(t, {name: hops(t, levels, edges) for name, edges in trees(levels).items()})
    return {name: [(_reverse(levels, o), k, e, dst, src) for o, k, e, src, dst in tree_hops]
            for name, tree_hops in found.items()}


def _reverse(levels: list[tuple[str, int]], orbit: tuple) -> tuple:
    """The orbit of an orbit's links taken the other way: the offset negated, a switch's up and down swapped."""
    axis, off = orbit
    if off in ("up", "down"):
        return axis, "down" if off == "up" else "up"
    return axis, (-off) % levels[axis][1]


def _columns(found: dict, row_of: dict, S: int, unit: dict, up: bool) -> tuple[list, list]:
    """The program's columns ``(tree, j)`` and their entries ``(row, column, value)``: a piece
    starting in step ``j`` sends its hops at depth ``k`` in step ``j + k - 1``; a reduction's
    (``up``) completes in step ``j`` and sends them in step ``j - k + 1``; each loads its orbit's
    row with ``unit`` (a block's seconds over the orbit) per hop."""
    cols, entries = [], []
    for name, tree_hops in found.items():
        depth = max(h[1] for h in tree_hops)
        counts: dict = {}
        for orbit, k, *_ in tree_hops:
            counts[(orbit, k)] = counts.get((orbit, k), 0) + 1
        for j in range(depth, S + 1) if up else range(1, S - depth + 2):
            for (orbit, k), n in counts.items():
                entries.append((row_of[orbit] + (j - k if up else j + k - 2), len(cols), n * unit[orbit]))
            cols.append((name, j))
    return cols, entries


def program(families: list[tuple[dict, bool]], costs: dict, S: int, block_bytes: float,
            seconds: float | None = None, ordered: bool = False) -> tuple[float, list[list]] | None:
    """The module doc's linear program over ``S`` steps for ``families`` of trees ``[(hops, up),
    ...]`` (:func:`hops`; ``up``: reduction trees, :func:`reduction_hops`), each family's shares
    summing to a block, every family's hops loading the same steps: ``(sum_t b_t, [[(tree, j,
    share), ...] per family])`` with the shares that are not zero, ``j`` the step a piece starts
    in (a reduction's: completes in); None when no tree fits in ``S`` steps or the solver fails
    or runs out of its ``seconds`` (None: no limit). ``ordered`` (a reduction then an
    allgather): by each step ``t`` the allgather has started no more of the block than the
    reduction completed by step ``t - 1``."""
    from scipy import sparse  # a run that never sizes pieces does not load scipy's optimizer
    from scipy.optimize import linprog

    orbits = sorted(costs, key=str)
    row_of = {o: i * S for i, o in enumerate(orbits)}
    unit = {o: block_bytes / costs[o][1] for o in orbits}
    cols, entries, family = [], [], []
    for f, (found, up) in enumerate(families):
        got, e = _columns(found, row_of, S, unit, up)
        entries += [(r, len(cols) + c, v) for r, c, v in e]
        cols, family = cols + got, family + [f] * len(got)
    if not cols or len(set(family)) < len(families):
        return None
    nx, rows = len(cols), len(orbits) * S
    entries += [(r, nx + r % S, -1.0) for r in range(rows)] + (_after(cols, family, rows, S) if ordered else [])
    r, c, v = zip(*entries)
    A = sparse.csr_matrix((v, (r, c)), shape=(rows + S * ordered, nx + S))
    rhs = np.r_[-np.repeat([costs[o][0] for o in orbits], S), np.zeros(S * ordered)]
    eq = np.zeros((len(families), nx + S))
    eq[family, np.arange(nx)] = 1.0
    res = linprog(np.r_[np.zeros(nx), np.ones(S)], A_ub=A, b_ub=rhs, A_eq=eq, b_eq=np.ones(len(families)),
                  bounds=[(0, None)] * (nx + S), method="highs-ds" if S <= SIMPLEX_STEPS else "highs-ipm",
                  options={} if seconds is None else {"time_limit": max(seconds, 0.01)})
    if res.status != 0:
        return None
    out = [[] for _ in families]
    for f, (name, j), x in zip(family, cols, res.x[:nx]):
        if x > 1e-12:
            out[f].append((name, j, float(x)))
    return float(res.fun), out


def _after(cols: list, family: list, first_row: int, S: int) -> list[tuple]:
    """Rows ``first_row + t - 1``, ``t = 1 .. S``: the allgather's (family 1) shares started by
    step ``t`` less the reduction's (family 0) completed by step ``t - 1``, at most 0."""
    out = []
    for c, (f, (_, j)) in enumerate(zip(family, cols)):
        out += [(first_row + t - 1, c, 1.0 if f else -1.0) for t in range(j if f else j + 1, S + 1)]
    return out


def sizes(found: dict, costs: dict, S: int, block_bytes: float,
          seconds: float | None = None) -> tuple[float, list[tuple]] | None:
    """:func:`program` for one family of allgather trees: ``(sum_t b_t, [(tree, first step,
    share), ...])``; ``costs``: per orbit its alpha and bandwidth (:func:`orbit_costs`).

    Two ranks joined by one link each way (a ring of two), 1 byte a block over 1 B/s, alpha
    1/4 s: one step of the whole block, 1/4 + 1 s:

    >>> round(sizes({"t": [((0, 1), 1, 0, None, None)]}, {(0, 1): (0.25, 1.0)}, 1, 1.0)[0], 9)
    1.25
    """
    got = program([(found, False)], costs, S, block_bytes, seconds)
    return None if got is None else (got[0], got[1][0])


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


def searched(solve, first: int, steps: int | None, deadline: Deadline | None = None, most: int = MAX_STEPS):
    """``(S, solve(S, seconds))`` at ``steps`` steps, or (None) at the step count of least value
    by :func:`best_steps` from ``first``, which stops trying step counts once ``deadline``
    passes and keeps the best solved (none solved: the time limit)."""
    memo: dict[int, tuple | None] = {}

    def solved(S: int):
        if S not in memo:
            if deadline is not None and deadline.expired():
                if any(memo.values()):
                    return None  # out of time: the search settles on the best step count solved
                deadline.check("dimension-trees step search", "no step count solved")
            memo[S] = solve(S, None if deadline is None else deadline.left())
        return memo[S]

    S = steps if steps is not None else best_steps(lambda S: solved(S) and solved(S)[0], first, most)
    got = solved(S)
    if got is None:
        raise Unsupported(f"dimension-trees: no tree fits in {S} steps (the shallowest needs {first})")
    return S, got


def _lay(ph: Phase, found: dict, shares: list, up: bool, done_by=None, block=None) -> np.ndarray:
    """Add ``shares`` (:func:`program`'s, of ``found``) to ``ph``, laid end to end over a block
    of :data:`DENOM` units in the order of their steps, each piece's end at most ``done_by[j -
    1]`` (units complete by the step before it starts); returns the units complete by each
    step ``0 .. ph.steps`` (a reduction's pieces complete in their step ``j``). ``block``: the
    block sent (None: each source rank's translate sends its own rank's block)."""
    shares = sorted(shares, key=lambda s: s[1])
    ends = np.rint(np.cumsum([s for *_, s in shares]) / sum(s for *_, s in shares) * DENOM).astype(np.int64)
    if done_by is not None:
        ends = np.minimum(ends, done_by[[j - 1 for _, j, _ in shares]])
    done = np.zeros(max(ph.steps, max(j for _, j, _ in shares)) + 1, np.int64)
    for (name, j, _), lo, hi in zip(shares, np.r_[0, ends[:-1]], ends):
        done[j] = max(done[j], hi)
        if hi <= lo:
            continue
        for _, k, _, src, dst in found[name]:
            ph.add(np.arange(len(src)) if block is None else block, src, dst, j - k + 1 if up else j + k - 1, lo, hi)
    return np.maximum.accumulate(done)


def allgather_phase(topology, levels: list[tuple[str, int]], block_bytes: float, steps: int | None,
                    deadline: Deadline | None = None) -> tuple:
    """``(phase, figures)``: the allgather of the module doc on ``topology`` (blocks and ranks
    by node id), its pieces sized by :func:`sizes` at ``steps`` steps (None: searched,
    :func:`searched`)."""
    tree_hops = {name: hops(topology, levels, edges) for name, edges in trees(levels).items()}
    return _sized_phase(topology, tree_hops, block_bytes, steps, deadline)


def rooted_hops(topology, levels: list[tuple[str, int]], root: int) -> dict:
    """Per tree ``(tau, w)``, the hops of a tree from ``root``: the piece goes down ``root``'s
    translate of ``tau`` (:func:`trees`, :func:`hops`) to rank ``w`` only, then down ``w``'s
    translate of ``tau``, less the hops into the ranks of that path (they have the piece), the
    ranks of the path sending their children there too; ``(link, depth, edge index, src ids,
    dst ids)`` with one id each, the hop's orbit its own link ``(src, dst)``: a single root
    has no translation symmetry, so the program bounds every link's load in every step. Every
    rank receives the piece once, after its parent (the path reaches ``w`` at ``w``'s depth
    in ``tau``, which ``w``'s hops then follow)."""
    out = {}
    for name, edges in trees(levels).items():
        tree_hops = hops(topology, levels, edges)
        into = {}
        for orbit, k, e, src, dst in tree_hops:
            into.setdefault(e, []).append((orbit, k, src, dst))
        for w in range(len(tree_hops[0][3]) if tree_hops else 0):
            if w == root:
                continue
            path, at = _path(into, root, w)
            on_path = {root} | {int(into[e][-1][3][root]) for e in path}
            got = [((int(src[root]), int(dst[root])), k, e, src[root:root + 1], dst[root:root + 1])
                   for e in path for _, k, src, dst in into[e]]
            for e, lst in into.items():
                if int(lst[-1][3][w]) not in on_path:
                    got += [((int(src[w]), int(dst[w])), at + k, e, src[w:w + 1], dst[w:w + 1])
                            for _, k, src, dst in lst]
            out[(name, w)] = got
    return out


def _path(into: dict, root: int, w: int) -> tuple[list, int]:
    """The edges of ``root``'s translate of a tree (``into``: edge -> its hops) from ``root`` to
    ``w``, and ``w``'s depth there."""
    child_edge = {int(lst[-1][3][root]): e for e, lst in into.items()}
    path, x = [], w
    while x != root:
        e = child_edge[x]
        path.append(e)
        x = int(into[e][0][2][root])
    return path[::-1], into[path[0]][-1][1]


def broadcast_phase(topology, levels: list[tuple[str, int]], root: int, block_bytes: float, steps: int | None,
                    deadline: Deadline | None = None) -> tuple:
    """``(phase, figures)``: ``root``'s buffer broadcast down its dimension-ordered trees
    (:func:`rooted_hops`), the pieces sized by :func:`sizes` with one row per link and step
    (the module doc's rooted case) at ``steps`` steps (None: searched, :func:`searched`)."""
    count = len(trees(levels)) * (len(topology.npus) - 1)
    if count > MAX_TREES:  # TACOS 4x4x2: 744 trees, the program at 40 steps still unsolved after 7 min
        raise Unsupported(f"dimension-trees: {count:,} rooted trees (trees times ranks), more than the "
                          f"{MAX_TREES} the step program takes")
    return _sized_phase(topology, rooted_hops(topology, levels, root), block_bytes, steps, deadline, block=ALL)


def _sized_phase(topology, tree_hops: dict, block_bytes: float, steps: int | None, deadline: Deadline | None,
                 **lay) -> tuple:
    """``(phase, figures)``: the trees' hops kept on the topology's links, their pieces sized by
    :func:`sizes` at ``steps`` steps (None: searched, :func:`searched`) and laid out as sends
    (:func:`_lay`, with ``lay``'s options)."""
    found = on_links(topology, tree_hops)
    if not found:
        raise Unsupported("dimension-trees: the topology lacks the links of its hierarchy")
    costs = orbit_costs(topology, found)
    deepest = min(max(h[1] for h in hops_of_tree) for hops_of_tree in found.values())
    S, (value, shares) = searched(lambda S, sec: sizes(found, costs, S, block_bytes, sec), deepest, steps, deadline)
    ph = Phase(DENOM)
    _lay(ph, found, shares, False, **lay)
    return ph, {"steps": S, "lp_s": value, "trees": len({n for n, _, _ in shares}), "pieces": len(shares)}


def allreduce_phases(topology, levels: list[tuple[str, int]], block_bytes: float, steps: int | None,
                     deadline: Deadline | None = None) -> tuple:
    """``(reduction phase, allgather phase, figures)`` over one span of steps: the module doc's
    allreduce, both halves' pieces sized by one :func:`program` (``ordered``), so a piece of a
    block is gathered from the step after its reduction completes, while other pieces still
    reduce; ``steps`` (None: searched, :func:`searched`) counts both."""
    down = on_links(topology, {name: hops(topology, levels, edges) for name, edges in trees(levels).items()})
    up = reduction_hops(topology, levels)
    if not down or not up:
        raise Unsupported("dimension-trees: the topology lacks the links of its hierarchy")
    costs = orbit_costs(topology, {**{("up", n): h for n, h in up.items()}, **down})
    first = sum(min(max(h[1] for h in tree_hops) for tree_hops in f.values()) for f in (up, down))
    S, (value, (rs, ag)) = searched(
        lambda S, sec: program([(up, True), (down, False)], costs, S, block_bytes, sec, ordered=True),
        first, steps, deadline, 2 * MAX_STEPS)
    red, gather = Phase(DENOM, S), Phase(DENOM, S)
    _lay(gather, down, ag, False, _lay(red, up, rs, True))
    return red, gather, {"steps": S, "lp_s": value, "trees": len({n for n, _, _ in rs + ag}),
                         "pieces": len(rs) + len(ag)}


def dimension_trees(instance: Instance, steps: int | None = None, deadline: Deadline | None = None):
    """``(schedule, figures)``: the module doc's allgather, reduce-scatter (the allgather on the
    transposed links, reversed), allreduce (both overlapped, :func:`allreduce_phases`),
    broadcast or reduce (the broadcast on the transposed links, reversed) on
    ``instance``; the step search stops when ``deadline`` passes (None: no limit)."""
    coll = collective_of(instance, "dimension-trees", KINDS)
    topo = instance.topology
    levels = levels_of(topo)
    if sorted(coll.nodes) != list(range(len(topo.npus))) or sorted(topo.npus) != list(range(len(topo.npus))):
        raise Unsupported("dimension-trees: every rank of the hierarchy must take part")
    block = coll.chunk_bytes * coll.chunks_per_node
    phases, figures = [], {}
    if coll.kind == "reduce_scatter":
        ph, figures["reduce_scatter"] = allgather_phase(topo.transpose(), levels, block, steps, deadline)
        phases.append((ph.reversed(), OP_DEFAULT))
    if coll.kind == "allgather":
        ph, figures["allgather"] = allgather_phase(topo, levels, block, steps, deadline)
        phases.append((ph, OP_DEFAULT))
    root = 0 if coll.root is None else int(coll.root)
    if coll.kind == "broadcast":
        ph, figures["broadcast"] = broadcast_phase(topo, levels, root, block, steps, deadline)
        phases.append((ph, OP_DEFAULT))
    if coll.kind == "reduce":
        ph, figures["reduce"] = broadcast_phase(topo.transpose(), levels, root, block, steps, deadline)
        phases.append((ph.reversed(), OP_DEFAULT))
    if coll.kind == "allreduce":
        red, gather, figures["allreduce"] = allreduce_phases(topo, levels, block, steps, deadline)
        phases += [(red, OP_REDUCE, 0), (gather, OP_COPY, 0)]
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
    "time in every order of the levels (a rooted broadcast or reduce: down a tree to one rank, then down that "
    "rank's translate), pieces sized per step by a linear program for the synchronous model",
    params=(Param("steps", int, None, "steps of the collective (the whole allreduce; default: "
                                      "the least priced by the linear program, searched up to 128, 256 for an "
                                      "allreduce)", low=1, high=1024),))]
