"""The runtime model: a program priced as an MSCCL-style runtime executes it, with parameters
fitted to measurements of that system (``docs/cost-models.md``, ``docs/fidelity.md``).

The other models are idealisations (the papers' synchronous steps, TACOS' timesteps,
ASTRA-sim's analytical event simulation); this one is meant to predict hardware and is checked
leave-one-out against published nccl-tests measurements (``benchmarks/bench_fidelity.py``).
What it models (:mod:`collsynth.tens.runtime_program` reads the program):

- thread blocks as sequential streams: per loop iteration a thread block spends ``step_s`` per
  call of a step, ``hop_s[class]`` per slice it sends (the receiver's credit returns before its
  buffer slot is reused: a connection holds ``1 / SLICE_FRACTION`` slices, so small buffers are
  latency-bound), the bytes it copies across a link over ``tb_rate`` (what one thread block
  copies per second) and the bytes it reduces over ``reduce_rate`` (a reducing step reads two
  buffers). Which thread block of a connection copies across the link is the P2P transport's
  mode (``Calibration.transports``, :func:`collsynth.tens.runtime_program._copies`): the sender
  on a ``"write"`` connection, the receiver on a ``"read"`` one (NCCL's default between two
  A100s joined by NVLink: ``paths.cc`` ``ncclTopoCheckP2p``, ``p2p.cc``); local copies are
  not charged;
- channels as parallel connections, and links as shared: per iteration every GPU port (its
  NVSwitch port, its own NIC: no PXN, the fabric core non-blocking) carries the bytes of
  every connection through it at ``efficiency[class]`` of its nominal bandwidth, and pays
  ``link_slice_s[class]`` for each slice crossing it beside those bytes (:func:`port_times`;
  fitted where the manifest says ``link_slice_cost = true``, else 0): at a large message a
  link carries as many slices an iteration at every buffer size while its bytes scale with the
  buffer, so small buffers pay it and large ones hardly;
- the buffer processed in ``ceil(chunk / (buff_bytes / 2))`` loop iterations, whatever the
  steps' ``cnt`` (``msccl_kernel.cu``: ``gridOffset += chunkSize``, ``chunkSize`` =
  ``MSCCL_CHUNKSTEPS = NCCL_STEPS / 2`` steps of ``buff_bytes / NCCL_STEPS``); a step of ``cnt``
  k runs as ``ceil(k / m)`` calls, ``m = max(1, (buff_bytes / 2) / chunk)`` below 72
  (``mscclSetupCount``'s ``maxAllowedCount``), and a call of ``n`` bytes moves 2 slices of
  ``max(n / 2, buff_bytes / 128)``, so it sends one non-empty slice up to ``buff_bytes / 128``
  and two above (:func:`call_counts`). Every non-empty slice a thread block sends is credited
  (``hop_s``) and counted in the GPU's shared cost (below): ``postPeer`` fences it
  (``fence_acq_rel_sys`` on NCCL 2.19, ``__threadfence_system`` on 2.12) and an empty one not.
  This is the A100 logs' step at 32-64 MiB: NCCL's ring as XML has 512 chunks a loop, so its
  calls pass ``buff_bytes / 128`` = 32 KiB between 16 and 32 MiB and its fenced slices double;
  TACCL's 512- and 1,024-chunk programs step between 16 and 32 MiB and between 32 and 64 MiB.
  Iterations are pipelined: the first iteration, then one period (the slowest thread block,
  port or GPU) per further iteration. The first iteration lasts at least one period, its
  critical path (``step_s`` per step and ``hop_s[class]`` per hop of the path of most steps,
  and the copies of the iteration's slowest chain at ``tb_rate``: a forward one slice behind its
  sender, since ``genericOp`` posts each slice, and a step that waits for another to finish, the
  previous step of its thread block or a ``depid``, whose flag MSCCL sets after the step's last
  call, a whole step behind: :func:`~collsynth.tens.runtime_program.pipelined_copies`), and
  the iteration run in rounds: a step that waits for another to finish (the next step of its thread block, a
  ``depid``) is a round later, and each round lasts as long as its busiest port or thread
  block. A receive that forwards (``rcs``, ``rrs``) sends slice by slice, so a forwarding hop
  starts one slice, a share ``f`` of the chunk, after its sender; the rounds are counted with
  forwards in their sender's round (``R0``) and one round later (``R1``), and the rounds
  last ``R = (1 - f) R0 + f R1`` (exact for a chain of forwards). Rounds whose flows on the
  busiest link all finish together (fair sharing) are the slowest case; where a link serves
  them one after another, a step waiting for one of them starts before the round ends. The
  first iteration lasts ``P + round_share * max(R - P, 0)``, ``P`` the larger of the critical
  path and the period, ``round_share`` in [0, 1] fitted (``Calibration.round_share``: 1 is
  the rounds in full, the rule before it was fitted, and 0 a fully pipelined iteration).
  With a few iterations this fill, not the period, decides. A thread block runs its whole
  step list once per iteration, in order, so one whose first and last steps are far apart in
  an iteration's chain of transfers starts the next iteration late: in the steady state an
  iteration starts ``D`` of its ``R`` rounds after the previous
  (:func:`collsynth.tens.runtime_program.carried_rounds`), and the period pays the same share
  of the rounds' excess over it, ``round_share * max((D / R) * rounds - period, 0)`` (``D = 1``,
  nothing, for programs of one step a thread block such as ForestColl's);
- with ``Calibration.serial_links`` (MI250), a thread block's fixed costs add to the time the
  busiest link its sends cross takes to carry that link's iteration, not only to its own copy:
  its transfers share the link with the other connections on it, and its per-call waits (the
  credit of its connection's buffer) come on top, so a chain of steps over a busy link, RCCL's
  ring, costs its latency plus the link's time rather than the larger of the two
  (:func:`_tb_transfer`);
- with ``Calibration.sms`` (a GPU's streaming multiprocessors), a program one of whose GPUs
  runs more thread blocks than that runs two on some SMs, and every thread block copies and
  reduces at half rate (:func:`shared_sms`);
- with ``Calibration.block_waves`` (and ``sms``), an SM runs one thread block (NCCL's kernels
  are built for one block an SM), so the blocks beyond a GPU's SMs start once earlier ones
  have exited and run their iterations after them (:func:`late_blocks`), instead of two blocks
  sharing an SM at half rate;
- with ``Calibration.fair_links``, a link serves the connections that cross it fairly, so a
  copy on the first iteration's chain runs no faster than the link's calibrated bandwidth over
  the connections crossing it (:func:`fair_link_copies`; tried on the A100 and not kept, no
  shipped calibration sets it: ``docs/fidelity.md``);
- with ``Calibration.fences`` (MI250), the GPU's shared cost per slice is the slice's
  system-scope fence: an empty slice skips it (:func:`fenced_slices`), and in a program whose
  thread blocks hold the next iteration back (RCCL's ring) it adds to the busiest link's bytes
  (:func:`carried_fences`);
- with ``Calibration.net_credit`` (MI250), a call a thread block makes over a network
  connection waits for its receiver's credit on top of its link's bytes, so a thread block of
  many calls over the NIC (RCCL's ring) pays its waits and the link's iteration in series
  (:func:`net_credit_period`; tried, inert on the fitted rows, no shipped calibration sets it:
  ``docs/fidelity.md``);
- with ``Calibration.nic_credit``, each round of an iteration's chain in which a step crosses
  a NIC pays the connection's credit round trip ``credit_s`` beyond its bytes
  (:func:`chain_credits`): the rounds are otherwise priced at link rates alone;
- with ``Calibration.shared_chain``, the first iteration's chain of steps (the critical path,
  or the busiest thread block's steps) does not overlap the GPU's shared cost per slice
  (below) in full: a share ``chain_share`` of it adds to the chain (:func:`chained_shared`);
- a GPU's shared cost per slice: every non-empty slice a GPU sends or receives over a
  connection of class ``c`` costs ``gpu_op_s[c]`` of a resource all its thread blocks share,
  one after another per iteration, so that more thread blocks doing less each stop helping.
  On the 2x8 A100 the fit puts 0.25 us on NVLink slices and none on IB ones, so it is not
  NCCL's network proxy thread; the system-scope fence and flag store of each sent slice are
  the source's candidates (not measured in isolation);
- a fixed cost per kernel (``launch_s``) and per thread block of the busiest GPU (``tb_s``);
- the protocol: Simple moves whole buffers; LL moves 8 bytes of which 4 are data (half the
  bandwidth) and LL128 120 of every 128 (NCCL's protocol design, ``src/device/prims_ll.h``,
  ``prims_ll128.h``). Only Simple was measured, so the other two factors are not fitted.

- the runtime build: a calibration describes the runtime most of its measurements ran on;
  another one measured on the same machine (``Calibration.runtimes``: on the A100,
  msccl-executor on NCCL 2.19 ran NCCL's ring, MSCCL 0.7.4 on NCCL 2.12 the rest) scales the
  fixed costs and the links' shares and has its own empty-slice share (:func:`for_runtime`),
  fitted with the rest.

Not modelled: reduction arithmetic beyond its step cost, contention inside the fabric core,
PXN, NVLS, the proxy thread's scheduling, clock and power effects, more thread blocks than
SMs where a calibration has no ``sms``, copies within a GPU's memory (a sender's into its own
buffer on a ``"read"`` connection,
a receiver's out of its buffer on a ``"write"`` one), MSCCL 0.7.4's ``maxAllowedCount`` for allgather (it
divides the per-rank byte count, the model the whole buffer's, as msccl-executor does). A
schedule that is not a program (our producers') is priced as its exported MSCCL XML
(:func:`collsynth.tens.export.to_msccl_xml`) would run, for the calibration's main runtime,
on the grid (pieces per chunk, :func:`collsynth.tens.coarsen.coarsen`) whose export prices
lowest, from the finest MSCCL takes down to 1/16, with or without
receive-and-send steps (:mod:`collsynth.tens.export_fuse`), and down to
1/1 also with one thread block per tree and edge
(:mod:`collsynth.tens.export_layout`, the layout of ForestColl's programs); the cheapest export
our reader reads back as a schedule that verifies is the price (``extra["grid"]`` says which layout,
grid and how many thread blocks a GPU); a program read with ``--from msccl-xml`` is priced as
written.

Checked against: ForestColl's and TACCL's published nccl-tests logs on 2x8 A100 and 2x16
MI250 (``instances/measurements/``), leave one program out and on held-out programs
(``docs/fidelity.md``), where it is an order of magnitude closer than ``sync`` and ``event``
and misses the stated targets (the figures and why are there).

Lower bound: every period (and the first iteration, at least one) carries each port's
per-iteration load at its calibrated share of the nominal bandwidth, and there are as many
periods as iterations, so the time is at least
the instance's link-load bound with link bandwidths scaled by the calibrated efficiencies.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ... import InputError
from ..cost import Cost
from ..runtime_program import ProgramFeatures, Rounds, link_classes, program_features
from . import Column, CostModel

__all__ = ["Calibration", "load_calibration", "runtime_times", "for_runtime", "call_counts", "slice_weights", "port_times",
           "shared_sms", "late_blocks", "fair_link_copies", "fenced_slices", "carried_fences", "net_credit_period",
           "chain_credits", "chained_shared",
           "PROTOCOL_BANDWIDTH",
           "SLICE_FRACTION"]

FORMAT = "collsynth.calibration/1"
PROTOCOL_BANDWIDTH = {"Simple": 1.0, "LL128": 120 / 128, "LL": 0.5}
SLICE_FRACTION = 0.5  # msccl.h: MSCCL_CHUNKSTEPS = NCCL_STEPS / 2 steps of buffSize / NCCL_STEPS each
# prims_simple.h genericOp: a call of n bytes moves slices of max(n / SlicePerChunk, stepSize *
# StepPerSlice / 32); msccl.h: SlicePerChunk = MSCCL_CHUNKSTEPS / MSCCL_SLICESTEPS = 2, StepPerSlice
# = MSCCL_SLICESTEPS = NCCL_STEPS / 4 = 2 steps of buffSize / NCCL_STEPS: a receive forwards per slice
SLICES_PER_CALL = 2
MIN_SLICE_FRACTION = 2 / 8 / 32
MAX_COUNT = 72  # msccl.h MSCCL_MAX_COUNT: a call carries fewer chunks than this
# A NIC connection's credit round trip: one small RDMA write of the slot into the sender's FIFO
# (NCCL net_ib.cc ncclIbPostFifo) plus the proxies' polls; a small RDMA write's one-way latency on
# InfiniBand is about 1 us (linux-rdma perftest ib_write_lat), so a credit is a few us: 10 us at most.
MAX_CREDIT_S = 10e-6
SCALARS = ("tb_rate", "reduce_rate", "step_s", "launch_s", "tb_s")


@dataclass(frozen=True)
class Calibration:
    """A system's fitted runtime parameters (see the module doc) and where they came from.

    ``efficiency``/``hop_s``/``gpu_op_s``: per link class (the topology's ``link_class``); ``tb_rate``,
    ``reduce_rate`` bytes/s; ``step_s``, ``launch_s``, ``tb_s`` seconds; ``buff_bytes`` the ``NCCL_BUFFSIZE``
    priced with unless a measurement names its own. ``runtimes``: runtime name -> ``{"latency": a,
    "bandwidth": b}`` (and optionally ``"handshake"``, its own ``handshake_share``), how another
    runtime measured on the same system differs from the one
    these parameters describe (see :func:`for_runtime`). ``transports``: link class -> ``"read"`` or
    ``"write"``, which thread block of a connection copies across it (the measurement manifest's,
    :func:`collsynth.tens.runtime_program.program_features`). ``round_share``: the share of the
    rounds' excess over a pipelined first iteration that is paid (see the module doc).
    ``handshake_share``: the share of a slice's per-slice costs (credit, GPU shared cost) that
    an empty slice of a call pays too (:func:`slice_weights`; 0, a file without it, charges
    non-empty slices only). ``link_slice_s``: per link class, seconds of a link's time each slice
    crossing it takes beyond its bytes (:func:`port_times`; a class it does not name, or a file
    without it, 0). ``serial_links``: a thread block's fixed costs add to the time its
    busiest link takes to carry the iteration (:func:`_tb_transfer`; false, a file without it:
    they add to its own copy only, and the links are a separate bound). ``sms``: a GPU's
    streaming multiprocessors; in a program one of whose GPUs runs more thread blocks than
    that, every thread block copies and reduces at half its rate (:func:`shared_sms`; 0, a file without it: not
    modelled). ``fair_links``: a copy on an iteration's chain runs no faster than its link's fair
    share (:func:`fair_link_copies`; false, a file without it: at ``tb_rate`` whatever the link).
    ``fences``: the GPU's shared cost per slice is the slice's fence (:func:`fenced_slices`,
    :func:`carried_fences`; false, a file without it: every slice at its handshake weight, beside the links).
    ``block_waves``: with ``sms``, an SM runs one thread block, and those beyond the SMs wait
    for one to exit (:func:`late_blocks`; false, a file without it: two share an SM at half rate).
    ``net_credit``: per network link class, seconds a call over a connection of that class waits
    for its receiver's credit, on top of its link's bytes (:func:`net_credit_period`; a file
    without it: not modelled).
    ``nic_credit``: each round of an iteration's chain with a step over a NIC pays ``credit_s``
    seconds, the network connection's credit round trip (:func:`chain_credits`; false, a file
    without it: the rounds at link rates alone, ``credit_s`` 0).
    ``shared_chain``: a share ``chain_share`` of the GPU's shared cost per slice adds to the
    first iteration's chain of steps (:func:`chained_shared`; false, a file without it: they overlap)."""

    name: str
    system: str
    source: str
    efficiency: dict
    hop_s: dict
    gpu_op_s: dict
    tb_rate: float
    reduce_rate: float
    step_s: float
    launch_s: float
    tb_s: float
    buff_bytes: int = 4 << 20
    fit: dict = field(default_factory=dict)
    runtimes: dict = field(default_factory=dict)
    transports: dict = field(default_factory=dict)
    round_share: float = 1.0
    handshake_share: float = 0.0
    link_slice_s: dict = field(default_factory=dict)
    serial_links: bool = False
    sms: int = 0
    fair_links: bool = False
    fences: bool = False
    block_waves: bool = False
    net_credit: dict = field(default_factory=dict)
    nic_credit: bool = False
    credit_s: float = 0.0
    shared_chain: bool = False
    chain_share: float = 0.0

    def as_json(self) -> dict:
        """The calibration file's object."""
        return {"format": FORMAT, "name": self.name, "system": self.system, "source": self.source,
                "buff_bytes": self.buff_bytes, "transports": self.transports,
                "parameters": {"efficiency": self.efficiency, "hop_s": self.hop_s, "gpu_op_s": self.gpu_op_s,
                               **{k: getattr(self, k) for k in SCALARS}, "round_share": self.round_share,
                               "handshake_share": self.handshake_share,
                               **({"link_slice_s": self.link_slice_s} if self.link_slice_s else {}),
                               **({"serial_links": True} if self.serial_links else {}),
                               **({"sms": self.sms} if self.sms else {}),
                               **({"fair_links": True} if self.fair_links else {}),
                               **({"fences": True} if self.fences else {}),
                               **({"block_waves": True} if self.block_waves else {}),
                               **({"net_credit": self.net_credit} if self.net_credit else {}),
                               **({"nic_credit": True, "credit_s": self.credit_s} if self.nic_credit else {}),
                               **({"shared_chain": True, "chain_share": self.chain_share} if self.shared_chain else {})},
                "runtimes": self.runtimes, "fit": self.fit}


