"""What the TE-CCL benchmarks share: a measured run beside the published figures of its
instance, and CPU seconds.

The figures are TE-CCL's (X. Liu et al., "Rethinking Machine Learning Collective
Communication as a Multi-Commodity Flow Problem", ACM SIGCOMM 2024), carried by the
``paper-teccl`` instances in their ``[[expect.paper]]`` tables.
"""

from __future__ import annotations

import os
import resource
import time

from collsynth.instances import CORPUS, load_instance
from collsynth.solvers.pipeline import run
from collsynth.solvers.producers import Options


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


def measured(name: str, producer: str, options: Options, published_by: str, digits: int) -> dict:
    """One run of ``producer`` with ``options`` on corpus instance ``name``: our epochs (TEN
    timesteps) and their lower bound, proven or not, verified or not, wall and CPU seconds
    (rounded to ``digits``) with the load average beside them, and TE-CCL's epochs and solver
    time for its run of ``published_by``."""
    inst = load_instance(CORPUS / f"{name}.toml")
    t0, c0 = time.perf_counter(), cpu_seconds()
    result, _ = run(inst, producer, options)
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    return {"instance": name, "producer": producer, "epochs": result["steps"],
            "bound": result.get("lower_bound_timesteps"), "proven": result["status"] == "optimal",
            "verified": bool(result["verified"]), "wall_s": round(wall, digits), "cpu_s": round(cpu, digits),
            "load": round(os.getloadavg()[0], 1),
            "teccl_epochs": paper_value(inst, "3-Epochs_Required", published_by),
            "teccl_s": paper_value(inst, "Solver_Time", published_by)}


HEADER = ["instance", "epochs", "bound", "proven", "wall s", "CPU s", "load", "TE-CCL epochs", "TE-CCL s"]
ALIGN = ["---", "---:", "---:", "---", "---:", "---:", "---:", "---:", "---:"]


def cells(r: dict) -> list:
    """A :func:`measured` row's cells under :data:`HEADER`."""
    return [r["instance"], r["epochs"], r["bound"], r["proven"], r["wall_s"], r["cpu_s"], r["load"],
            f"{r['teccl_epochs']:g}", f"{r['teccl_s']:.0f}"]
