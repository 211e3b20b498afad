"""TACOS-Greedy and its extensions: collectives synthesized by greedy link-chunk matching on the
time-expanded network (Won et al., "TACOS: Topology-Aware Collective Algorithm Synthesizer for
Distributed Training", arXiv:2304.05301, 2023, Section VI).

The matching itself (:mod:`collsynth.solvers.greedy.engine`) walks the TEN one timestep at a
time and serves every request once; this module turns instances into matchings and matchings
into schedules:

- non-combining collectives are matched directly; combining ones are the reversal
  (:func:`collsynth.tens.schedule.reverse`) of their dual matched on the transposed topology
  (TACOS §VII-A); allreduce is reduce-scatter then allgather
  (:func:`collsynth.tens.schedule.concat`);
- concurrent collectives are matched jointly (merged requests with chunk offsets), their
  combining parts first on the transpose, the rest around the link slots those use (§VIII-G);
- the best of several seeds, run in parallel processes, is kept (§VI-C).

Defaults go beyond the paper (``priority="fifo"``, rarest-first endgame, maximum matching per
destination: they reach the per-node inbound bound on 2D tori where the paper's uniform random
choice ends a few timesteps late); ``priority="random", matching="greedy", endgame=0`` is the
paper's rule.

>>> from collsynth.instances.generators import build
>>> from collsynth.instances.instance import make_instance
>>> inst = make_instance(build("torus", {"dims": [3, 3]}, bandwidth=1e9, alpha=1e-6), "allgather")
>>> synthesize(inst, seed=0).num_steps  # 8 chunks over 4 in-links: 2 timesteps
2
"""

from __future__ import annotations

import math
import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace

import numpy as np

from ...tens.status import Status
from ... import InputError
from ...limits import Deadline, TimeLimitReached, memory_budget, require
from ...instances.collective import Collective
from ...instances.instance import Instance
from ...instances.size import estimate
from ...instances.switch_ops import copying_mask, reducing_mask
from ...instances.topology import Topology
from ...tens import bounds, cost
from ...tens import schedule as sched_mod
from ...tens.schedule import OP_COPY, OP_REDUCE, Schedule
from ...tens.ten import SWITCH_COPY, latency_pipelined, link_delays, switch_hop_instant
from ...tens.verify import verify
from ..producers import Options, Outcome, Param, Producer, Unsupported
from .routes import switch_mask
from .engine import ENDGAME, INF, MATCHINGS, PRIORITIES, Links, Result, Rules, links, match, needs_relay, warm

__all__ = ["ENDGAME", "MATCHINGS", "PRIORITIES", "Links", "links", "lower_bound", "multi_start",
           "one_start", "produce", "synthesize"]


# ---- from instances to schedules ----------------------------------------------------------

@dataclass(frozen=True)
class _Part:
    """One non-combining request set: collective ``index`` of the instance, as kind ``kind``
    (a dual when the collective is combining), its chunk ids shifted by ``offset``, its
    precondition ready at the end of step ``ready``."""

    index: int
    coll: Collective
    offset: int
    ready: int = 0


@dataclass(frozen=True)
class _Context:
    """What every matching of one synthesis shares: the TEN timestep (the largest chunk over
    the cheapest link unless ``timestep`` is given), the random generator, the rules, the
    statistics gathered over all matchings, the deadline every matching stops at and whether
    kept switch nodes multicast (``switch_copy``)."""

    chunk_bytes: float
    timestep: float | None
    rng: np.random.Generator
    rules: Rules
    stats: dict
    deadline: Deadline | None = None
    switch_copy: bool = SWITCH_COPY


BLOCK_CELLS = 1 << 22  # (node, chunk) cells of the holdings tables filled between two looks at the clock


