"""The lower bounds of big instances: seconds and memory of every model's bound, before and after,
side by side in one run on one machine.

Run ``python benchmarks/bench_bounds_scale.py`` (all-to-all on 256 and 512 NPUs, allgather and
allreduce on 1,024 and 4,096; a few minutes), ``--big`` to add the all-to-all on 1,024 NPUs (the
former code needs about 16 GB and two minutes there), ``--baseline REV`` (default
:data:`BASELINE`, the revision before the demand was read a block of rows at a time) or
``--baseline none``, or ``python -m pytest -m benchmark -s -n 0 benchmarks/bench_bounds_scale.py``.

Each case runs in a fresh child process, for this package and for ``git archive REV`` exported
into a temporary folder: the child loads the instance, computes every model's bounds
(``collsynth.tens.bounds.instance_bounds(...).parts``, the default min-cut budget) and reports
its wall and CPU seconds for that alone (after the bounds of a 3-node ring, which load any
compiled code as ``collsynth solve`` does before its clock starts), its peak resident set (``ru_maxrss``, imports
included) and the best bound of each model. The table prints both, their ratios, and whether
the two revisions' bounds are equal (they must be: the same arguments, computed otherwise).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BASELINE = "3082ae8"
CASES = {  # name: instance TOML
    "alltoall torus 16x16": ("torus", [16, 16], "alltoall"),
    "alltoall torus 16x32": ("torus", [16, 32], "alltoall"),
    "allgather torus 32x32": ("torus", [32, 32], "allgather"),
    "allreduce torus 32x32": ("torus", [32, 32], "allreduce"),
    "allgather torus 64x64": ("torus", [64, 64], "allgather"),
}
BIG = {"alltoall torus 32x32": ("torus", [32, 32], "alltoall")}
CHILD = """
import json, resource, sys, time
from collsynth.instances.instance import make_instance
from collsynth.instances.generators import build
from collsynth.tens import bounds
gen, dims, kind = json.loads(sys.argv[1])
bounds.instance_bounds(make_instance(build("ring", {"nodes": 3}), kind)).parts  # compiled code loaded, as a run has it
inst = make_instance(build(gen, {"dims": dims}), kind, message_bytes=1 << 30)
t0, c0 = time.perf_counter(), time.process_time()
b = bounds.instance_bounds(inst)
b.parts
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
best = {m: b.of(m).value for m in bounds.MODELS + ("steps",)}
print(json.dumps({"wall_s": wall, "cpu_s": cpu, "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                  "best": best}))
"""


def export(rev: str, into: Path) -> Path:
    """``git archive`` of ``rev`` as ``into/collsynth``; returns ``into`` (a package root)."""
    into.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--prefix=collsynth/", rev], capture_output=True,
                             check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def measure(case: tuple, path: Path | None, timeout: float) -> dict:
    """One child's figures for ``case`` (``path``: the package root it imports, None: this one)."""
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = str(path)
    try:
        done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(case)], capture_output=True, text=True,
                              env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout:g} s"}
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1][:80]}
    return json.loads(done.stdout)


def table(cases: dict, baseline: str | None, timeout: float) -> list[dict]:
    """Per case, this package's figures and the baseline's, printed as they come."""
    rows = []
    print(f"{'case':24} | {'wall s':>7} {'CPU s':>7} {'peak GB':>8} | {'before':>7} {'CPU s':>7} {'peak GB':>8} | "
          f"{'wall x':>7} {'peak x':>7} | same bounds")
    with tempfile.TemporaryDirectory() as tmp:
        old_path = export(baseline, Path(tmp) / "old") if baseline else None
        for name, case in cases.items():
            new = measure(case, None, timeout)
            old = measure(case, old_path, timeout) if old_path else {"error": "-"}
            rows.append({"case": name, "new": new, "old": old})
            print(_line(name, new, old), flush=True)
    return rows


def _line(name: str, new: dict, old: dict) -> str:
    def figures(r):
        if "error" in r:
            return f"{r['error']:>25}"
        return f"{r['wall_s']:7.2f} {r['cpu_s']:7.2f} {r['peak_gb']:8.2f}"

    ratios, same = f"{'-':>7} {'-':>7}", "-"
    if "error" not in new and "error" not in old:
        ratios = f"{old['wall_s'] / new['wall_s']:7.1f} {old['peak_gb'] / new['peak_gb']:7.1f}"
        same = "yes" if new["best"] == old["best"] else f"NO: {old['best']} -> {new['best']}"
    return f"{name:24} | {figures(new)} | {figures(old)} | {ratios} | {same}"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--big", action="store_true", help="also the all-to-all on 1,024 NPUs")
    ap.add_argument("--baseline", default=BASELINE, help="git revision of the before columns ('none': skip)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per child process")
    args = ap.parse_args(argv)
    cases = {**CASES, **(BIG if args.big else {})}
    table(cases, None if args.baseline == "none" else args.baseline, args.timeout)


@pytest.mark.benchmark
def test_bench_bounds_scale():
    rows = table(CASES, BASELINE, 900.0)
    for row in rows:
        assert "error" not in row["new"], row
        if "error" not in row["old"]:
            assert row["new"]["best"] == row["old"]["best"], row


if __name__ == "__main__":
    main()
