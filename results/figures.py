"""Plots from the results store (PNG and PDF), each readable without the code.

Every plot says in its title which suite(s) and metric it shows, labels its axes with units,
accounts for every instance of the runs it is given (or names the ones it leaves out and
why), and states how its numbers were obtained:

- :func:`performance_profile`: Dolan and More performance profiles of the methods (every
  ``producer/solver/driver``) on schedule cost and on the producer's own solve time (never
  wall or compile time); a wall-clock panel only where runs are long enough for the wall
  clock to mean something.
- :func:`ratio_to_bound`: each method's synchronous time over the instance's lower bound, as
  an annotated instance x method grid (ratio 1 is a labelled cell, never a missing bar).
- :func:`size_sweep`: time vs message size, one panel per system (topology family), methods as
  lines on log-log axes, every stored schedule re-priced at other sizes (``T_L + T_B M/M0``)
  without a re-run.

Schedule and topology pictures live in :mod:`collsynth.results.pictures`.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.colors import LogNorm  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator  # noqa: E402

from ..instances import CORPUS  # noqa: E402
from .render import applicable_bounds, best_runs, method  # noqa: E402

plt.rcParams.update({"svg.hashsalt": "collsynth", "pdf.compression": 6})
_META = {"png": {"Software": None}, "pdf": {"CreationDate": None, "Producer": None, "Creator": None}}
PROFILE_METRICS = {
    "time_sync_s": "schedule cost: synchronous alpha-beta time",
    "solve_s": "solver time: the producer's own solve time",
    "wall_s": "wall clock of the run (runs of 1 s or more)",
}
TIME_FLOOR_S = 1e-3  # times below the clock's noise count as this much in the time profiles
WALL_MEANINGFUL_S = 1.0  # a wall-clock profile covers only instances whose slowest run took this long
MIN_WALL_INSTANCES = 5  # and is drawn only when that leaves this many instances
RATIO_TICKS = (1, 1.2, 1.5, 2, 3, 5, 10, 20, 50, 100)
SWEEP_SIZES = np.logspace(10, 30, 41, base=2)  # 1 KiB .. 1 GiB
_LINESTYLES = ("-", "--", "-.", ":")


def save(fig, out_dir: Path, name: str, formats=("png", "pdf"), dpi: int = 110) -> list[Path]:
    """Save ``fig`` as ``name.<format>`` for each format (no timestamps in the files)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    tight = None if fig.get_layout_engine() is not None else "tight"  # a layout engine already fits it
    for ext in formats:
        p = out_dir / f"{name}.{ext}"
        fig.savefig(p, dpi=dpi, bbox_inches=tight, metadata=_META[ext])
        paths.append(p)
    plt.close(fig)
    return paths


def scope(df: pd.DataFrame) -> str:
    """How a plot names the runs it covers: ``suite quick`` or ``suites a, b``."""
    suites = sorted({str(s) for s in df.get("suite", pd.Series(dtype=str)).dropna() if str(s)})
    if not suites:
        return "all stored runs"
    return ("suite " if len(suites) == 1 else "suites ") + ", ".join(suites)


def seconds_label(v: float, _pos=None) -> str:
    """A time in seconds with an SI prefix: ``2.5e-06 -> '2.5 µs'``.

    >>> seconds_label(2.5e-6), seconds_label(0.01), seconds_label(3.0)
    ('2.5 µs', '10 ms', '3 s')
    """
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if abs(v) >= scale or unit == "ns":
            return f"{v / scale:.3g} {unit}"
    return f"{v:.3g} s"


def bytes_label(v: float, _pos=None) -> str:
    """A size in bytes with a binary prefix: ``1048576 -> '1 MiB'``.

    >>> bytes_label(1024), bytes_label(1 << 20), bytes_label(3 << 29), bytes_label(100)
    ('1 KiB', '1 MiB', '1.5 GiB', '100 B')
    """
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if v >= 1 << k:
            return f"{v / (1 << k):.3g} {unit}"
    return f"{v:.3g} B"


