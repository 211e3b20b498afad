"""Choosing the root order of the greedy packing by the FIFO event time it prices at.

Lovász's growth (:func:`.trees.pack`; Zhao et al., "ForestColl", arXiv 2402.06787, Section
5.2) keeps the cut condition whatever order the roots' trees grow in, so every order gives
valid trees at the same optimum; the order decides which trees take the arcs near the roots
and which are left deep. Under the event model's first-come-first-served links
(:func:`collsynth.tens.cost.price_event`) the shape matters: on the 4x4 torus with one slow
link the trees grown in id order are 1.022x the bound, in reverse order 1.0003x; on one
MI250 box orders range from 1.11x to 1.41x (``benchmarks/bench_packing.py``; the sync and
in-order times are alike for all). Where two-level trees (:mod:`.twolevel`) do not fit, a few
orders (id order, reverse, :data:`SEEDS` seeded shuffles) are packed, each emitted at
:data:`SELECT_PIECES` pieces, verified and priced under ``event``; the cheapest is kept unless
its ``sync`` or ``event-inorder`` time is above id order's by more than :data:`NO_WORSE`.
When id order's packing ran more than :data:`ALL_FLOWS` max flows (the flow-tested growth of
two MI250 boxes takes seconds per order) only id order and its reverse are tried, and none
beyond :data:`SOME_FLOWS`, when it was packed by translation, beyond :data:`MAX_ROOTS` roots,
or when the collective combines (the counts, not clocks, decide: the choice is reproducible).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

SEEDS = (1, 2, 3, 4, 5, 6)  # seeded shuffles of the roots tried besides id order and its reverse
SELECT_PIECES = 200  # pieces per chunk the candidates are priced at (the FIFO loss, not the fill, is compared)
NO_WORSE = 1.002  # a candidate's sync and in-order times may exceed id order's by this factor at most
ALL_FLOWS = 5_000  # every candidate order is tried when id order's packing ran at most this many max flows
SOME_FLOWS = 50_000  # id order and its reverse only up to this (two MI250 boxes: 24 k flows, 12 s per packing,
# 1.33x -> 1.22x); none beyond, nor when id order was packed by translation (no flows: identical boxes, whose
# translated trees priced best on DGX-H100 x2, 1.002x against 1.14-1.35x for the flow-packed orders)
MAX_ROOTS = 64  # nor with more roots (the flow-tested growth of each order grows with their square)


@dataclass
class Tried:
    """A candidate order, its event, sync and in-order times at the selection pieces (s)."""

    name: str
    event_s: float
    sync_s: float | None = None
    inorder_s: float | None = None

    def as_dict(self) -> dict:
        """The candidate as plain data for a row's ``extra``."""
        return {"order": self.name, "event_s": self.event_s, "sync_s": self.sync_s, "inorder_s": self.inorder_s}


def candidates(roots: list[int]) -> dict[str, list[int]]:
    """The orders tried: by id, reversed, and one seeded shuffle per :data:`SEEDS` entry.

    >>> list(candidates([0, 1, 2]))[:2]
    ['id', 'reverse']
    """
    out = {"id": sorted(roots), "reverse": sorted(roots, reverse=True)}
    for seed in SEEDS:
        order = sorted(roots)
        random.Random(seed).shuffle(order)
        out[f"shuffle {seed}"] = order
    return out


def _price(instance, schedule, model: str) -> float:
    from ...tens import cost_models

    return cost_models.price(schedule, instance, model).total_s


def to_try(roots: list[int], first_flows: int) -> dict[str, list[int]]:
    """The orders to pack (module doc): every one of :func:`candidates`, id order and its
    reverse only when id order's packing ran more than :data:`ALL_FLOWS` max flows, none when
    it ran none (packed by translation) or more than :data:`SOME_FLOWS`, or with fewer than
    two or more than :data:`MAX_ROOTS` roots.

    >>> list(to_try([0, 1, 2], 10_000)), to_try([0, 1, 2], 0)
    (['id', 'reverse'], {})
    """
    if not 0 < first_flows <= SOME_FLOWS or not 2 <= len(roots) <= MAX_ROOTS:
        return {}
    names = candidates(roots)
    return {name: names[name] for name in ("id", "reverse")} if first_flows > ALL_FLOWS else names


def choose(instance, finished: dict, deadline=None) -> tuple:
    """``(trees, tried, name)``: of the finished candidates ``finished`` (``{order name:
    (trees, schedule at the selection pieces)}``, id order's first; every one packed and
    emitted before), the trees of the cheapest under ``event`` whose ``sync`` and
    ``event-inorder`` times are within :data:`NO_WORSE` of id order's, else id order's. A
    candidate whose schedule does not verify is dropped; when ``event`` cannot price the
    instance (instant switch hops), id order's trees are kept with nothing tried. ``deadline``
    (:class:`collsynth.limits.Deadline`) is checked before each candidate is priced."""
    from ... import InputError
    from ...tens.ten import NotSupported
    from ...tens.verify import verify

    first = finished["id"][0]
    tried, kept = [], {}
    for name, (trees, sched) in finished.items():
        if deadline is not None:
            deadline.check("root order search", f"pricing order {name}")
        if verify(sched, instance) is not None:
            continue
        try:
            event_s = _price(instance, sched, "event")
        except (NotSupported, InputError):  # no event time for this instance (instant switch hops)
            return first, [], "id"
        kept[name] = (trees, sched)
        tried.append(Tried(name, event_s))
    base = next((t for t in tried if t.name == "id"), None)
    if base is None:
        return first, tried, "id"
    base.sync_s, base.inorder_s = (_price(instance, kept["id"][1], m) for m in ("sync", "event-inorder"))
    for t in sorted(tried, key=lambda t: t.event_s):
        if t.name == "id" or t.event_s >= base.event_s:
            break
        t.sync_s, t.inorder_s = (_price(instance, kept[t.name][1], m) for m in ("sync", "event-inorder"))
        if t.sync_s <= base.sync_s * NO_WORSE and t.inorder_s <= base.inorder_s * NO_WORSE:
            return kept[t.name][0], tried, t.name
    return first, tried, "id"
