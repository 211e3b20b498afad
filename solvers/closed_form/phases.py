"""Building blocks of the classic collective algorithms: phases of sends over logical ranks.

A :class:`Phase` is a list of sends between logical ranks ``0..p-1`` with steps local to the
phase and pieces over a common denominator; :func:`build` concatenates phases in time and maps
ranks to node ids. The phase constructors are the textbook communication patterns (Thakur,
Rabenseifner and Gropp, "Optimization of Collective Communication Operations in MPICH",
IJHPCA 2005; Chan et al., "Collective communication: theory, practice, and experience",
CCPE 2007; Bruck et al., TPDS 1997; Sanders, Speck and Traeff, "Two-tree algorithms for full
bandwidth broadcast, reduction and scan", Parallel Computing 2009; De Sensi et al., "Swing",
NSDI 2024, Section 2.3) that :mod:`.classics` assembles into schedules.

>>> ph = ring_allgather_phase([0, 1, 2])
>>> ph.steps, len(ph.arrays()[0])
(2, 6)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ...instances import Instance
from ...tens.schedule import Schedule, from_arrays
from ...tens.status import Status
from ..producers import Outcome, Unsupported

ALL = -1  # block marker: "every buffer chunk" (broadcast / reduce: chunks 0..c-1)


# ---- phases: sends over logical ranks, steps local to the phase -------------------------

@dataclass
class Phase:
    """Sends of one phase over logical ranks: block ``b`` of rank-order, pieces over ``denom``.

    ``block[i]`` is a logical rank whose block (its ``c`` chunk ids) is sent, or :data:`ALL`
    for the whole buffer of broadcast/reduce. ``steps`` is the phase length.
    """

    denom: int = 1
    steps: int = 0
    cols: list = field(default_factory=list)  # tuples of arrays (block, src, dst, step, lo, hi)

    def add(self, block, src, dst, step, lo=0, hi=None):
        """Append sends (arguments broadcast together); ``hi`` defaults to the whole chunk."""
        hi = self.denom if hi is None else hi
        b, s, d, t, l, h = np.broadcast_arrays(
            np.asarray(block, np.int64), np.asarray(src, np.int64), np.asarray(dst, np.int64),
            np.asarray(step, np.int64), np.asarray(lo, np.int64), np.asarray(hi, np.int64))
        if b.size:
            self.cols.append(tuple(a.ravel().copy() for a in (b, s, d, t, l, h)))
            self.steps = max(self.steps, int(t.max()))

    def arrays(self):
        """The six columns concatenated (empty arrays when there are no sends)."""
        if not self.cols:
            z = np.zeros(0, np.int64)
            return z, z, z, z, z, z
        return tuple(np.concatenate([c[i] for c in self.cols]) for i in range(6))

    def reversed(self) -> "Phase":
        """Time reversal (Zhao et al., NSDI 2025, Appendix A): ``u -> v`` at ``t`` becomes ``v -> u`` at ``T+1-t``."""
        b, s, d, t, l, h = self.arrays()
        out = Phase(self.denom, self.steps)
        if len(b):
            out.cols.append((b, d, s, self.steps + 1 - t, l, h))
        return out


def _lcm(*xs: int) -> int:
    out = 1
    for x in xs:
        out = out * x // math.gcd(out, x)
    return out


def build(instance: Instance, phases: list[tuple[Phase, int]], *, name: str, ranks=None,
          meta: dict | None = None) -> Schedule:
    """Concatenate ``(phase, op)`` pairs in time and map logical ranks to node ids.

    Each phase starts after the previous one, or, given as ``(phase, op, start)``, after step
    ``start`` (phases may then overlap); ``op`` is applied to all its sends
    (``OP_REDUCE`` / ``OP_COPY`` / ``OP_DEFAULT``). ``ranks`` (default: the collective's
    participants) maps logical rank -> node id. The routing is ``links`` when every send is on
    a live link, else ``shortest-path``.
    """
    coll = instance.collective
    ranks = np.asarray(coll.nodes if ranks is None else ranks, np.int64)
    c = coll.chunks_per_node
    denom = _lcm(*(ph.denom for ph, *_ in phases))
    cols = {k: [] for k in ("chunk", "src", "dst", "step", "lo", "hi", "op")}
    t0 = 0
    for ph, op, *start in phases:
        t0 = start[0] if start else t0
        b, s, d, t, l, h = ph.arrays()
        k = denom // ph.denom
        j = np.arange(c, dtype=np.int64)
        whole = b == ALL
        if coll.kind == "alltoall":  # block = logical pair i*p + k: what rank i sends to rank k
            p = len(ranks)
            owner = ranks[np.maximum(b, 0) // p] * coll.size + ranks[np.maximum(b, 0) % p]
        else:
            owner = ranks[np.maximum(b, 0)]
        chunk = np.where(whole[:, None], j[None, :], owner[:, None] * c + j[None, :])
        rep = lambda a: np.repeat(a, c)  # noqa: E731
        cols["chunk"].append(chunk.ravel())
        cols["src"].append(rep(ranks[s]))
        cols["dst"].append(rep(ranks[d]))
        cols["step"].append(rep(t + t0))
        cols["lo"].append(rep(l * k))
        cols["hi"].append(rep(h * k))
        cols["op"].append(np.full(len(b) * c, op, np.int8))
        t0 += ph.steps
    arr = {k: np.concatenate(v) if v else np.zeros(0, np.int64) for k, v in cols.items()}
    la = instance.topology.link_arrays
    on_links = bool((la.lookup(arr["src"], arr["dst"]) >= 0).all())
    return from_arrays(
        coll.kind, coll.size, coll.num_chunks, chunk=arr["chunk"], src=arr["src"], dst=arr["dst"],
        step=arr["step"], lo=arr["lo"], hi=arr["hi"], denom=denom, op=arr["op"].astype(np.int8),
        routing="links" if on_links else "shortest-path", meta={"algorithm": name, **(meta or {})},
    )


def constructed(sched: Schedule, closed_form: dict) -> Outcome:
    """A closed form's outcome: ``sched`` as constructed (no optimality claim), its step count
    the objective, and ``closed_form`` (the textbook cost the schedule is checked against;
    fractions written as strings) in the row's ``extra``."""
    cf = {k: (str(v) if isinstance(v, Fraction) else v) for k, v in closed_form.items()}
    return Outcome(sched, Status.CONSTRUCTED.value, objective=float(sched.num_steps), units="steps",
                   extra={"closed_form": cf})


