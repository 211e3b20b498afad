"""Per-node bounds and the parametric min-cut search over node sets (the ``cut`` argument).

Part of :mod:`collsynth.tens.bounds` (its module documentation describes every argument).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Iterable

import networkx as nx
import numpy as np
import scipy.sparse as sp
from numba import njit
from scipy.sparse.csgraph import dijkstra

from .demand import Arcs, Demand
from .record import CUT_BUDGET_S, FLOW_S_PER_UNIT, TOL


# ---- per-node bounds and the parametric min-cut ---------------------------------------------

def per_node(arcs: Arcs, demand: Demand, weight: np.ndarray, supply,
             nodes: np.ndarray | None = None) -> tuple[float, str, int | None]:
    """The cut bound for ``S = {v}`` (inbound) and ``S = V \\ {u}`` (outbound), best over
    ``nodes`` (default every node; on identical boxes one node per orbit stands for all,
    :mod:`.symmetric`).

    Returns ``(value, "inbound" | "outbound", node)``; ``(0, "inbound", None)`` when nothing
    must move.
    """
    if not len(demand):
        return 0, "inbound", None
    needs = _node_needs(demand, weight, nodes)
    best_v = (0, "inbound", None)
    for name, need, ends in (("inbound", needs[0], arcs.dst), ("outbound", needs[1], arcs.src)):
        seen: dict = {}
        candidates = arcs.nodes if nodes is None else np.asarray(nodes, np.int64)
        for v in candidates[need[candidates] > 0].tolist():
            idx = np.flatnonzero(ends == v)
            key = (float(need[v]), supply.key(idx))
            if key not in seen:
                seen[key] = supply.smallest(idx, float(need[v]))
            if seen[key] > best_v[0]:
                best_v = (seen[key], name, v)
    return best_v


def _node_needs(demand: Demand, weight: np.ndarray, nodes: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per node ``v`` (of ``nodes``, default every node; zero elsewhere): the ``weight`` of the
    rows that must cross into ``{v}`` (it needs them and does not hold them; combining: it
    needs the result and another node contributes) and of those that must leave it (it alone
    holds them, or contributes, and another node needs them); one compiled pass over the rows."""
    n = demand.pre.shape[1]
    cols = np.arange(n, dtype=np.int64) if nodes is None else np.asarray(nodes, dtype=np.int64)
    into, out_of = np.zeros(n), np.zeros(n)
    held, needed = np.count_nonzero(demand.pre, axis=1), np.count_nonzero(demand.post, axis=1)
    _add_node_needs(np.ascontiguousarray(demand.pre), np.ascontiguousarray(demand.post), demand.combining,
                    np.asarray(weight, dtype=float), cols, held, needed, into, out_of)
    return into, out_of


@njit(cache=True, nogil=True)
def _add_node_needs(pre, post, combining, weight, cols, n_pre, n_post, into, out_of):
    """:func:`_node_needs` in one pass over the rows (``n_pre``, ``n_post``: each row's
    holders and targets): ``into[v]`` and ``out_of[v]`` grow by each row's weight where the
    row must enter or leave ``{v}``, for ``v`` in ``cols``."""
    for r in range(pre.shape[0]):
        for v in cols:
            held, needed = pre[r, v], post[r, v]
            if needed and ((n_pre[r] > held) if combining[r] else not held):
                into[v] += weight[r]
            if held and (combining[r] or n_pre[r] == 1) and n_post[r] > needed:
                out_of[v] += weight[r]


@dataclass
class _Terms:
    """A min-cut's terms (see :func:`_terms`): a constant, ``x_p`` weights ``linear[p]``,
    ``[S misses {h}]`` weights ``single[h]``, ``[S misses H]`` weights ``multi[H]``."""

    const: float
    linear: np.ndarray
    single: np.ndarray
    multi: dict
    exact: bool


