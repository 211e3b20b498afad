"""Allreduce through switches that reduce and multicast: NVLS in a box, NVLSTree across boxes.

NVLink SHARP (NVLS) on the third-generation NVSwitch sums what the GPUs of a box send into it
and multicasts a result back (NVIDIA, "NVIDIA H100 Tensor Core GPU Architecture", 2022,
"NVLink SHARP"; NCCL's NVLS algorithm: each GPU load-reduces its shard through the switch with
``multimem.ld_reduce`` and stores it to all with ``multimem.st``, NVIDIA/nccl issue 1455;
MSCCL++'s ``SwitchChannel``). Across boxes NCCL's NVLSTree reduces in the box,
then runs a tree between the boxes' NICs and multicasts the result in each box. The switch's
``reduce`` and ``copy`` attributes (:mod:`collsynth.instances.switch_ops`) are all these
producers read; what a box is (the GPUs on one reducing, multicasting switch) and what a rail
is (a switch joining the g-th GPU of every box) is found from the links.

``nvls`` (one box): piece ``p`` of chunk ``c`` goes up from every GPU in step ``p + 1`` and
the switch multicasts the sum in step ``p + 2`` (shape ``multicast``; each GPU link carries
``M`` up and ``M`` down, the ``reducing-cut`` bound ``M / B``), or, as NCCL runs it, the
others' sum goes to ``c``'s owner, which adds its own and stores the result back up for the
switch to multicast (shape ``load-reduce``, four steps, ``(N + 1) / N * M`` up a GPU's link).

``nvls-tree`` (boxes on rails): chunk ``c`` owned by GPU ``g`` of box ``b`` is summed in each
box at that box's GPU ``g`` (step 1 into the box switch, 2 out of it), the box sums cross rail
``g`` to box ``b`` (3, 4; a reducing rail sums them as SHARP does, a plain one forwards each
to ``b``'s GPU, which adds them), the result goes back over the rail (5, 6: multicast) and is
multicast in every box (7, 8). Each GPU's NVLink carries ``M`` each way; its NIC
``M / 8`` up and ``2 (k - 1) / k * M / 8`` down over plain rails (the ring's volume between
``k`` boxes), ``M / 8`` down over reducing rails.

Pipelining: each piece of ``1 / pieces`` of every chunk takes the steps above, one step after
the piece before it; ``pieces`` defaults to ``sqrt(steps * M / (alpha B))`` (the minimum of
``(pieces + steps - 1) (alpha + M / (pieces B))``), at most 256. A pipeline pays its fill and
drain in its first and last pieces; where the cap on sends leaves fewer pieces than that
depth (64 DGX H100 boxes: 6), the pieces ramp up and down (``ramp``: widths ``1, 2, 3, 3, 2,
1``), so those two are the smallest: on 64 boxes over plain rails 5.35 -> 5.14 ms under
``event`` (in order 5.36 -> 5.35); over SHARP rails ``event`` is unchanged (3.89) and program
order loses (3.34 -> 3.61), as does ``sync``, which waits for each step's largest piece (plain
6.66 -> 7.25, SHARP 4.23 -> 4.81). ``ramp=false`` keeps the pieces equal.
"""

from __future__ import annotations

import math

import numpy as np

from ...instances.instance import Instance
from ...instances.switch_ops import copying_mask, reducing_mask
from ...tens.schedule import OP_COPY, OP_REDUCE, Schedule, from_arrays
from ..producers import Outcome, Param, Producer, Unsupported

MAX_PIECES = 256
MAX_SENDS = 4_000_000  # sends a schedule may have (pieces are cut to fit; verification and pricing time)


def boxes_of(instance: Instance) -> tuple[list[list[int]], list[int]]:
    """``(boxes, switches)``: the GPUs (sorted) linked both ways to each reducing, multicasting
    switch, and those switches; every participating GPU in exactly one box, boxes of equal size
    (else :class:`Unsupported`)."""
    topo, coll = instance.topology, instance.collective
    if instance.concurrent or coll.kind != "allreduce":
        raise Unsupported("switch-reduction allreduce takes a single allreduce")
    computing = np.flatnonzero(reducing_mask(topo) & copying_mask(topo, False))
    ranks = set(coll.nodes)
    boxes, switches, seen = [], [], set()
    for w in computing.tolist():
        members = sorted(v for v in ranks if topo.has_link(v, w) and topo.has_link(w, v))
        if len(members) >= 2 and not seen & set(members):
            boxes.append(members)
            switches.append(w)
            seen |= set(members)
    if seen != ranks or len({len(b) for b in boxes}) != 1:
        raise Unsupported("every GPU must sit in one box: a switch that reduces and multicasts, linked both ways to "
                          "equally many GPUs")
    return boxes, switches


