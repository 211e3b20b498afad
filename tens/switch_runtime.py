"""A runtime price for schedules that sum in a switch (MSCCL++ switch-channel plans), calibrated
on NVIDIA's published NCCL NVLS figures; the ``runtime`` cost model uses it when handed a
switch-channel calibration (``instances/calibrations/h100-nvls.json``).

What runs: MSCCL++'s executor (microsoft/mscclpp, ``src/core/include/execution_kernel.hpp``,
``handleMultiLoadReduceStore``) runs a ``glres`` as one rank's thread block issuing
``multimem.ld_reduce`` on the switch's multicast address (the switch reads the region from
every member's memory and returns the sum to the issuer) and then ``multimem.st`` (the issuer
stores the sum once; the switch writes it into every member's memory). So one group operation
of ``b`` bytes in a group of ``n`` loads every member's port ``b`` out and ``b`` in, and the
issuer's ``b`` more each way: NCCL's NVLS allreduce moves ``(1 + 1 / n) M`` each way over a
GPU's NVLink (the factor of NVIDIA/nccl issue 2140). A schedule that ``tens/export_switch.py``
writes as ``glres`` (each group: every member's piece up, the sum copied to every member) is
priced as that plan runs: its link loads plus the issuer's extra ``b`` each way. Other
schedules are priced as written, link by link.

The price: every link carries its bytes at a calibrated share of its bandwidth, ``share`` for
GPU-to-GPU traffic and ``switch_share`` for the traffic of group operations of a summing switch
(multimem loads and stores run below line rate: the switch's arithmetic and its multicast
replication), per link class; the busiest link decides, and each group operation costs
``group_op_s`` on its issuing GPU (thread blocks issue them one after another there):

``T = max over links of (plain / share + summed / switch_share) / bandwidth + max over GPUs of ops x group_op_s``

The calibration (:func:`fit_nvls`) fits both shares to the figures, each left out in turn
(``benchmarks/bench_nvls_runtime.py``). The figures are all of messages of 2-8 GB, where a
group operation's fixed cost does not show: ``group_op_s`` is not identified by them and the
shipped calibration sets it to 0 (a measurement at small sizes would fit it).

>>> cal = SwitchCalibration("t", "box", "by hand", {"nvswitch": 0.8}, {"nvswitch": 0.5}, 1e-6)
>>> cal.share["nvswitch"], cal.group_op_s
(0.8, 1e-06)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import InputError
from ..instances.instance import Instance
from .cost import Cost, chunk_bytes_of
from .schedule import Schedule

FORMAT = "collsynth.switch-calibration/1"


@dataclass(frozen=True)
class SwitchCalibration:
    """A system's shares of link bandwidth (per link class) for GPU-to-GPU traffic (``share``)
    and for a summing switch's group operations (``switch_share``), the fixed cost of one group
    operation on its issuing GPU (seconds), where they came from and the fit's figures."""

    name: str
    system: str
    source: str
    share: dict
    switch_share: dict
    group_op_s: float
    fit: dict = field(default_factory=dict)

    def as_json(self) -> dict:
        """The calibration file's object."""
        return {"format": FORMAT, "name": self.name, "system": self.system, "source": self.source,
                "parameters": {"share": self.share, "switch_share": self.switch_share, "group_op_s": self.group_op_s},
                "fit": self.fit}


def is_switch_calibration(calibration) -> bool:
    """Whether ``calibration`` (a :class:`SwitchCalibration` or a path) is a switch-channel one."""
    if isinstance(calibration, SwitchCalibration):
        return True
    if not isinstance(calibration, (str, Path)) or not Path(calibration).is_file():
        return False
    try:
        return json.loads(Path(calibration).read_text()).get("format") == FORMAT
    except (ValueError, AttributeError):
        return False


def load_switch_calibration(path) -> SwitchCalibration:
    """The :class:`SwitchCalibration` in ``path``; a one-line :class:`~collsynth.InputError`
    naming the file and the field that is missing or out of range."""
    data = json.loads(Path(path).read_text())
    p = data.get("parameters") or {}
    for key in ("share", "switch_share"):
        if not isinstance(p.get(key), dict) or not p[key] or \
                not all(isinstance(v, (int, float)) and 0 < v <= 1 for v in p[key].values()):
            raise InputError(str(path), f"parameters.{key}: expected link class -> share in (0, 1]")
    if not isinstance(p.get("group_op_s"), (int, float)) or p["group_op_s"] < 0:
        raise InputError(str(path), "parameters.group_op_s: expected seconds >= 0")
    return SwitchCalibration(str(data.get("name", Path(path).stem)), str(data.get("system", "")),
                             str(data.get("source", "")), dict(p["share"]), dict(p["switch_share"]),
                             float(p["group_op_s"]), dict(data.get("fit") or {}))


