"""The greedy link-chunk matching over the time-expanded network (Won et al., "TACOS:
Topology-Aware Collective Algorithm Synthesizer for Distributed Training", arXiv:2304.05301,
2023, Section VI), one timestep at a time.

In step ``t`` every free link slot ``u -> v`` is matched to a chunk ``u`` holds by the end of
step ``t - 1`` (arrival-time analysis, §VI-B) and ``v`` still lacks; a request is served once
(a copy in flight is only overtaken by one that arrives strictly earlier, and the slower send
is then *replaced* by another chunk its source held, §VI-B "chunk replacement"). Links are
matched in delay classes, shortest first ("shorter-link-first", §VI-B); within a class the
destinations come in random order and each one's in-links in random order (§VI-A). Each link's candidates (the *pool*) are kept oldest first; a link takes

- ``priority="fifo"``: its oldest usable candidate (chunk-level pipelining);
- ``"lifo"``: its newest; ``"random"``: one at random (the paper's choice);

and, within ``endgame`` timesteps of its destination's last request (when the destination's
unmet requests fit in ``endgame`` timesteps of its in-links' rate), the candidate the fewest
in-links of the destination can deliver (rarest first): a destination's last requests then
stay spread over its in-links, so the final timesteps keep every in-link busy. On links slower
than the fastest, a chunk the island of faster links around the destination already holds or
awaits comes last (shorter-link-first at island level: servers import each chunk once).
``matching="maximum"`` then grows each destination's matching per delay class with augmenting
paths, so no link idles that a reassignment could keep busy.

Chunks no intermediate node wants (gather, scatter, all-to-all, collectives over a subset of
the nodes) are relayed: ``u -> w`` may carry ``c`` for a ``w`` that does not want it if ``w`` is
strictly closer (in hops) to a node still lacking ``c``; a single-target chunk keeps one copy
moving (its frontier distance must strictly drop).

Kept switch nodes (:mod:`collsynth.tens.ten`: a switch stores nothing and forwards what it
receives) never hold a chunk here: NPU ``w`` has one virtual in-link per route ``u -> s_1 ->
... -> w`` through switches (:mod:`collsynth.solvers.greedy.routes`), matched like a link of the
route's delay; its send reserves every switch link it crosses (the switch's ports, a calendar
of slots per timestep) at the timesteps the chunk is on it. When switches copy
(``switch_copy``), a route whose chunk reaches its last switch at the very timestep another
send brings it there shares that arrival (multicast) and reserves only the switch's out-port;
such chunks come first, and a route whose NPU-to-switch link is full can still take them.

The inner loops are compiled (:mod:`collsynth.solvers.greedy.kernels`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from ...instances.topology import Topology
from ...limits import Deadline, TimeLimitReached
from ...tens.ten import SWITCH_COPY, link_delays, link_latency, switch_hop_instant
from . import kernels as K
from .routes import Routes, no_routes, switch_mask, switch_routes

INF = K.INF
PRIORITIES = ("fifo", "random", "lifo")
MATCHINGS = ("maximum", "greedy")
ENDGAME = 8  # timesteps before a destination's last request when rarest-first takes over
_POLICY = {"random": K.RANDOM, "fifo": K.FIFO, "lifo": K.LIFO}


# ---- the TEN view the greedy needs --------------------------------------------------------

@dataclass(frozen=True)
class Links:
    """Directed link pairs of a topology as the greedy sees them (TEN arcs, TACOS §IV).

    ``delay[i]`` is the number of timesteps a chunk needs on pair ``i`` (>= 1, from its start
    to its arrival), ``busy[i]`` how many of them it occupies the pair (``delay`` minus a
    pipelined latency, :mod:`collsynth.tens.ten`) and ``cap[i]`` how many chunks it carries at
    once (parallel links, or chunks per timestep). ``out_ptr``/``out_idx`` list the
    pairs leaving each node (CSR).

    With kept switch nodes, ``route[i]`` is the route (:class:`~.routes.Routes`) pair ``i``
    stands for (-1: a link between NPUs); a route has no slots of its own (``cap`` 0) but
    reserves the switch links ``routes.ports`` (``port_cap`` chunks per timestep, occupied
    ``port_busy`` timesteps). ``copy``: switches multicast; ``instant``: their hop to an NPU is instant.
    """

    src: np.ndarray
    dst: np.ndarray
    delay: np.ndarray
    cap: np.ndarray
    size: int
    timestep: float
    out_ptr: np.ndarray
    out_idx: np.ndarray
    busy: np.ndarray = None
    route: np.ndarray = None
    routes: Routes = None
    port_cap: np.ndarray = None
    port_busy: np.ndarray = None
    copy: bool = SWITCH_COPY
    instant: bool = False

    def __post_init__(self):
        if self.busy is None:
            object.__setattr__(self, "busy", self.delay)
        if self.route is None:
            object.__setattr__(self, "route", np.full(len(self.src), -1, np.int64))
        if self.routes is None:
            object.__setattr__(self, "routes", no_routes())
            object.__setattr__(self, "port_cap", np.zeros(0, np.int64))
            object.__setattr__(self, "port_busy", np.zeros(0, np.int64))

    def __len__(self) -> int:
        return len(self.src)


def links(topology: Topology, chunk_bytes: float, timestep: float | None = None,
          switch_copy: bool = SWITCH_COPY) -> Links:
    """Per link pair: delay ``ceil((alpha + chunk_bytes / b) / timestep)`` and capacity (with a
    pipelined latency: occupancy ``ceil((chunk_bytes / b) / timestep)`` and delay that plus
    ``ceil(alpha / timestep)``, :func:`collsynth.tens.ten.link_latency`).

    ``b`` is one link's bandwidth (a pair of ``count`` parallel links carries ``count`` chunks
    per timestep). ``timestep`` defaults to the cheapest link's cost, so homogeneous topologies
    have delay 1 everywhere (TACOS §IV-C): :func:`collsynth.tens.ten.link_delays`, so the greedy
    and the ILP see the same TEN. Links touching a kept switch node give way to routes through
    the switches (:func:`collsynth.solvers.greedy.routes.switch_routes`; ``switch_copy``: the
    switches multicast).
    """
    la = topology.link_arrays
    delays, cap, timestep = link_delays(topology, chunk_bytes, timestep, switches=True)
    busy = delays[0].astype(np.int64)
    latency = link_latency(topology, timestep)
    cap = np.asarray(cap, np.int64)
    sw = switch_mask(topology)
    if not sw.any():
        src = la.src.astype(np.int64)
        out_ptr, out_idx = _csr(src, topology.size)
        return Links(src=src, dst=la.dst.astype(np.int64), delay=busy + latency, cap=cap, size=topology.size,
                     timestep=float(timestep), out_ptr=out_ptr, out_idx=out_idx, busy=busy)
    instant = switch_hop_instant(topology)
    R = switch_routes(topology, busy, latency, instant)
    plain = np.flatnonzero(~sw[la.src] & ~sw[la.dst])
    src = np.concatenate([la.src[plain], R.src]).astype(np.int64)
    delay = np.concatenate([busy[plain] + latency[plain], R.delay]).astype(np.int64)
    out_ptr, out_idx = _csr(src, topology.size)
    return Links(src=src, dst=np.concatenate([la.dst[plain], R.dst]).astype(np.int64), delay=delay,
                 cap=np.concatenate([cap[plain], np.zeros(len(R), np.int64)]), size=topology.size,
                 timestep=float(timestep), out_ptr=out_ptr, out_idx=out_idx,
                 busy=np.concatenate([busy[plain], R.delay]).astype(np.int64),
                 route=np.concatenate([np.full(len(plain), -1, np.int64), np.arange(len(R), dtype=np.int64)]),
                 routes=R, port_cap=cap[R.ports], port_busy=busy[R.ports], copy=bool(switch_copy), instant=instant)


def _rate(lk: Links) -> np.ndarray:
    """Chunks per timestep each node's in-links deliver (a switch's port into an NPU counted
    once, not once per route through it)."""
    rate = np.zeros(lk.size)
    plain = lk.route < 0
    np.add.at(rate, lk.dst[plain], lk.cap[plain] / lk.busy[plain])
    R = lk.routes
    if len(R):
        down = np.unique(R.hop_port[R.hop_ptr[1:] - 1])  # switch links into NPUs
        np.add.at(rate, R.port_dst[down], lk.port_cap[down] / lk.port_busy[down])
    return rate


def _reordered(lk: Links, order: np.ndarray) -> Links:
    """The same links numbered in ``order``."""
    src = lk.src[order]
    out_ptr, out_idx = _csr(src, lk.size)
    return replace(lk, src=src, dst=lk.dst[order], delay=lk.delay[order], cap=lk.cap[order], out_ptr=out_ptr,
                   out_idx=out_idx, busy=lk.busy[order], route=lk.route[order])


def _csr(keys: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Row pointers and the stable order grouping ``keys`` (0..n-1)."""
    order = np.argsort(keys, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.add.at(ptr, keys + 1, 1)
    return np.cumsum(ptr), order.astype(np.int64)


@dataclass
class Result:
    """Raw greedy output: sends as columns (``step`` = arrival timestep) and run statistics."""

    chunk: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    step: np.ndarray
    delay: np.ndarray  # timesteps from start to arrival
    steps: int
    replaced: int
    dropped: int
    augmented: int
    busy: np.ndarray = None  # timesteps on the link (the delay less a pipelined latency)

    def __post_init__(self):
        if self.busy is None:
            self.busy = self.delay


@dataclass(frozen=True)
class Rules:
    """How the greedy chooses (see the module docstring)."""

    priority: str = "fifo"
    matching: str = "maximum"
    endgame: int = ENDGAME

    def __post_init__(self):
        if self.priority not in PRIORITIES:
            raise ValueError(f"priority must be one of {PRIORITIES}, got {self.priority!r}")
        if self.matching not in MATCHINGS:
            raise ValueError(f"matching must be one of {MATCHINGS}, got {self.matching!r}")
        if not (isinstance(self.endgame, int) and self.endgame >= 0):
            raise ValueError(f"endgame must be a non-negative integer, got {self.endgame!r}")


# ---- building the compiled state ----------------------------------------------------------

def _net(lk: Links) -> K.Net:
    classes, link_class = np.unique(lk.delay, return_inverse=True)
    n = lk.size
    in_ptr, in_idx = _csr(lk.dst * len(classes) + link_class, n * len(classes))
    R = lk.routes
    return K.Net(
        src=lk.src, dst=lk.dst, delay=lk.delay, busy=lk.busy, link_class=link_class.astype(np.int64),
        slot_ptr=np.concatenate([[0], np.cumsum(lk.cap)]).astype(np.int64),
        out_ptr=lk.out_ptr, out_idx=lk.out_idx, in_ptr=in_ptr, in_idx=in_idx,
        rate=_rate(lk), class_delay=classes.astype(np.int64),
        route=lk.route, hop_ptr=R.hop_ptr, hop_port=R.hop_port, hop_off=R.off, hop_busy=R.busy, hop_lag=R.lag,
        hop_switch=R.enters, port_cap=lk.port_cap, copy=bool(lk.copy), instant=int(lk.instant),
    )


def link_rate(lk: Links) -> np.ndarray:
    """Chunks per timestep each link pair carries: its slots over its occupancy, and for a
    route the smallest of its switch ports'."""
    rate = lk.cap / lk.busy
    R = lk.routes
    if len(R):
        hop = lk.port_cap[R.hop_port] / lk.port_busy[R.hop_port]
        per_route = np.minimum.reduceat(hop, R.hop_ptr[:-1])
        mine = lk.route >= 0
        rate = np.where(mine, per_route[np.maximum(lk.route, 0)], rate)
    return rate


def _islands(lk: Links, A: np.ndarray) -> K.Islands:
    """Per speed class above the fastest: the islands (weak components) of the links faster
    than it, numbered globally, and which island holds or awaits which chunk.

    Links are ranked by delay, then by chunks per timestep (:func:`link_rate`), fastest
    first: a link as long as others but carrying fewer chunks per timestep (a NIC beside a
    switch's ports) is a slow link whose island is the faster links around it."""
    keys, cls = np.unique(np.stack([lk.delay.astype(float), -link_rate(lk)]), axis=1, return_inverse=True)
    cls = cls.ravel().astype(np.int64)
    n_cls = keys.shape[1]
    label = np.full((n_cls, lk.size), -1, np.int64)
    base = 0
    for k in range(1, n_cls):
        m = cls < k
        g = sp.csr_matrix((np.ones(int(m.sum())), (lk.src[m], lk.dst[m])), shape=(lk.size, lk.size))
        count, lab = connected_components(g, directed=True, connection="weak")
        label[k] = lab + base
        base += count
    has = np.zeros((max(base, 1), A.shape[1]), dtype=bool)
    nodes, chunks = np.nonzero(A < INF)
    for k in range(1, n_cls):
        has[label[k, nodes], chunks] = True
    return K.Islands(on=n_cls > 1, label=label, has=has, cls=cls)


def _relay(lk: Links, A: np.ndarray, want: np.ndarray, distances: np.ndarray | None) -> K.Relay:
    """Relay data: only built when some requested chunk must pass nodes that do not want it."""
    C = want.shape[1]
    single = want.sum(axis=0) == 1
    target = np.where(single, np.argmax(want, axis=0), 0).astype(np.int64)
    frontier = np.full(C, INF, dtype=np.int64)
    if not needs_relay(lk, A, want):
        return K.Relay(on=False, D=np.zeros((1, 1), np.int32), single=single, target=target, frontier=frontier)
    if distances is None:
        raise ValueError("relaying chunks needs the hop-distance matrix")
    D = np.ascontiguousarray(distances, dtype=np.int32)  # one array layout: one compiled version
    hold_n, hold_c = np.nonzero((A < INF) & single[None, :])
    dd = D[hold_n, target[hold_c]].astype(np.int64)
    dd[dd < 0] = INF
    np.minimum.at(frontier, hold_c, dd)
    return K.Relay(on=True, D=D, single=single, target=target, frontier=frontier)


def needs_relay(lk: Links, A: np.ndarray, want: np.ndarray) -> bool:
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


def calendar_width(lk: Links) -> int:
    """Columns of the switch ports' slot calendar: a power of two past the last timestep a
    route reserves, counted from its start (1 without switch nodes)."""
    R = lk.routes
    span = int((R.off + R.busy).max(initial=0))
    return 1 if not len(R) else 1 << (span + 1).bit_length()


def _state(lk: Links, A: np.ndarray, want: np.ndarray) -> K.State:
    N, C = want.shape
    slots = int(lk.cap.sum())
    unit = bool((lk.delay == 1).all())
    return K.State(
        A=A, want=want, wants_all=bool((want == (A == INF)).all()), left=want.sum(axis=1).astype(np.int64),
        slot_free=np.zeros(slots, np.int64), slot_send=np.zeros(slots, np.int64),
        slot_start=np.zeros(slots, np.int64),
        send_of=np.zeros(1 if unit else N * C, np.int32),
        port_use=np.zeros((max(1, len(lk.port_cap)), calendar_width(lk)), np.int64),
        switch_arrival=np.full((max(1, lk.routes.n_switches), C if len(lk.routes) else 1), -1, np.int32),
    )


def _grow(arrays, need: int):
    """Columns re-allocated to hold at least ``need`` rows (capacity doubles)."""
    cap = max(need, 2 * len(arrays[0]))
    out = []
    for a in arrays:
        b = np.zeros(cap, a.dtype)
        b[:len(a)] = a
        out.append(b)
    return out


def new_pool(n_links: int, tally: np.ndarray) -> K.Pool:
    """Empty candidate queues: 8 entries of room per link to start with."""
    first = 8 * np.arange(n_links, dtype=np.int64)
    tally[K.T_ARENA] = 8 * n_links
    return K.Pool(chunk=np.zeros(8 * n_links + 1024, np.int32), start=first, cap=np.full(n_links, 8, np.int64),
                  head=first.copy(), tail=first.copy())


def reserve_pool(pool: K.Pool, add: np.ndarray, tally: np.ndarray) -> K.Pool:
    """The pool with room for ``add[l]`` more entries on every link ``l``
    (:func:`collsynth.solvers.greedy.kernels.reserve`); the arena is repacked when moved
    ranges left more than half of it unused, and doubles otherwise."""
    while (need := K.reserve(add, pool, tally)) > 0:
        arena = pool.chunk
        if tally[K.T_GARBAGE] > len(arena) // 2:
            live = int((pool.tail - pool.head).sum())
            size = max(len(arena), 2 * live + 8 * len(pool.start) + need - int(tally[K.T_ARENA]))
            arena = K.repack(pool, np.zeros(size, np.int32), tally)
        else:
            arena = np.concatenate([arena, np.zeros(max(need, 2 * len(arena)) - len(arena), np.int32)])
        pool = pool._replace(chunk=arena)
    return pool


# ---- the run ------------------------------------------------------------------------------

class _Run:
    """One greedy run: the compiled state and the Python-side time loop."""

    def __init__(self, lk: Links, A: np.ndarray, want: np.ndarray, rng, rules: Rules, distances,
                 busy: dict[int, np.ndarray] | None, max_steps: int | None):
        N, C = want.shape
        order = np.lexsort((lk.delay, lk.dst))  # a destination's in-links side by side (cache)
        lk = _reordered(lk, order)
        self.lk = lk
        self.net = _net(lk)
        self.st = _state(lk, A, want)
        self.relay = _relay(lk, A, want, distances)
        self.isl = _islands(lk, A)
        self.rule = K.Rule(policy=_POLICY[rules.priority], endgame=rules.endgame)
        self.maximum = rules.matching == "maximum"
        self.busy = {t: b[order] for t, b in (busy or {}).items()}
        self.no_busy = np.zeros(len(lk), np.int64)
        self.max_steps = max_steps or (4 * (C + N) * int(lk.delay.max(initial=1)) + 16)
        self.maxd = int(lk.delay.max(initial=1))
        cap = max(1024, int(want.sum()) + 16)
        self.sends = K.Sends(link=np.zeros(cap, np.int32), chunk=np.zeros(cap, np.int32),
                             arrive=np.zeros(cap, np.int32), ok=np.zeros(cap, bool),
                             first=np.zeros(self.max_steps + 2, np.int64),
                             hop_lo=np.zeros(cap if len(lk.routes) else 1, np.int32),
                             hop_hi=np.zeros(cap if len(lk.routes) else 1, np.int32))
        self.calendar_mask = self.st.port_use.shape[1] - 1
        self.port_slots = int(lk.port_cap.sum())
        self.tally = np.zeros(K.TALLY_SIZE, np.int64)
        self.tally[K.T_REMAINING] = int(want.sum())
        self.pool = new_pool(len(lk), self.tally)
        self.idle = np.zeros(len(lk), np.int64)
        nodes, chunks = np.nonzero(A < INF)
        order = np.lexsort((rng.random(len(nodes)), A[nodes, chunks]))
        self.init_nodes, self.init_chunks = nodes[order].astype(np.int64), chunks[order].astype(np.int64)
        self.init_step = A[self.init_nodes, self.init_chunks].astype(np.int64)
        K.seed(int(rng.integers(0, 2**32 - 1)))

    def active(self, t: int) -> bool:
        """More steps are needed: unmet requests, or planned arrivals a faster copy may beat."""
        return self.tally[K.T_REMAINING] > 0 or t + 1 < self.tally[K.T_PENDING]

    def arrivals(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """(node, chunk) pairs usable from step ``t`` on: initial holdings ready at ``t - 1``
        (in random order) and planned sends arriving at the end of ``t - 1``."""
        lo, hi = np.searchsorted(self.init_step, [t - 1, t])
        a = self.sends.first[max(1, t - self.maxd)] if t > 1 else 0
        b = int(self.tally[K.T_SENDS])
        nodes, chunks = np.empty(b - a, np.int64), np.empty(b - a, np.int64)
        n = K.arrivals(t, a, b, self.net, self.st, self.sends, nodes, chunks)
        if hi > lo:
            return (np.concatenate([self.init_nodes[lo:hi], nodes[:n]]),
                    np.concatenate([self.init_chunks[lo:hi], chunks[:n]]))
        return nodes[:n], chunks[:n]

    def step(self, t: int) -> None:
        """Timestep ``t``: admit new candidates, rebuild the pool, match, augment."""
        if t > self.max_steps:
            raise RuntimeError(f"greedy made no progress after {self.max_steps} timesteps")
        self.sends.first[t] = self.tally[K.T_SENDS]
        if self.calendar_mask:
            self.st.port_use[:, (t - 1) & self.calendar_mask] = 0  # the column is reused for step t - 1 + width
        nodes, chunks = self.arrivals(t)
        self._reserve_pool(nodes)
        K.admit(t, nodes, chunks, self.net, self.st, self.relay, self.pool)
        self._reserve_sends()
        busy = self.busy.get(t, self.no_busy)
        n_idle = K.match_step(t, busy, self.net, self.st, self.relay, self.isl, self.pool, self.sends,
                              self.rule, self.tally, self.idle)
        if self.maximum and n_idle:
            K.augment_step(t, busy, self.idle[:n_idle], self.net, self.st, self.relay, self.isl,
                           self.pool, self.sends, self.tally)
        self._check_stuck(t)

    def _reserve_pool(self, nodes: np.ndarray) -> None:
        """Room in every link's pool for one entry per chunk its source just received."""
        self.pool = reserve_pool(self.pool, np.bincount(nodes, minlength=self.lk.size)[self.lk.src], self.tally)

    def _reserve_sends(self) -> None:
        """Room for one more step of sends (at most one per link slot, and one per slot of a
        switch port: a route's send takes a slot of its last port in one timestep)."""
        need = int(self.tally[K.T_SENDS]) + len(self.st.slot_free) + self.port_slots + 1
        s = self.sends
        if need > len(s.link):
            link, chunk, arrive, ok = _grow([s.link, s.chunk, s.arrive, s.ok], need)
            self.sends = s._replace(link=link, chunk=chunk, arrive=arrive, ok=ok)
            if self.port_slots:  # the hops of route sends (none without switch nodes)
                lo, hi = _grow([s.hop_lo, s.hop_hi], need)
                self.sends = self.sends._replace(hop_lo=lo, hop_hi=hi)

    def _check_stuck(self, t: int) -> None:
        tl = self.tally
        if (tl[K.T_REMAINING] > 0 and tl[K.T_PENDING] < t and tl[K.T_LAST] < t
                and t > int(self.init_step[-1] if len(self.init_step) else 0) and t > max(self.busy, default=0)):
            raise RuntimeError(f"greedy is stuck at timestep {t}: {tl[K.T_REMAINING]} requests cannot be served")

    def result(self, want: np.ndarray) -> Result:
        """The sends made so far as a :class:`Result` (``want``: the requests, for pruning relays
        that serve none), switch routes expanded to their hops, with the counts of replaced and
        dropped sends (the greedy of Won et al., "TACOS", arXiv:2304.05301; module doc)."""
        n = int(self.tally[K.T_SENDS])
        s = self.sends
        ok = s.ok[:n].copy()
        link, chunk = s.link[:n].astype(np.int64), s.chunk[:n].astype(np.int64)
        pruned = _prune(ok, link, chunk, self.lk, want) if self.relay.on else 0
        lk = self.lk
        hops = None
        if len(lk.routes):
            hops = _route_hops(lk, link, chunk, s.arrive[:n].astype(np.int64), ok, s.hop_lo[:n], s.hop_hi[:n])
            ok &= lk.route[link] < 0
        link, chunk, arrive = link[ok], chunk[ok], s.arrive[:n][ok].astype(np.int64)
        cols = [chunk, lk.src[link], lk.dst[link], arrive, lk.delay[link], lk.busy[link]]
        if hops is not None:
            cols = [np.concatenate([a, b]) for a, b in zip(cols, hops)]
        tl = self.tally
        return Result(chunk=cols[0], src=cols[1], dst=cols[2], step=cols[3], delay=cols[4], busy=cols[5],
                      steps=int(cols[3].max(initial=0)), replaced=int(tl[K.T_REPLACED]),
                      dropped=int(tl[K.T_DROPPED]) + pruned, augmented=int(tl[K.T_AUGMENTED]))


def match(lk: Links, avail: np.ndarray, want: np.ndarray, rng: np.random.Generator, *,
          distances: np.ndarray | None = None, rules: Rules = Rules(),
          busy: dict[int, np.ndarray] | None = None, max_steps: int | None = None,
          deadline: Deadline | None = None, copy: bool = True) -> Result:
    """Run the greedy from holdings ``avail`` until every request in ``want`` is met.

    ``avail[node, chunk]``: the step at the end of which ``node`` holds ``chunk`` at the start
    (0 for the precondition, a later step for data that becomes ready later, ``INF`` if not
    held). ``want[node, chunk]``: the requests (postcondition). ``distances`` (hop matrix) is
    needed when some chunk must be relayed through nodes that do not want it. ``busy[step]``
    gives link slots already taken in that step (by another part of a concurrent schedule).
    Returns the sends with ``step`` = the arrival timestep. Past ``deadline`` (checked once per
    timestep) it stops with :class:`~collsynth.limits.TimeLimitReached` saying how far it got.
    ``copy=False``: ``avail`` (32-bit, C order) is the caller's to give up: the run's holdings
    grow in it rather than in a copy (an all-to-all on 1,024 nodes: 4 GiB fewer).
    """
    setup = "the holdings tables built; no timestep matched"
    if deadline is not None:  # between the set-up's passes over the [node, chunk] tables (an all-to-all
        deadline.check("greedy matching", setup)  # on 576 nodes: 190 M cells, seconds a pass when loaded)
    A = np.array(avail, dtype=np.int32, order="C", copy=True if copy else None)  # None: only if it must
    want = np.ascontiguousarray(want & (A == INF))  # requests met by the initial holdings drop
    if deadline is not None:
        deadline.check("greedy matching", setup)
    run = _Run(lk, A, want, rng, rules, distances, busy, max_steps)
    requests = int(want.sum())
    t = 0
    while run.active(t):
        if deadline is not None and deadline.expired():
            met = requests - int(run.tally[K.T_REMAINING])
            raise TimeLimitReached("greedy matching", f"timestep {t}: {met:,} of {requests:,} requests met")
        t += 1
        run.step(t)
    return run.result(want)


def warm() -> None:
    """Compile (or load from numba's cache) every kernel this module calls, on a 4-node
    bidirectional ring allgather: a first compile takes minutes on a loaded machine, which is no
    run's synthesis time. Every run passes the kernels arrays of the same types and layouts,
    so nothing compiles again."""
    src = np.array([0, 1, 2, 3, 1, 2, 3, 0], np.int64)
    dst = np.array([1, 2, 3, 0, 0, 1, 2, 3], np.int64)
    out_ptr, out_idx = _csr(src, 4)
    lk = Links(src=src, dst=dst, delay=np.ones(8, np.int64), cap=np.ones(8, np.int64), size=4, timestep=1.0,
               out_ptr=out_ptr, out_idx=out_idx)
    avail = np.where(np.eye(4, dtype=bool), 0, INF).astype(np.int32)
    match(lk, avail, ~np.eye(4, dtype=bool), np.random.default_rng(0))
    run = _Run(lk, avail, ~np.eye(4, dtype=bool), np.random.default_rng(0), Rules(), None, None, None)
    run.step(1)  # the kernels a step may skip: augmenting paths, a repacked arena
    K.augment_step(1, run.no_busy, run.idle[:0], run.net, run.st, run.relay, run.isl, run.pool, run.sends,
                   run.tally)
    K.repack(run.pool, np.zeros(len(run.pool.chunk), np.int32), run.tally)


def _route_hops(lk: Links, link, chunk, arrive, ok, hop_lo, hop_hi) -> list[np.ndarray]:
    """The sends over real links of the route sends among ``link`` (chunk, src, dst, arrival,
    delay, occupancy): hops ``hop_lo .. hop_hi - 1`` of each (a send whose delivery was
    dropped, or pruned as a useless relay, keeps the hops into its switches, which other
    routes may share); hops into a switch that no send leaving it uses are then dropped
    (:func:`_unused_switch_arrivals`)."""
    R = lk.routes
    mine = np.flatnonzero(lk.route[link] >= 0)
    r = lk.route[link[mine]]
    first = R.hop_ptr[r]
    n_hops = R.hop_ptr[r + 1] - first
    hi = np.where(ok[mine], hop_hi[mine], np.minimum(hop_hi[mine], n_hops - 1)).astype(np.int64)
    lo = hop_lo[mine].astype(np.int64)
    count = np.maximum(hi - lo, 0)
    h = np.repeat(first + lo - np.cumsum(count) + count, count) + np.arange(int(count.sum()))
    start = np.repeat(arrive[mine] - lk.delay[link[mine]] + 1, count)
    rows = [np.repeat(chunk[mine], count), R.port_src[R.hop_port[h]], R.port_dst[R.hop_port[h]],
            start + R.off[h] + R.lag[h] - 1, R.lag[h], R.busy[h]]
    keep = ~_unused_switch_arrivals(R, lk.size, int(lk.instant), *rows[:5], copy=bool(lk.copy))
    return [c[keep] for c in rows]


def _unused_switch_arrivals(R: Routes, size: int, instant: int, chunk, src, dst, arrive, lag,
                            copy: bool = True) -> np.ndarray:
    """bool per hop: it enters a switch and no kept hop leaves that switch with the chunk
    from that arrival (in the next timestep, or the same one with an ``instant`` hop to an
    NPU), to a fixed point (chains of switches). Without ``copy`` each arrival leaves once, so
    the arrivals beyond the number of hops leaving with them are dropped too (reversed for a
    combining collective, each would be a partial sum leaving the switch from nothing)."""
    into, out = R.is_switch[dst], R.is_switch[src]
    read = arrive - lag + instant * ~into  # the arrival a hop out of a switch forwards (a switch: the one before)
    T = int(arrive.max(initial=0)) + 2
    key_in = (chunk * size + dst) * T + arrive
    key_out = (chunk * size + src) * T + read
    order = np.argsort(key_in, kind="stable")
    rank = np.empty(len(chunk), np.int64)  # place of each hop among those with its key
    rank[order] = np.arange(len(chunk)) - np.searchsorted(key_in[order], key_in[order])
    drop = np.zeros(len(chunk), bool)
    while True:
        leaving = np.sort(key_out[out & ~drop])
        served = np.searchsorted(leaving, key_in, "right") - np.searchsorted(leaving, key_in)
        new = into & ((served == 0) if copy else (rank >= served))
        if (new == drop).all():
            return drop
        drop = new


def _prune(ok: np.ndarray, link: np.ndarray, chunk: np.ndarray, lk: Links, want: np.ndarray) -> int:
    """Drop (in ``ok``) relay sends whose receiver neither wants the chunk nor forwards it, to a
    fixpoint; returns how many.

    Such sends are harmless forwards but would make a reversed (combining) schedule send from
    a node without contribution. Every (node, chunk) is received at most once, so a forward
    from the receiver is necessarily later than the arrival. A route's send counts as a
    forward from its source even once dropped: its hops into the switches stay while other
    routes share them (:func:`_route_hops`)."""
    C = want.shape[1]
    total = 0
    routed = lk.route[link] >= 0
    kept_fwd = lk.src[link[routed]] * C + chunk[routed]
    while True:
        idx = np.flatnonzero(ok)
        dst = lk.dst[link[idx]]
        relay = ~want[dst, chunk[idx]]
        if not relay.any():
            return total
        fwd = np.concatenate([lk.src[link[idx]] * C + chunk[idx], kept_fwd])
        useless = relay & ~np.isin(dst * C + chunk[idx], fwd)
        if not useless.any():
            return total
        ok[idx[useless]] = False
        total += int(useless.sum())
