"""The cost of ``collsynth --help`` and of each command's ``--help`` (run: ``python -m pytest -m
benchmark -n 0 -s benchmarks/bench_help.py``, or as a script). Target: under 0.5 s of CPU each
(the top-level help imports no command module; a command's help imports its own module only,
which imports what the command runs when it runs).

Prints a Markdown table: command, CPU seconds (user + system of the child, the best of 3).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from collsynth.solvers.cli import COMMANDS
from markdown_table import table as markdown_table


def cpu_seconds(argv: list[str], repeat: int = 3) -> float:
    """The least CPU time (user + system) of ``python -m collsynth.solvers.cli ARGV`` over ``repeat`` runs."""
    best = float("inf")
    for _ in range(repeat):
        before = os.times()
        subprocess.run([sys.executable, "-m", "collsynth.solvers.cli", *argv], capture_output=True, check=True)
        after = os.times()
        best = min(best, (after.children_user - before.children_user) + (after.children_system - before.children_system))
    return best


def main() -> list[str]:
    commands = [["--help"], *([name, "--help"] for names in COMMANDS.values() for name in names)]
    rows = ([f"collsynth {' '.join(argv)}", f"{cpu_seconds(argv):.2f}"] for argv in commands)
    return markdown_table(["command", "CPU s"], rows, stream=True)


@pytest.mark.benchmark
def test_help_costs():
    print("\n" + "\n".join(main()))


if __name__ == "__main__":
    main()
