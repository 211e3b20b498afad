"""How the switches of an instance forward a schedule's sends: which multicast, which reduce,
and which chunks they reduce (:mod:`collsynth.instances.switch_ops`), as the pairing rule of
:func:`collsynth.tens.dependencies.switch_forwards` takes them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..instances.instance import Instance
from ..instances.switch_ops import copying_mask, reducing_mask
from .schedule import Schedule
from .ten import SWITCH_COPY


@dataclass(frozen=True)
class SwitchRule:
    """How the switches of an instance forward a schedule's sends: ``copy[node]`` (the switch's
    declared ``copy``, else the schedule's ``switch_copy``), ``reduce[node]`` (the reducing
    switches) and ``combining[chunk]`` (the chunks of combining collectives, which reducing
    switches combine; :mod:`collsynth.instances.switch_ops`)."""

    copy: np.ndarray
    reduce: np.ndarray
    combining: np.ndarray

    def args(self) -> tuple:
        """``(copy, ...)`` as :func:`switch_forwards` takes them after ``switch``, less ``denom``."""
        return self.copy, self.reduce, self.combining


def switch_rule(schedule: Schedule, instance: Instance) -> SwitchRule:
    """The :class:`SwitchRule` of ``schedule`` on ``instance``."""
    topo = instance.topology
    combining = np.zeros(instance.chunk_offsets[-1] + instance.collectives[-1].num_chunks, np.bool_)
    for coll, off in zip(instance.collectives, instance.chunk_offsets):
        combining[off:off + coll.num_chunks] = coll.combining
    return SwitchRule(copying_mask(topo, bool(schedule.meta.get("switch_copy", SWITCH_COPY))), reducing_mask(topo),
                      combining)
