"""The allreduce bound with switches that reduce: every node set that splits the GPUs takes in,
and sends out, one whole copy of the data.

With a reducing switch (:mod:`collsynth.instances.switch_ops`) the arguments of the rest of
:mod:`collsynth.tens.bounds` keep holding: they count what must cross a node set's links, and a
partial sum crossing once carries every contribution behind it. What no longer holds is any
argument that makes a GPU send its contributions more than once: NVLS's allreduce sends each
GPU's input up once and brings the result down once, so a box of one switch runs in ``M / B``
where GPU-to-GPU schedules need ``2 (N - 1) / N * M / B`` (Patarasuk and Yuan, "Bandwidth
optimal all-reduce algorithms for clusters of workstations", JPDC 69(2), 2009, Section 3).

The bound (source ``reducing-cut``): for an allreduce of ``M`` bytes, take any node set ``S``
(switches included) holding some GPU ``v`` and leaving out some GPU ``u``. Every chunk's result
is needed at ``v`` and has a contributor (``u``) outside, so at least one chunk's worth of it
(a partial sum or the result) enters ``S``: ``M`` bytes over the links into ``S``; likewise
``M`` bytes leave. So ``T >= M / B_in(S)`` under the event, sync and TEN models (a link of
bandwidth ``b`` carries at most ``b t`` bytes in ``t`` seconds whatever the steps, latencies
and pieces), and the largest such bound is ``M / lambda`` with ``lambda`` the least directed
max-flow between two GPUs: a set entered by little bandwidth either leaves out GPU ``g0`` (a
cut from ``g0`` to a GPU inside) or holds it (a cut from a GPU outside to ``g0``), so
``lambda = min over v of min(maxflow(g0, v), maxflow(v, g0))``, ``2 (N - 1)`` max-flows
(Ford and Fulkerson's max-flow min-cut theorem). On one box of ``N`` GPUs around a reducing
switch with links of ``B`` each way it is ``M / B``; on DGX H100 boxes joined by rails, each
box's ``8 x 50 GB/s`` of NICs (``M / 400 GB/s``). It holds with or without reducing switches
(it is the cut argument of combining collectives for one whole copy); it is reported only
where switches reduce, where it is the one that NVLS-class schedules meet.

In TEN timesteps (source ``combining-arrivals``, :func:`combining_arrivals`) the chunks add a
pipeline fill the seconds bound cannot see: a GPU behind a switch receives nothing in the
first timestep (the switch holds nothing), so the 4-GPU box's allreduce of 4 chunks takes
``1 + 4 = 5`` timesteps where ``M / lambda`` counts 4.

>>> from collsynth.instances.generators import build
>>> from collsynth.instances.instance import make_instance
>>> box = build("switch", {"nodes": 4, "reduce": True, "copy": True}, bandwidth=100e9, alpha=0.0)
>>> b = reducing_cut_seconds(make_instance(box, "allreduce", message_bytes=1e9))
>>> b.value, b.source
(0.01, 'reducing-cut')
"""

from __future__ import annotations

import math

import numpy as np

from ...instances.instance import Instance
from ...instances.switch_ops import reducing_mask
from .demand import instant_out
from .record import Bound, not_computed
from .supply import TimestepSupply

SOURCE = "reducing-cut"
REDUCING_CUT_CELLS = 50_000_000  # GPUs x links above which the 2(N - 1) max-flows are not computed (time)
ARRIVALS_SOURCE = "combining-arrivals"
ARRIVALS_CELLS = 4_000_000  # contributor sets x nodes x nodes above which combining_arrivals is not computed (time)


