"""A pipeline's fill: the ring trees and piece sizes of least synchronous price.

A reduce-scatter made of pipelined trees (Zhao et al., "ForestColl", arXiv 2402.06787,
Section 5), time-reversed, sends in step ``t`` piece ``t - d - 1`` of every hop ``d`` steps
above the owner. With its links' order declared (``link_order = "program"``,
:mod:`collsynth.tens.pipelined_trees`) the ``event`` model serves each link in that order too,
so under ``event``, ``event-inorder`` and ``sync`` alike a link whose load lies at other depths
than the bottleneck's idles while the pipeline fills: the ``sync`` price (Zhao et al., NSDI
2025, Section 3.2) exceeds the busiest link's time by the loads of the depths the busiest link
is not at, over the pieces. On ForestColl's MI250 systems at four and eight boxes (1 GB,
alpha 0; ``benchmarks/bench_allreduce.py``) the InfiniBand links are the cut and the xGMI links
between the OAM pairs carry 99.6 % (x4) and 85 % (x8) of their time, 15 hops deep along the
ring trees (:mod:`.rings`) below each tree's one NIC hop: 8.1 pieces' time of fill at four
boxes, 1.3 % at the 631 pieces the send budget allows, and 7.3, 4.7 % at 155, at eight. Two
things shorten it:

- ring trees that reach each box both ways (:func:`.rings.segment_both`: 10 hops deep, and
  one tree for a ring and its reverse, so twice the pieces within the budget), and
- pieces of unequal size (:mod:`.piece_sizes`: the linear program of least ``sync`` price;
  where the xGMI links have slack, the pieces shrink at the pipeline's ends).

An allreduce's allgather half (after its reduce-scatter, :mod:`.overlap`) has the same pipeline
forwards: the NICs finish while the xGMI links below them still drain. Its shape is not chosen
as an allgather's alone is (:func:`collsynth.solvers.packing.forests.by_shape`, which prices
finished schedules at the allgather's own pieces), so it is chosen here too, at the pieces the
allreduce gives each half (half the send budget). Measured on MI250 (1 GB, alpha 0, the trees
form's ``sync`` price over the half's optimum): before, the allgather half kept the first
forest, ring trees one way round at 315 pieces (four boxes) and 77 (eight), 1.0257 and 1.0946,
beside the reduce-scatter half both ways at 631 and 155 pieces, 1.0075 and 1.0114 (sized);
their mean is the allreduce rows' ``sync`` ratio, 1.0166 and 1.0530. An allgather alone keeps
the shape its finished schedules chose, but where that forest's fill at the budget's pieces is
over :data:`TARGET` it goes through :func:`choose` alone
(:func:`collsynth.solvers.packing.pieces_choice.alone`): at eight MI250 boxes the both-ways
ring trees at 310 pieces, 1.0142x under ``sync`` in equal pieces, 1.0045x sized.

:func:`choose` prices every candidate forest at its automatic pieces, equal and sized, by the
trees form's exact ``sync`` price (:func:`collsynth.tens.pipelined_trees.price_sync`: no
explicit sends, of which there are millions; the sizes' program takes seconds at a thousand
pieces) and keeps the least. The send budget may leave the least over :data:`TARGET`: at eight
MI250 boxes each half of the allreduce gets 155 pieces (half of 16 M sends at 51,456 hops a
piece), where the program's sizes are 1.0112x the optimum under ``sync``, and the rows 1.0116x /
1.0106x / 1.0112x the bound under ``event`` / ``event-inorder`` / ``sync``. There the chosen
forest takes the fewest pieces up to ``most_of`` (:data:`.pieces_choice.FILL_SENDS`, 32 M sends, in
the whole memory budget at ``BYTES_PER_TREE_SEND`` a send where the budget's pieces take half) that price
within :data:`TARGET` (:func:`deeper`; the sync price falls about as one over the pieces: 1.0045x at
310, 1.0049x at 290; ``benchmarks/bench_allreduce_halves.py``).
"""

from __future__ import annotations

from dataclasses import replace

from ...tens.pipelined_trees import price_sync
from .piece_sizes import sized

