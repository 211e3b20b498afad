"""What a run's ``status`` says: the :class:`Status` members, each documented once here.

Every layer uses these members: a solver backend's verdict on one model
(:class:`~collsynth.solvers.backends.SolveResult`), a producer's outcome, and the row the
pipeline judges (:func:`collsynth.solvers.pipeline.judge`). They are strings (``StrEnum``), so
a stored row keeps its plain value (``"optimal"``) and an older store reads as before.

The one rule that separates a proof for the instance from a proof inside a model: a row is
``optimal`` only when its schedule's time under a named cost model (``sync``, ``ten``,
``event``) meets the instance's lower bound in that model; a schedule proven best only within
a restricted model (the fewest TEN timesteps at this chunking and timestep, the best of a
producer's own LP or ILP over its schedule class, symmetric schedules) is ``best-in-model``.
``bound_source`` names the model either way (``event: ...``, ``timesteps: ...``,
``timesteps: ten-ilp's own bound``). A producer or a solver saying ``optimal`` means optimal in
its own model; the row says ``optimal`` only with the instance's proof.

>>> Status("best-in-model").proven, Status.OPTIMAL.proven, Status.OPTIMAL == "optimal"
(False, True, True)
>>> Status.of_row("optimal", "timesteps: cut S={0-7}")
<Status.BEST_IN_MODEL: 'best-in-model'>
"""

from __future__ import annotations

import enum

_DOCS: dict[str, str] = {}


class Status(enum.StrEnum):
    """A run's (or a solve's) status; ``doc`` says what it means (:func:`legend`)."""

    OPTIMAL = "optimal"
    BEST_IN_MODEL = "best-in-model"
    FEASIBLE = "feasible"
    HEURISTIC = "heuristic"
    CONSTRUCTED = "constructed"
    INFEASIBLE = "infeasible"
    NO_SOLUTION = "no-solution"
    INVALID = "invalid"
    TIMEOUT = "timeout"
    ERROR = "error"
    SKIPPED = "skipped"

    @property
    def doc(self) -> str:
        """What the status means, one sentence."""
        return _DOCS[self.value]

    @property
    def proven(self) -> bool:
        """Whether a row of this status is proven optimal for the instance."""
        return self is Status.OPTIMAL

    @property
    def has_schedule(self) -> bool:
        """Whether a run of this status has a schedule in hand (verified, for a row)."""
        return self in _WITH_SCHEDULE

    @property
    def failed(self) -> bool:
        """Whether the run (or solve) failed for want of a solver or support, or crashed."""
        return self in (Status.ERROR, Status.SKIPPED)

    @classmethod
    def of_row(cls, status: str, bound_source: str | None = None) -> "Status":
        """The status a row means under the proof rule above: a stored ``optimal`` whose
        ``bound_source`` names no cost model (rows stored before the rule: TEN timesteps or a
        producer's own bound) reads as ``best-in-model``."""
        s = cls(status)
        if s is Status.OPTIMAL and bound_source and bound_model(bound_source) not in COST_MODELS:
            return Status.BEST_IN_MODEL
        return s


_DOCS.update({
    "optimal": "proven optimal for the instance: the schedule's time under the cost model that "
               "`bound_source` names (sync, ten or event) meets the instance's lower bound in that model",
    "best-in-model": "proven best only within the restricted model `bound_source` names (the fewest TEN "
                     "timesteps at this chunking and timestep, the producer's own LP or ILP over its schedule "
                     "class, symmetric schedules): a faster schedule outside that model may exist",
    "feasible": "a verified schedule without a proof of optimality (a limit stopped the solver with the "
                "schedule in hand, or no bound is met)",
    "heuristic": "a verified schedule of a heuristic (greedy), without a proof",
    "constructed": "a verified schedule of a construction (closed forms, expansions), without a proof",
    "infeasible": "the model has no schedule (at the horizon or in the class asked)",
    "no-solution": "no schedule by the limit (a solver's limit hit before any solution)",
    "invalid": "the schedule failed verification: `message` has the first violation; it is never priced",
    "timeout": "the time limit ended the run before it had a verified schedule: `message` says in which "
               "stage and what was done",
    "error": "the producer or the solver failed: `message` says how",
    "skipped": "not run: the producer does not support the instance, a solver is missing or over its "
               "licence, or the run would exceed the memory budget",
})
_WITH_SCHEDULE = frozenset({Status.OPTIMAL, Status.BEST_IN_MODEL, Status.FEASIBLE, Status.HEURISTIC,
                            Status.CONSTRUCTED})
SOLVED = (Status.OPTIMAL, Status.FEASIBLE)  # a solver's verdicts with values loaded into the model
COST_MODELS = ("sync", "ten", "event")  # the models in which a met bound proves a row optimal


def bound_model(bound_source: str) -> str:
    """The model a ``bound_source`` names: the text before its first colon.

    >>> bound_model("event: a cut"), bound_model("timesteps: ten-ilp's own bound")
    ('event', 'timesteps')
    """
    return bound_source.split(":", 1)[0].strip()


def legend(statuses=None) -> list[str]:
    """``status: meaning`` for each of ``statuses`` (default: every member), in the enum's order."""
    wanted = list(Status) if statuses is None else [s for s in Status if s.value in {str(x) for x in statuses}]
    return [f"{s.value}: {s.doc}" for s in wanted]


def markdown() -> str:
    """Every status as a Markdown table (``docs/results.md`` carries it; regenerate it with
    ``python -m collsynth.tens.status``)."""
    lines = ["| status | meaning |", "|---|---|"]
    lines += [f"| `{s.value}` | {s.doc.replace('|', '/')} |" for s in Status]
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown())
