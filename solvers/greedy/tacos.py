"""TACOS-Greedy: randomised link-chunk matching over the time-expanded network (Won et al., TACOS, 2023, §VI).

The synthesizer walks the TEN one timestep at a time. In every timestep each free link slot
``u -> v`` is matched to a chunk that ``u`` already holds (arrival-time analysis: a chunk that
arrives at the end of step ``s`` can leave in step ``s + 1``) and that ``v`` still requests;
requests of one destination are never served twice (a chunk in flight to ``v`` is not sent to
``v`` again unless the new copy would arrive strictly earlier, in which case the slow send is
*replaced* by another chunk its source held when it started, §VI-B "chunk replacement").
Among competing in-links of one destination the shorter (fewer-timestep) link wins
("shorter-link-first", §VI-B); all other ties are broken at random with a seeded
:class:`numpy.random.Generator` (§VI-A, Fig. 15(c)). Multi-timestep links stay busy for their
whole delay. The best of several seeds, run in parallel processes, is kept (§VI-C).

Data structures are built for thousands of NPUs (design "Scale"):

- ``A[node, chunk]`` (int32): the step at the end of which ``node`` holds ``chunk`` — its
  arrival step once a send is planned, ``INF`` while nobody sends it. "Held by the end of step
  ``s``" is ``A <= s``; "in flight" is ``s < A < INF``. One matrix, updated in place.
- A *pool* of candidate (link, chunk) pairs, as numpy columns: when ``u`` gets a chunk, one
  entry per out-link of ``u`` whose destination wants it. Entries whose destination got (or
  will get as early) the chunk are dropped lazily, once per timestep, in one vectorised pass.
- Matching in rounds: per round every free link picks its best pool entry (one
  ``np.minimum.at`` over packed ``(priority, random, index)`` keys); conflicts on one
  ``(destination, chunk)`` go to the shorter link, then at random; losers try again. Where
  Hall's condition can fail (a free in-link with fewer candidates than its destination has
  free in-slots) a maximum bipartite matching (Hopcroft-Karp) of those destinations' link
  slots to requests runs first, so no link idles that could have carried a useful chunk
  (``matching="greedy"`` keeps the paper's plain randomised matching).
- Heterogeneous links: a slow link takes last the chunks that the island of faster links
  around its destination already holds or awaits (shorter-link-first at island level).

Chunks that no intermediate node wants (gather, scatter, all-to-all, collectives over a subset
of the nodes) are *relayed*: ``u -> w`` may carry chunk ``c`` for a node that does not want
it if ``w`` is strictly closer (in hops) to a node still lacking ``c``; a chunk with a single
destination keeps one copy moving (its frontier distance must strictly drop).

Combining collectives are the reversal (:func:`collsynth.tens.schedule.reverse`) of their
dual on the transposed topology (TACOS §VII-A); allreduce is reduce-scatter then allgather
(:func:`collsynth.tens.schedule.concat`); concurrent collectives are matched jointly (merged
requests with chunk offsets), their combining parts first on the transpose.

>>> from collsynth.instances.generators import build
>>> from collsynth.instances.instance import make_instance
>>> inst = make_instance(build("torus", {"dims": [3, 3]}, bandwidth=1e9, alpha=1e-6), "allgather")
>>> synthesize(inst, seed=0).num_steps  # 8 chunks over 4 in-links: 2 timesteps
2
"""

from __future__ import annotations

import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace

import numpy as np

from ... import InputError
from ...limits import Deadline, TimeLimitReached
from ...instances.collective import Collective
from ...instances.instance import Instance
from ...instances.topology import Topology
from ...tens import schedule as sched_mod
from ...tens.schedule import OP_COPY, OP_REDUCE, Schedule
from ...tens import bounds
from ...tens.ten import link_costs, link_delays
from ..producers import Options, Outcome, Param, Producer, Unsupported

INF = np.iinfo(np.int32).max
PRIORITIES = ("random", "fifo", "lifo")
MATCHINGS = ("maximum", "greedy")
_STRICT = False  # True: a slow link idles rather than import a chunk its island has
_TRACE = None  # set to a list to record the pool size per timestep (profiling)
_RAND_BITS = 20
_IDX_BITS = 31
_PRIO_BITS = 63 - _RAND_BITS - _IDX_BITS


# ---- the TEN view the greedy needs --------------------------------------------------------

@dataclass(frozen=True)
class Links:
    """Directed link pairs of a topology as the greedy sees them (TEN arcs, TACOS §IV).

    ``delay[i]`` is the number of timesteps a chunk needs on pair ``i`` (>= 1) and ``cap[i]``
    how many chunks it carries at once (parallel links). ``out_ptr``/``out_idx`` list the
    pairs leaving each node (CSR).
    """

    src: np.ndarray
    dst: np.ndarray
    delay: np.ndarray
    cap: np.ndarray
    size: int
    timestep: float
    out_ptr: np.ndarray
    out_idx: np.ndarray

    def __len__(self) -> int:
        return len(self.src)


