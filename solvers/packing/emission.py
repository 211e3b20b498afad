"""A packed forest as a pipelined schedule: how many pieces, the sends, the header, its price.

Zhao et al., "ForestColl: Throughput-Optimal Collective Communications on Heterogeneous
Network Fabrics" (arXiv 2402.06787), Section 5: each tree carries its share of its root's data,
cut into pipeline pieces sent hop by hop (module doc of :mod:`.producer`). :func:`auto_pieces`
says how many pieces, :func:`emit` lists the sends (:func:`pipelined`: the trees plus the
pipeline rule), :func:`with_header` names the collective the schedule is of, and
:func:`price_pieces` verifies and prices a forest at a depth the way the pipeline does.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...instances import Instance
from ...instances.size import BYTES_PER_TREE_SEND
from ...instances.switch_ops import copying_mask
from ...limits import memory_budget, require
from ...tens import cost_models, verify
from ...tens.pipelined_trees import expand
from ...tens.schedule import Schedule
from . import compact, staggered
from .packed import Forest
from .tree_hops import depth_of, instant_pairs, paired_by_port, refuse_multicast, summing_switches, tree_hops
from .trees import RoutedTree, hops_of

SEND_BUDGET = 16_000_000  # sends the automatic pipeline depth may emit (verifying and pricing stay seconds; about
# 1000 pieces on MI250 x2, k = 15: the in-order event time's pipeline overhead is about 6 / pieces there)
DEPTH_FACTOR = 100  # automatic pieces: this many per hop of the deepest route (fill within about 1 %)
PIECES_FLOOR = 1600  # automatic pieces: at least this many (two-level trees are shallow: 100 per hop is too few
# for the synchronous model's fill, (D - 1) / pieces, to stay within a few tenths of a percent)
PRICE_MODELS = ("sync", "event")  # the models candidates are priced under by default (objective sync+event)


def auto_pieces(trees: list[RoutedTree], chunks_per_root: int, seconds: float = 0.0, alpha: float = 0.0,
                floor: int = PIECES_FLOOR, sends: int | None = None, memory_share: float = 0.5) -> int:
    """Pipeline pieces per chunk: :data:`DEPTH_FACTOR` per hop of the deepest tree (at least
    ``floor``, :data:`PIECES_FLOOR` by default), at most
    what keeps the schedule within ``sends`` (by default :data:`SEND_BUDGET`) sends and ``memory_share``
    of the memory budget at ``BYTES_PER_TREE_SEND`` a send (the trees' sends expanded by the
    pipeline rule, verified and priced from lean columns). With
    a latency ``alpha`` per step and a bandwidth time ``seconds``, the ``P`` (up to that) that
    minimises the sum of the synchronous estimate ``(P + D - 1) (alpha + seconds / P)`` and the
    event estimate ``seconds (1 + (D - 1) / P) + D alpha`` (``D`` hops deep): small messages get
    few pieces, large ones many. ForestColl (Zhao et al., "ForestColl", arXiv 2402.06787,
    Section 5) pipelines its trees at one depth whatever the size."""
    hops = hops_of(trees) * chunks_per_root
    budget = min(SEND_BUDGET if sends is None else sends, int(memory_budget()[0] * memory_share / BYTES_PER_TREE_SEND))
    depth = max(1, depth_of(trees))
    want = max(DEPTH_FACTOR * depth, floor)
    if alpha > 0:
        def estimate(P: int) -> float:
            return (P + depth - 1) * (alpha + seconds / P) + seconds * (1 + (depth - 1) / P) + depth * alpha
        want = min(range(1, want + 1), key=estimate)
    return max(1, min(want, budget // max(1, hops)))


def check_sends(forests: list[Forest], pieces: list[int], chunks_per_root: int, field: str = "--param pieces") -> None:
    """Refuse (:class:`collsynth.limits.TooBig` at ``field``, before the schedule is built) a
    pipeline depth whose sends would exceed the memory budget at ``BYTES_PER_TREE_SEND`` a send
    (the trees' sends are expanded into lean columns, verified and priced from them)."""
    sends = sum(hops_of(f.trees) * p for f, p in zip(forests, pieces)) * chunks_per_root
    require(sends * BYTES_PER_TREE_SEND, field, f"{sends:,} sends of {sum(pieces)} pieces over the packed trees")


def emit(instance: Instance, f: Forest, pieces: int) -> Schedule:
    """The forest as a schedule of its non-combining kind (module doc): chunk ids of the
    collective, the ``q``-th piece of a tree over its ``h``-th hop in step ``q + h + 1``.

    A forest with piece edges for ``pieces`` (``cuts``, :mod:`.fill`) is cut into
    those unequal pieces. This is the order a pipelined program-order executor wants (MSCCL: each link's sends run in
    step order, the ``event-inorder`` cost model): on every link the pieces of all trees and
    all roots alternate round-robin, the ``q``-th piece an own root sends beside the pieces
    relayed ``h`` hops down, so a relay is never held behind a root's whole share. Measured
    against it (``benchmarks/bench_packing.py``, A100 x2): piece-major orders (``m q + h``,
    ``m > 1``) and pieces growing and shrinking geometrically at the ends are slower; the
    overhead over the optimum is about ``c / pieces`` (``c`` 4.7 on A100 x2, 6 on MI250 x2).
    The sends are the expansion of the trees plus that rule (:mod:`.compact`): ForestColl's
    pipelined trees (Zhao et al., "ForestColl", arXiv 2402.06787, Section 5)."""
    trees = pipelined(instance, f, pieces)
    if f.staggered and not f.cuts:  # a rooted forest whose shallower trees take more pieces (.staggered)
        sched = staggered.emit(trees, pieces)
        if sched is not None:
            return sched
    return expand(replace(trees, cuts=np.asarray(f.cuts)) if f.cuts and len(f.cuts) == pieces + 1 else trees)


def pipelined(instance: Instance, f: Forest, pieces: int):
    """The forest as trees plus the pipeline rule (:func:`.compact.pipelined`) at ``pieces``
    equal pieces, its hops as :func:`emit` sends them (:func:`.tree_hops.tree_hops`)."""
    instant = frozenset() if f.transposed else instant_pairs(instance.topology)
    summing = summing_switches(instance)
    multicast = frozenset() if f.transposed else summing
    copy = copying_mask(instance.topology, False)
    apart = paired_by_port(instance, f.transposed)

    def hops(tree: RoutedTree) -> tuple[list[int], list[int], list[int]]:
        got = tree_hops(tree, instant, summing, apart)
        refuse_multicast(got, multicast, copy, instance.collective.kind)
        return got

    return compact.pipelined(instance, f, pieces, hops)


def with_header(sched: Schedule, instance: Instance) -> Schedule:
    """The schedule with the instance's collective kind and chunk count in its header."""
    coll = instance.collective
    meta = {"algorithm": "tree-packing"}
    if coll.combining and instance.topology.switches:  # one arrival per send out of a switch: in the time
        meta["switch_copy"] = False  # reversal the j-th forward of a step carries the j-th arrival (a child's sum)
    return replace(sched, collective=coll.kind, chunks=coll.num_chunks, meta=meta)


def price_pieces(instance: Instance, f: Forest, pieces: int, models: tuple = PRICE_MODELS) -> dict | None:
    """The priced times (seconds) under ``models`` of ``f`` cut into ``pieces``, as the
    pipeline prices it (:mod:`collsynth.tens.cost_models`) after verifying it; None when it
    does not verify (it is then never chosen). The pipelined trees are ForestColl's (Zhao et
    al., arXiv 2402.06787, Section 5); the models are ``docs/cost-models.md``'s."""
    sched = with_header(emit(instance, f, pieces), instance)
    if verify.verify(sched, instance) is not None:
        return None
    return {m: cost_models.price(sched, instance, m).total_s for m in models}


def whole_bytes(sched: Schedule, instance: Instance) -> bool:
    """Whether every piece of ``sched`` holds at least one byte of ``instance``'s chunks, as
    :func:`refuse_small_pieces` asks of the schedule the producer returns (a choice among
    candidates that tie at a tiny message must not pick one the producer then refuses)."""
    return not len(sched) or float(sched.size.min()) * instance.collective.chunk_bytes >= 1.0


def smallest_piece(instance: Instance, f: Forest, pieces: int) -> float:
    """Bytes of the smallest piece :func:`emit` cuts ``f`` into at ``pieces`` equal pieces, or
    at the forest's piece edges where it has them for ``pieces``, read off the trees (a tree
    carries ``[lo, hi)`` of a shard's ``k`` units) without emitting them; a staggered forest's
    shallower trees take a piece more (:mod:`.staggered`)."""
    trees = pipelined(instance, f, pieces)
    share = float((trees.hi - trees.lo).min()) / trees.k if len(trees.lo) else 1.0
    if f.cuts and len(f.cuts) == pieces + 1:
        cut = float(np.diff(np.asarray(f.cuts, dtype=float)).min()) / float(f.cuts[-1])
    else:
        cut = 1.0 / (pieces + 1 if f.staggered else pieces)
    return instance.collective.chunk_bytes * share * cut


def refuse_small_pieces(instance: Instance, piece: float, fewer: str) -> None:
    """Refuse (:class:`~collsynth.InputError` on ``collective.message_bytes``) a message too
    small to split into the trees' shares and pipeline pieces: ``piece``, the smallest piece's
    bytes, under one byte; ``fewer`` names the parameters that would make the pieces larger."""
    if piece < 1.0:
        from ... import InputError

        coll = instance.collective
        raise InputError(instance.source or instance.name,
                         f"collective.message_bytes: {coll.message_bytes:,.0f} B split into the trees' shares and "
                         f"pipeline pieces gives pieces of {piece:.3g} B; expected at least 1 B a piece: more bytes, "
                         f"or fewer {fewer}")
