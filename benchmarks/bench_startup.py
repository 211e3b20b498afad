"""The fixed start-up cost of ``collsynth solve``: the whole command on a 4x4 torus allgather.

Run ``python benchmarks/bench_startup.py`` (a minute on a shared machine), ``--producers
bfb-lp,greedy`` to pick some, ``--repeat N`` for the best of N, ``--against PYTHONPATH`` to
time another version of collsynth (e.g. ``git archive main`` unpacked as ``DIR/collsynth``) in
turn with this one, or ``python -m pytest -m benchmark -s benchmarks/bench_startup.py``.

On an instance this small the producer's own work is a few milliseconds: what the command
costs is the interpreter, the imports, the kernels loaded before the clock starts, reading the
instance and writing the row, which every ``collsynth solve`` pays whatever its size (beside,
e.g., BFB on a 50x50 torus, which produces in 4.2 s, and whose solve should take at most 2x
that). Each run is
the command line as a user types it, in a fresh process (:func:`bench_solve.solve_once`: wall
seconds, CPU seconds from ``os.wait4``, the load average before). Printed per producer and
version: the best wall and CPU seconds of the repeats, each run's, and the load averages, so
that figures taken on a shared machine read honestly; with ``--against``, the runs of the two
versions alternate and the last column is new over base (best CPU).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import pytest

from bench_solve import solve_once

TINY = 'name = "t4"\n[topology]\ngenerator = "torus"\ndims = [4, 4]\n[collective]\nkind = "allgather"\n'
PRODUCERS = ("bfb-lp", "swing-bw", "greedy")


def run(producers: tuple[str, ...], repeat: int, paths: dict[str, str | None]) -> dict[tuple[str, str], list[dict]]:
    """``repeat`` rounds; in each, every producer once through each version in turn."""
    runs: dict[tuple[str, str], list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        instance = Path(tmp) / "t4.toml"
        instance.write_text(TINY)
        for _ in range(repeat):
            for producer in producers:
                for label, path in paths.items():
                    got = solve_once(producer, instance, path=path)
                    assert got["row"]["verified"], got["row"]["message"]
                    runs.setdefault((producer, label), []).append(got)
    return runs


def report(runs: dict[tuple[str, str], list[dict]]) -> str:
    """Best wall and CPU per producer and version, every run's, the load averages."""
    lines = [f"{'producer':10s} {'version':8s} {'best wall s':>11s} {'best CPU s':>10s} {'new/base':>8s} | "
             "wall s of each run | CPU s of each run | load average before each run"]
    best_cpu = {key: min(r["cpu_s"] for r in rs) for key, rs in runs.items()}
    for (producer, label), rs in runs.items():
        base = best_cpu.get((producer, "base"))
        ratio = f"{best_cpu[producer, label] / base:8.3f}" if base and label == "new" else f"{'':8s}"
        lines.append(f"{producer:10s} {label:8s} {min(r['wall_s'] for r in rs):11.2f} {best_cpu[producer, label]:10.2f} "
                     f"{ratio} | " + " ".join(f"{r['wall_s']:.2f}" for r in rs) + " | "
                     + " ".join(f"{r['cpu_s']:.2f}" for r in rs) + " | "
                     + " ".join(f"{r['load_before']:.1f}" for r in rs))
    return "\n".join(lines)


@pytest.mark.benchmark
def test_startup():
    print("\n" + report(run(PRODUCERS, 3, {"": None})))


def _main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--producers", default=",".join(PRODUCERS), help="comma-separated producers")
    p.add_argument("--repeat", type=int, default=5, help="runs per producer and version (the best is shown)")
    p.add_argument("--against", metavar="PYTHONPATH", default=None,
                   help="also time collsynth imported from this PYTHONPATH, alternating: versions 'base' and 'new'")
    args = p.parse_args(argv)
    paths = {"base": args.against, "new": None} if args.against else {"": None}
    print(report(run(tuple(args.producers.split(",")), args.repeat, paths)))


if __name__ == "__main__":
    _main(sys.argv[1:])
