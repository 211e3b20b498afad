"""Pictures of one instance and one verified schedule: the topology, the schedule step by step,
on its time-expanded network, or as per-step link loads.

Which view suits a schedule depends on its size (:func:`choose_view`): the TEN picture (Zhao et
al., "TACOS: Topology-Aware Collective Algorithm Synthesizer", MICRO 2024, Fig. 20 style) only
for tiny schedules, one topology panel per step for small ones, and the link-load heatmap, which
stays readable at any size, for the rest. Links are always named ``u->v``.
"""

from __future__ import annotations

import textwrap
from fractions import Fraction
from functools import lru_cache
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import networkx as nx  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.collections import EllipseCollection, LineCollection, PolyCollection  # noqa: E402
from matplotlib.transforms import blended_transform_factory  # noqa: E402

from ..instances import Instance, Topology  # noqa: E402
from ..tens.schedule import Schedule  # noqa: E402

TEN_VIEW = {"sends": 48, "nodes": 12}                      # largest schedule drawn on its TEN
STEP_VIEW = {"steps": 16, "sends_per_step": 48, "nodes": 32}  # largest drawn step by step
LABELLED_SENDS = 16  # panels with more sends than this show arrows without chunk labels
VIEWS = ("ten", "steps", "heatmap")


def choose_view(schedule: Schedule, topology: Topology) -> str:
    """The most detailed view that stays readable: ``ten`` for tiny schedules (at most
    ``TEN_VIEW`` sends and nodes), ``steps`` for small ones (``STEP_VIEW``: steps with sends,
    sends per step, nodes), else ``heatmap``.

    >>> from collsynth.instances import generators
    >>> from collsynth.tens.schedule import from_sends
    >>> ring = generators.ring(4)
    >>> choose_view(from_sends([(0, 0, 1, 0, 1, 1)], "allgather", 4, 4), ring)
    'ten'
    >>> def spread(n, steps):  # n sends spread evenly over the steps
    ...     return from_sends([(0, 0, 1, 0, 1, 1 + i % steps) for i in range(n)], "allgather", 4, 4)
    >>> choose_view(spread(60, 6), ring), choose_view(spread(320, 6), ring)
    ('steps', 'heatmap')
    """
    nodes = len(topology.nodes)
    if len(schedule) <= TEN_VIEW["sends"] and nodes <= TEN_VIEW["nodes"]:
        return "ten"
    per_step = np.bincount(schedule.step).max(initial=0) if len(schedule) else 0
    busy_steps = len(np.unique(schedule.step))  # draw_steps shows the steps with sends only
    if busy_steps <= STEP_VIEW["steps"] and per_step <= STEP_VIEW["sends_per_step"] \
            and nodes <= STEP_VIEW["nodes"]:
        return "steps"
    return "heatmap"


def draw(schedule: Schedule, instance: Instance, out: Path, kind: str = "auto", label: str = "") -> str:
    """Draw ``schedule`` (already verified against ``instance``) as ``kind`` (``auto``: by
    :func:`choose_view`) into ``out``; returns the view drawn."""
    if kind == "auto":
        kind = choose_view(schedule, instance.topology)
    {"ten": draw_ten, "steps": draw_steps, "heatmap": link_load_heatmap}[kind](schedule, instance, out, label)
    return kind


def _save(fig, out: Path, dpi: int = 100) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    png = out.suffix == ".png"
    meta = {"Software": None} if png else {"CreationDate": None, "Producer": None, "Creator": None}
    fig.savefig(out, dpi=dpi, metadata=meta,  # fixed geometry (see _figure): nothing to trim
                pil_kwargs={"compress_level": 3} if png else None)  # about twice as fast as 6, 10% larger
    plt.close(fig)
    return out


def _figure(width: float, height: float):
    """A figure of ``width`` x ``height`` inches whose axes are placed by :func:`_axes` (fixed
    geometry in inches: one draw per picture, no layout passes)."""
    return plt.figure(figsize=(width, height))


def _axes(fig, left: float, bottom: float, width: float, height: float):
    """Axes at a position given in inches from the figure's lower left corner."""
    W, H = fig.get_figwidth(), fig.get_figheight()
    return fig.add_axes((left / W, bottom / H, width / W, height / H))


def _kinds(instance: Instance) -> str:
    return " + ".join(c.kind for c in instance.collectives)


