"""``collsynth finder`` (Zhao et al., NSDI 2025, Section 5.4).

- ``collsynth finder --nodes N --degree D [--alpha A --bandwidth B --message M ...] [--confirm]``:
  the Pareto frontier of (T_L, T_B) over base topologies and expansions (T_B in units of M/B),
  each row with its allreduce time ``2 (T_L alpha + T_B M/B)`` summed over the message sizes,
  and the best pick. ``--confirm`` builds, verifies and prices every frontier schedule.
  ``--nodes`` is 2..:data:`MAX_NODES`, ``--degree`` 1..min(N - 1, :data:`MAX_DEGREE`); alpha,
  bandwidth and message sizes must be finite.
- ``collsynth finder --table 4|5|9 [--out collsynth-results/tables]``: regenerates the Table 4 analogue
  (N = 1024, d = 4 Pareto frontier), the Table 5 analogue (best topology for N = 5..12,
  d = 4) or the Table 9 analogue (base catalogue with BFB schedules) as Markdown and CSV.
"""

from __future__ import annotations

import argparse

from .... import InputError
from ...bfb.paper_setting import PAPER_ALPHA, PAPER_BANDWIDTH, PAPER_MESSAGE
from ..checks import finite, out_folder

# The search runs bottom-up over every divisor of N and every degree up to d: N = 4096, d = 4 takes
# ~12 s, N = 1024, d = 16 ~100 s, N = 4096, d = 16 over 5 minutes; far beyond, it never ends.
MAX_NODES = 4096
MAX_DEGREE = 16


def register(sub: argparse._SubParsersAction) -> None:
    """Add the finder command."""
    p = sub.add_parser("finder", help="Pareto frontier of (T_L, T_B) topologies for N nodes of degree d, and the best pick")
    p.add_argument("--nodes", type=int, default=None,
                   help=f"target number of nodes N, 2..{MAX_NODES} (no default: required unless --table)")
    p.add_argument("--degree", type=int, default=None,
                   help=f"target degree d, links per node, 1..min(N-1, {MAX_DEGREE}) (no default: required unless --table)")
    p.add_argument("--alpha", type=float, default=PAPER_ALPHA, help="node latency per comm step, s (default 10e-6)")
    p.add_argument("--bandwidth", type=float, default=PAPER_BANDWIDTH,
                   help="node bandwidth B, bytes/s (default 12.5e9 = 100 Gbps)")
    p.add_argument("--message", type=float, action="append", default=None,
                   help="allreduce size M in bytes (repeatable: the pick minimises the sum; default 1e6)")
    p.add_argument("--confirm", action="store_true", help="build, verify and price every frontier schedule (default: off)")
    p.add_argument("--table", type=int, choices=(4, 5, 9), default=None,
                   help="regenerate the Table 4 (N=1024, d=4), Table 5 (N=5..12, d=4) or Table 9 (base catalogue, "
                        "d=2,3,4) analogue (default: none, the frontier for --nodes and --degree)")
    p.add_argument("--out", default="collsynth-results/tables", help="directory for --table output (default collsynth-results/tables)")
    p.set_defaults(func=run)


def check_size(args: argparse.Namespace) -> None:
    """``--nodes`` in 2..:data:`MAX_NODES` and ``--degree`` in 1..:data:`MAX_DEGREE` (and below
    ``--nodes``), those given, else an InputError: the search would run for hours."""
    if args.nodes is not None and not 2 <= args.nodes <= MAX_NODES:
        raise InputError("--nodes", f"expected 2..{MAX_NODES} nodes, got {args.nodes}")
    if args.degree is not None and not 1 <= args.degree <= MAX_DEGREE:
        raise InputError("--degree", f"expected a degree in 1..{MAX_DEGREE}, got {args.degree}")
    if args.nodes is not None and args.degree is not None and args.degree > args.nodes - 1:
        raise InputError("--degree", f"expected a degree <= nodes - 1 = {args.nodes - 1}, got {args.degree}")


def check_model(args: argparse.Namespace) -> list[float]:
    """``--alpha``, ``--bandwidth`` and ``--message`` finite and in range; the message sizes."""
    finite("--alpha", args.alpha, "a finite latency >= 0 s")
    finite("--bandwidth", args.bandwidth, "a finite positive bandwidth in bytes/s", strict=True)
    messages = args.message or [PAPER_MESSAGE]
    for m in messages:
        finite("--message", m, "a finite positive size in bytes", strict=True)
    return messages


