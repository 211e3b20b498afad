"""BFB schedules (Zhao et al., NSDI 2025, Section 6 and Appendix D): the per-(node, step)
problems solved and assembled into the schedule, and the producers ``bfb-lp``, ``bfb-chunked`` and
``bfb-hetero``.

:func:`solve_bfb` solves LP (3) (:mod:`collsynth.formulations.bfb_lp`) for every node ``u`` and
step ``t = 1..diameter`` (independent problems: a process pool when ``jobs > 1``, and only
node 0 when the topology is a Cayley graph of the abelian group ``meta["cayley"]`` with
row-major ids: its translations are automorphisms, so node 0's solution translated by ``g``
is node ``g``'s). The LP floats become exact rational shares (one common denominator) and the
allgather schedule sends, in step ``t``, the piece of source ``v``'s shard chosen by the LP
from each in-neighbour ``w`` to ``u``. Then

- ``T_L = diameter`` steps; ``T_B = (M/B) (d/N) sum_t max_u U*[u, t]`` (eq. (4));
- BW-optimal iff ``U*[u, t] = |{v : dist(v -> u) = t}| / d`` for all ``u, t`` (Theorem 17);
- Moore-optimal iff the diameter equals the Moore bound for ``N`` nodes of degree ``d``.

Reduce-scatter is the time reversal of the allgather on the transposed topology (Appendix A),
allreduce is reduce-scatter then allgather.

Per-problem methods (``method``): ``lp`` (LP (3) through :func:`collsynth.solvers.backends.solve`;
problems where every source has one admissible in-neighbour are forced and skip the solver),
``flow`` (the exact optimum of Theorem 19 and an exact max-flow assignment, no LP solver),
``chunked`` / ``chunked-round`` (IP (12) exactly, or its LP relaxation rounded, Theorem 20) and
``hetero`` (LP (13), per-link alpha and bandwidth).
"""

from __future__ import annotations

import math
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow

from ...tens.status import Status
from ... import InputError
from ...limits import DEFAULT_TIME_LIMIT_S, Deadline
from ...formulations import bfb_chunked, bfb_hetero, bfb_lp
from ...formulations.bfb_chunked import chunk_schedule
from ...formulations.bfb_lp import StepLP, step_data
from ...instances.instance import Instance
from ...instances.symmetry import cayley_orders, coords, translate, translation_table
from ...instances.topology import Topology, moore_bound
from ...tens import schedule as sch
from ...tens.schedule import Schedule
from .. import backends
from ..producers import Options, Outcome, Param, Producer, Unsupported

METHODS = ("lp", "flow", "chunked", "chunked-round", "hetero")
STATUS_RANK = {Status.OPTIMAL: 0, Status.CONSTRUCTED: 0, Status.FEASIBLE: 1, Status.NO_SOLUTION: 2, Status.INFEASIBLE: 3, Status.ERROR: 4, Status.SKIPPED: 5}


@dataclass
class BFBResult:
    """An allgather BFB schedule on ``topology`` and what is known about it.

    ``U[(u, t)]`` is the exact largest link load into ``u`` in step ``t`` (in shards, also for
    the chunked methods) of the built schedule; ``step_max[t-1]`` its max over ``u``;
    ``T_B_units = (d/N) sum_t step_max`` is T_B in units of ``M/B``. ``hetero_time_s`` is LP (13)'s sum of step times.
    """

    schedule: Schedule
    steps: int
    degree: int
    nodes: int
    U: dict
    step_max: list
    T_B_units: Fraction
    bw_optimal: bool
    moore_optimal: bool
    orbit: bool
    problems: int
    solved: int
    status: str = Status.OPTIMAL
    solver: str = ""
    version: str = ""
    build_s: float = 0.0
    solve_s: float = 0.0
    wall_s: float = 0.0
    message: str = ""
    extra: dict = field(default_factory=dict)

    def summary(self) -> dict:
        """Plain figures for ``Outcome.extra`` and JSON."""
        return {
            "T_L": self.steps,
            "T_B": str(self.T_B_units),
            "T_B_float": float(self.T_B_units),
            "bw_optimal": self.bw_optimal,
            "moore_optimal": self.moore_optimal,
            "moore_bound": moore_bound(self.nodes, self.degree),
            "degree": self.degree,
            "U_step_max": [str(x) for x in self.step_max],
            "orbit": self.orbit,
            "problems": self.problems,
            "solved": self.solved,
            **self.extra,
        }


