"""Whether an allreduce on boxes joined by reducing rails fits fewer TEN timesteps than the
TEN ILP with reducing switches finds, decided over every schedule of whole pieces (not only one
reduction tree per chunk) by the exact CP-SAT model of ``tests/exact_switch_reduction.py``.

The TEN ILP (``ten-ilp-combining``) keeps one reduction tree per chunk; on 2 x 4 GPUs with
SHARP rails it proves 7 timesteps impossible among its schedules and finds 8, where the
``combining-arrivals`` bound says 7. For each system this prints the bound, then whether each
number of timesteps from the bound up fits (CP-SAT's status and seconds); the first that fits
is converted to sends and checked by the project's verifier and the TEN's capacity.
``INFEASIBLE`` means no schedule of whole ``1 / pieces`` pieces fits (finer splits are not
excluded).

Run: ``nice python benchmarks/bench_rails_exact.py`` (2x2 and 2x4, whole chunks and halves;
``--systems 2x4 --pieces 1`` to choose; minutes on two cores).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def row(k: int, g: int, pieces: int, seconds: float, workers: int) -> list[str]:
    """Lines for ``k`` x ``g`` GPUs on SHARP rails: each number of timesteps from the bound up
    to the first that fits, with its status and seconds, and that schedule's checks."""
    from exact_switch_reduction import fits
    from test_ten_ilp_reducing_switch import rails

    from collsynth.instances.instance import make_instance
    from collsynth.tens.bounds import instance_bounds, respects_ten_capacity
    from collsynth.tens.verify import verify

    inst = make_instance(rails(k, g, True), "allreduce")
    t = instance_bounds(inst).timesteps.value
    out = []
    while True:
        t0 = time.perf_counter()
        status, s = fits(inst, t, pieces, seconds, workers)
        line = f"| {k}x{g} | 1/{pieces} | {instance_bounds(inst).timesteps.value} | {t} | {status} | " \
               f"{time.perf_counter() - t0:.1f} |"
        if s is not None:
            line += f" {verify(s, inst) is None} | {respects_ten_capacity(s, inst)} |"
            out.append(line)
            return out
        out.append(line + " - | - |")
        if status != "INFEASIBLE":
            return out
        t += 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--systems", default="2x2,2x4", help="boxes x GPUs, comma-separated")
    ap.add_argument("--pieces", default="1,2", help="pieces per chunk, comma-separated")
    ap.add_argument("--seconds", type=float, default=1800.0, help="CP-SAT's limit per decision")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--fractional", type=int, default=None, metavar="STEPS",
                    help="instead: whether pieces of any sizes fit STEPS timesteps (column generation)")
    ap.add_argument("--windows", action="store_true",
                    help="with --fractional: price only one-piece schedules that keep the tight windows")
    a = ap.parse_args(argv)
    if a.fractional is not None:
        from exact_switch_reduction import fractional, rail_symmetries
        from test_ten_ilp_reducing_switch import rails

        from collsynth.instances.instance import make_instance

        for system in a.systems.split(","):
            k, g = map(int, system.split("x"))
            t0 = time.perf_counter()
            got = fractional(make_instance(rails(k, g, True), "allreduce"), a.fractional, a.seconds, a.workers,
                             symmetries=rail_symmetries(k, g), windows=a.windows)
            got.pop("mix", None)
            print(f"{system} SHARP rails, {a.fractional} timesteps: {got} ({time.perf_counter() - t0:.0f} s)", flush=True)
        return 0
    print("| system | piece | bound | timesteps | CP-SAT | s | verified | within TEN capacity |")
    print("|---|---|---|---|---|---|---|---|")
    for system in a.systems.split(","):
        k, g = map(int, system.split("x"))
        for pieces in map(int, a.pieces.split(",")):
            for line in row(k, g, pieces, a.seconds, a.workers):
                print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
