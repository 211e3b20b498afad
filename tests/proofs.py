"""What status a row proven best in its own units must carry, read from the row's own times
and bounds (the rule of ``docs/results.md``, written out here apart from the pipeline's).

A row proven in TEN timesteps, or by its producer's own bound, is ``optimal`` only when its
schedule's time under one of the cost models meets that model's lower bound; otherwise it is
``best-in-model``.
"""

from __future__ import annotations

MODELS = ("sync", "ten", "event")
TOL = 1e-9


def meets_a_cost_model_bound(row: dict) -> bool:
    """Whether the row's time under some cost model is at most that model's lower bound."""
    for m in MODELS:
        t = row.get(f"time_{m}_s")
        b = row.get("lower_bound_s" if m == "sync" else f"lower_bound_{m}_s")
        if t is not None and b is not None and t <= b * (1 + TOL):
            return True
    return False


def proven_status(row: dict) -> str:
    """``optimal`` or ``best-in-model``: the status of a row proven best in its own model."""
    return "optimal" if meets_a_cost_model_bound(row) else "best-in-model"
