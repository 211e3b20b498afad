"""Deficiency report for Swing and recursive doubling (De Sensi et al., NSDI 2024, Table 2 and Figures 6, 10-14).

Everything is measured from each algorithm's schedule priced by the shared synchronous cost
model (:mod:`collsynth.tens.cost`: logical sends routed on ``topology.shortest_path``, loads
summed per link and step, per-hop latency); the paper's formulas stand beside the figures.

Measured deficiencies (Eq. 1: ``T = log2 p * alpha * Lambda + n/D * beta * Psi * Xi``):

- ``Lambda = steps / log2 p``.
- ``Psi = T_B^free / T_B^opt``: ``T_B^free`` is the bandwidth time if every logical peer pair
  had a link of its own (per step, the heaviest (src, dst) pair), ``T_B^opt = k (p-1)/p *
  n / (2D b)`` is the bandwidth bound with 2D ports (k = 2 for allreduce, 1 for its halves).
- ``Xi = T_B / T_B^free``: the slowdown from messages of one collective sharing links, which
  the cost model measures by routing. ``T_B = T_B^opt * Psi * Xi`` exactly.

**Message-level pricing.** A chunk-level schedule on a 64x64 torus has ~10^8 sends. The
algorithms' sizes are exact products of block counts, so :func:`price_messages` prices one
row per logical message instead (its size is the sum of the chunk pieces it stands for: a
piece ``[0, blocks/(p ncoll))`` of a carrier chunk holding the whole vector). The sync model
adds bytes per link and step and takes each route's latency, so the result is the same as the
chunk-level schedule's (``tests/test_swing.py`` checks equality on small tori). Large
topologies are priced in batches of sources with :func:`collsynth.tens.cost.routes` (the
shared routing), loads accumulated per (step, link) exactly as ``price_sync`` does, and the
path cache dropped between batches to bound memory. ``T_B`` is linear in the vector size
``n`` and ``T_L`` does not depend on it, so a curve is priced once at ``n = 1`` byte and
evaluated as ``T(n) = T_L + n T_B(1)``.

**Paper parameters** (section 5): 400 Gb/s links (5e10 bytes/s), 100 ns link latency and 300 ns
per-hop packet processing. The sync model charges the sum of the link ``alpha`` along a route,
so every link gets ``alpha = 100 ns + 300 ns = 400 ns``: a message over h hops pays 400h ns.

Ring and bucket (Table 2's congestion-free references) come from the classic closed forms
(:func:`collsynth.solvers.closed_form.classics.closed_form`), labelled ``source = closed form``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from ...instances.generators import build
from ...instances.instance import make_instance
from ...instances.topology import Topology
from ...tens import cost
from ...tens.schedule import from_arrays
from ..closed_form import swing as sw
from ..closed_form.classics import closed_form as classic

PAPER_LINK_BANDWIDTH = 400e9 / 8  # bytes/s (400 Gb/s)
PAPER_LINK_LATENCY = 100e-9
PAPER_HOP_LATENCY = 300e-9
PAPER_ALPHA = PAPER_LINK_LATENCY + PAPER_HOP_LATENCY  # charged per link of a route

# name: (algorithm, variant, multiport, mirrored)
ALGORITHMS = {
    "swing-bw": ("swing", "bw", True, True),
    "swing-lat": ("swing", "lat", True, True),
    "recursive-doubling-bw": ("recursive_doubling", "bw", False, False),
    "recursive-doubling-lat": ("recursive_doubling", "lat", False, False),
    "recursive-doubling-bw-mirrored": ("recursive_doubling", "bw", True, True),
    "recursive-doubling-lat-mirrored": ("recursive_doubling", "lat", True, True),
}

# the paper's evaluation networks (section 5): figure -> (generator, params)
FIGURES = {
    "fig6_torus64x64": ("torus", {"dims": [64, 64]}),
    "fig10a_torus64x16": ("torus", {"dims": [64, 16]}),
    "fig10b_torus32x8": ("torus", {"dims": [32, 8]}),
    "fig10c_torus256x4": ("torus", {"dims": [256, 4]}),
    "fig11a_torus8x8": ("torus", {"dims": [8, 8]}),
    "fig11b_torus8x8x8": ("torus", {"dims": [8, 8, 8]}),
    "fig11c_torus8x8x8x8": ("torus", {"dims": [8, 8, 8, 8]}),
    "fig12_hx2mesh": ("hammingmesh", {"board": [2, 2], "grid": [32, 32]}),
    "fig13_hx4mesh": ("hammingmesh", {"board": [4, 4], "grid": [16, 16]}),
    "fig14_hyperx64x64": ("hyperx", {"dims": [64, 64]}),
}

SIZES = [2 ** k for k in range(5, 30)]  # 32 B .. 512 MiB, as the paper's x axes


def paper_topology(generator: str, params: dict) -> Topology:
    """A network with the paper's link parameters (400 Gb/s, 100 ns + 300 ns per hop)."""
    return build(generator, params, bandwidth=PAPER_LINK_BANDWIDTH, alpha=PAPER_ALPHA)


