"""Topology: a directed multigraph of NPUs (and optional switches) with per-link costs.

A topology is a thin, immutable wrapper around a :class:`networkx.MultiDiGraph` whose nodes are
the integers ``0..size-1`` (failed nodes are removed from the graph but keep their ids, so
``size`` can exceed the number of live nodes) and whose every directed edge carries

- ``alpha``: the link latency in seconds, and
- ``bandwidth``: bytes per second.

A bidirectional link is two directed edges. Parallel edges (e.g. DGX-1's double NVLinks) are
separate edges of the multigraph; :meth:`Topology.link_arrays` aggregates them per directed
pair (bandwidths add up, the count is kept as the pair's capacity in chunks per TEN step).

Everything expensive (shortest paths, link arrays, diameter) is computed once and cached.
"""

from __future__ import annotations

import math
from copy import deepcopy
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Iterable, Mapping

import networkx as nx
import numpy as np

from .. import InputError


SWITCH_HOPS = ("timestep", "instant")  # meta "switch_hop": a chunk leaves a switch the timestep after it arrived, or in it
LATENCIES = ("serial", "pipelined")  # meta "latency": a link's alpha occupies it, or only delays the arrival
SYMMETRIC_DIAMETER_NPUS = 512  # NPUs from which the diameter is searched from one NPU per orbit of the box shifts


class ParallelArrays:
    """A record of parallel arrays, one entry per row (a dataclass whose fields are the
    columns): its length is the number of rows, its first field's length."""

    def __len__(self) -> int:
        return len(getattr(self, next(iter(self.__dataclass_fields__))))  # the first field, in order


@dataclass(frozen=True)
class LinkArrays(ParallelArrays):
    """Directed node pairs joined by at least one live link, as parallel numpy columns.

    ``src[i] -> dst[i]`` has ``count[i]`` parallel links with summed ``bandwidth[i]`` (bytes/s)
    and latency ``alpha[i]`` (s, the largest of the parallel links). Pairs are sorted by
    ``(src, dst)``; :meth:`lookup` finds a pair's index.
    """

    src: np.ndarray
    dst: np.ndarray
    count: np.ndarray
    bandwidth: np.ndarray
    alpha: np.ndarray
    size: int

    def lookup(self, src, dst) -> np.ndarray:
        """Pair indices of the directed pairs ``src -> dst`` (-1 where there is no live link).

        Pairs are sorted by ``src * size + dst``, so this is one vectorised binary search.
        """
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        keys = self.src * self.size + self.dst
        want = src * self.size + dst
        pos = np.searchsorted(keys, want)
        pos_c = np.minimum(pos, max(len(keys) - 1, 0))
        ok = (len(keys) > 0) & (keys[pos_c] == want) if len(keys) else np.zeros(want.shape, bool)
        return np.where(ok, pos_c, -1)


