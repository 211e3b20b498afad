"""DGX-2 x2's rooted reduce, packed with and without slack on its NVSwitch ports, 1 GB at alpha 0.

Run: ``python benchmarks/bench_reduce_port_slack.py`` (``--pieces 1600,3200``,
``--nvswitch 125e9,110e9``). Tree packing's greedy forest grown depth-first (the ``growth``
parameter; Zhao et al., "ForestColl", arXiv 2402.06787, Section 5.2) is packed on DGX-2 x2 with
its NVSwitch links at ``--nvswitch`` bytes/s, emitted at ``--pieces`` pieces, verified on the
real instance (125 GB/s) and priced there under ``event``, ``event-inorder`` and ``sync``; each
row gives the times over the bound (10 ms) and the most pieces of a piece set that one
switch-to-GPU link carries (8 a set is 80 % of that link's time at the bound, 10 is 100 %).

What it shows: at 125 GB/s the packing loads seven switch-to-GPU links (GPUs 2-5, 18, 20, 21)
with 10 pieces a set, as busy as the InfiniBand links that set the bound. A switch's out-port
serves what reaches it first (``event``, ``docs/cost-models.md``) while each GPU sends in the
order listed (``link_order = "program"``), so such a port with no idle time to spare forwards a
piece its GPU needs later ahead of one it needs now, and the GPU's links wait (the
InfiniBand links then idle part of the time under ``event``, none in order). Packed at 110 GB/s
no port carries more than 8 a set and ``event`` equals ``event-inorder`` (at 1,600 / 3,200
pieces 1.0206 / 1.0103 under both, against 1.0564 / 1.0448 and 1.0286 / 1.0143 at 125 GB/s).
The producer now holds such slack back by a rule from the cut analysis
(``solvers/packing/port_slack.py``: 112.5 GB/s here) and keeps it where it prices least.
"""

from __future__ import annotations

import argparse
from collections import Counter

from bench_allreduce import _listed, instance_of
from switched_systems import systems

BOUND_S = 0.01  # DGX-2 x2 rooted reduce at 1 GB: 8 InfiniBand links of 12.5 GB/s carry chassis 1's sum


def row(nvswitch: float, pieces: int) -> dict:
    """The depth-first forest packed at ``nvswitch`` bytes/s a NVSwitch link, emitted at
    ``pieces``, priced on the real DGX-2 x2 (None times when it does not verify there)."""
    from collsynth.solvers import pipeline
    from collsynth.solvers.producers import Options
    from collsynth.tens import cost_models
    from collsynth.tens.verify import verify

    (_, generator, params), = systems("DGX-2 x2")
    real = instance_of(generator, params, "reduce")
    packed_on = instance_of(generator, {**params, "nvswitch_bandwidth": nvswitch}, "reduce")
    options = Options(time_limit=300, params={"growth": "depth-first", "pieces": pieces})
    _, sched = pipeline.run_lean(packed_on, "tree-packing", options)
    s = _listed(sched, packed_on)
    ok = verify(s, real) is None
    switches = set(real.topology.switches)
    port = Counter(int(d) for a, d in zip(s.src, s.dst) if int(a) in switches)
    out = {"nvswitch": nvswitch, "pieces": pieces, "verified": ok, "most_a_set": max(port.values()) / pieces}
    for model in ("event", "event-inorder", "sync"):
        out[model] = cost_models.price(s, real, model).total_s / BOUND_S if ok else None
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pieces", default="1600,3200")
    p.add_argument("--nvswitch", default="125e9,110e9")
    a = p.parse_args(argv)
    print("nvswitch packed at | pieces | most a set on a port | event | event-inorder | sync (over the bound)")
    for bw in (float(x) for x in a.nvswitch.split(",")):
        for pieces in (int(x) for x in a.pieces.split(",")):
            r = row(bw, pieces)
            times = " | ".join("refused" if r[m] is None else f"{r[m]:.4f}" for m in ("event", "event-inorder", "sync"))
            print(f"{bw / 1e9:.0f} GB/s | {pieces} | {r['most_a_set']:.2f} | {times}", flush=True)


if __name__ == "__main__":
    main()
