"""Which MSCCL program a schedule is exported as: the grid, the thread-block layout and whether a
receive its GPU forwards next is one receive-and-send step, chosen the way a user exporting it
would, or the cheapest under a price.

A schedule's pieces may be finer than MSCCL takes (more than
:data:`~collsynth.tens.msccl_format.MAX_CHUNKS` chunks a buffer, or past an executor limit): its export
is then taken on a coarser grid (:func:`collsynth.tens.coarsen.coarsen`, verified there), halving
down to the layout's coarsest (:data:`COARSEST`): the default layout packs a link's sends into
few thread blocks (``links``, ``collsynth export --layout packed``) and stops at 1/16; one
thread block per tree and edge (``trees``, :mod:`collsynth.tens.export_layout`, the layout of
ForestColl's programs: Zhao et al., "ForestColl: Throughput-Optimal Collective Communications
on Heterogeneous Network Fabrics", arXiv:2402.06787, Section 6) needs few trees and goes down
to whole chunks. Without a price the first export our reader reads back as a schedule that
verifies is the program; with one (program text -> seconds, the ``runtime`` model's) every
grid, layout and receive-and-send choice is exported and the cheapest that reads back and
verifies is. :func:`collsynth.tens.cost_models.runtime.program_of` prices our schedules this
way, and ``collsynth export --layout`` writes them this way: the programs are written with the
user's name and protocol from the start (the protocol is part of the price), so the program
chosen is the one written, exported once.

Every program is priced before it is read back, and read back in order of price until one
verifies. That is the choice verifying first would make, at one read-back instead of one per
program: the program returned is the first of the price order that verifies, so every cheaper
one failed, and it is the cheapest of those that verify (ties to the earlier export, as
verifying first would break them). A price of a program that does not verify only places it
in that order; it is never returned, reported or compared with anything else. Measured on
ForestColl's A100 x2 allgather at 1 GiB (``tree-packing``'s schedule, the shipped A100
calibration): 16 programs, priced in 1.2 s each, the chosen one read back in 11 s.

>>> from collsynth.instances.generators import build
>>> from collsynth.instances.instance import make_instance
>>> from collsynth.tens.schedule import from_sends
>>> inst = make_instance(build("ring", {"nodes": 3, "bidirectional": False}), "allgather")
>>> hops = [(c, 0, 1, (c + k) % 3, (c + k + 1) % 3, k + 1) for c in range(3) for k in range(2)]
>>> s = from_sends(hops, "allgather", 3, 3)  # chunk c: c -> c+1, then on to c+2
>>> e = chosen_export(s, inst, layouts=("trees",), fuses=(True,))
>>> e.layout, e.grid, e.dialect
('trees', 1, 'msccl-executor')
>>> program_shape(e.text)  # a tree a channel; a GPU sends one, relays one (rcs), receives one
{'channels': 3, 'thread_blocks': 3, 'receive_and_send_steps': 3}
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .. import InputError

__all__ = ["Export", "chosen_export", "program_shape", "COARSEST", "COARSEST_GRID", "COARSEST_TREE_GRID"]

COARSEST_GRID = 16  # pieces per chunk below which a schedule is not coarsened further to fit
# one thread block per tree and edge needs few trees: ForestColl's programs run 1 to 4 a root
COARSEST_TREE_GRID = 1
COARSEST = {"links": COARSEST_GRID, "trees": COARSEST_TREE_GRID, "fitted": COARSEST_TREE_GRID}


@dataclass(frozen=True)
class Export:
    """An exported MSCCL program (``text``, read back and verified), the grid it was written on
    (pieces per chunk), its layout (``links`` or ``trees``), whether receive-and-send steps were
    asked for (``fuse``: the exporter writes them only where our reader numbers them), its
    collective names (``dialect``), the schedule on that grid it was written from and, when
    it was chosen by a price, that price of ``text`` (``seconds``), and which schedule it
    came from (``source``, :func:`chosen_export`'s ``alternatives``)."""

    text: str
    grid: int
    layout: str
    fuse: bool
    dialect: str
    schedule: object = None
    seconds: float | None = None
    source: int = 0  # which schedule it was exported from: 0 the one asked, i the i-th alternative


def chosen_export(schedule, instance, seconds=None, layouts=("links",), fuses=(False,), dialects=None,
                  name: str = "collsynth", proto: str = "Simple", max_thread_blocks: int = 0,
                  alternatives=()) -> Export:
    """The program of ``schedule`` on ``instance`` (named ``name``, in protocol ``proto``): on
    its own grid when MSCCL takes that many chunks a buffer, else on the finest it takes,
    halved down to the coarsest of ``layouts`` (:data:`COARSEST`); on each grid every layout
    that goes that coarse (on the first grid every layout), with each of ``fuses``, in the
    first of ``dialects`` (default: the default dialect, then the others) whose limits take
    it. Without ``seconds`` the first export that reads back as a schedule that verifies; with
    it (program text -> seconds) the cheapest that does (module doc), its price kept in the
    :class:`Export`. Layout ``fitted`` keeps every GPU within ``max_thread_blocks`` (a GPU's SMs).
    With ``seconds``, ``alternatives`` (other schedules of the same collective on ``instance``,
    e.g. a forest with fewer trees a root) are exported the same way and the cheapest program
    of them all is chosen (:attr:`Export.source`: 0 the schedule, ``i`` the ``i``-th alternative).
    Raises the last :class:`~collsynth.InputError` when none does."""
    options = (layouts, fuses, dialects, name, proto, max_thread_blocks)
    candidates = [schedule, *alternatives] if seconds is not None else [schedule]
    priced, error = [], None
    for source, candidate in enumerate(candidates):
        found, error = _each_export(candidate, instance, seconds, options, priced, source, error)
        if found is not None:
            return found
    for price, _, found in sorted(priced, key=lambda p: p[:2]):  # read back in price order (module doc)
        try:
            return replace(_verified(found, instance), seconds=price)
        except InputError as e:
            error = e
    raise error or InputError("schedule", f"no MSCCL export of it was tried (layouts {', '.join(layouts)})")


def _each_export(schedule, instance, seconds, options, priced: list, source: int, error):
    """``(export, error)``: without ``seconds`` the first export of ``schedule`` (on each grid,
    layout and fuse of ``options``, :func:`chosen_export`) that reads back and verifies; with
    it, none: every export is appended to ``priced`` as ``(price, order, export)``. ``error``:
    the last refusal so far."""
    from .msccl_format import MAX_CHUNKS
    layouts, fuses, dialects, name, proto, max_thread_blocks = options
    coll = instance.collective
    grids = [min(schedule.denom, max(1, MAX_CHUNKS // (len(coll.nodes) * coll.chunks_per_node)))]
    while grids[-1] // 2 >= min(COARSEST[layout] for layout in layouts):
        grids.append(grids[-1] // 2)
    for grid in grids:
        try:
            on_grid = _on_grid(schedule, instance, grid)  # coarsened and verified once for every export
        except InputError as e:
            error = e
            continue
        variants = [(layout, fuse) for layout in layouts if grid >= min(COARSEST[layout], grids[0]) for fuse in fuses]
        for (layout, fuse), (text, dialect) in zip(variants, _exports(on_grid, instance, variants, dialects,
                                                                      name, proto, max_thread_blocks)):
            if isinstance(text, InputError):
                error = text
                continue
            found = Export(text, grid, layout, fuse, dialect, on_grid, source=source)
            if seconds is None:
                try:
                    return _verified(found, instance), error
                except InputError as e:
                    error = e
                    continue
            priced.append((seconds(text), len(priced), found))
    return None, error


def _on_grid(schedule, instance, grid: int):
    """``schedule`` moved onto ``grid`` pieces per chunk (when finer), verified there."""
    from .coarsen import coarsen
    from .verify import verify
    if schedule.denom <= grid:
        return schedule
    schedule = coarsen(schedule, grid)
    violation = verify(schedule, instance)
    if violation is not None:
        raise InputError("schedule", f"on a 1/{grid} grid, as MSCCL takes it, the schedule is not valid: {violation}")
    return schedule


def _verified(found: Export, instance) -> Export:
    """``found`` once our reader has read its program back as a schedule that verifies on
    ``instance`` (:mod:`collsynth.tens.readback`); else an InputError."""
    from .peer_schedules import read_peer_text
    from .verify import verify
    violation = verify(read_peer_text(found.text, "msccl-xml", instance), instance)
    if violation is not None:
        raise InputError("schedule", f"its exported MSCCL program does not verify: {violation}")
    return found


def _exports(schedule, instance, variants, dialects=None, name: str = "collsynth", proto: str = "Simple",
             max_thread_blocks: int = 0) -> list[tuple]:
    """``(program, dialect)`` of ``schedule`` for each ``(layout, fuse)`` of ``variants``
    (:func:`~collsynth.tens.export.msccl_xml_variants`, named ``name``, in protocol ``proto``), each in the first of ``dialects``
    (default: the default dialect, then the others) whose limits take it, or the
    :class:`~collsynth.InputError` the last one refused it with."""
    from .export import msccl_xml_variants
    from .msccl_format import DEFAULT_DIALECT, DIALECTS
    if dialects is None:
        dialects = [DEFAULT_DIALECT] + [d for d in DIALECTS if d != DEFAULT_DIALECT]
    out: list = [(None, None)] * len(variants)
    for dialect in dialects:
        todo = [k for k, (x, _) in enumerate(out) if not isinstance(x, str)]
        if not todo:
            break
        try:
            texts = msccl_xml_variants(schedule, instance, [variants[k] for k in todo], dialect, name, proto,
                                       max_thread_blocks)
        except InputError as e:
            texts = [e] * len(todo)
        for k, x in zip(todo, texts):
            out[k] = (x, dialect)
    return out


def program_shape(text: str) -> dict:
    """What an MSCCL XML program is made of: its channels (``nchannels``), the most thread
    blocks on a GPU, and its receive-and-send steps (``rcs``, ``rrs``, ``rrcs``; the module
    doc's example)."""
    from .msccl_read import algo_root
    root = algo_root(text)
    return {"channels": int(root.get("nchannels", "1")),
            "thread_blocks": max((len(gpu.findall("tb")) for gpu in root.iter("gpu")), default=0),
            "receive_and_send_steps": sum(step.get("type") in ("rcs", "rrs", "rrcs") for step in root.iter("step"))}
