"""The papers' published numbers beside ours: paper | ours | ratio tables.

Two sources of rows, one layout (:data:`COLUMNS`):

- :func:`suite_table`: the ``[[expect.paper]]`` entries of the corpus instances (TACOS Tables
  I-V, TE-CCL's provided outputs), each set beside our number computed from the stored runs
  the way the paper computes its own (:func:`ours`): a normalised time divides by the
  reference method's time as the paper normalises; TE-CCL's finish time is epochs x epoch
  duration (its ``4-Collective_Finish_Time = 1-Epoch_Duration x 3-Epochs_Required``,
  teccl/solvers/allgather.py: no latency term is added, the ``ceil(alpha / epoch)`` epochs a
  hop's latency takes are inside the epoch count) and its algorithm bandwidth the output
  buffer over that time. Ours is computed the same way on the instance's epoch
  (:func:`~collsynth.instances.instance.epoch_timestep`), which for TE-CCL's instances
  (topology ``latency = "pipelined"``) is TE-CCL's: a chunk's transmission on the fastest or
  slowest link, with the latency in the epoch count as in TE-CCL.
- ``optree_rows``, ``swing_rows``, ``bfb_table4_rows``, ``bfb_table5_rows``: the seeds'
  analytic tables (computed by the solvers' modules, no store) in the same form.

``ratio`` is ours / paper. ``bound`` is what we proved for the metric (epochs, finish time:
the largest TEN-timestep lower bound any stored run of the instance proved, in epochs or times
the epoch; algorithm bandwidth: the output buffer over that time, an upper bound; empty for
the other metrics). An entry whose ``producer`` is ``"*"`` (:data:`ANY`) stands for our best
run of any producer. The paper value is never computed here: it is a transcription
(the corpus files and the constants below say where from); a row whose paper value cannot be
derived says why.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from .. import InputError
from ..instances import Instance
from ..instances.instance import epoch_timestep
from ..tens import cost_models

COLUMNS = ("table", "instance", "row", "column", "metric", "method", "paper", "ours", "bound", "ratio", "source", "why")
ANY = "*"  # an entry's producer standing for every producer: our best run of the instance

BFB = "Zhao et al., NSDI 2025"
SWING = "De Sensi et al., NSDI 2024"
OPTREE = "Dai et al., ICC 2023"
# Zhao et al., NSDI 2025, Table 4 (N = 1024, d = 4): allreduce time per row of the Pareto
# frontier, top (Moore optimal) to bottom (BW optimal), and the theoretical lower bound; the
# topology names did not survive the text extraction of the paper (section 5.4).
BFB_TABLE4_US = (323.5, 291.0, 328.4, 387.8, 567.6)
BFB_TABLE4_BOUND_US = 267.6


def _method(producer: str, driver: str | None) -> str:
    if producer == ANY:
        return "best of ours"
    return producer + (f"/{driver}" if driver else "")


def _runs_of(runs: pd.DataFrame, instance: str, producer: str, driver: str | None) -> pd.DataFrame:
    sel = (runs["instance"] == instance) & runs["verified"].astype(bool)
    if producer != ANY:
        sel &= runs["producer"] == producer
        if driver:
            sel &= runs["driver"].fillna("") == driver
    return runs[sel]


def proven(entry: dict, instance: Instance, runs: pd.DataFrame) -> float:
    """What we proved for an entry's metric (NaN if nothing or not applicable): the largest TEN
    timestep lower bound over the stored runs of the instance (the bounds stage's
    ``lower_bound_timesteps`` and every producer's ``bound`` in timesteps) as ``epochs``, times
    the epoch as ``finish_time_s``, and the output buffer over that time as
    ``algo_bandwidth_GBps`` (an upper bound). Only with an epoch timestep (every run of the
    instance is then on it)."""
    metric = entry["metric"]
    step = epoch_timestep(instance)
    if metric not in ("epochs", "finish_time_s", "algo_bandwidth_GBps") or step is None:
        return np.nan
    mine = runs[runs["instance"] == instance.name]
    values = [mine["lower_bound_timesteps"]] if "lower_bound_timesteps" in mine else []
    if "bound" in mine and "units" in mine:
        values.append(mine.loc[mine["units"] == "timesteps", "bound"])
    b = max((float(v.max()) for v in values if v.notna().any()), default=np.nan)
    if not np.isfinite(b) or b <= 0:
        return np.nan
    if metric == "epochs":
        return b
    if metric == "finish_time_s":
        return b * step
    return max(c.message_bytes for c in instance.collectives) / (b * step) / 1e9


def _best(rows: pd.DataFrame, key: str) -> pd.Series | None:
    """The run with the smallest ``key`` (ties: the faster run), or None."""
    rows = rows[rows[key].notna()]
    if rows.empty:
        return None
    return rows.sort_values([key, "wall_s"]).iloc[0]


def _model(entry: dict, instance: Instance) -> cost_models.CostModel:
    """The cost model an entry's time is in (default the event simulation)."""
    name = entry.get("model", "event")
    if name not in cost_models.MODELS:
        raise InputError(f"{instance.name}: expect.paper.model",
                         f"expected one of {', '.join(cost_models.names())}, got {name!r}")
    return cost_models.MODELS[name]


def ours(entry: dict, instance: Instance, runs: pd.DataFrame) -> tuple[float, str]:
    """Our number for one ``[[expect.paper]]`` entry and a note ('' when computed).

    ``normalized_time``: the method's best time under ``model`` (default the event
    simulation) over the reference method's; ``epochs``: fewest TEN timesteps;
    ``finish_time_s``: those epochs x the instance's epoch timestep (TE-CCL: epochs x epoch
    duration, latency epochs included, no separate latency term; the TEN-priced time without
    an epoch); ``algo_bandwidth_GBps``: output buffer
    (bytes) / finish time / 1e9 (TE-CCL: GPUs x chunk size / finish time, GB/s);
    ``synthesis_s`` / ``solver_s``: wall time of the method's best run (with an epoch: the run
    of fewest epochs, else of the least time).
    """
    mine = _runs_of(runs, instance.name, entry["producer"], entry.get("driver"))
    method = _method(entry["producer"], entry.get("driver"))
    metric = entry["metric"]
    if metric == "normalized_time":
        col = _model(entry, instance).time_column
        run = _best(mine, col)
        ref = _best(_runs_of(runs, instance.name, entry["reference"], entry.get("reference_driver")), col)
        if run is None or ref is None:
            missing = method if run is None else _method(entry["reference"], entry.get("reference_driver"))
            return np.nan, f"no verified {missing} run stored"
        return float(run[col]) / float(ref[col]), ""
    step = epoch_timestep(instance)
    timed = step is None and "model" in entry and metric in ("finish_time_s", "algo_bandwidth_GBps")
    by_steps = not timed and (metric in ("epochs", "finish_time_s", "algo_bandwidth_GBps") or step is not None)
    col = _model(entry, instance).time_column if timed else "time_event_s"
    run = _best(mine, "steps" if by_steps else col)  # with an epoch: the run of fewest epochs
    if run is None:
        return np.nan, f"no verified {method} run stored"
    if metric in ("synthesis_s", "solver_s"):
        return float(run["wall_s"]), ""
    if metric == "epochs":
        return float(run["steps"]), ""
    # without an epoch: the time under the entry's model when it names one, else the TEN model's
    finish = float(run["steps"]) * step if step is not None else float(run[col if timed else "time_ten_s"])
    if metric == "finish_time_s":
        return finish, ""
    output = max(c.message_bytes for c in instance.collectives)
    return output / finish / 1e9, ""


def suite_table(runs: pd.DataFrame, instances: Iterable[Instance]) -> pd.DataFrame:
    """paper | ours | ratio for every ``[[expect.paper]]`` entry of ``instances``."""
    rows = []
    for inst in instances:
        note = str(inst.expect.get("note", ""))
        for e in inst.expect.get("paper", ()):
            value, missing = ours(e, inst, runs)
            bound = proven(e, inst, runs)
            paper = e.get("value", np.nan)
            why = "; ".join(x for x in (e.get("why", ""), missing, note) if x)
            rows.append({
                "table": e["table"], "instance": inst.name, "row": e.get("row", ""), "column": e.get("column", ""),
                "metric": e["metric"], "method": _method(e["producer"], e.get("driver")), "paper": paper,
                "ours": value, "bound": bound,
                "ratio": value / paper if paper and np.isfinite(paper) and np.isfinite(value) else np.nan,
                "source": e["source"], "why": why,
            })
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _row(table, row, column, metric, method, paper, ours_value, source, why="") -> dict:
    paper = np.nan if paper is None else float(paper)
    ours_value = np.nan if ours_value is None or pd.isna(ours_value) else float(ours_value)
    ratio = ours_value / paper if np.isfinite(paper) and paper and np.isfinite(ours_value) else np.nan
    return {"table": table, "instance": "", "row": row, "column": column, "metric": metric, "method": method,
            "paper": paper, "ours": ours_value, "bound": np.nan, "ratio": ratio, "source": source, "why": why}


def optree_rows(table: pd.DataFrame) -> pd.DataFrame:
    """OpTree Table I (N = 1024, w = 64): the paper's steps beside the slots counted on our stages."""
    rows = []
    for r in table.to_dict("records"):
        derived = r.get("paper_value_derived")
        why = r.get("note") or ""
        if r.get("paper") is None or pd.isna(r.get("paper")):
            why = why or "no paper value for this variant"
        elif derived is False:
            why = f"paper value not derivable: {why}"
        rows.append(_row("OpTree Table I", r["algorithm"], "steps", "steps", r["algorithm"], r.get("paper"),
                         r.get("counted_slots"), f"{OPTREE}, Table I (N = 1024, w = 64)", why))
    return pd.DataFrame(rows, columns=list(COLUMNS))


def swing_rows(table: pd.DataFrame) -> pd.DataFrame:
    """Swing Table 2: the printed deficiencies (Lambda, Psi, Xi) beside those measured on tori."""
    rows = []
    for r in table.to_dict("records"):
        label = f"D={r['D']} {r['dims']} (p={r['p']})"
        measured = r.get("source", "")
        for name in ("Lambda", "Psi", "Xi"):
            why = "" if "measured" in str(measured) else f"{measured}: not measured"
            if name == "Xi" and pd.notna(r.get("Xi_table2_p")):
                why = (f"Table 2 prints a large-p limit (bandwidth-optimal rows) or a bound summed over steps "
                       f"(latency-optimal rows); the paper's model at p = {r['p']} gives {r['Xi_table2_p']:.6g}"
                       + (f"; {why}" if why else ""))
            rows.append(_row("Swing Table 2", label, name, "deficiency", r["algorithm"], r.get(f"{name}_table2"),
                             r.get(name), f"{SWING}, Table 2, row {r['algorithm']}", why))
    return pd.DataFrame(rows, columns=list(COLUMNS))


def bfb_table4_rows(table: pd.DataFrame, message_bytes: float) -> pd.DataFrame:
    """BFB Table 4 (N = 1024, d = 4): the printed allreduce times beside our Pareto frontier's.

    The paper's topology names were lost in the text, so frontier rows are paired by position
    (sorted by node latency, as the paper lists them); the last row is the lower bound.
    """
    frontier = table[~table["topology"].astype(str).str.startswith("lower bound")].reset_index(drop=True)
    bound = table[table["topology"].astype(str).str.startswith("lower bound")]
    rows = []
    src = f"{BFB}, Table 4 (N = 1024, d = 4)"
    pairing = "paired by position on the frontier (the seed text lost Table 4's topology names)"
    for i in range(max(len(frontier), len(BFB_TABLE4_US))):
        paper = BFB_TABLE4_US[i] if i < len(BFB_TABLE4_US) else None
        ours_row = frontier.iloc[i] if i < len(frontier) else None
        name = "" if ours_row is None else f"{ours_row['topology']} (T_L {ours_row['T_L']}, T_B {ours_row['T_B']})"
        why = pairing if paper is not None else "the paper lists fewer frontier rows"
        rows.append(_row("BFB Table 4", f"frontier row {i + 1}", "allreduce_us", "allreduce_us", name, paper,
                         None if ours_row is None else ours_row["allreduce_us"], src,
                         f"{why}; M = {message_bytes:g} B"))
    if len(bound):
        rows.append(_row("BFB Table 4", "theoretical lower bound", "allreduce_us", "allreduce_us",
                         "2 (Moore(N, d) alpha + (N-1)/N M/B)", BFB_TABLE4_BOUND_US, bound.iloc[0]["allreduce_us"], src,
                         f"M = {message_bytes:g} B"))
    return pd.DataFrame(rows, columns=list(COLUMNS))


def bfb_table5_rows(table: pd.DataFrame) -> pd.DataFrame:
    """BFB Table 5 (the finder's topology per N, d = 4): ours only, the paper's entries are lost."""
    rows = [_row("BFB Table 5", f"N = {r['N']}", "topology", "score_us", str(r["topology"]), None, r.get("score_us"),
                 f"{BFB}, Table 5", "not derivable: the seed text lost Table 5's entries (only its caption survives)")
            for r in table.to_dict("records")]
    return pd.DataFrame(rows, columns=list(COLUMNS))
