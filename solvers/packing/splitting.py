"""Switch removal by edge splitting that keeps the cut condition (ForestColl, Section 5.1).

Zhao et al., "ForestColl: Throughput-Optimal Collective Communications on Heterogeneous
Network Fabrics" (arXiv 2402.06787), Section 5.1 and Appendix: a node that is not a compute
node (a switch, a NIC, a GPU outside the collective) is removed by replacing pairs of links
``u -> w -> t`` with direct links ``u -> t`` of the same capacity, each split as large as the
rooted condition allows (Bang-Jensen, Frank and Jackson, "Preserving and increasing local
edge-connectivity in mixed graphs", SIAM J. Discrete Math. 1995).

The condition (capacities in trees): a super source ``s`` with an arc ``s -> r`` of capacity
``k w_r`` to every root, and every compute node ``v`` has ``lambda(s, v) >= k W``. Splitting
``gamma`` off the pair lowers the out-capacity of exactly the sets ``S`` (with ``s``) that hold
``u`` and ``t`` but not ``w``, or ``w`` but neither ``u`` nor ``t``, by ``gamma``; so the
largest split is the least slack ``d+(S) - k W`` over those sets that miss some compute node,
two minimum cuts with infinite arcs pinning ``u``, ``t`` and ``w`` to their sides (one per
compute node only when every minimum cut holds all compute nodes).

That is the exact method, one pair at a time (:func:`remove_node`). First, though, every relay is
split in bulk (:func:`split_all_evenly`: one transportation max-flow per relay spreads its links
across boxes, then the condition is checked once), which on systems of identical boxes and rails
is already a complete splitting that keeps the condition; only when the check fails does the
exact method run.

Every link of the split network carries a pool of routes in the original network
(``route, capacity``): the routes through the removed nodes that :mod:`.trees` maps tree
edges back to.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow

from ...tens.cut_optimum import INT32_MAX, max_flow
from . import boxes

Pool = list  # [[route (tuple of node ids), capacity], ...]


@dataclass
class Network:
    """A capacitated digraph over node ids ``0..nodes-1`` plus the super source ``nodes``: arc
    capacities ``cap[(u, v)]`` (source arcs included), the compute nodes, the requirement
    ``need`` (``k W``), each arc's pool of original routes (source arcs have none) and the
    topology's shift of all compute nodes, if it has one (:func:`translation` reads it)."""

    nodes: int
    cap: dict
    compute: tuple[int, ...]
    need: int
    pools: dict = field(default_factory=dict)
    shift: int | None = None  # moving every compute node this many places on in id order maps the topology onto
    # itself (the rotation of all of them among its box shifts, :attr:`collsynth.instances.box_shift.BoxShift.step`)

    @property
    def source(self) -> int:
        """The super source's id."""
        return self.nodes

    def flow(self, s: int, t: int, extra: list[tuple[int, int, int]] = (), side: bool = True) -> tuple[int, np.ndarray]:
        """Max flow ``s -> t`` with the ``extra`` arcs added, and (``side``) the minimal source side."""
        arcs = list(self.cap.items())
        src = np.fromiter((a[0][0] for a in arcs), np.int64, len(arcs))
        dst = np.fromiter((a[0][1] for a in arcs), np.int64, len(arcs))
        cap = np.fromiter((a[1] for a in arcs), np.int64, len(arcs))
        if extra:
            e = np.asarray(extra, dtype=np.int64)
            src, dst, cap = np.concatenate([src, e[:, 0]]), np.concatenate([dst, e[:, 1]]), np.concatenate([cap, e[:, 2]])
        return max_flow(self.nodes + 1, src, dst, cap, s, t, side=side)

    def infinite(self) -> int:
        """A capacity no cut of the network reaches."""
        return sum(self.cap.values()) + 1

    def holds(self, nodes=None) -> bool:
        """Whether every compute node (or each of ``nodes``) has ``lambda(s, v) >= need`` (the
        arcs built once, one max flow per node)."""
        keys = np.asarray(list(self.cap), dtype=np.int64).reshape(-1, 2)
        cap = np.fromiter(self.cap.values(), np.int64, len(self.cap))
        return all(max_flow(self.nodes + 1, keys[:, 0], keys[:, 1], cap, self.source, v)[0] >= self.need
                   for v in (self.compute if nodes is None else nodes))

    def copy(self) -> "Network":
        """An independent copy (capacities and route pools)."""
        cap, pools = self.snapshot()
        return Network(self.nodes, cap, self.compute, self.need, pools, self.shift)

    def snapshot(self) -> tuple[dict, dict]:
        """A copy of the capacities and route pools (:meth:`restore` puts it back)."""
        return dict(self.cap), {key: [[r, c] for r, c in pool] for key, pool in self.pools.items()}

    def restore(self, saved: tuple[dict, dict]) -> None:
        """Put back the capacities and route pools of a :meth:`snapshot`."""
        self.cap, self.pools = dict(saved[0]), {key: [[r, c] for r, c in pool] for key, pool in saved[1].items()}


