"""The greedy at scale: quality against the lower bounds, synthesis time and memory, before and
after, in one run on one machine.

Run ``python benchmarks/bench_greedy.py [--max-npus N] [--baseline REV | --baseline none]
[--timeout S] [--ilp]`` or ``python -m pytest -m benchmark -s benchmarks/bench_greedy.py``
(that one stops at 1,024 NPUs).

Every case runs in a fresh child process (so its memory peak ``ru_maxrss`` is its own) and
reports wall and CPU seconds of the synthesis alone (one seed, one core; after a 3x3 torus run
that loads the compiled code, ``load_s``, paid once per process) and the peak right after it;
the schedule is then verified (``collsynth.tens.verify``) in the same child. The
*before* columns run the same case on the package as of git revision ``REV`` (default
:data:`BASELINE`, the last revision with the numpy matching), exported by ``git archive`` into
a temporary directory, with that revision's default rules.

Columns of the quality table:

- ``steps``: timesteps of the greedy with its default rules (seed 0);
- ``inbound``: the per-node inbound bound, computed here by hand: the largest, over nodes, of
  the smallest ``T`` with ``sum over in-links of cap * floor(T / delay) >= chunks the node
  lacks`` (combining collectives count a node's sends instead);
- ``cut``: the cut bound in timesteps of ``collsynth.tens.bounds`` (its parametric min-cut
  search; when it finds no node set beating single nodes, the cut bound is the per-node
  bound, shown as that value), ``-`` where the search was refused (over its time budget) or
  the revision has no such module; ``bound``: ``greedy.lower_bound`` of the revision under
  test (the best of ``collsynth.tens.bounds``' distance, per-node, volume and cut bounds);
- ``tacos_pub``: TACOS's published figure (Won et al., TACOS, arXiv:2304.05301, 2023, §VIII):
  the paper gives no timestep counts for these systems (Table I normalises Ring x FC x Switch
  allreduce times to its own greedy), hence ``-``;
- ``tacos_rule``: the paper's rules (``priority=random, matching=greedy, endgame=0``) in this
  code; ``before``/``before_s``: the baseline revision's steps and synthesis wall seconds.

Cases: allgather (1 chunk per NPU) on tori 8x8 to 64x64 and 16x16x16 and a 32x32 mesh
(100 GB/s, 0.5 us); Ring x FullyConnected x Switch systems of 64, 128 and 512 NPUs (levels
ring, complete, switch; dims 2, 4, K; 200/100/50 GB/s; scale-out switch unwound to degree 1,
TACOS §VIII-B) for allgather and allreduce (64 MiB).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

BASELINE = "86e3cd1"  # main before the compiled matching engine (the numpy matching, tens/bounds.py)
REPO = Path(__file__).resolve().parent.parent
TACOS_RULE = {"priority": "random", "matching": "greedy", "endgame": 0}

CASES = [
    ("torus", (8, 8), "allgather"), ("torus", (16, 16), "allgather"), ("torus", (32, 32), "allgather"),
    ("torus", (64, 64), "allgather"), ("torus", (16, 16, 16), "allgather"), ("mesh", (32, 32), "allgather"),
    ("rfs", (8,), "allgather"), ("rfs", (16,), "allgather"), ("rfs", (64,), "allgather"),
    ("rfs", (8,), "allreduce"), ("rfs", (16,), "allreduce"), ("rfs", (64,), "allreduce"),
]


def npus(case) -> int:
    gen, dims, _ = case
    n = 1
    for d in dims:
        n *= d
    return 8 * n if gen == "rfs" else n


def _instance(gen, dims, kind):
    from collsynth.instances.generators import build
    from collsynth.instances.instance import make_instance

    if gen == "rfs":
        topo = build("hierarchical", {"levels": ["ring", "complete", "switch"], "dims": [2, 4, dims[0]],
                                      "scales": [4.0, 2.0, 1.0], "unwind": [0, 0, 1]}, bandwidth=50e9, alpha=0.5e-6)
    else:
        topo = build(gen, {"dims": list(dims)}, bandwidth=100e9, alpha=0.5e-6)
    return make_instance(topo, kind, message_bytes=64 << 20)


def inbound_bound(inst, greedy) -> int:
    """Per-node inbound bound in the greedy's timesteps (see the module docstring); allreduce
    counts its allgather phase (its output contains an allgather's)."""
    import numpy as np

    coll, topo = inst.collective, inst.topology
    if coll.kind == "allreduce":
        coll = coll.with_kind("allgather")
    elif coll.combining:
        coll, topo = coll.dual(), topo.transpose()
    lk = greedy.links(topo, coll.chunk_bytes)
    need = (coll.postcondition & ~coll.precondition).sum(axis=0)
    best = 0
    for v in np.flatnonzero(need > 0).tolist():
        d, k = lk.delay[lk.dst == v], lk.cap[lk.dst == v]
        T = 1
        while int((k * (T // d)).sum()) < need[v]:
            T += 1
        best = max(best, T)
    return best


def cut_bound(inst):
    """The cut bound in timesteps of ``collsynth.tens.bounds`` (None where the revision has no
    such module or the search ran out of its budget)."""
    if importlib.util.find_spec("collsynth.tens.bounds") is None:
        return None
    from collsynth.tens import bounds

    b = bounds.instance_bounds(inst)
    cuts = [p for p in b.parts["timesteps"] if p.source == "cut"]
    if any(not p.computed for p in cuts):
        return None
    if cuts:
        return int(max(p.value for p in cuts))
    nodes = [p.value for p in b.parts["timesteps"] if p.source in ("inbound", "outbound") and p.computed]
    return int(max(nodes)) if nodes else None  # no set beat single nodes: the per-node bound


def run_case(case: dict) -> dict:
    """One case in this process (the child): synthesize, measure, verify."""
    from collsynth.solvers.greedy import tacos as greedy

    inst = _instance(case["gen"], tuple(case["dims"]), case["kind"])
    rules = case.get("rules") or {}
    t0 = time.perf_counter()
    greedy.synthesize(_instance("torus", (3, 3), "allgather"), 0, **rules)  # loads compiled code, if any
    load = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), time.process_time()
    sched = greedy.synthesize(inst, 0, **rules)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    row = {"steps": sched.num_steps, "sends": len(sched), "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
           "peak_mb": peak, "load_s": round(load, 2)}
    if case.get("measure_bounds"):
        row.update(bound=int(greedy.lower_bound(inst)), inbound=inbound_bound(inst, greedy), cut=cut_bound(inst))
    if case.get("verify"):
        from collsynth.tens.verify import verify

        t0 = time.perf_counter()
        violation = verify(sched, inst)
        row.update(verified=violation is None, verify_s=round(time.perf_counter() - t0, 2))
    return row


def child(case: dict, package_root: Path, timeout: float) -> dict:
    """``run_case`` in a fresh interpreter importing ``collsynth`` from ``package_root``."""
    env = {**os.environ, "PYTHONPATH": str(package_root)}
    try:
        out = subprocess.run([sys.executable, __file__, "--case", json.dumps(case)], env=env, capture_output=True,
                             text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout:.0f} s"}
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["exit %d" % out.returncode])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def this_package_root(scratch: Path) -> Path:
    """A directory from which ``import collsynth`` gives the package this process runs."""
    import collsynth

    pkg = Path(collsynth.__file__).parent
    if pkg.name == "collsynth":
        return pkg.parent
    (scratch / "self").mkdir()
    (scratch / "self" / "collsynth").symlink_to(pkg.resolve())
    return scratch / "self"


def export_revision(rev: str, into: Path, repo: Path = REPO) -> Path:
    """``git archive`` of ``rev`` in ``repo`` as ``into/collsynth``; returns ``into`` (a
    package root)."""
    into.mkdir()
    archive = subprocess.run(["git", "-C", str(repo), "archive", "--prefix=collsynth/", rev],
                             capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def sweep(max_npus=4096, baseline: str | None = BASELINE, timeout=1800.0, cases=CASES, repo: Path = REPO):
    """The quality and speed table (a list of rows), printed as it grows."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = this_package_root(Path(tmp))
        child({"gen": "torus", "dims": [3, 3], "kind": "allgather"}, root, timeout)  # compiled-code cache warm
        base_root = export_revision(baseline, Path(tmp) / "base", repo) if baseline else None
        for gen, dims, kind in cases:
            if npus((gen, dims, kind)) > max_npus:
                continue
            case = {"gen": gen, "dims": list(dims), "kind": kind}
            name = f"{gen}{'x'.join(map(str, dims))}" if gen != "rfs" else f"rfs{npus((gen, dims, kind))}"
            row = {"topology": name, "npus": npus((gen, dims, kind)), "kind": kind, "tacos_pub": "-"}
            row.update(child({**case, "measure_bounds": True, "verify": True}, root, timeout))
            row["tacos_rule"] = child({**case, "rules": TACOS_RULE}, root, timeout).get("steps", "timeout")
            if base_root:
                b = child(case, base_root, timeout)
                row.update(before=b.get("steps", b.get("error")), before_s=b.get("wall_s"), before_cpu_s=b.get("cpu_s"),
                           before_peak_mb=b.get("peak_mb"))
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


COLUMNS = ["topology", "npus", "kind", "steps", "inbound", "cut", "bound", "tacos_pub", "tacos_rule", "before",
           "before_s", "before_cpu_s", "before_peak_mb", "wall_s", "cpu_s", "load_s", "peak_mb", "verified",
           "verify_s"]


def table(rows) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        lines.append("| " + " | ".join("-" if r.get(c) is None else str(r.get(c, r.get("error", ""))) for c in COLUMNS) + " |")
    return "\n".join(lines)


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
def test_bench_greedy_quality_and_speed():
    rows = sweep(max_npus=1024)
    print("\n" + table(rows))
    ok = [r for r in rows if "error" not in r]
    assert ok and all(r["verified"] and r["steps"] >= r["bound"] for r in ok)
    assert all(r["steps"] == r["inbound"] for r in ok if r["topology"].startswith("torus"))


@pytest.mark.benchmark
def test_bench_greedy_vs_ilp():
    rows = ilp_quality()
    for r in rows:
        if r["ilp_status"] == "optimal":
            assert r["greedy_steps"] >= r["ilp_steps"] >= r["bound"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-npus", type=int, default=4096)
    ap.add_argument("--baseline", default=BASELINE, help="git revision for the before columns ('none': skip)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per child process")
    ap.add_argument("--repo", type=Path, default=REPO, help="git checkout holding the baseline revision")
    ap.add_argument("--ilp", action="store_true", help="also compare with ten-ilp on small meshes")
    ap.add_argument("--case", help=argparse.SUPPRESS)  # internal: run one case in this process
    a = ap.parse_args(argv)
    if a.case:
        print(json.dumps(run_case(json.loads(a.case))))
        return
    rows = sweep(a.max_npus, None if a.baseline == "none" else a.baseline, a.timeout, repo=a.repo)
    print(table(rows))
    if a.ilp:
        ilp_quality()


if __name__ == "__main__":
    main()
