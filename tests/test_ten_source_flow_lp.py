"""Per-source flow LP (TE-CCL's all-to-all LP): hand-derived optima, agreement with the
per-chunk models, fractional schedules that verify, switch nodes, refusals, the producer."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from collsynth.formulations import ten_flow_lp, ten_ilp, ten_lp, ten_source_flow_lp as S
from collsynth.instances.generators import build as topo
from collsynth.instances.instance import make_instance
from collsynth.instances.topology import from_edges, with_latency
from collsynth.solvers import backends as B
from collsynth.solvers import pipeline
from collsynth.solvers.producers import Options, get as get_producer
from collsynth.solvers.ten import drivers
from collsynth.tens import bounds, ten, verify
from collsynth.tens.schedule import from_arrays
from cli_errors import run_cli


def least_horizon(module, instance, **params):
    """(smallest horizon whose model delivers everything, that solved model), searched upward
    from the distance bound (so the model's own bound, not a cut bound)."""
    h = max(1, bounds.distance_bound(instance))
    while True:
        m = module.build(instance, h, **params)
        assert B.solve(m, "highs").status == "optimal"
        if module.bound(m) <= h:
            return h, m
        h += 1


def link_load(model) -> float:
    """Chunk-hops of the solved model's flows."""
    return sum(v.value for v in model.flow.values())


def ring(n, bidirectional=False, **kw):
    return make_instance(topo("ring", {"nodes": n, "bidirectional": bidirectional}), "alltoall", **kw)


# ---- hand-derived optima ------------------------------------------------------------------------

@pytest.mark.parametrize("n, bidirectional, chunks, steps, load", [
    # unidirectional 3-ring: every node sends one chunk 1 hop and one 2 hops, 3 x (1 + 2) = 9
    # chunk-hops on 3 links of one chunk per timestep: >= 3 timesteps, and 3 suffice (the
    # 2-hop chunks move in timesteps 1 and 2, the 1-hop ones in 3)
    (3, False, 1, 3, 9),
    # two chunks per shard: 18 chunk-hops on 3 links: >= 6 (each half of the above twice)
    (3, False, 2, 6, 18),
    # unidirectional 4-ring: 4 x (1 + 2 + 3) = 24 chunk-hops on 4 links: >= 6 timesteps; every
    # link can be kept busy from timestep 1 to 6 (shown by the verified schedule)
    (4, False, 1, 6, 24),
    # bidirectional 3-ring: every pair is adjacent, 6 chunks on 6 links at once
    (3, True, 1, 1, 6),
])
def test_ring_optimum_and_link_load_by_hand(n, bidirectional, chunks, steps, load):
    inst = ring(n, bidirectional, chunks_per_node=chunks)
    h, m = least_horizon(S, inst)
    assert h == steps
    before = S.build(inst, steps - 1) if steps > 1 else None
    if before is not None:  # one timestep less cannot carry the load: strictly short
        assert B.solve(before, "highs").status == "optimal"
        assert S.delivered(before) < S.required(before) - 1e-6
    S.polish(m)
    assert B.solve(m, "highs").status == "optimal"
    assert link_load(m) == pytest.approx(load)  # shortest paths only: exactly the hand count
    sched = S.extract(m)
    assert verify.verify(sched, inst) is None and sched.num_steps == steps


def test_four_ring_at_five_timesteps_carries_at_most_twenty_chunk_hops():
    # 4 links x 5 timesteps = 20 chunk-hops < 24: the LP delivers less than the 12 chunks; at
    # most 20 hops, and every delivered chunk took at least one hop
    m = S.build(ring(4), 5)
    assert B.solve(m, "highs").status == "optimal"
    assert S.bound(m) == 6 and link_load(m) <= 20 + 1e-6 and S.delivered(m) < 12


# ---- agreement with the per-chunk models -----------------------------------------------------------

def random_digraph(seed: int, nodes: int, extra: int, slow: bool):
    """A directed cycle through the nodes in a random order plus ``extra`` random arcs; with
    ``slow`` some arcs at half the bandwidth (two timesteps)."""
    rng = random.Random(seed)
    order = list(range(nodes))
    rng.shuffle(order)
    arcs = {(order[i], order[(i + 1) % nodes]) for i in range(nodes)}
    for _ in range(extra):
        arcs.add(tuple(rng.sample(range(nodes), 2)))
    edges = [(u, v, {"bandwidth": 1e9 / (rng.choice([1, 2]) if slow else 1), "alpha": 0.0}) for u, v in sorted(arcs)]
    return from_edges(nodes, edges, name=f"random{seed}")


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), nodes=st.integers(3, 4), extra=st.integers(0, 4), slow=st.booleans(),
       chunks=st.sampled_from([1, 2]))