def _suptitle(fig, instance: Instance, what: str, label: str = "", fontsize: float = 10) -> None:
    """The picture's title (instance, what is shown, and ``label``), wrapped to the figure."""
    width = int(fig.get_figwidth() * 130 / fontsize)  # characters per line
    lines = textwrap.wrap(f"{instance.name}: {what}", width) + [ln for part in label.split("\n")
                                                                for ln in textwrap.wrap(part, width)]
    fig.suptitle("\n".join(lines), fontsize=fontsize, y=1 - 0.08 / fig.get_figheight(), va="top")


def piece_label(chunk: int, lo: int, hi: int, denom: int) -> str:
    """``chunk`` for a whole chunk, ``chunk[lo,hi)`` for a piece of it.

    >>> piece_label(3, 0, 1, 1), piece_label(3, 1, 2, 3)
    ('3', '3[1/3,2/3)')
    """
    if lo == 0 and hi == denom:
        return str(chunk)
    return f"{chunk}[{Fraction(lo, denom)},{Fraction(hi, denom)})"


# ---- link loads ---------------------------------------------------------------------------------

def send_spans(schedule: Schedule, instance: Instance | None) -> np.ndarray:
    """How many steps each send is on its link: for a schedule counted in TEN timesteps (its
    ``meta["timestep_s"]``, sends on links), ``ceil(occupancy / timestep)`` with the occupancy
    ``alpha + piece bytes / one parallel link's bandwidth`` (only the transmission when the latency
    is pipelined), the TEN's discretisation (Won et al., TACOS, 2023, Section IV-C); its step is
    the last of them. 1 for every send otherwise."""
    ones = np.ones(len(schedule), np.int64)
    timestep = schedule.meta.get("timestep_s") if isinstance(schedule.meta, dict) else None
    if instance is None or not timestep or schedule.routing != "links" or not len(schedule):
        return ones
    from ..tens.ten import latency_pipelined

    topo = instance.topology
    la = topo.link_arrays
    where = {(int(u), int(v)): i for i, (u, v) in enumerate(zip(la.src.tolist(), la.dst.tolist()))}
    link = np.fromiter((where.get(p, -1) for p in zip(schedule.src.tolist(), schedule.dst.tolist())), np.int64,
                       count=len(schedule))
    if (link < 0).any():
        return ones
    per_chunk = np.concatenate([np.full(c.num_chunks, c.chunk_bytes) for c in instance.collectives])
    alpha = np.zeros(len(la)) if latency_pipelined(topo) else np.asarray(la.alpha, float)
    cost = alpha[link] + per_chunk[schedule.chunk] * schedule.size / (la.bandwidth / la.count)[link]
    return np.maximum(1, np.ceil(cost / float(timestep) - 1e-9)).astype(np.int64)


