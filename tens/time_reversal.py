"""Exact time reversal: a reduction as an allgather run backwards, link by link.

A reduce-scatter is the time reversal of an allgather on the transposed topology (Zhao et al.,
"ForestColl: Throughput-Optimal Collective Communications on Heterogeneous Network Fabrics",
arXiv 2402.06787, Section 4 and Appendix A): every send ``u -> v`` of a piece becomes a send
``v -> u`` of that piece's partial sum, and a node's outgoing partial waits for all its incoming
partials of the piece (the reverse of everything it forwarded). :func:`~collsynth.tens.schedule.reverse`
reverses the steps, so the synchronous model (``docs/cost-models.md``) sees the same step loads
in reverse order and prices the reversal exactly as the allgather. :func:`reversed_in_time` also
reverses the order of the sends within each step, so that every link lists its sends in the
reverse of the order it served the allgather's under the in-order event model
(:mod:`collsynth.tens.cost_models.event_inorder`: each link in step order, then position).

**Why that reaches the allgather's in-order time.** Let the allgather end at ``T``; a send
``y`` over ``u -> v`` holding the link over ``[s_y, e_y]`` arrives at ``a_y = e_y + alpha``.
Its reversal ``x`` over ``v -> u`` is *due* to start at ``T - a_y`` (it then arrives at
``T - s_y``). By induction in the reversed order, every ``x`` starts no later than due: (1) its
data are the reversals of the sends ``z`` that forwarded ``y``'s piece from ``v``, which left
at ``s_z >= a_y`` and whose reversals arrive by ``T - s_z <= T - a_y``; a switch's forward is
paired with the arrival it forwards, ``j``-th with ``j``-th, and the reversed order within the
steps keeps the pairs; (2) the send before ``x`` on its link is the reversal of the send after
``y`` on ``u -> v``, which started at or after ``e_y``, so it ends by ``T - e_y - alpha = T - a_y``.
So the reversal's in-order time is at most ``T`` (:func:`in_order_times` gives every send's
start, ``tests/test_time_reversal.py`` checks the induction on random switched boxes), and the
reduce-scatter's cut optimum is the allgather's on the transposed topology by the same reversal
(:func:`collsynth.tens.cut_optimum.flow_net` with ``transpose``).

**Not under FIFO links.** The ``event`` model serves each link's messages in the order they
became ready (:func:`collsynth.tens.cost.price_event`). A GPU's own contribution is ready at
time 0 and a partial it relays only when its children's have arrived, so a link serves all of
its GPU's own data before any relay, whatever order the steps list; the induction's step (2)
fails. Measured (``benchmarks/bench_allreduce.py --reversal``, DGX-H100 x2, 1 GB, alpha 0, the
greedy forest at 200 pieces): the allgather 1.0017x the bound in order, its exact reversal
1.0017x in order (no send late) and 1.22x under ``event``, the same as the step reversal's
1.22x; listing every GPU's own data first in every link's order (what FIFO does) makes the
in-order time 1.63x: on that forest 88 % of the sends carry a GPU's own data, and the NVLink
ports that carry most of it also carry the relays the NICs wait for. Waiting *more* can help:
the same ring reduce-scatter priced with every send waiting for every earlier arrival of its
chunk at its source (the event model's dependency fallback, ``exact_deps=False``) runs 1.17x
instead of 1.37x on DGX-H100 x2 and 1.0012x instead of 1.018x on one MI250 box, but the greedy
forests run slower so (1.22x -> 1.55x, 1.61x -> 1.76x). What pins the reversed order on every
link is the in-order model's rule itself (each link serves in step order, as an MSCCL thread
block runs its sends). So a schedule may declare it: ``link_order = "program"``
(:class:`~collsynth.tens.schedule.Schedule`) makes every send out of a GPU wait for the start
of the one before it on its link, which the ``event`` and ``ten`` models honour and the MSCCL
XML export emits as dependencies (``docs/schedules.md``); switches still forward in arrival
order, so the induction above covers only the GPUs' links; on the switched systems measured
(``benchmarks/bench_allreduce.py --kinds reduce_scatter``: A100 x8, DGX-H100 x2, MI250 x1-x4,
NDv2 x2, DGX-2 x2; 1 GB, alpha 0) tree packing's reductions price under ``event`` no slower
than in order. Tree packing's reductions declare it
(:func:`collsynth.tens.pipelined_trees.expand`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numba import njit

from .. import InputError
from .schedule import Schedule, reverse

__all__ = ["in_order_times", "late_sends", "reversed_in_time"]


def reversed_in_time(schedule: Schedule) -> Schedule:
    """The exact time reversal of ``schedule`` (module doc): :func:`~collsynth.tens.schedule.reverse`
    (send ``u -> v`` in step ``t`` becomes ``v -> u`` in step ``T + 1 - t``, the kind reversed)
    with its rows in reverse order, so every step, and every link within it, lists its sends in
    the reverse of the original's order. Reversing twice gives the schedule back.

    >>> from collsynth.tens.schedule import from_sends
    >>> ag = from_sends([(0, 0, 1, 0, 1, 1), (0, 0, 1, 0, 2, 1), (0, 0, 1, 1, 3, 2)], "allgather", nodes=4,
    ...                 chunks=4)
    >>> [(s.src, s.dst, s.step) for s in reversed_in_time(ag).sends()]
    [(3, 1, 1), (2, 0, 2), (1, 0, 2)]
    >>> reversed_in_time(reversed_in_time(ag)).sends() == ag.sends()
    True
    """
    back = reverse(schedule)
    rows = np.arange(len(back) - 1, -1, -1)
    return replace(back, chunk=back.chunk[rows], lo=back.lo[rows], hi=back.hi[rows], src=back.src[rows],
                   dst=back.dst[rows], step=back.step[rows], op=back.op[rows])


@njit(cache=True, nogil=True)
def _times(nbytes, r, rptr, rlinks, bandwidth, alpha, dptr, ditems):
    """``(start, arrival, bad)`` of the positions in step order: a send's first hop starts at
    the latest of its dependencies' arrivals (``ditems[dptr[q]:dptr[q + 1]]``) and the end of
    the previous message on its link, each later hop of a route when the one before it arrived;
    ``bad`` is a position needing data of no earlier position (-1 when none)."""
    n = len(nbytes)
    free = np.zeros(len(bandwidth))
    start = np.zeros(n)
    arrival = np.zeros(n)
    for q in range(n):
        t = 0.0
        for x in range(dptr[q], dptr[q + 1]):
            j = ditems[x]
            if j >= q:
                return start, arrival, q
            t = max(t, arrival[j])
        first = True
        for h in range(rptr[r[q]], rptr[r[q] + 1]):
            link = rlinks[h]
            t = max(t, free[link])
            if first:
                start[q] = t
                first = False
            t += nbytes[q] / bandwidth[link]
            free[link] = t
            t += alpha[link]
        arrival[q] = t
    return start, arrival, -1


def in_order_times(schedule: Schedule, instance) -> tuple[np.ndarray, np.ndarray]:
    """Every send's start (its first hop's) and arrival (its last hop's) in seconds, by schedule
    index, under the in-order event model (:mod:`collsynth.tens.cost_models.event_inorder`: the
    same routes, latency and dependencies; the largest arrival is its time), with the exact
    dependency pairs. Raises :class:`~collsynth.InputError` when the pairs exceed their budget
    (:func:`collsynth.tens.dependencies.pair_budget`) or a send needs data of no earlier step.

    A 3-node line at 1 byte/s: node 1 forwards chunk 0 after its 2 bytes arrived.

    >>> from collsynth.instances.generators import build
    >>> from collsynth.instances.instance import make_instance
    >>> from collsynth.tens.schedule import from_arrays
    >>> line = build("ring", {"nodes": 3, "bidirectional": False}, bandwidth=1.0, alpha=0.0)
    >>> inst = make_instance(line, "allgather", message_bytes=6.0)
    >>> s = from_arrays("allgather", 3, 3, chunk=[0, 0], src=[0, 1], dst=[1, 2], step=[1, 2])
    >>> [t.tolist() for t in in_order_times(s, inst)]
    [[0.0, 2.0], [2.0, 4.0]]
    """
    from .cost import chunk_bytes_of, plan_for

    n = len(schedule)
    if n == 0:
        return np.zeros(0), np.zeros(0)
    plan = plan_for(schedule, instance)
    view, rt, dep = plan.view, plan.routes, plan.deps(True)
    if dep.pairs is None:
        raise InputError("schedule", f"{n:,} sends: their exact dependencies exceed the pair budget")
    dptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(dep.pairs[0], minlength=n), out=dptr[1:])
    nbytes = (view.hi - view.lo) / schedule.denom * chunk_bytes_of(instance)[view.chunk]
    la = instance.topology.link_arrays
    start, arrival, bad = _times(nbytes, rt.r, rt.ptr, rt.links, la.bandwidth, la.alpha, dptr, dep.pairs[1])
    if bad >= 0:
        raise InputError("schedule", f"send {int(view.original(np.array([bad]))[0])} needs data no earlier step brings")
    index = view.original(np.arange(n))
    out_start, out_arrival = np.empty(n), np.empty(n)
    out_start[index], out_arrival[index] = start, arrival
    return out_start, out_arrival


def late_sends(original: Schedule, original_instance, reversal: Schedule, instance, tolerance: float = 1e-12) -> int:
    """How many sends of ``reversal`` (:func:`reversed_in_time` of ``original``) start later
    under the in-order event model than due (module doc: ``T - a``, ``a`` the arrival of the
    send it reverses, ``T`` the original's time), each priced on its own instance; 0 is the
    induction of the module doc. ``tolerance`` is relative to ``T``."""
    _, arrival = in_order_times(original, original_instance)
    start, _ = in_order_times(reversal, instance)
    due = arrival.max() - arrival[::-1]  # row i of the reversal reverses row n - 1 - i of the original
    return int(np.count_nonzero(start > due + tolerance * arrival.max()))