def ratio_label(v: float, _pos=None) -> str:
    """A ratio as plain decimals (no ``6x10^0`` ticks).

    >>> ratio_label(1.5), ratio_label(20.0), ratio_label(1024.0)
    ('1.5', '20', '1024')
    """
    return f"{v:.0f}" if v >= 100 else f"{v:.3g}"


def method_styles(methods) -> dict[str, dict]:
    """One colour and line style per method, stable across every plot of a report (styles
    differ in dash pattern too, so methods whose lines coincide stay visible)."""
    cmap = plt.get_cmap("tab10")
    return {m: {"color": cmap(i % 10), "linestyle": _LINESTYLES[i % 4]}
            for i, m in enumerate(sorted(methods))}


def _footnote(fig, text: str) -> None:
    """Write ``text`` under the plot, wrapped to the figure's width, in space the figure's
    layout keeps free for it."""
    height, width = fig.get_figheight(), fig.get_figwidth()
    lines = textwrap.wrap(text, width=int(width * 15))  # about 15 characters per inch at 8 pt
    reserve = (0.16 * len(lines) + 0.12) / height
    engine = fig.get_layout_engine()
    if engine is not None:
        engine.set(rect=(0, reserve, 1, 1 - reserve))
    fig.text(0.01, 0.06 / height, "\n".join(lines), ha="left", va="bottom", fontsize=8, color="0.25")


# ---- performance profiles ---------------------------------------------------------------------

