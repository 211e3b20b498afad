"""An allreduce's halves at one depth: ForestColl's greedy forests both at its fixed pieces.

With a link latency each half of an allreduce picks its own trees and pieces
(:func:`.latency_choice.latency_pick`), so the halves may run at different depths. Overlapped
(:func:`.overlap.overlapped`) under FIFO links that can cost far more than either half alone:
on DGX-H100 x2 (1 GB, ``objective=event``) the greedy forests, reduce-scatter at 600 pieces and
allgather at 1,600, price 4.056 / 4.381 / 5.817 ms under ``event`` at a quarter, a half and all
of those pieces, while both at 600 (ForestColl's own depth: 100 pieces a hop of 6 hops; Zhao
et al., "ForestColl: Throughput-Optimal Collective Communications on Heterogeneous Network
Fabrics", arXiv 2402.06787, Section 5) price 4.035 ms. :func:`prefer` adds that pair as a
candidate after the joint choice (:func:`.joint.joint_choice`) and prices it cheaply: each pair at
two small piece counts (an eighth and a quarter of its own), the price extrapolated to its pieces
as ``A + B / P`` (the fill shrinks with more pieces: :func:`.fifo_reduce.extrapolated`); a pair
the joint choice priced at its pieces keeps that price. Only the winner, where it is the new
pair, is built, verified and priced in full, where the time left allows.
"""

from __future__ import annotations

from ...instances import Instance
from ..producers import Unsupported
from . import forests
from .emission import auto_pieces
from .fifo_reduce import extrapolated
from .latency_choice import bandwidth_bound
from .packed import Forest
from .trees import hops_of

FRACTION = 8  # the two probes of a pair: its pieces over this and twice that (DGX-H100 x2: 75 and 150 of 600)
ONE_MODEL_FRACTION = 16  # under one model's objective, the probes at up to this fraction where those at FRACTION
# are over PROBE_SENDS (A100 x2, 1 GB: ForestColl's pair at 1,200 pieces, 2.71 M sends of probes at 1/8, 1.36 M at 1/16)
PROBE_SENDS = 2_000_000  # most sends of all the probes together (DGX-H100 x2, 1 GB: 1.22 M, about 10 s at load 12;
# A100 x2's and MI250 x2's fixed-depth pairs, 7.2 M and 16 M sends in full, are not probed)


def forestcoll_pair(instance: Instance, packed: list[Forest], deadline=None,
                    chosen: list | None = None) -> tuple | None:
    """``(pair, pieces)``: the allreduce's halves as ForestColl packs them (the greedy packing at
    the optimum's ``k``: ``chosen[i]`` or ``packed[i]`` where it already is that, else packed here)
    and its fixed depth, the fewer of
    the halves' :data:`.emission.DEPTH_FACTOR` pieces a hop of the deepest tree within the send
    budget (no floor), both halves at it; None where a half cannot be packed so (Zhao et al.,
    "ForestColl", arXiv 2402.06787, Section 5)."""
    pair = []
    for i, f in enumerate(packed):
        have = [g for g in [*(chosen[i:i + 1] if chosen else []), f] if _forestcoll(g, f.k)]
        if have:
            pair.append(have[0])
            continue
        try:
            pair.append(forests.forest(instance, f.kind, f.transposed, deadline, False, None, shape="greedy"))
        except Unsupported:
            return None
    c = instance.collective.chunks_per_node
    pieces = min(auto_pieces(f.trees, c * len(pair), floor=1) for f in pair)
    return tuple(pair), [pieces, pieces]


def _forestcoll(f, k: int) -> bool:
    """Whether ``f`` is ForestColl's packing at ``k`` trees a shard: greedy, roots in id order,
    equal pieces, kept as explicit trees on the whole links."""
    return (f.shape == "greedy" and f.order == "id" and f.k == k and f.cuts is None and f.compact is None
            and not f.on_share)