def test_equals_the_per_chunk_flow_lp_and_bounds_the_ten_lp(seed, nodes, extra, slow, chunks):
    # the per-chunk flow LP with one destination per chunk is the same multicommodity flow,
    # commodity per chunk instead of per source: same least horizon. The hold/sent TEN LP is
    # a relaxation of both (a held fraction may be forwarded twice): never more.
    inst = make_instance(random_digraph(seed, nodes, extra, slow), "alltoall", chunks_per_node=chunks,
                         message_bytes=1e6)
    h, m = least_horizon(S, inst)
    assert least_horizon(ten_flow_lp, inst)[0] == h
    assert least_horizon(ten_lp, inst)[0] <= h
    sched = S.extract(m)
    assert verify.verify(sched, inst) is None and sched.num_steps == h


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 10_000), nodes=st.integers(3, 4), extra=st.integers(0, 3))
def test_integer_flows_equal_the_ten_ilp_optimum_with_whole_chunks(seed, nodes, extra):
    inst = make_instance(random_digraph(seed, nodes, extra, True), "alltoall", message_bytes=1e6)
    h, m = least_horizon(S, inst, integer=True)
    ilp = drivers.horizon_search(inst, ten_ilp, Options(time_limit=60))
    assert ilp.status == "optimal" and int(ilp.objective) == h
    sched = S.extract(m)
    assert sched.denom == 1 and verify.verify(sched, inst) is None and sched.num_steps == h


def test_stronger_than_the_ten_lp_where_a_fraction_comes_back():
    # Node 2's only out-link is 2 -> 1, two timesteps per chunk: its 3 chunks cross one after
    # another, occupying timesteps 1-2, 3-4, 5-6, so the last reaches node 1 at the end of 6
    # (hand bound 6; met: the one for node 1 goes last). The hold/sent TEN LP finishes in 5:
    # half a chunk that crossed 2 -> 1 goes on to 3 and back to 1, where it counts as the
    # other half. The per-source LP, the per-chunk flow LP and the TEN ILP all say 6.
    arcs = [(0, 3, 1), (1, 0, 1), (1, 3, 1), (2, 1, 2), (3, 1, 1), (3, 2, 1)]
    inst = make_instance(from_edges(4, [(u, v, {"bandwidth": 1e9 / k, "alpha": 0.0}) for u, v, k in arcs]),
                         "alltoall", message_bytes=1e6)
    h, m = least_horizon(S, inst)
    assert h == 6 == least_horizon(ten_flow_lp, inst)[0]
    assert least_horizon(ten_lp, inst)[0] == 5
    ilp = drivers.horizon_search(inst, ten_ilp, Options(time_limit=60))
    assert ilp.status == "optimal" and int(ilp.objective) == 6
    assert verify.verify(S.extract(m), inst) is None


# ---- fractional schedules ---------------------------------------------------------------------------

def fractional_instance():
    """5 nodes, a few arcs at half bandwidth (two timesteps), two chunks per shard: its
    optimum (18 timesteps) splits chunks in thirds."""
    arcs = [(0, 2, 1), (1, 3, 1), (1, 4, 1), (2, 1, 2), (2, 3, 2), (3, 1, 1), (4, 0, 1)]
    edges = [(u, v, {"bandwidth": 1e9 / k, "alpha": 0.0}) for u, v, k in arcs]
    return make_instance(from_edges(5, edges), "alltoall", chunks_per_node=2, message_bytes=1e6)


def subset(sched, keep, step=None):
    k = np.asarray(keep)
    return from_arrays(sched.collective, sched.nodes, sched.chunks, chunk=sched.chunk[k], src=sched.src[k],
                       dst=sched.dst[k], step=(sched.step if step is None else step)[k], lo=sched.lo[k],
                       hi=sched.hi[k], denom=sched.denom, meta=sched.meta)


def test_fractional_schedule_verifies_and_its_mutants_do_not():
    inst = fractional_instance()
    h, m = least_horizon(S, inst)
    sched = S.extract(m)
    assert h == 18 and sched.denom > 1 and ((sched.hi - sched.lo) < sched.denom).any()  # pieces of chunks
    assert verify.verify(sched, inst) is None and sched.num_steps == h
    everything = np.ones(len(sched), bool)
    dropped = everything.copy()
    dropped[-1] = False  # a piece never sent
    assert verify.verify(subset(sched, dropped), inst) is not None
    origin = sched.chunk // (2 * 5)  # all-to-all chunk (i * N + k) * c + j starts at node i
    relay = int(np.flatnonzero(sched.src != origin)[0])  # a hop out of an intermediate node
    early = sched.step.copy()
    early[relay] = 1  # before the piece can have reached it
    assert verify.verify(subset(sched, everything, early), inst) is not None


