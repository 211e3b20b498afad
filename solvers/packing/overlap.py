"""Allreduce as one problem: both halves' forests chosen together, the allgather overlapped.

An allreduce is a reduce-scatter then an allgather (Zhao et al., "ForestColl", arXiv
2402.06787, Section 4; Patarasuk and Yuan, "Bandwidth optimal all-reduce algorithms for
clusters of workstations", JPDC 2009, Section 3). Concatenated step by step, the allgather of
a shard waits for the whole reduce-scatter; :func:`overlapped` starts it as soon as it can: a
root sends a piece of its shard in the step after the last arrival that completes that piece's
reduction there, the whole allgather shifted by one number of steps (the least that keeps every
root's sends after its reductions). Under ``event`` (FIFO links, no step barriers) the data
dependencies alone already overlap the halves; the steps matter to ``sync`` (a step carries
both halves' loads) and to ``event-inorder`` (each link serves in step order).

Which forests to overlap is measured, not assumed: under FIFO the two halves' traffic meets on
every link, and a link that carries a GPU's own reduce-scatter data (ready at time 0) delays
every allgather piece behind all of it. On ForestColl's A100 x2 at 1 GB, alpha 0, 200 pieces,
the optimum's two-level forests for both halves are 13.06 ms under ``event`` (2.26x the bound)
where one packed tree a shard for both is 5.87 ms (1.017x); the one-tree reduce-scatter with the
optimum's allgather is 6.65 ms (``benchmarks/bench_allreduce.py``). :func:`choose` prices every
pair of candidate forests as the whole overlapped allreduce (verified first) and keeps the
least summed time over the objective's models; :func:`joint` then tries the chosen pair's
allgather mixed with another allgather forest (:func:`mixed`: part of every shard on each). On
A100 x2 the one-tree allgather with 3/4 of each shard on the optimum's 13 trees brings the
allreduce from 1.012x to 1.008x the bound under ``event`` (1600 pieces); the same mix for the
reduce-scatter starves (2.0x: any share on the optimum's reversed forest queues). Those figures
predate the reductions' declared link order (``link_order = "program"``,
:func:`collsynth.tens.pipelined_trees.expand`: a GPU's sends on a link in the order listed,
which the overlapped schedule keeps, :func:`collsynth.tens.pipelined_allreduce.joined`); with it,
on DGX-H100 x2 (200 pieces) the optimum's greedy forests for both halves run 1.0011x the bound
under ``event`` (1.111x before) and are chosen.
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

import numpy as np

from ...tens.pipelined_allreduce import joined
from ...tens.schedule import Schedule, concat
from .trees import RoutedTree

PROBE_PIECES = 200  # pipeline pieces the pairs are compared at (about 1 % of a priced time)
PROBE_SENDS = 2_000_000  # most sends of all probes together (a few seconds of pricing)
LEAST_EXTRA_PIECES = 25  # an extra pair (the capacity split) is priced at no fewer pieces per chunk to save time
DIRECT_FACTOR = 4  # an extra pair is priced at once at the probe's pieces where this many times the time the last
# probe's rate predicts fits (DGX-2 x2's split: 11 us a send probed, the halves' 2.8)
SEED_SHARE = 8  # an extra pair priced first (``extra_first``) is priced at 1/8 of its pieces before them: a
# verified schedule kept and the rate a send measured (DGX-2 x2's split: 1.5 us of CPU a send at 50 pieces, 1.7 at 355)
MARGIN = 1.2  # times a pair's expected sends that must fit where it is priced at the probes' rate (DGX-2 x2 at the
# default 60 s, load 8: its split at 200 pieces, expected to fit, ran past the limit; at 1.5, cut by 7/10, 98 pieces)
PROBE_SHARE = 0.25  # of the run's time left, at most, for the probes (the chosen schedule is priced again after)
PAIRS = "_pairs"  # the record's key for every priced pair (forests by name), for the caller to take off
MIX_SHARES = (Fraction(1, 4), Fraction(1, 2), Fraction(3, 4))  # shares of a shard the chosen pair's allgather
# gives another allgather forest (A100 x2, 1 GB, alpha 0, 1600 pieces, the one-tree reduce-scatter with the
# allgather one packed tree a shard for 1/4 of each shard and the optimum's 13 for the rest: event 1.0076x,
# event-inorder 1.0078x, sync 1.0089x the bound, against 1.0122x / 1.0117x / 1.0127x with one tree alone)


def overlapped(first: Schedule, second: Schedule, chunks_per_node: int) -> Schedule:
    """The allreduce of ``first`` (a reduce-scatter: shard ``r`` is chunks ``r c .. r c + c - 1``
    of node ``r``, ``c = chunks_per_node``) and ``second`` (an allgather of the same shards),
    the allgather's steps shifted by the least amount that keeps every send of a shard's piece
    by its owner after the last reduce-scatter arrival at the owner overlapping that piece
    (module doc). A reduction completes before its owner sends it, so every GPU's
    contributions left it before the allgather's copy reaches it. The allgather's pieces are
    mirrored within each chunk (``[lo, hi)`` to ``[1 - hi, 1 - lo)``) when that shifts it less:
    a time-reversed reduction completes its last pieces first. The sends are those of
    :func:`collsynth.tens.pipelined_allreduce.joined` at that delay, with its declared link order.

    Two GPUs, each shard in two halves: the reductions complete one half a step, so the
    allgather starts in step 2, not after the reduce-scatter's 2 steps:

    >>> from fractions import Fraction
    >>> from collsynth.tens.schedule import from_sends
    >>> h = Fraction(1, 2)
    >>> rs = from_sends([(1, 0, h, 0, 1, 1), (1, h, 1, 0, 1, 2), (0, 0, h, 1, 0, 1), (0, h, 1, 1, 0, 2)],
    ...                 "reduce_scatter", nodes=2, chunks=2)
    >>> ag = from_sends([(0, 0, h, 0, 1, 1), (0, h, 1, 0, 1, 2), (1, 0, h, 1, 0, 1), (1, h, 1, 1, 0, 2)],
    ...                 "allgather", nodes=2, chunks=2)
    >>> [s.step for s in overlapped(rs, ag, 1).sends() if s.op == "copy"]
    [2, 3, 2, 3]
    """
    both = concat(first, second, "allreduce")
    n = len(first)
    chunk, lo, hi = both.chunk.astype(np.int64), both.lo.astype(np.int64), both.hi.astype(np.int64)
    step = both.step.astype(np.int64)
    owner = chunk // chunks_per_node
    into = np.zeros(len(both), bool)
    into[:n] = both.dst[:n] == owner[:n]
    out = np.zeros(len(both), bool)
    out[n:] = both.src[n:] == owner[n:]
    if not into.any() or not out.any():
        return joined(first, second, first.num_steps)
    best = None
    for mirror in (False, True):
        a, b = (both.denom - hi, both.denom - lo) if mirror else (lo, hi)
        done = _completion(chunk[into], lo[into], hi[into], step[into], chunk[out], a[out], b[out], both.denom)
        shift = int(np.max(done + 1 - step[out]))
        if best is None or shift < best[0]:
            best = (shift, mirror)
    return joined(first, second, first.num_steps + best[0], best[1])


def _completion(c_in, lo_in, hi_in, s_in, c_out, lo_out, hi_out, denom: int) -> np.ndarray:
    """For each queried piece (``c_out``, ``[lo_out, hi_out)``), the latest step ``s_in`` of
    the arrivals (``c_in``, ``[lo_in, hi_in)``) overlapping it (-1 where none does): both cut
    into atoms at every boundary of either, a maximum per atom, then per query."""
    width = denom + 1
    keys = np.unique(np.concatenate([c_in * width + lo_in, c_in * width + hi_in,
                                     c_out * width + lo_out, c_out * width + hi_out]))
    latest = np.full(len(keys), -1, np.int64)
    a, b = np.searchsorted(keys, c_in * width + lo_in), np.searchsorted(keys, c_in * width + hi_in)
    atoms, owner = _ranges(a, b)
    np.maximum.at(latest, atoms, s_in[owner])
    a, b = np.searchsorted(keys, c_out * width + lo_out), np.searchsorted(keys, c_out * width + hi_out)
    atoms, owner = _ranges(a, b)
    out = np.full(len(a), -1, np.int64)
    np.maximum.at(out, owner, latest[atoms])
    return out


def _ranges(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every index of every range ``[a_i, b_i)`` and the ``i`` it came from."""
    count = b - a
    owner = np.repeat(np.arange(len(a)), count)
    starts = np.repeat(a - np.concatenate([[0], np.cumsum(count)[:-1]]), count)
    return starts + np.arange(int(count.sum())), owner


