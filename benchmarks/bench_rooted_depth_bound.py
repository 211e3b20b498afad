"""What the rooted depth bound's refined program (one arrival or several,
:mod:`collsynth.tens.bounds.rooted_depth`) costs and gains against its first program: the ``sync``
bound of a 1 GB reduce to GPU 0 computed both ways, side by side in one process, on tori, a
hypercube and TACOS's hierarchy (whose 32 GPUs are within ``REFINED_MOST_GPUS``).

Run: ``python benchmarks/bench_rooted_depth_bound.py``. CPU seconds (``time.process_time``);
prints one row per instance: the two values, their ratio and each one's seconds.

Measured: the closing note of the stop that capped the refined program at 32 GPUs. With the programs
solved only where the step search's decisions depend on them
(:func:`collsynth.tens.bounds.ramp.least_over_steps`, the refined program above its relaxation), the
same values (bit for bit), CPU s first / refined: torus 8x8 2.6 / 16.5 -> 1.7 / 10.2, torus 4x4x4
1.0 / 10.9 -> 0.8 / 5.7, hypercube 7 2.1 / 14.4 -> 1.3 / 8.9, TACOS 4x4x2 0.9 / 12.6 -> 0.7 / 10.8
(``nice -n 10``, load 0.3-8 before, 5.7-8 after).
"""

from __future__ import annotations

import os
import time

from bench_allreduce import instance_of

CASES = (("torus 8x8", "torus", {"dims": [8, 8]}),
         ("torus 4x4x4", "torus", {"dims": [4, 4, 4]}),
         ("hypercube 7", "hypercube", {"dim": 7}),
         ("TACOS ring x complete x switch 4x4x2", "corpus:tacos-hier-ring-fc-switch-4x4x2-allgather", {}))


def _bound(inst, refined: bool):
    from collsynth.tens.bounds import rooted_depth
    from collsynth.tens.bounds.instance import Bounds

    rooted_depth.REFINED_MOST_GPUS = 10**9 if refined else 0
    t0 = time.process_time()
    parts = Bounds(inst, None, 60.0)
    value = rooted_depth.rooted_depth_bound(inst, parts.part("sync_latency"), parts.part("sync_bandwidth")).value
    return value, time.process_time() - t0


def main() -> None:
    print(f"load {os.getloadavg()[0]:.1f}")
    print("| instance | GPUs | first ms | refined ms | refined / first | first CPU s | refined CPU s |")
    print("|---|---|---|---|---|---|---|")
    for label, generator, params in CASES:
        inst = instance_of(generator, params, "reduce")  # 1 GB to the first GPU
        (first, t_first), (refined, t_refined) = _bound(inst, False), _bound(inst, True)
        print(f"| {label} | {len(inst.collective.nodes)} | {first * 1e3:.4f} | {refined * 1e3:.4f} | {refined / first:.5f} | "
              f"{t_first:.1f} | {t_refined:.1f} |", flush=True)


if __name__ == "__main__":
    main()