# ---- pricing at message level -----------------------------------------------------------------

def message_level_schedule(topology: Topology, m: sw.Messages, message_bytes: float = 1.0):
    """``(schedule, carrier instance)``: one send per logical message, a piece of size
    ``blocks / (p ncoll)`` of the single chunk of a broadcast carrier of ``message_bytes``."""
    denom = m.p * m.ncoll
    sched = from_arrays(
        "broadcast", topology.size, 1, chunk=np.zeros(len(m.src), np.int64), src=m.src, dst=m.dst,
        step=m.step, lo=np.zeros(len(m.src), np.int64), hi=m.blocks, denom=denom,
        routing="shortest-path",
    )
    inst = make_instance(topology, "broadcast", root=0, message_bytes=message_bytes)
    return sched, inst


@dataclass
class Priced:
    """Sync-model price of a message table: ``T_L_s``, ``T_B_s`` (for ``message_bytes``),
    ``steps``, per-step latency and bandwidth time."""

    T_L_s: float
    T_B_s: float
    steps: int
    step_latency: np.ndarray
    step_bandwidth: np.ndarray


def price_messages(topology: Topology, m: sw.Messages, message_bytes: float = 1.0,
                   source_batch: int = 512) -> Priced:
    """Price a message table under the shared sync model (see the module docstring).

    Small tables go through :func:`collsynth.tens.cost.price_sync` itself; larger ones are routed in
    batches of ``source_batch`` sources with :func:`collsynth.tens.cost.routes` and aggregated the
    way ``price_sync`` does (loads per (step, link pair) / bandwidth, maximum per step; latency:
    the longest route of the step).
    """
    return price_many(topology, {"_": m}, message_bytes, source_batch)["_"]


def price_many(topology: Topology, tables: dict, message_bytes: float = 1.0,
               source_batch: int = 512) -> dict:
    """:func:`price_messages` for several message tables on one topology, routing each batch of
    sources once for all of them (the shortest-path search dominates on large tori)."""
    out = {}
    prepared = {}
    sources = np.unique(np.concatenate([m.src for m in tables.values()])) if tables else np.zeros(0, np.int64)
    for name, m in tables.items():
        sched, inst = message_level_schedule(topology, m, message_bytes)
        T = int(m.step.max()) if len(m.step) else 0
        if len(sources) <= source_batch:
            c = cost.price_sync(sched, inst)
            lat, bw = np.zeros(T), np.zeros(T)
            for t, a, b in c.extra.get("per_step") or []:
                lat[t - 1], bw[t - 1] = a, b
            out[name] = Priced(c.T_L_s, c.T_B_s, T, lat, bw)
        else:
            prepared[name] = (sched, T, [], [], np.zeros(T))
    if not prepared:
        return out
    la = topology.link_arrays
    L = len(la)
    for b0 in range(0, len(sources), source_batch):
        batch = sources[b0:b0 + source_batch]
        for name, (sched, T, keys, weights, lat) in prepared.items():
            sel = np.flatnonzero(np.isin(sched.src, batch))
            if not len(sel):
                continue
            sub = sched.select(sel)
            rt = cost.routes(sub, topology)
            send, link = rt.expand()
            keys.append(sub.step[send].astype(np.int64) * L + link)
            nbytes = (sub.hi - sub.lo) / sub.denom * message_bytes
            weights.append(nbytes[send])
            np.maximum.at(lat, sub.step - 1, rt.latency[rt.r])
        topology.__dict__.pop("_path_cache", None)  # free the batch's BFS paths
    for name, (sched, T, keys, weights, lat) in prepared.items():
        key = np.concatenate(keys)
        ukey, inv = np.unique(key, return_inverse=True)
        load = np.bincount(inv.ravel(), weights=np.concatenate(weights))
        kstep, klink = ukey // L, ukey % L
        bw = np.zeros(T)
        np.maximum.at(bw, kstep - 1, load / la.bandwidth[klink])
        out[name] = Priced(float(lat.sum()), float(bw.sum()), T, lat, bw)
    return out


