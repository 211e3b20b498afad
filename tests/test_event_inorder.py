"""The in-order event model (tens/cost_models/event_inorder.py): hand-derived times, a plain
reference simulation, its lower bound, and agreement with the FIFO ``event`` model where every
link's messages become ready in step order."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from collsynth import InputError
from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.instances.topology import from_edges
from collsynth.tens import bounds, cost_models
from collsynth.tens.cost_models.event_inorder import in_order_times
from collsynth.tens.schedule import from_arrays, from_sends
from collsynth.tens.verify import verify

from test_cost import greedy_allgather, recursive_doubling_allgather, ring_allgather, topologies


def _price(s, inst, model="event-inorder", **kw):
    return cost_models.price(s, inst, model, **kw)


def _line(bandwidths, alphas, nodes=3):
    """Directed path 0 -> 1 -> ... with the given per-link bandwidths and latencies, closed
    into a one-way ring by a link back to 0 (unused: the topology must be strongly connected)."""
    edges = [(u, u + 1, {"bandwidth": b, "alpha": a}) for u, (b, a) in enumerate(zip(bandwidths, alphas))]
    return from_edges(nodes, edges + [(nodes - 1, 0, {"bandwidth": 1.0, "alpha": 0.0})], name="line")


# ---- hand-derived cases ---------------------------------------------------------------------

def test_a_relay_listed_first_holds_back_the_own_chunk():
    # 0 -> 1 -> 2 at 1 B/s, 1-byte chunks. Step 1: 0 sends chunk 0 to 1 ([0, 1]). Step 2: 1
    # relays chunk 0 to 2, then sends its own chunk 1. In order: the relay waits for its data
    # ([1, 2]) and chunk 1 for the relay ([2, 3]): 3 s. FIFO serves chunk 1 first (ready at
    # 0: [0, 1]), then the relay ([1, 2]): 2 s.
    inst = make_instance(_line([1.0, 1.0], [0.0, 0.0]), "allgather", message_bytes=3.0)
    s = from_arrays("allgather", 3, 3, chunk=[0, 0, 1], src=[0, 1, 1], dst=[1, 2, 2], step=[1, 2, 2])
    assert _price(s, inst).total_s == pytest.approx(3.0)
    assert _price(s, inst, "event").total_s == pytest.approx(2.0)
    # listed the other way round (own chunk first) the two orders coincide: 2 s in both
    t = from_arrays("allgather", 3, 3, chunk=[0, 1, 0], src=[0, 1, 1], dst=[1, 2, 2], step=[1, 2, 2])
    assert _price(t, inst).total_s == pytest.approx(2.0) == _price(t, inst, "event").total_s


def test_pipelined_pieces_through_a_relay_with_latency():
    # chunk 0 of 2 bytes in two pieces of 1 byte over 0 -> 1 (1 B/s) -> 2 (2 B/s), alpha 0.5 s.
    # Piece a: 0->1 [0, 1], arrives 1.5; 1->2 [1.5, 2], arrives 2.5.
    # Piece b: 0->1 [1, 2] (after a on the link), arrives 2.5; 1->2 [2.5, 3], arrives 3.5.
    # Critical path: b's data (its link wait on 0 -> 1 adds no latency), two latencies: T_L 1.
    inst = make_instance(_line([1.0, 2.0], [0.5, 0.5]), "broadcast", root=0, message_bytes=2.0)
    s = from_arrays("broadcast", 3, 1, chunk=[0] * 4, lo=[0, 1, 0, 1], hi=[1, 2, 1, 2], src=[0, 0, 1, 1],
                    dst=[1, 1, 2, 2], step=[1, 2, 2, 3], denom=2)
    assert verify(s, inst) is None
    for model in ("event-inorder", "event"):
        c = _price(s, inst, model)
        assert (c.total_s, c.T_L_s) == (pytest.approx(3.5), pytest.approx(1.0)), model
    for exact in (True, False):  # group prefixes wait for every earlier piece: the same here
        assert _price(s, inst, exact_deps=exact).total_s == pytest.approx(3.5)


def test_a_routed_send_keeps_its_place_on_its_second_link():
    # path 0 - 1 - 2 both ways at 1 B/s. Step 1: chunk 0 routed 0 -> 2 (0->1 [0, 1], then 1->2),
    # and chunk 1 from 1 to 2, listed after it. In order the routed send's second hop goes
    # first on 1 -> 2 ([1, 2]) and chunk 1 waits ([2, 3]): 3 s. FIFO: chunk 1 [0, 1], then the
    # routed hop [1, 2]: 2 s.
    edges = [(u, v, {"bandwidth": 1.0, "alpha": 0.0}) for u, v in ((0, 1), (1, 0), (1, 2), (2, 1))]
    inst = make_instance(from_edges(3, edges, name="path"), "allgather", message_bytes=3.0)
    s = from_sends([(0, 0, 1, 0, 2, 1), (1, 0, 1, 1, 2, 1)], "allgather", 3, 3, routing="shortest-path")
    assert _price(s, inst).total_s == pytest.approx(3.0)
    assert _price(s, inst).extra["hops"] == 3
    assert _price(s, inst, "event").total_s == pytest.approx(2.0)


def test_a_dependency_that_is_not_earlier_is_refused():
    # position 0 needing position 1's arrival: the kernel names it instead of pricing
    one = np.ones(2)
    r, rptr, links = np.array([0, 0], np.int32), np.array([0, 1], np.int64), np.array([0], np.int32)
    dptr, ditems = np.array([0, 1, 1], np.int64), np.array([1], np.int32)
    z = np.zeros(0, np.int32)
    assert in_order_times(one, r, rptr, links, np.ones(1), np.zeros(1), dptr, ditems, z, z, z,
                          np.zeros(1, np.int64), z)[2] == 0
    ok = np.array([0, 0, 1], np.int64), np.array([0], np.int32)  # position 1 needs 0: 2 s on one link
    assert in_order_times(one, r, rptr, links, np.ones(1), np.zeros(1), *ok, z, z, z, np.zeros(1, np.int64), z) == \
        (2.0, 0.0, -1)


# ---- a plain reference simulation -----------------------------------------------------------

def reference(s, inst) -> float:
    """In-order event time of an allgather without switches, written plainly: sends by (step,
    index); a send waits for every earlier-step arrival of an overlapping piece of its chunk at
    its source (unless the source owns the chunk), then crosses each link of its route (the
    topology's shortest path for a routed schedule) after the previous send on that link."""
    la = inst.topology.link_arrays
    held = inst.collective.precondition  # held[chunk, node]: the node owns the chunk from the start
    sends = sorted(range(len(s)), key=lambda i: (int(s.step[i]), i))
    arrive, free, last = {}, {}, 0.0
    for i in sends:
        c, u, v, t = int(s.chunk[i]), int(s.src[i]), int(s.dst[i]), int(s.step[i])
        lo, hi = int(s.lo[i]), int(s.hi[i])
        ready = 0.0
        if not held[c, u]:
            for j, a in arrive.items():
                if (int(s.chunk[j]), int(s.dst[j])) == (c, u) and int(s.step[j]) < t and s.lo[j] < hi and lo < s.hi[j]:
                    ready = max(ready, a)
        path = inst.topology.shortest_path(u, v) if s.routing == "shortest-path" else [u, v]
        t = ready
        for a, b in zip(path[:-1], path[1:]):  # store and forward, each link in send order
            p = int(la.lookup(np.array([a]), np.array([b]))[0])
            start = max(t, free.get(p, 0.0))
            free[p] = start + (hi - lo) / s.denom * inst.collective.chunk_bytes / la.bandwidth[p]
            t = free[p] + la.alpha[p]
        arrive[i] = t
        last = max(last, arrive[i])
    return last


@settings(max_examples=60, deadline=None)
@given(topologies(), st.randoms(use_true_random=False), st.integers(1, 2))
def test_random_schedules_match_the_reference_and_respect_the_event_bound(topo, rnd, per_link):
    inst = make_instance(topo, "allgather", message_bytes=float(1 << 20))
    s = greedy_allgather(topo, rnd, per_link)
    assert verify(s, inst) is None
    c = _price(s, inst)
    assert c.total_s == pytest.approx(reference(s, inst), rel=1e-12)
    assert c.total_s * (1 + 1e-9) >= bounds.instance_bounds(inst).event.value
    assert c.total_s == pytest.approx(c.T_L_s + c.T_B_s) and c.T_L_s >= 0
    assert _price(s, inst, exact_deps=True).total_s == pytest.approx(c.total_s, rel=1e-12)
    # sent on links, every step's sends on a link are done by the end of that synchronous step
    # (induction over the steps: their data and their link's earlier sends are done by the step
    # before), so in order is never slower than the sync model
    assert c.total_s <= _price(s, inst, "sync").total_s * (1 + 1e-9)


@settings(max_examples=40, deadline=None)
@given(st.integers(3, 7), st.lists(st.sampled_from([1.0, 2.0, 4.0]), min_size=7, max_size=7),
       st.lists(st.sampled_from([0.0, 0.5, 3.0]), min_size=7, max_size=7), st.integers(1, 4))
def test_equal_to_fifo_where_each_link_gets_its_messages_in_step_order(n, bws, alphas, pieces):
    # a ring allgather on a heterogeneous one-way ring, each chunk in `pieces` pieces: a link
    # forwards what the link before it delivered, in the order it delivered it, after its own
    # pieces (ready at 0, listed first), so FIFO serves each link in step order too.
    edges = [(u, (u + 1) % n, {"bandwidth": bws[u], "alpha": alphas[u]}) for u in range(n)]
    inst = make_instance(from_edges(n, edges, name="ring"), "allgather", message_bytes=float(n))
    base = ring_allgather(n)
    k = np.repeat(np.arange(len(base)), pieces)
    q = np.tile(np.arange(pieces), len(base))
    s = from_arrays("allgather", n, n, chunk=base.chunk[k], lo=q, hi=q + 1, src=base.src[k], dst=base.dst[k],
                    step=(base.step[k] - 1) * pieces + q + 1, denom=pieces)
    assert verify(s, inst) is None
    a, b = _price(s, inst), _price(s, inst, "event")
    assert a.total_s == pytest.approx(b.total_s, rel=1e-12)
    assert a.total_s == pytest.approx(reference(s, inst), rel=1e-12)
    assert a.total_s * (1 + 1e-9) >= bounds.instance_bounds(inst).event.value


@pytest.mark.parametrize("generator, params", [("ring", {"nodes": 8}), ("torus", {"dims": [4, 4]}),
                                               ("hypercube", {"dim": 3})])
def test_routed_recursive_doubling_matches_the_reference(generator, params):
    # sends between non-neighbours cross several links, each in send order, meeting others there
    topo = build(generator, params, bandwidth=25e9, alpha=1e-6)
    inst = make_instance(topo, "allgather", message_bytes=float(1 << 20))
    s = recursive_doubling_allgather(topo.size, routing="shortest-path")
    assert verify(s, inst) is None
    c = _price(s, inst)
    assert c.total_s == pytest.approx(reference(s, inst), rel=1e-12)
    assert c.total_s * (1 + 1e-9) >= bounds.instance_bounds(inst).event.value


# ---- registry and CLI -------------------------------------------------------------------------

def test_opt_in_registration_leaves_the_default_models_alone():
    assert cost_models.names() == ("sync", "ten", "event")
    assert cost_models.all_names() == ("sync", "ten", "event", "event-inorder", "runtime")
    m = cost_models.get("event-inorder")
    assert (m.time_column, m.lower_bound_column, m.default) == ("time_event_inorder_s", "lower_bound_event_inorder_s",
                                                                 False)
    inst = make_instance(build("ring", {"nodes": 4}), "allgather")
    assert m.bound(bounds.instance_bounds(inst)).value == bounds.instance_bounds(inst).event.value
    with pytest.raises(InputError, match="event-inorder"):
        cost_models.get("event-in-order")


def test_collsynth_price_takes_the_opt_in_model(tmp_path, capsys):
    from collsynth.solvers.cli import main

    (tmp_path / "r.toml").write_text('name = "ring4"\n[topology]\ngenerator = "ring"\nnodes = 4\nbidirectional = false\n'
                                     '[collective]\nkind = "allgather"\n')
    ring = [[(u - t) % 4, "0", "1", u, (u + 1) % 4, t + 1] for t in range(3) for u in range(4)]
    (tmp_path / "s.json").write_text(json.dumps({"format": "collsynth.schedule/1", "collective": "allgather",
                                                 "nodes": 4, "chunks": 4, "sends": ring}))
    rc = main(["price", str(tmp_path / "s.json"), str(tmp_path / "r.toml"), "--model", "event-inorder", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["model"] == "event-inorder"
    main(["price", str(tmp_path / "s.json"), str(tmp_path / "r.toml"), "--model", "event", "--json"])
    fifo = json.loads(capsys.readouterr().out)
    assert out["total_s"] == pytest.approx(fifo["total_s"])  # a ring: the orders coincide
    assert out["lower_bound_model_s"] == fifo["lower_bound_model_s"]
