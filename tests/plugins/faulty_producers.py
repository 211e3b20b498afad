"""Fault injection for the batch runner tests: producers that hang or crash their process.

Loaded through the ``COLLSYNTH_PRODUCERS`` plug-in variable; they stand in for a solver that
never returns and one that takes its process down (segfault-like exit), which the batch
runner must record without stopping.
"""

import os
import time

from collsynth.solvers.producers import Producer


def _hang(instance, options):
    while True:  # a solver ignoring its time limit
        time.sleep(1)


def _crash(instance, options):
    os._exit(139)  # the process dies as on a segfault, writing nothing


PRODUCERS = [
    Producer("test-hang", "test", _hang, "never returns"),
    Producer("test-crash", "test", _crash, "kills its own process"),
]