def for_runtime(cal: Calibration, runtime: str) -> Calibration:
    """``cal`` for programs run by ``runtime``: its fixed costs (per step, hop, operation, thread
    block and kernel) times ``cal.runtimes[runtime]["latency"]`` and its links' shares of nominal
    bandwidth times ``["bandwidth"]`` (at most 1); ``cal`` itself for a runtime it does not name.
    Two builds of MSCCL on one machine (msccl-executor on NCCL 2.19, MSCCL 0.7.4 on NCCL 2.12)
    differ in their launch, flag and proxy paths; the proxy posts the network transfers, so how
    much of a NIC a build gets is its own too. Copy and reduction rates stay the machine's.
    ``["handshake"]``, where given, is the build's own ``handshake_share``: what an empty slice
    skips is the fence of a non-empty one (``__threadfence_system`` in NCCL 2.12's
    ``genericOp``, ``fence_acq_rel_sys`` in 2.19's), so its share of a slice's costs is the
    build's.

    >>> c = Calibration("c", "s", "", {"nic": 0.8}, {"nic": 1e-6}, {"nic": 0.0}, 1e9, 1e9, 2e-6, 1e-5, 0.0,
    ...                 runtimes={"new": {"latency": 0.5, "bandwidth": 1.1}})
    >>> n = for_runtime(c, "new")
    >>> round(n.efficiency["nic"], 6), n.hop_s["nic"], n.step_s, n.launch_s, for_runtime(c, "") is c
    (0.88, 5e-07, 1e-06, 5e-06, True)
    >>> n.handshake_share, for_runtime(replace(c, runtimes={"new": {"latency": 1, "bandwidth": 1, "handshake": 0.3}}),
    ...                                "new").handshake_share
    (0.0, 0.3)
    """
    scale = cal.runtimes.get(runtime) if runtime else None
    if not scale:
        return cal
    a, b = scale["latency"], scale["bandwidth"]
    return replace(cal, efficiency={c: min(1.0, e * b) for c, e in cal.efficiency.items()},
                   hop_s={c: h * a for c, h in cal.hop_s.items()}, gpu_op_s={c: g * a for c, g in cal.gpu_op_s.items()},
                   link_slice_s={c: g * a for c, g in cal.link_slice_s.items()},
                   net_credit={c: g * a for c, g in cal.net_credit.items()},
                   step_s=cal.step_s * a, launch_s=cal.launch_s * a, tb_s=cal.tb_s * a, credit_s=cal.credit_s * a,
                   handshake_share=scale.get("handshake", cal.handshake_share))