def reducing_cut_seconds(instance: Instance) -> Bound:
    """``M / lambda`` seconds (module doc) for a single allreduce on a topology with reducing
    switches, as an ``event`` bound (valid under sync and TEN too); witness ``(u, v)``, the GPU
    pair whose max-flow ``u -> v`` is ``lambda``."""
    topo = instance.topology
    if instance.concurrent or instance.collective.kind != "allreduce" or not reducing_mask(topo).any():
        return not_computed("event", SOURCE, "only a single allreduce on a topology with reducing switches")
    gpus = list(instance.collective.nodes)
    if len(gpus) * max(1, topo.num_links) > REDUCING_CUT_CELLS:
        return not_computed("event", SOURCE, f"more than {REDUCING_CUT_CELLS:,} GPUs x links")
    lam, pair = least_pair_flow(topo, gpus)
    if lam <= 0:
        return not_computed("event", SOURCE, "two GPUs are not joined")
    return Bound(instance.collective.message_bytes / lam, "s", "event", SOURCE, pair)


def least_pair_flow(topology, gpus: list[int]) -> tuple[float, tuple[int, int]]:
    """``(lambda, (u, v))``: the least directed max-flow (bytes/s) between two of ``gpus`` over
    the live links (parallel links' bandwidths added), and a pair attaining it. Capacities are
    rounded up to whole units of the smallest bandwidth / 2^16 for the integer max-flow, so
    ``lambda`` is never below the exact one (the bound stays a bound)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_flow

    la = topology.link_arrays
    unit = float(la.bandwidth.min()) / (1 << 16)
    cap = np.ceil(la.bandwidth / unit).astype(np.int64)
    if cap.sum() >= np.iinfo(np.int32).max:
        unit = float(la.bandwidth.sum()) / (np.iinfo(np.int32).max // 2)
        cap = np.ceil(la.bandwidth / unit).astype(np.int64)
    graph = csr_matrix((cap.astype(np.int32), (la.src, la.dst)), shape=(topology.size, topology.size))
    g0, best, pair = gpus[0], math.inf, (gpus[0], gpus[0])
    for v in gpus[1:]:
        for u, w in ((g0, v), (v, g0)):
            flow = maximum_flow(graph, u, w).flow_value
            if flow < best:
                best, pair = flow, (u, w)
    return float(best) * unit, pair


def combining_arrivals(instance: Instance, supply=None, model: str = "timesteps", convert=int) -> Bound:
    """TEN timesteps from what one node of a combining collective must take in and send out,
    each with the time it still needs (source ``combining-arrivals``); other models: not
    computed (pieces smaller than a chunk shorten the fill it counts).

    Node ``v`` needs the result of chunk ``c`` and some other rank contributes to it: the
    contribution of each rank ``u`` reaches ``v`` no earlier than the end of timestep
    ``d(u, v)`` (the delay-weighted distance, every link at least its delay, a switch holding
    nothing), so for every piece of ``c`` some arrival at ``v`` comes at or after its release
    ``r_c = max over u != v of d(u, v)``: a whole chunk's worth arrives then or later,
    whatever the partial sums (a reducing switch combines contributions, it does not make them
    travel faster). ``v`` takes in at most ``m_in`` chunks per timestep (its in-pairs'
    capacities), so if ``n`` chunks are released at ``theta`` or later, ``T >= theta - 1 +
    ceil(n / m_in)`` (Carlier, "The one-machine sequencing problem", European Journal of
    Operational Research 11(1), 1982, Section 2: release dates, here unit jobs on ``m_in``
    machines). Mirrored in time: ``v`` contributes to chunk ``c`` whose result some other
    ``w`` needs, so a chunk's worth of sends out of ``v`` carries its contribution, and one
    that starts in timestep ``s`` reaches the farthest such ``w`` no earlier than ``s - 1 +
    q_c`` with ``q_c = max over w != v of d(v, w)``; at most ``m_out`` start per timestep,
    so ``T >= ceil(n / m_out) - 1 + theta`` for the ``n`` chunks of tail ``q_c >= theta``.
    Both hold for every schedule that respects the TEN's link capacity, pieces included,
    and with or without reducing switches; on the 4-GPU box around a reducing switch they
    give ``1 + 4 = 5`` timesteps for 4 chunks, which NVLS meets.

    ``supply`` must be the timesteps model's :class:`TimestepSupply` (its capacities,
    delays and latencies; instance bounds pass it); witness ``v=<node> in|out``.

    >>> from collsynth.instances.generators import build
    >>> from collsynth.instances.instance import make_instance
    >>> box = build("switch", {"nodes": 4, "reduce": True, "copy": True}, bandwidth=1.0, alpha=0.0)
    >>> b = combining_arrivals(make_instance(box, "allreduce"), TimestepSupply(np.ones(8), np.ones(8)))
    >>> b.value, b.witness
    (5, 'v=0 in')
    """
    if model != "timesteps" or not isinstance(supply, TimestepSupply):
        return not_computed(model, ARRIVALS_SOURCE, "TEN timesteps only (pieces shorten the fill it counts)")
    topo = instance.topology
    combining = [(c.precondition, c.postcondition) for c in instance.collectives if c.combining]
    if not combining:
        return not_computed(model, ARRIVALS_SOURCE, "no combining collective")
    sets = np.unique(np.concatenate([p for p, _ in combining]), axis=0)
    if len(sets) * topo.size * topo.size > ARRIVALS_CELLS:
        return not_computed(model, ARRIVALS_SOURCE, f"more than {ARRIVALS_CELLS:,} contributor sets x nodes x nodes")
    dist = _lag_distances(topo, supply)
    la = topo.link_arrays
    m_in = np.bincount(la.dst, weights=supply.cap, minlength=topo.size)
    m_out = np.bincount(la.src, weights=supply.cap, minlength=topo.size)
    best, witness = 0, None
    for pre, post in combining:
        release = _farthest(dist, pre, post)  # [chunk, v]: max over contributors u != v of d(u, v)
        tail = _farthest(dist.T, post, pre)  # [chunk, v]: max over needing w != v of d(v, w)
        for table, m, side in ((release, m_in, "in"), (tail, m_out, "out")):
            if np.isinf(table).any():
                return not_computed(model, ARRIVALS_SOURCE, "a contribution cannot reach a node needing it")
            for v in np.flatnonzero(~np.isnan(table).all(axis=0)).tolist():
                times = table[:, v][~np.isnan(table[:, v])]
                if m[v] <= 0:
                    return not_computed(model, ARRIVALS_SOURCE, f"node {v} has no link {side}")
                value = _sequencing(times, float(m[v]))
                if value > best:
                    best, witness = value, f"v={v} {side}"
    return Bound(convert(best), "timesteps", model, ARRIVALS_SOURCE, witness)


def _lag_distances(topology, supply: TimestepSupply) -> np.ndarray:
    """All-pairs delay-weighted distances in TEN timesteps: every pair its delay plus latency,
    one less over an instant switch-to-NPU hop (:func:`collsynth.tens.ten.instant_hops`)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import dijkstra

    la = topology.link_arrays
    lag = (supply.delay + supply.latency - instant_out(topology)).astype(float)
    zero = lag <= 0
    graph = csr_matrix((np.where(zero, 1e-12, lag), (la.src, la.dst)), shape=(topology.size, topology.size))
    return np.round(dijkstra(graph, directed=True))


def _farthest(dist: np.ndarray, origin: np.ndarray, target: np.ndarray) -> np.ndarray:
    """``[chunk, v]``: for every chunk with ``target[chunk, v]`` and an ``origin`` node other
    than ``v``, the largest ``dist[u, v]`` over those ``u`` (``inf``: one cannot reach
    ``v``); ``nan`` elsewhere (no demand)."""
    off = dist.copy()
    np.fill_diagonal(off, -np.inf)
    sets, which = np.unique(origin, axis=0, return_inverse=True)
    per_set = np.array([off[s].max(axis=0) if s.any() else np.full(len(off), -np.inf) for s in sets])
    out = per_set[np.ravel(which)]
    return np.where(target & (out > -np.inf), out, np.nan)


def _sequencing(times: np.ndarray, m: float) -> int:
    """``max over theta of theta - 1 + ceil(n(theta) / m)``, ``n(theta)`` the ``times`` at
    least ``theta`` (:func:`combining_arrivals`); 0 when there are none."""
    if not len(times):
        return 0
    t = np.sort(times)[::-1]
    n = np.arange(1, len(t) + 1)
    return int((t - 1 + np.ceil(n / m - 1e-9)).max())
