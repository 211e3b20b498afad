"""Allreduce of 1 GB on DGX H100 boxes: switches that reduce (NVLS in the box, optionally SHARP
on the rails) against the best schedule without switch reduction.

Run: ``python benchmarks/bench_switch_compute.py`` (``--boxes 1,2,8`` to choose; 64 boxes take
minutes). Each cell runs in its own process through the normal pipeline (verified, then
priced; ``event-inorder`` priced on the same verified schedule). Rows:

- ``nvls`` (one box) / ``nvls-tree`` on ``dgx_h100 nvls=true`` (and ``sharp=true``: the rails
  reduce too), with the instance's bounds (the ``reducing-cut`` argument among them);
- the best of ``tree-packing``, ``ring``, ``nccl-ring`` and ``nccl-tree`` on ``dgx_h100`` (no switch
  reduction), per model.

The ratio columns are the no-reduction time over the reducing one under each model. ``runtime``
prices with the switch-channel calibration fitted to NCCL's H100 figures
(``instances/calibrations/h100-nvls.json``, ``tens/switch_runtime.py``): one box only (``-``
across boxes: no figure calibrates the rails).

``--kinds``: reduce-scatter and allgather of 1 GB on ``dgx_h100`` with and without NVLS (and
SHARP rails): the instance's event and sync bounds, which say whether the switch can help.
``--ilp [SECONDS]``: the TEN ILP with reducing switches (``ten-ilp-combining``) on the small
systems of ``tests/test_ten_ilp_reducing_switch.py`` and the 2x4 ones: its optimum, what it
proved, and the ``timesteps`` bound.
"""

from __future__ import annotations

import argparse

import pytest
from fresh_process import cell, each_in_a_fresh_process

M = 1e9
BASELINES = ("tree-packing", "ring", "nccl-ring", "nccl-tree")
MODELS = ("sync", "event", "event-inorder", "runtime")


def _cell(args) -> dict:
    boxes, nvls, sharp, producer = args
    from collsynth.instances.generators import build
    from collsynth.instances.instance import make_instance
    from collsynth.solvers import pipeline
    from collsynth.solvers.producers import Options
    from collsynth.tens.cost_models import price

    params = {"nodes": boxes, "nvls": nvls, **({"sharp": True} if sharp else {})}
    inst = make_instance(build("dgx_h100", params), "allreduce", message_bytes=M)
    row, sched = pipeline.run(inst, producer, Options(time_limit=1800))
    out = {"boxes": boxes, "producer": producer, "sharp": sharp, "verified": row["verified"],
           "message": row["message"], "bound_event": row.get("lower_bound_event_s"), "bound_sync": row["lower_bound_s"],
           "sync": row["time_sync_s"], "event": row["time_event_s"], "sends": len(sched) if sched is not None else 0}
    out["event-inorder"] = price(sched, inst, "event-inorder").total_s if row["verified"] else None
    out["runtime"] = _runtime(sched, inst) if row["verified"] else None
    return out


def _runtime(sched, inst) -> float | None:
    """The ``runtime`` price under the switch-channel calibration fitted to NCCL's H100 figures
    (``instances/calibrations/h100-nvls.json``); None where it has no share for a link class
    (the rails: no multi-box figure calibrates them)."""
    from pathlib import Path

    from collsynth import InputError
    from collsynth.tens.cost_models import price

    cal = Path(__file__).resolve().parents[1] / "instances" / "calibrations" / "h100-nvls.json"
    try:
        return price(sched, inst, "runtime", calibration=cal).total_s
    except InputError:
        return None


def _best(rows: list[dict], model: str) -> tuple[float | None, str]:
    have = [(r[model], r["producer"]) for r in rows if r["verified"] and r[model] is not None]
    return min(have) if have else (None, "-")


