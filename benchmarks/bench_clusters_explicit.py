"""Clusters as built, explicit sends: the peak memory a send costs when tree packing's trees
(kept as trees, ``form=compact``) are expanded into explicit sends, verified and priced, at
2,048-4,096 GPUs.

Run: ``python benchmarks/bench_clusters_explicit.py [--only LABEL] [--kinds allgather,reduce_scatter]
[--sends N] [--min-gpus N] [--max-gpus N] [--row-timeout S]``.
Each row runs in a process of its own. Its kernels are loaded first, as ``collsynth solve``
loads them before its clock (:func:`collsynth.solvers.compiling.prepare_run`): a kernel loaded in
the middle of a stage leaves tens of MiB of the C heap resident under the stage's columns. The
trees are made as ``collsynth solve --param form=compact`` makes them
(:func:`collsynth.solvers.packing.producer.run_compact`); then, at the deepest pipeline of at
most ``--sends`` explicit sends, each stage runs with the process's peak resident memory reset
before it (Linux ``/proc/self/clear_refs``, ``VmHWM``): the expansion
(:func:`collsynth.tens.pipelined_trees.expand`), the verifier, the ``sync`` and ``event`` prices.
Per stage: the peak above the resident memory before the expansion, over the sends (bytes a
send: what the sends themselves cost at that stage's peak), and the whole process's peak over the
sends.

Measured: README, "Clusters as built" (reduce-scatter and allreduce at scale), with the command.
"""

from __future__ import annotations

import os
import time

from bench_clusters import ROWS, _gpus
from cluster_rows import chosen, cluster_parser, timed_row
from fresh_process import cell, each_in_a_fresh_process
from markdown_table import table

M = 1 << 30  # 1 GiB
SENDS = 16_000_000  # the most explicit sends a row expands
STAGES = ("expand", "verify", "sync", "event")


def _status_kib(field: str) -> int:
    """A ``/proc/self/status`` field in KiB (``VmRSS``: resident now, ``VmHWM``: peak)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def _reset_peak() -> None:
    """The process's peak resident memory set back to its resident memory now (Linux 4.0+)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _row(args) -> dict:
    label, generator, params, kind, sends, timeout = args
    return timed_row({"fabric": label, "kind": kind, "stage": "instance"},
                     lambda out: _measure(out, generator, params, kind, sends), timeout)


def _measure(out: dict, generator: str, params: dict, kind: str, sends: int) -> None:
    from collsynth.instances.generators import build
    from collsynth.instances.instance import make_instance
    from collsynth.solvers import compiling
    from collsynth.solvers.packing.compact import at_pieces
    from collsynth.solvers.packing.producer import _with_header, run_compact
    from collsynth.solvers.producers import Options
    from collsynth.tens import cost_models, verify
    from collsynth.tens.pipelined_trees import expand

    inst = make_instance(build(generator, params), kind, message_bytes=M)
    out.update(gpus=len(inst.collective.nodes), stage="kernels")
    compiling.prepare_run(inst, "tree-packing")  # as `collsynth solve` does before its clock: none loaded mid-stage
    out["stage"] = "trees"
    trees = run_compact(inst, Options(time_limit=600, params={"form": "compact"})).schedule
    per_piece = trees.sends // trees.pieces
    pieces = min(trees.pieces, sends // max(1, per_piece))
    out.update(pieces=pieces, of_pieces=trees.pieces)
    if pieces < 1:
        out["stopped"] = f"one piece is {per_piece:,} sends, over --sends"
        return
    before = _status_kib("VmRSS")
    out["before_MiB"] = before / 1024
    holder: dict = {}
    stages = {"expand": lambda: holder.update(s=_with_header(expand(at_pieces(trees, pieces)), inst)),
              "verify": lambda: holder.update(ok=verify.verify(holder["s"], inst) is None),
              "sync": lambda: cost_models.price(holder["s"], inst, "sync"),
              "event": lambda: cost_models.price(holder["s"], inst, "event")}
    for name in STAGES:
        out["stage"] = name
        _reset_peak()
        t = time.perf_counter()
        stages[name]()
        peak = _status_kib("VmHWM")
        out.update({f"{name}_s": time.perf_counter() - t, f"{name}_peak_MiB": peak / 1024,
                    f"{name}_B": (peak - before) * 1024 / len(holder["s"])})
    out.update(sends=len(holder["s"]), verified=holder["ok"], load=os.getloadavg()[0])


def render(rows: list[dict]) -> str:
    """The rows as a Markdown table: per stage the bytes a send above the process before the
    expansion at the stage's peak, and the whole peak in MiB."""
    head = ["fabric", "kind", "GPUs", "pieces (of)", "sends", "before MiB"] + [
        f"{s} B/send (peak MiB)" for s in STAGES] + ["whole peak B/send", "s (load)", "note"]
    body = []
    for r in rows:
        peaks = [r.get(f"{s}_peak_MiB") for s in STAGES]
        top = max((p for p in peaks if p is not None), default=None)
        secs = sum(r.get(f"{s}_s", 0.0) for s in STAGES)
        body.append([r["fabric"], r["kind"], cell(r.get("gpus"), ","),
                     f"{r.get('pieces', '-')} ({r.get('of_pieces', '-')})",
                     cell(r.get("sends"), ","), cell(r.get("before_MiB"), ".0f")]
                    + [f"{cell(r.get(f'{s}_B'), '.0f')} ({cell(r.get(f'{s}_peak_MiB'), '.0f')})" for s in STAGES]
                    + [cell(top and r.get("sends") and top * 2 ** 20 / r["sends"], ".0f"),
                       f"{secs:.1f} ({cell(r.get('load'), '.1f')})",
                       r.get("stopped", "" if r.get("verified", True) else "NOT VERIFIED")])
    return "\n".join(table(head, body))


def main() -> None:
    """Run the chosen rows (module doc), each in a fresh process, and print the table."""
    ap = cluster_parser(__doc__, 2000, 4400, 1800)
    ap.add_argument("--kinds", default="allgather,reduce_scatter", help="comma-separated: allgather, reduce_scatter")
    ap.add_argument("--sends", type=int, default=SENDS,
                    help="the most explicit sends a row expands (default %(default)s)")
    a = ap.parse_args()
    specs = [(label, g, p, kind, a.sends, a.row_timeout)
             for label, g, p in chosen(ROWS, a.only, a.skip, a.min_gpus, a.max_gpus, _gpus)
             for kind in a.kinds.split(",")]
    rows = each_in_a_fresh_process(_row, specs, lambda r: render([r]).splitlines()[-1])
    print(render(rows))


if __name__ == "__main__":
    main()
