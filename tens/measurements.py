"""Published measurements: nccl-tests output files and the manifests that tie them to programs.

A measurement is what NVIDIA's nccl-tests (``all_gather_perf``, ``all_reduce_perf``,
``reduce_scatter_perf``; also msccl-tests-nccl and rccl-tests, which print the same table)
printed for one program on one machine: per message size, an out-of-place and an in-place
column of ``time (us), algbw (GB/s), busbw (GB/s), #wrong``. ``size`` is the bytes of the
larger buffer (allgather: the output, reduce-scatter: the input, allreduce: the buffer), so
``algbw = size / time``.

:func:`read_nccl_tests` parses such a file; anything else (no result table, a row that is not
numbers) is an :class:`~collsynth.InputError` naming the file and the line. :func:`read_manifest`
reads a measurement manifest (TOML): the system's instance files, and per measurement the
program (an MSCCL XML file, possibly ``.xz``), its log, the ``NCCL_BUFFSIZE`` it ran with and
which column ran the program (an ``inplace="1"`` program runs in the in-place column only;
the out-of-place column is then NCCL's own algorithm).

>>> rows = parse_nccl_tests('''#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
...      1048576         16384     float    none      -1    157.0    6.68    6.26    N/A    104.8   10.01    9.38    N/A
... ''', "log.txt")
>>> rows["size"].tolist(), rows["in_place_us"].tolist()
([1048576], [104.8])
"""

from __future__ import annotations

import lzma
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import InputError

__all__ = ["Measurement", "Manifest", "COUNT_SCOPES", "parse_nccl_tests", "split_log_line", "read_nccl_tests", "read_manifest", "read_program_text",
           "read_transports", "read_fixed", "TRANSPORTS"]

COLUMNS = ("out-of-place", "in-place")


_LAUNCHER_TAG = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")
# host:pid:tid [device] [source:line] NCCL INFO|WARN; the host name starts with a letter, which
# tells it from the row's last field when the library printed it right after that field.
_LOG_MESSAGE = re.compile(r"[A-Za-z][\w.-]*:\d+:\d+ \[\d+\] (?:\S+ )?NCCL (?:INFO|WARN|TRACE)\b")
_HEADER = "expected 'size count type [redop root] time algbw busbw #wrong time algbw busbw #wrong'"


def split_log_line(line: str) -> tuple[str, str, bool]:
    """``(tag, text, cut)`` of one line of a launcher's output: Open MPI's ``--tag-output``
    prefix (``[1,0]<stdout>:``, or ``""``), the text before any NCCL/RCCL log message
    (``host:pid:tid [dev] NCCL INFO ...``) that the library printed into it, and whether such a
    message cut the line. A line that is only a log message has an empty ``text``.

    >>> split_log_line("[1,0]<stdout>:     0     0  float  none  -1mi2:12:12 [0] NCCL INFO RCCL_MSCCL_FORCE_ENABLE set")
    ('[1,0]<stdout>:', '     0     0  float  none  -1', True)
    >>> split_log_line("[1,7]<stdout>:mi2:44:85 [7] /src/misc/socket.cc:57 NCCL WARN socketProgress: closed")
    ('[1,7]<stdout>:', '', True)
    >>> split_log_line("      1024   16  float  none  -1  38.62  0.03  0.02  N/A  38.52  0.03  0.02  N/A")[2]
    False
    """
    m = _LAUNCHER_TAG.match(line)
    tag = m.group(0) if m else ""
    text = line[len(tag):]
    msg = _LOG_MESSAGE.search(text)
    return (tag, text[:msg.start()], True) if msg else (tag, text, False)


def _row(tokens: list[str], text: str, where: str) -> tuple[int, float, float, int]:
    """``(size, out-of-place us, in-place us, count)`` of one result row's ``tokens``."""
    if len(tokens) < 11:
        raise InputError(where, f"{_HEADER}, got {text.strip()!r}")
    try:
        size, count = int(tokens[0]), int(tokens[1])
        oop, ip = float(tokens[-8]), float(tokens[-4])
        float(tokens[-7]), float(tokens[-3])
    except ValueError:
        raise InputError(where, f"expected numbers in the size, count, time and algbw columns, got {text.strip()!r}") from None
    if not (0 < oop < float("inf") and 0 < ip < float("inf")):
        raise InputError(where, f"expected positive finite times, got {text.strip()!r}")
    return size, oop, ip, count


