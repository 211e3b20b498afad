"""Dimension-ordered trees with pieces sized per step (``collsynth.solvers.closed_form.dimension_trees``).

- two GPUs behind a switch: 4 equal pieces in 5 steps, 25/16 s by hand (the pair's optimum,
  the ramp bound's doc), for an allgather and a reduce-scatter; the allreduce overlapped,
  133/48 s at 7 steps by hand (the module doc), and refused by the verifier without the rows
  that make each piece's gather wait for its reduction;
- three fully connected GPUs: one step of the whole block, 1/16 + 1 s by hand;
- TACOS's ring x complete x switch 4x4x2 at 1 GB: the reduce-scatter within 0.1 % of the
  ramp bound (the greedy tree packing's best: 6 % over), the allreduce within 0.05 %;
- hypothesis on small hierarchies (levels, sizes, bandwidths, latencies, kinds): verified, the
  ``sync`` price at most the linear program's value and at least the instance's bound;
- what it refuses: a switch of three, more trees than the program takes, a topology that is no
  hierarchy.
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.solvers.closed_form.dimension_trees import dimension_trees
from collsynth.solvers.producers import Unsupported
from collsynth.tens import cost_models, verify
from collsynth.tens.bounds import instance_bounds

KINDS = ("allgather", "reduce_scatter", "allreduce")


def hierarchy(levels, dims, scales=None, bandwidth=1.0, alpha=1 / 16):
    return build("hierarchical", {"levels": levels, "dims": dims, "scales": scales}, bandwidth=bandwidth, alpha=alpha)


def priced(inst, steps=None):
    """The verified schedule's ``sync`` price and the producer's figures."""
    sched, figures = dimension_trees(inst, steps)
    assert verify.verify(sched, inst) is None
    return cost_models.price(sched, inst, "sync").total_s, figures


@pytest.mark.parametrize("kind, by_hand", [("allgather", 25 / 16), ("reduce_scatter", 25 / 16)])
def test_two_gpus_behind_a_switch_by_hand(kind, by_hand):
    """A shard of 1 B over 1 B/s links, alpha 1/16 s: S - 1 equal pieces up then down cost
    S / 16 + S / (S - 1) s, least at S = 5: 5/16 + 5/4 = 25/16 s."""
    inst = make_instance(hierarchy(["switch"], [2]), kind, message_bytes=2)
    price, figures = priced(inst)
    assert price == pytest.approx(by_hand, rel=1e-9)
    assert all(f["steps"] == 5 and f["pieces"] == 4 for f in figures.values())


@pytest.mark.parametrize("steps, by_hand", [(5, 45 / 16), (6, 6 / 16 + 12 / 5), (None, 133 / 48)])
def test_two_gpus_behind_a_switch_allreduce_overlapped_by_hand(steps, by_hand):
    """The module doc's derivation: over S steps no allreduce costs less than S / 16 + 2 S / (S - 1)
    s (the links up carry 2 B in steps 1 .. S - 1, the switch forwards a step late), met for S
    >= 5; least at S = 7, 133/48 s, where the halves in sequence take 2 x 25/16 = 150/48 s;
    the ramp bound (an independent argument) meets it there."""
    inst = make_instance(hierarchy(["switch"], [2]), "allreduce", message_bytes=2)
    price, figures = priced(inst, steps)
    assert price == pytest.approx(by_hand, rel=1e-5)  # pieces rounded to 2^-20 of a block
    assert figures["allreduce"]["steps"] == (steps or 7)
    if steps is None:
        assert instance_bounds(inst).sync.value == pytest.approx(by_hand, rel=1e-5)


def test_the_allgather_waits_for_each_pieces_reduction(monkeypatch):
    """The order rows are what keeps it verified: dropped, the program (at the same price: the
    bound above holds for any order) gathers pieces before their reduction completes and the
    verifier refuses the schedule."""
    from collsynth.solvers.closed_form import dimension_trees as dt

    inst = make_instance(hierarchy(["switch"], [2]), "allreduce", message_bytes=2)
    program = dt.program
    monkeypatch.setattr(dt, "program", lambda *a, ordered=False, **k: program(*a, **k))
    unordered, figures = dimension_trees(inst, 5)
    assert verify.verify(unordered, inst) is not None


def test_tacos_allreduce_overlapped_within_the_ramp_bound():
    """TACOS 4x4x2, 1 GB allreduce at 35 steps: within 0.05 % of the ramp bound (3.2621 ms),
    where the halves in sequence took 3.2773 ms (0.47 % over)."""
    inst = make_instance(hierarchy(["ring", "complete", "switch"], [4, 4, 2], bandwidth=100e9, alpha=0.5e-6),
                         "allreduce", message_bytes=1e9)
    bound = instance_bounds(inst).sync
    assert bound.source == "ramp"
    price, _ = priced(inst, steps=35)
    assert bound.value <= price <= bound.value * 1.0005


def test_three_fully_connected_by_hand():
    """Each GPU sends its 1 B block to both others in one step: 1/16 + 1 s; allreduce twice that."""
    for kind, by_hand in (("allgather", 17 / 16), ("allreduce", 17 / 8)):
        assert priced(make_instance(hierarchy(["complete"], [3]), kind, message_bytes=3))[0] == pytest.approx(by_hand)


def test_tacos_hierarchy_within_the_ramp_bound():
    """TACOS 4x4x2 (100 GB/s, 0.5 us a link), 1 GB reduce-scatter at 25 steps: within 0.1 % of
    the ramp bound (1.6379 ms; tests/test_ramp_bound.py has it by a closed form)."""
    inst = make_instance(hierarchy(["ring", "complete", "switch"], [4, 4, 2], bandwidth=100e9, alpha=0.5e-6),
                         "reduce_scatter", message_bytes=1e9)
    bound = instance_bounds(inst).sync
    assert bound.source == "ramp"
    price, _ = priced(inst, steps=25)
    assert bound.value <= price <= bound.value * 1.001


@st.composite
def hierarchies(draw, most: int = 3):
    """1 to ``most`` levels of random kinds, sizes and bandwidth scales."""
    n = draw(st.integers(1, most))
    levels = draw(st.lists(st.sampled_from(["ring", "uniring", "complete", "switch"]), min_size=n, max_size=n))
    dims = [2 if kind == "switch" else draw(st.integers(1, 3)) for kind in levels]
    if all(d == 1 for d in dims):
        dims[0] = 2
    scales = draw(st.lists(st.sampled_from([0.5, 1.0, 2.0]), min_size=n, max_size=n))
    return levels, dims, scales


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=hierarchies(), kind=st.sampled_from(KINDS), alpha=st.sampled_from([1e-6, 1e-5]),
       size=st.sampled_from([1e4, 1e6]))
def test_verified_priced_within_its_program_and_above_the_bound(shape, kind, alpha, size):
    """The schedule verifies; its ``sync`` price is at most the program's value (pieces rounded
    to 2^-20 of a block) and at least the instance's ``sync`` bound."""
    inst = make_instance(hierarchy(*shape, bandwidth=1e9, alpha=alpha), kind, message_bytes=size)
    price, figures = priced(inst)
    assert price <= sum(f["lp_s"] for f in figures.values()) * (1 + 1e-4)
    assert instance_bounds(inst).sync.value <= price * (1 + 1e-9)