def _number(v, where: str, lo: float, hi: float) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
        raise InputError(where, f"expected a number in {lo:g}..{hi:g}, got {v!r}")
    return float(v)


def _switch(p: dict, key: str, where: str) -> bool:
    """The calibration's ``parameters.<key>`` switch: false when absent, else true or false
    (:class:`~collsynth.InputError` naming the field otherwise).

    >>> _switch({"fences": True}, "fences", "c.json"), _switch({}, "fences", "c.json")
    (True, False)
    """
    v = p.get(key, False)
    if not isinstance(v, bool):
        raise InputError(f"{where}: parameters.{key}", f"expected true or false, got {v!r}")
    return v


def calibration_from_json(data: dict, where: str) -> Calibration:
    """The :class:`Calibration` of a parsed calibration file; errors name ``where`` and the field."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InputError(f"{where}: format", f"expected {FORMAT!r}")
    p = data.get("parameters")
    if not isinstance(p, dict):
        raise InputError(f"{where}: parameters", "expected an object")
    per_class = {}
    for key, hi in (("efficiency", 1.0), ("hop_s", 1.0), ("gpu_op_s", 1.0)):
        d = p.get(key)
        if not isinstance(d, dict) or not d:
            raise InputError(f"{where}: parameters.{key}", "expected an object of link class -> number")
        per_class[key] = {str(c): _number(v, f"{where}: parameters.{key}.{c}", 0.0, hi) for c, v in d.items()}
    scal = {k: _number(p.get(k), f"{where}: parameters.{k}", 0.0, 1e15) for k in SCALARS}
    scal["round_share"] = _number(p.get("round_share", 1.0), f"{where}: parameters.round_share", 0.0, 1.0)
    scal["handshake_share"] = _number(p.get("handshake_share", 0.0), f"{where}: parameters.handshake_share", 0.0, 1.0)
    gaps = p.get("link_slice_s", {})
    if not isinstance(gaps, dict):
        raise InputError(f"{where}: parameters.link_slice_s", "expected an object of link class -> number")
    per_class["link_slice_s"] = {str(c): _number(v, f"{where}: parameters.link_slice_s.{c}", 0.0, 1.0)
                                 for c, v in gaps.items()}
    serial = _switch(p, "serial_links", where)
    fair = _switch(p, "fair_links", where)
    fences = _switch(p, "fences", where)
    waves = _switch(p, "block_waves", where)
    credit = p.get("net_credit", {})
    if not isinstance(credit, dict):
        raise InputError(f"{where}: parameters.net_credit", "expected an object of link class -> seconds")
    credit = {str(c): _number(v, f"{where}: parameters.net_credit.{c}", 0.0, 1.0) for c, v in credit.items()}
    nic = _switch(p, "nic_credit", where)
    credit_s = _number(p.get("credit_s", 0.0), f"{where}: parameters.credit_s", 0.0, MAX_CREDIT_S)
    chained = _switch(p, "shared_chain", where)
    chain_share = _number(p.get("chain_share", 0.0), f"{where}: parameters.chain_share", 0.0, 1.0)
    sms = p.get("sms", 0)
    if isinstance(sms, bool) or not isinstance(sms, int) or sms < 0:
        raise InputError(f"{where}: parameters.sms", f"expected a whole number of SMs from 0 up, got {sms!r}")
    if scal["tb_rate"] <= 0 or scal["reduce_rate"] <= 0 or min(per_class["efficiency"].values()) <= 0:
        raise InputError(f"{where}: parameters", "tb_rate, reduce_rate and every efficiency must be positive")
    runtimes = data.get("runtimes", {})
    if not isinstance(runtimes, dict):
        raise InputError(f"{where}: runtimes", "expected an object of runtime -> {latency, bandwidth}")
    runtimes = {str(k): {q: _number(v.get(q) if isinstance(v, dict) else None, f"{where}: runtimes.{k}.{q}", 1e-3, 1e3)
                         for q in ("latency", "bandwidth")} for k, v in runtimes.items()}
    for k, v in data.get("runtimes", {}).items():  # optional: the build's own handshake share (for_runtime)
        if isinstance(v, dict) and "handshake" in v:
            runtimes[str(k)]["handshake"] = _number(v["handshake"], f"{where}: runtimes.{k}.handshake", 0.0, 1.0)
    from ..measurements import read_transports
    return Calibration(name=str(data.get("name", "")), system=str(data.get("system", "")),
                       transports=read_transports(data.get("transports", {}), f"{where}: transports"),
                       source=str(data.get("source", "")), **per_class, **scal, runtimes=runtimes, serial_links=serial,
                       sms=sms, fair_links=fair, fences=fences, block_waves=waves, net_credit=credit,
                       nic_credit=nic, credit_s=credit_s, shared_chain=chained, chain_share=chain_share,
                       buff_bytes=int(_number(data.get("buff_bytes", 4 << 20), f"{where}: buff_bytes", 1, 1 << 40)),
                       fit=data.get("fit", {}) if isinstance(data.get("fit", {}), dict) else {})


def load_calibration(path: str | Path) -> Calibration:
    """The calibration file at ``path`` (written by ``collsynth calibrate``)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise InputError(str(path), f"cannot read the calibration: {getattr(e, 'strerror', None) or e}") from None
    return calibration_from_json(data, str(path))


