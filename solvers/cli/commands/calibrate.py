"""``collsynth calibrate``: fit the runtime cost model to a system's measurements
(``docs/cost-models.md``, ``docs/fidelity.md``).

``calibrate MANIFEST.toml [--out CAL.json] [--name NAME] [--include-held-out]`` reads the
manifest (:mod:`collsynth.tens.measurements`: per measurement a program, the instance it runs
on and its nccl-tests log), checks every program against its instance and every log, fits
the runtime model (:func:`collsynth.tens.calibration.calibrate`) and writes the calibration
JSON that ``price --model runtime --calibration CAL.json`` takes. A log that is not
nccl-tests output, or a program that does not describe its instance's collective, is one
line naming the file (and the line), exit 2.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    """Add the calibrate command."""
    p = sub.add_parser("calibrate", help="fit the runtime cost model to nccl-tests measurements of known programs")
    p.add_argument("manifest", help="measurement manifest TOML (program, instance, log per measurement)")
    p.add_argument("--out", default=None, help="calibration JSON to write (default: none, the calibration is printed only)")
    p.add_argument("--name", default=None, help="the calibration's name (default: the manifest's system)")
    p.add_argument("--include-held-out", action="store_true",
                   help="also fit on measurements the manifest holds out (they are then no longer a test)")
    p.set_defaults(func=calibrate)


def calibrate(args) -> dict:
    """Fit and write the calibration of ``args.manifest``."""
    from ....tens.calibration import calibrate as fit_manifest

    cal = fit_manifest(args.manifest, name=args.name, include_held_out=args.include_held_out)
    data = cal.as_json()
    if args.out:
        Path(args.out).write_text(json.dumps(data, indent=1) + "\n")
    p = data["parameters"]
    text = (f"calibration {cal.name!r} on {cal.fit['rows']} rows of {len(cal.fit['measurements'])} measurements: "
            f"rms log error {cal.fit['rms_log_error']:.3f}; efficiency {p['efficiency']}, "
            f"thread block {cal.tb_rate / 1e9:.1f} GB/s, step {cal.step_s * 1e6:.2f} us"
            + (f"; written to {args.out}" if args.out else ""))
    return {**data, "out": args.out, "text": text}
