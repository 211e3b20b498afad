"""The peers' schedules as a producer: ``peer:<folder>`` (``collsynth bench --producers peer:F``).

A folder of schedules another tool wrote is set beside ours in the same tables: the producer
``peer:<folder>`` "produces", for an instance named ``N``, the file ``<folder>/N.xml`` (an MSCCL
XML program: msccl-tools, TACCL, ForestColl) or ``<folder>/N.json`` (a TE-CCL output JSON),
read onto the instance by :mod:`collsynth.tens.peer_schedules`; the pipeline then verifies and
prices it like any other (one that does not verify is an `invalid` row with its first violation,
never a price). One folder per tool (and variant) keeps each a producer of its own:
``peers/forestcoll/``, ``peers/taccl/``. An instance with no file there is skipped.
"""

from __future__ import annotations

from pathlib import Path

from ...instances.instance import Instance
from ...tens import peer_schedules
from ..producers import Options, Outcome, Producer, Unsupported

PREFIX = "peer:"  # as solvers.producers.NAMED_BY_PREFIX names this module
SUFFIXES = {".xml": "msccl-xml", ".json": "teccl-output"}


def peer_file(folder: str | Path, instance: Instance) -> tuple[Path, str]:
    """The peer's schedule file for ``instance`` in ``folder`` and its format; Unsupported when
    there is none."""
    for suffix, fmt in SUFFIXES.items():
        path = Path(folder) / f"{instance.name}{suffix}"
        if path.is_file():
            return path, fmt
    raise Unsupported(f"no peer schedule {instance.name}.xml or {instance.name}.json in {folder}")


def producer_named(name: str) -> Producer:
    """The producer ``peer:<folder>`` (see the module doc)."""
    folder = name[len(PREFIX):]

    def run(instance: Instance, options: Options) -> Outcome:
        path, fmt = peer_file(folder, instance)
        schedule = peer_schedules.read_peer_schedule(path, fmt, instance)
        return Outcome(schedule, "constructed", objective=float(schedule.num_steps), units="steps",
                       found_by=f"{fmt}:{path.name}")

    return Producer(name=name, family="peer", run=run,
                    summary=f"the peer schedules in {folder} (MSCCL XML or TE-CCL output), read and verified")