def runtime_times(f: ProgramFeatures, sizes, cal: Calibration, buff_bytes: int | None = None) -> np.ndarray:
    """Seconds the program of features ``f`` takes at message sizes ``sizes`` (bytes, as
    nccl-tests counts them) under ``cal`` (see the module doc for the formula).

    >>> f = ProgramFeatures(tb_steps=np.array([1.0]), tb_sent=np.array([1.0]), tb_reduced=np.array([0.0]),
    ...     tb_hops={"link": np.array([1.0])}, gpu_ops={"link": np.array([1.0, 1.0])},
    ...     tbs_per_gpu=1, class_load={"link": 1e-9}, path_steps=1, path_sent=1, path_reduced=0, path_hops={"link": 1},
    ...     nchunksperloop=1, max_cnt=1, proto="Simple", coll="allgather")
    >>> cal = Calibration("c", "s", "", {"link": 0.5}, {"link": 1e-6}, {"link": 0.0}, tb_rate=1e9,
    ...     reduce_rate=1e9, step_s=1e-6,
    ...     launch_s=0.0, tb_s=0.0, buff_bytes=2000)
    >>> # 1 and 4 iterations of 1000 B (two slices a call), each 1 us a step, 2 x 1 us of credit, 1 us of copy
    >>> runtime_times(f, [1000.0, 4000.0], cal).round(9).tolist()
    [4e-06, 1.6e-05]
    """
    sizes = np.asarray(sizes, dtype=np.float64)
    cal = shared_sms(f, cal)
    buff = buff_bytes or cal.buff_bytes
    pf = PROTOCOL_BANDWIDTH.get(f.proto, 1.0)
    chunk = sizes / f.nchunksperloop
    iters = np.maximum(1.0, np.ceil(chunk / (buff * SLICE_FRACTION) - 1e-9))
    s = chunk / iters
    calls, slices = call_counts(f.cnts, chunk, s, buff)
    per_slice = slice_weights(calls, slices, cal.handshake_share)
    per_byte = (f.tb_sent / cal.tb_rate + f.tb_reduced / cal.reduce_rate) / pf
    fixed = _per_size(f.tb_steps, calls) * cal.step_s + sum(_per_size(h, per_slice) * cal.hop_s.get(c, 0.0)
                                                           for c, h in f.tb_hops.items())
    per_tb = fixed + _tb_transfer(f, cal, pf, per_byte)[:, None] * s[None, :]
    tb = per_tb.max(axis=0)
    ports = port_times(f, s, per_slice, cal, pf)
    fenced = fenced_slices(calls, slices, per_slice, cal)
    shared = np.maximum(sum(_per_size(ops, fenced) * cal.gpu_op_s.get(c, 0.0)
                            for c, ops in f.gpu_ops.items()).max(axis=0), 0.0)
    period = np.maximum(np.maximum(tb, ports), shared)
    if cal.net_credit:  # a call on a network connection waits for its credit, on top of the link's bytes
        period = np.maximum(period, net_credit_period(f, cal, pf, calls, s))
    forwarded = np.minimum(s, np.maximum(s / SLICES_PER_CALL, buff * MIN_SLICE_FRACTION))
    if f.carried:  # thread blocks that hold the next iteration back: the steady state's rounds
        held = _mixed_rounds(f.rounds, cal, pf, forwarded / s, f.carried) * s
        held = held + chain_credits(f, cal, forwarded / s, f.carried)
        period = period + cal.round_share * np.maximum(held - period, 0.0)
        if cal.fences:  # its fences on the chain, between the link's transfers
            period = carried_fences(f, shared, ports, period, forwarded / s)
    copies = f.path_sent * fair_link_copies(f, cal, pf) * pf if cal.fair_links else f.path_sent / cal.tb_rate
    hop_per_byte = (copies + f.path_reduced / cal.reduce_rate) / pf / max(f.path_sent, 1)
    fill = (f.path_steps * cal.step_s + sum(h * cal.hop_s.get(c, 0.0) for c, h in f.path_hops.items())
            + hop_per_byte * s * _chained_copies(f, forwarded / s))
    first = np.maximum(np.maximum(fill, period), chained_shared(fill, tb, shared, cal))
    if f.rounds:  # a forwarding hop one slice behind its sender: between the two roundings
        rounds = _mixed_rounds(f.rounds, cal, pf, forwarded / s) * s + chain_credits(f, cal, forwarded / s)
        first = first + cal.round_share * np.maximum(rounds - first, 0.0)
    return cal.launch_s + f.tbs_per_gpu * cal.tb_s + first + (iters - 1) * period + late_blocks(f, cal, per_tb, iters)


def chained_shared(fill: np.ndarray, tb: np.ndarray, shared: np.ndarray, cal: Calibration) -> np.ndarray:
    """Seconds, per message size, the first iteration lasts at least when its chain of steps
    does not overlap the GPU's shared cost per slice (``cal.shared_chain``): the longer of the
    critical path ``fill`` and the busiest thread block ``tb``, plus ``chain_share`` of the
    busiest GPU's shared cost ``shared``; 0 without the switch (the chain and the shared cost
    overlap, the period's largest term deciding).

    MSCCL's interpreter runs each step through NCCL's ``genericOp`` (``prims_simple.h``), whose
    ``postPeer`` fences every non-empty slice at system scope before its flag store
    (``__threadfence_system`` on NCCL 2.12); the model prices these fences as a resource the
    GPU's thread blocks share (``gpu_op_s``). In one iteration a step of the chain sends only
    after the step before it, and its fence waits behind those the GPU's other thread blocks
    issued first, so the chain pays part of the shared cost in series (on the 2x8 A100, TACCL's
    8-instance programs measure 0.8-0.95x ``tb + shared`` beyond the launch, far above either:
    ``docs/fidelity.md``). The share is fitted (0: the overlap, 1: fully in series).

    A chain of 10 us, a busiest thread block of 30 us and 20 us of shared cost at a share of
    0.5: 40 us; without the switch 0.

    >>> cal = Calibration("c", "s", "", {}, {}, {}, 1e9, 1e9, 0.0, 0.0, 0.0, shared_chain=True, chain_share=0.5)
    >>> one = lambda v: np.array([v * 1e-6])
    >>> chained_shared(one(10), one(30), one(20), cal).round(9).tolist(), chained_shared(one(10), one(30), one(20),
    ...     replace(cal, shared_chain=False)).tolist()
    ([4e-05], [0.0])
    """
    if not cal.shared_chain:
        return np.zeros_like(np.asarray(tb, dtype=np.float64))
    return np.maximum(fill, tb) + cal.chain_share * shared