def candidates(options: list[list], one_tree) -> dict[str, tuple]:
    """The pairs (reduce-scatter forest, allgather forest) :func:`choose` compares, by name:
    every pair of ``options[0]`` x ``options[1]`` (each half's forests: the one picked for it
    alone first, then e.g. the optimum's before a FIFO choice replaced it) and of one packed
    tree a shard for either half (``one_tree(i)``: half ``i``'s, or None where it cannot be
    packed); each pair once (by identity), the first the halves as picked. One tree a shard
    keeps each link of an A100 box to one kind of traffic; on DGX-H100 x2 the optimum's two
    trees a shard for both halves run within 1 % of the bound (module doc)."""
    halves = []
    for i, forests in enumerate(options):
        ones = [] if any(f.k == 1 for f in forests) else [one_tree(i)]
        halves.append(_distinct([*forests, *ones]))
    pairs: dict[str, tuple] = {}
    for a, rs in enumerate(halves[0]):
        for b, ag in enumerate(halves[1]):
            name = "as picked" if a == b == 0 else f"reduce-scatter k={rs.k} {rs.shape}, allgather k={ag.k} {ag.shape}"
            pairs.setdefault(name if name not in pairs else f"{name} ({a}, {b})", (rs, ag))
    return pairs


def _distinct(forests: list) -> list:
    """``forests`` without None and without a second reference to one forest, in order."""
    out: list = []
    for f in forests:
        if f is not None and not any(f is g for g in out):
            out.append(f)
    return out


