"""Native reductions against reversal, and allreduce without the barrier against RS + AG
(run: ``python -m pytest -m benchmark -s benchmarks/bench_combining.py``, or as a script:
``python benchmarks/bench_combining.py [reductions|allreduce|concurrent] [--limit 120]``).

Each part prints a Markdown table.

- ``reductions``: reduce and reduce_scatter corpus instances solved by the TEN ILP of the
  reversed dual (``ten-ilp``) and natively (``ten-ilp-combining``): timesteps, status, seconds.
  A reduction tree read backwards is a broadcast tree, so the two must agree.
- ``allreduce``: DGX-1, hypercube 3 and the 4x4 mesh with failed NPUs 7 and 9 (TACOS Table
  III): reduce-scatter (reversal and native) and allgather phases, RS + AG with the barrier
  (``ten-ilp``'s allreduce), the native model without a barrier (reductions complete at the
  owners) as the producer runs it (``start=reversal``: the RS + AG schedule first, horizons
  below it, else that schedule improved as the MIP start of the makespan model) and by plain
  horizon search from the lower bound (``start=none``), ``roots=any`` too (reductions may
  complete anywhere, half the time limit), and the instance's lower bound
  (:mod:`collsynth.tens.bounds`). A native run's own bound comes from
  horizons it proved impossible: it holds for the model's schedules (one reduction tree per
  chunk, rooted at its owner by default), the instance's bound for every schedule.
- ``concurrent``: TACOS Section VIII-G, Table V (``mesh6x6-concurrent``: broadcast from 2,
  reduce to 17, allgather on a 6x6 mesh) by horizon search on the native model, at the TEN
  timestep of a 1 MiB chunk (the broadcast's and reduce's chunk; allgather chunks are 36x
  smaller, so at the default timestep, the allgather chunk's, every broadcast hop spans 14
  timesteps and the model has ~500k variables).

Every schedule is verified (the producers' pipeline). Environment: ``BENCH_LIMIT`` (seconds
per run, default 120). HiGHS, 1 thread.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from collsynth.formulations import ten_ilp, ten_ilp_combining
from collsynth.instances.instance import load_instance
from collsynth.solvers.producers import Options
from collsynth.solvers.ten.formulation_producers import producer
from collsynth.tens import bounds, ten, verify

pytestmark = pytest.mark.benchmark
CORPUS = Path(__file__).resolve().parent.parent / "instances" / "corpus"
NATIVE, REVERSAL = producer(ten_ilp_combining), producer(ten_ilp)
LIMIT = float(os.environ.get("BENCH_LIMIT", "120"))


def _machine() -> str:
    """CPU seconds of this process so far and the load average: figures on a shared machine."""
    return f"(process CPU {time.process_time():.1f} s; load average {', '.join(f'{x:.2f}' for x in os.getloadavg())})"


def _run(prod, inst, limit, **params):
    """(steps, status, bound, seconds, message, extra) of one verified run; seconds are wall-clock
    (CPU seconds: :func:`_machine`)."""
    t0 = time.perf_counter()
    o = prod.run(inst, Options(time_limit=limit, params={"lp_bound": False, **params}))
    s = time.perf_counter() - t0
    if o.schedule is None:
        return None, o.status, o.bound, s, o.message, o.extra
    bad = verify.verify(o.schedule, inst)
    assert bad is None, f"{prod.name} on {inst.name}: {bad}"
    return o.schedule.num_steps, o.status, o.bound, s, o.message, o.extra


def _cell(r):
    steps, status, bound, s, _, extra = r
    b = "" if bound is None else f", bound {bound:g}"
    if extra.get("model_bound") is not None:
        b += f", model bound {extra['model_bound']:g}"
    if extra.get("start"):
        b += f", from {extra['start']['steps']:g}"
    return f"{steps if steps is not None else '-'} ({status}{b}; {s:.1f} s)"


def reductions(limit: float = LIMIT) -> list[tuple]:
    """Reversal vs native on reduce / reduce_scatter corpus instances."""
    print("\n| instance | reversal (ten-ilp) | native (ten-ilp-combining) |")
    print("|---|---|---|")
    rows = []
    for name in ("ring6-reduce", "mesh3x3-reduce-scatter", "petersen-line-reduce-scatter",
                 "paper-tacos-t4-mesh6x6-reduce"):
        inst = load_instance(CORPUS / f"{name}.toml")
        rev, nat = _run(REVERSAL, inst, limit), _run(NATIVE, inst, limit)
        print(f"| {name} | {_cell(rev)} | {_cell(nat)} |", flush=True)
        rows.append((name, rev, nat))
    return rows


def _phase(inst, kind):
    return replace(inst, name=f"{inst.name}-{kind}", collectives=(inst.collective.with_kind(kind),))


def allreduce(limit: float = LIMIT) -> list[tuple]:
    """Barrier (RS + AG) vs overlap (native) for allreduce on three corpus instances."""
    print(f"\n{_machine()}")
    print("\n| instance | bound | RS reversal | RS native | AG | RS + AG, barrier (ten-ilp) "
          "| native, roots at owners | native, start=none | native, roots anywhere |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = []
    for name in ("dgx1-allreduce", "hypercube3-allreduce", "mesh4x4-failed-allreduce"):
        inst = load_instance(CORPUS / f"{name}.toml")
        lb = bounds.instance_bounds(inst).timesteps
        rs = _phase(inst, "reduce_scatter")
        cells = [_run(REVERSAL, rs, limit), _run(NATIVE, rs, limit), _run(REVERSAL, _phase(inst, "allgather"), limit),
                 _run(REVERSAL, inst, limit), _run(NATIVE, inst, limit), _run(NATIVE, inst, limit, start="none"),
                 _run(NATIVE, inst, limit / 2, roots="any")]
        print(f"| {name} | {lb.value} ({lb.source}) | " + " | ".join(_cell(c) for c in cells) + " |", flush=True)
        rows.append((name, lb.value, cells))
    print(_machine())
    return rows


def concurrent(limit: float = 4 * LIMIT) -> tuple:
    """TACOS Table V's instance by horizon search on the native model (module doc)."""
    inst = load_instance(CORPUS / "mesh6x6-concurrent.toml")
    step = float(ten.link_costs(inst.topology, max(c.chunk_bytes for c in inst.collectives)).min())
    lb = bounds.instance_bounds(inst, timestep=step).timesteps
    print(f"\nmesh6x6-concurrent at timestep {step:.4g} s: lower bound {lb.value} ({lb.source} {lb.witness})")
    r = _run(NATIVE, inst, limit, timestep=step)
    print(f"native horizon search: {_cell(r)}; {r[4]}", flush=True)
    return lb.value, r


def test_reductions_agree():
    for name, rev, nat in reductions():
        if rev[1] == nat[1] == "optimal":
            assert rev[0] == nat[0], name


def test_allreduce_barrier_vs_overlap():
    for name, lb, cells in allreduce():
        barrier, owner = cells[3], cells[4]
        if owner[0] is not None and owner[1] == "optimal" and barrier[0] is not None:
            assert owner[0] <= barrier[0], name  # RS + AG is one of the native model's schedules
        assert owner[0] is None or owner[0] >= lb


def test_table_v_concurrent():
    lb, r = concurrent()
    assert r[0] is None or r[0] >= lb


if __name__ == "__main__":
    args = sys.argv[1:]
    limit = float(args[args.index("--limit") + 1]) if "--limit" in args else LIMIT
    parts = [a for a in args if a in ("reductions", "allreduce", "concurrent")] or ["reductions", "allreduce", "concurrent"]
    for part in parts:
        {"reductions": reductions, "allreduce": allreduce,
         "concurrent": lambda limit: concurrent(2 * limit)}[part](limit)
