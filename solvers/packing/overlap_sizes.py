"""An allreduce's halves overlapped under ``sync``: the allgather's shift and both halves' pieces.

The allgather of an allreduce kept as trees plus pipeline rules may start before its
reduce-scatter ends (:mod:`collsynth.tens.allreduce_overlap`: shifted by ``delay`` steps,
its pieces mirrored in their chunk so that it sends first what the time-reversed reduction
completes first). :func:`overlapped` picks the pieces and the shift of least ``sync`` price
(Zhao et al., "Efficient Direct-Connect Topologies for Collective Communications", NSDI 2025,
Section 3.2) among the halves' own pieces, equal pieces at counts around theirs, and the
pieces of :func:`joint_sized` (at those counts, then beside the best): one sequence of piece sizes
in the order the pieces run, shared by both halves (the reduce-scatter's pieces reversed, the
allgather's mirrored, so that each
allgather piece is one reduced piece), chosen by the linear program of
:mod:`.piece_sizes` over both halves' loads in every step at once. Each shift is priced from
the least that keeps every piece's allgather after its reduction
(:func:`collsynth.tens.allreduce_overlap.least_delay`) up to the halves in turn.

Given a ``deadline``, the searches stop at it and return the least priced so far: each looks at
the deadline before every candidate and shift it prices, hands the linear program the seconds
left (HiGHS's ``time_limit``), and keeps what it found when the run's timer
(:func:`collsynth.limits.enforce`) interrupts it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from scipy import sparse
from scipy.optimize import linprog

from ... import limits
from ...limits import TimeLimitReached
from ...tens import allreduce_overlap as ao
from ...tens.pipelined_allreduce import PipelinedAllreduce
from .piece_sizes import MAX_ROWS, edges_of, unit_of

SHIFTS_SCANNED = 256  # shifts priced per mirror at most: the least valid ones, and those near the halves in turn
BLOCK_DELAYS = 64  # shifts priced together at most
BLOCK_CELLS = 1 << 20  # and at most this many steps x shifts in one block (memory: x link classes floats)
SHARES = (1 / 2, 3 / 4, 1, 5 / 4, 3 / 2, 2)  # piece counts tried, as shares of the halves' deeper count


def overlapped(f: PipelinedAllreduce, instance, deadline=None) -> PipelinedAllreduce:
    """``f`` with its allgather shifted (and mirrored) and both halves' pieces of least
    ``sync`` price among the candidates of the module doc; ``f`` itself where the halves in
    turn price no more, or the halves have more than one chunk per root (a mirror within each
    chunk would not follow the reduction's order across chunks). At ``deadline`` (a
    :class:`collsynth.limits.Deadline`), the least priced so far (module doc)."""
    rs, ag = f.halves
    if rs.chunks_per_root != 1 or ag.chunks_per_root != 1:
        return f
    costs = ao.joint_costs(rs, ag, instance)
    best = [(_serial_price(f, costs), f)]
    try:
        _search(rs, ag, instance, max(f.pieces), costs, best, deadline)
    except TimeLimitReached:  # the run's timer: the least priced so far, returned at once
        limits.kept()
    return best[0][1]


def _search(rs, ag, instance, deepest: int, costs, best: list, deadline) -> None:
    """:func:`overlapped`'s candidates priced in turn, ``best[0]`` the least ``(price,
    allreduce)`` so far; stops at ``deadline``."""
    counts = sorted({max(1, round(deepest * s)) for s in SHARES})
    for pair in [(rs, ag)] + [tuple(replace(h, pieces=p, cuts=None) for h in (rs, ag)) for p in counts]:
        if _over(deadline):
            return
        _least_shift(*pair, costs, deadline, best)
    sized: dict = {}
    for p in counts:
        sized[p] = None if _over(deadline) else _joint_priced(rs, ag, instance, p, costs, deadline, best)
    done = {p: v for p, v in sized.items() if v is not None}
    if done:
        p = min(done, key=lambda q: done[q])
        for q in sorted({p * 5 // 6, p * 6 // 5, p - 1, p + 1} - set(sized)):
            if q >= 1 and not _over(deadline):
                _joint_priced(rs, ag, instance, q, costs, deadline, best)


def _over(deadline) -> bool:
    """Whether ``deadline`` (None: no limit) has passed."""
    return deadline is not None and deadline.expired()


def least_shifted(f: PipelinedAllreduce, instance, deadline=None) -> PipelinedAllreduce:
    """``f`` at its own pieces, the allgather at the shift and mirror of least ``sync`` price
    (every shift from :func:`collsynth.tens.allreduce_overlap.least_delay` up to the halves in
    turn, :func:`_least_shift`); ``f`` itself where the halves in turn price no more, or the
    halves have more than one chunk per root (as :func:`overlapped`). At ``deadline``, the
    least priced so far."""
    rs, ag = f.halves
    if rs.chunks_per_root != 1 or ag.chunks_per_root != 1:
        return f
    costs = ao.joint_costs(rs, ag, instance)
    best = [(_serial_price(f, costs), f)]
    try:
        _least_shift(rs, ag, costs, deadline, best)
    except TimeLimitReached:
        limits.kept()
    return best[0][1]


def _joint_priced(rs, ag, instance, pieces: int, costs, deadline, best: list) -> float | None:
    """The least price :func:`_least_shift` finds for :func:`joint_sized`'s halves at
    ``pieces`` (``best`` updated), None where they have none."""
    pair = joint_sized(rs, ag, instance, pieces, costs, deadline)
    return None if pair is None else _least_shift(*pair, costs, deadline, best)


def _serial_price(f: PipelinedAllreduce, costs) -> float:
    """The ``sync`` price of ``f``'s halves in turn."""
    return ao.price_joint(f.reduce_scatter, f.allgather, ao.last_step(f.reduce_scatter), costs).total_s


