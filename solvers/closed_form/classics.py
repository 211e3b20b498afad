"""Classic collective algorithms as constructed schedules with their closed-form costs.

The algorithms of the alpha-beta literature (Thakur, Rabenseifner and Gropp, IJHPCA 2005; Chan
et al., CCPE 2007: ring, binary and binomial trees, butterfly / recursive doubling, recursive
halving, scatter + allgather broadcast), NCCL's double binary tree, MPI's
Bruck and Rabenseifner algorithms, the bucket algorithm on D-dimensional tori, rings on
edge-disjoint Hamiltonian cycles of 2D tori, and the BFB ring of Zhao et al., NSDI 2025, Appendix E.1.

Every algorithm is a plain function ``<name>_schedule(instance, ...) -> Schedule`` working on
the collective's participants in rank order (logical rank ``r`` is node ``nodes[r]``) and a
``closed_form(name, kind, p, ...)`` giving the paper's alpha-beta cost: the number of steps
(``T_L = steps * alpha``) and the bandwidth term as an exact count of chunk units
(``T_B_chunks``, the sum over steps of the largest per-link load, which is what the shared
sync cost model measures) and in seconds (``T_B = T_B_chunks * chunk_bytes / B``). Logical
peers that are not joined by a link make the schedule ``routing="shortest-path"``; the cost
models then route them (and charge the congestion).

Chunk ids follow :mod:`collsynth.instances.collective`: the block of rank r is
``node(r)*c + j``; broadcast and reduce carry the buffer chunks ``0..c-1``.

>>> from collsynth.instances import generators, make_instance
>>> inst = make_instance(generators.build("ring", {"nodes": 5}), "allgather")
>>> s = ring_schedule(inst)
>>> s.num_steps, s.routing
(4, 'links')
>>> closed_form("ring", "allgather", 5)["T_B_chunks"]
Fraction(4, 1)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ...instances import Instance
from ...tens.schedule import OP_COPY, OP_DEFAULT, OP_REDUCE, Schedule, from_arrays
from ..producers import Outcome, Producer, Unsupported

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

    Each phase starts after the previous one; ``op`` is applied to all its sends
    (``OP_REDUCE`` / ``OP_COPY`` / ``OP_DEFAULT``). ``ranks`` (default: the collective's
    participants) maps logical rank -> node id. The routing is ``links`` when every send is on
    a live link, else ``shortest-path``.
    """
    coll = instance.collective
    ranks = np.asarray(coll.nodes if ranks is None else ranks, np.int64)
    c = coll.chunks_per_node
    denom = _lcm(*(ph.denom for ph, _ in phases))
    cols = {k: [] for k in ("chunk", "src", "dst", "step", "lo", "hi", "op")}
    t0 = 0
    for ph, op in phases:
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


def _undirected_edges(cycle: list[int]) -> set:
    return {frozenset((a, b)) for a, b in zip(cycle, cycle[1:] + cycle[:1])}


# ---- closed forms ---------------------------------------------------------------------

def _log2c(p: int) -> int:
    return (p - 1).bit_length()


def _doubling_chunks(p: int) -> Fraction:
    """Sum over steps of the largest per-link load (in blocks) of doubling_allgather_phase."""
    pp = 1 << (p.bit_length() - 1)
    e = p - pp
    core = sum((1 << s) + min(1 << s, e) for s in range(pp.bit_length() - 1))
    return Fraction(core + ((1 + p - 1) if e else 0))