def links(topology: Topology, chunk_bytes: float, timestep: float | None = None) -> Links:
    """Per link pair: delay ``ceil((alpha + chunk_bytes / b) / timestep)`` and capacity.

    ``b`` is one link's bandwidth (a pair of ``count`` parallel links carries ``count`` chunks
    per timestep). ``timestep`` defaults to the cheapest link's cost, so homogeneous topologies
    have delay 1 everywhere (TACOS §IV-C): :func:`collsynth.tens.ten.link_delays`, so the greedy
    and the ILP see the same TEN.
    """
    la = topology.link_arrays
    delays, cap, timestep = link_delays(topology, chunk_bytes, timestep)
    delay = delays[0]
    src = la.src.astype(np.int64)
    order = np.argsort(src, kind="stable")
    out_ptr = np.zeros(topology.size + 1, dtype=np.int64)
    np.add.at(out_ptr, src + 1, 1)
    out_ptr = np.cumsum(out_ptr)
    return Links(src, la.dst.astype(np.int64), delay, cap, topology.size, float(timestep), out_ptr, order)


# ---- the matching engine ------------------------------------------------------------------

@dataclass
class _Sends:
    """Growable send columns (``link`` index, chunk, arrival step); ``ok`` marks live sends."""

    link: np.ndarray
    chunk: np.ndarray
    arrive: np.ndarray
    ok: np.ndarray
    n: int = 0

    @classmethod
    def new(cls, cap: int = 1024) -> "_Sends":
        return cls(np.zeros(cap, np.int64), np.zeros(cap, np.int64), np.zeros(cap, np.int64), np.zeros(cap, bool))

    def extend(self, link, chunk, arrive) -> None:
        k = len(link)
        while self.n + k > len(self.link):
            grow = max(len(self.link), k)
            for name in ("link", "chunk", "arrive", "ok"):
                a = getattr(self, name)
                setattr(self, name, np.concatenate([a, np.zeros(grow, a.dtype)]))
        self.link[self.n:self.n + k] = link
        self.chunk[self.n:self.n + k] = chunk
        self.arrive[self.n:self.n + k] = arrive
        self.ok[self.n:self.n + k] = True
        self.n += k


@dataclass
class Result:
    """Raw greedy output: sends as columns (``step`` = arrival timestep) and run statistics."""

    chunk: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    step: np.ndarray
    delay: np.ndarray
    steps: int
    replaced: int
    dropped: int
    rounds: int


