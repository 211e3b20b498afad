"""The Python API: what a notebook needs, re-exported as ``collsynth.<name>``.

Instances come from a TOML file (:func:`load_instance`, the format of ``docs/instances.md``)
or from code (:func:`make_instance`). :func:`solve` runs one producer through the one path
every schedule takes (produce, verify, price; :mod:`collsynth.solvers.pipeline`) and returns a
:class:`Result`; :func:`compare` runs several and returns a :class:`pandas.DataFrame` with one
row per producer; :func:`bench` runs a batch into a results store and :func:`open_store` reads
one back. :func:`verify`, :func:`price` and :func:`export` work on any schedule, and refuse
(price, export) one that does not verify. The row fields are the result columns of
``docs/results.md``; producers are listed by ``collsynth producers``.

>>> import collsynth as cs
>>> inst = cs.make_instance({"generator": "ring", "nodes": 8}, "allgather", message_bytes=8 << 20)
>>> r = cs.solve(inst, "ring")
>>> r.status, r.verified, r.row["steps"], r.bounds["lower_bound_steps"]
('constructed', True, 7, 4)
>>> df = cs.compare(inst, ["ring", "recursive-doubling"])
>>> df[["producer", "steps"]].to_dict("records")
[{'producer': 'ring', 'steps': 7}, {'producer': 'recursive-doubling', 'steps': 3}]
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from . import InputError
from .outputs import replaced_file
from .instances import Instance, files, instance as instance_file, size
from .instances import load_instance, make_instance as instance_of_topology
from .instances.topology import Topology
from .results import store as result_store
from .tens import schema
from .solvers import compare as comparison
from .solvers import batch as runner
from .solvers.pipeline import run
from .limits import DEFAULT_TIME_LIMIT_S
from .solvers.producers import Options, get
from .tens import cost, cost_models, readback, schedule as schedules, verify as verification

__all__ = ["load_instance", "make_instance", "solve", "compare", "bench", "open_store", "verify", "price",
           "export", "Result", "Store", "Verification"]

EXPORT_FORMATS = ("msccl-xml", "mscclpp-json", "json")


def make_instance(
    topology: Topology | dict | str | Path,
    kind: str,
    *,
    name: str = "",
    chunks_per_node: int = 1,
    message_bytes: float = 1 << 20,
    root: int | None = None,
    nodes: Sequence[int] | None = None,
    expect: dict | None = None,
) -> Instance:
    """An instance of one collective ``kind`` on ``topology``, checked as a TOML file is.

    ``topology`` is a :class:`~collsynth.instances.topology.Topology`, a ``[topology]`` table
    as a dict (the keys of ``docs/instances.md``: a generator and its parameters, or a file,
    with ``bandwidth``, ``alpha``, ``failed_nodes``, ...), a generator name without
    parameters, or a topology file (``.json``, ``.graphml``, ``.csv``). The other arguments are
    the ``[collective]`` keys (``nodes``: the participants, default every live NPU).

    >>> inst = make_instance({"generator": "torus", "dims": [4, 4], "failed_nodes": [5]}, "broadcast", root=0)
    >>> inst.name, len(inst.collective.nodes)
    ('torus4x4-broadcast', 15)
    >>> make_instance({"generator": "mesh", "dims": [2, 2], "bandwith": 1e9}, "allgather")
    Traceback (most recent call last):
    ...
    collsynth.InputError: topology.bandwith: unknown parameter for generator 'mesh' (did you mean 'bandwidth'?) (parameters: dims)
    """
    if isinstance(topology, (str, Path)):
        is_file = Path(topology).suffix.lower() in files.FORMATS
        topology = {"file": str(topology)} if is_file else {"generator": str(topology)}
    if isinstance(topology, dict):
        topology = instance_file.topology_from_dict(topology)
    if not isinstance(topology, Topology):
        raise InputError("topology", f"expected a Topology, a [topology] table, a generator name or a file, "
                                     f"got {type(topology).__name__}")
    made = instance_of_topology(topology, kind, name=name, chunks_per_node=chunks_per_node,
                                message_bytes=message_bytes, root=root, nodes=nodes, expect=expect)
    size.check_chunk_bytes(made.collective, "collective")  # sub-byte chunks refused, as in a file
    return made


def _instance(instance: Instance | str | Path) -> Instance:
    return instance if isinstance(instance, Instance) else load_instance(instance)


def _schedule(schedule: schedules.Schedule | str | Path) -> schedules.Schedule:
    return schedule if isinstance(schedule, schedules.Schedule) else schedules.read_json(schedule)


@dataclass(frozen=True, eq=False)
class Result:
    """One producer's run on one instance (what :func:`solve` returns).

    ``row``: the result fields of ``docs/results.md`` (``status``, ``verified``, ``steps``,
    ``time_sync_s``, ...; ``extra`` holds the producer's own figures). ``schedule``: the
    verified schedule, or None when the producer gave none or it did not verify (``row``
    says why). ``instance``: what was solved.
    """

    row: dict[str, Any]
    schedule: schedules.Schedule | None
    instance: Instance

    @property
    def status(self) -> str:
        """collsynth's verdict: optimal, feasible, heuristic, constructed, skipped, error, ..."""
        return self.row["status"]

    @property
    def verified(self) -> bool:
        """True when the producer's schedule passed the verifier (only then is it priced)."""
        return bool(self.row["verified"])

    @property
    def bounds(self) -> dict[str, Any]:
        """The lower bounds reported beside the result (the row's ``lower_bound_*`` fields and
        ``bound_source``)."""
        return {k: v for k, v in self.row.items() if k.startswith("lower_bound") or k == "bound_source"}

    def __repr__(self) -> str:
        head = f"Result({self.row['producer']} on {self.row['instance']}: {self.status}"
        if not self.verified:
            return head + (f", {self.row['message']})" if self.row.get("message") else ")")
        return (head + f", {self.row['steps']} steps, sync {_seconds(self.row['time_sync_s'])}, "
                f"lower bound {_seconds(self.row['lower_bound_s'])})")


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g} s"