# ---- one problem ------------------------------------------------------------------------------

def _flow_shares(data: StepLP) -> tuple[np.ndarray, int, Fraction]:
    """Exact optimal shares of LP (3) by Theorem 19 and an integral max flow (no LP solver).

    ``U* = max_Y |{v : N(v) subset of Y}| / capacity(Y)`` over subsets ``Y`` of in-neighbours
    (a zeta transform over the ``2^k`` subsets); with ``U* = p/q`` the network source -> v
    (capacity q) -> w (q) -> sink (p * capacity[w]) has an integral flow of value ``q * |sources|``
    (scipy's max flow), and ``x[v, w] = flow / q``. Returns numerators, denominator q and U*.
    """
    nv, nw = len(data.sources), len(data.neighbours)
    if nv == 0:
        return np.zeros(0, np.int64), 1, Fraction(0)
    caps = data.capacity.astype(np.int64)
    masks = np.zeros(nv, np.int64)
    np.bitwise_or.at(masks, data.pair_v, (np.int64(1) << data.pair_w).astype(np.int64))
    f = np.bincount(masks, minlength=1 << nw).astype(np.int64)
    for k in range(nw):
        b = 1 << k
        f = f.reshape(-1, 2, b)
        f[:, 1, :] += f[:, 0, :]
        f = f.reshape(-1)
    Y = np.arange(1 << nw)
    capY = (((Y[:, None] >> np.arange(nw)[None, :]) & 1) * caps[None, :]).sum(1)
    ratio = np.where(capY > 0, f / np.maximum(capY, 1), np.where(f > 0, np.inf, 0.0))
    y = int(np.argmax(ratio))
    best = Fraction(int(f[y]), int(capY[y]))
    p, q = best.numerator, best.denominator
    S, T = 0, nv + nw + 1
    rows = np.concatenate([np.zeros(nv, np.int64), 1 + data.pair_v, 1 + nv + np.arange(nw)])
    cols = np.concatenate([1 + np.arange(nv), 1 + nv + data.pair_w, np.full(nw, T)])
    cap = np.concatenate([np.full(nv, q), np.full(len(data.pair_v), q), p * caps]).astype(np.int32)
    g = csr_matrix((cap, (rows, cols)), shape=(T + 1, T + 1))
    res = maximum_flow(g, S, T)
    if res.flow_value != q * nv:
        raise RuntimeError(f"BFB flow at u={data.node} t={data.step} moved {res.flow_value} of {q * nv}")
    fl = res.flow.tocsr()
    num = np.asarray(fl[1 + data.pair_v, 1 + nv + data.pair_w]).ravel().astype(np.int64)
    return num, q, best


def _forced(data: StepLP) -> tuple[np.ndarray, int]:
    return np.ones(len(data.pair_v), np.int64), 1


def _build_step_model(data: StepLP, method: str, settings: dict):
    """The Pyomo model of one (u, t) problem for ``method`` (LP (3), IP (12) or LP (13))."""
    if method == "lp":
        return bfb_lp.build_step(data)
    if method in ("chunked", "chunked-round"):
        return bfb_chunked.build_step(data, settings["chunks"], relax=(method == "chunked-round"))
    if method == "hetero":
        return bfb_hetero.build_step(data, settings["alpha"][data.node], settings["bandwidth"][data.node],
                                     settings["shard_bytes"])
    raise ValueError(f"unknown BFB method {method!r}")


def _solve_model(model, settings: dict):
    """Solve one problem's model as the run's request asks (by the run's deadline)."""
    return backends.solve(model, settings["request"])