def match(
    lk: Links,
    avail: np.ndarray,
    want: np.ndarray,
    rng: np.random.Generator,
    *,
    distances: np.ndarray | None = None,
    priority: str = "random",
    matching: str = "maximum",
    busy: dict[int, np.ndarray] | None = None,
    max_steps: int | None = None,
    deadline: Deadline | None = None,
) -> Result:
    """Run TACOS-Greedy from holdings ``avail`` until every request in ``want`` is met.

    ``avail[node, chunk]``: the step at the end of which ``node`` holds ``chunk`` at the start
    (0 for the precondition, a later step for data that becomes ready later, ``INF`` if not
    held). ``want[node, chunk]``: the requests (postcondition). ``distances`` (hop matrix) is
    needed when some chunk must be relayed through nodes that do not want it. ``busy[step]``
    gives link slots already taken in that step (by another part of a concurrent schedule).
    ``priority`` orders a link's candidate chunks: ``random`` (TACOS), ``fifo`` (the chunk its
    source got first) or ``lifo`` (the one it got last), ties at random. ``matching``:
    ``greedy`` is the paper's randomised matching (rounds of random picks, conflicts to the
    shorter link); ``maximum`` first takes a maximum bipartite matching of link slots to
    requests per delay class (shortest links first; random among maximum matchings through a
    random relabelling), so no link idles that could serve a request, then greedy rounds.
    Returns the sends with ``step`` = the arrival timestep (COMMON convention). Past
    ``deadline`` it stops with :class:`~collsynth.limits.TimeLimitReached` saying how far it got.
    """
    if priority not in PRIORITIES:
        raise ValueError(f"priority must be one of {PRIORITIES}, got {priority!r}")
    N, C = want.shape
    A = np.array(avail, dtype=np.int32, copy=True)
    L = len(lk)
    delay = lk.delay
    lsrc, ldst = lk.src, lk.dst
    busy = busy or {}

    want0 = want
    # requests already met by the initial holdings are dropped
    want = want & (A == INF)
    if not want.any():
        return _result(lk, _Sends.new(1), 0, 0, 0)
    # chunk targets: who must end up with it; single-target chunks use a frontier distance
    ntarget = want.sum(axis=0)
    single = ntarget == 1
    target = np.where(single, np.argmax(want, axis=0), -1)
    need_relay = _needs_relay(lk, A, want)
    if need_relay and distances is None:
        raise ValueError("relaying chunks needs the hop-distance matrix")
    D = distances
    frontier = np.full(C, INF, dtype=np.int64)
    if need_relay:
        hold_n, hold_c = np.nonzero((A < INF) & single[None, :])
        if len(hold_c):
            dd = D[hold_n, target[hold_c]].astype(np.int64)
            dd[dd < 0] = INF
            np.minimum.at(frontier, hold_c, dd)
    remaining = int(want.sum())
    requests = remaining
    # arrivals bucketed by step: (node, chunk) that become usable in the step after
    buckets: dict[int, list] = {}
    n0, c0 = np.nonzero(A < INF)
    for s in np.unique(A[n0, c0]).tolist():
        m = A[n0, c0] == s
        buckets.setdefault(int(s), []).append((n0[m], c0[m]))
    release: dict[int, np.ndarray] = {}  # step -> link slots freed at its start
    free = lk.cap.astype(np.int64).copy()
    sends = _Sends.new(max(1024, 4 * L))
    # the pool: link (int32), chunk (int32), flat key dst*C+chunk into A, birth step (priority)
    pool_l = np.zeros(0, np.int32)
    pool_c = np.zeros(0, np.int32)
    pool_k = np.zeros(0, np.int64)
    pool_p = np.zeros(0, np.int32)
    A_flat = A.reshape(-1)  # a view: writes to A show here
    unit = bool((delay == 1).all())
    islands = None
    strict_islands = _STRICT
    if not unit:
        islands = _islands(lk, A)
    track_birth = priority != "random"

    def last_ok(l_idx, k_idx):
        """Entries whose destination would get the chunk strictly earlier than planned."""
        if unit:
            return A_flat[k_idx] > t
        return A_flat[k_idx] > t + delay[l_idx] - 1

    max_steps = max_steps or (4 * (int(C) + N) * int(delay.max(initial=1)) + 16)
    t = 0
    first_idx = [0]  # first_idx[s]: index of the first send started in step s
    last_send_step = 0
    replaced = dropped = rounds = 0
    pending_max = 0  # latest planned arrival: a faster copy may still overtake it
    while remaining > 0 or t + 1 < pending_max:
        t += 1
        if deadline is not None and deadline.expired():
            raise TimeLimitReached("greedy matching", f"timestep {t - 1}: {requests - remaining:,} of {requests:,} "
                                                      "requests met")
        if t > max_steps:
            raise RuntimeError(f"greedy made no progress after {max_steps} timesteps")
        if t in release:
            free += release.pop(t)
        first_idx.append(sends.n)
        # 1. new pool entries from what arrived at the end of step t-1
        for nodes, chunks in buckets.pop(t - 1, ()):
            live = A[nodes, chunks] == t - 1  # skip stale bucket entries (replaced sends)
            nodes, chunks = nodes[live], chunks[live]
            if len(nodes) == 0:
                continue
            el, ec = _expand(lk, nodes, chunks)
            keep = want[ldst[el], ec]
            if need_relay:
                keep |= _relay_ok(el, ec, lk, A, want, D, single, target, frontier, t)
            el, ec = el[keep], ec[keep]
            pool_l = np.concatenate([pool_l, el.astype(np.int32)])
            pool_c = np.concatenate([pool_c, ec.astype(np.int32)])
            pool_k = np.concatenate([pool_k, ldst[el] * C + ec])
            if track_birth:
                pool_p = np.concatenate([pool_p, np.full(len(el), t, np.int32)])
        # 2. lazy deletion: drop entries whose destination holds (or gets as early) the chunk
        if len(pool_l):
            ok = last_ok(pool_l, pool_k)
            if need_relay:
                ok &= _still_useful(pool_l, pool_c, lk, A, want, D, single, target, frontier, t)
            if not ok.all():
                pool_l, pool_c, pool_k = pool_l[ok], pool_c[ok], pool_k[ok]
                if track_birth:
                    pool_p = pool_p[ok]
        slots = free.copy()
        if _TRACE is not None:
            _TRACE.append(len(pool_l))
        if t in busy:
            slots -= busy[t]
        # 3. matching: a maximum matching per delay class (shorter links first), then rounds
        def commit(wl, wc):
            nonlocal remaining, replaced, dropped, last_send_step, pending_max
            wd = ldst[wl]
            arrive = t + delay[wl] - 1
            old = A[wd, wc].astype(np.int64)
            # arrival-time analysis: the earlier copy wins, later planned sends get replaced
            better = arrive < old
            wl, wc, wd, arrive, old = wl[better], wc[better], wd[better], arrive[better], old[better]
            if len(wl) == 0:
                return
            np.subtract.at(slots, wl, 1)
            np.subtract.at(free, wl, 1)
            for d in np.unique(delay[wl]).tolist():
                m = delay[wl] == d
                rel = release.setdefault(t + d, np.zeros(L, np.int64))
                np.add.at(rel, wl[m], 1)
            newly = old == INF
            remaining -= int(want[wd[newly], wc[newly]].sum())
            A[wd, wc] = arrive
            _mark_islands(islands, wd, wc)
            pending_max = max(pending_max, int(arrive.max()))
            sends.extend(wl, wc, arrive)
            last_send_step = t
            _bucket(buckets, wd, wc, arrive)
            if need_relay:
                fd = D[wd, np.maximum(target[wc], 0)].astype(np.int64)
                s_ = single[wc]
                np.minimum.at(frontier, wc[s_], fd[s_])
            if (~newly).any():
                r, d_, met = _replace(sends, lk, A, want, rng, wd[~newly], wc[~newly], old[~newly], buckets, first_idx)
                replaced += r
                dropped += d_
                remaining -= met

        def valid(idx):
            idx = idx[slots[pool_l[idx]] > 0]  # cheap test first: most links are matched
            okk = last_ok(pool_l[idx], pool_k[idx])
            if need_relay:
                okk &= _still_useful(pool_l[idx], pool_c[idx], lk, A, want, D, single, target, frontier, t)
            return idx[okk]

        active = np.flatnonzero(slots[pool_l] > 0) if len(pool_l) else np.zeros(0, np.int64)
        if matching == "maximum" and len(active):
            # Hall: a destination whose every free in-link has at least as many candidates as
            # the destination has free in-slots is served fully by the greedy rounds; only the
            # other ("hard") destinations need the maximum matching
            ll = pool_l[active]
            cnt = np.bincount(ll, minlength=L)
            open_ = np.where((slots > 0) & (cnt > 0), slots, 0)
            need = np.bincount(ldst, weights=open_, minlength=N)
            hard_link = (open_ > 0) & (cnt < need[ldst])
            if hard_link.any():
                hard_dst = np.zeros(N, dtype=bool)
                hard_dst[ldst[hard_link]] = True
                sub = active[hard_dst[ldst[ll]]]
                for d in np.unique(delay[pool_l[sub]]).tolist():
                    act = valid(sub[delay[pool_l[sub]] == d])
                    if len(act):
                        ml, mc = _max_matching(pool_l[act], pool_c[act], slots, ldst, want, single, C, rng)
                        commit(ml, mc)
                active = valid(active)
        while len(active):
            rounds += 1
            al, ac = pool_l[active], pool_c[active]
            dom = None
            if not unit:  # shorter-link-first across links: a slow link takes a chunk last if
                # the island of faster links around its destination already has it
                dom = _dominated(al, ac, lk, islands)
                if strict_islands and dom.any():  # or never: it waits for a useful chunk
                    active, al, ac = active[~dom], al[~dom], ac[~dom]
                    dom = None
                    if not len(active):
                        break
            key = (rng.integers(0, 1 << _RAND_BITS, len(active), dtype=np.int64) << _IDX_BITS) | np.arange(
                len(active), dtype=np.int64)
            if track_birth:
                key |= _prio_column(pool_p[active].astype(np.int64), priority, t) << (_RAND_BITS + _IDX_BITS)
            if dom is not None:
                key |= dom.astype(np.int64) << 62
            best = np.full(L, np.iinfo(np.int64).max, dtype=np.int64)
            np.minimum.at(best, al, key)
            pick_links = np.flatnonzero(best != np.iinfo(np.int64).max)
            pick = best[pick_links] & ((1 << _IDX_BITS) - 1)
            pl, pc = al[pick], ac[pick]
            pd = ldst[pl]
            # conflicts on one (destination, chunk): shorter link first, then at random
            # (a single-target chunk keeps one copy moving: its relays conflict on the chunk)
            group = np.where(single[pc] & ~want[pd, pc], -1 - pc, pd * C + pc)
            order = np.lexsort((rng.random(len(pick)), delay[pl], group))
            key2 = group[order]
            first = np.ones(len(order), dtype=bool)
            first[1:] = key2[1:] != key2[:-1]
            win = order[first]
            commit(pl[win], pc[win])
            # the picked entries are spent (sent, or beaten to their destination)
            rest = np.ones(len(active), dtype=bool)
            rest[pick] = False
            active = valid(active[rest])
        if remaining > 0 and not buckets and not release and t > last_send_step and t > max(busy, default=0):
            raise RuntimeError(f"greedy is stuck at timestep {t}: {remaining} requests cannot be served")
    pruned = _prune(sends, lk, want0)
    return _result(lk, sends, replaced, dropped + pruned, rounds)