def rails_of(instance: Instance, boxes: list[list[int]]) -> list[int]:
    """The switch joining the g-th GPUs of all boxes, per g (linked both ways to each)."""
    topo = instance.topology
    rails = []
    for g in range(len(boxes[0])):
        lane = [b[g] for b in boxes]
        common = set.intersection(*({w for w in topo.switches if topo.has_link(v, w) and topo.has_link(w, v)}
                                    for v in lane))
        if not common:
            raise Unsupported(f"no switch joins GPU {g} of every box (a rail)")
        rails.append(min(common))
    return rails


class _Rows:
    """Sends of one piece: ``(chunk, src, dst, step, op)`` columns and sub-piece bounds."""

    def __init__(self):
        self.cols: list[list[int]] = [[] for _ in range(7)]  # chunk, src, dst, step, op, sub_lo, sub_hi

    def add(self, chunk: int, src: int, dst: int, step: int, op: int, sub: tuple[int, int] = (0, 1)) -> None:
        """Add one send of sub-piece ``sub`` (``(lo, hi)`` of the piece) of ``chunk``."""
        for col, v in zip(self.cols, (chunk, src, dst, step, op, *sub)):
            col.append(v)


def box_rows(boxes, switches, coll, shape: str) -> _Rows:
    """One piece of the one-box allreduce (module doc), shape ``multicast`` or ``load-reduce``."""
    rows, box, w = _Rows(), boxes[0], switches[0]
    for owner in box:
        for c in coll.owner_chunks(owner):
            if shape == "multicast":
                for x in box:
                    rows.add(c, x, w, 1, OP_REDUCE)
                for x in box:
                    rows.add(c, w, x, 2, OP_COPY)
                continue
            for x in box:
                if x != owner:
                    rows.add(c, x, w, 1, OP_REDUCE)
            rows.add(c, w, owner, 2, OP_REDUCE)
            rows.add(c, owner, w, 3, OP_COPY)
            for x in box:
                if x != owner:
                    rows.add(c, w, x, 4, OP_COPY)
    return rows


def tree_rows(instance: Instance, boxes, switches, rails) -> _Rows:
    """One piece of the allreduce across boxes (module doc: steps 1-8, or 1-6 over reducing rails)."""
    topo, coll = instance.topology, instance.collective
    reducing, copying = reducing_mask(topo), copying_mask(topo, True)
    rows = _Rows()
    where = {v: (b, g) for b, box in enumerate(boxes) for g, v in enumerate(box)}
    for owner in coll.nodes:
        ob, g = where[owner]
        r = rails[g]
        lanes = [box[g] for box in boxes]
        summed = bool(reducing[r] and copying[r])
        for c in coll.owner_chunks(owner):
            for box, w, lane in zip(boxes, switches, lanes):
                for x in box:
                    if x != lane:
                        rows.add(c, x, w, 1, OP_REDUCE)
                rows.add(c, w, lane, 2, OP_REDUCE)
            last = _rail_rows(rows, c, lanes, ob, r, summed, bool(copying[r]))
            for box, w, lane in zip(boxes, switches, lanes):
                rows.add(c, lane, w, last + 1, OP_COPY)
                for x in box:
                    if x != lane:
                        rows.add(c, w, x, last + 2, OP_COPY)
    return rows


def _rail_rows(rows: _Rows, c: int, lanes: list[int], ob: int, r: int, summed: bool, copy: bool) -> int:
    """The rail steps of chunk ``c`` (3 onward); returns the last step used."""
    if summed:  # SHARP: the box sums go up, the rail multicasts their sum
        for lane in lanes:
            rows.add(c, lane, r, 3, OP_REDUCE)
        for lane in lanes:
            rows.add(c, r, lane, 4, OP_COPY)
        return 4
    root = lanes[ob]
    others = [lane for lane in lanes if lane != root]
    for lane in others:
        rows.add(c, lane, r, 3, OP_REDUCE)
    for lane in others:
        rows.add(c, r, root, 4, OP_REDUCE)
    for _ in range(1 if copy else len(others)):
        rows.add(c, root, r, 5, OP_COPY)
    for lane in others:
        rows.add(c, r, lane, 6, OP_COPY)
    return 6


