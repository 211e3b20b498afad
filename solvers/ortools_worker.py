"""OR-Tools worker: solve one MPS file in THIS (child) process and write the result as JSON.

Run by :mod:`collsynth.solvers.backends` as::

    python -m collsynth.solvers.ortools_worker MODEL.mps OUT.json --solver sat|scip|glop|pdlp
        [--time-limit S] [--gap G] [--threads K] [--seed N]

highspy and ortools cannot be loaded into one process, so OR-Tools only ever runs here. The
output JSON has ``status`` (optimal / feasible / infeasible / no-solution / error),
``objective``, ``bound``, ``solve_s``, ``version``, ``message`` and ``values`` (variable name in
the MPS file -> value, only when a solution exists). ``--debug-sleep`` and ``--debug-crash``
exist to test the parent's handling of a hung or crashing child.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time


def _params(solver: str, threads: int, seed: int, gap: float | None) -> str:
    if solver == "sat":
        parts = [f"num_workers:{max(1, threads)}", f"random_seed:{seed}"]
        if gap is not None:
            parts.append(f"relative_gap_limit:{gap}")
        return ",".join(parts)
    if solver == "scip":
        lines = [f"randomization/randomseedshift = {seed}", "lp/threads = 1"]
        if gap is not None:
            lines.append(f"limits/gap = {gap}")
        return "\n".join(lines)
    return ""


def main(argv=None) -> int:
    """Parse arguments, solve, write the JSON result; exit 0 unless the file cannot be written."""
    ap = argparse.ArgumentParser(prog="ortools_worker")
    ap.add_argument("mps")
    ap.add_argument("out")
    ap.add_argument("--solver", required=True, choices=("sat", "scip", "glop", "pdlp"))
    ap.add_argument("--time-limit", type=float, default=None)
    ap.add_argument("--gap", type=float, default=None)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--debug-sleep", type=float, default=0.0, help="sleep before solving (tests)")
    ap.add_argument("--debug-crash", action="store_true", help="abort the process (tests)")
    args = ap.parse_args(argv)
    if args.debug_crash:
        os.abort()
    if args.debug_sleep:
        time.sleep(args.debug_sleep)

    import ortools
    from ortools.linear_solver.python import model_builder as mb

    out: dict = {"version": f"ortools {ortools.__version__}", "values": {}}
    model = mb.Model()
    if not model.import_from_mps_file(args.mps):
        out.update(status="error", message=f"error: OR-Tools could not read {args.mps}")
        return _write(args.out, out)
    solver = mb.Solver(args.solver)
    if not solver.solver_is_supported():
        out.update(status="error", message=f"error: OR-Tools was built without {args.solver}")
        return _write(args.out, out)
    if args.time_limit is not None:
        solver.set_time_limit_in_seconds(args.time_limit)
    params = _params(args.solver, args.threads, args.seed, args.gap)
    if params:
        solver.set_solver_specific_parameters(params)
    t0 = time.perf_counter()
    status = solver.solve(model)
    out["solve_s"] = time.perf_counter() - t0
    S = mb.SolveStatus
    if status == S.OPTIMAL:
        out["status"], has = "optimal", True
    elif status == S.FEASIBLE:
        out["status"], has = "feasible", True
        out["message"] = "limit hit; incumbent kept"
    elif status == S.INFEASIBLE:
        out["status"], has = "infeasible", False
        out["message"] = "the model is infeasible"
    elif status in (S.UNBOUNDED,):
        out["status"], has = "error", False
        out["message"] = "error: the model is unbounded"
    elif status == S.NOT_SOLVED:
        out["status"], has = "no-solution", False
        out["message"] = "limit hit before any solution"
    else:
        out["status"], has = "error", False
        out["message"] = f"error: {status.name} {solver.status_string or ''}".strip()
    if has:
        values = solver.values(model.get_variables())
        names = [v.name for v in model.get_variables()]
        out["values"] = {n: float(x) for n, x in zip(names, values.tolist())}
        out["objective"] = _num(solver.objective_value)
        out["bound"] = _num(solver.best_objective_bound)
        if out["status"] == "optimal" and args.solver in ("glop", "pdlp"):
            out["bound"] = out["objective"]
    return _write(args.out, out)


def _num(x):
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _write(path: str, data: dict) -> int:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
