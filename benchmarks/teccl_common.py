"""What the TE-CCL benchmarks share: CPU seconds and the published figure of an instance.

The figures are TE-CCL's (X. Liu et al., "Rethinking Machine Learning Collective
Communication as a Multi-Commodity Flow Problem", ACM SIGCOMM 2024), carried by the
``paper-teccl`` instances in their ``[[expect.paper]]`` tables.
"""

from __future__ import annotations

import resource


def cpu_seconds() -> float:
    """CPU seconds of this process and its finished children (solver children included)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def paper_value(inst, column: str, producer: str) -> float | None:
    """TE-CCL's figure in ``column`` for the run of ``producer`` on ``inst`` (None if not published)."""
    for e in inst.expect.get("paper", []):
        if e["column"] == column and e.get("producer") == producer:
            return e["value"]
    return None


def limit_argument(args: list[str], default: float) -> float:
    """The seconds after ``--limit`` on a benchmark's command line, else ``default``."""
    return float(args[args.index("--limit") + 1]) if "--limit" in args else default
