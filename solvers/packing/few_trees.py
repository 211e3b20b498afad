"""A forest of at most ``k`` trees a root, for runtimes whose thread blocks are scarce.

ForestColl packs the optimum's ``k`` out-trees per root (Zhao et al., "ForestColl:
Throughput-Optimal Collective Communications on Heterogeneous Network Fabrics", arXiv
2402.06787, Section 4: the optimum ``(tau, k)``; 13 a root on 2x8 A100), and its published
programs run a fixed few (Section 6: ``k`` = 1 or 2, one thread block per tree and edge). An
MSCCL runtime runs each of a GPU's thread blocks on a streaming multiprocessor, so a forest of
many equally loaded trees runs more thread blocks than the GPU has SMs (or shares them, each
at one block's copy rate): under the calibrated ``runtime`` model our 13-tree allreduce on 2x8
A100 prices at 79 GB/s where ForestColl's ``k`` = 1 programs price at 108. :func:`limited`
packs the same collective with the tree count held at ``k`` a root (ForestColl's fixed-``k``
search for the least time at ``k``, :func:`.forests.choose_k`, then the same greedy packing,
pipelining and verification as the ``tree-packing`` producer), slightly slower under the
idealised models (``7/6`` against ``15/13`` units a shard on 2x8 A100: 1.1 %) and far fewer
thread blocks. :func:`runtime_choice` offers those forests beside a schedule to the runtime
model's export choice (:func:`collsynth.tens.export_choice.chosen_export` with
``alternatives``): the cheapest program under a calibration is the one written and priced.
"""

from __future__ import annotations

from ...instances import Instance
from ...tens.verify import check
from ..producers import Options, Unsupported

__all__ = ["KS", "limited", "trees_per_root", "runtime_choice"]

KS = (1, 2)  # the tree counts a root tried: ForestColl's published programs run k = 1 or 2 (Section 6)


def limited(instance: Instance, k: int, time_limit: float | None = None):
    """The ``tree-packing`` producer's schedule of ``instance`` with at most ``k`` trees a root
    in every forest (the ``trees`` parameter; where its two-level trees doubled the count, the
    greedy packing instead), verified (:func:`collsynth.tens.verify.check`). Raises
    :class:`~collsynth.solvers.producers.Unsupported` when no packing holds to ``k``."""
    from .producer import run
    for shape in ("auto", "greedy"):
        out = run(instance, Options(time_limit=time_limit, params={"trees": k, "shape": shape}))
        if max(trees_per_root(out.extra["forests"])) <= k:
            check(out.schedule, instance)
            return out.schedule
    raise Unsupported(f"tree-packing: no packing of {k} trees a root was found")


def trees_per_root(forests: list[dict]) -> list[int]:
    """Trees a root of each forest of a ``tree-packing`` row (its ``forests`` records).

    >>> trees_per_root([{"trees_per_shard": 1}, {"trees_per_shard": 2}])
    [1, 2]
    """
    return [int(f["trees_per_shard"]) for f in forests]


def runtime_choice(schedule, instance: Instance, calibration, alternatives=()):
    """The program the runtime model's export choice writes for ``schedule`` or one of
    ``alternatives`` (schedules of the same instance, e.g. :func:`limited` forests) under
    ``calibration`` (a :class:`~collsynth.tens.cost_models.runtime.Calibration`): every grid,
    layout (fitted within the calibration's SMs where it gives them) and receive-and-send
    choice of every schedule, the cheapest that reads back and verifies
    (:class:`~collsynth.tens.export_choice.Export`, ``source`` naming the schedule)."""
    from ...tens.cost_models.runtime import seconds_under
    from ...tens.export_choice import chosen_export
    layouts = ("links", "trees", "fitted") if calibration.sms else ("links", "trees")
    return chosen_export(schedule, instance, seconds_under(calibration, instance), layouts=layouts,
                         fuses=(False, True), max_thread_blocks=calibration.sms, alternatives=alternatives)
