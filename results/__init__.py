"""The results store (one embedded database file) and table/plot rendering.

Uses :mod:`collsynth.instances` and :mod:`collsynth.tens` types only; the batch runner in
:mod:`collsynth.solvers` writes through it.
"""
