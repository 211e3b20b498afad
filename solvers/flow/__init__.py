"""Concurrent-flow producers: collectives that never copy, routed by the optimal multicommodity flow.

:mod:`.alltoall` decomposes the concurrent flow LP's per-source flows
(:mod:`collsynth.tens.concurrent_flow`) into paths and pipelines every pair's data along them
(``flow-alltoall``: all-to-all, scatter, gather); :mod:`.rail_alltoall` routes all-to-all on
rail-optimised fabrics by PXN paths without an LP (``rail-alltoall``; :mod:`.rail_compact`
keeps one box's paths moved by the box shifts where every pair's would not fit).
"""

from .alltoall import PRODUCERS as _FLOW
from .rail_compact import PRODUCERS as _RAIL

PRODUCERS = _FLOW + _RAIL

__all__ = ["PRODUCERS"]
