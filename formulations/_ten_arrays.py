"""TEN models from arrays: index sets and constraint rows computed with numpy, Pyomo in bulk.

The TACOS ILP (Won et al., TACOS, 2023, Section V-A, Fig. 12) has binary ``hold[c, n, t]``
and ``sent[c, l, t]`` variables and three families of rows. Built row by row through Pyomo
rules (a Python closure per row looking up tuples in dictionaries) most of the time goes to
Python; here every index set is a numpy array, every row family a sparse matrix in CSR form
(:class:`Rows`), and the Pyomo components are created in one pass per family: each row body
is a ``LinearExpression`` made directly from its column list (no operator overloading), each
row a relational expression handed to ``Constraint`` in bulk. The model stays an ordinary
Pyomo model (any backend solves it); the HiGHS backend reads such bodies term by term.

Columns: ``sent`` first (``0..S-1``), then ``hold`` (``S..S+H-1``). Chunks are the rows of
``data.pre`` (local ids ``0..C-1``); ``chunk_ids`` maps them to the chunk ids the Pyomo
variables are indexed by (the global ids, for a model over a subset of the chunks).

:func:`count` predicts a model's size and build seconds from the timestep windows alone, so a
build that would not fit in the time left (or in memory) stops before expanding an index array
or creating a Pyomo object (:class:`BuildTooLarge`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyomo.core as pe
from pyomo.core.expr.numeric_expr import LinearExpression, MonomialTermExpression
from pyomo.core.expr.relational_expr import EqualityExpression, InequalityExpression

from ..instances.topology import ParallelArrays
from ..limits import checkpoint
from ..tens.ten import TenData, reach
from . import BuildTooLarge, MatrixRows, record_rows

# Build cost per item, measured on one core (benchmarks/bench_ten.py test_build_rates): Pyomo
# variables, rows and nonzeros; and memory per variable and per nonzero (bytes).
SECONDS_PER_VARIABLE = 3e-6
SECONDS_PER_ROW = 5e-6
SECONDS_PER_NONZERO = 1.5e-6
BYTES_PER_VARIABLE = 900
BYTES_PER_ROW = 700
BYTES_PER_NONZERO = 120


def ranges(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(owner, value)``: for every ``i``, the integers ``lo[i]..hi[i]`` (empty when
    ``hi < lo``), concatenated in order, each with the ``i`` it came from.

    >>> [x.tolist() for x in ranges(np.array([1, 5, 3]), np.array([2, 4, 3]))]
    [[0, 0, 2], [1, 2, 3]]
    """
    lo = np.asarray(lo, np.int64)
    cnt = np.maximum(np.asarray(hi, np.int64) - lo + 1, 0)
    owner = np.repeat(np.arange(len(lo)), cnt)
    first = np.cumsum(cnt) - cnt
    value = np.arange(int(cnt.sum()), dtype=np.int64) - np.repeat(first, cnt) + np.repeat(lo, cnt)
    return owner, value


@dataclass
class TenArrays:
    """Where a TEN model has variables, as arrays (the model's direction, local chunk ids).

    ``earliest``/``latest`` (``[chunk, node]``, :func:`collsynth.tens.ten.reach`): the first
    timestep a node can hold a chunk and the last at which an arrival there is still useful;
    ``useful``: pairs not held at the start that can be reached in time and still matter.
    ``hold_c, hold_n, hold_t``: the ``hold`` variables (pairs of ``useful`` from their earliest
    timestep to the horizon); ``sent_c, sent_l, sent_t``: the ``sent`` variables (arrival
    timesteps at which the source can hold the chunk ``delay`` timesteps before and the
    destination is useful). ``hold_base[c, n] + t`` is the hold column of ``(c, n, t)`` when
    ``t >= hold_lo[c, n]`` (``hold_lo`` is ``horizon + 1`` where there is none).
    """

    horizon: int
    chunk_ids: np.ndarray
    earliest: np.ndarray
    latest: np.ndarray
    useful: np.ndarray
    hold_c: np.ndarray
    hold_n: np.ndarray
    hold_t: np.ndarray
    hold_lo: np.ndarray
    hold_base: np.ndarray
    sent_c: np.ndarray
    sent_l: np.ndarray
    sent_t: np.ndarray

    @property
    def num_sent(self) -> int:
        """The ``sent`` variables of the model."""
        return len(self.sent_c)

    @property
    def num_hold(self) -> int:
        """The ``hold`` variables of the model."""
        return len(self.hold_c)

    def hold_column(self, c, n, t) -> np.ndarray:
        """Column of ``hold[c, n, t]`` (arrays), ``-1`` where the model has no such variable."""
        c, n, t = (np.asarray(x, np.int64) for x in (c, n, t))
        ok = (t >= self.hold_lo[c, n]) & (t <= self.horizon)
        return np.where(ok, self.num_sent + self.hold_base[c, n] + t, -1)