def choose(pairs: dict[str, tuple], price, sends, models: tuple[str, ...], deadline=None,
           fits=None) -> tuple[str, dict]:
    """The name of the pair of least priced time summed over ``models`` and what was priced
    (``{name: {model: s}}``; ``price(pair)``: the times of the overlapped allreduce after
    verifying, None when it does not verify, so an unverified pair is never kept). The pairs
    are priced in order while their sends together fit :data:`PROBE_SENDS` (``sends(pair)``;
    a pair that would exceed it is passed over); the first pair is kept alone when it does not
    fit by itself or the run is out of time; a pair left unpriced is not chosen. ``fits(sends)``
    false passes a pair over too (the time it is expected to take does not fit the time left)."""
    names = list(pairs)
    left = PROBE_SENDS
    priced: dict = {}
    for name in names:
        if deadline is not None and deadline.expired():
            break
        cost = sends(pairs[name])
        if fits is not None and not fits(cost):
            continue
        if cost > left:
            if name == names[0]:
                break
            continue
        left -= cost
        got = price(pairs[name])
        if got is not None:
            priced[name] = got
    if not priced:
        return names[0], {}
    best = min(priced, key=lambda n: sum(priced[n][m] for m in models))
    return best, priced


def joint(options: list[list], depths: list[int], alpha: float, one_tree, price, sends, models: tuple[str, ...],
          deadline=None, extra=None, kept=None, extra_at_probe_rate: bool = False, start=None,
          extra_first: bool = False, early: dict | None = None) -> tuple[list, dict]:
    """The two halves' forests of an allreduce chosen together (module doc): the pairs of
    :func:`candidates` (``options``: each half's forests, the picked one first; within
    :data:`PROBE_SHARE` of the time ``deadline`` leaves), each priced by ``price(pair,
    pieces)`` as the whole overlapped allreduce at :data:`PROBE_PIECES` pieces at alpha 0, else
    at the pieces ``depths`` picked for each half; then the chosen pair's allgather mixed with
    each other allgather forest at :data:`MIX_SHARES` (:func:`mixed`), where the probes fit.
    ``sends(forest, pieces)`` counts a half's sends. ``extra``: a function giving more pairs by
    name, called once the probes are priced (the halves packed on their shares of every link,
    :mod:`.capacity_split`: many deep trees, so the cheap pairs are priced, and one kept, first),
    each priced outside :data:`PROBE_SENDS` and :data:`PROBE_SHARE` at the same pieces or, where
    those would not fit the time left (``kept``, :meth:`.incumbent.Kept.fits`), at fewer
    (:func:`_price_extra`), and kept where their summed time is less than the chosen pair's
    (``extra_at_probe_rate``: an extra pair costs about what a probe costs a send, so it is
    priced once, at the most of those pieces and their cuts by 17/20 that fits; ``start(pair,
    pieces)``: the pieces an extra pair starts from instead, where its fill wants more).
    ``extra_first``: the extra pairs are expected to win (the split's pipelined limit is the
    allreduce's bound, :func:`.split_form.splits_first`), so they are priced first
    (:func:`priced_first`; ``early``: what it gave where the run priced them before packing the
    halves, :mod:`.split_first`) and the probes after them only where :data:`DIRECT_FACTOR` times
    their sends at the kept rate fit the time left (DGX-2 x2, 1 GB, the default 60 s at load 14:
    the halves' first probe, verified send by send through the switches, ran past the limit
    before the split was packed).
    Returns the chosen pair as a list and a record of the choice for the result row: the pair
    taken, the probe's pieces (``chosen_pieces``: the chosen pair's), the models whose summed
    times it has the least of and every candidate's times; the record's :data:`PAIRS` holds
    every candidate pair's forests, priced or not (A100 x2, 64 MB, ``objective=event``: at the
    halves' 1,600 pieces none fits the probes' budget), for the caller to take off before the
    record is stored."""
    pairs = candidates(options, one_tree)
    whole = deadline
    pieces = [PROBE_PIECES, PROBE_PIECES] if alpha <= 0 else list(depths)
    if early is None:
        early = priced_first(extra(), pieces, sends, price, whole, kept, start) if extra_first and extra else {}
    deadline = whole.share(PROBE_SHARE) if whole is not None else None
    fits = (lambda n: kept.fits(DIRECT_FACTOR * n, whole)) if early and kept is not None else None  # noqa: E731
    probe_sends = lambda pair: sum(sends(f, p) for f, p in zip(pair, pieces))  # noqa: E731
    name, priced = choose(pairs, lambda pair: price(pair, pieces), probe_sends, models, deadline, fits)
    if priced:
        rs, ag = pairs[name]
        others = _distinct([f for pair in pairs.values() for f in pair[1:] if f is not ag])
        mixes = {f"{name}; allgather {share} of a shard on {o.k} trees a shard, the rest on {ag.k}":
                 (rs, mixed(o, ag, share)) for o in others for share in MIX_SHARES}
        if mixes and probe_sends(pairs[name]) * (len(mixes) + len(priced)) <= PROBE_SENDS:
            for mix, pair in mixes.items():
                if deadline is not None and deadline.expired():
                    break
                if fits is not None and not fits(probe_sends(pair)):
                    continue
                got = price(pair, pieces)
                if got is not None:
                    pairs[mix], priced[mix] = pair, got
            name = min(priced, key=lambda n: sum(priced[n][m] for m in models))
    at = {n: pieces for n in priced}
    later = {} if extra_first or extra is None else {
        other: (pair, *_price_extra(pair, list(pieces) if start is None else start(pair, pieces), sends,
                                    lambda q, pair=pair: price(pair, q), whole, kept, extra_at_probe_rate))
        for other, pair in extra().items()}  # the run's time, not the probes' share
    for other, (pair, q, got) in {**early, **later}.items():
        if got is not None:
            pairs[other], priced[other], at[other] = pair, got, q
            if name not in priced or sum(got.values()) < sum(priced[name][m] for m in models):
                name = other
    record = {"chosen": name, "probe_pieces": pieces, "chosen_pieces": at.get(name, pieces),
              "least_sum_of": list(models),
              "priced": {n: {m: round(t, 9) for m, t in p.items()} for n, p in priced.items()}}
    if extra_first:
        record["extra_first"] = True
    record[PAIRS] = {n: tuple(p) for n, p in pairs.items()}  # priced or not; taken off by the caller (.joint)
    elsewhere = {n: q for n, q in at.items() if q != pieces}
    if elsewhere:  # extra pairs priced at other pieces: fewer, the time left being short, or more, for their fill
        fewer = all(max(q) < max(pieces) for q in elsewhere.values())
        record["fewer_pieces" if fewer else "other_pieces"] = elsewhere
    return list(pairs[name]), record


