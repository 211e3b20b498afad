"""A static HTML report of a results store: open ``index.html`` from disk, no server needed.

Layout of a report folder (default ``collsynth-results/report``)::

    index.html                 the optimality and steps tables (sortable, filterable) and, per
                               suite, the bound-ratio grid, performance profiles and size sweeps
    instances/<name>.html      one page per instance: every run, the lower bound and the argument
                               that proves it, provenance, pictures of the best schedule
    img/<suite>/*.png          the suites' plots; instances/img/*.png the instance pictures
    schedules/<run id>.json    the verified schedule of every run that has one
    runs.csv                   every stored run (the ``tables`` command's ``runs.csv``)
    report.css, report.js      the style and the few lines that sort and filter tables

Why plain pages: the pages are HTML written with Jinja2 (already a dependency) from
``results/site/``; the tables sort and filter with about forty lines of JavaScript shipped
beside them, so a report opens from ``file://`` offline with nothing to fetch. Plotly, Bokeh
or Altair would either load their library from a CDN (no network where reports are read) or
inline megabytes of it into every page, for tables that need no more than sorting; the
pictures are matplotlib PNGs like the ``tables`` command's plots, so a figure looks the same
in a paper and in the report. Pictures are drawn only from stored schedules that verify
against the instance file again.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import jinja2
import numpy as np
import pandas as pd
from rich.console import Console
from rich.progress import Progress

from .. import InputError
from ..outputs import replaced_folder
from ..instances import load_instance
from ..tens import bounds, cost_models
from ..tens.schedule import read_json
from ..tens.status import Status, legend
from ..tens.verify import verify
from . import figures, pictures, render, store

SITE = Path(__file__).parent / "site"
DEFAULT_OUT = Path("results") / "report"


def slug(name: str) -> str:
    """A file-name-safe form of an instance name.

    >>> slug("mesh4x4-failed-allgather"), slug("a/b c")
    ('mesh4x4-failed-allgather', 'a_b_c')
    """
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


# ---- cells and tables ---------------------------------------------------------------------------

def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA or v is pd.NaT


def _text(v) -> str:
    """A stored text field ('' where the database holds NULL)."""
    return "" if _missing(v) else str(v)


def cell(value, kind: str = "text", href: str | None = None, cls: str = "", sort=None) -> dict:
    """One table cell: the text shown, the key it sorts by (numbers raw, blanks last; ``sort``
    overrides it), a link.

    Kinds: ``s`` (seconds with an SI prefix), ``ratio`` (three decimals), ``int``, ``num``
    (``%.6g``), ``text``, ``details`` (text folded away until clicked).

    >>> cell(2.5e-6, "s")["text"], cell(2.5e-6, "s")["sort"], cell(None, "ratio")["text"]
    ('2.5 µs', '2.5e-06', '—')
    """
    cls = " ".join(filter(None, [cls, "txt" if kind in ("text", "details") else ""]))
    if _missing(value):
        return {"text": "—", "sort": "", "href": None, "cls": cls, "details": False}
    if kind == "s":
        text, key = figures.seconds_label(float(value)), repr(float(value))
    elif kind == "ratio":
        text, key = f"{float(value):.3f}", repr(float(value))
    elif kind == "int":
        text, key = str(int(value)), str(int(value))
    elif kind == "num":
        text, key = f"{float(value):.6g}", repr(float(value))
    else:
        text, key = str(value), str(value)
    return {"text": text, "sort": key if sort is None else repr(float(sort)), "href": href, "cls": cls,
            "details": kind == "details"}


def table(table_id: str, columns: list[tuple[str, str]], rows: list[list[dict]], caption: str = "") -> dict:
    """A sortable, filterable table for the templates: ``columns`` are (title, tooltip); a
    column of text cells is left-aligned, numbers right-aligned."""
    text = [all("txt" in row[i]["cls"] for row in rows if row[i]["sort"] != "") for i in range(len(columns))]
    return {"id": table_id, "caption": caption, "rows": rows,
            "columns": [{"title": t, "tip": tip, "cls": "txt" if txt else ""} for (t, tip), txt in zip(columns, text)]}


def _suites_of(df: pd.DataFrame) -> pd.Series:
    return df.groupby("instance")["suite"].agg(lambda s: ", ".join(sorted({_text(x) for x in s} - {""})))


def optimality_table(df: pd.DataFrame) -> dict:
    """The optimality table (:func:`collsynth.results.render.optimality`) with links to the
    instance pages and each instance's best ratio marked."""
    opt = render.optimality(df)
    suites = _suites_of(df)
    methods = [c[: -len(" ratio")] for c in opt.columns if c.endswith(" ratio")]
    columns = [("instance", "open the instance page"), ("suites", ""),
               ("lower bound", "latency + bandwidth lower bound, synchronous model"),
               ("best time", "least synchronous alpha-beta time of any verified schedule"),
               ("best method", ""), ("best / bound", "1 = provably optimal")]
    columns += [(m, f"{m}: its best synchronous time / lower bound") for m in methods]
    rows = []
    for _, r in opt.iterrows():
        row = [cell(r["instance"], href=f"instances/{slug(r['instance'])}.html"), cell(suites.get(r["instance"], "")),
               cell(r["lower_bound_s"], "s"), cell(r["best_s"], "s"), cell(r["best_method"]),
               cell(r["best/bound"], "ratio")]
        for m in methods:
            v = r[f"{m} ratio"]
            best = not _missing(v) and np.isclose(v, r["best/bound"], rtol=1e-9)
            row.append(cell(v, "ratio", cls="best" if best else ""))
        rows.append(row)
    return table("optimality", columns, rows,
                 "Synchronous alpha-beta time of each method's best verified schedule over the instance's lower "
                 "bound (bold: the best on the instance; —: no verified schedule).")


