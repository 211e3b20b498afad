"""The ``event`` price of trees plus a pipeline rule moved by box shifts, one link per orbit.

The ``event`` model (:func:`collsynth.tens.cost.price_event`: FIFO links, store and forward,
no step barriers) serves the hops waiting on a link in the order of their ready time, then of
their position in the schedule. Let ``G`` be a group of automorphisms of the topology (the box
shifts of :mod:`collsynth.instances.box_shift`, or a subgroup) and a schedule the trees of
:class:`~collsynth.tens.pipelined_trees.PipelinedTrees` moved by ``G``: every send ``x s`` of
a moved tree is the image of a listed send ``s`` by ``x``. Suppose

1. the sends are listed, within a step, by a key of the listed send and only then by the
   product that moved it (:func:`collsynth.tens.pipelined_trees.moved_sends`), and
2. ``G`` acts freely on the links the trees use: no product but the identity keeps a used
   link (every link orbit has ``|G|`` links).

Then the simulation is moved onto itself by every ``g`` of ``G``: ``g`` maps links to links of
the same bandwidth and latency, a send's data dependencies to its image's (a moved tree's
hops and arrivals are its original's, each tree carrying its own chunks), and two sends
waiting on one link to two sends in the same order on the image link (they are images of
distinct listed sends, by 2: two images of one listed send on one link would differ by a
product keeping it; so their order is the listed sends', by 1). The simulation's times solve
a system ``g`` maps onto itself, and its solution is unique (each time is the later of the
hop's data and its link's previous hop, which come earlier or earlier in the order), so
``t(g x s) = t(x s)``: every image of a send leaves and arrives when it does. So one send per
orbit, the listed sends, served on one link per orbit (an orbit's least pair,
:func:`collsynth.tens.pipelined_trees.link_orbits`), meet on that link exactly the hops (the
images carried there, one per listed send whose link is in the orbit, by 2) in exactly the
order of the full simulation, and get its times: the price of ``|G|`` times fewer sends.

Where a product ``h != 1`` keeps a used link ``l`` (a spine's uplink, moved onto itself by a
shift of the boxes below its leaf), 2 fails and no quotient holds: a listed send ``s`` on
``l`` and ``h s`` are both served on ``l``, with equal ready times if the times were symmetric,
so one waits for the other and their arrivals differ, which the symmetry forbids. There the
subgroup of the last shifts that acts freely (:func:`free_from`; the shifts of which a power
keeps a used link put first, :func:`collsynth.tens.pipelined_trees.keeping_first`) is taken and
the trees moved by the first ones listed: sends within a step are ordered by listed send and then by the
product, the first shifts' powers most significant (:func:`collsynth.tens.pipelined_trees.images`),
so two images of one listed send on one link are ordered by their first shifts' powers, which
the last shifts leave alone, and the argument above holds for the subgroup with the trees
moved by the first shifts as the listed sends.

A reduce-scatter is the time reversal of its trees, every send keyed by the rotation of the
listed send it is an image of (:func:`collsynth.tens.pipelined_trees.owners_ahead`); an
allreduce its reduce-scatter's sends and then its allgather's (the allgather's first sends wait
for the reduce-scatter's arrivals at their root, the owner of the same listed block), both
halves with the same shifts and listed roots, so the same argument covers them (an allgather
shifted by a ``delay`` or mirrored, :mod:`collsynth.tens.allreduce_overlap`, is shifted or
mirrored alike in every image, and the link order it then declares,
:func:`collsynth.tens.pipelined_allreduce.joined`, waits on the send before on each link as the
reduce-scatter's own declaration does).
``tests/test_pipelined_event.py`` checks the price against the explicit sends' on small Clos
fabrics.
"""

from __future__ import annotations

import math
import sys
from dataclasses import replace

import numpy as np

from ..instances.size import BYTES_PER_SEND
from ..limits import memory_budget
from .cost import Cost, price_event
from .dependencies import dependency_pairs_of, pair_budget
from .pipelined_allreduce import PipelinedAllreduce, joined
from .pipelined_trees import PipelinedTrees, image_orbits, keeping_first, link_images, link_orbits, moved_sends
from .plan import PricingPlan

KINDS = ("allgather", "reduce_scatter", "allreduce")  # the forms priced here (checked against their explicit sends)


def free_from(f: PipelinedTrees, la) -> int:
    """The fewest first shifts of ``f`` to list so that the group of the others acts freely
    on the links ``f``'s trees use (every used link's orbit under it has the group's order of
    links; module doc, condition 2): ``len(f.orders)`` when none does, 0 without shifts."""
    if f.shift is None:
        return 0
    src, dst = (f.dst, f.src) if f.reversed else (f.src, f.dst)
    return free_count(la, f.shift, f.orders, la.lookup(src, dst))


def free_count(la, shift: np.ndarray, orders, used: np.ndarray) -> int:
    """The fewest first of the commuting ``shift`` (of ``orders``) to list so that the group of
    the others acts freely on the link pairs ``used`` (indices into ``la``): every used pair's
    orbit under it has the group's order of pairs; ``len(orders)`` when none does (the shifts'
    action on the pairs computed once, :func:`collsynth.tens.pipelined_trees.link_images`)."""
    images = link_images(la, shift)
    for m in range(len(orders) + 1):
        group = image_orbits(images[m:], orders[m:], len(la))
        size = np.bincount(group, minlength=len(la))[group[used]]
        if (size == math.prod(orders[m:])).all():
            return m
    return len(orders)


