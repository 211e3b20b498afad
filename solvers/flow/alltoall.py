"""The ``flow-alltoall`` producer: the optimal concurrent flow, decomposed into paths and pipelined.

An all-to-all (scatter, gather) moves every pair's data from its source to its destination and
copies nothing, so its bandwidth optimum is the maximum concurrent flow
(:mod:`collsynth.tens.concurrent_flow`; Shahrokhi and Matula, J. ACM 1990), with one flow per
source (Liu et al., TE-CCL, SIGCOMM 2024, Section 4). This producer solves it (then once more
for the fewest link-units within a hair of the optimum: short paths, no cycles; and once more
for the least data relayed by GPUs over saturated links, which a first-come-first-served link
sends only after its GPU's own data: :mod:`collsynth.tens.concurrent_flow`), decomposes
each source's flow into paths ``s -> d`` (Ahuja, Magnanti and Orlin, "Network Flows", 1993,
Section 3.5: walk back from a destination along links with flow, cancelling any cycle met),
rounds every pair's path shares to multiples of ``1 / GRID`` (largest remainder), and cuts
each path's share of each chunk into ``pieces`` pipeline pieces sent hop by hop: the ``q``-th
piece crosses the ``h``-th hop of its path in step ``q + h + 1`` (one step earlier after an
instant switch-to-NPU hop), so a switch forwards in the step after a piece reached it and
switch hops stay switch hops (docs/schedules.md, "Switch nodes"). In every full step each link
then carries ``1 / (c P)`` of its LP load, so the synchronous time is the optimum times
``(c P + D - 1) / (c P)`` for paths ``D`` steps deep, up to the rounding of the shares.
"""

from __future__ import annotations

import time

import numpy as np

from ...instances import Instance
from ...instances.size import BYTES_PER_SEND
from ...limits import in_a_child, memory_budget, require
from ...tens.concurrent_flow import NEVER_COPY, FlowLPFailed, pair_demands, solve
from ...tens.schedule import Schedule, from_arrays
from ...tens.ten import instant_hops
from ..producers import Options, Outcome, Param, Producer, Unsupported

GRID = 1000  # a pair's path shares are multiples of 1 / GRID of its data
NEGLIGIBLE = 1e-9  # flows below this (units of one pair's data) are solver noise
DEPTH_FACTOR = 100  # automatic pieces: this many per step of the deepest path (fill within about 1 %)
SEND_BUDGET = 6_000_000  # sends the automatic pipeline depth may emit
APART_VARIABLES = 50_000  # an LP of this many flow variables (sources x links) is solved in a child process,
# killed at the deadline (2x16 MI250: 32 x 448; 16-box DGX-H100: 128 x 512, 45 s; a 64-box one's presolve
# ran 14 s past a 5 s HiGHS time limit)


def decompose(la, source: int, flow: np.ndarray, demand: dict[int, float]) -> dict[int, list]:
    """Paths of one source's flow (units per link pair of ``la``) to each destination of
    ``demand``: ``{d: [(route as node ids, amount), ...]}`` (module doc). Cycles met on the
    way are cancelled; what the solver's noise leaves unroutable is dropped (the shares are
    normalised per pair afterwards)."""
    f = np.where(flow > NEGLIGIBLE, flow, 0.0)
    into: dict[int, list[int]] = {}
    for l in np.flatnonzero(f).tolist():
        into.setdefault(int(la.dst[l]), []).append(l)
    out: dict[int, list] = {}
    for d, need in sorted(demand.items()):
        left = need
        while left > NEGLIGIBLE * max(1.0, need):
            links = _walk_back(la, f, into, source, d)
            if links is None:
                break
            amount = min(left, float(f[links].min()))
            f[links] -= amount
            left -= amount
            out.setdefault(d, []).append((tuple([source] + [int(la.dst[l]) for l in links]), amount))
    return out


def _walk_back(la, f: np.ndarray, into: dict, source: int, d: int) -> list[int] | None:
    """Link pairs of a path ``source -> d`` with positive flow, found backwards from ``d``
    along the largest in-flow; a cycle found is cancelled and the walk restarts. None when
    no flow reaches ``d`` any more."""
    while True:
        path, seen, v = [], {d: 0}, d
        while v != source:
            best = max(into.get(v, ()), key=lambda l: f[l], default=None)
            if best is None or f[best] <= NEGLIGIBLE:
                return None
            u = int(la.src[best])
            path.append(best)
            if u in seen:  # a cycle u -> ... -> u: cancel it
                cycle = path[seen[u]:]
                f[cycle] -= f[cycle].min()
                f[f <= NEGLIGIBLE] = 0.0
                break
            seen[u] = len(path)
            v = u
        else:
            return path[::-1]


