"""An exact decision, for small instances whose switches all reduce, of whether a combining
allreduce fits ``T`` TEN timesteps, over every schedule of whole ``1 / pieces`` pieces (not
only one reduction tree per chunk), with CP-SAT: the independent optimum the tests hold the
``timesteps`` bounds and the TEN ILP with reducing switches against.

The model tracks, for every piece, which contributions each node holds (a GPU: what it
started with plus what it added; a switch: what reached it in the step, its group operation),
so a partial sum may be multicast into several reductions and a chunk may complete in several
places, as the verifier allows (:mod:`collsynth.tens.verify`, ``_summed_violation``):

- a link carries at most ``pieces`` pieces a timestep (a piece is ``1 / pieces`` of a chunk);
- a GPU sends what it holds; a reducing switch sends, the step after, the sum of what reached
  it in the step (to one link, or to several where it multicasts), never an empty sum;
- what reaches a switch in one step, and what a GPU adds, counts each contributor at most once;
- a GPU receives by adding (``reduce``) or by replacing what it holds (``copy``, at most one a step);
- at the end every GPU holds every contributor of every piece.

A schedule it finds is returned as sends, for the project's verifier to check independently.
"""

from __future__ import annotations

from fractions import Fraction


def fits(inst, steps: int, pieces: int = 1, seconds: float = 600.0, workers: int = 1):
    """``(status, schedule)``: CP-SAT's status name for ``inst``'s allreduce in ``steps``
    timesteps of whole ``1 / pieces`` pieces, and the schedule found (None unless feasible)."""
    from ortools.sat.python import cp_model

    m, x, cp, _, nc = model(inst, steps, pieces)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = seconds
    solver.parameters.num_workers = workers
    status = solver.Solve(m)
    found = status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    return solver.StatusName(status), (schedule_of(inst, solver, x, cp, nc, pieces) if found else None)


def least_steps(inst, start: int, pieces: int = 1, seconds: float = 600.0, workers: int = 1):
    """``(steps, schedule)``: the fewest timesteps from ``start`` up that :func:`fits` finds
    feasible, proving each fewer infeasible (an unknown outcome raises ``TimeoutError``)."""
    t = start
    while True:
        status, s = fits(inst, t, pieces, seconds, workers)
        if s is not None:
            return t, s
        if status != "INFEASIBLE":
            raise TimeoutError(f"{t} timesteps: {status}")
        t += 1


def model(inst, steps: int, pieces: int, commodities: int | None = None):
    """The CP-SAT model and its send variables ``x[(link, piece, t)]`` and ops ``copy[...]``,
    the links (node pairs) and the number of pieces (``commodities`` if given: one for the
    schedule of a single piece)."""
    from collections import Counter

    from ortools.sat.python import cp_model

    from collsynth.instances.switch_ops import copying_mask, reducing_mask

    topo = inst.topology
    gpus = list(inst.collective.nodes)
    cpn = inst.collective.chunks_per_node
    nc = len(gpus) * cpn * pieces if commodities is None else commodities  # pieces, each a commodity
    la = topo.link_arrays
    parallel = Counter(zip(la.src.tolist(), la.dst.tolist()))
    links = sorted(parallel)
    switch, red, copy = set(topo.switches), reducing_mask(topo), copying_mask(topo, False)
    assert all(red[w] for w in switch), "every switch must reduce"
    m = cp_model.CpModel()
    T = range(1, steps + 1)
    x = {(l, c, t): m.NewBoolVar("") for l in links for c in range(nc) for t in T}
    hold = {(v, c, r, 0): int(v == r) for v in gpus for c in range(nc) for r in gpus}
    group = {(w, c, r, 0): 0 for w in switch for c in range(nc) for r in gpus}
    cp = {}
    for t in T:
        for link in links:
            m.Add(sum(x[link, c, t] for c in range(nc)) <= pieces * parallel[link])
        carried = {}
        for (a, b) in links:
            for c in range(nc):
                src = hold if a not in switch else group
                for r in gpus:
                    y = m.NewBoolVar("")
                    have = src[a, c, r, t - 1]
                    m.AddImplication(y, x[(a, b), c, t])
                    if isinstance(have, int):
                        m.Add(y == (x[(a, b), c, t] if have else 0))
                    else:
                        m.AddBoolAnd([x[(a, b), c, t], have]).OnlyEnforceIf(y)
                        m.AddBoolOr([x[(a, b), c, t].Not(), have.Not()]).OnlyEnforceIf(y.Not())
                    carried[(a, b), c, r] = y
                if a in switch:  # never an empty sum
                    m.AddBoolOr([group[a, c, r, t - 1] for r in gpus if not isinstance(group[a, c, r, t - 1], int)]
                                + [x[(a, b), c, t].Not()])
        for w in switch:
            for c in range(nc):
                if not copy[w]:
                    m.Add(sum(x[l, c, t] for l in links if l[0] == w) <= 1)
                for r in gpus:
                    g = m.NewBoolVar("")
                    m.Add(g == sum(carried[l, c, r] for l in links if l[1] == w))
                    group[w, c, r, t] = g
        for v in gpus:
            for c in range(nc):
                into = [l for l in links if l[1] == v]
                cps = []
                for l in into:
                    cp[l, c, t] = m.NewBoolVar("")
                    m.AddImplication(cp[l, c, t], x[l, c, t])
                    cps.append(cp[l, c, t])
                m.Add(sum(cps) <= 1)
                replaced = m.NewBoolVar("")
                m.Add(replaced == sum(cps))
                for r in gpus:
                    h = m.NewBoolVar("")
                    arrived = sum(carried[l, c, r] for l in into)
                    m.Add(h == hold[v, c, r, t - 1] + arrived).OnlyEnforceIf(replaced.Not())
                    m.Add(h == arrived).OnlyEnforceIf(replaced)  # a copy replaces what the GPU held
                    hold[v, c, r, t] = h
    for v in gpus:
        for c in range(nc):
            for r in gpus:
                m.Add(hold[v, c, r, steps] == 1)
    return m, x, cp, links, nc


def schedule_of(inst, solver, x, cp, nc: int, pieces: int):
    """The solved sends as a collsynth schedule (piece ``p`` of chunk ``c`` is ``[p, p + 1)``
    in units of ``1 / pieces``)."""
    from collsynth.tens.schedule import from_sends

    sends = []
    for (link, c, t), var in x.items():
        if solver.Value(var):
            a, b = link
            op = "copy" if (link, c, t) in cp and solver.Value(cp[link, c, t]) else "reduce"
            j, p = divmod(c, pieces)
            chunk = inst.collective.nodes[j // inst.collective.chunks_per_node] * inst.collective.chunks_per_node + j % \
                inst.collective.chunks_per_node
            sends.append((chunk, Fraction(p, pieces), Fraction(p + 1, pieces), a, b, t, op))
    coll = inst.collective
    return from_sends(sends, "allreduce", inst.topology.size, coll.num_chunks)