def best_per_method(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    """``[instance, method]`` table of the best (smallest) ``metric`` over each method's
    verified runs (NaN where the method has no verified schedule for the instance)."""
    ok = df[df["verified"]].copy()
    ok["method"] = method(ok)
    table = ok.groupby(["instance", "method"])[metric].min().unstack("method")
    return table.reindex(sorted(df["instance"].unique())).reindex(columns=sorted(method(df).unique()))


def profile_ratios(df: pd.DataFrame, metric: str, floor: float = 0.0) -> pd.DataFrame:
    """Performance ratios ``r[p, s] = t[p, s] / min_s t[p, s]`` (Dolan and More, "Benchmarking
    optimization software with performance profiles", Math. Programming 91, 2002, section 2)
    over every instance of ``df`` and every method; ``inf`` where a method produced no verified
    schedule. Values below ``floor`` count as ``floor``.

    >>> runs = pd.DataFrame({"instance": ["a", "a", "b"], "producer": ["x", "y", "x"],
    ...     "solver": "", "driver": "", "verified": True, "t": [2.0, 1.0, 3.0]})
    >>> profile_ratios(runs, "t").to_dict()
    {'x': {'a': 2.0, 'b': 1.0}, 'y': {'a': 1.0, 'b': inf}}
    """
    t = best_per_method(df, metric).clip(lower=floor)
    return t.div(t.min(axis=1), axis=0).fillna(np.inf)


def _log_ticks(top: float) -> list[float]:
    """At most about eight readable ticks from 1 to ``top`` on a log axis.

    >>> _log_ticks(5), _log_ticks(3000)
    ([1, 1.5, 2, 3, 4], [1, 4, 16, 64, 256, 1024])
    """
    if top <= 16:
        return [t for t in (1, 1.5, 2, 3, 4, 6, 8, 12, 16) if t <= top]
    step = max(1, int(np.ceil(np.log2(top) / 7)))
    return [2 ** k for k in range(0, int(np.log2(top)) + 1, step)]


def _profile_panel(ax, ratios: pd.DataFrame, styles: dict, title: str) -> None:
    finite = ratios.to_numpy()[np.isfinite(ratios.to_numpy())]
    top = max(2.0, float(finite.max()) * 1.15) if finite.size else 2.0
    taus = np.unique(np.concatenate([[1.0, top], finite]))
    n = len(ratios)
    for m in ratios.columns:
        r = ratios[m].to_numpy()
        frac = [(r <= tau).sum() / n for tau in taus]
        wins = int((r <= 1.0).sum())
        ax.step(taus, frac, where="post", lw=1.8, label=f"{m} (best on {wins}/{n})", **styles[m])
    ax.set_xscale("log", base=2)
    ax.set_xlim(1, top)
    ax.xaxis.set_major_locator(FixedLocator(_log_ticks(top)))
    ax.xaxis.set_major_formatter(FuncFormatter(ratio_label))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.set_xlabel("τ: method's value / best method's value on the instance (log scale)")
    ax.set_ylabel(f"fraction of the {n} instances within τ")
    ax.set_title(title, fontsize=10)


def _solving_methods(df: pd.DataFrame) -> list[str]:
    """The methods that report a solve time of their own (``solve_s`` > 0 on a verified run):
    solvers and searches; constructions (closed forms) report none."""
    ok = df[df["verified"]]
    return sorted(set(method(ok)[ok["solve_s"].fillna(0).to_numpy() > 0]))


def _long_instances(df: pd.DataFrame) -> list[str]:
    """The instances whose slowest verified run took :data:`WALL_MEANINGFUL_S` or more of wall
    clock: where the wall clock measures the method rather than start-up and clock noise."""
    ok = df[df["verified"]]
    slowest = ok.groupby("instance")["wall_s"].max()
    return sorted(slowest[slowest >= WALL_MEANINGFUL_S].index)


def profile_panels(df: pd.DataFrame) -> tuple[list[tuple[str, pd.DataFrame]], list[str]]:
    """The panels of :func:`performance_profile`, each ``(title, ratios)``
    (:func:`profile_ratios`), and a note for each panel or method left out: schedule cost over
    every method; solver time (``solve_s``, the producer's own: never wall or compile time)
    over the methods that report one, when there are two; wall clock only over the instances
    where a run took :data:`WALL_MEANINGFUL_S` or more, when there are
    :data:`MIN_WALL_INSTANCES`."""
    panels = [(PROFILE_METRICS["time_sync_s"], profile_ratios(df, "time_sync_s"))]
    notes = []
    solving = _solving_methods(df)
    others = sorted(set(method(df)) - set(solving))
    if len(solving) >= 2:
        panels.append((PROFILE_METRICS["solve_s"], profile_ratios(df[method(df).isin(solving)], "solve_s", TIME_FLOOR_S)))
        if others:
            notes.append(f"Solver time leaves out {', '.join(others)}: they construct their schedules without "
                         "a solve and report no solve time.")
    else:
        notes.append("No solver-time profile: fewer than two methods report a solve time.")
    long = _long_instances(df)
    if len(long) >= MIN_WALL_INSTANCES:
        title = f"wall clock of the run ({len(long)} instances with a run of {WALL_MEANINGFUL_S:g} s or more)"
        panels.append((title, profile_ratios(df[df["instance"].isin(long)], "wall_s", TIME_FLOOR_S)))
    else:
        notes.append(f"No wall-clock profile: {len(long)} instance(s) have a run of {WALL_MEANINGFUL_S:g} s or "
                     f"more (at least {MIN_WALL_INSTANCES} needed); shorter runs time start-up and clock noise.")
    return panels, notes


def profile_figure(df: pd.DataFrame):
    """The figure of :func:`performance_profile`, or None when it would say nothing."""
    methods = sorted(method(df).unique())
    if len(methods) < 2 or not df["verified"].any():
        return None
    styles = method_styles(methods)
    panels, notes = profile_panels(df)
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.2 + 0.13 * len(methods)),
                             layout="constrained", squeeze=False)
    for ax, (title, ratios) in zip(axes.flat, panels):
        _profile_panel(ax, ratios, styles, title)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    n_inst = df["instance"].nunique()
    fig.suptitle(f"{scope(df)}: performance profiles of {len(methods)} methods over {n_inst} instances")
    _footnote(fig, " ".join([
        f"Covers {len(df)} stored runs. A method counts on an instance only with a verified schedule "
        "(best of its seeds); unsupported, failed or timed-out runs never reach the curve, so a curve's "
        "right end is the share of instances the method handles. Solver time is the producer's own "
        "(solve_s: the solver's or search's time; model builds, compiling, verification and pricing are "
        f"not in it); times under {TIME_FLOOR_S * 1e3:g} ms count as {TIME_FLOOR_S * 1e3:g} ms (clock noise).",
        *notes]))
    return fig