def _refine_hetero(data: StepLP, model, settings: dict) -> tuple[np.ndarray, int, float]:
    """Exact shares of an LP (13) solution, dropping idle links that set the step time.

    Zhao et al., NSDI 2025, Appendix D.3: a link whose alpha alone sets tau although it
    carries nothing should not be paid for: drop it (if every source keeps a route) and solve
    again while tau improves. Returns ``(num, den, tau)`` over the full pair list.
    """
    _, _, x = bfb_lp.values(model)
    tau = bfb_hetero.bound(model)
    data_h = data
    alpha = np.asarray(settings["alpha"][data.node], float)
    bw = np.asarray(settings["bandwidth"][data.node], float)
    for _ in range(len(data.neighbours)):
        load = np.bincount(data_h.pair_w, weights=x, minlength=len(data.neighbours))
        idle = np.flatnonzero((load < 1e-12) & (alpha >= tau * (1 - 1e-9)) & np.isin(np.arange(len(alpha)), data_h.pair_w))
        if not len(idle):
            break
        keep = ~np.isin(data_h.pair_w, idle)
        if len(np.unique(data_h.pair_v[keep])) < len(data.sources):
            break
        trial = StepLP(data.node, data.step, data.sources, data.neighbours, data.capacity,
                       data_h.pair_v[keep], data_h.pair_w[keep])
        m2 = bfb_hetero.build_step(trial, alpha, bw, settings["shard_bytes"])
        r2 = _solve_model(m2, {**settings, "gap": None})
        if not r2.has_solution or bfb_hetero.bound(m2) >= tau:
            break
        data_h, tau = trial, bfb_hetero.bound(m2)
        _, _, x = bfb_lp.values(m2)
    num, den = bfb_lp.rationalize(data_h.pair_v, x)
    if data_h is not data:  # back to the full pair list (dropped pairs carry 0)
        full = np.zeros(len(data.pair_v), np.int64)
        pos = {(a, b): i for i, (a, b) in enumerate(zip(data.pair_v.tolist(), data.pair_w.tolist()))}
        for a, b, val in zip(data_h.pair_v.tolist(), data_h.pair_w.tolist(), num.tolist()):
            full[pos[(a, b)]] = val
        num = full
    return num, den, tau


def _shares(data: StepLP, model, method: str, settings: dict, out: dict) -> tuple[np.ndarray, int]:
    """Exact shares ``(num, den)`` of a solved (u, t) model."""
    if method == "lp":
        _, _, x = bfb_lp.values(model)
        return bfb_lp.rationalize(data.pair_v, x)
    if method == "chunked":
        return bfb_chunked.integer_shares(model), settings["chunks"]
    if method == "chunked-round":
        return bfb_chunked.round_relaxation(model), settings["chunks"]
    num, den, out["tau"] = _refine_hetero(data, model, settings)
    return num, den


def solve_problem(data: StepLP, method: str, settings: dict) -> dict:
    """Solve one (u, t) problem with ``method``; return exact shares and solver figures.

    The result has ``v, w`` (node ids of each admissible pair), ``num``/``den`` (exact shares,
    in chunks of ``1/den`` of a shard), ``status``, ``build_s``, ``solve_s``, ``solver``,
    ``version``, ``solved`` (1 if a solver ran) and method-specific values.
    """
    v = data.sources[data.pair_v]
    w = data.neighbours[data.pair_w]
    out: dict[str, Any] = {"node": data.node, "step": data.step, "v": v, "w": w, "status": Status.OPTIMAL,
                           "build_s": 0.0, "solve_s": 0.0, "solver": "", "version": "", "solved": 0}
    if len(v) == 0:
        out.update(num=np.zeros(0, np.int64), den=1)
        return out
    if method == "flow" or (method == "lp" and data.trivial):  # trivial: each source has one in-neighbour
        num, den = _flow_shares(data)[:2] if method == "flow" else _forced(data)
        out.update(num=num, den=den)
        return out
    t0 = time.perf_counter()
    model = _build_step_model(data, method, settings)
    build = time.perf_counter() - t0
    res = _solve_model(model, settings)
    out.update(status=res.status, build_s=build + res.build_s, solve_s=res.solve_s, solver=res.solver,
               version=res.version, solved=1, objective=res.objective)
    if not res.has_solution:
        out["message"] = res.message
        if method == "lp":  # never leave a hole: the exact combinatorial optimum is always available
            num, den, _ = _flow_shares(data)
            out.update(num=num, den=den, message=res.message + "; exact flow assignment used")
            return out
        raise RuntimeError(f"BFB {method} at u={data.node} t={data.step}: {res.status} {res.message}")
    num, den = _shares(data, model, method, settings, out)
    out.update(num=np.asarray(num, np.int64), den=int(den))
    return out


