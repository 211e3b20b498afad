"""Drivers: ways to run a TEN formulation that keep big instances tractable (TACOS, seed 001).

Every driver takes an instance, a formulation module (the interface of
:mod:`collsynth.formulations`: ``build(instance, horizon, state=None, **params)``,
``extract(model)``; the TEN helpers of :mod:`collsynth.formulations.ten_ilp` read the solution
back) and :class:`~collsynth.solvers.producers.Options`, and returns an
:class:`~collsynth.solvers.producers.Outcome` whose objective and bound are TEN timesteps:

- :func:`horizon_search`: horizons from the lower bound upward (TACOS V-A: "t_f = diameter,
  diameter + 1, ... until all arrive"), or a binary search between the lower bound and the
  recovery schedule's length; with a persistent solver (HiGHS, Gurobi) one model built at the
  largest horizon is re-solved with the later sends fixed to zero instead of being rebuilt.
- :func:`early_stop`: solve one horizon under the time limit, keep the incumbent, deliver the
  missing chunks along shortest paths after it without breaking link capacity
  (:func:`recover`), and report the optimality gap against the lower bound honestly.
- :func:`time_cluster`: windows of k timesteps, each solved from the holdings the previous one
  reached, until the postcondition holds (TACOS time clustering).

Warm starts (``warm=True``, the default for formulations that allow recovery): horizon search
and early-stop first run time clustering with a share of the time limit (``warm_share``,
default 0.4). Its schedule is an upper bound (optimal outright when it meets the lower bound),
and cut to a horizon it is a feasible point of that horizon's arrivals ILP (:func:`set_start`),
passed to the solver as a MIP start (``backends.solve(..., warm_start=True)``). So the ILP
always starts from an incumbent, and the drivers never return anything longer than time
clustering or the recovery schedule.

Statuses: ``optimal`` only when the number of timesteps is proven minimal (every smaller
horizon proven unable to deliver everything, or the lower bound met); ``feasible`` otherwise.
Every outcome says which method found its schedule (``found_by``): ``ilp@h=H`` (the ILP at
horizon H delivered everything), ``ilp@h=H+recovery`` (its incumbent completed by
shortest-path recovery), ``warm-start@h=H+recovery`` (the ILP did not improve on its
warm start), ``time-cluster`` (``+recovery``) or ``recovery``; and ``solver_status``, the
backend's own status on the last solve.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyomo.environ as pe

from ...formulations import ten_ilp as T
from ...tens import ten
from .. import backends
from ..producers import Options, Outcome

DRIVERS = ("horizon", "early-stop", "time-cluster")
DRIVER_PARAMS = {"binary", "persistent", "window", "horizon", "max_horizon", "lookahead", "warm", "warm_share"}
WARM_SHARE = 0.4  # share of the time limit the warm-starting time clustering may use


@dataclass
class _Clock:
    limit: float | None
    start: float

    def left(self) -> float | None:
        if self.limit is None:
            return None
        return max(0.5, self.limit - (time.perf_counter() - self.start))

    def out(self) -> bool:
        return self.limit is not None and time.perf_counter() - self.start >= self.limit


def split_params(params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(driver parameters, formulation parameters) from ``--param`` values."""
    drv = {k: v for k, v in params.items() if k in DRIVER_PARAMS}
    form = {k: v for k, v in params.items() if k not in DRIVER_PARAMS}
    return drv, form


# ---- recovery: shortest-path delivery of whatever is missing ---------------------------------

