"""Concurrent-flow producers: collectives that never copy, routed by the optimal multicommodity flow.

:mod:`.alltoall` decomposes the concurrent flow LP's per-source flows
(:mod:`collsynth.tens.concurrent_flow`) into paths and pipelines every pair's data along them
(``flow-alltoall``: all-to-all, scatter, gather).
"""

from .alltoall import PRODUCERS

__all__ = ["PRODUCERS"]
