"""Compiled loop of the synchronous cost model (:mod:`collsynth.tens.cost` holds its definition).

It streams over the sends in step order and walks every send's route as it goes
(:mod:`collsynth.tens.routing`). The piece size in bytes, ``(hi - lo) / denom *
chunk_bytes[chunk]``, is recomputed where it is used, with the same floating-point operations
as the vectorised definitions, so results do not depend on the evaluation order.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .compiled import append_unseen


@njit(cache=True, nogil=True)
def sync_steps(bounds, r, rptr, rlinks, rlat, chunk, lo, hi, denom, chunk_bytes, bandwidth, alpha, unit_mult):
    """Per used step: ``(latency, bandwidth time, coupled time, max chunk units)``.

    The alpha-beta step cost of Zhao et al., NSDI 2025, Section 3.2. Sends in step order
    (``bounds`` delimit the steps). Loads per link pair of one step are summed in send order;
    the step's bandwidth time is ``max_l load_l / bandwidth_l``, its coupled time
    ``max_l (load_l / bandwidth_l + alpha_l)``, its latency the largest route latency of its
    sends and its units ``max_l units_l * unit_mult_l`` (piece numerators).
    """
    T = len(bounds) - 1
    L = len(bandwidth)
    lat = np.empty(T)
    bw = np.empty(T)
    coupled = np.empty(T)
    units = np.zeros(T, np.int64)
    load = np.zeros(L)
    count = np.zeros(L, np.int64)
    used = np.zeros(L, np.bool_)
    touched = np.empty(L, np.int32)
    for k in range(T):
        nt = 0
        step_lat = -np.inf
        for i in range(bounds[k], bounds[k + 1]):
            route = r[i]
            piece = hi[i] - lo[i]
            nbytes = piece / denom * chunk_bytes[chunk[i]]
            if rlat[route] > step_lat:
                step_lat = rlat[route]
            for h in range(rptr[route], rptr[route + 1]):
                link = rlinks[h]
                nt = append_unseen(used, touched, nt, link)
                load[link] += nbytes
                count[link] += piece
        step_bw = -np.inf
        step_coupled = -np.inf
        step_units = 0
        for q in range(nt):
            link = touched[q]
            used[link] = False
            busy = load[link] / bandwidth[link]
            step_bw = max(step_bw, busy)
            step_coupled = max(step_coupled, busy + alpha[link])
            step_units = max(step_units, count[link] * unit_mult[link])
            load[link] = 0.0  # the next step that uses the link starts from nothing
            count[link] = 0
        lat[k] = step_lat
        bw[k] = step_bw
        coupled[k] = step_coupled
        units[k] = step_units
    return lat, bw, coupled, units