def recover(data: ten.TenData, held: np.ndarray, start: int, avail: np.ndarray | None = None) -> np.ndarray:
    """Deliver every missing postcondition pair along delay-shortest paths after ``start``.

    ``held`` (bool [chunk, node], the model's direction) is what is held at the end of
    timestep ``start``. Each missing pair (chunk c, node n) is routed from the holder that can
    deliver it earliest; every hop takes the earliest start timestep after the chunk is at the
    hop's source and at which the link pair has a free unit of capacity for all ``delay``
    timesteps it occupies (TACOS early termination). Returns rows ``(chunk, pair, arrival)``.
    ``avail[c, n]`` optionally gives when a holder got the chunk (default: ``start``).
    """
    import scipy.sparse as sp
    from scipy.sparse.csgraph import dijkstra

    C, S = held.shape
    need = data.post & ~held
    if not need.any():
        return np.zeros((0, 3), np.int64)
    pair_of = {(int(u), int(v)): l for l, (u, v) in enumerate(zip(data.src.tolist(), data.dst.tolist()))}
    ngroups = data.delay.shape[0]
    dist, pred = [], []
    for g in range(ngroups):
        adj = sp.csr_matrix((data.delay[g].astype(float), (data.src, data.dst)), shape=(S, S))
        d, p = dijkstra(adj, directed=True, return_predecessors=True)
        dist.append(d)
        pred.append(p)
    when = np.where(held, start, -1).astype(np.int64)
    if avail is not None:
        when = np.where(held, np.minimum(when, avail), -1)
    load: dict[tuple[int, int], int] = {}
    rows: list[tuple[int, int, int]] = []
    cs, ns = np.nonzero(need)
    order = np.lexsort((ns, cs))
    for i in order:
        c, n = int(cs[i]), int(ns[i])
        if when[c, n] >= 0:
            continue
        g = int(data.group[c])
        holders = np.flatnonzero(when[c] >= 0)
        eta = when[c, holders] + dist[g][holders, n]
        h = int(holders[np.argmin(eta)])
        if not math.isfinite(float(dist[g][h, n])):
            raise RuntimeError(f"chunk {c} cannot reach node {n}")
        path = [n]
        while path[-1] != h:
            path.append(int(pred[g][h, path[-1]]))
        path.reverse()
        t = int(when[c, h])
        for u, v in zip(path[:-1], path[1:]):
            if when[c, v] >= 0:  # already there (an earlier route passed by)
                t = int(when[c, v])
                continue
            l = pair_of[(u, v)]
            k = int(data.delay[g, l])
            cap = int(data.capacity[l])
            s = max(t + 1, start + 1)
            while any(load.get((l, tau), 0) >= cap for tau in range(s, s + k)):
                s += 1
            for tau in range(s, s + k):
                load[(l, tau)] = load.get((l, tau), 0) + 1
            t = s + k - 1
            rows.append((c, l, t))
            when[c, v] = t
    return np.array(rows, np.int64).reshape(-1, 3)


def recovery_schedule(instance, timestep=None):
    """The pure shortest-path delivery schedule from the precondition: (data, rows, steps).

    Its length is the "recovery bound" early termination and time clustering never exceed.
    """
    data = ten.prepare(instance, 1, None, timestep)
    rows = recover(data, data.pre, 0)
    steps = int(rows[:, 2].max()) if len(rows) else 0
    return data, rows, steps


# ---- helpers -------------------------------------------------------------------------------

def _outcome(schedule, status, steps, bound, stats, message="", extra=None, found_by="") -> Outcome:
    gap = None
    if steps is not None and bound is not None and steps > 0:
        gap = max(0.0, (steps - bound) / steps)
    return Outcome(
        schedule=schedule, status=status, objective=None if steps is None else float(steps),
        bound=None if bound is None else float(bound), gap=gap, units="timesteps",
        build_s=stats["build_s"], solve_s=stats["solve_s"], solver=stats.get("solver", ""),
        version=stats.get("version", ""), nodes=stats.get("nodes"), message=message,
        extra=dict(extra or {}), found_by=found_by if schedule is not None else "",
        solver_status=stats.get("solver_status", ""),
    )


def _stats(solver):
    return {"build_s": 0.0, "solve_s": 0.0, "solver": backends.canonical(solver), "version": "", "nodes": None,
            "solver_status": ""}


def _add(stats, res: backends.SolveResult):
    stats["build_s"] += res.build_s
    stats["solve_s"] += res.solve_s
    stats["version"] = res.version or stats["version"]
    stats["solver_status"] = res.status
    if res.nodes is not None:
        stats["nodes"] = (stats["nodes"] or 0) + res.nodes


