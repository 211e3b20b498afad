"""The verifier as it was before the compiled kernels: the reference (oracle) whose verdicts
and messages tests compare :mod:`collsynth.tens.verify` with. Do not use it outside the tests.

Semantics: those of :mod:`collsynth.tens.verify` (its module docstring: the holdings ``H_t`` of
TACOS section IV-B and the ILP of its Fig. 12, with pieces and contributions added), including
its malformed sends (step < 1, a piece outside ``[0, 1)``, a chunk id outside the collective(s),
a node id out of range or failed, a missing or failed link).

Pieces are handled exactly: every chunk is split into elementary segments at all the ``lo``/
``hi`` breakpoints of its sends (one vectorised ``np.unique``/``searchsorted``), sends expand to
segments, and holdings are tracked per (segment, node). Work is vectorised per step.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from collsynth.instances.collective import Collective
from collsynth.instances.instance import Instance
from collsynth.instances.topology import Topology
from collsynth.tens.schedule import OP_COPY, OP_DEFAULT, OP_REDUCE, Schedule
from collsynth.tens.ten import link_delays  # the TEN delay of a link (its definition, not a verifier)
from collsynth.tens.verify import Violation  # the result type; the algorithm below is the former one
# the messages are the library's own words (their wording is not what is checked); the pieces they
# name are merged and printed here (_interval, _intervals below), since those are compared
from collsynth.tens.verify import _at, _dead_reason, _link_reason

MEMORY_BUDGET = 1 << 27  # bytes of holdings state simulated at once (chunks are batched to fit)


def _interval(lo: int, hi: int, d: int) -> str:
    """``[lo/d, hi/d)`` in lowest terms."""
    return f"[{Fraction(int(lo), d)}, {Fraction(int(hi), d)})"


def _intervals(los, his, d: int) -> str:
    """The intervals ``[lo, hi)`` (sorted), touching ones merged into one, printed."""
    merged: list[tuple[int, int]] = []
    for lo, hi in zip(los.tolist(), his.tolist()):
        if merged and merged[-1][1] == lo:
            lo = merged.pop()[0]
        merged.append((lo, hi))
    return ", ".join(_interval(lo, hi, d) for lo, hi in merged)


def verify(schedule: Schedule, instance: Instance) -> Violation | None:
    """The former verifier: the contract of :func:`collsynth.tens.verify.verify` (first malformed
    send, else the earliest illegal step, else the first missing postcondition; concurrent
    collectives each on their own chunk ids), with holdings simulated in plain numpy."""
    topo = instance.topology
    colls = instance.collectives
    offsets = instance.chunk_offsets
    total = offsets[-1] + colls[-1].num_chunks
    v = _static(schedule, topo, total)
    if v is not None:
        return v
    if len(colls) == 1:
        parts = [(np.arange(len(schedule)), colls[0], 0)]
    else:
        part_of = np.searchsorted(np.asarray(offsets), schedule.chunk, side="right") - 1
        parts = [(np.flatnonzero(part_of == k), c, o) for k, (c, o) in enumerate(zip(colls, offsets))]
    found = [v for idx, coll, off in parts if (v := _simulate(schedule, idx, coll, off, topo)) is not None]
    if not found:
        return None
    return min(found, key=lambda v: (v.step, v.index is None, v.index or 0))


# ---- malformed sends, pieces, holdings --------------------------------------------------------

def _static(s: Schedule, topo: Topology, total: int) -> Violation | None:
    """Malformed sends (vectorised): steps, pieces, chunk ids, ops, node ids, links."""
    n = len(s)
    if s.denom < 1:
        return Violation(None, None, 0, f"piece denominator must be positive, got {s.denom}")
    if n == 0:
        return None
    size = topo.size
    src, dst = s.src, s.dst
    in_range = (src >= 0) & (src < size) & (dst >= 0) & (dst < size)
    alive = np.zeros(size, dtype=bool)
    alive[np.asarray(topo.nodes, dtype=np.int64)] = True
    srcc, dstc = np.clip(src, 0, size - 1), np.clip(dst, 0, size - 1)
    src_dead, dst_dead = in_range & ~alive[srcc], in_range & ~alive[dstc]
    if s.routing == "shortest-path":
        no_link = topo.distances[srcc, dstc] <= 0
    else:
        no_link = topo.link_arrays.lookup(srcc, dstc) < 0
    checks = [
        (s.step < 1, lambda i: f"steps start at 1, got step {s.step[i]}"),
        ((s.lo < 0) | (s.hi > s.denom) | (s.lo >= s.hi),
         lambda i: f"piece {_interval(s.lo[i], s.hi[i], s.denom)} is not a non-empty part of [0, 1)"),
        ((s.chunk < 0) | (s.chunk >= total), lambda i: f"chunk id {s.chunk[i]} is outside 0..{total - 1}"),
        ((s.op != OP_DEFAULT) & (s.op != OP_COPY) & (s.op != OP_REDUCE), lambda i: f"unknown op code {s.op[i]}"),
        (~in_range, lambda i: f"node {src[i] if not 0 <= src[i] < size else dst[i]} is not in 0..{size - 1}"),
        (src_dead | dst_dead, lambda i: _dead_reason(topo, int(src[i] if src_dead[i] else dst[i]))),
        (src == dst, lambda i: f"source and destination are the same node {src[i]}"),
        (no_link, lambda i: _link_reason(s, topo, int(src[i]), int(dst[i]))),
    ]
    bad = np.zeros(n, dtype=bool)
    for mask, _ in checks:
        bad |= mask
    if not bad.any():
        return None
    i = int(np.argmax(bad))
    for mask, reason in checks:
        if mask[i]:
            return _at(s, i, reason(i))
    raise AssertionError("unreachable")


# ---- simulation ----------------------------------------------------------------------------

def _segments(chunk: np.ndarray, lo: np.ndarray, hi: np.ndarray, denom: int, num_chunks: int):
    """Elementary segments of every chunk: cut at every lo/hi of its sends (and 0, 1).

    Points are first compressed to ranks (so keys ``chunk * P + rank`` never overflow), then
    one ``np.unique`` gives all breakpoints. Returns segment chunk/lo/hi columns and, per
    send, its first and one-past-last segment.
    """
    pts = np.unique(np.concatenate([lo, hi, np.array([0, denom], dtype=np.int64)]))
    P = len(pts)
    lo_r, hi_r = np.searchsorted(pts, lo), np.searchsorted(pts, hi)
    allc = np.arange(num_chunks, dtype=np.int64) * P
    keys = np.unique(np.concatenate([chunk * P + lo_r, chunk * P + hi_r, allc, allc + (P - 1)]))
    kc = keys // P
    starts = kc[:-1] == kc[1:]
    seg_key = keys[:-1][starts]
    seg_chunk = seg_key // P
    seg_lo = pts[seg_key % P]
    seg_hi = pts[keys[1:][starts] % P]
    first = np.searchsorted(seg_key, chunk * P + lo_r)
    last = np.searchsorted(seg_key, chunk * P + hi_r)
    return seg_chunk, seg_lo, seg_hi, first, last


def _simulate(s: Schedule, idx: np.ndarray, coll: Collective, off: int, topo: Topology) -> Violation | None:
    """Step-by-step holdings of one collective's sends ``idx`` (chunk ids shifted by ``off``)."""
    S = topo.size
    chunk = s.chunk[idx].astype(np.int64) - off  # keys chunk * P + rank are computed in 64 bits
    src, dst, step = s.src[idx], s.dst[idx], s.step[idx]
    combining = coll.combining
    default = OP_REDUCE if combining else OP_COPY
    op = np.where(s.op[idx] == OP_DEFAULT, default, s.op[idx])
    if not combining and (op == OP_REDUCE).any():
        j = int(np.argmax(op == OP_REDUCE))
        return _at(s, idx[j], f"a reduce send in a {coll.kind}, which does not combine")
    seg_chunk, seg_lo, seg_hi, first, last = _segments(chunk, s.lo[idx], s.hi[idx], s.denom, coll.num_chunks)
    # expand sends to segments (in send-index order)
    cnt = last - first
    e_send = np.repeat(np.arange(len(idx)), cnt)
    e_seg = first[e_send] + (np.arange(len(e_send)) - np.repeat(np.cumsum(cnt) - cnt, cnt))
    # chunks evolve independently: simulate batches of whole chunks within a memory budget
    per_seg = S * (8 * ((len(coll.nodes) + 63) // 64) if combining else 1)
    cuts = _batches(seg_chunk, max(1, MEMORY_BUDGET // per_seg))
    batch = np.searchsorted(cuts, e_seg, side="right") - 1
    st = step[e_send]
    if len(cuts) > 2 and int(st.max(initial=0)) < (1 << 62) // len(cuts):  # one key: batch, step
        st = batch * (int(st.max(initial=0)) + 1) + st
        order = np.argsort(st, kind="stable")  # stable: send index order within a step
    elif len(cuts) > 2:
        order = np.lexsort((st, batch))
    else:
        order = np.argsort(st, kind="stable")
    e_send, e_seg, batch = e_send[order], e_seg[order], batch[order]
    e_step = step[e_send]
    ebounds = np.searchsorted(batch, np.arange(len(cuts)))
    found = []
    for b in range(len(cuts) - 1):
        s0, s1 = int(cuts[b]), int(cuts[b + 1])
        ea, eb = int(ebounds[b]), int(ebounds[b + 1])
        steps, bounds = np.unique(e_step[ea:eb], return_index=True)
        bounds = np.append(bounds, eb - ea)
        ctx = _Ctx(s, idx, off, coll, seg_chunk[s0:s1], seg_lo[s0:s1], seg_hi[s0:s1],
                   e_send[ea:eb], e_seg[ea:eb] - s0, e_step[ea:eb], src, dst)
        run = _run_combining(ctx, S, s1 - s0, op, steps, bounds) if combining else _run_copy(ctx, S, s1 - s0, steps, bounds)
        if run is not None:
            found.append(run)
    if not found:
        return None
    return min(found, key=lambda v: (v.step, v.index is None, v.index or 0))  # ties: first chunk


def _batches(seg_chunk: np.ndarray, max_segs: int) -> np.ndarray:
    """Cut positions ``[0, ..., nseg]`` at chunk boundaries, about ``max_segs`` segments apart."""
    n = len(seg_chunk)
    starts = np.concatenate([[0], np.flatnonzero(np.diff(seg_chunk)) + 1, [n]])
    cuts = [0]
    while cuts[-1] < n:
        k = int(np.searchsorted(starts, cuts[-1] + max_segs, side="right")) - 1
        nxt = int(starts[k])
        if nxt <= cuts[-1]:  # one chunk has more segments than the budget: take it whole
            nxt = int(starts[np.searchsorted(starts, cuts[-1], side="right")])
        cuts.append(nxt)
    return np.asarray(cuts, dtype=np.int64)


@dataclass
class _Ctx:
    s: Schedule
    idx: np.ndarray
    off: int
    coll: Collective
    seg_chunk: np.ndarray
    seg_lo: np.ndarray
    seg_hi: np.ndarray
    e_send: np.ndarray
    e_seg: np.ndarray
    e_step: np.ndarray
    src: np.ndarray
    dst: np.ndarray

    def violation(self, j: int, reason: str) -> Violation:
        return _at(self.s, int(self.idx[j]), reason)

    def not_held(self, j: int, t: int, missing_segs: np.ndarray, what: str, part: str) -> Violation:
        """Explain why local send ``j`` of step ``t`` lacks ``missing_segs`` at its source."""
        u = int(self.src[j])
        segs = np.flatnonzero(self.e_send == j)
        segs = np.sort(self.e_seg[segs])
        if len(missing_segs) == len(segs):
            reason = f"source {what} the piece"
        else:
            ms = np.sort(missing_segs)
            reason = f"source {part} (missing {_intervals(self.seg_lo[ms], self.seg_hi[ms], self.s.denom)})"
        g = int(missing_segs.min())
        later = (self.e_seg == g) & (self.dst[self.e_send] == u) & (self.e_step >= t)
        if later.any():
            reason += f"; it arrives there only at the end of step {int(self.e_step[later].min())}"
        else:
            reason += "; it never arrives there"
        return self.violation(j, reason)

    def end_step(self) -> int:
        return self.s.num_steps

    def missing_text(self, c: int, v: int, missing: np.ndarray) -> str:
        """'does not hold chunk c' or 'lacks [a, b) of chunk c' for node v (segment mask of c)."""
        segs = np.flatnonzero(self.seg_chunk == c)
        cid = c + self.off
        if missing[segs].all():
            return f"node {v} does not hold chunk {cid} at the end"
        m = segs[missing[segs]]
        return f"node {v} lacks {_intervals(self.seg_lo[m], self.seg_hi[m], self.s.denom)} of chunk {cid} at the end"


def _run_copy(ctx: _Ctx, S: int, nseg: int, steps, bounds) -> Violation | None:
    """Boolean holdings per (segment, node) for non-combining collectives."""
    H = ctx.coll.precondition[ctx.seg_chunk].copy()  # (nseg, S)
    src_e, dst_e = ctx.src[ctx.e_send], ctx.dst[ctx.e_send]
    for k, t in enumerate(steps.tolist()):
        a, b = bounds[k], bounds[k + 1]
        g, u, v = ctx.e_seg[a:b], src_e[a:b], dst_e[a:b]
        ok = H[g, u]
        if not ok.all():
            bad = np.flatnonzero(~ok)
            j = int(ctx.e_send[a + bad[0]])
            miss = g[bad][ctx.e_send[a + bad] == j]
            return ctx.not_held(j, t, miss, "does not hold", "holds only part of the piece")
        H[g, v] = True
    need = ctx.coll.postcondition[ctx.seg_chunk]
    lacking = need & ~H
    if lacking.any():
        g, v = np.argwhere(lacking)[0]  # segments are sorted by chunk: first chunk, then node
        c = int(ctx.seg_chunk[g])
        segs = np.flatnonzero(ctx.seg_chunk == c)
        v = int(np.flatnonzero(lacking[segs].any(axis=0))[0])
        return Violation(None, None, ctx.end_step(), ctx.missing_text(c, v, lacking[:, v]))
    return None


def _popcount(words: np.ndarray) -> np.ndarray:
    """Number of set bits per row of a (rows, W) uint64 array."""
    return np.bitwise_count(words).sum(axis=-1, dtype=np.int64)


def _run_combining(ctx: _Ctx, S: int, nseg: int, op: np.ndarray, steps, bounds) -> Violation | None:
    """Contribution sets per (segment, node) as packed bitsets over the participants."""
    coll = ctx.coll
    ranks = np.asarray(coll.nodes, dtype=np.int64)
    R = len(ranks)
    W = (R + 63) // 64
    k = np.arange(R)
    word, bit = k // 64, np.left_shift(np.uint64(1), (k % 64).astype(np.uint64))
    C = np.zeros((nseg, S, W), dtype=np.uint64)
    pre = coll.precondition[ctx.seg_chunk][:, ranks]  # (nseg, R)
    C[np.arange(nseg)[:, None], ranks[None, :], word[None, :]] = np.where(pre, bit[None, :], np.uint64(0))
    full = np.zeros(W, dtype=np.uint64)
    np.bitwise_or.at(full, word, bit)

    def names(words: np.ndarray) -> list[int]:
        bits = np.unpackbits(words.astype("<u8").view(np.uint8), bitorder="little")[:R]
        return ranks[np.flatnonzero(bits)].tolist()

    src_e, dst_e = ctx.src[ctx.e_send], ctx.dst[ctx.e_send]
    op_e = op[ctx.e_send]
    for kk, t in enumerate(steps.tolist()):
        a, b = bounds[kk], bounds[kk + 1]
        g, u, v = ctx.e_seg[a:b], src_e[a:b], dst_e[a:b]
        sends = ctx.e_send[a:b]
        incoming = C[g, u]  # (m, W): what each source holds at the end of t-1
        viol: list[tuple[int, Violation | str]] = []  # (local send, violation or reason)
        empty = ~incoming.any(axis=1)
        if empty.any():
            bad = np.flatnonzero(empty)
            j = int(sends[bad[0]])
            viol.append((j, ctx.not_held(j, t, g[bad][sends[bad] == j], "holds no contribution to",
                                         "holds no contribution to part of the piece")))
        key = g * S + v
        is_copy = op_e[a:b] == OP_COPY
        # copies: the receiver's set is replaced; several copies of one piece must agree
        ck, cin = key[is_copy], incoming[is_copy]
        corder = np.argsort(ck, kind="stable")
        ck, cin = ck[corder], cin[corder]
        cu, cstart = np.unique(ck, return_index=True)
        cfirst = cin[cstart] if len(cu) else cin
        if len(ck) > len(cu):
            rep = np.repeat(cfirst, np.diff(np.append(cstart, len(ck))), axis=0)
            differs = (rep != cin).any(axis=1)
            if differs.any():
                csends = sends[is_copy][corder]
                j = int(csends[differs].min())
                viol.append((j, f"conflicting copies of the piece arrive at node {int(v[is_copy][corder][differs][0])} in one step"))
        # reduces: add to the receiver's set (or to the copy arriving in this step)
        rmask = ~is_copy
        rk, rin, rsends = key[rmask], incoming[rmask], sends[rmask]
        rorder = np.argsort(rk, kind="stable")
        rk, rin, rsends = rk[rorder], rin[rorder], rsends[rorder]
        ru, rstart = np.unique(rk, return_index=True)
        if len(ru):
            OR = np.bitwise_or.reduceat(rin, rstart, axis=0)
            within = np.add.reduceat(_popcount(rin), rstart) != _popcount(OR)
            base = C[ru // S, ru % S]
            pos = np.searchsorted(cu, ru)
            posc = np.minimum(pos, max(len(cu) - 1, 0))
            copied = (len(cu) > 0) & (cu[posc] == ru) if len(cu) else np.zeros(len(ru), bool)
            if copied.any():
                base[copied] = cfirst[posc[copied]]
            overlap = (OR & base).any(axis=1)
            badg = np.flatnonzero(within | overlap)
            if len(badg):
                viol.append(_double(ctx, badg, rstart, rk, rin, rsends, base, S, names))
        if viol:
            j, what = min(viol, key=lambda x: x[0])
            return what if isinstance(what, Violation) else ctx.violation(j, what)
        if len(cu):
            C[cu // S, cu % S] = cfirst
        if len(ru):
            C[ru // S, ru % S] = base | OR
    need = coll.postcondition[ctx.seg_chunk]  # (nseg, S)
    ok = (C == full[None, None, :]).all(axis=2)
    lacking = need & ~ok
    if lacking.any():
        g, _ = np.argwhere(lacking)[0]
        c = int(ctx.seg_chunk[g])
        segs = np.flatnonzero(ctx.seg_chunk == c)
        vv = int(np.flatnonzero(lacking[segs].any(axis=0))[0])
        m = segs[lacking[segs, vv]]
        have = C[m[0], vv]
        d = ctx.s.denom
        piece = _intervals(ctx.seg_lo[m], ctx.seg_hi[m], d)
        if not have.any():
            reason = f"node {vv} holds nothing of chunk {c + ctx.off} {piece} at the end"
        else:
            miss = names(full & ~have)
            reason = (f"node {vv} holds chunk {c + ctx.off} {_interval(ctx.seg_lo[m[0]], ctx.seg_hi[m[0]], d)} "
                      f"reduced over {int(_popcount(have[None])[0])} of {R} ranks at the end "
                      f"(missing contributions of ranks {miss[:8]}{'...' if len(miss) > 8 else ''})")
        return Violation(None, None, ctx.end_step(), reason)
    return None


def _double(ctx, badg, rstart, rk, rin, rsends, base, S, names) -> tuple[int, str]:
    """The first reduce send (by index) that would count a contribution twice, and why."""
    ends = np.append(rstart, len(rk))
    best: tuple[int, str] | None = None
    for gi in badg.tolist():
        acc = base[gi].copy()
        rows = range(ends[gi], ends[gi + 1])
        # scan arrivals in index order; the first that overlaps what is already there fails
        for r in sorted(rows, key=lambda r: rsends[r]):
            dup = acc & rin[r]
            if dup.any():
                node = int(rk[r] % S)
                cand = (int(rsends[r]), f"duplicate reduction: contribution of ranks {names(dup)[:8]} "
                                        f"would be counted twice at node {node}")
                best = cand if best is None or cand < best else best
                break
            acc |= rin[r]
    assert best is not None
    return best


# ---- switch nodes ------------------------------------------------------------------------------

def switch_pairing(schedule: Schedule, instance: Instance) -> tuple[list[tuple[int, int]], list[int]]:
    """``(pairs, unpaired)``: ``(leaving send, arrival it forwards)`` for every send out of a
    switch node (schedule indices, sorted) and the leaving sends with a point no arrival serves
    (by step, then index), by the rule of ``docs/schedules.md`` written out in plain Python: the
    arrivals of its chunk at the switch ``back`` steps before its own (one, or its link's TEN
    delay on the declared ``meta["timestep_s"]``, one less over an instant switch-to-NPU hop),
    matched point by point, the j-th leaving send (by step, then index; per out-link with
    ``switch_copy``) with the j-th arrival (by index)."""
    s, topo = schedule, instance.topology
    switch = {v for v in topo.switches if v in topo.graph}
    copy = bool(s.meta.get("switch_copy", True))
    instant = topo.meta.get("switch_hop") == "instant"
    delay = None
    if s.meta.get("timestep_s") is not None:
        delay, _, _ = link_delays(topo, [c.chunk_bytes for c in instance.collectives], float(s.meta["timestep_s"]),
                                  switches=True)
        delay = delay[0]
    la = topo.link_arrays
    arrivals: dict[tuple, list[int]] = {}
    out: dict[tuple, list[int]] = {}
    for i in range(len(s)):
        c, u, v, t = int(s.chunk[i]), int(s.src[i]), int(s.dst[i]), int(s.step[i])
        if v in switch:
            arrivals.setdefault((c, v, t), []).append(i)
        if u in switch:
            back = 1 if delay is None else int(delay[int(la.lookup(np.array([u]), np.array([v]))[0])])
            out.setdefault((c, u, t - back + (instant and v not in switch)), []).append(i)
    pairs, unpaired = set(), set()
    for key, sends in out.items():
        came = arrivals.get(key, [])
        sends = sorted(sends, key=lambda i: (int(s.step[i]), i))
        cuts = sorted({int(x) for q in came + sends for x in (s.lo[q], s.hi[q])})
        for a, b in zip(cuts[:-1], cuts[1:]):
            cover = [j for j in came if s.lo[j] <= a and s.hi[j] >= b]
            taken: dict = {}
            for i in sends:
                if s.lo[i] <= a and s.hi[i] >= b:
                    port = int(s.dst[i]) if copy else None
                    nth = taken.get(port, 0)
                    taken[port] = nth + 1
                    if nth < len(cover):
                        pairs.add((i, cover[nth]))
                    else:
                        unpaired.add(i)
    return sorted(pairs), sorted(unpaired, key=lambda i: (int(s.step[i]), i))
