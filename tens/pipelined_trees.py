"""Trees plus a pipeline rule: a schedule kept as its trees, verified and priced as that.

A tree-packing schedule (Zhao et al., "ForestColl: Throughput-Optimal Collective
Communications on Heterogeneous Network Fabrics", arXiv 2402.06787, Sections 4-5) is ``T``
out-trees, tree ``t`` carrying the part ``[lo_t, hi_t)`` (in ``1/k`` of a shard) of its root's
data down route hops, cut into ``P = chunks_per_root * pieces`` pipeline pieces: piece ``q``
crosses a hop whose source received it ``b`` steps after the root sent it in step ``q + b + 1``.
Listing those sends costs ``P`` times the tree hops; this form costs the tree hops alone
(memory in trees x hops), and :func:`expand` lists the sends on request (the schedule the
verifier and every cost model read; :func:`collsynth.solvers.packing.producer.emit`).

:func:`verify` decides what :func:`collsynth.tens.verify.verify` decides of the expansion, on
the trees: every hop a live link; a hop leaves a node only after the piece reached it (a
switch forwards it in the very next step, one arrival per forward unless switches copy);
every node reached at most once per tree (a reduction adds each contribution once); the trees
of a root split its shard exactly and each reaches every participant. :func:`price_sync` is
the synchronous alpha-beta price (Zhao et al., NSDI 2025, Section 3.2; :func:`collsynth.tens.cost.price_sync`)
of the expansion: the loads of a step change only where a tree depth starts or stops its
pieces, so it sums a few segments of equal steps. Reversed forms (reduce-scatter, reduce: the
trees on the transposed topology, time-reversed; :func:`collsynth.tens.schedule.reverse`)
have the same step loads in reverse order, so the same price; their expansion declares
``link_order = "program"`` (each GPU's sends on a link in the order listed: under FIFO links a
GPU's own contributions, ready at once, would otherwise leave ahead of the partial sums it
relays; :mod:`collsynth.tens.time_reversal`). An all-to-all's "trees" are
single routes, each from its root to the one participant its block is for (relays on the way
forward it, as NCCL's PXN does; :mod:`collsynth.solvers.flow.rail_compact`): :func:`verify`
then checks that each root's routes split each of its blocks exactly.

On identical boxes the trees of the first box's roots are kept with the box shifts that move
them (``shift``: commuting automorphisms of the topology of ``orders``,
:mod:`collsynth.instances.box_shift`): the schedule is those trees moved by every product
``s_1^j_1 .. s_g^j_g`` (``j_i < orders[i]``; ``copies`` of them), memory in one box's trees x
hops. A moved tree is valid where its original is (an automorphism keeps links, their latency
and bandwidth, and switches), so :func:`verify` checks the shifts and the listed trees; a
link's load is the same on every link of its orbit under the shifts, so :func:`price_sync`
sums the listed hops per orbit (times ``copies`` over the orbit's size).

>>> import numpy as np
>>> from collsynth.instances import make_instance
>>> from collsynth.instances.generators import build
>>> inst = make_instance(build("ring", {"nodes": 3}), "allgather", message_bytes=3e9)
>>> hops = [(0, 1, 0), (1, 2, 1), (1, 2, 0), (2, 0, 1), (2, 0, 0), (0, 1, 1)]  # a chain per root
>>> f = PipelinedTrees("allgather", 3, 3, 1, 4, 1, np.array([0, 1, 2]), np.array([0, 0, 0]),
...                    np.array([1, 1, 1]), np.array([0, 2, 4, 6]), *map(np.array, zip(*hops)))
>>> verify(f, inst) is None, len(expand(f)), price_sync(f, inst).steps
(True, 24, 5)
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, replace

import numpy as np

from ..instances.switch_ops import copying_mask
from ..instances.symmetry import is_automorphism
from .schedule import Schedule, from_arrays, id_column, narrowed

NON_COMBINING = {"allgather": "allgather", "broadcast": "broadcast", "reduce_scatter": "allgather",
                 "reduce": "broadcast", "alltoall": "alltoall"}  # a collective -> the kind its trees send (reversed when
# they differ); an all-to-all's "tree" is one route from a root to the one destination its pieces are for


@dataclass(frozen=True)
class PipelinedTrees:
    """``T`` routed trees and the pipeline rule (module doc), as columns.

    ``collective``: the kind the schedule implements (``reduce_scatter`` and ``reduce`` are
    the time reversal of the trees' ``allgather`` / ``broadcast`` on the transposed topology);
    ``nodes``, ``chunks``: the schedule header; ``chunks_per_root``: chunks of a root's shard;
    ``pieces``: pipeline pieces per chunk; ``k``: a shard is ``k`` units, tree ``t`` carries
    ``[lo[t], hi[t])`` of root ``root[t]``'s; tree ``t``'s hops are ``ptr[t]:ptr[t+1]`` of
    ``src``, ``dst`` (in the trees' direction) and ``before`` (steps after the root's send).
    """

    collective: str
    nodes: int
    chunks: int
    chunks_per_root: int
    pieces: int
    k: int
    root: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    ptr: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    before: np.ndarray
    shift: np.ndarray | None = None  # [generators, nodes]: node -> node, the box shifts (module doc); None: as listed
    orders: tuple[int, ...] = ()  # each shift's order: the listed trees are moved by every product of their powers
    cuts: np.ndarray | None = None  # piece edges of a chunk, 0 = e_0 < .. < e_pieces = E: piece p is
    # [e_p, e_p+1) / E of it (pieces of unequal size; None: equal, e_p = p)

    @property
    def edges(self) -> np.ndarray:
        """The piece edges of a chunk (``cuts``, else ``0, 1, .., pieces``): piece ``p`` of a
        tree of width ``w`` units is ``[lo E + e_p w, lo E + e_(p+1) w)`` in ``1 / (k E)`` of a
        shard, ``E`` the last edge."""
        return np.arange(self.pieces + 1, dtype=np.int64) if self.cuts is None else np.asarray(self.cuts, np.int64)

    @property
    def copies(self) -> int:
        """How many images each listed tree stands for (1 without shifts)."""
        return math.prod(self.orders) if self.shift is not None else 1

    @property
    def reversed(self) -> bool:
        """Whether the schedule is the time reversal of the trees."""
        return NON_COMBINING[self.collective] != self.collective

    @property
    def depth(self) -> int:
        """Steps from a root's first send to its last piece's arrival at the deepest node, less ``P``."""
        return int(self.before.max()) + 1 if len(self.before) else 0

    @property
    def sends(self) -> int:
        """The sends :func:`expand` lists: hops times ``P`` (times the copies moved by the shift)."""
        return len(self.src) * self.chunks_per_root * self.pieces * self.copies


def listed(f: PipelinedTrees) -> PipelinedTrees:
    """``f`` with every tree moved by its shifts listed (no shift): ``copies`` times the trees."""
    if f.copies == 1:
        return replace(f, shift=None, orders=())
    nodes = np.concatenate([f.src, f.dst, f.root])
    moved = images(nodes, f.shift, f.orders)
    h = len(f.src)
    src, dst, root = moved[:, :h], moved[:, h:2 * h], moved[:, 2 * h:]
    ptr = np.r_[0, np.cumsum(np.tile(np.diff(f.ptr), f.copies))]
    return replace(f, root=root.ravel(), lo=np.tile(f.lo, f.copies), hi=np.tile(f.hi, f.copies), ptr=ptr,
                   src=src.ravel(), dst=dst.ravel(), before=np.tile(f.before, f.copies), shift=None, orders=())


def images(ids: np.ndarray, shift: np.ndarray, orders) -> np.ndarray:
    """``ids`` moved by every product of the shifts' powers, one row per product
    (``[prod orders, len(ids)]``, the identity first; each row followed by its images under the
    next shift's powers). Filled in place, so the rows are made once.

    >>> images(np.array([0, 1]), np.array([[1, 2, 0]]), [3]).tolist()
    [[0, 1], [1, 2], [2, 0]]
    """
    ids = np.asarray(ids, dtype=np.int64)
    out = np.empty((math.prod(orders), len(ids)), np.int64)
    out[0] = ids
    made = 1
    for perm, order in zip(shift, orders):
        grid = out[:made * order].reshape(made, order, len(ids))  # row r of `made` -> r * order, then its powers
        for r in range(made - 1, 0, -1):  # from the last: row r * order >= r is free of rows not yet moved
            grid[r, 0] = out[r]
        for power in range(1, order):
            grid[:, power] = perm[grid[:, power - 1]]
        made *= order
    return out


def expand(f: PipelinedTrees) -> Schedule:
    """The explicit sends of ``f``: piece ``q`` of tree ``t`` over a hop ``b`` steps below its
    root in step ``q + b + 1`` (module doc), chunk ids of the trees' kind (allgather: root
    ``r``'s ``j``-th chunk is ``r c + j``), pieces in units of ``1 / (k E)`` (:attr:`PipelinedTrees.edges`); the time
    reversal for ``reduce_scatter`` / ``reduce``. The sends are in step order; within a step listed by listed
    send (tree, hop, piece; a reduce-scatter's by :func:`owners_ahead` first), each followed by
    its images under the shifts (:func:`moved_sends`; the shifts :func:`keeping_first`)."""
    f = keeping_first(f)
    return moved_sends(f, len(f.orders) if f.shift is not None else 0)


def keeping_first(f: PipelinedTrees) -> PipelinedTrees:
    """``f`` with its shifts reordered (the same schedule): first those of which a power other
    than the identity maps a hop of a listed tree onto itself (both ends fixed), then the
    others, each part in its order. The products' order (:func:`images`) then moves the sends
    by the shifts keeping no used link last, the order the event price per link orbit reads
    (:mod:`collsynth.tens.pipelined_event`)."""
    if f.shift is None:
        return f
    order = keeping_order(f.shift, f.orders, f.src, f.dst)
    return replace(f, shift=f.shift[order], orders=tuple(f.orders[i] for i in order))


def keeping_order(shift: np.ndarray, orders, src: np.ndarray, dst: np.ndarray) -> list[int]:
    """The indices of the shifts, first those of which a power other than the identity maps one
    of the pairs ``src -> dst`` onto itself (both ends fixed), then the others, each part in
    its order (:func:`keeping_first`)."""
    ids = np.arange(np.shape(shift)[1])
    keeps = [bool(any(((p[src] == src) & (p[dst] == dst)).any() for p in images(ids, [perm], [order])[1:]))
             for perm, order in zip(shift, orders)]
    return sorted(range(len(keeps)), key=lambda i: not keeps[i])


def moved_sends(f: PipelinedTrees, moved: int) -> Schedule:
    """The sends of ``f``'s listed trees moved by every product of the powers of the first
    ``moved`` shifts (``f.shift[:moved]``; all of them: :func:`expand`), the trees of the other
    shifts' images not listed. Within a step the sends are ordered by a key of the listed send
    they are images of (its tree, hop and piece; for a reduce-scatter first
    :func:`owners_ahead`'s rotation of that listed send), then by the product that moved it
    (:func:`images` order), so two images of listed sends are in the order of their listed
    sends whichever product moved them: the order the event model breaks ties by is kept by
    the shifts (:mod:`collsynth.tens.pipelined_event`). Each column is reordered in turn, its
    listing dropped as its reordered copy is made (the sends' memory held once, not twice)."""
    cols = listed_columns(f, moved)
    denom, kind = f.k * int(f.edges[-1]), NON_COMBINING[f.collective]
    if f.reversed and f.collective == "reduce_scatter" and len(cols["step"]):
        _reorder(cols, _owners_order(cols["step"], owners_key(f, cols, moved)))  # the key dropped before the reorder
    elif not f.reversed and len(cols["step"]):  # in (stable) step order: the step view then shares the columns
        from .dependencies import counting_order  # numba: imported on use, so `--help` loads no heavy library
        _reorder(cols, counting_order(cols["step"], int(cols["step"].max()) + 1)[0])
    if not f.reversed:
        return from_arrays(kind, f.nodes, f.chunks, denom=denom, **cols)
    # declared: FIFO links keep the reversal's order (module doc)
    return from_arrays(f.collective, f.nodes, f.chunks, denom=denom, link_order="program", **cols)


def listed_columns(f: PipelinedTrees, moved: int) -> dict:
    """The columns (``chunk``, ``lo``, ``hi``, ``src``, ``dst``, ``step``, in the types a
    schedule keeps) of :func:`moved_sends`' sends in listing order: by listed hop, piece, then
    product (:func:`images`); a reversed form's time-reversed in place
    (:func:`collsynth.tens.schedule.reverse`: ``src`` and ``dst`` swapped, step ``t`` becomes
    ``T + 1 - t``). Each column is made in turn, the moved node ids dropped once read."""
    copy = images(np.concatenate([f.src, f.dst, f.root]), f.shift[:moved], f.orders[:moved]) if moved else \
        np.concatenate([f.src, f.dst, f.root]).astype(np.int64)[None]
    h, C, Q = len(f.src), len(copy), f.chunks_per_root * f.pieces
    tree = np.repeat(np.arange(len(f.root)), np.diff(f.ptr))
    first = _first_chunks(f, NON_COMBINING[f.collective], copy[:, 2 * h:].T, copy[:, h:2 * h].T)  # [tree, copy]
    shape = (h, Q, C)  # listed hop, piece, copy: the listing order
    cols = {"src": _node_column(copy[:, :h], shape), "dst": _node_column(copy[:, h:2 * h], shape)}
    del copy
    q = np.arange(Q, dtype=np.int64)
    cols["chunk"] = _flat(id_column(first[tree][:, None, :] + (q // f.pieces)[None, :, None]).reshape(shape[0], Q, C),
                          shape)
    del first
    e, p, width = f.edges, q % f.pieces, (f.hi - f.lo).astype(np.int64)[tree]
    lo = ((f.lo.astype(np.int64)[tree] * int(e[-1]))[:, None] + e[p][None, :] * width[:, None])[:, :, None]
    hi = lo + ((e[p + 1] - e[p])[None, :] * width[:, None])[:, :, None]
    step = (f.before.astype(np.int64)[:, None] + q[None, :] + 1)[:, :, None]
    small = narrowed({"lo": lo, "hi": hi, "step": step}, f.k * int(e[-1]))
    cols.update({name: _flat(v, shape) for name, v in small.items()})
    if f.reversed:
        cols["src"], cols["dst"] = cols["dst"], cols["src"]
        if len(cols["step"]):
            np.subtract(int(cols["step"].max()) + 1, cols["step"], out=cols["step"])
    return {name: cols[name] for name in ("chunk", "lo", "hi", "src", "dst", "step")}


def _node_column(moved: np.ndarray, shape: tuple) -> np.ndarray:
    """Moved node ids ``[copy, hop]`` as a flat column in listing order (``shape``: hop, piece,
    copy), of the type :func:`collsynth.tens.schedule.id_column` gives them, made in one pass."""
    fits = not moved.size or (moved.min() >= np.iinfo(np.int32).min and moved.max() <= np.iinfo(np.int32).max)
    by_hop = np.ascontiguousarray(moved.T, dtype=np.int32 if fits else np.int64)
    return _flat(by_hop[:, None, :], shape)


def _flat(v: np.ndarray, shape: tuple) -> np.ndarray:
    """``v`` broadcast to ``shape``, flat: ``v`` itself, raveled, when it has that shape already."""
    return v.ravel() if v.shape == shape and v.flags.c_contiguous else np.broadcast_to(v, shape).flatten()


def owners_key(f: PipelinedTrees, cols: dict, moved: int) -> np.ndarray:
    """Per send of a reduce-scatter's listing (:func:`listed_columns`), :func:`rotation` of the
    listed send it is an image of (the first of its ``C`` products), int32."""
    C = math.prod(f.orders[:moved]) if moved else 1
    ranks = np.unique(images(f.root, f.shift, f.orders)) if f.copies > 1 else np.unique(f.root)
    return np.repeat(rotation(cols["chunk"][::C], cols["src"][::C], f.chunks_per_root, ranks).astype(np.int32), C)


def _first_chunks(f: PipelinedTrees, kind: str, root: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Per tree and copy (``root``: ``[tree, copy]``, ``dst``: ``[hop, copy]``, the moved ids) the
    first chunk id the tree carries: allgather, its root's ``r c``; all-to-all, the block from
    its root to its route's end, ``(r N + d) c``; broadcast, 0."""
    if kind == "alltoall":
        return (root * f.nodes + dst[f.ptr[1:] - 1]) * f.chunks_per_root
    return root * f.chunks_per_root if kind == "allgather" else np.zeros_like(root)


def rotation(chunk: np.ndarray, src: np.ndarray, chunks_per_root: int, ranks: np.ndarray) -> np.ndarray:
    """How far the block's owner is ahead of the sender among the participants ``ranks``
    (sorted node ids): ``(owner - sender) mod len(ranks)`` in rank order, a switch by the rank
    after it (:func:`owners_ahead`)."""
    owner = np.searchsorted(ranks, chunk.astype(np.int64) // chunks_per_root)
    return (owner - np.searchsorted(ranks, src.astype(np.int64))) % max(1, len(ranks))


def owners_ahead(sched: Schedule, key: np.ndarray) -> Schedule:
    """A reduce-scatter's sends listed, within each step, by ``key`` (stable): :func:`rotation`
    of the listed send each is an image of, how far the block's owner is ahead of the sender, so
    that every GPU serves the partials of its blocks in the same rotation, the relays of one
    owner finish its inputs together and each owner's links take the relays' partials one after
    another, rather than every GPU serving the same owners first. Only the order within a step
    changes (the verdict and the ``sync`` price do not); under FIFO links (``event``) it is what
    keeps a relay's NIC fed: DGX H100 x64, 7 pieces, 1.320x -> 1.008x the optimum
    (``benchmarks/bench_clusters_combining.py``)."""
    if not len(sched):
        return sched
    cols = {name: getattr(sched, name) for name in ("chunk", "lo", "hi", "src", "dst", "step", "op")}
    _reorder(cols, _owners_order(sched.step, key))
    return from_arrays(sched.collective, sched.nodes, sched.chunks, denom=sched.denom, routing=sched.routing,
                       link_order=sched.link_order, **cols)


def _owners_order(step: np.ndarray, key: np.ndarray) -> np.ndarray:
    """The sends (``step`` non-empty) by step, then by ``key`` (stable): ``np.lexsort((key, step))``,
    in int32 (:func:`owners_ahead`)."""
    from .dependencies import counting_order, counting_order_of  # numba: imported on use (`--help`)
    by_key = counting_order(key, int(key.max()) + 1)[0]
    return counting_order_of(step, int(step.max()) + 1, by_key)[0]


def warm() -> None:
    """Compile (or load) the kernels of a reduce-scatter's listing by step and owner
    (:func:`_owners_order`), which every tree packing allreduce and reduce-scatter emits and no
    tiny schedule reaches: without it a run whose kernels are interpreted
    (:mod:`collsynth.tens.interpreted`) sorts its sends in Python."""
    _owners_order(np.zeros(1, np.int32), np.zeros(1, np.int32))


def _reorder(cols: dict, order: np.ndarray) -> None:
    """Every column of ``cols`` replaced by itself in ``order``, one at a time: each column's
    old copy is dropped (when ``cols`` held its only reference) before the next one's is made."""
    for name in list(cols):
        cols[name] = cols[name][order]


def verify(f: PipelinedTrees, instance, switch_copy: bool | None = None) -> str | None:
    """Why ``f``'s expansion does not implement ``instance``'s collective, or None (module
    doc: the same verdict :func:`collsynth.tens.verify.verify` gives the expansion, from the
    trees alone). ``switch_copy``: whether a switch may send one arrival on several links
    (default: True for non-combining collectives, False for reversed ones, as the producer
    marks them), but never at a switch declared not to copy
    (:func:`collsynth.instances.switch_ops.copying_mask`)."""
    topo, coll = instance.topology, instance.collective
    if coll.kind != f.collective or coll.size != f.nodes or coll.num_chunks != f.chunks:
        return f"the trees implement {f.collective} on {f.nodes} nodes, not the instance's {coll.kind}"
    e = f.edges
    if len(e) != f.pieces + 1 or e[0] != 0 or (np.diff(e) < 1).any():
        return f"the piece edges are not {f.pieces + 1} increasing integers from 0"
    la = topo.link_arrays
    src, dst = (f.dst, f.src) if f.reversed else (f.src, f.dst)
    missing = np.flatnonzero(la.lookup(src, dst) < 0)
    if len(missing):
        h = int(missing[0])
        return f"hop {h} ({int(src[h])} -> {int(dst[h])}) is not a live link"
    copy = (not f.reversed and f.collective != "alltoall") if switch_copy is None else switch_copy
    is_switch = np.zeros(topo.size, bool)
    is_switch[list(topo.switches)] = True
    every = NON_COMBINING[f.collective] in ("allgather", "alltoall")
    roots = np.asarray(coll.nodes if every else [coll.root], dtype=np.int64)
    if f.copies > 1:
        why = _shift_violation(f, topo, is_switch, roots)
        if why:
            return why
        roots = np.unique(f.root)
    cover = _pair_violation if f.collective == "alltoall" else _coverage_violation
    copies = copying_mask(topo, True) & copy  # a switch declared not to copy does not, whatever the trees say
    return _hop_violation(f, is_switch, copies) or cover(f, coll, roots)


def _shift_violation(f: PipelinedTrees, topo, is_switch: np.ndarray, roots: np.ndarray) -> str | None:
    """Why the shifts do not make the listed trees every root's: one is not an automorphism
    keeping switches, not of its order, or two do not commute; or the listed roots moved by
    every product are not each collective root exactly once."""
    perms = np.asarray(f.shift, dtype=np.int64)
    ident = np.arange(topo.size)
    if perms.ndim != 2 or perms.shape[1] != topo.size or len(perms) != len(f.orders):
        return "the shifts are not one permutation of the topology's nodes per order"
    for i, (perm, order) in enumerate(zip(perms, f.orders)):
        if not (np.sort(perm) == ident).all():
            return f"shift {i} is not a permutation of the topology's nodes"
        if not is_automorphism(topo, perm) or (is_switch[perm] != is_switch).any():
            return f"shift {i} does not map links to links of the same count, latency and bandwidth, switches to switches"
        cur = ident
        for _ in range(order):
            cur = perm[cur]
        if (cur != ident).any():
            return f"shift {i} moved {order} times is not the identity"
        if any((perm[q] != q[perm]).any() for q in perms[:i]):
            return f"shift {i} does not commute with the shifts before it"
    moved = images(np.unique(f.root), perms, f.orders)
    if len(np.unique(moved)) != moved.size or not np.array_equal(np.unique(moved), np.unique(roots)):
        return "the listed roots moved by the shifts are not every root of the collective once"
    return None


def _first(bad: np.ndarray, where: np.ndarray) -> int:
    """The hop index of the first True of ``bad`` (a mask over the hops selected by ``where``)."""
    return int(np.flatnonzero(where)[np.argmax(bad)])


def _hop_violation(f: PipelinedTrees, is_switch: np.ndarray, copy: np.ndarray) -> str | None:
    """The first hop (by index) that leaves a compute node before the piece reached it, leaves
    a switch in a step no arrival reached it the step before (or, where the switch may not copy,
    ``copy[node]`` false, more often than arrivals reached it), or reaches a compute node a second
    time in its tree (a switch may be crossed by several routes of a tree). Vectorised over all hops."""
    n = len(is_switch)
    tree = np.repeat(np.arange(len(f.root)), np.diff(f.ptr))
    src, dst, b = f.src.astype(np.int64), f.dst.astype(np.int64), f.before.astype(np.int64)
    S = int(b.max()) + 2 if len(b) else 1
    into = ~is_switch[dst]
    akey = tree[into] * n + dst[into]
    keys, first, count = np.unique(akey, return_index=True, return_counts=True)
    twice = (count > 1)[np.searchsorted(keys, akey)] | (dst[into] == f.root[tree[into]])
    if twice.any():
        h = _first(twice, into)
        return f"tree {tree[h]}: node {dst[h]} is reached twice"
    arrival = b[into][first] + 1
    gpu = ~is_switch[src] & (src != f.root[tree])
    skey = tree[gpu] * n + src[gpu]
    pos = np.minimum(np.searchsorted(keys, skey), max(len(keys) - 1, 0))
    early = ~((keys[pos] == skey) & (arrival[pos] <= b[gpu])) if len(keys) else np.ones(len(skey), bool)
    if early.any():
        h = _first(early, gpu)
        return f"tree {tree[h]}: hop {src[h]} -> {dst[h]} at {b[h]} steps leaves before the piece reached {src[h]}"
    sw_in, sw_out = is_switch[dst], is_switch[src]
    ikeys, icount = np.unique((tree[sw_in] * n + dst[sw_in]) * S + b[sw_in] + 1, return_counts=True)
    okey = (tree[sw_out] * n + src[sw_out]) * S + b[sw_out]
    okeys, ocount = np.unique(okey, return_counts=True)
    pos = np.minimum(np.searchsorted(ikeys, okeys), max(len(ikeys) - 1, 0))
    got = np.where((ikeys[pos] == okeys) if len(ikeys) else np.zeros(len(okeys), bool), icount[pos] if len(ikeys) else 0, 0)
    copies = copy[(okeys // S) % n]  # per (tree, switch, step) forwarding: whether that switch may copy
    short = np.where(copies, got == 0, ocount > got)
    if short.any():
        h = _first(short[np.searchsorted(okeys, okey)], sw_out)
        return (f"tree {tree[h]}: switch {src[h]} forwards at {b[h]} steps more than reached it the step before "
                f"({'it copies' if copy[src[h]] else 'it does not copy'})")
    return None


def _coverage_violation(f: PipelinedTrees, coll, roots: np.ndarray) -> str | None:
    """Every root of ``roots``'s trees split its shard ``[0, k)`` exactly and each reaches
    every participant (each at most once: :func:`_hop_violation`)."""
    part = np.zeros(max(f.nodes, int(f.dst.max(initial=0)) + 1), bool)
    part[np.asarray(coll.nodes, dtype=np.int64)] = True
    stray = ~np.isin(f.root, roots)
    if stray.any():
        t = int(np.argmax(stray))
        return f"tree {t} has root {int(f.root[t])}, not a root of the collective"
    tree = np.repeat(np.arange(len(f.root)), np.diff(f.ptr))
    inside = part[f.dst]
    reached = np.bincount(tree[inside], minlength=len(f.root))
    short = reached < len(coll.nodes) - 1
    if short.any():
        t = int(np.argmax(short))
        return f"tree {t} (root {int(f.root[t])}) misses {len(coll.nodes) - 1 - int(reached[t])} participant(s)"
    order = np.lexsort((f.lo, f.root))
    r, lo, hi = f.root[order], f.lo[order], f.hi[order]
    starts = np.r_[True, r[1:] != r[:-1]]
    ends = np.r_[r[1:] != r[:-1], True]
    prev_hi = np.r_[0, hi[:-1]]
    bad = (hi <= lo) | np.where(starts, lo != 0, lo != prev_hi) | (ends & (hi != f.k))
    if bad.any() or len(np.unique(r)) != len(roots):
        i = int(np.argmax(bad)) if bad.any() else 0
        return f"root {int(r[i]) if len(r) else -1}'s trees do not split its shard [0, {f.k}) exactly"
    return None


def _pair_violation(f: PipelinedTrees, coll, roots: np.ndarray) -> str | None:
    """All-to-all: every tree is a route whose last hop is its deepest and ends at a participant
    other than its root, and the routes of each root to each other participant split the block
    ``[0, k)`` exactly (relays on a route may be participants: they forward, as PXN does)."""
    if (np.diff(f.ptr) < 1).any():
        return f"tree {int(np.argmax(np.diff(f.ptr) < 1))} has no hop"
    last = f.ptr[1:] - 1
    deepest = np.maximum.reduceat(f.before, f.ptr[:-1]) if len(f.before) else f.before
    part = np.zeros(max(f.nodes, int(f.dst.max(initial=0)) + 1), bool)
    part[np.asarray(coll.nodes, dtype=np.int64)] = True
    end = f.dst[last]
    bad = (f.before[last] != deepest) | ~part[end] | (end == f.root) | ~np.isin(f.root, roots)
    if bad.any():
        t = int(np.argmax(bad))
        return f"tree {t} (root {int(f.root[t])}) does not end its route at another participant with its last hop"
    order = np.lexsort((f.lo, end, f.root))
    r, d, lo, hi = f.root[order], end[order], f.lo[order], f.hi[order]
    new = np.r_[True, (r[1:] != r[:-1]) | (d[1:] != d[:-1])]
    ends = np.r_[new[1:], True]
    bad = (hi <= lo) | np.where(new, lo != 0, lo != np.r_[0, hi[:-1]]) | (ends & (hi != f.k))
    pairs = int(new.sum())
    if bad.any() or pairs != len(np.unique(r)) * (len(coll.nodes) - 1):
        i = int(np.argmax(bad)) if bad.any() else 0
        return (f"the routes from {int(r[i]) if len(r) else -1} do not split each block to another participant "
                f"[0, {f.k}) exactly ({pairs:,} pairs routed)")
    return None


@dataclass(frozen=True)
class SyncPrice:
    """The synchronous price of a :class:`PipelinedTrees`: used ``steps`` and the latency and
    bandwidth parts (the fields of :class:`collsynth.tens.cost.Cost` under ``sync``)."""

    steps: int
    T_L_s: float
    T_B_s: float

    @property
    def total_s(self) -> float:
        """``T_L_s + T_B_s``."""
        return self.T_L_s + self.T_B_s


def price_sync(f: PipelinedTrees, instance) -> SyncPrice:
    """The synchronous alpha-beta price of ``f``'s expansion (module doc): hop ``h`` carries
    piece ``q`` in step ``before_h + q + 1``; per step, the largest alpha over links used plus
    the largest load over bandwidth (Zhao et al., NSDI 2025, Section 3.2). Loads are summed once
    per depth below the root (:func:`depth_costs`); with equal pieces in segments of steps with
    the same depths active, with unequal ones (``cuts``) step by step."""
    depths, cost, alpha = depth_costs(f, instance)
    P = f.chunks_per_root * f.pieces
    if f.cuts is not None:
        return _price_unequal(f, depths, cost, alpha)
    starts, stops = depths + 1, depths + P + 1  # active in [start, stop)
    edges = np.unique(np.concatenate([starts, stops]))
    steps, T_L, T_B = 0, 0.0, 0.0
    for a, b in zip(edges[:-1].tolist(), edges[1:].tolist()):
        active = (starts <= a) & (stops > a)
        if not active.any():
            continue
        T_L += (b - a) * float(alpha[active].max())
        T_B += (b - a) * float(cost[active].sum(axis=0).max()) / f.pieces
        steps += b - a
    return SyncPrice(steps, T_L, T_B)


def depth_costs(f: PipelinedTrees, instance) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(depths, cost, alpha)``: the depths below the root the hops occupy (sorted), per depth
    the seconds its hops load each link (a column per distinct load pattern over the depths;
    with a shift, per orbit of links) when every tree sends one whole chunk of its width at
    once, and per depth the largest alpha of its links. A step whose active depths carry the
    fractions ``x_d`` of a chunk costs ``max(alpha_d) + max_j sum_d x_d cost[d, j]``."""
    la = instance.topology.link_arrays
    src, dst = (f.dst, f.src) if f.reversed else (f.src, f.dst)
    group, scale = link_orbits(la, f.shift, f.orders)
    link = group[la.lookup(src, dst)]
    widths = (f.hi - f.lo).astype(np.float64)
    per_hop = np.repeat(widths, np.diff(f.ptr)) / f.k * instance.collective.chunk_bytes
    depths, at = np.unique(f.before, return_inverse=True)
    used, col = np.unique(link, return_inverse=True)
    loads = np.bincount(at * len(used) + col, weights=per_hop, minlength=len(depths) * len(used))
    cost = loads.reshape(len(depths), len(used)) * (scale[used] / la.bandwidth[used])[None, :]
    alpha = np.zeros(len(depths))
    np.maximum.at(alpha, at, la.alpha[link])
    return depths, np.unique(cost, axis=1) if cost.size else cost, alpha


def _price_unequal(f: PipelinedTrees, depths: np.ndarray, cost: np.ndarray, alpha: np.ndarray) -> SyncPrice:
    """:func:`price_sync` with the pieces of ``f.cuts``, step by step: step ``t`` sends piece
    ``t - d - 1`` at each depth ``d`` (the chunk's fraction ``(e_(p+1) - e_p) / E``)."""
    e = f.edges.astype(np.float64)
    frac = np.tile(np.diff(e) / e[-1], f.chunks_per_root)
    P = len(frac)
    q = np.arange(P + int(depths.max(initial=0)))[:, None] - depths[None, :]  # [step - 1, depth] -> piece
    on = (q >= 0) & (q < P)
    share = np.where(on, frac[np.clip(q, 0, P - 1)], 0.0)
    busy = on.any(axis=1)
    T_B = float((share[busy] @ cost).max(axis=1).sum()) if cost.size else 0.0
    T_L = float(np.where(on[busy], alpha[None, :], 0.0).max(axis=1).sum())
    return SyncPrice(int(busy.sum()), T_L, T_B)


def link_orbits(la, shift: np.ndarray | None, orders) -> tuple[np.ndarray, np.ndarray]:
    """``(group, scale)``: per link pair of ``la`` its orbit under the commuting ``shift``
    (the least pair index in it: the least over one shift's powers, then the next's) and, per
    pair, the load factor ``copies / orbit size`` the moved trees put on each link of an orbit
    for one listed hop in it (zero off the representatives). Without shifts every pair is its
    own group at factor 1."""
    L = len(la)
    if shift is None or math.prod(orders) == 1:
        return np.arange(L), np.ones(L)
    key = (id(la), hashlib.blake2b(np.ascontiguousarray(shift, np.int64).tobytes(), digest_size=16).digest(),
           tuple(int(o) for o in orders))
    kept = _ORBITS.get(key)
    if kept is not None and kept[0] is la:  # a pricing per pipeline depth asks again for the same group
        return kept[1], kept[2]
    group = image_orbits(link_images(la, shift), orders, L)
    size = np.bincount(group, minlength=L)
    scale = np.where(size > 0, math.prod(orders) / np.maximum(size, 1), 0.0)
    group.flags.writeable = scale.flags.writeable = False  # shared by the callers: read only
    if len(_ORBITS) >= ORBITS_KEPT:
        _ORBITS.pop(next(iter(_ORBITS)))
    _ORBITS[key] = (la, group, scale)
    return group, scale


ORBITS_KEPT = 8  # the latest groups' link orbits :func:`link_orbits` keeps (its arrays, read only)
_ORBITS: dict = {}


def link_images(la, shift) -> list[np.ndarray]:
    """Per shift (a permutation of the nodes), the pair each link pair of ``la`` goes to (its
    index, -1 where the moved ends are no live pair): the shift acting on the pairs."""
    return [la.lookup(perm[la.src], perm[la.dst]) for perm in shift]


def image_orbits(images: list[np.ndarray], orders, L: int, group: np.ndarray | None = None) -> np.ndarray:
    """Per link pair the least pair index in its orbit under the commuting pair permutations
    ``images`` (of ``orders``; :func:`link_images`), starting from ``group`` (the orbits under
    other shifts commuting with them: the least over one shift's powers of the least so far is
    the least over the group they generate together).

    >>> image_orbits([np.array([1, 2, 0, 3]), np.array([0, 1, 2, 3])], (3, 1), 4).tolist()
    [0, 0, 0, 3]
    """
    group = np.arange(L) if group is None else group
    for image, order in zip(images, orders):
        least, cur = group.copy(), np.arange(L)
        for _ in range(order - 1):
            cur = image[cur]
            np.minimum(least, group[cur], out=least)
        group = least
    return group


ARRAYS = ("root", "lo", "hi", "ptr", "src", "dst", "before")  # the columns a stored form holds
HEADER = ("collective", "nodes", "chunks", "chunks_per_root", "pieces", "k")


def to_json(f: PipelinedTrees) -> dict:
    """``f`` as plain data: the header, the columns and the shift (``null`` without one); the
    form stored and written by ``collsynth solve --out`` (``"form": "pipelined-trees"``)."""
    return {"form": "pipelined-trees", **{name: getattr(f, name) for name in HEADER},
            **{name: getattr(f, name).tolist() for name in ARRAYS},
            "shift": None if f.shift is None else f.shift.tolist(), "orders": list(f.orders),
            "cuts": None if f.cuts is None else np.asarray(f.cuts).tolist()}


def from_json(data: dict, where: str = "trees") -> PipelinedTrees:
    """The :class:`PipelinedTrees` of :func:`to_json`'s data; a missing or mistyped field is an
    :class:`~collsynth.InputError` naming ``where`` and the field.

    >>> f = from_json(to_json(PipelinedTrees("allgather", 2, 2, 1, 3, 1, np.array([0, 1]), np.zeros(2, int),
    ...                                      np.ones(2, int), np.array([0, 1, 2]), np.array([0, 1]),
    ...                                      np.array([1, 0]), np.zeros(2, int))))
    >>> f.pieces, f.sends, f.src.tolist()
    (3, 6, [0, 1])
    """
    from .. import InputError

    if data.get("form") != "pipelined-trees":
        raise InputError(where, f"form: expected \"pipelined-trees\", got {data.get('form')!r}")
    try:
        head = {name: (str if name == "collective" else int)(data[name]) for name in HEADER}
        cols = {name: np.asarray(data[name], dtype=np.int64) for name in ARRAYS}
        shift = None if data.get("shift") is None else np.asarray(data["shift"], dtype=np.int64)
        orders = tuple(int(x) for x in data.get("orders") or ())
        cuts = None if data.get("cuts") is None else np.asarray(data["cuts"], dtype=np.int64)
    except KeyError as e:
        raise InputError(where, f"{e.args[0]}: missing") from None
    except (TypeError, ValueError) as e:
        raise InputError(where, f"a field is not of its type ({e})") from None
    if head["collective"] not in NON_COMBINING:
        raise InputError(where, f"collective: expected one of {', '.join(NON_COMBINING)}, got {head['collective']!r}")
    return PipelinedTrees(**head, **cols, shift=shift, orders=orders, cuts=cuts)


def write_json(f: PipelinedTrees, path) -> None:
    """Write :func:`to_json`'s data to ``path``, whole or not at all
    (:func:`collsynth.outputs.replaced_file`)."""
    import json

    from ..outputs import replaced_file

    with replaced_file(path) as tmp, open(tmp, "w") as out:
        json.dump(to_json(f), out)
        out.write("\n")
