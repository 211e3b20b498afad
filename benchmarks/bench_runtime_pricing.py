"""The runtime cost model's pricing, this tree against a former revision, side by side in one run.

Run ``nice -n 19 python benchmarks/bench_runtime_pricing.py`` (the default cases, minutes on a
shared machine), ``--cases ring,fit`` to pick some by name, ``--old-rev REV`` for the former
code (default :data:`FORMER`, the last commit before the compiled walks of
:mod:`collsynth.tens.runtime_kernels`) or ``--skip-old``. Cases:

- ``program NAME``: a published MSCCL program of ``instances/measurements/forestcoll-a100x2``
  read as a schedule (``--from msccl-xml``, not timed) and priced at 1 GiB under the shipped
  A100 calibration, as ``collsynth price P I --from msccl-xml --model runtime`` does (its
  features, :func:`collsynth.tens.runtime_program.program_features`, and the formula);
- ``schedule FILE``: one of our schedules (``--schedule S.json``, e.g. a tree-packing forest
  of ``forestcoll_a100 nodes=2``) priced through the runtime model's export choice (every
  grid, layout and receive-and-send choice priced, the cheapest that reads back and verifies);
- ``fit``: what ``collsynth calibrate`` spends its time on, on the A100 manifest's first
  ``--rows`` measurements: their rows (each program's features) and ``--evals`` evaluations of
  the fit's residuals (:func:`collsynth.tens.calibration.log_errors`).

Each case runs in a fresh child per side (``collsynth`` imported from this tree, or from the
former revision exported with ``git archive``, or ``--old-root`` for one exported before, whose
numba cache then persists; numba's kernels compiled or loaded before the clock starts), which prints wall and CPU seconds, the load average when it ended and the price
as a hexadecimal float (the residuals as a digest of their bytes): the table says whether the
two sides agree bit for bit.

Measured (2 shared cores, ``nice -n 19``, against 641854d, every result identical bit for bit;
CPU seconds, the fair figure at these loads, wall and load average in brackets):
tree-packing's full 1 GiB allreduce forest on 2x8 A100 (179,648 sends, the export choice's
cheapest program on a 1/2 grid, 13.518 ms) 110.1 -> 57.1 s (wall 307.5 s at load 6.4 -> 131.0 s
at load 4.1); its forest of one tree a root (93,184 sends, 10.116 ms) 99.5 -> 45.4 s; NCCL's
ring as XML (8,192 steps) at 1 GiB 0.59 -> 0.16 s, a TACCL allgather 0.12 -> 0.05 s; the A100
manifest's 419 rows 19.4 -> 15.0 s, five residual evaluations 1.00 -> 0.84 s.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_pricing import export_revision  # noqa: E402

FORMER = "641854d"  # the runtime model's walks in Python
A100 = HERE.parent / "instances" / "measurements" / "forestcoll-a100x2"
CALIBRATION = HERE.parent / "instances" / "calibrations" / "forestcoll-a100x2.json"
PROGRAMS = {
    "ring": ("nccl_ring_allreduce_n32_c32.xml.xz", "a100x2-allreduce.toml"),
    "forestcoll-ar": ("msccl_allreduce_split2_k1_inst2_NVLINK300_IB25.xml.xz", "a100x2-allreduce.toml"),
    "taccl-ag": ("original-Allgather.n16-DGXA100-steps8-tacclsol-improve-1704690792_i8_scRemote1_IBContig.sccl.xml.xz",
                 "a100x2-allgather.toml"),
}


# ---- children ----------------------------------------------------------------------------------

def _warm(every_run: bool = True) -> None:
    """Compile or load the kernels pricing uses before any clock starts (where the revision
    has them): with ``every_run`` every run's (verification's among them, which the export
    choice runs), and the runtime model's (``collsynth warmup``'s runtime task)."""
    from collsynth.solvers import compiling
    if every_run:
        compiling.compile_kernels()
    if hasattr(compiling, "RUNTIME_TASK"):
        compiling.run_task(compiling.RUNTIME_TASK)


def _clocked(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    value = fn()
    return value, {"s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0, "load": os.getloadavg()[0]}


def child_price(kind: str, path: str, instance_file: str) -> dict:
    """One runtime price of a program (``kind`` "program") or of our schedule (``"schedule"``)."""
    from collsynth.instances.instance import load_instance
    from collsynth.tens import cost_models
    from collsynth.tens.measurements import read_program_text
    from collsynth.tens.peer_schedules import read_peer_text
    from collsynth.tens.schedule import read_json

    _warm()
    inst = load_instance(instance_file)
    sched = read_peer_text(read_program_text(path), "msccl-xml", inst) if kind == "program" else read_json(path)
    cost, clock = _clocked(lambda: cost_models.get("runtime").price(sched, inst, calibration=str(CALIBRATION)))
    return {**clock, "price": float(cost.total_s).hex(), "grid": cost.extra.get("grid", "")}


def child_fit(rows: int, evals: int) -> dict:
    """The A100 manifest's first ``rows`` measurements loaded, then ``evals`` residual evaluations."""
    from dataclasses import replace

    from collsynth.tens.calibration import load_rows, log_errors
    from collsynth.tens.cost_models.runtime import load_calibration
    from collsynth.tens.measurements import read_manifest

    _warm(every_run=False)
    manifest = read_manifest(A100 / "manifest.toml")
    manifest = replace(manifest, measurements=manifest.measurements[:rows])
    loaded, load_clock = _clocked(lambda: load_rows(manifest))
    cal = load_calibration(CALIBRATION)
    errors, eval_clock = _clocked(lambda: [log_errors(loaded, cal) for _ in range(evals)])
    return {"rows": load_clock, "evals": eval_clock, "sizes": int(sum(len(r.sizes) for r in loaded)),
            "price": hashlib.sha256(errors[-1].tobytes()).hexdigest()[:16]}


