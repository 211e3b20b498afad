"""Producers for the time-limit and interrupt tests, loaded through ``COLLSYNTH_PRODUCERS``.

- ``test-stuck`` stands in for a solver that started a child process and then never returns
  and cannot be interrupted: it ignores the timer signal the pipeline's deadline uses, so only
  the last resort ends it (the batch runner's kill of its worker's process group, the
  watchdog of ``collsynth solve``), and the child must go with it.
- ``test-sleepy-ring`` is the ring schedule two seconds late: a batch of a few such jobs is
  still running when a test interrupts it.
"""

import signal
import subprocess
import sys
import time

from collsynth.solvers.producers import Producer, get


def _stuck(instance, options):
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    while True:
        time.sleep(1)


def _sleepy_ring(instance, options):
    time.sleep(2.0)
    return get("ring").run(instance, options)


PRODUCERS = [
    Producer("test-stuck", "test", _stuck, "never returns and ignores the deadline's timer"),
    Producer("test-sleepy-ring", "test", _sleepy_ring, "the ring schedule, two seconds late"),
]