def link_loads(schedule: Schedule, topology: Topology | None = None,
               instance: Instance | None = None) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Per-step load (chunk units) of every directed pair ``u->v`` a send uses: ``[step, pair]``;
    a send counts in every step it is on its link (:func:`send_spans`, given the ``instance``)."""
    pairs = sorted(set(zip(schedule.src.tolist(), schedule.dst.tolist())))
    index = {p: i for i, p in enumerate(pairs)}
    loads = np.zeros((schedule.num_steps, len(pairs)))
    col = np.fromiter((index[p] for p in zip(schedule.src.tolist(), schedule.dst.tolist())), dtype=np.int64, count=len(schedule))
    spans = send_spans(schedule, instance)
    send = np.repeat(np.arange(len(schedule)), spans)
    back = np.arange(len(send)) - np.repeat(np.cumsum(spans) - spans, spans)  # 0 = its arrival step, 1 = the one before, ...
    np.add.at(loads, (np.maximum(schedule.step[send] - 1 - back, 0), col[send]), schedule.size[send])
    return loads, pairs


def _every(n: int, most: int) -> int:
    return max(1, -(-n // most))


def link_load_heatmap(schedule: Schedule, instance: Instance, out: Path, label: str = "") -> Path:
    """Heatmap of per-step link loads: one row per directed pair used, labelled ``u->v``, one
    column per step, loads written in the cells when they fit; readable for schedules of any
    size (at most ~150 labelled rows)."""
    loads, pairs = link_loads(schedule, instance=instance)
    steps = loads.shape[0]
    k = _every(len(pairs), 150)
    labels = [f"{u}->{v}" for u, v in pairs[::k]]
    rows_shown = len(labels)
    font = max(5.0, min(9.0, 700 / max(rows_shown, 1)))
    label_w = 0.6 * font / 72 * max((len(t) for t in labels), default=1)
    left = 0.75 + label_w
    plot_w, plot_h = min(11.0, 1.5 + 0.45 * steps), min(22.0, 0.6 + 0.155 * rows_shown)
    fig = _figure(max(6.5, left + plot_w + 1.5), plot_h + 1.4)
    ax = _axes(fig, left, 0.6, plot_w, plot_h)
    im = ax.imshow(loads.T, aspect="auto", interpolation="nearest", cmap="viridis", vmin=0)
    if steps * len(pairs) <= 64:
        top = loads.max() or 1.0
        for (t, p), v in np.ndenumerate(loads):
            if v:
                ax.text(t, p, f"{v:.3g}", ha="center", va="center", fontsize=7,
                        color="black" if v > 0.6 * top else "white")
    ax.set_yticks([])  # row labels as plain text: many tick objects cost more than the picture
    at_left = blended_transform_factory(ax.transAxes, ax.transData)
    for i, text in zip(range(0, len(pairs), k), labels):
        ax.text(-0.015, i, text, transform=at_left, ha="right", va="center", fontsize=font)
    kx = _every(steps, 40)
    ax.set_xticks(range(0, steps, kx), [str(t + 1) for t in range(0, steps, kx)], fontsize=8)
    ax.set_xlabel("step")
    ax.text(-(label_w + 0.3) / plot_w, 0.5, "link u->v" + (f" (every {k}th of {len(pairs)})" if k > 1 else f" ({len(pairs)} used)"),
            transform=ax.transAxes, rotation=90, ha="right", va="center", fontsize=10)
    bar = fig.colorbar(im, cax=_axes(fig, left + plot_w + 0.15, 0.6, 0.18, plot_h))
    bar.set_label("load in the step (chunks; a piece counts its fraction; a send counts in every step it is on its link)")
    what = f"per-step link load, {_kinds(instance)} schedule of {len(schedule)} sends in {steps} steps"
    _suptitle(fig, instance, what, label, 10)
    return _save(fig, out)


# ---- the schedule on its time-expanded network ----------------------------------------------------

def draw_ten(schedule: Schedule, instance: Instance, out: Path, label: str = "") -> Path:
    """The schedule on its time-expanded network: nodes in rows, step boundaries in columns,
    one arrow per send coloured by chunk and labelled with the chunk (or piece) it carries
    (TACOS, MICRO 2024, Fig. 20 style). For tiny schedules (see :func:`choose_view`)."""
    nodes = list(instance.topology.nodes)
    row = {n: i for i, n in enumerate(nodes)}
    T = schedule.num_steps
    plot_w, plot_h = 1.0 + 1.4 * T, 0.3 + 0.5 * len(nodes)
    fig = _figure(max(6.5, plot_w + 1.0), plot_h + 1.7)
    ax = _axes(fig, (fig.get_figwidth() - plot_w + 0.5) / 2, 0.85, plot_w, plot_h)
    for t in range(T + 1):
        ax.scatter([t] * len(nodes), range(len(nodes)), s=22, color="0.55", zorder=3)
    cmap = plt.get_cmap("tab20")
    for c, lo, hi, s, d, st in zip(schedule.chunk.tolist(), schedule.lo.tolist(), schedule.hi.tolist(),
                                   schedule.src.tolist(), schedule.dst.tolist(), schedule.step.tolist()):
        y0, y1 = row[s], row[d]
        ax.annotate("", xy=(st, y1), xytext=(st - 1, y0),
                    arrowprops={"arrowstyle": "->", "color": cmap(_color_index(c)), "shrinkA": 0, "shrinkB": 0,
                                "lw": 1.2 + 1.2 * (hi - lo) / schedule.denom})
        ax.text(st - 0.5, (y0 + y1) / 2, piece_label(c, lo, hi, schedule.denom), fontsize=7,
                color=cmap(_color_index(c)), ha="center", va="center",
                bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8})
    ax.set_yticks(range(len(nodes)), [str(n) for n in nodes])
    ax.set_xticks(range(T + 1), ["start"] + [f"end of {t}" for t in range(1, T + 1)], fontsize=8)
    ax.set_xlabel("step boundaries (an arrow: a send u->v in the step)")
    ax.set_ylabel("node")
    ax.invert_yaxis()
    what = f"{_kinds(instance)} schedule on its time-expanded network (arrow label: chunk[piece])"
    _suptitle(fig, instance, what, label, 10)
    return _save(fig, out)


# ---- topology and step-by-step views ------------------------------------------------------------

NODE_RADIUS = 0.22  # in layout units: the two nearest nodes are one unit apart
INCH_PER_UNIT = 0.8


@lru_cache(maxsize=32)
def node_positions(topology: Topology) -> dict[int, tuple[float, float]]:
    """Drawing positions, scaled so the two nearest nodes are one unit apart: a grid for
    two-dimensional ``meta["dims"]`` (row-major ids, failed nodes included), a circle for
    Cayley graphs of one cyclic group (rings, circulants), otherwise the Kamada-Kawai layout of
    the live nodes (deterministic)."""
    dims = list(topology.meta.get("dims") or [])
    live = list(topology.nodes)
    if len(dims) == 2:
        pos = {i: (float(i % dims[1]), -float(i // dims[1])) for i in range(topology.size)}
    elif list(topology.meta.get("cayley") or []) == [2, 2, 2]:  # the 3-cube, drawn as a cube
        pos = {i: ((i & 1) + 0.45 * (i >> 2 & 1), -(i >> 1 & 1) + 0.45 * (i >> 2 & 1)) for i in live}
    elif len(topology.meta.get("cayley") or []) == 1 or len(live) <= 3:
        angles = np.pi / 2 - 2 * np.pi * np.arange(len(live)) / max(len(live), 1)
        pos = {n: (float(np.cos(a)), float(np.sin(a))) for n, a in zip(live, angles)}
    else:
        simple = nx.Graph()
        simple.add_nodes_from(live)
        simple.add_edges_from((u, v) for u, v in topology.graph.edges() if u != v)
        pos = {n: (float(x), float(y)) for n, (x, y) in nx.kamada_kawai_layout(simple).items()}
    xy = np.array(list(pos.values()))
    gaps = np.linalg.norm(xy[:, None] - xy[None], axis=-1)
    nearest = gaps[gaps > 1e-9].min() if len(xy) > 1 else 1.0
    return {n: (x / nearest, y / nearest) for n, (x, y) in pos.items()}


def _arc(p0, p1, bend: float, shrink: float = NODE_RADIUS + 0.04, points: int = 24) -> np.ndarray:
    """Points of a quadratic Bezier curve from ``p0`` to ``p1`` bowed left of its direction by
    ``bend`` times its length, both ends cut back by ``shrink`` (to the node circles)."""
    p0, p1 = np.asarray(p0, float), np.asarray(p1, float)
    d = p1 - p0
    length = float(np.hypot(*d)) or 1.0
    ctrl = (p0 + p1) / 2 + bend * np.array([-d[1], d[0]])
    t = np.linspace(0.0, 1.0, points)[:, None]
    curve = (1 - t) ** 2 * p0 + 2 * (1 - t) * t * ctrl + t ** 2 * p1
    keep = (np.hypot(*(curve - p0).T) >= shrink) & (np.hypot(*(curve - p1).T) >= shrink)
    return curve[keep] if keep.sum() >= 2 else np.array([p0 + d * shrink / length, p1 - d * shrink / length])


def _head(curve: np.ndarray, size: float = 0.13) -> np.ndarray:
    """The triangle of an arrowhead at the end of ``curve``."""
    tip = curve[-1]
    d = tip - curve[-2]
    d = d / (np.hypot(*d) or 1.0)
    n = np.array([-d[1], d[0]])
    return np.array([tip, tip - size * d + 0.45 * size * n, tip - size * d - 0.45 * size * n])


def _arrows(ax, curves: list[np.ndarray], colors, widths, heads: list[bool], style: str = "solid") -> None:
    """Many curves in one collection (fast), with arrowheads where ``heads`` says."""
    ax.add_collection(LineCollection(curves, colors=colors, linewidths=widths, linestyles=style, zorder=2))
    tips = [(_head(c), col) for c, col, h in zip(curves, colors, heads) if h]
    if tips:
        ax.add_collection(PolyCollection([t for t, _ in tips], facecolors=[c for _, c in tips], edgecolors="none", zorder=2))


def _links(topology: Topology) -> list[tuple[int, int, int, bool]]:
    """Live links to draw as (u, v, parallel count, one-way): a pair linked both ways once."""
    la = topology.link_arrays
    count = {(int(u), int(v)): int(c) for u, v, c in zip(la.src, la.dst, la.count)}
    return [(u, v, c, (v, u) not in count) for (u, v), c in count.items() if u < v or (v, u) not in count]


def _wraps(pos, u: int, v: int, topology: Topology) -> bool:
    """True for grid links that jump over nodes (a torus's wrap-around links)."""
    (x0, y0), (x1, y1) = pos[u], pos[v]
    return len(topology.meta.get("dims") or []) == 2 and abs(x0 - x1) + abs(y0 - y1) > 1.01


def _stub(p_self, p_other, length: float = 0.42) -> np.ndarray:
    """A short line leaving ``p_self`` away from ``p_other`` (how a wrap-around link is drawn)."""
    a, b = np.asarray(p_self, float), np.asarray(p_other, float)
    d = (a - b) / (np.hypot(*(a - b)) or 1.0)
    return np.array([a + NODE_RADIUS * d, a + length * d])


def _draw_network(ax, topology: Topology, pos, color: str = "0.35", marked=()) -> None:
    """Nodes with their ids, links (lines both ways, arrows one way, thicker when parallel;
    wrap-around grid links as stubs labelled with the far node), switches in grey, failed
    nodes as red crosses, ``marked`` nodes (roots) in orange."""
    links = _links(topology)
    inner = [(u, v, c, one) for u, v, c, one in links if not _wraps(pos, u, v, topology)]
    curves = [_arc(pos[u], pos[v], 0.0) for u, v, _, _ in inner]
    _arrows(ax, curves, [color] * len(inner), [0.9 * c for _, _, c, _ in inner], [one for *_, one in inner])
    stubs = [(u, v) for u, v, _, _ in links if _wraps(pos, u, v, topology)]
    stubs += [(v, u) for u, v in stubs]
    if stubs:
        lines = [_stub(pos[a], pos[b]) for a, b in stubs]
        ax.add_collection(LineCollection(lines, colors=color, linewidths=0.9, linestyles="dotted", zorder=1))
        for (a, b), line in zip(stubs, lines):
            ax.text(*line[1], str(b), fontsize=5.5, color="0.4", ha="center", va="center")
    live = list(topology.nodes)
    xy = np.array([pos[n] for n in live])
    faces = ["#f6a54a" if n in marked else ("#cfcfcf" if n in topology.switches else "white") for n in live]
    ax.add_collection(EllipseCollection(
        np.full(len(live), 2 * NODE_RADIUS), np.full(len(live), 2 * NODE_RADIUS), np.zeros(len(live)),
        units="xy", offsets=xy, offset_transform=ax.transData, facecolors=faces, edgecolors="0.2", zorder=3))
    for n, (x, y) in zip(live, xy):
        ax.text(x, y, str(n), ha="center", va="center", fontsize=7, zorder=4)
    dead = [pos[n] for n in topology.failed_nodes if n in pos]
    if dead:
        ax.scatter(*np.array(dead).T, s=120, marker="x", c="tab:red", zorder=3)
    every = np.array(list(pos.values()))
    lo, hi = every.min(axis=0) - 0.55, every.max(axis=0) + 0.55
    ax.set_xlim(lo[0], hi[0])
    ax.set_ylim(lo[1], hi[1])
    ax.set_aspect("equal")
    ax.set_axis_off()


def _extent(pos) -> tuple[float, float]:
    every = np.array(list(pos.values()))
    w, h = every.max(axis=0) - every.min(axis=0) + 1.0
    return float(w), float(h)


def draw_topology(instance: Instance, out: Path) -> Path:
    """The instance's topology: node ids, links (lines both ways, arrows one way), failed nodes
    (red crosses) and links (red dashes), roots of rooted collectives in orange."""
    topo = instance.topology
    pos = node_positions(topo)
    w, h = _extent(pos)
    fig = _figure(max(5.5, INCH_PER_UNIT * w + 0.4), INCH_PER_UNIT * h + 1.1)
    ax = _axes(fig, (fig.get_figwidth() - INCH_PER_UNIT * w) / 2, 0.1, INCH_PER_UNIT * w, INCH_PER_UNIT * h)
    roots = {c.root for c in instance.collectives if c.root is not None}
    _draw_network(ax, topo, pos, marked=roots)
    failed = [_arc(pos[u], pos[v], 0.1) for u, v in topo.failed_links if u in pos and v in pos]
    if failed:
        _arrows(ax, failed, ["tab:red"] * len(failed), [1.0] * len(failed), [True] * len(failed), "dashed")
    extras = ["dotted stub: link to the node named (wrap-around)"] if any(
        _wraps(pos, u, v, topo) for u, v, _, _ in _links(topo)) else []
    extras += ["orange: root"] if roots else []
    extras += ["red: failed"] if topo.failed_nodes or topo.failed_links else []
    extras += ["grey: switch"] if topo.switches else []
    key = "\n".join(filter(None, ["line: link both ways; arrow: one-way link", "; ".join(extras)]))
    s = topo.summary()
    what = f"{topo.name}, {s['nodes']} nodes, {s['links']} directed links, diameter {s['diameter']}"
    _suptitle(fig, instance, what, key, 9)
    return _save(fig, out)


def _step_panel(ax, schedule: Schedule, instance: Instance, pos, t: int, cmap) -> None:
    """One step of :func:`draw_steps`: the network in grey, the step's sends as coloured arrows."""
    topo = instance.topology
    _draw_network(ax, topo, pos, color="0.82")
    sel = np.flatnonzero(schedule.step == t).tolist()
    curves, colors, seen = [], [], {}
    for i in sel:
        s, d = int(schedule.src[i]), int(schedule.dst[i])
        k = seen[s, d] = seen.get((s, d), -1) + 1  # the k-th send over s->d in this step bows further
        curves.append(_arc(pos[s], pos[d], 0.12 + 0.07 * k + (0.2 if _wraps(pos, s, d, topo) else 0.0)))
        colors.append(cmap(_color_index(int(schedule.chunk[i]))))
    _arrows(ax, curves, colors, [1.6] * len(sel), [True] * len(sel), "solid" if schedule.routing == "links" else "dashed")
    if len(sel) <= LABELLED_SENDS:
        for i, curve, col in zip(sel, curves, colors):
            x, y = curve[len(curve) // 2]
            ax.text(x, y, piece_label(int(schedule.chunk[i]), int(schedule.lo[i]), int(schedule.hi[i]), schedule.denom),
                    fontsize=6.5, color=col, ha="center", va="center", zorder=5,
                    bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.85})
    ax.set_title(f"step {t}: {len(sel)} sends", fontsize=9)


def _chunk_legend(fig, chunks: list[int], cmap) -> None:
    """The colour of each chunk, at the bottom of the figure (the first 20 chunks; colours
    repeat every 20)."""
    from matplotlib.patches import Patch

    shown = chunks[:20]
    handles = [Patch(color=cmap(_color_index(c)), label=f"chunk {c}") for c in shown]
    title = "colour: chunk" + (f" (the first 20 of {len(chunks)}; colours repeat)" if len(chunks) > 20 else "")
    fig.legend(handles=handles, loc="lower center", ncol=min(10, len(shown)), fontsize=7, title=title,
               title_fontsize=7, frameon=False, bbox_to_anchor=(0.5, 0.0))


def _color_index(chunk: int) -> int:
    """tab20 index of a chunk: the ten strong colours first, then their light partners."""
    return (2 * chunk) % 20 + (chunk // 10) % 2


def draw_steps(schedule: Schedule, instance: Instance, out: Path, label: str = "") -> Path:
    """The schedule step by step: one topology panel per step with that step's sends as arrows
    ``u->v`` coloured by chunk and labelled with the chunk (or piece) carried. Logical sends of
    shortest-path schedules are drawn dashed from source to destination. For small schedules
    (see :func:`choose_view`)."""
    pos = node_positions(instance.topology)
    shown = sorted(set(schedule.step.tolist()))  # steps with sends: empty TEN timesteps are skipped
    T = len(shown)
    ncols = min(4, max(T, 1))
    nrows = -(-T // ncols)
    w, h = _extent(pos)
    scale = min(INCH_PER_UNIT, 3.4 / max(w, h))
    cell_w, cell_h, head = max(2.6, scale * w + 0.2), scale * h + 0.35, 0.75
    chunks = sorted(set(schedule.chunk.tolist()))
    legend_h = 0.3 * -(-min(len(chunks), 20) // 10)
    fig = _figure(cell_w * ncols, cell_h * nrows + head + legend_h)
    cmap = plt.get_cmap("tab20")
    for k, t in enumerate(shown):
        row, col = divmod(k, ncols)
        ax = _axes(fig, col * cell_w + (cell_w - scale * w) / 2, (nrows - 1 - row) * cell_h + legend_h + 0.05,
                   scale * w, scale * h)
        _step_panel(ax, schedule, instance, pos, t, cmap)
    _chunk_legend(fig, chunks, cmap)
    skipped = schedule.num_steps - T
    what = (f"{_kinds(instance)} schedule step by step, {len(schedule)} sends (arrow u->v, label: chunk[piece])"
            + (f"; {skipped} steps without sends not shown" if skipped else ""))
    _suptitle(fig, instance, what, label, 10)
    return _save(fig, out)
