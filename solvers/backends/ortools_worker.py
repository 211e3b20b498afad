"""OR-Tools worker: solve one MPS file in THIS (child) process and write the result as JSON.

Run by :mod:`collsynth.solvers.backends` as::

    python -m collsynth.solvers.backends.ortools_worker MODEL.mps OUT.json --solver sat|scip|glop|pdlp
        [--time-limit S] [--deadline AT] [--gap G] [--threads K] [--seed N] [--start START.json]
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
through MPSolver has no such callback: it relies on its own time limit, and a killed SCIP child
loses its incumbent.

``--deadline AT`` is the run's deadline as a ``time.monotonic()`` instant (one clock for every
process of the host): the solver's time limit is what is left of it once the model is read,
minus ``--readback`` seconds to write the result; the parent kills this process at that
deadline.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

from .numbers import finite


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


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="ortools_worker")
    ap.add_argument("mps")
    ap.add_argument("out")
    ap.add_argument("--solver", required=True, choices=("sat", "scip", "glop", "pdlp"))
    ap.add_argument("--time-limit", type=float, default=None)
    ap.add_argument("--deadline", type=float, default=None, help="time.monotonic() instant to stop by")
    ap.add_argument("--readback", type=float, default=0.0, help="seconds kept before the deadline to write the result")
    ap.add_argument("--gap", type=float, default=None)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", default=None, help="JSON {variable name: value}: a MIP start (hints)")
    ap.add_argument("--incumbent", default=None, help="CP-SAT: write each improving solution here")
    ap.add_argument("--debug-sleep", type=float, default=0.0, help="sleep before solving (tests)")
    ap.add_argument("--debug-crash", action="store_true", help="abort the process (tests)")
    return ap


# what each solver's final status means: (our status, has a solution, message)
_OUTCOMES = {
    "optimal": ("optimal", True, None),
    "feasible": ("feasible", True, "limit hit; incumbent kept"),
    "infeasible": ("infeasible", False, "the model is infeasible"),
    "unbounded": ("error", False, "error: the model is unbounded"),
    "unknown": ("no-solution", False, "limit hit before any solution"),
}


def _record_status(out: dict, outcome: str, detail: str) -> bool:
    """Put the status and message of ``outcome`` (a key of ``_OUTCOMES``, else an error with
    ``detail``) into ``out``; True when the solver has a solution."""
    status, has, message = _OUTCOMES.get(outcome, ("error", False, f"error: {detail}".strip()))
    out["status"] = status
    if message:
        out["message"] = message
    return has


def main(argv=None) -> int:
    """Parse arguments, solve, write the JSON result; exit 0 unless the file cannot be written.

    OR-Tools is imported here, in the child process only (it cannot share a process with
    highspy)."""
    args = _parser().parse_args(argv)
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
    if args.deadline is not None:  # the time left once the model is read, not counted from the parent's call
        left = max(0.0, args.deadline - time.monotonic() - args.readback)
        args.time_limit = left if args.time_limit is None else min(args.time_limit, left)
    if args.solver == "sat" and _solve_cpsat(model, args, start, out):
        return _write(args.out, out)
    _solve_model_builder(mb, model, args, start, out)
    return _write(args.out, out)


def _solve_model_builder(mb, model, args, start: dict, out: dict) -> None:
    """Solve with the model_builder solver ``args.solver`` (SCIP, GLOP, PDLP, or CP-SAT without
    callback); the result goes into ``out``."""
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
        return
    if args.time_limit is not None:
        solver.set_time_limit_in_seconds(args.time_limit)
    params = _params(args.solver, args.threads, args.seed, args.gap)
    if params:
        solver.set_solver_specific_parameters(params)
    t0 = time.perf_counter()
    status = solver.solve(model)
    out["solve_s"] = time.perf_counter() - t0
    S = mb.SolveStatus
    outcome = {S.OPTIMAL: "optimal", S.FEASIBLE: "feasible", S.INFEASIBLE: "infeasible",
               S.UNBOUNDED: "unbounded", S.NOT_SOLVED: "unknown"}.get(status, "")
    if _record_status(out, outcome, f"{status.name} {solver.status_string or ''}"):
        values = solver.values(model.get_variables())
        names = [v.name for v in model.get_variables()]
        out["values"] = {n: float(x) for n, x in zip(names, values.tolist())}
        out["objective"] = finite(solver.objective_value)
        out["bound"] = finite(solver.best_objective_bound)
        if out["status"] == "optimal" and args.solver in ("glop", "pdlp"):
            out["bound"] = out["objective"]


def _integral(xs) -> bool:
    return all(abs(x - round(x)) <= 1e-9 for x in xs)


def _cp_model(cp_model, proto):
    """The CpModel of a model_builder proto: ``(model, variables, has objective, offset)``,
    or None when a constraint has a non-integer coefficient."""
    if not all(_integral(c.coefficient) for c in proto.constraint):
        return None
    big = float(1 << 40)
    cp = cp_model.CpModel()
    xs = []
    for v in proto.variable:
        lb = -big if not math.isfinite(v.lower_bound) or v.lower_bound < -big else v.lower_bound
        ub = big if not math.isfinite(v.upper_bound) or v.upper_bound > big else v.upper_bound
        xs.append(cp.new_int_var(math.ceil(lb - 1e-9), math.floor(ub + 1e-9), v.name))
    for c in proto.constraint:
        lo = -big if not math.isfinite(c.lower_bound) else c.lower_bound
        hi = big if not math.isfinite(c.upper_bound) else c.upper_bound
        expr = cp_model.LinearExpr.weighted_sum([xs[i] for i in c.var_index], [int(round(k)) for k in c.coefficient])
        cp.add_linear_constraint(expr, math.ceil(lo - 1e-9), math.floor(hi + 1e-9))
    obj = [(x, v.objective_coefficient) for x, v in zip(xs, proto.variable) if v.objective_coefficient]
    if obj:
        coefs = [k for _, k in obj]
        if _integral(coefs):
            coefs = [int(round(k)) for k in coefs]
        expr = cp_model.LinearExpr.weighted_sum([x for x, _ in obj], coefs)
        cp.maximize(expr) if proto.maximize else cp.minimize(expr)
    return cp, xs, bool(obj), float(proto.objective_offset)


def _solve_cpsat(model, args, start: dict, out: dict) -> bool:
    """Solve with CP-SAT on a CpModel built from ``model`` (a model_builder Model), writing each
    improving solution to ``args.incumbent``; the result goes into ``out``.

    False when the model has non-integer coefficients (the caller then uses the model_builder
    path, without callback).
    """
    from ortools.sat.python import cp_model

    built = _cp_model(cp_model, model.export_to_proto())
    if built is None:
        return False
    cp, xs, has_obj, offset = built
    if start:
        by_name = {x.name: x for x in xs}
        hinted = [(by_name[nm], val) for nm, val in start.items() if nm in by_name]
        for x, val in hinted:
            cp.add_hint(x, int(round(float(val))))
        out["start_values"] = len(hinted)
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
    cb = _Incumbent(cp_model, xs, names, offset, args.incumbent, out["version"], t0) if args.incumbent else None
    status = solver.solve(cp, cb)
    out["solve_s"] = time.perf_counter() - t0
    outcome = {cp_model.OPTIMAL: "optimal", cp_model.FEASIBLE: "feasible", cp_model.INFEASIBLE: "infeasible",
               cp_model.UNKNOWN: "unknown"}.get(status, "")
    if _record_status(out, outcome, f"CP-SAT {solver.status_name(status)} {solver.solution_info()}"):
        vals = [solver.value(x) for x in xs]
        out["values"] = {n: float(x) for n, x in zip(names, vals) if x}
        out["sparse"] = True
        out["objective"] = finite(solver.objective_value + offset) if has_obj else offset
        out["bound"] = finite(solver.best_objective_bound + offset) if has_obj else offset
    return True


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
                    "objective": finite(self.objective_value + offset),
                    "bound": finite(self.best_objective_bound + offset),
                    "solutions": self.count, "solve_s": time.perf_counter() - t0,
                    "message": "incumbent from the solution callback",
                })

        return Cb()


def _write(path: str, data: dict) -> int:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
