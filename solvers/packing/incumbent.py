"""The best verified allreduce a run has priced so far, kept for when its time runs out.

An allreduce's two forests are chosen together (:mod:`.overlap`): every candidate pair is
emitted as the whole overlapped allreduce, verified and priced (Zhao et al., "ForestColl", arXiv
2402.06787, Section 4: allreduce as reduce-scatter then allgather). The first pair priced is the
halves as picked, reduce-scatter then allgather, cheap at the probe's pieces; the capacity split
(:mod:`.capacity_split`) comes last and costs most (DGX-2 x2, 1 GB: its 21 deep trees a shard at 200
pieces are 8.4 M sends). :class:`Kept` holds the least priced of those verified schedules, so a run
whose limit comes later still returns a verified schedule, and the one chosen is not emitted twice,
nor verified or priced twice: it is kept with its verdict and prices
(:class:`collsynth.tens.certified.Certified`), which the pipeline takes where they hold for the
very schedule it returns, after checking its content's digest.

It also says whether a probe fits the time left (:meth:`Kept.fits`): the seconds a send took
in the last probe (emitted, overlapped, verified, priced under the objective's models: measured,
so the machine's load is in it) times the probe's sends, plus the time the pipeline needs to
check the kept schedule's verdict (or the probe's, should it be kept) again (:data:`RESERVE`
times its digest), must be left before the probe starts, since its compiled kernels cannot be
interrupted. Sends differ: DGX-2 x2's split pair (its forests cut at each other's boundaries,
:func:`.overlap.aligned`) verified at 7.2 us a send (61 s of CPU and 7.7 GB for 8.4 M sends), the
halves as picked at 0.9 us, so a probe of another pair starts at few pieces where time is short,
and doubles them while the rate it measured itself fits (:func:`.overlap.joint`).

>>> k = Kept(("sync", "event"))
>>> picked, split = ["rs", "ag"], ["rs on its share", "ag on its share"]  # two pairs of forests
>>> k.offer(picked, [200, 200], "schedule A", {"sync": 2.0, "event": 1.0}, sends=100, seconds=1.0, check_s=0.25)
>>> k.offer(split, [100, 100], "schedule B", {"sync": 1.5, "event": 1.0}, sends=400, seconds=2.0, check_s=0.5)
>>> k.schedule, k.objective, k.seconds_per_send
('schedule B', 2.5, 0.005)
>>> k.holds(split, [100, 100]), k.holds(split, [200, 200]), k.holds(picked, [200, 200])
(True, False, False)
>>> k.needs(1000)  # 1000 sends at 5 ms, then the kept schedule's verdict (0.5 s) or these (1.25 ms a send) checked
7.5
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ...limits import TooBig
from ...tens import certified
from ..producers import Unsupported
from . import latency
from .emission import auto_pieces, check_sends, emit, with_header
from .packed import packed_seconds
from .tree_hops import depth_of
from .trees import hops_of

RESERVE = 2.0  # times the kept schedule's digest in the probe: what the pipeline needs to check its verdict again
FIRST_SENDS = 500_000  # sends, at most, of a rooted reduce's first forest kept (first_kept): a second or two
# to verify and price, like the latency choice's whole pricing budget


@dataclass
class Kept:
    """The least priced verified allreduce so far (summed over ``models``) and what probes cost."""

    models: tuple
    schedule: object = None
    pair: tuple = ()  # the forests (reduce-scatter, allgather) it was emitted from
    pieces: list = field(default_factory=list)
    prices: dict = field(default_factory=dict)
    check_s: float = 0.0  # the kept schedule's digest in its probe (the pipeline checks its verdict so)
    seconds_per_send: float = 0.0  # of the last probe: emitting, verifying and pricing, per send
    check_per_send: float = 0.0  # of the last probe: its digest, per send
    certified: object = None  # the kept schedule's verdict and prices (collsynth.tens.certified.Certified)
    priced: dict = field(default_factory=dict)  # content digest -> (prices or None, sends, seconds, check_s)

    @property
    def objective(self) -> float:
        """The kept schedule's prices summed over the models (infinite when none is kept)."""
        return sum(self.prices[m] for m in self.models) if self.prices else float("inf")

    def offer(self, pair, pieces, schedule, prices: dict, sends: int, seconds: float, check_s: float,
              certified=None) -> None:
        """The verified schedule of ``pair`` at ``pieces``, of ``sends`` sends, priced at
        ``prices`` in ``seconds`` (``check_s`` of them its verdict's digest, what the pipeline
        computes again to take the verdict): kept when its summed
        price is less than the kept one's (the first kept on a tie), with ``certified``, its
        verdict and prices (:class:`collsynth.tens.certified.Certified`), which the pipeline
        takes instead of verifying and pricing it again."""
        self.measured(sends, seconds, check_s)
        if sum(prices[m] for m in self.models) < self.objective:
            self.schedule, self.pair, self.pieces, self.prices = schedule, tuple(pair), list(pieces), dict(prices)
            self.check_s, self.certified = check_s, certified

    def measured(self, sends: int, seconds: float, check_s: float) -> None:
        """The rates of the last probe: ``sends`` sends emitted, verified and priced in
        ``seconds``, ``check_s`` of them its verdict's digest (:meth:`needs`)."""
        self.seconds_per_send, self.check_per_send = seconds / max(1, sends), check_s / max(1, sends)

    def remember(self, key: bytes, prices: dict | None, sends: int, seconds: float, check_s: float) -> None:
        """Keep the prices (None: it did not verify) of the schedule of content ``key``
        (:func:`collsynth.tens.certified.digest` and the models), its ``sends`` and what
        emitting, verifying and pricing it took, for :meth:`known`."""
        self.priced[key] = (prices, sends, seconds, check_s)

    def known(self, key: bytes) -> tuple | None:
        """``(prices, sends, seconds, check_s)`` as :meth:`remember` kept them for the schedule
        of content ``key``, else None. The verifier and the cost models read nothing but a
        schedule's content and the run's instance, so a schedule of the same content verifies
        alike and prices the same, float for float: it is neither verified nor priced again.

        >>> k = Kept(("sync",))
        >>> k.remember(b"A", {"sync": 2.0}, 100, 1.0, 0.25)
        >>> k.known(b"A"), k.known(b"B")
        (({'sync': 2.0}, 100, 1.0, 0.25), None)
        """
        return self.priced.get(key)

    def holds(self, forests, pieces) -> bool:
        """Whether the kept schedule is ``forests`` (the very objects) at ``pieces``."""
        return (self.schedule is not None and len(forests) == len(self.pair) and
                all(f is g for f, g in zip(forests, self.pair)) and list(pieces) == self.pieces)

    def needs(self, sends: int) -> float:
        """Seconds a probe of ``sends`` sends is expected to take, and then the pipeline's
        check of the kept schedule's verdict or of the probe's, whichever is longer."""
        return sends * self.seconds_per_send + RESERVE * max(self.check_s, sends * self.check_per_send)

    def fits(self, sends: int, deadline) -> bool:
        """Whether a probe of ``sends`` sends fits the time ``deadline`` leaves (:meth:`needs`);
        always before the first probe, and without a limit."""
        left = None if deadline is None else deadline.left()
        return left is None or self.schedule is None or self.needs(sends) <= left


