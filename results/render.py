"""Tables from the results store: Markdown, CSV and LaTeX, regenerated only from stored runs.

Every table is a function ``DataFrame of runs -> DataFrame`` (so it is testable without
files) and :func:`write_all` writes each as ``<name>.md``, ``<name>.csv`` and ``<name>.tex``.
Tables whose name starts with ``det_`` hold only deterministic columns (statuses, steps,
costs, bounds: no wall-clock times), so regenerating them from the same runs reproduces them
byte for byte; timing tables are written separately.

Statuses are read under the proof rule of :class:`~collsynth.tens.status.Status`
(:func:`statuses`: a stored ``optimal`` whose ``bound_source`` names no cost model is
``best-in-model``), and every table with statuses carries their legend, generated from the
enum's documentation (:data:`LEGENDS`).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..tens import cost_models
from ..tens.bounds import TOL
from ..tens.status import Status, legend
from . import runtime_prices, schema

RUN_COLUMNS = schema.ROW_FIELDS  # runs.csv: the key fields, then the result fields of `solve`
RUNTIME_COLUMNS = runtime_prices.COLUMNS  # with tables --calibration
TIMING_COLUMNS = ("build_s", "solve_s", "wall_s")
MODEL_COLUMNS = {  # cost model -> (time column, lower bound column): each time against its own bound
    m.name: (m.time_column, m.lower_bound_column) for m in cost_models.MODELS.values()}
GAP_TOL = 1e-9  # a time within this relative distance of its bound has gap 0
SGM_SHIFT_S = 1.0  # shift of the shifted geometric mean of solve times (seconds)
FLOAT_FORMAT = "%.6g"
SIZES = (1 << 10, 1 << 14, 1 << 18, 1 << 22, 1 << 26, 1 << 30)  # message sizes for the who-wins table


def method(df: pd.DataFrame) -> pd.Series:
    """A run's method label: ``producer[/solver][/driver]``."""
    out = df["producer"].astype(str)
    for col in ("solver", "driver"):
        val = df[col].fillna("").astype(str)
        out = out.where(val == "", out + "/" + val)
    return out


def runs(df: pd.DataFrame) -> pd.DataFrame:
    """``runs.csv``: one row per stored run, key columns then the result fields of ``solve``."""
    cols = [c for c in RUN_COLUMNS + RUNTIME_COLUMNS if c in df.columns]
    return df[cols].sort_values(["instance", "producer", "solver", "driver", "seed"]).reset_index(drop=True)


def runtime_table(df: pd.DataFrame) -> pd.DataFrame:
    """``runtime``: each run's idealised times beside its calibrated runtime time and the
    calibration that priced it (``tables --calibration``; ``docs/cost-models.md``)."""
    cols = ["instance", "producer", "solver", "seed", *(m.time_column for m in cost_models.MODELS.values()),
            *RUNTIME_COLUMNS]
    return df[[c for c in cols if c in df.columns]].sort_values(["instance", "producer"]).reset_index(drop=True)


def routings(df: pd.DataFrame) -> pd.Series:
    """Each run's schedule routing as the pipeline recorded it (``extra["routing"]``: ``links``,
    or ``shortest-path`` for sends that cross switches on their way); ``links`` where the
    run's extra does not say (runs stored before it was recorded, runs with no schedule)."""
    def get(text):
        try:
            return json.loads(text).get("routing") or "links"
        except (TypeError, ValueError, AttributeError):
            return "links"

    if "extra" not in df.columns:
        return pd.Series("links", index=df.index, dtype=object)
    return df["extra"].map(get).astype(object)


def applicable_bounds(df: pd.DataFrame, column: str = "lower_bound_s") -> pd.Series:
    """Per run: the largest ``column`` stored for its instance by a run whose bound holds for
    this run's schedule. Each run stores the bound of its own routing
    (:meth:`collsynth.tens.cost_models.CostModel.bound_of`): a schedule sent on links meets
    every stored bound (a routed schedule's bound, e.g. ``sync`` latency plus cut,
    :attr:`collsynth.tens.bounds.Bounds.sync_routed`, relaxes the links' one), a routed
    schedule only the routed runs' (a route crosses its switches in one step, so the drain and
    ramp arguments do not bind it).

    >>> df = pd.DataFrame({"instance": ["a", "a", "a"], "lower_bound_s": [3.0, 2.0, 2.5],
    ...                    "extra": ['{"routing": "links"}', '{"routing": "shortest-path"}', None]})
    >>> applicable_bounds(df).tolist()  # the routed run is set against 2.0, the others against 3.0
    [3.0, 2.0, 3.0]
    """
    routed = routings(df) != "links"
    every = pd.to_numeric(df[column], errors="coerce").groupby(df["instance"]).transform("max")
    return every.where(~routed, routed_bounds(df, column).reindex(df["instance"]).to_numpy())


