"""Allreduce kept as two pipelined forests: its reduce-scatter, then its allgather.

Zhao et al. ("ForestColl: Throughput-Optimal Collective Communications on Heterogeneous
Network Fabrics", arXiv 2402.06787, Section 4) build allreduce as a reduce-scatter followed
by an allgather, each a packing of spanning trees; at thousands of GPUs each half is kept as
trees plus a pipeline rule (:class:`~collsynth.tens.pipelined_trees.PipelinedTrees`: the
reduce-scatter as the time reversal of trees on the transposed links, a GPU's partial leaving
after all its children's partials arrived). This form keeps the two halves: :func:`expand`
lists the reduce-scatter's sends (reducing) and then the allgather's (copying), steps shifted
past the first half (:func:`collsynth.tens.schedule.concat`), the schedule the verifier and
every cost model read. :func:`verify` gives the verdict :func:`collsynth.tens.verify.verify`
gives that expansion: the reduce-scatter half leaves every node's block fully reduced at its
owner (each contribution once), and the allgather half, whose every send copies what the
first half left, carries each owner's block to every participant; each half is checked in its
own form against the instance's collective with its kind (a switch forwarding one arrival per
send, as the header of the expansion declares for a combining collective through switches).
:func:`price_sync` is the synchronous alpha-beta price (Zhao et al., NSDI 2025, Section 3.2) of
the expansion: the halves' steps do not overlap, so it is the sum of the halves' prices. With a
``delay`` (and ``mirror``) the allgather overlaps the reduce-scatter
(:mod:`collsynth.tens.allreduce_overlap`): :func:`verify` also checks that each allgather piece
leaves its owner after its reduction completed there, and :func:`price_sync` prices each step
with both halves' loads. Data written by the former ``overlapped-allreduce`` form (the
allgather moved ``shift`` steps from following the reduce-scatter) reads as this form with
``delay`` = the reduce-scatter's last step + ``shift`` (:func:`from_json`).

>>> import numpy as np
>>> from collsynth.instances import make_instance
>>> from collsynth.instances.generators import build
>>> inst = make_instance(build("ring", {"nodes": 3}), "allreduce", message_bytes=3e9)
>>> hops = [(0, 1, 0), (1, 2, 1), (1, 2, 0), (2, 0, 1), (2, 0, 0), (0, 1, 1)]  # a chain per root
>>> ag = PipelinedTrees("allgather", 3, 3, 1, 4, 1, np.array([0, 1, 2]), np.array([0, 0, 0]),
...                     np.array([1, 1, 1]), np.array([0, 2, 4, 6]), *map(np.array, zip(*hops)))
>>> rs = replace(ag, collective="reduce_scatter")  # the same chains, reversed: the ring's links both ways
>>> f = PipelinedAllreduce(rs, ag)
>>> verify(f, inst) is None, f.sends, len(expand(f)), price_sync(f, inst).steps, f.num_steps
(True, 48, 48, 10, 10)
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from . import allreduce_overlap, pipelined_trees
from .pipelined_trees import PipelinedTrees, SyncPrice
from .schedule import Schedule, concat

FORM = "pipelined-allreduce"
OLD_FORM = "overlapped-allreduce"  # the allgather ``shift`` steps from following the reduce-scatter: read as a delay
LINK_ORDER = "program"  # an overlapped allreduce's declared link order (:func:`joined`)


@dataclass(frozen=True)
class PipelinedAllreduce:
    """An allreduce as its reduce-scatter's and its allgather's trees plus pipeline rules
    (module doc); the halves are over the same nodes and chunks."""

    reduce_scatter: PipelinedTrees
    allgather: PipelinedTrees
    delay: int | None = None  # the allgather's step s runs in step delay + s (None: after the reduce-scatter's last)
    mirror: bool = False  # the allgather's pieces placed mirrored in their chunk (:mod:`.allreduce_overlap`)

    collective = "allreduce"

    @property
    def halves(self) -> tuple[PipelinedTrees, PipelinedTrees]:
        """The reduce-scatter, then the allgather."""
        return self.reduce_scatter, self.allgather

    @property
    def sends(self) -> int:
        """The sends :func:`expand` lists: both halves'."""
        return self.reduce_scatter.sends + self.allgather.sends

    @property
    def pieces(self) -> tuple[int, int]:
        """Pipeline pieces per chunk of each half."""
        return self.reduce_scatter.pieces, self.allgather.pieces

    @property
    def num_steps(self) -> int:
        """The last step of the expansion: the allgather's last after the reduce-scatter's, or
        after ``delay``, whichever is later."""
        first, second = (allreduce_overlap.last_step(h) for h in self.halves)
        return max(first, (first if self.delay is None else self.delay) + second)