def steps_table(df: pd.DataFrame) -> dict:
    """The steps table (:func:`collsynth.results.render.steps_table`) with links."""
    st = render.steps_table(df)
    rest = [c for c in st.columns if c != "instance"]
    tips = {"lower_bound_steps": "no schedule can use fewer steps",
            "lp_bound_timesteps": "TEN LP relaxation's lower bound on timesteps",
            "timesteps_bound_source": "the argument behind the timesteps bound"}
    kinds = {c: "text" if c.endswith("_source") else "num" for c in rest}
    columns = [("instance", "open the instance page")] + [(c, tips.get(c, f"{c}: fewest steps")) for c in rest]
    rows = [[cell(r["instance"], href=f"instances/{slug(r['instance'])}.html")] + [cell(r[c], kinds[c]) for c in rest]
            for _, r in st.iterrows()]
    return table("steps", columns, rows,
                 "Fewest steps of each method (TEN timesteps for TEN and greedy producers, communication steps "
                 "for the others).")


# ---- instance pages -----------------------------------------------------------------------------

RUN_COLUMNS = (
    ("method", "text", "producer/solver/driver"), ("seed", "int", ""),
    ("status", "text", "; ".join(legend())),
    ("found_by", "text", "how the schedule was found (ILP at a horizon, recovery, rounding, the producer family)"),
    ("verified", "text", "the schedule passed the verifier"), ("steps", "int", ""), ("sends", "int", ""),
    ("T_L_s", "s", "latency part of the synchronous time"), ("T_B_s", "s", "bandwidth part of the synchronous time"),
    ("time_sync_s", "s", "synchronous alpha-beta time"), ("over bound", "ratio", "synchronous time / lower bound"),
    *((m.time_column, "s", m.doc) for m in cost_models.MODELS.values() if m.name != "sync"),
    ("objective", "num", "the producer's own objective (units column)"),
    ("bound", "num", "the producer's own proved bound (units column)"),
    ("gap", "num", "relative gap between objective and bound"), ("units", "text", ""),
    ("wall_s", "s", "wall clock of the run"), ("schedule", "text", "the verified schedule (JSON)"),
    ("message", "text", ""),
)


# with report --calibration (:mod:`collsynth.results.runtime_prices`), after the other models' times
RUNTIME_COLUMNS = (
    ("time_runtime_s", "s", "MSCCL runtime time under the calibration named beside it (the runtime model)"),
    ("calibration", "text", "the calibration that priced the runtime column"),
    ("runtime_note", "text", "why a schedule has no runtime time, or the grid its program was exported on"),
)


