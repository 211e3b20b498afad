"""Tree packing on boxes whose switches reduce: every combining schedule it emits verifies
under the switch's semantics (what reaches a reducing switch for one piece in one step leaves
as one partial sum; :mod:`collsynth.tens.verify`), or the producer refuses in one line.

Hand derivation for three GPUs around one reducing, multicasting switch (node 3): the packed
trees of a reduce-scatter (time-reversed allgather trees on the transposed topology) take
chunk 0's two contributions (GPUs 1 and 2) into the switch in one step. The switch adds them,
so exactly one send of chunk 0 leaves it for GPU 0 the step after (two would count ranks 1
and 2 twice there). In the allreduce's allgather half the owner sends its result up once and
the switch multicasts it to the two others (two sends up would be summed: the result twice).
So per chunk: 2 sends up and 1 down in the reduce-scatter, 1 up and 2 down in the allgather.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, reject, settings, strategies as st

from collsynth import InputError
from collsynth.instances.instance import make_instance
from collsynth.instances.switch_ops import with_switch_ops
from collsynth.instances.topology import from_edges
from collsynth.solvers.producers import Options, Unsupported, get
from collsynth.tens.verify import verify

from switch_strategies import switch_topologies
from test_ten_ilp_reducing_switch import rails


def tree_packing(inst, **params):
    return get("tree-packing").run(inst, Options(time_limit=30, params=params)).schedule


def star(n: int, reduce: bool = True, copy: bool = True):
    """``n`` GPUs around one switch (node ``n``), every link one unit each way."""
    t = from_edges(n + 1, [(v, n) for v in range(n)], bandwidth=1e9, alpha=0.0, bidirectional=True, switches=[n])
    return with_switch_ops(t, [n] if reduce else [], [n] if copy else [])


@pytest.mark.parametrize("kind", ["allreduce", "reduce_scatter"])
def test_three_gpus_around_a_reducing_switch(kind):
    inst = make_instance(star(3), kind, message_bytes=3e6)
    s = tree_packing(inst, pieces=1)
    assert verify(s, inst) is None
    up = Counter((x.chunk, x.op or "reduce") for x in s.sends() if x.dst == 3)  # a reduce-scatter's op is implied
    down = Counter((x.chunk, x.op or "reduce") for x in s.sends() if x.src == 3)
    for c in range(3):
        assert (up[c, "reduce"], down[c, "reduce"]) == (2, 1)
        assert (up[c, "copy"], down[c, "copy"]) == ((1, 2) if kind == "allreduce" else (0, 0))


@pytest.mark.parametrize("shape", [(1, 3), (1, 4), (2, 2), (2, 3)])
@pytest.mark.parametrize("kind", ["allreduce", "reduce_scatter", "reduce"])
def test_rails_with_reducing_switches_verify(shape, kind):
    k, g = shape
    inst = make_instance(rails(k, g, True), kind, message_bytes=k * g * 1e6, **({"root": 0} if kind == "reduce" else {}))
    assert verify(tree_packing(inst, pieces=2), inst) is None


def test_an_allreduce_that_would_multicast_through_a_switch_that_cannot_is_refused_in_one_line():
    """A switch that sums but does not multicast cannot hand one result to two GPUs in a step;
    the trees' allgather half needs it to, so the producer refuses, naming what to use."""
    inst = make_instance(star(3, copy=False), "allreduce", message_bytes=3e6)
    with pytest.raises(Unsupported) as e:
        tree_packing(inst, pieces=1)
    assert "\n" not in str(e.value) and "nvls" in str(e.value)


@st.composite
def reducing_boxes(draw):
    """:func:`switch_topologies` (2-4 GPUs, one or two switches, some direct links) with a
    nonempty set of reducing switches, each multicasting or not."""
    t = draw(switch_topologies())
    sw = sorted(t.switches)
    reduce = draw(st.lists(st.sampled_from(sw), min_size=1, unique=True))
    copy = draw(st.lists(st.sampled_from(sw), unique=True))
    return with_switch_ops(t, reduce, copy)


@settings(max_examples=25, deadline=None)
@given(reducing_boxes(), st.sampled_from(["allreduce", "reduce_scatter", "reduce"]), st.integers(1, 3))
def test_every_combining_schedule_verifies_or_is_refused_in_one_line(topo, kind, pieces):
    try:
        inst = make_instance(topo, kind, message_bytes=len(topo.npus) * 1e6,
                             **({"root": min(topo.npus)} if kind == "reduce" else {}))
    except InputError:  # disconnected: no collective to schedule
        reject()
    try:
        s = tree_packing(inst, pieces=pieces)
    except Unsupported as e:
        assert str(e) and "\n" not in str(e)
        return
    assert verify(s, inst) is None


def test_partials_that_a_multicasting_switch_would_mispair_are_routed_apart_and_verify():
    """Four GPUs, GPUs 0-1 on a reducing switch 4 and GPUs 2-3 on a forwarding, multicasting
    switch 5 (the switches linked), plus slow direct links (found by the property test above).
    The reduce to GPU 0 packs one tree whose routes, reversed, carry GPU 1's partial 1 -> 4 -> 5
    -> 2 and GPU 3's 3 -> 5 -> 4 -> 0. Routed at their depths both cross switch 5 in one step
    towards different next hops (2 and 4); a multicasting switch pairs a step's arrivals with
    its departures port by port, so each port's first departure would take GPU 3's partial
    (counted twice at GPU 0) and GPU 1's would be lost. This schedule was refused before; now
    the second route waits a step, the partials cross switch 5 in different steps, and the
    schedule verifies: by hand, 7 sends, GPU 0 receiving exactly two (2 -> 0 and 4 -> 0) and
    switch 5 forwarding one partial a step."""
    edges = [(0, 4, 0.0), (0, 1, 1.0), (0, 2, 1.0), (0, 3, 1.0), (1, 4, 0.0), (2, 5, 0.0), (2, 0, 1.0),
             (2, 1, 1.0), (2, 3, 1.0), (3, 5, 0.0), (3, 1, 1.0), (4, 0, 0.0), (4, 1, 0.0), (4, 5, 0.0),
             (5, 2, 0.0), (5, 3, 0.0), (5, 4, 0.0)]
    t = from_edges(6, [(u, v, {"alpha": a, "bandwidth": 1.0}) for u, v, a in edges], switches=[4, 5])
    inst = make_instance(with_switch_ops(t, [4], [4, 5]), "reduce", message_bytes=4e6, root=0)
    s = tree_packing(inst, pieces=1)
    assert verify(s, inst) is None
    sends = list(s.sends())
    assert len(sends) == 7
    assert sorted(x.src for x in sends if x.dst == 0) == [2, 4]
    assert len({x.step for x in sends if x.src == 5}) == len([x for x in sends if x.src == 5]) == 2