def collective_of(instance: Instance, name: str, kinds: tuple[str, ...]):
    """The instance's one collective, if algorithm ``name`` implements its kind (one of ``kinds``);
    else :class:`Unsupported` saying why."""
    if instance.concurrent:
        raise Unsupported("closed-form algorithms take a single collective, not concurrent ones")
    coll = instance.collective
    if coll.kind not in kinds:
        raise Unsupported(f"{name} implements {', '.join(kinds)}, not {coll.kind}")
    return coll


# ---- building blocks (logical ranks 0..p-1 unless an order is given) -----------------------

def ring_allgather_phase(order, denom=1, lo=0, hi=None) -> Phase:
    """Ring allgather along ``order`` (a cyclic sequence of ranks): p-1 steps (Thakur et al., IJHPCA 2005).

    In step s the rank at position k forwards the block of position k-s+1 to position k+1.
    """
    order = np.asarray(order, np.int64)
    p = len(order)
    ph = Phase(denom)
    k = np.arange(p)
    for s in range(1, p):
        ph.add(order[(k - s + 1) % p], order[k], order[(k + 1) % p], s, lo, hi)
    return ph


def ring_reduce_scatter_phase(order, denom=1, lo=0, hi=None) -> Phase:
    """Ring reduce-scatter along ``order``: in step s position k passes its partial of the
    block of position k-s to position k+1; after p-1 steps each block is complete at its owner."""
    order = np.asarray(order, np.int64)
    p = len(order)
    ph = Phase(denom)
    k = np.arange(p)
    for s in range(1, p):
        ph.add(order[(k - s) % p], order[k], order[(k + 1) % p], s, lo, hi)
    return ph