def run_columns(runs: pd.DataFrame) -> tuple:
    """:data:`RUN_COLUMNS`, with :data:`RUNTIME_COLUMNS` after the models' times when ``runs``
    were priced under a calibration."""
    if "calibration" not in runs.columns:
        return RUN_COLUMNS
    at = [k for k, _, _ in RUN_COLUMNS].index("objective")
    return RUN_COLUMNS[:at] + RUNTIME_COLUMNS + RUN_COLUMNS[at:]


def runs_table(runs: pd.DataFrame, bounds: pd.Series) -> dict:
    """Every run of one instance, one row each, with its schedule file linked (and its runtime
    time and calibration when priced under one, :func:`run_columns`); ``over bound`` is each
    run's synchronous time over ``bounds`` (per run: the stored bound that holds for its
    schedule's routing, :func:`collsynth.results.render.applicable_bounds`)."""
    rows, spec = [], run_columns(runs)
    for i, r in runs.iterrows():
        row = []
        for key, kind, _ in spec:
            if key == "over bound":
                row.append(cell(r["time_sync_s"] / bounds[i] if r["verified"] and bounds[i] else None, kind))
            elif key == "verified":
                row.append(cell("yes" if r["verified"] else "no"))
            elif key == "schedule":
                stored = not _missing(r["schedule_path"]) and bool(r["schedule_path"])
                row.append(cell("json" if stored else None,
                                href=f"../schedules/{Path(r['schedule_path']).name}" if stored else None))
            elif key == "status":
                status = Status.of_row(r["status"], None if _missing(r.get("bound_source")) else r.get("bound_source"))
                row.append(cell(status.value, cls=f"status-{status.value}"))
            else:
                row.append(cell(r.get(key), kind))
        rows.append(row)
    columns = [(k, tip) for k, _, tip in spec]
    shown = {row[[k for k, _, _ in spec].index("status")]["text"] for row in rows} if rows else set()
    return table("runs", columns, rows, "Every stored run of this instance (best first). Statuses: "
                 + "; ".join(legend(shown)) + ".")


SWEEP_SIZES = (1 << 10, 1 << 14, 1 << 18, 1 << 22, 1 << 26, 1 << 30)


def sizes_table(runs: pd.DataFrame) -> dict:
    """Each method's best stored schedule re-priced at other message sizes (synchronous model,
    ``T_L + T_B M/M0``; :func:`collsynth.results.figures.repriced`), the fastest per size in bold."""
    rows = figures.sweep_rows(runs)
    times = np.array([figures.repriced(r, np.array(SWEEP_SIZES)) for _, r in rows.iterrows()]).reshape(len(rows), -1)
    fastest = times.min(axis=0) if len(rows) else []
    body = [[cell(r["method"]), cell(figures.bytes_label(r["message_bytes"]), sort=r["message_bytes"])]
            + [cell(t, "s", cls="best" if np.isclose(t, f, rtol=1e-12) else "") for t, f in zip(times[i], fastest)]
            for i, (_, r) in enumerate(rows.iterrows())]
    columns = [("method", ""), ("solved at (bytes)", "M0: the size the schedule was solved and priced at")]
    columns += [(f"M = {figures.bytes_label(m)}", "synchronous time at this size") for m in SWEEP_SIZES]
    return table("sizes", columns, body, "Each method's best verified schedule re-priced at other message sizes "
                 "under the synchronous alpha-beta model (T_L + T_B x M / M0; no re-run). Bold: the fastest.")


def _json(text) -> dict:
    try:
        return json.loads(text) if isinstance(text, str) and text else {}
    except ValueError:
        return {}


