"""Compiled inner loops of the greedy link-chunk matching (numba).

Plain arrays grouped in named tuples (numba passes them as records):

- :data:`Net` — the TEN arcs: per link ``src``, ``dst``, ``delay`` (timesteps from start to
  arrival), ``busy`` (timesteps it occupies a slot: ``delay`` less a pipelined latency), ``link_class``
  (rank of its delay, 0 = fastest), ``slot_ptr`` (CSR of its parallel slots); per node its
  out-links (``out_ptr``/``out_idx``), its in-links per delay class (``in_ptr``/``in_idx`` by
  ``node * classes + class``) and ``rate`` (chunks per timestep its in-links deliver);
  ``class_delay[k]`` is the delay of class ``k``. Routes through switch nodes
  (:mod:`collsynth.solvers.greedy.routes`): ``route[l]`` (-1 for a link between NPUs), the
  hops of route ``r`` in ``hop_ptr[r] .. hop_ptr[r + 1] - 1`` with their switch port
  ``hop_port``, start offset ``hop_off``, occupancy ``hop_busy``, delay ``hop_lag`` and the
  switch they enter ``hop_switch`` (-1: the NPU); ``port_cap`` per port; ``copy`` (switches
  multicast) and ``instant`` (1: a switch forwards to an NPU in the arrival's timestep;
  only a route's last hop, into its NPU, is instant).
- :data:`State` — ``A[node, chunk]``: the step at the end of which ``node`` holds ``chunk`` (its
  planned arrival; ``INF`` while nobody sends it); ``want`` the requests (``wants_all``: every
  node wants every chunk it lacks, so ``want`` need not be read); ``left[node]`` its
  unmet requests; per link slot the step it is free again, the send it
  carries and the step that send started; ``send_of[node * C + chunk]`` the send planned to
  deliver it (multi-timestep links only: chunk replacement); ``port_use[port, step & mask]``
  the slots of each switch port taken in a step (a calendar as wide as routes reach ahead);
  ``switch_arrival[switch, chunk]`` the latest step at whose end a planned send brings the
  chunk to the switch (multicast sharing).
- :data:`Relay` — hop distances ``D`` and, per chunk, whether it has a single target, that
  target and the frontier (the target's smallest distance to a holder).
- :data:`Islands` — per speed class above the fastest (``cls[l]``: link ``l``'s, by delay then
  chunks per timestep), the island (weak component of the faster links) of every node
  (``label[class, node]``, -1 for the fastest class) and ``has[island, chunk]``: the island
  holds or awaits the chunk.
- :data:`Pool` — each link's candidate chunks, oldest first, in ``chunk[head[l]:tail[l]]`` of a
  shared arena (link ``l`` owns ``chunk[start[l]:start[l] + cap[l]]``); used entries become -1.
- :data:`Sends` — the planned sends (link, chunk, arrival step, still valid) and ``first[s]``,
  the index of the first send started in step ``s``; a route's send crosses its hops
  ``hop_lo .. hop_hi - 1`` (``hop_lo`` is the last hop when it shares a multicast arrival,
  ``hop_hi`` drops the last hop when a faster copy overtook its delivery).
- :data:`Rule` — ``policy`` (:data:`RANDOM`, :data:`FIFO`, :data:`LIFO`), ``endgame`` window
  (timesteps; 0 = off).

Counters live in one int64 array ``tally`` indexed by the ``T_*`` constants.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

INF = np.iinfo(np.int32).max
RANDOM, FIFO, LIFO = 0, 1, 2
T_SENDS, T_REMAINING, T_PENDING, T_REPLACED, T_DROPPED, T_AUGMENTED, T_LAST, T_ARENA, T_GARBAGE = range(9)
TALLY_SIZE = 9
_DOMINATED = 1 << 40  # key offset of an entry whose island already holds or awaits the chunk
_UNSHARED = 1 << 30  # key offset of a route's entry that needs a new send into the switch (copying switches)
_NO_KEY = np.int64(1) << 62

Net = namedtuple("Net", "src dst delay busy link_class slot_ptr out_ptr out_idx in_ptr in_idx rate class_delay "
                        "route hop_ptr hop_port hop_off hop_busy hop_lag hop_switch port_cap copy instant")
State = namedtuple("State", "A want wants_all left slot_free slot_send slot_start send_of port_use switch_arrival")
Relay = namedtuple("Relay", "on D single target frontier")
Islands = namedtuple("Islands", "on label has cls")
Pool = namedtuple("Pool", "chunk start cap head tail")
Sends = namedtuple("Sends", "link chunk arrive ok first hop_lo hop_hi")
Rule = namedtuple("Rule", "policy endgame")

# Functions that allocate nothing and only borrow their caller's arrays are compiled without
# the runtime's reference counting: a call passing records then costs no atomic counter
# updates per array (tens of nanoseconds each), which dominated the per-send cost.
_borrowing = njit(cache=True, _nrt=False)
_inlined = njit(cache=True, _nrt=False, inline="always")


@njit(cache=True)
def seed(value):
    """Seed the compiled code's random generator (numba keeps its own state per thread)."""
    np.random.seed(value)


