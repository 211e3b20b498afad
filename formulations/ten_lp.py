"""TEN LP: the fractional relaxation of the TACOS ILP (Won et al., TACOS, 2023, Section V-A): a bound and a fractional schedule.

Same model as :mod:`.ten_ilp` with ``hold`` and ``sent`` continuous in [0, 1]. Any schedule
that delivers everything in ``T`` timesteps is a feasible point of the LP at horizon ``T``
with the full arrivals objective, so if the LP optimum at ``T`` falls short of the number of
postcondition pairs, no schedule fits in ``T`` timesteps: :func:`bound` returns ``T + 1``, else
``T``. The smallest ``T`` whose LP delivers everything (found by
:func:`collsynth.solvers.ten.formulation_producers` from the combinatorial lower bound upward) is the LP lower bound
reported beside every ILP.

The LP's sends are amounts, not pieces with positions (two halves sent from one holder may be
the same half), so :func:`walk` turns them into real pieces: every chunk is cut into ``D``
equal atoms (``D`` the common denominator of the snapped amounts), timesteps are walked in
order, and a send of ``a`` atoms from ``s`` to ``d`` takes atoms ``s`` held when the send
started that ``d`` does not have, preferring atoms no later supplier of ``d`` holds, then the
atoms held by the fewest nodes so far (so the two directions of a bidirectional ring carry
different halves). Contiguous atom runs become pieces ``[lo/D, hi/D)``. Pairs the walk leaves
short are completed either by :func:`repair` (earliest-arrival paths through the capacity the
LP left idle, from timestep 1) or, by the caller, with whole-chunk shortest-path recovery
after the horizon (``drivers.recover`` rows handed to :func:`extend`, which trims them to the
atoms each destination lacks). :func:`to_schedule` gives the user's schedule (combining
collectives reversed from their dual on the transpose, concurrent collectives merged).
:func:`polish` re-aims a complete LP at little, early traffic, which makes the walk lose
much less; ``cuts=True`` (default) adds valid cumulative-send inequalities that stop the LP
from sending one held fraction over a link several times.

Switch nodes (TE-CCL's model, Liu et al., SIGCOMM 2024, Section 4; see :mod:`.ten_ilp`) hold
nothing: the LP relaxes the ILP's switch rows as they are, the cuts leave out links at switches
(a switch may receive and forward a chunk several times), and the walk lets a switch forward
only the atoms that arrived at it the timestep before the send starts (each of them once
without ``switch_copy``); it completes the pairs it leaves short by shortest-path recovery
only (:func:`repair` assumes that nodes keep what they receive).

>>> from collsynth.instances.generators import build as topo
>>> from collsynth.instances.instance import make_instance
>>> m = build(make_instance(topo("ring", {"nodes": 4}), "allgather"), horizon=2)
>>> m.ineq_cumulative_send.doc
'a chunk crosses a link pair at most once and never back: sends u->v by t plus v->u by t-k total at most the holding of u at t-k'
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import pyomo.core as pe
from pyomo.common.gc_manager import PauseGC

from ..tens import ten
from ..tens.schedule import Schedule
from ..tens.bounds import lower_bound  # noqa: F401 - the TEN bound every TEN formulation starts from
from ..tens.ten import SWITCH_COPY, NotSupported, TenData
from . import ten_ilp, ten_model
from ._ten_arrays import Rows, TenArrays, add_rows, csr_rows, ranges

NAME = "ten-lp"
SUMMARY = "LP relaxation of the TEN ILP: a polynomial lower bound on timesteps and a fractional schedule"
DRIVER_FAMILY = "ten"
ROLE = "relaxation"  # bound(model) proves a horizon; the schedule is realised from fractional amounts
PARAMS = (  # what build takes (name, type, default, help)
    ("cuts", bool, True, "cumulative-send cuts in the TEN LP"),
    ("capacity", bool, True, "one chunk per link per timestep"),
    ("weights", list[float], None, "one weight per concurrent collective", 0),
    ("timestep", float, None, "seconds per TEN timestep (default: the cheapest link's cost per chunk)"),
    ("switch_copy", bool, SWITCH_COPY, "switch nodes forward one arrival on several out-links (multicast, "
                                       "TE-CCL's default); false: one out-send per arrival"),
    ("build_limit", float, None, "seconds the model build may take (estimated first; refused beyond)"),
)
TOL = 1e-6
MAX_DENOMINATOR = 64  # an LP amount is snapped to the nearest fraction with at most this denominator
MAX_ATOMS = 1024  # cap on the common denominator (beyond it amounts are apportioned in 1024ths)
_NEVER = np.iinfo(np.int64).max


def build(instance, horizon: int, state=None, *, cuts: bool = True, **params) -> pe.ConcreteModel:
    """The LP relaxation of :func:`collsynth.formulations.ten_ilp.build` (same parameters).

    ``cuts=True`` adds ``ineq_cumulative_send``: the amount of a chunk sent over ``u -> v`` by
    timestep ``t``, plus what came back over ``v -> u`` by ``t-k``, is at most what ``u`` held at
    ``t-k``. Every integral solution obeys it (a chunk arrives at a node at most once, so it
    crosses a pair at most once, never in both directions, and holdings persist), so the LP
    stays a relaxation and its bound stays valid; without it the LP may send one held third
    three times over one link, or bounce a half to a neighbour and back, and count it whole.
    """
    params.pop("relax", None)
    parts = ten_ilp.assemble(instance, horizon, state, relax=True, **params)
    if cuts:
        rows = cumulative_send_rows(parts.data, parts.ix)
        with PauseGC():  # as in ten_ilp.assemble
            # CONSTRAINTS
            add_rows(parts.model, "ineq_cumulative_send", rows, parts.columns,
                     "a chunk crosses a link pair at most once and never back: sends u->v by t plus v->u by t-k "
                     "total at most the holding of u at t-k")
    return parts.model


def cumulative_send_rows(data: TenData, ix: TenArrays) -> Rows:
    """The cumulative-send cuts (see :func:`build`) as rows, keyed ``(chunk, pair, arrival)``:
    one per send whose source does not hold the chunk from the start and has a holding at
    ``t - k``, when the chunk may cross the pair more than once or come back over the reverse
    pair by ``t - k`` (otherwise the row repeats ``ineq_send_needs_hold``)."""
    c, l, t = ix.sent_c, ix.sent_l, ix.sent_t  # sorted by (chunk, pair, arrival)
    L = len(data.src)
    k = data.lag[data.group[c], l]  # its delay plus its latency (the sources here are no switches)
    src = data.src[l]
    key = c * L + l
    first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    size = np.diff(np.r_[first, len(key)])
    start = np.repeat(first, size)  # first send of each send's (chunk, pair)
    S = data.pre.shape[1]
    pairs = data.src * S + data.dst  # sorted
    pos = np.minimum(np.searchsorted(pairs, data.dst * S + data.src), L - 1)
    back = np.where(pairs[pos] == data.dst * S + data.src, pos, -1)[l]  # the reverse pair, -1 if none
    T2 = ix.horizon + 2
    order_key = key * T2 + t  # sorted
    rkey = c * L + np.maximum(back, 0)
    rfirst = np.searchsorted(order_key, rkey * T2)
    rcount = np.where(back >= 0, np.searchsorted(order_key, rkey * T2 + (t - k), side="right") - rfirst, 0)
    h = ix.hold_column(c, src, t - k)
    own = np.arange(len(c)) - start + 1  # sends of the same (chunk, pair) arriving by t
    # no cut at switches: a switch may receive and forward a chunk more than once
    sel = np.flatnonzero(~data.pre[c, src] & (h >= 0) & ~data.switch[data.dst[l]]
                         & ((np.repeat(size, size) > 1) | (rcount > 0)))
    r = np.arange(len(sel))
    o_owner, o_col = ranges(start[sel], start[sel] + own[sel] - 1)
    b_owner, b_col = ranges(rfirst[sel], rfirst[sel] + rcount[sel] - 1)
    keys = list(zip(ix.chunk_ids[c[sel]].tolist(), l[sel].tolist(), t[sel].tolist()))
    return csr_rows(keys, np.concatenate([o_owner, b_owner, r]), np.concatenate([o_col, b_col, h[sel]]),
                    np.concatenate([np.ones(len(o_owner) + len(b_owner)), -np.ones(len(sel))]), -np.inf, 0.0)


def integral(model) -> bool:
    """True when every loaded ``sent``/``hold`` value is within 1e-6 of 0 or 1."""
    view = ten_model(model)
    for comp in (view.sent, view.hold):
        for v in comp.values():
            x = v.value or 0.0
            if min(abs(x), abs(1 - x)) > TOL:
                return False
    return True


def fractional(model) -> list[tuple[int, int, int, int, float]]:
    """The LP's flows ``(chunk, src, dst, arrival_step, amount)`` with amount > 1e-6."""
    view = ten_model(model)
    data = view.data
    out = []
    for (c, l, t), v in view.sent.items():
        if v.value is not None and v.value > TOL:
            out.append((int(c), int(data.src[l]), int(data.dst[l]), int(t), float(v.value)))
    return sorted(out)


