"""A schedule's verdict kept with it, so that one schedule is verified once per run.

Every schedule a producer emits is verified before it is priced, stored or exported
(:func:`collsynth.tens.verify.verify`). A producer that verifies a schedule itself to choose
it (an allreduce's joint choice, :mod:`collsynth.solvers.packing.overlap`: every candidate is
verified, then priced) hands the pipeline a :class:`Certified`: the schedule and instance objects
it verified and a digest of the schedule's content at that moment. The pipeline takes the
verdict instead of verifying again only when :meth:`Certified.holds` for the very schedule and
instance it is about to keep: the same objects, and the same content (a schedule's columns are
numpy arrays, which code could change in place after the verdict; the digest, BLAKE2b over every
column and field, would then differ and the pipeline verifies). Nothing else makes a verdict:
:func:`certify` runs the verifier.

A producer that priced the certified schedule too (:meth:`Certified.price`) hands the pipeline
those prices with it: the pipeline takes a model's price instead of pricing again only when the
verdict holds and the model and its options are the ones the pipeline prices with (the same
:class:`~collsynth.tens.cost_models.CostModel` object, the same ``timestep``), so the price is of
the same schedule under the same model.

Two GPUs swapping their chunks over one link each way:

>>> from collsynth.instances.generators import build
>>> from collsynth.instances.instance import make_instance
>>> from collsynth.tens.schedule import from_sends
>>> inst = make_instance(build("ring", {"nodes": 2}), "allgather")
>>> s = from_sends([(0, 0, 1, 0, 1, 1), (1, 0, 1, 1, 0, 1)], "allgather", 2, 2)
>>> c = certify(s, inst)
>>> c.holds(s, inst), c.holds(from_sends([(0, 0, 1, 0, 1, 1), (1, 0, 1, 1, 0, 1)], "allgather", 2, 2), inst)
(True, False)
>>> c.price("sync").total_s == c.known(cost_models.get("sync"), None)[0].total_s
True
>>> c.known(cost_models.get("sync"), 1e-6) is None  # priced with another timestep: not taken
True
>>> s.step[1] = 2  # changed in place after the verdict: it no longer holds
>>> c.holds(s, inst)
False
>>> certify(from_sends([(0, 0, 1, 0, 1, 1)], "allgather", 2, 2), inst) is None  # chunk 1 never reaches 0
True
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field

import numpy as np

from ..instances.instance import Instance
from . import cost_models, verify
from .cost import Cost
from .schedule import Schedule

COLUMNS = ("chunk", "lo", "hi", "src", "dst", "step", "op")


def digest(schedule: Schedule) -> bytes:
    """BLAKE2b of every column of ``schedule`` (dtype, shape and bytes) and every other field."""
    h = hashlib.blake2b(digest_size=32)
    fields = {k: getattr(schedule, k) for k in ("collective", "nodes", "chunks", "denom", "routing", "link_order")}
    h.update(json.dumps({**fields, "meta": schedule.meta}, sort_keys=True, default=_whole).encode())
    for name in COLUMNS:
        col = np.ascontiguousarray(getattr(schedule, name))
        h.update(f"{name}:{col.dtype.str}:{col.shape}".encode())
        h.update(memoryview(col).cast("B"))
    return h.digest()


def _whole(value):
    """A value JSON lacks, written whole (numpy arrays and scalars as lists and numbers, the
    rest by ``repr``), so that the digest sees every part of it."""
    return value.tolist() if hasattr(value, "tolist") else repr(value)


@dataclass(frozen=True)
class Certified:
    """``schedule`` verified on ``instance`` (no violation), its content's :func:`digest` then,
    the seconds verifying and the digest took, and its prices so far (:meth:`price`)."""

    schedule: Schedule
    instance: Instance
    digest: bytes
    verify_s: float
    digest_s: float
    costs: dict = field(default_factory=dict)  # model name -> (model, timestep, Cost, seconds)

    def price(self, model: str, timestep: float | None = None) -> Cost:
        """The verified schedule's :class:`~collsynth.tens.cost.Cost` under ``model``
        (:func:`collsynth.tens.cost_models.price`), kept for :meth:`known`."""
        t0 = time.perf_counter()
        cost = cost_models.price(self.schedule, self.instance, model, timestep=timestep)
        self.costs[model] = (cost_models.get(model), timestep, cost, time.perf_counter() - t0)
        return cost

    def known(self, model, timestep: float | None) -> tuple[Cost, float] | None:
        """``(price, seconds it took)`` as :meth:`price` computed it under ``model`` (a
        :class:`~collsynth.tens.cost_models.CostModel`) with ``timestep``, else None."""
        got = self.costs.get(model.name)
        return got[2:] if got is not None and got[0] is model and got[1] == timestep else None

    def holds(self, schedule, instance) -> bool:
        """Whether this verdict is ``schedule``'s on ``instance``: the very objects verified,
        their content unchanged since."""
        return schedule is self.schedule and instance is self.instance and digest(schedule) == self.digest


def certify(schedule: Schedule, instance: Instance) -> Certified | None:
    """``schedule``'s verdict on ``instance`` (:func:`collsynth.tens.verify.verify`): a
    :class:`Certified` when it has no violation, else None."""
    t0 = time.perf_counter()
    if verify.verify(schedule, instance) is not None:
        return None
    t1 = time.perf_counter()
    return Certified(schedule, instance, digest(schedule), t1 - t0, time.perf_counter() - t1)
