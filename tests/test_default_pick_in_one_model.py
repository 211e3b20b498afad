"""A choice made for one model (``--param objective=event``) is never above the schedule the
default objective (``sync`` + ``event``) picks, priced in that model: the latency choice prices
the default's pick under the one model too (solvers/packing/latency_choice.py, ``latency_pick``),
and the allreduce's joint choice prices the halves the default picks as a pair
(solvers/packing/joint.py, ``fewer_pieces_among``). Stand-in prices by hand: the default's pick
is the only cheap one, and neither the one model's own search nor its halvings reach it."""

from __future__ import annotations

import math

from collsynth.instances.instance import make_instance
from collsynth.solvers.packing import equal_depth, forests, incumbent, joint, latency_choice
from collsynth.solvers.packing.emission import auto_pieces
from collsynth.solvers.packing.run_params import objective_models
from collsynth.solvers.producers import Options

from test_fixed_depth_candidate import _boxes


def _latency_pick(inst, f, objective: str | None):
    alpha = float(inst.topology.link_arrays.alpha.max())
    params = {"objective": objective} if objective else {}
    return latency_choice.latency_pick(inst, f, 1, alpha, Options(params=params), None,
                                       auto_pieces(f.trees, inst.collective.chunks_per_node))


def test_the_one_model_latency_choice_prices_the_default_pick(monkeypatch):
    """Two boxes of two GPUs, 64 KB allgather. Stand-in prices: every (trees, pieces) costs 1.0
    under ``sync`` and 0.6 under ``event`` but one pair ``P``, which costs 0.0 and 0.5: the
    default (``sync`` + ``event``) picks ``P`` (0.5 against 1.6). ``P`` is taken among the pairs
    the default prices and the ``event`` choice's own list does not (both lists follow the
    estimates, not the prices), so the old ``event`` choice returned a pair at 0.6, above the
    default's 0.5 under ``event``; now it prices ``P`` too and returns it."""
    inst = make_instance(_boxes(2, 2e-6, 5e-6), "allgather", message_bytes=2 ** 16)
    f = forests.forest(inst, "allgather", False)
    alpha = float(inst.topology.link_arrays.alpha.max())
    made = latency_choice.alternatives(inst, f, Options(), None, inst.collective.chunks_per_node,
                                       latency_choice.bandwidth_bound(inst, f, alpha))
    monkeypatch.setattr(latency_choice, "alternatives", lambda *a, **k: made)  # the same forests every call
    listed: dict = {"both": set(), "event": set()}
    target: list = []

    def price(part, g, pieces, models=("sync", "event")):
        key = (id(g), pieces)
        listed["event" if models == ("event",) else "both"].add(key)
        hit = key in target
        return {m: (0.0 if m == "sync" else 0.5) if hit else (1.0 if m == "sync" else 0.6) for m in models}

    monkeypatch.setattr(latency_choice, "price_pieces", price)
    _latency_pick(inst, f, None)
    by_default = set(listed["both"])
    listed["both"], listed["event"] = set(), set()
    _latency_pick(inst, f, "event")  # its own list, and the default's pick (at equal prices) priced under event
    target.append(sorted(by_default - listed["event"])[0])
    gd, qd, _ = _latency_pick(inst, f, None)
    assert (id(gd), qd) == target[0]  # the default picks P
    g, q, choice = _latency_pick(inst, f, "event")
    assert (id(g), q) == target[0], (choice, target)  # the old choice: a pair at 0.6
    assert choice.priced["objective_s"] == 0.5 and choice.default[0] is gd and choice.default[1] == qd


def _by_hand(chosen, default, calls: list):
    """Stand-in ``event`` prices of an overlapped pair at ``pieces`` (seconds, by hand): the
    joint choice's pair ``1 + |log2(q / 100)| / 20`` (least 1.0 at 100 pieces a half); the
    default's picks 0.95 at their own 16 / 23 pieces, 1.2 at any other; each offered to the
    run's ``kept`` as the real pricing does."""
    def price(instance, pair, pieces, models, kept):
        q = list(pieces)
        if all(f is g for f, g in zip(pair, default)):
            got = {"event": 0.95 if q == [16, 23] else 1.2}
            calls.append(("D", q))
        else:
            got = {"event": 1 + abs(math.log2(max(q) / 100)) / 20}
            calls.append(("A", q))
        kept.offer(pair, pieces, object(), got, 1, 0.0, 0.0)
        return got
    return price


def test_the_one_model_joint_choice_prices_the_halves_the_default_picks(monkeypatch):
    """The ``event`` halves picked 400 pieces each (pair A); the default objective picked one
    tree a shard at 16 and 23 pieces (pair D, carried by each pick's ``default``). Halving A's
    pieces finds 1.0 at 100 pieces a half, where D at its unequal 16 / 23 is 0.95 (stand-in
    prices, :func:`_by_hand`): the old search, halvings of 400 and 3/4, 3/2 of the best, never
    priced D there and returned A at 1.0. Now D is priced and returned, and kept."""
    from types import SimpleNamespace

    inst = make_instance(_boxes(2, 2e-6, 5e-6), "allreduce", message_bytes=2 ** 24)
    a = [forests.forest(inst, "allgather", t, None, False, 2) for t in (True, False)]
    d = [forests.forest(inst, "allgather", t, None, False, 1) for t in (True, False)]
    calls: list = []
    price = _by_hand(a, d, calls)

    def choice(instance, halves, depths, alpha, options, deadline, kept, early=None):  # as overlap.joint records it
        got = {"as picked": joint.certified_price(instance, a, depths, objective_models(options), kept)}
        return list(a), {"chosen": "as picked", "chosen_pieces": list(depths), "probe_pieces": list(depths),
                         "priced": got, "_pairs": {"as picked": tuple(a)}}

    monkeypatch.setattr(joint, "certified_price", price)
    monkeypatch.setattr(joint, "joint_choice", choice)
    monkeypatch.setattr(equal_depth, "prefer", lambda instance, chosen, depths, *rest: (chosen, depths, {}))
    picks = [(f, 400, SimpleNamespace(default=(g, q))) for f, g, q in zip(a, d, (16, 23))]
    kept = incumbent.Kept(("event",))
    chosen, depths, record, note = joint.choose_halves(inst, Options(params={"objective": "event"}), a, picks,
                                                       2e-6, None, kept)
    assert [f is g for f, g in zip(chosen, d)] == [True, True] and depths == [16, 23], (record, calls)
    assert kept.prices["event"] == 0.95 and kept.pieces == [16, 23]
    assert ("A", [100, 100]) in calls  # the halvings still ran: D wins on its price, not for want of a search
    # under the default objective the default's picks are its own: not priced again
    calls.clear()
    kept = incumbent.Kept(("sync", "event"))
    monkeypatch.setattr(joint, "certified_price", lambda instance, pair, pieces, models, kept_: (
        calls.append(("D" if pair[0] is d[0] else "A", list(pieces))) or
        kept_.offer(pair, pieces, object(), {m: 1.0 for m in models}, 1, 0.0, 0.0) or {m: 1.0 for m in models}))
    joint.choose_halves(inst, Options(), a, picks, 2e-6, None, kept)
    assert not any(name == "D" for name, _ in calls), calls
