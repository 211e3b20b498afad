"""A reduction's pipeline fill: the ring trees and piece sizes of least synchronous price.

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

:func:`choose` prices every candidate forest at its automatic pieces, equal and sized, by the
trees form's exact ``sync`` price (:func:`collsynth.tens.pipelined_trees.price_sync`: no
explicit sends, of which there are millions; the sizes' program takes seconds at a thousand
pieces) and keeps the least.
"""

from __future__ import annotations

from dataclasses import replace

from ...tens.pipelined_trees import price_sync
from .piece_sizes import sized

GAIN = 1e-3  # unequal pieces are kept only where they price at least this share below equal ones
SIZES_SHARE = 0.1  # of the run's time left, at most, for the candidates' sizes (linear programs of up to
# 400,000 rows: DGX-2 x2's reduce-scatter rings at 4,098 pieces take minutes); stopped there, pieces stay equal


def choose(instance, forests: list, pieces_of, pipelined, deadline=None) -> tuple:
    """``(forest, pieces, record)``: of ``forests`` (transposed forests of one reduction, the
    first the default), the one of least ``sync`` price at ``pieces_of(forest)`` pieces, with
    its piece edges (the forest's ``cuts``) where unequal pieces price at least :data:`GAIN`
    below equal ones (their programs given :data:`SIZES_SHARE` of the time ``deadline`` leaves,
    together: one stopped there keeps equal pieces); ``pipelined(forest, pieces)`` is the trees
    form the run would expand. Ties go to the earlier forest. ``record``: each candidate's name
    and prices (seconds)."""
    best, record = None, []
    stop = deadline.share(SIZES_SHARE) if deadline is not None else None
    for f in forests:
        pieces = pieces_of(f)
        trees = pipelined(f, pieces)
        equal = price_sync(trees, instance).total_s
        # HiGHS's presolve may run past a limit (45 s on a 166,320-row program given none left): none started late
        late = stop is not None and stop.expired()
        unequal = None if late else sized(trees, instance, pieces, stop.left() if stop is not None else None)
        cut = price_sync(unequal, instance).total_s if unequal is not None else None
        use = cut is not None and cut < equal * (1 - GAIN)
        got = (cut if use else equal, replace(f, cuts=tuple(unequal.cuts.tolist()) if use else None), pieces)
        record.append({"shape": f.shape + (f" ({f.door})" if f.door else ""), "pieces": pieces,
                       "sync_equal_s": equal, "sync_sized_s": cut, "sized": use})
        if best is None or got[0] < best[0]:
            best = got
    return best[1], best[2], record