def _solve(model, options: Options, clock: _Clock, stats, session=None, warm_start=False) -> backends.SolveResult:
    res = backends.solve(model, options.solver, time_limit=clock.left(), gap=options.gap,
                         threads=options.threads, seed=options.seed, session=session, warm_start=warm_start)
    _add(stats, res)
    return res


def _lower_bound(formulation, instance, form_params) -> int:
    fn = getattr(formulation, "lower_bound", T.lower_bound)
    return int(fn(instance, timestep=form_params.get("timestep")))


def _complete(model, res) -> bool:
    return res.has_solution and res.objective is not None and T.arrivals_count(model) >= T.required(model)


def _fail(res: backends.SolveResult, stats, lb, extra) -> Outcome:
    status = res.status if res.status in ("error", "skipped", "infeasible") else "no-solution"
    return _outcome(None, status, None, lb, stats, res.message or status, extra)


# ---- warm starts -----------------------------------------------------------------------------

@dataclass
class _Known:
    """A complete, valid schedule in the model's direction: rows ``(chunk, pair, arrival)``."""

    how: str
    data: ten.TenData
    rows: np.ndarray
    steps: int
    found_by: str


def _known(how, data, rows, found_by: str | None = None) -> _Known:
    rows = np.asarray(rows, np.int64).reshape(-1, 3)
    return _Known(how, data, rows, int(rows[:, 2].max()) if len(rows) else 0, found_by or how)


def warm_ok(formulation, form_params) -> bool:
    """Whether the drivers may warm-start ``formulation`` from a time-clustering schedule: its
    windows and shortest-path recovery obey its rules (``RECOVERY_VALID``), it opts in
    (``WARM_START``, default True) and the objective is ``arrivals``."""
    return (recovery_valid(formulation) and bool(getattr(formulation, "WARM_START", True))
            and form_params.get("objective", "arrivals") == "arrivals")


def set_start(model, rows: np.ndarray, upto: int | None = None) -> dict[str, Any] | None:
    """Set the model's variables to a schedule truncated at timestep ``upto`` (a MIP start).

    ``rows`` (``(chunk, pair, arrival)``, the model's direction and indexing, e.g. a
    time-clustering or recovery schedule) is cut to the sends arriving by ``upto`` (default:
    the model's horizon); a send is kept only when the model has its variable and its source
    holds the chunk when it starts (in arrival order, so dropping one drops what depended on
    it). ``sent`` is 1 on the kept sends, ``hold[c, n, t]`` is 1 from the kept arrival on: the
    holdings they imply. A truncated valid schedule keeps link capacity and the one-arrival
    rule, so this is a feasible point of the arrivals-objective ILP (TACOS V-A). Every other
    variable of ``sent``/``hold`` is set to 0 (fixed variables are left alone). Returns
    ``{"sends", "dropped", "objective"}`` (the active objective at the start), or None when the
    model is not an arrivals model of the TEN family.
    """
    data: ten.TenData | None = getattr(model, "_ten", None)
    if data is None or getattr(model, "_objective", "arrivals") != "arrivals" or not hasattr(model, "sent"):
        return None
    h = data.horizon if upto is None else int(upto)
    rows = np.asarray(rows, np.int64).reshape(-1, 3)
    rows = rows[rows[:, 2] <= h]
    rows = rows[np.argsort(rows[:, 2], kind="stable")]
    C, S = data.pre.shape
    when = np.where(data.pre, 0, ten.INF).astype(np.int64)
    kept = []
    sent = model.sent
    for c, l, t in rows.tolist():
        k = int(data.delay[data.group[c], l])
        u, v = int(data.src[l]), int(data.dst[l])
        if when[c, u] > t - k or when[c, v] <= t or (c, l, t) not in sent:
            continue
        when[c, v] = t
        kept.append((c, l, t))
    for v in sent.values():
        if not v.fixed:
            v.set_value(0)
    for idx in kept:
        if not sent[idx].fixed:
            sent[idx].set_value(1)
    for (c, n, t), v in model.hold.items():
        if not v.fixed:
            v.set_value(1 if when[c, n] <= t else 0)
    obj = None
    for o in model.component_data_objects(pe.Objective, active=True):
        obj = float(pe.value(o))
        break
    return {"sends": len(kept), "dropped": int(len(rows) - len(kept)), "objective": obj}


