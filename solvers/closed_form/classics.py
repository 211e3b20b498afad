"""Classic collective algorithms as constructed schedules with their closed-form costs.

The algorithms of the alpha-beta literature (Thakur, Rabenseifner and Gropp, IJHPCA 2005; Chan
et al., CCPE 2007: ring, binary and binomial trees, butterfly / recursive doubling, recursive
halving, scatter + allgather broadcast), NCCL's double binary tree, MPI's
Bruck and Rabenseifner algorithms, the bucket algorithm on D-dimensional tori, rings on
edge-disjoint Hamiltonian cycles of 2D tori, and the BFB ring of Zhao et al., NSDI 2025, Appendix E.1.

Every algorithm is declared once, as a :class:`Classic` record in :data:`CLASSICS`: its
schedule (a plain function ``<name>_schedule(instance) -> Schedule`` working on the
collective's participants in rank order, logical rank ``r`` being node ``nodes[r]``, built from
the phases of :mod:`.phases`), its paper's alpha-beta cost and a one-line summary with the
reference. ``closed_form(name, kind, p, ...)`` gives that cost: the number of steps
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

from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import numpy as np

from ...instances import Instance
from ...tens.schedule import OP_COPY, OP_DEFAULT, OP_REDUCE, Schedule
from ..producers import Outcome, Producer, Unsupported
from .phases import (constructed, ALL, Phase, bfb_ring_allgather_phase, binary_tree_broadcast_phase,
                     binomial_broadcast_phase, binomial_scatter_phase, bruck_allgather_phase, build,
                     bucket_allgather_phase, chain_broadcast_phase, direct_phase,
                     doubling_allgather_phase, double_tree_phases, rabenseifner_core,
                     ring_allgather_phase, ring_reduce_scatter_phase, torus_dims,
                     torus_hamiltonian_decomposition, undirected_edges)

F = Fraction
RS_AG_AR = ("allgather", "reduce_scatter", "allreduce")


@dataclass(frozen=True)
class Classic:
    """One classic algorithm, declared once: its schedule, its closed-form cost, its summary.

    ``cost(kind, p, dims)`` gives ``(steps, chunk_units)`` for one chunk per shard: the number
    of steps and the exact sum over steps of the largest per-link load in chunk units (chunk =
    M/p, or M for broadcast/reduce), allreduce included.
    """

    name: str
    schedule: Callable[[Instance], Schedule]
    cost: Callable[[str, int, list | None], tuple[int, Fraction]]
    summary: str


CLASSICS: dict[str, Classic] = {}  # every classic algorithm by name, in declaration order


def declare(name: str, schedule, cost, summary: str) -> None:
    """Add the classic algorithm ``name`` to :data:`CLASSICS`."""
    CLASSICS[name] = Classic(name, schedule, cost, summary)


# ---- shared pieces ----------------------------------------------------------------------

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


def _rs_ag_ar(instance: Instance, name: str, ag: Phase, rs: Phase | None = None) -> Schedule:
    """Allgather phase ``ag``; reduce-scatter ``rs`` (default: ``ag`` reversed); allreduce both."""
    kind = instance.collective.kind
    rs = ag.reversed() if rs is None else rs
    if kind == "allgather":
        return build(instance, [(ag, OP_DEFAULT)], name=name)
    if kind == "reduce_scatter":
        return build(instance, [(rs, OP_DEFAULT)], name=name)
    return build(instance, [(rs, OP_REDUCE), (ag, OP_COPY)], name=name)


def _phases(kind: str, steps: int, units: Fraction) -> tuple[int, Fraction]:
    """A one-phase cost, doubled for allreduce (reduce-scatter then allgather)."""
    return (2 * steps, 2 * units) if kind == "allreduce" else (steps, units)


def _log2c(p: int) -> int:
    return (p - 1).bit_length()


def _merge(parts: list[tuple[Phase, Phase]], denom: int) -> tuple[Phase, Phase]:
    """Allgather and reduce-scatter phases run side by side on pieces over ``denom``."""
    ag, rs = Phase(denom), Phase(denom)
    for a, r in parts:
        ag.cols += a.cols
        rs.cols += r.cols
        ag.steps, rs.steps = max(ag.steps, a.steps), max(rs.steps, r.steps)
    return ag, rs


# ---- ring ----------------------------------------------------------------------------------

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


def _ring_cost(kind: str, p: int, dims) -> tuple[int, Fraction]:
    """(p-1)(alpha + M/p beta) per phase; chain broadcast/reduce (p-1)(alpha + M beta)."""
    return _phases(kind, p - 1, F(p - 1))


declare("ring", ring_schedule, _ring_cost,
        "ring allgather/reduce-scatter/allreduce, chain broadcast/reduce (Thakur et al., IJHPCA 2005, NCCL)")

# ---- bidirectional ring --------------------------------------------------------------------

def bidirectional_ring_schedule(instance: Instance) -> Schedule:
    """Half of every chunk goes clockwise, half counter-clockwise (Zhao et al., NSDI 2025, Appendix E.1's baseline)."""
    coll, p = _single(instance)
    _need(coll.kind, RS_AG_AR, "bidirectional-ring")
    cw, ccw = np.arange(p), np.arange(p)[::-1]
    ag, rs = _merge([(ring_allgather_phase(order, 2, lo, hi), ring_reduce_scatter_phase(order, 2, lo, hi))
                     for order, (lo, hi) in ((cw, (0, 1)), (ccw, (1, 2)))], 2)
    return _rs_ag_ar(instance, "bidirectional-ring", ag, rs)


def _bidirectional_ring_cost(kind: str, p: int, dims) -> tuple[int, Fraction]:
    """Half of the ring's bandwidth term (p = 2: both directions are the one link 0 -> 1)."""
    return _phases(kind, p - 1, F(p - 1, 2) if p > 2 else F(1))


declare("bidirectional-ring", bidirectional_ring_schedule, _bidirectional_ring_cost,
        "half of each chunk each way round the ring")

# ---- BFB ring ------------------------------------------------------------------------------

def bfb_ring_schedule(instance: Instance) -> Schedule:
    """BFB ring (Zhao et al., NSDI 2025, Appendix E.1): floor(p/2) steps per phase, bandwidth-optimal."""
    coll, p = _single(instance)
    _need(coll.kind, RS_AG_AR, "bfb-ring")
    return _rs_ag_ar(instance, "bfb-ring", bfb_ring_allgather_phase(np.arange(p)))


def _bfb_ring_cost(kind: str, p: int, dims) -> tuple[int, Fraction]:
    """floor(p/2) steps per phase, the bidirectional ring's bandwidth term (Zhao et al., NSDI 2025, E.1)."""
    return _phases(kind, p // 2, F(p - 1, 2) if p > 2 else F(1))


declare("bfb-ring", bfb_ring_schedule, _bfb_ring_cost,
        "BFB ring: half the steps of the ring, bandwidth-optimal (Zhao et al., NSDI 2025, E.1)")

# ---- direct --------------------------------------------------------------------------------

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


def _direct_cost(kind: str, p: int, dims) -> tuple[int, Fraction]:
    """One step (two for allreduce), one chunk on every link."""
    return _phases(kind, 1, F(1))


declare("direct", direct_schedule, _direct_cost,
        "one step straight to every peer (shortest-path unless complete)")

# ---- binary tree ---------------------------------------------------------------------------

def binary_tree_schedule(instance: Instance) -> Schedule:
    """Binary tree broadcast and reduce (its reversal), left child first (Thakur et al., IJHPCA 2005)."""
    coll, p = _single(instance)
    _need(coll.kind, ("broadcast", "reduce"), "binary-tree")
    ph = binary_tree_broadcast_phase(p, _root_rank(coll))
    if coll.kind == "reduce":
        ph = ph.reversed()
    return build(instance, [(ph, OP_DEFAULT)], name="binary-tree")


def _binary_tree_cost(kind: str, p: int, dims) -> tuple[int, Fraction]:
    """Left child first: the deepest arrival, 2(h-1) steps for p = 2^h - 1 (the lecture's 2 log p)."""
    arrive = [0] * p
    for i in range(1, p):
        arrive[i] = arrive[(i - 1) // 2] + (1 if i % 2 else 2)
    steps = max(arrive)
    return steps, F(steps)


declare("binary-tree", binary_tree_schedule, _binary_tree_cost,
        "binary tree broadcast/reduce, 2 log p steps (Thakur et al., IJHPCA 2005)")

# ---- binomial tree -------------------------------------------------------------------------

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


def _binomial_tree_cost(kind: str, p: int, dims) -> tuple[int, Fraction]:
    """ceil(log p)(alpha + M beta) for broadcast/reduce; ceil(log p) alpha + (p-1)/p M beta for scatter/gather."""
    steps = _log2c(p)
    return steps, F(steps) if kind in ("broadcast", "reduce") else F(p - 1)


declare("binomial-tree", binomial_tree_schedule, _binomial_tree_cost,
        "binomial tree broadcast/reduce/scatter/gather (Thakur et al., IJHPCA 2005)")

# ---- double binary tree --------------------------------------------------------------------

def double_binary_tree_schedule(instance: Instance) -> Schedule:
    """NCCL double binary tree allreduce (Sanders et al., Parallel Computing 2009): two
    complementary trees, each half of the data."""
    coll, p = _single(instance)
    _need(coll.kind, ("allreduce",), "double-binary-tree")
    up, down = double_tree_phases(p)
    return build(instance, [(up, OP_REDUCE), (down, OP_COPY)], name="double-binary-tree")


def _double_binary_tree_cost(kind: str, p: int, dims) -> tuple[int, Fraction]:
    """2 ceil(log p)(alpha + M/2 beta) for the whole allreduce (Sanders et al., Parallel Computing 2009)."""
    steps = 2 * _log2c(p)
    return steps, F(steps * p, 2)


declare("double-binary-tree", double_binary_tree_schedule, _double_binary_tree_cost,
        "NCCL double binary tree allreduce (two complementary trees)")

# ---- recursive doubling and halving --------------------------------------------------------

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


def _doubling_cost(kind: str, p: int, dims) -> tuple[int, Fraction]:
    """log p alpha + (p-1)/p M beta per phase; p' = 2^floor(log p) and two extra steps otherwise."""
    pp = 1 << (p.bit_length() - 1)
    e = p - pp
    core = sum((1 << s) + min(1 << s, e) for s in range(pp.bit_length() - 1))
    return _phases(kind, pp.bit_length() - 1 + (2 if e else 0), F(core + (p if e else 0)))


declare("recursive-doubling", recursive_doubling_schedule, _doubling_cost,
        "butterfly / recursive doubling allgather, halving reduce-scatter")


declare("recursive-halving", recursive_halving_schedule, _doubling_cost,
        "recursive halving reduce-scatter (recursive doubling reversed)")

# ---- Rabenseifner --------------------------------------------------------------------------

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


def _rabenseifner_cost(kind: str, p: int, dims) -> tuple[int, Fraction]:
    """2 log p alpha + 2 (p-1)/p M beta (p' = 2^floor(log p) and two extra full exchanges otherwise)."""
    pp = 1 << (p.bit_length() - 1)
    e = p - pp
    L = pp.bit_length() - 1
    core = sum((1 << s) + min(1 << s, e) for s in range(L))
    return 2 * L + (2 if e else 0), F(2 * core + (2 * p if e else 0))


declare("rabenseifner", rabenseifner_schedule, _rabenseifner_cost,
        "Rabenseifner allreduce: halving reduce-scatter + doubling allgather")

# ---- Bruck ---------------------------------------------------------------------------------

def bruck_schedule(instance: Instance) -> Schedule:
    """Bruck allgather (Bruck et al., TPDS 1997) and its reversal, a reduce-scatter: ceil(log2 p)
    steps for any p."""
    coll, p = _single(instance)
    _need(coll.kind, RS_AG_AR, "bruck")
    return _rs_ag_ar(instance, "bruck", bruck_allgather_phase(p))


def _bruck_cost(kind: str, p: int, dims) -> tuple[int, Fraction]:
    """ceil(log p) alpha + (p-1)/p M beta per phase (Bruck et al., TPDS 1997)."""
    return _phases(kind, _log2c(p), F(p - 1))


declare("bruck", bruck_schedule, _bruck_cost, "Bruck allgather, ceil(log2 p) steps for any p")

# ---- scatter + allgather broadcast ---------------------------------------------------------

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


def _scatter_allgather_cost(kind: str, p: int, dims) -> tuple[int, Fraction]:
    """(log p + p - 1) alpha + 2 (p-1)/p M beta (Chan et al., CCPE 2007)."""
    return _log2c(p) + p - 1, F(2 * (p - 1), p)


declare("scatter-allgather", scatter_allgather_schedule, _scatter_allgather_cost,
        "van de Geijn broadcast = scatter + ring allgather")

# ---- bucket --------------------------------------------------------------------------------

def bucket_schedule(instance: Instance) -> Schedule:
    """Bucket algorithm on a D-dimensional torus (concurrent rings per dimension, data split
    over 2D parts; De Sensi et al., NSDI 2024, Section 2.3.4); allgather, reduce-scatter
    (reversal) and allreduce."""
    coll, p = _single(instance)
    _need(coll.kind, RS_AG_AR, "bucket")
    dims = torus_dims(instance)
    return _rs_ag_ar(instance, "bucket", bucket_allgather_phase(dims))


def _bucket_cost(kind: str, p: int, dims) -> tuple[int, Fraction]:
    """D(n-1) alpha + (N-1)/(2 D N) M beta per phase on an n^D torus (De Sensi et al., NSDI 2024, 2.3.4)."""
    dims = list(dims or [p])
    return _phases(kind, sum(n - 1 for n in dims), F(p - 1, 2 * len(dims)))


declare("bucket", bucket_schedule, _bucket_cost,
        "bucket algorithm on D-dim tori: 2D concurrent rings per dimension")

# ---- Hamiltonian rings ---------------------------------------------------------------------

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
    assert not (undirected_edges(h1) & undirected_edges(h2))
    rings = [h1, h1[::-1], h2, h2[::-1]]
    ag, rs = _merge([(ring_allgather_phase(order, 4, q, q + 1), ring_reduce_scatter_phase(order, 4, q, q + 1))
                     for q, order in enumerate(rings)], 4)
    return _rs_ag_ar(instance, "hamiltonian-rings", ag, rs)


def _hamiltonian_rings_cost(kind: str, p: int, dims) -> tuple[int, Fraction]:
    """2(N-1)(alpha + M/(4N) beta) for allreduce on an n x n torus (De Sensi et al., NSDI 2024, 2.3.1)."""
    return _phases(kind, p - 1, F(p - 1, 4))


declare("hamiltonian-rings", hamiltonian_rings_schedule, _hamiltonian_rings_cost,
        "allreduce on two edge-disjoint Hamiltonian cycles of an n x n torus")

def closed_form(name: str, kind: str, p: int, *, c: int = 1, message_bytes: float = 1.0,
                alpha: float = 0.0, bandwidth: float = 1.0, dims: list[int] | None = None) -> dict:
    """The alpha-beta cost of the classic algorithm ``name`` for collective ``kind`` on p ranks.

    Returns ``steps`` (T_L = steps * alpha), ``T_B_chunks`` (exact: sum over steps of the
    largest per-link load in chunk units, chunk = M/(p c), or M/c for broadcast/reduce), and
    ``T_L_s``, ``T_B_s``, ``total_s``; each algorithm's formula and paper are on its cost
    function in :data:`CLASSICS` (Thakur et al., IJHPCA 2005 unless noted there).

    >>> closed_form("ring", "allreduce", 4, c=2)["T_B_chunks"]
    Fraction(12, 1)
    """
    if name not in CLASSICS:
        raise ValueError(f"no closed form for {name!r}")
    steps, units = CLASSICS[name].cost(kind, p, dims)
    ch = units * c
    chunk_bytes = message_bytes / c if kind in ("broadcast", "reduce") else message_bytes / (p * c)
    T_L = steps * alpha
    T_B = float(ch) * chunk_bytes / bandwidth
    return {"steps": steps, "T_B_chunks": ch, "T_L_s": T_L, "T_B_s": T_B, "total_s": T_L + T_B}


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


def _producer(classic: Classic) -> Producer:
    def run(instance: Instance, options) -> Outcome:
        sched = classic.schedule(instance)
        cf = closed_form_for(classic.name, instance)
        return constructed(sched, cf)

    return Producer(classic.name, "closed-form", run, classic.summary)


PRODUCERS = [_producer(c) for c in CLASSICS.values()]
