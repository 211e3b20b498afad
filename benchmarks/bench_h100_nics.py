"""Tree packing on HGX H100 with 1, 2, 4 or 8 NICs a box, 1 GB allgather at alpha 0, against the optimum.

Run: ``python benchmarks/bench_h100_nics.py`` (``--only "H100 4-NIC x4"`` for chosen rows,
``--kind reduce_scatter`` for another kind, ``--param shape=greedy`` for a producer parameter).
The systems are :mod:`collsynth.instances.hgx_h100` at 2, 4 and 8 boxes and the one box they
share (``DGX-H100 x1``: one box has no NICs). Each row runs in its own process (its peak
memory is its own): tree packing's schedule is produced, verified
(:func:`collsynth.tens.verify.verify`) and priced under ``event`` (FIFO links),
``event-inorder`` (each link in step order) and ``sync``, each as a ratio to the cut optimum
(Zhao et al., "ForestColl", arXiv 2402.06787, Section 4: at alpha 0 it is every model's bound),
with the trees' shape, the generation time and the row's peak memory. Unlike
``bench_allreduce.py`` it does not run the rest of the pipeline (the TEN model's price and the
instance's every bound), which takes minutes a row on a shared machine.
"""

from __future__ import annotations

import argparse
import resource
import time

from fresh_process import cell, each_in_a_fresh_process
from switched_systems import systems

M = 1e9
TIME_LIMIT_S = 900
MODELS = ("event", "event-inorder", "sync")
ROWS = ["DGX-H100 x1"] + [f"H100 {n}-NIC x{boxes}" for boxes in (2, 4, 8) for n in (1, 2, 4, 8)]


def _row(args) -> dict:
    label, kind, params = args
    from collsynth.instances.generators import build
    from collsynth.instances.instance import make_instance
    from collsynth.solvers.producers import Options, get
    from collsynth.tens import cost_models
    from collsynth.tens.cut_optimum import flow_net, optimum
    from collsynth.tens.verify import verify

    (_, generator, gen_params), = systems(label)
    inst = make_instance(build(generator, gen_params), kind, message_bytes=M)
    nodes = inst.collective.nodes
    net = flow_net(inst.topology, nodes, [1] * len(nodes), transpose=kind == "reduce_scatter")
    opt_s = optimum(net).seconds(M / len(nodes), net.unit_bw)
    t0 = time.perf_counter()
    out = get("tree-packing").run(inst, Options(time_limit=TIME_LIMIT_S, params=dict(params)))
    row = {"system": label, "kind": kind, "gpus": len(nodes), "optimum_s": opt_s, "gen_s": time.perf_counter() - t0,
           "shape": ",".join(f.get("shape", "?") for f in out.extra.get("forests", [])), "ratio": {}}
    if verify(out.schedule, inst) is not None:
        row["shape"] += " (did not verify)"
    else:
        row["ratio"] = {m: cost_models.price(out.schedule, inst, m).total_s / opt_s for m in MODELS}
    row["peak_MiB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return row


def table(rows: list[dict]) -> str:
    """The rows as a Markdown table."""
    head = "| system | kind | GPUs | optimum ms | " + " | ".join(f"{m}/opt" for m in MODELS) + \
        " | shape | generation s | peak MiB |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        cells = [r["system"], r["kind"], str(r["gpus"]), cell(r["optimum_s"] * 1e3, ".4f")]
        cells += [cell(r["ratio"].get(m), ".4f") for m in MODELS]
        cells += [r["shape"], cell(r["gen_s"], ".1f"), cell(r["peak_MiB"], ".0f")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(only: str | None, kind: str, params: dict) -> list[dict]:
    """Every row, each in a fresh process; each printed as it finishes, then the table."""
    labels = only.split(",") if only else ROWS
    rows = each_in_a_fresh_process(_row, [(label, kind, params) for label in labels],
                                   lambda r: table([r]).splitlines()[-1])
    print(table(rows))
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None, help="system labels, comma-separated, e.g. 'H100 4-NIC x4'")
    parser.add_argument("--kind", default="allgather", help="allgather (default) or reduce_scatter")
    parser.add_argument("--param", action="append", default=[], help="a tree-packing parameter K=V, e.g. shape=greedy")
    args = parser.parse_args()
    main(args.only, args.kind, dict(p.split("=", 1) for p in args.param))
