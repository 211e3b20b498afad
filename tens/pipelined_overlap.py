"""Allreduce kept as two pipelined forests run side by side: the allgather of a piece starts once its reduction is done.

Zhao et al. ("ForestColl: Throughput-Optimal Collective Communications on Heterogeneous
Network Fabrics", arXiv 2402.06787, Section 4) build allreduce as a reduce-scatter then an
allgather, each a packing of spanning trees cut into pipeline pieces
(:class:`~collsynth.tens.pipelined_trees.PipelinedTrees`: the reduce-scatter the time reversal of
out-trees on the transposed links). Where each half is packed on its own share of every link
(``collsynth.solvers.packing.capacity_split``) the two run at once: the allgather's sends are the
halves in sequence (:func:`collsynth.tens.schedule.concat`) moved ``shift`` steps (earlier when
negative), its pieces placed mirrored in each chunk (``[lo, hi)`` at ``[1 - hi, 1 - lo)``) where
``mirror`` says so, so that a root sends a piece only after the last arrival that completes that
piece's reduction there. Listing those sends costs pieces times the trees' hops; this form keeps
the trees, the pieces, ``shift`` and ``mirror`` (memory in trees x hops).

With ``T`` the reduce-scatter's steps (its deepest hop's depth below the root plus ``Q``, the
pieces of a root's shard), the reduce-scatter sends piece ``q`` of a tree over a hop ``b`` steps
below its root in step ``T - b - q`` (toward the root), the allgather in step ``T + shift + b +
q + 1`` (away from it). :func:`verify` gives the verdict :func:`collsynth.tens.verify.verify`
gives the expansion: each half in its own form (:func:`collsynth.tens.pipelined_trees.verify`,
one arrival per forward out of a switch, as the allreduce's header declares where switches sit),
then every piece an owner sends in the allgather after every reduce-scatter arrival at that owner
of an overlapping piece of the same chunk (every piece as one item, not every send).
:func:`price_sync` is the synchronous alpha-beta price (Zhao et al., NSDI 2025, Section 3.2;
:func:`collsynth.tens.cost.price_sync`) of the expansion: per step, both halves' loads per link
(one whole chunk per tree depth, times the piece's share) and the largest alpha of the links used.
The ``event`` models read the expansion (:func:`explicit`). ``tests/test_pipelined_overlap.py``
checks the verdicts and the prices against the explicit sends'.

Three GPUs on a ring both ways, a chain per root for each half, two pieces (reduce-scatter steps
1-3: a root's last piece arrives in step 2, its first in step 3): in place the allgather's first
piece waits for step 4; mirrored, the first piece it sends is the one complete in step 2, so the
whole allgather moves a step earlier:

>>> import numpy as np
>>> from collsynth.instances import make_instance
>>> from collsynth.instances.generators import build
>>> inst = make_instance(build("ring", {"nodes": 3}), "allreduce", message_bytes=3e9)
>>> hops = [(0, 1, 0), (1, 2, 1), (1, 2, 0), (2, 0, 1), (2, 0, 0), (0, 1, 1)]  # a chain per root
>>> ag = PipelinedTrees("allgather", 3, 3, 1, 2, 1, np.array([0, 1, 2]), np.array([0, 0, 0]),
...                     np.array([1, 1, 1]), np.array([0, 2, 4, 6]), *map(np.array, zip(*hops)))
>>> rs = replace(ag, collective="reduce_scatter")
>>> least_shift(rs, ag, False), least_shift(rs, ag, True)
(0, -1)
>>> f = OverlappedAllreduce(rs, ag, -1, True)
>>> f.num_steps, verify(f, inst) is None, verify(replace(f, shift=-2), inst) is None, price_sync(f, inst).steps
(5, True, False, 5)
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from . import pipelined_trees
from .pipelined_allreduce import half_instance
from .pipelined_trees import PipelinedTrees, SyncPrice, listed
from .schedule import Schedule, concat, id_column

FORM = "overlapped-allreduce"


@dataclass(frozen=True)
class OverlappedAllreduce:
    """An allreduce as its reduce-scatter's and its allgather's trees plus pipeline rules, the
    allgather moved ``shift`` steps from following the reduce-scatter and its pieces mirrored
    in each chunk where ``mirror`` (module doc)."""

    reduce_scatter: PipelinedTrees
    allgather: PipelinedTrees
    shift: int
    mirror: bool

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
        """The last step of the expansion."""
        first = _steps(self.reduce_scatter)
        return max(first, first + self.shift + _steps(self.allgather))


def _steps(f: PipelinedTrees) -> int:
    """The steps of one half's expansion: its deepest hop's depth plus the pieces of a shard."""
    return int(f.before.max()) + f.chunks_per_root * f.pieces if len(f.before) else 0


def expand(f: OverlappedAllreduce) -> Schedule:
    """The explicit sends: the reduce-scatter's (reducing), then the allgather's (copying), the
    latter's steps moved by ``shift`` and its pieces mirrored where ``mirror`` (module doc)."""
    first = pipelined_trees.expand(f.reduce_scatter)
    both, n = concat(first, pipelined_trees.expand(f.allgather), "allreduce"), len(first)
    lo, hi, step = both.lo.astype(np.int64), both.hi.astype(np.int64), both.step.astype(np.int64)
    if f.mirror:
        lo[n:], hi[n:] = both.denom - hi[n:], both.denom - lo[n:]
    step[n:] += f.shift
    return Schedule(both.collective, both.nodes, both.chunks, both.chunk, lo, hi, both.src, both.dst,
                    id_column(step), both.op, both.denom, both.routing, dict(both.meta), both.link_order)


