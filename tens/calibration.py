"""Fitting the runtime model's parameters to measurements (``collsynth calibrate``).

:func:`load_rows` turns a measurement manifest (:mod:`collsynth.tens.measurements`) into
what a fit needs: each measurement's program features on its instance
(:func:`collsynth.tens.runtime_program.program_features`) and its measured times at the sizes
that ran the program. :func:`fit` finds the :class:`~collsynth.tens.cost_models.runtime.Calibration`
minimising the squared log ratio of predicted to measured time over every row (a relative
error, so microsecond latencies weigh as much as 45 ms transfers), by
``scipy.optimize.least_squares`` (trust-region reflective) within physical bounds: link
efficiencies in (0.05, 1], a thread block's copy and reduce rates 1-400 GB/s, per-step, per-hop and
per-operation costs 0-100 us, the kernel cost 0-1 ms, per thread block 0-10 us, the share of an
iteration's rounds paid beyond its pipelined length 0-1, the share of the per-slice costs an
empty slice pays 0-1; for every other
runtime that ran some of the measurements (a manifest's ``runtime`` field), a scale of the
fixed costs in 0.1-10 and of the link efficiencies in 0.5-2 and its own empty-slice share 0-1
(:func:`~collsynth.tens.cost_models.runtime.for_runtime`). A link share that no fitted
measurement loads enough to determine may be set from a cited source instead (the manifest's
``[fixed]`` table, :func:`pin_fixed`); the calibration file's ``fit.fixed`` names it. No link
share is fitted below what a fitted measurement moved over a link of its class in its measured
time (:func:`share_floors`, the lower bounds of the fit; the file's ``fit.floors`` names the
measurement behind each).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from .. import InputError
from ..instances.instance import load_instance
from .cost_models.runtime import (MAX_CREDIT_S, PROTOCOL_BANDWIDTH, Calibration, for_runtime, load_calibration,
                                  runtime_times)
from .measurements import Manifest, Measurement, read_manifest, read_nccl_tests, read_program_text
from .peer_schedules import program_error, read_msccl_xml
from .switch_runtime import is_switch_calibration, load_switch_calibration
from .runtime_program import ProgramFeatures, program_features

__all__ = ["Row", "Floor", "load_rows", "scheduler_counts", "ran_program", "share_floors", "floor_shares", "fit", "least_cost_start", "start_points",
           "pin_fixed", "calibrate"]


@dataclass(frozen=True)
class Row:
    """One measurement ready to fit: its :class:`Measurement`, program features, sizes
    (bytes) and measured seconds at those sizes."""

    measurement: Measurement
    features: ProgramFeatures
    sizes: np.ndarray
    seconds: np.ndarray


def load_rows(manifest: Manifest, check_programs: bool = True) -> list[Row]:
    """The :class:`Row` of every measurement of ``manifest``. With ``check_programs`` each
    program is first read as a schedule on its instance (:func:`read_msccl_xml`), so a
    program that does not match its instance is an :class:`~collsynth.InputError` naming the
    program file and the line (:func:`~collsynth.tens.peer_schedules.program_error`); a log
    with no result row from the measurement's ``min_bytes`` on is one naming the log."""
    rows, cache, collective = [], {}, {}
    for m in manifest.measurements:
        key = (m.program, m.instance)
        if key not in cache:
            instance = load_instance(m.instance)
            collective[key] = (instance.collectives[0].kind, len(instance.collectives[0].nodes))
            text = read_program_text(m.program)
            try:
                if check_programs:
                    read_msccl_xml(text, instance)
                cache[key] = program_features(text, instance, manifest.transports)
            except InputError as e:
                located = program_error(m.program, text, e)
                raise InputError(located.where, f"{located.what} (instance {m.instance})") from None
        log = read_nccl_tests(m.log)
        col = log["in_place_us" if m.column == "in-place" else "out_of_place_us"]
        keep = log["size"] >= m.min_bytes
        if manifest.executor_counts:
            counts = scheduler_counts(log, *collective[key], m.count_scope or manifest.count_scope)
            keep &= ran_program(counts, cache[key].nchunksperloop)
        if not keep.any():
            raise InputError(str(m.log), f"no result row of {m.min_bytes} bytes or more (min_bytes of measurement "
                                         f"{m.name!r}; the largest is {int(log['size'].max())})")
        rows.append(Row(m, cache[key], log["size"][keep].astype(np.float64), col[keep] * 1e-6))
    return rows