def table(cells: list[dict]) -> str:
    """One line per (boxes, reducing schedule): its times, the best no-reduction times, ratios."""
    head = ("| boxes | schedule | verified | event bound ms | sync ms | event ms | in-order ms | runtime ms | "
            "best no-reduction sync / event / in-order / runtime ms (producer) | ratio sync | ratio event | "
            "ratio in-order | ratio runtime |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in (c for c in cells if c["producer"] not in BASELINES):
        base = [c for c in cells if c["producer"] in BASELINES and c["boxes"] == r["boxes"]]
        best = {m: _best(base, m) for m in MODELS}
        ratio = [cell(best[m][0] / r[m] if best[m][0] and r[m] else None, ".3f") for m in MODELS]
        name = r["producer"] + (" (SHARP rails)" if r["sharp"] else "")
        lines.append("| " + " | ".join([
            str(r["boxes"]), name, str(r["verified"]), cell(r["bound_event"] and r["bound_event"] * 1e3, ".4f"),
            *(cell(r[m] and r[m] * 1e3, ".4f") for m in MODELS),
            " / ".join(cell(best[m][0] and best[m][0] * 1e3, ".4f") for m in MODELS)
            + f" ({', '.join(sorted({best[m][1] for m in MODELS if best[m][0] is not None}))})", *ratio]) + " |")
    return "\n".join(lines)


def main(boxes: list[int]) -> list[dict]:
    """Every cell for the box counts ``boxes``, each in a fresh process."""
    specs = []
    for k in boxes:
        specs.append((k, True, False, "nvls" if k == 1 else "nvls-tree"))
        if k > 1:
            specs.append((k, True, True, "nvls-tree"))
        specs += [(k, False, False, p) for p in BASELINES]
    cells = each_in_a_fresh_process(_cell, specs, lambda r: f"{r['boxes']} boxes {r['producer']}"
                                    f"{' sharp' if r['sharp'] else ''}: verified={r['verified']} {r['message'] or ''}")
    print(table(cells))
    return cells


def kinds_table(boxes: list[int]) -> str:
    """Reduce-scatter and allgather bounds (event / sync, ms) with and without switch sums."""
    from collsynth.instances.generators import build
    from collsynth.instances.instance import make_instance
    from collsynth.tens.bounds import instance_bounds

    lines = ["| boxes | kind | plain event / sync ms | NVLS event / sync ms | NVLS + SHARP event / sync ms |",
             "|---|---|---|---|---|"]
    for k in boxes:
        for kind in ("reduce_scatter", "allgather", "allreduce"):
            got = []
            for params in ({}, {"nvls": True}, {"nvls": True, "sharp": True}):
                if k == 1 and "sharp" in params:
                    got.append("-")
                    continue
                b = instance_bounds(make_instance(build("dgx_h100", {"nodes": k, **params}), kind, message_bytes=M))
                got.append(f"{b.event.value * 1e3:.4f} / {b.sync.value * 1e3:.4f} ({b.event.source})")
            lines.append(f"| {k} | {kind} | " + " | ".join(got) + " |")
    return "\n".join(lines)


def _ilp_cases():
    """(label, instance) of the TEN ILP's small systems with reducing switches."""
    import importlib.util
    import pathlib

    from collsynth.instances.instance import make_instance

    path = pathlib.Path(__file__).resolve().parents[1] / "tests" / "test_ten_ilp_reducing_switch.py"
    spec = importlib.util.spec_from_file_location("ilp_cases", path)
    t = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(t)
    return [("4-GPU box, reducing switch, allreduce", t.box()),
            ("4-GPU box, forwarding switch, allreduce", t.box(reduce=False)),
            ("4-GPU box, reducing switch, reduce-scatter", t.box("reduce_scatter")),
            ("4-GPU box, forwarding switch, reduce-scatter", t.box("reduce_scatter", reduce=False)),
            ("2x2, box switches on a reducing top switch", make_instance(t.two_level(2), "allreduce")),
            ("2x3, box switches on a reducing top switch", make_instance(t.two_level(3), "allreduce")),
            ("2x4, box switches on a reducing top switch (4 NICs)", make_instance(t.two_level(4, 4), "allreduce")),
            ("2x2, reducing box switches, SHARP rails", make_instance(t.rails(2, 2, True), "allreduce")),
            ("2x4, reducing box switches, SHARP rails", make_instance(t.rails(2, 4, True), "allreduce")),
            ("2x4, reducing box switches, plain rails", make_instance(t.rails(2, 4, False), "allreduce"))]


def ilp_table(limit: float) -> str:
    """The TEN ILP on :func:`_ilp_cases`: timesteps found, proven (the model's and the
    instance's bound), seconds."""
    import time

    from collsynth.formulations import ten_ilp_combining
    from collsynth.solvers.producers import Options
    from collsynth.solvers.ten.formulation_producers import producer
    from collsynth.tens.bounds import instance_bounds
    from collsynth.tens.verify import verify

    lines = ["| system | timesteps bound (argument) | ILP timesteps | verified | status | model bound | wall s |",
             "|---|---|---|---|---|---|---|"]
    for label, inst in _ilp_cases():
        b = instance_bounds(inst).timesteps
        t0 = time.perf_counter()
        o = producer(ten_ilp_combining).run(inst, Options(time_limit=limit, params={"lp_bound": False}))
        ok = o.schedule is not None and verify(o.schedule, inst) is None
        lines.append(f"| {label} | {b.value} ({b.source}) | {o.objective} | {ok} | {o.status} | "
                     f"{o.extra.get('model_bound', o.bound)} | {time.perf_counter() - t0:.1f} |")
        print(lines[-1], flush=True)
    return "\n".join(lines)


@pytest.mark.benchmark
def test_bench_switch_compute():
    cells = main([1, 2])
    one = next(c for c in cells if c["producer"] == "nvls")
    best = min(c["event"] for c in cells if c["boxes"] == 1 and c["producer"] in BASELINES)
    assert one["verified"] and best / one["event"] >= 1.25 and one["event"] <= one["bound_event"] * 1.01


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boxes", default="1,2,8", help="comma-separated box counts, e.g. 1,2,8,64")
    parser.add_argument("--kinds", action="store_true", help="reduce-scatter / allgather bounds with and without NVLS")
    parser.add_argument("--ilp", type=float, nargs="?", const=600.0, default=None,
                        help="the TEN ILP on small systems with reducing switches, SECONDS per system (default 600)")
    args = parser.parse_args()
    boxes = [int(x) for x in args.boxes.split(",")]
    if args.kinds:
        print(kinds_table(boxes))
    elif args.ilp is not None:
        print(ilp_table(args.ilp))
    else:
        main(boxes)
