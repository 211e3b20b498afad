"""``collsynth bench``, ``collsynth tables``, ``collsynth report`` and ``collsynth draw``."""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path

from .... import InputError
from ....outputs import replaced_file, replaced_folder
from ....limits import DEFAULT_TIME_LIMIT_S
from ..checks import RESULTS, ignore_results, items, out_file, out_folder


def register(sub: argparse._SubParsersAction) -> None:
    """Add the batch, tables, report and draw commands."""
    p = sub.add_parser("bench", help="run a batch: instances x producers x solvers x drivers x seeds (resumable)")
    p.add_argument("--suite", help="corpus suite or tag: the instances whose `suites` list it (`collsynth corpus` lists them; default: none, give --instances)")
    p.add_argument("--instances", help="glob of instance TOML files instead of a suite (default: none)")
    p.add_argument("--producers", help="comma-separated producers (default: the suite's list in suites.toml)")
    p.add_argument("--solvers", help="comma-separated solver backends for producers that use one (default: highs)")
    p.add_argument("--drivers", default=None, help="comma-separated drivers for producers that accept them (default: the suite's, else each producer's first)")
    p.add_argument("--seeds", default=None, help="comma-separated seeds, each 0..2**31-1 (default: the suite's, else 0)")
    p.add_argument("--time-limit", type=float, default=None, help=f"per-job solver time limit in seconds (default: the suite's, else {DEFAULT_TIME_LIMIT_S:g})")
    p.add_argument("--param", action="append", default=[], metavar="K=V", help="producer parameter, repeatable; goes to the producers declaring it (default: the suite's)")
    p.add_argument("--executor", default="local", choices=["local", "dask"],
                   help="local worker processes, or a Dask cluster at --address")
    p.add_argument("--address", help="HOST:PORT or tcp://HOST:PORT of a Dask scheduler, with --executor dask (default: none)")
    p.add_argument("--jobs", type=int, default=None, help="jobs at once on the local pool (default: cores)")
    p.add_argument("--store", default=str(RESULTS / "store"), help="results store folder (created; default under ./collsynth-results/, where you run)")
    p.add_argument("--rerun", action="store_true", help="run jobs again even if stored (default: skip them)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (default: a bar on stderr)")
    p.add_argument("--calibration", default=None, metavar="CAL.json",
                   help="after the batch, price the store's runs under the runtime model with this calibration (default: none)")
    p.set_defaults(func=bench)

    t = sub.add_parser("tables", help="regenerate every table and plot from the results store")
    t.add_argument("--store", default=str(RESULTS / "store"), help="results store folder")
    t.add_argument("--out", default=str(RESULTS / "tables"), help="folder for the tables")
    t.add_argument("--plots", default=str(RESULTS / "plots"), help="folder for the plots")
    t.add_argument("--calibration", default=None, metavar="CAL.json",
                   help="add the runtime model's column (and the calibration's name) to runs.csv and runtime.md (default: none)")
    t.add_argument("--seed-tables", action="store_true",
                   help="also regenerate the seeds' analytic tables: OpTree Table I, BFB Tables 4-5, Swing Table 2 (default: off)")
    t.add_argument("--paper", action="store_true",
                   help="also write paper | ours | ratio tables: one per paper-* suite from the store (paper_<suite>), "
                        "and with --seed-tables the seeds' tables in that form (paper_optree_table1, ...) (default: off)")
    t.set_defaults(func=tables)

    r = sub.add_parser("report", help="write a static HTML report of the results store (open index.html)")
    r.add_argument("--store", default=str(RESULTS / "store"), help="results store folder")
    r.add_argument("--out", default=str(RESULTS / "report"), help="folder for the report")
    r.add_argument("--jobs", type=int, default=None, help="processes drawing the pictures (default: cores)")
    r.add_argument("--no-progress", action="store_true", help="no progress bar (default: a bar on stderr)")
    r.add_argument("--calibration", default=None, metavar="CAL.json",
                   help="add the runtime model's column (and the calibration's name) to every instance's runs (default: none)")
    r.set_defaults(func=report)

    d = sub.add_parser("draw", help="draw a schedule: on its TEN, step by step, or its per-step link loads")
    d.add_argument("schedule")
    d.add_argument("instance")
    d.add_argument("--out", required=True, help="output image (.png or .pdf)")
    d.add_argument("--kind", default="auto", choices=["auto", "ten", "steps", "heatmap"],
                   help="ten: on the time-expanded network (tiny schedules); steps: one topology panel per "
                        "step (small ones); heatmap: link load per step (any size); auto: by size")
    d.set_defaults(func=draw)


def _seeds(text: str | None) -> list[int]:
    """``--seeds`` as integers (their range is checked with the plan's)."""
    given = items("--seeds", text)
    try:
        return [int(s) for s in given]
    except ValueError:
        raise InputError("--seeds", f"expected comma-separated integers, got {text!r}") from None


