"""Fidelity of the runtime cost model: predicted against measured, leave-one-out.

Run: ``python benchmarks/bench_fidelity.py [--manifest M.toml] [--quick] [--save JSON]``
(default manifest: ForestColl's 2x8 A100 measurements, ``instances/measurements/forestcoll-a100x2``).

For every program of the manifest not held out, the runtime model is calibrated on every
other such program (all its ``NCCL_BUFFSIZE`` runs left out together: leave-one-program-out)
and predicts each of its measurements at every size that ran the program; held-out programs
are predicted by the calibration on all the others. Reported per program:

- ``algbw``: the absolute error of the predicted time, ``|measured / predicted - 1|`` (target
  within 25 %), median and worst over sizes, and over sizes of 1 MiB and more;
- ``vs ring``: the predicted time relative to NCCL's ring (as XML, same collective, same size,
  its own prediction: leave-one-out on A100; on MI250 RCCL's own ring, held out, with the same
  buffer size) against the measured ratio, ``|predicted ratio / measured ratio - 1|`` (target
  within 10 %); ``held_out_programs`` in the totals leaves the held-out rings' own rows out;
  a manifest's further held-out sets (``held_out_set``) are totalled apart (``held_out_<set>``);
- the same two under ``sync`` and ``event`` (ForestColl's A100 link model with NCCL's
  latencies), for contrast: ``sync`` is exact at every size from its latency and bandwidth
  parts at 1 GiB; ``event`` is interpolated linearly from its prices at 1 MiB and 1 GiB.

ASTRA-sim reports a geometric-mean error of 9.7-20.6 % for ring allreduce on HGX-H100 (its
documentation, analytical backend validation); the geomean column is comparable.
``--quick``: one buffer size per program (the 4 MiB default), no sync/event contrast.
``--held-out-only``: the held-out measurements alone (the rings left out in turn for their
ratios, as in the full run), runtime model only: the same held-out figures, a few fits.
``--jobs N``: the leave-one-out fits in ``N`` processes (same figures; on a shared machine
run it under ``nice``).
``--ours``: also our schedules at 1 GiB under the shipped calibration (no leave-one-out: they
were never measured): ``tree-packing`` and ``nccl-ring`` solved on the manifest's instances and
priced as their exported MSCCL programs run (on the grid, and with or without
receive-and-send steps, whichever prices lowest: ``program_of``; ``tree-packing`` with its
forests of at most 1 and 2 trees a root offered beside it, :mod:`collsynth.solvers.packing.few_trees`),
beside ForestColl's and NCCL's measured programs priced the same way. ``--ours-only``: that table alone; ``--sizes``: at these
message sizes (bytes, comma-separated; each schedule solved once at 1 GiB); ``--calibration F``:
priced under the calibration file ``F`` (the shipped one, ``instances/calibrations/``) instead of
one fitted here; ``--schedules DIR``: our solved schedules are kept in ``DIR`` (one JSON per
instance and producer) and read from there when present, so a new calibration re-prices the
same schedules without solving again (``docs/fidelity.md`` gives the command).
``--held-out-under F``: no fit; the held-out totals with every held-out measurement (rings
included) priced under the calibration file ``F``: the full run's held-out figures when ``F`` is
``collsynth calibrate``'s fit on the same manifest.
``--residuals --calibration F``: no fit; every measurement priced under ``F`` (in sample for
the rows ``F`` was fitted on), ``measured / predicted`` and the ratio to the ring's per program
family and size band (latency-bound below 1 MiB, 1-64 MiB, bandwidth-bound from 64 MiB), fitted
and held-out rows apart: where the model is wrong with one sign.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from markdown_table import table  # noqa: E402

from collsynth import InputError  # noqa: E402
from collsynth.instances.instance import load_instance  # noqa: E402
from collsynth.tens.calibration import fit, load_rows  # noqa: E402
from collsynth.tens.cost import price_event, price_sync  # noqa: E402
from collsynth.tens.cost_models.runtime import for_runtime, runtime_times  # noqa: E402
from collsynth.tens.measurements import read_manifest, read_program_text  # noqa: E402
from collsynth.tens.peer_schedules import read_msccl_xml  # noqa: E402

MANIFEST = HERE.parent / "instances" / "measurements" / "forestcoll-a100x2" / "manifest.toml"
MIB, GIB = 1 << 20, 1 << 30


def leave_one_out(rows, manifest, rings_only: bool = False, jobs: int = 1) -> dict:
    """Measurement name -> predicted seconds at its sizes (see the module doc); with
    ``rings_only`` only the rings are left out in turn (what the held-out ratios need); the
    fits run in ``jobs`` processes (the same fits, in any order)."""
    from concurrent.futures import ProcessPoolExecutor

    fitted = [r for r in rows if not r.measurement.held_out]
    programs = sorted({r.measurement.program for r in fitted
                       if not rings_only or "nccl_ring" in r.measurement.program.name})
    pred = {}
    args = [([r for r in fitted if r.measurement.program != p], f"loo-{p.name}", manifest) for p in programs]
    fits = []
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:  # the fit on all of them is one more job
        for job, cal in zip(args + [(fitted, "all", manifest)], pool.map(_fit_one, args + [(fitted, "all", manifest)])):
            fits.append(cal)
            print(f"  fit {job[1]}: rms log error {cal.fit['rms_log_error']:.4f} on {cal.fit['rows']} rows"
                  + (f", starts {cal.fit['starts']} kept {cal.fit['start']}" if "starts" in cal.fit else ""),
                  file=sys.stderr, flush=True)
    for p, cal in zip(programs, fits):
        for r in rows:
            if r.measurement.program == p:
                pred[r.measurement.name] = predict(r, cal)
    cal = fits[-1]
    for r in rows:
        if r.measurement.held_out:
            pred[r.measurement.name] = predict(r, cal)
    return pred


def held_out_under(rows, calibration: str) -> dict:
    """The held-out totals (:func:`totals`: ``held_out``, ``held_out_programs``) with every
    held-out measurement, the rings included, priced under the calibration file
    ``calibration``: the full run's held-out figures when it is that run's fit on all the
    fitted programs (``collsynth calibrate`` on the same manifest), without the leave-one-out fits."""
    from collsynth.tens.cost_models.runtime import load_calibration

    cal = load_calibration(calibration)
    held = [r for r in rows if r.measurement.held_out]
    _, tot = summarise(held, {r.measurement.name: predict(r, cal) for r in held}, "runtime")
    return {"held_out": totals(tot, True), "held_out_programs": totals(tot, True, rings=False)}


def _fit_one(job):
    """The calibration fitted on ``job``'s rows (rows, name, manifest): one leave-one-out fit."""
    rows, name, manifest = job
    return fit(rows, name, manifest.system, manifest.source, manifest.transports, manifest.fixed, manifest.share_floors,
               manifest.link_slice_cost, serial_links=manifest.serial_links, credit_start=manifest.credit_start,
               sms=manifest.sms, fair_links=manifest.fair_links, fences=manifest.fences,
               block_waves=manifest.block_waves, net_credit=manifest.net_credit,
               nic_credit=manifest.nic_credit, multi_start=manifest.multi_start, shared_chain=manifest.shared_chain)