def scheduler_counts(log: dict, kind: str, ranks: int, scope: str) -> np.ndarray:
    """The count an MSCCL scheduler tests against a program's chunks per loop, per row of the
    nccl-tests ``log`` (:func:`~collsynth.tens.measurements.parse_nccl_tests`) of a ``kind``
    collective on ``ranks`` ranks. ``scope`` ``"rank"``: the count as nccl-tests passes it, per
    rank for allgather and reduce-scatter (RCCL 2.18.3's MSCCL and msccl-executor-nccl 2.19.4,
    ``mscclInternalSchedulerSelectAlgo`` in ``msccl_lifecycle.cc``: ``param->count %
    m.nChunksPerLoop``). ``"collective"``: the whole collective's (MSCCL 0.7.4 on NCCL 2.12.12,
    microsoft/msccl: ``ncclTopoGetMSCCLAlgo`` in ``src/graph/tuning.cc`` tests ``totalCount``,
    the count times the ranks for allgather and reduce-scatter, and ``ArgsCheck`` in
    ``src/misc/argcheck.cc`` has made an allgather's count bytes), so an allgather's is its size
    in bytes.

    >>> log = {"size": np.array([256, 1024]), "count": np.array([4, 16])}
    >>> scheduler_counts(log, "allgather", 16, "collective").tolist()
    [256, 1024]
    >>> scheduler_counts(log, "reduce_scatter", 16, "collective").tolist()
    [64, 256]
    >>> scheduler_counts(log, "allgather", 16, "rank").tolist()
    [4, 16]
    """
    if scope == "rank":
        return np.asarray(log["count"])
    if kind == "allgather":
        return np.asarray(log["size"])
    return np.asarray(log["count"]) * (ranks if kind == "reduce_scatter" else 1)


def ran_program(counts: np.ndarray, nchunksperloop: int) -> np.ndarray:
    """Which nccl-tests rows of element counts ``counts`` ran the MSCCL program of
    ``nchunksperloop`` chunks a loop rather than the library's own algorithm: MSCCL's scheduler
    takes a program only for a count that is a multiple of its chunks per loop, else it falls
    back to NCCL's (RCCL's) collective (``mscclInternalSchedulerSelectAlgo`` in
    ``msccl_lifecycle.cc``: ``param->count % m.nChunksPerLoop == 0``, ``count`` as the caller
    passes it, per rank for allgather and reduce-scatter; RCCL 2.18.3's MSCCL). ForestColl's MI250
    logs show it: the 32-chunk allgather's in-place column is RCCL's 276 us (the out-of-place
    column's) at 512 B to 2 KiB, 16 elements a rank, and the program's 102 us from 4 KiB.
    ``counts``: :func:`scheduler_counts` (MSCCL 0.7.4 tests the whole collective's count).

    >>> ran_program(np.array([4, 16, 32, 64]), 32).tolist()
    [False, False, True, True]
    """
    return (np.asarray(counts) % nchunksperloop == 0) & (np.asarray(counts) > 0)


def _classes(rows: list[Row]) -> list[str]:
    return sorted({c for r in rows for c in r.features.class_load})


def _runtimes(rows: list[Row]) -> list[str]:
    """The runtimes other than the manifest's main one that ran some of ``rows``."""
    return sorted({r.measurement.runtime for r in rows} - {""})