def _link_bandwidth(topology: Topology) -> float:
    la = topology.link_arrays
    return float((la.bandwidth / la.count).min())


def measure(topology: Topology, name: str, kind: str = "allreduce", source_batch: int = 512) -> dict:
    """Lambda, Psi, Xi of producer ``name`` (a key of :data:`ALGORITHMS`) measured from its
    priced schedule on ``topology``, with Table 2's values and the closed form beside them.
    Times are for a vector of 1 byte (``T_B`` scales linearly with the size)."""
    return measure_many(topology, [name], kind, source_batch)[0]


def measure_many(topology: Topology, names, kind: str = "allreduce", source_batch: int = 512) -> list[dict]:
    """:func:`measure` for several algorithms on one topology (routes computed once)."""
    dims, network = sw.rank_space(topology)
    p = math.prod(dims)
    b = _link_bandwidth(topology)
    D = max(1, sum(1 for d in dims if d > 1))
    alpha = float(topology.link_arrays.alpha.max())
    plans, tables = {}, {}
    for name in names:
        algorithm, variant, multiport, mirrored = ALGORITHMS[name]
        pl = sw.plan(dims, algorithm, variant, multiport, mirrored)
        plans[name] = pl
        tables[name] = sw.message_schedule(pl, kind)[0]
    t0 = time.perf_counter()
    priced = price_many(topology, tables, 1.0, source_batch)
    wall = time.perf_counter() - t0
    rows = []
    for name in names:
        algorithm, variant, multiport, mirrored = ALGORITHMS[name]
        m, pr = tables[name], priced[name]
        T = pr.steps
        free = float(sum(sw._pair_max_blocks(m, T))) / (p * m.ncoll) / b
        halves = 2 if kind == "allreduce" else 1
        opt = halves * (p - 1) / p / (2 * D * b)
        t2 = sw.table2(algorithm, variant, D, p)
        cf = sw.closed_form(dims, 1.0, alpha, b, algorithm=algorithm, variant=variant, multiport=multiport,
                            mirrored=mirrored, kind=kind, network=network)
        rows.append({
            "topology": topology.name, "dims": "x".join(map(str, dims)), "D": D, "p": p,
            "algorithm": name, "kind": kind, "steps": T, "collectives": m.ncoll,
            "T_L_s": pr.T_L_s, "T_B_s_per_byte": pr.T_B_s, "T_B_free_s_per_byte": free,
            "T_B_opt_s_per_byte": opt,
            "Lambda": T / math.log2(p), "Psi": free / opt, "Xi": pr.T_B_s / free if free else float("nan"),
            "Lambda_table2": t2["Lambda"], "Psi_table2": t2["Psi"], "Xi_table2": t2["Xi"],
            "Xi_table2_p": t2["Xi_p"],
            "closed_form_T_B_s_per_byte": cf["T_B_s"], "closed_form_T_L_hops_s": cf["T_L_hops_s"],
            "price_wall_s": wall,
        })
    return rows


DEFICIENCY_TORI = {1: [64], 2: [16, 16], 3: [8, 8, 8], 4: [8, 8, 8, 8]}