def first_kept(instance, f, pieces: int | None, models: tuple) -> Kept:
    """A :class:`Kept` holding the rooted reduce's packed forest ``f`` at ``pieces`` (None: at
    :func:`first_pieces`), fewer where that would be over :data:`FIRST_SENDS` sends (at least
    one piece), emitted, verified (:func:`collsynth.tens.certified.certify`) and priced under
    ``models`` before the run's longer choices (the latency choice's searches and pricing), so
    that a run whose limit comes during them returns a verified schedule; empty where ``f``
    cannot be emitted (the run's own choice says why), would not fit the memory budget or does
    not verify. The trees are pipelined as Zhao et al. ("ForestColl", arXiv 2402.06787, Section
    5) pipeline them, at one depth."""
    kept = Kept(models)
    t = time.perf_counter()
    chunks = instance.collective.chunks_per_node
    pieces = max(1, min(pieces or first_pieces(instance, f, models), FIRST_SENDS // max(1, hops_of(f.trees) * chunks)))
    try:
        check_sends([f], [pieces], chunks)
        sched = with_header(emit(instance, f, pieces), instance)
    except (TooBig, Unsupported):
        return kept
    verdict = certified.certify(sched, instance)
    if verdict is not None:
        got = {m: verdict.price(m).total_s for m in models}
        kept.offer((f,), [pieces], sched, got, len(sched), time.perf_counter() - t, verdict.digest_s, verdict)
    return kept


def first_pieces(instance, f, models: tuple) -> int:
    """The pieces of ``f``'s first schedule: ForestColl's one depth (:func:`.emission.auto_pieces`;
    Zhao et al., arXiv 2402.06787, Section 5), or with a latency per step the depth of least
    :func:`.latency.estimate` for ``f`` alone under ``models`` (:func:`.latency.choose`; TACOS
    4x4x2 at 1 GB: 256 pieces, 3 % over the rooted depth bound under ``sync`` where 1,600 are 36 %)."""
    chunks = instance.collective.chunks_per_node
    automatic = auto_pieces(f.trees, chunks)
    alpha = float(instance.topology.link_arrays.alpha.max()) if len(instance.topology.link_arrays) else 0.0
    if alpha <= 0:
        return automatic
    one = latency.Candidate(f.k, packed_seconds(instance, f), depth_of(f.trees), hops_of(f.trees), automatic, chunks)
    return latency.choose([one], alpha, (0, automatic), "both" if len(models) > 1 else models[0]).pieces


def in_time(kept: Kept, chosen: list, pieces: list, sends: int, deadline) -> tuple[list, list, str, str]:
    """``(forests, pieces, note, stopped)``: the run's choice ``chosen`` at ``pieces`` (``sends``
    sends), or ``kept``'s verified schedule instead where the choice is another one and would
    not fit the time left (:meth:`Kept.fits`; never once ``deadline`` has passed: the choice was
    then cut short, its pick neither verified nor priced); ``note`` says why the kept one was
    taken, ``stopped`` that the time limit cut the choice short ("" when it did not)."""
    stopped = f"time limit {deadline.limit:g} s reached during the choice" if deadline.expired() else ""
    if kept.schedule is None or kept.holds(chosen, pieces) or (kept.fits(sends, deadline) and not stopped):
        return chosen, pieces, "", stopped
    note = "" if stopped else (f"the choice at {'/'.join(map(str, pieces))} pieces ({sends:,} sends) would not fit "
                               f"the time left: kept at the {'/'.join(map(str, kept.pieces))} pieces it was priced at")
    return list(kept.pair), kept.pieces, note, stopped

