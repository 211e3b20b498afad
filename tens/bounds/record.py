"""A lower bound as a record (value, units, cost model, argument, witness), and how bounds combine.

Part of :mod:`collsynth.tens.bounds` (its module documentation describes every argument).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np



MODELS = ("timesteps", "ten", "event", "sync")
PARTS = ("timesteps", "ten", "event", "sync_latency", "sync_bandwidth", "steps")  # what Bounds computes, by name
UNITS = {"timesteps": "timesteps", "ten": "s", "event": "s", "sync": "s", "steps": "steps"}
CUT_BUDGET_S = 5.0  # seconds per model for the parametric min-cut search
FLOW_S_PER_UNIT = 1e-6  # one min cut takes about this times links x nodes seconds (measured: a
# 32x32 torus, 4096 links, 4 s per cut with networkx); a search needs one per node
TOL = 1e-9  # relative tolerance of float comparisons (times meeting bounds, cut violations)
TEN_SLACK = 2e-9  # discretize() rounds down costs within 1e-9 of a multiple of the timestep
BLOCK_CELLS = 1 << 22  # rows x nodes of the demand one vectorised step reads: its temporaries stay
# this small (tens of MB) however many rows there are (an all-to-all on 1,024 nodes has 2^20 rows)


@dataclass(frozen=True)
class Bound:
    """A lower bound: ``value`` in ``units`` under ``model``, proved by ``source`` on ``witness``.

    ``value`` is ``None`` when the bound was not computed; ``note`` then says why.
    """

    value: float | None
    units: str
    model: str
    source: str
    witness: Any = None
    note: str = ""

    @property
    def computed(self) -> bool:
        """True when the bound has a value."""
        return self.value is not None

    def label(self) -> str:
        """``source`` and a short witness, e.g. ``cut S={8-15}`` or ``inbound v=2``.

        >>> Bound(16, "timesteps", "timesteps", "cut", (8, 9, 10, 11, 12, 13, 14, 15)).label()
        'cut S={8-15}'
        """
        w = self.witness
        if w is None:
            return self.source
        if isinstance(w, tuple) and all(isinstance(x, (int, np.integer)) for x in w):
            return f"{self.source} S={{{_ranges(w)}}}"
        return f"{self.source} {w}"

    def as_dict(self) -> dict:
        """Plain JSON fields."""
        w = self.witness
        return {"value": self.value, "units": self.units, "model": self.model, "source": self.source,
                "witness": list(w) if isinstance(w, tuple) else w, "label": self.label(), "note": self.note}


def _ranges(ids) -> str:
    """``0,1,2,5`` -> ``0-2,5``."""
    ids = sorted(int(x) for x in ids)
    out, i = [], 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(out)


def not_computed(model: str, source: str, why: str) -> Bound:
    """A bound that could not be computed, and why (never 0, never a guess)."""
    return Bound(None, UNITS.get(model, "s"), model, source, None, f"not computed: {why}")


def best(bounds: Iterable[Bound], model: str) -> Bound:
    """The largest computed bound (the first of equals); not computed if none is."""
    bounds = list(bounds)
    have = [b for b in bounds if b.computed]
    if not have:
        why = "; ".join(f"{b.source}: {b.note}" for b in bounds) or "no argument applies"
        return Bound(None, UNITS[model], model, "none", None, why)
    top = max(b.value for b in have)
    return next(b for b in have if b.value == top)


def from_lp(value, note: str = "", relaxation: str = "TEN LP") -> Bound:
    """The bound of a TEN LP relaxation (timesteps; Won et al., TACOS, 2023, Section V-A
    relaxed), named by ``relaxation`` (the producer that proved it), as a record."""
    if value is None:
        return not_computed("timesteps", "lp", note or "the LP search did not finish")
    return Bound(int(value), "timesteps", "timesteps", "lp", relaxation, note)