def _unpack(x: np.ndarray, classes: list[str], runtimes: list[str], base: Calibration,
            floors: dict | None = None, gaps: bool = False, credits: tuple = ()) -> Calibration:
    """The calibration of the fit's vector ``x``; another runtime's bandwidth scale is raised to
    the least that keeps its scaled link shares at its ``floors`` (:func:`_scale_floor`);
    ``credits``, the network classes whose credit a call (``net_credit``, us) is fitted; with
    ``base.nic_credit`` the vector's last entry is the NIC credit ``credit_s`` in us, and with
    ``base.shared_chain`` the one after it the chain's share of the GPU's shared cost."""
    if base.shared_chain:
        base, x = replace(base, chain_share=float(x[-1])), x[:-1]
    if base.nic_credit:
        base, x = replace(base, credit_s=float(x[-1] * 1e-6)), x[:-1]
    k = len(classes)
    per_class = lambda lo, scale: dict(zip(classes, (x[lo:lo + k] * scale).tolist()))  # noqa: E731
    g = k if gaps else 0  # the links' costs per slice, when fitted, follow the scalars
    q = 3 * k + 7 + g  # then the network classes' credit a call, when fitted
    credit = dict(zip(credits, (x[q:q + len(credits)] * 1e-6).tolist()))
    tail = x[q + len(credits):]  # per other runtime: latency scale, bandwidth scale, handshake share
    return replace(base, efficiency=per_class(0, 1.0), hop_s=per_class(k, 1e-6),
                   gpu_op_s=per_class(2 * k, 1e-6),
                   tb_rate=float(x[3 * k] * 1e9), step_s=float(x[3 * k + 1] * 1e-6),
                   launch_s=float(x[3 * k + 2] * 1e-6), tb_s=float(x[3 * k + 3] * 1e-6),
                   reduce_rate=float(x[3 * k + 4] * 1e9), round_share=float(x[3 * k + 5]),
                   handshake_share=float(x[3 * k + 6]), link_slice_s=per_class(3 * k + 7, 1e-6) if gaps else {},
                   net_credit=credit,
                   runtimes={name: {"latency": float(tail[3 * i]),
                                    "bandwidth": max(float(tail[3 * i + 1]),
                                                     _scale_floor((floors or {}).get(name, {}), classes, x[:k])),
                                    "handshake": float(tail[3 * i + 2])}
                             for i, name in enumerate(runtimes)})


def log_errors(rows: list[Row], cal: Calibration) -> np.ndarray:
    """``log(predicted / measured)`` of every size of every row, concatenated (each row priced
    for the runtime that ran it, :func:`~collsynth.tens.cost_models.runtime.for_runtime`)."""
    return np.concatenate([np.log(runtime_times(r.features, r.sizes, for_runtime(cal, r.measurement.runtime),
                                                r.measurement.buff_bytes) / r.seconds) for r in rows])


