"""The exact model of ``exact_switch_reduction.py`` (every schedule of whole chunks through
reducing switches, not only one reduction tree per chunk) against optima derived by hand, the
``timesteps`` bounds and the TEN ILP with reducing switches.

By hand (``test_ten_ilp_reducing_switch.py``'s module doc and
``test_on_rails_a_chunk_summed_in_two_places_meets_the_bound_the_model_cannot``): 4 GPUs
around one reducing, multicasting switch need 5 timesteps (nothing reaches a GPU in the
first, then 4 results over one in-link), and 2 x 2 GPUs on SHARP rails need 5 too (4 results
over two in-links, none before the diagonal peer's contribution arrives at 4: ``3 + 2``),
which the two-places schedule meets.
"""

from __future__ import annotations

import importlib
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import pytest

from collsynth.instances.instance import make_instance
from collsynth.tens.bounds import combining_arrivals, instance_bounds, respects_ten_capacity
from collsynth.tens.verify import verify

import exact_switch_reduction
from test_ten_ilp_reducing_switch import _supply, box, rails, solve

pytest.importorskip("ortools")  # an optional extra; CI installs it


def _load_cp_sat_first() -> None:
    """CP-SAT loads in a process only before any other HiGHS library (the HiGHS symbol clash)."""
    importlib.import_module("ortools.sat.python.cp_model")


_CHILD: list = []  # the module's one child process (:func:`child`)


@pytest.fixture(scope="module", autouse=True)
def child():
    """One fresh interpreter for the module's decisions, which loads CP-SAT before anything
    else, as the project's OR-Tools backends run (this process may hold HiGHS already); started
    once, not once a decision (a start and its imports cost about as much as a small decision)."""
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=ctx, initializer=_load_cp_sat_first) as pool:
        _CHILD.append(pool)
        yield pool
        _CHILD.clear()


def _in_child(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` in the module's child process (:func:`child`)."""
    return _CHILD[0].submit(fn, *args, **kwargs).result()


def fits(inst, steps: int, **kwargs):
    return _in_child(exact_switch_reduction.fits, inst, steps, **kwargs)


def least_steps(inst, start: int, **kwargs):
    return _in_child(exact_switch_reduction.least_steps, inst, start, **kwargs)


@pytest.mark.parametrize("inst", [box(), make_instance(rails(2, 2, True), "allreduce")], ids=["box", "2x2 rails"])
def test_the_hand_optima(inst):
    assert fits(inst, 4)[0] == "INFEASIBLE"
    status, s = fits(inst, 5)
    assert status == "OPTIMAL" and s is not None
    assert verify(s, inst) is None and respects_ten_capacity(s, inst) and s.num_steps <= 5


def test_halves_do_not_beat_whole_chunks_on_the_box():
    """Each GPU's one in-link takes 4 chunks' worth of results after the first timestep,
    whatever the pieces: 5 again with halves."""
    inst = box()
    assert fits(inst, 4, pieces=2)[0] == "INFEASIBLE"


@pytest.mark.parametrize("shape, copy", [((1, 2), False), ((1, 3), False), ((1, 4), False), ((1, 2), True),
                                         ((1, 3), True), ((1, 4), True), ((2, 2), True)])
def test_no_bound_exceeds_the_exact_optimum_and_the_ilp_never_beats_it(shape, copy):
    """The instance's ``timesteps`` bound and ``combining-arrivals`` are at most the exact
    optimum (whose schedule the verifier accepts); the TEN ILP's schedules are a subclass,
    so its objective is at least it. Every instance of the family: one switch of 2-4 GPUs that
    does not copy, and 1 x 2-4 or 2 x 2 GPUs on SHARP rails."""
    k, g = shape
    inst = box(n=g, copy=False) if k == 1 and not copy else make_instance(rails(k, g, True), "allreduce")
    bound = instance_bounds(inst).timesteps.value
    steps, s = least_steps(inst, int(bound))
    assert verify(s, inst) is None and respects_ten_capacity(s, inst)
    assert bound <= steps and combining_arrivals(inst, *_supply(inst)).value <= steps
    o = solve(inst, limit=20.0)
    if o.schedule is not None:
        assert steps <= o.objective


def test_the_tight_windows_by_hand():
    """2 x 4 SHARP rails: a GPU's far peers (the other box, other rails) are 4 hops away and it
    has 2 links each way, so in 7 timesteps its 8 chunks' worth of sends must all start in 1-4
    and its 8 results all arrive in 4-7 (2 x 4 = 8: full); in 8 timesteps neither window is."""
    inst = make_instance(rails(2, 4, True), "allreduce")
    got = exact_switch_reduction.tight_windows(inst, 7)
    assert sorted(got) == sorted([(v, "in", 4, 7) for v in range(8)] + [(v, "out", 1, 4) for v in range(8)])
    assert exact_switch_reduction.tight_windows(inst, 8) == []


def test_pieces_of_any_sizes_agree_with_whole_chunks_on_2x2_rails():
    """Column generation over one-piece schedules (kept within the tight windows at 5) finds a
    mix that fits 5 timesteps, which the two-places schedule meets, and certifies that none
    fits 4, as the exact model of whole chunks decides."""
    inst = make_instance(rails(2, 2, True), "allreduce")
    sym = exact_switch_reduction.rail_symmetries(2, 2)
    five = _in_child(exact_switch_reduction.fractional, inst, 5, 60.0, 1, symmetries=sym, windows=True)
    assert five["windows"] == 8 and five["verdict"].startswith("a mix") and five["theta"] <= 1 + 1e-9
    four = _in_child(exact_switch_reduction.fractional, inst, 4, 60.0, 1, symmetries=sym, windows=True)
    assert four["verdict"].startswith("no ")
