"""The ``event`` price of trees moved by box shifts, simulated on one link per orbit
(``tens/pipelined_event.py``): on small Clos fabrics (DGX H100 on rails, k = 4 fat trees, rail
Clos with one group or two under a spine, leaves oversubscribed, a dual-plane HPN of two
segments) it is exactly the price the
project's event model gives the explicit sends, for allgather, reduce-scatter and allreduce;
the shifts it keeps are those whose products keep no used link, found by listing every
product; and where a product keeps a used link, simulating one link per orbit of every shift
is not the explicit price (the condition the quotient needs is not idle)."""

import contextlib

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.solvers.packing import translated
from collsynth.solvers.packing.producer import _compact_forest, _with_header
from collsynth.solvers.pipeline import run
from collsynth.solvers.producers import Options
from collsynth.tens import cost_models, dependencies, pipelined_event
from collsynth.tens.compact_forms import form_of
from collsynth.tens.cost import price_event
from collsynth.tens.pipelined_trees import images, keeping_first, link_orbits, moved_sends
from compact_checks import SMALL_CLOS, THREE_TIERS

fabrics = st.one_of(
    SMALL_CLOS,
    THREE_TIERS,  # a level of the shifts cut in two (solvers/packing/free_shifts.py)
    st.builds(lambda boxes, gpus: ("rail_clos", {"groups_per_pod": 1, "boxes_per_group": boxes, "gpus_per_box": gpus,
                                                 "rails": gpus, "spines": 1, "radix": 16}),
              st.integers(2, 3), st.sampled_from([1, 2])),  # one group: no spine tier
    st.just(("hpn", {"segments": 2, "hosts_per_segment": 2, "aggregations": 1, "oversubscription": [2.0, 1.0]})),
)  # HPN: a shift of the boxes of a segment keeps used links, the planes' and the rails' do not (listed first)


@contextlib.contextmanager
def untwisted():
    """Trees moved by the box shifts as found (``instances/box_shift.py``), not turned by
    ``solvers/packing/free_shifts.py``: the shifts that keep used links stay."""
    kept = translated.free_shifts
    translated.free_shifts = lambda topology, shift: shift
    try:
        yield
    finally:
        translated.free_shifts = kept


@contextlib.contextmanager
def pair_budget(candidates=0):
    """The budget of candidates for exact dependency pairs at ``candidates`` (or two per send)."""
    kept = dependencies.PAIR_BUDGET
    dependencies.PAIR_BUDGET = candidates
    try:
        yield
    finally:
        dependencies.PAIR_BUDGET = kept


def compact(fabric, kind, pieces=1, twisted=True):
    inst = make_instance(build(*fabric), kind, message_bytes=1 << 20)
    with contextlib.nullcontext() if twisted else untwisted():
        row, trees = run(inst, "tree-packing", Options(time_limit=120, params={"form": "compact", "pieces": pieces}))
    assert row["verified"]
    return inst, trees


def explicit_event(trees, inst):
    return cost_models.price(_with_header(form_of(trees).expand(trees), inst), inst, "event")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=fabrics, kind=st.sampled_from(["allgather", "reduce_scatter", "allreduce"]), pieces=st.integers(1, 3),
       twisted=st.booleans())
def test_priced_per_orbit_as_the_explicit_sends(fabric, kind, pieces, twisted):
    inst, trees = compact(fabric, kind, pieces, twisted)
    want = explicit_event(trees, inst)
    got = pipelined_event.price(trees, inst)
    assert got.total_s == want.total_s and got.T_L_s == want.T_L_s  # the same simulation, not an approximation
    assert got.extra["simulated_sends"] == pipelined_event.sends_priced(trees, inst) <= want.extra["messages"]


def first_free_by_products(f, la) -> int:
    """The fewest first shifts to list so that no product of the others but the identity maps
    a link the trees use onto itself, by listing every product as a permutation of the nodes."""
    src, dst = (f.dst, f.src) if f.reversed else (f.src, f.dst)
    nodes = np.arange(len(f.shift[0]))
    for m in range(len(f.orders) + 1):
        products = images(nodes, f.shift[m:], f.orders[m:])[1:] if m < len(f.orders) else nodes[None, :0]
        if not any(((p[src] == src) & (p[dst] == dst)).any() for p in products):
            return m
    return len(f.orders)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=fabrics, kind=st.sampled_from(["allgather", "reduce_scatter"]), twisted=st.booleans())
def test_the_shifts_kept_are_those_whose_products_keep_no_used_link(fabric, kind, twisted):
    inst, trees = compact(fabric, kind, twisted=twisted)
    assert trees.shift is not None
    assert pipelined_event.free_from(trees, inst.topology.link_arrays) == first_free_by_products(trees,
                                                                                                 inst.topology.link_arrays)


