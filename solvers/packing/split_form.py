"""The capacity split's allreduce kept as trees plus the pipeline rule, verified and priced so.

Where an allreduce's halves are packed each on its share of every link (:mod:`.capacity_split`;
Zhao et al., "ForestColl", arXiv 2402.06787, Sections 4-5: a reduce-scatter and an allgather of
pipelined trees) the two run side by side, the allgather of a piece following its reduction
(:func:`.overlap.overlapped`). Listed as sends, the pair is its trees' hops times the pieces: on
DGX-2 x2 (two deep forests of 21 trees a shard) 8.6 M sends at 200 pieces, verified at 7.2 us a
send. Kept as :class:`~collsynth.tens.pipelined_allreduce.PipelinedAllreduce` (the trees, the
pieces, the allgather's ``delay`` and ``mirror``), it is verified and priced under ``sync`` from
the trees; only the ``event`` price simulates its expansion. ``--param form=explicit`` lists that
expansion (:func:`listed`), the very schedule: the same sends, verdict and prices
(``tests/test_split_form.py``).

Which trees: where the shares are symmetric under box shifts (:func:`.capacity_split.symmetric`)
each half's trees are grown for the first box's roots and moved by the shifts (:func:`translated_pair`,
:mod:`.translated`; Zhao et al., "ForestColl", arXiv 2402.06787, Section 5: any ``k`` trees a root
within the capacities at the cut optimum ``tau`` are a packing): the form keeps those trees and the
shifts, so it is verified from a box's trees and its ``event`` price simulates one link per orbit
(:mod:`collsynth.tens.pipelined_event`), 16 times fewer sends on DGX-2 x2; and the trees, grown
shallowest first, are 7 hops deep where the greedy packing's are 19 (1 GB, alpha 0, ``sync``
1.0436x the bound at 200 pieces -> 1.0139x; 1.0069x at 400, where ``event`` is 1.0035x). Elsewhere,
or with ``--param shape=greedy``, the greedy packing in id order (:data:`SHAPE`).

Which delay: the least valid one (:func:`collsynth.tens.allreduce_overlap.least_delay`) starts
every piece's allgather as soon as its reduction allows, but a step or two later can price lower
under ``sync`` (a two-chassis miniature at 3 pieces: 44.06e6 s one step later against 44.78e6 s),
while under ``event`` the declared link order (:func:`collsynth.tens.pipelined_allreduce.joined`)
holds each allgather send behind the reduce-scatter's sends listed before it, so a later delay
prices no lower there (measured: DGX-2 x2 at 25 pieces 18.122 ms at the least delay, 18.721 one
step later; every miniature alike). :func:`placed` takes, among :data:`LATER` delays from each
placement's least (in place and mirrored), the one of least price summed over the run's models:
all priced under ``sync`` from the trees (:func:`collsynth.tens.allreduce_overlap.price_joint`);
the ``event`` price simulated only for the placement of the smaller least delay at that delay
and for the candidates priced lower than it under ``sync`` (none on DGX-2 x2), so that a later
delay costs a simulation only where it can win.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, replace

import numpy as np

from ...limits import require
from ...tens import allreduce_overlap, cost_models, pipelined_allreduce, pipelined_event
from ...tens.cut_optimum import flow_net, optimum
from ...tens.pipelined_allreduce import PipelinedAllreduce
from ...tens.pipelined_trees import images
from . import translated
from .emission import refuse_small_pieces, with_header
from .overlap_sizes import joint_sized
from .packed import Forest
from .trees import RoutedTree

ITEM_BYTES = 256  # a tree's piece while the allgather is placed and verified (a few int64 columns and their sorts)
SHAPE = "greedy"  # the shares' forests: the greedy packing in id order, without the root-order search (DGX-2 x2, 1 GB:
# no two-level trees fit either share, and the search, 17 s of CPU verifying and pricing two orders' explicit sends,
# kept id order: the pair prices the same, 18.122 ms event at 25 pieces)
MOST_TRANSLATED = 256  # trees a shard, at most, grown for a share by translation (DGX-2 x2: 42 at the symmetric
# shares' optimum; a share's optimum k grows with its shares' denominators)
LATER = 3  # delays after each placement's least valid one priced under sync (miniatures: the least at most 1 later)


@dataclass(frozen=True)
class Priced:
    """The prices a producer computed of a schedule kept as trees (model name -> Cost): handed
    to the pipeline as :attr:`collsynth.solvers.producers.Outcome.prices`, which it takes for
    the trees once they verify there."""

    costs: dict


def overlapped(instance, pair, pieces, pipelined, models: tuple = ("sync",)) -> PipelinedAllreduce:
    """The pair of forests (reduce-scatter, allgather; :func:`.overlap.aligned`) at ``pieces``
    each as the overlapped form at the delay and placement :func:`placed` takes under
    ``models``; ``pipelined(instance, forest, pieces)`` gives a forest's trees
    (:func:`.producer.pipelined`), its own piece edges where it has them for ``pieces`` (as
    :func:`.producer.emit` cuts it)."""
    return placed(*_halves(instance, pair, pieces, pipelined), instance, models)[0]


def listed(instance, pair, pieces, pipelined, models: tuple = ("sync",)):
    """:func:`overlapped`'s expansion with the header the producer gives explicit sends: what
    ``--param form=explicit`` emits for the split pair."""
    return with_header(pipelined_allreduce.expand(overlapped(instance, pair, pieces, pipelined, models)), instance)


def splits_first(instance, halves, options, alpha: float) -> bool:
    """Whether an allreduce's capacity split (:func:`.capacity_split.split_instances`, its
    shares symmetric) is expected to win its joint choice, so that it is packed and priced
    first and the halves' own piece-size programs (:func:`.pieces_choice.filled`) are not run:
    at alpha 0, with neither ``pieces`` nor ``trees`` asked and the split kept as trees, where
    its pipelined limit is the allreduce's partition bound
    (:func:`collsynth.tens.bounds.partitions.partition_bound`, within a part in a million).
    Every allreduce schedule takes at least that bound, so in the pipelined limit no pair of
    ``halves`` (each half's forest on the whole links) runs faster than the split; they are
    still priced after it where they fit the time left (:func:`.overlap.joint`). On DGX-2 x2
    (1 GB) the split's limit is the bound, 14.762 ms at 1e9 bytes; on A100 x2 and DGX-H100 x2
    there is no split (the halves in sequence meet the bound). An allreduce as a reduce-scatter
    and an allgather run side by side: Zhao et al., "ForestColl", arXiv 2402.06787, Section 4."""
    from ...tens.bounds.demand import arcs_of
    from ...tens.bounds.partitions import partition_bound
    from ...tens.bounds.supply import SyncSupply
    from . import capacity_split
    from .packed import optimum_seconds

    p = options.params
    if alpha > 0 or p.get("pieces") or p.get("trees") is not None or p.get("form") == "explicit" \
            or p.get("shape") == "greedy" or instance.collective.kind != "allreduce":
        return False
    halves_s = sum(optimum_seconds(instance, f) for f in halves)
    if _FIRST[:2] == [instance, halves_s]:  # asked again by the joint choice: the split's program not solved again
        return _FIRST[2]
    got = capacity_split.split_instances(instance, halves_s)
    bound = None if got is None else \
        partition_bound(instance, SyncSupply(arcs_of(instance.topology)), model="sync").value
    _FIRST[:] = [instance, halves_s,
                 bound is not None and got[1].seconds(instance.collective.message_bytes) <= bound * (1 + 1e-6)]
    return _FIRST[2]


_FIRST: list = [None, None, False]  # the last instance splits_first answered for, its halves' seconds, the answer


def translated_pair(parts, halves, deadline=None) -> tuple | None:
    """The allreduce's halves (``halves``: each half's forest on the whole topology, for its
    kind and direction) grown on their shares (``parts``: each half's instance on its share,
    :func:`.capacity_split.split_instances`) for the first box's roots and moved by the box
    shifts (:func:`.translated.translated`, at each share's cut optimum ``(k, tau)``; module
    doc), as forests kept also in that form (:attr:`.packed.Forest.compact`); None where a
    share has no box shift, its optimum has more than :data:`MOST_TRANSLATED` trees a shard,
    or a tree finds no route."""
    out = []
    for part, f in zip(parts, halves):
        nodes = part.collective.nodes
        t0 = time.perf_counter()
        net = flow_net(part.topology, nodes, [1] * len(nodes), transpose=f.transposed)
        opt = optimum(net)
        if opt.k > MOST_TRANSLATED:
            return None
        t1 = time.perf_counter()
        trees = translated.translated(part, f.kind, f.transposed, opt.k, opt.tau, deadline)
        if trees is None or trees.shift is None:
            return None
        out.append(Forest(f.kind, f.transposed, opt, opt.k, opt.tau, net.unit_bw,
                          routed(trees, part.topology.switches), opt.flows,
                          {"optimum_s": t1 - t0, "packing_s": time.perf_counter() - t1}, shape="translated",
                          on_share=True, compact=trees))
    return tuple(out)


def routed(trees, switches) -> list[RoutedTree]:
    """Every tree ``trees`` (:class:`~collsynth.tens.pipelined_trees.PipelinedTrees`) stands
    for, listed or moved by a product of its shifts, as a routed tree: its hops in order, a
    route running from a node of the tree through ``switches`` to the next participant (as
    :mod:`.translated` lists them).

    >>> import numpy as np
    >>> from collsynth.tens.pipelined_trees import PipelinedTrees
    >>> t = PipelinedTrees("allgather", 2, 2, 1, 1, 1, np.array([0]), np.array([0]), np.array([1]), np.array([0, 2]),
    ...                    np.array([0, 2]), np.array([2, 1]), np.array([0, 1]), shift=np.array([[1, 0, 2]]),
    ...                    orders=(2,))
    >>> [(r.root, r.routes) for r in routed(t, {2})]
    [(0, ((0, 2, 1),)), (1, ((1, 2, 0),))]
    """
    listed = []
    for t in range(len(trees.root)):
        routes: list = []
        for a, b in zip(trees.src[trees.ptr[t]:trees.ptr[t + 1]].tolist(),
                        trees.dst[trees.ptr[t]:trees.ptr[t + 1]].tolist()):
            if routes and a in switches and routes[-1][-1] == a:
                routes[-1].append(b)
            else:
                routes.append([a, b])
        listed.append(routes)
    n = int(max(trees.nodes, trees.shift.shape[1] if trees.shift is not None else 0))
    moved = images(np.arange(n), trees.shift, trees.orders) if trees.shift is not None else np.arange(n)[None, :]
    return [RoutedTree(int(perm[trees.root[t]]), int(trees.lo[t]), int(trees.hi[t]),
                       tuple(tuple(int(perm[x]) for x in r) for r in routes))
            for perm in moved for t, routes in enumerate(listed)]


def priced_sends(instance, f, pieces: int) -> int:
    """The sends a half's forest ``f`` at ``pieces`` costs to price as the split's form: its
    trees' hops per piece and chunk (explicit sends) or, kept with box shifts, the sends its
    ``event`` price simulates (:func:`collsynth.tens.pipelined_event.sends_priced`)."""
    if f.compact is None:
        return sum(sum(len(r) - 1 for r in t.routes) for t in f.trees) * pieces * instance.collective.chunks_per_node
    return pipelined_event.sends_priced(replace(f.compact, pieces=pieces), instance)


def _halves(instance, pair, pieces, pipelined) -> list:
    """Each forest of the pair as trees at its pieces (:func:`overlapped`): its own form where
    it has one (:attr:`.packed.Forest.compact`)."""
    halves = []
    for f, p in zip(pair, pieces):
        trees = replace(f.compact, pieces=p) if getattr(f, "compact", None) is not None else pipelined(instance, f, p)
        cuts = getattr(f, "cuts", None)
        halves.append(replace(trees, cuts=np.asarray(cuts)) if cuts and len(cuts) == p + 1 else trees)
    return halves


def candidates(rs, ag) -> list[PipelinedAllreduce]:
    """The overlapped forms :func:`placed` compares: per placement (in place, then mirrored)
    with a least valid delay, that delay and the :data:`LATER` after it (up to the halves in
    turn); the placement of the smaller least delay first (in place on a tie)."""
    last = allreduce_overlap.last_step(rs)
    least = {}
    for mirror in (False, True):
        try:
            least[mirror] = allreduce_overlap.least_delay(rs, ag, mirror)
        except ValueError:
            continue
    out = []
    for mirror in sorted(least, key=lambda m: (least[m], m)):
        d = least[mirror]
        out += [PipelinedAllreduce(rs, ag, delay, mirror) for delay in range(d, max(d, min(last, d + LATER)) + 1)]
    return out


def placed(rs, ag, instance, models: tuple, simulate=None, deadline=None,
           unequal: bool = True) -> tuple[PipelinedAllreduce, dict]:
    """``(form, costs)``: the candidate (:func:`candidates`, and :func:`sized` first where it
    prices lower under ``sync``) of least price summed over ``models`` (module doc; the first
    on a tie) and its prices (model name -> Cost; ``sync`` from the trees, the others, ``event``
    or ``event-inorder``, simulated on the expansion as the explicit sends' pricing does,
    :func:`collsynth.tens.pipelined_event.price`). Those are simulated for the first candidate
    and for those priced lower under ``sync``; where the first's expansion does not fit the
    memory budget (``simulate`` false, or :func:`collsynth.tens.pipelined_event.sends_priced`
    says so) none is, and ``sync`` alone chooses. Raises ValueError where no placement has a
    least valid delay. ``unequal`` false: equal pieces only."""
    forms = candidates(rs, ag)
    if not forms:
        raise ValueError("no placement of the allgather has a least valid delay")
    joint_costs = allreduce_overlap.joint_costs(rs, ag, instance)
    sync = [allreduce_overlap.price_joint(f.reduce_scatter, f.allgather, f.delay, joint_costs) for f in forms]
    cut = sized(rs, ag, instance, joint_costs, deadline) if unequal else None
    if cut is not None:
        priced = allreduce_overlap.price_joint(cut.reduce_scatter, cut.allgather, cut.delay, joint_costs)
        if priced.total_s < sync[0].total_s:
            forms, sync = [cut, *forms], [priced, *sync]
    others = [m for m in models if m != "sync"]
    if simulate is None:
        simulate = pipelined_event.sends_priced(forms[0], instance) < sys.maxsize
    if not others or not simulate:
        i = int(np.argmin([s.total_s for s in sync])) if "sync" in models or not others else 0
        return forms[i], {"sync": sync[i]}
    costs = []
    for f, s in zip(forms, sync):
        if costs and s.total_s >= sync[0].total_s:
            costs.append(None)  # cannot win (module doc): not simulated
            continue
        costs.append({"sync": s, **{m: pipelined_event.price(f, instance, as_explicit=True, model=m) for m in others}})
    i = min((j for j, c in enumerate(costs) if c is not None), key=lambda j: sum(costs[j][m].total_s for m in models))
    return forms[i], costs[i]


def deeper(instance, pair, pieces: list[int], pipelined, most: int) -> list[int]:
    """The pieces the split pair is priced from (:func:`.overlap.joint` cuts them where they
    would not fit the time left): ``pieces`` where the pair's least ``sync`` price there (the
    candidates of :func:`placed`) is within :data:`.fill.TARGET` of its pipelined limit (the
    slower half's cut optimum on its share), else the pieces at which the fill, falling as one
    over the pieces (:mod:`.fill`), would reach it, at most ``most``. DGX-2 x2 (translated
    trees, 1 GB, alpha 0): 200 pieces 1.0089x, so about 356."""
    from .fill import TARGET
    from .packed import optimum_seconds

    limit = max(optimum_seconds(instance, f) for f in pair)
    halves = _halves(instance, pair, pieces, pipelined)
    forms = candidates(*halves)
    if not forms or limit <= 0 or len(set(pieces)) != 1:
        return list(pieces)
    costs = allreduce_overlap.joint_costs(*halves, instance)
    unequal = sized(*halves, instance, costs)
    got = min(allreduce_overlap.price_joint(f.reduce_scatter, f.allgather, f.delay, costs).total_s
              for f in ([unequal] if unequal is not None else []) + forms[:1])
    if got <= limit * (1 + TARGET):
        return list(pieces)
    return [min(most, max(pieces[0], math.ceil(pieces[0] * (got / limit - 1) / TARGET)))] * len(pieces)


def sized(rs, ag, instance, joint_costs=None, deadline=None) -> PipelinedAllreduce | None:
    """The halves at their pieces cut into one sequence of unequal sizes of least ``sync``
    price in the order the pieces run (:func:`.overlap_sizes.joint_sized`, a linear program:
    small pieces where the reduce-scatter fills and the allgather drains, the allgather's
    pieces the reduce-scatter's mirrored), at the least valid delay, mirrored; None where the
    halves differ in pieces or have more than one chunk a root, or the program gives none (its
    size, or ``deadline``). On DGX-2 x2's split (the translated trees, 1 GB, alpha 0) at 200
    pieces ``sync`` 1.0139x -> 1.0089x the bound, ``event`` within 0.05 % of equal pieces."""
    if rs.chunks_per_root != 1 or ag.chunks_per_root != 1 or rs.pieces != ag.pieces:
        return None
    costs = allreduce_overlap.joint_costs(rs, ag, instance) if joint_costs is None else joint_costs
    got = joint_sized(rs, ag, instance, rs.pieces, costs, deadline)
    if got is None:
        return None
    try:
        return PipelinedAllreduce(*got, allreduce_overlap.least_delay(*got, True), True)
    except ValueError:
        return None


def price(instance, pair, pieces, models: tuple, kept, pipelined) -> dict | None:
    """The times under ``models`` of the split pair at ``pieces`` in the overlapped form
    (:func:`placed`), verified first (None when it does not verify or a piece is under a
    byte: never chosen): ``sync`` from the trees, the others on its expansion; offered to
    ``kept`` (:class:`.incumbent.Kept`) with those prices (:class:`Priced`)."""
    t = time.perf_counter()
    halves = _halves(instance, pair, pieces, pipelined)
    if _smallest_piece(halves, instance) < 1.0:
        return None
    try:
        f, costs = placed(*halves, instance, models, simulate=True)
    except ValueError:
        return None
    if pipelined_allreduce.verify(f, instance) is not None:
        return None
    got = {m: costs[m].total_s for m in models}
    if kept is not None:
        kept.offer(pair, pieces, f, got, pipelined_event.sends_priced(f, instance), time.perf_counter() - t, 0.0,
                   Priced({m: c for m, c in costs.items() if m != "sync"}))
    return got


def returned(instance, pair, pieces, pipelined, models: tuple = ("sync",), deadline=None) -> tuple:
    """``(form, prices)``: the split pair at ``pieces`` as the run returns it (:func:`placed`
    under ``models``, the ``event`` price simulated only where the expansion fits the time
    ``deadline`` leaves at the model's rate, as the pipeline would price it, else the delay
    chosen under ``sync``) and the prices it computed besides ``sync`` (:class:`Priced`, taken
    by the pipeline once the form verifies); a piece under a byte is refused
    (:class:`~collsynth.InputError` on ``collective.message_bytes``), as the explicit sends'
    are, and so are pieces whose placing would not fit the memory budget
    (:func:`collsynth.limits.require`, :data:`ITEM_BYTES` a tree's piece)."""
    halves = _halves(instance, pair, pieces, pipelined)
    items = sum(len(h.root) * h.chunks_per_root * h.pieces for h in halves)
    require(items * ITEM_BYTES, "--param pieces", f"{items:,} tree pieces placed and verified")
    refuse_small_pieces(instance, _smallest_piece(halves, instance), "pieces (--param pieces)")
    left = None if deadline is None else deadline.left()
    sends = pipelined_event.sends_priced(PipelinedAllreduce(*halves), instance)
    simulate = sends < sys.maxsize and (left is None or sends <= cost_models.MODELS["event"].rate * left)
    f, costs = placed(*halves, instance, models, simulate, deadline)
    return f, Priced({m: c for m, c in costs.items() if m != "sync"})


def _smallest_piece(halves, instance) -> float:
    """Bytes of the smallest piece either half (trees) sends."""
    chunk = instance.collective.chunk_bytes
    out = float("inf")
    for h in halves:
        e = h.edges
        widths = (h.hi - h.lo).astype(np.float64)
        if len(widths):
            out = min(out, float(widths.min()) / h.k * float(np.diff(e).min()) / float(e[-1]) * chunk)
    return out


def outcome_fields(verdict) -> dict:
    """The :class:`~collsynth.solvers.producers.Outcome` fields a kept verdict fills: the
    producer's prices of trees (:class:`Priced`), else the certified verdict of explicit sends."""
    return {"prices": dict(verdict.costs)} if isinstance(verdict, Priced) else {"certified": verdict}
