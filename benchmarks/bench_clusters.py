"""Clusters as built: 1 GB allgather with tree packing on multi-tier Clos fabrics, 256 to 16,384 GPUs.

Run: ``python benchmarks/bench_clusters.py [--only LABEL] [--skip LABEL] [--max-gpus N] [--row-timeout S]
[--forestcoll DIR]`` (with ``--forestcoll``, ForestColl's own code's optimum and trees seconds on
the rows up to ``--forestcoll-max-gpus``, :mod:`forestcoll_code`).
Each row runs in a process of its own (its peak memory is its own) and prints, per fabric and
size: the cut optimum (Zhao et al., "ForestColl", arXiv 2402.06787, Section 4) and the seconds
to it (tested at one box's GPUs where a box shift is found, :mod:`collsynth.instances.box_shift`);
the seconds to the trees (the first box's trees translated by the shift,
:func:`collsynth.solvers.packing.translated.translated`, where they complete; else
:func:`collsynth.solvers.packing.producer.forest`: two-level, rings or the greedy packing with
its root-order search); the trees kept as trees plus the
pipeline rule (:mod:`collsynth.tens.pipelined_trees`), verified and priced under ``sync`` in
that form at the pipeline depth of least sync price (:func:`collsynth.solvers.packing.compact.least_sync`; seconds for both); the
price under the FIFO ``event`` model simulated per link orbit (:mod:`collsynth.tens.pipelined_event`, the
explicit sends' price) at the depth of least price among powers of two up to the sync depth whose
simulation fits ``--event-sends`` (:mod:`orbit_event`; ``event s``: every depth tried); with
``--explicit-sends N`` also the expansion verified and priced under ``event`` at the deepest
pipeline within ``N`` sends (in the note, a check); the instance's own lower bounds under
``sync`` and ``event`` (:func:`collsynth.tens.bounds.instance_bounds`); the peak resident
memory of the row. ``sync T_B/opt`` is the bandwidth part of that ``sync`` price over the optimum.
Ratios are to the cut optimum (the bandwidth term alone: a model with latency cannot reach it,
so ``sync/opt`` includes the alpha of every step). A row that does not finish in the row
timeout says at which stage it stopped.

Measured (``--row-timeout 400 --explicit-sends 0``, one row at a time, 1 GiB allgather, load
16-18; the full table is README's "Clusters as built"), optimum + trees + verify/price seconds,
``sync`` over the cut optimum and over the ``sync`` bound (the box bound of
:mod:`collsynth.tens.bounds.drain` where it applies, else latency plus cut optimum), the
instance bounds' seconds, peak of the row; trees with sends into multicasting switches merged
(:func:`collsynth.solvers.packing.compact.multicast`) and pieces of unequal size where they
price lower (:mod:`collsynth.solvers.packing.piece_sizes`):

- DGX H100 x512 (4,096 GPUs): 3.0 + 2.0 + 6.9 s, 1.036 / 1.001, bounds 8.4 s, 294 MiB
  (equal pieces, no merging: 1.103 / 1.100);
- SuperPOD 8 SU (2,048, two tiers): 0.9 + 1.6 + 1.5 s, 1.041 / 1.006, 6.1 s, 235 MiB;
- SuperPOD 16 SU (4,096, three tiers): 2.0 + 11.4 + 2.6 s, 1.099 / 1.062, 10.2 s, 306 MiB;
- HPN 4 segments (4,096): 1.9 + 34.8 + 4.3 s, 1.090 / 1.053, 8.1 s, 311 MiB;
- fat tree k = 26 (4,394): 2.1 + 17.8 + 1.9 s, 1.002 / 1.001, 4.8 s, 321 MiB (was 1.052 / 1.051).
"""

from __future__ import annotations

import argparse
import resource
import signal
import time

import forestcoll_code
import orbit_event
from fresh_process import cell, each_in_a_fresh_process
from markdown_table import table

M = 1 << 30  # 1 GiB allgather
EXPLICIT_SENDS = 0  # the event model prices the explicit sends up to this many (a check of the price per orbit)
MAX_PIECES = 8192  # the deepest pipeline tried under sync
ROW_TIMEOUT_S = 900

SUPERPOD = {"2 SU": {"groups_per_pod": 2, "spines": 8}, "4 SU": {}, "8 SU": {"groups_per_pod": 8, "spines": 32},
            "16 SU": {"pods": 16, "groups_per_pod": 1, "spines": 8, "cores": 64},
            "64 SU": {"pods": 64, "groups_per_pod": 1, "spines": 8, "cores": 256}}
ROWS = (
    [(f"dgx_h100 nodes={n}", "dgx_h100", {"nodes": n}) for n in (32, 64, 128, 256, 512, 1024, 2048)]
    + [(f"SuperPOD {k} (rail_clos)", "rail_clos", p) for k, p in SUPERPOD.items()]
    + [("SuperPOD 4 SU, leaves 2:1", "rail_clos", {"spines": 16, "oversubscription": [2.0, 1.0]}),
       ("SuperPOD 16 SU, leaves 2:1", "rail_clos", {"pods": 16, "groups_per_pod": 1, "spines": 8, "cores": 64,
                                                    "oversubscription": [2.0, 1.0]})]
    + [(f"fat_tree k={k}", "fat_tree", {"k": k}) for k in (10, 16, 20, 26, 32)]
    + [(f"HPN {s} segment{'s' if s > 1 else ''}", "hpn", {"segments": s}) for s in (1, 2, 4)]
)