def predict(row, cal):
    """Predicted seconds of a measurement's sizes under ``cal`` for the runtime that ran it."""
    return runtime_times(row.features, row.sizes, for_runtime(cal, row.measurement.runtime), row.measurement.buff_bytes)


def idealised(rows) -> dict:
    """Measurement name -> (sync, event) seconds at its sizes (see the module doc)."""
    out, cache = {}, {}
    for r in rows:
        key = (r.measurement.program, r.measurement.instance)
        if key not in cache:
            inst = load_instance(r.measurement.instance)
            s = read_msccl_xml(read_program_text(r.measurement.program), inst)
            at = lambda m: replace(inst, collectives=(replace(inst.collective, message_bytes=float(m)),))  # noqa: E731
            sy = price_sync(s, at(GIB))
            e1, e2 = price_event(s, at(MIB)).total_s, price_event(s, at(GIB)).total_s
            cache[key] = (sy.T_L_s, sy.T_B_s / GIB, e1, (e2 - e1) / (GIB - MIB))
            print(f"  priced {r.measurement.program.name} under sync and event", file=sys.stderr, flush=True)
        tl, tb, e1, slope = cache[key]
        out[r.measurement.name] = (tl + tb * r.sizes, e1 + slope * (r.sizes - MIB))
    return out