def parse_nccl_tests(text: str, where: str) -> dict[str, np.ndarray]:
    """The result rows of nccl-tests output ``text``: columns ``size`` (bytes),
    ``out_of_place_us`` and ``in_place_us`` (times in microseconds) and ``count`` (elements, as
    nccl-tests passes it to the collective: per rank for allgather and reduce-scatter). Rows are the lines after the
    ``# size count type ...`` header that start with a number; each must end in two groups of
    ``time algbw busbw #wrong``. Output captured through ``mpirun --tag-output`` is read too:
    each line's ``[job,rank]<stdout>:`` prefix is dropped, NCCL/RCCL ``INFO``/``WARN`` lines are
    skipped, and a row that such a message cut (the library printed into the middle of it) is
    joined with the next line of the same rank that is not a message. An
    :class:`~collsynth.InputError` names ``where`` and the line of a malformed row (of a cut
    row, the line where it starts), or says no result table was found."""
    header_seen, rows, cut = False, [], {}
    for lineno, line in enumerate(text.splitlines(), 1):
        tag, body, was_cut = split_log_line(line)
        if not body.strip():
            continue
        joined = tag in cut
        if joined:
            start, head = cut.pop(tag)
            lineno, body = start, head + " " + body
        tokens = body.split()
        if joined and len(tokens) not in (11, 13):
            raise InputError(f"{where}:{lineno}", f"{_HEADER}, got a row cut by a log message and joined "
                                                  f"with its next line into {body.strip()!r}")
        if tokens[0] == "#" and len(tokens) > 3 and tokens[1:4] == ["size", "count", "type"]:
            header_seen = True
            continue
        if not header_seen or not tokens[0].isdigit():
            continue
        if was_cut and len(tokens) < 11:
            if len(tokens) < 3 or not (tokens[1].isdigit() and tokens[2][:1].isalpha()):
                raise InputError(f"{where}:{lineno}", f"{_HEADER} before the log message, got {body.strip()!r}")
            cut[tag] = (lineno, body)
            continue
        rows.append(_row(tokens, body, f"{where}:{lineno}"))
    for tag, (start, head) in cut.items():
        raise InputError(f"{where}:{start}", f"{_HEADER}, got a row cut by a log message and never "
                                             f"completed: {head.strip()!r}")
    if not rows:
        raise InputError(where, "not nccl-tests output: no '#  size  count  type ...' header followed by result rows")
    a = np.array(rows, dtype=np.float64)
    return {"size": a[:, 0].astype(np.int64), "out_of_place_us": a[:, 1], "in_place_us": a[:, 2],
            "count": a[:, 3].astype(np.int64)}


def read_nccl_tests(path: str | Path) -> dict[str, np.ndarray]:
    """:func:`parse_nccl_tests` of the file ``path``, decompressed if it ends in ``.xz`` (errors
    name the file)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        text = (lzma.decompress(raw) if path.suffix == ".xz" else raw).decode(errors="replace")
    except (OSError, lzma.LZMAError) as e:
        raise InputError(str(path), f"cannot read: {getattr(e, 'strerror', None) or e}") from None
    return parse_nccl_tests(text, str(path))


def read_program_text(path: str | Path) -> str:
    """The text of an MSCCL XML program file (``.xz`` files are decompressed)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        return (lzma.decompress(raw) if path.suffix == ".xz" else raw).decode()
    except (OSError, lzma.LZMAError, UnicodeDecodeError) as e:
        raise InputError(str(path), f"cannot read the program: {getattr(e, 'strerror', None) or e}") from None


@dataclass(frozen=True)
class Measurement:
    """One program measured on one system: the program file, the instance file of its
    collective, the log, ``buff_bytes`` (``NCCL_BUFFSIZE``), the column that ran the program,
    the smallest size that ran it (``min_bytes``), a name and whether it is held out of design
    and calibration (``held_out``), and the runtime that ran it when it is not the manifest's
    main one (``runtime``, a name of ``Calibration.runtimes``; ``""`` for the main one); a
    held-out measurement may name the held-out set it belongs to (``held_out_set``, reported
    apart; ``""``: the manifest's first one), and which count its runtime's scheduler tests
    (``count_scope``, one of :data:`COUNT_SCOPES`; ``""``: the manifest's ``count_scope``)."""

    name: str
    program: Path
    instance: Path
    log: Path
    buff_bytes: int
    column: str
    min_bytes: int
    held_out: bool
    runtime: str = ""
    held_out_set: str = ""
    count_scope: str = ""


TRANSPORTS = ("read", "write")
COUNT_SCOPES = ("rank", "collective")