def _warm_cluster(instance, formulation, options: Options, clock: _Clock, share: float, stats,
                  form_params) -> tuple[_Known | None, Outcome | None]:
    """Time clustering with ``share`` of the time limit: (its schedule as rows, its outcome)."""
    limit = None if options.time_limit is None else max(0.01, share * float(options.time_limit))
    if clock.limit is not None:
        limit = min(limit, clock.left())
    sub = replace(options, time_limit=limit)
    o, data, rows = _time_cluster(instance, formulation, sub, **form_params)
    for key in ("build_s", "solve_s"):
        stats[key] += getattr(o, key) or 0.0
    if o.nodes is not None:
        stats["nodes"] = (stats["nodes"] or 0) + o.nodes
    stats["version"] = o.version or stats["version"]
    stats["solver_status"] = o.solver_status or stats["solver_status"]
    if o.schedule is None:
        return None, o
    return _known("time-cluster", data, rows, o.found_by), o


def _better(a: _Known | None, b: _Known | None) -> _Known | None:
    if a is None:
        return b
    if b is None:
        return a
    return b if b.steps < a.steps else a


# ---- horizon search ------------------------------------------------------------------------

def horizon_search(instance, formulation, options: Options, *, binary: bool = False,
                   persistent: bool = False, max_horizon: int | None = None, warm: bool = True,
                   warm_share: float = WARM_SHARE, **form_params) -> Outcome:
    """Smallest horizon at which the formulation delivers the whole postcondition.

    Linear search from :func:`~collsynth.formulations.ten_ilp.lower_bound` upward (TACOS V-A),
    or binary search up to the best known schedule's length. ``persistent=True`` (HiGHS,
    Gurobi) builds one model at the largest horizon and re-solves it per horizon with later
    sends fixed to zero (see ``benchmarks/bench_ten.py`` for when that pays off). A horizon
    counts as impossible only when the solver proves it (optimal objective short of every
    pair); otherwise the bound stays at the last proven-impossible horizon + 1 and the status
    is ``feasible``.

    ``warm=True`` (formulations that allow recovery, arrivals objective): time clustering first
    runs with ``warm_share`` of the time limit. Its schedule is the best known one (if it meets
    the lower bound it is optimal and nothing else is solved); only horizons below its length
    are searched, each solve gets the best known schedule truncated to its horizon as a MIP
    start (:func:`set_start`), and when no horizon completes in time the best of the known
    schedule, the last incumbent completed by :func:`recover`, and pure recovery is returned.
    """
    t_start = time.perf_counter()
    clock = _Clock(options.time_limit, t_start)
    stats = _stats(options.solver)
    form_params = dict(form_params)
    form_params.setdefault("objective", "arrivals")
    lb = _lower_bound(formulation, instance, form_params)
    rdata, rrows, rsteps = recovery_schedule(instance, form_params.get("timestep"))
    recovery_ok = recovery_valid(formulation)
    use_warm = bool(warm) and warm_ok(formulation, form_params)
    known = _known("recovery", rdata, ten.prune(rdata, rrows)) if recovery_ok else None
    extra: dict[str, Any] = {"lower_bound": lb, "recovery_steps": rsteps}
    if use_warm:
        tc, tco = _warm_cluster(instance, formulation, options, clock, warm_share, stats, form_params)
        if tc is None and tco.status in ("error", "skipped"):
            return _fail(backends.SolveResult(tco.status, message=tco.message), stats, lb, extra)
        extra["time_cluster_steps"] = None if tc is None else tc.steps
        extra["time_cluster_windows"] = len(tco.extra.get("windows", ()))
        known = _better(known, tc)
    if recovery_ok:
        hi = known.steps if max_horizon is None else min(int(max_horizon), known.steps)
    else:  # the recovery schedule may break the formulation's extra rules: no upper bound from it
        hi = int(max_horizon) if max_horizon is not None else 4 * max(rsteps, lb)
    hi = max(hi, lb)
    # horizons at or beyond the known schedule's length need no solve
    top = hi - 1 if known is not None and known.steps <= hi else hi
    use_session = bool(persistent) and backends.canonical(options.solver) in ("highs", "gurobi")
    session = backends.Session(options.solver) if use_session else None
    tried: list[dict] = []
    proven_lb = lb
    best = None  # (steps, schedule)
    shared = None  # one model at the largest horizon when persistent

    def attempt(h: int):
        nonlocal shared, known
        t0 = time.perf_counter()
        if session is not None and session.persistent and form_params["objective"] == "arrivals":
            if shared is None:
                shared = formulation.build(instance, max(top, lb), **form_params)
            model = shared
            _restrict(model, h)
        else:
            model = formulation.build(instance, h, **form_params)
        start = set_start(model, known.rows, h) if use_warm and known is not None else None
        stats["build_s"] += time.perf_counter() - t0
        res = _solve(model, options, clock, stats, session, warm_start=start is not None)
        ok = _complete(model, res)
        sched = formulation.extract(model) if ok else None
        if not ok and res.has_solution and recovery_ok:
            rows = T.sends_of(model)
            pdata = model._ten
            held = T.holdings(model, upto=h)
            cand = ten.prune(pdata, np.concatenate([rows[rows[:, 2] <= h], recover(pdata, held, h)]))
            cand = _known(f"incumbent at horizon {h} completed by shortest-path recovery", pdata, cand,
                          f"ilp@h={h}+recovery")
            known = _better(known, cand)
        tried.append({"horizon": h, "status": res.status, "objective": res.objective,
                      "required": T.required(model), "complete": ok,
                      "warm_start": None if start is None else start["objective"]})
        return res, ok, sched

    if known is not None and known.steps <= lb:
        pass  # the best known schedule meets the lower bound: optimal without a solve
    elif binary:
        lo_h, hi_h = lb, top
        while lo_h <= hi_h and not clock.out():
            mid = (lo_h + hi_h) // 2
            res, ok, sched = attempt(mid)
            if res.status in ("error", "skipped"):
                return _fail(res, stats, lb, {**extra, "horizons": tried})
            if ok:
                best = (sched.num_steps if sched is not None else mid, sched, mid)
                hi_h = mid - 1
            else:
                if res.status in ("optimal", "infeasible"):
                    proven_lb = max(proven_lb, mid + 1)
                lo_h = mid + 1
    else:
        h = lb
        while h <= top and not clock.out():
            res, ok, sched = attempt(h)
            if res.status in ("error", "skipped"):
                return _fail(res, stats, lb, {**extra, "horizons": tried})
            if ok:
                best = (sched.num_steps, sched, h)
                break
            if res.status in ("optimal", "infeasible") and proven_lb == h:
                proven_lb = h + 1
            h += 1
    extra.update({"horizons": tried, "persistent": bool(session is not None and session.persistent),
                  "warm": use_warm})
    if best is not None and (known is None or best[0] <= known.steps):
        steps, sched, at = best
        extra["used"] = "ilp"
        status = "optimal" if steps <= proven_lb else "feasible"
        msg = "" if status == "optimal" else f"best {steps} timesteps; proven lower bound {proven_lb}"
        return _outcome(sched, status, steps, min(proven_lb, steps), stats, msg, extra, f"ilp@h={at}")
    if known is None:
        return _outcome(None, "no-solution", None, proven_lb, stats,
                        f"no horizon up to {tried[-1]['horizon'] if tried else lb} completed in time", extra)
    # no horizon below the known schedule completed (in time): the known schedule is the
    # answer; optimal when every shorter horizon is proven impossible or it meets the bound
    sched = ten.schedule_from_rows(known.data, known.rows)
    steps = sched.num_steps
    extra["used"] = known.how
    status = "optimal" if steps <= proven_lb else "feasible"
    if status == "optimal":
        msg = f"{known.how}: meets the proven lower bound {proven_lb}"
    elif tried and all(x["complete"] is False for x in tried) and top >= lb:
        msg = f"no horizon below {steps} completed in time; {known.how}"
    else:
        msg = f"{known.how}; proven lower bound {proven_lb}"
    return _outcome(sched, status, steps, min(proven_lb, steps), stats, msg, extra, known.found_by)


