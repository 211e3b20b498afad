"""The ``event`` price of a schedule kept as trees (or an allreduce's two forests) moved by box
shifts, simulated per link orbit (:mod:`collsynth.tens.pipelined_event`), at the pipeline depth
of least price: what the cluster benchmarks report under ``event``.

>>> depths(48)
[1, 2, 4, 8, 16, 32, 48]
"""

from __future__ import annotations

import time

EVENT_SENDS = 8_000_000  # sends simulated at the most per depth tried


def depths(deepest: int) -> list[int]:
    """The pipeline depths tried: the powers of two below ``deepest``, then ``deepest``."""
    out = [1 << i for i in range(max(1, deepest).bit_length()) if 1 << i < deepest]
    return out + [max(1, deepest)]


def with_pieces(form, pieces: int):
    """``form`` (trees, or an allreduce's two forests) at ``pieces`` pipeline pieces per chunk:
    its own piece edges at its own depth, else equal pieces
    (:func:`collsynth.solvers.packing.compact.at_pieces`); an allreduce whose allgather is
    overlapped with its reduce-scatter keeps its mirror and takes the least shift at the new
    pieces (:func:`collsynth.tens.allreduce_overlap.least_delay`)."""
    from collsynth.solvers.packing.compact import at_pieces

    halves = getattr(form, "halves", None)
    if halves is None:
        return at_pieces(form, pieces)
    halves = [at_pieces(h, pieces) for h in halves]
    if form.delay is None or [h.pieces for h in halves] == list(form.pieces):
        return type(form)(*halves, delay=form.delay, mirror=form.mirror)
    from collsynth.tens.allreduce_overlap import least_delay  # an overlapped allreduce stays overlapped

    return type(form)(*halves, delay=least_delay(*halves, form.mirror), mirror=form.mirror)


def least_event(form, inst, deepest: int, budget: int = EVENT_SENDS) -> dict:
    """The least ``event`` price per link orbit over :func:`depths` up to ``deepest`` whose
    simulation stays within ``budget`` sends: ``event_ms``, ``event_pieces``, the sends
    simulated there, the shifts listed, whether pieces waited for exact dependency pairs (else
    group prefixes), and the seconds of every depth tried (``event_s``)."""
    from collsynth.tens import pipelined_event

    t = time.perf_counter()
    best: dict = {}
    for pieces in depths(deepest):
        f = with_pieces(form, pieces)
        if pipelined_event.sends_priced(f, inst) > budget:
            break
        cost = pipelined_event.price(f, inst)
        if not best or cost.total_s < best["event_ms"] / 1e3:
            best = {"event_ms": 1e3 * cost.total_s, "event_pieces": pieces,
                    "event_simulated": cost.extra["simulated_sends"], "event_listed_shifts": cost.extra["listed_shifts"],
                    "event_exact_pairs": cost.extra["exact_pairs"]}
    return {**best, "event_s": time.perf_counter() - t}