def deficiency_table(tori: dict | None = None, names=None, alpha: float = PAPER_ALPHA,
                     bandwidth: float = PAPER_LINK_BANDWIDTH, progress=None):
    """Measured Lambda/Psi/Xi next to Table 2 for every algorithm on tori with D = 1..4, plus the
    ring and bucket rows of Table 2 from D1's closed forms (congestion-free by construction)."""
    import pandas as pd

    tori = tori or DEFICIENCY_TORI
    names = names or list(ALGORITHMS)
    rows = []
    for D, dims in tori.items():
        topo = build("torus", {"dims": dims}, bandwidth=bandwidth, alpha=alpha)
        if progress:
            progress(f"{topo.name}: {', '.join(names)}")
        rows += measure_many(topo, list(names))
        p = math.prod(dims)
        for ref in ("ring", "bucket"):
            t2 = sw.table2(ref, "bw", len(dims), p)
            rows.append({"topology": topo.name, "dims": "x".join(map(str, dims)), "D": len(dims), "p": p,
                         "algorithm": ref, "kind": "allreduce",
                         "Lambda_table2": t2["Lambda"], "Psi_table2": 1.0, "Xi_table2": 1.0,
                         "source": "Table 2 (congestion-free reference)"})
    df = pd.DataFrame(rows)
    if "source" not in df:
        df["source"] = None
    df["source"] = df["source"].fillna("measured (sync cost model)")
    return df


def xi_convergence(D: int, sides: list[int], bandwidth: float = 1.0):
    """Measured Xi of bandwidth-optimal Swing on ``side^D`` tori against Table 2's finite sum
    and its p -> infinity limit (6/5, 28/27, 120/119 for D = 2, 3, 4)."""
    import pandas as pd

    rows = []
    for n in sides:
        topo = build("torus", {"dims": [n] * D}, bandwidth=bandwidth, alpha=0.0)
        r = measure(topo, "swing-bw")
        rows.append({"D": D, "side": n, "p": r["p"], "Xi": r["Xi"], "Xi_table2_p": r["Xi_table2_p"],
                     "Xi_limit": float(sw.xi_swing_limit(D))})
    return pd.DataFrame(rows)


# ---- goodput curves (Figures 6, 10-14) -------------------------------------------------------

def _classic_curves(topology: Topology, dims: list[int], sizes) -> list[dict]:
    """Ring (Hamiltonian rings, 2D only as in section 5.3) and bucket from D1's closed forms.

    Bucket on a rectangular torus: the paper's collectives move from one dimension to the next
    synchronously (section 4.2, Fig. 9), so every phase takes ``D (d_max - 1)`` steps
    (Lambda = 2 D d_max / log2 p); its bandwidth term is the classic closed form's (Table 2: Psi = Xi = 1).
    """
    p = math.prod(dims)
    active = [d for d in dims if d > 1]
    rows = []
    refs = [("bucket", {"dims": dims})]
    if len(active) == 2:
        refs.append(("hamiltonian-rings", {}))
    for name, kw in refs:
        one = classic(name, "allreduce", p, message_bytes=1.0, alpha=PAPER_ALPHA,
                      bandwidth=_link_bandwidth(topology), **kw)
        T_L = one["T_L_s"]
        if name == "bucket":
            T_L = 2 * len(active) * (max(active) - 1) * PAPER_ALPHA
        for n in sizes:
            rows.append({"algorithm": "ring" if name == "hamiltonian-rings" else name, "size": n,
                         "time_s": T_L + n * one["T_B_s"], "source": "closed form (classics)"})
    return rows


def recompute_classics(df, sizes=None):
    """Replace the closed-form rows of a goodput table (e.g. read back from its CSV) by
    :func:`_classic_curves` of each figure's network (no pricing needed)."""
    import pandas as pd

    keep = df[df["source"] != "closed form (classics)"]
    parts = [keep]
    for fig, g in keep.groupby("figure"):
        gen, params = FIGURES[fig]
        dims = list(params.get("dims") or [params["board"][0] * params["grid"][0],
                                           params["board"][1] * params["grid"][1]])
        topo = paper_topology("torus", {"dims": dims})  # classics price links of equal bandwidth
        rows = pd.DataFrame(_classic_curves(topo, dims, sizes or sorted(g["size"].unique())))
        rows["goodput_Gbps"] = rows["size"] * 8 / rows["time_s"] / 1e9
        rows["figure"] = fig
        rows["topology"] = g["topology"].iloc[0]
        rows["peak_Gbps"] = g["peak_Gbps"].iloc[0]
        parts.append(rows)
    return pd.concat(parts, ignore_index=True)


