"""Allreduce of 1 GB on DGX H100 boxes: switches that reduce (NVLS in the box, optionally SHARP
on the rails) against the best schedule without switch reduction.

Run: ``python benchmarks/bench_switch_compute.py`` (``--boxes 1,2,8`` to choose; 64 boxes take
minutes). Each cell runs in its own process through the normal pipeline (verified, then
priced; ``event-inorder`` priced on the same verified schedule). Rows:

- ``nvls`` (one box) / ``nvls-tree`` on ``dgx_h100 nvls=true`` (and ``sharp=true``: the rails
  reduce too), with the instance's bounds (the ``reducing-cut`` argument among them);
- the best of ``tree-packing`` and ``ring`` on ``dgx_h100`` (no switch reduction), per model.

The ratio columns are the no-reduction time over the reducing one under each model.
"""

from __future__ import annotations

import argparse

import pytest
from fresh_process import cell, each_in_a_fresh_process

M = 1e9
BASELINES = ("tree-packing", "ring")
MODELS = ("sync", "event", "event-inorder")


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
    return out


def _best(rows: list[dict], model: str) -> tuple[float | None, str]:
    have = [(r[model], r["producer"]) for r in rows if r["verified"] and r[model] is not None]
    return min(have) if have else (None, "-")


def table(cells: list[dict]) -> str:
    """One line per (boxes, reducing schedule): its times, the best no-reduction times, ratios."""
    head = ("| boxes | schedule | verified | event bound ms | sync ms | event ms | in-order ms | best no-reduction "
            "sync / event / in-order ms (producer) | ratio sync | ratio event | ratio in-order |")
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
            + f" ({', '.join(sorted({best[m][1] for m in MODELS}))})", *ratio]) + " |")
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


@pytest.mark.benchmark
def test_bench_switch_compute():
    cells = main([1, 2])
    one = next(c for c in cells if c["producer"] == "nvls")
    best = min(c["event"] for c in cells if c["boxes"] == 1 and c["producer"] in BASELINES)
    assert one["verified"] and best / one["event"] >= 1.25 and one["event"] <= one["bound_event"] * 1.01


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boxes", default="1,2,8", help="comma-separated box counts, e.g. 1,2,8,64")
    main([int(x) for x in parser.parse_args().boxes.split(",")])
