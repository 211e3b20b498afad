"""The cost models as they were before the compiled kernels: the slow reference (oracle) that
tests compare :mod:`collsynth.tens.cost` with. Vectorised numpy plus plain-Python event loops
(heapq, dicts); do not use it outside the tests.

The models' rules are those of :mod:`collsynth.tens.cost` (its module docstring and
``docs/cost-models.md``); this file computes them the former, independent way: the ``sync``
loads per step with numpy, the ``ten`` occupancy in dicts, the ``event`` simulation with a
``heapq`` of ready hops.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from fractions import Fraction

import networkx as nx
import numpy as np

from collsynth import InputError
from collsynth.instances.instance import Instance
from collsynth.instances.topology import Topology
from collsynth.tens.cost import Cost  # the result type; the models below are the former loops
from collsynth.tens.cost import chunk_bytes_of  # the input (bytes per chunk id), not a model
from collsynth.tens.cost_models import MODELS
from collsynth.tens.schedule import Schedule
from reference_verify import switch_pairing

PER_STEP_LIMIT = 2000  # extra["per_step"] is kept for schedules with at most this many steps


def price(schedule: Schedule, instance: Instance, model: str = "sync", **options) -> Cost:
    """The cost of ``schedule`` on ``instance`` under ``model`` (``sync``, ``ten`` or ``event``).

    The schedule is assumed verified (:func:`collsynth.tens.verify.verify`); a send off the
    links of a ``routing == "links"`` schedule raises :class:`~collsynth.InputError`.
    ``options``: ``timestep`` (seconds) for the ``ten`` model; ``exact_deps`` (bool) forces
    how data dependencies are tracked (see :func:`price_ten`, :func:`price_event`).
    """
    if model == "sync":
        return price_sync(schedule, instance)
    if model == "ten":
        return price_ten(schedule, instance, timestep=options.get("timestep"), exact_deps=options.get("exact_deps"))
    if model == "event":
        return price_event(schedule, instance, exact_deps=options.get("exact_deps"))
    raise InputError("model", f"unknown cost model {model!r}, expected one of {', '.join(MODELS)}")


# ---- shared preparation --------------------------------------------------------------------

def _merged_conditions(instance: Instance) -> tuple[np.ndarray, np.ndarray]:
    """``(holds_at_start[chunk, node] for non-combining chunks, combining[chunk])`` over merged ids."""
    pres, comb = [], []
    for coll in instance.collectives:
        pres.append(coll.precondition if not coll.combining else np.zeros_like(coll.precondition))
        comb.append(np.full(coll.num_chunks, coll.combining))
    return np.concatenate(pres, axis=0), np.concatenate(comb)


@dataclass(frozen=True)
class Routes:
    """Link pairs each send crosses: send ``i`` uses ``links[ptr[r[i]]:ptr[r[i] + 1]]``.

    ``r`` indexes the distinct (src, dst) pairs of the schedule; routes are expanded once per
    distinct pair (the direct link when there is one, else ``topology.shortest_path``).
    ``latency[r]`` is the route's summed per-hop alpha; ``hops[r]`` its length.
    """

    r: np.ndarray
    ptr: np.ndarray
    links: np.ndarray
    latency: np.ndarray
    hops: np.ndarray

    def expand(self) -> tuple[np.ndarray, np.ndarray]:
        """``(send index, link pair)`` for every hop of every send, in send order."""
        lens = self.hops[self.r]
        send = np.repeat(np.arange(len(self.r)), lens)
        first = np.repeat(self.ptr[self.r], lens)
        within = np.arange(len(send)) - np.repeat(np.cumsum(lens) - lens, lens)
        return send, self.links[first + within]


def routes(schedule: Schedule, topology: Topology) -> Routes:
    """Route every send of ``schedule`` on ``topology`` (see :class:`Routes`)."""
    la = topology.link_arrays
    size = topology.size
    if len(schedule) and (schedule.src.max() >= size or schedule.dst.max() >= size
                          or min(schedule.src.min(), schedule.dst.min()) < 0):
        raise InputError("schedule", f"a send names a node outside 0..{size - 1}")
    key = schedule.src.astype(np.int64) * size + schedule.dst
    ukey, r = np.unique(key, return_inverse=True)
    us, vs = ukey // size, ukey % size
    direct = la.lookup(us, vs)
    paths: list[np.ndarray] = []
    for i in range(len(ukey)):
        if direct[i] >= 0:
            paths.append(direct[i:i + 1])
            continue
        u, v = int(us[i]), int(vs[i])
        if schedule.routing != "shortest-path":
            raise InputError("schedule", f"send {u}->{v} is not a live link (routing is 'links')")
        try:
            path = topology.shortest_path(u, v)
        except (KeyError, nx.NetworkXException):  # unreachable (KeyError) or a dead node
            raise InputError("schedule", f"send {u}->{v}: no live path between the nodes") from None
        hops = la.lookup(path[:-1], path[1:])
        paths.append(np.asarray(hops, dtype=np.int64))
    hops = np.fromiter((len(p) for p in paths), dtype=np.int64, count=len(paths))
    ptr = np.zeros(len(paths) + 1, dtype=np.int64)
    np.cumsum(hops, out=ptr[1:])
    links = np.concatenate(paths) if paths else np.zeros(0, np.int64)
    latency = np.add.reduceat(la.alpha[links], ptr[:-1]) if len(links) else np.zeros(0)
    return Routes(r.astype(np.int64).ravel(), ptr, links, latency, hops)


def _piece_bytes(schedule: Schedule, instance: Instance) -> np.ndarray:
    cb = chunk_bytes_of(instance)
    if len(schedule) and (schedule.chunk.max() >= len(cb) or schedule.chunk.min() < 0):
        raise InputError("schedule", f"a send names a chunk outside 0..{len(cb) - 1}")
    return (schedule.hi - schedule.lo) / schedule.denom * cb[schedule.chunk]


# ---- sync ------------------------------------------------------------------------------------

def price_sync(schedule: Schedule, instance: Instance) -> Cost:
    """Synchronous alpha-beta steps with shortest-path routing and per-link loads (see module doc).

    Loads are grouped per (step, link pair) with one ``np.unique`` + ``np.bincount``; the
    per-step maxima with ``np.maximum.reduceat``.
    """
    topo = instance.topology
    la = topo.link_arrays
    n = len(schedule)
    if n == 0:
        return Cost("sync", 0, 0.0, 0.0, 0.0, {"T_B_chunks": Fraction(0), "per_step": [], "coupled_s": 0.0})
    nbytes = _piece_bytes(schedule, instance)
    rt = routes(schedule, topo)
    send, link = rt.expand()
    L = len(la)
    step = schedule.step.astype(np.int64)
    # per (step, link) loads
    key = step[send] * L + link
    ukey, inv = np.unique(key, return_inverse=True)
    load = np.bincount(inv, weights=nbytes[send])
    kstep, klink = ukey // L, ukey % L
    bw_time = load / la.bandwidth[klink]
    starts = np.flatnonzero(np.r_[True, kstep[1:] != kstep[:-1]])
    steps_used = kstep[starts]
    step_bw = np.maximum.reduceat(bw_time, starts)
    coupled = np.maximum.reduceat(bw_time + la.alpha[klink], starts)
    # per-step latency: the largest route latency among the step's sends
    order = np.argsort(step, kind="stable")
    sstep = step[order]
    sstarts = np.flatnonzero(np.r_[True, sstep[1:] != sstep[:-1]])
    step_lat = np.maximum.reduceat(rt.latency[rt.r][order], sstarts)  # same step order as steps_used
    T_L = float(step_lat.sum())
    T_B = float(step_bw.sum())
    extra: dict = {"coupled_s": float(coupled.sum()), "T_B_chunks": None}
    # exact chunk units when links and chunks are homogeneous
    per_link_bw = la.bandwidth / la.count
    cb = chunk_bytes_of(instance)[np.unique(schedule.chunk)]
    if np.allclose(per_link_bw, per_link_bw[0], rtol=1e-12, atol=0) and np.allclose(cb, cb[0], rtol=1e-12, atol=0):
        K = 1
        for c in np.unique(la.count).tolist():
            K = K * c // math.gcd(K, c)
        units = np.bincount(inv, weights=(schedule.hi - schedule.lo)[send].astype(np.float64))
        units = np.rint(units).astype(np.int64) * (K // la.count[klink])
        extra["T_B_chunks"] = Fraction(int(np.maximum.reduceat(units, starts).sum()), schedule.denom * K)
    if len(steps_used) <= PER_STEP_LIMIT:
        extra["per_step"] = [(int(t), float(a), float(b)) for t, a, b in zip(steps_used, step_lat, step_bw)]
    return Cost("sync", schedule.num_steps, T_L, T_B, T_L + T_B, extra)


# ---- shared by ten and event: data dependencies ----------------------------------------------

PAIR_BUDGET = 4_000_000  # candidates for explicit dependency pairs (or two per send) beyond this: prefix mode


def pair_budget(sends: int) -> int:
    """Candidates the exact pairs may look at (see :func:`_candidates`)."""
    return max(PAIR_BUDGET, 2 * sends)


def _candidates(s: Schedule, cnt: np.ndarray, looked: np.ndarray) -> int:
    """How many arrivals the exact pairs look at, in plain Python (``docs/cost-models.md``,
    ``event``): a send whose arrival group (its source and chunk) holds pieces that, sorted by
    start, also ascend by end (pairwise disjoint pieces, or the same piece several times, as
    every child of a relay sends it in a reduction) looks only at the group's pieces
    overlapping its own, in earlier steps or not; otherwise at the group's arrivals in earlier
    steps (``cnt``). Only the sends in ``looked`` count (not those out of a switch)."""
    groups: dict = {}
    for j in range(len(s)):
        groups.setdefault((int(s.dst[j]), int(s.chunk[j])), []).append((int(s.lo[j]), int(s.hi[j])))
    bisected = {}
    for key, pieces in groups.items():
        pieces.sort()  # by start, then end
        bisected[key] = all(a[1] <= b[1] for a, b in zip(pieces, pieces[1:]))
    total = 0
    for i in np.flatnonzero(looked & (cnt > 0)).tolist():
        key = (int(s.src[i]), int(s.chunk[i]))
        if bisected[key]:
            total += sum(1 for a, b in groups[key] if a < s.hi[i] and s.lo[i] < b)
        else:
            total += int(cnt[i])
    return total


@dataclass(frozen=True)
class _Deps:
    """Data dependencies of every send (shared by the ``ten`` and ``event`` models).

    Arrivals are grouped by (node, chunk) and sorted by step. Send ``i`` depends on the first
    ``p[i]`` arrivals of group ``g[i]`` (its source and chunk, steps before its own); ``g[i]`` is
    -1 when it depends on nothing (the source holds a non-combining chunk from the start, or
    nothing arrives there earlier). Send ``j`` is arrival ``pos[j]`` (an index into the sorted
    arrivals ``order``; its group is ``ga[j]``). ``exact`` pairs ``(i, j)`` keep only
    overlapping pieces; without them (whole-chunk schedules, or more than :func:`pair_budget`
    candidates, :func:`_candidates`) the prefix of the group is used, which is exact for whole
    chunks and conservative for pieces.
    """

    g: np.ndarray
    p: np.ndarray
    gstart: np.ndarray
    gsize: np.ndarray
    ga: np.ndarray
    pos: np.ndarray
    order: np.ndarray
    pairs: tuple[np.ndarray, np.ndarray] | None


def _deps(schedule: Schedule, instance: Instance, want_pairs: bool | None = None) -> _Deps:
    """Group arrivals and locate every send's prefix (one lexsort and a few searchsorted)."""
    s = schedule
    n = len(s)
    pre, _ = _merged_conditions(instance)
    C = max(pre.shape[0], int(s.chunk.max()) + 1)
    T = int(s.step.max()) + 2
    key_in = s.dst.astype(np.int64) * C + s.chunk  # ids are int32: flat keys widen first
    key_out = s.src.astype(np.int64) * C + s.chunk
    order = np.lexsort((s.step, key_in))
    ks = key_in[order]
    starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
    ukeys = ks[starts]
    gsize = np.diff(np.r_[starts, n])
    ga = np.empty(n, dtype=np.int64)
    ga[order] = np.repeat(np.arange(len(starts)), gsize)
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    comp = ks * T + s.step[order]
    g0 = np.searchsorted(comp, key_out * T, side="left")
    g1 = np.searchsorted(comp, key_out * T + s.step, side="left")
    held = np.zeros(n, dtype=bool)
    inside = s.chunk < pre.shape[0]
    held[inside] = pre[s.chunk[inside], s.src[inside]]
    cnt = np.where(held, 0, g1 - g0)
    gi = np.searchsorted(ukeys, key_out)
    g = np.where(cnt > 0, np.minimum(gi, len(ukeys) - 1), -1)
    whole = bool(((s.lo == 0) & (s.hi == s.denom)).all())
    if want_pairs is None:
        want_pairs = not whole
    pairs = None
    live = [v for v in instance.topology.switches if v in instance.topology.graph]
    looked = ~np.isin(s.src, live) if _leaves_a_switch(schedule, instance) else np.ones(n, bool)
    if want_pairs and _candidates(s, cnt, looked) <= pair_budget(n):
        i = np.repeat(np.arange(n), cnt)
        within = np.arange(len(i)) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        j = order[np.repeat(g0, cnt) + within]
        ok = (s.lo[j] < s.hi[i]) & (s.lo[i] < s.hi[j])
        pairs = (i[ok], j[ok])
    forwards = switch_pairing(schedule, instance)[0] if _leaves_a_switch(schedule, instance) else None
    if forwards is not None:  # a send out of a switch needs the arrival it forwards, listed pair by pair
        if pairs is None:
            i = np.repeat(np.arange(n), cnt)
            within = np.arange(len(i)) - np.repeat(np.cumsum(cnt) - cnt, cnt)
            j = order[np.repeat(g0, cnt) + within]
            ok = (s.lo[j] < s.hi[i]) & (s.lo[i] < s.hi[j])
            pairs = (i[ok], j[ok])
        keep = ~np.isin(s.src[pairs[0]], live)  # a send out of a switch needs what it forwards, nothing else
        fi = np.array([a for a, _ in forwards], dtype=np.int64)
        fj = np.array([b for _, b in forwards], dtype=np.int64)
        pi, pj = np.concatenate([pairs[0][keep], fi]), np.concatenate([pairs[1][keep], fj])
        by = np.lexsort((pj, s.step[pj], pi))
        pairs = (pi[by], pj[by])
    return _Deps(g, cnt, starts, gsize, ga, pos, order, pairs)


