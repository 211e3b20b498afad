"""Everything that turns an Instance into a Schedule, and the command line.

- :mod:`.producers` -- the registry of producers (formulations+drivers, BFB, greedy, closed
  forms, expansions) and the ``Options``/``Outcome`` they speak.
- :mod:`.pipeline` -- produce, verify, price: the one path every schedule goes through.
- :mod:`.backends` -- Pyomo model -> SolveResult on HiGHS, Gurobi, OR-Tools, ...
- :mod:`.drivers` -- horizon search, early termination with recovery, time clustering.
- :mod:`.cli` -- ``collsynth``.
"""

import importlib


def import_if_present(name: str):
    """The module ``name``, or None when that module itself is absent (an optional family or
    command); an import error inside it is raised, never hidden. Here rather than in
    :mod:`.producers` so that the command line's ``--help`` loads no instance code."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name == name:
            return None
        raise
