"""A ``sync`` bound from one box's steps: every step that brings data into a box pays its NIC's
alpha, and what enters last must still cross the box's own switch (:func:`drain_bound`).

The synchronous price (Zhao et al., "Efficient Direct-Connect Topologies for Collective
Communications", NSDI 2025, Section 3.2) of ``S`` steps is ``sum_t (a_t + b_t)``: ``a_t`` the
largest alpha of a link used in step ``t``, ``b_t`` the largest ``bytes_l / bandwidth_l``. The
bound ``L + T*`` (:func:`collsynth.tens.bounds.instance._sync_total`) charges the latency of one
path and the bandwidth of the best cut. A pipelined schedule pays more, and so must every
schedule: the data a box takes in through its NICs arrives over many steps, each paying a NIC's
alpha, and whatever arrives in a step must still be forwarded inside the box two steps later.

**The box.** ``C``: the compute nodes that a switch ``sigma`` links to, both ways and only them
(a DGX's NVSwitch; also a one-switch rail), with ``c = |C| >= 2``, all taking part in a single
allgather. A link into a node of ``C`` is *internal* when it leaves a switch whose links in all
come from ``C``, else *external*. It is required that every external link leaves a switch
(holding nothing, TE-CCL's model: a send out of it in step ``t`` forwards what reached it in
step ``t - 1``; Liu et al., SIGCOMM 2024, Section 4) by a hop that is not instant, that no two
nodes of ``C`` are linked directly and that no internal hop is instant, so a piece that enters
``C`` at ``u`` in step ``t`` reaches another node of ``C`` inside the box in step ``t + 2`` at
the earliest. Steps are the sync model's (no pipelined link latency, a switch forwarding in the
step after the one that brought the piece: every schedule without a declared TEN timestep)
for sends on links (routing ``links``: tree packing's, the TEN producers', the compact
forms'). A routed schedule (logical sends over paths, ``shortest-path``) crosses every link of
a path in one step, paying its links' loads at once, so it is outside the proof: on DGX H100
x2 with NICs of 2 B/s and alpha 1 s, NVLink 16 B/s and alpha 0, a byte a block, box mates
summing over the box switch and then one routed step per rail pair reduce-scatter in 3.375 s
against the bound's 3.4375 s (``tests/test_drain_injections.py``);
such a schedule is bounded by ``L + T*`` alone (``Bounds.sync_routed``).
``B_e``, ``B_i``: the summed bandwidths of the external and internal links into ``C``;
``alpha_e``: the least alpha of an external link; ``alpha_u``: the least alpha of a link into a
switch an external link leaves; ``s``: a shard's bytes; ``P``: the participants.

**Proof.** Take any schedule; drop its empty steps (the price does not change). Call step
``t`` an *entry step* when some external link carries a piece into ``C`` in it, a *pre-step*
when it is not one but step ``t + 1`` is. An entry step pays ``a_t >= alpha_e``; a pre-step
``a_t >= alpha_u`` (what leaves the switch in ``t + 1`` reached it in ``t``). Number the
entry and pre-steps ``1 .. J`` (*phases*); ``T_L >= J min(alpha_e, alpha_u)``, and
``T_L >= L`` (the distance argument). The first phase is a pre-step (nothing is in a switch
before step 1) and the last an entry step. Every other step (*cheap*) is grouped: before the
first phase with the *head*, after the last with the *tail*, and otherwise with the next phase
(a pre-step: the step after a cheap step is no entry step, as the step before an entry step is
a phase). Let ``n_j`` be the bytes entering ``C`` at phase ``j`` (every arrival), ``v`` the
useful arrivals over internal links (the first of a piece at a node), ``b_j`` the sum of
``b_t`` over the phase's steps; ``v^o_j`` the internal arrivals in the phase step when phase
``j - 1`` is the step before it, the others ``v^n_j``. Then for a schedule's numbers:

1. ``n_j <= B_e b_j``, ``v^o_j + v^n_j <= B_i b_j`` (a step's ``b_t`` is at least any of its
   links' load over bandwidth, so at least their sums' ratio); head and tail likewise;
   ``n_1 = 0``;
2. ``v^n_j <= B_i (b_j - n_j / B_e)``: ``v^n_j > 0`` only on a pre-step with cheap steps before
   it, and a pre-step has ``n_j = 0``;
3. causality: a piece arriving at ``w`` over an internal link in step ``t`` came from a switch
   whose links in come from ``C``, so it was at a node of ``C`` in step ``t - 2``: one of the
   box's own ``c s`` bytes, or one entered by then. Each distinct byte arrives usefully at
   most ``c - 1`` times over internal links, and the distinct bytes entered are at most the
   entries ``N_j = n_1 + .. + n_j``. In the phase step of ``j`` (previous phase the step
   before) that is ``t - 2 <=`` phase ``j - 2``; in cheap steps grouped with ``j``, or its
   step after them, phase ``j - 1``. So all internal arrivals up to phase ``j - 1``, plus
   ``v^o_j``, are at most ``(c - 1)(c s + N_(j-2))``; up to phase ``j``, at most
   ``(c - 1)(c s + N_(j-1))``; head: ``(c - 1) c s``; everything: ``(c - 1)(c s + N_J)``;
4. demand: every node of ``C`` needs ``(|P| - 1) s`` bytes and takes each in at least once,
   so ``N_J + V >= c (|P| - 1) s``;
5. ``T_B = b_head + sum_j b_j + b_tail >= T*`` (the bandwidth bound).

So ``T_B >= LP(J)``, the least ``b_head + sum b_j + b_tail`` under 1-6, a linear program of
``7 J + 4`` variables, and ``T >= min_J [max(L, J min(alpha_e, alpha_u)) + LP(J)]``
(:func:`box_seconds` covers every ``J`` with a few programs). Met on DGX H100 x256 (1 GiB
allgather) within 0.2 % by tree packing's pipelined trees with pieces of unequal size
(``benchmarks/bench_clusters.py``): the program's own optimum alternates entry steps and
pre-steps with a geometric tail, as those trees do.

6. **Switches that do not copy.** Let ``p_j <= b_j`` be the bandwidth term of phase ``j``'s own
   step (1 holds as ``n_j <= B_e p_j``: entries happen in that step only). Take a family ``K``
   of disjoint boxes with the same numbers and call a step an entry step when some external
   link of *some* box of ``K`` carries a piece in it (pre-steps and phases likewise): every
   statement above holds for each box of ``K`` with these common phases (its own entries lie
   in them; an entry step still pays ``alpha_e``, a pre-step ``alpha_u``), so, the program
   being linear with the ``b`` shared, for the boxes' average ``n``, ``v``. Where no switch
   ``sigma'`` that an external link of ``K`` leaves may copy (each arrival leaves on at most
   one link), the bytes leaving those switches in step ``t`` are at most those that reached
   them in step ``t - 1``, at most ``U b_(t-1)``, ``U`` the bandwidth of all links into them.
   The step before an entry step ``j`` is phase ``j - 1``'s own step, so the boxes' average
   ``n_j <= U / |K| p_(j-1)`` (:func:`box_numbers` takes ``K`` greedily). Split ``U = U_c +
   U_s``, the links from compute nodes and from switches; where none of those switches
   (``X_2``) copies either, what they send in step ``t - 1`` reached them in step ``t - 2``,
   at most ``U_2 q``, ``U_2`` the bandwidth into ``X_2`` and ``q`` that step's bandwidth
   term. The step before phase ``j``'s own is the last cheap step grouped with ``j``, or
   phase ``j - 1``'s step, or (``j`` the first) a head step, so ``q_j <= b_j - p_j +
   p_(j-1)`` (``q_1 <= b_head``). In units of ``B_e`` (``f = U / (|K| B_e)``): ``n_j <= f_c
   p_(j-1) + y_j``, ``y_j <= f_s p_(j-1)``, ``y_j <= f_2 q_(j-1)``, ``q_j`` as said. On DGX H100
   the rail switches are fed by the NICs alone (``f = (1, 0, 0)``): what enters a box in a
   step went up other boxes' NICs the step before, a second pipeline stage as costly as the
   first, whose fill the bound now charges; on a two-tier Clos the leaves are also fed by
   the spines, which were fed the step before that.
7. **Injections, all the way up.** Let ``X`` be the tails of ``K`` (the switches their
   external links leave) with every switch from which a chain of switch-to-switch links leads
   into one of them, and suppose no switch of ``X`` may copy. A piece entering a box of ``K``
   in step ``t`` left a tail in ``t``, so reached it in ``t - 1`` over some link; where that
   link leaves a switch, the switch is in ``X`` and the piece reached it in ``t - 2``; and so
   on back to a link from a compute node into ``X`` (an *injection*), in a step before ``t``.
   A switch of ``X`` sends each arrival on at most once, so distinct entries (link, step,
   byte) lead back to distinct injections (by induction over the steps: two sends out of one
   switch in one step forward two distinct arrivals of the step before). The injections of a
   step carry at most ``U_x b_t``, ``U_x`` the bandwidth of the links from compute nodes into
   ``X``. So what enters the boxes of ``K`` up to phase ``j`` is at most ``U_x`` times the
   bandwidth terms of the steps before phase ``j``'s own: the head's, those of phases ``< j``
   and of the cheap steps grouped with ``j`` (``b_j - p_j``); for the boxes' average, in
   units, ``N_j <= f_x (b_head + b_1 + .. + b_j - p_j)`` with ``f_x = U_x / (|K| B_e)``. This
   is flow conservation in the time-expanded network (Ford and Fulkerson, "Constructing
   Maximal Dynamic Flows from Static Flows", Operations Research 6(3), 1958) whose switches
   hold nothing (TE-CCL's, above). Unlike 6 it does not stop at the second tier: on a Clos of
   any depth whose switches copy nothing, what enters the boxes waits, as on DGX H100, for a
   step that put it into the fabric (6 let spines fed two steps earlier stand in for that
   step: a 1 GiB reduce-scatter on SuperPOD 8 SU, 2.792 ms by 6, is 2.890 ms by 7, DGX H100's).

**Boxes of one.** A participant ``w`` in no box of several nodes (a fat tree's host),
entered only from switches by hops that are not instant, is a box with ``c = 1``: no link
into it is internal (``B_i = 0``), 3 says nothing (``v = 0``), and 1, 2 and 4-7 read as
above (none of them needs a box switch). Where the switches may copy it gives no more than ``L + T*``;
where they copy nothing (a reduce-scatter's, read backwards) 7 charges the step that put the
last entry into the fabric: on two hosts under one switch, links of 1 B/s and alpha 1 s, a
byte a block, a reduce-scatter costs at least ``2 + 1 + 1 = 4 s`` (each byte goes up in one
step and down in a later one, and the bandwidth terms of the two add up), which a two-step
schedule meets, where ``L + T*`` is 3 s (:func:`box_seconds`'s last example).

**Reduce-scatter, by time reversal.** Take a valid reduce-scatter schedule of ``S`` steps on
the topology and keep of each send only the bytes that carry, for the block's owner ``i``, a
contribution present in ``i``'s final sum (the verifier counts each contributor once per
piece, so each such contribution reached ``i`` along one chain of sends in increasing steps;
keep the sends of those chains, byte by byte). Dropping bytes lowers no step's ``a_t`` or
``b_t`` above what it was, and the result is still a valid reduce-scatter. Its time reversal
(send ``u -> v`` of step ``t`` becomes ``v -> u`` in step ``S + 1 - t`` on the transposed links,
the same latency and bandwidth) is an allgather of the blocks as shards: a kept byte leaves
``v`` after it reached ``v`` (``v`` is ``i``, or sent it on later in the reduce-scatter), a
switch forwards in the step after it received (it received in the step before it forwarded),
and every participant receives every block. Its ``sync`` price is the reduce-scatter's (the
same loads and latencies, steps in reverse order), and the reduce-scatter's ``L`` and ``T*``
bound its ``T_L`` and ``T_B``, so the allgather's box bound on the transposed links bounds the
reduce-scatter (its boxes: the links out of a box read as links in). A switch that does not
reduce forwards each arrival's byte at most once in the kept sends (two kept copies of one
partial would count its contributors twice at the owner), so in the reversal it copies
nothing: 6 holds where the switches the box's NICs send into do not reduce. Instant switch
hops are left out (their reversal is not one).
"""