GAIN = 1e-3  # unequal pieces are kept only where they price at least this share below equal ones
SIZES_SHARE = 0.1  # of the run's time left, at most, for the candidates' sizes (linear programs of up to
# 400,000 rows: DGX-2 x2's reduce-scatter rings at 4,098 pieces take minutes); stopped there, pieces stay equal
TARGET = 5e-3  # a fill priced above this share over its half's optimum at the budget's pieces may take more (up
# to ``most_of``): half of the 1 % a row aims for, the other half for what the sync price of the trees form does
# not see (FIFO links, the halves' overlap; MI250 x8, 155 pieces: event 1.0116, in order 1.0106, sync 1.0112)
SETTLE = 32  # the search for the fewest pieces within TARGET stops within 1 / SETTLE of them


def choose(instance, forests: list, pieces_of, pipelined, deadline=None, most_of=None, optimum_s=None) -> tuple:
    """``(forest, pieces, record)``: of ``forests`` (forests of one reduction, transposed, or of
    an allreduce's allgather; the first the default), the one of least ``sync`` price at
    ``pieces_of(forest)`` pieces, with its piece edges (the forest's ``cuts``) where unequal
    pieces price at least :data:`GAIN` below equal ones (their programs given
    :data:`SIZES_SHARE` of the time ``deadline`` leaves, together: one stopped there keeps equal
    pieces); ``pipelined(forest, pieces)`` is the trees form the run would expand. Ties go to
    the earlier forest. Where the chosen one prices more than :data:`TARGET` over ``optimum_s``
    (seconds) and ``most_of(forest)`` allows more pieces, it takes the fewest up to those that
    price within it, or those if none does (:func:`deeper`). ``record``: each candidate's name,
    pieces and prices (seconds), each deeper count tried after them."""
    best, record = None, []
    stop = deadline.share(SIZES_SHARE) if deadline is not None else None
    for f in forests:
        pieces = pieces_of(f)
        got = priced(instance, f, pieces, pipelined, stop, record)
        if best is None or got[0] < best[0]:
            best = got
    if most_of is not None and optimum_s is not None and best[0] > optimum_s * (1 + TARGET):
        more = deeper(lambda p: priced(instance, best[1], p, pipelined, stop, record), best[2], most_of(best[1]),
                      optimum_s * (1 + TARGET))
        if more is not None and more[0] < best[0]:
            best = more
    return best[1], best[2], record


def priced(instance, f, pieces: int, pipelined, stop, record: list) -> tuple:
    """``(sync price, forest, pieces)``: ``f`` at ``pieces`` equal pieces, or sized
    (:func:`.piece_sizes.sized`, its edges as the forest's ``cuts``) where those price at least
    :data:`GAIN` less; appended to ``record``. No program starts once ``stop`` has expired."""
    trees = pipelined(f, pieces)
    equal = price_sync(trees, instance).total_s
    # HiGHS's presolve may run past a limit (45 s on a 166,320-row program given none left): none started late
    late = stop is not None and stop.expired()
    unequal = None if late else sized(trees, instance, pieces, stop.left() if stop is not None else None)
    cut = price_sync(unequal, instance).total_s if unequal is not None else None
    use = cut is not None and cut < equal * (1 - GAIN)
    record.append({"shape": f.shape + (f" ({f.door})" if f.door else ""), "pieces": pieces,
                   "sync_equal_s": equal, "sync_sized_s": cut, "sized": use})
    return cut if use else equal, replace(f, cuts=tuple(unequal.cuts.tolist()) if use else None), pieces


def deeper(price_at, pieces: int, most: int, goal: float) -> tuple | None:
    """``price_at(p)`` (a tuple, its price first) at the fewest ``p`` in ``(pieces, most]``
    priced at most ``goal``, searched by halving the interval (a fill's overhead falls as
    pieces grow) until within ``1 / SETTLE``; at ``most`` where even that prices above
    ``goal``; None where ``most <= pieces``.

    >>> deeper(lambda p: (1 + 8 / p, p), 100, 1000, 1.02)[1]  # within from 400 on: 550, 325, 437, 381, 409, 395, 402
    402
    >>> deeper(lambda p: (1 + 8 / p, p), 100, 300, 1.02)[1], deeper(lambda p: (1 + 8 / p, p), 100, 100, 1.02)
    (300, None)
    """
    if most <= pieces:
        return None
    top = price_at(most)
    if top[0] > goal:
        return top
    lo, hi, found = pieces, most, top  # lo priced above the goal, hi within it
    while hi - lo > max(1, hi // SETTLE):
        mid = (lo + hi) // 2
        got = price_at(mid)
        if got[0] <= goal:
            hi, found = mid, got
        else:
            lo = mid
    return found