# ---- the pool -----------------------------------------------------------------------------

@njit(cache=True)
def reserve(add, pool, tally):
    """Room for ``add[l]`` more entries at the tail of every link ``l``: a link's live range
    moves to the front of its space, or to a new space twice as large at the arena's end.
    Returns 0, or the arena size needed when the arena is too small (then call again)."""
    chunk, start, cap, head, tail = pool.chunk, pool.start, pool.cap, pool.head, pool.tail
    need = 0
    for l in range(len(add)):
        if add[l] == 0 or tail[l] + add[l] <= start[l] + cap[l]:
            continue
        live = tail[l] - head[l]
        if live + add[l] <= cap[l]:
            new = start[l]
        else:
            size = max(2 * cap[l], live + add[l], 8)
            if tally[T_ARENA] + size > len(chunk):
                need = max(need, tally[T_ARENA] + size)
                continue
            new = tally[T_ARENA]
            tally[T_ARENA] += size
            tally[T_GARBAGE] += cap[l]
            start[l], cap[l] = new, size
        chunk[new:new + live] = chunk[head[l]:tail[l]]
        head[l], tail[l] = new, new + live
    return need


@njit(cache=True)
def repack(pool, arena, tally):
    """Copy every link's live range into the fresh ``arena`` back to back (with as much room
    again), dropping the garbage of moved ranges; returns the new arena (set it in the pool)."""
    start, cap, head, tail = pool.start, pool.cap, pool.head, pool.tail
    at = 0
    for l in range(len(start)):
        live = tail[l] - head[l]
        size = max(2 * live, 8)
        arena[at:at + live] = pool.chunk[head[l]:tail[l]]
        start[l], cap[l], head[l], tail[l] = at, size, at, at + live
        at += size
    tally[T_ARENA], tally[T_GARBAGE] = at, 0
    return arena


@_borrowing
def relay_useful(v, c, relay):
    """``v`` does not want ``c`` but carrying it there moves a single-target chunk strictly
    closer to its target (multi-target relays were checked on admission)."""
    dv = relay.D[v, relay.target[c]]
    return (not relay.single[c]) or (dv >= 0 and dv < relay.frontier[c])


@_borrowing
def relay_admissible(u, w, c, st, relay):
    """Entry ``u -> w`` for a chunk ``w`` does not want: ``w`` is closer (in hops) to a node
    still lacking it (single target: closer than the chunk's frontier)."""
    ok = relay.single[c] and relay_useful(w, c, relay)
    if not relay.single[c]:
        for n in range(st.A.shape[0]):
            if st.want[n, c] and st.A[n, c] == INF and 0 <= relay.D[w, n] < relay.D[u, n]:
                ok = True
                break
    return ok


@_borrowing
def arrivals(t, lo, hi, net, st, sends, nodes, chunks):
    """Writes to ``nodes``/``chunks`` the (node, chunk) pairs that sends ``lo..hi`` deliver at
    the end of step ``t - 1`` (unless a faster copy came first); returns their count. Sends
    of one step are grouped by destination, so the pairs of one node come together."""
    n = 0
    A, dst = st.A, net.dst
    for j in range(lo, hi):
        if sends.ok[j] and sends.arrive[j] == t - 1:
            v, c = dst[sends.link[j]], sends.chunk[j]
            if A[v, c] == t - 1:
                nodes[n], chunks[n] = v, c
                n += 1
    return n