@dataclass(frozen=True, eq=False)
class Topology:
    """A network: live links in ``graph``; ``size`` node ids; switches and failures named.

    Build one with a generator (:mod:`collsynth.instances.generators`), from a file
    (:mod:`collsynth.instances.files`) or with :func:`from_edges`.

    >>> t = from_edges(3, [(0, 1), (1, 2), (2, 0)], bandwidth=1.0, alpha=0.0)
    >>> t.diameter, t.out_degree_range
    (2, (1, 1))
    """

    graph: nx.MultiDiGraph = field(repr=False)
    size: int
    name: str = ""
    switches: frozenset[int] = frozenset()
    failed_nodes: frozenset[int] = frozenset()
    failed_links: frozenset[tuple[int, int]] = frozenset()
    meta: Mapping = field(default_factory=dict)

    # ---- nodes -------------------------------------------------------------------------
    @cached_property
    def nodes(self) -> tuple[int, ...]:
        """Live node ids (NPUs and switches), sorted."""
        return tuple(sorted(self.graph.nodes))

    @cached_property
    def npus(self) -> tuple[int, ...]:
        """Live compute nodes (not switches), sorted: the ranks collectives run over."""
        return tuple(n for n in self.nodes if n not in self.switches)

    @cached_property
    def num_links(self) -> int:
        """Number of live directed links, parallel links counted separately."""
        return self.graph.number_of_edges()

    # ---- links -------------------------------------------------------------------------
    @cached_property
    def link_arrays(self) -> LinkArrays:
        """Live links aggregated per directed pair (see :class:`LinkArrays`)."""
        agg: dict[tuple[int, int], list] = {}
        for u, v, data in self.graph.edges(data=True):
            entry = agg.setdefault((u, v), [0, 0.0, 0.0])
            entry[0] += 1
            entry[1] += float(data["bandwidth"])
            entry[2] = max(entry[2], float(data["alpha"]))
        pairs = sorted(agg)
        n = len(pairs)
        src = np.fromiter((p[0] for p in pairs), dtype=np.int64, count=n)
        dst = np.fromiter((p[1] for p in pairs), dtype=np.int64, count=n)
        count = np.fromiter((agg[p][0] for p in pairs), dtype=np.int64, count=n)
        bandwidth = np.fromiter((agg[p][1] for p in pairs), dtype=np.float64, count=n)
        alpha = np.fromiter((agg[p][2] for p in pairs), dtype=np.float64, count=n)
        return LinkArrays(src, dst, count, bandwidth, alpha, self.size)

    def has_link(self, u: int, v: int) -> bool:
        """True if at least one live directed link ``u -> v`` exists."""
        return self.graph.has_edge(u, v)

    # ---- structure ---------------------------------------------------------------------
    @cached_property
    def in_degrees(self) -> dict[int, int]:
        """In-degree (parallel links counted) of every live node."""
        return dict(self.graph.in_degree())

    @cached_property
    def out_degrees(self) -> dict[int, int]:
        """Out-degree (parallel links counted) of every live node."""
        return dict(self.graph.out_degree())

    @property
    def in_degree_range(self) -> tuple[int, int]:
        """(min, max) in-degree over live NPUs."""
        vals = [self.in_degrees[n] for n in self.npus]
        return (min(vals), max(vals)) if vals else (0, 0)

    @property
    def out_degree_range(self) -> tuple[int, int]:
        """(min, max) out-degree over live NPUs."""
        vals = [self.out_degrees[n] for n in self.npus]
        return (min(vals), max(vals)) if vals else (0, 0)

    @property
    def regular(self) -> bool:
        """True if every live NPU has the same in- and out-degree and there are no switches."""
        lo_i, hi_i = self.in_degree_range
        lo_o, hi_o = self.out_degree_range
        return not self.switches and lo_i == hi_i == lo_o == hi_o

    @cached_property
    def distances(self) -> np.ndarray:
        """Hop distances ``D[u, v]`` between node ids (-1 where unreachable or failed)."""
        from scipy.sparse.csgraph import shortest_path

        dist = shortest_path(self._adjacency, method="D", unweighted=True, directed=True)
        out = np.where(np.isinf(dist), -1, dist).astype(np.int32)
        dead = np.setdiff1d(np.arange(self.size), np.asarray(self.nodes, dtype=np.int64))
        out[dead, :] = -1
        out[:, dead] = -1
        return out

    @cached_property
    def _strong_components(self) -> np.ndarray:
        from scipy.sparse.csgraph import connected_components

        return connected_components(self._adjacency, directed=True, connection="strong")[1]

    def reach_each_other(self, ids: Iterable[int]) -> bool:
        """True if each of the nodes ``ids`` reaches every other (through any live nodes): one
        strongly connected component holds them all, found in linear time, without all-pairs
        distances."""
        ids = np.asarray(list(ids), dtype=np.int64)
        label = self._strong_components
        return len(ids) == 0 or bool((label[ids] == label[ids[0]]).all())

    @cached_property
    def _adjacency(self):
        import scipy.sparse as sp

        la = self.link_arrays
        return sp.csr_matrix((np.ones(len(la), dtype=np.float64), (la.src, la.dst)), shape=(self.size, self.size))

    @cached_property
    def strongly_connected(self) -> bool:
        """True if every live node reaches every other live node."""
        return len(self.nodes) > 0 and nx.is_strongly_connected(self.graph)

    @cached_property
    def diameter(self) -> int:
        """Largest hop distance between live NPUs (-1 if some NPU cannot reach another): read
        from the hop distances when they are computed, else a breadth-first search from each
        NPU, or, beyond :data:`SYMMETRIC_DIAMETER_NPUS` NPUs on identical boxes, from one NPU
        per orbit of the box shifts (:func:`npu_eccentricity`)."""
        ids = np.asarray(self.npus, dtype=np.int64)
        if "distances" in self.__dict__:
            sub = self.distances[np.ix_(ids, ids)]
            return -1 if (sub < 0).any() else int(sub.max(initial=0))
        sources = ids
        if len(ids) > SYMMETRIC_DIAMETER_NPUS:
            from .box_shift import box_shift

            shift = box_shift(self)
            sources = ids if shift is None else np.asarray(shift.representatives(ids), np.int64)
        return npu_eccentricity(self, sources)

    @property
    def moore_bound(self) -> int:
        """Smallest diameter a digraph of this order and max out-degree d can have.

        A degree-d digraph of diameter k has at most ``1 + d + ... + d^k`` nodes (the Moore
        bound for digraphs, Zhao et al., NSDI 2025, Section 3.2 and Appendix B); this returns the
        smallest such k for the number of live NPUs. Topologies with switches use their NPU-to-NPU out-degree.
        """
        return moore_bound(len(self.npus), self.out_degree_range[1])

    def shortest_path(self, u: int, v: int) -> list[int]:
        """One shortest (fewest-hop) path ``u .. v`` through live links, deterministic.

        Paths from ``u`` come from one networkx BFS, computed on first use and cached.
        """
        paths = self._path_cache.get(u)
        if paths is None:
            paths = self._path_cache[u] = nx.single_source_shortest_path(self.graph, u)
        return paths[v]

    @cached_property
    def _path_cache(self) -> dict[int, dict[int, list[int]]]:
        return {}

    # ---- derived topologies --------------------------------------------------------------
    def transpose(self) -> "Topology":
        """The topology with every link reversed (same costs); transpose twice is identity
        (the same object: the transpose is made once and remembers its origin)."""
        return self._transposed

    @cached_property
    def _transposed(self) -> "Topology":
        t = replace(
            self,
            graph=_reversed(self.graph),
            failed_links=frozenset((v, u) for u, v in self.failed_links),
            name=f"{self.name}^T" if not self.name.endswith("^T") else self.name[:-2],
        )
        t.__dict__["_transposed"] = self  # cached_property's own slot
        return t

    def with_failures(
        self, nodes: Iterable[int] = (), links: Iterable[tuple[int, int]] = ()
    ) -> "Topology":
        """The topology with these nodes and directed links removed; ids are kept.

        The result is no longer vertex-transitive, so ``meta["cayley"]`` is dropped.

        Failing a link ``[u, v]`` removes every parallel ``u -> v`` link (only that direction).
        """
        nodes = frozenset(int(n) for n in nodes)
        links = frozenset((int(u), int(v)) for u, v in links)
        for n in nodes:
            if not 0 <= n < self.size:
                raise InputError("failed_nodes", f"node {n} is not in 0..{self.size - 1}")
        g = self.graph.copy()
        for u, v in links:
            if not g.has_edge(u, v):
                raise InputError("failed_links", f"[{u}, {v}] is not a link of the topology")
            while g.has_edge(u, v):
                g.remove_edge(u, v)
        g.remove_nodes_from(nodes)
        meta = {k: v for k, v in self.meta.items() if k != "cayley"} if (nodes or links) else self.meta
        return replace(
            self,
            graph=g,
            meta=meta,
            failed_nodes=self.failed_nodes | nodes,
            failed_links=self.failed_links | links,
        )

    def summary(self) -> dict:
        """The `collsynth topology --json` fields (``docs/topology-files.md``)."""
        lo_i, hi_i = self.in_degree_range
        lo_o, hi_o = self.out_degree_range
        return {
            "name": self.name,
            "nodes": len(self.npus),
            "switches": len(self.switches),
            "links": self.num_links,
            "in_degree": {"min": lo_i, "max": hi_i},
            "out_degree": {"min": lo_o, "max": hi_o},
            "regular": self.regular,
            "diameter": self.diameter,
            "moore_bound": self.moore_bound,
            "failed_nodes": sorted(self.failed_nodes),
            "failed_links": sorted([list(p) for p in self.failed_links]),
        }