def fit(rows: list[Row], name: str, system: str, source: str, transports: dict | None = None,
        fixed: dict | None = None, floors: bool = True, slice_gap: bool = False, serial_links: bool = False,
        credit_start: bool = False, sms: int = 0, fair_links: bool = False, fences: bool = False,
        block_waves: bool = False, net_credit: tuple = (),
        nic_credit: bool = False, multi_start: bool = False, shared_chain: bool = False) -> Calibration:
    """The calibration of least squared log error over ``rows`` (see the module doc), for a
    system whose runtime's ``transports`` are those ``rows``' features were read with
    (:func:`load_rows`: the manifest's); ``fixed``, the manifest's parameters set from a source
    rather than fitted (:func:`pin_fixed`). With ``floors`` (the default) no link share is fitted
    below its :func:`share_floors`; without (a manifest's ``share_floors = false``) the floors
    are only recorded, with the classes fitted below them (``fit.below_floors``). With
    ``slice_gap`` (a manifest's ``link_slice_cost = true``) each link class's cost per slice
    crossing it (``link_slice_s``, 0-10 us) is fitted too; without, it is 0. ``serial_links``
    (a manifest's ``serial_links = true``): the calibration's thread blocks pay their fixed costs
    on top of their busiest link's time (``Calibration.serial_links``). ``credit_start`` (a
    manifest's ``credit_start = true``): the least squares run a second time, from
    :func:`credit_start_point`, and the fit of the two with the lower squared error kept (both
    errors are recorded, ``fit.starts``). ``sms`` (a manifest's ``sms``): the SMs of one GPU,
    beyond which its thread blocks share SMs (``Calibration.sms``; 0: not modelled).
    ``fair_links`` (a manifest's ``fair_links = true``): chain copies no faster than a link's
    fair share (``Calibration.fair_links``).
    ``fences`` (a manifest's ``fences = true``): the GPU's shared cost per slice is the slice's
    fence, which an empty slice skips and which adds to the links' bytes in a program whose
    thread blocks hold the next iteration back (``Calibration.fences``). ``block_waves`` (a
    manifest's ``block_waves = true``): with ``sms``, one thread block an SM, those beyond
    waiting for an SM to free (``Calibration.block_waves``). ``net_credit`` (a
    manifest's ``net_credit``, network link classes): each class's credit a call on its
    connections (``Calibration.net_credit``, 0-100 us, started at 5 us) is fitted too. ``nic_credit`` (a manifest's
    ``nic_credit = true``): each round of an iteration's chain over a NIC pays the connection's
    credit round trip, ``credit_s`` fitted in 0-10 us (``MAX_CREDIT_S``; ``Calibration.nic_credit``).
    ``shared_chain`` (a manifest's ``shared_chain = true``): a share of the GPU's shared cost
    per slice adds to the first iteration's chain, ``chain_share`` fitted in 0-1 from 0.1
    (``Calibration.shared_chain``).
    ``multi_start`` (a manifest's ``multi_start = true``): the least squares run from every
    point of :func:`start_points` (the default, the credit start and :data:`SPREAD_STARTS`
    points of a seeded Latin hypercube over the bounds) and the one of least in-sample
    squared error kept (:func:`least_cost_start`; every start's error is recorded,
    ``fit.starts``)."""

    if not rows:
        raise InputError("manifest", "no measurements to fit")
    classes, runtimes = _classes(rows), _runtimes(rows)
    k, n = len(classes), len(runtimes)
    base = Calibration(name, system, source, {}, {}, {}, 1.0, 1.0, 0.0, 0.0, 0.0, transports=dict(transports or {}),
                       serial_links=serial_links, sms=sms, fair_links=fair_links, fences=fences,
                       block_waves=block_waves, nic_credit=nic_credit, shared_chain=shared_chain)
    # units: efficiency, hop us, GPU op us, copy GB/s, step us, launch us, tb us, reduce GB/s, round share,
    # handshake share, link us per slice; per other runtime its latency and bandwidth scales and its handshake share
    g = k if slice_gap else 0  # without slice_gap the links' cost per slice is not in the vector: 0
    credits = tuple(c for c in net_credit if c in classes)
    q = len(credits)
    x0 = np.array([0.8] * k + [2.0] * k + [0.5] * k + [20.0, 2.0, 20.0, 0.5, 20.0, 0.5, 0.3] + [0.1] * g
                  + [5.0] * q + [1.0, 1.0, 0.3] * n)
    lo = np.array([0.05] * k + [0.0] * k + [0.0] * k + [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0] + [0.0] * g
                  + [0.0] * q + [0.1, 0.5, 0.0] * n)
    hi = np.array([1.0] * k + [100.0] * k + [100.0] * k + [400.0, 100.0, 1000.0, 10.0, 400.0, 1.0, 1.0] + [10.0] * g
                  + [100.0] * q + [10.0, 2.0, 1.0] * n)
    if nic_credit:  # the NIC credit's round trip, us, last
        x0, lo, hi = np.append(x0, 2.0), np.append(lo, 0.0), np.append(hi, MAX_CREDIT_S * 1e6)
    if shared_chain:  # the chain's share of the GPU's shared cost, last
        x0, lo, hi = np.append(x0, 0.1), np.append(lo, 0.0), np.append(hi, 1.0)
    measured = share_floors(rows)
    applied = measured if floors else {}
    floor_shares(applied, classes, lo, hi, hi[3 * k + 8 + g + q] if n else 1.0)
    pin_fixed(fixed or {}, classes, x0, lo, hi, applied.get("", {}))
    x0 = np.clip(x0, lo, hi)
    residuals = lambda x: log_errors(rows, _unpack(x, classes, runtimes, base, applied, slice_gap,  # noqa: E731
                                                   credits))
    starts = start_points(x0, k, lo, hi) if multi_start else {"default": x0} | (
        {"credit": np.clip(credit_start_point(x0, k), lo, hi)} if credit_start else {})
    best, runs = least_cost_start(residuals, starts, lo, hi)
    cal = _unpack(runs[best].x, classes, runtimes, base, applied, slice_gap, credits)
    err = log_errors(rows, cal)
    fitinfo = {"rows": int(len(err)), "measurements": [r.measurement.name for r in rows],
               "rms_log_error": float(np.sqrt(np.mean(err ** 2))),
               "geomean_abs_error": float(np.exp(np.mean(np.abs(err))) - 1),
               "optimizer": "scipy.optimize.least_squares (trf)", **({"fixed": fixed} if fixed else {}),
               "floors": {rt or "main": {c: fl.as_json() for c, fl in per.items()} for rt, per in measured.items()},
               **({} if floors else {"below_floors": _below(cal, measured)}),
               **({"starts": {key: float(np.sqrt(2 * r.cost / len(err))) for key, r in runs.items()},
                   "start": best} if credit_start or multi_start else {})}
    return replace(cal, fit=fitinfo)


