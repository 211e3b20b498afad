"""The verifier: lecture schedules (Thakur et al., IJHPCA 2005) verify; every mutant class is rejected with its own
reason; hypothesis properties of the schedule algebra (relabel, JSON, reverse, merge)."""

from __future__ import annotations

from fractions import Fraction

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collsynth.instances.collective import make
from collsynth.instances.generators import build
from collsynth.instances.instance import Instance, make_instance
from collsynth.instances.topology import from_edges
from collsynth.tens import schedule as S
from collsynth.tens.schedule import (
    OP_COPY,
    Send,
    concat,
    from_arrays,
    from_sends,
    merge,
    relabel,
    reverse,
)
from collsynth.tens.verify import VerificationError, Violation, check, malformed, verify
import reference_verify as reference_vectorised

F = Fraction


# ---- topologies and hand-written schedules (lecture Thakur et al., IJHPCA 2005) ------------------------------

def ring(n, bidirectional=True):
    return build("ring", {"nodes": n, "bidirectional": bidirectional}, bandwidth=1.0, alpha=0.0)


def complete(n):
    return build("complete", {"nodes": n}, bandwidth=1.0, alpha=0.0)


def hypercube(d):
    return build("hypercube", {"dim": d}, bandwidth=1.0, alpha=0.0)


def ring_allgather(n):
    """Ring allgather on i -> i+1: in step t node i forwards chunk (i - t + 1) mod n."""
    return from_sends(
        [(((i - t + 1) % n), 0, 1, i, (i + 1) % n, t) for t in range(1, n) for i in range(n)],
        "allgather", n, n,
    )