def _leaves_a_switch(schedule: Schedule, instance: Instance) -> bool:
    live = [v for v in instance.topology.switches if v in instance.topology.graph]
    return bool(np.isin(schedule.src, live).any())


def _dependencies(schedule: Schedule, instance: Instance) -> tuple[np.ndarray, np.ndarray]:
    """Pairs ``(i, j)``: send ``i`` needs the arrival of send ``j`` at its source.

    ``j`` delivers an overlapping piece of the same chunk to ``src_i`` in an earlier step.
    Sends of non-combining chunks the source holds from the start need nothing. One lexsort
    and ``searchsorted``; the pairs are expanded with ``np.repeat`` and filtered on overlap.
    """
    d = _deps(schedule, instance, want_pairs=True)
    if d.pairs is None:
        raise InputError("schedule", f"more than {PAIR_BUDGET} data dependencies between sends")
    return d.pairs


def _csr(i: np.ndarray, j: np.ndarray, n: int) -> tuple[list, list]:
    """Dependents of each ``j`` as Python lists (``ptr``, ``items``) for the event loops."""
    order = np.argsort(j, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(j, minlength=n), out=ptr[1:])
    return ptr.tolist(), i[order].tolist()


# ---- ten -------------------------------------------------------------------------------------

def ten_parameters(topology: Topology, chunk_bytes: float, timestep: float | None = None):
    """``(f, delay[pair], capacity[pair])`` of the TEN discretisation (TACOS section IV-C).

    The definitions of :func:`collsynth.tens.ten.build_ten`, written out again here (none of its
    functions is used): ``f = min_l (alpha_l + chunk_bytes / b_l)`` with ``b_l`` the per-link
    bandwidth unless ``timestep`` is given, ``delay_l = ceil((alpha_l + chunk_bytes / b_l) / f)``
    and ``capacity_l`` the chunks the pair carries per timestep: its parallel links times the
    most chunks one link sends back to back within ``f`` (the latency once, then one chunk
    every ``chunk_bytes / b_l``; at least one), found here by bisection. Unlike ``build_ten`` it
    accepts switches (pricing needs no point-to-point unwinding).
    """
    la = topology.link_arrays
    cost = [alpha + chunk_bytes / (bw / max(count, 1))
            for alpha, bw, count in zip(la.alpha.tolist(), la.bandwidth.tolist(), la.count.tolist())]
    f = min(cost) if timestep is None else float(timestep)
    if not f > 0 or not math.isfinite(f):
        raise InputError("timestep", f"expected a positive number of seconds, got {timestep!r}")
    fits = []
    for alpha, bw, count in zip(la.alpha.tolist(), la.bandwidth.tolist(), la.count.tolist()):
        per_chunk = chunk_bytes / (bw / count)
        room = (f - alpha) * (1 + 1e-9)
        lo, hi = 1, 2
        while hi * per_chunk <= room:  # hi chunks still fit: look further
            lo, hi = hi, 2 * hi
        while hi - lo > 1:  # lo chunks fit, hi do not
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if mid * per_chunk <= room else (lo, mid)
        fits.append(int(count) * lo)
    return f, _timesteps(cost, f), np.asarray(fits, dtype=np.int64)