from __future__ import annotations

import numpy as np

from ...instances.switch_ops import copying_mask, reducing_mask
from ..ten import latency_pipelined
from .demand import instant_out
from .ramp import least_over_steps
from .record import Bound, not_computed

SAFETY = 1e-6  # the program's value is lowered by this share (the solver's tolerances)
MAX_PHASES = 256  # the largest J solved; beyond it the bound counts alphas and T* only


def drain_bound(instance, latency: Bound, bandwidth: Bound) -> Bound:
    """The box bound (module doc) of a single allgather, or of a single reduce-scatter as the
    allgather of its time reversal on the transposed links; the best over the boxes of
    distinct numbers; not computed where no box meets the module's conditions."""
    kind = instance.collective.kind if not instance.concurrent else None
    if kind not in ("allgather", "reduce_scatter"):
        return not_computed("sync", "drain", "only a single allgather or reduce-scatter (an allreduce is also a "
                                             "reduce-scatter, whose box bound is below the allreduce's partition bound)")
    if not (latency.computed and bandwidth.computed):
        return not_computed("sync", "drain", "needs the latency and bandwidth bounds")
    topo = instance.topology
    if latency_pipelined(topo):
        return not_computed("sync", "drain", "a pipelined link latency makes steps TEN timesteps")
    if kind == "reduce_scatter" and instant_out(topo).any():
        return not_computed("sync", "drain", "an instant switch hop has no time reversal in steps")
    boxes = box_numbers(instance)
    if not boxes:
        return not_computed("sync", "drain", "no switch whose links join a box of compute nodes only, entered "
                                             "from switches by hops that are not instant")
    best_value, best_box = None, None
    for numbers, where in boxes.items():
        value = box_seconds(*numbers[:7], latency.value, bandwidth.value, feed=numbers[7])
        if value is None:
            return not_computed("sync", "drain", f"the phase program of the box of switch {where} was not solved")
        if best_value is None or value > best_value:
            best_value, best_box = value, where
    how = "leave" if kind == "reduce_scatter" else "enter"
    what = f"the box of switch {best_box} at its NICs, and its own switch" if best_box in topo.switches \
        else f"node {best_box} (a box of one)"
    return Bound(best_value * (1 - SAFETY), "s", "sync", "drain", best_box, f"steps where data {how}s {what}")


