"""The tree-packing producer: throughput-optimal pipelined trees (ForestColl) as a schedule.

Zhao et al., "ForestColl: Throughput-Optimal Collective Communications on Heterogeneous
Network Fabrics" (arXiv 2402.06787), Sections 4-5: the optimum ``(tau, k)`` by the cut
condition (:mod:`collsynth.tens.cut_optimum`), switches and other relays removed by edge
splitting (:mod:`.splitting`), ``k`` out-trees per root packed on the compute nodes
(:mod:`.trees`) and mapped back to routes through the switches. Each tree carries its share of
its root's data (``1 / k`` per copy), cut into ``pieces`` pipeline pieces per chunk sent hop by
hop: the ``q``-th piece crosses the ``h``-th hop of its route below the root in step ``q + h``,
so a switch forwards in the step after a piece arrived and switch hops stay switch hops (the
verifier and the cost models see the real routes). Every tree has its own pieces, so no two
trees share a piece anywhere.

The FIFO ``event`` model serves each link's messages in the order they became ready, so a GPU's
own pieces (ready at once) leave before any it relays, and a piece relayed by several GPUs waits
behind each one's own: trees with at most one relay (:mod:`.twolevel`) are used where they fit
the optimum, else arcs of Hamiltonian rings (:mod:`.rings`, whose links never starve) where the
links decompose into them, else the greedy packing in the root order whose schedule prices
least under ``event`` (:mod:`.orders`). Ring trees are deeper, so slower to fill under ``sync``
and ``event-inorder``: at alpha 0 the rings by each door rule and the greedy packing, where it
needs no flow-tested growth, are priced as finished schedules and the least under the run's
objective is kept (:func:`.forests.by_shape`, :mod:`.shapes`).

Allgather and broadcast are packed on the topology; reduce-scatter and reduce on the transposed
topology and time-reversed (:func:`collsynth.tens.schedule.reverse`); allreduce is
reduce-scatter then allgather, each shard's allgather overlapped on its reduction piece by piece,
the two forests chosen together (:mod:`.overlap`). Combining collectives
through switch nodes are verified route by route (a switch forwards, GPUs reduce;
:mod:`collsynth.tens.verify`), except with instant switch hops or a pipelined latency (refused).
Where a switch reduces, the routes of one tree that reach it in one step share that arrival
(:func:`.tree_hops.tree_hops`): the reduction's partial sums leave it once, and the allreduce's result
is multicast from it (refused where the switch does not multicast); where a switch multicasts
but does not sum, the partials meeting in it in one step all head for one next hop.

The producer is split by idea: :mod:`.packed` (a forest and what it stands for),
:mod:`.forests` (packing one forest by shape), :mod:`.emission` (its pipelined sends and
price), :mod:`.pieces_choice` and :mod:`.latency_choice` (each forest's depth), :mod:`.joint`
(an allreduce's halves chosen together) and :mod:`.compact_form` (trees plus the pipeline
rule). This module is the entry point: :func:`run`, its checks and its parameters.
"""

from __future__ import annotations

import time
from fractions import Fraction

from ... import limits
from ...instances import Instance
from ...instances.size import topology_field
from ...limits import TimeLimitReached, TooBig
from ...tens.schedule import Schedule
from ...tens.ten import instant_hops, latency_pipelined
from ..producers import Options, Outcome, Param, Producer, Unsupported
from . import estimate, fill, forests, incumbent, rings, split_first, split_form
from .compact_form import EXPLICIT_PIECES, compact_forest, kept_as_trees, planned, run_compact
from .emission import (DEPTH_FACTOR, PIECES_FLOOR, PRICE_MODELS, SEND_BUDGET, auto_pieces, check_sends, emit,
                       pipelined, price_pieces, refuse_small_pieces, with_header)
from .forest_record import forest_record
from .forests import (CLOSE_ENOUGH, MAX_TREES, TWO_LEVEL_MULTIPLES, by_root_order, by_shape, choose_k, forest, greedy,
                      ring_forest, ring_forests, shallow, two_level)
from .joint import SPLIT_PAIR, SPLIT_SHARE, certified_price, certified_schedule, choose_halves, listed
from .latency_choice import ONE_MODEL_BUDGET, PRICE_BUDGET, PRICE_SHARE, SLACKS, alternatives, priced_choice
from .overlap import PROBE_PIECES
from .packed import Forest, optimum_seconds, packed_seconds, part_instance, plan
from .pieces_choice import FILL_SENDS, pick
from .run_params import OBJECTIVES, asked_shape, grows_depth_first, objective_models
from .trees import hops_of

