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
"""

from __future__ import annotations

from .emission import auto_pieces
from .trees import hops_of

PROBE_PIECES = 200  # pipeline depth the two forests are compared at (about 1 % of a priced time)
LEAST_PROBE_PIECES = 25  # or the most that fit PROBE_SENDS, down to this (DGX-H100 x4: 1.80x the bound under
# event on the optimum's forest, which larger systems kept unprobed at 200 pieces)
PROBE_SENDS = 500_000  # most sends of the two probes together (a second or two of pricing each)
RUN_PROBE_SENDS = 6_000_000  # most sends of :func:`deeper`'s two forests together, each at its run's pieces
# (DGX-H100 x2's rooted reduce: 1.10 M, priced in about 10 s under three models; H100 4-NIC x4 and DGX-2 x2
# need more than 2 M, where depth-first growth is 1.0064 against 1.2601 and 1.0396 against 1.5333 under event)


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
    its probe would exceed :data:`PROBE_SENDS` sends, or when the run is out of time.
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
    return one


def deeper(f, depth_first, price, models: tuple[str, ...], chunks: int, deadline=None, pieces: int | None = None):
    """``f`` (a reduction's greedy forest grown breadth-first) or ``depth_first()`` (the same
    packing grown depth-first, Zhao et al., "ForestColl", arXiv 2402.06787, Section 5.2: either
    growth packs the optimum), whichever priced time summed over ``models`` is less, each at the
    pieces the run emits it at (``price(forest, pieces)``, None when it does not verify; module
    doc); ``f`` under ``sync`` alone, when their sends together would exceed
    :data:`RUN_PROBE_SENDS`, when ``depth_first()`` is None, or when the run is out of time.
    ``chunks``: chunks a root sends per piece; ``pieces``: the run's pieces when set (both are
    priced at them)."""
    if models == ("sync",) or not f.transposed or f.shape != "greedy":
        return f
    if deadline is not None and deadline.expired():
        return f
    g = depth_first()
    if g is None or g.shape != "greedy":
        return f
    depths = [pieces or auto_pieces(h.trees, chunks) for h in (f, g)]
    if sum(hops_of(h.trees) * chunks * d for h, d in zip((f, g), depths)) > RUN_PROBE_SENDS:
        return f
    prices = [price(h, d) for h, d in zip((f, g), depths)]
    if prices[1] is None or (prices[0] is not None and sum(prices[0].values()) <= sum(prices[1].values())):
        return f
    return g