def shared_sms(f: ProgramFeatures, cal: Calibration) -> Calibration:
    """``cal`` for the program of features ``f``: its thread blocks' copy and reduce rates halved
    when a GPU runs more thread blocks than it has streaming multiprocessors (``cal.sms``), else
    ``cal`` itself (``sms`` 0: not modelled).

    MSCCL's executor launches one CUDA block per thread block of the program on each GPU, up to
    ``MSCCL_MAX_NUM_THREAD_BLOCKS`` = 108 x 2 (``msccl.h``: "108 which is the number of SMs on
    A100"), and every block stays resident for the whole collective, so beyond the GPU's SMs
    some SMs run two blocks, which share the SM's issue slots and memory pipeline: each copies
    at about half the rate of a block alone (NVIDIA, "NVIDIA A100 Tensor Core GPU Architecture",
    2020: 108 SMs). Which blocks share an SM is the hardware scheduler's choice and an iteration
    is as slow as its slowest thread block and chain, so the model takes every thread block at
    half rate (in the period, the iteration's chain of copies and its rounds alike).

    >>> f = ProgramFeatures(np.ones(1), np.ones(1), np.zeros(1), {}, {}, 3, {}, 1, 1, 0, {}, 1, 1, "Simple",
    ...                     "allgather")
    >>> cal = Calibration("c", "s", "", {}, {}, {}, 8e9, 4e9, 0.0, 0.0, 0.0, sms=2)
    >>> c = shared_sms(f, cal)
    >>> c.tb_rate, c.reduce_rate, shared_sms(f, replace(cal, sms=3)).tb_rate, shared_sms(f, replace(cal, sms=0)).tb_rate
    (4000000000.0, 2000000000.0, 8000000000.0, 8000000000.0)
    """
    if not cal.sms or f.tbs_per_gpu <= cal.sms or cal.block_waves:
        return cal
    return replace(cal, tb_rate=cal.tb_rate / 2, reduce_rate=cal.reduce_rate / 2)


def late_blocks(f: ProgramFeatures, cal: Calibration, per_tb: np.ndarray, iters: np.ndarray) -> np.ndarray:
    """Seconds, per message size, that the thread blocks beyond a GPU's SMs add when an SM runs
    one thread block (``cal.block_waves`` with ``cal.sms``): the blocks numbered ``sms`` and up
    on a GPU (``f.tb_order``) start only once earlier ones have exited, and then run every loop
    iteration on their own, each ``per_tb`` (their steps' fixed costs and copies an
    iteration, rows as ``f.tb_order``), the slowest of them deciding; 0 without the switch, or
    where no GPU runs more thread blocks than it has SMs.

    NCCL compiles its kernels, which run MSCCL's executor, with ``__launch_bounds__(NCCL_MAX_NTHREADS, 1)``
    (``src/collectives/device/common.h``; ``NCCL_MAX_NTHREADS`` is 640 in current NCCL): one block an SM
    is all it promises, so the compiler may give each thread up to 65,536 / 640 = 102 of the
    SM's registers, and above 51 a second block does not fit (NVIDIA, "CUDA C++ Programming
    Guide", Launch Bounds; A100: 65,536 registers and 108 SMs, NVIDIA A100 Tensor Core GPU
    Architecture, 2020). MSCCL launches one block per thread block of the program, up to
    108 x 2 (``msccl.h``), and CUDA dispatches blocks in index order as SMs free up; the
    collective still completes where the first blocks can finish without the late ones (a
    program whose first blocks wait on a late one would hang), so the late blocks run after
    them, their peers waiting. How many registers the measured build's kernel uses is not
    known here: the switch is the hypothesis, the fit and the held-out programs its check.

    A GPU of 2 SMs running 3 thread blocks (orders 0, 1, 2), 4 iterations, the late block
    10 us an iteration: 40 us later.

    >>> f = ProgramFeatures(np.ones(3), np.ones(3), np.zeros(3), {}, {}, 3, {}, 1, 1, 0, {}, 1, 1, "Simple",
    ...                     "allgather", tb_order=np.array([0, 1, 2]))
    >>> cal = Calibration("c", "s", "", {}, {}, {}, 1e9, 1e9, 0.0, 0.0, 0.0, sms=2, block_waves=True)
    >>> per_tb = np.array([[5e-6], [7e-6], [10e-6]])
    >>> late_blocks(f, cal, per_tb, np.array([4.0])).round(12).tolist(), late_blocks(f, replace(cal, sms=3), per_tb,
    ...                                                                             np.array([4.0])).tolist()
    ([4e-05], [0.0])
    """
    late = f.tb_order >= cal.sms
    if not (cal.block_waves and cal.sms and late.any()):
        return np.zeros_like(iters)
    return iters * per_tb[late].max(axis=0)


def fair_link_copies(f: ProgramFeatures, cal: Calibration, pf: float) -> float:
    """Seconds per chunk byte of one copy on an iteration's chain of copies (the first
    iteration's critical path): ``1 / tb_rate`` (over the protocol's share ``pf``), and with
    ``cal.fair_links`` no less than a link it crosses takes to give it its fair part, the
    link's calibrated share ``efficiency[c]`` of its bandwidth over the connections that cross
    it (``f.path_crowd``, :func:`~collsynth.tens.runtime_program.copy_crowds`). In the first
    iteration every connection copies its first slices at once, each thread block its own
    (NCCL's ``genericOp``, ``prims_simple.h``), so a link crossed by ``k`` connections serves
    each about a ``k``-th of its bandwidth, and a chain of forwards advances no faster: a
    thread block alone on its link copies at its own rate (TACCL's programs, a few thread
    blocks a GPU), one of 14 on a GPU's NVSwitch port (ForestColl's trees) at a fourteenth of
    the port. The steady state needs no such term: the period already takes the busiest link's
    load, which is at least any connection's fair part of it.

    A link of 10 B/s at a 0.5 share crossed by 4 connections (0.4 per B/s), 4 B/s a thread
    block: a chain's copy takes 4 / 5 = 0.8 s a chunk byte, 1 / 4 = 0.25 without the rule.

    >>> f = ProgramFeatures(np.ones(1), np.ones(1), np.zeros(1), {}, {}, 1, {"l": 0.4}, 1, 1, 0, {}, 1, 1,
    ...                     "Simple", "allgather", path_crowd={"l": 0.4})
    >>> cal = Calibration("c", "s", "", {"l": 0.5}, {"l": 0.0}, {"l": 0.0}, 4.0, 1.0, 0.0, 0.0, 0.0)
    >>> fair_link_copies(f, cal, 1.0), round(fair_link_copies(f, replace(cal, fair_links=True), 1.0), 6)
    (0.25, 0.8)
    """
    hop = 1.0 / cal.tb_rate / pf
    if cal.fair_links:
        for c, crowd in f.path_crowd.items():
            hop = max(hop, crowd / (cal.efficiency.get(c, 1.0) * pf))
    return hop


def fenced_slices(calls: np.ndarray, slices: np.ndarray, per_slice: np.ndarray, cal: Calibration) -> np.ndarray:
    """What the GPU's shared cost per slice (``gpu_op_s``) is multiplied by, per step and size:
    the slices' weights ``per_slice`` (:func:`slice_weights`: an empty slice pays
    ``handshake_share`` of a full one), or with ``cal.fences`` the non-empty slices alone
    (``calls`` times ``slices``, :func:`call_counts`).

    The shared cost is the slice's system-scope fence: RCCL's ``postPeer`` fences a slice only
    if it carried data (``prims_simple.h``: ``postPeer<Recv, Send>(0 < sliceSize)``, an empty
    slice still waits for its peer and posts its step), and on an MI250 GCD (gfx90a) a
    system-scope release writes back the GCD's L2, which all its thread blocks share (AMD,
    "AMD Instinct MI200 Series Instruction Set Architecture", 2022, ``BUFFER_WBL2``; LLVM's
    AMDGPU memory model for GFX90A, "Memory Model GFX90A": a release at system scope is
    ``buffer_wbl2``). The credit (``hop_s``) keeps ``per_slice``: an empty slice waits as a full
    one does.

    >>> calls, slices = np.array([[1.0, 2.0]]), np.array([[1.0, 2.0]])
    >>> w = slice_weights(calls, slices, 1.0)
    >>> cal = Calibration("c", "s", "", {}, {}, {}, 1e9, 1e9, 0.0, 0.0, 0.0, handshake_share=1.0)
    >>> fenced_slices(calls, slices, w, cal).tolist(), fenced_slices(calls, slices, w, replace(cal, fences=True)).tolist()
    ([[2.0, 4.0]], [[1.0, 4.0]])
    """
    return calls * slices if cal.fences else per_slice


