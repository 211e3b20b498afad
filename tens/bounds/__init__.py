"""Every lower bound the project reports, per cost model, each saying which argument proved it.

A bound is a :class:`Bound` record: its value (``None`` when it was not computed, with
``note`` saying why -- never 0 or a guess), its units and cost model, its ``source`` (the
argument) and its ``witness`` (the node set ``S``, the node, or the holder and target that
proved it). :func:`instance_bounds` computes all of them for an instance, once per process.

Models (what a bound of that model bounds)
------------------------------------------
``timesteps``
    TEN timesteps (Won et al., TACOS, 2023, Section IV) of every schedule that respects the TEN's
    link capacity: a send of (a piece of) a chunk over link pair ``l`` occupies it for the
    chunk's delay ``k_l`` timesteps, and the pieces occupying ``l`` in any timestep add up to at
    most its ``cap_l`` parallel links (:func:`respects_ten_capacity` checks a schedule). This is
    what the TEN ILP, its LP and the greedy count.
``ten``
    seconds under the TEN cost model (``tens.cost_models.price(..., "ten")``) of every verified
    schedule: a piece of ``y`` bytes occupies a link for ``ceil((alpha + y/b) / f)`` timesteps
    of ``f`` seconds, so pieces smaller than a chunk may be faster than whole chunks.
``event``
    seconds under the congestion-aware event simulation of every verified schedule.
``sync``
    seconds under the synchronous alpha-beta model (the papers' model) of every verified
    schedule sent on links (``routing = "links"``); ``Bounds.sync_routed`` of those routed on
    shortest paths, whose sends cross a switch in the step they leave (``drain`` and ``ramp``
    do not hold for them); the ``steps`` bound (hop distance) bounds the steps of schedules
    sent on links.

Arguments (``source``)
----------------------
``distance``
    a needed chunk travels from its nearest holder (combining: from every contributor) to
    each node that needs it; every link on the way costs its delay (TEN), at least its
    latency ``alpha`` (seconds), or one hop (steps).
``inbound`` / ``outbound``
    the cut argument below for ``S = {v}`` / ``S = V \\ {u}`` (per-node bounds).
``cut``
    for a node set ``S`` the chunks some node in ``S`` needs and no node in ``S`` holds
    (combining: whose result some node in ``S`` needs and some contributor outside ``S``
    supplies) must cross the links entering ``S``; the bound is the largest over all ``S``
    of the time those links need to carry them (plus the way the last of them still has to go
    inside ``S``), found by parametric min-cut (:func:`cut_search`). It generalises the
    per-node bounds and the per-link one (a set entered by a single link: a bridge).
``arrivals``
    (TEN timesteps) a node takes in at most its in-links' capacity per timestep, and each
    chunk it needs no earlier than its release: its distance, or, for the chunks that must
    cross into a ball around the node, their rank among what the entering links can carry
    (:func:`arrival_bound`; it generalises ``inbound`` with release times).
``forest``
    (seconds) the exact cut optimum of an allgather, broadcast, reduce-scatter or reduce by
    max-flow (:func:`forest_seconds`; Zhao et al., "ForestColl", arXiv 2402.06787, Section 4):
    the cut argument over every node set ``S``, switches included, searched exactly.
``flow``
    (seconds) the maximum concurrent flow optimum of an all-to-all, scatter or gather by LP
    (:func:`flow_seconds`; Shahrokhi and Matula, J. ACM 1990): every pair's data follows paths
    from its source to its destination and the links carry it all; at least every cut bound
    (a unidirectional 4-ring all-to-all: 6 pair units a link against the best cut's 4), and
    re-proved from the LP's duals so that the solver's tolerance cannot make it too large.
``partition``
    (every model) a single allreduce when no switch reduces: for node sets ``R_1 .. R_k`` holding
    every compute node, the bytes entering them are at least ``M`` each and ``2 (k - 1) M`` in
    all (the one-way gossip count; Patarasuk and Yuan, J. Parallel Distrib. Comput. 69(2),
    2009, on one switch), against what the links entering them deliver
    (:func:`partition_bound`, its module has the proof and two optima by hand). An
    allreduce is also bounded by its reduce-scatter's ``forest`` optimum.
``drain``
    (``sync``, schedules whose sends are on links) a single allgather, or a reduce-scatter read
    backwards on the transposed links, on boxes of GPUs joined by one switch (or of one GPU
    entered from switches only, a fat tree's host): every step bringing data into a box pays
    its NIC's alpha, so does the step before, what enters last still crosses the box's switch,
    and where the switches feeding the boxes do not copy (a reduce-scatter's do not reduce)
    what enters in a step crossed their incoming links the step before, and was put into the
    fabric by compute nodes in the steps before (at any depth of switches that copy nothing); a
    small linear program per number of such steps (:func:`collsynth.tens.bounds.drain.drain_bound`,
    its module has the proof).
``injections``
    (``sync``, schedules whose sends are on links) a single allreduce on boxes of GPUs (or
    hosts) joined by switches declared to copy nothing: every step bringing data into the boxes
    pays their NICs' alpha, and what crosses into them in a step left them in the steps before,
    so the partition bound's crossings fill a pipeline of two stages; a small linear program
    per number of such steps (:func:`collsynth.tens.bounds.injections.injection_bound`, its
    module has the proof).
``box stages``
    (``sync``, schedules whose sends are on links) the ``injections`` setting with the boxes'
    inside: a byte leaving a box carries a box mate's input only if the mate sent it inside
    the box in an earlier step, and one entering reaches a box mate only over the box's links
    in a later step, unless the mates cross the fabric themselves, at more crossings; a small
    linear program per number of NIC steps (:func:`collsynth.tens.bounds.box_stages.box_stage_bound`,
    its module has the proof).
``group crossings``
    (``sync``, schedules whose sends are on links) the ``box stages`` setting on a fabric whose
    boxes fall in two groups or more (boxes under one leaf switch): every byte position crosses
    between groups both ways around the first delivery after which some group knows every
    input, and such a crossing spends as many steps in the fabric as it has hops between
    switches; a small linear program per number of steps in which the fabric carries something
    (:func:`collsynth.tens.bounds.group_crossings.group_crossing_bound`, its module has the proof).
``ramp``
    (``sync``) a single allgather, a reduce-scatter read backwards on the transposed links, or
    an allreduce by the ``partition`` argument's calls into every GPU: every step pays the
    least alpha, and a node's links from switches carry in a step only
    what reached the switch the step before, so few steps cannot keep them busy; a small
    linear program per number of steps (:func:`collsynth.tens.bounds.ramp.ramp_bound`, its
    module has the proof).
``volume``
    all links at once: every chunk crosses at least as many links as its path from a holder is
    long (and as many as there are nodes needing it), against what all links deliver.
``reducing-cut``
    (seconds) an allreduce on a topology whose switches reduce: every node set splitting the
    GPUs takes in one whole copy of the data, ``M / lambda`` with ``lambda`` the least max-flow
    between two GPUs (:func:`reducing_cut_seconds`); the other arguments hold with reducing
    switches too (a partial sum crossing a cut once carries every contribution behind it).
``combining-arrivals``
    (TEN timesteps) a combining collective: a node takes in a chunk's worth of every result
    it needs no earlier than its farthest contributor's distance, and sends out a chunk's
    worth of every contribution someone else needs no later than its farthest such node's
    distance before the end, at most its links' capacity per timestep
    (:func:`combining_arrivals`; the pipeline fill a GPU behind a switch pays).
``lp``
    the TEN LP relaxation's bound (Won et al., TACOS, 2023, Section V-A, relaxed), passed in
    by the producers (:func:`from_lp`).

Switch nodes (kept, not unwound) neither hold nor need anything: they appear only as the
ends of links, so every argument above holds whether a switch copies or not and whatever it
buffers (each counts what must cross links, never what a switch keeps or receives). When the
hop from a switch to an NPU is instant (topology ``meta["switch_hop"]``, TE-CCL's default,
:func:`collsynth.tens.ten.instant_hops`) a switch's links to NPUs add one timestep less to a
path (its delay minus one), no hop to the step count and no latency to a sync step, so the
``distance`` lengths and the ``cut`` bound's inner distances count them so (:func:`instant_out`);
a link from a switch to a switch is never instant and counts in full.

A pipelined link latency (topology ``meta["latency"]``, TE-CCL's model,
:func:`collsynth.tens.ten.latency_pipelined`) separates a link's occupancy ``k_l`` from its
arrival lag ``k_l + L_l`` (:func:`collsynth.tens.ten.link_latency`): TEN distances are lags
(arrival), the supply of a pair by timestep ``T`` counts the sends whose occupancy ends by
``T - L_l`` (capacity by occupancy; :class:`TimestepSupply`), and the ``ten`` cost model's
pieces occupy ``ceil((y / b_l) / f)`` timesteps with ``f`` the fastest transmission; the
``event`` and ``sync`` models already overlap a link's latency with its next message.

The bandwidth arguments are those of the alpha-beta model's lower bounds (Chan et al., CCPE
2007, Section 3; Zhao et al., NSDI 2025, Section 3: ``T_B* = (N-1)/N M/B``) applied to every
node set rather than to one node.

>>> from collsynth.instances.generators import build
>>> from collsynth.instances.instance import make_instance
>>> ring = build("ring", {"nodes": 6, "bidirectional": False}, bandwidth=1.0, alpha=0.0)
>>> b = instance_bounds(make_instance(ring, "allgather", message_bytes=6.0))
>>> b.timesteps.value, b.timesteps.source, b.sync.value
(5, 'distance', 5.0)

Modules: :mod:`.record` (the :class:`Bound` record), :mod:`.demand` (what must cross into a node
set), :mod:`.supply` (what links deliver, per model), :mod:`.cuts` (per-node bounds, the parametric
min-cut), :mod:`.distances` (distance and volume bounds), :mod:`.arrivals` (arrivals at one node),
:mod:`.instance` (:func:`instance_bounds`), :mod:`.flows` (the concurrent flow bound), :mod:`.timesteps` (the TEN bound and its capacity rule),
:mod:`.partitions` (the allreduce partition bound without in-network reduction), :mod:`.reducing` (allreduce with reducing switches),
:mod:`.drain`, :mod:`.ramp`, :mod:`.injections`, :mod:`.box_stages` and :mod:`.group_crossings` (sync bounds of schedules sent on links through switches).
"""