def half_instance(instance, kind: str):
    """``instance`` with its allreduce read as the collective ``kind`` over the same nodes,
    chunks and message (reduce-scatter's block ``i`` is allreduce's chunk ``i``, as the
    allgather's shard ``i``: :func:`collsynth.tens.schedule.concat`)."""
    coll = instance.collective
    return replace(instance, collectives=(replace(coll, kind=kind),))


def verify(f: PipelinedAllreduce, instance) -> str | None:
    """Why ``f``'s expansion does not implement ``instance``'s allreduce, or None (module doc):
    the first half's violation as a reduce-scatter, else the second's as an allgather (no
    switch copying one arrival onto several links where the topology has switches: the header
    :func:`collsynth.tens.pipelined_event.price` and the producer give the expansion), else an
    allgather piece sent before its reduction completed."""
    coll = instance.collective
    if coll.kind != "allreduce":
        return f"the trees implement allreduce, not the instance's {coll.kind}"
    copy = False if instance.topology.switches else None  # the expansion's header: one arrival per forward
    for half, kind in zip(f.halves, ("reduce_scatter", "allgather")):
        if half.collective != kind:
            return f"the {kind.replace('_', '-')} half holds {half.collective} trees"
        why = pipelined_trees.verify(half, half_instance(instance, kind), switch_copy=copy)
        if why is not None:
            return f"{kind.replace('_', '-')} half: {why}"
    if f.delay is not None:
        try:
            least = allreduce_overlap.least_delay(f.reduce_scatter, f.allgather, f.mirror)
        except ValueError as e:
            return f"overlap: {e}"
        if f.delay < least:
            return (f"overlap: the allgather shifted by {f.delay} steps sends a piece before its reduction "
                    f"completed (at least {least})")
    return None


def price_sync(f: PipelinedAllreduce, instance) -> SyncPrice:
    """The synchronous price of ``f``'s expansion: the halves' prices summed where they run in
    turn (their steps are disjoint; :func:`collsynth.tens.pipelined_trees.price_sync` for each),
    else step by step with both halves' loads (:func:`collsynth.tens.allreduce_overlap.price_joint`)."""
    if f.delay is not None:
        costs = allreduce_overlap.joint_costs(f.reduce_scatter, f.allgather, instance)
        return allreduce_overlap.price_joint(f.reduce_scatter, f.allgather, f.delay, costs)
    parts = [pipelined_trees.price_sync(half, half_instance(instance, half.collective)) for half in f.halves]
    return SyncPrice(sum(p.steps for p in parts), sum(p.T_L_s for p in parts), sum(p.T_B_s for p in parts))


def expand(f: PipelinedAllreduce) -> Schedule:
    """The explicit sends: the reduce-scatter's (reducing), then the allgather's (copying)
    (:func:`joined`)."""
    return joined(pipelined_trees.expand(f.reduce_scatter), pipelined_trees.expand(f.allgather), f.delay, f.mirror)


