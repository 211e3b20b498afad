"""Tree packing's latency choice (trees per shard, pipeline pieces) against the fixed-depth
pipelining ForestColl uses (Zhao et al., "ForestColl", arXiv 2402.06787, Section 5), swept over
message sizes: the sweeps ``tests/test_packing_scale.py`` checks at one or a few sizes.

Each case runs the test module's own check (its assertions hold, or the case is reported as
failed) and prints its figures:

- ``through-pipeline``: two boxes of four GPUs behind switches, every single-forest collective
  (allgather, broadcast, reduce-scatter, reduce) at 16 KB-4 GB (powers of two); the chosen and
  the fixed-depth run's pieces and summed sync + event seconds, through the pipeline;
- ``one-model``: the same boxes, allgather at 16 KB-1 GB, ``--param objective=sync`` and
  ``event``; each run's pieces and its time in that model;
- ``fewer-pieces``: eight GPUs on one switch, every pair of a small (64 KB-1 MB) and a large
  (256 MB-4 GB) allgather; each size's pieces and summed prices (priced outside the producer).

Run: ``nice python benchmarks/bench_latency_choice.py [--only NAME] [--step N]`` (``--step 2``:
every other size; the whole sweep is about 5 minutes of CPU), or ``python -m pytest -m
benchmark -n 0 -s benchmarks/bench_latency_choice.py``. Exit 1 when any case fails its check.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

KINDS = ("allgather", "broadcast", "reduce_scatter", "reduce")


def _cases(only: str | None, step: int) -> list[tuple]:
    """``(sweep name, check, arguments)`` for every case of the sweeps (``only``: one sweep)."""
    import test_packing_scale as t
    from collsynth.instances.instance import topology_from_dict

    switch8 = topology_from_dict({"generator": "switch", "nodes": 8, "unwind": 0, "bandwidth": 100e9, "alpha": 2e-6})
    cases = [("through-pipeline", t.check_priced_choice_through_the_pipeline, (log, kind))
             for log in range(14, 33, step) for kind in KINDS]
    cases += [("one-model", t.check_one_model_objective, (log, model))
              for log in range(14, 31, step) for model in ("sync", "event")]
    cases += [("fewer-pieces", t.check_fewer_pieces_for_small_messages, (switch8, small, large))
              for small in range(16, 21, step) for large in range(28, 33, step)]
    return [c for c in cases if only in (None, c[0])]


def _label(args: tuple) -> str:
    return ", ".join(str(a) for a in args if isinstance(a, (int, str)))


def _figures(got: dict) -> str:
    """A check's figures (nested per size where it has several) as ``name=value`` pairs."""
    def one(d: dict) -> str:
        return " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in d.items())
    return "; ".join(f"2^{k}: {one(v)}" for k, v in got.items()) if isinstance(next(iter(got.values())), dict) \
        else one(got)


def main(only: str | None = None, step: int = 1) -> int:
    """Run every case, print a Markdown table row a case; the number of failed cases."""
    failed = 0
    print("| sweep | case | figures | CPU s |\n|---|---|---|---:|")
    for name, check, args in _cases(only, step):
        t0 = time.process_time()
        try:
            figures = _figures(check(*args))
        except AssertionError as e:
            failed += 1
            figures = f"FAILED: {e}"
        print(f"| {name} | {_label(args)} | {figures} | {time.process_time() - t0:.1f} |", flush=True)
    print(f"{failed} failed")
    return failed


@pytest.mark.benchmark
def test_bench_latency_choice():
    assert main(step=2) == 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("through-pipeline", "one-model", "fewer-pieces"), default=None)
    parser.add_argument("--step", type=int, default=1, help="every step-th size (1: every power of two)")
    args = parser.parse_args()
    sys.exit(1 if main(args.only, args.step) else 0)
