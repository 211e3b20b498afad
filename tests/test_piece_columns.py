"""A schedule's piece bounds (lo, hi) are int32 only when the denominator and every bound are at
most 2**30 - 1 (tens/schedule.py, piece_columns), kept exactly either way, and widened before they are
scaled; the verdict and every price of tree packing's explicit sends on small Clos fabrics are the
same with the narrow bounds as with int64 ones; an allgather's expansion is in step order and the
reduce-scatter's listing by owner rotation (tens/pipelined_trees.py, owners_ahead) is the stable
(step, key) order, and its expansion (each column reordered in turn, the listing dropped as it goes) is
the listing gathered by np.lexsort, column for column and type for type."""

from dataclasses import replace

import numpy as np
from hypothesis import example, given, settings, strategies as st

from compact_checks import SMALL_CLOS
from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.solvers.packing.compact import at_pieces
from collsynth.solvers.packing.producer import run_compact
from collsynth.solvers.producers import Options
from collsynth.tens import cost, schedule as sch, verify
from collsynth.tens.dependencies import step_view
from collsynth.tens.pipelined_trees import expand, keeping_first, listed_columns, owners_ahead, rotation

LIMIT = 2**30 - 1  # the largest bound whose sum with another (or with the denominator) is below 2**31


@st.composite
def _pieces_near_the_limit(draw):
    """A denominator and two piece bounds each within a few of 2**30 or 2**31 (or anywhere)."""
    near = st.one_of(st.integers(LIMIT - 3, LIMIT + 3), st.integers(2**31 - 3, 2**31 + 3), st.integers(1, 2**32))
    denom = draw(near)
    a, b = sorted((draw(st.integers(0, denom)), draw(st.integers(0, denom))))
    return denom, a, b


@given(_pieces_near_the_limit())
@example((LIMIT, LIMIT - 1, LIMIT))
@example((LIMIT + 1, 0, 1))
@example((2**31 - 1, 0, 2**31 - 1))
def test_bounds_are_int32_only_when_they_and_the_denominator_fit(piece):
    denom, lo, hi = piece
    s = sch.from_arrays("allgather", 2, 2, chunk=[0, 1], src=[0, 1], dst=[1, 0], step=[1, 1],
                        lo=[lo, 0], hi=[hi, denom], denom=denom)
    fits = denom <= LIMIT
    assert s.lo.dtype == s.hi.dtype == (np.int32 if fits else np.int64)
    assert s.lo.tolist() == [lo, 0] and s.hi.tolist() == [hi, denom]
    assert (s.hi - s.lo).tolist() == [hi - lo, denom]  # never wraps
    part = s.select(np.array([True, False]))  # bounds all below the denominator: its type still follows it
    assert part.lo.dtype == (np.int32 if fits else np.int64)
    assert (part.denom - part.hi).tolist() == [denom - hi] and (part.lo + part.denom).tolist() == [lo + denom]
    scaled = s.with_denom(denom * 3)  # past 2**31 from int32 bounds: widened, exact
    assert scaled.lo.tolist() == [3 * lo, 0] and scaled.hi.tolist() == [3 * hi, 3 * denom]
    assert scaled.lo.dtype == (np.int32 if 3 * denom <= LIMIT else np.int64)


def test_a_negative_or_oversized_bound_is_kept_whole_for_the_verifier():
    inst = make_instance(build("ring", {"nodes": 2}), "allgather")
    for lo, hi in ((-1, 1), (0, 2**31 + 1)):
        s = sch.from_arrays("allgather", 2, 2, chunk=[0, 1], src=[0, 1], dst=[1, 0], step=[1, 1],
                            lo=np.array([lo, 0], np.int32 if hi < 2**31 else np.int64), hi=[hi, 1], denom=1)
        assert s.lo.dtype == np.int64 and s.lo.tolist() == [lo, 0] and s.hi.tolist() == [hi, 1]
        v = verify.verify(s, inst)
        assert v is not None and v.index == 0


def _wide(s):
    """``s`` with int64 piece bounds (the columns as they were before the narrowing)."""
    out = replace(s)
    object.__setattr__(out, "lo", s.lo.astype(np.int64))
    object.__setattr__(out, "hi", s.hi.astype(np.int64))
    return out


