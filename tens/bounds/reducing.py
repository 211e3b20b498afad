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
from .record import Bound, not_computed

SOURCE = "reducing-cut"
REDUCING_CUT_CELLS = 50_000_000  # GPUs x links above which the 2(N - 1) max-flows are not computed (time)


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
