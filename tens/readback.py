"""Programs and plans written only after our own reader has read them back and verified them.

An exporter turns a verified schedule into the text a runtime executes (MSCCL XML,
:mod:`collsynth.tens.export`; an MSCCL++ execution plan, :mod:`collsynth.tens.export_mscclpp`).
What the runtime runs is that text, not the schedule, so before the text is returned it is read
back with the reader of ``collsynth verify --from`` (:func:`collsynth.tens.peer_schedules.read_peer_text`)
and the schedule that reader finds is verified (:func:`collsynth.tens.verify.check`): an
exporter that wrote a program other than the schedule (a dropped transfer, a switch forwarding
the wrong arrival) is caught here, never at run time. The module sits above both the writers
and the readers, so neither imports the other.

>>> from collsynth.instances.generators import build
>>> from collsynth.instances.instance import make_instance
>>> from collsynth.tens.schedule import from_arrays
>>> ring = build("ring", {"nodes": 3, "bidirectional": False}, bandwidth=1.0, alpha=0.0)
>>> inst = make_instance(ring, "allgather", message_bytes=3.0)
>>> s = from_arrays("allgather", 3, 3, chunk=[0, 1, 2, 0, 1, 2], src=[0, 1, 2, 1, 2, 0],
...                 dst=[1, 2, 0, 2, 0, 1], step=[1, 1, 1, 2, 2, 2])
>>> verified_msccl_xml(s, inst).count("<gpu ")
3
"""

from __future__ import annotations

import json

from ..instances.instance import Instance
from .export import to_msccl_xml
from .export_mscclpp import to_mscclpp_plan
from .peer_schedules import read_peer_text
from .schedule import Schedule
from .verify import check

__all__ = ["verified_msccl_xml", "verified_mscclpp_plan"]


def verified_msccl_xml(schedule: Schedule, instance: Instance, **options) -> str:
    """:func:`~collsynth.tens.export.to_msccl_xml` of a schedule that verifies, itself read back
    by our reader (:func:`collsynth.tens.peer_schedules.read_msccl_xml`) and verified: raises
    :class:`~collsynth.tens.verify.VerificationError` when the schedule does not implement the
    collective, or when the program written for it would not (``options`` as for
    :func:`~collsynth.tens.export.to_msccl_xml`)."""
    check(schedule, instance)
    xml = to_msccl_xml(schedule, instance, **options)
    check(read_peer_text(xml, "msccl-xml", instance), instance)
    return xml


def verified_mscclpp_plan(schedule: Schedule, instance: Instance, **options) -> str:
    """:func:`~collsynth.tens.export_mscclpp.to_mscclpp_plan` of a schedule that verifies, as
    JSON text, itself read back by our reader (:func:`collsynth.tens.peer_plans.read_mscclpp_plan`,
    op by op) and verified before it is returned: raises
    :class:`~collsynth.tens.verify.VerificationError` when the schedule does not implement the
    collective, or when the plan written for it would not."""
    check(schedule, instance)
    text = json.dumps(to_mscclpp_plan(schedule, instance, **options), indent=1) + "\n"
    check(read_peer_text(text, "mscclpp-json", instance), instance)
    return text
