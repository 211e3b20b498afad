"""``collsynth solve`` (``docs/results.md``; ``collsynth producers`` lists what it runs).

- ``collsynth solve INSTANCE.toml --producer NAME [--solver S] [--driver D] [--time-limit S]
  [--gap G] [--threads K] [--seed N] [--starts K] [--param k=v ...] [--out SCHED.json]``:
  synthesize, verify and price through :func:`collsynth.solvers.pipeline.run`; the JSON is
  ``{"instance", "producers", "rows": [row], "out"}`` (the shape of several producers: one
  shape whatever their number); the row has the fields of the contract (``instance, producer, solver, driver, status, verified, steps,
  T_L_s, T_B_s, time_sync_s, time_ten_s, time_event_s, lower_bound_s, objective, bound, gap,
  build_s, solve_s, wall_s`` ..., and the per-model bounds ``lower_bound_ten_s``,
  ``lower_bound_event_s``, ``lower_bound_timesteps`` with ``bound_source``). The schedule is
  written to ``--out`` only if it verified. Names are checked before anything runs (producer, solver, driver, parameters: an unknown
  one or a malformed value is bad input, exit 2); ``--solver`` for a producer that uses no
  solver is refused. Exit 1 when no verified schedule came out (error, invalid, infeasible,
  no-solution, a solver missing or over its licence).
- ``collsynth solve INSTANCE.toml --producer a,b,c [...]``: every producer in turn
  (:func:`collsynth.solvers.compare.compare`: ``--solver`` to those that use one, ``--driver``
  to those that take it, each ``--param`` to those declaring it) and a comparison table:
  ``rows`` holds each producer's fields as above. A producer that does not support the
  instance is a ``skipped`` row; exit 1 when any other gave no verified schedule. With
  ``--out S.json`` each verified schedule goes to ``S.<producer>.json``.
  A timeout (status ``timeout``) exits 1 too. The run (model builds, bounds, verification
  and pricing included) ends within ``--time-limit`` plus :data:`collsynth.limits.GRACE_S`;
  an instance too big for the memory budget is refused (exit 2) before anything is allocated.

Every output says what its statuses mean, from :class:`~collsynth.tens.status.Status`: one
run's row carries ``status_meaning``; the comparison's text ends with the legend of the
statuses it shows.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from .... import InputError
from ....limits import DEFAULT_TIME_LIMIT_S, GRACE_S, HARD_MARGIN_S, TooBig, watchdog
from ....instances import size
from ....instances.instance import load_instance
from ....tens import compact_forms
from ....tens.status import Status, legend
from ...backends import names as backend_names
from ...producers import MAX_THREADS, MAX_TIME_LIMIT_S, Options, check_params, check_seed, check_threads, \
    check_time_limit, get, planned
from ..checks import items, out_file


def register(sub: argparse._SubParsersAction) -> None:
    """Add the solve command."""
    s = sub.add_parser("solve", help="synthesize, verify and price a schedule for an instance")
    s.add_argument("instance", help="instance TOML file")
    s.add_argument("--producer", required=True,
                   help="producer name (see `collsynth producers`), or several comma-separated to compare them in one table")
    s.add_argument("--solver", default=None,
                   help="solver backend for producers that use one (default highs; gurobi, cpsat, scip, glop, pdlp, cbc, ...)")
    s.add_argument("--driver", default=None,
                   help="horizon | early-stop | time-cluster (producers that take one; default: the producer's first)")
    s.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT_S,
                   help=f"seconds for the whole run, at most {MAX_TIME_LIMIT_S:g} (a year) (default {DEFAULT_TIME_LIMIT_S:g})")
    s.add_argument("--gap", type=float, default=None, help="relative MIP gap to stop at (default: none, solve to the solver's own tolerance)")
    s.add_argument("--threads", type=int, default=1, help=f"solver threads, 1..{MAX_THREADS} (default 1)")
    s.add_argument("--seed", type=int, default=0, help="random seed, 0..2**31-1")
    s.add_argument("--starts", type=int, default=1, help="restarts / seeds for randomised producers")
    s.add_argument("--param", action="append", default=[], metavar="K=V",
                   help="producer parameter, repeatable; `collsynth producers` lists each producer's, e.g. window=3 "
                        "(default: none, the producer's own defaults)")
    s.add_argument("--verbose", action="store_true",
                   help="stream the solver's log and the driver's progress (horizons tried, status, bound, time left) "
                        "on stderr (default: off)")
    s.add_argument("--calibration", default=None, metavar="CAL.json",
                   help="also price the schedule under the runtime model with this calibration (collsynth calibrate; default: none)")
    s.add_argument("--out", default=None, help="write the verified schedule JSON here; with several producers S.<producer>.json (default: not written)")
    s.set_defaults(func=solve)


def _verbose() -> None:
    """``--verbose``: the solver's log (HiGHS writes it to stderr) and the progress the drivers
    log (``logging`` at INFO) on stderr."""
    import logging
    import os
    import sys

    os.environ["COLLSYNTH_VERBOSE"] = "1"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(relativeCreated)8.0f ms  %(name)s: %(message)s"))
    log = logging.getLogger("collsynth")
    log.addHandler(handler)
    log.setLevel(logging.INFO)


def parse_params(items: list[str]) -> dict[str, str]:
    """``K=V`` strings to ``{K: V}`` (values stay text until a producer's declarations type
    them, see :func:`collsynth.solvers.producers.check_params`); a malformed item or a key
    given twice is an InputError."""
    out: dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise InputError("--param", f"expected K=V, got {item!r}")
        k, v = (x.strip() for x in item.split("=", 1))
        if not k.isidentifier():
            raise InputError("--param", f"bad parameter name {k!r}")
        if k in out:
            raise InputError(f"--param {k}", "given twice")
        out[k] = v
    return out


def check_limits(args: argparse.Namespace) -> None:
    """``--time-limit``, ``--gap``, ``--threads`` and ``--seed`` in range and ``--out`` a file
    that can be written (in an existing folder), else an InputError."""
    check_time_limit(args.time_limit)
    if args.gap is not None and not 0 <= args.gap < 1:
        raise InputError("--gap", f"expected a relative gap in [0, 1), got {args.gap}")
    check_threads(args.threads)
    check_seed(args.seed)
    if args.out is not None:
        out_file("--out", args.out)


def solve(args: argparse.Namespace) -> dict:
    """Run one producer on one instance through the pipeline (produce, verify, price); several
    comma-separated producers: :func:`solve_many`."""
    if args.verbose:
        _verbose()
    from ...compare import split_names  # the run's modules, imported when it runs (--help stays light)
    from ...compiling import compile_ahead, prepare_run
    from ...pipeline import run

    names = split_names(items("--producer", args.producer))
    if len(names) > 1:
        return solve_many(args, names)
    prod = get(args.producer)
    if args.solver is not None and not prod.uses_solver:
        raise InputError("--solver", f"{prod.name} uses no solver")
    solver = backend_names.check_name(args.solver) if args.solver is not None else "highs"
    driver = prod.driver_for(args.driver)
    params = check_params(prod, parse_params(args.param))
    check_limits(args)
    instance = load_instance(args.instance)
    options = Options(
        solver=solver, driver=driver or None, time_limit=args.time_limit, gap=args.gap,
        threads=args.threads, seed=args.seed, starts=args.starts, params=params,
    )
    hard = args.time_limit + GRACE_S + HARD_MARGIN_S
    try:
        size.check_run(instance, planned(prod, instance, params))  # a run too big is refused before anything compiles
        ahead = compile_ahead(instance, [prod.name])  # a cold cache: over the cores
        kernels = prepare_run(instance, prod.name)  # the run's one decision, before its clock and its watchdog
        kernels = replace(kernels, compile_s=ahead + kernels.compile_s)
        with watchdog(hard, f"{args.instance}: killed after {hard:g} s: the run did not stop at its time limit"):
            row, schedule = run(instance, prod.name, options, kernels)
    except TooBig as e:
        raise InputError(f"{args.instance}: {e.where}", e.what) from None
    if row["status"] == Status.SKIPPED and str(row.get("message", "")).startswith("unsupported: "):
        raise InputError(args.instance, f"producer {args.producer} does not support this instance: {row['message'][13:]}")
    written = {}
    if args.out and schedule is not None:
        write_json(schedule, args.out)
        written[prod.name] = args.out
    if args.calibration:
        add_runtime(row, schedule, instance, args.calibration)
    return _result(instance, [prod.name], [row], written)


def add_runtime(row: dict, schedule, instance, calibration: str) -> None:
    """The runtime columns of ``row`` (:mod:`collsynth.results.runtime_prices`): the
    schedule's time under the calibrated runtime model and the calibration's name."""
    from ....results.runtime_prices import runtime_fields
    from ....tens.calibration import load_any_calibration

    if compact_forms.form_of(schedule) is not None:  # the runtime model reads explicit sends
        row["message"] = f"{row.get('message', '')}; not priced under runtime: kept as trees".lstrip("; ")
        return
    row.update(runtime_fields(schedule if row.get("verified") else None, instance, load_any_calibration(calibration)))


def write_json(schedule, path) -> None:
    """The schedule's JSON file: its sends (:func:`collsynth.tens.schedule.write_json`), or the
    trees plus the pipeline rule as kept (:func:`collsynth.tens.pipelined_trees.write_json`)."""
    from ....tens import schedule as sends

    (compact_forms.form_of(schedule) or sends).write_json(schedule, path)


def solve_many(args: argparse.Namespace, names: list[str]) -> dict:
    """Several producers on one instance, one row each, and the comparison table."""
    from ...compare import compare
    from ...compiling import compile_ahead

    check_limits(args)
    instance = load_instance(args.instance)
    compile_ahead(instance, [get(n).name for n in names])  # a cold cache: over the cores, before the first run
    options = Options(
        solver=args.solver or "highs", driver=args.driver, time_limit=args.time_limit, gap=args.gap,
        threads=args.threads, seed=args.seed, starts=args.starts, params=parse_params(args.param),
    )
    runs = compare(instance, names, options, solver_given=args.solver is not None)
    rows = [row for row, _ in runs]
    written = {}
    if args.out:
        out = Path(args.out)
        for row, schedule in runs:
            if schedule is not None:
                path = out.with_name(f"{out.stem}.{row['producer']}{out.suffix or '.json'}")
                write_json(schedule, path)
                written[row["producer"]] = str(path)
    if args.calibration:
        for row, schedule in runs:
            add_runtime(row, schedule, instance, args.calibration)
    return _result(instance, names, rows, written)


def _result(instance, names: list[str], rows: list[dict], written: dict[str, str]) -> dict:
    """``solve``'s result, one shape for one producer or several: the fields of the best row
    (:func:`best_row`) at the top level, as the command-line contract names them, then
    ``producers``, ``best`` (its producer), ``rows`` (one per producer, the fields of
    ``docs/results.md``), ``out`` (producer -> the schedule file written, when any) and the text
    table; exit 1 when a producer that supports the instance gave no verified schedule."""
    unsupported = [r for r in rows if r["status"] == Status.SKIPPED and str(r["message"]).startswith("unsupported: ")]
    failed = [r for r in rows if not r["verified"] and r not in unsupported]
    lines = [f"{instance.name}: {', '.join(names)} (steps: communication steps; TEN timesteps for the producers "
             "counting them; x bound: sync time over its lower bound)",
             comparison_table(rows, instance.collectives[0].message_bytes)]
    lines += [f"{r['producer']}: {r['status']}: {r['message']}" for r in rows if r.get("message")]
    lines += _runtime_lines(rows)
    lines += ["statuses: " + line for line in legend({r["status"] for r in rows})]
    for r in rows:
        r["status_meaning"] = Status(r["status"]).doc
    lines += [f"wrote {path}" for path in written.values()]
    best = best_row(rows)
    result = {**best, "instance": instance.name, "producers": names, "best": best["producer"], "rows": rows,
              "text": "\n".join(lines)}
    if written:
        result["out"] = written
    if failed:
        result["exit"] = 1
    return result


def _runtime_lines(rows: list[dict]) -> list[str]:
    """With ``--calibration``: which calibration priced the table's runtime column, and each
    row's runtime note (why it is not priced, or the grid its program was exported on)."""
    names = sorted({str(r["calibration"]) for r in rows if r.get("calibration")})
    if not names:
        return []
    return [f"runtime: the runtime model under calibration {', '.join(names)}"] + [
        f"{r['producer']}: runtime: {r['runtime_note']}" for r in rows if r.get("runtime_note")]


