"""The tree-packing producer's parameters as a run reads them.

The ``objective``, ``growth`` and ``shape`` parameters (declared with the producer,
:data:`collsynth.solvers.packing.producer.PARAMS`) are read in several choices; these are the
one reading of each, defaults included.
"""

from __future__ import annotations

from ..producers import Options

OBJECTIVES = {"sync+event": ("sync", "event"), "sync": ("sync",), "event": ("event",)}  # --param objective: the
# models whose priced sum the latency choice minimises (latency.estimate's "both", "sync", "event")


def objective_name(options: Options) -> str:
    """The ``objective`` parameter: ``sync+event`` unless set."""
    return options.params.get("objective") or "sync+event"


def objective_models(options: Options) -> tuple[str, ...]:
    """The cost models whose priced sum the run's choices minimise (:data:`OBJECTIVES`)."""
    return OBJECTIVES[objective_name(options)]


def grows_depth_first(options: Options) -> bool:
    """Whether trees grow depth-first while packing (the ``growth`` parameter)."""
    return options.params.get("growth") == "depth-first"


def asked_shape(options: Options) -> str:
    """The ``shape`` parameter: ``auto`` unless set."""
    return options.params.get("shape") or "auto"
