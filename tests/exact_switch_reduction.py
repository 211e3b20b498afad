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

Pieces of any sizes (:func:`fractional`): a schedule of pieces is, point by point of a chunk,
a mix of schedules of one piece, so column generation over those decides whether any mix fits
the links (a certificate from the LP's dual when none does). Where a GPU's links must carry a
chunk's worth of every chunk in a window and can carry no more (:func:`tight_windows`), every
piece reaches (leaves) it exactly once there, and the pricing keeps only such schedules.
"""

from __future__ import annotations

import sys
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


def tight_windows(inst, steps: int) -> list[tuple[int, str, int, int]]:
    """``(gpu, "in" | "out", first, last)``: the windows of timesteps in which, within ``steps``,
    a GPU's links must carry a chunk's worth of every chunk and can carry no more, so that
    every piece of every chunk reaches (leaves) it exactly once there, whatever the pieces'
    sizes. A GPU takes in the far contributions of every chunk no earlier than timestep
    ``r`` (its farthest contributor's distance) and sends its own no later than ``steps - q
    + 1`` (``q``: its farthest destination's); when ``n`` chunks fill ``m`` links over the
    window exactly (``m (steps - r + 1) = n``), a piece that arrived twice there would leave
    another short (the release-date argument of ``combining_arrivals``, made exact)."""
    import numpy as np
    from scipy.sparse.csgraph import shortest_path

    topo = inst.topology
    la = topo.link_arrays
    pairs = sorted(set(zip(la.src.tolist(), la.dst.tolist())))
    adj = np.zeros((topo.size, topo.size))
    for a, b in pairs:
        adj[a, b] = 1
    dist = shortest_path(adj, directed=True, unweighted=True)
    gpus = list(inst.collective.nodes)
    n = len(gpus) * inst.collective.chunks_per_node
    out = []
    for v in gpus:
        others = [u for u in gpus if u != v]
        r, q = int(dist[others, v].max()), int(dist[v, others].max())
        m_in, m_out = sum(b == v for _, b in pairs), sum(a == v for a, _ in pairs)
        if m_in * (steps - r + 1) == n:
            out.append((v, "in", r, steps))
        if m_out * (steps - q + 1) == n:
            out.append((v, "out", 1, steps - q + 1))
    return out


def cheapest_piece(inst, steps: int, weight: dict, seconds: float, workers: int,
                   windows: list | None = None) -> tuple[int, dict]:
    """A lower bound on ``sum(weight[link, t] * uses)`` over the schedules of one piece in
    ``steps`` timesteps (:func:`exact_switch_reduction.model` with one commodity; CP-SAT's
    proven bound, exact when it finishes; integer weights) and the link uses ``{(link, t): 1}``
    of the cheapest such schedule it found (``inf`` and none where none exists); with ``windows`` (:func:`tight_windows`) only
    schedules that reach (leave) each such GPU at most once in its window."""
    import math

    from ortools.sat.python import cp_model

    m, x, _, _, _ = model(inst, steps, 1, commodities=1)
    for v, side, first, last in windows or []:
        m.Add(sum(var for ((a, b), _, t), var in x.items()
                  if (b if side == "in" else a) == v and first <= t <= last) <= 1)
    m.Minimize(sum(weight[link, t] * var for (link, _, t), var in x.items()))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = seconds
    solver.parameters.num_workers = workers
    status = solver.Solve(m)
    if status == cp_model.INFEASIBLE:
        return math.inf, {}
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        raise TimeoutError(f"one piece's cheapest schedule: {solver.StatusName(status)}")
    low = math.ceil(solver.BestObjectiveBound() - 1e-6)
    return low, {(link, t): 1 for (link, _, t), var in x.items() if solver.Value(var)}


def fractional(inst, steps: int, seconds: float, workers: int, rounds: int = 200, scale: int = 10 ** 6,
               symmetries: list | None = None, windows: bool = False) -> dict:
    """Whether pieces of any sizes could fit ``steps`` timesteps, by column generation; with
    ``windows``, over the one-piece schedules that keep :func:`tight_windows` (every schedule of
    pieces that fits is a mix of those, so the certificate still holds, and there are far fewer).

    The verifier's rules act point by point of a chunk, so a schedule of pieces of any sizes is,
    for each chunk, a mix of schedules of one piece whose link uses, summed over the chunks
    (every allreduce chunk needs the same), fit the links. The master LP (HiGHS) mixes the
    one-piece schedules found so far to least overload ``theta`` (the most any link carries in a
    timestep, in chunks); the cheapest one-piece schedule under its duals ``y`` (summing to 1)
    is the next column, with its images under ``symmetries`` (node maps of the system, under
    which the LP's optimum is unchanged: they only speed it up). Weak duality: ``theta >= n * min_P y . u_P`` for ``n`` chunks, so with
    integer weights ``Y`` (the duals times ``scale``, rounded down) ``n * L > sum(Y)``, ``L``
    CP-SAT's proven lower bound on ``min_P Y . u_P``, proves that no mix fits (Gilmore and Gomory, "A Linear Programming Approach to the
    Cutting-Stock Problem", Operations Research 9(6), 1961: the same master and pricing)."""
    import numpy as np
    from scipy.optimize import linprog

    n = len(inst.collective.nodes) * inst.collective.chunks_per_node
    keys = sorted({(link, t) for link in _links(inst) for t in range(1, steps + 1)})
    windows = tight_windows(inst, steps) if windows else None
    cols, out = [], {"steps": steps, "chunks": n, "windows": len(windows or [])}
    weight = {k: 1 for k in keys}
    _, uses = cheapest_piece(inst, steps, weight, seconds, workers, windows)
    if not uses:
        return {**out, "rounds": 0, "verdict": "no one-piece schedule fits (CP-SAT: infeasible)"}
    for r in range(rounds):
        cols += [c for c in orbit(uses, symmetries) if c not in cols]
        a = np.array([[n * c.get(k, 0) for c in cols] + [-1.0] for k in keys])
        res = linprog(np.r_[np.zeros(len(cols)), 1.0], A_ub=a, b_ub=np.zeros(len(keys)),
                      A_eq=np.r_[np.ones(len(cols)), 0.0][None, :], b_eq=[1.0], method="highs")
        y = np.maximum(-res.ineqlin.marginals, 0.0)
        weight = {k: int(np.floor(v * scale)) for k, v in zip(keys, y)}
        low, uses = cheapest_piece(inst, steps, weight, seconds, workers, windows)
        out.update(rounds=r + 1, columns=len(cols), theta=float(res.fun),
                   certified_lower=n * low / max(1, sum(weight.values())))
        print(f"  round {r + 1}: theta {res.fun:.4f}, certified lower {out['certified_lower']:.4f}, "
              f"{len(cols)} columns", file=sys.stderr, flush=True)
        if n * low > sum(weight.values()):
            return {**out, "verdict": "no mix of pieces fits (certificate)"}
        if res.fun <= 1 + 1e-9:
            return {**out, "verdict": "a mix of the found one-piece schedules fits", "mix": _mix(cols, res.x)}
    return {**out, "verdict": "undecided"}


def _mix(cols: list[dict], x) -> list[tuple[float, dict]]:
    """The columns the master LP uses, with their shares."""
    return [(float(w), c) for w, c in zip(x, cols) if w > 1e-9]


def rail_symmetries(k: int, g: int) -> list[dict]:
    """The node maps of ``k`` boxes of ``g`` GPUs on rails (the ids of ``rails``): boxes
    permuted by a cyclic shift, rails by any permutation."""
    from itertools import permutations

    n = k * g
    out = []
    for shift in range(k):
        for perm in permutations(range(g)):
            m = {b * g + i: ((b + shift) % k) * g + perm[i] for b in range(k) for i in range(g)}
            m.update({n + b: n + (b + shift) % k for b in range(k)})
            m.update({n + k + i: n + k + perm[i] for i in range(g)})
            out.append(m)
    return out


def orbit(uses: dict, symmetries: list | None) -> list[dict]:
    """``uses`` (``{((src, dst), t): 1}``) under each node map of ``symmetries`` (itself alone
    without them)."""
    if not symmetries:
        return [uses]
    return [{((m[a], m[b]), t): v for ((a, b), t), v in uses.items()} for m in symmetries]


def _links(inst) -> list:
    la = inst.topology.link_arrays
    return sorted(set(zip(la.src.tolist(), la.dst.tolist())))