def recursive_doubling_allgather(n, routing="links"):
    """Butterfly allgather (n a power of two): in step k, i exchanges its 2^(k-1) chunks with i^2^(k-1)."""
    sends = []
    k, half = 1, 1
    while half < n:
        for i in range(n):
            block = (i // half) * half
            for c in range(block, block + half):
                sends.append((c, 0, 1, i, i ^ half, k))
        k, half = k + 1, half * 2
    return from_sends(sends, "allgather", n, n, routing=routing)


def binomial_broadcast(d, root=0):
    """Binomial tree on a hypercube: in step k, every holder sends to its partner across bit k-1."""
    n = 1 << d
    sends = []
    for k in range(1, d + 1):
        for rel in range(1 << (k - 1)):
            u = rel ^ root
            sends.append((0, 0, 1, u, u ^ (1 << (k - 1)), k))
    return from_sends(sends, "broadcast", n, 1)


def scatter_uniring(n, root=0):
    """Pipelined scatter on i -> i+1: the block for node k (k hops away) leaves at step n-k."""
    sends = []
    for k in range(1, n):
        for h in range(1, k + 1):
            u = (root + h - 1) % n
            sends.append(((root + k) % n, 0, 1, u, (u + 1) % n, n - 1 - k + h))
    return from_sends(sends, "scatter", n, n)


def alltoall_direct(n):
    return from_sends(
        [((i * n + k), 0, 1, i, k, 1) for i in range(n) for k in range(n) if i != k], "alltoall", n, n * n
    )


def halves_allgather(n, lo2=F(1, 2)):
    """Bidirectional ring allgather: [0, 1/2) of each shard goes clockwise, [lo2, 1) counter-clockwise."""
    sends = []
    for c in range(n):
        for t in range(1, n):
            sends.append((c, 0, F(1, 2), (c + t - 1) % n, (c + t) % n, t))
            sends.append((c, lo2, 1, (c - t + 1) % n, (c - t) % n, t))
    return from_sends(sends, "allgather", n, n)


def inst(topo, kind, **kw):
    return make_instance(topo, kind, **kw)


def valid(schedule, instance):
    v = verify(schedule, instance)
    assert v is None, str(v)
    check(schedule, instance)
    return True


def sends_without(schedule, i):
    return schedule.select(np.arange(len(schedule)) != i)


# ---- the lecture schedules verify ---------------------------------------------------------

@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_ring_allgather(n):
    valid(ring_allgather(n), inst(ring(n, False), "allgather"))


def test_recursive_doubling_on_complete_graph_and_routed_on_a_ring():
    valid(recursive_doubling_allgather(8), inst(complete(8), "allgather"))
    valid(recursive_doubling_allgather(8), inst(hypercube(3), "allgather"))
    # on a ring the partners 4 apart are not neighbours: only routed sends are legal
    v = verify(recursive_doubling_allgather(8), inst(ring(8), "allgather"))
    assert v is not None and "no link" in v.reason
    valid(recursive_doubling_allgather(8, routing="shortest-path"), inst(ring(8), "allgather"))


@pytest.mark.parametrize("root", [0, 5])
def test_binomial_broadcast(root):
    valid(binomial_broadcast(3, root), inst(hypercube(3), "broadcast", root=root))


def test_reduce_scatter_is_reversed_ring_allgather_on_the_transpose():
    n = 5
    rs = reverse(ring_allgather(n))
    assert rs.collective == "reduce_scatter"
    topo = ring(n, False)
    valid(rs, inst(topo.transpose(), "reduce_scatter"))
    # not on the original direction (links i+1 -> i are missing there)
    assert "no link" in verify(rs, inst(topo, "reduce_scatter")).reason


def test_allreduce_is_reduce_scatter_then_allgather():
    n = 6
    rs = reverse(ring_allgather(n))
    ar = concat(rs, ring_allgather(n), "allreduce")
    assert ar.num_steps == 2 * (n - 1)
    valid(ar, inst(ring(n), "allreduce"))
    # time reversal of an allreduce is an allreduce on the transpose (ops swap)
    valid(reverse(ar), inst(ring(n).transpose(), "allreduce"))


def test_scatter_gather_alltoall():
    n = 5
    sc = scatter_uniring(n, root=2)
    valid(sc, inst(ring(n, False), "scatter", root=2))
    ga = reverse(sc)
    assert ga.collective == "gather"
    valid(ga, inst(ring(n, False).transpose(), "gather", root=2))
    valid(alltoall_direct(4), inst(complete(4), "alltoall"))


def test_fractional_piece_allgather():
    n = 5
    valid(halves_allgather(n), inst(ring(n), "allgather"))
    valid(halves_allgather(n, lo2=F(1, 3)), inst(ring(n), "allgather"))  # overlapping pieces are fine
    # the same with 3 chunks per shard: chunk ids i*c + j
    sends = [(c * 3 + j, lo, hi, a, b, t) for c, lo, hi, a, b, t, _ in halves_allgather(n).sends() for j in range(3)]
    valid(from_sends(sends, "allgather", n, 3 * n), inst(ring(n), "allgather", chunks_per_node=3))


def test_reduce_on_a_tree_and_reduce_ops_in_one_step():
    # 0 <- 1 <- 2 and 0 <- 3 on a complete graph: several arrivals in one step add up
    topo = complete(4)
    s = from_sends([(0, 0, 1, 2, 1, 1), (0, 0, 1, 1, 0, 2), (0, 0, 1, 3, 0, 2)], "reduce", 4, 1)
    valid(s, inst(topo, "reduce", root=0))
    assert "missing contributions of ranks [2, 3]" in verify(
        from_sends([(0, 0, 1, 1, 0, 1)], "reduce", 4, 1), inst(topo, "reduce", root=0)
    ).reason


# ---- mutants: each class rejected, each with its own reason -------------------------------

REASONS = {
    "dropped": "does not hold chunk",
    "early": "arrives there only at the end of step",
    "missing_link": "no link",
    "failed_link": "has failed",  # with "link"
    "failed_node": "has failed",  # with "node"
    "uncovered": "lacks [",
    "duplicate": "duplicate reduction",
    "wrong_root": "it never arrives there",
    "chunk_range": "is outside 0..",
    "overwrite": "missing contributions",
}


def mutants():
    """(name, schedule, instance) for every mutant class."""
    n = 5
    ag, topo = ring_allgather(n), ring(n, False)
    out = []
    # dropped send: the last delivery of the schedule
    out.append(("dropped", sends_without(ag, len(ag) - 1), inst(topo, "allgather")))
    # send before arrival: node 1 forwards chunk 0 in step 1 although it arrives at the end of 1
    early = [s for s in ag.sends() if not (s.chunk == 0 and s.src == 1)] + [Send(0, F(0), F(1), 1, 2, 1)]
    out.append(("early", from_sends(early, "allgather", n, n), inst(topo, "allgather")))
    # a send on a missing link 0 -> 2
    m = ag.sends()
    m[0] = m[0]._replace(dst=2)
    out.append(("missing_link", from_sends(m, "allgather", n, n), inst(topo, "allgather")))
    # a failed link and a failed node (bidirectional ring stays connected)
    out.append(("failed_link", ag, inst(ring(n).with_failures(links=[(0, 1)]), "allgather")))
    bi = ring(6)
    out.append(("failed_node", ring_allgather(6), inst(bi.with_failures(nodes=[5]), "allgather")))
    # piece not covered: the counter-clockwise half starts at 2/3, [1/2, 2/3) never arrives
    out.append(("uncovered", halves_allgather(n, lo2=F(2, 3)), inst(ring(n), "allgather")))
    # duplicate reduction: the reduce-scatter with one reduction repeated a step later
    rs = reverse(ag)
    extra = rs.sends()[0]
    dup = from_sends(rs.sends() + [extra._replace(step=extra.step + 1)], "reduce_scatter", n, n)
    out.append(("duplicate", dup, inst(topo.transpose(), "reduce_scatter")))
    # wrong root: a binomial broadcast from 0 checked against root 3
    out.append(("wrong_root", binomial_broadcast(3, 0), inst(hypercube(3), "broadcast", root=3)))
    # chunk id out of range
    m = ag.sends()
    m[3] = m[3]._replace(chunk=99)
    out.append(("chunk_range", from_sends(m, "allgather", n, n), inst(topo, "allgather")))
    # copy-overwrite: one reduce-scatter send of an allreduce copies instead of reducing
    ar = concat(reverse(ag), ag, "allreduce")
    op = ar.op.copy()
    op[0] = OP_COPY
    from dataclasses import replace

    out.append(("overwrite", replace(ar, op=op), inst(ring(n), "allreduce")))
    return out


@pytest.mark.parametrize("name,schedule,instance", mutants(), ids=[m[0] for m in mutants()])
def test_mutant_is_rejected_with_its_own_reason(name, schedule, instance):
    v = verify(schedule, instance)
    assert isinstance(v, Violation), f"mutant {name} verified"
    assert REASONS[name] in v.reason, str(v)
    others = {REASONS[k] for k in REASONS if REASONS[k] != REASONS[name]}
    assert not any(o in v.reason for o in others), str(v)
    if name == "failed_link":
        assert "link 0->1 has failed" in v.reason and v.send.src == 0 and v.send.dst == 1
    if name == "failed_node":
        assert "node 5 has failed" in v.reason
    if name == "early":
        assert v.step == 1 and v.send == Send(0, F(0), F(1), 1, 2, 1) and "step 1" in v.reason
    if name == "chunk_range":
        assert v.index == 3 and v.send.chunk == 99
    if name == "uncovered":
        assert "lacks [1/2, 2/3) of chunk 0" in v.reason and v.index is None
    if name == "duplicate":
        assert v.index == len(schedule) - 1
    with pytest.raises(VerificationError) as e:
        check(schedule, instance)
    assert e.value.violation == v


def test_violation_text_format():
    topo = ring(4, False)
    s = from_sends([(0, 0, F(1, 2), 1, 2, 3)], "allgather", 4, 4)
    v = verify(s, inst(topo, "allgather"))
    assert str(v) == "step 3, send [chunk 0 [0, 1/2) 1->2]: source does not hold the piece; it never arrives there"
    end = verify(from_sends([], "allgather", 4, 4), inst(topo, "allgather"))
    assert str(end) == "after step 0: node 1 does not hold chunk 0 at the end"


def test_partial_holding_is_reported_as_part_of_the_piece():
    topo = ring(4, False)
    s = from_sends([(0, 0, F(1, 2), 0, 1, 1), (0, 0, 1, 1, 2, 2)], "allgather", 4, 4)
    v = verify(s, inst(topo, "allgather"))
    assert v.index == 1 and "holds only part of the piece (missing [1/2, 1))" in v.reason
    assert "never arrives" in v.reason


def test_malformed_sends_are_violations():
    topo, n = ring(4, False), 4
    i = inst(topo, "allgather")

    def one(**kw):
        cols = dict(chunk=[0], src=[0], dst=[1], step=[1], lo=[0], hi=[1], denom=1)
        cols.update(kw)
        return verify(from_arrays("allgather", n, n, **cols), i).reason

    assert "steps start at 1" in one(step=[0])
    assert "not a non-empty part of [0, 1)" in one(lo=[1], hi=[1])
    assert "not a non-empty part of [0, 1)" in one(lo=[0], hi=[3], denom=2)
    assert "not a non-empty part of [0, 1)" in one(lo=[-1])
    assert "chunk id -1 is outside 0..3" in one(chunk=[-1])
    assert "node 7 is not in 0..3" in one(dst=[7])
    assert "same node 0" in one(dst=[0])
    assert "does not combine" in one(op=[S.OP_REDUCE])
    assert "unknown op" in one(op=[9])
    # a reduce send in a combining collective is fine, a copy too
    rs = inst(topo.transpose(), "reduce_scatter")
    assert verify(from_arrays("reduce_scatter", n, n, chunk=[0], src=[1], dst=[0], step=[1], op=[S.OP_COPY]), rs).index is None


def test_routed_sends_need_a_live_path():
    """Routed sends are legal between any two live nodes joined by a directed path of live
    links, whether or not the topology is strongly connected: on the one-way line 0 -> 1 -> 2
    (with 1 -> 0 back) 0 reaches 2 but 2 reaches nobody; failing 1 -> 2 on the ring 0 -> 1 ->
    2 -> 0 leaves 2 -> 0 -> 1 but nothing out of 1 (hand-checked paths; the former verifier
    reports the same violations)."""
    line = from_edges(3, [(0, 1), (1, 2), (1, 0)], bandwidth=1.0, alpha=0.0)
    ring3 = from_edges(3, [(0, 1), (1, 2), (2, 0)], bandwidth=1.0, alpha=0.0)
    cut = ring3.with_failures(links=[(1, 2)])
    cases = [(line, [(0, 2, 1)], None), (line, [(0, 2, 1), (1, 0, 1), (2, 1, 2)], 2),
             (line, [(1, 0, 1), (2, 0, 1)], 1), (ring3, [(0, 2, 1), (2, 1, 2)], None),
             (cut, [(0, 1, 1), (1, 0, 2)], 1), (cut, [(2, 1, 1)], None), (cut, [(1, 2, 1)], 0)]
    for topo, sends, bad in cases:
        i = Instance("paths", topo, (make("broadcast", topo.npus, 3, root=sends[0][0]),))  # not checked connected
        sched = from_arrays("broadcast", 3, 1, chunk=[0] * len(sends), src=[u for u, _, _ in sends],
                            dst=[v for _, v, _ in sends], step=[t for _, _, t in sends], routing="shortest-path")
        v = malformed(sched, i)
        assert (None if v is None else v.index) == bad, str(v)
        if bad is not None:
            u, w, _ = sends[bad]
            assert v.reason == f"no live path {u}->{w}"
            assert fields(verify(sched, i)) == fields(reference_vectorised.verify(sched, i))


def test_duplicate_within_one_step_and_conflicting_copies():
    topo = complete(3)
    i = inst(topo, "reduce", root=0)
    # step 2: 1 (holding {1, 2}) and 2 (holding {2}) both reduce into 0: rank 2 twice
    s = from_sends([(0, 0, 1, 2, 1, 1), (0, 0, 1, 1, 0, 2), (0, 0, 1, 2, 0, 2)], "reduce", 3, 1)
    v = verify(s, i)
    assert v.step == 2 and v.index == 2 and "duplicate reduction" in v.reason and "[2]" in v.reason
    # the same arrivals in two different steps are also a double count
    s2 = from_sends([(0, 0, 1, 2, 1, 1), (0, 0, 1, 2, 0, 2), (0, 0, 1, 1, 0, 3)], "reduce", 3, 1)
    assert "duplicate reduction" in verify(s2, i).reason
    # two different copies of one piece into one node in one step
    s3 = from_sends([(0, 0, 1, 1, 0, 1, "copy"), (0, 0, 1, 2, 0, 1, "copy")], "reduce", 3, 1)
    assert "conflicting copies" in verify(s3, i).reason
    # a copy plus a reduce: 0 gets 1's value then adds 2's -> {1, 2}, missing 0's own
    s4 = from_sends([(0, 0, 1, 1, 0, 1, "copy"), (0, 0, 1, 2, 0, 1)], "reduce", 3, 1)
    assert "missing contributions of ranks [0]" in verify(s4, i).reason


def test_combining_source_without_contribution():
    # node 3 is not a participant of the reduce: it holds nothing to send
    topo = complete(4)
    coll = make("reduce", [0, 1, 2], 4, root=0)
    i = Instance("x", topo, (coll,))
    s = from_sends([(0, 0, 1, 3, 0, 1)], "reduce", 4, 1)
    assert "source holds no contribution to the piece" in verify(s, i).reason
    ok = from_sends([(0, 0, 1, 1, 3, 1), (0, 0, 1, 3, 0, 2), (0, 0, 1, 2, 0, 2)], "reduce", 4, 1)
    valid(ok, i)


def test_send_order_within_step_is_irrelevant():
    sched = ring_allgather(6)
    perm = np.random.default_rng(0).permutation(len(sched))
    valid(sched.select(perm), inst(ring(6, False), "allgather"))


# ---- hypothesis properties ----------------------------------------------------------------

@st.composite
def connected_topologies(draw, min_nodes=3, max_nodes=9):
    """A random digraph made strongly connected by a Hamiltonian cycle on a random order."""
    n = draw(st.integers(min_nodes, max_nodes))
    seed = draw(st.integers(0, 2**16))
    p = draw(st.sampled_from([0.0, 0.2, 0.5]))
    g = nx.gnp_random_graph(n, p, seed=seed, directed=True)
    order = draw(st.permutations(range(n)))
    edges = set(g.edges()) | {(order[i], order[(i + 1) % n]) for i in range(n)}
    return from_edges(n, sorted(edges), bandwidth=1.0, alpha=0.0, name="random")


def bfs_sends(topo, root, chunk):
    """Sends of a BFS tree from ``root``: each node receives ``chunk`` at its depth."""
    dist = topo.distances
    parents = nx.predecessor(topo.graph, root)
    return [(chunk, 0, 1, parents[v][0], v, int(dist[root, v])) for v in topo.nodes if v != root]


def bfs_allgather(topo):
    sends = [s for r in topo.npus for s in bfs_sends(topo, r, r)]
    return from_sends(sends, "allgather", topo.size, topo.size)


def bfs_broadcast(topo, root):
    return from_sends(bfs_sends(topo, root, 0), "broadcast", topo.size, 1)


def relabel_topology(topo, perm):
    edges = [(perm[u], perm[v]) for u, v in topo.graph.edges()]
    return from_edges(topo.size, edges, bandwidth=1.0, alpha=0.0)


@given(topo=connected_topologies(), data=st.data())
def test_bfs_schedules_verify_and_every_dropped_send_is_caught(topo, data):
    root = data.draw(st.sampled_from(topo.npus))
    bc = bfs_broadcast(topo, root)
    valid(bc, inst(topo, "broadcast", root=root))
    valid(bfs_allgather(topo), inst(topo, "allgather"))
    # every send of a BFS tree is needed: dropping any one must fail
    i = data.draw(st.integers(0, len(bc) - 1))
    assert verify(sends_without(bc, i), inst(topo, "broadcast", root=root)) is not None


@given(topo=connected_topologies(), data=st.data())
def test_relabelling_keeps_validity(topo, data):
    perm = data.draw(st.permutations(range(topo.size)))
    root = data.draw(st.sampled_from(topo.npus))
    t2 = relabel_topology(topo, perm)
    valid(relabel(bfs_allgather(topo), perm), inst(t2, "allgather"))
    valid(relabel(bfs_broadcast(topo, root), perm), inst(t2, "broadcast", root=perm[root]))
    rs = reverse(bfs_allgather(topo))
    valid(relabel(rs, perm), inst(t2.transpose(), "reduce_scatter"))
    # and invalidity: a dropped send stays caught after relabelling
    bad = sends_without(bfs_allgather(topo), 0)
    assert verify(relabel(bad, perm), inst(t2, "allgather")) is not None


@given(
    sends=st.lists(
        st.tuples(
            st.integers(0, 5), st.integers(0, 11), st.integers(1, 12), st.integers(0, 5), st.integers(0, 5),
            st.integers(1, 9), st.sampled_from([None, "copy", "reduce"]),
        ).filter(lambda r: r[1] < r[2]),
        max_size=20,
    ),
    routing=st.sampled_from(S.ROUTINGS),
)
def test_json_round_trip_is_exact(sends, routing, tmp_path_factory):
    rows = [(c, F(lo, 12), F(hi, 12), a, b, t, op) for c, lo, hi, a, b, t, op in sends]
    s = from_sends(rows, "allgather", 6, 6, routing=routing, meta={"producer": "test", "k": [1, 2]})
    back = S.from_json(S.to_json(s))
    assert back.sends() == s.sends() == [Send(*r) for r in rows]
    assert back.routing == routing and back.meta == s.meta and back.collective == "allgather"
    path = tmp_path_factory.mktemp("j") / "s.json"
    S.write_json(s, path)
    again = S.read_json(path)
    assert again.sends() == s.sends() and again.denom == s.denom
    assert S.to_json(again) == S.to_json(s)


@given(topo=connected_topologies())
def test_reversal_of_allgather_is_reduce_scatter_with_mirrored_link_usage(topo):
    ag = bfs_allgather(topo)
    rs = reverse(ag)
    valid(rs, inst(topo.transpose(), "reduce_scatter"))
    T = ag.num_steps

    def usage(s, flip):
        out = {}
        for x in s.sends():
            key = (x.dst, x.src, T + 1 - x.step) if flip else (x.src, x.dst, x.step)
            out[key] = out.get(key, 0) + (x.hi - x.lo)
        return out

    assert usage(rs, flip=True) == usage(ag, flip=False)
    assert rs.num_steps == T
    # reversing twice gives back the allgather
    assert reverse(rs).sorted().sends() == ag.sorted().sends()


@given(topo=connected_topologies(), data=st.data())
def test_merged_concurrent_schedules_verify(topo, data):
    root = data.draw(st.sampled_from(topo.npus))
    ag_c = make("allgather", topo.npus, topo.size)
    bc_c = make("broadcast", topo.npus, topo.size, root=root)
    rs_c = make("reduce_scatter", topo.npus, topo.size)
    instance = Instance("concurrent", topo, (ag_c, bc_c, rs_c))
    offs = instance.chunk_offsets
    # the reduce-scatter is a reversed allgather on the transpose of the transpose = topo
    rs = reverse(bfs_allgather(topo.transpose()))
    parts = [bfs_allgather(topo), bfs_broadcast(topo, root), rs]
    merged = merge(parts, offs)
    valid(merged, instance)
    # split gives back each part
    back = S.split(merged, offs, [c.kind for c in instance.collectives], [c.num_chunks for c in instance.collectives])
    for p, b in zip(parts, back):
        assert b.sorted().sends() == [s._replace(op=s.op or ("reduce" if p.collective == "reduce_scatter" else "copy"))
                                      for s in p.sorted().sends()]
    # a dropped broadcast send is reported with the broadcast's offset chunk id
    bc_rows = np.flatnonzero(merged.chunk == offs[1])
    bad = sends_without(merged, int(bc_rows[0]))
    v = verify(bad, instance)
    assert v is not None
    assert (v.send.chunk if v.send else int(v.reason.split("chunk ")[1].split()[0])) == offs[1]
    # chunk ids beyond every collective are out of range
    over = from_arrays("concurrent", topo.size, 0, chunk=[offs[2] + topo.size], src=[0], dst=[0], step=[1])
    assert "is outside" in verify(over, instance).reason


@pytest.mark.parametrize("n", [8, 16, 12])
@pytest.mark.parametrize("kind", ["alltoall", "allgather", "scatter", "gather"])
def test_every_missing_arrival_is_found_whatever_the_node(kind, n):
    """Direct schedules (each chunk from its holder straight to each node needing it, routed)
    on rings whose node count is (8, 16) or is not (12) a multiple of the eight nodes the
    postcondition check reads at once: complete, they verify; without any one send, the
    verifier names the chunk and node that lack it, as the plain reference finds."""
    instance = inst(ring(n), kind, root=0 if kind in ("scatter", "gather") else None)
    coll = instance.collective
    sends = [(c, 0, 1, int(np.flatnonzero(coll.precondition[c])[0]), v, 1)
             for c in range(coll.num_chunks) for v in np.flatnonzero(coll.postcondition[c] & ~coll.precondition[c])]
    full = from_sends(sends, kind, n, coll.num_chunks, routing="shortest-path")
    assert valid(full, instance)
    for i in range(0, len(sends), max(1, len(sends) // 40)):
        c, _, _, _, v, _ = sends[i]
        violation = verify(sends_without(full, i), instance)
        assert violation is not None and reference_verify(sends_without(full, i), instance) == (None, 1)
        assert violation.index is None and f"node {v} " in violation.reason and f"chunk {c} " in violation.reason, \
            violation.reason


# ---- the vectorised verifier agrees with a plain reference on random schedules ------------

def reference_verify(sched, instance):
    """(index, step) of the first violation by the design's rules, one send at a time in plain
    Python with exact Fractions (None if valid; index None for a missing postcondition)."""
    sends = sched.sends()
    topo = instance.topology
    size = topo.size
    colls, offs = instance.collectives, instance.chunk_offsets
    total = offs[-1] + colls[-1].num_chunks
    live = set(topo.nodes)
    for i, s in enumerate(sends):
        nodes_ok = 0 <= s.src < size and 0 <= s.dst < size and s.src in live and s.dst in live
        if sched.routing == "links":
            route = nodes_ok and topo.has_link(s.src, s.dst)
        else:
            route = nodes_ok and topo.distances[s.src, s.dst] > 0
        if s.step < 1 or not 0 <= s.lo < s.hi <= 1 or not 0 <= s.chunk < total or not route:
            return (i, s.step)
    found = []
    for coll, off in zip(colls, offs):
        mine = [(i, s) for i, s in enumerate(sends) if off <= s.chunk < off + coll.num_chunks]
        r = _reference_one(coll, off, mine, sched.num_steps)
        if r is not None:
            found.append(r)
    return min(found, key=lambda r: (r[1], r[0] is None, r[0] or 0)) if found else None


def _reference_one(coll, off, mine, end):
    comb = coll.combining
    ops = {}
    for i, s in mine:
        ops[i] = s.op or ("reduce" if comb else "copy")
        if not comb and ops[i] == "reduce":
            return (i, s.step)
    cuts = {c: {F(0), F(1)} for c in range(coll.num_chunks)}
    for _, s in mine:
        cuts[s.chunk - off] |= {s.lo, s.hi}
    segs = {c: list(zip(sorted(p)[:-1], sorted(p)[1:])) for c, p in cuts.items()}
    ranks = set(coll.nodes)
    state = {}
    for c in range(coll.num_chunks):
        for v in range(coll.size):
            for g in segs[c]:
                if comb:
                    state[c, g, v] = frozenset({v}) if coll.precondition[c, v] and v in ranks else frozenset()
                else:
                    state[c, g, v] = bool(coll.precondition[c, v])

    def pieces(s):
        c = s.chunk - off
        return [(c, g) for g in segs[c] if s.lo <= g[0] and g[1] <= s.hi]

    for t in sorted({s.step for _, s in mine}):
        batch = [(i, s) for i, s in mine if s.step == t]
        if not comb:
            for i, s in batch:
                if not all(state[c, g, s.src] for c, g in pieces(s)):
                    return (i, t)
            for i, s in batch:
                for c, g in pieces(s):
                    state[c, g, s.dst] = True
            continue
        bad = []
        for i, s in batch:
            if any(not state[c, g, s.src] for c, g in pieces(s)):
                bad.append(i)
                break
        copies, reduces = {}, {}
        for i, s in batch:
            for c, g in pieces(s):
                (copies if ops[i] == "copy" else reduces).setdefault((c, g, s.dst), []).append((i, state[c, g, s.src]))
        new = {}
        for key, lst in copies.items():
            for i, val in lst:
                if val != lst[0][1]:
                    bad.append(i)
                    break
            new[key] = lst[0][1]
        for key, lst in reduces.items():
            acc = new.get(key, state[key])
            for i, val in lst:
                if acc & val:
                    bad.append(i)
                    break
                acc = acc | val
            new[key] = acc
        if bad:
            return (min(bad), t)
        state.update(new)
    full = frozenset(coll.nodes)
    for c in range(coll.num_chunks):
        for v in range(coll.size):
            if coll.postcondition[c, v]:
                for g in segs[c]:
                    if (state[c, g, v] != full) if comb else not state[c, g, v]:
                        return (None, end)
    return None


@st.composite
def random_cases(draw):
    """A random topology, collective and a mostly-plausible random schedule (often invalid)."""
    topo = draw(connected_topologies(3, 5))
    kind = draw(st.sampled_from(["broadcast", "reduce", "scatter", "gather", "allgather",
                                 "reduce_scatter", "allreduce", "alltoall"]))
    root = draw(st.sampled_from(topo.npus)) if kind in ("broadcast", "reduce", "scatter", "gather") else None
    c = draw(st.integers(1, 2))
    instance = make_instance(topo, kind, root=root, chunks_per_node=c)
    coll = instance.collective
    n = topo.size
    holders = {ch: set(np.flatnonzero(coll.precondition[ch]).tolist()) for ch in range(coll.num_chunks)}
    useful = [ch for ch in range(coll.num_chunks) if holders[ch]]
    links = list(topo.graph.edges())
    sends = []
    for t in range(1, draw(st.integers(1, 6)) + 1):
        arrivals = []
        for _ in range(draw(st.integers(0, 6))):
            ch = draw(st.sampled_from(useful))
            cand = sorted(holders[ch])
            u = draw(st.sampled_from(cand))
            outs = [b for a, b in links if a == u]
            v = draw(st.sampled_from(outs))
            lo, hi = sorted(draw(st.lists(st.sampled_from([0, 1, 2, 3, 4]), min_size=2, max_size=2, unique=True)))
            op = draw(st.sampled_from([None, None, "copy", "reduce"])) if coll.combining else None
            sends.append((ch, F(lo, 4), F(hi, 4), u, v, t, op))
            arrivals.append((ch, v))
        for ch, v in arrivals:
            holders[ch].add(v)
    if draw(st.integers(0, 9)) == 0 and sends:  # occasionally a malformed send
        k = draw(st.integers(0, len(sends) - 1))
        s = sends[k]
        sends[k] = draw(st.sampled_from([
            (coll.num_chunks + 1,) + s[1:], s[:3] + (s[3], s[3]) + s[5:], s[:5] + (0,) + s[6:],
            s[:3] + (s[3], (s[3] + 2) % n) + s[5:],
        ]))
    return from_sends(sends, kind, n, coll.num_chunks), instance


@given(case=random_cases())
def test_vectorised_verifier_agrees_with_reference(case):
    sched, instance = case
    v = verify(sched, instance)
    ref = reference_verify(sched, instance)
    got = None if v is None else (v.index, v.step)
    assert got == ref, str(v)


@given(case=random_cases())
def test_verdict_and_message_match_the_vectorised_reference(case):
    """The compiled chunk-by-chunk verifier reports exactly the violation (index, step and
    message) of the former vectorised one, kept as ``reference_verify.py``."""
    sched, instance = case
    assert fields(verify(sched, instance)) == fields(reference_vectorised.verify(sched, instance))


@given(case=random_cases(), shift=st.sampled_from([21, 33]), k=st.sampled_from([1, 2_000_003, 3_000_000_019]))
def test_large_denominators_and_sparse_steps_take_the_general_paths(case, shift, k):
    """Pieces over a denominator beyond the verifier's breakpoint table (located by search, not
    looked up) or beyond 32 bits (simulated on the ranks of the bounds), and step numbers ``k``
    times apart (``k > 1``: too far apart for its counting sort on (chunk, step), a step order
    first; beyond 32 bits: simulated on their ranks) give the plain reference's verdict and the
    former verifier's exact violation."""
    from dataclasses import replace

    sched, instance = case
    scaled = replace(sched.with_denom(sched.denom << shift), step=sched.step.astype(np.int64) * k)
    v = verify(scaled, instance)
    ref = reference_verify(sched, instance)
    assert (None if v is None else (v.index, v.step)) == (None if ref is None else (ref[0], ref[1] * k)), str(v)
    assert fields(v) == fields(reference_vectorised.verify(scaled, instance))


def fields(v) -> tuple | None:
    """A violation's fields (the reference has its own Violation class)."""
    return None if v is None else (v.index, v.send, v.step, v.reason)


@st.composite
def random_concurrent_cases(draw):
    """Two random collectives merged on one topology (chunk offsets), links or routed sends."""
    s1, i1 = draw(random_cases())
    topo = i1.topology
    kind2 = draw(st.sampled_from(["allgather", "reduce_scatter", "broadcast", "reduce"]))
    root = draw(st.sampled_from(topo.npus)) if kind2 in ("broadcast", "reduce") else None
    c2 = make(kind2, topo.npus, topo.size, root=root)
    inst2 = Instance("second", topo, (c2,))
    if kind2 in ("allgather", "broadcast"):
        s2 = bfs_allgather(topo) if kind2 == "allgather" else bfs_broadcast(topo, root)
    else:
        t = topo.transpose()
        s2 = reverse(bfs_allgather(t) if kind2 == "reduce_scatter" else bfs_broadcast(t, root))
    if draw(st.booleans()) and len(s2):
        s2 = sends_without(s2, draw(st.integers(0, len(s2) - 1)))
    both = Instance("both", topo, (i1.collective, c2))
    merged = merge([s1, s2], both.chunk_offsets)
    if draw(st.booleans()):  # routed: any live pair joined by a path is legal
        from dataclasses import replace

        dst = merged.dst.copy()
        if len(dst):
            k = draw(st.integers(0, len(dst) - 1))
            dst[k] = draw(st.sampled_from(topo.npus))
        merged = replace(merged, dst=dst, routing="shortest-path")
    return merged, both


@given(case=random_concurrent_cases())
def test_concurrent_and_routed_verdicts_agree_with_reference(case):
    sched, instance = case
    v = verify(sched, instance)
    assert (None if v is None else (v.index, v.step)) == reference_verify(sched, instance), str(v)
    assert fields(v) == fields(reference_vectorised.verify(sched, instance))
    if v is not None and v.send is not None:
        assert v.send == sched.sends()[v.index]
