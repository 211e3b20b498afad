"""Where a horizon search that ended before it proved its answer stopped, why, and how long it
had left: the record a row keeps as ``extra["stopped"]`` and the sentence its message starts with."""

from __future__ import annotations

from typing import Any

from ...limits import Deadline


def stop_record(clock: Deadline, at: int, top: int, reason: str) -> dict[str, Any]:
    """Where a search that ended before it proved its answer stopped, why, and its time: the
    horizon it was at, the largest it meant to try, the seconds spent of the run's limit and
    the seconds left (``None`` without a limit). The row keeps it as ``extra["stopped"]``."""
    left = clock.left()
    spent = None if left is None or clock.limit is None else clock.limit - left
    return {"at_horizon": int(at), "top_horizon": int(top), "reason": reason, "elapsed_s": spent,
            "limit_s": clock.limit, "left_s": left}


def stop_sentence(stop: dict[str, Any]) -> str:
    """The stop record (:func:`stop_record`) in words.

    >>> stop_sentence({"at_horizon": 14, "top_horizon": 20, "reason": "time limit", "elapsed_s": 58.08,
    ...                "limit_s": 60.0, "left_s": 1.92})
    'stopped at horizon 14 of 20 after 58.1 s of 60 s: time limit (1.9 s left)'
    """
    when = "" if stop["elapsed_s"] is None else f" after {stop['elapsed_s']:.1f} s of {stop['limit_s']:g} s"
    left = "" if stop["left_s"] is None else f" ({stop['left_s']:.1f} s left)"
    return f"stopped at horizon {stop['at_horizon']} of {stop['top_horizon']}{when}: {stop['reason']}{left}"