def bound(model):
    """Lower bound on timesteps proven by the solved LP (arrivals objective, see module doc)."""
    view = ten_model(model)
    T = view.data.horizon
    total = view.required()
    got = sum(view.hold[c, n, T].value or 0.0 for c, n in view.pairs if (c, n, T) in view.hold)
    return T if got >= total - 1e-6 * max(1, total) else T + 1


def complete(model) -> bool:
    """The solved LP delivers (fractionally) every postcondition pair by its horizon."""
    return bound(model) == ten_model(model).data.horizon


def polish(model) -> pe.ConcreteModel:
    """Turn a complete LP into "deliver everything with little, early traffic" (in place).

    Adds ``ineq_deliver_all`` (the postcondition pairs held at the horizon total what
    :func:`complete` requires) and replaces the arrivals objective by ``early_traffic``:
    minimise ``sum (1 + t / (T + 1)) * sent[c, l, t]``. The horizon and the bound are
    unchanged; the re-solved LP has no flows that wander without purpose and delivers early,
    which is what :func:`walk` needs to turn amounts into pieces that arrive whole.
    """
    view = ten_model(model)
    T = view.data.horizon
    pairs = view.pairs
    total = len(pairs)
    if any((c, n, T) not in view.hold for c, n in pairs):
        raise NotSupported(f"some postcondition pair cannot arrive by the horizon {T}: nothing to polish")
    for obj in list(model.component_data_objects(pe.Objective, active=True)):
        obj.deactivate()
    held = sum(view.hold[c, n, T] for c, n in pairs)
    model.ineq_deliver_all = pe.Constraint(
        expr=held >= total - 1e-6 * max(1, total),
        doc="every postcondition pair is held (fractionally) at the horizon")
    model.early_traffic = pe.Objective(
        expr=sum((1 + t / (T + 1)) * v for (c, l, t), v in view.sent.items()) + 0, sense=pe.minimize,
        doc="little and early traffic among complete LP solutions")
    return model


