"""The in-order event model: the ``event`` simulation with every link serving its messages in
the schedule's order, as a program-order executor runs them (``docs/cost-models.md``).

Routes, store-and-forward, latency and data dependencies are those of ``event``
(:func:`collsynth.tens.cost.price_event`): a directed node pair (its parallel links pooled)
serves one message at a time for ``bytes / bandwidth``, the message reaches the next node
``alpha`` later, and a send's first hop waits for the arrivals its piece needs (the pricing
plan's dependencies, :mod:`collsynth.tens.dependencies`; a send out of a switch for the
arrival it forwards). The one difference is the order on a link. ``event`` serves the hops
ready first (first in, first out); here a link serves its hops in the schedule's order, by
(step, position in the step), and a hop waits for the one before it on its link even when a
later one is ready. That is how an MSCCL or MSCCL++ program runs: each thread block executes
its instructions in program order, a send blocking until its data is there, so the sends on a
connection leave in the order the program lists them (Cowan et al., "MSCCLang: Microsoft
Collective Communication Language", ASPLOS 2023, Sections 4-5: the compiler assigns each
send to a thread block and orders the block's instructions, which the runtime executes in
that order; Azure/msccl-executor-nccl, ``src/device/msccl_kernel.cu``: every thread block runs
its steps in order, as the project's interpreter ``tests/msccl_sim.py`` does). Under FIFO a GPU's own
pieces, all ready at time 0, leave before any piece it relays and starve the hops downstream;
in schedule order a pipelined schedule interleaves them as written.

The order holds on every link a send crosses, the later links of a routed send
(``routing == "shortest-path"``) included. That is what a program runs when every hop is a
send of its own (schedules sent on links; switch hops kept as sends of their own, as
tree-packing emits them); for a routed send whose later hops a network forwards on its own,
it is stricter than a router serving in arrival order (recursive doubling routed on an 8-ring
takes 2.2x its FIFO ``event`` time here), so the model is meant for schedules sent on links.

Time is a longest path over a directed acyclic graph whose vertices are the hops: a hop starts
at the latest of its data (the previous hop's arrival on its route, or, for a send's first hop,
its dependencies' arrivals) and the end of the previous hop on its link. Every dependency is an
arrival of an earlier step (``event`` refuses the one exception, a send from a switch over an
instant hop in its arrival's step), a route's hops follow one another, and a link's order is
step order, so (position in step order, hop) is a topological order: one pass over the sends in
step order computes every time, and no order the model accepts can deadlock. A dependency that
does not point to an earlier position (a malformed plan) raises
:class:`~collsynth.InputError` naming the send rather than giving a price.

Lower bound: the ``event`` bound (:mod:`collsynth.tens.bounds`: distance, cut, volume and the
exact cut optimum) counts only what links must carry and how far data must travel, with each
link carrying one message at a time at its bandwidth and every hop costing its latency; it holds
for every order in which a link may serve its messages, so it holds for this order too (the
order constrains when a link serves, never how much it carries or how fast).

>>> from collsynth.instances.generators import build
>>> from collsynth.instances.instance import make_instance
>>> from collsynth.tens.schedule import from_arrays
>>> line = build("ring", {"nodes": 3, "bidirectional": False}, bandwidth=1.0, alpha=0.0)
>>> inst = make_instance(line, "allgather", message_bytes=3.0)
>>> s = from_arrays("allgather", 3, 3, chunk=[0, 0, 1], src=[0, 1, 1], dst=[1, 2, 2], step=[1, 2, 2])
>>> price_in_order(s, inst).total_s, price_event(s, inst).total_s  # 1 -> 2 relays chunk 0 first here
(3.0, 2.0)
"""

from __future__ import annotations

import operator

import numpy as np
from numba import njit

from ... import InputError
from ..cost import Cost, chunk_bytes_of, plan_for, price_event  # noqa: F401 - price_event: the doctest's comparison
from ..plan import PricingPlan
from ..ten import NotSupported, instant_hops
from . import CostModel

__all__ = ["MODEL", "price_in_order"]