SPREAD_STARTS = 4  # the multi-start fit's points spread over the bounds, beside the default and credit starts
SPREAD_SEED = 0  # the seed of their Latin hypercube: fixed, so a calibration is reproduced exactly


def least_cost_start(residuals, starts: dict, lo: np.ndarray, hi: np.ndarray) -> tuple[str, dict]:
    """``(name, runs)``: ``scipy.optimize.least_squares`` (trf, within ``lo``-``hi``) of
    ``residuals`` run from each of ``starts`` (name -> start vector), every run by name, and the
    name of the run of least cost (half its squared residuals; the first such start on a tie).
    The choice is by the fitted rows' own error only (a multi-start least squares: Nocedal and
    Wright, Numerical Optimization, 2nd ed., Springer 2006, section 10.3, global minimisation
    by local searches from several starts).

    >>> two_basins = lambda x: np.array([(x[0] - 1) * (x[0] - 4), 0.1 * (x[0] - 4) * (x[0] + 2)])
    >>> best, runs = least_cost_start(two_basins, {"near 1": np.array([0.5]), "near 4": np.array([5.0])},
    ...                               np.array([-1.0]), np.array([6.0]))
    >>> best, [(round(float(runs[k].x[0]), 4), round(float(runs[k].cost), 4)) for k in runs]
    ('near 4', [(1.0, 0.405), (4.0, 0.0)])
    """
    runs = {key: least_squares(residuals, x, bounds=(lo, hi), method="trf") for key, x in starts.items()}
    return min(runs, key=lambda key: runs[key].cost), runs


