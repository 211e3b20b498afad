"""HiGHS fed a Pyomo model as one sparse matrix (the loading path of the ``highs`` backend).

Pyomo's HiGHS interface loads a model constraint by constraint: for each row it walks the
expression twice (variables, then the standard representation), registers the row in several
maps and may add columns one call at a time; on a TEN model that costs 100-150 us per row,
more than HiGHS needs to solve many of them. Here the model is compiled in one pass
(:func:`compile_linear`): every active constraint's body is read term by term when it is a
``LinearExpression`` (how the TEN formulations build their rows; operator-built sums of
variables are too), any other linear body through Pyomo's standard representation; fixed
variables are constants. The matrix goes to HiGHS with one ``passModel`` call, and the
solution values are written back into the Pyomo variables, so the model stays an ordinary
Pyomo model every other backend can solve too.

highspy is imported when a solve runs, never at import time: a process that imports this
package may be an OR-Tools child, and highspy and ortools cannot be loaded into one process.
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
import pyomo.core as pe
import scipy.sparse as sp
from pyomo.common.gc_manager import PauseGC
from pyomo.core.expr.numeric_expr import LinearExpression, MonomialTermExpression
from pyomo.repn.standard_repn import generate_standard_repn

from ...formulations import MatrixRows, recorded_rows
from ...limits import Deadline, cancel_at, shielded

NONLINEAR = "the HiGHS backend solves linear models only"
READBACK_SHARE = 0.5  # of the time compiling a model took, kept to read its incumbent back and use it
# (writing the values into the variables took 0.14 of compiling a 6x6 torus all-to-all TEN ILP of 48,240
# columns; both scale with the model and with the machine's load alike). What a driver does with the
# incumbent after that (sends, recovery) may still run past the deadline: the drivers keep the best
# schedule known when the limit stops them there.
OPTIONS_ATTRIBUTE = "highs_options"  # HiGHS options a formulation attached to a model (e.g. run_crossover)


@dataclass
class LinearModel:
    """A Pyomo model as arrays: ``columns[j]`` is the variable of column ``j``.

    Rows ``row_lower <= A x <= row_upper`` (``A`` in CSC form), columns
    ``col_lower <= x <= col_upper``, ``integer[j]`` for integer columns; the objective is
    ``cost @ x + offset``, maximised when ``maximize``.
    """

    columns: list
    col_lower: np.ndarray
    col_upper: np.ndarray
    integer: np.ndarray
    A: sp.csc_matrix
    row_lower: np.ndarray
    row_upper: np.ndarray
    cost: np.ndarray
    offset: float
    maximize: bool


class _Terms:
    """Collects (row, column, value) triples, creating columns for variables on first use."""

    def __init__(self):
        self.column: dict[int, int] = {}
        self.vars: list = []
        self.rows: list[int] = []
        self.cols: list[int] = []
        self.vals: list[float] = []

    def col(self, var) -> int:
        """The column of ``var``, made on its first use."""
        j = self.column.get(id(var))
        if j is None:
            j = self.column[id(var)] = len(self.vars)
            self.vars.append(var)
        return j

    def body(self, expr, row: int) -> float:
        """Add the linear terms of ``expr`` to ``row``; returns its constant part."""
        if expr.__class__ is LinearExpression:
            const = 0.0
            rows, cols, vals, col = self.rows, self.cols, self.vals, self.col
            for a in expr.args:
                cls = a.__class__
                if cls is MonomialTermExpression:
                    coef, v = a.args
                    coef = pe.value(coef)
                else:
                    coef, v = 1.0, a
                if v.__class__ in (int, float):
                    const += coef * v
                elif not v.is_variable_type():
                    const += coef * pe.value(v)
                elif v.fixed:
                    const += coef * v.value
                else:
                    rows.append(row)
                    cols.append(col(v))
                    vals.append(float(coef))
            return const
        if expr.__class__ in (int, float):
            return float(expr)
        repn = generate_standard_repn(expr, quadratic=False, compute_values=True)
        if repn.nonlinear_expr is not None:
            raise ValueError(NONLINEAR)
        for coef, v in zip(repn.linear_coefs, repn.linear_vars):
            self.rows.append(row)
            self.cols.append(self.col(v))
            self.vals.append(float(coef))
        return float(pe.value(repn.constant))


def _recorded(rec: MatrixRows, colmaps: dict, terms: _Terms):
    """A component's recorded rows as COO triples over the model's columns, with its lower and
    upper bounds; fixed variables' terms move into the bounds. ``colmaps`` remembers the
    column of every variable of a recorded column list (components share one; -1: fixed)."""
    indptr, cols, vals, lower, upper, columns = rec.indptr, rec.cols, rec.vals, rec.lower, rec.upper, rec.columns
    colmap = colmaps.get(id(columns))
    if colmap is None:
        get = terms.column.get  # every unfixed variable has its column already
        colmap = colmaps[id(columns)] = np.fromiter((get(id(v), -1) for v in columns), np.int64, len(columns))
    row = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    col = colmap[cols]
    fixed = col < 0
    if fixed.any():
        value = np.array([columns[j].value for j in cols[fixed].tolist()], float)
        const = np.bincount(row[fixed], weights=vals[fixed] * value, minlength=len(indptr) - 1)
        lower, upper = lower - const, upper - const
        row, col, vals = row[~fixed], col[~fixed], vals[~fixed]
    return (row, col, vals), lower, upper


def column_bounds(variables: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lower and upper bounds (infinite where none) and integrality of each variable.

    A model's variables share a few domains (``Binary``, ``UnitInterval``, ...): each domain's
    bounds and integrality are read once, and only a variable with bounds of its own (set by
    ``setlb``/``setub`` or ``bounds=``) is asked for its ``bounds``; on a TEN model this is
    several times faster than asking every variable.

    >>> m = pe.ConcreteModel(); m.x = pe.Var([0, 1], domain=pe.Binary); m.y = pe.Var(bounds=(-1, 2.5))
    >>> [a.tolist() for a in column_bounds([m.x[0], m.y, m.x[1]])]
    [[0.0, -1.0, 0.0], [1.0, 2.5, 1.0], [True, False, True]]
    """
    domains = [v.domain for v in variables]
    kinds: dict[int, tuple] = {}
    for d in domains:
        if id(d) not in kinds:
            lo, up = d.bounds()
            kinds[id(d)] = (-math.inf if lo is None else lo, math.inf if up is None else up, d.get_interval()[2] == 1)
    lower, upper, integer = (np.array(a) for a in zip(*(kinds[id(d)] for d in domains))) if domains else \
        (np.zeros(0), np.zeros(0), np.zeros(0, bool))
    own = [j for j, v in enumerate(variables) if v._lb is not None or v._ub is not None]  # Pyomo's own-bound slots
    for j in own:
        lo, up = variables[j].bounds
        lower[j], upper[j] = (-math.inf if lo is None else lo), (math.inf if up is None else up)
    return lower.astype(float), upper.astype(float), integer.astype(bool)


