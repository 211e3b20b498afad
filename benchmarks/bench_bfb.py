"""BFB schedule generation and the topology finder at scale (Zhao et al., NSDI 2025, Table 6, section 5.4).

Run: ``python -m pytest -m benchmark benchmarks/bench_bfb.py -s``. Prints

- BFB on the 50x50 torus and the 1024-node hypercube (the paper: 61.1 s and 52.7 s), LP (3)
  through the HiGHS backend, orbit solving (both are Cayley graphs), then the schedule
  assembly, and (``BENCH_BFB_VERIFY=1``, default) verification and sync pricing;
- all-node vs orbit solving of the same topology in one run (``BENCH_BFB_ALLNODE`` = torus
  side, default 12), serial and with a 2-process pool;
- the finder for every N <= ``BENCH_FINDER_MAX`` (default 2000) at d = 4 and the most frequent
  best picks at M = 1 KB and 1 GB (Appendix G, Figure 13 analogue).
"""

from __future__ import annotations

import os
import time
from collections import Counter

import pytest

from collsynth.instances.generators import build
from collsynth.instances.instance import make_instance
from collsynth.solvers.bfb import per_step as bfb, finder

VERIFY = os.environ.get("BENCH_BFB_VERIFY", "1") == "1"


def _run(name, topo, **kw):
    t0 = time.perf_counter()
    res = bfb.solve_bfb(topo, method="lp", **kw)
    wall = time.perf_counter() - t0
    line = (f"\n{name}: N={res.nodes} d={res.degree} steps={res.steps} LP problems={res.problems} "
            f"(solver ran on {res.solved}) orbit={res.orbit} sends={len(res.schedule):,} "
            f"BW-optimal={res.bw_optimal} T_B={res.T_B_units} | wall {wall:.1f} s "
            f"(LP build {res.build_s:.1f} s, solve {res.solve_s:.1f} s)")
    if VERIFY:
        from collsynth.tens import cost, verify

        inst = make_instance(topo, "allgather")
        t1 = time.perf_counter()
        bad = verify.verify(res.schedule, inst)
        t2 = time.perf_counter()
        c = cost.price_sync(res.schedule, inst)
        t3 = time.perf_counter()
        line += f" | verify {t2 - t1:.1f} s ({'ok' if bad is None else bad}), price {t3 - t2:.1f} s, T_B_chunks={c.extra['T_B_chunks']}"
        assert bad is None
    print(line)
    return res, wall


@pytest.mark.benchmark
def test_bfb_torus_50x50():
    res, _ = _run("torus 50x50", build("torus", {"dims": [50, 50]}))
    assert res.bw_optimal


@pytest.mark.benchmark
def test_bfb_hypercube_1024():
    res, _ = _run("hypercube 2^10", build("hypercube", {"dim": 10}))
    assert res.bw_optimal


@pytest.mark.benchmark
def test_all_node_vs_orbit():
    side = int(os.environ.get("BENCH_BFB_ALLNODE", "12"))
    topo = build("torus", {"dims": [side, side]})
    orb, t_orb = _run(f"torus {side}x{side} orbit", topo)
    full, t_full = _run(f"torus {side}x{side} all nodes", topo, orbit=False)
    pool, t_pool = _run(f"torus {side}x{side} all nodes, 2 processes", topo, orbit=False, jobs=2)
    print(f"\nall-node / orbit wall ratio: {t_full / t_orb:.1f}x; pool speed-up {t_full / t_pool:.2f}x")
    assert orb.U == full.U == pool.U


@pytest.mark.benchmark
def test_finder_every_n():
    nmax = int(os.environ.get("BENCH_FINDER_MAX", "2000"))
    t0 = time.perf_counter()
    fronts = {}
    slow = []
    for N in range(2, nmax + 1):
        t = time.perf_counter()
        fronts[N] = finder.frontier(N, 4)
        slow.append((time.perf_counter() - t, N))
        if N % 100 == 0:
            print(f"\n  N <= {N}: {time.perf_counter() - t0:.1f} s", flush=True)
    wall = time.perf_counter() - t0
    picks = {}
    for M in (1e3, 1e9):
        picks[M] = Counter(finder.select(f, 10e-6, 12.5e9, [M])[0][0].expr.split("(")[0] for f in fronts.values() if f)
    sizes = [len(f) for f in fronts.values()]
    print(f"\nfinder d=4, N=2..{nmax}: {wall:.1f} s total, {wall / (nmax - 1) * 1e3:.1f} ms per N; "
          f"frontier sizes mean {sum(sizes) / len(sizes):.2f} max {max(sizes)}; empty: "
          f"{[n for n, f in fronts.items() if not f]}; slowest: {sorted(slow)[-3:]}")
    for M, c in picks.items():
        print(f"best-pick families at M={M:g} B: {c.most_common(6)}")
    assert all(fronts[N] for N in range(5, nmax + 1))
