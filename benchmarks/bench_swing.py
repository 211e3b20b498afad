"""Swing at scale (De Sensi et al., NSDI 2024): Xi convergence on large tori, goodput curves of Figs 6, 10-14.

Run: ``python -m pytest -m benchmark -s benchmarks/bench_swing.py`` (prints the figures). The
committed tables and plots are produced by
``python -m collsynth.solvers.reports.deficiency --out results`` (same code).

Every figure is priced by the shared sync cost model at message level
(:func:`collsynth.solvers.reports.deficiency.price_many`); the slow part is the
shortest-path search of the cost model's routing (one BFS per source node).
"""

from __future__ import annotations

import math
import time

import pytest

from collsynth.instances.generators import build
from collsynth.solvers.reports import deficiency as dfc
from collsynth.solvers.closed_form import swing as sw


@pytest.mark.benchmark
@pytest.mark.parametrize("D,side", [(2, 32), (2, 64), (3, 16), (4, 8)])
def test_xi_on_large_tori(D, side):
    """Measured Xi of bandwidth-optimal Swing equals the paper's per-p model and is within the
    series tail of 6/5, 28/27, 120/119."""
    topo = build("torus", {"dims": [side] * D}, bandwidth=1.0, alpha=0.0)
    t0 = time.perf_counter()
    r = dfc.measure(topo, "swing-bw")
    wall = time.perf_counter() - t0
    lim = float(sw.xi_swing_limit(D))
    print(f"\n{topo.name}: p={r['p']} Xi={r['Xi']:.6f} model={r['Xi_table2_p']:.6f} limit={lim:.6f} "
          f"({wall:.1f} s)")
    assert r["Xi"] == pytest.approx(r["Xi_table2_p"], rel=1e-12)
    assert abs(r["Xi"] - lim) < 2.0 / math.sqrt(r["p"]) ** (2 / D) + 0.02


@pytest.mark.benchmark
@pytest.mark.parametrize("figure", list(dfc.FIGURES))
def test_goodput_curves(figure):
    """Swing (best of lat/bw) beats recursive doubling at every size from 32 B to 512 MiB on
    every network of section 5 (the paper's Figures 6 and 10-14)."""
    t0 = time.perf_counter()
    df = dfc.goodput_curves(figure)
    wall = time.perf_counter() - t0
    s = df[df.algorithm == "swing"].set_index("size")["time_s"]
    r = df[df.algorithm == "recursive-doubling"].set_index("size")["time_s"]
    gain = (r / s - 1) * 100
    print(f"\n{figure}: priced in {wall:.0f} s; Swing gain over recursive doubling: "
          f"min {gain.min():.0f}% max {gain.max():.0f}% (at {gain.idxmax()} B)")
    assert (gain > 0).all()