def npu_eccentricity(topology: Topology, sources) -> int:
    """The largest hop distance from a node of ``sources`` to a live NPU, by one breadth-first
    search per source (-1 when one cannot reach some NPU). From one NPU per orbit of a group of
    automorphisms acting on the NPUs (:func:`collsynth.instances.box_shift.box_shift`) it is the
    diameter among NPUs: an automorphism ``g`` keeps hop distances and maps NPUs onto NPUs, so
    the NPU ``g(s)`` is as far from every NPU as ``s`` is (Godsil and Royle, "Algebraic Graph
    Theory", Springer 2001, Section 1.3: an automorphism preserves adjacency, hence distance).

    >>> from collsynth.instances.generators import build
    >>> npu_eccentricity(build("dgx_h100", {"nodes": 3}), [0])  # 0 -> NVSwitch -> 1 -> rail 1's leaf -> 9
    4
    """
    from scipy.sparse.csgraph import shortest_path

    ids = np.asarray(topology.npus, dtype=np.int64)
    sources = np.asarray(sources, dtype=np.int64)
    if not len(ids) or not len(sources):
        return 0
    dist = shortest_path(topology._adjacency, method="D", unweighted=True, directed=True, indices=sources)[:, ids]
    return -1 if np.isinf(dist).any() else int(dist.max(initial=0))