@dataclass(frozen=True)
class Manifest:
    """A system's measurements (:class:`Measurement`), its name, the source they cite and how
    its runtime moves data over each link class (``transports``: class -> ``"read"`` or
    ``"write"``, :func:`collsynth.tens.runtime_program.program_features`; a class it does not
    name is ``"write"``). ``fixed``: the runtime parameters set from a cited source instead of
    fitted (:func:`read_fixed`; empty: all fitted). ``share_floors``: whether the fit bounds each
    link share below by what the fitted measurements moved
    (:func:`collsynth.tens.calibration.share_floors`; the manifest's ``share_floors``, default
    true). ``link_slice_cost``: whether the fit also fits a link's cost per slice crossing it
    (``link_slice_s``, :func:`collsynth.tens.cost_models.runtime.port_times`; default false: 0).
    ``serial_links``: whether the runtime model's thread blocks pay their fixed costs on
    top of their busiest link's time (``Calibration.serial_links``; default false).
    ``credit_start``: whether the fit also starts from the per-slice costs on the connections'
    credit and keeps the better fit (:func:`collsynth.tens.calibration.fit`; default false).
    ``sms``: the streaming multiprocessors (compute units) of one GPU, beyond which a GPU's
    thread blocks share SMs (``Calibration.sms``; default 0: not modelled). ``fair_links``:
    whether a copy on an iteration's chain runs no faster than its link's fair share between
    its connections (``Calibration.fair_links``; default false).
    ``fences``:
    whether the GPU's shared cost per slice is the slice's fence (``Calibration.fences``;
    default false). ``block_waves``: whether an SM runs one thread block, those beyond the
    SMs waiting for one to exit (``Calibration.block_waves``; default false: two share an SM).
    ``executor_counts``: whether a log's rows whose ``count`` the MSCCL
    executor refuses (not a multiple of the program's ``nchunksperloop``: the collective ran as
    the library's own algorithm) are left out (:func:`collsynth.tens.calibration.ran_program`;
    default false: every row from ``min_bytes``). ``count_scope``: which count that executor
    tests, one of :data:`COUNT_SCOPES` (:func:`collsynth.tens.calibration.scheduler_counts`;
    default ``"rank"``; a measurement's own ``count_scope`` overrides it). ``net_credit``: the
    network link classes whose credit a call is fitted (``Calibration.net_credit``; default none: not modelled).
    ``nic_credit``: whether each round of an iteration's chain over a NIC pays the connection's
    credit round trip, fitted (``Calibration.nic_credit``; default false).
    ``multi_start``: whether the fit runs from several fixed starts and keeps the one of least
    in-sample error (:func:`collsynth.tens.calibration.start_points`; default false).
    ``shared_chain``: whether a share of the GPU's shared cost per slice adds to the first
    iteration's chain, fitted (``Calibration.shared_chain``; default false)."""

    system: str
    source: str
    measurements: tuple[Measurement, ...]
    transports: dict = field(default_factory=dict)
    fixed: dict = field(default_factory=dict)
    share_floors: bool = True
    link_slice_cost: bool = False
    serial_links: bool = False
    credit_start: bool = False
    sms: int = 0
    fair_links: bool = False
    fences: bool = False
    block_waves: bool = False
    executor_counts: bool = False
    count_scope: str = "rank"
    net_credit: tuple = ()
    nic_credit: bool = False
    multi_start: bool = False
    shared_chain: bool = False


def _field(entry: dict, key: str, kind, where: str, default=None):
    v = entry.get(key, default)
    if v is None or not isinstance(v, kind) or isinstance(v, bool) and kind is not bool:
        raise InputError(f"{where}.{key}", f"expected a {kind.__name__}, got {v!r}")
    return v