def link_loads(schedule: Schedule, instance: Instance) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(plain, summed, ops)``: bytes every link of the topology carries for GPU-to-GPU traffic
    and for group operations of a summing switch, and the group operations each node issues,
    as the switch-channel plan runs them where ``tens/export_switch.py`` writes one (module doc)."""
    from .routing import routes
    from .switch_rule import switch_rule

    s, topo = schedule, instance.topology
    la = topo.link_arrays
    size = chunk_bytes_of(instance)[s.chunk] * (s.hi - s.lo) / s.denom
    rule = switch_rule(s, instance)
    summed = rule.combining[np.minimum(s.chunk, len(rule.combining) - 1)] & (rule.reduce[s.src] | rule.reduce[s.dst])
    r = routes(s, topo)
    per = np.diff(r.ptr)[r.r]
    first = np.repeat(r.ptr[r.r] - (np.cumsum(per) - per), per) + np.arange(int(per.sum()))
    links = r.links[first]
    loads = [np.bincount(links, weights=np.repeat(size * m, per), minlength=len(la.src)) for m in (~summed, summed)]
    ops = np.zeros(topo.size)
    for issuer, w, b in _glres_issuers(s, instance):
        loads[1][la.lookup(issuer, w)] += b
        loads[1][la.lookup(w, issuer)] += b
        ops[issuer] += 1
    return loads[0], loads[1], ops


def _glres_issuers(schedule: Schedule, instance: Instance) -> list[tuple[int, int, float]]:
    """``(issuer, switch, bytes)`` of every ``glres`` the switch-channel export writes for
    ``schedule`` (the chunk's owner issues it); none when it writes none."""
    from .export_switch import glres_groups

    try:
        groups = glres_groups(schedule, instance)
    except InputError:
        return []
    coll, cb = instance.collective, chunk_bytes_of(instance)
    return [(coll.nodes[chunk // coll.chunks_per_node], w, float(cb[chunk]) * (hi - lo) / schedule.denom)
            for _, w, chunk, lo, hi in groups]


def price_switch_channels(schedule: Schedule, instance: Instance, calibration) -> Cost:
    """The ``runtime`` price (module doc) of ``schedule`` under a switch-channel calibration
    (a :class:`SwitchCalibration` or its file); a one-line :class:`~collsynth.InputError` when
    the schedule loads a link class the calibration has no share for."""
    from .runtime_program import link_classes

    cal = calibration if isinstance(calibration, SwitchCalibration) else load_switch_calibration(calibration)
    plain, summed, ops = link_loads(schedule, instance)
    cls = link_classes(instance)
    used = (plain > 0) | (summed > 0)
    missing = sorted({str(c) for c in cls[used] if c not in cal.share or c not in cal.switch_share})
    if missing:
        have = ", ".join(sorted(cal.share))
        raise InputError("--calibration", f"switch-channel calibration {cal.name!r} has shares for {have}; "
                                          f"this schedule also loads {', '.join(missing)}")
    bw = instance.topology.link_arrays.bandwidth
    share = np.array([cal.share.get(c, 1.0) for c in cls])
    switch_share = np.array([cal.switch_share.get(c, 1.0) for c in cls])
    busy = (plain / share + summed / switch_share) / bw
    fixed = float(ops.max(initial=0.0)) * cal.group_op_s
    link = int(np.argmax(busy)) if len(busy) else -1
    extra = {"calibration": cal.name, "busiest_link": link, "group_ops": int(ops.sum())}
    return Cost("runtime", int(schedule.num_steps), fixed, float(busy.max(initial=0.0)),
                float(busy.max(initial=0.0)) + fixed, extra=extra)


def nvls_port_bytes(n: int) -> float:
    """Bytes each way over a GPU's port per byte of allreduce in NCCL's NVLS (one box of ``n``
    GPUs, each load-reducing its ``1 / n`` through the switch and storing it once): ``1 + 1 / n``.

    >>> nvls_port_bytes(8)
    1.125
    """
    return 1.0 + 1.0 / n


def ring_port_bytes(n: int) -> float:
    """Bytes each way over a GPU's port per byte of a ring allreduce of ``n`` GPUs:
    ``2 (n - 1) / n`` (Patarasuk and Yuan, "Bandwidth optimal all-reduce algorithms for clusters
    of workstations", JPDC 69(2), 2009, Section 3).

    >>> ring_port_bytes(8)
    1.75
    """
    return 2.0 * (n - 1) / n


def fit_nvls(figures: list[dict], bandwidth: float) -> dict:
    """The shares that best explain ``figures`` (each ``{"algorithm": "nvls" | "ring", "gpus": n,
    "algbw_GBps": a, ...}``, an NCCL allreduce's algorithm bandwidth on one box whose GPU ports
    have ``bandwidth`` bytes/s): an algorithm moving ``f(n)`` bytes per byte over a port at share
    ``s`` runs at ``s B / f(n)``, so ``s`` is the least-squares fit of ``a f(n) / B`` in
    relative terms (the geometric mean of the per-figure shares). Returns ``{"nvls": s, "ring":
    s}`` (``None`` for an algorithm with no figure).

    >>> fit_nvls([{"algorithm": "nvls", "gpus": 8, "algbw_GBps": 270.0}], 450e9)["nvls"]
    0.675
    """
    port = {"nvls": nvls_port_bytes, "ring": ring_port_bytes}
    out = {}
    for algo, f in port.items():
        s = [fig["algbw_GBps"] * 1e9 * f(fig["gpus"]) / bandwidth for fig in figures if fig["algorithm"] == algo]
        out[algo] = round(float(np.exp(np.mean(np.log(s)))), 6) if s else None
    return out


def predicted_algbw(figure: dict, shares: dict, bandwidth: float) -> float:
    """The algorithm bandwidth (GB/s) ``shares`` predict for ``figure``'s algorithm and GPUs."""
    f = nvls_port_bytes if figure["algorithm"] == "nvls" else ring_port_bytes
    return shares[figure["algorithm"]] * bandwidth / f(figure["gpus"]) / 1e9
