"""Allgather, reduce-scatter and allreduce on the switched systems against their bounds, 1 GB at alpha 0.

Run: ``python benchmarks/bench_allreduce.py`` (``--only "A100 x2"`` for one system, ``--kinds
allreduce`` for one kind, ``--producers tree-packing,ring``, ``--bounds-only`` for the bounds
and the RS+AG verdict alone, in seconds; ``--save rows.json`` keeps the rows, ``--load rows.json
...`` prints their table). Each (system, kind) runs in its own
process (its peak memory is its own) through the normal pipeline
(``collsynth.solvers.pipeline.run``: verified, then priced) with each producer (tree packing, and
``dimension-trees`` where the system is a hierarchy: TACOS's); the row prints
the instance's bound under ``event`` (:mod:`collsynth.tens.bounds`; latency included: for allreduce the partition bound of
:mod:`collsynth.tens.bounds.partitions`, beside the cut's), the best verified schedule under
``event`` (FIFO links), ``event-inorder`` (each link in step order) and ``sync``, each with its
producer and its ratio to the bound, the generation time and the peak memory of the row.

For allreduce the row also says what the bound proves about reduce-scatter then allgather
(and, where it proves nothing, what the halves side by side on split links reach,
:mod:`collsynth.solvers.packing.capacity_split`):
``RS+AG`` is the sum of both halves' cut optima (max-flow; Zhao et al., "ForestColl", arXiv
2402.06787, Section 4); per system which case holds: ``RS+AG optimal (bound = RS+AG)`` when the allreduce bound's
bandwidth part (the sync model's ``T_B`` bound) reaches it (no schedule can beat the two halves
in sequence); ``below RS+AG (schedule X ms < RS+AG Y ms)`` when the best verified schedule beats
it under every model (X the slowest of the three); else ``open (bound B < best X)``, with the
models under which a schedule beat RS+AG. After the table, each allreduce row's joint choice
(:func:`collsynth.solvers.packing.overlap.joint`): the pair of forests taken and every
candidate's probe price, so the row says which pair won and by how much.
"""

from __future__ import annotations

import argparse
import json
import resource
import time

from fresh_process import cell, each_in_a_fresh_process
from switched_systems import systems

M = 1e9
TIME_LIMIT_S = 900
KINDS = ("allgather", "reduce_scatter", "allreduce")  # and "reduce" (rooted at the first GPU) with --kinds
# ring and direct (--producers) are 7-20x off on the multi-box systems; dimension-trees builds only on
# hierarchies (TACOS's), elsewhere it refuses at once
PRODUCERS = ("tree-packing", "dimension-trees")
# HGX H100 with n NICs a box shared over PCIe (instances/hgx_h100.py); one box has no NICs and
# 8 NICs are DGX-H100's wiring (the DGX-H100 rows; at two boxes also as hgx_h100's nics=8, which
# must price alike)
H100_NICS = [f"H100 {n}-NIC x{boxes}" for boxes in (2, 4, 8) for n in (1, 2, 4)] + ["H100 8-NIC x2"]
SYSTEMS = systems("A100 x1", "A100 x2", "A100 x4", "A100 x8", "MI250 x1", "MI250 x2", "MI250 x4", "MI250 x8",
                  "DGX-H100 x1", "DGX-H100 x2", "DGX-H100 x4", "DGX-H100 x8", "DGX-2 x1", "DGX-2 x2",
                  *H100_NICS) + [
    ("NDv2 x2", "ndv2", {"chassis": 2, "inter_chassis": "switch", "nvlink_alpha": 0.0, "nic_alpha": 0.0}),
    ("TACOS ring x complete x switch 4x4x2", "corpus:tacos-hier-ring-fc-switch-4x4x2-allgather", {})]
MODELS = ("event", "event-inorder", "sync")


