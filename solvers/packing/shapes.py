"""Choosing among finished forests of different shapes by the prices of their schedules.

Zhao et al., "ForestColl" (arXiv 2402.06787), Section 5, pack trees against the cut condition
alone; any packing at the optimum is as good as another there, and the cost models tell them
apart: ring trees (:mod:`.rings`) keep every FIFO link busy (the ``event`` model) but are
deep, so the pipeline fills longer under ``sync`` and ``event-inorder``, while the greedy
packing's shallow trees starve some links under ``event`` (``benchmarks/bench_packing.py``:
DGX H100 at two boxes, rings 1.0003x the bound under ``event`` and 1.0033x under ``sync``,
the greedy trees 1.0022x and 1.0010x). Neither is better under every model, so the forests
are compared as finished schedules: each emitted at the pipeline depth the run would emit it
at, verified, and priced under :data:`MODELS`. The first candidate is the *reference* (the
shape the run would otherwise keep); another replaces it only when it is no slower under
every model, and of those kept the least total time over the models wins (ties to the
earlier). A run's trees are therefore never slower under any of these models than the
reference's, whichever model it is later priced under.
"""

from __future__ import annotations

from dataclasses import dataclass

MODELS = ("event", "sync", "event-inorder")  # the models every candidate is priced under


@dataclass
class Priced:
    """A candidate forest's schedule, its sends and its time under each model that prices it (s)."""

    name: str
    sends: int
    times: dict

    def as_dict(self) -> dict:
        """The candidate as plain data for a row's ``extra``."""
        return {"shape": self.name, "sends": self.sends, **{f"{m}_s": t for m, t in self.times.items()}}


def prices(instance, schedule, models: tuple = MODELS) -> dict:
    """``{model: seconds}`` of ``schedule`` under each of ``models`` that can price the
    instance (``event`` cannot where a switch hop is instant: left out)."""
    from ... import InputError
    from ...tens import cost_models
    from ...tens.ten import NotSupported

    out = {}
    for m in models:
        try:
            out[m] = cost_models.price(schedule, instance, m).total_s
        except (NotSupported, InputError):
            continue
    return out


def kept(priced: list[Priced]) -> str:
    """The name of the candidate kept (module doc): of ``priced`` (the reference first), those
    no slower than the reference under every model all of them were priced under, the least
    total time over those models; the earlier on ties.

    >>> ref, deep = Priced("greedy", 1, {"event": 1.0022, "sync": 1.0010}), Priced("rings", 1, {"event": 1.0003, "sync": 1.0033})
    >>> kept([ref, deep]), kept([ref, Priced("rings", 1, {"event": 1.0003, "sync": 1.0010})])
    ('greedy', 'rings')
    """
    models = set.intersection(*(set(p.times) for p in priced))
    ref = priced[0]
    ok = [p for p in priced if all(p.times[m] <= ref.times[m] for m in models)]
    return min(ok, key=lambda p: sum(p.times[m] for m in models)).name


def choose(instance, finished: dict, deadline=None) -> tuple[str | None, list[Priced]]:
    """``(name, priced)``: of ``finished`` (``{name: schedule}``, the reference first, each at
    the pipeline depth the run would emit it at), the one :func:`kept` keeps among those that
    verify (None when none does), and every verified candidate's prices. ``deadline``
    (:class:`collsynth.limits.Deadline`) is checked before each candidate."""
    from ...tens.verify import verify

    priced = []
    for name, sched in finished.items():
        if deadline is not None:
            deadline.check("shape choice", f"pricing {name}")
        if verify(sched, instance) is None:
            priced.append(Priced(name, len(sched), prices(instance, sched)))
    return (kept(priced) if priced else None), priced
