"""The command groups of ``collsynth`` (see :mod:`collsynth.solvers.cli`)."""
