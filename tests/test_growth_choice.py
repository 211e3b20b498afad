"""A rooted reduce's choice between its greedy packing grown breadth-first and depth-first
(``solvers/packing/fifo_reduce.py``, :func:`deeper`): where both growths' run pieces exceed the
comparison's send budget each is priced at fewer pieces and extrapolated, and the pick must be
the growth that prices less when both are priced in full (verified, under ``sync`` and ``event``).

HGX H100 pairs (2 and 4 NICs a box, 1 GB, alpha 0) with a random root, and DGX-H100 x2 to its
first GPU: the breadth-first packing runs at the 1600-piece floor and the depth-first one at 100
pieces a hop (quartered here, so the full prices take seconds). On DGX-H100 x2 (400 and 750
pieces) depth-first is cheaper in full, but priced at a tenth of those pieces alone,
breadth-first would be: the extrapolation must undo the unequal fills."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from collsynth.instances import make_instance
from collsynth.instances.generators import build
from collsynth.solvers.packing import emission, fifo_reduce, forests
from collsynth.solvers.packing.packed import part_instance
from collsynth.solvers.packing.trees import hops_of

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from switched_systems import systems  # noqa: E402

MODELS = ("sync", "event")
NEAR = 2e-3  # summed prices closer than this (relative) may rank either way after extrapolation


def _run_pieces(trees, chunks):
    """The run's pieces, quartered (the floor's 1600 -> 400, 100 a hop -> 25)."""
    return max(1, emission.auto_pieces(trees, chunks) // 4)


MISRANKED = {("H100 4-NIC x2", 6), ("H100 4-NIC x2", 14)}  # of all 32 roots: known failures (test below)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from([(label, root) for label in ("H100 2-NIC x2", "H100 4-NIC x2") for root in range(16)
                             if (label, root) not in MISRANKED]))
@example(case=("DGX-H100 x2", 0))  # a tenth of the run's pieces alone ranks its growths the wrong way
def test_the_extrapolated_comparison_picks_the_growth_cheaper_in_full(case):
    _check_growth_choice(*case)


@pytest.mark.xfail(strict=True, reason="known: extrapolated from a tenth and a fifth of the pieces, breadth-first "
                   "looks cheaper where depth-first is 8 % cheaper in full (sync + event 11.02 against 10.19 ms, root 6): "
                   "its event price turns upward beyond the probes (docstring)")
def test_the_extrapolation_misranks_two_roots_of_the_four_nic_pair():
    """The extrapolation's known misranking (every root of both H100 pairs checked once: these two
    fail, the other 30 pass); it passes the day the comparison ranks them right.

    Why: root 6's breadth-first forest (12 hops deep, 400 pieces quartered) under ``event`` is
    5.598 / 5.299 / 5.239 / 5.493 / 5.600 / 5.920 ms at 40 / 80 / 100 / 160 / 200 / 400 pieces: its
    FIFO starvation grows with the pieces past about 100 (``sync`` falls throughout, 6.042 ->
    5.104 ms; in order 5.751 -> 5.075). ``A + B / P`` through 40 and 80 gives 5.06 ms at 400, so
    the sum is 10.16 against depth-first's 10.19 (right within 0.01 ms). The probes' budget
    (three tenths of the run's sends) keeps the larger probe below 120 pieces however it is split
    (a larger probe at 3, 4 or 5 times the smaller: root 14 ranked right, root 6 not), so no
    two-probe fit within it sees the turn."""
    _check_growth_choice("H100 4-NIC x2", 6)


def _check_growth_choice(label, root):
    (_, generator, params), = systems(label)
    topo = build(generator, params)
    inst = make_instance(topo, "reduce", message_bytes=1e9, root=topo.npus[root])
    f, g = (forests.forest(inst, "broadcast", True, None, depth_first, shape="greedy") for depth_first in (False, True))
    part = part_instance(inst, f)
    runs = [_run_pieces(h.trees, 1) for h in (f, g)]
    full = [sum(emission.price_pieces(part, h, p, MODELS).values()) for h, p in zip((f, g), runs)]
    asked = []

    def price(h, pieces):
        asked.append(pieces)
        return emission.price_pieces(part, h, pieces, MODELS)

    sends = sum(hops_of(h.trees) * p for h, p in zip((f, g), runs))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(fifo_reduce, "auto_pieces", _run_pieces)
        m.setattr(fifo_reduce, "RUN_PROBE_SENDS", sends - 1)  # over budget: extrapolated from a tenth and a fifth
        m.setattr(fifo_reduce, "SCALED_PROBE_SENDS", 3 * sends // 10 + 1)
        pick = fifo_reduce.deeper(f, lambda: g, price, MODELS, 1)
    assert asked == [runs[0] // 10, runs[0] // 10 * 2, runs[1] // 10, runs[1] // 10 * 2]
    cheaper = full.index(min(full))
    if abs(full[0] - full[1]) > NEAR * min(full):
        assert pick is (f, g)[cheaper], (full, runs)
    else:
        assert full[[f, g].index(pick)] <= min(full) * (1 + NEAR)