def box_numbers(instance) -> dict[tuple, int]:
    """``{(c, shard bytes, participants, B_e, B_i, alpha_e, alpha_u, feed): where}``: one box
    (module doc) per distinct set of numbers, where a switch that has them (the node itself
    for a box of one). A reduce-scatter's boxes are its time reversal's, on the transposed
    links. ``feed`` is ``(f_c, f_s, f_2, f_x)`` for a family ``K`` of disjoint boxes of those
    numbers whose entering links leave switches that do not copy (an allgather's) or reduce (a
    reduce-scatter's): the bandwidths into those switches from compute nodes and from switches,
    into the latter, and from compute nodes into their upstream closure, over ``|K| B_e``
    (module doc, 6 and 7); None where one of them may."""
    topo, coll = instance.topology, instance.collective
    reversal = coll.kind == "reduce_scatter"
    la = (topo.transpose() if reversal else topo).link_arrays
    n = topo.size
    is_switch = np.zeros(n, bool)
    is_switch[list(topo.switches)] = True
    copies = (reducing_mask(topo) if reversal else copying_mask(topo, True)) & is_switch
    part = np.zeros(n, bool)
    part[np.asarray(coll.nodes, np.int64)] = True
    links = _Links(la, n, np.zeros(len(la.src), bool) if reversal else instant_out(topo))
    compute_from = np.zeros(n, np.int64)  # per switch: links in from compute nodes
    np.add.at(compute_from, la.dst, (~is_switch[la.src]).astype(np.int64))
    inner = is_switch & (compute_from == np.bincount(la.dst, minlength=n))  # switches fed by compute nodes only
    found: dict[tuple, list] = {}
    shard = coll.chunk_bytes * coll.chunks_per_node
    in_box, boxed = np.zeros(n, bool), np.zeros(n, bool)
    for sigma in np.flatnonzero(inner).tolist():
        box = np.unique(la.dst[links.leaving(sigma)])
        ins = np.unique(la.src[links.entering(sigma)])
        if len(box) < 2 or len(ins) != len(box) or (box != ins).any() or is_switch[box].any() or not part[box].all() \
                or len(box) >= len(coll.nodes):
            continue
        in_box[box] = True
        numbers = _numbers(la, links, box, in_box, is_switch)
        in_box[box] = False
        if numbers is not None:
            found.setdefault((len(box), shard, len(coll.nodes), *numbers[:4]), []).append((int(sigma), box, numbers[4]))
            boxed[box] = True
    for w in _lone(la, part & ~is_switch & ~boxed, is_switch) if len(coll.nodes) > 1 else ():
        box = np.array([w])
        numbers = _numbers(la, links, box, in_box, is_switch, lone=True)
        if numbers is not None:
            found.setdefault((1, shard, len(coll.nodes), *numbers[:4]), []).append((w, box, numbers[4]))
    return {(*key, _feed(la, links, boxes, key[3], copies, is_switch)): boxes[0][0] for key, boxes in found.items()}