def test_refuses_what_it_does_not_cover():
    with pytest.raises(Unsupported, match="switch level must join two ranks"):
        dimension_trees(make_instance(hierarchy(["switch"], [3]), "allgather", message_bytes=3))
    with pytest.raises(Unsupported, match="6,144 trees"):  # 4! level orders times 4^4 ring coverings
        dimension_trees(make_instance(hierarchy(["ring"] * 4, [4] * 4), "allgather", message_bytes=256))
    with pytest.raises(Unsupported, match="hierarchical topology"):
        dimension_trees(make_instance(build("ring", {"nodes": 4}), "allgather", message_bytes=4))



class _RunsOutAfter:
    """A deadline that passes once ``solves`` linear programs have been solved."""

    def __init__(self, solves):
        self.solves, self.left_calls = solves, 0

    def left(self):
        self.left_calls += 1
        return 60.0

    def expired(self):
        return self.left_calls >= self.solves

    def check(self, stage, done=""):
        from collsynth.limits import TimeLimitReached
        if self.expired():
            raise TimeLimitReached(stage, done)


def test_the_step_search_stops_at_the_deadline():
    """Once the deadline has passed no further step count is tried: the search keeps the best
    solved (two GPUs behind a switch: the search solves twice the shallowest count first, 4
    steps, so the schedule has 4 steps, 3 equal pieces: 4/16 + 4/3 s by hand, where 5 steps
    would give 25/16);
    with none solved it stops with the time limit instead of a schedule."""
    from collsynth.limits import TimeLimitReached

    inst = make_instance(hierarchy(["switch"], [2]), "allgather", message_bytes=2)
    sched, figures = dimension_trees(inst, None, _RunsOutAfter(1))
    assert figures["allgather"]["steps"] == 4 and figures["allgather"]["pieces"] == 3
    assert verify.verify(sched, inst) is None
    assert cost_models.price(sched, inst, "sync").total_s == pytest.approx(4 / 16 + 4 / 3)
    with pytest.raises(TimeLimitReached):
        dimension_trees(inst, None, _RunsOutAfter(0))


