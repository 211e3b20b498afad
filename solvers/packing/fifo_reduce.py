"""Reduction forests for links that serve messages first come, first served (the ``event`` model).

A reduce-scatter built as the time reversal of a pipelined allgather forest (Zhao et al.,
"ForestColl", arXiv 2402.06787, Section 4) sends every GPU's own input at once: under the
``event`` model each link is a FIFO, so a GPU's own data, ready at time 0, leaves before any
partial sum it relays, which is ready only when its children's pieces have arrived
(``docs/cost-models.md``; :mod:`collsynth.tens.time_reversal` says why the reversal's in-order
guarantee does not carry over). How much that costs depends on the forest (1 GB, alpha 0, 200
pieces, ``python benchmarks/bench_time_reversal.py``): on A100 x2 the optimum's 13 two-level
trees a shard run 1.0117x the bound under ``event`` and one packed tree a shard (7/6 of a
shard's time against the optimum's 15/13 there) 1.0209x; on DGX-H100 x2 the optimum's ring trees
run 1.37x (1.017x in order) and one tree a shard 1.041x. (Before the event model found a
reduction's dependencies exactly, its fallback at 200 pieces priced A100 x2's optimum forest at
2.41x: the fallback, not the links.) So :func:`choose` measures: both forests emitted at
:func:`probe_pieces` pieces, verified and priced under the objective's models, the least summed
time kept. Measured by ``benchmarks/bench_allreduce.py``.

The figures above are of reductions that let each link serve as things become ready. The
reductions tree packing emits now declare their links' order (``link_order = "program"``,
:func:`collsynth.tens.pipelined_trees.expand`: a GPU's sends on a link leave in the order
listed, as the time reversal needs), and the probe prices them so: on DGX-H100 x2 the optimum's
ring trees no longer starve and are kept (1 GB, alpha 0: 1.0022x the bound under ``event``,
against 1.0375x for one tree a shard before).

A greedy reduction forest grown breadth-first relays each GPU's own data beside the sums it
forwards on the same links; grown depth-first its trees are chains that starve less under FIFO
links but are deeper, so slower to fill. Which wins depends on the pipeline's depth: DGX-H100 x2's
rooted reduce (1 GB, alpha 0, 8 trees, 240 sends a piece) is 1.082 / 1.036 / 1.046x the bound under
``event`` / ``event-inorder`` / ``sync`` breadth-first and 1.119 / 1.128 / 1.136x depth-first at
200 pieces, but 1.066 / 1.005 / 1.006x at the 1600 pieces the run emits breadth-first and 1.008 /
1.009 / 1.009x at its 3000 depth-first. So :func:`deeper` compares the two at the pieces the run
emits each at (:func:`collsynth.solvers.packing.emission.auto_pieces`), where their sends fit
:data:`RUN_PROBE_SENDS`.

Where they do not, each is priced at three fractions of its run's pieces, ``q``, ``2 q`` and
``4 q`` (:data:`SCALED_PROBE_SENDS` sends the six together), and its price at the run's pieces
``P`` extrapolated as ``A + B / P + C P`` (:func:`with_cost_a_piece`, ``C >= 0``): a pipeline's fill
is about ``(d - 1) / P`` of its time (``d`` hops deep; Thakur et al., "Optimization of
Collective Communication Operations in MPICH", IJHPCA 2005, Section 4), and a cost a piece
grows with the pieces (in the pipelined-broadcast model of Patarasuk, Yuan and Faraj, J.
Parallel Distrib. Comput. 2008, a latency a piece; here, at alpha 0, a FIFO link's
starvation). Two probes saw only ``A + B / P``: HGX H100 with four NICs a box x2, root 6 (1 GB,
alpha 0, quartered pieces), breadth-first's ``event`` price is 5.598 / 5.299 / 5.493 / 5.920 ms
at 40 / 80 / 160 / 400 pieces, and through 40 and 80 its ``sync`` + ``event`` sum at 400 came
out 10.16 ms against depth-first's 10.19 (11.02 in full: depth-first 8 % cheaper); through all
three, 11.81, depth-first kept (``tests/test_growth_choice.py``). Priced at one common fraction
instead, the two fills grow unequally where the run's
pieces are not 100 a hop (the 1600-piece floor): DGX-H100 x2 (root 0, 1 GB, alpha 0) is
1.0058 / 1.0658 (``sync`` / ``event``) breadth-first at 1600 pieces against 1.0091 / 1.0080
depth-first at 3000, but an eighth of those pieces ranks them the other way (1.0461 / 1.0822
against 1.0726 / 1.0637); extrapolated from a twentieth and an eighth depth-first's ``event``
price at 3000 is 1.0080. A100 x8's rooted reduce (36 hops deep breadth-first at 3600 pieces, 140
depth-first at 14000; 19.8 M sends together): breadth-first 1.7951 / 1.8069x the bound under
``event`` at 360 / 900 pieces and 1.8223x at 3600, depth-first 1.0880 / 1.0352x at 1400 / 3500
and 1.0088x at 14000.

A third candidate is the depth-first packing on the network whose links off the bottleneck cut
are held back (:mod:`.port_slack`): a FIFO switch port as busy as the cut serves pieces in arrival
order while its GPU sends in program order. DGX-2 x2 (1 GB, alpha 0, 5900 pieces) went from 1.0396 /
1.0077 / 1.0085x the bound under ``event`` / ``event-inorder`` / ``sync`` depth-first to 1.0051 /
1.0055 / 1.0069x held back (``benchmarks/bench_allreduce.py --kinds reduce --only "DGX-2 x2"``).
"""

