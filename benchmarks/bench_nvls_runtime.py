"""The switch-channel runtime calibration (``tens/switch_runtime.py``) fitted to NVIDIA's NCCL
NVLS and ring figures on one H100 box, each figure left out in turn, and the ``runtime`` ratio
of the Must-show table on one ``dgx_h100 nvls=true`` box.

Run: ``python benchmarks/bench_nvls_runtime.py`` (seconds; ``--write`` rewrites
``instances/calibrations/h100-nvls.json`` from the fit on every figure). Prints, per figure, the
shares fitted without it, its predicted algorithm bandwidth and the error; then the 1 GB
allreduce on one box: ``nvls`` (as its switch-channel plan runs) against ``ring`` and
``tree-packing`` on the box without NVLS, all priced by ``runtime`` with that calibration.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "instances" / "measurements" / "nccl-nvls-h100" / "figures.json"
CALIBRATION = ROOT / "instances" / "calibrations" / "h100-nvls.json"


def leave_one_out(data: dict) -> list[dict]:
    """For every figure: the shares fitted on the others and its predicted algbw and error."""
    from collsynth.tens.switch_runtime import fit_nvls, predicted_algbw

    bw, figs, out = data["port_bandwidth_GBps"] * 1e9, data["figures"], []
    for i, fig in enumerate(figs):
        rest = figs[:i] + figs[i + 1:]
        shares = fit_nvls(rest, bw)
        got = predicted_algbw(fig, shares, bw)
        out.append({"id": fig["id"], "measured": fig["algbw_GBps"], "predicted": round(got, 1),
                    "error_pct": round(100 * (got - fig["algbw_GBps"]) / fig["algbw_GBps"], 2),
                    "share_nvls": shares["nvls"], "share_ring": shares["ring"]})
    return out


def calibration(data: dict, loo: list[dict]):
    """The calibration fitted on every figure (``nvswitch`` links; ``group_op_s`` 0: module doc)."""
    from collsynth.tens.switch_runtime import SwitchCalibration, fit_nvls

    s = fit_nvls(data["figures"], data["port_bandwidth_GBps"] * 1e9)
    src = "NCCL NVLS / ring allreduce on 8x H100 SXM: NVIDIA/nccl issue 1455, NVIDIA/nccl-tests issue 212 " \
          "(instances/measurements/nccl-nvls-h100/figures.json)"
    fit = {"figures": [f["id"] for f in data["figures"]], "leave_one_out": loo,
           "max_abs_error_pct": max(abs(r["error_pct"]) for r in loo),
           "group_op_s": "not identified (every figure is of 2-8 GB messages); set to 0"}
    return SwitchCalibration("h100-nvls", "dgx_h100 nvls=true (one box)", src, {"nvswitch": s["ring"]},
                             {"nvswitch": s["nvls"]}, 0.0, fit)


def ratio_row(cal) -> dict:
    """1 GB allreduce on one box: ``nvls`` and the best no-reduction schedule under ``runtime``."""
    from collsynth.instances.generators import build
    from collsynth.instances.instance import make_instance
    from collsynth.solvers import pipeline
    from collsynth.solvers.producers import Options
    from collsynth.tens.cost_models import price

    out = {}
    for producer, nvls in (("nvls", True), ("ring", False), ("tree-packing", False), ("nccl-ring", False)):
        inst = make_instance(build("dgx_h100", {"nodes": 1, "nvls": nvls}), "allreduce", message_bytes=1e9)
        row, sched = pipeline.run(inst, producer, Options(time_limit=600))
        if not row["verified"]:
            out[producer] = None
            continue
        out[producer] = price(sched, inst, "runtime", calibration=cal).total_s
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true", help="rewrite the shipped calibration from the fit")
    a = ap.parse_args(argv)
    data = json.loads(FIGURES.read_text())
    loo = leave_one_out(data)
    print("| figure left out | measured algbw GB/s | predicted | error % | NVLS share | ring share |")
    print("|---|---|---|---|---|---|")
    for r in loo:
        print(f"| {r['id']} | {r['measured']} | {r['predicted']} | {r['error_pct']:+.2f} | {r['share_nvls']} | "
              f"{r['share_ring']} |")
    cal = calibration(data, loo)
    print(f"\nall figures: NVLS share {cal.switch_share['nvswitch']}, ring share {cal.share['nvswitch']}")
    if a.write:
        CALIBRATION.write_text(json.dumps(cal.as_json(), indent=1) + "\n")
        print(f"wrote {CALIBRATION.relative_to(ROOT)}")
    times = ratio_row(cal)
    best = min((t, p) for p, t in times.items() if p != "nvls" and t is not None)
    print("\n| schedule | runtime ms |\n|---|---|")
    for p, t in times.items():
        print(f"| {p} | {t * 1e3:.4f} |" if t is not None else f"| {p} | not verified |")
    print(f"\nratio (best no-reduction {best[1]} / nvls) under runtime: {best[0] / times['nvls']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