@pytest.mark.parametrize("kind", ["broadcast", "reduce"])
@pytest.mark.parametrize("root", [0, 1])
def test_rooted_two_gpus_behind_a_switch_by_hand(kind, root):
    """1 B from (to) either GPU over 1 B/s, alpha 1/16 s: the link up carries the byte in steps
    1 .. S - 1 and the switch forwards a step late, so S steps cost at least S / 16 + 1 +
    1 / (S - 1) s, met by S - 1 equal pieces; least at S = 5: 25/16 s."""
    inst = make_instance(hierarchy(["switch"], [2]), kind, message_bytes=1, root=root)
    price, figures = priced(inst)
    assert price == pytest.approx(25 / 16, rel=1e-9)
    assert figures[kind]["steps"] == 5 and figures[kind]["pieces"] == 4
    assert figures[kind]["lp_s"] == pytest.approx(25 / 16, rel=1e-9)


@pytest.mark.parametrize("kind", ["broadcast", "reduce"])
def test_rooted_three_fully_connected_by_hand(kind):
    """The module doc's derivation: the trees 0 -> 1 -> 2 and 0 -> 2 -> 1 over S steps cost at
    least S / 16 + 1/2 + 1 / (2 (S - 1)) s, least at S = 4: 11/12 s (the star, one step of the
    whole byte, takes 17/16)."""
    inst = make_instance(hierarchy(["complete"], [3]), kind, message_bytes=1, root=0)
    price, figures = priced(inst)
    assert price == pytest.approx(11 / 12, rel=1e-5)  # pieces rounded to 2^-20
    assert figures[kind]["steps"] == 4
    assert figures[kind]["lp_s"] == pytest.approx(11 / 12, rel=1e-9)


@st.composite
def rooted_cases(draw):
    """A hierarchy of 1-2 levels (:func:`hierarchies`) and a root among its ranks."""
    levels, dims, scales = draw(hierarchies(most=2))
    root = draw(st.integers(0, dims[0] * (dims[1] if len(dims) > 1 else 1) - 1))
    return (levels, dims, scales), root


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=rooted_cases(), kind=st.sampled_from(["broadcast", "reduce"]), alpha=st.sampled_from([1e-6, 1e-5]),
       size=st.sampled_from([1e4, 1e6]))
def test_rooted_verified_priced_within_its_program_and_above_the_bound(case, kind, alpha, size):
    """Broadcast and reduce from any root (12 steps): the schedule verifies; its ``sync`` price
    is at most the program's value (pieces rounded to 2^-20) and at least the instance's bound."""
    shape, root = case
    inst = make_instance(hierarchy(*shape, bandwidth=1e9, alpha=alpha), kind, message_bytes=size, root=root)
    price, figures = priced(inst, steps=12)
    assert price <= figures[kind]["lp_s"] * (1 + 1e-4)
    assert instance_bounds(inst).sync.value <= price * (1 + 1e-9)


def test_refuses_the_rooted_kinds_it_does_not_build():
    with pytest.raises(Unsupported, match="not scatter"):
        dimension_trees(make_instance(hierarchy(["complete"], [3]), "scatter", message_bytes=3, root=0))
    with pytest.raises(Unsupported, match="744 rooted trees"):  # 24 trees times 31 ranks
        dimension_trees(make_instance(hierarchy(["ring", "complete", "switch"], [4, 4, 2]), "reduce", message_bytes=32,
                                      root=0))