# ---- from amounts to pieces ----------------------------------------------------------------

@dataclass
class Walk:
    """Atom-level sends in the model's direction (the dual for combining collectives).

    Send ``i`` moves atoms ``atoms[i]`` (sorted indices in ``0..denom-1``) of chunk ``chunk[i]``
    over link pair ``pair[i]``, arriving at the end of timestep ``step[i]``. ``held[c, n]``:
    node ``n`` holds every atom of chunk ``c`` after the last send; ``arrival[(c, n)]`` is when
    each atom reached ``n`` (``_NEVER`` if not; pairs never touched and not held at the start
    are absent); ``fractional_sends`` counts the sends of fewer than ``denom`` atoms.
    """

    data: TenData
    denom: int
    chunk: list = field(default_factory=list)
    pair: list = field(default_factory=list)
    step: list = field(default_factory=list)
    atoms: list = field(default_factory=list)
    held: np.ndarray = None
    arrival: dict = field(default_factory=dict, repr=False)
    horizon: int = 0

    @property
    def fractional_sends(self) -> int:
        """The sends that carry only part of a chunk (fewer than ``denom`` atoms)."""
        return sum(1 for a in self.atoms if len(a) < self.denom)

    @property
    def steps(self) -> int:
        """The last timestep a send arrives in (0 when nothing is sent)."""
        return max(self.step, default=0)


