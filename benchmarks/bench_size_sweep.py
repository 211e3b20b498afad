"""Collective time against message size: latency-aware tree packing against the methods it must beat.

Run: ``python benchmarks/bench_size_sweep.py [--quick] [--kinds K,...] [--methods M,...] [--sizes N,...]
[--out PATH] [--system LABEL] [--cell-limit S] [--save JSON]`` (``--load JSON ...`` tabulates and plots saved runs, one per
system say, together). ``--kinds`` picks the collectives (``allgather``, the default, ``reduce_scatter``,
``allreduce``); ``--sizes`` the message sizes (bytes, default all). Message
sizes 64 KB to 4 GB (powers of 4) on ForestColl's 2 x 8 A100 and 2 x 16 MI250 systems and a
two-box multi-rail DGX-H100 (``instances/systems.py``: ``forestcoll_a100``, ``forestcoll_mi250``,
``dgx_h100``), each with its own link latencies (NCCL / RCCL tuning.cc hwLat, cited there).
Every schedule goes through the pipeline (verified, then priced); the times are the event and
the synchronous model's. Methods:

- ``ours``: ``tree-packing`` with its latency choice (trees per shard, pipeline pieces per size:
  real schedules near the estimate's pick priced under ``sync`` and ``event`` where they are
  small, the estimate beyond; :mod:`collsynth.solvers.packing.latency`);
- ``ours-event``, ``ours-sync``: the same with ``--param objective=event`` or ``sync``, the
  latency choice minimising that model's priced time alone (each model's table compares its
  own choice against the other methods);
- ``forestcoll-fixed``: ForestColl's own packing (``shape = greedy``: no two-level trees, roots in id
  order; for reduce-scatter the same packing on the transposed topology, reversed, and for allreduce
  that then the allgather's) at the optimum's ``k`` (Zhao et al., "ForestColl", arXiv 2402.06787; for MI250, whose optimum needs 83 trees per GPU, the packing's default of the first
  ``k <= 16`` within 0.1 % of it) at a fixed pipeline depth (100 pieces per hop of the deepest tree,
  within the send budget: :func:`forestcoll_depth`); a cell whose explicit sends would pass
  :data:`FIXED_SENDS` is refused before anything is emitted, saying so (:func:`too_many`);
- ``ring``: the classic ring closed form (``solvers/closed_form/classics.py``): one ring in rank
  order, so on these systems every hop between boxes goes through one NIC pair;
- ``nccl-ring``: the rings as NCCL runs them (``solvers/closed_form/nccl_ring.py``): one ring per
  channel, each on its own NIC (rail-aligned), the data split over the channels: what "NCCL's
  ring" means in the tables;
- ``double-binary-tree``: NCCL's double binary tree (Sanders, Speck, Träff, "Two-tree algorithms
  for full bandwidth broadcast, reduction and scan", Parallel Computing 2009) is an allreduce;
  it has no allgather or reduce-scatter, so its column is ``n/a`` there (allgather is what tree
  packing and ForestColl's optimum are for on switched systems); ``nccl-tree`` (NCCL's trees per
  channel, ``solvers/closed_form/nccl_tree.py``) likewise;
- ``greedy``: the greedy TEN producer (its row says why where it refuses a combining collective);
- ``ten-ilp``: the TEN ILP with a 60 s limit (skipped with ``--quick``: 27 runs of a minute).

The trees of a system are packed once per tree count (and slack) and reused for every size
(:func:`packed_once`; they do not depend on the size). ``--cell-limit S`` runs each cell in a
child stopped after ``S`` seconds (its cell then says ``timed out``, and the method's larger
sizes ``not run``); ``--save`` is rewritten after every cell, so a stopped sweep keeps its cells. Prints a table per system and model (size x method: time, and ratio to ours) and writes a
log-log plot (one panel per system, event-model times, methods as lines) to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

SIZES = [4 ** i * 65536 for i in range(9)]  # 64 KB .. 4 GB
KINDS = ("allgather", "reduce_scatter", "allreduce")
SYSTEMS = [("A100 x2", "forestcoll_a100", {"nodes": 2}), ("MI250 x2", "forestcoll_mi250", {"nodes": 2}),
           ("DGX-H100 x2", "dgx_h100", {"nodes": 2})]
METHODS = ("ours", "ours-event", "ours-sync", "forestcoll-fixed", "ring", "nccl-ring", "double-binary-tree", "nccl-tree",
           "greedy", "ten-ilp")
ALLREDUCE_ONLY = ("double-binary-tree", "nccl-tree")  # no allgather or reduce-scatter: n/a there
LIMIT_S = 60  # the TEN ILP's limit (the issue's)
PACKING_LIMIT_S = 900  # tree packing: the same trees every size, packed anew each run
MODELS = ("event", "sync")
PRODUCER_SHARE = 0.75  # of a cell's limit, the producer's own (it returns its least priced verified schedule by then):
# the rest is for the cell's pricing (A100 x2's 64 MB allreduce at load 14-17, the producer at the cell's 600-900 s
# returned near the limit and the cell, still pricing, was stopped: no time)
FIXED_SENDS = 8_000_000  # forestcoll-fixed's explicit sends a cell may hold: A100 x2's allreduce (7.2 M, 5 minutes a
# cell at load 15) fits; MI250 x2's 16.0 M (12 GiB at peak on a shared 23 GiB machine) is refused, saying so


def run_method(inst, method: str, cell_limit: float | None = None) -> dict:
    """One method on one instance through the pipeline: its times, status and what it chose
    (``forestcoll-fixed`` at :func:`forestcoll_depth`); the producer's limit is at most
    :data:`PRODUCER_SHARE` of ``cell_limit``."""
    from collsynth import InputError
    from collsynth.solvers import pipeline
    from collsynth.solvers.producers import Options

    if method in ALLREDUCE_ONLY and inst.collective.kind != "allreduce":
        return {"status": "n/a", "message": "allreduce only"}
    producer = "tree-packing" if method.startswith("ours") or method == "forestcoll-fixed" else method
    t0 = time.perf_counter()
    try:
        params = {}
        if method == "forestcoll-fixed":
            params = forestcoll_params(inst)
            refused = too_small(inst, params) or too_many(inst, params)
            if refused:
                return {"status": "refused", "message": refused, "wall_s": time.perf_counter() - t0,
                        "pieces": [params["pieces"]], "k": [params.get("trees")]}
        if method.startswith("ours-"):
            params = {"objective": method.split("-", 1)[1]}
        limit = PACKING_LIMIT_S if producer == "tree-packing" else LIMIT_S
        limit = min(limit, PRODUCER_SHARE * cell_limit) if cell_limit else limit
        row, sched = pipeline.run_lean(inst, producer, Options(params=params, time_limit=limit))
    except InputError as e:  # e.g. the fixed depth's pieces under a byte: the cell says so
        return {"status": "refused", "message": str(e)}
    times = priced(inst, sched) if sched is not None and row["verified"] else {}
    forests = row["extra"].get("forests", []) if row.get("extra") else []
    return {"status": row["status"], "verified": row["verified"], "event": times.get("event"),
            "sync": times.get("sync"), "wall_s": time.perf_counter() - t0, "message": row["message"],
            "choice": [f.get("latency_choice") for f in forests], "pieces": [f.get("pieces") for f in forests],
            "k": [f.get("trees_per_shard") for f in forests]}


def priced(inst, sched) -> dict:
    """``{model: seconds}`` of a verified schedule under the table's :data:`MODELS` alone: the
    pipeline's run verifies it (:func:`collsynth.solvers.pipeline.run_lean`) and the models are
    priced here, not every model of the pipeline nor its lower bounds (its ``ten`` price alone
    took half of ``forestcoll-fixed``'s 576,000-send reduce-scatter on DGX-H100 x2, profiled).
    A schedule kept as trees plus a pipeline rule is priced under ``sync`` from its trees and
    expanded for ``event``."""
    from collsynth.tens import compact_forms, cost_models, pipelined_event

    form = compact_forms.form_of(sched)
    out = {}
    for model in MODELS:
        if form is not None and model == "sync":
            out[model] = form.price_sync(sched, inst).total_s
        else:
            explicit = sched if form is None else pipelined_event._header(form.expand(sched), inst)
            out[model] = cost_models.price(explicit, inst, model).total_s
    return out


def run_cell(inst, method: str, cell_limit: float | None) -> dict:
    """:func:`run_method` in a forked child stopped after ``cell_limit`` seconds of wall clock
    (whatever the phase: packing, emission, verification or pricing); a cell that does not finish
    says ``timed out``, one that fails says ``error`` with the error's line. The trees the child
    packed come back into this process's memo (:func:`packed_once`), so later sizes reuse them.
    Without a limit the method runs in this process."""
    import multiprocessing as mp
    import pickle
    import traceback

    from collsynth.solvers.packing import forests

    if not cell_limit:
        return run_method(inst, method)
    memo = forests.forest.memo
    before = set(memo)
    reader, writer = mp.get_context("fork").Pipe(duplex=False)

    def child():
        try:
            r = run_method(inst, method, cell_limit)
        except Exception as e:  # noqa: BLE001 - the cell records it; the sweep goes on
            r = {"status": "error", "message": f"{type(e).__name__}: {e}"[:300],
                 "trace": traceback.format_exc(limit=3)}
        new = {}
        for key in set(memo) - before:
            try:
                new[key] = pickle.dumps(memo[key])
            except Exception:  # noqa: BLE001 - an unpicklable forest is packed again
                pass
        writer.send((r, new))

    t0 = time.perf_counter()
    proc = mp.get_context("fork").Process(target=child, daemon=True)
    proc.start()
    got = reader.poll(cell_limit)
    r, new = reader.recv() if got else ({"status": "timed out",
                                          "message": f"not built, verified and priced in {cell_limit:g} s"}, {})
    proc.kill() if not got else None
    proc.join()
    for key, blob in new.items():
        memo.setdefault(key, pickle.loads(blob))
    r.setdefault("wall_s", time.perf_counter() - t0)
    return r


def packed_once() -> None:
    """Pack each system's trees once per tree count: the trees do not depend on the message
    size, so later sizes reuse them (every schedule is still emitted, verified and priced)."""
    from collsynth.solvers.packing import forests

    if getattr(forests.forest, "memo", None) is not None:
        return
    memo: dict = {}
    pack = forests.forest

    def forest(instance, kind, transposed, deadline=None, depth_first=False, trees=None, *more, **named):
        key = (id(instance.topology), tuple(instance.collective.nodes), kind, transposed, depth_first, trees, *more,
               *sorted(named.items()))
        if key not in memo:
            memo[key] = pack(instance, kind, transposed, deadline, depth_first, trees, *more, **named)
        return memo[key]

    forest.memo = memo
    forests.forest = forest  # every caller reaches it through the module (solvers/packing/forests.py)


def forestcoll_params(inst) -> dict:
    """The tree-packing parameters of the ``forestcoll-fixed`` column: ForestColl's greedy packing
    (``shape = greedy``) at its fixed depth (:func:`forestcoll_depth`) and at the optimum's tree
    count (``trees``: the forests' own ``k``, so an allreduce is its reduce-scatter then its
    allgather on those forests, not our joint choice among other forests; left unset where the
    two halves' ``k`` differ)."""
    from collsynth.solvers.packing import forests, packed

    ks = {forests.forest(inst, kind, transposed, shape="greedy").k for kind, transposed in packed.plan(inst.collective.kind)}
    params = {"pieces": forestcoll_depth(inst), "shape": "greedy"}
    return {**params, "trees": ks.pop()} if len(ks) == 1 else params


def too_small(inst, params: dict) -> str:
    """Why the ``forestcoll-fixed`` cell cannot be built at this size, or ``""``: the smallest
    pipeline piece (the smallest tree's share of a chunk over the fixed pieces) under one byte,
    the producer's own refusal (:func:`collsynth.solvers.packing.emission.refuse_small_pieces`),
    said before anything is emitted."""
    from collsynth.solvers.packing import forests, packed

    coll = inst.collective
    plan = packed.plan(coll.kind)
    share = min(min(t.hi - t.lo for t in f.trees) / f.k
                for f in (forests.forest(inst, kind, transposed, shape="greedy") for kind, transposed in plan))
    piece = coll.chunk_bytes * share / params["pieces"]
    if piece >= 1.0:
        return ""
    return (f"{_size(int(coll.message_bytes))}: a {coll.chunk_bytes:,.0f} B chunk over its smallest tree share "
            f"({share:.4g} of a chunk, k = {params.get('trees', '?')} trees a shard) at its fixed "
            f"{params['pieces']:,} pieces gives {piece:.3g} B pieces (under 1 B)")


def too_many(inst, params: dict, most: int | None = None) -> str:
    """Why the ``forestcoll-fixed`` cell is not built, or ``""``: its explicit sends (every hop
    of its forests, :func:`collsynth.solvers.packing.packed.plan`, at its fixed pieces, each
    chunk) over ``most`` (:data:`FIXED_SENDS` unless given), said before anything is emitted.
    Its depth does not shrink with the size, so neither do its sends."""
    from collsynth.instances.size import BYTES_PER_SEND
    from collsynth.solvers.packing import forests, packed
    from collsynth.solvers.packing.trees import hops_of

    most = FIXED_SENDS if most is None else most
    coll = inst.collective
    sends = sum(hops_of(forests.forest(inst, kind, transposed, shape="greedy").trees)
                for kind, transposed in packed.plan(coll.kind)) * params["pieces"] * coll.chunks_per_node
    if sends <= most:
        return ""
    return (f"{sends:,} sends at its fixed {params['pieces']:,} pieces, over the sweep's {most:,} "
            f"({sends * BYTES_PER_SEND / 2 ** 30:.1f} GiB at {BYTES_PER_SEND} B a send at peak)")


def forestcoll_depth(inst) -> int:
    """ForestColl's fixed pipelining for the forestcoll-fixed column: ``DEPTH_FACTOR`` (100)
    pieces per hop of the deepest tree of its own (greedy) packing, within the send budget (the
    fewest over the forests the collective is made of, :func:`~collsynth.solvers.packing.producer.plan`:
    the reversed forest of a reduce-scatter, both of an allreduce, which share one ``pieces``)
    (:func:`~collsynth.solvers.packing.producer.auto_pieces` without its floor). It
    is not our automatic depth, whose floor of 1600 pieces is made for our shallow two-level
    trees (with that floor ForestColl's trees are up to 20 % faster than ours under ``event`` in
    a few cells, and hundreds of times slower under ``sync``, where every piece pays alpha)."""
    from collsynth.solvers.packing import emission, forests, packed

    plan = packed.plan(inst.collective.kind)
    packs = [forests.forest(inst, kind, transposed, shape="greedy") for kind, transposed in plan]
    return min(emission.auto_pieces(f.trees, inst.collective.chunks_per_node * len(plan), floor=1) for f in packs)


def sweep(systems, sizes, methods, kinds=("allgather",), cell_limit=None, save=None) -> dict:
    """``{(system, kind, size, method): result}`` for every combination, each cell within
    ``cell_limit`` seconds (:func:`run_cell`); written to ``save`` after every cell. A method
    that timed out at a size is not run at the larger ones of that system and kind (its cell
    says so): no method's sends shrink as the message grows (``forestcoll-fixed`` keeps its
    depth at every size, the closed forms their steps, ours takes more pieces)."""
    from collsynth.instances.generators import build
    from collsynth.instances.instance import make_instance

    packed_once()
    out = {}
    for label, gen, params in systems:
        topo = build(gen, params)
        for kind, size in ((k, s) for k in kinds for s in sizes):
            inst = make_instance(topo, kind, message_bytes=size, name=f"{gen}-{kind}-{size}")
            for method in methods:
                late = [s for s in sizes if s < size and out[(label, kind, s, method)]["status"] == "timed out"]
                r = ({"status": f"not run (timed out at {_size(late[0])})",
                      "message": "timed out at a smaller size; its sends do not shrink with the size"} if late
                     else run_cell(inst, method, cell_limit))
                out[(label, kind, size, method)] = r
                if save:
                    write(out, save)
                print(f"{label} {kind} {size:>11,} {method:<18} {r['status']:<12} event {r.get('event')} sync {r.get('sync')} "
                      f"k {r.get('k')} pieces {r.get('pieces')} {r.get('wall_s', 0):.1f}s {r.get('message', '')[:80]}",
                      flush=True)
    return out


def _size(b: int) -> str:
    for unit, f in (("GB", 2 ** 30), ("MB", 2 ** 20), ("KB", 2 ** 10)):
        if b >= f:
            return f"{b // f} {unit}"
    return f"{b} B"


def ours_for(methods, model: str) -> str:
    """The column of ours that a ``model`` table compares against: the latency choice made for
    that model alone (``ours-<model>``) when it ran, else the default choice (``ours``)."""
    return f"ours-{model}" if f"ours-{model}" in methods else "ours"


def table(results: dict, label: str, sizes, methods, model: str, kind: str = "allgather") -> str:
    """One system's ``kind`` times under ``model`` as Markdown: size x method, time (us) and ratio to
    :func:`ours_for` the model; a cell without a time says why (``n/a``, ``timed out``, ``not run``,
    ``refused``, ``error``); the last column says whether ours is at or below every other method
    with a time (a model's own choice, ``ours-<model>``, below the default ``ours`` too), and how
    many others (``n/a`` aside) have none."""
    mine = ours_for(methods, model)
    head = "| size | " + " | ".join(methods) + f" | {mine} at or below all |"
    lines = [f"{label} {kind}, {model} model: time in us (ratio to {mine})", head, "|" + "---|" * (len(methods) + 2)]
    for size in sizes:
        ours = results.get((label, kind, size, mine), {}).get(model)  # None: no ratios
        cells, best, untimed = [], True, 0
        for m in methods:
            r = results.get((label, kind, size, m), {"status": "not run"})
            t = r.get(model)
            if t is None:
                cells.append(r["status"])
                untimed += not m.startswith("ours") and r["status"] != "n/a"
                continue
            cells.append(f"{t * 1e6:.1f} ({t / ours:.2f})" if ours else f"{t * 1e6:.1f}")
            if not m.startswith("ours") or (m == "ours" and mine != "ours"):  # a model's own choice against the default too
                best = best and (ours is not None and ours <= t * (1 + 1e-9))
        verdict = ("yes" if best else "NO") if ours is not None else f"{mine} has no time"
        verdict += f" ({untimed} without a time)" if untimed else ""
        lines.append(f"| {_size(size)} | " + " | ".join(cells) + f" | {verdict} |")
    return "\n".join(lines)


def plot(results: dict, systems, sizes, methods, out: str, kinds=("allgather",)) -> None:
    """Log-log event-model time against size, one panel per system and kind, methods as lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(kinds), len(systems), figsize=(5 * len(systems), 4 * len(kinds)), squeeze=False)
    for ax, (kind, (label, _, _)) in zip(axes.flat, ((k, s) for k in kinds for s in systems)):
        for m in methods:
            pts = [(s, results.get((label, kind, s, m), {}).get("event")) for s in sizes]
            pts = [(s, t) for s, t in pts if t]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=m)
        ax.set_xscale("log"), ax.set_yscale("log")
        ax.set_title(f"{label} {kind} (event model)"), ax.set_xlabel("message bytes"), ax.set_ylabel("time (s)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def _listed(parser, value: str | None, field: str, known, convert=str) -> tuple:
    """The comma-separated ``value`` of ``field`` in ``known``'s order (all of ``known`` when unset);
    anything else is the parser's one-line error (exit 2)."""
    if value is None:
        return tuple(known)
    try:
        asked = {convert(v) for v in value.split(",")}
    except ValueError:
        parser.error(f"{field}: expected comma-separated integers, got {value!r}")
    unknown = asked - set(known)
    if unknown:
        parser.error(f"{field}: unknown {', '.join(map(str, sorted(unknown)))}; expected some of "
                     f"{', '.join(map(str, known))}")
    return tuple(k for k in known if k in asked)


def write(results: dict, path: str) -> None:
    """The results as the JSON list :func:`load` reads."""
    Path(path).write_text(json.dumps([{"system": k[0], "kind": k[1], "size": k[2], "method": k[3], **v}
                                      for k, v in results.items()], default=str))


def load(paths) -> dict:
    """Saved results (of ``--save``) by key; runs saved before ``--kinds`` are allgather."""
    results = {}
    for path in paths:
        results.update({(r["system"], r.get("kind", "allgather"), r["size"], r["method"]): r
                        for r in json.loads(Path(path).read_text())})
    return results


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip ten-ilp (a minute per run)")
    parser.add_argument("--kinds", default="allgather",
                        help=f"comma-separated collectives (default allgather; some of {', '.join(KINDS)})")
    parser.add_argument("--methods", default=None,
                        help="comma-separated methods to run (default all); --load an earlier run (of ours, say) "
                             "to table them together")
    parser.add_argument("--sizes", default=None, help="comma-separated message sizes in bytes (default all)")
    parser.add_argument("--out", default="/tmp/collsynth_size_sweep.png", help="where the plot goes")
    parser.add_argument("--system", default=None, help="one system label, e.g. 'A100 x2'")
    parser.add_argument("--cell-limit", type=float, default=None,
                        help="seconds of wall clock per (system, kind, size, method) cell, whatever its phase; "
                             "a cell past it says 'timed out' (default: none, each producer's own limit)")
    parser.add_argument("--save", default=None, help="write the results as JSON here")
    parser.add_argument("--load", nargs="*", default=None,
                        help="tabulate and plot saved results (of --save) instead of running")
    args = parser.parse_args(argv)
    if args.cell_limit is not None and args.cell_limit <= 0:
        parser.error(f"--cell-limit: expected a positive number of seconds, got {args.cell_limit:g}")
    asked = _listed(parser, args.methods, "--methods", METHODS)
    methods = tuple(m for m in asked if not (args.quick and m == "ten-ilp"))
    kinds = _listed(parser, args.kinds, "--kinds", KINDS)
    sizes = _listed(parser, args.sizes, "--sizes", SIZES, int)
    if args.load is not None:
        results = load(args.load)
        methods, kinds, sizes = ([x for x in known if any(k[i] == x for k in results)]
                                 for i, known in ((3, METHODS), (1, KINDS), (2, SIZES)))
        systems = [s for s in SYSTEMS if any(k[0] == s[0] for k in results)]
    else:
        systems = [s for s in SYSTEMS if args.system in (None, s[0])]
        if args.quick:
            print("--quick: ten-ilp skipped")
        results = sweep(systems, sizes, methods, kinds, args.cell_limit, args.save)
    if args.save:
        write(results, args.save)
    for label, _, _ in systems:
        for kind in kinds:
            for model in MODELS:
                print(table(results, label, sizes, methods, model, kind), "\n")
    plot(results, systems, sizes, methods, args.out, kinds)
    print(f"plot: {args.out}")
    return results


if __name__ == "__main__":
    main()