def auto_pieces(instance: Instance, steps: int, per_piece: int) -> tuple[int, bool]:
    """The pipeline depth of the module doc, within :data:`MAX_PIECES` and :data:`MAX_SENDS`, and
    whether the cap on sends cut it (then the pieces ramp: :func:`ramp_widths`)."""
    la = instance.topology.link_arrays
    alpha = max(float(la.alpha.max()), 1e-12)
    per_link = instance.collective.message_bytes / float(la.bandwidth.min())
    best = int(round(math.sqrt(max(steps - 1, 1) * per_link / alpha)))
    cap = MAX_SENDS // max(per_piece, 1)
    return max(1, min(best, MAX_PIECES, cap)), cap < min(best, MAX_PIECES)


def ramp_widths(pieces: int) -> np.ndarray:
    """Piece widths rising and falling by one (module doc: the fill and drain in the smallest).

    >>> ramp_widths(6).tolist(), ramp_widths(3).tolist()
    ([1, 2, 3, 3, 2, 1], [1, 2, 1])
    """
    p = np.arange(pieces, dtype=np.int64)
    return np.minimum(p + 1, pieces - p)


def pipelined(instance: Instance, rows: _Rows, pieces: int, name: str, ramp: bool = False) -> Schedule:
    """``rows`` repeated for ``pieces`` pieces of every chunk, piece ``p`` ``p`` steps later; the
    pieces equal, or of :func:`ramp_widths` with ``ramp``."""
    chunk, src, dst, step, op, sub_lo, sub_hi = (np.asarray(c, np.int64) for c in rows.cols)
    sub = int(sub_hi.max())
    widths = ramp_widths(pieces) if ramp else np.ones(pieces, np.int64)
    start = np.concatenate([[0], np.cumsum(widths)])
    p = np.repeat(np.arange(pieces, dtype=np.int64), len(chunk))
    tile = lambda a: np.tile(a, pieces)  # noqa: E731
    coll, base, w = instance.collective, start[p] * sub, widths[p]
    return from_arrays("allreduce", instance.topology.size, coll.num_chunks, chunk=tile(chunk), src=tile(src),
                       dst=tile(dst), step=tile(step) + p, lo=base + tile(sub_lo) * w, hi=base + tile(sub_hi) * w,
                       denom=int(start[-1]) * sub, op=tile(op), meta={"producer": name, "pieces": pieces})


def _run(name: str, build_rows):
    def run(instance: Instance, options) -> Outcome:
        boxes, switches = boxes_of(instance)
        rows, steps = build_rows(instance, boxes, switches, options.params)
        pieces, cut = (options.params["pieces"], False) if options.params.get("pieces") else \
            auto_pieces(instance, steps, len(rows.cols[0]))
        ramp = options.params.get("ramp")
        ramp = cut if ramp is None else ramp
        sched = pipelined(instance, rows, int(pieces), name, ramp)
        return Outcome(sched, "constructed", objective=float(sched.num_steps), units="steps",
                       extra={"pieces": int(pieces), "ramp": bool(ramp), "boxes": len(boxes)})
    return run


def _nvls_rows(instance, boxes, switches, params):
    if len(boxes) != 1:
        raise Unsupported(f"nvls runs in one box; this topology has {len(boxes)} (use nvls-tree)")
    shape = params.get("shape") or "multicast"
    return box_rows(boxes, switches, instance.collective, shape), 2 if shape == "multicast" else 4


def _tree_rows(instance, boxes, switches, params):
    if len(boxes) < 2:
        raise Unsupported("nvls-tree joins two or more boxes; this topology has one (use nvls)")
    rails = rails_of(instance, boxes)
    rows = tree_rows(instance, boxes, switches, rails)
    return rows, max(rows.cols[3])


PIECES = Param("pieces", int, None, "pipeline pieces per chunk (default: the alpha-beta optimum, at most 256)", 1,
               4096)
RAMP = Param("ramp", bool, None, "pieces ramp up and down in size (default: where the cap on sends cut the pieces)")
PRODUCERS = [
    Producer("nvls", "closed-form", _run("nvls", _nvls_rows),
             "allreduce in one box through a switch that sums and multicasts (NVLink SHARP)",
             params=(PIECES, Param("shape", ("multicast", "load-reduce"), "multicast",
                                   "multicast: the switch multicasts the sum; load-reduce: the owner reads the "
                                   "others' sum and stores the result back for the switch to multicast (NCCL's NVLS)"),
                     RAMP)),
    Producer("nvls-tree", "closed-form", _run("nvls-tree", _tree_rows),
             "allreduce across boxes: reduce in each box's switch, across the rails (summed by reducing rails), "
             "multicast back (NVLSTree)", params=(PIECES, RAMP)),
]

__all__ = ["PRODUCERS", "boxes_of", "rails_of", "box_rows", "tree_rows", "pipelined", "auto_pieces", "ramp_widths"]