def moore_bound(nodes: int, degree: int) -> int:
    """Smallest k with ``1 + d + ... + d^k >= nodes`` (the Moore bound for digraphs, Zhao et al.,
    NSDI 2025, Section 3.2).

    >>> moore_bound(1024, 4)
    5
    """
    if nodes <= 1:
        return 0
    if degree <= 0:
        return -1
    if degree == 1:
        return nodes - 1
    k, reach, layer = 0, 1, 1
    while reach < nodes:
        layer *= degree
        reach += layer
        k += 1
    return k


def from_edges(
    size: int,
    edges: Iterable[tuple],
    *,
    bandwidth: float | None = None,
    alpha: float | None = None,
    name: str = "",
    bidirectional: bool = False,
    switches: Iterable[int] = (),
    meta: Mapping | None = None,
) -> Topology:
    """A topology on ids ``0..size-1`` from ``(u, v)`` or ``(u, v, attrs)`` directed edges.

    Edges without ``bandwidth`` / ``alpha`` attributes get the given defaults (``None`` leaves
    them for :func:`with_link_costs` to fill); with
    ``bidirectional=True`` each edge is added in both directions. Self-loops are dropped.
    """
    g = nx.MultiDiGraph()
    g.add_nodes_from(range(size))
    for e in edges:
        u, v = int(e[0]), int(e[1])
        attrs = dict(e[2]) if len(e) > 2 else {}
        if u == v:
            continue
        for a, b in ((u, v), (v, u)) if bidirectional else ((u, v),):
            g.add_edge(a, b, **{**attrs, "bandwidth": attrs.get("bandwidth", bandwidth), "alpha": attrs.get("alpha", alpha)})
    return Topology(
        graph=g, size=size, name=name, switches=frozenset(switches), meta=dict(meta or {})
    )