def read_manifest(path: str | Path) -> Manifest:
    """The measurement manifest at ``path`` (TOML: ``system``, ``source``, and
    ``[[measurement]]`` tables with ``name, program, instance, log, buff_bytes, column,
    min_bytes, held_out`` and optionally ``runtime`` and ``held_out_set``; paths relative to the manifest; optionally a
    ``[transports]`` table, a ``[fixed]`` one, ``share_floors`` and ``link_slice_cost``, :class:`Manifest`)."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise InputError(str(path), f"cannot read the manifest: {getattr(e, 'strerror', None) or e}") from None
    base = path.parent
    out = []
    for k, entry in enumerate(data.get("measurement", [])):
        where = f"{path}: measurement[{k}]"
        column = _field(entry, "column", str, where, "in-place")
        if column not in COLUMNS:
            raise InputError(f"{where}.column", f"expected one of {', '.join(COLUMNS)}, got {column!r}")
        out.append(Measurement(
            name=_field(entry, "name", str, where), program=base / _field(entry, "program", str, where),
            instance=base / _field(entry, "instance", str, where), log=base / _field(entry, "log", str, where),
            buff_bytes=_field(entry, "buff_bytes", int, where, 4 << 20), column=column,
            min_bytes=_field(entry, "min_bytes", int, where, 0),
            held_out=_field(entry, "held_out", bool, where, False),
            runtime=_field(entry, "runtime", str, where, ""),
            held_out_set=_field(entry, "held_out_set", str, where, ""),
            count_scope=_count_scope(entry, where, "")))
    if not out:
        raise InputError(str(path), "expected at least one [[measurement]] table")
    return Manifest(system=_field(data, "system", str, str(path)), source=_field(data, "source", str, str(path)),
                    measurements=tuple(out), transports=read_transports(data.get("transports", {}), f"{path}: transports"),
                    fixed=read_fixed(data.get("fixed", {}), f"{path}: fixed"),
                    share_floors=_field(data, "share_floors", bool, str(path), True),
                    link_slice_cost=_field(data, "link_slice_cost", bool, str(path), False),
                    serial_links=_field(data, "serial_links", bool, str(path), False),
                    credit_start=_field(data, "credit_start", bool, str(path), False),
                    sms=_sms(data, str(path)), fair_links=_field(data, "fair_links", bool, str(path), False),
                    fences=_field(data, "fences", bool, str(path), False),
                    block_waves=_field(data, "block_waves", bool, str(path), False),
                    executor_counts=_field(data, "executor_counts", bool, str(path), False),
                    count_scope=_count_scope(data, str(path), "rank"),
                    net_credit=_net_credit(data, str(path)),
                    nic_credit=_field(data, "nic_credit", bool, str(path), False),
                    multi_start=_field(data, "multi_start", bool, str(path), False),
                    shared_chain=_field(data, "shared_chain", bool, str(path), False))


def _count_scope(data: dict, where: str, default: str) -> str:
    """The ``count_scope`` of a manifest or a measurement table (``default`` when absent), one
    of :data:`COUNT_SCOPES`."""
    v = _field(data, "count_scope", str, where, default)
    if v not in COUNT_SCOPES + (default,):
        raise InputError(f"{where}.count_scope", f"expected one of {', '.join(COUNT_SCOPES)}, got {v!r}")
    return v


def _net_credit(data: dict, where: str) -> tuple:
    """The manifest's ``net_credit``: a list of link class names (none when absent)."""
    v = _field(data, "net_credit", list, where, [])
    if not all(isinstance(c, str) and c for c in v):
        raise InputError(f"{where}.net_credit", f"expected a list of link class names, got {v!r}")
    return tuple(v)


def _sms(data: dict, where: str) -> int:
    """The manifest's ``sms`` (0 when absent), a whole number from 0 up."""
    v = _field(data, "sms", int, where, 0)
    if v < 0:
        raise InputError(f"{where}.sms", f"expected a whole number of SMs from 0 up, got {v}")
    return v


def read_transports(data, where: str) -> dict:
    """A ``transports`` table (link class -> one of :data:`TRANSPORTS`) checked; errors name
    ``where`` and the class.

    >>> read_transports({"nvswitch": "read"}, "m.toml: transports")
    {'nvswitch': 'read'}
    >>> read_transports({"nvswitch": "pull"}, "m.toml: transports")
    Traceback (most recent call last):
    collsynth.InputError: m.toml: transports.nvswitch: expected one of read, write, got 'pull'
    """
    if not isinstance(data, dict):
        raise InputError(where, f"expected a table of link class -> one of {', '.join(TRANSPORTS)}")
    for c, mode in data.items():
        if mode not in TRANSPORTS:
            raise InputError(f"{where}.{c}", f"expected one of {', '.join(TRANSPORTS)}, got {mode!r}")
    return {str(c): str(m) for c, m in data.items()}


def read_fixed(data, where: str) -> dict:
    """A manifest's ``[fixed]`` table checked: ``source`` (the citation, a string) and
    ``efficiency`` (link class -> share of the nominal bandwidth in (0, 1]), the link shares the
    fit keeps at these values (:func:`collsynth.tens.calibration.pin_fixed`); errors name
    ``where`` and the field.

    >>> read_fixed({"source": "RCCL", "efficiency": {"nic": 0.63}}, "m.toml: fixed")
    {'source': 'RCCL', 'efficiency': {'nic': 0.63}}
    >>> read_fixed({"source": "RCCL", "efficiency": {"nic": 1.5}}, "m.toml: fixed")
    Traceback (most recent call last):
    collsynth.InputError: m.toml: fixed.efficiency.nic: expected a number in (0, 1], got 1.5
    """
    if not isinstance(data, dict):
        raise InputError(where, "expected a table with source and efficiency")
    if not data:
        return {}
    source = _field(data, "source", str, where)
    shares = _field(data, "efficiency", dict, where)
    for c, v in shares.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1:
            raise InputError(f"{where}.efficiency.{c}", f"expected a number in (0, 1], got {v!r}")
    return {"source": source, "efficiency": {str(c): float(v) for c, v in shares.items()}}
