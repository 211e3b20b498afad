"""A solver's figures made plain: :func:`finite` (a float, or None for what is not a finite
number) and :func:`relative_gap`.

This module imports nothing but :mod:`math`: the OR-Tools child process
(:mod:`.ortools_worker`) reads its solver's objective and bound with it and must start without
Pyomo or HiGHS; the backends get the same functions through :mod:`.request`.

>>> finite("2.5"), finite(float("inf")), finite(None), relative_gap(10.0, 9.0)
(2.5, None, None, 0.1)
"""

from __future__ import annotations

import math


def finite(x) -> float | None:
    """``x`` as a float when it is a finite number, else None."""
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def relative_gap(objective: float | None, bound: float | None) -> float | None:
    """``|bound - objective| / max(1, |objective|)``, None unless both are finite."""
    if objective is None or bound is None or not math.isfinite(objective) or not math.isfinite(bound):
        return None
    return abs(bound - objective) / max(1.0, abs(objective))