def _restrict(model, h: int) -> None:
    """Make a model built at a larger horizon describe horizon ``h`` (persistent re-solve).

    Sends arriving after ``h`` are fixed to 0 and the arrivals objective counts holdings at
    ``h``. Other horizons' fixings are undone first.
    """
    data: ten.TenData = model._ten
    for idx, v in model.sent.items():
        if idx[2] > h:
            v.fix(0)
        elif v.fixed:
            v.unfix()
    pre = data.pre
    expr = 0
    for c, n in model._pairs:
        if pre[c, n]:
            expr += 1
        elif (c, n, h) in model.hold:
            expr += model.hold[c, n, h]
    for name in ("arrivals", "arrivals_at"):
        if hasattr(model, name):
            model.del_component(name)
    model.arrivals_at = pe.Objective(expr=expr, sense=pe.maximize, doc=f"postcondition pairs held at timestep {h}")
    model._restricted = h


# ---- early termination -----------------------------------------------------------------------

def early_stop(instance, formulation, options: Options, *, horizon: int | None = None, warm: bool = True,
               warm_share: float = WARM_SHARE, **form_params) -> Outcome:
    """Solve one horizon with the time limit, keep the incumbent, recover the rest (TACOS).

    The horizon defaults to the lower bound. Missing chunks are delivered along shortest paths
    after the horizon without exceeding any link's capacity (:func:`recover`). The gap is
    against the lower bound.

    ``warm=True`` (formulations that allow recovery, arrivals objective): time clustering runs
    first with ``warm_share`` of the time limit; if its schedule meets the lower bound it is
    returned (optimal). Otherwise the ILP at the horizon gets that schedule truncated to the
    horizon as a MIP start (:func:`set_start`) and the remaining time. The result is the
    shortest of (ILP incumbent + recovery, the time-clustering schedule, the pure recovery
    schedule), so it is never longer than the recovery bound nor than time clustering.
    ``extra`` reports ``used``, ``warm_start`` (its objective: postcondition pairs held at
    the horizon) and the ILP's final objective.
    """
    clock = _Clock(options.time_limit, time.perf_counter())
    stats = _stats(options.solver)
    form_params = dict(form_params)
    form_params.setdefault("objective", "arrivals")
    lb = _lower_bound(formulation, instance, form_params)
    h = lb if horizon is None else int(horizon)
    rdata, rrows, rsteps = recovery_schedule(instance, form_params.get("timestep"))
    cands = [_known("recovery", rdata, ten.prune(rdata, rrows))]
    extra: dict[str, Any] = {"horizon": h, "lower_bound": lb, "recovery_steps": rsteps}
    use_warm = bool(warm) and warm_ok(formulation, form_params)
    tc = None
    if use_warm:
        tc, tco = _warm_cluster(instance, formulation, options, clock, warm_share, stats, form_params)
        if tc is None and tco.status in ("error", "skipped"):
            return _fail(backends.SolveResult(tco.status, message=tco.message), stats, lb, extra)
        extra["time_cluster_steps"] = None if tc is None else tc.steps
        extra["time_cluster_windows"] = len(tco.extra.get("windows", ()))
        if tc is not None:
            cands.append(tc)
    res = None
    if tc is None or tc.steps > lb:
        t0 = time.perf_counter()
        model = formulation.build(instance, h, **form_params)
        start = set_start(model, tc.rows, h) if tc is not None else None
        stats["build_s"] += time.perf_counter() - t0
        if start is not None:
            extra["warm_start"] = {"source": "time-cluster", "steps": tc.steps, "horizon": h, **start}
        res = _solve(model, options, clock, stats, warm_start=start is not None)
        extra.update({"ilp_status": res.status, "ilp_objective": res.objective, "ilp_bound": res.bound,
                      "required": T.required(model)})
        if res.status in ("error", "skipped"):
            return _fail(res, stats, lb, extra)
        data: ten.TenData = model._ten
        if res.has_solution:
            rows = T.sends_of(model)
            held = T.holdings(model)
        else:
            rows = np.zeros((0, 3), np.int64)
            held = data.pre.copy()
        extra["recovered_pairs"] = int((data.post & ~held).sum())
        more = recover(data, held, h)
        same = start is not None and res.objective is not None and res.objective <= start["objective"]
        found = ("warm-start" if same else "ilp") + f"@h={h}" + ("+recovery" if extra["recovered_pairs"] else "")
        cands.insert(0, _known("ilp+recovery", data, ten.prune(data, np.concatenate([rows, more])), found))
    win = min(cands, key=lambda k: k.steps)  # first of equals: ILP, then time clustering
    extra["used"] = win.how
    extra["candidates"] = {k.how: k.steps for k in cands}
    sched = ten.schedule_from_rows(win.data, win.rows)
    steps = sched.num_steps
    status = "optimal" if steps <= lb else "feasible"
    return _outcome(sched, status, steps, min(lb, steps), stats,
                    "" if status == "optimal" else f"{steps} timesteps; lower bound {lb}", extra, win.found_by)