def goodput_curves(figure: str, sizes=None, names=None, source_batch: int = 512, progress=None,
                   topology: Topology | None = None):
    """Allreduce time and goodput (bytes reduced per second, Gb/s) against the vector size on one
    of the paper's networks (:data:`FIGURES`); ``swing`` and ``recursive-doubling`` rows take the
    better of the latency- and bandwidth-optimal variants at each size, as the paper plots."""
    import pandas as pd

    sizes = sizes or SIZES
    gen, params = FIGURES[figure]
    topo = topology or paper_topology(gen, params)
    dims, _ = sw.rank_space(topo)
    names = names or ["swing-bw", "swing-lat", "recursive-doubling-bw", "recursive-doubling-lat",
                      "recursive-doubling-bw-mirrored"]
    rows = []
    if progress:
        progress(f"{figure} ({topo.name}): {', '.join(names)}")
    for r in measure_many(topo, list(names), source_batch=source_batch):
        name = r["algorithm"]
        for n in sizes:
            rows.append({"algorithm": name, "size": n, "time_s": r["T_L_s"] + n * r["T_B_s_per_byte"],
                         "source": "measured (sync cost model)"})
    rows += _classic_curves(topo, dims, sizes)
    df = pd.DataFrame(rows)
    best = []
    for fam, members in (("swing", ["swing-bw", "swing-lat"]),
                         ("recursive-doubling", ["recursive-doubling-bw", "recursive-doubling-lat"])):
        sub = df[df.algorithm.isin(members)]
        if len(sub):
            idx = sub.groupby("size")["time_s"].idxmin()
            b = sub.loc[idx].copy()
            b["variant"] = b["algorithm"]
            b["algorithm"] = fam
            best.append(b)
    df = pd.concat([df] + best, ignore_index=True)
    df["goodput_Gbps"] = df["size"] * 8 / df["time_s"] / 1e9
    df["figure"] = figure
    df["topology"] = topo.name
    df["peak_Gbps"] = max(1, sum(1 for d in dims if d > 1)) * 400.0
    return df


def main(argv=None) -> int:
    """Compute the report's DataFrames and write them with :mod:`collsynth.results.swing_report`.

    ``python -m collsynth.solvers.reports.deficiency [--figures fig6_torus64x64 ...]
    [--out results]``.
    """
    import pandas as pd

    import argparse
    from pathlib import Path

    from ...results import swing_report

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results", help="results folder (tables/ and plots/ inside)")
    ap.add_argument("--figures", nargs="*", default=list(FIGURES), help=f"any of {', '.join(FIGURES)}")
    ap.add_argument("--skip-deficiency", action="store_true")
    ap.add_argument("--rewrite-from", nargs="*", default=None, metavar="CSV",
                    help="no pricing: merge these swing_goodput.csv files, recompute the closed-form "
                         "rows and rewrite the goodput tables and plots")
    args = ap.parse_args(argv)
    out = Path(args.out)
    say = lambda msg: print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)  # noqa: E731
    if args.rewrite_from:
        df = pd.concat([pd.read_csv(f) for f in args.rewrite_from], ignore_index=True)
        df = df.drop_duplicates(subset=["figure", "algorithm", "size"], keep="last")
        swing_report.write_goodput(recompute_classics(df), out / "tables", out / "plots")
        return 0
    if not args.skip_deficiency:
        df = deficiency_table(progress=say)
        conv = pd.concat([xi_convergence(2, [4, 8, 16, 32]), xi_convergence(3, [4, 8]),
                          xi_convergence(4, [4])], ignore_index=True)
        swing_report.write_deficiency(df, conv, out / "tables")
    curves = []
    for f in args.figures:  # tables and plots rewritten after every figure (partial runs keep what is done)
        curves.append(goodput_curves(f, progress=say))
        swing_report.write_goodput(pd.concat(curves, ignore_index=True), out / "tables", out / "plots")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
