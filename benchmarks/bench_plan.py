"""The pricing plan's step view and arrival groups: this tree against a former revision, side by
side in one process.

Run ``python benchmarks/bench_plan.py`` (schedules produced here, in seconds each: Swing 1 GiB
allreduce on a 32x32 torus, 8.4 M routed sends in pieces; BFB allgather on a 50x50 torus, 6.3 M
sends in pieces; greedy allgather on a 48x48 torus, 5.3 M whole sends already in step order),
``python benchmarks/bench_plan.py --saved DIR`` (instead, every ``NAME.npz`` beside a
``NAME.toml`` instance in ``DIR``, in the format ``bench_pricing.py`` saves), or ``python -m
pytest -m benchmark -s benchmarks/bench_plan.py``.

The former code is the package at ``--old-rev`` (default :data:`FORMER`, ``main`` before the
compiled step view and the groups by table), exported with ``git archive`` and imported as a package of
another name, so that both run on the same schedule in the same process, alternating (former
first in odd rounds, this tree first in even ones); both compile their kernels on a tiny
schedule before any clock starts. Every figure is CPU seconds (``time.process_time``: the page
faults of fresh arrays count, they are much of the work) with the wall seconds and the load
average beside it, the best of ``--reps`` rounds. Each round also checks that both produce the
same arrays (values and dtypes) for :func:`~collsynth.tens.dependencies.step_view` and
:func:`~collsynth.tens.dependencies.dependencies` (``want_pairs=False``, as the pricing plan
asks).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from collsynth.instances.generators import build
from collsynth.instances.instance import Instance, load_instance, make_instance
from collsynth.tens import dependencies as new_deps
from collsynth.solvers.producers import Options, get
from collsynth.tens.schedule import Schedule, from_arrays
from collsynth.tens.verify import verify

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_pricing import _load, export_revision  # noqa: E402  (a sibling script, not a package)

FORMER = "ca66afa"  # main before the compiled step view and the groups by table
CASES = {
    "swing-bw torus 32x32 allreduce 1 GiB": ("swing-bw", ("torus", {"dims": [32, 32]}), "allreduce", 1 << 30),
    "bfb-lp torus 50x50 allgather": ("bfb-lp", ("torus", {"dims": [50, 50]}), "allgather", 1 << 26),
    "greedy torus 48x48 allgather": ("greedy", ("torus", {"dims": [48, 48]}), "allgather", 1 << 26),
}


def import_revision(rev: str, folder: Path):
    """``collsynth.tens.dependencies`` of git revision ``rev``, exported under ``folder`` as the
    package ``collsynth_former`` (its modules import each other relatively); and the commit."""
    root, commit = export_revision(rev, folder, "collsynth_former")
    sys.path.insert(0, root)
    return importlib.import_module("collsynth_former.tens.dependencies"), commit


def warm(module) -> None:
    """Compile (or load) ``module``'s kernels for every path a case can take, off the clock."""
    inst = make_instance(build("ring", {"nodes": 3}), "allgather")
    for step in ([2, 1], [1, 2], [1 << 30, 1]):
        for lo, hi, denom in ((None, None, 1), ([0, 0], [1, 2], 2)):
            s = from_arrays("allgather", 3, 3, chunk=[0, 0], src=[0, 1], dst=[1, 2], step=step, lo=lo, hi=hi,
                            denom=denom)
            module.dependencies(module.step_view(s), inst, want_pairs=False)


def produced(spec: tuple) -> tuple[Schedule, Instance]:
    """The verified schedule of producer ``spec[0]`` on its instance."""
    producer, (generator, params), kind, message = spec
    inst = make_instance(build(generator, params), kind, message_bytes=message)
    sched = get(producer).run(inst, Options(time_limit=600)).schedule
    violation = verify(sched, inst)
    assert violation is None, str(violation)
    return sched, inst


def _same(a, b, where: str) -> None:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), where
    elif isinstance(a, tuple):
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{k}]")
    else:
        assert a == b, where