KINDS = ("allgather", "broadcast", "reduce_scatter", "reduce", "allreduce")
RETURN_S = 1.0  # an allreduce's choice stops this long before the limit: its kept schedule's return and the
# pipeline's check of its verdict (A100 x2, 1 GB, the default 60 s beside two busy loops, load 17-19: stopped at the
# limit, it returned 1.46 s after it, and the check, due by 1.5 s after, timed out with the schedule found)
_with_header = with_header  # the names tests and benchmarks import from here
_compact_forest = compact_forest

__all__ = ["CLOSE_ENOUGH", "DEPTH_FACTOR", "EXPLICIT_PIECES", "FILL_SENDS", "Forest", "KINDS", "MAX_TREES",
           "OBJECTIVES", "ONE_MODEL_BUDGET", "PARAMS", "PIECES_FLOOR", "PRICE_BUDGET", "PRICE_MODELS", "PRICE_SHARE",
           "PRODUCERS", "SEND_BUDGET", "SLACKS", "SPLIT_PAIR", "SPLIT_SHARE", "TWO_LEVEL_MULTIPLES", "alternatives",
           "auto_pieces", "by_root_order", "by_shape", "check_sends", "choose_k", "emit", "forest", "greedy",
           "optimum_seconds", "packed_seconds", "part_instance", "pick", "pipelined", "plan", "planned",
           "price_pieces", "priced_choice", "ring_forest", "ring_forests", "run", "run_compact", "shallow",
           "two_level", "with_header"]


def _check(instance: Instance) -> None:
    """Refuse (:class:`~collsynth.solvers.producers.Unsupported`) what tree packing does not
    build: concurrent collectives, kinds outside :data:`KINDS`, and a combining collective through
    switches with instant hops or a pipelined latency (its time reversal could not be verified)."""
    if instance.concurrent:
        raise Unsupported("tree-packing takes a single collective, not concurrent ones")
    coll = instance.collective
    if coll.kind not in KINDS:
        raise Unsupported(f"tree-packing implements {', '.join(KINDS)}, not {coll.kind}")
    topo = instance.topology
    wrong = ([f'topology.switch_hop = "instant" (expected "timestep")'] if instant_hops(topo).any() else []) + \
        (['topology.latency = "pipelined" (expected "serial")'] if latency_pipelined(topo) else [])
    if coll.combining and topo.switches and wrong:
        raise Unsupported(f"tree-packing: {coll.kind} through switch nodes with {' and '.join(wrong)}: its time "
                          "reversal forwards a step late and relays under a pipelined latency are not verified; set "
                          "the expected value or unwind the switches")


def _check_piece_bytes(instance: Instance, sched) -> None:
    """Refuse (:func:`.emission.refuse_small_pieces`) a message too small to split into the
    trees' shares and pipeline pieces: a piece under one byte."""
    piece = float(sched.size.min()) * instance.collective.chunk_bytes if len(sched) else 1.0
    refuse_small_pieces(instance, piece, "pieces (--param pieces) or trees (--param trees)")