# ---- time clustering -------------------------------------------------------------------------

def time_cluster(instance, formulation, options: Options, *, window: int | None = None,
                 lookahead: int | None = None, **form_params) -> Outcome:
    """Windows of ``window`` timesteps, each solved from the previous window's holdings.

    Each window maximises the postcondition pairs held at its end (TACOS time clustering).
    If a window makes no progress (no new arrival and no chunk closer to a node needing it),
    or time runs out, the rest is delivered by :func:`recover`. Never longer than the pure
    recovery schedule.
    """
    return _time_cluster(instance, formulation, options, window=window, lookahead=lookahead, **form_params)[0]


def _time_cluster(instance, formulation, options: Options, *, window: int | None = None,
                  lookahead: int | None = None, **form_params):
    """:func:`time_cluster`, also returning (TEN data, rows) of its schedule in the model's direction."""
    clock = _Clock(options.time_limit, time.perf_counter())
    stats = _stats(options.solver)
    form_params = dict(form_params)
    form_params.setdefault("objective", "arrivals")
    lb = _lower_bound(formulation, instance, form_params)
    rdata, rrows, rsteps = recovery_schedule(instance, form_params.get("timestep"))
    data0 = rdata
    k = int(window) if window else max(2, int(data0.delay.max()))
    if lookahead is None:
        finite = data0.dist[np.isfinite(data0.dist)]
        lookahead = int(finite.max()) if finite.size else k
    state = data0.pre.copy()
    offset = 0
    all_rows = []
    windows = []
    stalls = 0

    def potential(held):
        need = data0.post & ~held
        tot = 0.0
        for c in np.flatnonzero(need.any(axis=1)):
            D = data0.dist[data0.group[c]]
            h = np.flatnonzero(held[c])
            tot += D[np.ix_(h, np.flatnonzero(need[c]))].min(axis=0).sum()
        return tot

    pot = potential(state)
    while (data0.post & ~state).any():
        if clock.out() or stalls >= 2:
            break
        t0 = time.perf_counter()
        params = dict(form_params)
        if lookahead and form_params["objective"] == "arrivals":
            params["lookahead"] = lookahead
        model = formulation.build(instance, k, state=state, **params)
        stats["build_s"] += time.perf_counter() - t0
        res = _solve(model, options, clock, stats)
        if res.status in ("error", "skipped"):
            return _fail(res, stats, lb, {"windows": windows}), data0, None
        if not res.has_solution:
            break
        rows = T.sends_of(model)
        new_state = T.holdings(model)
        new_pot = potential(new_state)
        gained = int((new_state & ~state & data0.post).sum())
        windows.append({"start": offset, "status": res.status, "arrivals": gained})
        if gained == 0 and new_pot >= pot:
            stalls += 1
        else:
            stalls = 0
        if len(rows):
            rows[:, 2] += offset
            all_rows.append(rows)
        # time advances by the window (sends of later windows start after it)
        state, pot = new_state, new_pot
        offset += k
    rows = np.concatenate(all_rows) if all_rows else np.zeros((0, 3), np.int64)
    extra = {"window": k, "windows": windows, "lower_bound": lb, "recovery_steps": rsteps}
    if (data0.post & ~state).any():
        more = recover(data0, state, offset)
        extra["recovered_pairs"] = int((data0.post & ~state).sum())
        rows = np.concatenate([rows, more])
    rows = ten.prune(data0, rows)
    steps = int(rows[:, 2].max()) if len(rows) else 0
    found = "time-cluster+recovery" if "recovered_pairs" in extra else "time-cluster"
    if steps > rsteps:
        rows, steps = ten.prune(rdata, rrows), rsteps
        extra["used"] = found = "recovery"
    rows = _compact(data0, rows)
    sched = ten.schedule_from_rows(data0, rows)
    steps = sched.num_steps
    status = "optimal" if steps <= lb else "feasible"
    return (_outcome(sched, status, steps, min(lb, steps), stats,
                     "" if status == "optimal" else f"{steps} timesteps; lower bound {lb}", extra, found),
            data0, rows)


