"""Instance builders, hand-built schedules and hypothesis strategies shared by the test modules
(import them: ``from builders import instance_on, ring_allgather``; ``tests/`` is on the path).

The hand-built schedules are the lecture's (Thakur, Rabenseifner and Gropp, "Optimization of
collective communication operations in MPICH", IJHPCA 2005), written out send by send here so
that the code under test never produces its own expected output.
"""

from __future__ import annotations

import math
import random
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import strategies as st

from collsynth.instances import Instance
from collsynth.instances.generators import build
from collsynth.instances.instance import instance_from_dict, make_instance
from collsynth.instances.topology import from_edges
from collsynth.tens.schedule import from_arrays, from_sends

ALPHA, BW, M = 0.5e-6, 25e9, float(1 << 20)  # link latency (s), bandwidth (bytes/s), message (bytes)
QUICK_STORE = Path(__file__).resolve().parent.parent / "results" / "quick-store"  # the committed store


def stored(sql: str) -> list[tuple]:
    """Rows of the committed quick store's database by ``sql``, read straight from SQLite
    (independent of the library's own loading)."""
    con = sqlite3.connect(QUICK_STORE / "runs.sqlite")
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


# ---- instances -------------------------------------------------------------------------------

def instance_on(generator: str, params: dict[str, Any], kind: str = "allgather", *, bandwidth: float | None = None,
             alpha: float | None = None, **collective: Any) -> Instance:
    """A collective ``kind`` on the topology ``generator`` builds from ``params`` (link costs
    the instance defaults unless given); ``collective``: :func:`make_instance`'s keywords
    (``root``, ``chunks_per_node``, ``message_bytes``, ``nodes``)."""
    return make_instance(build(generator, params, bandwidth=bandwidth, alpha=alpha), kind, **collective)


def one_way_ring(n: int, kind: str = "allgather", **collective: Any) -> Instance:
    """``kind`` on the unidirectional ring of ``n`` nodes (i -> i+1 only)."""
    return instance_on("ring", {"nodes": n, "bidirectional": False}, kind, **collective)


def from_table(topology: dict[str, Any], collective: dict[str, Any] | None = None, name: str = "t",
               **more: Any) -> Instance:
    """An instance from the tables an instance file holds: ``[topology]``, ``[collective]``
    (default: an allgather) and any other top-level keys (``more``)."""
    return instance_from_dict({"name": name, "topology": topology,
                               "collective": collective or {"kind": "allgather"}, **more})


# ---- the lecture's schedules (Thakur et al., IJHPCA 2005) --------------------------------------

def ring_allgather(n: int):
    """Ring allgather: in step t node u forwards chunk (u - t + 1) mod n to u + 1."""
    t = np.repeat(np.arange(1, n), n)
    u = np.tile(np.arange(n), n - 1)
    return from_arrays("allgather", n, n, chunk=(u - t + 1) % n, src=u, dst=(u + 1) % n, step=t)


def recursive_doubling_allgather(n: int, routing: str = "links"):
    """Recursive doubling (butterfly): in step s node u sends its 2^(s-1) chunks to u xor 2^(s-1)."""
    k = int(math.log2(n))
    rows = []
    for s in range(1, k + 1):
        d = 1 << (s - 1)
        for u in range(n):
            base = u & ~(d - 1)
            rows += [(c, 0, 1, u, u ^ d, s) for c in range(base, base + d)]
    return from_sends(rows, "allgather", n, n, routing=routing)


def binomial_broadcast(n: int):
    """Binomial tree broadcast from 0: in step s nodes u < 2^(s-1) send to u + 2^(s-1)."""
    k = int(math.log2(n))
    rows = [(0, 0, 1, u, u + (1 << (s - 1)), s) for s in range(1, k + 1) for u in range(1 << (s - 1))]
    return from_sends(rows, "broadcast", n, 1)


def greedy_allgather(topo, rng: random.Random, per_link: int = 1):
    """A random valid allgather: each step every link forwards up to ``per_link`` random chunks
    its source holds and its destination lacks (and is not receiving in this step)."""
    n = topo.size
    la = topo.link_arrays
    holds = np.eye(n, dtype=bool)  # holds[chunk, node]
    rows, step = [], 0
    while not holds.all():
        step += 1
        incoming = holds.copy()
        pairs = list(range(len(la)))
        rng.shuffle(pairs)
        for p in pairs:
            u, v = int(la.src[p]), int(la.dst[p])
            cand = np.flatnonzero(holds[:, u] & ~incoming[:, v]).tolist()
            rng.shuffle(cand)
            for c in cand[: per_link * int(la.count[p])]:
                rows.append((c, 0, 1, u, v, step))
                incoming[c, v] = True
        holds = incoming
    return from_sends(rows, "allgather", n, n)


# ---- hypothesis strategies ---------------------------------------------------------------------

@st.composite
def strongly_connected_arcs(draw, lo: int, hi: int, max_extra: int = 0, extra_per_node: int = 0,
                            shuffled: bool = True) -> tuple[int, list]:
    """``(n, arcs)``: ``lo``..``hi`` nodes, a Hamiltonian cycle (over a random order when
    ``shuffled``, else 0 -> 1 -> ... -> 0) that makes the digraph strongly connected, then up
    to ``max_extra + extra_per_node * n`` random arcs (no self-loops; an arc drawn twice is
    listed twice: callers wanting simple digraphs take the set)."""
    n = draw(st.integers(lo, hi))
    order = draw(st.permutations(range(n))) if shuffled else list(range(n))
    most = max_extra + extra_per_node * n
    extra = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=most))
    return n, [(order[i], order[(i + 1) % n]) for i in range(n)] + [(u, v) for u, v in extra if u != v]


@st.composite
def topologies(draw, max_nodes: int = 7):
    """Random strongly connected digraphs: a directed ring plus random extra links (repeats
    are parallel links), with the base costs on every link or mixed ones."""
    n, edges = draw(strongly_connected_arcs(3, max_nodes, extra_per_node=2, shuffled=False))
    hetero = draw(st.booleans())
    rnd = draw(st.randoms(use_true_random=False))
    out = []
    for u, v in edges:
        bw = BW * (rnd.choice([1, 2, 4]) if hetero else 1)
        a = ALPHA * (rnd.choice([1, 3]) if hetero else 1)
        out.append((u, v, {"bandwidth": bw, "alpha": a}))
    return from_edges(n, out, name="random")
