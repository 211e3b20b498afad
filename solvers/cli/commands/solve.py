"""``collsynth producers`` and ``collsynth solve`` (design "Contracts: command line").

- ``collsynth producers [--json]``: every producer (name, family, summary, whether
  ``--solver`` applies, drivers) and every solver backend with its availability.
- ``collsynth solve INSTANCE.toml --producer NAME [--solver S] [--driver D] [--time-limit S]
  [--gap G] [--threads K] [--seed N] [--starts K] [--param k=v ...] [--out SCHED.json]``:
  synthesize, verify and price through :func:`collsynth.solvers.pipeline.run`; the JSON has
  the fields of the contract (``instance, producer, solver, driver, status, verified, steps,
  T_L_s, T_B_s, time_sync_s, time_ten_s, time_event_s, lower_bound_s, objective, bound, gap,
  build_s, solve_s, wall_s`` ...). The schedule is written to ``--out`` only if it verified.
  Exit 1 when the status is error, invalid, infeasible or no-solution.
"""

from __future__ import annotations

import argparse
import json

from .... import InputError
from ....instances.instance import load_instance
from ....tens.schedule import write_json
from ... import backends
from ...producers import Options, producers

FAIL = ("error", "invalid", "infeasible", "no-solution")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the producers and solve commands."""
    p = sub.add_parser("producers", help="list producers, drivers and solver backends (with availability)")
    p.set_defaults(func=list_producers)

    s = sub.add_parser("solve", help="synthesize, verify and price a schedule for an instance")
    s.add_argument("instance", help="instance TOML file")
    s.add_argument("--producer", required=True, help="producer name (see `collsynth producers`)")
    s.add_argument("--solver", default="highs", help="solver backend (highs, gurobi, cpsat, scip, glop, pdlp, cbc, ...)")
    s.add_argument("--driver", default=None, help="horizon | early-stop | time-cluster (solver producers)")
    s.add_argument("--time-limit", type=float, default=60.0, help="seconds for the whole run (default 60)")
    s.add_argument("--gap", type=float, default=None, help="relative MIP gap to stop at")
    s.add_argument("--threads", type=int, default=1, help="solver threads (default 1)")
    s.add_argument("--seed", type=int, default=0, help="random seed")
    s.add_argument("--starts", type=int, default=1, help="restarts / seeds for randomised producers")
    s.add_argument("--param", action="append", default=[], metavar="K=V",
                   help="producer parameter (repeatable), e.g. objective=makespan, window=3, binary=true")
    s.add_argument("--out", default=None, help="write the verified schedule JSON here")
    s.set_defaults(func=solve)


def list_producers(args: argparse.Namespace) -> dict:
    """Every producer and every backend with its availability."""
    rows = []
    for name, p in sorted(producers().items()):
        rows.append({"name": name, "family": p.family, "summary": p.summary, "uses_solver": p.uses_solver,
                     "drivers": list(p.drivers)})
    bk = backends.backends()
    lines = ["producers:"]
    for r in rows:
        drv = f" [drivers: {', '.join(r['drivers'])}]" if r["drivers"] else ""
        lines.append(f"  {r['name']:<24} {r['family']:<12} {r['summary']}{drv}")
    lines.append("backends:")
    for b in bk:
        lines.append(f"  {b['name']:<8} {'yes' if b['available'] else 'no ':<4} {b['reason']}")
    return {"producers": rows, "backends": bk, "text": "\n".join(lines)}


def parse_params(items: list[str]) -> dict:
    """``k=v`` strings to a dict; values parse as JSON (numbers, true/false, lists) else strings."""
    out = {}
    for item in items:
        if "=" not in item:
            raise InputError("--param", f"expected K=V, got {item!r}")
        k, v = item.split("=", 1)
        k = k.strip()
        if not k.isidentifier():
            raise InputError("--param", f"bad parameter name {k!r}")
        v = v.strip()
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError:
            if "," in v:
                parts = [p.strip() for p in v.split(",")]
                try:
                    out[k] = [json.loads(p) for p in parts]
                    continue
                except json.JSONDecodeError:
                    pass
            out[k] = v
    return out


def solve(args: argparse.Namespace) -> dict:
    """Run one producer on one instance through the pipeline (produce, verify, price)."""
    from ...pipeline import run

    instance = load_instance(args.instance)
    if args.time_limit is not None and not args.time_limit > 0:
        raise InputError("--time-limit", f"expected a positive number of seconds, got {args.time_limit}")
    if args.gap is not None and not 0 <= args.gap < 1:
        raise InputError("--gap", f"expected a relative gap in [0, 1), got {args.gap}")
    if args.threads < 1:
        raise InputError("--threads", f"expected a positive integer, got {args.threads}")
    prod = producers().get(args.producer)
    if prod is not None and args.driver is not None and args.driver not in prod.drivers:
        allowed = ", ".join(prod.drivers) if prod.drivers else "none"
        raise InputError("--driver", f"{args.producer} does not take driver {args.driver!r} (drivers: {allowed})")
    options = Options(
        solver=backends.canonical(args.solver), driver=args.driver, time_limit=args.time_limit, gap=args.gap,
        threads=args.threads, seed=args.seed, starts=args.starts, params=parse_params(args.param),
    )
    row, schedule = run(instance, args.producer, options)
    if row["status"] == "skipped" and str(row.get("message", "")).startswith("unsupported: "):
        raise InputError(args.instance, f"producer {args.producer} does not support this instance: {row['message'][13:]}")
    if args.out and schedule is not None:
        write_json(schedule, args.out)
        row["out"] = args.out
    if row["status"] in FAIL:
        row["exit"] = 1
    return row
