"""Automorphism groups acting freely on the NPUs, and the TEN ILP tied by them
(``ten-ilp-symmetric``).

Groups: checked against brute force (every permutation of a small topology tested as an
automorphism) and against hand facts (the rotations of a ring act freely; the middle of a path
is fixed by every automorphism). The ILP: a 2-chassis toy of the DGX-2 kind (2 GPUs and one
copying NVSwitch with an instant hop per chassis, the odd GPU of each chassis sending to the
even GPU of the other over a link twice as slow), whose optimum is derived by hand below and
confirmed by the full TEN ILP.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from collsynth.limits import Deadline
from collsynth.formulations import ten_formulation, ten_ilp_symmetric
from collsynth.instances.automorphisms import acts_freely, closure, semiregular_group
from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.instances.symmetry import is_automorphism
from collsynth.instances.topology import from_edges
from collsynth.solvers.pipeline import run
from collsynth.solvers import backends
from collsynth.solvers.producers import Options
from collsynth.solvers.ten import formulation_producers
from collsynth.tens.ten import prepare
from collsynth.tens.verify import verify
from ilp_oracle import solves_by
from builders import instance_on

FAST, SLOW = {"bandwidth": 1.0, "alpha": 0.0}, {"bandwidth": 0.5, "alpha": 0.0}


def toy_two_chassis():
    """GPUs 0, 1 and switch 4 in chassis A; GPUs 2, 3 and switch 5 in chassis B; GPU <-> its
    switch at one chunk per timestep; 1 -> 2 and 3 -> 0 (odd sends to the other chassis' even
    GPU) take two timesteps. The switches copy and forward in the timestep a chunk arrives."""
    edges = [(g, s, FAST) for g, s in ((0, 4), (1, 4), (2, 5), (3, 5))]
    edges += [(s, g, FAST) for g, s in ((0, 4), (1, 4), (2, 5), (3, 5))]
    edges += [(1, 2, SLOW), (3, 0, SLOW)]
    return from_edges(6, edges, switches=(4, 5), name="toy2x2", meta={"switch_hop": "instant"})


def automorphisms_by_brute_force(topology) -> list[tuple[int, ...]]:
    """Every node permutation that keeps links (with their costs) and maps switches to switches."""
    out = []
    for perm in itertools.permutations(range(topology.size)):
        p = np.array(perm)
        if all(p[s] in topology.switches for s in topology.switches) and is_automorphism(topology, p):
            out.append(perm)
    return out


def test_toy_group_is_every_automorphism_and_acts_freely():
    topo = toy_two_chassis()
    brute = automorphisms_by_brute_force(topo)
    assert sorted(brute) == [(0, 1, 2, 3, 4, 5), (2, 3, 0, 1, 5, 4)]  # identity and the chassis swap, by hand
    group = semiregular_group(topo)
    assert sorted(tuple(p.tolist()) for p in group) == sorted(brute)


@pytest.mark.parametrize("name, params, order", [
    ("ring", {"nodes": 6}, 6),  # the rotations: free, and no free group is larger than the node count
    ("ring", {"nodes": 5, "bidirectional": False}, 5),
    ("mesh", {"dims": [3]}, 1),  # the middle node is fixed by both automorphisms
])
def test_group_orders_by_hand(name, params, order):
    topo = build(name, params)
    group = semiregular_group(topo)
    assert len(group) == order
    npus = np.array(sorted(topo.npus))
    assert all(is_automorphism(topo, p) for p in group)
    assert acts_freely(group, npus)
    assert len(closure(group[1:] or [group[0]], topo.size)) == order  # closed under composition


def test_group_is_a_subgroup_of_the_brute_force_automorphisms():
    topo = build("ring", {"nodes": 6})
    brute = set(automorphisms_by_brute_force(topo))
    assert len(brute) == 12  # the dihedral group, by hand
    assert {tuple(p.tolist()) for p in semiregular_group(topo)} <= brute


def test_chunk_images_follow_the_owner():
    data = prepare(make_instance(toy_two_chassis(), "allgather", message_bytes=4.0), 3, switch_copy=True)
    swap = np.array([2, 3, 0, 1, 5, 4])
    image = ten_ilp_symmetric.chunk_images(data, swap)
    owners = data.pre.argmax(axis=1)
    assert [int(owners[image[c]]) for c in range(4)] == [int(swap[owners[c]]) for c in range(4)]


def toy_instance():
    return make_instance(toy_two_chassis(), "allgather", message_bytes=4.0)


def test_toy_delays_are_as_described():
    data = prepare(toy_instance(), 5, switch_copy=True)
    delays = {(int(s), int(d)): int(k) for s, d, k in zip(data.src, data.dst, data.delay[0])}
    assert delays[(1, 2)] == delays[(3, 0)] == 2 and delays[(0, 4)] == delays[(4, 1)] == 1


@pytest.mark.parametrize("producer", ["ten-ilp-symmetric", "ten-ilp"])
def test_toy_optimum_by_hand(producer):
    """GPU 1 receives only from switch 4. Chassis A gets chunks 2 and 3 over 3 -> 0 alone (two
    timesteps each, one at a time), so the second arrives at GPU 0 at the end of timestep 4 at
    the earliest and reaches GPU 1 in timestep 5: no schedule is shorter than 5. A symmetric
    one of 5 exists (3 -> 0 carries chunk 3 in timesteps 1-2 and chunk 2 in 3-4, GPU 0 relays
    each through switch 4 the timestep after; chassis B likewise), so both give 5, every
    schedule verified."""
    row, schedule = run(toy_instance(), producer, Options(time_limit=30, params={"lp_bound": False}))
    assert row["verified"] and row["steps"] == 5
    assert verify(schedule, toy_instance()) is None
    assert solves_by(toy_instance(), 4) is False  # the full TEN ILP, solved at 4 directly: no shorter schedule


def test_symmetric_schedule_is_invariant_under_the_swap():
    inst = toy_instance()
    model = ten_ilp_symmetric.build(inst, 5, objective="makespan")
    backends.solve(model, "highs", deadline=Deadline.after(30))
    sched = ten_ilp_symmetric.extract(model)
    swap = {0: 2, 1: 3, 2: 0, 3: 1, 4: 5, 5: 4}
    sends = {(s.chunk, s.src, s.dst, s.step) for s in sched.sends()}
    assert sends and {(swap[c], swap[u], swap[v], t) for c, u, v, t in sends} == sends


def test_lp_beside_a_symmetric_run_is_the_orbit_lp_only_for_a_regular_group():
    sym = ten_formulation(ten_ilp_symmetric)
    assert formulation_producers.relaxation_beside(sym, toy_instance()).name == "ten-lp"  # switches: no regular group
    ring = instance_on("ring", {"nodes": 6})
    assert formulation_producers.relaxation_beside(sym, ring).name == "ten-lp-orbit"
