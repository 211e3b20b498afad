"""The exact time reversal (tens/time_reversal.py): a reduction as an allgather run backwards,
every link's sends in the reverse of the order the allgather's link served them."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np
from hypothesis import given, settings

from collsynth.instances.instance import make_instance
from collsynth.instances.switch_ops import with_switch_ops
from collsynth.instances.topology import from_edges
from collsynth.solvers.packing import producer as packing
from collsynth.tens import cost_models, verify
from collsynth.tens.bounds import instance_bounds
from collsynth.tens.schedule import from_sends, reverse
from collsynth.tens.time_reversal import in_order_times, late_sends, reversed_in_time
from test_partition_bound import switched

H = Fraction(1, 2)


def _triangle():
    """0 -> 1 -> 2 and 0 -> 2 (each also backwards), 1 byte/s, no latency."""
    edges = [(u, v, {"bandwidth": 1.0, "alpha": 0.0}) for u, v in ((0, 1), (1, 2), (0, 2))]
    return from_edges(3, edges + [(v, u, d) for u, v, d in edges])


def test_a_relay_by_hand():
    """A broadcast of 2 bytes from 0: the half ``[0, 1/2)`` goes 0 -> 1 -> 2, the half
    ``[1/2, 1)`` to 1 and 2 directly, link 0 -> 1 serving the half 1 forwards first. By hand,
    in order: 0 -> 1 busy over [0, 1] then [1, 2], 1 -> 2 over [1, 2]: 2 s. Its reversal (a
    reduce to 0) is due to send 1's own half at 0 and its relayed half at 1: 2 s in order, no
    send late. The step reversal alone keeps the relayed half first on 1 -> 0, which waits for
    2's half until 1 s and holds 1's own half until 2 s: 3 s, one send late."""
    topo = _triangle()
    bcast = from_sends([(0, 0, H, 0, 1, 1), (0, H, 1, 0, 1, 1), (0, H, 1, 0, 2, 1), (0, 0, H, 1, 2, 2)],
                       "broadcast", nodes=3, chunks=1)
    source = make_instance(topo, "broadcast", message_bytes=2.0, root=0)
    target = make_instance(topo, "reduce", message_bytes=2.0, root=0)
    exact, steps_only = reversed_in_time(bcast), reverse(bcast)
    assert verify.verify(bcast, source) is None
    assert verify.verify(exact, target) is None and verify.verify(steps_only, target) is None
    start, arrival = in_order_times(bcast, source)
    assert start.tolist() == [0.0, 1.0, 0.0, 1.0] and arrival.tolist() == [1.0, 2.0, 1.0, 2.0]
    assert cost_models.price(exact, target, "event-inorder").total_s == 2.0
    assert cost_models.price(steps_only, target, "event-inorder").total_s == 3.0
    assert late_sends(bcast, source, exact, target) == 0
    assert _late_in_row_order(bcast, source, steps_only, target) == 1
    assert cost_models.price(exact, target, "sync").total_s == cost_models.price(bcast, source, "sync").total_s


def _late_in_row_order(original, original_instance, steps_only, instance) -> int:
    """Late sends of the step reversal, whose row ``i`` reverses the original's row ``i``."""
    _, arrival = in_order_times(original, original_instance)
    start, _ = in_order_times(steps_only, instance)
    return int(((start - (arrival.max() - arrival)) > 1e-12).sum())


@settings(max_examples=8, deadline=None)
@given(switched())
def test_the_reversal_of_a_packed_allgather_verifies_and_is_never_slower_in_order(topo):
    """Random switched boxes: tree packing's allgather on the transposed topology, reversed in
    time, verifies as the reduce-scatter; no send starts later than due (the module doc's
    induction), so its in-order time is at most the allgather's; its ``sync`` time equals the
    allgather's (the same step loads in reverse order); the two instances' lower bounds agree.
    The allgather is priced with each switch forwarding every arrival once (``switch_copy``
    false), the pairing its reversal keeps."""
    reduce_scatter = make_instance(topo, "reduce_scatter", message_bytes=2.4e5)
    allgather = make_instance(topo.transpose(), "allgather", message_bytes=2.4e5)
    forest = packing.forest(allgather, "allgather", False)
    ag = packing._with_header(packing.emit(allgather, forest, 4), allgather)
    ag = replace(ag, meta={**ag.meta, "switch_copy": False})  # a switch forwards each arrival once, as reversed
    rs = packing._with_header(reversed_in_time(ag), reduce_scatter)
    assert verify.verify(ag, allgather) is None
    assert verify.verify(rs, reduce_scatter) is None
    assert late_sends(ag, allgather, rs, reduce_scatter) == 0
    for model in ("event-inorder", "sync"):
        back, forth = (cost_models.price(s, i, model).total_s for s, i in ((rs, reduce_scatter), (ag, allgather)))
        assert back <= forth * (1 + 1e-9), model
    assert abs(cost_models.price(rs, reduce_scatter, "sync").total_s - cost_models.price(ag, allgather, "sync").total_s
               ) <= 1e-9 * cost_models.price(ag, allgather, "sync").total_s
    # under `sync` the reversal of any reduce-scatter is an allgather as fast whose switches
    # copy nothing, so a reduce-scatter bound above the bound of that allgather (switches
    # declared not to copy) would be invalid (each is proved by its own arguments; the
    # allgather's may be larger: the cut's latency inside the side it enters). Against an
    # allgather whose switches may copy it may be larger: copies can make that allgather faster
    # (a switch of one GPU behind another switch: the drain argument of a box of one holds only
    # without copies, 215 us against 180 us).
    forwarding = make_instance(with_switch_ops(topo.transpose(), no_copy=topo.switches), "allgather",
                               message_bytes=2.4e5)
    b_rs, b_ag = instance_bounds(reduce_scatter), instance_bounds(forwarding)
    assert b_rs.of("sync").value <= b_ag.of("sync").value * (1 + 1e-9)


@settings(max_examples=6, deadline=None)
@given(switched())
def test_a_reductions_dependencies_are_found_by_bisection_and_exactly(topo):
    """Regression (reduce-scatter priced by the conservative prefix at 200+ pieces, 2.41x on
    A100 x2 where the exact dependencies give 1.012x): in a reversed pipelined forest every
    child of a relay sends it the same piece, and each arrival group is still searched by
    bisection (:func:`collsynth.tens.piece_overlaps.by_piece`); the pairs found are those of a
    brute-force search over every earlier arrival at a GPU source of an overlapping piece."""
    from collsynth.tens.dependencies import dependency_pairs, dependencies, step_view
    from collsynth.tens.piece_overlaps import by_piece

    inst = make_instance(topo, "reduce_scatter", message_bytes=2.4e5)
    rs = packing._with_header(packing.emit(inst, packing.forest(inst, "allgather", True), 6), inst)
    view = step_view(rs)
    groups = dependencies(view, inst, want_pairs=False, schedule=rs)
    assert by_piece(view.lo, view.hi, groups.members, groups.gstart)[1].all()
    i, j = dependency_pairs(rs, inst)
    gpu = ~np.isin(rs.src, list(topo.switches))
    found = {(a, b) for a, b in zip(i.tolist(), j.tolist()) if gpu[a]}
    brute = {(a, b) for a in np.flatnonzero(gpu).tolist() for b in range(len(rs))
             if rs.dst[b] == rs.src[a] and rs.chunk[b] == rs.chunk[a] and rs.step[b] < rs.step[a]
             and rs.lo[b] < rs.hi[a] and rs.lo[a] < rs.hi[b]}
    assert found == brute
