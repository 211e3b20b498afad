"""``python -m collsynth.solvers.cli``: the same entry point as the ``collsynth`` script."""

from . import run

run()