def with_link_costs(topology: Topology, bandwidth: float | None, alpha: float | None) -> Topology:
    """Set ``bandwidth``/``alpha`` on every link whose generator left them unset (``None``).

    Generators mark links with a relative bandwidth ``scale`` where a level is faster (e.g.
    hierarchical systems); the final bandwidth is ``scale * bandwidth``.
    """
    g = topology.graph.copy()
    for u, v, data in g.edges(data=True):
        if data.get("bandwidth") is None:
            data["bandwidth"] = float(bandwidth) * float(data.pop("scale", 1.0))
        if data.get("alpha") is None:
            data["alpha"] = float(alpha) * float(data.pop("alpha_scale", 1.0))
        if not 0 < data["bandwidth"] < math.inf:
            raise InputError("bandwidth", f"link {u}->{v} has bandwidth {data['bandwidth']}, expected a finite number > 0")
        if not 0 <= data["alpha"] < math.inf:
            raise InputError("alpha", f"link {u}->{v} has alpha {data['alpha']}, expected a finite number >= 0")
    return replace(topology, graph=g)


def check_costs(bandwidth: float, alpha: float, where: str = "topology") -> None:
    """Refuse link costs that are not a positive, finite bandwidth (bytes/s) and a
    non-negative, finite latency (s): TOML's ``inf`` and ``nan`` included.

    >>> check_costs(float("inf"), 0.0)
    Traceback (most recent call last):
    collsynth.InputError: topology.bandwidth: expected a positive, finite number of bytes/s, got inf
    """
    if not 0 < bandwidth < math.inf:
        raise InputError(f"{where}.bandwidth", f"expected a positive, finite number of bytes/s, got {bandwidth}")
    if not 0 <= alpha < math.inf:
        raise InputError(f"{where}.alpha", f"expected a non-negative, finite latency in seconds, got {alpha}")


def with_latency(topology: Topology, mode: str) -> Topology:
    """``topology`` with ``meta["latency"] = mode``: ``"serial"`` (the default: a link's alpha
    occupies it with the chunk) or ``"pipelined"`` (TE-CCL's model, Liu et al., "Rethinking
    Machine Learning Collective Communication as a Multi-Commodity Flow Problem", SIGCOMM 2024,
    Section 4: the link is busy for the transmission only and alpha delays the arrival;
    :mod:`collsynth.tens.ten`).

    >>> t = from_edges(2, [(0, 1), (1, 0)])
    >>> with_latency(t, "pipelined").meta["latency"], "latency" in with_latency(t, "serial").meta
    ('pipelined', False)
    """
    if mode not in LATENCIES:
        raise InputError("latency", f"expected one of {', '.join(LATENCIES)}, got {mode!r}")
    meta = {k: v for k, v in topology.meta.items() if k != "latency"}
    if mode != "serial":
        meta["latency"] = mode
    return replace(topology, meta=meta)


_IMMUTABLE = (int, float, str, bool, type(None))  # attribute values a copy may share


def _reversed(graph: nx.MultiDiGraph) -> nx.MultiDiGraph:
    """``graph.reverse(copy=True)``, the same graph (nodes, edges, keys and attributes in the same
    order), without deep copies of attribute values that cannot change (numbers and strings):
    networkx stores a fresh dict per edge either way, and the copies took most of the transpose
    at 16,384 GPUs."""
    h = graph.__class__()
    h.graph.update(deepcopy(graph.graph))
    h.add_nodes_from((n, deepcopy(d)) for n, d in graph.nodes(data=True))
    h.add_edges_from((v, u, k, d if all(isinstance(x, _IMMUTABLE) for x in d.values()) else deepcopy(d))
                     for u, v, k, d in graph.edges(keys=True, data=True))
    return h