def performance_profile(df: pd.DataFrame, out_dir: Path, name: str = "performance_profile",
                        formats=("png", "pdf")) -> list[Path]:
    """Performance profiles of every method side by side (Dolan and More, "Benchmarking
    optimization software with performance profiles", Math. Programming 91, 2002): on the
    synchronous time of its schedule, on its solver time, and on wall clock where runs are long
    enough to measure (:func:`profile_panels`). A method with no verified schedule for an
    instance never reaches it. Needs at least two methods (one method is a flat line at 1);
    returns [] otherwise."""
    fig = profile_figure(df)
    return [] if fig is None else save(fig, out_dir, name, formats)


# ---- ratio to the lower bound ------------------------------------------------------------------

def bound_ratios(df: pd.DataFrame) -> pd.DataFrame:
    """``[instance, method]``: the best synchronous time of each method over the instance's
    lower bound for that schedule's routing (:func:`collsynth.results.render.applicable_bounds`;
    NaN: no verified schedule); rows are every instance of ``df``."""
    ok = df[df["verified"].astype(bool)]
    ok = ok.assign(method=method(ok), ratio=pd.to_numeric(ok["time_sync_s"], errors="coerce") / applicable_bounds(df))
    table = best_runs(ok, "time_sync_s").pivot(index="instance", columns="method", values="ratio")
    return table.reindex(sorted(df["instance"].unique())).reindex(columns=sorted(method(df).unique()))


def ratio_to_bound(df: pd.DataFrame, out_dir: Path, name: str = "ratio_to_bound",
                   formats=("png", "pdf")) -> list[Path]:
    """Instance x method grid of the synchronous alpha-beta time over the instance's lower
    bound, each cell labelled with its ratio (the best per instance in bold); a dash where
    the method has no verified schedule. Colour is on a log scale from 1 (meets the bound)."""
    if not df["verified"].any():
        return []
    ratios = bound_ratios(df)
    values = ratios.to_numpy(dtype=float)
    rows, cols = values.shape
    fig, ax = plt.subplots(figsize=(max(7.0, 2.6 + 1.05 * cols), max(4.5, 1.9 + 0.3 * rows)), layout="constrained")
    top = max(10.0, float(np.nanmax(values)))
    im = ax.imshow(np.ma.masked_invalid(values), cmap="YlOrRd", norm=LogNorm(1.0, top), aspect="auto")
    ax.set_facecolor("0.92")
    best = np.nanmin(values, axis=1)
    for i in range(rows):
        for j in range(cols):
            v = values[i, j]
            text = "—" if np.isnan(v) else f"{v:.2f}"
            dark = not np.isnan(v) and np.log(v) / np.log(top) > 0.6
            ax.text(j, i, text, ha="center", va="center", fontsize=8,
                    color="white" if dark else "black",
                    fontweight="bold" if not np.isnan(v) and v <= best[i] * (1 + 1e-9) else "normal")
    ax.set_xticks(range(cols), ratios.columns, rotation=30, ha="left", rotation_mode="anchor", fontsize=9)
    ax.set_yticks(range(rows), ratios.index, fontsize=8)
    ax.set_xlabel("method (producer/solver/driver)")
    ax.set_ylabel("instance")
    ax.xaxis.set_ticks_position("top")
    ax.xaxis.set_label_position("top")
    bar = fig.colorbar(im, ax=ax, shrink=min(1.0, 8 / max(rows, 1) + 0.3), pad=0.01, aspect=30)
    bar.set_label("time / lower bound (1 = meets the bound)")
    bar.set_ticks([t for t in RATIO_TICKS if t <= top], labels=[ratio_label(t) for t in RATIO_TICKS if t <= top])
    bar.ax.yaxis.set_minor_locator(NullLocator())
    title = f"{scope(df)}: synchronous alpha-beta time / lower bound ({rows} instances x {cols} methods)"
    ax.set_title("\n".join(textwrap.wrap(title, int(fig.get_figwidth() * 10))), pad=12)
    missing = int(np.isnan(values).sum())
    _footnote(fig, (
        "Each cell: the method's best verified schedule priced under the synchronous alpha-beta model, "
        "divided by the instance's lower bound (distance x alpha + bandwidth bound). Bold: the best on "
        f"the instance. —: no verified schedule ({missing} cells: the producer does not support the "
        "instance, or its run failed; the instance pages say which)."))
    return save(fig, out_dir, name, formats)


