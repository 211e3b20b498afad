"""Tree count and pipeline depth per message size for tree packing: where ForestColl ignores alpha.

Zhao et al., "ForestColl: Throughput-Optimal Collective Communications on Heterogeneous Network
Fabrics" (arXiv 2402.06787), Sections 4-5, choose the trees for bandwidth alone (alpha = 0) and
pipeline them at a fixed depth. With a latency ``alpha`` per hop that is far from best for small
messages: a tree ``D`` steps deep cut into ``q`` pieces (over all chunks) takes, in the
synchronous alpha-beta model (Thakur, Rabenseifner, Gropp, "Optimization of collective
communication operations in MPICH", IJHPCA 2005, Section 3: one step per piece and hop),

    sync(q)  = (q + D - 1) (alpha + T / q)

and in the event model (FIFO links, latency overlapped with the next piece)

    event(q) = T (1 + (D - 1) / q) + D alpha,

``T`` the trees' bandwidth time for the whole message. :func:`choose` evaluates a few
candidates (the trees packed at the throughput optimum's ``k`` and, when it differs, at
``k = 1``, also at ``k = 1`` in capacities of 2 and 4 times its least time, shallower; one
shortest-path tree per root, the shallowest, whose ``T`` is its busiest link's load; pieces in a geometric range, the sync optimum ``sqrt(T (D - 1) / alpha)`` and the fixed
depth ForestColl-style pipelining would use, the *baseline*) under the sum of the two estimates
and keeps the least. The baseline (candidate 0, the optimum's ``k``, at the producer's automatic
pieces) is always among them, so the choice is never worse than it in the estimate it minimises.

The estimates do not see FIFO starvation (the event model serves a link first come, first
served, and a GPU's own pieces, ready at time 0, leave before everything it relays), so where
the schedules are small the producer prices real ones instead: :func:`price_order` lists the
(candidate, pieces) pairs worth pricing (the estimate's pick, the baseline, and pieces near
each candidate's own best, :func:`near`), :func:`within_budget` keeps those that fit a send
budget, and the producer keeps the pair of least priced sync + event time.

>>> best = choose([Candidate(k=1, seconds=1e-5, depth=4, hops=30, most=400)], alpha=1e-6, baseline=(0, 400))
>>> best.pieces < 400
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MODELS = ("sync", "event", "both")


@dataclass(frozen=True)
class Candidate:
    """Packed trees at ``k`` trees per shard: their bandwidth time ``seconds`` for the whole
    message, the steps ``depth`` from a root to its deepest node, the sends per piece ``hops``,
    the most pieces per chunk the send budget allows ``most``, and the ``chunks`` each root
    sends (each cut into the same pieces: ``q = chunks * pieces`` pipeline stages).
    ``priced_only``: a candidate listed only to be priced (its estimate is not trusted: it may
    win priced, never on its estimate alone; :func:`trusted`)."""

    k: int
    seconds: float
    depth: int
    hops: int
    most: int
    chunks: int = 1
    name: str = ""
    priced_only: bool = False


@dataclass(frozen=True)
class Choice:
    """The chosen trees (``name``, ``k`` per shard) and pieces, their estimate, and the
    baseline's: ``baseline`` is its ``(candidate index, pieces)``, ``baseline_k`` its trees per
    shard."""

    name: str
    k: int
    pieces: int
    estimate_s: float
    baseline_estimate_s: float
    model: str
    candidates: int
    baseline: tuple[int, int] = (0, 0)
    baseline_k: int = 0
    index: int = 0  # of the chosen candidate
    priced: dict | None = None  # how real prices chose (the producer's), None: by the estimate alone
    default: tuple | None = None  # under one model's objective: (forest, pieces) the default objective picks

    def as_dict(self) -> dict:
        """The choice as plain data for a row's ``extra``: ``how`` it was made (``priced``: the
        least priced sync + event time, ``estimate``: the least estimate) and, when priced,
        the prices (``priced``)."""
        out = {"trees": self.name, "k": self.k, "pieces": self.pieces, "estimate_s": self.estimate_s,
               "baseline_estimate_s": self.baseline_estimate_s, "baseline_k": self.baseline_k,
               "baseline_pieces": self.baseline[1],
               "model": self.model, "candidates": self.candidates}
        out["how"] = "priced" if self.priced and self.priced.get("schedules") else "estimate"
        if self.priced is not None:
            out["priced"] = self.priced
        if self.default is not None:
            out["default_pick"] = {"trees_per_shard": self.default[0].k, "pieces": self.default[1]}
        return out


def sync_estimate(seconds: float, depth: int, pieces: int, alpha: float) -> float:
    """``(q + D - 1)(alpha + T / q)``: the synchronous model's time of ``q`` pieces (module doc).

    >>> sync_estimate(1.0, 3, 2, 0.5)
    4.0
    """
    return (pieces + max(1, depth) - 1) * (alpha + seconds / pieces)


def event_estimate(seconds: float, depth: int, pieces: int, alpha: float) -> float:
    """``T (1 + (D - 1) / q) + D alpha``: the event model's time of ``q`` pieces (module doc).

    >>> event_estimate(1.0, 3, 2, 0.5)
    3.5
    """
    depth = max(1, depth)
    return seconds * (1 + (depth - 1) / pieces) + depth * alpha


def estimate(model: str, seconds: float, depth: int, pieces: int, alpha: float) -> float:
    """The estimate ``model`` names: ``sync``, ``event`` or ``both`` (their sum)."""
    if model == "sync":
        return sync_estimate(seconds, depth, pieces, alpha)
    if model == "event":
        return event_estimate(seconds, depth, pieces, alpha)
    return sync_estimate(seconds, depth, pieces, alpha) + event_estimate(seconds, depth, pieces, alpha)


def piece_range(c: Candidate, alpha: float) -> list[int]:
    """Pieces per chunk to try: powers of two up to ``c.most``, ``c.most`` itself and the sync
    optimum ``sqrt(T (D - 1) / alpha)`` (in stages, over the chunks) rounded both ways
    (clipped to ``1 .. c.most``).

    >>> piece_range(Candidate(1, 1.0, 3, 10, 10), 0.5)
    [1, 2, 4, 8, 10]
    """
    most = max(1, c.most)
    out = {most} | {2 ** i for i in range(int(math.log2(most)) + 1)}
    if alpha > 0 and c.depth > 1:
        best = math.sqrt(c.seconds * (c.depth - 1) / alpha) / max(1, c.chunks)
        out |= {min(most, max(1, math.floor(best))), min(most, max(1, math.ceil(best)))}
    return sorted(out)


def choose(candidates: list[Candidate], alpha: float, baseline: tuple[int, int], model: str = "both",
           trusted_only: bool = False) -> Choice:
    """The candidate (trees, pieces) of least :func:`estimate` under ``model`` (among those not
    ``priced_only`` when ``trusted_only``); ``baseline`` is ``(index of the candidate, pieces)``
    of ForestColl's pipelining at one depth (module doc), always evaluated. Ties go to the
    earlier candidate, then to more pieces."""
    tried = [(estimate(model, c.seconds, c.depth, q * c.chunks, alpha), i, -q)
             for i, c in enumerate(candidates) if not (trusted_only and c.priced_only) for q in piece_range(c, alpha)]
    bi, bq = baseline
    b = candidates[bi]
    baseline_s = estimate(model, b.seconds, b.depth, bq * b.chunks, alpha)
    tried.append((baseline_s, bi, -bq))
    best_s, i, q = min(tried)
    c = candidates[i]
    return Choice(c.name, c.k, -q, best_s, baseline_s, model, len(tried), (bi, bq), b.k, i)


def trusted(choice: Choice, candidates: list[Candidate], alpha: float) -> Choice:
    """``choice`` where its candidate's estimate is trusted, else the least estimate under its
    model among the candidates that are (:func:`choose` without the ``priced_only`` ones; the
    baseline, candidate 0, always is): what the choice is where it cannot be priced. The
    estimates miss FIFO starvation at relays (module doc), so a candidate listed only to be
    priced (ForestColl's greedy trees, Zhao et al., "ForestColl", arXiv 2402.06787, Section 5,
    which pipeline at one depth whatever alpha) may only win on a price.

    >>> cands = [Candidate(1, 1e-3, 8, 10, 400), Candidate(1, 1e-3, 2, 10, 400, priced_only=True)]
    >>> pick = choose(cands, 1e-6, (0, 400))
    >>> (pick.index, trusted(pick, cands, 1e-6).index)
    (1, 0)
    """
    if not candidates[choice.index].priced_only:
        return choice
    return choose(candidates, alpha, choice.baseline, choice.model, trusted_only=True)


def near(q: int, most: int) -> list[int]:
    """Pieces near ``q`` worth pricing: ``q - 2 .. q + 2`` and ``q`` times the powers of
    ``sqrt 2`` from 1/4 to 4, rounded, within ``1 .. most`` (the pipeline depth ForestColl,
    Zhao et al., arXiv 2402.06787, Section 5, fixes).

    >>> near(5, 12)
    [1, 2, 3, 4, 5, 6, 7, 10]
    """
    out = {q + d for d in range(-2, 3)} | {round(q * 2 ** (e / 2)) for e in range(-4, 5)}
    return sorted(x for x in out if 1 <= x <= max(1, most))


def price_order(candidates: list[Candidate], alpha: float, pick: tuple[int, int], baseline: tuple[int, int],
                model: str = "both") -> list[tuple[int, int]]:
    """``(candidate index, pieces)`` pairs to price, each once: the estimate's ``pick`` first,
    the ``baseline`` next, then :func:`near` each candidate's own least-estimate pieces, by
    increasing estimate (the module doc's estimates; Zhao et al., "ForestColl", arXiv
    2402.06787, ignore alpha).

    >>> c = Candidate(1, 1e-5, 4, 30, 400)
    >>> price_order([c], 1e-6, (0, 5), (0, 400))[:4]
    [(0, 5), (0, 400), (0, 8), (0, 7)]
    """
    rest = []
    for i, c in enumerate(candidates):
        own = min(piece_range(c, alpha), key=lambda q: (estimate(model, c.seconds, c.depth, q * c.chunks, alpha), -q))
        rest += [(estimate(model, c.seconds, c.depth, q * c.chunks, alpha), i, q) for q in near(own, c.most)]
    out = [pick, baseline] + [(i, q) for _, i, q in sorted(rest)]
    return list(dict.fromkeys(out))


def latency_floor(depth: int, stages: int, alpha_min: float, models: tuple) -> float:
    """A lower bound on the priced time summed over ``models`` of pipelined trees whose hops
    lie at most ``depth - 1`` steps below their roots, cut into ``stages`` pieces over all
    chunks, when every link's latency is at least ``alpha_min``: under ``sync`` every one of
    the ``stages + depth - 1`` steps carries a send, and a step lasts at least its largest
    route latency (Thakur, Rabenseifner, Gropp, IJHPCA 2005, Section 3: one step per piece and
    hop); under ``event`` the deepest piece crosses ``depth`` links one after another, each
    arrival ``alpha`` after it leaves (module doc's ``D alpha``); other models count 0. The
    latency part of the module doc's estimates at ``alpha_min``, without their bandwidth part.

    >>> latency_floor(3, 2, 0.5, ("sync", "event"))
    3.5
    >>> latency_floor(3, 2, 0.5, ("event-inorder",))
    0.0
    """
    depth = max(1, depth)
    per = {"sync": (stages + depth - 1) * alpha_min, "event": depth * alpha_min}
    return sum(per.get(m, 0.0) for m in models)


def sends(c: Candidate, pieces: int) -> int:
    """Sends of candidate ``c`` cut into ``pieces`` per chunk: its hops per piece, every chunk
    (each tree of Zhao et al., "ForestColl", arXiv 2402.06787, Section 5, sends every piece
    once per hop)."""
    return c.hops * pieces * max(1, c.chunks)


def within_budget(pairs: list[tuple[int, int]], candidates: list[Candidate], budget: int) -> list[tuple[int, int]]:
    """The pairs, in order, whose sends fit ``budget`` together (a pair that does not fit what is
    left is skipped); none when the first (the estimate's pick) does not fit alone: prices are
    only compared with the pick priced among them (a budget on the pipelined trees of Zhao et
    al., "ForestColl", arXiv 2402.06787, Section 5).

    >>> c = [Candidate(1, 1e-5, 4, 10, 400)]
    >>> within_budget([(0, 5), (0, 400), (0, 6)], c, 120)
    [(0, 5), (0, 6)]
    >>> within_budget([(0, 20)], c, 120)
    []
    """
    out, left = [], budget
    for i, q in pairs:
        n = sends(candidates[i], q)
        if n <= left:
            out.append((i, q))
            left -= n
        elif not out:
            return []
    return out