def _prune(sends: _Sends, lk: Links, want: np.ndarray) -> int:
    """Drop relay sends whose receiver neither wants the chunk nor forwards it (to a fixpoint).

    Such sends are harmless forwards but would make a reversed (combining) schedule send from
    a node without contribution. Every (node, chunk) is received at most once, so a forward
    from the receiver is necessarily later than the arrival."""
    C = want.shape[1]
    total = 0
    while True:
        idx = np.flatnonzero(sends.ok[:sends.n])
        link, chunk = sends.link[idx], sends.chunk[idx]
        dst = lk.dst[link]
        relay = ~want[dst, chunk]
        if not relay.any():
            return total
        fwd = lk.src[link] * C + chunk
        useless = relay & ~np.isin(dst * C + chunk, fwd)
        if not useless.any():
            return total
        sends.ok[idx[useless]] = False
        total += int(useless.sum())


def _max_matching(pl, pc, slots, ldst, want, single, C, rng):
    """Maximum bipartite matching of link slots to (destination, chunk) requests.

    Rows are link slots (a pair with ``k`` free slots gives ``k`` rows), columns the requests
    (a relayed single-target chunk is one column: one copy moves). Rows and columns are
    randomly relabelled, so different seeds find different maximum matchings. Hopcroft-Karp
    (:func:`scipy.sparse.csgraph.maximum_bipartite_matching`).
    """
    import scipy.sparse as sp
    from scipy.sparse.csgraph import maximum_bipartite_matching

    pd = ldst[pl]
    group = np.where(single[pc] & ~want[pd, pc], -1 - pc, pd * C + pc)
    links_u, row_of = np.unique(pl, return_inverse=True)
    k = slots[links_u]
    # slot rows: link j has k[j] rows; expand edges per slot (capacity > 1 is rare)
    if (k > 1).any():
        rep = k[row_of]
        e_idx = np.repeat(np.arange(len(pl)), rep)
        slot_base = np.cumsum(k) - k
        within = np.arange(len(e_idx)) - np.repeat(np.cumsum(rep) - rep, rep)
        rows = slot_base[row_of[e_idx]] + within
        nrows = int(k.sum())
        row_link = np.repeat(links_u, k)
    else:
        e_idx = np.arange(len(pl))
        rows = row_of
        nrows = len(links_u)
        row_link = links_u
    cols_u, col_of = np.unique(group[e_idx], return_inverse=True)
    col_chunk = np.zeros(len(cols_u), np.int64)
    col_chunk[col_of] = pc[e_idx]
    rperm = rng.permutation(nrows)
    cperm = rng.permutation(len(cols_u))
    M = sp.csr_matrix((np.ones(len(e_idx), np.int8), (rperm[rows], cperm[col_of])), shape=(nrows, len(cols_u)))
    m = maximum_bipartite_matching(M, perm_type="column")  # m[row] = matched column or -1
    hit = np.flatnonzero(m >= 0)
    inv_r = np.empty(nrows, np.int64)
    inv_r[rperm] = np.arange(nrows)
    inv_c = np.empty(len(cols_u), np.int64)
    inv_c[cperm] = np.arange(len(cols_u))
    return row_link[inv_r[hit]], col_chunk[inv_c[m[hit]]]


