"""Swing deficiency report: tables and goodput plots from DataFrames (seed 002, Table 2, Figs 6, 10-14).

The DataFrames are computed by :mod:`collsynth.solvers.closed_form.deficiency` from priced
schedules (``python -m collsynth.solvers.closed_form.deficiency`` computes them and calls the
writers here); this module only renders: Markdown/CSV/LaTeX tables under ``results/tables/``
(through :func:`collsynth.results.render.write_table`) and PNG/PDF plots under
``results/plots/``.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from .figures import save  # noqa: E402
from .render import write_table  # noqa: E402

DEFICIENCY_COLUMNS = [
    "D", "dims", "p", "algorithm", "steps", "collectives", "Lambda", "Lambda_table2", "Psi",
    "Psi_table2", "Xi", "Xi_table2_p", "Xi_table2", "source",
]
STYLE = {
    "swing": ("S", "tab:red", "-"),
    "recursive-doubling": ("R", "tab:blue", "-"),
    "recursive-doubling-bw-mirrored": ("M", "tab:cyan", "--"),
    "bucket": ("B", "tab:green", "-"),
    "ring": ("H", "tab:purple", "-"),
}


def write_deficiency(df: pd.DataFrame, convergence: pd.DataFrame | None, tables_dir: str | Path) -> list[Path]:
    """``swing_deficiency.{md,csv,tex}`` (measured Lambda, Psi, Xi beside Table 2) and
    ``swing_xi_convergence.*`` (bandwidth-optimal Swing's Xi against 6/5, 28/27, 120/119)."""
    tables_dir = Path(tables_dir)
    cols = [c for c in DEFICIENCY_COLUMNS if c in df.columns]
    paths = write_table(df[cols].sort_values(["D", "algorithm"]).reset_index(drop=True), tables_dir,
                        "swing_deficiency")
    if convergence is not None and len(convergence):
        paths += write_table(convergence, tables_dir, "swing_xi_convergence")
    return paths


def _size_label(n: int) -> str:
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << k:
            return f"{n >> k}{unit}"
    return f"{n}B"


def write_goodput(df: pd.DataFrame, tables_dir: str | Path, plots_dir: str | Path) -> list[Path]:
    """``swing_goodput.{csv,md,tex}`` (every algorithm, size, time, goodput), a gain table
    (Swing over the best other algorithm, per figure and size) and one plot per figure."""
    tables_dir, plots_dir = Path(tables_dir), Path(plots_dir)
    cols = ["figure", "topology", "algorithm", "variant", "size", "time_s", "goodput_Gbps", "peak_Gbps", "source"]
    out = df[[c for c in cols if c in df.columns]].sort_values(["figure", "algorithm", "size"]).reset_index(drop=True)
    paths = write_table(out, tables_dir, "swing_goodput")
    gains = []
    for fig, g in df.groupby("figure"):
        sw = g[g.algorithm == "swing"].set_index("size")["time_s"]
        others = g[g.algorithm.isin(["recursive-doubling", "bucket", "ring"])]
        for n, t in sw.items():
            o = others[others["size"] == n]
            if o.empty:
                continue
            best = o.loc[o["time_s"].idxmin()]
            gains.append({"figure": fig, "size": _size_label(int(n)), "best_other": best["algorithm"],
                          "gain_percent": 100.0 * (best["time_s"] / t - 1.0)})
    if gains:
        paths += write_table(pd.DataFrame(gains), tables_dir, "swing_goodput_gain")
    for fig, g in df.groupby("figure"):
        paths += plot_goodput(g, plots_dir, f"swing_goodput_{fig}")
    return paths


def plot_goodput(g: pd.DataFrame, plots_dir: Path, name: str) -> list[Path]:
    """Goodput (Gb/s) against allreduce size, one line per algorithm (the paper's Fig. 6 style)."""
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for alg, (letter, color, ls) in STYLE.items():
        sub = g[g.algorithm == alg].sort_values("size")
        if sub.empty:
            continue
        ax.plot(sub["size"], sub["goodput_Gbps"], ls, color=color, marker="o", ms=3, label=f"{letter}: {alg}")
        if "variant" in sub and sub["variant"].notna().any():  # where lat switches to bw
            v = sub["variant"].tolist()
            for i in range(1, len(v)):
                if v[i] != v[i - 1]:
                    ax.plot(sub["size"].iloc[i], sub["goodput_Gbps"].iloc[i], "o", color=color, ms=8)
    if "peak_Gbps" in g:
        ax.axhline(float(g["peak_Gbps"].iloc[0]), color="gray", lw=0.8, ls=":", label="peak (D x 400 Gb/s)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ticks = sorted(g["size"].unique())[::4]
    ax.set_xticks(ticks)
    ax.set_xticklabels([_size_label(int(t)) for t in ticks], rotation=45, fontsize=7)
    ax.set_xlabel("allreduce size")
    ax.set_ylabel("goodput (Gb/s)")
    ax.set_title(f"{g['topology'].iloc[0]} ({g['figure'].iloc[0]})", fontsize=9)
    ax.legend(fontsize=7)
    return save(fig, plots_dir, name)
