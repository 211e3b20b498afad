"""The C heap's freed memory handed back to the operating system before a long, large loop.

glibc's ``malloc`` keeps the memory ``free`` returns unless it lies at the heap's top: a
column freed in the middle of the heap stays resident. NumPy takes arrays under glibc's mmap
threshold (up to 32 MiB once it has grown) from that heap, so after the explicit sends'
expansion (:mod:`collsynth.tens.pipelined_trees`), whose int32 columns of about 8 million sends
sit just under the threshold, about 20 bytes a send of freed heap stayed resident through the
event model's loop (:func:`collsynth.tens.cost.price_event`; README, "Explicit sends' peak per
send"). ``malloc_trim(0)`` (glibc 2.8 and later) returns every free page of the heap, not only
its top. Where the C library has no ``malloc_trim`` (musl, macOS, Windows) nothing is done.
"""

from __future__ import annotations

import ctypes


def _malloc_trim():
    """glibc's ``malloc_trim`` from the process's own symbols, or None where there is none."""
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):  # TypeError: Windows takes no CDLL(None)
        return None


MALLOC_TRIM = _malloc_trim()


def release_freed_heap() -> bool:
    """Hand the C heap's free pages back to the operating system (glibc ``malloc_trim(0)``);
    True if the C library has ``malloc_trim`` (whether or not it found pages to return), False
    where it has none and nothing was done.

    >>> isinstance(release_freed_heap(), bool)
    True
    """
    if MALLOC_TRIM is None:
        return False
    MALLOC_TRIM(0)
    return True
