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
from types import SimpleNamespace

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


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from([(label, root) for label in ("H100 2-NIC x2", "H100 4-NIC x2") for root in range(16)]))
@example(case=("DGX-H100 x2", 0))  # a tenth of the run's pieces alone ranks its growths the wrong way
@example(case=("H100 4-NIC x2", 6))  # breadth-first's event price turns upward beyond two probes (below)
@example(case=("H100 4-NIC x2", 14))
def test_the_extrapolated_comparison_picks_the_growth_cheaper_in_full(case):
    """Root 6 of the four-NIC pair: its breadth-first forest (12 hops deep, 400 pieces
    quartered) under ``event`` is 5.598 / 5.299 / 5.493 / 5.920 ms at 40 / 80 / 160 / 400 pieces:
    its FIFO starvation grows with the pieces past about 100 (``sync`` falls throughout). ``A +
    B / P`` through 40 and 80 gave 5.06 ms at 400 and picked breadth-first (sync + event 10.16
    against depth-first's 10.19, 11.02 in full); the third probe at 160 gives ``C > 0`` and
    depth-first is kept. Root 14 alike."""
    _check_growth_choice(*case)


def test_a_cost_a_piece_two_probes_cannot_see():
    """Stand-in prices (ms) at 400 run pieces each, probes at 40 / 80 / 160: breadth-first
    ``sync`` 5 + 100 / P, ``event`` 4 + 60 / P + P / 250 (least near 122 pieces), depth-first
    ``sync`` 5 + 300 / P, ``event`` 4 + 400 / P. In full: 5.25 + 5.75 = 11.0 against 5.75 + 5.0 =
    10.75, depth-first cheaper. ``A + B / P`` through 40 and 80 (13.16, 11.32) gives 9.848 for
    breadth-first at 400, which would be picked; through all three probes it is exact."""
    f, g = (SimpleNamespace(transposed=True, shape="greedy", trees=[SimpleNamespace(routes=[[0, 1]])]) for _ in "fg")
    curves = {id(f): lambda P: (5 + 100 / P, 4 + 60 / P + P / 250), id(g): lambda P: (5 + 300 / P, 4 + 400 / P)}
    asked = []

    def price(h, pieces):
        asked.append(pieces)
        return dict(zip(MODELS, curves[id(h)](pieces)))

    with pytest.MonkeyPatch.context() as m:
        m.setattr(fifo_reduce, "auto_pieces", lambda trees, chunks: 400)
        m.setattr(fifo_reduce, "RUN_PROBE_SENDS", 799)  # 400 sends each: over budget
        m.setattr(fifo_reduce, "SCALED_PROBE_SENDS", 7 * 800 // 10)  # q = a tenth
        pick = fifo_reduce.deeper(f, lambda: g, price, MODELS, 1)
    assert pick is g
    assert asked == [40, 80, 160] * 2


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
        m.setattr(fifo_reduce, "RUN_PROBE_SENDS", sends - 1)  # over budget: extrapolated from a tenth, a fifth
        m.setattr(fifo_reduce, "SCALED_PROBE_SENDS", 7 * sends // 10 + 1)  # and two fifths
        pick = fifo_reduce.deeper(f, lambda: g, price, MODELS, 1)
    assert asked == [k * (p // 10) for p in runs for k in (1, 2, 4)]
    cheaper = full.index(min(full))
    if abs(full[0] - full[1]) > NEAR * min(full):
        assert pick is (f, g)[cheaper], (full, runs)
    else:
        assert full[[f, g].index(pick)] <= min(full) * (1 + NEAR)