def compile_linear(model: pe.ConcreteModel) -> LinearModel:
    """The model's active linear constraints and objective as arrays (see :class:`LinearModel`).

    Columns are the model's unfixed variables: first every variable in declaration order
    (so a variable no row mentions still gets a value), then none twice.
    """
    terms = _Terms()
    terms.vars = [v for v in model.component_data_objects(pe.Var, active=True, descend_into=True) if not v.fixed]
    terms.column = dict(zip(map(id, terms.vars), range(len(terms.vars))))
    colmaps: dict[int, np.ndarray] = {}
    lower, upper = [], []
    blocks = []  # rows recorded as matrices: (first row, CSR over the model's columns, lower, upper)
    row = 0
    recorded = recorded_rows(model)
    for comp in model.component_objects(pe.Constraint, active=True, descend_into=True):
        rec = recorded.get(comp.local_name) if comp.parent_block() is model else None
        if rec is not None and rec.component is comp and len(comp) == len(rec.lower) and all(c.active for c in comp.values()):
            coo, lo, up = _recorded(rec, colmaps, terms)
            blocks.append((row, coo))
            lower.extend(lo.tolist())
            upper.extend(up.tolist())
            row += len(lo)
            continue
        for con in comp.values():
            if not con.active:
                continue
            lo, body, up = con.to_bounded_expression(evaluate_bounds=True)
            const = terms.body(body, row)
            lower.append(-math.inf if lo is None else float(lo) - const)
            upper.append(math.inf if up is None else float(up) - const)
            row += 1
    objectives = list(model.component_data_objects(pe.Objective, active=True, descend_into=True))
    if len(objectives) > 1:
        raise ValueError(f"the model has {len(objectives)} active objectives; expected at most one")
    obj_terms = _Terms()
    obj_terms.column, obj_terms.vars = terms.column, terms.vars
    offset, maximize = 0.0, False
    if objectives:
        offset = obj_terms.body(objectives[0].expr, 0)
        maximize = objectives[0].sense == pe.maximize
    n = len(terms.vars)
    cost = np.zeros(n)
    np.add.at(cost, np.asarray(obj_terms.cols, np.int64), np.asarray(obj_terms.vals, float))
    rr, cc, vv = [np.asarray(terms.rows, np.int64)], [np.asarray(terms.cols, np.int64)], [np.asarray(terms.vals, float)]
    for first, (r, c, v) in blocks:
        rr.append(r + first)
        cc.append(c)
        vv.append(v)
    A = sp.csc_matrix((np.concatenate(vv), (np.concatenate(rr), np.concatenate(cc))), shape=(row, n))
    A.sum_duplicates()
    col_lower, col_upper, integer = column_bounds(terms.vars)
    return LinearModel(terms.vars, col_lower, col_upper, integer, A, np.asarray(lower, float),
                       np.asarray(upper, float), cost, float(offset), maximize)