# ---- message-size sweep ------------------------------------------------------------------------

def sweep_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Per instance and method, the verified run a size sweep re-prices: the one with the least
    synchronous time at its stored size (rows need ``T_L_s``, ``T_B_s`` and ``message_bytes``)."""
    ok = df[df["verified"] & df["T_B_s"].notna() & df["T_L_s"].notna() & df["message_bytes"].notna()].copy()
    ok["method"] = method(ok)
    ok = ok.sort_values(["instance", "method", "time_sync_s"], kind="stable")
    return ok.groupby(["instance", "method"], as_index=False).first()


def repriced(row, sizes: np.ndarray) -> np.ndarray:
    """The synchronous time of a stored schedule at message sizes ``sizes``: ``T_L + T_B M/M0``
    (every load scales with M under the alpha-beta model; Shi et al., "Swing", NSDI 2024, section 2).

    >>> repriced({"T_L_s": 1e-6, "T_B_s": 2e-6, "message_bytes": 1024}, np.array([1024, 4096]))
    array([3.e-06, 9.e-06])
    """
    return row["T_L_s"] + row["T_B_s"] * np.asarray(sizes, dtype=float) / row["message_bytes"]


def _sweep_lines(rows: pd.DataFrame, relative: bool) -> dict[str, np.ndarray]:
    lines = {r["method"]: repriced(r, SWEEP_SIZES) for _, r in rows.iterrows()}
    if relative:
        fastest = np.min(list(lines.values()), axis=0)
        lines = {m: t / fastest for m, t in lines.items()}
    return lines


def system_of(path: Path | None, instance: str) -> str:
    """The system an instance runs on: the topology generator its instance file names
    (``torus``, ``dgx1``, ...), ``file <name>`` for a topology read from a file, else (no
    readable TOML file) the instance's own name.

    >>> system_of(None, "ring8-allgather")
    'ring8-allgather'
    """
    import tomllib

    try:
        with open(path, "rb") as f:
            topology = tomllib.load(f).get("topology", {})
    except (TypeError, OSError, ValueError):  # no file, unreadable, not TOML (a peer's input)
        return instance
    if topology.get("generator"):
        return str(topology["generator"])
    return f"file {Path(str(topology['file'])).name}" if topology.get("file") else instance


def instance_path(row: dict) -> Path | None:
    """The instance file a run was made from: its stored path, else the corpus file of that
    name (a store copied from another machine); None when neither exists."""
    stored = row.get("instance_file")
    stored = stored if isinstance(stored, str) else ""  # the database's NULL reads as None or NaN
    for path in (Path(stored), CORPUS / Path(stored).name) if stored else ():
        if path.is_file():
            return path
    return None


def instance_systems(df: pd.DataFrame) -> dict[str, str]:
    """``instance -> system`` (:func:`system_of`) for every instance of ``df``, from the
    instance files the runs were made from (found as the report finds them)."""
    first = df.drop_duplicates("instance")
    return {row["instance"]: system_of(instance_path(row), row["instance"]) for row in first.to_dict("records")}


def system_lines(rows: pd.DataFrame) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Per method, its time over the fastest method's at each size of :data:`SWEEP_SIZES`,
    the geometric mean over the instances of ``rows`` on which it has a verified schedule
    (Fleming and Wallace, "How not to lie with statistics: the correct way to summarize
    benchmark results", CACM 29(3), 1986); and on how many instances each method has one.

    >>> rows = pd.DataFrame({"instance": ["a", "a", "b", "b"], "method": ["x", "y", "x", "y"],
    ...                      "T_L_s": [1.0, 4.0, 1.0, 0.25], "T_B_s": 0.0, "message_bytes": 1.0})
    >>> lines, counts = system_lines(rows)
    >>> float(lines["x"][0]), float(lines["y"][0]), counts
    (2.0, 2.0, {'x': 2, 'y': 2})
    """
    logs: dict[str, list[np.ndarray]] = {}
    for _, g in rows.groupby("instance"):
        for m, ratio in _sweep_lines(g, relative=True).items():
            logs.setdefault(m, []).append(np.log(ratio))
    return ({m: np.exp(np.mean(v, axis=0)) for m, v in sorted(logs.items())},
            {m: len(v) for m, v in sorted(logs.items())})


