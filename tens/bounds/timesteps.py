"""The TEN timesteps bound the formulations and drivers start from, and which schedules it applies to.

Part of :mod:`collsynth.tens.bounds` (its module documentation describes every argument).
"""

from __future__ import annotations


import numpy as np
from numba import njit

from ...instances.instance import Instance
from ..schedule import Schedule
from ..ten import NotSupported, dual_instance, link_delays, link_latency, prepare
from .arrivals import ARRIVAL_BUDGET_S, arrival_bound
from .demand import Arcs, _demand_of_ten
from .distances import _distance_bound
from .instance import _cut_parts, _roots, instance_bounds
from .record import Bound, CUT_BUDGET_S, best
from .supply import TimestepSupply


# ---- the TEN bound formulations and drivers start from ----------------------------------------

def timesteps_bound(instance: Instance, state=None, timestep: float | None = None,
                    budget_s: float = CUT_BUDGET_S) -> Bound:
    """The ``timesteps`` bound, from the start or (``state``: holdings ``[chunk, node]`` of the
    TEN model's direction, the dual for combining collectives) from an intermediate state.

    From a state the TEN model's own data is used: combining collectives are bounded through
    their dual on the transposed topology (time reversed), as the TEN formulations solve them.
    Raises :class:`~collsynth.tens.ten.NotSupported` when the instance has no TEN.
    """
    if state is None:
        b = instance_bounds(instance, timestep=timestep, budget_s=budget_s).timesteps
        if not b.computed:
            raise NotSupported(b.note)
        return b
    data, arcs, demand, parts = _ten_distance_parts(instance, state, timestep)
    lag = data.lag
    kmin = data.delay.min(axis=0)
    parts += _cut_parts("timesteps", arcs, demand, demand.count.astype(float),
                        TimestepSupply(data.capacity, kmin, data.latency),
                        _roots(data.instance), budget_s, int, lag.min(axis=0))
    parts.append(arrival_bound(data, min(budget_s, ARRIVAL_BUDGET_S)))
    b = best(parts, "timesteps")
    if not b.computed:
        raise NotSupported(b.note)
    return b


def _ten_distance_parts(instance: Instance, state, timestep: float | None) -> tuple:
    """The TEN of ``instance`` (copying switches: the larger set of schedules), its link pairs,
    its demand and the delay-weighted distance bound of each chunk group (path lengths: the
    delays, one less over an instant switch-to-NPU hop)."""
    data = prepare(instance, 1, state, timestep, switch_copy=True)
    topo = data.instance.topology
    arcs = Arcs(data.src, data.dst, data.capacity, topo.link_arrays.bandwidth, topo.link_arrays.alpha,
                np.asarray(topo.nodes, np.int64), topo.size)
    demand = _demand_of_ten(data)
    parts = [_distance_bound("timesteps", arcs, demand.select(np.flatnonzero(demand.group == g)), data.lag[g])
             for g in range(data.delay.shape[0])]
    return data, arcs, demand, parts


def lower_bound(instance: Instance, state=None, timestep: float | None = None) -> int:
    """TEN timesteps no capacity-respecting schedule can beat (:func:`timesteps_bound`: the
    largest of the delay-weighted distance, per-node, volume and cut bounds), as the TEN
    formulations start from it: :class:`~collsynth.tens.ten.NotSupported` when one TEN model
    cannot express the instance (allreduce, combining mixed with non-combining collectives)."""
    dual_instance(instance)
    return int(timesteps_bound(instance, state, timestep).value)


def distance_bound(instance: Instance, state=None, timestep: float | None = None) -> int:
    """Delay-weighted distance from the nearest holder to the farthest node needing a chunk
    (TEN timesteps; the only bound that holds when link capacity is ignored)."""
    parts = _ten_distance_parts(instance, state, timestep)[3]
    b = best(parts, "timesteps")
    if not b.computed:
        raise NotSupported(b.note.replace("not computed: ", "") or "some required chunk cannot reach its destination")
    return int(b.value)


# ---- which schedules the timesteps bound applies to ------------------------------------------

def respects_ten_capacity(schedule: Schedule, instance: Instance, timestep: float | None = None) -> bool:
    """Whether ``schedule``'s steps are TEN timesteps in which it respects link capacity.

    Every send must be on a link (``routing == "links"``) and start at timestep 1 or later;
    a send of chunk fraction ``x`` arriving at step ``t`` over pair ``l`` occupies ``l`` in
    timesteps ``t - L - k + 1 .. t - L`` (``k``: its collective's delay on ``l``,
    :func:`link_delays`; ``L`` its pipelined latency, :func:`link_latency`, else 0) and the
    fractions occupying a pair in any timestep add up to at most its chunks per timestep.
    These are the schedules the ``timesteps`` bound bounds.
    """
    if schedule.routing != "links":
        return False
    if not len(schedule):
        return True
    try:
        delay, cap, f = link_delays(instance.topology, [c.chunk_bytes for c in instance.collectives], timestep,
                                    switches=True)
    except NotSupported:
        return False
    la = instance.topology.link_arrays
    return _fits_ten_capacity(la.src * instance.topology.size + la.dst, instance.topology.size,
                              np.asarray(instance.chunk_offsets, dtype=np.int64), np.ascontiguousarray(delay, np.int64),
                              link_latency(instance.topology, f).astype(np.int64), np.asarray(cap, np.int64),
                              schedule.src, schedule.dst, schedule.chunk, schedule.step, schedule.lo, schedule.hi,
                              schedule.denom, int(schedule.step.max()) + 1)


@njit(cache=True, nogil=True)
def _fits_ten_capacity(keys, size, offs, delay, latency, cap, src, dst, chunk, step, lo, hi, denom, T):
    """:func:`respects_ten_capacity` in one pass over the sends: every send on a link pair
    (``keys``: the pairs' sorted ``src * size + dst``), starting at timestep 1 or later, and
    the chunk fractions occupying each pair in each timestep (counted in ``1 / denom``) at
    most its capacity."""
    load = np.zeros(len(keys) * T, np.int64)
    for i in range(len(src)):
        want = src[i] * size + dst[i]
        pair = np.searchsorted(keys, want)
        if pair == len(keys) or keys[pair] != want:
            return False
        group = np.searchsorted(offs, chunk[i], side="right") - 1
        k = delay[group, pair]
        start = step[i] - latency[pair] - k + 1
        if start < 1:
            return False
        for t in range(start, start + k):
            load[pair * T + t] += hi[i] - lo[i]
    for pair in range(len(keys)):
        for t in range(T):
            if load[pair * T + t] > cap[pair] * denom:
                return False
    return True
