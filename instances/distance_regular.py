"""A catalogue of named distance-regular graphs (Zhao et al., NSDI 2025, §E.3, Table 7), built with networkx.

Distance-regular graphs admit BW-optimal BFB schedules (Zhao et al., NSDI 2025, §E.3), and many have a
diameter at or near the Moore bound. Every entry records the order N, the degree d, the
diameter D of Zhao et al., NSDI 2025, Table 7 and the intersection array {b_0, ..., b_{D-1}; c_1, ..., c_D}
(Brouwer, Cohen and Neumaier; distanceregular.org); the tests rebuild each graph and check
all of them with :func:`networkx.intersection_array`.

>>> from collsynth.instances import generators
>>> generators.build("distance_regular", {"name": "petersen_line"}).diameter
3
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable

import networkx as nx

from .. import InputError
from .topology import Topology, from_edges


@dataclass(frozen=True)
class Entry:
    """One catalogue graph: how to build it and what Zhao et al., NSDI 2025, Table 7 says about it."""

    title: str
    build: Callable[[], nx.Graph]
    nodes: int
    degree: int
    diameter: int
    intersection_array: tuple[tuple[int, ...], tuple[int, ...]]


def _heawood_distance3() -> nx.Graph:
    h = nx.heawood_graph()
    dist = dict(nx.all_pairs_shortest_path_length(h))
    g = nx.Graph()
    g.add_nodes_from(h)
    g.add_edges_from((u, v) for u in h for v in h if u < v and dist[u][v] == 3)
    return g


def _k55_minus_matching() -> nx.Graph:
    g = nx.complete_bipartite_graph(5, 5)
    g.remove_edges_from((i, 5 + i) for i in range(5))
    return g


def _pg23_incidence() -> nx.Graph:
    """Points and lines of PG(2,3): 1- and 2-dim subspaces of GF(3)^3, joined when incident."""
    vecs = [v for v in itertools.product(range(3), repeat=3) if any(v)]
    # normalise: first non-zero coordinate is 1
    reps = sorted({tuple((x * pow(next(c for c in v if c), -1, 3)) % 3 for x in v) for v in vecs})
    g = nx.Graph()
    g.add_nodes_from(("p", p) for p in reps)
    g.add_nodes_from(("l", l) for l in reps)  # a line is given by its normal vector
    g.add_edges_from((("p", p), ("l", l)) for p in reps for l in reps
                     if sum(a * b for a, b in zip(p, l)) % 3 == 0)
    return g


def _doubled_odd4() -> nx.Graph:
    """3- and 4-subsets of a 7-set, joined by inclusion (the doubled odd graph 2.O4)."""
    threes = [frozenset(s) for s in itertools.combinations(range(7), 3)]
    fours = [frozenset(s) for s in itertools.combinations(range(7), 4)]
    g = nx.Graph()
    g.add_nodes_from(sorted(threes, key=sorted) + sorted(fours, key=sorted))
    g.add_edges_from((a, b) for a in threes for b in fours if a < b)
    return g


def _tutte8cage() -> nx.Graph:
    return nx.LCF_graph(30, [-13, -9, 7, -7, 9, 13], 5)


CATALOGUE: dict[str, Entry] = {
    "octahedron": Entry("Octahedron J(4,2)", nx.octahedral_graph, 6, 4, 2, ((4, 1), (1, 4))),
    "paley9": Entry("Paley graph P9 = H(2,3)", lambda: nx.cartesian_product(nx.complete_graph(3), nx.complete_graph(3)),
                    9, 4, 2, ((4, 2), (1, 2))),
    "k55_minus_matching": Entry("K5,5 minus a perfect matching", _k55_minus_matching, 10, 4, 3,
                                ((4, 3, 1), (1, 3, 4))),
    "heawood_distance3": Entry("Distance-3 graph of the Heawood graph", _heawood_distance3, 14, 4, 3,
                               ((4, 3, 2), (1, 2, 4))),
    "petersen_line": Entry("Line graph of the Petersen graph", lambda: nx.line_graph(nx.petersen_graph()),
                           15, 4, 3, ((4, 2, 1), (1, 1, 4))),
    "cube4": Entry("4-cube Q4 = H(4,2)", lambda: nx.hypercube_graph(4), 16, 4, 4, ((4, 3, 2, 1), (1, 2, 3, 4))),
    "heawood_line": Entry("Line graph of the Heawood graph", lambda: nx.line_graph(nx.heawood_graph()),
                          21, 4, 3, ((4, 2, 2), (1, 1, 2))),
    "pg23_incidence": Entry("Incidence graph of PG(2,3)", _pg23_incidence, 26, 4, 3, ((4, 3, 3), (1, 1, 4))),
    "odd4": Entry("Odd graph O4 = Kneser K(7,3)", lambda: nx.kneser_graph(7, 3), 35, 4, 3, ((4, 3, 3), (1, 1, 2))),
    "doubled_odd4": Entry("Doubled odd graph D(O4)", _doubled_odd4, 70, 4, 7,
                          ((4, 3, 3, 2, 2, 1, 1), (1, 1, 2, 2, 3, 3, 4))),
    "tutte8cage_line": Entry("Line graph of Tutte's 8-cage", lambda: nx.line_graph(_tutte8cage()), 45, 4, 4,
                             ((4, 2, 2, 2), (1, 1, 1, 2))),
}


def graph(name: str) -> nx.Graph:
    """The catalogue graph ``name`` as an undirected networkx graph on ids 0..N-1."""
    if name not in CATALOGUE:
        raise InputError("name", f"unknown distance-regular graph {name!r}; known: {', '.join(CATALOGUE)}")
    g = CATALOGUE[name].build()
    return nx.convert_node_labels_to_integers(g, ordering="default")


def topology(name: str) -> Topology:
    """The catalogue graph ``name`` as a bidirectional :class:`Topology` (costs left unset)."""
    g = graph(name)
    e = CATALOGUE[name]
    return from_edges(
        g.number_of_nodes(), sorted(g.edges()), bidirectional=True, name=name,
        meta={"title": e.title, "table7": {"nodes": e.nodes, "degree": e.degree, "diameter": e.diameter},
              "intersection_array": [list(e.intersection_array[0]), list(e.intersection_array[1])]},
    )