def amounts(model, max_denominator: int = MAX_DENOMINATOR, max_atoms: int = MAX_ATOMS):
    """The LP's sends as exact atom counts: ``(rows (chunk, pair, arrival), atoms, D)``.

    When every loaded ``sent`` value is within 1e-6 of a fraction with denominator at most
    ``max_denominator`` and the lcm ``D`` of those denominators is at most ``max_atoms``, the
    counts are exact (``x * D``). Otherwise ``D = max_atoms`` and the amounts arriving at each
    (chunk, node) are apportioned by largest remainders, so their total stays
    ``round(D * sum)`` (a node the LP fills whole gets exactly ``D`` atoms offered).
    Zero counts are dropped; rows are sorted by (arrival, chunk, pair).
    """
    view = ten_model(model)
    data = view.data
    rows, xs = [], []
    for idx, v in view.sent.items():
        x = v.value
        if x is not None and x > TOL:
            rows.append(idx)
            xs.append(min(float(x), 1.0))
    fr = [Fraction(x).limit_denominator(max_denominator) for x in xs]
    D = 1
    exact = all(abs(float(f) - x) <= TOL for f, x in zip(fr, xs))
    for f in fr if exact else ():
        D = D * f.denominator // math.gcd(D, f.denominator)
        if D > max_atoms:
            exact = False
            break
    r = np.array(rows, np.int64).reshape(-1, 3)
    if exact:
        counts = np.array([f.numerator * D // f.denominator for f in fr], np.int64)
    else:
        D = int(max_atoms)
        scaled = np.array(xs, float) * D
        counts = np.floor(scaled + 1e-9).astype(np.int64)
        rem = scaled - counts
        dst = data.dst[r[:, 1]] if len(r) else np.zeros(0, np.int64)
        key = r[:, 0] * data.pre.shape[1] + dst if len(r) else dst
        order = np.lexsort((-rem, key))  # per destination pair, largest remainder first
        ks = key[order]
        starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]]) if len(ks) else np.zeros(0, np.int64)
        ends = np.r_[starts[1:], len(ks)]
        for a, b in zip(starts.tolist(), ends.tolist()):
            idx = order[a:b]
            extra = int(round(scaled[idx].sum())) - int(counts[idx].sum())
            if extra > 0:
                counts[idx[:extra]] += 1
    keep = counts > 0
    r, counts = r[keep], counts[keep]
    order = np.lexsort((r[:, 1], r[:, 0], r[:, 2])) if len(r) else np.zeros(0, np.int64)
    return r[order], counts[order], int(D)


