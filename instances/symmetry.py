"""Groups of automorphisms acting regularly on a topology's nodes (Cayley structure).

A topology is a Cayley graph of a group ``G`` when ``G`` acts on its nodes by automorphisms
regularly: for every pair of nodes exactly one element maps the first to the second. Tori,
hypercubes, Hamming graphs, circulants, complete graphs and Cartesian products of those are
Cayley graphs of abelian groups ``Z_n1 x .. x Z_nk`` whose elements act as translations of
row-major node coordinates. On such a topology a schedule for the chunks of one node,
translated by every element, is a schedule for every node's chunks (the BFB schedules of
Zhao et al., NSDI 2025, Section 6, are solved for one node per step on such graphs for this
reason).

:func:`regular_group` finds such a group without being told: it checks the generator's
declaration (``meta["cayley"]``), then translations of ``Z_N`` and of every row-major product
``Z_n1 x .. x Z_nk`` with ``n1 * .. * nk = N``; a translation group is accepted only when every
unit translation maps every link to a link with the same multiplicity, latency and bandwidth.
:func:`why_no_group` says why none was found (colour refinement proves a topology is not
vertex-transitive when it splits the nodes into several classes).

>>> from collsynth.instances.generators import build
>>> g = regular_group(build("torus", {"dims": [3, 4]}))
>>> g.orders, int(g.table[5, 0]), g.how
((3, 4), 5, "translations of Z_3 x Z_4 (the generator's declaration)")
>>> regular_group(build("mesh", {"dims": [3, 3]})) is None
True

Every ``topology`` argument is a :class:`~collsynth.instances.topology.Topology` (the type is not
imported here: the topology's diameter reads the box shifts, and imports go one way).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np


MAX_FACTORIZATIONS = 4096  # ordered factorizations of N tried before giving up
PROFILED_NODES = 4  # nodes compared with node 0 by individualised colour refinement in why_no_group


# ---- translations of Z_n1 x .. x Z_nk on row-major node ids ------------------------------------

def coords(ids: np.ndarray, orders) -> np.ndarray:
    """Row-major coordinates ``[len(ids), k]`` of node ids (the last coordinate varies fastest).

    >>> coords(np.array([0, 5, 11]), [3, 4]).tolist()
    [[0, 0], [1, 1], [2, 3]]
    """
    ids = np.asarray(ids, dtype=np.int64)
    out = np.zeros((len(ids), len(orders)), np.int64)
    rest = ids.copy()
    for k in range(len(orders) - 1, -1, -1):
        out[:, k] = rest % orders[k]
        rest //= orders[k]
    return out


def translate(ids: np.ndarray, g: np.ndarray, orders) -> np.ndarray:
    """Node ids translated by the group element ``g`` (coordinates added modulo the orders).

    ``g`` is one element (``[k]``) or one per id (``[len(ids), k]``).

    >>> translate(np.array([0, 11]), np.array([1, 1]), [3, 4]).tolist()
    [5, 0]
    """
    c = (coords(ids, orders) + np.asarray(g, dtype=np.int64)) % np.asarray(orders)
    out = np.zeros(len(c), np.int64)
    for k, n in enumerate(orders):
        out = out * n + c[:, k]
    return out


def translation_table(orders) -> np.ndarray:
    """``table[g, x]``: node id of ``x`` translated by group element ``g`` (ids row-major; the
    element ``g`` is the translation that maps node 0 to node ``g``).

    >>> translation_table([2, 2]).tolist()
    [[0, 1, 2, 3], [1, 0, 3, 2], [2, 3, 0, 1], [3, 2, 1, 0]]
    """
    n = math.prod(orders)
    ids = np.arange(n, dtype=np.int64)
    C = coords(ids, orders)
    table = np.zeros((n, n), np.int64)
    for k, o in enumerate(orders):
        table *= o
        table += (C[:, k][:, None] + C[:, k][None, :]) % o
    return table


def _plain(topology) -> bool:
    """No switches, no failures, live nodes exactly ``0..size-1``: a group can act on them."""
    return (not topology.switches and not topology.failed_nodes and not topology.failed_links
            and len(topology.nodes) == topology.size and topology.size > 0)


def is_automorphism(topology, perm: np.ndarray) -> bool:
    """Whether the node permutation ``perm`` maps every directed link pair to a link pair with
    the same number of parallel links, latency and bandwidth (vectorised).

    >>> from collsynth.instances.generators import build
    >>> is_automorphism(build("ring", {"nodes": 4}), np.array([1, 2, 3, 0]))
    True
    """
    la = topology.link_arrays
    perm = np.asarray(perm, dtype=np.int64)
    idx = la.lookup(perm[la.src], perm[la.dst])
    if (idx < 0).any():
        return False
    return bool((la.count[idx] == la.count).all() and np.allclose(la.alpha[idx], la.alpha, rtol=1e-12, atol=0)
                and np.allclose(la.bandwidth[idx], la.bandwidth, rtol=1e-12, atol=0))


def translations_are_automorphisms(topology, orders) -> bool:
    """Whether every translation of ``Z_n1 x .. x Z_nk`` (row-major ids) is an automorphism:
    it suffices that the unit translations are."""
    if not _plain(topology) or math.prod(orders) != topology.size:
        return False
    ids = np.arange(topology.size, dtype=np.int64)
    for k in range(len(orders)):
        unit = np.zeros(len(orders), np.int64)
        unit[k] = 1
        if not is_automorphism(topology, translate(ids, unit, orders)):
            return False
    return True


def cayley_orders(topology) -> list[int] | None:
    """The translation group orders the generator declares (``meta["cayley"] = [n1, .., nk]``:
    node ids are row-major coordinates in ``Z_n1 x .. x Z_nk``), when every translation is an
    automorphism (:func:`translations_are_automorphisms`); ``None`` otherwise (failed nodes,
    switches, missing or wrong declaration)."""
    orders = topology.meta.get("cayley") if topology.meta else None
    if not orders:
        return None
    orders = [int(x) for x in orders]
    return orders if translations_are_automorphisms(topology, orders) else None


# ---- finding a group ---------------------------------------------------------------------------

@dataclass(frozen=True)
class RegularGroup:
    """A group acting regularly on the nodes ``0..N-1`` by automorphisms.

    Element ``g`` is the one mapping node 0 to node ``g``; ``table[g, x]`` is the image of node
    ``x`` under it (so ``table[g, 0] == g``). ``orders``: the group is ``Z_n1 x .. x Z_nk``
    acting by translations of row-major coordinates. ``how`` says how it was found.
    """

    table: np.ndarray
    orders: tuple[int, ...]
    how: str

    @property
    def size(self) -> int:
        """The order of the group (its number of elements, one per node)."""
        return int(self.table.shape[0])

    @property
    def inverse(self) -> np.ndarray:
        """``inverse[g]``: the element mapping node ``g`` back to node 0."""
        return np.argmax(self.table == 0, axis=0)  # column x: the element h with h(x) = 0


def _factorizations(n: int, limit: int = MAX_FACTORIZATIONS) -> list[tuple[int, ...]]:
    """Ordered factorizations of ``n`` into factors >= 2, fewest factors first (at most ``limit``)."""
    out: list[tuple[int, ...]] = []

    def rec(rest: int, prefix: tuple[int, ...]) -> None:
        if len(out) >= limit:
            return
        if rest == 1:
            if prefix:
                out.append(prefix)
            return
        for f in range(2, rest + 1):
            if rest % f == 0:
                rec(rest // f, prefix + (f,))

    rec(n, ())
    return sorted(out, key=len)


def _name(orders) -> str:
    return " x ".join(f"Z_{o}" for o in orders)


@lru_cache(maxsize=32)
def regular_group(topology) -> RegularGroup | None:
    """A group of automorphisms acting regularly on ``topology``'s nodes, or ``None``.

    Tried in order: the generator's declaration (``meta["cayley"]``), the cyclic group
    ``Z_N`` (``x -> x + 1``), and the row-major products ``Z_n1 x .. x Z_nk`` (fewest factors
    first, at most :data:`MAX_FACTORIZATIONS`); the first whose unit translations are
    automorphisms wins. Cached per topology object.
    """
    if not _plain(topology):
        return None
    declared = cayley_orders(topology)
    if declared is not None:
        return RegularGroup(translation_table(declared), tuple(declared),
                            f"translations of {_name(declared)} (the generator's declaration)")
    for orders in _factorizations(topology.size):
        if translations_are_automorphisms(topology, orders):
            return RegularGroup(translation_table(orders), tuple(orders),
                                f"translations of {_name(orders)} (found in the node labelling)")
    return None


def refinement_classes(topology, individualise: int | None = None) -> np.ndarray:
    """Colour refinement (1-dimensional Weisfeiler-Leman) on the live nodes: ``cls[v]`` is the
    class of node ``v`` (-1 for node ids that are not live); with ``individualise``, that node
    starts in a class of its own. Colours are canonical (named by sorted signatures), so two
    runs can be compared: an automorphism maps node ``a`` to node ``b`` only if individualising
    ``a`` and individualising ``b`` give the same class sizes per colour, and nodes in different
    classes of one run are never mapped onto each other. Links are compared by multiplicity,
    latency and bandwidth.

    >>> from collsynth.instances.generators import build
    >>> refinement_classes(build("mesh", {"dims": [3]})).tolist()
    [0, 1, 0]
    """
    la = topology.link_arrays
    attrs = list(zip(la.count.tolist(), la.alpha.tolist(), la.bandwidth.tolist()))
    kind = {a: i for i, a in enumerate(sorted(set(attrs)))}
    lk = [kind[a] for a in attrs]
    live = list(topology.nodes)
    outs: dict[int, list] = {v: [] for v in live}
    ins: dict[int, list] = {v: [] for v in live}
    for u, v, k in zip(la.src.tolist(), la.dst.tolist(), lk):
        outs[u].append((v, k))
        ins[v].append((u, k))
    colour = {v: int(v == individualise) for v in live}
    classes = len(set(colour.values()))
    while True:
        sig = {v: (colour[v], tuple(sorted((colour[w], k) for w, k in outs[v])),
                   tuple(sorted((colour[w], k) for w, k in ins[v]))) for v in live}
        names = {s: i for i, s in enumerate(sorted(set(sig.values())))}
        colour = {v: names[sig[v]] for v in live}
        if len(names) == classes:
            break
        classes = len(names)
    out = np.full(topology.size, -1, np.int64)
    for v, c in colour.items():
        out[v] = c
    return out


def _profile(topology, node: int) -> tuple[int, ...]:
    cls = refinement_classes(topology, individualise=node)
    return tuple(np.bincount(cls[cls >= 0]).tolist())


def why_no_group(topology) -> str:
    """Why :func:`regular_group` finds no group for ``topology`` (one sentence)."""
    if topology.switches:
        return "the topology has switches: unwind them to point-to-point links first"
    if topology.failed_nodes or topology.failed_links or len(topology.nodes) != topology.size:
        return "the topology has failed nodes or links: no group acts regularly on what is left"
    cls = refinement_classes(topology)
    live = cls[cls >= 0]
    if len(np.unique(live)) > 1:
        a = int(np.flatnonzero(cls == cls[0])[0])
        b = int(np.flatnonzero((cls >= 0) & (cls != cls[0]))[0])
        return (f"the topology is not vertex-transitive: colour refinement splits its nodes into "
                f"{len(np.unique(live))} classes (node {a} and node {b} differ), so no group of "
                "automorphisms acts regularly on them")
    base = _profile(topology, int(topology.nodes[0]))
    for v in list(topology.nodes)[1:1 + PROFILED_NODES]:
        if _profile(topology, v) != base:
            return (f"the topology is not vertex-transitive: no automorphism maps node {topology.nodes[0]} to "
                    f"node {v} (colour refinement tells them apart once each is singled out), so no group "
                    "of automorphisms acts regularly on the nodes")
    return ("no group of translations acts regularly on the nodes (tried the generator's declaration, "
            f"Z_{topology.size} and the row-major products Z_n1 x .. x Z_nk of {topology.size})")