def best_row(rows: list[dict]) -> dict:
    """The verified row fastest under the event model (then the sync model), else the first row.

    >>> best_row([{"producer": "a", "verified": True, "time_event_s": 2.0, "time_sync_s": 1.0},
    ...           {"producer": "b", "verified": True, "time_event_s": 1.0, "time_sync_s": 3.0}])["producer"]
    'b'
    """
    def key(r: dict) -> tuple:
        return tuple(float("inf") if r.get(k) is None else r[k] for k in ("time_event_s", "time_sync_s"))

    verified = [r for r in rows if r.get("verified")]
    return min(verified, key=key) if verified else rows[0]


def human_time(seconds: float | None) -> str:
    """A duration with its unit (ns, µs, ms, s), three significant figures; ``-`` when missing.

    >>> human_time(5.499999999999999e-05), human_time(0.0123), human_time(2.5), human_time(None)
    ('55 µs', '12.3 ms', '2.5 s', '-')
    """
    if seconds is None or seconds != seconds:
        return "-"
    if seconds == 0:
        return "0 s"
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")):
        if abs(seconds) >= scale or unit == "ns":
            return f"{seconds / scale:.3g} {unit}"
    return "-"


def bandwidth(message_bytes: float | None, seconds: float | None) -> str:
    """Algorithm bandwidth, message bytes over time, in GB/s (``-`` when either is missing).

    >>> bandwidth(1 << 20, 1e-4)
    '10.5 GB/s'
    """
    if not message_bytes or not seconds:
        return "-"
    return f"{message_bytes / seconds / 1e9:.3g} GB/s"