def _highs_lp(lm: LinearModel, highspy) -> Any:
    lp = highspy.HighsLp()
    lp.num_col_ = len(lm.columns)
    lp.num_row_ = lm.A.shape[0]
    lp.col_cost_ = lm.cost
    lp.col_lower_ = lm.col_lower
    lp.col_upper_ = lm.col_upper
    lp.row_lower_ = lm.row_lower
    lp.row_upper_ = lm.row_upper
    lp.offset_ = lm.offset
    lp.sense_ = highspy.ObjSense.kMaximize if lm.maximize else highspy.ObjSense.kMinimize
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = lm.A.indptr
    lp.a_matrix_.index_ = lm.A.indices
    lp.a_matrix_.value_ = lm.A.data
    if lm.integer.any():
        lp.integrality_ = [highspy.HighsVarType.kInteger if x else highspy.HighsVarType.kContinuous
                           for x in lm.integer.tolist()]
    return lp


@dataclass
class Run:
    """What one HiGHS run gave: the status name HiGHS reports, whether a primal solution
    exists, objective, dual bound, B&B nodes, load and run seconds (wall, and this process's
    CPU: figures that stay comparable on a loaded machine), start values passed."""

    model_status: str
    has_solution: bool
    objective: float | None
    bound: float | None
    nodes: int | None
    load_s: float
    run_s: float
    start_values: int
    version: str
    load_cpu_s: float
    run_cpu_s: float


def available() -> tuple[bool, str]:
    """Whether HiGHS can run here and its version (``highs 1.15.1``), as Pyomo's HiGHS interface
    says it (highspy importable), without loading Pyomo's solver plugins."""
    if importlib.util.find_spec("highspy") is None:
        return False, "highspy not installed"
    import highspy  # here, not at import time: see the module doc

    return True, f"highs {highspy.Highs().version()}"


VERBOSE_ENV = "COLLSYNTH_VERBOSE"  # set: the solver's log goes to stderr


def run(model: pe.ConcreteModel, request, start: list | None = None, options: dict | None = None) -> Run:
    """Compile ``model``, solve it with HiGHS as ``request`` (a :class:`~.request.Request`) asks
    and load the solution's values into it. HiGHS gets what is left of the request's deadline
    once the model is loaded, minus the time to read the solution back
    (:meth:`~.request.Request.solver_deadline`, and :data:`READBACK_SHARE` of the time the
    model took to compile: a large model takes long to read back), and is interrupted then
    if its own clock has not stopped it (:func:`interrupted_at`). With no time left it is
    not started at all, unless a MIP start is to be returned (then without presolve).
    ``start``: ``(variable, value)`` pairs given to HiGHS as a MIP start. ``options``, and
    before them the model's own ``highs_options`` (a formulation's hint, e.g. no crossover
    where only the objective value is read), are set as HiGHS options.
    """
    import highspy  # here, not at import time: see the module doc

    t0, c0 = time.perf_counter(), time.process_time()
    if not start and request.solver_deadline().expired():  # no time to solve: nothing compiled, nothing run
        return _not_run(highspy, t0, c0)
    with PauseGC():  # reading many expressions creates no cycles: the collector only slows it
        lm = compile_linear(model)
    mip = bool(lm.integer.any())
    h = _configured_highs(highspy, request, mip, {**vars(model).get(OPTIONS_ATTRIBUTE, {}), **(options or {})})
    h.passModel(_highs_lp(lm, highspy))
    passed = _pass_start(h, lm, start) if start and mip else 0
    # reading the incumbent back (and the caller's work on it) takes a share of what compiling took
    stop = request.solver_deadline().earlier(READBACK_SHARE * (time.perf_counter() - t0))
    if stop.expired() and not passed:  # compiling took what was left: HiGHS would spend seconds presolving
        return _not_run(highspy, t0, c0)
    if stop.expired():  # without time, HiGHS only checks the MIP start and returns it as its incumbent
        h.setOptionValue("presolve", "off")
    if stop.at is not None:
        h.setOptionValue("time_limit", stop.left())
    t1, c1 = time.perf_counter(), time.process_time()
    with shielded(), interrupted_at(h, stop):  # HiGHS stops by its limit or the interrupt; the
        h.run()  # model's compiling above stays interruptible
    run_s, run_cpu_s = time.perf_counter() - t1, time.process_time() - c1
    status = h.getModelStatus()
    info = h.getInfo()
    has = int(info.primal_solution_status) == 2 or status == highspy.HighsModelStatus.kOptimal
    if status == highspy.HighsModelStatus.kModelEmpty:
        has = True
    objective = float(info.objective_function_value) if has else None
    if status == highspy.HighsModelStatus.kModelEmpty:
        objective = lm.offset
    bound = None
    if mip:
        b = float(info.mip_dual_bound)
        bound = b if math.isfinite(b) else None
    elif status in (highspy.HighsModelStatus.kOptimal, highspy.HighsModelStatus.kModelEmpty):
        bound = objective
    if has and lm.columns:
        values = np.asarray(h.getSolution().col_value, float)
        for v, x in zip(lm.columns, values.tolist()):
            v.set_value(x, skip_validation=True)
    nodes = int(info.mip_node_count) if mip and info.mip_node_count >= 0 else None
    return Run(status.name, has, objective, bound, nodes, t1 - t0, run_s, passed, h.version(), c1 - c0, run_cpu_s)


