"""Reduction forests for links that serve messages first come, first served (the ``event`` model).

A reduce-scatter built as the time reversal of a pipelined allgather forest (Zhao et al.,
"ForestColl", arXiv 2402.06787, Section 4) sends every GPU's own input at once: under the
``event`` model each link is a FIFO, so a GPU's own data, ready at time 0, leaves before any
partial sum it relays, which is ready only when its children's pieces have arrived
(``docs/cost-models.md``). Where one link carries both (A100 x2 at the optimum's 13 trees a
shard: each NIC up-link carries 2 units of its GPU's own data and 13 of relayed sums), the
relayed stream starves and the whole reduction waits: 2.38x the bound under ``event`` against
1.0025x under ``sync`` and ``event-inorder`` (1 GB, alpha 0). One packed tree a shard (the
forest the latency choice already offers) packs those links purely (own data or relayed sums,
never both) at 7/6 of a shard's time against the optimum's 15/13 there (1.011x): 1.0135x under
``event`` at 800 pieces. Which is better depends on the system (reversed rings, whose every
GPU relays, run at the bound under FIFO), so :func:`choose` measures: both forests emitted at
:data:`PROBE_PIECES` pieces, verified and priced under the objective's models, the least
summed time kept. Measured by ``benchmarks/bench_allreduce.py``.
"""

from __future__ import annotations

from .trees import hops_of

PROBE_PIECES = 200  # pipeline depth the two forests are compared at (about 1 % of a priced time)
PROBE_SENDS = 500_000  # most sends of the two probes together (a second or two of pricing each)


def choose(f, one_tree, price, models: tuple[str, ...], chunks: int, deadline=None):
    """``f`` (a transposed forest at the optimum) or ``one_tree()`` (the one packed tree a shard
    forest of the same collective), whichever priced time summed over ``models`` is less at
    :data:`PROBE_PIECES` pieces (``price(forest)``: the times under ``models`` after verifying,
    None when it does not verify, so an unverified one is never chosen); ``f`` under ``sync``
    alone (its packing is the optimum), when its probe would exceed :data:`PROBE_SENDS` sends,
    or when the run is out of time. ``chunks``: chunks a root sends per piece (the reduction
    alone is probed, an allreduce's first half included)."""
    if models == ("sync",) or not f.transposed or f.k == 1:
        return f
    if hops_of(f.trees) * PROBE_PIECES * chunks > PROBE_SENDS // 2:
        return f
    if deadline is not None and deadline.expired():
        return f
    one = one_tree()
    prices = [price(g) for g in (f, one)]
    if prices[1] is None or (prices[0] is not None and sum(prices[0].values()) <= sum(prices[1].values())):
        return f
    return one