def _solve_batch(args) -> list[dict]:
    batch, method, settings = args
    return _solve_in_turn(batch, method, settings)


def _solve_in_turn(problems: list[StepLP], method: str, settings: dict) -> list[dict]:
    """The problems one after another, stopping past the request's deadline."""
    deadline = settings["request"].deadline
    out = []
    for i, p in enumerate(problems):
        deadline.check("BFB per-(node, step) problems", f"{i} of {len(problems)} solved")
        out.append(solve_problem(p, method, settings))
    return out


# ---- every (node, step) solved, assembled into the schedule ---------------------------------

def solve_bfb(
    topology: Topology,
    *,
    method: str = "lp",
    solver: str = "highs",
    gap: float | None = None,
    threads: int = 1,
    seed: int = 0,
    jobs: int = 1,
    orbit: str | bool = "auto",
    chunks_per_node: int = 1,
    message_bytes: float | None = None,
    chunks: int | None = None,
    deadline: Deadline | None = None,
) -> BFBResult:
    """The BFB allgather schedule of ``topology`` (Zhao et al., NSDI 2025, Section 6.1 and
    Appendix D).

    ``orbit``: ``"auto"`` solves node 0 only when :func:`cayley_orders` confirms the
    translations, ``True`` requires it, ``False`` solves every node. ``jobs > 1`` solves the
    problems in a process pool. ``chunks`` is K for the chunked methods (IP (12)); the
    schedule is then in whole chunks (``chunks_per_node = K``). ``message_bytes`` is needed by
    ``hetero`` (the shard size enters LP (13)). Each solve gets at most what is left before
    ``deadline`` (None: :data:`~collsynth.limits.DEFAULT_TIME_LIMIT_S` from the call), and
    past it the remaining problems are not started, nor the orbit's translation finished
    (:class:`~collsynth.limits.TimeLimitReached`).
    """
    t_wall = time.perf_counter()
    topo = topology
    T = _checked_steps(topo, method)
    D = topo.distances
    N, d = len(topo.npus), topo.out_degree_range[1]
    orders = _orbit_orders(topo, method, orbit)
    solve_nodes = [0] if orders is not None else list(topo.npus)
    deadline = deadline if deadline is not None else Deadline.after(DEFAULT_TIME_LIMIT_S)
    settings = {"request": backends.Request(solver, deadline, gap=gap, threads=threads, seed=seed),
                **_method_settings(topo, method, solve_nodes, chunks or chunks_per_node, message_bytes)}
    problems = [step_data(topo, u, t, D) for u in solve_nodes for t in range(1, T + 1)]
    results = _solve_all(problems, method, settings, jobs)
    v, w, u, t, num, den = _common_denominator(results)
    U, step_max = _loads(topo, v, w, u, t, num, den, T)
    for uu in solve_nodes:
        for s_ in range(1, T + 1):
            U.setdefault((uu, s_), Fraction(0))
    if orders is not None:
        (v, w, u, t, num), U = _translate_solution(topo, orders, (v, w, u, t, num), U, T, deadline)
    unit = int(settings.get("chunks", 1))
    sched = _bfb_schedule((v, w, u, t, num, den), topo.size, unit, chunks_per_node)
    summary = _summary(results, method, T, unit)
    return BFBResult(
        schedule=sched, steps=T, degree=d, nodes=N, U=U, step_max=step_max,
        T_B_units=Fraction(d, N) * sum(step_max, Fraction(0)), bw_optimal=_bw_optimal(topo, U, D, T, d),
        moore_optimal=(T == moore_bound(N, d)), orbit=orders is not None, problems=len(problems),
        solved=sum(r["solved"] for r in results), build_s=sum(r["build_s"] for r in results),
        solve_s=sum(r["solve_s"] for r in results), wall_s=time.perf_counter() - t_wall, **summary,
    )