def provenance_table(runs: pd.DataFrame) -> dict:
    """Where each run came from: code commit, host, package versions, limits, time."""
    rows = []
    for _, r in runs.iterrows():
        prov, extra = _json(r["provenance"]), _json(r["extra"])
        versions = ", ".join(f"{k} {v}" for k, v in sorted((prov.get("versions") or {}).items()))
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r["created_at"])) if not _missing(r["created_at"]) else None
        commit = str(prov.get("git_commit") or "")[:10] + (" (dirty)" if prov.get("git_dirty") else "")
        rows.append([cell(r["method"]), cell(r["seed"], "int"), cell(commit or None), cell(prov.get("host")),
                     cell(prov.get("python")), cell(prov.get("cores"), "int"), cell(r["threads"], "int"),
                     cell(r["time_limit"], "num"), cell(extra.get("solver_version")), cell(created),
                     cell(versions or None, cls="small"),
                     cell(json.dumps(extra, sort_keys=True, default=str, indent=1) if extra else None, "details")])
    columns = [("method", ""), ("seed", ""), ("git commit", ""), ("host", ""), ("python", ""), ("cores", ""),
               ("threads", "solver threads"), ("time limit (s)", ""), ("solver version", ""),
               ("finished (UTC)", ""), ("package versions", ""), ("details", "the producer's extra fields")]
    return table("provenance", columns, rows, "Provenance of every run.")


def bound_rows(instance, runs: pd.DataFrame, lp_bound: float) -> list[dict]:
    """The instance's lower bounds, one per cost model, with the argument and node set behind
    each (recomputed from the instance file by :func:`collsynth.tens.bounds.instance_bounds`),
    the TEN LP bound runs proved, and the instance's expected values."""
    b = bounds.instance_bounds(instance)

    def shown(bound, fmt=figures.seconds_label):
        return fmt(bound.value) if bound.computed else "not computed"

    def why(bound, text):
        return f"{text}; proved by {bound.label()}" + (f" ({bound.note})" if bound.note else "") \
            if bound.computed else bound.note
    lat, bw = b.part("sync_latency"), b.part("sync_bandwidth")
    rows = [
        {"name": "lower bound (synchronous model)", "value": shown(b.sync),
         "why": "latency bound + bandwidth bound; every run's 'over bound' divides by it"},
        {"name": "latency bound", "value": shown(lat),
         "why": why(lat, "the farthest a required piece must travel, each link costing its alpha")},
        {"name": "bandwidth bound", "value": shown(bw),
         "why": why(bw, "the bytes that must enter a node set over the bandwidth into it")},
        {"name": "lower bound (TEN cost model)", "value": shown(b.ten),
         "why": why(b.ten, "TEN timesteps of any schedule, pieces of any size, times the timestep")},
        {"name": "lower bound (event simulation)", "value": shown(b.event),
         "why": why(b.event, "FIFO links, latency counted once per link")},
        {"name": "TEN timesteps", "value": shown(b.timesteps, str),
         "why": why(b.timesteps, "schedules that respect the TEN's link capacity (TEN ILP, LP, greedy)")},
        {"name": "steps", "value": shown(b.steps, str),
         "why": why(b.steps, "no schedule sent on links finishes in fewer communication steps")},
        {"name": "diameter / Moore bound", "value": f"{instance.topology.diameter} / {instance.topology.moore_bound}",
         "why": "the smallest diameter any digraph of this order and degree can have"},
    ]
    if not _missing(lp_bound):
        rows.append({"name": "TEN LP bound (timesteps)", "value": f"{lp_bound:.6g}",
                     "why": "the TEN LP relaxation's optimum, proved by a ten-lp run or beside a TEN ILP run"})
    for key, value in sorted(instance.expect.items()):
        if isinstance(value, (bool, int, float)):
            rows.append({"name": f"expected {key}", "value": str(value), "why": "from the instance file's [expect]"})
        else:  # a note or a table (published numbers): shown as written
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            rows.append({"name": f"expected {key}", "value": "", "why": f"the instance file's [expect]: {text}"})
    sources = sorted({_text(v) for v in runs.get("bound_source", pd.Series(dtype=str))} - {""})
    if sources:
        rows.append({"name": "bound source recorded with the runs", "value": "", "why": "; ".join(sources)})
    stored = runs["lower_bound_s"].where(render.routings(runs) == "links").max()  # routed runs store their own
    if not _missing(stored) and b.sync.computed and not np.isclose(stored, b.sync.value, rtol=1e-9):
        rows.append({"name": "stored lower bound", "value": figures.seconds_label(stored), "warn": True,
                     "why": "differs from the bound of the instance file as it is now: the file changed since the runs"})
    return rows


# ---- pictures -----------------------------------------------------------------------------------

