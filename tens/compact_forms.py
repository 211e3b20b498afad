"""The forms a schedule is kept in besides explicit sends, and the module of each.

A schedule of thousands of GPUs is kept as trees plus a pipeline rule (Zhao et al.,
"ForestColl", arXiv 2402.06787, Section 5; ``docs/schedules.md``): one forest
(:mod:`collsynth.tens.pipelined_trees`) or an allreduce's two, in turn or side by side
(:mod:`collsynth.tens.pipelined_allreduce`). Each module has the same functions: ``verify(form,
instance)`` (the verdict :func:`collsynth.tens.verify.verify` gives the expansion), ``price_sync(form,
instance)`` (its ``sync`` price), ``expand(form)`` (the explicit sends), ``to_json``,
``from_json`` and ``write_json``; the form has ``sends`` (how many :func:`expand` lists). A new
form is one module and one entry of :data:`FORMS`.

>>> import numpy as np
>>> form_of(np.zeros(1)) is None
True
"""

from __future__ import annotations

from types import ModuleType

from . import pipelined_allreduce, pipelined_trees

FORMS: dict[type, ModuleType] = {pipelined_trees.PipelinedTrees: pipelined_trees,
                                 pipelined_allreduce.PipelinedAllreduce: pipelined_allreduce}


def form_of(schedule) -> ModuleType | None:
    """The module that verifies, prices and writes ``schedule`` in its kept form, or None for
    explicit sends (and anything else)."""
    return FORMS.get(type(schedule))