def instance_of(generator: str, params: dict, kind: str):
    """The row's 1 GB instance of ``kind`` (``params`` may set the generator's parameters and
    the instance's ``bandwidth`` and ``alpha``)."""
    from collsynth.instances.generators import build
    from collsynth.instances.instance import make_instance

    if generator.startswith("corpus:"):
        from pathlib import Path

        from collsynth.instances.instance import load_instance

        stem = generator.split(":", 1)[1]
        topo = load_instance(Path(__file__).resolve().parents[1] / "instances" / "corpus" / f"{stem}.toml").topology
    else:
        costs = {k: params[k] for k in ("bandwidth", "alpha") if k in params}
        topo = build(generator, {k: v for k, v in params.items() if k not in costs}, **costs)
    return make_instance(topo, kind, message_bytes=M, root=topo.npus[0] if kind == "reduce" else None)


def _halves_optimum(inst) -> float:
    """Reduce-scatter's plus allgather's cut optimum of ``inst``'s topology and size."""
    from collsynth.tens.cut_optimum import flow_net, optimum

    coll, out = inst.collective, 0.0
    for transpose in (True, False):
        net = flow_net(inst.topology, coll.nodes, [1] * len(coll.nodes), transpose=transpose)
        out += optimum(net).seconds(M / len(coll.nodes), net.unit_bw)
    return out