def priced_first(extra: dict, pieces: list[int], sends, price, deadline, kept, start=None) -> dict:
    """``{name: (pair, pieces priced at, times)}`` of :func:`joint`'s extra pairs priced before
    the probes (``extra_first``): each first at an eighth of the pieces it starts from (at least
    :data:`LEAST_EXTRA_PIECES`; only under a time limit with nothing kept yet, so that ``kept``
    holds a verified schedule and measures its rate a send), then at the most of those pieces and
    their cuts by 17/20 that fits the time left at that rate (:func:`_price_extra`); the lower
    summed price of the two kept (times None where neither verified). ``price(pair, pieces)``
    and ``sends(forest, pieces)`` as in :func:`joint`."""
    out = {}
    for name, pair in extra.items():
        first = list(pieces) if start is None else start(pair, pieces)
        seed = [max(LEAST_EXTRA_PIECES, p // SEED_SHARE) for p in first]
        best = (None, None)
        if deadline is not None and deadline.left() is not None and kept is not None and kept.schedule is None \
                and max(seed) < max(first):
            best = (seed, price(pair, seed))
        q, got = _price_extra(pair, first, sends, lambda q, pair=pair: price(pair, q), deadline, kept, True)
        if got is not None and (best[1] is None or sum(got.values()) <= sum(best[1].values())):
            best = (q, got)
        out[name] = (pair, *best)
    return out


def _price_extra(pair, pieces: list[int], sends, price, deadline, kept, at_probe_rate: bool = False) -> tuple:
    """``(pieces priced at, times)`` of an extra pair of :func:`joint` (``(None, None)`` when
    not priced): at ``pieces`` where :data:`DIRECT_FACTOR` times their probe's expected time
    fits the time ``deadline`` leaves (``kept.needs`` by the last probe's rate,
    :class:`.incumbent.Kept`; and without ``kept``, while the deadline has not passed), else
    from their fewest halving of at least :data:`LEAST_EXTRA_PIECES` up, doubling while the rate
    its own last probe measured fits (pairs differ: module doc of :mod:`.incumbent`), the
    deepest priced kept. ``at_probe_rate`` (a pair kept as trees, verified from them: only its
    ``event`` price reads sends, about what the probes cost a send; DGX-2 x2's split, 2.3 us of
    CPU a send at 200 pieces, the halves as picked 2.1): priced once, at the most of ``pieces``
    and their cuts by 17/20 (DGX-2 x2's split beats RS+AG under both models from about 150
    pieces, not at 100) down to :data:`LEAST_EXTRA_PIECES` that fits by the probes' rate with
    :data:`MARGIN`."""
    def sent(q):
        return sum(sends(f, p) for f, p in zip(pair, q))

    left = None if deadline is None else deadline.left()
    if kept is None or left is None or kept.schedule is None or DIRECT_FACTOR * kept.needs(sent(pieces)) <= left:
        return (pieces, price(pieces)) if left is None or left > 0 else (None, None)
    q = list(pieces)
    if at_probe_rate:  # with a margin: a probe cannot be stopped, and the kept schedule is checked after
        while not kept.fits(int(MARGIN * sent(q)), deadline) and min(q) * 17 // 20 >= LEAST_EXTRA_PIECES:
            q = [p * 17 // 20 for p in q]
        return (q, price(q)) if kept.fits(int(MARGIN * sent(q)), deadline) else (None, None)
    while min(q) // 2 >= LEAST_EXTRA_PIECES:
        q = [p // 2 for p in q]
    best: tuple = (None, None)
    while min(q) <= min(pieces) and kept.fits(sent(q), deadline):
        got = price(q)
        if got is None:
            break
        best, q = (q, got), [2 * p for p in q]
    return best


def mixed(first, second, share: Fraction):
    """One forest of two of the same collective: ``first``'s trees carry ``share`` of every
    shard and ``second``'s the rest (each tree's part scaled; Zhao et al., "ForestColl", arXiv
    2402.06787, Section 5: a tree carries its part of its root's shard, any split of the shard
    among trees reaching every node is a schedule). Every link then carries that mix of the two
    forests' loads, so the time is at most the slower one's (its ``tau``, kept as the mix's)."""
    p, q = share.numerator, share.denominator
    k1, k2 = first.k, second.k
    trees = [RoutedTree(t.root, t.lo * k2 * p, t.hi * k2 * p, t.routes) for t in first.trees]
    trees += [RoutedTree(t.root, k1 * k2 * p + t.lo * k1 * (q - p), k1 * k2 * p + t.hi * k1 * (q - p), t.routes)
              for t in second.trees]
    return replace(second, k=k1 * k2 * q, tau=max(first.tau, second.tau), trees=trees, shape="mixed")


def aligned(first, second) -> tuple:
    """The forests of a reduce-scatter (``first``) and an allgather (``second``) cut at each
    other's boundaries, so every part of a shard is carried by one tree of each, and the
    allgather's parts placed mirrored in the shard (``[lo, hi)`` at ``[K - hi, K - lo)``, ``K``
    the units of a shard): :func:`overlapped`'s mirror then sends each part's pieces in the order
    the time-reversed reduction completes them (its last piece first), so the allgather of a part
    follows its reduction at once, whatever the two forests' shares (a tree may carry any part of
    its root's shard of its size; Zhao et al., "ForestColl", arXiv 2402.06787, Section 5).

    >>> from collsynth.solvers.packing.trees import RoutedTree
    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class F:  # a forest's k and trees
    ...     k: int
    ...     trees: list
    >>> rs = F(k=2, trees=[RoutedTree(0, 0, 1, ((1, 0),)), RoutedTree(0, 1, 2, ((2, 0),))])
    >>> ag = F(k=3, trees=[RoutedTree(0, 0, 3, ((0, 1), (0, 2)))])
    >>> a, b = aligned(rs, ag)
    >>> a.k, [(t.lo, t.hi) for t in a.trees], [(t.lo, t.hi) for t in b.trees]
    (6, [(0, 3), (3, 6)], [(3, 6), (0, 3)])
    """
    K = math.lcm(first.k, second.k)
    cuts: dict = {}
    for f in (first, second):
        for t in f.trees:
            cuts.setdefault(t.root, set()).update((t.lo * K // f.k, t.hi * K // f.k))
    out = []
    for f, mirror in ((first, False), (second, True)):
        trees = []
        for t in f.trees:
            lo, hi = t.lo * K // f.k, t.hi * K // f.k
            ends = sorted(c for c in cuts[t.root] if lo < c < hi)
            for a, b in zip([lo, *ends], [*ends, hi]):
                trees.append(RoutedTree(t.root, K - b, K - a, t.routes) if mirror else RoutedTree(t.root, a, b, t.routes))
        out.append(replace(f, k=K, trees=trees))
    return tuple(out)
