"""The two runs that failed with the defaults and succeeded with flags, now with no flags
(run: ``python -m pytest -m benchmark -n 0 -s benchmarks/bench_defaults.py``, or as a script).

- a 1,024-NPU hypercube allgather (``generator = "hypercube"``, ``dim = 10``) by
  ``ten-ilp-orbit``, limit 120 s: the producer picks time clustering in one-timestep windows
  without the LP bound (:func:`collsynth.solvers.ten.formulation_producers.instance_defaults`);
- ``instances/corpus/mesh6x6-concurrent.toml`` (TACOS Table V) by ``ten-ilp-combining``, limit
  120 s: the producer picks the TEN timestep of the 1 MiB chunks.

Prints a Markdown table: case, status, timesteps, bound, seconds, what was picked.
"""

from __future__ import annotations

import time

import pytest

from collsynth.instances import CORPUS, generators, load_instance, make_instance
from collsynth.solvers.pipeline import run
from collsynth.solvers.producers import Options
from markdown_table import table as markdown_table

LIMIT_S = 120.0


def cases():
    yield "hypercube dim=10 allgather", make_instance(generators.build("hypercube", {"dim": 10}), "allgather"), \
        "ten-ilp-orbit"
    yield "mesh6x6-concurrent", load_instance(CORPUS / "mesh6x6-concurrent.toml"), "ten-ilp-combining"


def main() -> list[str]:
    header = ["case", "producer", "status", "timesteps", "bound", "run s", "compile s", "picked"]
    return markdown_table(header, (measured(*case) for case in cases()), stream=True)


def measured(name: str, instance, producer: str) -> list:
    """The table's cells of one run of ``producer`` on ``instance`` with the default options."""
    t0 = time.perf_counter()
    row, _ = run(instance, producer, Options(time_limit=LIMIT_S))
    total = time.perf_counter() - t0
    picked = row["extra"].get("defaults", {})
    return [name, producer, row["status"], row["steps"], row["lower_bound_timesteps"],
            f"{total - (row['compile_s'] or 0):.1f}", row["compile_s"],
            f"{picked.get('driver', '')} {picked.get('params', {})}"]


@pytest.mark.benchmark
def test_defaults_solve_the_issue_s_cases():
    print("\n" + "\n".join(main()))


if __name__ == "__main__":
    print("\n".join(main()))