def comparison_table(rows: list[dict], message_bytes: float | None = None, width: int = 240) -> str:
    """The rows as a table (rich) with units: the producer and how it ran, the status with the
    bound that proved it, the schedule's length in its own unit (communication steps, or TEN
    timesteps for the producers that count them), each cost model's time, the synchronous
    lower bound and the time over it, the algorithm bandwidth, and the run's and compiling's
    times; with a calibration (``solve --calibration``) the runtime model's time after the others.

    >>> row = {"producer": "ring", "status": "constructed", "steps": 7, "time_sync_s": 3e-6, "lower_bound_s": 2e-6}
    >>> "1.5" in comparison_table([row]) and "3 µs" in comparison_table([row])
    True
    >>> "runtime" in comparison_table([{**row, "time_runtime_s": 5e-6, "calibration": "c"}])
    True
    """
    import io

    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("producer")
    table.add_column("solver / driver")
    table.add_column("status")
    table.add_column("steps", justify="right")
    table.add_column("TEN timesteps", justify="right")
    models = ("sync", "ten", "event") + (("runtime",) if any("calibration" in r for r in rows) else ())
    for name in models:
        table.add_column(name, justify="right")
    table.add_column("bound (sync)", justify="right")
    table.add_column("x bound", justify="right")
    table.add_column("algbw", justify="right")
    table.add_column("run", justify="right")
    table.add_column("compile", justify="right")
    table.add_column("bound's argument", no_wrap=True)
    for row in rows:
        sync, bound = row.get("time_sync_s"), row.get("lower_bound_s")
        in_timesteps = row.get("units") == "timesteps"
        steps = "-" if row.get("steps") is None else str(row["steps"])
        how = " / ".join(x for x in (row.get("solver"), row.get("driver")) if x) or "-"
        table.add_row(
            str(row.get("producer")), how, str(row.get("status")),
            "-" if in_timesteps else steps, steps if in_timesteps else "-",
            *(human_time(row.get(f"time_{m}_s")) for m in models),
            human_time(bound), f"{sync / bound:.4g}" if sync is not None and bound else "-",
            bandwidth(message_bytes, sync), human_time(row.get("wall_s")), human_time(row.get("compile_s")),
            str(row.get("bound_source") or "-"),
        )
    out = io.StringIO()
    Console(file=out, width=width, no_color=True, highlight=False, soft_wrap=False).print(table)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines())
