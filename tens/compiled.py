"""Compile options and the small compiled primitives that several kernels share.

The loops of the cost models and of the verifier allocate nothing and only borrow the arrays
their callers own: they are compiled without numba's reference counting (the ``_nrt=False``
target option, :data:`borrowing`), which otherwise costs an atomic increment and decrement of
the count of every array passed to a call (measured at about 40% of the event model's loop and
four fifths of the verifier's copy loop), each one a barrier that keeps the loop's reads from
overlapping. A function called from such a loop inherits the option; :data:`borrowing_inlined`
also inlines it into its caller (a call passes each array as a structure of seven words).

>>> import numpy as np
>>> int(first_at_least(np.array([1, 3, 3, 7]), 0, 4, 3)), int(first_at_least(np.array([1, 3]), 0, 2, 9))
(1, 2)
"""

from __future__ import annotations

import numpy as np
from numba import njit

borrowing = njit(cache=True, nogil=True, _nrt=False)
borrowing_inlined = njit(cache=True, nogil=True, _nrt=False, inline='always')


@njit(cache=True, nogil=True)
def hash_mix(key):
    """A 64-bit key's bits mixed so that every input bit reaches every output bit: the
    finaliser of SplitMix64 (Steele, Lea and Flood, "Fast Splittable Pseudorandom Number
    Generators", OOPSLA 2014, Section 5), as the hash of the open-addressing tables."""
    z = np.uint64(key)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True, nogil=True)
def first_at_least(a, lo, hi, v):
    """The first position in ``lo .. hi - 1`` of the sorted ``a`` whose value is at least ``v``
    (``hi`` if none; binary search, Knuth, "The Art of Computer Programming", vol. 3, section
    6.2.1): ``lo + np.searchsorted(a[lo:hi], v)`` without building the slice, which made the
    search path of verification 25% slower (BFB torus 50x50 with a denominator of 2^23: 1.15 s
    against 0.92 s CPU)."""
    while lo < hi:
        m = (lo + hi) >> 1
        if a[m] < v:
            lo = m + 1
        else:
            hi = m
    return lo


@njit(cache=True, nogil=True, inline='always')
def append_unseen(seen, items, count, x):
    """Append ``x`` to ``items[:count]`` unless ``seen[x]`` (marking it): the new count. The
    visit-once work list of a graph search (Cormen et al., "Introduction to Algorithms", 3rd ed.,
    section 22.2) and of the links one step loads."""
    if seen[x]:
        return count
    seen[x] = True
    items[count] = x
    return count + 1
