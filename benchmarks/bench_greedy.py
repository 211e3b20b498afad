"""TACOS-Greedy at scale: synthesis time, memory peak and quality against the lower bound.

Run ``python -m pytest -m benchmark -s benchmarks/bench_greedy.py`` or
``python benchmarks/bench_greedy.py [--max-npus N] [--starts K]``.

Every case runs in a fresh child process (so the memory peak ``ru_maxrss`` is the case's own)
and reports wall and CPU seconds of the synthesis alone (one seed, one core), the timesteps
reached, the lower bound (``greedy.lower_bound``: per-node inbound and distance bounds) and the
resident-set peak. Cases:

- allgather, 1 chunk per node, on 2D meshes and tori from 8x8 (64 NPUs) to 64x64 (4096 NPUs);
- allreduce (TACOS Table I) and allgather on Ring x FullyConnected x Switch systems of
  8..512 NPUs (``hierarchical`` levels=ring,complete,switch, dims=2,4,K, 200/100/50 GB/s,
  scale-out switch unwound to degree 1, TACOS section VII-B);
- quality against the exact TEN ILP (``ten-ilp`` producer) on small meshes where it exists.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import time

import pytest


def _topology(spec):
    from collsynth.instances.generators import build

    if spec[0] in ("mesh", "torus"):
        return build(spec[0], {"dims": list(spec[1])}, bandwidth=100e9, alpha=0.5e-6)
    k = spec[1]
    return build("hierarchical", {"levels": ["ring", "complete", "switch"], "dims": [2, 4, k],
                                  "scales": [4.0, 2.0, 1.0], "unwind": [0, 0, 1]},
                 bandwidth=50e9, alpha=0.5e-6)


def _case(spec, kind, seed, out):
    from collsynth.instances.instance import make_instance
    from collsynth.solvers.greedy import tacos as greedy

    inst = make_instance(_topology(spec), kind, message_bytes=64 << 20)
    t0, c0 = time.perf_counter(), time.process_time()
    sched = greedy.synthesize(inst, seed)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    bound = greedy.lower_bound(inst)
    out.put({
        "topology": f"{spec[0]}{'x'.join(map(str, spec[1])) if spec[0] in ('mesh', 'torus') else spec[1]}",
        "npus": len(inst.topology.npus), "kind": kind, "steps": sched.num_steps, "bound": bound,
        "ratio": round(sched.num_steps / bound, 4) if bound else None, "sends": len(sched),
        "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
        "replaced": sched.meta.get("stats", {}).get("replaced"),
    })


def run_case(spec, kind="allgather", seed=0, timeout=3600):
    """One case in a fresh process; returns its figures (or an error row on timeout)."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_case, args=(spec, kind, seed, q))
    p.start()
    try:
        return q.get(timeout=timeout)
    except Exception as e:  # noqa: BLE001 - report and go on
        return {"topology": str(spec), "kind": kind, "error": f"{type(e).__name__}: {e}"}
    finally:
        p.join(5)
        if p.is_alive():
            p.kill()


GRIDS = [("mesh", (8, 8)), ("torus", (8, 8)), ("mesh", (16, 16)), ("torus", (16, 16)),
         ("mesh", (32, 32)), ("torus", (32, 32)), ("mesh", (64, 64)), ("torus", (64, 64))]
RFS = [("rfs", k) for k in (1, 2, 4, 8, 16, 32, 64)]


def _table(rows):
    cols = ["topology", "npus", "kind", "steps", "bound", "ratio", "sends", "wall_s", "cpu_s", "peak_mb"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(str(r.get(c, r.get("error", ""))) for c in cols) + " |")
    return "\n".join(lines)


def sweep(max_npus=4096, kinds=("allgather",), rfs_kinds=("allreduce", "allgather")):
    rows = []
    for spec in GRIDS:
        if spec[1][0] * spec[1][1] <= max_npus:
            for kind in kinds:
                rows.append(run_case(spec, kind))
                print(json.dumps(rows[-1]), flush=True)
    for spec in RFS:
        if 8 * spec[1] <= max_npus:
            for kind in rfs_kinds:
                rows.append(run_case(spec, kind))
                print(json.dumps(rows[-1]), flush=True)
    return rows


def ilp_quality(starts=20, time_limit=120):
    """Greedy (best of ``starts``) against the exact ``ten-ilp`` producer on small meshes."""
    from collsynth.instances.generators import build
    from collsynth.instances.instance import make_instance
    from collsynth.solvers import pipeline
    from collsynth.solvers.producers import Options, producers

    if "ten-ilp" not in producers():
        return []
    rows = []
    for gen, dims, kind in [("mesh", [3, 3], "allgather"), ("mesh", [4, 4], "allgather"),
                            ("torus", [3, 3], "allgather"), ("mesh", [3, 3], "allreduce")]:
        inst = make_instance(build(gen, {"dims": dims}, bandwidth=100e9, alpha=0.5e-6), kind)
        g, _ = pipeline.run(inst, "greedy", Options(starts=starts))
        e, _ = pipeline.run(inst, "ten-ilp", Options(time_limit=time_limit))
        rows.append({"instance": inst.name, "greedy_steps": g["steps"], "greedy_s": round(g["wall_s"], 2),
                     "ilp_steps": e["steps"], "ilp_status": e["status"], "ilp_s": round(e["wall_s"] or 0, 2),
                     "bound": g["bound"]})
        print(json.dumps(rows[-1]), flush=True)
    return rows


@pytest.mark.benchmark
def test_bench_greedy_scale():
    rows = sweep()
    print("\n" + _table(rows))
    ok = [r for r in rows if "error" not in r]
    assert ok and all(r["steps"] >= r["bound"] for r in ok)


@pytest.mark.benchmark
def test_bench_greedy_vs_ilp():
    rows = ilp_quality()
    for r in rows:
        if r["ilp_status"] == "optimal":
            assert r["greedy_steps"] >= r["ilp_steps"] >= r["bound"]


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-npus", type=int, default=4096)
    ap.add_argument("--ilp", action="store_true", help="also compare with ten-ilp on small meshes")
    a = ap.parse_args()
    rows = sweep(a.max_npus)
    print(_table(rows))
    if a.ilp:
        ilp_quality()
