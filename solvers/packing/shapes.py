"""Choosing among finished forests of different shapes by the prices of their schedules.

Zhao et al., "ForestColl" (arXiv 2402.06787), Section 5, pack trees against the cut condition
alone; any packing at the optimum is as good as another there, and the cost models tell them
apart: ring trees (:mod:`.rings`) keep every FIFO link busy (the ``event`` model) but are
deep, so the pipeline fills longer under ``sync`` and ``event-inorder``, while the greedy
packing's shallow trees starve some links under ``event`` (``benchmarks/bench_packing.py``:
DGX H100 at two boxes, rings 1.0003x the bound under ``event`` and 1.0033x under ``sync``,
the greedy trees 1.0022x and 1.0010x). Neither is better under every model, so the forests
are compared as finished schedules, each emitted at the pipeline depth the run would emit it
at, verified and priced under the run's named models (the producer's ``objective``
parameter, ``sync+event`` by default, as its latency choice sums them): the least sum is
kept, the earlier candidate on ties, and the row says which models it was chosen for. A
schedule that does not verify is never kept.
"""

from __future__ import annotations

from dataclasses import dataclass



@dataclass
class Priced:
    """A candidate forest's schedule, its sends and its time under each model that prices it (s)."""

    name: str
    sends: int
    times: dict

    def as_dict(self) -> dict:
        """The candidate as plain data for a row's ``extra``."""
        return {"shape": self.name, "sends": self.sends, **{f"{m}_s": t for m, t in self.times.items()}}


def prices(instance, schedule, models: tuple) -> dict:
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
    """The name of the candidate of least total time over the models all of ``priced`` were
    priced under; the earlier on ties.

    >>> greedy = Priced("greedy", 1, {"event": 1.0022, "sync": 1.0010})
    >>> kept([Priced("rings", 1, {"event": 1.0003, "sync": 1.0033}), greedy])
    'greedy'
    """
    models = set.intersection(*(set(p.times) for p in priced))
    return min(priced, key=lambda p: sum(p.times[m] for m in models)).name


def choose(instance, finished: dict, models: tuple, deadline=None) -> tuple[str | None, list[Priced]]:
    """``(name, priced)``: of ``finished`` (``{name: a function emitting its schedule}``, each at
    the pipeline depth the run would emit it at; emitted one at a time, so that one is held at
    once), the one :func:`kept` keeps among those that verify, priced under ``models`` (None
    when none verifies), and every verified candidate's prices. ``deadline``
    (:class:`collsynth.limits.Deadline`) is checked before each candidate."""
    from ...tens.verify import verify

    priced = []
    for name, emitted in finished.items():
        if deadline is not None:
            deadline.check("shape choice", f"pricing {name}")
        sched = emitted()
        if verify(sched, instance) is None:
            priced.append(Priced(name, len(sched), prices(instance, sched, models)))
        del sched
    return (kept(priced) if priced else None), priced