from __future__ import annotations

from .record import (
    BLOCK_CELLS,
    Bound,
    CUT_BUDGET_S,
    FLOW_S_PER_UNIT,
    MODELS,
    PARTS,
    TEN_SLACK,
    TOL,
    UNITS,
    best,
    from_lp,
    not_computed,
)
from .demand import (
    Arcs,
    Demand,
    arcs_of,
    demand_of,
    distinct_rows,
    instant_out,
    row_blocks,
)
from .supply import (
    EventSupply,
    PieceSupply,
    Supply,
    SyncSupply,
    TimestepSupply,
)
from .cuts import (
    cut_search,
    inner_distance,
    per_node,
)
from .distances import (
    PATH_BATCH,
    crossings,
    distance,
    shortest_paths,
    warm,
)
from .arrivals import (
    ARRIVAL_BUDGET_S,
    ARRIVAL_CELLS,
    arrival_bound,
)
from .instance import (
    Bounds,
    COMBINING_ARGUMENTS,
    FOREST_CELLS,
    FOREST_KINDS,
    forest_seconds,
    instance_bounds,
)
from .partitions import (
    partition_bound,
    region_time,
)
from .flows import (
    FLOW_CELLS,
    flow_seconds,
)
from .reducing import (
    ARRIVALS_CELLS,
    REDUCING_CUT_CELLS,
    combining_arrivals,
    reducing_cut_seconds,
)
from .timesteps import (
    distance_bound,
    lower_bound,
    respects_ten_capacity,
    timesteps_bound,
)

