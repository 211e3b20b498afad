"""The rooted depth bound's refined program built with numpy (``split_rows``,
:mod:`collsynth.tens.bounds.rooted_depth`) is the program the per-row loop built before it, entry
for entry, so its values and the bound's are unchanged (equal, not approximately):

- random tails, profiles and step counts (hypothesis): the same sparse rows, right-hand sides and
  ``split_lp`` value as the loop below (the previous code, kept here as the reference);
- the whole bound on a triangle, a line and a small switched pair searched over the step counts
  with either program: the same value.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import sparse
from scipy.optimize import linprog

from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.instances.topology import from_edges
from collsynth.tens.bounds import instance_bounds, rooted_depth
from collsynth.tens.bounds.rooted_depth import split_lp, split_rows


def loop_rows(S, tails, profiles):
    """The program as the per-row loop built it (the previous ``split_lp``, unchanged)."""
    K = len(tails)
    b, u, m = np.arange(S), S + np.arange(S), 2 * S + np.arange(S)
    x = [3 * S + k * S + np.arange(S) for k in range(K)]
    n = (3 + K) * S
    ub, eq = ([], [], []), ([], [], [])
    rhs_ub, rhs_eq = [], []

    def row(rows, rhs, entries, bound):
        for j, v in entries:
            rows[0].append(len(rhs))
            rows[1].append(j)
            rows[2].append(v)
        rhs.append(bound)

    def step(var, t, sign=1.0):
        return [(var[t], sign)] + ([(var[t - 1], -sign)] if t else [])

    for t in range(S):
        row(eq, rhs_eq, step(u, t) + [(b[t], -1.0)], 0.0)
        row(ub, rhs_ub, sum((step(x[k], t) for k in range(K)), step(m, t)) + [(b[t], -1.0)], 0.0)
        for k, (_, share) in enumerate(tails):
            row(ub, rhs_ub, step(x[k], t) + [(b[t], -share)], 0.0)
            if t:
                row(ub, rhs_ub, step(x[k], t, -1.0), 0.0)
        if t:
            row(ub, rhs_ub, step(m, t, -1.0), 0.0)
        row(ub, rhs_ub, [(x[k][t], 1.0) for k in range(K)] + [(m[t], 2.0), (u[t], -1.0)], 0.0)
    for out, d, depths in profiles:
        for s in range(S + 1):
            entries = [(var[min(S, s + D - 1) - 1], 1.0) for var, D in zip(x + [m], list(depths) + [d])
                       if s + D - 1 >= 1]
            if entries:
                row(ub, rhs_ub, entries + ([(u[s - 1], -out)] if s else []), 0.0)
    row(ub, rhs_ub, [(x[k][S - 1], -1.0) for k in range(K)] + [(m[S - 1], -1.0)], -1.0)
    A_ub = sparse.csr_matrix((ub[2], (ub[0], ub[1])), shape=(len(rhs_ub), n))
    A_eq = sparse.csr_matrix((eq[2], (eq[0], eq[1])), shape=(len(rhs_eq), n))
    return A_ub, np.array(rhs_ub), A_eq, np.array(rhs_eq)


def loop_lp(S, tails, profiles):
    A_ub, b_ub, A_eq, b_eq = loop_rows(S, tails, profiles)
    n = A_ub.shape[1]
    res = linprog(np.r_[np.ones(S), np.zeros(n - S)], A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=b_eq,
                  bounds=[(0, None)] * n, method="highs")
    if res.status == 2:
        return float("inf")
    return float(res.fun) if res.status == 0 else None


def same(a, b):
    a, b = sparse.csr_matrix(a), sparse.csr_matrix(b)
    return a.shape == b.shape and (a != b).nnz == 0


programs = st.integers(1, 3).flatmap(lambda K: st.tuples(
    st.integers(1, 14),
    st.lists(st.integers(1, 4), min_size=K, max_size=K).map(lambda w: tuple((u, v / sum(w)) for u, v in enumerate(w))),
    st.lists(st.tuples(st.sampled_from([0.5, 1.0, 2.0]), st.integers(1, 4), st.lists(st.integers(1, 6), min_size=K,
                                                                                     max_size=K).map(tuple)),
             min_size=1, max_size=3).map(tuple)))


@settings(max_examples=60, deadline=None)
@given(programs)
def test_the_rows_are_the_loops_entry_for_entry(program):
    S, tails, profiles = program
    new, old = split_rows(S, tails, profiles), loop_rows(S, tails, profiles)
    assert same(new[0], old[0]) and same(new[2], old[2])
    assert np.array_equal(new[1], old[1]) and np.array_equal(new[3], old[3])
    assert split_lp(S, tails, profiles) == loop_lp(S, tails, profiles)


def link(u, v, alpha=1 / 16):
    return [(u, v, {"bandwidth": 1.0, "alpha": alpha}), (v, u, {"bandwidth": 1.0, "alpha": alpha})]


@pytest.mark.parametrize("topo", [
    from_edges(3, link(0, 1) + link(1, 2) + link(0, 2), name="triangle"),
    from_edges(4, link(0, 1) + link(1, 2) + link(2, 3), name="line"),
    build("hierarchical", {"levels": ["ring", "switch"], "dims": [3, 2]}, bandwidth=1.0, alpha=1 / 64),
], ids=["triangle", "line", "ring x switch 3x2"])
def test_the_bound_is_the_loops(topo, monkeypatch):
    inst = make_instance(topo, "reduce", message_bytes=1.0, root=0)
    b = instance_bounds(inst)
    lat, bw = b.part("sync_latency"), b.part("sync_bandwidth")
    new = rooted_depth.rooted_depth_bound(inst, lat, bw)
    monkeypatch.setattr(rooted_depth, "split_lp", loop_lp)
    old = rooted_depth.rooted_depth_bound(inst, lat, bw)
    assert new.computed and new.value == old.value > lat.value + bw.value