def run(instance: Instance, options: Options) -> Outcome:
    """Tree packing (module doc; Zhao et al., "ForestColl", arXiv 2402.06787, Sections 4-5): the
    schedule, the cut optimum and what it took; kept as trees plus the pipeline rule
    (:func:`.compact_form.run_compact`) with ``form=compact``, or with ``form=auto`` where fewer
    than :data:`.compact_form.EXPLICIT_PIECES` pieces of explicit sends would fit
    :data:`.emission.SEND_BUDGET`. An allreduce's joint choice keeps its least priced verified
    schedule (:mod:`.incumbent`), returned when the time limit comes later, or when the final
    one would not fit the time left, and not emitted again when it is the final one; a rooted
    reduce keeps its first packed forest so (:func:`.incumbent.first_kept`), returned, marked as
    stopped, when the limit cuts its choice short (:func:`.incumbent.in_time`). Where an
    allreduce's capacity split is expected to win it is priced before the halves are packed
    (:func:`.split_first.priced`), else under a limit the packed halves are kept first
    (:func:`first_pair`), and under a limit the chosen pair is verified on the run's clock
    (:func:`verified_in_time`)."""
    _check(instance)
    if kept_as_trees(instance, options.params):
        return run_compact(instance, options)
    estimate.check(instance)  # refuse before packing what one pipeline piece could not hold
    coll = instance.collective
    deadline = options.timer()
    t0 = time.perf_counter()
    kept, early = None, None
    if coll.kind == "allreduce" and options.params.get("trees") is None:
        kept = incumbent.Kept(objective_models(options))
        deadline = deadline.earlier(RETURN_S)  # the choice stops in time to return what it kept
    try:
        if kept is not None:  # where the split is expected to win, priced before the halves are packed
            early = split_first.priced(instance, options, deadline, kept)
        packed = [forests.forest(instance, kind, transposed, deadline, grows_depth_first(options),
                                 options.params.get("trees"), shape=asked_shape(options))
                  for kind, transposed in plan(coll.kind)]
        packed = [forests.by_shape(instance, f, options, deadline) for f in packed]
        if coll.kind == "reduce" and deadline.at is not None:
            kept = incumbent.first_kept(instance, packed[0], options.params.get("pieces"), objective_models(options))
        return _finish(instance, options, packed, deadline, t0, kept, early)
    except (TimeLimitReached, SystemError) as e:  # the timer inside a compiled call arrives wrapped
        stop = limits.limit_reached(e, deadline, "tree packing")
        if stop is None or kept is None or kept.schedule is None:
            raise
        limits.kept()  # returned at once, with its verdict and prices: the pipeline takes them where they hold
        with limits.shielded():  # its record (a few loops over the trees) is not cut by the timer
            return _outcome(instance, list(kept.pair), kept.pieces, kept.schedule, t0, stopped=str(stop),
                            verdict=kept.certified)


def _finish(instance: Instance, options: Options, packed: list[Forest], deadline, t0: float, kept,
            early: dict | None = None) -> Outcome:
    """:func:`run` after the forests are packed: each forest's pieces (:func:`.pieces_choice.pick`),
    an allreduce's forests chosen together (:func:`.joint.choose_halves`, every verified candidate
    offered to ``kept``), the schedule (:func:`_schedule`). Where the capacity split is expected
    to win (:func:`.split_form.splits_first`) the halves keep their forests at the automatic
    pieces: their fill's programs are not run, and ``early`` holds the split as priced before
    the halves were packed (:func:`.split_first.priced`)."""
    coll = instance.collective
    alpha = float(instance.topology.link_arrays.alpha.max())
    if kept is not None and coll.kind == "allreduce" and kept.schedule is None and deadline.at is not None:
        first_pair(instance, packed, objective_models(options), kept,  # before the halves' own choices
                   options.params.get("pieces") or (PROBE_PIECES if alpha <= 0 else None))
    if kept is not None and split_form.splits_first(instance, packed, options, alpha):  # the halves' fill unused
        picks = [(f, auto_pieces(f.trees, coll.chunks_per_node * len(packed)), None) for f in packed]
    else:
        picks = [pick(instance, f, len(packed), alpha, options, deadline) for f in packed]
    chosen, depths = [p[0] for p in picks], [p[1] for p in picks]
    joint, note = None, ""
    stopped = ""
    if kept is not None and coll.kind == "allreduce":
        chosen, depths, joint, note = choose_halves(instance, options, packed, picks, alpha, deadline, kept, early)
    elif kept is not None:  # a rooted reduce: its first packed forest kept (incumbent.first_kept)
        sends = sum(hops_of(f.trees) * p for f, p in zip(chosen, depths)) * coll.chunks_per_node
        chosen, depths, note, stopped = incumbent.in_time(kept, chosen, depths, sends, deadline)
    as_trees = chosen[0].on_share and options.params.get("form") != "explicit"  # the split kept as trees
    if not as_trees:
        check_sends(chosen, depths, coll.chunks_per_node,
                    "--param pieces" if options.params.get("pieces") else topology_field(instance.topology))
    made = None  # the chosen pair's schedule and verdict where verified_in_time made them
    if coll.kind == "allreduce" and not as_trees and deadline.at is not None:
        chosen, depths, note, made = verified_in_time(instance, chosen, depths, kept, objective_models(options), note)
    sched, verdict = made or _schedule(instance, chosen, depths, kept, as_trees, objective_models(options), deadline)
    if isinstance(sched, Schedule):  # the split kept as trees checks its pieces itself (.split_form)
        _check_piece_bytes(instance, sched)
    return _outcome(instance, chosen, depths, sched, t0, picks, joint, note, stopped, verdict=verdict)