@_borrowing
def admit(t, nodes, chunks, net, st, relay, pool):
    """Pool entries for chunks usable from step ``t`` on (they arrived at the end of ``t - 1``):
    one per out-link whose destination wants the chunk (or is a useful relay). When every node
    wants every chunk it lacks, entries are not checked here (one memory access fewer each;
    :func:`best_entry` drops those the destination already has). Needs room for one entry per
    arrival at the link's source (:func:`reserve`)."""
    A, want, wants_all = st.A, st.want, st.wants_all
    dst, delay, out_ptr, out_idx = net.dst, net.delay, net.out_ptr, net.out_idx
    arena, tail = pool.chunk, pool.tail
    for i in range(len(nodes)):
        u, c = nodes[i], chunks[i]
        for p in range(out_ptr[u], out_ptr[u + 1]):
            l = out_idx[p]
            w = dst[l]
            if not wants_all and (A[w, c] <= t + delay[l] - 1 or not (
                    want[w, c] or (relay.on and relay_admissible(u, w, c, st, relay)))):
                continue
            arena[tail[l]] = c
            tail[l] += 1


# ---- one link's choice --------------------------------------------------------------------

@_inlined
def trim(l, arrive, A, v, arena, head, tail):
    """Drop used entries and entries whose chunk ``v`` holds or gets before ``arrive`` from
    both ends of link ``l``'s range (they never become usable again)."""
    while head[l] < tail[l] and (arena[head[l]] < 0 or A[v, arena[head[l]]] < arrive):
        head[l] += 1
    while tail[l] > head[l] and (arena[tail[l] - 1] < 0 or A[v, arena[tail[l] - 1]] < arrive):
        tail[l] -= 1


@_inlined
def holders(v, c, t, net, A):
    """How many in-links of ``v`` could deliver ``c`` in step ``t`` (their source holds it):
    the rarity of the request."""
    ncls = len(net.class_delay)
    n = 0
    for p in range(net.in_ptr[v * ncls], net.in_ptr[(v + 1) * ncls]):
        if A[net.src[net.in_idx[p]], c] <= t - 1:
            n += 1
    return n


@_inlined
def best_entry(l, t, endgame, net, st, relay, isl, pool, rule):
    """Arena index of the entry link ``l`` sends in step ``t`` (-1: none usable).

    Lower key first: entries whose island already holds or awaits the chunk last
    (shorter-link-first at island level); in the ``endgame``, the chunks the fewest in-links
    of the destination can deliver first (rarest first). Among equal keys ``FIFO``/``LIFO``
    take the oldest/newest entry, ``RANDOM`` one at random (reservoir sampling, TACOS §VI-A).
    Entries whose chunk the destination gets earlier are marked used on the way."""
    return _scan_entries(l, t, endgame, False, True, 0, 0, net, st, relay, isl, pool, rule)


@_inlined
def _scan_entries(l, t, endgame, route, own, k, share_at, net, st, relay, isl, pool, rule):
    """The scan behind :func:`best_entry` (``route`` false) and :func:`best_route_entry`."""
    v, arrive, island, lo, hi = entries_of(l, t, net, st, isl, pool)
    policy = rule.policy
    scan_all = endgame or policy == RANDOM
    best, best_key, ties = -1, _NO_KEY, 0
    for i in range(hi - lo):
        j = hi - 1 - i if policy == LIFO else lo + i
        c = usable(j, v, arrive, st, relay, pool)
        if c < 0:
            continue
        shared = route and net.copy and st.switch_arrival[k, c] == share_at
        if route and not (own or shared):
            continue
        key = entry_key(v, c, t, island, endgame, isl.has, st.want, net, st.A)
        if route and net.copy and not shared:
            key += _UNSHARED
        best, best_key, ties = prefer(j, key, best, best_key, ties, policy)
        if best_key == 0 and not scan_all:
            break
    return best


@_inlined
def entries_of(l, t, net, st, isl, pool):
    """Link ``l``'s destination ``v``, the step end ``arrive`` of a send it starts in step
    ``t``, the island of ``v`` (-1 without islands) and the arena range ``lo .. hi`` of its
    entries, after the entries its destination already holds are trimmed from both ends."""
    v, arrive = net.dst[l], t + net.delay[l] - 1
    trim(l, arrive, st.A, v, pool.chunk, pool.head, pool.tail)
    island = isl.label[isl.cls[l], v] if isl.on else -1
    return v, arrive, island, pool.head[l], pool.tail[l]