def _terms(demand: Demand, weight: np.ndarray, A_in: np.ndarray, A_out: np.ndarray) -> _Terms:
    """The min-cut terms of every row for anchors ``A_in`` (in S) and ``A_out`` (not in S).

    Each row's crossing indicator is replaced by a lower estimate that a cut can represent
    (Kolmogorov and Zabih, TPAMI 2004, Section 3: submodular terms of up to three
    variables): a constant, ``x_p`` (p in S), ``[S misses H]`` or ``x_p - [S meets H]``
    (non-combining rows: the set must meet the row's targets and miss its holders; combining
    rows: meet its targets and leave a contributor outside). ``exact`` says whether every
    estimate equals its indicator on every anchored set.
    """
    pre, post, comb = demand.pre, demand.post, demand.combining
    n = demand.pre.shape[1]
    live = weight > 0
    forced = (post & A_in).any(axis=1)
    pre_in = (pre & A_in).any(axis=1)
    pre_out = (pre & A_out).any(axis=1)
    free_h, free_p = pre & ~A_out, post & ~A_out
    nh, np_ = free_h.sum(axis=1), free_p.sum(axis=1)
    p = np.argmax(free_p, axis=1)
    h = np.argmax(free_h, axis=1)
    # combining rows
    c_const = live & comb & forced & pre_out
    c_lin = live & comb & ~forced & (np_ > 0) & pre_out
    c_loose = live & comb & ((forced & ~pre_out & ~(pre <= A_in).all(axis=1))
                             | (~forced & (np_ > 0) & ~pre_out) | (c_lin & (np_ > 1)))
    # non-combining rows
    nc = live & ~comb & ~pre_in & (forced | (np_ > 0))
    n_const = nc & forced & (nh == 0)
    n_miss = nc & forced & (nh > 0)
    n_lin = nc & ~forced & (nh == 0)
    n_pair = nc & ~forced & (nh > 0) & (np_ == 1)  # x_p [S misses H] >= x_p - [S meets H]
    n_loose = (n_lin & (np_ > 1)) | (nc & ~forced & (nh > 0))
    lin = c_lin | n_lin | n_pair
    linear = np.bincount(p[lin], weights=weight[lin], minlength=n)
    miss = n_miss | n_pair
    one = miss & (nh == 1)
    single = np.bincount(h[one], weights=weight[one], minlength=n)
    multi: dict = {}
    for r in np.flatnonzero(miss & (nh > 1)).tolist():
        H = tuple(np.flatnonzero(free_h[r]).tolist())
        multi[H] = multi.get(H, 0.0) + float(weight[r])
    const = float(weight[c_const | n_const].sum() - weight[n_pair].sum())
    return _Terms(const, linear, single, multi, not bool((c_loose | n_loose).any()))


def _best_set(arcs: Arcs, supply_w: np.ndarray, terms: _Terms, A_in, A_out) -> tuple[float, np.ndarray]:
    """``max_S (estimated demand(S) - supply(S))`` over ``S`` with the anchors, by one min cut.

    ``S`` is the sink side: an arc ``u -> v`` entering ``S`` is cut; ``x_p`` costs ``w`` when
    ``p`` is outside ``S`` (edge ``p -> t``); ``[S misses H]`` costs ``w`` when some ``h`` of
    ``H`` is in ``S`` (edge ``s -> a`` and ``a -> h`` uncuttable; ``s -> h`` for one ``h``).
    Anchored nodes are merged into ``s`` (``A_out``) and ``t`` (``A_in``). Boykov and
    Kolmogorov's max-flow (Boykov and Kolmogorov, TPAMI 2004) finds the cut. Returns
    ``(the maximum, S)``.
    """
    name = {v: v for v in arcs.nodes.tolist()}
    name.update({v: "s" for v in np.flatnonzero(A_out).tolist()})
    name.update({v: "t" for v in np.flatnonzero(A_in).tolist()})
    cap: dict = {}

    def add(u, v, c):
        if u == v or u == "t" or v == "s":
            return  # inside one side, or from the sink side to the source side: never cut
        cap[(u, v)] = cap.get((u, v), 0.0) + c

    for u, v, c in zip(arcs.src.tolist(), arcs.dst.tolist(), supply_w.tolist()):
        if c > 0:
            add(name[u], name[v], c)
    total = terms.const + float(terms.linear.sum()) + float(terms.single.sum())
    for q in np.flatnonzero(terms.linear).tolist():
        add(name[q], "t", float(terms.linear[q]))
    for q in np.flatnonzero(terms.single).tolist():
        add("s", name[q], float(terms.single[q]))
    for i, (H, w) in enumerate(terms.multi.items()):
        total += w
        add("s", ("any", i), w)
        for q in H:
            add(("any", i), name[q], math.inf)
    G = nx.DiGraph()
    G.add_nodes_from(["s", "t"])
    G.add_edges_from((u, v, {"capacity": c}) for (u, v), c in cap.items())
    R = nx.algorithms.flow.boykov_kolmogorov(G, "s", "t")
    source_side = R.graph["trees"][0]  # what s still reaches in the residual network
    inside = A_in.copy()
    inside[[x for x in G if isinstance(x, int) and x not in source_side]] = True
    return total - R.graph["flow_value"], inside