def _checked_steps(topo: Topology, method: str) -> int:
    """The BFB step count (the diameter) of ``topo``, after checking the method and that the
    topology is switchless and strongly connected."""
    if method not in METHODS:
        raise InputError("method", f"expected one of {', '.join(METHODS)}, got {method!r}")
    if topo.switches:
        raise Unsupported("BFB needs a direct-connect topology (no switches)")
    T = topo.diameter
    if T < 0:
        raise Unsupported("BFB needs a strongly connected topology")
    return T


def _bfb_schedule(sends: tuple, size: int, unit: int, chunks_per_node: int):
    """The schedule of the solved shares ``sends = (v, w, u, t, num, den)``: in whole chunks
    when ``unit`` (K) > 1 (share num/den of a shard = num/den*K chunks; chunk ids v*K + j),
    else in pieces of ``chunks_per_node`` chunks per node."""
    v, w, u, t, num, den = sends
    if unit > 1:
        return _chunked_schedule(v, w, u, t, num, den, size, unit)
    return bfb_lp.pieces_schedule(v, w, u, t, num, den, size, chunks_per_node)


def _orbit_orders(topo: Topology, method: str, orbit: str | bool):
    """The verified translation orders when the problems may be solved for node 0 only."""
    orders = cayley_orders(topo) if orbit in ("auto", True, "true", "yes") else None
    if method == "hetero" and orders is not None:
        la = topo.link_arrays
        if np.ptp(la.alpha) > 0 or np.ptp(la.bandwidth / la.count) > 0:
            orders = None  # translations must also preserve link costs
    if orbit is True and orders is None:
        raise Unsupported("orbit solving asked but the topology has no verified Cayley translations")
    return orders


def _method_settings(topo: Topology, method: str, solve_nodes: list[int], chunks: int,
                     message_bytes: float | None) -> dict:
    """What the chunked (K) and heterogeneous (link costs, shard size) methods need."""
    if method in ("chunked", "chunked-round"):
        if int(chunks) < 1:
            raise InputError("chunks", f"expected a positive integer, got {chunks}")
        return {"chunks": int(chunks)}
    if method == "hetero":
        if message_bytes is None:
            raise InputError("message_bytes", "the heterogeneous BFB LP (13) needs the message size")
        la = topo.link_arrays
        return {"shard_bytes": float(message_bytes) / len(topo.npus),
                "alpha": {u: la.alpha[la.dst == u] for u in solve_nodes},
                "bandwidth": {u: la.bandwidth[la.dst == u] for u in solve_nodes}}
    return {}


