"""The exact time reversal of tree packing's allgather as a reduce-scatter, 1 GB at alpha 0.

Run: ``python benchmarks/bench_time_reversal.py`` (``--only "DGX-H100 x2"``, ``--pieces 200``,
``--shapes auto,greedy``, ``--trees auto,1``). For each switched system, forest shape
(:mod:`collsynth.solvers.packing.producer`'s ``shape``: ``auto`` is what the producer packs,
``greedy`` the flow-tested growth) and trees per shard (the producer's, or one: the forest
:mod:`collsynth.solvers.packing.fifo_reduce` compares) the producer's reduce-scatter forest is
emitted at ``--pieces`` pieces; its step reversal is the allgather on the transposed topology,
every switch forwarding each arrival once, and that allgather's exact time reversal
(:func:`collsynth.tens.time_reversal.reversed_in_time`) is verified as the reduce-scatter;
all are priced under ``event`` (FIFO links), ``event-inorder`` (each link in step order) and
``sync``. The row gives each time over the reduce-scatter's bound (the allgather's on the
transposed topology is the same), the sends of the reversal that start later than due in order
(``late``: the induction of :mod:`collsynth.tens.time_reversal` says 0), and the in-order and
``event`` times of the step reversal (:func:`collsynth.tens.schedule.reverse`: the producer's
reduce-scatter) for comparison. ``event`` is where the reversal is not the allgather: a GPU's
own data, ready at once, leaves before any partial it relays. So every schedule is priced as
if each link took its messages as they become ready (``link_order = "ready"``), and the
reversal also as the producer emits it, declaring each GPU's links in the order listed
(``reversal declared event``, ``docs/schedules.md``).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace

from bench_allreduce import SYSTEMS, instance_of
from markdown_table import table

MODELS = ("event", "event-inorder", "sync")
DEFAULT = ("A100 x2", "DGX-H100 x2", "MI250 x1", "NDv2 x2", "DGX-2 x2")


def row(system: tuple, shape: str, pieces: int, trees: int | None = None) -> dict:
    """One system and forest shape: the ratios of the allgather, its exact reversal and its step reversal."""
    from collsynth.instances.instance import make_instance
    from collsynth.solvers.packing import producer as packing
    from collsynth.tens import cost_models, verify
    from collsynth.tens.bounds import instance_bounds
    from collsynth.tens.schedule import reverse
    from collsynth.tens.time_reversal import late_sends, reversed_in_time

    label, generator, params = system
    rs_inst = instance_of(generator, params, "reduce_scatter")
    ag_inst = make_instance(rs_inst.topology.transpose(), "allgather", message_bytes=rs_inst.collective.message_bytes)
    t0 = time.perf_counter()
    forest = packing.forest(rs_inst, "allgather", True, trees=trees, shape=shape)
    steps = packing._with_header(packing.emit(rs_inst, forest, pieces), rs_inst)  # the producer's reduce-scatter
    steps = replace(steps, link_order="ready")
    ag = packing._with_header(reverse(steps), ag_inst)
    ag = replace(ag, meta={**ag.meta, "switch_copy": False})
    exact = packing._with_header(reversed_in_time(ag), rs_inst)
    for s, inst in ((ag, ag_inst), (exact, rs_inst), (steps, rs_inst)):
        bad = verify.verify(s, inst)
        if bad is not None:
            raise SystemExit(f"{label}: {s.collective} does not verify: {bad}")
    bound = instance_bounds(rs_inst).event.value
    out = {"system": label, "shape": forest.shape, "k": forest.k, "tau/optimum": float(forest.tau / forest.opt.tau),
           "sends": len(ag),
           "late": late_sends(ag, ag_inst, exact, rs_inst)}
    for name, s, inst, models in (("allgather", ag, ag_inst, MODELS), ("reversal", exact, rs_inst, MODELS),
                                  ("step reversal", steps, rs_inst, ("event", "event-inorder")),
                                  ("reversal declared", replace(exact, link_order="program"), rs_inst, ("event",))):
        for m in models:
            out[f"{name} {m}"] = cost_models.price(s, inst, m).total_s / bound
    out["seconds"] = time.perf_counter() - t0
    return out


def main(labels: list[str], shapes: list[str], pieces: int, trees: list) -> None:
    """Print one row per system and shape as it finishes, then the table."""
    by_label = {s[0]: s for s in SYSTEMS}
    rows = []
    for label in labels:
        for shape in shapes:
            for k in trees:
                r = row(by_label[label], shape, pieces, k)
                rows.append(r)
                print(r, file=sys.stderr, flush=True)
    keys = list(rows[0])
    cells = [[f"{r[k]:.4f}" if isinstance(r[k], float) else str(r[k]) for k in keys] for r in rows]
    print("\n".join(table(keys, cells)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(DEFAULT), help="system labels of bench_allreduce, comma-separated")
    parser.add_argument("--shapes", default="auto,greedy", help="forest shapes, comma-separated")
    parser.add_argument("--pieces", type=int, default=200, help="pipeline pieces per chunk and tree")
    parser.add_argument("--trees", default="auto,1", help="trees per shard, comma-separated (auto: the producer's)")
    args = parser.parse_args()
    main(args.only.split(","), args.shapes.split(","), args.pieces,
         [None if k == "auto" else int(k) for k in args.trees.split(",")])