def _store(text: str) -> str:
    """``--store``: a folder name, not empty."""
    if not str(text).strip():
        raise InputError("--store", "expected a results store folder, got ''")
    return text


def bench(args) -> dict:
    """Plan and run a batch; every finished job is committed to the store at once. Every
    option is checked before the plan loads an instance."""
    from ... import batch
    from .solve import parse_params

    seeds = _seeds(args.seeds)
    if args.calibration:  # a bad calibration file is refused before the batch, not after it
        from ....tens.calibration import load_any_calibration
        load_any_calibration(args.calibration)
    if args.jobs is not None and args.jobs < 1:
        raise InputError("--jobs", f"expected a positive integer, got {args.jobs}")
    _store(args.store)
    if args.executor == "dask":
        batch.dask_address(args.address)
    files, jobs = batch.plan_batch(
        args.suite, args.instances, items("--producers", args.producers), items("--solvers", args.solvers),
        items("--drivers", args.drivers), seeds, args.time_limit, parse_params(args.param),
    )
    from ....results import store

    if (Path(args.store) / "runs.sqlite").is_file():  # a damaged store gets no new rows
        store.refuse_damaged(args.store)
    if RESULTS.name in Path(args.store).parts:  # the default results folder: created, and kept out of git
        Path(args.store).mkdir(parents=True, exist_ok=True)
        ignore_results(args.store)
    try:
        summary = batch.execute(
            jobs, args.store, executor=args.executor, workers=args.jobs, address=args.address,
            rerun=args.rerun, progress=not args.no_progress,
        )
    except batch.Interrupted as e:
        raise KeyboardInterrupt(_kept(e.summary, args)) from None
    result = {
        "store": str(args.store), "instances": len(files), "planned": summary.planned,
        "skipped_done": summary.skipped_done, "running_elsewhere": summary.elsewhere, "ran": summary.ran,
        "statuses": summary.statuses, "wall_s": round(summary.wall_s, 3),
    }
    elsewhere = f", {summary.elsewhere} running in another bench on this store" if summary.elsewhere else ""
    result["text"] = (
        f"{summary.ran} runs in {summary.wall_s:.1f} s ({summary.skipped_done} already stored{elsewhere}) -> {args.store}\n"
        + "  ".join(f"{k}: {v}" for k, v in sorted(summary.statuses.items()))
    )
    if args.calibration:
        result["runtime"] = _runtime_rows(args.store, args.calibration)
        result["text"] += "\n" + "\n".join(f"{r['instance']} {r['producer']}: runtime "
                                           + (f"{r['time_runtime_s']:.6g} s" if r["time_runtime_s"] == r["time_runtime_s"]
                                              else str(r["runtime_note"])) + f" ({r['calibration']})"
                                           for r in result["runtime"])
    return result


def _runtime_rows(store_path: str, calibration: str) -> list[dict]:
    """Every stored run's key and runtime columns (:mod:`collsynth.results.runtime_prices`)."""
    from ....results import store
    from ....results.runtime_prices import COLUMNS, runtime_frame

    df = store.load(store_path)
    df = df.join(runtime_frame(df, store_path, calibration))
    keep = ["instance", "producer", "solver", "driver", "seed", *COLUMNS]
    return [{k: (None if k != "time_runtime_s" and v != v else v) for k, v in r.items()}
            for r in df[keep].to_dict("records")]


def _kept(summary, args) -> str:
    """What an interrupted batch kept and the command that finishes it."""
    line = [a for a in getattr(args, "command_line", ["collsynth", "bench"]) if a != "--rerun"]
    return (f"{summary.signal}: kept {summary.ran} finished run(s) in {args.store} "
            f"({summary.skipped_done} stored before); {summary.interrupted} stopped and "
            f"{summary.not_started} not started; resume with: {shlex.join(line)}")


def tables(args) -> dict:
    """Regenerate the tables (Markdown, CSV, LaTeX) and plots (PNG, PDF) from the store, whole
    or not at all (:mod:`collsynth.outputs`): a run that fails midway leaves the old ones."""
    from ....results import figures, render, store

    if not (Path(_store(args.store)) / "runs.sqlite").exists():
        raise InputError(args.store, "no results store here; run `collsynth bench` first (or pass --store)")
    store.refuse_damaged(args.store)
    out_folder("--out", args.out)
    out_folder("--plots", args.plots)
    df = store.load(args.store)
    if args.calibration:
        from ....results.runtime_prices import runtime_frame
        df = df.join(runtime_frame(df, args.store, args.calibration))
    line = render.provenance(df, args.store)
    with replaced_folder(args.out) as out, replaced_folder(args.plots) as plots:  # all or nothing
        staged = render.write_all(df, out, args.store) + figures.write_all(df, plots)
        if args.calibration:
            staged += render.write_table(render.runtime_table(df), out, "runtime", provenance=line)
        seeds = dict(seed_tables()) if args.seed_tables else {}
        for name, table in seeds.items():
            staged += render.write_table(table, out, name, provenance="Provenance: computed by collsynth "
                                         "from the seeds' formulas (no store).")
        if args.paper:
            for name, table in paper_tables(df, seeds):
                staged += render.write_table(table, out, name, provenance=line)
        written = [Path(args.plots if p.is_relative_to(plots) else args.out) / p.relative_to(
            plots if p.is_relative_to(plots) else out) for p in staged]
    return {"runs": len(df), "written": [str(p) for p in written],
            "text": f"{len(df)} runs -> {len(written)} files under {args.out} and {args.plots}"}