def test_pipelined_latency_by_hand():
    # unidirectional 3-ring, TE-CCL's pipelined latency: a chunk occupies a link for one
    # timestep (its transmission) and arrives one timestep after leaving it. A 2-hop chunk
    # needs 2 x (1 + 1) = 4 timesteps; 4 suffice (each link sends its own 2-hop chunk in 1,
    # its 1-hop chunk in 2 and forwards the 2-hop chunk that arrived at the end of 2 in 3)
    t = with_latency(topo("ring", {"nodes": 3, "bidirectional": False}, bandwidth=1.0, alpha=1.0), "pipelined")
    inst = make_instance(t, "alltoall", message_bytes=9.0)
    data = ten.prepare(inst, 4, switch_copy=True)
    assert data.delay.tolist() == [[1, 1, 1]] and data.latency.tolist() == [1, 1, 1]
    h, m = least_horizon(S, inst)
    assert h == 4
    sched = S.extract(m)
    assert verify.verify(sched, inst) is None and sched.num_steps == 4


# ---- switch nodes -------------------------------------------------------------------------------------

def switch4(hop="timestep"):
    t = topo("switch", {"nodes": 4, "unwind": 0}, bandwidth=1.0, alpha=0.0)
    t = replace(t, meta={**t.meta, "switch_hop": hop})
    return make_instance(t, "alltoall", message_bytes=16.0)


@pytest.mark.parametrize("hop, steps", [
    # 4 NPUs on one switch, one link up and one down each: every NPU sends 3 chunks up one at
    # a time (timesteps 1..3); the switch forwards in the next timestep: the last arrives at 4
    ("timestep", 4),
    # instant hop (TE-CCL's default): GPU -> switch -> GPU within one timestep: 3
    ("instant", 3),
])
def test_switch_optimum_by_hand(hop, steps):
    inst = switch4(hop)
    h, m = least_horizon(S, inst)
    assert h == steps
    S.polish(m)
    assert B.solve(m, "highs").status == "optimal"
    assert link_load(m) == pytest.approx(24)  # 12 chunks, each up and down
    sched = S.extract(m)
    assert verify.verify(sched, inst) is None and sched.num_steps == steps
    assert sched.meta["switch_hop"] == hop


# ---- refusals, the producer ------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, kw, words", [
    ("allgather", {}, "allgather copies chunks (chunk 0 is needed at 3 nodes)"),
    ("broadcast", {"root": 0}, "broadcast copies chunks"),
    ("reduce_scatter", {}, "reduce_scatter combines partial sums"),
    ("allreduce", {}, "allreduce combines partial sums"),
])
def test_refuses_copying_and_combining_collectives_in_one_line(kind, kw, words):
    inst = make_instance(topo("ring", {"nodes": 4}), kind, **kw)
    with pytest.raises(ten.NotSupported) as e:
        S.build(inst, 3)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_cli_refuses_allgather_with_one_line(tmp_path, capsys):
    """The command line's ``main`` in this process (the exit code of the process itself is
    tests/test_bad_inputs.py's)."""
    path = tmp_path / "ag.toml"
    path.write_text('name = "ring4-ag"\n[topology]\ngenerator = "ring"\nnodes = 4\n[collective]\nkind = "allgather"\n')
    code, out, err = run_cli(["solve", path, "--producer", S.NAME, "--json"], capsys)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "copies chunks" in lines[0]


def test_producer_solves_scatter_and_alltoall_to_the_bound():
    assert get_producer(S.NAME).uses_solver
    for inst, steps in ((ring(4), 6), (make_instance(topo("hypercube", {"dim": 3}), "scatter", root=0), 3)):
        row, sched = pipeline.run(inst, S.NAME, Options(time_limit=60))
        assert row["verified"] and row["status"] == "optimal" and row["steps"] == steps
        assert sched is not None and verify.verify(sched, inst) is None


def test_model_is_n_times_smaller_than_per_chunk():
    inst = ring(6, True)
    per_source = len(S.build(inst, 3).flow)
    per_chunk = len(ten_lp.build(inst, 3).sent)
    assert S.model_units(inst) * 5 == 30 * len(inst.topology.link_arrays)  # 6 sources, 30 chunks
    assert per_source < per_chunk
