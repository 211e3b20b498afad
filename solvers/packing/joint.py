"""An allreduce's two forests chosen together, every verified candidate certified and kept.

An allreduce is a reduce-scatter then an allgather (Zhao et al., "ForestColl: Throughput-Optimal
Collective Communications on Heterogeneous Network Fabrics", arXiv 2402.06787, Section 4;
Patarasuk and Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations",
JPDC 2009, Section 3). :func:`choose_halves` prices pairs of the halves' forests as the whole
overlapped allreduce (:func:`.overlap.joint`): each half's picked forest, the forest packed
before the pick, the greedy packing in place of ring trees (:func:`greedy_instead_of_rings`), one
packed tree a shard, and the halves packed each on its share of every link (:func:`split_pair`,
:mod:`.capacity_split`). Each candidate is verified and priced once (:mod:`collsynth.tens.certified`)
and offered to the run's :class:`.incumbent.Kept`, so the least priced verified schedule so far
is at hand when the time limit comes.
"""

from __future__ import annotations

import time
from dataclasses import replace

from ...instances import Instance
from ...limits import TimeLimitReached, TooBig
from ...tens import certified
from ...tens.cut_optimum import FlowTooLarge, flow_net, optimum
from ..producers import Options, Unsupported
from . import capacity_split, equal_depth, forests, incumbent, overlap, split_form
from .emission import auto_pieces, check_sends, emit, pipelined, whole_bytes, with_header
from .fifo_reduce import FLIP_MARGIN, with_cost_a_piece
from .packed import Forest, optimum_seconds
from .pieces_choice import pick
from .run_params import asked_shape, grows_depth_first, objective_models
from .tree_hops import depth_of
from .trees import hops_of

SPLIT_SHARE = 0.5  # of the run's time left (less the kept verdict's check) for packing the split pair
SPLIT_MOST = 4  # the split pair starts from at most this many times the probe's pieces where its fill wants them
FIRST_CUT = 32  # the chosen pair is priced from its halves' pieces over this (a power of 2) up (A100 x2, 64 MB, event: 1,600 -> 50)
SCAN_SHARE = 0.25  # of the run's time left, at most, for pricing the chosen pair at fewer pieces (:func:`fewer_pieces`)
DEFAULT_PAIR = "the default's picks"  # the fewer-pieces search's name for the halves the default objective picks
SPLIT_PAIR = "capacity split"  # the joint choice's name for the halves on their shares (:mod:`.capacity_split`);
# chosen, it is the schedule priced (:mod:`.incumbent`), at the pieces it was priced at: DGX-2 x2, 1 GB, its 21 deep
# trees a shard (21-27 hops) at 200 pieces are 8.4 M sends, 15.18 / 15.40 ms under event / sync; at the automatic
# 365-369 pieces 16 M sends (14.6 GB peak, verifying and pricing twice as long) for 15.14 / 15.27 ms


