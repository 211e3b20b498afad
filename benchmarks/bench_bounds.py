"""Optimality tables that prove things: how many rows the bounds of ``tens/bounds/`` close.

Run ``python benchmarks/bench_bounds.py`` (or ``python -m pytest -m benchmark -s
benchmarks/bench_bounds.py``). Prints

1. per producer, the runs of the quick suite with gap 0 (in their own units, and each cost
   model's time against its own bound) and how many are ``optimal``: *before* from the
   snapshot store committed at ``--before-rev`` (the bounds of the time: per-node, distance,
   LP), *after* from ``--after`` (a re-run of the suite with this module:
   ``collsynth bench --suite quick --store STORE``; default the committed snapshot
   ``results/quick-store``);
2. the rows still open after, and why (no proven optimum, the schedule above the optimum
   some row proves, or the bound below it);
3. on the whole corpus (``--corpus``), every instance's TEN-timesteps bound per argument
   (distance and per-node: what the project had; volume and cut: new), the best with its
   witness, the seconds all four models' bounds took, and the instances whose cut search did
   not fit its budget;
4. the two-DGX-1 system joined by one InfiniBand link each way: the bound, the TEN LP bound
   and the best schedule (greedy, and the LP's schedule).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
BEFORE_REV = "0161c13"  # main when the bounds module was started: its committed quick store


def _store_at(rev: str, folder: Path) -> Path:
    """The committed quick-store database of git revision ``rev``, copied into ``folder``."""
    (folder / "schedules").mkdir(parents=True, exist_ok=True)
    data = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:results/quick-store/runs.sqlite"],
                          check=True, capture_output=True).stdout
    (folder / "runs.sqlite").write_bytes(data)
    return folder


def gap_table(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """Per producer: verified runs, optimal runs and gap-0 fractions, before and after."""
    from collsynth.results import render

    out = pd.merge(render.proofs(before), render.proofs(after), on="producer", how="outer",
                   suffixes=(" before", " after"))
    order = ["producer"] + [f"{c} {w}" for c in ("verified", "optimal", "gap0", "gap0_sync", "gap0_ten", "gap0_event")
                            for w in ("before", "after")]
    return out[[c for c in order if c in out.columns]]


def _extra(row) -> dict:
    try:
        return json.loads(row.get("extra") or "{}")
    except (TypeError, ValueError):
        return {}


def open_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Verified runs that are not proven optimal, with the reason."""
    ok = df[df["verified"].astype(bool)].copy()
    proven = ok[(ok["status"] == "optimal") & (ok["units"] == "timesteps")]
    optimum = proven.groupby("instance")["steps"].min()
    rows = []
    for _, r in ok[ok["status"] != "optimal"].iterrows():
        inst, steps = r["instance"], r["steps"]
        if r["units"] == "timesteps":
            bound = r["bound"]
            if inst in optimum.index and steps > optimum[inst]:
                why = f"schedule above the proven optimum {optimum[inst]}"
            elif inst in optimum.index:
                why = f"bound {bound:g} below the proven optimum {optimum[inst]}"
            else:
                why = f"no row proves an optimum; bound {bound:g} ({r.get('bound_source')})"
            rows.append({"instance": inst, "producer": r["producer"], "result": f"{steps} timesteps", "why": why})
        else:
            t, lb = r["time_sync_s"], r["lower_bound_s"]
            sync = _extra(r).get("bounds", {}).get("sync", {})
            parts = ""
            if sync.get("latency_s") and sync.get("bandwidth_s"):
                parts = (f": T_L {r['T_L_s'] / sync['latency_s']:.2f} x the distance bound, "
                         f"T_B {r['T_B_s'] / sync['bandwidth_s']:.2f} x the bandwidth bound")
            rows.append({"instance": inst, "producer": r["producer"], "result": f"{t:.4g} s (sync)",
                         "why": f"{t / lb:.3f} x the sync bound{parts} ({r.get('bound_source')})"})
    return pd.DataFrame(rows, columns=["instance", "producer", "result", "why"])