def walk(model, max_denominator: int = MAX_DENOMINATOR, max_atoms: int = MAX_ATOMS, *,
         link_class: np.ndarray | None = None, class_capacity: np.ndarray | None = None) -> Walk:
    """Pieces realising the solved LP's amounts (see the module doc; Won et al., TACOS, 2023, Section V-A relaxed).

    Timesteps are walked in order. A send arriving at ``t`` over a pair of delay ``k`` may use
    the atoms its source held at the end of ``t-k``; it takes, of those the destination has
    not received, first the ones no later supplier of the destination (a source of a later
    send of the chunk to it) holds yet, then the ones held by the fewest nodes so far (ties:
    lowest atom index), never more than the LP amount nor than the pair's free capacity
    over timesteps ``t-k+1..t``
    (``capacity * D`` atoms each). Sends to nodes that neither need nor forward their atoms
    are trimmed afterwards. ``Walk.held`` says which (chunk, node) pairs ended whole.

    ``link_class`` (``[pair]``) and ``class_capacity`` (``[class]``) share the capacity over
    classes of pairs instead (the orbit model's rows: the sends over every pair of one class
    occupy at most one class capacity in any timestep).
    """
    data: TenData = ten_model(model).data
    cls, cap = _classes(data, link_class, class_capacity)
    rows, counts, D = amounts(model, max_denominator, max_atoms)
    w = Walk(data, D, horizon=data.horizon)
    cover = np.repeat(data.pre.sum(axis=1, dtype=np.int64)[:, None], D, axis=1)
    zeros = np.zeros(D, np.int64)
    used: dict[tuple[int, int], int] = {}
    # later suppliers of each (chunk, destination): the sources of its sends, by arrival order
    suppliers = _later_suppliers(data, rows)
    forwarded: dict[tuple[int, int], np.ndarray] = {}  # atoms a switch has sent on (no copy: once each)
    for i, ((c, l, t), a) in enumerate(zip(rows.tolist(), counts.tolist())):
        s, d = int(data.src[l]), int(data.dst[l])
        if data.pre[c, d]:
            continue
        src_arr = zeros if data.pre[c, s] else w.arrival.get((c, s))
        if src_arr is None:
            continue
        dst_arr = w.arrival.get((c, d))
        if dst_arr is None:
            dst_arr = w.arrival[(c, d)] = np.full(D, _NEVER, np.int64)
        g = int(data.group[c])
        k = int(data.lag[g, l])  # delay + latency (one less over an instant switch-to-NPU hop)
        ready = _ready(data, forwarded, src_arr, c, s, t - k)
        useful = np.flatnonzero(ready & (dst_arr == _NEVER))
        span, slot, free = _free_capacity(data, cls, cap, used, D, g, l, t)
        n = min(a, len(useful), free)
        if n <= 0:
            continue
        score = _preference(data, w, cover, suppliers[(c, d)], i, c, s, useful)
        pick = np.sort(useful[np.argsort(score, kind="stable")[:n]])
        if data.switch[s] and not data.switch_copy:
            forwarded[(c, s)][pick] = True
        dst_arr[pick] = t
        cover[c, pick] += 1
        for tau in span:
            used[(slot, tau)] = used.get((slot, tau), 0) + n
        _record(w, c, l, t, pick)
    _trim(w)
    w.held = _held(w)
    return w


def _later_suppliers(data: TenData, rows: np.ndarray) -> dict[tuple[int, int], list]:
    """The sources of every (chunk, destination)'s sends, as (row index, source), by arrival order."""
    suppliers: dict[tuple[int, int], list] = {}
    for i, (c, l, t) in enumerate(rows.tolist()):
        suppliers.setdefault((c, int(data.dst[l])), []).append((i, int(data.src[l])))
    return suppliers


def _ready(data: TenData, forwarded: dict, src_arr: np.ndarray, c: int, s: int,
           latest: int) -> np.ndarray:
    """Which atoms of chunk ``c`` source ``s`` may send when they must have arrived by ``latest``.

    A switch forwards what arrived the timestep before the send starts (an instant hop: in the
    timestep it starts), and without copying each atom once only.
    """
    if not data.switch[s]:
        return src_arr <= latest
    ready = src_arr == latest
    if not data.switch_copy:
        ready &= ~forwarded.setdefault((c, s), np.zeros(len(src_arr), bool))
    return ready


def _free_capacity(data: TenData, cls, cap, used: dict, D: int, g: int, l: int,
                   t: int) -> tuple[range, int, int]:
    """(timesteps a send over pair ``l`` arriving at ``t`` occupies, its class, atoms still free)."""
    first, last = data.occupied(g, l, t)
    span = range(int(first), int(last) + 1)
    slot = int(cls[l])
    free = int(cap[slot]) * D - max(used.get((slot, tau), 0) for tau in span)
    return span, slot, free