def probe_pieces(pieces: list[int], fraction: int = FRACTION) -> list[int]:
    """The smaller of a pair's two probes: each half's pieces over ``fraction`` (at least one).

    >>> probe_pieces([600, 1600])
    [75, 200]
    """
    return [max(1, p // fraction) for p in pieces]


def estimate(price, pair, pieces: list[int], fraction: int = FRACTION) -> float | None:
    """The summed price of ``pair`` at ``pieces`` extrapolated as ``A + B / P`` from its prices
    at :func:`probe_pieces` and twice those (``price(pair, pieces)``: the summed price after
    verifying, None where it does not verify; then None). Both halves are cut by one factor, so
    ``P`` is their larger pieces (:func:`.fifo_reduce.extrapolated`).

    >>> fill = lambda pair, q: 4.0 + 0.6 / max(q)  # A = 4, B = 0.6 (ms)
    >>> round(estimate(fill, None, [600, 600]), 9)
    4.001
    """
    q = probe_pieces(pieces, fraction)
    if max(q) * 2 >= max(pieces):  # too few pieces to probe at fewer: the price itself
        return price(pair, pieces)
    return extrapolated(price(pair, q), price(pair, [2 * p for p in q]), max(q), max(pieces))


def ranked(price, current, current_pieces: list[int], current_price: float | None, candidate,
           candidate_pieces: list[int], fraction: int = FRACTION) -> tuple[bool, dict]:
    """``(whether the candidate wins, record)``: ``candidate`` at ``candidate_pieces`` against
    ``current`` at ``current_pieces``, each by :func:`estimate` (``current`` by
    ``current_price`` where the joint choice priced it at its pieces); the candidate wins only
    where its estimate is less. ``price(pair, pieces)``: summed price after verifying, or None.

    >>> price = lambda pair, q: {"a": 4.0 + 0.6 / max(q), "b": 4.0 + 30 / max(q)}[pair]
    >>> ranked(price, "b", [600, 1600], None, "a", [600, 600])[0]
    True
    >>> ranked(price, "b", [600, 1600], 4.0, "a", [600, 600])[0]
    False
    """
    theirs = estimate(price, candidate, candidate_pieces, fraction)
    ours = current_price if current_price is not None else estimate(price, current, current_pieces, fraction)
    record = {"pieces": list(candidate_pieces), "estimate_s": theirs, "against_s": ours,
              "against": "priced" if current_price is not None else "extrapolated"}
    return theirs is not None and (ours is None or theirs < ours), record


def prefer(instance: Instance, chosen: list[Forest], depths: list[int], packed: list[Forest], joint: dict,
           price, deadline, kept, most_fraction: int = FRACTION) -> tuple[list[Forest], list[int], dict]:
    """``(forests, pieces, record)``: the joint choice's pair (``chosen`` at ``depths``; its
    price, where ``joint`` has it at those pieces) or ForestColl's pair at one depth
    (:func:`forestcoll_pair`), whichever :func:`ranked` puts first, built and priced in full
    (``price(pair, pieces)``: verified, priced, offered to ``kept``, :class:`.incumbent.Kept`;
    the pipeline then takes its verdict) where ``kept`` says that fits the time left; where its
    full price is above the other's estimate (an estimate misranked: DGX-H100 x2's halves at 600
    and 1,600 pieces extrapolate to 4.045 ms, are 5.817 in full), the other is built too. The
    answer is ``kept``'s least priced verified schedule (of the two pairs the one priced less
    without ``kept``). Nothing is probed where a half's message is not
    bandwidth-bound (:func:`.latency_choice.bandwidth_bound`), where the probes together would
    pass :data:`PROBE_SENDS` at every fraction from :data:`FRACTION` doubled up to
    ``most_fraction`` (the first that fits is taken), once ``deadline`` has passed, or where a
    probe would not fit the time left. Module doc."""
    alpha = float(instance.topology.link_arrays.alpha.max())
    if not all(bandwidth_bound(instance, f, alpha) for f in packed):  # ForestColl's depth is for bandwidth
        return chosen, depths, {}
    got = forestcoll_pair(instance, packed, deadline, chosen)
    if got is None:
        return chosen, depths, {}
    pair, pieces = got
    if all(f is g for f, g in zip(pair, chosen)) and list(depths) == pieces:
        return chosen, depths, {}
    c = instance.collective.chunks_per_node

    def sends(forests_, q) -> int:
        return sum(hops_of(f.trees) * p * c for f, p in zip(forests_, q))

    priced = joint.get("priced", {}).get(joint.get("chosen"))
    at_depths = priced is not None and list(joint.get("chosen_pieces", depths)) == list(depths)
    probes = [(pair, pieces)] + ([] if at_depths else [(chosen, depths)])
    fraction = FRACTION
    probed = sum(3 * sends(f, probe_pieces(q, fraction)) for f, q in probes)
    while probed > PROBE_SENDS and 2 * fraction <= most_fraction:
        fraction *= 2
        probed = sum(3 * sends(f, probe_pieces(q, fraction)) for f, q in probes)
    if probed > PROBE_SENDS:
        return chosen, depths, {"pieces": pieces, "skipped": f"{probed:,} sends of probes, over {PROBE_SENDS:,}"}

    def probe(forests_, q) -> float | None:
        if (deadline is not None and deadline.expired()) or (kept is not None and not kept.fits(sends(forests_, q),
                                                                                                deadline)):
            return None
        got_ = price(forests_, q)
        return None if got_ is None else sum(got_.values())

    wins, record = ranked(probe, tuple(chosen), list(depths), sum(priced.values()) if at_depths else None,
                          pair, pieces, fraction)
    record["fraction"] = fraction
    full = record["priced_s"] = {"joint choice": sum(priced.values())} if at_depths else {}
    order = [("forestcoll", pair, pieces, record["against_s"]), ("joint choice", tuple(chosen), list(depths),
                                                                  record["estimate_s"])]
    for name, forests_, q, other in order if wins else order[::-1]:  # the winner, then the other where misranked
        if name not in full:
            full[name] = probe(forests_, q)
        if full[name] is None or other is None or full[name] <= other:
            break
    return _least(chosen, depths, pair, pieces, record, kept)


def _least(chosen, depths, pair, pieces, record: dict, kept) -> tuple:
    """``prefer``'s answer once pairs are priced in full (``record["priced_s"]``): ``kept``'s
    least priced verified schedule where it holds one, else of the two pairs the one priced
    less in full (the joint choice's where neither is)."""
    if kept is not None and kept.schedule is not None:
        record["chosen"] = all(f is g for f, g in zip(kept.pair, pair))
        return list(kept.pair), list(kept.pieces), {**record, "kept": list(kept.pieces)}
    ours = record["priced_s"].get("forestcoll")
    theirs = record["priced_s"].get("joint choice")
    record["chosen"] = ours is not None and (theirs is None or ours < theirs)
    return (list(pair), list(pieces), record) if record["chosen"] else (chosen, depths, record)