def solve(
    instance: Instance | str | Path,
    producer: str,
    *,
    solver: str | None = None,
    driver: str | None = None,
    time_limit: float = DEFAULT_TIME_LIMIT_S,
    gap: float | None = None,
    threads: int = 1,
    seed: int = 0,
    starts: int = 1,
    **params: Any,
) -> Result:
    """Run ``producer`` on ``instance`` (an Instance or a TOML file): produce, verify, price.

    The options are those of ``collsynth solve``: ``solver`` (for producers that use one,
    default highs; refused for those that do not), ``driver`` (default: the producer's
    first), ``time_limit`` (s), ``gap``, ``threads``, ``seed``, ``starts``; any other keyword
    is a producer parameter (``collsynth producers`` lists them), typed and checked. Unknown
    names raise :class:`~collsynth.InputError`; a producer that fails or does not support the
    instance gives a Result whose ``status`` and ``row["message"]`` say so.

    >>> from collsynth.instances import CORPUS
    >>> r = solve(CORPUS / "ring8-allgather.toml", "greedy", starts=2)
    >>> r.verified, r.row["steps"] >= r.bounds["lower_bound_steps"], len(r.schedule) == r.row["sends"]
    (True, True, True)
    >>> solve(CORPUS / "ring8-allgather.toml", "ring", solver="highs")
    Traceback (most recent call last):
    ...
    collsynth.InputError: solver: ring uses no solver
    """
    prod = get(producer, "producer")
    if solver is not None and not prod.uses_solver:
        raise InputError("solver", f"{prod.name} uses no solver")
    inst = _instance(instance)
    options = _options(solver=solver, driver=driver, time_limit=time_limit, gap=gap, threads=threads, seed=seed,
                       starts=starts, **params)
    row, schedule = run(inst, prod.name, options)
    return Result(row, schedule, inst)


def _options(solver: str | None = None, driver: str | None = None, time_limit: float = DEFAULT_TIME_LIMIT_S,
             gap: float | None = None, threads: int = 1, seed: int = 0, starts: int = 1, **params: Any) -> Options:
    """The run options of :func:`solve` and :func:`compare` (every other keyword is a parameter);
    :class:`~collsynth.solvers.producers.Options` checks them as it checks the command line's."""
    return Options(solver=solver or "highs", driver=driver, time_limit=time_limit, gap=gap, threads=threads,
                   seed=seed, starts=starts, params=params)