def start_points(x0: np.ndarray, k: int, lo: np.ndarray, hi: np.ndarray) -> dict:
    """The multi-start fit's starts (name -> vector within ``lo``-``hi``): ``default`` (``x0``),
    ``credit`` (:func:`credit_start_point`) and ``spread1``..``spread4``, the points of a Latin
    hypercube of :data:`SPREAD_STARTS` samples seeded :data:`SPREAD_SEED`
    (``scipy.stats.qmc.LatinHypercube``; McKay, Beckman and Conover, A Comparison of Three
    Methods for Selecting Values of Input Variables in the Analysis of Output from a Computer
    Code, Technometrics 21(2), 1979) scaled to the bounds; a pinned parameter (``lo`` equal
    to ``hi`` but for rounding, :func:`pin_fixed`) keeps ``x0``'s value.

    >>> pts = start_points(np.array([0.8, 2.0, 0.5]), 1, np.array([0.05, 0.0, 0.0]), np.array([1.0, 100.0, 100.0]))
    >>> list(pts), pts["credit"].tolist()
    (['default', 'credit', 'spread1', 'spread2', 'spread3', 'spread4'], [0.8, 5.0, 0.0])
    >>> sorted(int(p[1] // 25) for key, p in pts.items() if key.startswith("spread"))
    [0, 1, 2, 3]
    """
    from scipy.stats import qmc

    unit = qmc.LatinHypercube(d=len(x0), seed=SPREAD_SEED).random(SPREAD_STARTS)
    pinned = hi - lo <= 1e-6 * np.maximum(np.abs(hi), 1.0)
    spread = [np.where(pinned, x0, lo + u * (hi - lo)) for u in unit]
    return {"default": x0, "credit": np.clip(credit_start_point(x0, k), lo, hi),
            **{f"spread{i + 1}": np.clip(p, lo, hi) for i, p in enumerate(spread)}}


def credit_start_point(x0: np.ndarray, k: int) -> np.ndarray:
    """The fit's start ``x0`` (``k`` link classes: shares, then per-slice credit ``hop_s`` and
    GPU shared cost ``gpu_op_s`` in us) with the per-slice costs on each connection's credit
    rather than on the GPU: 5 us of credit a slice on every class, no shared cost. The fit has
    optima of nearly equal error on either side (``docs/fidelity.md``); started at the default
    it stays on the shared side, where more thread blocks cannot run an iteration faster.

    >>> credit_start_point(np.array([0.8, 0.8, 2.0, 2.0, 0.5, 0.5, 20.0]), 2).tolist()
    [0.8, 0.8, 5.0, 5.0, 0.0, 0.0, 20.0]
    """
    x = x0.copy()
    x[k:2 * k] = 5.0
    x[2 * k:3 * k] = 0.0
    return x


def _below(cal: Calibration, floors: dict) -> dict:
    """Runtime (``"main"`` for the calibration's own) -> link classes whose share in ``cal`` (for
    that runtime, :func:`for_runtime`) is below its floor."""
    out = {}
    for rt, per in floors.items():
        eff = for_runtime(cal, rt).efficiency
        low = sorted(c for c, fl in per.items() if eff.get(c, 1.0) < fl.share * (1 - 1e-9))
        if low:
            out[rt or "main"] = low
    return out


@dataclass(frozen=True)
class Floor:
    """The least share of nominal bandwidth a link class needs to carry what one measurement
    moved over its busiest link of that class in its measured time (:func:`share_floors`):
    ``share``, the measurement's name, the size (bytes) and the measured seconds it comes from."""

    share: float
    measurement: str
    size_bytes: int
    measured_s: float

    def as_json(self) -> dict:
        """The calibration file's record of the floor (``fit.floors``)."""
        return {"share": self.share, "measurement": self.measurement, "size_bytes": self.size_bytes,
                "measured_s": self.measured_s}


