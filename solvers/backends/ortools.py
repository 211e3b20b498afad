"""The OR-Tools backends ``cpsat``, ``scip``, ``glop``, ``pdlp``, run in a CHILD process
(highspy and ortools cannot share one process): the model is written as MPS with symbolic
names, solved by :mod:`collsynth.solvers.backends.ortools_worker`, and the values are mapped
back by name.

The child is given the run's deadline (its solver stops what :data:`~.request.READBACK_S`
before it) and is killed at that deadline if it is still running: a killed child keeps its
incumbent only for CP-SAT, whose solution callback writes every improving solution to a file
read here (status ``feasible``); a killed SCIP, GLOP or PDLP child, or a crashed one, is a
recorded ``error``, never a dead parent. CP-SAT is refused for models with continuous variables
(it would round them); GLOP and PDLP are refused for models with integer variables (they are
LP solvers).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

from ...tens.status import Status
from ...limits import seconds_left
from .request import READBACK_S, Request, SolveResult, finite, model_stats, start_values, with_note

SOLVERS = {"cpsat": "sat", "scip": "scip", "glop": "glop", "pdlp": "pdlp"}  # backend: the worker's --solver
_INSTALLED: tuple[bool, str] | None = None


def installed() -> tuple[bool, str]:
    """OR-Tools is importable (checked without importing it into this process)."""
    global _INSTALLED
    if _INSTALLED is None:
        import importlib.util

        if importlib.util.find_spec("ortools") is None:
            _INSTALLED = (False, "ortools not installed (pip install ortools)")
        else:
            try:
                from importlib.metadata import version

                _INSTALLED = (True, f"ortools {version('ortools')} (child process)")
            except Exception:  # noqa: BLE001
                _INSTALLED = (True, "ortools (child process)")
    return _INSTALLED


def solve(model, request: Request, *, wall_limit: float | None = None, extra_args=()) -> SolveResult:
    """Solve in an OR-Tools child process (see :mod:`collsynth.solvers.backends.ortools_worker`).

    The child is killed at the request's deadline (``wall_limit`` seconds from the start of
    the child instead, when given: tests of a hung child).
    """
    name = request.name
    refusal = _refusal(model, name)
    if refusal is not None:
        return refusal
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="collsynth-ortools-") as tmp:
        cmd, symbol_map = _command(model, name, tmp, request)
        cmd += list(extra_args)
        build_s = time.perf_counter() - t0
        if wall_limit is None:
            wall_limit = seconds_left(request.deadline.left())  # killed at the deadline
        data, elapsed = _run_child(cmd, name, tmp, wall_limit, build_s)
    if isinstance(data, SolveResult):
        return data
    status = data["status"]
    if status in (Status.OPTIMAL, Status.FEASIBLE):
        missing = _load_values(data, symbol_map)
        if missing:
            return SolveResult(Status.ERROR, solver=name, message=f"error: {missing} variable names did not map back")
    message = data.get("message", "")
    if request.warm_start and data.get("start_values"):
        message = with_note(message, f"MIP start of {data['start_values']} values passed")
    return SolveResult(status=status, objective=finite(data.get("objective")), bound=finite(data.get("bound")),
                       build_s=build_s, solve_s=finite(data.get("solve_s")) or elapsed, solver=name,
                       version=data.get("version", ""), message=message)


def _refusal(model, name: str) -> SolveResult | None:
    """A ``skipped`` result when OR-Tools is missing or ``name`` cannot take this model."""
    ok, why = installed()
    if not ok:
        return SolveResult(Status.SKIPPED, solver=name, message=f"skipped: {name} not installed ({why})")
    stats = model_stats(model)
    if name == "cpsat" and stats["continuous"]:
        return SolveResult(Status.SKIPPED, solver=name, message=(
            f"skipped: cpsat needs a pure-integer model ({stats['continuous']} continuous variables)"))
    if name in ("glop", "pdlp") and stats["integer"]:
        return SolveResult(Status.SKIPPED, solver=name, message=(
            f"skipped: {name} is an LP solver ({stats['integer']} integer variables)"))
    return None


def _command(model, name: str, tmp: str, request: Request) -> tuple[list[str], Any]:
    """The child's command line (model written as MPS in ``tmp``) and the MPS symbol map."""
    mps = os.path.join(tmp, "model.mps")
    _, sid = model.write(mps, format="mps", io_options={"symbolic_solver_labels": True})
    symbol_map = model.solutions.symbol_map[sid]
    cmd = [
        sys.executable, "-m", "collsynth.solvers.backends.ortools_worker", mps, os.path.join(tmp, "out.json"),
        "--solver", SOLVERS[name], "--threads", str(int(request.threads)), "--seed", str(int(request.seed)),
        "--readback", repr(READBACK_S),
    ]
    left = seconds_left(request.deadline.left())
    if left is not None:  # the same instant in the child (time.monotonic() is one clock per host)
        cmd += ["--deadline", repr(time.monotonic() + left)]
    if request.gap is not None:
        cmd += ["--gap", repr(float(request.gap))]
    if request.warm_start and name in ("cpsat", "scip"):
        start = {}
        for v, x in start_values(model):
            sym = symbol_map.byObject.get(id(v))
            if sym is not None:
                start[sym] = x
        path = os.path.join(tmp, "start.json")
        with open(path, "w") as f:
            json.dump(start, f)
        cmd += ["--start", path]
    if name == "cpsat":
        cmd += ["--incumbent", os.path.join(tmp, "incumbent.json")]
    return cmd, symbol_map


