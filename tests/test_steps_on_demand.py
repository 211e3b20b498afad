"""The step-count search of the ``sync`` step bounds (``collsynth.tens.bounds.ramp.least_over_steps``)
solves a step count's program only where its value decides: against the search that solves every
step count it reaches (the computation before, copied here as :func:`every_step_solved`) it
returns the very same float.

- random programs not growing with ``S`` (plateaus, ties, infeasible small ``S``), every gap,
  first and most, with and without a relaxation (hypothesis): the same float, and without a
  relaxation a subset of the step counts solved;
- the rooted depth bound's refined and first programs on small tori, rings and random graphs
  (hypothesis over root, latency and size): the same float as the search over every step count;
- a shortcut taking a neighbour's value for a step count's own is caught by the first.
"""

from __future__ import annotations

import bisect

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.tens.bounds import ramp, rooted_depth
from collsynth.tens.bounds.instance import Bounds


def every_step_solved(lp, alpha, L, T_star, first=1, most=ramp.MAX_STEPS, gap=0.0, relaxed=None):
    """The search as it was: ``lp`` solved at every step count it reaches (the reference;
    ``relaxed`` unused)."""
    got = {}

    def solve(S):
        if S not in got:
            v = lp(S)
            if v is None:
                return False
            got[S] = max(T_star, v)
        return True

    value = lambda S: max(L, S * alpha) + got[S]  # noqa: E731
    S = first
    while True:
        if not solve(S):
            return None
        if max(L, S * alpha) + T_star >= min(value(s) for s in got) or S >= most:
            break
        S *= 2
    best = floor = min(value(s) for s in got)
    parts = list(zip(sorted(got)[:-1], sorted(got)[1:]))
    while parts:
        a, b = parts.pop()
        below = max(L, a * alpha) + got[b]
        if b - a <= 1 or below >= best:
            continue
        if below >= best * (1 - gap):
            floor = min(floor, below)
            continue
        mid = (a + b) // 2
        if not solve(mid):
            return None
        best = min(best, value(mid))
        parts += [(a, mid), (mid, b)]
    return max(min(best, floor, max(L, (S + 1) * alpha) + T_star), L + T_star)


def _program(depth: int, drops: list[float], level: float):
    """``lp(S)``: infinite below ``depth``, then ``level`` plus the drops from ``S`` on (not growing)."""
    tail = np.cumsum(drops[::-1])[::-1].tolist() + [0.0]
    return lambda S: float("inf") if S < depth else level + tail[min(S - depth, len(drops))]


@settings(max_examples=300, deadline=None)
@given(depth=st.integers(1, 12), drops=st.lists(st.sampled_from([0.0, 0.0, 1e-4, 1e-3, 0.01, 0.1, 0.5, 2.0]),
                                                max_size=80),
       level=st.sampled_from([0.5, 1.0, 1.5]), T_star=st.sampled_from([0.0, 1.0, 1.2]),
       alpha=st.sampled_from([1e-4, 1e-3, 0.01, 0.05, 0.3]), L=st.sampled_from([0.0, 0.02, 0.5]),
       first=st.integers(1, 9), most=st.sampled_from([16, 64, 4096]), gap=st.sampled_from([0.0, 1e-4, 1e-2]),
       relaxed=st.sampled_from([None, 1.0, 0.9999, 0.9, 0.0]))
def test_the_same_float_as_every_step_solved_on_random_programs(depth, drops, level, T_star, alpha, L, first, most,
                                                               gap, relaxed):
    """The same float with or without a relaxation (``lp`` times ``relaxed``: equal to it, just
    under, far under, nothing); without one, only step counts the old search solved."""
    before, now = [], []
    lp = _program(depth, drops, level)
    old = every_step_solved(lambda S: before.append(S) or lp(S), alpha, L, T_star, first, most, gap)
    new = ramp.least_over_steps(lambda S: now.append(S) or lp(S), alpha, L, T_star, first, most, gap,
                                None if relaxed is None else (lambda S: lp(S) * relaxed))
    assert new == old, (new, old)
    assert len(now) == len(set(now))  # each program solved once
    if relaxed is None:  # no middle solved ahead of its range's end: only step counts the old search solved
        assert set(now) <= set(before)


def test_a_neighbours_value_taken_for_a_step_counts_own_is_caught(monkeypatch):
    """A wrong shortcut: every step count held at its upper neighbour's value without widening or
    solving (as if ``lp`` were flat between solved counts). The random programs' check above
    fails on it: the test suite can tell."""
    def flat(self, S):
        if S in self.got:
            return self.got[S], self.got[S]
        i = bisect.bisect(self.done, S)
        v = self.got[self.done[i]] if i < len(self.done) else self.T_star
        return v, v

    monkeypatch.setattr(ramp._Steps, "bounds", flat)
    lp = _program(2, [2.0, 0.5, 0.5, 0.1, 0.1, 0.01] * 6, 1.0)
    cases = [(a, f, g) for a in (1e-3, 0.01, 0.05) for f in (1, 2, 3) for g in (0.0, 1e-4)]
    assert any(ramp.least_over_steps(lp, a, 0.0, 1.0, f, 4096, g) != every_step_solved(lp, a, 0.0, 1.0, f, 4096, g)
               for a, f, g in cases)


def _instance(shape: str, n: int, root: int, alpha: float, size: float):
    params = {"torus": {"dims": [n, 2]}, "ring": {"nodes": n}, "switch": {"nodes": n}}[shape]
    topo = build(shape, params, bandwidth=1e9, alpha=alpha)
    return make_instance(topo, "reduce", message_bytes=size, root=root % len(topo.npus))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=st.sampled_from(["torus", "ring", "switch"]), n=st.integers(3, 6), root=st.integers(0, 11),
       alpha=st.sampled_from([1e-6, 1e-5]), size=st.sampled_from([2.0 ** 16, 2.0 ** 20, 2.0 ** 22]),
       refined=st.booleans())
def test_the_rooted_depth_bound_is_the_same_float_as_every_step_solved(shape, n, root, alpha, size, refined):
    """The rooted depth bound (``collsynth.tens.bounds.rooted_depth``) on a small torus, ring or
    switch, its refined program or its first: the same float as the search that solves every
    step count it reaches, on the same programs."""
    inst = _instance(shape, n, root, alpha, size)
    parts = Bounds(inst, None, 60.0)
    latency, bandwidth = parts.part("sync_latency"), parts.part("sync_bandwidth")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rooted_depth, "REFINED_MOST_GPUS", 10 ** 9 if refined else 0)
        now = rooted_depth.rooted_depth_bound(inst, latency, bandwidth)
        patch.setattr(rooted_depth, "least_over_steps", every_step_solved)
        before = rooted_depth.rooted_depth_bound(inst, latency, bandwidth)
    assert now.computed == before.computed and now.value == before.value, (now, before)