def network(nodes: int, src, dst, cap, compute, root_caps: dict[int, int], need: int,
            shift: int | None = None) -> Network:
    """A :class:`Network` of arcs ``src -> dst`` of capacity ``cap`` (zero-capacity arcs left
    out), each its own one-link route, and source arcs ``s -> r`` of ``root_caps[r]``; ``shift``:
    the topology's shift of all compute nodes (:attr:`Network.shift`)."""
    caps, pools = {}, {}
    for u, v, c in zip(src, dst, cap):
        if c > 0 and u != v:
            key = (int(u), int(v))
            caps[key] = caps.get(key, 0) + int(c)
            pools.setdefault(key, []).append([key, int(c)])
    for r, c in root_caps.items():
        if c > 0:
            caps[(nodes, int(r))] = int(c)
    return Network(nodes, caps, tuple(int(c) for c in compute), int(need), pools, shift)


def _slack(net: Network, sources: list[int], sink: int, pinned: list[int], free: bool,
           cap: int, lower: dict | None = None) -> int:
    """Least ``d+(S) - need`` over sets ``S`` with the super source and ``sources`` in and
    ``sink`` and ``pinned`` out, that miss some compute node (``free``: one of ``pinned`` is a
    compute node, so every such set does), or at least ``cap`` when it is no less. ``lower``:
    a lower bound on ``lambda(s, v)`` per compute node ``v``; a set missing ``v`` is an
    ``s``-``v`` cut, so nodes whose bound leaves ``cap`` of slack need no flow."""
    inf = net.infinite()
    s = net.source
    extra = [(s, x, inf) for x in sources] + [(x, sink, inf) for x in pinned]
    value, side = net.flow(s, sink, extra, side=not free)
    if free or not all(side[c] for c in net.compute):
        return value - net.need
    least = inf
    for v in net.compute:
        if v in sources or (lower is not None and lower[v] - net.need >= min(cap, least - net.need)):
            continue
        least = min(least, net.flow(s, sink, extra + [(v, sink, inf)], side=False)[0])
        if least <= net.need:
            break
    return least - net.need


def split_amount(net: Network, u: int, w: int, t: int, lower: dict | None = None, most: int | None = None) -> int:
    """The largest ``gamma`` (at most ``most``) that ``u -> w -> t`` may be split into ``u -> t``
    by (module doc); ``lower``: lower bounds on ``lambda(s, v)`` (:func:`_slack`)."""
    gamma = min(net.cap.get((u, w), 0), net.cap.get((w, t), 0), most if most is not None else net.infinite())
    if gamma <= 0:
        return 0
    compute = set(net.compute)
    # S holds s, u, t and misses w (and some compute node)
    gamma = min(gamma, _slack(net, [u, t], w, [], False, gamma, lower))
    if gamma <= 0:
        return 0
    # S holds s and w and misses u and t
    pinned = [t] if t != u else []
    return min(gamma, _slack(net, [w], u, pinned, u in compute or t in compute, gamma, lower))