__all__ = [
    "BLOCK_CELLS",
    "Bound",
    "CUT_BUDGET_S",
    "FLOW_S_PER_UNIT",
    "MODELS",
    "PARTS",
    "TEN_SLACK",
    "TOL",
    "UNITS",
    "best",
    "from_lp",
    "not_computed",
    "Arcs",
    "Demand",
    "arcs_of",
    "demand_of",
    "distinct_rows",
    "instant_out",
    "row_blocks",
    "EventSupply",
    "PieceSupply",
    "Supply",
    "SyncSupply",
    "TimestepSupply",
    "cut_search",
    "inner_distance",
    "per_node",
    "PATH_BATCH",
    "crossings",
    "distance",
    "shortest_paths",
    "warm",
    "ARRIVAL_BUDGET_S",
    "ARRIVAL_CELLS",
    "arrival_bound",
    "Bounds",
    "COMBINING_ARGUMENTS",
    "FOREST_CELLS",
    "FOREST_KINDS",
    "forest_seconds",
    "instance_bounds",
    "partition_bound",
    "region_time",
    "FLOW_CELLS",
    "flow_seconds",
    "ARRIVALS_CELLS",
    "REDUCING_CUT_CELLS",
    "combining_arrivals",
    "reducing_cut_seconds",
    "distance_bound",
    "lower_bound",
    "respects_ten_capacity",
    "timesteps_bound",
]