@dataclass
class _Windows:
    """The timestep window of every hold pair and every (chunk, pair) send, before expansion."""

    earliest: np.ndarray
    latest: np.ndarray
    useful: np.ndarray
    hold_c: np.ndarray
    hold_n: np.ndarray
    hold_lo: np.ndarray
    sent_c: np.ndarray
    sent_l: np.ndarray
    sent_lo: np.ndarray
    sent_hi: np.ndarray


def _windows(data: TenData, lookahead: int) -> _Windows:
    T = int(data.horizon)
    if lookahead:
        data.horizon = T + int(lookahead)
        try:
            earliest, latest = reach(data)
        finally:
            data.horizon = T
        latest = np.minimum(latest, T)
    else:
        earliest, latest = reach(data)
    pre = data.pre
    useful = (~pre) & (earliest <= T) & (latest >= earliest)
    pc, pn = np.nonzero(useful & ~data.switch[None, :])  # a switch node holds nothing
    # sends: chunk c over pair l arriving at t, t - k >= earliest[c, src], t <= latest[c, dst]
    src, dst = data.src, data.dst
    ok = (~pre[:, dst]) & useful[:, dst] & (pre[:, src] | useful[:, src])
    sc, sl = np.nonzero(ok)
    k = data.lag[data.group[sc], sl]  # the delay; one less over an instant switch-to-NPU hop
    slo = np.maximum(np.maximum(earliest[sc, src[sl]] + k, earliest[sc, dst[sl]]), 1)
    shi = np.minimum(T, latest[sc, dst[sl]])
    return _Windows(earliest, latest, useful, pc, pn, np.maximum(1, earliest[pc, pn]), sc, sl, slo, shi)


def count(data: TenData, lookahead: int = 0, capacity: bool = True, windows: _Windows | None = None) -> "Size":
    """The size of the TACOS ILP over ``data`` (variables, rows, nonzeros) from the timestep
    windows alone, before any index array is expanded: one row per send whose source does not
    hold the chunk at the start, one per hold variable, at most one capacity row per (pair,
    timestep)."""
    w = _windows(data, lookahead) if windows is None else windows
    T = int(data.horizon)
    H = int(np.maximum(T - w.hold_lo + 1, 0).sum())
    n = np.maximum(w.sent_hi - w.sent_lo + 1, 0)
    S = int(n.sum())
    occupancy = int((n * data.delay[data.group[w.sent_c], w.sent_l]).sum())
    rows = S + H + (min(occupancy, len(data.src) * T) if capacity else 0)
    nnz = 3 * S + 2 * H + (occupancy if capacity else 0)
    return Size(S + H, rows, nnz)


def ten_arrays(data: TenData, lookahead: int = 0, chunk_ids=None, *, build_limit: float | None = None,
               capacity: bool = True, what: str = "the TEN model") -> TenArrays:
    """The variables of the TACOS ILP over ``data`` (see :class:`TenArrays`).

    A chunk cannot reach a node before its delay-weighted distance from the nearest holder,
    and a send into a node is useless later than the horizon minus the distance from there to
    the nearest node still needing it; with ``lookahead`` the usefulness reaches that many
    timesteps past the horizon (relays for time clustering). Sends into nodes that hold the
    chunk at the start are never created. The size is counted from the timestep windows
    first (:func:`count`) and checked against ``build_limit`` and the memory available
    (:func:`check_size`, naming ``what``) before any index array is expanded.
    """
    T = int(data.horizon)
    w = _windows(data, lookahead)
    check_size(count(data, lookahead, capacity, w), build_limit, what)
    C, S = data.pre.shape
    owner, ht = ranges(w.hold_lo, np.full(len(w.hold_lo), T))
    hold_lo = np.full((C, S), T + 1, np.int64)
    hold_lo[w.hold_c, w.hold_n] = w.hold_lo
    first = np.cumsum(T - w.hold_lo + 1) - (T - w.hold_lo + 1)
    hold_base = np.zeros((C, S), np.int64)
    hold_base[w.hold_c, w.hold_n] = first - w.hold_lo
    sowner, st = ranges(w.sent_lo, w.sent_hi)
    ids = np.arange(C, dtype=np.int64) if chunk_ids is None else np.asarray(chunk_ids, np.int64)
    return TenArrays(T, ids, w.earliest, w.latest, w.useful, w.hold_c[owner], w.hold_n[owner], ht, hold_lo,
                     hold_base, w.sent_c[sowner], w.sent_l[sowner], st)


