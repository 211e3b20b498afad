"""``collsynth producers``: every producer and solver backend (``docs/results.md``).

``collsynth producers [--json]``: every producer (name, family, summary, whether ``--solver``
applies, drivers and the default one, its parameters with type, default and help) and every
solver backend with its availability. Listing them imports every producer family and the
solver backends (Pyomo among them).

``collsynth warmup [--producers a,b] [--jobs K] [--json]``: compile every numba kernel ahead
(:func:`collsynth.solvers.compiling.compile_all`), over ``--jobs`` processes, so that no first
run waits for it; a second warmup only loads them from numba's on-disk cache.
"""

from __future__ import annotations

import argparse

import os

from .... import InputError
from ..checks import items


def register(sub: argparse._SubParsersAction) -> None:
    """Add the producers command."""
    p = sub.add_parser("producers", help="list producers, drivers and solver backends (with availability)")
    p.set_defaults(func=list_producers)
    w = sub.add_parser("warmup", help="compile every numba kernel ahead (first run on a machine only; cached on disk)")
    w.add_argument("--producers", default=None, help="comma-separated producers whose kernels to compile (default: all)")
    w.add_argument("--jobs", type=int, default=None, help="processes compiling at once (default: cores)")
    w.set_defaults(func=warmup)


def warmup(args: argparse.Namespace) -> dict:
    """Compile (or load) every kernel the producers and every run use, ahead of any run."""
    from ...compiling import compile_all
    from ...producers import get

    names = [get(n, "--producers").name for n in items("--producers", args.producers)] or None
    if args.jobs is not None and args.jobs < 1:
        raise InputError("--jobs", f"expected a positive integer, got {args.jobs}")
    done = compile_all(names, jobs=args.jobs or os.cpu_count() or 1)
    how = "compiled" if done["compiled"] else "already compiled: loaded from numba's cache"
    return {**done, "text": f"kernels {how} in {done['seconds']:.1f} s ({len(done['tasks'])} groups)"}


def list_producers(args: argparse.Namespace) -> dict:
    """Every producer and every backend with its availability."""
    from ... import backends
    from ...producers import describe_params, producers

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