def compare(instance: Instance | str | Path, producers: Sequence[str] | str, **options: Any) -> pd.DataFrame:
    """One row per producer (in the order given) of :func:`solve`'s fields on one instance.

    ``producers`` is a list or ``"a,b,c"``; ``options`` are :func:`solve`'s (``solver``,
    ``driver``, ``time_limit``, ``gap``, ``threads``, ``seed``, ``starts`` and producer
    parameters). Options go only to the producers that take them
    (``solver`` to those that use one, ``driver`` to those that accept it, each parameter to
    those declaring it), as in a batch. The columns are the result fields of
    ``docs/results.md`` (``extra``, the producers' own figures, is left out).

    >>> from collsynth.instances import CORPUS
    >>> df = compare(CORPUS / "hypercube3-allgather.toml", "recursive-doubling,bfb-lp,greedy", starts=2)
    >>> list(df["producer"]), bool(df["verified"].all()), list(df["steps"])
    (['recursive-doubling', 'bfb-lp', 'greedy'], True, [3, 3, 3])
    """
    inst = _instance(instance)
    runs = comparison.compare(inst, comparison.split_names(producers, "producers"), _options(**options),
                              solver_given=options.get("solver") is not None)
    return pd.DataFrame([row for row, _ in runs], columns=list(schema.ROW_FIELDS))


def bench(
    suite: str | None = None,
    *,
    store: str | Path = result_store.DEFAULT_STORE,
    jobs: int | None = None,
    executor: str = "local",
    address: str | None = None,
    rerun: bool = False,
    progress: bool = False,
    **batch: Any,
) -> pd.DataFrame:
    """Run a batch as ``collsynth bench`` does and return its rows from the store.

    ``batch`` names what runs (each optional): the instances of ``suite`` or of the glob
    ``instances``, times ``producers`` x ``solvers`` x ``drivers`` x ``seeds`` (lists), with
    ``time_limit`` (s) and producer ``params`` (a dict), as
    :func:`collsynth.solvers.batch.plan_batch` takes them; what is not given comes from
    the suite's line in ``suites.toml``.
    Every finished run is committed to ``store`` at once and runs already stored are not
    repeated (``rerun=True`` repeats them). The result has one row per planned run (columns of
    :meth:`Store.runs`), including those stored before.
    """
    _, planned = runner.plan_batch(suite, **batch)
    if jobs is not None and jobs < 1:
        raise InputError("jobs", f"expected a positive integer, got {jobs}")
    if (Path(store) / "runs.sqlite").is_file():
        result_store.refuse_damaged(store)  # a damaged store gets no new rows
    runner.execute(planned, store, executor=executor, workers=jobs, address=address, rerun=rerun,
                   progress=progress)
    df = open_store(store).runs()
    keys = {job.key() for job in planned}
    mine = [result_store.run_key(row) in keys for row in df.to_dict("records")]
    return df[mine].reset_index(drop=True)


@dataclass(frozen=True)
class Store:
    """A results store folder (``runs.sqlite`` and ``schedules/``), read only."""

    path: Path

    def runs(self) -> pd.DataFrame:
        """Every stored run, one row each (the columns of ``docs/results.md`` plus ``id``)."""
        return result_store.load(self.path)

    def schedule(self, run: dict | pd.Series) -> schedules.Schedule | None:
        """The verified schedule of a stored run (a row of :meth:`runs`); None if it has none."""
        path = result_store.schedule_file(self.path, dict(run))
        return None if path is None else schedules.read_json(path)

    def __len__(self) -> int:
        return result_store.count(self.path)


def open_store(path: str | Path = result_store.DEFAULT_STORE) -> Store:
    """The results store at ``path`` (as written by ``collsynth bench`` or :func:`bench`).

    >>> from collsynth.instances import CORPUS
    >>> s = open_store(CORPUS.parent.parent / "results" / "quick-store")
    >>> df = s.runs()
    >>> len(df) == len(s) > 0, s.schedule(df[df["verified"]].iloc[0]) is not None
    (True, True)
    """
    path = Path(path)
    if not (path / "runs.sqlite").exists():
        raise InputError(str(path), "no results store here (no runs.sqlite); run collsynth bench first")
    return Store(path)