def _islands(lk: Links, A: np.ndarray) -> dict:
    """Per delay class ``d`` above the smallest: the islands (weak components) of the links
    faster than ``d``, and which island holds or awaits which chunk (``has[island, chunk]``)."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    out = {}
    dmin = int(lk.delay.min())
    for d in np.unique(lk.delay).tolist():
        if d == dmin:
            continue
        m = lk.delay < d
        g = sp.csr_matrix((np.ones(int(m.sum())), (lk.src[m], lk.dst[m])), shape=(lk.size, lk.size))
        n, label = connected_components(g, directed=True, connection="weak")
        has = np.zeros((n, A.shape[1]), dtype=bool)
        nodes, chunks = np.nonzero(A < INF)
        has[label[nodes], chunks] = True
        out[int(d)] = (label, has)
    return out


def _mark_islands(islands: dict | None, nodes: np.ndarray, chunks: np.ndarray) -> None:
    if islands:
        for label, has in islands.values():
            has[label[nodes], chunks] = True


def _dominated(al, ac, lk, islands) -> np.ndarray:
    """Entries of slow links whose chunk the island of faster links around the destination
    already holds or awaits: a faster link will bring it (TACOS §VI-B shorter-link-first,
    extended from one destination to its fast neighbourhood, so slow inter-island links do not
    import the same chunk twice)."""
    dl = lk.delay[al]
    out = np.zeros(len(al), dtype=bool)
    for d, (label, has) in islands.items():
        idx = np.flatnonzero(dl == d)
        if len(idx):
            out[idx] = has[label[lk.dst[al[idx]]], ac[idx]]
    return out


def _prio_column(born: np.ndarray, priority: str, t: int) -> np.ndarray:
    cap = (1 << (_PRIO_BITS - 1)) - 1  # the top bit marks dominated entries
    if priority == "random":
        return np.zeros(len(born), np.int64)
    if priority == "fifo":
        return np.minimum(born, cap)
    return np.minimum(np.maximum(t - born, 0), cap)


def _bucket(buckets, nodes, chunks, arrive) -> None:
    for s in np.unique(arrive).tolist():
        m = arrive == s
        buckets.setdefault(int(s), []).append((nodes[m], chunks[m]))


def _expand(lk: Links, nodes: np.ndarray, chunks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One (out-link, chunk) pair per out-link of each node (vectorised CSR expansion)."""
    lo = lk.out_ptr[nodes]
    cnt = lk.out_ptr[nodes + 1] - lo
    total = int(cnt.sum())
    if total == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    rep = np.repeat(np.arange(len(nodes)), cnt)
    offs = np.arange(total) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    return lk.out_idx[lo[rep] + offs], chunks[rep]


def _needs_relay(lk: Links, A: np.ndarray, want: np.ndarray) -> bool:
    """True unless every live node holds or requests every requested chunk (then requesters
    alone carry everything, as in allgather or broadcast over all nodes)."""
    if (want.sum(axis=0) == 1).any():
        return True
    live = np.zeros(lk.size, dtype=bool)
    live[lk.src] = True
    live[lk.dst] = True
    requested = want.any(axis=0)
    cover = ((A < INF) | want)[np.ix_(live, requested)]
    return not bool(cover.all())


def _relay_ok(el, ec, lk, A, want, D, single, target, frontier, t) -> np.ndarray:
    """Pool entries ``u -> w`` carrying a chunk ``w`` does not want but moves closer to a requester."""
    u, w = lk.src[el], lk.dst[el]
    out = np.zeros(len(el), dtype=bool)
    cand = ~want[w, ec]
    s = cand & single[ec]
    if s.any():
        tg = target[ec[s]]
        dw = D[w[s], tg].astype(np.int64)
        out[s] = (dw >= 0) & (dw < frontier[ec[s]])
    m = np.flatnonzero(cand & ~single[ec])
    for i in m.tolist():  # multi-target chunks through non-requesters: rare, row-wise
        c = ec[i]
        needers = want[:, c] & (A[:, c] == INF)
        if needers.any():
            out[i] = bool((D[w[i], needers] < D[u[i], needers]).any())
    return out


def _still_useful(pl, pc, lk, A, want, D, single, target, frontier, t) -> np.ndarray:
    """Relay entries stay useful while they improve on the chunk's frontier (single target)."""
    w = lk.dst[pl]
    ok = np.ones(len(pl), dtype=bool)
    relay = ~want[w, pc] & single[pc]
    if relay.any():
        dw = D[w[relay], target[pc[relay]]].astype(np.int64)
        ok[relay] = dw < frontier[pc[relay]]
    return ok


