"""Topology finder (Zhao et al., NSDI 2025, Section 5.4, Appendix G): the Pareto frontier of (T_L, T_B) over
base topologies and expansions for a target N nodes and degree d, and the best pick for given
alpha, B and message sizes.

Bottom-up search: for every divisor ``n`` of ``N`` and degree ``k <= d`` (in increasing ``n``)
collect the candidates with ``n`` nodes and degree ``k``:

- base topologies of Table 9 (:data:`collsynth.instances.catalogue.CATALOGUE`): complete,
  complete bipartite, Hamming, Kautz, generalized Kautz, degree-4 circulant, rings and the
  distance-regular graphs of Table 7, each with its BFB ``T_L`` and exact ``T_B``
  (Theorem 19's closed-form LP optimum, :func:`collsynth.formulations.bfb_lp.optimal_loads`,
  or the theorem for families proved BW-optimal);
- expansions of smaller candidates, predicted by the theorems (Zhao et al., NSDI 2025, Theorems 1, 11-13): line graph
  ``(kn, k)``, degree expansion ``(mn, mk)``, Cartesian power ``(n^m, mk)`` and the Cartesian
  product of two BW-optimal candidates (Theorem 13: BW-optimal, ``T_L`` adds);

and keep only the Pareto-efficient ones (a candidate is dropped when another is no worse in
both T_L and T_B): every expansion is monotone in its base's (T_L, T_B), so pruning at
intermediate sizes loses nothing. The frontier at ``(N, d)`` is then confirmed by building
the winners' schedules (:func:`confirm`: construct, verify, price) and ranked for
``alpha``, ``B`` and message sizes by the allreduce time ``2 (T_L alpha + T_B M / B)``.

T_B is in units of M/B throughout (exact :class:`fractions.Fraction`).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Iterable

from ... import InputError
from ...formulations.bfb_lp import optimal_loads
from ...instances import catalogue, generators
from ...instances.distance_regular import CATALOGUE as DRG
from ...instances.instance import make_instance
from ...instances.topology import moore_bound
from ...tens.verify import verify
from . import expansions as ex
from .paper_setting import PAPER_ALPHA, PAPER_BANDWIDTH, PAPER_MESSAGE
from .per_step import solve_bfb


@dataclass(frozen=True)
class Candidate:
    """A topology expression with its predicted performance.

    ``tree`` is ``("base", family, params_json)``, ``("line", child)``, ``("degree", child, m)``,
    ``("power", child, m)`` or ``("product", a, b)``. ``regular``: every node has in- and
    out-degree ``degree`` (line and degree expansions need it).
    """

    expr: str
    tree: tuple
    nodes: int
    degree: int
    T_L: int
    T_B: Fraction
    bw_optimal: bool
    regular: bool = True

    def row(self) -> dict:
        """Plain figures for tables and JSON."""
        return {"topology": self.expr, "nodes": self.nodes, "degree": self.degree, "T_L": self.T_L,
                "T_B": str(self.T_B), "T_B_float": float(self.T_B), "bw_optimal": self.bw_optimal,
                "moore_optimal": self.T_L == moore_bound(self.nodes, self.degree)}


# ---- base topologies ---------------------------------------------------------------------------

# The Table 9 families the finder searches (Zhao et al., NSDI 2025, Appendix G); directed
# circulants and de Bruijn graphs are catalogued but not part of the paper's search.
FINDER_FAMILIES = ("complete", "complete_bipartite", "hamming", "kautz", "generalized_kautz",
                   "circulant", "biring", "uniring", "distance_regular")

# Diameters of the families proved BW-optimal, without building the graph.
_KNOWN_DIAMETER = {
    "complete": lambda p: 1,
    "complete_bipartite": lambda p: 2,
    "hamming": lambda p: p["dims"],
    "circulant": lambda p: _circulant_diameter(p["nodes"], tuple(p["offsets"])),
    "biring": lambda p: p["nodes"] // 2,
    "uniring": lambda p: p["nodes"] - 1,
    "distance_regular": lambda p: DRG[p["name"]].diameter,
}


@lru_cache(maxsize=None)
def _solved_base(generator: str, params_json: str) -> tuple[int, Fraction, bool, bool] | None:
    """``(T_L, T_B, bw_optimal, regular)`` of a base topology from the closed-form BFB LP
    optimum (Theorem 19, :func:`collsynth.formulations.bfb_lp.optimal_loads`); None when the
    generator refuses the parameters or the graph is not strongly connected."""
    try:
        topo = generators.build(generator, json.loads(params_json))
    except InputError:
        return None
    if topo.diameter < 0:
        return None
    N, d = len(topo.npus), topo.out_degree_range[1]
    r = optimal_loads(topo)
    return r["steps"], Fraction(d, N) * sum(r["step_max"], Fraction(0)), r["bw_optimal"], topo.regular


@lru_cache(maxsize=None)
def _circulant_diameter(N: int, offsets: tuple[int, ...]) -> int:
    """Diameter of the undirected circulant C(N, offsets) (BFS from 0: it is vertex-transitive)."""
    steps = {a % N for a in offsets} | {(-a) % N for a in offsets}
    dist = {0: 0}
    frontier = [0]
    while frontier:
        nxt = []
        for x in frontier:
            for s in steps:
                y = (x + s) % N
                if y not in dist:
                    dist[y] = dist[x] + 1
                    nxt.append(y)
        frontier = nxt
    return max(dist.values()) if len(dist) == N else -1


def _base_candidate(fam: catalogue.Family, params: dict, n: int, k: int) -> Candidate | None:
    """The finder's candidate for one catalogue member: proved families by their theorem, the
    others by the BFB LP."""
    tree = ("base", fam.name, json.dumps({"generator": fam.generator, **params}, sort_keys=True))
    if fam.proven_bw and fam.name in _KNOWN_DIAMETER:
        diameter = _KNOWN_DIAMETER[fam.name](params)
        if diameter <= 0:
            return None
        return Candidate(expr=fam.label(params), tree=tree, nodes=n, degree=k, T_L=diameter,
                         T_B=Fraction(n - 1, n), bw_optimal=True, regular=True)
    solved = _solved_base(fam.generator, json.dumps(params, sort_keys=True))
    if solved is None:
        return None
    T_L, T_B, bw, regular = solved
    return Candidate(expr=fam.label(params), tree=tree, nodes=n, degree=k, T_L=T_L, T_B=T_B, bw_optimal=bw,
                     regular=regular)


def _expanded(expr: str, tree: tuple, n: int, k: int, T_L: int, T_B: Fraction, regular: bool) -> Candidate:
    """An expansion's candidate; BW-optimal exactly when ``T_B = (n-1)/n`` (units of M/B)."""
    return Candidate(expr=expr, tree=tree, nodes=n, degree=k, T_L=T_L, T_B=T_B,
                     bw_optimal=T_B == Fraction(n - 1, n), regular=regular)


