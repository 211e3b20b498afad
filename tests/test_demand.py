"""The demand the lower bounds read (tens/bounds.py): its distinct rows, the per-node needs, the
per-row crossings and the distance, against plain whole-matrix formulas written out here, with
any block size.
That the bounds built on them stay valid is tests/test_bounds.py's business (optima, schedules)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from collsynth.instances.collective import KINDS, ROOTED
from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.tens import bounds
from builders import instance_on


@st.composite
def bool_rows(draw):
    """Two boolean matrices of equal shape, many of whose rows repeat."""
    rows, width = draw(st.integers(1, 30)), draw(st.integers(1, 70))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    pre, post = rng.random((rows, width)) < 0.3, rng.random((rows, width)) < 0.3
    copies = rng.integers(0, rows, rows // 2)
    pre[copies], post[copies] = pre[0], post[0]
    return pre, post


def _by_numpy(pre, post):
    keys = np.concatenate([np.packbits(pre, axis=1), np.packbits(post, axis=1)], axis=1)
    _, first, count = np.unique(keys, axis=0, return_index=True, return_counts=True)
    order = np.argsort(first)
    return first[order].tolist(), count[order].tolist()


@settings(max_examples=150, deadline=None)
@given(bool_rows())
def test_distinct_rows_are_numpys_unique_rows_in_row_order(pair):
    first, count = bounds.distinct_rows(*pair)
    assert (first.tolist(), count.tolist()) == _by_numpy(*pair)


@settings(max_examples=40, deadline=None)
@given(bool_rows())
def test_distinct_rows_survive_every_hash_colliding(pair):
    """A hash shared by different rows: the bit-for-bit check catches it and sorts exactly."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bounds.demand, "_row_hashes", lambda words: np.zeros(len(words[0]), np.uint64))
        first, count = bounds.distinct_rows(*pair)
    assert (first.tolist(), count.tolist()) == _by_numpy(*pair)


@st.composite
def instances(draw):
    """Every kind on a small ring, torus or complete graph, on all NPUs or some of them."""
    gen, params = draw(st.sampled_from([("ring", {"nodes": 5}), ("torus", {"dims": [2, 3]}),
                                        ("complete", {"nodes": 4})]))
    topo = build(gen, params)
    kind = draw(st.sampled_from(KINDS))
    nodes = topo.npus
    if kind not in ROOTED and draw(st.booleans()):
        nodes = draw(st.lists(st.sampled_from(topo.npus), min_size=2, max_size=len(nodes), unique=True))
    root = draw(st.sampled_from(nodes)) if kind in ROOTED else None
    return make_instance(topo, kind, chunks_per_node=draw(st.integers(1, 3)), message_bytes=6e5, root=root,
                         nodes=nodes)


def _reference_rows(instance) -> Counter:
    """(collective, pre row, post row) -> chunks, for every chunk that must move somewhere."""
    rows: Counter = Counter()
    for g, coll in enumerate(instance.collectives):
        for pre, post in zip(coll.precondition, coll.postcondition):
            if pre.any() and post.any() and (coll.combining or (post & ~pre).any()):
                rows[g, pre.tobytes(), post.tobytes()] += 1
    return rows


@settings(max_examples=120, deadline=None)
@given(instances(), st.sampled_from([None, 3, 40]))
def test_demand_rows_are_the_moving_chunks_grouped(inst, cells):
    """Each distinct (pre, post) row once, with its chunk count and bytes, whatever the block."""
    with pytest.MonkeyPatch.context() as mp:
        if cells is not None:
            mp.setattr(bounds.demand, "BLOCK_CELLS", cells)
        d = bounds.demand_of(inst)
    got = Counter({(int(g), p.tobytes(), q.tobytes()): int(c) for g, p, q, c in zip(d.group, d.pre, d.post, d.count)})
    assert got == _reference_rows(inst) and len(got) == len(d)
    sizes = np.array([c.chunk_bytes for c in inst.collectives])
    assert np.allclose(d.nbytes, d.count * sizes[d.group], rtol=1e-12)
    assert (d.combining == np.array([c.combining for c in inst.collectives])[d.group]).all()


def _needs_by_formula(demand, weight):
    pre, post = demand.pre, demand.post
    n_pre, n_post = pre.sum(axis=1), post.sum(axis=1)
    into = np.zeros(pre.shape[1])
    out_of = np.zeros(pre.shape[1])
    for r in range(len(demand)):
        for v in range(pre.shape[1]):
            others_hold = n_pre[r] - pre[r, v] > 0
            if post[r, v] and (others_hold if demand.combining[r] else not pre[r, v]):
                into[v] += weight[r]
            alone = demand.combining[r] or n_pre[r] == 1
            if pre[r, v] and alone and n_post[r] - post[r, v] > 0:
                out_of[v] += weight[r]
    return into, out_of