def _problem(parts: list[_Part], size: int, deadline: Deadline | None = None):
    """Stacked ``avail``/``want`` matrices ``[node, compact chunk]`` and the global chunk ids,
    filled a block of nodes at a time (:data:`BLOCK_CELLS`), ``deadline`` checked between
    blocks: an all-to-all on 576 nodes has 190 M cells, a minute of work on a loaded machine
    that one numpy call would not let the time limit stop."""
    if not parts:
        return np.zeros((size, 0), np.int32), np.zeros((size, 0), bool), np.zeros(0, np.int64)
    widths = [len(p.coll.used_chunks) for p in parts]
    avail = np.empty((size, sum(widths)), np.int32)
    want = np.empty((size, sum(widths)), bool)
    step = max(1, BLOCK_CELLS // max(1, sum(widths)))
    col = 0
    for p, width in zip(parts, widths):
        used = p.coll.used_chunks
        every = width == p.coll.num_chunks  # no copy of the conditions (an all-to-all: N^3 bytes)
        pre_all, post_all = p.coll.precondition, p.coll.postcondition
        for lo in range(0, size, step):
            if deadline is not None:
                deadline.check("greedy matching", f"holdings tables: {lo:,} of {size:,} nodes filled "
                                                  f"(columns {col:,} of {sum(widths):,}); no timestep matched")
            nodes = slice(lo, min(size, lo + step))
            pre = (pre_all[:, nodes] if every else pre_all[used, nodes]).T
            post = (post_all[:, nodes] if every else post_all[used, nodes]).T
            avail[nodes, col:col + width] = np.where(pre, np.int32(p.ready), np.int32(INF))
            np.logical_and(post, ~pre, out=want[nodes, col:col + width])
        col += width
    return avail, want, np.concatenate([p.coll.used_chunks + p.offset for p in parts])


def _forward(topology: Topology, parts: list[_Part], ctx: _Context, busy=None) -> Result:
    """Greedy matching for non-combining parts on ``topology``; chunk ids made global."""
    lk = links(topology, ctx.chunk_bytes, ctx.timestep, ctx.switch_copy)
    avail, want, ids = _problem(parts, topology.size, ctx.deadline)
    if ctx.deadline is not None:  # before the matching's own tables (as big again) are made
        ctx.deadline.check("greedy matching", "the holdings tables built; no timestep matched")
    distances = topology.distances if needs_relay(lk, avail, want) else None
    res = match(lk, avail, want, ctx.rng, distances=distances, rules=ctx.rules, busy=busy, deadline=ctx.deadline,
                copy=False)
    for k in ("replaced", "dropped", "augmented"):
        ctx.stats[k] = ctx.stats.get(k, 0) + getattr(res, k)
    ctx.stats["timestep_s"] = lk.timestep
    ctx.stats["max_delay"] = max(ctx.stats.get("max_delay", 1), int(lk.delay.max(initial=1)))
    res.chunk = ids[res.chunk] if len(res.chunk) else res.chunk
    return res


def _reverse_result(res: Result) -> Result:
    """Time reversal of greedy sends (TACOS §VII-A) keeping multi-timestep links exact:
    a send occupying steps ``[a-d+1, a]`` occupies ``[T+1-a, T+d-a]`` reversed, so its
    reversed arrival step is ``T + 1 - start``."""
    T = res.steps
    start = res.step - res.delay + 1
    step = T + 1 - start
    return replace(res, src=res.dst, dst=res.src, step=step, steps=int(step.max(initial=0)))


def _to_schedule(kind: str, res: Result, topology: Topology, chunks: int, op=None, meta=None) -> Schedule:
    return sched_mod.from_arrays(
        kind, topology.size, chunks, chunk=res.chunk, src=res.src, dst=res.dst, step=res.step,
        op=op, meta=meta,
    )


HOLDING_BYTES = 18  # per node x chunk id: one seed's holdings and requests at their peak through a run (an
# all-to-all on a 16x32 torus: 13.9, on 32x32: 10.4, peak resident set over node x used chunk ids), plus
# the lower bounds' process beside it (4.0 on 32x32)


def _seeds_that_fit(instance: Instance) -> int:
    """How many seeds' holdings fit the memory budget side by side (:data:`HOLDING_BYTES` a node
    and chunk id: the engine's matrices are dense); refuses (:class:`~collsynth.limits.TooBig`)
    an instance one seed does not fit."""
    cells = instance.topology.size * sum(c.num_used_chunks for c in instance.collectives)
    need = HOLDING_BYTES * cells
    require(need, estimate(instance, horizon=1).field,
            f"the greedy's holdings of {instance.topology.size:,} nodes x {cells // instance.topology.size:,} chunks")
    return max(1, int(memory_budget()[0] // max(need, 1)))


def _chunk_bytes(instance: Instance) -> float:
    """One TEN timestep carries one chunk: the largest chunk of the instance's collectives."""
    return max(c.chunk_bytes for c in instance.collectives)


def _check_supported(instance: Instance) -> None:
    """Combining collectives cross kept switch nodes as relays (:func:`_combining`), which the
    verifier checks under a serial latency only (:func:`collsynth.tens.verify._relayed_violation`);
    a switch that reduces or multicasts by its own declaration
    (:mod:`collsynth.instances.switch_ops`) would combine or copy what the greedy relays; with
    concurrent collectives the link slots the combining matching leaves (:func:`_link_use`) count
    no switch port."""
    topo = instance.topology
    if not (switch_mask(topo).any() and any(c.combining for c in instance.collectives)):
        return
    if (reducing_mask(topo) | copying_mask(topo, False)).any():
        raise Unsupported("a combining collective through switches that reduce or multicast: the greedy relays "
                          "partial sums one by one through switches and reduces at GPUs only")
    if latency_pipelined(topo):
        raise Unsupported("a combining collective through switch nodes under a pipelined latency: its relays "
                          "are not verified (unwind the switches: switch unwind=d)")
    if instance.concurrent:
        raise Unsupported("concurrent collectives, one combining, through switch nodes: the second matching "
                          "cannot see the switch ports the first one uses (unwind the switches: switch unwind=d)")


def _switch_meta(instance: Instance, switch_copy: bool) -> dict:
    """How kept switch nodes forwarded (the verifier checks the schedule by it), or nothing."""
    topo = instance.topology
    if not topo.switches & set(topo.nodes):
        return {}
    return {"switch_copy": bool(switch_copy), "switch_hop": "instant" if switch_hop_instant(topo) else "timestep"}


def _rules(priority: str, matching: str, endgame: int) -> Rules:
    if priority not in PRIORITIES:
        raise InputError("params.priority", f"expected one of {', '.join(PRIORITIES)}, got {priority!r}")
    if matching not in MATCHINGS:
        raise InputError("params.matching", f"expected one of {', '.join(MATCHINGS)}, got {matching!r}")
    if not isinstance(endgame, int) or isinstance(endgame, bool) or endgame < 0:
        raise InputError("params.endgame", f"expected a non-negative integer of timesteps, got {endgame!r}")
    return Rules(priority=priority, matching=matching, endgame=endgame)


def synthesize(instance: Instance, seed: int = 0, *, priority: str = "fifo", matching: str = "maximum",
               endgame: int = ENDGAME, timestep: float | None = None, deadline: Deadline | None = None,
               switch_copy: bool = SWITCH_COPY) -> Schedule:
    """One greedy run (see :func:`_synthesize`); with a pipelined link latency or kept switch
    nodes the schedule declares its TEN timestep (``meta["timestep_s"]``), so the verifier
    checks its sends against each link's delay and latency
    (:func:`collsynth.tens.verify.pipelined_violation`) and what each switch forwards
    (:func:`collsynth.tens.verify.switch_violation`, with ``meta["switch_copy"]``)."""
    out = _synthesize(instance, seed, priority=priority, matching=matching, endgame=endgame, timestep=timestep,
                      deadline=deadline, switch_copy=switch_copy)
    declare = latency_pipelined(instance.topology) or bool(instance.topology.switches & set(instance.topology.nodes))
    if declare and "timestep_s" in out.meta.get("stats", {}):
        out = replace(out, meta={**out.meta, "timestep_s": out.meta["stats"]["timestep_s"]})
    return out


def _synthesize(instance: Instance, seed: int = 0, *, priority: str = "fifo", matching: str = "maximum",
                endgame: int = ENDGAME, timestep: float | None = None, deadline: Deadline | None = None,
                switch_copy: bool = SWITCH_COPY) -> Schedule:
    """One greedy run (TACOS §VI, with the rules of :mod:`collsynth.solvers.greedy.engine`)
    on ``instance``: a schedule, step = arrival timestep.

    Non-combining collectives are matched directly; reduce and reduce_scatter are the reversal
    of broadcast / allgather matched on ``topology.transpose()``; allreduce is
    ``concat(reduce_scatter, allgather, "allreduce")``; concurrent collectives are matched
    jointly (combining parts first, on the transpose; the rest then around their link use).
    Kept switch nodes are crossed by routes (:mod:`collsynth.solvers.greedy.engine`);
    ``switch_copy``: they multicast, unless a collective combines: then no switch multicasts,
    so that the reversal relays each partial sum on its own (:func:`_combining`).
    Past ``deadline`` it stops (:class:`~collsynth.limits.TimeLimitReached`).
    """
    _check_supported(instance)
    switch_copy = bool(switch_copy) and not any(c.combining for c in instance.collectives)
    ctx = _Context(chunk_bytes=_chunk_bytes(instance), timestep=timestep, rng=np.random.default_rng(seed),
                   rules=_rules(priority, matching, endgame), stats={}, deadline=deadline,
                   switch_copy=bool(switch_copy))
    meta = {"producer": "greedy", "seed": int(seed), "priority": priority, "matching": matching,
            "endgame": endgame, "stats": ctx.stats, **_switch_meta(instance, switch_copy)}
    topo = instance.topology
    if instance.concurrent:
        return _concurrent(instance, ctx, meta)
    coll = instance.collective
    if coll.kind == "allreduce":
        part = [_Part(0, coll.with_kind("allgather"), 0)]
        s_rs = _to_schedule("reduce_scatter", _combining(topo, part, ctx), topo, coll.num_chunks)
        s_ag = _to_schedule("allgather", _forward(topo, part, ctx), topo, coll.num_chunks)
        out = sched_mod.concat(s_rs, s_ag, "allreduce")
        return replace(out, meta={**meta, "phases": [s_rs.num_steps, s_ag.num_steps]})
    if coll.combining:
        res = _combining(topo, [_Part(0, coll.dual(), 0)], ctx)
    else:
        res = _forward(topo, [_Part(0, coll, 0)], ctx)
    return _to_schedule(coll.kind, res, topo, coll.num_chunks, meta=meta)


def _combining(topo: Topology, dual_parts: list[_Part], ctx: _Context) -> Result:
    """Combining parts as the reversal of their duals matched on the transposed topology.

    The reversal is :func:`collsynth.tens.schedule.reverse` extended to multi-timestep links
    (see :func:`_reverse_result`); on unit-delay links the two agree exactly. Through kept
    switch nodes the dual is matched without multicast (``ctx.switch_copy`` false), so each
    route GPU -> switch(es) -> GPU reverses into one that relays one partial sum, read at its
    source after everything that source reduces has arrived, and reduced at the GPU it reaches
    (the relay rule of :func:`collsynth.tens.verify._relayed_violation`); a switch forwarding in
    the timestep after an arrival (or in the same one over an instant hop to a GPU) still does
    so reversed, as a send occupying ``[a-d+1, a]`` occupies ``[T+1-a, T+d-a]``. An instant
    hop saves its timestep on the way into the dual's last NPU, which reversed is the way out of
    the first one; a hop between two switches then arrives a timestep later (all of them, so
    no switch link carries more in a timestep than the dual's did), so that the instant hop
    saves it into the NPU again.
    """
    res = _reverse_result(_forward(topo.transpose(), dual_parts, ctx))
    if switch_hop_instant(topo):
        sw = switch_mask(topo)
        res = replace(res, step=res.step + (sw[res.src] & sw[res.dst]))
    return res


def _concurrent(instance: Instance, ctx: _Context, meta: dict) -> Schedule:
    """Several collectives sharing the network (TACOS §VIII-G): requests merged with chunk
    offsets. Combining parts (reduce, reduce_scatter, the first phase of allreduce) are matched
    jointly on the transpose and reversed; then the non-combining parts (and allreduce's
    allgather phase, ready once the reductions end) are matched around the link slots the
    first group uses."""
    topo = instance.topology
    offs = instance.chunk_offsets
    comb, fwd = [], []
    for i, (c, o) in enumerate(zip(instance.collectives, offs)):
        if c.kind == "allreduce":
            comb.append(_Part(i, c.with_kind("allgather"), o))
        elif c.combining:
            comb.append(_Part(i, c.dual(), o))
        else:
            fwd.append(_Part(i, c, o))
    R = _combining(topo, comb, ctx) if comb else None
    busy: dict[int, np.ndarray] = {}
    if R is not None:
        busy = _link_use(R, topo, len(links(topo, ctx.chunk_bytes, ctx.timestep)))
        fwd += [_Part(i, c.with_kind("allgather"), offs[i], ready=R.steps)
                for i, c in enumerate(instance.collectives) if c.kind == "allreduce"]
    F = _forward(topo, fwd, ctx, busy=busy) if fwd else None
    parts = [_collective_part(c, o, R, F, topo) for c, o in zip(instance.collectives, offs)]
    return replace(sched_mod.merge(parts, list(offs)), meta=meta)


def _link_use(res: Result, topo: Topology, n_links: int) -> dict[int, np.ndarray]:
    """Per timestep, how many slots of each link pair the sends of ``res`` occupy (a send
    arriving at ``e`` with ``busy`` occupancy and latency ``delay - busy`` occupies
    ``e - latency - busy + 1 .. e - latency``)."""
    busy: dict[int, np.ndarray] = {}
    idx = topo.link_arrays.lookup(res.src, res.dst)
    last = res.step - (res.delay - res.busy)  # the last timestep each send is on its link
    for k in range(int(res.busy.max(initial=1))):
        m = res.busy > k
        for s in np.unique(last[m] - k).tolist():
            b = busy.setdefault(int(s), np.zeros(n_links, np.int64))
            np.add.at(b, idx[m & (last - k == s)], 1)
    return busy


def _collective_part(coll: Collective, offset: int, reduced: Result | None, forwarded: Result | None,
                     topo: Topology) -> Schedule:
    """The sends of one collective (chunks ``offset ..``) from the combining matching
    (reductions) and the forward one (copies), as that collective's schedule."""
    pieces = []
    for res, op in ((reduced, OP_REDUCE), (forwarded, OP_COPY)):
        if res is None:
            continue
        m = (res.chunk >= offset) & (res.chunk < offset + coll.num_chunks)
        if m.any():
            pieces.append((res.chunk[m] - offset, res.src[m], res.dst[m], res.step[m],
                           np.full(int(m.sum()), op, np.int8)))
    cols = [np.concatenate([p[k] for p in pieces]) if pieces else np.zeros(0, np.int64) for k in range(5)]
    return sched_mod.from_arrays(
        coll.kind, topo.size, coll.num_chunks, chunk=cols[0], src=cols[1], dst=cols[2], step=cols[3],
        op=cols[4].astype(np.int8) if pieces else None,
    )


# ---- bounds -------------------------------------------------------------------------------

def lower_bound(instance: Instance, timestep: float | None = None) -> int:
    """Timesteps no schedule on the greedy's TEN can beat (:func:`collsynth.tens.bounds.timesteps_bound`:
    delay-weighted distance, per-node, volume and cut bounds), in the greedy's timestep: the
    cheapest link cost for the largest chunk unless ``timestep`` is given."""
    if timestep is None:
        timestep = link_delays(instance.topology, _chunk_bytes(instance), switches=True)[2]
    return int(bounds.timesteps_bound(instance, timestep=timestep).value)


def _bound_in_time(instance: Instance, timestep: float | None, deadline: Deadline, found: bool) -> int | None:
    """:func:`lower_bound` if it is done before ``deadline`` (cached when the run's bounds stage
    finished it); ``None`` when the limit ends it first and a schedule was ``found``, which is
    kept rather than lost to the bound."""
    if found and deadline.expired():
        return None
    try:
        return lower_bound(instance, timestep)
    except TimeLimitReached:
        if not found:
            raise
        return None


# ---- multi-start and the producer ----------------------------------------------------------

def _sync_time(schedule: Schedule, instance: Instance) -> float:
    """Synchronous alpha-beta time (``tens.cost.price_sync``), the tie-breaker between seeds."""
    return float(cost.price_sync(schedule, instance).total_s)


def one_start(instance: Instance, seed: int, params: dict, deadline: Deadline | None = None,
              compared: bool = True) -> dict:
    """Run one seed, verify its schedule (``tens.verify.verify``) and measure it.

    Returns ``seed, steps, sync_s, seconds, violation`` (``None`` when valid), ``checked``
    and ``schedule``. A seed that is not ``compared`` with others (the only one), or that
    finishes after ``deadline``, is neither verified nor priced here (``checked`` False,
    ``sync_s`` None): the pipeline verifies and prices the schedule the producer returns,
    and a schedule found by the limit is kept rather than lost to its checking.
    """
    t0 = time.perf_counter()
    s = synthesize(instance, seed, priority=params.get("priority", "fifo"), matching=params.get("matching", "maximum"),
                   endgame=params.get("endgame", ENDGAME), timestep=params.get("timestep"), deadline=deadline,
                   switch_copy=params.get("switch_copy", SWITCH_COPY))
    seconds = time.perf_counter() - t0
    if not compared or (deadline is not None and deadline.expired()):
        return {"seed": int(seed), "steps": s.num_steps, "sync_s": None, "seconds": seconds, "violation": None,
                "checked": False, "schedule": s}
    v = verify(s, instance)
    return {
        "seed": int(seed), "steps": s.num_steps, "sync_s": None if v else _sync_time(s, instance),
        "seconds": seconds, "violation": None if v is None else str(v), "checked": True, "schedule": s,
    }


def _one_start_job(args):
    instance, seed, params, deadline = args
    return one_start(instance, seed, params, deadline, compared=True)


def multi_start(instance: Instance, seeds, params: dict | None = None, workers: int | None = None,
                deadline: Deadline | None = None):
    """Best verified schedule over ``seeds`` (TACOS §VI-C), runs in parallel processes.

    At most ``os.cpu_count()`` worker processes (``workers`` caps it further; 1 runs in this
    process). The best schedule has the fewest timesteps, then the lowest synchronous time,
    then the smallest seed. Returns ``(best_run, runs)``; ``runs`` are the per-seed summaries
    without schedules; ``best_run`` is ``None`` when no seed gave a valid schedule. Past
    ``deadline`` the seeds still running stop: the best of those that finished is kept (the
    runs list says which did), and with none finished
    :class:`~collsynth.limits.TimeLimitReached` says how far the first seed got.
    """
    params = dict(params or {})
    seeds = [int(s) for s in seeds]
    limit = os.cpu_count() or 1
    workers = max(1, min(len(seeds), limit, workers or limit))
    best, runs = None, []

    def take(r):
        nonlocal best
        sched = r.pop("schedule")
        runs.append(r)
        if r["violation"] is None:  # verified, or not checked here (the pipeline verifies it)
            if best is None or _rank(r) < _rank(best):
                best = {**r, "schedule": sched}

    stopped: list[TimeLimitReached] = []
    if workers == 1:
        for s in seeds:
            try:
                take(one_start(instance, s, params, deadline, compared=len(seeds) > 1))
            except TimeLimitReached as e:
                stopped.append(e)
                break
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(_one_start_job, (instance, s, params, deadline)) for s in seeds]
            for fut in futures:
                try:
                    take(fut.result())
                except TimeLimitReached as e:
                    stopped.append(e)
    if stopped and not runs:
        first = stopped[0]
        raise TimeLimitReached(first.stage, "; ".join(x for x in ("no seed finished", first.done) if x))
    runs.sort(key=lambda r: r["seed"])
    return best, runs


def _rank(r: dict) -> tuple:
    """A seed's place among valid ones: fewest timesteps, then checked before unchecked, then
    lowest synchronous time, then smallest seed."""
    return (r["steps"], not r["checked"], r["sync_s"] if r["sync_s"] is not None else math.inf, r["seed"])


def _params(options: Options) -> dict:
    p = dict(options.params or {})
    known = {"priority", "matching", "endgame", "timestep", "workers", "switch_copy"}
    for k in p:
        if k not in known:
            raise InputError(f"params.{k}", f"unknown greedy parameter; expected one of {', '.join(sorted(known))}")
    if "timestep" in p and p["timestep"] is not None:
        try:
            p["timestep"] = float(p["timestep"])
        except (TypeError, ValueError):
            raise InputError("params.timestep", f"expected seconds, got {p['timestep']!r}") from None
        if not p["timestep"] > 0:
            raise InputError("params.timestep", f"expected a positive number of seconds, got {p['timestep']!r}")
    if "switch_copy" in p and not isinstance(p["switch_copy"], (bool, np.bool_)):
        raise InputError("params.switch_copy", f"expected true or false, got {p['switch_copy']!r}")
    if "workers" in p:
        if not isinstance(p["workers"], int) or isinstance(p["workers"], bool) or p["workers"] < 1:
            raise InputError("params.workers", f"expected a positive integer, got {p['workers']!r}")
    _rules(p.get("priority", "fifo"), p.get("matching", "maximum"), p.get("endgame", ENDGAME))
    return p


def produce(instance: Instance, options: Options) -> Outcome:
    """The ``greedy`` producer: best of ``options.starts`` seeds from ``options.seed`` on.

    Status ``heuristic``; objective = timesteps of the best verified schedule; bound =
    :func:`lower_bound` (:mod:`collsynth.tens.bounds` in timesteps). ``extra`` reports the
    spread over seeds (min / median / max timesteps, per-seed figures).
    """
    _check_supported(instance)
    if not isinstance(options.starts, int) or options.starts < 1:
        raise InputError("--starts", f"expected a positive integer, got {options.starts!r}")
    params = _params(options)
    t0 = time.perf_counter()
    deadline = options.timer()
    seeds = range(options.seed, options.seed + options.starts)
    workers = min(params.get("workers") or os.cpu_count() or 1, _seeds_that_fit(instance))
    best, runs = multi_start(instance, seeds, params, workers, deadline)
    wall = time.perf_counter() - t0
    bound = _bound_in_time(instance, params.get("timestep"), deadline, found=best is not None)
    steps = [r["steps"] for r in runs if r["violation"] is None]
    extra = {
        "starts": options.starts,
        "workers": min(workers, options.starts),
        "seeds": [r["seed"] for r in runs],
        "steps_min": min(steps) if steps else None,
        "steps_median": statistics.median(steps) if steps else None,
        "steps_max": max(steps) if steps else None,
        "per_seed": [{k: r[k] for k in ("seed", "steps", "sync_s", "seconds", "violation", "checked")} for r in runs],
        "priority": params.get("priority", "fifo"),
        "matching": params.get("matching", "maximum"),
        "endgame": params.get("endgame", ENDGAME),
        "lower_bound_steps": bound,
    }
    if best is None:
        bad = next((r for r in runs if r["violation"]), None)
        return Outcome(None, Status.ERROR, bound=bound, units="timesteps", solve_s=wall,
                       message=f"no seed gave a valid schedule: {bad and bad['violation']}", extra=extra)
    extra["best_seed"] = best["seed"]
    gap = (best["steps"] - bound) / best["steps"] if best["steps"] and bound is not None else None
    return Outcome(
        best["schedule"], "heuristic", objective=float(best["steps"]), bound=None if bound is None else float(bound),
        gap=gap, units="timesteps", build_s=0.0, solve_s=wall, solver="greedy",
        message=f"best of {options.starts} seed(s): {best['steps']} timesteps (seed {best['seed']}), lower bound "
                + (f"{bound}" if bound is not None else "not computed within the time limit")
        + ("" if len(runs) == options.starts else f"; the time limit stopped it after {len(runs)} seed(s)"),
        extra=extra,
    )


PARAMS = (
    Param("priority", PRIORITIES, "fifo", "order among a link's candidate chunks (random: the paper's choice)"),
    Param("matching", MATCHINGS, "maximum", "link-chunk matching in each timestep (greedy: the paper's rounds)"),
    Param("endgame", int, ENDGAME, "timesteps before a node's last request when its in-links take the rarest "
          "chunks first (0: off)", low=0),
    Param("timestep", float, None, "seconds per TEN timestep (default: the cheapest link's cost per chunk)"),
    Param("workers", int, None, "processes running the seeds (default: the cores, at most one per seed and as many "
                                "as the memory budget holds)", low=1),
    Param("switch_copy", bool, SWITCH_COPY, "kept switch nodes forward one arrival on several out-links (multicast, "
                                            "TE-CCL's default); false: one out-send per arrival (always with a "
                                            "combining collective)"),
)

PRODUCERS = [
    Producer(
        "greedy", "greedy", produce,
        summary="TACOS-Greedy (Won et al. 2023, §VI) with a rarest-first endgame and maximum matching: "
                "link-chunk matching on the TEN; best of --starts seeds",
        params=PARAMS, warm=warm,
    ),
]