# ---- rows as sparse matrices ------------------------------------------------------------------

@dataclass
class Rows(ParallelArrays):
    """A family of rows ``lower <= sum_j vals[j] x[cols[j]] <= upper`` in CSR form; ``keys``:
    the index of each row in its Pyomo component (tuples or integers)."""

    keys: list
    indptr: np.ndarray
    cols: np.ndarray
    vals: np.ndarray
    lower: np.ndarray
    upper: np.ndarray


def csr_rows(keys, row, col, val, lower, upper) -> Rows:
    """:class:`Rows` from triples ``(row, col, val)`` (any order; rows ``0..len(keys)-1``)."""
    row = np.asarray(row, np.int64)
    order = np.lexsort((np.asarray(col), row))
    counts = np.bincount(row, minlength=len(keys))
    indptr = np.zeros(len(keys) + 1, np.int64)
    np.cumsum(counts, out=indptr[1:])
    return Rows(list(keys), indptr, np.asarray(col, np.int64)[order], np.asarray(val, float)[order],
                np.broadcast_to(np.asarray(lower, float), (len(keys),)).copy(),
                np.broadcast_to(np.asarray(upper, float), (len(keys),)).copy())


def _keys(*cols) -> list:
    return list(zip(*(c.tolist() for c in cols)))


def flow_rows(data: TenData, ix: TenArrays) -> tuple[Rows, Rows]:
    """``(send needs hold, hold update)`` rows of the ILP of Won et al., TACOS, 2023, Section V-A, Fig. 12(c).

    A send arriving at ``t`` over a pair of lag ``k`` (its delay plus its latency, ``data.lag``)
    needs the chunk at its source at the end of ``t - k``: ``sent - hold <= 0`` (no row when the
    source holds it from the start; ``sent <= 0`` when it cannot). ``hold[c, n, t] - hold[c, n,
    t-1] - (arrivals of c at n in t) = 0``: holdings persist and a chunk arrives at a node at
    most once (an equality here; the paper only asks that the destination hold the chunk after).
    """
    S = ix.num_sent
    c, l, t = ix.sent_c, ix.sent_l, ix.sent_t
    k = data.lag[data.group[c], l]
    src = data.src[l]
    need = ~data.pre[c, src] & ~data.switch[src]  # out of a switch: switch_rows
    j = np.flatnonzero(need)
    h = ix.hold_column(c[j], src[j], t[j] - k[j])
    has = h >= 0
    r = np.arange(len(j))
    rows1 = csr_rows(_keys(ix.chunk_ids[c[j]], l[j], t[j]),
                     np.concatenate([r, r[has]]), np.concatenate([j, h[has]]),
                     np.concatenate([np.ones(len(j)), -np.ones(int(has.sum()))]), -np.inf, 0.0)
    H = ix.num_hold
    hr = np.arange(H)
    prev = ix.hold_column(ix.hold_c, ix.hold_n, ix.hold_t - 1)
    hp = prev >= 0
    into = np.flatnonzero(~data.switch[data.dst[l]])  # a send into a switch holds nothing there
    target = ix.hold_column(c[into], data.dst[l[into]], t[into]) - S
    if (target < 0).any():
        raise AssertionError("a send arrives where the model has no holding")  # ten_arrays guarantees it
    rows2 = csr_rows(_keys(ix.chunk_ids[ix.hold_c], ix.hold_n, ix.hold_t),
                     np.concatenate([hr, hr[hp], target]),
                     np.concatenate([S + hr, prev[hp], into]),
                     np.concatenate([np.ones(H), -np.ones(int(hp.sum())), -np.ones(len(into))]), 0.0, 0.0)
    return rows1, rows2


