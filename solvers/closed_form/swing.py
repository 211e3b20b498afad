"""Swing and recursive-doubling allreduce on tori (De Sensi et al., NSDI 2024), as schedules.

Everything here follows De Sensi et al., NSDI 2024, Sections 3-4:

- ``rho(s) = sum_{i<=s} (-2)^i`` (1, -1, 3, -5, 11, ...), ``delta(s) = |rho(s)|``; rank ``r``
  talks at step ``s`` to ``pi(r, s) = r + rho(s)`` if ``r`` is even, ``r - rho(s)`` if odd
  (Eq. 2). Recursive doubling talks to ``r XOR 2^s`` instead (section 2.3.2).
- **Bandwidth-optimal** (section 3.1.1): a reduce-scatter in which a rank sends its peer the
  peer's block plus every block the peer reaches in the later steps (Listing 1's
  ``get_rs_idx``), then the allgather, its mirror image (time reversal). **Latency-optimal**
  (section 3.1.2): the whole vector every step.
- **Any p** (section 3.2, appendix A.2): an even p that is not a power of two takes
  ``ceil(log2 p)`` steps and a block that would be sent twice is sent only in the later step;
  an odd p runs on p-1 ranks and the last rank exchanges its blocks directly, with
  ``ceil(rem/2)`` ranks per step (p = 7: ranks 0-2 at step 0, 3-4 at step 1, 5 at step 2).
  The latency-optimal variant folds the ranks beyond the largest power of two p' into the
  step-0 pair of rank ``e - p'`` (they send their vector to both members of that pair in step
  0, which counts it once because the pair holds one sum afterwards) and gets the result back
  in one extra step (section 2.3.2's non-power-of-two scheme with the first exchange merged
  into step 0: ``log2 p' + 1`` steps).
- **Recursive doubling, any p** (section 2.3.2, Rabenseifner): the ranks beyond the largest
  power of two p' fold their vector into rank ``e - p'`` first, the p' ranks run recursive
  halving (bandwidth-optimal) or the exchange (latency-optimal), the extras get the result
  back at the end (:func:`recursive_doubling_closed_form`).
- **D-dimensional tori of any shape** (section 4): step ``s`` works on one dimension, the
  dimensions taken in rotation; a dimension whose steps are done is skipped (section 4.2,
  Fig. 5). A multi-dimensional schedule is the product of the 1D patterns: a message in
  dimension ``i`` carries the 1D block set in coordinate ``i`` times the blocks the sender
  still holds in every other coordinate, which is why each 1D pattern may be of any size.
- **Multiport** (section 4.1): the data is split ``2D`` ways; D *plain* collectives start on
  dimensions 0..D-1 and D *mirrored* ones do the same with every sign flipped (every
  coordinate reflected), so the 2D collectives use 2D different ports in each step.

Schedules use ``routing="shortest-path"``: a logical peer that is not a neighbour is reached
over the network, and the shared cost model (:func:`collsynth.tens.cost_models.price`) charges every
link of the route, which is where the congestion deficiency comes from.

Every builder returns a :class:`~collsynth.tens.schedule.Schedule`; :func:`closed_form` gives
the paper's alpha-beta cost beside it. :func:`messages` gives the same schedule at message
level (one row per logical message, sizes as exact fractions of the vector) for pricing large
tori without expanding every block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from fractions import Fraction

import numpy as np

from ...tens.status import Status
from ...instances import Instance
from ...instances.topology import Topology
from ...tens.schedule import OP_COPY, OP_DEFAULT, OP_REDUCE, Schedule, concat, from_arrays, reverse
from ..producers import Options, Outcome, Param, Producer, Unsupported

ALGORITHMS = ("swing", "recursive_doubling")
MAX_SENDS = 20_000_000  # producers refuse larger chunk-level schedules (params: max_sends)
KINDS = ("allreduce", "reduce_scatter", "allgather")


# ---- peers (Eq. 2) ----------------------------------------------------------------------------

def rho(s: int) -> int:
    """``rho(s) = sum_{i=0..s} (-2)^i``: 1, -1, 3, -5, 11, ... (De Sensi et al., NSDI 2024, Section 3.1.1, Eq. 2).

    Computed as ``(1 - (-2)^(s+1)) / 3``.

    >>> [rho(s) for s in range(5)]
    [1, -1, 3, -5, 11]
    """
    return (1 - (-2) ** (s + 1)) // 3


def delta(s: int) -> int:
    """``delta(s) = |rho(s)|``: Swing peers' distance at step ``s`` (De Sensi et al., NSDI 2024, Section 3.1.1)."""
    return abs(rho(s))


def pi(r: int, s: int, p: int) -> int:
    """Swing peer of rank ``r`` at step ``s`` among ``p`` ranks (De Sensi et al., NSDI 2024, Section 3.1.1, Eq. 2).

    >>> [pi(0, s, 16) for s in range(4)], [pi(1, s, 16) for s in range(4)]
    ([1, 15, 3, 11], [0, 2, 14, 6])
    """
    return (r + rho(s)) % p if r % 2 == 0 else (r - rho(s)) % p


def _peers(m: int, k: int, algorithm: str) -> np.ndarray:
    a = np.arange(m)
    if algorithm == "swing":
        return np.where(a % 2 == 0, a + rho(k), a - rho(k)) % m
    return a ^ (1 << k)