def _take(pool: Pool, amount: int) -> list[list]:
    """``amount`` of capacity taken from the front of ``pool``: ``[[route, capacity], ...]``."""
    out = []
    while amount > 0:
        route, have = pool[0]
        used = min(have, amount)
        out.append([route, used])
        amount -= used
        if used == have:
            pool.pop(0)
        else:
            pool[0][1] = have - used
    return out


def _join(first: list[list], second: list[list]) -> list[list]:
    """Routes of ``first`` followed by routes of ``second``, matched capacity by capacity."""
    out, i, j = [], 0, 0
    first = [list(x) for x in first]
    second = [list(x) for x in second]
    while i < len(first) and j < len(second):
        amount = min(first[i][1], second[j][1])
        out.append([first[i][0] + second[j][0][1:], amount])
        first[i][1] -= amount
        second[j][1] -= amount
        i += first[i][1] == 0
        j += second[j][1] == 0
    return out


def split(net: Network, u: int, w: int, t: int, gamma: int) -> None:
    """Replace ``gamma`` of ``u -> w`` and ``w -> t`` by ``u -> t`` (routes joined; a split
    ``u -> w -> u`` is dropped)."""
    routes = _join(_take(net.pools[(u, w)], gamma), _take(net.pools[(w, t)], gamma))
    for key in ((u, w), (w, t)):
        net.cap[key] -= gamma
        if net.cap[key] == 0:
            del net.cap[key]
            del net.pools[key]
    if u != t:
        net.cap[(u, t)] = net.cap.get((u, t), 0) + gamma
        net.pools.setdefault((u, t), []).extend(routes)


