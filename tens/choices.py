"""The names a user picks among in the schedule language, known without loading it: the cost
models, the peers' schedule formats, the MSCCL dialects and the MSCCL++ thread-block default.

A command line's ``--help`` lists these as choices and defaults, so this module imports the
standard library only (no numpy, numba, networkx or SciPy; ``tests/test_help_imports.py``
checks what ``--help`` loads). The modules that use the names import them from here.

>>> cost_model_names()
('event', 'event-inorder', 'runtime', 'sync', 'ten')
"""

from __future__ import annotations

import pkgutil
import sys
from pathlib import Path

PEER_SCHEDULE_FORMATS = ("msccl-xml", "teccl-output", "mscclpp-json")  # collsynth.tens.peer_schedules
MSCCL_DIALECTS = ("msccl-executor", "msccl-tools")  # collsynth.tens.export: the runtimes' collective names
DEFAULT_MSCCL_DIALECT = "msccl-executor"
MAX_THREADBLOCKS = 108  # collsynth.tens.export_mscclpp: resident thread blocks (SMs of an A100); an option

_COST_MODELS = f"{__package__}.cost_models"


def cost_model_names() -> tuple[str, ...]:
    """The names of the cost models (:mod:`collsynth.tens.cost_models`, the opt-in ones
    included), sorted: those of its registry when it is loaded (with any module added to its
    path since), else the names of the modules in its folder (``_`` read as ``-``), each of
    which defines the model it is named after (the registry refuses a module whose model has
    another name), found without importing them."""
    registry = sys.modules.get(_COST_MODELS)
    if registry is not None:
        return tuple(sorted(registry.all_names()))
    folder = Path(__file__).with_name("cost_models")
    return tuple(sorted(info.name.replace("_", "-") for info in pkgutil.iter_modules([str(folder)])))