def _replace(sends, lk, A, want, rng, nodes, chunks, old_arrive, buckets, first_idx) -> tuple[int, int, int]:
    """Chunk replacement (TACOS §VI-B): a planned send overtaken by an earlier copy carries
    another chunk its source held when it started and its destination still lacks; if there is
    none it is dropped. Returns (replaced, dropped, requests newly met)."""
    replaced = dropped = met = 0
    maxd = int(lk.delay.max(initial=1))
    todo = list(zip(nodes.tolist(), chunks.tolist(), old_arrive.tolist()))
    while todo:
        v, c, arr = todo.pop()
        n = sends.n
        lo = first_idx[max(0, min(len(first_idx) - 1, arr - maxd))]  # in-flight sends started since
        idx = lo + np.flatnonzero(
            sends.ok[lo:n] & (sends.chunk[lo:n] == c) & (sends.arrive[lo:n] == arr) & (lk.dst[sends.link[lo:n]] == v)
        )
        if len(idx) == 0:
            raise AssertionError(f"no planned send of chunk {c} to {v} arriving at {arr}")
        j = int(idx[0])
        link = int(sends.link[j])
        u = int(lk.src[link])
        start = arr - int(lk.delay[link]) + 1
        cand = np.flatnonzero((A[u] <= start - 1) & want[v] & (A[v].astype(np.int64) > arr))
        if len(cand) == 0:
            sends.ok[j] = False
            dropped += 1
            continue
        c2 = int(cand[rng.integers(len(cand))])
        prev = int(A[v, c2])
        sends.chunk[j] = c2
        A[v, c2] = arr
        buckets.setdefault(arr, []).append((np.array([v]), np.array([c2])))
        replaced += 1
        if prev != INF:
            todo.append((v, c2, prev))
        else:
            met += 1
    return replaced, dropped, met


def _result(lk: Links, sends: _Sends, replaced: int, dropped: int, rounds: int) -> Result:
    ok = sends.ok[:sends.n]
    link = sends.link[:sends.n][ok]
    arrive = sends.arrive[:sends.n][ok]
    return Result(
        chunk=sends.chunk[:sends.n][ok].copy(), src=lk.src[link], dst=lk.dst[link], step=arrive.copy(),
        delay=lk.delay[link], steps=int(arrive.max(initial=0)), replaced=replaced, dropped=dropped, rounds=rounds,
    )


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


def _problem(parts: list[_Part], size: int):
    """Stacked ``avail``/``want`` matrices ``[node, compact chunk]`` and the global chunk ids."""
    ids, avails, wants = [], [], []
    for p in parts:
        used = p.coll.used_chunks
        pre = p.coll.precondition[used].T
        post = p.coll.postcondition[used].T
        a = np.full(pre.shape, INF, dtype=np.int32)
        a[pre] = p.ready
        ids.append(used + p.offset)
        avails.append(a)
        wants.append(post & ~pre)
    if not ids:
        return np.zeros((size, 0), np.int32), np.zeros((size, 0), bool), np.zeros(0, np.int64)
    return np.concatenate(avails, axis=1), np.concatenate(wants, axis=1), np.concatenate(ids)


def _forward(topology: Topology, parts: list[_Part], chunk_bytes: float, rng, cfg: dict,
             timestep: float | None, busy=None) -> tuple[Result, np.ndarray, Links]:
    """Greedy matching for non-combining parts on ``topology``; chunk ids made global."""
    lk = links(topology, chunk_bytes, timestep)
    avail, want, ids = _problem(parts, topology.size)
    cfg = dict(cfg)
    stats = cfg.pop("stats", None)
    res = match(lk, avail, want, rng, distances=topology.distances, busy=busy, **cfg)
    if stats is not None:
        for k in ("replaced", "dropped", "rounds"):
            stats[k] = stats.get(k, 0) + getattr(res, k)
        stats["timestep_s"] = lk.timestep
        stats["max_delay"] = max(stats.get("max_delay", 1), int(lk.delay.max(initial=1)))
    res.chunk = ids[res.chunk] if len(res.chunk) else res.chunk
    return res, ids, lk


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


def _chunk_bytes(instance: Instance) -> float:
    """One TEN timestep carries one chunk: the largest chunk of the instance's collectives."""
    return max(c.chunk_bytes for c in instance.collectives)


def _check_supported(instance: Instance) -> None:
    topo = instance.topology
    if topo.switches:
        raise Unsupported("the greedy matches point-to-point links; unwind the switches first (switch unwind=d)")