def carried_fences(f: ProgramFeatures, shared: np.ndarray, ports: np.ndarray, period: np.ndarray,
                   share: np.ndarray) -> np.ndarray:
    """The period of a program whose thread blocks hold the next iteration back (``f.carried``)
    when a GPU's shared cost per slice (``shared``: the slices' system-scope fences,
    :func:`fenced_slices`) adds to the busiest link's bytes (``ports``) instead of overlapping
    them (``Calibration.fences``): ``max(period, (D / R) shared + ports)``, ``D / R`` the
    share of the iteration's rounds after which the next starts, the two roundings mixed by
    ``share`` (the part of a chunk a forward trails its sender) as :func:`_mixed_rounds` mixes
    them.

    In a chain of steps (RCCL's ring: each step of a thread block waits for the step its
    upstream peer ran before, ``D = R``), a step posts its flag only after its slice's fence
    (``postPeer``: ``__threadfence_system`` before the step counter's store, RCCL's
    ``prims_simple.h``) and the next step's transfer waits for that flag, so the iteration's
    fences sit on its chain between the link's transfers, and the next iteration waits for the
    chain. Where the next iteration starts after one round (``D = 1``: ForestColl's programs,
    one step a thread block), one iteration's fences overlap the next one's transfers: no change.

    Fences of 3 us, 5 us of bytes on the busiest link, thread blocks at 4 us, the next iteration
    after half the rounds: ``max(5, 0.5 x 3 + 5)`` = 6.5 us (overlapped: 5 us).

    >>> f = ProgramFeatures(np.ones(1), np.ones(1), np.zeros(1), {}, {}, 1, {}, 3, 1, 0, {}, 1, 1, "Simple",
    ...                     "allgather", carried=(0.5, 0.5))
    >>> carried_fences(f, np.array([3e-6]), np.array([5e-6]), np.array([5e-6]), np.array([0.5])).round(12).tolist()
    [6.5e-06]
    """
    held = (1 - share) * f.carried[0] + share * f.carried[-1]
    return np.maximum(period, held * shared + ports)


def net_credit_period(f: ProgramFeatures, cal: Calibration, pf: float, calls: np.ndarray,
                      s: np.ndarray) -> np.ndarray:
    """Seconds an iteration of ``s`` bytes a chunk lasts at least because each call a thread
    block makes over a network connection of class ``c`` (``cal.net_credit``) waits for its
    receiver's credit, ``net_credit[c]``, and the credit comes back only after the call's data
    has crossed the link: per thread block, its calls over ``c`` (``f.tb_hops[c]`` run as
    ``calls``, :func:`call_counts`) times the credit, plus the time the busiest link of ``c`` its
    sends cross takes to carry that link's iteration (``f.tb_links[c]`` at the calibrated
    share); the most over thread blocks and classes.

    NCCL's and RCCL's net transport (``src/transport/net.cc``): the sender's proxy thread posts
    a slot's network send only when the receiver's proxy has posted the receive for it, and
    that one posts it only when its GPU has consumed the slot (the InfiniBand plugin,
    ``src/transport/net_ib.cc``: ``ncclIbIsend`` waits for the entry ``ncclIbIrecv`` writes
    into the sender's FIFO). A call's slots are free again only after that round trip through
    both proxies and the link, so the waits of the calls a thread block makes over the
    connection in an iteration add to the link's bytes rather than overlapping them; thread
    blocks on different connections wait in parallel. RCCL's ring as an MSCCL program makes 31
    calls an iteration over its NIC connection, ForestColl's trees one.

    A thread block making 3 calls over a link of 1 GB/s at a 0.5 share whose iteration carries 2
    chunks of 1 KB, 2 us of credit a call: 3 x 2 + 2 x 1 KB / 0.5 GB/s = 10 us.

    >>> f = ProgramFeatures(np.ones(1), np.ones(1), np.zeros(1), {"nic": np.array([3.0])}, {}, 1, {"nic": 2e-9},
    ...                     3, 1, 0, {}, 1, 1, "Simple", "allgather", tb_links={"nic": np.array([2e-9])})
    >>> cal = Calibration("c", "s", "", {"nic": 0.5}, {"nic": 0.0}, {"nic": 0.0}, 1e9, 1e9, 0.0, 0.0, 0.0,
    ...                   net_credit={"nic": 2e-6})
    >>> net_credit_period(f, cal, 1.0, np.ones((1, 1)), np.array([1000.0])).round(12).tolist()
    [1e-05]
    """
    out = np.zeros_like(s)
    for c, credit in cal.net_credit.items():
        hops = f.tb_hops.get(c)
        if hops is None or credit <= 0:
            continue
        made = _per_size(hops, calls)
        links = f.tb_links.get(c, np.zeros(len(made)))
        t = made * credit + (links / (cal.efficiency.get(c, 1.0) * pf))[:, None] * s[None, :]
        out = np.maximum(out, np.where(made > 0, t, 0.0).max(axis=0))
    return out


def chain_credits(f: ProgramFeatures, cal: Calibration, share: np.ndarray, part=(1.0, 1.0)) -> np.ndarray | float:
    """Seconds an iteration's rounds (``f.rounds``) pay beyond their link-rate time for the NIC
    connection's credit (``cal.nic_credit``): ``credit_s`` for each round in which a step crosses
    a link of class ``"nic"``, the two roundings each times its ``part`` and mixed by ``share``
    as :func:`_mixed_rounds` mixes them; 0 without the switch.

    NCCL's network transport moves a step only once the receiver has granted its slot: the
    receiving proxy posts the receive for a slot of the connection's FIFO (``NCCL_STEPS``
    slots) when its GPU has freed it, and that post writes the slot's address into the sender's
    FIFO over the network (``ncclIbIrecv`` / ``ncclIbPostFifo`` in ``src/transport/net_ib.cc``);
    the sending proxy's ``ncclIbIsend`` returns without sending until the slot is there, then
    the data's completion is polled by the receiving proxy, flushed and flagged to its GPU
    (``src/transport/net.cc``, ``src/proxy.cc``). A round that waits for the round before it
    (a receive that forwards, a ``depid``, the thread block's next step: :func:`_mixed_rounds`)
    thus pays the proxies' polls and the network's latency once per NIC step on the chain, a
    fixed time the links' rates do not see (Hockney's start-up time per message: Hockney, "The
    communication challenge for MPP: Intel Paragon and Meiko CS-2", Parallel Computing 20(3),
    1994, Section 2).

    A chain of three rounds, two of them over the NIC, at 5 us a credit: 10 us.

    >>> from collsynth.tens.runtime_program import Rounds
    >>> r = Rounds({"nic": np.array([1e-9, 0.0, 2e-9]), "nvswitch": np.array([0.0, 1e-9, 0.0])},
    ...            np.zeros((3, 1)), np.zeros((3, 1)))
    >>> f = ProgramFeatures(np.ones(1), np.ones(1), np.zeros(1), {}, {}, 1, {}, 3, 1, 0, {}, 1, 1, "Simple",
    ...                     "allgather", rounds=(r, r))
    >>> cal = Calibration("c", "s", "", {}, {}, {}, 1e9, 1e9, 0.0, 0.0, 0.0, nic_credit=True, credit_s=5e-6)
    >>> round(float(chain_credits(f, cal, np.array([0.5]))[0]), 12), chain_credits(f, replace(cal, nic_credit=False),
    ...                                                                       np.array([0.5]))
    (1e-05, 0.0)
    """
    if not (cal.nic_credit and f.rounds):
        return 0.0
    many, one = (float(np.count_nonzero(r.load.get("nic", np.zeros(0)) > 0)) * k for r, k in zip(f.rounds, part))
    return ((1 - share) * many + share * one) * cal.credit_s