# ---- parent ------------------------------------------------------------------------------------

def _child(args: list[str], root: str) -> dict:
    env = {**os.environ, "PYTHONPATH": root}
    done = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"child {args} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def _cell(x: dict) -> str:
    return f"{x['s']:8.2f} s (CPU {x['cpu_s']:7.2f}, load {x['load']:4.1f})"


def run(cases: list[tuple[str, list[str]]], roots: dict) -> list[str]:
    """Each case on each side (``roots``: side -> package root), one table line per case."""
    lines = []
    for name, args in cases:
        got = {side: _child(args, root) for side, root in roots.items()}
        parts = [name]
        for part in ("rows", "evals") if args[0] == "fit" else (None,):
            cells = {side: g[part] if part else g for side, g in got.items()}
            ratio = (f"  {cells['former']['s'] / cells['new']['s']:5.1f}x wall, "
                     f"{cells['former']['cpu_s'] / cells['new']['cpu_s']:5.1f}x CPU" if "former" in cells else "")
            parts.append(f"{part or 'price'}: " + "  |  ".join(f"{side} {_cell(c)}" for side, c in cells.items())
                         + ratio)
        prices = {side: g["price"] for side, g in got.items()}
        parts.append("result " + ("identical " if len(set(prices.values())) == 1 else "DIFFERENT ")
                     + ", ".join(f"{side} {p}" for side, p in prices.items())
                     + (f" ({got['new'].get('grid')})" if got["new"].get("grid") else ""))
        lines.append("\n    ".join(parts))
        print(lines[-1], flush=True)
    return lines


def _main(argv: list[str]) -> None:
    if argv and argv[0] == "--child":
        kind, *rest = argv[1:]
        out = child_fit(int(rest[0]), int(rest[1])) if kind == "fit" else child_price(kind, *rest)
        print(json.dumps(out))
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default="ring,forestcoll-ar,taccl-ag,fit",
                   help=f"comma-separated: {', '.join(PROGRAMS)}, fit, schedule (default: all but schedule)")
    p.add_argument("--schedule", default=None, help="our schedule JSON (on the A100 x2 allreduce) for case schedule")
    p.add_argument("--rows", type=int, default=60, help="measurements of the A100 manifest for case fit")
    p.add_argument("--evals", type=int, default=5, help="residual evaluations for case fit")
    p.add_argument("--old-rev", default=FORMER, help=f"git revision of the former path (default {FORMER})")
    p.add_argument("--skip-old", action="store_true", help="only this tree")
    p.add_argument("--old-root", default=None,
                   help="a folder whose collsynth is the former revision already exported (keeps its numba cache "
                        "between runs; default: exported afresh into a temporary folder)")
    args = p.parse_args(argv)
    cases = []
    for name in args.cases.split(","):
        if name in PROGRAMS:
            program, inst = PROGRAMS[name]
            cases.append((f"program {name} ({program[:40]}) 1 GiB", ["program", str(A100 / "programs" / program),
                                                                      str(A100 / inst)]))
        elif name == "fit":
            cases.append((f"fit: {args.rows} A100 measurements, {args.evals} residual evaluations",
                          ["fit", str(args.rows), str(args.evals)]))
        elif name == "schedule":
            cases.append((f"schedule {args.schedule} (export choice)",
                          ["schedule", args.schedule, str(A100 / "a100x2-allreduce.toml")]))
        else:
            raise SystemExit(f"unknown case {name!r}")
    with tempfile.TemporaryDirectory() as tmp:
        roots = {"new": _shim(Path(tmp))}
        if args.old_root and not args.skip_old:
            roots["former"] = args.old_root
            print(f"former: the package under {args.old_root}", flush=True)
        elif not args.skip_old:
            roots["former"], commit = export_revision(args.old_rev, Path(tmp) / "former")
            print(f"former: revision {commit}", flush=True)
        run(cases, roots)


def _shim(folder: Path) -> str:
    """A folder whose ``collsynth`` is this tree (a symlink), to put on ``PYTHONPATH``."""
    (folder / "new").mkdir()
    (folder / "new" / "collsynth").symlink_to(HERE.parent)
    return str(folder / "new")


if __name__ == "__main__":
    _main(sys.argv[1:])