def routed_bounds(df: pd.DataFrame, column: str = "lower_bound_s") -> pd.Series:
    """Per instance: the largest ``column`` stored by a run whose schedule is routed (NaN where
    none is), the bound a routed schedule is set against (:func:`applicable_bounds`)."""
    bound = pd.to_numeric(df[column], errors="coerce").where(routings(df) != "links")
    return bound.groupby(df["instance"]).max()


def best_runs(ok: pd.DataFrame, time_col: str) -> pd.DataFrame:
    """The run of least ``time_col`` per (instance, method) of the verified runs ``ok`` (with
    a ``method`` column; a run without that time only where the method has no other)."""
    return ok.sort_values(time_col, kind="stable").groupby(["instance", "method"], sort=False).head(1)


def optimality(df: pd.DataFrame) -> pd.DataFrame:
    """Per instance: lower bound, best verified time, and each method's time and ratio to the bound.

    Time is the synchronous alpha-beta price (``docs/cost-models.md``) of the stored verified
    schedule; the best of a method's seeds counts. Each ratio is to the bound that holds for
    that schedule's routing (:func:`applicable_bounds`): ``lower_bound_s`` is the instance's
    largest (schedules on links), ``lower_bound_routed_s`` (shown only where a method routes)
    the one a routed schedule is set against. Deterministic columns only.
    """
    ok = df[df["verified"]].copy()
    if ok.empty:
        return pd.DataFrame(columns=["instance", "lower_bound_s", "best_s", "best_method"])
    ok["method"] = method(ok)
    ok["ratio"] = pd.to_numeric(ok["time_sync_s"], errors="coerce") / applicable_bounds(df)[ok.index]
    best = best_runs(ok, "time_sync_s")
    best_per = best.pivot(index="instance", columns="method", values="time_sync_s")
    ratio_per = best.pivot(index="instance", columns="method", values="ratio")
    bound = df.groupby("instance")["lower_bound_s"].max()
    out = pd.DataFrame({"lower_bound_s": bound.reindex(best_per.index)})
    if (routings(df) != "links").any():
        out["lower_bound_routed_s"] = routed_bounds(df)
    source = bound_labels(df, "sync").reindex(best_per.index)
    if source.notna().any():
        out["bound_source"] = source
    out["best_s"] = best_per.min(axis=1)
    out["best_method"] = best_per.idxmin(axis=1)
    out["best/bound"] = [ratio_per.at[i, m] if isinstance(m, str) else np.nan for i, m in out["best_method"].items()]
    for m in sorted(best_per.columns):
        out[f"{m} ratio"] = ratio_per[m]
    return out.reset_index().sort_values("instance").reset_index(drop=True)


def _extra_field(df: pd.DataFrame, key: str) -> pd.Series:
    """``extra[key]`` of every run (NaN where the run's extra JSON lacks it)."""
    def get(text):
        if not isinstance(text, str) or not text:
            return np.nan
        try:
            val = json.loads(text).get(key)
        except (ValueError, AttributeError):
            return np.nan
        return np.nan if val is None else float(val)

    if "extra" not in df.columns:
        return pd.Series(np.nan, index=df.index)
    return df["extra"].map(get).astype(float)


def bound_labels(df: pd.DataFrame, model: str) -> pd.Series:
    """Per instance: which argument proved its ``model`` lower bound (``extra["bounds"]``, as
    :func:`collsynth.tens.bounds.Bound.label` wrote it: e.g. ``cut S={8-15}``); NaN where no
    stored run says."""
    def get(text):
        try:
            b = json.loads(text)["bounds"][model]
        except (TypeError, ValueError, KeyError):
            return np.nan
        return b.get("label") if b.get("value") is not None else f"none ({b.get('note', '')})"

    if "extra" not in df.columns or df.empty:
        return pd.Series(dtype=object)
    return df["extra"].map(get).groupby(df["instance"]).first()