from __future__ import annotations

import time

import numpy as np

from .emission import auto_pieces
from .trees import hops_of

PROBE_PIECES = 200  # pipeline depth the two forests are compared at (about 1 % of a priced time)
LEAST_PROBE_PIECES = 25  # or the most that fit PROBE_SENDS, down to this (DGX-H100 x4: 1.80x the bound under
# event on the optimum's forest, which larger systems kept unprobed at 200 pieces)
PROBE_SENDS = 500_000  # most sends of the two probes together (a second or two of pricing each)
RUN_PROBE_SENDS = 6_000_000  # most sends of :func:`deeper`'s two forests together, each at its run's pieces
# (DGX-H100 x2's rooted reduce: 1.10 M, priced in about 10 s under three models; H100 4-NIC x4 and DGX-2 x2
# need more than 2 M, where depth-first growth is 1.0064 against 1.2601 and 1.0396 against 1.5333 under event)
SCALED_PROBE_SENDS = 7_000_000 // 3  # most sends of both growths priced three times each, at q, 2 q and 4 q of
# their run's pieces, where those exceed RUN_PROBE_SENDS: the q that 1 M sends gave two probes, q and 2 q (A100 x8:
# 19.8 M sends; about 15 s of verifying and pricing a million sends under sync and event on the idle machine)
FLIP_MARGIN = 1e-3  # the optimum's forest replaces one tree a shard that won the probe only where extrapolated
# this much cheaper at their run's pieces (DGX-H100 x4's two are within 0.003 %: one tree a shard kept, as measured)
LEAST_SHARE_LEFT = 0.5  # compared only with at least this share of the run's time limit left (A100 x8 grown
# depth-first: 15.7 M sends, whose verification takes about 210 of its 366 s at load 14)


def probe_pieces(f, chunks: int) -> int:
    """The pipeline depth :func:`choose` probes ``f`` at: :data:`PROBE_PIECES`, or the most
    whose sends, twice over, fit :data:`PROBE_SENDS`; 0 (no probe) below :data:`LEAST_PROBE_PIECES`.

    >>> from types import SimpleNamespace as F
    >>> [probe_pieces(F(trees=[F(routes=[[0, 1]] * h)]), 1) for h in (10, 2000, 20000)]
    [200, 125, 0]
    """
    fits = PROBE_SENDS // 2 // max(1, hops_of(f.trees) * chunks)
    pieces = min(PROBE_PIECES, fits)
    return pieces if pieces >= LEAST_PROBE_PIECES else 0