def _sweep_panel(ax, lines: dict[str, np.ndarray], priced_at, styles: dict, title: str, relative: bool,
                 ylim: tuple[float, float] | None = None) -> None:
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    for m, t in lines.items():
        ax.plot(SWEEP_SIZES, t, lw=1.5, label=m, **styles[m])
    for m0 in sorted(priced_at):
        ax.axvline(m0, color="0.4", lw=0.8, ls=(0, (3, 3)))
        if not relative:
            ax.annotate(f" priced at {bytes_label(m0)}", (m0, 0.02), xycoords=("data", "axes fraction"),
                        fontsize=8, color="0.3")
    ax.set_xlim(SWEEP_SIZES[0], SWEEP_SIZES[-1])
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.xaxis.set_major_locator(FixedLocator([2.0 ** k for k in (10, 20, 30)]))
    ax.xaxis.set_major_formatter(FuncFormatter(bytes_label))
    ax.xaxis.set_minor_locator(NullLocator())
    if relative:
        ax.yaxis.set_major_locator(FixedLocator(RATIO_TICKS))
        ax.yaxis.set_major_formatter(FuncFormatter(ratio_label))
    else:
        ax.yaxis.set_major_formatter(FuncFormatter(seconds_label))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.grid(alpha=0.3, which="major")
    ax.set_title(title, fontsize=10)


SWEEP_NOTE = ("Each line is a stored verified schedule (the method's best) re-priced at size M as "
              "T_L + T_B x M / M0 under the synchronous alpha-beta model, without a re-run; dashed: "
              "M0, the size it was solved and priced at.")
SYSTEM_NOTE = (" One panel per system (the topology generator of the instance file): each method's time over "
               "the fastest method's at that size on the same instance (1 = fastest), the geometric mean over "
               "the system's instances on which the method has a verified schedule.")