def switch_rows(data: TenData, ix: TenArrays) -> tuple[str, Rows]:
    """The rows of switch nodes (TE-CCL, Liu et al., SIGCOMM 2024, Section 4: a switch stores
    nothing) and their component name. A send out of switch ``s`` over a pair of delay ``k``
    arriving at ``t`` uses what arrived at ``s`` at the end of ``t - k`` (``t - k + 1`` to an NPU
    when the switch hop is instant, TE-CCL's ``switch_to_gpu_link_on = False``; ``data.lag``): with
    ``data.switch_copy`` each such send is at most those arrivals (``ineq_switch_forward``,
    keys ``(chunk, pair, arrival)``), without copy all of them together are
    (``ineq_switch_conservation``, keys ``(chunk, switch, arrival timestep)``)."""
    c, l, t = ix.sent_c, ix.sent_l, ix.sent_t
    src, dst = data.src[l], data.dst[l]
    k = data.lag[data.group[c], l]
    S, T2 = data.pre.shape[1], ix.horizon + 2
    inn = np.flatnonzero(data.switch[dst])
    out = np.flatnonzero(data.switch[src])
    akey = (c[inn] * S + dst[inn]) * T2 + t[inn]
    order = np.argsort(akey, kind="stable")
    akey, inn = akey[order], inn[order]
    okey = (c[out] * S + src[out]) * T2 + (t[out] - k[out])
    if data.switch_copy:
        a_owner, a_pos = ranges(np.searchsorted(akey, okey), np.searchsorted(akey, okey, side="right") - 1)
        r = np.arange(len(out))
        return "ineq_switch_forward", csr_rows(
            _keys(ix.chunk_ids[c[out]], l[out], t[out]), np.concatenate([r, a_owner]),
            np.concatenate([out, inn[a_pos]]), np.concatenate([np.ones(len(out)), -np.ones(len(a_pos))]), -np.inf, 0.0)
    uk, row = np.unique(okey, return_inverse=True)
    a_owner, a_pos = ranges(np.searchsorted(akey, uk), np.searchsorted(akey, uk, side="right") - 1)
    cs, tau = uk // T2, uk % T2
    keys = _keys(ix.chunk_ids[cs // S], cs % S, tau)
    return "ineq_switch_conservation", csr_rows(
        keys, np.concatenate([row.ravel(), a_owner]), np.concatenate([out, inn[a_pos]]),
        np.concatenate([np.ones(len(out)), -np.ones(len(a_pos))]), -np.inf, 0.0)


def capacity_rows(data: TenData, ix: TenArrays, link_class=None, class_capacity=None) -> Rows:
    """At most ``capacity`` chunks on a link pair in any timestep (Won et al., TACOS, 2023, Section V-A, Fig. 12(d)).

    A send over a pair of delay ``k`` and latency ``L`` arriving at ``t`` occupies it in
    timesteps ``t-L-k+1 .. t-L`` (:meth:`~collsynth.tens.ten.TenData.occupied`). Rows only where
    more sends than the capacity could overlap; keys ``(pair, timestep)``.

    ``link_class`` (``[pair]``) and ``class_capacity`` (``[class]``) sum the sends over classes
    of pairs instead (one row per class and timestep; keys ``(class, timestep)``).
    """
    c, l, t = ix.sent_c, ix.sent_l, ix.sent_t
    owner, tau = ranges(*data.occupied(data.group[c], l, t))
    cls = l if link_class is None else np.asarray(link_class, np.int64)[l]
    cap = data.capacity if class_capacity is None else np.asarray(class_capacity, np.int64)
    key = cls[owner] * (ix.horizon + 1) + tau
    uniq, inv, count = np.unique(key, return_inverse=True, return_counts=True)
    busy = count > cap[uniq // (ix.horizon + 1)]
    row_of = np.cumsum(busy) - 1
    sel = busy[inv]
    keys = uniq[busy]
    return csr_rows(_keys(keys // (ix.horizon + 1), keys % (ix.horizon + 1)), row_of[inv[sel]], owner[sel],
                    np.ones(int(sel.sum())), -np.inf, cap[keys // (ix.horizon + 1)].astype(float))


# ---- size estimate --------------------------------------------------------------------------

@dataclass
class Size:
    """Variables, rows and nonzeros of a model, and the predicted build seconds and bytes."""

    variables: int
    rows: int
    nonzeros: int

    @property
    def seconds(self) -> float:
        """Predicted seconds to build the model (a linear fit per variable, row and nonzero)."""
        return (self.variables * SECONDS_PER_VARIABLE + self.rows * SECONDS_PER_ROW
                + self.nonzeros * SECONDS_PER_NONZERO)

    @property
    def bytes(self) -> int:
        """Predicted bytes the built model takes (a linear fit per variable, row and nonzero)."""
        return self.variables * BYTES_PER_VARIABLE + self.rows * BYTES_PER_ROW + self.nonzeros * BYTES_PER_NONZERO


def available_bytes() -> int | None:
    """Memory available to this process (bytes) from ``/proc/meminfo``, if readable."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def check_size(size: Size, time_limit: float | None, what: str) -> None:
    """Raise :class:`BuildTooLarge` when building ``size`` would take longer than
    ``time_limit`` seconds or need more memory than is available (never for a small model)."""
    if time_limit is not None and size.seconds > float(time_limit):
        raise BuildTooLarge(
            f"{what}: {size.variables} variables, {size.rows} rows and {size.nonzeros} nonzeros would take "
            f"about {size.seconds:.2g} s to build, more than the {float(time_limit):.2g} s left")
    free = available_bytes() if size.bytes > 2**28 else None  # only a big model needs the check
    if free is not None and size.bytes > 0.8 * free:
        raise BuildTooLarge(
            f"{what}: {size.variables} variables, {size.rows} rows and {size.nonzeros} nonzeros need about "
            f"{size.bytes / 2**30:.1f} GiB, more than the {free / 2**30:.1f} GiB available")


# ---- Pyomo components in bulk ---------------------------------------------------------------

def add_variables(m: pe.ConcreteModel, ix: TenArrays, relax: bool) -> list:
    """``m.SENT``/``m.HOLD`` index sets and ``m.sent``/``m.hold`` variables (binary, or in
    [0, 1] when ``relax``); returns the variables in column order."""
    domain = pe.UnitInterval if relax else pe.Binary
    dom_name = "in [0, 1]" if relax else "binary"
    ids = ix.chunk_ids
    checkpoint("model build", "index arrays expanded; before the variables")
    # SETS
    m.SENT = pe.Set(initialize=_keys(ids[ix.sent_c], ix.sent_l, ix.sent_t), dimen=3, ordered=True,
                    doc="(chunk, link pair, arrival timestep)")
    m.HOLD = pe.Set(initialize=_keys(ids[ix.hold_c], ix.hold_n, ix.hold_t), dimen=3, ordered=True,
                    doc="(chunk, node, timestep) that may change")
    checkpoint("model build", "index sets built; before the variables")
    # VARIABLES
    m.hold = pe.Var(m.HOLD, domain=domain, doc=f"node holds chunk at the end of timestep ({dom_name})")
    m.sent = pe.Var(m.SENT, domain=domain,
                    doc=f"chunk crosses link pair, arriving at the end of timestep ({dom_name})")
    return list(m.sent.values()) + list(m.hold.values())


def flow_model(name: str, data: TenData, local: TenData, ix: TenArrays, relax: bool) -> tuple[pe.ConcreteModel, list]:
    """A model named ``name`` with the TEN's horizon and timestep, the send/hold columns of
    ``ix`` and the rows every TEN formulation shares (Won et al., TACOS, 2023, Section V-A):
    a send needs the chunk held when it starts, a holding persists or comes from one arrival
    (``local``: the TEN the rows are written over, ``data`` itself unless one orbit's)."""
    m = pe.ConcreteModel(name=name)
    m.horizon = pe.Param(initialize=data.horizon, doc="number of TEN timesteps")
    m.timestep_s = pe.Param(initialize=data.timestep, doc="seconds per TEN timestep")
    columns = add_variables(m, ix, relax)
    needs_hold, update = flow_rows(local, ix)
    add_rows(m, "ineq_send_needs_hold", needs_hold, columns,
             "a chunk leaves a node only if the node held it when the send started (end of t-k)")
    add_rows(m, "eq_hold_update", update, columns,
             "a node holds a chunk at t iff it held it at t-1 or it arrives at t (at most one arrival, holdings persist)")
    return m, columns


def linear_bodies(rows: Rows, columns: list, terms: dict | None = None) -> list:
    """One ``LinearExpression`` per row of ``rows`` over the variables ``columns``. A term
    ``a * x_j`` with ``a != 1`` is one ``MonomialTermExpression`` shared by every row that has
    it (``terms`` keeps them across calls over the same ``columns``; expressions are immutable,
    so sharing is safe). The terms of all rows are gathered from object arrays indexed by the
    column arrays (one numpy gather per coefficient value, no Python loop over the nonzeros).

    >>> x = pe.ConcreteModel(); x.v = pe.Var([0, 1, 2])
    >>> r = csr_rows([0, 1], [0, 0, 1, 1], [0, 2, 1, 2], [1.0, -1.0, 2.0, -1.0], -np.inf, 0.0)
    >>> [str(b) for b in linear_bodies(r, list(x.v.values()))]
    ['v[0] - v[2]', '2.0*v[1] - v[2]']
    """
    terms = {} if terms is None else terms
    n = len(columns)
    key = id(columns)
    if terms.get(key, (None,))[0] is not columns:  # the entry keeps the list alive, so its id stays its own
        variables = np.empty(n, object)
        variables[:] = columns
        terms[key] = (columns, variables, {})
    _, variables, monomials = terms[key]
    cols, vals = rows.cols, rows.vals
    args = variables[cols]
    other = vals != 1.0
    for v in np.unique(vals[other]).tolist():
        if v not in monomials:
            monomials[v] = (np.empty(n, object), np.zeros(n, bool))  # terms, and which exist
        mono, made = monomials[v]
        at = vals == v
        j = cols[at]
        missing = np.unique(j[~made[j]])
        mono[missing] = [MonomialTermExpression((v, columns[i])) for i in missing.tolist()]
        made[missing] = True
        args[at] = mono[j]
    args = args.tolist()
    ptr = rows.indptr.tolist()
    return [LinearExpression(args[a:b]) for a, b in zip(ptr[:-1], ptr[1:])]




def add_rows(m: pe.ConcreteModel, name: str, rows: Rows, columns: list, doc: str) -> pe.Constraint:
    """``m.<name>``: one constraint per row of ``rows`` (indexed by ``rows.keys``), created in
    bulk. The rows are also recorded on the model (:class:`~collsynth.formulations.MatrixRows`)
    so that a backend may load them as a matrix instead of reading every body back; rows added
    this way are never modified afterwards (a caller replaces the component)."""
    checkpoint("model build", f"before the {name} rows")  # between blocks, not only when the timer lands
    terms = vars(m).setdefault("_shared_terms", {})
    bodies = linear_bodies(rows, columns, terms)
    lower, upper = rows.lower, rows.upper
    if (lower == upper).all():
        rels = [EqualityExpression((b, u)) for b, u in zip(bodies, upper.tolist())]
    elif np.isneginf(lower).all():
        rels = [InequalityExpression((b, u), False) for b, u in zip(bodies, upper.tolist())]
    else:
        rels = [EqualityExpression((b, lo)) if lo == up else InequalityExpression((b, up), False) if lo == -np.inf
                else InequalityExpression((lo, b), False) if up == np.inf else (lo, b, up)
                for b, lo, up in zip(bodies, lower.tolist(), upper.tolist())]
    table = dict(zip(rows.keys, rels))
    con = pe.Constraint(rows.keys, rule=lambda m, *key: table[key if len(key) > 1 else key[0]], doc=doc)
    setattr(m, name, con)
    record_rows(m, MatrixRows(con, rows.indptr, rows.cols, rows.vals, rows.lower, rows.upper, columns))
    return con


# ---- objectives -------------------------------------------------------------------------------

def needed_pairs(data: TenData) -> tuple[np.ndarray, np.ndarray]:
    """Local ``(chunk, node)`` postcondition pairs not held at the start (what must arrive)."""
    return np.nonzero(data.post & ~data.pre)


def _expression(cols: np.ndarray, coefs: np.ndarray, columns: list, constant: float = 0.0):
    Mono = MonomialTermExpression
    args = [columns[j] if a == 1.0 else Mono((a, columns[j])) for j, a in zip(cols.tolist(), coefs.tolist())]
    if constant:
        args.append(float(constant))
    return LinearExpression(args)


def add_arrivals_objective(m: pe.ConcreteModel, data: TenData, ix: TenArrays, columns: list, weights,
                           lookahead: int = 0) -> None:
    """``m.arrivals``: maximise the (weighted) postcondition pairs held at the horizon (Won et al.,
    TACOS, 2023, Section V-A, Fig. 12(b), whose formula also sums over earlier timesteps); with
    ``lookahead``, relays (useful pairs outside the postcondition) held at the horizon earn 1
    each and every arrival earns more than all of them together."""
    T = ix.horizon
    pc, pn = needed_pairs(data)
    col = ix.hold_column(pc, pn, np.full(len(pc), T))
    w = np.asarray(weights, float)[data.group[pc]]
    cols, coefs = col[col >= 0], w[col >= 0]
    if lookahead:
        rc, rn = np.nonzero(ix.useful & ~data.post)
        rcol = ix.hold_column(rc, rn, np.full(len(rc), T))
        rcol = rcol[rcol >= 0]
        cols = np.concatenate([cols, rcol])
        coefs = np.concatenate([coefs * float(len(rcol) + 1), np.ones(len(rcol))])
    # OBJECTIVE
    m.arrivals = pe.Objective(expr=_expression(cols, coefs, columns), sense=pe.maximize,
                              doc="postcondition pairs (chunk, node) held at the horizon (weighted per collective)")


def add_makespan_objective(m: pe.ConcreteModel, data: TenData, ix: TenArrays, columns: list, relax: bool) -> None:
    """Every postcondition pair arrives by the horizon; ``done[t]`` indicators minimise the
    first timestep by which all have arrived (``P done[t] <= pairs held at t``)."""
    T = ix.horizon
    pc, pn = needed_pairs(data)
    P = len(pc)
    at_T = ix.hold_column(pc, pn, np.full(P, T))
    m.done = pe.Var(pe.RangeSet(1, T), domain=pe.UnitInterval if relax else pe.Binary,
                    doc="every postcondition pair has arrived by timestep t")
    done = [m.done[t] for t in range(1, T + 1)]
    have = at_T >= 0
    # CONSTRAINTS
    keys = _keys(ix.chunk_ids[pc[have]], pn[have])
    rows = csr_rows(keys, np.arange(len(keys)), at_T[have], np.ones(len(keys)), 1.0, 1.0)
    add_rows(m, "eq_all_arrive", rows, columns, "every postcondition pair arrives by the horizon")
    m.eq_done_at_horizon = pe.Constraint(expr=done[T - 1] == 1, doc="the collective is done at the horizon")
    if not have.all():  # some pair cannot arrive in time: state the infeasibility explicitly
        m.unreachable = pe.Var(bounds=(0, 0), doc="pairs that cannot arrive by the horizon")
        m.ineq_unreachable = pe.Constraint(expr=m.unreachable >= 1, doc=f"{int((~have).sum())} pairs cannot arrive in time")
    if P:
        tt = np.repeat(np.arange(1, T + 1), P)
        col = ix.hold_column(np.tile(pc, T), np.tile(pn, T), tt)
        ok = col >= 0
        bodies = [LinearExpression([MonomialTermExpression((float(P), d))]) for d in done]
        held = csr_rows(list(range(1, T + 1)), tt[ok] - 1, col[ok], -np.ones(int(ok.sum())), -np.inf, 0.0)
        sums = linear_bodies(held, columns)
        m.ineq_done = pe.Constraint(
            list(range(1, T + 1)), rule=lambda m, t: LinearExpression(list(bodies[t - 1].args) + list(sums[t - 1].args)) <= 0,
            doc="done at t only if all pairs are held at t")
    m.ineq_done_monotone = pe.Constraint(list(range(1, T)), rule=lambda m, t: done[t - 1] <= done[t],
                                         doc="done stays done")
    # OBJECTIVE
    m.makespan = pe.Objective(expr=T + 1 - sum(done), sense=pe.minimize,
                              doc="the first timestep by which every pair has arrived")


__all__ = ["ranges", "TenArrays", "ten_arrays", "Rows", "csr_rows", "flow_rows", "switch_rows", "capacity_rows", "Size",
           "count", "check_size", "add_variables", "linear_bodies", "add_rows", "needed_pairs",
           "add_arrivals_objective", "add_makespan_objective"]