def choose_halves(instance: Instance, options: Options, packed: list[Forest], picks: list[tuple], alpha: float,
                  deadline, kept: incumbent.Kept,
                  early: dict | None = None) -> tuple[list[Forest], list[int], dict, str]:
    """``(forests, pieces, record, note)``: an allreduce's two forests and their pieces chosen
    together (:func:`joint_choice`) from each half's pick (``picks``, :func:`.pieces_choice.pick`)
    and the forest ``packed`` before it. At alpha 0 without the ``pieces`` parameter the split
    pair keeps the pieces it won at, a fill's forest the pieces its fill took, any other the
    automatic pieces of half the send budget. With a latency, every pair priced is searched at
    fewer pieces (:func:`fewer_pieces_among`) and ForestColl's forests both at its fixed depth
    are compared after (:func:`.equal_depth.prefer`; under one model's objective its probes
    may be smaller, :data:`.equal_depth.ONE_MODEL_FRACTION`: under ``sync`` + ``event`` its
    fixed depth pays a latency a piece under ``sync``, A100 x2 and DGX-H100 x2 at 1-4 GB 1.03-1.49x
    the default's summed price). Where the chosen pair at those pieces would not
    fit the time left, ``kept``'s schedule is taken at the pieces it was priced at, and
    ``note`` says so. At alpha 0 a deeper pair the choice priced is taken where cheaper at the
    pieces the run emits it at (:func:`deeper_at_run_pieces`). ``early``: the split pair as
    priced before the halves were packed (:func:`.split_first.priced`), not packed nor priced
    again. An allreduce as reduce-scatter then allgather: Zhao et al., "ForestColl", arXiv 2402.06787, Section 4."""
    depths = [p[1] for p in picks]
    halves = [[p[0], *(bandwidth_regime(p[0], g, alpha) and greedy_instead_of_rings(instance, g, options, deadline)
                       or [g])] for p, g in zip(picks, packed)]
    chosen, record = joint_choice(instance, halves, depths, alpha, options, deadline, kept, early)
    others = record.pop(overlap.PAIRS, {})
    c = instance.collective.chunks_per_node
    if alpha <= 0 and not options.params.get("pieces"):  # the split's pair at the depth it won at (SPLIT_PAIR)
        if not any(f.on_share for f in chosen):  # a deeper pair may win at the pieces the run emits
            chosen = deeper_at_run_pieces(instance, chosen, record, others, picks, objective_models(options),
                                          deadline, kept)
        depths = (list(record["chosen_pieces"]) if all(f.on_share for f in chosen) else
                  run_pieces(instance, chosen, picks))
        if not record.get("priced") and not any(f.on_share for f in chosen):  # nothing of the choice priced
            chosen, depths = halves_alone(instance, chosen, depths, picks, packed, options, record, deadline, kept)
    if alpha > 0 and not options.params.get("pieces"):  # fewer pieces priced, then ForestColl's pair at one depth
        models = objective_models(options)
        chosen, depths = fewer_pieces_among(instance, chosen, depths, record, models, deadline, kept, others,
                                            default_pair(picks) if len(models) == 1 else None)
        chosen, depths, equal = equal_depth.prefer(
            instance, chosen, depths, packed, record,
            lambda pair, q: certified_price(instance, pair, q, models, kept), deadline, kept,
            equal_depth.ONE_MODEL_FRACTION if len(models) == 1 else equal_depth.FRACTION)
        if equal:
            record["equal_depth"] = equal
    sends = sum(split_form.priced_sends(instance, f, p) if f.compact is not None else hops_of(f.trees) * p * c
                for f, p in zip(chosen, depths))
    if not kept.holds(chosen, depths) and kept.schedule is not None and not kept.fits(sends, deadline):
        note = (f"the chosen pair at {'/'.join(map(str, depths))} pieces ({sends:,} sends) would not fit the "
                f"time left: kept at the {'/'.join(map(str, kept.pieces))} pieces it was priced at")
        return list(kept.pair), kept.pieces, record, note
    return chosen, depths, record, ""


def run_pieces(instance: Instance, pair: list[Forest], picks: list[tuple]) -> list[int]:
    """Each half's pieces as the run emits ``pair`` at alpha 0: a fill's forest at the pieces
    its fill took (``picks``), any other at the automatic pieces of half the send budget
    (:func:`.emission.auto_pieces`)."""
    c = instance.collective.chunks_per_node
    return [next((d for g, d, _ in picks if g is f), None) or auto_pieces(f.trees, c * len(pair)) for f in pair]


def halves_alone(instance: Instance, chosen: list[Forest], depths: list[int], picks: list[tuple],
                 packed: list[Forest], options: Options, record: dict, deadline,
                 kept: incumbent.Kept | None) -> tuple[list[Forest], list[int]]:
    """``(forests, pieces)`` of an allreduce at alpha 0 whose joint choice priced nothing (every
    pair over the probes' :data:`.overlap.PROBE_SENDS`): each half as picked for it alone
    (:func:`.pieces_choice.pick` with the whole send budget, ``parts`` 1) where ``chosen`` is the
    halves as picked for the allreduce (the send budget shared: half the pieces each), the
    pieces alone are more, and both halves at them fit the memory budget and, by ``kept``'s
    rate, the time left (where they do not, the most of them cut by 17/20 at a time, in equal
    pieces, that do and are more than ``depths``, :func:`_fewer_that_fit`); else ``chosen`` at
    ``depths``. The fill ((D - 1) / P of the bottleneck's time, Zhao et al., NSDI 2025,
    Section 3.2) of a deep forest is then the halves' own: ForestColl's MI250 x3 (48 GPUs, ring
    trees 17 hops deep, 1 GB), 555 pieces a half
    (the allreduce's share of the fill's sends) price 2.92656 ms a half under ``sync``, the
    allreduce 1.0139x the bound, the halves alone at 1,111 pieces 2.90654 ms (1.0069x): 64 M sends,
    16 GB at the ``BYTES_PER_TREE_SEND`` a send the memory check reads.
    ``record`` gains ``halves_alone`` (the pieces, taken or not, and why). The halves as
    ForestColl's pipelined forests (Zhao et al., arXiv 2402.06787, Sections 4-5)."""
    c = instance.collective.chunks_per_node
    if len(picks) != len(chosen) or any(f is not p[0] for f, p in zip(chosen, picks)):
        return chosen, depths
    alone = [pick(instance, f, 1, 0.0, options, deadline) for f in packed]
    forests_alone, pieces = [a[0] for a in alone], [a[1] for a in alone]
    if sum(pieces) <= sum(depths):
        return chosen, depths
    why = _unfit(forests_alone, pieces, c, kept, deadline)
    record["halves_alone"] = {"pieces": pieces, "taken": why is None, **({"why": why} if why else {})}
    if why is None:
        return forests_alone, pieces
    equal = [replace(f, cuts=None) for f in forests_alone]  # a fill's piece edges are for its own count
    fewer = _fewer_that_fit(equal, pieces, depths, c, kept, deadline)
    if fewer is None:
        return chosen, depths
    record["halves_alone"].update(taken_at=fewer)
    return equal, fewer