def sweep_figure(df: pd.DataFrame, columns: int = 4):
    """The figure of :func:`size_sweep`, or None when no instance has a priced schedule."""
    rows = sweep_rows(df)
    instances = sorted(rows["instance"].unique())
    if not instances:
        return None
    styles = method_styles(method(df).unique())
    note = SWEEP_NOTE
    left_out = sorted(set(df["instance"]) - set(instances))
    if left_out:
        note += f" Left out (no verified schedule priced under this model): {', '.join(left_out)}."
    if len(instances) == 1:
        fig, ax = plt.subplots(figsize=(7, 4.6), layout="constrained")
        _sweep_panel(ax, _sweep_lines(rows, relative=False), rows["message_bytes"].unique(), styles,
                     f"{instances[0]}: synchronous time vs message size", relative=False)
        ax.set_ylabel("synchronous time (s, log)")
        ax.set_xlabel("message size M (bytes, log)")
        ax.legend(fontsize=8, loc="upper left", ncol=2)
        _footnote(fig, note)
        return fig
    systems = instance_systems(rows)
    groups = {name: rows[rows["instance"].map(systems) == name] for name in sorted(set(systems.values()))}
    fig = _sweep_grid(groups, styles, columns, note + SYSTEM_NOTE)
    fig.suptitle(f"{scope(df)}: synchronous time vs message size, relative to the fastest method, "
                 f"{len(groups)} systems ({len(instances)} instances)", y=1 - 0.12 / fig.get_figheight(), va="top")
    _footnote(fig, note + SYSTEM_NOTE)
    return fig


def size_sweep(df: pd.DataFrame, out_dir: Path, name: str = "size_sweep", formats=("png", "pdf"),
               columns: int = 4) -> list[Path]:
    """Time vs message size, one line per method: each stored schedule re-priced at every size
    by :func:`repriced` (no re-run). One instance: absolute times. Several: one panel per system
    (:func:`system_of`) with a verified, priced schedule (the instances without one named in a
    note), each method's time over the fastest method's at that size, the geometric mean over
    the system's instances (:func:`system_lines`), so crossovers show (1 = fastest); log-log."""
    fig = sweep_figure(df, columns)
    return [] if fig is None else save(fig, out_dir, name, formats)


def _sweep_grid(groups: dict[str, pd.DataFrame], styles: dict, columns: int, note: str):
    """One :func:`_sweep_panel` (relative times) per system of ``groups`` with its axes labelled,
    one legend of every method on top, room under them for the footnote ``note`` (written by
    :func:`_footnote`)."""
    ncols = min(columns, len(groups))
    nrows = -(-len(groups) // ncols)
    panel_w, panel_h = 3.9, 3.1
    width = 0.4 + panel_w * ncols
    top_in, bottom_in = 1.0, 0.45 + 0.16 * len(textwrap.wrap(note, int(width * 15)))
    height = top_in + bottom_in + panel_h * nrows
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, height), squeeze=False)
    fig.subplots_adjust(left=0.75 / width, right=1 - 0.1 / width, top=1 - top_in / height,
                        bottom=bottom_in / height, hspace=0.55, wspace=0.35)
    lines = {name: system_lines(g) for name, g in groups.items()}
    top = max(float(np.max(list(ratios.values()))) for ratios, _ in lines.values())
    for ax, (name, g) in zip(axes.flat, groups.items()):
        ratios, _ = lines[name]
        k = g["instance"].nunique()
        _sweep_panel(ax, ratios, g["message_bytes"].unique(), styles, f"{name} ({k} instance{'s' if k != 1 else ''})",
                     relative=True, ylim=(0.9, top * 1.15))
        ax.set_xlabel("message size M (bytes, log)", fontsize=8)
        ax.set_ylabel("time / fastest (log)", fontsize=8)
    for ax in axes.flat[len(groups):]:
        ax.set_visible(False)
    shown = sorted({m for ratios, _ in lines.values() for m in ratios})
    handles = [plt.Line2D([], [], lw=2, **styles[m]) for m in shown]
    fig.legend(handles, shown, loc="upper center", bbox_to_anchor=(0.5, 1 - 0.4 / height),
               ncol=min(len(shown), 8), fontsize=8, frameon=False)
    return fig


def write_all(df: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """Every store plot into ``out_dir``."""
    out_dir = Path(out_dir)
    return performance_profile(df, out_dir) + ratio_to_bound(df, out_dir) + size_sweep(df, out_dir)
