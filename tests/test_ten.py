"""The time-expanded network (TACOS section IV): arcs, delays, capacity, horizon, unwinding."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collsynth import InputError
from collsynth.instances.generators import DGX1_NVLINKS, build
from collsynth.instances.topology import from_edges
from collsynth.instances.instance import make_instance
from collsynth.tens import ten
from collsynth.tens.ten import discretize, link_costs, link_delays, unwind_switches


def uniring(n=3):
    return build("ring", {"nodes": n, "bidirectional": False}, bandwidth=1.0, alpha=0.0)


def delays_of(topo, chunk_bytes=1.0, timestep=None):
    """(delay per link pair, capacity per pair, timestep) as plain lists."""
    delay, cap, f = link_delays(topo, chunk_bytes, timestep)
    return delay[0].tolist(), cap.tolist(), f


def test_uniring_one_timestep_per_link():
    """A 3-NPU unidirectional ring of unit links: every pair takes one timestep (TACOS Fig. 7)."""
    assert delays_of(uniring(3)) == ([1, 1, 1], [1, 1, 1], 1.0)


def test_heterogeneous_delays_ceil_of_cost_over_timestep():
    """Costs 1, 2.5 and 3 s: timestep 1 s by default (fastest link = 1 step) -> 1, 3, 3."""
    edges = [
        (0, 1, {"bandwidth": 1.0, "alpha": 0.0}),  # cost 1 (chunk 1 byte)
        (1, 2, {"bandwidth": 1.0, "alpha": 1.5}),  # cost 2.5
        (2, 0, {"bandwidth": 0.5, "alpha": 1.0}),  # cost 3
    ]
    topo = from_edges(3, edges)
    assert link_costs(topo, 1.0).tolist() == pytest.approx([1.0, 2.5, 3.0])
    delay, _, f = delays_of(topo)
    assert f == pytest.approx(1.0) and delay == [1, 3, 3]
    # TACOS Fig. 9 uses an explicit factor f = 2.3: ceil(c / 2.3)
    assert delays_of(topo, timestep=2.3)[0] == [math.ceil(c / 2.3) for c in (1.0, 2.5, 3.0)] == [1, 2, 2]


def test_float_noise_does_not_add_a_timestep():
    assert discretize(np.array([0.1 * 3, 0.1, 0.30000001]), 0.1).tolist() == [3, 1, 4]
    edges = [(0, 1, {"bandwidth": 10.0, "alpha": 0.0}), (1, 0, {"bandwidth": 10.0 / 3, "alpha": 0.0})]
    assert delays_of(from_edges(2, edges))[0] == [1, 3]


def test_dgx1_parallel_links_are_capacity_not_speed():
    topo = build("dgx1", {}, bandwidth=25e9, alpha=1e-6)
    delay, cap, _ = delays_of(topo, 1e6)
    la = topo.link_arrays
    counts = np.asarray(DGX1_NVLINKS)
    assert cap == counts[la.src, la.dst].tolist()
    assert set(cap) == {1, 2}
    # a double NVLink is two links of 25 GB/s each: same per-chunk cost, one timestep
    assert link_costs(topo, 1e6).tolist() == pytest.approx([1e-6 + 1e6 / 25e9] * len(la))
    assert delay == [1] * len(la)


@given(delays=st.lists(st.integers(1, 5), min_size=1, max_size=6), horizon=st.integers(1, 12))
def test_reach_agrees_with_brute_force(delays, horizon):
    """earliest[c, n] is the delay-weighted distance from the holder (summed by hand along the
    path) and latest[c, n] the horizon minus the distance to the nearest node needing the chunk."""
    n = len(delays) + 1
    edges = [(i, i + 1, {"bandwidth": 1.0 / d, "alpha": 0.0}) for i, d in enumerate(delays)]
    edges.append((n - 1, 0, {"bandwidth": 1.0, "alpha": 0.0}))
    inst = make_instance(from_edges(n, edges), "broadcast", root=0, message_bytes=1.0)
    data = ten.prepare(inst, horizon)
    earliest, latest = ten.reach(data)
    dist = [0]
    for d in delays:
        dist.append(dist[-1] + d)
    assert earliest[0].tolist() == dist
    # every node but the root needs the chunk; from the root the nearest one is node 1
    assert latest[0, 1:].tolist() == [horizon] * (n - 1)
    assert latest[0, 0] == horizon - delays[0]


@pytest.mark.parametrize("n,d", [(4, 1), (4, 2), (4, 3), (8, 3)])
def test_unwinding_degree_and_bandwidth_split(n, d):
    """TACOS IV-D: NPU n -> n+1..n+d (mod N), each with 1/d of the bandwidth, alpha kept."""
    sw = build("switch", {"nodes": n, "unwind": 0}, bandwidth=120e9, alpha=0.7e-6)
    assert sw.switches == {n}
    u = unwind_switches(sw, d)
    assert not u.switches and n not in u.graph and u.npus == tuple(range(n))
    got = sorted((a, b) for a, b in u.graph.edges())
    assert got == sorted((i, (i + k) % n) for i in range(n) for k in range(1, d + 1))
    assert all(data["bandwidth"] == pytest.approx(120e9 / d) for _, _, data in u.graph.edges(data=True))
    assert all(data["alpha"] == pytest.approx(0.7e-6) for _, _, data in u.graph.edges(data=True))
    assert u.out_degree_range == (d, d) and u.in_degree_range == (d, d)
    assert u.meta["unwound"] == {n: d}
    assert len(u.link_arrays) == n * d
    assert link_costs(u, 1e6) == pytest.approx(np.full(n * d, 0.7e-6 + 1e6 * d / 120e9))


def test_unwinding_matches_the_switch_generator_pairs():
    """The TEN-side hook and the generator's unwind parameter agree on the link pairs."""
    for n, d in ((6, 2), (5, 4)):
        mine = unwind_switches(build("switch", {"nodes": n, "unwind": 0}, bandwidth=8.0, alpha=0.5), d)
        theirs = build("switch", {"nodes": n, "unwind": d}, bandwidth=8.0, alpha=0.5)

        def links(t):
            return sorted((u, v, e["bandwidth"], e["alpha"]) for u, v, e in t.graph.edges(data=True))

        assert links(mine) == links(theirs)
        assert links(mine)[0][2] == 8.0 / d


def test_unwinding_errors_and_ten_refuses_switches():
    sw = build("switch", {"nodes": 4, "unwind": 0})
    with pytest.raises(InputError, match="unwind"):
        unwind_switches(sw, 4)
    with pytest.raises(InputError, match="unwind"):
        unwind_switches(sw, 0)
    with pytest.raises(ten.NotSupported, match="switch"):
        link_delays(sw, 1.0)
    with pytest.raises(ten.NotSupported, match="horizon"):
        ten.prepare(make_instance(uniring(), "allgather"), 0)
    plain = uniring()
    assert unwind_switches(plain, 2) is plain


def test_dual_instance_is_made_once_per_instance():
    """Reduce-scatter's dual (allgather on the transposed topology) is built once per
    instance object, so every window of time clustering reuses it; another instance object
    gets its own."""
    topo = build("ring", {"nodes": 4, "bidirectional": False})
    inst = make_instance(topo, "reduce_scatter")
    dual = ten.dual_instance(inst)
    assert ten.dual_instance(inst) is dual and dual.collective.kind == "allgather"
    assert dual.topology.has_link(1, 0) and not dual.topology.has_link(0, 1)
    other = make_instance(topo, "reduce_scatter")
    assert ten.dual_instance(other) is not dual
