"""TACOS ILP with one-port nodes: a node sends at most one chunk in any timestep.

The TEN ILP of :mod:`collsynth.formulations.ten_ilp` (Won et al., TACOS, 2023, Section V-A) lets a node drive
all of its out-links at once (the multi-port model of TACOS and BFB). Many analyses (the alpha-beta model of Thakur et al., IJHPCA
2005, the single-port variants of De Sensi et al., NSDI 2024) assume one port per node instead;
this module adds that constraint and nothing else, and is the worked example of README's
"Adding a formulation": one file, registered by ``NAME``, turned into a producer with the
TEN drivers by ``DRIVER_FAMILY = "ten"``, with no change anywhere else.
"""

from __future__ import annotations

import pyomo.core as pe

from . import ten_ilp, ten_model

NAME = "ten-ilp-oneport"
DRIVER_FAMILY = "ten"  # solved by the horizon / early-stop / time-cluster drivers
RECOVERY_VALID = False  # multi-port shortest-path recovery would break the one-port rule
extract = ten_ilp.extract


def build(instance, horizon: int, state=None, **params) -> pe.ConcreteModel:
    """The TEN ILP plus ``ineq_one_port``: the chunks leaving a node in a timestep sum to <= 1.

    A send arriving at ``t`` over a link whose delay is ``k`` timesteps occupies its source's
    port in timesteps ``t-k+1 .. t`` (before the link's latency, if pipelined:
    :meth:`~collsynth.tens.ten.TenData.occupied`).

    >>> from collsynth.instances.generators import build as topo
    >>> from collsynth.instances.instance import make_instance
    >>> m = build(make_instance(topo("ring", {"nodes": 4}), "allgather"), horizon=3)
    >>> m.ineq_one_port.doc
    'a node sends at most one chunk in any timestep (one port)'
    """
    model = ten_ilp.build(instance, horizon, state, **params)
    view = ten_model(model)  # the TEN index and the sent / hold variables ten_ilp built
    data = view.data
    leaving: dict[tuple[int, int], list] = {}
    for c, l, t in view.sent:
        first, last = data.occupied(int(data.group[c]), l, t)
        for tau in range(int(first), int(last) + 1):
            leaving.setdefault((int(data.src[l]), tau), []).append((c, l, t))
    # CONSTRAINTS
    model.ineq_one_port = pe.Constraint(
        sorted(k for k, v in leaving.items() if len(v) > 1),
        rule=lambda m, n, tau: sum(view.sent[i] for i in leaving[(n, tau)]) <= 1,
        doc="a node sends at most one chunk in any timestep (one port)",
    )
    return model