@_inlined
def usable(j, v, arrive, st, relay, pool):
    """The chunk of arena entry ``j`` if destination ``v`` may take it in a send ending at
    ``arrive``, else -1: an entry used already, or taken in this step by another link, is
    skipped; one whose chunk ``v`` gets earlier, or which no longer helps any relay, is
    marked used."""
    c = pool.chunk[j]
    if c < 0 or st.A[v, c] == arrive:
        return -1
    if st.A[v, c] < arrive or (relay.on and not st.want[v, c] and not relay_useful(v, c, relay)):
        pool.chunk[j] = -1
        return -1
    return c


@_inlined
def entry_key(v, c, t, island, endgame, has, want, net, A):
    """The order key of chunk ``c`` for destination ``v`` (lower first, :func:`best_entry`):
    its island already holds or awaits it, then, in the endgame, its rarity."""
    key = 0
    if island >= 0 and has[island, c]:
        key += _DOMINATED
    if endgame and want[v, c]:
        key += holders(v, c, t, net, A)
    return key


@_inlined
def prefer(j, key, best, best_key, ties, policy):
    """``(best, best_key, ties)`` after entry ``j`` of order ``key`` is seen: a lower key
    wins; among equal keys ``RANDOM`` keeps one at random (reservoir sampling), the others the
    first seen."""
    if key < best_key:
        return j, key, 1
    if key == best_key and policy == RANDOM:
        ties += 1
        if np.random.randint(ties) == 0:
            return j, best_key, ties
    return best, best_key, ties


@_inlined
def free_slots(l, t, slot_ptr, slot_free):
    """Slots of link ``l`` free to start a send in step ``t``."""
    n = 0
    for s in range(slot_ptr[l], slot_ptr[l + 1]):
        if slot_free[s] <= t:
            n += 1
    return n


# ---- committing a send --------------------------------------------------------------------

@_inlined
def record(l, c, t, net, st, sends, tally):
    """Take a free slot of link ``l`` in step ``t`` for ``c`` and record the send; returns it."""
    slot_free = st.slot_free
    for s in range(net.slot_ptr[l], net.slot_ptr[l + 1]):
        if slot_free[s] <= t:
            slot_free[s] = t + net.busy[l]
            st.slot_send[s] = tally[T_SENDS]
            st.slot_start[s] = t
            break
    j = tally[T_SENDS]
    sends.link[j], sends.chunk[j], sends.arrive[j], sends.ok[j] = l, c, t + net.delay[l] - 1, True
    tally[T_SENDS] = j + 1
    tally[T_LAST] = t
    return j


@_inlined
def commit(l, c, t, net, st, relay, isl, sends, tally):
    """Plan ``c`` over link ``l`` starting in step ``t`` and deliver it (a slower planned copy
    it overtakes is replaced)."""
    j = record(l, c, t, net, st, sends, tally)
    deliver_new(net.dst[l], c, t + net.delay[l] - 1, j, net, st, relay, isl, sends, tally)


@_borrowing
def deliver_new(v, c, arrive, j, net, st, relay, isl, sends, tally):
    """Send ``j`` brings ``c`` to ``v`` at ``arrive``; a slower planned copy it overtakes is
    replaced."""
    old = st.A[v, c]
    overtaken = st.send_of[v * st.A.shape[1] + c] if old != INF and len(st.send_of) > 1 else -1
    deliver(v, c, arrive, j, st, relay, isl, tally)
    if overtaken >= 0:
        replace(v, overtaken, old, net, st, relay, isl, sends, tally)


@_borrowing
def deliver(v, c, arrive, j, st, relay, isl, tally):
    """Send ``j`` brings ``c`` to ``v`` at the end of step ``arrive``: bookkeeping of arrivals,
    unmet requests, island holdings and the relay frontier."""
    if st.A[v, c] == INF and (st.wants_all or st.want[v, c]):
        st.left[v] -= 1
        tally[T_REMAINING] -= 1
    st.A[v, c] = arrive
    if len(st.send_of) > 1:
        st.send_of[v * st.A.shape[1] + c] = j
    if arrive > tally[T_PENDING]:
        tally[T_PENDING] = arrive
    if isl.on:
        for k in range(1, isl.label.shape[0]):
            isl.has[isl.label[k, v], c] = True
    if relay.on and relay.single[c]:
        dv = relay.D[v, relay.target[c]]
        if 0 <= dv < relay.frontier[c]:
            relay.frontier[c] = dv