def _unfit(pair: list[Forest], pieces: list[int], chunks: int, kept: incumbent.Kept | None, deadline) -> str | None:
    """Why ``pair`` at ``pieces`` cannot be emitted (over the memory budget,
    :func:`.emission.check_sends`, or, by ``kept``'s rate, over the time left); None where it can."""
    sends = sum(hops_of(f.trees) * p * chunks for f, p in zip(pair, pieces))
    try:
        check_sends(pair, pieces, chunks)
    except TooBig:
        return f"{sends:,} sends over the memory budget"
    if kept is not None and not kept.fits(sends, deadline):
        return f"{sends:,} sends would not fit the time left"
    return None


def _fewer_that_fit(pair: list[Forest], pieces: list[int], depths: list[int], chunks: int,
                    kept: incumbent.Kept | None, deadline) -> list[int] | None:
    """The most of ``pieces`` (equal pieces) cut by 17/20 at a time that ``kept`` says fit the
    time left and the memory budget (:func:`_unfit`) and are more than ``depths`` in sum; None
    where none is."""
    q = [p * 17 // 20 for p in pieces]
    while sum(q) > sum(depths):
        if _unfit(pair, q, chunks, kept, deadline) is None:
            return q
        q = [p * 17 // 20 for p in q]
    return None


def deeper_at_run_pieces(instance: Instance, chosen: list[Forest], record: dict, others: dict, picks: list[tuple],
                         models: tuple, deadline, kept: incumbent.Kept | None) -> list[Forest]:
    """The joint choice's ``chosen`` pair or a deeper pair it priced (``others``, by name; its
    trees deeper than ``chosen``'s, least priced first) that, priced at ``q``, ``2 q`` and
    ``4 q`` pieces a half (``4 q`` the probe's, as ``record`` priced it; each verified and
    offered to ``kept``) and extrapolated to the pieces the run emits it at (:func:`run_pieces`,
    the larger half's; :func:`.fifo_reduce.with_cost_a_piece`), is over
    :data:`.fifo_reduce.FLIP_MARGIN` cheaper summed over ``models`` than ``chosen`` extrapolated
    alike, as :func:`.fifo_reduce.cheaper_at_its_pieces` does for a reduce-scatter alone: a
    deeper pair's fill, which loses at the probe's pieces, shrinks at the run's (DGX-H100 x3,
    1 GB, alpha 0: one tree a shard for both halves wins at 200 pieces a half; Patarasuk, Yuan
    and Faraj, J. Parallel Distrib. Comput. 68(6), 2008, the pipelined-broadcast time). Priced
    while their sends fit :data:`.overlap.PROBE_SENDS`, :data:`SCAN_SHARE` of the time left and
    ``kept``'s rate; ``record`` gains the extrapolations (``at_run_pieces``) and, where a deeper
    pair wins, names it ``chosen``."""
    priced, probe, name = record.get("priced", {}), list(record.get("probe_pieces", [])), record.get("chosen")
    if (name not in priced or len(set(probe)) != 1 or list(record.get("chosen_pieces", probe)) != probe
            or any(f.compact is not None for f in chosen)):
        return chosen
    c = instance.collective.chunks_per_node
    q = max(1, probe[0] // 4)

    def depth(pair) -> int:
        return max(depth_of(f.trees) for f in pair)

    def total(n: str, pair, k: int) -> float | None:
        got = priced[n] if k * q == probe[0] else certified_price(instance, pair, [k * q] * len(pair), models, kept)
        return None if got is None else sum(got[m] for m in models)

    def at_run(n: str, pair) -> float | None:
        return with_cost_a_piece([total(n, pair, k) for k in (1, 2, 4)], q, max(run_pieces(instance, pair, picks)))

    deeper = sorted((n for n in priced if n != name and n in others and depth(others[n]) > depth(chosen) and
                     not any(f.on_share or f.compact is not None for f in others[n])),
                    key=lambda n: sum(priced[n][m] for m in models))
    stop = deadline.share(SCAN_SHARE) if deadline is not None else None
    left, estimates, best = overlap.PROBE_SENDS, {}, (None, None)
    for n in [name, *deeper] if deeper else []:
        pair = chosen if n == name else others[n]
        sends = sum(hops_of(f.trees) * 3 * q * c for f in pair)  # at q and 2 q
        if (stop is not None and stop.expired()) or sends > left or \
                (kept is not None and not kept.fits(sends, deadline)):
            break
        left -= sends
        estimates[n] = at_run(n, pair)
        if n != name and None not in (estimates[n], estimates[name]) and \
                estimates[n] * (1 + FLIP_MARGIN) < estimates[name] and (best[1] is None or estimates[n] < best[1]):
            best = (n, estimates[n])
        if estimates[name] is None:
            break
    if len(estimates) > 1:
        record["at_run_pieces"] = {n: None if t is None else round(t, 12) for n, t in estimates.items()}
    if best[0] is None:
        return chosen
    record["chosen"] = best[0]
    return list(others[best[0]])


def fewer_pieces(instance: Instance, pair: list[Forest], depths: list[int], record: dict, models: tuple, deadline,
                 kept: incumbent.Kept, stop=None) -> list[int]:
    """The pieces of least priced time summed over ``models`` of the joint choice's ``pair``
    (priced at ``depths`` in ``record``, or unpriced, over the joint probes' budget: A100 x2,
    1 MB, 13 trees a shard at 1,600 pieces a half, each 14.8 us alone, 2,038 us overlapped): the
    pair priced again, as the whole overlapped allreduce (:func:`certified_price`, verified,
    offered to ``kept``), from ``depths`` over :data:`FIRST_CUT`, doubled while that lowers the
    price, else halved while that does (:func:`_about`: few pieces cost little to price; at
    load 14 the pair halved from 800 pieces had the time for one price), and both halves at the
    fewer of the best pieces where they differ; within :data:`SCAN_SHARE` of the time left and
    while ``kept`` says a probe fits. The
    halves' latency choices estimate ``event`` with each link's latency overlapped by the next
    piece (:mod:`.latency`), but a reduction's sends leave each link in program order, so its
    pipeline pays about a latency a step: two boxes of two GPUs, 16 MB, the pair at 1,600 pieces
    a half is 5.16 ms under ``event``, at 50 0.70. ``record`` gains the prices (``fewer_pieces``)
    and, where fewer won, names the pair at them as ``chosen``. ``stop``: the share of the time
    to stop at, where the caller set one (:func:`fewer_pieces_among`). Pipelined trees: Zhao et
    al., "ForestColl", arXiv 2402.06787, Section 5."""
    name = record.get("chosen")
    priced = record.get("priced", {}).get(name)
    if ((priced is None and record.get("priced")) or list(record.get("chosen_pieces", depths)) != list(depths)
            or any(f.on_share or f.compact is not None for f in pair) or max(depths) <= 1):
        return depths
    c = instance.collective.chunks_per_node

    def sends(cut) -> int:
        return sum(hops_of(f.trees) * p * c for f, p in zip(pair, cut))

    if stop is None and deadline is not None:
        stop = deadline.share(SCAN_SHARE)
    least = sum(priced[m] for m in models) if priced else float("inf")  # unpriced: over the probes' budget
    best, tried, won = list(depths), {}, None
    got = _about(instance, pair, depths, FIRST_CUT.bit_length() - 1, models, stop, deadline, kept, up_first=True)
    if got and len(set(depths)) > 1:  # both halves at the fewer of the best pieces
        low = min(got, key=lambda x: sum(x[1][m] for m in models))[0]
        got += _about(instance, pair, [min(low)] * len(low), 0, models, stop, deadline, kept)
    for cut, times in got:
        tried["/".join(map(str, cut))] = round(sum(times[m] for m in models), 12)
        if sum(times[m] for m in models) < least:
            best, least, won = list(cut), sum(times[m] for m in models), times
    if tried:
        record["fewer_pieces"] = tried
    if won is not None:
        record["chosen"] = f"{name} at {'/'.join(map(str, best))} pieces"
        record.setdefault("priced", {})[record["chosen"]] = {m: round(t, 9) for m, t in won.items()}
        record["chosen_pieces"] = best
    return best


def default_pair(picks: list[tuple]) -> tuple | None:
    """``(forests, pieces)``: the halves as the default objective's latency choice picks them
    (each pick's ``default``, :func:`.latency_choice.latency_pick` under one model's
    objective); None where a half has none."""
    got = [getattr(p[2], "default", None) for p in picks]
    return None if None in got else ([f for f, _ in got], [q for _, q in got])


def fewer_pieces_among(instance: Instance, chosen: list[Forest], depths: list[int], record: dict, models: tuple,
                       deadline, kept: incumbent.Kept, others: dict,
                       default: tuple | None = None) -> tuple[list[Forest], list[int]]:
    """``(pair, pieces)`` of least priced time summed over ``models``: the joint choice's
    ``chosen`` pair at fewer pieces (:func:`fewer_pieces`), then every other pair it priced at
    ``depths`` (``others``, by name; least priced first) searched about the pieces the chosen
    pair won at (:func:`_about`), each verified, priced and offered to ``kept``, all within one
    :data:`SCAN_SHARE` of the time left. The pair the joint choice ranks first at the halves'
    pieces need not be first at fewer: A100 x2, 64 MB, ``objective=event``, the 13-trees-a-shard
    pair won at 1,600 pieces a half and at fewer priced 428.8 us, where one packed tree a shard,
    the default's pick, is 402.4 us at its pieces (a pair overlapped pays about one link latency
    a step, :func:`fewer_pieces`). The best pair is priced too at 3/4 and 3/2 of its best pieces,
    both halves and then each alone, from the best so far (between the halvings: A100 x2, 64 MB,
    the one-tree pair 407.5 us at 25 pieces a half, 404.2 at 18, where the default took 16 and
    23, 402.4). ``default``: ``(forests, pieces)``, the halves as the default objective picks
    them (:func:`default_pair`, under one model's objective), priced too, at those pieces, right
    after the chosen pair: the halvings do not reach the default's unequal pieces (A100 x2, 64
    MB, ``event``: 404.2 us at 18 pieces a half, against the default's 402.4 at 16 / 23), and a
    choice for one model should not be above the default's schedule in it. ``record`` gains the
    others' prices (``fewer_pieces_others``) and, where one of them won, names it ``chosen``.
    Pipelined trees: Zhao et al., "ForestColl", arXiv 2402.06787, Section 5."""
    stop = deadline.share(SCAN_SHARE) if deadline is not None else None
    base, won = record.get("chosen"), None
    best = fewer_pieces(instance, chosen, depths, record, models, deadline, kept, stop)
    now = record.get("priced", {}).get(record.get("chosen"))
    least = sum(now[m] for m in models) if now and list(record.get("chosen_pieces", depths)) == best \
        else float("inf")
    pair, tried = list(chosen), {}
    c = instance.collective.chunks_per_node
    if default is not None and not (stop is not None and stop.expired()):
        sends = sum(hops_of(f.trees) * p * c for f, p in zip(*default))
        t = certified_price(instance, list(default[0]), list(default[1]), models, kept) \
            if sends <= overlap.PROBE_SENDS and kept.fits(sends, deadline) else None
        if t is not None:
            tried[DEFAULT_PAIR] = {"/".join(map(str, default[1])): round(sum(t[m] for m in models), 12)}
            if sum(t[m] for m in models) < least:
                least, pair, best, won = sum(t[m] for m in models), list(default[0]), list(default[1]), \
                    (DEFAULT_PAIR, t)
    ranked = sorted((n for n, p in others.items() if not (len(p) == len(chosen) and all(f is g for f, g in
                                                                                       zip(p, chosen)))),
                    key=lambda n: sum(record.get("priced", {}).get(n, {}).get(m, float("inf")) for m in models))
    for name in ranked:
        if any(f.on_share or f.compact is not None for f in others[name]):
            continue
        if stop is not None and stop.expired():
            break
        got = _about(instance, list(others[name]), depths, halvings(depths, best), models, stop, deadline, kept)
        tried[name] = {"/".join(map(str, q)): round(sum(t[m] for m in models), 12) for q, t in got}
        for q, t in got:
            if sum(t[m] for m in models) < least:
                least, pair, best, won = sum(t[m] for m in models), list(others[name]), list(q), (name, t)

    def between(b: list[int]) -> list[list[int]]:  # both halves at 3/4 and 3/2, then each half alone
        scaled = [[max(1, min(d, p * a // q)) for p, d in zip(b, depths)] for a, q in ((3, 4), (3, 2))]
        return scaled + [[*b[:i], x[i], *b[i + 1:]] for i in range(len(b)) for x in scaled]

    for k in range(3 * len(best)):
        q = between(best)[k]  # from the best so far
        sends = sum(hops_of(f.trees) * p * c for f, p in zip(pair, q))  # between the halvings about the best
        if q == best or (stop is not None and stop.expired()) or sends > overlap.PROBE_SENDS or \
                not kept.fits(sends, deadline) or least == float("inf"):
            continue
        t = certified_price(instance, pair, q, models, kept)
        if t is not None:
            tried.setdefault("between halvings", {})["/".join(map(str, q))] = round(sum(t[m] for m in models), 12)
        if t is not None and sum(t[m] for m in models) < least:
            least, best, won = sum(t[m] for m in models), list(q), (won[0] if won else base, t)
    if tried:
        record["fewer_pieces_others"] = tried
    if won is not None:
        name, t = won
        record["chosen"] = f"{name} at {'/'.join(map(str, best))} pieces"
        record.setdefault("priced", {})[record["chosen"]] = {m: round(x, 9) for m, x in t.items()}
        record["chosen_pieces"] = best
    return pair, best


def _about(instance: Instance, pair: list[Forest], depths: list[int], first: int, models: tuple, stop, deadline,
           kept: incumbent.Kept, up_first: bool = False) -> list[tuple[list[int], dict]]:
    """``[(pieces, times), ...]`` of ``pair`` priced (:func:`certified_price`, offered to
    ``kept``) at ``depths`` halved ``first`` times, then halved once more at a time while each
    lowers the price, or, where the first halving does not, halved once fewer at a time (at most
    ``depths``) while each does (``up_first``: that way first); no pricing of more than the joint
    probes' :data:`.overlap.PROBE_SENDS`, once ``stop`` has passed or where ``kept`` says a
    pair's sends would not fit the time left. From few pieces up, the sends priced are at most
    about twice the last pair's."""
    c = instance.collective.chunks_per_node
    out: list = []

    def at(i: int) -> dict | None:
        q = [max(1, p >> i) for p in depths]
        sends = sum(hops_of(f.trees) * p * c for f, p in zip(pair, q))
        if (stop is not None and stop.expired()) or sends > overlap.PROBE_SENDS or not kept.fits(sends, deadline):
            return None
        got = certified_price(instance, pair, q, models, kept)
        if got is not None:
            out.append((q, got))
        return got

    got = at(first)
    if got is None:
        return out
    for step in (-1, 1) if up_first else (1, -1):
        i, last = first, sum(got[m] for m in models)
        while 0 <= i + step and (step < 0 or max(depths) >> i > 1):
            now = at(i + step)
            if now is None or sum(now[m] for m in models) >= last:
                break
            i, last = i + step, sum(now[m] for m in models)
        if i != first:  # the first way lowered the price: not the other
            break
    return out


def halvings(depths: list[int], pieces: list[int]) -> int:
    """The fewest halvings of ``depths`` (each half's pieces) to at most ``pieces``' most.

    >>> halvings([1600, 1600], [50, 50]), halvings([600, 1600], [100, 100])
    (5, 4)
    """
    i = 0
    while max(depths) >> i > max(pieces) and max(depths) >> i > 1:
        i += 1
    return i


def bandwidth_regime(picked: Forest, packed: Forest, alpha: float) -> bool:
    """Whether a half is chosen for bandwidth: at alpha 0, or where its latency choice
    (:func:`.latency_choice.latency_pick`) kept the forest packed at the optimum (``picked is
    packed``). Only there does the joint choice pack the greedy forest in place of ring trees
    (:func:`greedy_instead_of_rings`, measured at alpha 0 and 200 pieces): where the latency
    choice took other trees than the optimum's (fewer a shard, shallower), the optimum's greedy
    forest is not packed for it (MI250 x2 allreduce at 64 KB: about 25 s of CPU for two forests of 15 trees a
    shard, their pair priced 4.9x the chosen one). ForestColl (Zhao et al., arXiv 2402.06787,
    Section 5) packs at the optimum whatever the size."""
    return alpha <= 0 or picked is packed


def greedy_instead_of_rings(instance: Instance, f: Forest, options: Options, deadline) -> list[Forest]:
    """The greedy packing of ``f``'s collective at the optimum's tree count when ``f`` is ring
    trees (:mod:`.rings`), else nothing: the allreduce's joint choice compares it in place of
    the rings packed for one half alone (the picked forest stays a candidate). Ring trees are
    deeper; where both halves share FIFO links the greedy forests (Zhao et al., "ForestColl",
    arXiv 2402.06787, Section 5.2) overlap better (DGX-H100 x2, 200 pieces: 1.019x the bound
    under ``event`` on rings and greedy, 1.009x greedy on both)."""
    if f.shape != "rings" or asked_shape(options) != "auto":
        return []
    try:
        return [forests.forest(instance, f.kind, f.transposed, deadline, grows_depth_first(options), None,
                               shape="greedy")]
    except Unsupported:
        return []


def joint_choice(instance: Instance, halves: list[list[Forest]], depths: list[int], alpha: float, options: Options,
                 deadline=None, kept: incumbent.Kept | None = None, early: dict | None = None
                 ) -> tuple[list[Forest], dict]:
    """:func:`.overlap.joint`: an allreduce's two forests chosen together from ``halves``
    (each half's picked forest and the one packed before the pick), each pair priced as the
    whole overlapped allreduce under the ``objective`` parameter's models, every verified one
    offered to ``kept`` (:class:`.incumbent.Kept`); the split pair (:func:`split_pair`) packed
    after the others are priced, by the time left less what the pipeline needs to check the
    kept schedule's verdict again (:func:`split_within_share`), or before them where it is
    expected to win (``early``: already priced, :func:`.split_first.priced`). The halves are ForestColl's
    forests (Zhao et al., "ForestColl", arXiv 2402.06787, Sections 4-5)."""
    picked = [h[0] for h in halves]
    models = objective_models(options)
    c = instance.collective.chunks_per_node

    def one_tree(i: int) -> Forest | None:
        try:
            return forests.forest(instance, picked[i].kind, picked[i].transposed, deadline,
                                  grows_depth_first(options), 1, shape=asked_shape(options))
        except Unsupported:
            return None

    def price(pair, pieces) -> dict | None:
        if pair[0].on_share and options.params.get("form") != "explicit":  # kept as trees (.split_form)
            return split_form.price(instance, pair, pieces, models, kept, pipelined)
        return certified_price(instance, pair, pieces, models, kept)

    explicit = options.params.get("form") == "explicit"

    def sends(f, p) -> int:  # what pricing costs: the split kept with box shifts simulates one link per orbit
        return split_form.priced_sends(instance, f, p) if f.compact is not None and not explicit else \
            hops_of(f.trees) * p * c

    def start(pair, pieces) -> list[int]:  # the split's fill may want more pieces (alpha 0, none asked)
        if alpha > 0 or options.params.get("pieces"):
            return list(pieces)
        return split_form.deeper(instance, pair, pieces, pipelined, SPLIT_MOST * max(pieces))

    return overlap.joint(halves, depths, alpha, one_tree, price, sends, models,
                         deadline, lambda: split_within_share(instance, picked, options, deadline, kept), kept,
                         options.params.get("form") != "explicit", start,
                         split_form.splits_first(instance, picked, options, alpha), early)


def certified_price(instance: Instance, pair, pieces, models: tuple, kept: incumbent.Kept | None) -> dict | None:
    """The priced times under ``models`` of the overlapped allreduce of ``pair`` (reduce-scatter,
    allgather forests) at ``pieces`` as explicit sends (:func:`listed`), verified and priced once
    (:func:`collsynth.tens.certified.certify`) and offered to ``kept``; None where it does not
    verify (:func:`certified_schedule`). A schedule whose content ``kept`` has already seen in
    the run (:meth:`.incumbent.Kept.known`: the same sends, e.g. the packed halves before the
    fill's copies of them, or a pair at pieces an earlier search priced) is not verified nor
    priced again: its prices are those found then (the same floats), and it is not offered
    again (offered at the same price it cannot be kept: :meth:`.incumbent.Kept.offer` keeps
    only a lower one)."""
    if kept is None:
        made = certified_schedule(instance, pair, pieces, models, kept)
        return None if made is None else made[2]
    t = time.perf_counter()
    sched = listed(instance, pair, pieces, models)
    if not whole_bytes(sched, instance):
        return None
    key = certified.digest(sched) + repr(tuple(models)).encode()
    known = kept.known(key)
    if known is not None and (known[0] is None or sum(known[0][m] for m in kept.models) >= kept.objective):
        prices, sends, seconds, check_s = known
        if prices is None:  # it did not verify then either
            return None
        kept.measured(sends, seconds, check_s)  # the rates of the probe that priced it, as offering it again sets
        return dict(prices)
    made = certified_schedule(instance, pair, pieces, models, kept, (sched, t))
    kept.remember(key, None if made is None else dict(made[2]), len(sched), kept.seconds_per_send * len(sched),
                  kept.check_per_send * len(sched))
    return None if made is None else made[2]


def certified_schedule(instance: Instance, pair, pieces, models: tuple, kept: incumbent.Kept | None,
                       listed_at: tuple | None = None) -> tuple | None:
    """``(schedule, verdict, prices)``: the overlapped allreduce of ``pair`` at ``pieces`` as
    explicit sends (:func:`listed`), its verdict (:func:`collsynth.tens.certified.certify`) and
    its priced times under ``models``, offered to ``kept``; None where it does not verify or a
    piece is under a byte (:func:`.emission.whole_bytes`: the producer would refuse it). The
    verdict carries the prices to the pipeline, which then neither verifies nor prices the
    schedule again (Zhao et al., "ForestColl", arXiv 2402.06787, Section 4: the halves overlapped).
    ``listed_at``: ``(schedule, when its listing started)`` where the caller listed it already."""
    sched, t = listed_at or (None, time.perf_counter())
    if sched is None:
        sched = listed(instance, pair, pieces, models)
        if not whole_bytes(sched, instance):
            return None
    verdict = certified.certify(sched, instance)
    if verdict is None:
        return None
    got = {m: verdict.price(m).total_s for m in models}
    if kept is not None:
        kept.offer(pair, pieces, sched, got, len(sched), time.perf_counter() - t, verdict.digest_s, verdict)
    return sched, verdict, got


def listed(instance: Instance, pair, pieces, models: tuple = ("sync",)):
    """The explicit sends of ``pair`` at ``pieces`` with the producer's header: the halves
    overlapped at the least valid shift (:func:`.overlap.overlapped`), or, for the halves on
    their shares of the links, the expansion of the form the run keeps as trees
    (:func:`.split_form.listed`, its delay chosen under ``models``), so that ``--param
    form=explicit`` lists the very schedule."""
    if pair[0].on_share:
        return split_form.listed(instance, pair, pieces, pipelined, models)
    rs, ag = (emit(instance, f, p) for f, p in zip(pair, pieces))
    return with_header(overlap.overlapped(rs, ag, instance.collective.chunks_per_node), instance)


def split_within_share(instance: Instance, halves: list[Forest], options: Options, deadline,
                       kept: incumbent.Kept | None) -> dict:
    """:func:`split_pair` within :data:`SPLIT_SHARE` of the time left less what checking
    ``kept``'s verdict again needs; nothing where that share runs out first (the run's own limit
    still stops the run)."""
    if deadline is None or kept is None:
        return split_pair(instance, halves, options, deadline)
    share = deadline.earlier(kept.needs(0)).share(SPLIT_SHARE)
    try:
        return split_pair(instance, halves, options, share)
    except TimeLimitReached:
        if deadline.expired():  # the run's limit, not the share's
            raise
        return {}


def split_pair(instance: Instance, halves: list[Forest], options: Options, deadline=None) -> dict:
    """The allreduce's halves packed each on its share of every link (:mod:`.capacity_split`), by
    name, for the joint choice; nothing where the split does not beat the halves in sequence.
    Each half is ForestColl's forest (Zhao et al., arXiv 2402.06787, Sections 4-5) of its share."""
    greedy = options.params.get("shape") == "greedy"  # the program's own vertex, packed greedily (as before)
    got = capacity_split.split_instances(instance, sum(optimum_seconds(instance, f) for f in halves), not greedy)
    if got is None:
        return {}
    parts, s = got
    nodes = instance.collective.nodes
    name = f"{SPLIT_PAIR} ({s.seconds(instance.collective.message_bytes) * 1e3:.4f} ms in the pipelined limit)"
    if not greedy:  # the first box's trees moved by the box shifts, where they are
        try:
            moved = split_form.translated_pair(parts, halves, deadline)
        except FlowTooLarge:
            moved = None
        if moved is not None:
            return {name: moved}
    try:  # at each share's own optimum k: its floored capacities keep every switch's balance, which splitting needs
        pair = tuple(replace(forests.forest(part, f.kind, f.transposed, deadline, grows_depth_first(options),
                                            optimum(flow_net(part.topology, nodes, [1] * len(nodes), f.transposed)).k,
                                            shape=options.params.get("shape") or split_form.SHAPE), on_share=True)
                     for part, f in zip(parts, halves))
    except (Unsupported, FlowTooLarge):
        return {}
    return {name: overlap.aligned(*pair)}