def _outcome(s, inst):
    v = verify.verify(s, inst)
    prices = []
    for price in (cost.price_sync, cost.price_event, lambda s, i: cost.price_event(s, i, exact_deps=False),
                  cost.price_ten):
        c = price(s, inst)
        prices.append((c.steps, c.T_L_s, c.T_B_s, c.total_s, {k: repr(x) for k, x in c.extra.items()}))
    return (None if v is None else (v.index, v.step, v.reason)), prices


@settings(max_examples=10, deadline=None)
@given(SMALL_CLOS, st.sampled_from(["allgather", "reduce_scatter"]), st.integers(1, 3), st.integers(0, 2**31))
def test_narrow_bounds_verify_and_price_as_int64_ones(fabric, kind, pieces, seed):
    inst = make_instance(build(*fabric), kind, message_bytes=float(1 << 20))
    trees = run_compact(inst, Options(time_limit=30, params={"form": "compact"})).schedule
    s = expand(at_pieces(trees, min(pieces, trees.pieces)))
    assert s.lo.dtype == np.int32
    if kind == "allgather":  # listed in step order: the step view shares the columns
        assert (np.diff(s.step) >= 0).all() and step_view(s).order is None
    rng = np.random.default_rng(seed)
    i = int(rng.integers(len(s)))
    lo = s.lo.astype(np.int64) * 2
    lo[i] += 1  # a piece that no longer starts where one arrived: invalid whenever it is forwarded
    cut = replace(s.with_denom(2 * s.denom), lo=lo)
    for t in (s, cut, s.select(np.arange(len(s)) != i)):
        assert t.lo.dtype == np.int32 and _wide(t).lo.dtype == np.int64
        assert _outcome(t, inst) == _outcome(_wide(t), inst)


@given(st.lists(st.tuples(st.integers(1, 6), st.integers(0, 4)), min_size=1, max_size=60))
def test_owners_ahead_lists_by_step_then_key_stably(rows):
    step, key = (np.array(c, np.int32) for c in zip(*rows))
    n = len(rows)
    s = sch.from_arrays("allgather", 4, n, chunk=np.arange(n), src=np.zeros(n, int), dst=np.ones(n, int), step=step)
    out = owners_ahead(s, key)
    assert out.chunk.tolist() == np.lexsort((key, step)).tolist()
    assert out.step.tolist() == sorted(step.tolist())


def _by_lexsort(f, participants):
    """The reduce-scatter expansion of ``f`` the straightforward way: its listing
    (:func:`listed_columns`) gathered at once by ``np.lexsort((key, step))``, the key the owner
    rotation of the listed send (the first of its copies) each send is an image of."""
    f = keeping_first(f)
    cols = listed_columns(f, len(f.orders) if f.shift is not None else 0)
    C = f.copies
    ranks = np.unique(np.asarray(participants))
    listed_src, listed_chunk = cols["src"][::C], cols["chunk"][::C]
    key = np.repeat(rotation(listed_chunk, listed_src, f.chunks_per_root, ranks), C)
    order = np.lexsort((key, cols["step"]))
    return {name: v[order] for name, v in cols.items()}


@settings(max_examples=10, deadline=None)
@given(SMALL_CLOS, st.integers(1, 3))
def test_reduce_scatter_expansion_is_its_listing_in_lexsort_order(fabric, pieces):
    inst = make_instance(build(*fabric), "reduce_scatter", message_bytes=float(1 << 20))
    trees = run_compact(inst, Options(time_limit=30, params={"form": "compact"})).schedule
    f = at_pieces(trees, min(pieces, trees.pieces))
    s = expand(f)
    want = _by_lexsort(f, inst.collective.nodes)
    assert s.collective == "reduce_scatter" and s.link_order == "program" and s.denom == f.k * int(f.edges[-1])
    assert (s.op == 0).all() and s.op.dtype == np.int8
    for name, column in want.items():
        got = getattr(s, name)
        assert got.dtype == column.dtype and got.tolist() == column.tolist(), name
    assert verify.verify(s, inst) is None