def _lone(la, candidates: np.ndarray, is_switch: np.ndarray) -> list[int]:
    """The nodes of ``candidates`` (those in no box of several nodes) entered only from
    switches: boxes of one node (module doc), a fat tree's hosts."""
    from_compute = np.zeros(len(is_switch), bool)
    np.logical_or.at(from_compute, la.dst, ~is_switch[la.src])
    has_in = np.bincount(la.dst, minlength=len(is_switch)) > 0
    return np.flatnonzero(candidates & has_in & ~from_compute).tolist()


def _feed(la, links: "_Links", boxes: list, B_e: float, copies: np.ndarray,
          is_switch: np.ndarray) -> tuple | None:
    """``(U_c, U_s, U_2, U_x)`` over ``|K| B_e`` (module doc, 6 and 7) for ``K`` the boxes taken
    in order that share no node with an earlier one (``boxes``: ``(switch, nodes, tails)``); None
    where a tail may copy, ``U_2`` None where a switch feeding a tail may, ``U_x`` None where a
    switch of the tails' upstream closure may."""
    taken = np.zeros(len(copies), bool)
    family, tails = 0, set()
    for _, box, tail in boxes:
        if not taken[box].any():
            taken[box] = True
            family += 1
            tails.update(tail)
    if copies[sorted(tails)].any():
        return None
    bw = la.bandwidth * la.count
    into = np.concatenate([links.entering(t) for t in sorted(tails)])
    upstream = is_switch[la.src[into]]
    above = np.unique(la.src[into[upstream]])
    unit = family * B_e
    U_2 = None
    if not copies[above].any():
        U_2 = float(bw[np.concatenate([links.entering(int(t)) for t in above])].sum()) / unit if len(above) else 0.0
    closure = _upstream(la, links, sorted(tails), is_switch)
    U_x = None
    if not copies[closure].any():
        inject = np.concatenate([links.entering(int(t)) for t in closure])
        U_x = float(bw[inject[~is_switch[la.src[inject]]]].sum()) / unit
    return float(bw[into[~upstream]].sum()) / unit, float(bw[into[upstream]].sum()) / unit, U_2, U_x


