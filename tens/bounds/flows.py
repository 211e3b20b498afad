"""The concurrent flow bound of collectives that never copy (all-to-all, scatter, gather), in seconds.

Part of :mod:`collsynth.tens.bounds` (its module documentation describes every argument).
"""

from __future__ import annotations

from ...instances.instance import Instance
from .record import Bound, not_computed

FLOW_CELLS = 600_000  # sources x link pairs above which the LP is not solved (HiGHS time and memory)


def flow_seconds(instance: Instance, budget_s: float | None = None) -> Bound:
    """The maximum concurrent flow optimum of an all-to-all, scatter or gather as a bound in
    seconds (bytes over bandwidth; latency only adds): every pair's ``M / N`` bytes cross a
    path from its source to its destination and a link carries at most ``B_l T`` bytes by
    ``T`` (:func:`collsynth.tens.concurrent_flow.solve`; Shahrokhi and Matula, J. ACM 1990; the
    per-source aggregation of Liu et al., TE-CCL, SIGCOMM 2024, Section 4). The value is the
    one re-proved from the LP's duals (:func:`collsynth.tens.concurrent_flow.certified_ratio`),
    valid whatever the solver's tolerance; it is at least every cut bound. Its model is
    ``event``; ``budget_s`` limits the solver's time.
    """
    from ..concurrent_flow import NEVER_COPY, FlowLPFailed, pair_demands, solve

    if instance.concurrent or instance.collective.kind not in NEVER_COPY:
        return not_computed("event", "flow", "only a single all-to-all, scatter or gather")
    coll, topo = instance.collective, instance.topology
    sources = 1 if coll.kind == "scatter" else len(coll.nodes) - (coll.kind == "gather")  # before listing N^2 pairs
    if sources * max(1, topo.num_links) > FLOW_CELLS:
        return not_computed("event", "flow", f"more than {FLOW_CELLS:,} sources x links")
    demands = pair_demands(coll.kind, coll.nodes, coll.root)
    try:
        sol = solve(topo, demands, time_limit=budget_s)
    except (FlowLPFailed, ValueError) as e:
        return not_computed("event", "flow", str(e))
    pair_bytes = coll.chunk_bytes * coll.chunks_per_node
    return Bound(sol.seconds(pair_bytes), "s", "event", "flow", None,
                 f"concurrent flow LP optimum {sol.seconds(pair_bytes, certified=False):.9g} s, re-proved by its duals")
