"""Where an allreduce loses to its bound: each half's candidate forests priced alone, in seconds.

Run: ``python benchmarks/bench_allreduce_halves.py --only "MI250 x4"`` (a few minutes on MI250
x8). The tree-packing producer builds an allreduce from a reduce-scatter forest and an
allgather forest (Zhao et al., "ForestColl", arXiv 2402.06787, Section 4), each cut into the
pieces half the send budget allows (:func:`collsynth.solvers.packing.producer.auto_pieces` with
twice the chunks). For each system, each half and each of its ring forests (the first door rule
and its alternatives: both ways, :mod:`collsynth.solvers.packing.rings`) the row prints the
forest's depth and hops, its pieces alone (``parts`` 1) and in the allreduce (``parts`` 2), and
the trees form's exact ``sync`` price over the half's cut optimum with equal pieces and with the
sizes of :mod:`collsynth.solvers.packing.piece_sizes` (Zhao et al., NSDI 2025, Section 3.2),
no explicit sends; then which forest the producer's fill choice takes for each half
(:func:`collsynth.solvers.packing.fill.choose`), at how many pieces (more than half the send
budget's where those leave it over :data:`collsynth.solvers.packing.fill.TARGET`, up to
:data:`collsynth.solvers.packing.producer.FILL_SENDS`) and its price. The allreduce's ``sync`` ratio is about the
mean of its halves' (they run one after the other on the same bottleneck links).
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from bench_allreduce import instance_of
from switched_systems import systems

LABELS = ("MI250 x4", "MI250 x8")


def rows(label: str) -> list[dict]:
    """One row per (half, ring forest, parts) of ``label``'s 1 GB allreduce at alpha 0."""
    from collsynth.solvers.packing import fill
    from collsynth.solvers.packing import producer as packing
    from collsynth.solvers.packing.piece_sizes import sized
    from collsynth.solvers.packing.tree_hops import depth_of
    from collsynth.solvers.packing.trees import hops_of
    from collsynth.tens.pipelined_trees import price_sync

    (_, generator, params), = systems(label)
    inst = instance_of(generator, params, "allreduce")
    c = inst.collective.chunks_per_node
    out = []
    for kind, transposed in packing.plan("allreduce"):
        f = packing.forest(inst, kind, transposed)
        half, optimum_s = packing.part_instance(inst, f), packing.optimum_seconds(inst, f)
        forests = [replace(f, alternatives=[]), *f.alternatives]
        for g in forests:
            for parts in (1, 2):
                pieces = packing.auto_pieces(g.trees, c * parts)
                trees = packing.pipelined(inst, g, pieces)
                unequal = sized(trees, half, pieces)
                out.append({"half": "reduce-scatter" if transposed else "allgather", "forest": f"{g.shape} ({g.door})",
                            "depth": depth_of(g.trees), "hops": hops_of(g.trees), "parts": parts, "pieces": pieces,
                            "equal": price_sync(trees, half).total_s / optimum_s,
                            "sized": unequal and price_sync(unequal, half).total_s / optimum_s})
        got, pieces, record = fill.choose(inst, forests, lambda g: packing.auto_pieces(g.trees, c * 2),
                                          lambda g, p: packing.pipelined(inst, g, p), None,
                                          lambda g: packing.auto_pieces(g.trees, c * 2, sends=packing.FILL_SENDS,
                                                                        memory_share=1.0), optimum_s)
        sizes = "sized" if got.cuts is not None else "equal"
        name = got.shape + (f" ({got.door})" if got.door else "")
        price = next(r["sync_sized_s"] if r["sized"] else r["sync_equal_s"] for r in reversed(record)
                     if r["pieces"] == pieces and r["shape"] == name)
        out.append({"half": out[-1]["half"], "forest": f"fill choice: {name}, {sizes} pieces "
                    f"(pieces tried: {', '.join(str(r['pieces']) for r in record[len(forests):]) or 'none more'})",
                    "depth": depth_of(got.trees), "hops": hops_of(got.trees), "parts": 2, "pieces": pieces,
                    "equal": None, "sized": price / optimum_s})
    return out


def main(labels) -> None:
    """Prints each system's rows as a Markdown table."""
    print("| system | half | forest | depth | hops | parts | pieces | sync/optimum equal | sync/optimum sized |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label in labels:
        for r in rows(label):
            cells = [label, r["half"], r["forest"], str(r["depth"]), str(r["hops"]), str(r["parts"]), str(r["pieces"]),
                     "-" if r["equal"] is None else f"{r['equal']:.4f}",
                     "-" if r["sized"] is None else f"{r['sized']:.4f}"]
            print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(LABELS), help="system labels, comma-separated")
    main(parser.parse_args().only.split(","))