def _row(args) -> dict:
    (label, generator, params), kind, producers, limit_s, lean, objectives = args
    from collsynth.solvers import pipeline
    from collsynth.solvers.producers import Options
    from collsynth.tens.bounds import instance_bounds

    inst = instance_of(generator, params, kind)
    b = instance_bounds(inst)
    out = {"system": label, "kind": kind, "gpus": len(inst.collective.nodes), "bound_event_s": b.event.value,
           "bound_sync_s": b.sync.value, "bound_bw_s": b.part("sync_bandwidth").value,
           "bound_source": b.event.label(), "best": {}, "gen_s": 0.0}
    if kind == "allreduce":
        out["halves_s"] = _halves_optimum(inst)
        if out["bound_bw_s"] < out["halves_s"] * (1 - 1e-9):  # unproven: what the halves side by side reach
            from collsynth.solvers.packing.capacity_split import split

            got = split(inst.topology, inst.collective.nodes)
            out["split_s"] = got.seconds(M) if got is not None else None
    runs = [(name, {}) for name in producers] + [("tree-packing", {"objective": o}) for o in objectives]
    for producer, run_params in runs:
        name = producer + "".join(f" ({k}={v})" for k, v in run_params.items())
        t0 = time.perf_counter()
        row, sched = (_lean if lean else pipeline.run)(inst, producer, Options(time_limit=limit_s, params=run_params))
        if not row["verified"]:
            out.setdefault("refused", []).append(f"{name}: {row['status']}" +
                                                 (f" ({row['message']})" if row.get("message") else ""))
            continue
        times = {"event": row["time_event_s"], "sync": row["time_sync_s"]}
        times = {m: times.get(m) if times.get(m) is not None else _priced(sched, inst, m)
                 for m in MODELS}  # verified; a model the run's time limit left unpriced is priced here
        for model, t in times.items():
            if t is not None and (model not in out["best"] or t < out["best"][model][0]):
                out["best"][model] = (t, name)
        out.setdefault("gen_by", {})[name] = row["build_s"]
        if name == "tree-packing":
            out["gen_s"] = row["build_s"]
            if row["extra"].get("joint_choice"):  # the allreduce's pair and the candidates' probe prices
                out["joint_choice"] = row["extra"]["joint_choice"]
        out.setdefault("wall_s", {})[name] = time.perf_counter() - t0
    out["peak_MiB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def _priced(sched, inst, model: str) -> float:
    """``sched``'s time under ``model``: a form kept as trees moved by box shifts under the
    event models per link orbit (:func:`collsynth.tens.pipelined_event.price`, as the producer
    prices ``event``: dependencies as its explicit sends' pricing tracks them), else its sends
    listed (:func:`_listed`) and priced."""
    from collsynth.tens import compact_forms, cost_models, pipelined_event
    from collsynth.tens.pipelined_allreduce import PipelinedAllreduce

    form = compact_forms.form_of(sched)
    if form is not None and model in ("event", "event-inorder") and isinstance(sched, PipelinedAllreduce) and \
            sched.reduce_scatter.shift is not None:
        return pipelined_event.price(sched, inst, as_explicit=True, model=model).total_s
    return cost_models.price(_listed(sched, inst), inst, model).total_s


def _listed(sched, inst):
    """``sched`` as explicit sends: a form kept as trees plus a pipeline rule
    (:mod:`collsynth.tens.compact_forms`) expanded, with the header its producer gives
    explicit sends (what the models not priced from the trees read); else itself."""
    from collsynth.tens import compact_forms, pipelined_event

    form = compact_forms.form_of(sched)
    return sched if form is None else pipelined_event._header(form.expand(sched), inst)


def _lean(inst, name: str, options) -> tuple[dict, object]:
    """``(row, schedule)`` as :func:`collsynth.solvers.pipeline.run` gives them, but only the
    producer's run and the verification (:func:`collsynth.solvers.pipeline.run_lean`, within
    the time limit and its grace as ``collsynth solve``): the table's models are priced by
    :func:`_row` (no ``ten`` price, which takes longer than the rest on 16 M sends). A schedule
    kept as trees plus a pipeline rule is priced under ``sync`` from its trees and listed for
    the other models."""
    from collsynth.solvers import pipeline
    from collsynth.tens import compact_forms

    row, sched = pipeline.run_lean(inst, name, options)
    form = None if sched is None else compact_forms.form_of(sched)
    if form is not None and row["verified"]:
        row["time_sync_s"] = form.price_sync(sched, inst).total_s
    return row, sched


def _verdict(r: dict) -> str:
    """Which case holds for an allreduce row: ``RS+AG optimal (bound = RS+AG)``, ``below RS+AG
    (schedule X ms < RS+AG Y ms)`` (X the slowest of the models' best verified times, when every
    model's is below RS+AG), or ``open (bound B < best X)``; the split's pipelined-limit time after."""
    if r["kind"] != "allreduce":
        return ""
    bw, halves = r["bound_bw_s"], r["halves_s"]  # both bandwidth alone (bytes over bandwidth)
    if bw > halves * (1 + 1e-9):
        return f"INVALID: bound {bw / halves:.6f} of RS+AG, which is a schedule"
    if bw >= halves * (1 - 1e-9):
        return "RS+AG optimal (bound = RS+AG)"
    times = {m: t for m, (t, _) in r["best"].items()}
    split = r.get("split_s")
    tail = f"; halves on split links {split * 1e3:.4f} ms in the pipelined limit" if split is not None else ""
    if times and all(t < halves * (1 - 1e-9) for t in times.values()):
        return f"below RS+AG (schedule {max(times.values()) * 1e3:.4f} ms < RS+AG {halves * 1e3:.4f} ms){tail}"
    below = [m for m, t in times.items() if t < halves * (1 - 1e-9)]
    best = min(times.values()) if times else None
    than = f" < best {best * 1e3:.4f} ms" if best is not None else "; no schedule measured"
    return (f"open (bound {r['bound_event_s'] * 1e3:.4f} ms{than})" +
            (f"; below RS+AG under {', '.join(below)}" if below else "") + tail)


def choices(rows: list[dict]) -> str:
    """Each allreduce row's joint choice of its halves' forests: the pair taken and every
    candidate's probe price (``sync`` + ``event``, at the probe's pieces), least first."""
    lines = []
    for r in rows:
        j = r.get("joint_choice")
        if not j:
            continue
        priced = sorted(j["priced"].items(), key=lambda kv: sum(kv[1].values()))
        lines.append(f"{r['system']} allreduce: took {j['chosen']!r} (probe pieces {j['probe_pieces']}); " +
                     "; ".join(f"{n}: " + " / ".join(f"{m} {t * 1e3:.4f} ms" for m, t in p.items())
                               for n, p in priced))
    return "\n".join(lines)


def table(rows: list[dict]) -> str:
    """The rows as a Markdown table; a row no producer's schedule reached says why in its
    verdict column."""
    head = ("| system | kind | GPUs | bound ms | argument | " +
            " | ".join(f"{m} ms | {m}/bound | by" for m in MODELS) +
            " | RS+AG ms | verdict | generation s | peak MiB |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        cells = [r["system"], r["kind"], str(r["gpus"]), cell(r["bound_event_s"] * 1e3, ".4f"), r["bound_source"]]
        for m in MODELS:
            t, by = r["best"].get(m, (None, "-"))
            bound = r["bound_sync_s"] if m == "sync" else r["bound_event_s"]
            cells += [cell(t and t * 1e3, ".4f"), cell(t and bound and t / bound, ".4f"), by]
        none = "no verified schedule: " + "; ".join(r["refused"]) if not r["best"] and r.get("refused") else ""
        cells += [cell(r.get("halves_s") and r["halves_s"] * 1e3, ".4f"), _verdict(r) or none,
                  cell(r["gen_s"], ".1f"), cell(r["peak_MiB"], ".0f")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(only: str | None, kinds, producers, limit_s: float = TIME_LIMIT_S, lean: bool = False,
         objectives: tuple = (), save: str | None = None) -> list[dict]:
    """Every (system, kind) row, each in a fresh process; prints each row as it finishes (a
    long run keeps what it measured), then the table. ``lean``: each producer's schedule
    verified and priced under the table's models alone (:func:`_lean`). ``objectives``: tree
    packing run again with each as its ``objective`` parameter (one schedule a model: a rooted
    reduce's pipeline depth that suits ``event`` costs ``sync`` a latency a piece), each run's
    generation seconds printed after the table. ``save``: the rows finished so far written
    there as JSON after each row."""
    labels = only.split(",") if only else [s[0] for s in SYSTEMS]
    by_label = {s[0]: s for s in SYSTEMS}  # any other "<system> x<boxes>" of switched_systems too (e.g. "A100 x3")
    specs = [(by_label.get(label) or systems(label)[0], k, producers, limit_s, lean, tuple(objectives))
             for label in labels for k in kinds]
    done: list[dict] = []

    def progress(r: dict) -> str:
        done.append(r)
        if save:
            with open(save, "w") as f:
                json.dump(done, f, indent=1)
        return table([r]).splitlines()[-1]

    rows = each_in_a_fresh_process(_row, specs, progress)
    print(table(rows))
    print(choices(rows))
    for r in rows:
        if len(r.get("gen_by", {})) > 1:
            print(f"{r['system']} {r['kind']} generation s: " +
                  "; ".join(f"{n} {t:.1f}" for n, t in r["gen_by"].items()))
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None, help="system labels, comma-separated, in the order to run, e.g. "
                                                     "'A100 x2,MI250 x2' (any box count of the generator's systems, e.g. 'A100 x3')")
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated kinds")
    parser.add_argument("--producers", default=",".join(PRODUCERS), help="comma-separated producers")
    parser.add_argument("--bounds-only", action="store_true", help="no producer: the bounds and the RS+AG verdict")
    parser.add_argument("--lean", action="store_true", help="each producer run and verified within --time-limit and "
                                                           "its grace, then priced under the table's models only (not "
                                                           "the pipeline's other stages)")
    parser.add_argument("--time-limit", type=float, default=TIME_LIMIT_S,
                        help=f"each producer's limit in seconds (default {TIME_LIMIT_S})")
    parser.add_argument("--objectives", default="", help="comma-separated tree packing objectives run besides the "
                                                          "default (event, sync, sync+event): each model's best "
                                                          "schedule may come from its own run")
    parser.add_argument("--save", default=None, help="write the rows as JSON here (rewritten after every row)")
    parser.add_argument("--load", nargs="+", default=None, help="print the table of saved rows (of --save) instead "
                                                                 "of running")
    args = parser.parse_args()
    if args.load:
        print(table([r for path in args.load for r in json.load(open(path))]))
    else:
        main(args.only, args.kinds.split(","), [] if args.bounds_only else args.producers.split(","),
             args.time_limit, args.lean, tuple(o for o in args.objectives.split(",") if o), args.save)
