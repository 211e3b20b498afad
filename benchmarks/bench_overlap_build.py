"""What the allreduce's overlap costs a default-objective tree-packing run: the CPU seconds of the
whole run (optimum, trees, the ``event`` depth search, the overlap) and of the overlap step
alone (:func:`collsynth.solvers.packing.allreduce_depth.with_overlap`: the searches of
:mod:`collsynth.solvers.packing.overlap_sizes` and the candidates' ``event`` simulations), per
fabric of ``bench_clusters.py``, 1 GiB, the Clos fabrics' switches declared to copy nothing.

Run: ``python benchmarks/bench_overlap_build.py [--only LABEL] [--repeat N]``. CPU seconds
(``time.process_time``) because the shared machine's load inflates wall seconds far more; the
load average is printed beside them. Each row runs in a process of its own.

Measured: README, "The overlap for the default objective and for given pieces".
"""

from __future__ import annotations

import argparse
import os
import time

from bench_clusters import ROWS
from fresh_process import each_in_a_fresh_process

DEFAULT_ROWS = ("SuperPOD 8 SU (rail_clos)", "fat_tree k=20")


def _row(label: str) -> dict:
    from collsynth.instances.generators import build
    from collsynth.instances.instance import make_instance
    from collsynth.solvers.packing import compact_form
    from collsynth.solvers.producers import Options

    _, generator, params = next(r for r in ROWS if r[0] == label)
    params = {**params, "fabric_copy": False} if generator in ("rail_clos", "fat_tree", "hpn") else params
    inst = make_instance(build(generator, params), "allreduce", message_bytes=1 << 30)
    real, spent = compact_form.with_overlap, {}

    def timed(*a, **k):
        cpu = time.process_time()
        out = real(*a, **k)
        spent["overlap"] = time.process_time() - cpu
        return out

    compact_form.with_overlap = timed
    cpu = time.process_time()
    out = compact_form.run_compact(inst, Options(time_limit=600))
    trees = out.schedule
    return {"fabric": label, "run_cpu_s": time.process_time() - cpu, "overlap_cpu_s": spent.get("overlap"),
            "pieces": "/".join(map(str, trees.pieces)), "delay": trees.delay, "load": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="the row whose label contains this (default: SuperPOD 8 SU and fat tree k=20)")
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    labels = [r[0] for r in ROWS if a.only in r[0]] if a.only else list(DEFAULT_ROWS)
    print("| fabric | run CPU s | overlap CPU s | pieces, delay | load |\n|---|---|---|---|---|")
    each_in_a_fresh_process(_row, labels * a.repeat, _line)


def _line(r: dict) -> str:
    """A row of the table."""
    return (f"| {r['fabric']} | {r['run_cpu_s']:.2f} | {r['overlap_cpu_s']:.2f} | {r['pieces']}, {r['delay']} "
            f"| {r['load']:.1f} |")


if __name__ == "__main__":
    main()
