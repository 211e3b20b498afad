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
(:func:`~collsynth.tens.cost_models.runtime.for_runtime`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from .. import InputError
from ..instances.instance import load_instance
from .cost_models.runtime import Calibration, for_runtime, load_calibration, runtime_times
from .measurements import Manifest, Measurement, read_manifest, read_nccl_tests, read_program_text
from .peer_schedules import program_error, read_msccl_xml
from .switch_runtime import is_switch_calibration, load_switch_calibration
from .runtime_program import ProgramFeatures, program_features

__all__ = ["Row", "load_rows", "fit", "calibrate"]


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
    rows, cache = [], {}
    for m in manifest.measurements:
        key = (m.program, m.instance)
        if key not in cache:
            instance = load_instance(m.instance)
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
        if not keep.any():
            raise InputError(str(m.log), f"no result row of {m.min_bytes} bytes or more (min_bytes of measurement "
                                         f"{m.name!r}; the largest is {int(log['size'].max())})")
        rows.append(Row(m, cache[key], log["size"][keep].astype(np.float64), col[keep] * 1e-6))
    return rows


def _classes(rows: list[Row]) -> list[str]:
    return sorted({c for r in rows for c in r.features.class_load})


def _runtimes(rows: list[Row]) -> list[str]:
    """The runtimes other than the manifest's main one that ran some of ``rows``."""
    return sorted({r.measurement.runtime for r in rows} - {""})


def _unpack(x: np.ndarray, classes: list[str], runtimes: list[str], base: Calibration) -> Calibration:
    k = len(classes)
    per_class = lambda lo, scale: dict(zip(classes, (x[lo:lo + k] * scale).tolist()))  # noqa: E731
    tail = x[3 * k + 7:]  # per other runtime: latency scale, bandwidth scale, handshake share
    return replace(base, efficiency=per_class(0, 1.0), hop_s=per_class(k, 1e-6),
                   gpu_op_s=per_class(2 * k, 1e-6),
                   tb_rate=float(x[3 * k] * 1e9), step_s=float(x[3 * k + 1] * 1e-6),
                   launch_s=float(x[3 * k + 2] * 1e-6), tb_s=float(x[3 * k + 3] * 1e-6),
                   reduce_rate=float(x[3 * k + 4] * 1e9), round_share=float(x[3 * k + 5]),
                   handshake_share=float(x[3 * k + 6]),
                   runtimes={name: {"latency": float(tail[3 * i]), "bandwidth": float(tail[3 * i + 1]),
                                    "handshake": float(tail[3 * i + 2])}
                             for i, name in enumerate(runtimes)})


def log_errors(rows: list[Row], cal: Calibration) -> np.ndarray:
    """``log(predicted / measured)`` of every size of every row, concatenated (each row priced
    for the runtime that ran it, :func:`~collsynth.tens.cost_models.runtime.for_runtime`)."""
    return np.concatenate([np.log(runtime_times(r.features, r.sizes, for_runtime(cal, r.measurement.runtime),
                                                r.measurement.buff_bytes) / r.seconds) for r in rows])


def fit(rows: list[Row], name: str, system: str, source: str, transports: dict | None = None) -> Calibration:
    """The calibration of least squared log error over ``rows`` (see the module doc), for a
    system whose runtime's ``transports`` are those ``rows``' features were read with
    (:func:`load_rows`: the manifest's)."""
    if not rows:
        raise InputError("manifest", "no measurements to fit")
    classes, runtimes = _classes(rows), _runtimes(rows)
    k, n = len(classes), len(runtimes)
    base = Calibration(name, system, source, {}, {}, {}, 1.0, 1.0, 0.0, 0.0, 0.0, transports=dict(transports or {}))
    # units: efficiency, hop us, GPU op us, copy GB/s, step us, launch us, tb us, reduce GB/s, round share,
    # handshake share; per other runtime its latency and bandwidth scales and its handshake share
    x0 = np.array([0.8] * k + [2.0] * k + [0.5] * k + [20.0, 2.0, 20.0, 0.5, 20.0, 0.5, 0.3] + [1.0, 1.0, 0.3] * n)
    lo = np.array([0.05] * k + [0.0] * k + [0.0] * k + [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0] + [0.1, 0.5, 0.0] * n)
    hi = np.array([1.0] * k + [100.0] * k + [100.0] * k + [400.0, 100.0, 1000.0, 10.0, 400.0, 1.0, 1.0]
                  + [10.0, 2.0, 1.0] * n)
    res = least_squares(lambda x: log_errors(rows, _unpack(x, classes, runtimes, base)), x0, bounds=(lo, hi),
                        method="trf")
    cal = _unpack(res.x, classes, runtimes, base)
    err = log_errors(rows, cal)
    fitinfo = {"rows": int(len(err)), "measurements": [r.measurement.name for r in rows],
               "rms_log_error": float(np.sqrt(np.mean(err ** 2))),
               "geomean_abs_error": float(np.exp(np.mean(np.abs(err))) - 1),
               "optimizer": "scipy.optimize.least_squares (trf)"}
    return replace(cal, fit=fitinfo)


def calibrate(manifest_path: str | Path, name: str | None = None, include_held_out: bool = False) -> Calibration:
    """Fit the calibration of the manifest at ``manifest_path`` on its measurements (those
    marked ``held_out`` only with ``include_held_out``)."""
    manifest = read_manifest(manifest_path)
    rows = [r for r in load_rows(manifest) if include_held_out or not r.measurement.held_out]
    return fit(rows, name or manifest.system, manifest.system, manifest.source, manifest.transports)


def load_any_calibration(path):
    """The calibration in ``path``: a :class:`SwitchCalibration` for a switch-channel file, else
    the msccl-executor one (:func:`collsynth.tens.cost_models.runtime.load_calibration`);
    switch-channel files are read by :mod:`collsynth.tens.switch_runtime`."""
    if is_switch_calibration(path):
        return load_switch_calibration(path)
    return load_calibration(path)