def _preference(data: TenData, w: Walk, cover: np.ndarray, suppliers: list, i: int, c: int,
                s: int, useful: np.ndarray) -> np.ndarray:
    """Sort keys over ``useful`` atoms: first those no later supplier of the destination holds
    yet, then the rarest ones (fewest holders so far)."""
    score = cover[c, useful].astype(np.int64)
    others = {u for j, u in suppliers if j > i and u != s}
    if not others:
        return score
    owned = np.zeros(len(useful), np.int64)
    for u in others:
        arr = np.zeros(w.denom, np.int64) if data.pre[c, u] else w.arrival.get((c, u))
        if arr is not None:
            owned += arr[useful] != _NEVER
    return owned * (data.pre.shape[1] + 1) + score


def _classes(data: TenData, link_class, class_capacity) -> tuple[np.ndarray, np.ndarray]:
    """(class of every link pair, capacity of every class): each pair its own class by default."""
    if link_class is None:
        return np.arange(len(data.src)), np.asarray(data.capacity)
    return np.asarray(link_class, np.int64), np.asarray(class_capacity, np.int64)


def _held(w: Walk) -> np.ndarray:
    held = w.data.pre.copy()
    for (c, n), arr in w.arrival.items():
        if (arr != _NEVER).all():
            held[c, n] = True
    return held


def _trim(w: Walk) -> None:
    """Drop atoms sent to a node that neither needs the chunk nor forwards those atoms
    (repeated to a fixed point; the atom-level version of :func:`collsynth.tens.ten.prune`)."""
    data = w.data
    while True:
        fwd: dict[tuple[int, int], np.ndarray] = {}
        for c, l, a in zip(w.chunk, w.pair, w.atoms):
            key = (c, int(data.src[l]))
            if key not in fwd:
                fwd[key] = np.zeros(w.denom, bool)
            fwd[key][a] = True
        changed = False
        keep = []
        for i, (c, l, a) in enumerate(zip(w.chunk, w.pair, w.atoms)):
            d = int(data.dst[l])
            if not data.post[c, d]:
                f = fwd.get((c, d))
                ok = np.zeros(len(a), bool) if f is None else f[a]
                if not ok.all():
                    changed = True
                    w.arrival[(c, d)][a[~ok]] = _NEVER
                    a = a[ok]
                    w.atoms[i] = a
            if len(a):
                keep.append(i)
        if len(keep) < len(w.chunk):
            for name in ("chunk", "pair", "step", "atoms"):
                col = getattr(w, name)
                setattr(w, name, [col[i] for i in keep])
        if not changed:
            return


def extend(w: Walk, rows: np.ndarray) -> Walk:
    """Add whole-chunk sends ``(chunk, pair, arrival)`` (e.g. shortest-path recovery after the
    horizon), each trimmed to the atoms its destination does not hold by then, so no atom
    arrives twice at a node (which a reversed, combining schedule would count twice)."""
    data = w.data
    rows = np.asarray(rows, np.int64).reshape(-1, 3)
    allatoms = np.arange(w.denom)
    for c, l, t in rows[np.argsort(rows[:, 2], kind="stable")].tolist():
        d = int(data.dst[l])
        if data.pre[c, d]:
            continue
        arr = w.arrival.get((c, d))
        if arr is None or data.switch[d]:  # a switch forwards the whole recovery chunk on at once
            arr = w.arrival[(c, d)] = np.full(w.denom, _NEVER, np.int64)
        pick = allatoms[arr == _NEVER]
        if not len(pick):
            continue
        arr[pick] = t
        _record(w, c, l, t, pick)
    w.held = _held(w)
    return w