def _timesteps(cost_s, f: float) -> np.ndarray:
    """``ceil(cost / f)`` of each cost, at least 1; a cost within a relative 1e-9 of a multiple of
    ``f`` is not rounded up (3 * 0.1 s over 0.1 s is 3 timesteps, not 4)."""
    return np.array([max(1, math.ceil(c / f * (1 - 1e-9))) for c in cost_s], dtype=np.int64)


def _first_free(nxt: dict, s: int) -> int:
    """Smallest free timestep >= s of one link (``nxt[t] = t + 1`` marks t busy; path halving)."""
    while s in nxt:
        t = nxt[s]
        if t in nxt:
            nxt[s] = nxt[t]
        s = t
    return s


def _place(nxt: dict, s: int, k: int) -> int:
    """First start >= s with timesteps ``start .. start + k - 1`` all free on one link."""
    while True:
        s = _first_free(nxt, s)
        for t in range(s + 1, s + k):
            if t in nxt:
                s = t
                break
        else:
            return s


def price_ten(schedule: Schedule, instance: Instance, timestep: float | None = None,
              exact_deps: bool | None = None) -> Cost:
    """TEN-timestep makespan with ASAP dispatch and back-filling (see module doc; TACOS IV).

    Sends are processed step by step; a send's ready timestep is the latest arrival of its
    dependencies. ``exact_deps`` (default: only for fractional pieces) lists them pair by pair
    (overlapping pieces); otherwise a per-(node, chunk) maximum over finished steps is used
    (the same for whole chunks, and O(1) per send).
    """
    topo = instance.topology
    la = topo.link_arrays
    cbmax = max(c.chunk_bytes for c in instance.collectives)
    f, delay, capacity = ten_parameters(topo, cbmax, timestep)
    per_link_bw = la.bandwidth / la.count
    link_cost = la.alpha + cbmax / per_link_bw
    star = int(np.argmin(link_cost))
    alpha_share = min(float(la.alpha[star]), f)
    n = len(schedule)
    if n == 0:
        return Cost("ten", 0, 0.0, 0.0, 0.0, {"timestep_s": f, "timesteps": 0})
    s = schedule
    nbytes = _piece_bytes(s, instance)
    rt = routes(s, topo)
    hsend, hlink = rt.expand()
    # timesteps each hop takes: the TEN delay for a whole largest chunk, else ceil(cost / f)
    cost = la.alpha[hlink] + nbytes[hsend] / per_link_bw[hlink]
    k = _timesteps(cost.tolist(), f)
    whole = np.isclose(nbytes[hsend], cbmax, rtol=1e-12, atol=0)
    k[whole] = delay[hlink[whole]]
    hptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(rt.hops[rt.r], out=hptr[1:])
    hptr_l, hlink_l, k_l = hptr.tolist(), hlink.tolist(), k.tolist()
    cap = capacity.tolist()
    dep = _deps(s, instance, exact_deps)
    if dep.pairs is not None:  # exact overlapping pieces: for each i, the j it depends on
        dptr, ditems = _csr(dep.pairs[1], dep.pairs[0], n)
    g_l = dep.g.tolist()
    ga_l = dep.ga.tolist()
    gmax = [0] * len(dep.gstart)  # per group: latest arrival over the steps already finished
    order = np.argsort(s.step, kind="stable")
    bounds = np.flatnonzero(np.r_[True, np.diff(s.step[order]) != 0, True]).tolist()
    order_l = order.tolist()
    arrival = [0] * n
    occupancy: dict[int, list[dict]] = {}
    last = 0
    for b0, b1 in zip(bounds[:-1], bounds[1:]):  # one step at a time
        batch = order_l[b0:b1]
        for i in batch:
            if dep.pairs is not None:
                ready = 0
                for q in range(dptr[i], dptr[i + 1]):
                    a = arrival[ditems[q]]
                    if a > ready:
                        ready = a
            else:
                ready = gmax[g_l[i]] if g_l[i] >= 0 else 0
            t = ready + 1
            for h in range(hptr_l[i], hptr_l[i + 1]):
                l, kk = hlink_l[h], k_l[h]
                links = occupancy.get(l)
                if links is None:
                    links = occupancy[l] = [{} for _ in range(cap[l])]
                if len(links) == 1:
                    best, nxt = _place(links[0], t, kk), links[0]
                else:
                    best, bi = None, 0
                    for bb, cand in enumerate(links):
                        st = _place(cand, t, kk)
                        if best is None or st < best:
                            best, bi = st, bb
                    nxt = links[bi]
                for u in range(best, best + kk):
                    nxt[u] = u + 1
                t = best + kk  # arrival at the end of best + kk - 1; the next hop may start at best + kk
            arrival[i] = t - 1
            if t - 1 > last:
                last = t - 1
        for i in batch:  # this step's arrivals become visible to later steps
            gg = ga_l[i]
            if arrival[i] > gmax[gg]:
                gmax[gg] = arrival[i]
    total = last * f
    T_L = last * alpha_share
    return Cost("ten", last, T_L, total - T_L, total, {"timestep_s": f, "timesteps": last})


