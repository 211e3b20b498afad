"""A ``sync`` bound from the number of steps against what a node can take in per step: a
switch forwards in a step only what reached it the step before, so the links from switches
into a node ramp up with the steps, and every step pays a latency (:func:`ramp_bound`).

The synchronous price (Zhao et al., "Efficient Direct-Connect Topologies for Collective
Communications", NSDI 2025, Section 3.2) of ``S`` steps is ``sum_t (a_t + b_t)``: ``a_t`` the
largest alpha of a link used in step ``t``, ``b_t`` the largest ``bytes_l / bandwidth_l``. The
bound ``L + T*`` (:func:`collsynth.tens.bounds.instance._sync_total`) charges one path's latency
and the best cut's bandwidth. Where a GPU's links in from switches (holding nothing, TE-CCL's
model: a send out of a switch in step ``t`` forwards what reached it in step ``t - 1``; Liu et
al., "Rethinking Machine Learning Collective Communication as a Multi-Commodity Flow Problem",
SIGCOMM 2024, Section 4) are part of its best cut, a schedule of few steps cannot keep them busy
from the first step on, and one of many steps pays many latencies.

**The argument.** A single allgather whose schedule is sent on links (``routing = "links"``)
and whose switch hops are not instant; steps are the sync model's. Take a participant ``w`` and
drop the empty steps (the price does not change; a switch that received nothing in a dropped
step forwards nothing in the next). ``D = (|P| - 1) s`` bytes (``s`` a shard's bytes, ``P`` the
participants) must reach ``w``; count each byte at its first arrival (*useful*). In step ``t``:

1. a link ``u -> w`` from a compute node carries at most ``B_uw b_t``;
2. a link ``sigma -> w`` from a switch carries at most ``B_sw b_t``, and its useful bytes
   reached ``sigma`` in step ``t - 1`` from a node other than ``w`` (what ``w`` sent it, ``w``
   held), so at most ``F_sw b_(t-1)``, ``F_sw`` the bandwidth of the links into ``sigma`` from
   other nodes (``b_0 = 0``: a switch holds nothing before step 1). This holds whether or not
   ``sigma`` copies: each of its out-links carries at most what came in.

So ``D <= sum_t [C b_t + sum_sigma min(B_sw b_t, F_sw b_(t-1))]`` (``C`` the bandwidth in from
compute nodes), and ``T_B = sum_t b_t >= LP(S)``, the least ``sum_t b_t`` under that, a linear
program of ``S (1 + k)`` variables (``k`` the switches feeding ``w``). Every step uses a link:
``a_t >= alpha_min``, the least alpha of any link; and ``T_L >= L``, ``T_B >= T*``. So

    ``T >= min_S [max(L, S alpha_min) + max(T*, LP(S))]``,

the best over the participants (one per distinct set of numbers). ``LP(S)`` does not grow with
``S`` (an empty last step turns a solution for ``S`` into one for ``S + 1``), which bounds whole
ranges of ``S`` at once (:func:`least_over_steps`).

**Reduce-scatter**, by the time reversal of :mod:`collsynth.tens.bounds.drain` (its module
doc): a reduce-scatter's contributing bytes, reversed, are an allgather on the transposed links
at the same ``sync`` price, in which the switches copy at most (a reduction's partial leaves a
switch once); the argument above allows copying, so it holds for the reversal as it stands.

**Allreduce**, where no switch reduces and every compute node takes part: the partition
argument of :mod:`collsynth.tens.bounds.partitions` with every GPU its own region and the
switches in none counts, per byte position, ``2 (|P| - 1)`` one-way calls into regions, each a
delivery from another region (a byte ``w`` sent into a switch and got back is no call: the
switch only copies, it tells ``w`` nothing new): at least ``2 (|P| - 1) M`` bytes of calls in
all. A call reaching ``w`` from a switch in step ``t`` reached the switch in step ``t - 1`` from a
node other than ``w``, so 1. and 2. bound what all GPUs take in per step, with ``b_t`` shared:
the same program with ``D = 2 (|P| - 1) M`` and the GPUs' links summed (equal ``(B_sw, F_sw)``
pairs merged by adding: ``sum min(B b_t, F b_(t-1)) = min(n B b_t, n F b_(t-1))``).

**Two GPUs behind one switch** (links ``B`` each way, ``s`` bytes a shard): ``C = 0``,
``B_sw = F_sw = B``, ``LP(S) = S s / ((S - 1) B)`` (all steps alike), and ``S - 1`` equal
pieces pipelined through the switch in ``S`` steps cost exactly ``S alpha + S s / ((S - 1) B)``:
the bound is that pair's optimum (:func:`least_over_steps` has it at ``alpha = s / (16 B)``).

**Not covered:** a schedule with ``routing = "shortest-path"`` whose routes cross a switch: such
a send crosses the switch in the step it leaves its source (one step paying both hops' alpha
and the larger of their loads), so 2. does not hold for it; such schedules are bounded by ``L +
T*`` alone (tests/test_ramp_bound.py shows one below this bound).
"""

