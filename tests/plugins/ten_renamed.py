"""A TEN ILP written apart from ``ten_ilp``, with its own component names: the contract's test subject.

The TACOS ILP (Won et al., TACOS, 2023, Section V-A) without any of ``ten_ilp``'s
pruning: ``y_have[c, n, t]`` (node ``n`` has chunk ``c`` at the end of timestep ``t``) for
every pair not held at the start and every timestep, ``x_send[c, l, t]`` (chunk ``c`` crosses
link pair ``l``, arriving at the end of ``t``) for every pair whose destination lacks the chunk
and every arrival the link's delay allows. Only the arrivals objective; ``lookahead`` is
accepted and ignored (time clustering then relies on recovery when a window cannot progress).
Everything the drivers read goes through :func:`collsynth.formulations.expose`; every other
capability is the contract's default. Loaded as a producer plug-in through
``COLLSYNTH_PRODUCERS=ten_renamed`` (this folder on the path).
"""

from __future__ import annotations

import sys

import numpy as np
import pyomo.environ as pe

from collsynth.formulations import TenModel, expose, ten_model
from collsynth.solvers.ten.formulation_producers import producer
from collsynth.tens.ten import NotSupported, prepare, prune, schedule_from_rows

NAME = "test-ten-renamed"
DRIVER_FAMILY = "ten"


def build(instance, horizon, state=None, *, objective="arrivals", lookahead=0, timestep=None, **params):
    """The unpruned TACOS ILP over ``horizon`` timesteps, from ``state`` if given."""
    if params or objective != "arrivals":
        raise NotSupported(f"only the arrivals objective and no parameters, got {objective!r}, {sorted(params)}")
    data = prepare(instance, horizon, state, timestep)
    T = data.horizon
    C, S = data.pre.shape
    k = data.delay[data.group]  # [chunk, pair] timesteps on the link
    have_idx = [(c, n, t) for c in range(C) for n in range(S) if not data.pre[c, n] for t in range(1, T + 1)]
    send_idx = [(c, l, t) for c in range(C) for l in range(len(data.src)) if not data.pre[c, data.dst[l]]
                for t in range(int(k[c, l]), T + 1)]
    m = pe.ConcreteModel(name=f"{NAME}:{instance.name}:T={T}")
    m.y_have = pe.Var(have_idx, domain=pe.Binary)
    m.x_send = pe.Var(send_idx, domain=pe.Binary)

    def have(c, n, t):
        if data.pre[c, n]:
            return 1
        return m.y_have[c, n, t] if t >= 1 else 0

    m.source_has_it = pe.Constraint(send_idx, rule=lambda m, c, l, t: m.x_send[c, l, t] <= have(c, int(data.src[l]), t - int(k[c, l])))
    inflow = {}
    for c, l, t in send_idx:
        inflow.setdefault((c, int(data.dst[l]), t), []).append(m.x_send[c, l, t])
    m.keeps_what_arrives = pe.Constraint(
        have_idx, rule=lambda m, c, n, t: m.y_have[c, n, t] == have(c, n, t - 1) + sum(inflow.get((c, n, t), [])))
    busy = {}
    for c, l, t in send_idx:
        for tau in range(t - int(k[c, l]) + 1, t + 1):
            busy.setdefault((l, tau), []).append(m.x_send[c, l, t])
    m.one_chunk_per_link = pe.Constraint(
        sorted(busy), rule=lambda m, l, tau: sum(busy[(l, tau)]) <= int(data.capacity[l]))
    need = [(c, n) for c, n in zip(*np.nonzero(data.post & ~data.pre))]
    m.delivered = pe.Objective(expr=sum(m.y_have[int(c), int(n), T] for c, n in need) + 0, sense=pe.maximize)
    return expose(m, TenModel(data=data, sent=m.x_send, hold=m.y_have, objective="arrivals"))


def extract(model):
    """The chosen sends (read from ``x_send`` itself), pruned, as the user's schedule."""
    data = ten_model(model).data
    rows = sorted(idx for idx, v in model.x_send.items() if v.value is not None and v.value > 0.5)
    return schedule_from_rows(data, prune(data, np.array(rows, np.int64).reshape(-1, 3)), NAME)


PRODUCERS = [producer(sys.modules[__name__])]
