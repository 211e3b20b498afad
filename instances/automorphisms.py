"""A group of automorphisms acting freely on the NPUs of any topology (switches, several orbits).

:func:`collsynth.instances.symmetry.regular_group` finds a group acting regularly (one orbit,
Cayley graphs). Multi-chassis systems are rarely vertex-transitive: on a DGX-2 pair the odd
GPUs send over InfiniBand and the even ones receive, so no automorphism maps one onto the
other, and the NVSwitch nodes are fixed or swapped. Yet such a system still has many
automorphisms (permuting the chassis, and the GPU pairs that share a rail), and a schedule that
every element of a group ``G`` maps onto itself is fully described by one chunk per orbit
(Won et al., TACOS, 2023, Section V, restricted to schedules invariant under ``G``; symmetry
reduction of an integer program by fixing the orbits of its variables, Margot, "Symmetry in
Integer Linear Programming", 50 Years of Integer Programming, Springer 2010, Section 6).

:func:`semiregular_group` builds such a ``G``: automorphisms found by VF2 (Cordella, Foggia,
Sansone and Vento, "A (Sub)Graph Isomorphism Algorithm for Matching Large Graphs", IEEE TPAMI
26(10), 2004) on the coloured graph (nodes by colour refinement class and switch flag, links by
multiplicity, latency and bandwidth), each required to move every NPU, kept while the group
they generate still moves every NPU under every non-identity element (it acts freely, or
semi-regularly, on the NPUs; then a chunk's orbit has ``|G|`` distinct chunks and no element
asks a chunk to be sent along two images of the same send).

>>> from collsynth.instances.generators import build
>>> g = semiregular_group(build("ring", {"nodes": 4}))
>>> len(g), sorted(g[1].tolist()) == [0, 1, 2, 3]
(4, True)
>>> len(semiregular_group(build("mesh", {"dims": [3]})))  # the middle node is fixed by every automorphism
1
"""

from __future__ import annotations

import time

import networkx as nx
import numpy as np

from .symmetry import is_automorphism, refinement_classes
from .topology import Topology

MAX_ORDER = 1024  # a group larger than this is not closed (its elements are listed)


def coloured_graph(topology: Topology, individualise: int | None = None) -> nx.DiGraph:
    """The topology's live nodes and link pairs as a :class:`networkx.DiGraph`: node attribute
    ``colour`` (colour-refinement class with ``individualise`` in a class of its own, switch
    flag), link attribute ``kind`` (parallel links, latency, bandwidth): what an automorphism
    must keep. Colours are canonical, so an automorphism mapping ``a`` to ``b`` maps the graph
    individualising ``a`` onto the one individualising ``b`` colour for colour."""
    la = topology.link_arrays
    cls = refinement_classes(topology, individualise)
    g = nx.DiGraph()
    for v in topology.nodes:
        g.add_node(v, colour=(int(cls[v]), v in topology.switches), id=v)
    for u, v, c, a, b in zip(la.src.tolist(), la.dst.tolist(), la.count.tolist(), la.alpha.tolist(),
                             la.bandwidth.tolist()):
        g.add_edge(u, v, kind=(c, round(a, 15), round(b, 3)))
    return g


def _candidate(topology: Topology, anchor: int, image: int, group: list[np.ndarray], npus: frozenset,
               deadline: float) -> np.ndarray | None:
    """One automorphism mapping ``anchor`` to ``image`` that moves every NPU and commutes with
    every element ``h`` of ``group`` (so it maps ``h(anchor)`` to ``h(image)``), found by VF2 on
    the graphs individualising each; None when there is none (or the deadline passed)."""
    pinned = {int(h[anchor]): int(h[image]) for h in group}
    if len(set(pinned.values())) != len(pinned):
        return None
    g1, g2 = coloured_graph(topology, anchor), coloured_graph(topology, image)
    for k, (u, v) in enumerate(pinned.items()):
        g1.nodes[u]["pin"], g2.nodes[v]["pin"] = k, k

    def node_match(a, b):
        if a["colour"] != b["colour"] or a.get("pin") != b.get("pin") or time.perf_counter() > deadline:
            return False
        return a["id"] != b["id"] or a["id"] not in npus

    matcher = nx.algorithms.isomorphism.DiGraphMatcher(g1, g2, node_match=node_match,
                                                       edge_match=lambda a, b: a["kind"] == b["kind"])
    for mapping in matcher.isomorphisms_iter():
        perm = np.arange(topology.size, dtype=np.int64)
        for k, v in mapping.items():
            perm[k] = v
        return perm
    return None


def closure(generators: list[np.ndarray], size: int, limit: int = MAX_ORDER) -> list[np.ndarray] | None:
    """Every element of the group the permutations ``generators`` generate (identity first), or
    None when it has more than ``limit`` elements.

    >>> [p.tolist() for p in closure([np.array([1, 2, 0])], 3)]
    [[0, 1, 2], [1, 2, 0], [2, 0, 1]]
    """
    ident = np.arange(size, dtype=np.int64)
    seen = {ident.tobytes(): ident}
    frontier = [ident]
    while frontier:
        nxt = []
        for p in frontier:
            for g in generators:
                q = g[p]
                key = q.tobytes()
                if key not in seen:
                    seen[key] = q
                    nxt.append(q)
                    if len(seen) > limit:
                        return None
        frontier = nxt
    return list(seen.values())


def acts_freely(group: list[np.ndarray], npus: np.ndarray) -> bool:
    """Whether no element but the identity fixes an NPU (the group is semiregular on them)."""
    return all(not (p[npus] == npus).any() for p in group[1:])


def semiregular_group(topology: Topology, time_limit: float = 5.0, try_limit: float = 0.25) -> list[np.ndarray]:
    """Elements (node permutations, identity first) of an abelian group of automorphisms of
    ``topology`` that acts freely on its NPUs and maps switches onto switches; just the
    identity when none is found within ``time_limit`` seconds. See the module doc.

    Greedy, one NPU class after another (colour refinement; its first NPU is the anchor): in
    each round, for every NPU ``v`` of the anchor's class outside the anchor's orbit, one
    automorphism mapping the anchor to ``v``, moving every NPU and commuting with the group so
    far (VF2, at most ``try_limit`` seconds each); the one generating the largest group that
    still acts freely on the NPUs is kept, until no candidate enlarges the group.
    """
    deadline = time.perf_counter() + time_limit
    size = topology.size
    npus = np.array(sorted(topology.npus), dtype=np.int64)
    npu_set = frozenset(npus.tolist())
    cls = refinement_classes(topology)
    group = [np.arange(size, dtype=np.int64)]
    gens: list[np.ndarray] = []
    anchors = [int(npus[cls[npus] == c][0]) for c in dict.fromkeys(cls[npus].tolist())]
    for anchor in anchors:
        while len(group) < len(npus):
            best: tuple[np.ndarray, list[np.ndarray]] | None = None
            orbit = {int(p[anchor]) for p in group}
            for image in npus[(cls[npus] == cls[anchor]) & (npus != anchor)].tolist():
                now = time.perf_counter()
                if now > deadline:
                    return group
                if image in orbit:
                    continue
                perm = _candidate(topology, anchor, int(image), group, npu_set, min(deadline, now + try_limit))
                if perm is None or not is_automorphism(topology, perm):
                    continue
                grown = closure(gens + [perm], size, limit=len(npus))
                if grown is not None and acts_freely(grown, npus) and (best is None or len(grown) > len(best[1])):
                    best = (perm, grown)
            if best is None:
                break
            gens.append(best[0])
            group = best[1]
    return group
