"""What tree packing at 16,384 GPUs computes once instead of per link or per pricing: the
integer bandwidth units and tree capacities per distinct value (``tens/cut_optimum.py``) against
their element-by-element definition, and the link orbits of a group of box shifts kept across
the pricings of one pipeline (``tens/pipelined_trees.py: link_orbits``) against the orbits
followed shift power by shift power, on small Clos fabrics."""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsynth.instances.box_shift import box_shift
from collsynth.instances.generators import build
from collsynth.solvers.packing.free_shifts import free_shifts
from collsynth.tens.cut_optimum import FlowNet, RATIO_DENOMINATOR, capacities, integer_units
from collsynth.tens.pipelined_trees import link_orbits
from compact_checks import SMALL_CLOS, THREE_TIERS

BANDWIDTHS = st.lists(st.sampled_from([25e9, 50e9, 100e9, 300e9, 450e9, 12.5e9, 7e9, 1e9 / 3]), min_size=1,
                      max_size=40)


def _units_one_by_one(bandwidth: np.ndarray) -> tuple[list[int], float]:
    """Each link's ratio to the slowest as a fraction, scaled by the least common denominator
    and divided by the greatest common divisor: the definition, link by link."""
    low = float(min(bandwidth))
    ratios = [Fraction(float(b) / low).limit_denominator(RATIO_DENOMINATOR) for b in bandwidth]
    lcm = math.lcm(*(r.denominator for r in ratios))
    ints = [int(r * lcm) for r in ratios]
    g = math.gcd(*ints)
    return [x // g for x in ints], low * g / lcm


def test_units_by_hand():
    units, unit_bw = integer_units(np.array([300e9, 25e9, 300e9, 50e9]))
    assert units.tolist() == [12, 1, 12, 2] and unit_bw == 25e9


@settings(max_examples=60, deadline=None)
@given(BANDWIDTHS)
def test_units_per_distinct_value_are_the_links(bandwidth):
    units, unit_bw = integer_units(np.asarray(bandwidth))
    want, want_bw = _units_one_by_one(bandwidth)
    assert units.tolist() == want and unit_bw == want_bw and units.dtype == np.int64


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=40), st.integers(1, 6),
       st.fractions(min_value=Fraction(1, 50), max_value=Fraction(400)))
def test_capacities_per_distinct_value_are_the_links(units, k, tau):
    net = FlowNet(2, np.zeros(len(units), np.int64), np.ones(len(units), np.int64), np.asarray(units, np.int64),
                  np.ones(len(units)), 1.0, (0, 1), (1, 1), None)
    got = capacities(net, k, tau)
    assert got.tolist() == [math.floor(k * tau * u) for u in units] and got.dtype == np.int64


def _orbits_power_by_power(la, perms, orders) -> tuple[np.ndarray, np.ndarray]:
    """Every product of the shifts' powers applied to every link pair: per pair the least pair
    of its orbit, and the copies over the orbit's size on the orbit's least pair (else 0)."""
    index = {(u, v): i for i, (u, v) in enumerate(zip(la.src.tolist(), la.dst.tolist()))}
    group = np.arange(len(la))
    images = [np.arange(perms.shape[1])]
    for perm, order in zip(perms, orders):
        step = []
        for cur in images:
            for _ in range(order):
                step.append(cur)
                cur = perm[cur]
        images = step
    for cur in images:
        moved = np.array([index[(int(cur[u]), int(cur[v]))] for u, v in zip(la.src, la.dst)])
        group = np.minimum(group, moved)
    size = np.bincount(group, minlength=len(la))
    scale = np.where(size > 0, math.prod(orders) / np.maximum(size, 1), 0.0)
    return group, scale


@settings(max_examples=8, deadline=None)
@given(st.one_of(SMALL_CLOS, THREE_TIERS))
def test_link_orbits_kept_are_the_orbits(fabric):
    topo = build(*fabric)
    shift = free_shifts(topo, box_shift(topo))
    if shift is None:
        return
    la = topo.link_arrays
    want_group, want_scale = _orbits_power_by_power(la, shift.perms, shift.orders)
    for perms in (shift.perms, np.array(shift.perms, copy=True)):  # the same group asked again, another array
        group, scale = link_orbits(la, perms, shift.orders)
        assert group.tolist() == want_group.tolist() and scale.tolist() == want_scale.tolist()
        with pytest.raises(ValueError):
            group[0] = -1  # kept for the next caller: read only
    if len(shift.orders) > 1:  # the group of the later shifts alone is another one
        group, _ = link_orbits(la, shift.perms[1:], shift.orders[1:])
        assert group.tolist() == _orbits_power_by_power(la, shift.perms[1:], shift.orders[1:])[0].tolist()


@settings(max_examples=6, deadline=None)
@given(st.one_of(SMALL_CLOS, THREE_TIERS))
def test_transpose_is_networkx_reverse(fabric):
    topo = build(*fabric)
    topo.graph.edges[next(iter(topo.graph.edges(keys=True)))]["note"] = ["mutable"]  # deep-copied, not shared
    got, want = topo.transpose().graph, topo.graph.reverse(copy=True)
    assert list(got.nodes(data=True)) == list(want.nodes(data=True)) and got.graph == want.graph
    assert list(got.edges(keys=True, data=True)) == list(want.edges(keys=True, data=True))
    assert all(list(got.successors(v)) == list(want.successors(v)) and
               list(got.predecessors(v)) == list(want.predecessors(v)) for v in want)
    u, v, k, d = next(iter(got.edges(keys=True, data=True)))
    d["bandwidth"] = -1.0
    assert topo.graph.edges[v, u, k]["bandwidth"] > 0  # the edge's dict is the transpose's own
    noted = [d for *_, d in got.edges(keys=True, data=True) if "note" in d][0]["note"]
    noted.append("changed")
    assert [d for *_, d in topo.graph.edges(keys=True, data=True) if "note" in d][0]["note"] == ["mutable"]


@settings(max_examples=4, deadline=None)
@given(st.one_of(SMALL_CLOS, THREE_TIERS))
def test_free_shifts_remembered_are_the_computed(fabric):
    from collsynth.solvers.packing.free_shifts import _free_shifts

    topo, again = build(*fabric), build(*fabric)
    shift = box_shift(topo)
    if shift is None:
        return
    got = free_shifts(topo, shift)
    want = _free_shifts(topo, shift)
    assert free_shifts(topo, shift) is got  # the allreduce's second half
    assert (np.asarray(got.perms) == np.asarray(want.perms)).all() and got.orders == want.orders
    other = free_shifts(again, box_shift(again))  # another topology object: its own shifts
    assert other is not got and (np.asarray(other.perms) == np.asarray(got.perms)).all()
