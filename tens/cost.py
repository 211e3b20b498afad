"""Pricing: what a schedule costs on its instance's network, under three models (``docs/cost-models.md``).

The models are registered in :mod:`collsynth.tens.cost_models` (one module each), whose
:func:`~collsynth.tens.cost_models.price` prices a schedule under any of them by name.

Every model returns a :class:`Cost` with the latency part ``T_L_s``, the bandwidth part
``T_B_s`` and their sum ``total_s`` separately, so producers are compared on one footing.

``sync``  -- synchronous alpha-beta steps, the papers' model (Zhao et al., NSDI 2025, Section
    3.2): in step ``t`` every send moves ``(hi - lo) * chunk_bytes`` bytes; a logical send between
    non-adjacent nodes (``routing == "shortest-path"``: Swing, recursive doubling on a torus) is
    routed on ``topology.shortest_path(u, v)`` and loads every link it crosses. Per directed
    node pair ``l`` (parallel links pooled: their bandwidths add) ``load_l(t)`` is the bytes
    crossing it; the step's bandwidth time is ``max_l load_l(t) / bandwidth_l`` and its latency
    the largest route latency (sum of the per-hop ``alpha``) of its sends.
    ``T_L = sum_t latency(t)``, ``T_B = sum_t bandwidth time(t)``, total = T_L + T_B.
    ``extra["T_B_chunks"]`` is the exact :class:`~fractions.Fraction`
    ``sum_t max_l load_l(t) / count_l`` in chunks (BFB's ``sum_t max_u U*[u, t]``, LP (3) of
    the same paper, Section 6.1), so ``T_B = T_B_chunks * chunk_bytes / b`` with ``b`` the per-link
    bandwidth; it is ``None`` unless every link has the same bandwidth and every chunk the same
    size. ``extra["coupled_s"]`` is the alpha-beta step cost taken literally per link (Zhao et
    al., NSDI 2025, Section 3.2), ``sum_t max_l (alpha_l + load_l / bw_l)`` over the links each
    step uses (equal to ``total_s`` on homogeneous direct-link schedules).

``ten``   -- TEN timesteps (Won et al., TACOS, 2023, Sections IV-A and IV-C): a timestep lasts
    ``f = min_l (alpha_l + chunk_bytes / b_l)`` (:func:`collsynth.tens.ten.build_ten`), link pair
    ``l`` needs ``k_l = ceil((alpha_l + chunk_bytes / b_l) / f)`` timesteps per chunk and has
    ``count_l`` parallel links, each carrying one chunk at a time (a link faster than a
    timestep chosen longer than the cheapest link, e.g. TE-CCL's slowest-link epoch, carries
    ``floor((f - alpha_l) * b_l / chunk_bytes)`` chunks per timestep:
    :func:`collsynth.tens.ten.chunks_per_timestep`). Sends are dispatched in
    schedule order (stable by step), each as soon as possible: at the first timestep after its
    piece is ready at the source at which one of the pair's parallel links is free for ``k``
    timesteps (earlier gaps are back-filled); it arrives at the end of ``start + k - 1``.
    ``total_s = (last arrival timestep) * f``; ``T_L_s = timesteps * min(alpha_*, f)`` where
    ``alpha_*`` is the latency of the link defining ``f``, and ``T_B_s`` the remainder.
    With a pipelined latency (topology ``meta["latency"]``, TE-CCL's model,
    :func:`collsynth.tens.ten.latency_pipelined`) a hop occupies its link
    ``k_l = ceil((chunk_bytes / b_l) / f)`` timesteps from ``f = min_l chunk_bytes / b_l`` and
    arrives ``L_l = ceil(alpha_l / f)`` timesteps after it leaves the link
    (:func:`collsynth.tens.ten.link_latency`; 0 when ``alpha_l / f <= 0.1``), so the latency
    overlaps the next send; ``T_L_s`` is then the latency timesteps of the last-arriving send's
    hops times ``f``.

The ``sync`` step time ``max_l (alpha_l + load_l / b_l)`` and the ``event`` model already
overlap a link's latency with its next message, so a pipelined latency leaves them unchanged:
within a step a link is busy for ``load_l / b_l`` and its last piece arrives ``alpha_l`` later.

``event`` -- congestion-aware event simulation: every directed node pair is one FIFO (its
    parallel links pooled, like ``sync``) serving one message at a time for
    ``bytes / bandwidth``; the message reaches the next node ``alpha`` after it leaves the link
    (latency overlaps the next message); store-and-forward along the fixed shortest route. A
    send starts when its piece has arrived at its source: it waits for every earlier step's
    arrival of an overlapping piece of the same chunk at the source (the schedule's data
    dependencies, :mod:`collsynth.tens.dependencies`), never for step barriers; a send out of
    a switch node waits only for the arrivals it forwards
    (:func:`collsynth.tens.dependencies.switch_forwards`), as a switch stores nothing. ``T_L_s`` is
    the latency summed along the critical path, ``T_B_s`` the serialisation on it
    (``total_s = T_L_s + T_B_s``).

Each model streams over the sends in step order in one compiled loop (:mod:`collsynth.tens.sync_kernel`,
:mod:`collsynth.tens.ten_kernel`, :mod:`collsynth.tens.event_kernel`) and walks routes per
distinct (source, destination) pair (:mod:`collsynth.tens.routing`); memory is a few int32/float64 columns per send.
The lower bounds reported beside every result are in :mod:`collsynth.tens.bounds`.

>>> from collsynth.instances.generators import build
>>> from collsynth.instances.instance import make_instance
>>> from collsynth.tens.schedule import from_arrays
>>> inst = make_instance(build("ring", {"nodes": 4, "bidirectional": False}, bandwidth=1.0, alpha=1.0),
...                      "allgather", message_bytes=4.0)
>>> n = 4; s = [t for t in range(1, n) for u in range(n)]
>>> ring = from_arrays("allgather", n, n, chunk=[(u - t + 1) % n for t in range(1, n) for u in range(n)],
...                    src=[u for t in range(1, n) for u in range(n)],
...                    dst=[(u + 1) % n for t in range(1, n) for u in range(n)], step=s)
>>> c = price_sync(ring, inst); (c.T_L_s, c.T_B_s, str(c.extra["T_B_chunks"]))
(3.0, 3.0, '3')
>>> [round(price(ring, inst).total_s, 9) for price in (price_ten, price_event)]
[6.0, 6.0]
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
from numba import njit

from .. import InputError
from ..instances.instance import Instance
from ..instances.topology import Topology
from . import event_kernel, event_layout, heap, sync_kernel, ten_kernel
from .dependencies import PAIR_BUDGET, counting_order, dependency_pairs
from .plan import PricingPlan
from .routing import MAX_INDEX, Routes, routes
from .schedule import Schedule
from .ten import REL_TOL, NotSupported, instant_hops, latency_pipelined, link_delays, link_latency

__all__ = ["EVENT_RECORDS", "PAIR_BUDGET", "PER_STEP_LIMIT", "Cost", "PricingPlan", "Routes", "chunk_bytes_of",
           "event_records_of", "plan_for", "prepare_event", "price_event", "price_sync", "price_ten", "routes",
           "ten_parameters"]

PER_STEP_LIMIT = 2000  # extra["per_step"] is kept for schedules with at most this many steps
DENSE_CELLS = 1 << 21  # TEN occupancy: dense (page, slot) cells up to this many, or half the sends
EVENT_LEVELS = 1024  # event queue: distinct ready times kept apart at once (later ones in a heap)
EVENT_SINGLE = True  # event model: a group of one arrival releases its waiting sends itself (no group row)


@dataclass
class Cost:
    """The price of a schedule under one model (seconds; ``steps`` as the model counts them)."""

    model: str
    steps: int
    T_L_s: float
    T_B_s: float
    total_s: float
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        """Plain fields for JSON (``extra`` values that are Fractions become strings)."""
        out = {"model": self.model, "steps": self.steps, "T_L_s": self.T_L_s, "T_B_s": self.T_B_s,
               "total_s": self.total_s}
        for k, v in self.extra.items():
            if k == "per_step":
                continue
            out[k] = str(v) if isinstance(v, Fraction) else v
        return out


def _refuse_instant_switch(schedule: Schedule, instance: Instance, model: str) -> None:
    """:class:`~collsynth.tens.ten.NotSupported` when a send crosses an instant hop (from a
    switch to an NPU when the switch hop is instant, TE-CCL's switch-to-GPU link,
    :func:`collsynth.tens.ten.instant_hops`): its data arrived in its own step, which the
    ``ten`` and ``event`` models cannot express. A send from a switch to a switch is never
    instant and is priced as any other."""
    if not len(schedule) or not instant_hops(instance.topology, schedule.src, schedule.dst).any():
        return
    raise NotSupported(f"the {model} model dispatches a send after the arrivals of earlier steps: a send from a "
                       "switch to an NPU whose hop is instant (topology switch_hop) starts in its arrival's step; "
                       "price it with the sync model or keep switch_hop = timestep")


# ---- shared preparation --------------------------------------------------------------------

def plan_for(schedule: Schedule, instance: Instance, plan: PricingPlan | None = None,
             model: str | None = None) -> PricingPlan:
    """``plan`` if it was made for ``schedule`` on ``instance``, a new plan if none was given
    (for ``model`` alone when named: once that model is done with it, it keeps nothing, so the
    model's compiled loop runs without the columns it no longer reads)."""
    if plan is None:
        return PricingPlan(schedule, instance, models=None if model is None else (model,))
    if not plan.belongs_to(schedule, instance):
        raise ValueError("the pricing plan was made for another schedule or instance")
    return plan


def chunk_bytes_of(instance: Instance, num: int | None = None) -> np.ndarray:
    """Bytes of every chunk id of the (merged) schedule: each collective's ``chunk_bytes``."""
    offs = instance.chunk_offsets
    total = offs[-1] + instance.collectives[-1].num_chunks
    out = np.zeros(max(total, num or 0), dtype=np.float64)
    for off, coll in zip(offs, instance.collectives):
        out[off:off + coll.num_chunks] = coll.chunk_bytes
    return out


def _checked_chunk_bytes(schedule: Schedule, instance: Instance) -> np.ndarray:
    cb = chunk_bytes_of(instance)
    if len(schedule) and (schedule.chunk.max() >= len(cb) or schedule.chunk.min() < 0):
        raise InputError("schedule", f"a send names a chunk outside 0..{len(cb) - 1}")
    return cb


def _homogeneous_units(schedule: Schedule, instance: Instance, cb: np.ndarray) -> np.ndarray | None:
    """``K // count_l`` per link pair (K the lcm of the counts) when per-link bandwidths and the
    chunks used are all equal (then ``T_B_chunks`` is exact), else ``None``."""
    la = instance.topology.link_arrays
    per_link_bw = la.bandwidth / la.count
    used = np.zeros(len(cb), dtype=bool)
    used[schedule.chunk] = True
    cbu = cb[used]
    if not (np.allclose(per_link_bw, per_link_bw[0], rtol=1e-12, atol=0) and np.allclose(cbu, cbu[0], rtol=1e-12, atol=0)):
        return None
    K = 1
    for c in np.unique(la.count).tolist():
        K = K * c // math.gcd(K, c)
    return (K // la.count).astype(np.int64)


# ---- sync ------------------------------------------------------------------------------------

def price_sync(schedule: Schedule, instance: Instance, plan: PricingPlan | None = None) -> Cost:
    """Synchronous alpha-beta steps with shortest-path routing and per-link loads (see module doc).

    The step time of the alpha-beta model (Zhao et al., NSDI 2025, Section 3.2). One pass over
    the sends in step order (:func:`collsynth.tens.sync_kernel.sync_steps`); per step the loads
    of the link pairs it touches, then their maxima.
    """
    la = instance.topology.link_arrays
    s = schedule
    if len(s) == 0:
        return Cost("sync", 0, 0.0, 0.0, 0.0, {"T_B_chunks": Fraction(0), "per_step": [], "coupled_s": 0.0})
    cb = _checked_chunk_bytes(s, instance)
    plan = plan_for(s, instance, plan, "sync")
    view, rt = plan.view, plan.routes
    mult = _homogeneous_units(s, instance, cb)
    lat, bw, coupled, units = sync_kernel.sync_steps(
        view.bounds, rt.r, rt.ptr, rt.links, rt.latency, view.chunk, view.lo, view.hi, s.denom, cb,
        la.bandwidth, la.alpha, np.zeros(len(la), np.int64) if mult is None else mult)
    steps_used = view.steps
    T_L, T_B = float(lat.sum()), float(bw.sum())
    extra: dict = {"coupled_s": float(coupled.sum()), "T_B_chunks": None}
    if mult is not None:
        K = int(mult[0] * la.count[0])
        extra["T_B_chunks"] = Fraction(sum(units.tolist()), s.denom * K)
    if len(steps_used) <= PER_STEP_LIMIT:
        extra["per_step"] = [(int(t), float(a), float(b)) for t, a, b in zip(steps_used, lat, bw)]
    plan.done("sync")
    return Cost("sync", s.num_steps, T_L, T_B, T_L + T_B, extra)


# ---- shared by ten and event: data dependencies ----------------------------------------------

def _dependencies(schedule: Schedule, instance: Instance) -> tuple[np.ndarray, np.ndarray]:
    """Pairs ``(i, j)``: send ``i`` needs the arrival of send ``j`` at its source (int64 arrays).

    ``j`` delivers an overlapping piece of the same chunk to ``src_i`` in an earlier step; sends
    of non-combining chunks the source holds from the start need nothing. Pairs are listed by
    ``i``, then by ``j``'s (step, index).
    """
    pairs = dependency_pairs(schedule, instance)
    if pairs is None:
        raise InputError("schedule", f"more than {PAIR_BUDGET} data dependencies between sends")
    return pairs


def _csr(key: np.ndarray, items: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``items`` grouped by ``key`` (stable): ``(ptr, grouped items)``."""
    order, ptr = counting_order(key, n)
    return ptr, items[order]


@njit(cache=True, nogil=True)
def _dependents(di, dj, n):
    """For the pairs ``(di, dj)`` (send ``di`` needs the arrival of ``dj``): ``(need, ptr,
    items)``, the number of pairs of every send as the needing one (int32), and the needing
    sends of each ``j`` (``items[ptr[j]:ptr[j + 1]]``, in pair order: a stable counting sort)."""
    need = np.zeros(n, np.int32)
    ptr = np.zeros(n + 2, np.int64)
    for x in range(len(di)):
        need[di[x]] += 1
        ptr[dj[x] + 2] += 1
    for k in range(n):
        ptr[k + 2] += ptr[k + 1]
    items = np.empty(len(di), np.int32)
    for x in range(len(di)):
        k = dj[x] + 1
        items[ptr[k]] = di[x]
        ptr[k] += 1
    return need, ptr[:n + 1], items


# ---- ten -------------------------------------------------------------------------------------

def ten_parameters(topology: Topology, chunk_bytes: float, timestep: float | None = None):
    """``(f, delay[pair], capacity[pair])`` of the TEN discretisation (Won et al., TACOS, 2023, Section IV-C).

    The TEN layer's own (:func:`collsynth.tens.ten.link_delays`): ``f = min_l (alpha_l +
    chunk_bytes / b_l)`` with ``b_l`` the per-link bandwidth unless ``timestep`` is given,
    ``delay_l = ceil((alpha_l + chunk_bytes / b_l) / f)`` and ``capacity_l`` the parallel links.
    Switches are accepted (pricing needs no point-to-point unwinding).
    """
    delay, capacity, f = link_delays(topology, chunk_bytes, timestep, switches=True)
    return f, delay[0], capacity


def price_ten(schedule: Schedule, instance: Instance, timestep: float | None = None,
              exact_deps: bool | None = None, plan: PricingPlan | None = None) -> Cost:
    """TEN-timestep makespan with ASAP dispatch and back-filling (see module doc; Won et al., TACOS, 2023, Section IV).

    Sends are processed step by step; a send's ready timestep is the latest arrival of its
    dependencies. ``exact_deps`` (default: only for fractional pieces, while finding them looks
    at no more candidates than :func:`~collsynth.tens.dependencies.pair_budget`,
    ``docs/cost-models.md``) lists them pair by pair (overlapping pieces); otherwise the latest
    arrival at its (node, chunk) over the finished steps is used (the same for whole chunks).
    A send over an instant switch-to-NPU hop raises :class:`~collsynth.tens.ten.NotSupported`.
    With ``link_order = "program"`` a send out of an NPU starts no earlier than the send before
    it on its link (:func:`link_successors`): no back-filling ahead of it.
    """
    _refuse_instant_switch(schedule, instance, "ten")
    topo = instance.topology
    la = topo.link_arrays
    cbmax = max(c.chunk_bytes for c in instance.collectives)
    f, delay, capacity = ten_parameters(topo, cbmax, timestep)
    per_link_bw = la.bandwidth / la.count
    pipelined = latency_pipelined(topo)
    occupying_alpha = np.zeros(len(la)) if pipelined else la.alpha  # pipelined: alpha only delays the arrival
    star = int(np.argmin(la.alpha + cbmax / per_link_bw))
    alpha_share = 0.0 if pipelined else min(float(la.alpha[star]), f)
    s = schedule
    if len(s) == 0:
        return Cost("ten", 0, 0.0, 0.0, 0.0, {"timestep_s": f, "timesteps": 0})
    cb = _checked_chunk_bytes(s, instance)
    plan = plan_for(s, instance, plan, "ten")
    view, rt, dep = plan.view, plan.routes, plan.deps(exact_deps)
    before = np.zeros(0, np.int32)
    if s.link_order == "program":
        after = link_successors(view.src, rt.links[rt.ptr[rt.r]], topo)
        before = np.full(len(s), -1, np.int32)
        before[after[after >= 0]] = np.flatnonzero(after >= 0)
    slot_ptr = np.zeros(len(la) + 1, dtype=np.int64)
    np.cumsum(capacity, out=slot_ptr[1:])
    exact = dep.pairs is not None
    dptr, ditems = _csr(dep.pairs[0], dep.pairs[1], len(s)) if exact else (np.zeros(1, np.int64), np.zeros(0, np.int32))
    ga, g_in, groups = dep.ga, dep.g_in, dep.groups
    del dep
    last, last_lat = ten_kernel.ten_timesteps(
        view.bounds, rt.r, rt.ptr, rt.links, view.chunk, view.lo, view.hi, s.denom, cb, cbmax, occupying_alpha,
        per_link_bw, delay, link_latency(topo, f), f, 1 - REL_TOL, slot_ptr, exact, dptr, ditems, ga, g_in, groups,
        max(DENSE_CELLS, len(s) // 2), before)
    plan.done("ten")
    total = last * f
    T_L = last_lat * f if pipelined else last * alpha_share
    return Cost("ten", last, T_L, total - T_L, total, {"timestep_s": f, "timesteps": last})


# ---- event -----------------------------------------------------------------------------------

TRIM_FROM_SENDS = 1 << 20  # price_event hands the freed C heap back before its loop from this many sends on
EVENT_RECORDS = "event records"  # the plan part prepare_event computes ahead and price_event takes


def event_records_of(plan: PricingPlan) -> tuple[np.ndarray, np.ndarray]:
    """The event model's record of every position of the plan's view (its piece's place in the
    table of piece sizes, its route, nothing released yet) and that table
    (:func:`collsynth.tens.event_layout.event_records`)."""
    view, rt = plan.view, plan.routes
    return event_layout.event_records(view.chunk, view.lo, view.hi, plan.schedule.denom, chunk_bytes_of(plan.instance),
                                      rt.r, rt.ptr)


def prepare_event(plan: PricingPlan) -> None:
    """Compute ahead, in the calling thread, what :func:`price_event` takes from ``plan``
    besides the dependency groups: the routes and the event records (:func:`event_records_of`),
    so that a thread pricing the event model meanwhile computes the groups alone and takes
    these (it waits for them while they are computed). The plan's schedule must be well formed
    (:func:`collsynth.tens.verify.malformed`): the records read its chunk ids."""
    plan.prepare(EVENT_RECORDS, event_records_of)


def _narrowest(p: np.ndarray) -> np.ndarray:
    """The counts ``p`` as int8 when every one fits (a group's arrivals a send waits for are few
    on the usual schedules), else as they are (int32)."""
    if len(p) and (p.max() > np.iinfo(np.int8).max or p.min() < np.iinfo(np.int8).min):
        return p
    return p.astype(np.int8)


def warm_event_layout() -> None:
    """Compile (or load) the event layout's kernels for both widths of what each send reads that
    :func:`price_event` passes (:func:`_narrowest`): tiny schedules reach the int8 one only; and
    the chaining of a declared program order on links (a reduction's, ``link_order =
    "program"``), which no tiny schedule has: without it a run whose kernels are interpreted
    (:mod:`collsynth.tens.interpreted`) chains them in Python (HGX H100 with four NICs a box x2,
    1 GB allreduce: 134 s of a 280 s generation)."""
    rec, _ = event_layout.event_records(*(np.zeros(1, np.int32),) * 3, 1, np.ones(1), np.zeros(1, np.int32),
                                        np.zeros(2, np.int64))
    for p in (np.zeros(1, np.int32), np.zeros(1, np.int8)):
        event_layout.hold_readers(rec, np.full(1, -1, np.int32), p)
    event_layout.chain_on_links(rec, np.zeros(1, np.int32), np.zeros(1, np.bool_), np.zeros(1, np.int32), 1)


@njit(cache=True, nogil=True)
def _hops_of(r, hops):
    """Hops of the sends whose routes are ``r`` (route ``k`` has ``hops[k]``), summed without a
    column a send."""
    total = 0
    for k in r:
        total += hops[k]
    return total


def link_successors(src: np.ndarray, first_link: np.ndarray, topology: Topology) -> np.ndarray:
    """For sends in step order (``src``, the link pair of each one's first hop), the next send
    out of the same NPU over the same link pair, -1 for the last and for sends out of a switch:
    the waits a schedule with ``link_order = "program"`` declares
    (:class:`~collsynth.tens.schedule.Schedule`).

    >>> from collsynth.instances.generators import build
    >>> star = build("switch", {"nodes": 2, "unwind": 0})
    >>> link_successors(np.array([0, 2, 0, 0, 2]), np.array([4, 7, 4, 5, 7]), star).tolist()
    [2, -1, -1, -1, -1]
    """
    n = len(src)
    out = np.full(n, -1, np.int32)
    switch = np.zeros(topology.size, bool)
    switch[list(topology.switches)] = True
    keep = np.flatnonzero(~switch[np.asarray(src, np.int64)])
    if len(keep) < 2:
        return out
    order = keep[np.argsort(first_link[keep], kind="stable")]
    same = first_link[order[1:]] == first_link[order[:-1]]
    out[order[:-1][same]] = order[1:][same]
    return out


def price_event(schedule: Schedule, instance: Instance, exact_deps: bool | None = None,
                plan: PricingPlan | None = None, links_as: np.ndarray | None = None) -> Cost:
    """Congestion-aware event simulation (see module doc): per-pair FIFO, store-and-forward.

    A queue of ready hops keyed (ready time, position in step order), kept by time level
    (:mod:`collsynth.tens.event_queue`); taking the least serves it on its link. ``T_L_s``
    sums the latencies on the critical path found by following, from the last arrival,
    whichever of data readiness or the link's previous message determined each start.
    Dependencies are explicit pairs (``exact_deps``, by default only for fractional pieces while
    finding them looks at no more candidates than
    :func:`~collsynth.tens.dependencies.pair_budget`) or group prefixes
    (:class:`~collsynth.tens.dependencies.Deps`; exact for whole chunks, and the lighter of the
    two: no pair is listed). A send over an instant switch-to-NPU hop raises
    :class:`~collsynth.tens.ten.NotSupported`. ``links_as``: per link pair, the pair whose FIFO
    it is served on (a link orbit's representative, :mod:`collsynth.tens.pipelined_event`).
    A schedule whose ``link_order`` is ``"program"``
    declares that every send out of an NPU waits for the start of the one before it on its link
    (:func:`link_successors`); without the declaration nothing changes.
    """
    _refuse_instant_switch(schedule, instance, "event")
    topo = instance.topology
    la = topo.link_arrays
    s = schedule
    n = len(s)
    if n == 0:
        return Cost("event", 0, 0.0, 0.0, 0.0, {})
    cb = _checked_chunk_bytes(s, instance)
    large = n >= TRIM_FROM_SENDS  # the C heap's freed memory is handed back at each stage (heap)
    if large:  # what the steps before freed
        heap.release_freed_heap()
    plan = plan_for(s, instance, plan, "event")
    view = plan.view
    dep = plan.deps(exact_deps)  # the groups before the routes: another
    made = plan.take(EVENT_RECORDS)  # thread may be preparing the routes and these (prepare_event) meanwhile
    if large:  # what finding the groups freed
        heap.release_freed_heap()
    rt = plan.routes
    H = _hops_of(rt.r, rt.hops)
    if H >= MAX_INDEX:
        raise InputError("schedule", f"{H} hops: at most {MAX_INDEX - 1} are supported")
    chunk, lo, hi, r, rptr, rlinks = view.chunk, view.lo, view.hi, rt.r, rt.ptr, rt.links
    src = view.src if s.link_order == "program" else None
    exact = dep.pairs is not None
    z32 = np.zeros(0, np.int32)
    need, ditems = z32, z32
    if exact:
        di, dj = dep.pairs
    else:
        order, gstart, g_in, p = dep.members, dep.gstart, dep.g_in, dep.p
    plan.done("event")  # if it was the plan's last model, the columns not kept here go now
    del view, rt, dep
    if not exact:  # group starts as int32 (positions: under MAX_INDEX), what each send reads as int8 where it fits
        gstart, p = gstart.astype(np.int32), _narrowest(p)  # (the plan's, when it dropped them, go)
    if large:  # the plan's columns
        heap.release_freed_heap()
    if exact:
        need, dptr, ditems = _dependents(di, dj, n)  # what each send waits for; the dependents of each
        del di, dj
    if made is None:  # not prepared ahead: made here, once the plan's columns not needed went
        made = event_layout.event_records(chunk, lo, hi, s.denom, cb, r, rptr)
    rec, sizes = made
    del made
    del chunk, lo, hi, r
    blocks, block_ints, waiting = np.zeros(0), np.zeros(0, np.int32), np.zeros(0, np.int32)
    if exact:
        event_layout.release_dependents(rec, dptr)
        alone = np.packbits(need == 0, bitorder="little")
        del dptr
    else:
        event_layout.hold_readers(rec, g_in, p)  # what each send reads, kept in its record meanwhile
        del g_in, p
        if large:  # the columns of what each send reads
            heap.release_freed_heap()
        blocks, block_ints, at, rows = event_layout.group_blocks(rec, order, gstart, EVENT_SINGLE)
        del order, gstart
        if large:  # the groups' member lists
            heap.release_freed_heap()
        waiting, alone = event_layout.waiting_rows(rec, at, block_ints, rows)
        del at
    if links_as is not None:  # a link orbit's sends served, and chained (program order), as one link's
        rlinks = links_as[rlinks].astype(rlinks.dtype)
    if src is not None:
        switch = np.zeros(topo.size, bool)
        switch[list(topo.switches)] = True
        event_layout.chain_on_links(rec, src, switch, rlinks, len(la))
        del src
    marked = event_kernel.marked_links(rptr, rlinks)  # the loop's copy of the links: the plan's (when dropped) go now
    del rlinks
    if large:  # the groups' fill pointers
        heap.release_freed_heap()
    best_t, T_L, served = event_kernel.event_times(rec, sizes, rptr, marked, H, la.bandwidth, la.alpha, exact, need,
                                                   ditems, alone, blocks, block_ints, waiting, EVENT_LEVELS,
                                                   s.link_order == "program")
    if served != H:
        raise InputError("schedule", "circular data dependencies: some sends never became ready")
    return Cost("event", s.num_steps, T_L, best_t - T_L, best_t, {"messages": n, "hops": H})