from __future__ import annotations

import bisect

import numpy as np

from ...instances.instance import Instance
from ...instances.switch_ops import reducing_mask
from ..ten import latency_pipelined
from .demand import instant_out
from .record import Bound, not_computed

SAFETY = 1e-6  # the program's value is lowered by this share (the solver's tolerances)
MAX_STEPS = 4096  # the largest S solved; beyond it the bound counts alphas and T* only


def ramp_bound(instance: Instance, latency: Bound, bandwidth: Bound) -> Bound:
    """The ramp bound (module doc) of a single allgather (the best over the participants fed
    by a switch), of a single reduce-scatter read backwards on the transposed links, or of a
    single allreduce over every GPU where no switch reduces (the GPUs summed); not computed
    where no link has a latency or no switch feeds a participant."""
    kind = instance.collective.kind if not instance.concurrent else None
    if kind not in ("allgather", "reduce_scatter", "allreduce"):
        return not_computed("sync", "ramp", "only a single allgather, reduce-scatter or allreduce")
    refused = steps_refused("ramp", instance, latency, bandwidth)
    if refused is not None:
        return refused
    topo, coll = instance.topology, instance.collective
    if kind == "allreduce" and (reducing_mask(topo).any() or set(coll.nodes) != set(topo.npus)):
        return not_computed("sync", "ramp", "an allreduce where a switch reduces or a compute node takes no part")
    la = (topo.transpose() if kind == "reduce_scatter" else topo).link_arrays
    alpha = float(la.alpha.min()) if len(la) else 0.0
    feeds = (summed_feeds if kind == "allreduce" else node_feeds)(la, topo.switches, coll.nodes)
    if alpha <= 0 or not feeds:
        return not_computed("sync", "ramp", "no link has a latency" if alpha <= 0 else "no switch feeds a participant")
    need = (len(coll.nodes) - 1) * (2 * coll.message_bytes if kind == "allreduce"
                                     else coll.chunk_bytes * coll.chunks_per_node)
    best_value, best_node = None, None
    for (direct, links), w in feeds.items():
        value = least_over_steps(lambda S: steps_lp(S, need, direct, links), alpha, latency.value, bandwidth.value)
        if value is None:
            return not_computed("sync", "ramp", f"the step program of node {w} was not solved")
        if best_value is None or value > best_value:
            best_value, best_node = value, w
    how = "send" if kind == "reduce_scatter" else "take in"
    whose = "the GPUs'" if kind == "allreduce" else f"node {best_node}'s"
    return Bound(best_value * (1 - SAFETY), "s", "sync", "ramp", "all" if kind == "allreduce" else f"v={best_node}",
                 f"steps of at least {alpha:g} s each against what {whose} links can {how} per step, "
                 "those through switches one step behind")


def node_feeds(la, switches, participants) -> dict[tuple, int]:
    """``{(C, ((B_sw, F_sw), ...)): w}``: per distinct set of numbers (module doc) a participant
    ``w`` with at least one link in from a switch: the bandwidth in from compute nodes, and per
    switch link its bandwidth and that of the links into the switch from other nodes.

    >>> from collsynth.instances.generators import build
    >>> node_feeds(build("switch", {"nodes": 3}, bandwidth=2.0, alpha=1.0).link_arrays, [3], [0, 1, 2])
    {(0.0, ((2.0, 4.0),)): 0}
    """
    out: dict[tuple, int] = {}
    for w, numbers in _node_numbers(la, switches, participants):
        if numbers[1]:
            out.setdefault(numbers, w)
    return out