def test_hpn_lists_the_boxes_shift_first():
    """HPN, two segments of two hosts (shifts: the rails of a box, 8; the boxes of a segment, 2;
    the segments, 2): swapping the hosts of a segment keeps their ToRs' uplinks, so that shift
    is put first and listed, the rails' and the segments' products (16 of them) keep no used
    link: 1/16 of the sends are simulated."""
    inst, trees = compact(("hpn", {"segments": 2, "hosts_per_segment": 2, "aggregations": 1,
                                   "oversubscription": [2.0, 1.0]}), "allgather", 2, twisted=False)
    moved = keeping_first(trees)
    assert trees.orders == (8, 2, 2) and moved.orders == (2, 8, 2) and np.array_equal(moved.shift[0], trees.shift[1])
    assert pipelined_event.free_from(moved, inst.topology.link_arrays) == 1
    assert pipelined_event.sends_priced(trees, inst) * 16 == trees.sends


def test_dgx_h100_every_shift_kept_and_fat_tree_by_hand():
    """DGX H100 x3: every link has a GPU at one end and the shifts move every GPU onto every
    other exactly once, so no product but the identity keeps a link: one listed GPU's trees
    are simulated for all 24. A k = 4 fat tree (shifts: the two hosts of an edge switch, the
    two edge switches of a pod, the four pods): swapping the hosts of an edge switch keeps its
    links up to the aggregation switches, which every tree uses, so that shift is listed."""
    inst, trees = compact(("dgx_h100", {"nodes": 3}), "allgather", 2)
    la = inst.topology.link_arrays
    assert pipelined_event.free_from(trees, la) == 0
    assert pipelined_event.sends_priced(trees, inst) * 24 == trees.sends
    inst, trees = compact(("fat_tree", {"k": 4}), "allgather", twisted=False)
    assert trees.orders == (2, 2, 4) and pipelined_event.free_from(trees, inst.topology.link_arrays) >= 1


def test_a_shift_keeping_a_used_link_breaks_the_quotient():
    """A k = 4 fat tree: swapping the hosts of an edge switch keeps its uplinks. One link per
    orbit of every shift serves ``h s`` and ``s`` there as one hop, where the explicit sends
    queue one behind the other: a lower price than the explicit sends' (the simulation on
    the shifts that keep no used link is the explicit price). The trees' sends into a copying
    switch are not merged here: merged, the two images leave as one send."""
    inst = make_instance(build("fat_tree", {"k": 4}), "allgather", message_bytes=1 << 20)
    opts = Options(time_limit=120, params={"form": "compact", "pieces": 1})
    with untwisted():
        trees, _ = _compact_forest(inst, opts, opts.timer(), multicast=False)  # every route's own uplink send
    la = inst.topology.link_arrays
    group, _ = link_orbits(la, trees.shift, trees.orders)
    naive = price_event(_with_header(moved_sends(trees, 0), inst), inst, links_as=group)
    want = explicit_event(trees, inst)
    assert pipelined_event.price(trees, inst).total_s == want.total_s
    assert naive.total_s < want.total_s


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fabric=fabrics, kind=st.sampled_from(["reduce_scatter", "allreduce"]), pieces=st.integers(2, 3))
def test_past_the_pair_budget_priced_as_the_explicit_sends_are(fabric, kind, pieces):
    """With no fixed budget for exact dependency pairs (two candidates per send), the explicit
    sends of a pipelined reduce-scatter or allreduce fall back to group prefixes where a send
    looks at more; priced ``as_explicit``, the simulation per orbit does so at the same sends."""
    inst, trees = compact(fabric, kind, pieces)
    with pair_budget():
        assert pipelined_event.price(trees, inst, as_explicit=True).total_s == explicit_event(trees, inst).total_s


def test_prefixes_where_the_explicit_sends_would_and_exact_pairs_otherwise():
    """DGX H100 x3's allreduce at 3 pieces: the explicit sends' pairs need more than two
    candidates per send, so with nothing but that budget they wait by group prefixes (a price
    above the exact one); with a fixed budget of two per explicit send (24 images of each
    simulated send) they still do, and ``as_explicit`` gives that price, while by default the
    simulated sends, whose candidates are 24 times fewer, keep the exact pairs and the exact price."""
    inst, trees = compact(("dgx_h100", {"nodes": 3}), "allreduce", 3)
    exact = explicit_event(trees, inst).total_s
    with pair_budget(2 * trees.sends):
        by_prefix = explicit_event(trees, inst).total_s
        as_explicit = pipelined_event.price(trees, inst, as_explicit=True)
        own = pipelined_event.price(trees, inst)
    assert by_prefix > exact and as_explicit.total_s == by_prefix and not as_explicit.extra["exact_pairs"]
    assert own.total_s == exact and own.extra["exact_pairs"]