def _upstream(la, links: "_Links", tails: list, is_switch: np.ndarray) -> np.ndarray:
    """The switches from which a chain of switch-to-switch links leads to one of ``tails``
    (the tails included): where a piece entering a box may have been on its way (module doc, 7)."""
    seen = np.zeros(len(is_switch), bool)
    seen[tails] = True
    frontier = np.asarray(tails, np.int64)
    while len(frontier):
        into = np.concatenate([links.entering(int(t)) for t in frontier])
        src = np.unique(la.src[into])
        frontier = src[is_switch[src] & ~seen[src]]
        seen[frontier] = True
    return np.flatnonzero(seen)


class _Links:
    """The link pairs leaving and entering each node (index arrays into the link arrays), and
    which hops are instant."""

    def __init__(self, la, n: int, instant: np.ndarray):
        self.by_src, self.by_dst = np.argsort(la.src, kind="stable"), np.argsort(la.dst, kind="stable")
        self.src_ptr = np.r_[0, np.cumsum(np.bincount(la.src, minlength=n))]
        self.dst_ptr = np.r_[0, np.cumsum(np.bincount(la.dst, minlength=n))]
        self.instant = instant

    def leaving(self, v: int) -> np.ndarray:
        return self.by_src[self.src_ptr[v]:self.src_ptr[v + 1]]

    def entering(self, v: int) -> np.ndarray:
        return self.by_dst[self.dst_ptr[v]:self.dst_ptr[v + 1]]


