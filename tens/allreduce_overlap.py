"""An allreduce's allgather overlapped with its reduce-scatter, kept as trees plus pipeline rules.

An allreduce is a reduce-scatter then an allgather (Zhao et al., "ForestColl: Throughput-Optimal
Collective Communications on Heterogeneous Network Fabrics", arXiv 2402.06787, Section 4;
Patarasuk and Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations",
JPDC 2009, Section 3). Kept as its halves' trees (:class:`~collsynth.tens.pipelined_allreduce.PipelinedAllreduce`),
the allgather runs in turn after the reduce-scatter's last step; here its steps are shifted by
``delay`` instead (its step ``s`` runs in step ``delay + s``), so that a piece's allgather
starts once its reduction has completed at the piece's owner and the allgather's ramp-up fills
the reduce-scatter's ramp-down. With ``mirror`` every allgather piece ``[lo, hi)`` of a chunk of
``U`` units is placed at ``[U - hi, U - lo)``: the reduce-scatter is the time reversal of its
trees, so its roots complete a tree's last pieces first, and the mirrored allgather sends those first.

The reduce-scatter's tree ``t`` carries piece ``q`` over a hop ``b`` steps below its root in
forward step ``q + b + 1``, reversed into step ``S + 1 - (q + b + 1)`` (``S``: its last step,
the deepest hop's ``b`` plus its pieces per root, :func:`collsynth.tens.schedule.reverse`), so
the piece's reduction completes at the root in step ``S - b_t - q`` (``b_t``: the fewest steps
below the root of a hop leaving the root). The allgather's tree ``t'`` sends its piece ``q'``
out of its root first in step ``delay + b_t' + q' + 1``, which must come after the completion of
every reduce-scatter piece of the same root and chunk it overlaps (data arriving in a step is
sent from the next): :func:`least_delay` is the least ``delay`` that keeps every such pair in
order, over every root (on identical boxes, each distinct pair of the halves' listed roots that
the box shifts move onto one root). Every GPU's contributions to a piece left it before its
reduction completed, so the allgather's copy reaches each GPU after it sent them.

:func:`price_joint` is the synchronous alpha-beta price (Zhao et al., "Efficient Direct-Connect
Topologies for Collective Communications", NSDI 2025, Section 3.2) of the overlapped
expansion: a step carries both halves' loads, so per step the largest alpha of the depths
active in either half plus the largest summed load over bandwidth, on the link classes both
halves' orbits (:func:`collsynth.tens.pipelined_trees.link_orbits`) tell apart (:func:`joint_costs`).

>>> import numpy as np
>>> from collsynth.instances import make_instance
>>> from collsynth.instances.generators import build
>>> from collsynth.tens.pipelined_trees import PipelinedTrees
>>> inst = make_instance(build("ring", {"nodes": 3}), "allreduce", message_bytes=3e9)
>>> hops = [(0, 1, 0), (1, 2, 1), (1, 2, 0), (2, 0, 1), (2, 0, 0), (0, 1, 1)]  # a chain per root
>>> ag = PipelinedTrees("allgather", 3, 3, 1, 4, 1, np.array([0, 1, 2]), np.array([0, 0, 0]),
...                     np.array([1, 1, 1]), np.array([0, 2, 4, 6]), *map(np.array, zip(*hops)))
>>> rs = replace(ag, collective="reduce_scatter")
>>> least_delay(rs, ag, False), least_delay(rs, ag, True)  # piece q completes in step 5 - q
(5, 2)
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from .pipelined_trees import PipelinedTrees, SyncPrice, images, link_orbits


def last_step(h: PipelinedTrees) -> int:
    """The last step of ``h``'s expansion: its deepest hop's steps below the root plus its
    pieces per root (:func:`collsynth.tens.pipelined_trees.expand`)."""
    return int(h.before.max(initial=-1)) + 1 + h.chunks_per_root * h.pieces - 1


def least_delay(rs: PipelinedTrees, ag: PipelinedTrees, mirror: bool) -> int:
    """The least shift of the allgather ``ag``'s steps after which every piece leaves its root
    after the reduce-scatter ``rs`` completed every piece of that root and chunk it overlaps
    (module doc; ``mirror``: the allgather's pieces mirrored in their chunk). Both halves must
    have verified (their trees of a root split its shard exactly)."""
    pairs = _root_pairs(rs, ag)
    S, units = last_step(rs), _units(rs, ag)
    done = _piece_table(rs, pairs[:, 0], units, False)
    sent = _piece_table(ag, pairs[:, 1], units, mirror)
    done["value"] = S - done["value"]  # the step the reduction of the piece completes at its root
    key = np.concatenate([done["key"], sent["key"]])
    start = np.concatenate([done["start"], sent["start"]])
    is_rs = np.r_[np.ones(len(done["key"]), bool), np.zeros(len(sent["key"]), bool)]
    order = np.lexsort((start, key))
    key, start, is_rs = key[order], start[order], is_rs[order]
    index = np.arange(len(order))
    last_rs = np.maximum.accumulate(np.where(is_rs, index, -1))
    last_ag = np.maximum.accumulate(np.where(~is_rs, index, -1))
    end = np.r_[(key[1:] != key[:-1]) | (start[1:] != start[:-1]), True]  # the last start at each point
    a, b = last_rs[end], last_ag[end]
    if (a < 0).any() or (b < 0).any() or (key[a] != key[end]).any() or (key[b] != key[end]).any():
        raise ValueError("a root's chunk is not split by both halves' pieces")
    value = np.concatenate([done["value"], sent["value"]])[order]
    return int((value[a] - value[b]).max())


_PAIRS: list = []  # the last halves' arrays (kept alive, so that their ids stay theirs) and their root pairs


def _root_pairs(rs: PipelinedTrees, ag: PipelinedTrees) -> np.ndarray:
    """``[pairs, 2]``: the distinct (reduce-scatter listed root, allgather listed root) whose
    trees, moved by each half's shifts, are some one root's trees in each half (remembered for
    the last halves asked: a search over pieces and shifts asks for the same trees' pairs)."""
    key = tuple(getattr(h, name) for h in (rs, ag) for name in ("root", "shift", "orders", "nodes"))
    if _PAIRS and all(a is b for a, b in zip(_PAIRS[0], key)):
        return _PAIRS[1]
    _PAIRS[:] = [key, _fresh_root_pairs(rs, ag)]
    return _PAIRS[1]


def _fresh_root_pairs(rs: PipelinedTrees, ag: PipelinedTrees) -> np.ndarray:
    """:func:`_root_pairs` computed."""
    n = max(rs.nodes, ag.nodes, int(rs.root.max(initial=0)) + 1, int(ag.root.max(initial=0)) + 1)
    pattern = [_listed_root_of(h, n) for h in (rs, ag)]
    both = (pattern[0] >= 0) & (pattern[1] >= 0)
    return np.unique(np.stack([pattern[0][both], pattern[1][both]], axis=1), axis=0)


def _listed_root_of(h: PipelinedTrees, n: int) -> np.ndarray:
    """Per node, the listed root of ``h`` whose trees moved by the shifts are that node's (-1
    where the node is no root)."""
    roots = np.unique(h.root)
    out = np.full(n, -1, np.int64)
    if h.copies == 1:
        out[roots] = roots
    else:
        moved = images(roots, h.shift, h.orders)
        out[moved] = np.broadcast_to(roots, moved.shape)
    return out


def first_out(h: PipelinedTrees) -> np.ndarray:
    """Per listed tree of ``h``, the fewest steps below its root of a hop out of the root."""
    tree = np.repeat(np.arange(len(h.root)), np.diff(h.ptr))
    out_of_root = h.src == h.root[tree]
    first = np.full(len(h.root), np.iinfo(np.int64).max // 4, np.int64)
    np.minimum.at(first, tree[out_of_root], h.before[out_of_root].astype(np.int64))
    return first


def _units(rs: PipelinedTrees, ag: PipelinedTrees) -> int:
    """Units of a chunk both halves' piece edges are whole numbers of (a ValueError where
    they would not fit 62 bits)."""
    units = math.lcm(int(rs.k) * int(rs.edges[-1]), int(ag.k) * int(ag.edges[-1]))
    if units >= 1 << 62:
        raise ValueError(f"the halves' piece edges have no common unit within 62 bits ({units:.3e})")
    return units


def _piece_table(h: PipelinedTrees, listed: np.ndarray, units: int, mirror: bool) -> dict:
    """Every piece of ``h``'s trees rooted at each of ``listed`` (one entry per pair of
    :func:`_root_pairs`): ``key`` (pair, chunk), ``start`` (in ``units`` of the chunk; the
    mirrored piece's with ``mirror``) and ``value``, the first step the piece leaves its root
    in (trees' direction): the fewest steps below the root of a hop out of it, plus the piece."""
    first = first_out(h)
    by_root = np.argsort(h.root, kind="stable")
    lo_at = np.searchsorted(h.root[by_root], listed)
    count = np.searchsorted(h.root[by_root], listed, side="right") - lo_at
    pair = np.repeat(np.arange(len(listed)), count)
    trees = by_root[np.repeat(lo_at - np.r_[0, np.cumsum(count)[:-1]], count) + np.arange(int(count.sum()))]
    Q, e = h.chunks_per_root * h.pieces, h.edges.astype(np.int64)
    q = np.arange(Q, dtype=np.int64)
    scale = units // (h.k * int(e[-1]))
    width = (h.hi - h.lo).astype(np.int64)[trees][:, None]
    lo = (h.lo.astype(np.int64)[trees][:, None] * e[-1] + e[q % h.pieces][None, :] * width) * scale
    hi = (h.lo.astype(np.int64)[trees][:, None] * e[-1] + e[q % h.pieces + 1][None, :] * width) * scale
    return {"key": (pair[:, None] * h.chunks_per_root + q[None, :] // h.pieces).ravel(),
            "start": (units - hi if mirror else lo).ravel(), "value": (first[trees][:, None] + q[None, :]).ravel()}


def joint_costs(rs: PipelinedTrees, ag: PipelinedTrees, instance) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``((rs depths, ag depths), cost, alpha)``: each half's depths below the root, per depth
    (rows: the reduce-scatter's, then the allgather's) the seconds its hops load each link class
    when every tree sends one whole chunk of its width (a column per distinct load pattern over the
    classes both halves' orbits
    tell apart), and per depth the largest alpha of its links (module doc)."""
    la = instance.topology.link_arrays
    parts = [_depth_loads(h, la, instance.collective.chunk_bytes) for h in (rs, ag)]
    wanted = np.zeros(len(la), bool)
    for group, used, _, _, _ in parts:
        wanted |= np.isin(group, used)
    link = np.flatnonzero(wanted)
    _, first = np.unique(np.stack([parts[0][0][link], parts[1][0][link]]), axis=1, return_index=True)
    link = link[first]  # one link of each class
    rows = []
    for group, used, loads, scale, _ in parts:
        at = np.minimum(np.searchsorted(used, group[link]), max(len(used) - 1, 0))
        here = (used[at] == group[link]) if len(used) else np.zeros(len(link), bool)
        rows.append(np.where(here[None, :], loads[:, at] * (scale[group[link]] / la.bandwidth[link])[None, :], 0.0))
    cost = np.concatenate(rows)
    cost = np.unique(cost, axis=1) if cost.size else cost
    return (parts[0][4][0], parts[1][4][0]), cost, np.concatenate([parts[0][4][1], parts[1][4][1]])


def _depth_loads(h: PipelinedTrees, la, chunk_bytes: float) -> tuple:
    """``(group, used, loads, scale, (depths, alpha))`` of half ``h``: per link pair its orbit
    (:func:`collsynth.tens.pipelined_trees.link_orbits`), the orbits its hops use (sorted), the
    bytes its listed hops put on each per depth (``[depths, used]``), the orbits' load factors,
    and its depths with their largest alphas."""
    src, dst = (h.dst, h.src) if h.reversed else (h.src, h.dst)
    group, scale = link_orbits(la, h.shift, h.orders)
    link = la.lookup(src, dst)
    per_hop = np.repeat((h.hi - h.lo).astype(np.float64), np.diff(h.ptr)) / h.k * chunk_bytes
    depths, at = np.unique(h.before, return_inverse=True)
    used, col = np.unique(group[link], return_inverse=True)
    loads = np.bincount(at * len(used) + col, weights=per_hop, minlength=len(depths) * len(used))
    alpha = np.zeros(len(depths))
    np.maximum.at(alpha, at, la.alpha[link])
    return group, used, loads.reshape(len(depths), len(used)), scale, (depths.astype(np.int64), alpha)


def price_joint(rs: PipelinedTrees, ag: PipelinedTrees, delay: int, costs) -> SyncPrice:
    """The synchronous price of the reduce-scatter ``rs`` and the allgather ``ag`` shifted by
    ``delay`` steps (module doc), from :func:`joint_costs`'s ``costs``: step ``t`` carries the
    reduce-scatter's piece ``S - t - d`` at each of its depths ``d`` (the time reversal) and the
    allgather's piece ``t - delay - d - 1``; ``steps`` is the last step used."""
    (d_rs, d_ag), cost, alpha = costs
    S = last_step(rs)
    first = min(1, delay + 1)
    t = np.arange(first, max(S, delay + last_step(ag)) + 1)[:, None]
    share = np.concatenate([_shares(rs, S - t - d_rs[None, :]), _shares(ag, t - delay - d_ag[None, :] - 1)], axis=1)
    on = share > 0
    busy = on.any(axis=1)
    T_B = float((share[busy] @ cost).max(axis=1).sum()) if cost.size else 0.0
    T_L = float(np.where(on[busy], alpha[None, :], 0.0).max(axis=1).sum()) if busy.any() else 0.0
    return SyncPrice(int(t[busy].max()) if busy.any() else 0, T_L, T_B)


def _shares(h: PipelinedTrees, q: np.ndarray) -> np.ndarray:
    """The fraction of a chunk of each piece index in ``q`` (0 outside ``[0, pieces per root)``)."""
    e = h.edges.astype(np.float64)
    frac = np.tile(np.diff(e) / e[-1], h.chunks_per_root)
    on = (q >= 0) & (q < len(frac))
    return np.where(on, frac[np.clip(q, 0, len(frac) - 1)], 0.0)


def mirrored(lo: np.ndarray, hi: np.ndarray, denom: int) -> tuple[np.ndarray, np.ndarray]:
    """Pieces ``[lo, hi)`` of a chunk of ``denom`` units placed mirrored: ``[denom - hi, denom - lo)``."""
    return denom - hi, denom - lo
