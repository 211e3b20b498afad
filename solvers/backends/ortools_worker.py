"""OR-Tools worker: solve one MPS file in THIS (child) process and write the result as JSON.

Run by :mod:`collsynth.solvers.backends` as::

    python -m collsynth.solvers.backends.ortools_worker MODEL.mps OUT.json --solver sat|scip|glop|pdlp
        [--time-limit S] [--gap G] [--threads K] [--seed N] [--start START.json]
        [--incumbent INC.json]

highspy and ortools cannot be loaded into one process, so OR-Tools only ever runs here. The
output JSON has ``status`` (optimal / feasible / infeasible / no-solution / error),
``objective``, ``bound``, ``solve_s``, ``version``, ``message`` and ``values`` (variable name in
the MPS file -> value, only when a solution exists; with ``"sparse": true`` only the nonzero
values are listed). ``--debug-sleep`` and ``--debug-crash`` exist to test the parent's handling
of a hung or crashing child.

``--start`` names a JSON object ``{variable name: value}``: a MIP start, given to CP-SAT as
hints (``AddHint``) and to SCIP as the MPModel solution hint (MPSolver's ``SetHint``).

CP-SAT runs on a ``CpModel`` built from the MPS file (integer coefficients; otherwise the
generic model_builder path is used) so that a solution callback can write every improving
solution atomically (temporary file, then rename) to ``--incumbent``: if the parent has to kill
this process at its wall-clock deadline, it loads that file and keeps the incumbent. SCIP
through MPSolver has no such callback: it relies on its own time limit (the parent's deadline
is that limit plus a grace period), and a killed SCIP child loses its incumbent.
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
    ap.add_argument("--start", default=None, help="JSON {variable name: value}: a MIP start (hints)")
    ap.add_argument("--incumbent", default=None, help="CP-SAT: write each improving solution here")
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
    start = {}
    if args.start:
        with open(args.start) as f:
            start = json.load(f)
    if args.solver == "sat":
        done = _solve_cpsat(model, args, start, out)
        if done is not None:
            return done
    if start:
        by_name = {v.name: v for v in model.get_variables()}
        for nm, val in start.items():
            var = by_name.get(nm)
            if var is not None:
                model.add_hint(var, float(val))
        out["start_values"] = len(start)
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


def _solve_cpsat(model, args, start: dict, out: dict):
    """Solve with CP-SAT on a CpModel built from ``model`` (a model_builder Model).

    Returns the exit code after writing ``args.out``, or None when the model has non-integer
    coefficients (the caller then uses the model_builder path, without callback).
    """
    from ortools.sat.python import cp_model

    proto = model.export_to_proto()
    big = float(1 << 40)

    def integral(xs):
        return all(abs(x - round(x)) <= 1e-9 for x in xs)

    for c in proto.constraint:
        if not integral(c.coefficient):
            return None
    cp = cp_model.CpModel()
    xs = []
    for v in proto.variable:
        lb = -big if not math.isfinite(v.lower_bound) or v.lower_bound < -big else v.lower_bound
        ub = big if not math.isfinite(v.upper_bound) or v.upper_bound > big else v.upper_bound
        xs.append(cp.new_int_var(math.ceil(lb - 1e-9), math.floor(ub + 1e-9), v.name))
    for c in proto.constraint:
        vs = [xs[i] for i in c.var_index]
        ks = [int(round(k)) for k in c.coefficient]
        lo = -big if not math.isfinite(c.lower_bound) else c.lower_bound
        hi = big if not math.isfinite(c.upper_bound) else c.upper_bound
        expr = cp_model.LinearExpr.weighted_sum(vs, ks)
        cp.add_linear_constraint(expr, math.ceil(lo - 1e-9), math.floor(hi + 1e-9))
    obj = [(x, v.objective_coefficient) for x, v in zip(xs, proto.variable) if v.objective_coefficient]
    if obj:
        coefs = [k for _, k in obj]
        if integral(coefs):
            coefs = [int(round(k)) for k in coefs]
        expr = cp_model.LinearExpr.weighted_sum([x for x, _ in obj], coefs)
        if proto.maximize:
            cp.maximize(expr)
        else:
            cp.minimize(expr)
    offset = float(proto.objective_offset)
    if start:
        by_name = {x.name: x for x in xs}
        used = 0
        for nm, val in start.items():
            x = by_name.get(nm)
            if x is not None:
                cp.add_hint(x, int(round(float(val))))
                used += 1
        out["start_values"] = used
    solver = cp_model.CpSolver()
    p = solver.parameters
    p.num_workers = max(1, args.threads)
    p.random_seed = args.seed
    if args.time_limit is not None:
        p.max_time_in_seconds = args.time_limit
    if args.gap is not None:
        p.relative_gap_limit = args.gap
    names = [x.name for x in xs]
    t0 = time.perf_counter()
    cb = None
    if args.incumbent:
        cb = _Incumbent(cp_model, xs, names, offset, args.incumbent, out["version"], t0)
    status = solver.solve(cp, cb)
    out["solve_s"] = time.perf_counter() - t0
    S = cp_model
    has = False
    if status == S.OPTIMAL:
        out["status"], has = "optimal", True
    elif status == S.FEASIBLE:
        out["status"], has = "feasible", True
        out["message"] = "limit hit; incumbent kept"
    elif status == S.INFEASIBLE:
        out["status"] = "infeasible"
        out["message"] = "the model is infeasible"
    elif status == S.UNKNOWN:
        out["status"] = "no-solution"
        out["message"] = "limit hit before any solution"
    else:
        out["status"] = "error"
        out["message"] = f"error: CP-SAT {solver.status_name(status)} {solver.solution_info()}".strip()
    if has:
        vals = [solver.value(x) for x in xs]
        out["values"] = {n: float(x) for n, x in zip(names, vals) if x}
        out["sparse"] = True
        out["objective"] = _num(solver.objective_value + offset) if obj else offset
        out["bound"] = _num(solver.best_objective_bound + offset) if obj else offset
    return _write(args.out, out)


class _Incumbent:
    """CP-SAT solution callback: every improving solution goes atomically to ``path``."""

    def __new__(cls, cp_model, xs, names, offset, path, version, t0):
        class Cb(cp_model.CpSolverSolutionCallback):
            def __init__(self):
                super().__init__()
                self.count = 0

            def on_solution_callback(self):
                self.count += 1
                vals = [self.value(x) for x in xs]
                _write(path, {
                    "status": "feasible", "version": version, "sparse": True,
                    "values": {n: float(v) for n, v in zip(names, vals) if v},
                    "objective": _num(self.objective_value + offset),
                    "bound": _num(self.best_objective_bound + offset),
                    "solutions": self.count, "solve_s": time.perf_counter() - t0,
                    "message": "incumbent from the solution callback",
                })

        return Cb()


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