def summed_feeds(la, switches, participants) -> dict[tuple, int]:
    """The participants' numbers summed (an allreduce's, module doc): ``{(sum C, ((n B_sw, n
    F_sw), ...)): -1}`` over the ``n`` links of each ``(B_sw, F_sw)``; empty where no switch
    feeds a participant.

    >>> from collsynth.instances.generators import build
    >>> summed_feeds(build("switch", {"nodes": 3}, bandwidth=2.0, alpha=1.0).link_arrays, [3], [0, 1, 2])
    {(0.0, ((6.0, 12.0),)): -1}
    """
    direct, pairs = 0.0, {}
    for _, (C, links) in _node_numbers(la, switches, participants):
        direct += C
        for pair in links:
            pairs[pair] = pairs.get(pair, 0) + 1
    return {(direct, tuple(sorted((n * B, n * F) for (B, F), n in pairs.items()))): -1} if pairs else {}


def _node_numbers(la, switches, participants):
    """``(w, (C, ((B_sw, F_sw), ...)))`` for every participant ``w`` (module doc)."""
    is_switch = np.zeros(la.size, bool)
    is_switch[[s for s in switches if s < la.size]] = True
    bw = la.bandwidth
    into = np.bincount(la.dst, weights=bw, minlength=la.size)
    back = la.lookup(la.dst, la.src)  # w -> sigma for each sigma -> w
    feed = into[la.src] - np.where(back >= 0, bw[np.maximum(back, 0)], 0.0)
    fed = is_switch[la.src]
    direct = np.bincount(la.dst[~fed], weights=bw[~fed], minlength=la.size)
    order = np.flatnonzero(fed)[np.argsort(la.dst[fed], kind="stable")]
    ptr = np.r_[0, np.cumsum(np.bincount(la.dst[order], minlength=la.size))]
    for w in sorted(int(v) for v in participants):
        mine = order[ptr[w]:ptr[w + 1]]
        yield w, (float(direct[w]), tuple(sorted(zip(bw[mine].tolist(), feed[mine].tolist()))))


def steps_lp(S: int, need: float, direct: float, links: tuple) -> float | None:
    """``LP(S)`` (module doc): the least ``sum_t b_t`` over ``S`` steps in which ``need`` bytes
    reach a node with ``direct`` bandwidth in from compute nodes and ``links`` ``(B_sw, F_sw)``
    from switches; infinite where no ``S`` steps suffice, None when the solver fails.

    >>> round(steps_lp(5, 1.0, 0.0, ((1.0, 1.0),)), 9)  # two GPUs behind a switch: 4 pieces in 5 steps
    1.25
    >>> steps_lp(1, 1.0, 0.0, ((1.0, 1.0),))  # nothing leaves the switch in the first step
    inf
    """
    from scipy import sparse  # a solve that computes no ramp bound does not load scipy's optimizer
    from scipy.optimize import linprog

    k = len(links)
    unit = direct + sum(B for B, _ in links)  # bandwidths over this, bytes over need: seconds of need / unit
    size = S * (1 + k)
    steps = np.arange(S)
    r, c, v = [np.zeros(size, np.int64)], [np.arange(size)], [np.r_[np.full(S, -direct / unit), -np.ones(S * k)]]
    row = 1
    for j, (B, F) in enumerate(links):  # y_jt <= B b_t, y_jt <= F b_(t-1): the useful bytes of switch link j
        y = S * (1 + j) + steps
        for ys, bs, bw in ((y, steps, B), (y[1:], steps[:-1], F)):
            rows = row + np.arange(len(ys))
            r += [rows, rows]
            c += [ys, bs]
            v += [np.ones(len(ys)), np.full(len(ys), -bw / unit)]
            row += len(ys)
    A = sparse.csr_matrix((np.concatenate(v), (np.concatenate(r), np.concatenate(c))), shape=(row, size))
    cost = np.zeros(size)
    cost[:S] = 1.0
    bounds = [(0, None)] * size
    for j in range(k):
        bounds[S * (1 + j)] = (0, 0)  # nothing leaves a switch in the first step
    rhs = np.zeros(row)
    rhs[0] = -1.0
    res = linprog(cost, A_ub=A, b_ub=rhs, bounds=bounds, method="highs")
    if res.status == 2:  # infeasible: no S steps bring it all in
        return float("inf")
    return float(res.fun) * need / unit if res.status == 0 else None