def _solve_all(problems: list[StepLP], method: str, settings: dict, jobs: int) -> list[dict]:
    """Every (u, t) problem solved, in a process pool when ``jobs > 1`` (they are independent)."""
    if jobs > 1 and len(problems) > 1:
        size = max(1, len(problems) // (4 * jobs))
        batches = [problems[i:i + size] for i in range(0, len(problems), size)]
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            return [r for part in pool.map(_solve_batch, [(b, method, settings) for b in batches]) for r in part]
    return _solve_in_turn(problems, method, settings)


def _common_denominator(results: list[dict]):
    """The shares of every problem as columns ``v, w, u, t, num`` over one denominator."""
    den = 1
    for r in results:
        den = den * r["den"] // math.gcd(den, r["den"])
    cols = {k: [] for k in ("v", "w", "u", "t", "num")}
    for r in results:
        n = len(r["v"])
        cols["v"].append(r["v"])
        cols["w"].append(r["w"])
        cols["u"].append(np.full(n, r["node"], np.int64))
        cols["t"].append(np.full(n, r["step"], np.int64))
        cols["num"].append(np.asarray(r["num"], np.int64) * (den // r["den"]))
    v, w, u, t, num = (np.concatenate(cols[k]) if cols[k] else np.zeros(0, np.int64) for k in ("v", "w", "u", "t", "num"))
    return v, w, u, t, num, den


def _translate_solution(topo: Topology, orders, cols: tuple, U: dict, T: int,
                        deadline: Deadline) -> tuple[tuple, dict]:
    """Node 0's shares translated to every node g (``x -> x + g`` in the Cayley group), by
    ``deadline`` (checked before and between the translations)."""
    deadline.check("BFB orbit translation", "node 0's problems solved")
    v, w, u, t, num = cols
    G = np.arange(topo.size, dtype=np.int64)
    reps = len(G)
    if topo.size <= 8192:  # table trans[g, x] = x + g
        table = translation_table(orders)
        gi = np.repeat(G, len(v))
        v, w, u = (table[gi, np.tile(a, reps)] for a in (v, w, u))
    else:
        gg = np.repeat(coords(G, orders), len(v), axis=0)
        v, w, u = (translate(np.tile(a, reps), gg, orders) for a in (v, w, u))
    deadline.check("BFB orbit translation", "shares translated")
    U = {(g, s): U[(0, s)] for g in G.tolist() for s in range(1, T + 1)}
    return (v, w, u, np.tile(t, reps), np.tile(num, reps)), U


def _bw_optimal(topo: Topology, U: dict, D: np.ndarray, T: int, d: int) -> bool:
    """Theorem 19: BW-optimal iff ``U[u, t] = |{v : dist(v, u) = t}| / d`` for every u and t."""
    npus = np.asarray(topo.npus)
    col = D[npus][:, npus]
    for j, uu in enumerate(npus.tolist()):
        received = np.bincount(col[:, j], minlength=T + 1)
        if any(U.get((uu, s), Fraction(0)) != Fraction(int(received[s]), d) for s in range(1, T + 1)):
            return False
    return True


def _summary(results: list[dict], method: str, T: int, unit: int) -> dict:
    """The worst status, the solver's name and version, the messages and method extras."""
    extra: dict[str, Any] = {"method": method}
    if method == "hetero":
        taus: dict[int, list] = {}
        for r in results:
            taus.setdefault(r["step"], []).append(r.get("tau") or 0.0)
        extra["hetero_step_s"] = [max(taus.get(s, [0.0])) for s in range(1, T + 1)]
        extra["hetero_time_s"] = float(sum(extra["hetero_step_s"]))
    if unit > 1:
        extra["chunks"] = unit
    return {
        "status": max((r["status"] for r in results), key=lambda s: STATUS_RANK.get(s, 9), default=Status.OPTIMAL),
        "solver": next((r["solver"] for r in results if r["solver"]), ""),
        "version": next((r["version"] for r in results if r["version"]), ""),
        "message": "; ".join(sorted({r["message"] for r in results if r.get("message")}))[:500],
        "extra": extra,
    }


def _loads(topo: Topology, v, w, u, t, num, den, T) -> tuple[dict, list]:
    """Exact largest in-link load ``U[(u, t)]`` (shards) and its max per step."""
    la = topo.link_arrays
    U: dict[tuple[int, int], Fraction] = {}
    step_max = [Fraction(0)] * T
    if len(v) == 0:
        return U, step_max
    key = np.stack([u, t, w], 1)
    uniq, inv = np.unique(key, axis=0, return_inverse=True)
    inv = inv.ravel()
    tot = np.zeros(len(uniq), dtype=object)
    np.add.at(tot, inv, num.astype(object))
    cap = la.count[la.lookup(uniq[:, 2], uniq[:, 0])]
    best: dict[tuple[int, int], Fraction] = {}
    for (uu, s, _), a, c in zip(uniq.tolist(), tot.tolist(), cap.tolist()):
        val = Fraction(int(a), den * int(c))
        if val > best.get((uu, s), Fraction(-1)):
            best[(uu, s)] = val
    for (uu, s), val in best.items():
        U[(uu, s)] = val
        if val > step_max[s - 1]:
            step_max[s - 1] = val
    return U, step_max


def _chunked_schedule(v, w, u, t, num, den, nodes: int, K: int) -> Schedule:
    """Whole-chunk sends: ``w -> u`` carries ``num * K / den`` of the K chunks of ``v``'s shard."""
    y = np.asarray(num, np.int64) * K
    if (y % den).any():
        raise ValueError("chunked shares are not whole chunks")
    return chunk_schedule(v, w, u, t, y // den, K, nodes)


# ---- collectives ------------------------------------------------------------------------------

def bfb_collective(topology: Topology, kind: str, **kw) -> tuple[Schedule, list[BFBResult]]:
    """The BFB schedule of ``kind`` (allgather, reduce_scatter, allreduce) on ``topology``.

    Reduce-scatter: the allgather on ``topology.transpose()`` reversed (Appendix A, Theorem 3);
    allreduce: reduce-scatter then allgather. Returns the schedule and the BFB results used.
    """
    if kind == "allgather":
        r = solve_bfb(topology, **kw)
        return r.schedule, [r]
    if kind == "reduce_scatter":
        r = solve_bfb(topology.transpose(), **kw)
        return sch.reverse(r.schedule), [r]
    if kind == "allreduce":
        rt = solve_bfb(topology.transpose(), **kw)
        ra = solve_bfb(topology, **kw)
        return sch.concat(sch.reverse(rt.schedule), ra.schedule, "allreduce"), [rt, ra]
    raise Unsupported(f"BFB builds allgather, reduce_scatter and allreduce, not {kind}")


def _check_instance(instance: Instance) -> None:
    if instance.concurrent:
        raise Unsupported("BFB handles one collective at a time")
    coll = instance.collective
    if coll.kind not in ("allgather", "reduce_scatter", "allreduce"):
        raise Unsupported(f"BFB builds allgather, reduce_scatter and allreduce, not {coll.kind}")
    if tuple(coll.nodes) != tuple(instance.topology.npus):
        raise Unsupported("BFB needs every live node to take part in the collective")


def _outcome(instance: Instance, options: Options, method: str) -> Outcome:
    """The producers' run: the BFB schedule of the instance's collective by ``method`` (module
    doc; Zhao et al., "Efficient Direct-Connect Topologies for Collective Communications", NSDI
    2025, Section 6), its ``T_L`` and ``T_B`` (eq. (4)) and what solving the per-(node, step)
    problems took."""
    _check_instance(instance)
    kw = _bfb_options(instance, options, method)
    schedule, parts = bfb_collective(instance.topology, instance.collective.kind, **kw)
    extra = _bfb_extra(instance, parts, method, kw)
    T_B_units = sum((r.T_B_units for r in parts), Fraction(0))
    status = max((r.status for r in parts), key=lambda s: STATUS_RANK.get(s, 9))
    return Outcome(
        schedule=schedule, status=status, objective=float(T_B_units),
        bound=float(T_B_units) if method in ("lp", "flow", "hetero") else None,
        units="M/B", build_s=sum(r.build_s for r in parts), solve_s=sum(r.solve_s for r in parts),
        solver=parts[-1].solver or (options.solver if parts[-1].solved else ""), version=parts[-1].version,
        message="; ".join(r.message for r in parts if r.message), extra=extra,
        found_by=f"bfb-{method}", solver_status=status if any(r.solved for r in parts) else "",
    )


def _bfb_options(instance: Instance, options: Options, method: str) -> dict[str, Any]:
    """The keywords of :func:`bfb_collective` for the run's options and ``method`` (the chunked
    methods take the collective's chunks as the IP's, one chunk a node to the schedule)."""
    coll = instance.collective
    p = dict(options.params)
    kw: dict[str, Any] = dict(
        method=method, solver=options.solver, gap=options.gap,
        threads=options.threads, seed=options.seed, jobs=int(p.get("jobs", 1)), deadline=options.timer(),
        orbit={"auto": "auto", "true": True, "false": False}[str(p.get("orbit", "auto")).lower()],
        chunks_per_node=coll.chunks_per_node, message_bytes=coll.message_bytes,
    )
    if method in ("chunked", "chunked-round"):
        kw["chunks"] = coll.chunks_per_node
        kw["chunks_per_node"] = 1
    return kw


def _bfb_extra(instance: Instance, parts: list, method: str, kw: dict[str, Any]) -> dict[str, Any]:
    """The row's ``extra``: ``T_L`` (steps and seconds at the largest alpha), ``T_B`` (units of
    M/B and seconds at the slowest link times the degree), the optimality verdicts (Theorem 17,
    the Moore bound), the per-step maxima ``U*`` and the problems solved; for ``chunked``, both
    answers of Theorem 20 (:func:`_theorem20`)."""
    coll, la = instance.collective, instance.topology.link_arrays
    b = float((la.bandwidth / la.count).min()) if len(la) else 0.0  # slowest single link
    alpha = float(la.alpha.max()) if len(la) else 0.0
    T_L = sum(r.steps for r in parts)
    T_B_units = sum((r.T_B_units for r in parts), Fraction(0))
    B = b * parts[-1].degree
    extra: dict[str, Any] = {
        "T_L": T_L,
        "T_L_s": T_L * alpha,
        "T_B": str(T_B_units),
        "T_B_units_M_over_B": float(T_B_units),
        "T_B_s": float(T_B_units) * coll.message_bytes / B if B else None,
        "bw_optimal": all(r.bw_optimal for r in parts),
        "moore_optimal": all(r.moore_optimal for r in parts),
        "U_step_max": [[str(x) for x in r.step_max] for r in parts],
        "orbit": parts[-1].orbit,
        "problems": sum(r.problems for r in parts),
        "solved": sum(r.solved for r in parts),
        "method": method,
    }
    if method == "chunked":  # both answers of Theorem 20
        extra.update(_theorem20(instance, parts, kw, T_L))
    if method == "chunked-round":
        extra["T_B_rounded"] = str(T_B_units)
    if method == "hetero":
        extra["hetero_time_s"] = sum(r.extra.get("hetero_time_s", 0.0) for r in parts)
    return extra


def _theorem20(instance: Instance, parts: list, kw: dict[str, Any], T_L: int) -> dict[str, str]:
    """Both answers of Theorem 20 (Zhao et al., NSDI 2025) beside the exact IP's: the LP
    relaxation rounded (``T_B_rounded``), the LP's own ``T_B`` (``T_B_lp``) and the bound
    ``T_B_lp + d T_L / (N K)`` (``theorem20_bound``, ``K`` chunks a node)."""
    topo, kind = instance.topology, instance.collective.kind
    N, d = parts[-1].nodes, parts[-1].degree
    _, rparts = bfb_collective(topo, kind, **dict(kw, method="chunked-round"))
    _, lparts = bfb_collective(topo, kind, **dict(kw, method="flow", chunks=None, chunks_per_node=1))
    lp = sum((r.T_B_units for r in lparts), Fraction(0))
    K = instance.collective.chunks_per_node
    return {"T_B_rounded": str(sum((r.T_B_units for r in rparts), Fraction(0))), "T_B_lp": str(lp),
            "theorem20_bound": str(lp + Fraction(d * T_L, N * K))}


def _run_lp(instance: Instance, options: Options) -> Outcome:
    method = str(options.params.get("method", "lp"))
    if method not in ("lp", "flow"):
        raise InputError("params.method", f"bfb-lp takes method lp or flow, got {method!r}")
    return _outcome(instance, options, method)


def _run_chunked(instance: Instance, options: Options) -> Outcome:
    mode = str(options.params.get("mode", "exact"))
    if mode not in ("exact", "round"):
        raise InputError("params.mode", f"bfb-chunked takes mode exact or round, got {mode!r}")
    return _outcome(instance, options, "chunked" if mode == "exact" else "chunked-round")


def _run_hetero(instance: Instance, options: Options) -> Outcome:
    return _outcome(instance, options, "hetero")


COMMON_PARAMS = (
    Param("jobs", int, 1, "processes solving the per-(node, step) problems", low=1),
    Param("orbit", ("auto", "true", "false"), "auto", "solve node 0 only and translate (auto: when the topology's "
          "Cayley translations are verified)"),
)

PRODUCERS = [
    Producer("bfb-lp", "bfb", _run_lp, "BFB schedule: LP (3) per (node, step), exact rational shares (Zhao et al., NSDI 2025, §6.1)",
             uses_solver=True,
             params=(Param("method", ("lp", "flow"), "lp", "LP (3), or its max-flow form"),) + COMMON_PARAMS),
    Producer("bfb-chunked", "bfb", _run_chunked,
             "BFB with integer shares of K = chunks_per_node chunks: IP (12) exact, and the rounded LP (Thm 20)",
             uses_solver=True,
             params=(Param("mode", ("exact", "round"), "exact", "IP (12), or the LP rounded (Thm 20)"),) + COMMON_PARAMS),
    Producer("bfb-hetero", "bfb", _run_hetero, "BFB for per-link alpha and bandwidth: LP (13) (Zhao et al., NSDI 2025 App. D.3)",
             uses_solver=True, params=COMMON_PARAMS),
]