# ---- event -----------------------------------------------------------------------------------

def price_event(schedule: Schedule, instance: Instance, exact_deps: bool | None = None) -> Cost:
    """Congestion-aware event simulation (see module doc): per-pair FIFO, store-and-forward.

    A heap of (ready time, schedule order, hop, predecessor) events; popping an event serves the
    message on its link (FIFO by ready time, ties in schedule order). ``T_L_s`` sums the
    latencies on the critical path found by following, from the last arrival, whichever of
    data readiness or the link's previous message determined each start.

    Dependencies are explicit pairs (``exact_deps``, by default only for fractional pieces while
    finding them looks at at most :func:`pair_budget` candidates) or group prefixes (see
    :class:`_Deps`; exact for whole chunks). With ``link_order == "program"`` a send out of an NPU whose first hop is taken
    before the start of the previous send (schedule order) out of the same node over the same
    first link is held, and pushed again when that one starts, at the later of its own ready
    time and that start, with the event that made it ready.
    """
    topo = instance.topology
    la = topo.link_arrays
    s = schedule
    n = len(s)
    if n == 0:
        return Cost("event", 0, 0.0, 0.0, 0.0, {})
    nbytes = _piece_bytes(s, instance)
    rt = routes(s, topo)
    hsend, hlink = rt.expand()
    H = len(hlink)
    hptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(rt.hops[rt.r], out=hptr[1:])
    # per hop (= event id): link, serialisation, latency, send, is-last-hop
    hop_link = hlink.tolist()
    hop_dur = (nbytes[hsend] / la.bandwidth[hlink]).tolist()
    hop_alpha = la.alpha[hlink].tolist()
    hop_send = hsend.tolist()
    last_hop = np.zeros(H, dtype=bool)
    last_hop[hptr[1:] - 1] = True
    hop_last = last_hop.tolist()
    first_hop = hptr[:-1].tolist()
    dep = _deps(s, instance, exact_deps)
    exact = dep.pairs is not None
    if exact:
        di, dj = dep.pairs
        need = np.bincount(di, minlength=n).tolist()
        dptr, ditems = _csr(di, dj, n)  # dependents of each j
    else:
        # prefix mode: send i waits for the first p[i] arrivals of group g[i]; per group the
        # waiting sends sorted by p, a frontier of completed arrivals and its running maximum
        need = np.where(dep.g >= 0, 1, 0).tolist()
        waiting = np.flatnonzero(dep.g >= 0)
        w_order = waiting[np.lexsort((dep.p[waiting], dep.g[waiting]))]
        w_ptr = np.zeros(len(dep.gstart) + 1, dtype=np.int64)
        np.cumsum(np.bincount(dep.g[waiting], minlength=len(dep.gstart)), out=w_ptr[1:])
        w_send, w_p = w_order.tolist(), dep.p[w_order].tolist()
        w_next = w_ptr[:-1].tolist()
        w_end = w_ptr[1:].tolist()
        gstart, gsize = dep.gstart.tolist(), dep.gsize.tolist()
        frontier = [0] * len(gstart)
        done = [False] * n  # by sorted arrival position
        arr_at = [0.0] * n
        from_at = [-1] * n
        pmax = [0.0] * n  # running max of the first k+1 arrivals of the group, at position start+k
        pfrom = [-1] * n
        pos_l, ga_l = dep.pos.tolist(), dep.ga.tolist()
    seq = np.empty(n, dtype=np.int64)
    seq[np.argsort(s.step, kind="stable")] = np.arange(n)
    seq_l = seq.tolist()
    before, after = [-1] * n, [-1] * n  # the declared program order: the previous / next send on the link
    if s.link_order == "program":
        previous = {}
        for i in np.argsort(s.step, kind="stable").tolist():
            if int(s.src[i]) in topo.switches:
                continue
            key = hop_link[first_hop[i]]
            if key in previous:
                before[i], after[previous[key]] = previous[key], i
            previous[key] = i
    started = [False] * n
    held = {}  # send: (ready time, event that made it ready), taken before the previous send on its link started
    ready = [0.0] * n
    ready_from = [-1] * n  # hop (event) whose arrival made send i ready
    heap = [(0.0, seq_l[i], first_hop[i], -1) for i in range(n) if need[i] == 0]
    heapq.heapify(heap)
    pop, push = heapq.heappop, heapq.heappush
    free = [0.0] * len(la)
    last_on = [-1] * len(la)
    ev_pred = [-1] * H  # predecessor event on the critical path
    ev_link = [False] * H  # True if the predecessor is the link's previous message
    best_t, best_e, served = 0.0, -1, 0
    while heap:
        t, sq, e, pred = pop(heap)
        i = hop_send[e]
        if e == first_hop[i] and before[i] >= 0 and not started[before[i]]:
            held[i] = (t, pred)
            continue
        served += 1
        l = hop_link[e]
        fl = free[l]
        if fl > t:
            start = fl
            ev_pred[e], ev_link[e] = last_on[l], True
        else:
            start = t
            ev_pred[e] = pred
        if e == first_hop[i]:
            started[i] = True
            if after[i] in held:
                ready_t, made_by = held.pop(after[i])
                push(heap, (max(ready_t, start), seq_l[after[i]], first_hop[after[i]], made_by))
        fl = start + hop_dur[e]
        free[l] = fl
        last_on[l] = e
        arr = fl + hop_alpha[e]
        if not hop_last[e]:
            push(heap, (arr, sq, e + 1, e))
            continue
        if arr > best_t or best_e < 0:
            best_t, best_e = arr, e
        i = hop_send[e]
        if exact:
            for q in range(dptr[i], dptr[i + 1]):
                d = ditems[q]
                if arr >= ready[d]:
                    ready[d], ready_from[d] = arr, e
                need[d] -= 1
                if need[d] == 0:
                    push(heap, (ready[d], seq_l[d], first_hop[d], ready_from[d]))
            continue
        q = pos_l[i]
        done[q], arr_at[q], from_at[q] = True, arr, e
        gg = ga_l[i]
        st0, f = gstart[gg], frontier[gg]
        while f < gsize[gg] and done[st0 + f]:
            at = st0 + f
            if f == 0 or arr_at[at] >= pmax[at - 1]:
                pmax[at], pfrom[at] = arr_at[at], from_at[at]
            else:
                pmax[at], pfrom[at] = pmax[at - 1], pfrom[at - 1]
            f += 1
        frontier[gg] = f
        w = w_next[gg]
        while w < w_end[gg] and w_p[w] <= f:
            d = w_send[w]
            at = st0 + w_p[w] - 1
            push(heap, (pmax[at], seq_l[d], first_hop[d], pfrom[at]))
            w += 1
        w_next[gg] = w
    if served != H:
        raise InputError("schedule", "circular data dependencies: some sends never became ready")
    # critical path: latency of every data edge on it (the last event's own alpha included)
    e = best_e
    T_L = hop_alpha[e]
    while e >= 0:
        p = ev_pred[e]
        if p >= 0 and not ev_link[e]:
            T_L += hop_alpha[p]
        e = p
    total = best_t
    return Cost("event", s.num_steps, T_L, total - T_L, total, {"messages": n, "hops": H})