def _order(arcs: Arcs, demand: Demand, first: Iterable[int]) -> list[int]:
    """Live nodes: those of ``first`` that need or hold something, then the others that do,
    then the rest. Nodes that take part come first: the "out" anchors of a combining
    collective are exact only at a contributor (:func:`cut_search`), and a set with demand
    has a contributor outside it, so its first node outside, in this order, is one."""
    nodes = arcs.nodes.tolist()
    active = set(np.flatnonzero(demand.pre.any(axis=0) | demand.post.any(axis=0)).tolist())
    return list(dict.fromkeys([v for v in first if v in active] + [v for v in nodes if v in active] + nodes))


def _family(size: int, order: list[int], family: str):
    """Anchor pairs ``(A_in, A_out)``: the i-th "in" anchor forces node i of ``order`` into
    ``S`` and nodes ``0..i-1`` out (every non-empty ``S`` has a first node in the order); the
    i-th "out" anchor forces node i out and ``0..i-1`` in (every ``S != V``)."""
    for i, v in enumerate(order):
        fixed, other = np.zeros(size, bool), np.zeros(size, bool)
        fixed[v] = True
        other[order[:i]] = True
        yield (fixed, other) if family == "in" else (other, fixed)


def _bisection(arcs: Arcs):
    """Both halves of a Kernighan-Lin bisection (Kernighan and Lin, BSTJ 1970; networkx,
    seeded) as "out" anchors."""
    und = nx.Graph()
    und.add_nodes_from(arcs.nodes.tolist())
    und.add_edges_from(zip(arcs.src.tolist(), arcs.dst.tolist()))
    for half in nx.algorithms.community.kernighan_lin_bisection(und, seed=0):
        mask = np.zeros(arcs.size, bool)
        mask[list(half)] = True
        yield np.zeros(arcs.size, bool), mask


def cut_search(arcs: Arcs, demand: Demand, weight: np.ndarray, supply, start: float, witness=None,
               *, first: Iterable[int] = (), budget_s: float = CUT_BUDGET_S, inner: np.ndarray | None = None):
    """The largest over node sets ``S`` of ``supply.smallest(arcs entering S, demand(S))``.

    Parametric min-cut (Gallo et al., SIAM J. Computing 1989, Section 4, with Dinkelbach's
    update, Dinkelbach, Management Science 1967): at the current value ``p`` one min cut per
    anchor pair (:func:`_family`) finds the ``S`` maximising ``demand(S) - supply_p(S)``; if it is
    positive, ``p`` jumps to that ``S``'s exact bound and the anchor is tried again. Supply
    grows with ``p``, so an anchor with no violated set at ``p`` has none later: every set is
    checked at a value no larger than the result. ``start`` (with its ``witness``) must
    itself be a valid bound (the per-node bound, a special case).

    Exactness: each row's crossing indicator is replaced by the estimate of :func:`_terms`,
    never more than the indicator, and every found ``S`` is re-checked with its exact demand,
    so the result is always a valid bound. One anchor family whose estimates are all exact
    makes the search exact over all sets: the "in" family for allgather, broadcast, gather
    and scatter, the "out" family for reduce and reduce_scatter (whatever the chunks per
    node, failed nodes or participant subset); allreduce needs both families, whose exact
    anchors (all but the first of each) cover every set. For all-to-all and mixed concurrent
    collectives the search is a relaxation: both families plus a Kernighan-Lin bisection.

    ``inner`` (arc lengths in the parameter's units): every set the search visits is also
    credited with :func:`inner_distance`, the way its last chunk still has to go inside it.

    Returns ``(value, witness S as a tuple of nodes or the start's witness, the inner
    distance included in the value, None)`` or ``(None, None, 0, why)`` when the search
    would exceed ``budget_s``.
    """
    t0 = time.perf_counter()
    order = _order(arcs, demand, first)
    guess = FLOW_S_PER_UNIT * len(arcs.src) * len(order) * len(order)
    if guess > 2 * budget_s:
        return None, None, 0, (f"about {len(order)} min cuts on {len(arcs.src)} links (estimated {guess:.3g} s) "
                               f"would exceed the {budget_s:g} s budget")
    p, wit, done = start, witness, 0
    top, top_wit, top_extra = start, witness, 0
    families = ("out", "in") if demand.combining.any() else ("in", "out")
    for fam in families + ("bisection",):
        anchors = _bisection(arcs) if fam == "bisection" else _family(arcs.size, order, fam)
        if fam == "bisection" and not (len(order) >= 4 and (~demand.combining).any()):
            break
        exact = True
        for A_in, A_out in anchors:
            terms = _terms(demand, weight, A_in, A_out)
            exact &= terms.exact
            (p, wit), best = _raise_at_anchor(arcs, demand, weight, supply, terms, (A_in, A_out), inner,
                                              (p, wit), (top, top_wit, top_extra))
            top, top_wit, top_extra = best
            done += 1
            spent = time.perf_counter() - t0
            if spent > budget_s or spent / done * len(order) > (2 if done >= 3 else 4) * budget_s:
                return None, None, 0, (f"the min-cut search (about {len(order)} anchor sets per family) would "
                                    f"exceed its {budget_s:g} s budget ({done} done in {spent:.3g} s)")
        if exact and fam != "bisection":
            break
    return (top, top_wit, top_extra, None) if top > p else (p, wit, 0, None)


