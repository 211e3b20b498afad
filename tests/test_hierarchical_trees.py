"""Hierarchical trees (``collsynth.solvers.packing.hierarchical``): a tier at a time, GPUs relaying.

- hypothesis over small Clos fabrics (DGX H100, a k = 4 fat tree, rail Clos with leaves 1:1 and
  2:1, two planes, two pods under cores), allgather and reduce-scatter: the trees kept with the
  box shifts, every tree listed and their explicit sends get the same verdict (valid, by the
  project's verifier) and the same ``sync`` steps, T_L and T_B;
- counts by hand: routes and depth on a two-pod, two-plane Clos;
- tree packing keeps them where they price lower (a 1 GiB reduce-scatter on a k = 4 fat tree).
"""

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.solvers.packing import compact
from collsynth.solvers.packing.hierarchical import hierarchical
from collsynth.solvers.packing.producer import run_compact
from collsynth.solvers.producers import Options
from collsynth.tens.pipelined_trees import price_sync
from collsynth.tens.pipelined_trees import verify as verify_trees

from compact_checks import SMALL_CLOS, assert_priced_as_listed
from test_translated_trees import translated_form

PODS = {"pods": 2, "groups_per_pod": 2, "boxes_per_group": 2, "gpus_per_box": 2, "rails": 2, "spines": 2,
        "cores": 2, "radix": 16}
FABRICS = st.one_of(SMALL_CLOS, st.just(("rail_clos", PODS)), st.just(("rail_clos", {**PODS, "planes": 2})))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=FABRICS, kind=st.sampled_from(["allgather", "reduce_scatter"]), pieces=st.integers(1, 3))
def test_kept_listed_and_explicit_agree(fabric, kind, pieces):
    inst = make_instance(build(*fabric), kind, message_bytes=1 << 20)
    h = hierarchical(inst, translated_form(inst))
    assert h is not None and h.copies > 1
    assert_priced_as_listed(replace(h, pieces=pieces), inst)


def test_two_pods_two_planes_by_hand():
    """Two pods of two groups of two boxes of two GPUs (16 GPUs, ids in that order), two planes.
    Read from GPU 0, each plane's tree reaches GPU 8 across the cores (6 hops), GPU 4 and, from
    8, GPU 12 across their pods' spines (4 hops each), GPUs 2, 6, 10, 14 over their leaves from
    0, 4, 8, 12 (2 hops each) and then the other GPU of each of the 8 boxes over its box switch
    (2 hops each): 6 + 8 + 8 + 16 = 38 hops; the last, GPU 15, 6 + 4 + 2 + 2 = 14 hops from
    the root. Each tree carries half of a shard."""
    inst = make_instance(build("rail_clos", {**PODS, "planes": 2}), "reduce_scatter", message_bytes=1 << 20)
    h = hierarchical(inst, translated_form(inst))
    assert verify_trees(h, inst) is None
    assert h.k == 2 and h.root.tolist() == [0, 0] and h.lo.tolist() == [0, 1] and h.hi.tolist() == [1, 2]
    assert h.ptr.tolist() == [0, 38, 76] and h.depth == 14
    arrive = {int(d): int(b) + 1 for d, b in zip(h.dst[:38], h.before[:38]) if int(d) < 16}
    assert arrive == {8: 6, 4: 4, 12: 10, 2: 2, 6: 6, 10: 8, 14: 12,
                      1: 2, 3: 4, 5: 6, 7: 8, 9: 8, 11: 10, 13: 12, 15: 14}


def test_tree_packing_keeps_the_cheaper_forest():
    inst = make_instance(build("fat_tree", {"k": 4}), "reduce_scatter", message_bytes=float(1 << 30))
    out = run_compact(inst, Options(time_limit=60))
    kept = price_sync(out.schedule, inst).total_s
    assert out.extra["tier_by_tier"]
    assert kept <= compact.least_sync(translated_form(inst), inst)[1].total_s