def synthesize(instance: Instance, seed: int = 0, *, priority: str = "random", matching: str = "maximum",
               timestep: float | None = None, deadline: Deadline | None = None) -> Schedule:
    """One TACOS-Greedy run (Won et al., TACOS, 2023, §VI) on ``instance``: a schedule, step = arrival timestep.

    Non-combining collectives are matched directly; reduce and reduce_scatter are the reversal
    of broadcast / allgather matched on ``topology.transpose()``; allreduce is
    ``concat(reduce_scatter, allgather, "allreduce")``; concurrent collectives are matched
    jointly (combining parts first, on the transpose; the rest then around their link use).
    Past ``deadline`` it stops (:class:`~collsynth.limits.TimeLimitReached`).
    """
    _check_supported(instance)
    rng = np.random.default_rng(seed)
    topo = instance.topology
    cb = _chunk_bytes(instance)
    if priority not in PRIORITIES:
        raise InputError("params.priority", f"expected one of {', '.join(PRIORITIES)}, got {priority!r}")
    if matching not in MATCHINGS:
        raise InputError("params.matching", f"expected one of {', '.join(MATCHINGS)}, got {matching!r}")
    stats: dict = {}
    cfg = {"priority": priority, "matching": matching, "stats": stats, "deadline": deadline}
    meta = {"producer": "greedy", "seed": int(seed), "priority": priority, "matching": matching, "stats": stats}
    if not instance.concurrent:
        coll = instance.collective
        if coll.kind == "allreduce":
            rs = _combining(topo, [_Part(0, coll.with_kind("allgather"), 0)], cb, rng, cfg, timestep)
            ag, _, _ = _forward(topo, [_Part(0, coll.with_kind("allgather"), 0)], cb, rng, cfg, timestep)
            s_rs = _to_schedule("reduce_scatter", rs, topo, coll.num_chunks)
            s_ag = _to_schedule("allgather", ag, topo, coll.num_chunks)
            out = sched_mod.concat(s_rs, s_ag, "allreduce")
            return replace(out, meta={**meta, "phases": [s_rs.num_steps, s_ag.num_steps]})
        if coll.combining:
            res = _combining(topo, [_Part(0, coll.dual(), 0)], cb, rng, cfg, timestep)
            return _to_schedule(coll.kind, res, topo, coll.num_chunks, meta=meta)
        res, _, _ = _forward(topo, [_Part(0, coll, 0)], cb, rng, cfg, timestep)
        return _to_schedule(coll.kind, res, topo, coll.num_chunks, meta=meta)
    return _concurrent(instance, rng, cfg, timestep, meta)


def _combining(topo: Topology, dual_parts: list[_Part], cb: float, rng, cfg: dict,
               timestep: float | None) -> Result:
    """Combining parts as the reversal of their duals matched on the transposed topology.

    The reversal is :func:`collsynth.tens.schedule.reverse` extended to multi-timestep links
    (see :func:`_reverse_result`); on unit-delay links the two agree exactly.
    """
    res, _, _ = _forward(topo.transpose(), dual_parts, cb, rng, cfg, timestep)
    return _reverse_result(res)


def _concurrent(instance: Instance, rng, cfg: dict, timestep: float | None, meta: dict) -> Schedule:
    """Several collectives sharing the network (TACOS §VIII-G): requests merged with chunk
    offsets. Combining parts (reduce, reduce_scatter, the first phase of allreduce) are matched
    jointly on the transpose and reversed; then the non-combining parts (and allreduce's
    allgather phase, ready once the reductions end) are matched around the link slots the
    first group uses."""
    topo = instance.topology
    cb = _chunk_bytes(instance)
    offs = instance.chunk_offsets
    comb, fwd = [], []
    for i, (c, o) in enumerate(zip(instance.collectives, offs)):
        if c.kind == "allreduce":
            comb.append(_Part(i, c.with_kind("allgather"), o))
        elif c.combining:
            comb.append(_Part(i, c.dual(), o))
        else:
            fwd.append(_Part(i, c, o))
    lk = links(topo, cb, timestep)
    R = None
    busy: dict[int, np.ndarray] = {}
    T_R = 0
    if comb:
        R = _combining(topo, comb, cb, rng, cfg, timestep)
        T_R = R.steps
        idx = topo.link_arrays.lookup(R.src, R.dst)
        for k in range(int(R.delay.max(initial=1))):
            m = R.delay > k
            for s in np.unique(R.step[m] - k).tolist():
                b = busy.setdefault(int(s), np.zeros(len(lk), np.int64))
                np.add.at(b, idx[m & (R.step - k == s)], 1)
        for i, c in enumerate(instance.collectives):
            if c.kind == "allreduce":
                fwd.append(_Part(i, c.with_kind("allgather"), offs[i], ready=T_R))
    F = None
    if fwd:
        F, _, _ = _forward(topo, fwd, cb, rng, cfg, timestep, busy=busy)
    # split per collective and merge (tens.schedule.merge keeps every part's semantics)
    parts = []
    for i, (c, o) in enumerate(zip(instance.collectives, offs)):
        pieces = []
        for res, op in ((R, OP_REDUCE), (F, OP_COPY)):
            if res is None:
                continue
            m = (res.chunk >= o) & (res.chunk < o + c.num_chunks)
            if m.any():
                pieces.append((res.chunk[m] - o, res.src[m], res.dst[m], res.step[m], np.full(int(m.sum()), op, np.int8)))
        cols = [np.concatenate([p[k] for p in pieces]) if pieces else np.zeros(0, np.int64) for k in range(5)]
        parts.append(sched_mod.from_arrays(
            c.kind, topo.size, c.num_chunks, chunk=cols[0], src=cols[1], dst=cols[2], step=cols[3],
            op=cols[4].astype(np.int8) if pieces else None,
        ))
    out = sched_mod.merge(parts, list(offs))
    return replace(out, meta=meta)


# ---- bounds -------------------------------------------------------------------------------

def lower_bound(instance: Instance, timestep: float | None = None) -> int:
    """Timesteps no schedule on the greedy's TEN can beat (:func:`collsynth.tens.bounds.timesteps_bound`:
    delay-weighted distance, per-node, volume and cut bounds), in the greedy's timestep: the
    cheapest link cost for the largest chunk unless ``timestep`` is given."""
    if timestep is None:
        timestep = float(link_costs(instance.topology, _chunk_bytes(instance)).min())
    return int(bounds.timesteps_bound(instance, timestep=timestep).value)