def _crossings_by_formula(arcs, demand, w):
    """Per row: the old whole-row formula (the cheapest in-links of every needing node, or the
    farthest needing node from the nearest holder, whichever is more; combining rows too)."""
    n = arcs.size
    min_in, min_out = np.full(n, np.inf), np.full(n, np.inf)
    np.minimum.at(min_in, arcs.dst, w)
    np.minimum.at(min_out, arcs.src, w)
    D = bounds.shortest_paths(arcs, w, np.arange(n))
    out = []
    for pre, post, comb in zip(demand.pre, demand.post, demand.combining):
        H = np.flatnonzero(pre)
        if comb:
            fed = post & ((pre.sum() - pre) > 0)
            gossip = min_out[pre].sum() + min_in[post].sum() - (np.where(pre, min_out, 0) + np.where(post, min_in, 0)).max()
            spread = max(min_out[pre & ~post].sum(), min_in[fed].sum(), gossip)
            far = D[np.ix_(H, np.flatnonzero(post))].max()
        else:
            P = np.flatnonzero(post & ~pre)
            spread, far = min_in[P].sum(), D[np.ix_(H, P)].min(axis=0).max()
        out.append(max(spread, far))
    return np.array(out)


@settings(max_examples=120, deadline=None)
@given(instances(), st.integers(0, 2**32 - 1))
def test_node_needs_and_crossings_are_the_whole_matrix_formulas(inst, seed):
    demand, arcs = bounds.demand_of(inst), bounds.arcs_of(inst.topology)
    weight = np.random.default_rng(seed).integers(1, 9, len(demand)).astype(float)  # sums exact in any order
    into, out_of = bounds.cuts._node_needs(demand, weight)
    want_in, want_out = _needs_by_formula(demand, weight)
    assert into.tolist() == want_in.tolist() and out_of.tolist() == want_out.tolist()
    lengths = np.random.default_rng(seed).integers(1, 4, len(arcs.src)).astype(float)
    for w in (np.ones(len(arcs.src)), lengths):
        assert bounds.crossings(arcs, demand, w).tolist() == _crossings_by_formula(arcs, demand, w).tolist()
        _check_distance(arcs, demand, w)


@settings(max_examples=120, deadline=None)
@given(bool_rows(), st.integers(0, 2**32 - 1))
def test_node_needs_and_crossings_of_any_rows(pair, seed):
    """Rows no collective makes alone (several holders of a copied chunk: a TEN state), mixed
    with combining rows, on a ring with random link lengths."""
    pre, post = pair
    rng = np.random.default_rng(seed)
    n, rows = pre.shape[1] + 1, np.arange(len(pre))
    pre, post = np.c_[pre, np.zeros(len(pre), bool)], np.c_[post, np.zeros(len(pre), bool)]
    pre[rows, rng.integers(0, n, len(pre))] = True  # a holder and a node needing each row
    post[rows, rng.integers(0, n, len(pre))] = True
    combining = rng.random(len(pre)) < 0.3
    post[~combining] |= ~pre[~combining] & (rng.random(((~combining).sum(), n)) < 0.5)
    keep = combining | (post & ~pre).any(axis=1)
    d = bounds.Demand(pre[keep], post[keep], combining[keep], np.ones(keep.sum(), np.int64), np.ones(keep.sum()),
                      np.zeros(keep.sum(), np.int64))
    weight = rng.integers(1, 9, len(d)).astype(float)
    into, out_of = bounds.cuts._node_needs(d, weight)
    want_in, want_out = _needs_by_formula(d, weight)
    assert into.tolist() == want_in.tolist() and out_of.tolist() == want_out.tolist()
    arcs = bounds.arcs_of(build("ring", {"nodes": max(n, 3)}))
    d = bounds.Demand(*(np.c_[m, np.zeros((len(d), max(n, 3) - n), bool)] for m in (d.pre, d.post)),
                      d.combining, d.count, d.nbytes, d.group)
    w = rng.integers(1, 4, len(arcs.src)).astype(float)
    assert bounds.crossings(arcs, d, w).tolist() == _crossings_by_formula(arcs, d, w).tolist()
    _check_distance(arcs, d, w)


def _check_distance(arcs, demand, w):
    """The distance bound is the farthest needed (chunk, node) from its nearest holder (from
    its farthest contributor, combining), and its witness pair is that far apart."""
    D = bounds.shortest_paths(arcs, w, np.arange(arcs.size))
    far = 0.0
    for pre, post, comb in zip(demand.pre, demand.post, demand.combining):
        sub = D[np.ix_(np.flatnonzero(pre), np.flatnonzero(post if comb else post & ~pre))]
        far = max(far, float((sub.max(axis=0) if comb else sub.min(axis=0)).max()))
    value, pair = bounds.distance(arcs, demand, w)
    assert value == far and (pair is None if far == 0 else D[pair] == far)