def _numbers(la, links: _Links, box: np.ndarray, in_box: np.ndarray, is_switch: np.ndarray,
             lone: bool = False) -> tuple | None:
    """``(B_e, B_i, alpha_e, alpha_u, tails)`` of ``box`` (``in_box`` its mask; ``tails`` the
    switches its external links leave), or None where a condition fails. A link into the box
    is internal when it leaves a switch whose links in all come from the box (none into a box
    of one node, ``lone``)."""
    into = np.concatenate([links.entering(int(v)) for v in box])
    tail = la.src[into]
    if in_box[tail].any() or links.instant[into].any() or not is_switch[tail].all():
        return None
    tails = np.unique(tail)
    closed = {int(t): not lone and bool(in_box[la.src[links.entering(int(t))]].all()) for t in tails}
    internal = np.array([closed[int(t)] for t in tail])
    if internal.all():
        return None
    bw = (la.bandwidth * la.count)[into]
    outer = [int(t) for t in tails if not closed[int(t)]]
    feeding = np.concatenate([links.entering(t) for t in outer])
    return (float(bw[~internal].sum()), float(bw[internal].sum()), float(la.alpha[into[~internal]].min()),
            float(la.alpha[feeding].min()), tuple(outer))


def box_seconds(c: int, shard: float, participants: int, B_e: float, B_i: float, alpha_e: float, alpha_u: float,
                L: float, T_star: float, feed: tuple | None = None) -> float | None:
    """``min_J [max(L, J min(alpha_e, alpha_u)) + LP(J)]`` (module doc), at least ``L + T*``;
    None when a program is not solved (no ``J`` may be left out of the minimum).

    ``LP(J)`` does not grow with ``J`` (a phase with nothing in it, put last, turns a
    solution for ``J`` phases into one for ``J + 1``), so :func:`.ramp.least_over_steps`
    searches ``J >= 2`` (a pre-step and an entry step at least) by ranges.

    Two nodes in a box of four, a byte each, links of 1 B/s and alpha 10 s: one entry step
    (``J = 2``, 20 s of alpha) brings the other box's 2 bytes in over 2 s, and one node's
    bytes still cross the box's switch (2 s more: a node taking all 2 bytes from outside
    costs the same), so 24 s; a third phase costs 10 s more than the 2 s it could save.

    >>> box_seconds(2, 1.0, 4, 1.0, 1.0, 10.0, 10.0, 20.0, 2.0)
    24.0

    Where the switches feeding the box do not copy and are fed by as much NIC bandwidth as the
    boxes have and nothing else (``feed = (1, 0, 0)``), the 2 bytes also cross those switches'
    incoming links in the pre-step, 2 s more:

    >>> box_seconds(2, 1.0, 4, 1.0, 1.0, 10.0, 10.0, 20.0, 2.0, feed=(1.0, 0.0, 0.0, 1.0))
    26.0

    A box of one (module doc): two hosts under one switch that copies nothing, a byte a
    block, links of 1 B/s with alpha 1 s; one step up and one down (``J = 2``) with a byte in
    each, where a third phase costs 1 s and saves 0.5 s:

    >>> box_seconds(1, 1.0, 2, 1.0, 0.0, 1.0, 1.0, 2.0, 1.0, feed=(1.0, 0.0, 0.0, 1.0))
    4.0
    """
    unit = (participants - c) * shard  # bytes in units of the remote data, seconds of it over B_e
    sec = unit / B_e

    def lp(J: int) -> float | None:
        got = _phases_lp(J, c, shard / unit, participants, B_i / B_e, T_star / sec, feed)
        return None if got is None else got * sec

    return least_over_steps(lp, min(alpha_e, alpha_u), L, T_star, first=2, most=MAX_PHASES)