def steps_refused(label: str, instance, latency: Bound, bandwidth: Bound) -> Bound | None:
    """The ``sync`` bound ``label`` not computed, and why, where a step-counting argument
    cannot run: the latency or bandwidth bound it starts from is missing, or the topology's
    steps are not the ``sync`` model's store-and-forward steps (a pipelined latency or an
    instant switch hop); None where it can."""
    if not (latency.computed and bandwidth.computed):
        return not_computed("sync", label, "needs the latency and bandwidth bounds")
    if latency_pipelined(instance.topology) or instant_out(instance.topology).any():
        return not_computed("sync", label, "a pipelined latency or an instant switch hop (steps are not the sync "
                                           "model's store-and-forward steps)")
    return None


def least_over_steps(lp, alpha: float, L: float, T_star: float, first: int = 1,
                     most: int = MAX_STEPS, gap: float = 0.0, relaxed=None) -> float | None:
    """``min_S [max(L, S alpha) + max(T*, lp(S))]`` over ``S >= first`` for ``lp`` not growing
    with ``S``; None when ``lp`` returns None for a step count whose value is needed (no ``S``
    may be left out of the minimum). The search reaches ``first``, twice that and so on up to
    ``most``; every ``S`` beyond the largest reached costs at least ``max(L, S alpha) + T*``
    (the phases of :mod:`.drain` are searched so too). With ``gap > 0`` a range whose least
    cost is within that share of the best value found is not split and that least cost is
    returned if lower (fewer programs, a value at most ``gap`` below the minimum, still a bound).

    Between two ``S`` reached, ``S_a < S_b``, every ``S`` costs at least ``max(L, S_a alpha) +
    max(T*, lp(S_b))``; beyond the largest, ``max(L, S alpha) + T*``: the range is split where
    that is below the best value found until no part of it is.

    **Programs solved only where their value decides** (:class:`_Steps`): the search is the
    one above, ``S`` for ``S``, decision for decision, but ``lp`` at a step count reached is
    solved only where the search's next decision depends on it. Elsewhere its value is held
    between what solved neighbours give, since ``lp`` does not grow with ``S``: ``lp(S') <=
    lp(S) <= lp(S'')`` for solved ``S'' < S < S'`` (and ``max(T*, lp(S)) >= T*``), and, where
    a cheaper program ``relaxed(S) <= lp(S)`` is given (a relaxation: fewer or weaker rows),
    above it too (solved only where the neighbours do not decide), each side widened by
    :data:`TRUST` of itself for the solver's rounding. With ``relaxed`` given, a range whose
    split the bounds of its upper end leave open has its middle solved first (a cheaper
    program than its end's, and ``lp(b) <= lp(mid)`` may close the question). Every
    comparison the search makes (the doubling's stop, the best value, a range's least cost
    against it and against the gap) takes the same side as with every value solved, and the
    numbers it returns (the best value, a range's least cost) are sums of the same solved
    values, so the result is the same float (``tests/test_steps_on_demand.py``); only where
    ``lp`` fails at a step count whose value the search never needs does it return a bound
    where it returned None. The rooted depth bound's refined program on a 64-GPU torus no
    longer solves the doubling's last, largest program (512 steps, 2.5 s of its 17 s).

    Two GPUs behind a switch, 1 byte a shard, links of 1 B/s, alpha 1/16 s: 5 steps (4 pieces)
    cost 5/16 + 5/4 s, 4 cost 4/16 + 4/3, 6 cost 6/16 + 6/5:

    >>> least_over_steps(lambda S: S / (S - 1) if S > 1 else float("inf"), 1 / 16, 2 / 16, 1.0)
    1.5625
    """
    steps = _Steps(lp, alpha, L, T_star, relaxed)
    S = first
    while True:
        steps.reach(S)
        if S >= most:
            break
        stop = steps.least_at_most(max(L, S * alpha) + T_star)
        if stop is None:
            return None
        if stop:
            break
        S *= 2
    best = steps.least()
    if best is None:
        return None
    floor = best
    parts = list(zip(steps.reached[:-1], steps.reached[1:]))
    while parts:
        a, b = parts.pop()
        if b - a <= 1:
            continue
        base = max(L, a * alpha)  # every S between a and b costs at least base + max(T*, lp(b))
        if steps.at_least(b, base, best):
            continue
        mid = (a + b) // 2
        if relaxed is not None and b not in steps.got and base + steps.bounds(b)[1] >= best * (1 - gap) \
                and steps.solved(mid) is None:  # mid first (a cheaper program): lp(b) <= lp(mid) may decide
            return None
        if base + steps.bounds(b)[1] >= best * (1 - gap):  # the range's least cost itself decides
            below = steps.solved(b)
            if below is None:
                return None
            below += base
            if below >= best:
                continue
            if below >= best * (1 - gap):  # not split: the value returned is at most ``below``
                floor = min(floor, below)
                continue
        steps.reach(mid)
        if not steps.at_least(mid, max(L, mid * alpha), best):  # it may be the best: solved
            if steps.solved(mid) is None:
                return None
            best = min(best, steps.value(mid))
        parts += [(a, mid), (mid, b)]
    return max(min(best, floor, max(L, (S + 1) * alpha) + T_star), L + T_star)