def choose(f, one_tree, price, models: tuple[str, ...], chunks: int, deadline=None):
    """``f`` (a transposed forest at the optimum) or ``one_tree()`` (the one packed tree a shard
    forest of the same collective), whichever priced time summed over ``models`` is less at
    :func:`probe_pieces` pieces (``price(forest, pieces)``: the times under ``models`` after
    verifying, None when it does not verify, so an unverified one is never chosen); ``f`` under
    ``sync`` alone (its packing is the optimum), when even :data:`LEAST_PROBE_PIECES` pieces of
    its probe would exceed :data:`PROBE_SENDS` sends, or when the run is out of time; ``f`` too
    where ``one_tree()`` wins the probe but ``f`` is cheaper at its run's pieces
    (:func:`cheaper_at_its_pieces`).
    ``chunks``: chunks a root sends per piece (the reduction alone is probed, an allreduce's
    first half included)."""
    if models == ("sync",) or not f.transposed or f.k == 1:
        return f
    pieces = probe_pieces(f, chunks)
    if not pieces:
        return f
    if deadline is not None and deadline.expired():
        return f
    one = one_tree()
    prices = [price(g, pieces) for g in (f, one)]
    if prices[1] is None or (prices[0] is not None and sum(prices[0].values()) <= sum(prices[1].values())):
        return f
    return f if cheaper_at_its_pieces(f, one, price, pieces, chunks, prices) else one