def _raise_at_anchor(arcs: Arcs, demand: Demand, weight: np.ndarray, supply, terms, anchor, inner,
                     current: tuple, best: tuple) -> tuple[tuple, tuple]:
    """Dinkelbach's updates of :func:`cut_search` at one anchor pair: while a set ``S`` violates
    the current value ``p`` (``demand(S) > supply_p(S)``), ``p`` jumps to that set's exact bound.
    Returns the new ``(p, witness)`` and the best ``(value + inner distance, witness, inner)``."""
    (p, wit), (top, top_wit, top_extra) = current, best
    A_in, A_out = anchor
    while True:
        gain, inside = _best_set(arcs, supply.arc_supply(p), terms, A_in, A_out)
        if gain <= (0.5 if supply.integral else TOL * max(1.0, float(weight.sum()))):
            break
        need = float(weight[demand.crossing(inside)].sum())
        q = supply.smallest(arcs.entering(inside), need)
        if not q > p * (1 + (0 if supply.integral else TOL)):
            break
        p, wit = q, tuple(np.flatnonzero(inside).tolist())
        extra = 0 if inner is None else inner_distance(arcs, demand, inside, inner)
        if q + extra > top:
            top, top_wit, top_extra = q + extra, wit, extra
    return (p, wit), (top, top_wit, top_extra)


def inner_distance(arcs: Arcs, demand: Demand, inside: np.ndarray, length: np.ndarray) -> float:
    """How far, after crossing into ``S``, the last chunk to cross must still travel.

    Some piece of the demand of ``S`` first crosses no earlier than the cut bound of ``S``
    (before it the entering links have not carried all of it); every copy of it enters at a
    head of an entering link no earlier, and still has to reach each node of ``S`` that needs
    it. The piece is unknown, so this is the least over the crossing rows of the farthest
    needing node of ``S`` from the nearest head (``length``-shortest paths in the whole
    network). Adding it to the cut bound of ``S`` keeps a lower bound.
    """
    idx = arcs.entering(inside)
    rows = np.flatnonzero(demand.crossing(inside))
    if not len(idx) or not len(rows):
        return 0
    adj = sp.csr_matrix((length.astype(float), (arcs.src, arcs.dst)), shape=(arcs.size, arcs.size))
    d = dijkstra(adj, directed=True, indices=np.unique(arcs.dst[idx]), min_only=True)
    need = demand.post[rows] & inside[None, :] & np.where(demand.combining[rows][:, None], True, ~demand.pre[rows])
    far = np.where(need, d[None, :], -np.inf).max(axis=1)
    val = float(far.min())
    return val if math.isfinite(val) else 0
