"""Closed-form algorithm families (classic collectives, Swing, OpTree and the optical baselines), one module per family.

Each module defines a ``PRODUCERS`` list of :class:`~collsynth.solvers.producers.Producer`;
this package collects them all, so adding a family is adding one module.
"""

from __future__ import annotations

import importlib
import pkgutil

PRODUCERS = []
for _info in pkgutil.iter_modules(__path__):
    if not _info.name.startswith("_"):
        PRODUCERS.extend(getattr(importlib.import_module(f"{__name__}.{_info.name}"), "PRODUCERS", ()))