def sends_priced(f: PipelinedTrees | PipelinedAllreduce, instance) -> int:
    """How many sends :func:`price` simulates for ``f`` on ``instance`` (its explicit sends
    over the order of the group that acts freely), so a caller can size the work first;
    ``sys.maxsize`` where they would not fit the memory budget (:func:`collsynth.limits.memory_budget`):
    the trees without shifts of DGX-2 x2's split pair at 1,600 pieces are 67.5 M sends)."""
    halves, m = _quotient(f, instance.topology.link_arrays)
    sends = sum(h.sends // (math.prod(h.orders[m:]) if h.shift is not None else 1) for h in halves)
    return sends if sends * BYTES_PER_SEND <= memory_budget()[0] else sys.maxsize


def _quotient(f: PipelinedTrees | PipelinedAllreduce, la) -> tuple[list[PipelinedTrees], int]:
    """``f``'s forests with the shifts keeping a used link first (:func:`keeping_first`) and how
    many first shifts :func:`price` lists: :func:`free_from`'s most over the forests, or every
    shift where an allreduce's halves have different shifts or listed roots (the allgather's
    trees of a listed root wait for the reduce-scatter's arrivals there)."""
    halves = [keeping_first(h) for h in (f.halves if isinstance(f, PipelinedAllreduce) else (f,))]
    m = max(free_from(h, la) for h in halves)
    first = halves[0]
    for h in halves[1:]:
        if (h.shift is None) != (first.shift is None) or h.orders != first.orders or not (
                first.shift is None or np.array_equal(h.shift, first.shift)) or not np.array_equal(
                np.unique(h.root), np.unique(first.root)):
            m = len(first.orders)
    return halves, m


# candidates the simulated sends' exact pairs may look at: a quotient's sends are few, so their pairs fit
# where the explicit sends' would not (DGX H100 x512 allreduce, 1 GiB, 47/47 pieces: exact, 5-8 s, 875 MiB)
ORBIT_PAIR_BUDGET = 100_000_000


def price(f: PipelinedTrees | PipelinedAllreduce, instance, as_explicit: bool = False, model: str = "event") -> Cost:
    """The ``event`` price (``model``: or the ``event-inorder`` one) of ``f``'s explicit sends (:func:`collsynth.tens.pipelined_trees.expand`
    or :func:`collsynth.tens.pipelined_allreduce.expand`) on ``instance``, simulated on the sends
    of the trees moved by the first shifts only, each link served as its orbit's representative
    under the last shifts, which act freely on the used links (module doc). ``f`` must be
    verified (:func:`collsynth.tens.compact_forms.form_of`'s ``verify``). Pieces wait for exact
    dependency pairs where the simulated sends' candidates fit their budget, the model's own
    time, though the explicit sends' pricing would fall back to group prefixes past its budget
    (``as_explicit``: where it would; ``extra["exact_pairs"]`` says which). Trees without
    shifts (the halves of a capacity split, :mod:`collsynth.solvers.packing.split_form`) are
    their expansion, priced as it is. Under ``event-inorder`` (each link in step order, then
    position: :mod:`collsynth.tens.cost_models.event_inorder`) the module doc's argument holds
    with the order on a link by step and position in place of ready time and position: two
    images on one link are images of distinct listed sends (condition 2), listed within a step
    in their listed sends' order (condition 1), so every product keeps their order."""
    if model not in ("event", "event-inorder"):
        raise ValueError(f"priced per link orbit: event or event-inorder, not {model}")
    la = instance.topology.link_arrays
    halves, m = _quotient(f, la)
    shift, orders = halves[0].shift, halves[0].orders
    parts = [moved_sends(h, m) for h in halves]
    sched = _header(parts[0] if len(parts) == 1 else joined(*parts, f.delay, f.mirror), instance)
    group, copies = None, 1
    if shift is not None and m < len(orders):
        group, _ = link_orbits(la, shift[m:], orders[m:])
        copies = math.prod(orders[m:])
    plan, exact = _plan(sched, instance, copies, as_explicit)
    if model == "event-inorder":
        from .cost_models.event_inorder import price_in_order

        cost = price_in_order(sched, instance, plan=plan, links_as=group)
    else:
        cost = price_event(sched, instance, plan=plan, links_as=group)
    return replace(cost, extra={**cost.extra, "simulated_sends": len(sched), "listed_shifts": m, "exact_pairs": exact})


def _plan(sched, instance, copies: int, as_explicit: bool) -> tuple[PricingPlan, bool]:
    """The pricing plan of the simulated sends and whether its dependencies are exact pairs
    (pieces; else group prefixes, :func:`collsynth.tens.cost.price_event`): looked for within the
    budget of the simulated sends (:data:`ORBIT_PAIR_BUDGET`, or
    :func:`collsynth.tens.dependencies.pair_budget` where that is more) or, with ``as_explicit``, within the explicit sends' budget over ``copies``: each send's candidates
    are its images', so the simulation then tracks dependencies exactly where the explicit
    sends' pricing does and by prefixes where that one does."""
    plan = PricingPlan(sched, instance)
    if plan.whole:
        return plan, True
    budget = pair_budget(len(sched) * copies) // copies if as_explicit else max(pair_budget(len(sched)), ORBIT_PAIR_BUDGET)
    return plan, plan.part("pairs", lambda p: dependency_pairs_of(p.view, p.groups, budget)) is not None


def _header(sched, instance):
    """``sched`` with the header :func:`collsynth.solvers.packing.producer._with_header` gives an
    expansion (the instance's kind and chunks; one arrival per send out of a switch where the
    collective combines), so the simulation reads the switches as the explicit sends' does."""
    coll = instance.collective
    meta = {"algorithm": "tree-packing"}
    if coll.combining and instance.topology.switches:
        meta["switch_copy"] = False
    return replace(sched, collective=coll.kind, chunks=coll.num_chunks, meta=meta)