def port_times(f: ProgramFeatures, s: np.ndarray, per_slice: np.ndarray, cal: Calibration, pf: float) -> np.ndarray:
    """Seconds the busiest link takes per loop iteration of ``s`` bytes a chunk: over the links of
    each class, its chunks' bytes at ``efficiency[c]`` of its bandwidth plus ``link_slice_s[c]``
    for each slice crossing it (its sends' slice weights ``per_slice``, :func:`slice_weights`).
    A link serves the slices of every connection through it one after another, and each costs
    it a fixed time beyond its bytes (LogGP's gap per message: Alexandrov et al., "LogGP:
    Incorporating Long Messages into the LogP Model", SPAA 1995, Section 2): the connection's
    handshake, the sender's flag and the receiver's credit (``postPeer``/``waitPeer`` in
    NCCL's ``prims_simple.h``) written over the link for each slice, and a P2P read's request
    burst per slice. With no such cost (or no per-link features) it is the busiest link's load
    alone, ``class_load``.

    One link of 1 GB/s carrying 2 sends a chunk of 1 KB, one slice each, at a 0.5 share and 1 us a slice:
    2 x 1 KB / 0.5 GB/s + 2 x 1 us = 6 us.

    >>> f = ProgramFeatures(np.ones(1), np.ones(1), np.zeros(1), {}, {}, 1, {"l": 2e-9}, 1, 1, 0, {}, 1, 1,
    ...                     "Simple", "allgather", link_load={"l": np.array([2e-9, 1e-9])},
    ...                     link_ops={"l": np.array([2.0, 1.0])})
    >>> cal = Calibration("c", "s", "", {"l": 0.5}, {"l": 0.0}, {"l": 0.0}, 1e9, 1e9, 0.0, 0.0, 0.0,
    ...                   link_slice_s={"l": 1e-6})
    >>> port_times(f, np.array([1000.0]), np.ones((1, 1)), cal, 1.0).round(12).tolist()
    [6e-06]
    """
    out = np.zeros_like(s)
    for c, load in f.class_load.items():
        share = cal.efficiency.get(c, 1.0) * pf
        gap = cal.link_slice_s.get(c, 0.0)
        loads = f.link_load.get(c)
        if gap > 0 and loads is not None and len(loads):
            t = (loads / share)[:, None] * s[None, :] + _per_size(f.link_ops[c], per_slice) * gap
            out = np.maximum(out, t.max(axis=0))
        else:
            out = np.maximum(out, load / share * s)
    return out


def _tb_transfer(f: ProgramFeatures, cal: Calibration, pf: float, per_byte: np.ndarray) -> np.ndarray:
    """Seconds per chunk byte each thread block spends moving its iteration's data, to which its
    fixed costs (per call, per slice) add: its own copy (``per_byte``), or with
    ``cal.serial_links`` the larger of that and the time the busiest link its sends cross takes
    to carry that link's whole iteration (``f.tb_links``, at the calibrated share): a thread
    block's transfers share the link with every other connection on it, so they end when the
    link has carried the iteration, and its per-call waits (the credit of its connection's
    buffer, ``hop_s``) come on top of that, not beside it.

    >>> f = ProgramFeatures(np.ones(2), np.ones(2), np.zeros(2), {}, {}, 1, {"nic": 4e-9}, 1, 1, 0, {}, 1, 1,
    ...                     "Simple", "allgather", tb_links={"nic": np.array([4e-9, 0.0])})
    >>> cal = Calibration("c", "s", "", {"nic": 0.5}, {"nic": 0.0}, {"nic": 0.0}, 1e9, 1e9, 0.0, 0.0, 0.0)
    >>> _tb_transfer(f, cal, 1.0, np.array([1e-9, 1e-9])).tolist()  # the copy alone
    [1e-09, 1e-09]
    >>> _tb_transfer(f, replace(cal, serial_links=True), 1.0, np.array([1e-9, 1e-9])).tolist()  # 4 chunks at 0.5
    [8e-09, 1e-09]
    """
    if not (cal.serial_links and f.tb_links):
        return per_byte
    links = np.max([load / (cal.efficiency.get(c, 1.0) * pf) for c, load in f.tb_links.items()], axis=0)
    return np.maximum(per_byte, links)


def _chained_copies(f: ProgramFeatures, share: np.ndarray) -> np.ndarray:
    """Chunk copy times on an iteration's slowest chain when a forward trails its sender by
    ``share`` of a chunk (in [0.5, 1]): ``f.path_copies`` (at 0.5 and 1,
    :func:`~collsynth.tens.runtime_program.pipelined_copies`) interpolated; for features without
    them, ``path_sent`` copies each that share behind the first."""
    if not f.path_copies:
        return 1 + max(f.path_sent - 1, 0) * share
    at_half, at_one = f.path_copies
    return at_half + (np.clip(share, 0.5, 1.0) - 0.5) * 2 * (at_one - at_half)


def call_counts(cnts, chunk: np.ndarray, s: np.ndarray, buff: float) -> tuple[np.ndarray, np.ndarray]:
    """``(calls, slices)``, each ``len(cnts)`` x ``len(chunk)``: how many calls a step of
    ``cnt`` k is run as at each message size (chunk bytes ``chunk``, ``s`` bytes a chunk per
    loop iteration), and how many non-empty slices each call sends.

    The executor (msccl-executor ``msccl_setup.cc`` ``mscclSetupCount``; MSCCL 0.7.4
    ``enqueue.cc``) lets a call carry at most ``m = max(1, chunkSize / ceil(chunk))`` chunks
    (``chunkSize`` = ``buff / 2``, below ``MSCCL_MAX_COUNT``), so a step of ``cnt`` k is
    ``ceil(k / m)`` calls (``msccl_kernel.cu``: ``for (c = 0; c < count; c += maxAllowedCount)``).
    A call of ``n`` bytes moves ``SLICES_PER_CALL`` slices of ``max(n / 2, buff / 128)``
    (``prims_simple.h`` ``genericOp``); only a non-empty slice's send is fenced
    (``fence_acq_rel_sys`` / ``__threadfence_system`` when ``sliceSize > 0``), so a call sends
    one fenced slice up to ``buff / 128`` bytes and two above.

    >>> calls, slices = call_counts((1, 2), np.array([1000.0, 3000.0]), np.array([1000.0, 3000.0]), 4096.0)
    >>> calls.tolist(), slices.tolist()  # m = 2 then 1; 32 B slices at least
    ([[1.0, 1.0], [1.0, 2.0]], [[2.0, 2.0], [2.0, 2.0]])
    >>> call_counts((1,), np.array([16.0]), np.array([16.0]), 4096.0)[1].tolist()
    [[1.0]]
    """
    k = np.asarray(cnts, dtype=np.float64)[:, None]
    m = np.clip(np.floor(buff * SLICE_FRACTION / np.ceil(chunk)), 1, MAX_COUNT - 1)[None, :]
    calls = np.ceil(k / m)
    slices = np.where(np.minimum(k, m) * s[None, :] > buff * MIN_SLICE_FRACTION, float(SLICES_PER_CALL), 1.0)
    return calls, slices


def slice_weights(calls: np.ndarray, slices: np.ndarray, handshake_share: float) -> np.ndarray:
    """What a step's per-slice costs (credit ``hop_s``, GPU shared cost ``gpu_op_s``) are
    multiplied by: per call, ``handshake_share`` for each of its ``SLICES_PER_CALL`` slices and
    the rest for each non-empty one (``slices``, from :func:`call_counts`). NCCL's ``genericOp``
    (``prims_simple.h``) runs every slice of a call, empty or not, through ``waitPeer``, a
    barrier and ``postPeer`` (an empty slice still takes its steps of the connection's buffer),
    and fences and copies only a non-empty one; so a call of one non-empty slice pays
    ``1 + handshake_share`` units and one of two pays 2 (the A100 ring's step at 32 MiB is
    that ratio; ``handshake_share`` 0 is the rule before it was fitted).

    >>> slice_weights(np.array([[1.0, 1.0]]), np.array([[1.0, 2.0]]), 0.25).tolist()
    [[1.25, 2.0]]
    """
    return calls * (handshake_share * SLICES_PER_CALL + (1 - handshake_share) * slices)