def chain_broadcast_phase(p: int, root: int) -> Phase:
    """Ring (chain) broadcast: in step s relative rank s-1 sends the buffer to relative rank s."""
    ph = Phase()
    for s in range(1, p):
        ph.add(ALL, (root + s - 1) % p, (root + s) % p, s)
    return ph


def bfb_ring_allgather_phase(order) -> Phase:
    """BFB ring allgather (Zhao et al., NSDI 2025, Appendix E.1): each shard goes half way round in both
    directions, floor(p/2) steps; for even p the antipodal node gets one half from each side."""
    order = np.asarray(order, np.int64)
    p = len(order)
    ph = Phase(2)
    k = np.arange(p)
    for t in range(1, p // 2 + 1):
        if p % 2 == 0 and t == p // 2:
            ph.add(order[(k - t + 1) % p], order[k], order[(k + 1) % p], t, 0, 1)
            ph.add(order[(k + t - 1) % p], order[k], order[(k - 1) % p], t, 1, 2)
        else:
            ph.add(order[(k - t + 1) % p], order[k], order[(k + 1) % p], t)
            ph.add(order[(k + t - 1) % p], order[k], order[(k - 1) % p], t)
    return ph


def direct_phase(kind: str, p: int, root: int | None) -> Phase:
    """One step: every rank sends straight to every peer that needs its data."""
    ph = Phase()
    u, v = np.meshgrid(np.arange(p), np.arange(p), indexing="ij")
    off = u != v
    u, v = u[off], v[off]
    if kind == "allgather":
        ph.add(u, u, v, 1)
    elif kind == "alltoall":
        ph.add(u * p + v, u, v, 1)
    elif kind == "reduce_scatter":
        ph.add(v, u, v, 1)
    elif kind in ("broadcast", "reduce"):
        others = np.array([r for r in range(p) if r != root])
        if kind == "broadcast":
            ph.add(ALL, root, others, 1)
        else:
            ph.add(ALL, others, root, 1)
    elif kind == "scatter":
        others = np.array([r for r in range(p) if r != root])
        ph.add(others, root, others, 1)
    elif kind == "gather":
        others = np.array([r for r in range(p) if r != root])
        ph.add(others, others, root, 1)
    else:
        raise ValueError(kind)
    return ph


def binomial_broadcast_phase(p: int, root: int) -> Phase:
    """Binomial tree broadcast (Thakur et al., IJHPCA 2005): in step s relative ranks r < 2^(s-1) send the buffer
    to r + 2^(s-1); ceil(log2 p) steps."""
    ph = Phase()
    s, half = 1, 1
    while half < p:
        r = np.arange(min(half, p - half))
        ph.add(ALL, (r + root) % p, (r + half + root) % p, s)
        s, half = s + 1, half * 2
    return ph


def binary_tree_broadcast_phase(p: int, root: int) -> Phase:
    """Binary (heap) tree broadcast (Thakur et al., IJHPCA 2005): relative rank i has children 2i+1, 2i+2 and sends
    to its left child first, then its right child, so a node's arrival step is its parent's plus
    1 (left) or 2 (right); the rightmost leaf receives after 2*floor(log2 p) steps when p = 2^h-1."""
    ph = Phase()
    arrive = [0] * p
    for i in range(1, p):
        par = (i - 1) // 2
        arrive[i] = arrive[par] + (1 if i % 2 == 1 else 2)
        ph.add(ALL, (par + root) % p, (i + root) % p, arrive[i])
    return ph


def binomial_scatter_phase(p: int, root: int, denom: int = 1, piece_of=None) -> Phase:
    """Binomial scatter: with L = ceil(log2 p), in step s every relative rank r that is a multiple
    of 2^(L-s+1) sends to r + 2^(L-s) the blocks of relative ranks [r + 2^(L-s), r + 2^(L-s+1)).

    ``piece_of`` (used by broadcast = scatter + allgather) turns relative rank q into a piece
    ``[q, q+1)`` over ``denom`` of the whole buffer instead of rank q's block."""
    ph = Phase(denom)
    L = max(1, math.ceil(math.log2(p))) if p > 1 else 0
    for s in range(1, L + 1):
        half = 1 << (L - s)
        for r in range(0, p, 2 * half):
            dst = r + half
            if dst >= p:
                continue
            q = np.arange(dst, min(r + 2 * half, p))
            if piece_of is None:
                ph.add((q + root) % p, (r + root) % p, (dst + root) % p, s)
            else:
                ph.add(ALL, (r + root) % p, (dst + root) % p, s, q, q + 1)
    return ph


def bruck_allgather_phase(p: int) -> Phase:
    """Bruck allgather (Bruck et al., TPDS 1997): in step k rank r sends blocks r .. r+n-1
    (n = min(2^k, p-2^k)) to rank r-2^k; ceil(log2 p) steps for any p, (p-1) blocks in all."""
    ph = Phase()
    r = np.arange(p)
    k, dist = 1, 1
    while dist < p:
        n = min(dist, p - dist)
        for i in range(n):
            ph.add((r + i) % p, r, (r - dist) % p, k)
        k, dist = k + 1, dist * 2
    return ph


def doubling_allgather_phase(p: int) -> Phase:
    """Recursive doubling (butterfly) allgather (Thakur et al., IJHPCA 2005), any p.

    p a power of two: in step s rank r exchanges everything it holds with r XOR 2^(s-1).
    Otherwise, with p' the largest power of two below p and e = p - p' extra ranks: step 1,
    extra rank p'+i sends its block to i; then recursive doubling among the p' core ranks
    (core i carrying blocks i and p'+i); last step, core i sends extra p'+i every other block.
    """
    pp = 1 << (p.bit_length() - 1)
    e = p - pp
    ph = Phase()
    t = 0
    if e:
        i = np.arange(e)
        ph.add(pp + i, pp + i, i, 1)
        t = 1
    t = _core_doubling(ph, pp, e, t)
    if e:
        t += 1
        for i in range(e):
            blocks = [b for b in range(p) if b != pp + i]
            ph.add(blocks, i, pp + i, t)
    return ph


def rabenseifner_core(p: int) -> tuple[int, Phase, Phase]:
    """Recursive-halving reduce-scatter and recursive-doubling allgather among the p' core
    ranks, core i carrying blocks {i, p'+i} (Rabenseifner's allreduce, Thakur et al., IJHPCA 2005);
    returns (p', rs, ag)."""
    pp = 1 << (p.bit_length() - 1)
    ag = Phase()
    _core_doubling(ag, pp, p - pp, 0)
    return pp, ag.reversed(), ag


def _core_doubling(ph: Phase, pp: int, e: int, t: int) -> int:
    """Recursive doubling among the ``pp`` core ranks, core i starting with blocks {i, pp+i}
    (the latter only for i < e), from step ``t + 1``; returns the last step."""
    held = [[r] + ([pp + r] if r < e else []) for r in range(pp)]
    dist = 1
    while dist < pp:
        t += 1
        new = [list(h) for h in held]
        for r in range(pp):
            q = r ^ dist
            ph.add(held[r], r, q, t)
            new[q] = new[q] + held[r]
        held, dist = new, dist * 2
    return t


def nccl_btree_parents(p: int) -> list[int]:
    """Parent of each rank in NCCL's binary tree (ncclGetBtree), the first tree of a double binary
    tree (Sanders et al., Parallel Computing 2009): rank r with lowest set bit b has parent
    (r ^ b) | (b << 1), or r ^ b when that is out of range; rank 0 is the root."""
    par = [-1] * p
    for r in range(1, p):
        b = r & -r
        up = (r ^ b) | (b << 1)
        par[r] = up if up < p else r ^ b
    return par


def double_binary_trees(p: int) -> list[list[int]]:
    """NCCL's two complementary trees (ncclGetDtree; Sanders et al., Parallel Computing 2009): tree 0
    is the btree, tree 1 its mirror r -> p-1-r for even p or its shift r -> r+1 for odd p (each
    rank is a leaf in at most one)."""
    t0 = nccl_btree_parents(p)
    if p % 2 == 0:
        f = lambda r: p - 1 - r  # noqa: E731
    else:
        f = lambda r: (r + 1) % p  # noqa: E731
    t1 = [-1] * p
    for r in range(p):
        if t0[r] >= 0:
            t1[f(r)] = f(t0[r])
    return [t0, t1]


def _height(parents: list[int]) -> tuple[list[int], list[int]]:
    """(depth of each rank, subtree height of each rank)."""
    p = len(parents)
    depth = [0] * p
    for r in range(p):
        d, x = 0, r
        while parents[x] >= 0:
            x, d = parents[x], d + 1
        depth[r] = d
    height = [0] * p
    for r in sorted(range(p), key=lambda r: -depth[r]):
        if parents[r] >= 0:
            height[parents[r]] = max(height[parents[r]], height[r] + 1)
    return depth, height


def double_tree_phases(p: int) -> tuple[Phase, Phase]:
    """Double binary tree allreduce (NCCL; Sanders et al., Parallel Computing 2009): tree t handles
    piece [t/2, (t+1)/2) of every chunk; reduce up (a rank sends when its subtree is done: step =
    its subtree height + 1), then broadcast down (a rank at depth d receives at step d); both
    trees share the phase bounds."""
    up, down = Phase(2), Phase(2)
    blocks = np.arange(p)
    for t, par in enumerate(double_binary_trees(p)):
        depth, height = _height(par)
        for r in range(p):
            if par[r] >= 0:
                up.add(blocks, r, par[r], height[r] + 1, t, t + 1)
                down.add(blocks, par[r], r, depth[r], t, t + 1)
    return up, down


# ---- tori: bucket algorithm, Hamiltonian rings ----------------------------------------

def torus_dims(instance: Instance) -> list[int]:
    """The torus shape of an instance over every node of an intact generated torus, else Unsupported."""
    topo = instance.topology
    dims = topo.meta.get("dims")
    if topo.meta.get("generator") != "torus" or not dims:
        raise Unsupported(f"needs a torus topology (generator 'torus'), got {topo.name!r}")
    if topo.failed_nodes or topo.failed_links or len(instance.collective.nodes) != topo.size:
        raise Unsupported("needs every node and link of the torus alive and participating")
    return list(dims)


def bucket_allgather_phase(dims: list[int]) -> Phase:
    """Bucket allgather on a D-dimensional torus (De Sensi et al., NSDI 2024, Section 2.3.4;
    Chan et al., CCPE 2007): 2D concurrent parts (each 1/(2D) of every chunk), part (q, dir)
    runs ring allgathers of growing bundles along dimensions q, q+1, ... (cyclically) in
    direction dir; with equal sides all parts use different links in every step.

    Node ids are row-major (last coordinate fastest)."""
    D = len(dims)
    N = int(np.prod(dims))
    coords = np.array(np.unravel_index(np.arange(N), dims)).T  # (N, D)
    strides = np.array([int(np.prod(dims[i + 1:])) for i in range(D)], np.int64)
    ph = Phase(2 * D)
    for q in range(D):
        for di, direction in enumerate((1, -1)):
            part = 2 * q + di
            t0, done = 0, []
            for i in range(D):
                d = (q + i) % D
                n = dims[d]
                # offsets (in ids) of bundle members: every combination over the done dims
                combos = np.zeros((1, D), np.int64)
                for dd in done:
                    vals = np.arange(dims[dd])
                    combos = np.repeat(combos, len(vals), 0)
                    combos[:, dd] = np.tile(vals, len(combos) // len(vals))
                for s in range(1, n):
                    src_c = coords
                    dst_c = coords.copy()
                    dst_c[:, d] = (coords[:, d] + direction) % n
                    y = coords.copy()
                    y[:, d] = (coords[:, d] - direction * (s - 1)) % n
                    members = np.repeat(y[:, None, :], len(combos), 1)
                    for dd in done:
                        members[:, :, dd] = combos[None, :, dd]
                    blocks = (members * strides).sum(-1)
                    src = (src_c * strides).sum(-1)
                    dst = (dst_c * strides).sum(-1)
                    ph.add(blocks, src[:, None], dst[:, None], t0 + s, part, part + 1)
                t0 += n - 1
                done.append(d)
    return ph


def hamiltonian_cycles(n: int) -> tuple[list[int], list[int]]:
    """Two edge-disjoint Hamiltonian cycles of the n x n torus (n >= 3), node (i, j) = i*n + j.

    H1 runs along row i from column -i (n-1 horizontal hops) then down one row; H2, its
    complement, runs down column j from row -j then right one column. Together they use every
    link once (a 2D torus is the union of two Hamiltonian cycles)."""
    h1 = [i * n + (t - i) % n for i in range(n) for t in range(n)]
    h2 = [((t - j) % n) * n + j for j in range(n) for t in range(n)]
    return h1, h2


def _cycle_through(edges: set, size: int) -> list[int] | None:
    """The node order of ``edges`` if they form one cycle through all ``size`` nodes."""
    adj: dict[int, list[int]] = {}
    for e in edges:
        a, b = tuple(e)
        adj.setdefault(a, []).append(b)
        adj.setdefault(b, []).append(a)
    if len(adj) != size or any(len(v) != 2 for v in adj.values()):
        return None
    order, prev, x = [0], None, 0
    while True:
        nxt = adj[x][0] if adj[x][0] != prev else adj[x][1]
        if nxt == 0:
            break
        order.append(nxt)
        prev, x = x, nxt
    return order if len(order) == size else None


def _torus_edges(m: int, n: int) -> set:
    return {frozenset((i * n + j, i * n + (j + 1) % n)) for i in range(m) for j in range(n)} | \
           {frozenset((i * n + j, ((i + 1) % m) * n + j)) for i in range(m) for j in range(n)}


def _row_snake(m: int, n: int, eps: list[int]) -> list[int]:
    """Row i is run in direction eps[i] through all n columns, then one hop down."""
    order, a = [], 0
    for i in range(m):
        order += [i * n + (a + eps[i] * t) % n for t in range(n)]
        a = (a - eps[i]) % n
    return order


def torus_hamiltonian_decomposition(m: int, n: int) -> tuple[list[int], list[int]] | None:
    """Two edge-disjoint Hamiltonian cycles of the m x n torus (rows m, columns n, node
    i*n + j), or None when this construction has none.

    Square tori use :func:`hamiltonian_cycles`. Otherwise H1 snakes through the rows, r of them
    run right-to-left (the smallest r with m - 2r = 0 mod n, so H1 closes) and the complement
    is checked to be a single cycle; the transposed snake (through columns) is tried too. This
    covers m, n >= 3 of equal parity (e.g. 5 x 3, 6 x 4, 8 x 6)."""
    if m < 3 or n < 3:
        return None
    if m == n:
        return hamiltonian_cycles(n)
    for rows, cols, transposed in ((m, n, False), (n, m, True)):
        allE = _torus_edges(rows, cols)
        for r in range(rows + 1):
            if (rows - 2 * r) % cols:
                continue
            h1 = _row_snake(rows, cols, [1] * (rows - r) + [-1] * r)
            e1 = {frozenset((a, b)) for a, b in zip(h1, h1[1:] + h1[:1])}
            if len(set(h1)) != rows * cols or len(e1) != rows * cols or not e1 <= allE:
                continue
            h2 = _cycle_through(allE - e1, rows * cols)
            if h2 is None:
                continue
            if transposed:  # node x = j*m + i of the n x m torus is node (i, j) = i*n + j here
                return [(x % m) * n + x // m for x in h1], [(x % m) * n + x // m for x in h2]
            return h1, h2
    return None


def undirected_edges(cycle: list[int]) -> set:
    """The edges of a closed walk over ``cycle``'s nodes, each as an unordered pair.

    >>> sorted(sorted(e) for e in undirected_edges([0, 1, 2]))
    [[0, 1], [0, 2], [1, 2]]
    """
    return {frozenset((a, b)) for a, b in zip(cycle, cycle[1:] + cycle[:1])}
