"""Switches that compute: in-network reduction (``reduce``) and multicast (``copy``).

A switch node of a topology may declare two attributes on its networkx node:

- ``reduce``: the reductions it combines (a tuple of names from :data:`REDUCTIONS`; empty or
  absent: it only forwards). What reaches a reducing switch for one chunk in one step (one
  group operation) is combined there and leaves as one partial sum. NVLink SHARP (NVLS) on the
  third-generation NVSwitch reduces with ``multimem.ld_reduce`` (add, min, max) and InfiniBand
  Quantum SHARP reduces in the leaf switches (Graham et al., "Scalable Hierarchical Aggregation
  Protocol (SHArP): A Hardware Architecture for Efficient Data Reduction", COMHPC 2016,
  Section 3).
- ``copy``: the switch multicasts (one arrival, or one partial sum, may leave on several of its
  links, once on each; NVLS's ``multimem.st``). Absent: a reducing switch does not multicast,
  any other switch does what the schedule's ``meta["switch_copy"]`` says, as before (TE-CCL:
  Liu et al., SIGCOMM 2024, Section 4).

The verifier (:mod:`collsynth.tens.verify`), the switch pairing rule of every cost model
(:func:`collsynth.tens.dependencies.switch_forwards`), the bounds
(:mod:`collsynth.tens.bounds.reducing`) and the producers read these two attributes through
:func:`reducing_mask` and :func:`copying_mask`; nothing is special-cased by system.

>>> from collsynth.instances.topology import from_edges
>>> t = from_edges(3, [(0, 2), (2, 0), (1, 2), (2, 1)], bandwidth=1.0, alpha=0.0, switches=[2])
>>> r = with_switch_ops(t, reduce=[2], copy=[2])
>>> reducing_mask(r).tolist(), copying_mask(r, False).tolist(), switch_reductions(r)
([False, False, True], [False, False, True], {2: ('sum',)})
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable

import numpy as np

from .. import InputError

REDUCTIONS = ("sum", "min", "max")  # what NVLS (multimem.ld_reduce .add/.min/.max) and SHARP combine
COLLECTIVE_REDUCTION = "sum"  # the reduction every combining collective of collsynth computes


def switch_reductions(topology) -> dict[int, tuple[str, ...]]:
    """``{switch: reductions}`` of the live switches that declare ``reduce``."""
    out = {}
    for n in sorted(topology.switches):
        if n in topology.graph and topology.graph.nodes[n].get("reduce"):
            out[n] = tuple(topology.graph.nodes[n]["reduce"])
    return out


def reducing_mask(topology) -> np.ndarray:
    """bool ``[node]``: the live switches that reduce."""
    mask = np.zeros(topology.size, dtype=bool)
    mask[list(switch_reductions(topology))] = True
    return mask


def copying_mask(topology, default: bool) -> np.ndarray:
    """bool ``[node]``: whether each node's sends may multicast: a switch's declared ``copy``,
    else false for a reducing switch and ``default`` (the schedule's ``switch_copy``) for the others."""
    mask = np.full(topology.size, bool(default))
    for n in topology.switches:
        data = topology.graph.nodes[n] if n in topology.graph else {}
        if "copy" in data or data.get("reduce"):
            mask[n] = bool(data.get("copy", False))
    return mask


def reductions_of(value: Any, where: str) -> tuple[str, ...]:
    """The reductions a ``reduce`` attribute declares: ``true`` (sum), ``false`` (none), one
    name or a list of names from :data:`REDUCTIONS` (a comma-separated string too).

    >>> reductions_of("sum,max", "x"), reductions_of(False, "x")
    (('sum', 'max'), ())
    """
    if isinstance(value, (bool, np.bool_)) or value in (0, 1) and isinstance(value, int):
        return (COLLECTIVE_REDUCTION,) if value else ()
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ("true", "false", "1", "0", ""):
            return (COLLECTIVE_REDUCTION,) if low in ("true", "1") else ()
        value = [v.strip() for v in low.split(",")]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        bad = [v for v in value if v not in REDUCTIONS]
        if not bad:
            return tuple(dict.fromkeys(value))
    raise InputError(where, f"reduce: expected true, false or reductions from {', '.join(REDUCTIONS)}, got {value!r}")


def with_switch_ops(topology, reduce: Iterable[int] = (), copy: Iterable[int] = (),
                    reductions: tuple[str, ...] = (COLLECTIVE_REDUCTION,), where: str = "topology",
                    no_copy: Iterable[int] = ()):
    """``topology`` with the switches ``reduce`` declared reducing (``reductions``), the
    switches ``copy`` multicasting and the switches ``no_copy`` declared to forward each arrival
    once; a node that is not a switch is refused (naming ``where``'s ``reduce`` / ``copy`` field)."""
    reduce, copy = sorted(set(int(n) for n in reduce)), sorted(set(int(n) for n in copy))
    no_copy = sorted(set(int(n) for n in no_copy))
    for field, ids in (("reduce", reduce), ("copy", copy), ("copy", no_copy)):
        for n in ids:
            if n not in topology.switches:
                what = "a GPU (compute node)" if n in topology.graph else "not a live node"
                raise InputError(f"{where}.{field}", f"node {n} is {what}; only a switch node may declare {field}")
    if not reduce and not copy and not no_copy:
        return topology
    g = topology.graph.copy()
    for n in reduce:
        g.nodes[n]["reduce"] = tuple(reductions)
    for n in no_copy:
        g.nodes[n]["copy"] = False
    for n in copy:
        g.nodes[n]["copy"] = True
    return replace(topology, graph=g)


def check_switch_ops(topology, collectives, where: str) -> None:
    """Refuse a compute node declaring ``reduce`` or ``copy``, and a reducing switch whose
    reductions do not include the one the combining ``collectives`` compute (sum)."""
    for n in topology.npus:
        data = topology.graph.nodes[n]
        for field in ("reduce", "copy"):
            if data.get(field):
                raise InputError(f"{where}: node {n} field {field}",
                                 f"node {n} is a GPU (compute node); only a switch node may declare {field}")
    if not any(c.combining for c in collectives):
        return
    for n, ops in switch_reductions(topology).items():
        if COLLECTIVE_REDUCTION not in ops:
            kinds = ", ".join(sorted({c.kind for c in collectives if c.combining}))
            raise InputError(f"{where}: node {n} field reduce",
                             f"switch {n} reduces by {', '.join(ops)}, which the {kinds} does not use "
                             f"(it sums); expected {COLLECTIVE_REDUCTION!r} among them")