def _per_size(counts: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``counts`` (rows x cnt values, or a vector for ``cnt`` 1 only) weighted per size: rows x sizes."""
    counts = counts[:, None] if counts.ndim == 1 else counts
    return counts @ weights


def _mixed_rounds(rounds: tuple, cal: Calibration, pf: float, share: np.ndarray, part=(1.0, 1.0)) -> np.ndarray:
    """Seconds per chunk byte of ``rounds`` (forwards in their sender's round, then one round
    later: :class:`~collsynth.tens.runtime_program.ProgramFeatures`), each times its ``part``,
    mixed by ``share``, the part of a chunk a forwarding hop runs behind its sender (one slice)."""
    many, one = (_rounds_per_byte(r, cal, pf) * k for r, k in zip(rounds, part))
    return (1 - share) * many + share * one


def _rounds_per_byte(r: Rounds, cal: Calibration, pf: float) -> float:
    """Seconds per chunk byte of one iteration run round by round (:class:`Rounds`): each round
    lasts as long as its busiest link (at the calibrated share of its bandwidth) or its busiest
    thread block."""
    links = np.max([load / (cal.efficiency.get(c, 1.0) * pf) for c, load in r.load.items()], axis=0)
    tbs = (r.sent / cal.tb_rate + r.reduced / cal.reduce_rate).max(axis=1, initial=0.0) / pf
    return float(np.maximum(links, tbs).sum())


def program_of(schedule, instance, seconds=None) -> tuple[str, int]:
    """The MSCCL XML program a schedule runs as, and the grid (pieces per chunk) it runs on
    (:func:`program_export`'s)."""
    found = program_export(schedule, instance, seconds)
    return found.text, found.grid


def program_export(schedule, instance, seconds=None, sms: int = 0):
    """The MSCCL XML program a schedule runs as (an :class:`~collsynth.tens.export_choice.Export`):
    the program it was read from (``--from msccl-xml`` keeps it in ``meta["msccl_program"]``),
    else its export as a user exporting it would
    (:func:`~collsynth.tens.export_choice.chosen_export`: on its own grid when MSCCL takes it,
    else coarsened, halving, down to :data:`~collsynth.tens.export_choice.COARSEST_GRID`, sends
    packed per link, the default dialect or else the other). Given ``seconds`` (program text ->
    its price), the cheapest export that reads back and verifies, over every grid, both layouts
    (packed per link, and one thread block per tree and edge down to
    :data:`~collsynth.tens.export_choice.COARSEST_TREE_GRID`, ForestColl's layout,
    :mod:`collsynth.tens.export_layout`), each with and without receive-and-send steps
    (:mod:`collsynth.tens.export_fuse`): a coarser grid means fewer chunks a loop, so more loop
    iterations to pipeline, fewer steps a thread block and fewer trees, at the cost of
    rounding the schedule's shares. With ``sms`` (a GPU's streaming multiprocessors, the
    calibration's) the tree layout is also tried with a rank pair's trees sharing thread blocks
    until every GPU runs at most ``sms`` (``fitted``, :func:`~collsynth.tens.export_layout.fitted_channels`),
    as a user exporting for that GPU would."""
    from ..msccl_format import DEFAULT_DIALECT
    from ..export_choice import Export, chosen_export
    text = schedule.meta.get("msccl_program") if isinstance(schedule.meta, dict) else None
    if text:
        return Export(text, schedule.denom, "as read", False, DEFAULT_DIALECT)
    if seconds is None:
        return chosen_export(schedule, instance)
    layouts = ("links", "trees", "fitted") if sms else ("links", "trees")
    return chosen_export(schedule, instance, seconds, layouts=layouts, fuses=(False, True), max_thread_blocks=sms)


def seconds_under(cal: Calibration, instance, read: dict | None = None):
    """Program text -> its runtime seconds at ``instance``'s message size under ``cal``: the
    price :func:`program_export` minimises. Given ``read`` (a dict), each program's features
    are kept there by its text, so that the program chosen is not read twice."""
    size = instance.collective.message_bytes

    def seconds(text: str) -> float:
        f = program_features(text, instance, cal.transports)
        if read is not None:
            read[text] = f
        return float(runtime_times(f, [size], cal)[0])
    return seconds


def usable_calibration(calibration, instance) -> Calibration:
    """``calibration`` (a :class:`Calibration` or its file) checked against ``instance``: refused
    (:class:`~collsynth.InputError`) when it was not fitted on every link class the instance has."""
    cal = calibration if isinstance(calibration, Calibration) else load_calibration(calibration)
    missing = sorted(set(link_classes(instance)) - set(cal.efficiency))
    if missing:
        fitted = ", ".join(sorted(cal.efficiency))
        raise InputError("--calibration", f"calibration {cal.name!r} was fitted on link classes {fitted}; "
                                          f"this instance also has {', '.join(missing)} (calibrate on its system)")
    return cal


def _price(schedule, instance, timestep=None, exact_deps=None, plan=None, calibration=None) -> Cost:
    if calibration is None:
        raise InputError("--calibration", "the runtime model prices with a calibration file "
                                          "(collsynth calibrate, or one under instances/calibrations/)")
    from ..switch_runtime import is_switch_calibration, price_switch_channels
    if is_switch_calibration(calibration):  # MSCCL++ switch-channel plans (tens/switch_runtime.py)
        return price_switch_channels(schedule, instance, calibration)
    cal = usable_calibration(calibration, instance)
    _refuse_switch_sums(schedule, instance)
    read = {}
    found = program_export(schedule, instance, seconds_under(cal, instance, read), cal.sms)
    grid = found.grid
    f = read.get(found.text) or program_features(found.text, instance, cal.transports)
    read.clear()
    total = float(runtime_times(f, [instance.collective.message_bytes], cal)[0])
    steps = int(f.path_steps)
    bw_only = float(runtime_times(f, [instance.collective.message_bytes], _no_latency(cal))[0])
    extra = {"calibration": cal.name}
    if grid != schedule.denom:
        layout = {"trees": "one thread block per tree and edge", "fitted": f"trees sharing thread blocks within "
                  f"{cal.sms} SMs"}.get(found.layout, "sends packed per link")
        extra["grid"] = (f"pieces of 1/{schedule.denom} exported on a 1/{grid} grid, {layout}, "
                         f"{f.tbs_per_gpu} thread blocks a GPU")
    return Cost("runtime", steps, max(total - bw_only, 0.0), bw_only, total, extra=extra)


def _refuse_switch_sums(schedule, instance) -> None:
    """Refuse (:class:`~collsynth.InputError` on ``schedule``) a schedule that sums in a switch
    (:func:`collsynth.tens.switch_routes.summed_in_switch`): it runs as an MSCCL++ plan with
    switch channels (:mod:`collsynth.tens.export_switch`), not as the MSCCL XML program this
    model prices, and no measurement of NVLS or SHARP calibrates it (module doc: not modelled)."""
    from ..switch_routes import summed_in_switch
    if schedule.meta.get("msccl_program") if isinstance(schedule.meta, dict) else False:
        return
    i = summed_in_switch(schedule, instance)
    if i is not None:
        raise InputError("schedule", f"send {i} sums in a reducing switch: it runs as an MSCCL++ switch-channel plan "
                                     "(multimem load-reduce and store), which this model of msccl-executor's programs "
                                     "does not price (price it with a switch-channel calibration: "
                                     "instances/calibrations/h100-nvls.json)")


def _no_latency(cal: Calibration) -> Calibration:
    return replace(cal, step_s=0.0, launch_s=0.0, tb_s=0.0, hop_s={c: 0.0 for c in cal.hop_s},
                   gpu_op_s={c: 0.0 for c in cal.gpu_op_s}, link_slice_s={}, net_credit={})


def _calibration_name(c: Cost) -> str:
    return c.extra.get("calibration", "")


# rate: a third of the least measured, 7,000 program steps/s (NCCL's 32-channel ring as XML, 8,192
# steps in 1.16 s on 2 loaded cores: the program is read and its critical path walked in Python)
MODEL = CostModel(name="runtime", doc="MSCCL runtime price under a fitted calibration", price=_price, rate=2e3,
                  bound=None, default=False,
                  columns=(Column("calibration", "the calibration that priced the runtime column", _calibration_name),))