class RowTimeout(Exception):
    """The row ran out of its time."""


def _alarm(signum, frame):
    raise RowTimeout()


def _row(args) -> dict:
    label, generator, params, timeout, explicit, event_sends = args
    out = {"fabric": label, "stage": "instance"}
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(int(timeout))
    try:
        _measure(out, generator, params, explicit, event_sends)
        out["stage"] = "done"
    except RowTimeout:
        out["stopped"] = f"timeout at {out['stage']}"
    except Exception as e:  # a refusal or failure is a row of the table, not the end of the run
        out["stopped"] = f"{type(e).__name__} at {out['stage']}: {str(e)[:120]}"
    signal.alarm(0)
    out["peak_MiB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def _measure(out: dict, generator: str, params: dict, explicit: int = EXPLICIT_SENDS,
             event_sends: int = orbit_event.EVENT_SENDS) -> None:
    from collsynth.instances.generators import build
    from collsynth.instances.instance import make_instance
    from collsynth.solvers.packing import compact, translated
    from collsynth.solvers.packing.producer import _with_header, choose_k, forest
    from collsynth.solvers.packing.tree_hops import tree_hops
    from collsynth.tens import cost_models, verify
    from collsynth.tens.cut_optimum import flow_net, optimum
    from collsynth.tens.pipelined_trees import expand
    from collsynth.tens.pipelined_trees import verify as verify_trees

    t = time.perf_counter()
    inst = make_instance(build(generator, params), "allgather", message_bytes=M)
    coll = inst.collective
    out.update(gpus=len(coll.nodes), instance_s=time.perf_counter() - t, stage="optimum")
    t = time.perf_counter()
    net = flow_net(inst.topology, coll.nodes, [1] * len(coll.nodes))
    opt = optimum(net)
    out.update(optimum_ms=1e3 * float(opt.seconds(coll.chunk_bytes, net.unit_bw)), optimum_s=time.perf_counter() - t,
               stage="trees")
    t = time.perf_counter()
    k, tau = choose_k(net, opt)
    c = translated.translated(inst, "allgather", False, k, tau)
    if c is not None:
        out.update(trees_s=time.perf_counter() - t, shape="translated", trees=len(c.root) * c.copies,
                   listed_trees=len(c.root), stage="verify+price")
    else:
        f = forest(inst, "allgather", False)
        out.update(trees_s=time.perf_counter() - t, shape=f.shape, trees=len(f.trees), stage="verify+price")
        c = compact.pipelined(inst, f, 1, tree_hops)
    t = time.perf_counter()
    c = compact.multicast(c, inst)
    c, price = compact.least_sync(c, inst, MAX_PIECES)
    why = verify_trees(c, inst)
    out.update(verified=why is None, sync_ms=1e3 * price.total_s, sync_bw_ms=1e3 * price.T_B_s, pieces=c.pieces,
               hops=len(c.src) * c.copies, verify_price_s=time.perf_counter() - t, stage="event (per link orbit)")
    out.update(orbit_event.least_event(c, inst, c.pieces, event_sends))
    out["stage"] = "event (explicit)"
    pieces = min(c.pieces, explicit // max(1, len(c.src) * c.copies * c.chunks_per_root))
    if pieces >= 1:
        t = time.perf_counter()
        sched = _with_header(expand(compact.at_pieces(c, pieces)), inst)
        ok = verify.verify(sched, inst) is None
        out.update(explicit_ms=1e3 * cost_models.price(sched, inst, "event").total_s if ok else None,
                   explicit_pieces=pieces, explicit_verified=ok, explicit_s=time.perf_counter() - t)
    out["stage"] = "bounds"
    t = time.perf_counter()
    from collsynth.tens.bounds import instance_bounds

    b = instance_bounds(inst)
    out.update(sync_bound_ms=b.sync.value and 1e3 * b.sync.value, event_bound_ms=b.event.value and 1e3 * b.event.value,
               bounds_s=time.perf_counter() - t)


def render(rows: list[dict]) -> str:
    """The rows as a Markdown table (``sync/bound``: over the instance's ``sync`` bound, latency
    plus cut optimum; ``status``: the models whose time meets their bound, ``optimal`` only
    there)."""
    head = ["fabric", "GPUs", "optimum ms", "sync bound ms", "event bound ms", "sync ms (pieces)", "sync/opt",
            "sync/bound", "sync T_B/opt", "event ms (pieces)", "event/opt", "event/bound", "status",
            "trees", "optimum s", "trees s", "verify+price s", "event s", "bounds s", "peak MiB",
            "ForestColl code optimum s", "ForestColl code trees s", "note"]
    body = []
    for r in rows:
        opt, sy, ev = r.get("optimum_ms"), r.get("sync_ms"), r.get("event_ms")
        sb, eb = r.get("sync_bound_ms"), r.get("event_bound_ms")
        body.append([r["fabric"], cell(r.get("gpus"), ","), cell(opt, ".3f"), cell(sb, ".3f"), cell(eb, ".3f"),
                     f"{cell(sy, '.3f')} ({r.get('pieces', '-')})", cell(sy and opt and sy / opt, ".3f"),
                     cell(sy and sb and sy / sb, ".3f"), cell(r.get("sync_bw_ms") and opt and r["sync_bw_ms"] / opt, ".4f"),
                     f"{cell(ev, '.3f')} ({r.get('event_pieces', '-')})", cell(ev and opt and ev / opt, ".3f"),
                     cell(ev and eb and ev / eb, ".3f"), _status(sy, sb, ev, eb),
                     f"{r.get('trees', '-')} {r.get('shape', '')}", cell(r.get("optimum_s"), ".1f"),
                     cell(r.get("trees_s"), ".1f"), cell(r.get("verify_price_s"), ".1f"), cell(r.get("event_s"), ".1f"),
                     cell(r.get("bounds_s"), ".1f"), cell(r.get("peak_MiB"), ".0f"),
                     *(forestcoll_code.cells(r) if "forestcoll_stopped" in r or "forestcoll_optimum_s" in r else ["-", "-"]),
                     _note(r)])
    return "\n".join(table(head, body))


def _note(r: dict) -> str:
    """A stopped row's stage, an unverified one, and the explicit sends' event price where asked."""
    note = r.get("stopped", "" if r.get("verified", True) else "NOT VERIFIED")
    if r.get("event_exact_pairs") is False:
        note += " event by group prefixes"
    if "explicit_ms" in r:
        note += (f" explicit sends: {cell(r['explicit_ms'], '.3f')} ms ({r['explicit_pieces']}), "
                 f"{r['explicit_s']:.1f} s{'' if r.get('explicit_verified') else ', NOT VERIFIED'}")
    return note.strip()


def _status(sync_ms, sync_bound_ms, event_ms, event_bound_ms) -> str:
    """``optimal (sync)`` / ``optimal (event)`` where a time meets its own model's bound (to
    rounding), else ``-``."""
    met = [m for m, t, b in (("sync", sync_ms, sync_bound_ms), ("event", event_ms, event_bound_ms))
           if t is not None and b is not None and t <= b * (1 + 1e-9)]
    return f"optimal ({', '.join(met)})" if met else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="rows whose label contains this")
    ap.add_argument("--skip", help="leave out rows whose label contains this")
    ap.add_argument("--max-gpus", type=int, default=16384)
    ap.add_argument("--row-timeout", type=float, default=ROW_TIMEOUT_S)
    ap.add_argument("--explicit-sends", type=int, default=EXPLICIT_SENDS,
                    help="also price the explicit sends under event up to this many (default %(default)s), "
                         "shown in the note")
    ap.add_argument("--event-sends", type=int, default=orbit_event.EVENT_SENDS,
                    help="simulate at most this many sends per pipeline depth under event (default %(default)s)")
    ap.add_argument("--forestcoll", help="a checkout of ForestColl's code: its optimum and trees seconds per row "
                                         "(benchmarks/forestcoll_code.py), each in a process of its own")
    ap.add_argument("--forestcoll-max-gpus", type=int, default=512, help="ForestColl's code on rows up to this many GPUs")
    ap.add_argument("--forestcoll-timeout", type=float, default=forestcoll_code.TIMEOUT_S)
    a = ap.parse_args()
    specs = sorted(((label, g, p, a.row_timeout, a.explicit_sends, a.event_sends) for label, g, p in ROWS
                    if (a.only is None or a.only in label) and (a.skip is None or a.skip not in label)
                    and _gpus(g, p) <= a.max_gpus),
                   key=lambda spec: _gpus(spec[1], spec[2]))  # the smaller fabrics first
    rows = each_in_a_fresh_process(_row, specs, lambda r: render([r]).splitlines()[-1])  # each row as it ends
    if a.forestcoll:
        theirs = [(label, g, p, a.forestcoll, a.forestcoll_timeout) for label, g, p, *_ in specs
                  if _gpus(g, p) <= a.forestcoll_max_gpus]
        found = {r["fabric"]: r for r in each_in_a_fresh_process(forestcoll_code.row, theirs, str)}
        for r in rows:
            r.update({k: v for k, v in found.get(r["fabric"], {}).items() if k.startswith("forestcoll")})
    print(render(rows))


def _gpus(generator: str, params: dict) -> int:
    from collsynth.instances.clos import clos_plan

    if generator == "dgx_h100":
        return 8 * params["nodes"]
    if generator == "fat_tree":
        return params["k"] ** 3 // 4
    if generator == "hpn":
        return 1024 * params["segments"]
    return clos_plan(params)["gpus"]


if __name__ == "__main__":
    main()