def repair(w: Walk, *, chunks: np.ndarray | None = None, link_class: np.ndarray | None = None,
           class_capacity: np.ndarray | None = None) -> Walk:
    """Complete every pair the walk left short, using free link capacity from timestep 1 on.

    For each short (chunk, node) pair (in chunk, node order), the missing atoms ``M`` travel
    as one group along an earliest-arrival path of the TEN (:func:`_earliest_path`). Hops
    carry only the atoms their destination lacks, so no atom reaches a node twice. Unlike
    shortest-path recovery after the horizon this reuses capacity the LP left idle inside the
    horizon; without a path it leaves the pair short. ``chunks``: repair only these chunks
    (default: all); ``link_class`` / ``class_capacity``: capacity shared over classes of pairs,
    as in :func:`walk`.
    """
    data = w.data
    S = data.pre.shape[1]
    cls, cap = _classes(data, link_class, class_capacity)
    used: dict[tuple[int, int], int] = {}
    for c, l, t, a in zip(w.chunk, w.pair, w.step, w.atoms):
        _occupy(used, int(cls[l]), *data.occupied(int(data.group[c]), l, t), len(a))
    out_pairs = [np.flatnonzero(data.src == u).tolist() for u in range(S)]
    short = data.post & ~_held(w)
    if chunks is not None:
        keep = np.zeros(len(short), bool)
        keep[np.asarray(chunks, np.int64)] = True
        short &= keep[:, None]
    for c, n in zip(*np.nonzero(short)):
        c, n = int(c), int(n)
        arr_n = w.arrival.get((c, n))
        M = np.arange(w.denom) if arr_n is None else np.flatnonzero(arr_n == _NEVER)
        if not len(M):
            continue
        for l, a, v in _earliest_path(w, c, n, M, used, out_pairs, cls, cap):
            arr = w.arrival.get((c, v))
            if arr is None:
                arr = w.arrival[(c, v)] = np.full(w.denom, _NEVER, np.int64)
            pick = M[arr[M] == _NEVER]
            arr[pick] = a
            _occupy(used, int(cls[l]), *data.occupied(int(data.group[c]), l, a), len(pick))
            _record(w, c, l, a, pick)
    w.held = _held(w)
    return w


def _occupy(used: dict, slot: int, first, last, atoms: int) -> None:
    """Count ``atoms`` on capacity class ``slot`` in the timesteps ``first .. last`` a send
    occupies (:meth:`~collsynth.tens.ten.TenData.occupied`)."""
    for tau in range(int(first), int(last) + 1):
        used[(slot, tau)] = used.get((slot, tau), 0) + atoms


def _earliest_path(w: Walk, c: int, n: int, M: np.ndarray, used: dict, out_pairs: list, cls: np.ndarray,
                   cap: np.ndarray) -> list:
    """Hops ``(pair, arrival, node)`` bringing atoms ``M`` of chunk ``c`` to node ``n`` earliest.

    A time-dependent Dijkstra: a node is labelled with the timestep by which it holds all of
    ``M``; a hop over a pair of delay ``k`` starts at the first timestep after its source's
    label whose ``k`` timesteps have room (``used``) for the atoms its destination lacks, and
    arrives the pair's latency after them.
    Empty when no path exists.
    """
    data = w.data
    g = int(data.group[c])
    zeros = np.zeros(w.denom, np.int64)

    def have(v):
        return zeros if data.pre[c, v] else w.arrival.get((c, v))

    label = {}
    for v in range(data.pre.shape[1]):
        arr = have(v)
        if arr is not None and (arr[M] != _NEVER).all():
            label[v] = int(arr[M].max())
    heap = [(t, v) for v, t in label.items()]
    heapq.heapify(heap)
    prev: dict[int, tuple[int, int, int]] = {}
    done = set()
    while heap:
        tv, u = heapq.heappop(heap)
        if u in done or tv > label.get(u, _NEVER):
            continue
        done.add(u)
        if u == n:
            break
        for l in out_pairs[u]:
            v = int(data.dst[l])
            arr = have(v)
            lack = M if arr is None else M[arr[M] == _NEVER]
            if v in done or not len(lack):
                continue
            k, lat = int(data.delay[g, l]), int(data.latency[l])
            slot = int(cls[l])
            room = int(cap[slot]) * w.denom - len(lack)
            s = tv + 1
            while any(used.get((slot, tau), 0) > room for tau in range(s, s + k)):
                s += 1
            held_m = M if arr is None else M[arr[M] != _NEVER]
            lab = max(s + k - 1 + lat, int(arr[held_m].max()) if arr is not None and len(held_m) else 0)
            if lab < label.get(v, _NEVER):
                label[v] = lab
                prev[v] = (u, l, s + k - 1 + lat)
                heapq.heappush(heap, (lab, v))
    path = []
    v = n
    while v in prev:
        u, l, a = prev[v]
        path.append((l, a, v))
        v = u
    return path[::-1]


