"""Proofs on the whole corpus before and after the bounds work: per producer, the share of
verified rows whose result meets its own bound, and the rows still open with the reason.

Run as a script (``python benchmarks/bench_corpus_proofs.py --help``): with ``--run`` it first
runs the same batch (``collsynth bench --instances GLOB --producers ... --time-limit T --jobs 1``)
with two code versions, each through its own CLI in its own checkout, into two stores; then
(or from existing stores) it prints and writes the tables ``corpus_proofs`` (per producer,
before | after) and ``corpus_open`` (the after store's rows without gap 0, each with a reason)
under ``--out`` (default ``results/tables``) through :func:`collsynth.results.render.write_table`.

A row meets its bound ("gap 0") when its result in its own units (``objective``: timesteps,
steps, or M/B for BFB) is within :data:`collsynth.results.render.GAP_TOL` of its own bound
(``bound``), or, for producers that report no bound of their own (closed forms, whose steps
may be logical sends routed over several links), when its synchronous alpha-beta time meets
the instance's bound in seconds (``time_sync_s`` <= ``lower_bound_s``). ``optimal`` counts the rows
the run itself declared proven (``status``). The producers are the ``quick`` suite's
(``instances/corpus/suites.toml``). The old version must be a plain checkout whose package
is importable as ``collsynth`` through ``--before-path`` (a folder holding a ``collsynth`` link
to the checkout, as ``git worktree add`` plus one symlink gives).

Example::

    git worktree add /tmp/before 100176b && mkdir -p /tmp/before-pkg && ln -s /tmp/before /tmp/before-pkg/collsynth
    python benchmarks/bench_corpus_proofs.py --run --instances '/tmp/corpus-sel/*.toml' --time-limit 4 \\
        --before-checkout /tmp/before --before-path /tmp/before-pkg \\
        --before-store /tmp/corpus-before --after-store /tmp/corpus-after
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd

from collsynth.results import render, store

ROOT = Path(__file__).resolve().parent.parent
SUITES = ROOT / "instances" / "corpus" / "suites.toml"
NO_CLAIM = ("constructed", "heuristic")  # statuses of producers that claim nothing about optimality


def quick_producers() -> list[str]:
    """The ``quick`` suite's producers (``instances/corpus/suites.toml``)."""
    return list(tomllib.loads(SUITES.read_text())["quick"]["producers"])


def run_batch(checkout: Path, path: str, pattern: str, producers: list[str], time_limit: float,
              store_dir: str) -> dict:
    """``collsynth bench`` of the checkout at ``checkout`` (importable through ``path``) on
    the instances of ``pattern``, one job at a time, into ``store_dir``: exit code, wall and
    child CPU seconds, load average, the last lines it printed."""
    cmd = [sys.executable, "-m", "collsynth.solvers.cli", "bench", "--instances", pattern,
           "--producers", ",".join(producers), "--time-limit", f"{time_limit:g}", "--jobs", "1",
           "--store", store_dir, "--no-progress"]
    env = {**os.environ, "PYTHONPATH": path}
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=checkout, env=env, capture_output=True, text=True)
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"checkout": str(checkout), "exit": done.returncode, "wall_s": round(time.perf_counter() - t0, 1),
            "cpu_s": round(cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime, 1),
            "loadavg": os.getloadavg(), "said": (done.stdout + done.stderr).strip().splitlines()[-3:]}


def meets_bound(df: pd.DataFrame) -> pd.Series:
    """Per row: its result meets its own bound (module doc); NaN where neither its own bound
    nor the synchronous time and bound exist."""
    obj = pd.to_numeric(df["objective"], errors="coerce")
    own = pd.to_numeric(df["bound"], errors="coerce")
    sync = pd.to_numeric(df["time_sync_s"], errors="coerce")
    sync_lb = pd.to_numeric(df["lower_bound_s"], errors="coerce")
    by_own = (obj <= own * (1 + render.GAP_TOL)).where(obj.notna() & own.notna())
    by_sync = (sync <= sync_lb * (1 + render.GAP_TOL)).where(sync.notna() & sync_lb.notna())
    return by_own.where(by_own.notna(), by_sync)


def per_producer(df: pd.DataFrame) -> pd.DataFrame:
    """Per producer: rows, verified rows, rows declared ``optimal``, verified rows with gap 0
    (:func:`meets_bound`), their share of the verified rows and of all rows (a producer that
    verifies more rows can lower the first share while proving more)."""
    rows = []
    for prod, g in df.groupby("producer"):
        ok = g[g["verified"].astype(bool)]
        met = meets_bound(ok)
        rows.append({"producer": prod, "rows": len(g), "verified": len(ok),
                     "optimal": int((ok["status"] == "optimal").sum()), "gap0": int((met == True).sum()),  # noqa: E712
                     "gap0_share": float((met == True).sum() / len(ok)) if len(ok) else np.nan,  # noqa: E712
                     "gap0_of_rows": float((met == True).sum() / len(g))})  # noqa: E712
    return pd.DataFrame(rows)


