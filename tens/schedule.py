"""Schedules: who sends which piece of which chunk over which link in which step.

A schedule is columnar data (``docs/schedules.md``): numpy columns ``chunk, lo, hi, src, dst, step,
op`` where the piece ``[lo/denom, hi/denom)`` of chunk ``chunk`` moves over ``src -> dst`` in
comm step ``step`` (steps start at 1). ``denom`` is one shared denominator, so piece bounds are
exact rationals kept as integers; whole-chunk schedules have ``denom == 1``. The ids (``chunk``,
``src``, ``dst``, ``step``) are int32 where they fit (:func:`id_column`), ``lo``/``hi`` int32 when the
denominator and every bound are below ``2**30`` (:func:`piece_columns`: the usual pieces), else int64.

``op`` says what the receiver does: ``OP_COPY`` (store the piece), ``OP_REDUCE`` (combine it
with what it holds) or ``OP_DEFAULT`` (reduce for combining collectives, copy for the others).

Small schedules convert to and from :class:`Send` tuples with :class:`fractions.Fraction`
bounds; the JSON file format (``docs/schedules.md``) round-trips exactly:

>>> s = from_sends([Send(0, Fraction(0), Fraction(1, 2), 0, 1, 1)], "allgather", nodes=2, chunks=2)
>>> from_json(to_json(s)).sends() == s.sends()
True
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Iterable, NamedTuple, Sequence

import numpy as np

from .. import InputError
from ..outputs import replaced_file
from ..instances.files import read_text

FORMAT = "collsynth.schedule/1"
OP_DEFAULT, OP_COPY, OP_REDUCE = 0, 1, 2
OP_NAMES = {OP_COPY: "copy", OP_REDUCE: "reduce"}
OP_CODES = {"copy": OP_COPY, "reduce": OP_REDUCE}
ROUTINGS = ("links", "shortest-path")
LINK_ORDERS = ("ready", "program")  # how a GPU's sends take a link: as they become ready, or in schedule order
JSON_KEYS = ("format", "collective", "nodes", "chunks", "routing", "link_order", "meta", "sends")  # docs/schedules.md
ID_LIMIT = 2**63  # ids read from JSON must fit an int64 column
DENOM_LIMIT = 2**62  # the shared denominator of the pieces (an int64 column of lo/hi over it)
# a piece bound written as text: "p/q" or a decimal, at most 19 digits a part (no exponent: a
# string such as "1e-999999999" would make Fraction compute a billion-digit power of ten)
PIECE_TEXT = re.compile(r"\s*(\d{1,19}(/\d{1,19})?|\d{0,19}\.\d{1,19})\s*")
REVERSED_KIND = {
    "allgather": "reduce_scatter",
    "reduce_scatter": "allgather",
    "broadcast": "reduce",
    "reduce": "broadcast",
    "scatter": "gather",
    "gather": "scatter",
    "allreduce": "allreduce",
    "alltoall": "alltoall",
}


ID_COLUMNS = ("chunk", "src", "dst", "step")  # int32 where every id fits (see id_column)
INT32 = np.iinfo(np.int32)


def id_column(values) -> np.ndarray:
    """``values`` as a flat id column: int32 when every value fits (4 bytes a send instead of 8),
    int64 otherwise (a value out of range is kept whole for the verifier to name). numpy keeps
    int32 in arithmetic with int32 and Python ints, so code that multiplies ids (a flat index
    ``chunk * nodes + node``, a shift of chunk ids or steps) widens them first.

    >>> id_column([0, 5, 2**31 - 1]).dtype, id_column([-1, 2**31]).dtype
    (dtype('int32'), dtype('int64'))
    """
    column = np.asarray(values)
    if column.dtype == np.int32:
        return column.ravel()
    column = np.asarray(column, dtype=np.int64).ravel()
    if len(column) and (column.min() < INT32.min or column.max() > INT32.max):
        return column
    return column.astype(np.int32)


PIECE_LIMIT = 2**30 - 1  # piece bounds and denominators up to this are kept int32: a sum of two stays below 2**31


def piece_columns(lo, hi, denom: int) -> tuple[np.ndarray, np.ndarray]:
    """``lo`` and ``hi`` (bounds over ``denom``) as flat piece-bound columns of one type: int32
    when ``denom`` and every bound are in ``0 .. 2**30 - 1`` (4 bytes a bound instead of 8; a
    difference, a sum of two bounds or a bound and ``denom`` still fit), int64 otherwise (a bound
    out of range is kept whole for the verifier to name). numpy keeps int32 in arithmetic with
    int32 and Python ints, so code that scales bounds (a new denominator, a product of pieces)
    widens them first.

    >>> [c.dtype.name for c in piece_columns([0, 3], [3, 2**30 - 1], 2**30 - 1)]
    ['int32', 'int32']
    >>> [piece_columns([0], [1], d)[0].dtype.name for d in (2**30 - 1, 2**30)]
    ['int32', 'int64']
    >>> piece_columns(np.array([-1], np.int32), np.array([1], np.int32), 2)[0].dtype.name
    'int64'
    """
    lo, hi = np.asarray(lo), np.asarray(hi)
    if not lo.dtype == hi.dtype == np.int32:
        lo, hi = np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)
    lo, hi = lo.ravel(), hi.ravel()
    fits = 0 <= denom <= PIECE_LIMIT and (not len(lo) or min(int(lo.min()), int(hi.min())) >= 0) \
        and (not len(lo) or max(int(lo.max()), int(hi.max())) <= PIECE_LIMIT)
    if fits == (lo.dtype == np.int32):
        return lo, hi
    kind = np.int32 if fits else np.int64
    return lo.astype(kind), hi.astype(kind)


def narrowed(columns: dict, denom: int) -> dict:
    """A schedule's columns (``chunk``, ``lo``, ``hi``, ``src``, ``dst``, ``step``, each any shape:
    small arrays to be broadcast to the sends) in the types the schedule keeps (:func:`id_column`,
    :func:`piece_columns`), so that the flat columns are made in them rather than as int64 first.

    >>> {k: v.dtype.name for k, v in narrowed({"chunk": np.arange(3)[:, None], "lo": np.zeros((1, 2), int),
    ...                                         "hi": np.ones((1, 2), int)}, 1).items()}
    {'chunk': 'int32', 'lo': 'int32', 'hi': 'int32'}
    """
    out = {name: id_column(v).reshape(np.shape(v)) if name in ID_COLUMNS else v for name, v in columns.items()}
    if "lo" in out:
        lo, hi = piece_columns(out["lo"], out["hi"], denom)
        out["lo"], out["hi"] = lo.reshape(np.shape(out["lo"])), hi.reshape(np.shape(out["hi"]))
    return out


class Send(NamedTuple):
    """One send: piece ``[lo, hi)`` of ``chunk`` over ``src -> dst`` in ``step`` (from 1)."""

    chunk: int
    lo: Fraction
    hi: Fraction
    src: int
    dst: int
    step: int
    op: str | None = None


@dataclass(frozen=True, eq=False)
class Schedule:
    """Columnar schedule for a collective of kind ``collective`` on ``nodes`` node ids.

    ``chunks`` is the number of chunk ids (see :mod:`collsynth.instances.collective` for the
    numbering). ``routing`` is ``"links"`` (every send uses a direct link) or
    ``"shortest-path"`` (logical sends between any two live nodes, routed by the cost models).
    ``meta`` carries free-form producer information (it is written to JSON as ``"meta"``).
    ``link_order`` is ``"ready"`` (a link takes its messages as they become ready, first come
    first served) or ``"program"``: every send out of an NPU also waits until the send before it
    on the same link, in schedule order (step, then position), has started, as a GPU running its
    sends to a peer in program order does (an MSCCL thread block; ``docs/schedules.md``).
    Switches forward in arrival order either way.
    """

    collective: str
    nodes: int
    chunks: int
    chunk: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    step: np.ndarray
    op: np.ndarray
    denom: int = 1
    routing: str = "links"
    meta: dict = field(default_factory=dict)
    link_order: str = "ready"

    def __post_init__(self) -> None:
        if self.link_order not in LINK_ORDERS:
            raise ValueError(f"link_order must be one of {LINK_ORDERS}, got {self.link_order!r}")
        for name in ID_COLUMNS:
            object.__setattr__(self, name, id_column(getattr(self, name)))
        lo, hi = piece_columns(self.lo, self.hi, self.denom)
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)

    def __len__(self) -> int:
        return len(self.chunk)

    @property
    def num_steps(self) -> int:
        """The last step used (0 for an empty schedule)."""
        return int(self.step.max()) if len(self.step) else 0

    @property
    def size(self) -> np.ndarray:
        """Piece sizes as floats (fractions of a chunk)."""
        return (self.hi - self.lo) / self.denom

    def sends(self) -> list[Send]:
        """The schedule as a list of :class:`Send` with exact fraction bounds (small cases)."""
        d = self.denom
        out = []
        for c, lo, hi, s, t, st, op in zip(
            self.chunk.tolist(), self.lo.tolist(), self.hi.tolist(), self.src.tolist(),
            self.dst.tolist(), self.step.tolist(), self.op.tolist(),
        ):
            out.append(Send(c, Fraction(lo, d), Fraction(hi, d), s, t, st, OP_NAMES.get(op)))
        return out

    def with_denom(self, denom: int) -> "Schedule":
        """The same schedule with bounds over ``denom`` (a multiple of the current one)."""
        if denom == self.denom:
            return self
        if denom % self.denom:
            raise ValueError(f"{denom} is not a multiple of {self.denom}")
        k = denom // self.denom
        return replace(self, lo=self.lo.astype(np.int64) * k, hi=self.hi.astype(np.int64) * k, denom=denom)

    def select(self, mask: np.ndarray) -> "Schedule":
        """The sends where ``mask`` is true (a boolean array or an index array)."""
        return replace(
            self,
            chunk=self.chunk[mask], lo=self.lo[mask], hi=self.hi[mask], src=self.src[mask],
            dst=self.dst[mask], step=self.step[mask], op=self.op[mask],
        )

    def sorted(self) -> "Schedule":
        """Sends ordered by (step, src, dst, chunk, lo): a canonical order for comparisons."""
        order = np.lexsort((self.lo, self.chunk, self.dst, self.src, self.step))
        return self.select(order)


def empty(collective: str, nodes: int, chunks: int, routing: str = "links") -> Schedule:
    """A schedule with no sends."""
    z = np.zeros(0, dtype=np.int64)
    return Schedule(collective, nodes, chunks, z, z, z, z, z, z, np.zeros(0, np.int8), 1, routing)


def from_arrays(
    collective: str,
    nodes: int,
    chunks: int,
    *,
    chunk,
    src,
    dst,
    step,
    lo=None,
    hi=None,
    denom: int = 1,
    op=None,
    routing: str = "links",
    meta: dict | None = None,
    link_order: str = "ready",
) -> Schedule:
    """Build a schedule from columns (whole chunks when ``lo``/``hi`` are omitted; ids int32
    where they fit, :func:`id_column`)."""
    chunk = id_column(chunk)
    n = len(chunk)
    lo = np.zeros(n, np.int64) if lo is None else lo  # narrowed with hi by the schedule (piece_columns)
    hi = np.full(n, denom, np.int64) if hi is None else hi
    if op is None:
        op = np.zeros(n, np.int8)
    elif np.isscalar(op):
        op = np.full(n, op, np.int8)
    else:
        op = np.asarray(op, dtype=np.int8).ravel()
    if routing not in ROUTINGS:
        raise ValueError(f"routing must be one of {ROUTINGS}, got {routing!r}")
    return Schedule(
        collective, int(nodes), int(chunks), chunk, lo, hi, id_column(src), id_column(dst), id_column(step), op,
        int(denom), routing, dict(meta or {}), link_order,
    )


def from_sends(
    sends: Iterable[Send | Sequence],
    collective: str,
    nodes: int,
    chunks: int,
    routing: str = "links",
    meta: dict | None = None,
) -> Schedule:
    """Build a schedule from sends ``(chunk, lo, hi, src, dst, step[, op])``.

    ``lo``/``hi`` may be ints, Fractions or strings like ``"1/3"``; the shared denominator is
    the least common multiple of theirs, at most :data:`DENOM_LIMIT` (the send that passes it is
    refused).
    """
    rows = [tuple(s) for s in sends]
    fr_lo = [Fraction(r[1]) for r in rows]
    fr_hi = [Fraction(r[2]) for r in rows]
    denom = 1
    for i, pair in enumerate(zip(fr_lo, fr_hi)):
        for f in pair:
            denom = denom * f.denominator // math.gcd(denom, f.denominator)
        if denom > DENOM_LIMIT:
            raise InputError(f"sends[{i}]", "the pieces' common denominator exceeds 2**62; expected fractions "
                                            "with smaller denominators")
    ops = []
    for r in rows:
        o = r[6] if len(r) > 6 else None
        if o is None or o == OP_DEFAULT:
            ops.append(OP_DEFAULT)
        elif o in OP_CODES:
            ops.append(OP_CODES[o])
        elif o in (OP_COPY, OP_REDUCE):
            ops.append(int(o))
        else:
            raise InputError("sends", f"unknown op {o!r}, expected 'copy' or 'reduce'")
    return from_arrays(
        collective, nodes, chunks,
        chunk=[r[0] for r in rows],
        lo=[int(f * denom) for f in fr_lo],
        hi=[int(f * denom) for f in fr_hi],
        src=[r[3] for r in rows], dst=[r[4] for r in rows], step=[r[5] for r in rows],
        denom=denom, op=ops, routing=routing, meta=meta,
    )


# ---- JSON (docs/schedules.md) ------------------------------------------------------------------

def _frac_str(num: int, denom: int) -> str:
    f = Fraction(num, denom)
    return str(f.numerator) if f.denominator == 1 else f"{f.numerator}/{f.denominator}"


def to_json(schedule: Schedule) -> dict:
    """The schedule as its JSON object (``docs/schedules.md``; ``lo``/``hi`` as exact fraction strings)."""
    s = schedule
    d = s.denom
    rows = []
    for c, lo, hi, a, b, st, op in zip(
        s.chunk.tolist(), s.lo.tolist(), s.hi.tolist(), s.src.tolist(), s.dst.tolist(),
        s.step.tolist(), s.op.tolist(),
    ):
        row = [c, _frac_str(lo, d), _frac_str(hi, d), a, b, st]
        if op:
            row.append(OP_NAMES[op])
        rows.append(row)
    out = {"format": FORMAT, "collective": s.collective, "nodes": s.nodes, "chunks": s.chunks}
    if s.routing != "links":
        out["routing"] = s.routing
    if s.link_order != "ready":
        out["link_order"] = s.link_order
    if s.meta:
        out["meta"] = s.meta
    out["sends"] = rows
    return out


def from_json(data: dict, where: str = "schedule") -> Schedule:
    """Parse a schedule's JSON object (``docs/schedules.md``); errors name ``where`` and the field.

    >>> from_json({"format": FORMAT, "collective": "allgather", "nodes": 2, "chunks": 2,
    ...            "sends": [[0, "0", "1", 0, 1, 1, "teleport"]]}, "s.json")
    Traceback (most recent call last):
    collsynth.InputError: s.json: sends[0]: op: expected 'copy' or 'reduce', got 'teleport'
    """
    if not isinstance(data, dict):
        raise InputError(where, "expected a JSON object")
    if data.get("format") != FORMAT:
        raise InputError(f"{where}: format", f"expected {FORMAT!r}, got {_shown(data.get('format'))}")
    for key in data:
        if key not in JSON_KEYS:
            raise InputError(f"{where}: {_shown(key, quote=False)}",
                             f"unknown key; expected one of {', '.join(JSON_KEYS)}")
    for key, typ in (("collective", str), ("nodes", int), ("chunks", int), ("sends", list), ("meta", dict)):
        value = data.get(key, {} if key == "meta" else None)
        if not isinstance(value, typ) or isinstance(value, bool):
            raise InputError(f"{where}: {key}", f"expected {_JSON_TYPES[typ]}, got {_shown(value)}")
        if typ is int and not 0 <= value < ID_LIMIT:
            raise InputError(f"{where}: {key}", f"expected a count in 0..2**63-1, got {_shown(value)}")
    routing = data.get("routing", "links")
    if routing not in ROUTINGS:
        raise InputError(f"{where}: routing", f"expected one of {', '.join(ROUTINGS)}, got {_shown(routing)}")
    link_order = data.get("link_order", "ready")
    if link_order not in LINK_ORDERS:
        raise InputError(f"{where}: link_order", f"expected one of {', '.join(LINK_ORDERS)}, got {_shown(link_order)}")
    sends = [_send_row(row, f"{where}: sends[{i}]") for i, row in enumerate(data["sends"])]
    _check_ids(sends, data["nodes"], data["chunks"], where)
    try:
        return replace(from_sends(sends, data["collective"], data["nodes"], data["chunks"], routing, data.get("meta")),
                       link_order=link_order)
    except InputError as e:  # named after the file too
        raise InputError(f"{where}: {e.where}", e.what) from None


_JSON_TYPES = {str: "a string", int: "an integer", list: "a list", dict: "an object"}


def _check_ids(sends: list[tuple], nodes: int, chunks: int, where: str) -> None:
    """Refuse a send whose node or chunk id is outside the file's own header (``0..nodes-1``,
    ``0..chunks-1``): such a file is malformed, whatever instance it is read with (a send
    between ids that exist but are not linked is well formed and fails verification).

    >>> _check_ids([(0, 0, 1, 0, 4, 1, None)], 4, 1, "s.json")
    Traceback (most recent call last):
    collsynth.InputError: s.json: sends[0]: dst: expected a node id in 0..3 (the header's nodes = 4), got 4
    """
    for i, (chunk, _, _, src, dst, _, _) in enumerate(sends):
        for name, value, count, what in (("chunk", chunk, chunks, "chunk id"), ("src", src, nodes, "node id"),
                                         ("dst", dst, nodes, "node id")):
            if not 0 <= value < count:
                header = "chunks" if name == "chunk" else "nodes"
                raise InputError(f"{where}: sends[{i}]", f"{name}: expected a {what} in 0..{count - 1} "
                                                         f"(the header's {header} = {count}), got {value}")


def _shown(value, limit: int = 60, quote: bool = True) -> str:
    """``repr(value)`` (``str`` without ``quote``) cut to about ``limit`` characters for an
    error message: a 10,000-digit value is not echoed whole."""
    text = repr(value) if quote else str(value)
    return text if len(text) <= limit else f"{text[:limit - 15]}...{text[-12:]} ({len(text):,} characters)"


def _send_row(row, where: str) -> tuple:
    """One JSON send row checked: ``(chunk, lo, hi, src, dst, step, op)``; errors name ``where``
    (the file and the send's index) and the field."""
    if not isinstance(row, list) or len(row) not in (6, 7):
        raise InputError(where, f"expected [chunk, lo, hi, src, dst, step] (+ optional op), got {_shown(row)}")
    for name, x in zip(("chunk", "src", "dst", "step"), (row[0], row[3], row[4], row[5])):
        if not isinstance(x, int) or isinstance(x, bool):
            raise InputError(where, f"{name}: expected an integer, got {_shown(x)}")
        if not -ID_LIMIT <= x < ID_LIMIT:
            raise InputError(where, f"{name}: expected an integer that fits in 64 bits, got {_shown(x)}")
    lo, hi = _piece(row[1], where, "lo"), _piece(row[2], where, "hi")
    if not 0 <= lo < hi <= 1:
        raise InputError(where, f"expected 0 <= lo < hi <= 1, got [{_shown(str(lo), quote=False)}, "
                                f"{_shown(str(hi), quote=False)})")
    if row[5] < 1:
        raise InputError(where, f"step: steps start at 1, got {row[5]}")
    op = row[6] if len(row) == 7 else None
    if op is not None and not (isinstance(op, str) and op in OP_CODES):
        raise InputError(where, f"op: expected 'copy' or 'reduce', got {_shown(op)}")
    return (row[0], lo, hi, row[3], row[4], row[5], op)


def _piece(value, where: str, name: str) -> Fraction:
    """A piece bound: a string ``"p/q"`` or decimal (at most 19 digits a part), or a JSON number."""
    if isinstance(value, str):
        bound = _piece_text(value)
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        bound = Fraction(str(value))
    else:
        bound = None
    if bound is None:
        raise InputError(where, f"{name}: expected a fraction such as \"1/3\" in [0, 1], got {_shown(value)}")
    return bound


@functools.lru_cache(maxsize=4096)
def _piece_text(text: str) -> Fraction | None:
    """``text`` as a Fraction, None when it is no piece bound (schedules repeat a few bounds)."""
    if not PIECE_TEXT.fullmatch(text):
        return None
    try:
        return Fraction(text)
    except ZeroDivisionError:
        return None


def write_json(schedule: Schedule, path: str | Path) -> None:
    """Write the schedule JSON file (compact rows, one send per line), whole or not at all
    (:func:`collsynth.outputs.replaced_file`)."""
    data = to_json(schedule)
    sends = data.pop("sends")
    head = json.dumps(data)[:-1]
    with replaced_file(path) as tmp, open(tmp, "w") as f:
        f.write(head + (', ' if len(data) else '') + '"sends": [\n')
        f.write(",\n".join(json.dumps(r) for r in sends))
        f.write("\n]}\n")


def read_json(path: str | Path) -> Schedule:
    """Read a schedule JSON file; errors name the file."""
    where = str(path)
    text = read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(where, f"malformed JSON: {e}") from None
    except RecursionError:
        raise InputError(where, "malformed JSON: nested too deeply") from None
    return from_json(data, where)


def check_header(schedule: Schedule, instance, where: str = "schedule") -> None:
    """Refuse a schedule whose header does not describe ``instance``: ``collective`` must be
    its kind (``concurrent`` for several collectives), ``nodes`` its topology's node ids and
    ``chunks`` its chunk ids (summed over concurrent collectives). Errors name ``where`` and
    the field; a schedule written for another instance is never verified against this one.
    """
    colls = instance.collectives
    want = {
        "collective": colls[0].kind if len(colls) == 1 else "concurrent",
        "nodes": instance.topology.size,
        "chunks": sum(c.num_chunks for c in colls),
    }
    have = {"collective": schedule.collective, "nodes": schedule.nodes, "chunks": schedule.chunks}
    for name, value in want.items():
        if have[name] != value:
            raise InputError(f"{where}: {name}", f"expected {value!r} for instance {instance.name!r}, "
                                                 f"got {have[name]!r}")


# ---- algebra: reversal, concatenation, relabelling, merging ---------------------------------

def reverse(schedule: Schedule) -> Schedule:
    """Time reversal: send ``u -> v`` in step ``t`` becomes ``v -> u`` in step ``T + 1 - t``.

    Valid on the transposed topology for the reversed collective (allgather <-> reduce_scatter,
    broadcast <-> reduce, scatter <-> gather; Zhao et al., NSDI 2025, Appendix A). Explicit ``copy`` and
    ``reduce`` ops swap; default ops stay default (they follow the new kind).
    """
    T = schedule.num_steps
    op = schedule.op.copy()
    op[schedule.op == OP_COPY] = OP_REDUCE
    op[schedule.op == OP_REDUCE] = OP_COPY
    return replace(
        schedule,
        collective=REVERSED_KIND[schedule.collective],
        src=schedule.dst.copy(),
        dst=schedule.src.copy(),
        step=T + 1 - schedule.step,
        op=op,
    )


def _common_denom(schedules: Sequence[Schedule]) -> list[Schedule]:
    d = 1
    for s in schedules:
        d = d * s.denom // math.gcd(d, s.denom)
    return [s.with_denom(d) for s in schedules]


def _stack(parts: Sequence[Schedule], collective: str, chunks: int, steps_shift: Sequence[int],
           chunk_shift: Sequence[int], ops: Sequence[int | None], routing: str | None = None) -> Schedule:
    parts = _common_denom(parts)
    op_cols = []
    for p, o in zip(parts, ops):
        op_cols.append(p.op if o is None else np.where(p.op == OP_DEFAULT, o, p.op).astype(np.int8))
    routing = routing or ("shortest-path" if any(p.routing == "shortest-path" for p in parts) else "links")
    link_order = "program" if any(p.link_order == "program" for p in parts) else "ready"
    return from_arrays(
        collective, max(p.nodes for p in parts), chunks,
        chunk=np.concatenate([p.chunk.astype(np.int64) + k for p, k in zip(parts, chunk_shift)]),
        lo=np.concatenate([p.lo for p in parts]), hi=np.concatenate([p.hi for p in parts]),
        src=np.concatenate([p.src for p in parts]), dst=np.concatenate([p.dst for p in parts]),
        step=np.concatenate([p.step.astype(np.int64) + k for p, k in zip(parts, steps_shift)]),
        denom=parts[0].denom, op=np.concatenate(op_cols), routing=routing, link_order=link_order,
    )


def concat(first: Schedule, second: Schedule, collective: str | None = None) -> Schedule:
    """``second`` after ``first`` (its steps shifted past ``first``'s last step).

    Default ops are made explicit from each part's own kind, so reduce_scatter then allgather
    gives an allreduce whose first phase reduces and second copies. The result's
    ``link_order`` is ``"program"`` when either part's is (the whole then runs in program order):

    >>> rs = from_sends([(0, 0, 1, 1, 0, 1)], "reduce_scatter", nodes=2, chunks=2)
    >>> ag = from_sends([(0, 0, 1, 0, 1, 1)], "allgather", nodes=2, chunks=2)
    >>> [s.op for s in concat(rs, ag, "allreduce").sends()]
    ['reduce', 'copy']
    """
    from ..instances.collective import COMBINING

    def default_op(s: Schedule) -> int:
        return OP_REDUCE if s.collective in COMBINING else OP_COPY

    return _stack(
        [first, second], collective or first.collective, max(first.chunks, second.chunks),
        [0, first.num_steps], [0, 0], [default_op(first), default_op(second)],
    )


def merge(schedules: Sequence[Schedule], chunk_offsets: Sequence[int], collective: str = "concurrent") -> Schedule:
    """Concurrent schedules sharing one network: same step numbers, chunk ids shifted.

    ``chunk_offsets[i]`` is where schedule i's chunk ids start (``Instance.chunk_offsets``).
    Default ops are made explicit per part, so the merged schedule keeps each one's semantics.
    """
    from ..instances.collective import COMBINING

    ops = [OP_REDUCE if s.collective in COMBINING else OP_COPY for s in schedules]
    chunks = max(o + s.chunks for s, o in zip(schedules, chunk_offsets))
    return _stack(list(schedules), collective, chunks, [0] * len(schedules), list(chunk_offsets), ops)


def split(schedule: Schedule, chunk_offsets: Sequence[int], kinds: Sequence[str], chunk_counts: Sequence[int]) -> list[Schedule]:
    """Undo :func:`merge`: the part of each concurrent collective, chunk ids shifted back."""
    out = []
    for off, kind, n in zip(chunk_offsets, kinds, chunk_counts):
        mask = (schedule.chunk >= off) & (schedule.chunk < off + n)
        part = schedule.select(mask)
        out.append(replace(part, collective=kind, chunks=n, chunk=part.chunk - off))
    return out


def relabel_chunks(kind: str, chunk: np.ndarray, perm: np.ndarray, size: int, chunks: int) -> np.ndarray:
    """Chunk ids after renaming node ``i`` to ``perm[i]`` (chunk ids encode owner nodes)."""
    chunk = np.asarray(chunk, dtype=np.int64)
    if kind in ("broadcast", "reduce"):
        return chunk.copy()
    if kind == "alltoall":
        c = chunks // (size * size)
        j = chunk % c
        pair = chunk // c
        i, k = pair // size, pair % size
        return (perm[i] * size + perm[k]) * c + j
    c = chunks // size
    return perm[chunk // c] * c + chunk % c


def relabel(schedule: Schedule, perm: Sequence[int]) -> Schedule:
    """Rename node ``i`` to ``perm[i]`` in sends and in chunk ids (``perm`` is a permutation)."""
    p = np.asarray(perm, dtype=np.int64)
    if sorted(p.tolist()) != list(range(schedule.nodes)):
        raise ValueError(f"perm must be a permutation of 0..{schedule.nodes - 1}")
    return replace(
        schedule,
        chunk=relabel_chunks(schedule.collective, schedule.chunk, p, schedule.nodes, schedule.chunks),
        src=p[schedule.src],
        dst=p[schedule.dst],
    )
