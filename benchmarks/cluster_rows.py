"""What the benchmarks of whole clusters share: a row measured under a time limit in its own
process (stopped rows say at which stage), and the fabrics chosen by label and size.

>>> chosen([("a 8", "g", {"n": 8}), ("b 64", "g", {"n": 64})], None, "b", 1, 100, lambda g, p: p["n"])
[('a 8', 'g', {'n': 8})]
"""

from __future__ import annotations

import argparse
import resource
import signal
from typing import Callable


class RowTimeout(Exception):
    """The row ran out of its time."""


def _alarm(signum, frame):
    raise RowTimeout()


def timed_row(out: dict, measure: Callable[[dict], None], timeout: float) -> dict:
    """``measure(out)`` under an alarm of ``timeout`` seconds: ``out`` with ``stopped`` saying
    at which ``stage`` a timeout or failure came (a refusal or failure is a row of the table,
    not the end of the run), and the process's peak resident memory (``peak_MiB``)."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(int(timeout))
    try:
        measure(out)
        out["stage"] = "done"
    except RowTimeout:
        out["stopped"] = f"timeout at {out['stage']}"
    except Exception as e:
        out["stopped"] = f"{type(e).__name__} at {out['stage']}: {str(e)[:120]}"
    signal.alarm(0)
    out["peak_MiB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def chosen(rows, only: str | None, skip: str | None, least: int, most: int, gpus) -> list:
    """The ``(label, generator, params)`` rows whose label contains ``only`` and not ``skip``
    and whose ``gpus(generator, params)`` lies in ``[least, most]``, the smaller fabrics first."""
    keep = [r for r in rows if (only is None or only in r[0]) and (skip is None or skip not in r[0])
            and least <= gpus(r[1], r[2]) <= most]
    return sorted(keep, key=lambda r: gpus(r[1], r[2]))


def cluster_parser(doc: str, least: int, most: int, timeout: float) -> argparse.ArgumentParser:
    """The options every cluster benchmark takes: ``--only``, ``--skip`` (labels),
    ``--min-gpus``, ``--max-gpus`` and ``--row-timeout`` (seconds), with these defaults."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--only", help="rows whose label contains this")
    ap.add_argument("--skip", help="leave out rows whose label contains this")
    ap.add_argument("--min-gpus", type=int, default=least)
    ap.add_argument("--max-gpus", type=int, default=most)
    ap.add_argument("--row-timeout", type=float, default=timeout)
    return ap
