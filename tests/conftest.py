"""Shared test settings: hypothesis profiles sized for a 2-core CI machine.

The instance builders, hand-built schedules and hypothesis strategies several test modules
use are plain functions in ``tests/builders.py`` (``from builders import instance_on``).
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "thorough", max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config):
    """On an empty numba cache (a fresh machine, as CI's), compile every kernel once before any
    test runs, over the cores (``collsynth warmup``), in the one process that starts the
    workers: else each worker compiles what its first tests call inside their time limits (a
    test's limit spent compiling is a test of the compiler, not of the limit). Nothing when the
    cache is warm, nor in a worker."""
    if hasattr(config, "workerinput"):
        return
    from collsynth.solvers import compiling

    if compiling.cache_is_cold():
        compiling.compile_all(None, jobs=os.cpu_count() or 1)