def base_candidates(n: int, k: int, *, kautz_limit: int | None = None) -> list[Candidate]:
    """Table 9 base topologies with ``n`` nodes and degree ``k`` (predicted T_L, T_B)."""
    out = []
    for fam, params in catalogue.members_of_size(n, k):
        if fam.name not in FINDER_FAMILIES:
            continue
        if fam.name == "generalized_kautz" and kautz_limit is not None and n > kautz_limit:
            continue
        c = _base_candidate(fam, params, n, k)
        if c is not None:
            out.append(c)
    return out


# ---- the search ---------------------------------------------------------------------------------

def pareto(cands: Iterable[Candidate]) -> list[Candidate]:
    """The Pareto-efficient candidates (min T_L, min T_B), one per (T_L, T_B), sorted by T_L."""
    best: dict[tuple[int, Fraction], Candidate] = {}
    for c in cands:
        key = (c.T_L, c.T_B)
        if key not in best or len(c.expr) < len(best[key].expr):
            best[key] = c
    out, floor = [], None
    for key in sorted(best):
        if floor is None or key[1] < floor:
            out.append(best[key])
            floor = key[1]
    return out


def _divisors(N: int) -> list[int]:
    small = [i for i in range(1, math.isqrt(N) + 1) if N % i == 0]
    return sorted(set(small + [N // i for i in small]))


def search(nodes: int, degree: int, *, kautz_limit: int | None = None, max_power: int = 6) -> dict:
    """Pareto frontiers for every (divisor n of ``nodes``, degree k <= ``degree``), bottom-up.

    Returns ``{(n, k): [Candidate, ...]}``; the answer is at ``(nodes, degree)``.
    """
    if nodes < 2:
        raise InputError("--nodes", f"expected at least 2 nodes, got {nodes}")
    if degree < 1:
        raise InputError("--degree", f"expected a degree >= 1, got {degree}")
    divs = [n for n in _divisors(nodes) if n >= 2]
    front: dict[tuple[int, int], list[Candidate]] = {}
    for n in divs:
        for k in range(1, degree + 1):
            if n == nodes and k != degree:
                continue  # nothing expands from the target size: only (nodes, degree) matters there
            cands = list(base_candidates(n, k, kautz_limit=kautz_limit))
            # line graph from (n/k, k)
            if k >= 2 and n % k == 0:
                for c in front.get((n // k, k), ()):
                    if c.regular:
                        T_B = c.T_B + Fraction(1, c.nodes)
                        cands.append(_expanded(f"L({c.expr})", ("line", c.tree), n, k, c.T_L + 1, T_B, True))
            # degree expansion from (n/m, k/m)
            for m in range(2, k + 1):
                if k % m == 0 and n % m == 0:
                    for c in front.get((n // m, k // m), ()):
                        if c.regular:
                            T_B = c.T_B + Fraction(m - 1, m * c.nodes)
                            cands.append(_expanded(f"({c.expr})*{m}", ("degree", c.tree, m), n, k, c.T_L + 1, T_B,
                                                   True))
            # Cartesian power from (n^(1/m), k/m)
            for m in range(2, min(k, max_power) + 1):
                if k % m:
                    continue
                r = round(n ** (1.0 / m))
                for b in (r - 1, r, r + 1):
                    if b >= 2 and b ** m == n:
                        for c in front.get((b, k // m), ()):
                            T_B = c.T_B * Fraction(b, b - 1) * Fraction(n - 1, n)
                            cands.append(_expanded(f"({c.expr})^{m}", ("power", c.tree, m), n, k, m * c.T_L, T_B,
                                                   c.regular))
            cands += _product_candidates(front, divs, n, k)
            if cands:
                front[(n, k)] = pareto(cands)
    return front


def _product_candidates(front: dict, divs: list[int], n: int, k: int) -> list[Candidate]:
    """Cartesian products of two distinct BW-optimal candidates of sizes ``n1 * n2 = n`` and
    degrees ``k1 + k2 = k`` from the frontiers found so far (Zhao et al., NSDI 2025, Theorem 13)."""
    out: list[Candidate] = []
    for n1 in divs:
        if n1 < 2 or n % n1 or n1 * n1 > n:
            continue
        n2 = n // n1
        for k1 in range(1, k):
            k2 = k - k1
            if n1 == n2 and k1 > k2:
                continue
            for a in front.get((n1, k1), ()):
                if not a.bw_optimal:
                    continue
                for b in front.get((n2, k2), ()):
                    if not b.bw_optimal or (a.tree == b.tree):
                        continue
                    out.append(_expanded(f"{a.expr} x {b.expr}", ("product", a.tree, b.tree), n, k,
                               a.T_L + b.T_L, Fraction(n - 1, n), a.regular and b.regular))
    return out


def frontier(nodes: int, degree: int, **kw) -> list[Candidate]:
    """The Pareto frontier of (T_L, T_B) for ``nodes`` and ``degree`` (Zhao et al., NSDI 2025, Section 5.4)."""
    return search(nodes, degree, **kw).get((nodes, degree), [])


def allreduce_time(c: Candidate, alpha: float, bandwidth: float, message: float) -> float:
    """Allreduce time ``2 (T_L alpha + T_B M / B)`` (reduce-scatter + allgather), seconds."""
    return 2.0 * (c.T_L * alpha + float(c.T_B) * message / bandwidth)


def select(cands: list[Candidate], alpha: float, bandwidth: float, messages: Iterable[float],
           weights: Iterable[float] | None = None) -> list[tuple[Candidate, float]]:
    """Candidates ranked by total (weighted) allreduce time over ``messages`` (best first)."""
    messages = list(messages)
    weights = list(weights) if weights is not None else [1.0] * len(messages)
    scored = [(c, sum(w * allreduce_time(c, alpha, bandwidth, m) for m, w in zip(messages, weights))) for c in cands]
    return sorted(scored, key=lambda cs: (cs[1], cs[0].T_L))


# ---- confirmation: build the schedule, verify, price ------------------------------------------------

def build_candidate(tree: tuple, *, method: str = "flow"):
    """Construct the topology and allgather schedule of an expression tree (one chunk per shard)."""

    kind = tree[0]
    if kind == "base":
        params = json.loads(tree[2])
        gen = params.pop("generator")
        topo = generators.build(gen, params)
        return topo, solve_bfb(topo, method=method).schedule
    if kind == "line":
        return ex.line_graph(*build_candidate(tree[1], method=method))
    if kind == "degree":
        t, s = build_candidate(tree[1], method=method)
        return ex.degree_expansion(t, s, tree[2])
    if kind == "power":
        t, s = build_candidate(tree[1], method=method)
        return ex.cartesian_power(t, s, tree[2])
    if kind == "product":
        ta, _ = build_candidate(tree[1], method=method)
        tb, _ = build_candidate(tree[2], method=method)
        topo, sched, _ = ex.cartesian_product([ta, tb], method=method)
        return topo, sched
    raise ValueError(f"unknown expression node {kind!r}")


def confirm(c: Candidate, *, method: str = "flow") -> dict:
    """Build ``c``'s schedule, verify and price it; compare with the predicted T_L and T_B."""

    t0 = time.perf_counter()
    topo, sched = build_candidate(c.tree, method=method)
    p = ex.price_schedule(topo, sched)
    return {"verified": p.verified, "T_L_built": p.steps, "T_B_built": str(p.T_B),
            "confirmed": p.verified and p.steps == c.T_L and p.T_B == c.T_B,
            "no_worse": p.verified and p.steps <= c.T_L and p.T_B is not None and p.T_B <= c.T_B,
            "sends": len(sched), "build_s": round(time.perf_counter() - t0, 3)}


# ---- tables ---------------------------------------------------------------------------------------


def table_pareto(nodes: int = 1024, degree: int = 4, *, alpha: float = PAPER_ALPHA, bandwidth: float = PAPER_BANDWIDTH,
                 message: float = PAPER_MESSAGE, confirm_max_nodes: int = 0):
    """Table 4 analogue: the Pareto frontier for (nodes, degree) with T_L, T_B, flags and the
    allreduce time for ``alpha``, ``bandwidth`` (node, bytes/s) and ``message`` bytes, plus the
    lower bound ``2 (Moore(N, d) alpha + (N-1)/N M/B)``. Confirms (builds) winners when
    ``nodes <= confirm_max_nodes``. Returns a pandas DataFrame."""
    import pandas as pd

    rows = []
    for c in frontier(nodes, degree):
        r = c.row()
        r["allreduce_us"] = allreduce_time(c, alpha, bandwidth, message) * 1e6
        if nodes <= confirm_max_nodes:
            r.update(confirm(c))
        rows.append(r)
    lb = 2 * (moore_bound(nodes, degree) * alpha + (nodes - 1) / nodes * message / bandwidth) * 1e6
    rows.append({"topology": "lower bound (Moore + BW-optimal)", "nodes": nodes, "degree": degree,
                 "T_L": moore_bound(nodes, degree), "T_B": str(Fraction(nodes - 1, nodes)),
                 "T_B_float": (nodes - 1) / nodes, "bw_optimal": True, "moore_optimal": True, "allreduce_us": lb})
    return pd.DataFrame(rows)


def table_small(sizes: Iterable[int] = range(5, 13), degree: int = 4, *, alpha: float = PAPER_ALPHA,
                bandwidth: float = PAPER_BANDWIDTH, messages: Iterable[float] = (1e3, 1e6, 1e9),
                confirm_winners: bool = True):
    """Table 5 analogue: for each N the best topology over ``messages`` (total allreduce time),
    its T_L, T_B and flags, confirmed by building its schedule. Returns a pandas DataFrame."""
    import pandas as pd

    rows = []
    messages = list(messages)
    for N in sizes:
        front = frontier(N, degree)
        if not front:
            rows.append({"N": N, "topology": "(none)"})
            continue
        best, score = select(front, alpha, bandwidth, messages)[0]
        r = {"N": N, **best.row(), "frontier": "; ".join(f"{c.expr} ({c.T_L}, {c.T_B})" for c in front),
             "score_us": score * 1e6}
        if confirm_winners:
            r.update(confirm(best))
        rows.append(r)
    return pd.DataFrame(rows)


def table_catalogue(degrees: Iterable[int] = (2, 3, 4), max_nodes: int = 64, dense_limit: int = 12):
    """Table 9 analogue: every base family's members (up to ``max_nodes``) with the BFB
    schedule built and verified, T_L, T_B (M/B) and the BW-/Moore-optimal flags."""
    import pandas as pd


    rows = []
    for d in degrees:
        for r in ex.base_catalogue(d, max_nodes, build_schedule=True, dense_limit=dense_limit):
            topo, sched = r.pop("topology_obj", None), r.pop("schedule", None)
            ok = sched is not None and verify(sched, make_instance(topo, "allgather")) is None
            rows.append({"family": r["family"], "symbol": r["symbol"], "topology": r["topology"],
                         "nodes": r["nodes"], "degree": r["degree"], "regular": r["regular"], "T_L": r["T_L"],
                         "moore_bound": r["moore_bound"], "T_B": str(r["T_B"]),
                         "T_B_float": float(r["T_B"]) if r["T_B"] is not None else None,
                         "bw_optimal": r["bw_optimal"], "moore_optimal": r["moore_optimal"],
                         "schedule_sends": len(sched) if sched is not None else 0, "verified": ok,
                         "note": r["note"]})
    for fam, why in catalogue.NOT_STATED.items():
        rows.append({"family": fam, "note": why})
    return pd.DataFrame(rows)