def corpus_bounds(budget_s: float) -> pd.DataFrame:
    """Every corpus instance: the TEN-timesteps bound of each argument and the best, with its
    witness. Distance and per-node (inbound) are what the project had; volume and cut are new."""
    from collsynth.instances import CORPUS, load_instance
    from collsynth.tens import bounds

    rows = []
    for path in sorted(CORPUS.glob("*.toml")):
        if path.name == "suites.toml":
            continue
        inst = load_instance(path)
        t0 = time.perf_counter()
        b = bounds.instance_bounds(inst, budget_s=budget_s)
        parts = b.parts["timesteps"]

        def of(*sources):
            have = [p for p in parts if p.source in sources]
            if any(p.value is None for p in have):
                return "not computed"
            return max((p.value for p in have), default=None)

        rows.append({
            "instance": inst.name, "nodes": len(inst.topology.npus), "distance": of("distance"),
            "per-node": of("inbound", "outbound"), "volume": of("volume"), "cut": of("cut"),
            "best": b.timesteps.value,
            "proved by": b.timesteps.label() if b.timesteps.computed else b.timesteps.note[:60],
            "seconds": round(time.perf_counter() - t0, 2),
        })
    return pd.DataFrame(rows)


def two_chassis() -> dict:
    """The two-DGX-1 instance: cut bound, LP bound and the best schedules."""
    from collsynth.instances import CORPUS, load_instance
    from collsynth.solvers import pipeline
    from collsynth.solvers.producers import Options
    from collsynth.tens import bounds

    inst = load_instance(CORPUS / "dgx1x2-ib-allgather.toml")
    b = bounds.instance_bounds(inst)
    out = {"cut bound": b.timesteps.value, "proved by": b.timesteps.label(), "how": b.timesteps.note,
           "per-node bound": b.part("timesteps", "inbound").value}
    for name, opts in (("greedy", Options(starts=4)), ("ten-lp", Options(time_limit=120))):
        row, _ = pipeline.run(inst, name, opts)
        out[f"{name} timesteps"] = row["steps"]
        out[f"{name} status"] = f"{row['status']} ({row['bound_source']})"
        if name == "ten-lp":
            out["TEN LP bound"] = row["extra"].get("lp_bound")
    return out


def main(argv=None) -> None:
    from collsynth.results import store

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before-rev", default=BEFORE_REV, help="git revision of the 'before' quick store")
    ap.add_argument("--after", default=str(ROOT / "results" / "quick-store"), help="store of the re-run")
    ap.add_argument("--corpus", action="store_true", help="also bound every corpus instance (minutes)")
    ap.add_argument("--budget", type=float, default=5.0, help="seconds per model for the min-cut search")
    ap.add_argument("--no-chassis", action="store_true", help="skip the two-DGX-1 runs")
    args = ap.parse_args(argv)
    pd.set_option("display.width", 250)
    pd.set_option("display.max_columns", 30)
    pd.set_option("display.max_rows", 500)
    with tempfile.TemporaryDirectory() as tmp:
        before = store.load(_store_at(args.before_rev, Path(tmp)))
    after = store.load(args.after)
    print(f"== gap 0 per producer: before = quick store at {args.before_rev} ({len(before)} runs), "
          f"after = {args.after} ({len(after)} runs)")
    print("   (gap0: own units; gap0_<model>: that model's time against its own bound; NaN: no bound)")
    print(gap_table(before, after).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    rows = open_rows(after)
    print(f"\n== rows still open after: {len(rows)} of {int(after['verified'].astype(bool).sum())} verified")
    print(rows.to_string(index=False) if len(rows) else "(none)")
    if args.corpus:
        t0 = time.perf_counter()
        table = corpus_bounds(args.budget)
        old = pd.to_numeric(table["distance"], errors="coerce").combine(
            pd.to_numeric(table["per-node"], errors="coerce"), max)
        up = table[pd.to_numeric(table["best"], errors="coerce") > old]
        print(f"\n== whole corpus ({len(table)} instances, {time.perf_counter() - t0:.0f} s): the TEN-timesteps "
              f"bound rises above distance and per-node on {len(up)} ({', '.join(up['instance'])}); "
              f"cut not computed in budget on {(table['cut'] == 'not computed').sum()}")
        print(table.to_string(index=False))
    if not args.no_chassis:
        print("\n== two DGX-1 joined by one InfiniBand link each way (instances/corpus/dgx1x2-ib-allgather.toml)")
        for k, v in two_chassis().items():
            print(f"   {k}: {v}")


@pytest.mark.benchmark
def test_bench_bounds():
    main(["--no-chassis"])


if __name__ == "__main__":
    main()
