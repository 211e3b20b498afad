"""The staggered program of benchmarks/bench_tier3_stagger.py: paired it is the piece-size program
of bench_tier3_tree_mix; staggered it is the least over sizes found by a grid of schedules priced
step by step here; a case derived by hand where sizing the halves apart gains."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_tier3_stagger as stagger  # noqa: E402
from bench_tier3_tree_mix import _least  # noqa: E402


@st.composite
def families(draw):
    """A piece's rows: ``D`` reduce-scatter rows at steps ``1 .. D``, ``D`` allgather rows after,
    loads 0-2 on one to three links (every row loading one at least), alphas 0 or 0.5."""
    D, J = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    row = st.lists(st.integers(0, 2), min_size=J, max_size=J)
    cost = np.array(draw(st.lists(row, min_size=2 * D, max_size=2 * D)), float)
    cost[cost.sum(axis=1) == 0, 0] = 1.0
    alpha = np.array(draw(st.lists(st.sampled_from([0.0, 0.5]), min_size=2 * D, max_size=2 * D)))
    return np.arange(1, 2 * D + 1), cost, alpha


def _priced(family, x, y) -> float:
    """``T_B`` of the reduce-scatter's pieces ``x`` and the allgather's ``y`` at slots 0, 1, ...,
    step by step: each step's loads added per link, the largest summed over the steps."""
    (rs_steps, rs_cost, _, _), (ag_steps, ag_cost, _, _) = stagger.halves(family)
    loads = np.zeros((len(x) + ag_steps.max() + 1, rs_cost.shape[1]))
    for sizes, steps, cost in ((x, rs_steps, rs_cost), (y, ag_steps, ag_cost)):
        for o, size in enumerate(sizes):
            for step, row in zip(steps, cost):
                loads[o + step] += size * row
    return float(loads.max(axis=1).sum())


@settings(max_examples=40, deadline=None)
@given(families(), st.integers(1, 4))
def test_paired_is_the_piece_size_program(family, slots):
    """Paired slot by slot, the program is the piece-size program over the pair as priced."""
    rs, ag = stagger.halves(family)
    want = _least({"f": family}, [("f", o) for o in range(slots)])
    assert stagger.staggered([rs], [ag], slots, coupled=True) == pytest.approx(want, abs=1e-7)
    assert stagger.staggered([rs], [ag], slots)[0] <= want[0] + 1e-7


@settings(max_examples=40, deadline=None)
@given(families())
def test_staggered_is_the_least_over_a_grid_of_schedules(family):
    """Two slots, sizes in twelfths, the allgather's first piece at most the reduce-scatter's
    (the bytes it may carry): no schedule of the grid is below the program, and the grid's best
    is within the grid's step times the loads of one piece of it."""
    rs, ag = stagger.halves(family)
    got = stagger.staggered([rs], [ag], 2)[0]
    grid = [_priced(family, (i / 12, 1 - i / 12), (j / 12, 1 - j / 12)) for i in range(13) for j in range(i + 1)]
    assert min(grid) >= got - 1e-7
    assert min(grid) <= got + family[1].sum() / 12 + 1e-7


def test_sizing_the_halves_apart_gains_by_hand():
    """Two links ``a``, ``b``; a reduce-scatter piece loads ``a`` then ``b`` (1 each), its
    allgather ``b`` (1) then ``a`` (2). Two slots paired, sizes ``x, 1 - x``: the steps carry
    ``x``, ``max(x, 1 - x)``, ``1``, ``max(2 x, 1 - x)``, ``2 (1 - x)``, at least 4 (exactly 4
    for ``1/3 <= x <= 1/2``). Apart, the allgather's ``u, 1 - u`` (``u <= x``): ``x``,
    ``max(x, 1 - x)``, ``u + 1 - x``, ``max(2 u, 1 - u)``, ``2 (1 - u)``, least 23/6 at ``x =
    1/2``, ``u = 1/3``."""
    family = (np.array([1, 2, 3, 4]), np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [2.0, 0.0]]), np.zeros(4))
    rs, ag = stagger.halves(family)
    assert stagger.staggered([rs], [ag], 2, coupled=True)[0] == pytest.approx(4.0)
    assert stagger.staggered([rs], [ag], 2)[0] == pytest.approx(23 / 6)
    assert _priced(family, (0.5, 0.5), (1 / 3, 2 / 3)) == pytest.approx(23 / 6)


def test_a_byte_allgathered_before_its_reduce_scatter_ends_is_refused():
    """A reduce-scatter piece loads link 0 (1), its allgather link 1 (1) a step later. One slot:
    2. Three slots price ``x0 + max(x1, y0) + max(x2, y1) + y2``; free of the reduce-scatter's end,
    ``x = (0, 1/2, 1/2)``, ``y = (1/2, 1/2, 0)`` would give 1. With ``y0 <= x0`` and ``y0 + y1 <=
    x0 + x1`` it is at least ``1 + x0``, ``1 + x1`` (``x0 + x1 + y1 + y2``) and ``1 + x2`` (``y2
    >= x2``), so at least 4/3, met by thirds."""
    family = (np.array([1, 2]), np.array([[1.0, 0.0], [0.0, 1.0]]), np.zeros(2))
    rs, ag = stagger.halves(family)
    assert stagger.staggered([rs], [ag], 1)[0] == pytest.approx(2.0)
    assert stagger.staggered([rs], [ag], 3)[0] == pytest.approx(4 / 3)


def test_an_allgather_family_waits_for_a_deeper_reduce_scatter():
    """A reduce-scatter two steps deep (link 0, 1 a step) feeding an allgather family one step
    deep (its row at step 2 of its slot, link 1): an allgather slot ``o`` starts at ``o + 2``,
    when only reduce-scatter slots up to ``o - 1`` are complete. One slot leaves nothing to
    allgather (refused); two put the message in the first reduce-scatter slot and the second
    allgather slot: steps 1, 2 and 3 each carry 1."""
    rs = (np.array([1, 2]), np.array([[1.0, 0.0], [1.0, 0.0]]), np.zeros(2), 2)
    ag = (np.array([2]), np.array([[0.0, 1.0]]), np.zeros(1), 1)
    with pytest.raises(ValueError, match="staggered program"):
        stagger.staggered([rs], [ag], 1)
    assert stagger.staggered([rs], [ag], 2)[0] == pytest.approx(3.0)


def test_merged_links_price_the_same():
    """Links loaded alike in every row of both families become one column, the price unchanged."""
    steps = np.array([1, 2, 3, 4])
    a = (steps, np.array([[1, 1, 0, 0], [0, 0, 1, 0.5], [0, 0, 1, 0.5], [2, 2, 0, 0]], float), np.zeros(4))
    b = (steps, np.array([[0.5, 0.5, 1, 0], [0, 0, 1, 0], [1, 1, 0, 0], [1, 1, 0, 0]], float), np.zeros(4))
    ma, mb = stagger.link_classes(a, b)
    assert ma[1].shape[1] == 3 and mb[1].shape[1] == 3

    def price(x, y):
        (rx, ax), (ry, ay) = stagger.halves(x), stagger.halves(y)
        return stagger.staggered([rx, ry], [ax, ay], 3)

    assert price(ma, mb) == pytest.approx(price(a, b))


def test_the_docstring_examples():
    """The module's docstring examples (the benchmarks are not walked by the package's doctests)."""
    import doctest

    got = doctest.testmod(stagger)
    assert got.attempted >= 4 and got.failed == 0