def _record(w: Walk, chunk: int, pair: int, step: int, atoms: np.ndarray) -> None:
    """Append one send of ``atoms`` of ``chunk`` over ``pair`` arriving at ``step`` to the walk."""
    w.chunk.append(chunk)
    w.pair.append(pair)
    w.step.append(step)
    w.atoms.append(atoms)


def runs(atoms: np.ndarray) -> list[tuple[int, int]]:
    """Contiguous runs ``[lo, hi)`` of sorted atom indices."""
    if not len(atoms):
        return []
    cut = np.flatnonzero(np.diff(atoms) != 1) + 1
    starts = np.concatenate([[0], cut])
    ends = np.concatenate([cut, [len(atoms)]])
    return [(int(atoms[a]), int(atoms[b - 1]) + 1) for a, b in zip(starts, ends)]


def to_schedule(w: Walk) -> Schedule:
    """The user's schedule of a walk: pieces ``[lo/D, hi/D)``; combining collectives reversed
    from the dual on the transpose (a send's occupancy ``[t-k+1, t]`` mirrors to
    ``[T+1-t, T+k-t]``, as :func:`ten.schedule_from_rows`), concurrent ones merged."""
    data = w.data
    c, l, t, lo, hi = [], [], [], [], []
    for ci, li, ti, a in zip(w.chunk, w.pair, w.step, w.atoms):
        for a0, a1 in runs(a):
            c.append(ci)
            l.append(li)
            t.append(ti)
            lo.append(a0)
            hi.append(a1)
    lo, hi = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
    g = np.gcd.reduce(np.concatenate([lo, hi, [w.denom]])) if len(lo) else w.denom
    rows = np.asarray([c, l, t], np.int64).T
    return ten.schedule_from_rows(data, rows, NAME, pieces=(lo // g, hi // g, w.denom // g))


def extract(model) -> Schedule:
    """The fractional schedule of a solved, complete LP: :func:`walk`, :func:`repair` of the
    pairs it leaves short, :func:`to_schedule` (it delivers everything whenever the topology
    connects every holder to every node that needs a chunk; with switch nodes the walk alone,
    see the module doc)."""
    w = walk(model)
    return to_schedule(w if w.data.has_switches else repair(w))


def schedules(model, recover) -> list[tuple[str, Schedule, int]]:
    """Schedules realising a solved, complete LP: ``(completion, schedule, pairs the walk left
    short)`` for its :func:`walk` completed by :func:`repair` (only when that reaches every
    pair) and completed by ``recover(data, held, horizon)``, rows ``(chunk, pair, arrival)``
    delivering whole chunks after the horizon (shortest-path recovery, Won et al., TACOS,
    2023, Section V-B), trimmed by :func:`extend`."""
    first = walk(model)
    data = first.data
    short = int((data.post & ~first.held).sum())
    out = []
    if not data.has_switches:
        repaired = repair(first)
        if not (data.post & ~repaired.held).any():
            out.append(("repair", to_schedule(repaired), short))
    w = walk(model)
    w = extend(w, recover(data, w.held, data.horizon))
    out.append(("recovery", to_schedule(w), short))
    return out


refine = polish  # the contract's name: re-aim a complete solved LP before a re-solve


__all__ = ["NAME", "build", "extract", "bound", "fractional", "integral", "complete", "lower_bound",
           "polish", "refine", "schedules", "Walk", "amounts", "walk", "repair", "extend", "runs", "to_schedule"]
