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
