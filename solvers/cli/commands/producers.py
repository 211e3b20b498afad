"""``collsynth producers``: every producer and solver backend (``docs/results.md``).

``collsynth producers [--json]``: every producer (name, family, summary, whether ``--solver``
applies, drivers and the default one, its parameters with type, default and help) and every
solver backend with its availability. Listing them imports every producer family and the
solver backends (Pyomo among them).
"""

from __future__ import annotations

import argparse

from ... import backends
from ...producers import describe_params, producers


def register(sub: argparse._SubParsersAction) -> None:
    """Add the producers command."""
    p = sub.add_parser("producers", help="list producers, drivers and solver backends (with availability)")
    p.set_defaults(func=list_producers)


def list_producers(args: argparse.Namespace) -> dict:
    """Every producer and every backend with its availability."""
    rows = []
    for name, p in sorted(producers().items()):
        rows.append({"name": name, "family": p.family, "summary": p.summary, "uses_solver": p.uses_solver,
                     "drivers": list(p.drivers), "default_driver": p.default_driver,
                     "params": describe_params(p)})
    bk = backends.backends()
    lines = ["producers:"]
    for r in rows:
        drv = f" [drivers: {', '.join(r['drivers'])}]" if r["drivers"] else ""
        lines.append(f"  {r['name']:<24} {r['family']:<12} {r['summary']}{drv}")
        for q in r["params"]:
            dflt = "" if q["default"] is None else f" (default {q['default']})"
            lines.append(f"  {'':<24}   --param {q['name']}=<{q['type']}>{dflt}: {q['help']}")
    lines.append("backends:")
    for b in bk:
        lines.append(f"  {b['name']:<8} {'yes' if b['available'] else 'no ':<4} {b['reason']}")
    return {"producers": rows, "backends": bk, "text": "\n".join(lines)}