def paper_instances(suite: str) -> list:
    """The instances of ``suite`` that carry published numbers (``[[expect.paper]]``)."""
    import tomllib

    from ....instances import load_instance
    from ... import batch

    out = []
    for path in batch.select_instances(suite, None):
        if tomllib.loads(path.read_text()).get("expect", {}).get("paper"):
            out.append(load_instance(path))
    return out


def paper_tables(df, seeds: dict | None = None):
    """paper | ours | ratio tables (:mod:`collsynth.results.paper`): one per ``paper-*`` suite
    whose instances carry ``[[expect.paper]]`` entries, from the stored runs ``df``; given the
    computed ``seeds`` tables (:func:`seed_tables`) also OpTree Table I, Swing Table 2 and BFB
    Tables 4-5 in the same form. BFB Table 4 is recomputed at M = 2^20 B, the size its printed
    lower bound (267.6 us = 2 (5 alpha + 1023/1024 M/B)) implies."""
    from ....results import paper
    from ... import batch

    for suite in sorted(batch.suites()):
        if suite.startswith("paper-"):
            instances = paper_instances(suite)
            if instances:
                yield f"paper_{suite.removeprefix('paper-')}", paper.suite_table(df, instances)
    if not seeds:
        return
    from ...bfb import finder

    yield "paper_optree_table1", paper.optree_rows(seeds["seed_optree_table1"])
    yield "paper_swing_table2", paper.swing_rows(seeds["seed_swing_table2"])
    yield "paper_bfb_table4", paper.bfb_table4_rows(finder.table_pareto(1024, 4, message=1 << 20), 1 << 20)
    yield "paper_bfb_table5", paper.bfb_table5_rows(seeds["seed_bfb_table5"])


def report(args) -> dict:
    """Write the static HTML report of the store (:mod:`collsynth.results.report`)."""
    from ....results import report as site, store

    if not (Path(_store(args.store)) / "runs.sqlite").exists():
        raise InputError(args.store, "no results store here; run `collsynth bench` first (or pass --store)")
    if args.jobs is not None and args.jobs < 1:
        raise InputError("--jobs", f"expected a positive integer, got {args.jobs}")
    store.refuse_damaged(args.store)
    out_folder("--out", args.out)
    cal = None
    if args.calibration:  # a bad calibration file is refused before anything is drawn
        from ....tens.calibration import load_any_calibration
        cal = load_any_calibration(args.calibration)
    done = site.build(args.store, args.out, jobs=args.jobs or os.cpu_count() or 1, progress=not args.no_progress,
                      calibration=cal)
    priced = f"; runtime column priced by calibration {cal.name}" if cal is not None else ""
    return {**done, "text": f"{done['pages']} instance pages, {done['pictures']} pictures{priced} -> open {done['index']}"}


def seed_tables():
    """The seeds' tables that need no batch run, computed by their producers' modules:
    OpTree Table I (Dai et al., ICC 2023), BFB Tables 4 and 5 (Zhao et al., NSDI 2025, Section 5.4, via the finder),
    Swing Table 2 deficiencies measured on tori D = 1..4 (De Sensi et al., NSDI 2024)."""
    import pandas as pd

    from ...reports import deficiency
    from ...closed_form import optical
    from ...bfb import finder

    yield "seed_optree_table1", pd.DataFrame(optical.optree_table(1024, 64))
    yield "seed_bfb_table4", finder.table_pareto(1024, 4)
    yield "seed_bfb_table5", finder.table_small(range(5, 13), 4)
    yield "seed_swing_table2", deficiency.deficiency_table()


def draw(args) -> dict:
    """Verify the schedule, then draw it in the view its size suits (or the one asked for)."""
    from ....results import pictures
    from .schedules import load_verified

    out = out_file("--out", args.out)
    if out.suffix not in (".png", ".pdf"):
        raise InputError("--out", f"expected a .png or .pdf file name, got {args.out!r}")
    sched, inst, refusal = load_verified(args, "draw")
    if refusal:
        return refusal
    with replaced_file(out) as staged:
        kind = pictures.draw(sched, inst, staged, args.kind)
    return {"verified": True, "kind": kind, "out": str(out), "text": f"wrote {out} ({kind})"}