def cheaper_at_its_pieces(f, one, price, pieces: int, chunks: int, at_probe: list | None = None) -> bool:
    """Whether ``f``, priced at ``q``, ``2 q`` and ``4 q`` pieces (``q`` a quarter of the probe's
    ``pieces``) and extrapolated to the pieces the run emits it at (:func:`with_cost_a_piece`,
    :func:`.emission.auto_pieces`), is over :data:`FLIP_MARGIN` cheaper than ``one`` extrapolated
    alike: a deeper forest's fill, which loses at the probe, shrinks with the run's pieces
    (DGX-H100 x3's reduce-scatter, 1 GB, alpha 0: the optimum's ring trees, 16 hops deep, 4.047
    against one tree a shard's 3.935 ms ``sync`` + ``event`` at 113 pieces, extrapolated 3.848
    against 3.892 at their 1,600, as priced there; Patarasuk, Yuan and Faraj, J. Parallel Distrib.
    Comput. 68(6), 2008, the pipelined-broadcast time). ``at_probe``: ``f``'s and ``one``'s
    prices at ``pieces`` where the probe has them (taken for ``4 q`` where that is ``pieces``:
    the same schedules, not verified nor priced again)."""
    q = max(1, pieces // 4)

    def at(i: int, g, k: int):
        return at_probe[i] if at_probe is not None and k * q == pieces else price(g, k * q)

    at_run = [with_cost_a_piece([_total(at(i, g, k)) for k in (1, 2, 4)], q, auto_pieces(g.trees, chunks))
              for i, g in enumerate((f, one))]
    return None not in at_run and at_run[0] * (1 + FLIP_MARGIN) < at_run[1]


def deeper(f, depth_first, price, models: tuple[str, ...], chunks: int, deadline=None, pieces: int | None = None,
           held_back=None):
    """``f`` (a reduction's greedy forest grown breadth-first) or ``depth_first()`` (the same
    packing grown depth-first, Zhao et al., "ForestColl", arXiv 2402.06787, Section 5.2: either
    growth packs the optimum), or ``held_back()`` when given (grown depth-first on the links
    off the bottleneck cut held back, :mod:`.port_slack`; None: no such forest), whichever
    priced time summed over ``models`` is least (the first on a tie), each at the
    pieces the run emits it at (``price(forest, pieces)``, None when it does not verify), or
    where their sends together exceed :data:`RUN_PROBE_SENDS` extrapolated there from fewer
    pieces (:func:`with_cost_a_piece`; module doc); ``f`` under ``sync`` alone, when
    ``depth_first()`` is None, when less than :data:`LEAST_SHARE_LEFT` of the run's time limit
    is left, or when the cheaper schedule's sends, at the seconds a send its comparison took
    (verifying and pricing), would not fit the time left. ``chunks``: chunks a root sends per
    piece; ``pieces``: the run's pieces when set (all are priced at them)."""
    if models == ("sync",) or not f.transposed or f.shape != "greedy":
        return f
    if deadline is not None and (deadline.expired() or _short(deadline)):
        return f
    g = depth_first()
    if g is None or g.shape != "greedy":
        return f
    held = held_back() if held_back is not None else None
    candidates = [f, g] + ([held] if held is not None else [])
    runs = [pieces or auto_pieces(h.trees, chunks) for h in candidates]
    each = [hops_of(h.trees) * chunks * p for h, p in zip(candidates, runs)]
    started = time.monotonic()
    if sum(each) <= RUN_PROBE_SENDS:
        priced = sum(each)
        totals = [_total(price(h, p)) for h, p in zip(candidates, runs)]
    else:
        fewer = [max(1, min(p // 4, int(p * SCALED_PROBE_SENDS / (7 * sum(each))))) for p in runs]
        priced = sum(7 * e * q // p for e, q, p in zip(each, fewer, runs))
        totals = [with_cost_a_piece([_total(price(h, k * q)) for k in (1, 2, 4)], q, p)
                  for h, q, p in zip(candidates, fewer, runs)]
    best = least(totals)
    if best == 0:
        return f
    per_send = (time.monotonic() - started) / max(1, priced)
    if deadline is not None and deadline.left() is not None and per_send * each[best] > deadline.left():
        return f  # the cheaper schedule would not be verified in the time left
    return candidates[best]


def least(totals: list) -> int:
    """The index of the least of ``totals`` (None: not verified, never least), the first on a
    tie; 0 when none is verified.

    >>> least([1.02, 1.01, None]), least([1.01, 1.01]), least([None, None])
    (1, 0, 0)
    """
    known = [(t, i) for i, t in enumerate(totals) if t is not None]
    return min(known)[1] if known else 0


def with_cost_a_piece(at: list, q: int, pieces: int) -> float | None:
    """The price at ``pieces`` of a pipeline priced ``at`` = ``[y(q), y(2 q), y(4 q)]``, as
    ``A + B / P + C P`` through all three: the pipelined-broadcast time of Patarasuk, Yuan and
    Faraj ("Techniques for pipelined broadcast on Ethernet switched clusters", J. Parallel
    Distrib. Comput. 68(6), 2008: ``(P + d - 1)`` steps of a piece's latency plus its bytes
    over the bandwidth, a bandwidth term ``A``, a fill ``B / P`` shrinking and a cost a piece
    ``C P`` growing with the pieces; module doc), with ``C >= 0``: where the three give ``C <
    0`` (no cost a piece shrinks with more pieces), ``A + B / P`` through ``2 q`` and ``4 q``,
    the two nearer the run's pieces (:func:`extrapolated`). None when any is None (a schedule
    that does not verify).

    >>> y = lambda P: 1 + 30 / P + P / 10**4  # A = 1, B = 30, C = 1e-4
    >>> round(with_cost_a_piece([y(100), y(200), y(400)], 100, 3000), 9)  # 1 + 0.01 + 0.3
    1.31
    >>> y = lambda P: 1 + 30 / P  # C = 0: A + B / P
    >>> round(with_cost_a_piece([y(100), y(200), y(400)], 100, 3000), 9)
    1.01
    >>> round(with_cost_a_piece([1.3, 1.15, 1.07], 100, 3000), 9)  # C < 0 in the three: through the last two
    1.000666667
    """
    if any(y is None for y in at):
        return None
    ps = np.array([q, 2 * q, 4 * q], float)
    A, B, C = np.linalg.solve(np.stack([np.ones(3), 1 / ps, ps], axis=1), np.array(at, float))
    if C < 0:
        return extrapolated(at[1], at[2], 2 * q, pieces)
    return float(A + B / pieces + C * pieces)


def extrapolated(at_q: float | None, at_2q: float | None, q: int, pieces: int) -> float | None:
    """The price at ``pieces`` of a pipeline priced ``at_q`` at ``q`` pieces and ``at_2q`` at
    ``2 q``, as ``A + B / P`` through both (a fill of ``B / P``: module doc); None when either
    is None (a schedule that does not verify).

    >>> round(extrapolated(1 + 30 / 100, 1 + 30 / 200, 100, 3000), 9)  # A = 1, B = 30
    1.01
    """
    if at_q is None or at_2q is None:
        return None
    fill = (at_q - at_2q) * 2 * q  # B
    return at_2q - fill / (2 * q) + fill / pieces


def _total(prices: dict | None) -> float | None:
    """The priced times summed over the models (None stays None)."""
    return None if prices is None else sum(prices.values())


def _short(deadline) -> bool:
    """Whether less than :data:`LEAST_SHARE_LEFT` of ``deadline``'s time limit is left."""
    left, limit = deadline.left(), deadline.limit
    return left is not None and bool(limit) and left < LEAST_SHARE_LEFT * limit
