"""A packed forest: the trees of one non-combining collective and what they stand for.

Zhao et al., "ForestColl: Throughput-Optimal Collective Communications on Heterogeneous
Network Fabrics" (arXiv 2402.06787), Section 4: every collective the producer builds is made of
allgather or broadcast forests (a reduction packs one on the transposed topology and reverses
it in time; an allreduce is a reduce-scatter then an allgather). :class:`Forest` holds one such
forest; :func:`plan` says which forests a collective is made of, :func:`part_instance` which
collective a forest alone makes, and :func:`optimum_seconds` / :func:`packed_seconds` its times.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction

from ...instances import Instance
from ...tens.cut_optimum import Optimum
from .trees import RoutedTree


@dataclass
class Forest:
    """The packed trees of one non-combining collective and what it took to find them."""

    kind: str  # allgather or broadcast
    transposed: bool
    opt: Optimum
    k: int  # trees per shard packed (the optimum's own k, or fewer at a slightly longer time)
    tau: Fraction  # the time per shard the packed trees take (opt.tau when k is the optimum's)
    unit_bw: float
    trees: list[RoutedTree]
    flows: int
    seconds: dict
    order: str = "id"  # the root order the greedy packing grew the trees in (:mod:`.orders`)
    orders_tried: list = field(default_factory=list)
    shape: str = "greedy"  # or "two-level" (:mod:`.twolevel`) or "rings" (:mod:`.rings`)
    stopped: list = field(default_factory=list)  # notes on models stopped by their time limits (outcome unknown)
    door: str = ""  # ring trees: the door rule they enter the boxes by (:func:`.rings.door`)
    shapes_tried: list = field(default_factory=list)  # the candidates :func:`.forests.by_shape` priced (:mod:`.shapes`)
    alternatives: list = field(default_factory=list)  # ring trees by the other door rules (:func:`.forests.by_shape`)
    shape_objective: str = ""  # the models the shape was chosen for (the objective parameter), when it was priced
    cuts: tuple | None = None  # piece edges at its run's pieces (:mod:`.fill`); None: equal pieces
    staggered: bool = False  # a rooted forest emitted with its shallower trees taking more pieces (:mod:`.staggered`)
    fill: list = field(default_factory=list)  # the candidates :mod:`.fill` priced (a reduction, an allreduce's half)
    on_share: bool = False  # packed on its half's share of every link (:mod:`.capacity_split`)
    held_back: str = ""  # packed with the links off the cut at this share (:mod:`.port_slack`; its opt and tau in
    # that network's finer units, the same seconds)
    compact: object = None  # the same trees as the first box's trees and the box shifts moving them
    # (:class:`~collsynth.tens.pipelined_trees.PipelinedTrees` at one piece, :mod:`.translated`), where grown so


def plan(kind: str) -> list[tuple[str, bool]]:
    """The forests a collective is made of: ``(allgather | broadcast, transposed)`` in order."""
    return {"allgather": [("allgather", False)], "broadcast": [("broadcast", False)],
            "reduce_scatter": [("allgather", True)], "reduce": [("broadcast", True)],
            "allreduce": [("allgather", True), ("allgather", False)]}[kind]


def part_instance(instance: Instance, f: Forest) -> Instance:
    """The instance of the collective ``f`` alone makes: the instance itself, except for an
    allreduce, whose forests are its reduce-scatter and its allgather (:func:`plan`; Zhao et
    al., "ForestColl", arXiv 2402.06787, Section 4: allreduce as reduce-scatter + allgather)."""
    kind = {("allgather", False): "allgather", ("allgather", True): "reduce_scatter",
            ("broadcast", False): "broadcast", ("broadcast", True): "reduce"}[(f.kind, f.transposed)]
    coll = instance.collective
    return instance if coll.kind == kind else replace(instance, collectives=(replace(coll, kind=kind),))


def optimum_seconds(instance: Instance, f: Forest) -> float:
    """The forest's cut optimum in seconds for the instance's data (``c`` chunks per root)."""
    coll = instance.collective
    return f.opt.seconds(coll.chunk_bytes * coll.chunks_per_node, f.unit_bw)


def packed_seconds(instance: Instance, f: Forest) -> float:
    """The packed trees' bandwidth time: the optimum stretched by ``tau_packed / tau``."""
    return float(optimum_seconds(instance, f) * f.tau / f.opt.tau) if f.opt.tau else 0.0
