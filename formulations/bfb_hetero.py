"""Heterogeneous BFB (Zhao et al., NSDI 2025, Appendix D.3, LP (13)): per-link latency and bandwidth.

For node ``u`` and step ``t`` (sources, in-neighbours and admissible pairs as in LP (3)) the
step time of ``u``'s in-links is ``alpha_l + load_l / b_l`` (load in bytes: shares times the
shard size); LP (13) minimises its largest value::

    minimise   tau
    subject to sum_w x[v, w] = 1                                     (eq_share)
               tau >= alpha[w] + shard_bytes * sum_v x[v, w] / b[w]  (ineq_link_time)
               x >= 0

``alpha[w]`` and ``b[w]`` belong to the directed pair ``w -> u`` (its parallel links' summed
bandwidth and their latency). A link with no admissible pair carries nothing and has no row.
The schedule's time is the sum over steps of the largest ``tau`` over nodes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyomo.core as pe

from ..instances.instance import Instance
from ..instances.topology import Topology
from ..tens.schedule import Schedule
from .bfb_lp import StepLP, pieces_schedule, rationalize, step_data, step_sets, values

NAME = "bfb-hetero"


def build(instance: Instance | Topology, horizon: int | None = None, state: Any = None, *, node: int = 0,
          step: int = 1, message_bytes: float | None = None, data: StepLP | None = None, **params) -> pe.ConcreteModel:
    """LP (13) for ``(node, step)``; link costs from the topology, shard = M / N."""
    topo = instance.topology if isinstance(instance, Instance) else instance
    if message_bytes is None:
        message_bytes = instance.collective.message_bytes if isinstance(instance, Instance) else 1.0
    if data is None:
        data = step_data(topo, node, step)
    la = topo.link_arrays
    sel = la.dst == node
    return build_step(data, la.alpha[sel], la.bandwidth[sel], float(message_bytes) / len(topo.npus))


def build_step(data: StepLP, alpha, bandwidth, shard_bytes: float) -> pe.ConcreteModel:
    """The Pyomo model of LP (13) (Zhao et al., NSDI 2025, Appendix D.3) for one :class:`StepLP`.

    ``alpha`` and ``bandwidth`` are per neighbour."""
    m = pe.ConcreteModel(name=f"bfb-hetero u={data.node} t={data.step}")
    # SETS
    nb, by_v, by_w = step_sets(m, data)
    # PARAMETERS
    m.alpha = pe.Param(m.NEIGHBOURS, initialize=dict(zip(nb, np.asarray(alpha, float).tolist())), doc="latency of w -> u (s)")
    m.bandwidth = pe.Param(m.NEIGHBOURS, initialize=dict(zip(nb, np.asarray(bandwidth, float).tolist())),
                           doc="bandwidth of w -> u (bytes/s, parallel links summed)")
    m.shard_bytes = pe.Param(initialize=float(shard_bytes), doc="bytes of one shard (M/N)")
    # VARIABLES
    m.x = pe.Var(m.PAIRS, domain=pe.NonNegativeReals, bounds=(0, 1), doc="share of v's shard that w forwards to u")
    m.tau = pe.Var(domain=pe.NonNegativeReals, doc="step time of u's slowest in-link (s)")
    # CONSTRAINTS
    m.eq_share = pe.Constraint(m.SOURCES, rule=lambda m, v: sum(m.x[p] for p in by_v[v]) == 1,
                               doc="u receives all of v's shard")
    scale = 1e6  # seconds -> microseconds keeps the LP well scaled
    m.ineq_link_time = pe.Constraint(
        m.NEIGHBOURS,
        rule=lambda m, w: (scale * m.tau >= scale * m.alpha[w]
                           + scale * m.shard_bytes / m.bandwidth[w] * sum(m.x[p] for p in by_w[w]))
        if by_w[w] else pe.Constraint.Skip,
        doc="tau at least alpha_l + load_l / b_l for every used in-link")
    m.obj = pe.Objective(expr=scale * m.tau, sense=pe.minimize, doc="minimise u's step time (us)")
    m._bfb_data = data
    return m


def bound(model: pe.ConcreteModel) -> float | None:
    """The optimal step time tau (s) of the solved LP."""
    return None if model.tau.value is None else float(model.tau.value)


def extract(model: pe.ConcreteModel, nodes: int | None = None) -> Schedule:
    """The sends of this ``(u, t)`` with exact rational shares (as LP (3)'s extract)."""
    data: StepLP = model._bfb_data
    v, w, x = values(model)
    num, den = rationalize(data.pair_v, x)
    n = int(nodes if nodes is not None else max([data.node, *data.sources.tolist(), *data.neighbours.tolist()]) + 1)
    return pieces_schedule(v, w, np.full(len(v), data.node), np.full(len(v), data.step), num, den, n)
