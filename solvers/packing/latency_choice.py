"""With link latency: which trees and how many pipeline pieces (the latency choice).

Zhao et al. ("ForestColl", arXiv 2402.06787, Section 5) pack at the least time alone and pipeline
at one depth whatever the message size; with a latency per step, depth matters too. The
candidates (:func:`alternatives`) are the optimum's trees, one packed tree per shard (also at
looser capacities: shallower) and shortest-path trees; :mod:`.latency` estimates each at each
depth, and where the schedules are small :func:`priced_choice` emits, verifies and prices the
best-estimated pairs and keeps the least priced. Where the message is wide ForestColl's greedy
trees join them only to be priced: the estimates miss FIFO starvation at relays, so those trees
win on a price, never on their estimate alone (:func:`.latency.trusted`).
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from ...instances import Instance
from ...tens.ten import NotSupported, instant_hops
from ..producers import Options, Unsupported
from . import forests, latency
from .emission import PRICE_MODELS, auto_pieces, pipelined, price_pieces, smallest_piece
from .packed import Forest, packed_seconds, part_instance
from .run_params import asked_shape, grows_depth_first, objective_models
from .tree_hops import depth_of
from .trees import hops_of

SLACKS = (Fraction(2), Fraction(4))  # latency candidates: one tree per shard packed at these times its least time
PRICE_BUDGET = 500_000  # sends, over all candidates, the latency choice verifies and prices (a second or two)
ONE_MODEL_BUDGET = 4_000_000  # the same when the objective is one model's (priced under it alone: a few seconds)
WIDE = 10  # the greedy forest is a latency candidate where the bandwidth time is this many times D alpha
GREEDY = "greedy k={}"  # the name of the greedy forest among the latency candidates: listed only to be priced
PRICE_SHARE = 0.25  # of the run's time left, at most, for that pricing (the chosen schedule is priced again after)


def alternatives(instance: Instance, f: Forest, options: Options, deadline, chunks: int,
                 wide: bool = False) -> dict[str, Forest]:
    """The forests the latency choice compares, by name: ``f`` (the optimum's ``k``) and,
    unless ``trees`` is set, one packed tree per shard, the same packed at each of
    :data:`SLACKS` times its least time (shallower; only while a piece of them fits a quarter
    of :data:`PRICE_BUDGET`, so that they are priced) and one shortest-path tree per root
    (:func:`.forests.shallow`); where the message is ``wide`` (:func:`bandwidth_bound`) and
    ``f`` is not already greedy trees, the greedy packing at the optimum's ``k`` (``shape``
    ``greedy``: ForestColl's own trees, which ring trees are deeper than; listed only to be
    priced, :func:`priced_choice`); and for a rooted reduce the optimum's trees made shallow
    (:func:`.forests.shallow_rooted`). Zhao et al. ("ForestColl", arXiv 2402.06787, Section 5) pack at the
    least time alone; with latency, depth matters too."""
    alts = {f"packed k={f.k}": f}
    if options.params.get("trees") is not None:
        return alts
    depth_first, shape = grows_depth_first(options), asked_shape(options)
    one = f
    if f.k != 1:
        try:
            one = alts["packed k=1"] = forests.forest(instance, f.kind, f.transposed, deadline, depth_first, 1,
                                                      shape=shape)
        except Unsupported:
            one = None
    if one is not None and hops_of(one.trees) * chunks <= PRICE_BUDGET // 4:
        for m in SLACKS:
            try:
                alts[f"packed k=1 at {m}x time"] = forests.forest(instance, f.kind, f.transposed, deadline,
                                                                  depth_first, 1, m, shape)
            except Unsupported:
                pass
    alts["shortest paths"] = forests.shallow(instance, f)
    if wide and f.shape != "greedy" and shape == "auto":
        try:  # ForestColl's own trees (Zhao et al., Section 5): shallower than rings, FIFO-friendlier than one tree
            alts[GREEDY.format(f.k)] = forests.forest(instance, f.kind, f.transposed, deadline, depth_first, None,
                                                     shape="greedy")
        except Unsupported:
            pass
    if f.kind == "broadcast" and f.transposed:  # a rooted reduce: its trees within fewer hops
        shallow = forests.shallow_rooted(instance, f, deadline)
        if shallow is not None:
            alts["shallow packed"] = shallow
    return alts


def priced_choice(instance: Instance, alts: list[Forest], cands: list[latency.Candidate], alpha: float,
                  est: latency.Choice, deadline=None, models: tuple = PRICE_MODELS, also: tuple = (),
                  seen: dict | None = None) -> latency.Choice:
    """``est`` (the least estimate), or, where the schedules are small, the (trees, pieces)
    of least priced time summed over ``models``: :func:`.latency.price_order` within
    :data:`PRICE_BUDGET` sends (:data:`ONE_MODEL_BUDGET` for one model), each emitted,
    verified and priced until :data:`PRICE_SHARE` of the time left is used. The estimates
    (module doc of :mod:`.latency`) miss FIFO starvation at relays; ForestColl (Zhao et al.,
    arXiv 2402.06787, Section 5) pipelines at one depth whatever the size. The estimate's
    pick is priced first and kept unless a priced pair is faster; the baseline (candidate 0,
    the optimum's ``k``, at :func:`.emission.auto_pieces`) is priced second, the pairs ``also``
    (:func:`fixed_depth`) next, each priced where it alone fits the budget (A100 x2's
    reduce-scatter at 4 GB under ``event`` alone: its pick, 1,600 pieces, leaves too little of
    the budget for ForestColl's 1,200; where the pick alone is over it, the choice is among
    ``also`` and the pairs that fit after them). Only verified
    pairs are priced, so an estimate's pick that does not verify loses to any that does.
    A candidate listed only to be priced (``priced_only``: ForestColl's greedy trees where
    :func:`alternatives` adds them) wins only priced: where the estimate picks it over the
    budget, the pick is the least estimate among the others (:func:`.latency.trusted`), and
    wherever nothing is priced the choice is that one (TACOS 4x4x2 at 1 GB: the greedy
    trees' estimate at 256 pieces, 877,824 sends, beat the rings' at 512; priced, they starve
    under ``event``, 1.22 times the bound). ``seen``: ``{(index, pieces): {model: s} or None}`` of
    the pairs of ``alts`` verified and priced before, filled and read (:func:`_price_pairs`)."""
    budget = PRICE_BUDGET if len(models) > 1 else ONE_MODEL_BUDGET
    fallback = latency.trusted(est, cands, alpha)  # the choice wherever nothing is priced
    passed = {}
    if fallback is not est and latency.sends(cands[est.index], est.pieces) > budget:
        passed = {"untrusted_pick": {"trees": est.name, "pieces": est.pieces, "why": f"over {budget:,} sends"}}
        est = fallback
    order = latency.price_order(cands, alpha, (est.index, est.pieces), est.baseline, est.model)
    pairs = latency.within_budget(list(dict.fromkeys(order[:2] + list(also) + order[2:])), cands, budget)
    if not pairs and also:  # the pick is over the budget: the fixed-depth pair, where it fits, and what fits after it
        pairs = latency.within_budget(list(dict.fromkeys(list(also) + order[2:])), cands, budget)
    pairs += [p for p in also if p not in pairs and pairs and latency.sends(cands[p[0]], p[1]) <= budget]
    if not pairs:
        return replace(fallback, priced={"schedules": 0, "why": f"the estimate's pick is over {budget:,} sends",
                                         **passed})
    record = {"listed": len(pairs), "budget_sends": budget, "unverified": 0, "below_floor": 0, **passed}
    part = part_instance(instance, alts[0])
    try:
        prices = _price_pairs(part, alts, pairs, models, record, deadline, floors(part, alts, models),
                              {(est.index, est.pieces), est.baseline, *also}, seen)
    except NotSupported as e:  # a model that cannot price this topology (instant switch hops): estimate
        return replace(fallback, priced={**record, "schedules": 0, "why": f"not priced: {e}"})
    if not prices:
        return replace(fallback, priced={**record, "schedules": 0, "why": "no pick was priced"})
    if (est.index, est.pieces) not in pairs:
        record["why"] = f"the estimate's pick is over {budget:,} sends: chosen among the fixed-depth pair and after"
    elif (est.index, est.pieces) not in prices:  # it did not verify: a verified pick beats it
        record["why"] = "the estimate's pick did not verify"
    return _least_priced(est, cands, prices, alpha, record, models)


def floors(part: Instance, alts: list[Forest], models: tuple):
    """``floor(index, pieces)``: a lower bound on the priced time summed over ``models`` of
    ``alts[index]`` cut into ``pieces`` (:func:`.latency.latency_floor` at the least link latency
    and the steps below the roots the trees are emitted at, :func:`.emission.pipelined`); 0 where
    a switch hop is instant (a hop may then share its step) or no link has a latency. The
    pipelined trees are ForestColl's (Zhao et al., arXiv 2402.06787, Section 5)."""
    topo = part.topology
    alpha_min = float(topo.link_arrays.alpha.min()) if len(topo.link_arrays) else 0.0
    if alpha_min <= 0 or instant_hops(topo).any():
        return lambda index, pieces: 0.0
    depth: dict[int, int] = {}
    chunks = part.collective.chunks_per_node

    def floor(index: int, pieces: int) -> float:
        if index not in depth:
            before = pipelined(part, alts[index], 1).before
            depth[index] = int(before.max()) + 1 if len(before) else 1
        return latency.latency_floor(depth[index], pieces * chunks, alpha_min, models)

    return floor


def _price_pairs(part: Instance, alts: list[Forest], pairs: list, models: tuple, record: dict, deadline,
                 floor=None, always=frozenset(), seen: dict | None = None) -> dict:
    """``{(index, pieces): {model: s}}``: the ``pairs`` of ``alts`` that verify, priced in
    order on ``part`` until :data:`PRICE_SHARE` of the time left is used; ``record`` counts
    those that do not verify, those not priced because a piece would be under a byte
    (``under_a_byte``: the producer refuses such a schedule, :func:`.emission.smallest_piece`)
    and says where pricing stopped. A pair whose ``floor(index,
    pieces)`` (:func:`floors`) is above the least priced sum so far is not priced (it cannot be
    chosen; counted in ``record["below_floor"]``), except those in ``always`` (the estimate's
    pick and the baseline, whose prices the row reports): at 64 KB on MI250 x2 the deep trees'
    link latencies alone exceed the shortest-path trees' whole price. ``seen`` (where given):
    ``{(index, pieces): {model: s} or None}`` of the pairs verified and priced so far on ``part``
    (None: it did not verify), each added as it is priced; a pair in it priced under every one
    of ``models`` (or unverified) is taken from it, not verified nor priced again: the same
    trees at the same pieces are the same sends, which verify alike and price the same."""
    stop = deadline.share(PRICE_SHARE) if deadline is not None else None
    prices: dict = {}
    for pair in pairs:
        least = min((sum(p[m] for m in models) for p in prices.values()), default=None)
        if floor is not None and least is not None and pair not in always and floor(*pair) > least:
            record["below_floor"] += 1
            continue
        if stop is not None and stop.expired():
            record["stopped"] = f"the time share for pricing ran out after {len(prices)} of {len(pairs)}"
            break
        if smallest_piece(part, alts[pair[0]], pair[1]) < 1.0:  # the producer would refuse it: never chosen
            record["under_a_byte"] = record.get("under_a_byte", 0) + 1
            continue
        got = _priced_once(part, alts, pair, models, seen)
        if got is None:
            record["unverified"] += 1
        else:
            prices[pair] = got
    return prices


def _priced_once(part: Instance, alts: list[Forest], pair: tuple, models: tuple, seen: dict | None) -> dict | None:
    """``{model: s}`` of ``alts[index]`` at ``pieces`` (``pair``) under ``models``
    (:func:`.emission.price_pieces`: None where it does not verify), or as ``seen`` has it from
    an earlier pricing under those models or more (:func:`_price_pairs`); added to ``seen``.

    >>> seen = {(0, 8): {"sync": 2.0, "event": 1.5}, (1, 8): None}
    >>> _priced_once(None, [], (0, 8), ("event",), seen), _priced_once(None, [], (1, 8), ("sync",), seen)
    ({'event': 1.5}, None)
    """
    had = seen.get(pair, False) if seen is not None else False
    if had is None or (had and all(m in had for m in models)):
        return None if had is None else {m: had[m] for m in models}
    got = price_pieces(part, alts[pair[0]], pair[1], models)
    if seen is not None:
        seen[pair] = got if got is None or not had else {**had, **got}
    return got


def _least_priced(est: latency.Choice, cands: list[latency.Candidate], prices: dict, alpha: float, record: dict,
                  models: tuple = PRICE_MODELS) -> latency.Choice:
    """The choice of least priced sum over ``models`` among ``prices`` (``{(index, pieces):
    {model: s}}`` in pricing order, the estimate's pick first unless it did not verify: ties go
    to the earlier) and what priced it."""
    def objective(p: dict) -> float:
        return sum(p[m] for m in models)

    (i, q), best = min(prices.items(), key=lambda kv: objective(kv[1]))
    own, base = prices.get((est.index, est.pieces)), prices.get(est.baseline)
    record.update({"schedules": len(prices), "models": list(models), "objective_s": objective(best),
                   **{f"{m}_s": v for m, v in best.items()},
                   "estimate_pick": {"trees": est.name, "pieces": est.pieces,
                                     "objective_s": objective(own) if own else None},
                   "baseline_objective_s": objective(base) if base else None})
    c = cands[i]
    return replace(est, name=c.name, k=c.k, pieces=q, index=i, priced=record,
                   estimate_s=latency.estimate(est.model, c.seconds, c.depth, q * c.chunks, alpha))


def latency_pick(instance: Instance, f: Forest, parts: int, alpha: float, options: Options, deadline,
                 automatic: int) -> tuple:
    """``(forest, pieces, choice)`` at a latency ``alpha`` per step: over the forests of
    :func:`alternatives`, the least priced time under the ``objective`` parameter's models
    (sync + event by default) near the least estimate (:func:`priced_choice`), or the least
    estimate of :func:`.latency.choose` where pricing would take too long; ``automatic``: the
    optimum's forest's pieces (:func:`.emission.auto_pieces`), the baseline. Under one model's
    objective the default objective's pick (its priced choice under ``sync`` + ``event``) is
    priced under that model among the others where it fits the budget, so the choice is never
    above it there, and the choice carries it (``default``, for the allreduce's joint choice:
    :func:`.joint.fewer_pieces_among`); a (trees, pieces) pair both price is verified and
    priced once, under ``sync`` + ``event``, its price under the one model taken from there
    (:func:`_priced_once`). ForestColl (Zhao et al., "ForestColl", arXiv 2402.06787, Section 5)
    packs at the least time alone (module doc)."""
    c = instance.collective.chunks_per_node
    alts = alternatives(instance, f, options, deadline, c * parts, bandwidth_bound(instance, f, alpha))
    cands = [latency.Candidate(g.k, packed_seconds(instance, g), depth_of(g.trees), hops_of(g.trees),
                               auto_pieces(g.trees, c * parts), c, name, name == GREEDY.format(f.k) and g is not f)
             for name, g in alts.items()]
    models = objective_models(options)
    also = fixed_depth(alts, c * parts)
    default, seen = None, {}  # each (trees, pieces) verified and priced once over both choices
    if len(models) > 1:
        choice = latency.choose(cands, alpha, (0, automatic), "both")
    else:  # the default objective's pick first, then priced under this model among the others
        default = priced_choice(instance, list(alts.values()), cands, alpha,
                                latency.choose(cands, alpha, (0, automatic), "both"), deadline, PRICE_MODELS, also,
                                seen)
        also = tuple(dict.fromkeys([*also, (default.index, default.pieces)]))
        choice = latency.choose(cands, alpha, (0, automatic), models[0])
    choice = priced_choice(instance, list(alts.values()), cands, alpha, choice, deadline, models, also, seen)
    if default is not None:
        choice = replace(choice, default=(alts[default.name], default.pieces))
    return alts[choice.name], choice.pieces, choice


def bandwidth_bound(instance: Instance, f: Forest, alpha: float) -> bool:
    """Whether ``f``'s bandwidth time is at least :data:`WIDE` times its trees' latency (``D
    alpha``, ``D`` their depth): where the greedy packing of Zhao et al. ("ForestColl", arXiv
    2402.06787, Section 5) is worth packing as a latency candidate (:func:`alternatives`). Below
    it the shallow candidates win and packing it would only cost time (MI250 x2: about 12 s a
    forest of 15 trees a shard)."""
    return packed_seconds(instance, f) >= WIDE * max(1, depth_of(f.trees)) * alpha


def fixed_depth(alts: dict[str, Forest], chunks: int) -> tuple:
    """``((index, pieces),)``: the greedy forest at the optimum's ``k`` among ``alts`` (the
    first, :func:`alternatives`' ``f``, when it is greedy trees, else the one added as
    ``greedy k=...``) at ForestColl's own fixed depth (:data:`.emission.DEPTH_FACTOR` pieces a
    hop of its deepest tree within the send budget, no floor; Zhao et al., "ForestColl", arXiv
    2402.06787, Section 5), so that the latency choice prices the schedule ForestColl would run
    and keeps it where it is least; ``()`` where no such forest is a candidate."""
    names = list(alts)
    first = alts[names[0]]
    name = names[0] if first.shape == "greedy" else GREEDY.format(first.k)
    if name not in alts:
        return ()
    return ((names.index(name), auto_pieces(alts[name].trees, chunks, floor=1)),)