def picture_task(name: str, runs: pd.DataFrame, store_path: Path, img_dir: Path) -> dict:
    """What :func:`instance_pictures` needs for one instance (plain, picklable data): the
    instance file, the best verified schedule (least synchronous time) and the runs."""
    ok = runs[runs["verified"] & runs["schedule_path"].fillna("").astype(bool)]
    best = ok.sort_values(["time_sync_s", "method"], kind="stable").head(1)
    sched = None if best.empty else store.schedule_file(store_path, best.iloc[0].to_dict())
    path = figures.instance_path(runs.iloc[0].to_dict())
    return {"name": name, "slug": slug(name), "instance_file": str(path) if path else None,
            "stored_file": _text(runs.iloc[0]["instance_file"]), "img_dir": str(img_dir),
            "schedule": str(sched) if sched else None, "method": None if best.empty else best.iloc[0]["method"]}


PICTURE_ORDER = ("topology", "heatmap", "steps")


def instance_pictures(task: dict) -> dict:
    """Draw one instance's pictures: topology, and the best schedule step by step (small ones)
    and as a link-load heatmap. The schedule is verified against the instance file first; what
    cannot be drawn gets a note saying why."""
    img, base = Path(task["img_dir"]), task["slug"]
    pics, notes = {}, []
    if task["instance_file"] is None:
        notes.append(f"Instance file not found ({task['stored_file']}): no topology or schedule pictures.")
    else:
        instance = load_instance(task["instance_file"])
        pictures.draw_topology(instance, img / f"{base}-topology.png")
        pics["topology"] = "Topology."
        notes += _schedule_pictures(task, instance, img, pics)
    return {"pictures": [{"src": f"{base}-{k}.png", "caption": pics[k]} for k in PICTURE_ORDER if k in pics],
            "notes": notes}


def _schedule_pictures(task: dict, instance, img: Path, pics: dict) -> list[str]:
    """The best schedule's step-by-step view (when small) and heatmap; returns notes."""
    if task["schedule"] is None:
        return ["No verified schedule stored: no schedule pictures."]
    schedule = read_json(task["schedule"])  # a missing, unreadable or malformed file: an InputError naming it
    violation = verify(schedule, instance)
    method = task["method"]
    if violation is not None:
        return [f"The stored schedule of {method} no longer verifies against the instance file ({violation}): not drawn."]
    label, base, notes = f"best schedule: {method}", task["slug"], []
    if pictures.choose_view(schedule, instance.topology) != "heatmap":
        pictures.draw_steps(schedule, instance, img / f"{base}-steps.png", label)
        pics["steps"] = f"The best schedule ({method}) step by step."
    else:
        notes.append(f"Step-by-step view left out: the best schedule ({method}) has {len(schedule)} sends in "
                     f"{schedule.num_steps} steps, too many to read per step; the heatmap shows every link and step.")
    pictures.link_load_heatmap(schedule, instance, img / f"{base}-heatmap.png", label)
    pics["heatmap"] = f"Per-step link loads of the best schedule ({method})."
    return notes


def _map(fn, tasks: list, jobs: int, progress: bool, what: str) -> list:
    """``[fn(t) for t in tasks]``, on ``jobs`` processes when more than one, with a progress
    bar; the first task's InputError (in task order) is raised whatever the pool."""
    with Progress(console=Console(stderr=True), transient=True, disable=not progress) as bar:
        task = bar.add_task(what, total=len(tasks))
        if jobs <= 1:
            out = []
            for t in tasks:
                out.append(fn(t))
                bar.advance(task)
            return out
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            out = []
            try:
                for result in pool.map(fn, tasks):
                    out.append(result)
                    bar.advance(task)
            except InputError:
                pool.shutdown(cancel_futures=True)  # draw nothing more: the report is refused
                raise
            return out


# ---- the site -----------------------------------------------------------------------------------

SUITE_PLOTS = {
    "ratio_to_bound": "Each method's synchronous time over the instance's lower bound.",
    "performance_profile": "Performance profiles: the share of instances on which each method is within a factor "
                           "of the best, on schedule cost and on the producer's own solve time (wall clock only "
                           "where runs take a second or more).",
    "size_sweep": "Synchronous time vs message size per system (topology family), relative to the fastest method "
                  "at each size (stored schedules re-priced, no re-run).",
}