INTERRUPTS = ("cbSimplexInterrupt", "cbIpmInterrupt", "cbMipInterrupt")  # the checks HiGHS makes while it runs


@contextlib.contextmanager
def interrupted_at(h, stop: Deadline) -> Iterator[None]:
    """Interrupt the HiGHS run of ``h`` (a ``highspy.Highs``) in the body once ``stop`` passes.

    HiGHS' own ``time_limit`` is not always kept on a large model (with a limit of 0 s, the
    TEN ILP of an 8x8 torus all-to-all still ran 2-3 s on a loaded machine); its simplex,
    interior point and branch-and-bound loops also poll interrupt callbacks. A timer
    (:func:`~collsynth.limits.cancel_at`) raises a flag at ``stop``; the callbacks subscribed
    here answer "interrupt" once it is up, and HiGHS returns with status ``kInterrupt`` and
    its incumbent. The callbacks are unsubscribed on exit (a persistent session's ``Highs``
    re-solves without them). HiGHS runs without the GIL, so the timer thread runs meanwhile.
    """
    if stop.at is None:
        yield
        return
    up = threading.Event()

    def check(event) -> None:
        if up.is_set():
            event.interrupt()

    hooks = [getattr(h, name) for name in INTERRUPTS]
    for hook in hooks:
        hook.subscribe(check)
    try:
        with cancel_at(stop, up.set):
            yield
    finally:
        for hook in hooks:
            hook.unsubscribe(check)


def _not_run(highspy, t0: float, c0: float) -> Run:
    """The :class:`Run` of a solve the deadline ended before HiGHS started: ``kTimeLimit``
    without a solution (HiGHS, even with a time limit of 0, presolves a large model first)."""
    return Run("kTimeLimit", False, None, None, None, time.perf_counter() - t0, 0.0, 0,
               highspy.Highs().version(), time.process_time() - c0, 0.0)


def _configured_highs(highspy, request, mip: bool, options: dict):
    """A HiGHS instance with the request's threads, seed and gap, its log on stderr only under
    ``collsynth solve --verbose``, the interior point method for LPs, then ``options``."""
    h = highspy.Highs()
    if os.environ.get(VERBOSE_ENV):  # collsynth solve --verbose: HiGHS' log on stderr (stdout is the result's)
        h.setOptionValue("log_to_console", False)
        h.setOptionValue("log_file", "/dev/stderr")
    else:
        h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", int(request.threads))
    h.setOptionValue("random_seed", int(request.seed))
    if request.gap is not None:
        h.setOptionValue("mip_rel_gap", float(request.gap))
    if not mip:  # the TEN LPs are highly degenerate: HiGHS' simplex stalls where its IPM does not
        h.setOptionValue("solver", "ipm")
    for key, val in options.items():
        h.setOptionValue(key, val)
    return h


def _pass_start(h, lm, start: list) -> int:
    """Give HiGHS the ``(variable, value)`` pairs of ``start`` that are columns of ``lm`` as a
    MIP start; returns how many."""
    index = {id(v): j for j, v in enumerate(lm.columns)}
    idx = [index[id(v)] for v, _ in start if id(v) in index]
    val = [x for v, x in start if id(v) in index]
    if idx:
        h.setSolution(len(idx), np.asarray(idx, np.int32), np.asarray(val, np.float64))
    return len(idx)