TRUST = 1e-9  # a program's value held between its solved neighbours' is widened by this share (solver rounding)


class _Steps:
    """The step counts :func:`least_over_steps` has reached, in order, and ``max(T*, lp(S))``
    at those solved; ``lp`` is solved once per step count, on demand, and ``relaxed`` (a
    lower bound on ``lp``, or None) where the neighbours leave a comparison open."""

    def __init__(self, lp, alpha: float, L: float, T_star: float, relaxed=None):
        self.lp, self.alpha, self.L, self.T_star, self.relaxed = lp, alpha, L, T_star, relaxed
        self.reached: list[int] = []
        self.got: dict[int, float] = {}
        self.done: list[int] = []  # solved, in order
        self.floors: dict[int, float] = {}  # relaxed(S), widened, where computed

    def reach(self, S: int) -> None:
        if S not in self.reached:
            bisect.insort(self.reached, S)

    def solved(self, S: int) -> float | None:
        """``max(T*, lp(S))``, solved here where not yet; None where ``lp`` fails."""
        if S not in self.got:
            v = self.lp(S)
            if v is None:
                return None
            self.got[S] = max(self.T_star, v)
            bisect.insort(self.done, S)
        return self.got[S]

    def bounds(self, S: int) -> tuple[float, float]:
        """``(low, high)`` around ``max(T*, lp(S))``: its value where solved, else the solved
        neighbours' (``lp`` does not grow with ``S``) and ``relaxed(S)`` where computed,
        widened by :data:`TRUST`."""
        if S in self.got:
            return self.got[S], self.got[S]
        i = bisect.bisect(self.done, S)
        low = self.got[self.done[i]] * (1 - TRUST) if i < len(self.done) else self.T_star
        high = self.got[self.done[i - 1]] * (1 + TRUST) if i else float("inf")
        return max(self.T_star, low, self.floors.get(S, 0.0)), high

    def sharpen(self, S: int) -> bool:
        """``relaxed(S)`` computed where it is given and not yet (nor ``lp(S)``): whether it was."""
        if self.relaxed is None or S in self.got or S in self.floors:
            return False
        v = self.relaxed(S)
        self.floors[S] = -float("inf") if v is None else v * (1 - TRUST)
        return True

    def at_least(self, S: int, base: float, c: float) -> bool:
        """Whether ``base + max(T*, lp(S)) >= c`` is known without solving ``lp(S)`` (its low
        side, sharpened by ``relaxed`` where the neighbours leave it open)."""
        return base + self.bounds(S)[0] >= c or (self.sharpen(S) and base + self.bounds(S)[0] >= c)

    def value(self, S: int) -> float:
        return max(self.L, S * self.alpha) + self.got[S]

    def least_at_most(self, c: float) -> bool | None:
        """Whether some step count reached costs at most ``c``, solving only those that decide
        it; None where ``lp`` fails."""
        while True:
            cost = [(max(self.L, s * self.alpha), *self.bounds(s), s) for s in self.reached]
            if any(base + high <= c for base, _, high, _ in cost):
                return True
            open_ = [s for base, low, high, s in cost if base + low <= c and s not in self.got]
            if not open_:
                return False
            if not self.sharpen(open_[-1]) and self.solved(open_[-1]) is None:
                return None

    def least(self) -> float | None:
        """The least cost of a step count reached, exactly: every one whose low side is below the
        least solved so far is solved; None where ``lp`` fails."""
        while True:
            best = min((self.value(s) for s in self.reached if s in self.got), default=float("inf"))
            open_ = [s for s in self.reached if s not in self.got
                     and max(self.L, s * self.alpha) + self.bounds(s)[0] < best]
            if not open_:
                return best
            if not self.sharpen(open_[0]) and self.solved(open_[0]) is None:
                return None