def _suites(df: pd.DataFrame):
    return df.groupby(df["suite"].fillna("").astype(str))


def suite_jobs(df: pd.DataFrame, img_root: Path) -> list[dict]:
    """One drawing job per suite and plot of :data:`SUITE_PLOTS` (plain, picklable data)."""
    return [{"plot": plot, "runs": runs, "folder": str(img_root / slug(suite or "no-suite"))}
            for suite, runs in _suites(df) for plot in SUITE_PLOTS]


def suite_plot(job: dict) -> list[Path]:
    """Draw one suite plot job; returns the files written (none when the plot is left out)."""
    return getattr(figures, job["plot"])(job["runs"], Path(job["folder"]), formats=("png",))


def suite_sections(df: pd.DataFrame, img_root: Path, drawn: list[list[Path]]) -> list[dict]:
    """Per suite: its plots (``drawn``, in :func:`suite_jobs` order) with captions, or a note
    saying why a plot is left out."""
    sections, results = [], iter(drawn)
    for suite, runs in _suites(df):
        name = suite or "(no suite)"
        plots, notes = [], []
        for plot, caption in SUITE_PLOTS.items():
            written = next(results)
            if written:
                plots.append({"src": Path(written[0]).relative_to(img_root.parent).as_posix(), "caption": caption})
            else:
                notes.append(f"{plot.replace('_', ' ')} left out: "
                             + ("fewer than two methods to compare." if runs["verified"].any() else "no verified run."))
        sections.append({"name": name, "id": f"suite-{slug(name)}", "runs": len(runs),
                         "instances": runs["instance"].nunique(), "methods": runs["method"].nunique(),
                         "plots": plots, "notes": notes})
    return sections


def draw_job(job: dict):
    """Run one drawing job of the report (a suite plot or an instance's pictures)."""
    return suite_plot(job) if "plot" in job else instance_pictures(job)


def status_legend(statuses) -> list[dict]:
    """What each of ``statuses`` means (``status``, ``meaning``), in the enum's order, from the
    documentation of :class:`~collsynth.tens.status.Status`.

    >>> status_legend(["optimal"])[0]["status"]
    'optimal'
    """
    wanted = {str(x) for x in statuses}
    return [{"status": s.value, "meaning": s.doc} for s in Status if s.value in wanted]


def summary(df: pd.DataFrame, store_path: Path) -> dict:
    """The index page's header: what the store holds and where it came from."""
    commits = sorted({str(_json(p).get("git_commit") or "")[:10] for p in df["provenance"]} - {""})
    created = df["created_at"].dropna()
    stamp = (lambda t: time.strftime("%Y-%m-%d %H:%M", time.gmtime(t)))
    return {
        "store": str(store_path), "runs": len(df), "instances": df["instance"].nunique(),
        "methods": df["method"].nunique(), "suites": sorted({str(s) for s in df["suite"].dropna()} - {""}),
        "statuses": render.statuses(df).value_counts().sort_index().to_dict(), "commits": commits,
        "legend": status_legend(set(render.statuses(df))),
        "finished": f"{stamp(created.min())} – {stamp(created.max())} UTC" if len(created) else "",
        "calibrations": sorted({str(c) for c in df.get("calibration", pd.Series(dtype=object)).dropna()}),
    }


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(SITE), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["bytes"] = figures.bytes_label
    return env