def share_floors(rows: list[Row]) -> dict:
    """Runtime (``""`` for the main one) -> link class -> the :class:`Floor` of the least share
    of nominal bandwidth at which that runtime's links of the class carry what every one of
    ``rows`` (run by it) was measured to carry: the largest over rows and sizes of

        ``share_min = (S / N) * class_load[c] / (p * T)``,

    ``S`` the size (bytes), ``N`` the program's ``nchunksperloop``, ``T`` the measured seconds,
    ``p`` the protocol's data share of a link's bytes (``PROTOCOL_BANDWIDTH``), ``class_load[c]``
    the largest over links ``l`` of class ``c`` of ``n_l / B_l``: ``n_l`` chunks a loop
    iteration on ``l`` as the runtime model routes them, ``B_l`` its nominal bandwidth
    (:func:`~collsynth.tens.runtime_program.program_features`).

    Why it is a lower bound. The program cuts each chunk of ``S / N`` bytes into ``I`` loop
    iterations of ``s`` bytes, ``I * s = S / N``, and every iteration moves ``n_l`` chunk pieces of
    ``s`` bytes over ``l``: the collective moves ``n_l * S / N`` data bytes, ``n_l S / (N p)`` bytes
    of the protocol, over ``l``, all within the measured time (nccl-tests times back-to-back
    collectives between a barrier and a synchronize and reports their mean; a rank's start or
    end skew is shared over those runs). A link moving them in ``T`` runs at ``n_l S / (N p T)``
    bytes/s or faster, a share of ``B_l`` of at least ``share_min``; a smaller share cannot carry
    the measurement. In the runtime model's own terms: its time is at least ``I`` periods,
    each at least the busiest port's ``s * class_load[c] / (e_c * p)``
    (:func:`~collsynth.tens.cost_models.runtime.runtime_times`), so at a share ``e_c`` below
    ``share_min`` it prices the measurement slower than measured whatever its other parameters.
    The bound holds for the model's routes (which links carry a send), the same ones it prices.

    One link, 1 GB/s, carrying each iteration one of the program's 2 chunks: 1 MB in 1 ms
    (0.5 MB over the link) needs half its bandwidth.

    >>> from collsynth.tens.runtime_program import ProgramFeatures
    >>> f = ProgramFeatures(np.ones(1), np.ones(1), np.zeros(1), {}, {}, 1, {"link": 1e-9}, 1, 1, 0, {}, 2, 1,
    ...                     "Simple", "allgather")
    >>> m = Measurement("m", Path("p"), Path("i"), Path("l"), 1 << 20, "in-place", 0, False)
    >>> share_floors([Row(m, f, np.array([1e5, 1e6]), np.array([5e-4, 1e-3]))])[""]["link"]
    Floor(share=0.5, measurement='m', size_bytes=1000000, measured_s=0.001)
    """
    out: dict = {}
    for r in rows:
        f = r.features
        for c, load in f.class_load.items():
            need = r.sizes / f.nchunksperloop * load / (PROTOCOL_BANDWIDTH.get(f.proto, 1.0) * r.seconds)
            i = int(np.argmax(need))
            per = out.setdefault(r.measurement.runtime, {})
            if c not in per or need[i] > per[c].share:
                per[c] = Floor(float(need[i]), r.measurement.name, int(r.sizes[i]), float(r.seconds[i]))
    return out


def floor_shares(floors: dict, classes: list[str], lo: np.ndarray, hi: np.ndarray, most_scale: float) -> None:
    """Raise, in place, the lower bounds ``lo`` of the link shares (the first ``len(classes)``
    entries) to the main runtime's :func:`share_floors`, and to another runtime's over
    ``most_scale`` (its largest bandwidth scale, so that :func:`_scale_floor` can lift it to its
    own floors); a floor above the share's upper bound (a measurement moving more than the
    link's nominal bandwidth) is an :class:`~collsynth.InputError` naming the measurement."""
    for rt, per in floors.items():
        for c, fl in per.items():
            need = fl.share if not rt else fl.share / most_scale
            i = classes.index(c)
            if need > hi[i] or fl.share > 1.0:
                raise InputError(f"measurement {fl.measurement!r}",
                                 f"moved {fl.share:.3f} of link class {c}'s nominal bandwidth at {fl.size_bytes} "
                                 f"bytes in {fl.measured_s:.6g} s; expected at most 1 (check the instance's bandwidths)")
            lo[i] = max(lo[i], need)


