"""Readers for the peers' own schedules: MSCCL XML and TE-CCL output JSON, as a Schedule.

A schedule another tool wrote is read onto one of our instances, then verified and priced
like ours (``collsynth verify|price FILE INSTANCE.toml --from msccl-xml|teccl-output``):

- :func:`read_msccl_xml`: the MSCCL XML program format (``<algo><gpu><tb><step type=s|r|rcs|
  rrc|rrs|rrcs|cpy|nop ...>``) that msccl-tools (Cowan et al., ASPLOS 2023, MSCCLang), TACCL
  (Shah et al., NSDI 2023) and ForestColl (Zhao et al., arXiv 2402.06787) write. GPU ids are
  the collective's ranks (the instance's collective nodes in order). The program is checked
  here for what would otherwise fail deep inside (well-formedness, the ``algo`` attributes,
  GPU and peer ids inside the instance's ranks, step attributes; an in-place allreduce's
  ``o`` is its ``i``, as ``sendbuff == recvbuff`` makes it) and then executed by
  :func:`collsynth.tens.msccl_read.interpret_msccl_xml` (send/receive pairing per channel, steps
  by dependency depth). A send between two ranks that no link joins (a program for GPUs
  behind NVSwitch or a NIC fabric names GPUs, not switches) makes the schedule's routing
  ``shortest-path``: the verifier then checks a route exists and the cost models charge
  every link of it.
- :func:`read_teccl_output`: TE-CCL's output JSON (Liu et al., SIGCOMM 2024; microsoft/TE-CCL
  ``teccl/solvers/allgather.py``, ``dfs_remove_unnecessary_flows``): its ``7-Flows`` strings
  ``Chunk c from s traveled over i->j in epoch k [via switches w -> ...]`` become sends of
  chunk ``s*C + c`` (allgather), hop by hop through the switches. ``1-Epoch_Duration`` is
  the schedule's TEN timestep (``meta.timestep_s``), so a step is an epoch and a send's step
  is its arrival: the first hop reads its source at the end of step ``k`` (what arrived by
  epoch ``k - 1``) and every hop arrives its link's delay plus pipelined latency later, less
  one over an instant switch-to-GPU hop (:func:`collsynth.tens.verify.ten_timing`, the
  verifier's own timing). TE-CCL numbers a chassis' switch before its GPUs (its
  ``dgx2.py``: switch ``17c``, GPU ``17c + 1 + g``); on a topology with one switch per chassis
  (``meta.gpus_per_chassis``) ids are mapped that way, elsewhere they are our node ids.
  All-to-all outputs (volumes per path) are refused.

- ``mscclpp-json``: an MSCCL++ execution plan, run op by op (:mod:`collsynth.tens.peer_plans`).

Errors are :class:`~collsynth.InputError` naming the file and the field, and for an MSCCL
XML program the line of the element at fault (:func:`program_error`).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import numpy as np


from .. import InputError
from ..instances.instance import Instance
from .choices import PEER_SCHEDULE_FORMATS
from .msccl_format import STEP_ATTRS
from .msccl_read import algo_root, interpret_msccl_xml
from .peer_plans import json_object, read_mscclpp_plan
from .schedule import Schedule, from_sends
from .ten import instant_hops
from .verify import ten_timing

FORMATS = PEER_SCHEDULE_FORMATS
FLOW = re.compile(r"Chunk (\d+) from (\d+) traveled over (\d+)->(\d+) (?:in|at) epoch (\d+)(?: via switches ([\d >-]+))?\s*$")


def read_peer_schedule(path: str | Path, fmt: str, instance: Instance) -> Schedule:
    """The schedule in ``path`` (format ``fmt``: msccl-xml or teccl-output) on ``instance``."""
    if fmt not in FORMATS:
        raise InputError("--from", f"expected one of {', '.join(FORMATS)}, got {fmt!r}")
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(str(path), f"cannot read: {getattr(e, 'strerror', None) or e}") from None
    try:
        return read_peer_text(text, fmt, instance)
    except InputError as e:
        if fmt == "msccl-xml":
            raise program_error(path, text, e) from None
        raise InputError(str(path), f"{e.where}: {e.what}") from None


# where an MSCCL XML reader's error points: the algo element, a GPU, a thread block, a step
_ELEMENT = re.compile(r"^(?:xml: )?(?:algo\b|gpu (\d+)(?: tb (\d+)(?: step (-?\d+))?)?\b)")
_PARSE_LINE = re.compile(r"line (\d+), column \d+")


def program_error(path, text: str, error: InputError) -> InputError:
    """``error``, raised reading the MSCCL XML program ``text`` of file ``path``, as one naming
    the file and the line: ``path:line: field: what``, the line of the element the error's
    field names (the ``algo`` element, ``gpu G``, ``gpu G tb T``, ``gpu G tb T step S``) or
    where the text stops being well formed; just ``path`` for an error of the whole program
    (unpaired sends, circular dependencies).

    >>> text = '<algo ngpus="2">\\n <gpu id="0">\\n  <tb id="0" send="5"/>\\n </gpu>\\n</algo>'
    >>> str(program_error("p.xml", text, InputError("gpu 0 tb 0.send", "5 is outside -1..1")))
    'p.xml:3: gpu 0 tb 0.send: 5 is outside -1..1'
    >>> str(program_error("p.xml", text, InputError("xml", "circular dependencies between steps")))
    'p.xml: xml: circular dependencies between steps'
    """
    parsed = _PARSE_LINE.search(error.what) if error.where == "xml" else None
    line = int(parsed[1]) if parsed else _element_line(text, error.where)
    return InputError(f"{path}:{line}" if line else str(path), f"{error.where}: {error.what}")


def _element_line(text: str, where: str) -> int | None:
    """The line of the first element of ``text`` that ``where`` names (:data:`_ELEMENT`), if any."""
    from xml.parsers import expat

    m = _ELEMENT.match(where)
    if m is None:
        return None
    want = tuple(x for x in m.groups() if x is not None)
    found: dict[tuple, int] = {}
    path: list[str] = []
    parser = expat.ParserCreate()

    def start(tag, attrs):
        key = {"algo": (), "gpu": (attrs.get("id"),), "tb": (*path[:1], attrs.get("id")),
               "step": (*path[:2], attrs.get("s"))}.get(tag)
        if tag in ("gpu", "tb"):
            path[:] = list(key)
        if key is not None:
            found.setdefault(key, parser.CurrentLineNumber)

    parser.StartElementHandler = start
    try:
        parser.Parse(text, True)
    except expat.ExpatError:
        pass  # what was read before the error locates elements before it
    return found.get(want)


def read_peer_text(text: str, fmt: str, instance: Instance) -> Schedule:
    """The schedule that ``text`` (format ``fmt``, one of :data:`FORMATS`) runs on ``instance``:
    the reader every file is read with, and every plan or program we export is read back with
    before it is written (:func:`collsynth.tens.readback.verified_msccl_xml`,
    :func:`collsynth.tens.readback.verified_mscclpp_plan`)."""
    reader = {"msccl-xml": read_msccl_xml, "teccl-output": read_teccl_output, "mscclpp-json": read_mscclpp_plan}[fmt]
    schedule = reader(text, instance)
    return _routed(schedule, instance) if fmt == "mscclpp-json" else schedule


def _xml_int(el: ET.Element, attr: str, where: str, lo: int | None = None, hi: int | None = None) -> int:
    v = el.get(attr)
    if v is None:
        raise InputError(where, f"missing attribute {attr!r}")
    try:
        x = int(v)
    except ValueError:
        raise InputError(f"{where}.{attr}", f"expected an integer, got {v!r}") from None
    if (lo is not None and x < lo) or (hi is not None and x > hi):
        raise InputError(f"{where}.{attr}", f"{x} is outside {lo}..{hi} (the instance's ranks)")
    return x


def read_msccl_xml(text: str, instance: Instance) -> Schedule:
    """The schedule an MSCCL XML program executes on ``instance`` (see the module doc)."""
    root = algo_root(text)
    n = len(instance.collective.nodes)
    ngpus = _xml_int(root, "ngpus", "algo")
    if ngpus != n:
        raise InputError("algo.ngpus", f"the program has {ngpus} GPUs, the instance's collective {n} ranks")
    for gpu in root.findall("gpu"):
        g = _xml_int(gpu, "id", "gpu", 0, n - 1)
        for tb in gpu.findall("tb"):
            where = f"gpu {g} tb {tb.get('id')}"
            for a in ("send", "recv"):
                _xml_int(tb, a, where, -1, n - 1)
            _xml_int(tb, "chan", where, 0)
            for st in tb.findall("step"):
                for a in STEP_ATTRS:
                    if st.get(a) is None:
                        raise InputError(f"{where} step {st.get('s')}", f"missing attribute {a!r}")
    if root.get("coll") == "allreduce" and root.get("inplace") == "1":
        for st in root.iter("step"):  # in place, an allreduce's output buffer is its input buffer
            for a in ("srcbuf", "dstbuf"):
                if st.get(a) == "o":
                    st.set(a, "i")
        text = ET.tostring(root, encoding="unicode")
    try:
        schedule = interpret_msccl_xml(text, instance)
    except (IndexError, KeyError, ValueError) as e:
        if isinstance(e, InputError):
            raise
        raise InputError("xml", f"the program does not describe this instance's collective ({type(e).__name__}: {e})") from None
    schedule = replace(schedule, meta={**schedule.meta, "msccl_program": text})  # the runtime model prices it as written
    return _routed(schedule, instance)


def _routed(schedule: Schedule, instance: Instance) -> Schedule:
    """``shortest-path`` routing when some send joins two nodes no link joins."""
    if not len(schedule):
        return schedule
    pair = instance.topology.link_arrays.lookup(schedule.src, schedule.dst)
    return replace(schedule, routing="shortest-path") if (pair < 0).any() else schedule


def _teccl_ids(instance: Instance):
    """TE-CCL node id -> our node id (see the module doc)."""
    topo = instance.topology
    per = topo.meta.get("gpus_per_chassis") if isinstance(topo.meta, dict) else None
    if not per or not topo.switches:
        return lambda t: t
    npus = len(topo.npus)
    chassis = npus // per
    if len(topo.switches) != chassis:
        return lambda t: t

    def ours(t: int) -> int:
        c, k = divmod(t, per + 1)
        return npus + c if k == 0 else c * per + k - 1
    return ours


def read_teccl_output(text: str, instance: Instance) -> Schedule:
    """The schedule of a TE-CCL allgather output JSON on ``instance`` (see the module doc)."""
    data = json_object(text, "an object with 7-Flows")
    coll = instance.collective
    if coll.kind != "allgather":
        raise InputError("instance", f"TE-CCL outputs are read for allgather; this instance is a {coll.kind}")
    flows = data.get("7-Flows")
    if not isinstance(flows, list):
        raise InputError("7-Flows", "missing, or not a list of flow strings")
    epoch = data.get("1-Epoch_Duration")
    if not isinstance(epoch, (int, float)) or isinstance(epoch, bool) or not epoch > 0:
        raise InputError("1-Epoch_Duration", f"expected a positive number of seconds, got {epoch!r}")
    ours = _teccl_ids(instance)
    S, C = coll.size, coll.chunks_per_node
    rows, epochs, flow_of = [], [], []
    for k, flow in enumerate(flows):
        m = FLOW.match(flow) if isinstance(flow, str) else None
        if m is None:
            raise InputError(f"7-Flows[{k}]", f"expected 'Chunk c from s traveled over i->j in epoch k [via switches ...]', got {flow!r}")
        c, s, i, j, e = (int(x) for x in m.groups()[:5])
        hops = [ours(i)] + [ours(int(w)) for w in re.findall(r"\d+", m.group(6) or "")] + [ours(j)]
        for node, what in ((ours(s), "source"), *((h, "node") for h in hops)):
            if not 0 <= node < S:
                raise InputError(f"7-Flows[{k}]", f"{what} {node} is outside the instance's node ids 0..{S - 1}")
        if c >= C:
            raise InputError(f"7-Flows[{k}]", f"chunk {c}, the instance has {C} chunk(s) per GPU")
        for a, b in zip(hops, hops[1:]):
            rows.append([ours(s) * C + c, 0, 1, a, b, 1])
            epochs.append(e)
            flow_of.append(k)
    meta = {"timestep_s": float(epoch), "peer": "teccl-output"}
    probe = from_sends(rows, coll.kind, S, coll.num_chunks, meta=meta)
    timing = ten_timing(probe, instance)
    lag = np.ones(len(rows), np.int64) if timing is None else \
        timing[0] + timing[1] - instant_hops(instance.topology, probe.src, probe.dst).astype(np.int64)
    step = 0
    for r in range(len(rows)):  # a flow's first hop reads at the end of step e, each hop arrives lag later
        step = (epochs[r] if r == 0 or flow_of[r] != flow_of[r - 1] else step) + int(lag[r])
        rows[r][5] = max(step, 1)
    sched = from_sends(rows, coll.kind, S, coll.num_chunks, meta=meta)
    return _routed(sched, instance)