def _run_child(cmd: list[str], name: str, tmp: str, wall_limit: float | None, build_s: float):
    """Run the child; ``(result JSON, seconds)``, or ``(SolveResult error, seconds)`` when it
    failed. A child killed at ``wall_limit`` keeps CP-SAT's last incumbent (``feasible``)."""
    t1 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=wall_limit)
    except subprocess.TimeoutExpired:  # subprocess.run kills the child on timeout
        elapsed = time.perf_counter() - t1
        data = _read_json(os.path.join(tmp, "incumbent.json"))
        if data is None:
            return SolveResult(Status.ERROR, solver=name, build_s=build_s, solve_s=elapsed,
                               message=f"error: timed out (child killed after {wall_limit:.1f} s)"), elapsed
        data["status"] = Status.FEASIBLE
        data["message"] = (f"child killed at its wall-clock deadline ({wall_limit:.1f} s); incumbent "
                           f"from its solution callback (solution {data.get('solutions', '?')})")
        data["solve_s"] = elapsed
        return data, elapsed
    elapsed = time.perf_counter() - t1
    data = _read_json(os.path.join(tmp, "out.json")) if proc.returncode == 0 else None
    if data is not None:
        return data, elapsed
    tail = (proc.stderr or proc.stdout or "").strip().splitlines()
    if tail:
        why = tail[-1]
    elif proc.returncode < 0:
        why = f"killed by signal {-proc.returncode}"
    else:
        why = f"exit code {proc.returncode}"
    return SolveResult(Status.ERROR, solver=name, build_s=build_s, solve_s=elapsed,
                       message=f"error: {name} child process failed (exit {proc.returncode}): {why}"), elapsed


def _load_values(data: dict, symbol_map) -> int:
    """Load the child's values into the model by MPS name; the number of names not found."""
    if data.get("sparse"):  # only nonzero values are listed
        for var in symbol_map.bySymbol.values():
            if var.is_variable_type() and not var.fixed:
                var.set_value(0.0, skip_validation=True)
    missing = 0
    for sym, val in data.get("values", {}).items():
        var = symbol_map.bySymbol.get(sym)
        if var is None:
            missing += 1
            continue
        var.set_value(float(round(val)) if var.is_integer() or var.is_binary() else float(val), skip_validation=True)
    return missing


def _read_json(path: str):
    """The JSON object in ``path``, or None if it is missing or unreadable."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