def closed_form(name: str, kind: str, p: int, *, c: int = 1, message_bytes: float = 1.0,
                alpha: float = 0.0, bandwidth: float = 1.0, dims: list[int] | None = None) -> dict:
    """The alpha-beta cost of algorithm ``name`` for collective ``kind`` on p ranks.

    Returns ``steps`` (T_L = steps * alpha), ``T_B_chunks`` (exact: sum over steps of the
    largest per-link load in chunk units, chunk = M/(p c), or M/c for broadcast/reduce), and
    ``T_L_s``, ``T_B_s``, ``total_s``. Formulas (M = message, B = link bandwidth; Thakur et al.,
    IJHPCA 2005 unless noted): ring (p-1)(alpha + M/p beta) per allgather / reduce-scatter phase
    and (p-1)(alpha + M beta) for chain broadcast; bidirectional ring halves T_B; BFB ring
    (Zhao et al., NSDI 2025, Appendix E.1) floor(p/2) steps, same T_B as bidirectional; binomial
    broadcast ceil(log p)(alpha + M beta); binary tree 2 log p (alpha + M beta) (exactly 2(h-1)
    steps for p = 2^h - 1); recursive doubling / halving, and Bruck (Bruck et al., TPDS 1997),
    log p alpha + (p-1)/p M beta; Rabenseifner 2 log p alpha + 2 (p-1)/p M beta (p' =
    2^floor(log p) and two extra full exchanges otherwise); binomial scatter / gather ceil(log p)
    alpha + (p-1)/p M beta; broadcast = scatter + ring allgather (Chan et al., CCPE 2007)
    (log p + p - 1) alpha + 2 (p-1)/p M beta; double binary tree (Sanders et al., Parallel
    Computing 2009) 2 ceil(log p) (alpha + M/2 beta); bucket on an n^D torus (De Sensi et al.,
    NSDI 2024, Section 2.3.4; Chan et al., CCPE 2007) D(n-1) alpha + (N-1)/(2 D N) M beta per
    phase; Hamiltonian rings on an n x n torus (De Sensi et al., NSDI 2024, Section 2.3.1)
    2(N-1)(alpha + M/(4N) beta).
    """
    F = Fraction
    ar = kind == "allreduce"
    if name == "ring":  # chain broadcast/reduce: chunk = M/c; ring phases: chunk = M/(p c)
        steps, ch = p - 1, F(p - 1) * c
    elif name == "bidirectional-ring":  # p = 2: both directions are the one link 0 -> 1
        steps, ch = p - 1, (F(p - 1, 2) if p > 2 else F(1)) * c
    elif name == "bfb-ring":
        steps, ch = p // 2, (F(p - 1, 2) if p > 2 else F(1)) * c
    elif name == "direct":
        steps, ch = 1, F(c)
    elif name == "binomial-tree":
        steps = _log2c(p)
        ch = F(steps * c) if kind in ("broadcast", "reduce") else F(p - 1) * c
    elif name == "binary-tree":
        arrive = [0] * p
        for i in range(1, p):
            arrive[i] = arrive[(i - 1) // 2] + (1 if i % 2 else 2)
        steps = max(arrive)  # = 2 (h - 1) when p = 2^h - 1 (the lecture's 2 log n)
        ch = F(steps * c)
    elif name in ("recursive-doubling", "recursive-halving"):
        pp = 1 << (p.bit_length() - 1)
        steps = pp.bit_length() - 1 + (2 if p > pp else 0)
        ch = _doubling_chunks(p) * c
    elif name == "rabenseifner":
        pp = 1 << (p.bit_length() - 1)
        e = p - pp
        L = pp.bit_length() - 1
        core = sum((1 << s) + min(1 << s, e) for s in range(L))
        steps = 2 * L + (2 if e else 0)
        ch = F(2 * core + (2 * p if e else 0)) * c
        ar = False
    elif name == "bruck":
        steps, ch = _log2c(p), F(p - 1) * c
    elif name in ("scatter", "gather", "binomial-scatter", "binomial-gather"):
        steps, ch = _log2c(p), F(p - 1) * c
    elif name == "scatter-allgather":
        steps, ch = _log2c(p) + p - 1, F(2 * (p - 1), p) * c
    elif name == "double-binary-tree":
        steps = 2 * _log2c(p)
        ch = F(steps * p * c, 2)
        ar = False
    elif name == "bucket":
        dims = list(dims or [p])
        D = len(dims)
        steps = sum(n - 1 for n in dims)
        ch = F(p - 1, 2 * D) * c
    elif name == "hamiltonian-rings":
        steps, ch = p - 1, F(p - 1, 4) * c
    else:
        raise ValueError(f"no closed form for {name!r}")
    if ar:
        steps, ch = 2 * steps, 2 * ch
    chunk_bytes = message_bytes / c if kind in ("broadcast", "reduce") else message_bytes / (p * c)
    T_L = steps * alpha
    T_B = float(ch) * chunk_bytes / bandwidth
    return {"steps": steps, "T_B_chunks": ch, "T_L_s": T_L, "T_B_s": T_B, "total_s": T_L + T_B}


# ---- schedules --------------------------------------------------------------------------

def _single(instance: Instance):
    if instance.concurrent:
        raise Unsupported("closed-form algorithms take a single collective, not concurrent ones")
    coll = instance.collective
    return coll, len(coll.nodes)


def _need(kind: str, allowed: tuple[str, ...], name: str) -> None:
    if kind not in allowed:
        raise Unsupported(f"{name} implements {', '.join(allowed)}, not {kind}")


def _root_rank(coll) -> int:
    return coll.nodes.index(coll.root) if coll.root is not None else 0


RS_AG_AR = ("allgather", "reduce_scatter", "allreduce")


def _rs_ag_ar(instance: Instance, name: str, ag: Phase, rs: Phase | None = None) -> Schedule:
    """Allgather phase ``ag``; reduce-scatter ``rs`` (default: ``ag`` reversed); allreduce both."""
    kind = instance.collective.kind
    rs = ag.reversed() if rs is None else rs
    if kind == "allgather":
        return build(instance, [(ag, OP_DEFAULT)], name=name)
    if kind == "reduce_scatter":
        return build(instance, [(rs, OP_DEFAULT)], name=name)
    return build(instance, [(rs, OP_REDUCE), (ag, OP_COPY)], name=name)


def ring_schedule(instance: Instance) -> Schedule:
    """Ring allgather / reduce-scatter / allreduce (NCCL ring) over ranks in order, or chain
    broadcast / reduce from the root (Thakur et al., IJHPCA 2005 "ring broadcast")."""
    coll, p = _single(instance)
    _need(coll.kind, RS_AG_AR + ("broadcast", "reduce"), "ring")
    order = np.arange(p)
    if coll.kind == "broadcast":
        return build(instance, [(chain_broadcast_phase(p, _root_rank(coll)), OP_DEFAULT)], name="ring")
    if coll.kind == "reduce":
        return build(instance, [(chain_broadcast_phase(p, _root_rank(coll)).reversed(), OP_DEFAULT)], name="ring")
    return _rs_ag_ar(instance, "ring", ring_allgather_phase(order), ring_reduce_scatter_phase(order))


def bidirectional_ring_schedule(instance: Instance) -> Schedule:
    """Half of every chunk goes clockwise, half counter-clockwise (Zhao et al., NSDI 2025, Appendix E.1's baseline)."""
    coll, p = _single(instance)
    _need(coll.kind, RS_AG_AR, "bidirectional-ring")
    cw, ccw = np.arange(p), np.arange(p)[::-1]
    ag, rs = Phase(2), Phase(2)
    for order, (lo, hi) in ((cw, (0, 1)), (ccw, (1, 2))):
        a = ring_allgather_phase(order, 2, lo, hi)
        r = ring_reduce_scatter_phase(order, 2, lo, hi)
        ag.cols += a.cols
        rs.cols += r.cols
        ag.steps, rs.steps = max(ag.steps, a.steps), max(rs.steps, r.steps)
    return _rs_ag_ar(instance, "bidirectional-ring", ag, rs)


def bfb_ring_schedule(instance: Instance) -> Schedule:
    """BFB ring (Zhao et al., NSDI 2025, Appendix E.1): floor(p/2) steps per phase, bandwidth-optimal."""
    coll, p = _single(instance)
    _need(coll.kind, RS_AG_AR, "bfb-ring")
    return _rs_ag_ar(instance, "bfb-ring", bfb_ring_allgather_phase(np.arange(p)))


def direct_schedule(instance: Instance) -> Schedule:
    """Direct: every rank sends to every peer at once (one step; two for allreduce); also the
    direct all-to-all (rank i sends rank k its block for k)."""
    coll, p = _single(instance)
    _need(coll.kind, RS_AG_AR + ("broadcast", "reduce", "scatter", "gather", "alltoall"), "direct")
    root = _root_rank(coll)
    if coll.kind in RS_AG_AR:
        return _rs_ag_ar(instance, "direct", direct_phase("allgather", p, None),
                         direct_phase("reduce_scatter", p, None))
    return build(instance, [(direct_phase(coll.kind, p, root), OP_DEFAULT)], name="direct")


def binomial_tree_schedule(instance: Instance) -> Schedule:
    """Binomial tree broadcast and reduce (its reversal), scatter and gather (Thakur et al., IJHPCA 2005)."""
    coll, p = _single(instance)
    _need(coll.kind, ("broadcast", "reduce", "scatter", "gather"), "binomial-tree")
    root = _root_rank(coll)
    if coll.kind in ("broadcast", "reduce"):
        ph = binomial_broadcast_phase(p, root)
    else:
        ph = binomial_scatter_phase(p, root)
    if coll.kind in ("reduce", "gather"):
        ph = ph.reversed()
    return build(instance, [(ph, OP_DEFAULT)], name="binomial-tree")


def binary_tree_schedule(instance: Instance) -> Schedule:
    """Binary tree broadcast and reduce (its reversal), left child first (Thakur et al., IJHPCA 2005)."""
    coll, p = _single(instance)
    _need(coll.kind, ("broadcast", "reduce"), "binary-tree")
    ph = binary_tree_broadcast_phase(p, _root_rank(coll))
    if coll.kind == "reduce":
        ph = ph.reversed()
    return build(instance, [(ph, OP_DEFAULT)], name="binary-tree")


def double_binary_tree_schedule(instance: Instance) -> Schedule:
    """NCCL double binary tree allreduce (Sanders et al., Parallel Computing 2009): two
    complementary trees, each half of the data."""
    coll, p = _single(instance)
    _need(coll.kind, ("allreduce",), "double-binary-tree")
    up, down = double_tree_phases(p)
    return build(instance, [(up, OP_REDUCE), (down, OP_COPY)], name="double-binary-tree")


def recursive_doubling_schedule(instance: Instance) -> Schedule:
    """Recursive doubling (butterfly) allgather, recursive halving reduce-scatter (its reversal),
    and their concatenation for allreduce; any p via the fold to p' = 2^floor(log2 p)."""
    coll, p = _single(instance)
    _need(coll.kind, RS_AG_AR, "recursive-doubling")
    return _rs_ag_ar(instance, "recursive-doubling", doubling_allgather_phase(p))


def recursive_halving_schedule(instance: Instance) -> Schedule:
    """Recursive halving reduce-scatter (Thakur et al., IJHPCA 2005): the time reversal of recursive doubling,
    partners at distance p/2, p/4, ..., exchanging the halves the partner's side owns."""
    coll, p = _single(instance)
    _need(coll.kind, ("reduce_scatter",), "recursive-halving")
    return _rs_ag_ar(instance, "recursive-halving", doubling_allgather_phase(p))


def rabenseifner_schedule(instance: Instance) -> Schedule:
    """Rabenseifner allreduce (Thakur et al., IJHPCA 2005): recursive-halving reduce-scatter +
    recursive-doubling allgather; for p not a power of two the e = p - p' extra ranks first send
    their whole vector to a core partner and get the result back at the end (the two extra
    exchanges)."""
    coll, p = _single(instance)
    _need(coll.kind, ("allreduce",), "rabenseifner")
    pp, rs, ag = rabenseifner_core(p)
    e = p - pp
    phases = []
    if e:
        fin = Phase()
        for i in range(e):
            fin.add(np.arange(p), pp + i, i, 1)
        phases.append((fin, OP_REDUCE))
    phases += [(rs, OP_REDUCE), (ag, OP_COPY)]
    if e:
        fout = Phase()
        for i in range(e):
            fout.add(np.arange(p), i, pp + i, 1)
        phases.append((fout, OP_COPY))
    return build(instance, phases, name="rabenseifner")


def bruck_schedule(instance: Instance) -> Schedule:
    """Bruck allgather (Bruck et al., TPDS 1997) and its reversal, a reduce-scatter: ceil(log2 p)
    steps for any p."""
    coll, p = _single(instance)
    _need(coll.kind, RS_AG_AR, "bruck")
    return _rs_ag_ar(instance, "bruck", bruck_allgather_phase(p))


def scatter_allgather_schedule(instance: Instance) -> Schedule:
    """Broadcast = binomial scatter of p pieces + ring allgather of the pieces (Chan et al.,
    CCPE 2007; Thakur et al., IJHPCA 2005); reduce is its reversal (reduce-scatter + gather)."""
    coll, p = _single(instance)
    _need(coll.kind, ("broadcast", "reduce"), "scatter-allgather")
    root = _root_rank(coll)
    sc = binomial_scatter_phase(p, root, denom=p, piece_of=True)
    ag = Phase(p)
    k = np.arange(p)
    for s in range(1, p):
        q = (k - s + 1) % p  # relative rank whose piece position k forwards
        ag.add(ALL, (k + root) % p, (k + 1 + root) % p, s, q, q + 1)
    if coll.kind == "broadcast":
        return build(instance, [(sc, OP_COPY), (ag, OP_COPY)], name="scatter-allgather")
    # the gather of the reduced pieces overwrites the root's partial piece (copy)
    return build(instance, [(ag.reversed(), OP_REDUCE), (sc.reversed(), OP_COPY)], name="scatter-allgather")


def bucket_schedule(instance: Instance) -> Schedule:
    """Bucket algorithm on a D-dimensional torus (concurrent rings per dimension, data split
    over 2D parts; De Sensi et al., NSDI 2024, Section 2.3.4); allgather, reduce-scatter
    (reversal) and allreduce."""
    coll, p = _single(instance)
    _need(coll.kind, RS_AG_AR, "bucket")
    dims = torus_dims(instance)
    return _rs_ag_ar(instance, "bucket", bucket_allgather_phase(dims))


def hamiltonian_rings_schedule(instance: Instance) -> Schedule:
    """Allreduce on an n x n torus by ring allreduce on the four directed rings of two
    edge-disjoint Hamiltonian cycles, each carrying a quarter of every chunk (De Sensi et al.,
    NSDI 2024, Section 2.3.1)."""
    coll, p = _single(instance)
    _need(coll.kind, RS_AG_AR, "hamiltonian-rings")
    dims = torus_dims(instance)
    pair = torus_hamiltonian_decomposition(*dims) if len(dims) == 2 else None
    if pair is None:
        raise Unsupported(f"no edge-disjoint Hamiltonian cycles constructed for torus {dims} "
                          "(built for 2D tori m x n, m, n >= 3 of equal parity)")
    h1, h2 = pair
    assert not (_undirected_edges(h1) & _undirected_edges(h2))
    ag, rs = Phase(4), Phase(4)
    rings = [h1, h1[::-1], h2, h2[::-1]]
    for q, order in enumerate(rings):
        a = ring_allgather_phase(order, 4, q, q + 1)
        r = ring_reduce_scatter_phase(order, 4, q, q + 1)
        ag.cols += a.cols
        rs.cols += r.cols
        ag.steps, rs.steps = max(ag.steps, a.steps), max(rs.steps, r.steps)
    return _rs_ag_ar(instance, "hamiltonian-rings", ag, rs)


SCHEDULES = {
    "ring": ring_schedule,
    "bidirectional-ring": bidirectional_ring_schedule,
    "bfb-ring": bfb_ring_schedule,
    "direct": direct_schedule,
    "binary-tree": binary_tree_schedule,
    "binomial-tree": binomial_tree_schedule,
    "double-binary-tree": double_binary_tree_schedule,
    "recursive-doubling": recursive_doubling_schedule,
    "recursive-halving": recursive_halving_schedule,
    "rabenseifner": rabenseifner_schedule,
    "bruck": bruck_schedule,
    "scatter-allgather": scatter_allgather_schedule,
    "bucket": bucket_schedule,
    "hamiltonian-rings": hamiltonian_rings_schedule,
}

SUMMARIES = {
    "ring": "ring allgather/reduce-scatter/allreduce, chain broadcast/reduce (Thakur et al., IJHPCA 2005, NCCL)",
    "bidirectional-ring": "half of each chunk each way round the ring",
    "bfb-ring": "BFB ring: half the steps of the ring, bandwidth-optimal (Zhao et al., NSDI 2025, E.1)",
    "direct": "one step straight to every peer (shortest-path unless complete)",
    "binary-tree": "binary tree broadcast/reduce, 2 log p steps (Thakur et al., IJHPCA 2005)",
    "binomial-tree": "binomial tree broadcast/reduce/scatter/gather (Thakur et al., IJHPCA 2005)",
    "double-binary-tree": "NCCL double binary tree allreduce (two complementary trees)",
    "recursive-doubling": "butterfly / recursive doubling allgather, halving reduce-scatter",
    "recursive-halving": "recursive halving reduce-scatter (recursive doubling reversed)",
    "rabenseifner": "Rabenseifner allreduce: halving reduce-scatter + doubling allgather",
    "bruck": "Bruck allgather, ceil(log2 p) steps for any p",
    "scatter-allgather": "van de Geijn broadcast = scatter + ring allgather",
    "bucket": "bucket algorithm on D-dim tori: 2D concurrent rings per dimension",
    "hamiltonian-rings": "allreduce on two edge-disjoint Hamiltonian cycles of an n x n torus",
}


def _link_costs(instance: Instance) -> tuple[float, float]:
    la = instance.topology.link_arrays
    return float(la.alpha.max()), float(la.bandwidth.min())


def closed_form_for(name: str, instance: Instance) -> dict:
    """:func:`closed_form` with p, c, M, alpha and B (slowest link) taken from the instance."""
    coll = instance.collective
    alpha, bw = _link_costs(instance)
    dims = instance.topology.meta.get("dims") if name == "bucket" else None
    return closed_form(name, coll.kind, len(coll.nodes), c=coll.chunks_per_node,
                       message_bytes=coll.message_bytes, alpha=alpha, bandwidth=bw, dims=dims)


def _producer(name: str) -> Producer:
    fn = SCHEDULES[name]

    def run(instance: Instance, options) -> Outcome:
        sched = fn(instance)
        cf = closed_form_for(name, instance)
        return Outcome(
            sched, "constructed", objective=float(sched.num_steps), units="steps",
            extra={"closed_form": {k: (str(v) if isinstance(v, Fraction) else v) for k, v in cf.items()}},
        )

    return Producer(name, "closed-form", run, SUMMARIES[name])


PRODUCERS = [_producer(n) for n in SCHEDULES]