def run(args: argparse.Namespace) -> dict:
    """The Pareto frontier of (T_L, T_B) topologies for ``--nodes`` and ``--degree`` and the best
    pick for the message sizes (Zhao et al., "Efficient Direct-Connect Topologies for Collective
    Communications", NSDI 2025, Section 5.4), or one of the paper's tables regenerated
    (``--table``: :func:`_table`)."""
    messages = check_model(args)
    check_size(args)
    from ...bfb import finder  # after the checks: bad input is refused before the finder loads

    if args.table is not None:
        return _table(args, finder, messages)
    if args.nodes is None or args.degree is None:
        raise InputError("finder", "give --nodes N and --degree D (or --table 4|5)")
    front = finder.frontier(args.nodes, args.degree)
    if not front:
        return {"nodes": args.nodes, "degree": args.degree, "frontier": [], "best": None, "exit": 1,
                "text": f"no topology found for N={args.nodes}, d={args.degree}"}
    ranked = finder.select(front, args.alpha, args.bandwidth, messages)
    rows = []
    for c in front:
        r = c.row()
        r["allreduce_s"] = sum(finder.allreduce_time(c, args.alpha, args.bandwidth, m) for m in messages)
        if args.confirm:
            r.update(finder.confirm(c))
        rows.append(r)
    best = ranked[0][0].row()
    best["allreduce_s"] = ranked[0][1]
    lines = [f"Pareto frontier N={args.nodes} d={args.degree} (T_B in units of M/B):"]
    for r in rows:
        lines.append(f"  T_L={r['T_L']:<4} T_B={r['T_B']:<14} ({r['T_B_float']:.4f})  allreduce={r['allreduce_s'] * 1e6:10.2f} us  {r['topology']}")
    lines.append(f"best for alpha={args.alpha} B={args.bandwidth} M={messages}: {best['topology']}")
    return {"nodes": args.nodes, "degree": args.degree, "alpha": args.alpha, "bandwidth": args.bandwidth,
            "messages": messages, "frontier": rows, "best": best, "text": "\n".join(lines)}


def _table(args: argparse.Namespace, finder, messages: list) -> dict:
    """Table 4, 5 or 9 of Zhao et al. (NSDI 2025) regenerated (``--table``), written to
    ``--out`` as CSV, Markdown and LaTeX, and its rows."""
    out_folder("--out", args.out)
    if args.table == 4:
        df = finder.table_pareto(args.nodes or 1024, args.degree or 4, alpha=args.alpha, bandwidth=args.bandwidth,
                                 message=messages[0], confirm_max_nodes=(args.nodes or 1024) if args.confirm else 0)
        title = (f"Pareto frontier for N = {args.nodes or 1024}, d = {args.degree or 4} (Zhao et al., NSDI 2025, Table 4 analogue); "
                 f"T_B in M/B, allreduce for alpha = {args.alpha} s, B = {args.bandwidth} B/s, M = {messages[0]} B")
        stem = "finder_table4"
    elif args.table == 9:
        df = finder.table_catalogue((args.degree,) if args.degree else (2, 3, 4), args.nodes or 64)
        title = ("Base topologies (Zhao et al., NSDI 2025, Table 9 analogue): BFB schedule built and verified, T_L, "
                 "T_B in M/B, flags")
        stem = "finder_table9"
    else:
        df = finder.table_small(range(5, 13), args.degree or 4, alpha=args.alpha, bandwidth=args.bandwidth,
                                messages=args.message or (1e3, 1e6, 1e9))
        title = (f"Best topology for N = 5..12, d = {args.degree or 4} (Zhao et al., NSDI 2025, Table 5 analogue), chosen by the "
                 f"summed allreduce time over M = {args.message or [1e3, 1e6, 1e9]} B")
        stem = "finder_table5"
    from ....results import render

    csv, md, tex = render.write_table(df, args.out, stem, title)
    return {"table": args.table, "csv": str(csv), "markdown": str(md), "latex": str(tex),
            "rows": df.to_dict(orient="records"),
            "text": df.to_markdown(index=False) + f"\n\nwritten: {md}, {csv}, {tex}"}
