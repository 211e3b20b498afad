"""Forests of at most k trees a root (solvers/packing/few_trees.py): every such forest on small
switched boxes verifies and uses at most k trees a root, counted from its sends (the distinct
sets of links a root's pieces travel); and the runtime model's export choice, offered a
forest of fewer trees beside a schedule, writes it where a stand-in price counted by hand says
it is cheaper."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.solvers.packing.few_trees import limited
from collsynth.tens.export_choice import chosen_export, program_shape
from collsynth.tens.schedule import OP_REDUCE, from_sends
from collsynth.tens.verify import verify

from test_packing import switched_graphs

M = 1e6


def routes_per_root(schedule) -> dict:
    """Distinct sets of links (src, dst) that one piece of a chunk travels, per chunk and kind
    of send (a reduction's sends and a copy's apart: an allreduce's two forests): the trees a
    root's data takes, counted from the sends alone."""
    links = defaultdict(set)
    for c, lo, hi, u, v, op in zip(*(getattr(schedule, a).tolist() for a in ("chunk", "lo", "hi", "src", "dst")),
                                   schedule.op.tolist()):
        links[(c, op == OP_REDUCE, lo, hi)].add((u, v))
    trees = defaultdict(set)
    for (c, reduce, _, _), arcs in links.items():
        trees[(c, reduce)].add(frozenset(arcs))
    return {key: len(sets) for key, sets in trees.items()}


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(switched_graphs(symmetric=True), st.sampled_from(["allgather", "reduce_scatter", "allreduce"]),
       st.integers(1, 2))
@example(build("ring", {"nodes": 4}, bandwidth=1e9, alpha=0.0), "allgather", 1)  # the optimum packs 2 trees a root
def test_a_limited_forest_verifies_within_k_trees_a_root(topo, kind, k):
    inst = make_instance(topo, kind, message_bytes=M)
    s = limited(inst, k)
    assert verify(s, inst) is None
    assert max(routes_per_root(s).values()) <= k


def test_the_ring_of_four_needs_two_trees_a_root_at_its_optimum():
    """Where the limit binds: on a bidirectional ring of four, a root's chunk reaches the
    others at the optimum (3/2 units a shard) only over two trees (one tree a root loads the
    eight links with twelve tree edges, so 2 units); the unlimited packing uses two, the
    limited one."""
    inst = make_instance(build("ring", {"nodes": 4}, bandwidth=1e9, alpha=0.0), "allgather", message_bytes=M)
    assert max(routes_per_root(limited(inst, 2)).values()) == 2
    assert max(routes_per_root(limited(inst, 1)).values()) == 1


def both_ways():
    """Allgather on a bidirectional ring of three: chunk r's first half goes r -> r+1 -> r+2,
    its second half r -> r-1 -> r-2 (two trees a root: every GPU sends to and receives from
    both neighbours); and the one-tree forest, the whole chunk clockwise (every GPU sends only
    to r+1 and receives only from r-1)."""
    inst = make_instance(build("ring", {"nodes": 3}, bandwidth=1e9, alpha=0.0), "allgather", message_bytes=M)
    cw = [(r, 0, "1/2", (r + h) % 3, (r + h + 1) % 3, h + 1) for r in range(3) for h in range(2)]
    ccw = [(r, "1/2", 1, (r - h) % 3, (r - h - 1) % 3, h + 1) for r in range(3) for h in range(2)]
    one = [(r, 0, 1, (r + h) % 3, (r + h + 1) % 3, h + 1) for r in range(3) for h in range(2)]
    return from_sends(cw + ccw, "allgather", 3, 3), from_sends(one, "allgather", 3, 3), inst


def test_the_choice_writes_the_forest_of_fewer_trees_when_a_stand_in_price_says_so():
    """A stand-in price that, like the runtime model's shared SMs, charges a program by its most
    thread blocks on a GPU. The executor runs at least one thread block per peer and direction,
    so on its own 1/2 grid the two-tree forest runs at least 4 (two send peers, two receive
    peers); on the 1/1 grid its halves round to the whole chunk clockwise, where only the tree
    layouts are tried (the packed one stops at the first grid), at best 3 (a root's send, a
    relay's receive-and-send, a leaf's receive: three trees, three channels). The one-tree
    forest on its own 1/1 grid packed per link runs 2 (one send, one receive). Offered as an
    alternative, it is written (source 1, price 2); without it the choice writes the two-tree
    forest at 3."""
    two, one, inst = both_ways()
    assert verify(two, inst) is None and verify(one, inst) is None

    def price(text):
        return float(program_shape(text)["thread_blocks"])

    layouts = ("links", "trees", "fitted")
    found = chosen_export(two, inst, price, layouts=layouts, fuses=(False, True), max_thread_blocks=4,
                          alternatives=[one])
    assert (found.source, found.seconds, found.layout) == (1, 2.0, "links")
    alone = chosen_export(two, inst, price, layouts=layouts, fuses=(False, True), max_thread_blocks=4)
    assert (alone.source, alone.seconds, alone.grid, alone.layout, alone.fuse) == (0, 3.0, 1, "trees", True)
