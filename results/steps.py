"""A schedule step by step, as plain data and as text (``collsynth show``).

Each communication step lists its sends grouped by link: ``src -> dst``, the chunk (and the
piece ``[lo, hi)`` when it is not the whole chunk), what the receiver does (``copy`` or
``reduce``) and the bytes moved; with the synchronous alpha-beta model's per-step times (see
``docs/cost-models.md``) when the caller priced a verified schedule. Chunk ids follow the
schedule-file numbering of ``docs/schedules.md``, which :data:`CHUNK_IDS` states per kind.

>>> from collsynth.tens.schedule import from_arrays
>>> s = from_arrays("broadcast", 3, 1, chunk=[0, 0], src=[0, 1], dst=[1, 2], step=[1, 2])
>>> print(render(steps(s, chunk_bytes=[4096.0], per_step=[(1, 1e-6, 2e-6), (2, 1e-6, 2e-6)])))
step 1: 1 send, 4096 B; sync 3e-06 s (latency 1e-06 + bandwidth 2e-06)
  0 -> 1  chunk 0  copy  4096 B
step 2: 1 send, 4096 B; sync 3e-06 s (latency 1e-06 + bandwidth 2e-06)
  1 -> 2  chunk 0  copy  4096 B
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Sequence

import numpy as np

from ..tens.schedule import OP_COPY, OP_DEFAULT, OP_REDUCE, Schedule

COMBINING_KINDS = ("reduce", "reduce_scatter", "allreduce")
CHUNK_IDS = {
    "allgather": "chunk i*c+j: piece j of node i's shard",
    "gather": "chunk i*c+j: piece j of node i's shard",
    "scatter": "chunk i*c+j: piece j of the block destined to node i",
    "reduce_scatter": "chunk i*c+j: piece j of the block reduced at node i",
    "allreduce": "chunk i*c+j: piece j of the block reduced at node i",
    "alltoall": "chunk (i*S+k)*c+j: piece j of what node i sends to node k (S node ids)",
    "broadcast": "chunk j: piece j of the one buffer",
    "reduce": "chunk j: piece j of the one buffer",
}


def steps(
    schedule: Schedule,
    chunk_bytes: Sequence[float],
    *,
    per_step: Sequence[tuple[int, float, float]] | None = None,
    first: int = 1,
    last: int | None = None,
    max_sends: int | None = None,
) -> list[dict[str, Any]]:
    """The steps ``first..last`` of ``schedule`` as plain data, one dict per step:
    ``step``, ``sends`` (how many), ``bytes`` (their total), ``latency_s``/``bandwidth_s``
    (from ``per_step``: ``(step, latency, bandwidth)`` of the sync model, else None) and
    ``shown``: ``[src, dst, chunk, lo, hi, op, bytes]`` of at most ``max_sends`` sends, sorted
    by link then chunk (``lo``/``hi`` exact fractions as strings).

    ``chunk_bytes[c]`` is the size of chunk ``c`` (one per chunk id of the instance).
    """
    bytes_of = np.asarray(chunk_bytes, dtype=np.float64)
    times = {int(t): (float(a), float(b)) for t, a, b in (per_step or ())}
    default_op = "reduce" if schedule.collective in COMBINING_KINDS else "copy"
    op_name = {OP_COPY: "copy", OP_REDUCE: "reduce", OP_DEFAULT: default_op}
    denom = schedule.denom
    last = schedule.num_steps if last is None else min(last, schedule.num_steps)
    out = []
    for t in range(max(first, 1), last + 1):
        idx = np.flatnonzero(schedule.step == t)
        idx = idx[np.lexsort((schedule.lo[idx], schedule.chunk[idx], schedule.dst[idx], schedule.src[idx]))]
        size = (schedule.hi[idx] - schedule.lo[idx]) / denom * bytes_of[schedule.chunk[idx]]
        shown = []
        for k, i in enumerate(idx[:max_sends] if max_sends is not None else idx):
            lo, hi = Fraction(int(schedule.lo[i]), denom), Fraction(int(schedule.hi[i]), denom)
            shown.append([int(schedule.src[i]), int(schedule.dst[i]), int(schedule.chunk[i]), str(lo), str(hi),
                          op_name[int(schedule.op[i])], float(size[k])])
        latency, bandwidth = times.get(t, (None, None))
        out.append({"step": t, "sends": int(len(idx)), "bytes": float(size.sum()), "latency_s": latency,
                    "bandwidth_s": bandwidth, "shown": shown})
    return out


def render(rows: list[dict[str, Any]]) -> str:
    """The text of :func:`steps`' rows: a header line per step, then one line per send."""
    lines = []
    for row in rows:
        head = f"step {row['step']}: {row['sends']} send{'s' if row['sends'] != 1 else ''}, {row['bytes']:.6g} B"
        if row["latency_s"] is not None:
            total = row["latency_s"] + row["bandwidth_s"]
            head += f"; sync {total:.4g} s (latency {row['latency_s']:.4g} + bandwidth {row['bandwidth_s']:.4g})"
        lines.append(head)
        for src, dst, chunk, lo, hi, op, size in row["shown"]:
            piece = "" if (lo, hi) == ("0", "1") else f" [{lo}, {hi})"
            lines.append(f"  {src} -> {dst}  chunk {chunk}{piece}  {op}  {size:.6g} B")
        hidden = row["sends"] - len(row["shown"])
        if hidden:
            lines.append(f"  ... {hidden} more send{'s' if hidden != 1 else ''} (--max-sends)")
    return "\n".join(lines)