def _prepare(out: Path) -> None:
    """Create the report folder, clearing the generated parts of an earlier report there."""
    marker = out / "index.html"
    if marker.exists() and GENERATOR in marker.read_text(errors="replace"):
        for sub in ("instances", "img", "schedules"):
            shutil.rmtree(out / sub, ignore_errors=True)
    for sub in ("instances/img", "img", "schedules"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    for asset in ("report.css", "report.js"):
        shutil.copyfile(SITE / asset, out / asset)


GENERATOR = "collsynth report"


GENERATED = ("instances", "img", "schedules")  # the report's own subfolders: replaced whole


def build(store_path: str | Path = store.DEFAULT_STORE, out_dir: str | Path = DEFAULT_OUT,
          jobs: int = 1, progress: bool = False, calibration=None) -> dict:
    """Write the static report of the store ``store_path`` into ``out_dir``, whole or not at
    all: it is written into a staging folder and swapped in only when every page and picture
    is written (:func:`collsynth.outputs.replaced_folder`), so a run that fails midway leaves
    an earlier report byte for byte; the subfolders of an earlier report (:data:`GENERATED`)
    are replaced as a whole. Returns what was written (``index``, ``pages``, ``pictures``,
    ``files``). ``jobs`` processes draw the instance pictures. Given a ``calibration`` (a file or
    a loaded one), every run is also priced under the runtime model
    (:func:`collsynth.results.runtime_prices.runtime_frame`): its time and the calibration's name
    are columns of the instance pages' runs tables and ``runs.csv``, and the index names the
    calibration."""
    target = Path(out_dir)
    marker = target / "index.html"
    ours = marker.is_file() and GENERATOR in marker.read_text(errors="replace")
    with replaced_folder(target, whole=GENERATED if ours else ()) as stage:
        done = write(store_path, stage, jobs, progress, calibration)
    return {**done, "index": str(marker)}


def write(store_path: str | Path, out: Path, jobs: int = 1, progress: bool = False, calibration=None) -> dict:
    """Write the report of the store ``store_path`` into the folder ``out`` in place (see
    :func:`build`, which calls it on a staging folder)."""
    store_path, out = Path(store_path), Path(out)
    df = store.load(store_path)
    if calibration is not None:
        from .runtime_prices import runtime_frame
        df = df.join(runtime_frame(df, store_path, calibration))
    df["method"] = render.method(df)
    _prepare(out)
    render.runs(df).to_csv(out / "runs.csv", index=False, float_format=render.FLOAT_FORMAT, lineterminator="\n")
    for rel in df["schedule_path"].dropna():
        if rel and (store_path / rel).is_file():
            shutil.copyfile(store_path / rel, out / "schedules" / Path(rel).name)
    env = _environment()
    names = sorted(df["instance"].unique())
    groups = {n: g.sort_values(["time_sync_s", "method", "seed"], kind="stable", na_position="last")
              for n, g in df.groupby("instance")}
    tasks = [picture_task(n, groups[n], store_path, out / "instances" / "img") for n in names]
    plots = suite_jobs(df, out / "img")
    results = _map(draw_job, plots + tasks, jobs, progress, "report pictures")
    drawn = results[len(plots):]
    lp = render.lp_bounds(df)
    for i, name in enumerate(names):
        page = instance_page(name, groups[name], tasks[i], drawn[i], lp.get(name, np.nan))
        (out / "instances" / f"{slug(name)}.html").write_text(
            env.get_template("instance.html").render(generator=GENERATOR, **page))
    index = {"generator": GENERATOR, "summary": summary(df, store_path),
             "tables": [optimality_table(df), steps_table(df)],
             "suites": suite_sections(df, out / "img", results[:len(plots)]),
             "instances": [{"name": n, "href": f"instances/{slug(n)}.html"} for n in names]}
    (out / "index.html").write_text(env.get_template("index.html").render(**index))
    files = sorted(p for p in out.rglob("*") if p.is_file())
    return {"index": str(out / "index.html"), "pages": len(names),
            "pictures": sum(len(d["pictures"]) for d in drawn), "files": len(files)}


def instance_page(name: str, runs: pd.DataFrame, task: dict, drawn: dict, lp_bound: float) -> dict:
    """The template fields of one instance page."""
    instance = load_instance(task["instance_file"]) if task["instance_file"] else None
    about = {"file": task["instance_file"] or task["stored_file"], "suites": _suites_of(runs).get(name, "")}
    if instance is not None:
        topo = instance.topology.summary()
        about.update(description=instance.description, topology=topo,
                     collectives=[c.describe() for c in instance.collectives])
    return {"name": name, "about": about, "bounds": bound_rows(instance, runs, lp_bound) if instance else [],
            "runs_table": runs_table(runs, render.applicable_bounds(runs)), "provenance_table": provenance_table(runs),
            "sizes_table": sizes_table(runs),
            "pictures": [{**p, "src": f"img/{p['src']}"} for p in drawn["pictures"]], "notes": drawn["notes"]}