def _timed(f, *args):
    c0, t0 = time.process_time(), time.perf_counter()
    out = f(*args)
    return out, time.process_time() - c0, time.perf_counter() - t0


def measure(name: str, sched: Schedule, inst: Instance, former, reps: int) -> dict:
    """Best CPU (and its wall) seconds of the view and the groups, former and this tree."""
    best = {(who, stage): (float("inf"), 0.0) for who in ("former", "new") for stage in ("view", "groups")}
    for r in range(reps):
        outs = {}
        for who in (("former", "new") if r % 2 == 0 else ("new", "former")):
            module = former if who == "former" else new_deps
            view, cv, wv = _timed(module.step_view, sched)
            deps, cd, wd = _timed(module.dependencies, view, inst, False)
            for stage, cpu, wall in (("view", cv, wv), ("groups", cd, wd)):
                best[who, stage] = min(best[who, stage], (cpu, wall))
            outs[who] = (view, deps)
            del view, deps
        for f in dataclasses.fields(new_deps.StepView):
            _same(getattr(outs["former"][0], f.name), getattr(outs["new"][0], f.name), f"{name}: view.{f.name}")
        for f in dataclasses.fields(new_deps.Deps):
            _same(getattr(outs["former"][1], f.name), getattr(outs["new"][1], f.name), f"{name}: deps.{f.name}")
        del outs
    return {"case": name, "sends": len(sched), "best": best, "load": os.getloadavg()[0]}


def report(rows: list[dict], commit: str) -> str:
    lines = [f"former: {commit[:10]}; CPU s (wall s), best of the rounds; ratio = former / this tree",
             f"{'case':40s} {'sends':>10s} | {'view former':>14s} {'view new':>14s} {'ratio':>6s} | "
             f"{'groups former':>14s} {'groups new':>14s} {'ratio':>6s} | load"]
    for r in rows:
        cells = []
        for stage in ("view", "groups"):
            (co, wo), (cn, wn) = r["best"]["former", stage], r["best"]["new", stage]
            cells.append(f"{co:6.3f} ({wo:5.3f}) {cn:6.3f} ({wn:5.3f}) {co / cn:5.2f}x")
        lines.append(f"{r['case']:40s} {r['sends']:>10,d} | {cells[0]} | {cells[1]} | {r['load']:.2f}")
    return "\n".join(lines)


def run(cases: dict[str, tuple[Schedule, Instance]] | None, old_rev: str | None, reps: int,
        saved: Path | None = None) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        former, commit = import_revision(old_rev or FORMER, Path(tmp))
        warm(former)
        warm(new_deps)
        rows = []
        if saved is not None:
            for npz in sorted(saved.glob("*.npz")):
                if npz.with_suffix(".toml").exists():
                    sched, inst = _load(str(npz)), load_instance(npz.with_suffix(".toml"))
                    rows.append(measure(npz.stem, sched, inst, former, reps))
                    print(report(rows[-1:], commit).splitlines()[-1], flush=True)
                    del sched
        for name, spec in (cases or {}).items():
            sched, inst = produced(spec)
            rows.append(measure(name, sched, inst, former, reps))
            print(report(rows[-1:], commit).splitlines()[-1], flush=True)
        return report(rows, commit)


@pytest.mark.benchmark
def test_plan_view_and_groups_table():
    print("\n" + run(CASES, None, 3))


def _main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--saved", type=Path, default=None, help="folder of NAME.npz schedules with NAME.toml instances "
                                                            "(then no schedule is produced)")
    p.add_argument("--old-rev", default=None, help=f"git revision of the former code (default: {FORMER})")
    p.add_argument("--reps", type=int, default=3, help="rounds per case (best of)")
    args = p.parse_args(argv)
    print(run(None if args.saved else CASES, args.old_rev, args.reps, args.saved))


if __name__ == "__main__":
    _main(sys.argv[1:])
