"""Fault injection for the batch runner tests: producers that hang, crash, are slow or wrong.

Loaded through the ``COLLSYNTH_PRODUCERS`` plug-in variable; they stand in for a solver that
never returns and one that takes its process down (segfault-like exit), which the batch
runner must record without stopping, and for a library that logs to stdout (Pyomo's log
handler does), which must never reach a ``--json`` result or the batch worker's channel.
"""

import os
import time

from collsynth.solvers.producers import Producer


def _hang(instance, options):
    while True:  # a solver ignoring its time limit
        time.sleep(1)


def _crash(instance, options):
    os._exit(139)  # the process dies as on a segfault, writing nothing


def _slow_ring(instance, options):
    from collsynth.solvers.producers import get

    time.sleep(1.0)  # a slow solver: keeps the batch busy long enough to be killed mid-way
    return get("ring").run(instance, options)


def _chatty_ring(instance, options):
    from collsynth.solvers.producers import get

    print("WARNING: Failed to create solver with name 'x'")
    print("Traceback (most recent call last):\n  File \"solvers.py\", line 178, in __call__")
    return get("ring").run(instance, options)


def _broken_ring(instance, options):
    from collsynth.solvers.producers import get

    out = get("ring").run(instance, options)
    out.schedule = out.schedule.select(slice(0, len(out.schedule) - 1))  # the last send dropped
    return out


PRODUCERS = [
    Producer("test-broken-ring", "test", _broken_ring, "the ring schedule without its last send (never verifies)"),
    Producer("test-chatty-ring", "test", _chatty_ring, "the ring schedule, after a log message on stdout"),
    Producer("test-slow-ring", "test", _slow_ring, "the ring schedule, one second late"),
    Producer("test-hang", "test", _hang, "never returns"),
    Producer("test-crash", "test", _crash, "kills its own process"),
]