def shares(paths: list, grid: int = GRID) -> list[tuple[tuple[int, ...], int]]:
    """A pair's paths with integer shares summing to ``grid`` in proportion to their amounts
    (largest remainder); paths left with no share are dropped.

    >>> shares([((0, 1), 2.0), ((0, 2, 1), 1.0)], 10)
    [((0, 1), 7), ((0, 2, 1), 3)]
    """
    amounts = np.asarray([a for _, a in paths], dtype=float)
    exact = amounts / amounts.sum() * grid
    n = np.floor(exact).astype(np.int64)
    order = np.argsort(-(exact - n), kind="stable")
    n[order[: grid - int(n.sum())]] += 1
    return [(route, int(k)) for (route, _), k in zip(paths, n) if k > 0]


def hop_steps(route: tuple[int, ...], instant: frozenset) -> np.ndarray:
    """Steps below the path's start before each hop: one more per hop, except a hop in
    ``instant`` (switch to NPU over an instant hop), which leaves in the step its piece reached
    the switch."""
    at, before = 0, []
    for i, hop in enumerate(zip(route[:-1], route[1:])):
        if i > 0 and hop not in instant:
            at += 1
        before.append(at)
    return np.asarray(before, dtype=np.int64)


def chunk_base(kind: str, s: int, d: int, size: int, c: int) -> int:
    """The first chunk id of what ``s`` sends ``d`` (docs/schedules.md, "Chunk ids")."""
    return {"alltoall": (s * size + d) * c, "scatter": d * c, "gather": s * c}[kind]


def depth_of(routes: dict) -> int:
    """The most steps any path takes (its last hop's step below its start, plus one)."""
    instant = routes["instant"]
    return max((int(hop_steps(r, instant)[-1]) + 1 for paths in routes["pairs"].values() for r, _ in paths), default=1)