def explicit(f: OverlappedAllreduce, instance) -> Schedule:
    """:func:`expand` with the header the tree-packing producer gives its schedules (the
    instance's kind and chunks; one arrival per send out of a switch, the collective combining):
    the schedule the explicit verifier and every cost model read."""
    coll = instance.collective
    meta = {"algorithm": "tree-packing"}
    if instance.topology.switches:
        meta["switch_copy"] = False
    return replace(expand(f), collective=coll.kind, chunks=coll.num_chunks, meta=meta)


def _items(f: PipelinedTrees, reversed_half: bool, total: int, shift: int, mirror: bool, denom: int):
    """Per listed tree and piece of a root's shard: the chunk, the piece's ``[lo, hi)`` in
    ``1 / denom`` of a chunk, and the step of its last arrival at the root (reduce-scatter) or
    of its first send out of the root (allgather), or None for the trees with no such hop."""
    f = listed(f)
    tree = np.repeat(np.arange(len(f.root)), np.diff(f.ptr))
    at_root = f.src == f.root[tree]
    top = np.full(len(f.root), np.iinfo(np.int64).max)
    np.minimum.at(top, tree[at_root], f.before[at_root])
    has = top < np.iinfo(np.int64).max
    Q = f.chunks_per_root * f.pieces
    q = np.arange(Q, dtype=np.int64)
    e = f.edges
    E, scale = int(e[-1]), denom // (f.k * int(e[-1]))
    width = (f.hi - f.lo).astype(np.int64)[has]
    p = q % f.pieces
    lo = ((f.lo.astype(np.int64)[has] * E)[:, None] + e[p][None, :] * width[:, None]) * scale
    hi = lo + ((e[p + 1] - e[p])[None, :] * width[:, None]) * scale
    if mirror:
        lo, hi = denom - hi, denom - lo
    chunk = (f.root[has] * f.chunks_per_root)[:, None] + (q // f.pieces)[None, :]
    b = top[has][:, None]
    step = total - b - q[None, :] if reversed_half else total + shift + b + q[None, :] + 1
    return chunk.ravel(), lo.ravel(), hi.ravel(), step.ravel()


def _denom(f: OverlappedAllreduce) -> int:
    """The common denominator of both halves' pieces (``k E`` each)."""
    return int(np.lcm(*(h.k * int(h.edges[-1]) for h in f.halves)))


def _latest_overlapping(arrivals, queries) -> np.ndarray:
    """For each queried piece (``chunk, lo, hi``), the latest step among the arrivals
    (``chunk, lo, hi, step``) of an overlapping piece of the same chunk (-1 where none): both
    cut into atoms at every boundary of either, a maximum per atom, then per query."""
    c_in, lo_in, hi_in, s_in = arrivals
    c_out, lo_out, hi_out = queries
    width = int(max(hi_in.max(initial=0), hi_out.max(initial=0))) + 1
    keys = np.unique(np.concatenate([c_in * width + lo_in, c_in * width + hi_in,
                                     c_out * width + lo_out, c_out * width + hi_out]))
    latest = np.full(len(keys), -1, np.int64)
    a, b = np.searchsorted(keys, c_in * width + lo_in), np.searchsorted(keys, c_in * width + hi_in)
    atoms, owner = _ranges(a, b)
    np.maximum.at(latest, atoms, s_in[owner])
    a, b = np.searchsorted(keys, c_out * width + lo_out), np.searchsorted(keys, c_out * width + hi_out)
    atoms, owner = _ranges(a, b)
    out = np.full(len(a), -1, np.int64)
    np.maximum.at(out, owner, latest[atoms])
    return out


def _ranges(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every index of every range ``[a_i, b_i)`` and the ``i`` it came from."""
    count = b - a
    owner = np.repeat(np.arange(len(a)), count)
    starts = np.repeat(a - np.concatenate([[0], np.cumsum(count)[:-1]]), count)
    return starts + np.arange(int(count.sum())), owner


def _slack(rs: PipelinedTrees, ag: PipelinedTrees, shift: int, mirror: bool) -> np.ndarray:
    """Per allgather piece out of its root, its first send's step less one past the last
    reduce-scatter arrival at the root overlapping it (negative: sent too early)."""
    f = OverlappedAllreduce(rs, ag, shift, mirror)
    denom, total = _denom(f), _steps(rs)
    into = _items(rs, True, total, 0, False, denom)
    c, lo, hi, sent = _items(ag, False, total, shift, mirror, denom)
    return sent - (_latest_overlapping(into, (c, lo, hi)) + 1)


def least_shift(rs: PipelinedTrees, ag: PipelinedTrees, mirror: bool) -> int:
    """The least ``shift`` (module doc) that keeps every allgather piece out of its root after
    the last reduce-scatter arrival there of an overlapping piece (the pieces placed mirrored
    where ``mirror``): the overlap of ``collsynth.solvers.packing.overlap.overlapped``, from the
    trees."""
    slack = _slack(rs, ag, 0, mirror)
    return -int(slack.min()) if len(slack) else 0


def verify(f: OverlappedAllreduce, instance) -> str | None:
    """Why ``f``'s expansion (:func:`explicit`) does not implement ``instance``'s allreduce, or
    None (module doc): each half checked in its form as its kind, then the allgather's pieces
    out of each owner against the reduce-scatter's arrivals there."""
    coll = instance.collective
    if coll.kind != "allreduce":
        return f"the trees implement allreduce, not the instance's {coll.kind}"
    copy = False if instance.topology.switches else None  # the header's one arrival per forward
    for half, kind in zip(f.halves, ("reduce_scatter", "allgather")):
        if half.collective != kind:
            return f"the {kind.replace('_', '-')} half holds {half.collective} trees"
        why = pipelined_trees.verify(half, half_instance(instance, kind), switch_copy=copy)
        if why is not None:
            return f"{kind.replace('_', '-')} half: {why}"
    slack = _slack(*f.halves, f.shift, f.mirror)
    if len(slack) and slack.min() < 0:
        return (f"an owner sends an allgather piece {-int(slack.min())} step(s) before its reduction there is "
                "complete")
    return None


def _loads(f: PipelinedTrees, la, chunk_bytes: float, first: int, reversed_half: bool,
           loads: np.ndarray, alpha: np.ndarray) -> None:
    """Add one half's per-step link loads (seconds) into ``loads`` and its links' largest alpha
    per step into ``alpha`` (rows: steps, ``first`` the row of the step its pieces' times count
    from: the reduce-scatter sends piece ``q`` at depth ``b`` in step ``first - b - q``, the
    allgather in ``first + b + q + 1``)."""
    f = listed(f)
    src, dst = (f.dst, f.src) if f.reversed else (f.src, f.dst)
    link = la.lookup(src, dst)
    widths = (f.hi - f.lo).astype(np.float64)
    per_hop = np.repeat(widths, np.diff(f.ptr)) / f.k * chunk_bytes / la.bandwidth[link]
    e = f.edges.astype(np.float64)
    frac = np.tile(np.diff(e) / e[-1], f.chunks_per_root)
    q = np.arange(len(frac))
    for b in np.unique(f.before).tolist():
        at = f.before == b
        cost = np.bincount(link[at], weights=per_hop[at], minlength=len(la))
        rows = first - b - q if reversed_half else first + b + q + 1
        loads[rows] += frac[:, None] * cost[None, :]
        alpha[rows] = np.maximum(alpha[rows], float(la.alpha[link[at]].max()))


def price_sync(f: OverlappedAllreduce, instance) -> SyncPrice:
    """The synchronous price of ``f``'s expansion (module doc): per step used, the largest
    alpha of its links plus its largest link load over bandwidth, summed."""
    la = instance.topology.link_arrays
    total, steps = _steps(f.reduce_scatter), f.num_steps
    loads = np.zeros((steps + 1, len(la)))
    alpha = np.full(steps + 1, -1.0)
    cb = instance.collective.chunk_bytes
    _loads(f.reduce_scatter, la, cb, total, True, loads, alpha)
    _loads(f.allgather, la, cb, total + f.shift, False, loads, alpha)
    used = alpha >= 0
    return SyncPrice(steps, float(alpha[used].sum()), float(loads[used].max(axis=1).sum()))


def to_json(f: OverlappedAllreduce) -> dict:
    """``f`` as plain data: each half as :func:`collsynth.tens.pipelined_trees.to_json` writes
    it, the shift and the mirror."""
    return {"form": FORM, "reduce_scatter": pipelined_trees.to_json(f.reduce_scatter),
            "allgather": pipelined_trees.to_json(f.allgather), "shift": int(f.shift), "mirror": bool(f.mirror)}


def from_json(data: dict, where: str = "trees") -> OverlappedAllreduce:
    """The :class:`OverlappedAllreduce` of :func:`to_json`'s data; a missing or mistyped field
    is an :class:`~collsynth.InputError` naming ``where`` and the field."""
    from .. import InputError

    if data.get("form") != FORM:
        raise InputError(where, f"form: expected \"{FORM}\", got {data.get('form')!r}")
    halves = []
    for kind in ("reduce_scatter", "allgather"):
        if not isinstance(data.get(kind), dict):
            raise InputError(where, f"{kind}: missing, or not the trees of a half")
        halves.append(pipelined_trees.from_json(data[kind], f"{where}: {kind}"))
    shift = data.get("shift")
    if isinstance(shift, bool) or not isinstance(shift, int) or not isinstance(data.get("mirror"), bool):
        raise InputError(where, "shift, mirror: expected an integer and a boolean")
    return OverlappedAllreduce(*halves, data["shift"], data["mirror"])


def write_json(f: OverlappedAllreduce, path) -> None:
    """Write :func:`to_json`'s data to ``path``, whole or not at all
    (:func:`collsynth.outputs.replaced_file`)."""
    import json

    from ..outputs import replaced_file

    with replaced_file(path) as tmp, open(tmp, "w") as out:
        json.dump(to_json(f), out)
        out.write("\n")
