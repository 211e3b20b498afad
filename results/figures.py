"""Plots from the results store (PNG and PDF) and schedule pictures.

- :func:`performance_profile`: Dolan-More performance profiles of solver wall times.
- :func:`ratio_to_bound`: each method's synchronous time over the instance's lower bound.
- :func:`size_sweep`: time vs message size per method for one instance (``T_L + T_B M/M0``).
- :func:`draw_ten`: a small schedule on its time-expanded network (TACOS Fig. 20 style:
  which chunk uses which link in which step).
- :func:`link_load_heatmap`: per-step load of every link, for a schedule of any size.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ..instances import Topology  # noqa: E402
from ..tens.schedule import Schedule  # noqa: E402
from .render import method  # noqa: E402

plt.rcParams.update({"svg.hashsalt": "collsynth", "pdf.compression": 6})
_META = {"png": {"Software": None}, "pdf": {"CreationDate": None, "Producer": None, "Creator": None}}


def save(fig, out_dir: Path, name: str) -> list[Path]:
    """Save ``fig`` as ``name.png`` and ``name.pdf`` (no timestamps in the files)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in ("png", "pdf"):
        p = out_dir / f"{name}.{ext}"
        fig.savefig(p, dpi=110, bbox_inches="tight", metadata=_META[ext])
        paths.append(p)
    plt.close(fig)
    return paths


def performance_profile(df: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Fraction of instances each solver finishes (optimal) within a factor tau of the best."""
    sol = df[(df["solver"].fillna("") != "")].copy()
    if sol.empty:
        return []
    sol["key"] = sol["instance"] + "|" + sol["producer"] + "|" + sol["driver"].fillna("")
    t = sol.pivot_table(index="key", columns="solver", values="wall_s", aggfunc="min")
    solved = sol.assign(ok=sol["status"] == "optimal").pivot_table(index="key", columns="solver", values="ok", aggfunc="max")
    t = t.where(solved.fillna(False).astype(bool))
    best = t.min(axis=1)
    ratios = t.div(best, axis=0)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    taus = np.logspace(0, 3, 200)
    for s in ratios.columns:
        r = ratios[s].to_numpy(dtype=float)
        ax.step(taus, [(r <= tau).mean() for tau in taus], where="post", label=s)
    ax.set_xscale("log")
    ax.set_xlabel("tau (time / best time)")
    ax.set_ylabel("fraction solved")
    ax.set_ylim(0, 1.02)
    ax.legend()
    ax.set_title("Solver performance profile")
    return save(fig, out_dir, "performance_profile")


def ratio_to_bound(df: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Bar chart: each method's best synchronous time divided by the lower bound, per instance."""
    ok = df[df["verified"]].copy()
    if ok.empty:
        return []
    ok["method"] = method(ok)
    ok["ratio"] = ok["time_sync_s"] / ok["lower_bound_s"]
    piv = ok.groupby(["instance", "method"])["ratio"].min().unstack("method").sort_index()
    fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(piv)), 4))
    piv.plot.bar(ax=ax, width=0.85)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_ylabel("time / lower bound")
    ax.set_yscale("log")
    ax.legend(fontsize=6, ncol=3)
    ax.set_title("Synchronous alpha-beta time relative to the lower bound")
    return save(fig, out_dir, "ratio_to_bound")


def size_sweep(df: pd.DataFrame, out_dir: Path, instance: str | None = None) -> list[Path]:
    """Time vs message size for every method on one instance (the one with most methods)."""
    ok = df[df["verified"] & df["T_B_s"].notna()].copy()
    if ok.empty:
        return []
    ok["method"] = method(ok)
    if instance is None:
        instance = ok.groupby("instance")["method"].nunique().sort_values(kind="stable").index[-1]
    g = ok[ok["instance"] == instance].groupby("method").first()
    sizes = np.logspace(10, 30, 41, base=2)
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for m, r in g.iterrows():
        ax.plot(sizes, r["T_L_s"] + r["T_B_s"] * sizes / r["message_bytes"], label=m)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("time (s)")
    ax.set_title(f"{instance}: time vs message size")
    ax.legend(fontsize=6)
    return save(fig, out_dir, "size_sweep")


def write_all(df: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """Every store plot into ``out_dir``."""
    out_dir = Path(out_dir)
    return performance_profile(df, out_dir) + ratio_to_bound(df, out_dir) + size_sweep(df, out_dir)


# ---- schedule pictures ------------------------------------------------------------------------

def link_loads(schedule: Schedule, topology: Topology) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Per-step load (chunk units) of every directed link pair used: ``[step, pair]``."""
    pairs = sorted(set(zip(schedule.src.tolist(), schedule.dst.tolist())))
    index = {p: i for i, p in enumerate(pairs)}
    loads = np.zeros((schedule.num_steps, len(pairs)))
    col = np.fromiter((index[p] for p in zip(schedule.src.tolist(), schedule.dst.tolist())), dtype=np.int64, count=len(schedule))
    np.add.at(loads, (schedule.step - 1, col), schedule.size)
    return loads, pairs


def link_load_heatmap(schedule: Schedule, topology: Topology, out: Path) -> Path:
    """Heatmap of per-step link loads (rows: links, columns: steps) for any schedule size."""
    loads, pairs = link_loads(schedule, topology)
    fig, ax = plt.subplots(figsize=(min(14, 3 + 0.25 * loads.shape[0]), min(12, 2 + 0.12 * len(pairs))))
    im = ax.imshow(loads.T, aspect="auto", interpolation="nearest", cmap="viridis")
    ax.set_xlabel("step")
    ax.set_ylabel("link")
    if len(pairs) <= 60:
        ax.set_yticks(range(len(pairs)), [f"{u}->{v}" for u, v in pairs], fontsize=6)
    ax.set_xticks(range(loads.shape[0]), [str(t + 1) for t in range(loads.shape[0])], fontsize=6)
    fig.colorbar(im, ax=ax, label="load (chunks)")
    ax.set_title("Per-step link load")
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return out


def draw_ten(schedule: Schedule, topology: Topology, out: Path) -> Path:
    """The schedule on its TEN: nodes in rows, steps in columns, one coloured arrow per send
    (colour = chunk), labelled with the chunk id (TACOS Fig. 20 style). For small schedules."""
    nodes = list(topology.nodes)
    row = {n: i for i, n in enumerate(nodes)}
    T = schedule.num_steps
    fig, ax = plt.subplots(figsize=(2 + 1.2 * T, 1 + 0.45 * len(nodes)))
    for t in range(T + 1):
        ax.scatter([t] * len(nodes), range(len(nodes)), s=18, color="0.6", zorder=3)
    cmap = plt.get_cmap("tab20")
    for c, s, d, st, size in zip(schedule.chunk.tolist(), schedule.src.tolist(), schedule.dst.tolist(), schedule.step.tolist(), schedule.size.tolist()):
        y0, y1 = row[s], row[d]
        ax.annotate("", xy=(st, y1), xytext=(st - 1, y0),
                    arrowprops={"arrowstyle": "->", "color": cmap(c % 20), "lw": 0.8 + 1.5 * size})
        ax.text(st - 0.5, (y0 + y1) / 2, str(c), fontsize=6, color=cmap(c % 20), ha="center")
    ax.set_yticks(range(len(nodes)), [str(n) for n in nodes])
    ax.set_xticks(range(T + 1))
    ax.set_xlabel("step (end of)")
    ax.set_ylabel("node")
    ax.set_title(f"{schedule.collective} on {topology.name}: sends per step (label = chunk)")
    ax.invert_yaxis()
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return out
