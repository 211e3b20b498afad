"""Graph expansions: the line graph, the degree expansion and the Cartesian product.

Zhao et al., NSDI 2025 (*Efficient Direct-Connect Topologies for Collective Communications*),
Section 4 and Definitions 1, 3 and 14, build larger direct-connect topologies from a base graph
G. These are the constructions only (arrays in, Topology out); the generators ``line_graph``,
``degree_expansion`` and ``cartesian`` of :mod:`.generators` expose them by name, and the
expansion schedules that go with them live with the BFB solvers. Numbering:

- L(G): a node per arc of G, arcs sorted by ``(u, v, key)`` (:func:`arcs_of`); an arc
  ``e = (u, v) -> f = (v, w)``.
- G*n: node ``(v, i)`` is ``v*n + i``; arcs ``(u, i) -> (v, j)`` for every arc ``u -> v`` of G
  and all ``i, j``.
- G x H: node ``(g, h)`` is ``g*|H| + h``; arcs ``(g, h) -> (g', h)`` for ``g -> g'`` in G and
  ``(g, h) -> (g, h')`` for ``h -> h'`` in H.

>>> from collsynth.instances.generators import build
>>> ring = build("ring", {"nodes": 3, "bidirectional": False})
>>> line_graph_topology(ring).size, degree_topology(ring, 2).num_links, cartesian_topology([ring, ring]).size
(3, 12, 9)
"""

from __future__ import annotations

import numpy as np

from .topology import Topology, from_edges


def arcs_of(topology: Topology) -> np.ndarray:
    """Arcs ``[m, 2]`` sorted by ``(u, v, key)``: the line graph's node numbering."""
    arcs = sorted((u, v, k) for u, v, k in topology.graph.edges(keys=True))
    return np.array([(u, v) for u, v, _ in arcs], dtype=np.int64).reshape(-1, 2)


def group_index(keys: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(order, starts)``: the indices of ``keys`` (values 0..n-1) grouped by value, CSR style."""
    order = np.argsort(keys, kind="stable")
    starts = np.searchsorted(keys[order], np.arange(n + 1))
    return order, starts


def expand_groups(idx: np.ndarray, order: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each ``idx[i]``, every member of its group: the pairs ``(i, member)`` as two arrays."""
    cnt = starts[idx + 1] - starts[idx]
    rows = np.repeat(np.arange(len(idx)), cnt)
    offs = np.arange(len(rows)) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    return rows, order[starts[idx][rows] + offs]


def topology_from_arcs(size: int, arcs: np.ndarray, name: str, like: Topology | None = None,
                       meta: dict | None = None) -> Topology:
    """A topology from arcs; the uniform link costs of ``like`` when given, else none yet."""
    bw = al = None
    if like is not None and like.num_links:
        _, _, data = next(iter(like.graph.edges(data=True)))
        bw, al = data.get("bandwidth"), data.get("alpha")
    return from_edges(size, [tuple(a) for a in arcs.tolist()], bandwidth=bw, alpha=al, name=name, meta=meta)


def line_graph_topology(base: Topology, times: int = 1, *, name: str | None = None,
                        keep_costs: bool = True) -> Topology:
    """L(G) applied ``times`` times (Zhao et al., NSDI 2025, Definition 1): N' = dN, d' = d."""
    size, arcs = base.size, arcs_of(base)
    for _ in range(times):
        order, starts = group_index(arcs[:, 0], size)  # out-arcs by tail
        rows, f = expand_groups(arcs[:, 1], order, starts)
        size, arcs = len(arcs), np.stack([rows, f], 1)
    default = f"L{'^' + str(times) if times > 1 else ''}({base.name})"
    return topology_from_arcs(size, arcs, name or default, base if keep_costs else None)


def degree_topology(base: Topology, n: int, *, name: str | None = None, keep_costs: bool = True) -> Topology:
    """G*n (Zhao et al., NSDI 2025, Definition 3): N' = nN, d' = nd."""
    arcs = arcs_of(base)
    i, j = (a.ravel() for a in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    a = np.repeat(arcs, n * n, axis=0)
    ii, jj = np.tile(i, len(arcs)), np.tile(j, len(arcs))
    return topology_from_arcs(base.size * n, np.stack([a[:, 0] * n + ii, a[:, 1] * n + jj], 1),
                     name or f"{base.name}*{n}", base if keep_costs else None)


def cartesian_topology(factors: list[Topology], *, name: str | None = None, keep_costs: bool = True) -> Topology:
    """The Cartesian product of the factors (Zhao et al., NSDI 2025, Definition 14), row-major.

    When every factor records Cayley translation orders (``meta["cayley"]``) the product's are
    their concatenation.
    """
    size, arcs = factors[0].size, arcs_of(factors[0])
    for h in factors[1:]:
        hs, harcs = h.size, arcs_of(h)
        y, x = np.arange(hs), np.arange(size)
        along_g = np.stack([np.repeat(arcs[:, 0], hs) * hs + np.tile(y, len(arcs)),
                            np.repeat(arcs[:, 1], hs) * hs + np.tile(y, len(arcs))], 1)
        along_h = np.stack([np.repeat(x, len(harcs)) * hs + np.tile(harcs[:, 0], size),
                            np.repeat(x, len(harcs)) * hs + np.tile(harcs[:, 1], size)], 1)
        arcs, size = np.concatenate([along_g, along_h]), size * hs
    meta = {}
    if all("cayley" in (f.meta or {}) for f in factors):
        meta["cayley"] = [o for f in factors for o in f.meta["cayley"]]
    default = " x ".join(f"({f.name})" for f in factors)
    return topology_from_arcs(size, arcs, name or default, factors[0] if keep_costs else None, meta)