@njit(cache=True, nogil=True)
def in_order_times(nbytes, r, rptr, rlinks, bandwidth, alpha, dptr, ditems, g_in, p, ga, gstart, members):
    """``(last arrival, latency on its critical path, -1)`` of the sends in step order, or
    ``(0, 0, q)`` when position ``q`` needs data that is not from an earlier position.

    ``nbytes[q]`` is position ``q``'s piece, its route ``rlinks[rptr[r[q]]:rptr[r[q] + 1]]``.
    Dependencies are exact pairs (``dptr`` non-empty: position ``q`` needs the arrivals of
    ``ditems[dptr[q]:dptr[q + 1]]``) or group prefixes (``q`` needs the first ``p[q]`` members of
    group ``g_in[q]``, ``members[gstart[g]:gstart[g + 1]]`` in position order; ``ga[q]`` is
    its own group). Each link keeps the end of its last message and the latency on the path
    that decided it; data wins a tie with the link (as in ``event``).
    """
    n = len(nbytes)
    exact = len(dptr) > 0
    free = np.zeros(len(bandwidth))
    free_lat = np.zeros(len(bandwidth))
    arr = np.empty(n if exact else 0)
    arr_lat = np.empty(n if exact else 0)
    top = np.empty(0 if exact else n)  # prefix maxima of arrival, by slot in members
    top_lat = np.empty(0 if exact else n)
    slot = np.empty(0 if exact else n, np.int64)
    if not exact:
        for x in range(n):
            slot[members[x]] = x
    best, best_lat = 0.0, 0.0
    for q in range(n):
        t, lat = 0.0, 0.0
        if exact:
            for x in range(dptr[q], dptr[q + 1]):
                j = ditems[x]
                if j >= q:
                    return 0.0, 0.0, q
                if arr[j] >= t:
                    t, lat = arr[j], arr_lat[j]
        elif g_in[q] >= 0 and p[q] > 0:
            s = gstart[g_in[q]] + p[q] - 1
            if members[s] >= q:
                return 0.0, 0.0, q
            t, lat = top[s], top_lat[s]
        for h in range(rptr[r[q]], rptr[r[q] + 1]):
            link = rlinks[h]
            if free[link] > t:
                t, lat = free[link], free_lat[link]
            t += nbytes[q] / bandwidth[link]
            free[link], free_lat[link] = t, lat
            t += alpha[link]
            lat += alpha[link]
        if exact:
            arr[q], arr_lat[q] = t, lat
        else:
            s = slot[q]
            if s > gstart[ga[q]] and top[s - 1] > t:
                top[s], top_lat[s] = top[s - 1], top_lat[s - 1]
            else:
                top[s], top_lat[s] = t, lat
        if t > best:
            best, best_lat = t, lat
    return best, best_lat, -1


def _refuse_instant_switch(schedule, instance) -> None:
    """:class:`~collsynth.tens.ten.NotSupported` for a send over an instant switch-to-NPU hop
    (it forwards an arrival of its own step, which breaks step order as a topological order)."""
    if len(schedule) and instant_hops(instance.topology, schedule.src, schedule.dst).any():
        raise NotSupported("the event-inorder model dispatches a send after the arrivals of earlier steps: a send "
                           "from a switch to an NPU whose hop is instant (topology switch_hop) starts in its "
                           "arrival's step; price it with the sync model or keep switch_hop = timestep")


def price_in_order(schedule, instance, timestep=None, exact_deps=None, plan: PricingPlan | None = None,
                   links_as: np.ndarray | None = None) -> Cost:
    """The schedule's time when every link serves its messages in step order (module doc):
    a longest path over the hops in step order. ``T_L_s`` sums the latencies on the critical
    path, ``T_B_s`` is the rest. Dependencies are exact pairs or group prefixes as in
    :func:`collsynth.tens.cost.price_event` (``exact_deps``). ``links_as``: per link pair, the
    pair whose order it is served in (a link orbit's representative,
    :mod:`collsynth.tens.pipelined_event`), as in :func:`collsynth.tens.cost.price_event`."""
    _refuse_instant_switch(schedule, instance)
    n = len(schedule)
    if n == 0:
        return Cost("event-inorder", 0, 0.0, 0.0, 0.0, {})
    cb = chunk_bytes_of(instance)
    if schedule.chunk.max() >= len(cb) or schedule.chunk.min() < 0:
        raise InputError("schedule", f"a send names a chunk outside 0..{len(cb) - 1}")
    plan = plan_for(schedule, instance, plan)
    view, rt, dep = plan.view, plan.routes, plan.deps(exact_deps)
    nbytes = (view.hi - view.lo) / schedule.denom * cb[view.chunk]
    la = instance.topology.link_arrays
    if dep.pairs is not None:  # listed by the needing position (dependency_pairs_of): its rows are a range
        dptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(dep.pairs[0], minlength=n), out=dptr[1:])
        ditems = dep.pairs[1]
    else:
        dptr, ditems = np.zeros(0, np.int64), np.zeros(0, np.int32)
    links = rt.links if links_as is None else links_as[rt.links].astype(rt.links.dtype)
    best, lat, bad = in_order_times(nbytes, rt.r, rt.ptr, links, la.bandwidth, la.alpha, dptr, ditems, dep.g_in,
                                    dep.p, dep.ga, dep.gstart, dep.members)
    plan.done("event-inorder")
    if bad >= 0:
        i = int(view.original(np.array([bad]))[0])
        raise InputError("schedule", f"send {i} (step {int(schedule.step[i])}) needs data that no earlier step "
                                     "brings: a link serving in step order would wait for it forever")
    hops = int(rt.hops[rt.r].sum(dtype=np.int64))
    return Cost("event-inorder", schedule.num_steps, lat, best - lat, best, {"messages": n, "hops": hops})


# rate: a third of the 27.6 M hops/s measured by CPU on tree-packing's A100 x2 schedule (4.6 M sends, the
# plan's groups computed; the FIFO event model: 6.5 M there); the model is priced only when asked by name
MODEL = CostModel(name="event-inorder", doc="in-order event simulation price (each link in step order)",
                  price=price_in_order, rate=9e6, bound=operator.attrgetter("event"), uses_plan=True,
                  default=False)