# ---- multi-start and the producer ----------------------------------------------------------

def _sync_time(schedule: Schedule, instance: Instance) -> float:
    """Synchronous alpha-beta time (``tens.cost.price``), the tie-breaker between seeds."""
    from ...tens import cost

    return float(cost.price(schedule, instance, "sync").total_s)


def one_start(instance: Instance, seed: int, params: dict, deadline: Deadline | None = None) -> dict:
    """Run one seed, verify its schedule (``tens.verify.verify``) and measure it.

    Returns ``seed, steps, sync_s, seconds, violation`` (``None`` when valid) and ``schedule``.
    """
    from ...tens.verify import verify

    t0 = time.perf_counter()
    s = synthesize(instance, seed, priority=params.get("priority", "random"),
                   matching=params.get("matching", "maximum"), timestep=params.get("timestep"), deadline=deadline)
    seconds = time.perf_counter() - t0
    v = verify(s, instance)
    return {
        "seed": int(seed), "steps": s.num_steps, "sync_s": None if v else _sync_time(s, instance),
        "seconds": seconds, "violation": None if v is None else str(v), "schedule": s,
    }


def _one_start_job(args):
    instance, seed, params, deadline = args
    return one_start(instance, seed, params, deadline)


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
        if r["violation"] is None:
            key = (r["steps"], r["sync_s"], r["seed"])
            if best is None or key < (best["steps"], best["sync_s"], best["seed"]):
                best = {**r, "schedule": sched}

    stopped: list[TimeLimitReached] = []
    if workers == 1:
        for s in seeds:
            try:
                take(one_start(instance, s, params, deadline))
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


def _params(options: Options) -> dict:
    p = dict(options.params or {})
    known = {"priority", "matching", "timestep", "workers"}
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
    if "workers" in p:
        if not isinstance(p["workers"], int) or isinstance(p["workers"], bool) or p["workers"] < 1:
            raise InputError("params.workers", f"expected a positive integer, got {p['workers']!r}")
    if p.get("priority", "random") not in PRIORITIES:
        raise InputError("params.priority", f"expected one of {', '.join(PRIORITIES)}, got {p['priority']!r}")
    if p.get("matching", "maximum") not in MATCHINGS:
        raise InputError("params.matching", f"expected one of {', '.join(MATCHINGS)}, got {p['matching']!r}")
    return p


def produce(instance: Instance, options: Options) -> Outcome:
    """The ``greedy`` producer: best of ``options.starts`` seeds from ``options.seed`` on.

    Status ``heuristic``; objective = timesteps of the best verified schedule; bound =
    :func:`lower_bound` (inbound and distance bounds in timesteps). ``extra`` reports the
    spread over seeds (min / median / max timesteps, per-seed figures).
    """
    _check_supported(instance)
    if not isinstance(options.starts, int) or options.starts < 1:
        raise InputError("--starts", f"expected a positive integer, got {options.starts!r}")
    params = _params(options)
    t0 = time.perf_counter()
    bound = lower_bound(instance, params.get("timestep"))
    seeds = range(options.seed, options.seed + options.starts)
    best, runs = multi_start(instance, seeds, params, params.get("workers"), options.timer())
    wall = time.perf_counter() - t0
    steps = [r["steps"] for r in runs if r["violation"] is None]
    extra = {
        "starts": options.starts,
        "seeds": [r["seed"] for r in runs],
        "steps_min": min(steps) if steps else None,
        "steps_median": statistics.median(steps) if steps else None,
        "steps_max": max(steps) if steps else None,
        "per_seed": [{k: r[k] for k in ("seed", "steps", "sync_s", "seconds", "violation")} for r in runs],
        "priority": params.get("priority", "random"),
        "matching": params.get("matching", "maximum"),
        "lower_bound_steps": bound,
    }
    if best is None:
        bad = next((r for r in runs if r["violation"]), None)
        return Outcome(None, "error", bound=bound, units="timesteps", solve_s=wall,
                       message=f"no seed gave a valid schedule: {bad and bad['violation']}", extra=extra)
    extra["best_seed"] = best["seed"]
    gap = (best["steps"] - bound) / best["steps"] if best["steps"] else 0.0
    return Outcome(
        best["schedule"], "heuristic", objective=float(best["steps"]), bound=float(bound), gap=gap,
        units="timesteps", build_s=0.0, solve_s=wall, solver="greedy",
        message=f"best of {options.starts} seed(s): {best['steps']} timesteps (seed {best['seed']}), lower bound {bound}"
        + ("" if len(runs) == options.starts else f"; the time limit stopped it after {len(runs)} seed(s)"),
        extra=extra,
    )


PARAMS = (
    Param("priority", PRIORITIES, "random", "order among chunks competing for a link"),
    Param("matching", MATCHINGS, "maximum", "link-chunk matching in each timestep"),
    Param("timestep", float, None, "seconds per TEN timestep (default: the cheapest link's cost per chunk)"),
    Param("workers", int, None, "processes running the seeds (default: the cores, at most one per seed)"),
)

PRODUCERS = [
    Producer(
        "greedy", "greedy", produce,
        summary="TACOS-Greedy (Won et al., TACOS, 2023, §VI): randomised link-chunk matching on the TEN; best of --starts seeds",
        params=PARAMS,
    ),
]
