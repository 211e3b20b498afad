"""A producer whose schedule does not implement its collective: the ring schedule without its
last send. The pipeline must record it as ``invalid`` (never priced) and a comparison must
count it as a failure."""

import numpy as np

from collsynth.solvers.producers import Producer, get


def _ring_missing_last_send(instance, options):
    outcome = get("ring").run(instance, options)
    keep = np.ones(len(outcome.schedule), dtype=bool)
    keep[-1] = False
    outcome.schedule = outcome.schedule.select(keep)
    return outcome


PRODUCERS = [Producer("test-invalid-ring", "test", _ring_missing_last_send, "the ring schedule less its last send")]