def gaps(df: pd.DataFrame) -> pd.DataFrame:
    """Per verified run: the relative gap of its result to its own bound, in its own units
    (``gap``, timesteps or the producer's units) and under each cost model
    (``1 - lower bound / time``); NaN where a bound or time is missing."""
    ok = df[df["verified"].astype(bool)]
    out = pd.DataFrame({"gap": pd.to_numeric(ok.get("gap"), errors="coerce")}, index=ok.index)
    for model, (time_col, lb_col) in MODEL_COLUMNS.items():
        t = pd.to_numeric(ok.get(time_col, pd.Series(np.nan, index=ok.index)), errors="coerce")
        lb = pd.to_numeric(ok.get(lb_col, pd.Series(np.nan, index=ok.index)), errors="coerce")
        out[f"gap_{model}"] = (1 - lb / t).where(t > 0)
    return out


def statuses(df: pd.DataFrame) -> pd.Series:
    """Each run's status under the proof rule (:meth:`~collsynth.tens.status.Status.of_row`):
    ``optimal`` only when proven for the instance under a named cost model. A row stored
    ``optimal`` before the rule, whose ``bound_source`` names another model, is ``optimal``
    still when its stored time under a cost model meets that model's stored bound, and
    ``best-in-model`` otherwise."""
    source = df["bound_source"] if "bound_source" in df.columns else pd.Series(None, index=df.index)
    out = pd.Series([Status.of_row(st, None if pd.isna(src) else src).value
                     for st, src in zip(df["status"], source)], index=df.index, dtype=object)
    met = pd.Series(False, index=df.index)
    for time_col, bound_col in MODEL_COLUMNS.values():
        if time_col in df.columns and bound_col in df.columns:
            t, b = (pd.to_numeric(df[c], errors="coerce") for c in (time_col, bound_col))
            met |= (t <= b * (1 + TOL)).fillna(False)
    out[(out == Status.BEST_IN_MODEL) & (df["status"] == Status.OPTIMAL) & met] = Status.OPTIMAL.value
    return out


def proofs(df: pd.DataFrame) -> pd.DataFrame:
    """Per producer: verified runs, how many are proven ``optimal`` for the instance and how
    many only ``best-in-model`` (:func:`statuses`), and the fraction with gap 0 in their own
    units and under each cost model (each time against its own bound)."""
    ok = df[df["verified"].astype(bool)].copy()
    cols = ["producer", "verified", "optimal", "best-in-model", "gap0"] + [f"gap0_{m}" for m in MODEL_COLUMNS]
    if ok.empty:
        return pd.DataFrame(columns=cols)
    g = gaps(ok)
    judged = statuses(ok)
    rows = []
    for prod, idx in ok.groupby("producer").groups.items():
        sub = g.loc[idx]
        row = {"producer": prod, "verified": len(idx), "optimal": int((judged[idx] == Status.OPTIMAL).sum()),
               "best-in-model": int((judged[idx] == Status.BEST_IN_MODEL).sum())}
        for name, col in [("gap0", "gap")] + [(f"gap0_{m}", f"gap_{m}") for m in MODEL_COLUMNS]:
            have = sub[col].dropna()
            row[name] = float((have <= GAP_TOL).mean()) if len(have) else np.nan
        rows.append(row)
    return pd.DataFrame(rows, columns=cols).sort_values("producer").reset_index(drop=True)


