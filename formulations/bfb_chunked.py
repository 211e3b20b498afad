"""Chunked BFB (Zhao et al., NSDI 2025, Appendix D.2, IP (12)): integer shares out of K chunks per shard.

For node ``u`` and step ``t`` (sources, in-neighbours and admissible pairs as in LP (3),
:class:`collsynth.formulations.bfb_lp.StepLP`) choose how many of the ``K`` chunks of source
``v``'s shard each in-neighbour ``w`` forwards::

    minimise   U
    subject to sum_w y[v, w] = K                    for every source v       (eq_share)
               sum_v y[v, w] <= U * capacity[w]     for every in-neighbour w (ineq_link_load)
               y[v, w] in {0, .., K}

``U`` is in chunks. Solved exactly (a small MIP) or through its LP relaxation rounded by
:func:`round_relaxation`: every row keeps its sum K and every column load rises by less than one
chunk, so each step costs less than ``1/K`` shard more per link (Appendix D.2, Theorem 20).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyomo.core as pe

from ..instances.instance import Instance
from ..instances.topology import Topology
from ..tens.schedule import Schedule, from_arrays
from .bfb_lp import StepLP, consecutive_shares, share_and_load_rows, step_data, step_sets

NAME = "bfb-chunked"


def build(instance: Instance | Topology, horizon: int | None = None, state: Any = None, *, node: int = 0,
          step: int = 1, chunks: int | None = None, relax: bool = False, data: StepLP | None = None,
          **params) -> pe.ConcreteModel:
    """IP (12) for ``(node, step)``; ``chunks`` (K) defaults to the instance's chunks_per_node."""
    topo = instance.topology if isinstance(instance, Instance) else instance
    if chunks is None:
        chunks = instance.collective.chunks_per_node if isinstance(instance, Instance) else 1
    if data is None:
        data = step_data(topo, node, step)
    return build_step(data, int(chunks), relax=relax)


def build_step(data: StepLP, chunks: int, relax: bool = False) -> pe.ConcreteModel:
    """The Pyomo model of IP (12) (or its LP relaxation) for one :class:`StepLP`."""
    K = int(chunks)
    m = pe.ConcreteModel(name=f"bfb-chunked u={data.node} t={data.step} K={K}")
    # SETS
    nb, by_v, by_w = step_sets(m, data)
    # PARAMETERS
    m.K = pe.Param(initialize=K, doc="chunks per shard")
    m.capacity = pe.Param(m.NEIGHBOURS, initialize=dict(zip(nb, data.capacity.tolist())), doc="parallel links w -> u")
    # VARIABLES
    m.y = pe.Var(m.PAIRS, domain=pe.NonNegativeReals if relax else pe.NonNegativeIntegers, bounds=(0, K),
                 doc="chunks of v's shard that w forwards to u")
    m.U = pe.Var(domain=pe.NonNegativeReals, doc="largest load of one link into u (chunks)")
    # CONSTRAINTS
    share_and_load_rows(m, m.y, by_v, by_w, whole=m.K, unit="chunk")
    m._bfb_data = data
    m._bfb_relax = relax
    return m


def integer_shares(model: pe.ConcreteModel) -> np.ndarray:
    """The solved integer ``y`` in pair order (rounded to the nearest integer)."""
    return np.array([int(round(model.y[p].value or 0.0)) for p in model.PAIRS], np.int64)


def bound(model: pe.ConcreteModel) -> float | None:
    """The solved U (chunks); for the relaxation, a lower bound on IP (12)."""
    return None if model.U.value is None else float(model.U.value)


def round_relaxation(model: pe.ConcreteModel) -> np.ndarray:
    """Integer shares from the solved relaxation, rounded as in Zhao et al., NSDI 2025, Appendix D.2, Theorem 20.

    Floors every ``y``, then distributes each source's missing chunks over its pairs with a
    fractional part by an integral max flow whose in-neighbour capacities are the ceilings of
    the fractional column remainders: every row sums to K and every link's load is below the
    relaxation's load plus one chunk.
    """
    import networkx as nx

    data: StepLP = model._bfb_data
    K = int(pe.value(model.K))
    y = np.array([max(0.0, model.y[p].value or 0.0) for p in model.PAIRS])
    y = np.where(np.abs(y - np.round(y)) < 1e-7, np.round(y), y)
    fl = np.floor(y).astype(np.int64)
    frac = y - fl
    nv, nw = len(data.sources), len(data.neighbours)
    row_missing = K - np.bincount(data.pair_v, weights=fl, minlength=nv).astype(np.int64)
    col_frac = np.bincount(data.pair_w, weights=frac, minlength=nw)
    g = nx.DiGraph()
    for i in range(nv):
        if row_missing[i] > 0:
            g.add_edge("s", ("v", i), capacity=int(row_missing[i]))
    for j, (i, k) in enumerate(zip(data.pair_v.tolist(), data.pair_w.tolist())):
        if frac[j] > 1e-9:
            g.add_edge(("v", i), ("w", k, j), capacity=1)
            g.add_edge(("w", k, j), ("w", k), capacity=1)
    for k in range(nw):
        g.add_edge(("w", k), "t", capacity=int(math.ceil(col_frac[k] - 1e-9)))
    need = int(row_missing.sum())
    if need == 0:
        return fl
    value, flow = nx.maximum_flow(g, "s", "t")
    if value != need:  # cannot happen for a feasible relaxation; keep rows exact anyway
        for i in range(nv):
            if row_missing[i] > 0:
                js = np.flatnonzero(data.pair_v == i)
                fl[js[np.argmax(frac[js])]] += row_missing[i]
        return fl
    out = fl.copy()
    for j, (i, k) in enumerate(zip(data.pair_v.tolist(), data.pair_w.tolist())):
        if frac[j] > 1e-9 and flow.get(("v", i), {}).get(("w", k, j), 0):
            out[j] += 1
    return out


def chunk_schedule(v, w, u, t, y, K: int, nodes: int) -> Schedule:
    """Whole-chunk allgather sends: ``w -> u`` carries ``y`` of the ``K`` chunks of ``v``'s shard.

    The chunks of one (source, receiver) are numbered consecutively in neighbour order (chunk
    ids ``v*K + j``), so they cover the shard exactly once when the shares sum to K.
    """
    (v, w, u, t, k), start = consecutive_shares(v, w, u, t, y)
    rep = np.repeat(np.arange(len(v)), k)
    j = np.arange(len(rep)) - np.repeat(np.cumsum(k) - k, k) + start[rep]
    return from_arrays("allgather", nodes, nodes * K, chunk=v[rep] * K + j, src=w[rep], dst=u[rep], step=t[rep])


def extract(model: pe.ConcreteModel, nodes: int | None = None) -> Schedule:
    """The whole-chunk sends of this ``(u, t)`` (a solved relaxation is rounded first)."""
    data: StepLP = model._bfb_data
    y = round_relaxation(model) if model._bfb_relax else integer_shares(model)
    K = int(pe.value(model.K))
    n = int(nodes if nodes is not None else max([data.node, *data.sources.tolist(), *data.neighbours.tolist()]) + 1)
    v = data.sources[data.pair_v]
    w = data.neighbours[data.pair_w]
    return chunk_schedule(v, w, np.full(len(v), data.node), np.full(len(v), data.step), y, K, n)