def _is_pow2(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def _log2ceil(n: int) -> int:
    return max(0, (n - 1).bit_length())


# ---- 1D patterns ------------------------------------------------------------------------------

@dataclass
class Pattern1D:
    """The communication of one dimension of size ``d``, in-dimension step by step.

    ``steps[k]`` is ``(src, dst, sets)``: message ``j`` goes ``src[j] -> dst[j]`` and carries the
    blocks (coordinates in this dimension) where ``sets[j]`` is true (reduce-scatter), or the
    whole vector with op ``ops[k][j]`` (latency-optimal allreduce, ``sets`` is None).
    ``held[k][a]`` is the blocks coordinate ``a`` still holds at the start of step ``k``.
    """

    d: int
    steps: list = field(default_factory=list)
    ops: list = field(default_factory=list)
    held: list = field(default_factory=list)

    @property
    def num_steps(self) -> int:
        """The in-dimension steps of the pattern."""
        return len(self.steps)


def _rs_core(m: int, algorithm: str) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Reduce-scatter on ``m`` ranks (m even, or a power of two for recursive doubling).

    Step ``k``: rank ``a`` sends its peer ``q`` the blocks ``q`` reaches in steps ``k+1..L-1``
    (itself included; Listing 1); a block that would go out twice goes out only in the later
    step (appendix A.2), and a rank never sends its own block.
    """
    L = _log2ceil(m)
    peers = [_peers(m, k, algorithm) for k in range(L)]
    reach = np.eye(m, dtype=bool)
    wants = [None] * L
    for k in reversed(range(L)):
        wants[k] = reach[peers[k]]
        reach = reach | reach[peers[k]]
    seen = np.eye(m, dtype=bool)
    out = [None] * L
    for k in reversed(range(L)):
        sets = wants[k] & ~seen
        seen |= wants[k]
        out[k] = (np.arange(m), peers[k], sets)
    return out


def _odd_groups(n: int, L: int) -> list[list[int]]:
    """Ranks 0..n-1 spread over ``L`` steps, ``ceil(rem/2)`` per step, the rest in the last."""
    groups, start = [], 0
    for k in range(L):
        rem = n - start
        take = rem if k == L - 1 else (rem + 1) // 2
        groups.append(list(range(start, start + take)))
        start += take
    return groups


def _rd_fold_steps(d: int, returns: bool) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Bandwidth-optimal recursive doubling on any ``d`` (Rabenseifner; De Sensi et al., NSDI 2024,
    Sections 2.3.2-2.3.3): ``m`` = the largest power of two <= d, extras ``e = m .. d-1`` with
    partners ``e - m``.

    Step 0 (fold): every extra sends its vector to its partner: every block but its own when
    the pattern ``returns`` (a reduce-scatter: it keeps its own block to reduce it at the end),
    the whole vector otherwise (an allreduce: the partner answers with the whole result in the
    mirrored half). Steps 1..log2 m: recursive halving on the m partners, core block b standing
    for blocks b and b + m. Last step (``returns``): partner e - m sends block e to e."""
    m = 1 << (d.bit_length() - 1)
    E = d - m
    e = np.arange(m, d)
    fold = np.ones((E, d), bool)
    if returns:
        fold[np.arange(E), e] = False
    out = [(e, e - m, fold)]
    for src, dst, sets in _rs_core(m, "recursive_doubling"):
        full = np.zeros((m, d), bool)
        full[:, :m] = sets
        full[:, m:] = sets[:, :E]
        out.append((src, dst, full))
    if returns:
        back = np.zeros((E, d), bool)
        back[np.arange(E), e] = True
        out.append((e - m, e, back))
    return out


def rs_pattern(d: int, algorithm: str = "swing", mirrored: bool = False, returns: bool = True) -> Pattern1D:
    """The 1D reduce-scatter pattern of a dimension of size ``d`` (De Sensi et al., NSDI 2024, Sections 3.1.1, 3.2).

    Swing: any ``d`` (odd ``d``: the core runs on ``d-1`` ranks, rank ``d-1`` exchanges blocks
    directly). Recursive doubling: any ``d``; a power of two runs recursive halving, any other
    ``d`` folds the ranks beyond the largest power of two in first (:func:`_rd_fold_steps`;
    ``returns=False`` leaves their blocks with their partners, which only an allreduce may do:
    its mirrored half then sends them the whole result). ``mirrored`` flips every sign
    (coordinates reflected, ``a -> -a`` on the core ring; Section 4.1).
    """
    pat = Pattern1D(d)
    if d == 1:
        pat.held = [np.ones((1, 1), bool)]
        return pat
    if algorithm == "recursive_doubling" and not _is_pow2(d):
        m = 1 << (d.bit_length() - 1)
        pat.steps = _rd_fold_steps(d, returns)
    else:
        odd = algorithm == "swing" and d % 2 == 1
        m = d - 1 if odd else d
        core = _rs_core(m, algorithm)
        L = len(core)
        for k, (src, dst, sets) in enumerate(core):
            full = np.zeros((len(src), d), bool)
            full[:, :m] = sets
            s_list, d_list, set_list = [src], [dst], [full]
            if odd:
                E = d - 1
                group = _odd_groups(m, L)[k]
                g = np.asarray(group, dtype=np.int64)
                to_t = np.zeros((len(g), d), bool)
                to_t[np.arange(len(g)), g] = True
                to_e = np.zeros((len(g), d), bool)
                to_e[:, E] = True
                s_list += [np.full(len(g), E), g]
                d_list += [g, np.full(len(g), E)]
                set_list += [to_t, to_e]
            pat.steps.append((np.concatenate(s_list), np.concatenate(d_list), np.concatenate(set_list)))
    if mirrored:
        pat = _relabel(pat, _reflection(d, m))
    held = np.ones((d, d), bool)
    pat.held = [held.copy()]
    for src, dst, sets in pat.steps:
        assert not (sets & ~held[src]).any(), "a rank would send a block it no longer holds"
        for j in range(len(src)):
            held[src[j]] &= ~sets[j]
        pat.held.append(held.copy())
    return pat


def lat_pattern(d: int, algorithm: str = "swing", mirrored: bool = False) -> Pattern1D:
    """The 1D latency-optimal allreduce pattern of a size-``d`` dimension (De Sensi et al., NSDI 2024, Section 3.1.2).

    ``p'`` = the largest power of two <= d runs the exchange; a rank ``e >= p'`` sends its vector
    to both members of the step-0 pair of ``e - p'`` in step 0 and gets the result from
    ``e - p'`` (a copy) in one extra step.
    """
    pat = Pattern1D(d)
    if d == 1:
        return pat
    m = 1 << (d.bit_length() - 1)
    L = m.bit_length() - 1
    for k in range(L):
        src = np.arange(m)
        dst = _peers(m, k, algorithm)
        ops = np.full(m, OP_REDUCE, np.int8)
        if k == 0 and d > m:
            e = np.arange(m, d)
            t = e - m
            src = np.concatenate([src, e, e])
            dst = np.concatenate([dst, t, _peers(m, 0, algorithm)[t]])
            ops = np.concatenate([ops, np.full(2 * len(e), OP_REDUCE, np.int8)])
        pat.steps.append((src, dst, None))
        pat.ops.append(ops)
    if d > m:
        e = np.arange(m, d)
        pat.steps.append((e - m, e, None))
        pat.ops.append(np.full(len(e), OP_COPY, np.int8))
    if mirrored:
        pat = _relabel(pat, _reflection(d, m))
    return pat


def _reflection(d: int, m: int) -> np.ndarray:
    """``a -> -a mod m`` on the core ranks ``0..m-1``; ranks ``>= m`` stay."""
    phi = np.arange(d)
    phi[:m] = (-np.arange(m)) % m
    return phi


def _relabel(pat: Pattern1D, phi: np.ndarray) -> Pattern1D:
    out = Pattern1D(pat.d, ops=list(pat.ops))
    for src, dst, sets in pat.steps:
        if sets is not None:
            new = np.zeros_like(sets)
            new[:, phi] = sets
            sets = new
        out.steps.append((phi[src], phi[dst], sets))
    return out


# ---- rank space ---------------------------------------------------------------------------------

SUPPORTED_GENERATORS = ("torus", "ring", "hypercube", "complete", "hyperx", "hamming", "hammingmesh")


def rank_space(topology: Topology, instance_nodes=None) -> tuple[list[int], str]:
    """The coordinate shape of the ranks and the network family (``torus`` or ``direct``).

    Tori, rings and hypercubes (``2 x ... x 2`` tori) use their dimensions; HyperX, Hamming
    graphs and HammingMesh their global grid; a complete graph is one dimension of all nodes.
    Anything else (meshes, switches, failed nodes) is :class:`Unsupported`.
    """
    meta = dict(topology.meta)
    gen = meta.get("generator") or ""
    if not gen:
        name = topology.name
        for g in SUPPORTED_GENERATORS:
            if name.startswith(g):
                gen = g
                break
    if gen not in SUPPORTED_GENERATORS:
        raise Unsupported(
            f"Swing / recursive doubling run on tori, rings, hypercubes, HyperX/Hamming, HammingMesh "
            f"or complete graphs; got {topology.name or gen or 'an unnamed topology'}"
        )
    if topology.failed_nodes or topology.failed_links:
        raise Unsupported("Swing / recursive doubling need every node and link of the network alive")
    if topology.switches and gen != "hammingmesh":
        raise Unsupported("topologies with switches are not supported")
    p = len(topology.npus)
    if instance_nodes is not None and tuple(instance_nodes) != tuple(range(p)):
        raise Unsupported("the collective must run over every node of the network")
    params = meta.get("params", {})
    if gen in ("torus",):
        if params.get("bidirectional") is False:
            raise Unsupported("Swing needs bidirectional torus links")
        return list(meta["dims"]), "torus"
    if gen == "ring":
        if params.get("bidirectional") is False:
            raise Unsupported("Swing needs a bidirectional ring")
        return [p], "torus"
    if gen == "hypercube":
        return [2] * (p.bit_length() - 1), "torus"
    if gen == "complete":
        return [p], "direct"
    dims = list(meta.get("dims") or meta.get("cayley") or [])
    if not dims or math.prod(dims) != p:
        raise Unsupported(f"cannot find the rank grid of {topology.name}")
    return dims, ("direct" if gen in ("hyperx", "hamming") else "torus")


def _coords(dims: list[int]) -> tuple[np.ndarray, np.ndarray]:
    p = math.prod(dims)
    strides = np.array([math.prod(dims[i + 1:]) for i in range(len(dims))], dtype=np.int64)
    ids = np.arange(p, dtype=np.int64)
    coords = (ids[:, None] // strides[None, :]) % np.asarray(dims, dtype=np.int64)[None, :]
    return coords, strides


def step_order(dims: list[int], lengths: list[int], start: int = 0) -> list[tuple[int, int]]:
    """``(dimension, in-dimension step)`` of every step of a collective starting on dimension
    ``start`` of the active dimensions (size > 1), in rotation; an exhausted dimension is
    skipped (section 4.1: omega(s) = s mod D, sigma(s) = floor(s / D); section 4.2).

    >>> step_order([2, 4], [1, 2])
    [(0, 0), (1, 0), (1, 1)]
    """
    active = [i for i, d in enumerate(dims) if d > 1]
    if not active:
        return []
    j = start % len(active)
    order = active[j:] + active[:j]
    out = []
    for k in range(max(lengths[i] for i in active)):
        for i in order:
            if k < lengths[i]:
                out.append((i, k))
    return out


@dataclass
class Plan:
    """All collectives of one algorithm on one rank grid (the multiport split included)."""

    dims: list[int]
    algorithm: str
    variant: str  # "bw" or "lat"
    collectives: list[tuple[list[Pattern1D], list[tuple[int, int]]]]
    allreduce_only: bool = False  # its reduce-scatter leaves the extras' blocks with partners

    @property
    def num_collectives(self) -> int:
        """The number of collectives run at once, each on its share of the data (``2D`` with
        multiport: one plain and one mirrored starting in each dimension, De Sensi et al., NSDI
        2024, Section 4.1; else one)."""
        return len(self.collectives)

    @property
    def num_steps(self) -> int:
        """The steps of each collective (all have the same; 0 for a plan of none)."""
        return len(self.collectives[0][1]) if self.collectives else 0


def plan(dims: list[int], algorithm: str = "swing", variant: str = "bw", multiport: bool = True,
         mirrored: bool | None = None, kind: str | None = None) -> Plan:
    """The collectives of a run: ``2D`` (D plain + D mirrored, D = dimensions of size > 1) when
    ``multiport``, else one plain collective (De Sensi et al., NSDI 2024, Section 4.1).
    ``mirrored=False`` with multiport gives D plain collectives only (each on 1/D of the data).

    ``kind="allreduce"`` lets bandwidth-optimal recursive doubling on a dimension that is not a
    power of two skip the reduce-scatter's last step and the allgather's first (the extras'
    own blocks going back and forth): ``2 log2 p' + 2`` steps, the two extra steps carrying the
    whole vector. Such a plan is an allreduce only (:func:`reduce_scatter` refuses it); any
    other ``kind`` (or None) builds complete reduce-scatter patterns, valid for all three."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {ALGORITHMS}")
    if variant == "bw":
        returns = kind != "allreduce"

        def maker(d, a, mir):
            return rs_pattern(d, a, mir, returns=returns)
    else:
        maker = lat_pattern
    plain = [maker(d, algorithm, False) for d in dims]
    lengths = [pt.num_steps for pt in plain]
    active = [i for i, d in enumerate(dims) if d > 1]
    D = max(1, len(active))
    if mirrored is None:
        mirrored = multiport
    starts = list(range(D)) if multiport else [0]
    colls = [(plain, step_order(dims, lengths, c)) for c in starts]
    if mirrored:
        mirror = [maker(d, algorithm, True) for d in dims]
        colls += [(mirror, step_order(dims, lengths, c)) for c in starts]
    allreduce_only = (variant == "bw" and kind == "allreduce" and algorithm == "recursive_doubling"
                      and not all(_is_pow2(d) for d in dims))
    return Plan(list(dims), algorithm, variant, colls, allreduce_only)


# ---- message level ------------------------------------------------------------------------------

@dataclass
class Messages:
    """One row per logical message: ``step`` (from 1), ``src``, ``dst``, ``blocks`` (number of
    blocks of ``1/p`` of the vector; ``p`` for whole-vector messages), ``coll`` (which of the
    ``ncoll`` collectives; each carries ``1/ncoll`` of the data) and ``op``."""

    step: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    blocks: np.ndarray
    coll: np.ndarray
    op: np.ndarray
    p: int
    ncoll: int

    def fraction(self) -> list[Fraction]:
        """Exact size of every message as a fraction of the vector."""
        return [Fraction(int(b), self.p * self.ncoll) for b in self.blocks]


def _walk(pl: Plan):
    """Yield ``(coll, step, dim, k, progress, patterns)`` for every step of every collective."""
    for c, (pats, order) in enumerate(pl.collectives):
        progress = [0] * len(pl.dims)
        for s, (i, k) in enumerate(order):
            yield c, s + 1, i, k, list(progress), pats
            progress[i] += 1


def messages(pl: Plan) -> Messages:
    """Every logical message of the plan: its reduce-scatter (``bw``) or its latency-optimal
    allreduce (``lat``), vectorised over nodes (block counts only, no block lists; empty
    messages, which the chunk-level schedule does not have either, are left out)."""
    dims = pl.dims
    p = math.prod(dims)
    coords, strides = _coords(dims)
    cols = {k: [] for k in ("step", "src", "dst", "blocks", "coll", "op")}
    for c, step, i, k, progress, pats in _walk(pl):
        src_a, dst_a, sets = pats[i].steps[k]
        if pl.variant == "bw":
            other = np.ones(p, dtype=np.int64)
            for j, pt in enumerate(pats):
                if j != i and dims[j] > 1:
                    cnt = pt.held[progress[j]].sum(axis=1)
                    other *= cnt[coords[:, j]]
            sizes = sets.sum(axis=1)
        for j in range(len(src_a)):
            r = np.flatnonzero(coords[:, i] == src_a[j])
            cols["src"].append(r)
            cols["dst"].append(r + (int(dst_a[j]) - int(src_a[j])) * strides[i])
            cols["step"].append(np.full(len(r), step))
            cols["coll"].append(np.full(len(r), c))
            if pl.variant == "bw":
                cols["blocks"].append(sizes[j] * other[r])
                cols["op"].append(np.full(len(r), OP_DEFAULT, np.int8))
            else:
                cols["blocks"].append(np.full(len(r), p))
                cols["op"].append(np.full(len(r), pats[i].ops[k][j], np.int8))
    cat = {k: (np.concatenate(v) if v else np.zeros(0, np.int64)) for k, v in cols.items()}
    keep = cat["blocks"] > 0
    return Messages(**{k: cat[k][keep].astype(np.int8 if k == "op" else np.int64)
                       for k in ("step", "src", "dst", "blocks", "coll", "op")}, p=p, ncoll=pl.num_collectives)


# ---- full schedules ------------------------------------------------------------------------------

def _block_ids(dims, strides, sets_per_dim) -> np.ndarray:
    """Row-major ids of the product of per-dimension coordinate sets."""
    ids = np.zeros(1, dtype=np.int64)
    for j, coord_list in enumerate(sets_per_dim):
        ids = (ids[:, None] + np.asarray(coord_list, dtype=np.int64)[None, :] * strides[j]).ravel()
    return ids


def _expand(pl: Plan, chunks_per_node: int, kind: str) -> Schedule:
    """The plan as a chunk-level schedule of ``kind`` (``reduce_scatter`` or ``allreduce`` for
    latency-optimal); collective ``c`` moves piece ``[c/ncoll, (c+1)/ncoll)`` of every chunk."""
    dims = pl.dims
    p = math.prod(dims)
    cpn = chunks_per_node
    coords, strides = _coords(dims)
    ncoll = pl.num_collectives
    cols = {k: [] for k in ("chunk", "src", "dst", "step", "lo", "op")}
    all_blocks = np.arange(p, dtype=np.int64)
    jj = np.arange(cpn, dtype=np.int64)
    for c, step, i, k, progress, pats in _walk(pl):
        src_a, dst_a, sets = pats[i].steps[k]
        for j in range(len(src_a)):
            for r in np.flatnonzero(coords[:, i] == src_a[j]).tolist():
                if pl.variant == "bw":
                    per_dim = []
                    for dd, pt in enumerate(pats):
                        if dd == i:
                            per_dim.append(np.flatnonzero(sets[j]))
                        elif dims[dd] == 1:
                            per_dim.append([0])
                        else:
                            per_dim.append(np.flatnonzero(pt.held[progress[dd]][coords[r, dd]]))
                    blocks = _block_ids(dims, strides, per_dim)
                    op = OP_DEFAULT
                else:
                    blocks = all_blocks
                    op = int(pats[i].ops[k][j])
                if not len(blocks):
                    continue
                chunk = (blocks[:, None] * cpn + jj[None, :]).ravel()
                n = len(chunk)
                dst = r + (int(dst_a[j]) - int(src_a[j])) * int(strides[i])
                cols["chunk"].append(chunk)
                cols["src"].append(np.full(n, r))
                cols["dst"].append(np.full(n, dst))
                cols["step"].append(np.full(n, step))
                cols["lo"].append(np.full(n, c))
                cols["op"].append(np.full(n, op, np.int8))
    cat = {k: np.concatenate(v) if v else np.zeros(0, np.int64) for k, v in cols.items()}
    lo = cat["lo"].astype(np.int64)
    return from_arrays(
        kind, p, p * cpn, chunk=cat["chunk"], src=cat["src"], dst=cat["dst"], step=cat["step"],
        lo=lo, hi=lo + 1, denom=ncoll, op=cat["op"].astype(np.int8), routing="shortest-path",
        meta={"algorithm": pl.algorithm, "variant": pl.variant, "collectives": ncoll, "dims": dims},
    )


def reduce_scatter(pl: Plan, chunks_per_node: int = 1) -> Schedule:
    """Bandwidth-optimal reduce-scatter of a ``bw`` plan (section 3.1.1, Listing 1)."""
    if pl.variant != "bw":
        raise ValueError("reduce_scatter needs a bandwidth-optimal plan")
    if pl.allreduce_only:
        raise ValueError("this plan was built for an allreduce (kind='allreduce'); build it with "
                         "kind='reduce_scatter' for a reduce-scatter or allgather")
    return _expand(pl, chunks_per_node, "reduce_scatter")


def allgather(pl: Plan, chunks_per_node: int = 1) -> Schedule:
    """The allgather: the reduce-scatter's mirror image in time (section 3.1.1)."""
    ag = reverse(reduce_scatter(pl, chunks_per_node))
    return ag


def allreduce(pl: Plan, chunks_per_node: int = 1) -> Schedule:
    """Allreduce: reduce-scatter then allgather (``bw``), or whole vectors each step (``lat``)."""
    if pl.variant == "lat":
        return _expand(pl, chunks_per_node, "allreduce")
    rs = _expand(pl, chunks_per_node, "reduce_scatter")
    out = concat(rs, reverse(rs), "allreduce")
    object.__setattr__(out, "meta", dict(rs.meta))
    return out


def message_schedule(pl: Plan, kind: str) -> tuple[Messages, int]:
    """Messages of the whole collective ``kind`` with step numbers of the full run, and the
    number of steps (allreduce ``bw``: the reduce-scatter then its mirror)."""
    if pl.variant == "lat":
        m = messages(pl)
        return m, pl.num_steps
    rs = messages(pl)
    T = pl.num_steps
    ag = replace(rs, step=T + 1 - rs.step, src=rs.dst, dst=rs.src)
    if kind == "reduce_scatter":
        return rs, T
    if kind == "allgather":
        return ag, T
    cols = ("step", "src", "dst", "blocks", "coll", "op")
    both = Messages(**{k: np.concatenate([getattr(rs, k), getattr(ag, k) + (T if k == "step" else 0)]) for k in cols},
                    p=rs.p, ncoll=rs.ncoll)
    return both, 2 * T


# ---- closed forms (section 2.2 Eq. 1, Table 2, section 4) -----------------------------------------

def _dist_fn(algorithm: str):
    return delta if algorithm == "swing" else (lambda k: 1 << k)


def xi_table2(algorithm: str, variant: str, D: int, p: int | None = None) -> float:
    """Table 2's congestion deficiency of an algorithm on a square D-dimensional torus.

    ``p=None``: the printed value. Bandwidth-optimal: the p -> infinity limit of
    ``sum_s dist(sigma(s)) / 2^(s+1)`` (6/5, 28/27, 120/119 for Swing with D = 2, 3, 4;
    ``(2^D-1)/(2^D-2)`` for recursive doubling; infinite for D = 1). Latency-optimal:
    ``(4/3) D p^(1/D)`` (Swing) and ``2 D p^(1/D)`` (recursive doubling), as printed.

    ``p`` given: the same model for that p, in the per-step units this package measures
    (``Xi = T_B / T_B^free``): bandwidth-optimal ``sum_s dist(sigma(s)) / 2^(s+1)`` divided by
    ``sum_s 1 / 2^(s+1) = (p-1)/p``; latency-optimal the mean over the ``log2 p`` steps of
    ``dist(sigma(s))`` (the paper's ``D sum_s dist`` is this times ``D log2 p``, which Table 2
    also counts in Psi). ``dist`` is ``delta`` (Swing) or ``2^k`` (recursive doubling).
    """
    f = _dist_fn(algorithm)
    if p is None:
        if variant == "lat":
            return math.inf
        if D < 2:
            return math.inf
        if algorithm == "recursive_doubling":
            return (2 ** D - 1) / (2 ** D - 2)
        return float(xi_swing_limit(D))
    L = _log2ceil(p)
    if variant == "lat":
        return float(Fraction(sum(f(s // D) for s in range(L)), L))
    num = sum(Fraction(f(s // D), 2 ** (s + 1)) for s in range(L))
    den = sum(Fraction(1, 2 ** (s + 1)) for s in range(L))
    return float(num / den)


def xi_swing_limit(D: int) -> Fraction:
    """``lim_{p->inf} sum_s delta(floor(s/D)) / 2^(s+1)`` in closed form:
    ``(2^D - 1)/3 * (2/(2^D - 2) + 1/(2^D + 1))`` = 6/5, 28/27, 120/119 for D = 2, 3, 4.

    >>> [str(xi_swing_limit(D)) for D in (2, 3, 4)]
    ['6/5', '28/27', '120/119']
    """
    if D < 2:
        raise ValueError("the sum diverges on a 1D torus")
    q = 2 ** D
    return Fraction(q - 1, 3) * (Fraction(2, q - 2) + Fraction(1, q + 1))


def table2(algorithm: str, variant: str, D: int, p: int) -> dict:
    """Lambda, Psi and Xi of Table 2 for an algorithm on a D-dimensional torus of p nodes;
    ``Xi_p`` is :func:`xi_table2` at this p (per-step units), ``Xi_printed`` the printed
    latency-optimal bound."""
    lg = math.log2(p)
    if algorithm == "ring":
        return {"Lambda": 2 * p / lg, "Psi": 1.0, "Xi": 1.0, "Xi_p": 1.0}
    if algorithm == "bucket":
        return {"Lambda": 2 * D * p ** (1 / D) / lg, "Psi": 1.0, "Xi": 1.0, "Xi_p": 1.0}
    lam = 1.0 if variant == "lat" else 2.0
    if variant == "lat":
        psi = D * lg
        printed = (4 / 3 if algorithm == "swing" else 2.0) * D * p ** (1 / D)
    else:
        psi = 1.0 if algorithm == "swing" else 2.0 * D
        printed = xi_table2(algorithm, variant, D)
    return {"Lambda": lam, "Psi": psi, "Xi": printed, "Xi_p": xi_table2(algorithm, variant, D, p)}


def recursive_doubling_closed_form(p: int, kind: str = "allreduce") -> tuple[int, Fraction]:
    """Steps and bandwidth term (in vectors: T_B = value * n * beta) of bandwidth-optimal
    recursive doubling on ``p`` ranks with no congestion (De Sensi et al., NSDI 2024, Sections
    2.3.2-2.3.3; Rabenseifner).

    Power of two: reduce-scatter ``log2 p`` steps, ``(p-1)/p``; allreduce twice that. Otherwise,
    with ``p'`` the largest power of two below p and ``E = p - p'`` extras, the power-of-two cost
    is recursive halving on ``p'`` ranks whose block b carries blocks b and b + p', so its step
    k (0-based) sends at most ``p'/2^(k+1) + ceil(E/2^(k+1))`` blocks of ``1/p``; the allreduce
    adds 2 steps carrying the whole vector (the fold and the result going back): ``2 log2 p'
    + 2`` steps and ``2 + 2 core``; the reduce-scatter (and the allgather, its mirror) adds the
    fold of every block but the extra's own (``(p-1)/p``) and the extra's block coming back
    (``1/p``): ``log2 p' + 2`` steps and ``1 + core``.

    >>> recursive_doubling_closed_form(8), recursive_doubling_closed_form(3)
    ((6, Fraction(7, 4)), (4, Fraction(10, 3)))
    """
    if p < 1:
        raise ValueError("p must be positive")
    m = 1 << (p.bit_length() - 1)
    L = m.bit_length() - 1
    if m == p:
        steps, tb = L, Fraction(p - 1, p)
    else:
        E = p - m
        core = sum(Fraction(m // 2 ** (k + 1) + -(-E // 2 ** (k + 1)), p) for k in range(L))
        if kind == "allreduce":
            return 2 * L + 2, 2 + 2 * core
        steps, tb = L + 2, 1 + core
    return (2 * steps, 2 * tb) if kind == "allreduce" else (steps, tb)


def _step_distances(pl: Plan, T: int, kind: str) -> list[int]:
    """Largest ring distance between logical peers in every step of the run (1-based list)."""
    out = []
    rs_T = pl.num_steps
    for t in range(1, T + 1):
        tt = t
        if pl.variant == "bw" and kind == "allreduce" and t > rs_T:
            tt = 2 * rs_T + 1 - t
        elif pl.variant == "bw" and kind == "allgather":
            tt = rs_T + 1 - t
        worst = 0
        for pats, order in pl.collectives:
            i, k = order[tt - 1]
            src, dst, _ = pats[i].steps[k]
            d = pl.dims[i]
            diff = np.abs(dst - src) % d
            worst = max(worst, int(np.minimum(diff, d - diff).max()))
        out.append(worst)
    return out


def _pair_max_blocks(m: Messages, T: int) -> np.ndarray:
    """Per step (1..T), the most blocks any one (src, dst) pair carries in it."""
    out = np.zeros(T, dtype=np.int64)
    if not len(m.step):
        return out
    key = (m.step * m.p + m.src) * m.p + m.dst
    uk, inv = np.unique(key, return_inverse=True)
    tot = np.bincount(inv.ravel(), weights=m.blocks).astype(np.int64)
    np.maximum.at(out, uk // (m.p * m.p) - 1, tot)
    return out


def closed_form(dims: list[int], message_bytes: float, alpha: float, bandwidth: float, *,
                algorithm: str = "swing", variant: str = "bw", multiport: bool = True,
                mirrored: bool | None = None, kind: str = "allreduce", network: str = "torus") -> dict:
    """The paper's alpha-beta cost of the schedule :func:`plan` builds with these arguments.

    Eq. 1 step by step: step ``t`` costs ``alpha + bytes_t * beta * c_t`` where ``bytes_t`` is
    the step's largest message (Listing 1's block counts: ``n / (ncoll 2^(s+1))`` for a power
    of two p, ``n / ncoll`` for whole vectors) and ``c_t`` the paper's congestion factor: on a
    torus the distance between logical peers (``delta(sigma(s))`` for Swing, ``2^sigma(s)`` for
    recursive doubling: "the number of messages forwarded on the most congested link is equal
    to the distance", sections 2.3.2 and 4.1), 1 on a direct network (complete graph, HyperX).
    ``T_L = steps * alpha`` (Eq. 1 counts steps); ``T_L_hops_s`` charges ``alpha`` per hop of the
    longest route instead (what the shared sync model does). Table 2's Lambda/Psi/Xi and Eq. 1
    with them (``paper_total_s``) are returned beside it. Exact on congestion-free networks and
    on square power-of-two tori of side >= 4 with plain + mirrored collectives.
    """
    pl = plan(dims, algorithm, variant, multiport, mirrored, kind)
    p = math.prod(dims)
    m, T = message_schedule(pl, kind)
    dist = _step_distances(pl, T, kind)
    # the step's heaviest logical pair (collectives that pick the same peer share its link)
    pair_max = _pair_max_blocks(m, T)
    TB = Fraction(0)
    for t in range(1, T + 1):
        cong = max(dist[t - 1], 1) if network == "torus" else 1
        TB += Fraction(int(pair_max[t - 1]) * cong, p * pl.num_collectives)
    T_B = float(TB) * message_bytes / bandwidth
    T_L = T * alpha
    hops = sum(max(x, 1) for x in dist) if network == "torus" else T
    D = max(1, sum(1 for d in dims if d > 1))
    t2 = table2(algorithm, variant, D, p)
    share = 0.5 if (variant == "bw" and kind != "allreduce") else 1.0
    paper_T = share * (math.log2(p) * alpha * t2["Lambda"] + message_bytes / D / bandwidth * t2["Psi"] * t2["Xi_p"])
    return {
        "algorithm": algorithm, "variant": variant, "kind": kind, "dims": list(dims), "p": p,
        "collectives": pl.num_collectives, "network": network, "steps": T,
        "T_L_s": T_L, "T_L_hops_s": hops * alpha, "T_B_s": T_B, "total_s": T_L + T_B,
        "T_B_vectors": str(TB), "Lambda": t2["Lambda"], "Psi": t2["Psi"], "Xi": t2["Xi"],
        "Xi_p": t2["Xi_p"], "paper_total_s": paper_T,
    }


# ---- producers ---------------------------------------------------------------------------------

def _bool_param(options: Options, name: str, default):
    v = (options.params or {}).get(name, default)
    if isinstance(v, str):
        v = v.lower() in ("1", "true", "yes")
    return v


def _make_run(algorithm: str, variant: str, mirrored_default: bool | None):
    def run(instance: Instance, options: Options) -> Outcome:
        if instance.concurrent:
            raise Unsupported("one collective at a time")
        coll = instance.collective
        if coll.kind not in KINDS:
            raise Unsupported(f"{coll.kind} is not supported; allreduce, reduce_scatter or allgather only")
        if variant == "lat" and coll.kind != "allreduce":
            raise Unsupported("the latency-optimal variant is an allreduce (use the -bw producer for "
                              "reduce_scatter/allgather: it already takes ceil(log2 p) steps)")
        dims, network = rank_space(instance.topology, coll.nodes)
        if mirrored_default is None:  # Swing: 2D collectives on tori (section 4.1), one elsewhere
            multiport = _bool_param(options, "multiport", network == "torus")
            mirrored = _bool_param(options, "mirrored", multiport)
        else:  # recursive doubling: one port, or D plain + D mirrored (section 5.1)
            multiport = _bool_param(options, "multiport", mirrored_default)
            mirrored = _bool_param(options, "mirrored", mirrored_default)
        pl = plan(dims, algorithm, variant, multiport, mirrored, coll.kind)
        p = math.prod(dims)
        sends = pl.num_collectives * p * coll.chunks_per_node * (
            (p - 1) * (2 if coll.kind == "allreduce" else 1) if variant == "bw" else p * pl.num_steps)
        limit = int((options.params or {}).get("max_sends", MAX_SENDS))
        if sends > limit:
            raise Unsupported(
                f"the chunk-level schedule would have ~{sends:.2g} sends (> max_sends={limit}); price it "
                f"at message level with collsynth.solvers.reports.deficiency.measure instead")
        if coll.kind == "allreduce":
            sched = allreduce(pl, coll.chunks_per_node)
        elif coll.kind == "reduce_scatter":
            sched = reduce_scatter(pl, coll.chunks_per_node)
        else:
            sched = allgather(pl, coll.chunks_per_node)
        la = instance.topology.link_arrays
        cf = closed_form(dims, coll.message_bytes, float(la.alpha.max()), float((la.bandwidth / la.count).min()),
                         algorithm=algorithm, variant=variant, multiport=multiport, mirrored=mirrored,
                         kind=coll.kind, network=network)
        return Outcome(sched, Status.CONSTRUCTED, objective=sched.num_steps, units="steps",
                       extra={"closed_form": cf})
    return run


SUMMARIES = {  # producer name: [swing | recursive-doubling]-[bw | lat][-mirrored]
    "swing-bw": "Swing bandwidth-optimal allreduce/reduce-scatter/allgather (De Sensi et al., NSDI 2024; multiport on tori)",
    "swing-lat": "Swing latency-optimal allreduce, whole vector each step (De Sensi et al., NSDI 2024, Section 3.1.2; multiport on tori)",
    "recursive-doubling-bw": "Bandwidth-optimized recursive doubling (Rabenseifner, torus-ordered, one port; De Sensi et al., NSDI 2024, Section 2.3.3)",
    "recursive-doubling-lat": "Latency-optimal recursive doubling allreduce (torus-ordered, one port; De Sensi et al., NSDI 2024, Section 2.3.2)",
    "recursive-doubling-bw-mirrored": "Recursive doubling bandwidth-optimal with D plain + D mirrored collectives (De Sensi et al., NSDI 2024, Section 5.1)",
    "recursive-doubling-lat-mirrored": "Recursive doubling latency-optimal with D plain + D mirrored collectives (De Sensi et al., NSDI 2024, Section 4.1)",
}


def variant_of(name: str) -> tuple[str, str, bool | None]:
    """``(algorithm, variant, mirrored)`` of a producer name of :data:`SUMMARIES`; ``mirrored``
    is None for Swing, whose default depends on the network.

    >>> variant_of("swing-lat"), variant_of("recursive-doubling-bw-mirrored")
    (('swing', 'lat', None), ('recursive_doubling', 'bw', True))
    """
    algorithm = "swing" if name.startswith("swing-") else "recursive_doubling"
    variant = "lat" if "-lat" in name else "bw"
    return algorithm, variant, None if algorithm == "swing" else name.endswith("-mirrored")


PARAMS = (
    Param("multiport", bool, None, "2D collectives at once, one per port (default: Swing on a torus, and the -mirrored variants)"),
    Param("mirrored", bool, None, "half of the collectives mirrored (default: as multiport)"),
    Param("max_sends", int, MAX_SENDS, "refuse chunk-level schedules with more sends than this", low=1),
)
PRODUCERS = [Producer(name, "closed-form", _make_run(*variant_of(name)), summary, params=PARAMS)
             for name, summary in SUMMARIES.items()]