def _phases_lp(J: int, c: int, s: float, participants: int, ratio: float, T_star: float,
               feed: tuple | None = None) -> float | None:
    """``LP(J)`` in units (bytes: the remote data; seconds: it over ``B_e``; ``ratio`` = ``B_i /
    B_e``): variables ``n, v^o, v^n, b, p, y, q`` per phase, then ``v, b`` of head and tail;
    with ``feed = (f_c, f_s, f_2, f_x)``, ``n_j <= f_c p_(j-1) + y_j``, ``y_j <= f_s p_(j-1)``,
    ``y_j <= f_2 q_(j-1)`` and ``q_j <= b_j - p_j + p_(j-1)`` (``q_0 <= b_head``; module doc, 6),
    and ``N_j <= f_x (b_head + b_1 + .. + b_j - p_j)`` (module doc, 7)."""
    from scipy import sparse  # a solve that computes no box bound does not load scipy's optimizer
    from scipy.optimize import linprog

    n, vo, vn, b, p, y, q = (np.arange(J) + k * J for k in range(7))
    vH, bH, vT, bT = 7 * J, 7 * J + 1, 7 * J + 2, 7 * J + 3
    size = 7 * J + 4
    own = c * s
    rows: list[dict] = []
    rhs: list[float] = []

    def le(coefs: dict, bound: float) -> None:
        rows.append(coefs)
        rhs.append(bound)

    def arrivals(upto: int) -> dict:  # internal arrivals of the head and of phases < upto
        return {vH: 1.0, **{int(i): 1.0 for i in vo[:upto]}, **{int(i): 1.0 for i in vn[:upto]}}

    for j in range(J):
        le({n[j]: 1.0, p[j]: -1.0}, 0.0)
        le({p[j]: 1.0, b[j]: -1.0}, 0.0)
        le({q[j]: 1.0, **({b[j]: -1.0, p[j]: 1.0, p[j - 1]: -1.0} if j else {bH: -1.0})}, 0.0)
        if feed is not None and j > 0:
            f_c, f_s, f_2, f_x = feed
            le({n[j]: 1.0, p[j - 1]: -f_c, y[j]: -1.0}, 0.0)
            le({y[j]: 1.0, p[j - 1]: -f_s}, 0.0)
            if f_2 is not None:
                le({y[j]: 1.0, q[j - 1]: -f_2}, 0.0)
            if f_x is not None:  # what entered by phase j went into the closure before its step
                le({**{int(i): 1.0 for i in n[:j + 1]}, **{int(i): -f_x for i in b[:j + 1]}, bH: -f_x,
                    p[j]: f_x}, 0.0)
        le({vo[j]: 1.0, vn[j]: 1.0, b[j]: -ratio}, 0.0)
        le({vn[j]: 1.0, b[j]: -ratio, n[j]: ratio}, 0.0)
        le({**arrivals(j), vo[j]: 1.0, **{int(i): -(c - 1.0) for i in n[:max(0, j - 1)]}}, (c - 1) * own)
        le({**arrivals(j + 1), **{int(i): -(c - 1.0) for i in n[:j]}}, (c - 1) * own)
    le({vH: 1.0, bH: -ratio}, 0.0)
    le({vT: 1.0, bT: -ratio}, 0.0)
    le({vH: 1.0}, (c - 1) * own)
    le({**arrivals(J), vT: 1.0, **{int(i): -(c - 1.0) for i in n}}, (c - 1) * own)
    le({**{int(i): -1.0 for i in np.r_[n, vo, vn]}, vH: -1.0, vT: -1.0}, -c * (participants - 1) * s)
    le({**{int(i): -1.0 for i in b}, bH: -1.0, bT: -1.0}, -T_star)
    r = [i for i, coefs in enumerate(rows) for _ in coefs]
    k = [int(key) for coefs in rows for key in coefs]
    val = [float(v) for coefs in rows for v in coefs.values()]
    A = sparse.csr_matrix((val, (r, k)), shape=(len(rows), size))
    cost = np.zeros(size)
    cost[b] = 1.0
    cost[[bH, bT]] = 1.0
    bounds = [(0, None)] * size
    bounds[int(n[0])] = (0, 0)
    res = linprog(cost, A_ub=A, b_ub=np.asarray(rhs), bounds=bounds, method="highs")
    return float(res.fun) if res.status == 0 else None