def auto_pieces(routes: dict, chunks: int, seconds: float, alpha: float) -> int:
    """Pipeline pieces per chunk and path: :data:`DEPTH_FACTOR` per step of the deepest path,
    at most what keeps the schedule within :data:`SEND_BUDGET` sends and half the memory
    budget; with a latency ``alpha`` the ``P`` (up to that) minimising the synchronous estimate
    ``(c P + D - 1) (alpha + seconds / (c P))``."""
    hops = sum(len(r) - 1 for paths in routes["pairs"].values() for r, _ in paths) * chunks
    budget = min(SEND_BUDGET, int(memory_budget()[0] / 2 / BYTES_PER_SEND))
    depth = depth_of(routes)
    want = DEPTH_FACTOR * depth
    if alpha > 0:
        want = min(range(1, want + 1), key=lambda P: (chunks * P + depth - 1) * (alpha + seconds / (chunks * P)))
    return max(1, min(want, budget // max(1, hops)))


def emit(instance: Instance, routes: dict, pieces: int) -> Schedule:
    """The schedule (module doc): every pair's paths, each with its share of every chunk cut
    into ``pieces`` pieces (grid ``GRID * pieces``), the ``q``-th piece over the ``h``-th hop
    in step ``q + h + 1``."""
    coll = instance.collective
    c, P = coll.chunks_per_node, pieces
    q = np.arange(c * P, dtype=np.int64)
    j, p = q // P, q % P
    cols = {name: [] for name in ("chunk", "lo", "hi", "src", "dst", "step")}
    for (s, d), paths in sorted(routes["pairs"].items()):
        base = chunk_base(coll.kind, s, d, coll.size, c) + j
        at = 0
        for route, n in paths:
            before = hop_steps(route, routes["instant"])
            H, Q = len(before), len(q)
            lo = at * P + p * n
            cols["chunk"].append(np.tile(base, H))
            cols["lo"].append(np.tile(lo, H))
            cols["hi"].append(np.tile(lo + n, H))
            cols["src"].append(np.repeat(np.asarray(route[:-1], dtype=np.int64), Q))
            cols["dst"].append(np.repeat(np.asarray(route[1:], dtype=np.int64), Q))
            cols["step"].append((before[:, None] + q[None, :] + 1).ravel())
            at += n
    arr = {name: np.concatenate(v) if v else np.zeros(0, np.int64) for name, v in cols.items()}
    return from_arrays(coll.kind, coll.size, coll.num_chunks, denom=GRID * P, **arr,
                       meta={"algorithm": "flow-alltoall"})


def routes_of(instance: Instance, deadline) -> tuple[dict, object]:
    """The LP solved (shortest flows, then the least relaying over tight links) and decomposed:
    ``{"pairs": {(s, d): [(route, share)]}, "instant": instant hops}`` and the LP's answer."""
    coll, topo = instance.collective, instance.topology
    demands = pair_demands(coll.kind, coll.nodes, coll.root)
    variables = len(demands.sources) * len(topo.link_arrays.src)
    try:
        if variables >= APART_VARIABLES:  # HiGHS' presolve of a big LP keeps no clock: killed at the deadline
            sol = in_a_child(deadline, "concurrent flow LP", solve, topo, demands, True, deadline.left(), True)
        else:
            sol = solve(topo, demands, shortest=True, time_limit=deadline.left(), relays=True)
    except FlowLPFailed as e:
        raise Unsupported(f"flow-alltoall: {e}") from None
    la = topo.link_arrays
    pairs = {}
    for i, s in enumerate(sol.sources):
        want = {int(d): float(a) for src, d, a in zip(demands.src, demands.dst, demands.amount) if src == s}
        for d, paths in decompose(la, s, sol.flow[i], want).items():
            pairs[(s, d)] = shares(paths)
        deadline.check("path decomposition", f"{i + 1} of {len(sol.sources)} sources")
    missing = [(s, d) for s, d in zip(demands.src.tolist(), demands.dst.tolist()) if (s, d) not in pairs]
    if missing:
        raise RuntimeError(f"flow-alltoall: no path decomposed for pairs {missing[:3]}")
    hit = instant_hops(topo)
    instant = frozenset(zip(la.src[hit].tolist(), la.dst[hit].tolist()))
    return {"pairs": pairs, "instant": instant}, sol


def _check(instance: Instance) -> None:
    if instance.concurrent:
        raise Unsupported("flow-alltoall takes a single collective, not concurrent ones")
    if instance.collective.kind not in NEVER_COPY:
        raise Unsupported(f"flow-alltoall implements {', '.join(NEVER_COPY)} (collectives that never copy), "
                          f"not {instance.collective.kind}")


def run(instance: Instance, options: Options) -> Outcome:
    """The concurrent flow schedule (module doc) and the LP optimum it was built from."""
    _check(instance)
    coll = instance.collective
    deadline = options.timer()
    t0 = time.perf_counter()
    try:
        routes, sol = routes_of(instance, deadline)
    except ValueError as e:  # a destination its source cannot reach
        raise Unsupported(f"flow-alltoall: {e}") from None
    t_lp = time.perf_counter()
    pair_bytes = coll.chunk_bytes * coll.chunks_per_node
    alpha = float(instance.topology.link_arrays.alpha.max())
    P = options.params.get("pieces") or auto_pieces(routes, coll.chunks_per_node, sol.seconds(pair_bytes), alpha)
    hops = sum(len(r) - 1 for paths in routes["pairs"].values() for r, _ in paths)
    sends = hops * P * coll.chunks_per_node
    require(sends * BYTES_PER_SEND, "--param pieces", f"{sends:,} sends of {P} pieces over the flow's paths")
    sched = emit(instance, routes, P)
    extra = {"optimum_s": sol.seconds(pair_bytes), "optimum_source": "concurrent flow LP (re-proved by its duals)",
             "lp_s": round(t_lp - t0, 4), "paths": sum(len(v) for v in routes["pairs"].values()),
             "depth_steps": depth_of(routes), "pieces": P, "grid": GRID}
    return Outcome(sched, "constructed", objective=float(sched.num_steps), units="steps",
                   found_by="flow-alltoall", build_s=time.perf_counter() - t0, extra=extra)


PARAMS = (
    Param("pieces", int, None, f"pipeline pieces per chunk and path (default: {DEPTH_FACTOR} per step of the "
                               f"deepest path, within a budget of {SEND_BUDGET:,} sends)", low=1, high=1_000_000),
)

PRODUCERS = [Producer("flow-alltoall", "flow", run,
                      "all-to-all, scatter, gather: the optimal concurrent flow (LP, one flow per source) "
                      "decomposed into paths, every pair's data pipelined along them", params=PARAMS)]
