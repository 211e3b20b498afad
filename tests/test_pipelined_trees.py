"""Trees plus a pipeline rule against their explicit sends: on small Clos fabrics the compact
form and its expansion get the same verdict from the two verifiers and the same synchronous
price from the two pricers; mutants (a dropped hop, an early hop, a hop off the links, a
missing share) are rejected by both."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.solvers.packing import compact
from collsynth.solvers.packing.producer import _with_header, forest, plan
from collsynth.solvers.packing.tree_hops import tree_hops
from collsynth.tens import cost_models, verify
from collsynth.tens.pipelined_trees import expand, price_sync
from collsynth.tens.pipelined_trees import verify as verify_trees

clos_params = st.fixed_dictionaries({
    "groups_per_pod": st.integers(1, 2), "boxes_per_group": st.integers(1, 3), "gpus_per_box": st.sampled_from([1, 2]),
    "oversubscription": st.sampled_from([[1.0, 1.0], [2.0, 1.0]]),
})


def small_clos(p):
    params = {**p, "rails": 1 if p["gpus_per_box"] == 1 else 2, "spines": 1, "radix": 16}
    if p["groups_per_pod"] * p["boxes_per_group"] * p["gpus_per_box"] < 2:
        params["boxes_per_group"] = 2
    return build("rail_clos", params)


def forms(inst, pieces, shape="auto"):
    """``[(compact, explicit)]``: each forest of tree packing on ``inst`` in both forms."""
    out = []
    for kind, transposed in plan(inst.collective.kind):
        c = compact.pipelined(inst, forest(inst, kind, transposed, shape=shape), pieces, tree_hops)
        out.append((c, _with_header(expand(c), inst)))
    return out


def explicit_verdict(sched, inst):
    return verify.verify(sched, inst) is None


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p=clos_params, kind=st.sampled_from(["allgather", "reduce_scatter"]), pieces=st.integers(1, 4))
def test_compact_and_explicit_verify_and_price_alike(p, kind, pieces):
    inst = make_instance(small_clos(p), kind, message_bytes=1 << 20)
    for c, sched in forms(inst, pieces, "greedy"):
        assert verify_trees(c, inst) is None
        assert explicit_verdict(sched, inst)
        assert len(sched) == c.sends
        want = cost_models.price(sched, inst, "sync")
        got = price_sync(c, inst)
        assert got.steps == want.steps
        assert got.T_L_s == pytest.approx(want.T_L_s, rel=1e-12)
        assert got.T_B_s == pytest.approx(want.T_B_s, rel=1e-12)


def without_hop(c, h):
    t = int(np.searchsorted(c.ptr, h, side="right")) - 1
    ptr = c.ptr.copy()
    ptr[t + 1:] -= 1
    keep = np.arange(len(c.src)) != h
    return replace(c, ptr=ptr, src=c.src[keep], dst=c.dst[keep], before=c.before[keep])


def mutants(c, inst):
    """Broken copies of ``c``, each with what breaks it."""
    last = len(c.src) - 1
    deepest = int(np.argmax(c.before))
    early = c.before.copy()
    early[deepest] -= 1
    off = c.dst.copy()
    off[0] = c.src[0]  # a hop from a node to itself is no link
    yield "dropped hop", without_hop(c, last)
    yield "early hop", replace(c, before=early)
    yield "hop off the links", replace(c, dst=off)
    yield "missing share", replace(c, hi=np.where(np.arange(len(c.hi)) == 0, c.hi - 1, c.hi))


@pytest.mark.parametrize("gen, params", [
    ("fat_tree", {"k": 4}),
    ("rail_clos", {"groups_per_pod": 2, "boxes_per_group": 2, "gpus_per_box": 2, "rails": 2, "spines": 2, "radix": 4}),
])
def test_mutants_are_rejected_by_both(gen, params):
    inst = make_instance(build(gen, params), "allgather", message_bytes=1 << 20)
    (c, _), = forms(inst, 2)
    for what, bad in mutants(c, inst):
        if what == "missing share" and int(c.hi[0] - c.lo[0]) < 1:
            continue
        compact_ok = verify_trees(bad, inst) is None
        try:
            explicit_ok = explicit_verdict(_with_header(expand(bad), inst), inst)
        except ValueError:  # an expansion the schedule type itself refuses (a piece of width 0)
            explicit_ok = False
        assert not compact_ok and not explicit_ok, what