@_borrowing
def replace(v, j, old, net, st, relay, isl, sends, tally):
    """Chunk replacement (TACOS §VI-B): send ``j``, overtaken by a faster copy of its chunk to
    ``v``, carries instead a chunk its source held when it started and ``v`` still lacks (at
    random) and arrives at ``old`` as planned; a chunk so moved earlier frees its own later
    send in turn. A send with no such chunk is dropped."""
    A, want, C = st.A, st.want, st.A.shape[1]
    while j >= 0:
        r = net.route[sends.link[j]]
        if r >= 0:  # a route's send: its hops into the switches stay (others may share them)
            sends.hop_hi[j] = net.hop_ptr[r + 1] - net.hop_ptr[r] - 1
            tally[T_DROPPED] += 1
            break
        u = net.src[sends.link[j]]
        start = old - net.delay[sends.link[j]] + 1
        pick, seen = -1, 0
        for c2 in range(C):
            if want[v, c2] and A[u, c2] <= start - 1 and A[v, c2] > old:
                seen += 1
                if np.random.randint(seen) == 0:
                    pick = c2
        if pick < 0:
            sends.ok[j] = False
            tally[T_DROPPED] += 1
            j = -1
        else:
            prev = A[v, pick]
            prev_send = st.send_of[v * C + pick] if prev != INF else -1
            sends.chunk[j] = pick
            deliver(v, pick, old, j, st, relay, isl, tally)
            tally[T_REPLACED] += 1
            j, old = prev_send, prev


# ---- one timestep ---------------------------------------------------------------------------

@njit(cache=True)
def match_step(t, busy, net, st, relay, isl, pool, sends, rule, tally, idle):
    """Greedy matching of step ``t`` (TACOS §VI): delay classes shortest first; within a class,
    destinations in random order and each destination's in-links in random order
    (:func:`serve_link`; a destination's links in a row keep its holdings in cache). ``busy[l]``: slots of ``l`` another part already
    uses in this step. Links left with a free slot and a non-empty pool are written to
    ``idle``; returns their count."""
    n_idle = np.int64(0)  # not the literal 0: serve_class would compile twice (Literal[int](0), then int64)
    for k in range(len(net.class_delay)):
        order = np.random.permutation(len(net.rate))
        n_idle = serve_class(k, order, t, busy, net, st, relay, isl, pool, sends, rule, tally, idle, n_idle)
    return n_idle


@_borrowing
def serve_class(k, order, t, busy, net, st, relay, isl, pool, sends, rule, tally, idle, n_idle):
    """The links of delay class ``k``, destinations in ``order``, each one's in-links shuffled
    (see :func:`match_step`); returns the new count of ``idle`` links."""
    ncls = len(net.class_delay)
    in_ptr, in_idx = net.in_ptr, net.in_idx
    for v in order:
        lo, hi = in_ptr[v * ncls + k], in_ptr[v * ncls + k + 1]
        for i in range(hi - 1, lo, -1):  # Fisher-Yates
            r = lo + np.random.randint(i - lo + 1)
            in_idx[i], in_idx[r] = in_idx[r], in_idx[i]
        for p in range(lo, hi):
            l = in_idx[p]
            if net.route[l] >= 0:
                serve_route(l, t, net, st, relay, isl, pool, sends, rule, tally)
            elif serve_link(l, t, busy[l], net, st, relay, isl, pool, sends, rule, tally):
                idle[n_idle] = l
                n_idle += 1
    return n_idle


@_inlined
def serve_link(l, t, busy, net, st, relay, isl, pool, sends, rule, tally):
    """Each free slot of link ``l`` (``busy`` of them taken by another part) takes the link's
    best usable entry; claims are immediate, so a request is served once and a later link sees
    it taken. Returns True if a slot stays free although the link has candidates."""
    free = free_slots(l, t, net.slot_ptr, st.slot_free) - busy
    v = net.dst[l]
    late = rule.endgame > 0 and st.left[v] <= rule.endgame * net.rate[v]
    while free > 0:
        j = best_entry(l, t, late, net, st, relay, isl, pool, rule)
        if j < 0:
            break
        commit(l, pool.chunk[j], t, net, st, relay, isl, sends, tally)
        pool.chunk[j] = -1
        free -= 1
    return free > 0 and pool.tail[l] > pool.head[l]


# ---- routes through switch nodes ------------------------------------------------------------