def bounds_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per instance and cost model: the lower bound, the argument that proved it, the best
    verified time under that model and its ratio to the bound (each time against its own
    bound: the event simulation's bound is weaker than the synchronous one; the bound is the
    one that holds for the best schedule's routing, :func:`applicable_bounds`)."""
    ok = df[df["verified"].astype(bool)].copy()
    cols = ["instance", "model", "lower_bound_s", "bound_source", "best_s", "best_method", "best/bound"]
    if ok.empty:
        return pd.DataFrame(columns=cols)
    ok["method"] = method(ok)
    rows = []
    for model, (time_col, lb_col) in MODEL_COLUMNS.items():
        if time_col not in ok.columns or lb_col not in df.columns:
            continue
        labels = bound_labels(df, model)
        held = applicable_bounds(df, lb_col)
        for inst, g in ok.groupby("instance"):
            t = pd.to_numeric(g[time_col], errors="coerce")
            if t.isna().all():
                continue
            i = t.idxmin()
            lb = held[i]
            rows.append({"instance": inst, "model": model, "lower_bound_s": lb, "bound_source": labels.get(inst, np.nan),
                         "best_s": t[i], "best_method": g.loc[i, "method"], "best/bound": t[i] / lb if lb > 0 else np.nan})
    return pd.DataFrame(rows, columns=cols).sort_values(["instance", "model"]).reset_index(drop=True)


def lp_bounds(df: pd.DataFrame) -> pd.Series:
    """Per instance: the TEN LP lower bound on timesteps (TACOS section V-A relaxed), the
    largest ``lp_bound`` any run recorded in its ``extra`` (a relaxation run's own bound, or the
    bound a TEN ILP run computed beside its result). NaN where no run computed it."""
    return _extra_field(df, "lp_bound").groupby(df["instance"]).max()


def steps_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per instance: the step lower bound (hop distance), the TEN timesteps bound with the
    argument that proved it and the TEN LP bound (timesteps; TACOS V-A relaxation, when a run
    computed it), and each method's fewest steps (TACOS-table style)."""
    ok = df[df["verified"]].copy()
    if ok.empty:
        return pd.DataFrame(columns=["instance", "lower_bound_steps"])
    ok["method"] = method(ok)
    steps = ok.groupby(["instance", "method"])["steps"].min().unstack("method")
    out = pd.DataFrame({"lower_bound_steps": df.groupby("instance")["lower_bound_steps"].max().reindex(steps.index)})
    if "lower_bound_timesteps" in df.columns:
        ten = pd.to_numeric(df["lower_bound_timesteps"], errors="coerce").groupby(df["instance"]).max()
        if ten.notna().any():
            out["lower_bound_timesteps"] = ten.reindex(steps.index)
            out["timesteps_bound_source"] = bound_labels(df, "timesteps").reindex(steps.index)
    lp = lp_bounds(df).reindex(steps.index)
    if lp.notna().any():
        out["lp_bound_timesteps"] = lp
    for m in sorted(steps.columns):
        out[m] = steps[m]
    return out.reset_index().sort_values("instance").reset_index(drop=True)


def solver_status(df: pd.DataFrame) -> pd.DataFrame:
    """Solver comparison, deterministic part: status, objective, bound and gap per instance
    for every producer that uses a solver, with the instance's TEN LP bound (:func:`lp_bounds`)
    beside every row and the bound that proved (or bounds) each result (``bound_source``)."""
    sol = df[df["solver"].fillna("") != ""].copy()
    cols = ["instance", "producer", "driver", "solver", "status", "objective", "bound", "lp_bound", "gap"]
    if "bound_source" in df.columns:
        cols.append("bound_source")
    if sol.empty:
        return pd.DataFrame(columns=cols)
    sol["lp_bound"] = sol["instance"].map(lp_bounds(df))
    sol["status"] = statuses(sol)
    return sol[cols].sort_values(cols[:4]).reset_index(drop=True)


def solver_times(df: pd.DataFrame) -> pd.DataFrame:
    """Solver comparison, timing part, per producer, driver and solver: runs, how many were
    proven optimal or kept an incumbent, and the shifted geometric means (shift
    :data:`SGM_SHIFT_S`) of the solver's own time (``solve_s``) and of the whole run's wall
    time (unsolved runs count with their time, i.e. the limit they hit)."""
    sol = df[df["solver"].fillna("") != ""].copy()
    if sol.empty:
        return pd.DataFrame(columns=["producer", "driver", "solver", "runs", "solved", "sgm_solve_s", "sgm_wall_s"])
    sol["driver"] = sol["driver"].fillna("")
    rows = []
    for (prod, driver, solver), g in sol.groupby(["producer", "driver", "solver"]):
        w = g["wall_s"].astype(float).fillna(0.0)
        t = g["solve_s"].astype(float).fillna(0.0)
        rows.append({
            "producer": prod, "driver": driver, "solver": solver, "runs": len(g),
            "solved": int(statuses(g).isin([Status.OPTIMAL, Status.BEST_IN_MODEL]).sum()),
            "feasible": int((g["status"] == Status.FEASIBLE).sum()),
            "sgm_solve_s": _sgm(t), "sgm_wall_s": _sgm(w), "max_wall_s": float(w.max()),
        })
    return pd.DataFrame(rows).sort_values(["producer", "driver", "solver"]).reset_index(drop=True)


def _sgm(seconds: pd.Series) -> float:
    """Shifted geometric mean, shift :data:`SGM_SHIFT_S` (the usual solver-benchmark mean)."""
    return float(np.exp(np.mean(np.log(seconds + SGM_SHIFT_S))) - SGM_SHIFT_S)


def who_wins(df: pd.DataFrame, sizes=SIZES) -> pd.DataFrame:
    """Per instance and message size: the fastest method (Zhao et al., NSDI 2025, Fig. 13, De Sensi et al., NSDI 2024, Fig. 15).

    A stored run priced at message size M0 with latency T_L and bandwidth time T_B costs
    ``T_L + T_B * M / M0`` at size M under the synchronous model (loads scale linearly with M),
    so the table needs no re-run. Deterministic.
    """
    ok = df[df["verified"] & df["T_B_s"].notna()].copy()
    if ok.empty:
        return pd.DataFrame(columns=["instance", *[f"M={m}" for m in sizes]])
    ok["method"] = method(ok)
    rows = []
    for inst, g in ok.groupby("instance"):
        row = {"instance": inst}
        m0 = g["message_bytes"].astype(float)
        for m in sizes:
            t = g["T_L_s"].astype(float) + g["T_B_s"].astype(float) * (m / m0)
            i = t.idxmin()
            row[f"M={_size_label(m)}"] = f"{g.loc[i, 'method']} ({t[i]:.3g} s)"
        rows.append(row)
    return pd.DataFrame(rows).sort_values("instance").reset_index(drop=True)


def _size_label(m: int) -> str:
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if m >= 1 << k and m % (1 << k) == 0:
            return f"{m >> k}{unit}"
    return f"{m}B"


TABLES = {
    "runs": runs,
    "det_optimality": optimality,
    "det_steps": steps_table,
    "det_solver_status": solver_status,
    "det_bounds": bounds_table,
    "det_proofs": proofs,
    "det_who_wins": who_wins,
    "solver_times": solver_times,
}


LEGENDS = {  # table: the statuses its legend explains (the Markdown ends with it)
    "det_proofs": (Status.OPTIMAL, Status.BEST_IN_MODEL),
    "det_solver_status": tuple(Status),
}


def status_legend(statuses_shown) -> str:
    """The Markdown legend of ``statuses_shown``, one line each, from the enum's documentation."""
    lines = legend(statuses_shown)
    return "Statuses:\n\n" + "".join(f"- {line}\n" for line in lines) if lines else ""


def write_table(table: pd.DataFrame, out_dir: Path, name: str, title: str | None = None,
                provenance: str | None = None) -> list[Path]:
    """Write ``name.csv``, ``name.md`` and ``name.tex`` (floats as ``%.6g``; the Markdown starts
    with ``# title`` when given, ends with the legend of the statuses it shows when
    :data:`LEGENDS` names it, then the ``provenance`` line; the LaTeX starts with it as a
    comment: :func:`latex`); return the three paths in that order."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.csv", out_dir / f"{name}.md", out_dir / f"{name}.tex"]
    table.to_csv(paths[0], index=False, float_format=FLOAT_FORMAT, lineterminator="\n")
    shown = table.copy()
    for col in shown.columns:
        if pd.api.types.is_float_dtype(shown[col]):
            shown[col] = shown[col].map(lambda v: "" if pd.isna(v) else FLOAT_FORMAT % v)
    shown = shown.astype(object).where(shown.notna(), "")
    shown, notes = footnotes(shown)
    heading = f"# {title}\n\n" if title else ""
    shown_statuses = set(table["status"]) if "status" in table.columns else set()
    legend_text = status_legend([s for s in LEGENDS.get(name, ()) if s in shown_statuses or "status" not in table])
    footer = "".join(f"\n[{k}] {text}\n" for k, text in enumerate(notes, 1))
    footer += f"\n{legend_text}" if legend_text and len(shown) else ""
    footer += f"\n{provenance}\n" if provenance else ""
    paths[1].write_text(heading + (shown.to_markdown(index=False) + "\n" if len(shown) else "(no runs)\n") + footer)
    marked, _ = footnotes(table)
    notes_tex = "".join(f"\\par\\footnotesize [{k}] {_tex_escape(text)}\n" for k, text in enumerate(notes, 1))
    paths[2].write_text((f"% {provenance}\n" if provenance else "") + latex(marked) + notes_tex)
    return paths


FOOTNOTE_CHARS = 80  # a text cell longer than this becomes a numbered note under the table


def footnotes(table: pd.DataFrame, longest: int = FOOTNOTE_CHARS) -> tuple[pd.DataFrame, list[str]]:
    """The table with every text cell longer than ``longest`` characters replaced by a note
    number ``[k]`` (one per distinct text, numbered in reading order), and the notes' texts: a
    reason repeated on many rows is written once, under the table.

    >>> t, notes = footnotes(pd.DataFrame({"x": [1, 2, 3], "why": ["long " * 20, "", "long " * 20]}))
    >>> t["why"].tolist(), len(notes)
    (['[1]', '', '[1]'], 1)
    """
    notes: dict[str, int] = {}
    out = table.copy()
    for col in out.columns:
        if out[col].dtype != object and not pd.api.types.is_string_dtype(out[col]):
            continue

        def mark(value):
            if isinstance(value, str) and len(value) > longest:
                return f"[{notes.setdefault(value, len(notes) + 1)}]"
            return value

        out[col] = out[col].map(mark)
    return out, list(notes)


def header(column: str) -> str:
    """A readable header for a column name: words, and the unit of a ``_s`` / ``_bytes`` suffix.

    >>> header("lower_bound_s"), header("best/bound"), header("message_bytes")
    ('lower bound (s)', 'best/bound', 'message (bytes)')
    """
    for suffix, unit in (("_s", "s"), ("_bytes", "bytes"), ("_timesteps", "timesteps")):
        if column.endswith(suffix) and column != suffix:
            return f"{column[: -len(suffix)].replace('_', ' ')} ({unit})"
    return column.replace("_", " ")


TEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
               "}": r"\}", "~": r"\textasciitilde{}", "^": r"\^{}"}


def _tex_escape(text: str) -> str:
    """``text`` with LaTeX's special characters escaped, in one pass.

    >>> print(_tex_escape("a_b & {50%}"))
    a\\_b \\& \\{50\\%\\}
    """
    import re

    return re.sub(r"[\\&%$#_{}~^]", lambda m: TEX_SPECIAL[m.group()], text)


def latex(table: pd.DataFrame) -> str:
    """The table as a booktabs ``tabular`` for LaTeX with siunitx: number columns are ``S``
    columns holding plain numbers (``2.83017e-06``: siunitx formats them, ``\\num`` style),
    text columns ``l``, headers readable (:func:`header`) and braced, so that siunitx reads
    them as text; special characters are escaped."""
    if not len(table):
        return "% no runs\n"
    escape = _tex_escape

    numeric = [pd.api.types.is_numeric_dtype(table[c]) and not pd.api.types.is_bool_dtype(table[c])
               for c in table.columns]
    spec = "".join("S" if n else "l" for n in numeric)
    lines = [rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
             " & ".join("{" + escape(header(str(c))) + "}" for c in table.columns) + r" \\", r"\midrule"]
    for row in table.itertuples(index=False):
        cells = []
        for value, n in zip(row, numeric):
            if value is None or (not isinstance(value, str) and pd.isna(value)):
                cells.append("" if n else "{}")
            elif n:
                cells.append(FLOAT_FORMAT % value if isinstance(value, float) else str(value))
            else:
                cells.append(escape(str(value)))
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def provenance(df: pd.DataFrame, store: str | Path) -> str:
    """The provenance line of tables made from the runs ``df`` of ``store``: the store's folder
    name, its run count, and the newest run's date (UTC) and git commit, read from the store
    (never the clock), so that the same store gives the same tables byte for byte.

    >>> provenance(pd.DataFrame({"created_at": [0.0, 86400.0], "provenance": [None, '{"git_commit": "abcdef0123456", "git_dirty": true}']}), "s")
    'Provenance: store s (2 runs), newest run 1970-01-02 00:00 UTC at commit abcdef012345 (uncommitted changes).'
    """
    import datetime

    if not len(df) or "created_at" not in df or df["created_at"].isna().all():
        return f"Provenance: store {Path(store).name} ({len(df)} runs)."
    newest = df.loc[df["created_at"].idxmax()]
    try:
        prov = json.loads(newest.get("provenance") or "{}")
    except (TypeError, ValueError):
        prov = {}
    when = datetime.datetime.fromtimestamp(float(newest["created_at"]), datetime.timezone.utc)
    commit = str(prov.get("git_commit") or "unknown")[:12] + (" (uncommitted changes)" if prov.get("git_dirty") else "")
    return (f"Provenance: store {Path(store).name} ({len(df)} runs), newest run "
            f"{when:%Y-%m-%d %H:%M} UTC at commit {commit}.")


def write_all(df: pd.DataFrame, out_dir: str | Path, store: str | Path | None = None) -> list[Path]:
    """Every table of :data:`TABLES` from the runs ``df`` into ``out_dir``, each with the
    :func:`provenance` line of ``store`` when given."""
    out_dir = Path(out_dir)
    line = provenance(df, store) if store is not None else None
    written = []
    for name, fn in TABLES.items():
        written += write_table(fn(df), out_dir, name, provenance=line)
    return written