def joined(reduce_scatter: Schedule, allgather: Schedule, delay: int | None = None, mirror: bool = False) -> Schedule:
    """The allreduce of a reduce-scatter's sends then an allgather's (steps shifted past the
    first, :func:`collsynth.tens.schedule.concat`, or by ``delay``; with ``mirror`` the
    allgather's pieces mirrored in their chunk: :mod:`collsynth.tens.allreduce_overlap`): the
    expansion of both forms of an allreduce kept as trees and the explicit overlap of
    :func:`collsynth.solvers.packing.overlap.overlapped` alike.

    The ``event`` model serves each link first come, first served (as ASTRA-sim's
    congestion-aware links do); a schedule may declare that each GPU's sends on a link also
    keep the order listed (``link_order = "program"``, a control dependency). Overlapped
    (``delay`` set), the sends are listed step by step as they should run, the allgather's among
    the reduce-scatter's, and the declaration is kept: without it a GPU's own contributions,
    ready at time 0, leave ahead of the partial sums it relays and starve the links downstream
    (:mod:`collsynth.tens.time_reversal`), whatever the allgather does. Measured under ``event``
    (1 GB, alpha 0; ready -> declared): DGX-2 x2's split pair at 25 pieces 23.376 -> 18.122 ms,
    DGX-H100 x2's greedy forests at 50 pieces 4.168 -> 3.767 ms; the Clos fabrics' overlaps at
    their own pieces equal or lower (k = 4 fat tree 2.5645 -> 2.5553 ms, two-group rail Clos and
    DGX H100 x4 equal). Only on two-chassis miniatures at 3 pieces is the ready order lower
    (16.40e6 against 17.93e6 s). In turn (``delay`` None) each link takes its messages as they
    become ready (``link_order = "ready"``): the listing puts every allgather send after the
    whole reduce-scatter, and the declaration would hold it behind the last of them out of its
    GPU on its link, the halves not overlapping under FIFO links; on the clusters' trees the
    reduce-scatter's own sends leave in the same order either way (its price alone is the
    same), and the allreduce's drops, at 4 pieces: SuperPOD 8 SU 1.155x -> 1.005x the optimum,
    a two-group rail Clos of 8 boxes a group 1.246x -> 1.113x, DGX H100 x32 1.018x -> 1.013x, a
    k = 8 fat tree 1.011x -> 1.005x (priced per link orbit, :mod:`collsynth.tens.pipelined_event`;
    README, "`event` at scale")."""
    both = concat(reduce_scatter, allgather, "allreduce")
    n = len(reduce_scatter)
    lo, hi, step = both.lo.copy(), both.hi.copy(), both.step.copy()
    if mirror:
        lo[n:], hi[n:] = allreduce_overlap.mirrored(both.lo[n:], both.hi[n:], both.denom)
    if delay is not None:
        step[n:] += delay - reduce_scatter.num_steps
    return replace(both, lo=lo, hi=hi, step=step, link_order="ready" if delay is None else LINK_ORDER)


def to_json(f: PipelinedAllreduce) -> dict:
    """``f`` as plain data: each half as :func:`collsynth.tens.pipelined_trees.to_json` writes it."""
    return {"form": FORM, "reduce_scatter": pipelined_trees.to_json(f.reduce_scatter),
            "allgather": pipelined_trees.to_json(f.allgather), "delay": f.delay, "mirror": f.mirror}


def from_json(data: dict, where: str = "trees") -> PipelinedAllreduce:
    """The :class:`PipelinedAllreduce` of :func:`to_json`'s data, or of the former
    ``overlapped-allreduce`` form's (its ``shift`` read as ``delay`` = the reduce-scatter's last
    step + ``shift``, the same sends); a missing or mistyped field is an
    :class:`~collsynth.InputError` naming ``where`` and the field."""
    from .. import InputError

    old = data.get("form") == OLD_FORM
    if data.get("form") != FORM and not old:
        raise InputError(where, f"form: expected \"{FORM}\", got {data.get('form')!r}")
    halves = []
    for kind in ("reduce_scatter", "allgather"):
        if not isinstance(data.get(kind), dict):
            raise InputError(where, f"{kind}: missing, or not the trees of a half")
        halves.append(pipelined_trees.from_json(data[kind], f"{where}: {kind}"))
    if old:
        shift = data.get("shift")
        if isinstance(shift, bool) or not isinstance(shift, int) or not isinstance(data.get("mirror"), bool):
            raise InputError(where, "shift, mirror: expected an integer and a boolean")
        return PipelinedAllreduce(*halves, delay=allreduce_overlap.last_step(halves[0]) + shift, mirror=data["mirror"])
    delay, mirror = data.get("delay"), data.get("mirror", False)
    if (delay is not None and (isinstance(delay, bool) or not isinstance(delay, int))) or not isinstance(mirror, bool):
        raise InputError(where, "delay: expected a whole number of steps or null; mirror: expected true or false")
    return PipelinedAllreduce(*halves, delay=delay, mirror=mirror)


def write_json(f: PipelinedAllreduce, path) -> None:
    """Write :func:`to_json`'s data to ``path``, whole or not at all
    (:func:`collsynth.outputs.replaced_file`)."""
    import json

    from ..outputs import replaced_file

    with replaced_file(path) as tmp, open(tmp, "w") as out:
        json.dump(to_json(f), out)
        out.write("\n")
