"""The TEN ILP with native reductions on switches that reduce (``ten-ilp-combining`` with a
reducing switch node), against optima derived by hand and the ``combining-arrivals`` bound.

Hand derivations (one chunk per GPU, every link one chunk per timestep, a switch holds
nothing: what reaches it at the end of timestep ``t`` leaves in ``t + 1``):

- 4 GPUs around one reducing, multicasting switch, allreduce of 4 chunks. Each GPU must take
  in a chunk's worth of every result (4 arrivals over its one in-link) and nothing reaches it
  in timestep 1 (the switch holds nothing at the start): at least ``1 + 4 = 5``. NVLS meets
  it: chunk ``c`` goes up from every GPU in timestep ``c + 1`` and the switch multicasts its
  sum in ``c + 2``.
- Reduce-scatter on the same box: each GPU sends its contribution to the 3 other blocks up its
  one link, and what it sends in timestep ``s`` reaches the owner at ``s + 1``: at least
  ``3 + 1 = 4``, with or without the switch summing (summing spares the owner's in-link, not
  the senders' out-links), met by 3 chunks up in timesteps 1-3, each sum down one timestep later.
- Two boxes of 2 GPUs, each box's reducing switch joined by one NIC link to a reducing top
  switch: a GPU's result holds the other box's contributions, 4 hops away (GPU, box switch,
  top switch, box switch, GPU), and it takes in 4 results over one link: at least ``3 + 4 =
  7``, met by the tree GPU -> box switch -> top switch -> box switches -> GPUs pipelined one
  chunk per timestep.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from collsynth.formulations import ten_ilp_combining
from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.instances.switch_ops import with_switch_ops
from collsynth.instances.topology import from_edges
from collsynth.solvers.producers import Options, Unsupported, get
from collsynth.solvers.ten.formulation_producers import producer
from collsynth.tens.bounds import combining_arrivals, instance_bounds, respects_ten_capacity
from collsynth.tens.cost_models import price
from collsynth.tens.verify import verify

ILP = producer(ten_ilp_combining)


def solve(inst, limit=60.0, **params):
    o = ILP.run(inst, Options(time_limit=limit, params={"lp_bound": False, **params}))
    if o.schedule is not None:
        assert verify(o.schedule, inst) is None
    return o


def box(kind="allreduce", reduce=True, copy=True, n=4):
    return make_instance(build("switch", {"nodes": n, "reduce": reduce, "copy": copy}, bandwidth=1e9, alpha=0.0),
                         kind, message_bytes=n * 1e6)


def two_level(gpus: int, nics: int = 1):
    """Two boxes of ``gpus`` GPUs, each around a reducing, multicasting switch, the box switches
    joined by ``nics`` links each way to a reducing, multicasting top switch."""
    n = 2 * gpus
    edges = [(g, n + g // gpus) for g in range(n)] + [(n + b, n + 2) for b in range(2) for _ in range(nics)]
    t = from_edges(n + 3, edges, bandwidth=1e9, alpha=0.0, bidirectional=True, switches=[n, n + 1, n + 2])
    return with_switch_ops(t, reduce=[n, n + 1, n + 2], copy=[n, n + 1, n + 2])


def test_allreduce_on_a_four_gpu_box_with_a_reducing_switch_is_proven_optimal():
    inst = box()
    bound = instance_bounds(inst).timesteps
    assert (bound.value, bound.source) == (5, "combining-arrivals")
    o = solve(inst)
    assert (o.status, o.objective, o.bound) == ("optimal", 5.0, 5.0)
    ups = [s for s in o.schedule.sends() if s.dst == 4]
    assert all(s.op == "reduce" for s in ups) and len(ups) == 16  # every contribution goes up once
    assert len([s for s in o.schedule.sends() if s.src == 4]) == 16  # every result comes down once


def test_the_same_box_whose_switch_only_forwards_is_slower():
    """Without in-switch sums each GPU's in-link takes 3 partials of its own block and 3
    results: at least 1 + 6 = 7 timesteps (the model cannot do better; the instance bound
    is lower: it does not see the partials)."""
    o = solve(box(reduce=False, copy=True))
    assert o.objective >= 7.0


@pytest.mark.parametrize("reduce", [True, False])
def test_reduce_scatter_gains_nothing_from_the_switch(reduce):
    inst = box("reduce_scatter", reduce=reduce)
    assert instance_bounds(inst).timesteps.value == 4
    o = solve(inst)
    assert (o.status, o.objective) == ("optimal", 4.0)


def test_a_two_level_system_is_proven_optimal_at_its_bound():
    inst = make_instance(two_level(2), "allreduce", message_bytes=4e6)
    assert instance_bounds(inst).timesteps.value == 7
    o = solve(inst)
    assert (o.status, o.objective, o.bound) == ("optimal", 7.0, 7.0)


def test_a_result_is_not_multicast_by_a_switch_that_does_not_copy():
    """The box's switch sums but does not multicast: each sum leaves once, so one GPU gets
    each result from the switch and must store it back for the others."""
    o = solve(box(copy=False))
    assert o.schedule is not None and o.objective > 5.0
    fw = {}
    for s in o.schedule.sends():
        if s.src == 4:
            fw.setdefault((s.chunk, s.step, s.op), []).append(s)
    assert all(len(v) == 1 for (c, t, op), v in fw.items() if op == "copy" or op == "reduce")


def rails(k: int, g: int, sharp: bool):
    """``k`` boxes of ``g`` GPUs, a reducing multicasting switch per box, GPU ``i`` of every box
    on rail switch ``i`` (reducing when ``sharp``), all links one unit."""
    n = k * g
    boxes = [n + b for b in range(k)]
    rail = [n + k + i for i in range(g)] if k > 1 else []
    edges = [(b * g + i, boxes[b]) for b in range(k) for i in range(g)]
    edges += [(b * g + i, rail[i]) for b in range(k) for i in range(g)] if rail else []
    t = from_edges(n + k + len(rail), edges, bandwidth=1e9, alpha=0.0, bidirectional=True, switches=boxes + rail)
    on = boxes + (rail if sharp else [])
    return with_switch_ops(t, on, on)


def two_roots_per_chunk(k: int = 2, g: int = 2) -> list:
    """A 2 x 2 rails allreduce in which every chunk is summed in two places: box-first chunks
    (0, 1) go up to the box switch in step ``s``, which multicasts the box's partial sum back as
    a copy (it replaces what each GPU holds), every GPU sends that up its rail in ``s + 2`` and
    the rail switch multicasts the sum of the two boxes' partials (the result) in ``s + 3``;
    rail-first chunks (2, 3) the other way round. Starts ``s`` = 1, 2 of each kind keep every
    link at one chunk per step: 5 steps."""
    out = []
    for c, s, first in ((0, 1, "box"), (1, 2, "box"), (2, 1, "rail"), (3, 2, "rail")):
        for b in range(k):
            for i in range(g):
                v, box_sw, rail_sw = b * g + i, k * g + b, k * g + k + i
                up1, up2 = (box_sw, rail_sw) if first == "box" else (rail_sw, box_sw)
                out += [(c, 0, 1, v, up1, s, "reduce"), (c, 0, 1, up1, v, s + 1, "copy"),
                        (c, 0, 1, v, up2, s + 2, "reduce"), (c, 0, 1, up2, v, s + 3, "copy")]
    return out


def test_on_rails_a_chunk_summed_in_two_places_meets_the_bound_the_model_cannot():
    """2 x 2 GPUs on SHARP rails: the bound (each GPU takes in 4 results, none before its
    diagonal peer's contribution can arrive at 4, two links: 3 + 2 = 5) is met by
    :func:`two_roots_per_chunk`, verified and within the TEN's capacity. The ILP's model (one
    reduction tree per chunk, each contributor forwarding once) proves 5 impossible among its
    own schedules and finds 6, so the outcome rests on the instance bound: feasible, not optimal."""
    from collsynth.tens.schedule import from_sends

    inst = make_instance(rails(2, 2, True), "allreduce")
    s = from_sends(two_roots_per_chunk(), "allreduce", inst.topology.size, inst.collective.num_chunks)
    assert verify(s, inst) is None and respects_ten_capacity(s, inst)
    assert s.num_steps == instance_bounds(inst).timesteps.value == 5
    o = solve(inst)
    assert (o.status, o.objective, o.bound, o.extra["model_bound"]) == ("feasible", 6.0, 5.0, 6.0)


@settings(max_examples=6, deadline=None)
@given(st.sampled_from([(1, 2), (1, 3), (1, 4), (2, 2)]), st.booleans(),
       st.sampled_from(["allreduce", "reduce_scatter", "reduce"]))
def test_the_bound_never_exceeds_a_verified_schedule(shape, sharp, kind):
    """The TEN ILP's schedule (timesteps, every model's seconds), ``nvls`` / ``nvls-tree``
    (allreduce) and the GPU-to-GPU ``ring``, ``nccl-ring`` and ``tree-packing`` where they
    verify (their steps where they fit the TEN's capacity, and their seconds)."""
    k, g = shape
    topo = rails(k, g, sharp)
    inst = make_instance(topo, kind, message_bytes=k * g * 1e6, **({"root": 0} if kind == "reduce" else {}))
    b = instance_bounds(inst)
    o = solve(inst, limit=10.0)
    if o.schedule is not None:
        assert b.timesteps.value <= o.objective
        assert combining_arrivals(inst, *_supply(inst)).value <= o.objective
    others = []
    if kind == "allreduce":
        s = get("nvls" if k == 1 else "nvls-tree").run(inst, Options()).schedule
        assert verify(s, inst) is None
        others.append(s)
    for name in ("ring", "nccl-ring", "tree-packing"):
        try:
            s = get(name).run(inst, Options(time_limit=20)).schedule
        except Unsupported:
            continue
        if s is not None and verify(s, inst) is None:
            others.append(s)
    for s in others:
        if respects_ten_capacity(s, inst):
            assert b.timesteps.value <= s.num_steps
    for s in others + ([o.schedule] if o.schedule is not None else []):
        for model in ("sync", "event", "ten"):
            assert b.of(model).value <= price(s, inst, model).total_s * (1 + 1e-9), model


def _supply(inst):
    from collsynth.tens.bounds import TimestepSupply
    from collsynth.tens.ten import link_delays, link_latency

    delay, cap, f = link_delays(inst.topology, [c.chunk_bytes for c in inst.collectives], switches=True)
    return TimestepSupply(cap, delay.min(axis=0), link_latency(inst.topology, f)), "timesteps"