@dataclass(frozen=True)
class Verification:
    """What :func:`verify` found: ``ok`` (the schedule implements the instance's collective),
    the first ``violation`` (None when ok) and the schedule's counts (``sends``, ``steps``,
    ``chunks``, ``nodes``). True in a condition only when the schedule is valid."""

    ok: bool
    violation: verification.Violation | None
    sends: int
    steps: int
    chunks: int
    nodes: int

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        counts = f"{self.sends:,} sends in {self.steps} steps"
        return f"verified: {counts}" if self.ok else f"invalid ({counts}): {self.violation}"


def verify(schedule: schedules.Schedule | str | Path, instance: Instance | str | Path) -> Verification:
    """Check ``schedule`` on ``instance`` (objects or files) with
    :func:`collsynth.tens.verify.verify`: a :class:`Verification`, true only when the schedule
    implements the instance's collective, with the first violation otherwise.

    >>> from collsynth.instances import CORPUS
    >>> r = solve(CORPUS / "ring8-allgather.toml", "ring")
    >>> v = verify(r.schedule, r.instance)
    >>> bool(v), v.violation, v.steps, str(v)
    (True, None, 7, 'verified: 56 sends in 7 steps')
    """
    sched = _schedule(schedule)
    violation = verification.verify(sched, _instance(instance))
    return Verification(violation is None, violation, len(sched), int(sched.num_steps), int(sched.chunks),
                        int(sched.nodes))


def price(schedule: schedules.Schedule | str | Path, instance: Instance | str | Path, model: str = "sync",
          **options: Any) -> cost.Cost:
    """The cost of a verified schedule under ``model`` (a name of
    :data:`collsynth.tens.cost_models.MODELS`: ``sync``, ``ten``, ``event``, or the opt-in ``event-inorder``; see
    ``docs/cost-models.md``): ``total_s`` = ``T_L_s`` + ``T_B_s``. A schedule that does not
    verify raises :class:`~collsynth.tens.verify.VerificationError`.

    >>> from collsynth.instances import CORPUS
    >>> r = solve(CORPUS / "ring8-allgather.toml", "ring")
    >>> c = price(r.schedule, r.instance, "sync")
    >>> c.steps, c.total_s == r.row["time_sync_s"]
    (7, True)
    """
    sched, inst = _schedule(schedule), _instance(instance)
    verification.check(sched, inst)
    return cost_models.price(sched, inst, model, **options)


def export(schedule: schedules.Schedule | str | Path, instance: Instance | str | Path, format: str = "msccl-xml",
           path: str | Path | None = None, **options: Any) -> str:
    """A verified schedule as MSCCL XML or as an MSCCL++ execution plan (``mscclpp-json``),
    either read back by our own reader and verified before it is returned, or as schedule JSON; written to ``path``
    when given. ``options`` for MSCCL XML: ``name``, ``proto``, ``dialect``
    (:func:`collsynth.tens.export.to_msccl_xml`); for the plan: ``name``,
    ``min_message_size``, ``max_message_size``, ``max_threadblocks``
    (:func:`collsynth.tens.export_mscclpp.to_mscclpp_plan`). A schedule that does
    not verify raises :class:`~collsynth.tens.verify.VerificationError`.

    >>> from collsynth.instances import CORPUS
    >>> r = solve(CORPUS / "ring8-allgather.toml", "ring")
    >>> xml = export(r.schedule, r.instance, "msccl-xml")
    >>> xml.splitlines()[0].startswith('<algo name="collsynth"'), xml.count("<gpu ")
    (True, 8)
    """
    if format not in EXPORT_FORMATS:
        raise InputError("format", f"expected one of {', '.join(EXPORT_FORMATS)}, got {format!r}")
    sched, inst = _schedule(schedule), _instance(instance)
    if format == "msccl-xml":
        content = readback.verified_msccl_xml(sched, inst, **options)
    elif format == "mscclpp-json":
        content = readback.verified_mscclpp_plan(sched, inst, **options)
    else:
        verification.check(sched, inst)
        content = json.dumps(schedules.to_json(sched)) + "\n"
    if path is not None:
        try:
            with replaced_file(path) as staged:  # whole or not at all
                staged.write_text(content)
        except OSError as e:
            raise InputError(str(path), f"cannot write: {e.strerror}") from None
    return content