@_borrowing
def ports_free(r, a, b, t, net, st):
    """Whether hops ``a .. b - 1`` of route ``r`` started in step ``t`` find a free slot of
    their switch port in every timestep they occupy it."""
    use, mask = st.port_use, st.port_use.shape[1] - 1
    free = True
    for h in range(net.hop_ptr[r] + a, net.hop_ptr[r] + b):
        p, first = net.hop_port[h], t + net.hop_off[h]
        for s in range(first, first + net.hop_busy[h]):
            if use[p, s & mask] >= net.port_cap[p]:
                free = False
    return free


@_borrowing
def take_ports(r, a, b, t, net, st):
    """Reserve the switch ports of hops ``a .. b - 1`` of route ``r`` started in step ``t``."""
    use, mask = st.port_use, st.port_use.shape[1] - 1
    for h in range(net.hop_ptr[r] + a, net.hop_ptr[r] + b):
        p, first = net.hop_port[h], t + net.hop_off[h]
        for s in range(first, first + net.hop_busy[h]):
            use[p, s & mask] += 1


@_borrowing
def best_route_entry(l, t, endgame, own, k, share_at, net, st, relay, isl, pool, rule):
    """:func:`best_entry` for route ``l``: with copying switches, entries whose chunk reaches
    the route's last switch ``k`` at the end of ``share_at`` (another send's arrival the route
    can share) come first, and only those when ``own`` is false (the hops into the switch
    have no free slot)."""
    return _scan_entries(l, t, endgame, True, own, k, share_at, net, st, relay, isl, pool, rule)


@_borrowing
def serve_route(l, t, net, st, relay, isl, pool, sends, rule, tally):
    """Route ``l`` (NPU -> switches -> NPU) takes chunks in step ``t`` while its last hop,
    the switch's port into the NPU, has a free slot in the timesteps it would occupy it:
    each chunk either shares an arrival at the last switch (copying switches) or needs free
    slots on every earlier hop too."""
    r = net.route[l]
    n = net.hop_ptr[r + 1] - net.hop_ptr[r]
    last = net.hop_ptr[r] + n - 1
    k = net.hop_switch[last - 1]
    share_at = t + net.hop_off[last] - 1 + net.instant  # the arrival the last hop forwards
    v = net.dst[l]
    late = rule.endgame > 0 and st.left[v] <= rule.endgame * net.rate[v]
    while ports_free(r, n - 1, n, t, net, st):
        own = ports_free(r, 0, n - 1, t, net, st)
        if not (own or net.copy):
            break
        j = best_route_entry(l, t, late, own, k, share_at, net, st, relay, isl, pool, rule)
        if j < 0:
            break
        c = pool.chunk[j]
        commit_route(l, r, n, c, t, net.copy and st.switch_arrival[k, c] == share_at, net, st, relay, isl, sends,
                     tally)
        pool.chunk[j] = -1


@_borrowing
def commit_route(l, r, n, c, t, shared, net, st, relay, isl, sends, tally):
    """Plan ``c`` over route ``l`` (route ``r`` of ``n`` hops) from step ``t``: reserve its
    ports (the last one only when it ``shared`` an arrival at the last switch), record the
    arrivals at its switches, and deliver it."""
    lo = n - 1 if shared else 0
    take_ports(r, lo, n, t, net, st)
    if not shared:
        for h in range(net.hop_ptr[r], net.hop_ptr[r] + n - 1):
            at = t + net.hop_off[h] + net.hop_lag[h] - 1
            if at > st.switch_arrival[net.hop_switch[h], c]:
                st.switch_arrival[net.hop_switch[h], c] = at
    j = tally[T_SENDS]
    arrive = t + net.delay[l] - 1
    sends.link[j], sends.chunk[j], sends.arrive[j], sends.ok[j] = l, c, arrive, True
    sends.hop_lo[j], sends.hop_hi[j] = lo, n
    tally[T_SENDS] = j + 1
    tally[T_LAST] = t
    deliver_new(net.dst[l], c, arrive, j, net, st, relay, isl, sends, tally)


# ---- maximum matching per destination -------------------------------------------------------

@_borrowing
def step_send(l, c, t, slot_ptr, slot_start, slot_send, send_ok, send_chunk):
    """Index of the send link ``l`` started in step ``t`` carrying ``c`` (-1: none)."""
    found = -1
    for s in range(slot_ptr[l], slot_ptr[l + 1]):
        j = slot_send[s]
        if slot_start[s] == t and send_ok[j] and send_chunk[j] == c:
            found = j
            break
    return found