# ---- lower bounds ----------------------------------------------------------------------------

def lower_bounds(instance: Instance) -> dict:
    """Lower bounds on any schedule for ``instance`` (reported beside every result).

    - ``steps``: the largest hop distance a required piece must travel: for non-combining
      collectives from the nearest precondition holder of the chunk to each node that must
      receive it; for combining ones (the dual on the transposed topology, Zhao et al., NSDI 2025, Appendix A)
      from the farthest contributor. It is at least the diameter for allgather and implies the
      Moore bound for degree-d digraphs (Zhao et al., NSDI 2025, Section 2), reported as ``moore_bound``.
    - ``inbound_steps``: TEN timesteps (TACOS: one chunk per link per timestep) a node needs to
      take in (send out) the chunks it must receive (send), over its parallel in-(out-)links:
      ``max_v ceil(chunks_v / links_v)``.
    - ``latency_s = steps * min alpha``.
    - ``bandwidth_s = max_v max(recv_bytes_v / in_bandwidth_v, send_bytes_v / out_bandwidth_v)``;
      for allgather on a regular graph ``(N-1)/N * M / B_node`` (Zhao et al., NSDI 2025, Section 3, ``T_B*``).
      A node must receive every chunk it needs and does not hold (combining: every chunk it
      must hold whose result depends on another contributor) and send every chunk only it can
      supply (combining: every chunk its contribution is needed for elsewhere).
    - ``total_s = latency_s + bandwidth_s``: valid under the ``sync`` model (each step costs at
      least its latency plus its busiest in-link's bytes over the node's in-bandwidth).
    """
    topo = instance.topology
    la = topo.link_arrays
    size = topo.size
    D = topo.distances.astype(np.float64)
    D[D < 0] = np.inf
    steps = 0.0
    recv_b = np.zeros(size)
    send_b = np.zeros(size)
    recv_c = np.zeros(size)
    send_c = np.zeros(size)
    for coll in instance.collectives:
        pre, post = coll.precondition, coll.postcondition
        used = coll.used_chunks
        pre_u, post_u = pre[used], post[used]
        cnt_pre = pre_u.sum(axis=1)
        need_all = post_u if coll.combining else post_u & ~pre_u
        single = np.flatnonzero(cnt_pre == 1)
        for b0 in range(0, len(single), 256):  # one holder: its row of D, in blocks
            rows_c = single[b0:b0 + 256]
            h = pre_u[rows_c].argmax(axis=1)
            blk = np.where(need_all[rows_c], D[h], -np.inf)
            steps = max(steps, float(blk.max(initial=0.0)))
        multi = np.flatnonzero(cnt_pre > 1)
        groups: dict[bytes, list[int]] = {}
        if len(multi):
            packed = np.packbits(pre_u[multi], axis=1)
            for r, key in zip(multi.tolist(), packed):
                groups.setdefault(key.tobytes(), []).append(r)
        for members in groups.values():  # several holders (combining: every contributor)
            holders = np.flatnonzero(pre_u[members[0]])
            rows = D[holders]
            far = rows.max(axis=0) if coll.combining else rows.min(axis=0)
            need = need_all[members].any(axis=0)
            if need.any():
                steps = max(steps, float(far[need].max()))
        if coll.combining:
            others_contribute = (cnt_pre[:, None] - pre_u) > 0
            recv = post_u & others_contribute
            cnt_post = post_u.sum(axis=1)
            needed_elsewhere = (cnt_post[:, None] - post_u) > 0
            send = pre_u & needed_elsewhere
        else:
            recv = post_u & ~pre_u
            wanted = recv.any(axis=1)
            send = pre_u & ((cnt_pre == 1) & wanted)[:, None]
        rc, sc = recv.sum(axis=0), send.sum(axis=0)
        recv_c += rc
        send_c += sc
        recv_b += rc * coll.chunk_bytes
        send_b += sc * coll.chunk_bytes
    in_bw = np.bincount(la.dst, weights=la.bandwidth, minlength=size)
    out_bw = np.bincount(la.src, weights=la.bandwidth, minlength=size)
    in_links = np.bincount(la.dst, weights=la.count, minlength=size)
    out_links = np.bincount(la.src, weights=la.count, minlength=size)
    with np.errstate(divide="ignore", invalid="ignore"):
        bw = np.maximum(np.where(recv_b > 0, recv_b / in_bw, 0.0), np.where(send_b > 0, send_b / out_bw, 0.0))
        inbound = np.maximum(np.where(recv_c > 0, np.ceil(recv_c / in_links), 0),
                             np.where(send_c > 0, np.ceil(send_c / out_links), 0))
    steps_i = int(steps) if np.isfinite(steps) else -1
    latency = steps_i * float(la.alpha.min()) if len(la) else 0.0
    bandwidth = float(bw.max()) if len(bw) else 0.0
    return {
        "steps": steps_i,
        "inbound_steps": int(inbound.max()) if len(inbound) else 0,
        "latency_s": latency,
        "bandwidth_s": bandwidth,
        "total_s": latency + bandwidth,
        "diameter": topo.diameter,
        "moore_bound": topo.moore_bound,
    }