def _scale_floor(floors: dict, classes: list[str], shares: np.ndarray) -> float:
    """The least bandwidth scale of another runtime at which each link class's scaled share
    (``shares`` times the scale) reaches that runtime's floor (``floors``: class -> :class:`Floor`)."""
    return max((fl.share / shares[classes.index(c)] for c, fl in floors.items()), default=0.0)


def pin_fixed(fixed: dict, classes: list[str], x0: np.ndarray, lo: np.ndarray, hi: np.ndarray,
              floors: dict | None = None) -> None:
    """Pin, in place, the fit's start ``x0`` and bounds ``lo``/``hi`` at the values of
    ``fixed["efficiency"]`` (link class -> share of nominal bandwidth) for the classes the rows
    use: a link share no fitted measurement loads enough to determine, set from a source (the
    manifest's ``[fixed]`` table, :func:`collsynth.tens.measurements.read_fixed`). The bounds
    are left a relative 1e-9 apart (the optimizer needs ``lo < hi``). A value below the class's
    floor (``floors``, class -> :class:`Floor` of :func:`share_floors`) is an
    :class:`~collsynth.InputError`: the fitted measurement it names moved more.

    >>> x0, lo, hi = np.array([0.8, 0.8]), np.array([0.05, 0.05]), np.array([1.0, 1.0])
    >>> pin_fixed({"efficiency": {"nic": 0.6}}, ["nic", "xgmi"], x0, lo, hi)
    >>> x0.tolist(), bool(lo[0] < 0.6 < hi[0]), lo[1:].tolist(), hi[1:].tolist()
    ([0.6, 0.8], True, [0.05], [1.0])
    """
    for c, v in fixed.get("efficiency", {}).items():
        fl = (floors or {}).get(c)
        if fl is not None and v < fl.share:
            raise InputError(f"fixed.efficiency.{c}", f"{v} is below {fl.share:.4f}, what measurement "
                                                       f"{fl.measurement!r} moved at {fl.size_bytes} bytes")
        if c in classes:
            i = classes.index(c)
            x0[i], lo[i], hi[i] = v, v * (1 - 1e-9), v * (1 + 1e-9)


def calibrate(manifest_path: str | Path, name: str | None = None, include_held_out: bool = False) -> Calibration:
    """Fit the calibration of the manifest at ``manifest_path`` on its measurements (those
    marked ``held_out`` only with ``include_held_out``)."""
    manifest = read_manifest(manifest_path)
    rows = [r for r in load_rows(manifest) if include_held_out or not r.measurement.held_out]
    try:
        return fit(rows, name or manifest.system, manifest.system, manifest.source, manifest.transports,
                   manifest.fixed, manifest.share_floors, manifest.link_slice_cost, manifest.serial_links,
                   manifest.credit_start, manifest.sms, manifest.fair_links, manifest.fences, manifest.block_waves,
                   manifest.net_credit, manifest.nic_credit,
                   manifest.multi_start, manifest.shared_chain)
    except InputError as e:  # a floor above a fixed share or the nominal bandwidth: name the manifest
        if not e.where.startswith(("fixed.", "measurement ")):
            raise
        raise InputError(f"{manifest_path}: {e.where}", e.what) from None


def load_any_calibration(path):
    """The calibration in ``path``: a :class:`SwitchCalibration` for a switch-channel file, else
    the msccl-executor one (:func:`collsynth.tens.cost_models.runtime.load_calibration`);
    switch-channel files are read by :mod:`collsynth.tens.switch_runtime`."""
    if is_switch_calibration(path):
        return load_switch_calibration(path)
    return load_calibration(path)
