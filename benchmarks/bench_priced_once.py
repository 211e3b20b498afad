"""Tree packing's allreduce generation with each schedule verified and priced once a run, against
the same run pricing again what it has priced (as before), side by side.

Run: ``python benchmarks/bench_priced_once.py --only "H100 4-NIC x2"`` (1 GB, alpha 0, the
systems of ``bench_allreduce.py``; ``--objective event`` for one model's objective, ``--alpha``
to give every link that latency). Each system runs twice, each run in a fresh process through
``collsynth.solvers.pipeline.run_lean`` (the producer, then the verification): ``again``, the
choices verifying and pricing a schedule they have priced before, as they did before
(:meth:`collsynth.solvers.packing.incumbent.Kept.known` finds nothing; the FIFO probe's
extrapolation and the one-model latency choice price their known pairs again), then ``once``.
A row prints the producer's seconds (``build_s``), its verifications and the sends they read,
and whether the two runs returned the very same schedule (content digest) at the very same
``sync`` / ``event`` / ``event-inorder`` prices (``repr``). Kernels numba's cache lacks run as
Python in these runs (:mod:`collsynth.tens.interpreted`: the instances are small at one piece),
so a first run after a change of the kernels is slower; ``collsynth warmup`` does not cover
every signature a switched system's pricing uses.
"""

from __future__ import annotations

import argparse
import time

from fresh_process import cell, each_in_a_fresh_process

MODES = ("again", "once")


def _again() -> None:
    """The choices price again what they have priced (the code before the reuse)."""
    from collsynth.solvers.packing import fifo_reduce, incumbent, latency_choice

    incumbent.Kept.known = lambda self, key: None
    cheaper = fifo_reduce.cheaper_at_its_pieces
    fifo_reduce.cheaper_at_its_pieces = lambda f, one, price, pieces, chunks, at_probe=None: cheaper(
        f, one, price, pieces, chunks)
    once = latency_choice._priced_once
    latency_choice._priced_once = lambda part, alts, pair, models, seen: once(part, alts, pair, models, None)


def _run(args) -> dict:
    label, mode, limit_s, objective, alpha = args
    from bench_allreduce import SYSTEMS, instance_of
    from switched_systems import systems

    from collsynth.solvers import pipeline
    from collsynth.solvers.producers import Options
    from collsynth.tens import certified, cost_models, verify

    if mode == "again":
        _again()
    verified = []
    check = verify.verify

    def counted(schedule, instance, *args, **kw):
        verified.append(len(schedule))
        return check(schedule, instance, *args, **kw)

    verify.verify = counted
    generator, params = ({s[0]: s for s in SYSTEMS}.get(label) or systems(label)[0])[1:]
    if alpha:
        params = {k: alpha if k.endswith("alpha") else v for k, v in params.items()}
    inst = instance_of(generator, params, "allreduce")
    t0 = time.perf_counter()
    row, sched = pipeline.run_lean(inst, "tree-packing",
                                   Options(time_limit=limit_s, params={"objective": objective} if objective else {}))
    wall = time.perf_counter() - t0
    out = {"system": label, "mode": mode, "build_s": row["build_s"], "wall_s": wall, "verifications": len(verified),
           "sends_verified": sum(verified), "status": row["status"], "prices": None, "digest": None}
    if sched is not None and row["verified"]:
        out["digest"] = certified.digest(sched).hex()
        out["prices"] = {m: repr(cost_models.price(sched, inst, m).total_s) for m in ("sync", "event", "event-inorder")}
    return out


def table(rows: list[dict]) -> str:
    """Each system's two runs side by side: seconds, verifications, sends verified, and whether
    the schedule and its prices are identical."""
    head = ("| system | build s again | build s once | verifications again | once | sends verified again | once "
            "| same schedule | same prices |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for label in dict.fromkeys(r["system"] for r in rows):
        a, o = ({r["mode"]: r for r in rows if r["system"] == label}.get(m) for m in MODES)
        if a is None or o is None:
            continue
        lines.append("| " + " | ".join([
            label, cell(a["build_s"], ".1f"), cell(o["build_s"], ".1f"), str(a["verifications"]),
            str(o["verifications"]), f"{a['sends_verified']:,}", f"{o['sends_verified']:,}",
            str(a["digest"] is not None and a["digest"] == o["digest"]),
            str(a["prices"] is not None and a["prices"] == o["prices"])]) + " |")
    return "\n".join(lines)


def main(only: str, limit_s: float, objective: str | None, alpha: float) -> list[dict]:
    """Both runs of each system, each in a fresh process; each run printed as it ends, then the table."""
    specs = [(label, mode, limit_s, objective, alpha) for label in only.split(",") for mode in MODES]
    rows = each_in_a_fresh_process(
        _run, specs, lambda r: f"{r['system']} {r['mode']}: build {r['build_s']:.1f} s, {r['verifications']} "
                               f"verifications ({r['sends_verified']:,} sends), prices {r['prices']}")
    print(table(rows))
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="H100 4-NIC x2", help="system labels, comma-separated (bench_allreduce's)")
    parser.add_argument("--time-limit", type=float, default=1800, help="each run's limit in seconds")
    parser.add_argument("--objective", default=None, help="tree packing's objective parameter (default sync+event)")
    parser.add_argument("--alpha", type=float, default=0.0, help="every link's latency in seconds (default 0)")
    args = parser.parse_args()
    main(args.only, args.time_limit, args.objective, args.alpha)
