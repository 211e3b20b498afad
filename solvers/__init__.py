"""Everything that turns an Instance into a Schedule, and the command line.

- :mod:`.producers` -- the registry of producers (formulations+drivers, BFB, greedy, closed
  forms, expansions) and the ``Options``/``Outcome`` they speak.
- :mod:`.pipeline` -- produce, verify, price: the one path every schedule goes through.
- :mod:`.backends` -- Pyomo model -> SolveResult on HiGHS, Gurobi, OR-Tools, ...
- :mod:`.drivers` -- horizon search, early termination with recovery, time clustering.
- :mod:`.cli` -- ``collsynth``.
"""
