"""The synchronous bound with latency, ``T >= L + T*`` (``collsynth.tens.bounds.instance._sync_total``):

- met on a path of three nodes by a schedule written by hand (so it is that instance's optimum
  and no bound of every fabric lies above it), its value derived by hand;
- its latency part is the largest latency-weighted distance from a GPU to another, by an
  independent all-pairs Dijkstra (networkx) on small DGX H100, fat-tree and rail Clos fabrics;
  its bandwidth part is the cut optimum, against every node set enumerated on a small rail
  Clos (hypothesis picks the bandwidths);
- below the ``sync`` price of every verified schedule: tree packing's trees at random pipeline
  depths, in explicit and compact form, on those fabrics (hypothesis), and the TEN ILP's
  optimum on a path (whole chunks).
"""

import itertools
from dataclasses import replace

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.solvers import pipeline
from collsynth.solvers.packing.producer import _with_header
from collsynth.solvers.pipeline import Options
from collsynth.tens import cost_models, verify
from collsynth.tens.bounds import instance_bounds
from collsynth.tens.pipelined_trees import expand, price_sync
from collsynth.tens.pipelined_trees import verify as verify_trees
from collsynth.tens.schedule import from_arrays

from test_symmetric_bounds import fabrics
from test_translated_trees import translated_form

TOL = 1 + 1e-9  # prices are sums of floats



def test_met_on_a_path_of_three():
    alpha, B, M = 1e-6, 1e9, 3e6
    inst = make_instance(build("mesh", {"dims": [3]}, bandwidth=B, alpha=alpha), "allgather", message_bytes=M)
    # step 1: every shard to each neighbour; step 2: node 1 forwards 0's shard to 2 and 2's to 0
    sends = [(0, 0, 1, 1), (1, 1, 0, 1), (1, 1, 2, 1), (2, 2, 1, 1), (0, 1, 2, 2), (2, 1, 0, 2)]
    chunk, src, dst, step = (np.array(c) for c in zip(*sends))
    sched = from_arrays("allgather", 3, 3, chunk=chunk, lo=np.zeros(6, int), hi=np.ones(6, int), src=src, dst=dst,
                        step=step)
    assert verify.verify(sched, inst) is None
    by_hand = 2 * alpha + 2 * (M / 3) / B  # L = 2 alpha (0 -> 2); node 0 takes in 2 M / 3 over one link
    assert cost_models.price(sched, inst, "sync").total_s == pytest.approx(by_hand, rel=1e-12)
    assert instance_bounds(inst).sync.value == pytest.approx(by_hand, rel=1e-12)


def _alpha_eccentricity(topo) -> float:
    """The largest least-latency path from a GPU to another GPU (networkx Dijkstra)."""
    g = nx.DiGraph()
    la = topo.link_arrays
    for u, v, a in zip(la.src.tolist(), la.dst.tolist(), la.alpha.tolist()):
        g.add_edge(u, v, alpha=a)
    gpus = set(topo.npus)
    return max(d for u in gpus for v, d in nx.single_source_dijkstra_path_length(g, u, weight="alpha").items()
               if v in gpus and v != u)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=fabrics)
def test_latency_part_is_the_alpha_eccentricity(fabric):
    gen, params = fabric
    inst = make_instance(build(gen, params), "allgather", message_bytes=1 << 20)
    got = instance_bounds(inst).part("sync_latency").value
    assert got == pytest.approx(_alpha_eccentricity(inst.topology), rel=1e-9)


@settings(max_examples=6, deadline=None)
@given(nic=st.sampled_from([25e9, 50e9, 100e9]), box=st.sampled_from([100e9, 450e9]))
def test_bandwidth_part_is_the_best_cut_by_enumeration(nic, box):
    topo = build("rail_clos", {"groups_per_pod": 1, "boxes_per_group": 2, "gpus_per_box": 2, "rails": 2,
                               "spines": 1, "radix": 16})
    la = topo.link_arrays
    bw = np.where(la.bandwidth >= 400e9, box, nic)  # in-box links at ``box``, the rest at ``nic``
    edges = [(u, v, {"bandwidth": float(b), "alpha": 1e-6}) for u, v, b, c in
             zip(la.src.tolist(), la.dst.tolist(), bw.tolist(), la.count.tolist()) for _ in range(c)]
    from collsynth.instances.topology import from_edges

    t = from_edges(topo.size, edges, switches=sorted(topo.switches))
    M = 1 << 20
    inst = make_instance(t, "allgather", message_bytes=M)
    gpus, shard = list(t.npus), M / len(t.npus)
    best = 0.0
    for r in range(1, t.size):
        for S in itertools.combinations(range(t.size), r):
            inside = np.zeros(t.size, bool)
            inside[list(S)] = True
            need = sum(1 for g in gpus if not inside[g]) * shard  # shards from outside S, if S holds a GPU
            if not any(inside[g] for g in gpus) or need == 0:
                continue
            enter = inside[la.dst] & ~inside[la.src]
            best = max(best, need / float((bw * la.count)[enter].sum()))
    assert instance_bounds(inst).part("sync_bandwidth").value == pytest.approx(best, rel=1e-9)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=fabrics, pieces=st.integers(1, 24))
def test_below_every_tree_packing_price(fabric, pieces):
    gen, params = fabric
    inst = make_instance(build(gen, params), "allgather", message_bytes=1 << 20)
    bound = instance_bounds(inst).sync.value
    c = replace(translated_form(inst), pieces=pieces)
    assert verify_trees(c, inst) is None
    assert bound <= price_sync(c, inst).total_s * TOL
    sched = _with_header(expand(c), inst)
    assert verify.verify(sched, inst) is None
    assert bound <= cost_models.price(sched, inst, "sync").total_s * TOL


def test_below_the_ten_ilp_optimum_on_a_path():
    inst = make_instance(build("mesh", {"dims": [4]}, bandwidth=1e9, alpha=1e-6), "allgather", message_bytes=4e6)
    row, sched = pipeline.run(inst, "ten-ilp", Options(driver="horizon", time_limit=60))
    assert row["verified"]
    assert instance_bounds(inst).sync.value <= row["time_sync_s"] * TOL