@njit(cache=True)
def augment(l0, t, net, st, pool, sends):
    """An augmenting path (Hopcroft and Karp, SIAM J. Comput. 2(4), 1973) among the same-class
    in-links of ``v = dst[l0]`` in step ``t``, found breadth first: ``l0`` takes a chunk a
    sibling sends to ``v`` in this step, that sibling takes another, ... until a link takes a
    request nobody serves. Returns ``(links, chunks each takes)`` from ``l0`` on, empty if
    there is no such path."""
    v, arrive = net.dst[l0], t + net.delay[l0] - 1
    A, want, arena, head, tail = st.A, st.want, pool.chunk, pool.head, pool.tail
    slot_ptr, slot_start, slot_send, send_ok, send_chunk = net.slot_ptr, st.slot_start, st.slot_send, sends.ok, sends.chunk
    ncls = len(net.class_delay)
    group = v * ncls + net.link_class[l0]
    sib = net.in_idx[net.in_ptr[group]:net.in_ptr[group + 1]].copy()
    sib[np.argmax(sib == l0)], sib[0] = sib[0], l0
    m = len(sib)
    parent = np.full(m, -1, np.int64)
    taken = np.full(m, -1, np.int64)  # the chunk the parent takes from this link
    seen = np.zeros(m, np.bool_)
    queue = np.empty(m, np.int64)
    queue[0], seen[0], n_q = 0, True, 1
    end, c_end, q = -1, -1, 0
    while q < n_q and end < 0:
        x = sib[queue[q]]
        for j in range(head[x], tail[x]):
            c = arena[j]
            if c < 0 or not want[v, c] or A[v, c] < arrive:
                continue
            if A[v, c] > arrive:
                end, c_end = queue[q], c
                break
            for y in range(m):
                if not seen[y] and step_send(sib[y], c, t, slot_ptr, slot_start, slot_send, send_ok, send_chunk) >= 0:
                    seen[y], parent[y], taken[y] = True, queue[q], c
                    queue[n_q] = y
                    n_q += 1
        q += 1
    return _path(end, c_end, sib, parent, taken)


@njit(cache=True)
def _path(end, c_end, sib, parent, taken):
    """Links along an augmenting path from its root to ``end`` and the chunk each takes
    (empty when ``end`` is -1: no path)."""
    n = 0
    x = end
    while x >= 0:
        x = parent[x]
        n += 1
    links = np.empty(n, np.int64)
    chunks = np.empty(n, np.int64)
    x, c = end, c_end
    for i in range(n - 1, -1, -1):
        links[i], chunks[i] = sib[x], c
        c = taken[x]
        x = parent[x]
    return links, chunks


@njit(cache=True)
def augment_step(t, busy, idle, net, st, relay, isl, pool, sends, tally):
    """Grow the step's matching to a maximum one per destination and delay class: every idle
    link slot in ``idle`` that an augmenting path can serve gets a send."""
    for i in range(len(idle)):
        l0 = idle[i]
        while free_slots(l0, t, net.slot_ptr, st.slot_free) - busy[l0] > 0:
            links, chunks = augment(l0, t, net, st, pool, sends)
            if len(links) == 0:
                break
            apply_path(links, chunks, t, net, st, relay, isl, sends, tally)
            tally[T_AUGMENTED] += 1


@njit(cache=True)
def apply_path(links, chunks, t, net, st, relay, isl, sends, tally):
    """Carry out an augmenting path: the last link switches its send to the new request, each
    earlier one takes over the chunk its successor gave up, the first gets a new send."""
    v, arrive = net.dst[links[0]], t + net.delay[links[0]] - 1
    C, n = st.A.shape[1], len(links)
    for i in range(n - 1, 0, -1):
        j = step_send(links[i], chunks[i - 1], t, net.slot_ptr, st.slot_start, st.slot_send, sends.ok, sends.chunk)
        sends.chunk[j] = chunks[i]
        if i == n - 1:
            deliver_new(v, chunks[i], arrive, j, net, st, relay, isl, sends, tally)
        elif len(st.send_of) > 1:
            st.send_of[v * C + chunks[i]] = j
    j = record(links[0], chunks[0], t, net, st, sends, tally)
    if n == 1:
        deliver_new(v, chunks[0], arrive, j, net, st, relay, isl, sends, tally)
    elif len(st.send_of) > 1:  # the chunk its successor gave up: already delivered
        st.send_of[v * C + chunks[0]] = j
