"""Whether an allreduce on boxes joined by reducing rails fits fewer TEN timesteps than the
TEN ILP with reducing switches finds, decided over every schedule of whole pieces (not only one
reduction tree per chunk) by the exact CP-SAT model of ``tests/exact_switch_reduction.py``.

The TEN ILP (``ten-ilp-combining``) keeps one reduction tree per chunk; on 2 x 4 GPUs with
SHARP rails it proves 7 timesteps impossible among its schedules and finds 8, where the
``combining-arrivals`` bound says 7. For each system this prints the bound, then whether each
number of timesteps from the bound up fits (CP-SAT's status and seconds); the first that fits
is converted to sends and checked by the project's verifier and the TEN's capacity.
``INFEASIBLE`` means no schedule of whole ``1 / pieces`` pieces fits (finer splits are not
excluded).

Run: ``nice python benchmarks/bench_rails_exact.py`` (2x2 and 2x4, whole chunks and halves;
``--systems 2x4 --pieces 1`` to choose; minutes on two cores).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def row(k: int, g: int, pieces: int, seconds: float, workers: int) -> list[str]:
    """Lines for ``k`` x ``g`` GPUs on SHARP rails: each number of timesteps from the bound up
    to the first that fits, with its status and seconds, and that schedule's checks."""
    from exact_switch_reduction import fits
    from test_ten_ilp_reducing_switch import rails

    from collsynth.instances.instance import make_instance
    from collsynth.tens.bounds import instance_bounds, respects_ten_capacity
    from collsynth.tens.verify import verify

    inst = make_instance(rails(k, g, True), "allreduce")
    t = instance_bounds(inst).timesteps.value
    out = []
    while True:
        t0 = time.perf_counter()
        status, s = fits(inst, t, pieces, seconds, workers)
        line = f"| {k}x{g} | 1/{pieces} | {instance_bounds(inst).timesteps.value} | {t} | {status} | " \
               f"{time.perf_counter() - t0:.1f} |"
        if s is not None:
            line += f" {verify(s, inst) is None} | {respects_ten_capacity(s, inst)} |"
            out.append(line)
            return out
        out.append(line + " - | - |")
        if status != "INFEASIBLE":
            return out
        t += 1


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

    from exact_switch_reduction import model
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--systems", default="2x2,2x4", help="boxes x GPUs, comma-separated")
    ap.add_argument("--pieces", default="1,2", help="pieces per chunk, comma-separated")
    ap.add_argument("--seconds", type=float, default=1800.0, help="CP-SAT's limit per decision")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--fractional", type=int, default=None, metavar="STEPS",
                    help="instead: whether pieces of any sizes fit STEPS timesteps (column generation)")
    ap.add_argument("--windows", action="store_true",
                    help="with --fractional: price only one-piece schedules that keep the tight windows")
    a = ap.parse_args(argv)
    if a.fractional is not None:
        from test_ten_ilp_reducing_switch import rails

        from collsynth.instances.instance import make_instance

        for system in a.systems.split(","):
            k, g = map(int, system.split("x"))
            t0 = time.perf_counter()
            got = fractional(make_instance(rails(k, g, True), "allreduce"), a.fractional, a.seconds, a.workers,
                             symmetries=rail_symmetries(k, g), windows=a.windows)
            got.pop("mix", None)
            print(f"{system} SHARP rails, {a.fractional} timesteps: {got} ({time.perf_counter() - t0:.0f} s)", flush=True)
        return 0
    print("| system | piece | bound | timesteps | CP-SAT | s | verified | within TEN capacity |")
    print("|---|---|---|---|---|---|---|---|")
    for system in a.systems.split(","):
        k, g = map(int, system.split("x"))
        for pieces in map(int, a.pieces.split(",")):
            for line in row(k, g, pieces, a.seconds, a.workers):
                print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