def ring_of(rows) -> dict:
    """Collective instance, and (instance, ``NCCL_BUFFSIZE``) -> the ring measurement's row
    (the program named ``nccl_ring``): a program's ratio is to the ring run with its buffer size
    where there is one (MI250: the library's own ring, out-of-place, in each buffer size's log),
    else to the instance's ring (A100: one run, 4 MiB)."""
    out = {}
    for r in rows:
        if "nccl_ring" in r.measurement.program.name:
            out[r.measurement.instance] = out[(r.measurement.instance, r.measurement.buff_bytes)] = r
    return out


def ring_for(rings: dict, r):
    """The ring row ``r``'s ratio is taken to (:func:`ring_of`), or None."""
    m = r.measurement
    return rings.get((m.instance, m.buff_bytes), rings.get(m.instance))


def errors(r, t, ring_row, ring_t) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(absolute error per size, ratio-to-ring error per shared size, those sizes)."""
    absolute = np.abs(r.seconds / t - 1)
    shared, i, j = np.intersect1d(r.sizes, ring_row.sizes, return_indices=True)
    ratio = np.abs((t[i] / ring_t[j]) / (r.seconds[i] / ring_row.seconds[j]) - 1)
    return absolute, ratio, shared


def summarise(rows, preds: dict, label: str) -> tuple[list[list], dict]:
    """Table rows per measurement and the totals, for the model whose predictions are ``preds``."""
    rings = ring_of(rows)
    out, tot = [], {"abs": [], "abs_big": [], "ratio": [], "ratio_big": [], "held": [], "set": [], "ring": []}
    for r in rows:
        t = preds[r.measurement.name]
        ring = ring_for(rings, r)
        if ring is None or "nccl_ring" in r.measurement.program.name:  # no ring, or the ring itself
            a, q, shared = np.abs(r.seconds / t - 1), np.zeros(0), np.zeros(0)
        else:
            a, q, shared = errors(r, t, ring, preds[ring.measurement.name])
        big, qbig = r.sizes >= MIB, shared >= MIB
        for k, v in (("abs", a), ("abs_big", a[big]), ("ratio", q), ("ratio_big", q[qbig])):
            tot[k].append(v)
        tot["held"].append(r.measurement.held_out)
        tot["set"].append(r.measurement.held_out_set)
        tot["ring"].append("nccl_ring" in r.measurement.program.name)
        out.append([r.measurement.name + (" (held out)" if r.measurement.held_out else ""), label,
                    f"{np.median(a):.1%}", f"{a.max():.1%}", f"{a[big].max():.1%}",
                    f"{np.median(q):.1%}" if len(q) else "-", f"{q[qbig].max():.1%}" if qbig.any() else "-",
                    f"{(q[qbig] <= 0.10).mean():.0%}" if qbig.any() else "-", f"{(a[big] <= 0.25).mean():.0%}"])
    return out, tot


def totals(tot: dict, held: bool, rings: bool = True, held_set: str = "") -> dict:
    """Aggregates over the measurements held out (``held``; those of the held-out set
    ``held_set``, ``""`` the manifest's first) or fitted leave-one-out (without the rings' own
    rows unless ``rings``)."""
    pick = [k for k, h in enumerate(tot["held"])
            if h == held and (rings or not tot["ring"][k]) and (not held or tot["set"][k] == held_set)]
    if not pick:
        return {}
    cat = lambda key: np.concatenate([tot[key][k] for k in pick])  # noqa: E731
    a, ab, q, qb = cat("abs"), cat("abs_big"), cat("ratio"), cat("ratio_big")
    return {"measurements": len(pick), "sizes": int(len(a)),
            "geomean_abs_error": float(np.exp(np.mean(np.log1p(a))) - 1),
            "geomean_abs_error_1MiB_up": float(np.exp(np.mean(np.log1p(ab))) - 1),
            "within_25pct_1MiB_up": float((ab <= 0.25).mean()), "within_25pct_all": float((a <= 0.25).mean()),
            **({"ratio_within_10pct_1MiB_up": float((qb <= 0.10).mean()),
                "ratio_within_10pct_all": float((q <= 0.10).mean()),
                "median_ratio_error_1MiB_up": float(np.median(qb))} if len(q) else {})}


def program_table(rows, models: dict) -> list[str]:
    """Per program (all its buffer sizes together), sizes of 1 MiB and more: each model's
    geometric-mean error and share within 25 %, and the share of ratios to the ring within 10 %."""
    rings = ring_of(rows)
    names = sorted({r.measurement.program.name for r in rows}, key=lambda n: ("nccl_ring" not in n, n))
    out = []
    for name in names:
        mine = [r for r in rows if r.measurement.program.name == name]
        cells = [name.replace(".xml.xz", "") + (" (held out)" if mine[0].measurement.held_out else ""), str(len(mine))]
        for model, preds in models.items():
            a, q = [], []
            for r in mine:
                t, big = preds[r.measurement.name], r.sizes >= MIB
                a.append(np.abs(r.seconds / t - 1)[big])
                ring = ring_for(rings, r)
                if ring is not None and "nccl_ring" not in name:
                    _, qq, shared = errors(r, t, ring, preds[ring.measurement.name])
                    q.append(qq[shared >= MIB])
            a = np.concatenate(a)
            q = np.concatenate(q) if q else np.zeros(0)
            cells += [f"{np.exp(np.mean(np.log1p(a))) - 1:.0%}", f"{(a <= 0.25).mean():.0%}",
                      f"{(q <= 0.10).mean():.0%}" if len(q) else "-"]
        out.append(cells)
    header = ["program", "runs"] + [f"{m} {c}" for m in models for c in ("geomean err", "<=25 %", "ratio <=10 %")]
    return table(header, out)


def headline(rows, models: dict, size: int = GIB, buff: int = 4 << 20) -> list[str]:
    """Measured and predicted algbw (GB/s) of every program at ``size`` with ``buff``."""
    out = []
    for r in rows:
        k = np.flatnonzero(r.sizes == size)
        if r.measurement.buff_bytes != buff or not len(k):
            continue
        k = int(k[0])
        label = r.measurement.program.name.replace(".xml.xz", "") + (" (held out)" if r.measurement.held_out else "")
        out.append([label,
                    f"{size / r.seconds[k] / 1e9:.1f}",
                    *(f"{size / preds[r.measurement.name][k] / 1e9:.1f}" for preds in models.values())])
    return table(["program", "measured GB/s", *(f"{m} GB/s" for m in models)], out)


BANDS = (("< 1 MiB", 0, MIB), ("1-64 MiB", MIB, 64 * MIB), (">= 64 MiB", 64 * MIB, float("inf")))


def family(name: str) -> str:
    """A program's family, read from its file name: NCCL's (or RCCL's) ring, ForestColl's k=1
    trees by instance count (``_instN``), TACCL's (``original-*``; ``parsed-*`` the blind set),
    Blink's, TE-CCL's; else the name itself.

    >>> family("msccl_allgather_split2_k1_inst4_NVLINK300_IB25.xml.xz"), family("nccl_ring_allgather_c32.xml.xz")
    ('ForestColl k=1 x4', 'ring')
    >>> family("parsed-Allgather.n16-DGXA100-steps8-tacclsol-improve-1_i2_scRemote1_IBContig.sccl.xml.xz")
    'TACCL (blind)'
    """
    import re
    if "nccl_ring" in name:
        return "ring"
    if name.startswith(("original-", "parsed-")):
        return "TACCL" + (" (blind)" if name.startswith("parsed-") else "")
    for key, label in (("blink", "Blink"), ("teccl", "TE-CCL")):
        if key in name:
            return label
    k = re.search(r"_k1_inst(\d+)", name)
    return f"ForestColl k=1 x{k.group(1)}" if k else name


def residual_table(rows, preds: dict) -> list[str]:
    """Per program family and size band (:data:`BANDS`), fitted and held-out rows apart:
    ``measured / predicted`` time (median, and the share of sizes above 1: the sign's
    consistency) and the ratio to the ring, ``measured ratio / predicted ratio`` (median, and
    the share above 1), over every size of the band of every measurement of the family."""
    rings = ring_of(rows)
    cells: dict = {}
    for r in rows:
        t = preds[r.measurement.name]
        key = (family(r.measurement.program.name), "held out" if r.measurement.held_out else "fitted")
        q, shared = np.zeros(0), np.zeros(0)
        ring = ring_for(rings, r)
        if ring is not None and "nccl_ring" not in r.measurement.program.name:
            shared, i, j = np.intersect1d(r.sizes, ring.sizes, return_indices=True)
            q = (r.seconds[i] / ring.seconds[j]) / (t[i] / preds[ring.measurement.name][j])
        for band, lo, hi in BANDS:
            a = (r.seconds / t)[(r.sizes >= lo) & (r.sizes < hi)]
            b = q[(shared >= lo) & (shared < hi)]
            c = cells.setdefault(key + (band,), ([], []))
            c[0].append(a)
            c[1].append(b)
    out = []
    for (fam, split, band), (a, b) in sorted(cells.items(), key=lambda kv: (kv[0][1], kv[0][0], _band_order(kv[0][2]))):
        a, b = np.concatenate(a), np.concatenate(b)
        if not len(a):
            continue
        out.append([fam, split, band, str(len(a)), f"{np.median(a):.3f}", f"{(a > 1).mean():.0%}",
                    f"{(np.abs(a - 1) <= 0.25).mean():.0%}",
                    *((f"{np.median(b):.3f}", f"{(b > 1).mean():.0%}", f"{(np.abs(1 / b - 1) <= 0.10).mean():.0%}")
                      if len(b) else ("-", "-", "-"))])
    return table(["family", "rows", "band", "sizes", "measured / predicted (median)", "> 1", "within 25 %",
                  "measured / predicted ratio to ring (median)", "> 1", "ratio within 10 %"], out)


def _band_order(band: str) -> int:
    return [b[0] for b in BANDS].index(band)


OURS = ("tree-packing", "nccl-ring")


def ours_at(manifest, rows, sizes=(GIB,), calibration=None, schedules=None) -> list[str]:
    """algbw (GB/s) at each of ``sizes`` under ``calibration`` (a file; default: the full
    calibration of ``manifest`` fitted here), for its main runtime (NCCL's ring also under its
    own): our producers' schedules on each collective of the manifest (solved once, at 1 GiB,
    and priced at every size; kept in and read from the folder ``schedules`` when given), and
    every measured 4 MiB-buffer program with what the hardware measured."""
    from collsynth.tens.cost_models.runtime import load_calibration

    if calibration is not None:
        cal = load_calibration(calibration)
    else:
        cal = fit([r for r in rows if not r.measurement.held_out], "all", manifest.system, manifest.source,
                  manifest.transports, manifest.fixed, manifest.share_floors, manifest.link_slice_cost,
                  serial_links=manifest.serial_links, credit_start=manifest.credit_start, sms=manifest.sms,
                  fair_links=manifest.fair_links, fences=manifest.fences, block_waves=manifest.block_waves,
                  net_credit=manifest.net_credit, nic_credit=manifest.nic_credit,
                  multi_start=manifest.multi_start, shared_chain=manifest.shared_chain)
    out = []
    for inst_file in sorted({r.measurement.instance for r in rows}):
        inst = _at(load_instance(inst_file), GIB)
        kind = inst.collective.kind
        solved = {producer: _solved(inst, Path(inst_file).stem, producer, schedules) for producer in OURS}
        fewer = _fewer_trees(inst, Path(inst_file).stem, schedules)
        for size in sizes:
            label = kind if len(sizes) == 1 else f"{kind} {_size_label(size)}"
            for producer, (row, schedule) in solved.items():
                out.append([label, *_ours_priced(producer, row, schedule, _at(inst, size), cal,
                                                 fewer if producer == "tree-packing" else ())])
                print(f"  priced {producer} on {label}", file=sys.stderr, flush=True)
            out.extend([label, *m] for m in _measured_at(rows, inst_file, size, cal))
    return table(["collective", "schedule", "measured GB/s", "runtime GB/s"], out)


def _solved(inst, stem: str, producer: str, folder) -> tuple[dict, object]:
    """``(row, schedule)`` of ``producer`` on ``inst``: read from ``folder`` when it holds the
    schedule (checked against the instance and verified), else solved (and written there)."""
    from collsynth.solvers.pipeline import run
    from collsynth.solvers.producers import Options
    from collsynth.tens.schedule import check_header, read_json, write_json
    from collsynth.tens.verify import check

    path = Path(folder) / f"{stem}-{producer}.json" if folder else None
    if path is not None and path.exists():
        schedule = read_json(path)
        check_header(schedule, inst, str(path))
        check(schedule, inst)
        return {"status": "read", "message": str(path)}, schedule
    row, schedule = run(inst, producer, Options(time_limit=600))
    if path is not None and schedule is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(schedule, path)
    return row, schedule


def _fewer_trees(inst, stem: str, folder) -> list:
    """``tree-packing``'s forests of at most ``k`` trees a root on ``inst``, for each ``k`` of
    :data:`~collsynth.solvers.packing.few_trees.KS` (:func:`~collsynth.solvers.packing.few_trees.limited`,
    verified; read from ``folder`` when it holds them, else built and written there)."""
    from collsynth.solvers.packing.few_trees import KS, limited
    from collsynth.tens.schedule import check_header, read_json, write_json
    from collsynth.tens.verify import check

    out = []
    for k in KS:
        path = Path(folder) / f"{stem}-tree-packing-k{k}.json" if folder else None
        if path is not None and path.exists():
            schedule = read_json(path)
            check_header(schedule, inst, str(path))
            check(schedule, inst)
        else:
            schedule = limited(inst, k, time_limit=600)
            if path is not None:
                write_json(schedule, path)
        out.append(schedule)
    return out


def _at(inst, size: int):
    return replace(inst, collectives=(replace(inst.collective, message_bytes=float(size)),))


def _size_label(size: int) -> str:
    return f"{size // GIB} GiB" if size >= GIB else f"{size // MIB} MiB"


def _ours_priced(producer, row, schedule, inst, cal, fewer=()) -> list[str]:
    """``[schedule, "-", runtime GB/s]`` of our producer's schedule on ``inst`` (its size); with
    ``fewer`` (its forests of fewer trees a root) the runtime model's export choice over all of
    them (:func:`~collsynth.solvers.packing.few_trees.runtime_choice`)."""
    from collsynth.tens.cost_models import get
    if schedule is None:
        return [producer + " (ours)", "-", f"{row['status']}: {row.get('message', '')}"]
    if fewer:
        return _chosen_priced(producer, schedule, inst, cal, fewer)
    try:
        cost = get("runtime").price(schedule, inst, calibration=cal)
    except InputError as e:
        return [producer + " (ours)", "-", f"not priced: {e.where}: {e.what}"]
    note = cost.extra.get("grid", "")
    size = inst.collective.message_bytes
    return [producer + " (ours)" + (f", {note}" if note else ""), "-", f"{size / cost.total_s / 1e9:.1f}"]


def _chosen_priced(producer, schedule, inst, cal, fewer) -> list[str]:
    """:func:`_ours_priced` of ``schedule`` and its forests of fewer trees a root ``fewer``: the
    cheapest program of them all under ``cal``, and which forest, grid and layout it is."""
    from collsynth.solvers.packing.few_trees import KS, runtime_choice
    from collsynth.tens.export_choice import program_shape
    try:
        found = runtime_choice(schedule, inst, cal, fewer)
    except InputError as e:
        return [producer + " (ours)", "-", f"not priced: {e.where}: {e.what}"]
    forest = "all trees" if found.source == 0 else f"{KS[found.source - 1]} tree(s) a root"
    note = (f"{forest}, {found.layout} layout on a 1/{found.grid} grid, "
            f"{program_shape(found.text)['thread_blocks']} thread blocks a GPU")
    return [f"{producer} (ours), {note}", "-", f"{inst.collective.message_bytes / found.seconds / 1e9:.1f}"]


def _measured_at(rows, inst_file, size: int, cal) -> list[list[str]]:
    """``[program, measured GB/s, runtime GB/s]`` of the 4 MiB-buffer measurements of
    ``inst_file`` at ``size`` (and under its own runtime when it names one)."""
    out = []
    for r in rows:
        k = np.flatnonzero(r.sizes == size)
        if r.measurement.instance != inst_file or r.measurement.buff_bytes != 4 << 20 or not len(k):
            continue
        label = r.measurement.program.name.replace(".xml.xz", "")
        measured = f"{size / r.seconds[k[0]] / 1e9:.1f}"
        base = runtime_times(r.features, [size], cal, 4 << 20)[0]
        out.append([label, measured, f"{size / base / 1e9:.1f}"])
        if r.measurement.runtime:
            own = predict(r, cal)[k[0]]
            out.append([f"{label} under {r.measurement.runtime}", measured, f"{size / own / 1e9:.1f}"])
    return out


def main() -> None:
    """Predict every measurement of the manifest and print the tables (see the module doc)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--manifest", default=str(MANIFEST))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--save", default=None)
    ap.add_argument("--jobs", type=int, default=1, help="leave-one-out fits in this many processes")
    ap.add_argument("--held-out-only", action="store_true",
                    help="only the held-out measurements (and the rings, left out in turn), runtime model only")
    ap.add_argument("--ours", action="store_true")
    ap.add_argument("--ours-only", action="store_true", help="only the --ours table (no leave-one-out)")
    ap.add_argument("--sizes", default=str(GIB), help="--ours: message sizes in bytes, comma-separated")
    ap.add_argument("--calibration", default=None, help="--ours: price under this calibration file (default: fitted)")
    ap.add_argument("--schedules", default=None, help="--ours: folder keeping our solved schedules (read when present)")
    ap.add_argument("--residuals", action="store_true",
                    help="only the residuals per program family and size band under --calibration (no fit)")
    ap.add_argument("--held-out-under", default=None, metavar="F",
                    help="no fit: the held-out totals with every held-out measurement priced under calibration F")
    args = ap.parse_args()
    manifest = read_manifest(args.manifest)
    rows = load_rows(manifest, check_programs=False)
    if args.quick:
        rows = [r for r in rows if r.measurement.buff_bytes == 4 << 20]
    sizes = tuple(int(x) for x in args.sizes.split(","))
    if args.ours_only:
        print("\n".join(ours_at(manifest, rows, sizes, args.calibration, args.schedules)))
        return
    if args.held_out_under:
        print(json.dumps(held_out_under(rows, args.held_out_under), indent=1))
        return
    if args.residuals:
        from collsynth.tens.cost_models.runtime import load_calibration
        if args.calibration is None:
            ap.error("--residuals prices under a calibration file: give --calibration")
        cal = load_calibration(args.calibration)
        print("\n".join(residual_table(rows, {r.measurement.name: predict(r, cal) for r in rows})))
        return
    models = {"runtime": leave_one_out(rows, manifest, rings_only=args.held_out_only, jobs=args.jobs)}
    if args.held_out_only:
        rows = [r for r in rows if r.measurement.held_out or "nccl_ring" in r.measurement.program.name]
    if not args.quick and not args.held_out_only:
        ideal = idealised(rows)
        models["sync"] = {k: v[0] for k, v in ideal.items()}
        models["event"] = {k: v[1] for k, v in ideal.items()}
    header = ["measurement", "model", "median err", "max err", "max err >=1MiB", "median ratio err",
              "max ratio err >=1MiB", "ratio <=10% (>=1MiB)", "algbw <=25% (>=1MiB)"]
    summary = {}
    for name, preds in models.items():
        lines, tot = summarise(rows, preds, name)
        print(f"\n### {name}\n")
        print("\n".join(table(header, lines)))
        summary[name] = {"fitted_leave_one_out": totals(tot, False), "held_out": totals(tot, True),
                         "held_out_programs": totals(tot, True, rings=False),
                         **{f"held_out_{s}": totals(tot, True, held_set=s) for s in sorted(set(tot["set"]) - {""})}}
    print("\n### per program, sizes of 1 MiB and more\n")
    print("\n".join(program_table(rows, models)))
    print("\n### algbw at 1 GiB, NCCL_BUFFSIZE 4 MiB\n")
    print("\n".join(headline(rows, models)))
    if args.ours:
        print("\n### ours beside the measured programs at 1 GiB (runtime, full calibration)\n")
        print("\n".join(ours_at(manifest, rows, sizes, args.calibration, args.schedules)))
    print("\n### totals\n")
    print(json.dumps(summary, indent=1))
    if args.save:
        Path(args.save).write_text(json.dumps({"summary": summary, "predictions": {
            m: {k: v.tolist() for k, v in p.items()} for m, p in models.items()}}, indent=0))


if __name__ == "__main__":
    main()