def _least_shift(rs, ag, costs, deadline, best: list) -> float | None:
    """The least ``sync`` price of the halves overlapped, every shift from the least valid up
    to the halves in turn, mirrored or not (where they are more than :data:`SHIFTS_SCANNED`, the
    first and the last half of that many: each is priced over every step, so a scan of ``10^4``
    shifts at ``10^4`` pieces took over a minute), ``best[0]`` (``(price, allreduce)``) replaced
    by each that prices less as it is found (so a stop keeps it); None where no least valid shift
    exists (:func:`collsynth.tens.allreduce_overlap.least_delay` refuses the halves' pieces: the
    candidate is not offered). Stops at ``deadline``. The price does not depend on the mirror
    (:func:`collsynth.tens.allreduce_overlap.price_joint`), so a shift priced mirrored is not
    priced again unmirrored (it would only tie)."""
    least_here, priced = None, set()
    for mirror in (True, False):
        try:
            least = ao.least_delay(rs, ag, mirror)
        except ValueError:
            continue
        last = ao.last_step(rs)
        delays = sorted((set(range(least, min(last, least + SHIFTS_SCANNED // 2) + 1))
                         | set(range(max(least, last - SHIFTS_SCANNED // 2), last + 1))) - priced)
        for block in _blocks(delays, rs, ag):
            if _over(deadline):
                return least_here
            priced.update(block)
            for delay, t in zip(block, prices_by_delay(rs, ag, block, costs)):
                least_here = t if least_here is None else min(least_here, t)
                if t < best[0][0]:
                    best[0] = (t, PipelinedAllreduce(rs, ag, delay=delay, mirror=mirror))
    return least_here


def _blocks(delays: list, rs, ag) -> list:
    """``delays`` in consecutive blocks of at most :data:`BLOCK_CELLS` steps x delays."""
    steps = ao.last_step(rs) + ao.last_step(ag) + 2
    size = max(1, min(BLOCK_DELAYS, BLOCK_CELLS // steps))
    return [delays[i:i + size] for i in range(0, len(delays), size)]


def prices_by_delay(rs, ag, delays, costs) -> np.ndarray:
    """The ``sync`` price (:func:`collsynth.tens.allreduce_overlap.price_joint`'s ``total_s``)
    of the halves at each shift of ``delays`` at once: each half's load per link class and
    largest active alpha per step, computed once, the allgather's moved by each shift (step
    ``t`` carries the reduce-scatter's step ``t`` and the allgather's step ``t - delay``).

    >>> import numpy as np
    >>> from collsynth.instances import make_instance
    >>> from collsynth.instances.generators import build
    >>> from collsynth.tens.pipelined_trees import PipelinedTrees
    >>> inst = make_instance(build("ring", {"nodes": 3}), "allreduce", message_bytes=3e9)
    >>> hops = [(0, 1, 0), (1, 2, 1), (1, 2, 0), (2, 0, 1), (2, 0, 0), (0, 1, 1)]
    >>> ag = PipelinedTrees("allgather", 3, 3, 1, 4, 1, np.array([0, 1, 2]), np.array([0, 0, 0]),
    ...                     np.array([1, 1, 1]), np.array([0, 2, 4, 6]), *map(np.array, zip(*hops)))
    >>> rs = replace(ag, collective="reduce_scatter")
    >>> costs = ao.joint_costs(rs, ag, inst)
    >>> [round(float(t), 9) for t in prices_by_delay(rs, ag, [2, 5, 9], costs)]  # 7, 10, 10 busy steps
    [0.0300035, 0.040005, 0.040005]
    """
    (d_rs, d_ag), cost, alpha = costs
    S, A, delays = ao.last_step(rs), ao.last_step(ag), np.asarray(delays, dtype=np.int64)
    t = np.arange(min(1, int(delays.min()) + 1), max(S, int(delays.max()) + A) + 1)
    u = np.arange(1, A + 1)  # the allgather's own steps
    share_rs = ao._shares(rs, S - t[:, None] - d_rs[None, :])
    share_ag = ao._shares(ag, u[:, None] - d_ag[None, :] - 1)
    n = len(d_rs)
    load_rs, load_ag = share_rs @ cost[:n], share_ag @ cost[n:]
    alpha_rs = np.where(share_rs > 0, alpha[None, :n], 0.0).max(axis=1, initial=0.0)
    alpha_ag = np.where(share_ag > 0, alpha[None, n:], 0.0).max(axis=1, initial=0.0)
    at = t[None, :] - delays[:, None] - 1  # [delays, steps]: the allgather's row, -1 where none
    on = (at >= 0) & (at < A)
    at = np.clip(at, 0, A - 1)
    load = load_rs[None, :, :] + np.where(on[:, :, None], load_ag[at], 0.0)
    late = np.maximum(alpha_rs[None, :], np.where(on, alpha_ag[at], 0.0))
    return load.max(axis=2, initial=0.0).sum(axis=1) + late.sum(axis=1)


def joint_sized(rs, ag, instance, pieces: int, costs, deadline=None) -> tuple | None:
    """Both halves cut into ``pieces`` pieces of one sequence of sizes in the order they run
    (module doc): the fractions ``y`` of least summed step time, each step costing the largest
    over link classes of both halves' loads (:func:`collsynth.tens.allreduce_overlap.price_joint`
    at the shift equal pieces allow, mirrored), by the linear program of
    :func:`.piece_sizes.sized`; rounded to edges in ``1 / E`` of a chunk (the finer half's
    :func:`.piece_sizes.unit_of`), the allgather's the reduce-scatter's mirrored. None where the
    program has over :data:`.piece_sizes.MAX_ROWS` rows, ``pieces`` exceeds ``E / 2`` or the
    solver fails or stops at ``deadline`` (given the seconds left)."""
    rs, ag = (replace(h, pieces=pieces, cuts=None) for h in (rs, ag))
    try:
        delay = ao.least_delay(rs, ag, True)
    except ValueError:  # no least valid shift for these pieces: not offered
        return None
    (d_rs, d_ag), cost, _ = costs
    S, unit = ao.last_step(rs), min(unit_of(rs, instance), unit_of(ag, instance))
    t = np.arange(1, max(S, delay + ao.last_step(ag)) + 1)[:, None]
    # the piece each depth runs in step t, in the order pieces run: the reduce-scatter's deepest first
    run = np.concatenate([t + d_rs[None, :] - (S - pieces + 1), t - delay - d_ag[None, :] - 1], axis=1)
    if pieces > unit // 2 or not cost.size or not cost.max() > 0 or len(t) * cost.shape[1] > MAX_ROWS:
        return None
    y = _fractions(run, cost / cost.max(), pieces, 2.0 * pieces / unit, None if deadline is None else deadline.left())
    if y is None:
        return None
    e = edges_of(y, unit)
    return replace(rs, cuts=unit - e[::-1]), replace(ag, cuts=e)


def _fractions(run: np.ndarray, cost: np.ndarray, pieces: int, least: float,
               seconds: float | None = None) -> np.ndarray | None:
    """The piece sizes (summing to ``pieces``, each at least ``least``) minimising the summed
    largest load per step, ``run[t, d]`` the piece row ``d`` of ``cost`` carries in step ``t``;
    None where the solver stops without an optimum (within ``seconds``, None: no limit)."""
    steps, J = run.shape[0], cost.shape[1]
    t_idx, d_idx = np.nonzero((run >= 0) & (run < pieces))
    rows = (t_idx[:, None] * J + np.arange(J)[None, :]).ravel()
    A = sparse.coo_matrix((cost[d_idx].ravel(), (rows, np.repeat(run[t_idx, d_idx], J))), shape=(steps * J, pieces))
    A = sparse.hstack([A, -sparse.kron(sparse.identity(steps), np.ones((J, 1)))]).tocsr()
    res = linprog(np.r_[np.zeros(pieces), np.ones(steps)], A_ub=A, b_ub=np.zeros(steps * J),
                  A_eq=np.r_[np.ones(pieces), np.zeros(steps)][None, :], b_eq=[float(pieces)],
                  bounds=[(least, None)] * pieces + [(0, None)] * steps, method="highs",
                  options={} if seconds is None else {"time_limit": max(seconds, 1e-3)})
    return res.x[:pieces] if res.status == 0 else None