def test_a_demand_whose_every_chunk_moves_is_the_collectives_own_matrices():
    """No copy of the condition matrices when every row moves and no two are alike (on an
    all-to-all of 1,024 nodes each matrix is a GiB); an all-to-all drops the chunks a node
    keeps for itself."""
    full = instance_on("ring", {"nodes": 6})
    g = bounds.demand_of(full)
    assert g.pre is full.collective.precondition and g.post is full.collective.postcondition
    assert len(bounds.demand_of(instance_on("ring", {"nodes": 6}, "alltoall"))) == 30  # 36 pairs less 6


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(1, 7), st.integers(0, 2**32 - 1), st.booleans())
def test_column_reach_is_the_submatrix_reduction(n_rows, n_cols, seed, farthest):
    """The distance and crossings read a row's holders x needing nodes through
    :func:`column_reach`, never the submatrix itself: its per-column largest (least) distance is
    numpy's ``D[np.ix_(rows, cols)].max(axis=0)`` (``.min``), unreachable nodes (inf) and
    repeated rows and columns included."""
    rng = np.random.default_rng(seed)
    D = rng.integers(0, 5, (8, 9)).astype(float)
    D[rng.random(D.shape) < 0.2] = np.inf
    rows, cols = rng.integers(0, 8, n_rows), rng.integers(0, 9, n_cols)
    sub = D[np.ix_(rows, cols)]
    want = sub.max(axis=0) if farthest else sub.min(axis=0)
    assert bounds.distances.column_reach(D, rows, cols, farthest).tolist() == want.tolist()


@settings(max_examples=20, deadline=None)
@given(instances(), st.integers(1, 40))
def test_shortest_paths_in_batches_are_one_dijkstra(inst, batch):
    """The distance matrix filled batch by batch (a few entries a batch) is scipy's Dijkstra
    over every source at once."""
    from unittest.mock import patch
    import scipy.sparse as sp
    from scipy.sparse.csgraph import dijkstra
    arcs = bounds.arcs_of(inst.topology)
    w = np.arange(1, len(arcs.src) + 1, dtype=float)  # distinct weights: not a breadth-first search
    sources = np.arange(arcs.size)[::-1].copy()
    with patch.object(bounds.distances, "PATH_BATCH", batch), patch.dict(bounds.distances._PATHS, clear=True), \
            patch.dict(bounds.distances._COMPACT, clear=True):
        D = bounds.shortest_paths(arcs, w, sources)
    adj = sp.csr_matrix((w, (arcs.src, arcs.dst)), shape=(arcs.size, arcs.size))
    assert D.tolist() == dijkstra(adj, directed=True, indices=sources).tolist()


@settings(max_examples=20, deadline=None)
@given(instances(), st.integers(1, 40), st.integers(0, 2**32 - 1))
def test_distance_matrices_kept_compact_are_restored_exactly(inst, batch, seed):
    """A distance matrix of whole numbers (hop counts, integer weights) kept compact once another
    weighting took its place, and once the bounds that read it are done (release_paths), comes
    back entry for entry as scipy's Dijkstra gives it; one of fractional lengths is dropped
    (recomputed, never rounded); none stays as float64 after the release."""
    from unittest.mock import patch
    import scipy.sparse as sp
    from scipy.sparse.csgraph import dijkstra
    arcs = bounds.arcs_of(inst.topology)
    rng = np.random.default_rng(seed)
    whole = rng.integers(1, 300, len(arcs.src)).astype(float)  # sums may pass 255: two-byte entries
    frac = rng.random(len(arcs.src)) + 0.5
    sources = rng.permutation(arcs.size)[:max(1, arcs.size // 2)]

    def direct(w):
        adj = sp.csr_matrix((w, (arcs.src, arcs.dst)), shape=(arcs.size, arcs.size))
        return dijkstra(adj, directed=True, indices=sources).tolist()

    d = bounds.distances
    with patch.object(d, "PATH_BATCH", batch), patch.dict(d._PATHS, clear=True), patch.dict(d._COMPACT, clear=True):
        for w in (whole, np.ones(len(whole)), frac, whole, np.ones(len(whole)), frac):
            assert d.shortest_paths(arcs, w, sources).tolist() == direct(w)
        assert len(d._COMPACT) == 2  # the two whole-number weightings
        d.release_paths()
        assert not d._PATHS and len(d._COMPACT) == 2
        assert all(D.dtype in (np.uint8, np.uint16) for D in d._COMPACT.values())
        assert d.shortest_paths(arcs, whole, sources).tolist() == direct(whole)


def test_bounds_release_their_distance_matrices_with_the_same_values():
    """Once an instance's bounds are computed no distance matrix stays as float64, and the
    bounds computed again from the compact ones are the same, part for part."""
    from unittest.mock import patch
    d = bounds.distances
    inst = make_instance(build("dgx_h100", {"nodes": 2}), "allreduce", message_bytes=1e6)
    with patch.dict(d._PATHS, clear=True), patch.dict(d._COMPACT, clear=True):
        first = bounds.Bounds(inst, None, 5.0)
        want = [repr(first.part(m)) for m in ("event", "sync_bandwidth", "timesteps")]
        assert not d._PATHS and d._COMPACT
        again = bounds.Bounds(inst, None, 5.0)
        assert [repr(again.part(m)) for m in ("event", "sync_bandwidth", "timesteps")] == want
