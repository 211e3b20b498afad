"""The base topologies of Zhao et al., NSDI 2025, Table 9: which generator parameters give a
base graph of a given degree, how many nodes it has, and what the paper proves about it.

Each :class:`Family` names a generator of :mod:`.generators` and lists its members for a
degree ``d`` up to ``max_nodes`` nodes. ``proven_bw`` marks families whose BFB schedule the
paper proves bandwidth-optimal (complete graphs and K_{d,d}, Hamming graphs, circulants of
degree 4 with Theorem 22's offsets, rings, distance-regular graphs; Section 5 and Appendix E),
so a caller can skip solving the BFB LP for them. The topology finder and the Table 9
analogue both read this one catalogue.

>>> [f.name for f in CATALOGUE][:3]
['complete', 'complete_bipartite', 'hamming']
>>> [(f.name, p) for f, p in members_of_size(9, 4)]
[('hamming', {'dims': 2, 'q': 3}), ('generalized_kautz', {'degree': 4, 'nodes': 9}), ('circulant', {'nodes': 9, 'offsets': [1, 2]}), ('directed_circulant', {'nodes': 9, 'offsets': [1, 2, 3, 4], 'directed': True}), ('distance_regular', {'name': 'paley9'})]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterator

from .distance_regular import CATALOGUE as DRG


@dataclass(frozen=True)
class Family:
    """A base-topology family: its generator, members for a degree, node count and label."""

    name: str
    symbol: str
    generator: str
    members: Callable[[int, int], list[dict]]  # (degree, max_nodes) -> generator params
    size: Callable[[dict], int]  # generator params -> number of nodes
    label: Callable[[dict], str]  # generator params -> a short expression for tables
    proven_bw: bool = False
    dense: bool = False  # a member for (almost) every node count: list only small ones by default
    note: str = ""


def best_circulant_offsets(N: int) -> list[int]:
    """Degree-4 circulant ``C(N, {a, a+1})``, ``a = floor(sqrt((N-2)/2))`` (Zhao et al., NSDI
    2025, Theorem 22), stepped down until the offsets generate the cyclic group.

    >>> best_circulant_offsets(16)
    [2, 3]
    """
    a = max(1, math.isqrt(max(0, (N - 2) // 2)))
    while a >= 1 and (a + 1 >= N or math.gcd(N, a, a + 1) != 1):
        a -= 1
    return [a, a + 1]


def _hamming(d: int, nmax: int) -> list[dict]:
    return [{"dims": D, "q": d // D + 1} for D in range(1, d + 1) if d % D == 0 and (d // D + 1) ** D <= nmax]


def _kautz(d: int, nmax: int) -> list[dict]:
    return [{"degree": d, "diameter": k} for k in range(1, 64) if d >= 2 and d ** k + d ** (k - 1) <= nmax]


def _de_bruijn(d: int, nmax: int) -> list[dict]:
    return [{"degree": d, "diameter": k} for k in range(1, 64) if d >= 2 and d ** k <= nmax]


def _circulant(d: int, nmax: int) -> list[dict]:
    if d != 4:
        return []
    members = ({"nodes": N, "offsets": best_circulant_offsets(N)} for N in range(6, nmax + 1))
    return [p for p in members if len({a % p["nodes"] for a in p["offsets"]} | {-a % p["nodes"] for a in p["offsets"]}) == 4]


CATALOGUE: tuple[Family, ...] = (
    Family("complete", "K_{d+1}", "complete",
           lambda d, nmax: [{"nodes": d + 1}] if 1 <= d and d + 1 <= nmax else [],
           lambda p: p["nodes"], lambda p: f"K{p['nodes']}", proven_bw=True),
    Family("complete_bipartite", "K_{d,d}", "complete_bipartite",
           lambda d, nmax: [{"degree": d}] if 2 <= d and 2 * d <= nmax else [],
           lambda p: 2 * p["degree"], lambda p: f"K{p['degree']},{p['degree']}", proven_bw=True),
    Family("hamming", "H(D,q)", "hamming", _hamming,
           lambda p: p["q"] ** p["dims"], lambda p: f"H({p['dims']},{p['q']})", proven_bw=True),
    Family("kautz", "K(d,k)", "kautz", _kautz,
           lambda p: p["degree"] ** p["diameter"] + p["degree"] ** (p["diameter"] - 1),
           lambda p: f"Kautz({p['degree']},{p['diameter']})"),
    Family("generalized_kautz", "Pi(d,N)", "generalized_kautz",
           lambda d, nmax: [{"degree": d, "nodes": N} for N in range(d + 2, nmax + 1)] if d >= 1 else [],
           lambda p: p["nodes"], lambda p: f"GK({p['degree']},{p['nodes']})", dense=True,
           note="self-loops dropped (those nodes have out-degree d-1)"),
    Family("circulant", "C(N,{a,a+1})", "circulant", _circulant,
           lambda p: p["nodes"], lambda p: f"C({p['nodes']},{{{p['offsets'][0]},{p['offsets'][1]}}})",
           proven_bw=True, dense=True, note="degree 4, Theorem 22's offsets"),
    Family("directed_circulant", "DC(N,{1..d})", "circulant",
           lambda d, nmax: [{"nodes": N, "offsets": list(range(1, d + 1)), "directed": True}
                            for N in range(d + 2, nmax + 1)],
           lambda p: p["nodes"], lambda p: f"DC({p['nodes']},{{1..{len(p['offsets'])}}})", dense=True),
    Family("biring", "BiRing(N)", "ring",
           lambda d, nmax: [{"nodes": N} for N in range(3, nmax + 1)] if d == 2 else [],
           lambda p: p["nodes"], lambda p: f"BiRing({p['nodes']})", proven_bw=True, dense=True,
           note="BFB ring schedule (E.1): half-circle each way"),
    Family("uniring", "UniRing(N)", "ring",
           lambda d, nmax: [{"nodes": N, "bidirectional": False} for N in range(2, nmax + 1)] if d == 1 else [],
           lambda p: p["nodes"], lambda p: f"UniRing({p['nodes']})", proven_bw=True, dense=True),
    Family("de_bruijn", "B(d,k)", "de_bruijn", _de_bruijn,
           lambda p: p["degree"] ** p["diameter"], lambda p: f"B({p['degree']},{p['diameter']})",
           note="self-loops dropped"),
    Family("distance_regular", "DRG", "distance_regular",
           lambda d, nmax: [{"name": k} for k, e in DRG.items() if e.degree == d and e.nodes <= nmax],
           lambda p: DRG[p["name"]].nodes, lambda p: f"DRG:{p['name']}", proven_bw=True,
           note="Zhao et al., NSDI 2025, Table 7"),
)

NOT_STATED = {
    "diamond": "Figure 16's construction is not in the paper's text",
    "modified_de_bruijn": "Figure 17's construction (DBJMod) is not in the paper's text",
}


def family(name: str) -> Family:
    """The catalogue family called ``name`` (KeyError when there is none)."""
    for f in CATALOGUE:
        if f.name == name:
            return f
    raise KeyError(name)


def members_of_size(nodes: int, degree: int) -> Iterator[tuple[Family, dict]]:
    """Every ``(family, generator params)`` of the catalogue with exactly ``nodes`` nodes and
    degree ``degree``, in catalogue order."""
    for fam in CATALOGUE:
        for params in fam.members(degree, nodes):
            if fam.size(params) == nodes:
                yield fam, params