def first_pair(instance: Instance, pair: list[Forest], models: tuple, kept: incumbent.Kept,
               pieces: int | None = None) -> None:
    """Offer ``kept`` the allreduce's packed halves ``pair`` overlapped at ``pieces`` a half
    (the ``pieces`` parameter, or at alpha 0 the joint choice's probe's, :data:`.overlap.PROBE_PIECES`),
    else at each half's first pieces (:func:`.incumbent.first_pieces`: its own depth of least
    latency estimate), fewer
    where both together would be over :data:`.incumbent.FIRST_SENDS` sends, emitted, verified
    and priced under ``models`` (:func:`.joint.certified_price`) before the halves' own
    choices (the latency choice with a latency, the fill's programs at alpha 0), which price
    candidates of their own with nothing kept: so that a limit reached in them returns a
    verified schedule (A100 x2, 1 GB, the default 60 s beside two busy loops: the limit came
    in the latency choice, or at alpha 0 in the fill and the joint choice's first probe, and
    the run returned nothing). Nothing where the pair
    cannot be emitted (the run's own choice says why). The halves overlapped as Zhao et al.,
    "ForestColl", arXiv 2402.06787, Section 4, pipelined as in its Section 5."""
    chunks = instance.collective.chunks_per_node
    pieces = [pieces or incumbent.first_pieces(instance, f, models) for f in pair]
    sends = sum(hops_of(f.trees) * p for f, p in zip(pair, pieces)) * chunks
    if sends > incumbent.FIRST_SENDS:
        pieces = [max(1, p * incumbent.FIRST_SENDS // sends) for p in pieces]
    try:
        check_sends(pair, pieces, chunks)
        certified_price(instance, pair, pieces, models, kept)
    except (TooBig, Unsupported):
        return


def verified_in_time(instance: Instance, chosen: list[Forest], depths: list[int], kept, models: tuple,
                     note: str) -> tuple[list[Forest], list[int], str, tuple | None]:
    """``(forests, pieces, note, made)`` of the allreduce the run returns: ``chosen`` at ``depths``
    emitted, verified and priced here on the run's clock (:func:`.joint.certified_schedule`,
    offered to ``kept``) where ``kept`` holds another verified schedule, so that a limit
    reached while verifying it stops the producer with that one kept (:func:`run`) instead of
    the pipeline's verification, in the grace, timing out with nothing (A100 x2, 1 GB, the
    default 60 s at load 10); ``kept``'s instead where the chosen one does not verify, and
    ``note`` says so (a verified choice stands: its pieces may be the ones asked for, or a fill's,
    priced by the run's own choice). ``made``: the chosen pair's ``(schedule, verdict)`` where
    it verified here, returned as they are (neither emitted, nor verified or priced again);
    else None. Unchanged, ``made`` None, where nothing is kept, or ``kept`` holds
    ``chosen`` itself. Verified before it is priced: ForestColl's pipelined trees (Zhao et al.,
    arXiv 2402.06787, Section 5) checked like any producer's schedule."""
    if kept is None or kept.schedule is None or kept.holds(chosen, depths):
        return chosen, depths, note, None
    made = certified_schedule(instance, chosen, depths, models, kept)
    if made is not None:
        return chosen, depths, note, made[:2]
    if kept.holds(chosen, depths):
        return chosen, depths, note, None
    return list(kept.pair), kept.pieces, (f"the chosen pair at {'/'.join(map(str, depths))} pieces did not verify: "
                                         f"kept the one at {'/'.join(map(str, kept.pieces))} pieces"), None


def _schedule(instance: Instance, chosen: list[Forest], depths: list[int], kept, as_trees: bool = False,
              models: tuple = ("sync",), deadline=None) -> tuple:
    """``(schedule, verdict)``: ``kept``'s schedule and its verdict where it is the one chosen
    (verified and priced by the choice: not emitted again), else, ``as_trees``, the split pair
    kept as trees plus the pipeline rule and its prices (:func:`.split_form.returned`, its delay
    chosen under ``models`` within ``deadline``), else the forests emitted at ``depths``, an allreduce's halves
    overlapped (:func:`.joint.listed`), no verdict."""
    if kept is not None and kept.holds(chosen, depths):
        return kept.schedule, kept.certified
    if as_trees:
        return split_form.returned(instance, chosen, depths, pipelined, models, deadline)
    if len(chosen) == 1:
        return with_header(emit(instance, chosen[0], depths[0]), instance), None
    return listed(instance, chosen, depths, models), None


def _outcome(instance: Instance, chosen: list[Forest], depths: list[int], sched: Schedule, t0: float,
             picks: list | None = None, joint: dict | None = None, note: str = "", stopped: str = "",
             verdict=None) -> Outcome:
    """The run's :class:`~collsynth.solvers.producers.Outcome`: ``sched`` of ``chosen`` at
    ``depths`` and what chose them (``picks``' latency choices, the ``joint`` choice); ``note``:
    why the kept schedule was taken; ``stopped``: the time limit that ended the choice, the kept schedule returned;
    ``verdict``: ``sched``'s verification and prices in the choice (:attr:`Outcome.certified`)."""
    split = all(f.on_share for f in chosen)  # the halves side by side, not in turn
    optimum_s = (max if split else sum)(optimum_seconds(instance, f) for f in chosen)
    extra = {"optimum_s": optimum_s, "optimum_source": "cut condition (ForestColl, arXiv 2402.06787, Section 4)" +
             (" of each half on its share of the links" if split else ""),
             "forests": [forest_record(f, p, optimum_seconds(instance, f), pk[2] if pk else None)
                         for f, p, pk in zip(chosen, depths, picks or [None] * len(chosen))],
             **({"joint_choice": joint} if joint else {})}
    if note or stopped:
        extra["kept_schedule"] = note or f"{stopped}: the least priced verified schedule of the choice so far"
    return Outcome(sched, "constructed", objective=float(sched.num_steps), units="steps", found_by="tree-packing",
                   build_s=time.perf_counter() - t0, extra=extra, **split_form.outcome_fields(verdict),
                   message=f"{stopped}; kept the least priced verified schedule so far" if stopped else "")


def _percent(share: Fraction) -> str:
    """A share as the help strings write it: ``Fraction(1, 1000)`` is ``0.1 %``."""
    return f"{float(share) * 100:g} %"


PARAMS = (
    Param("trees", int, None, "trees per shard (default: the fewest that reach the optimum when its k is at "
                              f"most {MAX_TREES}, else the first k up to {MAX_TREES} within "
                              f"{_percent(CLOSE_ENOUGH - 1)} of the optimum)", low=1, high=4096),
    Param("growth", ("breadth-first", "depth-first"), "breadth-first", "how trees grow while packing"),
    Param("shape", ("auto", "greedy"), "auto", "auto: two-level trees (at most one relay between a root and any "
                                               "node) when they fit the optimum, else arcs of Hamiltonian rings "
                                               "(through GPUs, GPU pairs or a box's switch) within "
                                               f"{_percent(rings.TOLERANCE)} of it (at alpha 0 by each door rule "
                                               f"({', '.join(rings.DOOR_RULES)}) and against the greedy packing "
                                               "where it needs no flow-tested growth, the least priced under the "
                                               "objective kept), else the greedy packing in the root "
                                               "order of least FIFO event price; greedy: the greedy packing in id "
                                               "order"),
    Param("objective", tuple(OBJECTIVES), "sync+event", "what the latency choice (alpha > 0) and the choice "
                                                         "between ring and greedy trees (alpha 0) minimise: the "
                                                         "priced sync + event time (one schedule good in both "
                                                         "models), or one model's alone"),
    Param("form", ("auto", "explicit", "compact"), "auto", "explicit: every send listed; compact: the trees plus "
                                                           "the pipeline rule, verified and priced (sync) as that, on "
                                                           "identical boxes one box's trees and the box shifts; auto: "
                                                           f"compact where fewer than {EXPLICIT_PIECES} pieces of "
                                                           f"explicit sends fit {SEND_BUDGET:,} sends"),
    Param("pieces", int, None, f"pipeline pieces per chunk and tree (default: {DEPTH_FACTOR} per hop of the "
                               f"deepest tree and at least {PIECES_FLOOR}, within a budget of {SEND_BUDGET:,} sends, "
                               f"or up to {FILL_SENDS:,} where a reduction's fill (an allgather's alone in ring trees "
                               f"too, with an objective that includes sync) prices over {_percent(fill.TARGET)} of its "
                               "optimum at alpha 0; "
                               "with link latency, the trees (k or 1 per shard, shallower ones at "
                               f"{' and '.join(f'{m}x' for m in SLACKS)} the time, shortest paths) and pieces of "
                               "least sync + event time, priced where the schedules are small, else estimated)",
          low=1, high=1_000_000),
)


PRODUCERS = [Producer("tree-packing", "tree-packing", run,
                      "ForestColl: k pipelined spanning out-trees per GPU at the cut-condition optimum, "
                      "switches removed by edge splitting", params=PARAMS, estimate=planned)]