def remove_node(net: Network, w: int, lower: dict) -> int:
    """Split off every pair of links through ``w``, then drop what is left at ``w``; returns
    the flows run. The condition is kept by every split (checked by the caller at the end).
    ``lower`` (lower bounds on ``lambda(s, v)``) is lowered by what every split and the drop
    may take from a cut."""
    flows = 0
    ins = sorted(u for (u, x) in net.cap if x == w and u != net.source)
    outs = sorted(t for (x, t) in net.cap if x == w)
    share = {u: -(-net.cap[(u, w)] // max(1, len(outs) - (u in outs))) for u in ins}
    passes = [True, False]  # first spread every in-link over all out-links (shallow trees), then the rest
    while passes:
        fair = passes.pop(0)
        progress = False
        for u in ins:
            for t in sorted(outs, key=lambda t: (t == u, (t - u) % (net.nodes + 1))):
                if net.cap.get((u, w), 0) == 0:
                    break
                if net.cap.get((w, t), 0) == 0 or (fair and t == u):
                    continue
                gamma = split_amount(net, u, w, t, lower, share[u] if fair else None)
                flows += 2
                if gamma > 0:
                    split(net, u, w, t, gamma)
                    progress = True
                    for v in lower:
                        lower[v] -= gamma
        if not fair and progress and any(x == w for (_, x) in net.cap):
            passes.append(False)  # a split can make another pair admissible: sweep again
    dropped = 0
    for key in [k for k in net.cap if w in k]:
        dropped += net.cap.pop(key)
        net.pools.pop(key, None)
    for v in lower:
        lower[v] -= dropped
    return flows


def _transport(supply: dict[int, int], demand: dict[int, int], bound) -> dict[tuple[int, int], int]:
    """Integer amounts ``x[u, t]`` (``u != t``, at most ``bound(u, t)``) with row sums at most
    ``supply[u]`` and column sums at most ``demand[t]``, of the largest total: one maximum flow
    (:func:`scipy.sparse.csgraph.maximum_flow`, integral) on the bipartite transportation network."""
    us, ts = sorted(supply), sorted(demand)
    a, b = len(us), len(ts)
    src = [a + b] * a + list(range(a, a + b))
    dst = list(range(a)) + [a + b + 1] * b
    cap = [supply[u] for u in us] + [demand[t] for t in ts]
    for i, u in enumerate(us):
        for j, t in enumerate(ts):
            c = bound(u, t) if u != t else 0
            if c > 0:
                src.append(i), dst.append(a + j), cap.append(c)
    if not cap or sum(supply.values()) > INT32_MAX // 2:
        return {}
    graph = csr_matrix((np.minimum(np.asarray(cap, dtype=np.int64), INT32_MAX).astype(np.int32), (src, dst)),
                       shape=(a + b + 2, a + b + 2))
    flow = maximum_flow(graph, a + b, a + b + 1, method="dinic").flow.tocoo()
    keep = (flow.row < a) & (flow.col >= a) & (flow.data > 0)
    return {(us[i], ts[j - a]): int(x) for i, j, x in zip(flow.row[keep], flow.col[keep], flow.data[keep])}


def split_evenly(net: Network, w: int, box_of: dict | None = None) -> None:
    """Split every link through ``w`` in bulk and drop what is left at ``w``: each in-link
    ``u -> w`` is spread over the out-links ``w -> t`` to nodes ``t`` in other boxes than
    ``u`` (``box_of``, :mod:`.boxes`; all ``t != u`` when there are none) in proportion to
    their capacities (rounded up), then what is left is paired by one more transportation flow
    over every ``t != u``. A switch's links are what joins the groups, so spending them inside
    a group would waste the scarce cuts between groups. No cut is checked here: the caller
    checks the condition (:func:`split_all_evenly`)."""
    ins = {u: c for (u, x), c in net.cap.items() if x == w and u != net.source}
    outs = {t: c for (x, t), c in net.cap.items() if x == w}
    group = box_of or {}
    apart = {u: [t for t in outs if t != u and group.get(t, -1 - t) != group.get(u, -2 - u)] for u in ins}
    allowed = {u: set(apart[u]) or set(outs) - {u} for u in ins}
    total = {u: sum(outs[t] for t in allowed[u]) for u in ins}
    amounts = _transport(ins, outs, lambda u, t: -(-ins[u] * outs[t] // max(1, total[u])) if t in allowed[u] else 0)
    left_in, left_out = dict(ins), dict(outs)
    for (u, t), g in amounts.items():
        left_in[u] -= g
        left_out[t] -= g
    for key, g in _transport(left_in, left_out, lambda u, t: INT32_MAX).items():
        amounts[key] = amounts.get(key, 0) + g
    for (u, t), g in sorted(amounts.items()):
        split(net, u, w, t, g)
    for key in [k for k in net.cap if w in k]:
        del net.cap[key]
        net.pools.pop(key, None)


def translation(net: Network, roots: dict[int, int]) -> int | None:
    """The least block ``d`` (a multiple of the topology's shift :attr:`Network.shift` dividing
    the compute node count ``N``, ``d < N``) such that moving every compute node ``d`` places on
    in id order (``c_i -> c_{(i + d) mod N}``) maps the split network's arcs onto arcs of the
    same capacity and the roots onto roots of the same multiplicity: identical boxes of ``d``
    nodes, shifted one box on. None when no ``d`` does, or the topology has no such shift.

    The topology's box shifts (:func:`collsynth.instances.box_shift.box_shift`) say which moves
    can map the network onto itself; the split network is checked, since edge splitting need
    not keep them: on four DGX H100 boxes (10 trees a shard) each GPU's 31 tree units on its
    rail are split 9, 11 and 11 over the other boxes, the 9 between boxes 0 and 1 and between 2
    and 3, so one box on is a shift of the topology and two boxes on the least of the split
    network.

    >>> net = network(4, [0, 1, 2, 3], [1, 2, 3, 0], [1, 1, 1, 1], range(4), {v: 1 for v in range(4)}, 4, shift=1)
    >>> translation(net, {v: 1 for v in range(4)}), translation(net, {0: 1, 2: 1})
    (1, 2)
    """
    comp = sorted(net.compute)
    n = len(comp)
    if not net.shift:
        return None
    index = {v: i for i, v in enumerate(comp)}
    arcs = [(index[a], index[b], c) for (a, b), c in net.cap.items() if a != net.source]
    for d in (d for d in range(net.shift, n // 2 + 1, net.shift) if n % d == 0):
        if all(roots.get(comp[(i + d) % n], 0) == roots.get(v, 0) for i, v in enumerate(comp)) and \
                all(net.cap.get((comp[(a + d) % n], comp[(b + d) % n])) == c for a, b, c in arcs):
            return d
    return None


def boxes_of(net: Network) -> dict:
    """Each compute node's box (:func:`.boxes.model` of the network's arcs, source arcs left out)."""
    arcs = [(a, b, c) for (a, b), c in net.cap.items() if a != net.source]
    return boxes.model(net.nodes, [a for a, _, _ in arcs], [b for _, b, _ in arcs], [c for _, _, c in arcs],
                       net.compute).box_of


def split_all_evenly(net: Network, box_of: dict | None = None) -> int | None:
    """Remove every relay by :func:`split_evenly` (in id order; ``box_of``: each compute
    node's box, :func:`boxes_of` by default), then check the rooted cut
    condition once, one max flow per compute node; returns the max flows run, or None (the
    network put back as it was) if the check fails. Splitting only lowers cut values, so the check is what keeps the
    condition; it passes on uniform systems (identical boxes, rails), where the proportional
    split is the complete splitting Bang-Jensen, Frank and Jackson ("Preserving and increasing
    local edge-connectivity in mixed graphs", SIAM J. Discrete Math. 1995) guarantee to exist.
    When moving every node a box on maps the split network onto itself (:func:`translation`),
    ``lambda(s, v)`` is the same for ``v`` and its image, so the first box's nodes are checked."""
    saved = net.snapshot()
    relays = sorted({x for key in net.cap for x in key} - set(net.compute) - {net.source})
    box_of = boxes_of(net) if box_of is None else box_of
    for w in relays:
        split_evenly(net, w, box_of)
    roots = {r: c for (x, r), c in net.cap.items() if x == net.source}
    d = translation(net, roots)  # moving a box on maps the network onto itself: lambda(s, v) is the same
    checked = sorted(net.compute)[:d] if d else list(net.compute)
    if net.holds(checked):
        return 2 * len(relays) + len(checked)
    net.restore(saved)
    return None


def remove_relays(net: Network, deadline=None, fast: bool = True, box_of: dict | None = None) -> int:
    """Remove every node that is not a compute node; returns the flows run. With ``fast``, the
    bulk proportional split (:func:`split_all_evenly`, spreading links across the boxes
    ``box_of``) first; if its check fails (or without
    ``fast``), pair by pair at the largest amount the condition allows (:func:`remove_node`),
    in id order. Raises RuntimeError if the condition no longer holds after (a split the
    theory promises was not found)."""
    compute = set(net.compute)
    relays = sorted({x for key in net.cap for x in key} - compute - {net.source})
    if fast and relays:
        flows = split_all_evenly(net, box_of)
        if flows is not None:
            return flows
    lower = {v: net.flow(net.source, v, side=False)[0] for v in net.compute}  # lowered by every change
    flows = len(lower)
    for i, w in enumerate(relays):
        if deadline is not None:
            deadline.check("edge splitting", f"{i} of {len(relays)} relays removed")
        if min(lower.values()) < net.need:  # the bounds ran out: measure again
            lower = {v: net.flow(net.source, v, side=False)[0] for v in net.compute}
            flows += len(lower)
        flows += remove_node(net, w, lower)
    if not net.holds():
        raise RuntimeError("edge splitting lost the cut condition")
    return flows