def compare(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """``corpus_proofs``: per producer, :func:`per_producer` before and after side by side,
    and the change of the gap-0 share."""
    b, a = per_producer(before), per_producer(after)
    out = b.merge(a, on="producer", how="outer", suffixes=(" before", " after")).sort_values("producer")
    out["gap0_share change"] = out["gap0_share after"] - out["gap0_share before"]
    return out.reset_index(drop=True)


def _reason(row: pd.Series, inst: pd.DataFrame) -> tuple[str, str]:
    """Why a verified row does not meet its bound: (kind, details); see :func:`open_rows`."""
    own = pd.notna(row["bound"])
    same = inst[inst["verified"].astype(bool)]
    same = same[(same["units"] == row["units"]) & same["bound"].notna()] if own else same
    met = same[meets_bound(same if own else same.assign(bound=np.nan)) == True]  # noqa: E712
    col, units = ("objective", row["units"]) if own else ("time_sync_s", "s sync")
    best = pd.to_numeric(same[col], errors="coerce").min()
    tight = f"the bound is met by {', '.join(sorted(met['producer']))}" if len(met) else \
        f"no producer meets it (best {best:.4g} {units})"
    msg = str(row["message"] or "")
    if row["status"] in NO_CLAIM:
        return row["status"], f"no optimality claim; {tight}"
    if row["status"] == "optimal":
        return "proven in another unit", f"{row['bound_source']}; the bound in its own {row['units']} is weaker"
    if "decomposition is not proven" in msg or "max of reduce_scatter" in msg:
        return "allreduce RS + AG", f"reduce-scatter + allgather with a barrier, not proven; {tight}"
    if "fractional schedule" in msg:
        return "relaxation rounding", f"its realised schedule exceeds its LP bound; {tight}"
    if any(s in msg for s in ("time limit", "completed in time", "not finished", "would take")):
        return "solver time limit", f"shorter horizons not decided; {tight}"
    return "other", f"{msg[:80]}; {tight}"


def open_rows(df: pd.DataFrame) -> pd.DataFrame:
    """``corpus_open``: verified rows that do not meet their bound, and rows without a
    verified schedule (status and message), each with a reason: a producer that claims
    nothing (constructed, heuristic), an allreduce decomposition, a relaxation's rounding,
    a solver that ran out of time, whether another producer meets the same bound (the bound
    is tight there) or none does (the bound may be weak, or the problem open)."""
    rows = []
    verified = df["verified"].astype(bool)
    met = meets_bound(df[verified])
    for i, row in df.iterrows():
        inst = df[df["instance"] == row["instance"]]
        if verified[i] and met.get(i) == True:  # noqa: E712
            continue
        kind, why = _reason(row, inst) if verified[i] else (
            f"no schedule ({row['status']})", str(row["message"] or "")[:100])
        rows.append({"instance": row["instance"], "producer": row["producer"], "status": row["status"],
                     "result": row["objective"], "bound": row["bound"], "units": row["units"],
                     "time_sync_s": row["time_sync_s"], "lower_bound_s": row["lower_bound_s"],
                     "kind": kind, "reason": why})
    out = pd.DataFrame(rows, columns=["instance", "producer", "status", "result", "bound", "units", "time_sync_s",
                                      "lower_bound_s", "kind", "reason"])
    return out.sort_values(["producer", "instance"]).reset_index(drop=True)


def reason_counts(table: pd.DataFrame) -> pd.DataFrame:
    """``corpus_open_kinds``: open rows per producer and kind of reason, and how many of them
    have a bound some other producer meets (there the bound is tight and the row's method is
    what falls short) or none does (the bound may be weak, or the optimum is unknown)."""
    met = table["reason"].str.contains("the bound is met by")
    none = table["reason"].str.contains("no producer meets it")
    out = table.assign(bound_met_elsewhere=met, bound_met_nowhere=none).groupby(["producer", "kind"])
    return out.agg(rows=("reason", "size"), bound_met_elsewhere=("bound_met_elsewhere", "sum"),
                   bound_met_nowhere=("bound_met_nowhere", "sum")).reset_index()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="store_true", help="run both batches first (else read the stores)")
    ap.add_argument("--instances", default=str(ROOT / "instances" / "corpus" / "*.toml"))
    ap.add_argument("--time-limit", type=float, default=4.0)
    ap.add_argument("--before-checkout", default="/tmp/before")
    ap.add_argument("--before-path", default="/tmp/before-pkg")
    ap.add_argument("--before-store", default="/tmp/corpus-before")
    ap.add_argument("--after-store", default="/tmp/corpus-after")
    ap.add_argument("--out", default=str(ROOT / "results" / "tables"))
    args = ap.parse_args(argv)
    producers = quick_producers()
    if args.run:
        after_path = str(Path(__import__("collsynth").__file__).resolve().parent.parent)
        for checkout, path, where in ((args.before_checkout, args.before_path, args.before_store),
                                      (str(ROOT), os.environ.get("PYTHONPATH", after_path), args.after_store)):
            print(json.dumps(run_batch(Path(checkout), path, args.instances, producers, args.time_limit, where)),
                  flush=True)
    before, after = store.load(args.before_store), store.load(args.after_store)
    before, after = before[before["producer"].isin(producers)], after[after["producer"].isin(producers)]
    proofs, still_open = compare(before, after), open_rows(after)
    pd.set_option("display.width", 250)
    print(f"before: {len(before)} rows on {before['instance'].nunique()} instances; "
          f"after: {len(after)} rows on {after['instance'].nunique()} instances")
    only = sorted(set(after["instance"]) - set(before["instance"]))
    if only:
        print(f"instances with rows after only ({len(only)}): {', '.join(only)}")
    print(proofs.to_string(index=False))
    kinds = reason_counts(still_open)
    print(kinds.to_string(index=False))
    render.write_table(proofs, Path(args.out), "corpus_proofs", "Corpus: rows meeting their own bound, before | after")
    render.write_table(kinds, Path(args.out), "corpus_open_kinds", "Corpus: rows still open (after), per reason")
    render.write_table(still_open, Path(args.out), "corpus_open", "Corpus: rows still open (after), with reasons")
    return 0


if __name__ == "__main__":
    sys.exit(main())
