"""How slow this machine is right now, for tests of time contracts.

A test of a time contract asserts the contract (a run ends by its limit plus
:data:`collsynth.limits.GRACE_S`; an interrupted batch exits within
:data:`collsynth.solvers.batch.INTERRUPT_S`), never a figure measured on one machine. On a
machine slower than the one the contracts were set on, or loaded by other work, every stage
takes longer by about the same factor: :data:`SLOWDOWN`, measured once when the tests start
(the best of three runs of a fixed pure-Python loop against its CPU time here, unloaded), is
that factor (at least 1), and :func:`within` scales a contract's seconds by it.
"""

from __future__ import annotations

import time

REFERENCE_S = 0.055  # CPU seconds of _reference_loop() on the project's 2-core machine, unloaded


def _reference_loop() -> float:
    """Wall seconds of a fixed pure-Python loop (a million multiply-modulo-adds)."""
    t0 = time.perf_counter()
    total = 0
    for i in range(1_000_000):
        total += i * i % 7
    return time.perf_counter() - t0


SLOWDOWN = max(1.0, min(_reference_loop() for _ in range(3)) / REFERENCE_S)


def within(seconds: float) -> float:
    """``seconds`` of a time contract on this machine now (:data:`SLOWDOWN` times them)."""
    return seconds * SLOWDOWN