def _compact(data: ten.TenData, rows: np.ndarray) -> np.ndarray:
    """Drop timesteps in which nothing is on any link (a window that ended early)."""
    if not len(rows):
        return rows
    k = data.delay[data.group[rows[:, 0]], rows[:, 1]]
    busy = np.zeros(int(rows[:, 2].max()) + 1, bool)
    for s, e in zip((rows[:, 2] - k + 1).tolist(), rows[:, 2].tolist()):
        busy[s:e + 1] = True
    busy[0] = True  # timestep 0 is the precondition, never removed
    idle = np.cumsum(~busy)
    out = rows.copy()
    out[:, 2] = rows[:, 2] - idle[rows[:, 2]]
    return out


def recovery_valid(formulation) -> bool:
    """Whether shortest-path recovery sends obey the formulation's rules (``RECOVERY_VALID``,
    default True). A formulation that adds rules to the TEN ILP (e.g. one-port nodes) sets it
    False: horizon search then searches past the recovery length and never falls back to it,
    and the drivers built on recovery (early-stop, time-cluster) refuse it."""
    return bool(getattr(formulation, "RECOVERY_VALID", True))


def run(driver: str | None, instance, formulation, options: Options) -> Outcome:
    """Dispatch to a driver by name (default: horizon search)."""
    drv, form = split_params(dict(options.params))
    name = driver or "horizon"
    if name in ("early-stop", "time-cluster") and not recovery_valid(formulation):
        from ..producers import Unsupported

        raise Unsupported(f"{name} completes schedules by shortest-path recovery, which "
                          f"{getattr(formulation, 'NAME', 'this formulation')} does not allow; use --driver horizon")
    if name == "horizon":
        return horizon_search(instance, formulation, options, **{k: v for k, v in drv.items() if k in ("binary", "persistent", "max_horizon", "warm", "warm_share")}, **form)
    if name == "early-stop":
        return early_stop(instance, formulation, options, **{k: v for k, v in drv.items() if k in ("horizon", "warm", "warm_share")}, **form)
    if name == "time-cluster":
        return time_cluster(instance, formulation, options, **{k: v for k, v in drv.items() if k in ("window", "lookahead")}, **form)
    from ... import InputError

    raise InputError("--driver", f"unknown driver {name!r}; expected one of {', '.join(DRIVERS)}")
