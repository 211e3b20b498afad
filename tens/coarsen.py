"""A piece schedule on a coarser grid: what a user exports when the runtime caps the chunks.

MSCCL's runtimes take at most :data:`collsynth.tens.msccl_format.MAX_CHUNKS` chunks per buffer
(``nchunksperloop``); a packing producer's pieces on a 1/1183 grid of 16 GPUs' chunks need
18,928. :func:`coarsen` moves the schedule onto a grid of ``grid`` pieces per chunk: every
piece of the old grid is delivered by its own set of sends (its route: the sends covering it,
with their steps and operations), and a chunk's pieces that share a route and lie next to one
another form a segment (for a tree packing, one tree's share of the chunk). Each segment
keeps ``round(grid * width)`` pieces of the new grid, the remainders given by largest
remainder so that every chunk is covered exactly once, and the new pieces are sent along the
segment's route. A segment whose share rounds to nothing is dropped: the chunk's other routes
deliver all of it. Every piece of the result follows a route that delivered a piece of the
original, so the result implements the collective whenever the original did (it is verified
before it is priced or exported all the same). The load moves between routes by at most half
a grid piece per segment, which is the price of fitting the runtime.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from .schedule import Schedule, from_arrays

__all__ = ["coarsen", "segments"]


def segments(schedule: Schedule) -> dict[int, list[tuple[int, int, list[int]]]]:
    """Chunk -> its segments ``(lo, hi, sends)`` in order: maximal runs of the schedule's grid
    (``lo``/``hi`` over ``schedule.denom``) covered by the same sends (indices), ignoring runs
    no send covers.

    >>> s = from_arrays("allgather", 2, 2, chunk=[0, 0], lo=[0, 1], hi=[1, 3], src=[0, 0], dst=[1, 1], step=[1, 2],
    ...                 denom=3)
    >>> segments(s)
    {0: [(0, 1, [0]), (1, 3, [1])]}
    """
    by_chunk = defaultdict(list)
    for i, c in enumerate(schedule.chunk.tolist()):
        by_chunk[c].append(i)
    lo_all, hi_all = schedule.lo.tolist(), schedule.hi.tolist()
    out = {}
    for c, idx in by_chunk.items():
        starts, ends = defaultdict(list), defaultdict(list)
        for i in idx:
            starts[lo_all[i]].append(i)
            ends[hi_all[i]].append(i)
        cuts = sorted(set(starts) | set(ends))
        active, runs = set(), []
        for a, b in zip(cuts[:-1], cuts[1:]):  # sweep: the sends covering [a, b)
            active.difference_update(ends.get(a, ()))
            active.update(starts.get(a, ()))
            if not active:
                continue
            if runs and runs[-1][1] == a and runs[-1][2] == active:
                runs[-1][1] = b
            else:
                runs.append([a, b, set(active)])
        out[c] = [(a, b, sorted(cover)) for a, b, cover in runs]
    return out


def _shares(widths: np.ndarray, grid: int) -> np.ndarray:
    """Non-negative integers summing to ``grid``, proportional to ``widths`` (largest remainder).

    >>> _shares(np.array([1.0, 1.0, 1.0]), 4).tolist()
    [2, 1, 1]
    """
    exact = widths / widths.sum() * grid
    base = np.floor(exact).astype(np.int64)
    order = np.argsort(-(exact - base), kind="stable")
    base[order[:grid - base.sum()]] += 1
    return base


def coarsen(schedule: Schedule, grid: int) -> Schedule:
    """``schedule`` on a grid of ``grid`` pieces per chunk (see the module doc); the schedule
    itself when its grid is no finer.

    >>> s = from_arrays("allgather", 2, 2, chunk=[0, 0, 1], lo=[0, 1, 0], hi=[1, 3, 3], src=[0, 0, 1],
    ...                 dst=[1, 1, 0], step=[1, 2, 1], denom=3)
    >>> c = coarsen(s, 2)
    >>> c.denom, c.chunk.tolist(), c.lo.tolist(), c.hi.tolist(), c.step.tolist()
    (2, [0, 0, 1], [0, 1, 0], [1, 2, 2], [1, 2, 1])
    """
    if schedule.denom <= grid:
        return schedule
    cols = defaultdict(list)
    for c, runs in segments(schedule).items():
        widths = np.array([b - a for a, b, _ in runs], dtype=np.float64)
        start = 0
        for (_, _, sends), k in zip(runs, _shares(widths, grid).tolist()):
            if k == 0:
                continue
            for i in sends:
                for name in ("chunk", "src", "dst", "step", "op"):
                    cols[name].append(int(getattr(schedule, name)[i]))
                cols["lo"].append(start)
                cols["hi"].append(start + k)
            start += k
    return from_arrays(schedule.collective, schedule.nodes, schedule.chunks, denom=grid, routing=schedule.routing,
                       meta={**schedule.meta, "coarsened_from": schedule.denom}, **cols)
